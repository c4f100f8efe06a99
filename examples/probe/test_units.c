/* test_units.c - grzo-probe's own pieces checked against values computed here, not against
   the probe's output: the subcommands' --check runs assert the paper's claims, which hold
   with a wide margin and so let a wrong gradient, geometry, draw or statistic pass unseen.
     layout, loss, grad  the MLP's offsets; its loss against a forward written out here (also
                         with a logit of 2000); its backprop gradient against central
                         differences of that loss; mlp_init's scale and zero biases
     geometry            batch_gradients' mean gradient, cosines and norms against sums
                         taken here, also past the kept norms (B > 256) and at B = 1
     stats               running_stat, dot, cosine, b_eff_of on small exact cases
     seeds, batches      seed_mix gives every (seed, tag) its own seed; draw_batch gives
                         distinct in-range indices that reach the whole pool
     data                unit-radius inputs, the label rules, teacher labels that read the
                         per-example part only, the shared part's cosine
     quantize            quantize_w4_rows against round-half-away-from-zero
     table, units        md_print's exact text; run_units' order and first failure
     draw                one MeZO step read back: the parameters restored, g_hat = g z,
                         each l_i^+ - l_i^- = 2 sigma g_i.z (backprop g_i); the black-box
                         path gives the same estimate as grzo's operations; a training step
                         applies -lr g_hat; the plain mean loss over chunks of 256
     align               model_align's B_eff against the exact one, and far off sabotaged
     model_limits        the shapes the host reference's stack arrays allow
   Linked with the probe's model.c and util.c (examples/meson.build). */
#define _POSIX_C_SOURCE 200809L
#define GRZO_IMPLEMENTATION
#include "probe.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mlp_shape SMALL = {5, 7, 3};   /* D = 5*7 + 7 + 3*7 + 3 = 66 */

/* theta with nonzero biases (mlp_init leaves them 0, which would hide a bias mix-up) */
static void small_theta(mlp_shape s, float gain, float *theta) {
    mlp_layout L = mlp_layout_of(s);
    int64_t k;
    mlp_init(s, 7, gain, theta);
    for (k = L.b1; k < L.w2; k++) theta[k] = (float)tu_unif(1, (uint64_t)k, -0.5, 0.5);
    for (k = L.b2; k < L.n; k++) theta[k] = (float)tu_unif(2, (uint64_t)k, -0.5, 0.5);
}

/* the forward written out: -log softmax(W2 tanh(W1 x + b1) + b2)[y], the max subtracted */
static double ref_loss(mlp_shape s, const float *theta, const float *x, int y) {
    mlp_layout L = mlp_layout_of(s);
    double h[64], o[16], mx = -INFINITY, sum = 0.0;
    int j, k, c;
    for (j = 0; j < s.d_hid; j++) {
        double a = theta[L.b1 + j];
        for (k = 0; k < s.d_in; k++) a += (double)theta[L.w1 + j * s.d_in + k] * x[k];
        h[j] = tanh(a);
    }
    for (c = 0; c < s.d_out; c++) {
        o[c] = theta[L.b2 + c];
        for (j = 0; j < s.d_hid; j++) o[c] += (double)theta[L.w2 + c * s.d_hid + j] * h[j];
        if (o[c] > mx) mx = o[c];
    }
    for (c = 0; c < s.d_out; c++) sum += exp(o[c] - mx);
    return mx + log(sum) - o[y];
}

static double probe_loss(mlp_shape s, const float *theta, const float *x, int y) {
    mlp_layout L = mlp_layout_of(s);
    return mlp_example_loss(s, theta + L.w1, theta + L.b1, theta + L.w2, theta + L.b2, x, y);
}

/* W ~ N(0, gain^2 / fan_in): linear in the gain, nothing left at gain 0; biases exactly 0 */
static void test_init(void) {
    float a[66], b[66], z[66];
    double sq1 = 0.0, sq2 = 0.0;
    int k;
    mlp_init(SMALL, 3, 1.0f, a);
    mlp_init(SMALL, 3, 2.0f, b);
    mlp_init(SMALL, 3, 0.0f, z);
    for (k = 0; k < 66; k++) {
        CHECKF(b[k] == 2.0f * a[k] && z[k] == 0.0f, "entry %d: %g at gain 1, %g at gain 2, %g at gain 0", k, a[k], b[k], z[k]);
        if (k >= 35 && k < 42) CHECK(a[k] == 0.0f);
        if (k >= 63) CHECK(a[k] == 0.0f);
        if (k < 35) sq1 += (double)a[k] * a[k];
        if (k >= 42 && k < 63) sq2 += (double)a[k] * a[k];
    }
    /* mean square 1 / fan_in: 1/5 over W1's 35, 1/7 over W2's 21 (chi-square, loose bounds) */
    CHECKF(sq1 / 35 > 0.2 * 0.4 && sq1 / 35 < 0.2 * 2.0, "W1 mean square %.4f", sq1 / 35);
    CHECKF(sq2 / 21 > 0.143 * 0.3 && sq2 / 21 < 0.143 * 2.2, "W2 mean square %.4f", sq2 / 21);
}

