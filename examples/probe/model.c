/* model.c - the probe MLP: data, exact gradients by backpropagation (the reference),
   and gradient estimates drawn through grzo (the thing under test). */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The host-side reference keeps its activations on the stack. */
enum { MAX_HID = 256, MAX_OUT = 32, TEACHER_HID = 32 };

/* user-side random streams (block GRZO_USER_BLOCK never collides with grzo's blocks) */
enum {
    STREAM_INIT_W1 = 1, STREAM_INIT_W2, STREAM_MU, STREAM_XI, STREAM_LABEL,
    STREAM_TEACHER_W1, STREAM_TEACHER_B1, STREAM_TEACHER_W2, STREAM_BATCH
};

static grzo_noise user_noise(uint64_t seed, uint32_t stream, grzo_noise_dist dist) {
    grzo_noise n;
    n.seed = seed;
    n.step = 0;
    n.block = GRZO_USER_BLOCK;
    n.stream = stream;
    n.dist = (uint32_t)dist;
    return n;
}

static void gaussian_fill(uint64_t seed, uint32_t stream, float scale, int64_t count, float *out) {
    grzo_noise n = user_noise(seed, stream, GRZO_NOISE_GAUSSIAN);
    int64_t i;
    grzo_noise_fill(&n, 0, (size_t)count, out);
    for (i = 0; i < count; i++) out[i] *= scale;
}

/* ---- the MLP on the host --------------------------------------------------------------------- */
mlp_layout mlp_layout_of(mlp_shape s) {
    mlp_layout l;
    l.w1 = 0;
    l.b1 = l.w1 + (int64_t)s.d_hid * s.d_in;
    l.w2 = l.b1 + s.d_hid;
    l.b2 = l.w2 + (int64_t)s.d_out * s.d_hid;
    l.n = l.b2 + s.d_out;
    return l;
}

/* softmax cross-entropy of logits o against class y; p (may be NULL) gets softmax(o) */
static double softmax_xent(const double *o, int d, int32_t y, double *p) {
    double mx = o[0], sum = 0.0;
    int k;
    for (k = 1; k < d; k++) if (o[k] > mx) mx = o[k];
    for (k = 0; k < d; k++) {
        double e = exp(o[k] - mx);
        sum += e;
        if (p) p[k] = e;
    }
    if (p) for (k = 0; k < d; k++) p[k] /= sum;
    return log(sum) + mx - o[y];
}

static void hidden_of(mlp_shape s, const float *w1, const float *b1, const float *x, double *h) {
    int j, k;
    for (j = 0; j < s.d_hid; j++) {
        double a = b1[j];
        for (k = 0; k < s.d_in; k++) a += (double)w1[(int64_t)j * s.d_in + k] * x[k];
        h[j] = tanh(a);
    }
}

static void logits_of(mlp_shape s, const float *w2, const float *b2, const double *h, double *o) {
    int c, j;
    for (c = 0; c < s.d_out; c++) {
        double a = b2[c];
        for (j = 0; j < s.d_hid; j++) a += (double)w2[(int64_t)c * s.d_hid + j] * h[j];
        o[c] = a;
    }
}

double mlp_example_loss(mlp_shape s, const float *w1, const float *b1, const float *w2, const float *b2,
                        const float *x, int32_t y) {
    double h[MAX_HID], o[MAX_OUT] = {0};
    hidden_of(s, w1, b1, x, h);
    logits_of(s, w2, b2, h, o);
    return softmax_xent(o, s.d_out, y, NULL);
}

double mlp_example_grad(mlp_shape s, const float *theta, const float *x, int32_t y, double *g) {
    mlp_layout L = mlp_layout_of(s);
    const float *w2 = theta + L.w2;
    double h[MAX_HID], o[MAX_OUT] = {0}, dout[MAX_OUT] = {0}, loss;
    int c, j, k;
    hidden_of(s, theta + L.w1, theta + L.b1, x, h);
    logits_of(s, w2, theta + L.b2, h, o);
    loss = softmax_xent(o, s.d_out, y, dout);
    dout[y] -= 1.0;                                   /* dl/do = softmax - onehot */
    for (c = 0; c < s.d_out; c++) {
        g[L.b2 + c] = dout[c];
        for (j = 0; j < s.d_hid; j++) g[L.w2 + (int64_t)c * s.d_hid + j] = dout[c] * h[j];
    }
    for (j = 0; j < s.d_hid; j++) {
        double dh = 0.0;
        for (c = 0; c < s.d_out; c++) dh += (double)w2[(int64_t)c * s.d_hid + j] * dout[c];
        dh *= 1.0 - h[j] * h[j];                      /* through tanh */
        g[L.b1 + j] = dh;
        for (k = 0; k < s.d_in; k++) g[L.w1 + (int64_t)j * s.d_in + k] = dh * x[k];
    }
    return loss;
}

