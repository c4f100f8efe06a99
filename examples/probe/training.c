/* training.c - training-loss curves: GRZO across batch sizes (paper appendix "Batch Size
   Sensitivity") and the component ablation (paper section "Ablation Study").

   A student MLP 16-32-4 is trained from grzo steps only; the curve is the loss over the
   whole training set (1024 examples), evaluated through grzo's plain (unperturbed)
   operations every 25 steps and averaged over seeds. All runs of one seed start from the
   same student weights, read the same batches in the same order (for a given B) and use
   the same grzo seed, so the curves of one panel differ only in what is compared.

   Two tasks, because the theory says the outcome depends on the geometry of the
   per-example gradients:
     diverse  labels of a fixed random teacher MLP on spread inputs; once the output bias
              is fit, per-example gradients are nearly orthogonal (c ~ 0.03), B_eff ~ 1.
     aligned  inputs that share one direction and 90% one label (10% random); per-example
              gradients start with c ~ 0.8, like the paper's pretrained block (c = 0.83).

   batch:    GRZO on the diverse task at one learning rate for B = 4, 8, 16, 32. GRZO's
             update norm is about lr sqrt(D/B) / (2 sigma) whatever the loss scale (the
             normalized weights have sum a_i^2 ~ B), so at one lr a smaller batch takes
             larger, noisier steps, and its normalizer s, estimated from B differences,
             is itself noisy (heavy tails of 1/s at B = 4): the paper's small-batch
             instability.
   ablation: full GRZO vs no group normalization (canonical) vs no per-example
             perturbation (shared) vs neither (MeZO), B = 16, on both tasks. The
             estimators' updates scale differently, so each variant's learning rate is set
             to give the same mean update norm as GRZO's at the initial parameters (64
             draws): the comparison is of directions and of how the step adapts, not of
             step sizes. */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mlp_shape T_SHAPE = {16, 32, 4};        /* D = 676 */
static const data_spec DIVERSE_DATA = {1024, 0.0f, 1.0f, LABEL_TEACHER, 0.0f};
static const data_spec ALIGNED_DATA = {1024, 1.0f, 0.57f, LABEL_MAJORITY, 0.9f};
enum { T_POOL = 1024, T_MAX_B = 32, T_EVAL = 25, GEOMETRY_EXAMPLES = 64, CALIBRATION_DRAWS = 64 };
enum { T_STEPS = 3000, T_STEPS_QUICK = 1000, T_SEEDS = 5, T_SEEDS_QUICK = 2 };
#define T_SIGMA 1e-3f

/* batch */
static const int BATCH_B[] = {4, 8, 16, 32};
enum { N_BATCH = 4 };
#define BATCH_LR 5e-5f               /* B >= 16 converges here, B = 4 does not */
#define BATCH_MIN_GAIN 0.20          /* --check: B = 32 ends >= 20% below its start */
#define BATCH_MIN_GAP 0.10           /* --check: B = 4 ends >= 0.1 nats above B = 32 */

/* ablation */
static const grzo_estimator ABL_EST[] = {GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_CANONICAL, GRZO_ESTIMATOR_SHARED,
                                         GRZO_ESTIMATOR_MEZO};
static const char *const ABL_NAME[] = {"GRZO", "no GN (canonical)", "no PE (shared)", "no PE, no GN (MeZO)"};
static const char *const ABL_KEY[] = {"grzo", "canonical", "shared", "mezo"};
enum { N_ABL = 4, N_TASKS = 2, ABL_B = 16 };
static const char *const TASK_NAME[N_TASKS] = {"aligned", "diverse"};
static const float ABL_LR_GRZO[N_TASKS] = {1e-6f, 2e-5f};   /* GRZO's lr per task; others matched to it */
#define ABL_MIN_GAIN 0.10            /* --check: on the aligned task GRZO ends >= 10% below shared and MeZO */

/* ---- one training run ----------------------------------------------------------------------------- */
typedef struct run_spec {
    const dataset *data;     /* shared read-only between threads */
    grzo_estimator estimator;
    int B;
    float lr;
    uint64_t seed;           /* init, data order and grzo seed */
    int steps;
} run_spec;

