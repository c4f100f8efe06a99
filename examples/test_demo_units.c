/* test_demo_units.c - the demo's own pieces (examples/demo.c, included here with its main
   renamed) against values computed here: its --check and the output checker
   (check_demo_outputs.py) hold the demo's outputs to each other, which a wrong problem, a
   wrong gradient or a wrong c would pass.
     problem     seed 1's problem: the pretrained outputs standardized on the training inputs
                 (mean 0, std 1 each), its weight scales; task B's teacher = the pretrained
                 network with every weight and bias times 1 + 0.1 N(0, 1) (the draws made
                 here) and every output shifted by exactly 0.5; the scratch network's scale
                 and zero biases; the inputs' shared mean and spread 0.25; the students'
                 loss on the backend against a forward in double written out here
     gradient    per_example_gradient against central differences of one example's loss
     cosine      mean_pairwise_cosine against the mean of u_i.u_j over all pairs i != j
     stats       mean_of, sd_of (sample s.d., 0 for one value)
     curves      curve_summary and ratio_summary (paired by seed) on 3 problems
     schedule    progress_interval, examples_per_step, draw_batch, the activations' rows,
                 forward rows per step
     pass        forward_pass: each copy's loss that of its example, computed here
     csv         write_csv fails where the file cannot be made or cannot replace the path
     tiny_run    whole runs of 1 and 2 steps: the curves hold every point (steps 0, 1, 2)
     claim       check_claim: GRZO below MeZO in the mean and on more than half the seeds
     options     parse_options: defaults, --quick, values to the right estimator, refusals */
#define main demo_main
#include "demo.c"
#undef main
#include "test_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* stdout to /dev/null and back: the demo's own lines (its tables, "CHECK FAILED: ...") would
   read as this test's */
static int quiet_begin(void)
{
    int saved, nul;
    fflush(stdout);
    saved = dup(1);
    nul = open("/dev/null", O_WRONLY);
    REQUIRE(saved >= 0 && nul >= 0 && dup2(nul, 1) == 1);
    close(nul);
    return saved;
}

static void quiet_end(int saved)
{
    fflush(stdout);
    REQUIRE(dup2(saved, 1) == 1);
    close(saved);
}

/* one example's loss (mean squared error over the outputs) in double */
static double example_loss(const mlp *m, const float *x, const double *target)
{
    double act[N_LAYERS + 1][D_HID], s = 0.0;
    int j;
    mlp_forward_row(m, x, act);
    for (j = 0; j < D_OUT; j++)
        s += (act[N_LAYERS][j] - target[j]) * (act[N_LAYERS][j] - target[j]);
    return s / D_OUT;
}

/* the parameter of flat index k (layout of per_example_gradient: layer by layer, W then b) */
static float *param_at(mlp *m, int64_t k)
{
    int l;
    for (l = 0; l < N_LAYERS; l++) {
        int64_t nw = (int64_t)layer_out[l] * layer_in[l];
        if (k < nw) return &m->w[l][k];
        k -= nw;
        if (k < layer_out[l]) return &m->b[l][k];
        k -= layer_out[l];
    }
    return NULL;
}

/* mean of u_i.u_j over the ordered pairs i != j of the unit per-example gradients */
static double direct_cosine(const mlp *model, const mlp *teacher, const float *xs)
{
    int64_t d = parameter_count(), i, j, k;
    double *u = malloc((size_t)(N_COSINE * d) * sizeof(double)), s = 0.0;
    double act[N_LAYERS + 1][D_HID];
    REQUIRE(u != NULL);
    for (i = 0; i < N_COSINE; i++) {
        double nn = 0.0;
        mlp_forward_row(teacher, xs + i * D_IN, act);
        per_example_gradient(model, xs + i * D_IN, act[N_LAYERS], u + i * d);
        for (k = 0; k < d; k++) nn += u[i * d + k] * u[i * d + k];
        for (k = 0; k < d; k++) u[i * d + k] /= sqrt(nn);
    }
    for (i = 0; i < N_COSINE; i++)
        for (j = 0; j < N_COSINE; j++) {
            double dot = 0.0;
            if (i == j) continue;
            for (k = 0; k < d; k++) dot += u[i * d + k] * u[j * d + k];
            s += dot;
        }
    free(u);
    return s / ((double)N_COSINE * (N_COSINE - 1));
}

