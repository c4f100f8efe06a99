/* bench_gpu.c - GRZO on the GPU: time and device memory of a fine-tuning step against the
   inference floor, in-place MeZO, MeZO through the operations, and FZOO (issue 16 item 8).

   Workload (fine-tuning as in MeZO's RTE setup): B = 16 examples, each a context of ~250
   tokens and 2 candidate continuations (1 and 2 tokens); an example copy forwards both
   candidates (2 sequences, llm_sequence_logprob) and its loss is the cross-entropy over the
   two candidates' log-likelihoods. Workloads, each in a fresh backend (clean accounting):
     floor           plain forward of the 2B copies a GRZO pass runs (4B sequences)
     GRZO            1 fused pass of 2B copies, update
     MeZO in place   MeZO's memory-optimal form: 2 passes of B on theta +- sigma z, restore, update
     MeZO (ops)      MeZO perturbing through the operations (transient per-layer weight)
     FZOO            N + 1 = 9 passes of B (N = 8 probes)
   --tokens FILE replaces the workload with bench_llm's token batch (bench_llm --dump-tokens:
   {"candidates": [a, b], "synthetic": bool, "examples": [{"label": l, "tokens": [...]}, ...]}),
   the batch bench/torch_mezo.py runs PyTorch's MeZO on, so that the two programs' figures are
   of the same batch: B = the file's examples, each copy forwards ONE sequence (its prompt,
   llm_forward, the logits at its last position) and its loss is the cross-entropy over the
   two candidates' logits there, as in bench_llm; the floor is the plain forward of the 2B
   copies. Only on SmolLM2's own weights (--model: the ids are its tokenizer's).
   Shapes: SmolLM2-135M (dim 576, 30 layers, 9/3 heads, FFN 1536, vocab 49152, tied; real
   weights with --model PATH.gguf, else random) and a random Llama-3-8B shape (dim 4096, 32
   layers, 32/8 heads, FFN 14336, vocab 128256, untied), both stored in --dtype (bf16).

   Per workload: wall time per step from CUDA events on the backend's stream (median of
   --steps >= 20 steps after --warmup steps), split into forward (inside the passes) and
   perturbation/update (outside them: in-place MeZO's shifts, the update); peak device
   memory = the backend's high-water mark (every cudaMalloc it makes, cuBLAS workspace
   included; grzo_backend_cuda_memory), cross-checked with cudaMemGetInfo (which also sees
   the CUDA context). Model FLOPs of the forward: 2 x matmul params x tokens + 2 x head
   params x scored positions + causal attention 4 x heads x head_dim x L(L+1)/2 per layer and
   sequence; achieved TFLOP/s against the H100 SXM bf16 dense peak (989 TFLOP/s).

   Output: the two tables (time, memory) per shape on stdout, and OUTDIR/bench_gpu.md and
   OUTDIR/bench_gpu.csv, rewritten after each workload (.tmp files renamed: never half-written;
   a run stopped by a time limit keeps the workloads it finished, the others read "not run").

   usage: bench_gpu [--out DIR] [--model SMOLLM2.gguf] [--shapes smollm2,llama8b] [--steps 20]
                    [--warmup 3] [--batch 16] [--seq-len 256] [--dtype bf16|f16|f32]
                    [--math fast|pedantic] [--transient-mb 64] [--attention auto|fused|gemm]
                    [--workloads floor,grzo,mezo_inplace,mezo_ops,fzoo] [--queued] [--quick] [--self-test]
                    [--tokens BATCH.json]
   --attention: the LLM forward's attention (model.h llm_attention; default auto: the cuBLAS
   form while its scratch is at most 4 GiB, else the fused kernel), so that the two forms can
   be timed against each other (issue 16 item 1: keep the faster).
   --workloads: run only these (default all; the others read "not run").
   --queued: after each workload's steps, as many again with the stream held (a host callback
   that sleeps 1.5 x the step's median + 2 ms) while the host enqueues the passes, so their
   launches are queued ahead and run back to back: the time a CUDA graph replay of the passes
   could reach at best (issue 16 item 3). The step's time minus this is the host's launch
   overhead, the most a graph could remove. An upper bound on the queued-ahead time: a host
   wait inside a pass (the losses' download at its end, a reused table slot) waits for the
   hold too, and what follows the wait is enqueued at the host's pace again.
   --shapes: a comma list of the names smollm2 and llama8b, each exactly (they run in that order).
   --quick: a tiny random model, 3 steps (the Meson test's GPU smoke run). It sets the model,
   shapes, batch, context and warm-up itself: --model, --shapes, --batch, --seq-len and
   --warmup are refused beside it.
   --tokens: needs --model; it fixes the shape and the batch: --quick, --batch, --seq-len and
   --shapes naming llama8b are refused beside it. The file is checked before the GPU is looked
   for (a bad one: one line, exit 1, nothing written); its ids against the model's vocabulary
   once the model is loaded.
   --self-test: the parts that need no GPU (parameter and FLOP counts of both shapes, the
   median, the report writers, the --tokens reader on good and bad files); run by Meson. The
   arguments are checked first (a bad one: one line, exit 2); then, without a GPU, anything
   else exits 77 (a --tokens file that cannot be read: exit 1 before that). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "grzo.h"
#include "backends/grzo_cuda.h"
#include "cli_args.h"
#include "files.h"
#include "json.h"
#include "llm.h"
#include "llm_internal.h"   /* llm__read_file: a regular file read whole */
#include "model.h"

#define MAX_B 64
#define MAX_STEPS 1000
#define MAX_PASSES 9             /* FZOO: N + 1 */
#define FZOO_N 8
#define H100_BF16_PEAK_TFLOPS 989.0
#define MAX_CAND_LEN 2
#define MAX_PROMPT_LEN 4096      /* --tokens: the longest sequence a file may hold (--seq-len's bound) */
#define MAX_BATCH_FILE (64u << 20)

/* ---- shapes and FLOPs (CPU-testable) --------------------------------------------------------- */
typedef struct shape {
    const char *name;
    llm_config cfg;
} shape;

static llm_config make_cfg(int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv, int32_t vocab,
                           float theta, int32_t tied) {
    llm_config c;
    memset(&c, 0, sizeof c);
    c.dim = dim;
    c.hidden_dim = hidden;
    c.n_layers = layers;
    c.n_heads = heads;
    c.n_kv_heads = kv;
    c.head_dim = dim / heads;
    c.vocab_size = vocab;
    c.max_seq_len = 4096;
    c.norm_eps = 1e-5f;
    c.rope_theta = theta;
    c.tied_output = tied;
    return c;
}

static shape shape_smollm2(void) { shape s = {"SmolLM2-135M", make_cfg(576, 1536, 30, 9, 3, 49152, 100000.0f, 1)}; return s; }
static shape shape_llama8b(void) { shape s = {"Llama-3-8B (random)", make_cfg(4096, 14336, 32, 32, 8, 128256, 500000.0f, 0)}; return s; }
static shape shape_quick(void) { shape s = {"tiny (quick)", make_cfg(64, 128, 2, 4, 2, 512, 10000.0f, 1)}; return s; }

/* weights of the matrices every token goes through (attention and FFN of all layers) */
static double matmul_params_per_token(const llm_config *c) {
    double hd = c->head_dim, q = (double)c->n_heads * hd, kv = (double)c->n_kv_heads * hd;
    return (double)c->n_layers * ((double)c->dim * q * 2.0 + (double)c->dim * kv * 2.0 + 3.0 * (double)c->dim * c->hidden_dim);
}

static double total_params(const llm_config *c) {
    double emb = (double)c->vocab_size * c->dim;
    return matmul_params_per_token(c) + (double)c->n_layers * 2.0 * c->dim + c->dim + emb * (c->tied_output ? 1.0 : 2.0);
}

