/* bench_llm.c - CPU time and memory of a GRZO step on a real LLM (SmolLM2-135M by default).

   Workload (MeZO's SST-2 classification setup): B = 16 examples, each a prompt
   "<sentence> It was" of 30-60 tokens (SST-2 training sentences of that length, or
   synthetic token sequences when no SST-2 file or tokenizer is at hand); the loss of an
   example copy is the cross-entropy over the two candidates " terrible" / " great" read
   at the prompt's last position (one output row per sequence). A GRZO step forwards the
   2B copies in one fused pass; a MeZO step runs two passes of B; an FZOO step N + 1 = 9
   passes of B (N = 8 probes, grzo-finetune's default); "inference" is a plain forward
   (outside any step) over the same 2B sequences.

   It prints markdown tables of
     (a) time per step at 1 and 2 threads (or --threads N alone): the four workloads at
         both thread counts are interleaved in one process (the order rotates every
         round), with medians [p10, p90] of per-round ratios (GRZO/inference,
         MeZO/inference, GRZO/MeZO, FZOO/inference, 2 threads / 1 thread) and the
         fraction of the time spent inside grzo_linear (the GEMMs, perturbed or not);
     (b) peak resident memory (VmHWM) of each workload against inference, each in a
         fresh child process at the run's highest thread count
         (this program re-executed with --mem-child MODE), measured from the end of
         setup: the peak is reset through /proc/self/clear_refs after the model is loaded
         (loading holds the file image and the fp32 weights at once, a higher peak than
         any step), then two steps run.

   usage: bench_llm --model PATH [--data SST2_TSV] [--batch 16] [--rounds 3] [--threads N]
                    [--transient-mb M] [--algo auto|per-example|two-gemm|fused] [--part all|time|memory]
                    [--dump-tokens FILE]
   --rounds: interleaved rounds (default 3, a few minutes on 2 cores; more for tighter
   percentiles). --threads N > 0 times N threads only; 0 (default) 1 and 2 threads.
   --transient-mb and --algo set grzo_cpu_desc.transient_bytes and .linear_algo.
   Every label of the SST-2 file must be 0 or 1 (else it exits 1 naming the line); the
   counts of each, in the file and among the B examples, are printed with the context.
   The model path may also come from $GRZO_LLM_MODEL; without either, or when the file is
   missing, it exits 77 (skip). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cli_args.h"
#include "files.h"
#include "cpu_env.h"
#include "llm.h"
#include "model.h"
#include "bench_stats.h"

#ifdef GRZO_USE_OPENBLAS
char *openblas_get_config(void);
#endif

#define MAX_B 64
#define MAX_PROMPT 64
#define MIN_PROMPT 30
#define MAX_ROUNDS 64
#define DEFAULT_ROUNDS 3
#define FZOO_PROBES 8              /* grzo-finetune's default N */
#define DEFAULT_DATA "/work/shared/data/SST-2/train.tsv"
#define DEFAULT_MODEL "/work/models/SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct options {
    const char *model, *data, *mem_child, *part, *dump_tokens;
    int32_t batch, rounds, threads, algo;
    int64_t transient_mb;
} options;

/* ---- the workload ------------------------------------------------------------------------ */
typedef struct example {
    int32_t tokens[MAX_PROMPT];
    int32_t n_tokens, label;
} example;

typedef struct workload {
    example ex[MAX_B];
    int32_t B;
    int32_t cand[2];              /* " terrible", " great" */
    int synthetic;
    long file_labels[2];          /* labels 0 and 1 in the whole SST-2 file */
} workload;

/* The estimators timed; one context each over the same weights. */
enum { EST_GRZO = 0, EST_MEZO, EST_FZOO, N_EST };

/* Everything that runs at one thread count: its backend and, over the same fp32 weights,
   one context per estimator and a state sized for 2B sequences (shared: one forward at a
   time). */
typedef struct runner {
    int32_t threads;
    grzo_backend be;
    grzo_ctx *ctx[N_EST];
    llm_model m[N_EST];
    llm_state *st;
} runner;

typedef struct bench {
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok;
    runner run[BENCH_MAX_TC];     /* 1 and 2 threads, or --threads N alone */
    int n_run;
    float *logits;                /* 2B x vocab */
    workload wl;
    llm_seq seqs[2 * MAX_B];
    int32_t last[2 * MAX_B];
} bench;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the process (all threads): on a machine shared with other jobs, wall time
   counts the time others hold the cores; with --threads 1 the CPU time is the work itself
   (with more threads it also counts OpenMP threads spinning in barriers). */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t first_token(const llm_tokenizer *tok, const char *text) {
    int32_t ids[8], n = 0;
    char err[128];
    if (llm_tokenize(tok, text, 0, ids, 8, &n, err, sizeof err) != 0 || n < 1) return -1;
    return ids[0];
}

