/* test_llm_cuda_faults.c - the LLM runtime's device path when the device fails: each
   fallible CUDA runtime or cuBLAS call failing in turn, under the emulator (tests/cuda_emu,
   emu_fault.h; linked against llm_emulated, as llm_cuda_emulated).

   The scenario: llm_backend_create("cuda"); grzo_create (GRZO); a tiny random-init model
   registered in device memory (tu_tiny_config: 2 layers, dim 32); a state with the cuBLAS
   attention (LLM_ATTENTION_GEMM: the ops' own cuBLAS handle and GEMMs); llm_forward of a
   padded 3-sequence batch; llm_sequence_logprob; one GRZO step through grzo_step scoring
   with llm_sequence_logprob; llm_forward again (the stepped weights); greedy llm_generate of
   12 positions (its prompt through the GEMM attention, each new token through the fused
   kernel against the cache); everything freed. It runs once clean (T calls: about 1800, at
   80 call sites; a run takes about a second under ASan's fibers, so not all of them), then
   with call N failing (plain errors, emu_fault.h) for the first call of every call site (a
   site: the caller of a runtime function, or a kernel), every (T / 10)-th call and the last;
   and with a sticky error at the first call of every third site. GRZO_FAULTS_ALL=1: every N,
   and every site sticky (about 40 minutes). Each run must:
     - get a non-OK status and a message (llm_model_error, or the create's err) from the
       call that met the failure, which says the device failed (cuda, CUDA, cuBLAS or
       device), no crash, no sanitizer or emulator report;
     - plain errors: a failed forward, scoring, step or generation done again succeeds and
       gives the clean run's logits, log-probabilities and tokens bit for bit (a failed step
       changes no weight: the forward after it is the clean run's, bit for bit);
     - leave no device memory, pinned memory, stream, event or cuBLAS handle once the state,
       model, context and backend are freed.
   usage: test_llm_cuda_faults [N [sticky]]   (N: that run alone, against the clean one) */
#include "llm_test_util.h"
#include "model.h"

#ifdef LLM_HAVE_CUDA
#include "backends/grzo_cuda.h"
#include "emu_fault.h"

#include <time.h>

static long checks;
#define CHECK(c, ...) EMU_SWEEP_CHECK(tu_failures, checks, c, __VA_ARGS__)

enum { N_SEQ = 3, MAX_LEN = 20, GEN_STEPS = 12, N_EX = 2 };
#define VOCAB 40

typedef struct outcome {
    float logits[2][N_SEQ * MAX_LEN * VOCAB];   /* before and after the step */
    double sum[N_SEQ], mean[N_SEQ];
    int32_t tokens[GEN_STEPS + 1];
    int32_t n_total;
    int done;                    /* the scenario's stages completed: 0 setup failed .. 6 all */
    int gave_up;                 /* a stage failed again when done again */
    const char *stage;
} outcome;

static const char *stage_names[] = {"backend", "setup", "forward", "logprob", "step", "forward after the step", "generate"};
static long last_calls, last_sites[4096], last_n_sites;
static char last_failed_name[64];

typedef struct batch {
    int32_t tokens[N_SEQ][MAX_LEN], pos[N_SEQ][MAX_LEN];
    llm_seq seqs[N_SEQ];
    llm_batch b;
    int64_t n_out;
} batch;

static void make_batch(batch *t) {
    static const int32_t len[N_SEQ] = {17, 1, 11}, pad[N_SEQ] = {0, 0, 3};
    uint64_t rng = 5;
    int32_t i, j;
    memset(t, 0, sizeof *t);
    for (i = 0; i < N_SEQ; i++) {
        for (j = 0; j < len[i]; j++) {
            t->tokens[i][j] = j < pad[i] ? 0 : tu_token(&rng, VOCAB);
            t->pos[i][j] = pad[i] + j;
        }
        t->seqs[i].tokens = t->tokens[i];
        t->seqs[i].n_tokens = len[i];
        t->seqs[i].n_pad = pad[i];
        t->seqs[i].out_pos = t->pos[i];
        t->seqs[i].n_out = len[i] - pad[i];
        t->n_out += len[i] - pad[i];
    }
    t->b.seqs = t->seqs;
    t->b.n_seqs = N_SEQ;
}

typedef struct step_data { llm_model *m; llm_state *st; int32_t tokens[N_EX][16]; } step_data;

