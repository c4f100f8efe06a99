/* tasks.h - prompted task data for grzo-finetune: readers for the released data formats,
   MeZO's prompt templates (and LM-BFF's for the k-shot tasks), and MeZO's sampling protocol
   with an indices file so that a run can be reproduced exactly.

   This module knows nothing about models or grzo; it turns data files into strings.

   ---- What an example is ----
   Every example is a multiple-choice question for a causal LM: a context string and, per
   candidate, a continuation string; the gold index says which candidate is right.
   candidate k's model input is text = context + continuation (byte for byte), and the
   candidate is scored on the tokens of its continuation.

   How to get those tokens (as MeZO's encode_prompt does, large_models/utils.py): tokenize
   the whole text and the context alone, each with BOS, and take the last
   n(text) - n(context) tokens of the text as the continuation. Do NOT tokenize the
   continuation on its own: SentencePiece/BPE merge its leading space (" great") with
   the token before it differently, and a lone string gets a dummy-prefix space.

   ---- Generation tasks: SQuAD (v1.1) and DROP ----
   An example is a question; its one candidate is the training target " <answer>\n" after
   the context ("...\nAnswer:"), trained with the LM loss on its tokens (MeZO:
   train_as_classification False, only_train_option). The answer is SQuAD's answers[0], and
   for DROP HF's answers_spans["spans"][0] of the "answer": its number, else its date
   ("day month year" stripped), else its first span; a question HF "drop" drops (no answer,
   or an answer that is a number and a date/spans at once) is skipped and counted in
   skipped[]. answers holds every gold answer to score against: SQuAD's answers (one span
   each); DROP's "answer" and "validated_answers" as drop_eval.py reads them (the number,
   else the spans, else the date). Evaluation (grzo-finetune) generates the answer and
   tasks_score_prediction scores it (qa_score.h).

   ---- Prompt assembly (exactly MeZO's, with no demonstrations) ----
   MeZO builds, per candidate, encode(x) (the context) and verbalize(x, c) (the context
   plus the candidate), then strips ONLY spaces (' ', not newlines) from both ends of
   each, and lstrip()s the final string of all whitespace ("" + "\n\n" + prompt).lstrip().
   This module does the same: context = lstrip(strip_spaces(encode)); text =
   lstrip(strip_spaces(verbalize)); continuation = text after the context. So COPA's
   " so " loses its trailing space in the context and the choice continuation starts with
   the space: context "The man turned on the faucet so", continuation " water flowed
   from the spout.". RTE's context keeps its final "\n" and its candidates have no space.
   "Whitespace" is Python's str.isspace() set (ASCII and Unicode spaces).
   Case changes (BoolQ's first letter, COPA's first word, WSC's pronoun, LM-BFF's sentl)
   are ASCII-only; Python would also change non-ASCII letters (none occur in practice).

   ---- Sampling (MeZO's protocol, with our own generator) ----
   - train and dev are drawn from the train file, test from the validation file
     (tasks_load's val_path). Defaults: 1000 train / 500 dev / 1000 test; CB and COPA use
     100 dev (MeZO mezo.sh).
   - One permutation of the train file's examples; its first min(n_train + n_dev, N)
     entries are taken, dev is the LAST min(n_dev, that) of them and train the rest
     (MeZO run.py: dev_samples = train_samples[-num_dev:]). So train and dev are
     disjoint, and where the file is short dev keeps its size and train gets what is
     left (CB: 150 train / 100 dev). If that leaves train empty while n_train > 0, the
     load fails with a message (lower n_dev, or give a separate dev file).
   - test: the first min(n_test, M) entries of a permutation of the validation file.
   - If a separate dev file is given (LM-BFF k-shot dev.csv), dev is the first
     min(n_dev, D) entries of a permutation of that file instead.
   - The permutation (all three use the same seed, as MeZO's temp_seed does):
       state = seed
       next():  state += 0x9E3779B97F4A7C15; z = state;
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
                return z ^ (z >> 31)                          (splitmix64)
       below(b): threshold = (2^64 - b) mod b; repeat r = next() until r >= threshold;
                 return r mod b                               (unbiased)
       p = [0, 1, ..., N-1]; for i = N-1 down to 1: j = below(i + 1); swap p[i], p[j]
     (Fisher-Yates). It is not numpy's MT19937, so the indices differ from MeZO's, but
     the protocol is the same; tests/finetune pins a known answer so it never drifts.
   - MultiRC is expanded to one example per (question, answer) BEFORE sampling, as
     HF super_glue/multirc is (MeZO samples those rows); indices count answers in file
     order (passage, then question, then answer).

   ---- Files ----
   The reader is chosen by the file name's extension: .jsonl (SuperGLUE), .tsv (GLUE,
   LM-BFF k-shot, or "label<TAB>sentence" without a header for SST-5/TREC), .csv
   (LM-BFF "label,sentence" without a header, RFC 4180 quoting), .json (a whole-file JSON
   document: SQuAD v1.1's train-v1.1.json / dev-v1.1.json, DROP's drop_dataset_train.json /
   drop_dataset_dev.json; a defect is "path: what" with the value's JSON path, e.g.
   "dev-v1.1.json: "data[0].paragraphs[2].qas[1].answers" must be an array", and a syntax
   error "path:line:col: what"). Blank lines are skipped;
   a UTF-8 byte order mark at the start is skipped; every other defect (bad JSON, bad
   UTF-8, NUL bytes, missing or mistyped fields, unknown labels, wrong field counts)
   fails the load with "path:line: what" (JSON syntax errors add the column: 
   "path:line:col: what"). Unlabeled files (SuperGLUE test.jsonl, GLUE test.tsv) are
   rejected: their labels are missing.
   BoolQ: SuperGLUE's files prefix the passage with "<title> -- "; MeZO reads Google's
   release (HF "boolq"), whose passage has no title, so that prefix is removed. Google's
   own format (question, title, answer, passage) is read as well.

   Functions return 0 on success and -1 on failure, with a message in err (which may be
   NULL). Nothing here calls exit() or prints unless asked to. */
