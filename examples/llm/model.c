/* model.c - the Llama-family forward over grzo's operations (see model.h).

   Every weight goes through grzo (grzo_embedding, grzo_vector, grzo_linear); everything
   else (RMSNorm statistics, RoPE, attention, SwiGLU, residual adds, the head's row gather,
   the scoring log-softmax) goes through the model's op table (ops.h: host loops or CUDA
   kernels) on the state's buffers between those calls. That arithmetic is the same for
   every segment, so all perturbation lives in grzo, and outside a pass the forward is plain. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/grzo_cpu.h"
#ifdef LLM_HAVE_CUDA
#include "backends/grzo_cuda.h"
#endif
#include "llm_internal.h"
#include "ops.h"

struct llm_state {
    llm_state_desc cap;           /* resolved capacity */
    const grzo_backend *be;       /* owner of the backend buffers */
    const llm_ops *ops;           /* the model's op table */
    llm_ops_state *os;
    int32_t device;               /* backend memory is device memory (logits reach the host by download) */
    /* activations, backend memory: rows x width */
    int32_t *ids;                 /* max_rows token ids (grzo_embedding reads backend memory) */
    float *x;                     /* residual stream, dim */
    float *xn;                    /* RMS-normalized rows before the gain; also Wo / W2 outputs */
    float *xg;                    /* normalized rows times the gain: the input of the linears */
    float *q;                     /* queries, q_dim; attention overwrites them with its output */
    float *k, *v;                 /* kv_dim */
    float *h1, *h3;               /* SwiGLU gate and up, hidden_dim */
    float *head_in, *head_tmp;    /* max_outputs x dim: gathered rows for the output head */
    float *logits;                /* max_outputs x vocab, allocated on first use: scoring, generation,
                                     and llm_forward on a device (then downloaded) */
    /* host tables of the batch in flight (the ops get them in upload_layout) */
    float *rope_cos, *rope_sin;   /* max_seq_len x head_dim/2 */
    int32_t *h_ids;               /* max_rows */
    int64_t *seq_row0;            /* max_seqs: first row of each sequence */
    int32_t *seq_pad, *seq_len;   /* its padding and its token count */
    int32_t *row_pos;             /* position of each row, -1 for padding */
    int64_t *out_row;             /* row of each requested output */
    int64_t *tok_off, *out_off;   /* max_segments + 1: per-segment row offsets */
    /* llm_sequence_logprob */
    llm_seq *lp_seqs;
    int32_t *lp_pos;
    int32_t *lp_target;           /* the token each scored output predicts */
    double *lp_val;
    float *gen_logits;            /* generation on a device: the last logits, host (vocab floats) */
    /* llm_generate's key/value cache: n_layers x max_seq_len x kv_dim each, allocated on first use */
    float *cache_k, *cache_v;
    int32_t past;                 /* positions already in the cache for the forward in flight (-1: no cache) */
    llm_profile prof;
};

/* ---- errors ---------------------------------------------------------------------------- */
static grzo_status llm__fail(llm_model *m, grzo_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return s;
}

/* A grzo call failed: keep grzo's own explanation. */
static grzo_status llm__grzo_fail(llm_model *m, grzo_ctx *ctx, grzo_status s, const char *what) {
    return llm__fail(m, s, "%s: %s (%s)", what, grzo_status_str(s), grzo_last_error(ctx));
}

/* A backend call (an upload, a download) failed: keep the backend's explanation, which says
   what of the device failed (a CUDA error's name); the status alone does not. */
static grzo_status llm__backend_fail(llm_model *m, const grzo_backend *be, grzo_status s, const char *what) {
    return llm__fail(m, s, "%s: %s (%s)", what, grzo_status_str(s),
                     be->iface->last_error ? be->iface->last_error(be->self) : "no further detail");
}

/* An op of the table failed: keep its own explanation. */
static grzo_status llm__ops_fail(llm_model *m, llm_state *st, grzo_status s, const char *what) {
    return llm__fail(m, s, "llm: %s op %s: %s (%s)", st->ops->name, what, grzo_status_str(s), st->ops->last_error(st->os));
}

#define LLM_TRY(m, ctx, call, what)                                          \
    do {                                                                     \
        grzo_status s_ = (call);                                             \
        if (s_ != GRZO_OK) return llm__grzo_fail((m), (ctx), s_, (what));    \
    } while (0)

const char *llm_model_error(const llm_model *m) { return m ? m->err : "no model"; }

/* wall clock for the profile */
static double llm__now(void) {
#ifdef _OPENMP
    return omp_get_wtime();
#else
    return (double)clock() / CLOCKS_PER_SEC;   /* without OpenMP the process has one thread */
#endif
}

/* The grzo operations of the forward, timed into the state's profile. */
static grzo_status llm__linear(grzo_ctx *ctx, llm_model *m, llm_state *st, grzo_block w, const float *x, float *y,
                               const grzo_rows *rows, const char *what) {
    double t0 = llm__now();
    grzo_status s = grzo_linear(ctx, w, x, y, rows);
    st->prof.linear_s += llm__now() - t0;
    st->prof.n_linear++;
    return s == GRZO_OK ? GRZO_OK : llm__grzo_fail(m, ctx, s, what);
}

static grzo_status llm__gain(grzo_ctx *ctx, llm_model *m, llm_state *st, grzo_block g, const float *x, float *y,
                             const grzo_rows *rows, const char *what) {
    double t0 = llm__now();
    grzo_status s = grzo_vector(ctx, g, GRZO_VECTOR_MUL, x, y, rows);
    st->prof.vector_embedding_s += llm__now() - t0;
    return s == GRZO_OK ? GRZO_OK : llm__grzo_fail(m, ctx, s, what);
}

static grzo_status llm__embed(grzo_ctx *ctx, llm_model *m, llm_state *st, const grzo_rows *rows) {
    double t0 = llm__now();
    grzo_status s = grzo_embedding(ctx, m->tok_emb, st->ids, st->x, rows);
    st->prof.vector_embedding_s += llm__now() - t0;
    return s == GRZO_OK ? GRZO_OK : llm__grzo_fail(m, ctx, s, "llm: token_embd");
}

#define LLM_RET(call)                          \
    do {                                       \
        grzo_status s_ = (call);               \
        if (s_ != GRZO_OK) return s_;          \
    } while (0)

/* ---- registration ------------------------------------------------------------------------ */
static grzo_status llm__check_config(llm_model *m, const llm_config *c) {
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->head_dim <= 0 || c->vocab_size <= 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: config has a non-positive size");
    if (c->n_heads % c->n_kv_heads != 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: n_heads (%d) is not a multiple of n_kv_heads (%d)",
                         c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2 != 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: head_dim %d is odd (RoPE rotates pairs)", c->head_dim);
    if (!(c->norm_eps >= 0.0f) || !(c->rope_theta > 0.0f))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: bad norm_eps %g or rope_theta %g",
                         (double)c->norm_eps, (double)c->rope_theta);
    {
        double f0;   /* the rotary scaling settings, checked by the one function that uses them */
        llm_config one = *c;
        char err[200];
        one.head_dim = 2;
        if (llm_rope_inv_freq(&one, &f0, err, sizeof err) != 0)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: %s", err);
    }
    return GRZO_OK;
}

