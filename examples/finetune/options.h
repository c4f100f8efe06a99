/* options.h - grzo-finetune's command line: the OPTS table (every setting, its flag, its name
   in run.json and whether --resume may change it), strict parsing and --help.

   The table is shared with run_files.c, which writes run.json from it and reads a resumed
   run's settings back through set_option, so a recorded value passes the same checks as a
   typed one. */
#ifndef GRZO_FINETUNE_OPTIONS_H
#define GRZO_FINETUNE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "grzo.h"

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
    OPT_ATTENTION,                    /* the CUDA forward's attention form (model.h llm_attention) */
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

extern const opt_def OPTS[OPT_COUNT];   /* indexed by opt_id */

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

/* argv into o (defaults for what is not given); --help prints the usage and exits 0. */
int parse_options(int argc, char **argv, options *o, char *err, size_t errlen);
/* One option's value into o, as parse_options takes it (--resume's recorded values too). */
int set_option(options *o, opt_id id, const char *v, char *err, size_t errlen);
int check_required(const options *o, char *err, size_t errlen);   /* after --resume filled in the recorded ones */
void resolve_counts(options *o);   /* the task's default split sizes where none was given */

const char *estimator_name(grzo_estimator e);
int path_is_utf8(const char *s);   /* well-formed UTF-8: what run.json can record */
int parse_dtype(const char *s, grzo_dtype *out);
grzo_noise_dist noise_kind(const options *o);
int32_t quant_bits(const options *o);
int attention_form(const options *o);   /* --attention as model.h's llm_attention */

#endif
