/* run_files.c - the files of a grzo-finetune run (run_files.h): their names, the manifest
   (run.json) and what --resume checks against it, the log, results.json, predictions.jsonl
   and the loss plot. Every file but the log is written through a temporary file, fsync and
   a rename. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_files.h"
#include "files.h"
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

static char *copy_text(const char *s) {
    char *p = (char *)malloc(strlen(s) + 1);
    if (p) strcpy(p, s);
    return p;
}

/* path with ".tmp" appended: where a file is written before its rename */
static char *tmp_name(const char *path) {
    char *p = (char *)malloc(strlen(path) + 5);
    if (p) { strcpy(p, path); strcat(p, ".tmp"); }
    return p;
}

static char *path_or_join(const char *given, const char *dir, const char *name) {
    return given ? copy_text(given) : path_join(dir, name);
}

/* The folder a file path is in ("." for a bare name), malloc'd. */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *d;
    if (!slash) return copy_text(".");
    if (slash == path) return copy_text("/");
    if (!(d = (char *)malloc((size_t)(slash - path) + 1))) return NULL;
    memcpy(d, path, (size_t)(slash - path));
    d[slash - path] = '\0';
    return d;
}

/* The current folder, malloc'd (NULL with errno set). */
static char *current_folder(void) {
    size_t cap = 256;
    for (;;) {
        char *buf = (char *)malloc(cap);
        if (!buf) return NULL;
        if (getcwd(buf, cap)) return buf;
        free(buf);
        if (errno != ERANGE) return NULL;
        cap *= 2;
    }
}

/* p against the current folder, without "./" in front (NULL with errno set). */
static char *absolute_path(const char *p) {
    char *cwd, *abs;
    if (p[0] == '/') return copy_text(p);
    while (p[0] == '.' && p[1] == '/') for (p += 2; *p == '/'; p++) {}
    if (!(cwd = current_folder())) return NULL;
    abs = strcmp(cwd, "/") == 0 ? path_join("", p) : path_join(cwd, p);
    free(cwd);
    return abs;
}

/* The paths run.json records (--model, --tokenizer, --data, --checkpoint, --log) made
   absolute, so that --resume finds the same files from any folder. A relative path kept as
   given would be read against the folder of the resume, not the one of the start. */
int make_paths_absolute(run *r, char *err, size_t errlen) {
    static const opt_id ids[] = {OPT_MODEL, OPT_TOKENIZER, OPT_DATA, OPT_CHECKPOINT, OPT_LOG};
    size_t i;
    for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const opt_def *d = &OPTS[ids[i]];
        const char *given = r->o.str[ids[i]];
        char *abs;
        if (!given || given[0] == '/') continue;
        if (!(abs = absolute_path(given))) {
            snprintf(err, errlen, "%s: cannot tell the current folder, to record the path %s in full: %s", d->flag, given,
                     strerror(errno));
            return RUN_FAILED;
        }
        r->absolute[ids[i]] = abs;
        r->o.str[ids[i]] = abs;
        if (!path_is_utf8(abs)) {   /* run.json holds UTF-8 only */
            snprintf(err, errlen, "%s: the current folder's path is not valid UTF-8: give %s as an absolute path", d->flag,
                     d->flag);
            return RUN_REFUSED;
        }
    }
    return 0;
}

/* The same path spelled without "//", "/./" or a trailing "/" or "/." (".." stays: it is
   not lexical where links are), made absolute; malloc'd. */
static char *plain_path(const char *p) {
    char *a = absolute_path(p), *in, *out;
    if (!a) return NULL;
    for (in = out = a; *in;) {
        if (in[0] == '/' && (in[1] == '/' || (in[1] == '\0' && out > a))) { in++; continue; }
        if (in[0] == '/' && in[1] == '.' && (in[2] == '/' || in[2] == '\0')) { in += 2; continue; }
        *out++ = *in++;
    }
    if (out == a) *out++ = '/';
    *out = '\0';
    return a;
}

static int same_inode(const struct stat *a, const struct stat *b) { return a->st_dev == b->st_dev && a->st_ino == b->st_ino; }

/* Whether folders a and b are one: the same existing folder, or the same spelling of one
   that does not exist yet (--out before it is created). -1: it cannot be told (no memory,
   or no current folder; errno says which). Not "different": a caller that took it so would
   create, refuse or remove files by a wrong answer. */
static int same_folder(const char *a, const char *b) {
    struct stat sa, sb;
    char *pa, *pb;
    int same;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return same_inode(&sa, &sb);
    pa = plain_path(a);
    pb = pa ? plain_path(b) : NULL;
    same = pa && pb ? strcmp(pa, pb) == 0 : -1;
    free(pa);
    free(pb);
    return same;
}

/* Whether paths a and b name one file: the same existing file (links and other spellings
   of the path count), or the same name in the same folder. -1: it cannot be told (errno). */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
    char *da, *db;
    int same;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return same_inode(&sa, &sb);
    if (strcmp(ba ? ba + 1 : a, bb ? bb + 1 : b) != 0) return 0;
    da = folder_of(a);
    db = da ? folder_of(b) : NULL;
    same = da && db ? same_folder(da, db) : -1;
    free(da);
    free(db);
    return same;
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
        return RUN_FAILED;
    }
    return 0;
}

