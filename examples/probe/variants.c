/* variants.c - the sparse, low-rank and quantized perturbations (grzo.h section 3c) with the
   MeZO core and with the GRZO core: the paper's Table 5 (Sparse-GRZO, LO-GRZO, Qu-GRZO), on
   the probe MLP.

   For each variant X (none, sparse 20%, low-rank r = 2 / nu = 100, int8, int4; the quantized
   ones with Gaussian base noise, QuZO's setting, the others Rademacher):
     cosine   one estimate of MeZO+X and of GRZO+X on the same batch of B = 16 (paired
              trials, fixed parameters) against the batch's exact fp32 gradient (backprop),
              on the aligned pool of `grzo-probe cosine` (c ~ 0.8): what GRZO's per-example
              directions buy inside each variant;
     training MeZO+X and GRZO+X trained on the aligned task of `grzo-probe ablation` (MLP
              16-32-4, 1024 examples, B = 16), the loss over the whole set every 25 steps,
              mean over seeds. GRZO's lr is fixed; MeZO+X's is set to give the same mean
              update norm as GRZO+X at the initial parameters (as in the ablation), so the
              curves compare directions, not step sizes.
   The variant changes what is perturbed and updated (sparse: |theta| <= h_b; low-rank:
   U V^T / sqrt r; quantized: q(W) in every forward and a stochastically rounded perturbation),
   the core how the directions are weighted. The cosine is taken with the full gradient: a
   sparse or low-rank estimate covers part of it by construction. */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N_VAR = 5, N_CORE = 2, VAR_B = 16, VAR_MAX_B = 16, VAR_POOL = 256, VAR_EVAL = 25, CAL_DRAWS = 32 };
enum { VCOS_TRIALS = 2000, VCOS_TRIALS_QUICK = 300, VCOS_CHUNK = 50 };
enum { VT_STEPS = 3000, VT_STEPS_QUICK = 600, VT_SEEDS = 3, VT_SEEDS_QUICK = 1, VT_POOL = 1024 };
#define VAR_SIGMA 1e-3f
#define VT_LR_GRZO 1e-6f
#define VAR_MIN_RATIO 1.5   /* --check: GRZO+X's cosine at B = 16 over MeZO+X's, every X */

static const char *const VAR_NAME[N_VAR] = {"none (dense)", "sparse (20%)", "low-rank (r = 2)", "int8", "int4"};
static const char *const VAR_KEY[N_VAR] = {"dense", "sparse", "lowrank", "int8", "int4"};
static const grzo_estimator CORE[N_CORE] = {GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_GRZO};
/* the paper's Table 5 (Llama3-8B): mean over BoolQ, RTE, COPA, SQuAD, DROP of GRZO+X minus MeZO+X (points) */
static const double PAPER_GAIN[N_VAR] = {NAN, 5.6, 2.7, 6.3, NAN};

static const mlp_shape VCOS_SHAPE = {32, 64, 8};
static const data_spec VCOS_DATA = {VAR_POOL, 1.0f, 0.57f, LABEL_MAJORITY, 1.0f};
static const mlp_shape VT_SHAPE = {16, 32, 4};
static const data_spec VT_DATA = {VT_POOL, 1.0f, 0.57f, LABEL_MAJORITY, 0.9f};

static void set_variant(grzo_desc *d, int v) {
    if (v == 1) d->sparse_density = GRZO_SPARSE_DENSITY_DEFAULT;
    if (v == 2) { d->lowrank_rank = GRZO_LOWRANK_RANK_DEFAULT; d->lowrank_every = GRZO_LOWRANK_EVERY_DEFAULT; }
    if (v == 3) d->quant_bits = 8;
    if (v == 4) d->quant_bits = 4;
    if (v >= 3) d->noise = GRZO_NOISE_GAUSSIAN;
}

static grzo_status variant_model(const probe_opts *o, probe_model *m, mlp_shape s, int v, int core, float lr, uint64_t seed,
                                 const float *theta0) {
    grzo_desc d;
    memset(&d, 0, sizeof d);
    d.estimator = o->sabotage ? GRZO_ESTIMATOR_MEZO : CORE[core];   /* sabotage: MeZO named GRZO */
    d.seed = seed;
    d.lr = lr;
    d.sigma = VAR_SIGMA;
    set_variant(&d, v);
    return model_create(m, s, &d, theta0);
}

