/* test_variants.c - the sparse, low-rank and quantized perturbations (grzo.h section 3c).
     formula_<core>  for GRZO, CANONICAL, SHARED, MeZO and FZOO, each variant (sparse, low-rank,
                     int8, int4, sparse + int4) on the reference backend: every perturbed
                     parameter the passes see is (q(theta) for quantized matrices, else theta)
                     + sign sigma Z_i, and the update is theta - sum_i c_i Z_i - decay theta,
                     with Z_i materialized here from the documented streams (U and V factors,
                     rounding bits read with grzo_philox4x32_10, the mask from a sort of |theta|)
                     and c_i from the recorded losses.
     mask            the sparse mask perturbs exactly {|theta_t| <= h_b} at every step (it
                     follows the weights), h_b the ceil(rho n)-th smallest |theta_0|; masked-off
                     weights never move; 16-bit storage widens exactly for the thresholds.
     rank            low-rank: each Z_i has rank r; MeZO's update rank r, GRZO's r B; V stays
                     for nu steps (the perturbations of steps 0 and 1 share their row space)
                     and is redrawn at step nu.
     quant           the stochastic rounding: values on the grid k bound / Q, |k| <= Q, only the
                     two neighbours of z, mean z (unbiased) within 4 standard errors; the
                     Rademacher grid is exact; the fake-quantized weights' levels.
     refused         invalid values and combinations, a backend without the capability (at
                     grzo_create and at checkpoint load), the alignment diagnostic.
     chunks          the CPU's chunked variant linears (a 1-byte transient budget) against the
                     reference, perturbed (GRZO's Z, a call per example or per copy; MeZO's
                     Z) and plain.
     cpu_vs_ref      a model through grzo_embedding, grzo_linear and grzo_vector on the CPU
                     and the reference backends, each variant and core: the same losses and
                     parameters (to rounding) over three steps; the CPU's low-rank linear runs
                     the two thin GEMMs, the reference forms each element. */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"

/* ---- the variants under test ----------------------------------------------------------------- */
enum { V_SPARSE, V_LOWRANK, V_INT8, V_INT4, V_SPARSE_INT4, V_COUNT };
static const char *VNAME[V_COUNT] = { "sparse", "lowrank", "int8", "int4", "sparse+int4" };

static void set_variant(grzo_desc *d, int v)
{
    if (v == V_SPARSE || v == V_SPARSE_INT4) d->sparse_density = 0.4f;
    if (v == V_LOWRANK) { d->lowrank_rank = 2; d->lowrank_every = 2; }
    if (v == V_INT8) d->quant_bits = 8;
    if (v == V_INT4 || v == V_SPARSE_INT4) d->quant_bits = 4;
    if (v >= V_INT8) d->noise = GRZO_NOISE_GAUSSIAN;   /* QuZO's noise: the rounding matters */
}

/* ---- the documented formulas, written out here -------------------------------------------------- */
static double bound_of(uint32_t dist) { return dist == GRZO_NOISE_GAUSSIAN ? 6.660437107086182 : 1.0; }

/* 24-bit uniform of the quantization stream at `index`: Philox word index % 4 of group index / 4 */
static double round_bits(const grzo_noise *base, uint64_t index)
{
    uint32_t ctr[4], key[2], out[4];
    uint64_t g = index >> 2;
    ctr[0] = (uint32_t)g;
    ctr[1] = ((uint32_t)(g >> 32) & 0xFFFFu) | ((GRZO_STREAM_QUANT + base->stream) << 16);
    ctr[2] = base->step;
    ctr[3] = base->block;
    key[0] = (uint32_t)base->seed;
    key[1] = (uint32_t)(base->seed >> 32);
    grzo_philox4x32_10(ctr, key, out);
    return (double)(out[index & 3u] >> 8) / 16777216.0;
}

static double sround_ref(const grzo_noise *base, uint64_t index, double z, int bits)
{
    double Q = (double)((1 << (bits - 1)) - 1), b = bound_of(base->dist), t = z * Q / b, k = floor(t);
    if (round_bits(base, index) < t - k) k += 1.0;
    if (k > Q) k = Q;
    if (k < -Q) k = -Q;
    return k * b / Q;
}

static float fake_quant_ref(float w, float amax, int bits)
{
    float Q = (float)((1 << (bits - 1)) - 1), k;
    if (amax == 0.0f) return 0.0f;
    k = rintf(w * (float)((double)Q / amax));
    if (k > Q) k = Q;
    if (k < -Q) k = -Q;
    return (float)((double)k * amax / Q);
}

/* h_b: the ceil(rho n)-th smallest |theta| */
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
static float threshold_ref(const float *theta, int64_t n, float rho)
{
    float *a = (float *)malloc((size_t)n * sizeof(float)), h;
    double t = (double)rho * (double)n;
    int64_t i, k = (int64_t)ceil(t - t * 0x1p-23) - 1;   /* rho at float precision (grzo.h) */
    REQUIRE(a != NULL);
    for (i = 0; i < n; i++) a[i] = fabsf(theta[i]);
    qsort(a, (size_t)n, sizeof(float), cmp_float);
    h = a[k < 0 ? 0 : k];
    free(a);
    return h;
}

typedef struct blockspec { grzo_block_kind kind; int64_t rows, cols; } blockspec;

