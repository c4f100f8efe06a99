/* test_fused.c - the CPU backend's fused perturbed GEMM (GRZO_CPU_LINEAR_FUSED, BLIS's
   micro-kernel) against today's per-example path and an exact reference, on shapes that
   cross every blocking edge: d_in spanning several KC blocks with a ragged last one, d_out
   not a multiple of the sliver widths, copies of 0, 1, 5, 13 and 37 rows, sign-0 segments,
   flipout and shared Z ("+" and "-" copies formed together, and one without its mirror),
   Rademacher U (formed from its sign bits) and Gaussian U (from floats); and the pieces
   bit for bit: the packer, the former, the kernels that form while they multiply (against
   forming, then BLIS's kernel; the FMA-forming one that Intel's CPUs run too, wherever
   AVX-512 is), U's bits against grzo_noise_at; and the fused path's bits with either choice
   of forming kernels.

   The formed weight w' = w + (scale r_j s_k) u is bit-identical in both paths, so they
   differ only in the order of the K-sum; a copy's tail rows (fewer than half an X sliver)
   are computed as x W^T + (scale r_j) (x (.) s) U^T instead, two sums and two more roundings.
   With eps = 2^-24 and mag = sum_k |x_k| (|w_jk| + |scale r_j s_k u_jk|) >= sum_k |x_k| |w'_jk|:
       |y_fused - y_exact| <= (K + 2) eps mag,   |y_fused - y_per_example| <= 2 (K + 2) eps mag.
   The fused result must also be bit-identical at 1 and 2 threads.
   With --blis-haswell it runs BLIS's haswell configuration instead of the CPU's own (6 x 16:
   the X rows are operand A, 16-wide weight slivers, one 16-bit half of U's words), so that an
   AVX-512 machine also tests the layout AVX2 machines get. With --bad-blis-env (run with
   BLIS_ARCH_TYPE naming a configuration BLIS lacks, which makes BLIS abort the process) the
   backend must not call BLIS: it reports the fused path off with a warning naming the
   variable, and a perturbed linear still runs (the per-example path). With --old-openblas (run
   with OPENBLAS_CORETYPE=Prescott, kept by GRZO_KERNEL_ENV_SET=1) the warning and
   grzo_cpu_kernel_env name OpenBLAS's remedy. Built with -DGRZO__PACK_SCALAR
   (test_fused_scalar_pack) it runs the scalar packing of compilers without GCC's vectors.
   Skips (77) when the build has no BLIS or BLIS has no kernel for this CPU (or, with
   --blis-haswell, the CPU has no AVX2 and FMA). */
#define _POSIX_C_SOURCE 200809L   /* cpu_env.h: setenv, execv */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"
#include "../examples/common/cpu_env.h"

static int64_t d_in_case = 1000;   /* D_IN: 1000, then 2048 (rows of 1024 floats and more are staged) */
#define D_IN d_in_case
#define D_OUT 75
#define N_SEG 8

/* layout 0: seven copies (the packed-panel path); layout 1: shared Z, one run of one sign,
   i.e. one copy (the path that forms straight from W, as in a MeZO pass); flipout, one
   example's "+" and "-" copies; layout 2: "+" copies of tail rows only (1, 4 and 3 rows, and
   an empty one) paired with long "-" mirrors (13, 37), so that a pair's first copy has no
   rows of its own in the formed weight while its mirror does; layout 3: one segment alone
   (one copy, flipout too: the single-copy path with the example's s over several K blocks) */
#define N_LAYOUTS 4
static const int64_t seg_rows[N_LAYOUTS][N_SEG] = { { 13, 37, 0, 1, 5, 13, 37, 9 }, { 13, 37, 5, 1, 13, 37, 5, 1 },
                                                    { 1, 4, 0, 3, 13, 37, 2, 6 }, { 37 } };
static const int8_t seg_sign[N_LAYOUTS][N_SEG] = { { 1, 1, 1, -1, -1, -1, 0, 1 }, { -1, -1, -1, -1, -1, -1, -1, -1 },
                                                   { 1, 1, 1, 1, -1, -1, -1, -1 }, { 1 } };
static const int64_t seg_example[N_LAYOUTS][N_SEG] = { { 0, 1, 2, 0, 1, 2, 0, 3 }, { 0, 0, 0, 0, 0, 0, 0, 0 },
                                                       { 0, 1, 2, 3, 0, 1, 2, 3 }, { 2 } };

static void run_linear_forming(grzo_cpu_linear_algo algo, int threads, int forming, const grzo_linear_args *a0, float *y);
static void run_linear(grzo_cpu_linear_algo algo, int threads, const grzo_linear_args *a0, float *y)
{
    run_linear_forming(algo, threads, -1, a0, y);
}

/* forming GRZO__FORM_SLIVERS, _WIDE or _FMA: the fused path's choice of forming kernels set so
   (where the forming kernels run), -1: the backend's own */
static void run_linear_forming(grzo_cpu_linear_algo algo, int threads, int forming, const grzo_linear_args *a0, float *y)
{
    grzo_backend be;
    grzo_cpu_desc cd;
    grzo_linear_args a = *a0;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = threads;
    cd.linear_algo = algo;
    REQUIRE(grzo_backend_cpu_create(&cd, &be) == GRZO_OK);
#ifdef GRZO_USE_BLIS
    if (forming >= 0 && ((grzo__cpu *)be.self)->ukr && ((grzo__cpu *)be.self)->ukr->form_in_kernel)
        ((grzo__cpu *)be.self)->ukr->forming = forming;
#else
    (void)forming;
#endif
    a.y = y;
    CHECK(be.iface->linear(be.self, &a) == GRZO_OK);
    grzo_backend_destroy(&be);
}

/* the formed weight element exactly as both paths compute it, in float; *pert = its
   perturbation term */
static float formed(const float *W, const grzo_perturb *pt, int64_t c, int64_t j, int64_t k, float *pert)
{
    float scale = (float)pt->sign[c] * pt->sigma, u = grzo_noise_at(&pt->base, (uint64_t)(j * D_IN + k));
    *pert = 0.0f;
    if (pt->sign[c] == 0) return W[j * D_IN + k];
    if (pt->flipout) {
        grzo_noise r = grzo__sign_noise(&pt->base, GRZO_STREAM_SIGN_R), s = grzo__sign_noise(&pt->base, GRZO_STREAM_SIGN_S);
        float f = scale * grzo_noise_at(&r, (uint64_t)(pt->example[c] * D_OUT + j));
        *pert = f * (u * grzo_noise_at(&s, (uint64_t)(pt->example[c] * D_IN + k)));
        return W[j * D_IN + k] + *pert;
    }
    *pert = scale * u;
    return W[j * D_IN + k] + scale * u;
}

/* a perturbed linear's arguments: W (d_out x D_IN) times the n_rows rows of X */
static grzo_linear_args linear_args(float *W, int64_t d_out, const float *X, int64_t n_rows, const grzo_perturb *pt)
{
    grzo_linear_args a;
    memset(&a, 0, sizeof a);
    a.w.data = W;
    a.w.kind = GRZO_BLOCK_MATRIX;
    a.w.dtype = GRZO_DTYPE_F32;
    a.w.rows = d_out;
    a.w.cols = D_IN;
    a.x = X;
    a.n_rows = n_rows;
    a.perturb = pt;
    return a;
}

