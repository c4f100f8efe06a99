/* test_ops.c - the perturbed operations and the update, on the reference backend and on
   the CPU backend, against a dense double-precision reference that materializes
       Z_e = U (.) (r_e s_e^T),  U = noise(stream 0), r_e[j] = sign stream 1 at e*rows + j,
       s_e[k] = sign stream 2 at e*cols + k   (vectors: Z_e = U (.) r_e; shared: Z = U)
   element by element from grzo_noise_at. Two levels:
     1. the backend vtable (linear, vector, embedding, update, perturbed_copy) driven directly;
     2. the context API (grzo_linear / grzo_vector / grzo_embedding inside the passes of a real
        step, uneven rows.offsets), then the update grzo_step_end applies, for GRZO, SHARED,
        MeZO and FZOO, with weight decay, a no_decay block and a row-sparse embedding.
   Each backend must match the double reference within 1e-5 relative (to the sum of
   |terms|), and the CPU backend must match the reference backend within the same bound.
   The fused kernel (cpu-fused) only reorders the K-sum: |y - y_exact| <= K 2^-24 sum|terms|
   plus the formed weight's rounding, inside RTOL for the K < 80 used here. */
#define _POSIX_C_SOURCE 200809L   /* cpu_env.h: setenv, execv */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"
#include "../examples/common/cpu_env.h"

#define RTOL 1e-5

/* backend configurations: the reference backend, and the CPU backend with its automatic
   choice, forced PER_EXAMPLE and forced TWO_GEMM (small transient budget: chunked rows),
   and forced FUSED (BLIS's micro-kernel; PER_EXAMPLE where BLIS has no kernel for the CPU) */
#define NCFG 5
static const char *cfg_name(int cfg)
{
    static const char *names[NCFG] = { "ref", "cpu-auto", "cpu-per-example", "cpu-two-gemm", "cpu-fused" };
    return names[cfg];
}

static grzo_status make_backend(int cfg, grzo_backend *be)
{
    grzo_cpu_desc cd;
    if (cfg == 0) return grzo_backend_ref_create(be);
    memset(&cd, 0, sizeof cd);
    cd.n_threads = 2;
    if (cfg == 2) { cd.linear_algo = GRZO_CPU_LINEAR_PER_EXAMPLE; cd.transient_bytes = 4096; }
    if (cfg == 3) { cd.linear_algo = GRZO_CPU_LINEAR_TWO_GEMM; cd.transient_bytes = 4096; }
    if (cfg == 4) cd.linear_algo = GRZO_CPU_LINEAR_FUSED;
    return grzo_backend_cpu_create(&cd, be);
}

static int64_t seg_of(const int64_t *off, int64_t nseg, int64_t row)
{
    int64_t c;
    for (c = 0; c < nseg; c++)
        if (row >= off[c] && row < off[c + 1]) return c;
    return -1;
}

/* scale (sign * sigma) and example of row n under perturbation pt (NULL: plain) */
static double row_scale(const grzo_perturb *pt, int64_t n, int64_t *e)
{
    int64_t c;
    *e = 0;
    if (!pt || pt->sigma == 0.0f || pt->n_segments == 0) return 0.0;
    c = seg_of(pt->offsets, pt->n_segments, n);
    if (c < 0) return 0.0;
    *e = pt->example[c];
    return (double)pt->sign[c] * (double)pt->sigma;
}

/* y[n, j] = sum_k x[n, k] (W[j, k] + scale Z_e[j, k]); mag = sum_k |x||W + scale Z|.
   The perturbed weight is formed once per run of rows with the same (scale, example). */
static void ref_linear(const float *W, int64_t rows, int64_t cols, const float *x, int64_t n_rows,
                       const grzo_perturb *pt, double *y, double *mag)
{
    int64_t n, j, k, e, cur_e = -1;
    double cur_sc = 0.0;
    double *Wp = (double *)malloc((size_t)(rows * cols) * sizeof(double));
    REQUIRE(Wp != NULL);
    for (j = 0; j < rows * cols; j++) Wp[j] = W[j];
    for (n = 0; n < n_rows; n++) {
        double sc = row_scale(pt, n, &e);
        if (sc != cur_sc || (sc != 0.0 && e != cur_e)) {
            for (j = 0; j < rows; j++)
                for (k = 0; k < cols; k++)
                    Wp[j * cols + k] = (double)W[j * cols + k] +
                        (sc != 0.0 ? sc * tu_z(&pt->base, pt->flipout, 1, rows, cols, e, j, k) : 0.0);
            cur_sc = sc;
            cur_e = e;
        }
        for (j = 0; j < rows; j++) {
            double acc = 0, m = 0;
            for (k = 0; k < cols; k++) {
                double w = Wp[j * cols + k];
                acc += (double)x[n * cols + k] * w;
                m += fabs((double)x[n * cols + k] * w);
            }
            y[n * rows + j] = acc;
            mag[n * rows + j] = m;
        }
    }
    free(Wp);
}

static void ref_vector(const float *v, int64_t d, grzo_vector_op op, const float *x, int64_t n_rows,
                       const grzo_perturb *pt, double *y, double *mag)
{
    int64_t n, j, e;
    for (n = 0; n < n_rows; n++) {
        double sc = row_scale(pt, n, &e);
        for (j = 0; j < d; j++) {
            double vj = v[j];
            if (sc != 0.0) vj += sc * tu_z(&pt->base, pt->flipout, 0, d, 1, e, j, 0);
            y[n * d + j] = op == GRZO_VECTOR_MUL ? (double)x[n * d + j] * vj : (double)x[n * d + j] + vj;
            mag[n * d + j] = op == GRZO_VECTOR_MUL ? fabs((double)x[n * d + j] * vj)
                                                    : fabs((double)x[n * d + j]) + fabs(vj);
        }
    }
}

static void ref_embedding(const float *E, int64_t V, int64_t d, const int32_t *ids, int64_t n_rows,
                          const grzo_perturb *pt, double *y, double *mag)
{
    int64_t n, k, e;
    for (n = 0; n < n_rows; n++) {
        double sc = row_scale(pt, n, &e);
        int64_t row = ids[n];
        for (k = 0; k < d; k++) {
            double v = E[row * d + k];
            if (sc != 0.0) v += sc * tu_z(&pt->base, pt->flipout, 1, V, d, e, row, k);
            y[n * d + k] = v;
            mag[n * d + k] = fabs(v) + fabs(sc);
        }
    }
}

/* theta - sum_e coeff[e] Z_e - decay theta, for rows with touched != 0 (touched NULL: all) */
static void ref_update(const float *P, grzo_block_kind kind, int64_t rows, int64_t cols,
                       const grzo_noise *base, int flipout, int64_t n_ex, const double *coeff,
                       double decay, const uint8_t *touched, double *out, double *mag)
{
    int64_t j, k, e;
    for (j = 0; j < rows; j++)
        for (k = 0; k < cols; k++) {
            double p = P[j * cols + k], g = 0, m = fabs(p);
            if (!touched || touched[j]) {
                for (e = 0; e < n_ex; e++) {
                    g += coeff[e] * tu_z(base, flipout, kind != GRZO_BLOCK_VECTOR, rows, cols, e, j, k);
                    m += fabs(coeff[e]);
                }
                out[j * cols + k] = p - g - decay * p;
            } else {
                out[j * cols + k] = p;
            }
            mag[j * cols + k] = m;
        }
}

static int close_all(const char *what, const float *got, const double *want, const double *mag,
                     int64_t n, double rtol)
{
    int64_t i, bad = 0;
    for (i = 0; i < n; i++) {
        double tol = rtol * mag[i] + 1e-30;
        if (!(fabs((double)got[i] - want[i]) <= tol)) {
            if (bad < 4)
                fprintf(stderr, "  %s[%lld]: got %.9g want %.9g (diff %.3g, tol %.3g)\n", what,
                        (long long)i, (double)got[i], want[i], fabs((double)got[i] - want[i]), tol);
            bad++;
        }
    }
    if (bad) fprintf(stderr, "  %s: %lld of %lld elements off\n", what, (long long)bad, (long long)n);
    return bad == 0;
}

static int close_ff(const char *what, const float *a, const float *b, int64_t n, double rtol, double floor_)
{
    int64_t i, bad = 0;
    for (i = 0; i < n; i++) {
        double tol = rtol * (fabs((double)a[i]) + fabs((double)b[i])) + floor_;
        if (!(fabs((double)a[i] - (double)b[i]) <= tol)) {
            if (bad < 4)
                fprintf(stderr, "  %s[%lld]: %.9g vs %.9g\n", what, (long long)i, (double)a[i], (double)b[i]);
            bad++;
        }
    }
    return bad == 0;
}