/* forward FLOPs of sequences of lengths len[] with n_scored head positions in all */
static double forward_flops(const llm_config *c, const int32_t *len, int64_t n_seqs, int64_t n_scored) {
    double f = 0, attn_per_pair = 4.0 * (double)c->n_heads * c->head_dim * c->n_layers;
    int64_t s;
    for (s = 0; s < n_seqs; s++) {
        double L = len[s];
        f += 2.0 * matmul_params_per_token(c) * L + attn_per_pair * L * (L + 1.0) / 2.0;
    }
    return f + 2.0 * (double)n_scored * c->vocab_size * c->dim;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(const double *v, int n) {
    double *w = (double *)malloc((size_t)n * sizeof *w), m;
    if (!w || n < 1) { free(w); return NAN; }
    memcpy(w, v, (size_t)n * sizeof *w);
    qsort(w, (size_t)n, sizeof *w, cmp_double);
    m = n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
    free(w);
    return m;
}

/* ---- results and reports (CPU-testable) --------------------------------------------------------- */
enum { W_FLOOR = 0, W_GRZO, W_MEZO_INPLACE, W_MEZO, W_FZOO, N_WORKLOADS };
static const char *const workload_names[N_WORKLOADS] = {"floor: inference of the 2B copies", "GRZO", "MeZO in place",
                                                        "MeZO (through the ops)", "FZOO (N = 8)"};
static const char *const workload_keys[N_WORKLOADS] = {"floor", "grzo", "mezo_inplace", "mezo_ops", "fzoo"};

typedef struct result {
    int ran, ok;                       /* ran: measured or failed; not ran: not reached (yet) */
    double fwd_ms, upd_ms, total_ms;   /* medians */
    double flops;                      /* model FLOPs of the forwards of one step */
    size_t peak, now;                  /* backend high-water mark and bytes held after the steps */
    size_t dev_used;                   /* cudaMemGetInfo: total - free, after the steps */
    int steps;
    double queued_ms;                  /* --queued: median with the passes' launches queued ahead; 0: not measured */
} result;

typedef struct text { char *s; size_t len, cap; } text;

typedef struct report {
    text md, csv;
    size_t md_done, csv_done;          /* what the finished shapes wrote */
    int quiet;                         /* md_printf: the markdown only, not stdout */
    const char *dir;
} report;

static void text_vappend(text *t, const char *fmt, va_list ap) {
    va_list aq;
    int n;
    va_copy(aq, ap);
    n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0) return;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *m = (char *)realloc(t->s, cap);
        if (!m) return;
        t->s = m;
        t->cap = cap;
    }
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    t->len += (size_t)n;
}

