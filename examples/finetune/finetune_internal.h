/* finetune_internal.h - the state of one grzo-finetune run, shared by finetune.c (setup,
   training, evaluation) and run_files.c (the files the run reads and writes). Not an API:
   the fields are the program's working state. */
#ifndef GRZO_FINETUNE_INTERNAL_H
#define GRZO_FINETUNE_INTERNAL_H

#include <stdint.h>

#include "grzo.h"
#include "llm.h"
#include "model.h"
#include "json.h"
#include "tasks.h"
#include "ranks.h"
#include "options.h"
#include "tok_examples.h"

/* A generated answer, its scores, its length in new tokens and what ended it. */
typedef struct prediction {
    char *text;
    double em, f1;
    int32_t new_tokens;
    const char *stop;   /* a static name: "bos", "eos", "newline", "max_new_tokens", "max_len" */
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
    char *absolute[OPT_COUNT];        /* the recorded paths made absolute (o.str points here) */
    char input_id[2][96];             /* identities of --model and --tokenizer ("": none) */
    /* The checkpoint this run saved last, as run.json records it: --resume accepts no other.
       A save in progress is recorded first, so a crash between the checkpoint's rename and
       the record leaves a checkpoint of the recorded step. */
    int64_t saved_step, saving_step;  /* -1: none */
    uint64_t saved_sum;               /* its header's checksum (grzo.h section 6) */
    int saved_known;                  /* run.json has the record (runs made before it had none) */
    char *recorded_ckpt, *recorded_log;   /* --resume: where the run kept them until now */
    /* a new run's files that this invocation created: removed if it fails before its first
       checkpoint exists, so that the same command can simply be run again */
    int created_out, created_files;
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

#endif