static void check_case(int layout, int flipout, uint32_t dist)
{
    int64_t off[N_SEG + 1], n_rows = 0, c, n, j, k;
    float *W, *X, *y1, *y2, *ype, *wp, *pp;
    grzo_perturb pt;
    grzo_linear_args a;
    double worst = 0.0;
    int n_seg = layout == 1 && flipout ? 2 : layout == 3 ? 1 : N_SEG;   /* flipout, layout 1: one example's "+" and "-" */
    for (c = 0; c < n_seg; c++) { off[c] = n_rows; n_rows += layout == 1 && flipout ? 4 * seg_rows[layout][4 * c] : seg_rows[layout][c]; }
    off[n_seg] = n_rows;
    W = (float *)malloc(sizeof(float) * D_OUT * D_IN);
    X = (float *)malloc(sizeof(float) * (size_t)(n_rows * D_IN));
    wp = (float *)malloc(sizeof(float) * D_IN);
    pp = (float *)malloc(sizeof(float) * D_IN);
    y1 = (float *)malloc(sizeof(float) * (size_t)(n_rows * D_OUT));
    y2 = (float *)malloc(sizeof(float) * (size_t)(n_rows * D_OUT));
    ype = (float *)malloc(sizeof(float) * (size_t)(n_rows * D_OUT));
    REQUIRE(W && X && wp && pp && y1 && y2 && ype);
    tu_fill_unif(W, (size_t)(D_OUT * D_IN), 11, -0.05f, 0.05f);
    tu_fill_unif(X, (size_t)(n_rows * D_IN), 12, -1.0f, 1.0f);
    memset(&pt, 0, sizeof pt);
    pt.base.seed = 0x1234;
    pt.base.step = 3;
    pt.base.block = 1;
    pt.base.dist = dist;
    pt.sigma = 0.02f;
    pt.flipout = flipout;
    pt.n_examples = 4;
    pt.n_segments = n_seg;
    pt.offsets = off;
    pt.sign = layout == 1 && flipout ? seg_sign[0] + 2 : seg_sign[layout];   /* flipout: {1, -1} */
    pt.example = seg_example[layout];
    a = linear_args(W, D_OUT, X, n_rows, &pt);
    run_linear(GRZO_CPU_LINEAR_FUSED, 1, &a, y1);
    run_linear(GRZO_CPU_LINEAR_FUSED, 2, &a, y2);
    run_linear(GRZO_CPU_LINEAR_PER_EXAMPLE, 1, &a, ype);
    CHECKF(memcmp(y1, y2, sizeof(float) * (size_t)(n_rows * D_OUT)) == 0,
           "layout %d flipout %d dist %u: 1 and 2 threads differ", layout, flipout, (unsigned)dist);
    {   /* each CPU's forming kernels (Zen 5's, Zen 4's, Intel's) give the same bits, whichever the CPU */
        int forming, nt;
        for (forming = 0; forming < 3; forming++)
            for (nt = 1; nt <= 2; nt++) {
                run_linear_forming(GRZO_CPU_LINEAR_FUSED, nt, forming, &a, y2);
                CHECKF(memcmp(y1, y2, sizeof(float) * (size_t)(n_rows * D_OUT)) == 0,
                       "layout %d flipout %d dist %u: the fused path with forming kernels %d at %d threads differs",
                       layout, flipout, (unsigned)dist, forming, nt);
            }
    }
    for (c = 0; c < n_seg; c++)
        for (j = 0; j < D_OUT; j++) {
            for (k = 0; k < D_IN; k++) wp[k] = formed(W, &pt, c, j, k, &pp[k]);
            for (n = off[c]; n < off[c + 1]; n++) {
                double exact = 0.0, mag = 0.0, bound, d_ex, d_pe;
                for (k = 0; k < D_IN; k++) {
                    exact += (double)X[n * D_IN + k] * (double)wp[k];
                    mag += fabs((double)X[n * D_IN + k]) * (fabs((double)W[j * D_IN + k]) + fabs((double)pp[k]));
                }
                bound = (double)(D_IN + 2) * ldexp(1.0, -24) * mag;
                d_ex = fabs((double)y1[n * D_OUT + j] - exact);
                d_pe = fabs((double)y1[n * D_OUT + j] - (double)ype[n * D_OUT + j]);
                if (d_ex / bound > worst) worst = d_ex / bound;
                CHECKF(d_ex <= bound && d_pe <= 2.0 * bound,
                       "layout %d flipout %d dist %u row %lld col %lld: fused %.9g exact %.9g per-example %.9g bound %.3g",
                       layout, flipout, (unsigned)dist, (long long)n, (long long)j, (double)y1[n * D_OUT + j], exact,
                       (double)ype[n * D_OUT + j], bound);
            }
        }
    printf("test_fused: layout %d, flipout %d, %s U, d_in %lld: worst |fused - exact| = %.3f of (K + 2) eps mag\n", layout,
           flipout, dist == GRZO_NOISE_GAUSSIAN ? "Gaussian" : "Rademacher", (long long)D_IN, worst);
    free(W); free(X); free(wp); free(pp); free(y1); free(y2); free(ype);
}

#ifdef GRZO_USE_BLIS   /* the backend's micro-kernel record (grzo__ukr) exists with BLIS only */
/* AUTO takes the fused path only for a weight of at least two slivers per thread (narrower
   ones run faster through OpenBLAS on the formed weight: grzo__cpu_takes_fused). Its result
   must be FUSED's bits at that width and PER_EXAMPLE's one sliver narrower, at 1 and 2
   threads, for flipout and shared Z; the two paths' bits differ at both widths (the K-sums
   add in different orders), so a wrong choice fails. */
static void check_auto_choice(void)
{
    static const int8_t sign[4] = { 1, 1, -1, -1 };
    static const int64_t example[4] = { 0, 1, 0, 1 };
    static const int64_t off[5] = { 0, 13, 22, 35, 44 }, whole[2] = { 0, 44 };   /* 4 copies; one */
    int64_t n_rows = 44, wp, d_out;
    int nt, flip, wide;
    grzo_backend be;
    grzo_cpu_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = 1;
    REQUIRE(grzo_backend_cpu_create(&cd, &be) == GRZO_OK);
    wp = ((grzo__cpu *)be.self)->ukr->wp;
    grzo_backend_destroy(&be);
    for (nt = 1; nt <= 2; nt++)
        for (flip = 0; flip < 2; flip++)
            for (wide = 0; wide < 2; wide++) {
                float *W, *X, *ya, *yf, *ype;
                grzo_perturb pt;
                grzo_linear_args a;
                size_t ny;
                d_out = (2 * nt - (wide ? 0 : 1)) * wp;
                ny = (size_t)(n_rows * d_out);
                W = (float *)malloc(sizeof(float) * (size_t)(d_out * D_IN));
                X = (float *)malloc(sizeof(float) * (size_t)(n_rows * D_IN));
                ya = (float *)malloc(sizeof(float) * ny);
                yf = (float *)malloc(sizeof(float) * ny);
                ype = (float *)malloc(sizeof(float) * ny);
                REQUIRE(W && X && ya && yf && ype);
                tu_fill_unif(W, (size_t)(d_out * D_IN), 21, -0.05f, 0.05f);
                tu_fill_unif(X, (size_t)(n_rows * D_IN), 22, -1.0f, 1.0f);
                memset(&pt, 0, sizeof pt);
                pt.base.seed = 0x99;
                pt.base.step = 1;
                pt.base.block = 2;
                pt.base.dist = GRZO_NOISE_RADEMACHER;
                pt.sigma = 0.02f;
                pt.flipout = flip;
                pt.n_examples = 2;
                pt.n_segments = flip ? 4 : 1;
                pt.offsets = flip ? off : whole;
                pt.sign = sign;
                pt.example = example;
                a = linear_args(W, d_out, X, n_rows, &pt);
                run_linear(GRZO_CPU_LINEAR_AUTO, nt, &a, ya);
                run_linear(GRZO_CPU_LINEAR_FUSED, nt, &a, yf);
                run_linear(GRZO_CPU_LINEAR_PER_EXAMPLE, nt, &a, ype);
                CHECKF(memcmp(yf, ype, sizeof(float) * ny) != 0,
                       "auto choice, %d threads, flipout %d, %lld outputs: FUSED and PER_EXAMPLE gave the same bits",
                       nt, flip, (long long)d_out);
                CHECKF(memcmp(ya, wide ? yf : ype, sizeof(float) * ny) == 0,
                       "auto choice, %d threads, flipout %d, %lld outputs (slivers of %lld): AUTO did not run %s",
                       nt, flip, (long long)d_out, (long long)wp, wide ? "FUSED" : "PER_EXAMPLE");
                free(W); free(X); free(ya); free(yf); free(ype);
            }
    printf("test_fused: AUTO runs FUSED from %lld outputs at 1 thread, %lld at 2\n", (long long)(wp + 1),
           (long long)(3 * wp + 1));
}
#endif

