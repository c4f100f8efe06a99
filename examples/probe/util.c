/* util.c - statistics, seeds, parallel work units, markdown tables, files and gnuplot. */
#define _POSIX_C_SOURCE 200809L
#include "probe.h"
#include "../common/gnuplot_run.h"
#include "files.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- statistics ------------------------------------------------------------------------------- */
void stat_add(running_stat *s, double x) {
    s->n += 1.0;
    s->sum += x;
    s->sum_sq += x * x;
}

void stat_merge(running_stat *into, const running_stat *from) {
    into->n += from->n;
    into->sum += from->sum;
    into->sum_sq += from->sum_sq;
}

double stat_mean(const running_stat *s) { return s->n > 0.0 ? s->sum / s->n : NAN; }

double stat_sd(const running_stat *s) {
    double m, v;
    if (s->n < 2.0) return NAN;
    m = s->sum / s->n;
    v = (s->sum_sq - s->n * m * m) / (s->n - 1.0);
    return v > 0.0 ? sqrt(v) : 0.0;
}

double stat_se(const running_stat *s) { return s->n > 1.0 ? stat_sd(s) / sqrt(s->n) : NAN; }

double dot(const double *a, const double *b, int64_t n) {
    double acc = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

double cosine(const double *a, const double *b, int64_t n) {
    double na = sqrt(dot(a, a, n)), nb = sqrt(dot(b, b, n));
    return na > 0.0 && nb > 0.0 ? dot(a, b, n) / (na * nb) : 0.0;
}

/* ---- seeds -------------------------------------------------------------------------------------- */
static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t seed_mix(uint64_t seed, uint64_t tag) { return splitmix64(splitmix64(seed) ^ (tag * 0xD6E8FEB86659FD93ull)); }

/* ---- parallel work units ------------------------------------------------------------------------------ */
/* Once a unit has failed (its message printed) the units not yet started are skipped: the run
   is an error whatever they find, and a failure, out of memory above all, should not cost the
   rest of the run's minutes. The units are handed out in order, so a skipped one comes after
   one that started before the failure, and the first failure in unit order is still among
   those that ran. */
grzo_status run_units(int n, int threads, unit_fn unit, void *user) {
    grzo_status *status = (grzo_status *)calloc((size_t)(n > 0 ? n : 1), sizeof *status);
    grzo_status first = GRZO_OK;
    int i, failed = 0;
    if (!status) return probe_report(GRZO_ERR_OUT_OF_MEMORY, "malloc", NULL);
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
#endif
    for (i = 0; i < n; i++) {
        int stop;
#ifdef _OPENMP
#pragma omp atomic read
#endif
        stop = failed;
        if (stop) continue;
        status[i] = unit(i, user);
        if (status[i] != GRZO_OK) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
            failed = 1;
        }
    }
    (void)threads;
    for (i = 0; i < n && first == GRZO_OK; i++) first = status[i];
    free(status);
    return first;
}

/* ---- markdown tables --------------------------------------------------------------------------------- */
static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int md_append(md_table *t, const char *const *cells) {
    int c;
    if (t->rows + 1 >= t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        char **nc = (char **)realloc(t->cell, (size_t)cap * (size_t)t->cols * sizeof *nc);
        if (!nc) return -1;
        t->cell = nc;
        t->cap = cap;
    }
    for (c = 0; c < t->cols; c++) {
        char **row = t->cell + (size_t)t->rows * (size_t)t->cols;
        row[c] = dup_str(cells[c]);
        if (!row[c]) {   /* md_free frees whole rows only: the row's cells so far go here */
            while (c-- > 0) free(row[c]);
            return -1;
        }
    }
    t->rows++;
    return 0;
}

/* md_begin and md_row print their one-line error, so that a caller only stops */
static int md_stored(int rc) {
    if (rc != 0) fprintf(stderr, "grzo-probe: out of memory (table)\n");
    return rc;
}

int md_begin(md_table *t, int cols, const char *const *header) {
    memset(t, 0, sizeof *t);
    t->cols = cols;
    if (md_append(t, header) != 0) {   /* callers return without md_free when md_begin fails */
        md_free(t);
        return md_stored(-1);
    }
    return 0;
}

