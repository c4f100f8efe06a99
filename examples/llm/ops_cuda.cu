/* ops_cuda.cu - the llm_ops table of the CUDA backend: the forward's non-perturbed ops as
   kernels on the backend's stream (grzo_backend_cuda_stream), activations in device memory.
   See ops.h. Each op has its plain CPU counterpart in ops_cpu.c; tests/llm/test_llm_cuda.c
   compares them on random and edge-case shapes.

   Synchronization: none inside a forward except token_logprob, whose n values go to the
   host. The batch's tables go through pinned staging buffers with asynchronous copies; an
   event guards the staging buffers against the next batch overwriting them too early.
   Fresh backend allocations are zero-filled on the backend's own stream, so the kernels
   that follow on it see them ready without any wait. */
#include "ops.h"
#include "attention_gemm.h"
#include "backends/grzo_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLM_CU_THREADS 256
/* attention tiles: a warp scores 32 keys at once (one per lane) for each of its queries */
#define LLM_ATT_TK 32             /* keys per shared-memory tile (= warp size) */
#define LLM_ATT_WARPS 4
#define LLM_ATT_QPW 4             /* queries per warp */
#define LLM_ATT_TQ (LLM_ATT_WARPS * LLM_ATT_QPW)   /* rows of a sequence per block */
#define LLM_ATT_MAX_HD 256        /* head_dim limit: output dims per lane live in registers */
#define LLM_ATT_DPL (LLM_ATT_MAX_HD / 32)
#define LLM_FULL_MASK 0xFFFFFFFFu

struct llm_ops_state {
    llm_ops_desc d;
    cudaStream_t stream;
    /* the batch's tables, device copies (backend memory) and their pinned host staging */
    int64_t *seq_row0, *out_row;
    int32_t *seq_pad, *seq_len, *row_pos;
    int64_t *h_seq_row0, *h_out_row;
    int32_t *h_seq_pad, *h_seq_len, *h_row_pos, *h_ids;
    cudaEvent_t staged;           /* the last upload's copies have left the staging buffers */
    int staged_pending;
    int32_t n_seqs, max_len;      /* of the batch in flight (host copies: grid sizes) */
    int64_t n_out;
    float *rope_cos, *rope_sin;   /* max_seq_len x head_dim/2 */
    int32_t *target, *h_target;   /* token_logprob: max_outputs targets and values */
    double *val, *h_val;
    size_t att_smem;              /* dynamic shared memory of the attention kernel */
    /* attention through cuBLAS (LLM_ATTENTION_GEMM): its handle, workspace and scratch */
    cublasHandle_t blas;
    void *blas_ws;
    float *att_buf;               /* padded Q, K, V (one head's rows after another) and scores */
    size_t att_bytes;
    char err[256];
};

/* ---- errors ------------------------------------------------------------------------------ */
static grzo_status llm__cu_fail(llm_ops_state *os, const char *what, cudaError_t e) {
    snprintf(os->err, sizeof os->err, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    /* handled here: the next launch check (ours or the backend's) must not report it as its
       own; a sticky error stays whatever we do, and every later call returns it */
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? GRZO_ERR_OUT_OF_MEMORY : GRZO_ERR_BACKEND;
}
#define LLM_CU_TRY(os, what, call)                                      \
    do {                                                                \
        cudaError_t e_ = (call);                                        \
        if (e_ != cudaSuccess) return llm__cu_fail(os, what, e_);       \
    } while (0)
#define LLM_CU_LAUNCHED(os, what) LLM_CU_TRY(os, what, cudaGetLastError())
/* A failed cuBLAS call may leave its own kernel's launch error latched: cleared here, as
   llm__cu_fail clears one, so that the next launch check does not report it as its own (and
   a retried forward does not fail on it). */
#define LLM_BLAS_TRY(os, what, call)                                                                    \
    do {                                                                                                \
        cublasStatus_t b_ = (call);                                                                     \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                              \
            snprintf((os)->err, sizeof (os)->err, "%s: cuBLAS status %d", what, (int)b_);               \
            (void)cudaGetLastError();                                                                   \
            return b_ == CUBLAS_STATUS_ALLOC_FAILED ? GRZO_ERR_OUT_OF_MEMORY : GRZO_ERR_BACKEND;        \
        }                                                                                               \
    } while (0)

static unsigned llm__cu_blocks(int64_t n) { return (unsigned)((n + LLM_CU_THREADS - 1) / LLM_CU_THREADS); }
/* blocks for a kernel with a warp per row */
static unsigned llm__cu_warp_blocks(int64_t rows) { return (unsigned)((rows + LLM_CU_THREADS / 32 - 1) / (LLM_CU_THREADS / 32)); }

/* ---- kernels ---------------------------------------------------------------------------------
   Products and sums are written with __fmul_rn / __fadd_rn where the CPU code has a separate
   multiply and add, so that the compiler does not contract them into an fma the CPU lacks. */

