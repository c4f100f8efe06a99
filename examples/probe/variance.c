/* variance.c - Var(MeZO) / Var(canonical) against B_eff = c B + 1 - c.

   What is measured. At fixed parameters and a fixed batch (examples 0..B-1 of a regime's
   32), each draw is one grzo step read back as g_hat; the variance of an estimator is
   E |g_hat - g|^2 over draws, with g the exact mean gradient of the batch. MeZO and the
   canonical (unnormalized) GRZO estimator are drawn independently.

   What theory says (exact for a loss linear in the parameters, which a small sigma
   approaches). With m = mean |g_i|^2 and the norm-weighted pairwise cosine
   c_w = sum_{i!=j} g_i.g_j / ((B-1) sum_i |g_i|^2):
     Rademacher:  Var(MeZO) = (D-1) |g|^2,  Var(can) = (D-1) m / B,
                  ratio = B |g|^2 / m = 1 + (B-1) c_w, i.e. B_eff when the per-example
                  gradients have equal norms (then c_w is the mean pairwise cosine c).
     Gaussian:    Var(MeZO) = (D+1) |g|^2, and the fourth moment m4 = 3 of the shared
                  base U adds (m4-1) |g|^2 to Var(can) (Theorem "Variance Bound"):
                  Var(can) = (D-1) m / B + 2 |g|^2, a floor that does not shrink with B,
                  and ratio = (D+1) B_eff / (D - 1 + 2 B_eff).
   The floor's share is O(B/D), so the probe uses a 108-parameter MLP to make it visible;
   at LLM scale it is negligible, as the paper says. */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mlp_shape VAR_SHAPE = {8, 8, 4};       /* D = 108 */
static const int VAR_B[] = {1, 2, 4, 8, 16, 32};
enum { N_B = 6, N_REGIMES = 2, N_NOISE = 2, N_EST = 2, VAR_POOL = 32 };
enum { VAR_DRAWS = 20000, VAR_DRAWS_QUICK = 2000, VAR_CHUNK = 500 };
#define VAR_SIGMA 1e-3f
#define VAR_MARGIN 0.20          /* --check: |ratio / B_eff - 1| for Rademacher */

typedef struct regime {
    const char *name;
    data_spec spec;
} regime;

/* aligned: inputs close to one shared direction, one label (c about 0.9); diverse: inputs
   as spread as they are shared, 70% one label and the rest random (c from -0.4 to 0.35,
   by batch: two examples of different labels point apart) */
static const regime REGIMES[N_REGIMES] = {
    {"aligned", {VAR_POOL, 1.0f, 0.3f, LABEL_MAJORITY, 1.0f}},
    {"diverse", {VAR_POOL, 1.0f, 1.0f, LABEL_MAJORITY, 0.7f}},
};
static const grzo_noise_dist NOISES[N_NOISE] = {GRZO_NOISE_RADEMACHER, GRZO_NOISE_GAUSSIAN};
static const char *const NOISE_NAMES[N_NOISE] = {"rademacher", "gaussian"};

typedef struct variance_job {
    const probe_opts *o;
    dataset data[N_REGIMES];
    float *theta0;
    double *g_bar[N_REGIMES][N_B];
    grad_geometry geo[N_REGIMES][N_B];
    int chunks;                 /* per (regime, noise, B, estimator) */
    int64_t D;
    running_stat *err;          /* one per unit */
} variance_job;

/* unit u -> (regime, noise, B, estimator, chunk), chunk fastest */
static void unit_coords(const variance_job *j, int u, int *r, int *nz, int *b, int *e, int *chunk) {
    *chunk = u % j->chunks;
    u /= j->chunks;
    *e = u % N_EST;
    u /= N_EST;
    *b = u % N_B;
    u /= N_B;
    *nz = u % N_NOISE;
    *r = u / N_NOISE;
}

static grzo_estimator estimator_of(const probe_opts *o, int e) {
    if (e == 0 || o->sabotage) return GRZO_ESTIMATOR_MEZO;   /* sabotage: MeZO named canonical */
    return GRZO_ESTIMATOR_CANONICAL;
}