/* =============================== 1. backend vtable ================================== */

typedef struct lin_case {
    int64_t rows, cols;
    int64_t nseg, B;
    const int64_t *rows_per_seg;   /* nseg entries */
    int mirror;                    /* 1: the "-" copy of example e reads the same rows as its "+" copy */
} lin_case;

static const int64_t seg_small[7] = { 2, 0, 5, 1, 4, 3, 4 };   /* 19 rows, one empty */
static const int64_t seg_big[8] = { 9, 7, 8, 0, 10, 6, 12, 12 }; /* 64 rows */
static const int64_t seg_mirror[8] = { 9, 8, 0, 12, 9, 8, 0, 12 };  /* first layer: copies alike */

/* outputs kept to compare the backends with each other */
#define N_LIN_OUT 16
static float *lin_out[NCFG][N_LIN_OUT];
static int64_t lin_out_n[N_LIN_OUT];

static void make_perturb(grzo_perturb *pt, int64_t nseg, int64_t B, const int64_t *rows_per_seg,
                         int64_t *off, int8_t *sign, int64_t *example, grzo_noise base, float sigma,
                         int flipout)
{
    int64_t c;
    memset(pt, 0, sizeof *pt);
    off[0] = 0;
    for (c = 0; c < nseg; c++) {
        off[c + 1] = off[c] + rows_per_seg[c];
        /* "+" copies of examples 0..B-1, "-" copies, then clean (sign 0) extras */
        if (c < B) { sign[c] = 1; example[c] = c; }
        else if (c < 2 * B) { sign[c] = -1; example[c] = c - B; }
        else { sign[c] = 0; example[c] = c % B; }
    }
    pt->base = base;
    pt->sigma = sigma;
    pt->flipout = flipout;
    pt->n_examples = B;
    pt->n_segments = nseg;
    pt->offsets = off;
    pt->sign = sign;
    pt->example = example;
}

/* The CPU backend's memory: zero-filled, 64-byte aligned whatever malloc's alignment, every
   byte writable (ASan checks the ends), freed by grzo_backend_free; an impossible size is
   OUT_OF_MEMORY with *out NULL. */
static void test_backend_memory(int kind, grzo_backend *be)
{
    static const size_t sizes[7] = { 0, 1, 3, 64, 4099, (size_t)1 << 20, ((size_t)1 << 20) + 5 };
    void *p[7], *big = (void *)1;
    int i;
    size_t k, nonzero = 0;
    if (kind == 0) return;   /* the reference backend promises zero-filled only */
    for (i = 0; i < 7; i++) {
        CHECK_OK(grzo_backend_alloc(be, sizes[i], &p[i]));
        CHECKF(p[i] != NULL && (uintptr_t)p[i] % 64 == 0, "%s: alloc of %zu bytes at %p, not 64-byte aligned",
               cfg_name(kind), sizes[i], p[i]);
        for (k = 0; p[i] && k < sizes[i]; k++) nonzero += ((unsigned char *)p[i])[k] != 0;
        if (p[i]) memset(p[i], 0xA5, sizes[i]);
    }
    CHECKF(nonzero == 0, "%s: %zu bytes of fresh memory not zero", cfg_name(kind), nonzero);
    for (i = 0; i < 7; i++) grzo_backend_free(be, p[i]);
    CHECK(grzo_backend_alloc(be, (size_t)-1, &big) == GRZO_ERR_OUT_OF_MEMORY && big == NULL);
    grzo_backend_free(be, NULL);
}

static void test_backend_linear(int kind, grzo_backend *be)
{
    static const lin_case cases[3] = { { 37, 53, 7, 3, seg_small, 0 }, { 96, 200, 8, 4, seg_big, 0 },
                                       { 40, 70, 8, 4, seg_mirror, 1 } };
    int ci, dist, flip, slot = 0;
    for (ci = 0; ci < 3; ci++) {
        const lin_case *lc = &cases[ci];
        int64_t n_rows = 0, c, i;
        float *W, *x, *y, *y0;
        double *yr, *mag;
        int64_t off[16], example[16];
        int8_t sign[16];
        for (c = 0; c < lc->nseg; c++) n_rows += lc->rows_per_seg[c];
        W = (float *)tu_alloc(be, (size_t)(lc->rows * lc->cols) * sizeof(float));
        x = (float *)tu_alloc(be, (size_t)(n_rows * lc->cols) * sizeof(float));
        y = (float *)tu_alloc(be, (size_t)(n_rows * lc->rows) * sizeof(float));
        y0 = (float *)tu_alloc(be, (size_t)(n_rows * lc->rows) * sizeof(float));
        yr = (double *)malloc((size_t)(n_rows * lc->rows) * sizeof(double));
        mag = (double *)malloc((size_t)(n_rows * lc->rows) * sizeof(double));
        REQUIRE(yr && mag);
        tu_fill_unif(W, (size_t)(lc->rows * lc->cols), 10 + (uint32_t)ci, -1, 1);
        tu_fill_unif(x, (size_t)(n_rows * lc->cols), 20 + (uint32_t)ci, -1, 1);
        if (lc->mirror) {   /* rows of copy B + c = rows of copy c */
            int64_t o = 0, half = 0;
            for (c = 0; c < lc->B; c++) half += lc->rows_per_seg[c];
            for (o = 0; o < half; o++)
                for (i = 0; i < lc->cols; i++) x[(half + o) * lc->cols + i] = x[o * lc->cols + i];
        }

        /* plain: perturb NULL */
        {
            grzo_linear_args a;
            memset(&a, 0, sizeof a);
            a.w.data = W; a.w.kind = GRZO_BLOCK_MATRIX; a.w.dtype = GRZO_DTYPE_F32;
            a.w.rows = lc->rows; a.w.cols = lc->cols;
            a.x = x; a.y = y0; a.n_rows = n_rows; a.perturb = NULL;
            CHECK_OK(be->iface->linear(be->self, &a));
            ref_linear(W, lc->rows, lc->cols, x, n_rows, NULL, yr, mag);
            CHECKF(close_all("linear plain", y0, yr, mag, n_rows * lc->rows, RTOL), "%s case %d", cfg_name(kind), ci);
        }
        for (dist = GRZO_NOISE_RADEMACHER; dist <= GRZO_NOISE_GAUSSIAN; dist++)
            for (flip = 1; flip >= 0; flip--) {
                grzo_perturb pt;
                grzo_linear_args a;
                grzo_noise base = tu_noise(0xfeedbeef00112233ULL, 5, 2, GRZO_STREAM_BASE, (uint32_t)dist);
                int64_t bad_sym = 0;
                make_perturb(&pt, lc->nseg, lc->B, lc->rows_per_seg, off, sign, example, base, 0.25f, flip);
                memset(&a, 0, sizeof a);
                a.w.data = W; a.w.kind = GRZO_BLOCK_MATRIX; a.w.dtype = GRZO_DTYPE_F32;
                a.w.rows = lc->rows; a.w.cols = lc->cols;
                a.x = x; a.y = y; a.n_rows = n_rows; a.perturb = &pt;
                CHECK_OK(be->iface->linear(be->self, &a));
                ref_linear(W, lc->rows, lc->cols, x, n_rows, &pt, yr, mag);
                CHECKF(close_all("linear perturbed", y, yr, mag, n_rows * lc->rows, RTOL),
                       "%s case %d dist %d flipout %d", cfg_name(kind), ci, dist, flip);
                /* the perturbation alone: y - y0 against its reference, relative to its own size */
                {
                    double *y0r = (double *)malloc((size_t)(n_rows * lc->rows) * sizeof(double));
                    double *m0 = (double *)malloc((size_t)(n_rows * lc->rows) * sizeof(double));
                    int64_t bad = 0;
                    REQUIRE(y0r && m0);
                    ref_linear(W, lc->rows, lc->cols, x, n_rows, NULL, y0r, m0);
                    for (i = 0; i < n_rows * lc->rows; i++) {
                        double want = yr[i] - y0r[i], got = (double)y[i] - (double)y0[i];
                        double tol = 2e-6 * (mag[i] + m0[i]) + 1e-5 * fabs(want);
                        if (!(fabs(got - want) <= tol)) bad++;
                    }
                    CHECKF(bad == 0, "%s case %d dist %d flip %d: %lld perturbation terms off",
                           cfg_name(kind), ci, dist, flip, (long long)bad);
                    /* sign-0 segments (clean copies) equal the plain op */
                    for (i = off[2 * lc->B] * lc->rows; i < n_rows * lc->rows; i++)
                        if (!(fabs((double)y[i] - (double)y0[i]) <= 2e-6 * m0[i] + 1e-30)) bad_sym++;
                    CHECKF(bad_sym == 0, "%s: sign-0 rows differ from the plain op at %lld elements",
                           cfg_name(kind), (long long)bad_sym);
                    free(y0r);
                    free(m0);
                }
                if (slot < N_LIN_OUT) {
                    lin_out[kind][slot] = (float *)malloc((size_t)(n_rows * lc->rows) * sizeof(float));
                    REQUIRE(lin_out[kind][slot] != NULL);
                    memcpy(lin_out[kind][slot], y, (size_t)(n_rows * lc->rows) * sizeof(float));
                    lin_out_n[slot] = n_rows * lc->rows;
                    slot++;
                }
            }
        /* sigma = 0 with a perturbation descriptor: plain */
        {
            grzo_perturb pt;
            grzo_linear_args a;
            grzo_noise base = tu_noise(1, 1, 1, 0, GRZO_NOISE_RADEMACHER);
            make_perturb(&pt, lc->nseg, lc->B, lc->rows_per_seg, off, sign, example, base, 0.0f, 1);
            memset(&a, 0, sizeof a);
            a.w.data = W; a.w.kind = GRZO_BLOCK_MATRIX; a.w.dtype = GRZO_DTYPE_F32;
            a.w.rows = lc->rows; a.w.cols = lc->cols;
            a.x = x; a.y = y; a.n_rows = n_rows; a.perturb = &pt;
            CHECK_OK(be->iface->linear(be->self, &a));
            ref_linear(W, lc->rows, lc->cols, x, n_rows, NULL, yr, mag);
            CHECKF(close_all("linear sigma=0", y, yr, mag, n_rows * lc->rows, RTOL), "%s", cfg_name(kind));
        }
        grzo_backend_free(be, W);
        grzo_backend_free(be, x);
        grzo_backend_free(be, y);
        grzo_backend_free(be, y0);
        free(yr);
        free(mag);
    }
}

