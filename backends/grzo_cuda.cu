/* grzo_cuda.cu - the CUDA backend of grzo. See grzo_cuda.h for the contract.
   Each kernel has a plain CPU counterpart in backends/grzo_cpu.h (and the literal SPEC
   reading in grzo.h's reference backend); tests/test_cuda.c checks one against the other.

   No host synchronization inside a pass: operations only enqueue work on the backend's
   stream. The small host tables an operation needs (segment offsets, examples and signs;
   update coefficients) go through a cache of device copies keyed by their bytes, so that
   the ~200 operations of a pass, which share one or two segment tables, upload each table
   once; a miss copies from a pinned staging buffer (truly asynchronous) and records an
   event, and the staging buffer is only rewritten after that event (it has long completed
   by then, unless more than GRZO__CU_TABLES different tables are in flight). A bad token id
   raises a device flag that the synchronize entry (called by grzo_pass_end once per pass)
   and every download read back. */
#define GRZO_RNG_DEVICE /* grzo.h's RNG primitives as __host__ __device__ functions */
#include "grzo_cuda.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRZO__CU_THREADS 256
#define GRZO__CU_TABLES 16                        /* cached host tables (segments, coefficients) */
#define GRZO__CU_BLAS_WORKSPACE ((size_t)32 << 20) /* cuBLAS's recommendation for Hopper */

typedef struct grzo__cu_table {   /* one host table and its device copy */
    char *host;                   /* pinned: the bytes last uploaded from it (the cache key) */
    char *dev;
    size_t cap, len;
    cudaEvent_t uploaded;         /* recorded after the copy that reads `host` */
    uint64_t last_use;            /* 0: empty */
} grzo__cu_table;

typedef struct grzo__cu_allocation { void *ptr; size_t bytes; } grzo__cu_allocation;

struct grzo__cuda {
    int device;
    int math;                    /* grzo_cuda_math */
    cudaStream_t stream;
    int own_stream;
    cublasHandle_t blas;
    size_t transient;
    void *scratch;               /* grown on demand, reused across calls */
    size_t scratch_bytes;
    int *d_flag;                 /* device error flag (bad token id), sticky until read */
    int *h_flag;                 /* pinned: where the flag is read back */
    void *blas_workspace;
    grzo__cu_table tables[GRZO__CU_TABLES];
    uint64_t table_clock;
    grzo__cu_allocation *allocs; /* every device allocation the backend holds, for accounting */
    size_t n_allocs, cap_allocs;
    size_t bytes_now, bytes_peak;
    int poisoned;                /* a sticky CUDA error happened: refuse further work */
    char err[256];
};

/* ---- errors ---------------------------------------------------------------------------- */
/* The errors that corrupt the context: every later call fails, so the backend refuses work
   and says to recreate it. */
static int grzo__cu_sticky(cudaError_t e) {
    return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorAssert ||
           e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction || e == cudaErrorHardwareStackError ||
           e == cudaErrorInvalidAddressSpace || e == cudaErrorInvalidPc || e == cudaErrorLaunchTimeout ||
           e == cudaErrorECCUncorrectable;
}
static grzo_status grzo__cu_fail(grzo__cuda *cu, const char *what, cudaError_t e) {
    snprintf(cu->err, sizeof cu->err, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    if (grzo__cu_sticky(e))
        cu->poisoned = 1;
    else
        (void)cudaGetLastError();   /* handled here: the next launch check must not report it again */
    return e == cudaErrorMemoryAllocation ? GRZO_ERR_OUT_OF_MEMORY : GRZO_ERR_BACKEND;
}
/* An error on a path that cannot report it (freeing, cleaning up after a failure): a sticky
   one poisons the backend, any other is cleared, so that the next launch check does not
   report it as its own. */
static void grzo__cu_drop(grzo__cuda *cu, cudaError_t e) {
    if (e == cudaSuccess) return;
    if (grzo__cu_sticky(e))
        cu->poisoned = 1;
    else
        (void)cudaGetLastError();
}
/* A failed cuBLAS call may have left a CUDA error behind (a kernel of its own that faulted):
   a sticky one poisons the backend here, not at the next launch check under another name. */
static grzo_status grzo__cu_blas_fail(grzo__cuda *cu, const char *what, cublasStatus_t s) {
    snprintf(cu->err, sizeof cu->err, "%s: cuBLAS status %d%s", what, (int)s,
             s == CUBLAS_STATUS_ALLOC_FAILED ? " (out of memory)" : "");
    grzo__cu_drop(cu, cudaGetLastError());
    return s == CUBLAS_STATUS_ALLOC_FAILED ? GRZO_ERR_OUT_OF_MEMORY : GRZO_ERR_BACKEND;
}
#define GRZO__CU_TRY(cu, what, call)                                  \
    do {                                                              \
        cudaError_t e_ = (call);                                      \
        if (e_ != cudaSuccess) return grzo__cu_fail(cu, what, e_);    \
    } while (0)
#define GRZO__CU_LAUNCHED(cu, what) GRZO__CU_TRY(cu, what, cudaGetLastError())

/* At least one block: a launch of zero blocks is an error (an op over no rows is not), and
   every kernel checks its index against n. */
static unsigned grzo__cu_blocks(int64_t n) { return n > 0 ? (unsigned)((n + GRZO__CU_THREADS - 1) / GRZO__CU_THREADS) : 1u; }

/* ---- device memory, accounted ------------------------------------------------------------ */
/* Every cudaMalloc of the backend goes through here, so that bytes_now and its high-water
   mark cover parameters, activations, scratch, tables and the cuBLAS workspace. */
static grzo_status grzo__cu_malloc(grzo__cuda *cu, size_t bytes, void **out) {
    void *p = NULL;
    if (cu->n_allocs == cu->cap_allocs) {
        size_t cap = cu->cap_allocs ? 2 * cu->cap_allocs : 64;
        grzo__cu_allocation *a = (grzo__cu_allocation *)realloc(cu->allocs, cap * sizeof *a);
        if (!a) { snprintf(cu->err, sizeof cu->err, "host out of memory (allocation table)"); return GRZO_ERR_OUT_OF_MEMORY; }
        cu->allocs = a;
        cu->cap_allocs = cap;
    }
    {   /* what failed, how much, and how much the backend already holds: an out-of-memory
           message the user can act on */
        cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
        if (e != cudaSuccess) {
            char what[96];
            snprintf(what, sizeof what, "cudaMalloc of %zu bytes (the backend holds %zu)", bytes, cu->bytes_now);
            return grzo__cu_fail(cu, what, e);
        }
    }
    cu->allocs[cu->n_allocs].ptr = p;
    cu->allocs[cu->n_allocs].bytes = bytes ? bytes : 1;
    cu->n_allocs++;
    cu->bytes_now += bytes ? bytes : 1;
    if (cu->bytes_now > cu->bytes_peak) cu->bytes_peak = cu->bytes_now;
    *out = p;
    return GRZO_OK;
}

/* Only what the table holds is freed: a pointer freed twice, or never ours, changes nothing
   (cudaFree on it could free another owner's memory, or leave an error behind). */
static void grzo__cu_release(grzo__cuda *cu, void *p) {
    size_t i;
    if (!p) return;
    for (i = 0; i < cu->n_allocs; i++)
        if (cu->allocs[i].ptr == p) {
            cu->bytes_now -= cu->allocs[i].bytes;
            cu->allocs[i] = cu->allocs[--cu->n_allocs];
            grzo__cu_drop(cu, cudaSetDevice(cu->device));   /* the caller may have made another current */
            grzo__cu_drop(cu, cudaFree(p));
            return;
        }
}

/* ---- storage types ------------------------------------------------------------------------ */
__device__ static float grzo__cu_load(const void *p, int dtype, int64_t i) {
    if (dtype == GRZO_DTYPE_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dtype == GRZO_DTYPE_F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

/* Stochastic rounding to the storage type: round away from zero with probability equal to
   the distance from the lower-magnitude neighbour, in units of the gap. Past the largest
   finite value the next step up is infinity, one gap on (BF16: the carry of the added bits
   into the exponent; F16: 65504, then inf as if at 65536), so a value that outgrows the type
   becomes inf in both, as round-to-nearest would make it, instead of saturating. */
__device__ static void grzo__cu_store_sr(void *p, int dtype, int64_t i, float v, uint32_t rnd) {
    if (dtype == GRZO_DTYPE_F32) { ((float *)p)[i] = v; return; }
    if (dtype == GRZO_DTYPE_BF16) {
        uint32_t b = __float_as_uint(v);
        if ((b & 0x7F800000u) != 0x7F800000u) b += rnd & 0xFFFFu;   /* finite: add 16 random low bits */
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
        return;
    }
    {
        __half lo = __float2half_rz(v);
        float flo = __half2float(lo);
        unsigned short bits = __half_as_ushort(lo);
        if (flo != v && isfinite(v)) {
            __half hi = __ushort_as_half((unsigned short)(bits + 1));   /* next magnitude up */
            float fhi = (bits & 0x7FFFu) == 0x7BFFu ? 65536.0f : fabsf(__half2float(hi));   /* past 65504: inf */
            float frac = (fabsf(v) - fabsf(flo)) / (fhi - fabsf(flo));
            if ((float)(rnd >> 8) * (1.0f / 16777216.0f) < frac) lo = hi;
        }
        ((__half *)p)[i] = lo;
    }
}

/* ---- segments ------------------------------------------------------------------------------ */
typedef struct grzo__cu_segs {   /* device copies of a grzo_perturb's host arrays */
    const int64_t *offsets;
    const int64_t *example;
    const int8_t *sign;
    int64_t n;
} grzo__cu_segs;

__device__ static int64_t grzo__cu_segment_of(const grzo__cu_segs s, int64_t row) {
    int64_t lo = 0, hi = s.n - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (s.offsets[mid] <= row) lo = mid; else hi = mid - 1;
    }
    return lo;
}

__device__ static grzo_noise grzo__cu_with_stream(grzo_noise n, uint32_t stream) {
    n.stream = stream;
    n.dist = GRZO_NOISE_RADEMACHER;
    return n;
}

/* An updated parameter stored: fp32 as it is; 16-bit rounded stochastically with word 0 of
   group `group` of the rounding stream, drawn only then (a second Philox call per element
   would be half of an fp32 update's arithmetic, for bits it does not use). */
__device__ static void grzo__cu_store_update(void *p, int dtype, int64_t i, float v, grzo_noise u, uint32_t round_stream,
                                             uint64_t group) {
    uint32_t w[4];
    grzo_noise sr;
    if (dtype == GRZO_DTYPE_F32) {
        ((float *)p)[i] = v;
        return;
    }
    sr = grzo__cu_with_stream(u, round_stream);
    grzo__noise_group(&sr, group, w);
    grzo__cu_store_sr(p, dtype, i, v, w[0]);
}

/* ---- tiles: the element-wise kernels' layout --------------------------------------------------- */
/* The element-wise kernels over a matrix (weights, or N rows of activations) take rows in y
   (blockIdx.y, threadIdx.y) and each row in tiles of 128 consecutive columns, one tile per
   warp, four elements per lane. So no element divides its index by the row length (64-bit
   division is a software routine of ~70 instructions on a GPU), a row's segment, sign, touched
   flag and flipout sign r are looked up once per row, and a Rademacher base U costs one Philox
   call per tile instead of one per element: a row whose noise starts at index f is cut at the
   multiples of 128 of the noise index (the groups of grzo__noise_value), so tile t of it is
   group (f >> 7) + t, and its first column k0 = 128 ((f >> 7) + t) - f lies in (-128, 0] for
   t = 0 (the lanes left of column 0 and right of the row's end do nothing). Lane l takes
   offsets q * 32 + l (q = 0..3) of a tile: bit l of the group's word q, and each of the four
   accesses is 32 consecutive elements (coalesced). Gaussian noise takes offsets 4 l + q
   instead: group 32 g + l, one Philox call and one Box-Muller of 4 for the lane's four
   consecutive elements. Every loop is grid-stride, so any size runs whatever the grid (capped
   at GRZO__CU_GRID_MAX blocks each way), and every index is 64-bit. */
#define GRZO__CU_TILE 128                        /* elements of a tile: one Rademacher group */
#define GRZO__CU_WARPS (GRZO__CU_THREADS / 32)   /* warps of a block */
#ifndef GRZO__CU_GRID_MAX
#define GRZO__CU_GRID_MAX 65535u                 /* blocks in x and in y (gridDim.y's limit) */
#endif

/* tiles a row of `cols` elements whose noise starts at index f spans */
__host__ __device__ static int64_t grzo__cu_tiles(uint64_t f, int64_t cols) {
    return cols > 0 ? (int64_t)(((f + (uint64_t)cols - 1) >> 7) - (f >> 7)) + 1 : 0;
}

/* the first row of this thread, the row stride; the first tile of its warp, the tile stride */
__device__ static int64_t grzo__cu_row0(void) { return (int64_t)blockIdx.y * blockDim.y + threadIdx.y; }
__device__ static int64_t grzo__cu_row_step(void) { return (int64_t)gridDim.y * blockDim.y; }
__device__ static int64_t grzo__cu_tile0(void) { return (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); }
__device__ static int64_t grzo__cu_tile_step(void) { return (int64_t)gridDim.x * (blockDim.x >> 5); }
__device__ static int grzo__cu_lane(void) { return (int)(threadIdx.x & 31u); }

/* offset in its tile of this lane's element q: see the layout above */
__device__ static int grzo__cu_tile_at(uint32_t dist, int lane, int q) {
    return dist == GRZO_NOISE_GAUSSIAN ? 4 * lane + q : 32 * q + lane;
}

/* the columns of this lane's four elements in the tile at group g of a row whose noise starts
   at f: tile_at(dist) past the tile's first column 128 g - f (negative for a row's first tile
   when f is not a multiple of 128) */
__device__ static void grzo__cu_tile_cols(uint32_t dist, uint64_t f, uint64_t g, int lane, int64_t k[4]) {
    int64_t k0 = (int64_t)((g << 7) - f);
    int q;
    for (q = 0; q < 4; q++) k[q] = k0 + grzo__cu_tile_at(dist, lane, q);
}

/* the base noise at indices 128 g + tile_at(q) for this lane: grzo__noise_value's numbers, from
   one Philox call */
__device__ static void grzo__cu_tile_noise(const grzo_noise *u, uint64_t g, int lane, float z[4]) {
    uint32_t w[4];
    int q;
    if (u->dist == GRZO_NOISE_GAUSSIAN) {
        grzo__noise_group(u, (g << 5) + (uint64_t)lane, w);   /* indices 128 g + 4 lane + q */
        grzo__gauss4(w, z);
        return;
    }
    grzo__noise_group(u, g, w);
    for (q = 0; q < 4; q++) z[q] = grzo__rademacher_bit(w, (unsigned)(32 * q + lane));
}

/* word i (0..7) of the 256 bits a, b */
__device__ static uint32_t grzo__cu_word8(const uint32_t a[4], const uint32_t b[4], unsigned i) {
    const uint32_t *h = i & 4u ? b : a;
    return i & 2u ? (i & 1u ? h[3] : h[2]) : (i & 1u ? h[1] : h[0]);
}

/* Signs of Rademacher stream n at indices first + d[q], for d[q] in [0, 128) (others: any
   sign, for a lane outside the row): a sign vector s_e read along a tile, whose indices are
   not aligned to its groups, so the run spans group first >> 7 and (unless first is a
   multiple of 128) the next: two Philox calls per tile at most, not one per element. */
__device__ static void grzo__cu_sign_run(const grzo_noise *n, uint64_t first, const int64_t d[4], float s[4]) {
    uint32_t a[4], b[4] = {0u, 0u, 0u, 0u};
    unsigned sh = (unsigned)(first & 127u);
    int q;
    grzo__noise_group(n, first >> 7, a);
    if (sh) grzo__noise_group(n, (first >> 7) + 1, b);
    for (q = 0; q < 4; q++) {
        unsigned bit = (sh + (unsigned)d[q]) & 255u;
        s[q] = (grzo__cu_word8(a, b, bit >> 5) >> (bit & 31u)) & 1u ? 1.0f : -1.0f;
    }
}

/* whether column k is one of the row's */
__device__ static int grzo__cu_in_row(int64_t k, int64_t cols) { return k >= 0 && k < cols; }

/* out[r][k] = W[j0 + r][k] (+ scale U[j0 + r][k]) as fp32, rows [j0, j0 + nr) */
__global__ static void grzo__k_weight_chunk(const void *W, int dtype, int64_t cols, int64_t j0, int64_t nr,
                                            grzo_noise u, float scale, float *out) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, e;
    if (i >= nr * cols) return;
    e = j0 * cols + i;
    out[i] = grzo__cu_load(W, dtype, e) + (scale != 0.0f ? scale * grzo__noise_value(&u, (uint64_t)e) : 0.0f);
}

/* XS[n][k] = X[n][k] s_e[k], e the example of row n's segment (looked up once per row) */
__global__ static void grzo__k_scale_x(const float *X, int64_t N, int64_t d_in, grzo__cu_segs s, const float *S, float *XS) {
    const int lane = grzo__cu_lane();
    int64_t n, nt = grzo__cu_tiles(0, d_in);
    for (n = grzo__cu_row0(); n < N; n += grzo__cu_row_step()) {
        const float *s_e = S + s.example[grzo__cu_segment_of(s, n)] * d_in, *x = X + n * d_in;
        float *xs = XS + n * d_in;
        int64_t t;
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            int64_t k[4];
            int q;
            grzo__cu_tile_cols(GRZO_NOISE_RADEMACHER, 0, (uint64_t)t, lane, k);
            for (q = 0; q < 4; q++)
                if (grzo__cu_in_row(k[q], d_in)) xs[k[q]] = x[k[q]] * s_e[k[q]];
        }
    }
}