static grzo_status variance_unit(int u, void *user) {
    variance_job *j = (variance_job *)user;
    probe_model m;
    grzo_desc desc;
    int r, nz, b, e, chunk, k, B, idx[VAR_POOL];
    double *g_hat = (double *)malloc((size_t)j->D * sizeof(double));
    grzo_status s;
    unit_coords(j, u, &r, &nz, &b, &e, &chunk);
    B = VAR_B[b];
    if (!g_hat) return probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    for (k = 0; k < B; k++) idx[k] = k;
    memset(&desc, 0, sizeof desc);
    desc.estimator = estimator_of(j->o, e);
    desc.noise = NOISES[nz];
    desc.seed = seed_mix(j->o->seed, 0x7661720000ull + (uint64_t)u);
    desc.lr = 1.0f;
    desc.sigma = VAR_SIGMA;
    s = model_create(&m, VAR_SHAPE, &desc, j->theta0);
    for (k = 0; s == GRZO_OK && k < VAR_CHUNK; k++) {
        int64_t q;
        double acc = 0.0;
        s = model_draw(&m, &j->data[r], idx, B, NULL, g_hat, NULL, NULL);
        for (q = 0; s == GRZO_OK && q < j->D; q++) {
            double d = g_hat[q] - j->g_bar[r][b][q];
            acc += d * d;
        }
        if (s == GRZO_OK) stat_add(&j->err[u], acc);
    }
    model_destroy(&m);
    free(g_hat);
    return s;
}

typedef struct variance_row {
    int regime, noise, B;
    double c, c_w, b_eff, theory;
    double v_mezo, se_mezo, v_can, se_can, ratio, ratio_se;
    double v_mezo_exact, v_can_exact;   /* the closed forms for a linear loss (top comment) */
} variance_row;

/* Var(MeZO) and Var(canonical) in closed form from the batch's gradients, m = mean |g_i|^2:
   Rademacher (D-1) |g|^2 and (D-1) m / B; Gaussian (D+1) |g|^2 and (D-1) m / B + 2 |g|^2. */
static void exact_variances(const grad_geometry *geo, double D, int B, int gaussian, double *v_mezo, double *v_can) {
    double g2 = geo->batch_sq_norm, m = geo->mean_sq_norm;
    *v_mezo = (gaussian ? D + 1.0 : D - 1.0) * g2;
    *v_can = (D - 1.0) * m / B + (gaussian ? 2.0 * g2 : 0.0);
}

static running_stat merged(const variance_job *j, int r, int nz, int b, int e) {
    running_stat s = {0, 0, 0};
    int chunk, base = (((r * N_NOISE + nz) * N_B + b) * N_EST + e) * j->chunks;
    for (chunk = 0; chunk < j->chunks; chunk++) stat_merge(&s, &j->err[base + chunk]);
    return s;
}

static variance_row summarize(const variance_job *j, int r, int nz, int b) {
    variance_row w;
    running_stat mz = merged(j, r, nz, b, 0), cn = merged(j, r, nz, b, 1);
    double D = (double)j->D;
    memset(&w, 0, sizeof w);
    w.regime = r;
    w.noise = nz;
    w.B = VAR_B[b];
    w.c = j->geo[r][b].mean_cos;
    w.c_w = j->geo[r][b].weighted_cos;
    w.b_eff = b_eff_of(w.c, w.B);
    w.theory = NOISES[nz] == GRZO_NOISE_GAUSSIAN ? (D + 1.0) * w.b_eff / (D - 1.0 + 2.0 * w.b_eff) : w.b_eff;
    w.v_mezo = stat_mean(&mz);
    w.se_mezo = stat_se(&mz);
    w.v_can = stat_mean(&cn);
    w.se_can = stat_se(&cn);
    w.ratio = w.v_mezo / w.v_can;
    w.ratio_se = w.ratio * sqrt(pow(w.se_mezo / w.v_mezo, 2) + pow(w.se_can / w.v_can, 2));
    exact_variances(&j->geo[r][b], D, w.B, NOISES[nz] == GRZO_NOISE_GAUSSIAN, &w.v_mezo_exact, &w.v_can_exact);
    return w;
}

