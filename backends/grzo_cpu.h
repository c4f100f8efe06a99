/* grzo_cpu.h - the CPU backend of grzo: OpenBLAS sgemm + OpenMP loops.

   Include after grzo.h; the implementation is emitted with GRZO_IMPLEMENTATION:

       #define GRZO_IMPLEMENTATION
       #include "grzo.h"
       #include "backends/grzo_cpu.h"

   Build options (define them for the implementation TU):
     GRZO_USE_OPENBLAS  use cblas_sgemm from OpenBLAS (link the OpenMP build,
                        libopenblas-openmp-dev on Debian: the pthread build's spinning
                        threads slow our OpenMP loops 10-30x). Without it, portable
                        C loops compute every product (correct, several times slower).
     GRZO_USE_BLIS      the fused perturbed GEMM on BLIS's micro-kernel (link -lblis;
                        libblis-dev on Debian; blis.h needs _POSIX_C_SOURCE >= 200112L).
                        Without it, or where BLIS has no kernel for the CPU, FUSED falls
                        back to PER_EXAMPLE.
     _OPENMP            (set by -fopenmp) parallel loops; without it, one thread.

   The perturbed linear picks, per call, between two exact algorithms:
     PER_EXAMPLE  for each example copy, form W +- sigma U(.)(r s^T) in a transient
                  chunk and run one GEMM over that copy's rows: the FLOPs of a plain
                  linear plus the forming pass. Where the "+" and "-" copies of an
                  example read identical rows (a first layer), it runs X W^T and
                  ((X(.)s) U^T)(.)r once and adds/subtracts: again the plain FLOPs.
     TWO_GEMM     Y = X W^T + sigma ((X(.)s) U^T)(.)r for all rows: twice the FLOPs,
                  but no per-copy forming, so it wins when copies have few rows (an
                  output head read at one position per example).
     FUSED        (GRZO_USE_BLIS) PER_EXAMPLE's algorithm in one pass: W and U packed once
                  per cache block, each copy's W +- sigma U(.)(r s^T) formed while packing
                  and multiplied by BLIS's micro-kernel (backends/grzo_cpu_fused.h); on
                  AVX-512 CPUs, with U and s Rademacher (the default), by grzo's kernel
                  that forms in registers as it multiplies (the same bits); a copy's last
                  few rows (all of a copy shorter than half the kernel's width, e.g. an
                  output head's one row) take TWO_GEMM's form on the same packed panels.
                  Also serves the shared-Z passes (MeZO, FZOO): W + sigma U is formed
                  while packing.
   AUTO chooses FUSED where BLIS has a kernel for the CPU and the weight has at least two of
   the kernel's slivers of rows per thread (a narrower one runs faster without it);
   otherwise PER_EXAMPLE when the copies average at least 8 rows, else TWO_GEMM.
   The update reads each weight row once: GRZO's rank-B product U (.) (R^T diag(a) S) comes
   from per-row tables of signed coefficient sums indexed by S's sign bits (no GEMM; scalar,
   AVX2 and AVX-512 versions with the same bits), MeZO's is one coefficient times U; a
   Rademacher U is regenerated as sign bits.
   Memory from grzo_backend_alloc is zero-filled and 64-byte aligned; buffers a caller
   allocates itself run fastest aligned so too (on a Zen 4, a step 2-3 % slower with every
   buffer 16 bytes past a cache line, where glibc puts a large malloc).
   Transient memory is bounded by desc.transient_bytes (default 8 MiB): weights are
   processed in chunks of output rows. FUSED packs a K block of the op's rows and a weight
   block per thread; it keeps that scratch between calls (grown to the largest call's, freed
   by grzo_backend_destroy), so a backend serves one thread at a time.

   Results do not depend on n_threads: every element is computed by one thread in a fixed
   order (GEMM reductions run inside OpenBLAS, which does not split K across threads).
*/
#ifndef GRZO_CPU_H
#define GRZO_CPU_H

#include "../grzo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum grzo_cpu_linear_algo {
    GRZO_CPU_LINEAR_AUTO = 0,
    GRZO_CPU_LINEAR_PER_EXAMPLE,
    GRZO_CPU_LINEAR_TWO_GEMM,
    GRZO_CPU_LINEAR_FUSED        /* needs GRZO_USE_BLIS and a BLIS kernel for this CPU, else PER_EXAMPLE */
} grzo_cpu_linear_algo;

typedef struct grzo_cpu_desc {
    int32_t n_threads;                 /* 0: omp_get_max_threads() */
    grzo_cpu_linear_algo linear_algo;  /* 0: AUTO */
    size_t transient_bytes;            /* 0: 8 MiB; bound on per-call weight-sized scratch */
} grzo_cpu_desc;

GRZO_API grzo_status grzo_backend_cpu_create(const grzo_cpu_desc *desc, grzo_backend *out);
/* The GEMM kernels a CPU backend runs, one line for logs ("OpenBLAS 0.3.21 ... core Haswell;
   fused: BLIS 0.9.0 skx", "+ grzo's AVX-512 forming kernel" where GRZO passes form their
   weights in registers), and a warning with the remedy when a library runs kernels older
   than the CPU supports, or a BLIS_ARCH_TYPE that BLIS would abort or crash on (then BLIS is
   never called and the fused path is off) ("" when none). Returns INVALID_ARG if `be` is not
   a CPU backend. */
GRZO_API grzo_status grzo_backend_cpu_kernels(const grzo_backend *be, const char **line, const char **warning);
/* Environment setting i (0, 1, ...) that makes OpenBLAS/BLIS use this CPU's kernels: returns 1
   and fills *name and value (e.g. OPENBLAS_CORETYPE=SkylakeX), 0 when there is no i-th. The
   libraries read them when they initialize, so a program sets them and re-executes itself.
   BLIS_ARCH_TYPE is named only where BLIS chose its configuration itself (the variable unset
   or -1) below the CPU's SIMD level, e.g. zen3's AVX2 kernels on an AVX-512 Zen 4; a value
   already set is the user's choice and is kept. */
GRZO_API int grzo_cpu_kernel_env(int i, const char **name, char *value, size_t value_size);

#ifdef __cplusplus
}
#endif
#endif /* GRZO_CPU_H */

#if defined(GRZO_IMPLEMENTATION) && !defined(GRZO_CPU__IMPLEMENTED)
#define GRZO_CPU__IMPLEMENTED

#include <limits.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef GRZO_USE_OPENBLAS
#include <cblas.h>
#endif

/* Under AddressSanitizer the bytes past a backend allocation's end (its alignment slack) are
   poisoned, so a kernel writing one element past a buffer is reported; and every piece the
   fused path carves from its kept area and from a thread's buffer (grzo__carve_take) is
   followed by a poisoned red zone of 16 floats, its alignment padding poisoned too, as is
   whatever of the area a call does not carve: a kernel reading or writing past its piece (a
   former one float past its sliver) is reported where the next piece would otherwise absorb
   it. The other ops' per-thread scratch is cut the same way: each thread's slice, and each
   piece of a slice, is followed by its red zone (grzo__cpu_take_slices, grzo__cpu_slice_pieces).
   Plain builds lay everything out as they always have. */
#if defined(__SANITIZE_ADDRESS__)
#define GRZO__CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRZO__CPU_ASAN 1
#endif
#endif
#ifdef GRZO__CPU_ASAN
#include <sanitizer/asan_interface.h>
#define GRZO__CPU_REDZONE 16   /* floats */
#define GRZO__CPU_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (size_t)(n) * sizeof(float))
#define GRZO__CPU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (size_t)(n) * sizeof(float))
#define GRZO__CPU_POISON_BYTES(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#else
#define GRZO__CPU_REDZONE 0
#define GRZO__CPU_POISON(p, n) ((void)0)
#define GRZO__CPU_UNPOISON(p, n) ((void)0)
#define GRZO__CPU_POISON_BYTES(p, n) ((void)0)
#endif

struct grzo__ukr;
typedef struct grzo__cpu {
    int n_threads;
    grzo_cpu_linear_algo algo;
    size_t transient;
    int simd;                /* grzo__cpu_simd_level(): which version of the update's row loop runs */
    struct grzo__ukr *ukr;   /* the fused path's micro-kernel, NULL without one */
    void *kept;              /* the fused path's panels, kept between calls (grzo__cpu_kept) */
    size_t kept_bytes;
    char kernels[256], warning[640];   /* room for both libraries' lines and warnings */
    char err[160];
} grzo__cpu;

#ifdef _OPENMP
/* parallel loops over a local `nt` (the backend's thread count) */
#define GRZO__OMP_FOR _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
#define GRZO__OMP_FOR_DYNAMIC _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)")
static int grzo__cpu_thread(void) { return omp_get_thread_num(); }
#else
#define GRZO__OMP_FOR (void)nt;
#define GRZO__OMP_FOR_DYNAMIC (void)nt;
static int grzo__cpu_thread(void) { return 0; }
#endif

static grzo_status grzo__cpu_fail(grzo__cpu *cpu, grzo_status s, const char *msg) {
    snprintf(cpu->err, sizeof cpu->err, "%s", msg);
    return s;
}

/* Y[M x N] (row stride ldy) = beta Y + X[M x K] (stride ldx) W[N x K]^T (stride ldw) */
static void grzo__cpu_gemm_nt(int nt, int64_t M, int64_t N, int64_t K, const float *X, int64_t ldx,
                              const float *W, int64_t ldw, float beta, float *Y, int64_t ldy) {
    if (M == 0 || N == 0) return;
#ifdef GRZO_USE_OPENBLAS
    (void)nt;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, X, (int)ldx, W,
                (int)ldw, beta, Y, (int)ldy);
#else
    {
        /* portable: blocks of 4 rows of X share each row of W; 8 partial sums per dot */
        int64_t mb, n_mblocks = (M + 3) / 4;
#ifdef _OPENMP
        int par = !omp_in_parallel() && nt > 1;   /* never nest inside a per-example loop */
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
#else
        (void)nt;
#endif
        for (mb = 0; mb < n_mblocks; mb++) {
            int64_t m0 = mb * 4, m1 = m0 + 4 > M ? M : m0 + 4, m, n, k;
            for (n = 0; n < N; n++) {
                const float *w = W + n * ldw;
                for (m = m0; m < m1; m++) {
                    const float *x = X + m * ldx;
                    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sum;
                    for (k = 0; k + 8 <= K; k += 8) {
                        int q;
                        for (q = 0; q < 8; q++) acc[q] += x[k + q] * w[k + q];
                    }
                    sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                    for (; k < K; k++) sum += x[k] * w[k];
                    Y[m * ldy + n] = beta == 0.0f ? sum : beta * Y[m * ldy + n] + sum;
                }
            }
        }
    }
#endif
}

/* ---- memory ---------------------------------------------------------------------------------- */
static grzo_status grzo__cpu_query(void *self, grzo_backend_caps *out) {
    grzo__cpu *cpu = (grzo__cpu *)self;
    out->dtypes = 1u << GRZO_DTYPE_F32;
    out->device_memory = 0;
    out->n_threads = cpu->n_threads;
    out->variants = GRZO_VARIANT_SPARSE | GRZO_VARIANT_LOWRANK | GRZO_VARIANT_QUANT;
    return GRZO_OK;
}
/* Backend memory: zero-filled and 64-byte aligned (a cache line: see the header), so that the
   kernels' vector loads and stores never split a line. calloc's area is kept in the
   pointer-sized slot just below the aligned start (malloc's 16-byte alignment leaves 16 to 64
   bytes there); calloc keeps a large area's untouched pages unmapped. */
#define GRZO__CPU_ALIGN 64
static grzo_status grzo__cpu_alloc(void *self, size_t bytes, void **out) {
    char *raw, *p;
    if (bytes > SIZE_MAX - GRZO__CPU_ALIGN)
        return grzo__cpu_fail((grzo__cpu *)self, GRZO_ERR_OUT_OF_MEMORY, "host allocation: size too large");
    raw = (char *)calloc(1, bytes + GRZO__CPU_ALIGN);
    if (!raw) return grzo__cpu_fail((grzo__cpu *)self, GRZO_ERR_OUT_OF_MEMORY, "host allocation failed");
    p = raw + GRZO__CPU_ALIGN - (size_t)((uintptr_t)raw % GRZO__CPU_ALIGN);
    memcpy(p - sizeof raw, &raw, sizeof raw);
    GRZO__CPU_POISON_BYTES(p + bytes, (size_t)(raw + bytes + GRZO__CPU_ALIGN - (p + bytes)));
    *out = p;
    return GRZO_OK;
}
static void grzo__cpu_free(void *self, void *p) {
    char *raw;
    (void)self;
    if (!p) return;
    memcpy(&raw, (char *)p - sizeof raw, sizeof raw);
    free(raw);
}
static grzo_status grzo__cpu_copy(void *self, void *dst, const void *src, size_t bytes) {
    (void)self;
    if (bytes) memmove(dst, src, bytes);
    return GRZO_OK;
}
static void grzo__cpu_destroy(void *self) {
    free(((grzo__cpu *)self)->ukr);
    free(((grzo__cpu *)self)->kept);
    free(self);
}
static const char *grzo__cpu_last_error(void *self) { return ((grzo__cpu *)self)->err; }