#if defined(__GNUC__)
static void md_printf(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void csv_printf(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
/* to stdout and to the markdown */
static void md_printf(report *r, const char *fmt, ...) {
    va_list ap;
    if (!r->quiet) {
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
    }
    va_start(ap, fmt);
    text_vappend(&r->md, fmt, ap);
    va_end(ap);
}
static void csv_printf(report *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    text_vappend(&r->csv, fmt, ap);
    va_end(ap);
}

static void report_shape(report *r, const shape *sh, const result *res, double peak_tflops, const char *dtype) {
    const result *fl = &res[W_FLOOR];
    int w;
    md_printf(r, "\n### %s, %s weights: time per step (median)\n\n", sh->name, dtype);
    md_printf(r, "| workload | forward ms | perturbation/update ms | total ms | vs floor | model TFLOP | TFLOP/s | of %.0f peak |\n"
                 "|---|---:|---:|---:|---:|---:|---:|---:|\n", peak_tflops);
    for (w = 0; w < N_WORKLOADS; w++) {
        const result *x = &res[w];
        if (!x->ok) { md_printf(r, "| %s | %s | | | | | | |\n", workload_names[w], x->ran ? "failed" : "not run"); continue; }
        md_printf(r, "| %s | %.1f | %.1f | %.1f | %.2fx | %.2f | %.1f | %.1f %% |\n", workload_names[w], x->fwd_ms, x->upd_ms,
                  x->total_ms, fl->ok ? x->total_ms / fl->total_ms : NAN, x->flops * 1e-12,
                  x->flops / (x->total_ms * 1e-3) * 1e-12, 100.0 * x->flops / (x->total_ms * 1e-3) * 1e-12 / peak_tflops);
    }
    md_printf(r, "\n### %s, %s weights: peak device memory\n\n", sh->name, dtype);
    md_printf(r, "Cross-check: cudaMemGetInfo's device use after the steps, and its part not held by the backend (CUDA "
                 "context, cuBLAS internals, anything the model allocates itself).\n\n");
    md_printf(r, "| workload | peak GB | over floor GB | over floor %% | device used GB (cudaMemGetInfo) | not the backend's GB |\n"
                 "|---|---:|---:|---:|---:|---:|\n");
    for (w = 0; w < N_WORKLOADS; w++) {
        const result *x = &res[w];
        double over = fl->ok ? ((double)x->peak - (double)fl->peak) * 1e-9 : NAN;
        if (!x->ok) { md_printf(r, "| %s | %s | | | | |\n", workload_names[w], x->ran ? "failed" : "not run"); continue; }
        md_printf(r, "| %s | %.3f | %+.3f | %+.2f %% | %.3f | %.3f |\n", workload_names[w], (double)x->peak * 1e-9, over,
                  fl->ok ? 100.0 * over / ((double)fl->peak * 1e-9) : NAN, (double)x->dev_used * 1e-9,
                  ((double)x->dev_used - (double)x->now) * 1e-9);
    }
    for (w = 0; w < N_WORKLOADS && !(res[w].ok && res[w].queued_ms > 0); w++) {}
    if (w < N_WORKLOADS) {
        md_printf(r, "\n### %s, %s weights: launches queued ahead (--queued)\n\n", sh->name, dtype);
        md_printf(r, "The step with the host's launches of its passes queued ahead (the stream held while the host enqueues): "
                     "what a CUDA graph replay could reach at best. The difference is the launch overhead a graph could "
                     "remove, at most.\n\n| workload | total ms | queued ahead ms | launch overhead |\n|---|---:|---:|---:|\n");
        for (w = 0; w < N_WORKLOADS; w++)
            if (res[w].ok && res[w].queued_ms > 0)
                md_printf(r, "| %s | %.2f | %.2f | %.1f %% |\n", workload_names[w], res[w].total_ms, res[w].queued_ms,
                          100.0 * (res[w].total_ms - res[w].queued_ms) / res[w].total_ms);
    }
    if (res[W_GRZO].ok && res[W_MEZO_INPLACE].ok)
        md_printf(r, "\nGRZO step / in-place MeZO step: %.3fx (target <= 1.0; paper 1.23). GRZO peak over floor: %+.2f %% "
                     "(target <= +0.5 %%). GRZO %.1f ms/step, %.1f TFLOP/s.\n",
                  res[W_GRZO].total_ms / res[W_MEZO_INPLACE].total_ms,
                  fl->ok ? 100.0 * ((double)res[W_GRZO].peak - (double)fl->peak) / (double)fl->peak : NAN, res[W_GRZO].total_ms,
                  res[W_GRZO].flops / (res[W_GRZO].total_ms * 1e-3) * 1e-12);
    for (w = 0; w < N_WORKLOADS; w++) {
        const result *x = &res[w];
        int both = x->ok && fl->ok;   /* a workload or floor not run (or failed) has nothing over the floor */
        csv_printf(r, "%s,%s,%s,%d,%.4f,%.4f,%.4f,%.6g,%.4f,%zu,%lld,%.4f,%zu,%d,%.4f\n", sh->name, dtype, workload_keys[w], x->ok,
                x->fwd_ms, x->upd_ms, x->total_ms, x->flops, x->ok ? x->flops / (x->total_ms * 1e-3) * 1e-12 : 0.0, x->peak,
                both ? (long long)x->peak - (long long)fl->peak : 0LL,
                both && fl->peak ? 100.0 * ((double)x->peak - (double)fl->peak) / (double)fl->peak : 0.0, x->dev_used,
                x->steps, x->queued_ms);
    }
}

static const char CSV_HEADER[] = "shape,dtype,workload,ok,forward_ms,update_ms,total_ms,model_flops,tflops,peak_bytes,"
                                 "over_floor_bytes,over_floor_pct,device_used_bytes,steps,queued_ms\n";

static int report_open(report *r, const char *dir) {
    memset(r, 0, sizeof *r);
    r->dir = dir;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_gpu: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    csv_printf(r, "%s", CSV_HEADER);
    r->csv_done = r->csv.len;
    return 0;
}

/* the longest --out whose files' names (with "/bench_gpu.csv.tmp") fit write_file's buffers */
enum { OUT_PATH_CAP = 1100, OUT_DIR_MAX = OUT_PATH_CAP - 32 };

static int write_file(const char *dir, const char *name, const text *t) {
    char tmp[OUT_PATH_CAP], path[OUT_PATH_CAP];
    FILE *f;
    int n_tmp, n_path;
    n_tmp = snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    n_path = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n_tmp < 0 || n_tmp >= (int)sizeof tmp || n_path < 0 || n_path >= (int)sizeof path) return 1;   /* never a cut name */
    if (!(f = file_open_temp(tmp, NULL, 0))) return 1;   /* files.h */
    if (fwrite(t->s ? t->s : "", 1, t->len, f) != t->len) {
        fclose(f);
        remove(tmp);
        return 1;
    }
    return file_finish_temp(f, tmp, path, NULL, 0) != 0;
}

/* Write (or rewrite) both files from what is reported so far: called after each shape, so a
   run stopped by a time limit keeps the shapes it finished. Never half-written: .tmp + rename. */
static int report_flush(report *r) {
    if (write_file(r->dir, "bench_gpu.csv", &r->csv) || write_file(r->dir, "bench_gpu.md", &r->md)) {
        fprintf(stderr, "bench_gpu: could not write the report into %s\n", r->dir);
        return 1;
    }
    return 0;
}

/* The tables of the shape in progress from its results so far, over what its last call wrote;
   complete: the shape is finished (its tables go to stdout too and stay). */
static int report_progress(report *r, const shape *sh, const result *res, const char *dtype, int complete) {
    int bad;
    r->md.len = r->md_done;
    r->csv.len = r->csv_done;
    r->quiet = !complete;
    report_shape(r, sh, res, H100_BF16_PEAK_TFLOPS, dtype);
    r->quiet = 0;
    bad = report_flush(r);
    if (complete) {
        r->md_done = r->md.len;
        r->csv_done = r->csv.len;
    }
    return bad;
}

static void report_free(report *r) {
    free(r->md.s);
    free(r->csv.s);
    memset(r, 0, sizeof *r);
}

/* ---- the workload -------------------------------------------------------------------------------- */
typedef struct options {
    const char *out, *model, *tokens;
    unsigned shapes;              /* bit k: shape_keys[k] runs */
    const char *not_with_quick;   /* an option --quick would override, when one was given */
    const char *not_with_tokens;  /* an option --tokens fixes (shape, batch), when one was given */
    int64_t steps, warmup, batch, seq_len, transient_mb;
    grzo_dtype dtype;
    grzo_cuda_math math;
    llm_attention attention;
    unsigned workloads;           /* bit w: workload w runs */
    int queued, quick, self_test;
} options;

typedef struct example {
    int32_t *tokens[2];           /* random contexts: context + candidate k; --tokens: tokens[0] the prompt */
    int32_t len[2];
    int32_t n_context;            /* scored: tokens[k][n_context..len[k]); --tokens: the last position */
    int32_t label;
} example;

/* The B examples of a step, from either source: random contexts with two candidate
   continuations (2 sequences a copy, llm_sequence_logprob), or a --tokens file (1 sequence a
   copy, llm_forward at its last position). Everything downstream (the passes, the FLOPs, the
   state's capacity, the timing) reads it through seqs_per_copy, n_context and max_len. */
typedef struct workload {
    example ex[MAX_B];
    int32_t B;
    const char *file;             /* --tokens: the file; NULL: the random contexts */
    int32_t cand[2];              /* --tokens: the two candidates read at each prompt's last position */
    int32_t max_len;              /* longest sequence (the state's max_seq_len) */
    int32_t max_scored;           /* scored positions per sequence, at most */
    int32_t max_id, max_id_example;   /* --tokens: the largest id and its example (checked against the vocabulary) */
    int64_t n_tokens;             /* --tokens: the prompts' tokens, all examples */
    int synthetic;                /* --tokens: bench_llm made the prompts up (no SST-2 file or tokenizer) */
} workload;

static int32_t seqs_per_copy(const workload *wl) { return wl->file ? 1 : 2; }

static void workload_free(workload *wl) {
    int32_t i;
    for (i = 0; i < wl->B; i++) { free(wl->ex[i].tokens[0]); free(wl->ex[i].tokens[1]); }
    memset(wl, 0, sizeof *wl);
}

/* The random contexts: B examples of ~seq_len tokens over vocabulary V (~RTE). */
static void make_workload(workload *wl, const options *o, int32_t V) {
    uint64_t s = 0x5EEDull;
    int32_t i, k, t;
    memset(wl, 0, sizeof *wl);
    wl->B = (int32_t)o->batch;
    wl->max_len = (int32_t)o->seq_len + MAX_CAND_LEN;
    wl->max_scored = MAX_CAND_LEN;
    for (i = 0; i < wl->B; i++) {
        example *e = &wl->ex[i];
        e->n_context = (int32_t)o->seq_len - 4 - (i * 7) % 16;   /* ~RTE: 236..252 at 256 */
        if (e->n_context < 2) e->n_context = 2;
        e->label = i % 2;
        for (k = 0; k < 2; k++) {
            e->len[k] = e->n_context + 1 + k;                      /* candidates of 1 and 2 tokens */
            e->tokens[k] = (int32_t *)malloc((size_t)e->len[k] * sizeof(int32_t));
        }
        for (t = 0; t < e->len[1]; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            e->tokens[1][t] = (int32_t)((s >> 33) % (uint64_t)V);
        }
        memcpy(e->tokens[0], e->tokens[1], (size_t)e->n_context * sizeof(int32_t));
        e->tokens[0][e->n_context] = (int32_t)((e->tokens[1][e->n_context] + 1) % V);
    }
}

/* a JSON token id: an integer 0 to INT32_MAX (1.0 and true are not) */
static int json_token_id(const json_value *v, int32_t *id) {
    if (!v || v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > INT32_MAX) return 0;
    *id = (int32_t)v->integer;
    return 1;
}

/* --tokens: bench_llm --dump-tokens's file into wl. 0, or 1 with one line in err (naming the
   file and, where it is one, the example) and wl empty. The ids are checked against the
   model's vocabulary later (token_batch_fits), once the model is loaded. */
static int read_token_batch(const char *path, workload *wl, char *err, size_t errlen) {
    uint8_t *text;
    size_t size, at = 0;
    json_value root;
    const json_value *cand, *exs, *syn;
    char msg[256];
    int32_t i, t;
    memset(wl, 0, sizeof *wl);
    if (llm__read_file(path, MAX_BATCH_FILE, &text, &size, msg, sizeof msg)) {   /* msg names the path */
        snprintf(err, errlen, "%s", msg);
        return 1;
    }
    if (json_parse((const char *)text, size, &root, &at, msg, sizeof msg)) {
        free(text);
        snprintf(err, errlen, "%s: not JSON: %s (byte %zu)", path, msg, at);
        return 1;
    }
    free(text);
    cand = json_get(&root, "candidates");
    exs = json_get(&root, "examples");
    syn = json_get(&root, "synthetic");
    if (!cand || cand->type != JSON_ARRAY || !exs || exs->type != JSON_ARRAY) {
        snprintf(err, errlen, "%s: not a bench_llm token batch (no \"candidates\" and \"examples\" lists)", path);
        goto bad;
    }
    if (cand->n != 2 || !json_token_id(&cand->items[0], &wl->cand[0]) || !json_token_id(&cand->items[1], &wl->cand[1])) {
        snprintf(err, errlen, "%s: \"candidates\" must be two token ids", path);
        goto bad;
    }
    if (exs->n < 1 || exs->n > MAX_B) {
        snprintf(err, errlen, "%s: %zu examples, expected 1 to %d", path, exs->n, MAX_B);
        goto bad;
    }
    if (syn && syn->type != JSON_TRUE && syn->type != JSON_FALSE) {
        snprintf(err, errlen, "%s: \"synthetic\" must be true or false", path);
        goto bad;
    }
    wl->synthetic = syn && syn->type == JSON_TRUE;
    wl->max_scored = 1;
    for (i = 0; i < (int32_t)exs->n; i++) {
        const json_value *toks = json_get(&exs->items[i], "tokens"), *lab = json_get(&exs->items[i], "label");
        example *e = &wl->ex[i];
        if (!toks || toks->type != JSON_ARRAY || toks->n < 1 || toks->n > MAX_PROMPT_LEN) {
            snprintf(err, errlen, "%s: example %d: \"tokens\" must be a list of 1 to %d token ids", path, (int)i, MAX_PROMPT_LEN);
            goto bad;
        }
        if (!lab || lab->type != JSON_NUMBER || !lab->is_integer || (lab->integer != 0 && lab->integer != 1)) {
            snprintf(err, errlen, "%s: example %d: \"label\" must be 0 or 1", path, (int)i);
            goto bad;
        }
        if (!(e->tokens[0] = (int32_t *)malloc(toks->n * sizeof(int32_t)))) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto bad;
        }
        wl->B = i + 1;   /* what workload_free frees */
        for (t = 0; t < (int32_t)toks->n; t++) {
            if (!json_token_id(&toks->items[t], &e->tokens[0][t])) {
                snprintf(err, errlen, "%s: example %d: token %d is not a token id (an integer 0 to %d)", path, (int)i, (int)t,
                         INT32_MAX);
                goto bad;
            }
            if (e->tokens[0][t] > wl->max_id) { wl->max_id = e->tokens[0][t]; wl->max_id_example = i; }
        }
        e->len[0] = (int32_t)toks->n;
        e->n_context = e->len[0] - 1;   /* the one scored position: the last */
        e->label = (int32_t)lab->integer;
        wl->n_tokens += e->len[0];
        if (e->len[0] > wl->max_len) wl->max_len = e->len[0];
    }
    json_free(&root);
    wl->file = path;
    return 0;
bad:
    json_free(&root);
    workload_free(wl);
    return 1;
}

