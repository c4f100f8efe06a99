/* bench_linear.c - one perturbed (or plain) linear of the CPU backend, called N times: the
   program behind README's instruction counts (valgrind --tool=callgrind counts instructions,
   which repeat whatever else the machine runs; the difference of a 3-call and a 1-call run is
   the cost of two calls) and a quick wall-clock look at one algorithm.

     bench_linear [--op plain|grzo|mezo|update|update-mezo] [--algo auto|per-example|two-gemm|fused]
                  [--calls N] [--width D] [--d-out N] [--rows T] [--batch B]
                  [--lengths T1,T2,...] [--threads N] [--weights N] [--copies N]

   --op grzo: one GRZO pass's linear over 2B copies of T rows (flipout, every copy its own
   weight); mezo: one MeZO pass's linear over B copies of T rows (shared Z: one weight);
   plain: the unperturbed linear of the 2B T rows; update: the backend's GRZO update of the
   weight (flipout, B coefficients: U (.) (R^T diag(a) S)), update-mezo: MeZO's (one
   coefficient times U), U and the signs regenerated as in a step. The weight is d_out x D
   (--d-out, default D). --lengths gives each example its own row count instead (B = their number;
   e.g. bench_llm's prompt lengths, printed in its header). It prints the best and mean wall
   time per call and the plain FLOPs rate. --threads N (default 1) sets the backend's
   threads and OpenMP's, which OpenBLAS's OpenMP build uses. --weights N (default 1) makes N
   weights of that shape and calls them in turn: with N weights larger than the last-level
   cache together, each call reads its weight from memory, as a model's pass does. --copies N
   (grzo only, 1 to 2B; without it, the whole pass) makes the call one piece of the pass: its
   first N copies (grzo_rows.n_segments), as a forward that runs its pass a group of copies at a
   time does (bench_mlp's default: B copies, the "+" ones, with no mirror among them). */
#define _POSIX_C_SOURCE 200809L
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cli_args.h"
#include "cpu_env.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LENGTHS 256