/* ---- random tensors for one op ------------------------------------------------------------------ */
/* Elements [first, first + count) into out, in pieces split at whole groups, in parallel. */
static void grzo__cpu_fill_range(int nt, const grzo_noise *n, uint64_t first, int64_t count, float *out) {
    const int64_t piece = 128 * 64;
    uint64_t a0 = first / (uint64_t)piece * (uint64_t)piece;
    int64_t n_pieces = (int64_t)((first + (uint64_t)count - a0 + (uint64_t)piece - 1) / (uint64_t)piece), q;
    GRZO__OMP_FOR
    for (q = 0; q < n_pieces; q++) {
        uint64_t s = a0 + (uint64_t)(q * piece), e = s + (uint64_t)piece;
        if (s < first) s = first;
        if (e > first + (uint64_t)count) e = first + (uint64_t)count;
        if (e > s) grzo_noise_fill(n, s, (size_t)(e - s), out + (s - first));
    }
}

/* Sign vectors of all B examples: R[e][j] (length len each) from stream `stream`. */
static void grzo__cpu_fill_signs(int nt, const grzo_noise *base, uint32_t stream, int64_t B, int64_t len, float *out) {
    grzo_noise n = grzo__sign_noise(base, stream);
    grzo__cpu_fill_range(nt, &n, 0, B * len, out);
}

/* U rows [j0, j1) of a rows x cols block into out: one contiguous range of the tensor */
static void grzo__cpu_fill_u(int nt, const grzo_noise *base, int64_t cols, int64_t j0, int64_t j1, float *out) {
    grzo__cpu_fill_range(nt, base, (uint64_t)(j0 * cols), (j1 - j0) * cols, out);
}

/* scratch that is freed on every exit path; a take beyond GRZO__CPU_SCRATCH_MAX fails like an
   allocation (NULL), it never writes past the table */
#define GRZO__CPU_SCRATCH_MAX 8
typedef struct grzo__cpu_scratch { void *p[GRZO__CPU_SCRATCH_MAX]; int n; } grzo__cpu_scratch;
static void *grzo__cpu_take(grzo__cpu_scratch *s, size_t bytes) {
    void *p;
    if (s->n >= GRZO__CPU_SCRATCH_MAX) return NULL;
    p = malloc(bytes ? bytes : 1);
    if (p) s->p[s->n++] = p;
    return p;
}
static void grzo__cpu_release(grzo__cpu_scratch *s) { while (s->n > 0) free(s->p[--s->n]); }

/* Consecutive pieces of a float area (base, `limit` floats): each starts a multiple of
   `align` floats in, and under AddressSanitizer is followed by its red zone. A NULL base only
   counts: the same takes size an area (`used`) and then carve it. */
typedef struct grzo__carve { float *base; int64_t used, limit, align; } grzo__carve;
static grzo__carve grzo__carve_begin(float *base, int64_t limit, int64_t align) {
    grzo__carve c;
    c.base = base;
    c.used = 0;
    c.limit = limit;
    c.align = GRZO__CPU_REDZONE > 0 && align < 16 ? 16 : align;   /* red zones from a 64-byte line */
    if (base) GRZO__CPU_UNPOISON(base, limit);   /* an earlier call's red zones lifted */
    return c;
}
static float *grzo__carve_take(grzo__carve *c, int64_t n) {
    float *p = c->base ? c->base + c->used : NULL;
    int64_t piece = (n + c->align - 1) / c->align * c->align + GRZO__CPU_REDZONE;
    if (p) GRZO__CPU_POISON(p + n, piece - n);
    c->used += piece;
    return p;
}
/* poisons the area past the pieces taken (under AddressSanitizer) */
static void grzo__carve_end(const grzo__carve *c) {
    if (c->base && c->used < c->limit) GRZO__CPU_POISON(c->base + c->used, c->limit - c->used);
}

/* Per-thread scratch: nt slices of `per` floats, grzo__cpu_slice_stride(per) floats apart.
   Under AddressSanitizer each slice starts a multiple of 16 floats into the allocation and is
   followed by a poisoned red zone, so a kernel that runs past its slice is reported instead of
   writing over the next thread's; plain builds keep the slices back to back. */
static int64_t grzo__cpu_slice_stride(int64_t per) {
    return GRZO__CPU_REDZONE > 0 ? (per + 15) / 16 * 16 + GRZO__CPU_REDZONE : per;
}
static float *grzo__cpu_take_slices(grzo__cpu_scratch *s, int nt, int64_t per) {
    int64_t stride = grzo__cpu_slice_stride(per), t;
    float *p = (float *)grzo__cpu_take(s, (size_t)(nt * stride) * sizeof(float));
    for (t = 0; p && t < nt; t++) GRZO__CPU_POISON(p + t * stride + per, stride - per);
    return p;
}
/* the calling thread's slice */
static float *grzo__cpu_slice(float *slices, int64_t per) {
    return slices + grzo__cpu_thread() * grzo__cpu_slice_stride(per);
}
/* A slice as k consecutive pieces of n[i] floats (piece[i]), red zones between them under
   AddressSanitizer; a NULL slice only counts. Returns the slice's size in floats: its `per`. */
static int64_t grzo__cpu_slice_pieces(float *slice, int k, const int64_t *n, float **piece) {
    grzo__carve c = grzo__carve_begin(NULL, 0, 1);
    int64_t size;
    int i;
    for (i = 0; i < k; i++) grzo__carve_take(&c, n[i]);
    size = c.used;
    if (slice) {
        c = grzo__carve_begin(slice, size, 1);
        for (i = 0; i < k; i++) piece[i] = grzo__carve_take(&c, n[i]);
        grzo__carve_end(&c);
    }
    return size;
}

/* Loops that run once per weight element and copy (forming, the update) are built for the
   CPU's widest vectors where the compiler dispatches at run time (GCC, x86-64 Linux).
   Without contraction (C99 mode) every width gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__cplusplus)
#define GRZO__WIDE_VECTORS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GRZO__WIDE_VECTORS
#endif

#ifdef __cplusplus
#define GRZO__RESTRICT __restrict
#else
#define GRZO__RESTRICT restrict
#endif

/* ---- a Rademacher U's bits --------------------------------------------------------------
   A Rademacher U is +-1, and u x is x with its sign flipped where u = -1, exactly: the loops
   that run once per weight element (forming, the update) read U as one bit per element,
   straight from Philox's words, instead of generating and reading a float. */
/* The Philox groups that words [0, nw) of U's bits from element e read (a word from an
   element not a multiple of 32 takes the next word's low bits too) */
static int64_t grzo__bits_groups(uint64_t e, int64_t nw) {
    uint64_t last = (e >> 5) + (uint64_t)nw - 1u + ((e & 31u) ? 1u : 0u);
    return (int64_t)((last >> 2) - (e >> 7) + 1u);
}

/* out[t stride] for t < nw: the sign bits of elements e + 32 t .. e + 32 t + 31, element
   e + 32 t in bit 0, set where U = -1 (the noise bit inverted: a set noise bit is +1, as
   grzo__rademacher_bit reads it), from w: the words of the groups from e's on. */
static void grzo__bits_from_words(const uint32_t *w, uint64_t e, int64_t nw, uint32_t *out, int64_t stride) {
    const uint32_t *v = w + ((e >> 5) & 3u);
    unsigned sh = (unsigned)(e & 31u);
    int64_t t;
    for (t = 0; t < nw; t++) out[t * stride] = ~(sh ? (v[t] >> sh) | (v[t + 1] << (32u - sh)) : v[t]);
}

/* grzo__bits_from_words for a range of any length: its groups a batch at a time */
static void grzo__u_bit_range(const grzo_noise *n, uint64_t e, int64_t nw, uint32_t *out, int64_t stride) {
    uint64_t groups[GRZO__RADEMACHER_BATCH];
    uint32_t w[4 * GRZO__RADEMACHER_BATCH];
    int64_t t = 0, ng, m, g;
    while (t < nw) {
        uint64_t et = e + 32u * (uint64_t)t;
        ng = grzo__bits_groups(et, nw - t);
        if (ng > GRZO__RADEMACHER_BATCH) ng = GRZO__RADEMACHER_BATCH;
        for (g = 0; g < ng; g++) groups[g] = (et >> 7) + (uint64_t)g;
        grzo__noise_words_at(n, groups, (int)ng, w);
        /* the words whose sources the batch holds */
        m = 4 * ng - (int64_t)((et >> 5) & 3u) - ((et & 31u) ? 1 : 0);
        if (m > nw - t) m = nw - t;
        grzo__bits_from_words(w, et, m, out + t * stride, stride);
        t += m;
    }
}

/* U's sign bits row by row: rows [j0, j0 + h) and columns [k0, k0 + kc) of a d_in-wide
   block, word t of row i at ub[i ldb + t stride] (t < (kc + 31) / 32), bit k % 32 of word
   k / 32 set where U[j0 + i][k0 + k] = -1 (a last word's bits past kc are the next
   elements'). Philox's groups come in batches generated in vectorized code
   (grzo__noise_words_at), which pays from about 8 groups: whole rows are one range, and rows'
   short pieces (a K block's: 3-5 groups) share a batch. */
static void grzo__u_row_bits(const grzo_noise *base, int64_t d_in, int64_t j0, int64_t h, int64_t k0, int64_t kc,
                             uint32_t *ub, int64_t ldb, int64_t stride) {
    const int64_t nw = (kc + 31) / 32;
    uint64_t groups[GRZO__RADEMACHER_BATCH];
    uint32_t w[4 * GRZO__RADEMACHER_BATCH];
    int64_t first[GRZO__RADEMACHER_BATCH], i = 0, i1, r, n, ng, g;
    if (nw <= 0) return;
    if (k0 == 0 && kc == d_in && d_in % 32 == 0 && ldb == nw && stride == 1) {   /* whole rows */
        grzo__u_bit_range(base, (uint64_t)(j0 * d_in), h * nw, ub, 1);
        return;
    }
    while (i < h) {
        uint64_t e = (uint64_t)((j0 + i) * d_in + k0);
        if (grzo__bits_groups(e, nw) > GRZO__RADEMACHER_BATCH / 2) {   /* a long piece: batches of its own */
            grzo__u_bit_range(base, e, nw, ub + i * ldb, stride);
            i++;
            continue;
        }
        for (n = 0, i1 = i; i1 < h; i1++) {   /* the rows whose pieces fit one batch */
            e = (uint64_t)((j0 + i1) * d_in + k0);
            ng = grzo__bits_groups(e, nw);
            if (n + ng > GRZO__RADEMACHER_BATCH) break;
            first[i1 - i] = n;
            for (g = 0; g < ng; g++) groups[n + g] = (e >> 7) + (uint64_t)g;
            n += ng;
        }
        grzo__noise_words_at(base, groups, (int)n, w);
        for (r = i; r < i1; r++)
            grzo__bits_from_words(w + 4 * first[r - i], (uint64_t)((j0 + r) * d_in + k0), nw, ub + r * ldb, stride);
        i = i1;
    }
}

#include "grzo_cpu_kernels.h"
#ifdef GRZO_USE_BLIS
#include "grzo_cpu_fused.h"
#endif

/* ---- linear ---------------------------------------------------------------------------------------- */
/* Output rows per chunk so that `bufs` buffers of chunk x cols floats fit the budget. */
static int64_t grzo__cpu_chunk_rows(const grzo__cpu *cpu, int64_t rows, int64_t cols, int64_t bufs) {
    int64_t c = (int64_t)(cpu->transient / ((size_t)bufs * (size_t)cols * sizeof(float)));
    if (c < 16) c = 16;
    return c < rows ? c : rows;
}

/* Segments of the op that use example e (at most `copies`, found by scan). */
static int grzo__cpu_segments_of(const grzo_perturb *pt, int64_t e, int64_t *segs, int max) {
    int64_t c;
    int n = 0;
    for (c = 0; c < pt->n_segments && n < max; c++)
        if (pt->example[c] == e && pt->sign[c] != 0) segs[n++] = c;
    return n;
}

/* Rows of segments a and b hold identical inputs (the "+" and "-" copies of a first layer). */
static int grzo__cpu_same_input(const grzo_perturb *pt, const float *x, int64_t cols, int64_t a, int64_t b) {
    int64_t na = pt->offsets[a + 1] - pt->offsets[a], nb = pt->offsets[b + 1] - pt->offsets[b];
    if (na != nb || na == 0 || pt->sign[a] != -pt->sign[b]) return 0;
    return memcmp(x + pt->offsets[a] * cols, x + pt->offsets[b] * cols, (size_t)(na * cols) * sizeof(float)) == 0;
}