int md_row(md_table *t, const char *first, ...) {
    const char *cells[32];
    va_list ap;
    int c;
    if (t->cols > 32) return -1;
    cells[0] = first;
    va_start(ap, first);
    for (c = 1; c < t->cols; c++) cells[c] = va_arg(ap, const char *);
    va_end(ap);
    return md_stored(md_append(t, cells));
}

/* characters, not bytes, so that "±" pads like one column */
static int utf8_width(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

void md_print(const md_table *t, FILE *f) {
    int width[32] = {0}, r, c;
    for (r = 0; r < t->rows; r++)
        for (c = 0; c < t->cols && c < 32; c++) {
            int w = utf8_width(t->cell[(size_t)r * (size_t)t->cols + (size_t)c]);
            if (w > width[c]) width[c] = w;
        }
    for (r = 0; r < t->rows; r++) {
        for (c = 0; c < t->cols; c++) {
            const char *cell = t->cell[(size_t)r * (size_t)t->cols + (size_t)c];
            fprintf(f, "| %s%*s ", cell, width[c] - utf8_width(cell), "");
        }
        fprintf(f, "|\n");
        if (r == 0) {
            for (c = 0; c < t->cols; c++) {
                int k;
                fprintf(f, "|");
                for (k = 0; k < width[c] + 2; k++) fputc('-', f);
            }
            fprintf(f, "|\n");
        }
    }
}

void md_free(md_table *t) {
    int i;
    for (i = 0; i < t->rows * t->cols; i++) free(t->cell[i]);
    free(t->cell);
    memset(t, 0, sizeof *t);
}

/* ---- files --------------------------------------------------------------------------------------------- */
static int make_dirs(const char *path) {
    char buf[1024];
    size_t i, n = strlen(path);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char keep = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = keep;
        }
    }
    return 0;
}

/* stat, not access(): a regular file named by --out passes access(W_OK) and would fail only
   when the first CSV is written, after the whole subcommand ran */
int out_prepare(const probe_opts *o) {
    struct stat st;
    if (make_dirs(o->out_dir) != 0 || stat(o->out_dir, &st) != 0) {
        fprintf(stderr, "grzo-probe: cannot write to output folder '%s': %s\n", o->out_dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "grzo-probe: --out '%s' is not a folder\n", o->out_dir);
        return -1;
    }
    if (access(o->out_dir, W_OK) != 0) {
        fprintf(stderr, "grzo-probe: cannot write to output folder '%s': %s\n", o->out_dir, strerror(errno));
        return -1;
    }
    return 0;
}

int out_path(const probe_opts *o, const char *name, char *buf, size_t cap) {
    int n;
    if (make_dirs(o->out_dir) != 0) {
        fprintf(stderr, "grzo-probe: cannot create output folder '%s': %s\n", o->out_dir, strerror(errno));
        return -1;
    }
    n = snprintf(buf, cap, "%s/%s", o->out_dir, name);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "grzo-probe: output path too long\n");
        return -1;
    }
    return 0;
}