/* Z_e[j, k] of a block under the variant: mask, base (dense or (U V^T)/sqrt r), rounding, signs */
static double z_ref(const grzo_desc *d, const blockspec *bs, uint32_t block, uint32_t step, uint32_t stream, int flipout,
                    int64_t e, int64_t j, int64_t k, float theta, float h)
{
    grzo_noise base = tu_noise(d->seed, step, block, stream, (uint32_t)d->noise);
    uint64_t idx = (uint64_t)(j * bs->cols + k);
    double z;
    if (d->sparse_density > 0 && !(fabsf(theta) <= h)) return 0.0;
    if (d->lowrank_rank > 0 && bs->kind != GRZO_BLOCK_VECTOR) {
        int64_t r = d->lowrank_rank, l;
        grzo_noise u = tu_noise(d->seed, step, block, GRZO_STREAM_LOWRANK_U + stream, (uint32_t)d->noise);
        grzo_noise v = tu_noise(d->seed, step - step % (uint32_t)d->lowrank_every, block, GRZO_STREAM_LOWRANK_V, (uint32_t)d->noise);
        z = 0.0;
        for (l = 0; l < r; l++) z += (double)grzo_noise_at(&u, (uint64_t)(j * r + l)) * grzo_noise_at(&v, (uint64_t)(k * r + l));
        z /= sqrt((double)r);
    } else {
        z = grzo_noise_at(&base, idx);
    }
    if (d->quant_bits) z = sround_ref(&base, idx, z, d->quant_bits);
    if (flipout) {   /* r_e[j] s_e[k] (vectors: r_e[j]) */
        grzo_noise r = tu_noise(d->seed, step, block, GRZO_STREAM_SIGN_R, GRZO_NOISE_RADEMACHER);
        grzo_noise sg = tu_noise(d->seed, step, block, GRZO_STREAM_SIGN_S, GRZO_NOISE_RADEMACHER);
        z *= grzo_noise_at(&r, (uint64_t)(e * bs->rows + j));
        if (bs->kind != GRZO_BLOCK_VECTOR) z *= grzo_noise_at(&sg, (uint64_t)(e * bs->cols + k));
    }
    return z;
}

/* ---- formula: black-box steps on the reference backend ------------------------------------------- */
#define NB 3
#define MAXB 5
#define MAXSEG 16
static const blockspec SPEC[NB] = { { GRZO_BLOCK_MATRIX, 5, 6 }, { GRZO_BLOCK_VECTOR, 5, 1 }, { GRZO_BLOCK_EMBEDDING, 4, 3 } };

typedef struct fx {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_desc d;
    grzo_block blk[NB];
    float *p[NB], *scratch[NB];
    float h[NB];
} fx;

static void fx_init(fx *f, grzo_estimator est, int v, int kind)
{
    int b;
    REQUIRE_OK(tu_backend(kind, 2, &f->be));
    f->d = tu_desc(&f->be, est, 0xA11CEULL + (uint64_t)v, 0.05f, 0.03f);
    f->d.weight_decay = 0.1f;
    f->d.fzoo_probes = 3;
    set_variant(&f->d, v);
    f->ctx = tu_ctx(&f->d);
    for (b = 0; b < NB; b++) {
        size_t n = (size_t)(SPEC[b].rows * SPEC[b].cols);
        f->p[b] = (float *)tu_alloc(&f->be, n * sizeof(float));
        f->scratch[b] = (float *)tu_alloc(&f->be, n * sizeof(float));
        tu_fill_unif(f->p[b], n, 900 + (uint32_t)b + 10 * (uint32_t)v, -1.0, 1.0);
        f->blk[b] = tu_block(f->ctx, SPEC[b].kind, SPEC[b].rows, SPEC[b].cols, f->p[b], NULL, 0);
        f->h[b] = f->d.sparse_density > 0 ? threshold_ref(f->p[b], (int64_t)n, f->d.sparse_density) : 0.0f;
    }
}

static void fx_free(fx *f)
{
    int b;
    grzo_destroy(f->ctx);
    for (b = 0; b < NB; b++) {
        grzo_backend_free(&f->be, f->p[b]);
        grzo_backend_free(&f->be, f->scratch[b]);
    }
    grzo_backend_destroy(&f->be);
}

/* per-example quadratic: sum over all parameters of (1 + e) (p - t_e)^2 / 2, t_e from the data stream */
static double fx_loss(int64_t e, float *const *p, void *ud)
{
    double l = 0.0;
    int b;
    int64_t i, o = 0;
    (void)ud;
    for (b = 0; b < NB; b++)
        for (i = 0; i < SPEC[b].rows * SPEC[b].cols; i++, o++) {
            double t = tu_unif(950, (uint64_t)(e * 64 + o), -0.5, 0.5), x = (double)p[b][i] - t;
            l += 0.5 * (1.0 + (double)e) * x * x;
        }
    return l;
}

typedef struct recorder { int64_t n; int32_t pass[64]; int64_t seg[64], example[64]; int8_t sign[64]; float *pert[64][NB]; } recorder;

static void rec_hook(const grzo_pass_info *pi, int64_t seg, float *const *p, void *ud)
{
    recorder *r = (recorder *)ud;
    int b;
    REQUIRE(r->n < 64);
    r->pass[r->n] = pi->index;
    r->seg[r->n] = seg;
    r->example[r->n] = pi->example[seg];
    r->sign[r->n] = pi->sign[seg];
    for (b = 0; b < NB; b++) {
        size_t n = (size_t)(SPEC[b].rows * SPEC[b].cols) * sizeof(float);
        r->pert[r->n][b] = (float *)malloc(n);
        REQUIRE(r->pert[r->n][b] != NULL);
        memcpy(r->pert[r->n][b], p[b], n);
    }
    r->n++;
}

/* the losses the step saw, recomputed from the recorded perturbed parameters */
static void rec_losses(const recorder *r, double *loss)
{
    int64_t i;
    for (i = 0; i < r->n; i++) loss[i] = (float)fx_loss(r->example[i], (float *const *)r->pert[i], NULL);
}