static int is_directory(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The files plot_loss writes in --out besides loss.png (the other run files' temporaries
   are their names + ".tmp": same_or_temporary). */
static const char *const OUT_TEMPORARIES[] = {"loss.gp", "loss.png.tmp"};
#define N_OUT_TEMPORARIES (sizeof OUT_TEMPORARIES / sizeof OUT_TEMPORARIES[0])

/* Whether a and b, or one of them and the other's temporary (path.tmp, where trim_log,
   write_atomically and grzo_checkpoint_save write), name one file. -1: it cannot be told. */
static int same_or_temporary(const char *a, const char *b) {
    char *ta = tmp_name(a), *tb = ta ? tmp_name(b) : NULL;
    int same = ta && tb ? same_file(a, b) : -1;
    if (same == 0) same = same_file(ta, b);
    if (same == 0) same = same_file(a, tb);
    free(ta);
    free(tb);
    return same;
}

/* "" when path (--log, --checkpoint or --export: self) is none of the run's other files
   (nor a temporary of one, nor has one as its temporary); else which file it is; NULL when
   it cannot be told (errno). */
static const char *file_taken(const run *r, const char *path, opt_id self) {
    const char *fixed[5];
    static char what[64];
    char *p;
    size_t i;
    int same;
    fixed[0] = r->path_manifest; fixed[1] = r->path_indices; fixed[2] = r->path_results; fixed[3] = r->path_predictions;
    fixed[4] = r->path_png;
    for (i = 0; i < 5; i++)
        if ((same = same_or_temporary(path, fixed[i])) != 0) {
            const char *base = strrchr(fixed[i], '/');
            if (same < 0) return NULL;
            snprintf(what, sizeof what, "the run's %s", base ? base + 1 : fixed[i]);
            return what;
        }
    for (i = 0; i < N_OUT_TEMPORARIES; i++) {   /* the plot's script and image before its rename */
        if (!(p = path_join(r->o.str[OPT_OUT], OUT_TEMPORARIES[i]))) return NULL;
        same = same_or_temporary(path, p);
        free(p);
        if (same < 0) return NULL;
        if (same) {
            snprintf(what, sizeof what, "the run's %s", OUT_TEMPORARIES[i]);
            return what;
        }
    }
    if (self != OPT_LOG && (same = same_or_temporary(path, r->path_log)) != 0) return same < 0 ? NULL : "the log";
    if (self != OPT_CHECKPOINT && (same = same_or_temporary(path, r->path_ckpt)) != 0) return same < 0 ? NULL : "the checkpoint";
    return "";
}

/* Refused up front, before anything is written: a directory where a file goes (it is never
   removed or replaced), a --log, --checkpoint or --export that names another of the run's
   files (each would overwrite the other), and a data path with a newline (indices.txt
   records it on a line). */
int check_paths(const run *r, char *err, size_t errlen) {
    static const opt_id chosen[] = {OPT_LOG, OPT_CHECKPOINT, OPT_EXPORT};
    struct stat sb;
    const char *data = r->o.str[OPT_DATA];
    size_t i;
    if (is_directory(r->path_log)) { snprintf(err, errlen, "--log '%s' is a directory", r->path_log); return RUN_REFUSED; }
    if (is_directory(r->path_ckpt)) { snprintf(err, errlen, "--checkpoint '%s' is a directory", r->path_ckpt); return RUN_REFUSED; }
    if (stat(r->o.str[OPT_OUT], &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "--out '%s' is not a directory", r->o.str[OPT_OUT]);
        return RUN_REFUSED;
    }
    if (data && strchr(data, '\n')) {
        snprintf(err, errlen, "--data: a path with a newline cannot be recorded in indices.txt");
        return RUN_REFUSED;
    }
    for (i = 0; i < sizeof chosen / sizeof chosen[0]; i++) {
        opt_id id = chosen[i];
        const char *path = id == OPT_LOG ? r->path_log : id == OPT_CHECKPOINT ? r->path_ckpt : r->o.str[OPT_EXPORT];
        const char *taken;
        if (!path || !r->o.str[id]) continue;   /* not given: the run's own name, which takes no other */
        if (!(taken = file_taken(r, path, id))) {
            snprintf(err, errlen, "%s '%s': cannot compare it with the run's other files: %s", OPTS[id].flag, path, strerror(errno));
            return RUN_FAILED;
        }
        if (taken[0]) {
            snprintf(err, errlen, "%s '%s' is %s: give it a path of its own", OPTS[id].flag, path, taken);
            return RUN_REFUSED;
        }
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

/* Where a run's manifest (root; NULL: none) keeps a file: its "key", else `name` in --out.
   malloc'd. */
static char *recorded_path(const run *r, const json_value *root, const char *key, const char *name) {
    const json_value *v = root ? json_get(root, key) : NULL;
    return v && v->type == JSON_STRING ? copy_text(v->string) : path_join(r->o.str[OPT_OUT], name);
}

/* Where the run in --out (its run.json) keeps its log and checkpoint; the defaults in --out
   when it records none or cannot be read. malloc'd. -1: out of memory; not the defaults,
   which would refuse the run's own --log or --checkpoint as another file. */
static int earlier_run_paths(const run *r, char **log, char **ckpt, char *err, size_t errlen) {
    char why[256];
    size_t size, at = 0;
    char *text;
    json_value root;
    int parsed;
    errno = 0;   /* ENOMEM after a failure: the reader or the parser ran out of memory */
    text = read_text_file(r->path_manifest, &size, why, sizeof why);
    parsed = text && json_parse(text, size, &root, &at, why, sizeof why) == 0;
    free(text);
    if (!parsed && errno == ENOMEM) {
        snprintf(err, errlen, "%s: out of memory", r->path_manifest);
        return -1;
    }
    *log = recorded_path(r, parsed ? &root : NULL, "log", "log.jsonl");
    *ckpt = recorded_path(r, parsed ? &root : NULL, "checkpoint", "checkpoint.grzo");
    if (parsed) json_free(&root);
    if (*log && *ckpt) return 0;
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* Whether the file at path belongs to the run in --out: a run file's name in --out, or the
   log or checkpoint its run.json names. -1: it cannot be told (errno). */
static int earlier_runs_file(const run *r, const char *path, const char *earlier_log, const char *earlier_ckpt) {
    static const char *const names[] = {"run.json", "log.jsonl", "checkpoint.grzo", "indices.txt", "results.json",
                                        "loss.png", "predictions.jsonl"};
    size_t i;
    int own = earlier_log ? same_file(path, earlier_log) : 0;
    if (own == 0 && earlier_ckpt) own = same_file(path, earlier_ckpt);
    for (i = 0; own == 0 && i < sizeof names / sizeof names[0]; i++) {
        char *p = path_join(r->o.str[OPT_OUT], names[i]);
        own = p ? same_file(path, p) : -1;
        free(p);
    }
    return own;
}

/* A new run never mixes its files with an earlier run's: it refuses a folder that holds
   any of them unless told --overwrite. --overwrite replaces a run, and does not delete
   whatever a path names: a --log or --checkpoint at an existing file that is not the
   earlier run's is refused. Nothing is removed here (remove_earlier_run, once the run has
   loaded). */
int refuse_earlier_run(const run *r, char *err, size_t errlen) {
    const char *files[RUN_FILES];
    char *earlier_log = NULL, *earlier_ckpt = NULL;
    struct stat sb;
    int i, n = run_files(r, files), rc = 0;
    size_t used = 0;
    if (r->o.overwrite) {
        if (earlier_run_paths(r, &earlier_log, &earlier_ckpt, err, errlen)) rc = RUN_FAILED;
        for (i = 0; i < n && rc == 0; i++) {
            int own = lstat(files[i], &sb) == 0 ? earlier_runs_file(r, files[i], earlier_log, earlier_ckpt) : 1;
            if (own < 0) {
                snprintf(err, errlen, "--overwrite: cannot tell whether '%s' is a file of the run in '%s': %s", files[i],
                         r->o.str[OPT_OUT], strerror(errno));
                rc = RUN_FAILED;
            } else if (!own) {
                snprintf(err, errlen, "--overwrite: %s '%s' is not a file of the run in '%s', so it is not replaced (give "
                         "another path, or remove it yourself)", files[i] == r->path_log ? "--log" : "--checkpoint", files[i],
                         r->o.str[OPT_OUT]);
                rc = RUN_REFUSED;
            }
        }
        free(earlier_log);
        free(earlier_ckpt);
        return rc;
    }
    for (i = 0; i < n; i++) {
        if (lstat(files[i], &sb) != 0) continue;
        if (!used) used = (size_t)snprintf(err, errlen, "'%s' holds an earlier run (", r->o.str[OPT_OUT]);
        else if (used < errlen) used += (size_t)snprintf(err + used, errlen - used, ", ");
        if (used < errlen) used += (size_t)snprintf(err + used, errlen - used, "%s", files[i]);
    }
    if (!used) return 0;
    if (used < errlen) snprintf(err + used, errlen - used, "): continue it with --resume, or start over with --overwrite");
    return RUN_REFUSED;
}

/* --overwrite: the earlier run's files go (refuse_earlier_run has checked that every file at
   the run's paths is one). Never a directory: unlink refuses those. */
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

/* --out, created when missing (r->created_out says so, for remove_unsaved_run). */
int make_out_dir(run *r, char *err, size_t errlen) {
    const char *dir = r->o.str[OPT_OUT];
    if (mkdir(dir, 0777) == 0) {
        r->created_out = 1;
        return 0;
    }
    if (errno == EEXIST && is_directory(dir)) return 0;
    snprintf(err, errlen, "cannot create directory '%s': %s", dir, strerror(errno));
    return -1;
}

/* A file can be created in the folder of path: tried with an empty temporary file, so that
   a missing or read-only folder of --log or --checkpoint stops the run before it starts,
   not at its first save hours later. --out itself, before a new run creates it, passes. */
static int check_folder_writable(const run *r, const char *path, const char *flag, char *err, size_t errlen) {
    char *dir = folder_of(path), *probe = dir ? path_join(dir, ".grzo-finetune-probe-XXXXXX") : NULL;
    int fd, rc = 0, new_out;
    if (!probe) { snprintf(err, errlen, "out of memory"); rc = -1; }
    else if (!r->o.resume && !is_directory(dir) && (new_out = same_folder(dir, r->o.str[OPT_OUT])) != 0) {
        if (new_out < 0) {   /* not "cannot create a file in it": nothing was tried */
            snprintf(err, errlen, "%s '%s': cannot tell whether '%s' is --out: %s", flag, path, dir, strerror(errno));
            rc = -1;
        }
    } else if ((fd = mkstemp(probe)) < 0) {
        snprintf(err, errlen, "%s '%s': cannot create a file in '%s': %s", flag, path, dir, strerror(errno));
        rc = -1;
    } else {
        close(fd);
        unlink(probe);
    }
    free(dir);
    free(probe);
    return rc;
}

int check_folders_writable(const run *r, char *err, size_t errlen) {
    return check_folder_writable(r, r->path_manifest, "--out", err, errlen) ||
           check_folder_writable(r, r->path_log, "--log", err, errlen) || check_folder_writable(r, r->path_ckpt, "--checkpoint", err, errlen);
}

/* A new run that fails (or is interrupted) before its first checkpoint exists leaves
   nothing: it cannot be resumed, and its files would make the same command refuse to run
   again. Every run file at the run's paths is this invocation's once created_files is set
   (an earlier run's were refused or removed). */
void remove_unsaved_run(const run *r) {
    const char *files[RUN_FILES];
    int i, n;
    if (r->o.resume || r->saved_step >= 0) return;
    if (r->created_files)
        for (i = 0, n = run_files(r, files); i < n; i++) unlink(files[i]);
    if (r->created_out) rmdir(r->o.str[OPT_OUT]);   /* empty now, unless someone else wrote there */
}

/* Writes path whole or not at all (files.h: path.tmp created exclusively, fsync, rename). */
typedef void (*file_writer)(FILE *f, const run *r);
static int write_atomically(const char *path, file_writer write, const run *r, char *err, size_t errlen) {
    file_out o;
    if (file_out_begin(&o, path, err, errlen) != 0) return -1;
    errno = 0;   /* a failed write sets it; file_out_commit reports it */
    write(o.f, r);
    return file_out_commit(&o, err, errlen);
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

/* ---- which model and tokenizer a run used ----------------------------------------------------------- */
#define FNV_INIT UINT64_C(0xcbf29ce484222325)
#define IDENTITY_BYTES ((size_t)1 << 20)

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* A file by contents: its size and FNV-1a of its first MiB (a moved model is the same model;
   a different one with the same name is not). The format run.json has always recorded. */
static int file_identity(const char *path, char *out, size_t n) {
    static unsigned char buf[IDENTITY_BYTES];
    struct stat sb;
    size_t got;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    if (fstat(fileno(f), &sb) != 0) { fclose(f); return -1; }
    got = fread(buf, 1, sizeof buf, f);
    if (ferror(f)) { fclose(f); return -1; }
    fclose(f);
    snprintf(out, n, "%lld:%016llx", (long long)sb.st_size, (unsigned long long)fnv1a(FNV_INIT, buf, got));
    return 0;
}

/* h extended by the file's name, size and its first and last MiB (a safetensors file begins
   with its tensor table; its data differ in any fine-tune). -1: it cannot be read. */
static int hash_folder_file(const char *dir, const char *name, uint64_t *h, long long *total) {
    static unsigned char buf[IDENTITY_BYTES];
    char *path = path_join(dir, name);
    FILE *f = path ? fopen(path, "rb") : NULL;
    unsigned char size_bytes[8];
    struct stat sb;
    uint64_t size;
    size_t got, tail;
    int i, ok;
    free(path);
    if (!f) return -1;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) { fclose(f); return -1; }
    size = (uint64_t)sb.st_size;
    for (i = 0; i < 8; i++) size_bytes[i] = (unsigned char)(size >> (8 * i));
    *h = fnv1a(*h, (const unsigned char *)name, strlen(name) + 1);
    *h = fnv1a(*h, size_bytes, 8);
    got = fread(buf, 1, IDENTITY_BYTES, f);
    *h = fnv1a(*h, buf, got);
    /* the last MiB, or what the first did not cover */
    tail = size >= 2 * (uint64_t)IDENTITY_BYTES ? IDENTITY_BYTES : size > IDENTITY_BYTES ? (size_t)(size - IDENTITY_BYTES) : 0;
    ok = tail == 0 || (fseek(f, -(long)tail, SEEK_END) == 0 && fread(buf, 1, tail, f) == tail);
    if (ok && tail) *h = fnv1a(*h, buf, tail);
    ok = ok && !ferror(f);
    fclose(f);
    *total += (long long)size;
    return ok ? 0 : -1;
}

static int ends_with(const char *s, const char *end) {
    size_t a = strlen(s), b = strlen(end);
    return a >= b && strcmp(s + a - b, end) == 0;
}

/* The files of a Hugging Face folder that the loader reads (load_hf.c, tokenizer_hf.c). */
static int read_by_loader(const char *name) {
    return !strcmp(name, "config.json") || (!strncmp(name, "tokenizer", 9) && ends_with(name, ".json")) ||
           ends_with(name, ".safetensors") || ends_with(name, ".safetensors.index.json");
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A Hugging Face folder by contents: the files the loader reads, in name order, each by
   name, size and both ends ("folder:FILES:BYTES:HASH"). The folder's own size says nothing. */
static int folder_identity(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL, **grown;
    size_t count = 0, cap = 0, i;
    uint64_t h = FNV_INIT;
    long long total = 0;
    int rc = 0;
    if (!d) return -1;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!read_by_loader(e->d_name)) continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            if (!(grown = (char **)realloc(names, cap * sizeof *names))) { rc = -1; break; }
            names = grown;
        }
        if (!(names[count] = copy_text(e->d_name))) rc = -1;
        else count++;
    }
    closedir(d);
    if (rc == 0 && count) qsort(names, count, sizeof *names, compare_names);
    for (i = 0; i < count && rc == 0; i++) rc = hash_folder_file(dir, names[i], &h, &total);
    for (i = 0; i < count; i++) free(names[i]);
    free(names);
    if (rc == 0) snprintf(out, n, "folder:%u:%lld:%016llx", (unsigned)count, total, (unsigned long long)h);
    return rc;
}

static int input_identity(const char *path, char *out, size_t n) {
    return is_directory(path) ? folder_identity(path, out, n) : file_identity(path, out, n);
}

/* A new run's --model and --tokenizer identities, for run.json (after they loaded). */
int identify_inputs(run *r, char *err, size_t errlen) {
    static const opt_id ids[2] = {OPT_MODEL, OPT_TOKENIZER};
    int k;
    for (k = 0; k < 2; k++) {
        const char *path = r->o.str[ids[k]];
        r->input_id[k][0] = '\0';
        if (path && input_identity(path, r->input_id[k], sizeof r->input_id[k]) != 0) {
            snprintf(err, errlen, "%s %s: cannot read it again: %s", OPTS[ids[k]].flag, path, strerror(errno));
            return -1;
        }
    }
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
            const char *ident = r->input_id[id == OPT_MODEL ? 0 : 1];
            fprintf(f, ",\n \"%s_id\":", d->key);
            if (o->str[id] && ident[0]) json_string(f, ident);
            else fprintf(f, "null");
        }
    }
    fprintf(f, ",\n \"zero_shot_dev_%s\":%.6f,\"zero_shot_test_%s\":%.6f", score_key(r), r->zs_dev, score_key(r), r->zs_test);
    if (r->generation) fprintf(f, ",\"zero_shot_dev_em\":%.6f,\"zero_shot_test_em\":%.6f", r->zs_dev_em, r->zs_test_em);
    /* the checkpoint this run saved last (null: none yet), and a save in progress */
    fprintf(f, ",\n \"checkpoint_step\":");
    if (r->saved_step >= 0) fprintf(f, "%lld,\"checkpoint_sum\":\"%016llx\"", (long long)r->saved_step, (unsigned long long)r->saved_sum);
    else fprintf(f, "null,\"checkpoint_sum\":null");
    if (r->saving_step >= 0) fprintf(f, ",\"checkpoint_saving\":%lld", (long long)r->saving_step);
    else fprintf(f, ",\"checkpoint_saving\":null");
    fprintf(f, "}\n");
}