/* --tokens: every id (the candidates too) inside the model's vocabulary of V; 0, or 1 with one line in err */
static int token_batch_fits(const workload *wl, int32_t V, char *err, size_t errlen) {
    if (wl->cand[0] >= V || wl->cand[1] >= V)
        snprintf(err, errlen, "%s: candidate %d is not in the model's vocabulary (%d ids)", wl->file,
                 (int)(wl->cand[0] >= V ? wl->cand[0] : wl->cand[1]), (int)V);
    else if (wl->max_id >= V)
        snprintf(err, errlen, "%s: example %d: token %d is not in the model's vocabulary (%d ids)", wl->file,
                 (int)wl->max_id_example, (int)wl->max_id, (int)V);
    else return 0;
    return 1;
}

/* the batch, for the report's header */
static void describe_batch(char *buf, size_t n, const workload *wl, const options *o) {
    if (wl->file)
        snprintf(buf, n, "token batch %s: %d examples, %lld tokens (%s; loss over the candidates %d / %d at each prompt's "
                         "last position, one sequence a copy)",
                 wl->file, (int)wl->B, (long long)wl->n_tokens,
                 wl->synthetic ? "SYNTHETIC prompts: bench_llm had no SST-2 file or tokenizer" : "bench_llm's SST-2 prompts",
                 (int)wl->cand[0], (int)wl->cand[1]);
    else
        snprintf(buf, n, "B = %lld examples x 2 candidates, contexts of ~%lld tokens", (long long)o->batch, (long long)o->seq_len);
}

typedef struct bench {
    const options *o;
    shape sh;
    llm_weights *host_w;          /* real weights (host fp32) or NULL: random */
    const workload *wl;
    /* per run */
    grzo_backend be;
    grzo_ctx *ctx;
    llm_model m;
    int have_model;
    llm_state *st;
    float *logits;                /* --tokens: 2B rows of the vocabulary's logits (llm_forward's output, host) */
    llm_seq seqs[4 * MAX_B];
    int32_t n_context[4 * MAX_B];
    double sums[4 * MAX_B];
    char err[512];
} bench;

/* The state's capacity: the largest pass, GRZO's 2B copies of seqs_per_copy sequences each. */
static void state_capacity(const workload *wl, llm_state_desc *sd) {
    memset(sd, 0, sizeof *sd);
    sd->max_seqs = 2 * seqs_per_copy(wl) * wl->B;
    sd->max_rows = (int64_t)sd->max_seqs * wl->max_len;
    sd->max_outputs = (int64_t)sd->max_seqs * wl->max_scored;
    sd->max_seq_len = wl->max_len;
    sd->max_segments = 2 * wl->B;
}

/* lengths and scored positions of n copies, for the FLOP count */
static double copies_flops(const bench *b, const int64_t *which, int64_t n) {
    int32_t len[4 * MAX_B], spc = seqs_per_copy(b->wl), k;
    int64_t c, n_scored = 0;
    for (c = 0; c < n; c++) {
        const example *e = &b->wl->ex[which[c]];
        for (k = 0; k < spc; k++) {
            len[spc * c + k] = e->len[k];
            n_scored += e->len[k] - e->n_context;
        }
    }
    return forward_flops(&b->sh.cfg, len, spc * n, n_scored);
}

/* Forward n copies (copy c reads example which[c]) and write one loss each: the cross-entropy
   over the two candidates' scores, their log-likelihoods as sequences (random contexts) or
   their logits at the prompt's last position (--tokens). */
static grzo_status forward_copies(bench *b, const int64_t *which, int64_t n, int64_t n_segments, float *losses) {
    const workload *wl = b->wl;
    llm_batch batch;
    int64_t c;
    int32_t k, spc = seqs_per_copy(wl);
    grzo_status s;
    for (c = 0; c < n; c++)
        for (k = 0; k < spc; k++) {
            const example *e = &wl->ex[which[c]];
            llm_seq *q = &b->seqs[spc * c + k];
            memset(q, 0, sizeof *q);
            q->tokens = e->tokens[k];
            q->n_tokens = e->len[k];
            q->segment = c;
            b->n_context[spc * c + k] = e->n_context;
            if (wl->file) {   /* llm_forward's one output row: the last position */
                q->out_pos = &b->n_context[spc * c + k];
                q->n_out = 1;
            }
        }
    batch.seqs = b->seqs;
    batch.n_seqs = (int32_t)(spc * n);
    batch.n_segments = n_segments;
    s = wl->file ? llm_forward(b->ctx, &b->m, b->st, &batch, b->logits)
                 : llm_sequence_logprob(b->ctx, &b->m, b->st, &batch, b->n_context, b->sums, NULL);
    if (s != GRZO_OK) {
        snprintf(b->err, sizeof b->err, "%s", llm_model_error(&b->m));
        return s;
    }
    for (c = 0; c < n; c++) {
        const float *l = wl->file ? b->logits + c * b->sh.cfg.vocab_size : NULL;
        double a = l ? l[wl->cand[0]] : b->sums[2 * c], g = l ? l[wl->cand[1]] : b->sums[2 * c + 1];
        double mx = a > g ? a : g, lse = mx + log(exp(a - mx) + exp(g - mx));
        losses[c] = (float)(lse - (wl->ex[which[c]].label ? g : a));
    }
    return GRZO_OK;
}

#define CU_OK(call) ((call) == cudaSuccess)

/* --queued: a host callback on the stream that sleeps, so the work enqueued behind it waits */
static void CUDART_CB hold_stream(void *ms) {
    double v = *(const double *)ms;
    struct timespec ts;
    ts.tv_sec = (time_t)(v / 1000.0);
    ts.tv_nsec = (long)((v - 1000.0 * (double)ts.tv_sec) * 1e6);
    nanosleep(&ts, NULL);
}

/* One measured unit (a step, or for the floor one forward). Events on the backend's stream:
   forward = the time inside the passes, the rest (in-place shifts, update) is "update".
   *hold_ms > 0: the stream is held that long before the unit's first event (--queued). */
static grzo_status timed_unit(bench *b, int w, cudaEvent_t *ev, double *hold_ms, double *fwd_ms, double *total_ms) {
    cudaStream_t stream;
    float losses[2 * MAX_B], ms;
    int64_t which[2 * MAX_B], c;
    grzo_step_info si;
    grzo_status s = GRZO_OK;
    int32_t p;
    void *sp;
    grzo_backend_cuda_stream(&b->be, &sp);
    stream = (cudaStream_t)sp;
    *fwd_ms = 0;
    if (*hold_ms > 0 && !CU_OK(cudaLaunchHostFunc(stream, hold_stream, hold_ms))) {
        snprintf(b->err, sizeof b->err, "cudaLaunchHostFunc failed");
        return GRZO_ERR_BACKEND;
    }
    cudaEventRecord(ev[0], stream);
    if (w == W_FLOOR) {
        for (c = 0; c < 2 * b->wl->B; c++) which[c] = c % b->wl->B;
        s = forward_copies(b, which, 2 * b->wl->B, 0, losses);
        cudaEventRecord(ev[1], stream);
        if (s != GRZO_OK || !CU_OK(cudaEventSynchronize(ev[1])) || !CU_OK(cudaEventElapsedTime(&ms, ev[0], ev[1])))
            return s != GRZO_OK ? s : GRZO_ERR_BACKEND;
        *fwd_ms = *total_ms = ms;
        return GRZO_OK;
    }
    s = grzo_step_begin(b->ctx, b->wl->B, &si);
    for (p = 0; s == GRZO_OK && p < si.n_passes; p++) {
        grzo_pass_info pi;
        s = grzo_pass_begin(b->ctx, &pi);
        cudaEventRecord(ev[2 + 2 * p], stream);
        if (s == GRZO_OK) s = forward_copies(b, pi.example, pi.n_segments, pi.n_segments, losses);
        if (s == GRZO_OK) s = grzo_pass_end(b->ctx, losses);
        cudaEventRecord(ev[3 + 2 * p], stream);
    }
    if (s == GRZO_OK) s = grzo_step_end(b->ctx, NULL);
    cudaEventRecord(ev[1], stream);
    if (s != GRZO_OK) {
        if (!b->err[0]) snprintf(b->err, sizeof b->err, "%s", grzo_last_error(b->ctx));
        grzo_step_abort(b->ctx);
        return s;
    }
    if (!CU_OK(cudaEventSynchronize(ev[1])) || !CU_OK(cudaEventElapsedTime(&ms, ev[0], ev[1]))) return GRZO_ERR_BACKEND;
    *total_ms = ms;
    for (p = 0; p < si.n_passes; p++) {
        if (!CU_OK(cudaEventElapsedTime(&ms, ev[2 + 2 * p], ev[3 + 2 * p]))) return GRZO_ERR_BACKEND;
        *fwd_ms += ms;
    }
    return GRZO_OK;
}

