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
     as for COPA; evaluation decodes greedily from the prompt (at most 50 new tokens, and
     the prompt and answer within --max-len, up to the first newline, BOS or EOS; MeZO's
     generation) and scores the text with the task's official exact match and F1
     (qa_score.h); F1 takes accuracy's place (log: dev_f1 and dev_em; results.json: *_f1
     and *_em; predictions.jsonl: each test question's id, generated answer, EM, F1, its
     new tokens and what ended it: "bos", "eos", "newline", "max_new_tokens", "max_len").
   Outputs in --out (default finetune-out): run.json (the run's settings, which --resume
   compares and reuses), log.jsonl (one line per step: step, loss, lr, elapsed seconds, and
   dev_acc when evaluated; with --diagnose, a {"step":S,"diagnose":{...}} line before step S
   for each diagnostic), indices.txt (the sampled examples, so a run can be reproduced
   exactly), results.json (what actually ran, and the accuracies), loss.png (gnuplot, when
   installed; run without a shell, so no path is ever a command). All but the log are
   written through a temporary file and a rename. The checkpoint is saved every --save-every steps
   (or 10 minutes), at the end and on Ctrl-C; --resume continues exactly, and its log lines
   equal the uninterrupted run's (except the elapsed time); run.json records the checkpoint
   the run saved last, and --resume takes no other. Nothing is written before the model and
   the data have loaded, a new run never mixes with an earlier run's files (--overwrite
   replaces them, and no other file), and a new run that fails before its first checkpoint
   removes its files again.

   This file is the setup, the training loop and evaluation; the command line is options.c,
   the examples as token ids tok_examples.c, and the run's files run_files.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cpu_env.h"   /* the CPU's GEMM kernels: re-exec, report */
#include "llm.h"
#include "llm_export.h"
#include "model.h"
#include "tasks.h"
#include "finetune_internal.h"   /* the run's state: options.h, tok_examples.h */
#include "run_files.h"
#include "files.h"

/* ---- the run ---------------------------------------------------------------------------------- */
#define EVAL_CHUNK 8          /* examples scored per forward during evaluation */
#define SAVE_SECONDS_DEFAULT 600.0   /* --save-every 0: a checkpoint every 10 minutes */

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

/* What ends a generated answer: BOS or EOS (not part of the answer), the first token whose
   text holds a newline (MeZO's eos_token "\n"), or else the length: TASKS_MAX_NEW_TOKENS
   new tokens, or the sequence's cap (--max-len, the model's seq_len) before that. The stop
   tokens are watched here rather than by llm_generate's stop list, so that the answer can
   say which one ended it (predictions.jsonl's "stop"). */
typedef struct answer_watch {
    const llm_tokenizer *tok;
    int32_t bos, eos;
    const char *stop;   /* "bos", "eos", "newline"; NULL while none came */
} answer_watch;

static int answer_stops(int32_t prev, int32_t token, void *user) {
    answer_watch *w = (answer_watch *)user;
    if (token == w->bos) w->stop = "bos";
    else if (token == w->eos) w->stop = "eos";
    else if (strchr(llm_token_text(w->tok, prev, token), '\n')) w->stop = "newline";
    return w->stop != NULL;
}

/* Greedy decoding from ex's prompt; the text up to the first newline into *out (MeZO strips
   it; the scorers' normalization ignores surrounding whitespace, so it is kept as is), the
   new tokens of the answer (a stop token not counted) into *n_new and what ended it into
   *stop ("bos", "eos", "newline", "max_new_tokens" or "max_len"). */