/* PER_EXAMPLE, one chunk of output rows [j0, j1) for example e. */
static void grzo__cpu_linear_example_chunk(const grzo_linear_args *a, const float *U, const float *R, const float *S,
                                           int64_t e, int64_t j0, int64_t j1, float *buf, float *xs) {
    const grzo_perturb *pt = a->perturb;
    const float *W = (const float *)a->w.data;
    int64_t d_out = a->w.rows, d_in = a->w.cols, segs[2], j, k, n_rows;
    int n = grzo__cpu_segments_of(pt, e, segs, 2), q;
    const float *s_e = S + e * d_in, *r_e = R + e * d_out;
    if (n == 2 && grzo__cpu_same_input(pt, a->x, d_in, segs[0], segs[1])) {
        /* shared input: base = X W^T, P = (X(.)s) U^T; copies get base +- sigma r P */
        int64_t r0 = pt->offsets[segs[0]], r1 = pt->offsets[segs[1]], m;
        float *yp = a->y + r0 * d_out, *ym = a->y + r1 * d_out, sp = (float)pt->sign[segs[0]] * pt->sigma;
        n_rows = pt->offsets[segs[0] + 1] - r0;
        for (m = 0; m < n_rows; m++)
            for (k = 0; k < d_in; k++) xs[m * d_in + k] = a->x[(r0 + m) * d_in + k] * s_e[k];
        grzo__cpu_gemm_nt(1, n_rows, j1 - j0, d_in, a->x + r0 * d_in, d_in, W + j0 * d_in, d_in, 0.0f, yp + j0, d_out);
        grzo__cpu_gemm_nt(1, n_rows, j1 - j0, d_in, xs, d_in, U, d_in, 0.0f, buf, j1 - j0);
        for (m = 0; m < n_rows; m++)
            for (j = j0; j < j1; j++) {
                float base = yp[m * d_out + j], p = sp * r_e[j] * buf[m * (j1 - j0) + (j - j0)];
                yp[m * d_out + j] = base + p;
                ym[m * d_out + j] = base - p;
            }
        return;
    }
    if (n == 2 && pt->sign[segs[0]] == -pt->sign[segs[1]]) {
        /* "+" and "-" copies: form W + E and W - E in one pass over W and U */
        float *buf2 = buf + (j1 - j0) * d_in, sc = (float)pt->sign[segs[0]] * pt->sigma;
        for (j = j0; j < j1; j++) {
            const float *w = W + j * d_in, *u = U + (j - j0) * d_in;
            float *o1 = buf + (j - j0) * d_in, *o2 = buf2 + (j - j0) * d_in, f = sc * r_e[j];
            for (k = 0; k < d_in; k++) {
                float z = f * (u[k] * s_e[k]);
                o1[k] = w[k] + z;
                o2[k] = w[k] - z;
            }
        }
        for (q = 0; q < 2; q++) {
            int64_t c = segs[q], r0 = pt->offsets[c];
            grzo__cpu_gemm_nt(1, pt->offsets[c + 1] - r0, j1 - j0, d_in, a->x + r0 * d_in, d_in, q ? buf2 : buf, d_in,
                              0.0f, a->y + r0 * d_out + j0, d_out);
        }
        return;
    }
    for (q = 0; q < n; q++) {
        int64_t c = segs[q], r0 = pt->offsets[c];
        float sc = (float)pt->sign[c] * pt->sigma;
        n_rows = pt->offsets[c + 1] - r0;
        if (n_rows == 0) continue;
        for (j = j0; j < j1; j++) {
            const float *w = W + j * d_in, *u = U + (j - j0) * d_in;
            float *o = buf + (j - j0) * d_in, f = sc * r_e[j];
            for (k = 0; k < d_in; k++) o[k] = w[k] + f * (u[k] * s_e[k]);
        }
        grzo__cpu_gemm_nt(1, n_rows, j1 - j0, d_in, a->x + r0 * d_in, d_in, buf, d_in, 0.0f, a->y + r0 * d_out + j0, d_out);
    }
}

static grzo_status grzo__cpu_linear_per_example(grzo__cpu *cpu, const grzo_linear_args *a) {
    const grzo_perturb *pt = a->perturb;
    int64_t d_out = a->w.rows, d_in = a->w.cols, B = pt->n_examples, max_rows = 0, c, j0, e;
    int nt = cpu->n_threads, T = nt;
    grzo__cpu_scratch sc = {{0}, 0};
    float *R, *S, *U, *bufs, *xss;
    int64_t chunk, buf_elems;
    const float *W = (const float *)a->w.data;
    for (c = 0; c < pt->n_segments; c++)
        if (pt->offsets[c + 1] - pt->offsets[c] > max_rows) max_rows = pt->offsets[c + 1] - pt->offsets[c];
    chunk = grzo__cpu_chunk_rows(cpu, d_out, d_in, 1 + 2 * T);
    buf_elems = 2 * chunk * d_in > max_rows * chunk ? 2 * chunk * d_in : max_rows * chunk;   /* W+E, W-E */
    R = (float *)grzo__cpu_take(&sc, (size_t)(B * d_out) * sizeof(float));
    S = (float *)grzo__cpu_take(&sc, (size_t)(B * d_in) * sizeof(float));
    U = (float *)grzo__cpu_take(&sc, (size_t)(chunk * d_in) * sizeof(float));
    bufs = grzo__cpu_take_slices(&sc, T, buf_elems);
    xss = grzo__cpu_take_slices(&sc, T, max_rows * d_in);
    if (!R || !S || !U || !bufs || !xss) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed"); }
    grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_R, B, d_out, R);
    grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, B, d_in, S);
    /* clean segments (sign 0) of the pass read W itself */
    for (c = 0; c < pt->n_segments; c++)
        if (pt->sign[c] == 0)
            grzo__cpu_gemm_nt(nt, pt->offsets[c + 1] - pt->offsets[c], d_out, d_in, a->x + pt->offsets[c] * d_in, d_in,
                              W, d_in, 0.0f, a->y + pt->offsets[c] * d_out, d_out);
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t j1 = j0 + chunk > d_out ? d_out : j0 + chunk;
        grzo__cpu_fill_u(nt, &pt->base, d_in, j0, j1, U);
        GRZO__OMP_FOR_DYNAMIC
        for (e = 0; e < B; e++)
            grzo__cpu_linear_example_chunk(a, U, R, S, e, j0, j1, grzo__cpu_slice(bufs, buf_elems),
                                           grzo__cpu_slice(xss, max_rows * d_in));
    }
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

static grzo_status grzo__cpu_linear_two_gemm(grzo__cpu *cpu, const grzo_linear_args *a) {
    const grzo_perturb *pt = a->perturb;
    int64_t d_out = a->w.rows, d_in = a->w.cols, B = pt->n_examples, N = a->n_rows, n, j0;
    int nt = cpu->n_threads;
    grzo__cpu_scratch sc = {{0}, 0};
    float *R, *S, *U, *XS, *P;
    int64_t chunk = grzo__cpu_chunk_rows(cpu, d_out, d_in > N ? d_in : N, 2);
    R = (float *)grzo__cpu_take(&sc, (size_t)(B * d_out) * sizeof(float));
    S = (float *)grzo__cpu_take(&sc, (size_t)(B * d_in) * sizeof(float));
    U = (float *)grzo__cpu_take(&sc, (size_t)(chunk * d_in) * sizeof(float));
    XS = (float *)grzo__cpu_take(&sc, (size_t)(N * d_in) * sizeof(float));
    P = (float *)grzo__cpu_take(&sc, (size_t)(N * chunk) * sizeof(float));
    if (!R || !S || !U || !XS || !P) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed"); }
    grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_R, B, d_out, R);
    grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, B, d_in, S);
    grzo__cpu_gemm_nt(nt, N, d_out, d_in, a->x, d_in, (const float *)a->w.data, d_in, 0.0f, a->y, d_out);
    GRZO__OMP_FOR
    for (n = 0; n < N; n++) {
        int64_t c = grzo__segment_of(pt, n), k;
        const float *s_e = S + pt->example[c] * d_in;
        for (k = 0; k < d_in; k++) XS[n * d_in + k] = a->x[n * d_in + k] * s_e[k];
    }
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t j1 = j0 + chunk > d_out ? d_out : j0 + chunk, w = j1 - j0;
        grzo__cpu_fill_u(nt, &pt->base, d_in, j0, j1, U);
        grzo__cpu_gemm_nt(nt, N, w, d_in, XS, d_in, U, d_in, 0.0f, P, w);
        GRZO__OMP_FOR
        for (n = 0; n < N; n++) {
            int64_t c = grzo__segment_of(pt, n), j;
            const float *r_e = R + pt->example[c] * d_out;
            float sc2 = (float)pt->sign[c] * pt->sigma;
            if (sc2 == 0.0f) continue;
            for (j = j0; j < j1; j++) a->y[n * d_out + j] += sc2 * r_e[j] * P[n * w + (j - j0)];
        }
    }
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

/* Shared Z (MeZO, FZOO, the SHARED ablation): runs of segments with one sign read W + s sigma U. */
static grzo_status grzo__cpu_linear_shared(grzo__cpu *cpu, const grzo_linear_args *a) {
    const grzo_perturb *pt = a->perturb;
    const float *W = (const float *)a->w.data;
    int64_t d_out = a->w.rows, d_in = a->w.cols, c = 0;
    int nt = cpu->n_threads;
    int64_t chunk = grzo__cpu_chunk_rows(cpu, d_out, d_in, 1);
    float *Wp = (float *)malloc((size_t)(chunk * d_in) * sizeof(float));
    if (!Wp) return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed");
    while (c < pt->n_segments) {
        int64_t c1 = c + 1, r0 = pt->offsets[c], r1, j0;
        int sign = pt->sign[c];
        while (c1 < pt->n_segments && pt->sign[c1] == sign) c1++;
        r1 = pt->offsets[c1];
        if (sign == 0) {
            grzo__cpu_gemm_nt(nt, r1 - r0, d_out, d_in, a->x + r0 * d_in, d_in, W, d_in, 0.0f, a->y + r0 * d_out, d_out);
        } else if (r1 > r0) {
            float scl = (float)sign * pt->sigma;
            for (j0 = 0; j0 < d_out; j0 += chunk) {
                int64_t j1 = j0 + chunk > d_out ? d_out : j0 + chunk, j;
                grzo__cpu_fill_u(nt, &pt->base, d_in, j0, j1, Wp);
                GRZO__OMP_FOR
                for (j = j0; j < j1; j++) {
                    int64_t k;
                    float *o = Wp + (j - j0) * d_in;
                    const float *w = W + j * d_in;
                    for (k = 0; k < d_in; k++) o[k] = w[k] + scl * o[k];
                }
                grzo__cpu_gemm_nt(nt, r1 - r0, j1 - j0, d_in, a->x + r0 * d_in, d_in, Wp, d_in, 0.0f, a->y + r0 * d_out + j0, d_out);
            }
        }
        c = c1;
    }
    free(Wp);
    return GRZO_OK;
}

#ifdef GRZO_USE_BLIS
/* The op's copies for the fused kernel: flipout segments with a sign (sign-0 segments read W
   itself), or runs of shared-Z segments with one sign. */
static grzo_status grzo__cpu_linear_fused_op(grzo__cpu *cpu, const grzo_linear_args *a) {
    const grzo_perturb *pt = a->perturb;
    const float *W = (const float *)a->w.data;
    int64_t d_out = a->w.rows, d_in = a->w.cols, B = pt->n_examples, c = 0, n = 0;
    int nt = cpu->n_threads, flip = pt->flipout != 0;
    grzo__cpu_scratch sc = {{0}, 0};
    grzo__fused_copy *cp = (grzo__fused_copy *)grzo__cpu_take(&sc, (size_t)pt->n_segments * sizeof *cp);
    float *R = flip ? (float *)grzo__cpu_take(&sc, (size_t)(B * d_out) * sizeof(float)) : NULL;
    float *S = flip ? (float *)grzo__cpu_take(&sc, (size_t)(B * d_in) * sizeof(float)) : NULL;
    grzo_status st;
    if (!cp || (flip && (!R || !S))) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed"); }
    if (flip) {
        grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_R, B, d_out, R);
        grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, B, d_in, S);
    }
    while (c < pt->n_segments) {
        int64_t c1 = c + 1, r0 = pt->offsets[c], r1;
        int sign = pt->sign[c];
        while (!flip && c1 < pt->n_segments && pt->sign[c1] == sign) c1++;
        r1 = pt->offsets[c1];
        if (sign == 0) {
            grzo__cpu_gemm_nt(nt, r1 - r0, d_out, d_in, a->x + r0 * d_in, d_in, W, d_in, 0.0f, a->y + r0 * d_out, d_out);
        } else if (r1 > r0) {
            grzo__fused_copy q;
            memset(&q, 0, sizeof q);
            q.row0 = r0;
            q.n_rows = r1 - r0;
            q.scale = (float)sign * pt->sigma;
            if (flip) { q.r = R + pt->example[c] * d_out; q.s = S + pt->example[c] * d_in; }
            cp[n++] = q;
        }
        c = c1;
    }
    st = n > 0 ? grzo__cpu_linear_fused(cpu, a, cp, n) : GRZO_OK;
    grzo__cpu_release(&sc);
    return st;
}

