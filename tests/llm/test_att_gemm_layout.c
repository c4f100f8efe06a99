/* test_att_gemm_layout.c - the layout of the attention through cuBLAS (examples/llm/
   attention_gemm.h, the CUDA ops' LLM_ATTENTION_GEMM) checked on the host, where no GPU is
   needed: the same gather, row-mask and scatter functions the kernels call, with a plain
   column-major strided batched GEMM in cuBLAS's place (its documented semantics, written
   here) and a plain softmax, must give the CPU op table's attention.
   Batches: grouped-query (4 query heads over 2 kv heads), plain multi-head, an odd head
   size, a lone head, and head sizes of 64, 80 and 130 (whole and partial pieces of the CPU
   values loop); sequences of length 1 packed beside long ones, left padding, a
   sequence with a single real token.
   Tolerance: max |emulated - cpu| <= 1e-5 on values in [-0.5, 0.5] (the two sum <= 12 fp32
   products and softmax terms in different orders), padding rows exactly 0 in both.
   The check can fail: the scores GEMM with its keys operand not transposed must differ from
   the CPU by more than 1e-3 (in the batches whose head size is at most their longest
   sequence, where that sabotage stays inside its buffer). Every gathered element and every
   score row's last key is compared with what the rows' positions say (check_blocks: a wrong
   padding row there changes no output). Also the GEMM form's scratch size (exact at 1, 0 for
   any size <= 0, the largest that fits a size_t, SIZE_MAX past it) and LLM_ATTENTION_AUTO's
   choice at its 4 GiB bound.
   Exit 0 pass, 1 fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_gemm.h"
#include "ops.h"

static int failures;
#define CHECK(c, ...) do { if (!(c)) { failures++; printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* cublasSgemmStridedBatched with alpha 1, beta 0, in column-major terms (cuBLAS's manual) */
static void gemm_strided(const llm_att_gemm *g, const float *A, const float *B, float *C) {
    int32_t b, i, j, l;
    for (b = 0; b < g->batch; b++) {
        const float *Ab = A + b * g->stride_a, *Bb = B + b * g->stride_b;
        float *Cb = C + b * g->stride_c;
        for (j = 0; j < g->n; j++)
            for (i = 0; i < g->m; i++) {
                float acc = 0.0f;
                for (l = 0; l < g->k; l++) {
                    float a = g->trans_a ? Ab[l + (int64_t)i * g->lda] : Ab[i + (int64_t)l * g->lda];
                    float x = g->trans_b ? Bb[j + (int64_t)l * g->ldb] : Bb[l + (int64_t)j * g->ldb];
                    acc += a * x;
                }
                Cb[i + (int64_t)j * g->ldc] = acc;
            }
    }
}

typedef struct batch {
    int32_t n_seqs, n_heads, n_kv_heads, hd, L;
    int64_t n_rows;
    int64_t seq_row0[8];
    int32_t seq_pad[8], seq_len[8], row_pos[256], ids[256];
} batch;

static void make_batch(batch *b, int32_t n_heads, int32_t n_kv_heads, int32_t hd, const int32_t *len, const int32_t *pad,
                       int32_t n_seqs) {
    int32_t s, t;
    memset(b, 0, sizeof *b);
    b->n_seqs = n_seqs;
    b->n_heads = n_heads;
    b->n_kv_heads = n_kv_heads;
    b->hd = hd;
    for (s = 0; s < n_seqs; s++) {
        b->seq_row0[s] = b->n_rows;
        b->seq_len[s] = len[s];
        b->seq_pad[s] = pad[s];
        for (t = 0; t < len[s]; t++) b->row_pos[b->n_rows + t] = t < pad[s] ? -1 : t - pad[s];
        b->n_rows += len[s];
        if (len[s] > b->L) b->L = len[s];
    }
}

