/* test_errors.c - bad input never crashes and changes nothing:
     - NaN / +Inf / -Inf losses -> GRZO_ERR_NONFINITE, parameters bitwise unchanged, step counter
       unchanged, the next step works and equals that of a twin context that never saw the NaN
       (GRZO, CANONICAL, SHARED, MeZO in its second pass, FZOO in its last probe; also grzo_step);
     - degenerate groups: all deltas equal (and B = 1) -> finite update, report.degenerate = 1,
       a_i = sign(delta_i) (checked on the update); all deltas 0 -> no update;
     - B = 0 / negative, bad shapes, bad rows.offsets, bad enums, wrong block kinds -> errors;
     - NULL pointers to every entry point -> GRZO_ERR_INVALID_ARG;
     - calls out of order -> GRZO_ERR_STATE, and the context still works afterwards;
     - grzo_last_error is non-empty after an error; every status has a name;
     - backend API version mismatch -> GRZO_ERR_VERSION;
     - checkpoints: missing, truncated, bit-flipped, wrong magic, wrong version, trailing bytes,
       wrong shape / kind / count / name -> error, parameters, step and settings unchanged;
     - checkpoint_settings: a load that changes the estimator, the FZOO probes or the noise
       resizes the step buffers (nothing written past them) and the next steps equal a fresh
       context's loaded from the same file;
     - normalize_range: grzo_group_normalize of finite deltas near +-DBL_MAX or 1e-200;
     - backend_entries: a backend interface without a required entry is refused by name;
     - overflowing_settings: sigma too large for in-place MeZO, lr * weight_decay not finite;
     - clear_fails: the update applied, the row maps' clearing fails: the step counts, the
       next step clears them first;
     - refused_ops_touch_nothing: a refused embedding (batched or one call a segment) or
       tied-head linear marks no row;
     - checkpoint_temp: a save never writes through a symbolic link at its temporary's name,
       replaces a stale temporary, and says why it could not create its temporary;
     - checkpoint_read_back: a save whose reads of the parameters fail, or see them change,
       says so and leaves the previous file;
     - allocation_failures: each allocation of a run (create, blocks, sparse steps, a save)
       failing in turn gives GRZO_ERR_OUT_OF_MEMORY, changes nothing, leaks nothing;
     - inplace_update_fails: in-place MeZO's shift failing part-way is undone; its restore
       failing leaves the parameters on record (whichever blocks it left shifted), restored by
       the next call that reads them; its moves' rounding streams. */
#include <errno.h>
#include <float.h>
#include <sys/stat.h>
#include <unistd.h>   /* symlink */

#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"

#define NP 2
static const int64_t PR[NP] = { 3, 4 }, PC[NP] = { 4, 1 };

typedef struct env {
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_block blk[NP];
    float *data[NP], *scratch[NP];
    grzo_desc d;
} env;

/* a context with the given settings on the backend in v->be; al (may be NULL) is its host
   allocator */
static void env_init_on(env *v, grzo_estimator est, int32_t fzoo_probes, grzo_noise_dist noise, uint64_t seed,
                        const grzo_allocator *al)
{
    int b;
    tu_require_host_memory(&v->be, "test_errors");
    v->d = tu_desc(&v->be, est, seed, 0.05f, 0.0625f);
    v->d.fzoo_probes = fzoo_probes;
    v->d.noise = noise;
    v->d.weight_decay = 0.01f;
    if (al) v->d.allocator = *al;
    v->ctx = tu_ctx(&v->d);
    for (b = 0; b < NP; b++) {
        v->data[b] = (float *)tu_alloc(&v->be, (size_t)(PR[b] * PC[b]) * sizeof(float));
        v->scratch[b] = (float *)tu_alloc(&v->be, (size_t)(PR[b] * PC[b]) * sizeof(float));
        tu_fill_unif(v->data[b], (size_t)(PR[b] * PC[b]), 600 + (uint32_t)b, -1, 1);
        v->blk[b] = tu_block(v->ctx, b == 1 ? GRZO_BLOCK_VECTOR : GRZO_BLOCK_MATRIX, PR[b], PC[b], v->data[b],
                             b == 1 ? "bias" : "w", 0);
    }
}

static void env_init_with(env *v, grzo_estimator est, int32_t fzoo_probes, grzo_noise_dist noise, uint64_t seed,
                          const grzo_allocator *al)
{
    REQUIRE_OK(tu_backend(TU_REF, 1, &v->be));
    env_init_on(v, est, fzoo_probes, noise, seed, al);
}

static void env_init(env *v, grzo_estimator est, uint64_t seed)
{
    env_init_with(v, est, 3, GRZO_NOISE_DEFAULT, seed, NULL);
}

static void env_free(env *v)
{
    int b;
    grzo_destroy(v->ctx);
    for (b = 0; b < NP; b++) {
        grzo_backend_free(&v->be, v->data[b]);
        grzo_backend_free(&v->be, v->scratch[b]);
    }
    grzo_backend_destroy(&v->be);
}

typedef struct snap { float d[NP][16]; int64_t step; } snap;

static void take(const env *v, snap *s)
{
    int b;
    for (b = 0; b < NP; b++) memcpy(s->d[b], v->data[b], (size_t)(PR[b] * PC[b]) * sizeof(float));
    s->step = grzo_get_step(v->ctx);
}

static int same(const env *v, const snap *s)
{
    int b;
    for (b = 0; b < NP; b++)
        if (memcmp(s->d[b], v->data[b], (size_t)(PR[b] * PC[b]) * sizeof(float)) != 0) return 0;
    return grzo_get_step(v->ctx) == s->step;
}

/* a smooth loss of all parameters, different per example */
static double env_loss(int64_t e, float *const *p, void *ud)
{
    double l = 0;
    int b;
    int64_t i;
    (void)ud;
    for (b = 0; b < NP; b++)
        for (i = 0; i < PR[b] * PC[b]; i++) {
            double t = (double)p[b][i] - 0.1 * (double)(e + 1) * (double)(i % 3);
            l += 0.5 * t * t * (1.0 + 0.1 * (double)e);
        }
    return l;
}

static grzo_status env_step(env *v, int64_t B, grzo_step_report *rep)
{
    return tu_bb_step(v->ctx, NP, v->blk, v->scratch, B, env_loss, 1.0, NULL, NULL, rep);
}

/* runs a step whose pass `bad_pass` gets loss `bad` at segment `bad_seg` */
static grzo_status poisoned_step(env *v, int64_t B, int32_t bad_pass, int64_t bad_seg, float bad)
{
    grzo_step_info si;
    int32_t p;
    grzo_status st = grzo_step_begin(v->ctx, B, &si);
    if (st) return st;
    if (bad_pass < 0) bad_pass = si.n_passes - 1;
    for (p = 0; p < si.n_passes; p++) {
        grzo_pass_info pi;
        float losses[64];
        int64_t c;
        REQUIRE_OK(grzo_pass_begin(v->ctx, &pi));
        for (c = 0; c < pi.n_segments; c++) {
            int b;
            for (b = 0; b < NP; b++) REQUIRE_OK(grzo_perturbed_params(v->ctx, v->blk[b], c, v->scratch[b]));
            losses[c] = (float)env_loss(pi.example[c], v->scratch, NULL);
        }
        if (p == bad_pass) losses[bad_seg] = bad;
        st = grzo_pass_end(v->ctx, losses);
        if (st) return st;
    }
    return grzo_step_end(v->ctx, NULL);
}

static void test_nonfinite(void)
{
    static const grzo_estimator ests[5] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_CANONICAL, GRZO_ESTIMATOR_SHARED,
                                            GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO };
    float bads[3];
    int ei, bi;
    bads[0] = (float)NAN;
    bads[1] = (float)INFINITY;
    bads[2] = -(float)INFINITY;
    for (ei = 0; ei < 5; ei++)
        for (bi = 0; bi < 3; bi++) {
            env v, twin;
            snap s;
            grzo_step_report rep;
            int64_t B = 4;
            env_init(&v, ests[ei], 5);
            env_init(&twin, ests[ei], 5);
            REQUIRE_OK(env_step(&v, B, &rep));
            REQUIRE_OK(env_step(&twin, B, &rep));
            take(&v, &s);
            /* the last pass (MeZO's "-" pass, FZOO's last probe), last segment */
            CHECK_ST(poisoned_step(&v, B, -1, B - 1, bads[bi]), GRZO_ERR_NONFINITE);
            CHECKF(same(&v, &s), "estimator %d bad %g: parameters or step changed", (int)ests[ei], (double)bads[bi]);
            CHECK(grzo_last_error(v.ctx) != NULL && grzo_last_error(v.ctx)[0] != 0);
            /* the first pass, first segment */
            CHECK_ST(poisoned_step(&v, B, 0, 0, bads[bi]), GRZO_ERR_NONFINITE);
            CHECK(same(&v, &s));
            /* the step is abandoned: a new one starts, and it equals the twin's */
            CHECK_OK(env_step(&v, B, &rep));
            CHECK_OK(env_step(&twin, B, &rep));
            CHECK(grzo_get_step(v.ctx) == s.step + 1);
            CHECKF(memcmp(v.data[0], twin.data[0], sizeof(float) * 12) == 0 &&
                       memcmp(v.data[1], twin.data[1], sizeof(float) * 4) == 0,
                   "estimator %d: the step after a NaN differs from a run without it", (int)ests[ei]);
            CHECK(tu_all_finite(v.data[0], 12) && tu_all_finite(v.data[1], 4));
            env_free(&v);
            env_free(&twin);
        }
}

/* grzo_step with a forward that writes NaN, and with a forward that fails */
typedef struct fwd_ud { env *v; float bad; grzo_status ret; } fwd_ud;

static grzo_status fwd(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user)
{
    fwd_ud *u = (fwd_ud *)user;
    int64_t c;
    for (c = 0; c < pi->n_segments; c++) {
        int b;
        for (b = 0; b < NP; b++) {
            grzo_status st = grzo_perturbed_params(ctx, u->v->blk[b], c, u->v->scratch[b]);
            if (st) return st;
        }
        losses[c] = (float)env_loss(pi->example[c], u->v->scratch, NULL);
    }
    losses[pi->n_segments / 2] = u->bad;
    return u->ret;
}

static void test_step_callback(void)
{
    env v;
    snap s;
    fwd_ud u;
    grzo_step_report rep;
    env_init(&v, GRZO_ESTIMATOR_GRZO, 9);
    u.v = &v;
    u.bad = 1.0f;
    u.ret = GRZO_OK;
    CHECK_OK(grzo_step(v.ctx, 3, fwd, &u, &rep));
    take(&v, &s);
    u.bad = (float)NAN;
    CHECK_ST(grzo_step(v.ctx, 3, fwd, &u, &rep), GRZO_ERR_NONFINITE);
    CHECK(same(&v, &s));
    u.bad = 1.0f;
    u.ret = GRZO_ERR_BACKEND;
    CHECK_ST(grzo_step(v.ctx, 3, fwd, &u, &rep), GRZO_ERR_BACKEND);
    CHECK(same(&v, &s));
    /* the callback's failure, not the NaN's message before it */
    CHECKF(strstr(grzo_last_error(v.ctx), "forward callback failed") != NULL, "last error: %s", grzo_last_error(v.ctx));
    CHECK_ST(grzo_step(v.ctx, 3, NULL, &u, &rep), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_step(v.ctx, 0, fwd, &u, &rep), GRZO_ERR_INVALID_ARG);
    CHECK(same(&v, &s));
    u.ret = GRZO_OK;
    CHECK_OK(grzo_step(v.ctx, 3, fwd, &u, &rep));
    CHECK(grzo_get_step(v.ctx) == s.step + 1);
    env_free(&v);
}

/* an abandoned step (NaN, or grzo_step_abort) forgets the embedding rows it gathered: the
   next step updates only its own rows */
