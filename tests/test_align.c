/* test_align.c - the alignment diagnostic (grzo.h section 3b) on a model whose per-example
   gradients are known exactly: l_i(W, b) = <x_i, W> + b, a 1 x D matrix block and a bias, so
   g_i = (x_i, 1) and G_ij = <x_i, x_j> + 1.
     gram      G_hat -> G: every entry within 5 of its standard errors (the Rademacher
               variance |g_i|^2 |g_j|^2 + G_ij^2 - 2 sum_d g_id^2 g_jd^2, over K), for an
               aligned and a cancelling set of gradients; B_eff_hat within 5 reported standard
               errors of the exact B_eff, and the reported standard error within 25% of
               section 3b's first-order formula (fourth-moment term included);
     bitwise   parameters bitwise unchanged and the step counter unmoved after a diagnostic,
               and the next training step bitwise equal to a run without the diagnostic
               (GRZO and in-place MeZO, whose probes must not touch the parameters);
     misuse    K < 2, B < 2, B too large, call order, steps and checkpoints during a
               diagnostic, a NaN loss and all-zero differences: the documented errors, nothing
               changed, and the context usable afterwards. */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"

#define AD 48            /* inputs per example */
#define AMAXB 8

typedef struct lin {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_block w, b;
    float *W, *bias;
    float *X, *Y, *L;    /* 2B x AD inputs, 2B outputs, 2B losses */
    double x[AMAXB][AD];
    int64_t B;
    int nan_at;          /* segment whose loss is NaN, -1 none */
} lin;

static void lin_init(lin *m, grzo_estimator est, int64_t B, float sigma)
{
    grzo_desc d;
    memset(m, 0, sizeof *m);
    REQUIRE_OK(tu_backend(TU_CPU, 1, &m->be));
    tu_require_host_memory(&m->be, "test_align");
    d = tu_desc(&m->be, est, 77, 1e-3f, sigma);
    m->ctx = tu_ctx(&d);
    m->B = B;
    m->nan_at = -1;
    m->W = (float *)tu_alloc(&m->be, AD * sizeof(float));
    m->bias = (float *)tu_alloc(&m->be, sizeof(float));
    m->X = (float *)tu_alloc(&m->be, 2 * AMAXB * AD * sizeof(float));
    m->Y = (float *)tu_alloc(&m->be, 2 * AMAXB * sizeof(float));
    m->L = (float *)tu_alloc(&m->be, 2 * AMAXB * sizeof(float));
    tu_fill_unif(m->W, AD, 3, -0.5, 0.5);
    m->bias[0] = 0.25f;
    m->w = tu_block(m->ctx, GRZO_BLOCK_MATRIX, 1, AD, m->W, "w", 0);
    m->b = tu_block(m->ctx, GRZO_BLOCK_VECTOR, 1, 1, m->bias, "b", 0);
}

static void lin_free(lin *m)
{
    grzo_destroy(m->ctx);
    grzo_backend_free(&m->be, m->W);
    grzo_backend_free(&m->be, m->bias);
    grzo_backend_free(&m->be, m->X);
    grzo_backend_free(&m->be, m->Y);
    grzo_backend_free(&m->be, m->L);
    grzo_backend_destroy(&m->be);
}

/* x_i = mean + spread n_i, with the mean's sign alternating when `cancel` (opposite labels) */
static void lin_examples(lin *m, double spread, int cancel, uint32_t stream)
{
    int64_t i, d;
    for (i = 0; i < m->B; i++)
        for (d = 0; d < AD; d++) {
            double mean = tu_unif(stream, (uint64_t)d, -1.0, 1.0), sgn = cancel && (i & 1) ? -1.0 : 1.0;
            m->x[i][d] = sgn * mean + spread * tu_gauss(stream + 1, (uint64_t)(i * AD + d));
        }
}

static void lin_exact_gram(const lin *m, double *G)
{
    int64_t i, j, d;
    for (i = 0; i < m->B; i++)
        for (j = 0; j < m->B; j++) {
            double s = 1.0;
            for (d = 0; d < AD; d++) s += m->x[i][d] * m->x[j][d];
            G[i * m->B + j] = s;
        }
}

static double b_eff_of_gram(const double *G, int64_t B)
{
    double all = 0.0, tr = 0.0;
    int64_t i, j;
    for (i = 0; i < B; i++) {
        tr += G[i * B + i];
        for (j = 0; j < B; j++) all += G[i * B + j];
    }
    return all / tr;
}

/* the gradient of example i, coordinate d (d = AD: the bias) */
static double lin_grad(const lin *m, int64_t i, int64_t d) { return d < AD ? m->x[i][d] : 1.0; }

