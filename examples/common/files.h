/* files.h - writing a file whole or not at all, the one way the programs do it.

   file_out_begin writes to "PATH.tmp": whatever is at that name is removed first (a stale
   temporary of a killed run; a folder there makes the write fail), then the file is created
   with O_CREAT | O_EXCL and mode 0666 (the umask applies, as to any file the program
   creates). Exclusive creation means it is never opened through a symbolic link: in a
   shared folder such as /tmp, a link someone put at that predictable name would otherwise
   make the program overwrite the file the link points to (one made again between the
   removal and the creation makes the creation fail). grzo_checkpoint_save does the same.
   file_out_commit flushes, fsyncs and closes it, renames it over PATH and syncs the folder,
   so a crash or a full disk leaves the old file or the new one, never half of one.

   Every function that can fail returns 0, or -1 with a one-line reason in err (naming the
   path). A write that failed earlier (its FILE's error flag) is reported at the commit with
   errno's reason: the temporary's creation leaves errno 0, so the reason is the write's. */
#ifndef GRZO_FILES_H
#define GRZO_FILES_H

#include <stddef.h>
#include <stdio.h>

typedef struct file_out {
    FILE *f;          /* write here; NULL once closed (file_out_close_temp) */
    char *tmp;        /* the temporary's path (malloc'd) */
    char *path;       /* the file's path (malloc'd copy) */
} file_out;

/* Creates the temporary and opens it for writing ("wb"). */
int file_out_begin(file_out *o, const char *path, char *err, size_t errlen);
/* For a file another program writes (gnuplot's PNG): closes the temporary, which stays
   created and empty at o->tmp; file_out_commit then renames what was written there. */
int file_out_close_temp(file_out *o, char *err, size_t errlen);
/* Flushes, fsyncs, closes, renames over the path and syncs its folder. On failure the
   temporary is removed and the path is as it was. Frees o's names either way. */
int file_out_commit(file_out *o, char *err, size_t errlen);
/* Closes and removes the temporary (a write that failed or was abandoned); the path is as it
   was. Safe on a zeroed or already finished file_out. */
void file_out_abandon(file_out *o);

/* The two halves of the above for a caller that keeps its own names (tmp is path + ".tmp"):
   file_open_temp removes what is at tmp and creates it exclusively ("wb");
   file_finish_temp flushes, fsyncs and closes f (NULL: written by another program, synced
   by name), renames tmp over path and syncs the folder, removing tmp on failure. */
FILE *file_open_temp(const char *tmp, char *err, size_t errlen);
int file_finish_temp(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);

/* Syncs the folder that holds path, so a rename or a new file in it survives a crash. Best
   effort: a file system that cannot sync a folder keeps it in its own time. */
void file_sync_folder(const char *path);
/* The folder that holds path, as file_sync_folder opens it (malloc'd; NULL out of memory):
   the path up to its last slash with the slashes before the name dropped ("a//b" -> "a"),
   "/" for a name at the root, "." for a bare name. */
char *file_folder(const char *path);

/* Creates a new file for appending, refusing any name already there (a file or a link):
   for a log that a run starts afresh. NULL with err set. */
FILE *file_create_new(const char *path, char *err, size_t errlen);

#endif
