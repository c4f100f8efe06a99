/* emu.h - the CUDA backend run on the CPU, for tests where no GPU is (tests/cuda_emu).

   launches.py rewrites every kernel launch of backends/grzo_cuda.cu into emu_launch(), which
   runs the kernel once per (block, thread), one after another; emu_runtime.cpp stands in for
   the CUDA runtime and cuBLAS calls the backend makes (device memory tracked, cuBLAS's
   column-major GEMM with its argument checks). The real CUDA headers give the types and the
   host versions of the fp16/bf16 conversions; everything else is the backend's own code, so
   tests/test_cuda.c checks its indexing, its cuBLAS layouts, its RNG streams and its host
   logic without a GPU. Where the CPU runs FMA, the kernels are compiled with -mfma
   -ffp-contract=fast (tests/meson.build emu_fma), so a * b + c contracts as nvcc contracts it
   by default (the places differ: GCC's choices, not nvcc's). cuBLAS in TF32 math keeps each
   fp32 input to 10 mantissa bits (rounded to nearest, emu_runtime.cpp), so that a GEMM meant
   to be exact fp32 but run in TF32 errs here as on the device. What it cannot check:
   concurrency, the tensor cores' own rounding and summation order, nvcc's exact
   contractions, real launch limits beyond the ones checked here. Kernels with shared memory
   or barriers are refused by launches.py, unless it rewrites the source with --cooperative
   (EMU_COOPERATIVE, examples/llm/ops_cuda.cu): then each thread of a block runs as a
   coroutine (emu_runtime.cpp, emu_coop_run), __syncthreads() waits for the block and a warp
   shuffle or __syncwarp() for its warp, shared memory is block-wide storage filled with 0xFF
   bytes at each block (launches.py's docstring); a barrier not reached by every thread of the
   block (or a full-mask shuffle or __syncwarp by every lane of the warp) at the same line is
   reported, not hung.
   Faults: emu_fault.h makes the N-th fallible runtime or cuBLAS call fail (EMU_FAIL_AT=N) as a
   GPU's would, counts the calls and reports the device memory left at exit (EMU_COUNT_CALLS). */
#ifndef GRZO_CUDA_EMU_H
#define GRZO_CUDA_EMU_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRZO_RNG_DEVICE
#include "backends/grzo_cuda.h"
#include "emu_fault.h"   /* the fault injector: EMU_FAIL_AT, EMU_COUNT_CALLS (its header says what fails how) */

static inline unsigned int emu_float_as_uint(float f) {
    unsigned int u;
    memcpy(&u, &f, 4);
    return u;
}
#define __float_as_uint emu_float_as_uint

/* the built-in variables of the thread being run */
extern uint3 emu_blockIdx, emu_threadIdx;
extern dim3 emu_blockDim, emu_gridDim;
#define blockIdx emu_blockIdx
#define threadIdx emu_threadIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim

/* emu_runtime.cpp */
int emu_is_device(const void *p, size_t bytes);   /* [p, p + bytes) inside one cudaMalloc'd region */
void emu_report(const char *fmt, ...);            /* a misuse: printed, and the test fails at exit */
void emu_set_launch_error(cudaError_t e);

struct emu_cfg_t {
    dim3 g, b;
    size_t smem;
    cudaStream_t s;
};
static inline emu_cfg_t emu_cfg(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0) {
    emu_cfg_t c;
    c.g = g;
    c.b = b;
    c.smem = smem;
    c.s = s;
    return c;
}

/* launch checks of emu_runtime.cpp: the stream (0 or a live one), the dynamic shared memory
   against the kernel's limit (48 KiB, or its cudaFuncSetAttribute opt-in); 0 refuses */
int emu_check_launch(const char *name, const void *kernel, size_t smem, cudaStream_t s);

#ifdef EMU_COOPERATIVE
/* emu_runtime.cpp: the blocks one after another, each block's threads as coroutines that call
   body(arg); the built-in variables are set before each thread resumes */
void emu_coop_run(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *arg);
void *emu_dynamic_shared(size_t align);           /* this launch's dynamic shared memory */
void emu_shared_fresh(void *p, size_t bytes);     /* a __shared__ array: 0xFF at the block's first use */
void emu_syncthreads_at(int line);
unsigned long long emu_shfl_bits(int line, unsigned mask, unsigned long long bits, int src_lane);
int emu_lane(void);                               /* the running thread's lane in its warp */
#define __syncthreads() emu_syncthreads_at(__LINE__)
/* __syncwarp(mask): the warp's 32 threads meet (a full-mask shuffle's wait without the
   exchange); the mask is optional, as CUDA's */
void emu_syncwarp_at(int line, unsigned mask);
static inline unsigned emu_syncwarp_mask(unsigned mask = 0xFFFFFFFFu) { return mask; }
#define __syncwarp(...) emu_syncwarp_at(__LINE__, emu_syncwarp_mask(__VA_ARGS__))
template <typename T> static inline T emu_shfl(int line, unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8, "warp shuffle of more than 8 bytes");
    unsigned long long b = 0;
    memcpy(&b, &v, sizeof v);
    b = emu_shfl_bits(line, mask, b, src);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
