/* grzo_cpu_fused.h - the CPU backend's fused perturbed GEMM on BLIS's micro-kernel.

   Included by backends/grzo_cpu.h in the implementation TU when GRZO_USE_BLIS is defined
   (link -lblis; Debian: libblis-dev). Not a public header of its own.

   A perturbed linear runs, for each copy c (an example's "+" or "-" rows, or a run of
   shared-Z rows), Y_c = X_c (W + f_c (.) U)^T with f_c[j,k] = scale_c r_e[j] s_e[k]
   (flipout) or scale_c (shared). The loops are BLIS's five around one micro-kernel, with
   the weight as the packed operand that is formed instead of copied:

     for each K block of the shared dimension (sequential: the kernel accumulates in Y;
       BLIS's KC for one copy, up to 1.5 KC split evenly for many: grzo__copies_kc)
       pack every copy's rows of X into NR-wide (or MR-wide) slivers, once; a copy's last
         rows (fewer than half a sliver) go to the tail set instead (copies of the forming
         kernels, below: only a lone last row goes there, and the rows are read in place,
         except on a Zen 4 a copy of 12 rows or more, packed into 24-wide slivers, and on
         Intel's cores a copy of 5 rows or more, packed 12 wide)
       for each block of weight rows (about MC/4 rows; one thread each)
         pack W of the block into slivers, and U, regenerated from the counter RNG: a
           Rademacher U (the default) as one sign bit per element, a Gaussian one as floats
         for each copy, weight sliver by weight sliver: form the copy's sliver of
                        W + f_c (.) U from the packed panels (held in L2; an example's "+"
                        and "-" copies together, from one load), then run the
                        micro-kernel on it and each of the copy's X slivers while it is
                        in L1; or, where U and s are signs on an AVX-512 CPU with skx's
                        packing, run grzo's forming kernels (grzo__form_ukr_32x12; on a
                        Zen 4 grzo__form_ukr_16x24 for copies of 12 rows or more, each
                        weight sliver as two halves; on Intel's cores
                        grzo__form_ukr_fma_32xn for copies of 5 rows or more, U then also
                        as floats: grzo__forming_kernels), which form W + f_c (.) U in
                        registers as they multiply (same bits), each X sliver against
                        every weight sliver of the block (the FMA-forming kernel forms in
                        a copy's first X sliver and keeps the weights for its others:
                        grzo__form_fma_block)
         the tail set: X_t W^T and (X_t (.) s) U^T on the same panels (U as floats), added
           into Y

   so W and U are read and packed once per call whatever the number of copies, a copy's
   perturbed weight exists one cache block at a time (or only in registers), and every
   product runs in the library's tuned kernel or one that matches it bit for bit. An op with
   a single copy (a MeZO or FZOO pass) skips the packed panels and forms each block straight
   from W and fresh U rows (a Rademacher U's as bits, row by row). The formed weights are
   bit-identical to the per-example path's (w + (f r_j s_k) u with exact sign flips, no
   contraction: C99 mode); only the order of the K-sum differs from OpenBLAS's, and the
   tail rows add the perturbation's product separately, so with eps = 2^-24
   |y - y_exact| <= (K + 2) eps sum_k |x_k| (|w_jk| + |f_jk u_jk|) and the two paths agree
   within twice that: tests/test_fused.c.

   Results do not depend on the thread count: a weight-row block is computed by one thread,
   and the K blocks run in a fixed order. */
#ifndef GRZO_CPU_FUSED__IMPLEMENTED
#define GRZO_CPU_FUSED__IMPLEMENTED

#include <blis.h>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>   /* sysconf: the L2's size (grzo__l2_bytes) */
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GRZO__FORM_UKR 1   /* grzo__form_ukr_32x12 (below) is compiled */
#include <immintrin.h>
#include <cpuid.h>    /* the CPU family: grzo__forming_kernels */
#endif

#define GRZO__PACK_MAX_WIDTH 64 /* the widest sliver it takes (skx: MR 32) */
#define GRZO__WIDE_X 24          /* rows of a packed X sliver of the 16-row forming kernels */
#define GRZO__WIDE_MIN 12        /* the fewest rows of a copy that takes them */

/* Which of grzo's forming kernels run a GRZO pass's copies (grzo__ukr.forming) */
enum {
    GRZO__FORM_SLIVERS = 0,   /* grzo__form_ukr_32x12, every X sliver of a copy forming its weights */
    GRZO__FORM_WIDE = 1,      /* copies of GRZO__WIDE_MIN rows or more through the 16-row kernels
                                 (grzo__form_ukr_16x24), their rows packed 24 wide */
    GRZO__FORM_FMA = 2        /* copies of 5 rows or more through grzo__form_ukr_fma_32xn, forming
                                 in their first X sliver and keeping the weights for the others */
};

#ifdef GRZO__FORM_UKR
/* Which forming kernels suit this CPU. Forming a weight vector in registers takes vector
   operations beside the FMAs. AMD's Zen cores run the FP-add and logic operations forming
   needs (a xor, a shift, a ternary-logic op and an add, or a blend and an add) on pipes of
   their own, so there every X sliver forms its weights in the kernel. A Zen 4 runs a 512-bit
   FMA as two halves on 256-bit pipes; the 16-row kernels, which form a weight vector once for
   up to 24 rows, were the faster there (GRZO__FORM_WIDE, 9200e37: bench_linear --op grzo 1024
   wide, 64 rows a copy, 46.1-49.9 -> 42.0-43.4 ms). A Zen 5's full-width FMA pipes run them
   below the 32-row kernel, whose two weight vectors meet 12 rows of X (GRZO__FORM_SLIVERS;
   bench/ab_linear.py, 1 thread, GRZO's linear against the 16-row kernels: 0.90 at 1024 wide
   with 64 rows a copy, 0.87 at SmolLM2's 576 x 1536 with 36; 2 threads 0.88; 0.83; against
   the FMA-forming kernels 0.95; 0.94; 2 threads 0.95; 0.94). Intel's cores run every
   512-bit vector operation on the same two ports as the FMAs, so there each forming
   operation takes an FMA's slot, and a copy's weight is formed in one FMA per 16 weights
   instead, from U as floats, once per copy (GRZO__FORM_FMA). Measured on an Intel Xeon
   (family 6, model 207), 1 thread, a K block of 384 and 96 weight rows in L2, 24 or 12 rows
   of X in L1 (best of 200): BLIS's skx kernel on an unformed panel 175.7 GFLOP/s, the 16-row
   kernel 150.8, the 32-row kernel 140.2, the FMA-forming kernel 162.0. Other CPUs take
   Intel's choice; AMD's later families the Zen 5's (measured on an EPYC; the Zen 5 laptop
   cores that run 512-bit FMAs as two halves, as a Zen 4 does, have not been). */
static unsigned grzo__cpu_family(void) {
    unsigned a, b, c, d, family;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    family = (a >> 8) & 0xfu;
    if (family == 0xfu) family += (a >> 20) & 0xffu;   /* AMD's extended family */
    return family;
}

static int grzo__forming_kernels(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_is("amd")) return GRZO__FORM_FMA;
    return grzo__cpu_family() == 25 ? GRZO__FORM_WIDE : GRZO__FORM_SLIVERS;   /* 25: Zen 3 / Zen 4 */
}
#endif

/* BLIS's small-matrix ("sup") kernels, as BLIS 0.9 declares them (GEMMSUP_KER_PROT); its
   header names no type for them */
typedef void (*grzo__sup_fn)(conj_t conja, conj_t conjb, dim_t m, dim_t n, dim_t k, float *alpha, float *a, inc_t rs_a,
                             inc_t cs_a, float *b, inc_t rs_b, inc_t cs_b, float *beta, float *c, inc_t rs_c,
                             inc_t cs_c, auxinfo_t *data, cntx_t *cntx);

struct grzo__ukr {
    sgemm_ukr_ft kernel;      /* BLIS's native sgemm micro-kernel */
    grzo__sup_fn sup;         /* where the weight is B: BLIS's small-matrix kernel for row-stored
                                 A, B and C (X's rows read in place; grzo__sup_rows), or NULL */
    cntx_t *cntx;
    int64_t wp, xp;           /* sliver widths of the weight and X operands (MR/NR or NR/MR) */
    int64_t kc, mc;           /* cache blocks: shared dimension, weight rows per block */
    int64_t x_block;          /* where the weight is B: X rows of a block held in L2 (BLIS's
                                 MC, whole slivers; grzo__ukr_block) */
    int weight_is_a;          /* kernel prefers column-stored C: the weight is operand A */
    int form_in_kernel;       /* grzo__form_ukr_32x12 runs GRZO passes: BLIS skx's packing
                                 (32-row weight slivers as A, 12-row X slivers) and AVX-512F */
    int forming;              /* with form_in_kernel, GRZO__FORM_SLIVERS, _WIDE or _FMA: which
                                 forming kernels (grzo__forming_kernels) */
    int long_single_kc;       /* a single-copy op takes grzo__copies_kc's K block too (an L2 of
                                 2 MiB or more: grzo__copies_kc) */
    const char *arch;
};
typedef struct grzo__ukr grzo__ukr;
/* grzo__ukr_init copies BLIS's kernel pointers (a void_fp, a void *) into the function
   pointers: the build fails where they differ in size */
typedef char grzo__ukr_pointer_fits[sizeof(void_fp) == sizeof(sgemm_ukr_ft) && sizeof(void *) == sizeof(grzo__sup_fn)
                                        ? 1 : -1];

/* The L2 cache of a core in bytes, or 0 where the system does not say */
static long grzo__l2_bytes(void) {
#ifdef _SC_LEVEL2_CACHE_SIZE
    long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? v : 0;
#else
    return 0;
#endif
}

/* BLIS's small-matrix kernel for row-stored A, B and C, where its shape is the native kernel's
   (MR = X's sliver, NR = the weight's) and it prefers rows, on the AVX2 configurations
   (haswell, zen, zen2, zen3), whose sup kernels are BLIS's assembly ones: elsewhere the
   context may hold its C reference kernel, and BLIS says nothing of which it holds. */
static void grzo__sup_init(grzo__ukr *u, cntx_t *cntx, arch_t id) {
    void *ker;
    if (grzo__blis_arch_level((long)id) != 2) return;
    if ((int64_t)bli_cntx_get_l3_sup_blksz_def_dt(BLIS_FLOAT, BLIS_MR, cntx) != u->xp ||
        (int64_t)bli_cntx_get_l3_sup_blksz_def_dt(BLIS_FLOAT, BLIS_NR, cntx) != u->wp ||
        !bli_cntx_l3_sup_ker_prefers_rows_dt(BLIS_FLOAT, BLIS_RRR, cntx))
        return;
    ker = bli_cntx_get_l3_sup_ker_dt(BLIS_FLOAT, BLIS_RRR, cntx);
    if (ker) memcpy(&u->sup, &ker, sizeof u->sup);   /* an object pointer's bits: see u->kernel */
}

/* BLIS's context for this CPU. Returns 0 (and leaves the fallback to OpenBLAS) when BLIS
   selected its portable 'generic' configuration (its C reference kernel is slower than any
   BLAS), or when BLIS_ARCH_TYPE names a configuration grzo does not call
   (grzo__blis_usable). */
static int grzo__ukr_init(grzo__ukr *u) {
    cntx_t *cntx;
    void_fp ukr;
    arch_t id;
    int64_t mr, nr, kc, mc;
    memset(u, 0, sizeof *u);
    if (!grzo__blis_usable()) return 0;   /* BLIS_ARCH_TYPE would make BLIS abort or crash */
    cntx = bli_gks_query_cntx();
    id = grzo__blis_arch();
    if (!cntx || id == BLIS_ARCH_GENERIC) return 0;
    mr = (int64_t)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MR, cntx);
    nr = (int64_t)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NR, cntx);
    kc = (int64_t)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_KC, cntx);
    mc = (int64_t)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MC, cntx);
    /* BLIS 0.9 hands kernels over as void_fp, an object pointer in C: ISO C has no cast from
       it to a function pointer (-pedantic rejects one), so its bits are copied over */
    ukr = bli_cntx_get_l3_nat_ukr_dt(BLIS_FLOAT, BLIS_GEMM_UKR, cntx);
    memcpy(&u->kernel, &ukr, sizeof u->kernel);
    if (!u->kernel || mr <= 0 || nr <= 0 || kc <= 0 || mc <= 0) return 0;
    if (mr > GRZO__PACK_MAX_WIDTH || nr > GRZO__PACK_MAX_WIDTH) return 0;   /* the packer's tile */
    u->cntx = cntx;
    u->weight_is_a = !bli_cntx_l3_nat_ukr_prefers_rows_dt(BLIS_FLOAT, BLIS_GEMM_UKR, cntx);
    u->wp = u->weight_is_a ? mr : nr;
    u->xp = u->weight_is_a ? nr : mr;
    u->kc = kc;
    u->x_block = (mc / u->xp) * u->xp;
    if (u->x_block < u->xp) u->x_block = u->xp;
    if (!u->weight_is_a) grzo__sup_init(u, cntx, id);
    /* a block holds packed W and packed U (with the copies' X slivers and Y tiles passing
       through L2), each a quarter of BLIS's packed A block (sized for L2), in whole slivers.
       skx, bench_linear --op grzo 576/36 rows/B 16, when whole formed blocks were held too:
       a third (160 rows) 3.88 ms at 1 thread, 2.18 at 2; a quarter (96 rows) 3.75, 1.93; a
       sixth (64 rows) 3.77, 1.91, but MeZO's pass at 2 threads 0.91 -> 1.38 ms. With formed
       slivers and U's bits (Zen 5, 1 thread): a half, a third, a quarter and a sixth within
       1 % of each other at 576 and 1536 wide */
    u->mc = (mc / 4 / u->wp) * u->wp;
    if (u->mc < u->wp) u->mc = u->wp;
    u->arch = bli_arch_string(id);
    u->long_single_kc = grzo__l2_bytes() >= 2L * 1024 * 1024;
#ifdef GRZO__FORM_UKR
    u->form_in_kernel = u->weight_is_a && u->wp == 32 && u->xp == 12 && grzo__cpu_simd_level() >= 3;
    if (u->form_in_kernel) u->forming = grzo__forming_kernels();
#endif
    return 1;
}

/* One copy of the op: rows [row0, row0 + n_rows) of X and Y read W + f (.) U. */
typedef struct grzo__fused_copy {
    int64_t row0, n_rows;
    int64_t n_main;           /* rows multiplied by the formed weight: whole X slivers, or all */
    int64_t x_off;            /* offset of its packed X slivers in one KC block */
    int64_t tail0;            /* its first row in the tail set (rows n_main.. of the copy) */
    const float *r, *s;       /* sign vectors (d_out, d_in), NULL for shared Z */
    float scale;              /* sign * sigma */
    int in_kernel;            /* formed inside a forming kernel (grzo__form_ukr_32x12 or _16x24) */
    int in_place;             /* formed and stored, its rows past its whole X slivers read in
                                 place by BLIS's sup kernel (grzo__sup_rows), none in the tail set */
    int wide;                 /* in_kernel, through the 16-row kernels: its rows packed (grzo__wide) */
    int fma;                  /* in_kernel, through the FMA-forming kernels: its rows packed 12
                                 wide (grzo__fma_rows) */
    int64_t sw_off;           /* its s sign words in a K block's (in_kernel) */
} grzo__fused_copy;