static grzo_status llm__check_weights(llm_model *m, const llm_config *c, const llm_weights *w) {
    int32_t l;
    if (!w->tok_emb || !w->layers || !w->final_norm || (!c->tied_output && !w->output))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: a weight tensor is missing");
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &w->layers[l];
        if (!L->attn_norm || !L->wq || !L->wk || !L->wv || !L->wo || !L->ffn_norm || !L->w1 || !L->w2 || !L->w3)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: layer %d misses a weight tensor", l);
    }
    return GRZO_OK;
}

/* One weight tensor of the model: its grzo block, where its values come from (host F32, or
   NULL with random init) and where they live (data: backend memory). */
typedef struct llm__tensor {
    grzo_block_kind kind;
    int64_t rows, cols;
    const float *src;
    void *data;
    int owned;                    /* data is a buffer of m->owned */
    char name[64];
    grzo_block *out;
} llm__tensor;

static void llm__plan(llm__tensor *t, grzo_block_kind kind, int64_t rows, int64_t cols, const float *src,
                      const char *name, grzo_block *out) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->rows = rows;
    t->cols = cols;
    t->src = src;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->out = out;
}

/* The model's tensors in registration order (see model.h); returns their count. */
static int32_t llm__plan_tensors(llm_model *m, const llm_weights *w, llm__tensor *t) {
    const llm_config *c = &m->cfg;
    int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    int32_t n = 0, l;
    char name[64];
#define LLM_SRC(field) (w ? (field) : NULL)
    llm__plan(&t[n++], GRZO_BLOCK_EMBEDDING, c->vocab_size, c->dim, LLM_SRC(w->tok_emb), "token_embd", &m->tok_emb);
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = w ? &w->layers[l] : NULL;
        llm_layer_blocks *B = &m->layers[l];
#define LLM_LAYER_TENSOR(kind, rows, cols, field, suffix, out)                              \
        snprintf(name, sizeof name, "blk.%d.%s", (int)l, suffix);                          \
        llm__plan(&t[n++], kind, rows, cols, L ? L->field : NULL, name, out)
        LLM_LAYER_TENSOR(GRZO_BLOCK_VECTOR, c->dim, 1, attn_norm, "attn_norm", &B->attn_norm);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, q_dim, c->dim, wq, "attn_q", &B->wq);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, kv_dim, c->dim, wk, "attn_k", &B->wk);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, kv_dim, c->dim, wv, "attn_v", &B->wv);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, c->dim, q_dim, wo, "attn_output", &B->wo);
        LLM_LAYER_TENSOR(GRZO_BLOCK_VECTOR, c->dim, 1, ffn_norm, "ffn_norm", &B->ffn_norm);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, c->hidden_dim, c->dim, w1, "ffn_gate", &B->w1);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, c->dim, c->hidden_dim, w2, "ffn_down", &B->w2);
        LLM_LAYER_TENSOR(GRZO_BLOCK_MATRIX, c->hidden_dim, c->dim, w3, "ffn_up", &B->w3);
#undef LLM_LAYER_TENSOR
    }
    llm__plan(&t[n++], GRZO_BLOCK_VECTOR, c->dim, 1, LLM_SRC(w->final_norm), "output_norm", &m->final_norm);
    if (!c->tied_output)   /* tied: m->output = m->tok_emb, one block, one perturbation, one update */
        llm__plan(&t[n++], GRZO_BLOCK_MATRIX, c->vocab_size, c->dim, LLM_SRC(w->output), "output", &m->output);
#undef LLM_SRC
    return n;
}

/* Which op table runs the forward's non-perturbed arithmetic on this backend. */
static grzo_status llm__pick_ops(llm_model *m, const grzo_backend *be, const grzo_backend_caps *caps) {
    if (!caps->device_memory) {
        m->ops = &llm_ops_cpu;
        return GRZO_OK;
    }
#ifdef LLM_HAVE_CUDA
    if (strcmp(be->iface->name, "cuda") == 0) {
        m->ops = &llm_ops_cuda;
        return GRZO_OK;
    }
#endif
    return llm__fail(m, GRZO_ERR_UNSUPPORTED, "llm: backend '%s' keeps device memory and this build has no ops for it "
                     "(the llm library has CUDA ops only when built with CUDA)", be->iface->name);
}

static grzo_status llm__query_backend(grzo_ctx *ctx, llm_model *m, const grzo_backend **be, grzo_backend_caps *caps) {
    grzo_desc d;
    LLM_TRY(m, ctx, grzo_get_desc(ctx, &d), "llm: grzo_get_desc");
    LLM_TRY(m, ctx, grzo_backend_query(d.backend, caps), "llm: grzo_backend_query");
    *be = d.backend;
    return GRZO_OK;
}

static size_t llm__dtype_bytes(grzo_dtype t) { return t == GRZO_DTYPE_BF16 || t == GRZO_DTYPE_F16 ? 2u : 4u; }

/* Upload n host floats to dst converted to dtype, through a bounded host buffer. */
static grzo_status llm__upload_converted(llm_model *m, const float *src, int64_t n, grzo_dtype dtype, void *dst) {
    enum { CHUNK = 1 << 20 };
    uint16_t *buf;
    int64_t i0, i;
    if (dtype == GRZO_DTYPE_F32) {
        grzo_status s = grzo_backend_upload(m->be, dst, src, (size_t)n * sizeof(float));
        return s == GRZO_OK ? GRZO_OK : llm__backend_fail(m, m->be, s, "llm_model_register: cannot upload the weights");
    }
    buf = (uint16_t *)malloc((size_t)CHUNK * sizeof(uint16_t));
    if (!buf) return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_model_register: out of host memory");
    for (i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t c = n - i0 < CHUNK ? n - i0 : CHUNK;
        grzo_status s;
        for (i = 0; i < c; i++) buf[i] = dtype == GRZO_DTYPE_BF16 ? llm__f32_to_bf16(src[i0 + i]) : llm__f32_to_f16(src[i0 + i]);
        s = grzo_backend_upload(m->be, (uint16_t *)dst + i0, buf, (size_t)c * sizeof(uint16_t));
        if (s != GRZO_OK) {
            free(buf);
            return llm__backend_fail(m, m->be, s, "llm_model_register: cannot upload the weights");
        }
    }
    free(buf);
    return GRZO_OK;
}

/* Random init of tensor t (block index `index`) through the backend's perturbed_copy:
   out = zero + 0.02 z, z the Gaussian base noise of (seed, step 0, index). Gains are 1. */
static grzo_status llm__random_fill(llm_model *m, const llm__tensor *t, uint32_t index, uint64_t seed, void *zero) {
    grzo_copy_args a;
    grzo_status s;
    if (t->kind == GRZO_BLOCK_VECTOR) {
        float *ones = (float *)malloc((size_t)t->rows * sizeof(float));
        int64_t i;
        if (!ones) return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_model_register: out of host memory");
        for (i = 0; i < t->rows; i++) ones[i] = 1.0f;
        s = llm__upload_converted(m, ones, t->rows, m->dtype, t->data);
        free(ones);
        return s;
    }
    memset(&a, 0, sizeof a);
    a.p.data = zero;
    a.p.kind = t->kind;
    a.p.dtype = m->dtype;
    a.p.rows = t->rows;
    a.p.cols = t->cols;
    a.base.seed = seed;
    a.base.block = index;
    a.base.stream = GRZO_STREAM_BASE;
    a.base.dist = GRZO_NOISE_GAUSSIAN;
    a.scale = 0.02f;
    a.out = t->data;
    s = m->be->iface->perturbed_copy(m->be->self, &a);
    if (s != GRZO_OK)
        return llm__fail(m, s, "llm_model_register: random init of %s failed (%s)", t->name,
                         m->be->iface->last_error ? m->be->iface->last_error(m->be->self) : "");
    return GRZO_OK;
}

