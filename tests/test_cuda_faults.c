/* test_cuda_faults.c - the CUDA backend when the device fails: each fallible CUDA runtime or
   cuBLAS call failing in turn, under the emulator (tests/cuda_emu, emu_fault.h).

   The scenario, through grzo.h: create the backend; allocate and upload a tiny model
   (embedding -> linear -> gain, as test_cuda.c's run_tiny); two steps each of GRZO, MeZO and
   in-place MeZO (one context after another on the same parameters), a checkpoint saved and
   loaded back between MeZO's steps; the parameters downloaded; everything freed and the
   backend destroyed. It runs once clean, counting the calls T, then again with call N failing
   for every N = 1..T (plain errors: emu_fault.h), and with a sticky error (every call after
   it fails too) at the first call of each call site; then, with bf16 weights in fast math
   (cublasGemmEx, the 16-bit kernels, stochastic rounding; GRZO and MeZO), the first call of
   each site failing; then in-place MeZO's calls failing two and three in a row (a restore
   that fails twice: parameters perturbed on record until a later call restores them). Each
   run must:
     - get a non-OK status with a message from the call that met the failure (the backend's
       create fills its error buffer) that says the device failed (cuda, CUDA, cuBLAS or
       device), never a crash or a sanitizer or emulator report; one plain failure of a call
       that allocates (memory, pinned memory, a stream, an event, a cuBLAS handle) is
       GRZO_ERR_OUT_OF_MEMORY and says "out of memory";
     - plain errors: take a failed step again after grzo_step_abort (or finish a failed
       update with grzo_step_end again), save or load a failed checkpoint again, and end with
       the clean run's parameters bit for bit (in-place MeZO in f32, whose abort restores by a
       rounded opposite shift: within 2 % of sigma, as test_cpu_oom.c); a failed save leaves
       no file and no temporary;
     - sticky errors: every later call fails cleanly too (the backend refuses work);
     - leave no device memory, pinned memory, stream, event or cuBLAS handle once the
       backend is destroyed.
   usage: test_cuda_faults WORK_DIR */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cuda.h"
#include "emu_fault.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fails;
static long checks;
#define CHECK(c, ...) EMU_SWEEP_CHECK(fails, checks, c, __VA_ARGS__)

enum { TV = 23, TD = 16, TO = 9, TB = 4, TT = 3, STEPS = 2, N_EST = 3 };
#define SIGMA 1e-2f
static const grzo_estimator ESTS[N_EST] = {GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_MEZO_INPLACE};
static const int64_t ROWS[3] = {TV, TO, TO}, COLS[3] = {TD, TD, 1};
#define N_PARAMS (TV * TD + TO * TD + TO)

static char ckpt[4096];   /* faults.grzo, in WORK_DIR */
/* the configuration swept: f32 weights in pedantic math with the three estimators, then bf16
   weights in fast math (cublasGemmEx, the 16-bit kernels, stochastic rounding) with GRZO and
   MeZO (in-place MeZO's bf16 restore is not bitwise, and a retried step's would differ) */
static grzo_dtype cfg_dtype = GRZO_DTYPE_F32;
static grzo_cuda_math cfg_math = GRZO_CUDA_MATH_PEDANTIC;
static int cfg_n_est = N_EST;
static uint16_t to_bf16(float f) { uint32_t b; memcpy(&b, &f, 4); b += 0x7FFFu + ((b >> 16) & 1u); return (uint16_t)(b >> 16); }

typedef struct model {
    grzo_backend be;
    int have_be;
    void *p[3], *ids, *x, *h, *y;
    float hy[2 * TB * TT * TO];
} model;

typedef struct outcome {
    float params[N_PARAMS];
    int have_params;
    long failed_at;          /* the call that failed (0: none reached) */
    const char *stage;       /* where the failure showed */
    long inplace_from;       /* calls made before in-place MeZO's context */
} outcome;

static int sticky_run;       /* this run's failure is sticky */
static long fail_count = 1;  /* calls failing in a row from the armed one (plain) */
static long still_perturbed; /* failed steps that left in-place MeZO's parameters perturbed */
static long last_calls, last_sites[4096], last_n_sites;   /* of the last run, before it disarms */
static char last_failed_name[64];

