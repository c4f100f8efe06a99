/* test_tasks_oom.c - grzo-finetune's task readers and QA scorers when memory runs out,
   each allocation failing in turn.

   Usage: test_tasks_oom <data dir (tests/data/tasks)> <scratch dir>

   Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/finetune/meson.build):
   the allocations of the code compiled into this program (tasks.c, qa_score.c, json.c,
   text.c, files.c; not the C library's own) come to the wrappers of tests/oom_wrap.h, and
   while a run is armed its N-th one fails. For each sample task of tests/data/tasks and N = 1, 2, ... until
   a run needs fewer than N allocations, one run (find the files, load the task, score every
   generation example's made-up prediction, write its indices file, read it back, load again
   from it) must:
     - either succeed with exactly the results of the run where nothing failed (a fingerprint
       of every split's prompts, golds, source positions and skipped rows, and the scores), or
       fail with a message that says "out of memory" (the readers) or -1 (the scorer);
     - never crash, and leave nothing allocated (the ASan copy's leak check);
     - never fail unless an allocation did.
   One more run reads a DROP file written here, whose query_id fills an arena chunk of its own.
   Until this test the readers' ~30 out-of-memory branches and the scorer's had none. */
#include "tasks.h"
#include "qa_score.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../oom_wrap.h"

/* ---- what one run computes --------------------------------------------------------------- */
typedef struct outcome {
    int ok;              /* every stage succeeded */
    const char *stage;   /* the stage that failed */
    char err[1024];      /* its message ("" for the scorer, which returns -1) */
    uint64_t print;      /* fingerprint of the loaded splits, the scores, the reloaded splits */
} outcome;

static uint64_t fingerprint_set(uint64_t h, const tasks_set *set)
{
    int s, c, a, k;
    size_t i;
    for (s = 0; s < 3; s++) {
        const tasks_split *sp = tasks_set_split(set, s);
        h = fnv(h, &sp->n, sizeof sp->n);
        h = fnv(h, &set->pool[s], sizeof set->pool[s]);
        h = fnv(h, &set->hash[s], sizeof set->hash[s]);
        h = fnv(h, &set->skipped[s], sizeof set->skipped[s]);
        for (i = 0; i < sp->n; i++) {
            const tasks_example *ex = &sp->ex[i];
            h = fnv(h, &ex->gold, sizeof ex->gold);
            h = fnv(h, &ex->source_index, sizeof ex->source_index);
            h = fnv(h, &ex->source_line, sizeof ex->source_line);
            h = fnv_str(h, ex->id);
            for (c = 0; c < ex->n_candidates; c++) h = fnv_str(h, ex->cand[c].text);
            for (a = 0; a < ex->n_answers; a++)
                for (k = 0; k < ex->answers[a].n_spans; k++) h = fnv_str(h, ex->answers[a].spans[k]);
        }
    }
    return h;
}

/* A made-up answer for a generation example: its first gold span with an article before it
   and a number after (both normalized away or scored as a token), so EM and F1 vary. */
static int score_split(const tasks_set *set, int which, uint64_t *h)
{
    const tasks_split *sp = tasks_set_split(set, which);
    size_t i;
    for (i = 0; i < sp->n; i++) {
        const tasks_example *ex = &sp->ex[i];
        char pred[512];
        double em = -1, f1 = -1;
        if (!ex->n_answers) continue;
        snprintf(pred, sizeof pred, "The %s, 12", ex->answers[0].n_spans ? ex->answers[0].spans[0] : "");
        if (tasks_score_prediction(set->task, ex, pred, &em, &f1)) return -1;
        *h = fnv(*h, &em, sizeof em);
        *h = fnv(*h, &f1, sizeof f1);
    }
    return 0;
}

static void fail_at(outcome *o, const char *stage) { o->ok = 0; o->stage = stage; }

/* dir: a sample task's folder (found by tasks_resolve_dir); or file: a file that is both
   the train and the validation file */