static void test_layout(void) {
    mlp_layout L = mlp_layout_of(SMALL);
    CHECK(L.w1 == 0 && L.b1 == 35 && L.w2 == 42 && L.b2 == 63 && L.n == 66);
    CHECK_NEAR(b_eff_of(0.5, 4), 2.5, 1e-15);
    CHECK_NEAR(b_eff_of(1.0, 32), 32.0, 1e-15);
}

/* the loss against ref_loss, also with logits of several hundred (exp of an unshifted
   logit overflows) and for every class */
static void test_loss(void) {
    float theta[66], x[5];
    int y, k, big;
    for (k = 0; k < 5; k++) x[k] = (float)tu_unif(3, (uint64_t)k, -1.0, 1.0);
    /* big 1..3: class big - 1's bias 2000, far above the other logits (exp(2000) overflows) */
    for (big = 0; big < 4; big++) {
        small_theta(SMALL, 1.0f, theta);
        if (big) theta[63 + big - 1] = 2000.0f;
        for (y = 0; y < 3; y++) {
            double want = ref_loss(SMALL, theta, x, y), got = probe_loss(SMALL, theta, x, y);
            CHECKF(isfinite(got) && fabs(got - want) <= 1e-9 * (1.0 + fabs(want)), "big %d y %d: %.12g vs %.12g", big, y, got, want);
        }
    }
}

/* each gradient entry against a central difference of ref_loss (the step read back from
   the float parameters, so that its rounding does not count) */
static void test_grad(void) {
    float theta[66], x[5];
    double g[66], gmax = 0.0;
    int y, k;
    small_theta(SMALL, 1.0f, theta);
    for (k = 0; k < 5; k++) x[k] = (float)tu_unif(4, (uint64_t)k, -1.5, 1.5);
    for (y = 0; y < 3; y++) {
        double loss = mlp_example_grad(SMALL, theta, x, y, g);
        CHECK_NEAR(loss, ref_loss(SMALL, theta, x, y), 1e-9);
        for (k = 0; k < 66; k++) gmax = fmax(gmax, fabs(g[k]));
        for (k = 0; k < 66; k++) {
            float keep = theta[k], up, down;
            double lu, ld, fd;
            theta[k] = keep + 1e-2f;
            up = theta[k];
            lu = ref_loss(SMALL, theta, x, y);
            theta[k] = keep - 1e-2f;
            down = theta[k];
            ld = ref_loss(SMALL, theta, x, y);
            theta[k] = keep;
            fd = (lu - ld) / ((double)up - (double)down);
            CHECKF(fabs(g[k] - fd) <= 1e-3 * gmax, "y %d, entry %d: backprop %.8g, difference %.8g", y, k, g[k], fd);
        }
    }
    CHECK(gmax > 0.01);
}

/* a dataset from explicit values: n examples of SMALL's width, labels k mod d_out */
static void fill_data(dataset *d, mlp_shape s, int n, uint32_t stream) {
    int i;
    d->shape = s;
    d->n = n;
    d->x = (float *)malloc((size_t)n * (size_t)s.d_in * sizeof(float));
    d->y = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    REQUIRE(d->x && d->y);
    tu_fill_unif(d->x, (size_t)n * (size_t)s.d_in, stream, -1.0, 1.0);
    /* a shared offset: the gradients then point partly alike, so the cosines are not ~0 */
    for (i = 0; i < n * s.d_in; i++) d->x[i] += 0.8f;
    for (i = 0; i < n; i++) d->y[i] = i % s.d_out;
}