/* ---- cosine ------------------------------------------------------------------------------------------ */
typedef struct vcos_job {
    const probe_opts *o;
    dataset data;
    float *theta0;
    int64_t D;
    int chunks;
    running_stat *cos;     /* [unit][core] */
} vcos_job;

static grzo_status vcos_unit(int u, void *user) {
    vcos_job *j = (vcos_job *)user;
    int v = u / j->chunks, chunk = u % j->chunks, k, c;
    int idx[VAR_MAX_B], scratch[VAR_POOL];
    double *G = (double *)malloc((size_t)(VAR_MAX_B + 2) * (size_t)j->D * sizeof(double));
    double *g_bar = G ? G + VAR_MAX_B * j->D : NULL, *g_hat = g_bar ? g_bar + j->D : NULL;
    probe_model m[N_CORE];
    grzo_status s = G ? GRZO_OK : probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    memset(m, 0, sizeof m);
    for (c = 0; s == GRZO_OK && c < N_CORE; c++)
        s = variant_model(j->o, &m[c], VCOS_SHAPE, v, c, 1.0f, seed_mix(j->o->seed, 0x7661720000ull + 2 * (uint64_t)u + (uint64_t)c),
                          j->theta0);
    for (k = 0; s == GRZO_OK && k < VCOS_CHUNK; k++) {
        draw_batch(seed_mix(j->o->seed, 61), (uint32_t)(chunk * VCOS_CHUNK + k), VAR_POOL, VAR_B, idx, scratch);
        batch_gradients(&j->data, j->theta0, idx, VAR_B, G, g_bar, NULL);
        for (c = 0; s == GRZO_OK && c < N_CORE; c++) {
            s = model_draw(&m[c], &j->data, idx, VAR_B, NULL, g_hat, NULL, NULL);
            if (s == GRZO_OK) stat_add(&j->cos[u * N_CORE + c], cosine(g_hat, g_bar, j->D));
        }
    }
    for (c = 0; c < N_CORE; c++) model_destroy(&m[c]);
    free(G);
    return s;
}

static running_stat vcos_merged(const vcos_job *j, int v, int c) {
    running_stat s = {0, 0, 0};
    int chunk;
    for (chunk = 0; chunk < j->chunks; chunk++) stat_merge(&s, &j->cos[(v * j->chunks + chunk) * N_CORE + c]);
    return s;
}

/* ---- training ------------------------------------------------------------------------------------------ */
typedef struct vt_job {
    const probe_opts *o;
    dataset data;
    int steps, seeds, n_points;
    float lr[N_VAR][N_CORE];
    double *loss;          /* [v][core][seed][point] */
    int *diverged;         /* [v][core][seed] */
} vt_job;

static float *student(uint64_t seed) {
    float *theta0 = (float *)malloc((size_t)mlp_layout_of(VT_SHAPE).n * sizeof(float));
    if (theta0) mlp_init(VT_SHAPE, seed_mix(seed, 1), 1.0f, theta0);
    return theta0;
}

/* mean update norm of (v, core) at lr = 1 on the first seed's initial parameters */
static grzo_status update_norm(const vt_job *j, int v, int c, double *out) {
    int64_t n = mlp_layout_of(VT_SHAPE).n;
    uint64_t seed = seed_mix(j->o->seed, 600);
    double *g_hat = (double *)malloc((size_t)n * sizeof(double));
    float *theta0 = student(seed);
    int idx[VAR_MAX_B], scratch[VT_POOL], k;
    running_stat norm = {0, 0, 0};
    probe_model m;
    grzo_status s = g_hat && theta0 ? variant_model(j->o, &m, VT_SHAPE, v, c, 1.0f, seed_mix(seed, 3), theta0)
                                    : probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    for (k = 0; s == GRZO_OK && k < CAL_DRAWS; k++) {
        draw_batch(seed_mix(seed, 5), (uint32_t)k, VT_POOL, VAR_B, idx, scratch);
        s = model_draw(&m, &j->data, idx, VAR_B, NULL, g_hat, NULL, NULL);
        if (s == GRZO_OK) stat_add(&norm, sqrt(dot(g_hat, g_hat, n)));
    }
    *out = stat_mean(&norm);
    if (g_hat && theta0) model_destroy(&m);
    free(g_hat);
    free(theta0);
    return s;
}