static const char *be_error(const model *m) { return m->have_be ? m->be.iface->last_error(m->be.self) : ""; }

static grzo_status forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user) {
    model *m = (model *)user;
    grzo_block e = {1}, w = {2}, g = {3};
    int32_t ids[2 * TB * TT];
    int64_t n = pi->n_segments * TT, c, t, j;
    grzo_rows rows;
    grzo_status s;
    memset(&rows, 0, sizeof rows);
    rows.n_rows = n;
    for (c = 0; c < pi->n_segments; c++)
        for (t = 0; t < TT; t++) ids[c * TT + t] = (int32_t)((pi->example[c] * 7 + t * 3) % TV);
    if ((s = grzo_backend_upload(&m->be, m->ids, ids, sizeof(int32_t) * (size_t)n)) != GRZO_OK) return s;
    if ((s = grzo_embedding(ctx, e, (const int32_t *)m->ids, (float *)m->x, &rows)) != GRZO_OK) return s;
    if ((s = grzo_linear(ctx, w, (const float *)m->x, (float *)m->h, &rows)) != GRZO_OK) return s;
    if ((s = grzo_vector(ctx, g, GRZO_VECTOR_MUL, (const float *)m->h, (float *)m->y, &rows)) != GRZO_OK) return s;
    if ((s = grzo_backend_download(&m->be, m->hy, m->y, sizeof(float) * (size_t)(n * TO))) != GRZO_OK) return s;
    for (c = 0; c < pi->n_segments; c++) {
        double l = 0;
        for (t = 0; t < TT; t++)
            for (j = 0; j < TO; j++) l += pow(m->hy[(c * TT + t) * TO + j] - 0.1 * (double)j, 2);
        losses[c] = (float)l;
    }
    return GRZO_OK;
}

/* A failed call's status and message: a status that says the device failed, and words; out
   of memory (a plain failure of an allocating call) as GRZO_ERR_OUT_OF_MEMORY, in words too.
   That holds for one failing call only: with calls failing in a row, what a step reports may
   come from a later one (its retry met the next failure), while the run is named by the first. */
static void check_failure(grzo_status s, const char *msg, const char *what) {
    if (fail_count == 1 && emu_fault_failed_out_of_memory())
        CHECK(s == GRZO_ERR_OUT_OF_MEMORY && msg && strstr(msg, "out of memory"),
              "call %ld (%s) fails: %s returned %s (%s), not out of memory", emu_fault_failed(), emu_fault_failed_name(), what,
              grzo_status_str(s), msg ? msg : "");
    CHECK(s == GRZO_ERR_OUT_OF_MEMORY || s == GRZO_ERR_BACKEND, "call %ld (%s) fails: %s returned %s (%s)", emu_fault_failed(),
          emu_fault_failed_name(), what, grzo_status_str(s), msg);
    CHECK(msg && msg[0], "call %ld (%s) fails: %s gave no message", emu_fault_failed(), emu_fault_failed_name(), what);
    /* and the message says that the device failed (a CUDA error's name, cuBLAS, the device) */
    CHECK(msg && (strstr(msg, "cuda") || strstr(msg, "CUDA") || strstr(msg, "cuBLAS") || strstr(msg, "device")),
          "call %ld (%s) fails: %s's message does not say the device failed: %s", emu_fault_failed(), emu_fault_failed_name(),
          what, msg ? msg : "");
}

/* One step by its parts; a failed update is finished by grzo_step_end again (at most 3
   tries: a plain error fails one call only). *msg: the failure's message (the backend's when
   the forward's own upload or download failed, else the context's). */