/* batch_gradients on examples idx[0..B-1] against sums taken here */
static void check_geometry(const dataset *d, mlp_shape s, const float *theta, const int *idx, int B) {
    int64_t n = mlp_layout_of(s).n, k;
    double *G = (double *)malloc((size_t)B * (size_t)n * sizeof(double)), *g_bar = (double *)malloc((size_t)n * sizeof(double));
    double *gi = (double *)malloc((size_t)n * sizeof(double)), *gj = (double *)malloc((size_t)n * sizeof(double));
    double *sum = (double *)calloc((size_t)n, sizeof(double)), cos_sum = 0.0, sq = 0.0, sum_sq;
    grad_geometry geo;
    int i, j;
    REQUIRE(G && g_bar && gi && gj && sum);
    batch_gradients(d, theta, idx, B, G, g_bar, &geo);
    for (i = 0; i < B; i++) {
        mlp_example_grad(s, theta, d->x + (int64_t)idx[i] * s.d_in, d->y[idx[i]], gi);
        for (k = 0; k < n; k++) {
            CHECKF(G[(int64_t)i * n + k] == gi[k], "row %d entry %lld", i, (long long)k);
            sum[k] += gi[k];
            sq += gi[k] * gi[k];
        }
        for (j = i + 1; j < B; j++) {
            double p = 0.0, ni = 0.0, nj = 0.0;
            mlp_example_grad(s, theta, d->x + (int64_t)idx[j] * s.d_in, d->y[idx[j]], gj);
            for (k = 0; k < n; k++) { p += gi[k] * gj[k]; ni += gi[k] * gi[k]; nj += gj[k] * gj[k]; }
            cos_sum += p / sqrt(ni * nj);
        }
    }
    sum_sq = 0.0;
    for (k = 0; k < n; k++) {
        CHECK_NEAR(g_bar[k], sum[k] / B, 1e-12);
        sum_sq += sum[k] * sum[k];
    }
    CHECK_NEAR(geo.mean_cos, B > 1 ? cos_sum / (0.5 * B * (B - 1)) : 1.0, 1e-9);
    /* |sum g_i|^2 = sum |g_i|^2 + sum_{i != j} g_i.g_j */
    CHECK_NEAR(geo.weighted_cos, B > 1 ? (sum_sq - sq) / ((B - 1) * sq) : 1.0, 1e-9);
    CHECK_NEAR(geo.mean_sq_norm, sq / B, 1e-9 * sq);
    CHECK_NEAR(geo.batch_sq_norm, sum_sq / ((double)B * B), 1e-9 * sq);
    free(G);
    free(g_bar);
    free(gi);
    free(gj);
    free(sum);
}

static void test_geometry(void) {
    static const mlp_shape TINY = {2, 2, 2};   /* D = 12: 300 gradients are cheap */
    float theta[66], tiny[12];
    int idx[300], i;
    dataset d, dt;
    fill_data(&d, SMALL, 40, 5);
    fill_data(&dt, TINY, 300, 6);
    small_theta(SMALL, 1.0f, theta);
    small_theta(TINY, 1.0f, tiny);
    for (i = 0; i < 300; i++) idx[i] = (i * 7 + 3) % 300;   /* not in order: idx is read */
    check_geometry(&d, SMALL, theta, idx, 1);
    check_geometry(&d, SMALL, theta, (const int[]){3, 17, 8, 30, 21}, 5);
    check_geometry(&dt, TINY, tiny, idx, 300);   /* past the 256 norms batch_gradients keeps */
    {   /* without geometry: the same gradients and mean */
        double G1[2 * 66], G2[2 * 66], m1[66], m2[66];
        grad_geometry geo;
        batch_gradients(&d, theta, idx, 2, G1, m1, &geo);
        batch_gradients(&d, theta, idx, 2, G2, m2, NULL);
        CHECK(memcmp(G1, G2, sizeof G1) == 0 && memcmp(m1, m2, sizeof m1) == 0);
    }
    dataset_free(&d);
    dataset_free(&dt);
}

static void test_stats(void) {
    running_stat a = {0, 0, 0}, b = {0, 0, 0}, all = {0, 0, 0}, one = {0, 0, 0}, same = {0, 0, 0};
    static const double v[] = {1.0, 2.0, 4.0, 7.0};
    double m = 3.5, sd = sqrt(((2.5 * 2.5) + (1.5 * 1.5) + (0.5 * 0.5) + (3.5 * 3.5)) / 3.0);
    double x[3] = {1.0, 2.0, 2.0}, y[3] = {2.0, 0.0, 1.0}, z[3] = {0.0, 0.0, 0.0};
    int i;
    for (i = 0; i < 4; i++) {
        stat_add(&all, v[i]);
        stat_add(i < 1 ? &a : &b, v[i]);
        stat_add(&same, 0.1);
    }
    stat_merge(&a, &b);
    CHECK_NEAR(stat_mean(&all), m, 1e-15);
    CHECK_NEAR(stat_sd(&all), sd, 1e-12);
    CHECK_NEAR(stat_se(&all), sd / 2.0, 1e-12);
    CHECK(a.n == 4.0 && a.sum == all.sum && a.sum_sq == all.sum_sq);
    CHECK(stat_sd(&same) >= 0.0 && stat_sd(&same) < 1e-7);   /* rounding may make the sum of squares short */
    CHECK(isnan(stat_mean(&one)) && isnan(stat_sd(&one)) && isnan(stat_se(&one)));
    stat_add(&one, 5.0);
    CHECK(stat_mean(&one) == 5.0 && isnan(stat_sd(&one)) && isnan(stat_se(&one)));
    stat_add(&one, 7.0);   /* two values: the smallest sample with a standard deviation */
    CHECK_NEAR(stat_sd(&one), sqrt(2.0), 1e-15);
    CHECK_NEAR(stat_se(&one), 1.0, 1e-15);
    CHECK(dot(x, y, 3) == 4.0);
    CHECK_NEAR(cosine(x, y, 3), 4.0 / (3.0 * sqrt(5.0)), 1e-15);
    CHECK(cosine(x, z, 3) == 0.0 && cosine(z, x, 3) == 0.0);
}