/* Y[n][j0 + jj] += sign sigma r_e[j0 + jj] P[n][jj]; R = NULL: r = 1 (shared Z = U). A row's
   segment once per row; rows of sign 0 are skipped whole. */
__global__ static void grzo__k_add_perturbation(float *Y, int64_t N, int64_t d_out, int64_t j0, int64_t w, const float *P,
                                                grzo__cu_segs s, const float *R, float sigma) {
    const int lane = grzo__cu_lane();
    int64_t n, nt = grzo__cu_tiles(0, w);
    for (n = grzo__cu_row0(); n < N; n += grzo__cu_row_step()) {
        int64_t c = grzo__cu_segment_of(s, n), t;
        float ss;   /* sign sigma: the product the per-element form began with */
        const float *r, *p = P + n * w;
        float *y = Y + n * d_out + j0;
        if (s.sign[c] == 0) continue;
        ss = (float)s.sign[c] * sigma;
        r = R ? R + s.example[c] * d_out + j0 : NULL;
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            int64_t k[4];
            int q;
            grzo__cu_tile_cols(GRZO_NOISE_RADEMACHER, 0, (uint64_t)t, lane, k);
            for (q = 0; q < 4; q++)
                if (grzo__cu_in_row(k[q], w)) y[k[q]] += ss * (r ? r[k[q]] : 1.0f) * p[k[q]];
        }
    }
}

/* y[n][j] = x[n][j] (op) (v[j] + sign sigma z_j), z_j = U[j] (r_e[j] with flipout): U's index is
   the column, so the tiles start at column 0; r_e read along a tile (two Philox calls) */
__global__ static void grzo__k_vector(const float *x, float *y, const void *v, int dtype, int64_t d, int64_t N, int op,
                                      grzo__cu_segs s, grzo_noise u, float sigma, int flipout) {
    const int lane = grzo__cu_lane();
    const grzo_noise rn = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_R);
    int64_t n, nt = grzo__cu_tiles(0, d);
    for (n = grzo__cu_row0(); n < N; n += grzo__cu_row_step()) {
        int64_t e = 0, t;
        int pert = 0;
        float ss = 0.0f;
        if (s.n > 0) {
            int64_t c = grzo__cu_segment_of(s, n);
            pert = s.sign[c] != 0;
            ss = (float)s.sign[c] * sigma;
            e = s.example[c];
        }
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            int64_t k[4], off[4];
            float z[4];
            int q;
            grzo__cu_tile_cols(u.dist, 0, (uint64_t)t, lane, k);
            if (pert) {
                grzo__cu_tile_noise(&u, (uint64_t)t, lane, z);
                if (flipout) {
                    float r[4];
                    for (q = 0; q < 4; q++) off[q] = k[q] - t * GRZO__CU_TILE;
                    grzo__cu_sign_run(&rn, (uint64_t)(e * d + t * GRZO__CU_TILE), off, r);
                    for (q = 0; q < 4; q++) z[q] *= r[q];
                }
            }
            for (q = 0; q < 4; q++) {
                int64_t i = n * d + k[q];
                float vj;
                if (!grzo__cu_in_row(k[q], d)) continue;
                vj = grzo__cu_load(v, dtype, k[q]);
                if (pert) vj += ss * z[q];
                y[i] = op == GRZO_VECTOR_MUL ? x[i] * vj : x[i] + vj;
            }
        }
    }
}

/* y[n][k] = E[row][k] + sign sigma z, row = ids[n], z = U[row][k] (r_e[row] s_e[k] with
   flipout): the tiles follow U's index row d + k; r once per row, s_e along a tile */
__global__ static void grzo__k_embedding(const void *E, int dtype, const int32_t *ids, float *y, int64_t N, int64_t d,
                                         int64_t V, uint8_t *touched, grzo__cu_segs s, grzo_noise u, float sigma,
                                         int flipout, int *bad) {
    const int lane = grzo__cu_lane();
    const grzo_noise rn = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_R), sn = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_S);
    int64_t n;
    for (n = grzo__cu_row0(); n < N; n += grzo__cu_row_step()) {
        int64_t row = ids[n], e = 0, nt, t;
        uint64_t f;
        int pert = 0;
        float ss = 0.0f, rr = 1.0f;
        if (row < 0 || row >= V) { *bad = 1; continue; }
        f = (uint64_t)(row * d);
        nt = grzo__cu_tiles(f, d);
        if (s.n > 0) {
            int64_t c = grzo__cu_segment_of(s, n);
            pert = s.sign[c] != 0;
            ss = (float)s.sign[c] * sigma;
            e = s.example[c];
            if (pert && flipout) rr = grzo__noise_value(&rn, (uint64_t)(e * V + row));
        }
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            uint64_t grp = (f >> 7) + (uint64_t)t;
            int64_t k[4];
            float z[4];
            int q;
            grzo__cu_tile_cols(u.dist, f, grp, lane, k);
            if (pert) {
                grzo__cu_tile_noise(&u, grp, lane, z);
                if (flipout) {
                    int64_t k0 = (int64_t)((grp << 7) - f), kmin = k0 < 0 ? 0 : k0, off[4];
                    float sv[4];
                    for (q = 0; q < 4; q++) off[q] = k[q] - kmin;
                    grzo__cu_sign_run(&sn, (uint64_t)(e * d + kmin), off, sv);
                    for (q = 0; q < 4; q++) z[q] *= rr * sv[q];
                }
            }
            for (q = 0; q < 4; q++) {
                float val;
                if (!grzo__cu_in_row(k[q], d)) continue;
                if (touched && k[q] == 0) touched[row] = 1;
                val = grzo__cu_load(E, dtype, row * d + k[q]);
                if (pert) val += ss * z[q];
                y[n * d + k[q]] = val;
            }
        }
    }
}

/* element i of an update: theta_i - z g - decay theta_i, stored (rounded with group
   round_first + i) */
