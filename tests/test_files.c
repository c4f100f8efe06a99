/* test_files.c - examples/common/files.h, how the programs write their files:
     - a symbolic link at PATH.tmp (someone's, in a shared folder) is never written through:
       the file it points to is unchanged, PATH gets the new contents;
     - a stale PATH.tmp (a killed run's) is replaced; a folder there fails with its name;
     - a failed or abandoned write leaves PATH as it was and no temporary, and a write that
       failed (a file size limit) is reported with its reason;
     - a file written by another program into the temporary (gnuplot) is renamed into place;
     - file_create_new refuses any name already there, a link included. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"

static int failures, checks;
#define CHECK(c)                                                                              \
    do {                                                                                      \
        checks++;                                                                             \
        if (!(c)) {                                                                           \
            failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);             \
        }                                                                                     \
    } while (0)

static char dir[256];

static void at(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "test_files: cannot write %s\n", path);
        exit(1);
    }
}

/* the file's whole contents is text */
static int holds(const char *path, const char *text) {
    char buf[256];
    size_t n;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, text) == 0;
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void test_link_not_followed(void) {
    char path[300], tmp[300], victim[300], err[512];
    file_out o;
    at(path, sizeof path, "a.json");
    at(tmp, sizeof tmp, "a.json.tmp");
    at(victim, sizeof victim, "victim");
    put(victim, "precious");
    CHECK(symlink(victim, tmp) == 0);
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    fputs("new", o.f);
    CHECK(file_out_commit(&o, err, sizeof err) == 0);
    CHECK(holds(victim, "precious"));
    CHECK(holds(path, "new"));
    CHECK(!exists(tmp));
}

static void test_stale_and_folder(void) {
    char path[300], tmp[300], err[512];
    file_out o;
    at(path, sizeof path, "b.txt");
    at(tmp, sizeof tmp, "b.txt.tmp");
    put(path, "old");
    put(tmp, "stale");
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    fputs("new", o.f);
    CHECK(file_out_commit(&o, err, sizeof err) == 0);
    CHECK(holds(path, "new"));
    CHECK(!exists(tmp));
    CHECK(mkdir(tmp, 0700) == 0);
    err[0] = 0;
    CHECK(file_out_begin(&o, path, err, sizeof err) != 0);
    CHECK(strstr(err, tmp) != NULL && strstr(err, strerror(EISDIR)) != NULL);
    CHECK(holds(path, "new"));
    rmdir(tmp);
}

static void test_abandon_and_failure(void) {
    char path[300], tmp[300], err[512], missing[300];
    file_out o;
    at(path, sizeof path, "c.txt");
    at(tmp, sizeof tmp, "c.txt.tmp");
    put(path, "old");
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    fputs("half", o.f);
    file_out_abandon(&o);
    file_out_abandon(&o);   /* twice: nothing */
    CHECK(holds(path, "old") && !exists(tmp));
    at(missing, sizeof missing, "no-such-folder/d.txt");
    CHECK(file_out_begin(&o, missing, err, sizeof err) != 0);
    CHECK(strstr(err, strerror(ENOENT)) != NULL);
    /* the rename fails (a folder at the path): the temporary goes, the folder stays */
    CHECK(mkdir(missing, 0700) != 0);   /* its parent is missing */
    at(missing, sizeof missing, "e-dir");
    CHECK(mkdir(missing, 0700) == 0);
    {
        char sub[320];
        snprintf(sub, sizeof sub, "%s/x", missing);
        put(sub, "x");   /* not empty: a rename over it fails */
        CHECK(file_out_begin(&o, missing, err, sizeof err) == 0);
        fputs("new", o.f);
        CHECK(file_out_commit(&o, err, sizeof err) != 0);
        CHECK(strstr(err, missing) != NULL);
        snprintf(sub, sizeof sub, "%s.tmp", missing);
        CHECK(!exists(sub));
        snprintf(sub, sizeof sub, "%s/x", missing);
        CHECK(holds(sub, "x"));
        remove(sub);
        rmdir(missing);
    }
}

/* another program writes the temporary (as gnuplot writes the PNG) */
static void test_written_elsewhere(void) {
    char path[300], tmp[300], err[512];
    file_out o = {0};
    at(path, sizeof path, "p.png");
    at(tmp, sizeof tmp, "p.png.tmp");
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    CHECK(file_out_close_temp(&o, err, sizeof err) == 0);
    CHECK(exists(tmp) && o.f == NULL);
    put(tmp, "image");
    CHECK(file_out_commit(&o, err, sizeof err) == 0);
    CHECK(holds(path, "image") && !exists(tmp));
    file_out_abandon(&o);   /* after a commit: nothing */
    CHECK(holds(path, "image"));
}

/* a write that fails (a file size limit) is reported with its reason at the commit, and the
   path keeps its old contents */
static void test_failed_write(void) {
    char path[300], tmp[300], err[512], block[4096];
    struct rlimit old, lim;
    file_out o;
    size_t i;
    at(path, sizeof path, "big.txt");
    at(tmp, sizeof tmp, "big.txt.tmp");
    put(path, "old");
    memset(block, 'x', sizeof block);
    signal(SIGXFSZ, SIG_IGN);
    if (getrlimit(RLIMIT_FSIZE, &old) != 0) return;
    lim = old;
    lim.rlim_cur = 10000;
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return;
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    setvbuf(o.f, NULL, _IONBF, 0);   /* the failure at the write, nothing left for the flush */
    for (i = 0; i < 8; i++) fwrite(block, 1, sizeof block, o.f);
    err[0] = 0;
    CHECK(file_out_commit(&o, err, sizeof err) != 0);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(strstr(err, strerror(EFBIG)) != NULL);
    CHECK(holds(path, "old") && !exists(tmp));
}

static void test_create_new(void) {
    char path[300], target[300], err[512];
    FILE *f;
    at(path, sizeof path, "log.jsonl");
    at(target, sizeof target, "log-target");
    put(target, "precious");
    CHECK(symlink(target, path) == 0);
    err[0] = 0;
    CHECK(file_create_new(path, err, sizeof err) == NULL);
    CHECK(strstr(err, path) != NULL && strstr(err, strerror(EEXIST)) != NULL);
    CHECK(holds(target, "precious"));
    remove(path);
    f = file_create_new(path, err, sizeof err);
    CHECK(f != NULL);
    if (f) {
        fputs("{}\n", f);
        fclose(f);
    }
    CHECK(holds(path, "{}\n"));
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/grzo_test_files_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "test_files: cannot make a folder in %s\n", base && *base ? base : "/tmp");
        return 1;
    }
    test_link_not_followed();
    test_stale_and_folder();
    test_abandon_and_failure();
    test_written_elsewhere();
    test_failed_write();
    test_create_new();
    {
        static const char *const names[] = {"a.json", "a.json.tmp", "victim", "b.txt", "c.txt", "p.png", "big.txt", "log.jsonl", "log-target"};
        size_t i;
        char p[300];
        for (i = 0; i < sizeof names / sizeof names[0]; i++) {
            at(p, sizeof p, names[i]);
            remove(p);
        }
        rmdir(dir);
    }
    if (failures) fprintf(stderr, "test_files: FAIL (%d of %d checks failed)\n", failures, checks);
    else printf("test_files: PASS (%d checks)\n", checks);
    return failures != 0;
}