/* FUSED where the kernel is there: always for FUSED; for AUTO when the weight has at least
   two slivers (the kernel's weight rows: 32 on skx; a last one may be partial) per thread.
   Its tail rows take TWO_GEMM's form on short copies (SmolLM2's tied head, 32 one-row
   copies: the same time as TWO_GEMM, and a GRZO step's peak memory +0.2 % over inference
   instead of +0.8 %). A narrower weight (a classifier's head, a small projection) pads its
   slivers to the kernel's rows, packs every row of X for a few outputs, and leaves threads
   without a block: `bench_linear --algo fused|per-example --width 576 --rows 36 --batch 16
   --d-out N`, 1 thread, GRZO: N = 4 0.361 against 0.061 ms, 24 0.547 against 0.334; MeZO:
   N = 4 0.263 against 0.076; 2 threads, N = 48: GRZO 0.533 against 0.466, MeZO 0.298
   against 0.240; one slower case, N = 32 at 1 thread (1024 wide, 64 rows: 2.25 ms against
   the fused 1.95). bench/PERFORMANCE.md, "Narrow weights". */
static int grzo__cpu_takes_fused(const grzo__cpu *cpu, const grzo_linear_args *a) {
    if (!cpu->ukr) return 0;
    if (cpu->algo == GRZO_CPU_LINEAR_FUSED) return 1;
    return cpu->algo == GRZO_CPU_LINEAR_AUTO &&
           (a->w.rows + cpu->ukr->wp - 1) / cpu->ukr->wp >= 2 * (int64_t)cpu->n_threads;
}
#endif

static int grzo__cpu_prefers_per_example(const grzo__cpu *cpu, const grzo_linear_args *a) {
    if (cpu->algo == GRZO_CPU_LINEAR_PER_EXAMPLE || cpu->algo == GRZO_CPU_LINEAR_FUSED) return 1;
    if (cpu->algo == GRZO_CPU_LINEAR_TWO_GEMM) return 0;
    return a->n_rows >= 8 * a->perturb->n_segments;
}

/* ---- variants (grzo.h section 3c): taken only when an op carries a variant ---------------------------------- */
/* What the base rows B of one op need, prepared once: the noise keys and, for low-rank
   blocks, V (cols x r). */
typedef struct grzo__cpu_var {
    const grzo_variant *v;
    const grzo_param *p;
    grzo_noise base, u, q;
    float *V;
    int lowrank;
} grzo__cpu_var;

static grzo_status grzo__cpu_var_init(grzo__cpu *cpu, grzo__cpu_var *cv, const grzo_param *p, const grzo_noise *base,
                                      const grzo_variant *v) {
    memset(cv, 0, sizeof *cv);
    cv->v = v;
    cv->p = p;
    cv->base = *base;
    cv->u = grzo__lowrank_u_noise(base);
    cv->q = grzo__quant_noise(base);
    cv->lowrank = grzo__variant_is_lowrank(p, v);
    if (cv->lowrank) {
        grzo_noise vn = grzo__lowrank_v_noise(base, v);
        cv->V = (float *)malloc((size_t)(p->cols * v->lowrank_rank) * sizeof(float));
        if (!cv->V) return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "variant: scratch allocation failed");
        grzo_noise_fill(&vn, 0, (size_t)(p->cols * v->lowrank_rank), cv->V);
    }
    return GRZO_OK;
}
static void grzo__cpu_var_free(grzo__cpu_var *cv) { free(cv->V); cv->V = NULL; }

/* Row j of B into out[0..cols) (the values grzo__variant_base gives element by element);
   theta is the row's unperturbed values, which the sparse mask reads. */
static void grzo__cpu_var_row(const grzo__cpu_var *cv, int64_t j, const float *theta, float *out) {
    const grzo_variant *v = cv->v;
    int64_t cols = cv->p->cols, k;
    if (cv->lowrank) {
        float uj[GRZO_LOWRANK_MAX_RANK], norm = (float)(1.0 / sqrt((double)v->lowrank_rank));
        int32_t r = v->lowrank_rank, l;
        grzo_noise_fill(&cv->u, (uint64_t)(j * r), (size_t)r, uj);
        for (k = 0; k < cols; k++) {
            const float *vk = cv->V + k * r;
            float acc = 0.0f;
            for (l = 0; l < r; l++) acc += uj[l] * vk[l];
            out[k] = acc * norm;
        }
    } else {
        grzo_noise_fill(&cv->base, (uint64_t)(j * cols), (size_t)cols, out);
    }
    if (v->quant_bits)
        for (k = 0; k < cols; k++) out[k] = grzo__sround(&cv->q, (uint64_t)(j * cols + k), out[k], v->quant_bits);
    if (v->sparse)
        for (k = 0; k < cols; k++) if (grzo__variant_masked(v, theta[k])) out[k] = 0.0f;
}

/* rows [j0, j1) of the weights the linear reads: q(W) (quantized matrix blocks) or W */
static void grzo__cpu_var_weights(int nt, const grzo_linear_args *a, int64_t j0, int64_t j1, float *out) {
    const float *W = (const float *)a->w.data;
    int64_t d_in = a->w.cols, j;
    int quant = grzo__quantizes_weights(&a->w, a->variant);
    GRZO__OMP_FOR
    for (j = j0; j < j1; j++) {
        const float *w = W + j * d_in;
        float *o = out + (j - j0) * d_in, amax = quant ? grzo__row_amax(W, d_in, j) : 0.0f;
        int64_t k;
        for (k = 0; k < d_in; k++) o[k] = quant ? grzo__fake_quant(w[k], amax, a->variant->quant_bits) : w[k];
    }
}

/* Flipout under an element-wise variant, one chunk of output rows [j0, j1) for example e:
   its "+" and "-" copies' weights Wq +- sigma r_e B (.) s_e formed in one pass (a lone copy,
   or a clean one, alone), then one GEMM per copy on the calling thread. */
static void grzo__cpu_variant_example_chunk(const grzo_linear_args *a, const float *Wq, const float *Bz, const float *R,
                                            const float *S, int64_t e, int64_t j0, int64_t j1, float *buf) {
    const grzo_perturb *pt = a->perturb;
    int64_t d_out = a->w.rows, d_in = a->w.cols, w = j1 - j0, segs[2], c, j, k;
    int n = grzo__cpu_segments_of(pt, e, segs, 2), q;
    int paired = n == 2 && pt->sign[segs[0]] == -pt->sign[segs[1]];
    const float *r_e = R + e * d_out, *s_e = S + e * d_in;
    float *buf2 = buf + w * d_in;
    for (q = 0; q < n; q += paired ? 2 : 1) {
        float scl = (float)pt->sign[segs[q]] * pt->sigma;
        for (j = j0; j < j1; j++) {
            const float *wq = Wq + (j - j0) * d_in, *b = Bz + (j - j0) * d_in;
            float *o1 = buf + (j - j0) * d_in, *o2 = buf2 + (j - j0) * d_in, f = scl * r_e[j];
            if (paired) {
                for (k = 0; k < d_in; k++) {
                    float z = f * (b[k] * s_e[k]);
                    o1[k] = wq[k] + z;
                    o2[k] = wq[k] - z;
                }
            } else {
                for (k = 0; k < d_in; k++) o1[k] = wq[k] + f * (b[k] * s_e[k]);
            }
        }
        for (c = 0; c < (paired ? 2 : 1); c++) {
            int64_t sg = segs[q + c], r0 = pt->offsets[sg];
            grzo__cpu_gemm_nt(1, pt->offsets[sg + 1] - r0, w, d_in, a->x + r0 * d_in, d_in, c ? buf2 : buf, d_in, 0.0f,
                              a->y + r0 * d_out + j0, d_out);
        }
    }
}

/* Sparse and/or quantized linear (and plain ops on quantized weights): per chunk of output
   rows, the read weights Wq = q(W) or W and the base B once; then with Flipout each example's
   copies in parallel (grzo__cpu_variant_example_chunk), without it each run of equal-sign
   segments reads Wq + sign sigma B in one GEMM; clean segments read Wq. */
static grzo_status grzo__cpu_linear_elementwise(grzo__cpu *cpu, const grzo_linear_args *a) {
    const grzo_perturb *pt = a->perturb && a->perturb->sigma != 0.0f && a->perturb->n_segments > 0 ? a->perturb : NULL;
    const float *W = (const float *)a->w.data;
    int64_t d_out = a->w.rows, d_in = a->w.cols, j0, B = pt ? pt->n_examples : 0, e;
    int nt = cpu->n_threads, T = nt, flip = pt && pt->flipout;
    int64_t chunk = grzo__cpu_chunk_rows(cpu, d_out, d_in, 2 + 2 * T);
    grzo__cpu_scratch sc = {{0}, 0};
    grzo__cpu_var cv;
    float *Wq, *Bz, *Wp, *R = NULL, *S = NULL;
    grzo_status st = GRZO_OK;
    memset(&cv, 0, sizeof cv);
    Wq = (float *)grzo__cpu_take(&sc, (size_t)(chunk * d_in) * sizeof(float));
    Bz = (float *)grzo__cpu_take(&sc, (size_t)(chunk * d_in) * sizeof(float));
    Wp = grzo__cpu_take_slices(&sc, T, 2 * chunk * d_in);   /* two weights per thread; the shared path's one: slice 0 */
    if (flip) {
        R = (float *)grzo__cpu_take(&sc, (size_t)(B * d_out) * sizeof(float));
        S = (float *)grzo__cpu_take(&sc, (size_t)(B * d_in) * sizeof(float));
    }
    if (!Wq || !Bz || !Wp || (flip && (!R || !S))) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed"); }
    if (pt) st = grzo__cpu_var_init(cpu, &cv, &a->w, &pt->base, a->variant);
    if (st != GRZO_OK) { grzo__cpu_release(&sc); return st; }
    if (flip) {
        grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_R, B, d_out, R);
        grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, B, d_in, S);
    }
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t j1 = j0 + chunk > d_out ? d_out : j0 + chunk, w = j1 - j0, c = 0, j;
        grzo__cpu_var_weights(nt, a, j0, j1, Wq);
        if (!pt) {
            grzo__cpu_gemm_nt(nt, a->n_rows, w, d_in, a->x, d_in, Wq, d_in, 0.0f, a->y + j0, d_out);
            continue;
        }
        GRZO__OMP_FOR
        for (j = j0; j < j1; j++) grzo__cpu_var_row(&cv, j, W + j * d_in, Bz + (j - j0) * d_in);
        if (flip) {
            GRZO__OMP_FOR_DYNAMIC
            for (e = 0; e < B; e++)
                grzo__cpu_variant_example_chunk(a, Wq, Bz, R, S, e, j0, j1, grzo__cpu_slice(Wp, 2 * chunk * d_in));
        }
        while (c < pt->n_segments) {   /* shared Z: runs of one sign; clean segments (any estimator) */
            int64_t c1 = c + 1, r0 = pt->offsets[c], r1;
            float scl = (float)pt->sign[c] * pt->sigma;
            if (flip && pt->sign[c] != 0) { c++; continue; }
            while (c1 < pt->n_segments && pt->sign[c1] == pt->sign[c] && !(flip && pt->sign[c1] != 0)) c1++;
            r1 = pt->offsets[c1];
            if (r1 > r0) {
                GRZO__OMP_FOR
                for (j = j0; j < j1; j++) {
                    const float *q = Wq + (j - j0) * d_in, *b = Bz + (j - j0) * d_in;
                    float *o = Wp + (j - j0) * d_in;
                    int64_t k;
                    for (k = 0; k < d_in; k++) o[k] = q[k] + scl * b[k];
                }
                grzo__cpu_gemm_nt(nt, r1 - r0, w, d_in, a->x + r0 * d_in, d_in, Wp, d_in, 0.0f, a->y + r0 * d_out + j0, d_out);
            }
            c = c1;
        }
    }
    grzo__cpu_var_free(&cv);
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

/* Low-rank linear: Y = X W^T + sign sigma (((X (.) s_e) V) U^T) (.) r_e / sqrt(r), two thin
   GEMMs through rank r, the second in chunks of output columns (an N x chunk transient within
   the budget); U V^T is never formed. */
