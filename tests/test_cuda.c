/* CUDA backend against the CPU backend (llm.c's rule: every kernel checked against a plain
   CPU reference). Skips (exit 77) when no GPU or no driver is present. Also built as
   test_cuda_emulated (tests/cuda_emu): the same checks with the backend's kernels run as
   loops on the CPU, against stand-ins for the CUDA runtime and cuBLAS, wherever the backend
   compiles; there the 16-bit tensor-core products are exact fp32 products and TF32 keeps each
   fp32 input to 10 mantissa bits (tests/cuda_emu/emu_runtime.cpp), so only a GPU run checks the
   fast-math bounds against the hardware's own rounding.
   Tolerances, and why:
   - RNG: bitwise. The device runs the same source (grzo.h's RNG primitives) and every
     floating-point step of the Gaussian is an explicit fma or an exact operation.
   - fp32 ops: max |gpu - cpu| <= 1e-5 * max |cpu| per output. Both accumulate K products in
     fp32 in different orders (cuBLAS pedantic math: no TF32); the rounding difference of a
     K-term dot product is ~ sqrt(K) * 2^-24 * |terms|, below 1e-6 relative for K <= 512.
   - a whole GRZO step (3 steps of a small model): parameters within 1e-5 relative.
   - fast math with fp32 weights (TF32 tensor ops): a GRZO pass's linear within
     (2^-9 + 2 K 2^-24) sum_k (|w_jk| + sigma) |x_nk| of the CPU's, per output (each TF32 input
     off by at most 2^-10 relative, rounded or truncated).
   - bf16 weights: outputs within 1e-2 relative of the fp32 CPU result on bf16-rounded
     weights (the GPU widens bf16 exactly; the rest is fp32 ordering), and a bf16 update with
     stochastic rounding has the right mean: over many weights, E[update] matches the fp32
     update within 5 standard errors; its rounding bits are the stream's groups k n + i for
     the k-th draw of a step (round_draw), bit for bit, dense and through each variant's
     kernel. Past the largest finite value (bf16 and f16) an update rounds to inf or the
     largest value only, inf with probability 1/2 half a gap on (5 standard errors), inf for
     sure a gap on.
   - fast math, perturbation alone (W = 0, so y = sign sigma P): against an fp64 CPU
     reference, |P_j - (Z x)_j| <= (u + K 2^-24) sum_k |Z_jk x_k| (grzo_cuda.h's worst-case bound,
     unit roundoff u = 2^-8 bf16, 2^-11 f16, doubled for Gaussian U) and rms error / rms(Z x)
     <= 2 u / sqrt(3) (twice the predicted upper estimate). Fast-math bf16 forward: within 1e-2 of fp32 (X rounds to bf16).
   - in-place MeZO: fp32 steps equal the CPU's (1e-5); bf16 restore drift (SR, 200 steps of
     zero update): unbiased (mean within 5 standard errors of 0) and rms <= sqrt(3 T / 4) ulp
     (3 stochastic roundings a step, variance <= ulp^2 / 4 each); measured values printed.
   - variants (grzo.h section 3c: sparse, low-rank, int8, int4, sparse + int4) with the GRZO,
     MeZO and FZOO cores: three steps of the tiny model, parameters within 1e-5 of the CPU's
     (the masks, the rounding bits and the fake-quantized weights are the same functions);
     each variant's linear alone at 70 x 129, fp32 and bf16 weights (the CPU's in fp32 on the
     rounded values), within 1e-5; each variant's perturbed copy (grzo_perturbed_params) of
     matrix, vector and embedding blocks, within 1e-6.
   - no synchronization inside a pass: a bad token id is reported by the next synchronize (and
     only once), update coefficients may be overwritten as soon as update returns, and the
     memory accounting follows allocations byte for byte;
   - the tiled element-wise kernels (grzo_cuda.cu, "tiles") at their edges: rows not a
     multiple of 128 wide (so rows start mid-tile), 1 wide, vector blocks (dense and through
     each variant's kernel, over more than one block of threads), touched masks,
     Gaussian noise (4 elements a lane), segment tables with sign 0, fast-math chunks whose
     noise starts at j0 d_in for odd d_in: against the CPU backend within 1e-6 (1e-5 for
     linears; inputs exact in 16 bits, so the fast path matches too); test_cuda_emulated runs
     with grids of at most 2 blocks each way, so that every grid-stride loop turns;
   - chunks of output rows: the linear, step and variant parity tests again on pedantic
     backends of transient_bytes 10000, 512 and 1 (every linear in several chunks, the last one
     short, or one row a chunk), and the budget itself: a linear's device scratch is at most its whole-layer pieces plus
     transient_bytes (plus alignment), and the default budget runs a small linear in one chunk;
     test_cuda_emulated gives every scratch request a block of exactly its size
     (GRZO__CU_SCRATCH_EXACT), so that ASan sees a caller carving past what it asked for;
   - freeing a pointer twice or one never given out changes nothing and leaves no error for
     the next operation; a linear past cuBLAS's int sizes is refused (UNSUPPORTED). */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "backends/grzo_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static grzo_backend cpu, gpu;

static void *dev_from(const void *host, size_t bytes) {
    void *d = NULL;
    if (grzo_backend_alloc(&gpu, bytes, &d) != GRZO_OK || grzo_backend_upload(&gpu, d, host, bytes) != GRZO_OK) return NULL;
    return d;
}
static void to_host(void *host, const void *dev, size_t bytes) { grzo_backend_download(&gpu, host, dev, bytes); }

static float *random_floats(int64_t n, uint32_t stream) {
    float *x = (float *)malloc((size_t)n * sizeof(float));
    int64_t i;
    for (i = 0; i < n; i++) x[i] = (float)grzo_uniform_at(99, 0, GRZO_USER_BLOCK, stream, (uint64_t)i) - 0.5f;
    return x;
}

static uint16_t to_bf16(float f) { uint32_t b; memcpy(&b, &f, 4); b += 0x7FFFu + ((b >> 16) & 1u); return (uint16_t)(b >> 16); }
static float from_bf16(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }

static double rel_diff(const float *a, const float *b, int64_t n) {
    double md = 0, mr = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        md = fmax(md, fabs((double)a[i] - b[i]));
        mr = fmax(mr, fabs((double)b[i]));
    }
    return mr > 0 ? md / mr : md;
}

/* U of a block, read back through perturbed_copy of a zero block with scale 1: exactly U */
static void test_rng_bitwise(uint32_t dist) {
    const int64_t rows = 37, cols = 301, n = rows * cols;
    float *zero = (float *)calloc((size_t)n, 4), *host = (float *)malloc((size_t)n * 4), *back = (float *)malloc((size_t)n * 4);
    void *dz = dev_from(zero, (size_t)n * 4), *dout = dev_from(zero, (size_t)n * 4);
    grzo_copy_args a;
    grzo_noise u = {0xDEADBEEF12345ull, 77, 5, GRZO_STREAM_BASE, dist};
    memset(&a, 0, sizeof a);
    a.p.data = dz; a.p.kind = GRZO_BLOCK_MATRIX; a.p.dtype = GRZO_DTYPE_F32; a.p.rows = rows; a.p.cols = cols;
    a.base = u; a.flipout = 0; a.scale = 1.0f; a.out = dout;
    CHECK(gpu.iface->perturbed_copy(gpu.self, &a) == GRZO_OK, "perturbed_copy");
    to_host(back, dout, (size_t)n * 4);
    grzo_noise_fill(&u, 0, (size_t)n, host);
    CHECK(memcmp(host, back, (size_t)n * 4) == 0, "RNG dist %u: GPU noise differs from CPU bits", dist);
    grzo_backend_free(&gpu, dz);
    grzo_backend_free(&gpu, dout);
    free(zero); free(host); free(back);
}

/* A 16-bit perturbed copy rounds to nearest, ties to even: a zero block plus scale * (+-1)
   for scales exactly halfway between two 16-bit values (to the even one: 1, then 1 + 2 ulp)
   and just past halfway (up: 1 + 1 ulp). The copy had added half an ulp's bits and cut,
   rounding every tie away from zero. */
static void test_copy_rounding(grzo_dtype dt) {
    enum { ROWS = 8, COLS = 33, N = ROWS * COLS };
    const double ulp = ldexp(1.0, dt == GRZO_DTYPE_BF16 ? -7 : -10);
    const float scales[3] = {(float)(1.0 + ulp / 2), (float)(1.0 + 1.5 * ulp), (float)(1.0 + ulp / 2 + ulp / 16)};
    const uint16_t one = dt == GRZO_DTYPE_BF16 ? 0x3F80u : 0x3C00u, expect[3] = {one, (uint16_t)(one + 2), (uint16_t)(one + 1)};
    uint16_t zero[N], back[N];
    float z[N];
    void *dz, *dout;
    grzo_copy_args a;
    grzo_noise u = {91, 3, 2, GRZO_STREAM_BASE, GRZO_NOISE_RADEMACHER};
    int t;
    int64_t i, bad = 0;
    memset(zero, 0, sizeof zero);
    dz = dev_from(zero, sizeof zero);
    dout = dev_from(zero, sizeof zero);
    grzo_noise_fill(&u, 0, N, z);
    for (t = 0; t < 3; t++) {
        memset(&a, 0, sizeof a);
        a.p.data = dz; a.p.kind = GRZO_BLOCK_MATRIX; a.p.dtype = dt; a.p.rows = ROWS; a.p.cols = COLS;
        a.base = u; a.scale = scales[t]; a.out = dout;
        CHECK(gpu.iface->perturbed_copy(gpu.self, &a) == GRZO_OK, "perturbed_copy dtype %d", (int)dt);
        to_host(back, dout, sizeof back);
        for (i = 0; i < N; i++) bad += back[i] != (uint16_t)(expect[t] | (z[i] < 0.0f ? 0x8000u : 0u));
    }
    CHECK(bad == 0, "%s perturbed copy: %lld of %d elements not rounded to nearest even", dt == GRZO_DTYPE_BF16 ? "bf16" : "f16",
          (long long)bad, 3 * N);
    grzo_backend_free(&gpu, dz);
    grzo_backend_free(&gpu, dout);
}

/* max over outputs of |yg - yc| / ((2^-9 + 2 K 2^-24) sum_k (|w_jk| + sigma) |x_nk|): TF32's
   bound, <= 1 (each product's inputs kept to 10 mantissa bits, by rounding or truncation: at
   most 2^-10 relative each; the sums in fp32 on both sides; |u| = 1) */
