/* alignment.c - "will GRZO help on my task?": grzo's forward-only B_eff (grzo_align, grzo.h
   section 3b) against the exact B_eff of the probe MLP's per-example backprop gradients.

   What is measured. For each task and batch size B, repeat r draws a batch of B distinct
   examples from a pool of 64 and runs the diagnostic with K shared-perturbation probes and
   its own seed, at the initial parameters. The exact value is |sum_i g_i|^2 / sum_i |g_i|^2
   = 1 + (B-1) c_w from the batch's backprop gradients. The table shows the first repeat's
   batch (estimate, 95% interval, z = (estimate - exact) / se) and, over all repeats, the
   share of 95% intervals that contain the exact value (coverage, ~95% expected) and the
   mean |z|. The predicted GRZO/MeZO variance and cosine ratios are the library's
   (Var ratio = B_eff; cos ratio = sqrt(pi B_eff / B) G((B+1)/2) / G(B/2)).

   --check: every shown batch within 4 standard errors of the exact B_eff, and the pooled
   coverage within [COVER_LO, COVER_HI]. --sabotage: the probes feed each "-" copy the next
   example of the batch (a mislaid copy layout); the differences then carry l_i - l_{i+1},
   the estimate is far off and --check fails. */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mlp_shape ALIGN_SHAPE = {8, 8, 4};       /* D = 108, as the variance probe */
static const int ALIGN_B[] = {2, 4, 8, 16, 32};
enum { N_B = 5, N_TASKS = 2, ALIGN_POOL = 64 };
enum { ALIGN_PROBES = 400, ALIGN_PROBES_QUICK = 200, ALIGN_REPEATS = 200, ALIGN_REPEATS_QUICK = 40 };
#define ALIGN_SIGMA 1e-3f
#define Z_MAX 4.0                /* --check: |z| of every shown batch */
#define COVER_LO 0.90            /* --check: pooled coverage of the 95% intervals */
#define COVER_HI 0.985

typedef struct task {
    const char *name;
    data_spec spec;
} task;

/* the variance probe's two regimes: aligned (one label, inputs near one direction) and
   diverse (inputs as spread as shared, 70% one label: gradients of different labels cancel) */
static const task TASKS[N_TASKS] = {
    {"aligned", {ALIGN_POOL, 1.0f, 0.3f, LABEL_MAJORITY, 1.0f}},
    {"diverse", {ALIGN_POOL, 1.0f, 1.0f, LABEL_MAJORITY, 0.7f}},
};

typedef struct align_result {
    double exact, est, se, lo, hi, c_w_exact, c_w, var_ratio, cos_ratio, cos_lo, cos_hi;
} align_result;

typedef struct align_job {
    const probe_opts *o;
    dataset data[N_TASKS];
    float *theta0;
    int64_t D;
    int probes, repeats;
    align_result *res;           /* one per unit: (task, B, repeat), repeat fastest */
} align_job;

static grzo_status align_unit(int u, void *user) {
    align_job *j = (align_job *)user;
    int rep = u % j->repeats, b = (u / j->repeats) % N_B, t = u / (j->repeats * N_B), B = ALIGN_B[b];
    int idx[ALIGN_POOL], scratch[ALIGN_POOL];
    double *G = (double *)malloc((size_t)B * (size_t)j->D * sizeof(double));
    double *g_bar = (double *)malloc((size_t)j->D * sizeof(double));
    grad_geometry geo;
    grzo_align_report ar;
    grzo_desc desc;
    probe_model m;
    align_result *r = &j->res[u];
    grzo_status s;
    if (!G || !g_bar) { free(G); free(g_bar); return probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL); }
    draw_batch(seed_mix(j->o->seed, 0x616c0000ull + (uint64_t)(t * N_B + b)), (uint32_t)rep, ALIGN_POOL, B, idx, scratch);
    batch_gradients(&j->data[t], j->theta0, idx, B, G, g_bar, &geo);
    free(G);
    free(g_bar);
    memset(&desc, 0, sizeof desc);
    desc.seed = seed_mix(j->o->seed, 0x616c690000ull + (uint64_t)u);
    desc.lr = 1.0f;   /* unused: the diagnostic updates nothing */
    desc.sigma = ALIGN_SIGMA;
    s = model_create(&m, ALIGN_SHAPE, &desc, j->theta0);
    if (s == GRZO_OK) s = model_align(&m, &j->data[t], idx, B, j->probes, j->o->sabotage, &ar);
    model_destroy(&m);
    if (s != GRZO_OK) return s;
    r->exact = b_eff_of(geo.weighted_cos, B);
    r->c_w_exact = geo.weighted_cos;
    r->est = ar.b_eff;
    r->se = ar.b_eff_se;
    r->lo = ar.b_eff_lo;
    r->hi = ar.b_eff_hi;
    r->c_w = ar.c_w;
    r->var_ratio = ar.var_ratio;
    r->cos_ratio = ar.cos_ratio;
    r->cos_lo = ar.cos_ratio_lo;
    r->cos_hi = ar.cos_ratio_hi;
    return GRZO_OK;
}

