/* test_estimators.c - the estimators' statistics and exact formulas, through the black-box
   API (grzo_perturbed_params during a pass, losses computed here, grzo_pass_end):
     1. Flipout isotropy: E[z_i z_i^T] = I and E[z_i z_j^T | U] = 0 (5 standard errors), and
        the SHARED ablation fails the second (negative control);
     2. the canonical estimator (and MeZO) is unbiased on quadratics: the mean of the implied
        gradient (theta_before - theta_after) / lr over many steps is within 5 standard errors
        of the true gradient, coordinate by coordinate;
     3. scaling every loss by k leaves GRZO's (and FZOO's) update unchanged (norm_eps tiny) and
        scales the canonical and MeZO updates by k;
     4. GRZO, CANONICAL, SHARED, MeZO and FZOO apply exactly the documented update, recomputed
        here from grzo_noise_at and the losses we handed in (weight decay rules included);
     5. variance law on linear per-example losses (exact finite differences), Rademacher base:
        Var(MeZO) / Var(canonical) within 15% of c B + 1 - c for B in {1, 4, 16}, c in {0, .5, 1};
     6. in-place MeZO: the documented MeZO update (formula_mezo_inplace), MeZO's trajectory within
        an fp32 rounding tolerance, bounded restore drift (measured, printed), and restore after a
        NaN loss or an abort (mezo_inplace). */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"

/* ------------------------------------------------------------------------------------ */
/* a one-block context over host memory                                                  */
typedef struct one {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_block blk;
    float *theta, *scratch;
    int64_t rows, cols, D;
} one;

static void one_init(one *o, const grzo_desc *dtemplate, int64_t rows, int64_t cols)
{
    grzo_desc d = *dtemplate;
    REQUIRE_OK(tu_backend(TU_CPU, 1, &o->be));   /* fast noise fills; test_ops checks it against ref */
    tu_require_host_memory(&o->be, "test_estimators");
    d.backend = &o->be;
    o->ctx = tu_ctx(&d);
    o->rows = rows;
    o->cols = cols;
    o->D = rows * cols;
    o->theta = (float *)tu_alloc(&o->be, (size_t)o->D * sizeof(float));
    o->scratch = (float *)tu_alloc(&o->be, (size_t)o->D * sizeof(float));
    o->blk = tu_block(o->ctx, GRZO_BLOCK_MATRIX, rows, cols, o->theta, "w", 0);
}

static void one_free(one *o)
{
    grzo_destroy(o->ctx);
    grzo_backend_free(&o->be, o->theta);
    grzo_backend_free(&o->be, o->scratch);
    grzo_backend_destroy(&o->be);
}

static grzo_status one_step(one *o, int64_t B, tu_loss_fn f, double scale, void *ud, tu_seg_hook hook,
                            grzo_step_report *rep)
{
    float *scr[1];
    scr[0] = o->scratch;
    return tu_bb_step(o->ctx, 1, &o->blk, scr, B, f, scale, ud, hook, rep);
}

static double zero_loss(int64_t e, float *const *p, void *ud)
{
    (void)e; (void)p; (void)ud;
    return 0.0;
}

/* ---- quadratic per-example losses l_i = 0.5 ||A_i theta - b_i||^2 ---------------------- */
#define QM 5
#define QMAXD 64
#define QMAXB 16
typedef struct quad {
    int64_t D, n_ex;
    double A[QMAXB][QM][QMAXD], b[QMAXB][QM];
} quad;

static void quad_init(quad *q, int64_t D, int64_t n_ex, uint32_t stream)
{
    int64_t i, m, a;
    REQUIRE(D <= QMAXD && n_ex <= QMAXB);
    q->D = D;
    q->n_ex = n_ex;
    for (i = 0; i < n_ex; i++)
        for (m = 0; m < QM; m++) {
            for (a = 0; a < D; a++) q->A[i][m][a] = tu_unif(stream, (uint64_t)((i * QM + m) * QMAXD + a), -1, 1);
            q->b[i][m] = tu_unif(stream + 1, (uint64_t)(i * QM + m), -1, 1);
        }
}

static double quad_loss_at(const quad *q, int64_t e, const float *th)
{
    double l = 0;
    int64_t m, a;
    for (m = 0; m < QM; m++) {
        double r = -q->b[e][m];
        for (a = 0; a < q->D; a++) r += q->A[e][m][a] * th[a];
        l += 0.5 * r * r;
    }
    return l;
}

static void quad_grad(const quad *q, int64_t e, const float *th, double *g)
{
    int64_t m, a;
    for (a = 0; a < q->D; a++) g[a] = 0;
    for (m = 0; m < QM; m++) {
        double r = -q->b[e][m];
        for (a = 0; a < q->D; a++) r += q->A[e][m][a] * th[a];
        for (a = 0; a < q->D; a++) g[a] += q->A[e][m][a] * r;
    }
}

static double quad_loss(int64_t e, float *const *p, void *ud)
{
    return quad_loss_at((const quad *)ud, e, p[0]);
}

/* ================================ 1. isotropy =========================================== */
typedef struct iso {
    int64_t D, B;
    double sigma;
    double self_sum[QMAXD][QMAXD];      /* sum over samples of z_i z_i^T */
    double cross_sum[QMAXD][QMAXD];     /* sum over disjoint pairs (2m, 2m+1) of z_2m z_2m+1^T */
    long n_self, n_cross;
    double zp[QMAXB][QMAXD];            /* z of the "+" copies of the current step */
    int have[QMAXB];
} iso;

static void iso_hook(const grzo_pass_info *pi, int64_t seg, float *const *p, void *ud)
{
    iso *s = (iso *)ud;
    int64_t a, e = pi->example[seg];
    if (pi->sign[seg] != 1) return;
    for (a = 0; a < s->D; a++) s->zp[e][a] = (double)p[0][a] / s->sigma;   /* theta = 0 */
    s->have[e] = 1;
}

static void test_isotropy(int dist)
{
    grzo_desc d;
    one o;
    iso *s = (iso *)calloc(1, sizeof(iso));
    int64_t T = 1500, t, a, b, i;
    double max_off = 0, max_diag = 0, max_cross = 0;
    double diag_bound = dist == GRZO_NOISE_GAUSSIAN ? 5.0 * sqrt(2.0 / (double)T) : 1e-12;
    REQUIRE(s != NULL);
    memset(&d, 0, sizeof d);
    d.estimator = GRZO_ESTIMATOR_GRZO;
    d.noise = (grzo_noise_dist)dist;
    d.seed = 2024;
    d.sigma = 0.5f;
    d.lr = 1.0f;
    one_init(&o, &d, 3, 4);
    s->D = o.D;
    s->B = 8;
    s->sigma = 0.5;
    for (t = 0; t < T; t++) {
        grzo_step_report rep;
        memset(s->have, 0, sizeof s->have);
        REQUIRE_OK(one_step(&o, s->B, zero_loss, 1.0, s, iso_hook, &rep));
        for (i = 0; i < s->B; i++) REQUIRE(s->have[i]);
        for (i = 0; i < s->B; i++)
            for (a = 0; a < s->D; a++)
                for (b = 0; b < s->D; b++) s->self_sum[a][b] += s->zp[i][a] * s->zp[i][b];
        s->n_self += s->B;
        for (i = 0; i + 1 < s->B; i += 2)
            for (a = 0; a < s->D; a++)
                for (b = 0; b < s->D; b++) s->cross_sum[a][b] += s->zp[i][a] * s->zp[i + 1][b];
        s->n_cross += s->B / 2;
    }
    /* zero losses: no update, theta stays 0 */
    for (a = 0; a < o.D; a++) CHECK(o.theta[a] == 0.0f);
    for (a = 0; a < s->D; a++)
        for (b = 0; b < s->D; b++) {
            double m = s->self_sum[a][b] / (double)s->n_self, c = s->cross_sum[a][b] / (double)s->n_cross;
            if (a == b) {
                if (fabs(m - 1.0) > max_diag) max_diag = fabs(m - 1.0);
            } else if (fabs(m) > max_off) {
                max_off = fabs(m);
            }
            /* per-sample variance of z_ia z_jb: E[U_a^2 U_b^2] = 1, or 3 for a == b Gaussian */
            if (fabs(c) > max_cross / sqrt(a == b && dist == GRZO_NOISE_GAUSSIAN ? 3.0 : 1.0))
                max_cross = fabs(c) / sqrt(a == b && dist == GRZO_NOISE_GAUSSIAN ? 3.0 : 1.0);
        }
    printf("  isotropy dist %d: max|E[zz^T]-I| diag %.4f offdiag %.4f; max|E[z_i z_j^T]| %.4f (bound %.4f)\n",
           dist, max_diag, max_off, max_cross, 5.0 / sqrt((double)s->n_cross));
    CHECKF(max_diag <= diag_bound, "dist %d: E[z_a^2] off by %g (bound %g)", dist, max_diag, diag_bound);
    CHECKF(max_off <= 5.0 / sqrt((double)s->n_self), "dist %d: off-diagonal E[z_a z_b] up to %g", dist, max_off);
    CHECKF(max_cross <= 5.0 / sqrt((double)s->n_cross), "dist %d: E[z_i z_j^T] up to %g", dist, max_cross);
    one_free(&o);
    free(s);
}