static grzo_estimator estimator_of(int w) {
    return w == W_GRZO ? GRZO_ESTIMATOR_GRZO : w == W_MEZO_INPLACE ? GRZO_ESTIMATOR_MEZO_INPLACE
         : w == W_MEZO ? GRZO_ESTIMATOR_MEZO : GRZO_ESTIMATOR_FZOO;
}

static void run_close(bench *b) {
    if (b->st) llm_state_free(b->st);
    free(b->logits);
    if (b->have_model) llm_model_free(&b->m);
    if (b->ctx) grzo_destroy(b->ctx);
    if (b->be.iface) grzo_backend_destroy(&b->be);
    b->st = NULL;
    b->logits = NULL;
    b->ctx = NULL;
    b->have_model = 0;
}

/* A fresh backend, context, model and state for workload w. */
static grzo_status run_open(bench *b, int w) {
    grzo_cuda_desc cd;
    grzo_desc d;
    llm_model_desc md;
    llm_state_desc sd;
    grzo_status s;
    memset(&cd, 0, sizeof cd);
    cd.math = b->o->math;
    cd.transient_bytes = (size_t)b->o->transient_mb << 20;
    if ((s = grzo_backend_cuda_create(&cd, &b->be)) != GRZO_OK) {
        snprintf(b->err, sizeof b->err, "grzo_backend_cuda_create: %s", grzo_status_str(s));
        return s;
    }
    memset(&d, 0, sizeof d);
    d.backend = &b->be;
    d.estimator = w == W_FLOOR ? GRZO_ESTIMATOR_GRZO : estimator_of(w);
    d.lr = 1e-7f;              /* steps must not wreck the model: the time is the same */
    d.sigma = 1e-3f;
    d.fzoo_probes = FZOO_N;
    if ((s = grzo_create(&d, &b->ctx)) != GRZO_OK) {
        snprintf(b->err, sizeof b->err, "grzo_create: %s", grzo_status_str(s));
        return s;
    }
    memset(&md, 0, sizeof md);
    md.dtype = b->o->dtype;
    md.random_init_seed = b->host_w ? 0 : 0xB3C4ull;
    memset(&b->m, 0, sizeof b->m);
    if ((s = llm_model_register_ex(b->ctx, &b->m, &b->sh.cfg, b->host_w, &md)) != GRZO_OK) {
        snprintf(b->err, sizeof b->err, "%s", llm_model_error(&b->m));
        return s;
    }
    b->have_model = 1;
    state_capacity(b->wl, &sd);
    sd.attention = b->o->attention;
    if ((s = llm_state_create(b->ctx, &b->m, &sd, &b->st)) != GRZO_OK) {
        snprintf(b->err, sizeof b->err, "%s", llm_model_error(&b->m));
        return s;
    }
    if (b->wl->file && !(b->logits = (float *)malloc((size_t)sd.max_seqs * (size_t)b->sh.cfg.vocab_size * sizeof(float)))) {
        snprintf(b->err, sizeof b->err, "out of memory for the logits of %d sequences", (int)sd.max_seqs);
        return GRZO_ERR_OUT_OF_MEMORY;
    }
    return GRZO_OK;
}

static void run_workload(bench *b, int w, result *r) {
    cudaEvent_t ev[2 + 2 * MAX_PASSES];
    double fwd[MAX_STEPS], tot[MAX_STEPS], upd[MAX_STEPS];
    int64_t which[2 * MAX_B], c, n_units;
    grzo_cuda_memory mem;
    double hold = 0.0;
    int i, k, n_ev = 2 + 2 * MAX_PASSES;
    memset(r, 0, sizeof *r);
    r->ran = 1;
    b->err[0] = '\0';
    for (k = 0; k < n_ev; k++) cudaEventCreate(&ev[k]);
    printf("  %s ... ", workload_names[w]);
    fflush(stdout);
    if (run_open(b, w) != GRZO_OK) goto done;
    grzo_backend_cuda_reset_peak(&b->be);   /* the peak counts weights, state and everything a step adds */
    for (i = 0; i < b->o->warmup + b->o->steps; i++) {
        double f, t;
        if (timed_unit(b, w, ev, &hold, &f, &t) != GRZO_OK) goto done;
        if (i >= b->o->warmup) {
            fwd[i - b->o->warmup] = f;
            tot[i - b->o->warmup] = t;
            upd[i - b->o->warmup] = t - f;
        }
    }
    if (grzo_backend_cuda_memory(&b->be, &mem) != GRZO_OK) {
        snprintf(b->err, sizeof b->err, "grzo_backend_cuda_memory failed");
        goto done;
    }
    r->steps = (int)b->o->steps;
    r->fwd_ms = median(fwd, r->steps);
    r->upd_ms = median(upd, r->steps);
    r->total_ms = median(tot, r->steps);
    if (b->o->queued) {   /* as many steps again, the passes' launches queued behind a hold */
        hold = 1.5 * r->total_ms + 2.0;
        for (i = 0; i < r->steps; i++) {
            double f;
            if (timed_unit(b, w, ev, &hold, &f, &tot[i]) != GRZO_OK) goto done;
        }
        r->queued_ms = median(tot, r->steps);
    }
    r->peak = mem.bytes_peak;
    r->now = mem.bytes_now;
    r->dev_used = mem.device_total - mem.device_free;
    /* model FLOPs of the step's forwards: 2B copies for the floor and GRZO, 2 x B for MeZO, 9 x B for FZOO */
    n_units = w == W_FZOO ? FZOO_N + 1 : (w == W_FLOOR || w == W_GRZO) ? 1 : 2;
    for (c = 0; c < 2 * b->wl->B; c++) which[c] = c % b->wl->B;
    r->flops = (w == W_FLOOR || w == W_GRZO) ? copies_flops(b, which, 2 * b->wl->B)
                                             : (double)n_units * copies_flops(b, which, b->wl->B);
    r->ok = 1;
done:
    if (r->ok && r->queued_ms > 0) printf("%.1f ms/step (%.1f queued ahead), peak %.3f GB\n", r->total_ms, r->queued_ms, (double)r->peak * 1e-9);
    else if (r->ok) printf("%.1f ms/step, peak %.3f GB\n", r->total_ms, (double)r->peak * 1e-9);
    else printf("FAILED: %s\n", b->err[0] ? b->err : "(no detail)");
    run_close(b);
    for (k = 0; k < n_ev; k++) cudaEventDestroy(ev[k]);
}

/* A comma list of names, each exactly one of keys[0..n), into a bit set; 0 when a name is
   unknown or empty or the list is empty. */
static unsigned parse_name_list(const char *list, const char *const *keys, int n_keys) {
    unsigned set = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int k, found = 0;
        for (k = 0; k < n_keys; k++)
            if (strlen(keys[k]) == n && !strncmp(p, keys[k], n)) { set |= 1u << k; found = 1; }
        if (!found) return 0;
        p += n;
        if (*p == ',' && !*++p) return 0;   /* a trailing comma: an empty name */
    }
    return set;
}

/* --workloads: a comma list of workload_keys into a bit set */
static unsigned parse_workloads(const char *list) { return parse_name_list(list, workload_keys, N_WORKLOADS); }

/* --shapes: a comma list of shape_keys (in any order; they run in this order) */
enum { SHAPE_SMOLLM2, SHAPE_LLAMA8B, N_SHAPE_KEYS };
static const char *const shape_keys[N_SHAPE_KEYS] = {"smollm2", "llama8b"};
static unsigned parse_shapes(const char *list) { return parse_name_list(list, shape_keys, N_SHAPE_KEYS); }

/* ---- self-test: what needs no GPU ------------------------------------------------------------------ */
static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    int bad = !f || fputs(text, f) < 0;
    if (f && fclose(f) != 0) bad = 1;
    return bad;
}

/* a check of the self-test: counted in the caller's `fails`, said on one line */
#define ST(c, ...) do { if (!(c)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)
/* --tokens: a good file read whole; bad ones refused with one line, nothing kept; the ids
   against a vocabulary; the workload's FLOPs and state capacity (the default's beside it) */