static grzo_status llm__alloc_owned(llm_model *m, size_t bytes, void **out) {
    grzo_status s = grzo_backend_alloc(m->be, bytes, out);
    if (s != GRZO_OK)
        return llm__fail(m, s, "llm_model_register: cannot allocate %.1f MiB of %s memory for the weights (%s)",
                         (double)bytes / 1048576.0, m->be->iface->name, grzo_status_str(s));
    m->owned[m->n_owned++] = *out;
    return GRZO_OK;
}

/* Put every tensor's values where its block will read them: in place (host F32 weights on a
   host backend) or in a backend buffer of the model, converted or randomly initialized. */
static grzo_status llm__place_tensors(llm_model *m, llm__tensor *t, int32_t n, int in_place, uint64_t seed) {
    void *zero = NULL;
    size_t largest = 0;
    grzo_status s = GRZO_OK;
    int32_t i;
    if (in_place) {
        for (i = 0; i < n; i++) t[i].data = (void *)t[i].src;
        return GRZO_OK;
    }
    for (i = 0; i < n && s == GRZO_OK; i++) {
        size_t bytes = (size_t)t[i].rows * (size_t)t[i].cols * llm__dtype_bytes(m->dtype);
        if (bytes > largest) largest = bytes;
        s = llm__alloc_owned(m, bytes, &t[i].data);
        t[i].owned = 1;
    }
    if (s == GRZO_OK && seed) s = llm__alloc_owned(m, largest, &zero);   /* the zero source of the random init */
    for (i = 0; i < n && s == GRZO_OK; i++)
        s = seed ? llm__random_fill(m, &t[i], (uint32_t)i, seed, zero)
                 : llm__upload_converted(m, t[i].src, t[i].rows * t[i].cols, m->dtype, t[i].data);
    if (zero) {   /* the last owned buffer: give it back now */
        /* the random fills are queued on the device: this wait is where one of them (or the
           device) fails, and the caller reads llm_model_error, so it must say so */
        if (s == GRZO_OK && m->be->iface->synchronize && (s = m->be->iface->synchronize(m->be->self)) != GRZO_OK)
            llm__fail(m, s, "llm_model_register: the random init failed on the device (%s)",
                      m->be->iface->last_error ? m->be->iface->last_error(m->be->self) : grzo_status_str(s));
        grzo_backend_free(m->be, zero);
        m->n_owned--;
    }
    return s;
}

static grzo_status llm__check_dtype(llm_model *m, const grzo_backend_caps *caps, grzo_dtype dtype) {
    if (dtype < GRZO_DTYPE_DEFAULT || dtype >= GRZO_DTYPE_COUNT)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: unknown dtype %d", (int)dtype);
    if (!(caps->dtypes & (1u << dtype)))
        return llm__fail(m, GRZO_ERR_UNSUPPORTED, "llm_model_register: backend '%s' does not store %s weights (use f32%s)",
                         m->be->iface->name, dtype == GRZO_DTYPE_BF16 ? "bf16" : "f16",
                         caps->device_memory ? "" : ", or a CUDA backend for 16-bit weights");
    return GRZO_OK;
}

void llm_model_free(llm_model *m) {
    int32_t i;
    if (!m) return;
    for (i = 0; i < m->n_owned; i++) grzo_backend_free(m->be, m->owned[i]);
    free(m->owned);
    free(m->layers);
    m->owned = NULL;
    m->n_owned = 0;
    m->layers = NULL;
}

grzo_status llm_model_register_ex(grzo_ctx *ctx, llm_model *m, const llm_config *cfg, llm_weights *w,
                                  const llm_model_desc *desc) {
    grzo_backend_caps caps;
    llm__tensor *t = NULL;
    uint64_t seed = desc ? desc->random_init_seed : 0;
    grzo_status s;
    int32_t n = 0, i;
    if (!m) return GRZO_ERR_INVALID_ARG;
    memset(m, 0, sizeof *m);
    if (!ctx || !cfg || (!w && !seed))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: ctx, cfg and w (or a random init seed) are required");
    if ((s = llm__check_config(m, cfg)) != GRZO_OK) return s;
    if (w && (s = llm__check_weights(m, cfg, w)) != GRZO_OK) return s;
    if ((s = llm__query_backend(ctx, m, &m->be, &caps)) != GRZO_OK) return s;
    m->dtype = desc && desc->dtype != GRZO_DTYPE_DEFAULT ? desc->dtype : GRZO_DTYPE_F32;
    if ((s = llm__check_dtype(m, &caps, m->dtype)) != GRZO_OK) return s;
    if ((s = llm__pick_ops(m, m->be, &caps)) != GRZO_OK) return s;
    m->cfg = *cfg;
    m->layers = (llm_layer_blocks *)calloc((size_t)cfg->n_layers, sizeof *m->layers);
    t = (llm__tensor *)malloc(((size_t)cfg->n_layers * 9 + 3) * sizeof *t);
    m->owned = (void **)malloc(((size_t)cfg->n_layers * 9 + 4) * sizeof *m->owned);
    if (!m->layers || !t || !m->owned) s = llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_model_register: out of memory");
    if (s == GRZO_OK) {
        int in_place = !caps.device_memory && m->dtype == GRZO_DTYPE_F32 && !seed;
        n = llm__plan_tensors(m, seed ? NULL : w, t);
        s = llm__place_tensors(m, t, n, in_place, seed);
        m->w = in_place ? w : NULL;
    }
    for (i = 0; i < n && s == GRZO_OK; i++) {
        grzo_block_desc d;
        memset(&d, 0, sizeof d);
        d.kind = t[i].kind;
        d.rows = t[i].rows;
        d.cols = t[i].cols;
        d.data = t[i].data;
        d.dtype = m->dtype;
        d.name = t[i].name;
        s = grzo_block_add(ctx, &d, t[i].out);
        if (s != GRZO_OK) llm__grzo_fail(m, ctx, s, t[i].name);
    }
    if (s == GRZO_OK && cfg->tied_output) m->output = m->tok_emb;
    free(t);
    if (s != GRZO_OK) llm_model_free(m);
    return s;
}

grzo_status llm_model_register(grzo_ctx *ctx, llm_model *m, const llm_config *cfg, llm_weights *w) {
    return llm_model_register_ex(ctx, m, cfg, w, NULL);
}