static void test_formula(grzo_estimator est, int v)
{
    fx f;
    int64_t B = 4, s;
    fx_init(&f, est, v, TU_REF);
    for (s = 0; s < 3; s++) {
        recorder rec;
        grzo_step_report rep;
        double loss[64], coeff[16];
        float *before[NB];
        int b, n_dirs, q;
        int flip = est == GRZO_ESTIMATOR_GRZO || est == GRZO_ESTIMATOR_CANONICAL;
        int64_t i, bad = 0;
        memset(&rec, 0, sizeof rec);
        for (b = 0; b < NB; b++) {
            size_t n = (size_t)(SPEC[b].rows * SPEC[b].cols) * sizeof(float);
            before[b] = (float *)malloc(n);
            REQUIRE(before[b] != NULL);
            memcpy(before[b], f.p[b], n);
        }
        REQUIRE_OK(tu_bb_step(f.ctx, NB, f.blk, f.scratch, B, fx_loss, 1.0, &rec, rec_hook, &rep));
        rec_losses(&rec, loss);
        /* perturbations: every recorded segment */
        for (i = 0; i < rec.n; i++) {
            uint32_t stream = est == GRZO_ESTIMATOR_FZOO && rec.pass[i] > 0 ? GRZO_STREAM_FZOO0 + (uint32_t)(rec.pass[i] - 1) : 0u;
            for (b = 0; b < NB; b++) {
                const blockspec *bs = &SPEC[b];
                int64_t j, k;
                for (j = 0; j < bs->rows; j++) {
                    float amax = 0.0f;
                    for (k = 0; k < bs->cols; k++) if (fabsf(before[b][j * bs->cols + k]) > amax) amax = fabsf(before[b][j * bs->cols + k]);
                    for (k = 0; k < bs->cols; k++) {
                        float th = before[b][j * bs->cols + k];
                        double w = f.d.quant_bits && bs->kind == GRZO_BLOCK_MATRIX ? fake_quant_ref(th, amax, f.d.quant_bits) : th;
                        double want = w + (double)rec.sign[i] * f.d.sigma *
                                          z_ref(&f.d, bs, (uint32_t)b, (uint32_t)s, stream, flip, rec.example[i], j, k, th, f.h[b]);
                        if (!(fabs(rec.pert[i][b][j * bs->cols + k] - want) <= 1e-6 * (1.0 + fabs(want)))) bad++;
                    }
                }
            }
        }
        CHECKF(bad == 0, "%s est %d step %lld: %lld perturbed values differ from the formula", VNAME[v], (int)est, (long long)s, (long long)bad);
        /* coefficients, as section 3 defines them, from the losses */
        if (flip || est == GRZO_ESTIMATOR_SHARED) {
            double delta[MAXB], mean = 0, var = 0, sd;
            for (i = 0; i < B; i++) { delta[i] = loss[i] - loss[B + i]; mean += delta[i] / (double)B; }
            for (i = 0; i < B; i++) var += (delta[i] - mean) * (delta[i] - mean) / (double)B;
            sd = sqrt(var);
            for (i = 0; i < B; i++)
                coeff[i] = (double)f.d.lr / (2.0 * f.d.sigma * (double)B) *
                           (est == GRZO_ESTIMATOR_CANONICAL ? delta[i] : delta[i] / (sd + (double)1e-8));
            n_dirs = 1;
        } else if (est == GRZO_ESTIMATOR_MEZO) {
            double lp = 0, lm = 0;
            for (i = 0; i < B; i++) { lp += loss[i] / (double)B; lm += loss[B + i] / (double)B; }
            coeff[0] = (double)f.d.lr * (lp - lm) / (2.0 * f.d.sigma);
            n_dirs = 1;
        } else {
            double l[8], mean = 0, var = 0, sd;
            int N = f.d.fzoo_probes;
            for (q = 0; q <= N; q++) { l[q] = 0; for (i = 0; i < B; i++) l[q] += loss[q * B + i] / (double)B; }
            for (q = 1; q <= N; q++) { l[q] -= l[0]; mean += l[q] / N; }
            for (q = 1; q <= N; q++) var += (l[q] - mean) * (l[q] - mean) / N;
            sd = sqrt(var);
            for (q = 1; q <= N; q++) coeff[q - 1] = (double)f.d.lr * l[q] / (N * sd);
            n_dirs = N;
        }
        for (b = 0; b < NB; b++) {
            const blockspec *bs = &SPEC[b];
            int64_t j, k, nbad = 0;
            double decay = bs->kind == GRZO_BLOCK_VECTOR ? 0.0 : (double)f.d.lr * f.d.weight_decay;
            for (j = 0; j < bs->rows; j++)
                for (k = 0; k < bs->cols; k++) {
                    float th = before[b][j * bs->cols + k];
                    double upd = 0.0, mag = fabs(th), want;
                    for (q = 0; q < n_dirs; q++) {
                        uint32_t stream = est == GRZO_ESTIMATOR_FZOO ? GRZO_STREAM_FZOO0 + (uint32_t)q : 0u;
                        if (flip || est == GRZO_ESTIMATOR_SHARED) {
                            for (i = 0; i < B; i++) {
                                upd += coeff[i] * z_ref(&f.d, bs, (uint32_t)b, (uint32_t)s, stream, flip, i, j, k, th, f.h[b]);
                                mag += fabs(coeff[i]) * 3.0;
                            }
                        } else {
                            upd += coeff[q] * z_ref(&f.d, bs, (uint32_t)b, (uint32_t)s, stream, 0, 0, j, k, th, f.h[b]);
                            mag += fabs(coeff[q]) * 3.0;
                        }
                    }
                    want = th - upd - decay * th;
                    if (!(fabs(f.p[b][j * bs->cols + k] - want) <= 2e-5 * mag + 1e-7)) {
                        if (nbad++ < 3) fprintf(stderr, "  block %d (%lld,%lld): got %.9g want %.9g\n", b, (long long)j, (long long)k,
                                                (double)f.p[b][j * bs->cols + k], want);
                    }
                }
            CHECKF(nbad == 0, "%s est %d step %lld block %d: update != formula (%lld values)", VNAME[v], (int)est, (long long)s, b,
                   (long long)nbad);
            free(before[b]);
        }
        for (i = 0; i < rec.n; i++) for (b = 0; b < NB; b++) free(rec.pert[i][b]);
    }
    fx_free(&f);
}

