/* finetune.c - grzo-finetune: prompted SuperGLUE-style fine-tuning of a Llama-family LLM
   with GRZO (or MeZO, FZOO, canonical), forward passes only, with evaluation before and
   after.

   grzo-finetune --model PATH [--tokenizer tok.bin] --task NAME --data DIR
                 [--estimator grzo|mezo|fzoo|canonical|shared] [--lr LR] [--sigma S]
                 [--batch B] [--steps N] [--warmup N] [--eval-every N] [--seed S]
                 [--threads N] [--checkpoint PATH] [--save-every N] [--log PATH] [--out DIR]
                 [--n-train N] [--n-dev N] [--n-test N] [--max-len N] [--fzoo-probes N]
                 [--resume | --overwrite] [--diagnose [--diagnose-probes K] [--diagnose-every N]]

   What a step does (MeZO's protocol, the estimator's perturbations):
   - B training examples are drawn with replacement by the counter RNG from (seed, step),
     so the data order is a function of the step and a resumed run sees the same batches.
   - Classification tasks: every candidate continuation of an example copy is scored by
     the mean log-likelihood of its tokens; the copy's loss is the cross-entropy of the gold
     candidate over those scores. COPA (train_on_gold_tokens): the loss is the mean negative
     log-likelihood of the gold continuation's tokens.
   - Evaluation: argmax of the candidate scores, accuracy. Zero-shot accuracy is measured
     on dev and test before training, dev every --eval-every steps, test at the end.
   - SQuAD and DROP (generation tasks): training is the LM loss on the gold answer's tokens,
     as for COPA; evaluation decodes greedily from the prompt (at most 50 new tokens, up to
     the first newline, BOS or EOS; MeZO's generation) and scores the text with the task's
     official exact match and F1 (qa_score.h); F1 takes accuracy's place (log: dev_f1 and
     dev_em; results.json: *_f1 and *_em; predictions.jsonl: each test question's id,
     generated answer, EM and F1).
   Outputs in --out (default finetune-out): run.json (the run's settings, which --resume
   compares and reuses), log.jsonl (one line per step: step, loss, lr, elapsed seconds, and
   dev_acc when evaluated; with --diagnose, a {"step":S,"diagnose":{...}} line before step S
   for each diagnostic), indices.txt (the sampled examples, so a run can be reproduced
   exactly), results.json (what actually ran, and the accuracies), loss.png (gnuplot, when
   installed; run without a shell, so no path is ever a command). All but the log are
   written through a temporary file and a rename. The checkpoint is saved every --save-every steps
   (or 10 minutes), at the end and on Ctrl-C; --resume continues exactly, and its log lines
   equal the uninterrupted run's (except the elapsed time). Nothing is written before the
   model and the data have loaded, and a new run never mixes with an earlier run's files
   (--overwrite replaces them). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cpu_env.h"   /* the CPU's GEMM kernels: re-exec, report */
#include "llm.h"
#include "llm_export.h"
#include "model.h"
#include "tasks.h"
#include "json.h"
#include "cli_args.h"
#include "gnuplot_run.h"
#include "ranks.h"

/* ---- options ----------------------------------------------------------------------------- */
/* Every setting that a run records in its manifest (run.json) has an entry in OPTS; a
   resumed run takes the recorded value of each one the command line does not give, and
   refuses one it gives differently unless the entry says a change is meaningful (a new
   step budget, a new evaluation or save cadence). */
typedef enum opt_id {
    OPT_MODEL, OPT_TOKENIZER, OPT_TASK, OPT_DATA, OPT_ESTIMATOR,
    OPT_LR, OPT_SIGMA, OPT_BATCH, OPT_STEPS, OPT_WARMUP, OPT_EVAL_EVERY, OPT_SAVE_EVERY, OPT_SEED,
    OPT_THREADS, OPT_MAX_LEN, OPT_FZOO_PROBES, OPT_N_TRAIN, OPT_N_DEV, OPT_N_TEST,
    OPT_DEVICE, OPT_DTYPE, OPT_CHECKPOINT, OPT_LOG, OPT_OUT, OPT_EXPORT, OPT_EXPORT_TYPE, OPT_DIAGNOSE_PROBES,
    OPT_DIAGNOSE_EVERY, OPT_REPLICA_CHECK,
    OPT_SPARSE_DENSITY, OPT_LOWRANK_RANK, OPT_LOWRANK_EVERY, OPT_QUANT,   /* variant axes (grzo.h section 3c) */
    OPT_NOISE,
    OPT_COUNT
} opt_id;

typedef enum opt_kind { KIND_PATH, KIND_TEXT, KIND_INT, KIND_FLOAT, KIND_SEED } opt_kind;

typedef struct opt_def {
    const char *flag;
    const char *key;          /* its name in run.json; NULL: not part of the run's identity */
    opt_kind kind;
    int64_t lo, hi;           /* KIND_INT */
    int may_change;           /* 1: --resume may change it (recorded in run.json) */
} opt_def;

static const opt_def OPTS[OPT_COUNT] = {
    {"--model", "model", KIND_PATH, 0, 0, 0},
    {"--tokenizer", "tokenizer", KIND_PATH, 0, 0, 0},
    {"--task", "task", KIND_TEXT, 0, 0, 0},
    {"--data", "data", KIND_PATH, 0, 0, 1},   /* the indices file checks the data's contents */
    {"--estimator", "estimator", KIND_TEXT, 0, 0, 0},
    {"--lr", "lr", KIND_FLOAT, 0, 0, 0},
    {"--sigma", "sigma", KIND_FLOAT, 0, 0, 0},
    {"--batch", "batch", KIND_INT, 1, 4096, 0},
    {"--steps", "steps", KIND_INT, 0, 1000000000, 1},
    {"--warmup", "warmup", KIND_INT, 0, 1000000000, 0},
    {"--eval-every", "eval_every", KIND_INT, 0, 1000000000, 1},
    {"--save-every", "save_every", KIND_INT, 0, 1000000000, 1},
    {"--seed", "seed", KIND_SEED, 0, 0, 0},
    {"--threads", "threads", KIND_INT, 0, 1024, 1},   /* recorded: the sums' order follows it */
    {"--max-len", "max_len", KIND_INT, 0, 1 << 20, 0},
    {"--fzoo-probes", "fzoo_probes", KIND_INT, 1, 4096, 0},
    {"--n-train", "n_train", KIND_INT, 0, 1000000000, 0},
    {"--n-dev", "n_dev", KIND_INT, 0, 1000000000, 0},
    {"--n-test", "n_test", KIND_INT, 0, 1000000000, 0},
    {"--device", "device", KIND_TEXT, 0, 0, 1},   /* recorded: like --threads, it changes the sums' order */
    {"--dtype", "dtype", KIND_TEXT, 0, 0, 0},     /* the weights' storage: part of what the run is */
    {"--checkpoint", "checkpoint", KIND_PATH, 0, 0, 1},
    {"--log", "log", KIND_PATH, 0, 0, 1},
    {"--out", NULL, KIND_PATH, 0, 0, 1},
    {"--export", NULL, KIND_PATH, 0, 0, 1},        /* grzo-export at the end (llm_export.h) */
    {"--export-type", NULL, KIND_TEXT, 0, 0, 1},
    {"--diagnose-probes", NULL, KIND_INT, 2, GRZO_ALIGN_MAX_PROBES, 1},   /* --diagnose: not the run's identity */
    {"--diagnose-every", NULL, KIND_INT, 0, 1000000000, 1},                  /* likewise */
    {"--replica-check-every", NULL, KIND_INT, 1, 1000000000, 1},             /* mpirun: the divergence guard */
    {"--sparse-density", "sparse_density", KIND_FLOAT, 0, 0, 0},
    {"--lowrank-rank", "lowrank_rank", KIND_INT, 0, GRZO_LOWRANK_MAX_RANK, 0},
    {"--lowrank-every", "lowrank_every", KIND_INT, 0, 1000000000, 0},
    {"--quant", "quant", KIND_TEXT, 0, 0, 0},
    {"--noise", "noise", KIND_TEXT, 0, 0, 0},      /* the base noise U (desc.noise) */
};

#define SAVE_SECONDS_DEFAULT 600.0   /* --save-every 0: a checkpoint every 10 minutes */

typedef struct options {
    const char *text[OPT_COUNT];      /* as given; NULL: not given */
    const char *str[OPT_COUNT];       /* KIND_PATH, KIND_TEXT: the value in use */
    int64_t num[OPT_COUNT];           /* KIND_INT */
    float real[OPT_COUNT];            /* KIND_FLOAT */
    uint64_t seed;
    grzo_estimator estimator;
    int resume, overwrite;
    int diagnose;                     /* --diagnose: B_eff before training, and every
                                         --diagnose-every steps (not recorded) */
    int shard_invariant;              /* --shard-invariant: one backend call per copy (grzo.h 4b) */
} options;

static void usage(FILE *f) {
    fprintf(f,
        "usage: grzo-finetune --model PATH [--tokenizer tok.bin] --task NAME --data DIR [options]\n"
        "  --estimator grzo|mezo|mezo-inplace|fzoo|canonical|shared   (default grzo; mezo-inplace:\n"
        "               MeZO perturbing the weights in place, its memory-optimal form)\n"
        "  --lr LR (1e-5)  --sigma S (1e-3)  --batch B (16)  --steps N (100)  --warmup N (0)\n"
        "  --eval-every N (0: only before and after)  --seed S (0)  --threads N (all cores)\n"
        "  --device cpu|cuda (cpu)  --dtype f32|bf16|f16 (f32; 16-bit weights need --device cuda)\n"
        "  --checkpoint PATH (default OUT/checkpoint.grzo)  --log PATH (OUT/log.jsonl)\n"
        "  --save-every N (write the checkpoint every N steps; 0, the default: every 10 minutes;\n"
        "                 always at the end and on Ctrl-C; a failed save stops the run)\n"
        "  --out DIR (finetune-out)  --n-train N --n-dev N --n-test N (task defaults: 1000/500/1000)\n"
        "  --max-len N (tokens per sequence, left-truncated keeping BOS; 0: model max)\n"
        "  --fzoo-probes N (8)\n"
        "  --export PATH  at the end, the fine-tuned model as a GGUF (as grzo-export; a GGUF or folder --model)\n"
        "  --export-type f32|f16|bf16|q8_0 (f32)\n"
        "  --diagnose   before training, estimate B_eff of the first batch from forward passes\n"
        "               (grzo.h section 3b): its 95%% interval, the predicted GRZO/MeZO variance and\n"
        "               cosine ratios, and whether GRZO, MeZO or neither should do better\n"
        "  --diagnose-probes K (64: K passes of 2B copies, ~K steps' forwards; at B_eff ~ 1 the\n"
        "               relative error is ~sqrt(2/K))\n"
        "  --diagnose-every N (0: only before training) also before every N-th step, on the batch\n"
        "               that step draws; each diagnostic is a line of the log (the training is unchanged)\n"
        "  variants (grzo.h section 3c; each off by default, combine with every estimator but mezo-inplace):\n"
        "  --sparse-density D  perturb and update only the fraction D of each block with the smallest\n"
        "               |weights| (Sparse-MeZO; 0.2 is its best; not with fzoo or --lowrank-rank)\n"
        "  --lowrank-rank R  perturb matrices by U V^T / sqrt(R) (LOZO; R = 2 typical)\n"
        "  --lowrank-every N  redraw V every N steps (100)\n"
        "  --quant int8|int4|none  fake-quantize the weights per row and the perturbation (QuZO;\n"
        "               the perturbation's rounding matters with Gaussian noise only)\n"
        "  --noise rademacher|gaussian  the base noise U (rademacher; QuZO's setting is gaussian)\n"
        "  --resume     continue the run in OUT from its checkpoint: settings not given are taken\n"
        "               from OUT/run.json; a given setting that differs is refused, except\n"
        "               --steps, --eval-every, --save-every, --threads, --data and the paths\n"
        "  --overwrite  start over in an OUT that holds an earlier run (its files are replaced)\n"
        "data parallelism (mpirun -np N grzo-finetune ...; README \"Scaling out\"): each rank forwards its share\n"
        "  of the batch, the losses are all-gathered, every rank applies the same update; rank 0 writes\n"
        "  --shard-invariant  one backend call per example copy, so that the run is bitwise the same at\n"
        "               any number of ranks (on by default under mpirun with 2+ ranks; give it to a\n"
        "               single-process run to compare)\n"
        "  --replica-check-every N (100) every N steps the ranks compare a checksum of the parameters\n"
        "tasks:\n");
    tasks_print_table(f);
}

