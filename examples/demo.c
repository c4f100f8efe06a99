/* demo.c - train one small MLP with GRZO, MeZO and FZOO side by side, forward passes only.

   The program makes its own problem: a fixed random "teacher" MLP (16-32-32-4, tanh)
   labels random Gaussian inputs, and a "student" MLP (16-64-64-4, tanh, biases as
   GRZO_BLOCK_VECTOR blocks) learns to imitate it. The three estimators start from the
   same student weights, see the same examples in the same order (drawn with
   grzo_uniform_at from the block GRZO_USER_BLOCK and the step index), and share sigma
   and the seed. Each example is one row, so a GRZO pass forwards 2B rows (B "+" copies,
   then B "-" copies) and a MeZO or FZOO pass forwards B rows.

   Build (from the repository root):
     cc -std=c99 -O3 -march=native -fopenmp -DGRZO_USE_OPENBLAS -I. -Iexamples/common \
        -I/usr/include/x86_64-linux-gnu/openblas-openmp examples/demo.c examples/common/cli_args.c \
        -L/usr/lib/x86_64-linux-gnu/openblas-openmp \
        -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lm -o demo
   Run:  ./demo            (about 10 s on the 2-core dev machine)
         ./demo --quick    (a few seconds)
         ./demo --help

   The learning rates (DEFAULT_LR_*) come from a small sweep on this problem (10000 steps,
   seeds 1 and 2; GRZO and MeZO at x0.6, x1, x2 these values, FZOO at x0.5, x1, x1.5):
   x0.6 (x0.5) and x1 end within 0.01 test loss of each other, x1 gets there about twice
   as fast, the larger rates settle 0.01-0.05 higher, and MeZO blows up at x4. The update rules scale differently (GRZO normalizes the loss differences, MeZO
   does not, FZOO normalizes without the 1/(2 sigma)), so the three rates are not
   comparable numbers.

   What to expect: all three bring the loss from about 1.06 to about the level of the best
   affine least-squares fit (printed as a reference) within the default 10000 steps; FZOO
   gets a little further per step but forwards 4.5 times the rows per step. Zeroth-order
   methods need many more steps to learn the rest of the teacher's nonlinearity. */
#define _POSIX_C_SOURCE 200809L

#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cli_args.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- problem sizes ------------------------------------------------------------------- */
enum { D_IN = 16, D_HID = 64, D_OUT = 4, N_LAYERS = 3 };
enum { TEACHER_HID = 32 };
enum { N_TRAIN = 2048, N_TEST = 1024, EVAL_CHUNK = 512 };

/* user-side random streams, all in block GRZO_USER_BLOCK so they never collide with the
   streams grzo draws for its own blocks */
enum {
    STREAM_DATA_ORDER = 1,
    STREAM_TRAIN_X = 2,
    STREAM_TEST_X = 3,
    STREAM_TEACHER_W = 10,   /* + layer */
    STREAM_TEACHER_B = 20,   /* + layer */
    STREAM_STUDENT_W = 30    /* + layer */
};

/* defaults; see the header comment for how they were chosen */
#define DEFAULT_STEPS 10000
#define DEFAULT_QUICK_STEPS 1500
#define DEFAULT_BATCH 16
#define DEFAULT_SEED 1
/* One thread: every operation here takes microseconds, so OpenMP fork/join costs more
   than a second thread saves, and on a busy machine a descheduled thread stalls every
   barrier (measured on the 2-core dev machine under load: 8 s with 1 thread, 48 s with 2). */
#define DEFAULT_THREADS 1
#define DEFAULT_SIGMA 1e-3f
#define DEFAULT_LR_GRZO 5e-6f
#define DEFAULT_LR_MEZO 5e-4f
#define DEFAULT_LR_FZOO 2e-3f
#define DEFAULT_FZOO_PROBES 8
#define N_ESTIMATORS 3
#define TABLE_ROWS 20        /* about this many progress rows, whatever --steps is */

static const int layer_in[N_LAYERS] = { D_IN, D_HID, D_HID };
static const int layer_out[N_LAYERS] = { D_HID, D_HID, D_OUT };

/* ---- options ------------------------------------------------------------------------- */
typedef struct demo_options {
    int64_t steps;
    int64_t batch;
    uint64_t seed;
    int32_t threads;
    int quick;
    float sigma;
    float lr[N_ESTIMATORS];
} demo_options;