/* seed_mix: distinct over a grid of seeds and tags (the probe derives every purpose's seed
   from one run seed), and one tag bit flips about half the output bits */
static void test_seeds(void) {
    enum { NS = 20, NT = 50 };
    uint64_t out[NS * NT];
    int s, t, i, j, bits = 0;
    for (s = 0; s < NS; s++)
        for (t = 0; t < NT; t++) out[s * NT + t] = seed_mix((uint64_t)s, (uint64_t)t);
    for (i = 0; i < NS * NT; i++)
        for (j = i + 1; j < NS * NT; j++) CHECKF(out[i] != out[j], "seed_mix collides: %d and %d", i, j);
    for (t = 0; t < 64; t++) {
        uint64_t d = seed_mix(1, (uint64_t)t * 977) ^ seed_mix(1, ((uint64_t)t * 977) ^ 1);
        for (; d; d &= d - 1) bits++;
    }
    CHECKF(bits > 24 * 64 && bits < 40 * 64, "mean flipped bits %.1f", bits / 64.0);
}

/* distinct in-range indices; B = n is a permutation; every index drawn over many draws */
static void test_draw_batch(void) {
    int idx[64], scratch[64], seen[64] = {0}, draw, i, j;
    for (draw = 0; draw < 400; draw++) {
        int B = draw % 2 ? 64 : 5, ok = 1;
        draw_batch(11, (uint32_t)draw, 64, B, idx, scratch);
        for (i = 0; i < B; i++) {
            ok &= idx[i] >= 0 && idx[i] < 64;
            for (j = 0; j < i; j++) ok &= idx[i] != idx[j];
            if (idx[i] >= 0 && idx[i] < 64 && B == 5) seen[idx[i]]++;
        }
        CHECKF(ok, "draw %d: indices out of range or repeated", draw);
    }
    for (i = 0; i < 64; i++) CHECKF(seen[i] > 0, "index %d never drawn in 200 batches of 5", i);
    draw_batch(11, 0, 64, 5, idx, scratch);
    draw_batch(11, 2, 64, 5, seen, scratch);
    CHECK(memcmp(idx, seen, 5 * sizeof(int)) != 0);   /* another draw, another batch */
}

static double input_norm(const dataset *d, int i) {
    double sq = 0.0;
    int k;
    for (k = 0; k < d->shape.d_in; k++) sq += (double)d->x[i * d->shape.d_in + k] * d->x[i * d->shape.d_in + k];
    return sqrt(sq);
}