static void test_touched_after_abort(void)
{
    int mode;
    for (mode = 0; mode < 2; mode++) {
        grzo_backend be;
        grzo_desc d;
        grzo_ctx *ctx;
        grzo_block e;
        grzo_step_info si;
        grzo_pass_info pi;
        float E[30], E0[30], y[64], losses[4];
        int32_t ids[8];
        grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
        int64_t r, changed_other = 0;
        REQUIRE_OK(grzo_backend_ref_create(&be));
        d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 51, 0.1f, 0.1f);
        ctx = tu_ctx(&d);
        tu_fill_unif(E, 30, 650, -1, 1);
        e = tu_block(ctx, GRZO_BLOCK_EMBEDDING, 10, 3, E, "emb", 0);
        rows.offsets = NULL;
        /* step 1 gathers rows 1 and 2, then is abandoned */
        REQUIRE_OK(grzo_step_begin(ctx, 2, &si));
        REQUIRE_OK(grzo_pass_begin(ctx, &pi));
        ids[0] = 1; ids[1] = 2; ids[2] = 1; ids[3] = 2;
        rows.n_rows = 4;
        CHECK_OK(grzo_embedding(ctx, e, ids, y, &rows));
        losses[0] = 1.0f; losses[1] = 2.0f; losses[2] = (float)NAN; losses[3] = 0.5f;
        if (mode == 0) CHECK_ST(grzo_pass_end(ctx, losses), GRZO_ERR_NONFINITE);
        else CHECK_OK(grzo_step_abort(ctx));
        memcpy(E0, E, sizeof E);
        /* step 2 gathers row 5 only */
        REQUIRE_OK(grzo_step_begin(ctx, 2, &si));
        REQUIRE_OK(grzo_pass_begin(ctx, &pi));
        for (r = 0; r < 4; r++) ids[r] = 5;
        CHECK_OK(grzo_embedding(ctx, e, ids, y, &rows));
        losses[0] = 1.0f; losses[1] = 2.0f; losses[2] = 1.5f; losses[3] = 0.5f;
        CHECK_OK(grzo_pass_end(ctx, losses));
        CHECK_OK(grzo_step_end(ctx, NULL));
        for (r = 0; r < 10; r++)
            if (r != 5 && memcmp(E + 3 * r, E0 + 3 * r, 3 * sizeof(float)) != 0) changed_other++;
        CHECKF(changed_other == 0, "mode %d: %lld embedding rows not gathered by the step changed", mode, (long long)changed_other);
        CHECK(memcmp(E + 15, E0 + 15, 3 * sizeof(float)) != 0);
        grzo_destroy(ctx);
        grzo_backend_destroy(&be);
    }
}

/* ---- degenerate groups ---------------------------------------------------------------- */
static void test_degenerate(void)
{
    int64_t B;
    for (B = 1; B <= 4; B += 3) {
        env v;
        grzo_step_info si;
        grzo_pass_info pi;
        grzo_step_report rep;
        float before[12], losses[8];
        int64_t c, k;
        double delta = 0.375;
        int bad = 0;
        env_init(&v, GRZO_ESTIMATOR_GRZO, 11);
        memcpy(before, v.data[0], sizeof before);
        REQUIRE_OK(grzo_step_begin(v.ctx, B, &si));
        REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
        /* every delta equal: l+ = 1.375, l- = 1 */
        for (c = 0; c < 2 * B; c++) losses[c] = pi.sign[c] > 0 ? (float)(1.0 + delta) : 1.0f;
        CHECK_OK(grzo_pass_end(v.ctx, losses));
        CHECK_OK(grzo_step_end(v.ctx, &rep));
        CHECKF(rep.degenerate == 1, "B=%lld: all deltas equal, report.degenerate = %d", (long long)B, (int)rep.degenerate);
        CHECK(rep.degenerate_total == 1);
        CHECK(tu_all_finite(v.data[0], 12) && tu_all_finite(v.data[1], 4));
        CHECK(memcmp(before, v.data[0], sizeof before) != 0);
        /* s is replaced by rms(delta) = delta: a_i = 1 -> W -= lr/(2 sigma B) sum_i Z_i + lr wd W */
        {
            grzo_noise base = tu_noise(v.d.seed, 0, 0, 0, GRZO_NOISE_RADEMACHER);
            for (k = 0; k < 12; k++) {
                double g = 0, want;
                int64_t i;
                for (i = 0; i < B; i++) g += tu_z(&base, 1, 1, 3, 4, i, k / 4, k % 4);
                want = before[k] - (double)v.d.lr / (2.0 * v.d.sigma * (double)B) * g * (1.0 / (1.0 + v.d.norm_eps / delta)) -
                       (double)v.d.lr * v.d.weight_decay * before[k];
                if (!(fabs(v.data[0][k] - want) <= 1e-5 * (fabs(want) + 1))) bad++;
            }
            CHECKF(bad == 0, "B=%lld: degenerate update is not a_i = sign(delta_i)", (long long)B);
        }
        /* every delta 0: no update at all */
        memcpy(before, v.data[0], sizeof before);
        {
            float vb[4];
            memcpy(vb, v.data[1], sizeof vb);
            REQUIRE_OK(grzo_step_begin(v.ctx, B, &si));
            REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
            for (c = 0; c < 2 * B; c++) losses[c] = 2.5f;
            CHECK_OK(grzo_pass_end(v.ctx, losses));
            CHECK_OK(grzo_step_end(v.ctx, &rep));
            /* no Z-direction update; the vector block (never decayed) is bitwise unchanged.
               Whether weight decay still applies to the matrix is not pinned down by the
               header ("the step makes no update"): accept unchanged or decay-only. */
            CHECK(memcmp(vb, v.data[1], sizeof vb) == 0);
            {
                int unchanged = memcmp(before, v.data[0], sizeof before) == 0, decay_only = 1;
                for (k = 0; k < 12; k++) {
                    double want = before[k] - (double)v.d.lr * v.d.weight_decay * before[k];
                    if (!(fabs(v.data[0][k] - want) <= 1e-6 * fabs(want))) decay_only = 0;
                }
                CHECKF(unchanged || decay_only, "B=%lld: all deltas 0 moved the weights beyond weight decay", (long long)B);
                if (!unchanged && B == 1)
                    printf("  note: with every delta 0, weight decay is still applied (header says 'no update')\n");
            }
        }
        env_free(&v);
        /* and with weight decay 0: bitwise no change at all */
        {
            grzo_backend be;
            grzo_desc d;
            grzo_ctx *c0;
            float w[12], w0[12];
            REQUIRE_OK(grzo_backend_ref_create(&be));
            d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 13, 0.1f, 0.1f);
            c0 = tu_ctx(&d);
            tu_fill_unif(w, 12, 640, -1, 1);
            memcpy(w0, w, sizeof w);
            (void)tu_block(c0, GRZO_BLOCK_MATRIX, 3, 4, w, "w", 0);
            REQUIRE_OK(grzo_step_begin(c0, B, &si));
            REQUIRE_OK(grzo_pass_begin(c0, &pi));
            for (c = 0; c < 2 * B; c++) losses[c] = 0.75f;
            CHECK_OK(grzo_pass_end(c0, losses));
            CHECK_OK(grzo_step_end(c0, &rep));
            CHECK(memcmp(w, w0, sizeof w) == 0);
            CHECK(tu_all_finite(w, 12));
            grzo_destroy(c0);
            grzo_backend_destroy(&be);
        }
    }
    /* FZOO: all probes give the same loss change -> std 0 guard, finite update */
    {
        env v;
        grzo_step_info si;
        grzo_step_report rep;
        float before[12];
        int32_t p;
        env_init(&v, GRZO_ESTIMATOR_FZOO, 12);
        memcpy(before, v.data[0], sizeof before);
        REQUIRE_OK(grzo_step_begin(v.ctx, 2, &si));
        for (p = 0; p < si.n_passes; p++) {
            grzo_pass_info pi;
            float losses[2];
            REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
            losses[0] = losses[1] = pi.sign[0] == 0 ? 1.0f : 1.5f;
            CHECK_OK(grzo_pass_end(v.ctx, losses));
        }
        CHECK_OK(grzo_step_end(v.ctx, &rep));
        CHECK(rep.degenerate == 1);
        CHECK(tu_all_finite(v.data[0], 12) && tu_all_finite(v.data[1], 4));
        CHECK(memcmp(before, v.data[0], sizeof before) != 0);
        env_free(&v);
    }
}