static const char *const estimator_names[N_ESTIMATORS] = { "GRZO", "MeZO", "FZOO" };
static const grzo_estimator estimator_ids[N_ESTIMATORS] = {
    GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO
};

static void print_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [options]\n"
            "Trains a 16-64-64-4 tanh MLP on a random teacher MLP's labels with GRZO, MeZO\n"
            "and FZOO side by side (same init, same data order) and prints their losses.\n"
            "\n"
            "  --steps N      training steps per estimator (default %d; %d with --quick)\n"
            "  --batch B      examples per step (default %d)\n"
            "  --seed S       seed of the data, the init and the perturbations (default %d)\n"
            "  --threads T    CPU backend threads, 0 = OpenMP default (default %d: the model\n"
            "                 is so small that more threads only add fork/join waits)\n"
            "  --sigma X      perturbation scale, shared by all estimators (default %g)\n"
            "  --lr-grzo X    learning rate of GRZO (default %g)\n"
            "  --lr-mezo X    learning rate of MeZO (default %g)\n"
            "  --lr-fzoo X    learning rate of FZOO (default %g)\n"
            "  --quick        short run of a few seconds (smoke test)\n"
            "  --help         this text\n",
            prog, DEFAULT_STEPS, DEFAULT_QUICK_STEPS, DEFAULT_BATCH, DEFAULT_SEED, DEFAULT_THREADS,
            (double)DEFAULT_SIGMA, (double)DEFAULT_LR_GRZO, (double)DEFAULT_LR_MEZO,
            (double)DEFAULT_LR_FZOO);
}

/* The value of option a (one that takes a value); 0 ok, else -1 with the message in err. */
static int parse_value(demo_options *opt, const char *a, const char *val, int64_t *steps, char *err, size_t n)
{
    static const cli_range unit = {0.0, 1.0, 1, 0};   /* sigma and learning rates: (0, 1] */
    int64_t v;
    if (strcmp(a, "--steps") == 0) return cli_parse_int(a, val, 1, 100000000, steps, err, n);
    if (strcmp(a, "--batch") == 0) return cli_parse_int(a, val, 1, 65536, &opt->batch, err, n);
    if (strcmp(a, "--seed") == 0) return cli_parse_u64(a, val, &opt->seed, err, n);
    if (strcmp(a, "--threads") == 0) {
        if (cli_parse_int(a, val, 0, 1024, &v, err, n) != 0) return -1;
        opt->threads = (int32_t)v;
        return 0;
    }
    return cli_parse_float(a, val, unit, strcmp(a, "--sigma") == 0     ? &opt->sigma
                                             : strcmp(a, "--lr-grzo") == 0 ? &opt->lr[0]
                                             : strcmp(a, "--lr-mezo") == 0 ? &opt->lr[1]
                                                                           : &opt->lr[2],
                           err, n);
}

/* returns 0 to run, 1 after --help, 2 on a bad argument (message printed) */
static int parse_options(int argc, char **argv, demo_options *opt)
{
    int64_t steps = -1;
    int i;
    char err[256];
    opt->batch = DEFAULT_BATCH;
    opt->seed = DEFAULT_SEED;
    opt->threads = DEFAULT_THREADS;
    opt->quick = 0;
    opt->sigma = DEFAULT_SIGMA;
    opt->lr[0] = DEFAULT_LR_GRZO;
    opt->lr[1] = DEFAULT_LR_MEZO;
    opt->lr[2] = DEFAULT_LR_FZOO;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        int takes_value = strcmp(a, "--steps") == 0 || strcmp(a, "--batch") == 0 ||
                          strcmp(a, "--seed") == 0 || strcmp(a, "--threads") == 0 ||
                          strcmp(a, "--sigma") == 0 || strcmp(a, "--lr-grzo") == 0 ||
                          strcmp(a, "--lr-mezo") == 0 || strcmp(a, "--lr-fzoo") == 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout, argv[0]);
            return 1;
        }
        if (strcmp(a, "--quick") == 0) {
            opt->quick = 1;
            continue;
        }
        if (!takes_value) {
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", argv[0], a);
            return 2;
        }
        if (val == NULL) {
            fprintf(stderr, "%s: option %s needs a value (try --help)\n", argv[0], a);
            return 2;
        }
        i++;
        if (parse_value(opt, a, val, &steps, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", argv[0], err);
            return 2;
        }
    }
    opt->steps = steps > 0 ? steps : (opt->quick ? DEFAULT_QUICK_STEPS : DEFAULT_STEPS);
    return 0;
}