/* path.tmp: where out_open writes until out_close renames it over path */
static int tmp_path_of(const char *path, char *tmp, size_t cap) {
    int n = snprintf(tmp, cap, "%s.tmp", path);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* A file is written under a temporary name and renamed by out_close once every byte is
   out, so that a failed write (a full disk, a file size limit) leaves the previous file,
   not a truncated one. */
FILE *out_open(const probe_opts *o, const char *name, char *path, size_t cap) {
    char tmp[OUT_PATH_MAX + 8], err[OUT_PATH_MAX + 64];
    FILE *f;
    if (out_path(o, name, path, cap) != 0) return NULL;
    if (tmp_path_of(path, tmp, sizeof tmp) != 0) {
        fprintf(stderr, "grzo-probe: output path too long\n");
        return NULL;
    }
    f = file_open_temp(tmp, err, sizeof err);   /* files.h: never through a link at tmp */
    if (!f) fprintf(stderr, "grzo-probe: %s\n", err);
    return f;
}

int out_close(FILE *f, const char *path) {
    char tmp[OUT_PATH_MAX + 8], err[OUT_PATH_MAX + 64];
    if (tmp_path_of(path, tmp, sizeof tmp) != 0) {   /* out_open refused it already */
        fclose(f);
        return -1;
    }
    if (file_finish_temp(f, tmp, path, err, sizeof err) == 0) return 0;
    fprintf(stderr, "grzo-probe: %s\n", err);
    return -1;
}

/* The script names its PNG "<name>.png"; the copy gnuplot runs, <name>.run.gp (its path into
   run_path), names "<name>.png.tmp" instead, which is renamed only when gnuplot succeeded: a
   failed plot leaves no partial PNG, and the .gp file kept beside the CSV still draws
   <name>.png when run by hand. */
static int write_run_script(const probe_opts *o, const char *name, const char *script, char *run_path, size_t cap) {
    char line[300], run_name[300];
    const char *at;
    FILE *f;
    snprintf(line, sizeof line, "set output '%s.png'\n", name);
    snprintf(run_name, sizeof run_name, "%s.run.gp", name);
    at = strstr(script, line);
    if (!at) {
        fprintf(stderr, "grzo-probe: the %s plot script does not set its output to %s.png\n", name, name);
        return -1;
    }
    f = out_open(o, run_name, run_path, cap);
    if (!f) return -1;
    fprintf(f, "%.*sset output '%s.png.tmp'\n%s", (int)(at - script), script, name, at + strlen(line));
    return out_close(f, run_path);
}

/* gnuplot runs in the output folder on the script's fixed name, without a shell, so the
   folder's name never passes through a command line (gnuplot_run.h). */
int run_gnuplot(const probe_opts *o, const char *name, const char *script) {
    char file[300], gp_path[OUT_PATH_MAX], run_path[OUT_PATH_MAX], png[OUT_PATH_MAX], png_tmp[OUT_PATH_MAX + 8],
        err[1400];
    FILE *f;
    int rc;
    if (!o->plot) return 1;
    snprintf(file, sizeof file, "%s.gp", name);
    f = out_open(o, file, gp_path, sizeof gp_path);
    if (!f) return -1;
    fprintf(f, "%s", script);
    if (out_close(f, gp_path) != 0) return -1;
    snprintf(file, sizeof file, "%s.png", name);
    if (out_path(o, file, png, sizeof png) != 0 || tmp_path_of(png, png_tmp, sizeof png_tmp) != 0 ||
        write_run_script(o, name, script, run_path, sizeof run_path) != 0)
        return -1;
    /* the PNG's temporary made here, exclusively, for gnuplot to write into */
    if (!(f = file_open_temp(png_tmp, err, sizeof err))) {
        remove(run_path);
        fprintf(stderr, "grzo-probe: %s\n", err);
        return -1;
    }
    fclose(f);
    snprintf(file, sizeof file, "%s.run.gp", name);
    rc = gnuplot_run(o->out_dir, file, err, sizeof err);
    remove(run_path);
    if (rc == 0 && file_finish_temp(NULL, png_tmp, png, err, sizeof err) != 0) rc = -1;
    if (rc != 0) remove(png_tmp);
    if (rc == 1) printf("(gnuplot not found: %s.png not drawn)\n", name);
    else if (rc != 0) fprintf(stderr, "grzo-probe: %s\n", err);
    else printf("PNG: %s\n", png);
    return rc;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *estimator_label(grzo_estimator e) {
    switch (e) {
    case GRZO_ESTIMATOR_DEFAULT:
    case GRZO_ESTIMATOR_GRZO: return "GRZO";
    case GRZO_ESTIMATOR_CANONICAL: return "canonical";
    case GRZO_ESTIMATOR_SHARED: return "shared";
    case GRZO_ESTIMATOR_MEZO: return "MeZO";
    case GRZO_ESTIMATOR_FZOO: return "FZOO";
    default: return "?";
    }
}