#define N_VEC_OUT 8
static float *vec_out[NCFG][N_VEC_OUT];
static int64_t vec_out_n[N_VEC_OUT];

static void test_backend_vector(int kind, grzo_backend *be)
{
    const int64_t d = 45, nseg = 7, B = 3;
    int64_t n_rows = 0, c;
    int64_t off[8], example[8];
    int8_t sign[8];
    float *v, *x, *y;
    double *yr, *mag;
    int op, dist, slot = 0;
    for (c = 0; c < nseg; c++) n_rows += seg_small[c];
    v = (float *)tu_alloc(be, (size_t)d * sizeof(float));
    x = (float *)tu_alloc(be, (size_t)(n_rows * d) * sizeof(float));
    y = (float *)tu_alloc(be, (size_t)(n_rows * d) * sizeof(float));
    yr = (double *)malloc((size_t)(n_rows * d) * sizeof(double));
    mag = (double *)malloc((size_t)(n_rows * d) * sizeof(double));
    REQUIRE(yr && mag);
    tu_fill_unif(v, (size_t)d, 30, 0.5, 1.5);
    tu_fill_unif(x, (size_t)(n_rows * d), 31, -2, 2);
    for (op = GRZO_VECTOR_MUL; op <= GRZO_VECTOR_ADD; op++)
        for (dist = GRZO_NOISE_RADEMACHER; dist <= GRZO_NOISE_GAUSSIAN; dist++) {
            grzo_perturb pt;
            grzo_vector_args a;
            grzo_noise base = tu_noise(77, 9, 1, 0, (uint32_t)dist);
            make_perturb(&pt, nseg, B, seg_small, off, sign, example, base, 0.125f, 1);
            memset(&a, 0, sizeof a);
            a.v.data = v; a.v.kind = GRZO_BLOCK_VECTOR; a.v.dtype = GRZO_DTYPE_F32; a.v.rows = d; a.v.cols = 1;
            a.op = (grzo_vector_op)op; a.x = x; a.y = y; a.n_rows = n_rows; a.perturb = &pt;
            CHECK_OK(be->iface->vector(be->self, &a));
            ref_vector(v, d, (grzo_vector_op)op, x, n_rows, &pt, yr, mag);
            CHECKF(close_all("vector perturbed", y, yr, mag, n_rows * d, RTOL), "%s op %d dist %d",
                   cfg_name(kind), op, dist);
            if (slot < N_VEC_OUT) {
                vec_out[kind][slot] = (float *)malloc((size_t)(n_rows * d) * sizeof(float));
                REQUIRE(vec_out[kind][slot] != NULL);
                memcpy(vec_out[kind][slot], y, (size_t)(n_rows * d) * sizeof(float));
                vec_out_n[slot++] = n_rows * d;
            }
            /* plain */
            a.perturb = NULL;
            CHECK_OK(be->iface->vector(be->self, &a));
            ref_vector(v, d, (grzo_vector_op)op, x, n_rows, NULL, yr, mag);
            CHECKF(close_all("vector plain", y, yr, mag, n_rows * d, RTOL), "%s op %d", cfg_name(kind), op);
        }
    grzo_backend_free(be, v);
    grzo_backend_free(be, x);
    grzo_backend_free(be, y);
    free(yr);
    free(mag);
}

static float *emb_out[NCFG];
static int64_t emb_out_n;

static void test_backend_embedding(int kind, grzo_backend *be)
{
    const int64_t V = 29, d = 11, nseg = 7, B = 3;
    int64_t n_rows = 0, c, i;
    int64_t off[8], example[8];
    int8_t sign[8];
    float *E, *y;
    int32_t *ids;
    uint8_t *touched;
    double *yr, *mag;
    uint8_t want_touched[29];
    grzo_perturb pt;
    grzo_embedding_args a;
    grzo_noise base = tu_noise(0xabcULL, 3, 4, 0, GRZO_NOISE_RADEMACHER);
    int bad_touch = 0;
    for (c = 0; c < nseg; c++) n_rows += seg_small[c];
    E = (float *)tu_alloc(be, (size_t)(V * d) * sizeof(float));
    y = (float *)tu_alloc(be, (size_t)(n_rows * d) * sizeof(float));
    ids = (int32_t *)tu_alloc(be, (size_t)n_rows * sizeof(int32_t));
    touched = (uint8_t *)tu_alloc(be, (size_t)V);
    yr = (double *)malloc((size_t)(n_rows * d) * sizeof(double));
    mag = (double *)malloc((size_t)(n_rows * d) * sizeof(double));
    REQUIRE(yr && mag);
    tu_fill_unif(E, (size_t)(V * d), 40, -1, 1);
    memset(want_touched, 0, sizeof want_touched);
    for (i = 0; i < n_rows; i++) {
        /* ids from a subset (even rows below 20 and row 28), with repeats */
        int32_t id = (int32_t)(2 * (int64_t)floor(tu_unif(41, (uint64_t)i, 0, 10)));
        if (i == 3) id = 28;
        ids[i] = id;
        want_touched[id] = 1;
    }
    memset(touched, 0, (size_t)V);
    make_perturb(&pt, nseg, B, seg_small, off, sign, example, base, 0.25f, 1);
    memset(&a, 0, sizeof a);
    a.e.data = E; a.e.kind = GRZO_BLOCK_EMBEDDING; a.e.dtype = GRZO_DTYPE_F32; a.e.rows = V; a.e.cols = d;
    a.ids = ids; a.y = y; a.n_rows = n_rows; a.touched = touched; a.perturb = &pt;
    CHECK_OK(be->iface->embedding(be->self, &a));
    ref_embedding(E, V, d, ids, n_rows, &pt, yr, mag);
    CHECKF(close_all("embedding perturbed", y, yr, mag, n_rows * d, RTOL), "%s", cfg_name(kind));
    for (i = 0; i < V; i++)
        if ((touched[i] != 0) != (want_touched[i] != 0)) bad_touch++;
    CHECKF(bad_touch == 0, "%s: %d rows with a wrong touched flag", cfg_name(kind), bad_touch);
    emb_out[kind] = (float *)malloc((size_t)(n_rows * d) * sizeof(float));
    REQUIRE(emb_out[kind] != NULL);
    memcpy(emb_out[kind], y, (size_t)(n_rows * d) * sizeof(float));
    emb_out_n = n_rows * d;
    /* plain, touched NULL */
    a.perturb = NULL;
    a.touched = NULL;
    CHECK_OK(be->iface->embedding(be->self, &a));
    ref_embedding(E, V, d, ids, n_rows, NULL, yr, mag);
    CHECKF(close_all("embedding plain", y, yr, mag, n_rows * d, RTOL), "%s", cfg_name(kind));
    {   /* an id out of range in the first row or the last: refused, naming the row, nothing written */
        int end;
        float *y0 = (float *)malloc((size_t)(n_rows * d) * sizeof(float));
        REQUIRE(y0 != NULL);
        a.perturb = &pt;
        a.touched = touched;
        for (end = 0; end < 2; end++) {
            int64_t row = end ? n_rows - 1 : 0;
            int32_t keep = ids[row];
            char want[64];
            ids[row] = end ? (int32_t)V : -1;
            memset(touched, 0, (size_t)V);
            memcpy(y0, y, (size_t)(n_rows * d) * sizeof(float));
            snprintf(want, sizeof want, "token id %ld at row %lld out of range", (long)ids[row], (long long)row);
            CHECK(be->iface->embedding(be->self, &a) == GRZO_ERR_INVALID_ARG);
            CHECKF(strstr(be->iface->last_error(be->self), want) != NULL, "%s: '%s' says '%s'", cfg_name(kind),
                   be->iface->last_error(be->self), want);
            for (bad_touch = 0, i = 0; i < V; i++) bad_touch += touched[i] != 0;
            CHECKF(memcmp(y0, y, (size_t)(n_rows * d) * sizeof(float)) == 0 && bad_touch == 0,
                   "%s: a refused embedding wrote y or marked rows", cfg_name(kind));
            ids[row] = keep;
        }
        free(y0);
    }
    grzo_backend_free(be, E);
    grzo_backend_free(be, y);
    grzo_backend_free(be, ids);
    grzo_backend_free(be, touched);
    free(yr);
    free(mag);
}

