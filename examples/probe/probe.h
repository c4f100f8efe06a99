/* probe.h - shared pieces of grzo-probe: options, the probe MLP, its exact gradients,
   one-step gradient estimates drawn through grzo, statistics and output.

   grzo-probe checks the paper's theory on a model small enough that the exact
   per-example gradients are cheap: a one-hidden-layer MLP (tanh, softmax
   cross-entropy), whose gradients this program computes by hand-written
   backpropagation. Backpropagation lives only here, as the reference; every estimate
   comes from grzo's forward-only steps (grzo_step_begin ... grzo_step_end, or the
   black-box grzo_perturbed_params for the quantized forward).

   How an estimate is read back. grzo updates the parameters in place,
   theta <- theta - lr * g_hat, and the losses of a step do not depend on lr (the
   update comes after the forwards). So one step with the parameters saved before it
   gives g_hat = (theta_before - theta_after) / lr exactly, up to float rounding, and
   restoring the saved parameters makes the next draw start from the same point. A
   large lr makes the rounding relatively smaller (the change dwarfs the ulp of theta),
   so the probe uses lr = 1: it is a read-out factor here, never a training rate. */
#ifndef GRZO_PROBE_H
#define GRZO_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "grzo.h"
#include "backends/grzo_cpu.h"

/* ---- exit codes ------------------------------------------------------------------------ */
enum { PROBE_EXIT_OK = 0, PROBE_EXIT_CHECK_FAILED = 1, PROBE_EXIT_USAGE = 2, PROBE_EXIT_ERROR = 3 };

/* ---- options ----------------------------------------------------------------------------- */
typedef struct probe_opts {
    int quick;                 /* small trial counts: seconds, for the tests */
    int check;                 /* assert the qualitative claims; exit 1 when one fails */
    int sabotage;              /* run MeZO where GRZO/canonical is named: --check must fail */
    int plot;                  /* write the PNG (needs gnuplot) */
    int threads;               /* work units run in parallel; results do not depend on it */
    uint64_t seed;
    char out_dir[1024];
} probe_opts;

/* ---- the probe MLP: x -> tanh(W1 x + b1) -> W2 h + b2 -> softmax cross-entropy ------------- */
typedef struct mlp_shape { int d_in, d_hid, d_out; } mlp_shape;

/* Offsets of the four blocks inside one flat parameter vector of n floats. */
typedef struct mlp_layout { int64_t w1, b1, w2, b2, n; } mlp_layout;

mlp_layout mlp_layout_of(mlp_shape s);

/* Exact loss and gradient (into g, n doubles, overwritten) of one example. */
double mlp_example_grad(mlp_shape s, const float *theta, const float *x, int32_t y, double *g);

/* Loss of one example computed on the host from explicit parameter arrays. */
double mlp_example_loss(mlp_shape s, const float *w1, const float *b1, const float *w2, const float *b2,
                        const float *x, int32_t y);

/* Initial parameters: W ~ N(0, gain^2 / fan_in), biases 0. */
void mlp_init(mlp_shape s, uint64_t seed, float gain, float *theta);

/* ---- data ----------------------------------------------------------------------------------- */
typedef enum label_rule {
    LABEL_MAJORITY = 0,    /* class 0 with probability `majority`, otherwise uniform */
    LABEL_TEACHER          /* argmax of a fixed random teacher MLP */
} label_rule;

/* x_i = shared * mu + spread * xi_i, mu and xi_i standard normal (mu one vector for all),
   then scaled to norm sqrt(d_in). A teacher labels xi_i, the per-example part. */
typedef struct data_spec {
    int n;
    float shared, spread;
    label_rule labels;
    float majority;        /* LABEL_MAJORITY only */
} data_spec;

typedef struct dataset {
    mlp_shape shape;
    int n;
    float *x;              /* n x d_in */
    int32_t *y;
} dataset;

int dataset_make(mlp_shape s, const data_spec *spec, uint64_t seed, dataset *out);   /* 0 or -1 (memory) */
void dataset_free(dataset *d);