/* block sum of a double over LLM_CU_THREADS threads; every thread gets the total */
__device__ static double llm__block_sum(double v, double *sh) {
    int t = threadIdx.x, s;
    sh[t] = v;
    __syncthreads();
    for (s = LLM_CU_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    v = sh[0];
    __syncthreads();
    return v;
}

__device__ static float llm__block_max(float v, float *sh) {
    int t = threadIdx.x, s;
    sh[t] = v;
    __syncthreads();
    for (s = LLM_CU_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = fmaxf(sh[t], sh[t + s]);
        __syncthreads();
    }
    v = sh[0];
    __syncthreads();
    return v;
}

/* Warp reductions (xor butterflies): every lane ends with the same value, since each pair of
   lanes adds (or compares) the same two values. Where a row fits a warp's work, a warp per row
   takes 5 shuffles a reduction where a block's shared-memory tree takes 10 __syncthreads
   (llm__k_att_softmax, llm__k_rms_normalize): no barrier on the GPU, and in the CUDA
   emulator, where every barrier or shuffle switches each of its threads, 32 threads meeting 5
   times instead of 256 meeting 10. With the fused attention's probabilities through shared
   memory (llm__k_attention), the emulated tests' times on 2 cores: cli_cuda_emulated 278 s ->
   102-114 s, llm_cuda_emulated 80 -> 18-29 s, cli_cuda_faults_emulated 91 -> 29-35 s. */
__device__ static float llm__warp_max(float v) {
    int o;
    for (o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(LLM_FULL_MASK, v, o));
    return v;
}
__device__ static float llm__warp_sum(float v) {
    int o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(LLM_FULL_MASK, v, o);
    return v;
}
__device__ static double llm__warp_sum_double(double v) {
    int o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(LLM_FULL_MASK, v, o);
    return v;
}

/* one warp per row (LLM_CU_THREADS / 32 rows a block): y = x / sqrt(mean(x^2) + eps), the
   sum of squares in double as on the CPU */
__global__ static void llm__k_rms_normalize(const float *x, float *y, int64_t n_rows, int32_t dim, float eps) {
    int64_t r = (int64_t)blockIdx.x * (LLM_CU_THREADS / 32) + threadIdx.x / 32;
    int32_t lane = (int32_t)(threadIdx.x % 32), j;
    const float *xr;
    float *yr, scale;
    double ss = 0.0;
    if (r >= n_rows) return;   /* the whole warp: its shuffles never meet a lane that left */
    xr = x + r * dim;
    yr = y + r * dim;
    for (j = lane; j < dim; j += 32) ss += (double)xr[j] * xr[j];
    ss = llm__warp_sum_double(ss);
    scale = (float)(1.0 / sqrt(ss / dim + eps));
    for (j = lane; j < dim; j += 32) yr[j] = __fmul_rn(xr[j], scale);
}

/* one thread per (row, head, pair) */
__global__ static void llm__k_rope(float *t, const int32_t *row_pos, const float *cos_t, const float *sin_t, int64_t n_rows,
                                   int32_t n_heads, int32_t head_dim) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r;
    int32_t half = head_dim / 2, pair, h, p;
    float a, b, cs, sn, *v;
    if (i >= n_rows * n_heads * half) return;
    pair = (int32_t)(i % half);
    h = (int32_t)((i / half) % n_heads);
    r = i / ((int64_t)half * n_heads);
    p = row_pos[r];
    if (p < 0) return;
    cs = cos_t[(int64_t)p * half + pair];
    sn = sin_t[(int64_t)p * half + pair];
    v = t + (r * n_heads + h) * head_dim + 2 * pair;
    a = v[0];
    b = v[1];
    v[0] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
    v[1] = __fadd_rn(__fmul_rn(a, sn), __fmul_rn(b, cs));
}

__global__ static void llm__k_swiglu(float *h1, const float *h3, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float g;
    if (i >= n) return;
    g = h1[i];
    h1[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), h3[i]);
}

__global__ static void llm__k_add_into(float *x, const float *y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fadd_rn(x[i], y[i]);
}

__global__ static void llm__k_gather_rows(const float *x, float *y, const int64_t *out_row, int64_t n, int32_t dim) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) y[i] = x[out_row[i / dim] * dim + i % dim];
}

/* one block per output: log softmax(logits[o])[target[o]], the sum of exponentials in double */
__global__ static void llm__k_token_logprob(const float *logits, int32_t vocab, const int32_t *target, double *out) {
    __shared__ double shd[LLM_CU_THREADS];
    __shared__ float shf[LLM_CU_THREADS];
    const float *lr = logits + (int64_t)blockIdx.x * vocab;
    int32_t tg = target[blockIdx.x], j;
    float mx = -INFINITY;
    double sum = 0.0;
    for (j = threadIdx.x; j < vocab; j += LLM_CU_THREADS) mx = fmaxf(mx, lr[j]);
    mx = llm__block_max(mx, shf);
    for (j = threadIdx.x; j < vocab; j += LLM_CU_THREADS) sum += exp((double)lr[j] - mx);
    sum = llm__block_sum(sum, shd);
    if (threadIdx.x == 0) out[blockIdx.x] = tg < 0 || tg >= vocab ? -INFINITY : (double)lr[tg] - mx - log(sum);
}