/* loss of segment c = <x_example, W> + b, through grzo's perturbed operations */
static grzo_status lin_forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *ud)
{
    lin *m = (lin *)ud;
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    int64_t c, d;
    grzo_status s;
    for (c = 0; c < pi->n_segments; c++)
        for (d = 0; d < AD; d++) m->X[c * AD + d] = (float)m->x[pi->example[c]][d];
    rows.n_rows = pi->n_segments;
    rows.offsets = NULL;
    s = grzo_linear(ctx, m->w, m->X, m->Y, &rows);
    if (s == GRZO_OK) s = grzo_vector(ctx, m->b, GRZO_VECTOR_ADD, m->Y, m->L, &rows);
    if (s != GRZO_OK) return s;
    for (c = 0; c < pi->n_segments; c++) losses[c] = c == m->nan_at ? NAN : m->L[c];
    return GRZO_OK;
}

/* Section 3b's first-order variance of B_eff_hat, Rademacher (mu4 - 3 = -2). */
static double predicted_b_eff_var(const lin *m, const double *G, double R, int32_t K)
{
    int64_t B = m->B, i, j, l, d;
    double tr = 0.0, t2 = 0.0, fourth = 0.0;
    static double A[AMAXB * AMAXB];   /* (J - R I) G */
    for (i = 0; i < B; i++) tr += G[i * B + i];
    for (i = 0; i < B; i++)
        for (j = 0; j < B; j++) {
            double s = 0.0;
            for (l = 0; l < B; l++) s += G[l * B + j];
            A[i * B + j] = s - R * G[i * B + j];
        }
    for (i = 0; i < B; i++)
        for (j = 0; j < B; j++) t2 += A[i * B + j] * A[j * B + i];
    for (d = 0; d <= AD; d++) {
        double sum = 0.0, sq = 0.0, mdd;
        for (i = 0; i < B; i++) { sum += lin_grad(m, i, d); sq += lin_grad(m, i, d) * lin_grad(m, i, d); }
        mdd = sum * sum - R * sq;
        fourth += mdd * mdd;
    }
    return (2.0 * t2 - 2.0 * fourth) / ((double)K * tr * tr);
}

static void check_gram(double spread, int cancel)
{
    const int64_t B = 6;
    const int32_t K = 4000;
    lin m;
    double G[AMAXB * AMAXB], Gh[AMAXB * AMAXB], R, se_pred;
    grzo_align_report rep;
    int64_t i, j, d, worst_i = 0, worst_j = 0;
    double worst = 0.0;
    lin_init(&m, GRZO_ESTIMATOR_GRZO, B, 1e-2f);
    lin_examples(&m, spread, cancel, 10 + 2 * (uint32_t)cancel);
    lin_exact_gram(&m, G);
    R = b_eff_of_gram(G, B);
    CHECK_OK(grzo_align(m.ctx, B, K, lin_forward, &m, Gh, &rep));
    for (i = 0; i < B; i++)
        for (j = 0; j < B; j++) {
            double v = G[i * B + i] * G[j * B + j] + G[i * B + j] * G[i * B + j], z;
            for (d = 0; d <= AD; d++) v -= 2.0 * lin_grad(&m, i, d) * lin_grad(&m, i, d) * lin_grad(&m, j, d) * lin_grad(&m, j, d);
            z = fabs(Gh[i * B + j] - G[i * B + j]) / (sqrt(v / K) + 1e-3 * fabs(G[i * B + j]));
            if (z > worst) { worst = z; worst_i = i; worst_j = j; }
        }
    CHECKF(worst < 5.0, "G_hat[%lld][%lld] = %g vs G = %g: %.1f standard errors", (long long)worst_i, (long long)worst_j,
           Gh[worst_i * B + worst_j], G[worst_i * B + worst_j], worst);
    se_pred = sqrt(predicted_b_eff_var(&m, G, R, K));
    printf("  %s: B_eff exact %.4f, estimate %.4f +- %.4f (predicted se %.4f), c_w %.3f, worst G entry %.2f se\n",
           cancel ? "cancelling" : "aligned", R, rep.b_eff, rep.b_eff_se, se_pred, rep.c_w, worst);
    CHECKF(fabs(rep.b_eff - R) < 5.0 * rep.b_eff_se, "B_eff %g vs exact %g (se %g)", rep.b_eff, R, rep.b_eff_se);
    CHECKF(fabs(rep.b_eff_se / se_pred - 1.0) < 0.25, "reported se %g vs section 3b's %g", rep.b_eff_se, se_pred);
    CHECK(rep.b_eff_lo <= rep.b_eff && rep.b_eff <= rep.b_eff_hi && rep.b_eff_lo >= 0.0 && rep.b_eff_hi <= (double)B);
    CHECK_NEAR(rep.c_w, (rep.b_eff - 1.0) / (B - 1.0), 1e-12);
    CHECK_NEAR(rep.var_ratio, rep.b_eff, 1e-12);
    CHECK_NEAR(rep.cos_ratio, grzo_align_cos_ratio(rep.b_eff, B), 1e-12);
    CHECK(rep.n_examples == B && rep.n_probes == K && rep.step == 0);
    lin_free(&m);
}