/* ---- backends by name ---------------------------------------------------------------------- */
grzo_status llm_backend_create(const char *device, int32_t n_threads, grzo_dtype weights, grzo_backend *out, char *err,
                               size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out || !device) {
        if (err) snprintf(err, errlen, "llm_backend_create: device and out are required");
        return GRZO_ERR_INVALID_ARG;
    }
    if ((int)weights < (int)GRZO_DTYPE_DEFAULT || (int)weights >= (int)GRZO_DTYPE_COUNT) {
        if (err) snprintf(err, errlen, "llm_backend_create: unknown weight dtype %d", (int)weights);
        return GRZO_ERR_INVALID_ARG;
    }
    if (strcmp(device, "cpu") == 0) {
        grzo_cpu_desc d;
        grzo_status s;
        memset(&d, 0, sizeof d);
        d.n_threads = n_threads;
        s = grzo_backend_cpu_create(&d, out);
        if (s != GRZO_OK && err) snprintf(err, errlen, "cannot create the CPU backend (%s)", grzo_status_str(s));
        return s;
    }
    if (strcmp(device, "cuda") == 0) {
#ifdef LLM_HAVE_CUDA
        grzo_cuda_desc cd;
        grzo_status s;
        char why[256];
        if (grzo_cuda_device_count() == 0) {
            if (err) snprintf(err, errlen, "device cuda: no CUDA device is available (no GPU or no driver)");
            return GRZO_ERR_BACKEND;
        }
        memset(&cd, 0, sizeof cd);
        cd.math = (weights == GRZO_DTYPE_BF16 || weights == GRZO_DTYPE_F16) ? GRZO_CUDA_MATH_FAST : GRZO_CUDA_MATH_PEDANTIC;
        cd.error = why;
        cd.error_size = sizeof why;
        why[0] = '\0';
        s = grzo_backend_cuda_create(&cd, out);
        if (s != GRZO_OK && err)
            snprintf(err, errlen, "device cuda: the CUDA backend failed to start (%s: %s)", grzo_status_str(s),
                     why[0] ? why : "no detail");
        return s;
#else
        (void)weights;
        if (err) snprintf(err, errlen, "device cuda: this build has no CUDA backend (configure with -Dcuda=enabled)");
        return GRZO_ERR_UNSUPPORTED;
#endif
    }
    if (err) snprintf(err, errlen, "unknown device '%s' (expected cpu or cuda)", device);
    return GRZO_ERR_INVALID_ARG;
}