/* ---- invalid arguments ------------------------------------------------------------------- */
static void test_invalid_args(void)
{
    env v;
    grzo_step_info si;
    grzo_pass_info pi;
    grzo_block_desc bd;
    grzo_block b;
    grzo_param prm = {0};   /* filled by grzo_block_param; zeroed so a failure reads defined values */
    grzo_desc d;
    grzo_ctx *ctx2 = NULL;
    snap s;
    float x[64], y[64], losses[8];
    int32_t ids[8];
    int64_t off[9];
    grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
    char longname[80];

    env_init(&v, GRZO_ESTIMATOR_GRZO, 21);
    take(&v, &s);
    memset(ids, 0, sizeof ids);
    memset(&prm, 0, sizeof prm);

    /* desc */
    d = v.d;
    d.backend = NULL;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    CHECK(ctx2 == NULL);
    d = v.d; d.estimator = GRZO_ESTIMATOR_COUNT;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.estimator = (grzo_estimator)-3;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.noise = GRZO_NOISE_COUNT;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.schedule = GRZO_SCHEDULE_COUNT;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.lr = -1e-3f;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.lr = (float)NAN;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.sigma = -1e-3f;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.sigma = (float)INFINITY;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.weight_decay = -0.5f;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.norm_eps = -1.0f;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.warmup_steps = -1;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    d = v.d; d.fzoo_probes = -2;
    CHECK_ST(grzo_create(&d, &ctx2), GRZO_ERR_INVALID_ARG);
    CHECK(ctx2 == NULL);
    /* defaults */
    memset(&d, 0, sizeof d);
    d = grzo_desc_resolve(&d);
    CHECK(d.estimator == GRZO_ESTIMATOR_GRZO && d.noise == GRZO_NOISE_RADEMACHER && d.schedule == GRZO_SCHEDULE_CONSTANT);
    CHECK(d.lr == 1e-6f && d.sigma == 1e-3f && d.norm_eps == 1e-8f && d.fzoo_probes == 8 && d.weight_decay == 0.0f);
    d = grzo_desc_resolve(NULL);
    CHECK(d.lr == 1e-6f && d.backend == NULL);

    /* blocks */
    memset(&bd, 0, sizeof bd);
    bd.kind = GRZO_BLOCK_MATRIX; bd.rows = 2; bd.cols = 2; bd.data = x;
    b.id = 77;
    CHECK_ST(grzo_block_add(v.ctx, NULL, &b), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_block_add(v.ctx, &bd, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_block_add(NULL, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.data = NULL;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.data = x;
    bd.rows = 0;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.rows = -2;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.rows = 2; bd.cols = 0;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.kind = GRZO_BLOCK_VECTOR; bd.cols = 2;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.kind = GRZO_BLOCK_INVALID; bd.cols = 2;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.kind = GRZO_BLOCK_KIND_COUNT;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.kind = GRZO_BLOCK_MATRIX; bd.dtype = GRZO_DTYPE_COUNT;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.dtype = GRZO_DTYPE_DEFAULT;
    bd.rows = (int64_t)1 << 40; bd.cols = (int64_t)1 << 40;   /* overflowing size */
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    bd.rows = 2; bd.cols = 2;
    memset(longname, 'a', sizeof longname);
    longname[sizeof longname - 1] = 0;
    bd.name = longname;
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    longname[64] = 0;   /* one byte past the 63 a name may have: refused, and the message says 63 */
    CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_INVALID_ARG);
    CHECK(strstr(grzo_last_error(v.ctx), "name longer than 63 bytes") != NULL);
    bd.name = NULL;
    {
        grzo_backend_caps caps;
        REQUIRE_OK(grzo_backend_query(&v.be, &caps));
        if (!(caps.dtypes & (1u << GRZO_DTYPE_BF16))) {
            bd.dtype = GRZO_DTYPE_BF16;
            CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_UNSUPPORTED);
            bd.dtype = GRZO_DTYPE_DEFAULT;
        }
    }
    b.id = 0;
    CHECK_ST(grzo_block_param(v.ctx, b, &prm), GRZO_ERR_INVALID_ARG);
    b.id = 99;
    CHECK_ST(grzo_block_param(v.ctx, b, &prm), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_block_param(v.ctx, v.blk[0], NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_block_param(NULL, v.blk[0], &prm), GRZO_ERR_INVALID_ARG);
    CHECK_OK(grzo_block_param(v.ctx, v.blk[0], &prm));
    CHECK(prm.rows == 3 && prm.cols == 4 && prm.data == v.data[0] && prm.kind == GRZO_BLOCK_MATRIX);
    CHECK_OK(grzo_block_param(v.ctx, v.blk[1], &prm));
    CHECK(prm.rows == 4 && prm.cols == 1 && prm.kind == GRZO_BLOCK_VECTOR);

    /* step sizes */
    CHECK_ST(grzo_step_begin(v.ctx, 0, &si), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_step_begin(v.ctx, -4, &si), GRZO_ERR_INVALID_ARG);
    CHECK(grzo_last_error(v.ctx)[0] != 0);
    CHECK(same(&v, &s));

    /* ops inside a pass: bad rows and bad blocks are refused and the pass goes on */
    tu_fill_unif(x, 64, 610, -1, 1);
    REQUIRE_OK(grzo_step_begin(v.ctx, 3, &si));
    REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
    REQUIRE(pi.n_segments == 6);
    rows.n_rows = 7; rows.offsets = NULL;            /* 7 rows over 6 segments */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    rows.n_rows = -6;
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    off[0] = 1; off[1] = 1; off[2] = 2; off[3] = 3; off[4] = 4; off[5] = 5; off[6] = 6;
    rows.n_rows = 6; rows.offsets = off;             /* does not start at 0 */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    off[0] = 0; off[1] = 3; off[2] = 2;              /* decreasing */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_vector(v.ctx, v.blk[1], GRZO_VECTOR_ADD, x, y, &rows), GRZO_ERR_INVALID_ARG);
    off[1] = 1; off[2] = 2; off[6] = 5;              /* does not end at n_rows */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    off[6] = 6;
    /* a pass in pieces: segments outside the pass's 6, offsets not over the piece's own */
    rows.offsets = NULL;
    rows.n_rows = 2; rows.first_segment = -1;
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    rows.first_segment = 6;
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK(strstr(grzo_last_error(v.ctx), "segments") != NULL);
    rows.first_segment = 4; rows.n_segments = 3;    /* 4 + 3 > 6 */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    rows.n_segments = -1;
    CHECK_ST(grzo_vector(v.ctx, v.blk[1], GRZO_VECTOR_ADD, x, y, &rows), GRZO_ERR_INVALID_ARG);
    rows.first_segment = 3; rows.n_segments = 0;    /* segments 3..5: 2 rows do not split evenly over them */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    rows.offsets = off;                              /* the pass's 7 offsets for a piece of 3 segments */
    rows.n_rows = 6;
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    {   /* segments 2 and 3 alone (a row each) get the rows of one call over all 6 */
        float whole[64];
        rows.first_segment = 0; rows.n_segments = 0; rows.n_rows = 6; rows.offsets = NULL;
        CHECK_OK(grzo_linear(v.ctx, v.blk[0], x, whole, &rows));
        rows.first_segment = 2; rows.n_segments = 2; rows.n_rows = 2;
        CHECK_OK(grzo_linear(v.ctx, v.blk[0], x + 2 * PC[0], y, &rows));
        CHECK(memcmp(y, whole + 2 * PR[0], (size_t)(2 * PR[0]) * sizeof(float)) == 0);
    }
    rows.first_segment = 0; rows.n_segments = 0;
    rows.n_rows = 6; rows.offsets = off;
    CHECK_ST(grzo_linear(v.ctx, v.blk[1], x, y, &rows), GRZO_ERR_INVALID_ARG);        /* vector as matrix */
    CHECK_ST(grzo_vector(v.ctx, v.blk[0], GRZO_VECTOR_MUL, x, y, &rows), GRZO_ERR_INVALID_ARG); /* matrix as vector */
    CHECK_ST(grzo_vector(v.ctx, v.blk[1], (grzo_vector_op)7, x, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_embedding(v.ctx, v.blk[0], ids, y, &rows), GRZO_ERR_INVALID_ARG);    /* matrix as embedding */
    b.id = 0;
    CHECK_ST(grzo_linear(v.ctx, b, x, y, &rows), GRZO_ERR_INVALID_ARG);
    b.id = 42;
    CHECK_ST(grzo_linear(v.ctx, b, x, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_perturbed_params(v.ctx, b, 0, v.scratch[0]), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_perturbed_params(v.ctx, v.blk[0], 6, v.scratch[0]), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_perturbed_params(v.ctx, v.blk[0], -1, v.scratch[0]), GRZO_ERR_INVALID_ARG);
    CHECK(grzo_last_error(v.ctx)[0] != 0);
    /* NULL pointers inside a pass */
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], NULL, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, NULL, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_linear(NULL, v.blk[0], x, y, &rows), GRZO_ERR_INVALID_ARG);
    {   /* an output over its own input: refused, the input unchanged */
        float before[64];
        rows.n_rows = 6; rows.offsets = NULL;
        memcpy(before, x, sizeof before);
        CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, x + 2, &rows), GRZO_ERR_INVALID_ARG);
        CHECK(strstr(grzo_last_error(v.ctx), "overlap") != NULL);
        CHECK_ST(grzo_linear(v.ctx, v.blk[0], x + 17, x, &rows), GRZO_ERR_INVALID_ARG);   /* one float shared */
        CHECK(memcmp(before, x, sizeof before) == 0);
        CHECK_OK(grzo_linear(v.ctx, v.blk[0], x, x + 24, &rows));   /* adjacent is fine */
        memcpy(x, before, sizeof before);
    }
    CHECK_ST(grzo_vector(v.ctx, v.blk[1], GRZO_VECTOR_ADD, NULL, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_vector(v.ctx, v.blk[1], GRZO_VECTOR_ADD, x, NULL, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_vector(v.ctx, v.blk[1], GRZO_VECTOR_ADD, x, y, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_vector(NULL, v.blk[1], GRZO_VECTOR_ADD, x, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_embedding(NULL, v.blk[0], ids, y, &rows), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_perturbed_params(v.ctx, v.blk[0], 0, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_perturbed_params(NULL, v.blk[0], 0, v.scratch[0]), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_pass_end(v.ctx, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_pass_end(NULL, losses), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_pass_begin(NULL, &pi), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_step_end(NULL, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_step_abort(NULL), GRZO_ERR_INVALID_ARG);
    /* ... and the pass still works */
    rows.n_rows = 6; rows.offsets = NULL;
    CHECK_OK(grzo_linear(v.ctx, v.blk[0], x, y, &rows));
    CHECK(tu_all_finite(y, 18));
    {
        int64_t c;
        for (c = 0; c < 6; c++) losses[c] = (float)(1.0 + 0.1 * (double)c * (double)c);
    }
    CHECK_OK(grzo_pass_end(v.ctx, losses));
    CHECK_OK(grzo_step_end(v.ctx, NULL));
    CHECK(grzo_get_step(v.ctx) == s.step + 1);
    take(&v, &s);

    /* NULL everywhere else */
    CHECK_ST(grzo_create(NULL, &ctx2), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_create(&v.d, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_get_desc(NULL, &d), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_get_desc(v.ctx, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_step_begin(NULL, 2, &si), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_step(NULL, 2, NULL, NULL, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_checkpoint_save(NULL, "/tmp/x"), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_checkpoint_save(v.ctx, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_checkpoint_load(NULL, "/tmp/x"), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_checkpoint_load(v.ctx, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_backend_ref_create(NULL), GRZO_ERR_INVALID_ARG);
    {
        grzo_cpu_desc cd;
        memset(&cd, 0, sizeof cd);
        CHECK_ST(grzo_backend_cpu_create(&cd, NULL), GRZO_ERR_INVALID_ARG);
        cd.n_threads = -1;
        {
            grzo_backend tmp;
            CHECK_ST(grzo_backend_cpu_create(&cd, &tmp), GRZO_ERR_INVALID_ARG);
        }
    }
    CHECK_ST(grzo_backend_query(NULL, NULL), GRZO_ERR_INVALID_ARG);
    CHECK_ST(grzo_backend_query(&v.be, NULL), GRZO_ERR_INVALID_ARG);
    {
        void *p = NULL;
        CHECK_ST(grzo_backend_alloc(NULL, 16, &p), GRZO_ERR_INVALID_ARG);
        CHECK_ST(grzo_backend_alloc(&v.be, 16, NULL), GRZO_ERR_INVALID_ARG);
        CHECK_ST(grzo_backend_upload(NULL, y, x, 4), GRZO_ERR_INVALID_ARG);
        CHECK_ST(grzo_backend_upload(&v.be, NULL, x, 4), GRZO_ERR_INVALID_ARG);
        CHECK_ST(grzo_backend_upload(&v.be, y, NULL, 4), GRZO_ERR_INVALID_ARG);
        CHECK_ST(grzo_backend_download(&v.be, NULL, x, 4), GRZO_ERR_INVALID_ARG);
        CHECK_ST(grzo_backend_download(NULL, y, x, 4), GRZO_ERR_INVALID_ARG);
    }
    grzo_destroy(NULL);
    grzo_backend_destroy(NULL);
    grzo_backend_free(&v.be, NULL);
    CHECK_ST(grzo_noise_fill(NULL, 0, 4, y), GRZO_ERR_INVALID_ARG);   /* the rest: test_rng's refusals */
    CHECK(grzo_noise_at(NULL, 0) == 0.0f);
    CHECK(grzo_get_step(NULL) == -1);
    CHECK(grzo_lr_at(NULL, 0) == 0.0f);
    CHECK(grzo_last_error(NULL) != NULL);
    CHECK(grzo_version() != NULL && grzo_version()[0] != 0);
    {
        int st;
        for (st = -12; st <= 2; st++) {
            const char *n = grzo_status_str((grzo_status)st);
            CHECK(n != NULL && n[0] != 0);
        }
        CHECK(strcmp(grzo_status_str(GRZO_ERR_NONFINITE), grzo_status_str(GRZO_ERR_FORMAT)) != 0);
    }
    CHECK(same(&v, &s));
    env_free(&v);
}

/* ---- calls out of order ---------------------------------------------------------------- */
/* whether the context's last error says `what` (and says which when not) */
static int says(grzo_ctx *ctx, const char *what)
{
    if (strstr(grzo_last_error(ctx), what)) return 1;
    fprintf(stderr, "    last error: %s\n    wanted it to say: %s\n", grzo_last_error(ctx), what);
    return 0;
}

static void test_state(void)
{
    static const grzo_estimator ests[3] = { GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO };
    int ei;
    for (ei = 0; ei < 3; ei++) {
        env v;
        snap s;
        grzo_step_info si;
        grzo_pass_info pi;
        grzo_step_report rep;
        grzo_block_desc bd;
        grzo_block b;
        float losses[16], x[64], y[64];
        grzo_rows rows = {0};   /* zero: the defaults (whole pass) */
        char path[256];
        int32_t p;
        int64_t c;
        env_init(&v, ests[ei], 31);
        take(&v, &s);
        tu_tmp_path(path, sizeof path, "state");
        for (c = 0; c < 16; c++) losses[c] = (float)(1.0 + 0.01 * (double)(c * c));
        tu_fill_unif(x, 64, 620, -1, 1);
        rows.n_rows = 2; rows.offsets = NULL;
        /* idle */
        CHECK_ST(grzo_pass_begin(v.ctx, &pi), GRZO_ERR_STATE);
        CHECK_ST(grzo_pass_end(v.ctx, losses), GRZO_ERR_STATE);
        CHECK_ST(grzo_step_end(v.ctx, &rep), GRZO_ERR_STATE);
        CHECK(says(v.ctx, "no step in flight"));
        CHECK_ST(grzo_perturbed_params(v.ctx, v.blk[0], 0, v.scratch[0]), GRZO_ERR_STATE);
        CHECK(grzo_last_error(v.ctx)[0] != 0);
        CHECK(same(&v, &s));
        CHECK_OK(grzo_check_replicas(v.ctx));   /* one process: nothing to compare */
        /* in a step, before its first pass */
        REQUIRE_OK(grzo_step_begin(v.ctx, 2, &si));
        CHECK_ST(grzo_step_begin(v.ctx, 2, &si), GRZO_ERR_STATE);
        CHECK_ST(grzo_pass_end(v.ctx, losses), GRZO_ERR_STATE);
        CHECK_ST(grzo_step_end(v.ctx, &rep), GRZO_ERR_STATE);
        CHECK(says(v.ctx, "passes remain to be run"));
        CHECK_ST(grzo_perturbed_params(v.ctx, v.blk[0], 0, v.scratch[0]), GRZO_ERR_STATE);
        CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_STATE);   /* between passes */
        memset(&bd, 0, sizeof bd);
        bd.kind = GRZO_BLOCK_MATRIX; bd.rows = 2; bd.cols = 2; bd.data = x;
        CHECK_ST(grzo_block_add(v.ctx, &bd, &b), GRZO_ERR_STATE);
        CHECK_ST(grzo_checkpoint_save(v.ctx, path), GRZO_ERR_STATE);
        CHECK_ST(grzo_checkpoint_load(v.ctx, path), GRZO_ERR_STATE);
        CHECK_ST(grzo_check_replicas(v.ctx), GRZO_ERR_STATE);   /* between steps, ranks or not */
        {
            fwd_ud u;
            u.v = &v;
            u.bad = 1.0f;
            u.ret = GRZO_OK;
            CHECK_ST(grzo_step(v.ctx, 2, fwd, &u, &rep), GRZO_ERR_STATE);
        }
        for (p = 0; p < si.n_passes; p++) {
            REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
            CHECK_ST(grzo_pass_begin(v.ctx, &pi), GRZO_ERR_STATE);
            CHECK_ST(grzo_step_end(v.ctx, &rep), GRZO_ERR_STATE);
            CHECK(says(v.ctx, "a pass is in flight"));
            CHECK_ST(grzo_step_begin(v.ctx, 2, &si), GRZO_ERR_STATE);
            REQUIRE_OK(grzo_pass_end(v.ctx, losses));
            CHECK_ST(grzo_pass_end(v.ctx, losses), GRZO_ERR_STATE);
            if (p + 1 < si.n_passes) {
                CHECK_ST(grzo_step_end(v.ctx, &rep), GRZO_ERR_STATE);
                CHECK(says(v.ctx, "passes remain to be run"));
            }
        }
        CHECK_ST(grzo_pass_begin(v.ctx, &pi), GRZO_ERR_STATE);   /* no pass is due */
        CHECK(same(&v, &s));                                      /* nothing applied yet */
        CHECK_OK(grzo_step_end(v.ctx, &rep));
        CHECK_ST(grzo_step_end(v.ctx, &rep), GRZO_ERR_STATE);
        CHECK(grzo_get_step(v.ctx) == s.step + 1);
        /* abort in the middle: nothing changes, a new step starts */
        take(&v, &s);
        REQUIRE_OK(grzo_step_begin(v.ctx, 2, &si));
        REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
        CHECK_OK(grzo_step_abort(v.ctx));
        CHECK(same(&v, &s));
        CHECK_ST(grzo_pass_end(v.ctx, losses), GRZO_ERR_STATE);
        CHECK_OK(env_step(&v, 2, &rep));
        CHECK(grzo_get_step(v.ctx) == s.step + 1);
        remove(path);
        env_free(&v);
    }
}

/* ---- backend version ---------------------------------------------------------------------- */
static void test_backend_version(void)
{
    grzo_backend be, fake;
    grzo_backend_i iface;
    grzo_desc d;
    grzo_ctx *ctx = NULL;
    REQUIRE_OK(grzo_backend_ref_create(&be));
    iface = *be.iface;
    iface.api_version = GRZO_BACKEND_API_VERSION + 1;
    fake.iface = &iface;
    fake.self = be.self;
    d = tu_desc(&fake, GRZO_ESTIMATOR_GRZO, 1, 0.1f, 0.1f);
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_VERSION);
    CHECK(ctx == NULL);
    grzo_backend_destroy(&be);
}

/* A backend interface with a required entry missing is refused by name, not called. */
static void test_backend_entries(void)
{
    grzo_backend be, fake;
    grzo_backend_i iface;
    grzo_backend_caps caps;
    grzo_desc d;
    grzo_ctx *ctx = NULL;
    void *p = NULL;
    REQUIRE_OK(grzo_backend_ref_create(&be));
    iface = *be.iface;
    iface.update = NULL;
    fake.iface = &iface;
    fake.self = be.self;
    d = tu_desc(&fake, GRZO_ESTIMATOR_GRZO, 1, 0.1f, 0.1f);
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    CHECK(ctx == NULL);
    CHECK_ST(grzo_backend_query(&fake, &caps), GRZO_ERR_INVALID_ARG);
    iface = *be.iface;
    iface.mem_alloc = NULL;
    CHECK_ST(grzo_backend_alloc(&fake, 16, &p), GRZO_ERR_INVALID_ARG);
    CHECK(p == NULL);
    /* freeing through no backend, or one that is not whole, does nothing (the pointer stays
       the real backend's, freed once below) */
    REQUIRE_OK(grzo_backend_alloc(&be, 16, &p));
    grzo_backend_free(NULL, p);
    grzo_backend_free(&fake, p);
    memset(p, 0, 16);
    grzo_backend_free(&be, p);
    grzo_backend_destroy(&be);
}

/* One step's pass of B = 2 over a 10 x 3 embedding: four rows ids[0..3] gathered, losses
   given; the step is left for the caller to end. */
static void embedding_pass(grzo_ctx *ctx, grzo_block e, const int32_t *ids)
{
    static const float losses[4] = {1.0f, 2.0f, 1.5f, 0.5f};
    grzo_rows rows = {0};
    grzo_pass_info pi;
    float y[12];
    rows.n_rows = 4;
    REQUIRE_OK(grzo_step_begin(ctx, 2, NULL));
    REQUIRE_OK(grzo_pass_begin(ctx, &pi));
    CHECK_OK(grzo_embedding(ctx, e, ids, y, &rows));
    CHECK_OK(grzo_pass_end(ctx, losses));
}

/* ---- one backend call per segment (desc.per_example_ops = 1, the default with desc.comm) ----------
   A pass's embedding, linear and vector op over segments of different lengths give, one call
   per segment, the outputs of one call for all of them: the reference backend computes each row
   alone, so the same bits. (The MPI tests compare ranks against a single process that also
   calls per segment, so only this compares the two ways.) */
static void test_per_example_ops(void)
{
    enum { B = 2, DI = 3, DO = 4, V = 10, NR = 7 };
    static const int64_t offsets[5] = { 0, 1, 3, 6, 7 };   /* GRZO's 2B = 4 copies: 1, 2, 3 and 1 rows */
    static const int32_t ids[NR] = { 1, 4, 0, 9, 2, 2, 7 };
    static const float losses[4] = { 1.0f, 2.0f, 1.5f, 0.5f };
    float x[NR * DI], ye[2][NR * DI], y[2][NR * DO], z[2][NR * DO];
    int k;
    tu_fill_unif(x, NR * DI, 801, -1, 1);
    for (k = 0; k < 2; k++) {
        grzo_backend be;
        grzo_desc d;
        grzo_ctx *ctx;
        grzo_block w, bias, e;
        grzo_rows rows = { 0 };
        grzo_pass_info pi;
        float *W, *bv, *E;
        REQUIRE_OK(tu_backend(TU_REF, 1, &be));
        tu_require_host_memory(&be, "test_errors");
        d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 61, 0.1f, 0.1f);
        d.per_example_ops = k == 0 ? -1 : 1;
        ctx = tu_ctx(&d);
        W = (float *)tu_alloc(&be, DO * DI * sizeof(float));
        bv = (float *)tu_alloc(&be, DO * sizeof(float));
        E = (float *)tu_alloc(&be, V * DI * sizeof(float));
        tu_fill_unif(W, DO * DI, 802, -1, 1);
        tu_fill_unif(bv, DO, 803, -1, 1);
        tu_fill_unif(E, V * DI, 804, -1, 1);
        w = tu_block(ctx, GRZO_BLOCK_MATRIX, DO, DI, W, "w", 0);
        bias = tu_block(ctx, GRZO_BLOCK_VECTOR, DO, 1, bv, "b", 0);
        e = tu_block(ctx, GRZO_BLOCK_EMBEDDING, V, DI, E, "e", 0);
        rows.n_rows = NR;
        rows.offsets = offsets;
        REQUIRE_OK(grzo_step_begin(ctx, B, NULL));
        REQUIRE_OK(grzo_pass_begin(ctx, &pi));
        CHECK_OK(grzo_embedding(ctx, e, ids, ye[k], &rows));
        CHECK_OK(grzo_linear(ctx, w, x, y[k], &rows));
        CHECK_OK(grzo_vector(ctx, bias, GRZO_VECTOR_ADD, y[k], z[k], &rows));
        CHECK_OK(grzo_pass_end(ctx, losses));
        CHECK_OK(grzo_step_end(ctx, NULL));
        grzo_destroy(ctx);
        grzo_backend_free(&be, W);
        grzo_backend_free(&be, bv);
        grzo_backend_free(&be, E);
        grzo_backend_destroy(&be);
    }
    CHECK(memcmp(ye[0], ye[1], sizeof ye[0]) == 0);
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0);
    CHECK(memcmp(z[0], z[1], sizeof z[0]) == 0);
}

/* Hyperparameters each accepted whose product is not finite: refused at create (sigma that
   in-place MeZO's -2 sigma shift would overflow) or by the step (lr * weight_decay), with
   nothing changed. */
static void test_overflowing_settings(void)
{
    grzo_backend be;
    grzo_desc d;
    grzo_ctx *ctx = NULL;
    grzo_block e;
    float E[30], E0[30];
    int32_t ids[4] = {1, 2, 1, 2};
    REQUIRE_OK(grzo_backend_ref_create(&be));
    d = tu_desc(&be, GRZO_ESTIMATOR_MEZO_INPLACE, 1, 0.1f, 2e38f);
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    CHECK(ctx == NULL);
    d.sigma = FLT_MAX / 4.0f;   /* the largest taken: theta -2 sigma z stays finite */
    CHECK_OK(grzo_create(&d, &ctx));
    grzo_destroy(ctx);
    ctx = NULL;
    d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 54, 1e20f, 0.1f);
    d.weight_decay = 1e20f;
    ctx = tu_ctx(&d);
    tu_fill_unif(E, 30, 653, -1, 1);
    memcpy(E0, E, sizeof E);
    e = tu_block(ctx, GRZO_BLOCK_EMBEDDING, 10, 3, E, "emb", 0);
    embedding_pass(ctx, e, ids);
    CHECK_ST(grzo_step_end(ctx, NULL), GRZO_ERR_NONFINITE);
    CHECKF(strstr(grzo_last_error(ctx), "weight decay") != NULL, "last error: %s", grzo_last_error(ctx));
    CHECK(memcmp(E, E0, sizeof E) == 0 && grzo_get_step(ctx) == 0);
    grzo_destroy(ctx);
    grzo_backend_destroy(&be);
}

/* grzo_step_end applies the update, then clears the row maps: when the clearing fails the
   step still counts (its noise must not be drawn again) and the next step clears the maps
   before it begins, so rows of the old step are not updated again. */
static grzo_backend g_inner;
static int g_fail_upload;

/* be: the reference backend (g_inner) behind a copy of its interface, for a test to replace
   an entry of */
static void wrap_ref(grzo_backend_i *iface, grzo_backend *be)
{
    REQUIRE_OK(grzo_backend_ref_create(&g_inner));
    *iface = *g_inner.iface;
    be->iface = iface;
    be->self = g_inner.self;
}

/* rows of a 10 x 3 embedding that differ between E and E0, row `except` not counted */
static int64_t rows_changed(const float *E, const float *E0, int64_t except)
{
    int64_t r, n = 0;
    for (r = 0; r < 10; r++)
        if (r != except && memcmp(E + 3 * r, E0 + 3 * r, 3 * sizeof(float)) != 0) n++;
    return n;
}
static grzo_status failing_upload(void *self, void *dst, const void *src, size_t n)
{
    (void)self;
    if (g_fail_upload) return GRZO_ERR_BACKEND;
    return g_inner.iface->upload(g_inner.self, dst, src, n);
}
/* ---- in-place MeZO when the backend's update fails ------------------------------------------
   Its shifts and restore go through the update entry. A shift that fails part-way is undone
   block by block; a restore that fails leaves the blocks still shifted on record, and every
   later call that reads the parameters (step_abort, step_begin, checkpoint_save, a plain op)
   restores them first, or fails changing nothing else. Here the 3 x 4 matrix and the bias of
   the environment are blocks 0 and 1; g_update_fail_from = the first failing update call. */
static long g_update_calls, g_update_fail_from, g_update_fail_count;
static uint32_t g_update_streams[16];   /* round_stream of the first 16 update calls */
static grzo_status failing_update(void *self, const grzo_update_args *a)
{
    (void)self;
    if (g_update_calls < 16) g_update_streams[g_update_calls] = a->round_stream;
    ++g_update_calls;
    if (g_update_fail_from > 0 && g_update_calls >= g_update_fail_from && g_update_calls < g_update_fail_from + g_update_fail_count)
        return GRZO_ERR_OUT_OF_MEMORY;
    return g_inner.iface->update(g_inner.self, a);
}
static void update_fails(long from, long count)
{
    g_update_calls = 0;
    g_update_fail_from = from;
    g_update_fail_count = count;
}

/* every parameter within a few roundings of the snapshot (in-place MeZO's restore is not
   bitwise), and at least one moved by sigma when `shifted` */
static int near_snapshot(const env *v, const snap *s, int shifted)
{
    int b, far = 0;
    int64_t i;
    for (b = 0; b < NP; b++)
        for (i = 0; i < PR[b] * PC[b]; i++) {
            double d = fabs((double)v->data[b][i] - s->d[b][i]);
            if (d > 0.5 * v->d.sigma) far++;
            else if (d > 4.0 * ldexp(1.0, -24) * (fabs((double)s->d[b][i]) + v->d.sigma)) return 0;
        }
    return shifted ? far > 0 : far == 0;
}

/* A failure left in-place MeZO's blocks shifted, those of `moved` (a bit a block) and no other:
   while the update keeps failing, a plain op refuses and nothing moves; once it works, the op
   restores them first. Which blocks stay shifted depends on where the failure came. */
static void shifted_until_restored(env *v, const snap *s0, unsigned moved)
{
    float x[4] = { 1, 2, 3, 4 }, y[3];
    grzo_rows rows;
    int b;
    memset(&rows, 0, sizeof rows);
    rows.n_rows = 1;
    CHECK(says(v->ctx, "still perturbed"));
    for (b = 0; b < NP; b++) {
        int unmoved = memcmp(v->data[b], s0->d[b], (size_t)(PR[b] * PC[b]) * sizeof(float)) == 0;
        CHECKF(unmoved == !(moved >> b & 1u), "block %d %s", b, unmoved ? "not shifted" : "shifted");
    }
    CHECK(near_snapshot(v, s0, 1));
    CHECK_ST(grzo_linear(v->ctx, v->blk[0], x, y, &rows), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(near_snapshot(v, s0, 1));
    update_fails(0, 0);
    CHECK_OK(grzo_linear(v->ctx, v->blk[0], x, y, &rows));
    CHECK(near_snapshot(v, s0, 0) && grzo_get_step(v->ctx) == s0->step);
}

/* One in-place MeZO step of 2 examples whose passes go through; the step's update calls fail
   from its fail_from-th on (0: none). Returns grzo_step_end's status. */
static grzo_status inplace_step(env *v, long fail_from)
{
    static const float losses[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
    grzo_step_info si;
    grzo_pass_info pi;
    int p;
    update_fails(fail_from, 1000);
    REQUIRE_OK(grzo_step_begin(v->ctx, 2, &si));
    for (p = 0; p < si.n_passes; p++) {
        REQUIRE_OK(grzo_pass_begin(v->ctx, &pi));
        REQUIRE_OK(grzo_pass_end(v->ctx, losses));
    }
    return grzo_step_end(v->ctx, NULL);
}

static void test_inplace_update_fails(void)
{
    grzo_backend_i iface;
    env v;
    snap s0;
    grzo_step_info si;
    grzo_pass_info pi;
    float losses[4] = { 1.0f, 2.0f, 3.0f, 4.0f }, x[4] = { 1, 2, 3, 4 }, y[3];
    grzo_rows rows;
    char path[256];
    int p;
    tu_tmp_path(path, sizeof path, "errors_inplace");
    remove(path);
    wrap_ref(&iface, &v.be);
    iface.update = failing_update;
    update_fails(0, 0);
    env_init_on(&v, GRZO_ESTIMATOR_MEZO_INPLACE, 3, GRZO_NOISE_DEFAULT, 61, NULL);
    take(&v, &s0);
    memset(&rows, 0, sizeof rows);
    rows.n_rows = 1;

    /* pass 0's shift fails at the second block: the first is moved back */
    update_fails(2, 1);
    REQUIRE_OK(grzo_step_begin(v.ctx, 2, &si));
    CHECK_ST(grzo_pass_begin(v.ctx, &pi), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(strstr(grzo_last_error(v.ctx), "parameters restored") != NULL);
    CHECK(g_update_calls == 3);   /* block 0 +, block 1 fails, block 0 back */
    CHECK(near_snapshot(&v, &s0, 0) && grzo_get_step(v.ctx) == 0);

    /* the restore at step end fails at the second block (the passes' moves are calls 1-4), and
       again when step_end retries it */
    CHECK_ST(inplace_step(&v, 6), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(strstr(grzo_last_error(v.ctx), "still perturbed") != NULL);
    CHECK(near_snapshot(&v, &s0, 1) && grzo_get_step(v.ctx) == 0);
    /* while the update fails, each call that reads the parameters refuses, changing nothing */
    CHECK_ST(grzo_checkpoint_save(v.ctx, path), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(access(path, F_OK) != 0);
    CHECK_ST(grzo_linear(v.ctx, v.blk[0], x, y, &rows), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(strstr(grzo_last_error(v.ctx), "grzo_linear: restoring in-place MeZO's parameters") != NULL);
    CHECK_ST(grzo_step_begin(v.ctx, 2, &si), GRZO_ERR_OUT_OF_MEMORY);
    CHECK_ST(grzo_step_abort(v.ctx), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(near_snapshot(&v, &s0, 1));
    /* the update works again: the next reader restores first */
    update_fails(0, 0);
    CHECK_OK(grzo_linear(v.ctx, v.blk[0], x, y, &rows));
    CHECK(near_snapshot(&v, &s0, 0) && grzo_get_step(v.ctx) == 0);
    CHECK_OK(grzo_step_abort(v.ctx));   /* nothing left to restore */
    CHECK(near_snapshot(&v, &s0, 0));
    /* and a step runs from there, its three moves and its update each on their own rounding
       stream (grzo.h: 4, 5, 6, then the update's), block by block */
    CHECK_OK(inplace_step(&v, 0));
    CHECK(grzo_get_step(v.ctx) == 1);
    CHECK(g_update_calls == 8);
    for (p = 0; p < 8 && p < g_update_calls; p++) {
        uint32_t want = p < 6 ? GRZO_STREAM_ROUND_INPLACE + (uint32_t)(p / 2) : 0u;
        CHECKF(g_update_streams[p] == want, "update call %d: round_stream %u, want %u", p, (unsigned)g_update_streams[p], (unsigned)want);
    }

    /* pass 0's shift fails at the second block and moving the first back fails too: the first
       block alone stays shifted */
    take(&v, &s0);
    REQUIRE_OK(grzo_checkpoint_save(v.ctx, path));
    update_fails(2, 1000);
    REQUIRE_OK(grzo_step_begin(v.ctx, 2, &si));
    CHECK_ST(grzo_pass_begin(v.ctx, &pi), GRZO_ERR_OUT_OF_MEMORY);
    shifted_until_restored(&v, &s0, 1u);
    /* pass 1's shift fails at the first block and so does the restore: every block at +sigma */
    update_fails(3, 1000);
    REQUIRE_OK(grzo_step_begin(v.ctx, 2, &si));
    REQUIRE_OK(grzo_pass_begin(v.ctx, &pi));
    REQUIRE_OK(grzo_pass_end(v.ctx, losses));
    CHECK_ST(grzo_pass_begin(v.ctx, &pi), GRZO_ERR_OUT_OF_MEMORY);
    shifted_until_restored(&v, &s0, 3u);
    /* the restore at step end fails at the first block: every block at -sigma */
    CHECK_ST(inplace_step(&v, 5), GRZO_ERR_OUT_OF_MEMORY);
    shifted_until_restored(&v, &s0, 3u);
    /* a checkpoint loaded over blocks left shifted replaces them: nothing is moved back after */
    CHECK_ST(inplace_step(&v, 5), GRZO_ERR_OUT_OF_MEMORY);
    CHECK(near_snapshot(&v, &s0, 1));
    CHECK_OK(grzo_checkpoint_load(v.ctx, path));
    CHECK(same(&v, &s0));
    update_fails(0, 0);
    CHECK_OK(grzo_linear(v.ctx, v.blk[0], x, y, &rows));
    CHECK_OK(grzo_step_abort(v.ctx));
    CHECK(same(&v, &s0) && g_update_calls == 0);
    env_free(&v);
    remove(path);
}

static void test_clear_fails(void)
{
    grzo_backend_i iface;
    grzo_backend be;
    grzo_desc d;
    grzo_ctx *ctx;
    grzo_block e;
    grzo_step_report rep;
    float E[30], E1[30];
    int32_t ids[4] = {1, 2, 1, 2};
    int64_t r, changed_other;
    wrap_ref(&iface, &be);
    iface.upload = failing_upload;
    d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 52, 0.1f, 0.1f);
    ctx = tu_ctx(&d);
    tu_fill_unif(E, 30, 651, -1, 1);
    e = tu_block(ctx, GRZO_BLOCK_EMBEDDING, 10, 3, E, "emb", 0);
    embedding_pass(ctx, e, ids);
    g_fail_upload = 1;
    memset(&rep, 0, sizeof rep);
    CHECK_ST(grzo_step_end(ctx, &rep), GRZO_ERR_BACKEND);
    CHECK(grzo_get_step(ctx) == 1 && rep.step == 0);
    CHECKF(strstr(grzo_last_error(ctx), "applied and counted") != NULL, "last error: %s", grzo_last_error(ctx));
    /* the maps cannot be cleared yet: the next step refuses to begin, nothing changes */
    memcpy(E1, E, sizeof E);
    CHECK_ST(grzo_step_begin(ctx, 2, NULL), GRZO_ERR_BACKEND);
    CHECK(memcmp(E, E1, sizeof E) == 0 && grzo_get_step(ctx) == 1);
    /* once they can, a step over row 5 updates row 5 alone */
    g_fail_upload = 0;
    for (r = 0; r < 4; r++) ids[r] = 5;
    embedding_pass(ctx, e, ids);
    CHECK_OK(grzo_step_end(ctx, NULL));
    changed_other = rows_changed(E, E1, 5);
    CHECKF(changed_other == 0, "%lld rows the step did not gather changed", (long long)changed_other);
    CHECK(memcmp(E + 15, E1 + 15, 3 * sizeof(float)) != 0);
    grzo_destroy(ctx);
    grzo_backend_destroy(&g_inner);
}

/* A refused op marks no row as touched: an embedding with an id out of range, and a linear of
   an embedding (a tied head) that the backend refuses, leave the rows of a step that goes on
   untouched, weight decay included. Nor does a tied head's linear between steps (an
   evaluation's forward): only what a pass reads takes the step's update. */
static grzo_status failing_linear(void *self, const grzo_linear_args *a)
{
    (void)self;
    (void)a;
    return GRZO_ERR_BACKEND;
}
static void test_refused_ops_touch_nothing(void)
{
    int mode;
    /* 0: embedding, 1: tied head, 2: embedding one call a segment, 3: a tied head between steps */
    for (mode = 0; mode < 4; mode++) {
        grzo_backend_i iface;
        grzo_backend be;
        grzo_desc d;
        grzo_ctx *ctx;
        grzo_block e;
        grzo_pass_info pi;
        float E[30], E0[30], y[64], x[12] = {0}, losses[4] = {1.0f, 2.0f, 1.5f, 0.5f};
        int32_t ids[4] = {1, 99, 1, 1};   /* row 1 before the bad id: marked by a backend that checks as it goes */
        grzo_rows rows = {0};
        int64_t r, changed_other;
        wrap_ref(&iface, &be);
        if (mode != 3) iface.linear = failing_linear;
        d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 53, 0.1f, 0.1f);
        d.weight_decay = 0.5f;
        if (mode == 2) d.per_example_ops = 1;   /* row 1's segment runs before the bad id's */
        ctx = tu_ctx(&d);
        tu_fill_unif(E, 30, 652, -1, 1);
        e = tu_block(ctx, GRZO_BLOCK_EMBEDDING, 10, 3, E, "emb", 0);
        memcpy(E0, E, sizeof E);
        rows.n_rows = 4;
        if (mode == 3) CHECK_OK(grzo_linear(ctx, e, x, y, &rows));   /* the head of an evaluation */
        REQUIRE_OK(grzo_step_begin(ctx, 2, NULL));
        REQUIRE_OK(grzo_pass_begin(ctx, &pi));
        CHECK_ST(grzo_perturbed_params(ctx, e, 0, E + 5), GRZO_ERR_INVALID_ARG);   /* over the block's own values */
        if (mode == 0 || mode == 2) {
            CHECK_ST(grzo_embedding(ctx, e, NULL, y, &rows), GRZO_ERR_INVALID_ARG);
            CHECK_ST(grzo_embedding(ctx, e, ids, NULL, &rows), GRZO_ERR_INVALID_ARG);
            CHECK_ST(grzo_embedding(ctx, e, ids, y, &rows), GRZO_ERR_INVALID_ARG);
        } else if (mode == 1) {
            CHECK_ST(grzo_linear(ctx, e, x, y, &rows), GRZO_ERR_BACKEND);   /* the tied head's product, refused */
        }
        /* the first and last rows are ids too (each end of the range is taken) */
        ids[0] = 0; ids[1] = 5; ids[2] = 9; ids[3] = 5;
        CHECK_OK(grzo_embedding(ctx, e, ids, y, &rows));
        CHECK_OK(grzo_pass_end(ctx, losses));
        CHECK_OK(grzo_step_end(ctx, NULL));
        for (changed_other = 0, r = 1; r < 9; r++)
            if (r != 5 && memcmp(E + 3 * r, E0 + 3 * r, 3 * sizeof(float)) != 0) changed_other++;
        CHECKF(changed_other == 0, "mode %d: %lld rows no successful op read changed", mode, (long long)changed_other);
        grzo_destroy(ctx);
        grzo_backend_destroy(&g_inner);
    }
}

/* ---- checkpoints -------------------------------------------------------------------------- */
static void expect_load_fails(env *v, const char *path, const unsigned char *bytes, size_t n, grzo_status want,
                              grzo_status alt, const char *what)
{
    snap s;
    grzo_desc before, after;
    grzo_status st;
    REQUIRE(tu_write_file(path, bytes, n));
    take(v, &s);
    REQUIRE_OK(grzo_get_desc(v->ctx, &before));
    st = grzo_checkpoint_load(v->ctx, path);
    CHECKF(st == want || st == alt, "%s: load returned %d (%s), expected %d (%s)", what, (int)st, grzo_status_str(st),
           (int)want, grzo_status_str(want));
    CHECKF(same(v, &s), "%s: parameters or step changed by a failed load", what);
    REQUIRE_OK(grzo_get_desc(v->ctx, &after));
    CHECKF(before.seed == after.seed && before.lr == after.lr && before.sigma == after.sigma &&
               before.estimator == after.estimator,
           "%s: settings changed by a failed load", what);
    CHECKF(grzo_last_error(v->ctx)[0] != 0, "%s: no error message", what);
}

static void fix_header_sum(unsigned char *f)
{
    tu_put_le64(f + 248, tu_fnv1a64(f, 248));
}

static void test_checkpoints(void)
{
    env a, v;
    grzo_step_report rep;
    char path[256], bad[256];
    unsigned char *file, *buf;
    size_t n, i;
    int s;
    tu_tmp_path(path, sizeof path, "errors_good");
    tu_tmp_path(bad, sizeof bad, "errors_bad");
    env_init(&a, GRZO_ESTIMATOR_GRZO, 41);
    for (s = 0; s < 3; s++) REQUIRE_OK(env_step(&a, 3, &rep));
    REQUIRE_OK(grzo_checkpoint_save(a.ctx, path));
    file = tu_read_file(path, &n);
    REQUIRE(file != NULL && n > 256);
    buf = (unsigned char *)malloc(n + 16);
    REQUIRE(buf != NULL);

    /* a context of the same model with other values and settings */
    env_init(&v, GRZO_ESTIMATOR_GRZO, 42);
    REQUIRE_OK(env_step(&v, 3, &rep));

    CHECK_ST(grzo_checkpoint_load(v.ctx, "/nonexistent-dir/none.ckpt"), GRZO_ERR_IO);
    CHECK_ST(grzo_checkpoint_save(v.ctx, "/nonexistent-dir/x.ckpt"), GRZO_ERR_IO);
    CHECK(grzo_last_error(v.ctx)[0] != 0);

    /* truncations */
    {
        static const size_t cuts[] = { 0, 7, 8, 100, 255, 256, 300, 256 + 88, 256 + 176 + 3 };
        for (i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "truncated to %u bytes", (unsigned)cuts[i]);
            expect_load_fails(&v, bad, file, cuts[i], GRZO_ERR_FORMAT, GRZO_ERR_FORMAT, what);
        }
        expect_load_fails(&v, bad, file, n - 1, GRZO_ERR_FORMAT, GRZO_ERR_FORMAT, "truncated by one byte");
    }
    /* single bit flips all over the file (header fields, padding, block table, data) */
    {
        size_t pos[] = { 0, 7, 8, 12, 17, 25, 33, 41, 49, 53, 57, 61, 65, 69, 73, 81, 85, 89, 120, 200, 247, 248, 255,
                         256, 260, 264, 272, 280, 256 + 30, 256 + 88, n - 1, n - 5, n / 2 + 128 };
        for (i = 0; i < sizeof pos / sizeof pos[0]; i++) {
            char what[64];
            if (pos[i] >= n) continue;
            memcpy(buf, file, n);
            buf[pos[i]] ^= (unsigned char)(1u << (i % 8));
            snprintf(what, sizeof what, "bit flip at byte %u", (unsigned)pos[i]);
            /* a flipped version field may be reported as a version mismatch */
            expect_load_fails(&v, bad, buf, n, GRZO_ERR_FORMAT, pos[i] >= 8 && pos[i] < 12 ? GRZO_ERR_VERSION : GRZO_ERR_FORMAT, what);
        }
    }
    /* wrong magic with a valid header checksum */
    memcpy(buf, file, n);
    memcpy(buf, "GRZOCKPX", 8);
    fix_header_sum(buf);
    expect_load_fails(&v, bad, buf, n, GRZO_ERR_FORMAT, GRZO_ERR_FORMAT, "wrong magic");
    /* an unknown version (3; 1 and 2 are read), consistently written */
    memcpy(buf, file, n);
    tu_put_le32(buf + 8, 3);
    fix_header_sum(buf);
    expect_load_fails(&v, bad, buf, n, GRZO_ERR_VERSION, GRZO_ERR_VERSION, "version 3");
    /* trailing bytes */
    memcpy(buf, file, n);
    buf[n] = 0;
    expect_load_fails(&v, bad, buf, n + 1, GRZO_ERR_FORMAT, GRZO_ERR_FORMAT, "one trailing byte");
    /* bad settings inside a consistent file: sigma < 0, unknown estimator */
    memcpy(buf, file, n);
    {
        float neg = -1.0f;
        uint32_t u;
        memcpy(&u, &neg, 4);
        tu_put_le32(buf + 60, u);
        fix_header_sum(buf);
        expect_load_fails(&v, bad, buf, n, GRZO_ERR_FORMAT, GRZO_ERR_INVALID_ARG, "negative sigma");
        memcpy(buf, file, n);
        tu_put_le32(buf + 48, 99);
        fix_header_sum(buf);
        expect_load_fails(&v, bad, buf, n, GRZO_ERR_FORMAT, GRZO_ERR_INVALID_ARG, "estimator 99");
    }
    /* a file whose data was edited and both checksums recomputed still loads: the checks
       are checksums, not signatures (control for the tests above) */
    memcpy(buf, file, n);
    buf[n - 2] ^= 0x01;
    tu_put_le64(buf + 24, tu_fnv1a64(buf + 256, n - 256));
    fix_header_sum(buf);
    REQUIRE(tu_write_file(bad, buf, n));
    CHECK_OK(grzo_checkpoint_load(v.ctx, bad));
    CHECK(memcmp(v.data[1], a.data[1], 12) == 0 && memcmp(v.data[1], a.data[1], 16) != 0);

    /* other models: transposed shape, other kind, other name, fewer / more blocks */
    {
        int variant;
        for (variant = 0; variant < 5; variant++) {
            if (variant == 2) continue;   /* a renamed block: not specified by the contract */
            grzo_backend be;
            grzo_desc d;
            grzo_ctx *c2;
            float w[12], bias[4], extra[2], w0[12];
            grzo_block blk;
            grzo_status st;
            REQUIRE_OK(grzo_backend_ref_create(&be));
            d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 7, 0.1f, 0.1f);
            c2 = tu_ctx(&d);
            tu_fill_unif(w, 12, 630, -1, 1);
            tu_fill_unif(bias, 4, 631, -1, 1);
            memcpy(w0, w, sizeof w);
            switch (variant) {
            case 0:  /* 4 x 3 instead of 3 x 4 */
                blk = tu_block(c2, GRZO_BLOCK_MATRIX, 4, 3, w, "w", 0);
                blk = tu_block(c2, GRZO_BLOCK_VECTOR, 4, 1, bias, "bias", 0);
                break;
            case 1:  /* embedding instead of matrix */
                blk = tu_block(c2, GRZO_BLOCK_EMBEDDING, 3, 4, w, "w", 0);
                blk = tu_block(c2, GRZO_BLOCK_VECTOR, 4, 1, bias, "bias", 0);
                break;
            case 2:  /* other name */
                blk = tu_block(c2, GRZO_BLOCK_MATRIX, 3, 4, w, "w2", 0);
                blk = tu_block(c2, GRZO_BLOCK_VECTOR, 4, 1, bias, "bias", 0);
                break;
            case 3:  /* one block only */
                blk = tu_block(c2, GRZO_BLOCK_MATRIX, 3, 4, w, "w", 0);
                break;
            default: /* one block more */
                blk = tu_block(c2, GRZO_BLOCK_MATRIX, 3, 4, w, "w", 0);
                blk = tu_block(c2, GRZO_BLOCK_VECTOR, 4, 1, bias, "bias", 0);
                blk = tu_block(c2, GRZO_BLOCK_VECTOR, 2, 1, extra, "extra", 0);
                break;
            }
            (void)blk;
            st = grzo_checkpoint_load(c2, path);
            CHECKF(st == GRZO_ERR_FORMAT, "model variant %d: load returned %d (%s)", variant, (int)st, grzo_status_str(st));
            CHECKF(memcmp(w, w0, sizeof w) == 0, "model variant %d: parameters changed", variant);
            CHECK(grzo_get_step(c2) == 0);
            grzo_destroy(c2);
            grzo_backend_destroy(&be);
        }
    }
    /* control: the good file loads and restores everything */
    REQUIRE(tu_write_file(bad, file, n));
    CHECK_OK(grzo_checkpoint_load(v.ctx, bad));
    CHECK(memcmp(v.data[0], a.data[0], 48) == 0 && memcmp(v.data[1], a.data[1], 16) == 0);
    CHECK(grzo_get_step(v.ctx) == grzo_get_step(a.ctx));
    {
        grzo_desc da, dv;
        REQUIRE_OK(grzo_get_desc(a.ctx, &da));
        REQUIRE_OK(grzo_get_desc(v.ctx, &dv));
        CHECK(da.seed == dv.seed && da.lr == dv.lr && da.sigma == dv.sigma);
    }
    /* saving the same state again gives the same bytes (over an existing file) */
    {
        size_t n2;
        unsigned char *again;
        REQUIRE_OK(grzo_checkpoint_save(a.ctx, bad));
        again = tu_read_file(bad, &n2);
        REQUIRE(again != NULL);
        CHECK(n2 == n && memcmp(again, file, n) == 0);   /* same state -> same bytes */
        free(again);
    }
    remove(path);
    remove(bad);
    free(file);
    free(buf);
    env_free(&a);
    env_free(&v);
}

/* ---- settings replaced by a checkpoint ----------------------------------------------------
   A load replaces the estimator, the FZOO probe count and the noise, which size the step
   buffers. A context that stepped under other settings must take its next steps like a
   fresh context loaded from the same file, and write nothing past its buffers: the guarded
   allocator below keeps a red zone after each block and counts the blocks whose red zone
   was written when they are freed (an ASan build sees the unguarded run's overflow). */
#define GUARD_ZONE 8192
typedef struct guard { long overruns; } guard;

static void *guard_alloc(size_t bytes, void *user)
{
    unsigned char *p = (unsigned char *)malloc(16 + bytes + GUARD_ZONE);
    (void)user;
    if (!p) return NULL;
    memcpy(p, &bytes, sizeof bytes);
    memset(p + 16 + bytes, 0xA5, GUARD_ZONE);
    return p + 16;
}

static void guard_free(void *ptr, void *user)
{
    unsigned char *p = (unsigned char *)ptr - 16;
    size_t bytes, i;
    memcpy(&bytes, p, sizeof bytes);
    for (i = 0; i < GUARD_ZONE; i++)
        if (p[16 + bytes + i] != 0xA5) { ((guard *)user)->overruns++; break; }
    free(p);
}

typedef struct settings { grzo_estimator est; int32_t probes; grzo_noise_dist noise; } settings;

static int same_report(const grzo_step_report *a, const grzo_step_report *b)
{
    return a->step == b->step && a->lr == b->lr && a->loss == b->loss && a->delta_std == b->delta_std &&
           a->coeff_rms == b->coeff_rms && a->degenerate == b->degenerate && a->degenerate_total == b->degenerate_total;
}

static int same_params(const env *a, const env *b)
{
    int k;
    for (k = 0; k < NP; k++)
        if (memcmp(a->data[k], b->data[k], (size_t)(PR[k] * PC[k]) * sizeof(float)) != 0) return 0;
    return 1;
}

/* `before` steps once with B examples, loads a checkpoint written under `saved`, then takes
   steps of B, 1 and B + 2 examples beside a fresh context loaded from the same file and
   beside the run that wrote it. */
static void settings_change(settings before, int64_t B, settings saved, int guarded, const char *path)
{
    const int64_t next[3] = { B, 1, B + 2 };
    env src, v, fresh;
    guard g = { 0 };
    grzo_allocator al;
    grzo_step_report rep, rep_src, rep_fresh;
    grzo_desc d;
    int k;
    al.alloc_fn = guard_alloc;
    al.free_fn = guard_free;
    al.user_data = &g;
    env_init_with(&src, saved.est, saved.probes, saved.noise, 41, NULL);
    for (k = 0; k < 2; k++) REQUIRE_OK(env_step(&src, 3, &rep));
    REQUIRE_OK(grzo_checkpoint_save(src.ctx, path));
    env_init_with(&v, before.est, before.probes, before.noise, 42, guarded ? &al : NULL);
    env_init_with(&fresh, before.est, before.probes, before.noise, 43, NULL);
    REQUIRE_OK(env_step(&v, B, &rep));
    CHECK_OK(grzo_checkpoint_load(v.ctx, path));
    CHECK_OK(grzo_checkpoint_load(fresh.ctx, path));
    REQUIRE_OK(grzo_get_desc(v.ctx, &d));
    CHECK(d.estimator == saved.est && d.fzoo_probes == saved.probes && d.noise == saved.noise);
    for (k = 0; k < 3; k++) {
        CHECK_OK(env_step(&v, next[k], &rep));
        CHECK_OK(env_step(&fresh, next[k], &rep_fresh));
        CHECK_OK(env_step(&src, next[k], &rep_src));
        CHECKF(same_report(&rep, &rep_fresh) && same_report(&rep, &rep_src) && same_params(&v, &fresh) &&
                   same_params(&v, &src),
               "estimator %d (%d probes) -> %d (%d probes), noise %d -> %d, B %lld: step %d after the load differs "
               "from a fresh context's or the saving run's",
               (int)before.est, before.probes, (int)saved.est, saved.probes, (int)before.noise, (int)saved.noise,
               (long long)B, k);
    }
    env_free(&v);
    CHECKF(g.overruns == 0, "estimator %d (%d probes) -> %d (%d probes), B %lld: %ld buffer(s) written past their end",
           (int)before.est, before.probes, (int)saved.est, saved.probes, (long long)B, g.overruns);
    env_free(&fresh);
    env_free(&src);
}

static void test_checkpoint_settings(void)
{
    static const struct { settings before; int64_t B; settings saved; } cases[] = {
        /* the review's reproducer: 1 probe, B = 2, then a 64-probe checkpoint */
        { { GRZO_ESTIMATOR_FZOO, 1, GRZO_NOISE_RADEMACHER }, 2, { GRZO_ESTIMATOR_FZOO, 64, GRZO_NOISE_RADEMACHER } },
        { { GRZO_ESTIMATOR_GRZO, 3, GRZO_NOISE_RADEMACHER }, 1, { GRZO_ESTIMATOR_FZOO, 64, GRZO_NOISE_RADEMACHER } },
        { { GRZO_ESTIMATOR_MEZO, 3, GRZO_NOISE_RADEMACHER }, 3, { GRZO_ESTIMATOR_FZOO, 16, GRZO_NOISE_GAUSSIAN } },
        { { GRZO_ESTIMATOR_FZOO, 64, GRZO_NOISE_RADEMACHER }, 2, { GRZO_ESTIMATOR_GRZO, 3, GRZO_NOISE_RADEMACHER } },
        { { GRZO_ESTIMATOR_MEZO, 3, GRZO_NOISE_RADEMACHER }, 2, { GRZO_ESTIMATOR_GRZO, 3, GRZO_NOISE_GAUSSIAN } },
        { { GRZO_ESTIMATOR_SHARED, 3, GRZO_NOISE_GAUSSIAN }, 4, { GRZO_ESTIMATOR_MEZO, 3, GRZO_NOISE_RADEMACHER } },
        { { GRZO_ESTIMATOR_FZOO, 2, GRZO_NOISE_GAUSSIAN }, 3, { GRZO_ESTIMATOR_CANONICAL, 3, GRZO_NOISE_RADEMACHER } },
        { { GRZO_ESTIMATOR_FZOO, 8, GRZO_NOISE_RADEMACHER }, 1, { GRZO_ESTIMATOR_FZOO, 9, GRZO_NOISE_RADEMACHER } },
    };
    char path[256];
    size_t i;
    int guarded;
    tu_tmp_path(path, sizeof path, "errors_settings");
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (guarded = 1; guarded >= 0; guarded--) settings_change(cases[i].before, cases[i].B, cases[i].saved, guarded, path);
    remove(path);
}

/* ---- where a checkpoint is written before its rename ---------------------------------------------
   Saving opened "<path>.tmp" with fopen, which follows a symbolic link: in a shared folder
   such as /tmp anyone could put a link at that predictable name and have the save overwrite
   the file the link points to. Now whatever is at that name is removed and the temporary
   created exclusively. Also which folder is synced after the rename. */
static void test_checkpoint_temp(void)
{
    static const unsigned char precious[8] = { 'p', 'r', 'e', 'c', 'i', 'o', 'u', 's' };
    env a, b;
    grzo_step_report rep;
    snap sa;
    char path[256], victim[300], tmp[300];
    unsigned char *got, *saved;
    size_t n, n_saved;
    struct stat st;
    int s;
    tu_tmp_path(path, sizeof path, "errors_temp");
    snprintf(victim, sizeof victim, "%s.victim", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    REQUIRE(tu_write_file(victim, precious, sizeof precious));
    REQUIRE(symlink(victim, tmp) == 0);

    env_init(&a, GRZO_ESTIMATOR_GRZO, 41);
    for (s = 0; s < 2; s++) REQUIRE_OK(env_step(&a, 3, &rep));
    REQUIRE_OK(grzo_checkpoint_save(a.ctx, path));
    got = tu_read_file(victim, &n);
    CHECK(got && n == sizeof precious && memcmp(got, precious, n) == 0);   /* not written through the link */
    free(got);
    CHECK(lstat(tmp, &st) != 0);                                          /* renamed into place */
    /* what was saved is the context's state */
    env_init(&b, GRZO_ESTIMATOR_GRZO, 42);
    take(&a, &sa);
    REQUIRE_OK(grzo_checkpoint_load(b.ctx, path));
    CHECK(same(&b, &sa));
    env_free(&b);

    /* a stale temporary (a killed save's) is replaced */
    REQUIRE(tu_write_file(tmp, precious, sizeof precious));
    REQUIRE_OK(env_step(&a, 3, &rep));
    REQUIRE_OK(grzo_checkpoint_save(a.ctx, path));
    CHECK(lstat(tmp, &st) != 0);
    saved = tu_read_file(path, &n_saved);
    REQUIRE(saved != NULL);
    /* a folder at the temporary's name: the save fails, says why, and the file is intact */
    REQUIRE(mkdir(tmp, 0700) == 0);
    REQUIRE_OK(env_step(&a, 3, &rep));
    CHECK_ST(grzo_checkpoint_save(a.ctx, path), GRZO_ERR_IO);
    CHECK(strstr(grzo_last_error(a.ctx), tmp) != NULL);
    got = tu_read_file(path, &n);
    CHECK(got && n == n_saved && memcmp(got, saved, n) == 0);
    free(got);
    free(saved);
    rmdir(tmp);
    /* the folder synced after the rename: the path up to its last slash, without the slashes
       that end it; "." for a bare name and "/" for a file at the root */
    {
        static const char *const paths[][2] = { { "dir/x.ckpt", "dir" }, { "dir//x.ckpt", "dir" }, { "/x.ckpt", "/" },
                                                { "//x.ckpt", "/" }, { "x.ckpt", "." }, { "/a/b//c", "/a/b" } };
        char folder[32];
        size_t k;
        for (k = 0; k < sizeof paths / sizeof paths[0]; k++) {
            grzo__sync_folder(paths[k][0], folder);
            CHECK(strcmp(folder, paths[k][1]) == 0);
        }
    }
    /* a folder that does not exist: the reason, not just "I/O error" */
    CHECK_ST(grzo_checkpoint_save(a.ctx, "/nonexistent-dir/x.ckpt"), GRZO_ERR_IO);
    CHECK(strstr(grzo_last_error(a.ctx), "/nonexistent-dir/x.ckpt") != NULL);
    CHECK(strstr(grzo_last_error(a.ctx), strerror(ENOENT)) != NULL);
    env_free(&a);
    remove(path);
    remove(victim);
}

/* ---- blocks larger than a checkpoint's I/O chunk -------------------------------------------------
   Save and load move a block's bytes in chunks of 64 KiB: a block of 150 x 150 floats (one whole
   chunk and part of another) followed by a small one comes back bit for bit, and a file cut in
   the large block's second chunk is refused. Every other test's blocks fit one chunk. */
static void test_checkpoint_chunks(void)
{
    enum { R = 150, C = 150, S = 5 };
    grzo_backend be;
    grzo_desc d;
    grzo_ctx *a, *b;
    float *wa, *va, *wb, *vb;
    unsigned char *file;
    char path[256], cut[256];
    size_t n;
    float *before;
    REQUIRE(R * C * sizeof(float) > GRZO__CKPT_CHUNK && R * C * sizeof(float) < 2 * GRZO__CKPT_CHUNK);
    REQUIRE_OK(tu_backend(TU_REF, 1, &be));
    tu_require_host_memory(&be, "test_errors");
    d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 7, 0.05f, 0.0625f);
    a = tu_ctx(&d);
    b = tu_ctx(&d);
    wa = (float *)tu_alloc(&be, R * C * sizeof(float));
    wb = (float *)tu_alloc(&be, R * C * sizeof(float));
    va = (float *)tu_alloc(&be, S * sizeof(float));
    vb = (float *)tu_alloc(&be, S * sizeof(float));
    tu_fill_unif(wa, R * C, 701, -1, 1);
    tu_fill_unif(va, S, 702, -1, 1);
    tu_fill_unif(wb, R * C, 703, -1, 1);
    tu_fill_unif(vb, S, 704, -1, 1);
    tu_block(a, GRZO_BLOCK_MATRIX, R, C, wa, "big", 0);
    tu_block(a, GRZO_BLOCK_VECTOR, S, 1, va, "small", 0);
    tu_block(b, GRZO_BLOCK_MATRIX, R, C, wb, "big", 0);
    tu_block(b, GRZO_BLOCK_VECTOR, S, 1, vb, "small", 0);
    tu_tmp_path(path, sizeof path, "errors_chunks");
    tu_tmp_path(cut, sizeof cut, "errors_chunks_cut");
    REQUIRE_OK(grzo_checkpoint_save(a, path));
    file = tu_read_file(path, &n);
    REQUIRE(file != NULL && n > (size_t)(R * C + S) * sizeof(float));
    /* the file ends with the blocks' data: cut 100 bytes before the small block's, in the big
       block's second chunk */
    REQUIRE(tu_write_file(cut, file, n - S * sizeof(float) - 100));
    before = (float *)malloc(R * C * sizeof(float));
    REQUIRE(before != NULL);
    memcpy(before, wb, R * C * sizeof(float));
    CHECK_ST(grzo_checkpoint_load(b, cut), GRZO_ERR_FORMAT);
    CHECK(memcmp(before, wb, R * C * sizeof(float)) == 0);   /* a refused load changes nothing */
    free(before);
    REQUIRE_OK(grzo_checkpoint_load(b, path));
    CHECK(memcmp(wa, wb, R * C * sizeof(float)) == 0);
    CHECK(memcmp(va, vb, S * sizeof(float)) == 0);
    free(file);
    remove(path);
    remove(cut);
    grzo_destroy(a);
    grzo_destroy(b);
    grzo_backend_free(&be, wa);
    grzo_backend_free(&be, wb);
    grzo_backend_free(&be, va);
    grzo_backend_free(&be, vb);
    grzo_backend_destroy(&be);
}

/* ---- a save whose reads of the parameters fail or disagree ------------------------------------
   A save reads the parameters twice, through the backend's download: for the payload's hash,
   then into the file. A failing download (the first read or the second) says it was reading
   the parameters; parameters that change between the reads (another thread wrote them) fail
   the save and say so. Either way the previous file is intact and no temporary is left. */
static long g_download_calls, g_download_fail_at, g_download_change_from;
static grzo_status hooked_download(void *self, void *dst, const void *src, size_t n)
{
    grzo_status s;
    (void)self;
    ++g_download_calls;
    if (g_download_calls == g_download_fail_at) return GRZO_ERR_BACKEND;
    s = g_inner.iface->download(g_inner.self, dst, src, n);
    if (s == GRZO_OK && g_download_change_from > 0 && g_download_calls >= g_download_change_from && n > 0)
        ((unsigned char *)dst)[0] ^= 1u;
    return s;
}

static void test_checkpoint_read_back(void)
{
    static const struct { long fail_at, change_from; const char *msg; } cases[] = {   /* each GRZO_ERR_BACKEND */
        { 1, 0, "reading the parameters" },        /* the hash's read fails */
        { NP + 1, 0, "reading the parameters" },   /* the file's */
        { 0, NP + 1, "the parameters changed while they were read" },
    };
    grzo_backend_i iface;
    env v;
    grzo_step_report rep;
    char path[256], tmp[300];
    unsigned char *saved, *got;
    size_t n_saved, n;
    struct stat st;
    size_t c;
    tu_tmp_path(path, sizeof path, "errors_read_back");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    wrap_ref(&iface, &v.be);
    iface.download = hooked_download;
    env_init_on(&v, GRZO_ESTIMATOR_GRZO, 3, GRZO_NOISE_DEFAULT, 43, NULL);
    g_download_fail_at = g_download_change_from = 0;
    REQUIRE_OK(grzo_checkpoint_save(v.ctx, path));
    saved = tu_read_file(path, &n_saved);
    REQUIRE(saved != NULL);
    REQUIRE_OK(env_step(&v, 3, &rep));
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        g_download_calls = 0;
        g_download_fail_at = cases[c].fail_at;
        g_download_change_from = cases[c].change_from;
        CHECK_ST(grzo_checkpoint_save(v.ctx, path), GRZO_ERR_BACKEND);
        CHECKF(g_download_calls >= (cases[c].fail_at ? cases[c].fail_at : 2 * NP), "case %zu: %ld downloads", c, g_download_calls);
        CHECK(says(v.ctx, cases[c].msg));
        CHECK(says(v.ctx, path));
        got = tu_read_file(path, &n);
        CHECKF(got && n == n_saved && memcmp(got, saved, n) == 0, "case %zu: the previous file changed", c);
        free(got);
        CHECKF(lstat(tmp, &st) != 0, "case %zu: the temporary was left", c);
    }
    /* and with the reads agreeing again, the save goes through */
    g_download_fail_at = g_download_change_from = 0;
    CHECK_OK(grzo_checkpoint_save(v.ctx, path));
    got = tu_read_file(path, &n);
    CHECK(got && (n != n_saved || memcmp(got, saved, n) != 0));
    free(got);
    free(saved);
    env_free(&v);
    remove(path);
}

/* ---- every allocation failing in turn ---------------------------------------------------------
   The N-th call of the context's allocator fails, for N = 1, 2, ... until a run needs fewer
   calls: create, 20 blocks (the block table grows past 16), two steps with the sparse
   variant (its thresholds), a checkpoint save. Each call either succeeds or returns
   GRZO_ERR_OUT_OF_MEMORY; a failed step changes no parameter; nothing is left allocated. */
typedef struct countdown { long calls, fail_at, live; } countdown;
static void *countdown_alloc(size_t bytes, void *user)
{
    countdown *c = (countdown *)user;
    void *p;
    if (++c->calls == c->fail_at) return NULL;
    p = malloc(bytes);
    if (p) c->live++;
    return p;
}
static void countdown_free(void *p, void *user)
{
    ((countdown *)user)->live--;
    free(p);
}
#define OOM_BLOCKS 20
static double oom_loss(int64_t e, float *const *p, void *ud)
{
    double l = 0;
    int b;
    (void)ud;
    for (b = 0; b < OOM_BLOCKS; b++) l += (double)p[b][0] * (double)p[b][1] * (double)(e + 1) + (double)p[b][2];
    return l;
}
static void test_allocation_failures(void)
{
    char path[256];
    long n;
    int completed = 0;
    tu_tmp_path(path, sizeof path, "errors_oom");
    for (n = 1; n < 400 && !completed; n++) {
        countdown c = { 0, 0, 0 };
        grzo_backend be;
        grzo_desc d;
        grzo_ctx *ctx = NULL;
        grzo_block blk[OOM_BLOCKS];
        float data[OOM_BLOCKS][6], before[OOM_BLOCKS][6], scratch_store[OOM_BLOCKS][6], *scratch[OOM_BLOCKS];
        grzo_status st;
        int b, k, ok = 1;
        c.fail_at = n;
        REQUIRE_OK(grzo_backend_ref_create(&be));
        d = tu_desc(&be, GRZO_ESTIMATOR_GRZO, 61, 0.05f, 0.01f);
        d.sparse_density = 0.5f;
        d.allocator.alloc_fn = countdown_alloc;
        d.allocator.free_fn = countdown_free;
        d.allocator.user_data = &c;
        st = grzo_create(&d, &ctx);
        CHECKF(st == GRZO_OK || st == GRZO_ERR_OUT_OF_MEMORY, "allocation %ld failing: grzo_create returned %d", n, (int)st);
        if (st != GRZO_OK) ok = 0;
        for (b = 0; b < OOM_BLOCKS && ok; b++) {
            grzo_block_desc bd;
            tu_fill_unif(data[b], 6, 700 + (uint32_t)b, -1, 1);
            memset(&bd, 0, sizeof bd);
            bd.kind = GRZO_BLOCK_MATRIX; bd.rows = 2; bd.cols = 3; bd.data = data[b];
            st = grzo_block_add(ctx, &bd, &blk[b]);
            CHECKF(st == GRZO_OK || st == GRZO_ERR_OUT_OF_MEMORY, "allocation %ld failing: block %d returned %d", n, b, (int)st);
            if (st != GRZO_OK) ok = 0;
            scratch[b] = scratch_store[b];
        }
        for (k = 0; k < 2 && ok; k++) {
            memcpy(before, data, sizeof data);
            st = tu_bb_step(ctx, OOM_BLOCKS, blk, scratch, 3, oom_loss, 1.0, NULL, NULL, NULL);
            CHECKF(st == GRZO_OK || st == GRZO_ERR_OUT_OF_MEMORY, "allocation %ld failing: step %d returned %d", n, k, (int)st);
            if (st != GRZO_OK) {
                CHECKF(memcmp(before, data, sizeof data) == 0, "allocation %ld failing: a failed step changed parameters", n);
                (void)grzo_step_abort(ctx);   /* whatever state the failure left (idle: refused) */
                ok = 0;
            }
        }
        if (ok) {
            st = grzo_checkpoint_save(ctx, path);
            CHECKF(st == GRZO_OK || st == GRZO_ERR_OUT_OF_MEMORY, "allocation %ld failing: save returned %d", n, (int)st);
            if (st != GRZO_OK) ok = 0;
        }
        grzo_destroy(ctx);
        grzo_backend_destroy(&be);
        CHECKF(c.live == 0, "allocation %ld failing: %ld blocks still allocated", n, c.live);
        completed = ok && c.calls < n;   /* the whole run needed fewer calls: every one has failed once */
    }
    CHECKF(completed, "the run still reached a failing allocation after %ld", n);
    remove(path);
}

/* ---- grzo_group_normalize at the ends of the double range -------------------------------------
   Finite deltas near +-DBL_MAX used to overflow the sum of squares (a = 0 with GRZO_OK), and
   deltas near 1e-200 underflowed it (a = 0 again). a is scale-invariant (eps 0), so every
   scaled copy of a group must give the unscaled group's a. */
static double population_var(const double *a, int n)
{
    double mean = 0, var = 0;
    int i;
    for (i = 0; i < n; i++) mean += a[i] / n;
    for (i = 0; i < n; i++) var += (a[i] - mean) * (a[i] - mean) / n;
    return var;
}

static void test_normalize_range(void)
{
    static const double delta[5] = { 0.3, -0.1, 0.25, 0.0, -0.45 };
    static const int exps[] = { -1000, -660, -520, 0, 520, 1000, 1022 };
    double ref[5], x[5], a[5];
    int32_t deg = -1;
    size_t k;
    int i;
    CHECK_OK(grzo_group_normalize(delta, 5, 0.0, ref, NULL));
    for (k = 0; k < sizeof exps / sizeof exps[0]; k++) {
        for (i = 0; i < 5; i++) x[i] = ldexp(delta[i], exps[k]);
        CHECK_OK(grzo_group_normalize(x, 5, 0.0, a, &deg));
        CHECK(deg == 0);
        for (i = 0; i < 5; i++) CHECKF(a[i] == ref[i], "delta * 2^%d: a[%d] = %g, unscaled %g", exps[k], i, a[i], ref[i]);
    }
    /* the review's input: finite, near 1e308, with the default eps */
    {
        double big[3] = { 1e308, -1e308, 5e307 };
        CHECK_OK(grzo_group_normalize(big, 3, 1e-8, a, &deg));
        CHECK(deg == 0);
        for (i = 0; i < 3; i++) CHECKF(isfinite(a[i]) && (a[i] > 0) == (big[i] > 0) && a[i] != 0, "a[%d] = %g", i, a[i]);
        CHECK_NEAR(population_var(a, 3), 1.0, 1e-12);
    }
    /* +-DBL_MAX: std DBL_MAX, a = +-1; all DBL_MAX: the guard, a = 1 */
    {
        double m[3] = { DBL_MAX, -DBL_MAX, DBL_MAX };
        CHECK_OK(grzo_group_normalize(m, 2, 0.0, a, &deg));
        CHECK(deg == 0 && a[0] == 1.0 && a[1] == -1.0);
        m[1] = DBL_MAX;
        CHECK_OK(grzo_group_normalize(m, 3, 1e-8, a, &deg));
        CHECK(deg == 1);
        for (i = 0; i < 3; i++) CHECK_NEAR(a[i], 1.0, 1e-12);
    }
    /* tiny deltas whose squares underflow */
    {
        double t[2] = { 1e-200, -1e-200 };
        CHECK_OK(grzo_group_normalize(t, 2, 0.0, a, &deg));
        CHECK(deg == 0 && a[0] == 1.0 && a[1] == -1.0);
    }
}

int main(int argc, char **argv)
{
    tu_args(argc, argv);
    if (tu_case("nonfinite")) test_nonfinite();
    if (tu_case("step_callback")) test_step_callback();
    if (tu_case("touched_after_abort")) test_touched_after_abort();
    if (tu_case("degenerate")) test_degenerate();
    if (tu_case("invalid_args")) test_invalid_args();
    if (tu_case("state")) test_state();
    if (tu_case("backend_version")) test_backend_version();
    if (tu_case("backend_entries")) test_backend_entries();
    if (tu_case("overflowing_settings")) test_overflowing_settings();
    if (tu_case("clear_fails")) test_clear_fails();
    if (tu_case("refused_ops_touch_nothing")) test_refused_ops_touch_nothing();
    if (tu_case("checkpoints")) test_checkpoints();
    if (tu_case("checkpoint_chunks")) test_checkpoint_chunks();
    if (tu_case("per_example_ops")) test_per_example_ops();
    if (tu_case("checkpoint_settings")) test_checkpoint_settings();
    if (tu_case("checkpoint_temp")) test_checkpoint_temp();
    if (tu_case("checkpoint_read_back")) test_checkpoint_read_back();
    if (tu_case("allocation_failures")) test_allocation_failures();
    if (tu_case("inplace_update_fails")) test_inplace_update_fails();
    if (tu_case("normalize_range")) test_normalize_range();
    return tu_finish("test_errors");
}