void mlp_init(mlp_shape s, uint64_t seed, float gain, float *theta) {
    mlp_layout L = mlp_layout_of(s);
    gaussian_fill(seed, STREAM_INIT_W1, gain / sqrtf((float)s.d_in), L.b1 - L.w1, theta + L.w1);
    gaussian_fill(seed, STREAM_INIT_W2, gain / sqrtf((float)s.d_hid), L.b2 - L.w2, theta + L.w2);
    memset(theta + L.b1, 0, (size_t)s.d_hid * sizeof(float));
    memset(theta + L.b2, 0, (size_t)s.d_out * sizeof(float));
}

/* ---- data ----------------------------------------------------------------------------------- */
/* A fixed random teacher MLP (d_in -> 32 -> d_out, tanh) with sharp class boundaries. */
static void teacher_labels(mlp_shape s, uint64_t seed, dataset *d) {
    float w1[TEACHER_HID * 64], b1[TEACHER_HID], w2[MAX_OUT * TEACHER_HID], b2[MAX_OUT] = {0};
    mlp_shape t;
    int i, c;
    t.d_in = s.d_in;
    t.d_hid = TEACHER_HID;
    t.d_out = s.d_out;
    gaussian_fill(seed, STREAM_TEACHER_W1, 2.0f / sqrtf((float)s.d_in), (int64_t)TEACHER_HID * s.d_in, w1);
    gaussian_fill(seed, STREAM_TEACHER_B1, 0.5f, TEACHER_HID, b1);
    gaussian_fill(seed, STREAM_TEACHER_W2, 2.0f / sqrtf((float)TEACHER_HID), (int64_t)s.d_out * TEACHER_HID, w2);
    for (i = 0; i < d->n; i++) {
        double h[TEACHER_HID], o[MAX_OUT] = {0};
        int best = 0;
        hidden_of(t, w1, b1, d->x + (int64_t)i * s.d_in, h);
        logits_of(t, w2, b2, h, o);
        for (c = 1; c < s.d_out; c++) if (o[c] > o[best]) best = c;
        d->y[i] = best;
    }
}

int dataset_make(mlp_shape s, const data_spec *spec, uint64_t seed, dataset *out) {
    float *mu;
    int i, k;
    memset(out, 0, sizeof *out);
    out->shape = s;
    out->n = spec->n;
    out->x = (float *)malloc((size_t)spec->n * (size_t)s.d_in * sizeof(float));
    out->y = (int32_t *)malloc((size_t)spec->n * sizeof(int32_t));
    mu = (float *)malloc((size_t)s.d_in * sizeof(float));
    if (!out->x || !out->y || !mu) { free(mu); dataset_free(out); return -1; }
    gaussian_fill(seed, STREAM_MU, 1.0f, s.d_in, mu);
    gaussian_fill(seed, STREAM_XI, 1.0f, (int64_t)spec->n * s.d_in, out->x);
    /* the teacher reads the per-example part xi only: a large shared part then shapes the
       gradients' geometry without deciding the labels */
    if (spec->labels == LABEL_TEACHER) {
        teacher_labels(s, seed, out);
    } else {
        for (i = 0; i < spec->n; i++) {
            double u = grzo_uniform_at(seed, 0, GRZO_USER_BLOCK, STREAM_LABEL, (uint64_t)(2 * i));
            double v = grzo_uniform_at(seed, 0, GRZO_USER_BLOCK, STREAM_LABEL, (uint64_t)(2 * i + 1));
            out->y[i] = u < spec->majority ? 0 : (int32_t)(v * s.d_out);
        }
    }
    for (i = 0; i < spec->n; i++) {
        float *x = out->x + (int64_t)i * s.d_in;
        double sq = 0.0;
        for (k = 0; k < s.d_in; k++) {
            x[k] = spec->shared * mu[k] + spec->spread * x[k];
            sq += (double)x[k] * x[k];
        }
        /* every input on the sphere of radius sqrt(d_in): per-example gradient norms then
           differ by the labels and the network, not by chi-square input lengths */
        for (k = 0; k < s.d_in && sq > 0.0; k++) x[k] = (float)(x[k] * sqrt(s.d_in / sq));
    }
    free(mu);
    return 0;
}