typedef struct align_row {
    int task, B;
    align_result first;          /* repeat 0 */
    double z, coverage, mean_abs_z;
} align_row;

static double z_of(const align_result *r) { return r->se > 0.0 ? (r->est - r->exact) / r->se : (r->est == r->exact ? 0.0 : INFINITY); }

static align_row summarize(const align_job *j, int t, int b) {
    align_row w;
    const align_result *res = j->res + (size_t)(t * N_B + b) * (size_t)j->repeats;
    int k, covered = 0;
    double sum_z = 0.0;
    memset(&w, 0, sizeof w);
    w.task = t;
    w.B = ALIGN_B[b];
    w.first = res[0];
    w.z = z_of(&res[0]);
    for (k = 0; k < j->repeats; k++) {
        covered += res[k].lo <= res[k].exact && res[k].exact <= res[k].hi;
        sum_z += fabs(z_of(&res[k]));
    }
    w.coverage = (double)covered / j->repeats;
    w.mean_abs_z = sum_z / j->repeats;
    return w;
}

/* 0, or -1 when the table could not be stored (message printed) */
static int print_table(const align_row *rows, int n, int repeats) {
    static const char *const head[] = {"task", "B", "B_eff exact", "B_eff forward-only (95% CI)", "z", "c_w exact",
                                       "c_w estimate", "Var(MeZO)/Var(GRZO)", "cos(GRZO)/cos(MeZO)", "coverage", "mean |z|"};
    md_table t;
    int i;
    if (md_begin(&t, 11, head) != 0) return -1;
    for (i = 0; i < n; i++) {
        const align_row *w = &rows[i];
        char b[16], ex[16], est[64], z[16], cwe[16], cw[32], vr[16], cr[48], cov[32], mz[16];
        snprintf(b, sizeof b, "%d", w->B);
        snprintf(ex, sizeof ex, "%.3f", w->first.exact);
        snprintf(est, sizeof est, "%.3f ± %.3f [%.2f, %.2f]", w->first.est, w->first.se, w->first.lo, w->first.hi);
        snprintf(z, sizeof z, "%+.2f", w->z);
        snprintf(cwe, sizeof cwe, "%.3f", w->first.c_w_exact);
        snprintf(cw, sizeof cw, "%.3f", w->first.c_w);
        snprintf(vr, sizeof vr, "%.2f", w->first.var_ratio);
        snprintf(cr, sizeof cr, "%.2f [%.2f, %.2f]", w->first.cos_ratio, w->first.cos_lo, w->first.cos_hi);
        snprintf(cov, sizeof cov, "%.1f%% of %d", 100.0 * w->coverage, repeats);
        snprintf(mz, sizeof mz, "%.2f", w->mean_abs_z);
        if (md_row(&t, TASKS[w->task].name, b, ex, est, z, cwe, cw, vr, cr, cov, mz) != 0) {
            md_free(&t);
            return -1;
        }
    }
    md_print(&t, stdout);
    md_free(&t);
    return 0;
}

static int write_csv(const probe_opts *o, const align_row *rows, int n, int probes, int repeats, char *path, size_t cap) {
    FILE *f = out_open(o, "probe_alignment.csv", path, cap);
    int i;
    if (!f) return -1;
    fprintf(f, "task,B,probes,B_eff_exact,B_eff_est,B_eff_se,B_eff_lo,B_eff_hi,z,c_w_exact,c_w_est,"
               "var_ratio_pred,cos_ratio_pred,cos_ratio_lo,cos_ratio_hi,repeats,coverage,mean_abs_z\n");
    for (i = 0; i < n; i++) {
        const align_row *w = &rows[i];
        fprintf(f, "%s,%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.4f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%d,%.4f,%.4f\n",
                TASKS[w->task].name, w->B, probes, w->first.exact, w->first.est, w->first.se, w->first.lo, w->first.hi,
                w->z, w->first.c_w_exact, w->first.c_w, w->first.var_ratio, w->first.cos_ratio, w->first.cos_lo,
                w->first.cos_hi, repeats, w->coverage, w->mean_abs_z);
    }
    return out_close(f, path);
}

static double pooled_coverage(const align_row *rows, int n) {
    double sum = 0.0;
    int i;
    for (i = 0; i < n; i++) sum += rows[i].coverage;
    return sum / n;
}