__device__ static void grzo__cu_update_one(void *P, int dtype, int64_t i, float z, float g, float decay, grzo_noise u,
                                           uint32_t round_stream, uint64_t round_first) {
    float p = grzo__cu_load(P, dtype, i);
    p = p - z * g - decay * p;
    grzo__cu_store_update(P, dtype, i, p, u, round_stream, round_first + (uint64_t)i);
}

/* theta -= U (.) (sum_e coeff_e r_e s_e^T) + decay theta. Tiled (see "tiles"): the rows a
   `touched` mask leaves out are skipped whole; without flipout the coefficient sum is formed
   once per thread; with flipout coeff_e r_ej once per row and example, and each of the lane's
   four elements adds (coeff_e r_ej) s_ek, in the order of e, as the sum per element did (the
   products are exact: r, s = +-1). The rounding draw stays one Philox call per element (group
   round_first + i, word 0: the CPU backend's layout). */
__global__ static void grzo__k_update(void *P, int dtype, int64_t rows, int64_t cols, grzo_noise u, int flipout, int vec,
                                      int64_t B, const float *coeff, const float *R, const float *S, float decay,
                                      const uint8_t *touched, uint32_t round_stream, uint64_t round_first) {
    const int lane = grzo__cu_lane();
    float g_shared = 0.0f;
    int64_t j, e;
    if (!flipout)
        for (e = 0; e < B; e++) g_shared += coeff[e];
    for (j = grzo__cu_row0(); j < rows; j += grzo__cu_row_step()) {
        uint64_t f = (uint64_t)j * (uint64_t)cols;
        int64_t nt = grzo__cu_tiles(f, cols), t;
        if (touched && !touched[j]) continue;
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            uint64_t grp = (f >> 7) + (uint64_t)t;
            int64_t k[4];
            float z[4], g[4];
            int q;
            grzo__cu_tile_cols(u.dist, f, grp, lane, k);
            grzo__cu_tile_noise(&u, grp, lane, z);
            for (q = 0; q < 4; q++) g[q] = g_shared;
            if (flipout) {
                int64_t kc[4];   /* columns clamped into the row: lanes outside read a valid s */
                for (q = 0; q < 4; q++) kc[q] = k[q] < 0 ? 0 : k[q] >= cols ? cols - 1 : k[q];
                for (e = 0; e < B; e++) {
                    float cr = coeff[e] * R[e * rows + j];
                    const float *s_e = S + e * cols;
                    for (q = 0; q < 4; q++) g[q] += cr * (vec ? 1.0f : s_e[kc[q]]);
                }
            }
            for (q = 0; q < 4; q++)
                if (grzo__cu_in_row(k[q], cols))
                    grzo__cu_update_one(P, dtype, (int64_t)f + k[q], z[q], g[q], decay, u, round_stream, round_first);
        }
    }
}

/* ---- fast mode: 16-bit operands for the tensor cores ---------------------------------------- */
__device__ static uint16_t grzo__cu_to16(float v, int dtype) {   /* round to nearest even */
    if (dtype == GRZO_DTYPE_BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    return __half_as_ushort(__float2half_rn(v));
}

/* A perturbed copy's element stored: fp32 as it is, 16-bit rounded to nearest even (as the
   fast mode's operands and the host's conversions round) */
__device__ static void grzo__cu_store_rn(void *p, int dtype, int64_t i, float v) {
    if (dtype == GRZO_DTYPE_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = grzo__cu_to16(v, dtype);
}

/* out[k] = to16(x[k]), k < n: one row, tiled (four coalesced elements per lane) */
__global__ static void grzo__k_to16(const float *x, int64_t n, int dtype, uint16_t *out) {
    const int lane = grzo__cu_lane();
    int64_t nt = grzo__cu_tiles(0, n), t;
    if (grzo__cu_row0() != 0) return;   /* one row: the block's other rows have none */
    for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
        int64_t k[4];
        int q;
        grzo__cu_tile_cols(GRZO_NOISE_RADEMACHER, 0, (uint64_t)t, lane, k);
        for (q = 0; q < 4; q++)
            if (grzo__cu_in_row(k[q], n)) out[k[q]] = grzo__cu_to16(x[k[q]], dtype);
    }
}

/* XH[n][k] *= s_e[k] in place, e the example of row n's segment (once per row): a sign flip,
   exact in 16 bits */
__global__ static void grzo__k_flip_signs16(uint16_t *XH, int64_t N, int64_t d_in, grzo__cu_segs s, const float *S) {
    const int lane = grzo__cu_lane();
    int64_t n, nt = grzo__cu_tiles(0, d_in);
    for (n = grzo__cu_row0(); n < N; n += grzo__cu_row_step()) {
        const float *s_e = S + s.example[grzo__cu_segment_of(s, n)] * d_in;
        uint16_t *xh = XH + n * d_in;
        int64_t t;
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            int64_t k[4];
            int q;
            grzo__cu_tile_cols(GRZO_NOISE_RADEMACHER, 0, (uint64_t)t, lane, k);
            for (q = 0; q < 4; q++)
                if (grzo__cu_in_row(k[q], d_in) && s_e[k[q]] < 0.0f) xh[k[q]] ^= 0x8000u;
        }
    }
}

/* out[k] = noise at first + k, k < count, stored as grzo__cu_store_rn stores (16-bit
   Rademacher +-1: exact): one row whose noise starts at `first`, tiled, so one Philox call per
   128 Rademacher elements, one Box-Muller per 4 Gaussian ones; a fast-math chunk's first index
   j0 d_in need not be a multiple of 128 (its first tile is partial) */
__global__ static void grzo__k_noise(grzo_noise n, uint64_t first, int64_t count, int dtype, void *out) {
    const int lane = grzo__cu_lane();
    int64_t nt = grzo__cu_tiles(first, count), t;
    if (grzo__cu_row0() != 0) return;   /* one row: the block's other rows have none */
    for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
        uint64_t grp = (first >> 7) + (uint64_t)t;
        int64_t k[4];
        float z[4];
        int q;
        grzo__cu_tile_cols(n.dist, first, grp, lane, k);
        grzo__cu_tile_noise(&n, grp, lane, z);
        for (q = 0; q < 4; q++)
            if (grzo__cu_in_row(k[q], count)) grzo__cu_store_rn(out, dtype, k[q], z[q]);
    }
}

/* out = theta + scale z, z = U (.) r_e s_e^T (flipout; a vector block: U (.) r_e), rounded to
   the storage type: r once per row, s_e read along a tile (two Philox calls at most) */
__global__ static void grzo__k_perturbed_copy(const void *P, int dtype, int64_t rows, int64_t cols, grzo_noise u,
                                              int flipout, int vec, int64_t example, float scale, void *out) {
    const int lane = grzo__cu_lane();
    const grzo_noise rn = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_R), sn = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_S);
    int64_t j;
    for (j = grzo__cu_row0(); j < rows; j += grzo__cu_row_step()) {
        uint64_t f = (uint64_t)j * (uint64_t)cols;
        int64_t nt = grzo__cu_tiles(f, cols), t;
        float rr = flipout ? grzo__noise_value(&rn, (uint64_t)(example * rows + j)) : 1.0f;
        for (t = grzo__cu_tile0(); t < nt; t += grzo__cu_tile_step()) {
            uint64_t grp = (f >> 7) + (uint64_t)t;
            int64_t k[4];
            float z[4];
            int q;
            grzo__cu_tile_cols(u.dist, f, grp, lane, k);
            grzo__cu_tile_noise(&u, grp, lane, z);
            if (flipout) {
                for (q = 0; q < 4; q++) z[q] *= rr;
                if (!vec) {
                    int64_t k0 = (int64_t)((grp << 7) - f), kmin = k0 < 0 ? 0 : k0, off[4];
                    float sv[4];
                    for (q = 0; q < 4; q++) off[q] = k[q] - kmin;
                    grzo__cu_sign_run(&sn, (uint64_t)(example * cols + kmin), off, sv);
                    for (q = 0; q < 4; q++) z[q] *= sv[q];
                }
            }
            for (q = 0; q < 4; q++) {
                int64_t i = (int64_t)f + k[q];
                if (grzo__cu_in_row(k[q], cols)) grzo__cu_store_rn(out, dtype, i, grzo__cu_load(P, dtype, i) + scale * z[q]);
            }
        }
    }
}

/* ---- variant kernels (grzo.h section 3c): the element functions are grzo.h's, host and
   device, so each value is the one the CPU backend and the reference compute ---------------- */
/* amax[j] = max_k |W[j][k]|: the per-row scale of the fake-quantized weights */
__global__ static void grzo__k_row_amax(const void *W, int dtype, int64_t rows, int64_t cols, float *amax) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, k;
    float m = 0.0f;
    if (j >= rows) return;
    for (k = 0; k < cols; k++) m = fmaxf(m, fabsf(grzo__cu_load(W, dtype, j * cols + k)));
    amax[j] = m;
}

/* out[r][k] = w + scale r_e[j] B[j][k] s_e[k], j = j0 + r, w = q(W[j][k]) (amax given) or W[j][k];
   r_e, s_e NULL: 1 (shared Z); scale 0: the read weights alone */
__global__ static void grzo__k_variant_weights(grzo_param p, int64_t j0, int64_t nr, grzo_noise base, grzo_variant v,
                                               const float *amax, float scale, const float *r_e, const float *s_e, float *out) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, j, k;
    float theta, w;
    if (i >= nr * p.cols) return;
    j = j0 + i / p.cols;
    k = i % p.cols;
    theta = grzo__cu_load(p.data, (int)p.dtype, j * p.cols + k);
    w = amax ? grzo__fake_quant(theta, amax[j], v.quant_bits) : theta;
    if (scale != 0.0f) {
        float z = grzo__variant_base(&p, &base, &v, j, k, theta);
        if (r_e) z *= r_e[j];
        if (s_e) z *= s_e[k];
        w += scale * z;
    }
    out[i] = w;
}

/* Vt[l][k] = V[k][l], V the low-rank factor (d_in x r) of noise n */
__global__ static void grzo__k_lowrank_vt(grzo_noise n, int64_t d_in, int64_t r, float *Vt) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, l, k;
    if (i >= d_in * r) return;
    l = i / d_in;
    k = i % d_in;
    Vt[i] = grzo__noise_value(&n, (uint64_t)(k * r + l));
}

__global__ static void grzo__k_vector_variant(const float *x, float *y, grzo_param p, int64_t N, int op, grzo__cu_segs s,
                                              grzo_noise u, grzo_variant v, float sigma, int flipout) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n, j, d = p.rows;
    float vj;
    if (i >= N * d) return;
    n = i / d;
    j = i % d;
    vj = grzo__cu_load(p.data, (int)p.dtype, j);
    if (s.n > 0) {
        int64_t c = grzo__cu_segment_of(s, n);
        if (s.sign[c] != 0) {
            float z = grzo__variant_base(&p, &u, &v, j, 0, vj);
            if (flipout) {
                grzo_noise r = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_R);
                z *= grzo__noise_value(&r, (uint64_t)(s.example[c] * d + j));
            }
            vj += (float)s.sign[c] * sigma * z;
        }
    }
    y[i] = op == GRZO_VECTOR_MUL ? x[i] * vj : x[i] + vj;
}

__global__ static void grzo__k_embedding_variant(grzo_param p, const int32_t *ids, float *y, int64_t N, uint8_t *touched,
                                                 grzo__cu_segs s, grzo_noise u, grzo_variant v, float sigma, int flipout,
                                                 int *bad) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n, k, row, d = p.cols;
    float val;
    if (i >= N * d) return;
    n = i / d;
    k = i % d;
    row = ids[n];
    if (row < 0 || row >= p.rows) { *bad = 1; return; }
    if (touched && k == 0) touched[row] = 1;
    val = grzo__cu_load(p.data, (int)p.dtype, row * d + k);
    if (s.n > 0) {
        int64_t c = grzo__cu_segment_of(s, n);
        if (s.sign[c] != 0) {
            float z = grzo__variant_base(&p, &u, &v, row, k, val);
            if (flipout) {
                grzo_noise r = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_R), sn = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_S);
                z *= grzo__noise_value(&r, (uint64_t)(s.example[c] * p.rows + row)) *
                     grzo__noise_value(&sn, (uint64_t)(s.example[c] * d + k));
            }
            val += (float)s.sign[c] * sigma * z;
        }
    }
    y[i] = val;
}