/* ---- mask ---------------------------------------------------------------------------------------- */
static void test_mask(void)
{
    fx f;
    int s, b;
    fx_init(&f, GRZO_ESTIMATOR_GRZO, V_SPARSE, TU_CPU);
    f.d.weight_decay = 0.0f;
    grzo_destroy(f.ctx);
    f.d.lr = 0.5f;   /* large steps: weights cross h_b, and the mask must follow */
    f.ctx = tu_ctx(&f.d);
    for (b = 0; b < NB; b++) f.blk[b] = tu_block(f.ctx, SPEC[b].kind, SPEC[b].rows, SPEC[b].cols, f.p[b], NULL, 0);
    {   /* density at the start: exactly ceil(rho n) of the distinct |theta| */
        int64_t n = SPEC[0].rows * SPEC[0].cols, i, cnt = 0;
        for (i = 0; i < n; i++) cnt += fabsf(f.p[0][i]) <= f.h[0];
        CHECKF(cnt == 12 && n == 30, "%lld of %lld perturbed at density 0.4", (long long)cnt, (long long)n);
    }
    for (s = 0; s < 6; s++) {
        recorder rec;
        grzo_step_report rep;
        float *before[NB];
        int64_t i, changes_outside = 0, mismatch = 0, entered = 0;
        memset(&rec, 0, sizeof rec);
        for (b = 0; b < NB; b++) {
            size_t n = (size_t)(SPEC[b].rows * SPEC[b].cols) * sizeof(float);
            before[b] = (float *)malloc(n);
            REQUIRE(before[b] != NULL);
            memcpy(before[b], f.p[b], n);
        }
        REQUIRE_OK(tu_bb_step(f.ctx, NB, f.blk, f.scratch, 4, fx_loss, 1.0, &rec, rec_hook, &rep));
        for (b = 0; b < NB; b++) {
            int64_t n = SPEC[b].rows * SPEC[b].cols;
            for (i = 0; i < n; i++) {
                int in = fabsf(before[b][i]) <= f.h[b], perturbed = rec.pert[0][b][i] != before[b][i];
                if (in != perturbed) mismatch++;   /* Rademacher U, so Z != 0 exactly where m = 1 */
                if (!in && f.p[b][i] != before[b][i]) changes_outside++;
                if (in && fabsf(f.p[b][i]) > f.h[b]) entered++;
            }
            free(before[b]);
        }
        CHECKF(mismatch == 0, "step %d: %lld weights perturbed where the mask is off or not where it is on", s, (long long)mismatch);
        CHECKF(changes_outside == 0, "step %d: %lld masked-off weights moved", s, (long long)changes_outside);
        if (s == 0) CHECKF(entered > 0, "no weight left the mask: the test cannot see the mask follow the weights");
        for (i = 0; i < rec.n; i++) for (b = 0; b < NB; b++) free(rec.pert[i][b]);
    }
    fx_free(&f);
    {   /* 16-bit blocks' |theta| for the thresholds (a device backend's bf16/f16 storage) */
        static const uint16_t bits[8] = { 0x3FC0, 0xBFC0, 0x7FC0, 0x3E00, 0xC000, 0x0001, 0x7C00, 0x7E00 };
        static const int type[8] = { GRZO_DTYPE_BF16, GRZO_DTYPE_BF16, GRZO_DTYPE_BF16, GRZO_DTYPE_F16, GRZO_DTYPE_F16,
                                     GRZO_DTYPE_F16, GRZO_DTYPE_F16, GRZO_DTYPE_F16 };
        static const float want[8] = { 1.5f, 1.5f, INFINITY, 1.5f, 2.0f, 5.9604644775390625e-8f, INFINITY, INFINITY };
        int i;
        for (i = 0; i < 8; i++) {
            uint8_t raw[4] = { 0, 0, 0, 0 };   /* room for the f32 branch the compiler also sees */
            memcpy(raw, &bits[i], 2);
            CHECKF(grzo__stored_abs(raw, (grzo_dtype)type[i]) == want[i], "16-bit value %d: %g", i,
                   (double)grzo__stored_abs(raw, (grzo_dtype)type[i]));
        }
    }
}

/* ---- rank ---------------------------------------------------------------------------------------- */
/* numerical rank of a rows x cols matrix (Gaussian elimination with partial pivoting) */
static int rank_of(const double *A, int rows, int cols)
{
    double *M = (double *)malloc((size_t)(rows * cols) * sizeof(double)), scale = 0.0;
    int r = 0, c, i, k;
    REQUIRE(M != NULL);
    memcpy(M, A, (size_t)(rows * cols) * sizeof(double));
    for (i = 0; i < rows * cols; i++) if (fabs(M[i]) > scale) scale = fabs(M[i]);
    for (c = 0; c < cols && r < rows; c++) {
        int piv = r;
        for (i = r + 1; i < rows; i++) if (fabs(M[i * cols + c]) > fabs(M[piv * cols + c])) piv = i;
        if (fabs(M[piv * cols + c]) <= 1e-4 * scale) continue;   /* float rounding of the inputs */
        for (k = 0; k < cols; k++) { double t = M[r * cols + k]; M[r * cols + k] = M[piv * cols + k]; M[piv * cols + k] = t; }
        for (i = r + 1; i < rows; i++) {
            double fct = M[i * cols + c] / M[r * cols + c];
            for (k = c; k < cols; k++) M[i * cols + k] -= fct * M[r * cols + k];
        }
        r++;
    }
    free(M);
    return r;
}