/* One line of SST-2's train.tsv, "sentence<TAB>label" (the sentence ends with a space before
   the tab). SST2_LINE: *label is 0 or 1 and the line is cut to the sentence without its
   trailing spaces; SST2_HEADER: the "sentence<TAB>label" header; SST2_BAD: anything else,
   e.g. a label other than 0 or 1. The label is read before the sentence is trimmed: trimming
   first moved the tab pointer onto the sentence's last space, and every label read as 0. */
enum { SST2_LINE, SST2_HEADER, SST2_BAD };
static int sst2_line(char *line, int32_t *label) {
    char *tab = strrchr(line, '\t'), *field;
    size_t n;
    if (!tab) return SST2_BAD;
    field = tab + 1;
    n = strcspn(field, "\r\n");
    if (n == 5 && !strncmp(field, "label", 5)) return SST2_HEADER;
    if (n != 1 || (field[0] != '0' && field[0] != '1')) return SST2_BAD;
    *label = field[0] - '0';
    *tab = '\0';
    while (tab > line && tab[-1] == ' ') *--tab = '\0';
    return SST2_LINE;
}

/* Checks every label of the SST-2 file and counts them (n_label[0], n_label[1]); 1 when the
   file cannot be opened (the caller falls back to synthetic data), -1 with a message when it
   is not an SST-2 train file (a benchmark must not mislabel its data). */
static int sst2_check(const char *path, long n_label[2]) {
    char line[4096];
    long lineno = 0;
    int32_t label;
    FILE *f = fopen(path, "r");
    n_label[0] = n_label[1] = 0;
    if (!f) return 1;
    while (fgets(line, sizeof line, f)) {
        int kind;
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "bench_llm: %s:%ld: line longer than %d bytes\n", path, lineno, (int)sizeof line - 1);
            fclose(f);
            return -1;
        }
        kind = sst2_line(line, &label);
        if (kind == SST2_LINE) n_label[label]++;
        else if (kind == SST2_BAD || lineno > 1) {
            fprintf(stderr, "bench_llm: %s:%ld: expected \"sentence<TAB>0\" or \"sentence<TAB>1\"\n", path, lineno);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    if (n_label[0] + n_label[1] == 0) {
        fprintf(stderr, "bench_llm: %s: no labeled sentences\n", path);
        return -1;
    }
    return 0;
}

/* SST-2 sentences whose prompt has 30-60 tokens; 0 when B of them were found. */
static int sst2_examples(const options *o, bench *b) {
    char line[4096], err[256], prompt[4200];
    int32_t bos = llm_tokenizer_wants_bos(b->tok) ? 1 : 0, n, label;
    FILE *f = fopen(o->data, "r");
    workload *wl = &b->wl;
    wl->B = 0;
    if (!f) return 1;
    wl->cand[0] = first_token(b->tok, " terrible");
    wl->cand[1] = first_token(b->tok, " great");
    while (wl->B < o->batch && fgets(line, sizeof line, f)) {
        example *e = &wl->ex[wl->B];
        if (sst2_line(line, &label) != SST2_LINE) continue;   /* the header (sst2_check vetted the rest) */
        snprintf(prompt, sizeof prompt, "%s It was", line);
        if (llm_tokenize(b->tok, prompt, bos, e->tokens, MAX_PROMPT, &n, err, sizeof err) != 0) continue;
        if (n < MIN_PROMPT || n > 60) continue;
        e->n_tokens = n;
        e->label = label;
        wl->B++;
    }
    fclose(f);
    return wl->B < o->batch || wl->cand[0] < 0 || wl->cand[1] < 0;
}

static void synthetic_examples(const options *o, bench *b) {
    uint64_t s = 12345;
    int32_t i, t;
    workload *wl = &b->wl;
    wl->synthetic = 1;
    wl->B = o->batch;
    wl->cand[0] = 100 % b->cfg.vocab_size;
    wl->cand[1] = 200 % b->cfg.vocab_size;
    for (i = 0; i < wl->B; i++) {
        example *e = &wl->ex[i];
        e->n_tokens = MIN_PROMPT + (i * 7) % 31;
        e->label = i % 2;
        for (t = 0; t < e->n_tokens; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            e->tokens[t] = (int32_t)((s >> 33) % (uint64_t)b->cfg.vocab_size);
        }
    }
}

