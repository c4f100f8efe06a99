/* run_files.h - the files of a grzo-finetune run, in --out unless --log or --checkpoint put
   them elsewhere: run.json (the settings --resume compares and reuses), the checkpoint, the
   log, indices.txt, results.json, predictions.jsonl and loss.png. Functions that can fail
   return 0 or -1 with one line in err; those that check the command line before anything
   is written (make_paths_absolute to refuse_earlier_run, resume_settings) tell a wrong
   command line (RUN_REFUSED: grzo-finetune exits 2) from a failure of the system
   (RUN_FAILED: no memory, a file that cannot be read; exit 1). */
#ifndef GRZO_FINETUNE_RUN_FILES_H
#define GRZO_FINETUNE_RUN_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "finetune_internal.h"

#define RUN_REFUSED (-1)
#define RUN_FAILED (-2)

char *path_join(const char *dir, const char *name);   /* malloc'd "dir/name"; NULL: out of memory */
int make_paths_absolute(run *r, char *err, size_t errlen);   /* the recorded paths, before make_paths */
int make_paths(run *r, char *err, size_t errlen);
int check_paths(const run *r, char *err, size_t errlen);
int refuse_earlier_run(const run *r, char *err, size_t errlen);

/* A new run's start: --out, the folders' check, the earlier run's files (--overwrite); and
   its undoing when it fails before its first checkpoint. */
int make_out_dir(run *r, char *err, size_t errlen);
int check_folders_writable(const run *r, char *err, size_t errlen);
int remove_earlier_run(const run *r, char *err, size_t errlen);
void remove_unsaved_run(const run *r);

int identify_inputs(run *r, char *err, size_t errlen);
int write_manifest(const run *r, char *err, size_t errlen);
int resume_settings(run *r, char *err, size_t errlen);
int check_checkpoint_readable(const char *path, char *err, size_t errlen);
int check_checkpoint_matches(const run *r, char *err, size_t errlen);
int check_checkpoint_is_the_runs(run *r, char *err, size_t errlen);
int record_save_begin(run *r, char *err, size_t errlen);
int record_save_done(run *r, char *err, size_t errlen);

int trim_log(const char *path, int64_t step, double *elapsed, char *err, size_t errlen);
int log_line(FILE *f, const char *path, int64_t step, const grzo_step_report *rep, double elapsed, double dev_acc, double dev_em,
             char *err, size_t errlen);
int log_flushed(FILE *f, const char *path, char *err, size_t errlen);
int log_close(FILE *f, const char *path, char *err, size_t errlen);
void plot_loss(const run *r);
int write_results(const run *r, char *err, size_t errlen);
int write_predictions(const run *r, char *err, size_t errlen);

#endif
