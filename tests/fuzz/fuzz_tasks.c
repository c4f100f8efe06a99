/* fuzz_tasks.c - fuzz target for grzo-finetune's task readers (examples/finetune/tasks.h):
   the GLUE / LM-BFF tsv and csv readers, the SuperGLUE jsonl readers, the SQuAD and DROP
   whole-file JSON readers (and through them the JSON parser) with the QA scorers
   (qa_score.h), and the indices file reader.

   Input: one selector byte, then the file's bytes. The selector picks a (task, file
   extension) pair that tasks_load reads, or the indices reader (see READERS below).
     - data files: the bytes are written to a scratch file with that extension and loaded
       as both the train and the validation file (4 train, 1 dev, 4 test examples). A
       refused file must leave a message and an empty set; a loaded set must hold valid
       examples (gold in range, text = context + continuation, sizes that add up; a QA
       example's gold answers, id, and scores in [0, 1] for its own answer (an exact match
       for SQuAD) and for its context as predictions), its
       indices must round-trip (tasks_write_indices, tasks_read_indices, tasks_load_ex with
       them gives the same examples);
     - indices: the bytes go to tasks_read_indices; what it accepts must hold as many
       readable indices per split as it says, no more than its file's pool (whether each
       index is in range is tasks_load_ex's check, which the round trip above exercises).
   A violated invariant calls abort().

   Two builds:
     libFuzzer:  tests/fuzz/fuzz.sh tasks [SECONDS]
     plain:      fuzz_tasks [--runs N] [--seed S] CORPUS_DIR... (tests/fuzz/fuzz_driver.h)
   The seeds in tests/fuzz/corpus/tasks are the sample files of tests/data/tasks behind
   their selector byte, and one indices file. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_driver.h"
#include "tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
    const char *task, *ext;   /* task NULL: the indices reader */
} READERS[] = {
    {"SST-2", "tsv"},   {"SST-5", "csv"}, {"SST-5", "tsv"}, {"TREC", "csv"},  {"TREC", "tsv"},
    {"MNLI", "tsv"},    {"SNLI", "tsv"},  {"RTE", "jsonl"}, {"RTE", "tsv"},   {"CB", "jsonl"},
    {"BoolQ", "jsonl"}, {"WiC", "jsonl"}, {"WSC", "jsonl"}, {"MultiRC", "jsonl"}, {"COPA", "jsonl"},
    {NULL, "txt"},
    {"SQuAD", "json"},  {"DROP", "json"},   /* after the indices reader: older seeds keep their selector */
};
enum { N_READERS = (int)(sizeof READERS / sizeof READERS[0]) };

static volatile size_t sink;

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tasks: invariant violated: %s\n", what);
        abort();
    }
}

/* A per-process scratch file: libFuzzer's -fork and -jobs run several processes at once. */
static void scratch_path(char *buf, size_t n, const char *name)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/grzo-fuzz-tasks-%ld-%s", dir && dir[0] ? dir : "/tmp", (long)getpid(), name);
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    require(f != NULL && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write the scratch file");
}

/* A generation task's example: its golds are well formed and score in range. */
static void check_qa_example(const tasks_set *set, const tasks_example *e)
{
    double em = -1, f1 = -1;
    int i, k;
    require(e->n_answers >= 1 && e->answers != NULL && e->id != NULL && e->n_candidates == 1, "QA example");
    for (i = 0; i < e->n_answers; i++) {
        require(e->answers[i].n_spans >= 1 && e->answers[i].spans != NULL, "an answer without spans");
        for (k = 0; k < e->answers[i].n_spans; k++) sink += strlen(e->answers[i].spans[k]);
    }
    require(tasks_score_prediction(set->task, e, e->answers[0].spans[0], &em, &f1) == 0, "scoring the gold answer");
    require(em >= 0 && em <= 1 && f1 >= 0 && f1 <= 1, "score out of range");
    require(set->task->metric != TASKS_METRIC_SQUAD || em == 1, "SQuAD: the gold answer is not an exact match of itself");
    require(tasks_score_prediction(set->task, e, e->context, &em, &f1) == 0, "scoring the context");
    require(em >= 0 && em <= 1 && f1 >= 0 && f1 <= 1, "score out of range");
}