/* conditional on U (one step, B = 256 examples): the mean of z_i z_j^T over all pairs i != j
   is 0 for Flipout (pairs are uncorrelated given U, each term has variance U_a^2 U_b^2 = 1),
   while SHARED (z_i = U for all i) gives U U^T, entries +-1. */
typedef struct cond {
    int64_t D;
    double sigma;
    double sum[QMAXD];
    double sq[QMAXD][QMAXD];
} cond;

static void cond_hook(const grzo_pass_info *pi, int64_t seg, float *const *p, void *ud)
{
    cond *s = (cond *)ud;
    int64_t a, b;
    double z[QMAXD];
    if (pi->sign[seg] != 1) return;
    for (a = 0; a < s->D; a++) {
        z[a] = (double)p[0][a] / s->sigma;
        s->sum[a] += z[a];
    }
    for (a = 0; a < s->D; a++)
        for (b = 0; b < s->D; b++) s->sq[a][b] += z[a] * z[b];
}

static double cond_max_pair_mean(grzo_estimator est, uint64_t seed, int64_t B)
{
    grzo_desc d;
    one o;
    cond s;
    grzo_step_report rep;
    int64_t a, b;
    double mx = 0, P = (double)B * (double)(B - 1);
    memset(&d, 0, sizeof d);
    memset(&s, 0, sizeof s);
    d.estimator = est;
    d.seed = seed;
    d.sigma = 0.5f;
    one_init(&o, &d, 3, 4);
    s.D = o.D;
    s.sigma = 0.5;
    REQUIRE_OK(one_step(&o, B, zero_loss, 1.0, &s, cond_hook, &rep));
    /* sum_{i != j} z_i z_j^T = (sum z)(sum z)^T - sum z_i z_i^T */
    for (a = 0; a < s.D; a++)
        for (b = 0; b < s.D; b++) {
            double m = (s.sum[a] * s.sum[b] - s.sq[a][b]) / P;
            if (fabs(m) > mx) mx = fabs(m);
        }
    one_free(&o);
    return mx;
}

static void test_conditional_decorrelation(void)
{
    int64_t B = 256;
    /* ordered pairs: P = B(B-1), unordered P/2 distinct terms, each counted twice */
    double bound = 5.0 / sqrt((double)B * (double)(B - 1) / 2.0);
    uint64_t seed;
    for (seed = 1; seed <= 4; seed++) {
        double m = cond_max_pair_mean(GRZO_ESTIMATOR_GRZO, seed, B);
        CHECKF(m <= bound, "GRZO seed %llu: mean_{i!=j} z_i z_j^T given U reaches %g (bound %g)",
               (unsigned long long)seed, m, bound);
    }
    {
        double m = cond_max_pair_mean(GRZO_ESTIMATOR_SHARED, 1, B);
        CHECKF(m > 0.99, "SHARED: mean z_i z_j^T given U should be U U^T (entries +-1), got max %g", m);
    }
}

/* ============================ 2. unbiasedness ============================================ */
static void test_unbiased(grzo_estimator est, int dist)
{
    grzo_desc d;
    one o;
    quad *q = (quad *)malloc(sizeof(quad));
    int64_t B = 4, T = 3000, t, a, i;
    double g[QMAXD], gi[QMAXD], mean[QMAXD], m2[QMAXD];
    float theta0[QMAXD];
    double chi2 = 0, worst = 0;
    float lr = 1.0f;
    REQUIRE(q != NULL);
    memset(&d, 0, sizeof d);
    d.estimator = est;
    d.noise = (grzo_noise_dist)dist;
    d.seed = 99;
    d.sigma = 0.0625f;
    d.lr = lr;
    one_init(&o, &d, 3, 4);
    quad_init(q, o.D, B, 200);
    tu_fill_dyadic(theta0, (size_t)o.D, 210, -1, 1, 6);
    for (a = 0; a < o.D; a++) { g[a] = 0; mean[a] = 0; m2[a] = 0; }
    for (i = 0; i < B; i++) {
        quad_grad(q, i, theta0, gi);
        for (a = 0; a < o.D; a++) g[a] += gi[a] / (double)B;
    }
    for (t = 0; t < T; t++) {
        grzo_step_report rep;
        memcpy(o.theta, theta0, (size_t)o.D * sizeof(float));
        REQUIRE_OK(one_step(&o, B, quad_loss, 1.0, q, NULL, &rep));
        for (a = 0; a < o.D; a++) {
            double gh = ((double)theta0[a] - (double)o.theta[a]) / lr;
            double dlt = gh - mean[a];
            mean[a] += dlt / (double)(t + 1);
            m2[a] += dlt * (gh - mean[a]);
        }
    }
    for (a = 0; a < o.D; a++) {
        double se = sqrt(m2[a] / (double)(T - 1) / (double)T);
        double z = (mean[a] - g[a]) / se;
        chi2 += z * z;
        if (fabs(z) > worst) worst = fabs(z);
    }
    printf("  unbiased est %d dist %d: worst |z| %.2f, chi2 %.1f over %lld coords\n", (int)est, dist, worst,
           chi2, (long long)o.D);
    CHECKF(worst < 5.0, "estimator %d dist %d: a coordinate of the mean estimate is %.2f SE off the gradient",
           (int)est, dist, worst);
    CHECKF(chi2 < (double)o.D + 6.0 * sqrt(2.0 * (double)o.D), "estimator %d dist %d: chi2 %.1f", (int)est, dist, chi2);
    one_free(&o);
    free(q);
}

/* ============================ 3. scale invariance ========================================= */
static void run_scaled(grzo_estimator est, double k, int steps, float *out, const quad *q, int64_t B)
{
    grzo_desc d;
    one o;
    int s;
    memset(&d, 0, sizeof d);
    d.estimator = est;
    d.seed = 31337;
    d.sigma = 0.0625f;
    d.lr = 0.01f;
    d.norm_eps = 1e-30f;
    d.fzoo_probes = 4;
    one_init(&o, &d, 3, 4);
    memset(o.theta, 0, (size_t)o.D * sizeof(float));
    for (s = 0; s < steps; s++) {
        grzo_step_report rep;
        REQUIRE_OK(one_step(&o, B, quad_loss, k, (void *)q, NULL, &rep));
    }
    memcpy(out, o.theta, (size_t)o.D * sizeof(float));
    one_free(&o);
}