/* ---- setup ------------------------------------------------------------------------------- */
static int runner_open(const options *o, bench *b, runner *rn, int32_t threads) {
    static const grzo_estimator est[N_EST] = {GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO};
    grzo_cpu_desc cd;
    llm_state_desc sd;
    int k;
    rn->threads = threads;
    memset(&cd, 0, sizeof cd);
    cd.n_threads = threads;
    cd.transient_bytes = (size_t)o->transient_mb << 20;
    cd.linear_algo = (grzo_cpu_linear_algo)o->algo;
    if (grzo_backend_cpu_create(&cd, &rn->be) != GRZO_OK) return 1;
    for (k = 0; k < N_EST; k++) {
        grzo_desc d;
        memset(&d, 0, sizeof d);
        d.backend = &rn->be;
        d.estimator = est[k];
        d.lr = 1e-7f;              /* steps must not wreck the model: the time is the same */
        d.sigma = 1e-3f;
        d.fzoo_probes = FZOO_PROBES;
        if (grzo_create(&d, &rn->ctx[k]) != GRZO_OK) return 1;
        if (llm_model_register(rn->ctx[k], &rn->m[k], &b->cfg, &b->w) != GRZO_OK) {
            fprintf(stderr, "bench_llm: %s\n", llm_model_error(&rn->m[k]));
            return 1;
        }
    }
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 2 * (int64_t)b->wl.B * MAX_PROMPT;
    sd.max_seqs = 2 * b->wl.B;
    sd.max_outputs = 2 * b->wl.B;
    sd.max_seq_len = MAX_PROMPT;
    if (llm_state_create(rn->ctx[0], &rn->m[0], &sd, &rn->st) != GRZO_OK) {
        fprintf(stderr, "bench_llm: %s\n", llm_model_error(&rn->m[0]));
        return 1;
    }
    return 0;
}

static int bench_open(const options *o, bench *b) {
    char err[512];
    int32_t tcs[BENCH_MAX_TC];
    int n_tc, c;
    memset(b, 0, sizeof *b);
    if (sst2_check(o->data, b->wl.file_labels) < 0) return 1;
    if (llm_load(o->model, &b->cfg, &b->w, &b->tok, err, sizeof err) != 0) {
        fprintf(stderr, "bench_llm: %s\n", err);
        return 1;
    }
    if (!b->tok || sst2_examples(o, b) != 0) synthetic_examples(o, b);
    n_tc = bench_thread_counts(o->threads, tcs);
    for (c = 0; c < n_tc; c++, b->n_run++)
        if (runner_open(o, b, &b->run[c], tcs[c]) != 0) return 1;
    b->logits = (float *)malloc((size_t)2 * (size_t)b->wl.B * (size_t)b->cfg.vocab_size * sizeof(float));
    return b->logits == NULL;
}

static void runner_close(runner *rn) {
    int k;
    llm_state_free(rn->st);
    for (k = 0; k < N_EST; k++) {
        llm_model_free(&rn->m[k]);
        if (rn->ctx[k]) grzo_destroy(rn->ctx[k]);
    }
    if (rn->be.iface) grzo_backend_destroy(&rn->be);
}

static void bench_close(bench *b) {
    int c;
    free(b->logits);
    for (c = 0; c < BENCH_MAX_TC; c++) runner_close(&b->run[c]);
    llm_tokenizer_free(b->tok);
    llm_weights_free(&b->w);
}

/* ---- the four workloads --------------------------------------------------------------------- */
/* Forward n copies (copy c reads example which[c]) through runner rn's context k and write
   one loss per copy. */