/* A scratch area the backend keeps between calls, grown to the largest request, 64-byte
   aligned. The fused path's panels (MBs a call) through malloc and free were mapped and
   faulted in anew on some calls, as glibc's thresholds happened to fall (a GRZO linear at
   bench_llm's prompt lengths: 270 page faults a call). The old area is freed before a larger
   one is taken, so that the two never add up in the peak. NULL when it cannot grow.
   The area holds at least `floats` floats from a 64-byte line; *limit: how many it holds. */
static float *grzo__cpu_kept(grzo__cpu *cpu, int64_t floats, int64_t *limit) {
    size_t bytes = (size_t)floats * sizeof(float);
    char *area;
    if (bytes + 64 > cpu->kept_bytes) {
        free(cpu->kept);
        cpu->kept_bytes = 0;
        cpu->kept = malloc(bytes + 64);
        if (!cpu->kept) return NULL;
        cpu->kept_bytes = bytes + 64;
    }
    area = (char *)cpu->kept + (64 - ((uintptr_t)cpu->kept & 63u));
    *limit = (int64_t)((cpu->kept_bytes - (size_t)(area - (char *)cpu->kept)) / sizeof(float));
    return (float *)area;
}

/* The transposing packer under every panel: `h` rows of a row-major source (row i at
   src + i ld) become one sliver of `width` rows, out[k width + i] for k < kc, rows h..width-1
   zero. With a former (below) the rows packed are the formed weight w + (f_i s_k) u, the
   per-example path's expression and bits.
   Tiles of 8 columns go through 8 x 8 transposes in registers into a buffer whose rows are
   then written whole: 1536 x 576 into 32-wide slivers takes 0.11 ns per element (0.15
   formed) against 0.45 for a gather of each column. `stage` (NULL, or width x kc floats):
   copy the rows there first (callers pass it for weights, which stream from memory, and for
   rows 4 KiB apart; SmolLM2's FZOO step: 5.35 -> 5.17 x inference).

   What forms the rows being packed (a NULL former: copied as they are): row i becomes
   w_i + (f_i s_k) u_ik, with U as floats (u, row i at u + i ldu) or, for a Rademacher U, as
   bits (ub: bit k % 32 of word i ldu + k / 32 set where u_ik = -1; (f_i s_k) u_ik is then
   (f_i s_k) with its sign flipped, the same bits); s NULL: s_k = 1. */
typedef struct grzo__former {
    const float *u;
    const uint32_t *ub;
    int64_t ldu;              /* floats or words from one row of U to the next */
    const float *f, *s;
} grzo__former;

/* (f_i s_k) u_ik, one element */
static inline float grzo__former_term(const grzo__former *fm, int64_t i, int64_t k) {
    float p = fm->f[i] * (fm->s ? fm->s[k] : 1.0f);
    if (fm->ub) return (fm->ub[i * fm->ldu + k / 32] >> (k % 32)) & 1u ? -p : p;
    return p * fm->u[i * fm->ldu + k];
}

/* GRZO__PACK_SCALAR: the scalar packing that other compilers (GCC before 12) run, here too
   (tests/meson.build: fused_gemm_scalar_pack) */
#if !defined(GRZO__PACK_SCALAR) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
#define GRZO__PACK_VECTORS 1
/* in GCC/clang vector extensions (no intrinsics: every target the compiler has) */
typedef float grzo__v8 __attribute__((vector_size(32)));
typedef uint32_t grzo__v8u __attribute__((vector_size(32)));
#define GRZO__SHUF __builtin_shufflevector

/* rows i0..i0+n-1, columns k..k+7 (k a multiple of 8) of the source into r, formed by fm
   element by element as grzo__former_term */
static inline void grzo__tile_rows(const float *src, int64_t ld, const grzo__former *fm, int64_t i0, int64_t k, int n,
                                   grzo__v8 *r) {
    const grzo__v8u sign = {0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u,
                            0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u};
    const grzo__v8u to_sign = {31, 30, 29, 28, 27, 26, 25, 24};   /* bit c to the sign bit */
    grzo__v8 sv = {1, 1, 1, 1, 1, 1, 1, 1};
    int i;
    if (fm && fm->s) memcpy(&sv, fm->s + k, sizeof sv);
    for (i = 0; i < n; i++) {
        /* the row kept in a register until formed: GCC's AVX2 clone copies 32 bytes as two
           16-byte halves, and r[i] stored in halves then read whole stalled on the failed store
           forwarding (a Zen 3: 30 % of the packer's samples on the load after it) */
        grzo__v8 v;
        memcpy(&v, src + (i0 + i) * ld + k, sizeof v);
        if (fm && fm->ub) {
            uint32_t m = (fm->ub[(i0 + i) * fm->ldu + k / 32] >> (k % 32)) & 0xFFu;
            grzo__v8u mv = {m, m, m, m, m, m, m, m};
            v = v + (grzo__v8)((grzo__v8u)(fm->f[i0 + i] * sv) ^ ((mv << to_sign) & sign));
        } else if (fm) {
            grzo__v8 uv;
            memcpy(&uv, fm->u + (i0 + i) * fm->ldu + k, sizeof uv);
            v = v + (fm->f[i0 + i] * sv) * uv;
        }
        r[i] = v;
    }
}

/* rows i0..i0+7, columns k..k+7 (formed, with u), transposed into t[c][i0..i0+7] */
static inline void grzo__pack_tile8(const float *src, int64_t ld, const grzo__former *fm, int64_t i0, int64_t k,
                                    float (*t)[GRZO__PACK_MAX_WIDTH]) {
    grzo__v8 r[8], a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7;
    int i;
    grzo__tile_rows(src, ld, fm, i0, k, 8, r);
    a0 = GRZO__SHUF(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13);
    a1 = GRZO__SHUF(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);
    a2 = GRZO__SHUF(r[2], r[3], 0, 8, 1, 9, 4, 12, 5, 13);
    a3 = GRZO__SHUF(r[2], r[3], 2, 10, 3, 11, 6, 14, 7, 15);
    a4 = GRZO__SHUF(r[4], r[5], 0, 8, 1, 9, 4, 12, 5, 13);
    a5 = GRZO__SHUF(r[4], r[5], 2, 10, 3, 11, 6, 14, 7, 15);
    a6 = GRZO__SHUF(r[6], r[7], 0, 8, 1, 9, 4, 12, 5, 13);
    a7 = GRZO__SHUF(r[6], r[7], 2, 10, 3, 11, 6, 14, 7, 15);
    b0 = GRZO__SHUF(a0, a2, 0, 1, 8, 9, 4, 5, 12, 13);
    b1 = GRZO__SHUF(a0, a2, 2, 3, 10, 11, 6, 7, 14, 15);
    b2 = GRZO__SHUF(a1, a3, 0, 1, 8, 9, 4, 5, 12, 13);
    b3 = GRZO__SHUF(a1, a3, 2, 3, 10, 11, 6, 7, 14, 15);
    b4 = GRZO__SHUF(a4, a6, 0, 1, 8, 9, 4, 5, 12, 13);
    b5 = GRZO__SHUF(a4, a6, 2, 3, 10, 11, 6, 7, 14, 15);
    b6 = GRZO__SHUF(a5, a7, 0, 1, 8, 9, 4, 5, 12, 13);
    b7 = GRZO__SHUF(a5, a7, 2, 3, 10, 11, 6, 7, 14, 15);
    r[0] = GRZO__SHUF(b0, b4, 0, 1, 2, 3, 8, 9, 10, 11);
    r[1] = GRZO__SHUF(b1, b5, 0, 1, 2, 3, 8, 9, 10, 11);
    r[2] = GRZO__SHUF(b2, b6, 0, 1, 2, 3, 8, 9, 10, 11);
    r[3] = GRZO__SHUF(b3, b7, 0, 1, 2, 3, 8, 9, 10, 11);
    r[4] = GRZO__SHUF(b0, b4, 4, 5, 6, 7, 12, 13, 14, 15);
    r[5] = GRZO__SHUF(b1, b5, 4, 5, 6, 7, 12, 13, 14, 15);
    r[6] = GRZO__SHUF(b2, b6, 4, 5, 6, 7, 12, 13, 14, 15);
    r[7] = GRZO__SHUF(b3, b7, 4, 5, 6, 7, 12, 13, 14, 15);
    for (i = 0; i < 8; i++) memcpy(&t[i][i0], &r[i], sizeof r[i]);
}
/* rows i0..i0+3, columns k..k+7, the same way: two 4 x 4 transposes (an X sliver of 12 rows
   is one 8-row tile and one of these, not 4 rows element by element) */
static inline void grzo__pack_tile4(const float *src, int64_t ld, const grzo__former *fm, int64_t i0, int64_t k,
                                    float (*t)[GRZO__PACK_MAX_WIDTH]) {
    grzo__v8 r[4], a0, a1, a2, a3, b[4];
    int i;
    grzo__tile_rows(src, ld, fm, i0, k, 4, r);
    a0 = GRZO__SHUF(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13);
    a1 = GRZO__SHUF(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);
    a2 = GRZO__SHUF(r[2], r[3], 0, 8, 1, 9, 4, 12, 5, 13);
    a3 = GRZO__SHUF(r[2], r[3], 2, 10, 3, 11, 6, 14, 7, 15);
    b[0] = GRZO__SHUF(a0, a2, 0, 1, 8, 9, 4, 5, 12, 13);     /* columns 0 and 4 */
    b[1] = GRZO__SHUF(a0, a2, 2, 3, 10, 11, 6, 7, 14, 15);   /* 1 and 5 */
    b[2] = GRZO__SHUF(a1, a3, 0, 1, 8, 9, 4, 5, 12, 13);     /* 2 and 6 */
    b[3] = GRZO__SHUF(a1, a3, 2, 3, 10, 11, 6, 7, 14, 15);   /* 3 and 7 */
    for (i = 0; i < 4; i++) {
        memcpy(&t[i][i0], &b[i], 4 * sizeof(float));
        memcpy(&t[i + 4][i0], (const float *)&b[i] + 4, 4 * sizeof(float));
    }
}
/* rows i0 and i0+1, columns k..k+7, as 8 pairs (rows 4 and 5 of AVX2's 6-row X slivers,
   which went element by element, each load waiting on the cache: 24 % of a GRZO linear's
   samples at 576 x 192 on a Zen 3) */
static inline void grzo__pack_tile2(const float *src, int64_t ld, const grzo__former *fm, int64_t i0, int64_t k,
                                    float (*t)[GRZO__PACK_MAX_WIDTH]) {
    grzo__v8 r[2], lo, hi;
    grzo__tile_rows(src, ld, fm, i0, k, 2, r);
    lo = GRZO__SHUF(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13);     /* columns 0, 1, 4, 5 */
    hi = GRZO__SHUF(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);   /* 2, 3, 6, 7 */
    memcpy(&t[0][i0], (const float *)&lo, 2 * sizeof(float));
    memcpy(&t[1][i0], (const float *)&lo + 2, 2 * sizeof(float));
    memcpy(&t[4][i0], (const float *)&lo + 4, 2 * sizeof(float));
    memcpy(&t[5][i0], (const float *)&lo + 6, 2 * sizeof(float));
    memcpy(&t[2][i0], (const float *)&hi, 2 * sizeof(float));
    memcpy(&t[3][i0], (const float *)&hi + 2, 2 * sizeof(float));
    memcpy(&t[6][i0], (const float *)&hi + 4, 2 * sizeof(float));
    memcpy(&t[7][i0], (const float *)&hi + 6, 2 * sizeof(float));
}
#undef GRZO__SHUF
#endif

/* One k of a sliver: `width` floats, a copy of constant size for the kernels' widths so that
   the compiler moves it in registers instead of calling memcpy for 48 or 128 bytes per k (a
   MeZO pass on 576 x 576: 7 % of its time went to those calls). */
static inline void grzo__put_sliver_row(float *dst, const float *src, int64_t width) {
    switch (width) {
    case 6: memcpy(dst, src, 6 * sizeof(float)); break;
    case 8: memcpy(dst, src, 8 * sizeof(float)); break;
    case 12: memcpy(dst, src, 12 * sizeof(float)); break;
    case 16: memcpy(dst, src, 16 * sizeof(float)); break;
    case 24: memcpy(dst, src, 24 * sizeof(float)); break;
    case 32: memcpy(dst, src, 32 * sizeof(float)); break;
    default: memcpy(dst, src, (size_t)width * sizeof(float)); break;
    }
}

GRZO__WIDE_VECTORS static void grzo__pack_sliver(const float *GRZO__RESTRICT src, int64_t ld, const grzo__former *fm,
                                                 int64_t h, int64_t kc, int64_t width, float *GRZO__RESTRICT stage,
                                                 float *GRZO__RESTRICT out) {
    float t[8][GRZO__PACK_MAX_WIDTH];
    int64_t k, c, i, i0 = 0, tk;
    if (stage && ld > kc) {
        /* each row's segment copied whole: sequential reads where the source streams from
           memory (a model's weights between passes), and rows 4 KiB apart, which share L1
           sets and evict each other between tiles, next to each other (1024 x 1024: 0.36 ->
           0.16 ns per element) */
        for (i = 0; i < h; i++) memcpy(stage + i * kc, src + i * ld, (size_t)kc * sizeof(float));
        src = stage;
        ld = kc;
    }
    for (c = 0; c < 8; c++)
        for (i = h; i < width; i++) t[c][i] = 0.0f;
    for (k = 0; k < kc; k += 8) {
        tk = kc - k < 8 ? kc - k : 8;
#ifdef GRZO__PACK_VECTORS
        if (tk == 8) {
            for (i0 = 0; i0 + 8 <= h; i0 += 8) grzo__pack_tile8(src, ld, fm, i0, k, t);
            if (i0 + 4 <= h) {
                grzo__pack_tile4(src, ld, fm, i0, k, t);
                i0 += 4;
            }
            if (i0 + 2 <= h) {
                grzo__pack_tile2(src, ld, fm, i0, k, t);
                i0 += 2;
            }
        }
#endif
        for (i = tk == 8 ? i0 : 0; i < h; i++)   /* the rows and columns left, one at a time */
            for (c = 0; c < tk; c++)
                t[c][i] = fm ? src[i * ld + k + c] + grzo__former_term(fm, i, k + c) : src[i * ld + k + c];
        for (c = 0; c < tk; c++) grzo__put_sliver_row(out + (k + c) * width, t[c], width);
    }
}

/* Sliver q of grzo__pack_rows's output alone (out: the first sliver's place) */
static void grzo__pack_rows_sliver(const float *M, int64_t ld, int64_t r0, int64_t n, int64_t q, int64_t k0,
                                   int64_t kc, int64_t width, float *stage, float *out) {
    int64_t i = q * width;
    grzo__pack_sliver(M + (r0 + i) * ld + k0, ld, NULL, n - i < width ? n - i : width, kc, width, stage, out + i * kc);
}

/* Packs rows [r0, r0 + n) and columns [k0, k0 + kc) of a row-major matrix into slivers of
   `width` rows: sliver q holds, for each k, rows r0 + q width .. + width - 1 (zero padded). */
static void grzo__pack_rows(const float *M, int64_t ld, int64_t r0, int64_t n, int64_t k0, int64_t kc,
                            int64_t width, float *stage, float *out) {
    int64_t q;
    for (q = 0; q * width < n; q++) grzo__pack_rows_sliver(M, ld, r0, n, q, k0, kc, width, stage, out);
}

/* Rows [j0, j0 + h) of U, columns [k0, k0 + kc) of a d_in-wide block, row-major into urows
   (h x kc). */
static void grzo__u_rows(const grzo_noise *base, int64_t d_in, int64_t j0, int64_t h, int64_t k0, int64_t kc,
                         float *urows) {
    int64_t i;
    for (i = 0; i < h; i++) grzo_noise_fill(base, (uint64_t)((j0 + i) * d_in + k0), (size_t)kc, urows + i * kc);
}