static void test_scaling(void)
{
    quad *q = (quad *)malloc(sizeof(quad));
    int64_t B = 6, D = 12, a;
    float base[QMAXD], scaled[QMAXD];
    static const double ks[4] = { 8.0, 0.25, 3.0, 1000.0 };
    int ki;
    REQUIRE(q != NULL);
    quad_init(q, D, B, 300);
    /* GRZO and FZOO: invariant (three steps) */
    {
        static const grzo_estimator inv[2] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_FZOO };
        int ei;
        for (ei = 0; ei < 2; ei++) {
            double umax = 0;
            run_scaled(inv[ei], 1.0, 3, base, q, B);
            for (a = 0; a < D; a++) umax = fabs(base[a]) > umax ? fabs(base[a]) : umax;
            CHECK(umax > 0);
            for (ki = 0; ki < 4; ki++) {
                double dmax = 0;
                run_scaled(inv[ei], ks[ki], 3, scaled, q, B);
                for (a = 0; a < D; a++) dmax = fabs((double)scaled[a] - base[a]) > dmax ? fabs((double)scaled[a] - base[a]) : dmax;
                if (ks[ki] == 8.0 || ks[ki] == 0.25)   /* exact scaling: bitwise equal */
                    CHECKF(memcmp(scaled, base, (size_t)D * sizeof(float)) == 0,
                           "estimator %d: losses x %g changed the update (max diff %g)", (int)inv[ei], ks[ki], dmax);
                CHECKF(dmax <= 1e-4 * umax, "estimator %d: losses x %g changed the update by %g (update size %g)",
                       (int)inv[ei], ks[ki], dmax, umax);
            }
        }
    }
    /* canonical and MeZO: one step from theta = 0 scales by k */
    {
        static const grzo_estimator lin[2] = { GRZO_ESTIMATOR_CANONICAL, GRZO_ESTIMATOR_MEZO };
        int ei;
        for (ei = 0; ei < 2; ei++) {
            double umax = 0;
            run_scaled(lin[ei], 1.0, 1, base, q, B);
            for (a = 0; a < D; a++) umax = fabs(base[a]) > umax ? fabs(base[a]) : umax;
            CHECK(umax > 0);
            for (ki = 0; ki < 3; ki++) {
                double dmax = 0;
                run_scaled(lin[ei], ks[ki], 1, scaled, q, B);
                for (a = 0; a < D; a++) {
                    double dd = fabs((double)scaled[a] - ks[ki] * base[a]);
                    if (dd > dmax) dmax = dd;
                }
                CHECKF(dmax <= 1e-5 * ks[ki] * umax, "estimator %d: losses x %g: update not scaled by k (off by %g of %g)",
                       (int)lin[ei], ks[ki], dmax, ks[ki] * umax);
            }
        }
    }
    free(q);
}

/* ============================ 4. exact formulas ========================================== */
#define MAXP 12
#define MAXS 34
#define NBLK 3
typedef struct rec {
    int32_t n_passes;
    int64_t n_seg[MAXP];
    int8_t sign[MAXP][MAXS];
    int64_t example[MAXP][MAXS];
    float loss[MAXP][MAXS];
    float *pert[MAXP][MAXS][NBLK];
} rec;

typedef struct multi {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_block blk[NBLK];
    float *data[NBLK], *scratch[NBLK];
    int64_t rows[NBLK], cols[NBLK];
    grzo_block_kind kind[NBLK];
    grzo_desc d;
    quad q;     /* over the concatenation of all blocks (D <= 64) */
} multi;

static const int64_t MR[NBLK] = { 4, 4, 3 }, MC[NBLK] = { 5, 1, 4 };

static void multi_init(multi *m, grzo_estimator est, int dist, float lr, float sigma, float wd, int32_t probes)
{
    int b;
    int64_t D = 0;
    REQUIRE_OK(tu_backend(TU_REF, 1, &m->be));
    m->d = tu_desc(&m->be, est, 0xC0FFEEULL, lr, sigma);
    m->d.noise = (grzo_noise_dist)dist;
    m->d.weight_decay = wd;
    m->d.fzoo_probes = probes;
    m->ctx = tu_ctx(&m->d);
    for (b = 0; b < NBLK; b++) {
        m->rows[b] = MR[b];
        m->cols[b] = MC[b];
        m->kind[b] = b == 1 ? GRZO_BLOCK_VECTOR : GRZO_BLOCK_MATRIX;
        m->data[b] = (float *)tu_alloc(&m->be, (size_t)(MR[b] * MC[b]) * sizeof(float));
        m->scratch[b] = (float *)tu_alloc(&m->be, (size_t)(MR[b] * MC[b]) * sizeof(float));
        tu_fill_dyadic(m->data[b], (size_t)(MR[b] * MC[b]), 400 + (uint32_t)b, -1, 1, 8);
        /* block 2 is flagged no_decay */
        m->blk[b] = tu_block(m->ctx, m->kind[b], MR[b], MC[b], m->data[b], NULL, b == 2);
        D += MR[b] * MC[b];
    }
    quad_init(&m->q, D, QMAXB, 410);
}

static void multi_free(multi *m)
{
    int b;
    grzo_destroy(m->ctx);
    for (b = 0; b < NBLK; b++) {
        grzo_backend_free(&m->be, m->data[b]);
        grzo_backend_free(&m->be, m->scratch[b]);
    }
    grzo_backend_destroy(&m->be);
}

static double multi_loss(const multi *m, int64_t e, float *const *p)
{
    float cat[QMAXD];
    int64_t n = 0, b, i;
    for (b = 0; b < NBLK; b++)
        for (i = 0; i < m->rows[b] * m->cols[b]; i++) cat[n++] = p[b][i];
    return quad_loss_at(&m->q, e, cat);
}

static void rec_free(rec *r)
{
    int32_t p;
    int64_t c;
    int b;
    for (p = 0; p < r->n_passes; p++)
        for (c = 0; c < r->n_seg[p]; c++)
            for (b = 0; b < NBLK; b++) free(r->pert[p][c][b]);
}

/* one step, recording every segment's perturbed parameters and loss */
static grzo_status multi_step(multi *m, int64_t B, rec *r, grzo_step_report *rep, grzo_step_info *si)
{
    int32_t p;
    grzo_status st;
    memset(r, 0, sizeof *r);
    st = grzo_step_begin(m->ctx, B, si);
    if (st) return st;
    REQUIRE(si->n_passes <= MAXP);
    r->n_passes = si->n_passes;
    for (p = 0; p < si->n_passes; p++) {
        grzo_pass_info pi;
        int64_t c;
        REQUIRE_OK(grzo_pass_begin(m->ctx, &pi));
        REQUIRE(pi.n_segments <= MAXS);
        r->n_seg[p] = pi.n_segments;
        for (c = 0; c < pi.n_segments; c++) {
            int b;
            r->sign[p][c] = pi.sign[c];
            r->example[p][c] = pi.example[c];
            for (b = 0; b < NBLK; b++) {
                size_t nb = (size_t)(m->rows[b] * m->cols[b]) * sizeof(float);
                REQUIRE_OK(grzo_perturbed_params(m->ctx, m->blk[b], c, m->scratch[b]));
                r->pert[p][c][b] = (float *)malloc(nb);
                REQUIRE(r->pert[p][c][b] != NULL);
                memcpy(r->pert[p][c][b], m->scratch[b], nb);
            }
            r->loss[p][c] = (float)multi_loss(m, pi.example[c], m->scratch);
        }
        st = grzo_pass_end(m->ctx, r->loss[p]);
        if (st) return st;
    }
    return grzo_step_end(m->ctx, rep);
}