static void test_gram(void)
{
    check_gram(0.4, 0);   /* mostly aligned: B_eff near B */
    check_gram(1.0, 1);   /* opposite means: gradients cancel, B_eff < 1 */
}

/* the cosine formula's values quoted in SPEC (c = 0.83: 2.20, 3.17, 4.53, 6.43 at B = 4..32) */
static void test_cos_ratio(void)
{
    static const int B[4] = {4, 8, 16, 32};
    static const double want[4] = {2.20, 3.17, 4.53, 6.43};
    int k;
    for (k = 0; k < 4; k++) CHECK_NEAR(grzo_align_cos_ratio(0.83 * B[k] + 0.17, B[k]), want[k], 0.006);
    CHECK_NEAR(grzo_align_cos_ratio(1.0, 1), 1.0, 1e-12);
}

static void snapshot(const lin *m, float *w, float *b)
{
    memcpy(w, m->W, AD * sizeof(float));
    b[0] = m->bias[0];
}

static void check_bitwise(grzo_estimator est)
{
    const int64_t B = 4;
    lin m, ref;
    float w0[AD], b0[1], w1[AD], b1[1];
    grzo_align_report rep;
    grzo_step_report sr;
    lin_init(&m, est, B, 1e-3f);
    lin_init(&ref, est, B, 1e-3f);
    lin_examples(&m, 0.5, 0, 20);
    lin_examples(&ref, 0.5, 0, 20);
    snapshot(&m, w0, b0);
    CHECK_OK(grzo_align(m.ctx, B, 16, lin_forward, &m, NULL, &rep));
    snapshot(&m, w1, b1);
    CHECK(memcmp(w0, w1, sizeof w0) == 0 && memcmp(b0, b1, sizeof b0) == 0);
    CHECK(grzo_get_step(m.ctx) == 0);
    /* the next step is the step a run without the diagnostic takes */
    CHECK_OK(grzo_step(m.ctx, B, lin_forward, &m, &sr));
    CHECK_OK(grzo_step(ref.ctx, B, lin_forward, &ref, &sr));
    CHECK(memcmp(m.W, ref.W, AD * sizeof(float)) == 0 && memcmp(m.bias, ref.bias, sizeof(float)) == 0);
    CHECK(memcmp(m.W, w0, AD * sizeof(float)) != 0);   /* the step did move them */
    lin_free(&m);
    lin_free(&ref);
}

static void test_bitwise(void)
{
    check_bitwise(GRZO_ESTIMATOR_GRZO);
    check_bitwise(GRZO_ESTIMATOR_MEZO_INPLACE);
}