static int self_test_tokens(const char *dir) {
    static const struct { const char *json, *why; } bad[] = {
        {"{\"candidates\": [5], \"examples\": [{\"label\": 0, \"tokens\": [1]}]}", "\"candidates\" must be two token ids"},
        {"{\"candidates\": [5, -6], \"examples\": [{\"label\": 0, \"tokens\": [1]}]}", "\"candidates\" must be two token ids"},
        {"{\"candidates\": [5, 6], \"examples\": []}", "0 examples, expected 1 to 64"},
        {"{\"candidates\": [5, 6], \"examples\": {}}", "not a bench_llm token batch"},
        {"{\"examples\": [{\"label\": 0, \"tokens\": [1]}]}", "not a bench_llm token batch"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 0, \"tokens\": [1]}", "not JSON"},
        {"{\"candidates\": [5, 6], \"synthetic\": 1, \"examples\": [{\"label\": 0, \"tokens\": [1]}]}",
         "\"synthetic\" must be true or false"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 2, \"tokens\": [1]}]}", "example 0: \"label\" must be 0 or 1"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": true, \"tokens\": [1]}]}", "example 0: \"label\" must be 0 or 1"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 1, \"tokens\": [1]}, {\"label\": 0, \"tokens\": []}]}",
         "example 1: \"tokens\" must be a list of 1 to 4096 token ids"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 1, \"tokens\": [1]}, {\"label\": 0}]}",
         "example 1: \"tokens\" must be a list"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 1, \"tokens\": [1, -3]}]}", "example 0: token 1 is not a token id"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 1, \"tokens\": [1, 2.0]}]}", "example 0: token 1 is not a token id"},
        {"{\"candidates\": [5, 6], \"examples\": [{\"label\": 1, \"tokens\": [1, 2147483648]}]}", "token 1 is not a token id"},
    };
    const char *good = "{\"candidates\": [3, 7], \"synthetic\": false, \"examples\": [\n"
                       "  {\"label\": 1, \"tokens\": [1, 2, 3]},\n  {\"label\": 0, \"tokens\": [9]}\n]}\n";
    static bench fb;   /* large: not on the stack */
    shape s3 = shape_quick();
    options o;
    workload wl;
    llm_state_desc sd;
    char path[300], err[600], text[1400];
    int64_t which[2] = {0, 1};
    int32_t len[2] = {3, 1}, len_ctx[2];
    size_t k;
    int fails = 0;
    memset(&o, 0, sizeof o);
    snprintf(path, sizeof path, "%s/batch.json", dir);
    ST(write_text(path, good) == 0, "cannot write %s", path);
    ST(read_token_batch(path, &wl, err, sizeof err) == 0, "--tokens: a good file refused: %s", err);
    ST(wl.B == 2 && wl.cand[0] == 3 && wl.cand[1] == 7 && !wl.synthetic && wl.file == path && wl.n_tokens == 4 &&
           wl.max_len == 3 && wl.max_scored == 1 && wl.max_id == 9 && wl.max_id_example == 1 && seqs_per_copy(&wl) == 1,
       "--tokens: the good file's batch (B %d, candidates %d/%d, %lld tokens, longest %d, largest id %d in example %d)",
       (int)wl.B, (int)wl.cand[0], (int)wl.cand[1], (long long)wl.n_tokens, (int)wl.max_len, (int)wl.max_id,
       (int)wl.max_id_example);
    ST(wl.B == 2 && wl.ex[0].len[0] == 3 && wl.ex[0].tokens[0][0] == 1 && wl.ex[0].tokens[0][2] == 3 && wl.ex[0].label == 1 &&
           wl.ex[0].n_context == 2 && wl.ex[1].len[0] == 1 && wl.ex[1].tokens[0][0] == 9 && wl.ex[1].label == 0 &&
           wl.ex[1].n_context == 0 && !wl.ex[0].tokens[1],
       "--tokens: the good file's examples (each scored at its last position)");
    ST(token_batch_fits(&wl, 10, err, sizeof err) == 0, "--tokens: ids 0..9 refused for a vocabulary of 10: %s", err);
    ST(token_batch_fits(&wl, 9, err, sizeof err) == 1 && strstr(err, "example 1: token 9 is not in the model's vocabulary (9 ids)"),
       "--tokens: id 9 of example 1 against a vocabulary of 9: '%s'", err);
    ST(token_batch_fits(&wl, 7, err, sizeof err) == 1 && strstr(err, "candidate 7 is not in the model's vocabulary (7 ids)"),
       "--tokens: candidate 7 against a vocabulary of 7: '%s'", err);
    describe_batch(text, sizeof text, &wl, &o);
    ST(!strncmp(text, "token batch ", 12) && strstr(text, "/batch.json: 2 examples, 4 tokens (bench_llm's SST-2 prompts"),
       "--tokens: the report's batch line: '%s'", text);
    /* the FLOPs: one sequence a copy, one scored position (the last) each; the capacity: 2B sequences */
    memset(&fb, 0, sizeof fb);
    fb.sh = s3;
    fb.wl = &wl;
    ST(copies_flops(&fb, which, 2) == forward_flops(&s3.cfg, len, 2, 2), "--tokens: FLOPs of two copies %.0f, expected %.0f",
       copies_flops(&fb, which, 2), forward_flops(&s3.cfg, len, 2, 2));
    state_capacity(&wl, &sd);
    ST(sd.max_seqs == 4 && sd.max_rows == 12 && sd.max_outputs == 4 && sd.max_seq_len == 3 && sd.max_segments == 4,
       "--tokens: state capacity (seqs %d, rows %lld, outputs %lld, length %d)", (int)sd.max_seqs, (long long)sd.max_rows,
       (long long)sd.max_outputs, (int)sd.max_seq_len);
    workload_free(&wl);
    /* the random contexts through the same code: a copy is 2 sequences, its candidates' tokens scored */
    o.batch = 2;
    o.seq_len = 16;
    make_workload(&wl, &o, s3.cfg.vocab_size);
    len_ctx[0] = wl.ex[1].n_context + 1;
    len_ctx[1] = wl.ex[1].n_context + 2;
    ST(copies_flops(&fb, which + 1, 1) == forward_flops(&s3.cfg, len_ctx, 2, 3), "random contexts: FLOPs of one copy");
    state_capacity(&wl, &sd);
    ST(sd.max_seqs == 8 && sd.max_rows == 8 * 18 && sd.max_outputs == 8 * MAX_CAND_LEN && sd.max_seq_len == 18 &&
           sd.max_segments == 4, "random contexts: state capacity");
    describe_batch(text, sizeof text, &wl, &o);
    ST(!strcmp(text, "B = 2 examples x 2 candidates, contexts of ~16 tokens"), "random contexts: the batch line '%s'", text);
    workload_free(&wl);
    /* a made-up batch says so */
    ST(write_text(path, "{\"candidates\": [3, 7], \"synthetic\": true, \"examples\": [{\"label\": 1, \"tokens\": [1]}]}") == 0 &&
           read_token_batch(path, &wl, err, sizeof err) == 0 && wl.synthetic,
       "--tokens: a synthetic batch: %s", err);
    describe_batch(text, sizeof text, &wl, &o);
    ST(strstr(text, "SYNTHETIC") != NULL, "--tokens: a synthetic batch's line: '%s'", text);
    workload_free(&wl);
    /* bad files: refused with one line naming the file and the problem, nothing kept */
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc;
        ST(write_text(path, bad[k].json) == 0, "cannot write %s", path);
        rc = read_token_batch(path, &wl, err, sizeof err);
        ST(rc == 1 && strstr(err, path) && strstr(err, bad[k].why) && !strchr(err, '\n') && wl.B == 0 && !wl.file,
           "--tokens: bad file %d (%s): rc %d, '%s', want '%s'", (int)k, bad[k].json, rc, err, bad[k].why);
        workload_free(&wl);
    }
    {   /* one example past MAX_B */
        char many[64 * (MAX_B + 2)];
        size_t n = (size_t)snprintf(many, sizeof many, "{\"candidates\": [5, 6], \"examples\": [");
        int e;
        for (e = 0; e <= MAX_B; e++) n += (size_t)snprintf(many + n, sizeof many - n, "%s{\"label\": 0, \"tokens\": [1]}", e ? ", " : "");
        snprintf(many + n, sizeof many - n, "]}");
        ST(write_text(path, many) == 0 && read_token_batch(path, &wl, err, sizeof err) == 1 &&
               strstr(err, "65 examples, expected 1 to 64") && wl.B == 0,
           "--tokens: %d examples: '%s'", MAX_B + 1, err);
    }
    remove(path);
    ST(read_token_batch(path, &wl, err, sizeof err) == 1 && strstr(err, "cannot open") && wl.B == 0, "--tokens: a missing file: '%s'",
       err);
    ST(read_token_batch(dir, &wl, err, sizeof err) == 1 && strstr(err, "is a directory"), "--tokens: a folder: '%s'", err);
    return fails;
}

