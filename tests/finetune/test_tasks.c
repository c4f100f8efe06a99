/* test_tasks.c - tests of the grzo-finetune task-data module (examples/finetune/tasks.c).

   Usage: test_tasks <case> <data dir (tests/data/tasks)> <scratch dir>
   Cases: table, json, templates, sampling, indices, indices_bounds, malformed, resolve, qa_score,
   qa_templates, fields, real_data.
   Exit status: 0 pass, 1 fail, 77 skip (real_data without GRZO_TASKS_DATA).

   The expected prompt strings below were written by hand from MeZO's templates.py /
   utils.py and LM-BFF's templates (see tasks.h), not produced by the code under test. */
#include "tasks.h"
#include "json.h"
#include "qa_score.h"

#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static long checks = 0;
static const char *data_dir = ".";
static const char *scratch_dir = ".";

#define CHECK(cond) check_impl((cond) != 0, __FILE__, __LINE__, #cond, NULL)
#define CHECKF(cond, ...) check_impl((cond) != 0, __FILE__, __LINE__, #cond, __VA_ARGS__)

static void check_impl(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    checks++;
    if (ok) return;
    failures++;
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
    if (fmt) {
        fprintf(stderr, "    ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
}

/* Prints a string with escapes, for failure messages. */
static void show(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

#define CHECK_STR(got, want) check_str((got), (want), __FILE__, __LINE__)
static void check_str(const char *got, const char *want, const char *file, int line)
{
    checks++;
    if (got && strcmp(got, want) == 0) return;
    failures++;
    fprintf(stderr, "%s:%d: string mismatch\n    got:  ", file, line);
    show(stderr, got);
    fprintf(stderr, "\n    want: ");
    show(stderr, want);
    fputc('\n', stderr);
}

static char *path_in(const char *dir, const char *name)
{
    static char buf[8][1024];
    static int slot = 0;
    char *p = buf[slot++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static const char *data(const char *rel) { return path_in(data_dir, rel); }
static const char *scratch(const char *rel) { return path_in(scratch_dir, rel); }

static const tasks_example *find_ex(const tasks_split *sp, size_t source_index)
{
    size_t i;
    for (i = 0; i < sp->n; i++)
        if (sp->ex[i].source_index == source_index) return &sp->ex[i];
    return NULL;
}

/* Checks one rendered example against hand-written expectations: the context, each
   continuation, the gold index, and that text == context + continuation everywhere. */
static void check_example(const tasks_example *e, const char *context, const char *const *conts, int n, int gold,
                          const char *file, int line)
{
    int k;
    checks++;
    if (!e) {
        failures++;
        fprintf(stderr, "%s:%d: example not found\n", file, line);
        return;
    }
    check_str(e->context, context, file, line);
    check_impl(e->n_candidates == n, file, line, "n_candidates", "got %d, want %d", e->n_candidates, n);
    check_impl(e->gold == gold, file, line, "gold", "got %d, want %d", e->gold, gold);
    for (k = 0; k < n && k < e->n_candidates; k++) {
        const tasks_candidate *c = &e->cand[k];
        size_t cl = strlen(context);
        check_str(c->continuation, conts[k], file, line);
        check_impl(c->context == e->context, file, line, "cand.context is the example's context", NULL);
        check_impl(c->context_len == cl, file, line, "context_len", "got %lu", (unsigned long)c->context_len);
        check_impl(strncmp(c->text, context, cl) == 0 && strcmp(c->text + cl, conts[k]) == 0, file, line,
                   "text == context + continuation", NULL);
        check_impl(c->continuation == c->text + c->context_len, file, line, "continuation points into text", NULL);
    }
}

#define EXPECT(e, ctx, gold, ...)                                                                  \
    do {                                                                                           \
        static const char *const conts_[] = {__VA_ARGS__};                                         \
        check_example((e), (ctx), conts_, (int)(sizeof conts_ / sizeof conts_[0]), (gold), __FILE__, \
                      __LINE__);                                                                   \
    } while (0)

/* Loads everything in both files (no dev), so examples can be looked up by file index. */
static int load_all(const char *task, const char *train, const char *val, tasks_set *set)
{
    char err[1024];
    if (tasks_load(task, data(train), data(val), 1, 1000000, 0, 1000000, set, err, sizeof err)) {
        fprintf(stderr, "load %s failed: %s\n", task, err);
        failures++;
        return -1;
    }
    return 0;
}

/* ====================================================================================== */

static void case_table(void)
{
    const char *const *names = tasks_names();
    static const char *const want[] = {"SST-2", "SST-5", "TREC", "MNLI", "SNLI", "RTE", "CB",
                                       "BoolQ", "WiC",   "WSC",  "MultiRC", "COPA", "SQuAD", "DROP"};
    size_t i;
    FILE *f;
    char buf[65536];
    size_t len;
    CHECK(tasks_count() == sizeof want / sizeof want[0]);
    for (i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK_STR(names[i], want[i]);
        CHECK(tasks_find(want[i]) == tasks_info_at(i));
    }
    CHECK(names[tasks_count()] == NULL);
    CHECK(tasks_info_at(tasks_count()) == NULL);
    CHECK(tasks_find("sst2") == tasks_find("SST-2"));
    CHECK(tasks_find("Copa") == tasks_find("COPA"));
    CHECK(tasks_find("multi_rc") == tasks_find("MultiRC"));
    CHECK(tasks_find("WIC") == tasks_find("wic"));
    CHECK(tasks_find("sst-3") == NULL);
    CHECK(tasks_find("") == NULL);
    CHECK(tasks_find(NULL) == NULL);
    for (i = 0; i < tasks_count(); i++) {
        const tasks_info *t = tasks_info_at(i);
        int copa = strcmp(t->name, "COPA") == 0, small = copa || strcmp(t->name, "CB") == 0;
        int qa = strcmp(t->name, "SQuAD") == 0 || strcmp(t->name, "DROP") == 0;
        CHECKF(t->train_on_gold_tokens == (copa || qa), "%s", t->name);
        CHECKF((t->metric != TASKS_METRIC_ACCURACY) == qa, "%s", t->name);
        CHECKF(t->default_train == 1000 && t->default_test == 1000, "%s", t->name);
        CHECKF(t->default_dev == (small ? 100 : 500), "%s", t->name);
        CHECK(t->formats && t->context && t->continuation && t->origin);
    }
    CHECK(tasks_find("CB")->n_candidates == 3);
    CHECK_STR(tasks_find("SST-2")->candidates[0], " terrible");
    CHECK_STR(tasks_find("SST-5")->candidates[2], " okay");
    CHECK_STR(tasks_find("TREC")->candidates[5], "Number");
    CHECK(tasks_find("COPA")->n_candidates == 0);
    CHECK(tasks_find("squad")->metric == TASKS_METRIC_SQUAD && tasks_find("Drop")->metric == TASKS_METRIC_DROP);
    /* the --help table names every task */
    f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    tasks_print_table(f);
    rewind(f);
    len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = '\0';
    fclose(f);
    for (i = 0; i < tasks_count(); i++) CHECKF(strstr(buf, want[i]) != NULL, "%s missing from the table", want[i]);
    /* each task's own block says what its candidates are (a generation task "none", COPA
       the example's choices, the others their list): the phrases alone could come from the
       wrong blocks */
    for (i = 0; i < tasks_count(); i++) {
        const tasks_info *t = tasks_info_at(i);
        char head[64], line[512];
        const char *at, *end;
        snprintf(head, sizeof head, "%s\n  files:", t->name);
        at = strstr(buf, head);
        at = at ? strstr(at, "\n  candidates:   ") : NULL;
        CHECKF(at != NULL, "%s: no candidates line", t->name);
        if (!at) continue;
        at += strlen("\n  candidates:   ");
        end = strchr(at, '\n');
        snprintf(line, sizeof line, "%.*s", end ? (int)(end - at) : 0, at);
        if (t->metric != TASKS_METRIC_ACCURACY) CHECK_STR(line, "none: a generation task");
        else if (strcmp(t->name, "COPA") == 0) CHECK_STR(line, "the example's choices");
        else
            CHECKF(line[0] == '"' && strstr(line, t->candidates[0]) && strstr(line, t->candidates[t->n_candidates - 1]),
                   "%s: candidates \"%s\"", t->name, line);
    }
    CHECK(strstr(buf, "SST-2\n  files:") &&
          strstr(strstr(buf, "SST-2\n  files:"), "\n  candidates:   \" terrible\" | \" great\"\n"));
    CHECK(strstr(buf, "Does this mean that") != NULL);
    /* where users get the QA files */
    CHECK(strstr(buf, "train-v1.1.json") && strstr(buf, "dev-v1.1.json") && strstr(buf, "rajpurkar.github.io/SQuAD-explorer"));
    CHECK(strstr(buf, "drop_dataset_train.json") && strstr(buf, "drop_dataset_dev.json") && strstr(buf, "drop_dataset.zip"));
    /* the free functions take NULL, as free() does (a crash fails the case) */
    tasks_free(NULL);
    tasks_free_indices(NULL);
    tasks_free_paths(NULL);
}

/* ====================================================================================== */

/* text[0..len) in a heap block of exactly len bytes, no NUL after it: the parser must not
   read past len (the ASan copy reports a byte too far) */
static char *exact_copy(const char *text, size_t len)
{
    char *c = (char *)malloc(len ? len : 1);
    if (!c) { fprintf(stderr, "out of memory\n"); exit(1); }
    memcpy(c, text, len);
    return c;
}

static void json_ok(const char *text, json_value *v)
{
    char err[256], *c = exact_copy(text, strlen(text));
    int rc = json_parse(c, strlen(text), v, NULL, err, sizeof err);
    free(c);
    CHECKF(rc == 0, "%s: %s", text, err);
}

static void json_bad(const char *text, size_t len, size_t want_offset, const char *want_msg)
{
    json_value v;
    char err[256] = "", *c = exact_copy(text, len);
    size_t off = 12345;
    int rc = json_parse(c, len, &v, &off, err, sizeof err);
    free(c);
    CHECKF(rc != 0, "accepted: %s", text);
    CHECKF(off == want_offset, "%s: offset %lu, want %lu (%s)", text, (unsigned long)off, (unsigned long)want_offset, err);
    CHECKF(strstr(err, want_msg) != NULL, "%s: message \"%s\" lacks \"%s\"", text, err, want_msg);
    CHECK(v.type == JSON_NULL && v.items == NULL && v.string == NULL);
}

static void case_json(void)
{
    json_value v;
    const json_value *x;
    char deep[600];
    int i;

    json_ok(" {\"a\": [1, -0, 2.5e2, -1.5E-2, 12345678901234567890, true, false, null, {}, []],\n"
            "  \"s\": \"q\\\"b\\\\s\\/ \\b\\f\\n\\r\\t \\u00e9\\u20AC\\ud83d\\ude00 raw\xc3\xa9\xf0\x9f\x98\x80\", "
            "\"e\": \"\"} \r\n",
            &v);
    CHECK(v.type == JSON_OBJECT && v.n == 3);
    x = json_get(&v, "a");
    CHECK(x && x->type == JSON_ARRAY && x->n == 10);
    if (x && x->n == 10) {
        CHECK(x->items[0].type == JSON_NUMBER && x->items[0].is_integer && x->items[0].integer == 1);
        CHECK(x->items[1].is_integer && x->items[1].integer == 0);
        CHECK(!x->items[2].is_integer && x->items[2].number == 250.0);
        CHECK(!x->items[3].is_integer && x->items[3].number == -0.015);
        CHECK(!x->items[4].is_integer && x->items[4].number > 1.2e19); /* does not fit a long long */
        CHECK(x->items[5].type == JSON_TRUE && x->items[6].type == JSON_FALSE);
        CHECK(x->items[7].type == JSON_NULL);
        CHECK(x->items[8].type == JSON_OBJECT && x->items[8].n == 0);
        CHECK(x->items[9].type == JSON_ARRAY && x->items[9].n == 0);
    }
    x = json_get(&v, "s");
    CHECK(x && x->type == JSON_STRING);
    if (x) {
        CHECK_STR(x->string, "q\"b\\s/ \b\f\n\r\t \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 raw\xc3\xa9\xf0\x9f\x98\x80");
        CHECK(x->string_len == strlen(x->string));
    }
    x = json_get(&v, "e");
    CHECK(x && x->type == JSON_STRING && x->string_len == 0 && x->string && x->string[0] == '\0');
    CHECK(json_get(&v, "missing") == NULL);
    CHECK(json_get(json_get(&v, "a"), "x") == NULL);
    json_free(&v);
    CHECK(v.type == JSON_NULL);

    json_ok("\"\\uD834\\uDD1E\"", &v); /* U+1D11E, upper-case hex */
    CHECK_STR(v.string, "\xf0\x9d\x84\x9e");
    json_free(&v);
    json_ok("-9223372036854775808", &v);
    CHECK(v.is_integer && v.integer == (-9223372036854775807LL - 1));
    json_free(&v);
    json_ok("\"\\uD800\\uDC00\"", &v); /* the first pair: U+10000 */
    CHECK_STR(v.string, "\xf0\x90\x80\x80");
    json_free(&v);
    json_ok("2.5", &v);   /* a fraction, an exponent at the text's end */
    CHECK(!v.is_integer && v.number == 2.5);
    json_free(&v);
    json_ok("25e-1", &v);
    CHECK(!v.is_integer && v.number == 2.5);
    json_free(&v);
    {   /* a number longer than the parser's own buffer */
        char big[102];
        big[0] = '1';
        memset(big + 1, '0', 99);
        big[100] = '\0';
        json_ok(big, &v);
        CHECK(v.type == JSON_NUMBER && !v.is_integer && fabs(v.number / 1e99 - 1.0) < 1e-15);
        json_free(&v);
    }

    /* 128 levels are fine, 129 are not */
    for (i = 0; i < 128; i++) deep[i] = '[';
    for (i = 0; i < 128; i++) deep[128 + i] = ']';
    deep[256] = '\0';
    json_ok(deep, &v);
    json_free(&v);
    for (i = 0; i < 129; i++) deep[i] = '[';
    for (i = 0; i < 129; i++) deep[129 + i] = ']';
    deep[258] = '\0';
    json_bad(deep, strlen(deep), 128, "nesting deeper");

    json_bad("", 0, 0, "unexpected end");
    json_bad("   ", 3, 3, "unexpected end");
    json_bad("{\"a\":1,}", 8, 7, "trailing comma");
    json_bad("[1,]", 4, 3, "trailing comma");
    json_bad("[1 2]", 5, 3, "expected ',' or ']'");
    json_bad("[1", 2, 0, "unterminated array");
    json_bad("{", 1, 0, "unterminated object");
    json_bad("\x7f", 1, 0, "0x7F");
    json_bad("\"\x80\"", 3, 1, "invalid UTF-8");
    json_bad("{\"a\" 1}", 7, 5, "expected ':'");
    json_bad("{a:1}", 5, 1, "string key");
    json_bad("{\"a\":1,\"a\":2}", 13, 0, "duplicate key \"a\"");
    json_bad("\"abc", 4, 0, "unterminated string");
    json_bad("\"a\\", 3, 0, "unterminated string");
    json_bad("\"\\x\"", 4, 1, "invalid escape");
    json_bad("\"\\u12\"", 6, 1, "four hex digits");
    json_bad("\"\\u12", 5, 1, "four hex digits");   /* the escape cut by the text's end */
    json_bad("\"\\ud800\"", 8, 1, "unpaired high surrogate");
    json_bad("\"\\ud800\\u0041\"", 14, 1, "unpaired high surrogate");
    json_bad("\"\\udc00\"", 8, 1, "unpaired low surrogate");
    json_bad("\"\\u0000\"", 8, 1, "\\u0000");
    json_bad("\"a\tb\"", 5, 2, "control character 0x09");
    json_bad("\"\xc3\x28\"", 4, 1, "invalid UTF-8");
    json_bad("\"\xe0\x80\xaf\"", 5, 1, "invalid UTF-8");   /* overlong */
    json_bad("\"\xf4\x90\x80\x80\"", 6, 1, "invalid UTF-8"); /* above U+10FFFF */
    json_bad("\"\xed\xb0\x80\"", 5, 1, "invalid UTF-8");   /* encoded surrogate */
    json_bad("\"\xe2\x82\"", 4, 1, "invalid UTF-8");       /* truncated */
    json_bad("01", 2, 0, "leading zeros");
    json_bad("-", 1, 0, "digit must follow '-'");
    json_bad("1.", 2, 0, "digit must follow '.'");
    json_bad("1e+", 3, 0, "exponent");
    json_bad("+1", 2, 0, "unexpected '+'");
    json_bad(".5", 2, 0, "unexpected '.'");
    json_bad("1e999", 5, 0, "out of range");
    json_bad("tru", 3, 0, "expected true");
    json_bad("nul", 3, 0, "expected null");
    json_bad("True", 4, 0, "unexpected 'T'");
    json_bad("{} {}", 5, 3, "after the value");
    json_bad("[1] x", 5, 4, "after the value");
    json_bad("[\"a\"\x00]", 5, 4, "0x00");
    json_bad("{\"a\":[1,2}", 10, 9, "expected ',' or ']'");
    json_bad("[", 1, 1, "unexpected end");
    json_bad("{\"a\":1", 6, 0, "unterminated object");
}

/* ====================================================================================== */

static void case_templates(void)
{
    tasks_set s;

    /* ---- SST-2 (MeZO SST2Template): GLUE sentences end with a space; it is stripped ---- */
    if (load_all("SST-2", "SST-2/train.tsv", "SST-2/dev.tsv", &s) == 0) {
        CHECK(s.pool[TASKS_TRAIN] == 12 && s.pool[TASKS_TEST] == 4 && s.train.n == 12 && s.test.n == 4);
        CHECK(s.train_on_gold_tokens == 0);
        EXPECT(find_ex(&s.train, 0), "hide new secretions from the parental units It was", 0, " terrible", " great");
        EXPECT(find_ex(&s.train, 4), "on the worst revenge-of-the-nerds clich\xc3\xa9s the filmmakers could dredge up It was", 0,
               " terrible", " great");
        EXPECT(find_ex(&s.train, 6),
               "demonstrates that the director of such hollywood blockbusters as patriot games can still turn out a "
               "small , personal film with an emotional wallop . It was",
               1, " terrible", " great");
        EXPECT(find_ex(&s.test, 0), "it 's a charming and often affecting journey . It was", 1, " terrible", " great");
        CHECK_STR(find_ex(&s.test, 1)->cand[1].text, "unflinchingly bleak and desperate It was great");
        CHECK(find_ex(&s.train, 0)->source_line == 2);
        tasks_free(&s);
    }

    /* ---- SST-5 (LM-BFF *cls**sent_0*_It_was*mask*.*sep+*): RFC 4180 quoting ---- */
    if (load_all("SST-5", "SST-5/train.csv", "SST-5/test.csv", &s) == 0) {
        CHECK(s.train.n == 8 && s.test.n == 3);
        EXPECT(find_ex(&s.train, 1),
               "yes , spirited away is a triumph of imagination , but it 's also a failure of storytelling . It was", 1,
               " terrible", " bad", " okay", " good", " great");
        EXPECT(find_ex(&s.train, 5), "the line \" perfect \" fits , twice It was", 2, " terrible", " bad", " okay", " good",
               " great");
        EXPECT(find_ex(&s.train, 6), "a quoted field\nover two lines It was", 4, " terrible", " bad", " okay", " good",
               " great");
        CHECK(find_ex(&s.train, 6)->source_line == 7);
        CHECK(find_ex(&s.train, 7)->source_line == 9); /* after the two-line record */
        EXPECT(find_ex(&s.test, 0),
               "a gob of drivel so sickly sweet , even the eager consumers of moore 's pasteurized ditties will retch "
               "it up like rancid cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e . It was",
               0, " terrible", " bad", " okay", " good", " great");
        EXPECT(find_ex(&s.test, 1), "` how many more voyages can this limping but dearly-loved franchise survive ? ' It was", 2,
               " terrible", " bad", " okay", " good", " great");
        tasks_free(&s);
    }

    /* ---- TREC (LM-BFF *cls**mask*:*+sent_0**sep+*): empty context ---- */
    if (load_all("TREC", "TREC/train.csv", "TREC/test.csv", &s) == 0) {
        EXPECT(find_ex(&s.train, 4), "", 4, "Description: What city in Florida is Sea World in ?",
               "Entity: What city in Florida is Sea World in ?", "Expression: What city in Florida is Sea World in ?",
               "Human: What city in Florida is Sea World in ?", "Location: What city in Florida is Sea World in ?",
               "Number: What city in Florida is Sea World in ?");
        EXPECT(find_ex(&s.test, 1), "", 4, "Description: What county is Modesto , California in ?",
               "Entity: What county is Modesto , California in ?", "Expression: What county is Modesto , California in ?",
               "Human: What county is Modesto , California in ?", "Location: What county is Modesto , California in ?",
               "Number: What county is Modesto , California in ?");
        tasks_free(&s);
    }

    /* ---- MNLI (LM-BFF *cls**sent-_0*?*mask*,*+sentl_1**sep+*): the premise loses its last
       character even when it is a letter (LM-BFF's sent-_0 does exactly that) ---- */
    if (load_all("MNLI", "MNLI/train.tsv", "MNLI/dev_matched.tsv", &s) == 0) {
        CHECK(s.train.n == 4 && s.test.n == 2);
        EXPECT(find_ex(&s.train, 0), "Price caps may sound more attractive with every passing rate case?", 1,
               " No, rate cases make price caps sound more attractive.",
               " Yes, rate cases make price caps sound more attractive.",
               " Maybe, rate cases make price caps sound more attractive.");
        EXPECT(find_ex(&s.train, 1),
               "so i'm not with the same softball team but they're starting up soon so i'll be playing agai?", 1,
               " No, i'm on a different softball team but they'll be starting up again and I will play again soon.",
               " Yes, i'm on a different softball team but they'll be starting up again and I will play again soon.",
               " Maybe, i'm on a different softball team but they'll be starting up again and I will play again soon.");
        CHECK(find_ex(&s.train, 2)->gold == 2); /* neutral */
        EXPECT(find_ex(&s.train, 3),
               "Larry Johnson right well they're just head and shoulders above everybody else this yea?", 0,
               " No, they're doing the worst this year out of everyone in competition with them.",
               " Yes, they're doing the worst this year out of everyone in competition with them.",
               " Maybe, they're doing the worst this year out of everyone in competition with them.");
        tasks_free(&s);
    }

    /* ---- SNLI: gold = the LAST field (LM-BFF line[-1]); the first train row has 15 fields
       whose header-position "gold_label" says contradiction but whose last field says
       neutral; the third row ("-") is skipped ---- */
    if (load_all("SNLI", "SNLI/train.tsv", "SNLI/dev.tsv", &s) == 0) {
        CHECK(s.pool[TASKS_TRAIN] == 2 && s.skipped[TASKS_TRAIN] == 1 && s.pool[TASKS_TEST] == 2);
        EXPECT(find_ex(&s.train, 0),
               "The girl sitting by a rock is wearing a black coat, black hat, black gloves but is covered by a pink "
               "blanket?",
               2, " No, a girl wears black", " Yes, a girl wears black", " Maybe, a girl wears black");
        EXPECT(find_ex(&s.test, 1),
               "A man is wearing orange shorts and a black muscle shirt is using chalk of different colors to draw a "
               "picture on the sidewalk of two women of different racial backgrounds in a symmetrical posing?",
               1, " No, a graffiti artist is using chalk to draw a portrait of two women.",
               " Yes, a graffiti artist is using chalk to draw a portrait of two women.",
               " Maybe, a graffiti artist is using chalk to draw a portrait of two women.");
        tasks_free(&s);
    }

    /* ---- RTE (MeZO RTETemplate): context ends in a newline, candidates have no space ---- */
    if (load_all("RTE", "RTE/train.jsonl", "RTE/bom_crlf.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.train, 0),
               "Yemen, too, was reunified in 1990.\nDoes this mean that \"Yemen was reunited in 1990.\" is true? Yes or No?\n",
               0, "Yes", "No");
        EXPECT(find_ex(&s.train, 1),
               "Oil prices fall back as Yukos oil threat lifted\nDoes this mean that \"Oil prices rise.\" is true? Yes or No?\n",
               1, "Yes", "No");
        /* a UTF-8 byte order mark, CRLF line ends and blank lines are accepted */
        CHECK(s.test.n == 2);
        EXPECT(find_ex(&s.test, 0),
               "A BOM starts this file.\nDoes this mean that \"There is a BOM.\" is true? Yes or No?\n", 0, "Yes", "No");
        EXPECT(find_ex(&s.test, 1),
               "CRLF ends lines here.\nDoes this mean that \"Lines end.\" is true? Yes or No?\n", 1, "Yes", "No");
        CHECK(find_ex(&s.test, 1)->source_line == 4);
        tasks_free(&s);
    }
    /* RTE from GLUE/LM-BFF tsv gives the same prompts as from SuperGLUE jsonl */
    if (load_all("RTE", "RTE/train.jsonl", "RTE/glue_dev.tsv", &s) == 0) {
        CHECK(s.test.n == 2);
        EXPECT(find_ex(&s.test, 0),
               "Yemen, too, was reunified in 1990.\nDoes this mean that \"Yemen was reunited in 1990.\" is true? Yes or No?\n",
               0, "Yes", "No");
        CHECK_STR(find_ex(&s.test, 1)->cand[1].text, find_ex(&s.train, 1)->cand[1].text);
        CHECK(find_ex(&s.test, 1)->gold == 1);
        tasks_free(&s);
    }

    /* ---- CB (MeZO CBTemplate), with JSON escapes decoded to UTF-8 ---- */
    if (load_all("CB", "CB/train.jsonl", "CB/val.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.train, 0),
               "Suppose ``Clever''. Klug means ``clever''. Would you say that Abie was clever? Can we infer that "
               "\"Abie was clever\"? Yes, No, or Maybe?\n",
               2, "Yes", "No", "Maybe");
        EXPECT(find_ex(&s.test, 0),
               "Suppose A: Your turn. B: Okay. Uh, I don't think they should abolish it. Can we infer that \"they should "
               "abolish it\"? Yes, No, or Maybe?\n",
               1, "Yes", "No", "Maybe");
        EXPECT(find_ex(&s.test, 2),
               "Suppose B: She wrote \"caf\xc3\xa9\"\tand \xf0\x9f\x98\x80 on the board/wall, na\xc3\xafve \xe2\x80\x94 or "
               "not. Can we infer that \"she wrote caf\xc3\xa9 \xe2\x80\x93 twice\"? Yes, No, or Maybe?\n",
               2, "Yes", "No", "Maybe");
        tasks_free(&s);
    }

    /* ---- BoolQ (MeZO BoolQTemplateV3): title prefix removed, "?" added, first letter up ---- */
    if (load_all("BoolQ", "BoolQ/fewglue32_train.jsonl", "BoolQ/google_dev.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.train, 0), "The sky is blue on a clear day. Is the sky blue on a clear day?\n", 0, "Yes", "No");
        EXPECT(find_ex(&s.train, 1),
               "Flying fish glide over the water; they do not flap their fins. Can flying fish really fly?\n", 1, "Yes",
               "No");
        EXPECT(find_ex(&s.train, 2), "Lemons are sour -- very sour. Is a lemon -- or a lime -- sour?\n", 0, "Yes", "No");
        /* Google's format (title separate, "answer") */
        EXPECT(find_ex(&s.test, 0),
               "All biomass goes through at least some of these steps: it needs to be grown, collected, dried, "
               "fermented, distilled, and burned. Does ethanol take more energy make that produces?\n",
               1, "Yes", "No");
        tasks_free(&s);
    }
    /* SuperGLUE's copy of the same example renders identically */
    if (load_all("BoolQ", "BoolQ/fewglue32_train.jsonl", "BoolQ/val.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.test, 0),
               "All biomass goes through at least some of these steps: it needs to be grown, collected, dried, "
               "fermented, distilled, and burned. Does ethanol take more energy make that produces?\n",
               1, "Yes", "No");
        tasks_free(&s);
    }
    /* the shortest questions: "?" keeps its one "?", "" becomes "?", "x" becomes "X?" */
    if (load_all("BoolQ", "BoolQ/short_questions.jsonl", "BoolQ/short_questions.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.train, 0), "The sky is blue. ?\n", 0, "Yes", "No");
        EXPECT(find_ex(&s.train, 1), "The sea is blue. ?\n", 1, "Yes", "No");
        EXPECT(find_ex(&s.train, 2), "The sun is hot. X?\n", 0, "Yes", "No");
        tasks_free(&s);
    }

    /* ---- WiC (MeZO WICTemplate) ---- */
    if (load_all("WiC", "WiC/train.jsonl", "WiC/val.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.train, 0),
               "Does the word \"dig\" have the same meaning in these two sentences? Yes, No?\nDig salt.\nDig coal.\n", 1,
               "No", "Yes");
        EXPECT(find_ex(&s.test, 3),
               "Does the word \"shoot\" have the same meaning in these two sentences? Yes, No?\nShoot cloth.\nShoot a star.\n",
               0, "No", "Yes");
        tasks_free(&s);
    }

    /* ---- WSC (MeZO WSCTemplate): the pronoun is lower-cased ---- */
    if (load_all("WSC", "WSC/train.jsonl", "WSC/val.jsonl", &s) == 0) {
        EXPECT(find_ex(&s.train, 0),
               "John hired Bill to take care of him .\nIn the previous sentence, does the pronoun \"him\" refer to Bill? Yes "
               "or No?\n",
               0, "No", "Yes");
        EXPECT(find_ex(&s.train, 2),
               "The fish ate the worm . It was tasty.\nIn the previous sentence, does the pronoun \"it\" refer to The worm? "
               "Yes or No?\n",
               1, "No", "Yes");
        tasks_free(&s);
    }

    /* ---- MultiRC (MeZO MultiRCTemplate): one example per answer, in file order ---- */
    if (load_all("MultiRC", "MultiRC/train.jsonl", "MultiRC/val.jsonl", &s) == 0) {
        CHECK(s.pool[TASKS_TRAIN] == 6 && s.pool[TASKS_TEST] == 2);
        EXPECT(find_ex(&s.train, 1),
               "Tom has a red ball. He gives it to Ann.\nQuestion: What color is the ball?\nI found this answer \"Blue\". "
               "Is that correct? Yes or No?\n",
               0, "No", "Yes");
        EXPECT(find_ex(&s.train, 2),
               "Tom has a red ball. He gives it to Ann.\nQuestion: Who gets the ball?\nI found this answer \"Ann\". "
               "Is that correct? Yes or No?\n",
               1, "No", "Yes");
        EXPECT(find_ex(&s.train, 5),
               "The shop opens at nine.\nIt closes at five.\nQuestion: When does the shop open?\nI found this answer "
               "\"Noon\". Is that correct? Yes or No?\n",
               0, "No", "Yes");
        CHECK(find_ex(&s.train, 5)->source_line == 2);
        EXPECT(find_ex(&s.test, 1),
               "Rain fell all day. The river rose.\nQuestion: Why did the river rise?\nI found this answer \"Because of "
               "\"snow\"\". Is that correct? Yes or No?\n",
               0, "No", "Yes");
        tasks_free(&s);
    }

    /* ---- COPA (MeZO CopaTemplate): " so "/" because " lose their trailing space to the
       assembly's strip(' '), so each choice continuation starts with the space; the first
       word is lower-cased unless it is "I" ---- */
    if (load_all("COPA", "COPA/train.jsonl", "COPA/val.jsonl", &s) == 0) {
        CHECK(s.train_on_gold_tokens == 1);
        EXPECT(find_ex(&s.test, 0), "I coughed because", 0, " I inhaled smoke.", " I lowered my voice.");
        EXPECT(find_ex(&s.test, 1), "The man fainted because", 1, " he took a nap.", " he ran a marathon.");
        EXPECT(find_ex(&s.test, 2), "My closet was messy so", 0, " I organized it.", " I decorated it.");
        EXPECT(find_ex(&s.test, 3), "The door was locked because", 0, " i'm out of keys.", " the Dog barked at it.");
        EXPECT(find_ex(&s.train, 0), "The bar closed because", 1, " it was crowded.", " it was 3 AM.");
        tasks_free(&s);
    }
}

/* ====================================================================================== */

static int same_indices(const tasks_split *a, const tasks_split *b)
{
    size_t i;
    if (a->n != b->n) return 0;
    for (i = 0; i < a->n; i++)
        if (a->ex[i].source_index != b->ex[i].source_index) return 0;
    return 1;
}

/* tasks_describe's text, at most len - 1 bytes of it ("" if no temporary file) */
static void describe_text(const tasks_set *set, char *buf, size_t len)
{
    FILE *f = tmpfile();
    size_t got = 0;
    CHECK(f != NULL);
    if (f) {
        tasks_describe(set, f);
        rewind(f);
        got = fread(buf, 1, len - 1, f);
        fclose(f);
    }
    buf[got] = '\0';
}

static void case_sampling(void)
{
    /* known answers of the documented generator (computed independently in Python) */
    static const size_t kat42[10] = {0, 9, 5, 8, 6, 4, 7, 2, 1, 3};
    static const size_t kat0[10] = {6, 3, 2, 9, 8, 1, 4, 7, 0, 5};
    static const size_t katmax[12] = {3, 2, 4, 11, 7, 9, 5, 10, 0, 1, 6, 8};
    size_t p[12], perm[16], i;
    tasks_set a, b;
    tasks_load_desc d;
    char err[1024];
    uint64_t seed;

    CHECK(tasks_permutation(10, 42, p) == 0 && memcmp(p, kat42, sizeof kat42) == 0);
    CHECK(tasks_permutation(10, 0, p) == 0 && memcmp(p, kat0, sizeof kat0) == 0);
    CHECK(tasks_permutation(12, UINT64_C(0xFFFFFFFFFFFFFFFF), p) == 0 && memcmp(p, katmax, sizeof katmax) == 0);
    CHECK(tasks_permutation(1, 5, p) == 0 && p[0] == 0);
    CHECK(tasks_permutation(0, 5, NULL) == 0);

    /* MeZO's split: one draw of n_train + n_dev from the train file, dev = its last n_dev;
       test = the first n_test of a draw over the validation file, same seed */
    if (tasks_load("SST-2", data("SST-2/train.tsv"), data("SST-2/dev.tsv"), 7, 5, 3, 2, &a, err, sizeof err) == 0) {
        tasks_permutation(12, 7, perm);
        CHECK(a.train.n == 5 && a.dev.n == 3 && a.test.n == 2 && a.dev_from_train == 1);
        for (i = 0; i < 5; i++) CHECK(a.train.ex[i].source_index == perm[i]);
        for (i = 0; i < 3; i++) CHECK(a.dev.ex[i].source_index == perm[5 + i]);
        tasks_permutation(4, 7, perm);
        for (i = 0; i < 2; i++) CHECK(a.test.ex[i].source_index == perm[i]);
        CHECK(a.path[TASKS_DEV] == NULL && a.pool[TASKS_DEV] == 0);
        /* same seed, same everything */
        if (tasks_load("SST-2", data("SST-2/train.tsv"), data("SST-2/dev.tsv"), 7, 5, 3, 2, &b, err, sizeof err) == 0) {
            CHECK(same_indices(&a.train, &b.train) && same_indices(&a.dev, &b.dev) && same_indices(&a.test, &b.test));
            CHECK(strcmp(a.train.ex[0].cand[0].text, b.train.ex[0].cand[0].text) == 0);
            tasks_free(&b);
        } else CHECKF(0, "%s", err);
        /* another seed, another draw */
        if (tasks_load("SST-2", data("SST-2/train.tsv"), data("SST-2/dev.tsv"), 8, 5, 3, 2, &b, err, sizeof err) == 0) {
            CHECK(!same_indices(&a.train, &b.train));
            tasks_free(&b);
        } else CHECKF(0, "%s", err);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);

    /* train and dev are disjoint, for many seeds */
    for (seed = 0; seed < 20; seed++) {
        if (tasks_load("RTE", data("RTE/train.jsonl"), data("RTE/val.jsonl"), seed, 5, 3, 10, &a, err, sizeof err) == 0) {
            size_t j;
            int overlap = 0;
            CHECK(a.train.n == 5 && a.dev.n == 3 && a.test.n == 4);
            for (i = 0; i < a.train.n; i++)
                for (j = 0; j < a.dev.n; j++) overlap |= a.train.ex[i].source_index == a.dev.ex[j].source_index;
            CHECKF(!overlap, "seed %lu", (unsigned long)seed);
            tasks_free(&a);
        } else CHECKF(0, "%s", err);
    }

    /* counts are clipped to what exists; dev keeps its size, train gets the rest (CB: 250
       train -> 150/100 in MeZO; here 6 -> 4/2) */
    if (tasks_load("CB", data("CB/train.jsonl"), data("CB/val.jsonl"), 3, 1000, 2, 1000, &a, err, sizeof err) == 0) {
        CHECK(a.train.n == 4 && a.dev.n == 2 && a.test.n == 3);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);
    /* CB's default dev (100) would take all 6 examples: a clear error, not an empty train */
    CHECK(tasks_load("CB", data("CB/train.jsonl"), data("CB/val.jsonl"), 3, -1, -1, -1, &a, err, sizeof err) != 0);
    CHECKF(strstr(err, "CB/train.jsonl") && strstr(err, "train would be empty"), "%s", err);
    /* defaults: everything when the files are small */
    if (tasks_load("COPA", data("COPA/train.jsonl"), data("COPA/val.jsonl"), 3, -1, 2, -1, &a, err, sizeof err) == 0) {
        CHECK(a.train.n == 6 && a.dev.n == 2 && a.test.n == 4);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);
    /* n_dev = 0: no dev; n_train = 0: evaluation only */
    if (tasks_load("WiC", data("WiC/train.jsonl"), data("WiC/val.jsonl"), 3, 0, 0, 2, &a, err, sizeof err) == 0) {
        CHECK(a.train.n == 0 && a.dev.n == 0 && a.test.n == 2);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);
    /* MultiRC is sampled over answers */
    if (tasks_load("MultiRC", data("MultiRC/train.jsonl"), data("MultiRC/val.jsonl"), 5, 4, 2, 9, &a, err, sizeof err) == 0) {
        CHECK(a.pool[TASKS_TRAIN] == 6 && a.train.n == 4 && a.dev.n == 2 && a.test.n == 2);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);

    /* a separate dev file (LM-BFF k-shot dev.csv): dev drawn from it */
    memset(&d, 0, sizeof d);
    d.task = "SST-5";
    d.train_path = data("SST-5/train.csv");
    d.dev_path = data("SST-5/dev.csv");
    d.test_path = data("SST-5/test.csv");
    d.seed = 11;
    d.n_train = -1;
    d.n_dev = -1;
    d.n_test = -1;
    if (tasks_load_ex(&d, &a, err, sizeof err) == 0) {
        CHECK(a.train.n == 8 && a.dev.n == 2 && a.test.n == 3 && a.dev_from_train == 0);
        CHECK(a.path[TASKS_DEV] && strstr(a.path[TASKS_DEV], "dev.csv") && a.pool[TASKS_DEV] == 2);
        EXPECT(find_ex(&a.dev, 1), "mr. koshashvili is a director to watch . It was", 4, " terrible", " bad", " okay", " good",
               " great"); /* a CRLF file */
        EXPECT(find_ex(&a.dev, 0),
               "the movie resolutely avoids all the comic possibilities of its situation , and becomes one more dumb "
               "high school comedy about sex gags and prom dates . It was",
               0, " terrible", " bad", " okay", " good", " great");
        tasks_free(&a);
    } else CHECKF(0, "%s", err);

    /* the log summary mentions the files and the counts */
    if (tasks_load("CB", data("CB/train.jsonl"), data("CB/val.jsonl"), 3, 4, 2, 3, &a, err, sizeof err) == 0) {
        char buf[4096];
        describe_text(&a, buf, sizeof buf);
        CHECKF(strstr(buf, "task CB (seed 3") && strstr(buf, "CB/train.jsonl (6 examples") &&
                   strstr(buf, "train 4 examples, gold: [0] ") && strstr(buf, "dev   2 examples"),
               "%s", buf);
        tasks_free(&a);
    }
    /* every candidate's gold count, a zero too (CB's test file has no [0], the dev split is
       empty); COPA's candidates come from its examples: the counts that occur */
    if (tasks_load("CB", data("CB/train.jsonl"), data("CB/val.jsonl"), 1, -1, 0, -1, &a, err, sizeof err) == 0) {
        char buf[4096];
        describe_text(&a, buf, sizeof buf);
        CHECKF(strstr(buf, "\n  train 6 examples, gold: [0] 2 [1] 2 [2] 2\n") &&
                   strstr(buf, "\n  dev   0 examples, gold: [0] 0 [1] 0 [2] 0\n") &&
                   strstr(buf, "\n  test  3 examples, gold: [0] 0 [1] 1 [2] 2\n"),
               "%s", buf);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);
    if (tasks_load("COPA", data("COPA/train.jsonl"), data("COPA/val.jsonl"), 1, -1, 0, -1, &a, err, sizeof err) == 0) {
        char buf[4096];
        describe_text(&a, buf, sizeof buf);
        CHECKF(strstr(buf, "\n  train 8 examples, gold: [0] 2 [1] 6\n") && strstr(buf, "\n  dev   0 examples, gold:\n") &&
                   strstr(buf, "\n  test  4 examples, gold: [0] 3 [1] 1\n"),
               "%s", buf);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);
    {   /* no set, or a set with nothing loaded (as tasks_free leaves it): nothing to print */
        char buf[256];
        describe_text(NULL, buf, sizeof buf);
        CHECK(buf[0] == '\0');
        memset(&a, 0, sizeof a);
        describe_text(&a, buf, sizeof buf);
        CHECK(buf[0] == '\0');
    }
}

/* ====================================================================================== */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECKF(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void expect_bad_indices(const char *name, const char *text, long line, const char *what)
{
    const char *path = scratch(name);
    tasks_indices ix;
    char err[1024] = "", want[64];
    write_text(path, text);
    CHECKF(tasks_read_indices(path, &ix, err, sizeof err) != 0, "%s accepted", name);
    sprintf(want, ":%ld: ", line);
    CHECKF(strstr(err, path) && strstr(err, want) && strstr(err, what), "%s: \"%s\" (want line %ld, \"%s\")", name, err,
           line, what);
    CHECK(ix.idx[0] == NULL && ix.idx[1] == NULL && ix.idx[2] == NULL);
}

static void case_indices(void)
{
    tasks_set a, b;
    tasks_indices ix;
    tasks_load_desc d;
    char err[1024];
    int s;
    size_t i;
    const char *ipath = scratch("rte.indices");

    if (tasks_load("RTE", data("RTE/train.jsonl"), data("RTE/val.jsonl"), 7, 5, 2, 3, &a, err, sizeof err)) {
        CHECKF(0, "%s", err);
        return;
    }
    CHECKF(tasks_write_indices(ipath, &a, err, sizeof err) == 0, "%s", err);
    CHECKF(tasks_read_indices(ipath, &ix, err, sizeof err) == 0, "%s", err);
    CHECK_STR(ix.task, "RTE");
    CHECK(ix.seed == 7 && ix.dev_from_train == 1);
    for (s = 0; s < 3; s++) {
        const tasks_split *sp = tasks_set_split(&a, s);
        CHECK(ix.pool[s] == a.pool[s] && ix.hash[s] == a.hash[s] && ix.n[s] == sp->n);
        for (i = 0; i < sp->n && i < ix.n[s]; i++) CHECK(ix.idx[s][i] == sp->ex[i].source_index);
    }
    /* a re-run with the indices reproduces the split exactly, whatever seed/counts it asks */
    memset(&d, 0, sizeof d);
    d.task = "rte";
    d.train_path = data("RTE/train.jsonl");
    d.test_path = data("RTE/val.jsonl");
    d.seed = 99;
    d.n_train = d.n_dev = d.n_test = 1;
    d.indices = &ix;
    if (tasks_load_ex(&d, &b, err, sizeof err) == 0) {
        CHECK(b.seed == 7);
        CHECK(same_indices(&a.train, &b.train) && same_indices(&a.dev, &b.dev) && same_indices(&a.test, &b.test));
        for (i = 0; i < a.train.n; i++) CHECK(strcmp(a.train.ex[i].cand[1].text, b.train.ex[i].cand[1].text) == 0);
        /* and writes the same file again */
        CHECK(tasks_write_indices(scratch("rte2.indices"), &b, err, sizeof err) == 0);
        tasks_free(&b);
    } else CHECKF(0, "%s", err);
    {
        FILE *f1 = fopen(ipath, "rb"), *f2 = fopen(scratch("rte2.indices"), "rb");
        char x1[8192], x2[8192];
        size_t n1 = f1 ? fread(x1, 1, sizeof x1, f1) : 0, n2 = f2 ? fread(x2, 1, sizeof x2, f2) : 1;
        CHECK(n1 > 0 && n1 == n2 && memcmp(x1, x2, n1) == 0);
        if (f1) fclose(f1);
        if (f2) fclose(f2);
    }

    /* indices that do not fit the data are refused */
    {
        size_t saved = ix.idx[TASKS_TRAIN][0];
        uint64_t h = ix.hash[TASKS_TEST];
        ix.idx[TASKS_TRAIN][0] = 8; /* the train file has 8 examples: 0..7 */
        CHECK(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "out of range"));
        ix.idx[TASKS_TRAIN][0] = ix.idx[TASKS_TRAIN][1];
        CHECK(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "twice"));
        ix.idx[TASKS_TRAIN][0] = ix.idx[TASKS_DEV][0];
        CHECKF(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "disjoint"), "%s", err);
        ix.idx[TASKS_TRAIN][0] = saved;
        ix.hash[TASKS_TEST] ^= 1;
        CHECKF(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "has changed") && strstr(err, "RTE/val.jsonl"),
               "%s", err);
        ix.hash[TASKS_TEST] = h;
        d.test_path = data("RTE/bom_crlf.jsonl"); /* other contents */
        CHECK(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "has changed"));
        d.test_path = data("RTE/val.jsonl");
        d.task = "CB";
        CHECK(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "for task RTE"));
        d.task = "RTE";
        d.dev_path = data("RTE/val.jsonl");
        CHECK(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "separate dev file"));
        d.dev_path = NULL;
        CHECKF(tasks_load_ex(&d, &b, err, sizeof err) == 0, "%s", err); /* all restored */
        tasks_free(&b);
    }
    tasks_free_indices(&ix);
    CHECK(ix.idx[0] == NULL);
    tasks_free(&a);

    /* with a separate dev file */
    memset(&d, 0, sizeof d);
    d.task = "SST-5";
    d.train_path = data("SST-5/train.csv");
    d.dev_path = data("SST-5/dev.csv");
    d.test_path = data("SST-5/test.csv");
    d.seed = 5;
    d.n_train = 3;
    d.n_dev = 1;
    d.n_test = 2;
    if (tasks_load_ex(&d, &a, err, sizeof err) == 0) {
        CHECK(tasks_write_indices(scratch("sst5.indices"), &a, err, sizeof err) == 0);
        CHECKF(tasks_read_indices(scratch("sst5.indices"), &ix, err, sizeof err) == 0, "%s", err);
        CHECK(ix.dev_from_train == 0 && ix.pool[TASKS_DEV] == 2 && ix.n[TASKS_DEV] == 1);
        d.indices = &ix;
        d.seed = 6;
        if (tasks_load_ex(&d, &b, err, sizeof err) == 0) {
            CHECK(same_indices(&a.train, &b.train) && same_indices(&a.dev, &b.dev) && same_indices(&a.test, &b.test));
            tasks_free(&b);
        } else CHECKF(0, "%s", err);
        d.dev_path = NULL;
        CHECK(tasks_load_ex(&d, &b, err, sizeof err) != 0 && strstr(err, "separate dev file"));
        tasks_free_indices(&ix);
        tasks_free(&a);
    } else CHECKF(0, "%s", err);

    /* writing where it cannot */
    if (tasks_load("CB", data("CB/train.jsonl"), data("CB/val.jsonl"), 1, 2, 1, 1, &a, err, sizeof err) == 0) {
        CHECK(tasks_write_indices(data("no/such/dir/x.indices"), &a, err, sizeof err) != 0 && strstr(err, "no/such/dir"));
        tasks_free(&a);
    }
    CHECK(tasks_read_indices(scratch("does-not-exist.indices"), &ix, err, sizeof err) != 0 &&
          strstr(err, "does-not-exist.indices"));

    /* malformed indices files name the file and the line */
#define IX_HEAD "grzo-tasks-indices 1\ntask CB\nseed 3\ndev_from_train 1\n"
#define IX_FILES "file train 6 0123456789abcdef a b.jsonl\nfile dev 0 0000000000000000 -\nfile test 3 fedcba9876543210 v.jsonl\n"
    {
        tasks_indices ok;
        write_text(scratch("good.indices"), IX_HEAD IX_FILES "split train 2\n0\n5\nsplit dev 1\n3\nsplit test 0\nend\n");
        CHECKF(tasks_read_indices(scratch("good.indices"), &ok, err, sizeof err) == 0, "%s", err);
        CHECK(ok.n[0] == 2 && ok.idx[0][1] == 5 && ok.n[1] == 1 && ok.n[2] == 0 && ok.pool[0] == 6 &&
              ok.hash[0] == UINT64_C(0x0123456789abcdef) && ok.seed == 3);
        tasks_free_indices(&ok);
    }
    expect_bad_indices("bad_magic.indices", "grzo-tasks-indices 2\n", 1, "not a grzo-tasks-indices 1 file");
    expect_bad_indices("empty.indices", "", 1, "unexpected end of file");
    expect_bad_indices("bad_seed.indices", "grzo-tasks-indices 1\ntask CB\nseed -3\n", 3, "seed");
    expect_bad_indices("bad_devflag.indices", "grzo-tasks-indices 1\ntask CB\nseed 3\ndev_from_train 2\n", 4, "dev_from_train");
    expect_bad_indices("bad_hash.indices",
                       IX_HEAD "file train 6 0123456789abcde a.jsonl\n", 5, "16 hex digits");
    expect_bad_indices("bad_order.indices", IX_HEAD "file dev 0 0000000000000000 -\n", 5, "file train");
    expect_bad_indices("truncated.indices", IX_HEAD IX_FILES "split train 2\n0\n1\n", 11, "unexpected end of file");
    expect_bad_indices("too_short.indices", IX_HEAD IX_FILES "split train 2\n0\n", 8, "too short");
    expect_bad_indices("bad_index.indices", IX_HEAD IX_FILES "split train 2\n0\n1x\n", 10, "one index");
    expect_bad_indices("short_split.indices", IX_HEAD IX_FILES "split train 2\n0\nsplit dev 0\n", 10, "one index");
    expect_bad_indices("too_many.indices", IX_HEAD IX_FILES "split train 7\n", 8, "more indices than examples");
    expect_bad_indices("no_end.indices", IX_HEAD IX_FILES "split train 0\nsplit dev 0\nsplit test 0\n", 11, "expected end");
    expect_bad_indices("long_split.indices", IX_HEAD IX_FILES "split train 0\nsplit dev 0\nsplit test 1\n0\n1\nend\n", 12,
                       "expected \"end\"");
    expect_bad_indices("after_end.indices", IX_HEAD IX_FILES "split train 0\nsplit dev 0\nsplit test 0\nend\nmore\n", 12,
                       "after \"end\"");
#undef IX_HEAD
#undef IX_FILES

    /* a file larger than the reader's first buffers (1 MiB, then twice that): every row read,
       and the hash (what an indices file names) of every byte */
    {
        const char *big = scratch("big.tsv");
        FILE *f = fopen(big, "wb");
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        size_t rows = 0, k;
        char row[128];
        CHECKF(f != NULL, "cannot write %s", big);
        if (f) {
            strcpy(row, "sentence\tlabel\n");   /* the header, then rows to 3 MiB */
            for (;;) {
                for (k = 0; row[k]; k++) h = (h ^ (unsigned char)row[k]) * UINT64_C(0x100000001b3);
                fputs(row, f);
                if (ftell(f) >= 3L << 20) break;
                snprintf(row, sizeof row, "row %lu of a file larger than the first buffers\t%lu\n", (unsigned long)rows,
                         (unsigned long)(rows % 2));
                rows++;
            }
            fclose(f);
            if (tasks_load("SST-2", big, data("SST-2/dev.tsv"), 1, 2, 0, -1, &a, err, sizeof err) == 0) {
                CHECKF(a.pool[TASKS_TRAIN] == rows, "%lu examples, want %lu", (unsigned long)a.pool[TASKS_TRAIN],
                       (unsigned long)rows);
                CHECK(a.hash[TASKS_TRAIN] == h);
                tasks_free(&a);
            } else CHECKF(0, "%s", err);
            remove(big);
        }
    }
}

/* Counts in an indices file are checked against what the file can hold: each index needs
   at least two bytes ("0\n"), so a split of 2^61 - 1 entries in a short file is refused
   before anything is allocated (before the fix, (n + 1) * sizeof(size_t) wrapped to 0 and
   the indices were written past a zero-byte allocation). A caller-built tasks_indices with
   a huge count is refused by tasks_load_ex the same way. */
static void case_indices_bounds(void)
{
    char err[1024] = "";
#define IX_HEAD "grzo-tasks-indices 1\ntask CB\nseed 3\ndev_from_train 1\n"
    expect_bad_indices("wrap.indices",
                       IX_HEAD "file train 2305843009213693951 0123456789abcdef a.jsonl\n"
                               "file dev 0 0000000000000000 -\nfile test 3 fedcba9876543210 v.jsonl\n"
                               "split train 2305843009213693951\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nend\n",
                       8, "the file is too short");
    expect_bad_indices("huge_pool.indices",
                       IX_HEAD "file train 18446744073709551615 0123456789abcdef a.jsonl\n"
                               "file dev 0 0000000000000000 -\nfile test 3 fedcba9876543210 v.jsonl\n"
                               "split train 18446744073709551615\nend\n",
                       8, "the file is too short");
#undef IX_HEAD
    {
        /* an indices struct built by a caller: the count must fit the file's examples */
        tasks_indices ix;
        tasks_load_desc d;
        tasks_set s;
        size_t one = 0;
        memset(&ix, 0, sizeof ix);
        /* read a real file's pool and hash through a fresh load, then forge the counts */
        memset(&d, 0, sizeof d);
        d.task = "CB";
        d.train_path = data("CB/train.jsonl");
        d.test_path = data("CB/val.jsonl");
        d.n_train = 2; d.n_dev = 1; d.n_test = 1;
        if (tasks_load_ex(&d, &s, err, sizeof err) != 0) { CHECKF(0, "%s", err); return; }
        strcpy(ix.task, "CB");
        ix.dev_from_train = 1;
        ix.pool[0] = s.pool[0]; ix.hash[0] = s.hash[0];
        ix.pool[2] = s.pool[2]; ix.hash[2] = s.hash[2];
        tasks_free(&s);
        ix.n[0] = (size_t)1 << 61;
        ix.idx[0] = &one;
        d.indices = &ix;
        CHECK(tasks_load_ex(&d, &s, err, sizeof err) != 0 && strstr(err, "more indices"));
    }
}

/* ====================================================================================== */

typedef struct bad_file {
    const char *task;
    const char *file;  /* under malformed/ */
    long line;         /* 0: the message names the file but no line (an empty file) */
    const char *what;  /* a piece of the expected message */
} bad_file;

static const bad_file BAD[] = {
    {"RTE", "json_trailing_comma.jsonl", 2, "trailing comma"},
    {"RTE", "json_unterminated_string.jsonl", 3, "unterminated string"},
    {"RTE", "json_bad_escape.jsonl", 1, "invalid escape"},
    {"RTE", "json_lone_high_surrogate.jsonl", 2, "unpaired high surrogate"},
    {"RTE", "json_lone_low_surrogate.jsonl", 2, "unpaired low surrogate"},
    {"RTE", "json_bad_hex.jsonl", 2, "four hex digits"},
    {"RTE", "json_control_char.jsonl", 2, "control character"},
    {"RTE", "json_invalid_utf8.jsonl", 2, "invalid UTF-8"},
    {"RTE", "json_overlong_utf8.jsonl", 2, "invalid UTF-8"},
    {"RTE", "json_encoded_surrogate.jsonl", 2, "invalid UTF-8"},
    {"RTE", "json_leading_zero.jsonl", 2, "leading zeros"},
    {"RTE", "json_bad_number.jsonl", 4, "digit must follow"},
    {"RTE", "json_not_object.jsonl", 2, "not a JSON object"},
    {"RTE", "json_trailing_garbage.jsonl", 2, "after the value"},
    {"RTE", "json_bad_literal.jsonl", 2, "invalid literal"},
    {"RTE", "json_duplicate_key.jsonl", 2, "duplicate key"},
    {"RTE", "json_deep_nesting.jsonl", 2, "nesting deeper"},
    {"RTE", "json_truncated.jsonl", 3, "unterminated string"},
    {"RTE", "json_nul_byte.jsonl", 2, "0x00"},
    {"RTE", "json_nul_outside.jsonl", 2, "0x00"},
    {"RTE", "json_u0000.jsonl", 2, "\\u0000"},
    {"RTE", "json_missing_colon.jsonl", 2, "expected ':'"},
    {"RTE", "json_single_quotes.jsonl", 2, "string key"},
    {"RTE", "json_only_blank_lines.jsonl", 0, "no examples"},
    {"RTE", "rte_unlabeled.jsonl", 1, "missing \"label\" (an unlabeled split such as a SuperGLUE test.jsonl cannot be used)"},
    {"RTE", "rte_label_wrong_type.jsonl", 2, "must be one of"},
    {"RTE", "rte_label_unknown.jsonl", 2, "\"maybe\""},
    {"RTE", "rte_missing_key.jsonl", 2, "missing \"hypothesis\""},
    {"RTE", "rte_field_not_string.jsonl", 2, "\"premise\" must be a string"},
    {"RTE", "rte_bad_label.tsv", 3, "\"yes\""},
    {"RTE", "rte_no_label_column.tsv", 1, "no \"label\" column (it has: index, sentence1, sentence2)"},
    {"RTE", "json_partial_bom.jsonl", 1, "unexpected 0xEF"},   /* two of a BOM's three bytes are no BOM */
    {"BoolQ", "boolq_label_string.jsonl", 2, "true or false"},
    {"BoolQ", "boolq_missing_passage.jsonl", 2, "missing \"passage\""},
    {"MultiRC", "multirc_answers_not_array.jsonl", 2, "\"passage.questions[0].answers\" must be an array"},
    {"MultiRC", "multirc_label_range.jsonl", 2, "\"passage.questions[0].answers[1].label\" must be an integer from 0 to 1"},
    {"MultiRC", "multirc_passage_not_object.jsonl", 1, "\"passage\" must be an object"},
    {"MultiRC", "multirc_missing_question.jsonl", 1, "missing \"passage.questions[0].question\""},
    {"COPA", "copa_bad_question.jsonl", 2, "\"because\""},
    {"COPA", "copa_label_range.jsonl", 3, "\"label\" must be an integer from 0 to 1"},
    {"COPA", "copa_label_far.jsonl", 2, "\"label\" must be an integer from 0 to 1"},   /* not only n itself */
    {"COPA", "copa_blank_choice.jsonl", 2, "\"choice1\"/\"choice2\" must not be blank"},   /* the file's name says "blank" */
    {"COPA", "copa_blank_choice1.jsonl", 2, "\"choice1\"/\"choice2\" must not be blank"},
    {"WSC", "wsc_target_not_object.jsonl", 1, "\"target\" must be an object"},
    {"WSC", "wsc_missing_label.jsonl", 1, "missing \"label\""},
    {"WiC", "wic_missing_label.jsonl", 3, "missing \"label\""},
    {"SST-2", "sst2_unlabeled.tsv", 1, "no \"label\" column"},
    {"SST-2", "sst2_label_range.tsv", 3, "not 0 or 1"},
    {"SST-2", "sst2_label_not_number.tsv", 3, "\"positive\""},
    {"SST-2", "sst2_field_count.tsv", 4, "3 tab-separated fields"},
    {"SST-2", "sst2_many_fields.tsv", 3, "20 tab-separated fields, the header has 2"},   /* more than the 16 first made room for */
    {"SST-2", "sst2_empty.tsv", 1, "empty file"},
    {"SST-2", "sst2_invalid_utf8.tsv", 2, "invalid UTF-8"},
    {"SST-2", "sst2_nul.tsv", 3, "NUL byte"},
    {"MNLI", "mnli_short_row.tsv", 3, "9 tab-separated fields, the header has 12"},
    {"MNLI", "mnli_bad_gold.tsv", 4, "\"maybe\""},
    {"SST-5", "sst5_unterminated_quote.csv", 3, "unterminated quoted field"},
    {"SST-5", "sst5_junk_after_quote.csv", 2, "after a closing quote"},
    {"SST-5", "sst5_label_range.csv", 4, "label \"5\" is not an integer from 0 to 4"},
    {"SST-5", "sst5_blank_lines.csv", 6, "label \"5\""},   /* blank lines (CRLF and LF) skipped and counted */
    {"SST-5", "sst5_one_field.csv", 2, "1 field, expected 2"},
    {"SST-5", "sst5_three_fields.csv", 2, "3 fields, expected 2"},
    {"SST-5", "sst5_many_fields.csv", 2, "20 fields, expected 2"},   /* more than the 8 first made room for */
    {"SST-5", "sst5_after_multiline.csv", 3, "\"9\""},
    {"SST-5", "sst5_invalid_utf8.csv", 2, "invalid UTF-8"},
    {"SST-5", "sst5_headerless_tsv_fields.tsv", 2, "3 fields"},
    {"TREC", "trec_label_not_int.csv", 2, "label \"LOC\" is not an integer from 0 to 5"},
    {"TREC", "trec_negative_label.csv", 1, "\"-1\""},
    /* SQuAD and DROP: whole-file JSON, so messages name the JSON path, not a line */
    {"SQuAD", "squad_no_data.json", 0, "missing \"data\""},
    {"SQuAD", "squad_data_not_array.json", 0, "\"data\" must be an array"},
    {"SQuAD", "squad_unanswerable.json", 0, "\"data[0].paragraphs[0].qas[0].answers\" is empty (SQuAD 2.0"},
    {"SQuAD", "squad_answer_not_string.json", 0, "\"data[0].paragraphs[0].qas[0].answers[0].text\" must be a string"},
    {"SQuAD", "squad_answer_not_object.json", 0, "\"data[0].paragraphs[0].qas[0].answers[0]\" must be an object"},
    {"SQuAD", "squad_missing_context.json", 0, "missing \"data[0].paragraphs[0].context\""},
    {"SQuAD", "squad_missing_id.json", 0, "missing \"data[0].paragraphs[0].qas[0].id\""},
    {"SQuAD", "squad_truncated.json", 3, "control character"},
    {"DROP", "drop_not_object.json", 0, "not a JSON object of passages"},
    {"DROP", "drop_number_not_string.json", 0, "\"p1.qa_pairs[0].answer.number\" must be a string"},
    {"DROP", "drop_spans_not_array.json", 0, "\"p1.qa_pairs[0].answer.spans\" must be an array"},
    {"DROP", "drop_span_not_string.json", 0, "\"p1.qa_pairs[0].answer.spans[1]\" must be a string"},
    {"DROP", "drop_missing_answer.json", 0, "missing \"p1.qa_pairs[0].answer\""},
    {"DROP", "drop_answer_not_object.json", 0, "\"p1.qa_pairs[0].answer\" must be an object"},
    {"DROP", "drop_date_not_object.json", 0, "\"p1.qa_pairs[0].answer.date\" must be an object"},
    {"DROP", "drop_validated_bad.json", 0, "\"p1.qa_pairs[0].validated_answers[1].date.day\" must be a string"},
    {"DROP", "drop_no_usable_answer.json", 0, "no examples in the file (1 skipped: no usable answer)"},
    {"DROP", "drop_qa_pairs_missing.json", 0, "missing \"p1.qa_pairs\""},
};

/* A valid validation file for each task, to pair with a malformed train file. */
static const char *valid_val(const char *task)
{
    static const char *const map[][2] = {
        {"RTE", "RTE/val.jsonl"},     {"BoolQ", "BoolQ/val.jsonl"}, {"MultiRC", "MultiRC/val.jsonl"},
        {"COPA", "COPA/val.jsonl"},   {"WSC", "WSC/val.jsonl"},     {"WiC", "WiC/val.jsonl"},
        {"SST-2", "SST-2/dev.tsv"},   {"MNLI", "MNLI/dev_matched.tsv"}, {"SST-5", "SST-5/test.csv"},
        {"TREC", "TREC/test.csv"},     {"SQuAD", "SQuAD/dev-v1.1.json"}, {"DROP", "DROP/drop_dataset_dev.json"},
    };
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i][0], task) == 0) return data(map[i][1]);
    return NULL;
}