/* The transposing packer, bit for bit against the scalar expression: 8 x 8 register tiles,
   the rows and columns left over, the zero rows, formed rows (w + (f_i s_k) u), strides of
   400 and 1024 floats, each with and without the rows copied next to each other first. */
static void check_packer(void)
{
#ifdef GRZO_USE_BLIS
    static const int64_t widths[] = { 6, 12, 16, 32 }, kcs[] = { 1, 7, 8, 9, 45, 384 }, lds[] = { 400, 1024 };
    float *src = (float *)malloc(sizeof(float) * 32 * 1024), *u = (float *)malloc(sizeof(float) * 32 * 384);
    float *out = (float *)malloc(sizeof(float) * 32 * 384), *want = (float *)malloc(sizeof(float) * 32 * 384);
    float *stage = (float *)malloc(sizeof(float) * 32 * 384), *pm = (float *)malloc(sizeof(float) * 32 * 384);
    uint32_t *ub = (uint32_t *)calloc(32 * 12, sizeof(uint32_t));
    float f[32], sg[384];
    int64_t wi, ki, li, h, form, i, k, n = 0;
    REQUIRE(src && u && out && want && stage && pm && ub);
    tu_fill_unif(src, 32 * 1024, 21, -1.0f, 1.0f);
    tu_fill_unif(u, 32 * 384, 22, -1.0f, 1.0f);
    tu_fill_unif(f, 32, 23, -0.1f, 0.1f);
    for (k = 0; k < 384; k++) sg[k] = (k * 7) % 3 ? 1.0f : -1.0f;
    /* a +-1 U (row i at pm + i 384) and its bits (row i at ub + i 12: bit set where -1) */
    for (i = 0; i < 32; i++)
        for (k = 0; k < 384; k++) {
            pm[i * 384 + k] = u[i * 384 + k] < 0.0f ? -1.0f : 1.0f;
            if (pm[i * 384 + k] < 0.0f) ub[i * 12 + k / 32] |= 1u << (k % 32);
        }
    for (wi = 0; wi < 4; wi++)
        for (ki = 0; ki < 6; ki++)
            for (li = 0; li < 2; li++)
                for (h = 1; h <= widths[wi]; h++)
                    for (form = 0; form < 5; form++) {   /* plain; formed; formed with s; the two with U's bits */
                        int64_t width = widths[wi], kc = kcs[ki], ld = lds[li];
                        const float *s = form % 2 == 0 && form > 0 ? sg : NULL, *uf = form >= 3 ? pm : u;
                        int64_t ldu = form >= 3 ? 384 : kc;
                        grzo__former fm;
                        memset(&fm, 0, sizeof fm);
                        fm.f = f;
                        fm.s = s;
                        if (form >= 3) { fm.ub = ub; fm.ldu = 12; } else { fm.u = u; fm.ldu = kc; }
                        for (k = 0; k < kc; k++)
                            for (i = 0; i < width; i++)
                                want[k * width + i] = i >= h ? 0.0f
                                                      : form ? src[i * ld + k] + (f[i] * (s ? s[k] : 1.0f)) * uf[i * ldu + k]
                                                             : src[i * ld + k];
                        memset(out, 0xff, sizeof(float) * (size_t)(width * kc));
                        grzo__pack_sliver(src, ld, form ? &fm : NULL, h, kc, width, h % 2 ? stage : NULL, out);
                        CHECKF(memcmp(out, want, sizeof(float) * (size_t)(width * kc)) == 0,
                               "packer: width %lld kc %lld ld %lld h %lld form %lld differs from the scalar expression",
                               (long long)width, (long long)kc, (long long)ld, (long long)h, (long long)form);
                        n++;
                    }
    printf("test_fused: packer bit-identical to the scalar expression in %lld cases\n", (long long)n);
    free(src); free(u); free(out); free(want); free(stage); free(pm); free(ub);
#endif
}

/* GUARD floats of a sentinel past an output: whatever writes past its end changes them */
enum { GUARD = 16 };
TU_UNUSED static void guard_set(float *p)
{
    int i;
    for (i = 0; i < GUARD; i++) p[i] = 12345.5f;
}
TU_UNUSED static int guard_intact(const float *p)
{
    int i;
    for (i = 0; i < GUARD; i++)
        if (p[i] != 12345.5f) return 0;
    return 1;
}

/* The former of a copy's weight sliver (and its mirror's) against the scalar expression, bit
   for bit: out = w + (f_i s_k) u, neg = w - (f_i s_k) u, for every width a kernel has and the
   vector and element-by-element paths alike, writing nothing past the sliver. */
static void check_former(void)
{
#ifdef GRZO_USE_BLIS
    static const int64_t widths[] = { 6, 8, 16, 32 }, kcs[] = { 1, 7, 384 };
    float *w = (float *)malloc(sizeof(float) * 32 * 384), *u = (float *)malloc(sizeof(float) * 32 * 384);
    float *out = (float *)malloc(sizeof(float) * (32 * 384 + GUARD)), *neg = (float *)malloc(sizeof(float) * (32 * 384 + GUARD));
    float f[32], sg[384];
    uint32_t ub[384];
    int64_t wi, ki, i, k, n = 0;
    int form, mirror;
    REQUIRE(w && u && out && neg);
    tu_fill_unif(w, 32 * 384, 31, -1.0f, 1.0f);
    tu_fill_unif(u, 32 * 384, 32, -1.0f, 1.0f);
    tu_fill_unif(f, 32, 33, -0.1f, 0.1f);
    for (k = 0; k < 384; k++) sg[k] = (k * 5) % 3 ? 1.0f : -1.0f;
    for (wi = 0; wi < 4; wi++)
        for (ki = 0; ki < 3; ki++)
            for (form = 0; form < 2; form++)          /* s NULL; s the signs */
                for (mirror = 0; mirror < 2; mirror++) {
                    int64_t width = widths[wi], kc = kcs[ki], bad = 0;
                    const float *s = form ? sg : NULL;
                    guard_set(out + kc * width), guard_set(neg + kc * width);
                    grzo__form_sliver(w, u, f, s, kc, width, out, mirror ? neg : NULL);
                    for (k = 0; k < kc; k++)
                        for (i = 0; i < width; i++) {
                            float p = (f[i] * (s ? s[k] : 1.0f)) * u[k * width + i], a = w[k * width + i] + p,
                                  b = w[k * width + i] - p;
                            bad += memcmp(&out[k * width + i], &a, sizeof a) != 0;
                            if (mirror) bad += memcmp(&neg[k * width + i], &b, sizeof b) != 0;
                        }
                    bad += !guard_intact(out + kc * width) + !guard_intact(neg + kc * width);
                    CHECKF(bad == 0, "former: width %lld kc %lld s %d mirror %d: %lld elements differ or written past the sliver",
                           (long long)width, (long long)kc, form, mirror, (long long)bad);
                    /* a +-1 U as bits: the same expression with u = -1 where a bit is set */
                    for (k = 0; k < kc; k++) {
                        ub[k] = 0;
                        for (i = 0; i < width; i++) ub[k] |= (uint32_t)(u[k * width + i] < 0.0f) << i;
                    }
                    bad = 0;
                    guard_set(out + kc * width), guard_set(neg + kc * width);
                    grzo__form_sliver_bits(w, ub, f, s, kc, width, out, mirror ? neg : NULL);
                    for (k = 0; k < kc; k++)
                        for (i = 0; i < width; i++) {
                            float pm = u[k * width + i] < 0.0f ? -1.0f : 1.0f;
                            float p = (f[i] * (s ? s[k] : 1.0f)) * pm, a = w[k * width + i] + p, b = w[k * width + i] - p;
                            bad += memcmp(&out[k * width + i], &a, sizeof a) != 0;
                            if (mirror) bad += memcmp(&neg[k * width + i], &b, sizeof b) != 0;
                        }
                    bad += !guard_intact(out + kc * width) + !guard_intact(neg + kc * width);
                    CHECKF(bad == 0, "former from bits: width %lld kc %lld s %d mirror %d: %lld elements differ or written past the sliver",
                           (long long)width, (long long)kc, form, mirror, (long long)bad);
                    n += 2;
                }
    printf("test_fused: former bit-identical to the scalar expression in %lld cases\n", (long long)n);
    free(w); free(u); free(out); free(neg);
#endif
}