static int parse_estimator(const char *s, grzo_estimator *out) {
    static const struct { const char *name; grzo_estimator e; } map[] = {
        {"grzo", GRZO_ESTIMATOR_GRZO}, {"mezo", GRZO_ESTIMATOR_MEZO}, {"fzoo", GRZO_ESTIMATOR_FZOO},
        {"canonical", GRZO_ESTIMATOR_CANONICAL}, {"shared", GRZO_ESTIMATOR_SHARED},
        {"mezo-inplace", GRZO_ESTIMATOR_MEZO_INPLACE}};
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(s, map[i].name)) { *out = map[i].e; return 0; }
    return -1;
}

static const char *estimator_name(grzo_estimator e) {
    switch (e) {
    case GRZO_ESTIMATOR_MEZO: return "mezo";
    case GRZO_ESTIMATOR_FZOO: return "fzoo";
    case GRZO_ESTIMATOR_CANONICAL: return "canonical";
    case GRZO_ESTIMATOR_SHARED: return "shared";
    case GRZO_ESTIMATOR_MEZO_INPLACE: return "mezo-inplace";
    default: return "grzo";
    }
}

/* "f32", "bf16", "f16" -> the storage type; out may be NULL (a check only) */
static int parse_dtype(const char *s, grzo_dtype *out) {
    static const struct { const char *name; grzo_dtype t; } map[] = {
        {"f32", GRZO_DTYPE_F32}, {"bf16", GRZO_DTYPE_BF16}, {"f16", GRZO_DTYPE_F16}};
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(s, map[i].name)) {
            if (out) *out = map[i].t;
            return 0;
        }
    return -1;
}

/* One option's value into o (strictly: the whole text, in range); err gets one line. */
static int set_option(options *o, opt_id id, const char *v, char *err, size_t errlen) {
    static const cli_range positive = {0.0, 10.0, 1, 0};
    const opt_def *d = &OPTS[id];
    switch (d->kind) {
    case KIND_INT: return cli_parse_int(d->flag, v, d->lo, d->hi, &o->num[id], err, errlen);
    case KIND_FLOAT:
        if (id == OPT_SPARSE_DENSITY) {   /* 0: off */
            static const cli_range unit = {0.0, 1.0, 0, 0};
            return cli_parse_float(d->flag, v, unit, &o->real[id], err, errlen);
        }
        return cli_parse_float(d->flag, v, positive, &o->real[id], err, errlen);
    case KIND_SEED: return cli_parse_u64(d->flag, v, &o->seed, err, errlen);
    case KIND_TEXT:
        if (id == OPT_ESTIMATOR && parse_estimator(v, &o->estimator)) {
            snprintf(err, errlen, "--estimator: expected grzo, mezo, mezo-inplace, fzoo, canonical or shared, got '%.64s'", v);
            return -1;
        }
        if (id == OPT_DEVICE && strcmp(v, "cpu") && strcmp(v, "cuda")) {
            snprintf(err, errlen, "--device: expected cpu or cuda, got '%.64s'", v);
            return -1;
        }
        if (id == OPT_EXPORT_TYPE && llm_gguf_type_parse(v, NULL)) {
            snprintf(err, errlen, "--export-type: expected f32, f16, bf16 or q8_0, got '%.64s'", v);
            return -1;
        }
        if (id == OPT_NOISE && strcmp(v, "rademacher") && strcmp(v, "gaussian")) {
            snprintf(err, errlen, "--noise: expected rademacher or gaussian, got '%.64s'", v);
            return -1;
        }
        if (id == OPT_QUANT && strcmp(v, "int8") && strcmp(v, "int4") && strcmp(v, "none")) {
            snprintf(err, errlen, "--quant: expected int8, int4 or none, got '%.64s'", v);
            return -1;
        }
        if (id == OPT_DTYPE && parse_dtype(v, NULL)) {
            snprintf(err, errlen, "--dtype: expected f32, bf16 or f16, got '%.64s'", v);
            return -1;
        }
        if (id == OPT_TASK) {
            const tasks_info *t = tasks_find(v);
            if (!t) { snprintf(err, errlen, "--task: unknown task '%.64s' (see --help)", v); return -1; }
            v = t->name;   /* canonical, so run.json compares "sst2" and "SST-2" as equal */
        }
        break;
    case KIND_PATH:
        if (!*v) { snprintf(err, errlen, "%s: the path is empty", d->flag); return -1; }
        break;
    }
    o->str[id] = v;
    return 0;
}

static void default_options(options *o) {
    memset(o, 0, sizeof *o);
    o->str[OPT_ESTIMATOR] = "grzo";
    o->estimator = GRZO_ESTIMATOR_GRZO;
    o->real[OPT_LR] = 1e-5f; o->real[OPT_SIGMA] = 1e-3f;
    o->num[OPT_BATCH] = 16; o->num[OPT_STEPS] = 100; o->num[OPT_FZOO_PROBES] = 8; o->num[OPT_DIAGNOSE_PROBES] = 64;
    o->num[OPT_REPLICA_CHECK] = 100;
    o->num[OPT_N_TRAIN] = o->num[OPT_N_DEV] = o->num[OPT_N_TEST] = -1;   /* the task's defaults */
    o->str[OPT_OUT] = "finetune-out";
    o->str[OPT_DEVICE] = "cpu";
    o->str[OPT_DTYPE] = "f32";
    o->str[OPT_EXPORT_TYPE] = "f32";
    o->str[OPT_QUANT] = "none";
    o->str[OPT_NOISE] = "rademacher";
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen) {
    int i;
    default_options(o);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int id;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        if (!strcmp(a, "--resume")) { o->resume = 1; continue; }
        if (!strcmp(a, "--overwrite")) { o->overwrite = 1; continue; }
        if (!strcmp(a, "--diagnose")) { o->diagnose = 1; continue; }
        if (!strcmp(a, "--shard-invariant")) { o->shard_invariant = 1; continue; }
        for (id = 0; id < OPT_COUNT && strcmp(a, OPTS[id].flag); id++) {}
        if (id == OPT_COUNT) { snprintf(err, errlen, "unknown option '%.64s' (see --help)", a); return -1; }
        if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; }
        if (set_option(o, (opt_id)id, v, err, errlen)) return -1;
        o->text[id] = v;
        i++;
    }
    if (o->resume && o->overwrite) { snprintf(err, errlen, "--resume and --overwrite contradict each other"); return -1; }
    if (o->text[OPT_DIAGNOSE_PROBES] && !o->diagnose) { snprintf(err, errlen, "--diagnose-probes needs --diagnose"); return -1; }
    if (o->text[OPT_DIAGNOSE_EVERY] && !o->diagnose) { snprintf(err, errlen, "--diagnose-every needs --diagnose"); return -1; }
    if (o->diagnose && o->num[OPT_BATCH] < 2) { snprintf(err, errlen, "--diagnose needs --batch >= 2 (B_eff compares the examples of a batch)"); return -1; }
    return 0;
}

/* After --resume has filled in the recorded settings: the ones every run needs. */
static int check_required(const options *o, char *err, size_t errlen) {
    if (!o->str[OPT_MODEL] || !o->str[OPT_TASK] || !o->str[OPT_DATA]) {
        snprintf(err, errlen, "--model, --task and --data are required (see --help)");
        return -1;
    }
    if (strcmp(o->str[OPT_DTYPE], "f32") != 0 && strcmp(o->str[OPT_DEVICE], "cuda") != 0) {
        snprintf(err, errlen, "--dtype %s needs --device cuda (the CPU backend stores f32)", o->str[OPT_DTYPE]);
        return -1;
    }
    return 0;
}

/* ---- tokenized examples -------------------------------------------------------------------- */
typedef struct tok_example {
    int n_cand, gold;
    int32_t *tokens[TASKS_MAX_CANDIDATES];   /* context + continuation, BOS first if the model wants it */
    int32_t n_tokens[TASKS_MAX_CANDIDATES];
    int32_t n_context[TASKS_MAX_CANDIDATES]; /* tokens before the scored continuation */
    int32_t *prompt, n_prompt;               /* generation tasks: the context's tokens to decode from,
                                                left-truncated to leave room for the answer */
} tok_example;

typedef struct tok_split {
    tok_example *ex;
    size_t n;
    int32_t max_total, max_len;
    int32_t max_generate;        /* generation tasks: the longest prompt + TASKS_MAX_NEW_TOKENS - 1 */
    const tasks_split *src;      /* the examples (gold answers) behind ex */
} tok_split;

static int tokenize_alloc(const llm_tokenizer *t, const char *text, int bos, int32_t **ids, int32_t *n, char *err, size_t errlen) {
    int32_t need = 0;
    if (llm_tokenize(t, text, bos, NULL, 0, &need, err, errlen)) return -1;
    *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(need > 0 ? need : 1));
    if (!*ids) { snprintf(err, errlen, "out of memory"); return -1; }
    if (llm_tokenize(t, text, bos, *ids, need, n, err, errlen)) return -1;
    return 0;
}