static void test_misuse(void)
{
    const int64_t B = 4;
    lin m;
    float w0[AD], b0[1], w1[AD], b1[1];
    grzo_align_report rep;
    grzo_pass_info pi;
    grzo_step_info si;
    char path[64];
    int k;
    lin_init(&m, GRZO_ESTIMATOR_GRZO, B, 1e-3f);
    lin_examples(&m, 0.5, 0, 30);
    snapshot(&m, w0, b0);
    CHECK_ST(grzo_align_begin(m.ctx, B, 1, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_align_begin(m.ctx, 1, 8, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_align_begin(m.ctx, GRZO_ALIGN_MAX_EXAMPLES + 1, 8, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_align_begin(m.ctx, B, GRZO_ALIGN_MAX_PROBES + 1, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_align_begin(NULL, B, 8, NULL), GRZO_ERR_INVALID_ARG);
    /* the largest B and K are taken (then abandoned: nothing ran) */
    CHECK_OK(grzo_align_begin(m.ctx, GRZO_ALIGN_MAX_EXAMPLES, 2, NULL));
    CHECK_OK(grzo_step_abort(m.ctx));
    CHECK_OK(grzo_align_begin(m.ctx, B, GRZO_ALIGN_MAX_PROBES, NULL));
    CHECK_OK(grzo_step_abort(m.ctx));
    CHECK_ST(grzo_align_end(m.ctx, NULL, &rep), GRZO_ERR_STATE);
    CHECK_ST(grzo_align(m.ctx, B, 8, NULL, NULL, NULL, &rep), GRZO_ERR_INVALID_ARG);
    /* during a step: no diagnostic; during a diagnostic: no step, no step_end, no checkpoint */
    CHECK_OK(grzo_step_begin(m.ctx, B, NULL));
    CHECK_ST(grzo_align_begin(m.ctx, B, 8, NULL), GRZO_ERR_STATE);
    CHECK_OK(grzo_step_abort(m.ctx));
    CHECK_OK(grzo_align_begin(m.ctx, B, 3, &si));
    CHECK(si.n_passes == 3 && si.copies_per_pass == 2 && si.lr == 0.0f && si.step == 0);
    CHECK_ST(grzo_step_begin(m.ctx, B, NULL), GRZO_ERR_STATE);
    CHECK_ST(grzo_align_begin(m.ctx, B, 3, NULL), GRZO_ERR_STATE);
    snprintf(path, sizeof path, "test_align_%ld.ckpt", (long)time(NULL));
    CHECK_ST(grzo_checkpoint_save(m.ctx, path), GRZO_ERR_STATE);
    CHECK_ST(grzo_align_end(m.ctx, NULL, &rep), GRZO_ERR_STATE);    /* probes remain */
    for (k = 0; k < 3; k++) {
        float losses[2 * AMAXB], wk[AD];
        grzo_noise u;
        int i, wrong = 0;
        CHECK_OK(grzo_pass_begin(m.ctx, &pi));
        CHECK(pi.n_segments == 2 * B && pi.sign[0] == 1 && pi.sign[B] == -1 && pi.example[B] == 0);
        /* probe k's U is the documented stream's (section 3b: GRZO_STREAM_ALIGN0 + k), not
           another probe's or a training stream's: the "+" copy moved along its signs */
        u.seed = 77; u.step = 0; u.block = 0; u.stream = GRZO_STREAM_ALIGN0 + (uint32_t)k; u.dist = GRZO_NOISE_DEFAULT;
        CHECK_OK(grzo_perturbed_params(m.ctx, m.w, 0, wk));
        for (i = 0; i < AD; i++) wrong += (wk[i] > m.W[i]) != (grzo_noise_at(&u, (uint64_t)i) > 0.0f);
        CHECKF(wrong == 0, "probe %d: %d of %d weights moved against stream 0x%x's signs", k, wrong, AD, u.stream);
        CHECK_ST(grzo_align_end(m.ctx, NULL, &rep), GRZO_ERR_STATE); /* a pass in flight */
        CHECK_OK(lin_forward(m.ctx, &pi, losses, &m));
        CHECK_OK(grzo_pass_end(m.ctx, losses));
    }
    CHECK_ST(grzo_pass_begin(m.ctx, &pi), GRZO_ERR_STATE);          /* all K probes ran */
    CHECK_ST(grzo_step_end(m.ctx, NULL), GRZO_ERR_STATE);
    CHECK_OK(grzo_align_end(m.ctx, NULL, &rep));
    CHECK(rep.n_probes == 3);
    /* a NaN loss ends the diagnostic; the context then trains normally */
    m.nan_at = 2;
    CHECK_ST(grzo_align(m.ctx, B, 8, lin_forward, &m, NULL, &rep), GRZO_ERR_NONFINITE);
    m.nan_at = -1;
    CHECK_ST(grzo_align_end(m.ctx, NULL, &rep), GRZO_ERR_STATE);
    snapshot(&m, w1, b1);
    CHECK(memcmp(w0, w1, sizeof w0) == 0 && memcmp(b0, b1, sizeof b0) == 0);
    CHECK(grzo_get_step(m.ctx) == 0);
    /* and the step that follows is an ordinary one */
    CHECK_OK(grzo_step(m.ctx, B, lin_forward, &m, NULL));
    CHECK(grzo_get_step(m.ctx) == 1);
    lin_free(&m);
}

static grzo_status zero_forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *ud)
{
    int64_t c;
    (void)ctx; (void)ud;
    for (c = 0; c < pi->n_segments; c++) losses[c] = 1.5f;   /* ignores the parameters */
    return GRZO_OK;
}

static void test_zero_differences(void)
{
    lin m;
    grzo_align_report rep;
    lin_init(&m, GRZO_ESTIMATOR_GRZO, 4, 1e-3f);
    CHECK_ST(grzo_align(m.ctx, 4, 4, zero_forward, NULL, NULL, &rep), GRZO_ERR_NONFINITE);
    CHECK(strstr(grzo_last_error(m.ctx), "every loss difference was 0") != NULL);
    CHECK_OK(grzo_align_begin(m.ctx, 4, 4, NULL));   /* the context is free again */
    CHECK_OK(grzo_step_abort(m.ctx));
    lin_free(&m);
}

int main(int argc, char **argv)
{
    tu_args(argc, argv);
    if (tu_case("gram")) test_gram();
    if (tu_case("gram")) test_cos_ratio();
    if (tu_case("bitwise")) test_bitwise();
    if (tu_case("misuse")) test_misuse();
    if (tu_case("misuse")) test_zero_differences();
    return tu_finish("test_align");
}