/* grzo_cpu_desc.n_threads sizes grzo's own loops only; OpenBLAS's OpenMP build sizes its
   GEMMs by the OpenMP default instead. Setting that default too makes --threads T mean T
   threads everywhere (otherwise a "1-thread" run still has 2-thread GEMMs). */
static void use_threads_everywhere(int32_t threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

/* ---- small utilities ------------------------------------------------------------------- */
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* standard normal numbers from grzo's own counter-based RNG, so the demo's data depend
   only on the seed, never on the platform's rand() */
static void fill_gaussian(uint64_t seed, uint32_t stream, float scale, float *out, size_t n)
{
    grzo_noise noise;
    size_t i;
    memset(&noise, 0, sizeof noise);
    noise.seed = seed;
    noise.block = GRZO_USER_BLOCK;
    noise.stream = stream;
    noise.dist = GRZO_NOISE_GAUSSIAN;
    grzo_noise_fill(&noise, 0, n, out);
    for (i = 0; i < n; i++)
        out[i] *= scale;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fprintf(stderr, "demo: out of host memory\n");
        exit(1);
    }
    return p;
}

/* ---- the teacher and the data set (host memory) --------------------------------------- */
typedef struct dataset {
    int64_t n;
    float *x;   /* n x D_IN  */
    float *y;   /* n x D_OUT */
} dataset;

typedef struct teacher {
    float w1[TEACHER_HID * D_IN], b1[TEACHER_HID];
    float w2[TEACHER_HID * TEACHER_HID], b2[TEACHER_HID];
    float w3[D_OUT * TEACHER_HID], b3[D_OUT];
} teacher;

/* y = W x + b (optionally tanh) for one row; W is d_out x d_in row-major */
static void dense_row(const float *w, const float *b, const float *x, int d_in, int d_out,
                      int apply_tanh, float *y)
{
    int j, k;
    for (j = 0; j < d_out; j++) {
        double acc = b[j];
        for (k = 0; k < d_in; k++)
            acc += (double)w[j * d_in + k] * x[k];
        y[j] = apply_tanh ? (float)tanh(acc) : (float)acc;
    }
}

static void teacher_init(uint64_t seed, teacher *t)
{
    /* gain 2 keeps the teacher clearly nonlinear (tanh inputs of order 1-2), so a linear
       fit cannot solve the task */
    fill_gaussian(seed, STREAM_TEACHER_W + 0, 2.0f / sqrtf((float)D_IN), t->w1, TEACHER_HID * D_IN);
    fill_gaussian(seed, STREAM_TEACHER_W + 1, 2.0f / sqrtf((float)TEACHER_HID), t->w2, TEACHER_HID * TEACHER_HID);
    fill_gaussian(seed, STREAM_TEACHER_W + 2, 1.0f / sqrtf((float)TEACHER_HID), t->w3, D_OUT * TEACHER_HID);
    fill_gaussian(seed, STREAM_TEACHER_B + 0, 0.5f, t->b1, TEACHER_HID);
    fill_gaussian(seed, STREAM_TEACHER_B + 1, 0.5f, t->b2, TEACHER_HID);
    fill_gaussian(seed, STREAM_TEACHER_B + 2, 0.5f, t->b3, D_OUT);
}

static void teacher_label(const teacher *t, dataset *d)
{
    float h1[TEACHER_HID], h2[TEACHER_HID];
    int64_t i;
    for (i = 0; i < d->n; i++) {
        dense_row(t->w1, t->b1, d->x + i * D_IN, D_IN, TEACHER_HID, 1, h1);
        dense_row(t->w2, t->b2, h1, TEACHER_HID, TEACHER_HID, 1, h2);
        dense_row(t->w3, t->b3, h2, TEACHER_HID, D_OUT, 0, d->y + i * D_OUT);
    }
}

/* standardizes every output column with the training set's mean and std, so that the
   loss of always predicting 0 is about 1 on both sets: a scale to read the table by */