typedef struct linear_opts {
    const char *op;
    int64_t algo, calls, width, d_out, rows, batch, threads, weights, copies;
    int64_t lengths[MAX_LENGTHS];   /* rows of each example; n_lengths 0: rows each */
    int64_t n_lengths;
} linear_opts;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_algo(const char *v)
{
    static const char *const names[] = { "auto", "per-example", "two-gemm", "fused" };
    int i;
    for (i = 0; i < 4; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

/* "T1,T2,..." into o->lengths (each 1..4096, at most MAX_LENGTHS) */
static int parse_lengths(const char *v, linear_opts *o)
{
    char err[256], item[32];
    const char *p = v;
    o->n_lengths = 0;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof item || o->n_lengths == MAX_LENGTHS) {
            fprintf(stderr, "bench_linear: --lengths: expected up to %d comma-separated row counts, got '%s'\n",
                    MAX_LENGTHS, v);
            return 0;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        if (cli_parse_int("--lengths", item, 1, 4096, &o->lengths[o->n_lengths], err, sizeof err)) {
            fprintf(stderr, "bench_linear: %s\n", err);
            return 0;
        }
        o->n_lengths++;
        p += n;
        if (*p == ',' && *++p == '\0') {
            fprintf(stderr, "bench_linear: --lengths: a trailing comma in '%s'\n", v);
            return 0;
        }
    }
    if (o->n_lengths == 0) {
        fprintf(stderr, "bench_linear: --lengths: empty\n");
        return 0;
    }
    return 1;
}

static int parse(int argc, char **argv, linear_opts *o)
{
    char err[256];
    int i, rows_given = 0;
    o->op = "grzo";
    o->algo = GRZO_CPU_LINEAR_AUTO;
    o->calls = 10;
    o->width = 1024;
    o->rows = 64;
    o->batch = 0;   /* 16, or the number of --lengths */
    o->threads = 1;
    o->d_out = 0;
    o->weights = 1;
    o->copies = 0;
    o->n_lengths = 0;
    for (i = 1; i < argc; i += 2) {   /* every option but --help takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *slot = !strcmp(a, "--calls") ? &o->calls : !strcmp(a, "--width") ? &o->width
                      : !strcmp(a, "--d-out") ? &o->d_out : !strcmp(a, "--rows") ? &o->rows : !strcmp(a, "--batch") ? &o->batch
                      : !strcmp(a, "--threads") ? &o->threads : !strcmp(a, "--weights") ? &o->weights
                      : !strcmp(a, "--copies") ? &o->copies : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: %s [--op plain|grzo|mezo|update|update-mezo] [--algo auto|per-example|two-gemm|fused] "
                   "[--calls N] [--width D] [--d-out N] [--rows T] [--batch B] [--lengths T1,T2,...] [--threads N] [--weights N] "
                   "[--copies N]\n",
                   argv[0]);
            exit(0);
        }
        if (!v) { fprintf(stderr, "bench_linear: %s needs a value\n", a); return 0; }
        if (!strcmp(a, "--op")) {
            if (strcmp(v, "plain") && strcmp(v, "grzo") && strcmp(v, "mezo") && strcmp(v, "update") &&
                strcmp(v, "update-mezo")) {
                fprintf(stderr, "bench_linear: --op: expected plain, grzo, mezo, update or update-mezo, got '%s'\n", v);
                return 0;
            }
            o->op = v;
        } else if (!strcmp(a, "--algo")) {
            if ((o->algo = parse_algo(v)) < 0) {
                fprintf(stderr, "bench_linear: --algo: expected auto, per-example, two-gemm or fused, got '%s'\n", v);
                return 0;
            }
        } else if (!strcmp(a, "--lengths")) {
            if (!parse_lengths(v, o)) return 0;
        } else if (slot) {
            rows_given |= slot == &o->rows;
            if (cli_parse_int(a, v, 1, slot == &o->width || slot == &o->d_out ? 131072 : slot == &o->calls ? 100000 : slot == &o->threads ? 64 : 4096, slot, err,
                               sizeof err)) {
                fprintf(stderr, "bench_linear: %s\n", err);
                return 0;
            }
        } else {
            fprintf(stderr, "bench_linear: unknown option '%s' (--help)\n", a);
            return 0;
        }
    }
    if (o->d_out == 0) o->d_out = o->width;
    if (o->n_lengths > 0 && rows_given) {   /* --lengths sets every example's rows: --rows would be ignored */
        fprintf(stderr, "bench_linear: --rows and --lengths both give the rows of each example: pass one\n");
        return 0;
    }
    if (o->n_lengths > 0 && o->batch != 0 && o->batch != o->n_lengths) {
        fprintf(stderr, "bench_linear: --batch %lld and --lengths (%lld examples) disagree\n", (long long)o->batch,
                (long long)o->n_lengths);
        return 0;
    }
    if (o->batch == 0) o->batch = o->n_lengths > 0 ? o->n_lengths : 16;
    if (o->n_lengths == 0)
        for (o->n_lengths = 0; o->n_lengths < o->batch && o->n_lengths < MAX_LENGTHS; o->n_lengths++)
            o->lengths[o->n_lengths] = o->rows;
    if (o->n_lengths != o->batch) {
        fprintf(stderr, "bench_linear: --batch: at most %d examples\n", MAX_LENGTHS);
        return 0;
    }
    if (o->copies != 0 && (strcmp(o->op, "grzo") || o->copies > 2 * o->batch)) {
        fprintf(stderr, "bench_linear: --copies: a piece of a GRZO pass (--op grzo), at most 2B = %lld copies\n",
                (long long)(2 * o->batch));
        return 0;
    }
    return 1;
}

#define TRY(call)                                                                                   \
    do {                                                                                            \
        grzo_status st_ = (call);                                                                   \
        if (st_ != GRZO_OK) {                                                                       \
            fprintf(stderr, "bench_linear: %s: %s (%s)\n", #call, grzo_status_str(st_),            \
                    ctx ? grzo_last_error(ctx) : "no context");                                     \
            return 1;                                                                               \
        }                                                                                           \
    } while (0)

/* One update of the d_out x width weight w by the backend, as a step ends: GRZO's (flipout,
   B coefficients) or MeZO's (one); returns its wall time, or -1 on an error. */
static double time_update(grzo_backend *be, float *w, int64_t d_out, int64_t width, int64_t B, int flipout,
                          uint64_t step)
{
    grzo_update_args u;
    float coeff[MAX_LENGTHS];
    grzo_status st;
    double t0;
    int64_t e;
    for (e = 0; e < B; e++) coeff[e] = 1e-9f * (float)((e * 7 + 3) % 11 - 5);
    memset(&u, 0, sizeof u);
    u.p.data = w;
    u.p.kind = GRZO_BLOCK_MATRIX;
    u.p.dtype = GRZO_DTYPE_F32;
    u.p.rows = d_out;
    u.p.cols = width;
    u.base.seed = 42;
    u.base.step = (uint32_t)step;
    u.base.block = 0;
    u.base.dist = GRZO_NOISE_RADEMACHER;
    u.flipout = flipout;
    u.n_examples = flipout ? B : 1;
    u.coeff = coeff;
    t0 = now_seconds();
    st = be->iface->update(be->self, &u);
    if (st != GRZO_OK) {
        fprintf(stderr, "bench_linear: update: %s\n", grzo_status_str(st));
        return -1.0;
    }
    return now_seconds() - t0;
}

int main(int argc, char **argv)
{
    linear_opts o;
    grzo_cpu_desc cd;
    grzo_backend be;
    grzo_desc d;
    grzo_ctx *ctx = NULL;
    grzo_block_desc bd;
    grzo_block *blk;
    grzo_noise n;
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    float *w = NULL, *x = NULL, *y = NULL;
    void *mem;
    size_t w_elems, w_stride;
    double best = 1e30, total = 0.0;
    int64_t offsets[2 * MAX_LENGTHS + 1];
    int64_t i, c, n_rows, width, d_out, example_rows = 0;
    int mezo, plain, update;
    cpu_env_reexec(argv);   /* the GEMM kernels of this CPU */
    if (!parse(argc, argv, &o)) return 2;
    mezo = !strcmp(o.op, "mezo");
    plain = !strcmp(o.op, "plain");
    update = !strncmp(o.op, "update", 6);
    width = o.width;
    d_out = o.d_out;
    for (i = 0; i < o.batch; i++) example_rows += o.lengths[i];
    n_rows = (mezo ? 1 : 2) * example_rows;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = (int32_t)o.threads;
#ifdef _OPENMP
    omp_set_num_threads((int)o.threads);
#endif
    cd.linear_algo = (grzo_cpu_linear_algo)o.algo;
    TRY(grzo_backend_cpu_create(&cd, &be));
    memset(&d, 0, sizeof d);
    d.backend = &be;
    d.estimator = mezo ? GRZO_ESTIMATOR_MEZO : GRZO_ESTIMATOR_GRZO;
    d.seed = 42;
    d.lr = 1e-9f;
    d.sigma = 1e-3f;
    TRY(grzo_create(&d, &ctx));
    /* weights and activations from the backend, as a model's (64-byte aligned: where a
       buffer starts past a cache line moves a step by 2-3 %, bench/PERFORMANCE.md "Where the buffers
       land"); each weight starts on a 64-byte boundary too */
    w_elems = (size_t)(d_out * width);
    w_stride = (w_elems + 15) / 16 * 16;
    TRY(grzo_backend_alloc(&be, sizeof(float) * w_stride * (size_t)o.weights, &mem));
    w = (float *)mem;
    TRY(grzo_backend_alloc(&be, sizeof(float) * (size_t)(2 * example_rows * width), &mem));
    x = (float *)mem;
    TRY(grzo_backend_alloc(&be, sizeof(float) * (size_t)(2 * example_rows * d_out), &mem));
    y = (float *)mem;
    blk = (grzo_block *)malloc(sizeof(grzo_block) * (size_t)o.weights);
    if (!blk) { fprintf(stderr, "bench_linear: out of memory\n"); return 1; }
    memset(&n, 0, sizeof n);
    n.seed = 7;
    n.block = GRZO_USER_BLOCK;
    n.dist = GRZO_NOISE_GAUSSIAN;
    n.stream = 1;
    grzo_noise_fill(&n, 0, w_stride * (size_t)o.weights, w);
    for (i = 0; i < (int64_t)w_stride * o.weights; i++) w[i] *= 0.03f;
    n.stream = 2;
    grzo_noise_fill(&n, 0, (size_t)(2 * example_rows * width), x);
    memset(&bd, 0, sizeof bd);
    bd.kind = GRZO_BLOCK_MATRIX;
    bd.rows = d_out;
    bd.cols = width;
    for (i = 0; i < o.weights; i++) {
        bd.data = w + (size_t)i * w_stride;
        TRY(grzo_block_add(ctx, &bd, &blk[i]));
    }
    rows.n_rows = n_rows;
    rows.offsets = NULL;
    for (c = 0; c < o.calls; c++) {
        grzo_step_info si;
        grzo_pass_info pi;
        double t0, t;
        if (!plain && !update) {
            TRY(grzo_step_begin(ctx, o.batch, &si));
            TRY(grzo_pass_begin(ctx, &pi));
            if (pi.n_segments > 2 * MAX_LENGTHS) { fprintf(stderr, "bench_linear: too many segments\n"); return 1; }
            /* segment s reads example pi.example[s]: its rows */
            for (offsets[0] = 0, i = 0; i < pi.n_segments; i++) offsets[i + 1] = offsets[i] + o.lengths[pi.example[i]];
            rows.offsets = offsets;
            if (o.copies > 0) {   /* the pass's first o.copies segments only */
                rows.n_segments = o.copies;
                rows.n_rows = offsets[o.copies];
            }
        }
        if (update) {
            t = time_update(&be, w + (size_t)(c % o.weights) * w_stride, d_out, width, o.batch, !strcmp(o.op, "update"), (uint64_t)c);
            if (t < 0.0) return 1;
        } else {
            t0 = now_seconds();
            TRY(grzo_linear(ctx, blk[c % o.weights], x, y, &rows));
            t = now_seconds() - t0;
        }
        if (!plain && !update) TRY(grzo_step_abort(ctx));
        if (t < best) best = t;
        total += t;
    }
    n_rows = rows.n_rows;   /* a piece's (--copies) */
    if (update)
        printf("bench_linear: %s, %lldx%lld weight, B = %lld: best %.3f ms, mean %.3f ms per call, %.3f ns per "
               "element\n", o.op, (long long)d_out, (long long)width, (long long)o.batch, 1e3 * best,
               1e3 * total / (double)o.calls, 1e9 * best / (double)(d_out * width));
    else
        printf("bench_linear: %s, algo %lld, %lldx%lld weight, %lld rows: best %.3f ms, mean %.3f ms per call, "
               "%.1f GFLOP/s (plain FLOPs)\n", o.op, (long long)o.algo, (long long)d_out, (long long)width,
               (long long)n_rows, 1e3 * best, 1e3 * total / (double)o.calls,
               2.0 * (double)n_rows * (double)d_out * (double)width / best * 1e-9);
    grzo_destroy(ctx);
    grzo_backend_free(&be, w);
    grzo_backend_free(&be, x);
    grzo_backend_free(&be, y);
    grzo_backend_destroy(&be);
    free(blk);
    return 0;
}