/* The kernel that forms while it multiplies (AVX-512, reading X's rows in place) against
   forming the sliver (grzo__form_sliver_bits) and then BLIS's kernel on X packed, bit for
   bit: every element of C, the ones outside the h x n block included (they must stay as they
   were), with and without accumulation (without, C holds NaNs the kernels must not read), s
   NULL or signs, a copy and its mirror (f negated); every sliver width, the two-sliver
   kernels of 2-4 rows, and copies of more rows than a sliver, split into slivers of unequal
   widths. */
#ifdef GRZO_USE_BLIS
static float *aligned_floats(size_t n)   /* BLIS's kernels load packed panels aligned */
{
    void *p = NULL;
    return posix_memalign(&p, 64, n * sizeof(float)) == 0 ? (float *)p : NULL;
}

/* C (column-stored, ldc) = or += the formed sliver (h of 32 rows) times rows [0, n) of X
   (row i at xr + i ldx), by BLIS's kernel on X packed 12 rows at a time */
static void ref_formed_times_rows(const grzo__ukr *u, const float *formed, int64_t h, const float *xr, int64_t ldx,
                                  int64_t n, int64_t kc, int acc, float *xpack, float *c, int64_t ldc)
{
    float one = 1.0f, beta = acc ? 1.0f : 0.0f;
    auxinfo_t aux;
    int64_t p, i, k;
    memset(&aux, 0, sizeof aux);
    for (p = 0; p < n; p += 12) {
        int64_t m = n - p < 12 ? n - p : 12;
        for (k = 0; k < kc; k++)
            for (i = 0; i < 12; i++) xpack[k * 12 + i] = i < m ? xr[(p + i) * ldx + k] : 0.0f;
        u->kernel((dim_t)h, (dim_t)m, (dim_t)kc, &one, (float *)formed, xpack, &beta, c + p * ldc, 1, (inc_t)ldc, &aux,
                  u->cntx);
    }
}

/* A copy's rows into all its slivers of `width` (GRZO__WIDE_X for the 16-row kernels, 12 for
   the FMA-forming ones), as the fused path's packing jobs do one by one */
static void pack_even(const float *x, int64_t ldx, int64_t n_rows, int64_t width, int64_t kc, float *out)
{
    int64_t t;
    for (t = 0; t < grzo__even_slivers(n_rows, width); t++) grzo__pack_even_sliver(x, ldx, n_rows, width, t, kc, NULL, out);
}

/* The FMA-forming kernels on one 32-row weight sliver (h rows) and a copy of n rows of X
   (row i at xr + i ldx), as the fused path runs them: U's bits unpacked to floats, the
   scales and their negations, the rows packed 12 wide; a copy of more than one X sliver
   forms in the first and reads the weights kept there in the others (kept: 32 kc floats,
   filled with NaNs first: a weight read before it is kept shows) */
static void fma_form_times_rows(const float *w, const uint32_t *ub, const uint32_t *sw, const float *f, int64_t h,
                                const float *xr, int64_t ldx, int64_t n, int64_t kc, int acc, float *uf, float *xf,
                                float *kept, float *c, int64_t ldc)
{
    float fsel[64];
    int64_t i;
    grzo__unpack_u_bits(ub, h, kc, 32, uf);
    grzo__fma_scales(f, 1, fsel);
    pack_even(xr, ldx, n, 12, kc, xf);
    for (i = 0; i < 32 * kc; i++) kept[i] = NAN;
    grzo__form_fma_block(w, uf, sw, fsel, kept, 0, h, xf, n, kc, acc, c, ldc);
}

/* C's initial state: c0's values to accumulate into, or NaNs the kernel must not read */
static void reset_c(float *c, const float *c0, size_t n, int acc)
{
    size_t i;
    for (i = 0; i < n; i++) c[i] = acc ? c0[i] : NAN;
}
#endif