/* the CPU op table's attention over the batch, in place on q */
static int cpu_attention(const batch *b, float *q, const float *k, const float *v) {
    llm_ops_desc d;
    llm_ops_state *os = NULL;
    llm_layout lay;
    int32_t ids[256];
    char err[256];
    grzo_status s;
    memset(&d, 0, sizeof d);
    d.n_threads = 1;
    d.n_heads = b->n_heads;
    d.n_kv_heads = b->n_kv_heads;
    d.head_dim = b->hd;
    d.max_rows = b->n_rows;
    d.max_outputs = 1;
    d.max_seqs = b->n_seqs;
    d.max_seq_len = b->L;
    if (llm_ops_cpu.create(&d, &os, err, sizeof err) != GRZO_OK) {
        printf("FAIL: llm_ops_cpu.create: %s\n", err);
        return -1;
    }
    memset(&lay, 0, sizeof lay);
    lay.n_seqs = b->n_seqs;
    lay.n_rows = b->n_rows;
    lay.ids = b->ids;
    lay.seq_row0 = b->seq_row0;
    lay.seq_pad = b->seq_pad;
    lay.seq_len = b->seq_len;
    lay.row_pos = b->row_pos;
    s = llm_ops_cpu.upload_layout(os, &lay, ids);
    if (s == GRZO_OK) s = llm_ops_cpu.attention(os, q, k, v, -1, b->n_rows);
    if (s != GRZO_OK) printf("FAIL: the CPU attention: %s\n", llm_ops_cpu.last_error(os));
    llm_ops_cpu.destroy(os);
    return s == GRZO_OK ? 0 : -1;
}

/* sequence s's real tokens and the batch row of its first, from the rows' positions alone
   (not from attention_gemm.h's arithmetic on seq_len and seq_pad) */
static int32_t real_tokens(const batch *b, int32_t s, int64_t *first_row) {
    int32_t t, n = 0;
    *first_row = -1;
    for (t = 0; t < b->seq_len[s]; t++)
        if (b->row_pos[b->seq_row0[s] + t] >= 0) {
            if (*first_row < 0) *first_row = b->seq_row0[s] + t;
            n++;
        }
    return n;
}

/* The gathered blocks and the score rows' masks against attention_gemm.h's own contract:
   block (s, h) row i holds real token i's scaled query and its kv head's key and value, rows
   past the real tokens exactly 0 (a gather one row too far, reading the next sequence's row
   or past the buffer, changes no output: the mask hides those keys and the scatter never
   writes those rows); a score row past the real tokens sees no key (-1), row i keys 0..i. */
static void check_blocks(const batch *b, const float *q, const float *k, const float *v, float scale, const float *Qp,
                         const float *Kp, const float *Vp) {
    int32_t H = b->n_heads, KV = b->n_kv_heads, hd = b->hd, L = b->L, s, h, i, d;
    int bad = 0, bad_mask = 0;
    for (s = 0; s < b->n_seqs; s++) {
        int64_t row0;
        int32_t real = real_tokens(b, s, &row0);
        for (h = 0; h < H; h++)
            for (i = 0; i < L; i++) {
                int64_t blk = (((int64_t)s * H + h) * L + i) * hd, r = ((int64_t)s * H + h) * L + i;
                if (llm_att_row_last(r, b->seq_pad, b->seq_len, H, L) != (i < real ? i : -1)) bad_mask++;
                for (d = 0; d < hd; d++) {
                    float eq = 0.0f, ek = 0.0f, ev = 0.0f;
                    if (i < real) {
                        int64_t row = row0 + i, kvi = (row * KV + h / (H / KV)) * hd + d;
                        eq = q[(row * H + h) * hd + d] * scale;
                        ek = k[kvi];
                        ev = v[kvi];
                    }
                    if (Qp[blk + d] != eq || Kp[blk + d] != ek || Vp[blk + d] != ev) bad++;
                }
            }
    }
    CHECK(bad == 0, "%d elements of the gathered Q, K, V blocks differ from the rows they should hold (or 0)", bad);
    CHECK(bad_mask == 0, "%d score rows see other keys than causal ones (or any, past the real tokens)", bad_mask);
}

/* the GEMM form on the host: gather, scores, masked softmax, values, scatter (ops_cuda.cu's
   cu_attention_gemm step by step); flip_keys: the sabotage (keys operand not transposed) */
