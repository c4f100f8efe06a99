/* grzo_cuda.h - the CUDA backend of grzo (cuBLAS + grzo's kernels).

   The implementation is backends/grzo_cuda.cu, compiled by nvcc into its own object
   (Meson: -Dcuda=enabled builds it). Link it beside one C translation unit that defines
   GRZO_IMPLEMENTATION, then:

       grzo_backend be;
       if (grzo_backend_cuda_create(&(grzo_cuda_desc){ .device = 0 }, &be) == GRZO_OK) ...

   Memory: parameters and activations are device memory, allocated with
   grzo_backend_alloc and filled with grzo_backend_upload; losses stay on the host.
   Storage types: F32, BF16 and F16 parameter blocks (activations are fp32; products
   accumulate in fp32). Updates to BF16/F16 blocks round stochastically, with the random
   bits drawn from the counter RNG (grzo_update_args.round_stream: GRZO_STREAM_ROUND = 3,
   in-place MeZO's three shifts 4..6, FZOO's N probe updates told apart by round_draw, so
   that their roundings are independent), so an update below half an ulp still moves
   the weight with the right probability instead of being lost (see the zo-anchors note on
   MeZO's fp16 updates), and the result is reproducible.
   Random numbers come from the same source as the CPU's (grzo.h's RNG primitives compiled
   for the device): the perturbations are bit-identical to the CPU backend's.
   The perturbed linear uses the two-GEMM form Y = X W^T + sigma ((X (.) s) U^T) (.) r in
   chunks of output rows (U regenerated per chunk, never stored beyond the chunk); the
   shared-perturbation estimators (MeZO, FZOO) form W + sigma U per chunk and run one GEMM.
   Transient device memory per call: the chunked pieces (a chunk of W, of U and of the
   perturbation's product) fit in desc.transient_bytes (one output row at the least); on top
   come the whole-layer pieces, which are not chunked: with Flipout the signs r, s
   (B (d_out + d_in) floats) and X (.) s (N d_in floats); in fast math with 16-bit weights
   the 16-bit copy of X (2 N d_in bytes); quantized weights' row scales (d_out floats); the
   low-rank factors and their product with X (r (d_out + d_in + N) floats). The backend's
   memory report (grzo_backend_cuda_memory) counts all of it.

   MATH MODES (desc.math)
     GRZO_CUDA_MATH_PEDANTIC (0, default): fp32 GEMMs without TF32 (16-bit weights widened to
       fp32 per chunk). The parity tests against the CPU use it.
     GRZO_CUDA_MATH_FAST: 16-bit weights (BF16/F16) go to the tensor cores as they are
       (cublasGemmEx, 16-bit inputs, CUBLAS_COMPUTE_32F, fp32 output); the layer input is
       rounded to the weight's type per GEMM (XH = rn(X)). fp32 weights use TF32 tensor ops.
       Every perturbed linear takes the two-product form Y = X W^T + sigma ((X (.) s) U^T) (.) r
       (shared Z: r = s = 1), so sigma U is never added to W in a low-precision operand
       (that would round sigma U at W's scale: bf16(W + sigma U) errs by up to 2^-8 |W|, 8 % of
       sigma for |W| = 0.02, sigma = 1e-3).
     The perturbation's own rounding in fast math with 16-bit weights. Exact: U is +-1
       (Rademacher) and so are r, s, so U16 = U and XH (.) s is a sign flip of XH. Rounded:
       XH = rn16(x), |XH_k - x_k| <= u |x_k| with the unit roundoff u = 2^-8 (bf16: 8 significant
       bits) or 2^-11 (f16), and the fp32
       accumulation of K products, <= K 2^-24 sum_k |x_k|. So per output j
           |sigma P_j - sigma (Z x)_j| <= sigma (u + K 2^-24) sum_k |Z_jk x_k|  (worst case;
                                              = ||x||_1 for Rademacher U)
       and, the rounding errors of x being independent of U's signs, its rms is
           ~ sigma u ||x||_2 / sqrt(3)   against   rms(sigma (Z x)_j) = sigma ||x||_2,
       (an upper estimate: round-to-nearest errors are uniform, rms <= u/sqrt(3) relative), i.e.
       the perturbation is computed to <= 2.3e-3 relative rms in bf16 (f16: 2.8e-4), far below
       sigma |Z x| itself. Gaussian U adds its own rounding, U16 = rn16(U):
       u doubles (u -> 2u, to first order), and the update, which regenerates U in fp32, moves along a
       direction that differs from the perturbation's by at most u relative per element.
       tests/test_cuda.c measures this against an fp64 CPU reference. The TF32 form (fp32
       weights in fast math) has u = 2^-11 (TF32 keeps 10 stored mantissa bits).
     Updates of 16-bit parameters keep stochastic rounding in both modes.

   VARIANTS (grzo.h section 3c; caps.variants has all three): every element of a variant's
     base B (mask, low-rank (U V^T)_jk, stochastic rounding, fake-quantized weight) comes from
     grzo.h's host/device functions, so the values are the CPU's. Sparse and quantized linears
     form q(W) + sign sigma B (.) r s^T per chunk of output rows and segment and run one fp32
     GEMM per segment; in fast math that GEMM is TF32, so sigma B is rounded at W's scale
     (2^-11 |W|): use pedantic math where the perturbation must be exact. Low-rank linears run
     X W^T plus the two thin GEMMs ((X (.) s) V) and (.) U^T, in chunks of output columns. Not
     yet run on a GPU at the time of writing: tests/test_cuda.c checks three steps of each
     variant and core against the CPU backend.

   SYNCHRONIZATION
     Operations only enqueue work on the backend's stream (grzo_backend_cuda_stream); the
     segment tables and update coefficients are uploaded once per distinct table from pinned
     memory (asynchronous), and a token id out of range raises a device flag that the
     synchronize entry (grzo_pass_end calls it once per pass) and every download report
     (GRZO_ERR_INVALID_ARG). upload stays synchronous (its source may be reused at once).
     CUDA graphs, not built, measured not worth it: a captured pass would replay its ~200-600
     launches at once, and bench_gpu --queued bounds what that could gain (it holds the stream
     while the host enqueues a pass, so its launches run back to back). On an H200 (2026-11-30,
     bench/gpu/run.sh --stages attention, B = 16, contexts of ~256 tokens) the floor pass lost
     0.1 % (SmolLM2-135M, both attention forms) and 0.3 % / 3.3 % (Llama-3-8B shape, fused /
     cuBLAS attention) to launches: a few percent at most, even with SmolLM2's small kernels.
     Should a smaller model or batch become launch-bound, capture needs the pass's
     shapes and tables fixed, which grzo_pass_begin could key on (B, offsets).

   MEMORY ACCOUNTING
     Every cudaMalloc the backend makes (grzo_backend_alloc, scratch, cached tables, the flag)
     and the cuBLAS workspace it hands cuBLAS (32 MiB) count in grzo_backend_cuda_memory's
     bytes_now and high-water mark bytes_peak (reset with grzo_backend_cuda_reset_peak);
     device_free/device_total are cudaMemGetInfo's, for a cross-check (they also see the CUDA
     context, other processes, and memory a model allocates without the backend).
   Without a usable GPU (no driver, no device) creation fails with GRZO_ERR_BACKEND;
   grzo_cuda_device_count() returns 0 then, which tests use to skip. */