int write_manifest(const run *r, char *err, size_t errlen) {
    return write_atomically(r->path_manifest, write_manifest_json, r, err, errlen);
}

/* One conflict, appended to a one-line list: "--lr 0.002 (the run has 0.001)". */
static void add_conflict(char *list, size_t n, const char *flag, const char *given, const char *holder, const char *recorded) {
    size_t used = strlen(list);
    if (used + 1 >= n) return;
    snprintf(list + used, n - used, "%s%s %.200s (%s has %.200s)", used ? ", " : "", flag, given, holder, recorded);
}

/* A conflict of a file not given again: "the model at PATH is another file than ...". */
static void add_changed_input(char *list, size_t n, const char *what, const char *path) {
    size_t used = strlen(list);
    if (used + 1 >= n) return;
    snprintf(list + used, n - used, "%sthe %s at %.200s is another file than the run started with", used ? ", " : "", what, path);
}

/* Whether the run's input at path (--model or --tokenizer, run.json's "KEY_id") is the file
   the run recorded; its identity goes to ident. A folder recorded before folders had an
   identity (the id of an empty read, FNV-1a's initial value, which said nothing) is taken as
   it is: it cannot be checked. -1: the file (or a file of the folder) cannot be read, or
   memory ran out (errno): not "another file", which would send the user after a change
   that was never made. */