/* Fused causal grouped-query attention, fp32, online softmax over key tiles.
   Block (x, h, s): rows [x*TQ, x*TQ + TQ) of sequence s, query head h, kv head h / group.
   Row t of the sequence (t >= pad) is query i = t - pad at position past + i and sees keys
   0 .. past + i: the batch's rows row0 + pad + j when past < 0, else the layer's cache rows j.
   Each warp owns QPW queries; for a tile of 32 keys in shared memory, lane j scores key j
   against each query, the warp keeps the running max m, the running sum l and the output
   accumulator (dims lane, lane + 32, ...) rescaled by exp(m_old - m_new), each lane adding
   every key's probability (through the warp's row of Ps) times its value dims, and at the end
   the row becomes acc / l. Padding rows output 0. The output overwrites q in place: a block
   reads only its own query rows (into shared memory, before any write) and writes those.
   Blocks of query heads that share a kv head each load the K/V tiles: the alternative, a
   cuBLAS batched GEMM for the scores + a masked softmax kernel + a GEMM for the values,
   must be measured against this kernel on a GPU (issue 16, item 1) before either is kept. */
__global__ static void llm__k_attention(float *q, const float *k, const float *v, const int64_t *seq_row0,
                                        const int32_t *seq_pad, const int32_t *seq_len, int32_t past, int32_t n_heads,
                                        int32_t n_kv_heads, int32_t hd, float scale) {
    extern __shared__ float sm[];
    const int32_t ks = hd + 1;    /* padded stride: lane j reads row j of Ks without bank conflicts */
    float *Ks = sm, *Vs = Ks + LLM_ATT_TK * ks, *Qs = Vs + LLM_ATT_TK * hd, *Ps = Qs + LLM_ATT_TQ * hd;
    int32_t s = blockIdx.z, h = blockIdx.y, len = seq_len[s], pad = seq_pad[s], t0 = blockIdx.x * LLM_ATT_TQ;
    int32_t g = h / (n_heads / n_kv_heads), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int32_t past0 = past > 0 ? past : 0, t_last, n_keys, i, j0, a, c;
    int64_t row0 = seq_row0[s], q_stride = (int64_t)n_heads * hd, kv_stride = (int64_t)n_kv_heads * hd;
    int64_t k_base = past >= 0 ? 0 : row0 + pad;
    float m[LLM_ATT_QPW], l[LLM_ATT_QPW], acc[LLM_ATT_QPW][LLM_ATT_DPL];
    if (t0 >= len) return;        /* the whole block: no barrier skipped */
    for (i = threadIdx.x; i < LLM_ATT_TQ * hd; i += blockDim.x) {
        int32_t t = t0 + i / hd;
        Qs[i] = t < len && t >= pad ? __fmul_rn(q[(row0 + t) * q_stride + (int64_t)h * hd + i % hd], scale) : 0.0f;
    }
    t_last = min(t0 + LLM_ATT_TQ, len) - 1;
    n_keys = t_last >= pad ? past0 + (t_last - pad) + 1 : 0;
#pragma unroll
    for (a = 0; a < LLM_ATT_QPW; a++) {
        m[a] = -INFINITY;
        l[a] = 0.0f;
#pragma unroll
        for (c = 0; c < LLM_ATT_DPL; c++) acc[a][c] = 0.0f;
    }
    for (j0 = 0; j0 < n_keys; j0 += LLM_ATT_TK) {
        __syncthreads();          /* the previous tile is consumed (first time: Qs is written) */
        for (i = threadIdx.x; i < LLM_ATT_TK * hd; i += blockDim.x) {
            int32_t jj = i / hd, d = i % hd, j = j0 + jj;
            float kv = 0.0f, vv = 0.0f;
            if (j < n_keys) {
                int64_t e = (k_base + j) * kv_stride + (int64_t)g * hd + d;
                kv = k[e];
                vv = v[e];
            }
            Ks[jj * ks + d] = kv;
            Vs[jj * hd + d] = vv;
        }
        __syncthreads();
#pragma unroll
        for (a = 0; a < LLM_ATT_QPW; a++) {
            int32_t qi = warp * LLM_ATT_QPW + a, t = t0 + qi, limit, j = j0 + lane, nj, jj, d;
            float sc = -INFINITY, mnew, p, corr;
            if (t >= len || t < pad) continue;          /* uniform over the warp */
            limit = past0 + (t - pad);                  /* the last key this query sees */
            if (j0 > limit) continue;
            if (j <= limit) {
                const float *qr = Qs + qi * hd, *kr = Ks + lane * ks;
                float dot = 0.0f;
                for (d = 0; d < hd; d++) dot = __fadd_rn(dot, __fmul_rn(qr[d], kr[d]));
                sc = dot;
            }
            mnew = fmaxf(m[a], llm__warp_max(sc));     /* finite: key j0 <= limit is visible */
            p = j <= limit ? expf(sc - mnew) : 0.0f;
            corr = expf(m[a] - mnew);                   /* 0 on the first tile (m = -inf) */
            l[a] = l[a] * corr + llm__warp_sum(p);
#pragma unroll
            for (c = 0; c < LLM_ATT_DPL; c++) acc[a][c] *= corr;
            nj = min(LLM_ATT_TK, limit - j0 + 1);
            /* the warp's 32 probabilities through its own row of Ps: a store and two warp
               barriers in place of up to 32 shuffles (the same values in the same order) */
            Ps[warp * 32 + lane] = p;
            __syncwarp();
            for (jj = 0; jj < nj; jj++) {
                float pj = Ps[warp * 32 + jj];
#pragma unroll
                for (c = 0; c < LLM_ATT_DPL; c++) {
                    d = lane + 32 * c;
                    if (d < hd) acc[a][c] += pj * Vs[jj * hd + d];
                }
            }
            __syncwarp();   /* every lane has read Ps before the next query writes it */
            m[a] = mnew;
        }
    }
#pragma unroll
    for (a = 0; a < LLM_ATT_QPW; a++) {
        int32_t t = t0 + warp * LLM_ATT_QPW + a, d;
        float inv;
        if (t >= len) continue;
        inv = t >= pad ? 1.0f / l[a] : 0.0f;
#pragma unroll
        for (c = 0; c < LLM_ATT_DPL; c++) {
            d = lane + 32 * c;
            if (d < hd) q[(row0 + t) * q_stride + (int64_t)h * hd + d] = t >= pad ? acc[a][c] * inv : 0.0f;
        }
    }
}