static void quick_options(demo_options *opt)
{
    char *argv[] = { "demo", "--quick", NULL };
    REQUIRE(parse_options(2, argv, opt) == 0);
}

/* mean and population std of a float sample */
static void moments(const float *v, size_t n, size_t stride, double *mean, double *sd)
{
    double s = 0.0, q = 0.0;
    size_t i;
    for (i = 0; i < n; i++) s += v[i * stride];
    *mean = s / (double)n;
    for (i = 0; i < n; i++) q += (v[i * stride] - *mean) * (v[i * stride] - *mean);
    *sd = sqrt(q / (double)n);
}

static void test_problem(grzo_backend *be, problem *p)
{
    double act[N_LAYERS + 1][D_HID], mean, sd;
    float eps[D_HID * D_HID], common[D_IN];
    int l, j, k, e;
    int64_t i;
    /* the pretrained outputs: mean 0, std 1 on the training inputs */
    for (j = 0; j < D_OUT; j++) {
        double s = 0.0, q = 0.0;
        for (i = 0; i < p->train.n; i++) {
            mlp_forward_row(&p->pretrained, p->train.x + i * D_IN, act);
            s += act[N_LAYERS][j];
            q += act[N_LAYERS][j] * act[N_LAYERS][j];
        }
        s /= (double)p->train.n;
        CHECK_NEAR(s, 0.0, 1e-4);
        CHECK_NEAR(sqrt(q / (double)p->train.n - s * s), 1.0, 1e-4);
    }
    /* the hidden layers: their own streams, 1.5 / sqrt(fan_in) and 0.3 times N(0, 1) */
    for (l = 0; l < N_LAYERS - 1; l++) {
        size_t nw = (size_t)layer_out[l] * layer_in[l];
        fill_gaussian(p->seed, STREAM_PRETRAINED_W + (uint32_t)l, 1.5f / sqrtf((float)layer_in[l]), eps, nw);
        CHECK(memcmp(eps, p->pretrained.w[l], nw * sizeof(float)) == 0);
        fill_gaussian(p->seed, STREAM_PRETRAINED_B + (uint32_t)l, 0.3f, eps, (size_t)layer_out[l]);
        CHECK(memcmp(eps, p->pretrained.b[l], (size_t)layer_out[l] * sizeof(float)) == 0);
    }
    /* hidden-layer weights 1.5 / sqrt(fan_in), biases 0.3 (sample moments) */
    for (l = 0; l < N_LAYERS - 1; l++) {
        moments(p->pretrained.w[l], (size_t)layer_out[l] * layer_in[l], 1, &mean, &sd);
        CHECK_NEAR(sd * sqrt((double)layer_in[l]), 1.5, 0.1);
        moments(p->pretrained.b[l], (size_t)layer_out[l], 1, &mean, &sd);
        CHECK_NEAR(sd, 0.3, 0.1);
    }
    /* the teacher: every weight and bias times 1 + 0.1 z, the outputs shifted by 0.5 */
    for (l = 0; l < N_LAYERS; l++) {
        size_t nw = (size_t)layer_out[l] * layer_in[l], t;
        fill_gaussian(p->seed, STREAM_CHANGE_W + (uint32_t)l, 1.0f, eps, nw);
        for (t = 0; t < nw; t++)
            CHECKF(p->teacher.w[l][t] == p->pretrained.w[l][t] * (1.0f + 0.1f * eps[t]),
                   "layer %d weight %zu: %g, pretrained %g, z %g", l, t, (double)p->teacher.w[l][t],
                   (double)p->pretrained.w[l][t], (double)eps[t]);
        fill_gaussian(p->seed, STREAM_CHANGE_B + (uint32_t)l, 1.0f, eps, (size_t)layer_out[l]);
        for (j = 0; j < layer_out[l]; j++) {
            float changed = p->pretrained.b[l][j] * (1.0f + 0.1f * eps[j]);
            if (l < N_LAYERS - 1)
                CHECK(p->teacher.b[l][j] == changed);
            else
                CHECKF(fabsf(p->teacher.b[l][j] - changed) == 0.5f, "output %d: shift %g", j,
                       (double)(p->teacher.b[l][j] - changed));
        }
    }
    /* the scratch network: 1/sqrt(fan_in), zero biases */
    for (l = 0; l < N_LAYERS; l++) {
        moments(p->scratch.w[l], (size_t)layer_out[l] * layer_in[l], 1, &mean, &sd);
        CHECK_NEAR(sd * sqrt((double)layer_in[l]), 1.0, 0.1);
        for (j = 0; j < layer_out[l]; j++) CHECK(p->scratch.b[l][j] == 0.0f);
    }
    /* the inputs: one N(0, 1) mean shared by train and test, plus 0.25 N(0, 1) */
    fill_gaussian(p->seed, STREAM_INPUT_MEAN, 1.0f, common, D_IN);
    for (k = 0; k < D_IN; k++) {
        moments(p->train.x + k, (size_t)p->train.n, D_IN, &mean, &sd);
        CHECK_NEAR(mean, common[k], 0.03);
        CHECK_NEAR(sd, 0.25, 0.015);
        moments(p->test.x + k, (size_t)p->test.n, D_IN, &mean, &sd);
        CHECK_NEAR(mean, common[k], 0.03);
        CHECK_NEAR(sd, 0.25, 0.015);
    }
    CHECK(p->train.n == N_TRAIN && p->test.n == N_TEST);
    CHECK(memcmp(p->train.x, p->test.x, D_IN * sizeof(float)) != 0);
    /* labels: the teacher's outputs; the students' loss on the backend against the
       pretrained network's mean squared error computed here */
    for (e = 0; e < N_ESTIMATORS; e++) {
        const dataset *sets[2] = { &p->train, &p->test };
        int d;
        for (d = 0; d < 2; d++) {
            double want = 0.0, got = -1.0;
            for (i = 0; i < sets[d]->n; i++) {
                double target[D_OUT];
                mlp_forward_row(&p->teacher, sets[d]->x + i * D_IN, act);
                for (j = 0; j < D_OUT; j++) target[j] = act[N_LAYERS][j];
                want += example_loss(&p->pretrained, sets[d]->x + i * D_IN, target);
            }
            want /= (double)sets[d]->n;
            CHECK_OK(student_evaluate(&p->st[e], sets[d], &got));
            CHECK_NEAR(got, want, 1e-4 * want);
            if (e == 0 && d == 0) CHECK_NEAR(p->init_train, want, 1e-4 * want);
        }
    }
    (void)be;
}