/* MeZO's encode_prompt for generation: the prompt keeps its last max_len - 50 tokens (and BOS),
   leaving room for the answer; a model with at most 51 positions keeps half of them. */
static int32_t prompt_fit(int32_t *ids, int32_t n, int32_t keep_head, int32_t max_len) {
    int32_t cap = max_len > 0 ? max_len - TASKS_MAX_NEW_TOKENS : n;
    if (max_len > 0 && cap < 2) cap = max_len / 2 > 1 ? max_len / 2 : 1;
    if (n <= cap) return n;
    memmove(ids + keep_head, ids + keep_head + (n - cap), sizeof(int32_t) * (size_t)(cap - keep_head));
    return cap;
}

/* MeZO's encode_prompt: the continuation's tokens are the last n(text) - n(context) tokens of
   the tokenized text (never tokenized on their own). Sequences longer than max_len lose
   tokens from the left, after BOS. */
static int tokenize_example(const llm_tokenizer *t, int bos, int32_t max_len, const tasks_example *src, tok_example *dst,
                            char *err, size_t errlen) {
    int k;
    memset(dst, 0, sizeof *dst);
    dst->n_cand = src->n_candidates;
    dst->gold = src->gold;
    for (k = 0; k < src->n_candidates; k++) {
        int32_t *ctx_ids = NULL, n_ctx = 0, n_text = 0, opt, keep_head = bos ? 1 : 0;
        if (tokenize_alloc(t, src->cand[k].text, bos, &dst->tokens[k], &n_text, err, errlen)) return -1;
        if (tokenize_alloc(t, src->cand[k].context, bos, &ctx_ids, &n_ctx, err, errlen)) { free(ctx_ids); return -1; }
        if (src->n_answers > 0 && k == 0) {   /* a generation task: decoding starts from the context */
            dst->prompt = ctx_ids;
            dst->n_prompt = prompt_fit(ctx_ids, n_ctx, keep_head, max_len);
            ctx_ids = NULL;
        }
        free(ctx_ids);
        opt = n_text - n_ctx;
        if (opt < 1) opt = 1;             /* a continuation merged into the context: score its last token */
        if (opt >= n_text) opt = n_text - 1;
        if (max_len > 0 && n_text > max_len) {
            int32_t drop = n_text - max_len;
            memmove(dst->tokens[k] + keep_head, dst->tokens[k] + keep_head + drop, sizeof(int32_t) * (size_t)(n_text - keep_head - drop));
            n_text = max_len;
            if (opt > n_text - 1) opt = n_text - 1;
        }
        if (opt < 1) {
            if (src->id) snprintf(err, errlen, "example \"%.100s\" has nothing to score", src->id);
            else snprintf(err, errlen, "example (line %ld) has nothing to score", src->source_line);
            return -1;
        }
        dst->n_tokens[k] = n_text;
        dst->n_context[k] = n_text - opt;
    }
    return 0;
}

static void free_tok_split(tok_split *s) {
    size_t i;
    int k;
    for (i = 0; i < s->n; i++) {
        for (k = 0; k < s->ex[i].n_cand; k++) free(s->ex[i].tokens[k]);
        free(s->ex[i].prompt);
    }
    free(s->ex);
    memset(s, 0, sizeof *s);
}

static int tokenize_split(const llm_tokenizer *t, int bos, int32_t max_len, const tasks_split *src, tok_split *dst,
                          char *err, size_t errlen) {
    size_t i;
    memset(dst, 0, sizeof *dst);
    dst->ex = (tok_example *)calloc(src->n ? src->n : 1, sizeof *dst->ex);
    dst->src = src;
    if (!dst->ex) { snprintf(err, errlen, "out of memory"); return -1; }
    for (i = 0; i < src->n; i++) {
        int32_t total = 0;
        int k;
        dst->n = i + 1;
        if (tokenize_example(t, bos, max_len, &src->ex[i], &dst->ex[i], err, errlen)) return -1;
        for (k = 0; k < dst->ex[i].n_cand; k++) {
            total += dst->ex[i].n_tokens[k];
            if (dst->ex[i].n_tokens[k] > dst->max_len) dst->max_len = dst->ex[i].n_tokens[k];
        }
        if (total > dst->max_total) dst->max_total = total;
        if (dst->ex[i].prompt && dst->ex[i].n_prompt + TASKS_MAX_NEW_TOKENS - 1 > dst->max_generate)
            dst->max_generate = dst->ex[i].n_prompt + TASKS_MAX_NEW_TOKENS - 1;
    }
    return 0;
}

/* ---- the run ---------------------------------------------------------------------------------- */
#define EVAL_CHUNK 8          /* examples scored per forward during evaluation */

/* A generated answer and its scores. */
typedef struct prediction {
    char *text;
    double em, f1;
} prediction;

typedef struct run {
    options o;
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok;
    tasks_set data;
    tok_split train, dev, test;
    grzo_backend be;
    grzo_ctx *ctx;
    char grzo_why[256];               /* grzo's logger writes its last error here (keep_message) */
    llm_model model;
    llm_state *st;
    int lm_loss;                      /* train on the gold continuation's tokens (COPA, SQuAD, DROP) */
    int generation;                   /* SQuAD, DROP: evaluation generates and scores F1 / EM */
    int32_t *gen_tokens, gen_steps;   /* generation scratch: room for gen_steps + 1 ids */
    prediction *preds;                /* the test split's answers at its latest evaluation
                                         (written to predictions.jsonl at the end) */
    /* per-pass scratch */
    int64_t *picked;                  /* the step's B training examples */
    llm_seq *seqs;
    int32_t *n_context;
    double *means;
    int32_t max_seqs;
    /* the run's files, built from --out/--log/--checkpoint (malloc'd, any length) */
    char *path_log, *path_ckpt, *path_indices, *path_results, *path_png, *path_manifest, *path_predictions;
    double zs_dev, zs_test;           /* zero-shot accuracies, or F1 (recorded in run.json) */
    double dev_acc, test_acc, seconds;/* after training, for results.json (F1 for generation) */
    double zs_dev_em, zs_test_em, dev_em, test_em;   /* generation tasks: exact match */
    json_value manifest;              /* run.json of a resumed run (options point into it) */
    int have_manifest;
    double elapsed_before;            /* training seconds of the run before a resume */
    double diagnose_seconds;          /* --diagnose-every: time in diagnostics during training,
                                         left out of the log's elapsed time */
    ft_ranks ranks;                   /* mpirun: this process's rank; rank 0 alone writes */
} run;

static volatile sig_atomic_t interrupted = 0;   /* set by SIGINT: checkpoint and stop */
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Candidate scores of examples ex[0..n) (segments seg[i], or outside a pass when seg is
   NULL): means[i * TASKS_MAX_CANDIDATES + k]. */
static grzo_status score_candidates(run *r, const tok_example *const *ex, const int64_t *seg, int64_t n_segments, int64_t n,
                                    int gold_only) {
    int32_t ns = 0;
    int64_t i;
    llm_batch batch;
    grzo_status s;
    for (i = 0; i < n; i++) {
        int k;
        for (k = 0; k < ex[i]->n_cand; k++) {
            llm_seq *q = &r->seqs[ns];
            if (gold_only && k != ex[i]->gold) continue;
            memset(q, 0, sizeof *q);
            q->tokens = ex[i]->tokens[k];
            q->n_tokens = ex[i]->n_tokens[k];
            q->segment = seg ? seg[i] : 0;
            r->n_context[ns] = ex[i]->n_context[k];
            ns++;
        }
    }
    batch.seqs = r->seqs;
    batch.n_seqs = ns;
    batch.n_segments = n_segments;
    s = llm_sequence_logprob(r->ctx, &r->model, r->st, &batch, r->n_context, NULL, r->means);
    if (s != GRZO_OK) return s;
    /* spread the per-sequence means back to (example, candidate) */
    for (i = n - 1, ns = ns - 1; i >= 0; i--) {
        int k;
        for (k = ex[i]->n_cand - 1; k >= 0; k--) {
            if (gold_only && k != ex[i]->gold) continue;
            r->means[i * TASKS_MAX_CANDIDATES + k] = r->means[ns--];
        }
    }
    return GRZO_OK;
}

/* cross-entropy of the gold candidate over the candidate scores */
static double candidate_ce(const double *scores, int n, int gold) {
    double m = scores[0], z = 0;
    int k;
    for (k = 1; k < n; k++) if (scores[k] > m) m = scores[k];
    for (k = 0; k < n; k++) z += exp(scores[k] - m);
    return -(scores[gold] - m - log(z));
}

/* "accuracy 0.6250", or for a generation task (em >= 0) "F1 0.4321, EM 0.3000" */
static const char *score_text(double score, double em, char buf[64]) {
    if (em < 0) snprintf(buf, 64, "accuracy %.4f", score);
    else snprintf(buf, 64, "F1 %.4f, EM %.4f", score, em);
    return buf;
}

/* The main score's name in run.json, results.json and the log: accuracy, or F1 (with EM). */
static const char *score_key(const run *r) { return r->generation ? "f1" : "acc"; }

/* Generation stops at the first token whose text holds a newline (MeZO's eos_token "\n"). */
static int stop_at_newline(int32_t prev, int32_t token, void *user) {
    return strchr(llm_token_text((const llm_tokenizer *)user, prev, token), '\n') != NULL;
}

/* Greedy decoding from ex's prompt; the text up to the first newline into *out (MeZO strips
   it; the scorers' normalization ignores surrounding whitespace, so it is kept as is). */
static grzo_status generate_answer(run *r, const tok_example *ex, char **out) {
    llm_generate_desc g;
    int32_t n_total = 0, i;
    size_t len = 0;
    grzo_status s;
    char *text;
    memset(&g, 0, sizeof g);
    g.steps = ex->n_prompt + TASKS_MAX_NEW_TOKENS - 1;   /* TASKS_MAX_NEW_TOKENS new tokens at most */
    if (g.steps > r->gen_steps) g.steps = r->gen_steps;
    g.stop[0] = llm_tokenizer_bos(r->tok);
    g.stop[1] = llm_tokenizer_eos(r->tok);
    g.on_token = stop_at_newline;
    g.user_data = r->tok;
    memcpy(r->gen_tokens, ex->prompt, sizeof(int32_t) * (size_t)ex->n_prompt);
    if ((s = llm_generate(r->ctx, &r->model, r->st, r->gen_tokens, ex->n_prompt, &g, &n_total)) != GRZO_OK) return s;
    for (i = ex->n_prompt; i < n_total; i++) len += strlen(llm_token_text(r->tok, r->gen_tokens[i - 1], r->gen_tokens[i]));
    if (!(text = (char *)malloc(len + 1))) return GRZO_ERR_OUT_OF_MEMORY;
    for (len = 0, i = ex->n_prompt; i < n_total; i++) {
        const char *piece = llm_token_text(r->tok, r->gen_tokens[i - 1], r->gen_tokens[i]);
        memcpy(text + len, piece, strlen(piece));
        len += strlen(piece);
    }
    text[len] = '\0';
    *out = qa_utf8_repair(text, strcspn(text, "\n"));   /* up to the newline; bytes a token split read as U+FFFD */
    free(text);
    return *out ? GRZO_OK : GRZO_ERR_OUT_OF_MEMORY;
}