static grzo_status vt_unit(int u, void *user) {
    vt_job *j = (vt_job *)user;
    int v = u / (N_CORE * j->seeds), c = (u / j->seeds) % N_CORE, k = u % j->seeds, t, p = 0;
    uint64_t seed = seed_mix(j->o->seed, 600 + (uint64_t)k);
    double *loss = j->loss + (size_t)u * (size_t)j->n_points;
    int idx[VAR_MAX_B], scratch[VT_POOL];
    float *theta0 = student(seed);
    probe_model m;
    grzo_status s = theta0 ? variant_model(j->o, &m, VT_SHAPE, v, c, j->lr[v][c], seed_mix(seed, 3), theta0)
                           : probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    j->diverged[u] = -1;
    for (t = 0; s == GRZO_OK && t <= j->steps; t++) {
        grzo_step_report rep;
        if (t % VAR_EVAL == 0) {
            s = model_mean_loss(&m, &j->data, &loss[p]);
            if (j->diverged[u] >= 0) loss[p] = NAN;
            p++;
        }
        if (s != GRZO_OK || t == j->steps || j->diverged[u] >= 0) continue;
        draw_batch(seed_mix(seed, 2), (uint32_t)t, VT_POOL, VAR_B, idx, scratch);
        s = model_train_step(&m, &j->data, idx, VAR_B, &rep);
        if (s == GRZO_ERR_NONFINITE) { j->diverged[u] = t; s = GRZO_OK; }
    }
    if (theta0) model_destroy(&m);
    free(theta0);
    return s;
}

static double vt_mean(const vt_job *j, int v, int c, int p) {
    double acc = 0.0;
    int k;
    for (k = 0; k < j->seeds; k++) acc += j->loss[((size_t)(v * N_CORE + c) * (size_t)j->seeds + (size_t)k) * (size_t)j->n_points + (size_t)p];
    return acc / j->seeds;
}

/* ---- output -------------------------------------------------------------------------------------------- */
static const char *PLOT =
    "set encoding utf8\n"
    "set terminal pngcairo size 1400,800 font 'sans,10'\n"
    "set output 'probe_variants.png'\n"
    "set datafile separator ','\n"
    "set multiplot layout 2,3 title \"MeZO+X vs GRZO+X: training loss on the aligned task (MLP 16-32-4, B = 16, MeZO's lr matched to GRZO's update norm)\"\n"
    "set grid\n"
    "set xlabel 'step'\n"
    "set ylabel 'training loss'\n"
    "set key top right box opaque\n"
    "do for [i=0:4] {\n"
    "  set title word(\"dense sparse low-rank int8 int4\", i+1)\n"
    "  plot 'probe_variants_curves.csv' every ::1 using 1:(column(2+2*i)) with lines lw 2 lc rgb '#1f77b4' title 'MeZO+X', \\\n"
    "       '' every ::1 using 1:(column(3+2*i)) with lines lw 2 lc rgb '#d62728' title 'GRZO+X'\n"
    "}\n"
    "set title 'cosine with the exact gradient, B = 16'\n"
    "set style data histogram\n"
    "set style histogram clustered gap 1\n"
    "set style fill solid 0.8\n"
    "set xlabel ''\n"
    "set ylabel 'mean cosine (x 10^{-3})'\n"
    "set yrange [0:*]\n"
    "plot 'probe_variants_cosine.csv' every ::1 using ($2*1e3):xtic(1) lc rgb '#1f77b4' title 'MeZO+X', \\\n"
    "     '' every ::1 using ($4*1e3) lc rgb '#d62728' title 'GRZO+X'\n"
    "unset multiplot\n";

static int write_outputs(const probe_opts *o, const vcos_job *cj, const vt_job *tj) {
    char path[OUT_PATH_MAX];
    FILE *f = out_open(o, "probe_variants_cosine.csv", path, sizeof path);
    int v, c, p;
    if (!f) return -1;
    fprintf(f, "variant,mezo_cos,mezo_se,grzo_cos,grzo_se,ratio,mezo_final_loss,grzo_final_loss,paper_gain_points\n");
    for (v = 0; v < N_VAR; v++) {
        running_stat m = vcos_merged(cj, v, 0), g = vcos_merged(cj, v, 1);
        fprintf(f, "%s,%.6g,%.3g,%.6g,%.3g,%.4f,%.6g,%.6g,%.1f\n", VAR_KEY[v], stat_mean(&m), stat_se(&m), stat_mean(&g), stat_se(&g),
                stat_mean(&g) / stat_mean(&m), vt_mean(tj, v, 0, tj->n_points - 1), vt_mean(tj, v, 1, tj->n_points - 1), PAPER_GAIN[v]);
    }
    if (out_close(f, path) != 0) return -1;
    printf("CSV: %s\n", path);
    f = out_open(o, "probe_variants_curves.csv", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "step");
    for (v = 0; v < N_VAR; v++) fprintf(f, ",mezo_%s,grzo_%s", VAR_KEY[v], VAR_KEY[v]);
    fprintf(f, "\n");
    for (p = 0; p < tj->n_points; p++) {
        fprintf(f, "%d", p * VAR_EVAL);
        for (v = 0; v < N_VAR; v++)
            for (c = 0; c < N_CORE; c++) fprintf(f, ",%.6g", vt_mean(tj, v, c, p));
        fprintf(f, "\n");
    }
    if (out_close(f, path) != 0) return -1;
    printf("CSV: %s\n", path);
    return run_gnuplot(o, "probe_variants", PLOT) < 0 ? -1 : 0;
}