static void test_gradient(problem *p)
{
    int64_t d = parameter_count(), k;
    double *g = calloc((size_t)d, sizeof(double)), target[D_OUT], act[N_LAYERS + 1][D_HID];
    int ex;
    REQUIRE(g != NULL);
    CHECK(d == 16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4);
    for (ex = 0; ex < 3; ex++) {
        const float *x = p->train.x + ex * 97 * D_IN;
        mlp m = p->pretrained;   /* its arrays, perturbed one entry at a time and restored */
        mlp_forward_row(&p->teacher, x, act);
        for (k = 0; k < D_OUT; k++) target[k] = act[N_LAYERS][k];
        per_example_gradient(&p->pretrained, x, target, g);
        for (k = ex; k < d; k += 37) {
            float *w = param_at(&m, k), w0 = *w, hp, hm;
            double lp, lm, fd;
            *w = w0 + 1e-2f; hp = *w - w0; lp = example_loss(&m, x, target);
            *w = w0 - 1e-2f; hm = w0 - *w; lm = example_loss(&m, x, target);
            *w = w0;
            fd = (lp - lm) / ((double)hp + (double)hm);
            CHECKF(fabs(fd - g[k]) <= 2e-3 * fabs(g[k]) + 1e-6, "example %d parameter %lld: backprop %.9g, "
                   "central difference %.9g", ex, (long long)k, g[k], fd);
        }
        /* the last layer's biases (the output shift) exactly: 2 (o - t) / D_OUT */
        mlp_forward_row(&p->pretrained, x, act);
        for (k = 0; k < D_OUT; k++)
            CHECK_NEAR(g[d - D_OUT + k], 2.0 * (act[N_LAYERS][k] - target[k]) / D_OUT, 1e-12);
    }
    free(g);
}