static double tf32_excess(const float *yg, const float *yc, const float *W, const float *X, int64_t n, int64_t DO, int64_t DI,
                          float sigma) {
    double worst = 0, u = ldexp(1.0, -9) + 2.0 * (double)DI * ldexp(1.0, -24);
    int64_t i, j, k;
    for (i = 0; i < n; i++)
        for (j = 0; j < DO; j++) {
            double mag = 0, e;
            for (k = 0; k < DI; k++) mag += (fabs(W[j * DI + k]) + sigma) * fabs(X[i * DI + k]);
            e = fabs((double)yg[i * DO + j] - yc[i * DO + j]) / (u * mag);
            if (e > worst) worst = e;
        }
    return worst;
}

/* The single-linear tests' pass: a GRZO pass over 2B uneven segments ("+" copies first) of an
   LP_DO x LP_DI fp32 linear, n rows in all; a.w.data, a.x and a.y are the caller's to set. */
enum { LP_B = 3, LP_DO = 70, LP_DI = 129 };
typedef struct lp_pass {
    int64_t off[2 * LP_B + 1], ex[2 * LP_B], n;
    int8_t sign[2 * LP_B];
    grzo_perturb pt;
    grzo_linear_args a;
} lp_pass;

static void lp_pass_init(lp_pass *p, int flipout, const grzo_variant *v) {
    int64_t c;
    memset(p, 0, sizeof *p);
    for (c = 0; c < 2 * LP_B; c++) {
        p->off[c + 1] = p->off[c] + 1 + (c * 5) % 7;
        p->sign[c] = c < LP_B ? 1 : -1;
        p->ex[c] = c % LP_B;
    }
    p->n = p->off[2 * LP_B];
    p->pt.base.seed = 5; p->pt.base.step = 3; p->pt.base.block = 2; p->pt.base.dist = GRZO_NOISE_RADEMACHER;
    p->pt.sigma = 1e-2f; p->pt.flipout = flipout; p->pt.n_examples = LP_B; p->pt.n_segments = 2 * LP_B;
    p->pt.offsets = p->off; p->pt.sign = p->sign; p->pt.example = p->ex;
    p->a.w.kind = GRZO_BLOCK_MATRIX; p->a.w.dtype = GRZO_DTYPE_F32; p->a.w.rows = LP_DO; p->a.w.cols = LP_DI;
    p->a.n_rows = p->n; p->a.perturb = &p->pt; p->a.variant = v;
}

/* One op through the CPU backend and be: the linear of a GRZO pass over 2B uneven segments,
   dense (v = NULL) or with a variant (grzo.h section 3c), fp32 weights or (bf16 = 1) bf16
   ones (the CPU's in fp32 on the same rounded values). be pedantic: within 1e-5 (the GPU
   widens bf16 exactly); fast (tf32 = 1): within TF32's bound. */
static void linear_parity_on(grzo_backend *be, int tf32, int bf16, int flipout, const grzo_variant *v, const char *what) {
    enum { DO = LP_DO, DI = LP_DI };
    lp_pass p;
    int64_t n, c;
    float *W = random_floats(DO * DI, 1), *X, *yc, *yg;
    uint16_t Wb[DO * DI];
    void *dW, *dX, *dY;
    for (c = 0; bf16 && c < DO * DI; c++) { Wb[c] = to_bf16(W[c]); W[c] = from_bf16(Wb[c]); }
    dW = bf16 ? dev_from(Wb, sizeof Wb) : dev_from(W, sizeof(float) * DO * DI);
    lp_pass_init(&p, flipout, v);
    n = p.n;
    X = random_floats(n * DI, 2);
    yc = (float *)malloc(sizeof(float) * (size_t)(n * DO));
    yg = (float *)malloc(sizeof(float) * (size_t)(n * DO));
    dX = dev_from(X, sizeof(float) * (size_t)(n * DI));
    dY = dev_from(yc, sizeof(float) * (size_t)(n * DO));
    p.a.w.data = W; p.a.x = X; p.a.y = yc;
    CHECK(cpu.iface->linear(cpu.self, &p.a) == GRZO_OK, "cpu linear (%s)", what);
    p.a.w.data = dW; p.a.x = (const float *)dX; p.a.y = (float *)dY;
    p.a.w.dtype = bf16 ? GRZO_DTYPE_BF16 : GRZO_DTYPE_F32;
    CHECK(be->iface->linear(be->self, &p.a) == GRZO_OK && be->iface->synchronize(be->self) == GRZO_OK, "gpu linear (%s): %s",
          what, be->iface->last_error(be->self));
    to_host(yg, dY, sizeof(float) * (size_t)(n * DO));
    if (tf32)
        CHECK(tf32_excess(yg, yc, W, X, n, DO, DI, p.pt.sigma) <= 1.0, "linear (%s) flipout=%d: %.3g of TF32's bound", what,
              flipout, tf32_excess(yg, yc, W, X, n, DO, DI, p.pt.sigma));
    else
        CHECK(rel_diff(yg, yc, n * DO) <= 1e-5, "linear (%s) flipout=%d: rel diff %.3g", what, flipout, rel_diff(yg, yc, n * DO));
    grzo_backend_free(&gpu, dW); grzo_backend_free(&gpu, dX); grzo_backend_free(&gpu, dY);
    free(W); free(X); free(yc); free(yg);
}

static void test_linear_parity(int flipout) { linear_parity_on(&gpu, 0, 0, flipout, NULL, "dense"); }

/* Variant k of the single-op tests (grzo.h section 3c), its name; 0: dense (all zero) */
enum { N_OP_VARIANTS = 6 };
static const char *op_variant(int k, grzo_variant *v) {
    static const char *const names[N_OP_VARIANTS] = {"dense", "sparse", "low-rank", "int8", "int4", "sparse + int4"};
    memset(v, 0, sizeof *v);
    if (k == 1 || k == 5) { v->sparse = 1; v->sparse_threshold = 0.4f; }
    if (k == 2) { v->lowrank_rank = 3; v->lowrank_step = 2; }
    if (k == 3) v->quant_bits = 8;
    if (k >= 4) v->quant_bits = 4;
    return names[k];
}

/* The variants' linear at the dense test's shapes (the tiny model's 9 x 16 weight leaves
   every per-example piece inside one 256-byte aligned slot of the scratch), fp32 and bf16
   weights (pedantic: widened to fp32 per chunk) */
static void test_linear_variants_parity(void) {
    int k, flipout, bf16;
    for (k = 1; k < N_OP_VARIANTS; k++)
        for (bf16 = 0; bf16 < 2; bf16++)
            for (flipout = 0; flipout < 2; flipout++) {
                grzo_variant v;
                char what[64];
                snprintf(what, sizeof what, "%s, %s weights", op_variant(k, &v), bf16 ? "bf16" : "fp32");
                linear_parity_on(&gpu, 0, bf16, flipout, &v, what);
            }
}

/* perturbed_copy (what grzo_perturbed_params gives a custom op) of matrix, vector and
   embedding blocks, dense and with each variant, both Flipout settings, Rademacher and
   Gaussian U: the CPU's values within 1e-6 (the same element functions); 300 rows, so that
   the quantized variants' per-row scales take more than one block of threads */
static void test_copy_variants_parity(void) {
    enum { R = 300, C = 129 };
    static const grzo_block_kind kinds[3] = {GRZO_BLOCK_MATRIX, GRZO_BLOCK_VECTOR, GRZO_BLOCK_EMBEDDING};
    float *P = random_floats(R * C, 8), *oc = (float *)malloc(sizeof(float) * R * C), *og = (float *)malloc(sizeof(float) * R * C);
    void *dP = dev_from(P, sizeof(float) * R * C), *dO = dev_from(P, sizeof(float) * R * C);
    int k, kind, flipout, dist;
    for (k = 0; k < N_OP_VARIANTS; k++)
        for (kind = 0; kind < 3; kind++)
            for (flipout = 0; flipout < 2; flipout++)
                for (dist = 0; dist < 2; dist++) {
                    grzo_variant v;
                    grzo_copy_args a;
                    int64_t n = kinds[kind] == GRZO_BLOCK_VECTOR ? R : (int64_t)R * C;
                    grzo_status sc, sg;
                    const char *name = op_variant(k, &v);
                    if (k == 2 && kinds[kind] == GRZO_BLOCK_VECTOR) continue;   /* low-rank: matrix and embedding blocks */
                    memset(&a, 0, sizeof a);
                    a.p.kind = kinds[kind]; a.p.dtype = GRZO_DTYPE_F32; a.p.rows = R;
                    a.p.cols = kinds[kind] == GRZO_BLOCK_VECTOR ? 1 : C;
                    a.base.seed = 4; a.base.step = 2; a.base.block = 1;
                    a.base.dist = dist ? GRZO_NOISE_GAUSSIAN : GRZO_NOISE_RADEMACHER;
                    a.flipout = flipout; a.example = 1; a.scale = -0.01f; a.variant = k ? &v : NULL;
                    a.p.data = P; a.out = oc;
                    sc = cpu.iface->perturbed_copy(cpu.self, &a);
                    a.p.data = dP; a.out = dO;
                    sg = gpu.iface->perturbed_copy(gpu.self, &a);
                    if (sg == GRZO_OK) sg = gpu.iface->synchronize(gpu.self);
                    CHECK(sc == GRZO_OK && sg == GRZO_OK, "perturbed copy (%s, kind %d, flipout %d, dist %d): cpu %s, gpu %s (%s)",
                          name, (int)kinds[kind], flipout, dist, grzo_status_str(sc), grzo_status_str(sg),
                          gpu.iface->last_error(gpu.self));
                    if (sc != GRZO_OK || sg != GRZO_OK) continue;
                    to_host(og, dO, sizeof(float) * (size_t)n);
                    CHECK(rel_diff(og, oc, n) <= 1e-6, "perturbed copy (%s, kind %d, flipout %d, dist %d): rel diff %.3g", name,
                          (int)kinds[kind], flipout, dist, rel_diff(og, oc, n));
                }
    grzo_backend_free(&gpu, dP); grzo_backend_free(&gpu, dO);
    free(P); free(oc); free(og);
}

/* Three GRZO steps of embedding -> linear -> gain on each backend: same parameters. */
typedef struct tiny { grzo_backend *be; void *E, *W, *g, *ids, *x, *h, *y; float *hy; } tiny;
enum { TV = 23, TD = 16, TO = 9, TB = 4, TT = 3 };