/* ---- attention through cuBLAS: the alternative to the fused kernel ----------------------------
   Issue 16 asks for the fused kernel above and for this form to be measured against each
   other; llm_state_desc.attention picks one (bench_gpu --attention). For a batch without a
   cache (past < 0), with L the longest sequence of the batch (padding included):
     1. gather: each (sequence s, query head h) gets its own L x hd blocks of scaled queries,
        keys and values (the kv head's, repeated for each query head of its group), rows
        past the sequence's real tokens zero;
     2. scores = Q K^T, one strided batched fp32 GEMM over all (s, h) (pedantic math, as the
        fused kernel: fp32 products, no TF32);
     3. a masked softmax, one block per score row: keys after the query's own position, and
        every key of a row past the sequence's tokens, get probability 0;
     4. out = P V, a second batched GEMM, into the queries' padded block;
     5. scatter: each real token's row of q gets its head's output, padding rows 0.
   Scratch (backend memory, grown on demand and then kept): 3 (S H L hd) + S H L^2 floats.
   The layout (steps 1, 3's mask, 5, and both GEMMs' shapes) is attention_gemm.h's, which
   tests/llm/test_att_gemm_layout.c runs on the host against the CPU attention. */

/* element e of the padded [s][h][i][d] blocks (attention_gemm.h) */
__global__ static void llm__k_att_gather(const float *q, const float *k, const float *v, const int64_t *seq_row0,
                                         const int32_t *seq_pad, const int32_t *seq_len, int32_t n_heads,
                                         int32_t n_kv_heads, int32_t hd, int32_t L, float scale, int64_t n, float *Qp,
                                         float *Kp, float *Vp) {
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) llm_att_gather(e, q, k, v, seq_row0, seq_pad, seq_len, n_heads, n_kv_heads, hd, L, scale, Qp, Kp, Vp);
}

/* one warp per score row r (LLM_CU_THREADS / 32 rows a block): probabilities of keys
   0..llm_att_row_last(r), 0 elsewhere; the sum in double */
__global__ static void llm__k_att_softmax(float *P, const int32_t *seq_pad, const int32_t *seq_len, int32_t n_heads,
                                          int32_t L, int64_t rows) {
    int64_t r = (int64_t)blockIdx.x * (LLM_CU_THREADS / 32) + threadIdx.x / 32;
    int32_t lane = (int32_t)(threadIdx.x % 32), last, j;
    float *pr, mx = -INFINITY, inv;
    double sum = 0.0;
    if (r >= rows) return;   /* the whole warp: its shuffles never meet a lane that left */
    last = llm_att_row_last(r, seq_pad, seq_len, n_heads, L);
    pr = P + r * L;
    for (j = lane; j <= last; j += 32) mx = fmaxf(mx, pr[j]);
    mx = llm__warp_max(mx);
    for (j = lane; j <= last; j += 32) sum += (double)expf(pr[j] - mx);
    sum = llm__warp_sum_double(sum);
    inv = last >= 0 ? (float)(1.0 / sum) : 0.0f;
    for (j = lane; j < L; j += 32) pr[j] = j <= last ? __fmul_rn(expf(pr[j] - mx), inv) : 0.0f;
}

/* element (s, h, t, d) of the batch's rows (attention_gemm.h) */
__global__ static void llm__k_att_scatter(float *q, const float *Op, const int64_t *seq_row0, const int32_t *seq_pad,
                                          const int32_t *seq_len, int32_t n_heads, int32_t hd, int32_t L, int64_t n) {
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) llm_att_scatter(e, q, Op, seq_row0, seq_pad, seq_len, n_heads, hd, L);
}