static void test_cosine(problem *p)
{
    double want_ft = direct_cosine(&p->pretrained, &p->teacher, p->train.x);
    double want_sc = direct_cosine(&p->scratch, &p->pretrained, p->train.x);
    CHECK_NEAR(p->c_finetune, want_ft, 1e-9);
    CHECK_NEAR(p->c_scratch, want_sc, 1e-9);
    /* the regimes the demo contrasts */
    CHECKF(want_ft > 0.5 && want_sc < 0.35 && want_ft - want_sc > 0.3, "c %g (fine-tuning), %g (scratch)",
           want_ft, want_sc);
}

static void test_stats(void)
{
    static const double v[5] = { 1.0, 2.0, 3.0, 6.0, 100.0 };   /* the last one past n */
    CHECK_NEAR(mean_of(v, 4), 3.0, 1e-15);
    CHECK_NEAR(sd_of(v, 4), sqrt(14.0 / 3.0), 1e-15);   /* (4 + 1 + 0 + 9) / (4 - 1) */
    CHECK_NEAR(mean_of(v, 3), 2.0, 1e-15);
    CHECK_NEAR(sd_of(v, 3), 1.0, 1e-15);
    CHECK_NEAR(mean_of(v + 1, 1), 2.0, 0.0);
    CHECK(sd_of(v + 1, 1) == 0.0);
}

static void test_curves(void)
{
    /* 3 problems, 2 points: [problem][estimator][point] */
    static const double loss[3][N_ESTIMATORS][2] = {
        { { 1.0, 0.2 }, { 1.0, 0.4 }, { 1.0, 0.3 } },
        { { 2.0, 0.9 }, { 2.0, 0.3 }, { 2.0, 0.5 } },
        { { 3.0, 0.1 }, { 3.0, 0.5 }, { 3.0, 0.7 } } };
    int64_t step[2] = { 0, 10 };
    double buf[3 * N_ESTIMATORS * 2], mean, lo, hi;
    curves c;
    int p, e, t;
    for (p = 0; p < 3; p++)
        for (e = 0; e < N_ESTIMATORS; e++)
            for (t = 0; t < 2; t++) buf[(p * N_ESTIMATORS + e) * 2 + t] = loss[p][e][t];
    c.n_problems = 3; c.n_points = 2; c.used = 2; c.step = step; c.loss = buf;
    curve_summary(&c, EST_GRZO, 1, &mean, &lo, &hi);
    CHECK_NEAR(mean, 0.4, 1e-15); CHECK(lo == 0.1 && hi == 0.9);
    curve_summary(&c, EST_MEZO, 1, &mean, &lo, &hi);
    CHECK_NEAR(mean, 0.4, 1e-15); CHECK(lo == 0.3 && hi == 0.5);
    curve_summary(&c, EST_FZOO, 1, &mean, &lo, &hi);
    CHECK_NEAR(mean, 0.5, 1e-15); CHECK(lo == 0.3 && hi == 0.7);
    curve_summary(&c, EST_FZOO, 0, &mean, &lo, &hi);
    CHECK_NEAR(mean, 2.0, 1e-15); CHECK(lo == 1.0 && hi == 3.0);
    ratio_summary(&c, 1, &mean, &lo, &hi);   /* 0.5, 3, 0.2: paired by problem */
    CHECK_NEAR(mean, 3.7 / 3.0, 1e-15); CHECK_NEAR(lo, 0.2, 1e-15); CHECK_NEAR(hi, 3.0, 1e-15);
    ratio_summary(&c, 0, &mean, &lo, &hi);
    CHECK(mean == 1.0 && lo == 1.0 && hi == 1.0);
    buf[(0 * N_ESTIMATORS + EST_GRZO) * 2 + 1] = 0.8;   /* ratios 2, 3, 0.2 */
    buf[(2 * N_ESTIMATORS + EST_GRZO) * 2 + 1] = 1.0;   /* ratios 2, 3, 2: all above 1 */
    ratio_summary(&c, 1, &mean, &lo, &hi);
    CHECK_NEAR(mean, 7.0 / 3.0, 1e-15); CHECK_NEAR(lo, 2.0, 1e-15); CHECK_NEAR(hi, 3.0, 1e-15);
}