/* theta -= B (.) (sum_e coeff_e r_e s_e^T) + decay theta, B from theta before the write */
__global__ static void grzo__k_update_variant(grzo_param p, grzo_noise u, grzo_variant v, int flipout, int64_t B,
                                              const float *coeff, const float *R, const float *S, float decay,
                                              const uint8_t *touched, uint32_t round_stream, uint64_t round_first) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, j, k, e;
    int vec = p.kind == GRZO_BLOCK_VECTOR;
    float g = 0.0f, th;
    if (i >= p.rows * p.cols) return;
    j = i / p.cols;
    k = i % p.cols;
    if (touched && !touched[j]) return;
    if (flipout)
        for (e = 0; e < B; e++) g += coeff[e] * R[e * p.rows + j] * (vec ? 1.0f : S[e * p.cols + k]);
    else
        for (e = 0; e < B; e++) g += coeff[e];
    th = grzo__cu_load(p.data, (int)p.dtype, i);
    th = th - grzo__variant_base(&p, &u, &v, j, k, th) * g - decay * th;
    grzo__cu_store_update(p.data, (int)p.dtype, i, th, u, round_stream, round_first + (uint64_t)i);
}

__global__ static void grzo__k_perturbed_copy_variant(grzo_param p, grzo_noise u, grzo_variant v, const float *amax, int flipout,
                                                      int64_t example, float scale, void *out) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, j, k;
    float z, th;
    if (i >= p.rows * p.cols) return;
    j = i / p.cols;
    k = i % p.cols;
    th = grzo__cu_load(p.data, (int)p.dtype, i);
    z = grzo__variant_base(&p, &u, &v, j, k, th);
    if (flipout) {
        grzo_noise r = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_R), s = grzo__cu_with_stream(u, GRZO_STREAM_SIGN_S);
        z *= grzo__noise_value(&r, (uint64_t)(example * p.rows + j));
        if (p.kind != GRZO_BLOCK_VECTOR) z *= grzo__noise_value(&s, (uint64_t)(example * p.cols + k));
    }
    grzo__cu_store_rn(out, (int)p.dtype, i, (amax ? grzo__fake_quant(th, amax[j], v.quant_bits) : th) + scale * z);
}

/* ---- host helpers -------------------------------------------------------------------------- */
/* The launch of a tiled kernel (see "tiles") over `rows` rows of at most `tiles` tiles each:
   a block's warps go along a row as far as it has tiles (a power of 2), the others to the
   next rows, so that narrow rows (a vector block's one column) do not leave warps idle. */
typedef struct grzo__cu_shape { dim3 grid, block; } grzo__cu_shape;
static grzo__cu_shape grzo__cu_rows_shape(int64_t rows, int64_t tiles) {
    grzo__cu_shape sh;
    unsigned wx = 1, wy;
    int64_t gx, gy;
    while (wx < GRZO__CU_WARPS && (int64_t)wx < tiles) wx *= 2;
    wy = GRZO__CU_WARPS / wx;
    gx = (tiles + wx - 1) / wx;
    gy = (rows + wy - 1) / wy;
    sh.block = dim3(32 * wx, wy);
    sh.grid = dim3(gx < 1 ? 1u : gx > GRZO__CU_GRID_MAX ? GRZO__CU_GRID_MAX : (unsigned)gx,
                   gy < 1 ? 1u : gy > GRZO__CU_GRID_MAX ? GRZO__CU_GRID_MAX : (unsigned)gy);
    return sh;
}
/* the most tiles a row of `cols` columns spans: cols / 128 when its noise starts at a multiple
   of 128 (every row of a kernel, when cols is one), else one or two more (a bound for the
   grid only: the loops are grid-stride) */
static grzo__cu_shape grzo__cu_matrix_shape(int64_t rows, int64_t cols) {
    return grzo__cu_rows_shape(rows, cols % GRZO__CU_TILE == 0 ? cols / GRZO__CU_TILE : cols / GRZO__CU_TILE + 2);
}
/* one row of `count` elements whose noise starts at `first` */
static grzo__cu_shape grzo__cu_run_shape(uint64_t first, int64_t count) {
    return grzo__cu_rows_shape(1, grzo__cu_tiles(first, count));
}

/* In the emulated tests' exact-scratch build under AddressSanitizer, every carved piece is
   followed by a poisoned red zone of 256 bytes (its alignment padding poisoned too), so that
   a kernel writing or reading past its piece (a bounds check off by one, a grid past its
   elements) is reported even where the next piece would otherwise absorb it. Poisoning stops
   at the block's end, past which ASan's own red zone reports a carve beyond the request. */
#if defined(GRZO__CU_SCRATCH_EXACT) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define GRZO__CU_REDZONE 256u
#define GRZO__CU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
/* poisons [from, to), cut at the block's end */
static void grzo__cu_poison_span(char *from, char *to, char *end) {
    if (to > end) to = end;
    if (from < to) ASAN_POISON_MEMORY_REGION(from, (size_t)(to - from));
}
#define GRZO__CU_POISON(from, to, end) grzo__cu_poison_span((from), (to), (end))
#else
#define GRZO__CU_REDZONE 0u
#define GRZO__CU_UNPOISON(p, n) ((void)0)
#define GRZO__CU_POISON(from, to, end) ((void)0)
#endif

/* Scratch of at least `bytes`, carved by the caller; grows (synchronizing) when too small.
   GRZO__CU_SCRATCH_EXACT (the emulated tests, tests/meson.build and tests/llm/): every
   request gets a block of exactly its size, so that a caller carving past what it asked for
   overruns the block, which AddressSanitizer reports; a kept larger block would hide it. */
#ifdef GRZO__CU_SCRATCH_EXACT
#define GRZO__CU_SCRATCH_FITS(cu, bytes) ((bytes) == (cu)->scratch_bytes)
#else
#define GRZO__CU_SCRATCH_FITS(cu, bytes) ((bytes) <= (cu)->scratch_bytes)
#endif
static grzo_status grzo__cu_scratch(grzo__cuda *cu, size_t bytes, void **out) {
    grzo_status s;
    if (!GRZO__CU_SCRATCH_FITS(cu, bytes)) {
        if (cu->scratch) {
            GRZO__CU_TRY(cu, "scratch", cudaStreamSynchronize(cu->stream));   /* queued work may read it */
            grzo__cu_release(cu, cu->scratch);
            cu->scratch = NULL;
            cu->scratch_bytes = 0;
        }
        if ((s = grzo__cu_malloc(cu, bytes, &cu->scratch)) != GRZO_OK) return s;
        cu->scratch_bytes = bytes;
    }
    GRZO__CU_UNPOISON(cu->scratch, bytes);   /* a block kept from an earlier request: its red zones lifted */
    *out = cu->scratch;
    return GRZO_OK;
}

static size_t grzo__cu_align(size_t n) { return (n + 255) & ~(size_t)255; }

/* The scratch bytes a carved piece of `bytes` takes (aligned, and its red zone if any). */
static size_t grzo__cu_piece(size_t bytes) { return grzo__cu_align(bytes) + GRZO__CU_REDZONE; }

/* Consecutive pieces carved out of one scratch block of `bytes` (the sum of their
   grzo__cu_piece sizes). */
typedef struct grzo__cu_carve { char *base, *end; size_t used; } grzo__cu_carve;
static grzo_status grzo__cu_carve_from(grzo__cuda *cu, size_t bytes, grzo__cu_carve *c) {
    grzo_status s = grzo__cu_scratch(cu, bytes, (void **)&c->base);
    c->end = s == GRZO_OK ? c->base + bytes : NULL;
    c->used = 0;
    return s;
}
static void *grzo__cu_take(grzo__cu_carve *c, size_t bytes) {
    char *p = c->base + c->used;
    c->used += grzo__cu_piece(bytes);
    GRZO__CU_POISON(p + bytes, c->base + c->used, c->end);   /* padding and red zone */
    return p;
}

/* The device copy of a host table made of n parts (each placed at a 256-byte aligned offset;
   the caller's first part should say what the table is, so that equal bytes mean an equal
   table). A hit costs a memcmp of the table; a miss an asynchronous copy from pinned memory. */
static grzo_status grzo__cu_table_get(grzo__cuda *cu, int n, const void *const *parts, const size_t *sizes, char **dev) {
    size_t len = 0, off;
    int i, k, victim = 0;
    grzo__cu_table *t;
    grzo_status s;
    for (i = 0; i < n; i++) len += grzo__cu_align(sizes[i]);
    for (k = 0; k < GRZO__CU_TABLES; k++) {
        t = &cu->tables[k];
        if (t->last_use && t->len == len) {
            for (i = 0, off = 0; i < n; off += grzo__cu_align(sizes[i]), i++)
                if (sizes[i] && memcmp(t->host + off, parts[i], sizes[i]) != 0) break;
            if (i == n) {
                t->last_use = ++cu->table_clock;
                *dev = t->dev;
                return GRZO_OK;
            }
        }
        if (t->last_use < cu->tables[victim].last_use) victim = k;
    }
    t = &cu->tables[victim];
    t->last_use = 0;   /* not a valid copy until the upload below has been queued (a failure */
    t->len = 0;        /* in between must not leave a slot that a lookup would trust) */
    if (t->cap < len) {
        if (t->dev) {
            GRZO__CU_TRY(cu, "table", cudaStreamSynchronize(cu->stream));   /* queued kernels may read it */
            grzo__cu_release(cu, t->dev);
            grzo__cu_drop(cu, cudaFreeHost(t->host));
            t->dev = t->host = NULL;
            t->cap = 0;
        }
        {   /* into a local: what a failed cudaMallocHost leaves in its pointer is not documented */
            void *host = NULL;
            GRZO__CU_TRY(cu, "table (pinned host)", cudaMallocHost(&host, len));
            t->host = (char *)host;
        }
        if ((s = grzo__cu_malloc(cu, len, (void **)&t->dev)) != GRZO_OK) {
            grzo__cu_drop(cu, cudaFreeHost(t->host));
            t->host = NULL;
            return s;
        }
        t->cap = len;
    } else if (t->dev) {
        GRZO__CU_TRY(cu, "table", cudaEventSynchronize(t->uploaded));   /* its last copy read `host` */
    }
    for (i = 0, off = 0; i < n; off += grzo__cu_align(sizes[i]), i++)
        if (sizes[i]) memcpy(t->host + off, parts[i], sizes[i]);
    GRZO__CU_TRY(cu, "table upload", cudaMemcpyAsync(t->dev, t->host, len, cudaMemcpyHostToDevice, cu->stream));
    GRZO__CU_TRY(cu, "table upload", cudaEventRecord(t->uploaded, cu->stream));
    t->len = len;
    t->last_use = ++cu->table_clock;
    *dev = t->dev;
    return GRZO_OK;
}

enum { GRZO__CU_TABLE_SEGMENTS = 1, GRZO__CU_TABLE_COEFF = 2 };

/* The segment arrays of a perturbation on the device (uploaded once per distinct table). */
static grzo_status grzo__cu_segments(grzo__cuda *cu, const grzo_perturb *pt, grzo__cu_segs *s) {
    int64_t tag[2];
    const void *parts[4];
    size_t sizes[4];
    char *dev;
    grzo_status st;
    memset(s, 0, sizeof *s);
    if (!pt || pt->sigma == 0.0f || pt->n_segments == 0) return GRZO_OK;
    tag[0] = GRZO__CU_TABLE_SEGMENTS;
    tag[1] = pt->n_segments;
    parts[0] = tag;          sizes[0] = sizeof tag;
    parts[1] = pt->offsets;  sizes[1] = (size_t)(pt->n_segments + 1) * 8;
    parts[2] = pt->example;  sizes[2] = (size_t)pt->n_segments * 8;
    parts[3] = pt->sign;     sizes[3] = (size_t)pt->n_segments;
    if ((st = grzo__cu_table_get(cu, 4, parts, sizes, &dev)) != GRZO_OK) return st;
    dev += grzo__cu_align(sizes[0]);
    s->offsets = (const int64_t *)dev;
    dev += grzo__cu_align(sizes[1]);
    s->example = (const int64_t *)dev;
    dev += grzo__cu_align(sizes[2]);
    s->sign = (const int8_t *)dev;
    s->n = pt->n_segments;
    return GRZO_OK;
}