static void check_form_ukr(void)
{
#ifdef GRZO_USE_BLIS
    static const int64_t kcs[] = { 1, 2, 7, 576 }, hs[] = { 1, 16, 17, 32 }, splits[] = { 12, 13, 14, 23, 24, 25, 29, 41, 48, 49, 64 };
    enum { KC = 576, LDC = 37, XLD = KC + 5, LDC2 = 71, MAXN = 64 };
    grzo__ukr u;
    float *w = aligned_floats(32 * KC), *x = aligned_floats(12 * KC), *formed = aligned_floats(32 * KC);
    float *neg = aligned_floats(32 * KC), *xr = aligned_floats(MAXN * XLD), *w2 = aligned_floats(64 * KC);
    float *c0 = aligned_floats(MAXN * LDC), *c_ref = aligned_floats(MAXN * LDC), *c_got = aligned_floats(MAXN * LDC);
    float *xw = aligned_floats(grzo__even_slivers(MAXN, GRZO__WIDE_X) * GRZO__WIDE_X * KC);   /* X packed for the 16-row kernels */
    float *xf = aligned_floats(grzo__even_slivers(MAXN, 12) * 12 * KC), *uf = aligned_floats(32 * KC);   /* FMA-forming */
    float *kept = aligned_floats(32 * KC);   /* the weights the FMA-forming kernels keep */
    float f[32], fneg[32], sg[KC];
    uint32_t ub[KC], sw[KC], ub2[2 * KC];
    int64_t ki, ni, hi, i, k, n_cases = 0;
    int acc, form, mirror;
    REQUIRE(w && x && formed && neg && xr && w2 && c0 && c_ref && c_got && xw && xf && uf && kept);
    REQUIRE(grzo__ukr_init(&u));
    if (!u.form_in_kernel) {
        printf("test_fused: the forming kernel does not run here (BLIS %s, %s): nothing to compare\n", u.arch,
               grzo__simd_name(grzo__cpu_simd_level()));
        free(w); free(x); free(formed); free(neg); free(xr); free(w2); free(c0); free(c_ref); free(c_got); free(xw);
        free(xf); free(uf); free(kept);
        return;
    }
    tu_fill_unif(w, 32 * KC, 41, -1.0f, 1.0f);
    tu_fill_unif(c0, MAXN * LDC, 43, -1.0f, 1.0f);
    tu_fill_unif(w2, 64 * KC, 45, -1.0f, 1.0f);
    for (k = 0; k < KC; k++) {
        ub[k] = (uint32_t)k * 2654435761u ^ (uint32_t)(k >> 3) * 40503u;
        sg[k] = (k * 7) % 5 < 2 ? -1.0f : 1.0f;
    }
    for (ki = 0; ki < (int64_t)(sizeof kcs / sizeof kcs[0]); ki++)
        for (ni = 1; ni <= 12; ni++)   /* every sliver width: each has its own kernel */
            for (hi = 0; hi < 4; hi++)
                for (acc = 0; acc < 2; acc++)
                    for (form = 0; form < 2; form++)
                        for (mirror = 0; mirror < 2; mirror++) {
                            int64_t kc = kcs[ki], n = ni, h = hs[hi];
                            const float *s = form ? sg : NULL;
                            /* X's rows afresh (each case its own), and f = 0 past h */
                            tu_fill_unif(xr, MAXN * XLD, 42 + (uint64_t)n, -1.0f, 1.0f);
                            tu_fill_unif(f, 32, 44 + (uint64_t)hi, -0.1f, 0.1f);
                            for (i = h; i < 32; i++) f[i] = 0.0f;
                            for (i = 0; i < 32; i++) fneg[i] = -f[i];
                            reset_c(c_ref, c0, 12 * LDC, acc);
                            memcpy(c_got, c_ref, 12 * LDC * sizeof(float));
                            grzo__form_sliver_bits(w, ub, f, s, kc, 32, formed, neg);
                            ref_formed_times_rows(&u, mirror ? neg : formed, h, xr, XLD, n, kc, acc, x, c_ref, LDC);
                            grzo__s_sign_words(s, kc, sw);
                            grzo__form_ukr_block(&u, w, ub, sw, mirror ? fneg : f, 0, h, xr, XLD, NULL, n, kc, acc,
                                                 c_got, LDC);
                            CHECKF(memcmp(c_ref, c_got, 12 * LDC * sizeof(float)) == 0,
                                   "forming kernel: kc %lld n %lld h %lld accumulate %d s %d mirror %d differs from "
                                   "forming then BLIS's kernel", (long long)kc, (long long)n, (long long)h, acc, form,
                                   mirror);
                            n_cases++;
                            /* the FMA-forming kernel (every width, though the fused path gives it 5-12) */
                            reset_c(c_got, c0, 12 * LDC, acc);
                            fma_form_times_rows(w, ub, sw, mirror ? fneg : f, h, xr, XLD, n, kc, acc, uf, xf, kept, c_got, LDC);
                            CHECKF(memcmp(c_ref, c_got, 12 * LDC * sizeof(float)) == 0,
                                   "FMA-forming kernel: kc %lld n %lld h %lld accumulate %d s %d mirror %d differs",
                                   (long long)kc, (long long)n, (long long)h, acc, form, mirror);
                            n_cases++;
                            if (n < GRZO__WIDE_MIN) continue;
                            reset_c(c_got, c0, 12 * LDC, acc);
                            pack_even(xr, XLD, n, GRZO__WIDE_X, kc, xw);
                            grzo__form_ukr_block(&u, w, ub, sw, mirror ? fneg : f, 0, h, xr, XLD, xw, n, kc, acc,
                                                 c_got, LDC);
                            CHECKF(memcmp(c_ref, c_got, 12 * LDC * sizeof(float)) == 0,
                                   "16-row forming kernel: kc %lld n %lld h %lld accumulate %d s %d mirror %d differs",
                                   (long long)kc, (long long)n, (long long)h, acc, form, mirror);
                            n_cases++;
                        }
    /* a copy of more rows than a sliver: slivers of unequal widths (64 rows: 11, 11, 11, 11,
       10, 10 in place; 22, 21, 21 packed for the 16-row kernels), each column as if in a
       12-row sliver; weight slivers of 1, 16, 17 and 32 rows (the second half empty, full,
       one row, full) */
    for (ki = 0; ki < (int64_t)(sizeof kcs / sizeof kcs[0]); ki++)
        for (ni = 0; ni < (int64_t)(sizeof splits / sizeof splits[0]); ni++)
            for (hi = 0; hi < 4; hi++)
                for (acc = 0; acc < 2; acc++)
                    for (form = 0; form < 2; form++) {   /* in place, then packed */
                        int64_t kc = kcs[ki], n = splits[ni], h = hs[hi];
                        tu_fill_unif(xr, MAXN * XLD, 70 + (uint64_t)n, -1.0f, 1.0f);
                        tu_fill_unif(f, 32, 46 + (uint64_t)hi, -0.1f, 0.1f);
                        for (i = h; i < 32; i++) f[i] = 0.0f;
                        reset_c(c_ref, c0, MAXN * LDC, acc);
                        memcpy(c_got, c_ref, MAXN * LDC * sizeof(float));
                        grzo__form_sliver_bits(w, ub, f, sg, kc, 32, formed, NULL);
                        ref_formed_times_rows(&u, formed, h, xr, XLD, n, kc, acc, x, c_ref, LDC);
                        grzo__s_sign_words(sg, kc, sw);
                        if (form) pack_even(xr, XLD, n, GRZO__WIDE_X, kc, xw);
                        grzo__form_ukr_block(&u, w, ub, sw, f, 0, h, xr, XLD, form ? xw : NULL, n, kc, acc, c_got,
                                             LDC);
                        CHECKF(memcmp(c_ref, c_got, MAXN * LDC * sizeof(float)) == 0,
                               "forming kernel, %lld rows in slivers%s: kc %lld h %lld accumulate %d differs",
                               (long long)n, form ? " packed for the 16-row kernels" : "", (long long)kc, (long long)h,
                               acc);
                        n_cases++;
                        if (form) continue;
                        reset_c(c_got, c0, MAXN * LDC, acc);   /* 12 wide: 13 rows as 7 + 6, 64 as 11 x 4 + 10 x 2 */
                        fma_form_times_rows(w, ub, sw, f, h, xr, XLD, n, kc, acc, uf, xf, kept, c_got, LDC);
                        CHECKF(memcmp(c_ref, c_got, MAXN * LDC * sizeof(float)) == 0,
                               "FMA-forming kernel, %lld rows in slivers: kc %lld h %lld accumulate %d differs",
                               (long long)n, (long long)kc, (long long)h, acc);
                        n_cases++;
                    }
    /* two weight slivers against a copy of 1-4 rows (the 64-row kernels): each sliver as
       forming it then BLIS's kernel, the second h2 rows high */
    for (ki = 0; ki < 3; ki++)
        for (ni = 1; ni <= 4; ni++)
            for (hi = 0; hi < 3; hi++)
                for (acc = 0; acc < 2; acc++) {
                    static const int64_t h2s[] = { 1, 17, 32 };
                    int64_t kc = kcs[ki], n = ni, h2 = h2s[hi], stride = grzo__bits_stride(kc), half;
                    float f64[64];
                    tu_fill_unif(xr, MAXN * XLD, 60 + (uint64_t)n, -1.0f, 1.0f);
                    tu_fill_unif(f64, 64, 50 + (uint64_t)hi, -0.1f, 0.1f);
                    for (i = 32 + h2; i < 64; i++) f64[i] = 0.0f;
                    for (k = 0; k < kc; k++) {
                        ub2[k] = ub[k];
                        ub2[stride + k] = ub[k] * 2246822519u + 7u;
                    }
                    reset_c(c_ref, c0, 4 * LDC2, acc);
                    memcpy(c_got, c_ref, 4 * LDC2 * sizeof(float));
                    for (half = 0; half < 2; half++) {
                        grzo__form_sliver_bits(w2 + half * 32 * kc, ub2 + half * stride, f64 + 32 * half, sg, kc, 32,
                                               formed, NULL);
                        ref_formed_times_rows(&u, formed, half ? h2 : 32, xr, XLD, n, kc, acc, x, c_ref + 32 * half,
                                              LDC2);
                    }
                    grzo__s_sign_words(sg, kc, sw);
                    grzo__form_ukr_block(&u, w2, ub2, sw, f64, 0, 32 + h2, xr, XLD, NULL, n, kc, acc, c_got, LDC2);
                    CHECKF(memcmp(c_ref, c_got, 4 * LDC2 * sizeof(float)) == 0, "forming kernel, two slivers: kc %lld "
                           "n %lld h2 %lld accumulate %d differs", (long long)kc, (long long)n, (long long)h2, acc);
                    n_cases++;
                }
    /* a Gaussian s is refused: such copies are formed and stored */
    CHECK(grzo__s_is_signs(sg, KC) && grzo__s_is_signs(NULL, KC));
    sg[3] = 0.5f;
    CHECK(!grzo__s_is_signs(sg, 4) && grzo__s_is_signs(sg, 3));
    sg[3] = -0.0f;
    CHECK(!grzo__s_is_signs(sg, 4));
    printf("test_fused: the forming kernels equal forming then BLIS's kernel, bit for bit, in %lld cases\n",
           (long long)n_cases);
    free(w); free(x); free(formed); free(neg); free(xr); free(w2); free(c0); free(c_ref); free(c_got); free(xw);
    free(xf); free(uf); free(kept);
#endif
}