static grzo_status forward_copies(bench *b, runner *rn, int k, const int64_t *which, int64_t n, int64_t n_segments,
                                  float *losses) {
    llm_batch batch;
    int64_t c;
    grzo_status s;
    for (c = 0; c < n; c++) {
        const example *e = &b->wl.ex[which[c]];
        memset(&b->seqs[c], 0, sizeof b->seqs[c]);
        b->seqs[c].tokens = e->tokens;
        b->seqs[c].n_tokens = e->n_tokens;
        b->seqs[c].segment = c;
        b->last[c] = e->n_tokens - 1;
        b->seqs[c].out_pos = &b->last[c];
        b->seqs[c].n_out = 1;
    }
    batch.seqs = b->seqs;
    batch.n_seqs = (int32_t)n;
    batch.n_segments = n_segments;
    s = llm_forward(rn->ctx[k], &rn->m[k], rn->st, &batch, b->logits);
    if (s != GRZO_OK) {
        fprintf(stderr, "bench_llm: %s\n", llm_model_error(&rn->m[k]));
        return s;
    }
    for (c = 0; c < n; c++) {   /* cross-entropy over the two candidates */
        const float *l = b->logits + c * b->cfg.vocab_size;
        double a = l[b->wl.cand[0]], g = l[b->wl.cand[1]], mx = a > g ? a : g;
        double lse = mx + log(exp(a - mx) + exp(g - mx));
        losses[c] = (float)(lse - (b->wl.ex[which[c]].label ? g : a));
    }
    return GRZO_OK;
}

/* One training step of runner rn's context k (GRZO: 1 pass of 2B; MeZO: 2 passes of B;
   FZOO: N + 1 passes of B). */
static grzo_status train_step(bench *b, runner *rn, int k) {
    grzo_ctx *ctx = rn->ctx[k];
    grzo_step_info si;
    grzo_step_report rep;
    grzo_status s;
    float losses[2 * MAX_B];
    int32_t p;
    s = grzo_step_begin(ctx, b->wl.B, &si);
    for (p = 0; s == GRZO_OK && p < si.n_passes; p++) {
        grzo_pass_info pi;
        s = grzo_pass_begin(ctx, &pi);
        if (s == GRZO_OK) s = forward_copies(b, rn, k, pi.example, pi.n_segments, pi.n_segments, losses);
        if (s == GRZO_OK) s = grzo_pass_end(ctx, losses);
    }
    if (s == GRZO_OK) s = grzo_step_end(ctx, &rep);
    if (s != GRZO_OK) {
        fprintf(stderr, "bench_llm: step failed: %s (%s)\n", grzo_status_str(s), grzo_last_error(ctx));
        grzo_step_abort(ctx);
        return s;
    }
    return GRZO_OK;
}

/* Plain forward over the same 2B sequences as a GRZO pass (examples 0..B-1 twice). */
static grzo_status inference(bench *b, runner *rn) {
    int64_t which[2 * MAX_B], c;
    float losses[2 * MAX_B];
    for (c = 0; c < 2 * b->wl.B; c++) which[c] = c % b->wl.B;
    return forward_copies(b, rn, EST_GRZO, which, 2 * b->wl.B, 0, losses);
}

enum { W_INFER = 0, W_GRZO, W_MEZO, W_FZOO, N_WORKLOADS };
static const char *const workload_names[N_WORKLOADS] = {"inference: plain forward of 2B sequences",
                                                        "GRZO step: 1 fused pass of 2B copies",
                                                        "MeZO step: 2 passes of B copies",
                                                        "FZOO step (N = 8): 9 passes of B copies"};
static const char *const workload_modes[N_WORKLOADS] = {"infer", "grzo", "mezo", "fzoo"};

static grzo_status run_workload(bench *b, runner *rn, int w) {
    bench_use_threads(rn->threads);
    return w == W_INFER ? inference(b, rn) : train_step(b, rn, w - W_GRZO);   /* W_GRZO.. follow EST_GRZO.. */
}

/* ---- (a) time --------------------------------------------------------------------------------- */
/* Per-round figures of one thread count: wall and CPU time, time inside grzo_linear and in
   the host attention, per workload. */
typedef struct timings {
    double wall[N_WORKLOADS][MAX_ROUNDS], cpu[N_WORKLOADS][MAX_ROUNDS];
    double lin[N_WORKLOADS][MAX_ROUNDS], att[N_WORKLOADS][MAX_ROUNDS];
} timings;

/* Runs workload w once on runner rn; with r >= 0 records it as round r of tm. */
static int time_workload(bench *b, runner *rn, int w, int r, timings *tm, int64_t *rows) {
    llm_profile p;
    double t0, c0;
    llm_state_profile_reset(rn->st);
    t0 = now_s();
    c0 = cpu_s();
    if (run_workload(b, rn, w) != GRZO_OK) return 1;
    if (r < 0) return 0;
    tm->wall[w][r] = now_s() - t0;
    tm->cpu[w][r] = cpu_s() - c0;
    llm_state_profile(rn->st, &p);
    tm->lin[w][r] = p.linear_s;
    tm->att[w][r] = p.attention_s;
    if (w == W_INFER) *rows = p.n_rows;
    return 0;
}

