/* run_files.h - the files of a grzo-finetune run, in --out unless --log or --checkpoint put
   them elsewhere: run.json (the settings --resume compares and reuses), the checkpoint, the
   log, indices.txt, results.json, predictions.jsonl and loss.png. Functions that can fail
   return 0 or -1 with one line in err. */
#ifndef GRZO_FINETUNE_RUN_FILES_H
#define GRZO_FINETUNE_RUN_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "finetune_internal.h"

char *path_join(const char *dir, const char *name);   /* malloc'd "dir/name"; NULL: out of memory */
int make_paths(run *r, char *err, size_t errlen);
int check_paths(const run *r, char *err, size_t errlen);
int refuse_earlier_run(const run *r, char *err, size_t errlen);
int remove_earlier_run(const run *r, char *err, size_t errlen);
int ensure_dir(const char *dir, char *err, size_t errlen);

int write_manifest(const run *r, char *err, size_t errlen);
int resume_settings(run *r, char *err, size_t errlen);
int check_checkpoint_readable(const char *path, char *err, size_t errlen);
int check_checkpoint_matches(const run *r, char *err, size_t errlen);

int trim_log(const char *path, int64_t step, double *elapsed, char *err, size_t errlen);
void log_line(FILE *f, int64_t step, const grzo_step_report *rep, double elapsed, double dev_acc, double dev_em);
void plot_loss(const run *r);
int write_results(const run *r, char *err, size_t errlen);
int write_predictions(const run *r, char *err, size_t errlen);

#endif