static void free_predictions(run *r) {
    size_t i;
    for (i = 0; r->preds && i < r->test.n; i++) free(r->preds[i].text);
    free(r->preds);
    r->preds = NULL;
}

/* A generation task's split: mean F1 and exact match of the generated answers; the test
   split's answers are kept for predictions.jsonl. */
static grzo_status evaluate_generation(run *r, const tok_split *split, double *f1, double *em) {
    size_t i;
    int keep = split == &r->test;
    *f1 = *em = 0;
    if (keep) {
        free_predictions(r);
        if (!(r->preds = (prediction *)calloc(split->n ? split->n : 1, sizeof *r->preds))) return GRZO_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < split->n; i++) {
        char *answer = NULL;
        double e, f;
        grzo_status s = generate_answer(r, &split->ex[i], &answer);
        if (s != GRZO_OK) return s;
        if (tasks_score_prediction(r->data.task, &split->src->ex[i], answer, &e, &f)) {
            free(answer);
            return GRZO_ERR_OUT_OF_MEMORY;
        }
        if (keep) {
            r->preds[i].text = answer;
            r->preds[i].em = e;
            r->preds[i].f1 = f;
        } else free(answer);
        *f1 += f;
        *em += e;
    }
    if (split->n) {
        *f1 /= (double)split->n;
        *em /= (double)split->n;
    }
    return GRZO_OK;
}

/* The split's score: accuracy, or for a generation task F1 (and exact match in *em, which
   is -1 for multiple choice; em may be NULL). */
static grzo_status evaluate(run *r, const tok_split *split, double *acc, double *em) {
    size_t i0, correct = 0;
    const tok_example *chunk[EVAL_CHUNK];
    double em_unused;
    *acc = 0;
    if (!em) em = &em_unused;
    *em = -1;
    if (r->generation) return evaluate_generation(r, split, acc, em);
    if (split->n == 0) return GRZO_OK;
    for (i0 = 0; i0 < split->n; i0 += EVAL_CHUNK) {
        size_t n = split->n - i0 < EVAL_CHUNK ? split->n - i0 : EVAL_CHUNK, i;
        grzo_status s;
        for (i = 0; i < n; i++) chunk[i] = &split->ex[i0 + i];
        s = score_candidates(r, chunk, NULL, 0, (int64_t)n, 0);
        if (s != GRZO_OK) return s;
        for (i = 0; i < n; i++) {
            const double *sc = r->means + i * TASKS_MAX_CANDIDATES;
            int k, best = 0;
            for (k = 1; k < chunk[i]->n_cand; k++) if (sc[k] > sc[best]) best = k;   /* first maximum */
            correct += best == chunk[i]->gold;
        }
    }
    *acc = (double)correct / (double)split->n;
    return GRZO_OK;
}

/* the forward of one pass: every copy's loss */
static grzo_status train_forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user) {
    run *r = (run *)user;
    const tok_example *ex[2 * 4096];
    int64_t seg[2 * 4096], c;
    grzo_status s;
    (void)ctx;
    for (c = 0; c < pi->n_segments; c++) {
        ex[c] = &r->train.ex[r->picked[pi->example[c]]];
        seg[c] = c;
    }
    s = score_candidates(r, ex, seg, pi->n_segments, pi->n_segments, r->lm_loss);
    if (s != GRZO_OK) return s;
    for (c = 0; c < pi->n_segments; c++) {
        const double *sc = r->means + c * TASKS_MAX_CANDIDATES;
        losses[c] = (float)(r->lm_loss ? -sc[ex[c]->gold] : candidate_ce(sc, ex[c]->n_cand, ex[c]->gold));
    }
    return GRZO_OK;
}

/* B training examples for step t, with replacement, from the counter RNG: a pure
   function of (seed, t), so a resumed run draws the same batches. */
static void pick_batch(run *r, int64_t step) {
    int64_t i;
    for (i = 0; i < r->o.num[OPT_BATCH]; i++) {
        double u = grzo_uniform_at(r->o.seed, (uint32_t)step, GRZO_USER_BLOCK, 1, (uint64_t)i);
        r->picked[i] = (int64_t)(u * (double)r->train.n);
    }
}

/* ---- files ------------------------------------------------------------------------------------- */
static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static char *path_or_join(const char *given, const char *dir, const char *name) {
    char *p;
    if (!given) return path_join(dir, name);
    if ((p = (char *)malloc(strlen(given) + 1))) strcpy(p, given);
    return p;
}

/* The run's file names; --log and --checkpoint as given, the rest inside --out. */
static int make_paths(run *r, char *err, size_t errlen) {
    const char *out = r->o.str[OPT_OUT];
    r->path_log = path_or_join(r->o.str[OPT_LOG], out, "log.jsonl");
    r->path_ckpt = path_or_join(r->o.str[OPT_CHECKPOINT], out, "checkpoint.grzo");
    r->path_indices = path_join(out, "indices.txt");
    r->path_results = path_join(out, "results.json");
    r->path_png = path_join(out, "loss.png");
    r->path_predictions = path_join(out, "predictions.jsonl");
    if (!r->path_log || !r->path_ckpt || !r->path_indices || !r->path_results || !r->path_png || !r->path_predictions) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int is_directory(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* A directory where a file goes is refused up front (it is never removed or replaced). */
static int check_paths(const run *r, char *err, size_t errlen) {
    struct stat sb;
    if (is_directory(r->path_log)) { snprintf(err, errlen, "--log '%s' is a directory", r->path_log); return -1; }
    if (is_directory(r->path_ckpt)) { snprintf(err, errlen, "--checkpoint '%s' is a directory", r->path_ckpt); return -1; }
    if (stat(r->o.str[OPT_OUT], &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "--out '%s' is not a directory", r->o.str[OPT_OUT]);
        return -1;
    }
    return 0;
}

/* The files a run leaves, in the order they are listed in messages. */
#define RUN_FILES 7
static int run_files(const run *r, const char *files[RUN_FILES]) {
    files[0] = r->path_manifest; files[1] = r->path_ckpt; files[2] = r->path_log;
    files[3] = r->path_indices; files[4] = r->path_results; files[5] = r->path_png;
    files[6] = r->path_predictions;
    return RUN_FILES;
}

/* A new run never mixes its files with an earlier run's: it refuses a folder that holds
   any of them unless told --overwrite. */
static int refuse_earlier_run(const run *r, char *err, size_t errlen) {
    const char *files[RUN_FILES];
    struct stat sb;
    int i, n = run_files(r, files);
    size_t used = 0;
    if (r->o.overwrite) return 0;
    for (i = 0; i < n; i++) {
        if (lstat(files[i], &sb) != 0) continue;
        if (!used) used = (size_t)snprintf(err, errlen, "'%s' holds an earlier run (", r->o.str[OPT_OUT]);
        else if (used < errlen) used += (size_t)snprintf(err + used, errlen - used, ", ");
        if (used < errlen) used += (size_t)snprintf(err + used, errlen - used, "%s", files[i]);
    }
    if (!used) return 0;
    if (used < errlen) snprintf(err + used, errlen - used, "): continue it with --resume, or start over with --overwrite");
    return -1;
}

/* --overwrite: the earlier run's files go (never a directory: unlink refuses those). */
static int remove_earlier_run(const run *r, char *err, size_t errlen) {
    const char *files[RUN_FILES];
    int i, n = run_files(r, files);
    for (i = 0; i < n; i++)
        if (unlink(files[i]) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot remove %s: %s", files[i], strerror(errno));
            return -1;
        }
    return 0;
}

static int ensure_dir(const char *dir, char *err, size_t errlen) {
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && is_directory(dir))) return 0;
    snprintf(err, errlen, "cannot create directory '%s': %s", dir, strerror(errno));
    return -1;
}

/* Writes path through path.tmp and a rename, so a crash never leaves half a file. */
typedef void (*file_writer)(FILE *f, const run *r);
static int write_atomically(const char *path, file_writer write, const run *r, char *err, size_t errlen) {
    char *tmp = (char *)malloc(strlen(path) + 5);
    FILE *f;
    int ok;
    if (!tmp) { snprintf(err, errlen, "out of memory"); return -1; }
    strcpy(tmp, path);
    strcat(tmp, ".tmp");
    if (!(f = fopen(tmp, "w"))) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    write(f, r);
    ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

/* The shortest decimal that reads back as the same float ("0.001", not "0.00100000005"). */
static const char *float_text(float x, char buf[32]) {
    int digits;
    for (digits = 6; digits < 9; digits++) {
        snprintf(buf, 32, "%.*g", digits, (double)x);
        if ((float)strtod(buf, NULL) == x) return buf;
    }
    snprintf(buf, 32, "%.9g", (double)x);
    return buf;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Which file a run used, by contents: size and FNV-1a of its first MiB (a moved model is
   the same model; a different one with the same name is not). */
static int file_identity(const char *path, char *out, size_t n) {
    static unsigned char buf[1 << 20];
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    struct stat sb;
    size_t got, i;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    if (fstat(fileno(f), &sb) != 0) { fclose(f); return -1; }
    got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (i = 0; i < got; i++) h = (h ^ buf[i]) * UINT64_C(0x100000001b3);
    snprintf(out, n, "%lld:%016llx", (long long)sb.st_size, (unsigned long long)h);
    return 0;
}

/* ---- the run manifest (OUT/run.json): every setting that defines the run ---------------------- */
static void write_manifest_json(FILE *f, const run *r) {
    const options *o = &r->o;
    char num[32];
    int id;
    fprintf(f, "{\"grzo_finetune_run\":1");
    for (id = 0; id < OPT_COUNT; id++) {
        const opt_def *d = &OPTS[id];
        if (!d->key) continue;
        fprintf(f, ",\n \"%s\":", d->key);
        switch (d->kind) {
        case KIND_INT: fprintf(f, "%lld", (long long)o->num[id]); break;
        case KIND_FLOAT: fprintf(f, "%s", float_text(o->real[id], num)); break;
        case KIND_SEED: fprintf(f, "\"%llu\"", (unsigned long long)o->seed); break;
        default:   /* null: not given (no tokenizer; the log and checkpoint inside --out) */
            if (o->str[id]) json_string(f, o->str[id]);
            else fprintf(f, "null");
        }
        if (id == OPT_MODEL || id == OPT_TOKENIZER) {
            char ident[64];
            fprintf(f, ",\n \"%s_id\":", d->key);
            if (o->str[id] && file_identity(o->str[id], ident, sizeof ident) == 0) json_string(f, ident);
            else fprintf(f, "null");
        }
    }
    fprintf(f, ",\n \"zero_shot_dev_%s\":%.6f,\"zero_shot_test_%s\":%.6f", score_key(r), r->zs_dev, score_key(r), r->zs_test);
    if (r->generation) fprintf(f, ",\"zero_shot_dev_em\":%.6f,\"zero_shot_test_em\":%.6f", r->zs_dev_em, r->zs_test_em);
    fprintf(f, "}\n");
}

static int write_manifest(const run *r, char *err, size_t errlen) {
    return write_atomically(r->path_manifest, write_manifest_json, r, err, errlen);
}

static char *read_text_file(const char *path, size_t *size, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, len = 0;
    if (!f) { snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno)); return NULL; }
    for (;;) {
        char *nb;
        if (len + 4096 + 1 > cap) {
            cap = 2 * cap + 4096 + 1;
            if (!(nb = (char *)realloc(buf, cap))) { free(buf); fclose(f); snprintf(err, errlen, "out of memory"); return NULL; }
            buf = nb;
        }
        len += fread(buf + len, 1, cap - len - 1, f);
        if (feof(f) || ferror(f)) break;
    }
    if (ferror(f)) { snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno)); free(buf); fclose(f); return NULL; }
    fclose(f);
    buf[len] = '\0';
    *size = len;
    return buf;
}