static int write_csv(const probe_opts *o, const variance_row *rows, int n, char *path, size_t cap) {
    FILE *f = out_open(o, "probe_variance.csv", path, cap);
    int i;
    if (!f) return -1;
    fprintf(f, "regime,noise,B,c_mean_pairwise,c_norm_weighted,B_eff,theory,var_mezo,var_mezo_se,"
               "var_canonical,var_canonical_se,ratio,ratio_se,ratio_over_theory,var_mezo_exact,var_canonical_exact\n");
    for (i = 0; i < n; i++) {
        const variance_row *w = &rows[i];
        fprintf(f, "%s,%s,%d,%.6f,%.6f,%.6f,%.6f,%.6g,%.6g,%.6g,%.6g,%.6f,%.6f,%.6f,%.6g,%.6g\n", REGIMES[w->regime].name,
                NOISE_NAMES[w->noise], w->B, w->c, w->c_w, w->b_eff, w->theory, w->v_mezo, w->se_mezo, w->v_can,
                w->se_can, w->ratio, w->ratio_se, w->ratio / w->theory, w->v_mezo_exact, w->v_can_exact);
    }
    return out_close(f, path);
}

/* 0, or -1 when the table could not be stored (message printed) */
static int print_table(const variance_row *rows, int n) {
    static const char *const head[] = {"regime", "noise", "B", "c", "c_w", "B_eff", "theory", "Var(MeZO)",
                                       "Var(canonical)", "ratio", "ratio / theory"};
    md_table t;
    int i;
    if (md_begin(&t, 11, head) != 0) return -1;
    for (i = 0; i < n; i++) {
        const variance_row *w = &rows[i];
        char b[16], c[16], cw[16], be[16], th[16], vm[32], vc[32], ra[32], rt[16];
        snprintf(b, sizeof b, "%d", w->B);
        snprintf(c, sizeof c, "%.3f", w->c);
        snprintf(cw, sizeof cw, "%.3f", w->c_w);
        snprintf(be, sizeof be, "%.2f", w->b_eff);
        snprintf(th, sizeof th, "%.2f", w->theory);
        snprintf(vm, sizeof vm, "%.4g", w->v_mezo);
        snprintf(vc, sizeof vc, "%.4g", w->v_can);
        snprintf(ra, sizeof ra, "%.2f ± %.2f", w->ratio, w->ratio_se);
        snprintf(rt, sizeof rt, "%.3f", w->ratio / w->theory);
        if (md_row(&t, REGIMES[w->regime].name, NOISE_NAMES[w->noise], b, c, cw, be, th, vm, vc, ra, rt) != 0) {
            md_free(&t);
            return -1;
        }
    }
    md_print(&t, stdout);
    md_free(&t);
    return 0;
}