/* The 32 x 32 bit transposes that make U's bits (bit c of word i becomes bit i of word c):
   the vector one this build runs and the scalar one that compilers without GCC's vector
   extensions run, against the definition, on random words and on single bits */
static void check_bit_transpose(void)
{
#ifdef GRZO_USE_BLIS
    uint32_t a[32], v[32], sc[32], x = 0x9E3779B9u;
    int t, i, c, bad = 0;
    for (t = 0; t < 64 + 32 * 32; t++) {
        for (i = 0; i < 32; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;   /* xorshift32 */
            a[i] = t < 64 ? x : (i == (t - 64) / 32 ? 1u << ((t - 64) % 32) : 0u);
        }
        memcpy(v, a, sizeof a);
        memcpy(sc, a, sizeof a);
        grzo__transpose_bits32(v);
        grzo__transpose_bits32_scalar(sc);
        for (i = 0; i < 32; i++)
            for (c = 0; c < 32; c++) {
                uint32_t want = (a[i] >> c) & 1u;
                bad += ((v[c] >> i) & 1u) != want;
                bad += ((sc[c] >> i) & 1u) != want;
            }
    }
    CHECKF(bad == 0, "bit transposes: %d bits misplaced", bad);
#endif
}

/* A Rademacher U as bits, against grzo_noise_at element by element: a block's bits in
   slivers (32 x 32 transposes, rows past the weight clear), row by row (for the packer that
   forms), and unpacked to the floats grzo__pack_u packs, bit for bit; starting columns that
   are not multiples of 32 and rows that start inside a Philox group, widths 12, 16 and 32. */
static void check_u_bits(void)
{
#ifdef GRZO_USE_BLIS
    /* kc 576 of d_in 576: whole rows, one range; kc 1000: pieces longer than half a batch */
    static const int64_t widths[] = { 12, 16, 32 }, d_ins[] = { 1000, 576, 77 }, k0s[] = { 0, 5, 384 };
    static const int64_t kcs[] = { 1, 31, 33, 192, 576, 1000 }, n_rows[] = { 1, 17, 75 };
    uint32_t *ub = (uint32_t *)malloc(sizeof(uint32_t) * 3 * 1024), *rb = (uint32_t *)malloc(sizeof(uint32_t) * 75 * 32);
    float *uf = (float *)malloc(sizeof(float) * 96 * 1000), *got = (float *)malloc(sizeof(float) * 96 * 1000);
    float *urows = (float *)malloc(sizeof(float) * 32 * 1000);
    grzo_noise nz = { 0x5eedULL, 7, 3, GRZO_STREAM_BASE, GRZO_NOISE_RADEMACHER };
    int64_t wi, di, ki, ci, ni, i, k, n = 0;
    REQUIRE(ub && rb && uf && got && urows);
    for (wi = 0; wi < 3; wi++)
        for (di = 0; di < 3; di++)
            for (ki = 0; ki < 3; ki++)
                for (ci = 0; ci < 6; ci++)
                    for (ni = 0; ni < 3; ni++) {
                        int64_t width = widths[wi], d_in = d_ins[di], k0 = k0s[ki], kc = kcs[ci], rows = n_rows[ni];
                        int64_t j0 = 3, stride = grzo__bits_stride(kc), bad = 0, q, ldb = (kc + 31) / 32;
                        if (k0 + kc > d_in || (rows + width - 1) / width > 3) continue;
                        grzo__pack_u_bits(&nz, d_in, j0, rows, k0, kc, width, ub);
                        grzo__u_row_bits(&nz, d_in, j0, rows, k0, kc, rb, ldb, 1);
                        for (q = 0; q < rows; q += width)
                            for (k = 0; k < kc; k++)
                                for (i = 0; i < width; i++) {
                                    int set = (int)((ub[q / width * stride + k] >> i) & 1u);
                                    int want = q + i < rows && grzo_noise_at(&nz, (uint64_t)((j0 + q + i) * d_in + k0 + k)) < 0.0f;
                                    bad += set != want;
                                }
                        for (i = 0; i < rows; i++)
                            for (k = 0; k < kc; k++)
                                bad += (int)((rb[i * ldb + k / 32] >> (k % 32)) & 1u) !=
                                       (grzo_noise_at(&nz, (uint64_t)((j0 + i) * d_in + k0 + k)) < 0.0f);
                        grzo__pack_u(&nz, d_in, j0, rows, k0, kc, width, urows, uf);
                        memset(got, 0xff, sizeof(float) * (size_t)((rows + width - 1) / width * width * kc));
                        grzo__unpack_u_bits(ub, rows, kc, width, got);
                        bad += memcmp(got, uf, sizeof(float) * (size_t)((rows + width - 1) / width * width * kc)) != 0;
                        CHECKF(bad == 0, "U bits: width %lld d_in %lld k0 %lld kc %lld rows %lld: %lld differ",
                               (long long)width, (long long)d_in, (long long)k0, (long long)kc, (long long)rows,
                               (long long)bad);
                        n++;
                    }
    printf("test_fused: U's bits equal grzo_noise_at's signs in %lld cases\n", (long long)n);
    free(ub); free(rb); free(uf); free(got); free(urows);
#endif
}