static void check_example(const tasks_set *set, const tasks_example *e)
{
    int k;
    if (set->task->metric != TASKS_METRIC_ACCURACY) check_qa_example(set, e);
    require(e->n_candidates >= 1 && e->n_candidates <= TASKS_MAX_CANDIDATES, "candidate count");
    require(e->gold >= 0 && e->gold < e->n_candidates, "gold index out of range");
    require(e->context != NULL && (set->task->metric == TASKS_METRIC_ACCURACY ? e->source_line >= 1 : e->source_line == 0),
            "context or line (a whole-file JSON document has none)");
    for (k = 0; k < e->n_candidates; k++) {
        const tasks_candidate *c = &e->cand[k];
        require(c->text && c->continuation && c->context == e->context, "candidate strings");
        require(c->context_len == strlen(e->context) && strncmp(c->text, e->context, c->context_len) == 0,
                "text does not start with the context");
        require(c->continuation == c->text + c->context_len, "continuation is not the text after the context");
    }
}

static void check_set(const tasks_set *set)
{
    int s;
    for (s = 0; s < 3; s++) {
        const tasks_split *sp = tasks_set_split(set, s);
        size_t i;
        require(sp != NULL && (sp->n == 0 || sp->ex != NULL), "split");
        for (i = 0; i < sp->n; i++) {
            check_example(set, &sp->ex[i]);
            require(sp->ex[i].source_index < set->pool[s == TASKS_DEV && set->dev_from_train ? TASKS_TRAIN : s],
                    "source index outside its file");
        }
    }
}

static int same_examples(const tasks_set *a, const tasks_set *b)
{
    int s;
    for (s = 0; s < 3; s++) {
        const tasks_split *x = tasks_set_split(a, s), *y = tasks_set_split(b, s);
        size_t i;
        if (x->n != y->n) return 0;
        for (i = 0; i < x->n; i++)
            if (x->ex[i].source_index != y->ex[i].source_index || x->ex[i].gold != y->ex[i].gold ||
                strcmp(x->ex[i].cand[0].text, y->ex[i].cand[0].text) != 0)
                return 0;
    }
    return 1;
}

/* Written indices must read back and select the same examples. */
static void check_indices_round_trip(const char *task, const char *path, const tasks_set *set)
{
    char ipath[512], err[512];
    tasks_indices idx;
    tasks_load_desc d;
    tasks_set again;
    scratch_path(ipath, sizeof ipath, "indices.txt");
    require(tasks_write_indices(ipath, set, err, sizeof err) == 0, "tasks_write_indices failed on a loaded set");
    require(tasks_read_indices(ipath, &idx, err, sizeof err) == 0, "written indices do not read back");
    memset(&d, 0, sizeof d);
    d.task = task;
    d.train_path = path;
    d.test_path = path;
    d.n_train = d.n_dev = d.n_test = -1;
    d.indices = &idx;
    require(tasks_load_ex(&d, &again, err, sizeof err) == 0, "the set does not load again from its indices");
    require(same_examples(set, &again), "the indices select other examples");
    tasks_free(&again);
    tasks_free_indices(&idx);
    remove(ipath);
}

static void fuzz_data_file(const char *task, const char *ext, const uint8_t *p, size_t n)
{
    char path[512], name[32], err[512];
    tasks_set set;
    snprintf(name, sizeof name, "data.%s", ext);
    scratch_path(path, sizeof path, name);
    write_file(path, p, n);
    err[0] = '\0';
    if (tasks_load(task, path, path, 1, 4, 1, 4, &set, err, sizeof err) == 0) {
        check_set(&set);
        check_indices_round_trip(task, path, &set);
        tasks_free(&set);
    } else {
        require(err[0] != '\0', "a refused file left no message");
        require(set.arena == NULL && set.train.ex == NULL && set.test.ex == NULL, "a refused file left a set");
    }
    remove(path);
}

static void fuzz_indices_file(const uint8_t *p, size_t n)
{
    char path[512], err[512];
    tasks_indices idx;
    int s;
    scratch_path(path, sizeof path, "indices.txt");
    write_file(path, p, n);
    err[0] = '\0';
    if (tasks_read_indices(path, &idx, err, sizeof err) == 0) {
        for (s = 0; s < 3; s++) {
            size_t i, pool = idx.pool[s == TASKS_DEV && idx.dev_from_train ? TASKS_TRAIN : s];
            require(idx.n[s] <= pool && (idx.n[s] == 0 || idx.idx[s] != NULL), "split count");
            for (i = 0; i < idx.n[s]; i++) sink += idx.idx[s][i];   /* every index is readable */
        }
        tasks_free_indices(&idx);
    } else {
        require(err[0] != '\0', "refused indices left no message");
    }
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int r;
    if (size < 1) return 0;
    r = data[0] % N_READERS;
    if (READERS[r].task) fuzz_data_file(READERS[r].task, READERS[r].ext, data + 1, size - 1);
    else fuzz_indices_file(data + 1, size - 1);
    return 0;
}

#ifndef FUZZ_WITH_LIBFUZZER
int main(int argc, char **argv)
{
    return fuzz_main(argc, argv, "fuzz_tasks", NULL);
}
#endif
