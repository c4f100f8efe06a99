/* attention_gemm.h - the layout of the attention through cuBLAS (ops_cuda.cu,
   LLM_ATTENTION_GEMM): where each element of the padded per-head blocks comes from and goes
   to, which keys a score row may see, and the two strided batched GEMMs in cuBLAS's
   column-major terms. The CUDA kernels call these functions; tests/llm/test_att_gemm_layout.c
   runs the same functions on the host, with a plain GEMM in cuBLAS's place, against the CPU
   attention, so that the layout is checked on machines without a GPU.

   For a batch of S sequences (no cache), H query heads and KV kv heads of hd floats, and L
   the longest sequence's rows (padding included), the blocks are [S][H][L][hd] for the
   scaled queries, keys and values (row i of block (s, h) is real token i of sequence s; the
   kv head's keys and values repeated for each query head of its group; rows past the
   sequence's real tokens 0) and [S][H][L][L] for the scores, then the probabilities. */
#ifndef GRZO_LLM_ATTENTION_GEMM_H
#define GRZO_LLM_ATTENTION_GEMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define LLM_HD __host__ __device__
#else
#define LLM_HD
#endif

/* One strided batched GEMM as cublasSgemmStridedBatched takes it (column-major): for
   b < batch, C_b (m x n, ldc) = op(A_b) (m x k) op(B_b) (k x n), alpha 1, beta 0, with
   A_b = A + b stride_a and so on; trans_* 1 means transposed. */
typedef struct llm_att_gemm {
    int trans_a, trans_b;
    int32_t m, n, k, lda, ldb, ldc, batch;
    int64_t stride_a, stride_b, stride_c;
} llm_att_gemm;

/* Element e of the padded blocks: the scaled query and the key and value it holds. */
static inline LLM_HD void llm_att_gather(int64_t e, const float *q, const float *k, const float *v, const int64_t *seq_row0,
                                          const int32_t *seq_pad, const int32_t *seq_len, int32_t n_heads, int32_t n_kv_heads,
                                          int32_t hd, int32_t L, float scale, float *Qp, float *Kp, float *Vp) {
    int64_t sh = e / ((int64_t)L * hd);
    int32_t d = (int32_t)(e % hd), i = (int32_t)((e / hd) % L), h = (int32_t)(sh % n_heads), s = (int32_t)(sh / n_heads);
    int32_t pad = seq_pad[s], g = h / (n_heads / n_kv_heads);
    float qv = 0.0f, kv = 0.0f, vv = 0.0f;
    if (i < seq_len[s] - pad) {
        int64_t row = seq_row0[s] + pad + i, kvi = row * n_kv_heads * hd + (int64_t)g * hd + d;
#ifdef __CUDA_ARCH__
        qv = __fmul_rn(q[row * n_heads * hd + (int64_t)h * hd + d], scale);   /* never contracted into an fma */
#else
        qv = q[row * n_heads * hd + (int64_t)h * hd + d] * scale;
#endif
        kv = k[kvi];
        vv = v[kvi];
    }
    Qp[e] = qv;
    Kp[e] = kv;
    Vp[e] = vv;
}

/* Score row r = (s, h, i): the last key it sees (causal: key i), or -1 for a row past the
   sequence's real tokens (all its probabilities are 0). */
static inline LLM_HD int32_t llm_att_row_last(int64_t r, const int32_t *seq_pad, const int32_t *seq_len, int32_t n_heads,
                                               int32_t L) {
    int32_t i = (int32_t)(r % L), s = (int32_t)(r / L / n_heads);
    return i < seq_len[s] - seq_pad[s] ? i : -1;
}

/* Element e = (s, h, t, d) of the batch's rows, t < L: row t of sequence s (padding
   included) gets the output of real token t - pad for head h, padding rows 0; elements past
   the sequence's rows write nothing. */