static int is_recorded_input(const json_value *root, const char *key, const char *path, char *ident, size_t n) {
    char want_key[32];
    const json_value *want;
    snprintf(want_key, sizeof want_key, "%s_id", key);
    want = json_get(root, want_key);
    if (!want || want->type != JSON_STRING) return 0;
    errno = 0;
    if (input_identity(path, ident, n) != 0) return -1;
    if (!strncmp(ident, "folder:", 7) && ends_with(want->string, ":cbf29ce484222325")) return 1;
    return strcmp(ident, want->string) == 0;
}

/* resume_settings' message when is_recorded_input could not read an input */
static int input_unreadable(const opt_def *d, const char *path, char *err, size_t errlen) {
    snprintf(err, errlen, "--resume: %s %s: cannot read it, to check that it is the file the run started with: %s", d->flag,
             path, strerror(errno ? errno : EIO));
    return RUN_FAILED;
}

/* run.json's record of the checkpoint the run saved last (absent in runs made before it:
   saved_known 0, and --resume checks what it can without it). */
static int read_checkpoint_record(run *r, const json_value *root, char *err, size_t errlen) {
    const json_value *step = json_get(root, "checkpoint_step"), *sum = json_get(root, "checkpoint_sum"),
                     *saving = json_get(root, "checkpoint_saving");
    r->saved_known = step != NULL;
    if (!step) return 0;
    if (step->type == JSON_NULL) r->saved_step = -1;
    else if (step->is_integer && step->integer >= 0 && sum && sum->type == JSON_STRING && strlen(sum->string) == 16 &&
             strspn(sum->string, "0123456789abcdef") == 16) {
        r->saved_step = step->integer;
        r->saved_sum = strtoull(sum->string, NULL, 16);
    } else {
        snprintf(err, errlen, "%s: \"checkpoint_step\" or \"checkpoint_sum\" has the wrong type", r->path_manifest);
        return -1;
    }
    if (!saving || saving->type == JSON_NULL) r->saving_step = -1;
    else if (saving->is_integer && saving->integer >= 0) r->saving_step = saving->integer;
    else {
        snprintf(err, errlen, "%s: \"checkpoint_saving\" has the wrong type", r->path_manifest);
        return -1;
    }
    return 0;
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
        return RUN_REFUSED;
    }
    if (!(text = read_text_file(r->path_manifest, &size, err, errlen))) return RUN_FAILED;
    errno = 0;   /* ENOMEM after a failure: the parser ran out of memory, the file may be sound */
    if (json_parse(text, size, &r->manifest, &at, err, errlen)) {
        char why[512];
        int no_memory = errno == ENOMEM;
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "%s: %s", r->path_manifest, why);
        free(text);
        return no_memory ? RUN_FAILED : RUN_REFUSED;
    }
    free(text);
    r->have_manifest = 1;
    root = &r->manifest;
    if (!(v = json_get(root, "grzo_finetune_run")) || !v->is_integer || v->integer != 1) {
        snprintf(err, errlen, "%s: not a grzo-finetune run manifest", r->path_manifest);
        return RUN_REFUSED;
    }
    for (id = 0; id < OPT_COUNT; id++) {
        const opt_def *d = &OPTS[id];
        const char *given = o->text[id];
        int differs = 0;
        if (!d->key) continue;
        if (!(v = json_get(root, d->key))) {
            /* recorded before the variants and --attention: dense, Rademacher, auto */
            if (id >= OPT_SPARSE_DENSITY && id <= OPT_ATTENTION && !given) continue;
            snprintf(err, errlen, "%s: no \"%s\"", r->path_manifest, d->key);
            return RUN_REFUSED;
        }
        recorded_text(v, rec, sizeof rec);
        if (v->type == JSON_NULL) {   /* no tokenizer was given */
            if (given && !d->may_change) add_conflict(conflicts, sizeof conflicts, d->flag, given, "the run", "none");
            continue;
        }
        if ((d->kind == KIND_INT && !v->is_integer) || (d->kind == KIND_FLOAT && v->type != JSON_NUMBER) ||
            (d->kind != KIND_INT && d->kind != KIND_FLOAT && v->type != JSON_STRING)) {
            snprintf(err, errlen, "%s: \"%s\" has the wrong type", r->path_manifest, d->key);
            return RUN_REFUSED;
        }
        if (given && d->may_change) continue;   /* the new value runs, and is recorded */
        if (!given) {
            /* a recorded value passes the same checks as a typed one */
            char num[64];
            const char *t = v->type == JSON_STRING ? v->string : num;
            if (d->kind == KIND_INT) snprintf(num, sizeof num, "%lld", v->integer);
            else snprintf(num, sizeof num, "%.9g", v->number);
            if (set_option(o, (opt_id)id, t, err, errlen)) return RUN_REFUSED;
            /* the file at the recorded path must still be the one the run started with */
            if (id == OPT_MODEL || id == OPT_TOKENIZER) {
                int same = is_recorded_input(root, d->key, v->string, r->input_id[id == OPT_MODEL ? 0 : 1], sizeof r->input_id[0]);
                if (same < 0) return input_unreadable(d, v->string, err, errlen);
                if (!same) add_changed_input(conflicts, sizeof conflicts, d->key, v->string);
            }
            continue;
        }
        switch (d->kind) {
        case KIND_INT: differs = o->num[id] != v->integer; break;
        case KIND_FLOAT: differs = o->real[id] != (float)v->number; break;
        case KIND_SEED: differs = strtoull(v->string, NULL, 10) != o->seed; break;
        case KIND_TEXT: differs = strcmp(o->str[id], v->string) != 0; break;
        case KIND_PATH:   /* --model, --tokenizer: the same file, wherever it is now */
            differs = is_recorded_input(root, d->key, given, r->input_id[id == OPT_MODEL ? 0 : 1], sizeof r->input_id[0]);
            if (differs < 0) return input_unreadable(d, given, err, errlen);
            differs = !differs;
            if (differs) snprintf(rec, sizeof rec, "%s, a different file", v->string);
            break;
        }
        if (differs) add_conflict(conflicts, sizeof conflicts, d->flag, given, "the run", rec);
    }
    if (conflicts[0]) {
        snprintf(err, errlen, "--resume: %s was made with other settings: %s", r->path_manifest, conflicts);
        return RUN_REFUSED;
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
    if (read_checkpoint_record(r, root, err, errlen)) return RUN_REFUSED;
    r->recorded_ckpt = recorded_path(r, root, "checkpoint", "checkpoint.grzo");
    r->recorded_log = recorded_path(r, root, "log", "log.jsonl");
    if (!r->recorded_ckpt || !r->recorded_log) { snprintf(err, errlen, "out of memory"); return RUN_FAILED; }
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

/* The state a checkpoint holds, from its header (grzo.h section 6: "GRZOCKPT", the u64
   step at byte 40, the FNV-1a-64 of bytes 0..247 at byte 248): the header holds the
   checksum of the parameters, so its own checksum names the whole saved state. */
#define CKPT_HEADER_BYTES 256
static int checkpoint_stamp(const char *path, int64_t *step, uint64_t *sum) {
    unsigned char h[CKPT_HEADER_BYTES];
    FILE *f = fopen(path, "rb");
    int i, ok;
    if (!f) return -1;
    ok = fread(h, 1, sizeof h, f) == sizeof h && memcmp(h, "GRZOCKPT", 8) == 0;
    fclose(f);
    if (!ok) return -1;
    *step = 0;
    *sum = 0;
    for (i = 7; i >= 0; i--) {
        *step = (int64_t)(((uint64_t)*step << 8) | h[40 + i]);
        *sum = (*sum << 8) | h[248 + i];
    }
    return 0;
}

/* Before a save: run.json records the step being saved, so that a crash after the
   checkpoint's rename, before record_save_done, still leaves a checkpoint --resume takes. */
int record_save_begin(run *r, char *err, size_t errlen) {
    r->saving_step = grzo_get_step(r->ctx);
    return write_manifest(r, err, errlen);
}

/* After a save: run.json records the checkpoint's step and header checksum. */
int record_save_done(run *r, char *err, size_t errlen) {
    int64_t step;
    uint64_t sum;
    if (checkpoint_stamp(r->path_ckpt, &step, &sum) != 0) {
        snprintf(err, errlen, "cannot read back the header of the checkpoint %s just written", r->path_ckpt);
        return -1;
    }
    r->saved_step = step;
    r->saved_sum = sum;
    r->saving_step = -1;
    return write_manifest(r, err, errlen);
}

/* The steps the log holds: one past the highest step of a whole training line (a line cut
   short, by a crash or a full disk, does not count; nor does a --diagnose line). */
static int logged_steps(const char *path, int64_t *steps, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int failed;
    *steps = 0;
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "--resume: cannot read the log %s: %s", path, strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, f)) > 0) {
        const char *p = strstr(line, "\"step\":");
        long long s;
        if (line[len - 1] != '\n' || !p || !strstr(line, "\"loss\":")) continue;
        if ((s = atoll(p + 7)) >= *steps) *steps = s + 1;
    }
    failed = ferror(f);
    free(line);
    fclose(f);
    if (failed) { snprintf(err, errlen, "--resume: cannot read the log %s", path); return -1; }
    return 0;
}