/* the source lanes as the CUDA programming guide defines them for a width (a power of 2 <= 32) */
template <typename T> static inline T emu_shfl_sync(int line, unsigned mask, T v, int src, int width = 32) {
    int lane = emu_lane();
    return emu_shfl(line, mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T> static inline T emu_shfl_xor_sync(int line, unsigned mask, T v, int lane_mask, int width = 32) {
    int lane = emu_lane(), src = lane ^ lane_mask;
    return emu_shfl(line, mask, v, src >= (lane & ~(width - 1)) + width ? lane : src);
}
template <typename T> static inline T emu_shfl_down_sync(int line, unsigned mask, T v, unsigned delta, int width = 32) {
    int lane = emu_lane();
    return emu_shfl(line, mask, v, (lane & (width - 1)) + (int)delta >= width ? lane : lane + (int)delta);
}
template <typename T> static inline T emu_shfl_up_sync(int line, unsigned mask, T v, unsigned delta, int width = 32) {
    int lane = emu_lane();
    return emu_shfl(line, mask, v, (lane & (width - 1)) - (int)delta < 0 ? lane : lane - (int)delta);
}
#define __shfl_sync(...) emu_shfl_sync(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) emu_shfl_xor_sync(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) emu_shfl_down_sync(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) emu_shfl_up_sync(__LINE__, __VA_ARGS__)

/* the device intrinsics ops_cuda.cu uses: IEEE single operations rounded to nearest (the host
   compiler contracts nothing into an fma here: no FMA instructions at the default -march) */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
/* the runtime's C++ forms that take the kernel itself (cuda_runtime.h has them for nvcc only) */
template <typename... P> static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, void (*k)(P...)) {
    return cudaFuncGetAttributes(a, (const void *)k);
}
template <typename... P> static inline cudaError_t cudaFuncSetAttribute(void (*k)(P...), cudaFuncAttribute at, int v) {
    return cudaFuncSetAttribute((const void *)k, at, v);
}
#endif

/* A kernel's pointer arguments must be device memory (or NULL). */
template <typename T> static inline void emu_check_arg(const T &, const char *) {}
template <typename T> static inline void emu_check_arg(T *const &p, const char *k) {
    if (p && !emu_is_device(p, 1)) emu_report("kernel %s: pointer argument %p is not device memory", k, (const void *)p);
}
static inline void emu_check_arg(const grzo_param &p, const char *k) {
    if (p.data && !emu_is_device(p.data, 1)) emu_report("kernel %s: grzo_param.data %p is not device memory", k, p.data);
}
/* the segment tables (launches.py puts this after the type's definition) */
#define EMU_CHECK_SEGS(T)                                                                              \
    static inline void emu_check_arg(const T &s, const char *k) {                                      \
        if (s.n > 0 && (!emu_is_device(s.offsets, (size_t)(s.n + 1) * 8) ||                           \
                        !emu_is_device(s.example, (size_t)s.n * 8) || !emu_is_device(s.sign, (size_t)s.n))) \
            emu_report("kernel %s: segment tables are not device memory", k);                          \
    }

template <typename T> struct emu_id {
    typedef T type;
};
template <typename... P>
static void emu_launch_impl(const char *name, emu_cfg_t c, void (*k)(P...), typename emu_id<P>::type... args) {
    int checked[] = {0, (emu_check_arg(args, name), 0)...};
    (void)checked;
    if (c.g.x < 1 || c.g.x > 2147483647u || c.g.y < 1 || c.g.y > 65535 || c.g.z < 1 || c.g.z > 65535 || c.b.x < 1 ||
        c.b.x * c.b.y * c.b.z > 1024) {
        emu_report("kernel %s: bad launch configuration grid (%u,%u,%u) block (%u,%u,%u)", name, c.g.x, c.g.y, c.g.z, c.b.x,
                   c.b.y, c.b.z);
        emu_set_launch_error(cudaErrorInvalidConfiguration);
        return;
    }
    if (!emu_check_launch(name, (const void *)k, c.smem, c.s)) return;
#ifdef EMU_COOPERATIVE
    auto call = [&]() { k(args...); };
    emu_coop_run(name, (const void *)k, c.g, c.b, c.smem, [](void *p) { (*(decltype(call) *)p)(); }, &call);
#else
    emu_gridDim = c.g;
    emu_blockDim = c.b;
    for (unsigned bz = 0; bz < c.g.z; bz++)
        for (unsigned by = 0; by < c.g.y; by++)
            for (unsigned bx = 0; bx < c.g.x; bx++)
                for (unsigned tz = 0; tz < c.b.z; tz++)
                    for (unsigned ty = 0; ty < c.b.y; ty++)
                        for (unsigned tx = 0; tx < c.b.x; tx++) {
                            emu_blockIdx.x = bx, emu_blockIdx.y = by, emu_blockIdx.z = bz;
                            emu_threadIdx.x = tx, emu_threadIdx.y = ty, emu_threadIdx.z = tz;
                            k(args...);
                        }
#endif
}
#define emu_launch(cfg, k, ...) emu_launch_impl(#k, cfg, k, __VA_ARGS__)

#endif