static const char *PLOT =
    "set terminal pngcairo size 1000,640 font 'sans,11'\n"
    "set output 'probe_variance.png'\n"
    "set datafile separator ','\n"
    "set title \"Var(MeZO) / Var(canonical GRZO) at fixed parameters (probe MLP, D = 108)\\n"
    "points: measured (± 1 s.e.); lines: theory (B_{eff} = cB + 1 - c; Gaussian adds the shared-base floor)\"\n"
    "set xlabel 'batch size B'\n"
    "set ylabel 'variance ratio Var(MeZO) / Var(canonical)'\n"
    "set logscale xy 2\n"
    "set xrange [0.8:40]\n"
    "set yrange [0.5:64]\n"
    "set key top left box opaque\n"
    "set grid\n"
    "sel(r, n, col) = (strcol(1) eq r && strcol(2) eq n) ? column(col) : NaN\n"
    "plot 'probe_variance.csv' every ::1 using 3:(sel('aligned','rademacher',12)):13 with yerrorbars pt 7 lc rgb '#1f77b4' title 'aligned, Rademacher', \\\n"
    "     '' every ::1 using 3:(sel('aligned','rademacher',7)) with lines lw 2 lc rgb '#1f77b4' title 'aligned: B_{eff}', \\\n"
    "     '' every ::1 using 3:(sel('aligned','gaussian',12)):13 with yerrorbars pt 5 lc rgb '#d62728' title 'aligned, Gaussian', \\\n"
    "     '' every ::1 using 3:(sel('aligned','gaussian',7)) with lines lw 2 dt 2 lc rgb '#d62728' title 'aligned: Gaussian theory (floor)', \\\n"
    "     '' every ::1 using 3:(sel('diverse','rademacher',12)):13 with yerrorbars pt 9 lc rgb '#2ca02c' title 'diverse, Rademacher', \\\n"
    "     '' every ::1 using 3:(sel('diverse','rademacher',7)) with lines lw 2 lc rgb '#2ca02c' title 'diverse: B_{eff}', \\\n"
    "     '' every ::1 using 3:(sel('diverse','gaussian',12)):13 with yerrorbars pt 11 lc rgb '#9467bd' title 'diverse, Gaussian', \\\n"
    "     '' every ::1 using 3:(sel('diverse','gaussian',7)) with lines lw 2 dt 2 lc rgb '#9467bd' title 'diverse: Gaussian theory'\n";

/* How far the measured variances are from their closed forms, over all rows. */
static void print_absolute_agreement(const variance_row *rows, int n) {
    double lo = INFINITY, hi = -INFINITY, worst_z = 0.0;
    int i, k;
    for (i = 0; i < n; i++)
        for (k = 0; k < 2; k++) {
            double v = k ? rows[i].v_can : rows[i].v_mezo, se = k ? rows[i].se_can : rows[i].se_mezo;
            double exact = k ? rows[i].v_can_exact : rows[i].v_mezo_exact, q = v / exact;
            if (q < lo) lo = q;
            if (q > hi) hi = q;
            if (fabs(v - exact) / se > worst_z) worst_z = fabs(v - exact) / se;
        }
    printf("\nabsolute check: every measured variance / its closed form (Rademacher: (D-1)|g|^2 and (D-1) m/B;\n"
           "Gaussian: (D+1)|g|^2 and (D-1) m/B + 2|g|^2, m = mean |g_i|^2) lies in [%.3f, %.3f]; the largest gap\n"
           "is %.1f standard errors.\n", lo, hi, worst_z);
}

static int check_claims(const variance_row *rows, int n) {
    int i, failed = 0;
    for (i = 0; i < n; i++) {
        const variance_row *w = &rows[i];
        double rel = w->ratio / w->b_eff - 1.0;
        if (NOISES[w->noise] != GRZO_NOISE_RADEMACHER) continue;
        if (fabs(rel) > VAR_MARGIN) {
            printf("CHECK FAILED: variance, %s regime, Rademacher, B = %d: Var(MeZO)/Var(canonical) = %.3f is "
                   "%.0f%% away from B_eff = %.3f (allowed %.0f%%)\n",
                   REGIMES[w->regime].name, w->B, w->ratio, 100.0 * rel, w->b_eff, 100.0 * VAR_MARGIN);
            failed = 1;
        }
    }
    if (!failed) printf("check passed: variance ratio within %.0f%% of B_eff for every B and regime (Rademacher)\n", 100.0 * VAR_MARGIN);
    return failed ? PROBE_EXIT_CHECK_FAILED : PROBE_EXIT_OK;
}