static int check_claims(const align_row *rows, int n) {
    int i, failed = 0;
    double cover = pooled_coverage(rows, n);
    for (i = 0; i < n; i++) {
        const align_row *w = &rows[i];
        if (!(fabs(w->z) <= Z_MAX)) {
            printf("CHECK FAILED: alignment, %s task, B = %d: forward-only B_eff = %.3f ± %.3f is %.1f standard errors "
                   "from the exact %.3f (allowed %.0f)\n",
                   TASKS[w->task].name, w->B, w->first.est, w->first.se, w->z, w->first.exact, Z_MAX);
            failed = 1;
        }
    }
    if (!(cover >= COVER_LO && cover <= COVER_HI)) {
        printf("CHECK FAILED: alignment: the 95%% intervals cover the exact B_eff in %.1f%% of the repeats "
               "(allowed [%.1f%%, %.1f%%])\n", 100.0 * cover, 100.0 * COVER_LO, 100.0 * COVER_HI);
        failed = 1;
    }
    if (!failed)
        printf("check passed: forward-only B_eff within %.0f standard errors of the exact one for every task and B; "
               "95%% intervals cover it in %.1f%% of the repeats\n", Z_MAX, 100.0 * cover);
    return failed ? PROBE_EXIT_CHECK_FAILED : PROBE_EXIT_OK;
}

static int prepare(align_job *j) {
    mlp_layout L = mlp_layout_of(ALIGN_SHAPE);
    int t;
    j->D = L.n;
    j->theta0 = (float *)malloc((size_t)L.n * sizeof(float));
    j->res = (align_result *)calloc((size_t)(N_TASKS * N_B * j->repeats), sizeof *j->res);
    if (!j->theta0 || !j->res) return -1;
    mlp_init(ALIGN_SHAPE, seed_mix(j->o->seed, 11), 0.5f, j->theta0);
    for (t = 0; t < N_TASKS; t++)
        if (dataset_make(ALIGN_SHAPE, &TASKS[t].spec, seed_mix(j->o->seed, 20 + (uint64_t)t), &j->data[t]) != 0) return -1;
    return 0;
}

static void release(align_job *j) {
    int t;
    for (t = 0; t < N_TASKS; t++) dataset_free(&j->data[t]);
    free(j->theta0);
    free(j->res);
}

int probe_alignment(const probe_opts *o) {
    align_job j;
    align_row rows[N_TASKS * N_B];
    int t, b, n = 0, rc = PROBE_EXIT_OK;
    double t0 = now_seconds();
    char csv[OUT_PATH_MAX];
    memset(&j, 0, sizeof j);
    j.o = o;
    j.probes = o->quick ? ALIGN_PROBES_QUICK : ALIGN_PROBES;
    j.repeats = o->quick ? ALIGN_REPEATS_QUICK : ALIGN_REPEATS;
    if (prepare(&j) != 0) { fprintf(stderr, "grzo-probe: out of memory\n"); release(&j); return PROBE_EXIT_ERROR; }
    if (run_units(N_TASKS * N_B * j.repeats, o->threads, align_unit, &j) != GRZO_OK) { release(&j); return PROBE_EXIT_ERROR; }
    for (t = 0; t < N_TASKS; t++)
        for (b = 0; b < N_B; b++) rows[n++] = summarize(&j, t, b);

    printf("## alignment: forward-only B_eff (grzo_align) vs the exact B_eff from backprop%s\n\n",
           o->sabotage ? " (SABOTAGED: each \"-\" copy reads the next example)" : "");
    printf("probe MLP %d-%d-%d (D = %lld) at its initial parameters, batches of B distinct examples from a pool of %d,\n"
           "K = %d shared-perturbation probes per estimate (%d forward passes of 2B examples), sigma = %g.\n"
           "exact = |sum g_i|^2 / sum |g_i|^2 from per-example backprop; estimate ± delta-method se [95%% interval];\n"
           "z = (estimate - exact) / se for the batch shown; coverage = share of %d repeats (fresh batch and seed)\n"
           "whose 95%% interval holds the exact value. Predicted ratios from the estimate (grzo.h section 3b).\n\n",
           ALIGN_SHAPE.d_in, ALIGN_SHAPE.d_hid, ALIGN_SHAPE.d_out, (long long)j.D, ALIGN_POOL, j.probes, j.probes,
           (double)ALIGN_SIGMA, j.repeats);
    if (print_table(rows, n, j.repeats) != 0) { release(&j); return PROBE_EXIT_ERROR; }
    printf("\npooled coverage of the 95%% intervals: %.1f%% over %d estimates\n", 100.0 * pooled_coverage(rows, n),
           n * j.repeats);
    if (write_csv(o, rows, n, j.probes, j.repeats, csv, sizeof csv) != 0) { release(&j); return PROBE_EXIT_ERROR; }
    printf("\nCSV: %s\n", csv);
    if (o->check) rc = check_claims(rows, n);
    printf("(alignment: %.1f s, %d threads)\n\n", now_seconds() - t0, o->threads);
    release(&j);
    return rc;
}