static void run_once(const char *task, const char *dir, const char *file, const char *indices_path, outcome *o)
{
    tasks_paths paths;
    tasks_set set, again;
    tasks_indices idx;
    tasks_load_desc d;
    int have_paths = 0, have_set = 0, have_again = 0, have_idx = 0;
    memset(o, 0, sizeof *o);
    o->ok = 1;
    o->print = FNV0;
    memset(&d, 0, sizeof d);
    memset(&paths, 0, sizeof paths);
    if (file) paths.train = paths.test = (char *)file;
    else if (tasks_resolve_dir(task, dir, &paths, o->err, sizeof o->err)) { fail_at(o, "resolve"); goto done; }
    else have_paths = 1;
    d.task = task;
    d.train_path = paths.train;
    d.dev_path = paths.dev;
    d.test_path = paths.test;
    d.seed = 7;
    d.n_train = -1;
    d.n_dev = 1;   /* SNLI's sample train file has 2 examples */
    d.n_test = -1;
    if (tasks_load_ex(&d, &set, o->err, sizeof o->err)) { fail_at(o, "load"); goto done; }
    have_set = 1;
    o->print = fingerprint_set(o->print, &set);
    if (score_split(&set, TASKS_TRAIN, &o->print) || score_split(&set, TASKS_TEST, &o->print)) {
        fail_at(o, "score");
        goto done;
    }
    if (tasks_write_indices(indices_path, &set, o->err, sizeof o->err)) { fail_at(o, "write indices"); goto done; }
    if (tasks_read_indices(indices_path, &idx, o->err, sizeof o->err)) { fail_at(o, "read indices"); goto done; }
    have_idx = 1;
    d.indices = &idx;
    if (tasks_load_ex(&d, &again, o->err, sizeof o->err)) { fail_at(o, "load from indices"); goto done; }
    have_again = 1;
    o->print = fingerprint_set(o->print, &again);
done:
    if (have_again) tasks_free(&again);
    if (have_idx) tasks_free_indices(&idx);
    if (have_set) tasks_free(&set);
    if (have_paths) tasks_free_paths(&paths);
}

/* The scorers alone, on inputs the sample tasks do not reach (several DROP spans, numbers,
   Unicode): each call's result folded into *h; -1 when a call fails. */
static int run_scorers(uint64_t *h)
{
    static const char *const drop_gold_a[] = {"1,000 men", "the Franks"}, *const drop_gold_b[] = {"12"};
    static const char *const drop_pred[] = {"The Franks", "1000 men", "ÉLAN — 3.5e1"};
    static const char *const squad_spans[] = {"Ångström unit of the ΣΙΓΜΑ"};
    qa_answer drop_golds[2], squad_gold;
    double em, f1;
    char *norm = NULL, *fixed;
    drop_golds[0].spans = drop_gold_a;
    drop_golds[0].n_spans = 2;
    drop_golds[1].spans = drop_gold_b;
    drop_golds[1].n_spans = 1;
    squad_gold.spans = squad_spans;
    squad_gold.n_spans = 1;
    if (qa_drop_metrics(drop_pred, 3, drop_gold_a, 2, &em, &f1)) return -1;
    *h = fnv(*h, &em, sizeof em);
    *h = fnv(*h, &f1, sizeof f1);
    if (qa_drop_score("the franks 1000 men", drop_golds, 2, &em, &f1)) return -1;
    *h = fnv(*h, &em, sizeof em);
    *h = fnv(*h, &f1, sizeof f1);
    if (qa_squad_score("an ångström unit of the σιγμα!", &squad_gold, 1, &em, &f1)) return -1;
    *h = fnv(*h, &em, sizeof em);
    *h = fnv(*h, &f1, sizeof f1);
    if (qa_drop_normalize("The 1.2e1-th İstanbul's $1,000", &norm)) return -1;
    *h = fnv_str(*h, norm);
    free(norm);
    if (!(fixed = qa_utf8_repair("ok \xff\xc3 \xe2\x82", 9))) return -1;
    *h = fnv_str(*h, fixed);
    free(fixed);
    return 0;
}

/* ---- the runs ------------------------------------------------------------------------------- */
static int failures = 0;

static void report(const char *what, long n, const char *msg)
{
    failures++;
    fprintf(stderr, "FAIL %s, allocation %ld failing: %s\n", what, n, msg);
}

/* Arms the countdown at n (0: nothing fails) and runs one task. */
static void run_task_armed(const char *task, const char *dir, const char *file, const char *ix, long n, outcome *o)
{
    if (n > 0) oom_arm(n, 1);
    run_once(task, dir, file, ix, o);
    oom_disarm();
}