static grzo_status generate_answer(run *r, const tok_example *ex, char **out, int32_t *n_new, const char **stop) {
    llm_generate_desc g;
    answer_watch w;
    int32_t n_total = 0, i, limit = ex->n_prompt + TASKS_MAX_NEW_TOKENS - 1;   /* TASKS_MAX_NEW_TOKENS new tokens at most */
    size_t len = 0;
    grzo_status s;
    char *text;
    memset(&g, 0, sizeof g);
    g.steps = limit < r->gen_steps ? limit : r->gen_steps;
    g.stop[0] = g.stop[1] = -1;
    w.tok = r->tok;
    w.bos = llm_tokenizer_bos(r->tok);
    w.eos = llm_tokenizer_eos(r->tok);
    w.stop = NULL;
    g.on_token = answer_stops;
    g.user_data = &w;
    memcpy(r->gen_tokens, ex->prompt, sizeof(int32_t) * (size_t)ex->n_prompt);
    if ((s = llm_generate(r->ctx, &r->model, r->st, r->gen_tokens, ex->n_prompt, &g, &n_total)) != GRZO_OK) return s;
    if (w.stop && strcmp(w.stop, "newline") != 0) n_total--;   /* BOS or EOS: the answer ends before it */
    *n_new = n_total - ex->n_prompt;
    *stop = w.stop ? w.stop : g.steps < limit ? "max_len" : "max_new_tokens";
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
   split's answers are kept for predictions.jsonl. interruptible: see evaluate. */
static grzo_status evaluate_generation(run *r, const tok_split *split, double *f1, double *em, int interruptible) {
    size_t i;
    int keep = split == &r->test;
    *f1 = *em = 0;
    if (keep) {
        free_predictions(r);
        if (!(r->preds = (prediction *)calloc(split->n ? split->n : 1, sizeof *r->preds))) return GRZO_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < split->n; i++) {
        char *answer = NULL;
        const char *stop = NULL;
        int32_t n_new = 0;
        double e, f;
        grzo_status s;
        if (interruptible && interrupted) return GRZO_OK;
        s = generate_answer(r, &split->ex[i], &answer, &n_new, &stop);
        if (s != GRZO_OK) return s;
        if (tasks_score_prediction(r->data.task, &split->src->ex[i], answer, &e, &f)) {
            free(answer);
            return GRZO_ERR_OUT_OF_MEMORY;
        }
        if (keep) {
            r->preds[i].text = answer;
            r->preds[i].em = e;
            r->preds[i].f1 = f;
            r->preds[i].new_tokens = n_new;
            r->preds[i].stop = stop;
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
   is -1 for multiple choice; em may be NULL). interruptible: Ctrl-C stops it between chunks
   (the caller sees `interrupted`; the scores are then meaningless), for the evaluations
   before and after training, which can take long (SQuAD: 1000 generations) and after
   which nothing is lost. During training the step's dev score completes its log line. */
static grzo_status evaluate(run *r, const tok_split *split, double *acc, double *em, int interruptible) {
    size_t i0, correct = 0;
    const tok_example *chunk[EVAL_CHUNK];
    double em_unused;
    *acc = 0;
    if (!em) em = &em_unused;
    *em = -1;
    if (r->generation) return evaluate_generation(r, split, acc, em, interruptible);
    if (split->n == 0) return GRZO_OK;
    for (i0 = 0; i0 < split->n; i0 += EVAL_CHUNK) {
        size_t n = split->n - i0 < EVAL_CHUNK ? split->n - i0 : EVAL_CHUNK, i;
        grzo_status s;
        if (interruptible && interrupted) return GRZO_OK;
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

/* "12:34" (minutes:seconds); an estimate beyond what an int holds (a slow first step of a
   huge --steps) or none at all is "--:--", since the conversion of such a double is undefined. */
static const char *eta_text(double seconds, char buf[32]) {
    if (!(seconds >= 0 && seconds < 1e9)) return "--:--";
    snprintf(buf, 32, "%d:%02d", (int)(seconds / 60), (int)seconds % 60);
    return buf;
}

static void progress(const run *r, int64_t step, double loss, double rate) {
    char eta[32];
    if (!isatty(fileno(stderr))) return;
    fprintf(stderr, "\r[%lld/%lld] loss %.4f  %.2f steps/s  ETA %s   ", (long long)step, (long long)r->o.num[OPT_STEPS], loss,
            rate, rate > 0 ? eta_text((double)(r->o.num[OPT_STEPS] - step) / rate, eta) : "--:--");
    fflush(stderr);
}

/* ---- setup ------------------------------------------------------------------------------------- */
/* The tokens a sequence may hold: --max-len, the model's seq_len where that is 0 or more. A
   generation's prompt and answer are one sequence, so its answer stops there too. */
static int32_t sequence_cap(const run *r) {
    int64_t n = r->o.num[OPT_MAX_LEN];
    return n == 0 || n > r->cfg.max_seq_len ? r->cfg.max_seq_len : (int32_t)n;
}

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
    max_len = sequence_cap(r);
    if (tokenize_split(r->tok, bos, max_len, &r->data.train, &r->train, err, errlen) ||
        tokenize_split(r->tok, bos, max_len, &r->data.dev, &r->dev, err, errlen) ||
        tokenize_split(r->tok, bos, max_len, &r->data.test, &r->test, err, errlen))
        return -1;
    if (r->train.n == 0 && o->num[OPT_STEPS] > 0) { snprintf(err, errlen, "no training examples"); return -1; }
    return 0;
}

/* --export: refused before training when no checkpoint of the model could be exported as GGUF
   (a llama2.c original, a tokenizer llama.cpp would encode differently), not after it. */
static int check_export(const run *r, char *err, size_t errlen) {
    char why[1024];
    if (!r->o.str[OPT_EXPORT] || llm_export_check_gguf(r->o.str[OPT_MODEL], &r->cfg, r->tok, why, sizeof why) == 0) return 0;
    snprintf(err, errlen, "--export: %s", why);
    return -1;
}

/* grzo's one-line reason for a refused descriptor (e.g. a variant combination) */
static void keep_message(grzo_log_level level, grzo_status s, const char *msg, void *user) {
    (void)level; (void)s;
    snprintf((char *)user, 256, "%s", msg);
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
    memset(&md, 0, sizeof md);
    parse_dtype(r->o.str[OPT_DTYPE], &md.dtype);
    if (llm_backend_create(r->o.str[OPT_DEVICE], (int32_t)r->o.num[OPT_THREADS], md.dtype, &r->be, err, errlen) != GRZO_OK)
        return -1;
    if ((s = grzo_create(&d, &r->ctx)) != GRZO_OK) {
        snprintf(err, errlen, "grzo_create: %s%s%s", grzo_status_str(s), r->grzo_why[0] ? ": " : "", r->grzo_why);
        return -1;
    }
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
        if (r->gen_steps > sequence_cap(r)) r->gen_steps = sequence_cap(r);
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
    sd.attention = (llm_attention)attention_form(&r->o);
    if (llm_state_create(r->ctx, &r->model, &sd, &r->st) != GRZO_OK) { snprintf(err, errlen, "%s", llm_model_error(&r->model)); return -1; }
    r->picked = (int64_t *)calloc((size_t)r->o.num[OPT_BATCH], sizeof(int64_t));
    r->seqs = (llm_seq *)calloc((size_t)r->max_seqs, sizeof(llm_seq));
    r->n_context = (int32_t *)calloc((size_t)r->max_seqs, sizeof(int32_t));
    r->means = (double *)calloc((size_t)r->max_seqs, sizeof(double));
    if (!r->picked || !r->seqs || !r->n_context || !r->means) { snprintf(err, errlen, "out of memory"); return -1; }
    return 0;
}

static void cleanup(run *r) {
    int i;
    free_predictions(r);   /* before the test split: it counts the predictions */
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
    for (i = 0; i < OPT_COUNT; i++) free(r->absolute[i]);
    free(r->recorded_ckpt); free(r->recorded_log);
    free(r->path_log); free(r->path_ckpt); free(r->path_indices); free(r->path_results); free(r->path_png); free(r->path_manifest);
    free(r->path_predictions);
}

/* The checkpoint, and run.json's record of it (--resume takes no other checkpoint). */
static int save_checkpoint(run *r, char *err, size_t errlen) {
    if (r->ranks.rank != 0) return 0;   /* the ranks' parameters are equal (the replica guard) */
    if (record_save_begin(r, err, errlen)) return -1;
    if (grzo_checkpoint_save(r->ctx, r->path_ckpt) != GRZO_OK) {
        snprintf(err, errlen, "%s", grzo_last_error(r->ctx));
        return -1;
    }
    return record_save_done(r, err, errlen);
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
    if (make_out_dir(r, err, errlen) || identify_inputs(r, err, errlen) || remove_earlier_run(r, err, errlen))
        return -1;
    r->created_files = 1;   /* from here on, the files at the run's paths are this invocation's */
    if (write_manifest(r, err, errlen) || tasks_write_indices(r->path_indices, &r->data, err, errlen)) return -1;
    if ((s = evaluate(r, &r->dev, &r->zs_dev, &r->zs_dev_em, 1)) != GRZO_OK ||
        (!interrupted && (s = evaluate(r, &r->test, &r->zs_test, &r->zs_test_em, 1)) != GRZO_OK)) {
        snprintf(err, errlen, "%s: %s", grzo_status_str(s), llm_model_error(&r->model));
        return -1;
    }
    if (interrupted) {   /* nothing to resume yet: the run's files go (main) */
        snprintf(err, errlen, "interrupted during the zero-shot evaluation, before training: nothing kept");
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
    /* rank 0 (which writes the record) checks the record and the log; a refusal there stops every rank */
    if (r->ranks.rank == 0 && check_checkpoint_is_the_runs(r, err, errlen)) return -1;
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
static int log_diagnose(const run *r, FILE *f, int64_t step, const grzo_align_report *a, int32_t probes, double seconds, char *err,
                        size_t errlen) {
    errno = 0;
    fprintf(f, "{\"step\":%lld,\"diagnose\":{\"b_eff\":%.6g,\"b_eff_se\":%.6g,\"b_eff_lo\":%.6g,\"b_eff_hi\":%.6g,"
               "\"c_w\":%.6g,\"c_w_se\":%.6g,\"probes\":%d,\"seconds\":%.3f}}\n",
            (long long)step, a->b_eff, a->b_eff_se, a->b_eff_lo, a->b_eff_hi, a->c_w, a->c_w_se, (int)probes, seconds);
    return log_flushed(f, r->path_log, err, errlen);
}

/* Before training, and before every --diagnose-every-th step: B_eff of the batch the next step
   draws, from --diagnose-probes shared-perturbation passes (grzo_align), printed and logged.
   Parameters, step counter and data order are untouched (grzo.h section 3b), so the run
   trains exactly as it would without --diagnose. During training (periodic) a B_eff that
   is undefined (GRZO_ERR_NONFINITE: every loss difference 0, e.g. a model whose losses have
   saturated at 0, or a loss not finite) is logged as such and the training goes on: a
   diagnostic must not end a run that can still train. Before training (step 0) it is an error. */
static int diagnose(run *r, FILE *log, int periodic, char *err, size_t errlen) {
    grzo_align_report a;
    int64_t B = r->o.num[OPT_BATCH], step = grzo_get_step(r->ctx);
    int32_t K = (int32_t)r->o.num[OPT_DIAGNOSE_PROBES];
    double t0 = now(), seconds;
    grzo_status s;
    pick_batch(r, step);
    s = grzo_align(r->ctx, B, K, train_forward, r, NULL, &a);
    if (s == GRZO_ERR_NONFINITE && periodic) {
        if (log) {   /* no "b_eff" number: the tables that read the diagnostics pass it by */
            errno = 0;
            fprintf(log, "{\"step\":%lld,\"diagnose\":{\"b_eff\":null,\"undefined\":\"every loss difference 0, or a loss not "
                         "finite\",\"probes\":%d,\"seconds\":%.3f}}\n", (long long)step, (int)K, now() - t0);
            if (log_flushed(log, r->path_log, err, errlen)) return -1;
        }
        printf("diagnose at step %lld: B_eff undefined (%s); the training goes on\n", (long long)step, grzo_last_error(r->ctx));
        fflush(stdout);
        return 0;
    }
    if (s != GRZO_OK) {
        snprintf(err, errlen, "--diagnose: %s: %s", grzo_status_str(s),
                 llm_model_error(&r->model)[0] ? llm_model_error(&r->model) : grzo_last_error(r->ctx));
        return -1;
    }
    seconds = now() - t0;
    if (log && log_diagnose(r, log, step, &a, K, seconds, err, errlen)) return -1;   /* NULL on ranks other than 0 */
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
    if (r->ranks.rank == 0) remove_unsaved_run(r);
    cleanup(r);
    return ft_ranks_fail(&r->ranks, code);
}

/* The exit status of a check of the command line that failed (run_files.h): 2 when the
   command line is wrong, 1 when the system failed (no memory, a file that cannot be read),
   so that a script that retries on 1 does not retry a command that can never run, nor give
   up on one that can. */
static int refusal_status(int rc) { return rc == RUN_FAILED ? 1 : 2; }

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
    int stop = 0, rc;
    double t_train0, last_save;
    grzo_status s = GRZO_OK;
    struct sigaction sa;
    cpu_env_reexec(argv);
    r.saved_step = r.saving_step = -1;   /* no checkpoint saved yet */
    r.saved_known = 1;
    r.zs_dev = r.zs_test = r.dev_acc = r.test_acc = -1;
    r.zs_dev_em = r.zs_test_em = r.dev_em = r.test_em = -1;
    if (ft_ranks_init(&argc, &argv, &r.ranks, err, sizeof err)) return fail(&r, 1, err);
    if (parse_options(argc, argv, &r.o, err, sizeof err)) return fail(&r, 2, err);
    if (!(r.path_manifest = path_join(r.o.str[OPT_OUT], "run.json"))) return fail(&r, 1, "out of memory");
    if (r.o.resume && (rc = resume_settings(&r, err, sizeof err)) != 0) return fail(&r, refusal_status(rc), err);
    if (check_required(&r.o, err, sizeof err)) return fail(&r, 2, err);
    resolve_counts(&r.o);
    if ((rc = make_paths_absolute(&r, err, sizeof err)) != 0 || (rc = make_paths(&r, err, sizeof err)) != 0 ||
        (rc = check_paths(&r, err, sizeof err)) != 0 || (!r.o.resume && (rc = refuse_earlier_run(&r, err, sizeof err)) != 0))
        return fail(&r, refusal_status(rc), err);
    if (r.o.resume && check_checkpoint_readable(r.path_ckpt, err, sizeof err)) return fail(&r, 1, err);
    /* the folders the run writes to take files (rank 0 writes), before the model loads */
    if (r.ranks.rank == 0 && check_folders_writable(&r, err, sizeof err)) return fail(&r, 1, err);
    if (load_everything(&r, err, sizeof err)) return fail(&r, 1, err);
    if (check_export(&r, err, sizeof err)) return fail(&r, 2, err);
    if (setup_optimizer(&r, err, sizeof err)) return fail(&r, 1, err);
    /* mpirun: every rank has checked the paths and loaded the same model before rank 0 writes */
    if (grzo_check_replicas(r.ctx) != GRZO_OK) return fail(&r, 1, grzo_last_error(r.ctx));
    if (r.ranks.rank == 0) tasks_describe(&r.data, stderr);
    if (r.ranks.rank == 0) cpu_env_report(stderr, "grzo-finetune: ", &r.be);   /* nothing for a CUDA run */
    /* from the first file written on, Ctrl-C ends the run cleanly: a checkpoint, or (before
       there can be one) no files at all */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (r.o.resume ? start_resumed(&r, err, sizeof err) : r.ranks.rank == 0 && start_fresh(&r, err, sizeof err))
        return fail(&r, interrupted ? 130 : 1, err);
    /* a new run's log is created exclusively (files.h: never through a link someone left at
       its name; an earlier run's was refused or removed above) */
    if (r.ranks.rank == 0 && r.o.resume && !(logf = fopen(r.path_log, "a"))) {
        snprintf(err, sizeof err, "cannot open the log %s: %s", r.path_log, strerror(errno));
        return fail(&r, 1, err);
    }
    if (r.ranks.rank == 0 && !r.o.resume && !(logf = file_create_new(r.path_log, err, sizeof err))) return fail(&r, 1, err);
    /* a resumed run's first diagnostic is already one during training */
    if (r.o.diagnose && diagnose(&r, logf, grzo_get_step(r.ctx) > 0, err, sizeof err)) { if (logf) fclose(logf); return fail(&r, 1, err); }
    t_train0 = last_save = now();
    first_step = grzo_get_step(r.ctx);
    for (step = first_step; step < r.o.num[OPT_STEPS]; step = grzo_get_step(r.ctx)) {
        grzo_step_report rep;
        double elapsed, dev = -1, dev_em = -1;
        int64_t eval_every = r.o.num[OPT_EVAL_EVERY], diagnose_every = r.o.num[OPT_DIAGNOSE_EVERY];
        if ((stop = stop_requested(&r)) != 0) break;
        if (r.o.diagnose && diagnose_every > 0 && step > first_step && step % diagnose_every == 0) {
            double t0 = now();
            if (diagnose(&r, logf, 1, err, sizeof err)) { if (logf) fclose(logf); return fail(&r, 1, err); }
            r.diagnose_seconds += now() - t0;
        }
        pick_batch(&r, step);
        s = grzo_step(r.ctx, r.o.num[OPT_BATCH], train_forward, &r, &rep);
        if (s != GRZO_OK) goto failed;
        if (r.ranks.rank != 0) continue;   /* the others wait in the next step's gather */
        if (eval_every > 0 && (step + 1) % eval_every == 0 && (s = evaluate(&r, &r.dev, &dev, &dev_em, 0)) != GRZO_OK) goto failed;
        elapsed = r.elapsed_before + (now() - t_train0 - r.diagnose_seconds);
        if (log_line(logf, r.path_log, step, &rep, elapsed, dev, dev_em, err, sizeof err)) { fclose(logf); return fail(&r, 1, err); }
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
        if (log_close(logf, r.path_log, err, sizeof err)) return fail(&r, 1, err);
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
    if ((s = evaluate(&r, &r.dev, &r.dev_acc, &r.dev_em, 1)) != GRZO_OK ||
        (!interrupted && (s = evaluate(&r, &r.test, &r.test_acc, &r.test_em, 1)) != GRZO_OK))
        goto failed;
    if (interrupted) {   /* the checkpoint is saved: a resume at the same --steps evaluates it */
        printf("interrupted during the final evaluation: the checkpoint of step %lld is in %s (--resume evaluates it)\n",
               (long long)grzo_get_step(r.ctx), r.path_ckpt);
        cleanup(&r);
        return ft_ranks_exit(&r.ranks, 130);
    }
    {
        char dev[64], test[64];
        printf("after %lld steps (%s, lr %g, sigma %g, B %lld): dev %s, test %s\n", (long long)grzo_get_step(r.ctx),
               estimator_name(r.o.estimator), (double)r.o.real[OPT_LR], (double)r.o.real[OPT_SIGMA], (long long)r.o.num[OPT_BATCH],
               score_text(r.dev_acc, r.dev_em, dev), score_text(r.test_acc, r.test_em, test));
    }
    ft_ranks_report(&r.ranks, grzo_get_step(r.ctx) - first_step, stdout);
    r.seconds = r.elapsed_before + now() - t_train0 - r.diagnose_seconds;
    if (write_results(&r, err, sizeof err)) return fail(&r, 1, err);
    if (r.generation && write_predictions(&r, err, sizeof err)) return fail(&r, 1, err);
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