/* Draws B distinct example indices in [0, n) (partial Fisher-Yates), from (seed, draw). */
void draw_batch(uint64_t seed, uint32_t draw, int n, int B, int *idx, int *scratch);

/* ---- per-example gradient geometry ------------------------------------------------------------ */
typedef struct grad_geometry {
    double mean_cos;       /* mean pairwise cosine between per-example gradients (the paper's c) */
    double weighted_cos;   /* sum_{i!=j} g_i.g_j / ((B-1) sum_i |g_i|^2): makes 1 + (B-1)c exact */
    double mean_sq_norm;   /* mean |g_i|^2 */
    double batch_sq_norm;  /* |mean g_i|^2 */
} grad_geometry;

/* Per-example gradients of examples idx[0..B-1] into G (B x n), their mean into g_bar,
   and (if geo) their geometry. */
void batch_gradients(const dataset *d, const float *theta, const int *idx, int B, double *G, double *g_bar,
                     grad_geometry *geo);

double b_eff_of(double c, int B);   /* c B + 1 - c */

/* ---- a grzo context driving the probe MLP ------------------------------------------------------- */
/* Optional host-side transform of the perturbed weight matrices inside the black-box forward
   (the quant probe's fake quantization). */
typedef void (*weight_transform)(float *w, int rows, int cols);

typedef struct probe_model {
    mlp_shape shape;
    mlp_layout lay;
    grzo_desc desc;            /* as given to grzo_create (resolved values in ctx) */
    grzo_backend be;
    int have_backend;
    grzo_ctx *ctx;
    grzo_block w1, b1, w2, b2;
    float *theta;              /* backend memory (host for the CPU backend), lay.n floats */
    float *saved;              /* host copy taken before each draw */
    /* forward scratch: rows x width buffers, grown on demand */
    int64_t cap_rows;
    float *xs, *t1, *t2, *t3, *t4, *t5;
    int32_t *ys;
    float *losses;             /* n_passes x segments of the last step */
    float *pert;               /* black-box: one perturbed copy of all blocks (lay.n) */
} probe_model;

/* A model with its own CPU backend (one thread: the probe parallelizes over work units)
   and context. theta0: initial parameters (lay.n floats). On failure it prints why, and
   model_destroy must still be called. m must not move once created (grzo keeps &m->be). */
grzo_status model_create(probe_model *m, mlp_shape s, const grzo_desc *desc, const float *theta0);
void model_destroy(probe_model *m);   /* also safe on a zeroed or half-created model */

/* Plain (unperturbed) mean loss over rows of a dataset, through grzo's plain operations. */
grzo_status model_mean_loss(probe_model *m, const dataset *d, double *mean_loss);

/* One draw: a grzo step on examples idx[0..B-1], read back as g_hat (lay.n doubles) with
   the parameters restored afterwards. rep (may be NULL) gets grzo's step report; delta
   (may be NULL) gets the B per-example loss differences l_i^+ - l_i^-.
   With transform == NULL the forward runs through grzo_linear/grzo_vector; otherwise
   through the black-box grzo_perturbed_params and a host forward that applies the
   transform to the perturbed W1 and W2 (the transform may be identity_transform to use
   the black-box path unchanged). */
grzo_status model_draw(probe_model *m, const dataset *d, const int *idx, int B, weight_transform transform,
                       double *g_hat, grzo_step_report *rep, double *delta);

/* grzo's alignment diagnostic (grzo_align_begin, K passes, grzo_align_end) on examples
   idx[0..B-1], parameters untouched. shift_minus != 0 sabotages the copy layout (model.c). */
grzo_status model_align(probe_model *m, const dataset *d, const int *idx, int B, int K, int shift_minus,
                        grzo_align_report *rep);

/* One training step (parameters kept). Returns GRZO_ERR_NONFINITE when grzo abandoned it. */
grzo_status model_train_step(probe_model *m, const dataset *d, const int *idx, int B, grzo_step_report *rep);

void identity_transform(float *w, int rows, int cols);
void quantize_w4_rows(float *w, int rows, int cols);   /* per-row symmetric 4-bit, levels -7..7 */