/* ---- the table ------------------------------------------------------------------------------ */
static void cu_destroy(llm_ops_state *os) {
    const grzo_backend *be;
    void *dev[] = {os ? os->seq_row0 : NULL, os ? os->out_row : NULL, os ? os->seq_pad : NULL, os ? os->seq_len : NULL,
                   os ? os->row_pos : NULL, os ? os->rope_cos : NULL, os ? os->rope_sin : NULL, os ? os->target : NULL,
                   os ? os->val : NULL};
    void *pinned[] = {os ? os->h_seq_row0 : NULL, os ? os->h_out_row : NULL, os ? os->h_seq_pad : NULL,
                      os ? os->h_seq_len : NULL, os ? os->h_row_pos : NULL, os ? os->h_ids : NULL,
                      os ? os->h_target : NULL, os ? os->h_val : NULL};
    size_t i;
    if (!os) return;
    be = os->d.be;
    if (os->stream) cudaStreamSynchronize(os->stream);
    for (i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) grzo_backend_free(be, dev[i]);
    if (os->blas) cublasDestroy(os->blas);
    if (os->blas_ws) grzo_backend_free(be, os->blas_ws);
    if (os->att_buf) grzo_backend_free(be, os->att_buf);
    for (i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
        if (pinned[i]) cudaFreeHost(pinned[i]);
    if (os->staged) cudaEventDestroy(os->staged);
    free(os);
    (void)cudaGetLastError();   /* the cleanup's own errors cannot be reported: none stays latched */
}

/* Pinned host memory into *out, set only when the allocation succeeded: what a failed
   cudaMallocHost leaves in its output is not documented, and cu_destroy frees what is there. */
static grzo_status cu_pinned(llm_ops_state *os, size_t bytes, void **out) {
    void *p = NULL;
    LLM_CU_TRY(os, "cudaMallocHost", cudaMallocHost(&p, bytes));
    *out = p;
    return GRZO_OK;
}

/* count elements of elem bytes: a device table (backend memory) and its pinned staging */
static grzo_status cu_table(llm_ops_state *os, int64_t count, size_t elem, void **dev, void **pinned) {
    size_t bytes = (size_t)(count > 0 ? count : 1) * elem;
    grzo_status s = grzo_backend_alloc(os->d.be, bytes, dev);
    if (s != GRZO_OK) {
        snprintf(os->err, sizeof os->err, "cannot allocate %zu bytes of device memory for the batch tables", bytes);
        return s;
    }
    return pinned ? cu_pinned(os, bytes, pinned) : GRZO_OK;
}

static grzo_status cu_create_tables(llm_ops_state *os) {
    const llm_ops_desc *d = &os->d;
    size_t rope = (size_t)d->max_seq_len * (size_t)(d->head_dim / 2) * sizeof(float);
    grzo_status s = GRZO_OK;
    if (s == GRZO_OK) s = cu_table(os, d->max_seqs, 8, (void **)&os->seq_row0, (void **)&os->h_seq_row0);
    if (s == GRZO_OK) s = cu_table(os, d->max_seqs, 4, (void **)&os->seq_pad, (void **)&os->h_seq_pad);
    if (s == GRZO_OK) s = cu_table(os, d->max_seqs, 4, (void **)&os->seq_len, (void **)&os->h_seq_len);
    if (s == GRZO_OK) s = cu_table(os, d->max_rows, 4, (void **)&os->row_pos, (void **)&os->h_row_pos);
    if (s == GRZO_OK) s = cu_table(os, d->max_outputs, 8, (void **)&os->out_row, (void **)&os->h_out_row);
    if (s == GRZO_OK) s = cu_table(os, d->max_outputs, 4, (void **)&os->target, (void **)&os->h_target);
    if (s == GRZO_OK) s = cu_table(os, d->max_outputs, 8, (void **)&os->val, (void **)&os->h_val);
    if (s == GRZO_OK) s = cu_pinned(os, (size_t)d->max_rows * 4, (void **)&os->h_ids);
    if (s == GRZO_OK) s = cu_table(os, (int64_t)(rope / 4), 4, (void **)&os->rope_cos, NULL);
    if (s == GRZO_OK) s = cu_table(os, (int64_t)(rope / 4), 4, (void **)&os->rope_sin, NULL);
    if (s != GRZO_OK) return s;
    /* the backend zero-fills on its own non-blocking stream: let that finish before our copies;
       and a cudaMemcpy from pageable memory may return before its DMA has landed, which that
       stream's kernels would not wait for: synchronize again after the copies */
    LLM_CU_TRY(os, "synchronize", cudaDeviceSynchronize());
    LLM_CU_TRY(os, "rope tables", cudaMemcpy(os->rope_cos, d->rope_cos, rope, cudaMemcpyHostToDevice));
    LLM_CU_TRY(os, "rope tables", cudaMemcpy(os->rope_sin, d->rope_sin, rope, cudaMemcpyHostToDevice));
    LLM_CU_TRY(os, "synchronize", cudaDeviceSynchronize());
    {   /* as cu_pinned: kept only when created */
        cudaEvent_t ev = NULL;
        LLM_CU_TRY(os, "cudaEventCreate", cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        os->staged = ev;
    }
    return GRZO_OK;
}

/* Above 48 KiB the attention kernel's dynamic shared memory needs an opt-in (H100: up to
   227 KiB). The attribute belongs to the kernel, not to a state: only ever raise it, so a
   later state with a smaller head_dim does not break an earlier one. */
static grzo_status cu_opt_in_shared(llm_ops_state *os) {
    struct cudaFuncAttributes fa;
    if (os->att_smem <= 48 * 1024) return GRZO_OK;
    LLM_CU_TRY(os, "attention kernel attributes", cudaFuncGetAttributes(&fa, llm__k_attention));
    if ((size_t)fa.maxDynamicSharedSizeBytes >= os->att_smem) return GRZO_OK;
    LLM_CU_TRY(os, "attention shared memory",
               cudaFuncSetAttribute(llm__k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)os->att_smem));
    return GRZO_OK;
}

/* The cuBLAS handle of the GEMM attention, on the backend's stream, with a workspace of
   backend memory (so that the backend's accounting sees it) and fp32 products (no TF32:
   the fused kernel's precision, so the two compare as forms of one computation). */
#define LLM_BLAS_WORKSPACE ((size_t)4 << 20)
static grzo_status cu_create_blas(llm_ops_state *os) {
    grzo_status s;
    cublasHandle_t h = NULL;
    LLM_BLAS_TRY(os, "cublasCreate", cublasCreate(&h));   /* as cu_pinned: kept only when created */
    os->blas = h;
    LLM_BLAS_TRY(os, "cublasSetStream", cublasSetStream(os->blas, os->stream));
    LLM_BLAS_TRY(os, "cublasSetMathMode", cublasSetMathMode(os->blas, CUBLAS_PEDANTIC_MATH));
    s = grzo_backend_alloc(os->d.be, LLM_BLAS_WORKSPACE, &os->blas_ws);
    if (s != GRZO_OK) {
        snprintf(os->err, sizeof os->err, "cannot allocate the attention's cuBLAS workspace (%zu bytes)", LLM_BLAS_WORKSPACE);
        return s;
    }
    LLM_BLAS_TRY(os, "cublasSetWorkspace", cublasSetWorkspace(os->blas, os->blas_ws, LLM_BLAS_WORKSPACE));
    return GRZO_OK;
}

static grzo_status cu_create(const llm_ops_desc *d, llm_ops_state **out, char *err, size_t errlen) {
    llm_ops_state *os;
    void *stream = NULL;
    grzo_status s;
    *out = NULL;
    if (grzo_backend_cuda_stream(d->be, &stream) != GRZO_OK) {
        snprintf(err, errlen, "llm ops (cuda): the backend is not the CUDA backend");
        return GRZO_ERR_INVALID_ARG;
    }
    if (d->attention < LLM_ATTENTION_AUTO || d->attention > LLM_ATTENTION_GEMM) {
        snprintf(err, errlen, "llm ops (cuda): attention %d is none of auto, fused, gemm", (int)d->attention);
        return GRZO_ERR_INVALID_ARG;
    }
    if (d->head_dim > LLM_ATT_MAX_HD || d->max_seqs > 65535) {
        snprintf(err, errlen, "llm ops (cuda): head_dim %d (at most %d) or %d sequences per batch (at most 65535) "
                 "is beyond the attention kernel", d->head_dim, LLM_ATT_MAX_HD, d->max_seqs);
        return GRZO_ERR_UNSUPPORTED;
    }
    os = (llm_ops_state *)calloc(1, sizeof *os);
    if (!os) {
        snprintf(err, errlen, "llm ops (cuda): out of host memory");
        return GRZO_ERR_OUT_OF_MEMORY;
    }
    os->d = *d;
    os->stream = (cudaStream_t)stream;
    os->att_smem = ((size_t)LLM_ATT_TK * (d->head_dim + 1) + (size_t)LLM_ATT_TK * d->head_dim +
                    (size_t)LLM_ATT_TQ * d->head_dim + (size_t)LLM_ATT_WARPS * 32) * sizeof(float);
    s = cu_create_tables(os);
    if (s == GRZO_OK) s = cu_opt_in_shared(os);
    if (s == GRZO_OK && d->attention != LLM_ATTENTION_FUSED) s = cu_create_blas(os);   /* AUTO may take the GEMM form */
    if (s != GRZO_OK) {
        snprintf(err, errlen, "llm ops (cuda): %s", os->err);
        cu_destroy(os);
        return s;
    }
    *out = os;
    return GRZO_OK;
}

static grzo_status cu_copy_in(llm_ops_state *os, void *dev, void *pinned, const void *host, size_t bytes) {
    if (bytes == 0) return GRZO_OK;
    memcpy(pinned, host, bytes);
    LLM_CU_TRY(os, "upload_layout", cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, os->stream));
    return GRZO_OK;
}