#define N_UPD_OUT 8
static float *upd_out[NCFG][N_UPD_OUT];
static int64_t upd_out_n[N_UPD_OUT];

static void test_backend_update(int kind, grzo_backend *be)
{
    /* B: a partial group of four examples (5), whole groups (16), S's sign bits in two words (37) */
    struct { grzo_block_kind kind; int64_t rows, cols; int flipout; int dist; int sparse; int64_t B; } cs[8] = {
        { GRZO_BLOCK_MATRIX, 37, 53, 1, GRZO_NOISE_RADEMACHER, 0, 5 },
        { GRZO_BLOCK_MATRIX, 96, 200, 1, GRZO_NOISE_GAUSSIAN, 0, 5 },
        { GRZO_BLOCK_MATRIX, 37, 53, 0, GRZO_NOISE_RADEMACHER, 0, 5 },
        { GRZO_BLOCK_VECTOR, 45, 1, 1, GRZO_NOISE_RADEMACHER, 0, 5 },
        { GRZO_BLOCK_EMBEDDING, 29, 11, 1, GRZO_NOISE_RADEMACHER, 1, 5 },
        { GRZO_BLOCK_EMBEDDING, 29, 11, 1, GRZO_NOISE_GAUSSIAN, 0, 5 },
        { GRZO_BLOCK_MATRIX, 19, 77, 1, GRZO_NOISE_RADEMACHER, 0, 16 },
        { GRZO_BLOCK_MATRIX, 23, 41, 1, GRZO_NOISE_GAUSSIAN, 0, 37 } };
    int t;
    for (t = 0; t < 8; t++) {
        int64_t rows = cs[t].rows, cols = cs[t].cols, n = rows * cols, B = cs[t].B, e, j;
        float *P = (float *)tu_alloc(be, (size_t)n * sizeof(float));
        float *P0 = (float *)malloc((size_t)n * sizeof(float));
        float coeff[37];
        double dcoeff[37], *want = (double *)malloc((size_t)n * sizeof(double)),
                          *mag = (double *)malloc((size_t)n * sizeof(double));
        uint8_t *touched = NULL, touched_copy[64];
        grzo_update_args u;
        grzo_noise base = tu_noise(0x1111222233334444ULL, 12, (uint32_t)t, 0, (uint32_t)cs[t].dist);
        int64_t n_ex = cs[t].flipout ? B : 1, untouched_changed = 0, map_changed = 0;
        REQUIRE(P0 && want && mag);
        tu_fill_unif(P, (size_t)n, 50 + (uint32_t)t, -1, 1);
        memcpy(P0, P, (size_t)n * sizeof(float));
        for (e = 0; e < B; e++) {
            coeff[e] = (float)tu_unif(60, (uint64_t)(t * 64 + e), -0.3, 0.3);
            dcoeff[e] = coeff[e];
        }
        if (cs[t].sparse) {
            touched = (uint8_t *)tu_alloc(be, (size_t)rows);
            for (j = 0; j < rows; j++) touched[j] = (uint8_t)(j % 3 == 1 || j == 0);
            memcpy(touched_copy, touched, (size_t)rows);
        }
        memset(&u, 0, sizeof u);
        u.p.data = P; u.p.kind = cs[t].kind; u.p.dtype = GRZO_DTYPE_F32; u.p.rows = rows; u.p.cols = cols;
        u.base = base; u.flipout = cs[t].flipout; u.n_examples = n_ex; u.coeff = coeff;
        u.decay = cs[t].kind == GRZO_BLOCK_VECTOR ? 0.0f : 0.01f;
        u.touched = touched;
        CHECK_OK(be->iface->update(be->self, &u));
        ref_update(P0, cs[t].kind, rows, cols, &base, cs[t].flipout, n_ex, dcoeff, (double)u.decay,
                   touched ? touched_copy : NULL, want, mag);
        CHECKF(close_all("update", P, want, mag, n, RTOL), "%s case %d", cfg_name(kind), t);
        if (touched) {
            for (j = 0; j < rows; j++) {
                if (!touched_copy[j] && memcmp(P + j * cols, P0 + j * cols, (size_t)cols * sizeof(float)) != 0)
                    untouched_changed++;
                if (touched[j] != touched_copy[j]) map_changed++;
            }
            CHECKF(untouched_changed == 0, "%s: %lld untouched embedding rows changed", cfg_name(kind),
                   (long long)untouched_changed);
            /* the backend leaves the map as it is (the core clears it) */
            CHECKF(map_changed == 0, "%s: the update changed %lld bytes of the touched map", cfg_name(kind),
                   (long long)map_changed);
            grzo_backend_free(be, touched);
        }
        /* the update must actually move every updated element's block (guards a no-op) */
        CHECK(memcmp(P, P0, (size_t)n * sizeof(float)) != 0);
        if (t < N_UPD_OUT) {
            upd_out[kind][t] = (float *)malloc((size_t)n * sizeof(float));
            REQUIRE(upd_out[kind][t] != NULL);
            memcpy(upd_out[kind][t], P, (size_t)n * sizeof(float));
            upd_out_n[t] = n;
        }
        /* perturbed_copy: out = theta + scale Z_example */
        {
            float *out = (float *)tu_alloc(be, (size_t)n * sizeof(float));
            grzo_copy_args ca;
            int64_t k, bad = 0;
            memset(&ca, 0, sizeof ca);
            ca.p = u.p;
            ca.base = base;
            ca.flipout = cs[t].flipout;
            ca.example = 3;
            ca.scale = -0.0625f;
            ca.out = out;
            CHECK_OK(be->iface->perturbed_copy(be->self, &ca));
            for (j = 0; j < rows; j++)
                for (k = 0; k < cols; k++) {
                    double w = (double)P[j * cols + k] +
                               (double)ca.scale * tu_z(&base, ca.flipout, cs[t].kind != GRZO_BLOCK_VECTOR, rows, cols, 3, j, k);
                    if (!(fabs((double)out[j * cols + k] - w) <= 1e-6 * (fabs(w) + 0.0625 * 4))) bad++;
                }
            CHECKF(bad == 0, "%s case %d: perturbed_copy off at %lld elements", cfg_name(kind), t, (long long)bad);
            grzo_backend_free(be, out);
        }
        grzo_backend_free(be, P);
        free(P0);
        free(want);
        free(mag);
    }
}

/* =============================== 2. through the context ================================ */