static void standardize_targets(dataset *train, dataset *test)
{
    int j;
    for (j = 0; j < D_OUT; j++) {
        double mean = 0.0, var = 0.0, inv;
        int64_t i;
        for (i = 0; i < train->n; i++)
            mean += train->y[i * D_OUT + j];
        mean /= (double)train->n;
        for (i = 0; i < train->n; i++) {
            double d = train->y[i * D_OUT + j] - mean;
            var += d * d;
        }
        inv = 1.0 / sqrt(var / (double)train->n + 1e-12);
        for (i = 0; i < train->n; i++)
            train->y[i * D_OUT + j] = (float)((train->y[i * D_OUT + j] - mean) * inv);
        for (i = 0; i < test->n; i++)
            test->y[i * D_OUT + j] = (float)((test->y[i * D_OUT + j] - mean) * inv);
    }
}

static void dataset_make(uint64_t seed, uint32_t stream, int64_t n, const teacher *t, dataset *d)
{
    d->n = n;
    d->x = xcalloc((size_t)n * D_IN, sizeof(float));
    d->y = xcalloc((size_t)n * D_OUT, sizeof(float));
    fill_gaussian(seed, stream, 1.0f, d->x, (size_t)n * D_IN);
    teacher_label(t, d);
}

static void dataset_free(dataset *d)
{
    free(d->x);
    free(d->y);
}

/* mean squared error of one row, averaged over the outputs */
static float row_mse(const float *pred, const float *target)
{
    float s = 0.0f;
    int j;
    for (j = 0; j < D_OUT; j++) {
        float d = pred[j] - target[j];
        s += d * d;
    }
    return s / (float)D_OUT;
}

/* Test loss of the best affine model y = A x + c fitted to the training set by least
   squares (normal equations, Gauss-Jordan in double). A reference point: a student that
   beats it has learned some of the teacher's nonlinearity. Returns -1 if singular. */
static double linear_baseline_test_loss(const dataset *train, const dataset *test)
{
    enum { P = D_IN + 1 };   /* inputs plus the constant 1 */
    double g[P][P + D_OUT];  /* [X^T X | X^T Y], reduced in place to [I | coefficients] */
    double sum = 0.0;
    int64_t i;
    int a, b, col;
    memset(g, 0, sizeof g);
    for (i = 0; i < train->n; i++) {
        double f[P];
        for (a = 0; a < D_IN; a++) f[a] = train->x[i * D_IN + a];
        f[D_IN] = 1.0;
        for (a = 0; a < P; a++) {
            for (b = 0; b < P; b++) g[a][b] += f[a] * f[b];
            for (b = 0; b < D_OUT; b++) g[a][P + b] += f[a] * train->y[i * D_OUT + b];
        }
    }
    for (col = 0; col < P; col++) {   /* X^T X is symmetric positive definite: no pivoting */
        double piv = g[col][col];
        if (!(fabs(piv) > 1e-12))
            return -1.0;
        for (b = 0; b < P + D_OUT; b++) g[col][b] /= piv;
        for (a = 0; a < P; a++) {
            double f = g[a][col];
            if (a == col || f == 0.0) continue;
            for (b = 0; b < P + D_OUT; b++) g[a][b] -= f * g[col][b];
        }
    }
    for (i = 0; i < test->n; i++) {
        float pred[D_OUT];
        for (b = 0; b < D_OUT; b++) {
            double acc = g[D_IN][P + b];
            for (a = 0; a < D_IN; a++) acc += g[a][P + b] * test->x[i * D_IN + a];
            pred[b] = (float)acc;
        }
        sum += row_mse(pred, test->y + i * D_OUT);
    }
    return sum / (double)test->n;
}

/* ---- one student: its own context, parameters and activations ---------------------- */
typedef struct student {
    const char *name;
    const grzo_backend *be;
    grzo_ctx *ctx;
    grzo_block w[N_LAYERS], b[N_LAYERS];
    float *w_data[N_LAYERS], *b_data[N_LAYERS];   /* backend memory */
    float *x, *lin, *hid[2], *out;                 /* backend memory, capacity rows each */
    int64_t capacity;
    const dataset *train;
    const int64_t *batch;      /* training row of each example of the current step */
    int64_t batch_size;
    double train_seconds;
    int64_t forward_rows;      /* rows forwarded while training, for the table */
    int64_t diverged_at;       /* step whose losses were not finite, or -1 */
} student;

/* prints a failed grzo call with the context's explanation and returns the status */
static grzo_status report_failure(const student *s, const char *what, grzo_status st)
{
    fprintf(stderr, "demo: %s%s%s failed: %s (%s)\n", s ? s->name : "", s ? ": " : "", what,
            grzo_status_str(st), s && s->ctx ? grzo_last_error(s->ctx) : "no context");
    return st;
}