static grzo_status grzo__cu_fill(grzo__cuda *cu, grzo_noise n, uint64_t first, int64_t count, float *out) {
    if (count <= 0) return GRZO_OK;
    grzo__cu_shape sh = grzo__cu_run_shape(first, count);
    grzo__k_noise<<<sh.grid, sh.block, 0, cu->stream>>>(n, first, count, GRZO_DTYPE_F32, out);
    GRZO__CU_LAUNCHED(cu, "noise kernel");
    return GRZO_OK;
}

/* Y[rows r0.., cols j0..j0+w) (ld ldy) = X[N x K] Wc[w x K]^T: row-major through column-major cuBLAS.
   Pedantic math: fp32 throughout; fast math: the handle's TF32 tensor-op mode. */
static grzo_status grzo__cu_gemm_nt(grzo__cuda *cu, int64_t N, int64_t w, int64_t K, const float *X, const float *Wc,
                                    float *Y, int64_t ldy) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st;
    if (N == 0 || w == 0) return GRZO_OK;
    st = cublasSgemm(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w, (int)N, (int)K, &one, Wc, (int)K, X, (int)K, &zero, Y, (int)ldy);
    return st == CUBLAS_STATUS_SUCCESS ? GRZO_OK : grzo__cu_blas_fail(cu, "cublasSgemm", st);
}

/* The same product with 16-bit X and W (tensor cores), fp32 accumulation and fp32 Y. */
static grzo_status grzo__cu_gemm_nt16(grzo__cuda *cu, int dtype, int64_t N, int64_t w, int64_t K, const void *X, const void *Wc,
                                      float *Y, int64_t ldy) {
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t t = dtype == GRZO_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    cublasStatus_t st;
    if (N == 0 || w == 0) return GRZO_OK;
    st = cublasGemmEx(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w, (int)N, (int)K, &one, Wc, t, (int)K, X, t, (int)K, &zero, Y,
                      CUDA_R_32F, (int)ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? GRZO_OK : grzo__cu_blas_fail(cu, "cublasGemmEx (16-bit)", st);
}

static int64_t grzo__cu_chunk_rows(const grzo__cuda *cu, int64_t rows, int64_t per_row_bytes) {
    int64_t c = (int64_t)(cu->transient / (size_t)per_row_bytes);
    if (c >= 128) c -= c % 64;   /* GEMM-friendly widths (tensor-core tiles, aligned leading dimensions) */
    if (c < 1) c = 1;
    return c < rows ? c : rows;
}

/* Wait for the stream, then report a bad token id seen by any embedding since the last wait. */
static grzo_status grzo__cu_wait(grzo__cuda *cu, const char *what) {
    GRZO__CU_TRY(cu, what, cudaMemcpyAsync(cu->h_flag, cu->d_flag, sizeof(int), cudaMemcpyDeviceToHost, cu->stream));
    GRZO__CU_TRY(cu, what, cudaStreamSynchronize(cu->stream));
    if (*cu->h_flag) {
        *cu->h_flag = 0;
        GRZO__CU_TRY(cu, what, cudaMemsetAsync(cu->d_flag, 0, sizeof(int), cu->stream));
        snprintf(cu->err, sizeof cu->err, "%s: an embedding since the last synchronization read a token id out of range", what);
        return GRZO_ERR_INVALID_ARG;
    }
    return GRZO_OK;
}

/* The perturbation of an operation, or NULL when it changes nothing (sigma 0, no segments,
   or every sign 0, e.g. FZOO's clean pass: no perturbation product to compute). */
static const grzo_perturb *grzo__cu_active(const grzo_perturb *pt) {
    int64_t c;
    if (!pt || pt->sigma == 0.0f || pt->n_segments <= 0) return NULL;
    for (c = 0; c < pt->n_segments; c++)
        if (pt->sign[c] != 0) return pt;
    return NULL;
}

/* ---- backend entries --------------------------------------------------------------------------- */
static grzo_status grzo__cu_query(void *self, grzo_backend_caps *out) {
    (void)self;
    out->dtypes = (1u << GRZO_DTYPE_F32) | (1u << GRZO_DTYPE_BF16) | (1u << GRZO_DTYPE_F16);
    out->device_memory = 1;
    out->n_threads = 1;
    out->variants = GRZO_VARIANT_SPARSE | GRZO_VARIANT_LOWRANK | GRZO_VARIANT_QUANT;
    return GRZO_OK;
}

static grzo_status grzo__cu_check(grzo__cuda *cu) {
    if (cu->poisoned) {
        snprintf(cu->err, sizeof cu->err, "an earlier CUDA error left the device unusable; recreate the backend");
        return GRZO_ERR_BACKEND;
    }
    cudaError_t e = cudaSetDevice(cu->device);
    return e == cudaSuccess ? GRZO_OK : grzo__cu_fail(cu, "cudaSetDevice", e);
}

static grzo_status grzo__cu_alloc(void *self, size_t bytes, void **out) {
    grzo__cuda *cu = (grzo__cuda *)self;
    cudaError_t e;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    if ((s = grzo__cu_malloc(cu, bytes, out)) != GRZO_OK) return s;
    /* on the backend's own stream: it is non-blocking, so a cudaMemset on the legacy default
       stream would not be ordered before the uploads and kernels that follow on it; and waited
       for, so that the memory is zero for work on any other stream too (allocations are made at
       setup, not per op) */
    e = cudaMemsetAsync(*out, 0, bytes ? bytes : 1, cu->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cu->stream);
    if (e != cudaSuccess) {
        grzo__cu_release(cu, *out);
        *out = NULL;
        return grzo__cu_fail(cu, "zero-filling an allocation", e);
    }
    return GRZO_OK;
}
static void grzo__cu_free(void *self, void *p) { grzo__cu_release((grzo__cuda *)self, p); }
/* Synchronous, as the contract says (the source may be reused at once). */
static grzo_status grzo__cu_upload(void *self, void *dst, const void *src, size_t n) {
    grzo__cuda *cu = (grzo__cuda *)self;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    GRZO__CU_TRY(cu, "upload", cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, cu->stream));
    GRZO__CU_TRY(cu, "upload", cudaStreamSynchronize(cu->stream));
    return GRZO_OK;
}
static grzo_status grzo__cu_download(void *self, void *dst, const void *src, size_t n) {
    grzo__cuda *cu = (grzo__cuda *)self;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    GRZO__CU_TRY(cu, "download", cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, cu->stream));
    return grzo__cu_wait(cu, "download");
}
static grzo_status grzo__cu_synchronize(void *self) {
    grzo__cuda *cu = (grzo__cuda *)self;
    grzo_status s = grzo__cu_check(cu);
    return s != GRZO_OK ? s : grzo__cu_wait(cu, "synchronize");
}
static const char *grzo__cu_last_error(void *self) { return ((grzo__cuda *)self)->err; }

/* cuBLAS takes int sizes and leading dimensions: a linear past them is refused, not truncated. */
static grzo_status grzo__cu_int_sizes(grzo__cuda *cu, const grzo_linear_args *a) {
    if (a->w.rows <= INT_MAX && a->w.cols <= INT_MAX && a->n_rows <= INT_MAX) return GRZO_OK;
    snprintf(cu->err, sizeof cu->err, "linear: a %lld x %lld weight over %lld rows exceeds cuBLAS's int sizes (%d)",
             (long long)a->w.rows, (long long)a->w.cols, (long long)a->n_rows, INT_MAX);
    return GRZO_ERR_UNSUPPORTED;
}

/* Fast math, 16-bit weights: Y = XH W^T on the tensor cores with XH = bf16/f16(X), and the
   perturbation as its own product sigma ((XH (.) s) U16^T) (.) r, U16 the 16-bit U (exact
   for Rademacher), chunked over output rows. XH (.) s is formed in place after the main
   product (a sign flip, exact), so the perturbation costs no activation-sized buffer. The
   rounding of this form is bounded in grzo_cuda.h. Shared Z (MeZO, FZOO) takes r = s = 1. */
static grzo_status grzo__cu_linear_fast16(grzo__cuda *cu, const grzo_linear_args *a, const grzo_perturb *pt) {
    int64_t d_out = a->w.rows, d_in = a->w.cols, N = a->n_rows, B = pt ? pt->n_examples : 0, j0, chunk;
    int dt = (int)a->w.dtype, flip = pt && pt->flipout;
    grzo__cu_carve c;
    grzo__cu_segs segs;
    float *R = NULL, *S = NULL, *P = NULL;
    uint16_t *XH, *Uc = NULL;
    size_t fixed;
    grzo_status s;
    chunk = grzo__cu_chunk_rows(cu, d_out, 2 * d_in + 4 * N);
    fixed = grzo__cu_piece((size_t)(N * d_in) * 2) +
            (flip ? grzo__cu_piece((size_t)(B * d_out) * 4) + grzo__cu_piece((size_t)(B * d_in) * 4) : 0);
    s = grzo__cu_carve_from(cu, fixed + (pt ? grzo__cu_piece((size_t)(chunk * d_in) * 2) + grzo__cu_piece((size_t)(N * chunk) * 4) : 0),
                         &c);
    if (s != GRZO_OK) return s;
    if ((s = grzo__cu_segments(cu, pt, &segs)) != GRZO_OK) return s;
    XH = (uint16_t *)grzo__cu_take(&c, (size_t)(N * d_in) * 2);
    grzo__cu_shape sh = grzo__cu_run_shape(0, N * d_in);
    grzo__k_to16<<<sh.grid, sh.block, 0, cu->stream>>>(a->x, N * d_in, dt, XH);
    GRZO__CU_LAUNCHED(cu, "to16 kernel");
    if ((s = grzo__cu_gemm_nt16(cu, dt, N, d_out, d_in, XH, a->w.data, a->y, d_out)) != GRZO_OK) return s;
    if (!pt) return GRZO_OK;
    if (flip) {
        grzo_noise r = pt->base, sn = pt->base;
        r.stream = GRZO_STREAM_SIGN_R; r.dist = GRZO_NOISE_RADEMACHER;
        sn.stream = GRZO_STREAM_SIGN_S; sn.dist = GRZO_NOISE_RADEMACHER;
        R = (float *)grzo__cu_take(&c, (size_t)(B * d_out) * 4);
        S = (float *)grzo__cu_take(&c, (size_t)(B * d_in) * 4);
        if ((s = grzo__cu_fill(cu, r, 0, B * d_out, R)) != GRZO_OK || (s = grzo__cu_fill(cu, sn, 0, B * d_in, S)) != GRZO_OK) return s;
        grzo__cu_shape sh = grzo__cu_matrix_shape(N, d_in);
        grzo__k_flip_signs16<<<sh.grid, sh.block, 0, cu->stream>>>(XH, N, d_in, segs, S);
        GRZO__CU_LAUNCHED(cu, "flip_signs16 kernel");
    }
    Uc = (uint16_t *)grzo__cu_take(&c, (size_t)(chunk * d_in) * 2);
    P = (float *)grzo__cu_take(&c, (size_t)(N * chunk) * 4);
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t nr = j0 + chunk > d_out ? d_out - j0 : chunk;
        grzo__cu_shape shu = grzo__cu_run_shape((uint64_t)(j0 * d_in), nr * d_in), shp = grzo__cu_matrix_shape(N, nr);
        grzo__k_noise<<<shu.grid, shu.block, 0, cu->stream>>>(pt->base, (uint64_t)(j0 * d_in), nr * d_in, dt, Uc);
        GRZO__CU_LAUNCHED(cu, "noise kernel (16-bit U)");
        if ((s = grzo__cu_gemm_nt16(cu, dt, N, nr, d_in, XH, Uc, P, nr)) != GRZO_OK) return s;
        grzo__k_add_perturbation<<<shp.grid, shp.block, 0, cu->stream>>>(a->y, N, d_out, j0, nr, P, segs, R, pt->sigma);
        GRZO__CU_LAUNCHED(cu, "add_perturbation kernel");
    }
    return GRZO_OK;
}

