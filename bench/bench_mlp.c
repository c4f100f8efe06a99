/* bench_mlp.c - CPU timing and memory of GRZO vs MeZO vs FZOO on a 4-layer MLP.

   Model: 4 linear layers of width x width (default 1024), each followed by a bias
   (GRZO_BLOCK_VECTOR, GRZO_VECTOR_ADD) and ReLU except the last; loss = mean squared
   error against a fixed random target, one loss per example copy. B = 16 examples of
   T = 64 rows each, so a GRZO pass forwards 2 * 16 * 64 = 2048 rows (B "+" copies, then
   B "-" copies), a MeZO or FZOO pass 1024 rows.

   It prints, as markdown tables:
   (a) one fused GRZO linear (1024x1024 block, 2048 rows, inside a GRZO pass, "+" and "-"
       copies with different inputs as after the first layer) against a plain linear of the
       same rows (grzo_linear outside a step), for the backend's automatic choice and for
       each forced algorithm (grzo_cpu_desc.linear_algo);
   (b) the time of a whole training step (forward passes, losses, update) of GRZO, MeZO and
       FZOO (N = 8 probes), and of one plain forward over the same 2B examples;
   (c) the peak resident memory of one training step of each estimator against a
       forward-only pass, each measured in a fresh child process (this program re-executed
       with --mem-child) so that the peaks of different modes cannot mix.

   Timing on a noisy shared machine: A and B are timed in the same process, interleaved
   round by round (the order rotates every round), and we report the median of the
   per-round ratios with its 10th and 90th percentiles, not a ratio of means.

   Build (from the repository root):
     cc -std=c99 -O3 -march=native -fopenmp -DGRZO_USE_OPENBLAS -I. -Iexamples/common \
        -I/usr/include/x86_64-linux-gnu/openblas-openmp bench/bench_mlp.c examples/common/cli_args.c \
        -L/usr/lib/x86_64-linux-gnu/openblas-openmp \
        -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lm -o bench_mlp
   Run:  ./bench_mlp [--rounds N] [--threads T] [--group-copies G] [--quick] */
#define _POSIX_C_SOURCE 200809L

#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cli_args.h"
#include "cpu_env.h"
#include "bench_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <unistd.h>

#ifdef GRZO_USE_OPENBLAS
char *openblas_get_config(void);   /* declared by OpenBLAS's cblas.h; named here to print it */
#endif

#define MAX_LAYERS 8
#define DEFAULT_ROUNDS 15
#define QUICK_ROUNDS 3

/* ---- configuration ------------------------------------------------------------------- */
typedef struct bench_config {
    int64_t width;            /* d_in = d_out of every layer */
    int64_t layers;
    int64_t batch;            /* B */
    int64_t rows_per_example; /* T */
    int32_t fzoo_probes;      /* N */
    int32_t rounds;
    int32_t threads;          /* 0 = OpenMP default */
    int64_t group_copies;     /* copies the model's forward runs through its layers at a time */
    int quick;
    const char *mem_child;    /* non-NULL: run as a memory-measuring child in this mode */
} bench_config;

static void print_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [--rounds N] [--threads T] [--group-copies G] [--quick]\n"
            "Times GRZO vs MeZO vs FZOO on a 4-layer MLP (width 1024, B = 16, T = 64) with the\n"
            "CPU backend and prints markdown tables.\n"
            "  --rounds N   interleaved timing rounds (default %d, %d with --quick)\n"
            "  --threads T  CPU backend threads, 0 = OpenMP default (default 0)\n"
            "  --group-copies G  the model's forward runs G example copies at a time through\n"
            "               all its layers (default B, a MeZO pass; 0 = a whole pass at once)\n"
            "  --quick      tiny sizes, a smoke test of a few seconds\n"
            "  --help       this text\n",
            prog, DEFAULT_ROUNDS, QUICK_ROUNDS);
}

/* returns 0 to run, 1 after --help, 2 on a bad argument (message printed) */
static int parse_options(int argc, char **argv, bench_config *cfg)
{
    int64_t rounds = -1, group = -1, v;
    int i;
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout, argv[0]);
            return 1;
        } else if (strcmp(a, "--quick") == 0) {
            cfg->quick = 1;
        } else if (strcmp(a, "--rounds") == 0 || strcmp(a, "--threads") == 0 ||
                   strcmp(a, "--group-copies") == 0 || strcmp(a, "--mem-child") == 0) {
            if (val == NULL) {
                fprintf(stderr, "%s: option %s needs a value (try --help)\n", argv[0], a);
                return 2;
            }
            i++;
            if (strcmp(a, "--mem-child") == 0) {
                cfg->mem_child = val;
            } else if (strcmp(a, "--rounds") == 0) {
                if (cli_parse_int(a, val, 1, 100000, &rounds, err, sizeof err) != 0) {
                    fprintf(stderr, "%s: %s\n", argv[0], err);
                    return 2;
                }
            } else if (strcmp(a, "--group-copies") == 0) {
                if (cli_parse_int(a, val, 0, 4096, &group, err, sizeof err) != 0) {
                    fprintf(stderr, "%s: %s\n", argv[0], err);
                    return 2;
                }
            } else {
                if (cli_parse_int(a, val, 0, 1024, &v, err, sizeof err) != 0) {
                    fprintf(stderr, "%s: %s\n", argv[0], err);
                    return 2;
                }
                cfg->threads = (int32_t)v;
            }
        } else {
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", argv[0], a);
            return 2;
        }
    }
    if (cfg->quick) {
        cfg->width = 128;
        cfg->layers = 4;
        cfg->batch = 4;
        cfg->rows_per_example = 8;
        cfg->fzoo_probes = 4;
    } else {
        cfg->width = 1024;
        cfg->layers = 4;
        cfg->batch = 16;
        cfg->rows_per_example = 64;
        cfg->fzoo_probes = 8;
    }
    cfg->rounds = (int32_t)(rounds > 0 ? rounds : (cfg->quick ? QUICK_ROUNDS : DEFAULT_ROUNDS));
    /* 0: a whole pass at once (4096: more copies than any pass holds, 2B at most) */
    cfg->group_copies = group < 0 ? cfg->batch : group == 0 ? 4096 : group;
    return 0;
}