void dataset_free(dataset *d) {
    free(d->x);
    free(d->y);
    d->x = NULL;
    d->y = NULL;
}

void draw_batch(uint64_t seed, uint32_t draw, int n, int B, int *idx, int *scratch) {
    int i;
    for (i = 0; i < n; i++) scratch[i] = i;
    for (i = 0; i < B; i++) {
        double u = grzo_uniform_at(seed, draw, GRZO_USER_BLOCK, STREAM_BATCH, (uint64_t)i);
        int j = i + (int)(u * (double)(n - i)), t = scratch[i];
        scratch[i] = scratch[j];
        scratch[j] = t;
        idx[i] = scratch[i];
    }
}

/* ---- per-example gradient geometry ------------------------------------------------------------ */
enum { NORM_KEPT = 256 };   /* cosine's pool, the largest batch_gradients is given */

/* |G_i|, from kept when batch_gradients could keep it */
static double row_norm(const double *G, int64_t n, int i, const double *kept) {
    return i < NORM_KEPT ? kept[i] : sqrt(dot(G + (int64_t)i * n, G + (int64_t)i * n, n));
}

void batch_gradients(const dataset *d, const float *theta, const int *idx, int B, double *G, double *g_bar,
                     grad_geometry *geo) {
    mlp_shape s = d->shape;
    int64_t n = mlp_layout_of(s).n, k;
    int i, j;
    for (i = 0; i < B; i++)
        mlp_example_grad(s, theta, d->x + (int64_t)idx[i] * s.d_in, d->y[idx[i]], G + (int64_t)i * n);
    for (k = 0; k < n; k++) {
        double acc = 0.0;
        for (i = 0; i < B; i++) acc += G[(int64_t)i * n + k];
        g_bar[k] = acc / B;
    }
    if (!geo) return;
    {
        double cos_sum = 0.0, cross = 0.0, sq = 0.0;
        /* the norms kept on the stack, not in a buffer from malloc: no allocation here, so no
           failure that would read as zero geometry (the probe's B is at most NORM_KEPT; a larger
           one has its norms recomputed per pair) */
        double kept[NORM_KEPT];
        for (i = 0; i < B; i++) {
            double q = dot(G + (int64_t)i * n, G + (int64_t)i * n, n);
            if (i < NORM_KEPT) kept[i] = sqrt(q);
            sq += q;
        }
        for (i = 0; i < B; i++)
            for (j = i + 1; j < B; j++) {
                double p = dot(G + (int64_t)i * n, G + (int64_t)j * n, n);
                double ni = row_norm(G, n, i, kept), nj = row_norm(G, n, j, kept);
                cross += 2.0 * p;
                cos_sum += ni > 0.0 && nj > 0.0 ? p / (ni * nj) : 0.0;
            }
        geo->mean_cos = B > 1 ? cos_sum / (0.5 * B * (B - 1)) : 1.0;
        geo->weighted_cos = B > 1 && sq > 0.0 ? cross / ((B - 1) * sq) : 1.0;
        geo->mean_sq_norm = sq / B;
        geo->batch_sq_norm = dot(g_bar, g_bar, n);
    }
}

double b_eff_of(double c, int B) { return c * B + 1.0 - c; }

/* ---- a grzo context driving the MLP ------------------------------------------------------------- */
grzo_status probe_report(grzo_status s, const char *what, const grzo_ctx *ctx) {
    fprintf(stderr, "grzo-probe: %s failed: %s%s%s\n", what, grzo_status_str(s), ctx ? ": " : "",
            ctx ? grzo_last_error(ctx) : "");
    return s;
}