static grzo_status tiny_forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user) {
    tiny *m = (tiny *)user;
    grzo_block e = {1}, w = {2}, g = {3};
    int32_t ids[2 * TB * TT];
    int64_t n = pi->n_segments * TT, c, t, j;
    grzo_rows rows = {.n_rows = n};
    grzo_status s;
    for (c = 0; c < pi->n_segments; c++)
        for (t = 0; t < TT; t++) ids[c * TT + t] = (int32_t)((pi->example[c] * 7 + t * 3) % TV);
    if ((s = grzo_backend_upload(m->be, m->ids, ids, sizeof(int32_t) * (size_t)n)) != GRZO_OK) return s;
    if ((s = grzo_embedding(ctx, e, (const int32_t *)m->ids, (float *)m->x, &rows)) != GRZO_OK) return s;
    if ((s = grzo_linear(ctx, w, (const float *)m->x, (float *)m->h, &rows)) != GRZO_OK) return s;
    if ((s = grzo_vector(ctx, g, GRZO_VECTOR_MUL, (const float *)m->h, (float *)m->y, &rows)) != GRZO_OK) return s;
    if ((s = grzo_backend_download(m->be, m->hy, m->y, sizeof(float) * (size_t)(n * TO))) != GRZO_OK) return s;
    for (c = 0; c < pi->n_segments; c++) {
        double l = 0;
        for (t = 0; t < TT; t++)
            for (j = 0; j < TO; j++) l += pow(m->hy[(c * TT + t) * TO + j] - 0.1 * (double)j, 2);
        losses[c] = (float)l;
    }
    return GRZO_OK;
}

static grzo_desc tiny_axes;   /* the variant axes of run_tiny (test_variants_parity); zero: dense */

static void run_tiny(grzo_backend *be, int on_gpu, grzo_estimator est, float *E, float *W, float *g) {
    tiny m;
    grzo_ctx *ctx = NULL;
    grzo_block b;
    grzo_desc d;
    int step;
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    m.be = be;
    d.backend = be; d.lr = 1e-3f; d.sigma = 1e-2f; d.seed = 11; d.estimator = est; d.fzoo_probes = 3;
    d.weight_decay = 0.1f;   /* the update kernels' decay term, dense and variant alike, on both sides */
    d.sparse_density = tiny_axes.sparse_density; d.lowrank_rank = tiny_axes.lowrank_rank;
    d.lowrank_every = tiny_axes.lowrank_every; d.quant_bits = tiny_axes.quant_bits; d.noise = tiny_axes.noise;
    CHECK(grzo_create(&d, &ctx) == GRZO_OK, "create");
    if (!ctx) return;
    m.E = on_gpu ? dev_from(E, sizeof(float) * TV * TD) : E;
    m.W = on_gpu ? dev_from(W, sizeof(float) * TO * TD) : W;
    m.g = on_gpu ? dev_from(g, sizeof(float) * TO) : g;
    grzo_backend_alloc(be, sizeof(int32_t) * 2 * TB * TT, &m.ids);
    grzo_backend_alloc(be, sizeof(float) * 2 * TB * TT * TD, &m.x);
    grzo_backend_alloc(be, sizeof(float) * 2 * TB * TT * TO, &m.h);
    grzo_backend_alloc(be, sizeof(float) * 2 * TB * TT * TO, &m.y);
    m.hy = (float *)malloc(sizeof(float) * 2 * TB * TT * TO);
    grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_EMBEDDING, TV, TD, m.E, GRZO_DTYPE_F32, "emb", 0}, &b);
    grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_MATRIX, TO, TD, m.W, GRZO_DTYPE_F32, "w", 0}, &b);
    grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_VECTOR, TO, 1, m.g, GRZO_DTYPE_F32, "g", 0}, &b);
    for (step = 0; step < 3; step++)
        CHECK(grzo_step(ctx, TB, tiny_forward, &m, NULL) == GRZO_OK, "step: %s", grzo_last_error(ctx));
    if (on_gpu) {
        to_host(E, m.E, sizeof(float) * TV * TD);
        to_host(W, m.W, sizeof(float) * TO * TD);
        to_host(g, m.g, sizeof(float) * TO);
        grzo_backend_free(be, m.E); grzo_backend_free(be, m.W); grzo_backend_free(be, m.g);
    }
    grzo_backend_free(be, m.ids); grzo_backend_free(be, m.x); grzo_backend_free(be, m.h); grzo_backend_free(be, m.y);
    free(m.hy);
    grzo_destroy(ctx);
}

static void test_steps_parity(grzo_estimator est) {
    float *E1 = random_floats(TV * TD, 3), *W1 = random_floats(TO * TD, 4), *g1 = random_floats(TO, 5);
    float *E2 = random_floats(TV * TD, 3), *W2 = random_floats(TO * TD, 4), *g2 = random_floats(TO, 5);
    run_tiny(&cpu, 0, est, E1, W1, g1);
    run_tiny(&gpu, 1, est, E2, W2, g2);
    CHECK(rel_diff(E2, E1, TV * TD) <= 1e-5 && rel_diff(W2, W1, TO * TD) <= 1e-5 && rel_diff(g2, g1, TO) <= 1e-5,
          "estimator %d: parameters after 3 steps differ: E %.3g W %.3g g %.3g", (int)est, rel_diff(E2, E1, TV * TD),
          rel_diff(W2, W1, TO * TD), rel_diff(g2, g1, TO));
    free(E1); free(W1); free(g1); free(E2); free(W2); free(g2);
}

static void test_variants_parity(void) {
    static const grzo_estimator ests[3] = {GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO};
    static const char *names[5] = {"sparse", "low-rank", "int8", "int4", "sparse + int4"};
    int v, e;
    for (v = 0; v < 5; v++)
        for (e = 0; e < 3; e++) {
            memset(&tiny_axes, 0, sizeof tiny_axes);
            if (v == 0 || v == 4) tiny_axes.sparse_density = 0.3f;
            if (v == 1) { tiny_axes.lowrank_rank = 2; tiny_axes.lowrank_every = 2; }
            if (v == 2) tiny_axes.quant_bits = 8;
            if (v >= 3) { tiny_axes.quant_bits = 4; tiny_axes.noise = GRZO_NOISE_GAUSSIAN; }
            if (ests[e] == GRZO_ESTIMATOR_FZOO && tiny_axes.sparse_density > 0) continue;   /* refused */
            {
                int before = fails;
                test_steps_parity(ests[e]);
                if (fails > before) printf("  (with variant %s)\n", names[v]);
            }
        }
    memset(&tiny_axes, 0, sizeof tiny_axes);
}

/* bf16 weights: forward close to fp32 on rounded weights; SR update unbiased on average */
/* A bf16-weight linear on backend be against the fp32 CPU on the same (rounded) weights:
   max |gpu - cpu| / max |cpu|, or -1 when the GPU call failed. Memory comes from gpu. */
static double bf16_linear_rel_diff(grzo_backend *be, int64_t DO, int64_t DI, int64_t N, uint32_t w_stream, uint32_t x_stream) {
    float *W = random_floats(DO * DI, w_stream), *X = random_floats(N * DI, x_stream);
    float *yc = (float *)calloc((size_t)(N * DO), sizeof(float)), *yg = (float *)calloc((size_t)(N * DO), sizeof(float));
    uint16_t *Wb = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(DO * DI));
    void *dW, *dX, *dY;
    grzo_linear_args a;
    double d = -1.0;
    int64_t i;
    for (i = 0; i < DO * DI; i++) { Wb[i] = to_bf16(W[i]); W[i] = from_bf16(Wb[i]); }
    dW = dev_from(Wb, sizeof(uint16_t) * (size_t)(DO * DI));
    dX = dev_from(X, sizeof(float) * (size_t)(N * DI));
    dY = dev_from(yc, sizeof(float) * (size_t)(N * DO));
    memset(&a, 0, sizeof a);
    a.w.kind = GRZO_BLOCK_MATRIX; a.w.rows = DO; a.w.cols = DI; a.n_rows = N;
    a.w.dtype = GRZO_DTYPE_F32; a.w.data = W; a.x = X; a.y = yc;
    cpu.iface->linear(cpu.self, &a);
    a.w.dtype = GRZO_DTYPE_BF16; a.w.data = dW; a.x = (const float *)dX; a.y = (float *)dY;
    if (be->iface->linear(be->self, &a) == GRZO_OK && (!be->iface->synchronize || be->iface->synchronize(be->self) == GRZO_OK)) {
        to_host(yg, dY, sizeof(float) * (size_t)(N * DO));
        d = rel_diff(yg, yc, N * DO);
    }
    grzo_backend_free(&gpu, dW); grzo_backend_free(&gpu, dX); grzo_backend_free(&gpu, dY);
    free(W); free(X); free(Wb); free(yc); free(yg);
    return d;
}

static void test_bf16(void) {
    enum { M = 1 << 16 };
    uint16_t *P16 = (uint16_t *)malloc(2 * M);
    void *dP;
    grzo_update_args u;
    float coeff = 1.0f / 1024.0f;   /* a quarter bf16 ulp above 0.5, half one below: round-to-nearest would lose it */
    double mean_change = 0, expect = 0, d = bf16_linear_rel_diff(&gpu, 64, 96, 8, 6, 7);
    int64_t i;
    CHECK(d >= 0.0 && d <= 1e-2, "bf16 linear rel diff %.3g (-1: the call failed)", d);
    for (i = 0; i < M; i++) P16[i] = to_bf16(0.5f);
    dP = dev_from(P16, 2 * M);
    memset(&u, 0, sizeof u);
    u.p.kind = GRZO_BLOCK_MATRIX; u.p.dtype = GRZO_DTYPE_BF16; u.p.rows = 256; u.p.cols = M / 256; u.p.data = dP;
    u.base.seed = 9; u.base.dist = GRZO_NOISE_RADEMACHER; u.flipout = 0; u.n_examples = 1; u.coeff = &coeff;
    CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "bf16 update");
    to_host(P16, dP, 2 * M);
    for (i = 0; i < M; i++) {
        float z = grzo_noise_at(&u.base, (uint64_t)i);
        mean_change += (double)from_bf16(P16[i]) - 0.5;
        expect += -(double)coeff * z;
    }
    /* each weight moves by one bf16 ulp (2^-8 at 0.5, 2^-9 below) with probability ~1/4 */
    CHECK(fabs(mean_change - expect) <= 5.0 * sqrt((double)M * 0.25) * (1.0 / 256.0),
          "bf16 stochastic rounding biased: sum of changes %.4g, expected %.4g", mean_change, expect);
    grzo_backend_free(&gpu, dP);
    free(P16);
}

/* The rounding bits of a bf16 update, bit for bit: element i of draw k rounds with word 0 of
   group k * n + i of the rounding stream (grzo_update_args.round_draw), so that FZOO's N
   probe updates of one step round independently; with every draw on group i (the old
   behaviour) the draws' roundings would be one and the same, which the check tells apart.
   The same through each variant's update kernel. The base z is grzo.h's grzo__variant_base
   (for the dense update, whose variant is all zero, U itself), on weights spread over
   [0.25, 0.75) so that the sparse mask varies. */