/* Reports a failed grzo call (with grzo_last_error when a context is given) on stderr. */
grzo_status probe_report(grzo_status s, const char *what, const grzo_ctx *ctx);
#define PROBE_TRY(call, what, ctx)                                                     \
    do {                                                                               \
        grzo_status probe_s_ = (call);                                                 \
        if (probe_s_ != GRZO_OK) return probe_report(probe_s_, (what), (ctx));          \
    } while (0)
/* for the probe's own helpers, which have reported their failure already */
#define PROBE_PASS(call)                                                               \
    do {                                                                               \
        grzo_status probe_s_ = (call);                                                 \
        if (probe_s_ != GRZO_OK) return probe_s_;                                      \
    } while (0)

/* ---- statistics --------------------------------------------------------------------------------- */
typedef struct running_stat { double n, sum, sum_sq; } running_stat;
void stat_add(running_stat *s, double x);
void stat_merge(running_stat *into, const running_stat *from);
double stat_mean(const running_stat *s);
double stat_sd(const running_stat *s);          /* sample standard deviation */
double stat_se(const running_stat *s);          /* standard error of the mean */

double dot(const double *a, const double *b, int64_t n);
double cosine(const double *a, const double *b, int64_t n);

/* ---- seeds ---------------------------------------------------------------------------------------- */
uint64_t seed_mix(uint64_t seed, uint64_t tag);   /* independent seed for one purpose */

/* ---- parallel work units ----------------------------------------------------------------------------- */
/* Runs unit(i, user) for i in [0, n) on opts->threads threads; each unit must write only
   its own results. Returns the first failing unit's status, in unit order. */
typedef grzo_status (*unit_fn)(int i, void *user);
grzo_status run_units(int n, int threads, unit_fn unit, void *user);

/* ---- output ----------------------------------------------------------------------------------------- */
/* A markdown table printed with padded columns. Cells are copied. */
typedef struct md_table {
    int cols, rows, cap;
    char **cell;               /* (rows + 1) x cols, row 0 is the header */
} md_table;

int md_begin(md_table *t, int cols, const char *const *header);
int md_row(md_table *t, const char *first, ...);      /* exactly `cols` strings */
void md_print(const md_table *t, FILE *f);
void md_free(md_table *t);

/* room for out_dir (1023 characters), a slash and a file name */
#define OUT_PATH_MAX 1200

/* Creates out_dir when missing and checks that it is a writable folder. 0 or -1 (message printed). */
int out_prepare(const probe_opts *o);
/* out_dir/name into buf; creates out_dir when missing. 0 or -1 (message printed). */
int out_path(const probe_opts *o, const char *name, char *buf, size_t cap);
/* Opens out_dir/name.tmp for writing and puts out_dir/name into path; NULL on failure
   (message printed). Every file so opened is finished with out_close. */
FILE *out_open(const probe_opts *o, const char *name, char *path, size_t cap);
/* Closes f and renames its temporary over path: 0, or -1 when a write, the close or the
   rename failed (one line printed, the temporary removed, an earlier file at path kept). */
int out_close(FILE *f, const char *path);

/* Writes script to out_dir/<name>.gp and runs gnuplot on it; the script must set its output
   to '<name>.png', which appears only when gnuplot succeeded ("PNG: path" printed). 0 ok,
   1 skipped (no gnuplot or --no-plot), -1 failed (message printed: the run's exit is an
   error). */
int run_gnuplot(const probe_opts *o, const char *name, const char *script);

double now_seconds(void);
const char *estimator_label(grzo_estimator e);

/* ---- subcommands ------------------------------------------------------------------------------------- */
int probe_variance(const probe_opts *o);
int probe_cosine(const probe_opts *o);
int probe_quant(const probe_opts *o);
int probe_batch(const probe_opts *o);
int probe_ablation(const probe_opts *o);
int probe_alignment(const probe_opts *o);
int probe_variants(const probe_opts *o);

#endif /* GRZO_PROBE_H */