/* The old-kernel detection: OpenBLAS core names to SIMD levels, and the remedy it names. */
static void check_kernel_detection(void)
{
#ifdef GRZO_USE_OPENBLAS
    const char *name;
    char value[32];
    int i;
    CHECK(grzo__openblas_core_level("Prescott") == 0);
    CHECK(grzo__openblas_core_level("Sandybridge") == 1);
    CHECK(grzo__openblas_core_level("Haswell") == 2 && grzo__openblas_core_level("Zen") == 2);
    CHECK(grzo__openblas_core_level("SkylakeX") == 3 && grzo__openblas_core_level("cooperlake") == 3);
    CHECK(strcmp(grzo__openblas_core_for(3), "SkylakeX") == 0 && strcmp(grzo__openblas_core_for(2), "Haswell") == 0);
    /* after cpu_env_reexec's settings the libraries run this CPU's kernels: nothing is left */
    for (i = 0; grzo_cpu_kernel_env(i, &name, value, sizeof value); i++)
        CHECKF(0, "%s=%s still suggested after the re-exec", name, value);
#endif
#ifdef GRZO_USE_BLIS
    {   /* BLIS's own choice is judged (zen3's AVX2 on an AVX-512 CPU is too old), a named one kept */
        const char *set = getenv("BLIS_ARCH_TYPE");
        char *saved = set ? strdup(set) : NULL;
        REQUIRE(!set || saved);
#if defined(__x86_64__)
        CHECK(grzo__blis_arch_level(BLIS_ARCH_ZEN3) == 2 && grzo__blis_arch_level(BLIS_ARCH_HASWELL) == 2);
        CHECK(grzo__blis_arch_level(BLIS_ARCH_SKX) == 3 && grzo__blis_arch_level(BLIS_ARCH_GENERIC) == 0);
#endif
        unsetenv("BLIS_ARCH_TYPE");
        CHECK(grzo__blis_detects());
        setenv("BLIS_ARCH_TYPE", "-1", 1);
        CHECK(grzo__blis_detects());
        setenv("BLIS_ARCH_TYPE", "0", 1);
        CHECK(!grzo__blis_detects() && !grzo__blis_older_than_cpu(3));
        setenv("BLIS_ARCH_TYPE", "-1x", 1);
        CHECK(!grzo__blis_detects());
        if (saved) setenv("BLIS_ARCH_TYPE", saved, 1);
        else unsetenv("BLIS_ARCH_TYPE");
        free(saved);
    }
#endif
}

/* BLIS_ARCH_TYPE names a configuration BLIS lacks (tests/meson.build sets it): no abort, the
   fused path off with the warning, a GRZO linear through the per-example path */
static int check_bad_blis_env(void)
{
    grzo_backend be;
    const char *line = "", *warning = "", *name;
    char value[32];
    int i;
#ifndef GRZO_USE_BLIS
    tu_skip("test_fused", "built without BLIS (-Dblis=disabled or libblis-dev missing): no BLIS to guard");
#endif
    REQUIRE(getenv("BLIS_ARCH_TYPE") != NULL);
    REQUIRE(grzo_backend_cpu_create(NULL, &be) == GRZO_OK);
    REQUIRE(grzo_backend_cpu_kernels(&be, &line, &warning) == GRZO_OK);
    printf("test_fused --bad-blis-env (BLIS_ARCH_TYPE=%s): %s\n  %s\n", getenv("BLIS_ARCH_TYPE"), line, warning);
    CHECKF(strstr(line, "(off") != NULL, "the fused path is off: %s", line);
    CHECKF(strstr(warning, "BLIS_ARCH_TYPE=") != NULL, "the warning names the variable: %s", warning);
    for (i = 0; grzo_cpu_kernel_env(i, &name, value, sizeof value); i++)
        CHECKF(strcmp(name, "BLIS_ARCH_TYPE") != 0, "BLIS_ARCH_TYPE=%s suggested without asking BLIS", value);
    {   /* a perturbed linear still runs, on the per-example path */
        grzo_desc d = {0};
        grzo_ctx *ctx;
        grzo_block blk;
        float W[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, X[2 * 3] = {1, 0, -1, 1, 0, -1}, Y[2 * 4];   /* both copies read the same row */
        grzo_step_info si;
        grzo_pass_info pi;
        grzo_step_report rep;
        float losses[2];
        d.backend = &be;
        d.lr = 1e-3f;
        d.sigma = 1e-3f;
        d.seed = 1;
        REQUIRE(grzo_create(&d, &ctx) == GRZO_OK);
        REQUIRE(grzo_block_add(ctx, &(grzo_block_desc){.kind = GRZO_BLOCK_MATRIX, .rows = 4, .cols = 3, .data = W, .name = "w"},
                               &blk) == GRZO_OK);
        REQUIRE(grzo_step_begin(ctx, 1, &si) == GRZO_OK);
        REQUIRE(grzo_pass_begin(ctx, &pi) == GRZO_OK);
        CHECK(grzo_linear(ctx, blk, X, Y, &(grzo_rows){.n_rows = 2}) == GRZO_OK);
        CHECK(Y[0] != Y[4] || Y[1] != Y[5]);   /* the "+" and "-" copies see different weights */
        losses[0] = Y[0];
        losses[1] = Y[4];
        CHECK(grzo_pass_end(ctx, losses) == GRZO_OK);
        CHECK(grzo_step_end(ctx, &rep) == GRZO_OK);
        grzo_destroy(ctx);
    }
    grzo_backend_destroy(&be);
    return tu_finish("test_fused --bad-blis-env");
}

/* Run with OPENBLAS_CORETYPE=Prescott and GRZO_KERNEL_ENV_SET=1 (tests/meson.build): OpenBLAS's
   SSE3 kernels on a CPU with more, what Debian's OpenBLAS picks on CPUs newer than itself. The
   warning's first sentence names OpenBLAS's core and the remedy (BLIS's follows it where BLIS
   chose older kernels by itself), grzo_cpu_kernel_env gives OPENBLAS_CORETYPE first (then
   BLIS_ARCH_TYPE in that case), and a NULL name or value or a zero size gets 0, nothing written. */
static int check_old_openblas(void)
{
#ifndef GRZO_USE_OPENBLAS
    tu_skip("test_fused", "built without OpenBLAS (-Dopenblas=disabled or libopenblas-dev missing): no core to judge");
    return 77;   /* not reached: tu_skip exits */
#else
    grzo_backend be;
    const char *line = "", *warning = "", *name = "untouched", *rest;
    char value[32] = "untouched", want[96];
    int level = grzo__cpu_simd_level(), blis_old = 0, i = 0;
    REQUIRE(getenv("GRZO_KERNEL_ENV_SET") != NULL);
    if (strcmp(openblas_get_corename(), "Prescott") != 0)
        tu_skip("test_fused", "this OpenBLAS does not take OPENBLAS_CORETYPE=Prescott (not a DYNAMIC_ARCH build)");
    if (level < 1) tu_skip("test_fused", "this CPU has no AVX: Prescott's kernels are the newest it runs");
#ifdef GRZO_USE_BLIS
    blis_old = grzo__blis_older_than_cpu(level);
#endif
    REQUIRE(grzo_backend_cpu_create(NULL, &be) == GRZO_OK);
    REQUIRE(grzo_backend_cpu_kernels(&be, &line, &warning) == GRZO_OK);
    printf("test_fused --old-openblas: %s\n  %s\n", line, warning);
    /* OpenBLAS's sentence first, ending with its remedy; then BLIS's or nothing */
    snprintf(want, sizeof want, "OPENBLAS_CORETYPE=%s (grzo's programs do it themselves). ", grzo__openblas_core_for(level));
    rest = strstr(warning, want);
    CHECKF(strncmp(warning, "OpenBLAS runs its Prescott", 26) == 0 && rest != NULL,
           "the warning opens with OpenBLAS's core and remedy: '%s'", warning);
    rest = rest ? rest + strlen(want) : "";
    CHECKF(blis_old ? strncmp(rest, "BLIS chose its ", 15) == 0 : rest[0] == '\0',
           "then BLIS's sentence %s: '%s'", blis_old ? "(BLIS chose older kernels)" : "none", rest);
    CHECK(grzo_cpu_kernel_env(0, &name, value, sizeof value) == 1 && strcmp(name, "OPENBLAS_CORETYPE") == 0 &&
          strcmp(value, grzo__openblas_core_for(level)) == 0);
    if (blis_old) CHECK(grzo_cpu_kernel_env(++i, &name, value, sizeof value) == 1 && strcmp(name, "BLIS_ARCH_TYPE") == 0);
    CHECK(grzo_cpu_kernel_env(i + 1, &name, value, sizeof value) == 0);
    name = "untouched";
    strcpy(value, "untouched");
    CHECK(grzo_cpu_kernel_env(0, NULL, value, sizeof value) == 0 && strcmp(value, "untouched") == 0);
    CHECK(grzo_cpu_kernel_env(0, &name, NULL, sizeof value) == 0 && strcmp(name, "untouched") == 0);
    CHECK(grzo_cpu_kernel_env(0, &name, value, 0) == 0 && strcmp(name, "untouched") == 0 && strcmp(value, "untouched") == 0);
    grzo_backend_destroy(&be);
    return tu_finish("test_fused --old-openblas");
#endif
}

#ifdef GRZO_USE_BLIS
/* The scratch area the fused path keeps between calls: every request, larger or smaller
   than the last, gets a 64-byte aligned span of at least its floats inside the area, the
   limit it reports is the area's end, and a request that fits reuses it. */
static void check_kept_area(void)
{
    static const int64_t sizes[] = { 250, 275, 275, 12, 290, 291, 292, 307, 1024, 1000, 25000, 1, 25016 };
    grzo__cpu cpu;
    size_t i;
    memset(&cpu, 0, sizeof cpu);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const void *before = cpu.kept;
        size_t before_bytes = cpu.kept_bytes;
        int64_t limit = -1;
        float *p = grzo__cpu_kept(&cpu, sizes[i], &limit);
        REQUIRE(p != NULL);
        CHECKF(((uintptr_t)p & 63u) == 0, "kept area: request %d not 64-byte aligned", (int)sizes[i]);
        CHECKF((char *)p >= (char *)cpu.kept && limit >= sizes[i] &&
               (char *)(p + limit) <= (char *)cpu.kept + cpu.kept_bytes &&
               (char *)(p + limit + 1) > (char *)cpu.kept + cpu.kept_bytes,
               "kept area: request %d: limit %d floats against the area of %u bytes", (int)sizes[i], (int)limit,
               (unsigned)cpu.kept_bytes);
        if (before && (size_t)sizes[i] * sizeof(float) + 64 <= before_bytes)
            CHECKF(cpu.kept == before, "kept area: request %d fits but the area was replaced", (int)sizes[i]);
        memset(p, 0xA5, (size_t)limit * sizeof(float));   /* the ASan build sees an overrun too */
    }
    free(cpu.kept);
}