static void expect_load_error(const char *task, const char *train, const char *val, const char *names_file, long line,
                              const char *what)
{
    tasks_set s;
    char err[1024] = "", want[256];
    int rc = tasks_load(task, train, val, 1, -1, 0, -1, &s, err, sizeof err);
    CHECKF(rc != 0, "%s %s was accepted", task, names_file);
    if (rc == 0) {
        tasks_free(&s);
        return;
    }
    CHECK(s.arena == NULL && s.train.ex == NULL);
    if (line > 0) snprintf(want, sizeof want, "%s:%ld:", names_file, line);
    else snprintf(want, sizeof want, "%s: ", names_file);
    CHECKF(strstr(err, want) != NULL && strstr(err, what) != NULL, "%s: got \"%s\", want \"%s...%s\"", names_file, err, want,
           what);
}

static void case_malformed(void)
{
    size_t i;
    char err[1024];
    tasks_set s;
    for (i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char rel[256];
        const char *p;
        snprintf(rel, sizeof rel, "malformed/%s", BAD[i].file);
        p = data(rel);
        /* as the train file, and as the validation file */
        expect_load_error(BAD[i].task, p, valid_val(BAD[i].task), p, BAD[i].line, BAD[i].what);
        expect_load_error(BAD[i].task, valid_val(BAD[i].task), p, p, BAD[i].line, BAD[i].what);
    }
    /* a missing file, a directory, a wrong extension, an unknown task, missing paths */
    expect_load_error("RTE", data("RTE/nope.jsonl"), data("RTE/val.jsonl"), data("RTE/nope.jsonl"), 0, "cannot open");
    expect_load_error("RTE", data("RTE/train.jsonl"), data("RTE"), data("RTE"), 0, "");
    expect_load_error("SST-2", data("RTE/train.jsonl"), data("SST-2/dev.tsv"), data("RTE/train.jsonl"), 0, "cannot read this file");
    expect_load_error("CB", data("SST-5/train.csv"), data("CB/val.jsonl"), data("SST-5/train.csv"), 0, "cannot read this file");
    /* headerless "label,sentence" .csv is SST-5's (LM-BFF's) form, not SST-2's */
    expect_load_error("SST-2", data("SST-5/train.csv"), data("SST-2/dev.tsv"), data("SST-5/train.csv"), 0, "cannot read this file");
    CHECK(tasks_load("SST-9", data("SST-2/train.tsv"), data("SST-2/dev.tsv"), 1, -1, -1, -1, &s, err, sizeof err) != 0 &&
          strstr(err, "unknown task \"SST-9\" (known: SST-2, "));
    /* a JSON error names its line and column: the '}' after the trailing comma is column 59 */
    expect_load_error("RTE", data("malformed/json_trailing_comma.jsonl"), valid_val("RTE"),
                      data("malformed/json_trailing_comma.jsonl"), 2, ":2:59: ");
    CHECK(tasks_load("SST-2", NULL, data("SST-2/dev.tsv"), 1, -1, -1, -1, &s, err, sizeof err) != 0 && strstr(err, "required"));
    CHECK(tasks_load("SST-2", data("SST-2/train.tsv"), NULL, 1, -1, -1, -1, &s, NULL, 0) != 0); /* err may be NULL */
    CHECK(tasks_load("SST-2", data("SST-2/train.tsv"), NULL, 1, -1, -1, -1, &s, NULL, 64) != 0); /* with any length */
    CHECK(tasks_load_ex(NULL, &s, err, sizeof err) != 0);
    /* blank lines between and after a tsv's rows are skipped; a file's hash is FNV-1a 64 of
       its bytes, every one of them (an indices file names it: a changed first byte must show) */
    if (tasks_load("SST-2", data("SST-2/blank_lines.tsv"), data("SST-2/dev.tsv"), 1, -1, 0, -1, &s, err, sizeof err) == 0) {
        FILE *f = fopen(data("SST-2/blank_lines.tsv"), "rb");
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        int c;
        CHECKF(s.pool[TASKS_TRAIN] == 2 && s.train.n == 2, "blank lines: %lu examples, want 2", (unsigned long)s.train.n);
        CHECK(f != NULL);
        while (f && (c = getc(f)) != EOF) h = (h ^ (uint64_t)(unsigned char)c) * UINT64_C(0x100000001b3);
        if (f) fclose(f);
        CHECKF(s.hash[TASKS_TRAIN] == h, "the train file's hash %016" PRIx64 ", FNV-1a 64 of its bytes %016" PRIx64,
               s.hash[TASKS_TRAIN], h);
        tasks_free(&s);
    } else CHECKF(0, "SST-2 with blank lines: %s", err);
}