static grzo_status cu_upload_layout(llm_ops_state *os, const llm_layout *h, int32_t *ids) {
    size_t S = (size_t)h->n_seqs, R = (size_t)h->n_rows, O = (size_t)h->n_out;
    int32_t i;
    grzo_status s = GRZO_OK;
    if (os->staged_pending) LLM_CU_TRY(os, "staging", cudaEventSynchronize(os->staged));   /* normally long done */
    os->n_seqs = h->n_seqs;
    os->n_out = h->n_out;
    os->max_len = 0;
    for (i = 0; i < h->n_seqs; i++)
        if (h->seq_len[i] > os->max_len) os->max_len = h->seq_len[i];
    if (s == GRZO_OK) s = cu_copy_in(os, ids, os->h_ids, h->ids, R * 4);
    if (s == GRZO_OK) s = cu_copy_in(os, os->seq_row0, os->h_seq_row0, h->seq_row0, S * 8);
    if (s == GRZO_OK) s = cu_copy_in(os, os->seq_pad, os->h_seq_pad, h->seq_pad, S * 4);
    if (s == GRZO_OK) s = cu_copy_in(os, os->seq_len, os->h_seq_len, h->seq_len, S * 4);
    if (s == GRZO_OK) s = cu_copy_in(os, os->row_pos, os->h_row_pos, h->row_pos, R * 4);
    if (s == GRZO_OK) s = cu_copy_in(os, os->out_row, os->h_out_row, h->out_row, O * 8);
    if (s != GRZO_OK) return s;
    LLM_CU_TRY(os, "staging", cudaEventRecord(os->staged, os->stream));
    os->staged_pending = 1;
    return GRZO_OK;
}