static grzo_status step_forward(grzo_ctx *ctx, const grzo_pass_info *pass, float *losses, void *user) {
    step_data *sd = (step_data *)user;
    llm_seq seqs[2 * N_EX];
    int32_t n_context[2 * N_EX];
    double mean[2 * N_EX];
    llm_batch b;
    int64_t c;
    grzo_status s;
    for (c = 0; c < pass->n_segments; c++) {
        memset(&seqs[c], 0, sizeof seqs[c]);
        seqs[c].tokens = sd->tokens[pass->example[c]];
        seqs[c].n_tokens = 10 + (int32_t)pass->example[c] * 3;
        seqs[c].segment = c;
        n_context[c] = seqs[c].n_tokens - 4;
    }
    b.seqs = seqs;
    b.n_seqs = (int32_t)pass->n_segments;
    b.n_segments = pass->n_segments;
    s = llm_sequence_logprob(ctx, sd->m, sd->st, &b, n_context, NULL, mean);
    if (s != GRZO_OK) return s;
    for (c = 0; c < pass->n_segments; c++) losses[c] = (float)-mean[c];
    return GRZO_OK;
}

/* The step stage: grzo_step; a failed update is finished by grzo_step_end (grzo.h), not taken
   again, and a step that was applied and counted before a later part failed (clearing its row
   maps: the next step clears them again) is not taken again either. */
static grzo_status step_stage(grzo_ctx *ctx, step_data *stp, int sticky, int64_t before) {
    grzo_status s;
    if (grzo_get_step(ctx) > before) return GRZO_OK;
    s = grzo_step(ctx, N_EX, step_forward, stp, NULL);
    if (s != GRZO_OK && !sticky && strstr(grzo_last_error(ctx), "grzo_step_end again finishes it")) s = grzo_step_end(ctx, NULL);
    return s;
}

static void check_failure(grzo_status s, const char *msg, const char *what) {
    CHECK(s == GRZO_ERR_OUT_OF_MEMORY || s == GRZO_ERR_BACKEND, "call %ld (%s) fails: %s returned %s (%s)", emu_fault_failed(),
          emu_fault_failed_name(), what, grzo_status_str(s), msg);
    CHECK(msg && msg[0], "call %ld (%s) fails: %s gave no message", emu_fault_failed(), emu_fault_failed_name(), what);
    /* and the message says that the device failed (a CUDA error's name, cuBLAS, the device) */
    CHECK(msg && (strstr(msg, "cuda") || strstr(msg, "CUDA") || strstr(msg, "cuBLAS") || strstr(msg, "device")),
          "call %ld (%s) fails: %s's message does not say the device failed: %s", emu_fault_failed(), emu_fault_failed_name(),
          what, msg ? msg : "");
}

/* The message of a stage's failure: the model's, or for the step grzo's; when grzo_step's
   forward callback (llm_sequence_logprob) failed, grzo says only that, and the model says
   why (grzo.h: a callback's failure is the caller's to explain). */
static const char *stage_message(int k, const grzo_ctx *ctx, const llm_model *m) {
    static char both[1024];
    if (k != 4) return llm_model_error(m);
    if (!strstr(grzo_last_error(ctx), "the forward callback failed")) return grzo_last_error(ctx);
    snprintf(both, sizeof both, "%s: %s", grzo_last_error(ctx), llm_model_error(m));
    return both;
}

/* a stage's call, done again once after a plain failure (a sticky one ends the run) */
#define STAGE(k, call)                                                      \
    do {                                                                    \
        int tries_;                                                         \
        for (tries_ = 0; (s = (call)) != GRZO_OK; tries_++) {               \
            check_failure(s, stage_message(k, ctx, &m), stage_names[k]);    \
            o->stage = stage_names[k];                                      \
            if (getenv("FAULTS_VERBOSE")) printf("%s: %s / %s\n", stage_names[k], llm_model_error(&m), grzo_last_error(ctx)); \
            if (sticky) goto done;                                          \
            if (tries_ == 1) {                                              \
                o->gave_up = 1;                                             \
                goto done;                                                  \
            }                                                               \
        }                                                                   \
        o->done = k;                                                        \
    } while (0)

