/* test_files.c - examples/common/files.h, how the programs write their files:
     - a symbolic link at PATH.tmp (someone's, in a shared folder) is never written through:
       the file it points to is unchanged, PATH gets the new contents;
     - a stale PATH.tmp (a killed run's) is replaced; a folder there fails with its name;
     - a failed or abandoned write leaves PATH as it was and no temporary, and a write that
       failed (a file size limit) is reported with its reason;
     - a file written by another program into the temporary (gnuplot) is renamed into place;
     - file_create_new refuses any name already there, a link included;
     - the folder a commit syncs (file_folder), no descriptor left open by a commit, a
       file_out_close_temp twice or failing, a temporary the other program never wrote. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <dirent.h>
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

/* Limits the files this process writes to 10,000 bytes (a write past it fails with EFBIG
   instead of raising SIGXFSZ) and fills block with data to write; 0, or -1 where the limit
   cannot be set. *old is the limit to put back. */
static int limit_file_size(struct rlimit *old, char *block, size_t n) {
    struct rlimit lim;
    memset(block, 'x', n);
    signal(SIGXFSZ, SIG_IGN);
    if (getrlimit(RLIMIT_FSIZE, old) != 0) return -1;
    lim = *old;
    lim.rlim_cur = 10000;
    return setrlimit(RLIMIT_FSIZE, &lim) == 0 ? 0 : -1;
}

/* a write that fails (a file size limit) is reported with its reason at the commit, and the
   path keeps its old contents */
static void test_failed_write(void) {
    char path[300], tmp[300], err[512], block[4096];
    struct rlimit old;
    file_out o;
    size_t i;
    at(path, sizeof path, "big.txt");
    at(tmp, sizeof tmp, "big.txt.tmp");
    put(path, "old");
    if (limit_file_size(&old, block, sizeof block) != 0) return;
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    setvbuf(o.f, NULL, _IONBF, 0);   /* the failure at the write, nothing left for the flush */
    for (i = 0; i < 8; i++) fwrite(block, 1, sizeof block, o.f);
    err[0] = 0;
    CHECK(file_out_commit(&o, err, sizeof err) != 0);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(strstr(err, strerror(EFBIG)) != NULL);
    CHECK(holds(path, "old") && !exists(tmp));
}

/* how many descriptors are open (the entries of /proc/self/fd, its listing's own included),
   -1 where there is no /proc */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* a commit, of a file written here or by another program, leaves no descriptor open (the
   folder's and the temporary's are closed after their fsync) */
static void test_no_descriptor_left(void) {
    char path[300], tmp[300], err[512];
    file_out o;
    int before = open_fds();
    if (before < 0) return;   /* no /proc */
    at(path, sizeof path, "fd.txt");
    at(tmp, sizeof tmp, "fd.txt.tmp");
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    fputs("new", o.f);
    CHECK(file_out_commit(&o, err, sizeof err) == 0);
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    CHECK(file_out_close_temp(&o, err, sizeof err) == 0);
    put(tmp, "image");
    CHECK(file_out_commit(&o, err, sizeof err) == 0);
    CHECK(holds(path, "image"));
    CHECK(open_fds() == before);
}

/* the other program wrote nothing (the temporary is gone): the commit says why, naming the
   path, and leaves the path as it was */
static void test_nothing_written_elsewhere(void) {
    char path[300], tmp[300], err[512];
    file_out o;
    at(path, sizeof path, "r.png");
    at(tmp, sizeof tmp, "r.png.tmp");
    put(path, "old");
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    CHECK(file_out_close_temp(&o, err, sizeof err) == 0);
    CHECK(remove(tmp) == 0);
    err[0] = 0;
    CHECK(file_out_commit(&o, err, sizeof err) == -1);
    CHECK(strstr(err, path) != NULL && strstr(err, strerror(ENOENT)) != NULL);
    CHECK(holds(path, "old") && !exists(tmp));
}

/* the folder file_sync_folder syncs: a wrong one would lose a rename at a crash, unseen */
static void test_folder(void) {
    static const char *const cases[][2] = {
        {"a/b/c.json", "a/b"}, {"dir//file", "dir"}, {"/file", "/"}, {"//file", "/"}, {"file", "."},
        {"./file", "."}, {"/a/b", "/a"}, {"a/", "a"}, {"", "."},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *d = file_folder(cases[i][0]);
        CHECK(d != NULL && strcmp(d, cases[i][1]) == 0);
        if (d && strcmp(d, cases[i][1]) != 0)
            fprintf(stderr, "  file_folder(\"%s\") = \"%s\", want \"%s\"\n", cases[i][0], d, cases[i][1]);
        free(d);
    }
}

/* file_out_close_temp: a second call does nothing; one whose flush fails (a file size
   limit) says why, removes the temporary and leaves the path as it was, and a commit after
   it has no file to commit */
static void test_close_temp(void) {
    char path[300], tmp[300], err[512], block[4096];
    struct rlimit old;
    file_out o;
    size_t i;
    at(path, sizeof path, "q.png");
    at(tmp, sizeof tmp, "q.png.tmp");
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    CHECK(file_out_close_temp(&o, err, sizeof err) == 0);
    CHECK(file_out_close_temp(&o, err, sizeof err) == 0);   /* twice: nothing */
    put(tmp, "image");
    CHECK(file_out_commit(&o, err, sizeof err) == 0);
    CHECK(holds(path, "image") && !exists(tmp));
    if (limit_file_size(&old, block, sizeof block) != 0) return;
    CHECK(file_out_begin(&o, path, err, sizeof err) == 0);
    for (i = 0; i < 8; i++) fwrite(block, 1, sizeof block, o.f);   /* seen at the close: flush or error flag */
    err[0] = 0;
    CHECK(file_out_close_temp(&o, err, sizeof err) == -1);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(strstr(err, tmp) != NULL && strstr(err, strerror(EFBIG)) != NULL);
    CHECK(holds(path, "image") && !exists(tmp));
    err[0] = 0;
    CHECK(file_out_commit(&o, err, sizeof err) == -1);
    CHECK(strcmp(err, "file_out_commit: no file in progress") == 0);
    CHECK(holds(path, "image"));
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

/* the test's folder and whatever the cases left in it (files and empty folders), so that no
   run leaves anything behind in TMPDIR; a folder that will not go is a failed check */
static void remove_folder(void) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[300];
    CHECK(d != NULL);
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        at(p, sizeof p, e->d_name);
        if (remove(p) != 0) fprintf(stderr, "test_files: cannot remove %s: %s\n", p, strerror(errno));
    }
    if (d) closedir(d);
    CHECK(rmdir(dir) == 0);
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
    test_folder();
    test_close_temp();
    test_no_descriptor_left();
    test_nothing_written_elsewhere();
    test_create_new();
    remove_folder();
    if (failures) fprintf(stderr, "test_files: FAIL (%d of %d checks failed)\n", failures, checks);
    else printf("test_files: PASS (%d checks)\n", checks);
    return failures != 0;
}