/* |got - want| <= 1e-5 * mag elementwise */
static int near_all(const float *got, const double *want, const double *mag, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-5 * mag[i] + 1e-12)) {
            fprintf(stderr, "  element %lld: got %.9g want %.9g\n", (long long)i, (double)got[i], want[i]);
            return 0;
        }
    return 1;
}

/* the perturbed parameters must be theta + sign sigma Z; returns the number of mismatches */
static int64_t check_perturbation(const multi *m, float *const *before, const float *pert, int b,
                                  const grzo_noise *base, int flipout, int64_t e, double scale)
{
    int64_t j, k, bad = 0, rows = m->rows[b], cols = m->cols[b];
    for (j = 0; j < rows; j++)
        for (k = 0; k < cols; k++) {
            double z = tu_z(base, flipout, m->kind[b] != GRZO_BLOCK_VECTOR, rows, cols, e, j, k);
            double want = (double)before[b][j * cols + k] + scale * z;
            if (!(fabs((double)pert[j * cols + k] - want) <= 1e-6 * (fabs(want) + fabs(scale * z)) + 1e-12)) bad++;
        }
    return bad;
}

static void snapshot(const multi *m, float **before)
{
    int b;
    for (b = 0; b < NBLK; b++) {
        size_t nb = (size_t)(m->rows[b] * m->cols[b]) * sizeof(float);
        before[b] = (float *)malloc(nb);
        REQUIRE(before[b] != NULL);
        memcpy(before[b], m->data[b], nb);
    }
}

static void test_formula_grzo_family(grzo_estimator est, int dist)
{
    multi *m = (multi *)calloc(1, sizeof(multi));
    int64_t B = 5, i, s;
    REQUIRE(m != NULL);
    multi_init(m, est, dist, 0.02f, 0.0625f, 0.25f, 8);
    for (s = 0; s < 3; s++) {
        rec r;
        grzo_step_report rep;
        grzo_step_info si;
        float *before[NBLK];
        double delta[QMAXB], a[QMAXB], mean = 0, var = 0, ms = 0, sd, loss = 0;
        int b;
        snapshot(m, before);
        REQUIRE_OK(multi_step(m, B, &r, &rep, &si));
        CHECK(r.n_passes == 1 && r.n_seg[0] == 2 * B);
        for (i = 0; i < 2 * B; i++) {
            CHECK(r.example[0][i] == i % B);
            CHECK(r.sign[0][i] == (i < B ? 1 : -1));
            loss += r.loss[0][i];
        }
        for (i = 0; i < B; i++) {
            delta[i] = (double)r.loss[0][i] - (double)r.loss[0][B + i];
            mean += delta[i] / (double)B;
            ms += delta[i] * delta[i] / (double)B;
        }
        for (i = 0; i < B; i++) var += (delta[i] - mean) * (delta[i] - mean) / (double)B;
        sd = sqrt(var);
        CHECK(sd > 1e-3 * sqrt(ms));   /* not the degenerate case */
        for (i = 0; i < B; i++) a[i] = est == GRZO_ESTIMATOR_CANONICAL ? delta[i] : delta[i] / (sd + (double)m->d.norm_eps);
        CHECK(rep.step == s && fabs(rep.lr - m->d.lr) <= 1e-9);
        CHECK_NEAR(rep.loss, loss / (double)(2 * B), 1e-6 * fabs(loss));
        if (est == GRZO_ESTIMATOR_GRZO) CHECK_NEAR(rep.delta_std, sd, 1e-6 * sd);
        CHECK(rep.degenerate == 0);
        {   /* the report's update scale: the rms of the B coefficients lr a_i / (2 sigma B) */
            double c2 = 0, c;
            for (i = 0; i < B; i++) {
                c = (double)m->d.lr / (2.0 * m->d.sigma * (double)B) * a[i];
                c2 += c * c / (double)B;
            }
            CHECK_NEAR(rep.coeff_rms, sqrt(c2), 1e-6 * sqrt(c2));
        }
        for (b = 0; b < NBLK; b++) {
            int64_t n = m->rows[b] * m->cols[b], j, k, bad = 0;
            int flip = est != GRZO_ESTIMATOR_SHARED;
            double *want = (double *)malloc((size_t)n * sizeof(double)), *mag = (double *)malloc((size_t)n * sizeof(double));
            double decay = (m->kind[b] == GRZO_BLOCK_VECTOR || b == 2) ? 0.0 : (double)m->d.lr * m->d.weight_decay;
            grzo_noise base = tu_noise(m->d.seed, (uint32_t)s, (uint32_t)b, 0, (uint32_t)dist);
            REQUIRE(want && mag);
            for (i = 0; i < 2 * B; i++)
                bad += check_perturbation(m, before, r.pert[0][i][b], b, &base, flip, i % B,
                                          (i < B ? 1.0 : -1.0) * (double)m->d.sigma);
            CHECKF(bad == 0, "estimator %d block %d: %lld perturbed values are not theta +- sigma Z_i", (int)est, b, (long long)bad);
            for (j = 0; j < m->rows[b]; j++)
                for (k = 0; k < m->cols[b]; k++) {
                    double th = before[b][j * m->cols[b] + k], upd = 0, mg = fabs(th);
                    for (i = 0; i < B; i++) {
                        double c = (double)m->d.lr / (2.0 * m->d.sigma * (double)B) * a[i];
                        upd += c * tu_z(&base, flip, m->kind[b] != GRZO_BLOCK_VECTOR, m->rows[b], m->cols[b], i, j, k);
                        mg += fabs(c);
                    }
                    want[j * m->cols[b] + k] = th - upd - decay * th;
                    mag[j * m->cols[b] + k] = mg;
                }
            CHECKF(near_all(m->data[b], want, mag, n), "estimator %d dist %d step %lld block %d: update != formula",
                   (int)est, dist, (long long)s, b);
            free(want);
            free(mag);
            free(before[b]);
        }
        rec_free(&r);
    }
    multi_free(m);
    free(m);
}

/* MEZO and MEZO_INPLACE: the same perturbations (in place: read back from the parameters
   themselves) and the same update */
static void test_formula_mezo(grzo_estimator est, int dist)
{
    multi *m = (multi *)calloc(1, sizeof(multi));
    int64_t B = 4, i, s;
    REQUIRE(m != NULL);
    multi_init(m, est, dist, 0.01f, 0.0625f, 0.5f, 8);
    for (s = 0; s < 3; s++) {
        rec r;
        grzo_step_report rep;
        grzo_step_info si;
        float *before[NBLK];
        double lp = 0, lm = 0, g;
        int32_t pp = -1, pm = -1, p;
        int b;
        snapshot(m, before);
        REQUIRE_OK(multi_step(m, B, &r, &rep, &si));
        CHECK(r.n_passes == 2);
        for (p = 0; p < r.n_passes; p++) {
            int64_t c;
            CHECK(r.n_seg[p] == B);
            for (c = 0; c < r.n_seg[p]; c++) {
                CHECK(r.example[p][c] == c);
                CHECK(r.sign[p][c] == r.sign[p][0]);
            }
            if (r.sign[p][0] == 1) pp = p;
            if (r.sign[p][0] == -1) pm = p;
        }
        REQUIRE(pp >= 0 && pm >= 0);
        for (i = 0; i < B; i++) { lp += r.loss[pp][i] / (double)B; lm += r.loss[pm][i] / (double)B; }
        g = (lp - lm) / (2.0 * m->d.sigma);
        CHECK_NEAR(rep.loss, 0.5 * (lp + lm), 1e-6 * fabs(lp + lm));
        CHECK_NEAR(rep.delta_std, fabs(lp - lm), 1e-6 * fabs(lp - lm) + 1e-9);
        for (b = 0; b < NBLK; b++) {
            int64_t n = m->rows[b] * m->cols[b], j, bad = 0;
            double *want = (double *)malloc((size_t)n * sizeof(double)), *mag = (double *)malloc((size_t)n * sizeof(double));
            /* MeZO's rule: theta -= lr (g z + wd theta), no decay on vectors (and no_decay blocks) */
            double wd = (m->kind[b] == GRZO_BLOCK_VECTOR || b == 2) ? 0.0 : m->d.weight_decay;
            grzo_noise base = tu_noise(m->d.seed, (uint32_t)s, (uint32_t)b, 0, (uint32_t)dist);
            REQUIRE(want && mag);
            for (i = 0; i < B; i++) {
                bad += check_perturbation(m, before, r.pert[pp][i][b], b, &base, 0, 0, m->d.sigma);
                bad += check_perturbation(m, before, r.pert[pm][i][b], b, &base, 0, 0, -m->d.sigma);
            }
            CHECKF(bad == 0, "MeZO block %d: %lld perturbed values are not theta +- sigma U", b, (long long)bad);
            for (j = 0; j < n; j++) {
                double th = before[b][j], z = grzo_noise_at(&base, (uint64_t)j);
                want[j] = th - (double)m->d.lr * (g * z + wd * th);
                mag[j] = fabs(th) + fabs((double)m->d.lr * g * z);
            }
            CHECKF(near_all(m->data[b], want, mag, n), "MeZO dist %d step %lld block %d: update != theta - lr (g z + wd theta)",
                   dist, (long long)s, b);
            free(want);
            free(mag);
            free(before[b]);
        }
        rec_free(&r);
    }
    multi_free(m);
    free(m);
}

