/* ops_cpu.c - the llm_ops table of host-memory backends (ref, cpu): host loops on the
   activations, parallel with OpenMP. See ops.h. */
#include "ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model.h"   /* llm_log_softmax_at */

/* Parallel loops over locals `nt` (the backend's thread count) and `par` (whether the loop
   is worth a team: every parallel region ends in a barrier, and on a busy machine a barrier
   waits for descheduled threads, which costs more than a tiny loop; one-row decoding steps
   are all tiny loops). */
#define LLM_PAR_MIN_WORK 32768
#define LLM_QUERY_BLOCK 8         /* attention queries that share one pass over the keys */
#define LLM_VALUE_PIECE 64        /* output elements of a head summed over the keys at once */
/* LLM_WIDE_CLONES: a function built for AVX-512, AVX2 and the baseline, the widest the CPU
   runs picked at load time (GCC's target_clones, an ifunc: x86-64 glibc). For loops whose
   elements are independent, so that the vector width changes no result's bits (ISO C mode
   contracts no a * b + c into an FMA). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
#define LLM_WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LLM_WIDE_CLONES
#endif
/* LLM_SIMD: an inner loop without loop-carried dependences, vectorized even at -O2 (whose
   cheap cost model refuses loops that need alias checks). */
#ifdef _OPENMP
#define LLM_SIMD _Pragma("omp simd")
#define LLM_OMP_FOR _Pragma("omp parallel for schedule(static) num_threads(nt) if(par)")
#define LLM_OMP_FOR_DYNAMIC _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nt) if(par)")
static int llm__thread(void) { return omp_get_thread_num(); }
#else
#define LLM_SIMD
#define LLM_OMP_FOR (void)nt; (void)par;
#define LLM_OMP_FOR_DYNAMIC (void)nt; (void)par;
static int llm__thread(void) { return 0; }
#endif

struct llm_ops_state {
    llm_ops_desc d;
    llm_layout lay;               /* the batch in flight: host tables, not copied */
    float *attn_scratch;          /* per thread: keys transposed (head_dim x max_seq_len), a block of
                                     scores (LLM_QUERY_BLOCK x max_seq_len) and of queries */
    int64_t attn_stride;          /* floats of attn_scratch per thread */
};

static grzo_status cpu_create(const llm_ops_desc *d, llm_ops_state **out, char *err, size_t errlen) {
    llm_ops_state *os;
    int nt = d->n_threads > 0 ? d->n_threads : 1;
    *out = NULL;
    if (d->attention != LLM_ATTENTION_AUTO) {
        snprintf(err, errlen, "llm ops (cpu): the attention's fused and gemm forms are the CUDA ops'; the CPU takes auto");
        return GRZO_ERR_UNSUPPORTED;
    }
    os = (llm_ops_state *)calloc(1, sizeof *os);
    if (os) {
        os->d = *d;
        os->d.n_threads = nt;
        os->attn_stride = ((int64_t)d->head_dim + LLM_QUERY_BLOCK) * d->max_seq_len + (int64_t)LLM_QUERY_BLOCK * d->head_dim;
        os->attn_scratch = (float *)malloc((size_t)nt * (size_t)os->attn_stride * sizeof(float));
    }
    if (!os || !os->attn_scratch) {
        free(os);
        snprintf(err, errlen, "llm ops (cpu): out of host memory");
        return GRZO_ERR_OUT_OF_MEMORY;
    }
    *out = os;
    return GRZO_OK;
}

static void cpu_destroy(llm_ops_state *os) {
    if (!os) return;
    free(os->attn_scratch);
    free(os);
}

static grzo_status cpu_upload_layout(llm_ops_state *os, const llm_layout *host, int32_t *ids) {
    os->lay = *host;
    memcpy(ids, host->ids, (size_t)host->n_rows * sizeof(int32_t));
    return GRZO_OK;
}

/* sum of x_j^2 in double, in 8 interleaved partial sums: one running sum is a chain of dim
   dependent adds (576 of them a SmolLM2 row, 61 norms of 1160 rows a forward), eight are
   independent lanes the compiler vectorizes (a SmolLM2 forward's time outside the GEMMs,
   1 thread: 0.170-0.175 -> 0.157-0.158 s) */