typedef struct run_result {
    double *loss;            /* steps / T_EVAL + 1 points */
    int n_points;
    int diverged_at;         /* first step grzo abandoned (non-finite loss), or -1 */
    double step_median;      /* median and largest update norm of the run, from grzo's report: */
    double step_max;         /* |delta theta| ~ sqrt(D B) coeff_rms (flipout cross terms average out) */
} run_result;

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void step_norm_summary(double *norms, int n, run_result *out) {
    out->step_median = out->step_max = NAN;
    if (n <= 0) return;
    qsort(norms, (size_t)n, sizeof *norms, compare_doubles);
    out->step_median = norms[n / 2];
    out->step_max = norms[n - 1];
}

static grzo_status create_student(probe_model *m, grzo_estimator e, float lr, uint64_t seed) {
    grzo_desc desc;
    mlp_layout L = mlp_layout_of(T_SHAPE);
    float *theta0 = (float *)malloc((size_t)L.n * sizeof(float));
    grzo_status s;
    memset(m, 0, sizeof *m);
    if (!theta0) return probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    mlp_init(T_SHAPE, seed_mix(seed, 1), 1.0f, theta0);
    memset(&desc, 0, sizeof desc);
    desc.estimator = e;
    desc.seed = seed_mix(seed, 3);
    desc.lr = lr;
    desc.sigma = T_SIGMA;
    s = model_create(m, T_SHAPE, &desc, theta0);
    free(theta0);
    return s;
}

static grzo_status train_run(const run_spec *rs, run_result *out) {
    probe_model m;
    int idx[T_MAX_B], scratch[T_POOL], t, p = 0, n_steps = 0;
    uint64_t order = seed_mix(rs->seed, 2);
    double *norms = (double *)malloc((size_t)(rs->steps > 0 ? rs->steps : 1) * sizeof(double));
    double scale = sqrt((double)mlp_layout_of(T_SHAPE).n * rs->B);
    grzo_status s = norms ? create_student(&m, rs->estimator, rs->lr, rs->seed)
                          : probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    if (!norms) return s;
    out->diverged_at = -1;
    for (t = 0; s == GRZO_OK && t <= rs->steps; t++) {
        grzo_step_report rep;
        if (t % T_EVAL == 0) {
            s = model_mean_loss(&m, rs->data, &out->loss[p]);
            if (out->diverged_at >= 0) out->loss[p] = NAN;   /* the run stopped there */
            p++;
        }
        if (s != GRZO_OK || t == rs->steps || out->diverged_at >= 0) continue;
        draw_batch(order, (uint32_t)t, T_POOL, rs->B, idx, scratch);
        s = model_train_step(&m, rs->data, idx, rs->B, &rep);
        if (s == GRZO_OK) norms[n_steps++] = scale * rep.coeff_rms;
        if (s == GRZO_ERR_NONFINITE) {   /* grzo abandoned the step: record, stop this run */
            out->diverged_at = t;
            s = GRZO_OK;
        }
    }
    out->n_points = p;
    step_norm_summary(norms, n_steps, out);
    model_destroy(&m);
    free(norms);
    return s;
}

/* Mean |g_hat| (the update norm at lr = 1) at the initial parameters of seed `seed`. */
static grzo_status initial_update_norm(const dataset *d, grzo_estimator e, int B, uint64_t seed, double *out) {
    probe_model m;
    int64_t n = mlp_layout_of(T_SHAPE).n;
    double *g_hat = (double *)malloc((size_t)n * sizeof(double));
    int idx[T_MAX_B], scratch[T_POOL], k;
    running_stat norm = {0, 0, 0};
    grzo_status s = g_hat ? create_student(&m, e, 1.0f, seed) : probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    for (k = 0; s == GRZO_OK && k < CALIBRATION_DRAWS; k++) {
        draw_batch(seed_mix(seed, 5), (uint32_t)k, T_POOL, B, idx, scratch);
        s = model_draw(&m, d, idx, B, NULL, g_hat, NULL, NULL);
        if (s == GRZO_OK) stat_add(&norm, sqrt(dot(g_hat, g_hat, n)));
    }
    *out = stat_mean(&norm);
    if (g_hat) model_destroy(&m);
    free(g_hat);
    return s;
}