static void test_formula_fzoo(int dist)
{
    multi *m = (multi *)calloc(1, sizeof(multi));
    int64_t B = 3, s;
    int32_t N = 5;
    REQUIRE(m != NULL);
    multi_init(m, GRZO_ESTIMATOR_FZOO, dist, 0.01f, 0.0625f, 0.0f, N);
    for (s = 0; s < 3; s++) {
        rec r;
        grzo_step_report rep;
        grzo_step_info si;
        float *before[NBLK];
        double l[MAXP], l0 = 0, mean = 0, var = 0, sd;
        int32_t p, clean = -1, probe_of_pass[MAXP], j, n_probe = 0, seen[MAXP];
        int b;
        snapshot(m, before);
        REQUIRE_OK(multi_step(m, B, &r, &rep, &si));
        CHECK(r.n_passes == N + 1);
        memset(seen, 0, sizeof seen);
        for (p = 0; p < r.n_passes; p++) {
            int64_t c;
            l[p] = 0;
            CHECK(r.n_seg[p] == B);
            for (c = 0; c < B; c++) {
                CHECK(r.example[p][c] == c && r.sign[p][c] == r.sign[p][0]);
                l[p] += r.loss[p][c] / (double)B;
            }
            probe_of_pass[p] = -1;
            if (r.sign[p][0] == 0) {
                CHECK(clean < 0);
                clean = p;
                /* the clean pass reads theta itself, bitwise */
                for (b = 0; b < NBLK; b++)
                    for (c = 0; c < B; c++)
                        CHECK(memcmp(r.pert[p][c][b], before[b], (size_t)(m->rows[b] * m->cols[b]) * sizeof(float)) == 0);
                continue;
            }
            CHECK(r.sign[p][0] == 1);
            /* which probe stream is this pass? u = (p - theta) / sigma against stream 16 + j */
            for (j = 0; j < N; j++) {
                int64_t bad = 0;
                for (b = 0; b < NBLK; b++) {
                    grzo_noise base = tu_noise(m->d.seed, (uint32_t)s, (uint32_t)b, GRZO_STREAM_FZOO0 + (uint32_t)j, (uint32_t)dist);
                    for (c = 0; c < B; c++) bad += check_perturbation(m, before, r.pert[p][c][b], b, &base, 0, 0, m->d.sigma);
                }
                if (bad == 0) { probe_of_pass[p] = j; seen[j]++; n_probe++; break; }
            }
            CHECKF(probe_of_pass[p] >= 0, "FZOO pass %d: perturbation is not theta + sigma u_j for any probe stream 16+j", p);
        }
        REQUIRE(clean >= 0);
        CHECK(n_probe == N);
        for (j = 0; j < N; j++) CHECKF(seen[j] == 1, "FZOO probe %d used %d times", j, seen[j]);
        l0 = l[clean];
        for (p = 0; p < r.n_passes; p++) if (p != clean) mean += (l[p] - l0) / N;
        for (p = 0; p < r.n_passes; p++) if (p != clean) var += (l[p] - l0 - mean) * (l[p] - l0 - mean) / N;
        sd = sqrt(var);
        CHECK_NEAR(rep.loss, l0, 1e-6 * fabs(l0));
        CHECK_NEAR(rep.delta_std, sd, 1e-6 * sd);
        for (b = 0; b < NBLK; b++) {
            int64_t n = m->rows[b] * m->cols[b], k;
            double *want = (double *)malloc((size_t)n * sizeof(double)), *mag = (double *)malloc((size_t)n * sizeof(double));
            REQUIRE(want && mag);
            for (k = 0; k < n; k++) { want[k] = before[b][k]; mag[k] = fabs(want[k]); }
            /* theta -= lr sum_j c_j u_j, c_j = (l_j - l_0) / (N std) */
            for (p = 0; p < r.n_passes; p++) {
                double cj;
                grzo_noise base;
                if (p == clean || probe_of_pass[p] < 0) continue;
                cj = (double)m->d.lr * (l[p] - l0) / ((double)N * sd);
                base = tu_noise(m->d.seed, (uint32_t)s, (uint32_t)b, GRZO_STREAM_FZOO0 + (uint32_t)probe_of_pass[p], (uint32_t)dist);
                for (k = 0; k < n; k++) {
                    want[k] -= cj * grzo_noise_at(&base, (uint64_t)k);
                    mag[k] += fabs(cj);
                }
            }
            CHECKF(near_all(m->data[b], want, mag, n), "FZOO dist %d step %lld block %d: update != formula", dist, (long long)s, b);
            free(want);
            free(mag);
            free(before[b]);
        }
        rec_free(&r);
    }
    multi_free(m);
    free(m);
}