/* ====================================================================================== */

static void expect_resolved(const char *task, const char *dir, const char *train, const char *dev, const char *test,
                            const char *note_has)
{
    tasks_paths p;
    char err[1024];
    int rc = tasks_resolve_dir(task, data(dir), &p, err, sizeof err);
    CHECKF(rc == 0, "%s: %s", dir, err);
    if (rc) return;
    CHECK_STR(p.train, data(train));
    CHECK_STR(p.test, data(test));
    if (dev) CHECK_STR(p.dev, data(dev));
    else CHECKF(p.dev == NULL, "%s: dev %s", dir, p.dev);
    CHECKF(strstr(p.note, note_has) != NULL, "%s", p.note);
    tasks_free_paths(&p);
}

static void case_resolve(void)
{
    tasks_paths p;
    tasks_set s;
    char err[1024];
    /* GLUE layout: test.tsv is unlabeled, so the validation split is dev.tsv */
    expect_resolved("SST-2", "SST-2", "SST-2/train.tsv", NULL, "SST-2/dev.tsv", "carved from the train draw");
    /* SuperGLUE: train.jsonl + val.jsonl; test.jsonl is never used */
    expect_resolved("RTE", "RTE", "RTE/train.jsonl", NULL, "RTE/val.jsonl", "the validation split");
    /* BoolQ: no train.jsonl here, FewGLUE's 32 examples instead, and the note says so */
    expect_resolved("BoolQ", "BoolQ", "BoolQ/fewglue32_train.jsonl", NULL, "BoolQ/val.jsonl", "FewGLUE");
    /* LM-BFF k-shot: train, dev, and the labeled test */
    expect_resolved("SST-5", "SST-5", "SST-5/train.csv", "SST-5/dev.csv", "SST-5/test.csv", "drawn from dev.csv");
    expect_resolved("TREC", "TREC", "TREC/train.csv", NULL, "TREC/test.csv", "LM-BFF");
    expect_resolved("MNLI", "MNLI", "MNLI/train.tsv", NULL, "MNLI/dev_matched.tsv", "dev_matched.tsv");
    expect_resolved("SNLI", "SNLI/", "SNLI/train.tsv", NULL, "SNLI/dev.tsv", "dev.tsv");
    /* SQuAD and DROP: the released file names */
    expect_resolved("SQuAD", "SQuAD", "SQuAD/train-v1.1.json", NULL, "SQuAD/dev-v1.1.json", "dev-v1.1.json");
    expect_resolved("DROP", "DROP", "DROP/drop_dataset_train.json", NULL, "DROP/drop_dataset_dev.json", "drop_dataset_dev.json");
    CHECK(tasks_resolve_dir("SQuAD", data("DROP"), &p, err, sizeof err) != 0 && strstr(err, "no train file for SQuAD"));
    CHECK(tasks_resolve_dir("RTE", data("no-such-dir"), &p, err, sizeof err) != 0 && strstr(err, "no train file"));
    CHECK(p.train == NULL && p.test == NULL);
    CHECK(tasks_resolve_dir("CB", data("SST-2"), &p, err, sizeof err) != 0); /* nothing CB reads there */
    /* a train file and no validation file: refused, nothing returned */
    CHECK(tasks_resolve_dir("RTE", data("train_only"), &p, err, sizeof err) != 0 &&
          strstr(err, "no validation file for RTE found") && p.train == NULL && p.test == NULL);
    CHECK(tasks_resolve_dir("SQuAD", data("train_only"), &p, err, sizeof err) != 0 &&
          strstr(err, "no validation file for SQuAD found") && p.train == NULL && p.test == NULL);
    CHECK(tasks_resolve_dir("XYZ", data("SST-2"), &p, err, sizeof err) != 0);
    CHECK(tasks_resolve_dir("RTE", NULL, &p, err, sizeof err) != 0 && strstr(err, "a directory and out are required") &&
          p.train == NULL);
    CHECK(tasks_resolve_dir("RTE", data("RTE"), NULL, err, sizeof err) != 0 && strstr(err, "a directory and out are required"));
    /* resolved paths load */
    if (tasks_resolve_dir("SST-5", data("SST-5"), &p, err, sizeof err) == 0) {
        tasks_load_desc d;
        memset(&d, 0, sizeof d);
        d.task = "SST-5";
        d.train_path = p.train;
        d.dev_path = p.dev;
        d.test_path = p.test;
        d.n_train = d.n_dev = d.n_test = -1;
        CHECKF(tasks_load_ex(&d, &s, err, sizeof err) == 0, "%s", err);
        CHECK(s.train.n == 8 && s.dev.n == 2 && s.test.n == 3);
        tasks_free(&s);
        tasks_free_paths(&p);
    }
}