/* U rows [j0, j0 + n), columns [k0, k0 + kc), packed like W; `urows` holds width x kc
   floats. */
static void grzo__pack_u(const grzo_noise *base, int64_t d_in, int64_t j0, int64_t n, int64_t k0, int64_t kc,
                         int64_t width, float *urows, float *out) {
    int64_t q;
    for (q = 0; q < n; q += width) {
        int64_t h = n - q < width ? n - q : width;
        grzo__u_rows(base, d_in, j0 + q, h, k0, kc, urows);
        grzo__pack_sliver(urows, kc, NULL, h, kc, width, NULL, out + q * kc);
    }
}

/* ---- a Rademacher U as sign bits ---------------------------------------------------------
   Forming a copy's weight from a packed float U reads 4 bytes of U per weight element for
   every copy, from L2, and forming waited on that load (perf: 30 % of its samples on the
   multiply that consumes it). A Rademacher U is +-1, so (f s_k) u is (f s_k) with its sign
   flipped where u = -1: the block's U is kept as one bit per element instead, a 32-bit word
   per k of each sliver (bit i set: row i of the sliver is -1), made from Philox's bits
   without the floats (grzo__u_row_bits in grzo_cpu.h), and the formed weight is the same
   bits. Slivers are at most 32 wide. */
#define GRZO__BIT_SLIVER_MAX 32

#ifdef GRZO__PACK_VECTORS
typedef float grzo__v16 __attribute__((vector_size(64)));
typedef uint32_t grzo__v16u __attribute__((vector_size(64)));
/* lane i of half 0 (1) moves bit i (16 + i) of a word to the sign bit */
static const grzo__v16u grzo__bit_to_sign[2] = {
    {31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16},
    {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}};
#define GRZO__V16_ALL(x) {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}
#endif

/* In place: bit c of a[i] becomes bit i of a[c] (a 32 x 32 bit matrix transposed by
   swapping ever smaller off-diagonal blocks: for j = 16, 8, 4, 2, 1, the bits of word k under
   the mask m_j, shifted by j, trade places with the bits of word k + j above it). */
static inline void grzo__transpose_bits32_scalar(uint32_t a[32]) {
    uint32_t m = 0x0000FFFFu, t;
    int j, k;
    for (j = 16; j != 0; j >>= 1, m ^= m << j)
        for (k = 0; k < 32; k = (k + j + 1) & ~j) {
            t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k + j] ^= t;
            a[k] ^= t << j;
        }
}

#ifdef GRZO__PACK_VECTORS
/* One swap of grzo__transpose_bits32 inside 16 words: lane k (k & j clear) trades with lane
   k + j. t holds the bits that move, in the low lanes only (mask: m_j there, 0 in the high
   lanes); lane k takes t << j, lane k + j takes t from lane k (the shuffle swaps k and k + j). */
#define GRZO__BITS_SWAP(v, j, mask, ...)                                               \
    do {                                                                              \
        const grzo__v16u m_ = mask;                                                   \
        grzo__v16u t_ = ((v >> j) ^ __builtin_shufflevector(v, v, __VA_ARGS__)) & m_; \
        v ^= (t_ << j) | __builtin_shufflevector(t_, t_, __VA_ARGS__);                \
    } while (0)
#define GRZO__LOW_LANES(j, m) {(0 & j) ? 0u : m, (1 & j) ? 0u : m, (2 & j) ? 0u : m, (3 & j) ? 0u : m, \
    (4 & j) ? 0u : m, (5 & j) ? 0u : m, (6 & j) ? 0u : m, (7 & j) ? 0u : m, (8 & j) ? 0u : m, (9 & j) ? 0u : m, \
    (10 & j) ? 0u : m, (11 & j) ? 0u : m, (12 & j) ? 0u : m, (13 & j) ? 0u : m, (14 & j) ? 0u : m, (15 & j) ? 0u : m}
/* The same bits as grzo__transpose_bits32_scalar, 16 words a vector: about 60 vector
   operations for the 32 words where the scalar loop runs some 500 (perf of a SmolLM2 GRZO
   step: the scalar transposes were 1 % of it). */