/* Mean pairwise cosine of the first GEOMETRY_EXAMPLES examples at seed `seed`'s start. */
/* into *c; 0, or -1 out of memory (message printed: a NaN in the table would pass for a result) */
static int initial_cosine(const dataset *d, uint64_t seed, double *c) {
    mlp_layout L = mlp_layout_of(T_SHAPE);
    float *theta0 = (float *)malloc((size_t)L.n * sizeof(float));
    double *G = (double *)malloc((size_t)(GEOMETRY_EXAMPLES + 1) * (size_t)L.n * sizeof(double));
    grad_geometry geo;
    int idx[GEOMETRY_EXAMPLES], i, rc = -1;
    if (theta0 && G) {
        mlp_init(T_SHAPE, seed_mix(seed, 1), 1.0f, theta0);
        for (i = 0; i < GEOMETRY_EXAMPLES; i++) idx[i] = i;
        batch_gradients(d, theta0, idx, GEOMETRY_EXAMPLES, G, G + (int64_t)GEOMETRY_EXAMPLES * L.n, &geo);
        *c = geo.mean_cos;
        rc = 0;
    } else {
        probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    }
    free(theta0);
    free(G);
    return rc;
}

/* ---- a grid of runs: curves x seeds, run in parallel ----------------------------------------------- */
typedef struct run_grid {
    run_spec *spec;          /* n_curves x n_seeds, seed fastest */
    run_result *result;
    int n_curves, n_seeds, n_points;
} run_grid;

static int grid_alloc(run_grid *g, int n_curves, int n_seeds, int steps) {
    int u, n = n_curves * n_seeds;
    memset(g, 0, sizeof *g);
    g->n_curves = n_curves;
    g->n_seeds = n_seeds;
    g->n_points = steps / T_EVAL + 1;
    g->spec = (run_spec *)calloc((size_t)n, sizeof *g->spec);
    g->result = (run_result *)calloc((size_t)n, sizeof *g->result);
    if (!g->spec || !g->result) return -1;
    for (u = 0; u < n; u++) {
        g->result[u].loss = (double *)calloc((size_t)g->n_points, sizeof(double));
        if (!g->result[u].loss) return -1;
    }
    return 0;
}

static void grid_free(run_grid *g) {
    int u;
    for (u = 0; g->result && u < g->n_curves * g->n_seeds; u++) free(g->result[u].loss);
    free(g->spec);
    free(g->result);
    memset(g, 0, sizeof *g);
}

static void grid_set(run_grid *g, int curve, const dataset *d, grzo_estimator e, int B, float lr, uint64_t seed,
                     int steps) {
    int k;
    for (k = 0; k < g->n_seeds; k++) {
        run_spec *rs = &g->spec[curve * g->n_seeds + k];
        rs->data = d;
        rs->estimator = e;
        rs->B = B;
        rs->lr = lr;
        rs->seed = seed_mix(seed, 500 + (uint64_t)k);   /* seed k is the same for every curve */
        rs->steps = steps;
    }
}

static grzo_status grid_unit(int u, void *user) {
    run_grid *g = (run_grid *)user;
    return train_run(&g->spec[u], &g->result[u]);
}

/* mean and sd over seeds of curve point p (NaN once any seed diverged) */
static double point_mean(const run_grid *g, int curve, int p) {
    double acc = 0.0;
    int k;
    for (k = 0; k < g->n_seeds; k++) acc += g->result[curve * g->n_seeds + k].loss[p];
    return acc / g->n_seeds;
}

static double point_sd(const run_grid *g, int curve, int p) {
    running_stat s = {0, 0, 0};
    int k;
    for (k = 0; k < g->n_seeds; k++) stat_add(&s, g->result[curve * g->n_seeds + k].loss[p]);
    return g->n_seeds > 1 ? stat_sd(&s) : 0.0;
}

static double best_mean(const run_grid *g, int curve) {
    double best = INFINITY;
    int p;
    for (p = 0; p < g->n_points; p++) {
        double v = point_mean(g, curve, p);
        if (v < best) best = v;
    }
    return best;
}

static int diverged_runs(const run_grid *g, int curve) {
    int k, n = 0;
    for (k = 0; k < g->n_seeds; k++) n += g->result[curve * g->n_seeds + k].diverged_at >= 0;
    return n;
}

/* mean over seeds of the runs' median step norm, and of their largest step over the median */
static void step_norms(const run_grid *g, int curve, double *median, double *max_over_median) {
    int k;
    *median = *max_over_median = 0.0;
    for (k = 0; k < g->n_seeds; k++) {
        const run_result *r = &g->result[curve * g->n_seeds + k];
        *median += r->step_median / g->n_seeds;
        *max_over_median += r->step_max / r->step_median / g->n_seeds;
    }
}