static void run_once(long fail_at, int sticky, outcome *o) {
    grzo_backend be;
    int have_be = 0, have_model = 0;
    grzo_ctx *ctx = NULL;
    llm_model m;
    llm_state *st = NULL;
    llm_config cfg = tu_tiny_config(0);
    llm_model_desc md;
    llm_state_desc sd;
    grzo_desc d;
    batch t;
    step_data stp;
    llm_generate_desc g;
    char err[512] = "";
    grzo_status s;
    int32_t n_context[N_SEQ] = {5, 1, 6}, i, j;
    batch sc;   /* the batch to score: sequence 1 gets a second token (a context and a token to score) */
    uint64_t rng = 77;
    int64_t steps_before;

    memset(o, 0, sizeof *o);
    memset(&m, 0, sizeof m);
    o->stage = "none";
    make_batch(&t);
    make_batch(&sc);
    sc.b.seqs = sc.seqs;
    sc.seqs[1].n_tokens = 2;
    long reports0 = emu_report_count();
    emu_fault_arm(fail_at, sticky);

    if ((s = llm_backend_create("cuda", 0, GRZO_DTYPE_F32, &be, err, sizeof err)) != GRZO_OK) {
        check_failure(s, err, "llm_backend_create");
        o->stage = stage_names[0];
        goto done;
    }
    have_be = 1;
    memset(&d, 0, sizeof d);
    d.backend = &be;
    d.estimator = GRZO_ESTIMATOR_GRZO;
    d.seed = 1234;
    d.lr = 1e-3f;
    d.sigma = 1e-3f;
    if ((s = grzo_create(&d, &ctx)) != GRZO_OK) {
        check_failure(s, "(no context)", "grzo_create");
        o->stage = stage_names[1];
        goto done;
    }
    memset(&md, 0, sizeof md);
    md.random_init_seed = 99;
    s = llm_model_register_ex(ctx, &m, &cfg, NULL, &md);
    have_model = 1;
    if (s == GRZO_OK) {
        memset(&sd, 0, sizeof sd);
        sd.max_rows = 64;
        sd.max_seqs = 2 * N_EX > N_SEQ ? 2 * N_EX : N_SEQ;
        sd.max_outputs = 64;
        sd.max_seq_len = 32;
        sd.attention = LLM_ATTENTION_GEMM;
        s = llm_state_create(ctx, &m, &sd, &st);
    }
    if (s != GRZO_OK) {
        check_failure(s, llm_model_error(&m), "setting up the model and its state");
        o->stage = stage_names[1];
        goto done;
    }
    o->done = 1;
    STAGE(2, llm_forward(ctx, &m, st, &t.b, o->logits[0]));
    STAGE(3, llm_sequence_logprob(ctx, &m, st, &sc.b, n_context, o->sum, o->mean));
    stp.m = &m;
    stp.st = st;
    for (i = 0; i < N_EX; i++)
        for (j = 0; j < 16; j++) stp.tokens[i][j] = tu_token(&rng, VOCAB);
    steps_before = grzo_get_step(ctx);
    STAGE(4, step_stage(ctx, &stp, sticky, steps_before));
    STAGE(5, llm_forward(ctx, &m, st, &t.b, o->logits[1]));
    memset(&g, 0, sizeof g);
    g.steps = GEN_STEPS;
    g.stop[0] = g.stop[1] = -1;
    o->tokens[0] = 1;
    STAGE(6, llm_generate(ctx, &m, st, o->tokens, 1, &g, &o->n_total));

done:
    llm_state_free(st);
    if (have_model) llm_model_free(&m);
    grzo_destroy(ctx);
    if (have_be) grzo_backend_destroy(&be);
    CHECK(emu_device_bytes() == 0 && emu_pinned_count() == 0 && emu_handle_count() == 0,
          "call %ld (%s) fails%s: after everything is freed %zu device bytes, %zu pinned blocks and %zu streams, events or "
          "cuBLAS handles are left", fail_at, emu_fault_failed_name(), sticky ? " (sticky)" : "", emu_device_bytes(),
          emu_pinned_count(), emu_handle_count());
    CHECK(emu_report_count() == reports0, "call %ld (%s) fails%s: the emulator reported a misuse of the CUDA runtime or "
          "cuBLAS (EMU-REPORT above)", fail_at, emu_fault_failed_name(), sticky ? " (sticky)" : "");
    CHECK(fail_at == 0 || emu_fault_failed() == fail_at, "call %ld was never reached (the run made %ld)", fail_at, emu_fault_calls());
    last_calls = emu_fault_calls();
    last_n_sites = emu_fault_sites(last_sites, 4096);
    snprintf(last_failed_name, sizeof last_failed_name, "%s", emu_fault_failed_name());
    emu_fault_arm(0, 0);
}