/* Returns how many allocations the run makes. file: NULL for the sample task's folder. */
static long check_task(const char *task, const char *data_dir, const char *file, const char *scratch, const char *prog)
{
    char dir[1024], ix[1024];
    outcome ref, o;
    long n, total;
    snprintf(dir, sizeof dir, "%s/%s", data_dir, task);
    snprintf(ix, sizeof ix, "%s/%s-%s%s.indices", scratch, prog, task, file ? "-file" : "");   /* the ASan copy runs beside this one */
    run_task_armed(task, dir, file, ix, 0, &ref);
    if (!ref.ok) {
        report(task, 0, ref.err);
        return 0;
    }
    /* count them: armed at an index no run reaches */
    oom_arm(0, 1);
    run_once(task, dir, file, ix, &o);
    oom_disarm();
    total = oom.calls;
    for (n = 1; n <= total; n++) {
        run_task_armed(task, dir, file, ix, n, &o);
        if (!oom.failed) {
            report(task, n, "the run made fewer allocations than the count (not deterministic?)");
        } else if (o.ok) {
            if (o.print != ref.print) report(task, n, "succeeded with results other than the run where nothing failed");
        } else if (strcmp(o.stage, "score") != 0 && !strstr(o.err, "out of memory")) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s failed without saying out of memory: %s", o.stage, o.err);
            report(task, n, msg);
        }
    }
    remove(ix);
    return total;
}

static long check_scorers(void)
{
    uint64_t ref = FNV0, h;
    long n, total;
    if (run_scorers(&ref)) {
        report("scorers", 0, "failed with nothing failing");
        return 0;
    }
    oom_arm(0, 1);
    h = FNV0;
    run_scorers(&h);
    oom_disarm();
    total = oom.calls;
    for (n = 1; n <= total; n++) {
        int rc;
        h = FNV0;
        oom_arm(n, 1);
        rc = run_scorers(&h);
        oom_disarm();
        if (!oom.failed) report("scorers", n, "fewer allocations than the count");
        else if (rc == 0 && h != ref) report("scorers", n, "succeeded with other results");
    }
    return total;
}

/* <scratch>/<prog>-drop-long-id.json: three questions; the second has a query_id of 70,000
   bytes and no usable answer (HF "drop" skips it, so nothing scores it); 0, or -1 when it
   cannot be written */
static int write_long_id_drop(const char *scratch, const char *prog, char *path, size_t len)
{
    FILE *f;
    int i, rc;
    snprintf(path, len, "%s/%s-drop-long-id.json", scratch, prog);
    if (!(f = fopen(path, "wb"))) return -1;
    fputs("{\"p1\": {\"passage\": \"Tom has a red ball.\", \"qa_pairs\": [\n"
          "{\"question\": \"What does Tom have?\", \"query_id\": \"q1\", \"answer\": {\"spans\": [\"a red ball\"]}},\n"
          "{\"question\": \"What is it?\", \"query_id\": \"",
          f);
    for (i = 0; i < 7000; i++) fputs("0123456789", f);
    fputs("\", \"answer\": {}},\n{\"question\": \"How many balls?\", \"query_id\": \"q3\", \"answer\": {\"number\": \"1\"}}\n]}}\n", f);
    rc = ferror(f) ? -1 : 0;
    if (fclose(f)) rc = -1;
    return rc;
}

int main(int argc, char **argv)
{
    static const char *const tasks[] = {"SST-2", "SST-5", "TREC", "MNLI", "SNLI", "RTE", "CB", "BoolQ", "WiC",
                                        "WSC", "COPA", "MultiRC", "SQuAD", "DROP"};
    const char *prog;
    size_t i;
    long n;
    if (argc != 3) {
        fprintf(stderr, "usage: test_tasks_oom <tests/data/tasks> <scratch dir>\n");
        return 2;
    }
    prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    for (i = 0; i < sizeof tasks / sizeof tasks[0]; i++) {
        n = check_task(tasks[i], argv[1], NULL, argv[2], prog);
        printf("%-8s %5ld allocations, each failed in turn\n", tasks[i], n);
    }
    /* DROP with a query_id longer than a chunk of the readers' string arena (64 KiB): it fills
       a chunk of its own, so the question's gold answers start the next one, an allocation the
       sample files never make there (a mutation run of tasks.c: that failure returned as
       success lost the question without a word, here as one skipped question fewer) */
    {
        char path[1024];
        if (write_long_id_drop(argv[2], prog, path, sizeof path)) {
            report("DROP, a long query_id", 0, "cannot write its file");
        } else {
            n = check_task("DROP", argv[1], path, argv[2], prog);
            printf("%-8s %5ld allocations, each failed in turn (a query_id of 70,000 bytes)\n", "DROP", n);
            remove(path);
        }
    }
    n = check_scorers();
    printf("scorers  %5ld allocations, each failed in turn\n", n);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