static inline LLM_HD void llm_att_scatter(int64_t e, float *q, const float *Op, const int64_t *seq_row0, const int32_t *seq_pad,
                                           const int32_t *seq_len, int32_t n_heads, int32_t hd, int32_t L) {
    int64_t sh = e / ((int64_t)L * hd);
    int32_t d = (int32_t)(e % hd), t = (int32_t)((e / hd) % L), h = (int32_t)(sh % n_heads), s = (int32_t)(sh / n_heads);
    int32_t pad = seq_pad[s];
    if (t >= seq_len[s]) return;
    q[(seq_row0[s] + t) * n_heads * hd + (int64_t)h * hd + d] = t < pad ? 0.0f : Op[(sh * L + (t - pad)) * hd + d];
}

/* scores: row-major P (L x L) = Q K^T per block is column-major P^T = K Q^T:
   A = the keys (transposed), B = the queries, C = the scores */
static inline llm_att_gemm llm_att_scores_gemm(int32_t L, int32_t hd, int32_t batch) {
    llm_att_gemm g;
    g.trans_a = 1; g.trans_b = 0;
    g.m = L; g.n = L; g.k = hd;
    g.lda = hd; g.ldb = hd; g.ldc = L;
    g.stride_a = (int64_t)L * hd; g.stride_b = (int64_t)L * hd; g.stride_c = (int64_t)L * L;
    g.batch = batch;
    return g;
}

/* values: row-major O (L x hd) = P V per block is column-major O^T = V^T P^T:
   A = the values, B = the probabilities, C = the output (into the queries' block) */
static inline llm_att_gemm llm_att_values_gemm(int32_t L, int32_t hd, int32_t batch) {
    llm_att_gemm g;
    g.trans_a = 0; g.trans_b = 0;
    g.m = hd; g.n = L; g.k = L;
    g.lda = hd; g.ldb = L; g.ldc = hd;
    g.stride_a = (int64_t)L * hd; g.stride_b = (int64_t)L * L; g.stride_c = (int64_t)L * hd;
    g.batch = batch;
    return g;
}

/* Bytes of the scratch the GEMM form needs for a batch of S sequences of at most L rows, H
   query heads of hd floats: the padded Q, K and V blocks (3 S H L hd floats) and the scores
   (S H L^2 floats); SIZE_MAX when that does not fit a size_t. */
static inline size_t llm_att_gemm_scratch_bytes(int32_t S, int32_t H, int32_t L, int32_t hd) {
    uint64_t blocks, per_block;
    if (S <= 0 || H <= 0 || L <= 0 || hd <= 0) return 0;
    blocks = (uint64_t)S * (uint64_t)H;                          /* < 2^62: both below 2^31 */
    per_block = (uint64_t)L * (3 * (uint64_t)hd + (uint64_t)L);  /* < 2^63 */
    if (per_block > (uint64_t)SIZE_MAX / sizeof(float) / blocks) return SIZE_MAX;
    return (size_t)(blocks * per_block * sizeof(float));
}

/* LLM_ATTENTION_AUTO's choice for a batch without a cache: the GEMM form, the faster on an
   H200 at contexts of ~256 tokens (bench_gpu's floor pass, 2026-11-30: 23 % less time than
   the fused kernel on SmolLM2-135M, 11 % on the Llama-3-8B shape), while its scratch for the
   batch stays within LLM_ATT_AUTO_GEMM_MAX_BYTES (there, 32 sequences of 32 heads of 128:
   up to L = 849 rows; that bench's 8B batch took 1.3 GB more than the fused kernel); past
   that (long contexts: the scores grow as L^2) the fused kernel, which needs none. */
#define LLM_ATT_AUTO_GEMM_MAX_BYTES ((size_t)4 << 30)
static inline int llm_att_auto_uses_gemm(size_t scratch_bytes) { return scratch_bytes <= LLM_ATT_AUTO_GEMM_MAX_BYTES; }

#endif
