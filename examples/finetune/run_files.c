/* run_files.c - the files of a grzo-finetune run (run_files.h): their names, the manifest
   (run.json) and what --resume checks against it, the log, results.json, predictions.jsonl
   and the loss plot. Every file but the log is written through a temporary file and a
   rename. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_files.h"
#include "gnuplot_run.h"

/* ---- files ------------------------------------------------------------------------------------- */
char *path_join(const char *dir, const char *name) {
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
int make_paths(run *r, char *err, size_t errlen) {
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
int check_paths(const run *r, char *err, size_t errlen) {
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
int refuse_earlier_run(const run *r, char *err, size_t errlen) {
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
int remove_earlier_run(const run *r, char *err, size_t errlen) {
    const char *files[RUN_FILES];
    int i, n = run_files(r, files);
    for (i = 0; i < n; i++)
        if (unlink(files[i]) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot remove %s: %s", files[i], strerror(errno));
            return -1;
        }
    return 0;
}

int ensure_dir(const char *dir, char *err, size_t errlen) {
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
/* The main score's name in run.json, results.json and the log: accuracy, or F1 (with EM). */
static const char *score_key(const run *r) { return r->generation ? "f1" : "acc"; }

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

int write_manifest(const run *r, char *err, size_t errlen) {
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
int resume_settings(run *r, char *err, size_t errlen) {
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

/* "no checkpoint" only when there is none; anything else says why it cannot be read. */
int check_checkpoint_readable(const char *path, char *err, size_t errlen) {
    FILE *f;
    if (access(path, F_OK) != 0 && errno == ENOENT) { snprintf(err, errlen, "--resume: no checkpoint at %s", path); return -1; }
    if (!(f = fopen(path, "rb"))) { snprintf(err, errlen, "--resume: cannot read the checkpoint %s: %s", path, strerror(errno)); return -1; }
    fclose(f);
    return 0;
}

/* The checkpoint's optimizer settings must be the run's (a checkpoint copied in from
   another run is refused, not silently mixed). */
int check_checkpoint_matches(const run *r, char *err, size_t errlen) {
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

/* ---- the log, the loss plot, results.json and predictions.jsonl ----------------------------------- */
/* Keep the log lines of steps before `step` (a resume discards anything logged after the
   checkpoint) and return the elapsed seconds of the last kept line. */
int trim_log(const char *path, int64_t step, double *elapsed, char *err, size_t errlen) {
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
void log_line(FILE *f, int64_t step, const grzo_step_report *rep, double elapsed, double dev_acc, double dev_em) {
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
void plot_loss(const run *r) {
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

int write_results(const run *r, char *err, size_t errlen) {
    return write_atomically(r->path_results, write_results_json, r, err, errlen);
}

int write_predictions(const run *r, char *err, size_t errlen) {
    return write_atomically(r->path_predictions, write_predictions_json, r, err, errlen);
}