#ifndef GRZO_TASKS_H
#define GRZO_TASKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qa_score.h"

#define TASKS_MAX_CANDIDATES 6
#define TASKS_MAX_NEW_TOKENS 50  /* generation tasks: MeZO's max_new_tokens */

/* How a task's predictions are scored. */
typedef enum tasks_metric {
    TASKS_METRIC_ACCURACY = 0,   /* argmax of the candidates' scores */
    TASKS_METRIC_SQUAD,          /* generated answer: SQuAD v1.1 exact match and F1 (qa_score.h) */
    TASKS_METRIC_DROP            /* generated answer: DROP's exact match and number-aware F1 */
} tasks_metric;

/* ---- The task table ---- */

typedef struct tasks_info {
    const char *name;            /* canonical name: "SST-2", "RTE", "MultiRC", ... */
    const char *formats;         /* which files it reads, for --help */
    const char *context;         /* the context template, human-readable ("\n" = newline) */
    const char *candidates[TASKS_MAX_CANDIDATES]; /* continuations in gold-index order,
                                    as C strings (leading spaces matter); unused = NULL */
    int n_candidates;            /* 0: the candidates come from the example (COPA) */
    const char *continuation;    /* what follows the context, human-readable: "<candidate>"
                                    for most; TREC/MNLI/SNLI/COPA add text (see the table) */
    int train_on_gold_tokens;    /* 1: train with the LM loss on the gold continuation's
                                    tokens (MeZO: --train_as_classification False for COPA);
                                    0: train as classification over the candidates */
    long default_train, default_dev, default_test;
    const char *origin;          /* where the template comes from */
    tasks_metric metric;         /* ACCURACY: multiple choice; SQUAD/DROP: a generation task
                                    (one candidate, the gold answer, to train on; evaluation
                                    generates the answer and scores it against the golds) */
} tasks_info;

size_t tasks_count(void);
const tasks_info *tasks_info_at(size_t i);           /* NULL if i >= tasks_count() */
/* NULL-terminated list of the canonical names, in table order. */
const char *const *tasks_names(void);
/* Case-insensitive, ignoring '-' and '_': "sst2", "SST-2", "Copa", "wic" all match. */
const tasks_info *tasks_find(const char *name);
/* The table for --help: one block per task (formats, context, candidates, training). */
void tasks_print_table(FILE *out);

/* ---- Loaded data ---- */

typedef struct tasks_candidate {
    const char *context;         /* the example's context (same pointer for all candidates) */
    const char *continuation;    /* == text + context_len */
    const char *text;            /* context + continuation: the exact model input */
    size_t context_len;          /* strlen(context) */
} tasks_candidate;

typedef struct tasks_example {
    const char *context;
    int n_candidates;
    tasks_candidate cand[TASKS_MAX_CANDIDATES];
    int gold;                    /* index into cand */
    size_t source_index;         /* index of the example in its file (what the indices
                                    file stores; MultiRC: counts answers) */
    long source_line;            /* 1-based line of the record in its file (0: a whole-file
                                    JSON document, SQuAD/DROP) */
    const qa_answer *answers;    /* generation tasks: the gold answers to score against */
    int n_answers;               /* (0 and NULL for multiple choice) */
    const char *id;              /* generation tasks: the question's id in its file (SQuAD "id",
                                    DROP "query_id"); NULL for multiple choice */
} tasks_example;

typedef struct tasks_split {
    tasks_example *ex;
    size_t n;
} tasks_split;

enum { TASKS_TRAIN = 0, TASKS_DEV = 1, TASKS_TEST = 2 };

