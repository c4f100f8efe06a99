/* options.c - grzo-finetune's command line (options.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "cli_args.h"
#include "llm_export.h"   /* llm_gguf_type_parse: --export-type */
#include "model.h"        /* llm_attention: --attention */
#include "tasks.h"
#include "text.h"          /* utf8_seq */

const opt_def OPTS[OPT_COUNT] = {
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
    {"--attention", "attention", KIND_TEXT, 0, 0, 1},   /* like --device: it changes the sums' order only */
};

/* Whether s is well-formed UTF-8 (text.h's strict rules). */
int path_is_utf8(const char *s) {
    size_t n = strlen(s), i, k;
    for (i = 0; i < n; i += k)
        if (!(k = utf8_seq((const unsigned char *)s + i, n - i, NULL))) return 0;
    return 1;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: grzo-finetune --model PATH [--tokenizer tok.bin] --task NAME --data DIR [options]\n"
        "  --estimator grzo|mezo|mezo-inplace|fzoo|canonical|shared   (default grzo; mezo-inplace:\n"
        "               MeZO perturbing the weights in place, its memory-optimal form)\n"
        "  --lr LR (1e-5)  --sigma S (1e-3)  --batch B (16)  --steps N (100)  --warmup N (0)\n"
        "  --eval-every N (0: only before and after)  --seed S (0)  --threads N (all cores)\n"
        "  --device cpu|cuda (cpu)  --dtype f32|bf16|f16 (f32; 16-bit weights need --device cuda and\n"
        "               run its fast math, tensor cores; f32 runs pedantic fp32)\n"
        "  --attention auto|fused|gemm (auto: cuBLAS GEMMs + a softmax while their scratch is at\n"
        "               most 4 GiB, else the fused kernel, which needs none; fused or gemm need\n"
        "               --device cuda)\n"
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
        "               that step draws; each diagnostic is a line of the log (the training is unchanged;\n"
        "               a B_eff undefined during training, no loss difference at all, is logged as null)\n"
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
        "  of the batch, the losses are all-gathered, every rank applies the same update; rank 0 writes.\n"
        "  MPI starts only under a launcher (mpirun, mpiexec, srun: OMPI_COMM_WORLD_SIZE, PMIX_RANK,\n"
        "  PMI_RANK or PMI_SIZE set); GRZO_MPI=1 or 0 says so for another\n"
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

const char *estimator_name(grzo_estimator e) {
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
int parse_dtype(const char *s, grzo_dtype *out) {
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
int set_option(options *o, opt_id id, const char *v, char *err, size_t errlen) {
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
        if (id == OPT_ATTENTION && strcmp(v, "auto") && strcmp(v, "fused") && strcmp(v, "gemm")) {
            snprintf(err, errlen, "--attention: expected auto, fused or gemm, got '%.64s'", v);
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
        /* run.json and results.json record the paths as JSON text, which holds UTF-8 only:
           such a path would make the run's files unreadable, and the run impossible to resume */
        if (!path_is_utf8(v)) { snprintf(err, errlen, "%s: the path is not valid UTF-8 (rename the file or folder)", d->flag); return -1; }
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
    o->str[OPT_ATTENTION] = "auto";
}

int parse_options(int argc, char **argv, options *o, char *err, size_t errlen) {
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
int check_required(const options *o, char *err, size_t errlen) {
    if (!o->str[OPT_MODEL] || !o->str[OPT_TASK] || !o->str[OPT_DATA]) {
        snprintf(err, errlen, "--model, --task and --data are required (see --help)");
        return -1;
    }
    if (strcmp(o->str[OPT_DTYPE], "f32") != 0 && strcmp(o->str[OPT_DEVICE], "cuda") != 0) {
        snprintf(err, errlen, "--dtype %s needs --device cuda (the CPU backend stores f32)", o->str[OPT_DTYPE]);
        return -1;
    }
    if (strcmp(o->str[OPT_ATTENTION], "auto") != 0 && strcmp(o->str[OPT_DEVICE], "cuda") != 0) {
        snprintf(err, errlen, "--attention %s needs --device cuda (the CPU forward has one attention)", o->str[OPT_ATTENTION]);
        return -1;
    }
    return 0;
}

/* The task's default split sizes where none was given, so run.json records real counts. */
void resolve_counts(options *o) {
    const tasks_info *t = tasks_find(o->str[OPT_TASK]);
    if (o->num[OPT_N_TRAIN] < 0) o->num[OPT_N_TRAIN] = t->default_train;
    if (o->num[OPT_N_DEV] < 0) o->num[OPT_N_DEV] = t->default_dev;
    if (o->num[OPT_N_TEST] < 0) o->num[OPT_N_TEST] = t->default_test;
}

/* --attention as llm_state_desc takes it */
int attention_form(const options *o) {
    return !strcmp(o->str[OPT_ATTENTION], "fused") ? LLM_ATTENTION_FUSED
         : !strcmp(o->str[OPT_ATTENTION], "gemm")  ? LLM_ATTENTION_GEMM
                                                   : LLM_ATTENTION_AUTO;
}

/* --noise and --quant as grzo_desc takes them (grzo.h section 3c) */
grzo_noise_dist noise_kind(const options *o) {
    return !strcmp(o->str[OPT_NOISE], "gaussian") ? GRZO_NOISE_GAUSSIAN : GRZO_NOISE_RADEMACHER;
}

int32_t quant_bits(const options *o) {
    return !strcmp(o->str[OPT_QUANT], "int8") ? 8 : !strcmp(o->str[OPT_QUANT], "int4") ? 4 : 0;
}