static grzo_status alloc_floats(probe_model *m, int64_t count, float **out) {
    PROBE_TRY(grzo_backend_alloc(&m->be, (size_t)count * sizeof(float), (void **)out), "grzo_backend_alloc", NULL);
    return GRZO_OK;
}

static grzo_status add_block(probe_model *m, grzo_block_kind kind, int rows, int cols, int64_t offset,
                             const char *name, grzo_block *out) {
    grzo_block_desc bd;
    memset(&bd, 0, sizeof bd);
    bd.kind = kind;
    bd.rows = rows;
    bd.cols = cols;
    bd.data = m->theta + offset;
    bd.name = name;
    PROBE_TRY(grzo_block_add(m->ctx, &bd, out), "grzo_block_add", m->ctx);
    return GRZO_OK;
}

grzo_status model_create(probe_model *m, mlp_shape s, const grzo_desc *desc, const float *theta0) {
    grzo_cpu_desc cd;
    grzo_backend_caps caps;
    memset(m, 0, sizeof *m);
    memset(&cd, 0, sizeof cd);
    if (s.d_hid > MAX_HID || s.d_out > MAX_OUT || s.d_in > 64) {
        fprintf(stderr, "grzo-probe: MLP shape beyond the host reference's limits\n");
        return GRZO_ERR_INVALID_ARG;
    }
    m->shape = s;
    m->lay = mlp_layout_of(s);
    cd.n_threads = 1;   /* one thread per model: the probe runs work units in parallel */
    PROBE_TRY(grzo_backend_cpu_create(&cd, &m->be), "grzo_backend_cpu_create", NULL);
    m->have_backend = 1;
    PROBE_TRY(grzo_backend_query(&m->be, &caps), "grzo_backend_query", NULL);
    if (caps.device_memory) {   /* the probe reads parameters and activations on the host */
        fprintf(stderr, "grzo-probe: needs a host-memory backend\n");
        return GRZO_ERR_UNSUPPORTED;
    }
    m->desc = *desc;
    m->desc.backend = &m->be;   /* m must not move after this (grzo keeps the pointer) */
    PROBE_TRY(grzo_create(&m->desc, &m->ctx), "grzo_create", NULL);
    PROBE_PASS(alloc_floats(m, m->lay.n, &m->theta));
    PROBE_PASS(alloc_floats(m, m->lay.n, &m->pert));
    m->saved = (float *)malloc((size_t)m->lay.n * sizeof(float));
    if (!m->saved) return probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    memcpy(m->theta, theta0, (size_t)m->lay.n * sizeof(float));
    PROBE_PASS(add_block(m, GRZO_BLOCK_MATRIX, s.d_hid, s.d_in, m->lay.w1, "fc1.weight", &m->w1));
    PROBE_PASS(add_block(m, GRZO_BLOCK_VECTOR, s.d_hid, 1, m->lay.b1, "fc1.bias", &m->b1));
    PROBE_PASS(add_block(m, GRZO_BLOCK_MATRIX, s.d_out, s.d_hid, m->lay.w2, "fc2.weight", &m->w2));
    PROBE_PASS(add_block(m, GRZO_BLOCK_VECTOR, s.d_out, 1, m->lay.b2, "fc2.bias", &m->b2));
    return GRZO_OK;
}

static void free_rows(probe_model *m) {
    grzo_backend_free(&m->be, m->xs);
    grzo_backend_free(&m->be, m->t1);
    grzo_backend_free(&m->be, m->t2);
    grzo_backend_free(&m->be, m->t3);
    grzo_backend_free(&m->be, m->t4);
    grzo_backend_free(&m->be, m->t5);
    free(m->ys);
    free(m->losses);
    m->xs = m->t1 = m->t2 = m->t3 = m->t4 = m->t5 = m->losses = NULL;
    m->ys = NULL;
    m->cap_rows = 0;
}

void model_destroy(probe_model *m) {
    grzo_destroy(m->ctx);   /* first: the context refers to the parameter memory */
    if (m->have_backend) {
        free_rows(m);
        grzo_backend_free(&m->be, m->theta);
        grzo_backend_free(&m->be, m->pert);
        grzo_backend_destroy(&m->be);
    }
    free(m->saved);
    memset(m, 0, sizeof *m);
}