static void print_times(const options *o, const runner *rn, timings *tm, int64_t rows) {
    double ratio[MAX_ROUNDS];
    int w, r, n = o->rounds;
    printf("\n### (a) time per step, %d thread%s (median of %d rounds, interleaved with the other workloads%s)\n\n",
           (int)rn->threads, rn->threads > 1 ? "s" : "", n, o->threads > 0 ? "" : " and thread count");
    printf("%lld token rows per forward of 2B sequences; GEMM = time inside grzo_linear calls (perturbed or "
           "plain); attention = the model's host attention; CPU = process CPU time; 'vs inference' = median of "
           "per-round ratios.\n\n", (long long)rows);
    printf("| workload | wall s | GEMM s | GEMM share | attention s | vs inference | CPU s |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    for (w = 0; w < N_WORKLOADS; w++) {
        double share[MAX_ROUNDS];
        for (r = 0; r < n; r++) share[r] = tm->lin[w][r] / tm->wall[w][r];
        bench_ratios(tm->wall[w], tm->wall[W_INFER], n, ratio);
        printf("| %s | %.3f | %.3f | %.1f %% | %.3f | %.2fx | %.3f |\n", workload_names[w],
               bench_quantile(tm->wall[w], n, 0.5), bench_quantile(tm->lin[w], n, 0.5),
               100.0 * bench_quantile(share, n, 0.5), bench_quantile(tm->att[w], n, 0.5),
               bench_quantile(ratio, n, 0.5), bench_quantile(tm->cpu[w], n, 0.5));
    }
    printf("\n");
    bench_print_ratio("GRZO step / inference", tm->wall[W_GRZO], tm->wall[W_INFER], n, ratio, " (target <= 1.15)");
    bench_print_ratio("MeZO step / inference", tm->wall[W_MEZO], tm->wall[W_INFER], n, ratio, " (target <= 1.10)");
    bench_print_ratio("GRZO step / MeZO step", tm->wall[W_GRZO], tm->wall[W_MEZO], n, ratio, " (target <= 1.0)");
    bench_print_ratio("FZOO step (N = 8) / inference", tm->wall[W_FZOO], tm->wall[W_INFER], n, ratio, "");
    bench_print_ratio("GRZO step / MeZO step in CPU time", tm->cpu[W_GRZO], tm->cpu[W_MEZO], n, ratio, "");
}

static int bench_time(const options *o, bench *b) {
    timings *tm = (timings *)calloc((size_t)b->n_run, sizeof *tm);
    double ratio[MAX_ROUNDS];
    int64_t rows = 0;
    int n_cases = b->n_run * N_WORKLOADS, r, i, c, w;
    char what[128];
    if (!tm) return 1;
    for (r = -1; r < o->rounds; r++)   /* round -1 warms up: first touch of every buffer */
        for (i = 0; i < n_cases; i++) {
            int idx = (i + (r < 0 ? 0 : r)) % n_cases;
            c = idx / N_WORKLOADS;
            if (time_workload(b, &b->run[c], idx % N_WORKLOADS, r, &tm[c], &rows) != 0) {
                free(tm);
                return 1;
            }
        }
    for (c = 0; c < b->n_run; c++) print_times(o, &b->run[c], &tm[c], rows);
    if (b->n_run > 1) {
        printf("\n");
        for (w = 0; w < N_WORKLOADS; w++) {
            snprintf(what, sizeof what, "%s, %d threads / 1 thread speedup", workload_names[w], (int)b->run[1].threads);
            bench_print_ratio(what, tm[0].wall[w], tm[1].wall[w], o->rounds, ratio, w == W_GRZO ? " (target >= 1.7)" : "");
        }
    }
    free(tm);
    return 0;
}

/* ---- (b) memory, one child process per workload -------------------------------------------------- */
/* Reset VmHWM to the current RSS (Linux >= 4.0); 0 on success. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int ok;
    if (!f) return 1;
    ok = fputs("5", f) >= 0;
    return (fclose(f) != 0 || !ok);
}

/* the workload a --mem-child MODE names; -1 when none */
static int workload_of_mode(const char *mode) {
    int w;
    for (w = 0; w < N_WORKLOADS; w++)
        if (!strcmp(mode, workload_modes[w])) return w;
    return -1;
}