enum { NB = 4 };
typedef struct model {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_block blk[NB];
    float *data[NB];
    int64_t rows[NB], cols[NB];
    grzo_block_kind kind[NB];
} model;

static const int64_t M_ROWS[NB] = { 6, 6, 10, 4 };
static const int64_t M_COLS[NB] = { 5, 1, 5, 6 };
static const grzo_block_kind M_KIND[NB] = { GRZO_BLOCK_MATRIX, GRZO_BLOCK_VECTOR, GRZO_BLOCK_EMBEDDING, GRZO_BLOCK_MATRIX };

static void model_init(model *m, int kind, grzo_estimator est, int dist)
{
    grzo_desc d;
    int b;
    REQUIRE_OK(make_backend(kind, &m->be));
    tu_require_host_memory(&m->be, "test_ops");
    d = tu_desc(&m->be, est, 0x0123456789ULL, 0.05f, 0.25f);
    d.noise = (grzo_noise_dist)dist;
    d.weight_decay = 0.1f;
    d.fzoo_probes = 3;
    m->ctx = tu_ctx(&d);
    for (b = 0; b < NB; b++) {
        static const char *names[NB] = { "fc", "bias", "emb", "head" };
        m->rows[b] = M_ROWS[b];
        m->cols[b] = M_COLS[b];
        m->kind[b] = M_KIND[b];
        m->data[b] = (float *)tu_alloc(&m->be, (size_t)(M_ROWS[b] * M_COLS[b]) * sizeof(float));
        tu_fill_unif(m->data[b], (size_t)(M_ROWS[b] * M_COLS[b]), 70 + (uint32_t)b, b == 1 ? 0.5 : -1, 1);
        m->blk[b] = tu_block(m->ctx, M_KIND[b], M_ROWS[b], M_COLS[b], m->data[b], names[b], b == 3);
        CHECKF(m->blk[b].id == (uint32_t)b + 1, "block %d got id %u", b, (unsigned)m->blk[b].id);
    }
}

static void model_free(model *m)
{
    int b;
    grzo_destroy(m->ctx);
    for (b = 0; b < NB; b++) grzo_backend_free(&m->be, m->data[b]);
    grzo_backend_destroy(&m->be);
}

/* rows of segment c in pass p of step s: uneven, sometimes 0 */
static int64_t seg_rows(int64_t s, int32_t p, int64_t c) { return (c * 7 + 3 * p + s) % 4; }

/* The test's forward ops over segments [c0, c1) of the pass alone (grzo_rows.first_segment;
   n_segments 0 when to_end), rows off[c0]..off[c1] of ids and of the activations H[0..4]. */
static void ctx_ops_piece(model *m, const int32_t *ids, float *const *H, const int64_t *off, int64_t c0, int64_t c1,
                          int to_end)
{
    int64_t rel[64], c, r0 = off[c0];
    grzo_rows rows = {0};
    for (c = c0; c <= c1; c++) rel[c - c0] = off[c] - r0;
    rows.n_rows = off[c1] - r0;
    rows.offsets = rel;
    rows.first_segment = c0;
    rows.n_segments = to_end ? 0 : c1 - c0;
    CHECK_OK(grzo_embedding(m->ctx, m->blk[2], ids + r0, H[0] + r0 * 5, &rows));
    CHECK_OK(grzo_linear(m->ctx, m->blk[0], H[0] + r0 * 5, H[1] + r0 * 6, &rows));
    CHECK_OK(grzo_vector(m->ctx, m->blk[1], GRZO_VECTOR_ADD, H[1] + r0 * 6, H[2] + r0 * 6, &rows));
    CHECK_OK(grzo_vector(m->ctx, m->blk[1], GRZO_VECTOR_MUL, H[2] + r0 * 6, H[3] + r0 * 6, &rows));
    CHECK_OK(grzo_linear(m->ctx, m->blk[3], H[3] + r0 * 6, H[4] + r0 * 4, &rows));
}

/* one step through the context API; checks every op output against the reference. With
   pieces, each pass runs as up to three pieces of its segments (the first alone, then up to
   half, then the rest), as a forward that bounds its activations would. Returns the losses of
   each pass (n_passes x n_segments) in L. */
static void ctx_step(model *m, int kind, grzo_estimator est, int dist, int64_t B, int check, int pieces,
                     float *L, grzo_step_info *si_out, uint8_t *emb_rows_used)
{
    grzo_step_info si;
    int32_t p;
    grzo_desc d;
    REQUIRE_OK(grzo_get_desc(m->ctx, &d));
    REQUIRE_OK(grzo_step_begin(m->ctx, B, &si));
    *si_out = si;
    for (p = 0; p < si.n_passes; p++) {
        grzo_pass_info pi;
        int64_t off[64], c, n_rows, i;
        int32_t *ids;
        float *H0, *H1, *H2, *H3, *H4;
        double *yr, *mag;
        grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
        grzo_perturb pt;
        float *losses;
        REQUIRE_OK(grzo_pass_begin(m->ctx, &pi));
        REQUIRE(pi.n_segments < 63);
        CHECK(pi.index == p);
        off[0] = 0;
        for (c = 0; c < pi.n_segments; c++) off[c + 1] = off[c] + seg_rows(si.step, p, c);
        n_rows = off[pi.n_segments];
        ids = (int32_t *)tu_alloc(&m->be, (size_t)(n_rows + 1) * sizeof(int32_t));
        H0 = (float *)tu_alloc(&m->be, (size_t)(n_rows * 5 + 1) * sizeof(float));
        H1 = (float *)tu_alloc(&m->be, (size_t)(n_rows * 6 + 1) * sizeof(float));
        H2 = (float *)tu_alloc(&m->be, (size_t)(n_rows * 6 + 1) * sizeof(float));
        H3 = (float *)tu_alloc(&m->be, (size_t)(n_rows * 6 + 1) * sizeof(float));
        H4 = (float *)tu_alloc(&m->be, (size_t)(n_rows * 4 + 1) * sizeof(float));
        yr = (double *)malloc((size_t)(n_rows * 6 + 1) * sizeof(double));
        mag = (double *)malloc((size_t)(n_rows * 6 + 1) * sizeof(double));
        losses = (float *)malloc((size_t)pi.n_segments * sizeof(float));
        REQUIRE(yr && mag && losses);
        for (i = 0; i < n_rows; i++) {
            /* a different subset of the 10 embedding rows each step: rows gathered in an
               earlier step must not be updated again (the core clears its row map) */
            static const int32_t pool[2][4] = { { 1, 2, 5, 7 }, { 0, 3, 5, 8 } };
            ids[i] = pool[si.step % 2][(size_t)floor(tu_unif(80, (uint64_t)(si.step * 1000 + p * 100 + i), 0, 4))];
            emb_rows_used[ids[i]] = 1;
        }
        rows.n_rows = n_rows;
        rows.offsets = off;
        if (pieces) {
            float *const H[5] = { H0, H1, H2, H3, H4 };
            int64_t n = pi.n_segments, half = n / 2 > 2 ? n / 2 : 2;
            ctx_ops_piece(m, ids, H, off, 0, 1, n == 1);
            if (n > 1) ctx_ops_piece(m, ids, H, off, 1, half < n ? half : n, half >= n);
            if (half < n) ctx_ops_piece(m, ids, H, off, half, n, 1);
        } else {
            CHECK_OK(grzo_embedding(m->ctx, m->blk[2], ids, H0, &rows));
            CHECK_OK(grzo_linear(m->ctx, m->blk[0], H0, H1, &rows));
            CHECK_OK(grzo_vector(m->ctx, m->blk[1], GRZO_VECTOR_ADD, H1, H2, &rows));
            CHECK_OK(grzo_vector(m->ctx, m->blk[1], GRZO_VECTOR_MUL, H2, H3, &rows));
            CHECK_OK(grzo_linear(m->ctx, m->blk[3], H3, H4, &rows));
        }
        if (check) {
            /* the perturbation the context must have used for block b */
            int b;
            for (b = 0; b < NB; b++) {
                memset(&pt, 0, sizeof pt);
                pt.base = tu_noise(d.seed, (uint32_t)si.step, (uint32_t)b,
                                   est == GRZO_ESTIMATOR_FZOO && p > 0 ? GRZO_STREAM_FZOO0 + (uint32_t)(p - 1) : GRZO_STREAM_BASE,
                                   (uint32_t)dist);
                pt.sigma = d.sigma;
                pt.flipout = est == GRZO_ESTIMATOR_GRZO || est == GRZO_ESTIMATOR_CANONICAL;
                pt.n_examples = B;
                pt.n_segments = pi.n_segments;
                pt.offsets = off;
                pt.sign = pi.sign;
                pt.example = pi.example;
                switch (b) {
                case 2:
                    ref_embedding(m->data[2], 10, 5, ids, n_rows, &pt, yr, mag);
                    CHECKF(close_all("ctx embedding", H0, yr, mag, n_rows * 5, RTOL), "%s est %d pass %d",
                           cfg_name(kind), (int)est, p);
                    break;
                case 0:
                    ref_linear(m->data[0], 6, 5, H0, n_rows, &pt, yr, mag);
                    CHECKF(close_all("ctx linear fc", H1, yr, mag, n_rows * 6, RTOL), "%s est %d pass %d",
                           cfg_name(kind), (int)est, p);
                    break;
                case 1:
                    ref_vector(m->data[1], 6, GRZO_VECTOR_ADD, H1, n_rows, &pt, yr, mag);
                    CHECKF(close_all("ctx vector add", H2, yr, mag, n_rows * 6, RTOL), "%s est %d pass %d",
                           cfg_name(kind), (int)est, p);
                    ref_vector(m->data[1], 6, GRZO_VECTOR_MUL, H2, n_rows, &pt, yr, mag);
                    CHECKF(close_all("ctx vector mul", H3, yr, mag, n_rows * 6, RTOL), "%s est %d pass %d",
                           cfg_name(kind), (int)est, p);
                    break;
                default:
                    ref_linear(m->data[3], 4, 6, H3, n_rows, &pt, yr, mag);
                    CHECKF(close_all("ctx linear head", H4, yr, mag, n_rows * 4, RTOL), "%s est %d pass %d",
                           cfg_name(kind), (int)est, p);
                    break;
                }
            }
        }
        /* losses: chosen by the test (a deterministic function of step, pass, segment) so
           that the update formula is checked on known numbers */
        for (c = 0; c < pi.n_segments; c++)
            losses[c] = (float)tu_unif(90, (uint64_t)(si.step * 1000 + p * 100 + c), 0.5, 2.5);
        memcpy(L + (size_t)p * (size_t)pi.n_segments, losses, (size_t)pi.n_segments * sizeof(float));
        CHECK_OK(grzo_pass_end(m->ctx, losses));
        grzo_backend_free(&m->be, ids);
        grzo_backend_free(&m->be, H0);
        grzo_backend_free(&m->be, H1);
        grzo_backend_free(&m->be, H2);
        grzo_backend_free(&m->be, H3);
        grzo_backend_free(&m->be, H4);
        free(yr);
        free(mag);
        free(losses);
    }
}