static grzo_status grzo__cpu_linear_lowrank(grzo__cpu *cpu, const grzo_linear_args *a) {
    const grzo_perturb *pt = a->perturb;
    int64_t d_out = a->w.rows, d_in = a->w.cols, B = pt->n_examples, N = a->n_rows, r = a->variant->lowrank_rank, n, k, l, j0;
    int64_t chunk = grzo__cpu_chunk_rows(cpu, d_out, N, 1);
    int nt = cpu->n_threads, flip = pt->flipout != 0;
    float norm = (float)(1.0 / sqrt((double)r)), *U, *V, *Vt, *XS, *T, *P, *R = NULL, *S = NULL;
    grzo__cpu_scratch sc = {{0}, 0};
    grzo_noise un = grzo__lowrank_u_noise(&pt->base), vn = grzo__lowrank_v_noise(&pt->base, a->variant);
    U = (float *)grzo__cpu_take(&sc, (size_t)((d_out + 2 * d_in + N) * r) * sizeof(float));   /* U, V, V^T, T */
    V = U ? U + d_out * r : NULL;
    Vt = U ? V + d_in * r : NULL;
    T = U ? Vt + d_in * r : NULL;
    XS = (float *)grzo__cpu_take(&sc, (size_t)(N * d_in) * sizeof(float));
    P = (float *)grzo__cpu_take(&sc, (size_t)(N * chunk) * sizeof(float));
    if (flip) {
        R = (float *)grzo__cpu_take(&sc, (size_t)(B * d_out) * sizeof(float));
        S = (float *)grzo__cpu_take(&sc, (size_t)(B * d_in) * sizeof(float));
    }
    if (!U || !V || !Vt || !XS || !T || !P || (flip && (!R || !S))) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed"); }
    grzo_noise_fill(&un, 0, (size_t)(d_out * r), U);
    grzo_noise_fill(&vn, 0, (size_t)(d_in * r), V);
    for (k = 0; k < d_in; k++)
        for (l = 0; l < r; l++) Vt[l * d_in + k] = V[k * r + l];
    if (flip) {
        grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_R, B, d_out, R);
        grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, B, d_in, S);
    }
    GRZO__OMP_FOR
    for (n = 0; n < N; n++) {
        const float *x = a->x + n * d_in, *s_e = flip ? S + pt->example[grzo__segment_of(pt, n)] * d_in : NULL;
        int64_t q;
        for (q = 0; q < d_in; q++) XS[n * d_in + q] = flip ? x[q] * s_e[q] : x[q];
    }
    grzo__cpu_gemm_nt(nt, N, d_out, d_in, a->x, d_in, (const float *)a->w.data, d_in, 0.0f, a->y, d_out);
    grzo__cpu_gemm_nt(nt, N, r, d_in, XS, d_in, Vt, d_in, 0.0f, T, r);           /* (X (.) s) V */
    for (j0 = 0; j0 < d_out; j0 += chunk) {
        int64_t w = j0 + chunk > d_out ? d_out - j0 : chunk;
        grzo__cpu_gemm_nt(nt, N, w, r, T, r, U + j0 * r, r, 0.0f, P, w);          /* ... U^T     */
        GRZO__OMP_FOR
        for (n = 0; n < N; n++) {
            int64_t c = grzo__segment_of(pt, n), j;
            const float *r_e = flip ? R + pt->example[c] * d_out : NULL;
            float f = (float)pt->sign[c] * pt->sigma * norm;
            if (f == 0.0f) continue;
            for (j = j0; j < j0 + w; j++) a->y[n * d_out + j] += f * (flip ? r_e[j] : 1.0f) * P[n * w + (j - j0)];
        }
    }
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

static grzo_status grzo__cpu_linear_variant(grzo__cpu *cpu, const grzo_linear_args *a) {
    int perturbed = a->perturb && a->perturb->sigma != 0.0f && a->perturb->n_segments > 0;
    if (perturbed && grzo__variant_is_lowrank(&a->w, a->variant)) return grzo__cpu_linear_lowrank(cpu, a);
    return grzo__cpu_linear_elementwise(cpu, a);
}

/* The perturbed vector op's segments: base (d floats) holds the perturbation base (U, or a
   variant's B); `slices` (grzo__cpu_take_slices, d floats) each thread's scratch for its copy's
   vector v + sign sigma base (.) r_e (Flipout) or v + sign sigma base; nt threads. */
static void grzo__cpu_vector_segments(const grzo_vector_args *a, const float *v, const float *base, float *slices,
                                      int64_t d, int nt) {
    const grzo_perturb *pt = a->perturb;
    int64_t c;
    GRZO__OMP_FOR_DYNAMIC
    for (c = 0; c < pt->n_segments; c++) {
        float *vp = grzo__cpu_slice(slices, d), scl = (float)pt->sign[c] * pt->sigma;
        int64_t j, n;
        if (pt->flipout) {
            grzo_noise r = grzo__sign_noise(&pt->base, GRZO_STREAM_SIGN_R);
            grzo_noise_fill(&r, (uint64_t)(pt->example[c] * d), (size_t)d, vp);
            for (j = 0; j < d; j++) vp[j] = v[j] + scl * (base[j] * vp[j]);
        } else {
            for (j = 0; j < d; j++) vp[j] = v[j] + scl * base[j];
        }
        for (n = pt->offsets[c]; n < pt->offsets[c + 1]; n++)
            for (j = 0; j < d; j++)
                a->y[n * d + j] = a->op == GRZO_VECTOR_MUL ? a->x[n * d + j] * vp[j] : a->x[n * d + j] + vp[j];
    }
}

/* vector under a variant (sparse, quantized; low-rank leaves vectors dense): v + sign sigma B (.) r_e */
static grzo_status grzo__cpu_vector_variant(grzo__cpu *cpu, const grzo_vector_args *a) {
    const grzo_perturb *pt = a->perturb;
    const float *v = (const float *)a->v.data;
    int64_t d = a->v.rows, j;
    int nt = cpu->n_threads;
    grzo__cpu_var cv;
    grzo__cpu_scratch sc = {{0}, 0};
    float *Bz = (float *)grzo__cpu_take(&sc, (size_t)d * sizeof(float)), *slices = grzo__cpu_take_slices(&sc, nt, d);
    grzo_status st;
    if (!Bz || !slices) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "vector: scratch allocation failed"); }
    st = grzo__cpu_var_init(cpu, &cv, &a->v, &pt->base, a->variant);
    if (st != GRZO_OK) { grzo__cpu_release(&sc); return st; }
    for (j = 0; j < d; j++) grzo__cpu_var_row(&cv, j, v + j, Bz + j);   /* cols = 1: one element per row */
    grzo__cpu_vector_segments(a, v, Bz, slices, d, nt);
    grzo__cpu_var_free(&cv);
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

/* Marks the rows an embedding gathers in its touched map (the update of a sparse embedding
   visits only those), once the op can no longer fail: serially, before the rows are written in
   parallel, because threads storing to one byte at once race even when they store the same 1. */
static void grzo__cpu_mark_touched(const grzo_embedding_args *a) {
    int64_t n;
    if (a->touched)
        for (n = 0; n < a->n_rows; n++) a->touched[a->ids[n]] = 1;
}

/* embedding rows under a variant: E[row] + sign sigma r_e[row] B[row] (.) s_e (ids checked by the caller) */
static grzo_status grzo__cpu_embedding_variant(grzo__cpu *cpu, const grzo_embedding_args *a) {
    const grzo_perturb *pt = a->perturb;
    const float *E = (const float *)a->e.data;
    int64_t d = a->e.cols, V = a->e.rows, n;
    int nt = cpu->n_threads;
    grzo__cpu_scratch sc = {{0}, 0};
    float *S = (float *)grzo__cpu_take(&sc, (size_t)(pt->n_examples * d) * sizeof(float)), *buf = grzo__cpu_take_slices(&sc, nt, d);
    grzo__cpu_var cv;
    grzo_status st;
    if (!S || !buf) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "embedding: scratch allocation failed"); }
    st = grzo__cpu_var_init(cpu, &cv, &a->e, &pt->base, a->variant);
    if (st != GRZO_OK) { grzo__cpu_release(&sc); return st; }
    if (pt->flipout) grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, pt->n_examples, d, S);
    grzo__cpu_mark_touched(a);
    GRZO__OMP_FOR
    for (n = 0; n < a->n_rows; n++) {
        int64_t row = a->ids[n], k, c = grzo__segment_of(pt, n), e = pt->example[c];
        const float *src = E + row * d;
        float *y = a->y + n * d, *b = grzo__cpu_slice(buf, d), f = (float)pt->sign[c] * pt->sigma;
        if (f == 0.0f) { memcpy(y, src, (size_t)d * sizeof(float)); continue; }
        grzo__cpu_var_row(&cv, row, src, b);
        if (pt->flipout) {
            grzo_noise r = grzo__sign_noise(&pt->base, GRZO_STREAM_SIGN_R);
            f *= grzo_noise_at(&r, (uint64_t)(e * V + row));
            for (k = 0; k < d; k++) y[k] = src[k] + f * (b[k] * S[e * d + k]);
        } else {
            for (k = 0; k < d; k++) y[k] = src[k] + f * b[k];
        }
    }
    grzo__cpu_var_free(&cv);
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

/* The update's sign vectors, regenerated: R (B x rows) and, for matrices, S (B x cols) under
   Flipout (NULL otherwise), and the sum of the coefficients (the shared-noise update's scale).
   The caller frees R and S. */
static grzo_status grzo__cpu_update_signs(grzo__cpu *cpu, const grzo_update_args *a, float **R, float **S,
                                          double *shared) {
    int64_t rows = a->p.rows, cols = a->p.cols, B = a->n_examples, e;
    int nt = cpu->n_threads, vec = a->p.kind == GRZO_BLOCK_VECTOR;
    *R = *S = NULL;
    if (a->flipout) {
        *R = (float *)malloc((size_t)(B * rows) * sizeof(float));
        if (!vec) *S = (float *)malloc((size_t)(B * cols) * sizeof(float));
        if (!*R || (!vec && !*S)) {
            free(*R); free(*S);
            *R = *S = NULL;
            return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "update: scratch allocation failed");
        }
        grzo__cpu_fill_signs(nt, &a->base, GRZO_STREAM_SIGN_R, B, rows, *R);
        if (*S) grzo__cpu_fill_signs(nt, &a->base, GRZO_STREAM_SIGN_S, B, cols, *S);
    }
    *shared = 0.0;
    for (e = 0; e < B; e++) *shared += a->coeff[e];
    return GRZO_OK;
}

/* update under a variant: theta -= B (.) (sum_e coeff_e r_e s_e^T) + decay theta, B of each
   row from the row's values before the write (the mask the passes saw) */
static grzo_status grzo__cpu_update_variant(grzo__cpu *cpu, const grzo_update_args *a) {
    float *P = (float *)a->p.data;
    int64_t rows = a->p.rows, cols = a->p.cols, B = a->n_examples, j;
    int nt = cpu->n_threads, vec = a->p.kind == GRZO_BLOCK_VECTOR, flip = a->flipout != 0;
    float *R, *S, *scratch;
    const int64_t pieces[2] = {cols, cols};   /* per thread: a row's B, its M row */
    int64_t per = grzo__cpu_slice_pieces(NULL, 2, pieces, NULL);
    double shared;
    grzo__cpu_var cv;
    grzo__cpu_scratch sc = {{0}, 0};
    grzo_status st = grzo__cpu_update_signs(cpu, a, &R, &S, &shared);
    if (st != GRZO_OK) return st;
    scratch = grzo__cpu_take_slices(&sc, nt, per);
    if (!scratch) { free(R); free(S); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "update: scratch allocation failed"); }
    st = grzo__cpu_var_init(cpu, &cv, &a->p, &a->base, a->variant);
    if (st != GRZO_OK) { grzo__cpu_release(&sc); free(R); free(S); return st; }
    GRZO__OMP_FOR
    for (j = 0; j < rows; j++) {
        float *piece[2] = {NULL, NULL}, *b, *m, *p = P + j * cols;
        int64_t k, i;
        if (a->touched && !a->touched[j]) continue;
        grzo__cpu_slice_pieces(grzo__cpu_slice(scratch, per), 2, pieces, piece);
        b = piece[0];
        m = piece[1];
        grzo__cpu_var_row(&cv, j, p, b);
        for (k = 0; k < cols; k++) m[k] = flip ? 0.0f : (float)shared;
        for (i = 0; flip && i < B; i++) {   /* row j of M = R^T diag(coeff) S (vectors: no S) */
            float ri = a->coeff[i] * R[i * rows + j];
            for (k = 0; k < cols; k++) m[k] += vec ? ri : ri * S[i * cols + k];
        }
        for (k = 0; k < cols; k++) p[k] = p[k] - b[k] * m[k] - a->decay * p[k];
    }
    grzo__cpu_var_free(&cv);
    grzo__cpu_release(&sc);
    free(R);
    free(S);
    return GRZO_OK;
}

/* perturbed_copy's column signs: s_e of the copy's example under Flipout (matrices), else 1 */
static void grzo__cpu_copy_signs(const grzo_copy_args *a, float *S) {
    grzo_noise s = grzo__sign_noise(&a->base, GRZO_STREAM_SIGN_S);
    int64_t k, cols = a->p.cols;
    if (a->flipout && a->p.kind != GRZO_BLOCK_VECTOR) grzo_noise_fill(&s, (uint64_t)(a->example * cols), (size_t)cols, S);
    else for (k = 0; k < cols; k++) S[k] = 1.0f;
}

