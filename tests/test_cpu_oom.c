/* test_cpu_oom.c - the CPU backend's out-of-memory paths, each allocation failing in turn.

   Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/meson.build): the
   allocations this program's own code makes (grzo.h and the CPU backend are compiled into
   it; BLAS, BLIS and OpenMP are not) come to the wrappers of oom_wrap.h, and while a run is
   armed its N-th one returns NULL. For each configuration (the CPU backend's linear paths: AUTO with the fused kernel,
   PER_EXAMPLE, TWO_GEMM with a small transient budget; MeZO, FZOO and in-place MeZO; the
   sparse, low-rank and int8 variants) and N = 1, 2, ... until a run needs fewer than N
   allocations, a run (backend, context, blocks, two steps of a small model through
   grzo_embedding, grzo_linear and grzo_vector, a plain forward) must:
     - see every call return GRZO_OK or GRZO_ERR_OUT_OF_MEMORY, with a message;
     - after a failed step, which it aborts and takes again, end with the parameters of the
       run where nothing failed, bit for bit (a step that fails changes nothing: its retry
       draws the same noise); a failure during the update leaves the step in flight (a new
       one is refused) and grzo_step_end called again finishes it, also bit for bit;
     - leave nothing allocated (the ASan build's leak check).
   In-place MeZO runs again with two and three allocations in a row failing, so that a
   restore fails twice: its parameters stay perturbed on record until a later call restores
   them, and the run still ends where the run without a failure does (within rounding).
   Until this test the backend's 18 scratch-allocation checks had none. */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"

#include "oom_wrap.h"

static long still_perturbed;   /* restores that failed twice, per configuration */

/* ---- the configurations ------------------------------------------------------------------ */
typedef struct config {
    const char *name;
    grzo_estimator est;
    grzo_cpu_linear_algo algo;
    size_t transient;
    float sparse;
    int32_t rank, quant_bits;
} config;

static const config CONFIGS[] = {
    { "grzo auto (fused)", GRZO_ESTIMATOR_GRZO, GRZO_CPU_LINEAR_AUTO, 0, 0.0f, 0, 0 },
    { "grzo per-example", GRZO_ESTIMATOR_GRZO, GRZO_CPU_LINEAR_PER_EXAMPLE, 4096, 0.0f, 0, 0 },
    { "grzo two-gemm", GRZO_ESTIMATOR_GRZO, GRZO_CPU_LINEAR_TWO_GEMM, 4096, 0.0f, 0, 0 },
    { "mezo", GRZO_ESTIMATOR_MEZO, GRZO_CPU_LINEAR_AUTO, 0, 0.0f, 0, 0 },
    { "fzoo", GRZO_ESTIMATOR_FZOO, GRZO_CPU_LINEAR_AUTO, 0, 0.0f, 0, 0 },
    { "mezo in place", GRZO_ESTIMATOR_MEZO_INPLACE, GRZO_CPU_LINEAR_AUTO, 0, 0.0f, 0, 0 },
    { "grzo sparse", GRZO_ESTIMATOR_GRZO, GRZO_CPU_LINEAR_AUTO, 0, 0.5f, 0, 0 },
    { "grzo low-rank", GRZO_ESTIMATOR_GRZO, GRZO_CPU_LINEAR_AUTO, 0, 0.0f, 2, 0 },
    { "mezo int8", GRZO_ESTIMATOR_MEZO, GRZO_CPU_LINEAR_AUTO, 0, 0.0f, 0, 8 },
};
#define N_CONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

/* the model: embedding (VOCAB x D) -> linear W1 (H x D, wide enough for the fused kernel at
   2 threads) -> + bias -> relu -> linear W2 (O x H) -> loss = mean square per segment */
enum { VOCAB = 50, D = 48, H = 160, O = 24, B = 3, ROWS = 5, STEPS = 2, N_BLK = 4 };
#define SIGMA 0.01f
static const int64_t BLK_ROWS[N_BLK] = { VOCAB, H, H, O }, BLK_COLS[N_BLK] = { D, D, 1, H };

typedef struct run {
    grzo_backend be;
    grzo_ctx *ctx;
    float *p[N_BLK];
    grzo_block blk[N_BLK];
    int have_be;
} run;