static void gemm_attention(const batch *b, float *q, const float *k, const float *v, int flip_keys) {
    int32_t H = b->n_heads, hd = b->hd, L = b->L, batch_n = b->n_seqs * H;
    int64_t n = (int64_t)batch_n * L * hd, rows = (int64_t)batch_n * L, e, r;
    float *Qp = (float *)malloc((size_t)n * sizeof(float)), *Kp = (float *)malloc((size_t)n * sizeof(float));
    float *Vp = (float *)malloc((size_t)n * sizeof(float)), *P = (float *)malloc((size_t)(rows * L) * sizeof(float));
    llm_att_gemm scores = llm_att_scores_gemm(L, hd, batch_n);
    if (!Qp || !Kp || !Vp || !P) { printf("FATAL: out of memory\n"); exit(1); }
    for (e = 0; e < n; e++)
        llm_att_gather(e, q, k, v, b->seq_row0, b->seq_pad, b->seq_len, H, b->n_kv_heads, hd, L, 1.0f / sqrtf((float)hd), Qp, Kp, Vp);
    if (!flip_keys) check_blocks(b, q, k, v, 1.0f / sqrtf((float)hd), Qp, Kp, Vp);
    if (flip_keys) scores.trans_a = !scores.trans_a;
    gemm_strided(&scores, Kp, Qp, P);
    for (r = 0; r < rows; r++) {
        int32_t last = llm_att_row_last(r, b->seq_pad, b->seq_len, H, L), j;
        float *pr = P + r * L, mx = -INFINITY, inv;
        double sum = 0.0;
        for (j = 0; j <= last; j++) mx = fmaxf(mx, pr[j]);
        for (j = 0; j <= last; j++) sum += (double)expf(pr[j] - mx);
        inv = last >= 0 ? (float)(1.0 / sum) : 0.0f;
        for (j = 0; j < L; j++) pr[j] = j <= last ? expf(pr[j] - mx) * inv : 0.0f;
    }
    {
        llm_att_gemm values = llm_att_values_gemm(L, hd, batch_n);
        gemm_strided(&values, Vp, P, Qp);
    }
    for (e = 0; e < n; e++) llm_att_scatter(e, q, Qp, b->seq_row0, b->seq_pad, b->seq_len, H, hd, L);
    free(Qp); free(Kp); free(Vp); free(P);
}

static float *random_floats(int64_t n, uint32_t seed) {
    float *x = (float *)malloc((size_t)n * sizeof(float));
    uint64_t st = 0x9E3779B97F4A7C15ull * (seed + 1);
    int64_t i;
    if (!x) { printf("FATAL: out of memory\n"); exit(1); }
    for (i = 0; i < n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(st >> 40) / 16777216.0) - 0.5f;
    }
    return x;
}

/* max |a - b|; padding rows must be exactly 0 in both */
static double compare(const batch *b, const float *a, const float *c, int *padding_ok) {
    int64_t row, i, w = (int64_t)b->n_heads * b->hd;
    double md = 0.0;
    *padding_ok = 1;
    for (row = 0; row < b->n_rows; row++)
        for (i = 0; i < w; i++) {
            double d = fabs((double)a[row * w + i] - c[row * w + i]);
            if (d > md) md = d;
            if (b->row_pos[row] < 0 && (a[row * w + i] != 0.0f || c[row * w + i] != 0.0f)) *padding_ok = 0;
        }
    return md;
}

static void check(const char *name, int32_t n_heads, int32_t n_kv_heads, int32_t hd, const int32_t *len, const int32_t *pad,
                  int32_t n_seqs) {
    batch b;
    int64_t nq, nk;
    float *q, *k, *v, *qc, *qe;
    double md;
    int padding_ok;
    make_batch(&b, n_heads, n_kv_heads, hd, len, pad, n_seqs);
    nq = b.n_rows * n_heads * hd;
    nk = b.n_rows * n_kv_heads * hd;
    q = random_floats(nq, 1);
    k = random_floats(nk, 2);
    v = random_floats(nk, 3);
    qc = (float *)malloc((size_t)nq * sizeof(float));
    qe = (float *)malloc((size_t)nq * sizeof(float));
    if (!qc || !qe) { printf("FATAL: out of memory\n"); exit(1); }
    memcpy(qc, q, (size_t)nq * sizeof(float));
    memcpy(qe, q, (size_t)nq * sizeof(float));
    if (cpu_attention(&b, qc, k, v) == 0) {
        gemm_attention(&b, qe, k, v, 0);
        md = compare(&b, qe, qc, &padding_ok);
        printf("%-34s max |gemm form - cpu| = %.2e\n", name, md);
        CHECK(md <= 1e-5, "%s: the GEMM form differs from the CPU attention by %.3e (bound 1e-5)", name, md);
        CHECK(padding_ok, "%s: padding rows must be exactly 0", name);
        /* the sabotage reads the keys operand as its transpose, inside the buffer only while
           the head size is at most the longest sequence */
        if (hd <= b.L) {
            memcpy(qe, q, (size_t)nq * sizeof(float));
            gemm_attention(&b, qe, k, v, 1);
            md = compare(&b, qe, qc, &padding_ok);
            CHECK(md > 1e-3, "%s: the sabotaged scores GEMM (keys not transposed) went unnoticed (%.3e)", name, md);
        }
    } else {
        failures++;
    }
    free(q); free(k); free(v); free(qc); free(qe);
}