/* ask/tell under a variant: (quantized matrix: q(theta)) + scale r_e B (.) s_e */
static grzo_status grzo__cpu_perturbed_copy_variant(grzo__cpu *cpu, const grzo_copy_args *a) {
    const float *P = (const float *)a->p.data;
    float *out = (float *)a->out;
    int64_t rows = a->p.rows, cols = a->p.cols, j;
    int nt = cpu->n_threads, quant = grzo__quantizes_weights(&a->p, a->variant);
    grzo__cpu_scratch sc = {{0}, 0};
    float *S = (float *)grzo__cpu_take(&sc, (size_t)cols * sizeof(float)), *buf = grzo__cpu_take_slices(&sc, nt, cols);
    grzo__cpu_var cv;
    grzo_status st;
    if (!S || !buf) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "perturbed_copy: scratch allocation failed"); }
    st = grzo__cpu_var_init(cpu, &cv, &a->p, &a->base, a->variant);
    if (st != GRZO_OK) { grzo__cpu_release(&sc); return st; }
    grzo__cpu_copy_signs(a, S);
    GRZO__OMP_FOR
    for (j = 0; j < rows; j++) {
        const float *p = P + j * cols;
        float *o = out + j * cols, *b = grzo__cpu_slice(buf, cols), f = a->scale, amax = quant ? grzo__row_amax(P, cols, j) : 0.0f;
        int64_t k;
        grzo__cpu_var_row(&cv, j, p, b);
        if (a->flipout) {
            grzo_noise r = grzo__sign_noise(&a->base, GRZO_STREAM_SIGN_R);
            f *= grzo_noise_at(&r, (uint64_t)(a->example * rows + j));
        }
        for (k = 0; k < cols; k++) o[k] = (quant ? grzo__fake_quant(p[k], amax, a->variant->quant_bits) : p[k]) + f * (b[k] * S[k]);
    }
    grzo__cpu_var_free(&cv);
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

static grzo_status grzo__cpu_linear(void *self, const grzo_linear_args *a) {
    grzo__cpu *cpu = (grzo__cpu *)self;
    if (a->w.rows > INT_MAX || a->w.cols > INT_MAX || a->n_rows > INT_MAX)
        return grzo__cpu_fail(cpu, GRZO_ERR_UNSUPPORTED, "linear: dimensions above INT_MAX");
    if (a->n_rows == 0) return GRZO_OK;   /* the core never asks; the chunking below divides by it */
    if (a->variant) return grzo__cpu_linear_variant(cpu, a);
    if (!a->perturb || a->perturb->sigma == 0.0f || a->perturb->n_segments == 0) {
        grzo__cpu_gemm_nt(cpu->n_threads, a->n_rows, a->w.rows, a->w.cols, a->x, a->w.cols, (const float *)a->w.data,
                          a->w.cols, 0.0f, a->y, a->w.rows);
        return GRZO_OK;
    }
#ifdef GRZO_USE_BLIS
    if (grzo__cpu_takes_fused(cpu, a)) return grzo__cpu_linear_fused_op(cpu, a);
#endif
    if (!a->perturb->flipout) return grzo__cpu_linear_shared(cpu, a);
    return grzo__cpu_prefers_per_example(cpu, a) ? grzo__cpu_linear_per_example(cpu, a) : grzo__cpu_linear_two_gemm(cpu, a);
}

/* ---- vector and embedding ------------------------------------------------------------------------------ */
static grzo_status grzo__cpu_vector(void *self, const grzo_vector_args *a) {
    grzo__cpu *cpu = (grzo__cpu *)self;
    const grzo_perturb *pt = a->perturb;
    const float *v = (const float *)a->v.data;
    int64_t d = a->v.rows, n_seg = pt && pt->sigma != 0.0f ? pt->n_segments : 0;
    int nt = cpu->n_threads;
    grzo__cpu_scratch sc = {{0}, 0};
    float *U, *slices;
    if (n_seg > 0 && a->variant) return grzo__cpu_vector_variant(cpu, a);
    if (n_seg == 0) {
        int64_t n;
        GRZO__OMP_FOR
        for (n = 0; n < a->n_rows; n++) {
            int64_t j;
            for (j = 0; j < d; j++)
                a->y[n * d + j] = a->op == GRZO_VECTOR_MUL ? a->x[n * d + j] * v[j] : a->x[n * d + j] + v[j];
        }
        return GRZO_OK;
    }
    U = (float *)grzo__cpu_take(&sc, (size_t)d * sizeof(float));
    slices = grzo__cpu_take_slices(&sc, nt, d);
    if (!U || !slices) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "vector: scratch allocation failed"); }
    grzo_noise_fill(&pt->base, 0, (size_t)d, U);
    grzo__cpu_vector_segments(a, v, U, slices, d, nt);
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

static grzo_status grzo__cpu_embedding(void *self, const grzo_embedding_args *a) {
    grzo__cpu *cpu = (grzo__cpu *)self;
    const grzo_perturb *pt = a->perturb && a->perturb->sigma != 0.0f ? a->perturb : NULL;
    const float *E = (const float *)a->e.data;
    int64_t d = a->e.cols, V = a->e.rows, n, bad = -1;
    int nt = cpu->n_threads;
    grzo__cpu_scratch sc = {{0}, 0};
    float *S = NULL, *Ubuf = NULL;
    for (n = 0; n < a->n_rows; n++)
        if (a->ids[n] < 0 || a->ids[n] >= V) { bad = n; break; }
    if (bad >= 0) {
        snprintf(cpu->err, sizeof cpu->err, "embedding: token id %ld at row %lld out of range [0, %lld)",
                 (long)a->ids[bad], (long long)bad, (long long)V);
        return GRZO_ERR_INVALID_ARG;
    }
    if (pt && a->variant) return grzo__cpu_embedding_variant(cpu, a);
    if (pt) {
        S = (float *)grzo__cpu_take(&sc, (size_t)(pt->n_examples * d) * sizeof(float));
        Ubuf = grzo__cpu_take_slices(&sc, nt, d);
        if (!S || !Ubuf) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "embedding: scratch allocation failed"); }
        if (pt->flipout) grzo__cpu_fill_signs(nt, &pt->base, GRZO_STREAM_SIGN_S, pt->n_examples, d, S);
    }
    grzo__cpu_mark_touched(a);
    GRZO__OMP_FOR
    for (n = 0; n < a->n_rows; n++) {
        int64_t row = a->ids[n], k;
        const float *src = E + row * d;
        float *y = a->y + n * d;
        if (!pt) { memcpy(y, src, (size_t)d * sizeof(float)); continue; }
        {
            int64_t c = grzo__segment_of(pt, n), e = pt->example[c];
            float scl = (float)pt->sign[c] * pt->sigma, *u = grzo__cpu_slice(Ubuf, d);
            if (scl == 0.0f) { memcpy(y, src, (size_t)d * sizeof(float)); continue; }
            grzo_noise_fill(&pt->base, (uint64_t)(row * d), (size_t)d, u);
            if (pt->flipout) {
                grzo_noise r = grzo__sign_noise(&pt->base, GRZO_STREAM_SIGN_R);
                float f = scl * grzo_noise_at(&r, (uint64_t)(e * V + row));
                const float *s_e = S + e * d;
                for (k = 0; k < d; k++) y[k] = src[k] + f * (u[k] * s_e[k]);
            } else {
                for (k = 0; k < d; k++) y[k] = src[k] + scl * u[k];
            }
        }
    }
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

/* ---- update: theta -= U (.) (sum_e coeff_e r_e s_e^T) + decay theta, one pass over theta ---------------------- */
/* x with its sign flipped where bit c of w is set: u x for u = -1 or +1, exactly */
static inline float grzo__flip_sign(float x, uint32_t w, int c) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b ^= (w << (31 - c)) & 0x80000000u;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* p -= g u + decay p for one row of theta (one coefficient g for the row): its U row as
   floats (u) or as bits (ub, set where u = -1). Built for the CPU's widest vectors: each
   element's operations keep their order, and g u is the same bits either way. */
GRZO__WIDE_VECTORS static void grzo__cpu_apply_row(float *GRZO__RESTRICT p, const float *GRZO__RESTRICT u,
                                                   const uint32_t *GRZO__RESTRICT ub, float g, int64_t cols,
                                                   float decay) {
    int64_t k, k0;
    int c, n;
    if (!ub) {
        for (k = 0; k < cols; k++) p[k] = p[k] - u[k] * g - decay * p[k];
        return;
    }
    for (k0 = 0; k0 < cols; k0 += 32) {   /* a word of U's bits at a time */
        uint32_t w = ub[k0 / 32];
        float *q = p + k0;
        n = cols - k0 < 32 ? (int)(cols - k0) : 32;
        for (c = 0; c < n; c++) q[c] = q[c] - grzo__flip_sign(g, w, c) - decay * q[c];
    }
}

/* The update takes U GRZO__CPU_UPDATE_ROWS rows at a time: whole rows of U are one range of
   its bits, generated in batches of Philox groups that fill the vectors (one 576-wide row is
   4.5 groups; vectorized Philox pays from 8). */
#define GRZO__CPU_UPDATE_ROWS 8

/* Rows [j0, j0 + h) of the update's U (h <= GRZO__CPU_UPDATE_ROWS) into u: bits for a
   Rademacher U (row i at (const uint32_t *)u + i (cols + 31) / 32) or floats for a Gaussian
   one (row i at u + i cols); returns the bits or NULL. u holds h cols floats. */
static const uint32_t *grzo__cpu_update_u_rows(const grzo_noise *base, int64_t j0, int64_t h, int64_t cols,
                                               float *u) {
    if (base->dist == GRZO_NOISE_GAUSSIAN) {
        grzo_noise_fill(base, (uint64_t)(j0 * cols), (size_t)(h * cols), u);
        return NULL;
    }
    grzo__u_row_bits(base, cols, j0, h, 0, cols, (uint32_t *)u, (cols + 31) / 32, 1);
    return (const uint32_t *)u;
}

/* Asks for row p[0..cols) in cache, for write, one line at a time. The update asks for the
   row GRZO__CPU_UPDATE_AHEAD rows ahead as it starts each row: its work per row (tables,
   U's chunk) breaks the stream the hardware prefetcher follows. `bench_linear --op update
   --width 576 --d-out 49152` (from memory), 1 thread: GRZO's 9.1-9.7 ms -> 5.5-5.9 (2, 4, 8
   and 12 rows ahead alike; the next chunk asked for at once: 7.5-7.7), MeZO's 4.5-4.6 -> 4.0-4.1.
   GRZO's AVX-512 row loop asks for the row ahead a line at a time between its own vectors
   instead: a whole row's requests at once filled the CPU's miss buffers and the row's
   arithmetic waited behind them (Zen 4, perf: 23 % of the update's samples on the request
   loop; from memory, 1 thread, 13.6-14.0 -> 10.0-10.3 ms, 2 threads 10.1-11.6 -> 7.3-8.8). */
#define GRZO__CPU_UPDATE_AHEAD 4
static void grzo__prefetch_row(const float *p, int64_t cols) {
#if defined(__GNUC__) || defined(__clang__)
    int64_t k;
    for (k = 0; k < cols; k += 16) __builtin_prefetch(p + k, 1, 3);
#else
    (void)p;
    (void)cols;
#endif
}

/* Row i of a chunk that grzo__cpu_update_u_rows made: its bits (*rb) or its floats (*rf),
   the other NULL */
static void grzo__cpu_update_u_row(const uint32_t *ub, const float *u, int64_t i, int64_t cols, const uint32_t **rb,
                                   const float **rf) {
    *rb = ub ? ub + i * ((cols + 31) / 32) : NULL;
    *rf = ub ? NULL : u + i * cols;
}

/* Whether the update changes row j (the embedding's touched map, or every row) */
static int grzo__cpu_row_touched(const grzo_update_args *a, int64_t j) { return !a->touched || a->touched[j]; }

/* The row GRZO__CPU_UPDATE_AHEAD rows past row j of theta (P, rows x cols) when the update
   changes it too, else NULL */
static const float *grzo__cpu_update_ahead(const grzo_update_args *a, const float *P, int64_t rows, int64_t cols,
                                           int64_t j) {
    int64_t next = j + GRZO__CPU_UPDATE_AHEAD;
    return next < rows && grzo__cpu_row_touched(a, next) ? P + next * cols : NULL;
}

/* As the update reaches row j: asks for the row ahead, whole, and returns whether row j
   changes */
static int grzo__cpu_update_reaches(const grzo_update_args *a, const float *P, int64_t rows, int64_t cols, int64_t j) {
    const float *ahead = grzo__cpu_update_ahead(a, P, rows, cols, j);
    if (ahead) grzo__prefetch_row(ahead, cols);
    return grzo__cpu_row_touched(a, j);
}

/* Whether rows [j0, j1) hold a row to update: the embedding's touched map, or every row */
static int grzo__cpu_rows_touched(const uint8_t *touched, int64_t j0, int64_t j1) {
    int64_t j;
    if (!touched) return 1;
    for (j = j0; j < j1; j++)
        if (touched[j]) return 1;
    return 0;
}