static grzo_noise grzo__cu_host_sign_noise(const grzo_noise *base, uint32_t stream) {
    grzo_noise n = *base;
    n.stream = stream;
    n.dist = GRZO_NOISE_RADEMACHER;
    return n;
}

/* ---- variants (grzo.h section 3c): taken only when an op carries a variant ------------------------- */
/* the per-row scales of a quantized matrix into scratch piece `amax` (rows floats) */
static grzo_status grzo__cu_row_amax(grzo__cuda *cu, const grzo_param *p, float *amax) {
    grzo__k_row_amax<<<grzo__cu_blocks(p->rows), GRZO__CU_THREADS, 0, cu->stream>>>(p->data, (int)p->dtype, p->rows, p->cols, amax);
    GRZO__CU_LAUNCHED(cu, "row_amax kernel");
    return GRZO_OK;
}

/* Sparse and/or quantized linear (and plain ops on quantized weights): per chunk of output
   rows and per segment (run of equal-sign segments without Flipout), the perturbed chunk
   q(W) + sign sigma B (.) r s^T formed by one kernel, then one GEMM over the segment's rows. */
static grzo_status grzo__cu_linear_elementwise(grzo__cuda *cu, const grzo_linear_args *a, const grzo_perturb *pt) {
    int64_t d_out = a->w.rows, d_in = a->w.cols, N = a->n_rows, B = pt ? pt->n_examples : 0, j0, chunk;
    int flip = pt && pt->flipout, quant = grzo__quantizes_weights(&a->w, a->variant);
    grzo__cu_carve c;
    float *amax = NULL, *R = NULL, *S = NULL, *Wc;
    grzo_noise base = pt ? pt->base : grzo_noise();
    grzo_status s;
    chunk = grzo__cu_chunk_rows(cu, d_out, 4 * d_in);
    s = grzo__cu_carve_from(cu, grzo__cu_piece((size_t)d_out * 4) + grzo__cu_piece((size_t)(B * d_out) * 4) +
                                 grzo__cu_piece((size_t)(B * d_in) * 4) + grzo__cu_piece((size_t)(chunk * d_in) * 4), &c);
    if (s != GRZO_OK) return s;
    amax = (float *)grzo__cu_take(&c, (size_t)d_out * 4);
    if (quant && (s = grzo__cu_row_amax(cu, &a->w, amax)) != GRZO_OK) return s;
    if (flip) {
        R = (float *)grzo__cu_take(&c, (size_t)(B * d_out) * 4);
        S = (float *)grzo__cu_take(&c, (size_t)(B * d_in) * 4);
        if ((s = grzo__cu_fill(cu, grzo__cu_host_sign_noise(&base, GRZO_STREAM_SIGN_R), 0, B * d_out, R)) != GRZO_OK ||
            (s = grzo__cu_fill(cu, grzo__cu_host_sign_noise(&base, GRZO_STREAM_SIGN_S), 0, B * d_in, S)) != GRZO_OK)
            return s;
    }
    Wc = (float *)grzo__cu_take(&c, (size_t)(chunk * d_in) * 4);
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t nr = j0 + chunk > d_out ? d_out - j0 : chunk, c0 = 0;
        if (!pt) {
            grzo__k_variant_weights<<<grzo__cu_blocks(nr * d_in), GRZO__CU_THREADS, 0, cu->stream>>>(
                a->w, j0, nr, base, *a->variant, quant ? amax : NULL, 0.0f, NULL, NULL, Wc);
            GRZO__CU_LAUNCHED(cu, "variant_weights kernel");
            if ((s = grzo__cu_gemm_nt(cu, N, nr, d_in, a->x, Wc, a->y + j0, d_out)) != GRZO_OK) return s;
            continue;
        }
        while (c0 < pt->n_segments) {
            int64_t c1 = c0 + 1, r0 = pt->offsets[c0], e = pt->example[c0];
            while (!flip && c1 < pt->n_segments && pt->sign[c1] == pt->sign[c0]) c1++;
            if (pt->offsets[c1] > r0) {
                grzo__k_variant_weights<<<grzo__cu_blocks(nr * d_in), GRZO__CU_THREADS, 0, cu->stream>>>(
                    a->w, j0, nr, base, *a->variant, quant ? amax : NULL, (float)pt->sign[c0] * pt->sigma, flip ? R + e * d_out : NULL,
                    flip ? S + e * d_in : NULL, Wc);
                GRZO__CU_LAUNCHED(cu, "variant_weights kernel");
                s = grzo__cu_gemm_nt(cu, pt->offsets[c1] - r0, nr, d_in, a->x + r0 * d_in, Wc, a->y + r0 * d_out + j0, d_out);
                if (s != GRZO_OK) return s;
            }
            c0 = c1;
        }
    }
    return GRZO_OK;
}

/* Low-rank linear: Y = X W^T + sign sigma (((X (.) s_e) V) U^T) (.) r_e / sqrt(r): two thin GEMMs,
   the second in chunks of output columns; U V^T is never formed. */
static grzo_status grzo__cu_linear_lowrank(grzo__cuda *cu, const grzo_linear_args *a, const grzo_perturb *pt) {
    int64_t d_out = a->w.rows, d_in = a->w.cols, N = a->n_rows, B = pt->n_examples, r = a->variant->lowrank_rank, j0, chunk;
    int flip = pt->flipout != 0;
    grzo__cu_carve c;
    float *R = NULL, *S = NULL, *U, *Vt, *T, *P, *XS = (float *)a->x, *Wc;
    grzo_noise un = grzo__lowrank_u_noise(&pt->base), vn = grzo__lowrank_v_noise(&pt->base, a->variant);
    grzo_status s;
    chunk = grzo__cu_chunk_rows(cu, d_out, 4 * (N > d_in ? N : d_in));
    s = grzo__cu_carve_from(cu, grzo__cu_piece((size_t)(B * d_out) * 4) + grzo__cu_piece((size_t)(B * d_in) * 4) +
                                 grzo__cu_piece((size_t)(N * d_in) * 4) + grzo__cu_piece((size_t)(d_out * r) * 4) +
                                 grzo__cu_piece((size_t)(d_in * r) * 4) + grzo__cu_piece((size_t)(N * r) * 4) +
                                 grzo__cu_piece((size_t)(chunk * (N > d_in ? N : d_in)) * 4), &c);
    if (s != GRZO_OK) return s;
    if (flip) {
        R = (float *)grzo__cu_take(&c, (size_t)(B * d_out) * 4);
        S = (float *)grzo__cu_take(&c, (size_t)(B * d_in) * 4);
        XS = (float *)grzo__cu_take(&c, (size_t)(N * d_in) * 4);
        if ((s = grzo__cu_fill(cu, grzo__cu_host_sign_noise(&pt->base, GRZO_STREAM_SIGN_R), 0, B * d_out, R)) != GRZO_OK ||
            (s = grzo__cu_fill(cu, grzo__cu_host_sign_noise(&pt->base, GRZO_STREAM_SIGN_S), 0, B * d_in, S)) != GRZO_OK)
            return s;
    }
    U = (float *)grzo__cu_take(&c, (size_t)(d_out * r) * 4);
    Vt = (float *)grzo__cu_take(&c, (size_t)(d_in * r) * 4);
    T = (float *)grzo__cu_take(&c, (size_t)(N * r) * 4);
    P = Wc = (float *)grzo__cu_take(&c, (size_t)(chunk * (N > d_in ? N : d_in)) * 4);   /* W chunk, then P chunk */
    {
        grzo__cu_segs segs;
        if ((s = grzo__cu_segments(cu, pt, &segs)) != GRZO_OK) return s;
        if (flip) {
            grzo__cu_shape sh = grzo__cu_matrix_shape(N, d_in);
            grzo__k_scale_x<<<sh.grid, sh.block, 0, cu->stream>>>(a->x, N, d_in, segs, S, XS);
            GRZO__CU_LAUNCHED(cu, "scale_x kernel");
        }
        if ((s = grzo__cu_fill(cu, un, 0, d_out * r, U)) != GRZO_OK) return s;
        grzo__k_lowrank_vt<<<grzo__cu_blocks(d_in * r), GRZO__CU_THREADS, 0, cu->stream>>>(vn, d_in, r, Vt);
        GRZO__CU_LAUNCHED(cu, "lowrank_vt kernel");
        if ((s = grzo__cu_gemm_nt(cu, N, r, d_in, XS, Vt, T, r)) != GRZO_OK) return s;   /* (X (.) s) V */
        for (j0 = 0; j0 < d_out; j0 += chunk) {
            int64_t nr = j0 + chunk > d_out ? d_out - j0 : chunk;
            if (a->w.dtype == GRZO_DTYPE_F32) {
                s = grzo__cu_gemm_nt(cu, N, nr, d_in, a->x, (const float *)a->w.data + j0 * d_in, a->y + j0, d_out);
            } else {   /* 16-bit storage: widen the chunk for an fp32 GEMM */
                grzo_variant plain;
                memset(&plain, 0, sizeof plain);
                grzo__k_variant_weights<<<grzo__cu_blocks(nr * d_in), GRZO__CU_THREADS, 0, cu->stream>>>(
                    a->w, j0, nr, pt->base, plain, NULL, 0.0f, NULL, NULL, Wc);
                GRZO__CU_LAUNCHED(cu, "variant_weights kernel");
                s = grzo__cu_gemm_nt(cu, N, nr, d_in, a->x, Wc, a->y + j0, d_out);
            }
            if (s != GRZO_OK) return s;
            if ((s = grzo__cu_gemm_nt(cu, N, nr, r, T, U + j0 * r, P, nr)) != GRZO_OK) return s;   /* ... U^T */
            grzo__cu_shape sh = grzo__cu_matrix_shape(N, nr);
            grzo__k_add_perturbation<<<sh.grid, sh.block, 0, cu->stream>>>(
                a->y, N, d_out, j0, nr, P, segs, R, pt->sigma * (float)(1.0 / sqrt((double)r)));
            GRZO__CU_LAUNCHED(cu, "add_perturbation kernel");
        }
    }
    return GRZO_OK;
}

static grzo_status grzo__cu_linear_variant(grzo__cuda *cu, const grzo_linear_args *a) {
    const grzo_perturb *pt = grzo__cu_active(a->perturb);
    if (pt && grzo__variant_is_lowrank(&a->w, a->variant)) return grzo__cu_linear_lowrank(cu, a, pt);
    return grzo__cu_linear_elementwise(cu, a, pt);
}

static grzo_status grzo__cu_vector_variant(grzo__cuda *cu, const grzo_vector_args *a, const grzo_perturb *pt) {
    grzo__cu_segs segs;
    grzo_status s = grzo__cu_segments(cu, pt, &segs);
    if (s != GRZO_OK) return s;
    grzo__k_vector_variant<<<grzo__cu_blocks(a->n_rows * a->v.rows), GRZO__CU_THREADS, 0, cu->stream>>>(
        a->x, a->y, a->v, a->n_rows, (int)a->op, segs, pt->base, *a->variant, pt->sigma, pt->flipout);
    GRZO__CU_LAUNCHED(cu, "vector_variant kernel");
    return GRZO_OK;
}