static int prepare(variance_job *j) {
    mlp_layout L = mlp_layout_of(VAR_SHAPE);
    int r, b, idx[VAR_POOL];
    double *G = (double *)malloc((size_t)VAR_POOL * (size_t)L.n * sizeof(double));
    j->D = L.n;
    j->theta0 = (float *)malloc((size_t)L.n * sizeof(float));
    if (!G || !j->theta0) { free(G); return -1; }
    /* a small gain keeps the softmax near uniform, so per-example gradient norms are alike
       and the mean pairwise cosine c is what the variance ratio depends on */
    mlp_init(VAR_SHAPE, seed_mix(j->o->seed, 11), 0.5f, j->theta0);
    for (b = 0; b < VAR_POOL; b++) idx[b] = b;
    for (r = 0; r < N_REGIMES; r++) {
        if (dataset_make(VAR_SHAPE, &REGIMES[r].spec, seed_mix(j->o->seed, 20 + (uint64_t)r), &j->data[r]) != 0) { free(G); return -1; }
        for (b = 0; b < N_B; b++) {
            j->g_bar[r][b] = (double *)malloc((size_t)L.n * sizeof(double));
            if (!j->g_bar[r][b]) { free(G); return -1; }
            batch_gradients(&j->data[r], j->theta0, idx, VAR_B[b], G, j->g_bar[r][b], &j->geo[r][b]);
        }
    }
    free(G);
    return 0;
}

static void release(variance_job *j) {
    int r, b;
    for (r = 0; r < N_REGIMES; r++) {
        dataset_free(&j->data[r]);
        for (b = 0; b < N_B; b++) free(j->g_bar[r][b]);
    }
    free(j->theta0);
    free(j->err);
}

int probe_variance(const probe_opts *o) {
    variance_job j;
    variance_row rows[N_REGIMES * N_NOISE * N_B];
    int draws = o->quick ? VAR_DRAWS_QUICK : VAR_DRAWS, n_units, r, nz, b, n = 0, rc = PROBE_EXIT_OK, plotted;
    double t0 = now_seconds();
    char csv[OUT_PATH_MAX];
    memset(&j, 0, sizeof j);
    j.o = o;
    j.chunks = draws / VAR_CHUNK;
    n_units = N_REGIMES * N_NOISE * N_B * N_EST * j.chunks;
    j.err = (running_stat *)calloc((size_t)n_units, sizeof *j.err);
    if (!j.err || prepare(&j) != 0) { fprintf(stderr, "grzo-probe: out of memory\n"); release(&j); return PROBE_EXIT_ERROR; }
    if (run_units(n_units, o->threads, variance_unit, &j) != GRZO_OK) { release(&j); return PROBE_EXIT_ERROR; }
    for (r = 0; r < N_REGIMES; r++)
        for (nz = 0; nz < N_NOISE; nz++)
            for (b = 0; b < N_B; b++) rows[n++] = summarize(&j, r, nz, b);

    printf("## variance: Var(MeZO) / Var(canonical) vs B_eff = cB + 1 - c%s\n\n", o->sabotage ? " (SABOTAGED: MeZO runs as canonical)" : "");
    printf("probe MLP %d-%d-%d (D = %lld), fixed parameters, batch = examples 0..B-1, sigma = %g, %d draws per cell.\n"
           "c = mean pairwise cosine of the batch's exact per-example gradients, B_eff = cB + 1 - c; c_w = the\n"
           "norm-weighted cosine, for which 1 + (B-1) c_w is the exact Rademacher ratio. theory = B_eff\n"
           "(Rademacher) or (D+1) B_eff / (D - 1 + 2 B_eff) (Gaussian: the shared base adds a floor).\n\n",
           VAR_SHAPE.d_in, VAR_SHAPE.d_hid, VAR_SHAPE.d_out, (long long)j.D, (double)VAR_SIGMA, draws);
    if (print_table(rows, n) != 0) { release(&j); return PROBE_EXIT_ERROR; }
    print_absolute_agreement(rows, n);
    if (write_csv(o, rows, n, csv, sizeof csv) != 0) { release(&j); return PROBE_EXIT_ERROR; }
    printf("\nCSV: %s\n", csv);
    plotted = run_gnuplot(o, "probe_variance", PLOT);
    if (o->check) rc = check_claims(rows, n);
    if (plotted < 0) rc = PROBE_EXIT_ERROR;   /* outranks a failed claim, as in main */
    printf("(variance: %.1f s, %d threads)\n\n", now_seconds() - t0, o->threads);
    release(&j);
    return rc;
}