static double cpu_sum_squares(const float *x, int32_t n) {
    double part[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int32_t j = 0, i;
    for (; j + 8 <= n; j += 8)
        for (i = 0; i < 8; i++) part[i] += (double)x[j + i] * x[j + i];
    for (i = 0; j < n; j++, i++) part[i] += (double)x[j] * x[j];
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

static grzo_status cpu_rms_normalize(llm_ops_state *os, const float *x, float *y, int64_t n_rows, int32_t dim, float eps) {
    int nt = os->d.n_threads;
    int64_t r;
    int par = n_rows * dim >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim, scale;
        int32_t j;
        scale = (float)(1.0 / sqrt(cpu_sum_squares(xr, dim) / dim + eps));
        LLM_SIMD
        for (j = 0; j < dim; j++) yr[j] = xr[j] * scale;
    }
    return GRZO_OK;
}

static grzo_status cpu_rope(llm_ops_state *os, float *t, int64_t n_rows, int32_t n_heads) {
    int nt = os->d.n_threads;
    int32_t head_dim = os->d.head_dim, half = head_dim / 2;
    int64_t r;
    int par = n_rows * n_heads * head_dim >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (r = 0; r < n_rows; r++) {
        int32_t p = os->lay.row_pos[r], h, i;
        const float *cs, *sn;
        if (p < 0) continue;
        cs = os->d.rope_cos + (size_t)p * half;
        sn = os->d.rope_sin + (size_t)p * half;
        for (h = 0; h < n_heads; h++) {
            float *v = t + (r * n_heads + h) * head_dim;
            for (i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cs[i] - b * sn[i];
                v[2 * i + 1] = a * sn[i] + b * cs[i];
            }
        }
    }
    return GRZO_OK;
}

/* Keys [base, base + n) of kv head g, transposed to kt[d * n + j]: the score loop then runs
   over contiguous keys, which the compiler vectorizes (a dot product per key would not be:
   its reduction order is fixed without -ffast-math). */
static void llm__transpose_keys(const float *k, int64_t base, int32_t n, int32_t kv_stride, int32_t g, int32_t hd,
                                float *kt) {
    int32_t j, d;
    for (j = 0; j < n; j++) {
        const float *kj = k + (base + j) * kv_stride + (int64_t)g * hd;
        for (d = 0; d < hd; d++) kt[(size_t)d * n + j] = kj[d];
    }
}

/* Where one head's attention reads and writes. Query i (row q_base + i) attends keys
   0 .. past + i (rows k_base + j of the key and value buffers). */
typedef struct llm__head_task {
    float *q;                     /* queries, replaced by the attention output */
    const float *v;
    const float *kt;              /* keys transposed: n_keys = past + n_queries columns */
    int64_t q_base, k_base;
    int32_t n_queries, past;
    int32_t q_stride, kv_stride, h, g, hd;
} llm__head_task;

/* Scores of a block of nb queries against the keys [0, n_keys): S[b][j] = q_b . k_j / sqrt(hd).
   Each key row kt[d] is read once for the whole block and the loop over keys is long and
   contiguous (keys past a query's own position are computed and then ignored). */
LLM_WIDE_CLONES static void llm__block_scores(const llm__head_task *t, int32_t i0, int32_t nb, int32_t n_keys, int32_t stride,
                                              float *S, float *qs) {
    float scale = 1.0f / sqrtf((float)t->hd);
    int32_t b, j, d, hd = t->hd, kt_cols = t->past + t->n_queries;
    for (b = 0; b < nb; b++) {
        const float *qi = t->q + (t->q_base + i0 + b) * t->q_stride + (int64_t)t->h * hd;
        for (d = 0; d < hd; d++) qs[b * hd + d] = qi[d] * scale;
        for (j = 0; j < n_keys; j++) S[(size_t)b * stride + j] = 0.0f;
    }
    for (d = 0; d < hd; d++) {
        const float *kd = t->kt + (size_t)d * kt_cols;
        for (b = 0; b < nb; b++) {
            float qd = qs[b * hd + d], *Sb = S + (size_t)b * stride;
            LLM_SIMD
            for (j = 0; j < n_keys; j++) Sb[j] += qd * kd[j];
        }
    }
}

/* softmax(scores[0..n)) V written over the query row qi */
LLM_WIDE_CLONES static void llm__softmax_values(const llm__head_task *t, float *scores, int32_t n, float *qi) {
    float mx = -INFINITY, sum = 0.0f, inv;
    int32_t j, d, d0, hd = t->hd;
    for (j = 0; j < n; j++)
        if (scores[j] > mx) mx = scores[j];
    for (j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    inv = 1.0f / sum;
    for (j = 0; j < n; j++) scores[j] *= inv;
    /* the output in pieces of LLM_VALUE_PIECE elements summed in a local array, which stays
       in registers across the keys (qi itself was stored and reloaded for every key: it may
       alias the values); each element's sum runs over the keys in order, as before */
    for (d0 = 0; d0 < hd; d0 += LLM_VALUE_PIECE) {
        float acc[LLM_VALUE_PIECE] = {0};
        int32_t w = hd - d0 < LLM_VALUE_PIECE ? hd - d0 : LLM_VALUE_PIECE;
        for (j = 0; j < n; j++) {
            const float *vj = t->v + (t->k_base + j) * t->kv_stride + (int64_t)t->g * hd + d0;
            float p = scores[j];
            if (w == LLM_VALUE_PIECE) {
                LLM_SIMD
                for (d = 0; d < LLM_VALUE_PIECE; d++) acc[d] += p * vj[d];
            } else {
                for (d = 0; d < w; d++) acc[d] += p * vj[d];
            }
        }
        for (d = 0; d < w; d++) qi[d0 + d] = acc[d];
    }
}

static void llm__attend_head(const llm__head_task *t, float *scores, float *qsave, int32_t stride) {
    int32_t i0, b;
    for (i0 = 0; i0 < t->n_queries; i0 += LLM_QUERY_BLOCK) {
        int32_t nb = t->n_queries - i0 < LLM_QUERY_BLOCK ? t->n_queries - i0 : LLM_QUERY_BLOCK;
        llm__block_scores(t, i0, nb, t->past + i0 + nb, stride, scores, qsave);
        for (b = 0; b < nb; b++)   /* causal: query i0 + b sees keys up to its own position */
            llm__softmax_values(t, scores + (size_t)b * stride, t->past + i0 + b + 1,
                                t->q + (t->q_base + i0 + b) * t->q_stride + (int64_t)t->h * t->hd);
    }
}

/* One task per (sequence, query head). */
static grzo_status cpu_attention(llm_ops_state *os, float *q, const float *keys, const float *values, int32_t past,
                                 int64_t n_rows) {
    const llm_ops_desc *c = &os->d;
    const llm_layout *lay = &os->lay;
    int nt = c->n_threads;
    int32_t hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    int64_t task, n_tasks = (int64_t)lay->n_seqs * c->n_heads;
    int par = n_rows * ((past > 0 ? past : 0) + n_rows / lay->n_seqs) * c->n_heads * hd >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR_DYNAMIC
    for (task = 0; task < n_tasks; task++) {
        int32_t sq = (int32_t)(task / c->n_heads), r;
        float *kt = os->attn_scratch + (size_t)llm__thread() * (size_t)os->attn_stride;
        float *scores = kt + (size_t)hd * c->max_seq_len;
        float *qsave = scores + (size_t)LLM_QUERY_BLOCK * c->max_seq_len;
        llm__head_task t;
        t.q = q;
        t.v = values;
        t.kt = kt;
        t.h = (int32_t)(task % c->n_heads);
        t.g = t.h / group;
        t.hd = hd;
        t.q_stride = c->n_heads * hd;
        t.kv_stride = c->n_kv_heads * hd;
        t.n_queries = lay->seq_len[sq] - lay->seq_pad[sq];
        t.q_base = lay->seq_row0[sq] + lay->seq_pad[sq];
        t.past = past > 0 ? past : 0;
        t.k_base = past >= 0 ? 0 : t.q_base;
        for (r = 0; r < lay->seq_pad[sq]; r++)
            memset(q + (lay->seq_row0[sq] + r) * t.q_stride + (int64_t)t.h * hd, 0, (size_t)hd * sizeof(float));
        llm__transpose_keys(keys, t.k_base, t.past + t.n_queries, t.kv_stride, t.g, hd, kt);
        llm__attend_head(&t, scores, qsave, c->max_seq_len);
    }
    return GRZO_OK;
}

/* SwiGLU's expf through glibc's vector math library (libmvec): GCC calls its 4-, 8- or
   16-wide expf for an `omp simd` loop when the declaration says that they exist, which
   <math.h> does only under -ffast-math. The clones pick the widest the CPU runs: 0.39 ns per
   element on one Zen 5 core instead of 1.76 for libm's scalar expf (7 % of a SmolLM2
   forward). Every element, the ragged end too, goes through one 16-element block of the same
   function, so an element's bits depend on its value alone, not on where the threads split
   the rows. libmvec's expf is not libm's: up to 5 ulp from silu's exact value here (libm's:
   4); its SSE2 build (x86-64 CPUs without AVX2) rounds some elements differently from its
   AVX2 and AVX-512 builds. Elsewhere (no GCC, glibc or OpenMP) the loop calls expf. */
#define LLM_SWIGLU_BLOCK 16
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    defined(_OPENMP) && !defined(__FAST_MATH__)
__attribute__((simd("notinbranch"))) float expf(float);
#define LLM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LLM_VECTOR_CLONES
#endif

/* h1 = silu(h1) * h3 over one block */
LLM_VECTOR_CLONES static void llm__swiglu_block(float *h1, const float *h3) {
    int i;
    LLM_SIMD
    for (i = 0; i < LLM_SWIGLU_BLOCK; i++) {
        float g = h1[i];
        h1[i] = g / (1.0f + expf(-g)) * h3[i];
    }
}

static grzo_status cpu_swiglu(llm_ops_state *os, float *h1, const float *h3, int64_t n) {
    int nt = os->d.n_threads;
    int64_t b, n_blocks = n / LLM_SWIGLU_BLOCK, rest = n % LLM_SWIGLU_BLOCK;
    int par = n >= LLM_PAR_MIN_WORK / 8;   /* expf makes each element dearer */
    LLM_OMP_FOR
    for (b = 0; b < n_blocks; b++) llm__swiglu_block(h1 + b * LLM_SWIGLU_BLOCK, h3 + b * LLM_SWIGLU_BLOCK);
    if (rest > 0) {   /* the end, padded to a block */
        float x[LLM_SWIGLU_BLOCK] = {0}, y[LLM_SWIGLU_BLOCK] = {0};
        memcpy(x, h1 + n - rest, (size_t)rest * sizeof(float));
        memcpy(y, h3 + n - rest, (size_t)rest * sizeof(float));
        llm__swiglu_block(x, y);
        memcpy(h1 + n - rest, x, (size_t)rest * sizeof(float));
    }
    return GRZO_OK;
}

static grzo_status cpu_add_into(llm_ops_state *os, float *x, const float *y, int64_t n) {
    int nt = os->d.n_threads;
    int64_t i;
    int par = n >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (i = 0; i < n; i++) x[i] += y[i];
    return GRZO_OK;
}

static grzo_status cpu_gather_rows(llm_ops_state *os, const float *x, float *y, int32_t dim) {
    int nt = os->d.n_threads;
    int64_t n = os->lay.n_out, i;
    int par = n * dim >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (i = 0; i < n; i++) memcpy(y + i * dim, x + os->lay.out_row[i] * dim, (size_t)dim * sizeof(float));
    return GRZO_OK;
}

static grzo_status cpu_cache_append(llm_ops_state *os, float *cache, int64_t first, const float *src, int64_t n) {
    (void)os;
    memcpy(cache + first, src, (size_t)n * sizeof(float));
    return GRZO_OK;
}

static grzo_status cpu_token_logprob(llm_ops_state *os, const float *logits, int32_t vocab, const int32_t *target,
                                     int64_t n, double *out) {
    int nt = os->d.n_threads;
    int64_t o;
    int par = n > 1;
    LLM_OMP_FOR
    for (o = 0; o < n; o++) out[o] = llm_log_softmax_at(logits + o * vocab, vocab, target[o]);
    return GRZO_OK;
}

static const char *cpu_last_error(const llm_ops_state *os) {
    (void)os;
    return "";
}

const llm_ops llm_ops_cpu = {
    "cpu", cpu_create, cpu_destroy, cpu_upload_layout, cpu_rms_normalize, cpu_rope, cpu_attention,
    cpu_swiglu, cpu_add_into, cpu_gather_rows, cpu_cache_append, cpu_token_logprob, cpu_last_error};