static grzo_status grzo__cu_embedding_variant(grzo__cuda *cu, const grzo_embedding_args *a, const grzo_perturb *pt) {
    grzo__cu_segs segs;
    grzo_status s = grzo__cu_segments(cu, pt, &segs);
    if (s != GRZO_OK) return s;
    grzo__k_embedding_variant<<<grzo__cu_blocks(a->n_rows * a->e.cols), GRZO__CU_THREADS, 0, cu->stream>>>(
        a->e, a->ids, a->y, a->n_rows, a->touched, segs, pt->base, *a->variant, pt->sigma, pt->flipout, cu->d_flag);
    GRZO__CU_LAUNCHED(cu, "embedding_variant kernel");
    return GRZO_OK;
}

/* The first rounding group of an update: the round_draw-th run of rows * cols groups of its
   stream (grzo_update_args); unsigned arithmetic wraps, and the RNG keeps 48 bits of it. */
static uint64_t grzo__cu_round_first(const grzo_update_args *a) {
    return (uint64_t)a->round_draw * (uint64_t)a->p.rows * (uint64_t)a->p.cols;
}

/* the update under a variant; coeff is the device copy, R and S filled by the caller (flipout) */
static grzo_status grzo__cu_update_variant(grzo__cuda *cu, const grzo_update_args *a, const float *coeff, const float *R, const float *S) {
    grzo__k_update_variant<<<grzo__cu_blocks(a->p.rows * a->p.cols), GRZO__CU_THREADS, 0, cu->stream>>>(
        a->p, a->base, *a->variant, a->flipout != 0, a->n_examples, coeff, R, S, a->decay, a->touched,
        a->round_stream ? a->round_stream : GRZO_STREAM_ROUND, grzo__cu_round_first(a));
    GRZO__CU_LAUNCHED(cu, "update_variant kernel");
    return GRZO_OK;
}

static grzo_status grzo__cu_perturbed_copy_variant(grzo__cuda *cu, const grzo_copy_args *a) {
    int quant = grzo__quantizes_weights(&a->p, a->variant);
    float *amax = NULL;
    grzo_status s;
    if (quant) {
        if ((s = grzo__cu_scratch(cu, (size_t)a->p.rows * 4, (void **)&amax)) != GRZO_OK) return s;
        if ((s = grzo__cu_row_amax(cu, &a->p, amax)) != GRZO_OK) return s;
    }
    grzo__k_perturbed_copy_variant<<<grzo__cu_blocks(a->p.rows * a->p.cols), GRZO__CU_THREADS, 0, cu->stream>>>(
        a->p, a->base, *a->variant, amax, a->flipout, a->example, a->scale, a->out);
    GRZO__CU_LAUNCHED(cu, "perturbed_copy_variant kernel");
    return GRZO_OK;
}

static grzo_status grzo__cu_linear(void *self, const grzo_linear_args *a) {
    grzo__cuda *cu = (grzo__cuda *)self;
    const grzo_perturb *pt = grzo__cu_active(a->perturb);
    int64_t d_out = a->w.rows, d_in = a->w.cols, N = a->n_rows, B = pt ? pt->n_examples : 0, j0, chunk;
    int flip = pt && pt->flipout;
    /* two products (plain + perturbation) for flipout, and in fast math for shared Z too:
       forming W + sigma U in a TF32 or 16-bit operand would round sigma U at W's scale */
    int two = flip || (pt && cu->math == GRZO_CUDA_MATH_FAST);
    grzo__cu_carve c;
    grzo__cu_segs segs;
    float *R = NULL, *S = NULL, *Wc, *Uc = NULL, *P = NULL;
    const float *XS = a->x;
    size_t fixed;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    if ((s = grzo__cu_int_sizes(cu, a)) != GRZO_OK) return s;
    if (a->variant) return grzo__cu_linear_variant(cu, a);
    if (cu->math == GRZO_CUDA_MATH_FAST && a->w.dtype != GRZO_DTYPE_F32) return grzo__cu_linear_fast16(cu, a, pt);
    /* per output row of a chunk: W chunk, and with two products a U chunk and a P column of N */
    chunk = grzo__cu_chunk_rows(cu, d_out, 4 * (two ? 2 * d_in + N : d_in));
    fixed = flip ? grzo__cu_piece((size_t)(B * d_out) * 4) + grzo__cu_piece((size_t)(B * d_in) * 4) +
                       grzo__cu_piece((size_t)(N * d_in) * 4) : 0;
    s = grzo__cu_carve_from(cu, fixed + grzo__cu_piece((size_t)(chunk * d_in) * 4) * (two ? 2 : 1) +
                                 (two ? grzo__cu_piece((size_t)(N * chunk) * 4) : 0), &c);
    if (s != GRZO_OK) return s;
    if ((s = grzo__cu_segments(cu, pt, &segs)) != GRZO_OK) return s;
    if (flip) {
        grzo_noise r = pt->base, sn = pt->base;
        float *xs;
        r.stream = GRZO_STREAM_SIGN_R; r.dist = GRZO_NOISE_RADEMACHER;
        sn.stream = GRZO_STREAM_SIGN_S; sn.dist = GRZO_NOISE_RADEMACHER;
        R = (float *)grzo__cu_take(&c, (size_t)(B * d_out) * 4);
        S = (float *)grzo__cu_take(&c, (size_t)(B * d_in) * 4);
        xs = (float *)grzo__cu_take(&c, (size_t)(N * d_in) * 4);
        if ((s = grzo__cu_fill(cu, r, 0, B * d_out, R)) != GRZO_OK || (s = grzo__cu_fill(cu, sn, 0, B * d_in, S)) != GRZO_OK) return s;
        grzo__cu_shape sh = grzo__cu_matrix_shape(N, d_in);
        grzo__k_scale_x<<<sh.grid, sh.block, 0, cu->stream>>>(a->x, N, d_in, segs, S, xs);
        GRZO__CU_LAUNCHED(cu, "scale_x kernel");
        XS = xs;
    }
    Wc = (float *)grzo__cu_take(&c, (size_t)(chunk * d_in) * 4);
    if (two) {
        Uc = (float *)grzo__cu_take(&c, (size_t)(chunk * d_in) * 4);
        P = (float *)grzo__cu_take(&c, (size_t)(N * chunk) * 4);
    }
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t nr = j0 + chunk > d_out ? d_out - j0 : chunk;
        grzo_noise u = pt ? pt->base : grzo_noise();
        if (pt && !two) {
            /* shared Z, pedantic: each run of segments with one sign reads W + sign sigma U */
            int64_t c0 = 0;
            while (c0 < pt->n_segments) {
                int64_t c1 = c0 + 1, r0 = pt->offsets[c0];
                while (c1 < pt->n_segments && pt->sign[c1] == pt->sign[c0]) c1++;
                grzo__k_weight_chunk<<<grzo__cu_blocks(nr * d_in), GRZO__CU_THREADS, 0, cu->stream>>>(
                    a->w.data, (int)a->w.dtype, d_in, j0, nr, u, (float)pt->sign[c0] * pt->sigma, Wc);
                GRZO__CU_LAUNCHED(cu, "weight_chunk kernel");
                s = grzo__cu_gemm_nt(cu, pt->offsets[c1] - r0, nr, d_in, a->x + r0 * d_in, Wc, a->y + r0 * d_out + j0, d_out);
                if (s != GRZO_OK) return s;
                c0 = c1;
            }
            continue;
        }
        if (a->w.dtype == GRZO_DTYPE_F32) {
            s = grzo__cu_gemm_nt(cu, N, nr, d_in, a->x, (const float *)a->w.data + j0 * d_in, a->y + j0, d_out);
        } else {   /* 16-bit storage, pedantic: widen the chunk to fp32 for an fp32 GEMM */
            grzo__k_weight_chunk<<<grzo__cu_blocks(nr * d_in), GRZO__CU_THREADS, 0, cu->stream>>>(a->w.data, (int)a->w.dtype,
                                                                                                 d_in, j0, nr, u, 0.0f, Wc);
            GRZO__CU_LAUNCHED(cu, "weight_chunk kernel");
            s = grzo__cu_gemm_nt(cu, N, nr, d_in, a->x, Wc, a->y + j0, d_out);
        }
        if (s != GRZO_OK) return s;
        if (!two) continue;
        if ((s = grzo__cu_fill(cu, u, (uint64_t)(j0 * d_in), nr * d_in, Uc)) != GRZO_OK) return s;
        if ((s = grzo__cu_gemm_nt(cu, N, nr, d_in, XS, Uc, P, nr)) != GRZO_OK) return s;
        grzo__cu_shape sh = grzo__cu_matrix_shape(N, nr);
        grzo__k_add_perturbation<<<sh.grid, sh.block, 0, cu->stream>>>(a->y, N, d_out, j0, nr, P, segs, R, pt->sigma);
        GRZO__CU_LAUNCHED(cu, "add_perturbation kernel");
    }
    return GRZO_OK;
}

static grzo_status grzo__cu_vector(void *self, const grzo_vector_args *a) {
    grzo__cuda *cu = (grzo__cuda *)self;
    const grzo_perturb *pt = a->perturb && a->perturb->sigma != 0.0f && a->perturb->n_segments > 0 ? a->perturb : NULL;
    grzo__cu_segs segs;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    if (pt && a->variant) return grzo__cu_vector_variant(cu, a, pt);
    if ((s = grzo__cu_segments(cu, pt, &segs)) != GRZO_OK) return s;
    grzo__cu_shape sh = grzo__cu_matrix_shape(a->n_rows, a->v.rows);
    grzo__k_vector<<<sh.grid, sh.block, 0, cu->stream>>>(
        a->x, a->y, a->v.data, (int)a->v.dtype, a->v.rows, a->n_rows, (int)a->op, segs, pt ? pt->base : grzo_noise(),
        pt ? pt->sigma : 0.0f, pt ? pt->flipout : 0);
    GRZO__CU_LAUNCHED(cu, "vector kernel");
    return GRZO_OK;
}

/* A token id out of range raises the device flag; it is reported at the next synchronize
   or download (grzo_pass_end synchronizes), not here: checking here would wait per op. */
static grzo_status grzo__cu_embedding(void *self, const grzo_embedding_args *a) {
    grzo__cuda *cu = (grzo__cuda *)self;
    const grzo_perturb *pt = a->perturb && a->perturb->sigma != 0.0f && a->perturb->n_segments > 0 ? a->perturb : NULL;
    grzo__cu_segs segs;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    if (pt && a->variant) return grzo__cu_embedding_variant(cu, a, pt);
    if ((s = grzo__cu_segments(cu, pt, &segs)) != GRZO_OK) return s;
    grzo__cu_shape sh = grzo__cu_matrix_shape(a->n_rows, a->e.cols);
    grzo__k_embedding<<<sh.grid, sh.block, 0, cu->stream>>>(
        a->e.data, (int)a->e.dtype, a->ids, a->y, a->n_rows, a->e.cols, a->e.rows, a->touched, segs,
        pt ? pt->base : grzo_noise(), pt ? pt->sigma : 0.0f, pt ? pt->flipout : 0, cu->d_flag);
    GRZO__CU_LAUNCHED(cu, "embedding kernel");
    return GRZO_OK;
}

/* Enqueued, not waited for: the coefficients come from the table cache (the host array may be
   reused as soon as this returns), the sign vectors from the scratch, which later work on the
   same stream reuses only after this kernel. */