/* Row buffers for `rows` rows (activations in backend memory); losses for a whole step. */
static grzo_status ensure_rows(probe_model *m, int64_t rows) {
    mlp_shape s = m->shape;
    int64_t wide = s.d_in > s.d_hid ? s.d_in : s.d_hid;
    if (rows <= m->cap_rows) return GRZO_OK;
    free_rows(m);
    PROBE_PASS(alloc_floats(m, rows * s.d_in, &m->xs));
    PROBE_PASS(alloc_floats(m, rows * wide, &m->t1));
    PROBE_PASS(alloc_floats(m, rows * wide, &m->t2));
    PROBE_PASS(alloc_floats(m, rows * wide, &m->t3));
    PROBE_PASS(alloc_floats(m, rows * s.d_out, &m->t4));
    PROBE_PASS(alloc_floats(m, rows * s.d_out, &m->t5));
    m->ys = (int32_t *)malloc((size_t)rows * sizeof(int32_t));
    /* the most losses a step holds: MeZO's 2 passes of B, or GRZO's one pass of 2B */
    m->losses = (float *)malloc((size_t)rows * 2 * sizeof(float));
    if (!m->ys || !m->losses) return probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
    m->cap_rows = rows;
    return GRZO_OK;
}

/* Forward of the n rows already in m->xs / m->ys through grzo's operations: perturbed
   inside a pass (one row per segment), plain outside a step. One loss per row. */
static grzo_status forward_rows(probe_model *m, int64_t n, float *loss) {
    mlp_shape s = m->shape;
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    int64_t i;
    rows.n_rows = n;
    rows.offsets = NULL;   /* even split: one row per segment inside a pass */
    PROBE_TRY(grzo_linear(m->ctx, m->w1, m->xs, m->t1, &rows), "grzo_linear fc1", m->ctx);
    PROBE_TRY(grzo_vector(m->ctx, m->b1, GRZO_VECTOR_ADD, m->t1, m->t2, &rows), "grzo_vector fc1 bias", m->ctx);
    for (i = 0; i < n * s.d_hid; i++) m->t3[i] = tanhf(m->t2[i]);
    PROBE_TRY(grzo_linear(m->ctx, m->w2, m->t3, m->t4, &rows), "grzo_linear fc2", m->ctx);
    PROBE_TRY(grzo_vector(m->ctx, m->b2, GRZO_VECTOR_ADD, m->t4, m->t5, &rows), "grzo_vector fc2 bias", m->ctx);
    for (i = 0; i < n; i++) {
        double o[MAX_OUT] = {0};
        int c;
        for (c = 0; c < s.d_out; c++) o[c] = m->t5[i * s.d_out + c];
        loss[i] = (float)softmax_xent(o, s.d_out, m->ys[i], NULL);
    }
    return GRZO_OK;
}

static void gather_example(probe_model *m, const dataset *d, int64_t row, int example) {
    memcpy(m->xs + row * d->shape.d_in, d->x + (int64_t)example * d->shape.d_in, (size_t)d->shape.d_in * sizeof(float));
    m->ys[row] = d->y[example];
}

grzo_status model_mean_loss(probe_model *m, const dataset *d, double *mean_loss) {
    const int64_t chunk = 256;
    int64_t i0, i;
    double sum = 0.0;
    PROBE_PASS(ensure_rows(m, chunk));
    for (i0 = 0; i0 < d->n; i0 += chunk) {
        int64_t n = d->n - i0 < chunk ? d->n - i0 : chunk;
        for (i = 0; i < n; i++) gather_example(m, d, i, (int)(i0 + i));
        PROBE_PASS(forward_rows(m, n, m->losses));
        for (i = 0; i < n; i++) sum += m->losses[i];
    }
    *mean_loss = sum / d->n;
    return GRZO_OK;
}

/* Only GRZO and canonical give each example its own Z; the others share one per pass sign. */
static int per_example_perturbation(grzo_estimator e) {
    return e == GRZO_ESTIMATOR_GRZO || e == GRZO_ESTIMATOR_CANONICAL || e == GRZO_ESTIMATOR_DEFAULT;
}