/* ---- GRZO's rank-B update by sign tables ---------------------------------------------------
   M = R^T diag(a) S has m_jk = sum_e a_e r_ej s_ek with every r and s +-1. For row j, with
   c_e = a_e r_ej (exact: a sign flip), m_jk = sum_e c_e s_ek is a signed sum of the row's B
   coefficients, the signs column k's. Four examples at a time, the row's 16 signed sums of
   their coefficients are a table, and column k's four sign bits of S are the index:
   m_jk = T_0[n_0(k)] + T_1[n_1(k)] + ..., summed in that order. A 16-entry lookup is one
   permute on AVX-512 (two and a blend on AVX2), so B = 16 costs 4 permutes and 3 adds per 16
   elements where the rank-B GEMM did 16 FMAs and wrote and re-read M: the row's update is one
   pass over theta. The scalar, AVX2 and AVX-512 versions give the same bits (the same
   operations in the same order; tests/test_ops.c compares them). */
#define GRZO__SIGN_GROUP 4   /* examples per table: 16 entries, one AVX-512 register */

/* The row's tables, 16 floats per group of four coefficients (c padded with zeros to a
   multiple of four): entry p of group g is c_4g, c_4g+1, ... each negated where its bit of p
   is set, summed left to right. Doubling builds every entry with those operations. */
static void grzo__sign_tables(const float *c, int groups, float *tab) {
    int g, i, p, h;
    for (g = 0; g < groups; g++) {
        float *t = tab + 16 * g;
        const float *cg = c + GRZO__SIGN_GROUP * g;
        t[0] = cg[0];
        t[1] = -cg[0];
        for (i = 1, h = 2; i < GRZO__SIGN_GROUP; i++, h *= 2)
            for (p = 0; p < h; p++) {
                t[p + h] = t[p] - cg[i];
                t[p] = t[p] + cg[i];
            }
    }
}

/* Column k's index into group g's table: bits 4g .. 4g + 3 of its S sign bits (sb: one
   row of words per 32 examples, ldsb apart; bit e % 32 set where s_ek = -1). */
static inline uint32_t grzo__sign_index(const uint32_t *sb, int64_t ldsb, int g, int64_t k) {
    return (sb[(int64_t)(g / 8) * ldsb + k] >> (4 * (g % 8))) & 15u;
}

/* p -= u (.) m + decay p for columns [k0, cols) of one row, m from the row's tables (the
   plain reference; its U as bits (ub) or floats (u)) */
static void grzo__apply_row_tables_ref(float *p, const float *u, const uint32_t *ub, const float *tab, int groups,
                                       const uint32_t *sb, int64_t ldsb, int64_t k0, int64_t cols, float decay) {
    int64_t k;
    int g;
    for (k = k0; k < cols; k++) {
        float m = tab[grzo__sign_index(sb, ldsb, 0, k)], um;
        for (g = 1; g < groups; g++) m = m + tab[16 * g + grzo__sign_index(sb, ldsb, g, k)];
        um = ub ? grzo__flip_sign(m, ub[k / 32], (int)(k % 32)) : u[k] * m;
        p[k] = p[k] - um - decay * p[k];
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GRZO__SIGN_TABLE_SIMD 1
#include <immintrin.h>
/* grzo__sign_tables with AVX-512F: a group's table is one register, entry p of lane p, built
   as the signed coefficients' sum in the same order (x + (-c) is x - c, exactly) */
__attribute__((target("avx512f"))) static void grzo__sign_tables_avx512(const float *c, int groups, float *tab) {
    __m512i neg[GRZO__SIGN_GROUP];   /* the sign bit in lanes whose bit i is set */
    int32_t bits[16];
    int g, i, p;
    /* from a table, not by shifting a lane index: GCC 12's shift intrinsics with a variable
       count read _mm512_undefined_epi32(), which its C++ -Wall reports at -O1 and -O2 */
    for (i = 0; i < GRZO__SIGN_GROUP; i++) {
        for (p = 0; p < 16; p++) bits[p] = (p >> i & 1) ? INT32_MIN : 0;
        neg[i] = _mm512_loadu_si512(bits);
    }
    for (g = 0; g < groups; g++) {
        const float *cg = c + GRZO__SIGN_GROUP * g;
        __m512 t = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_set1_ps(cg[0])), neg[0]));
        for (i = 1; i < GRZO__SIGN_GROUP; i++)
            t = _mm512_add_ps(t, _mm512_castsi512_ps(
                                     _mm512_xor_si512(_mm512_castps_si512(_mm512_set1_ps(cg[i])), neg[i])));
        _mm512_storeu_ps(tab + 16 * g, t);
    }
}

/* 16 columns [k, k + 16) of the AVX-512F body, the columns past `live` untouched. `full`
   (a constant where it is inlined): all 16 live, read and written with plain loads and stores;
   on a Zen 4 the masked ones made the update 10 % slower (`bench_linear --op update --width
   1024`, 1 thread, best of 300 calls: 0.308 -> 0.277 ms). */
__attribute__((target("avx512f"), always_inline)) static inline void
grzo__apply_tables16_avx512(float *p, const float *u, const uint32_t *ub, const float *tab, const __m512 *t,
                            int groups, const uint32_t *sb, int64_t ldsb, int64_t k, __mmask16 live, int full,
                            __m512 dec) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __mmask16 all = 0xFFFFu;   /* the masked forms: GCC 12's unmasked ones warn in C++ */
    __m512i w = full ? _mm512_loadu_si512(sb + k) : _mm512_maskz_loadu_epi32(live, sb + k);
    __m512 m = _mm512_maskz_permutexvar_ps(all, w, t[0]), q, um;
    int g;
    for (g = 1; g < groups; g++) {
        __m512i idx;
        if (g % 8 == 0)
            w = full ? _mm512_loadu_si512(sb + (int64_t)(g / 8) * ldsb + k)
                     : _mm512_maskz_loadu_epi32(live, sb + (int64_t)(g / 8) * ldsb + k);
        idx = _mm512_maskz_srlv_epi32(all, w, _mm512_set1_epi32(4 * (g % 8)));
        m = _mm512_add_ps(m, _mm512_maskz_permutexvar_ps(all, idx, g < 8 ? t[g] : _mm512_loadu_ps(tab + 16 * g)));
    }
    if (ub) {
        __mmask16 neg = (__mmask16)(ub[k / 32] >> (k % 32));   /* k % 32 is 0 or 16 */
        um = _mm512_castsi512_ps(_mm512_mask_xor_epi32(_mm512_castps_si512(m), neg, _mm512_castps_si512(m), sign));
    } else {
        um = _mm512_mul_ps(full ? _mm512_loadu_ps(u + k) : _mm512_maskz_loadu_ps(live, u + k), m);
    }
    q = full ? _mm512_loadu_ps(p + k) : _mm512_maskz_loadu_ps(live, p + k);
    q = _mm512_sub_ps(_mm512_sub_ps(q, um), _mm512_mul_ps(dec, q));
    if (full)
        _mm512_storeu_ps(p + k, q);
    else
        _mm512_mask_storeu_ps(p + k, live, q);
}

/* The AVX-512F body. Called with a constant `groups` of at most 8 it is inlined into a copy
   whose tables stay in registers and whose group loop is unrolled (with the group count
   variable, `bench_linear --op update --width 576 --d-out 1536`, B = 16: 0.207 ms against
   0.145). ahead: the row to ask for in cache as this one is updated, or NULL. */
__attribute__((target("avx512f"), always_inline)) static inline void
grzo__apply_tables_avx512_body(float *p, const float *u, const uint32_t *ub, const float *tab, int groups,
                               const uint32_t *sb, int64_t ldsb, int64_t cols, float decay, const float *ahead) {
    const __m512 dec = _mm512_set1_ps(decay);
    __m512 t[8];
    int64_t k, whole = cols / 16 * 16;
    int g;
    for (g = 0; g < groups && g < 8; g++) t[g] = _mm512_loadu_ps(tab + 16 * g);
    for (k = 0; k < whole; k += 16) {   /* a line of the row ahead per vector (grzo__prefetch_row's requests) */
        if (ahead) _mm_prefetch((const char *)(ahead + k), _MM_HINT_T0);
        grzo__apply_tables16_avx512(p, u, ub, tab, t, groups, sb, ldsb, k, 0xFFFFu, 1, dec);
    }
    if (whole < cols) {
        if (ahead) _mm_prefetch((const char *)(ahead + whole), _MM_HINT_T0);
        grzo__apply_tables16_avx512(p, u, ub, tab, t, groups, sb, ldsb, whole,
                                    (__mmask16)((1u << (cols - whole)) - 1u), 0, dec);
    }
}

/* the same, 16 columns at a time with AVX-512F */
__attribute__((target("avx512f"))) static void
grzo__apply_row_tables_avx512(float *p, const float *u, const uint32_t *ub, const float *tab, int groups,
                              const uint32_t *sb, int64_t ldsb, int64_t cols, float decay, const float *ahead) {
#define GRZO__TABLES_CASE(G) \
    case G: grzo__apply_tables_avx512_body(p, u, ub, tab, G, sb, ldsb, cols, decay, ahead); break;
    switch (groups) {   /* B up to 32: a copy for each group count */
        GRZO__TABLES_CASE(1) GRZO__TABLES_CASE(2) GRZO__TABLES_CASE(3) GRZO__TABLES_CASE(4)
        GRZO__TABLES_CASE(5) GRZO__TABLES_CASE(6) GRZO__TABLES_CASE(7) GRZO__TABLES_CASE(8)
        default: grzo__apply_tables_avx512_body(p, u, ub, tab, groups, sb, ldsb, cols, decay, ahead);
    }
#undef GRZO__TABLES_CASE
}

/* 8 columns' entries of a 16-entry table (lo: entries 0-7, hi: 8-15) at the low 4 bits of idx */
__attribute__((target("avx2"))) static inline __m256 grzo__lookup16_avx2(__m256 lo, __m256 hi, __m256i idx) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                            _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* The AVX2 body, inlined like the AVX-512 one: with a constant `groups` of at most 4 its
   tables (two registers each) stay in registers. */
__attribute__((target("avx2"), always_inline)) static inline void
grzo__apply_tables_avx2_body(float *p, const float *u, const uint32_t *ub, const float *tab, int groups,
                             const uint32_t *sb, int64_t ldsb, int64_t cols, float decay) {
    const __m256 dec = _mm256_set1_ps(decay);
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256 t[8];
    int64_t k, whole = cols / 8 * 8;
    int g;
    for (g = 0; g < groups && g < 4; g++) {
        t[2 * g] = _mm256_loadu_ps(tab + 16 * g);
        t[2 * g + 1] = _mm256_loadu_ps(tab + 16 * g + 8);
    }
    for (k = 0; k < whole; k += 8) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(sb + k));
        __m256 m = grzo__lookup16_avx2(t[0], t[1], w), q, um;
        for (g = 1; g < groups; g++) {
            __m256i idx;
            if (g % 8 == 0) w = _mm256_loadu_si256((const __m256i *)(sb + (int64_t)(g / 8) * ldsb + k));
            idx = _mm256_srli_epi32(w, 4 * (g % 8));
            m = _mm256_add_ps(m, g < 4 ? grzo__lookup16_avx2(t[2 * g], t[2 * g + 1], idx)
                                       : grzo__lookup16_avx2(_mm256_loadu_ps(tab + 16 * g),
                                                             _mm256_loadu_ps(tab + 16 * g + 8), idx));
        }
        if (ub) {   /* the sign bit where U's bit of the column is set */
            __m256i bits = _mm256_and_si256(_mm256_set1_epi32((int)(ub[k / 32] >> (k % 32))), lane_bit);
            um = _mm256_xor_ps(m, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cmpeq_epi32(bits, lane_bit), 31)));
        } else {
            um = _mm256_mul_ps(_mm256_loadu_ps(u + k), m);
        }
        q = _mm256_loadu_ps(p + k);
        _mm256_storeu_ps(p + k, _mm256_sub_ps(_mm256_sub_ps(q, um), _mm256_mul_ps(dec, q)));
    }
    grzo__apply_row_tables_ref(p, u, ub, tab, groups, sb, ldsb, whole, cols, decay);   /* the last columns */
}

/* the same, 8 columns at a time with AVX2 */
__attribute__((target("avx2"))) static void
grzo__apply_row_tables_avx2(float *p, const float *u, const uint32_t *ub, const float *tab, int groups,
                            const uint32_t *sb, int64_t ldsb, int64_t cols, float decay) {
#define GRZO__TABLES_CASE(G) \
    case G: grzo__apply_tables_avx2_body(p, u, ub, tab, G, sb, ldsb, cols, decay); break;
    switch (groups) {   /* B up to 16: a copy for each group count */
        GRZO__TABLES_CASE(1) GRZO__TABLES_CASE(2) GRZO__TABLES_CASE(3) GRZO__TABLES_CASE(4)
        default: grzo__apply_tables_avx2_body(p, u, ub, tab, groups, sb, ldsb, cols, decay);
    }
#undef GRZO__TABLES_CASE
}
#endif

/* The row's tables with the widest version this CPU runs (simd: grzo__cpu_simd_level()). */
static void grzo__build_sign_tables(int simd, const float *c, int groups, float *tab) {
#ifdef GRZO__SIGN_TABLE_SIMD
    if (simd >= 3) { grzo__sign_tables_avx512(c, groups, tab); return; }
#else
    (void)simd;
#endif
    grzo__sign_tables(c, groups, tab);
}