/* ====================================================================================== */

/* The staged real data (GRZO_TASKS_DATA=/path/to/shared/data): MeZO's split sizes. */
static void case_real_data(const char *root)
{
    static const struct {
        const char *task, *dir;
        long n_dev;
        size_t train, dev, test;
    } want[] = {
        {"SST-2", "SST-2", -1, 1000, 500, 872},   {"RTE", "RTE", -1, 1000, 500, 277},
        {"CB", "CB", -1, 150, 100, 56},            {"COPA", "COPA", -1, 300, 100, 100},
        {"WiC", "WiC", -1, 1000, 500, 638},        {"WSC", "WSC", -1, 54, 500, 104},
        {"MultiRC", "MultiRC", -1, 1000, 500, 1000}, {"BoolQ", "BoolQ", 8, 24, 8, 1000},
        {"SST-5", "SST-5/k-shot/16-13", -1, 80, 80, 1000}, {"TREC", "TREC/k-shot/16-13", -1, 96, 96, 500},
        {"MNLI", "MNLI/k-shot/16-13", 16, 32, 16, 48},   {"SNLI", "SNLI/k-shot/16-13", 16, 32, 16, 48},
        {"SST-5", "SST-5/original", -1, 1000, 500, 1000}, {"TREC", "TREC/original", -1, 1000, 500, 500},
    };
    size_t i;
    for (i = 0; i < sizeof want / sizeof want[0]; i++) {
        tasks_paths p;
        tasks_set s;
        tasks_load_desc d;
        char dir[1024], err[1024];
        snprintf(dir, sizeof dir, "%s/%s", root, want[i].dir);
        if (tasks_resolve_dir(want[i].task, dir, &p, err, sizeof err)) {
            CHECKF(0, "%s", err);
            continue;
        }
        memset(&d, 0, sizeof d);
        d.task = want[i].task;
        d.train_path = p.train;
        d.dev_path = p.dev;
        d.test_path = p.test;
        d.seed = 0;
        d.n_train = -1;
        d.n_dev = want[i].n_dev;
        d.n_test = -1;
        if (tasks_load_ex(&d, &s, err, sizeof err) == 0) {
            CHECKF(s.train.n == want[i].train && s.dev.n == want[i].dev && s.test.n == want[i].test,
                   "%s %s: %lu/%lu/%lu", want[i].task, want[i].dir, (unsigned long)s.train.n, (unsigned long)s.dev.n,
                   (unsigned long)s.test.n);
            tasks_free(&s);
        } else CHECKF(0, "%s: %s", want[i].dir, err);
        tasks_free_paths(&p);
    }
}