/* ---- small utilities ------------------------------------------------------------------- */
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

static grzo_status fail(grzo_ctx *ctx, const char *what, grzo_status st)
{
    fprintf(stderr, "bench_mlp: %s failed: %s (%s)\n", what, grzo_status_str(st),
            ctx ? grzo_last_error(ctx) : "no context");
    return st;
}

#define TRY(ctx, call)                                            \
    do {                                                          \
        grzo_status st_ = (call);                                 \
        if (st_ != GRZO_OK) return fail((ctx), #call, st_);       \
    } while (0)

static grzo_status alloc_floats(const grzo_backend *be, size_t n, float **out)
{
    void *p = NULL;
    grzo_status st = grzo_backend_alloc(be, n * sizeof(float), &p);
    *out = (float *)p;
    return st;
}

static grzo_status make_backend(int32_t threads, int algo, grzo_backend *be)
{
    grzo_cpu_desc cd;
    grzo_backend_caps caps;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = threads;
    cd.linear_algo = algo;
    TRY(NULL, grzo_backend_cpu_create(&cd, be));
    TRY(NULL, grzo_backend_query(be, &caps));
    if (caps.device_memory) {   /* ReLU and the losses run on the host here */
        fprintf(stderr, "bench_mlp: the backend's memory is not host memory\n");
        return GRZO_ERR_UNSUPPORTED;
    }
    return GRZO_OK;
}

static grzo_status make_ctx(grzo_backend *be, grzo_estimator est, int32_t fzoo_probes,
                            grzo_ctx **ctx)
{
    grzo_desc d;
    memset(&d, 0, sizeof d);
    d.backend = be;
    d.estimator = est;
    d.seed = 42;
    d.lr = 1e-9f;    /* tiny: the update is computed in full but the weights barely move */
    d.sigma = 1e-3f;
    d.fzoo_probes = fzoo_probes;
    TRY(NULL, grzo_create(&d, ctx));
    return GRZO_OK;
}

/* ---- the benchmark model ----------------------------------------------------------------- */
typedef struct mlp {
    const bench_config *cfg;
    const grzo_backend *be;
    grzo_ctx *ctx;
    grzo_block w[MAX_LAYERS], b[MAX_LAYERS];
    float *w_data[MAX_LAYERS], *b_data[MAX_LAYERS];
    float *examples;          /* B*T x width: example e is rows [e*T, (e+1)*T) */
    float *target;            /* B*T x width, same layout */
    float *x, *lin, *act;     /* capacity rows x width each: one group of copies */
    int64_t capacity;
    double forward_seconds;   /* time inside the forward callback during the last step */
    double linear_seconds;    /* of which inside grzo_linear (reset with it) */
} mlp;

/* The rows of the model's buffers: a group of copies, or all the copies a forward of this
   model runs (max_copies) if fewer */
static int64_t group_rows(const bench_config *cfg, int64_t max_copies)
{
    return (cfg->group_copies < max_copies ? cfg->group_copies : max_copies) * cfg->rows_per_example;
}

static grzo_status mlp_create(mlp *m, const bench_config *cfg, grzo_backend *be,
                              grzo_estimator est, int64_t capacity)
{
    size_t wn = (size_t)(cfg->width * cfg->width), rows_b = (size_t)(cfg->batch * cfg->rows_per_example);
    int64_t l;
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->be = be;
    m->capacity = capacity;
    TRY(NULL, make_ctx(be, est, cfg->fzoo_probes, &m->ctx));
    for (l = 0; l < cfg->layers; l++) {
        grzo_block_desc bd;
        TRY(m->ctx, alloc_floats(be, wn, &m->w_data[l]));
        TRY(m->ctx, alloc_floats(be, (size_t)cfg->width, &m->b_data[l]));
        /* 1/sqrt(width) keeps the ReLU activations of order 1 through the depth; the same
           values in every model of the run */
        fill_gaussian(7, (uint32_t)(100 + l), 1.0f / sqrtf((float)cfg->width), m->w_data[l], wn);
        fill_gaussian(7, (uint32_t)(200 + l), 0.1f, m->b_data[l], (size_t)cfg->width);
        memset(&bd, 0, sizeof bd);
        bd.kind = GRZO_BLOCK_MATRIX;
        bd.rows = cfg->width;
        bd.cols = cfg->width;
        bd.data = m->w_data[l];
        TRY(m->ctx, grzo_block_add(m->ctx, &bd, &m->w[l]));
        memset(&bd, 0, sizeof bd);
        bd.kind = GRZO_BLOCK_VECTOR;
        bd.rows = cfg->width;
        bd.cols = 1;
        bd.data = m->b_data[l];
        TRY(m->ctx, grzo_block_add(m->ctx, &bd, &m->b[l]));
    }
    TRY(m->ctx, alloc_floats(be, rows_b * (size_t)cfg->width, &m->examples));
    TRY(m->ctx, alloc_floats(be, rows_b * (size_t)cfg->width, &m->target));
    fill_gaussian(7, 300, 1.0f, m->examples, rows_b * (size_t)cfg->width);
    fill_gaussian(7, 301, 1.0f, m->target, rows_b * (size_t)cfg->width);
    TRY(m->ctx, alloc_floats(be, (size_t)capacity * (size_t)cfg->width, &m->x));
    TRY(m->ctx, alloc_floats(be, (size_t)capacity * (size_t)cfg->width, &m->lin));
    TRY(m->ctx, alloc_floats(be, (size_t)capacity * (size_t)cfg->width, &m->act));
    return GRZO_OK;
}

static void mlp_destroy(mlp *m)
{
    int64_t l;
    if (m->be == NULL)
        return;
    if (m->ctx)
        grzo_destroy(m->ctx);
    for (l = 0; l < m->cfg->layers; l++) {
        if (m->w_data[l]) grzo_backend_free(m->be, m->w_data[l]);
        if (m->b_data[l]) grzo_backend_free(m->be, m->b_data[l]);
    }
    if (m->examples) grzo_backend_free(m->be, m->examples);
    if (m->target) grzo_backend_free(m->be, m->target);
    if (m->x) grzo_backend_free(m->be, m->x);
    if (m->lin) grzo_backend_free(m->be, m->lin);
    if (m->act) grzo_backend_free(m->be, m->act);
    memset(m, 0, sizeof *m);
}

/* Copies example example_of[c] into the rows of copy c - c0 of x (T rows each), c in
   [c0, c0 + n). */
static void mlp_gather(mlp *m, const int64_t *example_of, int64_t c0, int64_t n)
{
    size_t rows = (size_t)m->cfg->rows_per_example, w = (size_t)m->cfg->width;
    int64_t c;
    for (c = c0; c < c0 + n; c++)
        memcpy(m->x + (size_t)(c - c0) * rows * w, m->examples + (size_t)example_of[c] * rows * w,
               rows * w * sizeof(float));
}

/* mean squared error of each copy's T rows (copy c at row (c - c0) T of out) against its
   example's target, into losses[c] */
static void mlp_losses(const mlp *m, const float *out, const int64_t *example_of, int64_t c0, int64_t n,
                       float *losses)
{
    size_t rows = (size_t)m->cfg->rows_per_example, w = (size_t)m->cfg->width, i;
    int64_t c;
    for (c = c0; c < c0 + n; c++) {
        const float *y = out + (size_t)(c - c0) * rows * w;
        const float *t = m->target + (size_t)example_of[c] * rows * w;
        double s = 0.0;
        for (i = 0; i < rows * w; i++) {
            float d = y[i] - t[i];
            s += (double)d * d;
        }
        losses[c] = (float)(s / (double)(rows * w));
    }
}

/* Copies [c0, c0 + n) of the pass through every layer and their losses: gathered into x,
   their hidden states ping-ponging between x and act (lin holds each linear's output). */
static grzo_status mlp_forward_group(mlp *m, const int64_t *example_of, int64_t c0, int64_t n, float *losses)
{
    grzo_rows rows = {0};
    size_t i, count;
    float *in = m->x, *out = m->act;
    int64_t l;
    rows.n_rows = n * m->cfg->rows_per_example;   /* even split: a copy owns T rows */
    rows.first_segment = c0;
    rows.n_segments = n;
    count = (size_t)rows.n_rows * (size_t)m->cfg->width;
    mlp_gather(m, example_of, c0, n);
    for (l = 0; l < m->cfg->layers; l++) {
        double t0 = now_seconds();
        TRY(m->ctx, grzo_linear(m->ctx, m->w[l], in, m->lin, &rows));
        m->linear_seconds += now_seconds() - t0;
        TRY(m->ctx, grzo_vector(m->ctx, m->b[l], GRZO_VECTOR_ADD, m->lin, out, &rows));
        if (l + 1 < m->cfg->layers)
            for (i = 0; i < count; i++)
                out[i] = out[i] > 0.0f ? out[i] : 0.0f;
        { float *t = in; in = out; out = t; }
    }
    mlp_losses(m, in, example_of, c0, n, losses);
    return GRZO_OK;
}

/* The forward of n_copies example copies (copy c reads example example_of[c]) with one loss
   each. The model runs at most group_copies copies at a time through all its layers (a
   MeZO pass's B by default), so that a group's activations stay in cache and its buffers
   hold one group, whatever the pass's size. */
static grzo_status mlp_forward(mlp *m, const int64_t *example_of, int64_t n_copies, float *losses)
{
    int64_t c0, g = m->capacity / m->cfg->rows_per_example;
    for (c0 = 0; c0 < n_copies; c0 += g)
        TRY(m->ctx, mlp_forward_group(m, example_of, c0, n_copies - c0 < g ? n_copies - c0 : g, losses));
    return GRZO_OK;
}

static grzo_status forward_callback(grzo_ctx *ctx, const grzo_pass_info *pass, float *losses,
                                    void *user_data)
{
    mlp *m = (mlp *)user_data;
    double t0 = now_seconds();
    grzo_status st;
    (void)ctx;
    st = mlp_forward(m, pass->example, pass->n_segments, losses);
    m->forward_seconds += now_seconds() - t0;
    return st;
}

static grzo_status mlp_train_step(mlp *m)
{
    grzo_step_report rep;
    m->forward_seconds = m->linear_seconds = 0.0;
    TRY(m->ctx, grzo_step(m->ctx, m->cfg->batch, forward_callback, m, &rep));
    return GRZO_OK;
}

/* a plain forward over the same 2B example copies a GRZO pass runs (2BT rows), with the
   losses, outside any step */
static grzo_status mlp_plain_forward_2b(mlp *m, float *losses)
{
    int64_t c, n = 2 * m->cfg->batch, example_of[2 * 4096];
    for (c = 0; c < n; c++)
        example_of[c] = c % m->cfg->batch;
    return mlp_forward(m, example_of, n, losses);
}

/* ---- (a) one fused GRZO linear vs a plain linear --------------------------------------- */
enum { VAR_PLAIN = 0, VAR_AUTO, VAR_PER_EXAMPLE, VAR_TWO_GEMM, VAR_FUSED, N_LINEAR_VARIANTS };

static const char *const linear_variant_names[N_LINEAR_VARIANTS] = {
    "plain linear (outside a step)", "GRZO linear, AUTO", "GRZO linear, PER_EXAMPLE",
    "GRZO linear, TWO_GEMM", "GRZO linear, FUSED"
};

typedef struct linear_case {
    grzo_backend be;
    int have_be;
    grzo_ctx *ctx;
    grzo_block w;
    float *w_data, *x, *y;
} linear_case;

static grzo_status linear_case_create(linear_case *lc, const bench_config *cfg, int32_t threads, int algo)
{
    size_t n_rows = (size_t)(2 * cfg->batch * cfg->rows_per_example), w = (size_t)cfg->width;
    grzo_block_desc bd;
    memset(lc, 0, sizeof *lc);
    TRY(NULL, make_backend(threads, algo, &lc->be));
    lc->have_be = 1;
    TRY(NULL, make_ctx(&lc->be, GRZO_ESTIMATOR_GRZO, cfg->fzoo_probes, &lc->ctx));
    TRY(lc->ctx, alloc_floats(&lc->be, w * w, &lc->w_data));
    TRY(lc->ctx, alloc_floats(&lc->be, n_rows * w, &lc->x));
    TRY(lc->ctx, alloc_floats(&lc->be, n_rows * w, &lc->y));
    fill_gaussian(7, 100, 1.0f / sqrtf((float)w), lc->w_data, w * w);
    /* every row is distinct, so the "+" and "-" copies of an example have different
       inputs, as they do after the first layer of a real model */
    fill_gaussian(7, 400, 1.0f, lc->x, n_rows * w);
    memset(&bd, 0, sizeof bd);
    bd.kind = GRZO_BLOCK_MATRIX;
    bd.rows = cfg->width;
    bd.cols = cfg->width;
    bd.data = lc->w_data;
    TRY(lc->ctx, grzo_block_add(lc->ctx, &bd, &lc->w));
    return GRZO_OK;
}

static void linear_case_destroy(linear_case *lc)
{
    if (!lc->have_be)
        return;
    if (lc->ctx) grzo_destroy(lc->ctx);
    if (lc->w_data) grzo_backend_free(&lc->be, lc->w_data);
    if (lc->x) grzo_backend_free(&lc->be, lc->x);
    if (lc->y) grzo_backend_free(&lc->be, lc->y);
    grzo_backend_destroy(&lc->be);
    memset(lc, 0, sizeof *lc);
}

/* times one grzo_linear over 2BT rows; inside a GRZO pass when perturbed. The step is
   then abandoned: nothing is updated, and the next call starts a fresh step. */
static grzo_status time_linear(linear_case *lc, const bench_config *cfg, int perturbed,
                               double *seconds)
{
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    double t0;
    rows.n_rows = 2 * cfg->batch * cfg->rows_per_example;
    rows.offsets = NULL;
    if (perturbed) {
        grzo_step_info si;
        grzo_pass_info pi;
        TRY(lc->ctx, grzo_step_begin(lc->ctx, cfg->batch, &si));
        TRY(lc->ctx, grzo_pass_begin(lc->ctx, &pi));
        if (pi.n_segments != 2 * cfg->batch) {
            fprintf(stderr, "bench_mlp: a GRZO pass has %lld segments, expected 2B = %lld\n",
                    (long long)pi.n_segments, (long long)(2 * cfg->batch));
            return GRZO_ERR_STATE;
        }
    }
    t0 = now_seconds();
    TRY(lc->ctx, grzo_linear(lc->ctx, lc->w, lc->x, lc->y, &rows));
    *seconds = now_seconds() - t0;
    if (perturbed)
        TRY(lc->ctx, grzo_step_abort(lc->ctx));
    return GRZO_OK;
}

static void print_ratio_row(const char *name, const double *t, const double *ref, int rounds,
                            double flop, const char *note)
{
    double *r = malloc((size_t)rounds * sizeof *r);
    double med = bench_quantile(t, rounds, 0.5);
    if (r == NULL)
        return;
    if (ref != NULL) {
        bench_ratios(t, ref, rounds, r);
        printf("| %s | %.2f | %.1f | %.3f | %.3f | %.3f |%s\n", name, 1e3 * med, flop / med * 1e-9,
               bench_quantile(r, rounds, 0.5), bench_quantile(r, rounds, 0.1), bench_quantile(r, rounds, 0.9), note);
    } else {
        printf("| %s | %.2f | %.1f | 1 | | |%s\n", name, 1e3 * med, flop / med * 1e-9, note);
    }
    free(r);
}

static int bench_linear(const bench_config *cfg)
{
    static const int algos[N_LINEAR_VARIANTS] = {
        GRZO_CPU_LINEAR_AUTO, GRZO_CPU_LINEAR_AUTO, GRZO_CPU_LINEAR_PER_EXAMPLE,
        GRZO_CPU_LINEAR_TWO_GEMM, GRZO_CPU_LINEAR_FUSED
    };
    linear_case lc[BENCH_MAX_TC][N_LINEAR_VARIANTS];
    double *t[BENCH_MAX_TC][N_LINEAR_VARIANTS], *ratio = NULL;
    int32_t tcs[BENCH_MAX_TC];
    int n_tc = bench_thread_counts(cfg->threads, tcs), n_cases = n_tc * N_LINEAR_VARIANTS;
    int v, r, c, rc = 1, rounds = cfg->rounds * 2;   /* cheap: twice the rounds of (b) */
    int64_t n_rows = 2 * cfg->batch * cfg->rows_per_example;
    double flop = 2.0 * (double)n_rows * (double)cfg->width * (double)cfg->width;

    memset(lc, 0, sizeof lc);
    memset(t, 0, sizeof t);
    if ((ratio = calloc((size_t)rounds, sizeof(double))) == NULL)
        return 1;
    for (c = 0; c < n_cases; c++) {
        int tc = c / N_LINEAR_VARIANTS;
        v = c % N_LINEAR_VARIANTS;
        t[tc][v] = calloc((size_t)rounds, sizeof(double));
        if (t[tc][v] == NULL || linear_case_create(&lc[tc][v], cfg, tcs[tc], algos[v]) != GRZO_OK)
            goto done;
    }
    for (r = -1; r < rounds; r++) {   /* round -1 warms up (BLAS buffers, page faults) */
        for (c = 0; c < n_cases; c++) {
            int k = (c + (r < 0 ? 0 : r)) % n_cases, tc = k / N_LINEAR_VARIANTS;   /* rotate the order */
            double sec = 0.0;
            v = k % N_LINEAR_VARIANTS;
            bench_use_threads(tcs[tc]);
            if (time_linear(&lc[tc][v], cfg, v != VAR_PLAIN, &sec) != GRZO_OK)
                goto done;
            if (r >= 0)
                t[tc][v][r] = sec;
        }
    }
    for (c = 0; c < n_tc; c++) {
        printf("\n### (a) one linear, %lldx%lld block, %lld rows (2B = %lld copies x T = %lld rows), %d thread%s\n\n",
               (long long)cfg->width, (long long)cfg->width, (long long)n_rows, (long long)(2 * cfg->batch),
               (long long)cfg->rows_per_example, (int)tcs[c], tcs[c] > 1 ? "s" : "");
        printf("%d rounds, interleaved with the other thread count%s; ratio = time / plain time of the same round. "
               "GFLOP/s counts the plain FLOPs 2*N*d_in*d_out for every row. Target: GRZO/plain <= 1.10.\n\n",
               rounds, n_tc > 1 ? "" : " (none)");
        printf("| operation | median ms | GFLOP/s | ratio median | p10 | p90 |\n");
        printf("|---|---:|---:|---:|---:|---:|\n");
        print_ratio_row(linear_variant_names[VAR_PLAIN], t[c][VAR_PLAIN], NULL, rounds, flop, "");
        for (v = VAR_AUTO; v < N_LINEAR_VARIANTS; v++)
            print_ratio_row(linear_variant_names[v], t[c][v], t[c][VAR_PLAIN], rounds, flop, "");
    }
    if (n_tc > 1)
        for (v = 0; v < N_LINEAR_VARIANTS; v++) {
            bench_ratios(t[0][v], t[1][v], rounds, ratio);
            printf("%s%s, %d threads / 1 thread speedup: median %.2f [p10 %.2f, p90 %.2f]\n", v ? "" : "\n",
                   linear_variant_names[v], (int)tcs[1], bench_quantile(ratio, rounds, 0.5), bench_quantile(ratio, rounds, 0.1),
                   bench_quantile(ratio, rounds, 0.9));
        }
    rc = 0;
done:
    for (c = 0; c < n_cases; c++) {
        linear_case_destroy(&lc[c / N_LINEAR_VARIANTS][c % N_LINEAR_VARIANTS]);
        free(t[c / N_LINEAR_VARIANTS][c % N_LINEAR_VARIANTS]);
    }
    free(ratio);
    return rc;
}

/* ---- (b) whole training steps ------------------------------------------------------------ */
enum { STEP_GRZO = 0, STEP_MEZO, STEP_FZOO, STEP_FORWARD, N_STEP_KINDS };

static int bench_steps(const bench_config *cfg)
{
    static const char *const names[N_STEP_KINDS] = {
        "GRZO step", "MeZO step", "FZOO step", "plain forward of the 2B copies"
    };
    static const grzo_estimator est[3] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO,
                                           GRZO_ESTIMATOR_FZOO };
    int64_t bt = cfg->batch * cfg->rows_per_example;
    const int64_t rows_per_step[N_STEP_KINDS] = { 2 * bt, 2 * bt, (cfg->fzoo_probes + 1) * bt, 2 * bt };
    grzo_backend be[BENCH_MAX_TC];
    mlp m[BENCH_MAX_TC][3];
    double *t[BENCH_MAX_TC][N_STEP_KINDS], *fwd[BENCH_MAX_TC][N_STEP_KINDS], *lin[BENCH_MAX_TC][N_STEP_KINDS];
    double *ratio = NULL;
    float losses[2 * 4096];
    int32_t tcs[BENCH_MAX_TC];
    int n_tc = bench_thread_counts(cfg->threads, tcs), n_cases = n_tc * N_STEP_KINDS, have_be = 0, k, r, c, rc = 1;
    char what[160];

    memset(m, 0, sizeof m);
    memset(t, 0, sizeof t);
    memset(fwd, 0, sizeof fwd);
    memset(lin, 0, sizeof lin);
    for (c = 0; c < n_tc; c++, have_be++) {
        if (make_backend(tcs[c], GRZO_CPU_LINEAR_AUTO, &be[c]) != GRZO_OK)
            goto done;
        for (k = 0; k < 3; k++)
            if (mlp_create(&m[c][k], cfg, &be[c], est[k], group_rows(cfg, 2 * cfg->batch)) != GRZO_OK)
                goto done;
    }
    ratio = calloc((size_t)cfg->rounds, sizeof(double));
    if (ratio == NULL)
        goto done;
    for (c = 0; c < n_cases; c++) {
        t[c / N_STEP_KINDS][c % N_STEP_KINDS] = calloc((size_t)cfg->rounds, sizeof(double));
        fwd[c / N_STEP_KINDS][c % N_STEP_KINDS] = calloc((size_t)cfg->rounds, sizeof(double));
        lin[c / N_STEP_KINDS][c % N_STEP_KINDS] = calloc((size_t)cfg->rounds, sizeof(double));
        if (t[c / N_STEP_KINDS][c % N_STEP_KINDS] == NULL || fwd[c / N_STEP_KINDS][c % N_STEP_KINDS] == NULL ||
            lin[c / N_STEP_KINDS][c % N_STEP_KINDS] == NULL)
            goto done;
    }
    for (r = -1; r < cfg->rounds; r++) {   /* round -1 warms up */
        for (c = 0; c < n_cases; c++) {
            int idx = (c + (r < 0 ? 0 : r)) % n_cases, tc = idx / N_STEP_KINDS, kind = idx % N_STEP_KINDS;
            double t0, sec, f;
            bench_use_threads(tcs[tc]);
            t0 = now_seconds();
            if (kind == STEP_FORWARD) {
                m[tc][STEP_GRZO].linear_seconds = 0.0;
                if (mlp_plain_forward_2b(&m[tc][STEP_GRZO], losses) != GRZO_OK)
                    goto done;
                sec = now_seconds() - t0;
                f = sec;
            } else {
                if (mlp_train_step(&m[tc][kind]) != GRZO_OK)
                    goto done;
                sec = now_seconds() - t0;
                f = m[tc][kind].forward_seconds;
            }
            if (r >= 0) {
                t[tc][kind][r] = sec;
                fwd[tc][kind][r] = f;
                lin[tc][kind][r] = m[tc][kind == STEP_FORWARD ? STEP_GRZO : kind].linear_seconds;
            }
        }
    }

    for (c = 0; c < n_tc; c++) {
        printf("\n### (b) training step, %lld-layer MLP, width %lld, B = %lld, T = %lld, FZOO N = %d, %d thread%s\n\n",
               (long long)cfg->layers, (long long)cfg->width, (long long)cfg->batch,
               (long long)cfg->rows_per_example, (int)cfg->fzoo_probes, (int)tcs[c], tcs[c] > 1 ? "s" : "");
        printf("%d rounds, interleaved with the other thread count. A step = all its forward passes with the "
               "losses, plus the update. 'forward' = time inside the forward callback (perturbed linears, biases, "
               "ReLU, losses), 'linears' the part of it inside grzo_linear; 'rest' = step - forward (signs, "
               "normalization, update). Ratios are per-round, to the MeZO step.\n\n", cfg->rounds);
        printf("| operation | rows forwarded | median ms | forward ms | linears ms | rest ms | ratio to MeZO median | p10 | p90 |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (k = 0; k < N_STEP_KINDS; k++) {
            double fwd_median = bench_quantile(fwd[c][k], cfg->rounds, 0.5);
            int i;
            for (i = 0; i < cfg->rounds; i++)   /* fwd now holds the rest: step - forward */
                fwd[c][k][i] = t[c][k][i] - fwd[c][k][i];
            bench_ratios(t[c][k], t[c][STEP_MEZO], cfg->rounds, ratio);
            printf("| %s | %lld | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f |\n", names[k],
                   (long long)rows_per_step[k], 1e3 * bench_quantile(t[c][k], cfg->rounds, 0.5),
                   1e3 * fwd_median, 1e3 * bench_quantile(lin[c][k], cfg->rounds, 0.5),
                   1e3 * bench_quantile(fwd[c][k], cfg->rounds, 0.5),
                   bench_quantile(ratio, cfg->rounds, 0.5), bench_quantile(ratio, cfg->rounds, 0.1),
                   bench_quantile(ratio, cfg->rounds, 0.9));
        }
        printf("\n");
        bench_print_ratio("GRZO step / MeZO step", t[c][STEP_GRZO], t[c][STEP_MEZO], cfg->rounds, ratio, " (target <= 1.0)");
        bench_print_ratio("GRZO step's linears / MeZO step's linears", lin[c][STEP_GRZO], lin[c][STEP_MEZO], cfg->rounds,
                          ratio, "");
        bench_print_ratio("GRZO step / plain forward of the same 2B copies", t[c][STEP_GRZO], t[c][STEP_FORWARD],
                         cfg->rounds, ratio, " (target <= 1.15)");
        bench_print_ratio("MeZO step / plain forward of the same 2B copies", t[c][STEP_MEZO], t[c][STEP_FORWARD],
                         cfg->rounds, ratio, " (target <= 1.10)");
        snprintf(what, sizeof what, "FZOO step (N = %d, %lld rows) / plain forward of the 2B copies",
                 (int)cfg->fzoo_probes, (long long)rows_per_step[STEP_FZOO]);
        bench_print_ratio(what, t[c][STEP_FZOO], t[c][STEP_FORWARD], cfg->rounds, ratio, "");
    }
    if (n_tc > 1) {
        printf("\n");
        for (k = 0; k < N_STEP_KINDS; k++) {
            snprintf(what, sizeof what, "%s, %d threads / 1 thread speedup", names[k], (int)tcs[1]);
            bench_print_ratio(what, t[0][k], t[1][k], cfg->rounds, ratio, k == STEP_GRZO ? " (target >= 1.7)" : "");
        }
    }
    rc = 0;
done:
    for (c = 0; c < have_be; c++) {
        for (k = 0; k < 3; k++)
            mlp_destroy(&m[c][k]);
        grzo_backend_destroy(&be[c]);
    }
    for (c = 0; c < n_cases; c++) {
        free(t[c / N_STEP_KINDS][c % N_STEP_KINDS]);
        free(fwd[c / N_STEP_KINDS][c % N_STEP_KINDS]);
        free(lin[c / N_STEP_KINDS][c % N_STEP_KINDS]);
    }
    free(ratio);
    return rc;
}