static void report_abandoned_runs(const run_grid *g) {
    int c, n = 0;
    for (c = 0; c < g->n_curves; c++) n += diverged_runs(g, c);
    if (n > 0) printf("%d run(s) hit a non-finite loss (grzo abandoned the step); their curves stop there (NaN).\n", n);
}

/* curves as columns: step, then mean and sd of every curve */
static int write_curves(const probe_opts *o, const char *name, const run_grid *g, const char *const *keys,
                        char *path, size_t cap) {
    FILE *f = out_open(o, name, path, cap);
    int c, p;
    if (!f) return -1;
    fprintf(f, "step");
    for (c = 0; c < g->n_curves; c++) fprintf(f, ",%s_mean,%s_sd", keys[c], keys[c]);
    fprintf(f, "\n");
    for (p = 0; p < g->n_points; p++) {
        fprintf(f, "%d", p * T_EVAL);
        for (c = 0; c < g->n_curves; c++) fprintf(f, ",%.6g,%.4g", point_mean(g, c, p), point_sd(g, c, p));
        fprintf(f, "\n");
    }
    return out_close(f, path);
}

static void fmt_loss(char *buf, size_t cap, const run_grid *g, int curve, int p) {
    snprintf(buf, cap, "%.4f", point_mean(g, curve, p));
}

static void fmt_final(char *buf, size_t cap, const run_grid *g, int curve) {
    int p = g->n_points - 1;
    snprintf(buf, cap, "%.4f ± %.4f", point_mean(g, curve, p), point_sd(g, curve, p));
}

static int grid_run(run_grid *g, int threads) {
    return run_units(g->n_curves * g->n_seeds, threads, grid_unit, g) == GRZO_OK ? 0 : -1;
}

/* ================================ batch ============================================================== */
static const char *BATCH_PLOT_FMT =
    "set terminal pngcairo size 1000,620 font 'sans,11'\n"
    "set output 'probe_batch.png'\n"
    "set datafile separator ','\n"
    "set title \"GRZO training loss by batch size (teacher task, MLP 16-32-4, lr = %g, sigma = 10^{-3})\\n"
    "mean of %d seeds, band = ± 1 s.d. across seeds; one lr for every B\"\n"
    "set xlabel 'step'\n"
    "set ylabel 'training loss (cross-entropy over all 1024 examples)'\n"
    "set key top right box opaque\n"
    "set grid\n"
    "set style fill transparent solid 0.15 noborder\n"
    "plot for [i=0:3] 'probe_batch.csv' every ::1 using 1:(column(2+2*i)-column(3+2*i)):(column(2+2*i)+column(3+2*i)) "
    "with filledcurves lc i+1 notitle, \\\n"
    "     for [i=0:3] '' every ::1 using 1:(column(2+2*i)) with lines lw 2 lc i+1 title sprintf('B = %%d', 2**(i+2))\n";

static int batch_check(const run_grid *g) {
    int last = g->n_points - 1, failed = 0;
    double start = point_mean(g, 3, 0), b32 = point_mean(g, 3, last), b4 = point_mean(g, 0, last);
    if (!(b32 <= (1.0 - BATCH_MIN_GAIN) * start)) {
        printf("CHECK FAILED: batch: B = 32 ends at %.4f, not %.0f%% below its start %.4f\n", b32, 100.0 * BATCH_MIN_GAIN, start);
        failed = 1;
    }
    if (!(b4 >= b32 + BATCH_MIN_GAP)) {   /* NaN (diverged) also fails this, and is reported */
        printf("CHECK FAILED: batch: B = 4 ends at %.4f, not %.2f above B = 32 (%.4f)\n", b4, BATCH_MIN_GAP, b32);
        failed = 1;
    }
    if (!failed) printf("check passed: B = 32 ends %.0f%% below its start; B = 4 ends %.3f above B = 32\n",
                        100.0 * (1.0 - b32 / start), b4 - b32);
    return failed ? PROBE_EXIT_CHECK_FAILED : PROBE_EXIT_OK;
}