static grzo_status grzo__cu_update(void *self, const grzo_update_args *a) {
    grzo__cuda *cu = (grzo__cuda *)self;
    int64_t rows = a->p.rows, cols = a->p.cols, B = a->n_examples, tag[2];
    int flip = a->flipout != 0, vec = a->p.kind == GRZO_BLOCK_VECTOR;
    grzo__cu_carve c;
    float *R = NULL, *S = NULL;
    char *coeff;
    const void *parts[2];
    size_t sizes[2];
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    tag[0] = GRZO__CU_TABLE_COEFF;
    tag[1] = B;
    parts[0] = tag;      sizes[0] = sizeof tag;
    parts[1] = a->coeff; sizes[1] = (size_t)B * 4;
    if ((s = grzo__cu_table_get(cu, 2, parts, sizes, &coeff)) != GRZO_OK) return s;
    coeff += grzo__cu_align(sizes[0]);
    if (flip) {
        grzo_noise r = a->base, sn = a->base;
        s = grzo__cu_carve_from(cu, grzo__cu_piece((size_t)(B * rows) * 4) + grzo__cu_piece((size_t)(B * cols) * 4), &c);
        if (s != GRZO_OK) return s;
        r.stream = GRZO_STREAM_SIGN_R; r.dist = GRZO_NOISE_RADEMACHER;
        sn.stream = GRZO_STREAM_SIGN_S; sn.dist = GRZO_NOISE_RADEMACHER;
        R = (float *)grzo__cu_take(&c, (size_t)(B * rows) * 4);
        S = (float *)grzo__cu_take(&c, (size_t)(B * cols) * 4);
        if ((s = grzo__cu_fill(cu, r, 0, B * rows, R)) != GRZO_OK || (s = grzo__cu_fill(cu, sn, 0, B * cols, S)) != GRZO_OK) return s;
    }
    if (a->variant) return grzo__cu_update_variant(cu, a, (const float *)coeff, R, S);
    grzo__cu_shape sh = grzo__cu_matrix_shape(rows, cols);
    grzo__k_update<<<sh.grid, sh.block, 0, cu->stream>>>(
        a->p.data, (int)a->p.dtype, rows, cols, a->base, flip, vec, B, (const float *)coeff, R, S, a->decay, a->touched,
        a->round_stream ? a->round_stream : GRZO_STREAM_ROUND, grzo__cu_round_first(a));
    GRZO__CU_LAUNCHED(cu, "update kernel");
    return GRZO_OK;
}

static grzo_status grzo__cu_perturbed_copy(void *self, const grzo_copy_args *a) {
    grzo__cuda *cu = (grzo__cuda *)self;
    grzo_status s = grzo__cu_check(cu);
    if (s != GRZO_OK) return s;
    if (a->variant) return grzo__cu_perturbed_copy_variant(cu, a);
    grzo__cu_shape sh = grzo__cu_matrix_shape(a->p.rows, a->p.cols);
    grzo__k_perturbed_copy<<<sh.grid, sh.block, 0, cu->stream>>>(
        a->p.data, (int)a->p.dtype, a->p.rows, a->p.cols, a->base, a->flipout, a->p.kind == GRZO_BLOCK_VECTOR, a->example,
        a->scale, a->out);
    GRZO__CU_LAUNCHED(cu, "perturbed_copy kernel");
    return GRZO_OK;
}

static void grzo__cu_destroy(void *self) {
    grzo__cuda *cu = (grzo__cuda *)self;
    int k;
    if (!cu) return;
    /* every error here is dropped: nothing is left to report it to, and a later backend's
       first launch check must not inherit it */
    grzo__cu_drop(cu, cudaSetDevice(cu->device));
    if (cu->stream) grzo__cu_drop(cu, cudaStreamSynchronize(cu->stream));
    for (k = 0; k < GRZO__CU_TABLES; k++) {
        if (cu->tables[k].host) grzo__cu_drop(cu, cudaFreeHost(cu->tables[k].host));
        if (cu->tables[k].uploaded) grzo__cu_drop(cu, cudaEventDestroy(cu->tables[k].uploaded));
    }
    if (cu->h_flag) grzo__cu_drop(cu, cudaFreeHost(cu->h_flag));
    if (cu->blas) cublasDestroy(cu->blas);
    while (cu->n_allocs) grzo__cu_release(cu, cu->allocs[cu->n_allocs - 1].ptr);   /* scratch, flag, tables, workspace, ... */
    free(cu->allocs);
    if (cu->own_stream && cu->stream) grzo__cu_drop(cu, cudaStreamDestroy(cu->stream));
    free(cu);
}

static const grzo_backend_i grzo__cuda_iface = {
    GRZO_BACKEND_API_VERSION, "cuda", grzo__cu_destroy, grzo__cu_query, grzo__cu_alloc, grzo__cu_free,
    grzo__cu_upload, grzo__cu_download, grzo__cu_linear, grzo__cu_vector, grzo__cu_embedding, grzo__cu_update,
    grzo__cu_perturbed_copy, grzo__cu_synchronize, grzo__cu_last_error};

int grzo_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   /* clear: no driver is not an error of ours */
        return 0;
    }
    return n;
}

static grzo__cuda *grzo__cu_of(const grzo_backend *be) {
    return be && be->iface == &grzo__cuda_iface ? (grzo__cuda *)be->self : NULL;
}

grzo_status grzo_backend_cuda_stream(const grzo_backend *be, void **stream_out) {
    const grzo__cuda *cu = grzo__cu_of(be);
    if (!cu || !stream_out) return GRZO_ERR_INVALID_ARG;
    *stream_out = (void *)cu->stream;
    return GRZO_OK;
}

grzo_status grzo_backend_cuda_memory(const grzo_backend *be, grzo_cuda_memory *out) {
    grzo__cuda *cu = grzo__cu_of(be);
    size_t free_b = 0, total_b = 0;
    if (!cu || !out) return GRZO_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    cudaError_t e = cudaSetDevice(cu->device);
    if (e != cudaSuccess) return grzo__cu_fail(cu, "cudaSetDevice", e);
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) return grzo__cu_fail(cu, "cudaMemGetInfo", e);
    out->bytes_now = cu->bytes_now;
    out->bytes_peak = cu->bytes_peak;
    out->blas_workspace = cu->blas_workspace ? GRZO__CU_BLAS_WORKSPACE : 0;
    out->device_free = free_b;
    out->device_total = total_b;
    return GRZO_OK;
}

grzo_status grzo_backend_cuda_reset_peak(const grzo_backend *be) {
    grzo__cuda *cu = grzo__cu_of(be);
    if (!cu) return GRZO_ERR_INVALID_ARG;
    cu->bytes_peak = cu->bytes_now;
    return GRZO_OK;
}

/* Each step's failure says which call failed and why, in cu->err (create copies it to the
   caller's desc.error): the first run on a new machine fails here if it fails at all (a
   driver older than the runtime, a device in exclusive or prohibited mode). */
static grzo_status grzo__cu_init(grzo__cuda *cu, const grzo_cuda_desc *d) {
    int k;
    cublasStatus_t b;
    grzo_status s;
    GRZO__CU_TRY(cu, "cudaSetDevice", cudaSetDevice(d->device));
    /* each handle into a local, kept only when its creation succeeded: what a failed one
       leaves in its output is not documented, and grzo__cu_destroy would synchronize and
       destroy it */
    if (d->stream) cu->stream = (cudaStream_t)d->stream;
    else {
        cudaStream_t stream = NULL;
        GRZO__CU_TRY(cu, "cudaStreamCreate", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        cu->stream = stream;
        cu->own_stream = 1;
    }
    for (k = 0; k < GRZO__CU_TABLES; k++) {
        cudaEvent_t ev = NULL;
        GRZO__CU_TRY(cu, "cudaEventCreate", cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        cu->tables[k].uploaded = ev;
    }
    {
        cublasHandle_t h = NULL;
        if ((b = cublasCreate(&h)) != CUBLAS_STATUS_SUCCESS) return grzo__cu_blas_fail(cu, "cublasCreate", b);
        cu->blas = h;
    }
    if ((b = cublasSetStream(cu->blas, cu->stream)) != CUBLAS_STATUS_SUCCESS) return grzo__cu_blas_fail(cu, "cublasSetStream", b);
    if ((s = grzo__cu_malloc(cu, sizeof(int), (void **)&cu->d_flag)) != GRZO_OK) return s;
    GRZO__CU_TRY(cu, "cudaMemsetAsync (error flag)", cudaMemsetAsync(cu->d_flag, 0, sizeof(int), cu->stream));
    {   /* into a local: what a failed cudaMallocHost leaves in its pointer is not documented */
        void *h = NULL;
        GRZO__CU_TRY(cu, "cudaMallocHost (error flag)", cudaMallocHost(&h, sizeof(int)));
        cu->h_flag = (int *)h;
    }
    *cu->h_flag = 0;
    /* cuBLAS's workspace is ours, so that the accounting sees it */
    if ((s = grzo__cu_malloc(cu, GRZO__CU_BLAS_WORKSPACE, &cu->blas_workspace)) != GRZO_OK) return s;
    if ((b = cublasSetWorkspace(cu->blas, cu->blas_workspace, GRZO__CU_BLAS_WORKSPACE)) != CUBLAS_STATUS_SUCCESS)
        return grzo__cu_blas_fail(cu, "cublasSetWorkspace", b);
    /* pedantic: fp32 GEMMs stay fp32 (no TF32), so results can be compared with the CPU's;
       fast: TF32 tensor ops for fp32 weights (16-bit weights use cublasGemmEx) */
    if ((b = cublasSetMathMode(cu->blas, cu->math == GRZO_CUDA_MATH_FAST ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH)) !=
        CUBLAS_STATUS_SUCCESS)
        return grzo__cu_blas_fail(cu, "cublasSetMathMode", b);
    return GRZO_OK;
}

/* A failed create's reason, where the caller gave a buffer for it. */
static grzo_status grzo__cu_create_fail(const grzo_cuda_desc *d, grzo_status s, const char *fmt, ...) {
    if (d->error && d->error_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->error, d->error_size, fmt, ap);
        va_end(ap);
    }
    return s;
}

grzo_status grzo_backend_cuda_create(const grzo_cuda_desc *desc, grzo_backend *out) {
    grzo_cuda_desc d;
    grzo__cuda *cu;
    grzo_status s;
    int n_devices;
    if (desc) memcpy(&d, desc, sizeof d); else memset(&d, 0, sizeof d);
    if (!out) return grzo__cu_create_fail(&d, GRZO_ERR_INVALID_ARG, "no backend to create into (out is NULL)");
    out->iface = NULL;
    out->self = NULL;
    {   /* the mode read as an integer: this file is C++, where loading an enum whose value lies
           outside its enumerators' range (a C caller's 7) is undefined, and may skip the check */
        int32_t math;
        static_assert(sizeof d.math == sizeof math, "grzo_cuda_math is 32 bits");
        memcpy(&math, &d.math, sizeof math);
        if (math != GRZO_CUDA_MATH_PEDANTIC && math != GRZO_CUDA_MATH_FAST)
            return grzo__cu_create_fail(&d, GRZO_ERR_INVALID_ARG, "unknown math mode %d (expected %d, pedantic, or %d, fast)",
                                        (int)math, (int)GRZO_CUDA_MATH_PEDANTIC, (int)GRZO_CUDA_MATH_FAST);
    }
    n_devices = grzo_cuda_device_count();
    if (d.device < 0 || d.device >= n_devices)
        return grzo__cu_create_fail(&d, GRZO_ERR_BACKEND, n_devices ? "no CUDA device %d (this machine has %d)"
                                                                  : "no CUDA device %d (no GPU or no driver)",
                                    (int)d.device, n_devices);
    if (d.transient_bytes == 0) d.transient_bytes = (size_t)256 << 20;
    cu = (grzo__cuda *)calloc(1, sizeof *cu);
    if (!cu) return grzo__cu_create_fail(&d, GRZO_ERR_OUT_OF_MEMORY, "host out of memory (the backend's state)");
    cu->device = d.device;
    cu->transient = d.transient_bytes;
    cu->math = (int)d.math;
    if ((s = grzo__cu_init(cu, &d)) != GRZO_OK) {
        /* the failed call's error would otherwise wait for the next backend's first launch check */
        (void)cudaGetLastError();
        grzo__cu_create_fail(&d, s, "%s", cu->err[0] ? cu->err : "the CUDA backend failed to start");
        grzo__cu_destroy(cu);
        return s;
    }
    out->iface = &grzo__cuda_iface;
    out->self = cu;
    return GRZO_OK;
}