typedef enum { FAILED_NONE, FAILED_SETUP, FAILED_STEP, FAILED_UPDATE } failure;

static grzo_status forward(run *r, int64_t n_segments, const int64_t *example, float *losses)
{
    int64_t n = n_segments * ROWS, i, c;
    int32_t *ids = (int32_t *)__real_malloc((size_t)n * sizeof(int32_t));
    float *x = (float *)__real_malloc((size_t)n * D * sizeof(float)), *h = (float *)__real_malloc((size_t)n * H * sizeof(float));
    float *o = (float *)__real_malloc((size_t)n * O * sizeof(float));
    grzo_rows rows;
    grzo_status st;
    REQUIRE(ids && x && h && o);
    memset(&rows, 0, sizeof rows);
    rows.n_rows = n;
    for (i = 0; i < n; i++) ids[i] = (int32_t)((example[i / ROWS] * 7 + i % ROWS * 3) % VOCAB);
    st = grzo_embedding(r->ctx, r->blk[0], ids, x, &rows);
    if (st == GRZO_OK) st = grzo_linear(r->ctx, r->blk[1], x, h, &rows);
    if (st == GRZO_OK) st = grzo_vector(r->ctx, r->blk[2], GRZO_VECTOR_ADD, h, h, &rows);
    if (st == GRZO_OK) {
        for (i = 0; i < n * H; i++) h[i] = h[i] > 0.0f ? h[i] : 0.0f;
        st = grzo_linear(r->ctx, r->blk[3], h, o, &rows);
    }
    for (c = 0; st == GRZO_OK && c < n_segments; c++) {
        double s = 0.0;
        for (i = c * ROWS * O; i < (c + 1) * ROWS * O; i++) s += (double)o[i] * o[i];
        losses[c] = (float)(s / (ROWS * O));
    }
    free(ids); free(x); free(h); free(o);
    return st;
}

static grzo_status setup(run *r, const config *cf)
{
    grzo_cpu_desc cd;
    grzo_desc d;
    grzo_block_desc bd;
    grzo_status st;
    int b;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = 2;
    cd.linear_algo = cf->algo;
    cd.transient_bytes = cf->transient;
    if ((st = grzo_backend_cpu_create(&cd, &r->be)) != GRZO_OK) return st;
    r->have_be = 1;
    d = tu_desc(&r->be, cf->est, 77, 0.05f, SIGMA);
    d.sparse_density = cf->sparse;
    d.lowrank_rank = cf->rank;
    d.quant_bits = cf->quant_bits;
    if (cf->est == GRZO_ESTIMATOR_FZOO) d.fzoo_probes = 2;
    if (cf->quant_bits) d.noise = GRZO_NOISE_GAUSSIAN;
    if ((st = grzo_create(&d, &r->ctx)) != GRZO_OK) return st;
    for (b = 0; b < N_BLK; b++) {
        size_t bytes = (size_t)(BLK_ROWS[b] * BLK_COLS[b]) * sizeof(float);
        if ((st = grzo_backend_alloc(&r->be, bytes, (void **)&r->p[b])) != GRZO_OK) return st;
        tu_fill_unif(r->p[b], bytes / sizeof(float), 300 + (uint32_t)b, -0.5, 0.5);
        memset(&bd, 0, sizeof bd);
        bd.kind = b == 0 ? GRZO_BLOCK_EMBEDDING : b == 2 ? GRZO_BLOCK_VECTOR : GRZO_BLOCK_MATRIX;
        bd.rows = BLK_ROWS[b];
        bd.cols = BLK_COLS[b];
        bd.data = r->p[b];
        if ((st = grzo_block_add(r->ctx, &bd, &r->blk[b])) != GRZO_OK) return st;
    }
    return GRZO_OK;
}

static void teardown(run *r)
{
    int b;
    grzo_destroy(r->ctx);
    for (b = 0; b < N_BLK; b++)
        if (r->p[b]) grzo_backend_free(&r->be, r->p[b]);
    if (r->have_be) grzo_backend_destroy(&r->be);
    memset(r, 0, sizeof *r);
}

