/* files.c - writing a file whole or not at all (files.h). */
#define _POSIX_C_SOURCE 200809L   /* fdopen, fileno, fsync */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void set_err(char *err, size_t errlen, const char *what, const char *path, int e) {
    if (err && errlen) snprintf(err, errlen, "%s '%s': %s", what, path, strerror(e ? e : EIO));
}

static char *copy_text(const char *s) {
    char *p = (char *)malloc(strlen(s) + 1);
    if (p) strcpy(p, s);
    return p;
}

static void free_names(file_out *o) {
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
}

FILE *file_open_temp(const char *tmp, char *err, size_t errlen) {
    FILE *f = NULL;
    int fd, e = 0;
    if (unlink(tmp) != 0 && errno != ENOENT) e = errno;
    else if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666)) < 0) e = errno;
    else if (!(f = fdopen(fd, "wb"))) {
        e = errno;
        close(fd);
        unlink(tmp);
    }
    if (!f) set_err(err, errlen, "cannot create", tmp, e);
    else errno = 0;   /* so that what a failed write sets is what the commit reports */
    return f;
}

/* flushes to the disk and closes: 0 or the errno of the first failure */
static int close_synced(FILE *f) {
    int e = 0;
    if (fflush(f) != 0 || ferror(f)) e = errno ? errno : EIO;
    else if (fsync(fileno(f)) != 0) e = errno;
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    return e;
}

/* what another program wrote at path, synced by name */
static int sync_by_name(const char *path) {
    int fd = open(path, O_RDONLY), e = 0;
    if (fd < 0 || fsync(fd) != 0) e = errno ? errno : EIO;
    if (fd >= 0) close(fd);
    return e;
}

int file_finish_temp(FILE *f, const char *tmp, const char *path, char *err, size_t errlen) {
    int e = f ? close_synced(f) : sync_by_name(tmp);   /* errno as the writes left it (files.h) */
    if (!e && rename(tmp, path) != 0) e = errno ? errno : EIO;
    if (e) {
        set_err(err, errlen, "cannot write", path, e);
        unlink(tmp);
        return -1;
    }
    file_sync_folder(path);
    return 0;
}

int file_out_begin(file_out *o, const char *path, char *err, size_t errlen) {
    size_t cap = strlen(path) + 5;
    o->f = NULL;
    o->tmp = (char *)malloc(cap);
    o->path = copy_text(path);
    if (!o->tmp || !o->path) {
        free_names(o);
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(o->tmp, cap, "%s.tmp", path);
    if (!(o->f = file_open_temp(o->tmp, err, errlen))) {
        free_names(o);
        return -1;
    }
    return 0;
}

int file_out_close_temp(file_out *o, char *err, size_t errlen) {
    int e;
    if (!o->f) return 0;
    e = close_synced(o->f);
    o->f = NULL;
    if (e) {
        set_err(err, errlen, "cannot write", o->tmp, e);
        unlink(o->tmp);
        free_names(o);
        return -1;
    }
    return 0;
}

int file_out_commit(file_out *o, char *err, size_t errlen) {
    int rc;
    if (!o->tmp) {
        if (err && errlen) snprintf(err, errlen, "file_out_commit: no file in progress");
        return -1;
    }
    rc = file_finish_temp(o->f, o->tmp, o->path, err, errlen);
    o->f = NULL;
    free_names(o);
    return rc;
}

void file_out_abandon(file_out *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp) unlink(o->tmp);
    free_names(o);
}

char *file_folder(const char *path) {
    size_t n = strlen(path);
    char *dir;
    while (n > 0 && path[n - 1] != '/') n--;   /* up to the last slash */
    while (n > 1 && path[n - 1] == '/') n--;   /* "dir//file" -> "dir", "/file" -> "/" */
    if (!(dir = (char *)malloc(n + 2))) return NULL;
    if (n == 0) strcpy(dir, ".");
    else { memcpy(dir, path, n); dir[n] = 0; }
    return dir;
}

void file_sync_folder(const char *path) {
    char *dir = file_folder(path);
    int fd;
    if (!dir) return;
    fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

FILE *file_create_new(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    FILE *f;
    if (fd < 0) {
        set_err(err, errlen, "cannot create", path, errno);
        return NULL;
    }
    if (!(f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(path);
        set_err(err, errlen, "cannot create", path, e);
    }
    return f;
}