static void test_round_draw(void) {
    enum { M = 1 << 14 };
    uint16_t *P16 = (uint16_t *)malloc(2 * M), *P0 = (uint16_t *)malloc(2 * M);
    float coeff = 1.0f / 1024.0f;
    uint32_t k;
    int var;
    CHECK(P16 && P0, "test_round_draw: out of host memory");
    if (!P16 || !P0) { free(P16); free(P0); return; }
    for (var = 0; var < N_OP_VARIANTS; var++)
        for (k = 0; k < 3; k++) {
            grzo_update_args u;
            grzo_variant v;
            grzo_noise sr;
            void *dP;
            int64_t i, wrong = 0, as_draw0 = 0;
            const char *name = op_variant(var, &v);
            for (i = 0; i < M; i++) P0[i] = to_bf16(0.25f + (float)(i % 97) / 194.0f);
            dP = dev_from(P0, 2 * M);
            memset(&u, 0, sizeof u);
            u.p.kind = GRZO_BLOCK_MATRIX; u.p.dtype = GRZO_DTYPE_BF16; u.p.rows = 128; u.p.cols = M / 128; u.p.data = dP;
            u.base.seed = 11; u.base.step = 4; u.base.block = 2; u.base.dist = GRZO_NOISE_RADEMACHER;
            u.n_examples = 1; u.coeff = &coeff; u.round_draw = k; u.variant = var ? &v : NULL;
            CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "bf16 update (%s), draw %u", name, k);
            to_host(P16, dP, 2 * M);
            sr = u.base;
            sr.stream = GRZO_STREAM_ROUND;
            for (i = 0; i < M; i++) {
                float th = from_bf16(P0[i]);
                float z = grzo__variant_base(&u.p, &u.base, &v, i / u.p.cols, i % u.p.cols, th);
                float x = th - z * coeff;
                uint32_t w[4], w0[4], b;
                memcpy(&b, &x, 4);
                grzo__noise_group(&sr, (uint64_t)k * M + (uint64_t)i, w);
                grzo__noise_group(&sr, (uint64_t)i, w0);
                wrong += P16[i] != (uint16_t)((b + (w[0] & 0xFFFFu)) >> 16);
                as_draw0 += P16[i] == (uint16_t)((b + (w0[0] & 0xFFFFu)) >> 16);
            }
            CHECK(wrong == 0, "%s, draw %u: %lld of %d bf16 roundings are not the stream's groups k n + i", name, k,
                  (long long)wrong, M);
            /* about 1/4 of the roundings go up, independently of draw 0's: ~3/8 of them differ */
            CHECK(k == 0 || as_draw0 < M - M / 8, "%s, draw %u rounds as draw 0 does in %lld of %d elements", name, k,
                  (long long)as_draw0, M);
            grzo_backend_free(&gpu, dP);
        }
    free(P16);
    free(P0);
}

/* A 16-bit update past the type's largest finite value: stochastic rounding's next step up is
   inf, one gap on, in both types (BF16 by the added bits' carry, F16 from 65504 as if to
   65536), so an element that outgrows the type becomes inf, as round-to-nearest would make it.
   The F16 rounding had saturated every such element at 65504. Each element starts at the
   largest finite value m and moves by -c z (z = +-1, Rademacher): with c one gap (z = -1:
   m + gap, inf for sure; z = +1: m - gap, exact) and half a gap (z = -1: inf with probability
   1/2; z = +1: halfway between m - gap and m). */
static void test_sr_overflow(grzo_dtype dt) {
    enum { M = 1 << 14 };
    const int bf = dt == GRZO_DTYPE_BF16;
    const uint16_t top = bf ? 0x7F7Fu : 0x7BFFu, below = top - 1, inf = bf ? 0x7F80u : 0x7C00u;
    const float gap = bf ? ldexpf(1.0f, 120) : 32.0f;
    uint16_t *P16 = (uint16_t *)malloc(2 * M);
    int h;
    CHECK(P16 != NULL, "test_sr_overflow: out of host memory");
    for (h = 0; P16 && h < 2; h++) {
        float coeff = h ? gap / 2 : gap;
        grzo_update_args u;
        void *dP;
        int64_t i, up = 0, n_up = 0, wrong = 0;
        for (i = 0; i < M; i++) P16[i] = top;
        dP = dev_from(P16, 2 * M);
        memset(&u, 0, sizeof u);
        u.p.kind = GRZO_BLOCK_MATRIX; u.p.dtype = dt; u.p.rows = 128; u.p.cols = M / 128; u.p.data = dP;
        u.base.seed = 13; u.base.step = 2; u.base.dist = GRZO_NOISE_RADEMACHER;
        u.n_examples = 1; u.coeff = &coeff;
        CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "%s update at the largest value", bf ? "bf16" : "f16");
        to_host(P16, dP, 2 * M);
        for (i = 0; i < M; i++) {
            if (grzo_noise_at(&u.base, (uint64_t)i) < 0.0f) {   /* moved up, past the largest value */
                n_up++;
                up += P16[i] == inf;
                wrong += h ? P16[i] != inf && P16[i] != top : P16[i] != inf;
            } else   /* moved down: one gap is exact, half a gap rounds between its neighbours */
                wrong += h ? P16[i] != top && P16[i] != below : P16[i] != below;
        }
        CHECK(wrong == 0, "%s update by %s gap at the largest value: %lld of %d elements outside the rounding's two "
              "choices", bf ? "bf16" : "f16", h ? "half a" : "one", (long long)wrong, M);
        /* half a gap up: inf with probability 1/2 (5 standard errors: 5 sqrt(n / 4)) */
        CHECK(!h || fabs((double)up - 0.5 * (double)n_up) <= 2.5 * sqrt((double)n_up),
              "%s update by half a gap past the largest value: %lld of %lld elements became inf, expected about half",
              bf ? "bf16" : "f16", (long long)up, (long long)n_up);
        grzo_backend_free(&gpu, dP);
    }
    free(P16);
}

/* ---- fast math: the perturbation's own rounding against fp64 ------------------------------- */
static double ulp16(float x, grzo_dtype dt) {   /* 16-bit ulp at |x| */
    int e;
    frexp(fabs((double)x) > 0 ? fabs((double)x) : 1e-30, &e);   /* |x| = m 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 1 - (dt == GRZO_DTYPE_BF16 ? 7 : 10));
}

static void test_fast_perturbation(grzo_backend *fast, grzo_dtype dt, uint32_t dist) {
    enum { DO = 256, DI = 1024, B = 2, ROWS = 4 };   /* K = 1024: accumulation 2^-14 << u */
    int64_t off[2 * B + 1], ex[2 * B], n = 2 * B * ROWS, c, j, k, r;
    int8_t sign[2 * B];
    float *X = random_floats(n * DI, 21), *y = (float *)malloc(sizeof(float) * (size_t)(n * DO));
    uint16_t *W0 = (uint16_t *)calloc((size_t)DO * DI, 2);
    void *dW = dev_from(W0, 2 * (size_t)DO * DI), *dX = dev_from(X, sizeof(float) * (size_t)(n * DI)), *dY = dev_from(y, sizeof(float) * (size_t)(n * DO));
    grzo_perturb pt;
    grzo_linear_args a;
    double u = (dt == GRZO_DTYPE_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -11)) * (dist == GRZO_NOISE_GAUSSIAN ? 2.0 : 1.0);
    double worst = 0, se = 0, sr = 0, sigma = 1e-3;
    for (c = 0; c <= 2 * B; c++) off[c] = c * ROWS;
    for (c = 0; c < 2 * B; c++) { sign[c] = c < B ? 1 : -1; ex[c] = c % B; }
    memset(&pt, 0, sizeof pt);
    pt.base.seed = 17; pt.base.step = 4; pt.base.block = 1; pt.base.dist = dist;
    pt.sigma = (float)sigma; pt.flipout = 1; pt.n_examples = B; pt.n_segments = 2 * B;
    pt.offsets = off; pt.sign = sign; pt.example = ex;
    memset(&a, 0, sizeof a);
    a.w.kind = GRZO_BLOCK_MATRIX; a.w.dtype = dt; a.w.rows = DO; a.w.cols = DI; a.w.data = dW;
    a.x = (const float *)dX; a.y = (float *)dY; a.n_rows = n; a.perturb = &pt;
    CHECK(fast->iface->linear(fast->self, &a) == GRZO_OK, "fast linear: %s", fast->iface->last_error(fast->self));
    CHECK(fast->iface->synchronize(fast->self) == GRZO_OK, "fast synchronize");   /* another stream than gpu's */
    to_host(y, dY, sizeof(float) * (size_t)(n * DO));
    for (r = 0; r < n; r++) {
        int64_t cc = r / ROWS, e = ex[cc];
        for (j = 0; j < DO; j++) {
            grzo_param wp = a.w;
            double ref = 0, l1 = 0, err;
            for (k = 0; k < DI; k++) {
                double z = grzo__z_element(&wp, &pt.base, 1, e, j, k);
                ref += z * X[r * DI + k];
                l1 += fabs(z * X[r * DI + k]);
            }
            err = (double)y[r * DO + j] / (sign[cc] * sigma) - ref;
            worst = fmax(worst, fabs(err) / ((u + DI * ldexp(1.0, -24)) * l1));
            se += err * err;
            sr += ref * ref;
        }
    }
    printf("  fast %s dist %u: perturbation rms rel error %.3g (predicted %.3g), worst %.3g of the bound\n",
           dt == GRZO_DTYPE_BF16 ? "bf16" : "f16", dist, sqrt(se / sr), u / sqrt(3.0), worst);
    CHECK(worst <= 1.0, "fast %d dist %u: perturbation error exceeds (u + K 2^-24) sum_k |U_jk x_k| (%.3g of it)", (int)dt, dist, worst);
    CHECK(sqrt(se / sr) <= 2.0 * u / sqrt(3.0), "fast %d dist %u: rms relative perturbation error %.3g > 2u/sqrt(3) = %.3g",
          (int)dt, dist, sqrt(se / sr), 2.0 * u / sqrt(3.0));
    grzo_backend_free(&gpu, dW); grzo_backend_free(&gpu, dX); grzo_backend_free(&gpu, dY);   /* dev_from allocates on gpu */
    free(X); free(y); free(W0);
}

/* fast math bf16 forward (no perturbation) against the fp32 CPU on the rounded weights */
static void test_fast_forward(grzo_backend *fast) {
    double d = bf16_linear_rel_diff(fast, 192, 320, 12, 31, 32);
    CHECK(d >= 0.0 && d <= 1e-2, "fast bf16 linear rel diff %.3g (-1: the call failed)", d);
    printf("  fast bf16 forward: max |gpu - cpu fp32| / max |cpu| = %.3g\n", d);
}