/* One conflict, appended to a one-line list: "--lr 0.002 (the run has 0.001)". */
static void add_conflict(char *list, size_t n, const char *flag, const char *given, const char *holder, const char *recorded) {
    size_t used = strlen(list);
    if (used + 1 >= n) return;
    snprintf(list + used, n - used, "%s%s %.200s (%s has %.200s)", used ? ", " : "", flag, given, holder, recorded);
}

/* The recorded value of one setting, as text for messages. */
static void recorded_text(const json_value *v, char *buf, size_t n) {
    if (v->type == JSON_STRING) snprintf(buf, n, "%s", v->string);
    else if (v->type == JSON_NUMBER) snprintf(buf, n, "%.9g", v->number);
    else snprintf(buf, n, "none");
}

/* --resume: every setting comes from run.json unless given; a given one must agree, except
   where a change is meaningful (OPTS[].may_change). The JSON stays alive in r->manifest
   because the options point into it. */
static int resume_settings(run *r, char *err, size_t errlen) {
    options *o = &r->o;
    char *text;
    size_t size, at = 0;
    char conflicts[900] = "", rec[256];
    const json_value *root, *v;
    int id;
    if (access(r->path_manifest, F_OK) != 0 && errno == ENOENT) {
        snprintf(err, errlen, "--resume: no run to continue in '%s' (no run.json)", o->str[OPT_OUT]);
        return -1;
    }
    if (!(text = read_text_file(r->path_manifest, &size, err, errlen))) return -1;
    if (json_parse(text, size, &r->manifest, &at, err, errlen)) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "%s: %s", r->path_manifest, why);
        free(text);
        return -1;
    }
    free(text);
    r->have_manifest = 1;
    root = &r->manifest;
    if (!(v = json_get(root, "grzo_finetune_run")) || !v->is_integer || v->integer != 1) {
        snprintf(err, errlen, "%s: not a grzo-finetune run manifest", r->path_manifest);
        return -1;
    }
    for (id = 0; id < OPT_COUNT; id++) {
        const opt_def *d = &OPTS[id];
        const char *given = o->text[id];
        int differs = 0;
        if (!d->key) continue;
        if (!(v = json_get(root, d->key))) {
            if (id >= OPT_SPARSE_DENSITY && id <= OPT_NOISE && !given) continue;   /* recorded before the variants: dense, Rademacher */
            snprintf(err, errlen, "%s: no \"%s\"", r->path_manifest, d->key);
            return -1;
        }
        recorded_text(v, rec, sizeof rec);
        if (v->type == JSON_NULL) {   /* no tokenizer was given */
            if (given && !d->may_change) add_conflict(conflicts, sizeof conflicts, d->flag, given, "the run", "none");
            continue;
        }
        if ((d->kind == KIND_INT && !v->is_integer) || (d->kind == KIND_FLOAT && v->type != JSON_NUMBER) ||
            (d->kind != KIND_INT && d->kind != KIND_FLOAT && v->type != JSON_STRING)) {
            snprintf(err, errlen, "%s: \"%s\" has the wrong type", r->path_manifest, d->key);
            return -1;
        }
        if (given && d->may_change) continue;   /* the new value runs, and is recorded */
        if (!given) {
            /* a recorded value passes the same checks as a typed one */
            char num[64];
            const char *t = v->type == JSON_STRING ? v->string : num;
            if (d->kind == KIND_INT) snprintf(num, sizeof num, "%lld", v->integer);
            else snprintf(num, sizeof num, "%.9g", v->number);
            if (set_option(o, (opt_id)id, t, err, errlen)) return -1;
            continue;
        }
        switch (d->kind) {
        case KIND_INT: differs = o->num[id] != v->integer; break;
        case KIND_FLOAT: differs = o->real[id] != (float)v->number; break;
        case KIND_SEED: differs = strtoull(v->string, NULL, 10) != o->seed; break;
        case KIND_TEXT: differs = strcmp(o->str[id], v->string) != 0; break;
        case KIND_PATH: {
            char want_key[32], ident[64];
            const json_value *want;
            snprintf(want_key, sizeof want_key, "%s_id", d->key);
            want = json_get(root, want_key);
            differs = !want || want->type != JSON_STRING || file_identity(given, ident, sizeof ident) != 0 ||
                      strcmp(ident, want->string) != 0;
            if (differs) snprintf(rec, sizeof rec, "%s, a different file", v->string);
            break;
        }
        }
        if (differs) add_conflict(conflicts, sizeof conflicts, d->flag, given, "the run", rec);
    }
    if (conflicts[0]) {
        snprintf(err, errlen, "--resume: %s was made with other settings: %s", r->path_manifest, conflicts);
        return -1;
    }
    {   /* the task (so the score's name) is known now */
        const tasks_info *t = tasks_find(o->str[OPT_TASK]);
        const char *key = t && t->metric != TASKS_METRIC_ACCURACY ? "f1" : "acc";
        char name[32];
        snprintf(name, sizeof name, "zero_shot_dev_%s", key);
        if ((v = json_get(root, name)) && v->type == JSON_NUMBER) r->zs_dev = v->number;
        snprintf(name, sizeof name, "zero_shot_test_%s", key);
        if ((v = json_get(root, name)) && v->type == JSON_NUMBER) r->zs_test = v->number;
        if ((v = json_get(root, "zero_shot_dev_em")) && v->type == JSON_NUMBER) r->zs_dev_em = v->number;
        if ((v = json_get(root, "zero_shot_test_em")) && v->type == JSON_NUMBER) r->zs_test_em = v->number;
    }
    return 0;
}

/* The task's default split sizes where none was given, so run.json records real counts. */
static void resolve_counts(options *o) {
    const tasks_info *t = tasks_find(o->str[OPT_TASK]);
    if (o->num[OPT_N_TRAIN] < 0) o->num[OPT_N_TRAIN] = t->default_train;
    if (o->num[OPT_N_DEV] < 0) o->num[OPT_N_DEV] = t->default_dev;
    if (o->num[OPT_N_TEST] < 0) o->num[OPT_N_TEST] = t->default_test;
}

/* "no checkpoint" only when there is none; anything else says why it cannot be read. */
static int check_checkpoint_readable(const char *path, char *err, size_t errlen) {
    FILE *f;
    if (access(path, F_OK) != 0 && errno == ENOENT) { snprintf(err, errlen, "--resume: no checkpoint at %s", path); return -1; }
    if (!(f = fopen(path, "rb"))) { snprintf(err, errlen, "--resume: cannot read the checkpoint %s: %s", path, strerror(errno)); return -1; }
    fclose(f);
    return 0;
}

/* The checkpoint's optimizer settings must be the run's (a checkpoint copied in from
   another run is refused, not silently mixed). */
static grzo_noise_dist noise_kind(const options *o) {
    return !strcmp(o->str[OPT_NOISE], "gaussian") ? GRZO_NOISE_GAUSSIAN : GRZO_NOISE_RADEMACHER;
}

static int32_t quant_bits(const options *o) {
    return !strcmp(o->str[OPT_QUANT], "int8") ? 8 : !strcmp(o->str[OPT_QUANT], "int4") ? 4 : 0;
}

/* grzo's one-line reason for a refused descriptor (e.g. a variant combination) */
static void keep_message(grzo_log_level level, grzo_status s, const char *msg, void *user) {
    (void)level; (void)s;
    snprintf((char *)user, 256, "%s", msg);
}

static int check_checkpoint_matches(const run *r, char *err, size_t errlen) {
    grzo_desc d;
    char conflicts[600] = "", a[64], b[64], fa[32], fb[32];
    const options *o = &r->o;
    grzo_get_desc(r->ctx, &d);
#define CK(cond, flag, fmt, mine, theirs) \
    if (cond) { snprintf(a, sizeof a, fmt, mine); snprintf(b, sizeof b, fmt, theirs); add_conflict(conflicts, sizeof conflicts, flag, a, "the checkpoint", b); }
    CK(d.estimator != o->estimator, "--estimator", "%s", estimator_name(o->estimator), estimator_name(d.estimator))
    CK(d.lr != o->real[OPT_LR], "--lr", "%s", float_text(o->real[OPT_LR], fa), float_text(d.lr, fb))
    CK(d.sigma != o->real[OPT_SIGMA], "--sigma", "%s", float_text(o->real[OPT_SIGMA], fa), float_text(d.sigma, fb))
    CK(d.seed != o->seed, "--seed", "%llu", (unsigned long long)o->seed, (unsigned long long)d.seed)
    CK(d.warmup_steps != o->num[OPT_WARMUP], "--warmup", "%lld", (long long)o->num[OPT_WARMUP], (long long)d.warmup_steps)
    CK(d.fzoo_probes != o->num[OPT_FZOO_PROBES], "--fzoo-probes", "%lld", (long long)o->num[OPT_FZOO_PROBES], (long long)d.fzoo_probes)
    CK(d.sparse_density != o->real[OPT_SPARSE_DENSITY], "--sparse-density", "%s", float_text(o->real[OPT_SPARSE_DENSITY], fa),
       float_text(d.sparse_density, fb))
    CK(d.lowrank_rank != o->num[OPT_LOWRANK_RANK], "--lowrank-rank", "%lld", (long long)o->num[OPT_LOWRANK_RANK], (long long)d.lowrank_rank)
    CK(d.quant_bits != quant_bits(o), "--quant", "%d", quant_bits(o), (int)d.quant_bits)
    CK((d.noise == GRZO_NOISE_GAUSSIAN) != (noise_kind(o) == GRZO_NOISE_GAUSSIAN), "--noise", "%s", o->str[OPT_NOISE], d.noise == GRZO_NOISE_GAUSSIAN ? "gaussian" : "rademacher")
#undef CK
    if (conflicts[0]) {
        snprintf(err, errlen, "--resume: the checkpoint %s belongs to another run than %s: %s", r->path_ckpt, r->path_manifest, conflicts);
        return -1;
    }
    if (grzo_get_step(r->ctx) > o->num[OPT_STEPS]) {
        snprintf(err, errlen, "--resume: --steps %lld is below the checkpoint's step %lld", (long long)o->num[OPT_STEPS],
                 (long long)grzo_get_step(r->ctx));
        return -1;
    }
    return 0;
}