static grzo_status one_step(run *r, failure *where)
{
    grzo_step_info si;
    grzo_status st;
    int32_t p;
    if ((st = grzo_step_begin(r->ctx, B, &si)) != GRZO_OK) { *where = FAILED_STEP; return st; }
    for (p = 0; p < si.n_passes; p++) {
        grzo_pass_info pi;
        float losses[2 * B];
        if ((st = grzo_pass_begin(r->ctx, &pi)) == GRZO_OK) st = forward(r, pi.n_segments, pi.example, losses);
        if (st == GRZO_OK) st = grzo_pass_end(r->ctx, losses);
        if (st != GRZO_OK) break;
    }
    if (st == GRZO_OK) {
        int tries = 0;
        st = grzo_step_end(r->ctx, NULL);
        /* an update that failed part-way: the step stays in flight, a new one is refused, and
           grzo_step_end again finishes it (compared bit for bit by the caller) */
        while (st == GRZO_ERR_OUT_OF_MEMORY && strstr(grzo_last_error(r->ctx), "grzo_step_end again finishes it") && tries++ < 8) {
            *where = FAILED_UPDATE;
            CHECKF(grzo_step_begin(r->ctx, B, &si) == GRZO_ERR_STATE && strstr(grzo_last_error(r->ctx), "grzo_step_end finishes it"),
                   "a new step during an unfinished update: %s", grzo_last_error(r->ctx));
            st = grzo_step_end(r->ctx, NULL);
        }
        if (st == GRZO_OK) return st;
    }
    if (st != GRZO_OK && *where != FAILED_UPDATE) *where = FAILED_STEP;
    return st;
}

/* One run with the N-th allocation failing (0: none). Returns the parameters it ends with
   (malloc'd, all blocks one after the other; NULL when setup failed), and in *where how a
   failure came. */
static float *one_run(const config *cf, long fail_at, long n_fail, failure *where, long *calls)
{
    run r;
    grzo_status st;
    size_t total = 0, at = 0;
    float *out = NULL;
    int b, s, retried = 0;
    memset(&r, 0, sizeof r);
    *where = FAILED_NONE;
    oom_arm(fail_at, n_fail);
    st = setup(&r, cf);
    if (st != GRZO_OK) *where = FAILED_SETUP;
    for (s = 0; st == GRZO_OK && s < STEPS; s++) {
        failure w = FAILED_NONE;
        st = one_step(&r, &w);
        if (w == FAILED_UPDATE) *where = FAILED_UPDATE;   /* finished by grzo_step_end again */
        if (st != GRZO_OK) {
            CHECKF(st == GRZO_ERR_OUT_OF_MEMORY, "%s, allocation %ld fails: step %d returned %s (%s)", cf->name, fail_at, s,
                   grzo_status_str(st), grzo_last_error(r.ctx));
            CHECKF(grzo_last_error(r.ctx)[0] != 0, "%s, allocation %ld fails: no message", cf->name, fail_at);
            if (*where != FAILED_UPDATE) *where = w;
            if (strstr(grzo_last_error(r.ctx), "still perturbed")) still_perturbed++;
            CHECKF(retried < n_fail, "%s: %d failed steps with %ld allocations failing", cf->name, retried + 1, n_fail);
            if (retried++ == n_fail) break;
            grzo_step_abort(r.ctx);   /* restores what a failed restore left, or nothing */
            s--;                      /* the same step again */
            st = GRZO_OK;
            continue;
        }
    }
    if (st == GRZO_OK) {   /* and a plain forward after the steps */
        int64_t ex[B] = { 0, 1, 2 };
        float losses[B];
        long tries = 0;
        while ((st = forward(&r, B, ex, losses)) != GRZO_OK && tries++ < n_fail) {
            CHECKF(st == GRZO_ERR_OUT_OF_MEMORY, "%s, allocation %ld fails: the plain forward returned %s", cf->name, fail_at,
                   grzo_status_str(st));
            if (*where == FAILED_NONE) *where = FAILED_STEP;
        }
        CHECKF(st == GRZO_OK, "%s, allocation %ld fails: the plain forward failed %ld times", cf->name, fail_at, tries);
        if (grzo_get_step(r.ctx) != STEPS) CHECKF(0, "%s, allocation %ld fails: %lld steps taken", cf->name, fail_at,
                                                   (long long)grzo_get_step(r.ctx));
    } else if (*where == FAILED_SETUP) {
        CHECKF(st == GRZO_ERR_OUT_OF_MEMORY, "%s, allocation %ld fails: setup returned %s", cf->name, fail_at,
               grzo_status_str(st));
    }
    oom_disarm();
    *calls = oom.calls;
    if (*where != FAILED_SETUP) {
        for (b = 0; b < N_BLK; b++) total += (size_t)(BLK_ROWS[b] * BLK_COLS[b]);
        out = (float *)__real_malloc(total * sizeof(float));
        REQUIRE(out != NULL);
        for (b = 0; b < N_BLK; b++) {
            memcpy(out + at, r.p[b], (size_t)(BLK_ROWS[b] * BLK_COLS[b]) * sizeof(float));
            at += (size_t)(BLK_ROWS[b] * BLK_COLS[b]);
        }
    }
    teardown(&r);
    return out;
}