/* ---- state --------------------------------------------------------------------------------- */
static void llm__state_release(llm_state *st) {
    void **dev[] = {(void **)&st->ids, (void **)&st->x, (void **)&st->xn, (void **)&st->xg, (void **)&st->q,
                    (void **)&st->k, (void **)&st->v, (void **)&st->h1, (void **)&st->h3, (void **)&st->head_in,
                    (void **)&st->head_tmp, (void **)&st->logits,
                    (void **)&st->cache_k, (void **)&st->cache_v};
    size_t i;
    for (i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (*dev[i]) grzo_backend_free(st->be, *dev[i]);
    if (st->os) st->ops->destroy(st->os);
    free(st->rope_cos);
    free(st->rope_sin);
    free(st->h_ids);
    free(st->seq_row0);
    free(st->seq_pad);
    free(st->seq_len);
    free(st->row_pos);
    free(st->out_row);
    free(st->tok_off);
    free(st->out_off);
    free(st->lp_seqs);
    free(st->lp_pos);
    free(st->lp_target);
    free(st->lp_val);
    free(st->gen_logits);
    free(st);
}

void llm_state_free(llm_state *st) {
    if (st) llm__state_release(st);
}

/* count x width elements of elem bytes, or 0 on overflow (counts are checked positive) */
static size_t llm__bytes(int64_t count, int64_t width, size_t elem) {
    double approx = (double)count * (double)width * (double)elem;
    if (approx > (double)((size_t)-1 / 2)) return 0;
    return (size_t)count * (size_t)width * elem;
}

static grzo_status llm__backend_buffer(llm_model *m, llm_state *st, int64_t count, int64_t width, size_t elem, void **out) {
    size_t bytes = llm__bytes(count, width, elem);
    grzo_status s;
    if (bytes == 0) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: buffer size overflows");
    s = grzo_backend_alloc(st->be, bytes, out);
    if (s != GRZO_OK)
        return llm__fail(m, s, "llm: cannot allocate %.1f MiB of %s backend memory (%s)", (double)bytes / 1048576.0,
                         st->be->iface->name, grzo_status_str(s));
    return GRZO_OK;
}

/* cos/sin of pos * inv_freq[i], computed in double (float angles drift at large positions).
   The frequencies come from llm_rope_inv_freq (the rotary scaling included); the CUDA ops
   upload these same tables, so both backends rotate by the same angles. */
static grzo_status llm__fill_rope(llm_model *m, const llm_config *c, int32_t max_pos, float *cos_t, float *sin_t) {
    int32_t half = c->head_dim / 2, p, i;
    double *inv = (double *)malloc((size_t)half * sizeof(double));
    char err[200];
    if (!inv) return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_state_create: out of host memory");
    if (llm_rope_inv_freq(c, inv, err, sizeof err) != 0) {
        free(inv);
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: %s", err);
    }
    for (i = 0; i < half; i++) {
        for (p = 0; p < max_pos; p++) {
            double a = (double)p * inv[i];
            cos_t[(size_t)p * half + i] = (float)cos(a);
            sin_t[(size_t)p * half + i] = (float)sin(a);
        }
    }
    free(inv);
    return GRZO_OK;
}

static grzo_status llm__resolve_capacity(llm_model *m, const llm_state_desc *d, llm_state_desc *cap) {
    *cap = *d;
    if (cap->max_seq_len == 0) cap->max_seq_len = m->cfg.max_seq_len;
    if (cap->max_segments == 0) cap->max_segments = cap->max_seqs;
    if (cap->max_rows <= 0 || cap->max_seqs <= 0 || cap->max_outputs < 0 || cap->max_seq_len <= 0 ||
        cap->max_segments <= 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: capacities must be positive (rows %lld, seqs %d, "
                         "seq_len %d, segments %lld)", (long long)cap->max_rows, cap->max_seqs, cap->max_seq_len,
                         (long long)cap->max_segments);
    if (cap->max_rows > INT32_MAX || cap->max_outputs > INT32_MAX || cap->max_segments > INT32_MAX)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: capacities must be below 2^31 (rows %lld, outputs %lld, "
                         "segments %lld)", (long long)cap->max_rows, (long long)cap->max_outputs, (long long)cap->max_segments);
    if (cap->attention < LLM_ATTENTION_AUTO || cap->attention > LLM_ATTENTION_GEMM)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: attention %d is none of auto, fused, gemm",
                         (int)cap->attention);
    if (cap->max_outputs == 0) cap->max_outputs = 1;
    return GRZO_OK;
}

static grzo_status llm__alloc_activations(llm_model *m, llm_state *st) {
    const llm_config *c = &m->cfg;
    int64_t R = st->cap.max_rows, O = st->cap.max_outputs;
    int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    struct { void **p; int64_t count, width; size_t elem; } b[11];
    int i;
    b[0].p = (void **)&st->ids;      b[0].count = R; b[0].width = 1;             b[0].elem = sizeof(int32_t);
    b[1].p = (void **)&st->x;        b[1].count = R; b[1].width = c->dim;        b[1].elem = sizeof(float);
    b[2].p = (void **)&st->xn;       b[2].count = R; b[2].width = c->dim;        b[2].elem = sizeof(float);
    b[3].p = (void **)&st->xg;       b[3].count = R; b[3].width = c->dim;        b[3].elem = sizeof(float);
    b[4].p = (void **)&st->q;        b[4].count = R; b[4].width = q_dim;         b[4].elem = sizeof(float);
    b[5].p = (void **)&st->k;        b[5].count = R; b[5].width = kv_dim;        b[5].elem = sizeof(float);
    b[6].p = (void **)&st->v;        b[6].count = R; b[6].width = kv_dim;        b[6].elem = sizeof(float);
    b[7].p = (void **)&st->h1;       b[7].count = R; b[7].width = c->hidden_dim; b[7].elem = sizeof(float);
    b[8].p = (void **)&st->h3;       b[8].count = R; b[8].width = c->hidden_dim; b[8].elem = sizeof(float);
    b[9].p = (void **)&st->head_in;  b[9].count = O; b[9].width = c->dim;        b[9].elem = sizeof(float);
    b[10].p = (void **)&st->head_tmp; b[10].count = O; b[10].width = c->dim;     b[10].elem = sizeof(float);
    for (i = 0; i < 11; i++) {
        grzo_status s = llm__backend_buffer(m, st, b[i].count, b[i].width, b[i].elem, b[i].p);
        if (s != GRZO_OK) return s;
    }
    return GRZO_OK;
}

/* malloc of count x width elements; NULL, with *overflow set, where the size overflows (never
   malloc(0), whose non-NULL result would pass for a table) */
static void *llm__host_table(int64_t count, int64_t width, size_t elem, int *overflow) {
    size_t bytes = llm__bytes(count, width, elem);
    if (bytes == 0) { *overflow = 1; return NULL; }
    return malloc(bytes);
}

static grzo_status llm__alloc_host_tables(llm_model *m, llm_state *st) {
    const llm_config *c = &m->cfg;
    int64_t R = st->cap.max_rows, O = st->cap.max_outputs, S = st->cap.max_segments, L = st->cap.max_seq_len;
    int64_t Q = st->cap.max_seqs;
    int overflow = 0;
    st->rope_cos = (float *)llm__host_table(L, c->head_dim / 2, sizeof(float), &overflow);
    st->rope_sin = (float *)llm__host_table(L, c->head_dim / 2, sizeof(float), &overflow);
    st->h_ids = (int32_t *)llm__host_table(R, 1, sizeof(int32_t), &overflow);
    st->seq_row0 = (int64_t *)llm__host_table(Q, 1, sizeof(int64_t), &overflow);
    st->seq_pad = (int32_t *)llm__host_table(Q, 1, sizeof(int32_t), &overflow);
    st->seq_len = (int32_t *)llm__host_table(Q, 1, sizeof(int32_t), &overflow);
    st->row_pos = (int32_t *)llm__host_table(R, 1, sizeof(int32_t), &overflow);
    st->out_row = (int64_t *)llm__host_table(O, 1, sizeof(int64_t), &overflow);
    st->tok_off = (int64_t *)llm__host_table(S + 1, 1, sizeof(int64_t), &overflow);
    st->out_off = (int64_t *)llm__host_table(S + 1, 1, sizeof(int64_t), &overflow);
    st->lp_seqs = (llm_seq *)llm__host_table(Q, 1, sizeof(llm_seq), &overflow);
    st->lp_pos = (int32_t *)llm__host_table(O, 1, sizeof(int32_t), &overflow);
    st->lp_target = (int32_t *)llm__host_table(O, 1, sizeof(int32_t), &overflow);
    st->lp_val = (double *)llm__host_table(O, 1, sizeof(double), &overflow);
    if (overflow) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: a host table's size overflows");
    if (!st->rope_cos || !st->rope_sin || !st->h_ids || !st->seq_row0 || !st->seq_pad || !st->seq_len || !st->row_pos ||
        !st->out_row || !st->tok_off || !st->out_off || !st->lp_seqs || !st->lp_pos || !st->lp_target || !st->lp_val)
        return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_state_create: out of host memory");
    return llm__fill_rope(m, c, st->cap.max_seq_len, st->rope_cos, st->rope_sin);
}

static grzo_status llm__logits_buffer(llm_model *m, llm_state *st);

static grzo_status llm__create_ops(llm_model *m, llm_state *st, int32_t n_threads) {
    const llm_config *c = &m->cfg;
    llm_ops_desc d;
    char err[256];
    grzo_status s;
    memset(&d, 0, sizeof d);
    d.be = st->be;
    d.n_threads = n_threads;
    d.n_heads = c->n_heads;
    d.n_kv_heads = c->n_kv_heads;
    d.head_dim = c->head_dim;
    d.max_rows = st->cap.max_rows;
    d.max_outputs = st->cap.max_outputs;
    d.max_seqs = st->cap.max_seqs;
    d.max_seq_len = st->cap.max_seq_len;
    d.rope_cos = st->rope_cos;
    d.rope_sin = st->rope_sin;
    d.attention = st->cap.attention;
    err[0] = '\0';
    s = st->ops->create(&d, &st->os, err, sizeof err);
    return s == GRZO_OK ? GRZO_OK : llm__fail(m, s, "llm_state_create: %s", err);
}

grzo_status llm_state_create(grzo_ctx *ctx, llm_model *m, const llm_state_desc *desc, llm_state **out) {
    grzo_backend_caps caps;
    llm_state *st;
    grzo_status s;
    if (out) *out = NULL;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (!ctx || !desc || !out || !m->layers) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: ctx, a registered model, desc and out are required");
    st = (llm_state *)calloc(1, sizeof *st);
    if (!st) return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_state_create: out of memory");
    s = llm__query_backend(ctx, m, &st->be, &caps);
    if (s == GRZO_OK && st->be != m->be)
        s = llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: ctx is not the context the model was registered with");
    st->ops = m->ops;
    st->device = caps.device_memory;
    if (s == GRZO_OK) s = llm__resolve_capacity(m, desc, &st->cap);
    if (s == GRZO_OK) s = llm__alloc_activations(m, st);
    if (s == GRZO_OK) s = llm__alloc_host_tables(m, st);
    if (s == GRZO_OK) s = llm__create_ops(m, st, caps.n_threads > 0 ? caps.n_threads : 1);
    /* on a device every forward's logits land in the state's buffer first: allocate it now,
       not inside the first forward */
    if (s == GRZO_OK && st->device) s = llm__logits_buffer(m, st);
    st->past = -1;
    if (s != GRZO_OK) {
        if (st->be) llm__state_release(st); else free(st);
        return s;
    }
    *out = st;
    return GRZO_OK;
}

/* ---- batch layout ---------------------------------------------------------------------------- */
static grzo_status llm__check_seq(llm_model *m, const llm_state *st, const llm_seq *q, int32_t i) {
    int32_t t;
    if (!q->tokens || q->n_tokens <= 0 || q->n_pad < 0 || q->n_pad >= q->n_tokens || q->n_out < 0 ||
        (q->n_out > 0 && !q->out_pos))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d: bad tokens/n_tokens %d/n_pad %d/out_pos", i,
                         q->n_tokens, q->n_pad);
    if (q->n_tokens - q->n_pad > st->cap.max_seq_len)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d has %d tokens, the state holds positions up to %d", i,
                         q->n_tokens - q->n_pad, st->cap.max_seq_len);
    for (t = 0; t < q->n_tokens; t++)
        if (q->tokens[t] < 0 || q->tokens[t] >= m->cfg.vocab_size)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d token %d is %d, outside [0, %d)", i, t,
                             q->tokens[t], m->cfg.vocab_size);
    for (t = 0; t < q->n_out; t++)
        if (q->out_pos[t] < q->n_pad || q->out_pos[t] >= q->n_tokens)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d requests position %d outside [%d, %d)", i,
                             q->out_pos[t], q->n_pad, q->n_tokens);
    return GRZO_OK;
}