/* inputs on the sphere of radius sqrt(d_in); labels by rule; the teacher reads xi only */
static void test_dataset(void) {
    static const mlp_shape S = {16, 8, 4};
    data_spec maj = {400, 1.0f, 0.3f, LABEL_MAJORITY, 0.7f}, one = maj, none = maj, teach = {400, 0.0f, 1.0f, LABEL_TEACHER, 0.0f};
    data_spec teach_shared = teach, flat = maj;
    dataset d[6];
    int i, k, count[4] = {0}, tcount[4] = {0}, same = 1;
    double min_cos = 1.0;
    one.majority = 1.0f;
    none.majority = 0.0f;
    teach_shared.shared = 3.0f;
    flat.spread = 0.0f;
    REQUIRE(dataset_make(S, &maj, 5, &d[0]) == 0 && dataset_make(S, &one, 5, &d[1]) == 0 &&
            dataset_make(S, &none, 5, &d[2]) == 0 && dataset_make(S, &teach, 5, &d[3]) == 0 &&
            dataset_make(S, &teach_shared, 5, &d[4]) == 0 && dataset_make(S, &flat, 5, &d[5]) == 0);
    for (i = 0; i < 400; i++) {
        for (k = 0; k < 6; k++) CHECKF(fabs(input_norm(&d[k], i) - 4.0) < 1e-5, "set %d example %d: |x| = %.7g", k, i, input_norm(&d[k], i));
        for (k = 0; k < 5; k++) CHECK(d[k].y[i] >= 0 && d[k].y[i] < 4);
        if (d[0].y[i] >= 0 && d[0].y[i] < 4) count[d[0].y[i]]++;
        if (d[3].y[i] >= 0 && d[3].y[i] < 4) tcount[d[3].y[i]]++;
        CHECK(d[1].y[i] == 0);
        same &= d[2].y[i] == d[0].y[i] || d[0].y[i] == 0;   /* the uniform draw is shared */
        CHECK(d[3].y[i] == d[4].y[i]);
        /* spread 0: every x is the shared direction; spread 0.3: close to it */
        {
            double c = 0.0;
            for (k = 0; k < 16; k++) c += (double)d[0].x[i * 16 + k] * d[5].x[i * 16 + k] / 16.0;
            if (c < min_cos) min_cos = c;
            for (k = 0; k < 16; k++) CHECK(d[5].x[i * 16 + k] == d[5].x[k]);
        }
    }
    /* majority 0.7 of 4 classes: class 0 has 0.7 + 0.3 / 4 = 0.775, each other 0.075 */
    CHECKF(count[0] > 280 && count[0] < 340, "class 0: %d of 400", count[0]);
    for (k = 1; k < 4; k++) CHECKF(count[k] > 10 && count[k] < 55, "class %d: %d of 400", k, count[k]);
    for (k = 0; k < 4; k++) CHECKF(tcount[k] > 0 && tcount[k] < 400, "teacher class %d: %d of 400", k, tcount[k]);
    CHECK(same);
    CHECKF(min_cos > 0.7, "an input with spread 0.3 is at cosine %.3f from the shared direction", min_cos);
    for (k = 0; k < 6; k++) dataset_free(&d[k]);
}

static double mean_input_cos(const dataset *d, int n) {
    double sum = 0.0;
    int i, j, k, w = d->shape.d_in;
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++) {
            double p = 0.0;
            for (k = 0; k < w; k++) p += (double)d->x[i * w + k] * d->x[j * w + k];
            sum += p / w;   /* both norms sqrt(w) */
        }
    return sum / (0.5 * n * (n - 1));
}

/* x = shared mu + spread xi: with shared = spread two inputs meet at cosine |mu|^2 / (|mu|^2 +
   |xi|^2) ~ 1/2, without the shared part at ~0; teacher labels of independent examples are
   independent (not runs of one label) */
static void test_dataset_geometry(void) {
    static const mlp_shape S = {64, 8, 4};
    data_spec half = {60, 1.0f, 1.0f, LABEL_TEACHER, 0.0f}, apart = half;
    dataset a, b;
    int i, same = 0;
    apart.shared = 0.0f;
    REQUIRE(dataset_make(S, &half, 9, &a) == 0 && dataset_make(S, &apart, 9, &b) == 0);
    CHECKF(mean_input_cos(&a, 60) > 0.3 && mean_input_cos(&a, 60) < 0.7, "shared = spread: mean cosine %.3f", mean_input_cos(&a, 60));
    CHECKF(fabs(mean_input_cos(&b, 60)) < 0.05, "no shared part: mean cosine %.3f", mean_input_cos(&b, 60));
    for (i = 0; i + 1 < 60; i++) same += a.y[i] == a.y[i + 1];
    CHECKF(same < 45, "%d of 59 neighbours share their teacher label", same);
    dataset_free(&a);
    dataset_free(&b);
}