/* Three steps of the tiny model with bf16 blocks on backend be (allocations through gpu). */
static void run_tiny_bf16(grzo_backend *be, grzo_estimator est, uint16_t *E, uint16_t *W, uint16_t *g) {
    tiny m;
    grzo_ctx *ctx = NULL;
    grzo_block b;
    grzo_desc d;
    int step;
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    m.be = be;     /* the forward's copies run on be's stream, ordered with its operations (the
                      memory itself comes from gpu: device memory serves every stream) */
    d.backend = be; d.lr = 1e-3f; d.sigma = 1e-2f; d.seed = 11; d.estimator = est; d.fzoo_probes = 3;
    CHECK(grzo_create(&d, &ctx) == GRZO_OK, "create");
    if (!ctx) return;
    m.E = dev_from(E, 2 * TV * TD); m.W = dev_from(W, 2 * TO * TD); m.g = dev_from(g, 2 * TO);
    grzo_backend_alloc(&gpu, sizeof(int32_t) * 2 * TB * TT, &m.ids);
    grzo_backend_alloc(&gpu, sizeof(float) * 2 * TB * TT * TD, &m.x);
    grzo_backend_alloc(&gpu, sizeof(float) * 2 * TB * TT * TO, &m.h);
    grzo_backend_alloc(&gpu, sizeof(float) * 2 * TB * TT * TO, &m.y);
    m.hy = (float *)malloc(sizeof(float) * 2 * TB * TT * TO);
    grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_EMBEDDING, TV, TD, m.E, GRZO_DTYPE_BF16, "emb", 0}, &b);
    grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_MATRIX, TO, TD, m.W, GRZO_DTYPE_BF16, "w", 0}, &b);
    grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_VECTOR, TO, 1, m.g, GRZO_DTYPE_BF16, "g", 0}, &b);
    for (step = 0; step < 3; step++)
        CHECK(grzo_step(ctx, TB, tiny_forward, &m, NULL) == GRZO_OK, "bf16 step: %s", grzo_last_error(ctx));
    CHECK(be->iface->synchronize(be->self) == GRZO_OK, "synchronize");   /* the last update ran on be's stream */
    to_host(E, m.E, 2 * TV * TD); to_host(W, m.W, 2 * TO * TD); to_host(g, m.g, 2 * TO);
    grzo_backend_free(&gpu, m.E); grzo_backend_free(&gpu, m.W); grzo_backend_free(&gpu, m.g);
    grzo_backend_free(&gpu, m.ids); grzo_backend_free(&gpu, m.x); grzo_backend_free(&gpu, m.h); grzo_backend_free(&gpu, m.y);
    free(m.hy);
    grzo_destroy(ctx);
}

/* Fast math end to end: bf16 blocks trained 3 steps in fast and in pedantic math. The stochastic
   rounding bits are the same, and the two forwards differ by the bf16 rounding of the inputs
   (2^-8 relative), so every weight ends within 2 ulps (at least 2 ulps of 0.125: 2e-3) of the
   pedantic run's, except where the
   slightly different coefficients tip a rounding (<= 2 % of the weights); training moved most. */
static void test_fast_steps(grzo_backend *fast, grzo_estimator est) {
    enum { NE = TV * TD + TO * TD + TO };
    float *init = random_floats(NE, 51);
    uint16_t a[NE], b[NE], start[NE];
    int64_t i, far = 0, moved = 0;
    for (i = 0; i < NE; i++) start[i] = a[i] = b[i] = to_bf16(init[i]);
    run_tiny_bf16(fast, est, a, a + TV * TD, a + TV * TD + TO * TD);
    run_tiny_bf16(&gpu, est, b, b + TV * TD, b + TV * TD + TO * TD);
    for (i = 0; i < NE; i++) {
        double fa = from_bf16(a[i]), fb = from_bf16(b[i]);
        /* 2 ulps, at least at 0.125 (2e-3): near 0 the ulp is far below the coefficients' differences */
        far += !(isfinite(fa) && fabs(fa - fb) <= 2.0 * ulp16((float)fmax(fmax(fabs(fa), fabs(fb)), 0.125), GRZO_DTYPE_BF16));
        moved += b[i] != start[i];
    }
    CHECK(far <= NE / 50, "estimator %d: fast vs pedantic bf16 training: %lld of %d weights more than 2 ulps apart", (int)est,
          (long long)far, NE);
    CHECK(moved >= NE / 4, "estimator %d: only %lld of %d bf16 weights moved in 3 steps", (int)est, (long long)moved, NE);
    free(init);
}

/* ---- in-place MeZO in bf16: restore drift ----------------------------------------------------- */
static grzo_status const_losses(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user) {
    int64_t c;
    (void)ctx; (void)user;
    for (c = 0; c < pi->n_segments; c++) losses[c] = 1.0f;   /* l+ = l-: MeZO's update is zero */
    return GRZO_OK;
}

static void test_inplace_drift_bf16(void) {
    enum { M = 1 << 16, T = 200 };
    float *w0 = random_floats(M, 41);
    uint16_t *h0 = (uint16_t *)malloc(2 * M), *h1 = (uint16_t *)malloc(2 * M);
    void *dP;
    grzo_ctx *ctx = NULL;
    grzo_desc d;
    grzo_block b;
    double sigma = 1e-3, sum = 0, sum2 = 0, sum_abs2 = 0, max_abs = 0;
    int64_t i, back = 0;
    int t;
    for (i = 0; i < M; i++) h0[i] = to_bf16(w0[i] * 0.1f);   /* |w| < 0.05: LLM-like weights, sigma ~ 4 ulp */
    dP = dev_from(h0, 2 * M);
    memset(&d, 0, sizeof d);
    d.backend = &gpu; d.estimator = GRZO_ESTIMATOR_MEZO_INPLACE; d.lr = 1e-3f; d.sigma = (float)sigma; d.seed = 3;
    CHECK(grzo_create(&d, &ctx) == GRZO_OK, "create");
    if (!ctx) return;
    CHECK(grzo_block_add(ctx, &(grzo_block_desc){GRZO_BLOCK_MATRIX, 256, M / 256, dP, GRZO_DTYPE_BF16, "w", 0}, &b) == GRZO_OK,
          "bf16 block: %s", grzo_last_error(ctx));
    for (t = 0; t < T; t++) CHECK(grzo_step(ctx, 4, const_losses, NULL, NULL) == GRZO_OK, "step: %s", grzo_last_error(ctx));
    to_host(h1, dP, 2 * M);
    for (i = 0; i < M; i++) {
        double v0 = from_bf16(h0[i]), dd = (double)from_bf16(h1[i]) - v0, ul = ulp16((float)(fabs(v0) + 2 * sigma), GRZO_DTYPE_BF16);
        sum += dd / ul;
        sum2 += (dd / ul) * (dd / ul);
        sum_abs2 += dd * dd;
        max_abs = fmax(max_abs, fabs(dd));
        back += h1[i] == h0[i];
    }
    {
        double mean = sum / M, rms = sqrt(sum2 / M), bound = sqrt(3.0 * T / 4.0);
        printf("  in-place MeZO bf16 drift, %d steps, sigma %.0e: rms %.2f ulp (bound %.2f), mean %.3f ulp, rms %.3g abs "
               "(%.2f sigma), max %.3g abs, %.1f%% weights bitwise back\n", T, sigma, rms, bound, mean, sqrt(sum_abs2 / M),
               sqrt(sum_abs2 / M) / sigma, max_abs, 100.0 * (double)back / M);
        CHECK(fabs(mean) <= 5.0 * rms / sqrt((double)M), "bf16 in-place drift is biased: mean %.3f ulp, 5 s.e. = %.3f", mean,
              5.0 * rms / sqrt((double)M));
        CHECK(rms <= bound, "bf16 in-place drift rms %.2f ulp exceeds sqrt(3T/4) = %.2f", rms, bound);
        CHECK(rms > 0, "bf16 in-place drift is exactly zero: were the shifts applied at all?");
    }
    grzo_destroy(ctx);
    grzo_backend_free(&gpu, dP);
    free(w0); free(h0); free(h1);
}

/* ---- no synchronization inside a pass --------------------------------------------------------- */
static void test_deferred_errors(void) {
    int32_t ids[3] = {0, 5, 1000};
    float zero[4 * 8] = {0};
    void *dE = dev_from(zero, sizeof zero), *dI = dev_from(ids, sizeof ids), *dY = dev_from(zero, sizeof zero);
    grzo_embedding_args a;
    memset(&a, 0, sizeof a);
    a.e.kind = GRZO_BLOCK_EMBEDDING; a.e.dtype = GRZO_DTYPE_F32; a.e.rows = 6; a.e.cols = 4; a.e.data = dE;
    a.ids = (const int32_t *)dI; a.y = (float *)dY; a.n_rows = 3;
    CHECK(gpu.iface->embedding(gpu.self, &a) == GRZO_OK, "embedding enqueues without waiting (the check is deferred)");
    CHECK(gpu.iface->synchronize(gpu.self) == GRZO_ERR_INVALID_ARG, "synchronize must report the bad token id");
    CHECK(strstr(gpu.iface->last_error(gpu.self), "token id") != NULL, "message names the token id: %s", gpu.iface->last_error(gpu.self));
    CHECK(gpu.iface->synchronize(gpu.self) == GRZO_OK, "the flag is reported once, then cleared");
    a.n_rows = 2;
    CHECK(gpu.iface->embedding(gpu.self, &a) == GRZO_OK && gpu.iface->synchronize(gpu.self) == GRZO_OK, "good ids pass");
    {   /* the edges, one past the last row (rows 6) and -1, plain and through the variants'
           kernel (a perturbed pass with a sparse mask) */
        static const int32_t edge[2] = {6, -1};
        static const int64_t off[2] = {0, 3}, ex[1] = {0};
        static const int8_t sign[1] = {1};
        grzo_perturb pt;
        grzo_variant v;
        int k, variant;
        memset(&pt, 0, sizeof pt);
        pt.base.seed = 3; pt.base.dist = GRZO_NOISE_RADEMACHER; pt.sigma = 1e-2f; pt.n_examples = 1; pt.n_segments = 1;
        pt.offsets = off; pt.sign = sign; pt.example = ex;
        memset(&v, 0, sizeof v);
        v.sparse = 1; v.sparse_threshold = 1.0f;
        a.n_rows = 3;
        for (variant = 0; variant < 2; variant++)
            for (k = 0; k < 2; k++) {
                a.perturb = variant ? &pt : NULL;
                a.variant = variant ? &v : NULL;
                ids[2] = edge[k];
                grzo_backend_upload(&gpu, dI, ids, sizeof ids);
                CHECK(gpu.iface->embedding(gpu.self, &a) == GRZO_OK && gpu.iface->synchronize(gpu.self) == GRZO_ERR_INVALID_ARG,
                      "token id %d of an embedding of 6 rows must be reported (%s)", (int)edge[k], variant ? "sparse variant" : "plain");
            }
    }
    grzo_backend_free(&gpu, dE); grzo_backend_free(&gpu, dI); grzo_backend_free(&gpu, dY);
}