#define TRY(s, call)                                              \
    do {                                                          \
        grzo_status st_ = (call);                                 \
        if (st_ != GRZO_OK) return report_failure((s), #call, st_); \
    } while (0)

static grzo_status alloc_floats(const grzo_backend *be, size_t n, float **out)
{
    void *p = NULL;
    grzo_status st = grzo_backend_alloc(be, n * sizeof(float), &p);
    *out = (float *)p;
    return st;
}

static grzo_status student_alloc_activations(student *s, int64_t capacity)
{
    size_t rows = (size_t)capacity;
    s->capacity = capacity;
    TRY(s, alloc_floats(s->be, rows * D_IN, &s->x));
    TRY(s, alloc_floats(s->be, rows * D_HID, &s->lin));
    TRY(s, alloc_floats(s->be, rows * D_HID, &s->hid[0]));
    TRY(s, alloc_floats(s->be, rows * D_HID, &s->hid[1]));
    TRY(s, alloc_floats(s->be, rows * D_OUT, &s->out));
    return GRZO_OK;
}

/* registers the student's weights (a copy of init_w, zero biases) as grzo blocks */
static grzo_status student_add_blocks(student *s, float *const init_w[N_LAYERS])
{
    static const char *const w_names[N_LAYERS] = { "fc1.weight", "fc2.weight", "fc3.weight" };
    static const char *const b_names[N_LAYERS] = { "fc1.bias", "fc2.bias", "fc3.bias" };
    int l;
    for (l = 0; l < N_LAYERS; l++) {
        grzo_block_desc bd;
        size_t nw = (size_t)layer_out[l] * (size_t)layer_in[l];
        TRY(s, alloc_floats(s->be, nw, &s->w_data[l]));
        TRY(s, alloc_floats(s->be, (size_t)layer_out[l], &s->b_data[l]));   /* zero-filled */
        TRY(s, grzo_backend_upload(s->be, s->w_data[l], init_w[l], nw * sizeof(float)));

        memset(&bd, 0, sizeof bd);
        bd.kind = GRZO_BLOCK_MATRIX;
        bd.rows = layer_out[l];
        bd.cols = layer_in[l];
        bd.data = s->w_data[l];
        bd.name = w_names[l];
        TRY(s, grzo_block_add(s->ctx, &bd, &s->w[l]));

        memset(&bd, 0, sizeof bd);
        bd.kind = GRZO_BLOCK_VECTOR;
        bd.rows = layer_out[l];
        bd.cols = 1;
        bd.data = s->b_data[l];
        bd.name = b_names[l];
        TRY(s, grzo_block_add(s->ctx, &bd, &s->b[l]));
    }
    return GRZO_OK;
}

static grzo_status student_create(student *s, const char *name, grzo_estimator estimator,
                                  float lr, const demo_options *opt, grzo_backend *be,
                                  float *const init_w[N_LAYERS], const dataset *train)
{
    grzo_desc desc;
    grzo_status st;
    memset(s, 0, sizeof *s);
    s->name = name;
    s->be = be;
    s->train = train;
    s->diverged_at = -1;
    s->batch_size = opt->batch;

    memset(&desc, 0, sizeof desc);
    desc.backend = be;
    desc.estimator = estimator;
    desc.seed = opt->seed;          /* same seed for all: same RNG streams where they overlap */
    desc.lr = lr;
    desc.sigma = opt->sigma;
    desc.fzoo_probes = DEFAULT_FZOO_PROBES;
    st = grzo_create(&desc, &s->ctx);
    if (st != GRZO_OK) {
        fprintf(stderr, "demo: %s: grzo_create failed: %s\n", name, grzo_status_str(st));
        return st;
    }
    TRY(s, student_add_blocks(s, init_w));
    /* the largest forward is an evaluation chunk or a GRZO pass of 2B rows */
    return student_alloc_activations(s, opt->batch * 2 > EVAL_CHUNK ? opt->batch * 2 : EVAL_CHUNK);
}

static void student_destroy(student *s)
{
    int l;
    float *bufs[5];
    if (s->be == NULL)
        return;
    bufs[0] = s->x; bufs[1] = s->lin; bufs[2] = s->hid[0]; bufs[3] = s->hid[1]; bufs[4] = s->out;
    grzo_destroy(s->ctx);   /* before the memory its blocks point to */
    for (l = 0; l < 5; l++)
        if (bufs[l]) grzo_backend_free(s->be, bufs[l]);
    for (l = 0; l < N_LAYERS; l++) {
        if (s->w_data[l]) grzo_backend_free(s->be, s->w_data[l]);
        if (s->b_data[l]) grzo_backend_free(s->be, s->b_data[l]);
    }
    memset(s, 0, sizeof *s);
}

/* forward of n rows already in s->x, result in s->out. Inside a pass every grzo op adds
   each row's perturbation (the pass's segments split the n rows evenly: 1 row per copy);
   outside a step the same calls are plain, which is how the model is evaluated. */
static grzo_status student_forward(student *s, int64_t n)
{
    const float *in = s->x;
    grzo_rows rows;
    int l;
    rows.n_rows = n;
    rows.offsets = NULL;
    for (l = 0; l < N_LAYERS; l++) {
        float *dst = (l == N_LAYERS - 1) ? s->out : s->hid[l & 1];
        TRY(s, grzo_linear(s->ctx, s->w[l], in, s->lin, &rows));
        TRY(s, grzo_vector(s->ctx, s->b[l], GRZO_VECTOR_ADD, s->lin, dst, &rows));
        if (l < N_LAYERS - 1) {
            size_t i, count = (size_t)n * (size_t)layer_out[l];
            for (i = 0; i < count; i++)   /* CPU backend: backend memory is host memory */
                dst[i] = tanhf(dst[i]);
        }
        in = dst;
    }
    return GRZO_OK;
}

/* grzo_forward_fn: copy c of the pass reads example pass->example[c] of the batch */
static grzo_status forward_pass(grzo_ctx *ctx, const grzo_pass_info *pass, float *losses,
                                void *user_data)
{
    student *s = (student *)user_data;
    int64_t c, n = pass->n_segments;
    (void)ctx;
    for (c = 0; c < n; c++) {
        int64_t row = s->batch[pass->example[c]];
        memcpy(s->x + c * D_IN, s->train->x + row * D_IN, D_IN * sizeof(float));
    }
    {
        grzo_status st = student_forward(s, n);
        if (st != GRZO_OK)
            return st;
    }
    for (c = 0; c < n; c++) {
        int64_t row = s->batch[pass->example[c]];
        losses[c] = row_mse(s->out + c * D_OUT, s->train->y + row * D_OUT);
    }
    s->forward_rows += n;
    return GRZO_OK;
}

/* plain (unperturbed) mean loss over a whole data set */
static grzo_status student_evaluate(student *s, const dataset *d, double *mse)
{
    double sum = 0.0;
    int64_t first;
    for (first = 0; first < d->n; first += EVAL_CHUNK) {
        int64_t i, n = d->n - first < EVAL_CHUNK ? d->n - first : EVAL_CHUNK;
        memcpy(s->x, d->x + first * D_IN, (size_t)n * D_IN * sizeof(float));
        TRY(s, student_forward(s, n));
        for (i = 0; i < n; i++)
            sum += row_mse(s->out + i * D_OUT, d->y + (first + i) * D_OUT);
    }
    *mse = sum / (double)d->n;
    return GRZO_OK;
}

/* one training step; a non-finite loss is a divergence of this estimator (grzo has left
   its parameters untouched), not an error of the program, so it stops only this one */
static grzo_status student_train_step(student *s, int64_t step)
{
    grzo_step_report rep;
    grzo_status st;
    double t0;
    if (s->diverged_at >= 0)
        return GRZO_OK;
    t0 = now_seconds();
    st = grzo_step(s->ctx, s->batch_size, forward_pass, s, &rep);
    s->train_seconds += now_seconds() - t0;
    if (st == GRZO_ERR_NONFINITE) {
        s->diverged_at = step;
        fprintf(stderr, "demo: %s: non-finite loss at step %lld; stopping this estimator "
                        "(lower its learning rate)\n", s->name, (long long)step);
        return GRZO_OK;
    }
    if (st != GRZO_OK)
        return report_failure(s, "grzo_step", st);
    return GRZO_OK;
}

/* ---- the training run ------------------------------------------------------------------ */

/* the same examples for every estimator: a pure function of (seed, step, position) */
static void draw_batch(uint64_t seed, int64_t step, int64_t batch, int64_t n_train, int64_t *rows)
{
    int64_t i;
    for (i = 0; i < batch; i++) {
        double u = grzo_uniform_at(seed, (uint32_t)step, GRZO_USER_BLOCK, STREAM_DATA_ORDER,
                                   (uint64_t)i);
        int64_t r = (int64_t)(u * (double)n_train);
        rows[i] = r < n_train ? r : n_train - 1;
    }
}

/* He-style scale 1/sqrt(fan_in) for tanh; the same draw initializes all three students */
static void make_student_init(uint64_t seed, float *init_w[N_LAYERS])
{
    int l;
    for (l = 0; l < N_LAYERS; l++) {
        size_t n = (size_t)layer_out[l] * (size_t)layer_in[l];
        init_w[l] = xcalloc(n, sizeof(float));
        fill_gaussian(seed, STREAM_STUDENT_W + (uint32_t)l, 1.0f / sqrtf((float)layer_in[l]),
                      init_w[l], n);
    }
}

static int64_t parameter_count(void)
{
    int64_t n = 0;
    int l;
    for (l = 0; l < N_LAYERS; l++)
        n += (int64_t)layer_out[l] * layer_in[l] + layer_out[l];
    return n;
}

/* one progress row: full training-set loss of every estimator, evaluated outside a step */
static grzo_status print_progress_row(student *st, int64_t steps_done, const dataset *train)
{
    int e;
    printf("| %6lld |", (long long)steps_done);
    for (e = 0; e < N_ESTIMATORS; e++) {
        double mse;
        grzo_status s = student_evaluate(&st[e], train, &mse);
        if (s != GRZO_OK)
            return s;
        if (st[e].diverged_at >= 0 && st[e].diverged_at < steps_done)
            printf(" %10s |", "diverged");
        else
            printf(" %10.4f |", mse);
    }
    printf("\n");
    fflush(stdout);
    return GRZO_OK;
}

static int64_t progress_interval(int64_t steps)
{
    int64_t every = steps / TABLE_ROWS;
    return every < 1 ? 1 : every;
}

static grzo_status print_final_table(student *st, const dataset *train, const dataset *test,
                                     int64_t steps)
{
    int e;
    printf("\n| estimator | lr | rows forwarded/step | final train loss | final test loss | "
           "train wall time | ms/step |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (e = 0; e < N_ESTIMATORS; e++) {
        double tr, te;
        grzo_desc d;
        /* a diverged estimator also ran the step whose losses were not finite */
        int64_t done = st[e].diverged_at >= 0 ? st[e].diverged_at + 1 : steps;
        grzo_status s = student_evaluate(&st[e], train, &tr);
        if (s == GRZO_OK) s = student_evaluate(&st[e], test, &te);
        if (s == GRZO_OK) s = grzo_get_desc(st[e].ctx, &d);
        if (s != GRZO_OK)
            return report_failure(&st[e], "final evaluation", s);
        printf("| %s | %.3g | %lld | %.4f | %.4f | %.2f s | %.3f |%s\n", st[e].name,
               (double)d.lr, done > 0 ? (long long)(st[e].forward_rows / done) : 0LL, tr, te,
               st[e].train_seconds, done > 0 ? 1e3 * st[e].train_seconds / (double)done : 0.0,
               st[e].diverged_at >= 0 ? " diverged" : "");
    }
    return GRZO_OK;
}

static grzo_status create_cpu_backend(int32_t threads, grzo_backend *be)
{
    grzo_cpu_desc cd;
    grzo_backend_caps caps;
    grzo_status st;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = threads;
    st = grzo_backend_cpu_create(&cd, be);
    if (st != GRZO_OK) {
        fprintf(stderr, "demo: grzo_backend_cpu_create failed: %s\n", grzo_status_str(st));
        return st;
    }
    st = grzo_backend_query(be, &caps);
    if (st != GRZO_OK) {
        fprintf(stderr, "demo: grzo_backend_query failed: %s\n", grzo_status_str(st));
        return st;
    }
    if (caps.device_memory) {   /* tanh and the losses are computed on the host here */
        fprintf(stderr, "demo: the backend's memory is not host memory; this demo needs the CPU backend\n");
        return GRZO_ERR_UNSUPPORTED;
    }
    return GRZO_OK;
}

static void print_header(const demo_options *opt, const grzo_backend *be, double init_train,
                         double init_test, double linear_test)
{
    grzo_backend_caps caps;
    memset(&caps, 0, sizeof caps);
    (void)grzo_backend_query(be, &caps);
    printf("grzo %s demo: student MLP %d-%d-%d-%d (tanh, %lld parameters) imitating a fixed "
           "random teacher MLP %d-%d-%d-%d\n",
           grzo_version(), D_IN, D_HID, D_HID, D_OUT, (long long)parameter_count(), D_IN,
           TEACHER_HID, TEACHER_HID, D_OUT);
    printf("data: %d train / %d test examples (1 row each), targets standardized: predicting 0 "
           "scores about 1.0, the best affine fit (least squares) %.4f on the test set\n",
           N_TRAIN, N_TEST, linear_test);
    printf("run: %lld steps, batch %lld, sigma %g, seed %llu, backend %s with %d threads; "
           "FZOO uses %d probes\n",
           (long long)opt->steps, (long long)opt->batch, (double)opt->sigma,
           (unsigned long long)opt->seed, be->iface->name, (int)caps.n_threads, DEFAULT_FZOO_PROBES);
    printf("same init and data order for all three: initial train loss %.4f, test loss %.4f\n\n",
           init_train, init_test);
    printf("train-set loss (mean squared error), evaluated without perturbation:\n\n");
    printf("| %6s | %10s | %10s | %10s |\n", "step", estimator_names[0], estimator_names[1],
           estimator_names[2]);
    printf("|-------:|-----------:|-----------:|-----------:|\n");
}

static int run_demo(const demo_options *opt)
{
    grzo_backend be;
    student st[N_ESTIMATORS];
    dataset train, test;
    teacher *t;
    float *init_w[N_LAYERS];
    int64_t *batch_rows, step, every;
    double init_train, init_test, linear_test, t_start;
    int e, l, rc = 1;

    memset(st, 0, sizeof st);
    if (create_cpu_backend(opt->threads, &be) != GRZO_OK)
        return 1;

    t = xcalloc(1, sizeof *t);
    teacher_init(opt->seed, t);
    dataset_make(opt->seed, STREAM_TRAIN_X, N_TRAIN, t, &train);
    dataset_make(opt->seed, STREAM_TEST_X, N_TEST, t, &test);
    standardize_targets(&train, &test);
    make_student_init(opt->seed, init_w);
    batch_rows = xcalloc((size_t)opt->batch, sizeof(int64_t));

    for (e = 0; e < N_ESTIMATORS; e++) {
        if (student_create(&st[e], estimator_names[e], estimator_ids[e], opt->lr[e], opt, &be,
                           init_w, &train) != GRZO_OK)
            goto done;
        st[e].batch = batch_rows;
    }
    if (student_evaluate(&st[0], &train, &init_train) != GRZO_OK ||
        student_evaluate(&st[0], &test, &init_test) != GRZO_OK)
        goto done;
    linear_test = linear_baseline_test_loss(&train, &test);
    print_header(opt, &be, init_train, init_test, linear_test);

    t_start = now_seconds();
    every = progress_interval(opt->steps);
    for (step = 0; step < opt->steps; step++) {
        if (step % every == 0 && print_progress_row(st, step, &train) != GRZO_OK)
            goto done;
        draw_batch(opt->seed, step, opt->batch, train.n, batch_rows);
        for (e = 0; e < N_ESTIMATORS; e++)
            if (student_train_step(&st[e], step) != GRZO_OK)
                goto done;
    }
    if (print_progress_row(st, opt->steps, &train) != GRZO_OK ||
        print_final_table(st, &train, &test, opt->steps) != GRZO_OK)
        goto done;
    printf("\nreference: the best affine fit scores %.4f on the test set. GRZO forwards 2B rows "
           "per step, MeZO 2 x B, FZOO (N+1) x B. Total wall time %.1f s (training and "
           "evaluation).\n", linear_test, now_seconds() - t_start);
    rc = 0;

done:
    for (e = 0; e < N_ESTIMATORS; e++)
        student_destroy(&st[e]);
    grzo_backend_destroy(&be);
    for (l = 0; l < N_LAYERS; l++)
        free(init_w[l]);
    free(batch_rows);
    dataset_free(&train);
    dataset_free(&test);
    free(t);
    return rc;
}

int main(int argc, char **argv)
{
    demo_options opt;
    int parsed = parse_options(argc, argv, &opt);
    if (parsed == 1)
        return 0;
    if (parsed != 0)
        return 2;
    use_threads_everywhere(opt.threads);
    return run_demo(&opt);
}