/* per row: scale max|w| / 7, each value the nearest level, halves away from zero */
static void test_quantize(void) {
    float w[3][6] = {{0.05f, -0.35f, 0.7f, -0.7f, 0.25f, 0.15f},
                     {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
                     {0.3f, -1.4f, 1.0f, -0.1f, 0.5f, -0.5f}},
          in[3][6];
    int r, k;
    memcpy(in, w, sizeof w);
    quantize_w4_rows(&w[0][0], 3, 6);
    for (r = 0; r < 3; r++) {
        float mx = 0.0f, scale;
        for (k = 0; k < 6; k++) mx = fmaxf(mx, fabsf(in[r][k]));
        scale = mx / 7.0f;
        for (k = 0; k < 6; k++) {
            float want = scale > 0.0f ? (float)lroundf(in[r][k] / scale) * scale : 0.0f;
            CHECKF(w[r][k] == want, "row %d col %d: %.9g -> %.9g, want %.9g", r, k, in[r][k], w[r][k], want);
        }
    }
    CHECK(w[0][2] == 0.7f && w[0][3] == -0.7f && w[2][1] == -1.4f);   /* the row's largest is level 7 */
}

/* md_print's text: columns padded to the widest cell in characters ("±" is one) */
static void test_table(void) {
    static const char *const head[] = {"a", "bb"};
    static const char *const want = "| a      | bb |\n|--------|----|\n| 1 ± 2  | x  |\n| 10 ± 2 | yz |\n";
    md_table t;
    char got[256];
    FILE *f = tmpfile();
    size_t n;
    REQUIRE(f);
    REQUIRE(md_begin(&t, 2, head) == 0);
    CHECK(md_row(&t, "1 ± 2", "x") == 0 && md_row(&t, "10 ± 2", "yz") == 0);
    CHECK(t.rows == 3);
    md_print(&t, f);
    md_free(&t);
    rewind(f);
    n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    CHECKF(strcmp(got, want) == 0, "md_print wrote:\n%s", got);
}

/* run_units: every unit once when all pass; the first failure in unit order is returned */
typedef struct units_rec { int ran[40]; int fail_a, fail_b; } units_rec;
static grzo_status record_unit(int i, void *user) {
    units_rec *r = (units_rec *)user;
#ifdef _OPENMP
#pragma omp atomic
#endif
    r->ran[i]++;
    if (i == r->fail_a) return GRZO_ERR_INVALID_ARG;
    if (i == r->fail_b) return GRZO_ERR_OUT_OF_MEMORY;
    return GRZO_OK;
}

static void test_units(void) {
    units_rec r;
    int i, threads;
    for (threads = 1; threads <= 3; threads += 2) {
        memset(&r, 0, sizeof r);
        r.fail_a = r.fail_b = -1;
        CHECK(run_units(40, threads, record_unit, &r) == GRZO_OK);
        for (i = 0; i < 40; i++) CHECKF(r.ran[i] == 1, "%d threads: unit %d ran %d times", threads, i, r.ran[i]);
        memset(&r, 0, sizeof r);
        r.fail_a = 9;
        r.fail_b = 25;
        CHECK(run_units(40, threads, record_unit, &r) == GRZO_ERR_INVALID_ARG);
        for (i = 0; i <= 9; i++) CHECKF(r.ran[i] == 1, "%d threads: unit %d before the failure ran %d times", threads, i, r.ran[i]);
    }
    memset(&r, 0, sizeof r);
    r.fail_a = 30;
    r.fail_b = 12;
    CHECK(run_units(40, 1, record_unit, &r) == GRZO_ERR_OUT_OF_MEMORY);
    for (i = 13; i < 40; i++) CHECKF(r.ran[i] == 0, "one thread: unit %d ran after unit 12 failed", i);
    CHECK(run_units(0, 2, record_unit, &r) == GRZO_OK);
}

static grzo_desc draw_desc(grzo_estimator e, float lr) {
    grzo_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.estimator = e;
    desc.noise = GRZO_NOISE_RADEMACHER;
    desc.seed = 99;
    desc.lr = lr;
    desc.sigma = 1e-3f;
    return desc;
}

static const int DRAW_IDX[6] = {3, 11, 20, 27, 5, 38};

/* MeZO's estimate is g z with g = (mean l^+ - mean l^-) / (2 sigma) and z in {-1, 1}^D: so
   every |g_hat_k| is |g| and z = sign(g_hat) sign(g); then l_i^+ - l_i^- = 2 sigma g_i.z to
   first order, with g_i example idx[i]'s backprop gradient */
static void test_draw_mezo(void) {
    enum { B = 6, D = 66 };
    grzo_desc desc = draw_desc(GRZO_ESTIMATOR_MEZO, 1.0f);
    float theta[D];
    double g_hat[D], delta[B], gi[D], mean = 0.0, g;
    grzo_step_report rep;
    probe_model m;
    dataset d;
    int i, k;
    fill_data(&d, SMALL, 40, 7);
    small_theta(SMALL, 1.0f, theta);
    REQUIRE_OK(model_create(&m, SMALL, &desc, theta));
    REQUIRE_OK(model_draw(&m, &d, DRAW_IDX, B, NULL, g_hat, &rep, delta));
    CHECK(memcmp(m.theta, theta, sizeof theta) == 0);
    for (i = 0; i < B; i++) mean += delta[i] / B;
    g = mean / 2e-3;
    CHECK(fabs(g) > 1e-3);
    for (k = 0; k < D; k++) CHECKF(fabs(fabs(g_hat[k]) - fabs(g)) <= 1e-4 * fabs(g), "entry %d: %.8g, want +-%.8g", k, g_hat[k], g);
    for (i = 0; i < B; i++) {
        double want = 0.0, norm = 0.0;
        mlp_example_grad(SMALL, theta, d.x + DRAW_IDX[i] * 5, d.y[DRAW_IDX[i]], gi);
        for (k = 0; k < D; k++) {
            want += 2e-3 * gi[k] * (g_hat[k] * g > 0.0 ? 1.0 : -1.0);
            norm += gi[k] * gi[k];
        }
        CHECKF(fabs(delta[i] - want) <= 0.02 * 2e-3 * sqrt(norm), "example %d: l+ - l- = %.8g, 2 sigma g_i.z = %.8g", i, delta[i], want);
    }
    CHECK(rep.lr == 1.0f);
    model_destroy(&m);
    dataset_free(&d);
}

/* the black-box path (grzo_perturbed_params, the forward on the host) against grzo's
   operations, for a shared-Z and a per-example estimator; W4 quantization changes it */
static void test_draw_blackbox(void) {
    static const grzo_estimator EST[] = {GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_CANONICAL};
    enum { B = 6, D = 66 };
    float theta[D];
    double g_ops[D], g_box[D], g_q[D], d_ops[B], d_box[B], d_q[B], gmax = 0.0, dmax = 0.0;
    dataset d;
    int e, k, differs = 0;
    fill_data(&d, SMALL, 40, 7);
    small_theta(SMALL, 1.0f, theta);
    for (e = 0; e < 3; e++) {
        grzo_desc desc = draw_desc(EST[e], 1.0f);
        probe_model a, b, q;
        REQUIRE_OK(model_create(&a, SMALL, &desc, theta));
        REQUIRE_OK(model_create(&b, SMALL, &desc, theta));
        REQUIRE_OK(model_create(&q, SMALL, &desc, theta));
        REQUIRE_OK(model_draw(&a, &d, DRAW_IDX, B, NULL, g_ops, NULL, d_ops));
        REQUIRE_OK(model_draw(&b, &d, DRAW_IDX, B, identity_transform, g_box, NULL, d_box));
        REQUIRE_OK(model_draw(&q, &d, DRAW_IDX, B, quantize_w4_rows, g_q, NULL, d_q));
        CHECK(memcmp(b.theta, theta, sizeof theta) == 0);
        for (k = 0; k < D; k++) gmax = fmax(gmax, fabs(g_ops[k]));
        for (k = 0; k < B; k++) dmax = fmax(dmax, fabs(d_ops[k]));
        for (k = 0; k < D; k++) CHECKF(fabs(g_ops[k] - g_box[k]) <= 1e-3 * gmax, "estimator %d entry %d: %.8g vs %.8g", e, k, g_ops[k], g_box[k]);
        for (k = 0; k < B; k++) CHECKF(fabs(d_ops[k] - d_box[k]) <= 1e-3 * dmax, "estimator %d delta %d: %.8g vs %.8g", e, k, d_ops[k], d_box[k]);
        for (k = 0; k < B; k++) differs += fabs(d_q[k] - d_box[k]) > 0.1 * dmax;
        model_destroy(&a);
        model_destroy(&b);
        model_destroy(&q);
    }
    CHECK(differs > 0);
    dataset_free(&d);
}

/* a training step keeps theta - lr g_hat, g_hat as a draw from the same state reads it */
static void test_train_step(void) {
    enum { B = 6, D = 66 };
    grzo_desc desc = draw_desc(GRZO_ESTIMATOR_GRZO, 1e-3f);
    float theta[D];
    double g_hat[D];
    grzo_step_report rep;
    probe_model a, b;
    dataset d;
    int k;
    fill_data(&d, SMALL, 40, 7);
    small_theta(SMALL, 1.0f, theta);
    REQUIRE_OK(model_create(&a, SMALL, &desc, theta));
    REQUIRE_OK(model_create(&b, SMALL, &desc, theta));
    REQUIRE_OK(model_draw(&a, &d, DRAW_IDX, B, NULL, g_hat, NULL, NULL));
    REQUIRE_OK(model_train_step(&b, &d, DRAW_IDX, B, &rep));
    for (k = 0; k < D; k++) CHECKF(fabs((double)b.theta[k] - (theta[k] - 1e-3 * g_hat[k])) <= 1e-6, "entry %d", k);
    CHECK(memcmp(b.theta, theta, sizeof theta) != 0);
    model_destroy(&a);
    model_destroy(&b);
    dataset_free(&d);
}

/* the plain mean loss over 300 examples (two chunks of the 256 it forwards at once) */
static void test_mean_loss(void) {
    grzo_desc desc = draw_desc(GRZO_ESTIMATOR_GRZO, 1.0f);
    float theta[66];
    double got, want = 0.0;
    probe_model m;
    dataset d;
    int i;
    fill_data(&d, SMALL, 300, 8);
    small_theta(SMALL, 1.0f, theta);
    for (i = 0; i < 300; i++) want += ref_loss(SMALL, theta, d.x + i * 5, d.y[i]) / 300.0;
    REQUIRE_OK(model_create(&m, SMALL, &desc, theta));
    REQUIRE_OK(model_mean_loss(&m, &d, &got));
    CHECK_NEAR(got, want, 1e-5 * want);
    model_destroy(&m);
    dataset_free(&d);
}

/* grzo's forward-only B_eff on a batch against the exact 1 + (B-1) c_w of its backprop
   gradients (a z-test: the seed is fixed, so the outcome is too); with each "-" copy fed the
   next example (the sabotage) the estimate is far off */
static void test_align(void) {
    enum { B = 4, D = 66 };
    grzo_desc desc = draw_desc(GRZO_ESTIMATOR_GRZO, 1.0f);
    float theta[D];
    double G[B * D], g_bar[D];
    grad_geometry geo;
    grzo_align_report rep, bad;
    probe_model m;
    dataset d;
    double exact;
    fill_data(&d, SMALL, 40, 7);
    small_theta(SMALL, 0.5f, theta);
    batch_gradients(&d, theta, DRAW_IDX, B, G, g_bar, &geo);
    exact = b_eff_of(geo.weighted_cos, B);
    REQUIRE_OK(model_create(&m, SMALL, &desc, theta));
    REQUIRE_OK(model_align(&m, &d, DRAW_IDX, B, 300, 0, &rep));
    CHECK(memcmp(m.theta, theta, sizeof theta) == 0);
    CHECK(rep.n_examples == B && rep.n_probes == 300);
    CHECKF(rep.b_eff_se > 0.0 && fabs(rep.b_eff - exact) <= 4.0 * rep.b_eff_se, "B_eff %.4f +- %.4f, exact %.4f", rep.b_eff, rep.b_eff_se, exact);
    REQUIRE_OK(model_align(&m, &d, DRAW_IDX, B, 300, 1, &bad));
    CHECKF(fabs(bad.b_eff - exact) > 10.0 * bad.b_eff_se, "sabotaged: B_eff %.4f +- %.4f, exact %.4f", bad.b_eff, bad.b_eff_se, exact);
    model_destroy(&m);
    dataset_free(&d);
}

/* the host reference's stack arrays bound the shape: d_in 64, d_hid 256, d_out 32 */
static void test_model_limits(void) {
    static const mlp_shape OK[] = {{64, 4, 2}, {4, 256, 2}, {4, 4, 32}}, BAD[] = {{65, 4, 2}, {4, 257, 2}, {4, 4, 33}};
    grzo_desc desc = draw_desc(GRZO_ESTIMATOR_GRZO, 1.0f);
    float *theta = (float *)calloc(4 * 257 + 257 + 257 * 33 + 33, sizeof(float));
    probe_model m;
    int i;
    REQUIRE(theta);
    for (i = 0; i < 3; i++) {
        CHECK_OK(model_create(&m, OK[i], &desc, theta));
        model_destroy(&m);
        CHECK_ST(model_create(&m, BAD[i], &desc, theta), GRZO_ERR_INVALID_ARG);
        model_destroy(&m);
    }
    free(theta);
}

int main(int argc, char **argv) {
    tu_args(argc, argv);
    if (tu_case("layout")) test_layout();
    if (tu_case("init")) test_init();
    if (tu_case("loss")) test_loss();
    if (tu_case("grad")) test_grad();
    if (tu_case("geometry")) test_geometry();
    if (tu_case("stats")) test_stats();
    if (tu_case("seeds")) test_seeds();
    if (tu_case("draw_batch")) test_draw_batch();
    if (tu_case("dataset")) test_dataset();
    if (tu_case("dataset_geometry")) test_dataset_geometry();
    if (tu_case("quantize")) test_quantize();
    if (tu_case("table")) test_table();
    if (tu_case("units")) test_units();
    if (tu_case("draw_mezo")) test_draw_mezo();
    if (tu_case("draw_blackbox")) test_draw_blackbox();
    if (tu_case("train_step")) test_train_step();
    if (tu_case("mean_loss")) test_mean_loss();
    if (tu_case("align")) test_align();
    if (tu_case("model_limits")) test_model_limits();
    return tu_finish("probe_units");
}