/* ======================================================================================
   SQuAD and DROP: the scorers (known answers of the official scripts), the readers and
   MeZO's templates on the sample files, the scoring of loaded examples.
   ====================================================================================== */

#define CHECK_NORM(fn, in, want)                                                           \
    do {                                                                                   \
        char *got_ = NULL;                                                                 \
        CHECKF(fn((in), &got_) == 0, "%s", (in));                                          \
        CHECK_STR(got_, (want));                                                           \
        free(got_);                                                                        \
    } while (0)

static int close2(double a, double b) { return a - b < 1e-9 && b - a < 1e-9; }

/* get_metrics(predicted, gold) == (em, f1) */
#define CHECK_DROP(pred, gold, em, f1)                                                                             \
    do {                                                                                                           \
        static const char *const p_[] = pred, *const g_[] = gold;                                                  \
        double e_ = -1, f_ = -1;                                                                                   \
        int rc_ = qa_drop_metrics(p_, (int)(sizeof p_ / sizeof p_[0]), g_, (int)(sizeof g_ / sizeof g_[0]), &e_, &f_); \
        CHECKF(rc_ == 0 && close2(e_, (em)) && close2(f_, (f1)), "%s vs %s: got (%g, %g), want (%g, %g)", p_[0], g_[0], e_, \
               f_, (double)(em), (double)(f1));                                                                    \
    } while (0)