static void test_schedule(problem *p, const demo_options *opt)
{
    int64_t rows[64], seen[N_TRAIN / 64] = {0}, step, i, again[64];
    int e;
    CHECK(progress_interval(1500, 1) == 100 && progress_interval(1500, 4) == 25);
    CHECK(progress_interval(3000, 1) == 200 && progress_interval(10, 4) == 1 && progress_interval(1, 1) == 1);
    CHECK(examples_per_step(EST_GRZO, 16) == 16 && examples_per_step(EST_MEZO, 16) == 16);
    CHECK(examples_per_step(EST_FZOO, 16) == 8);
    /* draw_batch: in range, the same for the same (seed, step), reaching the whole set */
    for (step = 0; step < 400; step++) {
        draw_batch(1, step, 64, N_TRAIN, rows);
        draw_batch(1, step, 64, N_TRAIN, again);
        CHECK(memcmp(rows, again, sizeof rows) == 0);
        for (i = 0; i < 64; i++) {
            CHECKF(rows[i] >= 0 && rows[i] < N_TRAIN, "step %lld row %lld", (long long)step, (long long)rows[i]);
            if (rows[i] >= 0 && rows[i] < N_TRAIN) seen[rows[i] / 64]++;
        }
    }
    for (i = 0; i < N_TRAIN / 64; i++)   /* 25600 draws over 32 bins: 800 each, s.d. 28 */
        CHECKF(seen[i] > 650 && seen[i] < 950, "bin %lld of draw_batch: %lld", (long long)i, (long long)seen[i]);
    draw_batch(1, 1, 64, N_TRAIN, again);
    draw_batch(1, 0, 64, N_TRAIN, rows);
    CHECK(memcmp(rows, again, sizeof rows) != 0);
    draw_batch(2, 0, 64, N_TRAIN, again);
    CHECK(memcmp(rows, again, sizeof rows) != 0);
    /* activations for an evaluation chunk or a GRZO pass of 2B rows, whichever is larger */
    for (e = 0; e < N_ESTIMATORS; e++) CHECK(p->st[e].capacity == EVAL_CHUNK);
    {
        demo_options big = *opt;
        student s;
        big.batch = 1024;
        REQUIRE_OK(student_create(&s, EST_GRZO, &big, 1, (grzo_backend *)p->st[0].be, &p->pretrained, &p->train));
        CHECK(s.capacity == 2048);
        student_destroy(&s);
    }
    /* one training step of each student: 2B rows forwarded */
    draw_batch(p->seed, 0, opt->batch, p->train.n, p->batch_rows);
    for (e = 0; e < N_ESTIMATORS; e++) {
        CHECK(p->st[e].forward_rows == 0 && p->st[e].diverged_at == -1);
        CHECK(p->st[e].batch_size == examples_per_step(e, opt->batch));
        CHECK_OK(student_train_step(&p->st[e], 0));
        CHECKF(p->st[e].forward_rows == 2 * opt->batch, "%s: %lld rows in a step", estimator_names[e],
               (long long)p->st[e].forward_rows);
        CHECK(p->st[e].train_seconds > 0.0);
    }
}

/* --check: passes only when GRZO ends below MeZO in the mean and on more than half the seeds */
static void test_claim(void)
{
    demo_options o;
    outcome r;
    memset(&o, 0, sizeof o);
    o.seeds = 2;
    r.grzo_mean = 0.1; r.mezo_mean = 0.2; r.grzo_below = 2;
    CHECK(check_claim(&r, &o) == 0);
    r.grzo_below = 1;   /* half of the seeds is not more than half */
    CHECK(check_claim(&r, &o) == 1);
    r.grzo_below = 2; r.grzo_mean = 0.2;   /* level in the mean */
    CHECK(check_claim(&r, &o) == 1);
    r.grzo_mean = 0.3;
    CHECK(check_claim(&r, &o) == 1);
    o.seeds = 3; r.grzo_mean = 0.1;
    CHECK(check_claim(&r, &o) == 0);
    r.grzo_below = 1;
    CHECK(check_claim(&r, &o) == 1);
}