static grzo_status cu_rms_normalize(llm_ops_state *os, const float *x, float *y, int64_t n_rows, int32_t dim, float eps) {
    if (n_rows == 0) return GRZO_OK;
    llm__k_rms_normalize<<<llm__cu_warp_blocks(n_rows), LLM_CU_THREADS, 0, os->stream>>>(x, y, n_rows, dim, eps);
    LLM_CU_LAUNCHED(os, "rms_normalize kernel");
    return GRZO_OK;
}

static grzo_status cu_rope(llm_ops_state *os, float *t, int64_t n_rows, int32_t n_heads) {
    int64_t n = n_rows * n_heads * (os->d.head_dim / 2);
    if (n == 0) return GRZO_OK;
    llm__k_rope<<<llm__cu_blocks(n), LLM_CU_THREADS, 0, os->stream>>>(t, os->row_pos, os->rope_cos, os->rope_sin, n_rows,
                                                                       n_heads, os->d.head_dim);
    LLM_CU_LAUNCHED(os, "rope kernel");
    return GRZO_OK;
}

/* The GEMM attention's scratch for the batch in flight: grown when a batch needs more (the
   old buffer's cudaFree waits for the work using it), kept for the next batches. */
static grzo_status cu_attention_scratch(llm_ops_state *os, size_t bytes) {
    grzo_status s;
    if (bytes <= os->att_bytes) return GRZO_OK;
    if (os->att_buf) grzo_backend_free(os->d.be, os->att_buf);
    os->att_buf = NULL;
    os->att_bytes = 0;
    s = grzo_backend_alloc(os->d.be, bytes, (void **)&os->att_buf);
    if (s != GRZO_OK) {
        snprintf(os->err, sizeof os->err, "attention (gemm): cannot allocate %zu bytes of device memory for the padded "
                 "heads and scores (use the fused attention)", bytes);
        return s;
    }
    os->att_bytes = bytes;
    return GRZO_OK;
}

/* one strided batched fp32 GEMM of attention_gemm.h's shapes on the attention's handle */
static grzo_status cu_batched_gemm(llm_ops_state *os, const char *what, llm_att_gemm g, const float *A, const float *B, float *C) {
    const float one = 1.0f, zero = 0.0f;
    cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    LLM_BLAS_TRY(os, what, cublasSgemmStridedBatched(os->blas, ta, tb, g.m, g.n, g.k, &one, A, g.lda, g.stride_a, B, g.ldb,
                                                     g.stride_b, &zero, C, g.ldc, g.stride_c, g.batch));
    return GRZO_OK;
}

/* steps 1-5 of the GEMM attention (above), the batch's keys and values (past < 0) */
static grzo_status cu_attention_gemm(llm_ops_state *os, float *q, const float *k, const float *v) {
    const llm_ops_desc *d = &os->d;
    int32_t L = os->max_len, hd = d->head_dim, batch = os->n_seqs * d->n_heads;
    int64_t blk = (int64_t)L * hd, n = (int64_t)batch * blk;
    float *Qp, *Kp, *Vp, *P;
    grzo_status s = cu_attention_scratch(os, llm_att_gemm_scratch_bytes(os->n_seqs, d->n_heads, L, hd));
    if (s != GRZO_OK) return s;
    Qp = os->att_buf;
    Kp = Qp + n;
    Vp = Kp + n;
    P = Vp + n;
    llm__k_att_gather<<<llm__cu_blocks(n), LLM_CU_THREADS, 0, os->stream>>>(q, k, v, os->seq_row0, os->seq_pad, os->seq_len, d->n_heads,
                                                                d->n_kv_heads, hd, L, 1.0f / sqrtf((float)hd), n, Qp, Kp, Vp);
    LLM_CU_LAUNCHED(os, "attention (gemm) gather kernel");
    s = cu_batched_gemm(os, "attention scores (cublasSgemmStridedBatched)", llm_att_scores_gemm(L, hd, batch), Kp, Qp, P);
    if (s != GRZO_OK) return s;
    llm__k_att_softmax<<<llm__cu_warp_blocks((int64_t)batch * L), LLM_CU_THREADS, 0, os->stream>>>(
        P, os->seq_pad, os->seq_len, d->n_heads, L, (int64_t)batch * L);
    LLM_CU_LAUNCHED(os, "attention (gemm) softmax kernel");
    /* the output goes into Qp, read no more */
    s = cu_batched_gemm(os, "attention values (cublasSgemmStridedBatched)", llm_att_values_gemm(L, hd, batch), Vp, P, Qp);
    if (s != GRZO_OK) return s;
    llm__k_att_scatter<<<llm__cu_blocks(n), LLM_CU_THREADS, 0, os->stream>>>(q, Qp, os->seq_row0, os->seq_pad, os->seq_len, d->n_heads, hd,
                                                                 L, n);
    LLM_CU_LAUNCHED(os, "attention (gemm) scatter kernel");
    return GRZO_OK;
}