static int self_test(void) {
    shape s1 = shape_smollm2(), s2 = shape_llama8b(), s3 = shape_quick();
    double v[5] = {5, 1, 4, 2, 3}, v2[4] = {4, 1, 3, 2};
    int32_t len1[1] = {1}, len2[1] = {3};
    int fails = 0;
    char dir[256], path[300], line[512];
    report r;
    result res[N_WORKLOADS];
    FILE *f;
    int w;
    ST(parse_workloads("floor") == 1u && parse_workloads("fzoo,floor") == (1u | 1u << W_FZOO) &&
       parse_workloads("floor,grzo,mezo_inplace,mezo_ops,fzoo") == (1u << N_WORKLOADS) - 1,
       "--workloads: known lists");
    ST(!parse_workloads("") && !parse_workloads("floor,") && !parse_workloads(",floor") && !parse_workloads("flo") &&
       !parse_workloads("floor,mezo"), "--workloads: unknown or empty names must be refused");
    ST(parse_shapes("smollm2") == 1u && parse_shapes("llama8b,smollm2") == 3u, "--shapes: known lists");
    ST(!parse_shapes("smollm2,bogus") && !parse_shapes("xsmollm2y") && !parse_shapes("") && !parse_shapes("smollm2,"),
       "--shapes: a name must be exactly smollm2 or llama8b");
    /* published parameter counts: SmolLM2-135M 134,515,008; Llama-3-8B 8,030,261,248 */
    ST(total_params(&s1.cfg) == 134515008.0, "SmolLM2 params %.0f, expected 134515008", total_params(&s1.cfg));
    ST(total_params(&s2.cfg) == 8030261248.0, "Llama-3-8B params %.0f, expected 8030261248", total_params(&s2.cfg));
    /* one token: 2 x matmul params + attention over one pair + no head; three tokens: 6 pairs */
    ST(forward_flops(&s3.cfg, len1, 1, 0) == 2.0 * matmul_params_per_token(&s3.cfg) + 4.0 * 4 * 16 * 2,
       "FLOPs of one token: %.0f", forward_flops(&s3.cfg, len1, 1, 0));
    ST(forward_flops(&s3.cfg, len2, 1, 1) ==
           6.0 * matmul_params_per_token(&s3.cfg) + 4.0 * 4 * 16 * 2 * 6 + 2.0 * 512 * 64,
       "FLOPs of three tokens and one scored position: %.0f", forward_flops(&s3.cfg, len2, 1, 1));
    ST(median(v, 5) == 3.0 && median(v2, 4) == 2.5 && v[0] == 5, "median (and it must not reorder its input)");
    /* the writers: a report of made-up results has both tables and one CSV row per workload */
    snprintf(dir, sizeof dir, "%s/bench_gpu_selftest_%ld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)time(NULL));
    memset(res, 0, sizeof res);
    for (w = 0; w < N_WORKLOADS; w++) {
        res[w].ok = 1;
        res[w].total_ms = 10.0 * (w + 1);
        res[w].fwd_ms = 8.0 * (w + 1);
        res[w].upd_ms = 2.0 * (w + 1);
        res[w].flops = 1e12;
        res[w].peak = (size_t)1000000000 + (size_t)w * 5000000;
        res[w].now = res[w].peak;
        res[w].dev_used = res[w].peak + 500000000;
        res[w].steps = 20;
    }
    if (report_open(&r, dir) != 0) return 1;
    /* after the fourth workload, which failed: the files say so, and the fifth is "not run" */
    res[W_MEZO].ok = 0;
    res[W_MEZO].ran = 1;
    res[W_FZOO].ok = 0;
    ST(report_progress(&r, &s3, res, "bf16", 0) == 0, "report_progress (partial)");
    ST(r.md.s && strstr(r.md.s, "| MeZO (through the ops) | failed |") && strstr(r.md.s, "| FZOO (N = 8) | not run |"),
       "partial tables: a failed and a not-run workload");
    ST(r.md.s && !strstr(r.md.s, "queued ahead"), "no --queued table without queued times");
    res[W_MEZO].ok = 1;
    res[W_FZOO].ok = 1;
    res[W_FLOOR].queued_ms = 8.0;   /* --queued measured the floor only */
    ST(report_progress(&r, &s3, res, "bf16", 1) == 0, "report_progress (complete)");
    ST(r.md.s && !strstr(r.md.s, "not run") && strstr(r.md.s, "time per step") &&
           !strstr(strstr(r.md.s, "time per step") + 1, "time per step"),
       "the complete tables replace the partial ones (once each)");
    ST(r.md.s && strstr(r.md.s, "peak device memory") && strstr(r.md.s, "GRZO step / in-place MeZO step: 0.667x"),
       "markdown lacks the tables or the ratio");
    ST(r.md.s && strstr(r.md.s, "| GRZO | 16.0 | 4.0 | 20.0 | 2.00x |"), "time row of GRZO");
    ST(r.md.s && strstr(r.md.s, "| GRZO | 1.005 | +0.005 | +0.50 % | 1.505 | 0.500 |"), "memory row of GRZO");
    ST(r.md.s && strstr(r.md.s, "| floor: inference of the 2B copies | 10.00 | 8.00 | 20.0 % |") &&
           !strstr(r.md.s, "| GRZO | 20.00 |"), "--queued table: the floor's row, and no row for a workload not measured so");
    report_free(&r);
    snprintf(path, sizeof path, "%s/bench_gpu.csv", dir);
    f = fopen(path, "r");
    ST(f != NULL, "no %s", path);
    if (f) {
        int n = 0, queued_col = 0;
        while (fgets(line, sizeof line, f)) {
            n++;
            if (strstr(line, ",floor,") && strstr(line, ",8.0000\n")) queued_col = 1;
        }
        fclose(f);
        ST(n == 1 + N_WORKLOADS, "CSV has %d lines, expected %d", n, 1 + N_WORKLOADS);
        ST(queued_col, "the floor's CSV row lacks its queued_ms");
        remove(path);
    }
    snprintf(path, sizeof path, "%s/bench_gpu.md", dir);
    ST(remove(path) == 0, "no %s", path);
    fails += self_test_tokens(dir);
    rmdir(dir);
    printf("%s: bench_gpu self-test\n", fails ? "FAIL" : "ok");
    return fails ? 1 : 0;
#undef ST
}

/* ---- main ------------------------------------------------------------------------------------------ */
static int parse_options(int argc, char **argv, options *o) {
    char err[256];
    int i;
    memset(o, 0, sizeof *o);
    o->out = "bench_gpu_out";
    o->shapes = (1u << N_SHAPE_KEYS) - 1;
    o->steps = 20;
    o->warmup = 3;
    o->batch = 16;
    o->seq_len = 256;
    o->transient_mb = 64;
    o->dtype = GRZO_DTYPE_BF16;
    o->math = GRZO_CUDA_MATH_FAST;
    o->workloads = (1u << N_WORKLOADS) - 1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "--self-test")) { o->self_test = 1; continue; }
        if (!strcmp(a, "--queued")) { o->queued = 1; continue; }
        if (!v) { fprintf(stderr, "bench_gpu: %s needs a value\n", a); return 1; }
        i++;
        /* what --quick sets for itself: given beside it, one would be silently ignored */
        if (!o->not_with_quick && (!strcmp(a, "--model") || !strcmp(a, "--shapes") || !strcmp(a, "--batch") ||
                                   !strcmp(a, "--seq-len") || !strcmp(a, "--warmup")))
            o->not_with_quick = a;
        if (!o->not_with_tokens && (!strcmp(a, "--batch") || !strcmp(a, "--seq-len"))) o->not_with_tokens = a;
        if (!strcmp(a, "--out")) {
            o->out = v;
            if (!*v || strlen(v) > OUT_DIR_MAX) {
                snprintf(err, sizeof err, "--out: expected a folder name of 1 to %d characters", (int)OUT_DIR_MAX);
                rc = -1;
            }
        } else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--shapes")) {
            o->shapes = parse_shapes(v);
            if (!o->shapes) {
                snprintf(err, sizeof err, "--shapes: expected a comma list of smollm2, llama8b, got '%.100s'", v);
                rc = -1;
            }
            if (!o->not_with_tokens && (o->shapes & (1u << SHAPE_LLAMA8B))) o->not_with_tokens = "--shapes naming llama8b";
        }
        else if (!strcmp(a, "--steps")) rc = cli_parse_int(a, v, 1, MAX_STEPS, &o->steps, err, sizeof err);
        else if (!strcmp(a, "--warmup")) rc = cli_parse_int(a, v, 0, 100, &o->warmup, err, sizeof err);
        else if (!strcmp(a, "--batch")) rc = cli_parse_int(a, v, 1, MAX_B, &o->batch, err, sizeof err);
        else if (!strcmp(a, "--seq-len")) rc = cli_parse_int(a, v, 4, 4000, &o->seq_len, err, sizeof err);
        else if (!strcmp(a, "--transient-mb")) rc = cli_parse_int(a, v, 1, 1 << 20, &o->transient_mb, err, sizeof err);
        else if (!strcmp(a, "--dtype")) {
            if (!strcmp(v, "bf16")) o->dtype = GRZO_DTYPE_BF16;
            else if (!strcmp(v, "f16")) o->dtype = GRZO_DTYPE_F16;
            else if (!strcmp(v, "f32")) o->dtype = GRZO_DTYPE_F32;
            else { snprintf(err, sizeof err, "--dtype: expected bf16, f16 or f32, got '%s'", v); rc = -1; }
        } else if (!strcmp(a, "--math")) {
            if (!strcmp(v, "fast")) o->math = GRZO_CUDA_MATH_FAST;
            else if (!strcmp(v, "pedantic")) o->math = GRZO_CUDA_MATH_PEDANTIC;
            else { snprintf(err, sizeof err, "--math: expected fast or pedantic, got '%s'", v); rc = -1; }
        } else if (!strcmp(a, "--attention")) {
            if (!strcmp(v, "auto")) o->attention = LLM_ATTENTION_AUTO;
            else if (!strcmp(v, "fused")) o->attention = LLM_ATTENTION_FUSED;
            else if (!strcmp(v, "gemm")) o->attention = LLM_ATTENTION_GEMM;
            else { snprintf(err, sizeof err, "--attention: expected auto, fused or gemm, got '%s'", v); rc = -1; }
        } else if (!strcmp(a, "--workloads")) {
            o->workloads = parse_workloads(v);
            if (!o->workloads) {
                snprintf(err, sizeof err, "--workloads: expected a comma list of floor, grzo, mezo_inplace, mezo_ops, fzoo, got '%s'", v);
                rc = -1;
            }
        } else { fprintf(stderr, "bench_gpu: unknown option %s\n", a); return 1; }
        if (rc) { fprintf(stderr, "bench_gpu: %s\n", err); return 1; }
    }
    /* --tokens first: beside --quick, its refusal is the one that says what --tokens needs */
    if (o->tokens && o->quick && !o->not_with_tokens) o->not_with_tokens = "--quick";
    if (o->tokens && o->not_with_tokens) {
        fprintf(stderr, "bench_gpu: --tokens runs the file's batch on SmolLM2's weights as it is: not with %s\n",
                o->not_with_tokens);
        return 1;
    }
    if (o->tokens && !o->model) {
        fprintf(stderr, "bench_gpu: --tokens needs --model (the batch's ids are SmolLM2's tokenizer's: real weights, not random)\n");
        return 1;
    }
    if (o->tokens) o->shapes = 1u << SHAPE_SMOLLM2;
    if (o->quick && o->not_with_quick) {
        fprintf(stderr, "bench_gpu: --quick sets its own model, shapes, batch, context and warm-up: not with %s\n",
                o->not_with_quick);
        return 1;
    }
    if (o->steps < 20 && !o->quick) {
        fprintf(stderr, "bench_gpu: --steps must be >= 20 (medians of fewer steps are not reported; --quick is the smoke run)\n");
        return 1;
    }
    return 0;
}