/* ---- (c) peak memory, one child process per mode ------------------------------------------ */

/* The child's own VmHWM is the peak of this process image only: ru_maxrss from wait4
   would also count the parent's pages that the child inherited before execv. Prints
   "setup_kb peak_kb": RSS once the model is built, and the peak after 3 operations. */
static int mem_child_main(const bench_config *cfg)
{
    const char *mode = cfg->mem_child;
    grzo_estimator est;
    grzo_backend be;
    mlp m;
    float losses[2 * 4096];
    long setup_kb;
    int i, is_step = 1, rc = 1;
    int64_t capacity = group_rows(cfg, 2 * cfg->batch);

    if (strcmp(mode, "forward") == 0) { est = GRZO_ESTIMATOR_GRZO; is_step = 0; }
    else if (strcmp(mode, "grzo") == 0) est = GRZO_ESTIMATOR_GRZO;
    else if (strcmp(mode, "mezo") == 0) { est = GRZO_ESTIMATOR_MEZO; capacity = group_rows(cfg, cfg->batch); }
    else if (strcmp(mode, "fzoo") == 0) { est = GRZO_ESTIMATOR_FZOO; capacity = group_rows(cfg, cfg->batch); }
    else {
        fprintf(stderr, "bench_mlp: unknown --mem-child mode '%s'\n", mode);
        return 2;
    }
    if (make_backend(cfg->threads, GRZO_CPU_LINEAR_AUTO, &be) != GRZO_OK)
        return 1;
    if (mlp_create(&m, cfg, &be, est, capacity) != GRZO_OK)
        goto done;
    setup_kb = bench_proc_status_kb("VmRSS");
    for (i = 0; i < 3; i++) {   /* later runs see any lazily grown buffer at full size */
        grzo_status st = is_step ? mlp_train_step(&m) : mlp_plain_forward_2b(&m, losses);
        if (st != GRZO_OK)
            goto done;
    }
    printf("%ld %ld\n", setup_kb, bench_proc_status_kb("VmHWM"));
    fflush(stdout);
    rc = 0;
done:
    mlp_destroy(&m);
    grzo_backend_destroy(&be);
    return rc;
}