/* Check the batch against the state and count its rows and outputs. */
static grzo_status llm__check_batch(llm_model *m, const llm_state *st, const llm_batch *b, int64_t *n_rows, int64_t *n_out) {
    int64_t rows = 0, outs = 0, prev_seg = 0;
    int32_t i;
    if (b->n_seqs < 0 || (b->n_seqs > 0 && !b->seqs) || b->n_segments < 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: bad batch (n_seqs %d, n_segments %lld)", b->n_seqs,
                         (long long)b->n_segments);
    if (b->n_seqs > st->cap.max_seqs || b->n_segments > st->cap.max_segments)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: %d sequences / %lld segments exceed the state (%d / %lld)",
                         b->n_seqs, (long long)b->n_segments, st->cap.max_seqs, (long long)st->cap.max_segments);
    for (i = 0; i < b->n_seqs; i++) {
        const llm_seq *q = &b->seqs[i];
        grzo_status s = llm__check_seq(m, st, q, i);
        if (s != GRZO_OK) return s;
        if (b->n_segments > 0) {
            if (q->segment < prev_seg || q->segment >= b->n_segments)
                return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d has segment %lld: segments must be in "
                                 "[0, %lld) and non-decreasing over the batch", i, (long long)q->segment,
                                 (long long)b->n_segments);
            prev_seg = q->segment;
        }
        rows += q->n_tokens;
        outs += q->n_out;
    }
    if (rows > st->cap.max_rows || outs > st->cap.max_outputs)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: %lld rows / %lld outputs exceed the state (%lld / %lld)",
                         (long long)rows, (long long)outs, (long long)st->cap.max_rows, (long long)st->cap.max_outputs);
    *n_rows = rows;
    *n_out = outs;
    return GRZO_OK;
}

/* Rows of the packed batch: token ids, positions, attention ranges, output rows, and the
   per-segment row offsets of the token rows and of the gathered output rows. */
static grzo_status llm__layout(llm_model *m, llm_state *st, const llm_batch *b, int64_t n_rows, int64_t n_out) {
    llm_layout lay;
    int64_t row = 0, out = 0, seg = 0;
    int32_t i, t;
    grzo_status s;
    st->tok_off[0] = 0;
    st->out_off[0] = 0;
    for (i = 0; i < b->n_seqs; i++) {
        const llm_seq *q = &b->seqs[i];
        /* close the segments before this sequence's: they end where it starts */
        for (; b->n_segments > 0 && seg < q->segment; seg++) {
            st->tok_off[seg + 1] = row;
            st->out_off[seg + 1] = out;
        }
        st->seq_row0[i] = row;
        st->seq_pad[i] = q->n_pad;
        st->seq_len[i] = q->n_tokens;
        for (t = 0; t < q->n_tokens; t++) {
            st->h_ids[row + t] = q->tokens[t];
            st->row_pos[row + t] = t < q->n_pad ? -1 : t - q->n_pad + (st->past > 0 ? st->past : 0);
        }
        for (t = 0; t < q->n_out; t++) st->out_row[out++] = row + q->out_pos[t];
        row += q->n_tokens;
    }
    for (; seg < b->n_segments; seg++) {
        st->tok_off[seg + 1] = row;
        st->out_off[seg + 1] = out;
    }
    lay.n_seqs = b->n_seqs;
    lay.n_rows = n_rows;
    lay.n_out = n_out;
    lay.ids = st->h_ids;
    lay.seq_row0 = st->seq_row0;
    lay.seq_pad = st->seq_pad;
    lay.seq_len = st->seq_len;
    lay.row_pos = st->row_pos;
    lay.out_row = st->out_row;
    s = st->ops->upload_layout(st->os, &lay, st->ids);
    return s == GRZO_OK ? GRZO_OK : llm__ops_fail(m, st, s, "upload_layout");
}

/* ---- the forward ------------------------------------------------------------------------------------ */
#define LLM_OP(m, st, call, what)                                                  \
    do {                                                                           \
        grzo_status s_ = (st)->ops->call;                                          \
        if (s_ != GRZO_OK) return llm__ops_fail((m), (st), s_, (what));            \
    } while (0)

static grzo_status llm__attention_block(grzo_ctx *ctx, llm_model *m, llm_state *st, int32_t l, const grzo_rows *rows) {
    const llm_layer_blocks *L = &m->layers[l];
    float *keys = st->k, *values = st->v;
    const llm_config *c = &m->cfg;
    double t0;
    int64_t n = rows->n_rows;
    llm_ops_state *os = st->os;
    LLM_OP(m, st, rms_normalize(os, st->x, st->xn, n, c->dim, c->norm_eps), "rms_normalize");
    LLM_RET(llm__gain(ctx, m, st, L->attn_norm, st->xn, st->xg, rows, "llm: attn_norm"));
    LLM_RET(llm__linear(ctx, m, st, L->wq, st->xg, st->q, rows, "llm: attn_q"));
    LLM_RET(llm__linear(ctx, m, st, L->wk, st->xg, st->k, rows, "llm: attn_k"));
    LLM_RET(llm__linear(ctx, m, st, L->wv, st->xg, st->v, rows, "llm: attn_v"));
    LLM_OP(m, st, rope(os, st->q, n, c->n_heads), "rope");
    LLM_OP(m, st, rope(os, st->k, n, c->n_kv_heads), "rope");
    if (st->past >= 0) {   /* append this forward's keys and values to layer l's cache, attend to all of it */
        int64_t kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
        size_t layer = (size_t)l * (size_t)st->cap.max_seq_len * (size_t)kv_dim;
        keys = st->cache_k + layer;
        values = st->cache_v + layer;
        LLM_OP(m, st, cache_append(os, keys, st->past * kv_dim, st->k, n * kv_dim), "cache_append");
        LLM_OP(m, st, cache_append(os, values, st->past * kv_dim, st->v, n * kv_dim), "cache_append");
    }
    t0 = llm__now();
    LLM_OP(m, st, attention(os, st->q, keys, values, st->past, n), "attention");
    st->prof.attention_s += llm__now() - t0;
    LLM_RET(llm__linear(ctx, m, st, L->wo, st->q, st->xn, rows, "llm: attn_output"));
    LLM_OP(m, st, add_into(os, st->x, st->xn, n * c->dim), "add_into");
    return GRZO_OK;
}