static grzo_status one_step(grzo_ctx *ctx, model *m, const char **msg) {
    grzo_step_info si;
    grzo_status s;
    int32_t p;
    int tries = 0;
    if ((s = grzo_step_begin(ctx, TB, &si)) != GRZO_OK) {
        *msg = grzo_last_error(ctx);
        return s;
    }
    for (p = 0; p < si.n_passes; p++) {
        grzo_pass_info pi;
        float losses[2 * TB];
        *msg = grzo_last_error(ctx);
        if ((s = grzo_pass_begin(ctx, &pi)) == GRZO_OK) {
            s = forward(ctx, &pi, losses, m);
            if (s != GRZO_OK) *msg = be_error(m);   /* the backend says what its op met */
        }
        if (s == GRZO_OK) s = grzo_pass_end(ctx, losses);
        if (s != GRZO_OK) return s;
    }
    *msg = grzo_last_error(ctx);
    s = grzo_step_end(ctx, NULL);
    while (s != GRZO_OK && !sticky_run && strstr(grzo_last_error(ctx), "grzo_step_end again finishes it") && tries++ < 3)
        s = grzo_step_end(ctx, NULL);
    return s;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The scenario with call fail_at failing (0: none). */
static void run_once(long fail_at, int sticky, outcome *o) {
    model m;
    char why[256] = "", tmp[4200];
    grzo_cuda_desc cd;
    grzo_status s;
    grzo_ctx *ctx = NULL;
    float init[N_PARAMS];
    uint16_t init16[N_PARAMS];
    size_t es = cfg_dtype == GRZO_DTYPE_F32 ? 4 : 2;   /* bytes per weight */
    int e, b, step, tries;
    size_t off;
    memset(&m, 0, sizeof m);
    memset(o, 0, sizeof *o);
    o->stage = "none";
    for (off = 0; off < N_PARAMS; off++) {
        init[off] = (float)grzo_uniform_at(99, 0, GRZO_USER_BLOCK, 3, (uint64_t)off) - 0.5f;
        init16[off] = to_bf16(init[off]);
    }
    remove(ckpt);
    snprintf(tmp, sizeof tmp, "%s.tmp", ckpt);
    sticky_run = sticky;
    long reports0 = emu_report_count();
    emu_fault_arm_count(fail_at, fail_count, sticky);

    memset(&cd, 0, sizeof cd);
    cd.error = why;
    cd.error_size = sizeof why;
    cd.math = cfg_math;
    if ((s = grzo_backend_cuda_create(&cd, &m.be)) != GRZO_OK) {
        check_failure(s, why, "grzo_backend_cuda_create");
        o->stage = "create";
        goto done;
    }
    m.have_be = 1;
    for (b = 0, off = 0; b < 3; off += (size_t)(ROWS[b] * COLS[b]), b++) {
        size_t bytes = es * (size_t)(ROWS[b] * COLS[b]);
        const void *src = es == 4 ? (const void *)(init + off) : (const void *)(init16 + off);
        if ((s = grzo_backend_alloc(&m.be, bytes, &m.p[b])) == GRZO_OK) s = grzo_backend_upload(&m.be, m.p[b], src, bytes);
        if (s != GRZO_OK) break;
    }
    if (s == GRZO_OK) s = grzo_backend_alloc(&m.be, sizeof(int32_t) * 2 * TB * TT, &m.ids);
    if (s == GRZO_OK) s = grzo_backend_alloc(&m.be, sizeof(float) * 2 * TB * TT * TD, &m.x);
    if (s == GRZO_OK) s = grzo_backend_alloc(&m.be, sizeof(float) * 2 * TB * TT * TO, &m.h);
    if (s == GRZO_OK) s = grzo_backend_alloc(&m.be, sizeof(float) * 2 * TB * TT * TO, &m.y);
    if (s != GRZO_OK) {
        check_failure(s, be_error(&m), "allocating or uploading the model");
        o->stage = "model";
        goto done;
    }

    for (e = 0; e < cfg_n_est; e++) {
        grzo_desc d;
        grzo_block blk;
        if (ESTS[e] == GRZO_ESTIMATOR_MEZO_INPLACE) o->inplace_from = emu_fault_calls();
        memset(&d, 0, sizeof d);
        d.backend = &m.be; d.lr = 1e-3f; d.sigma = SIGMA; d.seed = 11; d.estimator = ESTS[e];
        if ((s = grzo_create(&d, &ctx)) != GRZO_OK) {
            check_failure(s, "(no context)", "grzo_create");
            o->stage = "grzo_create";
            goto done;
        }
        for (b = 0; b < 3; b++) {
            grzo_block_desc bd;
            memset(&bd, 0, sizeof bd);
            bd.kind = b == 0 ? GRZO_BLOCK_EMBEDDING : b == 1 ? GRZO_BLOCK_MATRIX : GRZO_BLOCK_VECTOR;
            bd.rows = ROWS[b];
            bd.cols = COLS[b];
            bd.data = m.p[b];
            bd.dtype = cfg_dtype;
            if ((s = grzo_block_add(ctx, &bd, &blk)) != GRZO_OK) {
                check_failure(s, grzo_last_error(ctx), "grzo_block_add");
                o->stage = "block_add";
                goto done;
            }
        }
        for (step = 0; step < STEPS; step++) {
            if (ESTS[e] == GRZO_ESTIMATOR_MEZO && step == 1) {
                /* between the steps: a checkpoint saved, then loaded back over the same values */
                for (tries = 0; (s = grzo_checkpoint_save(ctx, ckpt)) != GRZO_OK; tries++) {
                    check_failure(s, grzo_last_error(ctx), "grzo_checkpoint_save");
                    CHECK(!file_exists(ckpt) && !file_exists(tmp), "call %ld (%s) fails: a failed save leaves '%s' or its .tmp",
                          emu_fault_failed(), emu_fault_failed_name(), ckpt);
                    o->stage = "checkpoint_save";
                    if (sticky || tries == 1 + fail_count) goto done;
                }
                for (tries = 0; (s = grzo_checkpoint_load(ctx, ckpt)) != GRZO_OK; tries++) {
                    check_failure(s, grzo_last_error(ctx), "grzo_checkpoint_load");
                    o->stage = "checkpoint_load";
                    if (sticky || tries == 1 + fail_count) goto done;
                }
            }
            const char *msg = "";
            int64_t taken = grzo_get_step(ctx);
            for (tries = 0; (s = one_step(ctx, &m, &msg)) != GRZO_OK; tries++) {
                check_failure(s, msg, "a step");
                o->stage = "step";
                if (strstr(msg, "still perturbed")) still_perturbed++;
                if (!sticky && grzo_get_step(ctx) == taken + 1) break;   /* applied and counted; a later part failed */
                if (sticky || tries == 1 + fail_count) goto done;
                grzo_step_abort(ctx);   /* the same step again: a failed one changed nothing */
            }
        }
        grzo_destroy(ctx);
        ctx = NULL;
    }
    for (b = 0, off = 0; b < 3; off += (size_t)(ROWS[b] * COLS[b]), b++) {
        size_t bytes = es * (size_t)(ROWS[b] * COLS[b]);
        for (tries = 0; (s = grzo_backend_download(&m.be, (char *)o->params + off * es, m.p[b], bytes)) != GRZO_OK; tries++) {
            check_failure(s, be_error(&m), "grzo_backend_download");
            o->stage = "download";
            if (sticky || tries == 1 + fail_count) goto done;
        }
    }
    o->have_params = 1;

done:
    if (sticky && emu_fault_failed() && m.have_be) {
        /* a dead context: the backend refuses work from now on */
        void *p = NULL;
        s = grzo_backend_alloc(&m.be, 64, &p);
        CHECK(s != GRZO_OK && be_error(&m)[0], "call %ld (%s) fails sticky: an allocation after it returned %s", emu_fault_failed(),
              emu_fault_failed_name(), grzo_status_str(s));
        if (s == GRZO_OK) grzo_backend_free(&m.be, p);
    }
    grzo_destroy(ctx);
    for (b = 0; b < 3; b++) grzo_backend_free(&m.be, m.p[b]);
    if (m.have_be) {
        grzo_backend_free(&m.be, m.ids);
        grzo_backend_free(&m.be, m.x);
        grzo_backend_free(&m.be, m.h);
        grzo_backend_free(&m.be, m.y);
        grzo_backend_destroy(&m.be);
    }
    o->failed_at = emu_fault_failed();
    CHECK(emu_device_bytes() == 0 && emu_pinned_count() == 0 && emu_handle_count() == 0,
          "call %ld (%s) fails%s: after the backend's destroy %zu device bytes, %zu pinned blocks and %zu streams, events or "
          "cuBLAS handles are left", fail_at, emu_fault_failed_name(), sticky ? " (sticky)" : "", emu_device_bytes(),
          emu_pinned_count(), emu_handle_count());
    CHECK(emu_report_count() == reports0, "call %ld (%s) fails%s: the emulator reported a misuse of the CUDA runtime or "
          "cuBLAS (EMU-REPORT above)", fail_at, emu_fault_failed_name(), sticky ? " (sticky)" : "");
    CHECK(fail_at == 0 || o->failed_at == fail_at, "call %ld was never reached (the run made %ld)", fail_at, emu_fault_calls());
    remove(ckpt);
    last_calls = emu_fault_calls();
    last_n_sites = emu_fault_sites(last_sites, 4096);
    snprintf(last_failed_name, sizeof last_failed_name, "%s", emu_fault_failed_name());
    emu_fault_arm(0, 0);
}

/* the largest |got - want| over its bound: 0 (bit for bit), or 2 % of sigma; 16-bit weights
   (no in-place MeZO): their bytes, bit for bit */
static double excess(const float *got, const float *want, int in_place) {
    double worst = 0.0, bound = in_place ? 0.02 * SIGMA : 0.0;
    size_t i;
    if (cfg_dtype != GRZO_DTYPE_F32) return memcmp(got, want, N_PARAMS * 2) ? HUGE_VAL : 0.0;
    for (i = 0; i < N_PARAMS; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > bound || d != d) worst = fmax(worst, bound > 0.0 && d == d ? d / bound : HUGE_VAL);
    }
    return worst;
}