#ifndef GRZO_CUDA_H
#define GRZO_CUDA_H

#include "../grzo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum grzo_cuda_math {
    GRZO_CUDA_MATH_PEDANTIC = 0, /* fp32 GEMMs, no TF32: the parity tests' mode */
    GRZO_CUDA_MATH_FAST = 1      /* 16-bit weights on the tensor cores, TF32 for fp32 weights */
} grzo_cuda_math;

typedef struct grzo_cuda_desc {
    int32_t device;              /* CUDA device index (default 0); every call of the backend
                                    makes it the calling thread's current device and leaves it
                                    so (a thread that drives several devices sets its own again) */
    size_t transient_bytes;      /* 0: 256 MiB; bound on per-call scratch */
    void *stream;                /* a cudaStream_t to run on; NULL: the backend makes one */
    grzo_cuda_math math;         /* default PEDANTIC; other values: GRZO_ERR_INVALID_ARG */
    char *error;                 /* optional: where a failed create writes why, one line of at
                                    most error_size bytes with its NUL (the failing call and
                                    its CUDA or cuBLAS status); untouched on success */
    size_t error_size;
} grzo_cuda_desc;

typedef struct grzo_cuda_memory {
    size_t bytes_now;            /* device bytes the backend holds now (workspace included) */
    size_t bytes_peak;           /* high-water mark of bytes_now since creation or reset */
    size_t blas_workspace;       /* the cuBLAS workspace, part of both */
    size_t device_free, device_total;   /* cudaMemGetInfo, for cross-checks */
} grzo_cuda_memory;

GRZO_API grzo_status grzo_backend_cuda_create(const grzo_cuda_desc *desc, grzo_backend *out);
GRZO_API int grzo_cuda_device_count(void);   /* 0 when no driver or no device */
/* The cudaStream_t every operation of this backend runs on, so that code working beside
   grzo (a model's own kernels) orders its work after grzo's without synchronizing.
   GRZO_ERR_INVALID_ARG when be is not a CUDA backend. */
GRZO_API grzo_status grzo_backend_cuda_stream(const grzo_backend *be, void **stream_out);
/* Device memory the backend holds (see MEMORY ACCOUNTING); GRZO_ERR_INVALID_ARG when be is
   not a CUDA backend. reset_peak sets the high-water mark to what is held now. */
GRZO_API grzo_status grzo_backend_cuda_memory(const grzo_backend *be, grzo_cuda_memory *out);
GRZO_API grzo_status grzo_backend_cuda_reset_peak(const grzo_backend *be);

#ifdef __cplusplus
}
#endif
#endif /* GRZO_CUDA_H */