static grzo_status llm__mlp_block(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_layer_blocks *L,
                                  const grzo_rows *rows) {
    const llm_config *c = &m->cfg;
    int64_t n = rows->n_rows;
    llm_ops_state *os = st->os;
    LLM_OP(m, st, rms_normalize(os, st->x, st->xn, n, c->dim, c->norm_eps), "rms_normalize");
    LLM_RET(llm__gain(ctx, m, st, L->ffn_norm, st->xn, st->xg, rows, "llm: ffn_norm"));
    LLM_RET(llm__linear(ctx, m, st, L->w1, st->xg, st->h1, rows, "llm: ffn_gate"));
    LLM_RET(llm__linear(ctx, m, st, L->w3, st->xg, st->h3, rows, "llm: ffn_up"));
    LLM_OP(m, st, swiglu(os, st->h1, st->h3, n * c->hidden_dim), "swiglu");
    LLM_RET(llm__linear(ctx, m, st, L->w2, st->h1, st->xn, rows, "llm: ffn_down"));
    LLM_OP(m, st, add_into(os, st->x, st->xn, n * c->dim), "add_into");
    return GRZO_OK;
}

/* Final norm and output head on the requested rows only. */
static grzo_status llm__head(grzo_ctx *ctx, llm_model *m, llm_state *st, const grzo_rows *out_rows, float *logits) {
    const llm_config *c = &m->cfg;
    LLM_OP(m, st, gather_rows(st->os, st->x, st->head_tmp, c->dim), "gather_rows");
    LLM_OP(m, st, rms_normalize(st->os, st->head_tmp, st->head_tmp, out_rows->n_rows, c->dim, c->norm_eps), "rms_normalize");
    LLM_RET(llm__gain(ctx, m, st, m->final_norm, st->head_tmp, st->head_in, out_rows, "llm: output_norm"));
    LLM_RET(llm__linear(ctx, m, st, m->output, st->head_in, logits, out_rows, "llm: output"));
    return GRZO_OK;
}

/* The forward of a checked batch; logits: backend memory (n_out x vocab). */
static grzo_status llm__forward_rows(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch, int64_t n_rows,
                                     int64_t n_out, float *logits) {
    grzo_rows tok_rows = {0}, out_rows = {0};   /* zero: the defaults (whole pass) */
    int32_t l;
    LLM_RET(llm__layout(m, st, batch, n_rows, n_out));
    tok_rows.n_rows = n_rows;
    tok_rows.offsets = batch->n_segments > 0 ? st->tok_off : NULL;
    out_rows.n_rows = n_out;
    out_rows.offsets = batch->n_segments > 0 ? st->out_off : NULL;
    LLM_RET(llm__embed(ctx, m, st, &tok_rows));
    for (l = 0; l < m->cfg.n_layers; l++) {
        LLM_RET(llm__attention_block(ctx, m, st, l, &tok_rows));
        LLM_RET(llm__mlp_block(ctx, m, st, &m->layers[l], &tok_rows));
    }
    /* a pass with no requested output still runs the head (on zero rows) for its checks */
    return llm__head(ctx, m, st, &out_rows, logits);
}

/* The state's logits buffer (backend memory, max_outputs x vocab), allocated on first use. */
static grzo_status llm__logits_buffer(llm_model *m, llm_state *st) {
    if (st->logits) return GRZO_OK;
    return llm__backend_buffer(m, st, st->cap.max_outputs, m->cfg.vocab_size, sizeof(float), (void **)&st->logits);
}

/* Run and time a checked batch outside the cache; logits in backend memory. */
static grzo_status llm__run(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch, int64_t n_rows,
                            int64_t n_out, float *logits) {
    double t0;
    grzo_status s;
    if (n_rows == 0) return GRZO_OK;
    t0 = llm__now();
    st->past = -1;
    s = llm__forward_rows(ctx, m, st, batch, n_rows, n_out, logits);
    st->prof.forward_s += llm__now() - t0;
    st->prof.n_forward++;
    st->prof.n_rows += n_rows;
    return s;
}

grzo_status llm_forward(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch, float *logits) {
    int64_t n_rows = 0, n_out = 0;
    grzo_status s;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (!ctx || !st || !batch || !m->layers) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: ctx, a registered model, state and batch are required");
    if ((s = llm__check_batch(m, st, batch, &n_rows, &n_out)) != GRZO_OK) return s;
    if (n_out > 0 && !logits) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: logits is NULL");
    if (!st->device) return llm__run(ctx, m, st, batch, n_rows, n_out, logits);   /* host memory: straight into logits */
    /* device memory: the head writes the state's buffer, then the logits come down */
    if ((s = llm__logits_buffer(m, st)) != GRZO_OK) return s;
    if ((s = llm__run(ctx, m, st, batch, n_rows, n_out, st->logits)) != GRZO_OK || n_rows == 0 || n_out == 0) return s;
    s = grzo_backend_download(st->be, logits, st->logits, (size_t)n_out * (size_t)m->cfg.vocab_size * sizeof(float));
    return s == GRZO_OK ? GRZO_OK : llm__backend_fail(m, st->be, s, "llm_forward: cannot download the logits");
}

void llm_state_profile(const llm_state *st, llm_profile *out) {
    if (!st || !out) return;
    *out = st->prof;
}

void llm_state_profile_reset(llm_state *st) {
    if (st) memset(&st->prof, 0, sizeof st->prof);
}

/* ---- scoring ------------------------------------------------------------------------------------ */
double llm_log_softmax_at(const float *logits, int32_t n, int32_t token) {
    double mx = -INFINITY, sum = 0.0;
    int32_t i;
    if (!logits || token < 0 || token >= n) return -INFINITY;
    for (i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    for (i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    return (double)logits[token] - mx - log(sum);
}

/* Copy the batch with every scored position requested: positions n_context-1 .. n_tokens-2. */
static grzo_status llm__scoring_batch(llm_model *m, llm_state *st, const llm_batch *b, const int32_t *n_context,
                                      llm_batch *out) {
    int64_t used = 0;
    int32_t i, t;
    if (b->n_seqs > st->cap.max_seqs)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: %d sequences exceed the state (%d)", b->n_seqs,
                         st->cap.max_seqs);
    for (i = 0; i < b->n_seqs; i++) {
        llm_seq q = b->seqs[i];
        if (n_context[i] < q.n_pad + 1 || n_context[i] >= q.n_tokens)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: sequence %d: n_context %d must leave a "
                             "context token and a token to score (n_pad %d, n_tokens %d)", i, n_context[i], q.n_pad,
                             q.n_tokens);
        if (used + (q.n_tokens - n_context[i]) > st->cap.max_outputs)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: more scored tokens than the state's "
                             "max_outputs (%lld)", (long long)st->cap.max_outputs);
        q.out_pos = st->lp_pos + used;
        q.n_out = q.n_tokens - n_context[i];
        for (t = 0; t < q.n_out; t++) st->lp_pos[used + t] = n_context[i] - 1 + t;
        used += q.n_out;
        st->lp_seqs[i] = q;
    }
    *out = *b;
    out->seqs = st->lp_seqs;
    return GRZO_OK;
}