/* runs this program again as "--mem-child MODE" and reads its two numbers */
static int run_mem_child(const bench_config *cfg, const char *mode, long *setup_kb, long *peak_kb)
{
    char threads[32], group[32], line[128];
    char *args[10];
    int fds[2], status = 0, n = 0;
    pid_t pid;
    FILE *f;

    snprintf(threads, sizeof threads, "%d", (int)cfg->threads);
    snprintf(group, sizeof group, "%lld", (long long)cfg->group_copies);
    args[n++] = "bench_mlp";
    args[n++] = "--mem-child";
    args[n++] = (char *)mode;
    args[n++] = "--threads";
    args[n++] = threads;
    args[n++] = "--group-copies";
    args[n++] = group;
    if (cfg->quick)
        args[n++] = "--quick";
    args[n] = NULL;
    if (pipe(fds) != 0) {
        perror("bench_mlp: pipe");
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("bench_mlp: fork");
        return 1;
    }
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], STDOUT_FILENO) < 0)
            _exit(127);
        execv("/proc/self/exe", args);
        perror("bench_mlp: execv /proc/self/exe");
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    if (f == NULL || fgets(line, sizeof line, f) == NULL ||
        sscanf(line, "%ld %ld", setup_kb, peak_kb) != 2)
        *peak_kb = -1;
    if (f) fclose(f); else close(fds[0]);
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        *peak_kb < 0) {
        fprintf(stderr, "bench_mlp: memory child '%s' failed (status 0x%x)\n", mode, status);
        return 1;
    }
    return 0;
}