/* 0, or -1 when the table could not be stored (message printed) */
static int print_table(const vcos_job *cj, const vt_job *tj) {
    static const char *const head[] = {"X", "MeZO+X cos (×10⁻³)", "GRZO+X cos (×10⁻³)", "ratio", "start loss", "MeZO+X loss",
                                       "GRZO+X loss", "MeZO+X lr", "paper: GRZO+X − MeZO+X"};
    md_table t;
    int v;
    if (md_begin(&t, 9, head) != 0) return -1;
    for (v = 0; v < N_VAR; v++) {
        running_stat m = vcos_merged(cj, v, 0), g = vcos_merged(cj, v, 1);
        char mc[40], gc[40], r[16], st[24], ml[24], gl[24], lr[24], pg[40];
        snprintf(mc, sizeof mc, "%.3f ± %.3f", 1e3 * stat_mean(&m), 1e3 * stat_se(&m));
        snprintf(gc, sizeof gc, "%.3f ± %.3f", 1e3 * stat_mean(&g), 1e3 * stat_se(&g));
        snprintf(r, sizeof r, "%.2f", stat_mean(&g) / stat_mean(&m));
        snprintf(st, sizeof st, "%.4f", vt_mean(tj, v, 0, 0));
        snprintf(ml, sizeof ml, "%.4f", vt_mean(tj, v, 0, tj->n_points - 1));
        snprintf(gl, sizeof gl, "%.4f", vt_mean(tj, v, 1, tj->n_points - 1));
        snprintf(lr, sizeof lr, "%.3g", (double)tj->lr[v][0]);
        if (isnan(PAPER_GAIN[v])) snprintf(pg, sizeof pg, "%s", v == 0 ? "(GRZO − MeZO: see README)" : "not in the paper");
        else snprintf(pg, sizeof pg, "+%.1f points (5-task mean)", PAPER_GAIN[v]);
        if (md_row(&t, VAR_NAME[v], mc, gc, r, st, ml, gl, lr, pg) != 0) { md_free(&t); return -1; }
    }
    md_print(&t, stdout);
    md_free(&t);
    return 0;
}

static int check_claims(const vcos_job *cj) {
    int v, failed = 0;
    for (v = 0; v < N_VAR; v++) {
        running_stat m = vcos_merged(cj, v, 0), g = vcos_merged(cj, v, 1);
        double ratio = stat_mean(&g) / stat_mean(&m);
        if (!(ratio > VAR_MIN_RATIO)) {
            printf("CHECK FAILED: variants: %s: GRZO+X's cosine is %.2f x MeZO+X's at B = 16, not above %.1f\n", VAR_NAME[v], ratio,
                   VAR_MIN_RATIO);
            failed = 1;
        }
    }
    if (!failed) printf("check passed: GRZO+X's cosine with the exact gradient is above %.1f x MeZO+X's for every X\n", VAR_MIN_RATIO);
    return failed ? PROBE_EXIT_CHECK_FAILED : PROBE_EXIT_OK;
}