#define L(...) {__VA_ARGS__}

static void check_score(const char *what, int rc, double em, double f1, double want_em, double want_f1)
{
    CHECKF(rc == 0 && close2(em, want_em) && close2(f1, want_f1), "%s: got (%g, %g), want (%g, %g)", what, em, f1, want_em,
           want_f1);
}

/* the call runs before em and f1 are read */
#define CHECK_SCORE(what, call, want_em, want_f1)                     \
    do {                                                              \
        int rc_;                                                      \
        em = f1 = -1;                                                 \
        rc_ = (call);                                                 \
        check_score((what), rc_, em, f1, (want_em), (want_f1));       \
    } while (0)

static void squad_known(const char *pred, const char *const *golds, int n, double want_em, double want_f1)
{
    qa_answer a[4];
    int i;
    double em = -1, f1 = -1;
    for (i = 0; i < n; i++) {
        a[i].spans = &golds[i];
        a[i].n_spans = 1;
    }
    CHECK_SCORE(pred, qa_squad_score(pred, a, n, &em, &f1), want_em, want_f1);
}

static void case_qa_score(void)
{
    static const char *const cat_sat[] = {"cat sat"}, *const cat[] = {"cat"}, *const a[] = {"a"}, *const cat_cat[] = {"cat cat"};
    static const char *const broncos[] = {"Denver Broncos", "The Denver Broncos"};
    char buf[32];
    double v, em, f1;
    /* SQuAD v1.1 normalize_answer (expected values from Python running evaluate-v1.1.py's code) */
    CHECK_NORM(qa_squad_normalize, "The  Quick, brown fox!", "quick brown fox");
    CHECK_NORM(qa_squad_normalize, "an apple and a pear", "apple and pear");
    CHECK_NORM(qa_squad_normalize, "theater ANthem", "theater anthem");
    CHECK_NORM(qa_squad_normalize, "l'the", "lthe");
    CHECK_NORM(qa_squad_normalize, "Beyonc\xc3\xa9's", "beyonc\xc3\xa9s");
    CHECK_NORM(qa_squad_normalize, "\xc3\x80\xc3\x89\xc3\x8e", "\xc3\xa0\xc3\xa9\xc3\xae");
    CHECK_NORM(qa_squad_normalize, "\xce\xa3\xce\x9f\xce\xa6\xce\x9f\xce\xa3", "\xcf\x83\xce\xbf\xcf\x86\xce\xbf\xcf\x82");
    CHECK_NORM(qa_squad_normalize, "\xc2\xa0the\xe2\x80\x83" "cat ", "cat");
    CHECK_NORM(qa_squad_normalize, "\xe2\x80\x9cthe\xe2\x80\x9d cat", "\xe2\x80\x9c \xe2\x80\x9d cat");
    CHECK_NORM(qa_squad_normalize, "\xc4\xb0stanbul", "i\xcc\x87stanbul");
    /* str.lower() at the edges of its ranges: U+00DE, U+0100, U+014A, U+0179 -> U+00FE, U+0101,
       U+014B, U+017A */
    CHECK_NORM(qa_squad_normalize, "\xc3\x9e \xc4\x80 \xc5\x8a \xc5\xb9", "\xc3\xbe \xc4\x81 \xc5\x8b \xc5\xba");
    /* no golds: nothing to score against; invalid UTF-8 throughout: three bytes out per byte in */
    {
        qa_answer none = {cat, 1};
        char *r = qa_utf8_repair("\xff\xfe\xc3", 3);
        CHECK(qa_squad_score("cat", &none, 0, &em, &f1) != 0 && qa_drop_score("cat", &none, 0, &em, &f1) != 0);
        CHECK(r != NULL && strcmp(r, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") == 0);
        free(r);
    }
    /* exact match and F1, maxima over the golds */
    squad_known("the Denver Broncos", broncos, 2, 1, 1);
    squad_known("Broncos", broncos, 2, 0, 2.0 / 3.0);
    squad_known("the cat the cat sat", cat_sat, 1, 0, 0.8);   /* repeated tokens count (Counter) */
    squad_known("cat cat dog", cat_cat, 1, 0, 0.8);           /* in the gold too: 2 shared of 3 and of 2 */
    squad_known("", cat, 1, 0, 0);
    squad_known("the", a, 1, 1, 0);                           /* both empty: EM 1, F1 0 (as the script) */
    CHECK(qa_squad_score("x", NULL, 1, &em, &f1) != 0);
    /* a NULL result or text is a bad argument (-1), whichever one it is */
    {
        static const char *const one[] = {"1"};
        qa_answer g = {one, 1};
        char *out = NULL;
        CHECK(qa_squad_score("1", &g, 1, NULL, &f1) != 0 && qa_squad_score("1", &g, 1, &em, NULL) != 0);
        CHECK(qa_drop_score("1", &g, 1, NULL, &f1) != 0 && qa_drop_score("1", &g, 1, &em, NULL) != 0);
        CHECK(qa_drop_metrics(one, 1, one, 1, NULL, &f1) != 0 && qa_drop_metrics(one, 1, one, 1, &em, NULL) != 0);
        CHECK(qa_squad_normalize(NULL, &out) != 0 && qa_squad_normalize("x", NULL) != 0);
        CHECK(qa_drop_normalize(NULL, &out) != 0 && qa_drop_normalize("x", NULL) != 0);
        CHECK(out == NULL);
    }
    /* generated bytes that are not UTF-8 read as U+FFFD (decode(errors="replace")) */
    {
        /* Python: b"a\xff\xc3\xa9\xe2\x80z\xed\xa0\x80".decode(errors="replace") == "a\ufffd\xe9\ufffdz\ufffd\ufffd\ufffd" */
        char *fixed = qa_utf8_repair("a\xff\xc3\xa9\xe2\x80z\xed\xa0\x80", 10);
        CHECK_STR(fixed, "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        free(fixed);
        /* the last continuation byte (U+00BF) is valid; one continuation too many is not:
           b"\xc2\xbf\xc2\xa9\xa9".decode(errors="replace") == "\xbf\xa9\ufffd" */
        fixed = qa_utf8_repair("\xc2\xbf\xc2\xa9\xa9", 5);
        CHECK_STR(fixed, "\xc2\xbf\xc2\xa9\xef\xbf\xbd");
        free(fixed);
        /* a cut sequence whose second byte is the largest its lead allows is one U+FFFD:
           b"a\xe0\xbf".decode(errors="replace") == "a\ufffd" */
        fixed = qa_utf8_repair("a\xe0\xbf", 3);
        CHECK_STR(fixed, "a\xef\xbf\xbd");
        free(fixed);
        /* after F0 only 90..BF may follow, after F1..F3 80..BF: an overlong four-byte form is
           four U+FFFD, a plane-1 character cut short one:
           b"\xf0\x8f\xbf\xbf|\xf1\x80\x80".decode(errors="replace") == "\ufffd" * 4 + "|\ufffd" */
        fixed = qa_utf8_repair("\xf0\x8f\xbf\xbf|\xf1\x80\x80", 8);
        CHECK_STR(fixed, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd");
        free(fixed);
    }
    /* Python's float() and str(float) */
    CHECK(qa_py_is_number("  1.2e1 ", &v) && v == 12.0);
    CHECK(qa_py_is_number("1_000", &v) && v == 1000.0);
    CHECK(qa_py_is_number("-inf", NULL) && qa_py_is_number("NaN", NULL) && qa_py_is_number(".5", NULL) && qa_py_is_number("5.", NULL));
    CHECK(qa_py_is_number(" inf ", NULL) && qa_py_is_number("-Infinity\t", &v) && isinf(v) && v < 0);
    CHECK(qa_py_is_number("1e-5", &v) && v == 1e-5 && qa_py_is_number("2E+3", &v) && v == 2000.0);
    CHECK(!qa_py_is_number("1__0", NULL) && !qa_py_is_number("_1", NULL) && !qa_py_is_number("1_", NULL) && !qa_py_is_number("0x10", NULL));
    CHECK(!qa_py_is_number("1e", NULL) && !qa_py_is_number("e5", NULL) && !qa_py_is_number(".", NULL) && !qa_py_is_number("", NULL));
    qa_py_float_repr(12.0, buf); CHECK_STR(buf, "12.0");
    qa_py_float_repr(1e16, buf); CHECK_STR(buf, "1e+16");
    qa_py_float_repr(1e15, buf); CHECK_STR(buf, "1000000000000000.0");
    qa_py_float_repr(0.0001, buf); CHECK_STR(buf, "0.0001");
    qa_py_float_repr(0.00001, buf); CHECK_STR(buf, "1e-05");
    qa_py_float_repr(0.1, buf); CHECK_STR(buf, "0.1");
    qa_py_float_repr(-2.5e-300, buf); CHECK_STR(buf, "-2.5e-300");
    qa_py_float_repr(123456789012345678.0, buf); CHECK_STR(buf, "1.2345678901234568e+17");
    qa_py_float_repr(12.5, buf); CHECK_STR(buf, "12.5");
    qa_py_float_repr(-3.25, buf); CHECK_STR(buf, "-3.25");
    /* DROP _normalize_answer: allennlp's tests (TestDropEvalNormalize), then Python's values */
    CHECK_NORM(qa_drop_normalize, "12.0", "12.0");
    CHECK_NORM(qa_drop_normalize, "12.0  ", "12.0");
    CHECK_NORM(qa_drop_normalize, "12.000", "12.0");
    CHECK_NORM(qa_drop_normalize, "12", "12.0");
    CHECK_NORM(qa_drop_normalize, "  1.2e1  ", "12.0");
    CHECK_NORM(qa_drop_normalize, "12.0 persons", "12.0 persons");
    CHECK_NORM(qa_drop_normalize, "S.K. Singh", "sk singh");
    CHECK_NORM(qa_drop_normalize, "$1,000", "1000.0");
    CHECK_NORM(qa_drop_normalize, "3.5%", "35.0");
    CHECK_NORM(qa_drop_normalize, "78-yard", "78.0 yard");
    CHECK_NORM(qa_drop_normalize, "the 2 a", "2.0");
    CHECK_NORM(qa_drop_normalize, "Infinity", "inf");
    CHECK_NORM(qa_drop_normalize, "-5 yards", "5.0 yards");
    CHECK_NORM(qa_drop_normalize, "0.00001", "1e-05");
    CHECK_NORM(qa_drop_normalize, "1.5E+2", "150.0");   /* a number keeps its "." (not "15e2") */
    /* get_metrics: allennlp's TestDropEvalGetMetrics, every case */
    CHECK_DROP(L("78"), L("78.0"), 1.0, 1.0);
    CHECK_DROP(L("td"), L("td", "td"), 0.0, 0.5);
    CHECK_DROP(L("td", "td"), L("td"), 0.0, 0.5);
    CHECK_DROP(L("the", "fat", "cat", "the fat", "fat cat", "the fat cat"), L("cat"), 0.0, 0.17);
    CHECK_DROP(L("cat"), L("the", "fat", "cat", "the fat", "fat cat", "the fat cat"), 0.0, 0.17);
    CHECK_DROP(L("the", "fat", "cat", "the fat", "fat cat", "the fat cat"), L("cat", "cat dog"), 0.0, 0.25);
    CHECK_DROP(L("td"), L("the td"), 1.0, 1.0);
    CHECK_DROP(L("the a NOT an ARTICLE the an a"), L("NOT ARTICLE"), 1.0, 1.0);
    CHECK_DROP(L("John Elton"), L("Elton John"), 0.0, 1.0);
    CHECK_DROP(L("50 yard"), L("yard 50"), 0.0, 1.0);
    CHECK_DROP(L("order word right"), L("right word order"), 0.0, 1.0);
    CHECK_DROP(L("Per.i.o.d...."), L(".P....e.r,,i;;;o...d,,"), 1.0, 1.0);
    CHECK_DROP(L("Spa     c  e   s     "), L("    Spa c     e s"), 1.0, 1.0);
    CHECK_DROP(L("78-yard"), L("78 yard"), 1.0, 1.0);
    CHECK_DROP(L("78 yard"), L("78-yard"), 1.0, 1.0);
    CHECK_DROP(L("78"), L("78-yard"), 0.0, 0.67);
    CHECK_DROP(L("78-yard"), L("78"), 0.0, 0.67);
    CHECK_DROP(L("This was a triumph"), L("tHIS Was A TRIUMPH"), 1.0, 1.0);
    CHECK_DROP(L("Green bay packers"), L("Green bay packers"), 1.0, 1.0);
    CHECK_DROP(L("Green bay", "packers"), L("Green bay", "packers"), 1.0, 1.0);
    CHECK_DROP(L("Green", "bay", "packers"), L("Green", "bay", "packers"), 1.0, 1.0);
    CHECK_DROP(L(""), L("army"), 0.0, 0.0);
    CHECK_DROP(L("packers"), L("Green bay packers"), 0.0, 0.5);
    CHECK_DROP(L("packers"), L("Green bay"), 0.0, 0.0);
    CHECK_DROP(L("yard"), L("36 yard td"), 0.0, 0.0);
    CHECK_DROP(L("23 yards"), L("43 yards"), 0.0, 0.0);
    CHECK_DROP(L("56 yards"), L("56 yd"), 0.0, 0.5);
    CHECK_DROP(L("26"), L("26 yard td"), 0.0, 0.5);
    CHECK_DROP(L("78-yard", "56", "28", "40", "44", "touchdown"), L("78-yard", "56 yard", "1 yard touchdown"), 0.0, 0.28);
    CHECK_DROP(L("23", "23 yard"), L("23-yard", "56 yards"), 0.0, 0.5);
    CHECK_DROP(L("John Karman", "Joe Hardy"), L("Joe Karman", "John Hardy"), 0.0, 0.5);
    CHECK_DROP(L("ottoman", "Kantakouzenous"), L("ottoman", "army of Kantakouzenous"), 0.0, 0.75);
    CHECK_DROP(L("a"), L("a", "b"), 0.0, 0.5);
    CHECK_DROP(L("b"), L("a", "b"), 0.0, 0.5);
    CHECK_DROP(L("b"), L("b", "a"), 0.0, 0.5);
    /* the second gold span's best partner is not the first's: 2 matched of max(2, 3) */
    CHECK_DROP(L("x", "z", "y"), L("x", "y"), 0.0, 0.67);
    /* evaluate_json per question (allennlp's TestDropEvalFunctional; golds as
       answer_json_to_strings gives them): the maximum over the answer and the validated ones */
    {
        static const char *const one[] = {"1"}, *const zero[] = {"0"}, *const two[] = {"2"}, *const aug17[] = {"17 August"};
        static const char *const august[] = {"August"}, *const seventeen[] = {"17"}, *const s12[] = {"span1", "span2"};
        static const char *const s2[] = {"span2"}, *const ans1[] = {"answer1"}, *const ans2[] = {"answer2"}, *const blank[] = {"  "};
        qa_answer g1[] = {{one, 1}, {zero, 1}}, g2[] = {{two, 1}, {two, 1}}, g3[] = {{zero, 1}, {one, 1}, {two, 1}};
        qa_answer g4[] = {{aug17, 1}, {august, 1}, {seventeen, 1}}, g5[] = {{s12, 2}, {s2, 1}}, g6[] = {{ans1, 1}, {ans2, 1}};
        qa_answer g7[] = {{blank, 1}}, g8[] = {{blank, 1}, {one, 1}};
        CHECK_SCORE("number", qa_drop_score("1", g1, 2, &em, &f1), 1, 1);
        CHECK_SCORE("span vs number", qa_drop_score("2", g2, 2, &em, &f1), 1, 1);
        CHECK_SCORE("a validated answer", qa_drop_score("1", g3, 3, &em, &f1), 1, 1);
        CHECK_SCORE("date", qa_drop_score("17 August", g4, 3, &em, &f1), 1, 1);
        CHECK_SCORE("multi-span", qa_drop_score("span1", g5, 2, &em, &f1), 0, 0.5);
        CHECK_SCORE("no overlap", qa_drop_score("answer", g6, 2, &em, &f1), 0, 0);
        CHECK_SCORE("blank gold", qa_drop_score("  ", g7, 1, &em, &f1), 0, 0);
        CHECK_SCORE("blank gold skipped", qa_drop_score("1", g8, 2, &em, &f1), 1, 1);
    }
}

/* The SQuAD and DROP sample files through the readers and MeZO's templates. */
static void expect_answers(const tasks_example *e, const char *const *spans, const int *n_spans, int n)
{
    int i, k, s = 0;
    CHECKF(e && e->n_answers == n, "answers: got %d, want %d", e ? e->n_answers : -1, n);
    if (!e || e->n_answers != n) return;
    for (i = 0; i < n; i++) {
        CHECK(e->answers[i].n_spans == n_spans[i]);
        for (k = 0; k < n_spans[i] && k < e->answers[i].n_spans; k++) CHECK_STR(e->answers[i].spans[k], spans[s + k]);
        s += n_spans[i];
    }
}

static void expect_prediction(const tasks_set *s, const tasks_example *e, const char *pred, double want_em, double want_f1)
{
    double em = -1, f1 = -1;
    CHECK_SCORE(pred, e ? tasks_score_prediction(s->task, e, pred, &em, &f1) : -1, want_em, want_f1);
}

static void case_qa_templates(void)
{
    tasks_set s;
    const char *lily = "Lily had a small garden behind the house. She grew three red roses, a tall sunflower and the biggest "
                       "pumpkin in town. Every morning, at 7 o'clock, she gave the plants water from a blue can.";
    const char *bears = "The Bears scored first on a 35-yard field goal by Robbie Gould. In the second quarter, Jay Cutler "
                        "threw a 12-yard touchdown pass to Greg Olsen, and Gould added a 42-yard field goal. The Lions "
                        "answered with a 2-yard run by Kevin Smith.";
    const char *treaty = "The treaty was signed on 14 March 1812 in Vienna. About 3,500 soldiers and 1,200 horses took part "
                         "in the parade, and the city spent $1.5 million on it.";
    char ctx[1024];
    if (load_all("SQuAD", "SQuAD/train-v1.1.json", "SQuAD/dev-v1.1.json", &s) == 0) {
        static const char *const cat[] = {"an old red ball", "old red ball"};
        static const int one_each[] = {1, 1, 1};
        CHECK(s.task->metric == TASKS_METRIC_SQUAD && s.train_on_gold_tokens);
        CHECK(s.train.n == 8 && s.test.n == 8 && s.skipped[TASKS_TRAIN] == 0);
        snprintf(ctx, sizeof ctx, "Title: Lily_and_the_Garden\nContext: %s\nQuestion: How many red roses did Lily grow?\nAnswer:", lily);
        EXPECT(find_ex(&s.train, 1), ctx, 0, " three\n");   /* the question is stripped */
        EXPECT(find_ex(&s.train, 4),
               "Title: Lily_and_the_Garden\nContext: Tom the dog liked to run in the park. One day he found a stick that "
               "was longer than Tom himself. \"That's mine!\" said Tom's friend, Ben.\nQuestion: What did Ben say?\nAnswer:",
               0, " \"That's mine!\"\n");
        /* an article without a title (HF reads ""), two answers; the first is the target */
        EXPECT(find_ex(&s.test, 4),
               "Title: \nContext: A cat sat on the mat. The cat was black and white, and it had an old red ball.\n"
               "Question: What did the cat have?\nAnswer:", 0, " an old red ball\n");
        expect_answers(find_ex(&s.test, 4), cat, one_each, 2);
        expect_prediction(&s, find_ex(&s.test, 4), "An old, red ball!", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 0), "the Denver Broncos", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 0), "Broncos", 0, 2.0 / 3.0);
        expect_prediction(&s, find_ex(&s.test, 1), "24-10", 0, 0);            /* the gold has an en dash */
        expect_prediction(&s, find_ex(&s.test, 1), "24\xe2\x80\x93" "10.", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 2), "Levi's Stadium, Santa Clara", 0, 0.8);
        CHECK(tasks_score_prediction(tasks_find("RTE"), find_ex(&s.test, 0), "x", &(double){0}, &(double){0}) != 0);
        {   /* an example without answers cannot be scored */
            tasks_example none = *find_ex(&s.test, 0);
            none.n_answers = 0;
            CHECK(tasks_score_prediction(s.task, &none, "x", &(double){0}, &(double){0}) != 0);
        }
        tasks_free(&s);
    }
    if (load_all("DROP", "DROP/drop_dataset_train.json", "DROP/drop_dataset_dev.json", &s) == 0) {
        static const char *const two_spans[] = {"Greg Olsen", "Kevin Smith"};
        static const char *const date_golds[] = {"17 August", "August", "17"};
        static const char *const players[] = {"Ahman Green", "Adrian Peterson", "Adrian Peterson", "Ahman Green"};
        static const int n1[] = {2}, n111[] = {1, 1, 1}, n22[] = {2, 2};
        CHECK(s.task->metric == TASKS_METRIC_DROP && s.train_on_gold_tokens);
        /* the empty answer and the number-and-span answer are skipped, as HF "drop" does */
        CHECK(s.train.n == 8 && s.skipped[TASKS_TRAIN] == 2 && s.test.n == 8);
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: Who caught the touchdown pass?\nAnswer:", bears);
        EXPECT(find_ex(&s.train, 1), ctx, 0, " Greg Olsen\n");   /* the question is stripped */
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: How many field goals did Robbie Gould kick?\nAnswer:", bears);
        EXPECT(find_ex(&s.train, 0), ctx, 0, " 2\n");
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: Which players scored touchdowns?\nAnswer:", bears);
        EXPECT(find_ex(&s.train, 3), ctx, 0, " Greg Olsen\n");   /* multi-span: the first span */
        expect_answers(find_ex(&s.train, 3), two_spans, n1, 1);
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: When was the treaty signed?\nAnswer:", treaty);
        EXPECT(find_ex(&s.train, 4), ctx, 0, " 14 March 1812\n");   /* a date: "day month year" */
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: In which year was the treaty signed?\nAnswer:", treaty);
        EXPECT(find_ex(&s.train, 5), ctx, 0, " 1812\n");            /* a year alone, stripped */
        expect_answers(find_ex(&s.test, 3), date_golds, n111, 3);
        expect_answers(find_ex(&s.test, 2), players, n22, 2);
        expect_prediction(&s, find_ex(&s.test, 3), "17 August", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 0), "78", 1, 1);          /* the validated number */
        expect_prediction(&s, find_ex(&s.test, 0), "78 yard", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 0), "yard", 0, 0);        /* numbers must match */
        expect_prediction(&s, find_ex(&s.test, 1), "two", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 1), "2.0", 1, 1);
        expect_prediction(&s, find_ex(&s.test, 2), "Ahman Green", 0, 0.5);   /* one of two spans */
        expect_prediction(&s, find_ex(&s.test, 4), "army of Kantakouzenos", 1, 1);
        tasks_free(&s);
    }
    /* a date is an answer when any one of day, month and year is given: a day alone (of one
       character), a month alone (the sample files have a year alone and all three) */
    if (load_all("DROP", "DROP/dates.json", "DROP/dates.json", &s) == 0) {
        const char *fair = "The fair opened on 5 May 1901 and closed in the autumn.";
        static const char *const day[] = {"5"}, *const month[] = {"May"};
        static const int n1[] = {1};
        CHECK(s.train.n == 2 && s.skipped[TASKS_TRAIN] == 0 && s.test.n == 2);
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: On which day of the month did the fair open?\nAnswer:", fair);
        EXPECT(find_ex(&s.train, 0), ctx, 0, " 5\n");
        expect_answers(find_ex(&s.test, 0), day, n1, 1);
        snprintf(ctx, sizeof ctx, "Passage: %s\nQuestion: In which month did the fair open?\nAnswer:", fair);
        EXPECT(find_ex(&s.train, 1), ctx, 0, " May\n");
        expect_answers(find_ex(&s.test, 1), month, n1, 1);
        tasks_free(&s);
    }
}