/* Keep the log lines of steps before `step` (a resume discards anything logged after the
   checkpoint) and return the elapsed seconds of the last kept line. */
static int trim_log(const char *path, int64_t step, double *elapsed, char *err, size_t errlen) {
    FILE *f = fopen(path, "r"), *g;
    char *line = NULL, *tmp;
    size_t cap = 0;
    int ok;
    *elapsed = 0;
    if (!f) return 0;
    if (!(tmp = (char *)malloc(strlen(path) + 5))) { fclose(f); snprintf(err, errlen, "out of memory"); return -1; }
    strcpy(tmp, path);
    strcat(tmp, ".tmp");
    if (!(g = fopen(tmp, "w"))) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        fclose(f); free(tmp);
        return -1;
    }
    while (getline(&line, &cap, f) > 0) {
        long long s = -1;
        const char *p = strstr(line, "\"step\":"), *q = strstr(line, "\"elapsed\":");
        if (p) s = atoll(p + 7);
        if (s < 0 || s >= step) continue;
        if (q) *elapsed = atof(q + 10);
        fputs(line, g);
    }
    free(line);
    fclose(f);
    ok = fflush(g) == 0 && !ferror(g);
    ok = fclose(g) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rewrite %s: %s", path, strerror(errno));
        remove(tmp); free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

/* dev_em >= 0: a generation task's dev F1 (dev_acc) and exact match */
static void log_line(FILE *f, int64_t step, const grzo_step_report *rep, double elapsed, double dev_acc, double dev_em) {
    fprintf(f, "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.9g,\"elapsed\":%.3f", (long long)step, rep->loss, (double)rep->lr, elapsed);
    if (dev_acc >= 0 && dev_em >= 0) fprintf(f, ",\"dev_f1\":%.6f,\"dev_em\":%.6f", dev_acc, dev_em);
    else if (dev_acc >= 0) fprintf(f, ",\"dev_acc\":%.6f", dev_acc);
    fprintf(f, "}\n");
    fflush(f);
}

/* The plot's title names the model file; anything but [A-Za-z0-9._+-] becomes '_' so the
   name never needs quoting inside gnuplot's language. */