/* One row's update with the widest version this CPU runs; ahead (or NULL): the row to ask
   for in cache meanwhile (the AVX-512 version spreads the requests through its loop) */
static void grzo__apply_row_tables(int simd, float *p, const float *u, const uint32_t *ub, const float *tab,
                                   int groups, const uint32_t *sb, int64_t ldsb, int64_t cols, float decay,
                                   const float *ahead) {
#ifdef GRZO__SIGN_TABLE_SIMD
    if (simd >= 3) { grzo__apply_row_tables_avx512(p, u, ub, tab, groups, sb, ldsb, cols, decay, ahead); return; }
    if (ahead) grzo__prefetch_row(ahead, cols);
    if (simd >= 2) { grzo__apply_row_tables_avx2(p, u, ub, tab, groups, sb, ldsb, cols, decay); return; }
#else
    (void)simd;
    if (ahead) grzo__prefetch_row(ahead, cols);
#endif
    grzo__apply_row_tables_ref(p, u, ub, tab, groups, sb, ldsb, 0, cols, decay);
}

/* S's sign bits by column: word w of column k (at sb[w cols + k]) holds examples 32w ..
   32w + 31, bit e % 32 set where s_ek = -1. */
static void grzo__sign_bits_by_column(const float *S, int64_t B, int64_t cols, uint32_t *sb) {
    int64_t e, k;
    memset(sb, 0, (size_t)((B + 31) / 32 * cols) * sizeof(uint32_t));
    for (e = 0; e < B; e++)
        for (k = 0; k < cols; k++) sb[e / 32 * cols + k] |= (uint32_t)(S[e * cols + k] < 0.0f) << (e % 32);
}

/* The flipout coefficients c_e = a_e r_ej of rows [j0, j0 + h), row i's at c + i ld (ld >= B;
   zeros from B to ld). R is example-major, so each example's h signs are read together: one
   row's B signs lie rows apart, and gathering them row by row waited on L2 (GRZO's update,
   `bench_linear --op update`, 1024 x 1024: 0.192 -> 0.173 ms). */
static void grzo__cpu_chunk_coeffs(const grzo_update_args *a, const float *R, int64_t rows, int64_t j0, int64_t h,
                                   int64_t ld, float *c) {
    const float *coeff = a->coeff;   /* locals: the stores to c could alias *a */
    int64_t B = a->n_examples, e, i;
    for (e = 0; e < ld; e++)
        for (i = 0; i < h; i++) c[i * ld + e] = e < B ? coeff[e] * R[e * rows + j0 + i] : 0.0f;
}

/* Flipout matrix and embedding blocks (of them, the rows `touched` selects), a row at a time
   by sign tables. Scratch: S's bits, and per thread a chunk of U's rows and one row's
   tables. */
static grzo_status grzo__cpu_update_flipout(grzo__cpu *cpu, const grzo_update_args *a, const float *R, const float *S) {
    const int64_t nb = GRZO__CPU_UPDATE_ROWS;
    float *P = (float *)a->p.data;
    int64_t rows = a->p.rows, cols = a->p.cols, B = a->n_examples, blk;
    int groups = (int)((B + GRZO__SIGN_GROUP - 1) / GRZO__SIGN_GROUP), nt = cpu->n_threads, simd = cpu->simd;
    /* per thread: U's rows (floats, or bits), the chunk's coefficients padded to whole groups,
       a row's tables */
    int64_t g4 = (int64_t)groups * GRZO__SIGN_GROUP;
    const int64_t pieces[3] = {nb * cols, nb * g4, (int64_t)groups * 16};
    int64_t per = grzo__cpu_slice_pieces(NULL, 3, pieces, NULL);
    grzo__cpu_scratch sc = {{0}, 0};
    uint32_t *sb = (uint32_t *)grzo__cpu_take(&sc, (size_t)((B + 31) / 32 * cols) * sizeof(uint32_t));
    float *scratch = grzo__cpu_take_slices(&sc, nt, per);
    if (!sb || !scratch) {
        grzo__cpu_release(&sc);
        return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "update: scratch allocation failed");
    }
    grzo__sign_bits_by_column(S, B, cols, sb);
    GRZO__OMP_FOR
    for (blk = 0; blk < (rows + nb - 1) / nb; blk++) {
        float *piece[3] = {NULL, NULL, NULL}, *u, *c, *tab;
        int64_t j0 = blk * nb, h = rows - j0 < nb ? rows - j0 : nb, i;
        const uint32_t *ub;
        if (!grzo__cpu_rows_touched(a->touched, j0, j0 + h)) continue;
        grzo__cpu_slice_pieces(grzo__cpu_slice(scratch, per), 3, pieces, piece);
        u = piece[0];
        c = piece[1];
        tab = piece[2];
        ub = grzo__cpu_update_u_rows(&a->base, j0, h, cols, u);
        grzo__cpu_chunk_coeffs(a, R, rows, j0, h, g4, c);
        for (i = 0; i < h; i++) {
            int64_t j = j0 + i;
            const uint32_t *rb;
            const float *rf;
            const float *ahead = grzo__cpu_update_ahead(a, P, rows, cols, j);
            if (!grzo__cpu_row_touched(a, j)) {   /* an embedding row no example used */
                if (ahead) grzo__prefetch_row(ahead, cols);
                continue;
            }
            grzo__build_sign_tables(simd, c + i * g4, groups, tab);
            grzo__cpu_update_u_row(ub, u, i, cols, &rb, &rf);
            grzo__apply_row_tables(simd, P + j * cols, rf, rb, tab, groups, sb, cols, cols, a->decay, ahead);
        }
    }
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

static grzo_status grzo__cpu_update(void *self, const grzo_update_args *a) {
    grzo__cpu *cpu = (grzo__cpu *)self;
    const int64_t nb = GRZO__CPU_UPDATE_ROWS;
    float *P = (float *)a->p.data;
    int64_t rows = a->p.rows, cols = a->p.cols, B = a->n_examples, blk;
    int nt = cpu->n_threads, vec = a->p.kind == GRZO_BLOCK_VECTOR;
    float *S, *R, *scratch;
    const int64_t pieces[2] = {nb * cols, nb * B};   /* per thread: a chunk of U's rows, its coefficients */
    int64_t per = grzo__cpu_slice_pieces(NULL, 2, pieces, NULL);
    double shared;
    grzo__cpu_scratch sc = {{0}, 0};
    grzo_status st;
    if (a->variant) return grzo__cpu_update_variant(cpu, a);
    st = grzo__cpu_update_signs(cpu, a, &R, &S, &shared);
    if (st != GRZO_OK) return st;
    if (a->flipout && !vec) {
        st = grzo__cpu_update_flipout(cpu, a, R, S);
        free(R);
        free(S);
        return st;
    }
    /* shared Z (any block), or a flipout vector (cols = 1, no s): one coefficient per row */
    scratch = grzo__cpu_take_slices(&sc, nt, per);
    if (!scratch) { free(R); free(S); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "update: scratch allocation failed"); }
    GRZO__OMP_FOR
    for (blk = 0; blk < (rows + nb - 1) / nb; blk++) {
        float *piece[2] = {NULL, NULL}, *u, *c, g = (float)shared;
        int64_t j0 = blk * nb, h = rows - j0 < nb ? rows - j0 : nb, i, e;
        const uint32_t *ub;
        if (!grzo__cpu_rows_touched(a->touched, j0, j0 + h)) continue;
        grzo__cpu_slice_pieces(grzo__cpu_slice(scratch, per), 2, pieces, piece);
        u = piece[0];
        c = piece[1];
        ub = grzo__cpu_update_u_rows(&a->base, j0, h, cols, u);
        if (a->flipout) grzo__cpu_chunk_coeffs(a, R, rows, j0, h, B, c);
        for (i = 0; i < h; i++) {
            int64_t j = j0 + i;
            const uint32_t *rb;
            const float *rf;
            if (!grzo__cpu_update_reaches(a, P, rows, cols, j)) continue;
            if (a->flipout)
                for (g = 0.0f, e = 0; e < B; e++) g += c[i * B + e];
            grzo__cpu_update_u_row(ub, u, i, cols, &rb, &rf);
            grzo__cpu_apply_row(P + j * cols, rf, rb, g, cols, a->decay);
        }
    }
    grzo__cpu_release(&sc);
    free(R);
    free(S);
    return GRZO_OK;
}

static grzo_status grzo__cpu_perturbed_copy(void *self, const grzo_copy_args *a) {
    grzo__cpu *cpu = (grzo__cpu *)self;
    const float *P = (const float *)a->p.data;
    float *out = (float *)a->out;
    int64_t rows = a->p.rows, cols = a->p.cols, j;
    int nt = cpu->n_threads;
    float *S;
    if (a->variant) return grzo__cpu_perturbed_copy_variant(cpu, a);
    S = (float *)malloc((size_t)cols * sizeof(float));
    if (!S) return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "perturbed_copy: scratch allocation failed");
    grzo__cpu_copy_signs(a, S);
    GRZO__OMP_FOR
    for (j = 0; j < rows; j++) {
        float *o = out + j * cols, f = a->scale;
        const float *p = P + j * cols;
        int64_t k;
        grzo_noise_fill(&a->base, (uint64_t)(j * cols), (size_t)cols, o);   /* U row, then in place */
        if (a->flipout) {
            grzo_noise r = grzo__sign_noise(&a->base, GRZO_STREAM_SIGN_R);
            f *= grzo_noise_at(&r, (uint64_t)(a->example * rows + j));
        }
        for (k = 0; k < cols; k++) o[k] = p[k] + f * (o[k] * S[k]);
    }
    free(S);
    return GRZO_OK;
}

static const grzo_backend_i grzo__cpu_iface = {
    GRZO_BACKEND_API_VERSION, "cpu", grzo__cpu_destroy, grzo__cpu_query, grzo__cpu_alloc, grzo__cpu_free,
    grzo__cpu_copy, grzo__cpu_copy, grzo__cpu_linear, grzo__cpu_vector, grzo__cpu_embedding, grzo__cpu_update,
    grzo__cpu_perturbed_copy, NULL, grzo__cpu_last_error};

GRZO__DEF grzo_status grzo_backend_cpu_create(const grzo_cpu_desc *desc, grzo_backend *out) {
    grzo_cpu_desc d;
    grzo__cpu *cpu;
    if (!out) return GRZO_ERR_INVALID_ARG;
    out->iface = NULL;
    out->self = NULL;
    if (desc) d = *desc; else memset(&d, 0, sizeof d);
    if (d.n_threads < 0 || d.n_threads > 1024) return GRZO_ERR_INVALID_ARG;
    if ((int)d.linear_algo < 0 || d.linear_algo > GRZO_CPU_LINEAR_FUSED) return GRZO_ERR_INVALID_ARG;
#ifdef _OPENMP
    if (d.n_threads == 0) d.n_threads = omp_get_max_threads();
#else
    d.n_threads = 1;   /* no OpenMP: the loops run on the calling thread */
#endif
    if (d.transient_bytes == 0) d.transient_bytes = (size_t)8 << 20;
    cpu = (grzo__cpu *)calloc(1, sizeof *cpu);
    if (!cpu) return GRZO_ERR_OUT_OF_MEMORY;
    cpu->n_threads = d.n_threads;
    cpu->algo = d.linear_algo;
    cpu->transient = d.transient_bytes;
    cpu->simd = grzo__cpu_simd_level();
#ifdef GRZO_USE_BLIS
    cpu->ukr = (struct grzo__ukr *)malloc(sizeof *cpu->ukr);
    if (!cpu->ukr) { free(cpu); return GRZO_ERR_OUT_OF_MEMORY; }
    if (!grzo__ukr_init(cpu->ukr)) { free(cpu->ukr); cpu->ukr = NULL; }
#endif
    grzo__cpu_describe_kernels(cpu);
#ifdef GRZO_USE_BLIS
    if (cpu->ukr && cpu->ukr->form_in_kernel) {   /* which kernel multiplies a GRZO pass */
        size_t k = strlen(cpu->kernels);
        snprintf(cpu->kernels + k, sizeof cpu->kernels - k, " + grzo's AVX-512 forming kernel%s",
                 cpu->ukr->forming == GRZO__FORM_FMA    ? " (forming by FMA)"
                 : cpu->ukr->forming == GRZO__FORM_WIDE ? " (16-row halves)"
                                                        : "");
    }
#endif
    out->iface = &grzo__cpu_iface;
    out->self = cpu;
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_backend_cpu_kernels(const grzo_backend *be, const char **line, const char **warning) {
    const grzo__cpu *cpu;
    if (!be || be->iface != &grzo__cpu_iface || !be->self) return GRZO_ERR_INVALID_ARG;
    cpu = (const grzo__cpu *)be->self;
    if (line) *line = cpu->kernels;
    if (warning) *warning = cpu->warning;
    return GRZO_OK;
}

#endif /* GRZO_IMPLEMENTATION */