/* --resume: the checkpoint must be the state this run saved last (run.json's record), or,
   after a crash in the middle of a save, the recorded save's step in the run's own
   checkpoint file; a copy elsewhere passes only the first test. A run recorded before the
   record existed keeps its checkpoint file. Either way the checkpoint cannot be ahead of
   the log, and a --log elsewhere must be the run's log moved, not another file beside it.
   The checkpoint taken becomes the record (a run recorded before the record gets one). */
int check_checkpoint_is_the_runs(run *r, char *err, size_t errlen) {
    int64_t step, logged;
    uint64_t sum;
    int own_file = same_file(r->path_ckpt, r->recorded_ckpt), own_log;
    if (own_file < 0) {
        snprintf(err, errlen, "--resume: cannot tell whether %s is the run's checkpoint: %s", r->path_ckpt, strerror(errno));
        return -1;
    }
    if (checkpoint_stamp(r->path_ckpt, &step, &sum) != 0) {
        snprintf(err, errlen, "--resume: cannot read the header of the checkpoint %s", r->path_ckpt);
        return -1;
    }
    if (r->saved_known) {
        int saved = r->saved_step >= 0 && step == r->saved_step && sum == r->saved_sum;
        int cut_save = r->saving_step >= 0 && step == r->saving_step && own_file;
        if (!saved && !cut_save) {
            if (r->saved_step < 0)
                snprintf(err, errlen, "--resume: the checkpoint %s (step %lld) is not this run's: the run in '%s' has saved none",
                         r->path_ckpt, (long long)step, r->o.str[OPT_OUT]);
            else
                snprintf(err, errlen, "--resume: the checkpoint %s (step %lld) is not the one this run saved last (step %lld): it "
                         "is another run's, or was replaced", r->path_ckpt, (long long)step, (long long)r->saved_step);
            return -1;
        }
    } else if (!own_file) {
        snprintf(err, errlen, "--resume: --checkpoint %s is not the run's checkpoint %s", r->path_ckpt, r->recorded_ckpt);
        return -1;
    }
    if ((own_log = same_file(r->path_log, r->recorded_log)) < 0) {
        snprintf(err, errlen, "--resume: cannot tell whether %s is the run's log: %s", r->path_log, strerror(errno));
        return -1;
    }
    if (!own_log && access(r->recorded_log, F_OK) == 0) {
        snprintf(err, errlen, "--resume: --log %s is not the run's log %s", r->path_log, r->recorded_log);
        return -1;
    }
    if (logged_steps(r->path_log, &logged, err, errlen)) return -1;
    if (step > logged) {
        snprintf(err, errlen, "--resume: the checkpoint %s is at step %lld, but the log %s holds %lld steps: they are not of one run",
                 r->path_ckpt, (long long)step, r->path_log, (long long)logged);
        return -1;
    }
    r->saved_step = step;
    r->saved_sum = sum;
    r->saving_step = -1;
    r->saved_known = 1;
    return 0;
}