static void test_rank(void)
{
    enum { R = 16, C = 12, B = 3 };
    int ei;
    for (ei = 0; ei < 2; ei++) {
        grzo_estimator est = ei == 0 ? GRZO_ESTIMATOR_MEZO : GRZO_ESTIMATOR_GRZO;
        grzo_backend be;
        grzo_ctx *ctx;
        grzo_desc d;
        grzo_block blk;
        float *W, *scr, *W0 = (float *)malloc(R * C * sizeof(float));
        double Z[3][R * C], D[R * C], stack[2 * R * C];
        int s, i;
        REQUIRE(W0 != NULL);
        REQUIRE_OK(tu_backend(TU_CPU, 2, &be));
        d = tu_desc(&be, est, 77, 0.01f, 0.01f);
        d.lowrank_rank = 2;
        d.lowrank_every = 2;
        d.noise = GRZO_NOISE_GAUSSIAN;
        ctx = tu_ctx(&d);
        W = (float *)tu_alloc(&be, R * C * sizeof(float));
        scr = (float *)tu_alloc(&be, R * C * sizeof(float));
        tu_fill_dyadic(W, R * C, 990, -1, 1, 10);
        blk = tu_block(ctx, GRZO_BLOCK_MATRIX, R, C, W, "w", 0);
        for (s = 0; s < 3; s++) {
            grzo_step_info si;
            grzo_pass_info pi;
            grzo_step_report rep;
            float *losses = (float *)malloc(64 * sizeof(float));
            int32_t p;
            int64_t c;
            REQUIRE(losses != NULL);
            memcpy(W0, W, R * C * sizeof(float));
            REQUIRE_OK(grzo_step_begin(ctx, B, &si));
            for (p = 0; p < si.n_passes; p++) {
                REQUIRE_OK(grzo_pass_begin(ctx, &pi));
                for (c = 0; c < pi.n_segments; c++) {
                    REQUIRE_OK(grzo_perturbed_params(ctx, blk, c, scr));
                    if (p == 0 && c == 0) for (i = 0; i < R * C; i++) Z[s][i] = ((double)scr[i] - W0[i]) / d.sigma;
                    /* "+" losses above "-" ones, unequal: coefficients of order one (the rank
                       test needs updates well above the parameters' rounding) */
                    losses[c] = (p == 0 && (si.n_passes == 2 || c < B)) ? (float)(1.0 + 0.37 * (double)(c * c)) : 0.0f;
                }
                REQUIRE_OK(grzo_pass_end(ctx, losses));
            }
            REQUIRE_OK(grzo_step_end(ctx, &rep));
            free(losses);
            for (i = 0; i < R * C; i++) D[i] = (double)W[i] - W0[i];
            CHECKF(rank_of(Z[s], R, C) == 2, "est %d step %d: a perturbation is not rank 2", (int)est, s);
            CHECKF(rank_of(D, R, C) == (est == GRZO_ESTIMATOR_MEZO ? 2 : 2 * B), "est %d step %d: update rank %d, expected %d",
                   (int)est, s, rank_of(D, R, C), est == GRZO_ESTIMATOR_MEZO ? 2 : 2 * B);
        }
        /* example 0's "+" perturbation at steps 0 and 1 share V (nu = 2): the stacked rows span 2
           dimensions for MeZO (z = U V^T / sqrt r); V is redrawn at step 2: 4 */
        if (est == GRZO_ESTIMATOR_MEZO) {
            memcpy(stack, Z[0], sizeof Z[0]);
            memcpy(stack + R * C, Z[1], sizeof Z[1]);
            CHECKF(rank_of(stack, 2 * R, C) == 2, "steps 0 and 1 do not share V");
            memcpy(stack + R * C, Z[2], sizeof Z[2]);
            CHECKF(rank_of(stack, 2 * R, C) == 4, "step 2 did not redraw V");
        }
        grzo_destroy(ctx);
        grzo_backend_free(&be, W);
        grzo_backend_free(&be, scr);
        grzo_backend_destroy(&be);
        free(W0);
    }
}

/* ---- quant --------------------------------------------------------------------------------------- */
static void test_quant(void)
{
    static const int bits[2] = { 8, 4 };
    static const float zs[4] = { 0.3f, -1.37f, 2.9f, 0.01f };
    int bi, zi;
    for (bi = 0; bi < 2; bi++) {
        double Q = (double)((1 << (bits[bi] - 1)) - 1), delta = 6.660437107086182 / Q;
        grzo_noise base = tu_noise(9, 3, 2, 0, GRZO_NOISE_GAUSSIAN), q = grzo__quant_noise(&base);
        for (zi = 0; zi < 4; zi++) {
            double z = zs[zi], lo = floor(z / delta) * delta, sum = 0.0, frac = z / delta - floor(z / delta);
            int64_t i, n = 200000, off_grid = 0;
            for (i = 0; i < n; i++) {
                double v = grzo__sround(&q, (uint64_t)i, zs[zi], bits[bi]);
                if (!(fabs(v - lo) < 1e-6 || fabs(v - lo - delta) < 1e-6)) off_grid++;
                sum += v;
            }
            CHECKF(off_grid == 0, "int%d z=%g: %lld values not on the two neighbouring levels", bits[bi], z, (long long)off_grid);
            /* Bernoulli(frac) times delta: standard error delta sqrt(frac (1 - frac) / n) */
            CHECKF(fabs(sum / (double)n - z) <= 4.0 * delta * sqrt(frac * (1.0 - frac) / (double)n) + 1e-6,
                   "int%d z=%g: mean %.7g is biased", bits[bi], z, sum / (double)n);
        }
        /* the bounds are grid points (no clipping), and Rademacher +-1 round exactly */
        CHECK(grzo__sround(&q, 5, 6.660437107086182f, bits[bi]) == 6.660437107086182f);
        CHECK(grzo__sround(&q, 6, -6.660437107086182f, bits[bi]) == -6.660437107086182f);
        {
            grzo_noise rb = tu_noise(9, 3, 2, 0, GRZO_NOISE_RADEMACHER), rq = grzo__quant_noise(&rb);
            int64_t i, inexact = 0;
            for (i = 0; i < 1000; i++) inexact += grzo__sround(&rq, (uint64_t)i, i & 1 ? 1.0f : -1.0f, bits[bi]) != (i & 1 ? 1.0f : -1.0f);
            CHECK(inexact == 0);
        }
        /* fake-quantized weights: integer multiples of amax / Q, the row maximum kept exactly */
        {
            float amax = 0.731f;
            int64_t i, bad = 0;
            for (i = 0; i < 1000; i++) {
                float w = (float)tu_unif(992, (uint64_t)i, -0.731, 0.731), qv = grzo__fake_quant(w, amax, bits[bi]);
                double k = (double)qv * Q / amax;
                if (fabs(k - rint(k)) > 1e-4 || fabs(k) > Q + 1e-9 || fabs((double)qv - w) > 0.5 * amax / Q + 1e-7) bad++;
            }
            CHECK(bad == 0);
            CHECK(grzo__fake_quant(amax, amax, bits[bi]) == amax && grzo__fake_quant(-amax, amax, bits[bi]) == -amax);
            CHECK(grzo__fake_quant(0.5f, 0.0f, bits[bi]) == 0.0f);
        }
    }
}