static const char *dtype_name(grzo_dtype t) { return t == GRZO_DTYPE_BF16 ? "bf16" : t == GRZO_DTYPE_F16 ? "f16" : "f32"; }

int main(int argc, char **argv) {
    options o;
    bench b;
    report r;
    shape shapes[3];
    int n_shapes = 0, si, w, rc = 0, i;
    char err[512], batch_text[1400];
    workload wl;
    llm_config mcfg;
    llm_weights mw;
    struct cudaDeviceProp prop;
    /* line by line into a pipe too (run.sh shows the progress as it comes; a time limit's
       kill loses nothing already printed) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_options(argc, argv, &o)) return 2;
    if (o.self_test) return self_test();
    memset(&wl, 0, sizeof wl);
    if (o.tokens && read_token_batch(o.tokens, &wl, err, sizeof err)) {   /* before the GPU: a wrong file is said anywhere */
        fprintf(stderr, "bench_gpu: --tokens: %s\n", err);
        return 1;
    }
    if (grzo_cuda_device_count() == 0) {
        workload_free(&wl);
        printf("SKIP: no CUDA device or driver\n");
        return 77;
    }
    if (o.quick) {
        shapes[n_shapes++] = shape_quick();
        if (o.steps >= 20) o.steps = 3;
        o.warmup = 1;
        o.batch = 2;
        o.seq_len = 16;
    } else {
        if (o.shapes & (1u << SHAPE_SMOLLM2)) shapes[n_shapes++] = shape_smollm2();
        if (o.shapes & (1u << SHAPE_LLAMA8B)) shapes[n_shapes++] = shape_llama8b();
    }
    memset(&mw, 0, sizeof mw);
    if (o.model && llm_load(o.model, &mcfg, &mw, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_gpu: %s\n", err);
        workload_free(&wl);
        return 1;
    }
    if (o.tokens && token_batch_fits(&wl, mcfg.vocab_size, err, sizeof err)) {
        fprintf(stderr, "bench_gpu: --tokens: %s\n", err);
        workload_free(&wl);
        llm_weights_free(&mw);
        return 1;
    }
    if (report_open(&r, o.out) != 0) { workload_free(&wl); llm_weights_free(&mw); return 1; }
    memset(&prop, 0, sizeof prop);
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) snprintf(prop.name, sizeof prop.name, "(unknown: cudaGetDeviceProperties failed)");
    md_printf(&r, "## grzo %s bench_gpu\n\ncommand:", grzo_version());
    for (i = 0; i < argc; i++) md_printf(&r, " %s", argv[i]);
    describe_batch(batch_text, sizeof batch_text, &wl, &o);   /* wl: the file's batch, or empty (the random contexts) */
    md_printf(&r, "\n\ndevice %s (%d SMs, %.1f GB); math %s; attention %s; %s; "
                  "%lld steps after %lld warm-up (median); transient budget %lld MiB; peak = %.0f TFLOP/s (H100 SXM bf16 dense)\n",
              prop.name, prop.multiProcessorCount, (double)prop.totalGlobalMem * 1e-9,
              o.math == GRZO_CUDA_MATH_FAST ? "fast (tensor cores)" : "pedantic fp32",
              o.attention == LLM_ATTENTION_GEMM    ? "cuBLAS GEMMs + softmax"
              : o.attention == LLM_ATTENTION_FUSED ? "fused kernel"
                                                   : "auto (cuBLAS GEMMs + softmax while the scratch is at most 4 GiB)",
              batch_text, (long long)o.steps, (long long)o.warmup, (long long)o.transient_mb, H100_BF16_PEAK_TFLOPS);
    r.md_done = r.md.len;   /* the header stays through report_progress */
    for (si = 0; si < n_shapes; si++) {
        result res[N_WORKLOADS];
        memset(res, 0, sizeof res);
        memset(&b, 0, sizeof b);
        b.o = &o;
        b.sh = shapes[si];
        if (o.model && si == 0 && !o.quick && !strcmp(shapes[si].name, "SmolLM2-135M")) {
            b.sh.cfg = mcfg;           /* the file's own config (rope theta, eps, ...) */
            /* the name is the CSV's shape column too: it tells the token batch's rows apart */
            b.sh.name = o.tokens ? "SmolLM2-135M (weights from --model; token batch)" : "SmolLM2-135M (weights from --model)";
            b.host_w = &mw;
        }
        if (!o.tokens) make_workload(&wl, &o, b.sh.cfg.vocab_size);   /* --tokens: the file's, read above */
        b.wl = &wl;
        if (b.sh.cfg.max_seq_len < wl.max_len) b.sh.cfg.max_seq_len = wl.max_len;
        printf("\n%s: %.1fM parameters, %s\n", b.sh.name, total_params(&b.sh.cfg) * 1e-6, dtype_name(o.dtype));
        for (w = 0; w < N_WORKLOADS; w++) {
            if (o.workloads & (1u << w)) {
                run_workload(&b, w, &res[w]);
                if (!res[w].ok) rc = 1;
            }
            if (report_progress(&r, &b.sh, res, dtype_name(o.dtype), w == N_WORKLOADS - 1) != 0) rc = 1;
        }
        if (!o.tokens) workload_free(&wl);
    }
    workload_free(&wl);
    printf("\nwrote %s/bench_gpu.md and %s/bench_gpu.csv\n", o.out, o.out);
    report_free(&r);
    llm_weights_free(&mw);
    return rc;
}