/* what a run that got past a stage must agree with the clean run on, bit for bit */
static void compare(const outcome *o, const outcome *clean, long n) {
    size_t nl = sizeof o->logits[0];
    if (o->done >= 2) CHECK(memcmp(o->logits[0], clean->logits[0], nl) == 0, "call %ld (%s) fails: the logits differ", n, last_failed_name);
    if (o->done >= 3)
        CHECK(memcmp(o->sum, clean->sum, sizeof o->sum) == 0 && memcmp(o->mean, clean->mean, sizeof o->mean) == 0,
              "call %ld (%s) fails: the log-probabilities differ", n, last_failed_name);
    if (o->done >= 5)
        CHECK(memcmp(o->logits[1], clean->logits[1], nl) == 0, "call %ld (%s) fails: the logits after the step differ (the "
              "weights changed)", n, last_failed_name);
    if (o->done >= 6)
        CHECK(o->n_total == clean->n_total && memcmp(o->tokens, clean->tokens, sizeof o->tokens) == 0,
              "call %ld (%s) fails: the generated tokens differ", n, last_failed_name);
    CHECK(!o->gave_up, "call %ld (%s) fails: %s failed again when done again", n, last_failed_name, o->stage);
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    static outcome clean, o;
    static long sched[16384];
    long calls, n_sites, sites[4096], i, n_sched = 0, stride, by_done[7] = {0};
    time_t t0 = time(NULL);
    int all = getenv("GRZO_FAULTS_ALL") && atoi(getenv("GRZO_FAULTS_ALL"));
    run_once(0, 0, &clean);
    calls = last_calls;
    if (clean.done != 6 || tu_failures) {
        printf("FAIL: the clean run failed (%s)\n", clean.stage);
        return 1;
    }
    if (argc > 1) {   /* one run, with what it met */
        run_once(atol(argv[1]), argc > 2, &o);
        compare(&o, &clean, atol(argv[1]));
        printf("call %s of %ld (%s) fails: the run completed stage %d (%s)\n", argv[1], calls, last_failed_name, o.done, o.stage);
        return tu_failures ? 1 : 0;
    }
    n_sites = last_n_sites < 4096 ? last_n_sites : 4096;
    memcpy(sites, last_sites, sizeof(long) * (size_t)n_sites);
    /* the schedule: every call, or each site's first call, each site's last call (the
       sites' first calls of a run made backwards: the run's last call is one) and a stride */
    if (all) {
        for (i = 1; i <= calls; i++) sched[n_sched++] = i;
    } else {
        stride = calls / 10;
        for (i = 0; i < n_sites; i++) sched[n_sched++] = sites[i];
        for (i = stride; i <= calls; i += stride) sched[n_sched++] = i;
        sched[n_sched++] = calls;
        qsort(sched, (size_t)n_sched, sizeof sched[0], cmp_long);
        for (i = 1, stride = 1; i < n_sched; i++)
            if (sched[i] != sched[stride - 1]) sched[stride++] = sched[i];
        n_sched = stride;
    }
    printf("test_llm_cuda_faults: the clean run makes %ld fallible calls at %ld sites; %ld runs\n", calls, n_sites, n_sched);
    for (i = 0; i < n_sched; i++) {
        run_once(sched[i], 0, &o);
        compare(&o, &clean, sched[i]);
        by_done[o.done]++;
    }
    printf("test_llm_cuda_faults: plain failures, by the last stage completed: ");
    for (i = 0; i < 7; i++) printf("%s%ld %s", i ? ", " : "", by_done[i], i == 0 ? "none" : stage_names[i]);
    printf("; %ld s\n", (long)(time(NULL) - t0));
    for (i = 0, n_sched = 0; i < n_sites; i += all ? 1 : 3, n_sched++) run_once(sites[i], 1, &o);
    printf("test_llm_cuda_faults: a sticky error at the first call of %ld of the %ld sites; %ld s in all\n", n_sched, n_sites,
           (long)(time(NULL) - t0));
    printf("%s (%ld checks, %d failed)\n", tu_failures ? "FAIL" : "ok", checks, tu_failures);
    return tu_failures ? 1 : 0;
}
#else
int main(void) {
    printf("SKIP: this build has no CUDA backend\n");
    return TEST_SKIP;
}
#endif