static void safe_title_word(const char *s, char *out, size_t n) {
    size_t i;
    for (i = 0; *s && i + 1 < n; s++, i++) {
        char c = *s;
        out[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._+-", c)) ? c : '_';
    }
    out[i] = '\0';
}

/* The gnuplot script with the log's (step, loss, seconds) inline: gnuplot reads no path
   that comes from the user and writes loss.png.tmp in the output folder. */
static void write_plot_script(FILE *f, const run *r) {
    FILE *log = fopen(r->path_log, "r");
    char *line = NULL, model[128];
    size_t cap = 0;
    const char *base = strrchr(r->o.str[OPT_MODEL], '/');
    safe_title_word(base ? base + 1 : r->o.str[OPT_MODEL], model, sizeof model);
    fprintf(f, "$loss << EOD\n");
    while (log && getline(&line, &cap, log) > 0) {
        const char *p = strstr(line, "\"step\":"), *q = strstr(line, "\"loss\":"), *e = strstr(line, "\"elapsed\":");
        if (p && q && e) fprintf(f, "%lld %.9g %.3f\n", atoll(p + 7), atof(q + 7), atof(e + 10));
    }
    free(line);
    if (log) fclose(log);
    fprintf(f, "EOD\n"
               "set terminal pngcairo size 1100,420 font ',10' noenhanced\nset output 'loss.png.tmp'\n"
               "set multiplot layout 1,2 title '%s on %s, %s (B = %lld, lr = %g, sigma = %g)'\n"
               "set grid\nset ylabel 'training loss'\nset xlabel 'step'\n"
               "plot $loss using 1:2 with lines lw 1.5 title 'loss'\n"
               "set xlabel 'seconds'\nplot $loss using 3:2 with lines lw 1.5 title 'loss'\nunset multiplot\n",
            estimator_name(r->o.estimator), r->data.task->name, model, (long long)r->o.num[OPT_BATCH],
            (double)r->o.real[OPT_LR], (double)r->o.real[OPT_SIGMA]);
}

/* loss against steps and against seconds (gnuplot, when installed); a missing or failing
   gnuplot is a note, not an error: the run's results are already written */
static void plot_loss(const run *r) {
    const char *out = r->o.str[OPT_OUT];
    char *gp = path_join(out, "loss.gp"), *tmp = path_join(out, "loss.png.tmp"), err[1024] = "";
    int rc = -1;
    if (gp && tmp && write_atomically(gp, write_plot_script, r, err, sizeof err) == 0) {
        rc = gnuplot_run(out, "loss.gp", err, sizeof err);
        if (rc == 0 && rename(tmp, r->path_png) != 0) {
            snprintf(err, sizeof err, "cannot write %s: %s", r->path_png, strerror(errno));
            rc = -1;
        }
    }
    if (rc == 1) fprintf(stderr, "note: gnuplot not found: no %s\n", r->path_png);
    else if (rc != 0) fprintf(stderr, "note: no %s: %s\n", r->path_png, err[0] ? err : "out of memory");
    if (tmp) remove(tmp);
    if (gp) remove(gp);
    free(gp);
    free(tmp);
}

static void progress(const run *r, int64_t step, double loss, double rate) {
    double eta = rate > 0 ? (double)(r->o.num[OPT_STEPS] - step) / rate : 0;
    if (!isatty(fileno(stderr))) return;
    fprintf(stderr, "\r[%lld/%lld] loss %.4f  %.2f steps/s  ETA %d:%02d   ", (long long)step, (long long)r->o.num[OPT_STEPS], loss,
            rate, (int)(eta / 60), (int)eta % 60);
    fflush(stderr);
}

/* ---- setup ------------------------------------------------------------------------------------- */
/* Reads the model, the tokenizer and the data; writes nothing (an early failure leaves no
   files). A resumed run uses its indices file, so it sees exactly the same examples. */
static int load_everything(run *r, char *err, size_t errlen) {
    const options *o = &r->o;
    tasks_paths paths;
    tasks_load_desc ld;
    tasks_indices idx;
    int have_idx = 0, bos, rc;
    int32_t max_len;
    memset(&paths, 0, sizeof paths);
    if (llm_load(o->str[OPT_MODEL], &r->cfg, &r->w, &r->tok, err, errlen)) return -1;
    if (!r->tok) {
        if (!o->str[OPT_TOKENIZER]) { snprintf(err, errlen, "%s has no tokenizer inside: give --tokenizer", o->str[OPT_MODEL]); return -1; }
        if (llm_tokenizer_load_llama2c(o->str[OPT_TOKENIZER], r->cfg.vocab_size, &r->tok, err, errlen)) return -1;
    }
    if (tasks_resolve_dir(o->str[OPT_TASK], o->str[OPT_DATA], &paths, err, errlen)) return -1;
    if (r->ranks.rank == 0) fprintf(stderr, "data: %s\n", paths.note);
    memset(&ld, 0, sizeof ld);
    ld.task = o->str[OPT_TASK]; ld.train_path = paths.train; ld.dev_path = paths.dev; ld.test_path = paths.test;
    ld.seed = o->seed; ld.n_train = (long)o->num[OPT_N_TRAIN]; ld.n_dev = (long)o->num[OPT_N_DEV]; ld.n_test = (long)o->num[OPT_N_TEST];
    if (o->resume) {
        if (tasks_read_indices(r->path_indices, &idx, err, errlen)) { tasks_free_paths(&paths); return -1; }
        have_idx = 1;
        ld.indices = &idx;
    }
    rc = tasks_load_ex(&ld, &r->data, err, errlen);
    if (have_idx) tasks_free_indices(&idx);
    tasks_free_paths(&paths);
    if (rc) return -1;
    r->lm_loss = r->data.train_on_gold_tokens;
    r->generation = r->data.task->metric != TASKS_METRIC_ACCURACY;
    bos = llm_tokenizer_wants_bos(r->tok);
    max_len = (int32_t)o->num[OPT_MAX_LEN];
    if (max_len == 0 || max_len > r->cfg.max_seq_len) max_len = r->cfg.max_seq_len;
    if (tokenize_split(r->tok, bos, max_len, &r->data.train, &r->train, err, errlen) ||
        tokenize_split(r->tok, bos, max_len, &r->data.dev, &r->dev, err, errlen) ||
        tokenize_split(r->tok, bos, max_len, &r->data.test, &r->test, err, errlen))
        return -1;
    if (r->train.n == 0 && o->num[OPT_STEPS] > 0) { snprintf(err, errlen, "no training examples"); return -1; }
    return 0;
}

static int setup_optimizer(run *r, char *err, size_t errlen) {
    grzo_desc d;
    llm_model_desc md;
    llm_state_desc sd;
    int32_t max_total = r->train.max_total, max_len = r->train.max_len;
    int64_t copies = 2 * r->o.num[OPT_BATCH];
    grzo_status s;
    memset(&d, 0, sizeof d);
    d.backend = &r->be; d.estimator = r->o.estimator; d.seed = r->o.seed; d.lr = r->o.real[OPT_LR]; d.sigma = r->o.real[OPT_SIGMA];
    d.warmup_steps = r->o.num[OPT_WARMUP]; d.fzoo_probes = (int32_t)r->o.num[OPT_FZOO_PROBES];
    d.comm = ft_ranks_comm(&r->ranks); d.per_example_ops = r->o.shard_invariant ? 1 : 0;   /* 0: on with comm */
    d.replica_check_every = r->o.num[OPT_REPLICA_CHECK];
    d.sparse_density = r->o.real[OPT_SPARSE_DENSITY]; d.quant_bits = quant_bits(&r->o); d.noise = noise_kind(&r->o);
    d.lowrank_rank = (int32_t)r->o.num[OPT_LOWRANK_RANK]; d.lowrank_every = (int32_t)r->o.num[OPT_LOWRANK_EVERY];
    d.logger.func = keep_message; d.logger.user_data = r->grzo_why;
    if (llm_backend_create(r->o.str[OPT_DEVICE], (int32_t)r->o.num[OPT_THREADS], &r->be, err, errlen) != GRZO_OK) return -1;
    if ((s = grzo_create(&d, &r->ctx)) != GRZO_OK) {
        snprintf(err, errlen, "grzo_create: %s%s%s", grzo_status_str(s), r->grzo_why[0] ? ": " : "", r->grzo_why);
        return -1;
    }
    memset(&md, 0, sizeof md);
    parse_dtype(r->o.str[OPT_DTYPE], &md.dtype);
    if (llm_model_register_ex(r->ctx, &r->model, &r->cfg, &r->w, &md) != GRZO_OK) {
        snprintf(err, errlen, "%s", llm_model_error(&r->model));
        return -1;
    }
    if (r->dev.max_total > max_total) max_total = r->dev.max_total;
    if (r->test.max_total > max_total) max_total = r->test.max_total;
    if (r->dev.max_len > max_len) max_len = r->dev.max_len;
    if (r->test.max_len > max_len) max_len = r->test.max_len;
    if (r->generation) {   /* llm_generate: the prompt and the answer in one sequence */
        r->gen_steps = r->dev.max_generate > r->test.max_generate ? r->dev.max_generate : r->test.max_generate;
        if (r->gen_steps > r->cfg.max_seq_len) r->gen_steps = r->cfg.max_seq_len;
        if (r->gen_steps > max_len) max_len = r->gen_steps;
        if (r->gen_steps > max_total) max_total = r->gen_steps;
        if (!(r->gen_tokens = (int32_t *)malloc(sizeof(int32_t) * ((size_t)r->gen_steps + 1)))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    r->max_seqs = (int32_t)((copies > EVAL_CHUNK ? copies : EVAL_CHUNK) * TASKS_MAX_CANDIDATES);
    memset(&sd, 0, sizeof sd);
    sd.max_rows = (copies > EVAL_CHUNK ? copies : EVAL_CHUNK) * (int64_t)max_total;
    sd.max_seqs = r->max_seqs;
    sd.max_outputs = sd.max_rows;
    sd.max_seq_len = max_len;
    sd.max_segments = copies;
    if (llm_state_create(r->ctx, &r->model, &sd, &r->st) != GRZO_OK) { snprintf(err, errlen, "%s", llm_model_error(&r->model)); return -1; }
    r->picked = (int64_t *)calloc((size_t)r->o.num[OPT_BATCH], sizeof(int64_t));
    r->seqs = (llm_seq *)calloc((size_t)r->max_seqs, sizeof(llm_seq));
    r->n_context = (int32_t *)calloc((size_t)r->max_seqs, sizeof(int32_t));
    r->means = (double *)calloc((size_t)r->max_seqs, sizeof(double));
    if (!r->picked || !r->seqs || !r->n_context || !r->means) { snprintf(err, errlen, "out of memory"); return -1; }
    return 0;
}

static void cleanup(run *r) {
    free(r->picked); free(r->seqs); free(r->n_context); free(r->means); free(r->gen_tokens);
    if (r->st) llm_state_free(r->st);
    llm_model_free(&r->model);
    grzo_destroy(r->ctx);
    if (r->be.iface) grzo_backend_destroy(&r->be);
    free_tok_split(&r->train); free_tok_split(&r->dev); free_tok_split(&r->test);
    tasks_free(&r->data);
    if (r->tok) llm_tokenizer_free(r->tok);
    llm_weights_free(&r->w);
    if (r->have_manifest) json_free(&r->manifest);
    free(r->path_log); free(r->path_ckpt); free(r->path_indices); free(r->path_results); free(r->path_png); free(r->path_manifest);
    free(r->path_predictions);
    free_predictions(r);
}

/* results.json: what actually ran (after a resume, the recorded settings and the new budget) */
static void write_results_json(FILE *f, const run *r) {
    const options *o = &r->o;
    char lr[32], sigma[32];
    fprintf(f, "{\"task\":\"%s\",\"model\":", r->data.task->name);
    json_string(f, o->str[OPT_MODEL]);
    fprintf(f, ",\"estimator\":\"%s\",\"lr\":%s,\"sigma\":%s,\"batch\":%lld,\"seed\":%llu,\"warmup\":%lld,\"fzoo_probes\":%lld,\n"
               " \"n_train\":%zu,\"n_dev\":%zu,\"n_test\":%zu,\"steps\":%lld,\"seconds\":%.1f,\n"
               " \"zero_shot_dev_%s\":%.6f,\"zero_shot_test_%s\":%.6f,\"dev_%s\":%.6f,\"test_%s\":%.6f",
            estimator_name(o->estimator), float_text(o->real[OPT_LR], lr), float_text(o->real[OPT_SIGMA], sigma), (long long)o->num[OPT_BATCH],
            (unsigned long long)o->seed, (long long)o->num[OPT_WARMUP], (long long)o->num[OPT_FZOO_PROBES], r->train.n, r->dev.n,
            r->test.n, (long long)grzo_get_step(r->ctx), r->seconds, score_key(r), r->zs_dev, score_key(r), r->zs_test,
            score_key(r), r->dev_acc, score_key(r), r->test_acc);
    if (r->generation)   /* exact match beside F1 */
        fprintf(f, ",\n \"zero_shot_dev_em\":%.6f,\"zero_shot_test_em\":%.6f,\"dev_em\":%.6f,\"test_em\":%.6f", r->zs_dev_em,
                r->zs_test_em, r->dev_em, r->test_em);
    {   /* the variant axes (grzo.h section 3c) that ran: 0 / "none" = off */
        char density[32];
        fprintf(f, ",\n \"sparse_density\":%s,\"lowrank_rank\":%lld,\"lowrank_every\":%lld,\"quant\":\"%s\",\"noise\":\"%s\"",
                float_text(o->real[OPT_SPARSE_DENSITY], density), (long long)o->num[OPT_LOWRANK_RANK],
                (long long)(o->num[OPT_LOWRANK_RANK] > 0 && o->num[OPT_LOWRANK_EVERY] == 0 ? GRZO_LOWRANK_EVERY_DEFAULT
                                                                               : o->num[OPT_LOWRANK_EVERY]),
                o->str[OPT_QUANT], o->str[OPT_NOISE]);
    }
    fprintf(f, "}\n");
}

/* predictions.jsonl: one line per test question, {"id", "prediction", "em", "f1"} (the id is
   the file's "id" / "query_id", so the official scripts' predictions can be built from it) */
static void write_predictions_json(FILE *f, const run *r) {
    size_t i;
    for (i = 0; i < r->test.n; i++) {
        fprintf(f, "{\"id\":");
        json_string(f, r->data.test.ex[i].id ? r->data.test.ex[i].id : "");
        fprintf(f, ",\"prediction\":");
        json_string(f, r->preds[i].text);
        fprintf(f, ",\"em\":%.6f,\"f1\":%.6f}\n", r->preds[i].em, r->preds[i].f1);
    }
}

static int save_checkpoint(run *r, char *err, size_t errlen) {
    if (r->ranks.rank != 0) return 0;   /* the ranks' parameters are equal (the replica guard) */
    if (grzo_checkpoint_save(r->ctx, r->path_ckpt) == GRZO_OK) return 0;
    snprintf(err, errlen, "%s", grzo_last_error(r->ctx));
    return -1;
}

/* --save-every N: after every N-th step; 0: when SAVE_SECONDS_DEFAULT have passed */
static int save_due(const run *r, int64_t steps_done, double last_save) {
    int64_t every = r->o.num[OPT_SAVE_EVERY];
    return every > 0 ? steps_done % every == 0 : now() - last_save >= SAVE_SECONDS_DEFAULT;
}

/* A new run: the folder, the manifest, the indices, the zero-shot accuracies. */
static int start_fresh(run *r, char *err, size_t errlen) {
    grzo_status s;
    char dev[64], test[64];
    if (ensure_dir(r->o.str[OPT_OUT], err, errlen) || remove_earlier_run(r, err, errlen) || write_manifest(r, err, errlen) ||
        tasks_write_indices(r->path_indices, &r->data, err, errlen))
        return -1;
    if ((s = evaluate(r, &r->dev, &r->zs_dev, &r->zs_dev_em)) != GRZO_OK ||
        (s = evaluate(r, &r->test, &r->zs_test, &r->zs_test_em)) != GRZO_OK) {
        snprintf(err, errlen, "%s: %s", grzo_status_str(s), llm_model_error(&r->model));
        return -1;
    }
    printf("zero-shot: dev %s (%zu), test %s (%zu)\n", score_text(r->zs_dev, r->zs_dev_em, dev), r->dev.n,
           score_text(r->zs_test, r->zs_test_em, test), r->test.n);
    fflush(stdout);
    return write_manifest(r, err, errlen);
}

/* A resumed run: the checkpoint (which must be this run's), the log up to it, and the
   manifest with the new budget. The earlier results and plot go: they are rewritten at the end. */
static int start_resumed(run *r, char *err, size_t errlen) {
    /* every rank reads and verifies the checkpoint itself; then they compare what they hold */
    if (grzo_checkpoint_load(r->ctx, r->path_ckpt) != GRZO_OK) { snprintf(err, errlen, "--resume: %s", grzo_last_error(r->ctx)); return -1; }
    if (check_checkpoint_matches(r, err, errlen)) return -1;
    if (grzo_check_replicas(r->ctx) != GRZO_OK) { snprintf(err, errlen, "--resume: %s", grzo_last_error(r->ctx)); return -1; }
    if (r->ranks.rank != 0) return 0;
    if (trim_log(r->path_log, grzo_get_step(r->ctx), &r->elapsed_before, err, errlen) ||
        write_manifest(r, err, errlen))
        return -1;
    remove(r->path_results);
    remove(r->path_png);
    remove(r->path_predictions);
    fprintf(stderr, "resumed at step %lld from %s\n", (long long)grzo_get_step(r->ctx), r->path_ckpt);
    return 0;
}

/* ---- --diagnose: will GRZO help on this task? ------------------------------------------------------ */
#define DIAGNOSE_GAIN 1.25   /* a B_eff interval above this: GRZO; below 1 / this: MeZO */

static const char *recommendation(const grzo_align_report *a) {
    if (a->b_eff_lo > DIAGNOSE_GAIN) return "GRZO (the examples' gradients align: lower variance than MeZO at the same forward budget)";
    if (a->b_eff_hi < 1.0 / DIAGNOSE_GAIN) return "MeZO (the examples' gradients cancel: GRZO's per-example estimate is the noisier)";
    if (a->b_eff_lo >= 1.0 / DIAGNOSE_GAIN && a->b_eff_hi <= DIAGNOSE_GAIN)
        return "no difference expected (nearly orthogonal per-example gradients: choose by cost)";
    return "inconclusive at this many probes (raise --diagnose-probes; grzo.h section 3b gives the K needed)";
}

/* The diagnostic as a line of the log; it has no "loss" or "elapsed" key, so the plots and the
   elapsed time a resume takes from the log pass it by, and its "step" lets a resume trim it. */
static void log_diagnose(FILE *f, int64_t step, const grzo_align_report *a, int32_t probes, double seconds) {
    fprintf(f, "{\"step\":%lld,\"diagnose\":{\"b_eff\":%.6g,\"b_eff_se\":%.6g,\"b_eff_lo\":%.6g,\"b_eff_hi\":%.6g,"
               "\"c_w\":%.6g,\"c_w_se\":%.6g,\"probes\":%d,\"seconds\":%.3f}}\n",
            (long long)step, a->b_eff, a->b_eff_se, a->b_eff_lo, a->b_eff_hi, a->c_w, a->c_w_se, (int)probes, seconds);
    fflush(f);
}

/* Before training, and before every --diagnose-every-th step: B_eff of the batch the next step
   draws, from --diagnose-probes shared-perturbation passes (grzo_align), printed and logged.
   Parameters, step counter and data order are untouched (grzo.h section 3b), so the run
   trains exactly as it would without --diagnose. */
static int diagnose(run *r, FILE *log, char *err, size_t errlen) {
    grzo_align_report a;
    int64_t B = r->o.num[OPT_BATCH], step = grzo_get_step(r->ctx);
    int32_t K = (int32_t)r->o.num[OPT_DIAGNOSE_PROBES];
    double t0 = now(), seconds;
    grzo_status s;
    pick_batch(r, step);
    s = grzo_align(r->ctx, B, K, train_forward, r, NULL, &a);
    if (s != GRZO_OK) {
        snprintf(err, errlen, "--diagnose: %s: %s", grzo_status_str(s),
                 llm_model_error(&r->model)[0] ? llm_model_error(&r->model) : grzo_last_error(r->ctx));
        return -1;
    }
    seconds = now() - t0;
    if (log) log_diagnose(log, step, &a, K, seconds);   /* NULL on ranks other than 0 */
    printf("diagnose at step %lld, B = %lld: %d probes (%d forward passes of %lld copies, %.1f s)\n", (long long)step,
           (long long)B, (int)K, (int)K, (long long)(2 * B), seconds);
    printf("  B_eff = %.2f +- %.2f (95%% interval [%.2f, %.2f]), c_w = %.3f +- %.3f\n", a.b_eff, a.b_eff_se, a.b_eff_lo,
           a.b_eff_hi, a.c_w, a.c_w_se);
    printf("  predicted Var(MeZO)/Var(GRZO) = %.2f, cos(GRZO)/cos(MeZO) = %.2f [%.2f, %.2f]\n", a.var_ratio, a.cos_ratio,
           a.cos_ratio_lo, a.cos_ratio_hi);
    printf("  recommendation: %s\n", recommendation(&a));
    fflush(stdout);
    return 0;
}

/* ---- main --------------------------------------------------------------------------------------- */
static int fail(run *r, int code, const char *err) {
    if (r->ranks.n_ranks > 1) fprintf(stderr, "grzo-finetune: rank %d: %s\n", r->ranks.rank, err);
    else fprintf(stderr, "grzo-finetune: %s\n", err);
    cleanup(r);
    return ft_ranks_fail(&r->ranks, code);
}

/* mpirun: Ctrl-C reaches the ranks at different moments; they stop at the first step boundary
   where any has seen it, together (a collective per step). -1: the ranks lost each other. */
static int stop_requested(run *r) {
    int any = ft_ranks_any(&r->ranks, interrupted);
    if (any > 0) interrupted = 1;
    return any;
}

int main(int argc, char **argv) {
    static run r;   /* large; zero-initialized */
    char err[2048] = "";
    FILE *logf = NULL;
    int64_t step, first_step;
    int stop = 0;
    double t_train0, last_save;
    grzo_status s = GRZO_OK;
    struct sigaction sa;
    cpu_env_reexec(argv);
    r.zs_dev = r.zs_test = r.dev_acc = r.test_acc = -1;
    r.zs_dev_em = r.zs_test_em = r.dev_em = r.test_em = -1;
    if (ft_ranks_init(&argc, &argv, &r.ranks, err, sizeof err)) return fail(&r, 1, err);
    if (parse_options(argc, argv, &r.o, err, sizeof err)) return fail(&r, 2, err);
    if (!(r.path_manifest = path_join(r.o.str[OPT_OUT], "run.json"))) return fail(&r, 1, "out of memory");
    if (r.o.resume && resume_settings(&r, err, sizeof err)) return fail(&r, 2, err);
    if (check_required(&r.o, err, sizeof err)) return fail(&r, 2, err);
    resolve_counts(&r.o);
    if (make_paths(&r, err, sizeof err) || check_paths(&r, err, sizeof err)) return fail(&r, 2, err);
    if (!r.o.resume && refuse_earlier_run(&r, err, sizeof err)) return fail(&r, 2, err);
    if (r.o.resume && check_checkpoint_readable(r.path_ckpt, err, sizeof err)) return fail(&r, 1, err);
    if (load_everything(&r, err, sizeof err) || setup_optimizer(&r, err, sizeof err)) return fail(&r, 1, err);
    /* mpirun: every rank has checked the paths and loaded the same model before rank 0 writes */
    if (grzo_check_replicas(r.ctx) != GRZO_OK) return fail(&r, 1, grzo_last_error(r.ctx));
    if (r.ranks.rank == 0) tasks_describe(&r.data, stderr);
    if (r.ranks.rank == 0) cpu_env_report(stderr, "grzo-finetune: ", &r.be);   /* nothing for a CUDA run */
    if (r.o.resume ? start_resumed(&r, err, sizeof err) : r.ranks.rank == 0 && start_fresh(&r, err, sizeof err)) return fail(&r, 1, err);
    if (r.ranks.rank == 0 && !(logf = fopen(r.path_log, r.o.resume ? "a" : "w"))) {
        snprintf(err, sizeof err, "cannot open the log %s: %s", r.path_log, strerror(errno));
        return fail(&r, 1, err);
    }
    if (r.o.diagnose && diagnose(&r, logf, err, sizeof err)) { if (logf) fclose(logf); return fail(&r, 1, err); }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    t_train0 = last_save = now();
    first_step = grzo_get_step(r.ctx);
    for (step = first_step; step < r.o.num[OPT_STEPS]; step = grzo_get_step(r.ctx)) {
        grzo_step_report rep;
        double elapsed, dev = -1, dev_em = -1;
        int64_t eval_every = r.o.num[OPT_EVAL_EVERY], diagnose_every = r.o.num[OPT_DIAGNOSE_EVERY];
        if ((stop = stop_requested(&r)) != 0) break;
        if (r.o.diagnose && diagnose_every > 0 && step > first_step && step % diagnose_every == 0) {
            double t0 = now();
            if (diagnose(&r, logf, err, sizeof err)) { if (logf) fclose(logf); return fail(&r, 1, err); }
            r.diagnose_seconds += now() - t0;
        }
        pick_batch(&r, step);
        s = grzo_step(r.ctx, r.o.num[OPT_BATCH], train_forward, &r, &rep);
        if (s != GRZO_OK) goto failed;
        if (r.ranks.rank != 0) continue;   /* the others wait in the next step's gather */
        if (eval_every > 0 && (step + 1) % eval_every == 0 && (s = evaluate(&r, &r.dev, &dev, &dev_em)) != GRZO_OK) goto failed;
        elapsed = r.elapsed_before + (now() - t_train0 - r.diagnose_seconds);
        log_line(logf, step, &rep, elapsed, dev, dev_em);
        progress(&r, step + 1, rep.loss, (double)(step + 1 - first_step) / (now() - t_train0));
        if (dev >= 0 && isatty(fileno(stderr))) {
            char text[64];
            fprintf(stderr, "\n  dev %s at step %lld\n", score_text(dev, dev_em, text), (long long)step + 1);
        }
        if (step + 1 < r.o.num[OPT_STEPS] && save_due(&r, step + 1, last_save)) {
            if (save_checkpoint(&r, err, sizeof err)) { fclose(logf); return fail(&r, 1, err); }
            last_save = now();
        }
    }
    if (stop < 0) {
        if (logf) fclose(logf);
        return fail(&r, 1, "the ranks lost each other (an MPI collective failed)");
    }
    if (logf) {
        if (isatty(fileno(stderr))) fprintf(stderr, "\n");
        fclose(logf);
        logf = NULL;
    }
    if (save_checkpoint(&r, err, sizeof err)) return fail(&r, 1, err);
    if (r.ranks.rank != 0) {   /* rank 0 evaluates and writes the results */
        cleanup(&r);
        return ft_ranks_exit(&r.ranks, interrupted ? 130 : 0);
    }
    if (interrupted) {
        printf("interrupted at step %lld: checkpoint written to %s (continue with --resume)\n", (long long)grzo_get_step(r.ctx), r.path_ckpt);
        cleanup(&r);
        return ft_ranks_exit(&r.ranks, 130);
    }
    if ((s = evaluate(&r, &r.dev, &r.dev_acc, &r.dev_em)) != GRZO_OK || (s = evaluate(&r, &r.test, &r.test_acc, &r.test_em)) != GRZO_OK)
        goto failed;
    {
        char dev[64], test[64];
        printf("after %lld steps (%s, lr %g, sigma %g, B %lld): dev %s, test %s\n", (long long)grzo_get_step(r.ctx),
               estimator_name(r.o.estimator), (double)r.o.real[OPT_LR], (double)r.o.real[OPT_SIGMA], (long long)r.o.num[OPT_BATCH],
               score_text(r.dev_acc, r.dev_em, dev), score_text(r.test_acc, r.test_em, test));
    }
    ft_ranks_report(&r.ranks, grzo_get_step(r.ctx) - first_step, stdout);
    r.seconds = r.elapsed_before + now() - t_train0 - r.diagnose_seconds;
    if (write_atomically(r.path_results, write_results_json, &r, err, sizeof err)) return fail(&r, 1, err);
    if (r.generation && write_atomically(r.path_predictions, write_predictions_json, &r, err, sizeof err)) return fail(&r, 1, err);
    if (r.o.str[OPT_EXPORT] && llm_export_as(r.o.str[OPT_MODEL], r.path_ckpt, r.o.str[OPT_EXPORT], r.o.str[OPT_EXPORT_TYPE], err, sizeof err))
        return fail(&r, 1, err);
    if (r.o.num[OPT_STEPS] > 0) plot_loss(&r);   /* --steps 0 (evaluation, --diagnose): no curve to draw */
    cleanup(&r);
    return ft_ranks_exit(&r.ranks, 0);
failed:
    snprintf(err, sizeof err, "%s: %s", grzo_status_str(s), llm_model_error(&r.model)[0] ? llm_model_error(&r.model) : grzo_last_error(r.ctx));
    if (logf) fclose(logf);
    return fail(&r, 1, err);
}