int main(int argc, char **argv) {
    static outcome clean, o;
    long calls, n, sites[4096], n_sites, i, by_stage[8] = {0}, n_sticky = 0;
    const char *stages[8] = {"create", "model", "grzo_create", "block_add", "step", "checkpoint_save", "checkpoint_load", "download"};
    time_t t0 = time(NULL);
    if (argc > 2) {   /* WORK_DIR N [sticky]: that run alone, with what it did */
        mkdir(argv[1], 0777);
        if (chdir(argv[1]) != 0) return 1;
        snprintf(ckpt, sizeof ckpt, "faults.grzo");
        run_once(0, 0, &clean);
        run_once(atol(argv[2]), argc > 3, &o);
        printf("call %s (%s) fails: the failure showed in %s; parameters %s (%.3g of the bound)\n", argv[2], last_failed_name,
               o.stage, o.have_params ? "read" : "not read",
               o.have_params ? excess(o.params, clean.params, o.failed_at > clean.inplace_from) : 0.0);
        for (i = 0; o.have_params && i < N_PARAMS; i++)
            if (o.params[i] != clean.params[i] && i < 2000) printf("  param %ld: %.9g, clean %.9g\n", i, o.params[i], clean.params[i]);
        return fails ? 1 : 0;
    }
    if (argc < 2) {
        printf("usage: test_cuda_faults WORK_DIR\n");
        return 2;
    }
    /* in WORK_DIR, and a relative path: a message that names the file must not pass the
       check of its words by the folder's name */
    mkdir(argv[1], 0777);
    if (chdir(argv[1]) != 0) {
        printf("FAIL: cannot enter %s\n", argv[1]);
        return 1;
    }
    snprintf(ckpt, sizeof ckpt, "faults.grzo");

    run_once(0, 0, &clean);
    calls = last_calls;
    if (!clean.have_params || fails) {
        printf("FAIL: the clean run failed (stage %s)\n", clean.stage);
        return 1;
    }
    n_sites = last_n_sites < 4096 ? last_n_sites : 4096;
    memcpy(sites, last_sites, sizeof(long) * (size_t)n_sites);
    for (n = 1; n <= calls; n++) {
        size_t k;
        run_once(n, 0, &o);
        for (k = 0; k < 8; k++)
            if (strcmp(o.stage, stages[k]) == 0) by_stage[k]++;
        if (o.have_params) {
            double w = excess(o.params, clean.params, o.failed_at > clean.inplace_from);
            CHECK(w <= 1.0, "call %ld of %ld (%s) fails: the run's parameters differ from the clean run's (%.3g of the bound; "
                  "the failure showed in %s)", n, calls, last_failed_name, w, o.stage);
        } else {
            CHECK(strcmp(o.stage, "create") == 0 || strcmp(o.stage, "model") == 0 || strcmp(o.stage, "grzo_create") == 0 ||
                      strcmp(o.stage, "block_add") == 0,
                  "call %ld of %ld (%s) fails: a %s that failed again on its retry", n, calls, last_failed_name, o.stage);
        }
    }
    printf("test_cuda_faults: each of %ld calls failing (plain):", calls);
    for (i = 0; i < 8; i++)
        if (by_stage[i]) printf(" %ld showed in %s;", by_stage[i], stages[i]);
    printf(" %ld s\n", (long)(time(NULL) - t0));
    /* sticky: the first call of each site (a dead context fails every call after it alike) */
    for (i = 0; i < n_sites; i++, n_sticky++) run_once(sites[i], 1, &o);
    printf("test_cuda_faults: a sticky error at each of %ld call sites' first call; %ld s\n", n_sticky,
           (long)(time(NULL) - t0));
    /* bf16 in fast math: the first call of each site, plain */
    cfg_dtype = GRZO_DTYPE_BF16;
    cfg_math = GRZO_CUDA_MATH_FAST;
    cfg_n_est = 2;
    run_once(0, 0, &clean);
    calls = last_calls;
    CHECK(clean.have_params && !fails, "bf16: the clean run failed (stage %s)", clean.stage);
    n_sites = last_n_sites < 4096 ? last_n_sites : 4096;
    memcpy(sites, last_sites, sizeof(long) * (size_t)n_sites);
    for (i = 0; clean.have_params && i < n_sites; i++) {
        run_once(sites[i], 0, &o);
        if (o.have_params)
            CHECK(excess(o.params, clean.params, 0) == 0.0, "bf16, fast math: call %ld of %ld (%s) fails: the run's weights "
                  "differ from the clean run's (the failure showed in %s)", sites[i], calls, last_failed_name, o.stage);
    }
    printf("test_cuda_faults: bf16 in fast math: the first call of each of %ld call sites failing (of %ld calls); %ld s\n",
           n_sites, calls, (long)(time(NULL) - t0));
    /* f32 again, in-place MeZO's calls failing two and three in a row (as test_cpu_oom.c):
       a restore that fails twice leaves the parameters perturbed on record, and a later call
       restores them; the run still ends within 2 % of sigma of the clean one */
    cfg_dtype = GRZO_DTYPE_F32;
    cfg_math = GRZO_CUDA_MATH_PEDANTIC;
    cfg_n_est = N_EST;
    run_once(0, 0, &clean);
    calls = last_calls;
    for (fail_count = 2; fail_count <= 3; fail_count++) {
        still_perturbed = 0;
        for (n = clean.inplace_from + 1; n <= calls; n++) {
            run_once(n, 0, &o);
            if (o.have_params)
                CHECK(excess(o.params, clean.params, 1) <= 1.0, "in-place MeZO, calls %ld..%ld fail: the run's parameters "
                      "differ from the clean run's by more than 2 %% of sigma (the failure showed in %s)", n, n + fail_count - 1,
                      o.stage);
            else   /* (a context's set-up is not retried) */
                CHECK(strcmp(o.stage, "grzo_create") == 0 || strcmp(o.stage, "block_add") == 0,
                      "in-place MeZO, calls %ld..%ld fail: the run gave up in %s", n, n + fail_count - 1, o.stage);
        }
        printf("test_cuda_faults: in-place MeZO, %ld calls in a row failing from each of its %ld calls: %ld steps left the "
               "parameters perturbed; %ld s in all\n", fail_count, calls - clean.inplace_from, still_perturbed,
               (long)(time(NULL) - t0));
        CHECK(still_perturbed > 0, "in-place MeZO, %ld in a row: no restore failed twice: the test reaches none", fail_count);
    }
    printf("%s (%ld checks, %d failed)\n", fails ? "FAIL" : "ok", checks, fails);
    return fails ? 1 : 0;
}