static grzo_status materialize(probe_model *m, int64_t segment, weight_transform transform) {
    mlp_shape s = m->shape;
    PROBE_TRY(grzo_perturbed_params(m->ctx, m->w1, segment, m->pert + m->lay.w1), "grzo_perturbed_params fc1", m->ctx);
    PROBE_TRY(grzo_perturbed_params(m->ctx, m->b1, segment, m->pert + m->lay.b1), "grzo_perturbed_params fc1 bias", m->ctx);
    PROBE_TRY(grzo_perturbed_params(m->ctx, m->w2, segment, m->pert + m->lay.w2), "grzo_perturbed_params fc2", m->ctx);
    PROBE_TRY(grzo_perturbed_params(m->ctx, m->b2, segment, m->pert + m->lay.b2), "grzo_perturbed_params fc2 bias", m->ctx);
    transform(m->pert + m->lay.w1, s.d_hid, s.d_in);
    transform(m->pert + m->lay.w2, s.d_out, s.d_hid);
    return GRZO_OK;
}

/* Black-box pass: ask grzo for each segment's perturbed parameters, evaluate on the host. */
static grzo_status blackbox_pass(probe_model *m, const dataset *d, const int *idx, const grzo_pass_info *pi,
                                 weight_transform transform, float *loss) {
    mlp_shape s = m->shape;
    int flip = per_example_perturbation(m->desc.estimator);
    int64_t c;
    for (c = 0; c < pi->n_segments; c++) {
        int e = idx[pi->example[c]];
        /* shared-Z estimators perturb every segment of one sign alike: one copy serves them */
        if (c == 0 || flip || pi->sign[c] != pi->sign[c - 1]) PROBE_PASS(materialize(m, c, transform));
        loss[c] = (float)mlp_example_loss(s, m->pert + m->lay.w1, m->pert + m->lay.b1, m->pert + m->lay.w2,
                                          m->pert + m->lay.b2, d->x + (int64_t)e * s.d_in, d->y[e]);
    }
    return GRZO_OK;
}

/* Runs every pass of a begun step; the losses of pass p land at m->losses + p * segments. */
static grzo_status run_passes(probe_model *m, const dataset *d, const int *idx, const grzo_step_info *si,
                              weight_transform transform) {
    int32_t p;
    for (p = 0; p < si->n_passes; p++) {
        grzo_pass_info pi;
        float *loss;
        int64_t c;
        PROBE_TRY(grzo_pass_begin(m->ctx, &pi), "grzo_pass_begin", m->ctx);
        loss = m->losses + (int64_t)p * pi.n_segments;
        if (transform) {
            PROBE_PASS(blackbox_pass(m, d, idx, &pi, transform, loss));
        } else {
            for (c = 0; c < pi.n_segments; c++) gather_example(m, d, c, idx[pi.example[c]]);
            PROBE_PASS(forward_rows(m, pi.n_segments, loss));
        }
        {
            grzo_status s = grzo_pass_end(m->ctx, loss);
            if (s == GRZO_ERR_NONFINITE) return s;           /* grzo abandoned the step */
            PROBE_TRY(s, "grzo_pass_end", m->ctx);
        }
    }
    return GRZO_OK;
}

static grzo_status begin_and_run(probe_model *m, const dataset *d, const int *idx, int B, weight_transform transform,
                                 grzo_step_info *si) {
    grzo_status s;
    PROBE_PASS(ensure_rows(m, 2 * (int64_t)B));
    PROBE_TRY(grzo_step_begin(m->ctx, B, si), "grzo_step_begin", m->ctx);
    s = run_passes(m, d, idx, si, transform);
    if (s != GRZO_OK) grzo_step_abort(m->ctx);   /* leaves the context ready and theta unchanged */
    return s;
}

/* l_i^+ - l_i^-. Both layouts put example i's "+" loss at i and its "-" loss at B + i: a
   GRZO-family pass holds the "+" copies then the "-" copies, and MeZO's "+" pass is stored
   before its "-" pass. */
static void loss_differences(const probe_model *m, int B, double *delta) {
    int i;
    for (i = 0; i < B; i++) delta[i] = (double)m->losses[i] - (double)m->losses[B + i];
}