/* ======================================================================================
   Every field of every JSON reader, missing and of the wrong type: a valid record per
   format, then each member removed and each member or array element given a value of
   another type, one at a time. A required field is refused naming it by its JSON path
   ("missing \"<path>\"", "\"<path>\" must be ..."); an optional one loads, or has its type
   checked when present. Every path of a record needs a rule, and every rule a path.
   (Mutation runs of tasks.c: a reader that returned success at a missing WiC sentence1 or
   MultiRC passage, its error already written, passed every test; cases were added one
   field at a time before.)
   ====================================================================================== */

enum { F_REQ, F_OPT, F_OPT_TYPED, F_ELEM };

typedef struct field_rule {
    const char *path;
    int kind;                 /* F_REQ: missing and mistyped refused; F_OPT: both load;
                                 F_OPT_TYPED: missing loads, mistyped refused;
                                 F_ELEM: an array element, mistyped refused (never removed) */
    const char *missing_msg;  /* F_REQ: the message when missing, if not "missing \"<path>\"" */
} field_rule;

typedef struct field_doc {
    const char *task, *ext, *text;
    const field_rule *rules;
} field_doc;

static void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* v as JSON, without the member whose value is skip, with replace's value of another type */
static void json_write(FILE *f, const json_value *v, const json_value *skip, const json_value *replace)
{
    size_t i, k = 0;
    if (v == replace) {
        fputs(v->type == JSON_STRING ? "7" : "\"7\"", f);
        return;
    }
    switch (v->type) {
    case JSON_NULL: fputs("null", f); break;
    case JSON_FALSE: fputs("false", f); break;
    case JSON_TRUE: fputs("true", f); break;
    case JSON_NUMBER: if (v->is_integer) fprintf(f, "%lld", v->integer); else fprintf(f, "%.17g", v->number); break;
    case JSON_STRING: json_write_string(f, v->string); break;
    case JSON_ARRAY:
        fputc('[', f);
        for (i = 0; i < v->n; i++) {
            if (i) fputs(", ", f);
            json_write(f, &v->items[i], skip, replace);
        }
        fputc(']', f);
        break;
    case JSON_OBJECT:
        fputc('{', f);
        for (i = 0; i < v->n; i++) {
            if (&v->items[i] == skip) continue;
            if (k++) fputs(", ", f);
            json_write_string(f, v->keys[i]);
            fputs(": ", f);
            json_write(f, &v->items[i], skip, replace);
        }
        fputc('}', f);
        break;
    }
}