/* 0, or -1 when the table could not be stored (message printed) */
static int batch_table(const run_grid *g) {
    static const char *const head[] = {"B", "start", "10% of steps", "50% of steps", "final (± s.d.)", "best",
                                       "final - best", "median step", "largest / median step"};
    md_table t;
    int c, n10 = (g->n_points - 1) / 10, n50 = (g->n_points - 1) / 2;
    if (md_begin(&t, 9, head) != 0) return -1;
    for (c = 0; c < N_BATCH; c++) {
        char b[8], s0[16], s10[16], s50[16], fin[40], best[16], rise[16], med[16], tail[16];
        double median, max_over_median;
        step_norms(g, c, &median, &max_over_median);
        snprintf(b, sizeof b, "%d", BATCH_B[c]);
        fmt_loss(s0, sizeof s0, g, c, 0);
        fmt_loss(s10, sizeof s10, g, c, n10);
        fmt_loss(s50, sizeof s50, g, c, n50);
        fmt_final(fin, sizeof fin, g, c);
        snprintf(best, sizeof best, "%.4f", best_mean(g, c));
        snprintf(rise, sizeof rise, "%+.4f", point_mean(g, c, g->n_points - 1) - best_mean(g, c));
        snprintf(med, sizeof med, "%.3f", median);
        snprintf(tail, sizeof tail, "%.1f", max_over_median);
        if (md_row(&t, b, s0, s10, s50, fin, best, rise, med, tail) != 0) { md_free(&t); return -1; }
    }
    md_print(&t, stdout);
    md_free(&t);
    return 0;
}

int probe_batch(const probe_opts *o) {
    static const char *const keys[N_BATCH] = {"B4", "B8", "B16", "B32"};
    run_grid g;
    dataset d;
    int steps = o->quick ? T_STEPS_QUICK : T_STEPS, seeds = o->quick ? T_SEEDS_QUICK : T_SEEDS, c;
    int rc = PROBE_EXIT_OK, plotted;
    double t0 = now_seconds();
    char csv[OUT_PATH_MAX], plot[2048];
    memset(&d, 0, sizeof d);
    memset(&g, 0, sizeof g);   /* grid_free runs on every path, also when dataset_make fails first */
    if (dataset_make(T_SHAPE, &DIVERSE_DATA, seed_mix(o->seed, 50), &d) != 0 || grid_alloc(&g, N_BATCH, seeds, steps) != 0) {
        fprintf(stderr, "grzo-probe: out of memory\n");
        rc = PROBE_EXIT_ERROR;
    } else {
        for (c = 0; c < N_BATCH; c++) grid_set(&g, c, &d, GRZO_ESTIMATOR_GRZO, BATCH_B[c], BATCH_LR, o->seed, steps);
        if (grid_run(&g, o->threads) != 0) rc = PROBE_EXIT_ERROR;
    }
    if (rc == PROBE_EXIT_OK) {
        printf("## batch: GRZO training loss for B = 4, 8, 16, 32\n\n");
        printf("teacher task (diverse examples), student MLP %d-%d-%d (D = %lld), %d steps, lr = %g for every B,\n"
               "sigma = %g, training-set loss averaged over %d seeds. Paper: B = 4 diverges, B = 8 is unstable,\n"
               "B >= 16 converges.\n\n",
               T_SHAPE.d_in, T_SHAPE.d_hid, T_SHAPE.d_out, (long long)mlp_layout_of(T_SHAPE).n, steps,
               (double)BATCH_LR, (double)T_SIGMA, seeds);
        if (batch_table(&g) != 0) rc = PROBE_EXIT_ERROR;
    }
    if (rc == PROBE_EXIT_OK) {
        report_abandoned_runs(&g);
        printf("\nstep: |Δθ| of one update (≈ sqrt(D B) x grzo's coeff_rms), median over the run and largest over\n"
               "median, averaged over seeds: at one lr GRZO's step is ~ lr sqrt(D/B) / (2 sigma), and at small B the\n"
               "normalizer 1/s of B loss differences has heavy tails.\n");
        if (write_curves(o, "probe_batch.csv", &g, keys, csv, sizeof csv) != 0) rc = PROBE_EXIT_ERROR;
    }
    if (rc == PROBE_EXIT_OK) {
        printf("\nCSV: %s\n", csv);
        snprintf(plot, sizeof plot, BATCH_PLOT_FMT, (double)BATCH_LR, seeds);
        plotted = run_gnuplot(o, "probe_batch", plot);
        if (o->check) rc = batch_check(&g);
        if (plotted < 0) rc = PROBE_EXIT_ERROR;   /* outranks a failed claim, as in main */
        printf("(batch: %.1f s, %d threads)\n\n", now_seconds() - t0, o->threads);
    }
    grid_free(&g);
    dataset_free(&d);
    return rc;
}