/* ---- the log, the loss plot, results.json and predictions.jsonl ----------------------------------- */
/* Keep the log lines of steps before `step` (a resume discards anything logged after the
   checkpoint, and a last line cut short) and return the elapsed seconds of the last kept line. */
int trim_log(const char *path, int64_t step, double *elapsed, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    file_out g;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int e = 0;
    *elapsed = 0;
    if (!f) return 0;
    if (file_out_begin(&g, path, err, errlen) != 0) {
        fclose(f);
        return -1;
    }
    errno = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        long long s = -1;
        const char *p = strstr(line, "\"step\":"), *q = strstr(line, "\"elapsed\":");
        if (line[len - 1] != '\n') continue;   /* cut short: the next line would be appended to it */
        if (p) s = atoll(p + 7);
        if (s < 0 || s >= step) continue;
        if (q) *elapsed = atof(q + 10);
        fputs(line, g.f);
    }
    if (ferror(f)) e = errno ? errno : EIO;
    free(line);
    fclose(f);
    if (e) {
        file_out_abandon(&g);
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
        return -1;
    }
    return file_out_commit(&g, err, errlen);
}

/* The log's lines reach the file now, or the run stops: a log that silently lost its end
   would pass for the whole run. */
int log_flushed(FILE *f, const char *path, char *err, size_t errlen) {
    if (fflush(f) == 0 && !ferror(f)) return 0;
    snprintf(err, errlen, "cannot write the log %s: %s", path, strerror(errno ? errno : EIO));
    return -1;
}