/* forward_pass outside a step (plain calls): copy c's loss is that of example example[c] of
   the batch, computed here in double; its rows counted */
static void test_pass(problem *p, const demo_options *opt)
{
    student s;
    grzo_pass_info pass;
    int64_t rows[8], example[8];
    int8_t sign[8] = {0};
    float losses[8];
    int c, j;
    REQUIRE_OK(student_create(&s, EST_MEZO, opt, 1, (grzo_backend *)p->st[0].be, &p->pretrained, &p->train));
    draw_batch(p->seed, 7, 8, p->train.n, rows);
    for (c = 0; c < 8; c++) example[c] = (3 * c + 1) % 8;
    memset(s.x, 0, (size_t)s.capacity * D_IN * sizeof(float));
    memset(&pass, 0, sizeof pass);
    pass.n_copies = 1;
    pass.n_segments = 8;
    pass.example = example;
    pass.sign = sign;
    s.batch = rows;
    CHECK_OK(forward_pass(s.ctx, &pass, losses, &s));
    for (c = 0; c < 8; c++) {
        int64_t r = rows[example[c]];
        double target[D_OUT];
        for (j = 0; j < D_OUT; j++) target[j] = p->train.y[r * D_OUT + j];
        CHECK_NEAR(losses[c], example_loss(&p->pretrained, p->train.x + r * D_IN, target),
                   1e-4 * losses[c] + 1e-7);
    }
    CHECK(s.forward_rows == 8);
    student_destroy(&s);
}

/* TMPDIR/grzo_demo_units_XXXXXX into buf, for mkdtemp or mkstemp */
static void temp_template(char *buf, size_t n)
{
    const char *base = getenv("TMPDIR");
    int len = snprintf(buf, n, "%s/grzo_demo_units_XXXXXX", base && *base ? base : "/tmp");
    REQUIRE(len > 0 && (size_t)len < n);
}

/* the curves can not be written: write_csv says so (the run then fails) */
static void test_csv_failure(void)
{
    int64_t step[1] = { 0 };
    double loss[N_ESTIMATORS] = { 1.0, 1.0, 1.0 };
    curves c;
    c.n_problems = 1; c.n_points = 1; c.used = 1; c.step = step; c.loss = loss;
    CHECK(write_csv("/nonexistent-grzo-folder/demo.csv", &c, 16) == -1);
    {   /* written, but it cannot replace the path: a folder that is not empty */
        char dir[256], path[288], inner[320];
        FILE *f;
        temp_template(dir, sizeof dir);
        REQUIRE(mkdtemp(dir) != NULL);
        snprintf(path, sizeof path, "%s/demo.csv", dir);
        snprintf(inner, sizeof inner, "%s/kept", path);
        REQUIRE(mkdir(path, 0700) == 0);
        f = fopen(inner, "w");
        REQUIRE(f != NULL);
        fclose(f);
        CHECK(write_csv(path, &c, 16) == -1);
        remove(inner);
        remove(path);
        remove(dir);
    }
}

/* a whole run of 1 and 2 steps: every point recorded fits the curves (steps 0, 1, 2) */
static void test_tiny_run(void)
{
    char path[256], csv[256], line[512];
    int fd, lines = 0;
    FILE *f;
    temp_template(path, sizeof path);
    fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(csv, sizeof csv, "%s", path);
    {
        char *argv[] = { "demo", "--steps", "2", "--seeds", "1", "--csv", csv, NULL };
        CHECK(demo_main(7, argv) == 0);
    }
    f = fopen(csv, "r");
    REQUIRE(f != NULL);
    while (fgets(line, sizeof line, f) != NULL) {
        if (lines > 0) CHECKF(atoi(line) == lines - 1, "CSV row %d: %s", lines, line);
        lines++;
    }
    fclose(f);
    CHECK(lines == 4);   /* header, steps 0, 1, 2 */
    {
        char *argv[] = { "demo", "--steps", "1", "--seeds", "1", "--csv", csv, NULL };
        CHECK(demo_main(7, argv) == 0);
    }
    remove(csv);
}

static int parse(demo_options *opt, int argc, char **argv)
{
    return parse_options(argc, argv, opt);
}