/* ================================ ablation ============================================================ */
static const char *ABLATION_PLOT_FMT =
    "set terminal pngcairo size 1300,560 font 'sans,11'\n"
    "set output 'probe_ablation.png'\n"
    "set datafile separator ','\n"
    "set multiplot layout 1,2 title \"GRZO ablation, B = 16, MLP 16-32-4, mean of %d seeds (band ± 1 s.d.); "
    "each variant's lr gives GRZO's initial update norm\"\n"
    "set xlabel 'step'\n"
    "set ylabel 'training loss (cross-entropy over all 1024 examples)'\n"
    "set key top right box opaque\n"
    "set grid\n"
    "set style fill transparent solid 0.15 noborder\n"
    "names = \"'GRZO' 'no GN (canonical)' 'no PE (shared)' 'no PE, no GN (MeZO)'\"\n"
    "set title 'aligned examples (c = %.2f at the start; GRZO lr = %g)'\n"
    "plot for [i=0:3] 'probe_ablation.csv' every ::1 using 1:(column(2+2*i)-column(3+2*i)):(column(2+2*i)+column(3+2*i)) "
    "with filledcurves lc i+1 notitle, \\\n"
    "     for [i=0:3] '' every ::1 using 1:(column(2+2*i)) with lines lw 2 lc i+1 title word(names, i+1)\n"
    "set title 'diverse examples (c = %.2f at the start; GRZO lr = %g)'\n"
    "plot for [i=0:3] 'probe_ablation.csv' every ::1 using 1:(column(10+2*i)-column(11+2*i)):(column(10+2*i)+column(11+2*i)) "
    "with filledcurves lc i+1 notitle, \\\n"
    "     for [i=0:3] '' every ::1 using 1:(column(10+2*i)) with lines lw 2 lc i+1 title word(names, i+1)\n"
    "unset multiplot\n";

static int ablation_check(const run_grid *g) {
    int last = g->n_points - 1, failed = 0, v;
    double grzo = point_mean(g, 0, last);
    for (v = 2; v < N_ABL; v++) {   /* the variants without per-example perturbation, aligned task */
        double other = point_mean(g, v, last);
        if (!(grzo <= (1.0 - ABL_MIN_GAIN) * other)) {
            printf("CHECK FAILED: ablation (aligned task): GRZO ends at %.4f, not %.0f%% below %s (%.4f)\n", grzo,
                   100.0 * ABL_MIN_GAIN, ABL_NAME[v], other);
            failed = 1;
        }
    }
    if (!failed) printf("check passed: on the aligned task GRZO ends at %.4f, below shared (%.4f) and MeZO (%.4f) by "
                        ">= %.0f%%\n", grzo, point_mean(g, 2, last), point_mean(g, 3, last), 100.0 * ABL_MIN_GAIN);
    return failed ? PROBE_EXIT_CHECK_FAILED : PROBE_EXIT_OK;
}

/* 0, or -1 when the table could not be stored (message printed) */
static int ablation_table(const run_grid *g, const float lrs[N_TASKS][N_ABL], const double c[N_TASKS]) {
    static const char *const head[] = {"task", "c at start", "variant", "lr", "10% of steps", "50% of steps",
                                       "final (± s.d.)"};
    md_table t;
    int task, v, n10 = (g->n_points - 1) / 10, n50 = (g->n_points - 1) / 2;
    if (md_begin(&t, 7, head) != 0) return -1;
    for (task = 0; task < N_TASKS; task++)
        for (v = 0; v < N_ABL; v++) {
            int curve = task * N_ABL + v;
            char cc[16], lr[24], s10[16], s50[16], fin[40];
            snprintf(cc, sizeof cc, "%.2f", c[task]);
            snprintf(lr, sizeof lr, "%.3g", (double)lrs[task][v]);
            fmt_loss(s10, sizeof s10, g, curve, n10);
            fmt_loss(s50, sizeof s50, g, curve, n50);
            fmt_final(fin, sizeof fin, g, curve);
            if (md_row(&t, TASK_NAME[task], cc, ABL_NAME[v], lr, s10, s50, fin) != 0) { md_free(&t); return -1; }
        }
    md_print(&t, stdout);
    md_free(&t);
    return 0;
}

