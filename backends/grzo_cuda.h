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
   bits drawn from the counter RNG (stream 3), so an update below half an ulp still moves
   the weight with the right probability instead of being lost (see the zo-anchors note on
   MeZO's fp16 updates), and the result is reproducible.
   Random numbers come from the same source as the CPU's (grzo.h's RNG primitives compiled
   for the device): the perturbations are bit-identical to the CPU backend's.
   The perturbed linear uses the two-GEMM form Y = X W^T + sigma ((X (.) s) U^T) (.) r in
   chunks of output rows (U regenerated per chunk, never stored beyond the chunk); the
   shared-perturbation estimators (MeZO, FZOO) form W + sigma U per chunk and run one GEMM.
   Transient device memory per call is bounded by desc.transient_bytes.
   Without a usable GPU (no driver, no device) creation fails with GRZO_ERR_BACKEND;
   grzo_cuda_device_count() returns 0 then, which tests use to skip. */
#ifndef GRZO_CUDA_H
#define GRZO_CUDA_H

#include "../grzo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grzo_cuda_desc {
    int32_t device;              /* CUDA device index (default 0) */
    size_t transient_bytes;      /* 0: 256 MiB; bound on per-call scratch */
    void *stream;                /* a cudaStream_t to run on; NULL: the backend makes one */
} grzo_cuda_desc;

GRZO_API grzo_status grzo_backend_cuda_create(const grzo_cuda_desc *desc, grzo_backend *out);
GRZO_API int grzo_cuda_device_count(void);   /* 0 when no driver or no device */
/* The cudaStream_t every operation of this backend runs on, so that code working beside
   grzo (a model's own kernels) orders its work after grzo's without synchronizing.
   GRZO_ERR_INVALID_ARG when be is not a CUDA backend. */
GRZO_API grzo_status grzo_backend_cuda_stream(const grzo_backend *be, void **stream_out);

#ifdef __cplusplus
}
#endif
#endif /* GRZO_CUDA_H */