typedef struct tasks_set {
    const tasks_info *task;
    int train_on_gold_tokens;    /* copy of task->train_on_gold_tokens */
    uint64_t seed;
    tasks_split train, dev, test;
    int dev_from_train;          /* 1: dev was carved from the train file's draw */
    char *path[3];               /* files used (TASKS_TRAIN/DEV/TEST); path[TASKS_DEV] is
                                    NULL when dev_from_train */
    size_t pool[3];              /* examples available in each file (0 for an unused dev) */
    uint64_t hash[3];            /* FNV-1a 64 of each file's bytes */
    size_t skipped[3];           /* rows without a gold label that were skipped (SNLI "-") */
    void *arena;                 /* owner of every string above */
} tasks_set;

/* A generation task's prediction against ex's gold answers (the task's metric): exact
   match and F1 in [0, 1]. Returns -1 for a multiple-choice task, bad arguments or no memory. */
int tasks_score_prediction(const tasks_info *task, const tasks_example *ex, const char *prediction, double *em,
                           double *f1);

/* The split by number (TASKS_TRAIN/DEV/TEST); NULL for other values. */
const tasks_split *tasks_set_split(const tasks_set *set, int which);

/* Reusable sampled indices (see tasks_write_indices). */
typedef struct tasks_indices {
    char task[32];
    uint64_t seed;
    int dev_from_train;
    size_t pool[3];
    uint64_t hash[3];
    size_t n[3];
    size_t *idx[3];
} tasks_indices;

typedef struct tasks_load_desc {
    const char *task;            /* a name tasks_find accepts */
    const char *train_path;      /* required: train (and, without dev_path, dev) */
    const char *dev_path;        /* optional: dev drawn from this file instead */
    const char *test_path;       /* required: the validation split; test is drawn from it */
    uint64_t seed;
    long n_train, n_dev, n_test; /* < 0: the task's defaults */
    const tasks_indices *indices;/* optional: use exactly these indices (a re-run or
                                    --resume); seed and counts are then taken from them.
                                    The files must have the same contents (hash) and the
                                    same dev arrangement as when they were written. */
} tasks_load_desc;

int tasks_load_ex(const tasks_load_desc *desc, tasks_set *set, char *err, size_t errlen);
/* The short form: no separate dev file, no indices. */
int tasks_load(const char *task, const char *train_path, const char *val_path, uint64_t seed,
               long n_train, long n_dev, long n_test, tasks_set *set, char *err, size_t errlen);
void tasks_free(tasks_set *set);   /* as tasks_free_indices and tasks_free_paths: NULL is a no-op */

/* What was loaded, for the log: task, files (with counts and hashes), split sizes, the
   gold-label distribution of each split, skipped rows. Nothing for NULL or an empty set. */
void tasks_describe(const tasks_set *set, FILE *out);

/* ---- Indices files ----
   Text, one item per line:
       grzo-tasks-indices 1
       task <name>
       seed <u64>
       dev_from_train <0|1>
       file train <pool> <hash16hex> <path>
       file dev <pool> <hash16hex> <path or ->
       file test <pool> <hash16hex> <path>
       split train <n>    followed by n lines, one index each, in draw order
       split dev <n>      ...
       split test <n>     ...
       end
   Written to path + ".tmp" and renamed (files.h), so a crash never leaves half a file. The reader
   trusts no count: a split's count must fit its file's examples and the bytes left in the
   indices file, before anything is allocated. */
int tasks_write_indices(const char *path, const tasks_set *set, char *err, size_t errlen);
int tasks_read_indices(const char *path, tasks_indices *out, char *err, size_t errlen);
void tasks_free_indices(tasks_indices *idx);

/* ---- Finding the files in a directory ----
   For the staged layouts (shared/data/<TASK>, LM-BFF k-shot/16-<seed>, SST-5/TREC
   original). SQuAD and DROP: the released names (train-v1.1.json and dev-v1.1.json;
   drop_dataset_train.json and drop_dataset_dev.json), else train.json and dev.json; dev is
   carved from train. The other tasks: looks for, in order:
     train: train.jsonl, train.tsv, train.csv, then fewglue32_train.jsonl (FewGLUE's
            32-example subset: BoolQ has no full train file here) - only extensions the
            task reads;
     test (the validation split): val.jsonl; else test.csv / test.tsv when labeled
            (LM-BFF k-shot test files are the labeled original test/validation sets;
            GLUE's test.tsv is unlabeled and skipped); else dev_matched.tsv, dev.tsv,
            dev.csv;
     dev: only when test came from a test.* file: dev.tsv / dev.csv / dev_matched.tsv
          (LM-BFF's k-shot dev split); otherwise dev is carved from train.
   SuperGLUE test.jsonl is never used (unlabeled). note says what was chosen and why. */
typedef struct tasks_paths {
    char *train, *dev, *test;    /* dev may be NULL */
    char note[1024];
} tasks_paths;

int tasks_resolve_dir(const char *task, const char *dir, tasks_paths *out, char *err, size_t errlen);
void tasks_free_paths(tasks_paths *p);

/* The permutation described above (for tests and tools): writes p[0..n). */
int tasks_permutation(size_t n, uint64_t seed, size_t *p);

#endif /* GRZO_TASKS_H */