static int mem_child_main(const options *o) {
    bench b;
    int w = workload_of_mode(o->mem_child), i, rc = 1, reset;
    long setup_kb;
    if (bench_open(o, &b) == 0) {
        setup_kb = bench_proc_status_kb("VmRSS");
        reset = reset_peak();
        for (i = 0; i < 2; i++)
            if (run_workload(&b, &b.run[0], w) != GRZO_OK) break;
        if (i == 2) {
            printf("%ld %ld %d\n", setup_kb, bench_proc_status_kb("VmHWM"), reset);
            rc = 0;
        }
    }
    fflush(stdout);
    bench_close(&b);
    return rc;
}

/* Runs this program again as "--mem-child MODE" at `threads` threads and reads its three
   numbers. */
static int run_mem_child(const options *o, int32_t threads_n, const char *mode, long *setup_kb, long *peak_kb,
                         int *reset) {
    char threads[32], batch[32], tmb[32], algo[16], line[128];
    char *args[20];
    int fds[2], status = 0, n = 0;
    pid_t pid;
    FILE *f;
    snprintf(threads, sizeof threads, "%d", (int)threads_n);
    snprintf(batch, sizeof batch, "%d", (int)o->batch);
    snprintf(tmb, sizeof tmb, "%lld", (long long)o->transient_mb);
    snprintf(algo, sizeof algo, "%s", o->algo == 1 ? "per-example" : o->algo == 2 ? "two-gemm" : o->algo == 3 ? "fused" : "auto");
    args[n++] = "bench_llm";
    args[n++] = "--mem-child"; args[n++] = (char *)mode;
    args[n++] = "--model"; args[n++] = (char *)o->model;
    args[n++] = "--data"; args[n++] = (char *)o->data;
    args[n++] = "--threads"; args[n++] = threads;
    args[n++] = "--batch"; args[n++] = batch;
    args[n++] = "--transient-mb"; args[n++] = tmb;
    args[n++] = "--algo"; args[n++] = algo;
    args[n] = NULL;
    if (pipe(fds) != 0) return 1;
    fflush(stdout);
    pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(127);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    *peak_kb = -1;
    if (f && fgets(line, sizeof line, f) && sscanf(line, "%ld %ld %d", setup_kb, peak_kb, reset) != 3) *peak_kb = -1;
    if (f) fclose(f); else close(fds[0]);
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || *peak_kb < 0) {
        fprintf(stderr, "bench_llm: memory child '%s' failed (status 0x%x)\n", mode, status);
        return 1;
    }
    return 0;
}

static int bench_memory(const options *o) {
    long setup[N_WORKLOADS], peak[N_WORKLOADS];
    int32_t tcs[BENCH_MAX_TC];
    int reset[N_WORKLOADS], w, n_tc = bench_thread_counts(o->threads, tcs);
    for (w = 0; w < N_WORKLOADS; w++)
        if (run_mem_child(o, tcs[n_tc - 1], workload_modes[w], &setup[w], &peak[w], &reset[w]) != 0) return 1;
    printf("\n### (b) peak resident memory (VmHWM), each workload in a fresh process at %d thread%s\n\n",
           (int)tcs[n_tc - 1], tcs[n_tc - 1] > 1 ? "s" : "");
    printf("'after setup' = VmRSS with the fp32 weights loaded and the state allocated; the peak %s.\n\n",
           reset[0] == 0 ? "is reset to it (clear_refs) before two runs of the workload"
                         : "could NOT be reset (no /proc/self/clear_refs): it includes loading");
    printf("| process | after setup MiB | peak MiB | peak - inference peak | overhead |\n|---|---:|---:|---:|---:|\n");
    for (w = 0; w < N_WORKLOADS; w++)
        printf("| %s | %.1f | %.1f | %+.1f MiB | %+.2f %% |\n", workload_names[w], setup[w] / 1024.0, peak[w] / 1024.0,
               (double)(peak[w] - peak[0]) / 1024.0, 100.0 * (double)(peak[w] - peak[0]) / (double)peak[0]);
    printf("\nGRZO step peak vs inference peak: %+.2f %% (target <= +2 %%); MeZO %+.2f %%; FZOO %+.2f %%\n",
           100.0 * (double)(peak[W_GRZO] - peak[W_INFER]) / (double)peak[W_INFER],
           100.0 * (double)(peak[W_MEZO] - peak[W_INFER]) / (double)peak[W_INFER],
           100.0 * (double)(peak[W_FZOO] - peak[W_INFER]) / (double)peak[W_INFER]);
    return 0;
}

/* ---- main --------------------------------------------------------------------------------------- */
#define USAGE "usage: bench_llm --model PATH [--data SST2_TSV] [--batch B] [--rounds R] [--threads N] " \
              "[--transient-mb M] [--algo auto|per-example|two-gemm|fused] [--part all|time|memory] [--dump-tokens FILE]"