/* The largest |got - want| over its bound: 0 (bit for bit), or for in-place MeZO 2 % of
   sigma. Its aborted step writes fl(fl(theta + sigma z) - sigma z) back, a rounding off
   theta, and the step taken again sees those values (its losses, so its update, differ by as
   little): measured 1e-6 to 2e-5 here. A shift left in a block moves each weight by sigma. */
static double max_excess(const float *got, const float *want, size_t n, int in_place)
{
    double worst = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double bound = in_place ? 0.02 * SIGMA : 0.0;
        if (d > bound) worst = fmax(worst, bound > 0.0 ? d / bound : HUGE_VAL);
    }
    return worst;
}

static void check_config(const config *cf, long n_fail)
{
    size_t total = 0;
    long calls = 0, n, failed_at[4] = { 0, 0, 0, 0 };
    failure where;
    float *want;
    int b;
    for (b = 0; b < N_BLK; b++) total += (size_t)(BLK_ROWS[b] * BLK_COLS[b]);
    still_perturbed = 0;
    want = one_run(cf, 0, 0, &where, &calls);
    REQUIRE(want != NULL && where == FAILED_NONE);
    for (n = 1; n <= calls; n++) {
        long c2 = 0;
        float *got = one_run(cf, n, n_fail, &where, &c2);
        failed_at[where]++;
        if (got) {
            double worst = max_excess(got, want, total, cf->est == GRZO_ESTIMATOR_MEZO_INPLACE);
            CHECKF(worst <= 1.0, "%s, allocation %ld of %ld fails: the run's parameters differ from the run without a failure "
                   "(%.3g of the bound)", cf->name, n, calls, worst);
        }
        free(got);
    }
    printf("test_cpu_oom: %-18s %3ld allocations; failing each (%ld in a row): %ld in setup, %ld in a step (retried), "
           "%ld in an update, %ld absorbed\n", cf->name, calls, n_fail, failed_at[FAILED_SETUP], failed_at[FAILED_STEP],
           failed_at[FAILED_UPDATE], failed_at[FAILED_NONE]);
    CHECKF(failed_at[FAILED_STEP] > 0, "%s: no allocation inside a step failed: the test reaches none", cf->name);
    CHECKF(failed_at[FAILED_UPDATE] > 0, "%s: no allocation inside an update failed: the test reaches none", cf->name);
    if (cf->est == GRZO_ESTIMATOR_MEZO_INPLACE && n_fail > 1)   /* the restore failed twice somewhere */
        CHECKF(still_perturbed > 0, "%s, %ld in a row: no restore failed twice: the test reaches none", cf->name, n_fail);
    free(want);
}

int main(int argc, char **argv)
{
    size_t i;
    tu_args(argc, argv);
    for (i = 0; i < N_CONFIGS; i++) {
        check_config(&CONFIGS[i], 1);
        if (CONFIGS[i].est == GRZO_ESTIMATOR_MEZO_INPLACE) {
            check_config(&CONFIGS[i], 2);
            check_config(&CONFIGS[i], 3);
        }
    }
    return tu_finish("test_cpu_oom");
}