/* ---- refused ------------------------------------------------------------------------------------- */
static grzo_status (*ref_query)(void *self, grzo_backend_caps *out);
static grzo_status dense_only_query(void *self, grzo_backend_caps *out)
{
    grzo_status s = ref_query(self, out);
    out->variants = 0;
    return s;
}

static void test_refused(void)
{
    grzo_backend be, dense;
    grzo_backend_i iface;
    grzo_ctx *ctx = NULL;
    grzo_desc d;
    float *W;
    grzo_block blk;
    char path[256];
    REQUIRE_OK(tu_backend(TU_REF, 1, &be));
#define REFUSED(field_setup, want)                                         \
    do {                                                                   \
        d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 1, 0.01f, 0.01f);            \
        field_setup;                                                       \
        ctx = (grzo_ctx *)&d;                                              \
        CHECK_ST(grzo_create(&d, &ctx), want);                             \
        CHECK(ctx == NULL);                                                \
    } while (0)
    REFUSED(d.sparse_density = 1.5f, GRZO_ERR_INVALID_ARG);
    REFUSED(d.sparse_density = -0.1f, GRZO_ERR_INVALID_ARG);
    REFUSED(d.sparse_density = NAN, GRZO_ERR_INVALID_ARG);
    REFUSED(d.lowrank_rank = -1, GRZO_ERR_INVALID_ARG);
    REFUSED(d.lowrank_rank = GRZO_LOWRANK_MAX_RANK + 1, GRZO_ERR_INVALID_ARG);
    REFUSED(d.lowrank_every = 5, GRZO_ERR_INVALID_ARG);                                 /* without a rank */
    REFUSED((d.lowrank_rank = 2, d.lowrank_every = -3), GRZO_ERR_INVALID_ARG);
    REFUSED(d.quant_bits = 3, GRZO_ERR_INVALID_ARG);
    REFUSED(d.quant_bits = 16, GRZO_ERR_INVALID_ARG);
    REFUSED((d.sparse_density = 0.2f, d.lowrank_rank = 2), GRZO_ERR_INVALID_ARG);
    REFUSED((d.lowrank_rank = 2, d.quant_bits = 8), GRZO_ERR_INVALID_ARG);
    REFUSED((d.estimator = GRZO_ESTIMATOR_MEZO_INPLACE, d.sparse_density = 0.2f), GRZO_ERR_INVALID_ARG);
    REFUSED((d.estimator = GRZO_ESTIMATOR_MEZO_INPLACE, d.quant_bits = 4), GRZO_ERR_INVALID_ARG);
    REFUSED((d.estimator = GRZO_ESTIMATOR_FZOO, d.sparse_density = 0.2f), GRZO_ERR_INVALID_ARG);
    /* a backend without the capability */
    iface = *be.iface;
    ref_query = iface.query;
    iface.query = dense_only_query;
    dense.iface = &iface;
    dense.self = be.self;
    d = tu_desc(&dense, GRZO_ESTIMATOR_GRZO, 1, 0.01f, 0.01f);
    d.quant_bits = 8;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_UNSUPPORTED);
    d.quant_bits = 0;
    d.lowrank_rank = 1;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_UNSUPPORTED);
    /* ... and at checkpoint load: a variant checkpoint into a dense-only backend's context */
    tu_tmp_path(path, sizeof path, "variants_caps");
    d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 1, 0.01f, 0.01f);
    d.sparse_density = 0.5f;
    ctx = tu_ctx(&d);
    W = (float *)tu_alloc(&be, 12 * sizeof(float));
    tu_fill_unif(W, 12, 993, -1, 1);
    blk = tu_block(ctx, GRZO_BLOCK_MATRIX, 3, 4, W, "w", 0);
    (void)blk;
    {   /* the alignment diagnostic refuses variants */
        grzo_step_info si;
        CHECK_ST(grzo_align_begin(ctx, 4, 8, &si), GRZO_ERR_UNSUPPORTED);
        CHECK(strstr(grzo_last_error(ctx), "variant") != NULL);
    }
    REQUIRE_OK(grzo_checkpoint_save(ctx, path));
    grzo_destroy(ctx);
    d = tu_desc(&dense, GRZO_ESTIMATOR_GRZO, 1, 0.01f, 0.01f);
    ctx = tu_ctx(&d);
    tu_block(ctx, GRZO_BLOCK_MATRIX, 3, 4, W, "w", 0);
    CHECK_ST(grzo_checkpoint_load(ctx, path), GRZO_ERR_UNSUPPORTED);
    CHECK(strstr(grzo_last_error(ctx), "sparse") != NULL);
    {
        grzo_desc got;
        REQUIRE_OK(grzo_get_desc(ctx, &got));
        CHECK(got.sparse_density == 0.0f);
    }
    grzo_destroy(ctx);
    remove(path);
    grzo_backend_free(&be, W);
    grzo_backend_destroy(&be);
#undef REFUSED
}

/* ---- cpu_vs_ref: a model through the operations ------------------------------------------------- */
#define VOC 9
#define DM 6
#define DH 5
#define TOK 3
typedef struct opnet {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_block emb, fc, bias, gain;
    float *E, *W, *bv, *gv;
    int32_t *ids;
    float *h0, *h1, *h2, *h3;
    double last_losses[64];
} opnet;