/* The GEMM form's scratch size and AUTO's choice between the two forms (attention_gemm.h). */
static void expect(int ok, const char *what) {
    if (!ok) { fprintf(stderr, "FAIL: %s\n", what); failures++; }
}

static void check_scratch_and_auto(void) {
    const size_t cap = LLM_ATT_AUTO_GEMM_MAX_BYTES;
    /* 2 sequences x 3 heads, L = 5, hd = 4: 6 blocks of 3*5*4 + 5*5 = 85 floats */
    expect(llm_att_gemm_scratch_bytes(2, 3, 5, 4) == 6 * 85 * sizeof(float), "scratch of 2 x 3 heads, L 5, hd 4");
    expect(llm_att_gemm_scratch_bytes(1, 1, 1, 1) == 4 * sizeof(float), "scratch of one block of one row and one float");
    {   /* each size at 0 and -1: an empty batch (S = 0 would divide by zero past the check) */
        static const int32_t bad[] = { 0, -1 };
        int j, ok = 1;
        for (j = 0; j < 2; j++)
            ok &= llm_att_gemm_scratch_bytes(bad[j], 3, 5, 4) == 0 && llm_att_gemm_scratch_bytes(2, bad[j], 5, 4) == 0 &&
                  llm_att_gemm_scratch_bytes(2, 3, bad[j], 4) == 0 && llm_att_gemm_scratch_bytes(2, 3, 5, bad[j]) == 0;
        expect(ok, "scratch of an empty batch is 0");
    }
    expect(llm_att_gemm_scratch_bytes(65535, 2147483647, 2147483647, 2147483647) == SIZE_MAX,
           "scratch past a size_t is SIZE_MAX");
#if SIZE_MAX == UINT64_MAX
    /* the largest block that fits: 2147483646 heads of L 1, hd 715827883 are 2147483650 floats a
       block, exactly floor(SIZE_MAX / 4 / blocks), and 18446744073709551600 bytes in all; one
       float more of head size does not fit */
    expect(llm_att_gemm_scratch_bytes(1, 2147483646, 1, 715827883) == (size_t)18446744073709551600u,
           "scratch of exactly the largest size_t's worth of blocks");
    expect(llm_att_gemm_scratch_bytes(1, 2147483646, 1, 715827884) == SIZE_MAX, "scratch one block row past it");
#endif
    /* bench_gpu's Llama-3-8B batch: 32 sequences x 32 heads of 128, up to L = 849 in the GEMM form */
    expect(llm_att_auto_uses_gemm(llm_att_gemm_scratch_bytes(32, 32, 849, 128)), "AUTO takes the GEMM form at L 849");
    expect(!llm_att_auto_uses_gemm(llm_att_gemm_scratch_bytes(32, 32, 850, 128)), "AUTO takes the fused kernel at L 850");
    expect(llm_att_auto_uses_gemm(cap) && !llm_att_auto_uses_gemm(cap + 1) && !llm_att_auto_uses_gemm(SIZE_MAX),
           "AUTO's bound is inclusive");
}

int main(void) {
    static const int32_t len1[] = {9, 1, 12, 5}, pad1[] = {0, 0, 3, 4};   /* the last: one real token */
    static const int32_t len2[] = {1, 1, 7}, pad2[] = {0, 0, 2};
    static const int32_t len3[] = {6}, pad3[] = {0};
    check("grouped query (4 heads / 2 kv, hd 8)", 4, 2, 8, len1, pad1, 4);
    check("multi-head (3 / 3, hd 5)", 3, 3, 5, len2, pad2, 3);
    check("one head, one sequence (hd 2)", 1, 1, 2, len3, pad3, 1);
    check("grouped query (6 / 2, hd 4)", 6, 2, 4, len2, pad2, 3);
    /* head sizes of the CPU values loop's whole 64-element pieces, and a partial piece after them */
    check("grouped query (4 / 2, hd 64)", 4, 2, 64, len1, pad1, 4);
    check("multi-head (2 / 2, hd 80)", 2, 2, 80, len2, pad2, 3);
    check("grouped query (2 / 1, hd 130)", 2, 1, 130, len1, pad1, 4);
    check_scratch_and_auto();
    printf("test_att_gemm_layout: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