/* the update the estimator must apply, from the losses (SPEC / header section 3) */
static void expected_update(const model *m, grzo_estimator est, int dist, const grzo_desc *d,
                            const grzo_step_info *si, const float *L, float *const *before,
                            const uint8_t *emb_rows_used, int b, double *want, double *mag)
{
    int64_t B = si->n_examples, i;
    double lr = si->lr, decay = (m->kind[b] == GRZO_BLOCK_VECTOR || b == 3) ? 0.0 : lr * d->weight_decay;
    const uint8_t *touched = m->kind[b] == GRZO_BLOCK_EMBEDDING ? emb_rows_used : NULL;
    if (est == GRZO_ESTIMATOR_GRZO || est == GRZO_ESTIMATOR_SHARED || est == GRZO_ESTIMATOR_CANONICAL) {
        double delta[64], coeff[64], mean = 0, var = 0, ms = 0, s;
        for (i = 0; i < B; i++) {
            /* copies 0..B-1 are "+", B..2B-1 "-" (checked elsewhere) */
            delta[i] = (double)L[i] - (double)L[B + i];
            mean += delta[i];
            ms += delta[i] * delta[i];
        }
        mean /= (double)B;
        ms /= (double)B;
        for (i = 0; i < B; i++) var += (delta[i] - mean) * (delta[i] - mean);
        s = sqrt(var / (double)B);
        if (s <= 1e-6 * sqrt(ms)) s = sqrt(ms);
        for (i = 0; i < B; i++) {
            double a = est == GRZO_ESTIMATOR_CANONICAL ? delta[i] : delta[i] / (s + d->norm_eps);
            coeff[i] = lr / (2.0 * d->sigma * (double)B) * a;
        }
        {
            grzo_noise base = tu_noise(d->seed, (uint32_t)si->step, (uint32_t)b, 0, (uint32_t)dist);
            if (est == GRZO_ESTIMATOR_SHARED) {
                double sum = 0;
                for (i = 0; i < B; i++) sum += coeff[i];
                ref_update(before[b], m->kind[b], m->rows[b], m->cols[b], &base, 0, 1, &sum, decay, touched, want, mag);
            } else {
                ref_update(before[b], m->kind[b], m->rows[b], m->cols[b], &base, 1, B, coeff, decay, touched, want, mag);
            }
        }
    } else if (est == GRZO_ESTIMATOR_MEZO) {
        double lp = 0, lm = 0, g, coeff;
        grzo_noise base = tu_noise(d->seed, (uint32_t)si->step, (uint32_t)b, 0, (uint32_t)dist);
        for (i = 0; i < B; i++) { lp += L[i]; lm += L[B + i]; }   /* pass 0 is "+" (checked) */
        g = (lp / (double)B - lm / (double)B) / (2.0 * d->sigma);
        coeff = lr * g;
        ref_update(before[b], m->kind[b], m->rows[b], m->cols[b], &base, 0, 1, &coeff, decay, touched, want, mag);
    } else { /* FZOO: pass 0 clean, passes 1..N probes (checked) */
        int32_t N = d->fzoo_probes, j;
        double l[16], mean = 0, var = 0, s;
        int64_t n = m->rows[b] * m->cols[b], k;
        double *tmp = (double *)malloc((size_t)n * sizeof(double)), *tmag = (double *)malloc((size_t)n * sizeof(double));
        float *cur = (float *)malloc((size_t)n * sizeof(float));
        REQUIRE(tmp && tmag && cur && N < 16);
        for (j = 0; j <= N; j++) {
            l[j] = 0;
            for (i = 0; i < B; i++) l[j] += L[(size_t)j * (size_t)B + (size_t)i];
            l[j] /= (double)B;
        }
        for (j = 1; j <= N; j++) mean += l[j] - l[0];
        mean /= N;
        for (j = 1; j <= N; j++) var += (l[j] - l[0] - mean) * (l[j] - l[0] - mean);
        s = sqrt(var / N);
        for (k = 0; k < n; k++) { want[k] = before[b][k]; mag[k] = fabs(want[k]); }
        /* theta - lr sum_j c_j u_j - decay theta */
        for (j = 1; j <= N; j++) {
            double cj = lr * (l[j] - l[0]) / (N * s);
            grzo_noise base = tu_noise(d->seed, (uint32_t)si->step, (uint32_t)b, GRZO_STREAM_FZOO0 + (uint32_t)(j - 1), (uint32_t)dist);
            for (k = 0; k < n; k++) cur[k] = 0.0f;
            ref_update(cur, m->kind[b], m->rows[b], m->cols[b], &base, 0, 1, &cj, 0.0, touched, tmp, tmag);
            for (k = 0; k < n; k++) { want[k] += tmp[k]; mag[k] += tmag[k]; }
        }
        for (k = 0; k < n; k++)
            if (!touched || touched[k / m->cols[b]]) want[k] -= decay * before[b][k];
        free(tmp);
        free(tmag);
        free(cur);
    }
}

static float *ctx_final[NCFG][GRZO_ESTIMATOR_COUNT][NB];