int log_close(FILE *f, const char *path, char *err, size_t errlen) {
    int e = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e) return 0;
    snprintf(err, errlen, "cannot write the log %s: %s", path, strerror(e));
    return -1;
}

/* dev_em >= 0: a generation task's dev F1 (dev_acc) and exact match */
int log_line(FILE *f, const char *path, int64_t step, const grzo_step_report *rep, double elapsed, double dev_acc, double dev_em,
             char *err, size_t errlen) {
    errno = 0;   /* what a failed write sets is what log_flushed reports */
    fprintf(f, "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.9g,\"elapsed\":%.3f", (long long)step, rep->loss, (double)rep->lr, elapsed);
    if (dev_acc >= 0 && dev_em >= 0) fprintf(f, ",\"dev_f1\":%.6f,\"dev_em\":%.6f", dev_acc, dev_em);
    else if (dev_acc >= 0) fprintf(f, ",\"dev_acc\":%.6f", dev_acc);
    fprintf(f, "}\n");
    return log_flushed(f, path, err, errlen);
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
    char *gp = path_join(out, "loss.gp"), err[1024] = "";
    file_out png = {0};
    int rc = -1;
    /* loss.png.tmp (the script's output) made here, exclusively, for gnuplot to write into */
    if (gp && write_atomically(gp, write_plot_script, r, err, sizeof err) == 0 &&
        file_out_begin(&png, r->path_png, err, sizeof err) == 0 && file_out_close_temp(&png, err, sizeof err) == 0) {
        rc = gnuplot_run(out, "loss.gp", err, sizeof err);
        if (rc == 0) rc = file_out_commit(&png, err, sizeof err);
    }
    file_out_abandon(&png);   /* nothing when committed */
    if (rc == 1) fprintf(stderr, "note: gnuplot not found: no %s\n", r->path_png);
    else if (rc != 0) fprintf(stderr, "note: no %s: %s\n", r->path_png, err[0] ? err : "out of memory");
    if (gp) remove(gp);
    free(gp);
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

/* predictions.jsonl: one line per test question, {"id", "prediction", "em", "f1",
   "new_tokens", "stop"} (the id is the file's "id" / "query_id", so the official scripts'
   predictions can be built from it; the last two say how the decoding ended) */
static void write_predictions_json(FILE *f, const run *r) {
    size_t i;
    for (i = 0; i < r->test.n; i++) {
        fprintf(f, "{\"id\":");
        json_string(f, r->data.test.ex[i].id ? r->data.test.ex[i].id : "");
        fprintf(f, ",\"prediction\":");
        json_string(f, r->preds[i].text);
        fprintf(f, ",\"em\":%.6f,\"f1\":%.6f,\"new_tokens\":%d,\"stop\":\"%s\"}\n", r->preds[i].em, r->preds[i].f1,
                (int)r->preds[i].new_tokens, r->preds[i].stop);
    }
}

int write_results(const run *r, char *err, size_t errlen) {
    return write_atomically(r->path_results, write_results_json, r, err, errlen);
}

int write_predictions(const run *r, char *err, size_t errlen) {
    return write_atomically(r->path_predictions, write_predictions_json, r, err, errlen);
}