grzo_status model_draw(probe_model *m, const dataset *d, const int *idx, int B, weight_transform transform,
                       double *g_hat, grzo_step_report *rep, double *delta) {
    grzo_step_info si;
    grzo_step_report r;
    grzo_status s;
    int64_t k;
    memcpy(m->saved, m->theta, (size_t)m->lay.n * sizeof(float));
    s = begin_and_run(m, d, idx, B, transform, &si);
    if (s == GRZO_ERR_NONFINITE) return probe_report(s, "a probe step (non-finite loss)", m->ctx);
    if (s != GRZO_OK) return s;
    PROBE_TRY(grzo_step_end(m->ctx, &r), "grzo_step_end", m->ctx);
    for (k = 0; k < m->lay.n; k++) g_hat[k] = ((double)m->saved[k] - (double)m->theta[k]) / (double)r.lr;
    memcpy(m->theta, m->saved, (size_t)m->lay.n * sizeof(float));
    if (delta) loss_differences(m, B, delta);
    if (rep) *rep = r;
    return GRZO_OK;
}

/* The alignment diagnostic (grzo.h section 3b) on examples idx[0..B-1]: K probes, each a
   shared-perturbation pass over the same batch. shift_minus (the alignment probe's sabotage)
   feeds each "-" copy the next example of the batch instead of its own, the bug of a forward
   that mislays the copy layout: the differences then hold l_i - l_{i+1} and --check must fail. */
grzo_status model_align(probe_model *m, const dataset *d, const int *idx, int B, int K, int shift_minus,
                        grzo_align_report *rep) {
    grzo_step_info si;
    grzo_status s = GRZO_OK;
    int32_t p;
    PROBE_PASS(ensure_rows(m, 2 * (int64_t)B));
    PROBE_TRY(grzo_align_begin(m->ctx, B, K, &si), "grzo_align_begin", m->ctx);
    for (p = 0; s == GRZO_OK && p < si.n_passes; p++) {
        grzo_pass_info pi;
        int64_t c;
        s = grzo_pass_begin(m->ctx, &pi);
        if (s != GRZO_OK) { probe_report(s, "grzo_pass_begin", m->ctx); break; }
        for (c = 0; c < pi.n_segments; c++) {
            int64_t e = pi.example[c];
            if (shift_minus && pi.sign[c] < 0) e = (e + 1) % B;
            gather_example(m, d, c, idx[e]);
        }
        s = forward_rows(m, pi.n_segments, m->losses);
        if (s == GRZO_OK) {
            s = grzo_pass_end(m->ctx, m->losses);
            if (s != GRZO_OK) probe_report(s, "grzo_pass_end", m->ctx);
        }
    }
    if (s != GRZO_OK) {
        grzo_step_abort(m->ctx);
        return s;
    }
    PROBE_TRY(grzo_align_end(m->ctx, NULL, rep), "grzo_align_end", m->ctx);
    return GRZO_OK;
}

grzo_status model_train_step(probe_model *m, const dataset *d, const int *idx, int B, grzo_step_report *rep) {
    grzo_step_info si;
    grzo_status s = begin_and_run(m, d, idx, B, NULL, &si);
    if (s != GRZO_OK) return s;
    s = grzo_step_end(m->ctx, rep);
    if (s == GRZO_ERR_NONFINITE) return s;
    PROBE_TRY(s, "grzo_step_end", m->ctx);
    return GRZO_OK;
}

void identity_transform(float *w, int rows, int cols) {
    (void)w;
    (void)rows;
    (void)cols;
}

void quantize_w4_rows(float *w, int rows, int cols) {
    int j, k;
    for (j = 0; j < rows; j++) {
        float *r = w + (int64_t)j * cols, mx = 0.0f, scale;
        for (k = 0; k < cols; k++) if (fabsf(r[k]) > mx) mx = fabsf(r[k]);
        scale = mx / 7.0f;
        if (scale == 0.0f) continue;   /* an all-zero row stays zero */
        for (k = 0; k < cols; k++) {
            /* round half away from zero, inline (the quant probe calls this 10^6 times);
               |r[k]| <= mx keeps the level in [-7, 7] up to one rounding, clamped anyway */
            float v = r[k] / scale;
            int q = (int)(v + (v >= 0.0f ? 0.5f : -0.5f));
            if (q > 7) q = 7;
            if (q < -7) q = -7;
            r[k] = (float)q * scale;
        }
    }
}