/* Formats a one-line refusal into err; returns 1. */
static int refuse(char *err, size_t n, const char *fmt, const char *arg) {
    snprintf(err, n, fmt, arg);
    return 1;
}

/* One numeric option, each with its range; 0 ok, else 1 with the message in err. */
static int parse_number(const char *a, const char *v, options *o, char *err, size_t n) {
    static const struct {
        const char *name;
        int64_t lo, hi;
    } num[] = {{"--batch", 1, MAX_B}, {"--rounds", 1, MAX_ROUNDS}, {"--threads", 0, 1024}, {"--transient-mb", 1, 65536}};
    int64_t x;
    int k;
    for (k = 0; k < 4 && strcmp(a, num[k].name); k++) {}
    if (k == 4) return refuse(err, n, "unknown option '%s'; " USAGE, a);
    if (cli_parse_int(a, v, num[k].lo, num[k].hi, &x, err, n) != 0) return 1;
    if (k == 0) o->batch = (int32_t)x;
    else if (k == 1) o->rounds = (int32_t)x;
    else if (k == 2) o->threads = (int32_t)x;
    else o->transient_mb = x;
    return 0;
}

/* 0 ok, else 1 with a one-line message in err. */
static int parse_options(int argc, char **argv, options *o, char *err, size_t n) {
    int i;
    memset(o, 0, sizeof *o);
    o->model = getenv("GRZO_LLM_MODEL");
    o->data = DEFAULT_DATA;
    o->batch = 16;
    o->rounds = DEFAULT_ROUNDS;
    o->transient_mb = 32;
    o->part = "all";
    for (i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (i + 1 == argc) return refuse(err, n, "%s needs a value; " USAGE, a);
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--mem-child")) {   /* internal: how run_mem_child runs this program again */
            if (workload_of_mode(v) < 0)
                return refuse(err, n, "--mem-child: expected infer, grzo, mezo or fzoo, got '%s' (bench_llm passes it to itself)", v);
            o->mem_child = v;
        }
        else if (!strcmp(a, "--dump-tokens")) o->dump_tokens = v;
        else if (!strcmp(a, "--part")) {
            if (strcmp(v, "all") && strcmp(v, "time") && strcmp(v, "memory"))
                return refuse(err, n, "--part: expected all, time or memory, got '%s'", v);
            o->part = v;
        } else if (!strcmp(a, "--algo")) {
            o->algo = !strcmp(v, "per-example") ? 1 : !strcmp(v, "two-gemm") ? 2 : !strcmp(v, "fused") ? 3 : !strcmp(v, "auto") ? 0 : -1;
            if (o->algo < 0) return refuse(err, n, "--algo: expected auto, per-example, two-gemm or fused, got '%s'", v);
        } else if (parse_number(a, v, o, err, n)) {
            return 1;
        }
    }
    return 0;
}

/* The label balance, so that a reader can see the data was read right (SST-2's train file
   is 44 % negative, 56 % positive). */
static void print_labels(const options *o, const workload *wl) {
    int32_t i, pos = 0;
    for (i = 0; i < wl->B; i++) pos += wl->ex[i].label;
    if (wl->file_labels[0] + wl->file_labels[1] > 0)
        printf("SST-2 file %s: %ld sentences labeled 0 (negative), %ld labeled 1 (positive)\n", o->data,
               wl->file_labels[0], wl->file_labels[1]);
    printf("labels of the B examples: %d negative, %d positive\n", (int)(wl->B - pos), (int)pos);
}