static int bench_memory(const bench_config *cfg)
{
    static const char *const modes[4] = { "forward", "grzo", "mezo", "fzoo" };
    static const char *const names[4] = {
        "forward-only pass over the 2B copies (2BT rows)", "GRZO step (1 pass of 2B copies)",
        "MeZO step (2 passes of B)", "FZOO step (N+1 passes of B)"
    };
    long setup[4], peak[4];
    int i;
    for (i = 0; i < 4; i++)
        if (run_mem_child(cfg, modes[i], &setup[i], &peak[i]) != 0)
            return 1;
    printf("\n### (c) peak resident memory (VmHWM), each in a fresh process\n\n");
    printf("Every process builds the same model (weights %.1f MiB, B examples and targets); the "
           "activation buffers hold one group of copies (%lld rows for forward and GRZO, %lld for MeZO "
           "and FZOO). 'after setup' = VmRSS once the model is built, before the first operation.\n\n",
           (double)(cfg->layers * cfg->width * cfg->width * 4) / (1024.0 * 1024.0),
           (long long)group_rows(cfg, 2 * cfg->batch), (long long)group_rows(cfg, cfg->batch));
    printf("| process | after setup MiB | peak MiB | peak - forward-only peak | overhead |\n");
    printf("|---|---:|---:|---:|---:|\n");
    for (i = 0; i < 4; i++)
        printf("| %s | %.1f | %.1f | %+.1f MiB | %+.1f %% |\n", names[i], setup[i] / 1024.0,
               peak[i] / 1024.0, (double)(peak[i] - peak[0]) / 1024.0,
               100.0 * (double)(peak[i] - peak[0]) / (double)peak[0]);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

static void print_context(int argc, char **argv, const bench_config *cfg)
{
    grzo_backend be;
    grzo_backend_caps caps;
    int i;
    memset(&caps, 0, sizeof caps);
    if (make_backend(cfg->threads, GRZO_CPU_LINEAR_AUTO, &be) == GRZO_OK) {
        (void)grzo_backend_query(&be, &caps);
        grzo_backend_destroy(&be);
    }
    printf("## grzo %s bench_mlp%s\n\ncommand:", grzo_version(), cfg->quick ? " (--quick: tiny sizes)" : "");
    for (i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n\nbackend cpu, %d threads", (int)caps.n_threads);
#ifdef GRZO_USE_OPENBLAS
    printf(", %s", openblas_get_config());
#endif
    printf("; load average at start %.2f\n", bench_load_average());
    {
        int32_t tcs[BENCH_MAX_TC];
        int c, n_tc = bench_thread_counts(cfg->threads, tcs);
        for (c = 0; c < n_tc; c++) {
            double peak, g;
            if (make_backend(tcs[c], GRZO_CPU_LINEAR_AUTO, &be) != GRZO_OK)
                continue;
            bench_use_threads(tcs[c]);
            if (c == 0)
                cpu_env_report(stdout, "", &be);
            peak = cpu_env_peak_gflops((int)tcs[c]);
            g = cpu_env_gemm_gflops(&be, 1024, 576, 576, 5);
            printf("%d thread%s: fp32 peak (FMA loop) %.1f GFLOP/s; plain GEMM 1024x576x576 (SmolLM2 shape) %.1f GFLOP/s "
                   "= %.0f %% of peak (target >= 70 %%)\n", (int)tcs[c], tcs[c] > 1 ? "s" : "", peak, g,
                   peak > 0 ? 100.0 * g / peak : 0.0);
            grzo_backend_destroy(&be);
        }
    }
    printf("model: %lld layers of %lldx%lld + bias + ReLU, B = %lld examples of T = %lld rows, "
           "sigma 1e-3, Rademacher noise; its forward runs ",
           (long long)cfg->layers, (long long)cfg->width, (long long)cfg->width,
           (long long)cfg->batch, (long long)cfg->rows_per_example);
    if (cfg->group_copies >= 2 * cfg->batch)
        printf("a whole pass at once (--group-copies 0)\n");
    else
        printf("%lld copies at a time through all its layers (--group-copies)\n", (long long)cfg->group_copies);
}

int main(int argc, char **argv)
{
    bench_config cfg;
    int parsed;
    cpu_env_reexec(argv);   /* the GEMM kernels of this CPU (OPENBLAS_CORETYPE, BLIS_ARCH_TYPE) */
    parsed = parse_options(argc, argv, &cfg);
    if (parsed == 1)
        return 0;
    if (parsed != 0)
        return 2;
    bench_use_threads(cfg.threads);
    if (cfg.mem_child != NULL)
        return mem_child_main(&cfg);
    print_context(argc, argv, &cfg);
    if (bench_linear(&cfg) != 0 || bench_steps(&cfg) != 0 || bench_memory(&cfg) != 0)
        return 1;
    printf("\nload average at the end %.2f (this machine has %ld cores)\n", bench_load_average(),
           sysconf(_SC_NPROCESSORS_ONLN));
    return 0;
}