static void opnet_init(opnet *n, int kind, const grzo_desc *dt)
{
    grzo_desc d = *dt;
    REQUIRE_OK(tu_backend(kind, 2, &n->be));
    d.backend = &n->be;
    n->ctx = tu_ctx(&d);
    n->E = (float *)tu_alloc(&n->be, VOC * DM * sizeof(float));
    n->W = (float *)tu_alloc(&n->be, DH * DM * sizeof(float));
    n->bv = (float *)tu_alloc(&n->be, DH * sizeof(float));
    n->gv = (float *)tu_alloc(&n->be, DH * sizeof(float));
    n->ids = (int32_t *)tu_alloc(&n->be, 64 * TOK * sizeof(int32_t));
    n->h0 = (float *)tu_alloc(&n->be, 64 * TOK * DM * sizeof(float));
    n->h1 = (float *)tu_alloc(&n->be, 64 * TOK * DH * sizeof(float));
    n->h2 = (float *)tu_alloc(&n->be, 64 * TOK * DH * sizeof(float));
    n->h3 = (float *)tu_alloc(&n->be, 64 * TOK * DH * sizeof(float));
    tu_fill_unif(n->E, VOC * DM, 994, -1, 1);
    tu_fill_unif(n->W, DH * DM, 995, -1, 1);
    tu_fill_unif(n->bv, DH, 996, -0.2, 0.2);
    tu_fill_unif(n->gv, DH, 997, 0.8, 1.2);
    n->emb = tu_block(n->ctx, GRZO_BLOCK_EMBEDDING, VOC, DM, n->E, "emb", 0);
    n->fc = tu_block(n->ctx, GRZO_BLOCK_MATRIX, DH, DM, n->W, "fc", 0);
    n->bias = tu_block(n->ctx, GRZO_BLOCK_VECTOR, DH, 1, n->bv, "bias", 0);
    n->gain = tu_block(n->ctx, GRZO_BLOCK_VECTOR, DH, 1, n->gv, "gain", 0);
}

static void opnet_free(opnet *n)
{
    grzo_destroy(n->ctx);
    grzo_backend_free(&n->be, n->E); grzo_backend_free(&n->be, n->W); grzo_backend_free(&n->be, n->bv);
    grzo_backend_free(&n->be, n->gv); grzo_backend_free(&n->be, n->ids); grzo_backend_free(&n->be, n->h0);
    grzo_backend_free(&n->be, n->h1); grzo_backend_free(&n->be, n->h2); grzo_backend_free(&n->be, n->h3);
    grzo_backend_destroy(&n->be);
}

static grzo_status opnet_forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user)
{
    opnet *n = (opnet *)user;
    int64_t c, t, j, N = pi->n_segments * TOK;
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    grzo_status s;
    for (c = 0; c < pi->n_segments; c++)
        for (t = 0; t < TOK; t++) n->ids[c * TOK + t] = (int32_t)((pi->example[c] * 5 + t * 2 + grzo_get_step(ctx)) % VOC);
    rows.n_rows = N;
    rows.offsets = NULL;
    if ((s = grzo_embedding(ctx, n->emb, n->ids, n->h0, &rows)) != GRZO_OK) return s;
    if ((s = grzo_linear(ctx, n->fc, n->h0, n->h1, &rows)) != GRZO_OK) return s;
    if ((s = grzo_vector(ctx, n->bias, GRZO_VECTOR_ADD, n->h1, n->h2, &rows)) != GRZO_OK) return s;
    if ((s = grzo_vector(ctx, n->gain, GRZO_VECTOR_MUL, n->h2, n->h3, &rows)) != GRZO_OK) return s;
    for (c = 0; c < pi->n_segments; c++) {
        double l = 0.0;
        for (t = 0; t < TOK; t++)
            for (j = 0; j < DH; j++) {
                double y = n->h3[(c * TOK + t) * DH + j] - tu_unif(998, (uint64_t)(pi->example[c] * 64 + t * DH + j), -1, 1);
                l += y * y;
            }
        losses[c] = (float)l;
        n->last_losses[c] = l;
    }
    return GRZO_OK;
}

static double max_rel(const float *a, const float *b, int64_t n)
{
    double m = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (d > m) m = d;
    }
    return m;
}

static void test_cpu_vs_ref(void)
{
    static const grzo_estimator ests[4] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_SHARED, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO };
    int v, ei, s;
    for (v = 0; v < V_COUNT; v++)
        for (ei = 0; ei < 4; ei++) {
            opnet ref, cpu;
            grzo_desc d = tu_desc(NULL, ests[ei], 4242 + (uint64_t)v, 0.02f, 0.05f);
            double dl = 0.0, dp;
            float y_ref[DH], y_cpu[DH], x[DM];
            d.fzoo_probes = 2;
            d.weight_decay = 0.05f;
            set_variant(&d, v);
            if (ests[ei] == GRZO_ESTIMATOR_FZOO && d.sparse_density > 0) continue;   /* refused */
            opnet_init(&ref, TU_REF, &d);
            opnet_init(&cpu, TU_CPU, &d);
            for (s = 0; s < 3; s++) {
                grzo_step_report r1, r2;
                int64_t c;
                REQUIRE_OK(grzo_step(ref.ctx, 4, opnet_forward, &ref, &r1));
                REQUIRE_OK(grzo_step(cpu.ctx, 4, opnet_forward, &cpu, &r2));
                for (c = 0; c < 8; c++) {
                    double e = fabs(ref.last_losses[c] - cpu.last_losses[c]) / (1.0 + fabs(ref.last_losses[c]));
                    if (e > dl) dl = e;
                }
            }
            dp = max_rel(cpu.W, ref.W, DH * DM);
            if (max_rel(cpu.E, ref.E, VOC * DM) > dp) dp = max_rel(cpu.E, ref.E, VOC * DM);
            if (max_rel(cpu.bv, ref.bv, DH) > dp) dp = max_rel(cpu.bv, ref.bv, DH);
            if (max_rel(cpu.gv, ref.gv, DH) > dp) dp = max_rel(cpu.gv, ref.gv, DH);
            CHECKF(dl <= 1e-4, "%s est %d: losses differ by %.3g between cpu and ref", VNAME[v], (int)ests[ei], dl);
            CHECKF(dp <= 1e-4, "%s est %d: parameters differ by %.3g between cpu and ref", VNAME[v], (int)ests[ei], dp);
            /* plain (evaluation) linear: quantized weights on both */
            {
                grzo_rows one = {0};   /* zero: the defaults (whole pass) */
                one.n_rows = 1;
                one.offsets = NULL;
                tu_fill_unif(x, DM, 999, -1, 1);
                memcpy(ref.h0, x, sizeof x);
                memcpy(cpu.h0, x, sizeof x);
                REQUIRE_OK(grzo_linear(ref.ctx, ref.fc, ref.h0, ref.h1, &one));
                REQUIRE_OK(grzo_linear(cpu.ctx, cpu.fc, cpu.h0, cpu.h1, &one));
                memcpy(y_ref, ref.h1, sizeof y_ref);
                memcpy(y_cpu, cpu.h1, sizeof y_cpu);
                CHECK(max_rel(y_cpu, y_ref, DH) <= 1e-5);
                if (d.quant_bits) {   /* and they differ from the unquantized product */
                    int64_t j, k, differs = 0;
                    for (j = 0; j < DH; j++) {
                        double acc = 0.0;
                        for (k = 0; k < DM; k++) acc += (double)x[k] * ref.W[j * DM + k];
                        differs += fabs(acc - y_ref[j]) > 1e-6;
                    }
                    CHECK(differs > 0);
                }
            }
            opnet_free(&ref);
            opnet_free(&cpu);
        }
}