#ifdef GRZO__CPU_ASAN
/* The red zones of the carved pieces (AddressSanitizer builds): each piece is addressable to
   its last float and poisoned right after it, the area past the pieces is poisoned, and a new
   carving of the same area with other sizes lifts the old red zones. */
static void check_red_zones(void)
{
    static const int64_t first[] = { 5, 16, 1, 0, 33 }, second[] = { 40, 3, 17 };
    float *area = (float *)malloc(4096 * sizeof(float)), *p[5];
    grzo__carve c;
    int i;
    REQUIRE(area != NULL);
    c = grzo__carve_begin(area, 4096, 1);
    for (i = 0; i < 5; i++) p[i] = grzo__carve_take(&c, first[i]);
    grzo__carve_end(&c);
    for (i = 0; i < 5; i++) {
        if (first[i] > 0) CHECKF(!__asan_address_is_poisoned(p[i] + first[i] - 1), "red zones: piece %d's last float", i);
        CHECKF(__asan_address_is_poisoned(p[i] + first[i]), "red zones: no red zone after piece %d", i);
        CHECKF(((uintptr_t)p[i] & 63u) == 0, "red zones: piece %d not from a 64-byte line", i);
    }
    CHECK(__asan_address_is_poisoned(area + c.used) && __asan_address_is_poisoned(area + 4095));
    c = grzo__carve_begin(area, 4096, 1);
    for (i = 0; i < 3; i++) {
        float *q = grzo__carve_take(&c, second[i]);
        int64_t k;
        for (k = 0; k < second[i]; k++) CHECKF(!__asan_address_is_poisoned(q + k), "red zones: piece %d float %d", i, (int)k);
        CHECKF(__asan_address_is_poisoned(q + second[i]), "red zones: no red zone after piece %d (carved again)", i);
    }
    grzo__carve_end(&c);
    free(area);
}
#endif
#endif

int main(int argc, char **argv)
{
    grzo_backend be;
    const char *line = "", *warning = "";
    int haswell = argc > 1 && strcmp(argv[1], "--blis-haswell") == 0;
    if (argc > 1 && strcmp(argv[1], "--bad-blis-env") == 0) return check_bad_blis_env();
    if (argc > 1 && strcmp(argv[1], "--old-openblas") == 0) return check_old_openblas();
#ifndef GRZO_USE_BLIS
    tu_skip("test_fused", "built without BLIS (-Dblis=disabled or libblis-dev missing): no fused path");
#else
    if (haswell && !getenv("GRZO_KERNEL_ENV_SET")) {
        char id[16];
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
            tu_skip("test_fused", "--blis-haswell: this CPU has no AVX2 and FMA for BLIS's haswell kernels");
        snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_HASWELL);   /* BLIS reads it when it initialises */
        setenv("BLIS_ARCH_TYPE", id, 1);
    }
#endif
    cpu_env_reexec(argv);   /* BLIS's kernel for this CPU (or haswell's) */
    REQUIRE(grzo_backend_cpu_create(NULL, &be) == GRZO_OK);
    REQUIRE(grzo_backend_cpu_kernels(&be, &line, &warning) == GRZO_OK);
    check_kernel_detection();
    printf("test_fused: %s\n", line);
    if (haswell) CHECKF(strstr(line, "fused: BLIS") && strstr(line, " haswell"), "--blis-haswell runs: %s", line);
    if (strstr(line, "(off")) {
        printf("test_fused: %s\n", warning);
        grzo_backend_destroy(&be);
        tu_skip("test_fused", "BLIS has no micro-kernel for this CPU");
    }
    grzo_backend_destroy(&be);
    check_packer();
    check_former();
    check_form_ukr();
    check_bit_transpose();
    check_u_bits();
#ifdef GRZO_USE_BLIS
    check_kept_area();
#ifdef GRZO__CPU_ASAN
    check_red_zones();
#endif
    check_auto_choice();
#endif
    {
        int layout, flip, gauss;
        for (layout = 0; layout < N_LAYOUTS; layout++)
            for (flip = 0; flip < 2; flip++)
                for (gauss = 0; gauss < 2; gauss++)
                    check_case(layout, flip, gauss ? GRZO_NOISE_GAUSSIAN : GRZO_NOISE_RADEMACHER);
        /* a d_in of a multiple of 1024: each X sliver's rows staged in its thread's buffer
           before they are packed */
        d_in_case = 2048;
        for (layout = 0; layout < N_LAYOUTS; layout += 3)
            for (flip = 0; flip < 2; flip++) check_case(layout, flip, GRZO_NOISE_RADEMACHER);
    }
    return tu_finish("test_fused");
}