/* coefficients may be overwritten as soon as update returns (no wait inside update) */
static void test_update_async(void) {
    enum { R = 64, C = 96 };
    float p0[R * C], got[R * C], coeff = 0.25f;
    void *dP;
    grzo_update_args u;
    int64_t i, bad = 0;
    for (i = 0; i < R * C; i++) p0[i] = (float)i / 64.0f;
    dP = dev_from(p0, sizeof p0);
    memset(&u, 0, sizeof u);
    u.p.kind = GRZO_BLOCK_MATRIX; u.p.dtype = GRZO_DTYPE_F32; u.p.rows = R; u.p.cols = C; u.p.data = dP;
    u.base.seed = 8; u.base.dist = GRZO_NOISE_RADEMACHER; u.n_examples = 1; u.coeff = &coeff;
    CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "update 1");
    coeff = 0.5f;   /* reused at once, as grzo's per-step coefficient buffer is */
    CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "update 2");
    coeff = 0.25f;  /* the same bytes as update 1: served from the table cache */
    CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "update 3");
    to_host(got, dP, sizeof got);
    for (i = 0; i < R * C; i++) bad += got[i] != p0[i] - 1.0f * grzo_noise_at(&u.base, (uint64_t)i);
    CHECK(bad == 0, "three asynchronous updates: %lld of %d weights are not theta - (0.25 + 0.5 + 0.25) U", (long long)bad, R * C);
    grzo_backend_free(&gpu, dP);
}

static void test_memory_accounting(void) {
    grzo_cuda_memory m0, m1, m2;
    void *p = NULL;
    size_t bytes = (size_t)64 << 20;
    CHECK(grzo_backend_cuda_memory(&gpu, &m0) == GRZO_OK, "memory stats");
    CHECK(m0.blas_workspace > 0 && m0.bytes_now >= m0.blas_workspace, "the cuBLAS workspace is counted (%zu of %zu)",
          m0.blas_workspace, m0.bytes_now);
    CHECK(grzo_backend_alloc(&gpu, bytes, &p) == GRZO_OK, "alloc");
    CHECK(grzo_backend_cuda_memory(&gpu, &m1) == GRZO_OK, "memory stats");
    CHECK(m1.bytes_now == m0.bytes_now + bytes && m1.bytes_peak >= m1.bytes_now, "alloc of %zu: now %zu -> %zu, peak %zu", bytes,
          m0.bytes_now, m1.bytes_now, m1.bytes_peak);
    CHECK(m0.device_free >= m1.device_free + bytes, "cudaMemGetInfo cross-check: free %zu -> %zu after %zu bytes", m0.device_free,
          m1.device_free, bytes);
    grzo_backend_free(&gpu, p);
    CHECK(grzo_backend_cuda_memory(&gpu, &m2) == GRZO_OK, "memory stats");
    CHECK(m2.bytes_now == m0.bytes_now && m2.bytes_peak >= m1.bytes_now, "free: now %zu (was %zu), peak %zu", m2.bytes_now,
          m0.bytes_now, m2.bytes_peak);
    CHECK(grzo_backend_cuda_reset_peak(&gpu) == GRZO_OK && grzo_backend_cuda_memory(&gpu, &m2) == GRZO_OK &&
          m2.bytes_peak == m2.bytes_now, "reset_peak");
    CHECK(grzo_backend_cuda_memory(&cpu, &m2) == GRZO_ERR_INVALID_ARG, "not a CUDA backend");
}

/* A failed create says why in the caller's buffer (cut to its size, NUL-terminated) and
   leaves it alone on success; an allocation past the device's memory is out of memory, says
   how much, and leaves the backend usable. */
static void test_create_errors(void) {
    char why[256];
    grzo_cuda_desc d;
    grzo_backend be;
    void *p = NULL;
    float host[2] = {1, 2}, back[2] = {0};
    void *q = dev_from(host, sizeof host);
    int n = grzo_cuda_device_count();
    memset(&d, 0, sizeof d);
    d.error = why;
    d.error_size = sizeof why;
    why[0] = '\0';
    d.device = n;
    CHECK(grzo_backend_cuda_create(&d, &be) == GRZO_ERR_BACKEND && strstr(why, "no CUDA device") != NULL,
          "a device past the last: '%s'", why);
    d.device = n + 5;
    CHECK(grzo_backend_cuda_create(&d, &be) == GRZO_ERR_BACKEND && strstr(why, "no CUDA device") != NULL,
          "a device 5 past the last: '%s'", why);
    d.device = -1;
    CHECK(grzo_backend_cuda_create(&d, &be) == GRZO_ERR_BACKEND && strstr(why, "no CUDA device -1") != NULL,
          "device -1: '%s'", why);
    d.device = 0;
    d.math = (grzo_cuda_math)7;
    CHECK(grzo_backend_cuda_create(&d, &be) == GRZO_ERR_INVALID_ARG && strstr(why, "math mode 7") != NULL,
          "an unknown math mode: '%s'", why);
    d.error_size = 8;
    CHECK(grzo_backend_cuda_create(&d, &be) == GRZO_ERR_INVALID_ARG && strlen(why) == 7, "the reason cut to 8 bytes: '%s'",
          why);
    d.math = GRZO_CUDA_MATH_PEDANTIC;
    d.error_size = sizeof why;
    strcpy(why, "untouched");
    if (grzo_backend_cuda_create(&d, &be) == GRZO_OK) {
        CHECK(strcmp(why, "untouched") == 0, "a create that succeeds leaves the buffer alone: '%s'", why);
        grzo_backend_destroy(&be);
    } else {
        CHECK(0, "create with an error buffer: '%s'", why);
    }
    CHECK(grzo_backend_alloc(&gpu, (size_t)1 << 44, &p) == GRZO_ERR_OUT_OF_MEMORY &&
              strstr(gpu.iface->last_error(gpu.self), "cudaMalloc of 17592186044416 bytes") != NULL,
          "16 TiB: out of memory, and how much: '%s'", gpu.iface->last_error(gpu.self));
    CHECK(q && grzo_backend_download(&gpu, back, q, sizeof back) == GRZO_OK && back[1] == 2.0f,
          "the backend still works after it: %s", gpu.iface->last_error(gpu.self));
    grzo_backend_free(&gpu, q);
}

/* desc.stream: a backend created on the caller's stream works on it, gives it back
   (grzo_backend_cuda_stream) and leaves it alive when destroyed; without one a backend makes
   its own stream (not the legacy default stream, NULL). */
static void test_user_stream(void) {
    void *own = NULL, *got = NULL;
    grzo_cuda_desc d;
    grzo_backend be;
    CHECK(grzo_backend_cuda_stream(&gpu, &own) == GRZO_OK && own != NULL, "a backend's own stream: %p", own);
    memset(&d, 0, sizeof d);
    d.stream = own;
    if (grzo_backend_cuda_create(&d, &be) != GRZO_OK) {
        CHECK(0, "could not create a backend on the caller's stream");
        return;
    }
    CHECK(grzo_backend_cuda_stream(&be, &got) == GRZO_OK && got == own, "the caller's stream given back: %p, not %p", got,
          own);
    grzo_backend_destroy(&be);
    test_linear_parity(1);   /* on gpu, whose stream the destroyed backend borrowed */
    CHECK(gpu.iface->synchronize(gpu.self) == GRZO_OK, "the lender's stream still works: %s", gpu.iface->last_error(gpu.self));
    CHECK(grzo_backend_cuda_stream(&cpu, &got) == GRZO_ERR_INVALID_ARG, "not a CUDA backend");
}

/* Freeing a pointer twice, or one the backend never gave out, changes nothing: the
   accounting stays and no error is left behind for the next operation's launch check. */
static void test_foreign_free(void) {
    grzo_cuda_memory m0, m1;
    float host[4] = {1, 2, 3, 4}, back[4] = {0};
    void *p = dev_from(host, sizeof host), *q = dev_from(host, sizeof host);
    int stack_word = 0;
    CHECK(p && q, "alloc");
    grzo_backend_free(&gpu, p);
    CHECK(grzo_backend_cuda_memory(&gpu, &m0) == GRZO_OK, "memory stats");
    grzo_backend_free(&gpu, p);              /* twice */
    grzo_backend_free(&gpu, &stack_word);    /* never a device pointer */
    CHECK(grzo_backend_cuda_memory(&gpu, &m1) == GRZO_OK && m1.bytes_now == m0.bytes_now, "foreign frees: bytes %zu -> %zu",
          m0.bytes_now, m1.bytes_now);
    CHECK(grzo_backend_download(&gpu, back, q, sizeof back) == GRZO_OK && back[3] == 4.0f, "the next operation succeeds: %s",
          gpu.iface->last_error(gpu.self));
    test_update_async();                     /* kernels and their launch checks run clean after it */
    grzo_backend_free(&gpu, q);
}

/* cuBLAS's sizes are int: a linear past INT_MAX rows (or columns) is refused before anything
   is read, not truncated (the pointers here are never touched). */
static void test_linear_int_limits(void) {
    grzo_linear_args a;
    float dummy = 0.0f;
    grzo_status s;
    memset(&a, 0, sizeof a);
    a.w.kind = GRZO_BLOCK_MATRIX; a.w.dtype = GRZO_DTYPE_F32; a.w.rows = 4; a.w.cols = 4; a.w.data = &dummy;
    a.x = &dummy; a.y = &dummy; a.n_rows = (int64_t)2147483647 + 1;
    s = gpu.iface->linear(gpu.self, &a);
    CHECK(s == GRZO_ERR_UNSUPPORTED && strstr(gpu.iface->last_error(gpu.self), "int"), "2^31 rows: %s (%s)", grzo_status_str(s),
          gpu.iface->last_error(gpu.self));
    a.n_rows = 2; a.w.cols = (int64_t)1 << 32;
    s = gpu.iface->linear(gpu.self, &a);
    CHECK(s == GRZO_ERR_UNSUPPORTED, "2^32 columns: %s", grzo_status_str(s));
}

/* ---- the tiled kernels' edges (grzo_cuda.cu, "tiles"): rows cut at multiples of 128 of the
   noise index, so a row may start mid-tile; four elements a lane, Gaussian ones 4 apart ------ */