/* ---- chunks: the CPU backend's chunked paths (a 1-byte transient budget: 16 output rows or
   columns at a time) against the reference, inside a pass (GRZO's per-example Z, each
   example's two copies in one call, or one call per copy as desc.per_example_ops makes them;
   MeZO's shared Z, one run of one sign) and a plain call ------------------------------------------ */
static void test_chunks(void)
{
    enum { DO = 40, DI = 12, B = 3, ROWS = 2 * B * 2 };
    static const grzo_estimator ests[3] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_GRZO };
    int v, ei;
    for (ei = 0; ei < 3; ei++)
    for (v = 0; v < V_COUNT; v++) {
        grzo_backend be[2];
        grzo_ctx *ctx[2];
        float *W[2], *x[2], *y[2];
        grzo_block blk[2];
        grzo_cpu_desc cd;
        grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
        double diff = 0.0, mag = 0.0;
        int k, i;
        memset(&cd, 0, sizeof cd);
        cd.n_threads = 2;
        cd.transient_bytes = 1;
        REQUIRE_OK(grzo_backend_cpu_create(&cd, &be[0]));
        REQUIRE_OK(grzo_backend_ref_create(&be[1]));
        for (k = 0; k < 2; k++) {
            grzo_desc d = tu_desc(&be[k], ests[ei], 5, 0.01f, 0.05f);
            grzo_step_info si;
            grzo_pass_info pi;
            set_variant(&d, v);
            if (ei == 2) d.per_example_ops = 1;   /* a lone copy per backend call */
            ctx[k] = tu_ctx(&d);
            W[k] = (float *)tu_alloc(&be[k], DO * DI * sizeof(float));
            x[k] = (float *)tu_alloc(&be[k], ROWS * DI * sizeof(float));
            y[k] = (float *)tu_alloc(&be[k], 2 * ROWS * DO * sizeof(float));
            tu_fill_unif(W[k], DO * DI, 1001, -1, 1);
            tu_fill_unif(x[k], ROWS * DI, 1002, -1, 1);
            blk[k] = tu_block(ctx[k], GRZO_BLOCK_MATRIX, DO, DI, W[k], "w", 0);
            rows.n_rows = ROWS;
            rows.offsets = NULL;
            REQUIRE_OK(grzo_step_begin(ctx[k], B, &si));
            REQUIRE_OK(grzo_pass_begin(ctx[k], &pi));
            REQUIRE_OK(grzo_linear(ctx[k], blk[k], x[k], y[k], &rows));
            REQUIRE_OK(grzo_step_abort(ctx[k]));
            REQUIRE_OK(grzo_linear(ctx[k], blk[k], x[k], y[k] + ROWS * DO, &rows));   /* plain */
        }
        for (i = 0; i < 2 * ROWS * DO; i++) {
            diff = fmax(diff, fabs((double)y[0][i] - y[1][i]));
            mag = fmax(mag, fabs((double)y[1][i]));
        }
        CHECKF(diff <= 1e-5 * mag, "%s, estimator %d%s: chunked CPU linear differs from the reference by %.3g (of %.3g)",
               VNAME[v], (int)ests[ei], ei == 2 ? " (a call per copy)" : "", diff, mag);
        for (k = 0; k < 2; k++) {
            grzo_destroy(ctx[k]);
            grzo_backend_free(&be[k], W[k]);
            grzo_backend_free(&be[k], x[k]);
            grzo_backend_free(&be[k], y[k]);
            grzo_backend_destroy(&be[k]);
        }
    }
}

int main(int argc, char **argv)
{
    static const grzo_estimator ests[5] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_CANONICAL, GRZO_ESTIMATOR_SHARED,
                                            GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO };
    static const char *names[5] = { "formula_grzo", "formula_canonical", "formula_shared", "formula_mezo", "formula_fzoo" };
    int ei, v;
    tu_args(argc, argv);
    for (ei = 0; ei < 5; ei++)
        if (tu_case(names[ei]))
            for (v = 0; v < V_COUNT; v++)
                if (!(ests[ei] == GRZO_ESTIMATOR_FZOO && (v == V_SPARSE || v == V_SPARSE_INT4))) test_formula(ests[ei], v);
    if (tu_case("mask")) test_mask();
    if (tu_case("rank")) test_rank();
    if (tu_case("quant")) test_quant();
    if (tu_case("refused")) test_refused();
    if (tu_case("cpu_vs_ref")) test_cpu_vs_ref();
    if (tu_case("chunks")) test_chunks();
    return tu_finish("test_variants");
}
