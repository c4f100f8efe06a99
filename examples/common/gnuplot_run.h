/* gnuplot_run.h - runs gnuplot on a script file without a shell, for grzo-finetune and
   grzo-probe. Header-only: include it in the one file that plots.

   No user text ever reaches a shell: gnuplot is found on PATH by execvp and started in
   the folder `dir` (the plots' output folder) with the script's file name as its only
   argument, so the script can name its files relative to that folder, by fixed names.
   script_name must be such a fixed, relative name that does not start with '-'.

   Returns 0 when gnuplot ran and exited 0, 1 when gnuplot is not installed (not on
   PATH), -1 on any other failure, with one line in err. */
#ifndef GRZO_GNUPLOT_RUN_H
#define GRZO_GNUPLOT_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int gnuplot_run(const char *dir, const char *script_name, char *err, size_t errlen) {
    char *argv[3];
    int report[2], child_errno = 0, status = 0, chdir_failed = 0;
    ssize_t got;
    pid_t pid;
    argv[0] = (char *)"gnuplot";
    argv[1] = (char *)script_name;
    argv[2] = NULL;
    /* the child reports a failed chdir/exec through this pipe; a successful exec closes it */
    if (pipe(report) != 0) { snprintf(err, errlen, "cannot start gnuplot: %s", strerror(errno)); return -1; }
    fcntl(report[1], F_SETFD, FD_CLOEXEC);
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot start gnuplot: %s", strerror(errno));
        close(report[0]); close(report[1]);
        return -1;
    }
    if (pid == 0) {   /* the child: only async-signal-safe calls until exec */
        int e, tag = 0;
        close(report[0]);
        if (chdir(dir) != 0) tag = 1;
        else execvp("gnuplot", argv);
        e = errno;
        if (write(report[1], &tag, sizeof tag) != (ssize_t)sizeof tag || write(report[1], &e, sizeof e) < 0) {}
        _exit(127);
    }
    close(report[1]);
    got = read(report[0], &chdir_failed, sizeof chdir_failed);
    if (got == (ssize_t)sizeof chdir_failed && read(report[0], &child_errno, sizeof child_errno) != (ssize_t)sizeof child_errno)
        child_errno = EIO;
    close(report[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (got == (ssize_t)sizeof chdir_failed) {
        if (!chdir_failed && (child_errno == ENOENT || child_errno == ENOTDIR)) return 1;
        snprintf(err, errlen, "cannot run gnuplot%s%s: %s", chdir_failed ? " in " : "", chdir_failed ? dir : "", strerror(child_errno));
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, errlen, "gnuplot failed on %s/%s (%s %d)", dir, script_name,
                 WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return -1;
    }
    return 0;
}

#endif /* GRZO_GNUPLOT_RUN_H */