int probe_variants(const probe_opts *o) {
    vcos_job cj;
    vt_job tj;
    double t0 = now_seconds();
    int trials = o->quick ? VCOS_TRIALS_QUICK : VCOS_TRIALS, rc = PROBE_EXIT_OK, v, n_units;
    memset(&cj, 0, sizeof cj);
    memset(&tj, 0, sizeof tj);
    cj.o = tj.o = o;
    cj.D = mlp_layout_of(VCOS_SHAPE).n;
    cj.chunks = trials / VCOS_CHUNK;
    tj.steps = o->quick ? VT_STEPS_QUICK : VT_STEPS;
    tj.seeds = o->quick ? VT_SEEDS_QUICK : VT_SEEDS;
    tj.n_points = tj.steps / VAR_EVAL + 1;
    n_units = N_VAR * cj.chunks;
    cj.cos = (running_stat *)calloc((size_t)(n_units * N_CORE), sizeof *cj.cos);
    cj.theta0 = (float *)malloc((size_t)cj.D * sizeof(float));
    tj.loss = (double *)calloc((size_t)(N_VAR * N_CORE * tj.seeds * tj.n_points), sizeof(double));
    tj.diverged = (int *)calloc((size_t)(N_VAR * N_CORE * tj.seeds), sizeof(int));
    if (!cj.cos || !cj.theta0 || !tj.loss || !tj.diverged || dataset_make(VCOS_SHAPE, &VCOS_DATA, seed_mix(o->seed, 62), &cj.data) != 0 ||
        dataset_make(VT_SHAPE, &VT_DATA, seed_mix(o->seed, 63), &tj.data) != 0) {
        fprintf(stderr, "grzo-probe: out of memory\n");
        rc = PROBE_EXIT_ERROR;
    }
    if (rc == PROBE_EXIT_OK) {
        mlp_init(VCOS_SHAPE, seed_mix(o->seed, 64), 0.5f, cj.theta0);
        if (run_units(n_units, o->threads, vcos_unit, &cj) != GRZO_OK) rc = PROBE_EXIT_ERROR;
    }
    for (v = 0; rc == PROBE_EXIT_OK && v < N_VAR; v++) {   /* learning rates: MeZO+X matched to GRZO+X */
        double ng, nm;
        if (update_norm(&tj, v, 1, &ng) != GRZO_OK || update_norm(&tj, v, 0, &nm) != GRZO_OK) { rc = PROBE_EXIT_ERROR; break; }
        tj.lr[v][1] = VT_LR_GRZO;
        tj.lr[v][0] = (float)((double)VT_LR_GRZO * ng / nm);
    }
    if (rc == PROBE_EXIT_OK && run_units(N_VAR * N_CORE * tj.seeds, o->threads, vt_unit, &tj) != GRZO_OK) rc = PROBE_EXIT_ERROR;
    if (rc == PROBE_EXIT_OK) {
        printf("## variants: sparse, low-rank and quantized perturbations with the MeZO and the GRZO core%s\n\n",
               o->sabotage ? " (SABOTAGED: MeZO runs as GRZO)" : "");
        printf("cosine: probe MLP %d-%d-%d (D = %lld), %d paired trials at B = %d, sigma = %g, aligned pool (c ~ 0.8); mean ±\n"
               "s.e. of the cosine with the batch's exact fp32 gradient. loss: MLP %d-%d-%d on the aligned task, final training\n"
               "loss after %d steps, mean of %d seed(s); GRZO lr %g, MeZO+X's lr matched to GRZO+X's initial\n"
               "update norm. sparse 20%%, low-rank r = 2 and nu = 100 with Rademacher noise; int8/int4 with Gaussian noise\n"
               "(QuZO's), weights fake-quantized per row in every forward. The paper column is Table 5's mean gain over\n"
               "five tasks on Llama3-8B (accuracy/F1 points), a different quantity: the sign is what compares.\n\n",
               VCOS_SHAPE.d_in, VCOS_SHAPE.d_hid, VCOS_SHAPE.d_out, (long long)cj.D, trials, VAR_B, (double)VAR_SIGMA,
               VT_SHAPE.d_in, VT_SHAPE.d_hid, VT_SHAPE.d_out, tj.steps, tj.seeds, (double)VT_LR_GRZO);
        if (print_table(&cj, &tj) != 0) rc = PROBE_EXIT_ERROR;
        else printf("\n");
        if (rc == PROBE_EXIT_OK && write_outputs(o, &cj, &tj) != 0) rc = PROBE_EXIT_ERROR;
        if (rc == PROBE_EXIT_OK && o->check) rc = check_claims(&cj);
        /* after a runtime error the error is the run's last word, as in the other subcommands */
        if (rc != PROBE_EXIT_ERROR) printf("(variants: %.1f s, %d threads)\n\n", now_seconds() - t0, o->threads);
    }
    dataset_free(&cj.data);
    dataset_free(&tj.data);
    free(cj.cos);
    free(cj.theta0);
    free(tj.loss);
    free(tj.diverged);
    return rc;
}