static void test_ctx(int kind)
{
    static const grzo_estimator ests[4] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_SHARED, GRZO_ESTIMATOR_MEZO,
                                            GRZO_ESTIMATOR_FZOO };
    int ei;
    for (ei = 0; ei < 4; ei++) {
        grzo_estimator est = ests[ei];
        int dist = ei == 1 ? GRZO_NOISE_GAUSSIAN : GRZO_NOISE_RADEMACHER;
        model m;
        int64_t B = 3, s;
        float L[64];
        grzo_desc d;
        model_init(&m, kind, est, dist);
        REQUIRE_OK(grzo_get_desc(m.ctx, &d));
        for (s = 0; s < 2; s++) {
            grzo_step_info si;
            grzo_step_report rep;
            uint8_t used[10];
            float *before[NB];
            int b;
            memset(used, 0, sizeof used);
            for (b = 0; b < NB; b++) {
                size_t nb = (size_t)(m.rows[b] * m.cols[b]) * sizeof(float);
                before[b] = (float *)malloc(nb);
                REQUIRE(before[b] != NULL);
                memcpy(before[b], m.data[b], nb);
            }
            ctx_step(&m, kind, est, dist, B, 1, s == 1, L, &si, used);   /* the second step in pieces */
            CHECK(si.step == s);
            CHECK_OK(grzo_step_end(m.ctx, &rep));
            CHECK(rep.step == s);
            CHECK(grzo_get_step(m.ctx) == s + 1);
            for (b = 0; b < NB; b++) {
                int64_t n = m.rows[b] * m.cols[b], j, changed_untouched = 0;
                double *want = (double *)malloc((size_t)n * sizeof(double)), *mag = (double *)malloc((size_t)n * sizeof(double));
                REQUIRE(want && mag);
                expected_update(&m, est, dist, &d, &si, L, before, used, b, want, mag);
                CHECKF(close_all("ctx update", m.data[b], want, mag, n, RTOL), "%s estimator %d step %lld block %d",
                       cfg_name(kind), (int)est, (long long)s, b);
                CHECK(memcmp(m.data[b], before[b], (size_t)n * sizeof(float)) != 0);
                if (m.kind[b] == GRZO_BLOCK_EMBEDDING) {
                    for (j = 0; j < m.rows[b]; j++)
                        if (!used[j] && memcmp(m.data[b] + j * m.cols[b], before[b] + j * m.cols[b],
                                               (size_t)m.cols[b] * sizeof(float)) != 0)
                            changed_untouched++;
                    CHECKF(changed_untouched == 0, "%s estimator %d: %lld embedding rows not gathered this step changed",
                           cfg_name(kind), (int)est, (long long)changed_untouched);
                }
                free(want);
                free(mag);
                free(before[b]);
            }
        }
        /* pass layouts as documented */
        {
            grzo_step_info si;
            grzo_pass_info pi;
            int64_t c;
            REQUIRE_OK(grzo_step_begin(m.ctx, B, &si));
            REQUIRE_OK(grzo_pass_begin(m.ctx, &pi));
            if (est == GRZO_ESTIMATOR_GRZO || est == GRZO_ESTIMATOR_SHARED) {
                CHECK(si.n_passes == 1 && si.copies_per_pass == 2 && pi.n_copies == 2 && pi.n_segments == 2 * B);
                for (c = 0; c < 2 * B; c++) {
                    CHECK(pi.example[c] == c % B);
                    CHECK(pi.sign[c] == (c < B ? 1 : -1));
                }
            } else if (est == GRZO_ESTIMATOR_MEZO) {
                CHECK(si.n_passes == 2 && si.copies_per_pass == 1 && pi.n_segments == B);
                for (c = 0; c < B; c++) CHECK(pi.example[c] == c && pi.sign[c] == 1);
                {
                    float z[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
                    REQUIRE_OK(grzo_pass_end(m.ctx, z));
                    REQUIRE_OK(grzo_pass_begin(m.ctx, &pi));
                    for (c = 0; c < B; c++) CHECK(pi.example[c] == c && pi.sign[c] == -1);
                }
            } else {
                CHECK(si.n_passes == d.fzoo_probes + 1 && si.copies_per_pass == 1 && pi.n_segments == B);
                for (c = 0; c < B; c++) CHECK(pi.example[c] == c && pi.sign[c] == 0);
                {
                    float z[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
                    REQUIRE_OK(grzo_pass_end(m.ctx, z));
                    REQUIRE_OK(grzo_pass_begin(m.ctx, &pi));
                    for (c = 0; c < B; c++) CHECK(pi.example[c] == c && pi.sign[c] == 1);
                }
            }
            CHECK_OK(grzo_step_abort(m.ctx));
        }
        {
            int b;
            for (b = 0; b < NB; b++) {
                size_t nb = (size_t)(m.rows[b] * m.cols[b]) * sizeof(float);
                ctx_final[kind][est][b] = (float *)malloc(nb);
                REQUIRE(ctx_final[kind][est][b] != NULL);
                memcpy(ctx_final[kind][est][b], m.data[b], nb);
            }
        }
        model_free(&m);
    }
}

/* plain ops outside a step equal the unperturbed reference */
static void test_plain_outside_step(int kind)
{
    model m;
    int64_t n_rows = 5, i;
    float *x, *y;
    double yr[64], mag[64];
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    model_init(&m, kind, GRZO_ESTIMATOR_GRZO, GRZO_NOISE_RADEMACHER);
    x = (float *)tu_alloc(&m.be, (size_t)(n_rows * 5) * sizeof(float));
    y = (float *)tu_alloc(&m.be, (size_t)(n_rows * 6) * sizeof(float));
    tu_fill_unif(x, (size_t)(n_rows * 5), 99, -1, 1);
    rows.n_rows = n_rows;
    rows.offsets = NULL;
    rows.first_segment = 7;   /* no pass, no segments: ignored */
    rows.n_segments = 9;
    CHECK_OK(grzo_linear(m.ctx, m.blk[0], x, y, &rows));
    ref_linear(m.data[0], 6, 5, x, n_rows, NULL, yr, mag);
    CHECK(close_all("plain linear via ctx", y, yr, mag, n_rows * 6, RTOL));
    for (i = 0; i < n_rows * 6; i++) CHECK(isfinite(y[i]));
    grzo_backend_free(&m.be, x);
    grzo_backend_free(&m.be, y);
    model_free(&m);
}

/* The sign-table update of one row (backends/grzo_cpu.h) for B coefficients and `cols`
   columns, U as bits or floats: the AVX2 and AVX-512 versions give the reference's bits
   (ran[1], ran[2] count them), and the reference is p - u sum_e c_e s_ek - decay p within
   rounding. seed picks the case's random operands. */
static void check_update_row(int64_t B, int64_t cols, int bits, float decay, uint64_t seed, int simd, int ran[3])
{
    int64_t nwords = (B + 31) / 32, groups = (B + 3) / 4, e, k, bad = 0;
    const size_t row_bytes = (size_t)cols * sizeof(float), tab_bytes = (size_t)(16 * groups) * sizeof(float);
    float *c = (float *)calloc((size_t)(4 * groups), sizeof(float)), *tab = (float *)malloc(tab_bytes);
    float *tab512 = (float *)malloc(tab_bytes), *u = (float *)malloc(row_bytes), *p0 = (float *)malloc(row_bytes);
    float *p = (float *)malloc(row_bytes), *q = (float *)malloc(row_bytes);
    uint32_t *sb = (uint32_t *)calloc((size_t)(nwords * cols), sizeof(uint32_t));
    uint32_t *ub = (uint32_t *)malloc((size_t)((cols + 31) / 32) * sizeof(uint32_t)), *bits_or_null;
    const float *u_or_null;
    REQUIRE(c && tab && tab512 && u && p0 && p && q && sb && ub);
    for (e = 0; e < B; e++) c[e] = (float)tu_unif(70, seed * 1000 + (uint64_t)e, -1.0, 1.0);
    for (e = 0; e < B; e++)
        for (k = 0; k < cols; k++)
            if (tu_unif(71, (seed * 100 + (uint64_t)e) * 1000 + (uint64_t)k, 0.0, 1.0) < 0.5)
                sb[e / 32 * cols + k] |= 1u << (e % 32);
    for (k = 0; k < (cols + 31) / 32; k++) ub[k] = (uint32_t)(tu_unif(72, seed * 100 + (uint64_t)k, 0.0, 1.0) * 4294967296.0);
    tu_fill_unif(u, (size_t)cols, 73, -2, 2);
    tu_fill_unif(p0, (size_t)cols, 74, -1, 1);
    bits_or_null = bits ? ub : NULL;
    u_or_null = bits ? NULL : u;
    grzo__sign_tables(c, (int)groups, tab);
    memcpy(p, p0, row_bytes);
    grzo__apply_row_tables_ref(p, u_or_null, bits_or_null, tab, (int)groups, sb, cols, 0, cols, decay);
    ran[0]++;
#ifdef GRZO__SIGN_TABLE_SIMD
    if (simd >= 2) {
        memcpy(q, p0, row_bytes);
        grzo__apply_row_tables_avx2(q, u_or_null, bits_or_null, tab, (int)groups, sb, cols, cols, decay);
        CHECKF(memcmp(q, p, row_bytes) == 0, "update row AVX2: B %lld, %lld columns, U bits %d differs from the "
               "reference", (long long)B, (long long)cols, bits);
        ran[1]++;
    }
    if (simd >= 3) {
        grzo__sign_tables_avx512(c, (int)groups, tab512);
        CHECKF(memcmp(tab512, tab, tab_bytes) == 0, "sign tables AVX-512: B %lld differ from the reference", (long long)B);
        memcpy(q, p0, row_bytes);
        grzo__apply_row_tables_avx512(q, u_or_null, bits_or_null, tab512, (int)groups, sb, cols, cols, decay, NULL);
        CHECKF(memcmp(q, p, row_bytes) == 0, "update row AVX-512: B %lld, %lld columns, U bits %d differs from the "
               "reference", (long long)B, (long long)cols, bits);
        ran[2]++;
    }
#else
    (void)simd;
#endif
    for (k = 0; k < cols; k++) {   /* the reference against the sum in double */
        double m = 0.0, mag = 0.0, uk = bits ? ((ub[k / 32] >> (k % 32)) & 1u ? -1.0 : 1.0) : (double)u[k], want;
        for (e = 0; e < B; e++) {
            m += (sb[e / 32 * cols + k] >> (e % 32) & 1u ? -1.0 : 1.0) * (double)c[e];
            mag += fabs((double)c[e]);
        }
        want = (double)p0[k] - uk * m - (double)decay * (double)p0[k];
        bad += fabs((double)p[k] - want) > (double)(B + 3) * 6e-8 * (fabs(uk) * mag + fabs((double)p0[k]));
    }
    CHECKF(bad == 0, "update row reference: B %lld, %lld columns, U bits %d: %lld columns off the exact sum",
           (long long)B, (long long)cols, bits, (long long)bad);
    free(c); free(tab); free(tab512); free(u); free(p0); free(p); free(q); free(sb); free(ub);
}

/* GRZO's update rows by sign tables. B: one, partial groups of four, every group count the
   SIMD versions have a copy for (1-8) and past it, S's bits in two and three words; columns:
   vector tails, 32-bit word boundaries of U's bits; U as bits or floats, decay 0 or not. */
static void test_update_rows(void)
{
    static const int64_t Bs[10] = { 1, 3, 4, 8, 11, 16, 21, 29, 33, 70 }, widths[8] = { 1, 7, 8, 16, 31, 33, 100, 577 };
    int simd = grzo__cpu_simd_level(), bi, wi, v, ran[3] = { 0, 0, 0 };
    for (bi = 0; bi < 10; bi++)
        for (wi = 0; wi < 8; wi++)
            for (v = 0; v < 4; v++)
                check_update_row(Bs[bi], widths[wi], v % 2 == 0, v < 2 ? 0.0f : 0.01f, (uint64_t)(bi * 8 + wi), simd, ran);
    printf("test_ops: update rows by sign tables: %d reference cases, %d AVX2, %d AVX-512 compared bit for bit%s\n",
           ran[0], ran[1], ran[2], simd < 3 ? " (this CPU runs no AVX-512: those skipped)" : "");
}

/* A linear over no rows returns at once on every path, the variants' included (the core
   never asks one; a direct caller may: the low-rank path used to divide by the row count). */
static void test_linear_no_rows(int kind, grzo_backend *be)
{
    static const int64_t rows_per_seg[2] = {0, 0};
    float W[6] = {1, 2, 3, 4, 5, 6}, x[3] = {0}, y[2] = {7, 7};
    int64_t off[3], example[2];
    int8_t sign[2];
    grzo_variant variants[4];
    grzo_perturb pt;
    int v;
    memset(variants, 0, sizeof variants);
    variants[1].lowrank_rank = 2;
    variants[2].sparse = 1;
    variants[2].sparse_threshold = 10.0f;
    variants[3].quant_bits = 8;
    make_perturb(&pt, 2, 1, rows_per_seg, off, sign, example,
                 tu_noise(7, 1, 0, GRZO_STREAM_BASE, GRZO_NOISE_RADEMACHER), 0.25f, 1);
    for (v = 0; v < 4; v++) {
        grzo_linear_args a;
        memset(&a, 0, sizeof a);
        a.w.data = W; a.w.kind = GRZO_BLOCK_MATRIX; a.w.dtype = GRZO_DTYPE_F32; a.w.rows = 2; a.w.cols = 3;
        a.x = x; a.y = y; a.n_rows = 0; a.perturb = &pt; a.variant = v ? &variants[v] : NULL;
        CHECKF(be->iface->linear(be->self, &a) == GRZO_OK && y[0] == 7 && y[1] == 7, "%s: linear of 0 rows, variant %d",
               cfg_name(kind), v);
    }
}

int main(int argc, char **argv)
{
    int kind, i, e, b;
    (void)argc;
    cpu_env_reexec(argv);   /* BLIS's kernel for this CPU, so that cpu-fused runs it */
    {
        grzo_backend be;
        const char *line, *warning;
        REQUIRE_OK(make_backend(4, &be));
        REQUIRE_OK(grzo_backend_cpu_kernels(&be, &line, &warning));
        printf("test_ops: %s%s%s\n", line, warning[0] ? "\ntest_ops: " : "", warning);
        grzo_backend_destroy(&be);
    }
    test_update_rows();
    for (kind = 0; kind < NCFG; kind++) {
        grzo_backend be;
        grzo_backend_caps caps;
        REQUIRE_OK(make_backend(kind, &be));
        REQUIRE(be.iface != NULL && be.iface->api_version == GRZO_BACKEND_API_VERSION);
        CHECK_OK(grzo_backend_query(&be, &caps));
        CHECK(caps.dtypes & (1u << GRZO_DTYPE_F32));
        tu_require_host_memory(&be, "test_ops");
        test_backend_memory(kind, &be);
        test_backend_linear(kind, &be);
        test_linear_no_rows(kind, &be);
        test_backend_vector(kind, &be);
        test_backend_embedding(kind, &be);
        test_backend_update(kind, &be);
        grzo_backend_destroy(&be);
        test_ctx(kind);
        test_plain_outside_step(kind);
    }
    /* every CPU configuration against the reference backend */
    for (kind = 1; kind < NCFG; kind++) {
        for (i = 0; i < N_LIN_OUT; i++)
            if (lin_out[0][i] && lin_out[kind][i])
                CHECKF(close_ff("cpu vs ref linear", lin_out[kind][i], lin_out[0][i], lin_out_n[i], 1e-5, 1e-5),
                       "%s case %d", cfg_name(kind), i);
        for (i = 0; i < N_VEC_OUT; i++)
            if (vec_out[0][i] && vec_out[kind][i])
                CHECKF(close_ff("cpu vs ref vector", vec_out[kind][i], vec_out[0][i], vec_out_n[i], 1e-5, 1e-6),
                       "%s case %d", cfg_name(kind), i);
        CHECKF(close_ff("cpu vs ref embedding", emb_out[kind], emb_out[0], emb_out_n, 1e-5, 1e-6), "%s", cfg_name(kind));
        for (i = 0; i < N_UPD_OUT; i++)
            if (upd_out[0][i] && upd_out[kind][i])
                CHECKF(close_ff("cpu vs ref update", upd_out[kind][i], upd_out[0][i], upd_out_n[i], 1e-5, 1e-6),
                       "%s case %d", cfg_name(kind), i);
        for (e = 0; e < GRZO_ESTIMATOR_COUNT; e++)
            for (b = 0; b < NB; b++)
                if (ctx_final[0][e][b] && ctx_final[kind][e][b])
                    CHECKF(close_ff("cpu vs ref training", ctx_final[kind][e][b], ctx_final[0][e][b], M_ROWS[b] * M_COLS[b],
                                    1e-5, 1e-6), "%s estimator %d block %d", cfg_name(kind), e, b);
    }
    for (kind = 0; kind < NCFG; kind++) {
        for (i = 0; i < N_LIN_OUT; i++) free(lin_out[kind][i]);
        for (i = 0; i < N_VEC_OUT; i++) free(vec_out[kind][i]);
        for (i = 0; i < N_UPD_OUT; i++) free(upd_out[kind][i]);
        free(emb_out[kind]);
        for (e = 0; e < GRZO_ESTIMATOR_COUNT; e++)
            for (b = 0; b < NB; b++) free(ctx_final[kind][e][b]);
    }
    return tu_finish("test_ops");
}