/* the form of the batch in flight (no cache): GEMM when asked for, or at AUTO while its scratch
   stays within attention_gemm.h's bound */
static int cu_attention_takes_gemm(const llm_ops_state *os) {
    if (os->d.attention == LLM_ATTENTION_GEMM) return 1;
    return os->d.attention == LLM_ATTENTION_AUTO &&
           llm_att_auto_uses_gemm(llm_att_gemm_scratch_bytes(os->n_seqs, os->d.n_heads, os->max_len, os->d.head_dim));
}

static grzo_status cu_attention(llm_ops_state *os, float *q, const float *k, const float *v, int32_t past, int64_t n_rows) {
    dim3 grid;
    if (n_rows == 0 || os->n_seqs == 0) return GRZO_OK;
    /* with a cache (generation: one sequence, a few rows) the fused kernel serves every choice */
    if (past < 0 && cu_attention_takes_gemm(os)) return cu_attention_gemm(os, q, k, v);
    grid.x = (unsigned)((os->max_len + LLM_ATT_TQ - 1) / LLM_ATT_TQ);
    grid.y = (unsigned)os->d.n_heads;
    grid.z = (unsigned)os->n_seqs;
    llm__k_attention<<<grid, LLM_ATT_WARPS * 32, os->att_smem, os->stream>>>(
        q, k, v, os->seq_row0, os->seq_pad, os->seq_len, past, os->d.n_heads, os->d.n_kv_heads, os->d.head_dim,
        1.0f / sqrtf((float)os->d.head_dim));
    LLM_CU_LAUNCHED(os, "attention kernel");
    return GRZO_OK;
}

static grzo_status cu_swiglu(llm_ops_state *os, float *h1, const float *h3, int64_t n) {
    if (n == 0) return GRZO_OK;
    llm__k_swiglu<<<llm__cu_blocks(n), LLM_CU_THREADS, 0, os->stream>>>(h1, h3, n);
    LLM_CU_LAUNCHED(os, "swiglu kernel");
    return GRZO_OK;
}

static grzo_status cu_add_into(llm_ops_state *os, float *x, const float *y, int64_t n) {
    if (n == 0) return GRZO_OK;
    llm__k_add_into<<<llm__cu_blocks(n), LLM_CU_THREADS, 0, os->stream>>>(x, y, n);
    LLM_CU_LAUNCHED(os, "add_into kernel");
    return GRZO_OK;
}

static grzo_status cu_gather_rows(llm_ops_state *os, const float *x, float *y, int32_t dim) {
    if (os->n_out == 0) return GRZO_OK;
    llm__k_gather_rows<<<llm__cu_blocks(os->n_out * dim), LLM_CU_THREADS, 0, os->stream>>>(x, y, os->out_row, os->n_out, dim);
    LLM_CU_LAUNCHED(os, "gather_rows kernel");
    return GRZO_OK;
}

static grzo_status cu_cache_append(llm_ops_state *os, float *cache, int64_t first, const float *src, int64_t n) {
    if (n == 0) return GRZO_OK;
    LLM_CU_TRY(os, "cache_append", cudaMemcpyAsync(cache + first, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                                   os->stream));
    return GRZO_OK;
}

static grzo_status cu_token_logprob(llm_ops_state *os, const float *logits, int32_t vocab, const int32_t *target,
                                    int64_t n, double *out) {
    if (n == 0) return GRZO_OK;
    if (n > os->d.max_outputs) {
        snprintf(os->err, sizeof os->err, "token_logprob: %lld rows exceed max_outputs %lld", (long long)n,
                 (long long)os->d.max_outputs);
        return GRZO_ERR_INVALID_ARG;
    }
    memcpy(os->h_target, target, (size_t)n * 4);
    LLM_CU_TRY(os, "token_logprob", cudaMemcpyAsync(os->target, os->h_target, (size_t)n * 4, cudaMemcpyHostToDevice, os->stream));
    llm__k_token_logprob<<<(unsigned)n, LLM_CU_THREADS, 0, os->stream>>>(logits, vocab, os->target, os->val);
    LLM_CU_LAUNCHED(os, "token_logprob kernel");
    LLM_CU_TRY(os, "token_logprob", cudaMemcpyAsync(os->h_val, os->val, (size_t)n * 8, cudaMemcpyDeviceToHost, os->stream));
    LLM_CU_TRY(os, "token_logprob", cudaStreamSynchronize(os->stream));   /* the values go to the host: the one wait */
    memcpy(out, os->h_val, (size_t)n * 8);
    return GRZO_OK;
}

static const char *cu_last_error(const llm_ops_state *os) { return os ? os->err : ""; }

extern "C" const llm_ops llm_ops_cuda = {
    "cuda", cu_create, cu_destroy, cu_upload_layout, cu_rms_normalize, cu_rope, cu_attention,
    cu_swiglu, cu_add_into, cu_gather_rows, cu_cache_append, cu_token_logprob, cu_last_error};