static void print_context(int argc, char **argv, const options *o, const bench *b) {
    int i, c;
    printf("## grzo %s bench_llm\n\ncommand:", grzo_version());
    for (i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n\nmodel %s: dim %d, hidden %d, %d layers, heads %d/%d, vocab %d, %s head (fp32 weights)\n", o->model,
           b->cfg.dim, b->cfg.hidden_dim, b->cfg.n_layers, b->cfg.n_heads, b->cfg.n_kv_heads, b->cfg.vocab_size,
           b->cfg.tied_output ? "tied" : "untied");
    printf("backend cpu, threads");
    for (c = 0; c < b->n_run; c++) printf(" %d", (int)b->run[c].threads);
    printf("%s, transient budget %lld MiB, linear algorithm %s", b->n_run > 1 ? " (interleaved)" : "", (long long)o->transient_mb,
           o->algo == 1 ? "PER_EXAMPLE" : o->algo == 2 ? "TWO_GEMM" : o->algo == 3 ? "FUSED" : "AUTO");
#ifdef GRZO_USE_OPENBLAS
    printf(", %s", openblas_get_config());
#endif
    printf("; load average at start %.2f\n", bench_load_average());
    cpu_env_report(stdout, "", &b->run[0].be);
    for (c = 0; c < b->n_run; c++) {
        int32_t tc = b->run[c].threads;
        double peak, g;
        bench_use_threads(tc);
        peak = cpu_env_peak_gflops((int)tc);
        g = cpu_env_gemm_gflops(&b->run[c].be, 1024, b->cfg.dim, b->cfg.dim, 5);
        printf("%d thread%s: fp32 peak (FMA loop) %.1f GFLOP/s; plain GEMM 1024x%dx%d: %.1f GFLOP/s = %.0f %% of peak "
               "(target >= 70 %%)\n", (int)tc, tc > 1 ? "s" : "", peak, b->cfg.dim, b->cfg.dim, g,
               peak > 0 ? 100.0 * g / peak : 0.0);
    }
    printf("B = %d examples, %s; prompt lengths:", b->wl.B,
           b->wl.synthetic ? "SYNTHETIC token sequences (no SST-2 file or tokenizer)" : "SST-2 training sentences + \" It was\"");
    for (i = 0; i < b->wl.B; i++) printf(" %d", b->wl.ex[i].n_tokens);
    printf("; candidates %d / %d; sigma 1e-3, lr 1e-7; FZOO N = %d\n", b->wl.cand[0], b->wl.cand[1], FZOO_PROBES);
    print_labels(o, &b->wl);
}

/* {"candidates": [id, id], "examples": [{"tokens": [...], "label": l}, ...]}; 0 ok, 1 on error */
static int dump_tokens(const char *path, const workload *wl) {
    file_out o;
    char err[1200];
    FILE *f;
    int32_t e, k;
    if (file_out_begin(&o, path, err, sizeof err) != 0) {   /* files.h: whole or not at all */
        fprintf(stderr, "bench_llm: %s\n", err);
        return 1;
    }
    f = o.f;
    fprintf(f, "{\"candidates\": [%d, %d], \"synthetic\": %s, \"examples\": [", (int)wl->cand[0], (int)wl->cand[1],
            wl->synthetic ? "true" : "false");
    for (e = 0; e < wl->B; e++) {
        fprintf(f, "%s\n  {\"label\": %d, \"tokens\": [", e ? "," : "", (int)wl->ex[e].label);
        for (k = 0; k < wl->ex[e].n_tokens; k++) fprintf(f, "%s%d", k ? ", " : "", (int)wl->ex[e].tokens[k]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
    if (file_out_commit(&o, err, sizeof err) != 0) {
        fprintf(stderr, "bench_llm: %s\n", err);
        return 1;
    }
    printf("bench_llm: wrote the token batch (%d examples) to %s\n", (int)wl->B, path);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    bench b;
    FILE *f;
    int rc;
    char err[512];
    cpu_env_reexec(argv);   /* the GEMM kernels of this CPU (OPENBLAS_CORETYPE, BLIS_ARCH_TYPE) */
    if (parse_options(argc, argv, &o, err, sizeof err)) {
        fprintf(stderr, "bench_llm: %s\n", err);
        return 2;
    }
    if (!o.model) o.model = DEFAULT_MODEL;
    if (!(f = fopen(o.model, "rb"))) {
        printf("SKIP: model %s not found (pass --model or set GRZO_LLM_MODEL)\n", o.model);
        return 77;
    }
    fclose(f);
    bench_use_threads(o.threads);
    if (o.mem_child) return mem_child_main(&o);
    if (bench_open(&o, &b) != 0) {
        bench_close(&b);
        return 1;
    }
    if (o.dump_tokens) {   /* the token batch, for bench/torch_mezo.py */
        rc = dump_tokens(o.dump_tokens, &b.wl);
        bench_close(&b);
        return rc;
    }
    print_context(argc, argv, &o, &b);
    rc = strcmp(o.part, "memory") ? bench_time(&o, &b) : 0;
    bench_close(&b);
    if (rc == 0 && strcmp(o.part, "time")) rc = bench_memory(&o);
    if (rc == 0) printf("\nload average at the end %.2f (this machine has %ld cores)\n", bench_load_average(),
                        sysconf(_SC_NPROCESSORS_ONLN));
    return rc;
}