/* grzo_group_normalize on its own: population std, eps, the degenerate guard */
static void test_group_normalize(void)
{
    double delta[5] = { 0.3, -0.1, 0.25, 0.0, -0.45 }, a[5], mean = 0, var = 0, sd;
    int32_t deg = -1;
    int i;
    for (i = 0; i < 5; i++) mean += delta[i] / 5.0;
    for (i = 0; i < 5; i++) var += (delta[i] - mean) * (delta[i] - mean) / 5.0;
    sd = sqrt(var);
    CHECK_OK(grzo_group_normalize(delta, 5, 1e-3, a, &deg));
    CHECK(deg == 0);
    for (i = 0; i < 5; i++) CHECK_NEAR(a[i], delta[i] / (sd + 1e-3), 1e-12);
    /* no mean subtraction: a shifted group keeps its sign pattern */
    for (i = 0; i < 5; i++) CHECK((a[i] > 0) == (delta[i] > 0));
    /* all equal: s -> rms, a_i = sign(delta_i) (eps 0) */
    {
        double same[3] = { -0.2, -0.2, -0.2 };
        CHECK_OK(grzo_group_normalize(same, 3, 0.0, a, &deg));
        CHECK(deg == 1);
        for (i = 0; i < 3; i++) CHECK_NEAR(a[i], -1.0, 1e-12);
        CHECK_OK(grzo_group_normalize(same, 1, 0.0, a, NULL));
        CHECK_NEAR(a[0], -1.0, 1e-12);
    }
    /* all zero: no update */
    {
        double z[4] = { 0, 0, 0, 0 };
        CHECK_OK(grzo_group_normalize(z, 4, 1e-8, a, &deg));
        for (i = 0; i < 4; i++) CHECK(a[i] == 0.0);
    }
    /* invariant to scaling (eps 0) */
    {
        double scaled[5], b[5];
        for (i = 0; i < 5; i++) scaled[i] = 37.0 * delta[i];
        CHECK_OK(grzo_group_normalize(delta, 5, 0.0, a, NULL));
        CHECK_OK(grzo_group_normalize(scaled, 5, 0.0, b, NULL));
        for (i = 0; i < 5; i++) CHECK_NEAR(a[i], b[i], 1e-12);
    }
    /* bad input */
    delta[2] = NAN;
    CHECK_ST(grzo_group_normalize(delta, 5, 1e-8, a, NULL), GRZO_ERR_NONFINITE);
    delta[2] = 0.25;
    CHECK_ST(grzo_group_normalize(NULL, 5, 1e-8, a, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_group_normalize(delta, 5, 1e-8, NULL, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_group_normalize(delta, 0, 1e-8, a, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_group_normalize(delta, 5, -1.0, a, NULL), GRZO_ERR_INVALID_ARG);
}

/* ============================ 5. variance law ============================================ */
typedef struct lin {
    int64_t D, B;
    double g[QMAXB][QMAXD];
} lin;

static double lin_loss(int64_t e, float *const *p, void *ud)
{
    const lin *L = (const lin *)ud;
    double l = 0;
    int64_t a;
    for (a = 0; a < L->D; a++) l += L->g[e][a] * p[0][a];
    return l;
}

/* g_i = sqrt(c) q_0 + sqrt(1 - c) q_i with q_0..q_B orthonormal: |g_i| = 1, g_i . g_j = c */
static void lin_init(lin *L, int64_t D, int64_t B, double c)
{
    double q[QMAXB + 1][QMAXD];
    int64_t i, j, a;
    REQUIRE(B + 1 <= D);
    L->D = D;
    L->B = B;
    for (i = 0; i <= B; i++) {
        double nrm = 0;
        for (a = 0; a < D; a++) q[i][a] = tu_gauss(500, (uint64_t)(i * QMAXD + a));
        for (j = 0; j < i; j++) {
            double dot = 0;
            for (a = 0; a < D; a++) dot += q[i][a] * q[j][a];
            for (a = 0; a < D; a++) q[i][a] -= dot * q[j][a];
        }
        for (a = 0; a < D; a++) nrm += q[i][a] * q[i][a];
        nrm = sqrt(nrm);
        for (a = 0; a < D; a++) q[i][a] /= nrm;
    }
    for (i = 0; i < B; i++)
        for (a = 0; a < D; a++) L->g[i][a] = sqrt(c) * q[0][a] + sqrt(1.0 - c) * q[i + 1][a];
}

/* mean of |g_hat - g|^2 over T steps (theta reset to 0 before each) */
static double est_variance(grzo_estimator est, const lin *L, int64_t T, double *rel_se)
{
    grzo_desc d;
    one o;
    int64_t t, a, i;
    double g[QMAXD], s = 0, s2 = 0;
    memset(&d, 0, sizeof d);
    d.estimator = est;
    d.noise = GRZO_NOISE_RADEMACHER;
    d.seed = 777 + (uint64_t)est * 1000 + (uint64_t)L->B;
    d.sigma = 0.5f;
    d.lr = 1.0f;
    one_init(&o, &d, 8, 8);
    REQUIRE(o.D == L->D);
    for (a = 0; a < L->D; a++) {
        g[a] = 0;
        for (i = 0; i < L->B; i++) g[a] += L->g[i][a] / (double)L->B;
    }
    for (t = 0; t < T; t++) {
        grzo_step_report rep;
        double e2 = 0;
        memset(o.theta, 0, (size_t)o.D * sizeof(float));
        REQUIRE_OK(one_step(&o, L->B, lin_loss, 1.0, (void *)L, NULL, &rep));
        for (a = 0; a < L->D; a++) {
            double gh = -(double)o.theta[a];   /* lr = 1, theta was 0 */
            e2 += (gh - g[a]) * (gh - g[a]);
        }
        s += e2;
        s2 += e2 * e2;
    }
    s /= (double)T;
    s2 /= (double)T;
    *rel_se = sqrt((s2 - s * s) / (double)T) / s;
    one_free(&o);
    return s;
}

static void test_variance_law(void)
{
    static const int64_t Bs[3] = { 1, 4, 16 };
    static const double cs[3] = { 0.0, 0.5, 1.0 };
    int bi, ci;
    int64_t T = 2500;
    lin *L = (lin *)malloc(sizeof(lin));
    REQUIRE(L != NULL);
    for (bi = 0; bi < 3; bi++)
        for (ci = 0; ci < 3; ci++) {
            double vm, vc, sem, sec, ratio, pred;
            if (Bs[bi] == 1 && ci > 0) continue;  /* B = 1: one example, c undefined; ratio 1 */
            lin_init(L, 64, Bs[bi], cs[ci]);
            vm = est_variance(GRZO_ESTIMATOR_MEZO, L, T, &sem);
            vc = est_variance(GRZO_ESTIMATOR_CANONICAL, L, T, &sec);
            ratio = vm / vc;
            pred = cs[ci] * (double)Bs[bi] + 1.0 - cs[ci];
            printf("  variance B=%2lld c=%.1f: MeZO %.3f canonical %.3f ratio %.3f predicted %.3f (rel SE %.3f)\n",
                   (long long)Bs[bi], cs[ci], vm, vc, ratio, pred, sqrt(sem * sem + sec * sec));
            CHECKF(fabs(ratio / pred - 1.0) < 0.15, "B=%lld c=%.1f: Var(MeZO)/Var(canonical) = %.3f, predicted %.3f",
                   (long long)Bs[bi], cs[ci], ratio, pred);
            /* absolute level: Var(MeZO) = (D - 1) |g|^2 (trace), |g|^2 = (1 + (B-1)c)/B */
            {
                double g2 = (1.0 + (double)(Bs[bi] - 1) * cs[ci]) / (double)Bs[bi];
                CHECKF(fabs(vm / (63.0 * g2) - 1.0) < 0.15, "B=%lld c=%.1f: Var(MeZO) = %.3f, predicted %.3f",
                       (long long)Bs[bi], cs[ci], vm, 63.0 * g2);
                CHECKF(fabs(vc / (63.0 / (double)Bs[bi]) - 1.0) < 0.15, "B=%lld c=%.1f: Var(canonical) = %.3f, predicted %.3f",
                       (long long)Bs[bi], cs[ci], vc, 63.0 / (double)Bs[bi]);
            }
        }
    free(L);
}

/* ============================ 6. in-place MeZO ============================================ */
static double ulp_of(float x)
{
    float a = fabsf(x);
    return (double)nextafterf(a, INFINITY) - (double)a;
}

typedef struct ip_loss {
    const quad *q;
    int64_t calls, nan_at;      /* the loss of call nan_at is NaN (-1: never) */
} ip_loss;

static double ip_quad_loss(int64_t e, float *const *p, void *ud)
{
    ip_loss *l = (ip_loss *)ud;
    double v = quad_loss_at(l->q, e % l->q->n_ex, p[0]);
    return l->calls++ == l->nan_at ? NAN : v;
}

static void one_init_est(one *o, grzo_estimator est, int dist, float lr, float sigma, float wd, int64_t rows,
                         int64_t cols, uint32_t stream)
{
    grzo_desc d = tu_desc(NULL, est, 0xB0A7ULL, lr, sigma);
    d.noise = (grzo_noise_dist)dist;
    d.weight_decay = wd;
    one_init(o, &d, rows, cols);
    tu_fill_unif(o->theta, (size_t)o->D, stream, -1, 1);   /* not dyadic: every shift rounds */
}

/* In-place MeZO against MeZO through the operations, from the same parameters over the same
   quadratic losses, 50 steps. They differ only by rounding: the "-" pass of the in-place form
   reads fl(fl(theta + sigma z) - 2 sigma z) instead of fl(theta - sigma z) (one rounding per
   weight, |.| <= ulp), the restore rounds again, and the losses' differences (~ |grad| ulp
   sqrt(D)) reach the update through g = (l+ - l-) / (2 sigma). Stated fp32 tolerance, per
   step: |theta_inplace - theta_mezo| <= 3 ulp(theta) + lr |grad| ulp sqrt(D) / sigma, i.e.
   max |diff| <= 1e-5 max |theta| after 50 steps at lr = sigma = 1e-3 (measured 4e-6, printed). */
static void test_mezo_inplace_matches_mezo(int dist)
{
    enum { ROWS = 8, COLS = 8, B = 4, T = 50 };
    quad *q = (quad *)calloc(1, sizeof(quad));
    one ip, ops;
    ip_loss l1 = { NULL, 0, -1 }, l2 = { NULL, 0, -1 };
    double max_diff = 0, max_theta = 0, max_move = 0;
    int64_t i;
    int t;
    REQUIRE(q != NULL);
    quad_init(q, ROWS * COLS, B, 620);
    l1.q = l2.q = q;
    one_init_est(&ip, GRZO_ESTIMATOR_MEZO_INPLACE, dist, 1e-3f, 1e-3f, 0.1f, ROWS, COLS, 630);
    one_init_est(&ops, GRZO_ESTIMATOR_MEZO, dist, 1e-3f, 1e-3f, 0.1f, ROWS, COLS, 630);
    for (t = 0; t < T; t++) {
        grzo_step_report r1, r2;
        float before = ops.theta[0];
        REQUIRE_OK(one_step(&ip, B, ip_quad_loss, 1.0, &l1, NULL, &r1));
        REQUIRE_OK(one_step(&ops, B, ip_quad_loss, 1.0, &l2, NULL, &r2));
        CHECKF(fabs(r1.loss - r2.loss) <= 1e-5 * fabs(r2.loss), "dist %d step %d: mean loss %.9g (in place) vs %.9g", dist, t,
               r1.loss, r2.loss);
        max_move = fmax(max_move, fabs((double)ops.theta[0] - before));
    }
    for (i = 0; i < ip.D; i++) {
        max_diff = fmax(max_diff, fabs((double)ip.theta[i] - ops.theta[i]));
        max_theta = fmax(max_theta, fabs((double)ops.theta[i]));
    }
    printf("  mezo_inplace dist %d: after %d steps max |inplace - mezo| = %.3g (max |theta| %.3g, one step moves ~%.3g)\n",
           dist, T, max_diff, max_theta, max_move);
    CHECKF(max_diff <= 1e-5 * max_theta, "dist %d: in-place MeZO left MeZO's trajectory: max diff %.3g > 1e-5 * %.3g", dist,
           max_diff, max_theta);
    CHECKF(max_move > 0, "dist %d: the parameters did not move (the comparison would be empty)", dist);
    one_free(&ip);
    one_free(&ops);
    free(q);
}

/* Restore drift: with equal losses MeZO's update is zero, so whatever moves the parameters is
   the rounding of the three shifts +sigma z, -2 sigma z, +sigma z. fp32, round to nearest:
   each shift rounds once (<= ulp/2 of |theta| + 2 sigma |z|), so a step drifts <= 1.5 ulp and
   T steps <= 1.5 T ulp: the bound checked here. It is not a random walk: the rounding error
   of theta +- sigma is a fixed function of theta, and theta hardly moves, so for Rademacher z
   the same two errors recur and the drift of a weight grows linearly until it crosses to
   another value. Measured (printed), 4096 weights in (-1, 1), sigma = 1e-3, 1000 steps:
   Rademacher max ~750 ulp(theta_0) = 1.5e-5 absolute (sigma / 65), mean ~10 ulp, 2/3 of the
   weights bitwise back; Gaussian max 5e-6, mean ~18 ulp, almost none bitwise back. The
   second check is an empirical guard: drift < sigma / 10 (a missing or doubled restore moves
   a weight by ~sigma at once). */
static void test_mezo_inplace_drift(int dist)
{
    enum { ROWS = 64, COLS = 64, B = 2, T = 1000 };
    one o;
    float *theta0;
    double max_ulps = 0, sum_ulps = 0, max_abs = 0, max_bound = 0, zmax = dist == GRZO_NOISE_GAUSSIAN ? 6.0 : 1.0;
    int64_t i, exact = 0;
    int t;
    one_init_est(&o, GRZO_ESTIMATOR_MEZO_INPLACE, dist, 1e-3f, 1e-3f, 0.0f, ROWS, COLS, 640);
    theta0 = (float *)malloc((size_t)o.D * sizeof(float));
    REQUIRE(theta0 != NULL);
    memcpy(theta0, o.theta, (size_t)o.D * sizeof(float));
    for (t = 0; t < T; t++) REQUIRE_OK(one_step(&o, B, zero_loss, 1.0, NULL, NULL, NULL));
    CHECK(grzo_get_step(o.ctx) == T);
    for (i = 0; i < o.D; i++) {
        double d = fabs((double)o.theta[i] - theta0[i]), u = d / ulp_of(theta0[i]);
        max_ulps = fmax(max_ulps, u);
        /* drift in units of the worst case 1.5 T ulp(|theta| + 2 sigma |z|max) */
        max_bound = fmax(max_bound, d / (1.5 * T * ulp_of(fabsf(theta0[i]) + (float)(2e-3 * zmax))));
        sum_ulps += u;
        max_abs = fmax(max_abs, d);
        exact += o.theta[i] == theta0[i];
    }
    printf("  mezo_inplace drift dist %d, fp32, %d steps, sigma 1e-3: max %.1f ulp (%.3g abs), mean %.2f ulp, %lld of %lld "
           "weights bitwise back\n", dist, T, max_ulps, max_abs, sum_ulps / (double)o.D, (long long)exact, (long long)o.D);
    printf("  (largest drift = %.3g of the worst-case bound 1.5 T ulp)\n", max_bound);
    CHECKF(max_bound <= 1.0, "dist %d: restore drift exceeds 1.5 T ulp(|theta| + 2 sigma |z|) (%.3g of it)", dist, max_bound);
    CHECKF(max_abs < 1e-3 / 10, "dist %d: restore drift %.3g after %d steps is not below sigma / 10", dist, max_abs, T);
    free(theta0);
    one_free(&o);
}

/* within the rounding of the shifts: |theta - theta0| <= 2 ulp(|theta0| + 2 sigma |z|max) */
static int64_t count_not_restored(const one *o, const float *theta0, double sigma_zmax)
{
    int64_t i, bad = 0;
    for (i = 0; i < o->D; i++)
        if (!(fabs((double)o->theta[i] - theta0[i]) <= 2.0 * ulp_of(fabsf(theta0[i]) + (float)(2.0 * sigma_zmax)))) bad++;
    return bad;
}

/* a backend whose synchronize fails on its n-th call (grzo_pass_end calls it once per pass) */
static int sync_fail_countdown;
static grzo_status sync_fails_once(void *self)
{
    (void)self;
    return (sync_fail_countdown > 0 && --sync_fail_countdown == 0) ? GRZO_ERR_BACKEND : GRZO_OK;
}

/* A NaN loss in either pass, a failed forward, or grzo_step_abort between the passes writes the
   parameters back (within rounding, not bitwise: see grzo.h section 3), applies no update, and
   leaves the step counter; during a pass the parameters really are theta +- sigma z. */
static void test_mezo_inplace_restore(void)
{
    enum { ROWS = 8, COLS = 8, B = 4 };
    quad *q = (quad *)calloc(1, sizeof(quad));
    one o;
    float theta0[ROWS * COLS];
    int64_t nan_calls[2] = { 1, B + 2 }, bad, i;   /* a call of pass 0, one of pass 1 */
    int k;
    float sigma = 1e-2f;
    grzo_noise u = { 0xB0A7ULL, 0, 0, GRZO_STREAM_BASE, GRZO_NOISE_RADEMACHER };
    REQUIRE(q != NULL);
    quad_init(q, ROWS * COLS, B, 650);
    one_init_est(&o, GRZO_ESTIMATOR_MEZO_INPLACE, GRZO_NOISE_RADEMACHER, 1e-2f, sigma, 0.1f, ROWS, COLS, 660);
    memcpy(theta0, o.theta, sizeof theta0);
    for (k = 0; k < 2; k++) {
        ip_loss l = { NULL, 0, -1 };
        l.q = q;
        l.nan_at = nan_calls[k];
        memcpy(theta0, o.theta, sizeof theta0);
        CHECK_ST(one_step(&o, B, ip_quad_loss, 1.0, &l, NULL, NULL), GRZO_ERR_NONFINITE);
        CHECK(grzo_get_step(o.ctx) == 0);
        bad = count_not_restored(&o, theta0, sigma);
        CHECKF(bad == 0, "NaN in pass %d: %lld weights not restored within rounding", k, (long long)bad);
    }
    /* the perturbation is in the parameters during a pass; abort between passes restores */
    {
        grzo_step_info si;
        grzo_pass_info pi;
        float losses[B] = { 1, 2, 3, 4 };
        int64_t off = 0;
        memcpy(theta0, o.theta, sizeof theta0);
        REQUIRE_OK(grzo_step_begin(o.ctx, B, &si));
        REQUIRE_OK(grzo_pass_begin(o.ctx, &pi));
        for (i = 0; i < o.D; i++)
            off += !(fabs((double)o.theta[i] - ((double)theta0[i] + sigma * grzo_noise_at(&u, (uint64_t)i))) <= ulp_of(theta0[i]) * 2);
        CHECKF(off == 0, "pass 0: %lld parameters are not theta + sigma z in place", (long long)off);
        REQUIRE_OK(grzo_pass_end(o.ctx, losses));
        REQUIRE_OK(grzo_pass_begin(o.ctx, &pi));
        off = 0;
        for (i = 0; i < o.D; i++)
            off += !(fabs((double)o.theta[i] - ((double)theta0[i] - sigma * grzo_noise_at(&u, (uint64_t)i))) <= ulp_of(theta0[i]) * 3);
        CHECKF(off == 0, "pass 1: %lld parameters are not theta - sigma z in place", (long long)off);
        CHECK_OK(grzo_step_abort(o.ctx));
        bad = count_not_restored(&o, theta0, sigma);
        CHECKF(bad == 0, "abort between passes: %lld weights not restored within rounding", (long long)bad);
        CHECK(grzo_get_step(o.ctx) == 0);
    }
    /* a failure the backend reports only at the pass's end (an asynchronous backend's error
       flag): grzo_pass_end abandons the step, and the parameters come back */
    {
        grzo_backend_i failing = *o.be.iface;
        const grzo_backend_i *orig = o.be.iface;
        ip_loss l = { NULL, 0, -1 };
        l.q = q;
        memcpy(theta0, o.theta, sizeof theta0);   /* each abandoned step rounds anew: compare with just before */
        failing.synchronize = sync_fails_once;
        o.be.iface = &failing;   /* the context holds &o.be */
        sync_fail_countdown = 2;  /* pass 0's synchronize passes, pass 1's fails */
        CHECK_ST(one_step(&o, B, ip_quad_loss, 1.0, &l, NULL, NULL), GRZO_ERR_BACKEND);
        CHECKF(strstr(grzo_last_error(o.ctx), "grzo_pass_end") != NULL, "error names grzo_pass_end: %s", grzo_last_error(o.ctx));
        o.be.iface = orig;
        CHECK(grzo_get_step(o.ctx) == 0);
        bad = count_not_restored(&o, theta0, sigma);
        CHECKF(bad == 0, "backend failure at pass end: %lld weights not restored within rounding", (long long)bad);
    }
    /* and training goes on normally afterwards */
    {
        ip_loss l = { NULL, 0, -1 };
        l.q = q;
        CHECK_OK(one_step(&o, B, ip_quad_loss, 1.0, &l, NULL, NULL));
        CHECK(grzo_get_step(o.ctx) == 1);
    }
    one_free(&o);
    free(q);
}

int main(int argc, char **argv)
{
    tu_args(argc, argv);
    if (tu_case("group_normalize")) test_group_normalize();
    if (tu_case("isotropy")) test_isotropy(GRZO_NOISE_RADEMACHER);
    if (tu_case("isotropy")) test_isotropy(GRZO_NOISE_GAUSSIAN);
    if (tu_case("decorrelation")) test_conditional_decorrelation();
    if (tu_case("unbiased")) test_unbiased(GRZO_ESTIMATOR_CANONICAL, GRZO_NOISE_RADEMACHER);
    if (tu_case("unbiased")) test_unbiased(GRZO_ESTIMATOR_CANONICAL, GRZO_NOISE_GAUSSIAN);
    if (tu_case("unbiased")) test_unbiased(GRZO_ESTIMATOR_MEZO, GRZO_NOISE_RADEMACHER);
    if (tu_case("scaling")) test_scaling();
    if (tu_case("formula_grzo")) test_formula_grzo_family(GRZO_ESTIMATOR_GRZO, GRZO_NOISE_RADEMACHER);
    if (tu_case("formula_grzo")) test_formula_grzo_family(GRZO_ESTIMATOR_GRZO, GRZO_NOISE_GAUSSIAN);
    if (tu_case("formula_canonical")) test_formula_grzo_family(GRZO_ESTIMATOR_CANONICAL, GRZO_NOISE_RADEMACHER);
    if (tu_case("formula_shared")) test_formula_grzo_family(GRZO_ESTIMATOR_SHARED, GRZO_NOISE_RADEMACHER);
    if (tu_case("formula_mezo")) test_formula_mezo(GRZO_ESTIMATOR_MEZO, GRZO_NOISE_RADEMACHER);
    if (tu_case("formula_mezo")) test_formula_mezo(GRZO_ESTIMATOR_MEZO, GRZO_NOISE_GAUSSIAN);
    if (tu_case("formula_mezo_inplace")) test_formula_mezo(GRZO_ESTIMATOR_MEZO_INPLACE, GRZO_NOISE_RADEMACHER);
    if (tu_case("formula_mezo_inplace")) test_formula_mezo(GRZO_ESTIMATOR_MEZO_INPLACE, GRZO_NOISE_GAUSSIAN);
    if (tu_case("mezo_inplace")) test_mezo_inplace_matches_mezo(GRZO_NOISE_RADEMACHER);
    if (tu_case("mezo_inplace")) test_mezo_inplace_matches_mezo(GRZO_NOISE_GAUSSIAN);
    if (tu_case("mezo_inplace")) test_mezo_inplace_drift(GRZO_NOISE_RADEMACHER);
    if (tu_case("mezo_inplace")) test_mezo_inplace_drift(GRZO_NOISE_GAUSSIAN);
    if (tu_case("mezo_inplace")) test_mezo_inplace_restore();
    if (tu_case("formula_fzoo")) test_formula_fzoo(GRZO_NOISE_RADEMACHER);
    if (tu_case("formula_fzoo")) test_formula_fzoo(GRZO_NOISE_GAUSSIAN);
    if (tu_case("variance_law")) test_variance_law();
    return tu_finish("test_estimators");
}