/* GRZO's lr for the task; the others' scaled so their mean initial update norm matches */
static int matched_learning_rates(const dataset *d, int task, uint64_t seed, float lrs[N_ABL]) {
    double norm[N_ABL];
    int v;
    for (v = 0; v < N_ABL; v++)
        if (initial_update_norm(d, ABL_EST[v], ABL_B, seed, &norm[v]) != GRZO_OK) return -1;
    for (v = 0; v < N_ABL; v++) lrs[v] = (float)(ABL_LR_GRZO[task] * norm[0] / norm[v]);
    return 0;
}

int probe_ablation(const probe_opts *o) {
    const char *keys[N_TASKS * N_ABL];
    char key_buf[N_TASKS * N_ABL][32], csv[1200], plot[4096];
    run_grid g;
    dataset d[N_TASKS];
    float lrs[N_TASKS][N_ABL];
    double c[N_TASKS];
    int steps = o->quick ? T_STEPS_QUICK : T_STEPS, seeds = o->quick ? T_SEEDS_QUICK : T_SEEDS, task, v;
    int rc = PROBE_EXIT_OK, plotted;
    double t0 = now_seconds();
    memset(d, 0, sizeof d);
    memset(&g, 0, sizeof g);
    if (dataset_make(T_SHAPE, &ALIGNED_DATA, seed_mix(o->seed, 51), &d[0]) != 0 ||
        dataset_make(T_SHAPE, &DIVERSE_DATA, seed_mix(o->seed, 50), &d[1]) != 0 ||
        grid_alloc(&g, N_TASKS * N_ABL, seeds, steps) != 0) {
        fprintf(stderr, "grzo-probe: out of memory\n");
        rc = PROBE_EXIT_ERROR;
    }
    for (task = 0; rc == PROBE_EXIT_OK && task < N_TASKS; task++) {
        uint64_t first_seed = seed_mix(o->seed, 500);   /* the seed of run 0, as grid_set derives it */
        if (initial_cosine(&d[task], first_seed, &c[task]) != 0 ||
            matched_learning_rates(&d[task], task, first_seed, lrs[task]) != 0) {
            rc = PROBE_EXIT_ERROR;
            break;
        }
        for (v = 0; v < N_ABL; v++) {
            int curve = task * N_ABL + v;
            snprintf(key_buf[curve], sizeof key_buf[curve], "%s_%s", TASK_NAME[task], ABL_KEY[v]);
            keys[curve] = key_buf[curve];
            grid_set(&g, curve, &d[task], ABL_EST[v], ABL_B, lrs[task][v], o->seed, steps);
        }
    }
    if (rc == PROBE_EXIT_OK && grid_run(&g, o->threads) != 0) rc = PROBE_EXIT_ERROR;
    if (rc == PROBE_EXIT_OK) {
        printf("## ablation: GRZO vs no group normalization vs no per-example perturbation\n\n");
        printf("student MLP %d-%d-%d (D = %lld), B = %d, %d steps, sigma = %g, training-set loss averaged over %d\n"
               "seeds (same seeds, init, batches and grzo seed for every variant). Each variant's lr gives the mean\n"
               "update norm of GRZO's at the start. c: mean pairwise cosine of per-example gradients at the start.\n\n",
               T_SHAPE.d_in, T_SHAPE.d_hid, T_SHAPE.d_out, (long long)mlp_layout_of(T_SHAPE).n, ABL_B, steps,
               (double)T_SIGMA, seeds);
        if (ablation_table(&g, (const float(*)[N_ABL])lrs, c) != 0) rc = PROBE_EXIT_ERROR;
    }
    if (rc == PROBE_EXIT_OK) {
        report_abandoned_runs(&g);
        if (write_curves(o, "probe_ablation.csv", &g, keys, csv, sizeof csv) != 0) rc = PROBE_EXIT_ERROR;
    }
    if (rc == PROBE_EXIT_OK) {
        printf("\nCSV: %s\n", csv);
        snprintf(plot, sizeof plot, ABLATION_PLOT_FMT, seeds, c[0], (double)ABL_LR_GRZO[0], c[1], (double)ABL_LR_GRZO[1]);
        plotted = run_gnuplot(o, "probe_ablation", plot);
        if (o->check) rc = ablation_check(&g);
        if (plotted < 0) rc = PROBE_EXIT_ERROR;   /* outranks a failed claim, as in main */
        printf("(ablation: %.1f s, %d threads)\n\n", now_seconds() - t0, o->threads);
    }
    grid_free(&g);
    dataset_free(&d[0]);
    dataset_free(&d[1]);
    return rc;
}