grzo_status llm_sequence_logprob(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch,
                                 const int32_t *n_context, double *sum_out, double *mean_out) {
    llm_batch sb;
    int64_t n_rows = 0, n_out = 0, o;
    int32_t i, t;
    grzo_status s;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (!ctx || !st || !batch || !n_context || (batch->n_seqs > 0 && !batch->seqs))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: ctx, state, batch and n_context are required");
    if ((s = llm__logits_buffer(m, st)) != GRZO_OK) return s;
    if ((s = llm__scoring_batch(m, st, batch, n_context, &sb)) != GRZO_OK) return s;
    if ((s = llm__check_batch(m, st, &sb, &n_rows, &n_out)) != GRZO_OK) return s;
    if ((s = llm__run(ctx, m, st, &sb, n_rows, n_out, st->logits)) != GRZO_OK) return s;
    /* the token scored by output o is the one after its position */
    for (i = 0, o = 0; i < sb.n_seqs; i++)
        for (t = 0; t < sb.seqs[i].n_out; t++, o++) st->lp_target[o] = sb.seqs[i].tokens[sb.seqs[i].out_pos[t] + 1];
    /* log softmax at the target, reduced where the logits are: only n_out values reach the host */
    if (n_out > 0)
        LLM_OP(m, st, token_logprob(st->os, st->logits, m->cfg.vocab_size, st->lp_target, n_out, st->lp_val), "token_logprob");
    for (i = 0, o = 0; i < sb.n_seqs; i++) {
        double sum = 0.0;
        for (t = 0; t < sb.seqs[i].n_out; t++) sum += st->lp_val[o++];
        if (sum_out) sum_out[i] = sum;
        if (mean_out) mean_out[i] = sum / sb.seqs[i].n_out;
    }
    return GRZO_OK;
}

/* ---- generation ---------------------------------------------------------------------------------- */
static int32_t llm__argmax(const float *x, int32_t n) {
    int32_t i, best = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Draw from softmax(logits / temperature) with the uniform u in [0, 1). */
static int32_t llm__sample(const float *logits, int32_t n, float temperature, double u) {
    double mx = logits[llm__argmax(logits, n)], sum = 0.0, acc = 0.0;
    int32_t i;
    for (i = 0; i < n; i++) sum += exp(((double)logits[i] - mx) / temperature);
    for (i = 0; i < n; i++) {
        acc += exp(((double)logits[i] - mx) / temperature) / sum;
        if (u < acc) return i;
    }
    return n - 1;   /* rounding left acc just below 1 */
}

/* Forward tokens[0..n) at positions past .. past+n-1 of the one sequence in the cache,
   appending their keys and values; logits of the last one. */
static grzo_status llm__forward_cached(grzo_ctx *ctx, llm_model *m, llm_state *st, const int32_t *tokens, int32_t n,
                                       int32_t past, float *logits) {
    llm_seq seq;
    llm_batch b;
    int32_t last = n - 1;
    int64_t n_rows = 0, n_out = 0;
    grzo_status s;
    memset(&seq, 0, sizeof seq);
    seq.tokens = tokens;
    seq.n_tokens = n;
    seq.out_pos = &last;
    seq.n_out = 1;
    b.seqs = &seq;
    b.n_seqs = 1;
    b.n_segments = 0;
    if ((s = llm__check_batch(m, st, &b, &n_rows, &n_out)) != GRZO_OK) return s;
    st->past = past;
    s = llm__forward_rows(ctx, m, st, &b, n_rows, n_out, logits);
    st->past = -1;
    return s;
}

static grzo_status llm__generate_buffers(llm_model *m, llm_state *st) {
    int64_t cache = (int64_t)m->cfg.n_layers * st->cap.max_seq_len;
    grzo_status s = GRZO_OK;
    if (!st->cache_k)
        s = llm__backend_buffer(m, st, cache, (int64_t)m->cfg.n_kv_heads * m->cfg.head_dim, sizeof(float), (void **)&st->cache_k);
    if (s == GRZO_OK && !st->cache_v)
        s = llm__backend_buffer(m, st, cache, (int64_t)m->cfg.n_kv_heads * m->cfg.head_dim, sizeof(float), (void **)&st->cache_v);
    if (s == GRZO_OK) s = llm__logits_buffer(m, st);
    if (s == GRZO_OK && st->device && !st->gen_logits) {
        st->gen_logits = (float *)malloc((size_t)m->cfg.vocab_size * sizeof(float));
        if (!st->gen_logits) s = llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_generate: out of host memory");
    }
    return s;
}

/* Forward tokens[0..n) after `past` cached positions; the logits of the last one, on the host. */
static grzo_status llm__next_logits(grzo_ctx *ctx, llm_model *m, llm_state *st, const int32_t *tokens, int32_t n,
                                    int32_t past, const float **logits) {
    grzo_status s = llm__forward_cached(ctx, m, st, tokens, n, past, st->logits);
    if (s != GRZO_OK) return s;
    *logits = st->logits;
    if (!st->device) return GRZO_OK;
    s = grzo_backend_download(st->be, st->gen_logits, st->logits, (size_t)m->cfg.vocab_size * sizeof(float));
    if (s != GRZO_OK) return llm__backend_fail(m, st->be, s, "llm_generate: cannot download the logits");
    *logits = st->gen_logits;
    return GRZO_OK;
}

grzo_status llm_generate(grzo_ctx *ctx, llm_model *m, llm_state *st, int32_t *tokens, int32_t n_prompt,
                         const llm_generate_desc *desc, int32_t *n_total) {
    int32_t pos, V;
    const float *logits = NULL;
    grzo_status s;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (n_total) *n_total = n_prompt;
    if (!ctx || !st || !tokens || !desc || n_prompt < 1 || desc->steps < n_prompt || !(desc->temperature >= 0.0f))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_generate: bad arguments (n_prompt %d, steps %d, temperature %g)",
                         n_prompt, desc ? desc->steps : 0, desc ? (double)desc->temperature : 0.0);
    if (desc->steps > st->cap.max_rows || desc->steps > st->cap.max_seq_len)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_generate: %d steps exceed the state (rows %lld, seq_len %d)",
                         desc->steps, (long long)st->cap.max_rows, st->cap.max_seq_len);
    if ((s = llm__generate_buffers(m, st)) != GRZO_OK) return s;
    V = m->cfg.vocab_size;
    /* the prompt in one forward, then one row per new token against the cache */
    if ((s = llm__next_logits(ctx, m, st, tokens, n_prompt, 0, &logits)) != GRZO_OK) return s;
    for (pos = n_prompt - 1; pos < desc->steps; pos++) {
        int32_t next = desc->temperature == 0.0f
                           ? llm__argmax(logits, V)
                           : llm__sample(logits, V, desc->temperature,
                                         grzo_uniform_at(desc->seed, (uint32_t)pos, GRZO_USER_BLOCK, 0, 0));
        if (next == desc->stop[0] || next == desc->stop[1]) break;
        tokens[pos + 1] = next;
        if (n_total) *n_total = pos + 2;
        if (desc->on_token && desc->on_token(tokens[pos], next, desc->user_data)) break;
        if (pos + 1 < desc->steps &&
            (s = llm__next_logits(ctx, m, st, tokens + pos + 1, 1, pos + 1, &logits)) != GRZO_OK)
            return s;
    }
    return GRZO_OK;
}