static const int64_t edge_shapes[][2] = {{9, 301}, {130, 7}, {3, 1}, {2, 128}, {5, 129}};
static const int64_t edge_off[7] = {0, 2, 3, 7, 8, 12, 15}, edge_ex[6] = {0, 1, 2, 0, 1, 2};
static const int8_t edge_sign[6] = {1, 0, 1, -1, -1, 0};   /* sign 0 among the segments */

static void edge_perturb(grzo_perturb *pt, uint32_t dist, int flipout) {
    memset(pt, 0, sizeof *pt);
    pt->base.seed = 0xABCDEF12345ull; pt->base.step = 3; pt->base.block = 4; pt->base.dist = dist;
    pt->sigma = 0.25f; pt->flipout = flipout; pt->n_examples = 3; pt->n_segments = 6;
    pt->offsets = edge_off; pt->sign = edge_sign; pt->example = edge_ex;
}

/* update (touched rows too) and perturbed copy of fp32 blocks, both backends */
static void test_edges_update_copy(uint32_t dist) {
    int s, fl, tc;
    for (s = 0; s < 5; s++)
        for (fl = 0; fl < 2; fl++)
            for (tc = 0; tc < 3; tc++) {   /* tc 0: matrix, 1: embedding with a touched mask, 2: vector */
                int64_t rows = edge_shapes[s][0], cols = tc == 2 ? 1 : edge_shapes[s][1], n = rows * cols, i;
                float coeff[3] = {0.37f, -0.11f, 0.052f}, *Pc = random_floats(n, 40 + (uint32_t)s), *Pg = (float *)malloc((size_t)n * 4);
                float *oc = (float *)malloc((size_t)n * 4), *og = (float *)malloc((size_t)n * 4);
                uint8_t *t = (uint8_t *)malloc((size_t)rows);
                void *dP = dev_from(Pc, (size_t)n * 4), *dT, *dO = dev_from(Pc, (size_t)n * 4);
                grzo_update_args u;
                grzo_copy_args c;
                for (i = 0; i < rows; i++) t[i] = (uint8_t)(i % 3 != 1);
                dT = dev_from(t, (size_t)rows);
                memset(&u, 0, sizeof u);
                u.p.kind = tc == 1 ? GRZO_BLOCK_EMBEDDING : tc == 2 ? GRZO_BLOCK_VECTOR : GRZO_BLOCK_MATRIX;
                u.p.dtype = GRZO_DTYPE_F32; u.p.rows = rows; u.p.cols = cols;
                u.base.seed = 0xABCDEF12345ull; u.base.step = 3; u.base.block = 4; u.base.dist = dist;
                u.flipout = fl; u.n_examples = 3; u.coeff = coeff;
                memset(&c, 0, sizeof c);
                c.p = u.p; c.base = u.base; c.flipout = fl; c.example = 2; c.scale = 0.37f;
                /* the copy first (the update changes P) */
                c.p.data = Pc; c.out = oc;
                CHECK(cpu.iface->perturbed_copy(cpu.self, &c) == GRZO_OK, "cpu perturbed_copy");
                c.p.data = dP; c.out = dO;
                CHECK(gpu.iface->perturbed_copy(gpu.self, &c) == GRZO_OK, "gpu perturbed_copy");
                to_host(og, dO, (size_t)n * 4);
                CHECK(rel_diff(og, oc, n) <= 1e-6, "edges: perturbed copy %lld x %lld kind %d flipout %d dist %u: rel diff %.3g",
                      (long long)rows, (long long)cols, tc, fl, dist, rel_diff(og, oc, n));
                u.touched = tc == 1 ? t : NULL;
                u.p.data = Pc;
                CHECK(cpu.iface->update(cpu.self, &u) == GRZO_OK, "cpu update");
                u.touched = tc == 1 ? (uint8_t *)dT : NULL;
                u.p.data = dP;
                CHECK(gpu.iface->update(gpu.self, &u) == GRZO_OK, "gpu update");
                to_host(Pg, dP, (size_t)n * 4);
                CHECK(rel_diff(Pg, Pc, n) <= 1e-6, "edges: update %lld x %lld kind %d flipout %d dist %u: rel diff %.3g",
                      (long long)rows, (long long)cols, tc, fl, dist, rel_diff(Pg, Pc, n));
                grzo_backend_free(&gpu, dP); grzo_backend_free(&gpu, dT); grzo_backend_free(&gpu, dO);
                free(Pc); free(Pg); free(oc); free(og); free(t);
            }
}

/* X as multiples of 1/8 in [-1, 1): exact in 16 bits, and their sums with +-1 factors exact
   in fp32, so a 16-bit fast-math product of them equals the fp32 one */
static float *dyadic_floats(int64_t n, uint32_t stream) {
    float *x = random_floats(n, stream);
    int64_t i;
    for (i = 0; i < n; i++) x[i] = floorf(x[i] * 16.0f) / 8.0f;
    return x;
}

/* vector, embedding (touched marks) and linear over a segment table with signs 0, for widths
   that are not multiples of 128 (and 1); the fast-math linear with 16-bit zero weights in
   chunks of output rows whose noise starts at j0 d_in, d_in odd: not a multiple of 128 */
static void test_edges_ops(grzo_backend *fast, grzo_backend *fast_chunked, uint32_t dist) {
    static const int64_t widths[4] = {301, 1, 128, 129};
    const int64_t N = 15, V = 11;
    int wi, fl, op, k;
    for (wi = 0; wi < 4; wi++)
        for (fl = 0; fl < 2; fl++) {
            int64_t d = widths[wi], DO = 37, i;
            float *X = dyadic_floats(N * d, 50), *v = random_floats(V * d, 51);
            float *yc = (float *)calloc((size_t)(N * (d > DO ? d : DO)), 4), *yg = (float *)calloc((size_t)(N * (d > DO ? d : DO)), 4);
            float *W0 = (float *)calloc((size_t)(DO * d), 4);
            uint16_t *W16 = (uint16_t *)calloc((size_t)(DO * d), 2);
            int32_t ids[15];
            uint8_t tc[11], tg[11];
            void *dX = dev_from(X, (size_t)(N * d) * 4), *dv = dev_from(v, (size_t)(V * d) * 4), *dY = dev_from(yc, (size_t)(N * (d > DO ? d : DO)) * 4);
            void *dids, *dT, *dW0 = dev_from(W0, (size_t)(DO * d) * 4), *dW16 = dev_from(W16, (size_t)(DO * d) * 2);
            grzo_perturb pt;
            grzo_vector_args va;
            grzo_embedding_args ea;
            grzo_linear_args la;
            edge_perturb(&pt, dist, fl);
            for (op = 0; op < 2; op++)
                for (k = 0; k < N_OP_VARIANTS; k++) {   /* dense and each variant (low-rank: matrices only) */
                    grzo_variant var;
                    const char *name = op_variant(k, &var);
                    if (k == 2) continue;
                    memset(&va, 0, sizeof va);
                    va.v.kind = GRZO_BLOCK_VECTOR; va.v.dtype = GRZO_DTYPE_F32; va.v.rows = d; va.v.cols = 1;
                    va.op = op ? GRZO_VECTOR_ADD : GRZO_VECTOR_MUL; va.n_rows = N; va.perturb = &pt;
                    va.variant = k ? &var : NULL;
                    va.v.data = v; va.x = X; va.y = yc;
                    CHECK(cpu.iface->vector(cpu.self, &va) == GRZO_OK, "cpu vector");
                    va.v.data = dv; va.x = (const float *)dX; va.y = (float *)dY;
                    CHECK(gpu.iface->vector(gpu.self, &va) == GRZO_OK, "gpu vector");
                    to_host(yg, dY, (size_t)(N * d) * 4);
                    CHECK(rel_diff(yg, yc, N * d) <= 1e-6, "edges: vector d %lld op %d flipout %d dist %u (%s): rel diff %.3g",
                          (long long)d, op, fl, dist, name, rel_diff(yg, yc, N * d));
                }
            for (i = 0; i < N; i++) ids[i] = (int32_t)((i * 7 + 3) % V);
            memset(tc, 0, sizeof tc);
            memset(tg, 0, sizeof tg);
            dids = dev_from(ids, sizeof ids);
            dT = dev_from(tg, sizeof tg);
            memset(&ea, 0, sizeof ea);
            ea.e.kind = GRZO_BLOCK_EMBEDDING; ea.e.dtype = GRZO_DTYPE_F32; ea.e.rows = V; ea.e.cols = d; ea.n_rows = N; ea.perturb = &pt;
            ea.e.data = v; ea.ids = ids; ea.y = yc; ea.touched = tc;
            CHECK(cpu.iface->embedding(cpu.self, &ea) == GRZO_OK, "cpu embedding");
            ea.e.data = dv; ea.ids = (const int32_t *)dids; ea.y = (float *)dY; ea.touched = (uint8_t *)dT;
            CHECK(gpu.iface->embedding(gpu.self, &ea) == GRZO_OK && gpu.iface->synchronize(gpu.self) == GRZO_OK, "gpu embedding");
            to_host(yg, dY, (size_t)(N * d) * 4);
            to_host(tg, dT, sizeof tg);
            CHECK(rel_diff(yg, yc, N * d) <= 1e-6 && memcmp(tc, tg, sizeof tc) == 0,
                  "edges: embedding d %lld flipout %d dist %u: rel diff %.3g, touched marks %s", (long long)d, fl, dist,
                  rel_diff(yg, yc, N * d), memcmp(tc, tg, sizeof tc) ? "differ" : "agree");
            /* linear with zero weights: y is the perturbation alone */
            memset(&la, 0, sizeof la);
            la.w.kind = GRZO_BLOCK_MATRIX; la.w.dtype = GRZO_DTYPE_F32; la.w.rows = DO; la.w.cols = d; la.n_rows = N; la.perturb = &pt;
            la.w.data = W0; la.x = X; la.y = yc;
            CHECK(cpu.iface->linear(cpu.self, &la) == GRZO_OK, "cpu linear");
            la.w.data = dW0; la.x = (const float *)dX; la.y = (float *)dY;
            CHECK(gpu.iface->linear(gpu.self, &la) == GRZO_OK, "gpu linear");
            to_host(yg, dY, (size_t)(N * DO) * 4);
            CHECK(rel_diff(yg, yc, N * DO) <= 1e-5, "edges: linear d_in %lld flipout %d dist %u: rel diff %.3g", (long long)d, fl,
                  dist, rel_diff(yg, yc, N * DO));
            if (dist == GRZO_NOISE_RADEMACHER) {   /* fast math: +-1 exact in 16 bits */
                int b;
                for (b = 0; b < 2; b++) {
                    grzo_backend *fb = b ? fast_chunked : fast;
                    la.w.dtype = GRZO_DTYPE_BF16; la.w.data = dW16;
                    memset(yg, 0, (size_t)(N * DO) * 4);
                    CHECK(fb->iface->linear(fb->self, &la) == GRZO_OK && fb->iface->synchronize(fb->self) == GRZO_OK,
                          "fast linear: %s", fb->iface->last_error(fb->self));
                    to_host(yg, dY, (size_t)(N * DO) * 4);
                    CHECK(rel_diff(yg, yc, N * DO) <= 1e-5, "edges: fast bf16 linear%s d_in %lld flipout %d: rel diff %.3g",
                          b ? " (chunked)" : "", (long long)d, fl, rel_diff(yg, yc, N * DO));
                }
            }
            grzo_backend_free(&gpu, dX); grzo_backend_free(&gpu, dv); grzo_backend_free(&gpu, dY); grzo_backend_free(&gpu, dids);
            grzo_backend_free(&gpu, dT); grzo_backend_free(&gpu, dW0); grzo_backend_free(&gpu, dW16);
            free(X); free(v); free(yc); free(yg); free(W0); free(W16);
        }
}