typedef struct field_walk {
    const field_doc *doc;
    const json_value *root;
    const char *file;
    int *used;                /* per rule: its path was found */
} field_walk;

/* Writes root with the change, loads it as train and validation file; 0 when it loads. */
static int field_try(const field_walk *w, const json_value *skip, const json_value *replace, char *err, size_t errlen)
{
    FILE *f = fopen(w->file, "wb");
    tasks_set s;
    int rc;
    CHECKF(f != NULL, "cannot write %s", w->file);
    if (!f) return -1;
    json_write(f, w->root, skip, replace);
    fputc('\n', f);
    fclose(f);
    err[0] = '\0';
    rc = tasks_load(w->doc->task, w->file, w->file, 1, -1, 0, -1, &s, err, errlen);
    if (rc == 0) tasks_free(&s);
    return rc;
}

static void field_expect(const field_walk *w, const char *path, const char *change, int rc, const char *err,
                         const char *want)
{
    if (!want) CHECKF(rc == 0, "%s %s: %s %s refused: %s", w->doc->task, w->doc->ext, path, change, err);
    else CHECKF(rc != 0 && strstr(err, want), "%s %s: %s %s: got \"%s\", want \"...%s...\"", w->doc->task, w->doc->ext,
                path, change, rc ? err : "(loaded)", want);
}

static void field_node(const field_walk *w, const json_value *v, const char *path, int is_member);

/* the members or elements of v, each changed in turn */
static void field_children(const field_walk *w, const json_value *v, const char *path)
{
    size_t i;
    if (v->type != JSON_OBJECT && v->type != JSON_ARRAY) return;
    for (i = 0; i < v->n; i++) {
        char sub[256];
        if (v->type == JSON_OBJECT) snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", v->keys[i]);
        else snprintf(sub, sizeof sub, "%s[%lu]", path, (unsigned long)i);
        field_node(w, &v->items[i], sub, v->type == JSON_OBJECT);
    }
}

static void field_node(const field_walk *w, const json_value *v, const char *path, int is_member)
{
    const field_rule *rule = NULL;
    char err[1024], want[320];
    int r, rc;
    for (r = 0; w->doc->rules[r].path; r++)
        if (strcmp(w->doc->rules[r].path, path) == 0) {
            rule = &w->doc->rules[r];
            w->used[r] = 1;
        }
    CHECKF(rule != NULL, "%s %s: no rule for \"%s\"", w->doc->task, w->doc->ext, path);
    if (rule) {
        CHECKF((rule->kind == F_ELEM) == !is_member, "%s: %s", path,
               is_member ? "a member ruled F_ELEM" : "an element not ruled F_ELEM");
        if (is_member) {
            rc = field_try(w, v, NULL, err, sizeof err);
            if (rule->kind == F_REQ) {
                if (rule->missing_msg) snprintf(want, sizeof want, "%s", rule->missing_msg);
                else snprintf(want, sizeof want, "missing \"%s\"", path);
                field_expect(w, path, "missing", rc, err, want);
            } else field_expect(w, path, "missing", rc, err, NULL);
        }
        rc = field_try(w, NULL, v, err, sizeof err);
        snprintf(want, sizeof want, "\"%s\" must be", path);
        field_expect(w, path, "of another type", rc, err, rule->kind == F_OPT ? NULL : want);
    }
    field_children(w, v, path);
}

#define OPT(p) {p, F_OPT, NULL}
#define REQ(p) {p, F_REQ, NULL}
#define ELEM(p) {p, F_ELEM, NULL}
#define TYPED(p) {p, F_OPT_TYPED, NULL}
static const field_rule RULES_NLI[] = {REQ("premise"), REQ("hypothesis"), REQ("label"), OPT("idx"), {NULL, 0, NULL}};
static const field_rule RULES_BOOLQ[] = {REQ("question"), REQ("passage"), REQ("label"), OPT("idx"), {NULL, 0, NULL}};
/* Google's format: without "answer" the record reads as SuperGLUE's, which lacks "label" */
static const field_rule RULES_BOOLQ_GOOGLE[] = {REQ("question"), OPT("title"), {"answer", F_REQ, "missing \"label\""},
                                                REQ("passage"), {NULL, 0, NULL}};
static const field_rule RULES_WIC[] = {REQ("word"), REQ("sentence1"), REQ("sentence2"), OPT("idx"), REQ("label"),
                                       OPT("start1"), OPT("start2"), OPT("end1"), OPT("end2"), OPT("version"),
                                       {NULL, 0, NULL}};
static const field_rule RULES_WSC[] = {REQ("text"), REQ("target"), OPT("target.span2_index"), OPT("target.span1_index"),
                                       REQ("target.span1_text"), REQ("target.span2_text"), OPT("idx"), REQ("label"),
                                       {NULL, 0, NULL}};
static const field_rule RULES_MULTIRC[] = {OPT("idx"), OPT("version"), REQ("passage"), REQ("passage.text"),
                                           REQ("passage.questions"), ELEM("passage.questions[0]"),
                                           REQ("passage.questions[0].question"), REQ("passage.questions[0].answers"),
                                           ELEM("passage.questions[0].answers[0]"),
                                           REQ("passage.questions[0].answers[0].text"),
                                           OPT("passage.questions[0].answers[0].idx"),
                                           REQ("passage.questions[0].answers[0].label"), OPT("passage.questions[0].idx"),
                                           {NULL, 0, NULL}};
static const field_rule RULES_COPA[] = {REQ("premise"), REQ("choice1"), REQ("choice2"), REQ("question"), REQ("label"),
                                        OPT("idx"), {NULL, 0, NULL}};
static const field_rule RULES_SQUAD[] = {OPT("version"), REQ("data"), ELEM("data[0]"), TYPED("data[0].title"),
                                         REQ("data[0].paragraphs"), ELEM("data[0].paragraphs[0]"),
                                         REQ("data[0].paragraphs[0].context"), REQ("data[0].paragraphs[0].qas"),
                                         ELEM("data[0].paragraphs[0].qas[0]"),
                                         REQ("data[0].paragraphs[0].qas[0].answers"),
                                         ELEM("data[0].paragraphs[0].qas[0].answers[0]"),
                                         OPT("data[0].paragraphs[0].qas[0].answers[0].answer_start"),
                                         REQ("data[0].paragraphs[0].qas[0].answers[0].text"),
                                         REQ("data[0].paragraphs[0].qas[0].question"), REQ("data[0].paragraphs[0].qas[0].id"),
                                         {NULL, 0, NULL}};
/* DROP: every key of an answer may be missing (drop_eval.py); without its date this
   answer has none left, and HF "drop" skips the question */
static const field_rule RULES_DROP[] = {
    {"p1", F_REQ, "no examples in the file"}, REQ("p1.passage"), REQ("p1.qa_pairs"), ELEM("p1.qa_pairs[0]"),
    REQ("p1.qa_pairs[0].question"), REQ("p1.qa_pairs[0].query_id"), REQ("p1.qa_pairs[0].answer"),
    TYPED("p1.qa_pairs[0].answer.number"),
    {"p1.qa_pairs[0].answer.date", F_REQ, "no examples in the file (1 skipped: no usable answer)"},
    TYPED("p1.qa_pairs[0].answer.date.day"), TYPED("p1.qa_pairs[0].answer.date.month"),
    TYPED("p1.qa_pairs[0].answer.date.year"), TYPED("p1.qa_pairs[0].answer.spans"),
    TYPED("p1.qa_pairs[0].validated_answers"), ELEM("p1.qa_pairs[0].validated_answers[0]"),
    TYPED("p1.qa_pairs[0].validated_answers[0].number"), TYPED("p1.qa_pairs[0].validated_answers[0].date"),
    TYPED("p1.qa_pairs[0].validated_answers[0].date.day"), TYPED("p1.qa_pairs[0].validated_answers[0].date.month"),
    TYPED("p1.qa_pairs[0].validated_answers[0].date.year"), TYPED("p1.qa_pairs[0].validated_answers[0].spans"),
    ELEM("p1.qa_pairs[0].validated_answers[0].spans[0]"), {NULL, 0, NULL}};
#undef OPT
#undef REQ
#undef ELEM
#undef TYPED

static const field_doc FIELD_DOCS[] = {
    {"RTE", "jsonl", "{\"premise\": \"A dog runs.\", \"hypothesis\": \"An animal moves.\", \"label\": \"entailment\", \"idx\": 0}",
     RULES_NLI},
    {"CB", "jsonl", "{\"premise\": \"A dog runs.\", \"hypothesis\": \"A cat sleeps.\", \"label\": \"neutral\", \"idx\": 0}",
     RULES_NLI},
    {"BoolQ", "jsonl", "{\"question\": \"is the sky blue\", \"passage\": \"Sky -- The sky is blue.\", \"idx\": 0, \"label\": true}",
     RULES_BOOLQ},
    {"BoolQ", "jsonl", "{\"question\": \"is the sky blue\", \"title\": \"Sky\", \"answer\": true, \"passage\": \"The sky is blue.\"}",
     RULES_BOOLQ_GOOGLE},
    {"WiC", "jsonl",
     "{\"word\": \"bank\", \"sentence1\": \"The bank was closed.\", \"sentence2\": \"We sat on the river bank.\", \"idx\": 0, "
     "\"label\": false, \"start1\": 4, \"start2\": 20, \"end1\": 8, \"end2\": 24, \"version\": 1.1}",
     RULES_WIC},
    {"WSC", "jsonl",
     "{\"text\": \"Mark told Pete that he was late.\", \"target\": {\"span2_index\": 4, \"span1_index\": 0, \"span1_text\": "
     "\"Mark\", \"span2_text\": \"he\"}, \"idx\": 0, \"label\": true}",
     RULES_WSC},
    {"MultiRC", "jsonl",
     "{\"idx\": 0, \"version\": 1.1, \"passage\": {\"text\": \"Tom has a red ball.\", \"questions\": [{\"question\": "
     "\"What does Tom have?\", \"answers\": [{\"text\": \"A ball\", \"idx\": 0, \"label\": 1}], \"idx\": 0}]}}",
     RULES_MULTIRC},
    {"COPA", "jsonl",
     "{\"premise\": \"I coughed.\", \"choice1\": \"I inhaled smoke.\", \"choice2\": \"I lowered my voice.\", \"question\": "
     "\"cause\", \"label\": 0, \"idx\": 0}",
     RULES_COPA},
    {"SQuAD", "json",
     "{\"version\": \"1.1\", \"data\": [{\"title\": \"Tom\", \"paragraphs\": [{\"context\": \"Tom has a red ball.\", \"qas\": "
     "[{\"answers\": [{\"answer_start\": 8, \"text\": \"a red ball\"}], \"question\": \"What does Tom have?\", \"id\": "
     "\"q1\"}]}]}]}",
     RULES_SQUAD},
    {"DROP", "json",
     "{\"p1\": {\"passage\": \"The fair opened on 5 May 1901.\", \"qa_pairs\": [{\"question\": \"When did the fair open?\", "
     "\"query_id\": \"q1\", \"answer\": {\"number\": \"\", \"date\": {\"day\": \"5\", \"month\": \"May\", \"year\": "
     "\"1901\"}, \"spans\": []}, \"validated_answers\": [{\"number\": \"\", \"date\": {\"day\": \"\", \"month\": \"\", "
     "\"year\": \"\"}, \"spans\": [\"5 May 1901\"]}]}]}}",
     RULES_DROP},
};

static void case_fields(void)
{
    size_t d;
    for (d = 0; d < sizeof FIELD_DOCS / sizeof FIELD_DOCS[0]; d++) {
        const field_doc *doc = &FIELD_DOCS[d];
        json_value root;
        char err[1024], name[64];
        int used[64] = {0}, r;
        field_walk w;
        snprintf(name, sizeof name, "fields.%s", doc->ext);
        if (json_parse(doc->text, strlen(doc->text), &root, NULL, err, sizeof err)) {
            CHECKF(0, "%s: %s", doc->task, err);
            continue;
        }
        w.doc = doc;
        w.root = &root;
        w.file = scratch(name);
        w.used = used;
        /* the record as it is loads */
        CHECKF(field_try(&w, NULL, NULL, err, sizeof err) == 0, "%s %s: %s", doc->task, doc->ext, err);
        field_children(&w, &root, "");
        for (r = 0; doc->rules[r].path; r++) CHECKF(used[r], "%s: the rule for \"%s\" matched no path", doc->task, doc->rules[r].path);
        json_free(&root);
        remove(w.file);
    }
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (argc > 2) data_dir = argv[2];
    if (argc > 3) scratch_dir = argv[3];
    if (strcmp(c, "table") == 0) case_table();
    else if (strcmp(c, "json") == 0) case_json();
    else if (strcmp(c, "templates") == 0) case_templates();
    else if (strcmp(c, "sampling") == 0) case_sampling();
    else if (strcmp(c, "indices") == 0) case_indices();
    else if (strcmp(c, "indices_bounds") == 0) case_indices_bounds();
    else if (strcmp(c, "malformed") == 0) case_malformed();
    else if (strcmp(c, "resolve") == 0) case_resolve();
    else if (strcmp(c, "qa_score") == 0) case_qa_score();
    else if (strcmp(c, "qa_templates") == 0) case_qa_templates();
    else if (strcmp(c, "fields") == 0) case_fields();
    else if (strcmp(c, "real_data") == 0) {
        const char *root = getenv("GRZO_TASKS_DATA");
        if (!root || !*root) {
            printf("real_data: skipped (set GRZO_TASKS_DATA to the staged shared/data directory)\n");
            return 77;
        }
        case_real_data(root);
    } else {
        fprintf(stderr, "usage: %s table|json|templates|sampling|indices|indices_bounds|malformed|resolve|qa_score|qa_templates|fields|real_data <data dir> <scratch dir>\n",
                argv[0]);
        return 1;
    }
    printf("%s: %ld checks, %d failed\n", c, checks, failures);
    return failures ? 1 : 0;
}