static void test_options(void)
{
    demo_options o;
    char *plain[] = { "demo", NULL };
    char *quick[] = { "demo", "--quick", "--check", "--steps", "7", NULL };
    char *lrs[] = { "demo", "--lr-grzo", "0.5", "--lr-mezo", "0.25", "--lr-fzoo", "0.125", "--sigma", "0.0625",
                    "--batch", "6", "--seeds", "3", "--seed", "9", "--threads", "2", "--csv", "x.csv", NULL };
    char *odd[] = { "demo", "--batch", "5", NULL };
    char *many[] = { "demo", "--seeds", "101", NULL };
    char *nocsv[] = { "demo", "--csv", "", NULL };
    char *novalue[] = { "demo", "--steps", NULL };
    char *unknown[] = { "demo", "--stepz", "3", NULL };
    CHECK(parse(&o, 1, plain) == 0);
    CHECK(o.steps == DEFAULT_STEPS && o.seeds == DEFAULT_SEEDS && o.batch == DEFAULT_BATCH && o.seed == 1);
    CHECK(o.threads == 1 && !o.quick && !o.check && o.csv_path == NULL && o.sigma == DEFAULT_SIGMA);
    CHECK(o.lr[EST_GRZO] == DEFAULT_LR_GRZO && o.lr[EST_MEZO] == DEFAULT_LR_MEZO && o.lr[EST_FZOO] == DEFAULT_LR_FZOO);
    CHECK(parse(&o, 5, quick) == 0);
    CHECK(o.quick && o.check && o.steps == 7 && o.seeds == DEFAULT_QUICK_SEEDS);
    CHECK(parse(&o, 19, lrs) == 0);
    CHECK(o.lr[EST_GRZO] == 0.5f && o.lr[EST_MEZO] == 0.25f && o.lr[EST_FZOO] == 0.125f && o.sigma == 0.0625f);
    CHECK(o.batch == 6 && o.seeds == 3 && o.seed == 9 && o.threads == 2 && strcmp(o.csv_path, "x.csv") == 0);
    CHECK(o.steps == DEFAULT_STEPS);
    {   /* the rates and sigma take (0, 1]: 1 itself, not 0 */
        char *one[] = { "demo", "--sigma", "1", "--lr-grzo", "1", "--lr-mezo", "1", "--lr-fzoo", "1", NULL };
        char *zero[] = { "demo", "--sigma", "0", NULL };
        CHECK(parse(&o, 9, one) == 0);
        CHECK(o.sigma == 1.0f && o.lr[EST_GRZO] == 1.0f && o.lr[EST_MEZO] == 1.0f && o.lr[EST_FZOO] == 1.0f);
        CHECK(parse(&o, 3, zero) == 2);
    }
    CHECK(parse(&o, 3, odd) == 2);
    CHECK(parse(&o, 3, many) == 2);
    CHECK(parse(&o, 3, nocsv) == 2);
    CHECK(parse(&o, 2, novalue) == 2);
    CHECK(parse(&o, 3, unknown) == 2);
}

int main(int argc, char **argv)
{
    demo_options opt;
    grzo_backend be;
    problem *p = calloc(1, sizeof *p);
    tu_args(argc, argv);
    REQUIRE(p != NULL);
    quick_options(&opt);
    REQUIRE_OK(create_cpu_backend(1, &be));
    REQUIRE_OK(problem_create(p, 1, &opt, &be));
    if (tu_case("problem")) test_problem(&be, p);
    if (tu_case("gradient")) test_gradient(p);
    if (tu_case("cosine")) test_cosine(p);
    if (tu_case("stats")) test_stats();
    if (tu_case("curves")) test_curves();
    if (tu_case("schedule")) test_schedule(p, &opt);
    if (tu_case("pass")) test_pass(p, &opt);
    if (tu_case("csv")) test_csv_failure();
    if (tu_case("tiny_run")) {
        int saved = quiet_begin();
        test_tiny_run();
        quiet_end(saved);
    }
    if (tu_case("claim")) {
        int saved = quiet_begin();
        test_claim();
        quiet_end(saved);
    }
    if (tu_case("options")) test_options();
    problem_destroy(p);
    grzo_backend_destroy(&be);
    free(p);
    return tu_finish("test_demo_units");
}