static inline void grzo__transpose_bits32(uint32_t a[32]) {
    grzo__v16u lo, hi, t;
    const grzo__v16u m16 = GRZO__V16_ALL(0x0000FFFFu);
    memcpy(&lo, a, sizeof lo);
    memcpy(&hi, a + 16, sizeof hi);
    t = ((lo >> 16) ^ hi) & m16;   /* j = 16: word k of lo with word k of hi */
    hi ^= t;
    lo ^= t << 16;
    GRZO__BITS_SWAP(lo, 8, GRZO__LOW_LANES(8, 0x00FF00FFu), 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    GRZO__BITS_SWAP(hi, 8, GRZO__LOW_LANES(8, 0x00FF00FFu), 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    GRZO__BITS_SWAP(lo, 4, GRZO__LOW_LANES(4, 0x0F0F0F0Fu), 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    GRZO__BITS_SWAP(hi, 4, GRZO__LOW_LANES(4, 0x0F0F0F0Fu), 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    GRZO__BITS_SWAP(lo, 2, GRZO__LOW_LANES(2, 0x33333333u), 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    GRZO__BITS_SWAP(hi, 2, GRZO__LOW_LANES(2, 0x33333333u), 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    GRZO__BITS_SWAP(lo, 1, GRZO__LOW_LANES(1, 0x55555555u), 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    GRZO__BITS_SWAP(hi, 1, GRZO__LOW_LANES(1, 0x55555555u), 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    memcpy(a, &lo, sizeof lo);
    memcpy(a + 16, &hi, sizeof hi);
}
#undef GRZO__BITS_SWAP
#undef GRZO__LOW_LANES
#else
static inline void grzo__transpose_bits32(uint32_t a[32]) { grzo__transpose_bits32_scalar(a); }
#endif

/* words per k block of a sliver's bits: kc rounded up to whole 32 x 32 transposes */
static int64_t grzo__bits_stride(int64_t kc) { return (kc + 31) / 32 * 32; }

/* U's sign bits for rows [j0, j0 + h) (h <= 32) and columns [k0, k0 + kc) of a d_in-wide
   block: ub[k] bit i set where U[j0 + i][k0 + k] = -1, bits of rows h.. clear. ub holds
   grzo__bits_stride(kc) words; those past kc are scratch. */
static void grzo__u_sliver_bits(const grzo_noise *base, int64_t d_in, int64_t j0, int64_t h, int64_t k0, int64_t kc,
                                uint32_t *ub) {
    int64_t nt = grzo__bits_stride(kc) / 32, t, i;
    /* row i's bits, 32 columns to a word, into word i of each tile */
    grzo__u_row_bits(base, d_in, j0, h, k0, kc, ub, 1, 32);
    for (i = h; i < 32; i++)
        for (t = 0; t < nt; t++) ub[t * 32 + i] = 0u;
    for (t = 0; t < nt; t++) grzo__transpose_bits32(ub + t * 32);
}

/* The bits of rows [j0, j0 + n) in slivers of `width`: sliver q at ub + q / width * stride. */
static void grzo__pack_u_bits(const grzo_noise *base, int64_t d_in, int64_t j0, int64_t n, int64_t k0, int64_t kc,
                              int64_t width, uint32_t *ub) {
    int64_t q;
    for (q = 0; q < n; q += width)
        grzo__u_sliver_bits(base, d_in, j0 + q, n - q < width ? n - q : width, k0, kc,
                            ub + q / width * grzo__bits_stride(kc));
}

/* The packed float U of n rows (slivers of `width`) from their bits, for the tail set's
   product: -1 or +1, and 0 in a sliver's rows past n like grzo__pack_u. */
GRZO__WIDE_VECTORS static void grzo__unpack_u_bits(const uint32_t *GRZO__RESTRICT ub, int64_t n, int64_t kc,
                                                   int64_t width, float *GRZO__RESTRICT out) {
    int64_t q, k, i, stride = grzo__bits_stride(kc);
    for (q = 0; q < n; q += width, ub += stride, out += width * kc) {
        int64_t h = n - q < width ? n - q : width;
#ifdef GRZO__PACK_VECTORS
        if (width % 16 == 0 && h == width) {
            const grzo__v16u sign = GRZO__V16_ALL(0x80000000u), one = GRZO__V16_ALL(0x3F800000u);
            for (k = 0; k < kc; k++) {
                grzo__v16u mv = GRZO__V16_ALL(ub[k]);
                for (i = 0; i < width; i += 16) {
                    grzo__v16u v = ((mv << grzo__bit_to_sign[i / 16]) & sign) | one;
                    memcpy(out + k * width + i, &v, sizeof v);
                }
            }
            continue;
        }
#endif
        for (k = 0; k < kc; k++)
            for (i = 0; i < width; i++) out[k * width + i] = i >= h ? 0.0f : (ub[k] >> i) & 1u ? -1.0f : 1.0f;
    }
}

/* One sliver of the copy's weight, any width, element by element: out = w + (f_i s_k) u,
   U as floats (u) or as bits (ub: bit i of ub[k] set where u = -1, the product's sign then
   flipped instead of multiplied, exactly), and its mirror's in `neg`: the expression the
   vector formers below compute. */
GRZO__WIDE_VECTORS static void grzo__form_sliver_any(const float *GRZO__RESTRICT w, const float *GRZO__RESTRICT u,
                                                     const uint32_t *GRZO__RESTRICT ub, const float *GRZO__RESTRICT f,
                                                     const float *GRZO__RESTRICT s, int64_t kc, int64_t width,
                                                     float *GRZO__RESTRICT out, float *GRZO__RESTRICT neg) {
    int64_t k, i;
    for (k = 0; k < kc; k++) {
        float sk = s ? s[k] : 1.0f;
        for (i = 0; i < width; i++) {
            float p = f[i] * sk;
            p = ub ? ((ub[k] >> i) & 1u ? -p : p) : p * u[k * width + i];
            out[k * width + i] = w[k * width + i] + p;
            if (neg) neg[k * width + i] = w[k * width + i] - p;
        }
    }
}

/* One sliver of the copy's weight from U's bits: out = w + (f_i s_k) u as in
   grzo__form_sliver, with the product's sign flipped where u = -1 instead of multiplied
   (exact either way), and its mirror's in `neg`. */
#ifdef GRZO__PACK_VECTORS
/* 16 rows (half hf of a 32-wide sliver) of one k */
static inline void grzo__form_bits16(const float *w, const grzo__v16 *fsk, const grzo__v16u *mv, int hf, float *out,
                                     float *neg) {
    const grzo__v16u sign = GRZO__V16_ALL(0x80000000u);
    grzo__v16 wv, p, o;
    memcpy(&wv, w, sizeof wv);
    p = (grzo__v16)((grzo__v16u)*fsk ^ ((*mv << grzo__bit_to_sign[hf]) & sign));
    o = wv + p;
    memcpy(out, &o, sizeof o);
    if (neg) {
        o = wv - p;
        memcpy(neg, &o, sizeof o);
    }
}
/* 8 rows (half hf of a 16-wide sliver: AVX2's layouts) of one k, the same expressions. In
   the AVX2 clone GCC 12 took grzo__form_bits16's 64-byte vectors through the stack in 16-byte
   pieces: on a Zen 3 (BLIS zen3, 16-wide weight slivers) forming took 9.4 % of a GRZO linear's
   samples, 4.4 % with these 32-byte vectors (bench/ab_linear.py, --op grzo 1024 wide, B 16, 64
   rows, 1 thread: 0.908 [p10 0.805, p90 0.966] of the time before) */
static inline void grzo__form_bits8(const float *w, const grzo__v8 *fsk, const grzo__v8u *mv, int hf, float *out,
                                    float *neg) {
    static const grzo__v8u bit_to_sign[2] = {{31, 30, 29, 28, 27, 26, 25, 24}, {23, 22, 21, 20, 19, 18, 17, 16}};
    const grzo__v8u sign = {0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u,
                            0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u};
    grzo__v8 wv, p, o;
    memcpy(&wv, w, sizeof wv);
    p = (grzo__v8)((grzo__v8u)*fsk ^ ((*mv << bit_to_sign[hf]) & sign));
    o = wv + p;
    memcpy(out, &o, sizeof o);
    if (neg) {
        o = wv - p;
        memcpy(neg, &o, sizeof o);
    }
}
#endif
GRZO__WIDE_VECTORS static void grzo__form_sliver_bits(const float *GRZO__RESTRICT w, const uint32_t *GRZO__RESTRICT ub,
                                                      const float *GRZO__RESTRICT f, const float *GRZO__RESTRICT s,
                                                      int64_t kc, int64_t width, float *GRZO__RESTRICT out,
                                                      float *GRZO__RESTRICT neg) {
#ifdef GRZO__PACK_VECTORS
    int64_t k;
    grzo__v16 f0, f1;
    if (width == 32) {   /* f's vectors in registers */
        memcpy(&f0, f, sizeof f0);
        memcpy(&f1, f + 16, sizeof f1);
        for (k = 0; k < kc; k++) {
            grzo__v16 skv = GRZO__V16_ALL(s ? s[k] : 1.0f), p0 = f0 * skv, p1 = f1 * skv;
            grzo__v16u mv = GRZO__V16_ALL(ub[k]);
            grzo__form_bits16(w + 32 * k, &p0, &mv, 0, out + 32 * k, neg ? neg + 32 * k : NULL);
            grzo__form_bits16(w + 32 * k + 16, &p1, &mv, 1, out + 32 * k + 16, neg ? neg + 32 * k + 16 : NULL);
        }
        return;
    }
    if (width == 16) {   /* AVX2's layouts (haswell, zen3): two 8-float halves */
        grzo__v8 g0, g1;
        memcpy(&g0, f, sizeof g0);
        memcpy(&g1, f + 8, sizeof g1);
        for (k = 0; k < kc; k++) {
            float sk = s ? s[k] : 1.0f;
            uint32_t m = ub[k];
            grzo__v8 skv = {sk, sk, sk, sk, sk, sk, sk, sk};
            grzo__v8 p0 = g0 * skv, p1 = g1 * skv;
            grzo__v8u mv = {m, m, m, m, m, m, m, m};
            grzo__form_bits8(w + 16 * k, &p0, &mv, 0, out + 16 * k, neg ? neg + 16 * k : NULL);
            grzo__form_bits8(w + 16 * k + 8, &p1, &mv, 1, out + 16 * k + 8, neg ? neg + 16 * k + 8 : NULL);
        }
        return;
    }
#endif
    grzo__form_sliver_any(w, NULL, ub, f, s, kc, width, out, neg);
}

/* One sliver of the copy's weight: out = w + (f_i s_k) u, f_i = scale r_i, the
   per-example path's w + f (u s) exactly (s = +-1 flips signs exactly). With `neg`, also
   its mirror copy's (the same example's other sign, f -> -f): neg = w + (-(f_i s_k) u),
   which is w - (f_i s_k) u bit for bit, from the same loads. Widths that are multiples of 8
   go through explicit 8-float vectors: left to itself, GCC unrolled the 16-wide loop whole and
   then left it scalar (haswell's 16-wide weight slivers: 5.7 instructions per formed element
   under callgrind); the same expressions element by element, so the same bits. */
#ifdef GRZO__PACK_VECTORS
GRZO__WIDE_VECTORS static void grzo__form_sliver_v8(const float *GRZO__RESTRICT w, const float *GRZO__RESTRICT u,
                                                    const float *GRZO__RESTRICT f, const float *GRZO__RESTRICT s,
                                                    int64_t kc, int64_t width, float *GRZO__RESTRICT out,
                                                    float *GRZO__RESTRICT neg) {
    int64_t k, i;
    for (k = 0; k < kc; k++) {
        float sk = s ? s[k] : 1.0f;
        grzo__v8 skv = {sk, sk, sk, sk, sk, sk, sk, sk};   /* an initializer: GCC broadcasts it in a register */
        for (i = 0; i < width; i += 8) {
            grzo__v8 fv, wv, uv, p;
            memcpy(&fv, f + i, sizeof fv);
            memcpy(&wv, w + k * width + i, sizeof wv);
            memcpy(&uv, u + k * width + i, sizeof uv);
            p = (fv * skv) * uv;
            fv = wv + p;
            memcpy(out + k * width + i, &fv, sizeof fv);
            if (neg) {
                fv = wv - p;
                memcpy(neg + k * width + i, &fv, sizeof fv);
            }
        }
    }
}
#endif

static void grzo__form_sliver(const float *w, const float *u, const float *f, const float *s, int64_t kc, int64_t width,
                              float *out, float *neg) {
#ifdef GRZO__PACK_VECTORS
    if (width % 8 == 0) { grzo__form_sliver_v8(w, u, f, s, kc, width, out, neg); return; }
#endif
    grzo__form_sliver_any(w, u, NULL, f, s, kc, width, out, neg);
}

/* Pairs each copy with its mirror (the same signs r, s, the opposite scale) where passes put
   it: half a pass on (a GRZO pass is every example's "+" copy, then every "-") or next.
   mate[c] = its mirror's index, -1 without one, -2 for a mirror formed with its mate. */
static int grzo__fused_mirror(const grzo__fused_copy *a, const grzo__fused_copy *b) {
    return a->r == b->r && a->s == b->s && a->scale == -b->scale;
}
static void grzo__fused_pair_mirrors(const grzo__fused_copy *cp, int64_t n_copies, int64_t *mate) {
    int64_t c, m, half = n_copies / 2;
    for (c = 0; c < n_copies; c++) mate[c] = -1;
    for (c = 0; c < n_copies; c++) {
        if (mate[c] != -1) continue;
        m = half > 0 && c + half < n_copies && mate[c + half] == -1 && grzo__fused_mirror(&cp[c], &cp[c + half]) ? c + half
            : c + 1 < n_copies && mate[c + 1] == -1 && grzo__fused_mirror(&cp[c], &cp[c + 1]) ? c + 1 : -1;
        if (m < 0) continue;
        mate[c] = m;
        mate[m] = -2;
    }
}

/* A copy's formed block straight from row-major W and freshly generated U rows, without
   packing W and U first, for ops with a single copy (a MeZO or FZOO pass: packed panels would
   serve no other copy; with two copies regenerating U twice costs more than it saves). U rows
   go to `urows` (width x kc floats, or a Rademacher U's bits there); `stage`: width x kc
   floats for grzo__pack_sliver. */
static void grzo__form_block_direct(const float *W, int64_t ld, const grzo_noise *base, const grzo__fused_copy *cq,
                                    int64_t j0, int64_t j1, int64_t k0, int64_t kc, int64_t width, float *urows,
                                    float *f, float *stage, float *out) {
    grzo__former fm;
    int64_t q, i;
    memset(&fm, 0, sizeof fm);
    fm.f = f;
    fm.s = cq->s ? cq->s + k0 : NULL;
    for (q = j0; q < j1; q += width, out += width * kc) {
        int64_t h = j1 - q < width ? j1 - q : width;
        if (base->dist == GRZO_NOISE_GAUSSIAN) {
            grzo__u_rows(base, ld, q, h, k0, kc, urows);
            fm.u = urows;
            fm.ldu = kc;
        } else {
            fm.ub = (const uint32_t *)urows;
            fm.ldu = (kc + 31) / 32;
            grzo__u_row_bits(base, ld, q, h, k0, kc, (uint32_t *)urows, fm.ldu, 1);
        }
        for (i = 0; i < h; i++) f[i] = cq->r ? cq->scale * cq->r[q + i] : cq->scale;
        grzo__pack_sliver(W + q * ld + k0, ld, &fm, h, kc, width, stage, out);
    }
}

/* Y[copy rows, weight rows j0..j1) (+)= X_c W_c^T for one formed block, in BLIS's loop
   order for the kernel's layout: the B operand's sliver stays in L1 while A's slivers, held in
   L2, pass it. Where the weight is A (skx: 32-row weight slivers, 12-row X slivers) each X
   sliver meets every formed weight sliver of the block; where the weight is B (zen3, haswell:
   6-row X slivers as A, 16-row weight slivers as B, which the kernel loads twice as many
   bytes of per k as of A) each weight sliver meets the X slivers of a block of BLIS's MC
   rows. Taken the skx way round on a Zen 3, the weight slivers streamed from L2 and X's
   (1.2 MB at SmolLM2's 1160 rows) from L3: a MeZO pass at 576 x 1536 spent 77 % of its time
   in BLIS's kernel, 78 GFLOP/s (PERFORMANCE.md, "On a Zen 3"). Column j of the block lands in
   column j - jy of y. */
static void grzo__ukr_block(const grzo__ukr *u, const float *formed, int64_t j0, int64_t j1, const float *xpack,
                            int64_t n_rows, int64_t kc, float beta, float *y, int64_t ldy, int64_t jy) {
    float one = 1.0f;
    auxinfo_t aux;
    int64_t q, j, qb, qe;
    memset(&aux, 0, sizeof aux);
    if (u->weight_is_a) {
        for (q = 0; q < n_rows; q += u->xp) {
            int64_t m = n_rows - q < u->xp ? n_rows - q : u->xp;
            float *xs = (float *)xpack + q * kc;
            for (j = j0; j < j1; j += u->wp) {
                int64_t h = j1 - j < u->wp ? j1 - j : u->wp;
                float *ws = (float *)formed + (j - j0) * kc, *c = y + q * ldy + (j - jy);
                bli_auxinfo_set_next_a(ws, &aux);
                bli_auxinfo_set_next_b(xs, &aux);
                /* C = Y^T: column-stored */
                u->kernel((dim_t)h, (dim_t)m, (dim_t)kc, &one, ws, xs, &beta, c, 1, (inc_t)ldy, &aux, u->cntx);
            }
        }
        return;
    }
    for (qb = 0; qb < n_rows; qb = qe) {
        qe = n_rows - qb < u->x_block ? n_rows : qb + u->x_block;
        for (j = j0; j < j1; j += u->wp) {
            int64_t h = j1 - j < u->wp ? j1 - j : u->wp;
            float *ws = (float *)formed + (j - j0) * kc;
            for (q = qb; q < qe; q += u->xp) {
                int64_t m = qe - q < u->xp ? qe - q : u->xp;
                float *xs = (float *)xpack + q * kc, *c = y + q * ldy + (j - jy);
                bli_auxinfo_set_next_a(xs, &aux);
                bli_auxinfo_set_next_b(ws, &aux);
                u->kernel((dim_t)m, (dim_t)h, (dim_t)kc, &one, xs, ws, &beta, c, (inc_t)ldy, 1, &aux, u->cntx);
            }
        }
    }
}

/* Y[rows, weight rows j..j+h) (+)= X W_c^T for one formed weight sliver (h <= wp rows, B's
   k-major layout) by BLIS's sup kernel, X's n_rows rows read in place (row i at x + i ldx),
   u->xp rows a call: the kernel computes only the rows it is given, so a copy's last rows
   cost what they are (the native kernel pads them to a whole sliver: SmolLM2's prompts, 580
   rows, took 626 rows' time), and X is not packed. Its m loop is not relied on (BLIS's "n"
   variants take at most MR rows); ps_a, the next rows, is what it prefetches. */
static void grzo__sup_rows(const grzo__ukr *u, const float *formed, int64_t h, const float *x, int64_t ldx,
                           int64_t n_rows, int64_t kc, float beta, float *y, int64_t ldy) {
    float one = 1.0f;
    auxinfo_t aux;
    int64_t q;
    memset(&aux, 0, sizeof aux);
    bli_auxinfo_set_ps_a((inc_t)(u->xp * ldx), &aux);
    for (q = 0; q < n_rows; q += u->xp) {
        int64_t m = n_rows - q < u->xp ? n_rows - q : u->xp;
        u->sup(BLIS_NO_CONJUGATE, BLIS_NO_CONJUGATE, (dim_t)m, (dim_t)h, (dim_t)kc, &one, (float *)x + q * ldx,
               (inc_t)ldx, 1, (float *)formed, (inc_t)u->wp, 1, &beta, y + q * ldy, (inc_t)ldy, 1, &aux, u->cntx);
    }
}

/* A stored copy's main rows times its formed sliver (weight rows q..q+h) for K block k0..k0+kc:
   its packed X slivers through the native kernel, and with in_place the rows past its whole
   slivers through the sup kernel. The native kernel runs whole slivers faster (36 rows, 576
   wide, kc 288: 86 against 80 GFLOP/s; 64 rows, 1024 wide: 84 against 76), the sup kernel a
   part sliver (33 rows: 79 against 81 GFLOP/s of the rows' own FLOPs). */
static void grzo__copy_times_sliver(const grzo__ukr *u, const grzo__fused_copy *c, const grzo_linear_args *a,
                                    const float *formed, int64_t q, int64_t h, int64_t k0, int64_t kc, float beta,
                                    const float *xpack) {
    int64_t d_in = a->w.cols, d_out = a->w.rows, whole = c->in_place ? c->n_main / u->xp * u->xp : c->n_main;
    float *y = a->y + c->row0 * d_out;
    if (whole > 0) grzo__ukr_block(u, formed, q, q + h, xpack + c->x_off, whole, kc, beta, y, d_out, 0);
    if (whole < c->n_main)
        grzo__sup_rows(u, formed, h, a->x + (c->row0 + whole) * d_in + k0, d_in, c->n_main - whole, kc, beta,
                       y + whole * d_out + q, d_out);
}

/* ---- forming inside the micro-kernel (x86-64, AVX-512) ------------------------------------
   BLIS's kernel reads a packed panel, so a formed sliver had to be stored and read back:
   forming cost 13 % of a GRZO linear at 36 rows a copy, 32 % at 12 (576 x 576, Zen 5, 1
   thread). Where U is Rademacher and s is +-1 (or absent: shared Z), a formed element is
   w + f_i or w - f_i (f_i = scale r_i; minus where bit i of U's word for k, xor s_k's sign,
   is set): one add and one masked subtract per 16 elements, which run on the FP add pipes
   beside the kernel's FMAs. So this one kernel forms while it multiplies, in BLIS skx's 32 x 12
   shape (the weight sliver packed as A, 32 rows; up to 12 rows of X, read in place) and
   BLIS's order of operations (k in order, one FMA per product, C added last), hence the
   same bits as forming and then BLIS's kernel (tests/test_fused.c, check_form_ukr). Measured
   with the formed sliver stored then multiplied by BLIS's kernel against this, 576 x 576,
   36 rows a copy: 0.205 -> 0.177 ms (BLIS's kernel on an unformed panel: 0.176); 12 rows:
   0.087 -> 0.060. Written with intrinsics because the masked subtract is the point (GCC's
   vector extensions need a shift, an and and an xor per vector instead, and C99 mode does
   not contract a * b + c into an FMA: 173 GFLOP/s against 265). The 12 columns are written
   out so that every optimization level keeps the 24 accumulators in registers. */
#ifdef GRZO__FORM_UKR
/* 16 formed weights: w + f, or w - f where m's bit is set (w + (-f) is w - f, bit for bit);
   +-f is picked first, off the path from w's load to the FMAs, by a blend of f and -f (a
   masked subtract into f needed a copy of f each time: `bench_linear --op grzo --width 1024
   --rows 64 --batch 16`, 7 alternations, 18.9 -> 18.6 ms) */
__attribute__((target("avx512f"), always_inline)) static inline __m512 grzo__formed16(const float *w, __m512 f,
                                                                                     __m512 nf, __mmask16 m) {
    return _mm512_add_ps(_mm512_loadu_ps(w), _mm512_mask_blend_ps(m, f, nf));
}

/* The same 16 formed weights for the 16-row kernels, with no mask register: U's word for k
   xor s_k's sign word (grzo__form_word, in every lane) shifted so that lane i's bit lands on
   its sign (grzo__form_shifts), f's sign xored with it in one ternary-logic op, and w added:
   integer and FP-add ops in place of a blend under a mask moved in from a general register,
   which took 3.5 % of a Zen 4's GRZO linear where a formed vector feeds 24 FMAs
   (`bench_linear --op grzo --width 1024 --rows 64 --batch 8`, 1 thread, best of 20, 3
   alternations: 21.0-21.2 ms -> 20.5-20.7, a MeZO pass of the same rows 20.4-20.5; 12 rows a
   copy, `--batch 16`: 8.53-8.77 -> 7.89-8.21). The words' xor done once per copy and block
   instead, before the kernels, gained nothing. The 32-row kernels keep the blend: their
   formed vectors feed 1-12 FMAs, where the extra ops cost more than the mask move (4 rows a
   copy: 3.36 -> 3.64 ms; 8 rows: 5.97-6.05 -> 6.31-6.41). */
__attribute__((target("avx512f"), always_inline)) static inline __m512i grzo__form_word(const uint32_t *ub,
                                                                                      const uint32_t *sw, int64_t k) {
    return _mm512_xor_si512(_mm512_set1_epi32((int)ub[k]), _mm512_set1_epi32((int)sw[k]));
}
/* the left shifts that bring bit first + i of a word to lane i's sign bit */
__attribute__((target("avx512f"), always_inline)) static inline __m512i grzo__form_shifts(int first) {
    return _mm512_sub_epi32(_mm512_set1_epi32(31 - first),
                            _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
}
__attribute__((target("avx512f"), always_inline)) static inline __m512 grzo__formed16_word(const float *w, __m512i f,
                                                                                          __m512i word, __m512i shifts) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    /* 0x78: f ^ (bits & sign). The shift is written masked (every lane) because GCC 12's
       unmasked form reads an undefined vector, which its C++ front end warns of. */
    const __m512i bits = _mm512_maskz_sllv_epi32((__mmask16)0xFFFFu, word, shifts);
    return _mm512_add_ps(_mm512_loadu_ps(w), _mm512_castsi512_ps(_mm512_ternarylogic_epi32(f, bits, sign, 0x78)));
}

/* The lanes of 16-row half `half` of a 32-row sliver that hold its first h rows */
static inline __mmask16 grzo__rows_mask(int64_t h, int half) {
    h -= 16 * half;
    return (__mmask16)(h >= 16 ? 0xFFFFu : h <= 0 ? 0u : (1u << h) - 1u);
}

/* C's tile is asked for as the kernel starts, so that its lines arrive while the k loop runs:
   in a model's pass the copies' Y tiles are scattered over a Y that outgrows L2 and were last
   touched a K block or a layer earlier, and waiting for them at the end cost a GRZO pass about
   a third of its time over inference's GEMMs (SmolLM2, bench_llm's GEMM column, 1 thread, 3
   alternations: 0.115-0.127 s -> 0.073-0.096 s over inference; 1024 x 1024, 64 rows a
   copy: 19.3 -> 18.2-18.6 ms). */
#define GRZO__FORM_PREFETCH(j)                                                              \
    if (j < cols) {                                                                         \
        _mm_prefetch((const char *)(c + j * ldc), _MM_HINT_T0);                             \
        _mm_prefetch((const char *)(c + j * ldc + 16), _MM_HINT_T0);                        \
    }
#define GRZO__FORM_ACC(j) __m512 c##j##a = _mm512_setzero_ps(), c##j##b = _mm512_setzero_ps();
#define GRZO__FORM_FMA(j)                                  \
    if (j < cols) {                                        \
        __m512 xv = _mm512_set1_ps(x[j * ldx + k]);        \
        c##j##a = _mm512_fmadd_ps(a0, xv, c##j##a);        \
        c##j##b = _mm512_fmadd_ps(a1, xv, c##j##b);        \
    }
#define GRZO__FORM_PUT(j)                                                                   \
    if (j < cols) {                                                                         \
        float *cj = c + j * ldc;                                                            \
        if (accumulate) {                                                                   \
            c##j##a = _mm512_add_ps(_mm512_maskz_loadu_ps(ha, cj), c##j##a);                \
            c##j##b = _mm512_add_ps(_mm512_maskz_loadu_ps(hb, cj + 16), c##j##b);           \
        }                                                                                   \
        _mm512_mask_storeu_ps(cj, ha, c##j##a);                                             \
        _mm512_mask_storeu_ps(cj + 16, hb, c##j##b);                                        \
    }
#define GRZO__FORM_COLUMNS(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#define GRZO__FORM_HALF1(M) M(0) M(1) M(2) M(3) M(4) M(5)
#define GRZO__FORM_HALF2(M) M(6) M(7) M(8) M(9) M(10) M(11)

/* C[0..h) x [0..cols) (+)= (w +- f) x^T for one 32-row weight sliver w (packed, 32 x kc)
   and `cols` (1-12, a constant once inlined) rows of X, read in place: row
   j's element k at x[j ldx + k] (the broadcasts read 12 streams as fast as one packed sliver,
   4 KiB strides included: 576 x 576, 36 rows a copy, 0.174 ms either way). Element (i, k) of
   the weight is w + f_i, or w - f_i where bit i of ub[k] ^ sw[k] is set. C is column-stored:
   c[i + j ldc] (row j of Y, weight row i). */
__attribute__((target("avx512f"), always_inline)) static inline void
grzo__form_ukr_body(const int cols, int64_t kc, const float *w, const uint32_t *ub, const uint32_t *sw, const float *f,
                    const float *x, int64_t ldx, int64_t h, int accumulate, float *c, int64_t ldc) {
    const __m512 f0 = _mm512_loadu_ps(f), f1 = _mm512_loadu_ps(f + 16);
    const __m512 n0 = _mm512_sub_ps(_mm512_setzero_ps(), f0), n1 = _mm512_sub_ps(_mm512_setzero_ps(), f1);
    const __mmask16 ha = grzo__rows_mask(h, 0), hb = grzo__rows_mask(h, 1);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t k;
    GRZO__FORM_COLUMNS(GRZO__FORM_PREFETCH)
    GRZO__FORM_COLUMNS(GRZO__FORM_ACC)
    if (kc > 0) {
        const uint32_t m = ub[0] ^ sw[0];
        a0 = grzo__formed16(w, f0, n0, (__mmask16)(m & 0xFFFFu));
        a1 = grzo__formed16(w + 16, f1, n1, (__mmask16)(m >> 16));
    }
    /* k + 1's weight is formed before k's FMAs: its mask (two loads, a xor, two moves to mask
       registers) then has a whole k to arrive (the last k forms itself again, unused) */
    for (k = 0; k < kc; k++) {
        const int64_t kn = k + 1 < kc ? k + 1 : k;
        const uint32_t m = ub[kn] ^ sw[kn];
        const __m512 b0 = grzo__formed16(w + 32 * kn, f0, n0, (__mmask16)(m & 0xFFFFu));
        const __m512 b1 = grzo__formed16(w + 32 * kn + 16, f1, n1, (__mmask16)(m >> 16));
        GRZO__FORM_COLUMNS(GRZO__FORM_FMA)
        a0 = b0;
        a1 = b1;
    }
    GRZO__FORM_COLUMNS(GRZO__FORM_PUT)
}
#undef GRZO__FORM_FMA   /* the others serve grzo__form_ukr_fma_body too */

#define GRZO__FORM_UKR_ARGS                                                                                            \
    int64_t kc, const float *w, const uint32_t *ub, const uint32_t *sw, const float *f, const float *x, int64_t ldx,  \
        int64_t h, int accumulate, float *c, int64_t ldc
/* One kernel per column count: a copy's rows are split into slivers of their own widths,
   unpadded (grzo__form_ukr_block) */
#define GRZO__FORM_UKR_N(N)                                                                 \
    __attribute__((target("avx512f"))) static void grzo__form_ukr_32x##N(GRZO__FORM_UKR_ARGS) { \
        grzo__form_ukr_body(N, kc, w, ub, sw, f, x, ldx, h, accumulate, c, ldc);               \
    }
/* the 32-row kernels' column counts (here and grzo__form_ukr_fma_32xn) */
#define GRZO__EACH_1_TO_12(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12)
GRZO__EACH_1_TO_12(GRZO__FORM_UKR_N)
#undef GRZO__FORM_UKR_N
typedef void (*grzo__form_ukr_fn)(GRZO__FORM_UKR_ARGS);
static const grzo__form_ukr_fn grzo__form_ukr_32xn[13] = {
    NULL, grzo__form_ukr_32x1, grzo__form_ukr_32x2, grzo__form_ukr_32x3, grzo__form_ukr_32x4,
    grzo__form_ukr_32x5, grzo__form_ukr_32x6, grzo__form_ukr_32x7, grzo__form_ukr_32x8,
    grzo__form_ukr_32x9, grzo__form_ukr_32x10, grzo__form_ukr_32x11, grzo__form_ukr_32x12};
#undef GRZO__FORM_UKR_ARGS

/* Two weight slivers (64 rows: w and w2, U's words ub and ub2, f's 64 scales; the second h2
   rows high) against `cols` (1-4) rows of X in place, for a copy of 2-4 rows:
   16 FMA chains for 4 columns where the 32-row kernel has 8, which leave the FMA pipes waiting
   on their latency. Each element's arithmetic is grzo__form_ukr_32x4's, so the same bits. */
#define GRZO__FORM4_ACC(j) __m512 c##j##a = zero, c##j##b = zero, c##j##c = zero, c##j##d = zero;
#define GRZO__FORM4_FMA(j)                                 \
    if (j < cols) {                                        \
        __m512 xv = _mm512_set1_ps(x[j * ldx + k]);        \
        c##j##a = _mm512_fmadd_ps(a0, xv, c##j##a);        \
        c##j##b = _mm512_fmadd_ps(a1, xv, c##j##b);        \
        c##j##c = _mm512_fmadd_ps(a2, xv, c##j##c);        \
        c##j##d = _mm512_fmadd_ps(a3, xv, c##j##d);        \
    }
#define GRZO__FORM4_PUT1(j, v, mask, at)                                                 \
    if (accumulate) c##j##v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, cj + at), c##j##v); \
    _mm512_mask_storeu_ps(cj + at, mask, c##j##v);
#define GRZO__FORM4_PUT(j)                                 \
    if (j < cols) {                                        \
        float *cj = c + j * ldc;                           \
        GRZO__FORM4_PUT1(j, a, all, 0)                     \
        GRZO__FORM4_PUT1(j, b, all, 16)                    \
        GRZO__FORM4_PUT1(j, c, hc, 32)                     \
        GRZO__FORM4_PUT1(j, d, hd, 48)                     \
    }
#define GRZO__FORM64_ARGS                                                                                              \
    int64_t kc, const float *w, const float *w2, const uint32_t *ub, const uint32_t *ub2, const uint32_t *sw,         \
        const float *f, const float *x, int64_t ldx, int64_t h2, int accumulate, float *c, int64_t ldc
__attribute__((target("avx512f"), always_inline)) static inline void grzo__form_ukr_64_body(const int cols,
                                                                                          GRZO__FORM64_ARGS) {
    const __m512 zero = _mm512_setzero_ps(), f0 = _mm512_loadu_ps(f), f1 = _mm512_loadu_ps(f + 16);
    const __m512 f2 = _mm512_loadu_ps(f + 32), f3 = _mm512_loadu_ps(f + 48);
    const __m512 n0 = _mm512_sub_ps(zero, f0), n1 = _mm512_sub_ps(zero, f1), n2 = _mm512_sub_ps(zero, f2);
    const __m512 n3 = _mm512_sub_ps(zero, f3);
    const __mmask16 all = (__mmask16)0xFFFFu, hc = grzo__rows_mask(h2, 0), hd = grzo__rows_mask(h2, 1);
    int64_t k, j;
    for (j = 0; j < cols; j++) {   /* C's 64-float columns, while the k loop runs (see grzo__form_ukr_body) */
        const char *cj = (const char *)(c + j * ldc);
        _mm_prefetch(cj, _MM_HINT_T0), _mm_prefetch(cj + 64, _MM_HINT_T0);
        _mm_prefetch(cj + 128, _MM_HINT_T0), _mm_prefetch(cj + 192, _MM_HINT_T0);
    }
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    GRZO__FORM4_ACC(0) GRZO__FORM4_ACC(1) GRZO__FORM4_ACC(2) GRZO__FORM4_ACC(3)
    if (kc > 0) {
        const uint32_t m = ub[0] ^ sw[0], m2 = ub2[0] ^ sw[0];
        a0 = grzo__formed16(w, f0, n0, (__mmask16)(m & 0xFFFFu));
        a1 = grzo__formed16(w + 16, f1, n1, (__mmask16)(m >> 16));
        a2 = grzo__formed16(w2, f2, n2, (__mmask16)(m2 & 0xFFFFu));
        a3 = grzo__formed16(w2 + 16, f3, n3, (__mmask16)(m2 >> 16));
    }
    for (k = 0; k < kc; k++) {   /* k + 1's weights formed before k's FMAs (grzo__form_ukr_body) */
        const int64_t kn = k + 1 < kc ? k + 1 : k;
        const uint32_t m = ub[kn] ^ sw[kn], m2 = ub2[kn] ^ sw[kn];
        const __m512 b0 = grzo__formed16(w + 32 * kn, f0, n0, (__mmask16)(m & 0xFFFFu));
        const __m512 b1 = grzo__formed16(w + 32 * kn + 16, f1, n1, (__mmask16)(m >> 16));
        const __m512 b2 = grzo__formed16(w2 + 32 * kn, f2, n2, (__mmask16)(m2 & 0xFFFFu));
        const __m512 b3 = grzo__formed16(w2 + 32 * kn + 16, f3, n3, (__mmask16)(m2 >> 16));
        GRZO__FORM4_FMA(0) GRZO__FORM4_FMA(1) GRZO__FORM4_FMA(2) GRZO__FORM4_FMA(3)
        a0 = b0, a1 = b1, a2 = b2, a3 = b3;
    }
    GRZO__FORM4_PUT(0) GRZO__FORM4_PUT(1) GRZO__FORM4_PUT(2) GRZO__FORM4_PUT(3)
}
#undef GRZO__FORM4_ACC
#undef GRZO__FORM4_FMA
#undef GRZO__FORM4_PUT1
#undef GRZO__FORM4_PUT
#define GRZO__FORM_UKR_N(N)                                                                 \
    __attribute__((target("avx512f"))) static void grzo__form_ukr_64x##N(GRZO__FORM64_ARGS) { \
        grzo__form_ukr_64_body(N, kc, w, w2, ub, ub2, sw, f, x, ldx, h2, accumulate, c, ldc);    \
    }
GRZO__FORM_UKR_N(1) GRZO__FORM_UKR_N(2) GRZO__FORM_UKR_N(3) GRZO__FORM_UKR_N(4)
#undef GRZO__FORM_UKR_N
typedef void (*grzo__form_ukr64_fn)(GRZO__FORM64_ARGS);
static const grzo__form_ukr64_fn grzo__form_ukr_64xn[5] = {NULL, grzo__form_ukr_64x1, grzo__form_ukr_64x2,
                                                           grzo__form_ukr_64x3, grzo__form_ukr_64x4};
#undef GRZO__FORM64_ARGS

/* Half a weight sliver (16 rows) against `cols` (12-24) packed rows of X, for copies of 12
   rows or more. The 32 x 12 kernel forms two vectors of weights for 24 FMAs; this one forms
   one for up to 24, so a copy's weight is formed half as often. Its X values are broadcast by
   the FMAs themselves from the packed sliver (x[24 k + j]: the rows read in place would need a
   register each). The forming took 10 % of the 32 x 12 kernel's time on a Zen 4, whose moves
   into mask registers are slow (a probe, K block 512, 96 weight rows, copies of 72 rows: 103.7
   GFLOP/s, 114 unformed), and 3.5 % of this one's (110.2), which therefore forms without a
   mask register (grzo__formed16_word). Element (i, k) is w[32 k + i] + f_i, or - f_i where bit
   16 half + i of ub[k] ^ sw[k] is set, as in grzo__form_ukr_32x12: the same bits. */
#define GRZO__WIDE_PREFETCH(j)                                          \
    if (j < cols) {                                                     \
        _mm_prefetch((const char *)(c + j * ldc), _MM_HINT_T0);         \
        _mm_prefetch((const char *)(c + j * ldc + 15), _MM_HINT_T0);    \
    }
#define GRZO__WIDE_ACC(j) __m512 c##j = _mm512_setzero_ps();
#define GRZO__WIDE_FMA(j) \
    if (j < cols) c##j = _mm512_fmadd_ps(a, _mm512_set1_ps(xk[j]), c##j);
#define GRZO__WIDE_PUT(j)                                                                      \
    if (j < cols) {                                                                            \
        if (accumulate) c##j = _mm512_add_ps(_mm512_maskz_loadu_ps(hm, c + j * ldc), c##j);    \
        _mm512_mask_storeu_ps(c + j * ldc, hm, c##j);                                          \
    }
#define GRZO__WIDE_COLUMNS(M)                                                                   \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) M(16) \
    M(17) M(18) M(19) M(20) M(21) M(22) M(23)
#define GRZO__WIDE_ARGS                                                                                                \
    int64_t kc, const float *w, const uint32_t *ub, int half, const uint32_t *sw, const float *f, const float *xp,    \
        int64_t h, int accumulate, float *c, int64_t ldc
__attribute__((target("avx512f"), always_inline)) static inline void grzo__form_ukr_wide_body(const int cols,
                                                                                            GRZO__WIDE_ARGS) {
    const int shift = 16 * half;
    const __m512i fv = _mm512_castps_si512(_mm512_loadu_ps(f + shift)), sv = grzo__form_shifts(shift);
    const __mmask16 hm = grzo__rows_mask(h, 0);
    __m512 a = _mm512_setzero_ps();
    int64_t k;
    w += shift;
    GRZO__WIDE_COLUMNS(GRZO__WIDE_PREFETCH)
    GRZO__WIDE_COLUMNS(GRZO__WIDE_ACC)
    if (kc > 0) a = grzo__formed16_word(w, fv, grzo__form_word(ub, sw, 0), sv);
    for (k = 0; k < kc; k++) {   /* k + 1's weights formed before k's FMAs (grzo__form_ukr_body) */
        const int64_t kn = k + 1 < kc ? k + 1 : k;
        const __m512 b = grzo__formed16_word(w + 32 * kn, fv, grzo__form_word(ub, sw, kn), sv);
        const float *xk = xp + GRZO__WIDE_X * k;
        GRZO__WIDE_COLUMNS(GRZO__WIDE_FMA)
        a = b;
    }
    GRZO__WIDE_COLUMNS(GRZO__WIDE_PUT)
}
#undef GRZO__WIDE_PREFETCH
#undef GRZO__WIDE_ACC
#undef GRZO__WIDE_FMA
#undef GRZO__WIDE_PUT
#undef GRZO__WIDE_COLUMNS
#define GRZO__FORM_UKR_N(N)                                                                          \
    __attribute__((target("avx512f"))) static void grzo__form_ukr_16x##N(GRZO__WIDE_ARGS) {          \
        grzo__form_ukr_wide_body(N, kc, w, ub, half, sw, f, xp, h, accumulate, c, ldc);            \
    }
GRZO__FORM_UKR_N(12) GRZO__FORM_UKR_N(13) GRZO__FORM_UKR_N(14) GRZO__FORM_UKR_N(15) GRZO__FORM_UKR_N(16)
GRZO__FORM_UKR_N(17) GRZO__FORM_UKR_N(18) GRZO__FORM_UKR_N(19) GRZO__FORM_UKR_N(20) GRZO__FORM_UKR_N(21)
GRZO__FORM_UKR_N(22) GRZO__FORM_UKR_N(23) GRZO__FORM_UKR_N(24)
#undef GRZO__FORM_UKR_N
typedef void (*grzo__form_ukr_wide_fn)(GRZO__WIDE_ARGS);
static const grzo__form_ukr_wide_fn grzo__form_ukr_16xn[GRZO__WIDE_X + 1] = {
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    grzo__form_ukr_16x12, grzo__form_ukr_16x13, grzo__form_ukr_16x14, grzo__form_ukr_16x15, grzo__form_ukr_16x16,
    grzo__form_ukr_16x17, grzo__form_ukr_16x18, grzo__form_ukr_16x19, grzo__form_ukr_16x20, grzo__form_ukr_16x21,
    grzo__form_ukr_16x22, grzo__form_ukr_16x23, grzo__form_ukr_16x24};
#undef GRZO__WIDE_ARGS

/* A 32-row weight sliver against `cols` (1-12) rows of X packed 12 wide (x[12 k + j]), the
   weight formed by one FMA per 16 elements (GRZO__FORM_FMA: on Intel's cores every other
   vector operation would take an FMA's port): w + u fs_k, with u the block's U as floats
   (+-1, packed like w) and fs_k the 32 scales f_i where s_k = +1 and -f_i where s_k = -1
   (fs: f then -f; sw[k] & 32 picks the half). u fs_k is +-f_i exactly, so the formed
   element is grzo__form_ukr_32x12's w + f_i or w - f_i, bit for bit (for f_i != 0: a row
   past the weight, f = 0, is never stored), and the products go in the same order: the same
   bits (tests/test_fused.c, check_form_ukr). k + 1's weights are formed before k's FMAs, as
   in grzo__form_ukr_body: without that the probe in grzo__forming_kernels' comment ran at
   151 GFLOP/s instead of 162. */
#define GRZO__FMA_FMA(j, v0, v1)                          \
    if (j < cols) {                                        \
        __m512 xv = _mm512_set1_ps(xk[j]);                 \
        c##j##a = _mm512_fmadd_ps(v0, xv, c##j##a);        \
        c##j##b = _mm512_fmadd_ps(v1, xv, c##j##b);        \
    }
#define GRZO__FMA_FMA_A(j) GRZO__FMA_FMA(j, a0, a1)
#define GRZO__FMA_FMA_B(j) GRZO__FMA_FMA(j, b0, b1)
#define GRZO__FMA_ARGS                                                                                                 \
    int64_t kc, const float *w, const float *u, const uint32_t *sw, const float *fs, const float *xp, int64_t h,      \
        int accumulate, float *c, int64_t ldc
__attribute__((target("avx512f"), always_inline)) static inline __m512 grzo__formed16_fma(const float *w,
                                                                                         const float *u,
                                                                                         const float *fs) {
    return _mm512_fmadd_ps(_mm512_loadu_ps(u), _mm512_loadu_ps(fs), _mm512_loadu_ps(w));
}
/* Whether a forming kernel's weights (grzo__form_fma_block) are only formed (GRZO__FMA_FORM)
   or formed and kept at kept + 32 k for the copy's other X slivers (GRZO__FMA_FORM_KEEP),
   which grzo__kept_ukr_body then reads */
enum { GRZO__FMA_FORM, GRZO__FMA_FORM_KEEP };
__attribute__((target("avx512f"), always_inline)) static inline void grzo__fma_weights(
    const int mode, int64_t k, const float *w, const float *u, const uint32_t *sw, const float *fs, float *kept,
    __m512 *v0, __m512 *v1) {
    const float *f = fs + (sw[k] & 32u);
    *v0 = grzo__formed16_fma(w + 32 * k, u + 32 * k, f);
    *v1 = grzo__formed16_fma(w + 32 * k + 16, u + 32 * k + 16, f + 16);
    if (mode == GRZO__FMA_FORM_KEEP) {
        _mm512_storeu_ps(kept + 32 * k, *v0);
        _mm512_storeu_ps(kept + 32 * k + 16, *v1);
    }
}
/* Two k a turn, a0/a1 and b0/b1 taking turns as the formed weights, each formed between the
   FMAs of the k before: the loop's own work a k (its counter, the next k's index, its sign
   word's table address, the hand-over a = b) halves, and on Intel's cores the scalar part
   competes with the FMAs for ports 0 and 5. bench/bench_form_kernel (Intel Xeon, 1 thread, in
   cache, copies of 64 rows): one k a turn 142-146 GFLOP/s, two 146-152, BLIS's kernel on an
   unformed panel 162-172; in a probe of this loop alone (11 columns) one k 144-152, two
   156-160, four 148-156, against an FMA loop of 174: two forming FMAs beside 22 cap it at 160. */
__attribute__((target("avx512f"), always_inline)) static inline void grzo__form_ukr_fma_body(const int mode, float *kept,
                                                                                           const int cols,
                                                                                           GRZO__FMA_ARGS) {
    const __mmask16 ha = grzo__rows_mask(h, 0), hb = grzo__rows_mask(h, 1);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0, b1;
    const float *xk;
    int64_t k;
    GRZO__FORM_COLUMNS(GRZO__FORM_PREFETCH)   /* C's tile, its accumulators and stores: grzo__form_ukr_body's */
    GRZO__FORM_COLUMNS(GRZO__FORM_ACC)
    if (kc > 0) grzo__fma_weights(mode, 0, w, u, sw, fs, kept, &a0, &a1);
    for (k = 0; k + 2 <= kc; k += 2) {   /* k + 1's weights formed before k's FMAs */
        const int64_t kn = k + 2 < kc ? k + 2 : k + 1;   /* the last k's again, unused, when kc is even */
        xk = xp + 12 * k;
        GRZO__FORM_HALF1(GRZO__FMA_FMA_A)
        grzo__fma_weights(mode, k + 1, w, u, sw, fs, kept, &b0, &b1);
        GRZO__FORM_HALF2(GRZO__FMA_FMA_A)
        xk = xp + 12 * (k + 1);
        GRZO__FORM_HALF1(GRZO__FMA_FMA_B)
        grzo__fma_weights(mode, kn, w, u, sw, fs, kept, &a0, &a1);
        GRZO__FORM_HALF2(GRZO__FMA_FMA_B)
    }
    if (k < kc) {   /* an odd kc's last k, formed into a0 by the loop (or above) */
        xk = xp + 12 * k;
        GRZO__FORM_COLUMNS(GRZO__FMA_FMA_A)
    }
    GRZO__FORM_COLUMNS(GRZO__FORM_PUT)
}
/* The copy's other X slivers against the weights its first one kept (kept: 32 kc floats, as
   grzo__form_ukr_fma_body stores them; the products in the same order, so the same bits as
   forming again). Nothing to form ahead, so one k a turn: GCC 12 gives this loop 2 loads, the
   broadcasts, the FMAs and 3 integer ops a k, and no register moves; the forming body's
   two-k loop in its kept mode (as it was) carried 6 moves of accumulators and a conditional
   move per two k, and 4 integer ops a k, which on Intel's cores compete with the FMAs for
   ports 0 and 5. `bench/ab_linear.py --rounds 24 -- --op grzo --width 1024 --rows 64
   --batch 16 --copies 16 --calls 8` (Intel Xeon model 207, 1 thread): 0.981-0.993 per-round
   medians (best calls 0.987-0.989); SmolLM2's FFN (576 wide x 1536, bench_llm's prompt
   lengths): 0.992-0.994 (0.988-0.992); per row in `perf record`, the kept kernels of 10 and 11
   rows went from 1.055-1.08 x BLIS's kernel in MeZO's pass of the same rows to 1.01-1.06 (the
   machine's noise). Unrolled by four (`#pragma GCC unroll 4`, free of moves) it measured the
   same; unrolled by two by hand, GCC put the moves back. */
__attribute__((target("avx512f"), always_inline)) static inline void grzo__kept_ukr_body(const int cols, const float *kept,
                                                                                       int64_t kc, const float *xp,
                                                                                       int64_t h, int accumulate,
                                                                                       float *c, int64_t ldc) {
    const __mmask16 ha = grzo__rows_mask(h, 0), hb = grzo__rows_mask(h, 1);
    const float *xk;
    __m512 a0, a1;
    int64_t k;
    GRZO__FORM_COLUMNS(GRZO__FORM_PREFETCH)   /* C's tile, its accumulators and stores: grzo__form_ukr_body's */
    GRZO__FORM_COLUMNS(GRZO__FORM_ACC)
    for (k = 0; k < kc; k++) {
        xk = xp + 12 * k;
        a0 = _mm512_loadu_ps(kept + 32 * k);
        a1 = _mm512_loadu_ps(kept + 32 * k + 16);
        GRZO__FORM_COLUMNS(GRZO__FMA_FMA_A)
    }
    GRZO__FORM_COLUMNS(GRZO__FORM_PUT)
}
#undef GRZO__FMA_FMA
#undef GRZO__FMA_FMA_A
#undef GRZO__FMA_FMA_B
#undef GRZO__FORM_PREFETCH
#undef GRZO__FORM_ACC
#undef GRZO__FORM_PUT
#undef GRZO__FORM_COLUMNS
/* grzo__form_ukr_fma_32xn[n] forms; grzo__form_keep_ukr_32xn[n] forms and keeps the weights
   (kept: 32 kc floats); grzo__kept_ukr_32xn[n] reads them */
#define GRZO__KEPT_ARGS \
    const float *kept, int64_t kc, const float *xp, int64_t h, int accumulate, float *c, int64_t ldc
#define GRZO__FORM_UKR_N(N)                                                                                    \
    __attribute__((target("avx512f"))) static void grzo__form_ukr_fma_32x##N(GRZO__FMA_ARGS) {                 \
        grzo__form_ukr_fma_body(GRZO__FMA_FORM, NULL, N, kc, w, u, sw, fs, xp, h, accumulate, c, ldc);       \
    }                                                                                                          \
    __attribute__((target("avx512f"))) static void grzo__form_keep_ukr_32x##N(float *kept, GRZO__FMA_ARGS) {   \
        grzo__form_ukr_fma_body(GRZO__FMA_FORM_KEEP, kept, N, kc, w, u, sw, fs, xp, h, accumulate, c, ldc);  \
    }                                                                                                          \
    __attribute__((target("avx512f"))) static void grzo__kept_ukr_32x##N(GRZO__KEPT_ARGS) {                    \
        grzo__kept_ukr_body(N, kept, kc, xp, h, accumulate, c, ldc);                                           \
    }
GRZO__EACH_1_TO_12(GRZO__FORM_UKR_N)
#undef GRZO__FORM_UKR_N
typedef void (*grzo__form_ukr_fma_fn)(GRZO__FMA_ARGS);
typedef void (*grzo__keep_ukr_fma_fn)(float *kept, GRZO__FMA_ARGS);
typedef void (*grzo__kept_ukr_fn)(GRZO__KEPT_ARGS);
#define GRZO__FORM_UKR_N(N) grzo__form_ukr_fma_32x##N,
static const grzo__form_ukr_fma_fn grzo__form_ukr_fma_32xn[13] = {NULL, GRZO__EACH_1_TO_12(GRZO__FORM_UKR_N)};
#undef GRZO__FORM_UKR_N
#define GRZO__FORM_UKR_N(N) grzo__form_keep_ukr_32x##N,
static const grzo__keep_ukr_fma_fn grzo__form_keep_ukr_32xn[13] = {NULL, GRZO__EACH_1_TO_12(GRZO__FORM_UKR_N)};
#undef GRZO__FORM_UKR_N
#define GRZO__FORM_UKR_N(N) grzo__kept_ukr_32x##N,
static const grzo__kept_ukr_fn grzo__kept_ukr_32xn[13] = {NULL, GRZO__EACH_1_TO_12(GRZO__FORM_UKR_N)};
#undef GRZO__FORM_UKR_N
#undef GRZO__EACH_1_TO_12
#undef GRZO__FMA_ARGS
#undef GRZO__KEPT_ARGS
#endif

/* A copy of at least GRZO__WIDE_MIN rows formed inside the kernel goes through the 16-row
   kernels where they are chosen (GRZO__FORM_WIDE): its rows packed into slivers of
   GRZO__WIDE_X floats a k (grzo__pack_even_sliver), of near-equal widths (12-24 rows each) */
static int grzo__wide(const grzo__ukr *u, int64_t n_rows) {
    return u->forming == GRZO__FORM_WIDE && n_rows >= GRZO__WIDE_MIN;
}

/* How many slivers of at most `width` rows a copy of n_rows rows packs into */
static int64_t grzo__even_slivers(int64_t n_rows, int64_t width) { return (n_rows + width - 1) / width; }

/* The width of sliver t of n_rows rows split into `slivers` of sizes that differ by at most one
   (the first ones the wider), and its first row in *first */
static int64_t grzo__even_split(int64_t n_rows, int64_t slivers, int64_t t, int64_t *first) {
    int64_t base = n_rows / slivers, extra = n_rows % slivers;
    *first = t * base + (t < extra ? t : extra);
    return base + (t < extra ? 1 : 0);
}

/* Sliver t of a copy's rows (row i at x + i ldx, columns [0, kc)) split into
   grzo__even_slivers of near-equal widths, into out, the first of its slivers, each width x kc
   floats, k-major (zero past a sliver's rows); stage: as grzo__pack_sliver's. The 16-row
   kernels' slivers are GRZO__WIDE_X wide, the FMA-forming kernels' 12. */
static void grzo__pack_even_sliver(const float *x, int64_t ldx, int64_t n_rows, int64_t width, int64_t t, int64_t kc,
                                   float *stage, float *out) {
    int64_t first, n = grzo__even_split(n_rows, grzo__even_slivers(n_rows, width), t, &first);
    grzo__pack_sliver(x + first * ldx, ldx, NULL, n, kc, width, stage, out + t * width * kc);
}

/* A copy formed inside the FMA-forming kernels (GRZO__FORM_FMA): one of 5 rows or more (shorter
   ones keep the 32- and 64-row kernels, whose rows are read in place and which give a copy
   of 2-4 rows more FMA chains), its rows packed 12 wide (5-12 rows a sliver) */
static int grzo__fma_rows(const grzo__ukr *u, int64_t n_rows) { return u->forming == GRZO__FORM_FMA && n_rows >= 5; }

/* How many of a copy's n_rows rows go to the tail set (its last ones). A copy formed inside
   the forming kernel splits its rows into slivers of near-equal widths, nothing padded, so only
   a copy of one row goes (one FMA chain per 16 weight rows would wait on the FMA latency; in
   the tail set it costs 2 rows' FLOPs at the kernel's full rate: `bench_linear --op grzo
   --width 1024 --rows 1 --batch 16`, 1 thread: 0.91 against 1.17 ms). A copy's lone last row
   is cheaper in the split than in the tail set (37 rows: 10.14 against 10.47 ms; 13 rows: 3.83
   against 4.10). BLIS's kernel pads to its whole width: the rows past the copy's whole X
   slivers go when they are fewer than half of it, and none where BLIS's sup kernel takes
   them in place (in_place). */
static int64_t grzo__tail_rows(const grzo__ukr *u, int in_kernel, int in_place, int64_t n_rows) {
    int64_t rem = n_rows % u->xp;
    if (in_place) return 0;
    if (in_kernel) return n_rows == 1 ? 1 : 0;
    return 2 * rem < u->xp ? rem : 0;
}

/* Whether s is +-1 throughout (or NULL: shared Z), as the forming kernel needs; a Gaussian s
   is not, and its copies are formed and stored instead. */
static int grzo__s_is_signs(const float *s, int64_t n) {
    int64_t k;
    int ok = 1;
    for (k = 0; s && k < n; k++) ok &= s[k] == 1.0f || s[k] == -1.0f;   /* no early exit: vectorized */
    return ok;
}

/* s's signs for a K block as the forming kernel's words: all ones where s_k = -1, 0 where
   s_k = +1 or s is NULL. */
static void grzo__s_sign_words(const float *s, int64_t kc, uint32_t *sw) {
    int64_t k;
    for (k = 0; k < kc; k++) sw[k] = s && s[k] < 0.0f ? 0xFFFFFFFFu : 0u;
}

/* Y[copy rows, weight rows j0..j1) (+)= X_c (W + f U)^T for one block, formed inside the
   kernel, in BLIS's loop order: each X sliver of the copy (L1) meets every weight sliver of the
   block (L2). With forming in registers no formed sliver has to be used while it is in L1, so
   an X sliver is read from memory once per block instead of once per weight sliver (SmolLM2's
   2.7 MB of packed rows do not fit L2). wpk, ub: the block's packed W and U bits; f: the
   block's scales (rows j0..j1, zero past the weight); sw: the copy's s signs; the copy's rows
   read in place, row i at x + i ldx.
   The rows are split into the fewest slivers of at most 12, of sizes that differ by at most
   one: 64 rows as 11, 11, 11, 11, 10, 10 rather than 5 x 12 and 4. Every sliver forms the
   weight once, so the forming work is the same either way, but a short last sliver ran below
   the kernel's rate (`bench_linear --op grzo --width 1024 --batch 16`, GRZO / plain: 1.023 at
   64 rows, 1.008 at 60, 1.007 at 72). A copy of 2-4 rows meets two weight slivers at once.
   With xpk (the copy's rows packed by grzo__pack_even_sliver, for grzo__wide copies) each wide X
   sliver meets every weight sliver's two halves through the 16-row kernels instead. */
static void grzo__form_ukr_block(const grzo__ukr *u, const float *wpk, const uint32_t *ub, const uint32_t *sw,
                                 const float *f, int64_t j0, int64_t j1, const float *x, int64_t ldx, const float *xpk,
                                 int64_t n_rows, int64_t kc, int accumulate, float *y, int64_t ldy) {
#ifdef GRZO__FORM_UKR
    int64_t p, q, stride = grzo__bits_stride(kc), slivers = (n_rows + u->xp - 1) / u->xp, t;
    if (xpk) {
        slivers = grzo__even_slivers(n_rows, GRZO__WIDE_X);
        for (t = 0; t < slivers; t++) {
            int64_t n = grzo__even_split(n_rows, slivers, t, &p), half;
            for (q = j0; q < j1; q += u->wp)
                for (half = 0; half < 2 && 16 * half < j1 - q; half++) {
                    int64_t h = j1 - q - 16 * half < 16 ? j1 - q - 16 * half : 16;
                    grzo__form_ukr_16xn[n](kc, wpk + (q - j0) * kc, ub + (q - j0) / u->wp * stride, (int)half, sw,
                                           f + (q - j0), xpk + t * GRZO__WIDE_X * kc, h, accumulate,
                                           y + p * ldy + q + 16 * half, ldy);
                }
        }
        return;
    }
    for (t = 0; t < slivers; t++) {
        int64_t n = grzo__even_split(n_rows, slivers, t, &p);
        const float *xs = x + p * ldx;
        for (q = j0; q < j1; q += u->wp) {
            int64_t h = j1 - q < u->wp ? j1 - q : u->wp, s = (q - j0) / u->wp;
            const float *w = wpk + (q - j0) * kc, *fq = f + (q - j0);
            const uint32_t *uq = ub + s * stride;
            float *c = y + p * ldy + q;
            if (n <= 4 && j1 - q > u->wp) {   /* two slivers at once */
                int64_t h2 = j1 - q - u->wp < u->wp ? j1 - q - u->wp : u->wp;
                grzo__form_ukr_64xn[n](kc, w, w + u->wp * kc, uq, uq + stride, sw, fq, xs, ldx, h2, accumulate, c, ldy);
                q += u->wp;
                continue;
            }
            grzo__form_ukr_32xn[n](kc, w, uq, sw, fq, xs, ldx, h, accumulate, c, ldy);
        }
    }
#else
    (void)u, (void)wpk, (void)ub, (void)sw, (void)f, (void)j0, (void)j1, (void)x, (void)ldx, (void)xpk, (void)n_rows;
    (void)kc, (void)accumulate, (void)y, (void)ldy;
#endif
}

/* grzo__form_ukr_block for a copy packed 12 wide by grzo__pack_even_sliver (xpk) through the
   FMA-forming kernels: each of its X slivers against every weight sliver of the block. upk:
   the block's U as floats (grzo__unpack_u_bits); fsel: per weight sliver of the block, its 32
   scales f then their negations (grzo__fma_scales). The first X sliver forms the copy's
   weights and keeps them (kept: the block's rows x kc floats), the others read them: one
   forming FMA beside every 22 on the first sliver only, and the kept weights, one stream from
   L2, in place of W and U, two. bench/bench_form_kernel (Intel Xeon, 1 thread, copies of 64
   rows in 6 slivers), time a FLOP against BLIS's kernel on an unformed panel, two quiet runs:
   forming in every sliver 1.12-1.13 in cache and 1.10-1.13 in place, forming in the first
   1.03-1.05 and 1.01-1.04. The products are the same bits either way. */
static void grzo__form_fma_block(const float *wpk, const float *upk, const uint32_t *sw, const float *fsel, float *kept,
                                 int64_t j0, int64_t j1, const float *xpk, int64_t n_rows, int64_t kc, int accumulate,
                                 float *y, int64_t ldy) {
#ifdef GRZO__FORM_UKR
    int64_t p, q, t, slivers = grzo__even_slivers(n_rows, 12);
    for (t = 0; t < slivers; t++) {
        int64_t n = grzo__even_split(n_rows, slivers, t, &p);
        for (q = j0; q < j1; q += 32) {
            int64_t h = j1 - q < 32 ? j1 - q : 32, off = (q - j0) * kc;
            const float *wq = wpk + off, *uq = upk + off, *fq = fsel + (q - j0) * 2, *xt = xpk + t * 12 * kc;
            float *yq = y + p * ldy + q;
            if (slivers == 1)
                grzo__form_ukr_fma_32xn[n](kc, wq, uq, sw, fq, xt, h, accumulate, yq, ldy);
            else if (t == 0)
                grzo__form_keep_ukr_32xn[n](kept + off, kc, wq, uq, sw, fq, xt, h, accumulate, yq, ldy);
            else
                grzo__kept_ukr_32xn[n](kept + off, kc, xt, h, accumulate, yq, ldy);
        }
    }
#else
    (void)wpk, (void)upk, (void)sw, (void)fsel, (void)kept, (void)j0, (void)j1, (void)xpk, (void)n_rows, (void)kc;
    (void)accumulate, (void)y, (void)ldy;
#endif
}

/* The FMA-forming kernels' scales for a block of n_slivers 32-row slivers: sliver q's f
   (fblk + 32 q) at fsel + 64 q, its negations (0 - f, as grzo__form_ukr_body's) after them */
static void grzo__fma_scales(const float *fblk, int64_t n_slivers, float *fsel) {
    int64_t q, i;
    for (q = 0; q < n_slivers; q++)
        for (i = 0; i < 32; i++) {
            fsel[64 * q + i] = fblk[32 * q + i];
            fsel[64 * q + 32 + i] = 0.0f - fblk[32 * q + i];
        }
}

/* A copy's last rows, fewer than half an X sliver, cost a whole sliver through the formed
   weight (the kernel pads them to its width). They go to the tail set instead: the tail rows
   of every copy, packed together, meet the shared W and U panels (per K block, T_w = X_t W^T
   and T_u = (X_t (.) s) U^T, then y (+)= t_w + (scale r_j) t_u), twice the FLOPs of their own
   rows but no padding per copy, and no scratch beyond a block's products. A single-copy op
   keeps all its rows; of the copies formed inside the forming kernel only those of one row
   go (grzo__tail_rows). */
static void grzo__fused_split_tails(const grzo__ukr *u, grzo__fused_copy *cp, int64_t n_copies, int64_t *n_tail) {
    int64_t c, t = 0;
    for (c = 0; c < n_copies; c++) {
        cp[c].n_main = cp[c].n_rows;
        cp[c].tail0 = t;
        if (n_copies > 1) {
            int64_t tail = grzo__tail_rows(u, cp[c].in_kernel, cp[c].in_place, cp[c].n_rows);
            cp[c].n_main = cp[c].n_rows - tail;
            t += tail;
        }
    }
    *n_tail = t;
}

/* Copy c's tail rows, columns [k0, k0 + kc) of X, row-major into the tail set's rows:
   plain (rows) and times the copy's s (rows_s; exact: s = +-1). */
static void grzo__fused_stage_tails(const float *X, int64_t d_in, const grzo__fused_copy *cp, int64_t k0, int64_t kc,
                                    float *rows, float *rows_s) {
    int64_t i, k;
    for (i = cp->n_main; i < cp->n_rows; i++) {
        const float *x = X + (cp->row0 + i) * d_in + k0;
        float *o = rows + (cp->tail0 + i - cp->n_main) * kc, *os = rows_s + (cp->tail0 + i - cp->n_main) * kc;
        memcpy(o, x, (size_t)kc * sizeof(float));
        for (k = 0; k < kc; k++) os[k] = cp->s ? x[k] * cp->s[k0 + k] : x[k];
    }
}

/* Adds one K block of the tail rows into Y, columns [j0, j1): y (+)= t_w + (scale r_j) t_u,
   t_w and t_u the block's X_t W^T and (X_t (.) s) U^T (ld ldt, column j at j - j0). */
static void grzo__fused_add_tails(const grzo__fused_copy *cp, int64_t n_copies, int64_t j0, int64_t j1, const float *tw,
                                  const float *tt, int64_t ldt, int accumulate, float *y, int64_t d_out) {
    int64_t c, i, j;
    for (c = 0; c < n_copies; c++)
        for (i = cp[c].n_main; i < cp[c].n_rows; i++) {
            int64_t t = cp[c].tail0 + i - cp[c].n_main;
            const float *a = tw + t * ldt, *b = tt + t * ldt;
            float *o = y + (cp[c].row0 + i) * d_out;
            for (j = j0; j < j1; j++) {
                float v = a[j - j0] + (cp[c].r ? cp[c].scale * cp[c].r[j] : cp[c].scale) * b[j - j0];
                o[j] = accumulate ? o[j] + v : v;
            }
        }
}

/* One in-kernel copy's product for a block of weight rows [j0, j1) and a K block [k0, k0 + kc),
   into its rows of Y (accumulated past the first K block): through the FMA-forming kernels,
   its scales fblk tabled into fsel first, or through the others. wpk, upk, ub: the block's
   packed W, U as floats and U's bits; sw: the copy's s sign words; xpack: the packed rows. */
static void grzo__form_copy_block(const grzo__ukr *u, const grzo__fused_copy *c, const grzo_linear_args *a, int64_t k0,
                                  int64_t kc, int64_t j0, int64_t j1, const float *wpk, const float *upk,
                                  const uint32_t *ub, const uint32_t *sw, const float *fblk, float *fsel,
                                  float *kept, const float *xpack) {
    int64_t d_in = a->w.cols, d_out = a->w.rows;
    if (c->n_main == 0) return;
    if (c->fma) {
        grzo__fma_scales(fblk, (j1 - j0 + u->wp - 1) / u->wp, fsel);
        grzo__form_fma_block(wpk, upk, sw, fsel, kept, j0, j1, xpack + c->x_off, c->n_main, kc, k0 > 0,
                             a->y + c->row0 * d_out, d_out);
    } else
        grzo__form_ukr_block(u, wpk, ub, sw, fblk, j0, j1, a->x + c->row0 * d_in + k0, d_in,
                             c->wide ? xpack + c->x_off : NULL, c->n_main, kc, k0 > 0, a->y + c->row0 * d_out, d_out);
}

/* How many X slivers a copy packs per K block: its wide slivers, none for a copy whose rows
   the forming kernel reads in place, only its whole ones where the rest go to BLIS's sup
   kernel (in_place), else BLIS's slivers of its main rows */
static int64_t grzo__x_slivers(const grzo__ukr *u, const grzo__fused_copy *c) {
    return c->wide ? grzo__even_slivers(c->n_main, GRZO__WIDE_X) : c->in_kernel && !c->fma ? 0
                   : c->in_place ? c->n_main / u->xp : grzo__even_slivers(c->n_main, u->xp);
}

/* The kept area of a multi-copy op: every piece from a 64-byte line. */
typedef struct grzo__fused_kept {
    float *xpack;             /* the copies' packed X slivers */
    uint32_t *sws;            /* the in-kernel copies' s sign words */
    float *tbuf;              /* the threads' buffers (grzo__fused_tbuf) */
    float *trows, *xt, *xs;   /* the tail set: its rows staged, plain and times s; their slivers */
} grzo__fused_kept;

/* Carves the kept area (base, `limit` floats; a NULL base only counts) and returns the floats
   it takes. */
static int64_t grzo__fused_kept_carve(float *base, int64_t limit, int64_t x_elems, int64_t n_sw, int64_t tbuf_elems,
                                      int64_t tail_rows_elems, int64_t tail_elems, grzo__fused_kept *kp) {
    grzo__carve c = grzo__carve_begin(base, limit, 16);
    kp->xpack = grzo__carve_take(&c, x_elems);
    kp->sws = (uint32_t *)grzo__carve_take(&c, n_sw);   /* words the size of floats */
    kp->tbuf = grzo__carve_take(&c, tbuf_elems);
    kp->trows = grzo__carve_take(&c, 2 * tail_rows_elems);
    kp->xt = grzo__carve_take(&c, tail_elems);
    kp->xs = grzo__carve_take(&c, tail_elems);
    grzo__carve_end(&c);
    return c.used;
}

/* A thread's buffer in one K block of kc. */
typedef struct grzo__fused_tbuf {
    float *wpk, *upk;         /* packed W and U of a block */
    float *formed, *formed2;  /* a copy's and its mirror's formed sliver */
    float *row, *f, *fblk;    /* one sliver's U rows, the f vector and the block's */
    uint32_t *ub;             /* the block's U bits */
    float *tw, *tt;           /* the tail set's two products */
    float *fsel, *kept;       /* the FMA-forming kernels' scales and the block's weights they keep */
} grzo__fused_tbuf;

/* Carves a thread's buffer (base, `limit` floats; a NULL base only counts) for a K block of kc
   and returns the floats it takes. */
static int64_t grzo__fused_tbuf_carve(float *base, int64_t limit, const grzo__ukr *u, int64_t per_block, int64_t kc,
                                      int64_t n_tail, int any_fma, grzo__fused_tbuf *tb) {
    grzo__carve c = grzo__carve_begin(base, limit, 1);
    int64_t block = per_block * u->wp;
    tb->wpk = grzo__carve_take(&c, block * kc);
    tb->upk = grzo__carve_take(&c, block * kc);
    tb->formed = grzo__carve_take(&c, u->wp * kc);
    tb->formed2 = grzo__carve_take(&c, u->wp * kc);
    tb->row = grzo__carve_take(&c, u->wp * kc);
    tb->f = grzo__carve_take(&c, u->wp);
    tb->fblk = grzo__carve_take(&c, block);
    tb->ub = (uint32_t *)grzo__carve_take(&c, per_block * grzo__bits_stride(kc));   /* words the size of floats */
    tb->tw = grzo__carve_take(&c, n_tail * block);
    tb->tt = grzo__carve_take(&c, n_tail * block);
    tb->fsel = grzo__carve_take(&c, 2 * block);
    tb->kept = grzo__carve_take(&c, any_fma ? block * kc : 0);
    grzo__carve_end(&c);
    return c.used;
}

/* A thread's buffer as the packers' stage of `n` floats (the pieces of a block are carved anew
   after the packing). */
static float *grzo__fused_stage(float *base, int64_t limit, int64_t n) {
    grzo__carve c = grzo__carve_begin(base, limit, 1);
    float *stage = grzo__carve_take(&c, n);
    grzo__carve_end(&c);
    return stage;
}

/* The K block of a multi-copy op: the fewest blocks of at most 1.5 KC, of equal size (a
   multiple of 8, the packer's tile). Every K block re-reads and re-writes all the copies' Y
   tiles, scattered over Y, and Y outgrows L2 at a model's shapes (SmolLM2's 1160 rows x 1536:
   7 MB); one block instead of two at 576 wide saved 9 % of a GRZO linear 1536x576 at 1 thread
   and 7 % at 2 (bench_linear --lengths of bench_llm's prompts). A single-copy op (MeZO/FZOO)
   keeps BLIS's KC where a core's L2 is under 2 MiB: its one formed block meets every row while
   it is in L2, and the longer block slowed its 576x576 pass at 2 threads by 13 % (AMD, 1 MiB).
   With 2 MiB (an Intel Xeon, model 207) the longer block is the faster one: bench/ab_linear.py,
   `--op mezo --lengths` of bench_llm's prompts, 16 rounds, per-round medians (best calls)
   on 1 thread; 2: 576 x 576 0.942 (0.928); 0.920 (0.943), 576 wide x 1536 0.962 (0.949);
   0.942 (0.936), 1536 wide x 576 0.985 (0.985); 0.989 (0.961). */
static int64_t grzo__copies_kc(int64_t kc, int64_t d_in) {
    int64_t most = kc * 3 / 2, n = (d_in + most - 1) / most, even = (d_in + n - 1) / n;
    even = (even + 7) / 8 * 8;
    return even < d_in ? even : d_in;
}

/* The fused perturbed linear over n_copies copies. R, S: the B examples' sign vectors
   (flipout) or NULL. */
static grzo_status grzo__cpu_linear_fused(grzo__cpu *cpu, const grzo_linear_args *a, const grzo__fused_copy *copies,
                                          int64_t n_copies) {
    const grzo__ukr *u = cpu->ukr;
    const grzo_perturb *pt = a->perturb;
    const float *W = (const float *)a->w.data;
    int64_t d_out = a->w.rows, d_in = a->w.cols, x_elems = 0, n_sw = 0, c, k0, job, n_x, max_jobs = 1;
    int64_t kc_max = n_copies > 1 || u->long_single_kc ? grzo__copies_kc(u->kc, d_in) : u->kc < d_in ? u->kc : d_in;
    int64_t n_slivers = (d_out + u->wp - 1) / u->wp, per_block, n_blocks, blk, n_tail, tail_slivers, tail_elems, *mate;
    int nt = cpu->n_threads, bits = pt->base.dist != GRZO_NOISE_GAUSSIAN && u->wp <= GRZO__BIT_SLIVER_MAX, any_fma = 0;
    grzo__cpu_scratch sc = {{0}, 0};
    grzo__fused_copy *cp = (grzo__fused_copy *)grzo__cpu_take(&sc, (size_t)n_copies * sizeof *cp);
    float *xpack, *tbuf, *trows, *xt, *xs;
    uint32_t *sws;   /* the in-kernel copies' s sign words for a K block */
    size_t t_elems;
    if (!cp) return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed");
    memcpy(cp, copies, (size_t)n_copies * sizeof *cp);
    for (c = 0; c < n_copies; c++) {
        cp[c].in_kernel = n_copies > 1 && bits && u->form_in_kernel && grzo__s_is_signs(cp[c].s, d_in);
        cp[c].in_place = n_copies > 1 && !cp[c].in_kernel && u->sup;
        cp[c].wide = cp[c].fma = 0;   /* set once the tails are split off */
        cp[c].sw_off = n_sw;
        if (cp[c].in_kernel) n_sw += kc_max;
    }
    grzo__fused_split_tails(u, cp, n_copies, &n_tail);
    mate = (int64_t *)grzo__cpu_take(&sc, (size_t)n_copies * sizeof *mate);
    if (!mate) { grzo__cpu_release(&sc); return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed"); }
    grzo__fused_pair_mirrors(cp, n_copies, mate);
    for (c = 0; c < n_copies; c++) {
        cp[c].fma = cp[c].in_kernel && grzo__fma_rows(u, cp[c].n_main);
        cp[c].wide = cp[c].in_kernel && grzo__wide(u, cp[c].n_main);
        any_fma |= cp[c].fma;
        cp[c].x_off = x_elems;
        /* packed X slivers; the rows of an in-kernel copy too short for the wide kernels are
           read in place */
        n_x = grzo__x_slivers(u, &cp[c]);
        x_elems += n_x * (cp[c].wide ? GRZO__WIDE_X : u->xp) * kc_max;
        if (n_x > max_jobs) max_jobs = n_x;   /* a job per X sliver (at least one per copy) */
    }
    tail_slivers = (n_tail + u->xp - 1) / u->xp;
    tail_elems = tail_slivers * u->xp * kc_max;
    /* weight-row blocks: whole slivers, about u->mc rows, a multiple of the thread count,
       slivers split evenly between them, so that the threads get equal shares */
    per_block = u->mc / u->wp;
    n_blocks = (n_slivers + per_block - 1) / per_block;
    if (nt > 1) n_blocks = (n_blocks + nt - 1) / nt * nt;
    if (n_blocks > n_slivers) n_blocks = n_slivers;
    per_block = (n_slivers + n_blocks - 1) / n_blocks;   /* the largest block: slivers are split evenly */
    {   /* a thread's buffer at the largest K block (grzo__fused_tbuf), whole 64-byte lines */
        grzo__fused_tbuf tb;
        t_elems = (size_t)(grzo__fused_tbuf_carve(NULL, 0, u, per_block, kc_max, n_tail, any_fma, &tb) + 15) / 16 * 16;
    }
    {   /* the packed rows, the copies' sign words, the threads' buffers, the tail set: kept */
        grzo__fused_kept kp;
        int64_t limit, n = grzo__fused_kept_carve(NULL, 0, x_elems, n_sw, nt * (int64_t)t_elems, n_tail * kc_max, tail_elems,
                                                  &kp);
        float *kept = grzo__cpu_kept(cpu, n, &limit);
        if (!kept) {
            grzo__cpu_release(&sc);
            return grzo__cpu_fail(cpu, GRZO_ERR_OUT_OF_MEMORY, "linear: scratch allocation failed");
        }
        grzo__fused_kept_carve(kept, limit, x_elems, n_sw, nt * (int64_t)t_elems, n_tail * kc_max, tail_elems, &kp);
        xpack = kp.xpack, sws = kp.sws, tbuf = kp.tbuf, trows = kp.trows, xt = kp.xt, xs = kp.xs;
    }
    for (k0 = 0; k0 < d_in; k0 += kc_max) {
        int64_t kc = d_in - k0 < kc_max ? d_in - k0 : kc_max;
        float beta = k0 == 0 ? 0.0f : 1.0f;
        /* job t of copy i: its X sliver t; job 0 also stages its tail rows and s signs. Split by
           sliver, not by copy, so that a single copy's rows (a MeZO pass) are packed by all
           the threads, not one while the others wait (SmolLM2's MeZO step at 2 threads) */
        GRZO__OMP_FOR_DYNAMIC
        for (job = 0; job < n_copies * max_jobs; job++) {
            int64_t i = job / max_jobs, t = job % max_jobs, own = grzo__x_slivers(u, &cp[i]);
            const grzo__fused_copy *ci = &cp[i];
            float *stage = d_in % 1024 == 0   /* activations: cached */
                ? grzo__fused_stage(tbuf + (size_t)grzo__cpu_thread() * t_elems, (int64_t)t_elems,
                                    (ci->wide ? GRZO__WIDE_X : u->xp) * kc) : NULL;
            if (t < own && (ci->wide || ci->fma))
                grzo__pack_even_sliver(a->x + ci->row0 * d_in + k0, d_in, ci->n_main, ci->wide ? GRZO__WIDE_X : u->xp, t,
                                       kc, stage, xpack + ci->x_off);
            else if (t < own)
                grzo__pack_rows_sliver(a->x, d_in, ci->row0, ci->n_main, t, k0, kc, u->xp, stage, xpack + ci->x_off);
            if (t != 0) continue;
            if (n_tail > 0) grzo__fused_stage_tails(a->x, d_in, ci, k0, kc, trows, trows + n_tail * kc);
            if (ci->in_kernel && mate[i] != -2)   /* a mirror reads its mate's (the same s) */
                grzo__s_sign_words(ci->s ? ci->s + k0 : NULL, kc, sws + ci->sw_off);
        }
        GRZO__OMP_FOR   /* the tail set's X slivers, plain and times s */
        for (c = 0; c < 2 * tail_slivers; c++) {
            int64_t q = c % tail_slivers * u->xp;
            grzo__pack_sliver(trows + (c / tail_slivers) * n_tail * kc + q * kc, kc, NULL,
                              n_tail - q < u->xp ? n_tail - q : u->xp, kc, u->xp, NULL, (c < tail_slivers ? xt : xs) + q * kc);
        }
        GRZO__OMP_FOR_DYNAMIC
        for (blk = 0; blk < n_blocks; blk++) {
            int64_t s0 = blk * n_slivers / n_blocks, s1 = (blk + 1) * n_slivers / n_blocks;
            int64_t j0 = s0 * u->wp, j1 = s1 * u->wp > d_out ? d_out : s1 * u->wp, q, i, cc;
            grzo__fused_tbuf tb;
            float *wpk, *upk, *formed, *formed2, *row, *f, *fblk, *tw, *tt, *fsel, *kept;
            uint32_t *ub;
            if (j0 >= j1) continue;
            grzo__fused_tbuf_carve(tbuf + (size_t)grzo__cpu_thread() * t_elems, (int64_t)t_elems, u, per_block, kc, n_tail,
                                   any_fma, &tb);
            wpk = tb.wpk, upk = tb.upk, formed = tb.formed, formed2 = tb.formed2, row = tb.row, f = tb.f, fblk = tb.fblk;
            ub = tb.ub, tw = tb.tw, tt = tb.tt, fsel = tb.fsel, kept = tb.kept;
            if (n_copies == 1) {
                if (cp[0].n_rows == 0) continue;
                /* the whole formed block, where packed U would be (wpk: the staged W rows) */
                grzo__form_block_direct(W, d_in, &pt->base, &cp[0], j0, j1, k0, kc, u->wp, row, f, wpk, upk);
                grzo__ukr_block(u, upk, j0, j1, xpack + cp[0].x_off, cp[0].n_rows, kc, beta, a->y + cp[0].row0 * d_out,
                                d_out, 0);
                continue;
            }
            grzo__pack_rows(W, d_in, j0, j1 - j0, k0, kc, u->wp, row, wpk);
            if (!bits)
                grzo__pack_u(&pt->base, d_in, j0, j1 - j0, k0, kc, u->wp, row, upk);
            else {
                grzo__pack_u_bits(&pt->base, d_in, j0, j1 - j0, k0, kc, u->wp, ub);
                if (n_tail > 0 || any_fma) grzo__unpack_u_bits(ub, j1 - j0, kc, u->wp, upk);
            }
            for (cc = 0; cc < n_copies; cc++) {
                /* an example's "+" and "-" copies are formed together, from one load of W and U;
                   each formed sliver meets the copy's X slivers at once, while it is in L1 */
                const grzo__fused_copy *cq = &cp[cc], *mq = mate[cc] >= 0 ? &cp[mate[cc]] : NULL;
                if (mate[cc] == -2 || (cq->n_main == 0 && (!mq || mq->n_main == 0))) continue;
                if (cq->in_kernel) {   /* the mirror (same s) has f -> -f: w + (-f) is w - f, bit for bit */
                    const uint32_t *sw = sws + cq->sw_off;
                    for (i = 0; i < (s1 - s0) * u->wp; i++)   /* f = 0 past the weight's rows, as below */
                        fblk[i] = j0 + i >= j1 ? 0.0f : cq->r ? cq->scale * cq->r[j0 + i] : cq->scale;
                    grzo__form_copy_block(u, cq, a, k0, kc, j0, j1, wpk, upk, ub, sw, fblk, fsel, kept, xpack);
                    if (mq && mq->n_main > 0) {
                        for (i = 0; i < (s1 - s0) * u->wp; i++) fblk[i] = -fblk[i];
                        grzo__form_copy_block(u, mq, a, k0, kc, j0, j1, wpk, upk, ub, sw, fblk, fsel, kept, xpack);
                    }
                    continue;
                }
                for (q = j0; q < j1; q += u->wp) {
                    int64_t h = j1 - q < u->wp ? j1 - q : u->wp, off = (q - j0) * kc;
                    /* rows past the weight's: f = 0, so that their formed values are 0 with
                       either U (packed as 0, or as bits that say +1) */
                    for (i = 0; i < u->wp; i++) f[i] = i >= h ? 0.0f : cq->r ? cq->scale * cq->r[q + i] : cq->scale;
                    if (bits)
                        grzo__form_sliver_bits(wpk + off, ub + (q - j0) / u->wp * grzo__bits_stride(kc), f,
                                               cq->s ? cq->s + k0 : NULL, kc, u->wp, formed, mq ? formed2 : NULL);
                    else
                        grzo__form_sliver(wpk + off, upk + off, f, cq->s ? cq->s + k0 : NULL, kc, u->wp, formed,
                                          mq ? formed2 : NULL);
                    grzo__copy_times_sliver(u, cq, a, formed, q, h, k0, kc, beta, xpack);
                    if (mq) grzo__copy_times_sliver(u, mq, a, formed2, q, h, k0, kc, beta, xpack);
                }
            }
            if (n_tail > 0) {   /* the tail set against the shared panels, added into Y */
                grzo__ukr_block(u, wpk, j0, j1, xt, n_tail, kc, 0.0f, tw, per_block * u->wp, j0);
                grzo__ukr_block(u, upk, j0, j1, xs, n_tail, kc, 0.0f, tt, per_block * u->wp, j0);
                grzo__fused_add_tails(cp, n_copies, j0, j1, tw, tt, per_block * u->wp, k0 > 0, a->y, d_out);
            }
        }
    }
    grzo__cpu_release(&sc);
    return GRZO_OK;
}

#endif /* GRZO_CPU_FUSED__IMPLEMENTED */