/* ---- chunks of output rows (grzo_cuda.h: the chunked pieces fit in desc.transient_bytes) ---- */
/* The parity tests again on pedantic backends whose budget holds a few output rows, so that
   every linear (dense, shared Z, variants, low-rank) runs in several chunks, the last one
   short: the default budget runs these small shapes in one chunk, which checks no chunk's
   offset. transient_bytes 10000: test_linear_parity's 70 rows in chunks of 8 (two products),
   19 (one product, variants) or 19 (low-rank); 512: the tiny model's 9 rows in chunks of 2 (5
   low-rank); 1, less than a row: one row a chunk (grzo_cuda.h: "one output row at the least"). */
static void test_chunked_parity(void) {
    static const size_t budgets[3] = {10000, 512, 1};
    grzo_backend whole = gpu, chunked;
    grzo_cuda_desc d;
    int k;
    for (k = 0; k < 3; k++) {
        int fails_before = fails;
        memset(&d, 0, sizeof d);
        d.transient_bytes = budgets[k];
        if (grzo_backend_cuda_create(&d, &chunked) != GRZO_OK) {
            CHECK(0, "could not create a pedantic backend of transient_bytes %zu", budgets[k]);
            continue;
        }
        gpu = chunked;
        if (k == 0) {
            test_linear_parity(1);
            test_linear_parity(0);
            test_linear_variants_parity();
        } else if (k == 2) {
            test_linear_parity(1);
            test_linear_parity(0);
        } else {
            test_steps_parity(GRZO_ESTIMATOR_GRZO);
            test_steps_parity(GRZO_ESTIMATOR_MEZO);
            test_steps_parity(GRZO_ESTIMATOR_MEZO_INPLACE);
            test_variants_parity();
        }
        gpu = whole;
        grzo_backend_destroy(&chunked);
        if (fails > fails_before) printf("  (the failures above: pedantic backend of transient_bytes %zu)\n", budgets[k]);
    }
}

/* Device bytes a GRZO pass's linear (test_linear_parity's shapes, Flipout) takes beyond what
   the caller allocated, on a fresh backend of budget `transient` (0: the default) */
static size_t linear_scratch_bytes(size_t transient, int64_t *n_out) {
    grzo_backend be;
    grzo_cuda_desc d;
    grzo_cuda_memory m0, m1;
    lp_pass p;
    void *dW = NULL, *dX = NULL, *dY = NULL;
    size_t used = 0;
    int64_t n;
    memset(&d, 0, sizeof d);
    d.transient_bytes = transient;
    if (grzo_backend_cuda_create(&d, &be) != GRZO_OK) {
        CHECK(0, "could not create a backend of budget %zu", transient);
        return 0;
    }
    lp_pass_init(&p, 1, NULL);
    n = *n_out = p.n;
    grzo_backend_alloc(&be, sizeof(float) * LP_DO * LP_DI, &dW);
    grzo_backend_alloc(&be, sizeof(float) * (size_t)(n * LP_DI), &dX);
    grzo_backend_alloc(&be, sizeof(float) * (size_t)(n * LP_DO), &dY);
    {
        float *W = random_floats(LP_DO * LP_DI, 1), *X = random_floats(n * LP_DI, 2);
        grzo_backend_upload(&be, dW, W, sizeof(float) * LP_DO * LP_DI);
        grzo_backend_upload(&be, dX, X, sizeof(float) * (size_t)(n * LP_DI));
        free(W); free(X);
    }
    p.a.w.data = dW; p.a.x = (const float *)dX; p.a.y = (float *)dY;
    if (grzo_backend_cuda_memory(&be, &m0) == GRZO_OK && grzo_backend_cuda_reset_peak(&be) == GRZO_OK &&
        be.iface->linear(be.self, &p.a) == GRZO_OK && be.iface->synchronize(be.self) == GRZO_OK &&
        grzo_backend_cuda_memory(&be, &m1) == GRZO_OK)
        used = m1.bytes_peak - m0.bytes_now;
    else
        CHECK(0, "linear of budget %zu: %s", transient, be.iface->last_error(be.self));
    grzo_backend_free(&be, dW); grzo_backend_free(&be, dX); grzo_backend_free(&be, dY);
    grzo_backend_destroy(&be);
    return used;
}

/* The budget holds both ways: with transient_bytes T, a linear's scratch is at most its
   whole-layer pieces (Flipout: the signs r, s and X (.) s) plus T (plus the pieces' 256-byte
   alignment and the segment table); with the default (256 MiB) this small linear takes one
   chunk, its whole W, U and product. */
static void test_transient_budget(void) {
    enum { B = LP_B, DO = LP_DO, DI = LP_DI };
    const size_t budget = 8192, slack = 4096;   /* alignment of 6 pieces, and the segment table */
    int64_t n = 0;
    size_t whole_layer, small, dflt;
    small = linear_scratch_bytes(budget, &n);
    whole_layer = sizeof(float) * (size_t)(B * DO + B * DI + n * DI);
    CHECK(small > whole_layer && small <= whole_layer + budget + slack,
          "transient_bytes %zu: the linear took %zu device bytes (whole-layer pieces %zu, so at most %zu)", budget, small,
          whole_layer, whole_layer + budget + slack);
    dflt = linear_scratch_bytes(0, &n);
    CHECK(dflt >= whole_layer + sizeof(float) * (size_t)(2 * DO * DI + n * DO),
          "default budget: the linear took %zu device bytes, less than one chunk of all %d rows (%zu)", dflt, (int)DO,
          whole_layer + sizeof(float) * (size_t)(2 * DO * DI + n * DO));
}

int main(void) {
    grzo_backend fast, fast_chunked;
    if (grzo_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device or driver\n");
        return 77;
    }
    if (grzo_backend_cpu_create(NULL, &cpu) != GRZO_OK || grzo_backend_cuda_create(NULL, &gpu) != GRZO_OK) {
        printf("FAIL: could not create the backends\n");
        return 1;
    }
    test_rng_bitwise(GRZO_NOISE_RADEMACHER);
    test_rng_bitwise(GRZO_NOISE_GAUSSIAN);
    test_copy_rounding(GRZO_DTYPE_BF16);
    test_copy_rounding(GRZO_DTYPE_F16);
    test_linear_parity(1);
    test_linear_parity(0);
    test_linear_variants_parity();
    test_copy_variants_parity();
    test_steps_parity(GRZO_ESTIMATOR_GRZO);
    test_steps_parity(GRZO_ESTIMATOR_MEZO);
    test_steps_parity(GRZO_ESTIMATOR_FZOO);
    test_steps_parity(GRZO_ESTIMATOR_MEZO_INPLACE);
    test_variants_parity();
    test_chunked_parity();
    test_transient_budget();
    test_bf16();
    test_round_draw();
    test_sr_overflow(GRZO_DTYPE_BF16);
    test_sr_overflow(GRZO_DTYPE_F16);
    test_inplace_drift_bf16();
    test_deferred_errors();
    test_update_async();
    test_foreign_free();
    test_user_stream();
    test_linear_int_limits();
    test_edges_update_copy(GRZO_NOISE_RADEMACHER);
    test_edges_update_copy(GRZO_NOISE_GAUSSIAN);
    test_memory_accounting();
    test_create_errors();
    {
        grzo_cuda_desc fd;
        memset(&fd, 0, sizeof fd);
        fd.math = GRZO_CUDA_MATH_FAST;
        if (grzo_backend_cuda_create(&fd, &fast) != GRZO_OK) {
            CHECK(0, "could not create a fast-math backend");
        } else {
            test_fast_forward(&fast);
            linear_parity_on(&fast, 1, 0, 1, NULL, "fast math, fp32 weights: TF32");
            linear_parity_on(&fast, 1, 0, 0, NULL, "fast math, fp32 weights: TF32");
            test_fast_perturbation(&fast, GRZO_DTYPE_BF16, GRZO_NOISE_RADEMACHER);
            test_fast_perturbation(&fast, GRZO_DTYPE_F16, GRZO_NOISE_RADEMACHER);
            test_fast_perturbation(&fast, GRZO_DTYPE_BF16, GRZO_NOISE_GAUSSIAN);
            test_fast_steps(&fast, GRZO_ESTIMATOR_GRZO);
            test_fast_steps(&fast, GRZO_ESTIMATOR_MEZO);
            test_fast_steps(&fast, GRZO_ESTIMATOR_MEZO_INPLACE);
            test_fast_steps(&fast, GRZO_ESTIMATOR_FZOO);
            fd.transient_bytes = 8000;   /* chunks of a few output rows: the 16-bit U from j0 d_in */
            if (grzo_backend_cuda_create(&fd, &fast_chunked) != GRZO_OK) {
                CHECK(0, "could not create a chunked fast-math backend");
            } else {
                test_edges_ops(&fast, &fast_chunked, GRZO_NOISE_RADEMACHER);
                test_edges_ops(&fast, &fast_chunked, GRZO_NOISE_GAUSSIAN);
                grzo_backend_destroy(&fast_chunked);
            }
            grzo_backend_destroy(&fast);
        }
        fd.math = (grzo_cuda_math)7;
        CHECK(grzo_backend_cuda_create(&fd, &fast) == GRZO_ERR_INVALID_ARG, "unknown math mode refused");
    }
    grzo_backend_destroy(&gpu);
    grzo_backend_destroy(&cpu);
    printf("%s (%d checks, %d failed)\n", fails ? "FAIL" : "ok", checks, fails);
    return fails ? 1 : 0;
}
