/* tasks.c - see tasks.h. Sections: helpers (errors, arena, strings, UTF-8, files), the
   JSON reader, the file readers (jsonl, tsv, csv), the per-task field extractors, the
   templates, the task table, sampling, loading, indices files, directory resolution, and
   the --help / log printers. */
#include "tasks.h"
#include "json.h"
#include "text.h"
#include "qa_score.h"
#include "files.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#if !defined(_WIN32)
/* POSIX, for the indices file's fsync; declared here (as grzo.h does) so that the file
   builds under strict -std=c99 */
extern int fsync(int fd);
extern int fileno(FILE *stream);
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TASKS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TASKS_PRINTF(a, b)
#endif

/* ======================================================================================
   Errors
   ====================================================================================== */

static void set_err(char *err, size_t errlen, const char *fmt, ...) TASKS_PRINTF(3, 4);
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ======================================================================================
   Arena: every string of a loaded set lives in one, so tasks_free is one call and a
   failed load cannot leak half an example.
   ====================================================================================== */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
} arena_chunk;

typedef struct arena {
    arena_chunk *head;
} arena;

#define ARENA_ALIGN 16
#define ARENA_HEADER ((sizeof(arena_chunk) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)

static void *arena_alloc(arena *a, size_t size)
{
    arena_chunk *c = a->head;
    size_t need = (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (need < size) return NULL;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > (size_t)65536 ? need : (size_t)65536;
        if (cap > SIZE_MAX - ARENA_HEADER) return NULL;
        c = (arena_chunk *)malloc(ARENA_HEADER + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    {
        void *p = (char *)c + ARENA_HEADER + c->used;
        c->used += need;
        return p;
    }
}

static char *arena_strndup(arena *a, const char *s, size_t n)
{
    char *p;
    if (n == SIZE_MAX) return NULL;
    p = (char *)arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void arena_release(arena *a)
{
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ======================================================================================
   UTF-8 and Python-compatible whitespace handling
   ====================================================================================== */

/* The UTF-8 decoder (utf8_seq) and Python's whitespace set (qa_py_isspace) are
   qa_score.c's: the scorers need them too. */

/* Offset of the first byte that is not valid UTF-8 (or a NUL), or n if all is well. */
static size_t utf8_first_bad(const char *s, size_t n, int *is_nul)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    *is_nul = 0;
    while (i < n) {
        size_t l;
        if (u[i] == 0) {
            *is_nul = 1;
            return i;
        }
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        l = utf8_seq(u + i, n - i, NULL);
        if (!l) return i;
        i += l;
    }
    return n;
}

typedef struct slice {
    const char *p;
    size_t n;
} slice;

static slice slice_of(const char *s) { slice r; r.p = s; r.n = strlen(s); return r; }

/* Python's .strip(' '): spaces only, so newlines survive (MeZO's prompt assembly). */
static slice strip_spaces(slice s)
{
    while (s.n && s.p[0] == ' ') { s.p++; s.n--; }
    while (s.n && s.p[s.n - 1] == ' ') s.n--;
    return s;
}

static slice lstrip_ws(slice s)
{
    while (s.n) {
        uint32_t cp;
        size_t l = utf8_seq((const unsigned char *)s.p, s.n, &cp);
        if (!l || !qa_py_isspace(cp)) break;
        s.p += l;
        s.n -= l;
    }
    return s;
}

/* Start of the last code point of s (the text is valid UTF-8 by the time we get here). */
static size_t last_cp_start(slice s)
{
    size_t i = s.n;
    if (i == 0) return 0;
    i--;
    while (i > 0 && ((unsigned char)s.p[i] & 0xC0) == 0x80) i--;
    return i;
}

static slice rstrip_ws(slice s)
{
    while (s.n) {
        size_t start = last_cp_start(s);
        uint32_t cp;
        size_t l = utf8_seq((const unsigned char *)s.p + start, s.n - start, &cp);
        if (!l || !qa_py_isspace(cp)) break;
        s.n = start;
    }
    return s;
}

static slice strip_ws(slice s) { return rstrip_ws(lstrip_ws(s)); }

static char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }
static char ascii_upper(char c) { return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c; }

static void sb_slice(sbuf *b, slice s) { sb_put(b, s.p, s.n); }

/* ======================================================================================
   Files
   ====================================================================================== */

static int read_file(const char *path, char **data, size_t *size, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (!f) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        size_t got;
        if (cap - len < 65536) {
            size_t ncap = cap ? cap * 2 : 1 << 20;
            char *nb;
            if (ncap < cap) { free(buf); fclose(f); set_err(err, errlen, "%s: file too large", path); return -1; }
            nb = (char *)realloc(buf, ncap + 1);
            if (!nb) { free(buf); fclose(f); set_err(err, errlen, "%s: out of memory", path); return -1; }
            buf = nb;
            cap = ncap;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        set_err(err, errlen, "%s: cannot read: %s", path, e ? strerror(e) : "read error");
        return -1;
    }
    fclose(f);
    buf[len] = '\0';
    *data = buf;
    *size = len;
    return 0;
}

static int file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

/* FNV-1a 64: a cheap fingerprint so an indices file notices changed data. */
static uint64_t fnv1a64(const char *s, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static const char *file_extension(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash)) return "";
    return dot + 1;
}

static int streq_nocase(const char *a, const char *b)
{
    while (*a && *b) {
        if (ascii_lower(*a) != ascii_lower(*b)) return 0;
        a++;
        b++;
    }
    return *a == *b;
}


static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* ======================================================================================
   Pools: the examples of one file, before sampling. A unit holds the raw text fields a
   template needs (which fields depends on the task) and the gold index.
   ====================================================================================== */

#define UNIT_FIELDS 4

typedef struct unit {
    const char *f[UNIT_FIELDS];
    int label;
    long line;
    const qa_answer *answers;   /* generation tasks: the gold answers (in the pool's arena) */
    int n_answers;
    const char *id;             /* generation tasks: the question's id */
} unit;

typedef struct pool {
    const char *path;
    char *data;             /* the file; TSV/CSV fields point into it (split in place) */
    size_t size;
    uint64_t hash;
    unit *u;
    size_t n, cap;
    arena strings;          /* decoded JSON strings */
    size_t skipped;
} pool;

static void pool_release(pool *p)
{
    free(p->data);
    free(p->u);
    arena_release(&p->strings);
    memset(p, 0, sizeof *p);
}

/* Reading context: which file and line, and where the error goes. */
typedef struct rd {
    pool *p;
    long line;
    char *err;
    size_t errlen;
} rd;

static int rd_fail(rd *r, const char *fmt, ...) TASKS_PRINTF(2, 3);
static int rd_fail(rd *r, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->line > 0) set_err(r->err, r->errlen, "%s:%ld: %s", r->p->path, r->line, msg);
    else set_err(r->err, r->errlen, "%s: %s", r->p->path, msg);   /* a whole-file document */
    return -1;
}

static int pool_add(rd *r, const unit *u)
{
    pool *p = r->p;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        unit *nu;
        if (cap > SIZE_MAX / sizeof(unit)) return rd_fail(r, "out of memory");
        nu = (unit *)realloc(p->u, cap * sizeof *nu);
        if (!nu) return rd_fail(r, "out of memory");
        p->u = nu;
        p->cap = cap;
    }
    p->u[p->n] = *u;
    p->u[p->n].line = r->line;
    p->n++;
    return 0;
}

/* ---- JSON field access with messages that name the field ---- */

static const json_value *jfield(rd *r, const json_value *obj, const char *where, const char *key)
{
    const json_value *v = json_get(obj, key);
    if (!v) {
        if (strcmp(key, "label") == 0)
            rd_fail(r, "missing \"%s%s\" (an unlabeled split such as a SuperGLUE test.jsonl cannot be used)", where, key);
        else
            rd_fail(r, "missing \"%s%s\"", where, key);
    }
    return v;
}

static const char *jtext(rd *r, const json_value *obj, const char *where, const char *key)
{
    const json_value *v = jfield(r, obj, where, key);
    char *s;
    if (!v) return NULL;
    if (v->type != JSON_STRING) {
        rd_fail(r, "\"%s%s\" must be a string", where, key);
        return NULL;
    }
    s = arena_strndup(&r->p->strings, v->string, v->string_len);
    if (!s) rd_fail(r, "out of memory");
    return s;
}

static int jbool(rd *r, const json_value *obj, const char *where, const char *key, int *out)
{
    const json_value *v = jfield(r, obj, where, key);
    if (!v) return -1;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return rd_fail(r, "\"%s%s\" must be true or false", where, key);
    *out = v->type == JSON_TRUE;
    return 0;
}

/* An integer label in [0, n); accept_bool also takes false/true as 0/1 (MultiRC's answers
   are 0/1 in SuperGLUE, HF casts them with bool()). */
static int jint_label(rd *r, const json_value *obj, const char *where, const char *key, int n, int accept_bool,
                      int *out)
{
    const json_value *v = jfield(r, obj, where, key);
    if (!v) return -1;
    if (accept_bool && (v->type == JSON_TRUE || v->type == JSON_FALSE)) {
        *out = v->type == JSON_TRUE;
        return 0;
    }
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer >= n)
        return rd_fail(r, "\"%s%s\" must be an integer from 0 to %d", where, key, n - 1);
    *out = (int)v->integer;
    return 0;
}

/* A label given as a word ("entailment"); words[i] maps to candidate i. */
static int word_index(const char *s, const char *const *words)
{
    int i;
    for (i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0) return i;
    return -1;
}

static void join_words(const char *const *words, char *buf, size_t len)
{
    size_t used = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; words[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "", words[i]);
}

static int jword_label(rd *r, const json_value *obj, const char *key, const char *const *words, int *out)
{
    const json_value *v = jfield(r, obj, "", key);
    char list[256];
    if (!v) return -1;
    join_words(words, list, sizeof list);
    if (v->type != JSON_STRING) return rd_fail(r, "\"%s\" must be one of %s", key, list);
    *out = word_index(v->string, words);
    if (*out < 0) return rd_fail(r, "\"%s\" is \"%.40s\", not one of %s", key, v->string, list);
    return 0;
}

/* ======================================================================================
   Per-task field extraction. Unit fields per task:
     SST-2, SST-5, TREC:  f0 sentence
     RTE, CB, MNLI, SNLI: f0 premise, f1 hypothesis
     BoolQ:               f0 passage, f1 question
     WiC:                 f0 word, f1 sentence1, f2 sentence2
     WSC:                 f0 text, f1 span1_text, f2 span2_text
     MultiRC:             f0 paragraph, f1 question, f2 answer
     COPA:                f0 premise, f1 choice1, f2 choice2, f3 "cause" or "effect"
   ====================================================================================== */

/* Label words in candidate order (MeZO's verbalizers index by these). */
static const char *const RTE_LABELS[] = {"entailment", "not_entailment", NULL};
static const char *const CB_LABELS[] = {"entailment", "contradiction", "neutral", NULL};
/* LM-BFF's MnliProcessor/SnliProcessor.get_labels() order. */
static const char *const NLI_LABELS[] = {"contradiction", "entailment", "neutral", NULL};

static int premise_hypothesis_json(rd *r, const json_value *o, const char *const *labels)
{
    unit u;
    memset(&u, 0, sizeof u);
    if (!(u.f[0] = jtext(r, o, "", "premise"))) return -1;
    if (!(u.f[1] = jtext(r, o, "", "hypothesis"))) return -1;
    if (jword_label(r, o, "label", labels, &u.label)) return -1;
    return pool_add(r, &u);
}

static int rte_json(rd *r, const json_value *o) { return premise_hypothesis_json(r, o, RTE_LABELS); }
static int cb_json(rd *r, const json_value *o) { return premise_hypothesis_json(r, o, CB_LABELS); }

/* SuperGLUE's BoolQ passage is "<title> -- <passage>"; MeZO's HF "boolq" has no title. */
static const char *boolq_strip_title(const char *passage)
{
    const char *sep = strstr(passage, " -- ");
    return sep ? sep + 4 : passage;
}

static int boolq_json(rd *r, const json_value *o)
{
    unit u;
    int answer = 0;
    int superglue = json_get(o, "label") != NULL || json_get(o, "answer") == NULL;
    memset(&u, 0, sizeof u);
    if (!(u.f[0] = jtext(r, o, "", "passage"))) return -1;
    if (!(u.f[1] = jtext(r, o, "", "question"))) return -1;
    if (jbool(r, o, "", superglue ? "label" : "answer", &answer)) return -1;
    if (superglue) u.f[0] = boolq_strip_title(u.f[0]);
    u.label = answer ? 0 : 1; /* candidates are ["Yes", "No"] */
    return pool_add(r, &u);
}

static int wic_json(rd *r, const json_value *o)
{
    unit u;
    memset(&u, 0, sizeof u);
    if (!(u.f[0] = jtext(r, o, "", "word"))) return -1;
    if (!(u.f[1] = jtext(r, o, "", "sentence1"))) return -1;
    if (!(u.f[2] = jtext(r, o, "", "sentence2"))) return -1;
    if (jbool(r, o, "", "label", &u.label)) return -1; /* candidates ["No", "Yes"] */
    return pool_add(r, &u);
}

static int wsc_json(rd *r, const json_value *o)
{
    unit u;
    const json_value *target;
    memset(&u, 0, sizeof u);
    if (!(u.f[0] = jtext(r, o, "", "text"))) return -1;
    if (!(target = jfield(r, o, "", "target"))) return -1;
    if (target->type != JSON_OBJECT) return rd_fail(r, "\"target\" must be an object");
    if (!(u.f[1] = jtext(r, target, "target.", "span1_text"))) return -1;
    if (!(u.f[2] = jtext(r, target, "target.", "span2_text"))) return -1;
    if (jbool(r, o, "", "label", &u.label)) return -1;
    return pool_add(r, &u);
}

/* One unit per (question, answer), in file order, as HF super_glue/multirc flattens it. */
static int multirc_json(rd *r, const json_value *o)
{
    const json_value *passage, *questions;
    const char *paragraph;
    size_t qi, ai;
    if (!(passage = jfield(r, o, "", "passage"))) return -1;
    if (passage->type != JSON_OBJECT) return rd_fail(r, "\"passage\" must be an object");
    if (!(paragraph = jtext(r, passage, "passage.", "text"))) return -1;
    if (!(questions = jfield(r, passage, "passage.", "questions"))) return -1;
    if (questions->type != JSON_ARRAY) return rd_fail(r, "\"passage.questions\" must be an array");
    for (qi = 0; qi < questions->n; qi++) {
        const json_value *q = &questions->items[qi], *answers;
        const char *question;
        char where[64];
        if (q->type != JSON_OBJECT) return rd_fail(r, "\"passage.questions[%lu]\" must be an object", (unsigned long)qi);
        sprintf(where, "passage.questions[%lu].", (unsigned long)qi);
        if (!(question = jtext(r, q, where, "question"))) return -1;
        if (!(answers = jfield(r, q, where, "answers"))) return -1;
        if (answers->type != JSON_ARRAY) return rd_fail(r, "\"%sanswers\" must be an array", where);
        for (ai = 0; ai < answers->n; ai++) {
            const json_value *a = &answers->items[ai];
            char awhere[96];
            unit u;
            memset(&u, 0, sizeof u);
            sprintf(awhere, "%sanswers[%lu].", where, (unsigned long)ai);
            if (a->type != JSON_OBJECT)
                return rd_fail(r, "\"%sanswers[%lu]\" must be an object", where, (unsigned long)ai);
            u.f[0] = paragraph;
            u.f[1] = question;
            if (!(u.f[2] = jtext(r, a, awhere, "text"))) return -1;
            if (jint_label(r, a, awhere, "label", 2, 1, &u.label)) return -1;
            if (pool_add(r, &u)) return -1;
        }
    }
    return 0;
}

static int is_blank_spaces(const char *s)
{
    return strip_spaces(slice_of(s)).n == 0;
}

static int copa_json(rd *r, const json_value *o)
{
    unit u;
    const char *q;
    memset(&u, 0, sizeof u);
    if (!(u.f[0] = jtext(r, o, "", "premise"))) return -1;
    if (!(u.f[1] = jtext(r, o, "", "choice1"))) return -1;
    if (!(u.f[2] = jtext(r, o, "", "choice2"))) return -1;
    if (!(q = jtext(r, o, "", "question"))) return -1;
    if (strcmp(q, "cause") != 0 && strcmp(q, "effect") != 0)
        return rd_fail(r, "\"question\" is \"%.40s\", not \"cause\" or \"effect\"", q);
    u.f[3] = q;
    /* a blank choice would be an empty continuation, which cannot be scored */
    if (is_blank_spaces(u.f[1]) || is_blank_spaces(u.f[2])) return rd_fail(r, "\"choice1\"/\"choice2\" must not be blank");
    if (jint_label(r, o, "", "label", 2, 0, &u.label)) return -1;
    return pool_add(r, &u);
}

/* ---- TSV rows with a header (GLUE, LM-BFF k-shot) ---- */

typedef struct tsv_header {
    char **name;
    size_t n;
} tsv_header;

static int column(const tsv_header *h, const char *name)
{
    size_t i;
    for (i = 0; i < h->n; i++)
        if (strcmp(h->name[i], name) == 0) return (int)i;
    return -1;
}

/* Strict decimal label in [0, n). */
static int parse_label_number(const char *s, int n, int *out)
{
    long v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (!is_digit(*s)) return -1;
        v = v * 10 + (*s - '0');
        if (v >= n) return -1;
    }
    *out = (int)v;
    return 0;
}

static int sst2_tsv(rd *r, const tsv_header *h, char **f, size_t nf)
{
    unit u;
    (void)nf;
    memset(&u, 0, sizeof u);
    u.f[0] = f[column(h, "sentence")];
    if (parse_label_number(f[column(h, "label")], 2, &u.label))
        return rd_fail(r, "label \"%.40s\" is not 0 or 1", f[column(h, "label")]);
    return pool_add(r, &u);
}

static int rte_tsv(rd *r, const tsv_header *h, char **f, size_t nf)
{
    unit u;
    const char *label = f[column(h, "label")];
    (void)nf;
    memset(&u, 0, sizeof u);
    u.f[0] = f[column(h, "sentence1")];
    u.f[1] = f[column(h, "sentence2")];
    u.label = word_index(label, RTE_LABELS);
    if (u.label < 0) return rd_fail(r, "label \"%.40s\" is not \"entailment\" or \"not_entailment\"", label);
    return pool_add(r, &u);
}

/* LM-BFF takes the gold label from the LAST field (line[-1]): SNLI rows with five
   annotator labels have more fields than the header names. Rows whose gold label is "-"
   (no annotator majority) are skipped and counted. */
static int nli_tsv(rd *r, const tsv_header *h, char **f, size_t nf)
{
    unit u;
    const char *gold = f[nf - 1];
    memset(&u, 0, sizeof u);
    u.f[0] = f[column(h, "sentence1")];
    u.f[1] = f[column(h, "sentence2")];
    if (strcmp(gold, "-") == 0) {
        r->p->skipped++;
        return 0;
    }
    u.label = word_index(gold, NLI_LABELS);
    if (u.label < 0) return rd_fail(r, "gold label \"%.40s\" is not entailment, neutral or contradiction", gold);
    return pool_add(r, &u);
}

/* ---- Whole-file JSON documents: SQuAD v1.1 and DROP ----
   Unit fields: SQuAD f0 title, f1 context, f2 question, f3 the training answer;
                DROP  f0 passage, f1 question, f3 the training answer.
   Messages name the value by its JSON path: "train-v1.1.json: "data[0].paragraphs[2].qas[1].answers"
   must be an array". */

/* n answers of one span each, or with room for spans, in the pool's arena */
static qa_answer *new_answers(rd *r, size_t n)
{
    qa_answer *a = n > SIZE_MAX / sizeof *a ? NULL : (qa_answer *)arena_alloc(&r->p->strings, n * sizeof *a);
    if (!a) rd_fail(r, "out of memory");
    return a;
}

static const char **new_spans(rd *r, size_t n)
{
    const char **s = n > SIZE_MAX / sizeof *s ? NULL : (const char **)arena_alloc(&r->p->strings, (n ? n : 1) * sizeof *s);
    if (!s) rd_fail(r, "out of memory");
    return s;
}

static const json_value *jarray(rd *r, const json_value *obj, const char *where, const char *key)
{
    const json_value *v = jfield(r, obj, where, key);
    if (v && v->type != JSON_ARRAY) {
        rd_fail(r, "\"%s%s\" must be an array", where, key);
        return NULL;
    }
    return v;
}

static int jobject_at(rd *r, const json_value *v, const char *where)
{
    return v->type == JSON_OBJECT ? 0 : rd_fail(r, "\"%s\" must be an object", where);
}

/* One SQuAD question: MeZO trains on answers[0] and scores against all of them. */
static int squad_question(rd *r, const json_value *qa, const char *where, const char *title, const char *context)
{
    const json_value *answers;
    unit u;
    size_t i;
    char awhere[256];
    qa_answer *golds;
    memset(&u, 0, sizeof u);
    if (jobject_at(r, qa, where)) return -1;
    snprintf(awhere, sizeof awhere, "%s.", where);
    if (!(u.f[2] = jtext(r, qa, awhere, "question")) || !(u.id = jtext(r, qa, awhere, "id"))) return -1;
    if (!(answers = jarray(r, qa, awhere, "answers"))) return -1;
    if (answers->n == 0)
        return rd_fail(r, "\"%sanswers\" is empty (SQuAD 2.0's unanswerable questions cannot be trained on: use "
                          "SQuAD v1.1's train-v1.1.json / dev-v1.1.json)", awhere);
    if (answers->n > INT_MAX || !(golds = new_answers(r, answers->n))) return answers->n > INT_MAX ? rd_fail(r, "too many answers") : -1;
    for (i = 0; i < answers->n; i++) {
        const char **span = new_spans(r, 1);
        snprintf(awhere, sizeof awhere, "%s.answers[%lu]", where, (unsigned long)i);
        if (!span || jobject_at(r, &answers->items[i], awhere)) return -1;
        strcat(awhere, ".");
        if (!(span[0] = jtext(r, &answers->items[i], awhere, "text"))) return -1;
        golds[i].spans = span;
        golds[i].n_spans = 1;
    }
    u.f[0] = title;
    u.f[1] = context;
    u.f[3] = golds[0].spans[0];
    u.answers = golds;
    u.n_answers = (int)answers->n;
    return pool_add(r, &u);
}

/* SQuAD v1.1: {"data": [{"title", "paragraphs": [{"context", "qas": [{"question", "id",
   "answers": [{"text", "answer_start"}]}]}]}]}; one example per question, in file order
   (HF "squad"; a missing title is "", as HF reads it). */
static int squad_doc(rd *r, const json_value *root)
{
    const json_value *data;
    size_t ai, pi, qi;
    char where[192];
    if (!(data = jarray(r, root, "", "data"))) return -1;
    for (ai = 0; ai < data->n; ai++) {
        const json_value *article = &data->items[ai], *paragraphs;
        const char *title = "";
        snprintf(where, sizeof where, "data[%lu]", (unsigned long)ai);
        if (jobject_at(r, article, where)) return -1;
        strcat(where, ".");
        if (json_get(article, "title") && !(title = jtext(r, article, where, "title"))) return -1;
        if (!(paragraphs = jarray(r, article, where, "paragraphs"))) return -1;
        for (pi = 0; pi < paragraphs->n; pi++) {
            const json_value *par = &paragraphs->items[pi], *qas;
            const char *context;
            snprintf(where, sizeof where, "data[%lu].paragraphs[%lu]", (unsigned long)ai, (unsigned long)pi);
            if (jobject_at(r, par, where)) return -1;
            strcat(where, ".");
            if (!(context = jtext(r, par, where, "context")) || !(qas = jarray(r, par, where, "qas"))) return -1;
            for (qi = 0; qi < qas->n; qi++) {
                char qwhere[sizeof where + 32];   /* where, "qas[", an index, "]" */
                snprintf(qwhere, sizeof qwhere, "%sqas[%lu]", where, (unsigned long)qi);
                if (squad_question(r, &qas->items[qi], qwhere, title, context)) return -1;
            }
        }
    }
    return 0;
}

/* A DROP answer object {"number", "date": {"day", "month", "year"}, "spans"}: every key
   may be missing (drop_eval.py reads them so); present ones must have the official types. */
typedef struct drop_answer {
    const char *number, *date;   /* date: "day month year", stripped ("" when none) */
    int date_given;              /* any of day, month, year non-empty */
    const char **spans;
    int n_spans;
} drop_answer;

static int drop_answer_read(rd *r, const json_value *a, const char *where, drop_answer *out)
{
    const json_value *date, *spans;
    char w[256];
    size_t i;
    memset(out, 0, sizeof *out);
    out->number = out->date = "";
    if (jobject_at(r, a, where)) return -1;
    snprintf(w, sizeof w, "%s.", where);
    if (json_get(a, "number") && !(out->number = jtext(r, a, w, "number"))) return -1;
    if ((date = json_get(a, "date"))) {
        static const char *const PARTS[] = {"day", "month", "year"};
        const char *part[3] = {"", "", ""};
        sbuf b = {NULL, 0, 0, 0};
        snprintf(w, sizeof w, "%s.date", where);
        if (jobject_at(r, date, w)) return -1;
        strcat(w, ".");
        for (i = 0; i < 3; i++)
            if (json_get(date, PARTS[i]) && !(part[i] = jtext(r, date, w, PARTS[i]))) return -1;
        out->date_given = part[0][0] || part[1][0] || part[2][0];
        /* "{day} {month} {year}".strip() (drop_eval.py; HF's DropDateObject likewise) */
        for (i = 0; i < 3; i++) {
            if (i) sb_putc(&b, ' ');
            sb_puts(&b, part[i]);
        }
        {
            slice d = strip_ws(slice_of(b.p ? b.p : ""));
            out->date = b.oom ? NULL : arena_strndup(&r->p->strings, d.p, d.n);
        }
        sb_free(&b);
        if (!out->date) return rd_fail(r, "out of memory");
    }
    snprintf(w, sizeof w, "%s.", where);
    if (json_get(a, "spans")) {
        if (!(spans = jarray(r, a, w, "spans"))) return -1;
        if (spans->n > INT_MAX) return rd_fail(r, "too many spans");
        if (!(out->spans = new_spans(r, spans->n))) return -1;
        for (i = 0; i < spans->n; i++) {
            if (spans->items[i].type != JSON_STRING) return rd_fail(r, "\"%sspans[%lu]\" must be a string", w, (unsigned long)i);
            if (!(out->spans[i] = arena_strndup(&r->p->strings, spans->items[i].string, spans->items[i].string_len)))
                return rd_fail(r, "out of memory");
        }
        out->n_spans = (int)spans->n;
    }
    return 0;
}

/* drop_eval.py's answer_json_to_strings: the number, else the spans, else the date. */
static int drop_gold(rd *r, const drop_answer *a, qa_answer *gold)
{
    const char **one;
    if (!a->number[0] && a->n_spans) {
        gold->spans = a->spans;
        gold->n_spans = a->n_spans;
        return 0;
    }
    if (!(one = new_spans(r, 1))) return -1;
    one[0] = a->number[0] ? a->number : a->date;
    gold->spans = one;
    gold->n_spans = 1;
    return 0;
}

/* MeZO's training answer, answers_spans["spans"][0] of HF "drop" (build_answers of the
   "answer"): the number, else the date, else the first span; NULL when HF drops the
   question (no answer, or an answer that is two kinds at once). */
static const char *drop_target(const drop_answer *a)
{
    if (a->number[0]) return a->date_given || a->n_spans ? NULL : a->number;
    if (a->date_given) return a->n_spans ? NULL : a->date;
    return a->n_spans ? a->spans[0] : NULL;
}

static int drop_question(rd *r, const json_value *qa, const char *where, const char *passage)
{
    const json_value *validated;
    drop_answer answer;
    unit u;
    size_t i, n_golds = 1;
    char w[288];   /* where (a question's location, under 224 bytes), ".validated_answers[", an index, "]" */
    qa_answer *golds;
    memset(&u, 0, sizeof u);
    if (jobject_at(r, qa, where)) return -1;
    snprintf(w, sizeof w, "%s.", where);
    if (!(u.f[1] = jtext(r, qa, w, "question")) || !(u.id = jtext(r, qa, w, "query_id"))) return -1;
    if (!jfield(r, qa, w, "answer")) return -1;
    snprintf(w, sizeof w, "%s.answer", where);
    if (drop_answer_read(r, json_get(qa, "answer"), w, &answer)) return -1;
    snprintf(w, sizeof w, "%s.", where);
    validated = json_get(qa, "validated_answers");
    if (validated && !(validated = jarray(r, qa, w, "validated_answers"))) return -1;
    if (validated) n_golds += validated->n;
    if (n_golds > INT_MAX) return rd_fail(r, "too many answers");
    if (!(golds = new_answers(r, n_golds)) || drop_gold(r, &answer, &golds[0])) return -1;
    for (i = 1; i < n_golds; i++) {
        drop_answer v;
        snprintf(w, sizeof w, "%s.validated_answers[%lu]", where, (unsigned long)(i - 1));
        if (drop_answer_read(r, &validated->items[i - 1], w, &v) || drop_gold(r, &v, &golds[i])) return -1;
    }
    if (!(u.f[3] = drop_target(&answer))) {   /* HF (so MeZO) skips it: 9 train questions, 1 dev */
        r->p->skipped++;
        return 0;
    }
    u.f[0] = passage;
    u.answers = golds;
    u.n_answers = (int)n_golds;
    return pool_add(r, &u);
}

/* DROP: {"<passage id>": {"passage", "qa_pairs": [{"question", "query_id", "answer",
   "validated_answers"}]}}; one example per question, in file order (HF "drop"). */
static int drop_doc(rd *r, const json_value *root)
{
    size_t si, qi;
    if (root->type != JSON_OBJECT) return rd_fail(r, "the file is not a JSON object of passages (a DROP file)");
    for (si = 0; si < root->n; si++) {
        const json_value *section = &root->items[si], *pairs;
        const char *passage;
        char where[192];
        snprintf(where, sizeof where, "%.120s", root->keys[si]);
        if (jobject_at(r, section, where)) return -1;
        strcat(where, ".");
        if (!(passage = jtext(r, section, where, "passage")) || !(pairs = jarray(r, section, where, "qa_pairs"))) return -1;
        for (qi = 0; qi < pairs->n; qi++) {
            char qwhere[sizeof where + 32];   /* where, "qa_pairs[", an index, "]" */
            snprintf(qwhere, sizeof qwhere, "%sqa_pairs[%lu]", where, (unsigned long)qi);
            if (drop_question(r, &pairs->items[qi], qwhere, passage)) return -1;
        }
    }
    return 0;
}

/* ======================================================================================
   Templates. Each writes MeZO's encode() into enc and, per candidate, what verbalize()
   adds after it into suf[k] (for every template here verbalize = encode + suffix).
   ====================================================================================== */

typedef struct render_buf {
    sbuf enc;
    sbuf suf[TASKS_MAX_CANDIDATES];
    sbuf full;
    int n;
} render_buf;

typedef struct task_def task_def;
typedef void (*template_fn)(const task_def *t, const unit *u, render_buf *rb);

/* Each candidate's suffix is the candidate word itself. */
static void suffix_candidates(const task_def *t, render_buf *rb);

/* SST-2 (MeZO SST2Template) and SST-5 (LM-BFF "*cls**sent_0*_It_was*mask*.*sep+*"): the
   sentence (Python-stripped), " It was", then the label word with its space. LM-BFF's
   trailing "." after the mask is dropped: a causal LM scores up to the label word, as
   MeZO's SST-2 template does. */
static void template_it_was(const task_def *t, const unit *u, render_buf *rb)
{
    sb_slice(&rb->enc, strip_ws(slice_of(u->f[0])));
    sb_puts(&rb->enc, " It was");
    suffix_candidates(t, rb);
}

/* TREC (LM-BFF "*cls**mask*:*+sent_0**sep+*"): the label word comes FIRST, so a causal LM
   has no context to condition it on; the continuation is the whole "<Word>: <question>"
   and the context is empty (as MeZO's Winogrande template does). The candidates then
   differ in the label word and in how well the question fits after it. */
static void template_trec(const task_def *t, const unit *u, render_buf *rb);

/* MNLI/SNLI (LM-BFF "*cls**sent-_0*?*mask*,*+sentl_1**sep+*"): premise without its last
   character, "?", then " <Word>, <hypothesis with its first letter lower-cased>". The
   mask is not last, so the continuation covers the label word and the hypothesis. */
static void template_nli(const task_def *t, const unit *u, render_buf *rb);

static void template_rte(const task_def *t, const unit *u, render_buf *rb)
{
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, "\nDoes this mean that \"");
    sb_puts(&rb->enc, u->f[1]);
    sb_puts(&rb->enc, "\" is true? Yes or No?\n");
    suffix_candidates(t, rb);
}

static void template_cb(const task_def *t, const unit *u, render_buf *rb)
{
    sb_puts(&rb->enc, "Suppose ");
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, " Can we infer that \"");
    sb_puts(&rb->enc, u->f[1]);
    sb_puts(&rb->enc, "\"? Yes, No, or Maybe?\n");
    suffix_candidates(t, rb);
}

/* MeZO's default BoolQ template is version 2 = BoolQTemplateV3. */
static void template_boolq(const task_def *t, const unit *u, render_buf *rb)
{
    const char *q = u->f[1];
    size_t qn = strlen(q);
    sb_puts(&rb->enc, u->f[0]);
    sb_putc(&rb->enc, ' ');
    if (qn) {
        sb_putc(&rb->enc, ascii_upper(q[0]));
        sb_put(&rb->enc, q + 1, qn - 1);
    }
    if (qn == 0 || q[qn - 1] != '?') sb_putc(&rb->enc, '?');
    sb_putc(&rb->enc, '\n');
    suffix_candidates(t, rb);
}

static void template_wic(const task_def *t, const unit *u, render_buf *rb)
{
    sb_puts(&rb->enc, "Does the word \"");
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, "\" have the same meaning in these two sentences? Yes, No?\n");
    sb_puts(&rb->enc, u->f[1]);
    sb_putc(&rb->enc, '\n');
    sb_puts(&rb->enc, u->f[2]);
    sb_putc(&rb->enc, '\n');
    suffix_candidates(t, rb);
}

static void template_wsc(const task_def *t, const unit *u, render_buf *rb)
{
    const char *s;
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, "\nIn the previous sentence, does the pronoun \"");
    for (s = u->f[2]; *s; s++) sb_putc(&rb->enc, ascii_lower(*s));
    sb_puts(&rb->enc, "\" refer to ");
    sb_puts(&rb->enc, u->f[1]);
    sb_puts(&rb->enc, "? Yes or No?\n");
    suffix_candidates(t, rb);
}

static void template_multirc(const task_def *t, const unit *u, render_buf *rb)
{
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, "\nQuestion: ");
    sb_puts(&rb->enc, u->f[1]);
    sb_puts(&rb->enc, "\nI found this answer \"");
    sb_puts(&rb->enc, u->f[2]);
    sb_puts(&rb->enc, "\". Is that correct? Yes or No?\n");
    suffix_candidates(t, rb);
}

/* MeZO CopaTemplate, capitalization "correct": c.split(" ")[0] is lower-cased unless it
   is exactly "I". */
static void copa_choice(sbuf *b, const char *c)
{
    size_t w = strcspn(c, " ");
    if (w == 1 && c[0] == 'I') {
        sb_puts(b, c);
        return;
    }
    {
        size_t i;
        for (i = 0; i < w; i++) sb_putc(b, ascii_lower(c[i]));
        sb_puts(b, c + w);
    }
}

static void template_copa(const task_def *t, const unit *u, render_buf *rb)
{
    slice premise = rstrip_ws(slice_of(u->f[0]));
    (void)t;
    if (premise.n && premise.p[premise.n - 1] == '.') premise.n--;
    sb_slice(&rb->enc, premise);
    sb_puts(&rb->enc, strcmp(u->f[3], "effect") == 0 ? " so " : " because ");
    copa_choice(&rb->suf[0], u->f[1]);
    copa_choice(&rb->suf[1], u->f[2]);
    rb->n = 2;
}

/* SQuAD and DROP (MeZO SQuADv2Template / DROPTemplate): the one candidate is the training
   answer, " <answer>\n" (the newline is trained on: generation stops at it). */
static void suffix_answer(const unit *u, render_buf *rb)
{
    sb_putc(&rb->suf[0], ' ');
    sb_puts(&rb->suf[0], u->f[3]);
    sb_putc(&rb->suf[0], '\n');
    rb->n = 1;
}

static void template_squad(const task_def *t, const unit *u, render_buf *rb)
{
    (void)t;
    sb_puts(&rb->enc, "Title: ");
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, "\nContext: ");
    sb_puts(&rb->enc, u->f[1]);
    sb_puts(&rb->enc, "\nQuestion: ");
    sb_slice(&rb->enc, strip_ws(slice_of(u->f[2])));
    sb_puts(&rb->enc, "\nAnswer:");
    suffix_answer(u, rb);
}

static void template_drop(const task_def *t, const unit *u, render_buf *rb)
{
    (void)t;
    sb_puts(&rb->enc, "Passage: ");
    sb_puts(&rb->enc, u->f[0]);
    sb_puts(&rb->enc, "\nQuestion: ");
    sb_slice(&rb->enc, strip_ws(slice_of(u->f[1])));
    sb_puts(&rb->enc, "\nAnswer:");
    suffix_answer(u, rb);
}

/* ======================================================================================
   The task table
   ====================================================================================== */

typedef int (*json_fn)(rd *r, const json_value *obj);
typedef int (*tsv_fn)(rd *r, const tsv_header *h, char **f, size_t nf);
typedef int (*doc_fn)(rd *r, const json_value *root);

struct task_def {
    tasks_info info;                /* first: tasks_info pointers convert back to task_def */
    const char *key;                /* lower-case alphanumeric lookup key */
    json_fn from_json;              /* .jsonl reader, or NULL */
    tsv_fn from_tsv;                /* .tsv with a header, or NULL */
    const char *tsv_columns[4];     /* columns that header must have */
    const char *tsv_label_column;   /* the one that says a file is labeled */
    int tsv_extra_fields;           /* rows may have more fields than the header */
    int label_text;                 /* reads headerless "label,sentence" .csv and
                                       "label<TAB>sentence" .tsv */
    template_fn render;
    doc_fn from_doc;                /* a whole-file .json document (SQuAD, DROP), or NULL */
    const char *doc_files[2];       /* its released train and validation file names */
};

#define MEZO "MeZO large_models/templates.py (princeton-nlp/MeZO)"
#define LMBFF "LM-BFF run_experiment.sh + src/dataset.py (princeton-nlp/LM-BFF)"

static const task_def TASKS[] = {
    {{"SST-2", "GLUE tsv with header (sentence, label); also LM-BFF SST-2 k-shot tsv",
      "<sentence, stripped> It was", {" terrible", " great"}, 2, "<candidate>", 0, 1000, 500, 1000,
      MEZO " SST2Template", TASKS_METRIC_ACCURACY},
     "sst2", NULL, sst2_tsv, {"sentence", "label"}, "label", 0, 0, template_it_was, NULL, {NULL, NULL}},
    {{"SST-5", "LM-BFF csv \"label,sentence\" (no header), or tsv \"label<TAB>sentence\"",
      "<sentence, stripped> It was", {" terrible", " bad", " okay", " good", " great"}, 5, "<candidate>", 0, 1000,
      500, 1000, LMBFF " sst-5: *cls**sent_0*_It_was*mask*.*sep+*", TASKS_METRIC_ACCURACY},
     "sst5", NULL, NULL, {NULL}, NULL, 0, 1, template_it_was, NULL, {NULL, NULL}},
    {{"TREC", "LM-BFF csv \"label,question\" (no header), or tsv \"label<TAB>question\"", "(empty)",
      {"Description", "Entity", "Expression", "Human", "Location", "Number"}, 6, "<candidate>: <question>", 0,
      1000, 500, 1000, LMBFF " trec: *cls**mask*:*+sent_0**sep+*", TASKS_METRIC_ACCURACY},
     "trec", NULL, NULL, {NULL}, NULL, 0, 1, template_trec, NULL, {NULL, NULL}},
    {{"MNLI", "GLUE/LM-BFF tsv with header (sentence1, sentence2, ...; gold label = last field)",
      "<premise minus its last character>?", {" No", " Yes", " Maybe"}, 3,
      "<candidate>, <hypothesis, first letter lower-cased>", 0, 1000, 500, 1000,
      LMBFF " MNLI: *cls**sent-_0*?*mask*,*+sentl_1**sep+*", TASKS_METRIC_ACCURACY},
     "mnli", NULL, nli_tsv, {"sentence1", "sentence2", "gold_label"}, "gold_label", 1, 0, template_nli, NULL, {NULL, NULL}},
    {{"SNLI", "GLUE/LM-BFF tsv with header (sentence1, sentence2, ...; gold label = last field)",
      "<premise minus its last character>?", {" No", " Yes", " Maybe"}, 3,
      "<candidate>, <hypothesis, first letter lower-cased>", 0, 1000, 500, 1000,
      LMBFF " SNLI: *cls**sent-_0*?*mask*,*+sentl_1**sep+*", TASKS_METRIC_ACCURACY},
     "snli", NULL, nli_tsv, {"sentence1", "sentence2", "gold_label"}, "gold_label", 1, 0, template_nli, NULL, {NULL, NULL}},
    {{"RTE", "SuperGLUE jsonl (premise, hypothesis, label); also GLUE/LM-BFF tsv (sentence1, sentence2, label)",
      "<premise>\\nDoes this mean that \"<hypothesis>\" is true? Yes or No?\\n", {"Yes", "No"}, 2, "<candidate>", 0,
      1000, 500, 1000, MEZO " RTETemplate", TASKS_METRIC_ACCURACY},
     "rte", rte_json, rte_tsv, {"sentence1", "sentence2", "label"}, "label", 0, 0, template_rte, NULL, {NULL, NULL}},
    {{"CB", "SuperGLUE jsonl (premise, hypothesis, label)",
      "Suppose <premise> Can we infer that \"<hypothesis>\"? Yes, No, or Maybe?\\n", {"Yes", "No", "Maybe"}, 3,
      "<candidate>", 0, 1000, 100, 1000, MEZO " CBTemplate", TASKS_METRIC_ACCURACY},
     "cb", cb_json, NULL, {NULL}, NULL, 0, 0, template_cb, NULL, {NULL, NULL}},
    {{"BoolQ", "SuperGLUE jsonl (question, passage, label; the \"<title> -- \" prefix is removed) or Google's "
               "jsonl (question, title, answer, passage)",
      "<passage> <question, first letter upper-cased, \"?\" added if missing>\\n", {"Yes", "No"}, 2, "<candidate>",
      0, 1000, 500, 1000, MEZO " BoolQTemplateV3 (the default, version 2)", TASKS_METRIC_ACCURACY},
     "boolq", boolq_json, NULL, {NULL}, NULL, 0, 0, template_boolq, NULL, {NULL, NULL}},
    {{"WiC", "SuperGLUE jsonl (word, sentence1, sentence2, label)",
      "Does the word \"<word>\" have the same meaning in these two sentences? Yes, No?\\n<sentence1>\\n<sentence2>\\n",
      {"No", "Yes"}, 2, "<candidate>", 0, 1000, 500, 1000, MEZO " WICTemplate", TASKS_METRIC_ACCURACY},
     "wic", wic_json, NULL, {NULL}, NULL, 0, 0, template_wic, NULL, {NULL, NULL}},
    {{"WSC", "SuperGLUE jsonl (text, target.span1_text, target.span2_text, label)",
      "<text>\\nIn the previous sentence, does the pronoun \"<span2, lower-cased>\" refer to <span1>? Yes or No?\\n",
      {"No", "Yes"}, 2, "<candidate>", 0, 1000, 500, 1000, MEZO " WSCTemplate", TASKS_METRIC_ACCURACY},
     "wsc", wsc_json, NULL, {NULL}, NULL, 0, 0, template_wsc, NULL, {NULL, NULL}},
    {{"MultiRC", "SuperGLUE jsonl (passage.text, passage.questions[].question, .answers[].text/.label); one "
                 "example per answer",
      "<paragraph>\\nQuestion: <question>\\nI found this answer \"<answer>\". Is that correct? Yes or No?\\n",
      {"No", "Yes"}, 2, "<candidate>", 0, 1000, 500, 1000, MEZO " MultiRCTemplate", TASKS_METRIC_ACCURACY},
     "multirc", multirc_json, NULL, {NULL}, NULL, 0, 0, template_multirc, NULL, {NULL, NULL}},
    {{"COPA", "SuperGLUE jsonl (premise, choice1, choice2, question, label)",
      "<premise, trailing \".\" removed> so (effect) | because (cause)", {NULL}, 0,
      " <choice1|choice2, first word lower-cased unless it is \"I\">", 1, 1000, 100, 1000,
      MEZO " CopaTemplate (capitalization \"correct\")", TASKS_METRIC_ACCURACY},
     "copa", copa_json, NULL, {NULL}, NULL, 0, 0, template_copa, NULL, {NULL, NULL}},
    {{"SQuAD", "SQuAD v1.1 json (data[].title/.paragraphs[].context/.qas[].question/.answers[].text): train-v1.1.json "
               "and dev-v1.1.json from https://rajpurkar.github.io/SQuAD-explorer/dataset/",
      "Title: <title>\\nContext: <context>\\nQuestion: <question, stripped>\\nAnswer:", {NULL}, 0,
      " <answers[0]>\\n (the training target; evaluation generates the answer greedily, <= 50 tokens, up to a "
      "newline, scored by SQuAD v1.1's exact match and F1 over all the answers)",
      1, 1000, 500, 1000, MEZO " SQuADv2Template (on SQuAD v1.1, as MeZO)", TASKS_METRIC_SQUAD},
     "squad", NULL, NULL, {NULL}, NULL, 0, 0, template_squad, squad_doc, {"train-v1.1.json", "dev-v1.1.json"}},
    {{"DROP", "DROP json (passage id -> passage, qa_pairs[].question/.query_id/.answer/.validated_answers): "
              "drop_dataset_train.json and drop_dataset_dev.json from drop_dataset.zip "
              "(https://s3-us-west-2.amazonaws.com/allennlp/datasets/drop/drop_dataset.zip)",
      "Passage: <passage>\\nQuestion: <question, stripped>\\nAnswer:", {NULL}, 0,
      " <answer: its number, else its date \"day month year\", else its first span>\\n (the training target; "
      "evaluation generates the answer greedily, <= 50 tokens, up to a newline, scored by DROP's exact match and "
      "number-aware F1 over the answer and the validated answers)",
      1, 1000, 500, 1000, MEZO " DROPTemplate", TASKS_METRIC_DROP},
     "drop", NULL, NULL, {NULL}, NULL, 0, 0, template_drop, drop_doc, {"drop_dataset_train.json", "drop_dataset_dev.json"}},
};

#define N_TASKS (sizeof TASKS / sizeof TASKS[0])

static void suffix_candidates(const task_def *t, render_buf *rb)
{
    int k;
    for (k = 0; k < t->info.n_candidates; k++) sb_puts(&rb->suf[k], t->info.candidates[k]);
    rb->n = t->info.n_candidates;
}

static void template_trec(const task_def *t, const unit *u, render_buf *rb)
{
    int k;
    for (k = 0; k < t->info.n_candidates; k++) {
        sb_puts(&rb->suf[k], t->info.candidates[k]);
        sb_puts(&rb->suf[k], ": ");
        sb_puts(&rb->suf[k], u->f[0]);
    }
    rb->n = t->info.n_candidates;
}

static void template_nli(const task_def *t, const unit *u, render_buf *rb)
{
    slice premise = slice_of(u->f[0]);
    const char *h = u->f[1];
    int k;
    premise.n = last_cp_start(premise); /* Python's premise[:-1] drops one code point */
    sb_slice(&rb->enc, premise);
    sb_putc(&rb->enc, '?');
    for (k = 0; k < t->info.n_candidates; k++) {
        sb_puts(&rb->suf[k], t->info.candidates[k]);
        sb_puts(&rb->suf[k], ", ");
        if (*h) {
            sb_putc(&rb->suf[k], ascii_lower(h[0]));
            sb_puts(&rb->suf[k], h + 1);
        }
    }
    rb->n = t->info.n_candidates;
}

size_t tasks_count(void) { return N_TASKS; }

const tasks_info *tasks_info_at(size_t i) { return i < N_TASKS ? &TASKS[i].info : NULL; }

/* Filled on the first call (the same values every time; call it once before starting
   threads if several may race on the first call). */
const char *const *tasks_names(void)
{
    static const char *names[N_TASKS + 1];
    size_t i;
    if (!names[0])
        for (i = 0; i < N_TASKS; i++) names[i] = TASKS[i].info.name;
    return names;
}

static const task_def *find_task(const char *name)
{
    char key[32];
    size_t n = 0, i;
    if (!name) return NULL;
    for (; *name; name++) {
        if (*name == '-' || *name == '_') continue;
        if (n + 1 >= sizeof key) return NULL;
        key[n++] = ascii_lower(*name);
    }
    key[n] = '\0';
    for (i = 0; i < N_TASKS; i++)
        if (strcmp(TASKS[i].key, key) == 0) return &TASKS[i];
    return NULL;
}

/* "unknown task "x" (known: SST-2, ...)", the list taken from the table */
static void unknown_task_error(const char *name, char *err, size_t errlen)
{
    char known[256];
    size_t used = 0, i;
    known[0] = '\0';
    for (i = 0; i < N_TASKS && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", TASKS[i].info.name);
    set_err(err, errlen, "unknown task \"%s\" (known: %s)", name ? name : "(null)", known);
}

const tasks_info *tasks_find(const char *name)
{
    const task_def *t = find_task(name);
    return t ? &t->info : NULL;
}

/* ======================================================================================
   File readers
   ====================================================================================== */

/* Lines of a buffer, split in place: the '\n' (and a '\r' before it) become NULs. */
typedef struct line_iter {
    char *s;
    size_t n, pos;
    long line;
} line_iter;

static int next_line(line_iter *it, char **line, size_t *len)
{
    char *start, *nl;
    size_t l;
    if (it->pos >= it->n) return 0;
    start = it->s + it->pos;
    nl = (char *)memchr(start, '\n', it->n - it->pos);
    l = nl ? (size_t)(nl - start) : it->n - it->pos;
    it->pos += l + (nl ? 1 : 0);
    it->line++;
    if (nl) *nl = '\0';
    if (l && start[l - 1] == '\r') start[--l] = '\0';
    *line = start;
    *len = l;
    return 1;
}

static size_t skip_bom(const char *s, size_t n)
{
    return (n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF) ? 3 : 0;
}

/* what: "line" or "field", for the message */
static int check_text(rd *r, const char *s, size_t n, const char *what)
{
    int nul;
    size_t bad = utf8_first_bad(s, n, &nul);
    if (bad == n) return 0;
    return rd_fail(r, nul ? "NUL byte at byte %lu of the %s" : "invalid UTF-8 at byte %lu of the %s",
                   (unsigned long)bad + 1, what);
}

static int is_blank_line(const char *s, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return 0;
    return 1;
}

static int read_jsonl(const task_def *t, rd *r)
{
    line_iter it;
    char *s;
    size_t n;
    it.s = r->p->data;
    it.n = r->p->size;
    it.pos = skip_bom(it.s, it.n);
    it.line = 0;
    while (next_line(&it, &s, &n)) {
        json_value obj;
        char msg[512];
        size_t at = 0;
        int rc;
        r->line = it.line;
        if (is_blank_line(s, n)) continue;
        if (json_parse(s, n, &obj, &at, msg, sizeof msg)) {
            set_err(r->err, r->errlen, "%s:%ld:%lu: %s", r->p->path, it.line, (unsigned long)at + 1, msg);
            return -1;
        }
        if (obj.type != JSON_OBJECT) {
            json_free(&obj);
            return rd_fail(r, "the line is not a JSON object");
        }
        rc = t->from_json(r, &obj);
        json_free(&obj);
        if (rc) return -1;
    }
    return 0;
}

/* Fields of a line split at tabs, in place (GLUE's csv.reader has quotechar=None: no
   quoting at all). */
static int split_tabs(char *s, char ***fields, size_t *nf, size_t *cap)
{
    size_t n = 0;
    for (;;) {
        char *tab;
        if (n == *cap) {
            size_t nc = *cap ? *cap * 2 : 16;
            char **nfld = nc > SIZE_MAX / sizeof *nfld ? NULL : (char **)realloc(*fields, nc * sizeof *nfld);
            if (!nfld) return -1;
            *fields = nfld;
            *cap = nc;
        }
        (*fields)[n++] = s;
        tab = strchr(s, '\t');
        if (!tab) break;
        *tab = '\0';
        s = tab + 1;
    }
    *nf = n;
    return 0;
}

static void list_columns(const tsv_header *h, char *buf, size_t len)
{
    size_t used = 0, i;
    buf[0] = '\0';
    for (i = 0; i < h->n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%.40s", i ? ", " : "", h->name[i]);
}

static int read_tsv_with_header(const task_def *t, rd *r)
{
    line_iter it;
    char *s, **fields = NULL, **hdr = NULL;
    size_t n, nf = 0, cap = 0, hcap = 0;
    tsv_header h = {NULL, 0};
    int rc = -1, i;
    it.s = r->p->data;
    it.n = r->p->size;
    it.pos = skip_bom(it.s, it.n);
    it.line = 0;
    /* header: the first non-blank line */
    for (;;) {
        if (!next_line(&it, &s, &n)) {
            r->line = it.line ? it.line : 1;
            rd_fail(r, "empty file (a header line was expected)");
            goto done;
        }
        r->line = it.line;
        if (!is_blank_line(s, n)) break;
    }
    if (check_text(r, s, n, "line")) goto done;
    if (split_tabs(s, &hdr, &h.n, &hcap)) { rd_fail(r, "out of memory"); goto done; }
    h.name = hdr;
    for (i = 0; t->tsv_columns[i]; i++) {
        if (column(&h, t->tsv_columns[i]) < 0) {
            char cols[256];
            list_columns(&h, cols, sizeof cols);
            rd_fail(r, "the header has no \"%s\" column (it has: %s)%s", t->tsv_columns[i], cols,
                    strcmp(t->tsv_columns[i], t->tsv_label_column) == 0 ? "; an unlabeled test split cannot be used" : "");
            goto done;
        }
    }
    while (next_line(&it, &s, &n)) {
        r->line = it.line;
        if (n == 0) continue;
        if (check_text(r, s, n, "line")) goto done;
        if (split_tabs(s, &fields, &nf, &cap)) { rd_fail(r, "out of memory"); goto done; }
        if (nf < h.n || (nf > h.n && !t->tsv_extra_fields)) {
            rd_fail(r, "%lu tab-separated fields, the header has %lu", (unsigned long)nf, (unsigned long)h.n);
            goto done;
        }
        if (t->from_tsv(r, &h, fields, nf)) goto done;
    }
    rc = 0;
done:
    free(fields);
    free(hdr);
    return rc;
}

/* One CSV record (RFC 4180, as pandas reads LM-BFF's files): fields are unquoted in place
   and NUL-terminated; a quoted field may span lines; "" inside quotes is a quote; a quote
   inside an unquoted field is a literal character. */
static int csv_record(rd *r, line_iter *it, char ***fields, size_t *nf, size_t *cap)
{
    char *s = it->s;
    size_t n = it->n, rpos = it->pos, w = it->pos;
    size_t count = 0;
    for (;;) {
        size_t start = w;
        int end_of_record = 0;
        if (rpos < n && s[rpos] == '"') {
            rpos++;
            for (;;) {
                if (rpos >= n) return rd_fail(r, "unterminated quoted field (the quote opens on this line)");
                if (s[rpos] == '"') {
                    if (rpos + 1 < n && s[rpos + 1] == '"') {
                        s[w++] = '"';
                        rpos += 2;
                        continue;
                    }
                    rpos++;
                    break;
                }
                if (s[rpos] == '\n') it->line++;
                s[w++] = s[rpos++];
            }
            if (rpos < n && s[rpos] == '\r' && rpos + 1 < n && s[rpos + 1] == '\n') rpos++;
            if (rpos < n && s[rpos] != ',' && s[rpos] != '\n')
                return rd_fail(r, "unexpected character after a closing quote (a ',' or the end of the line was expected)");
        } else {
            while (rpos < n && s[rpos] != ',' && s[rpos] != '\n') s[w++] = s[rpos++];
            if (w > start && s[w - 1] == '\r' && (rpos >= n || s[rpos] == '\n')) w--;
        }
        if (rpos >= n || s[rpos] == '\n') end_of_record = 1;
        rpos++; /* past the ',' or '\n' (or the end) */
        s[w] = '\0';
        if (count == *cap) {
            size_t nc = *cap ? *cap * 2 : 8;
            char **nfld = nc > SIZE_MAX / sizeof *nfld ? NULL : (char **)realloc(*fields, nc * sizeof *nfld);
            if (!nfld) return rd_fail(r, "out of memory");
            *fields = nfld;
            *cap = nc;
        }
        (*fields)[count++] = s + start;
        if (check_text(r, s + start, w - start, "field")) return -1;
        w = rpos;
        if (end_of_record) break;
    }
    it->pos = rpos > n ? n : rpos;
    if (rpos <= n) it->line++; /* the newline that ended the record */
    *nf = count;
    return 0;
}

/* Headerless "label,sentence" (.csv) or "label<TAB>sentence" (.tsv): SST-5 and TREC. */
static int read_label_text(const task_def *t, rd *r, int csv)
{
    line_iter it;
    char **fields = NULL, *s;
    size_t nf = 0, cap = 0, n;
    int rc = -1;
    it.s = r->p->data;
    it.n = r->p->size;
    it.pos = skip_bom(it.s, it.n);
    it.line = 0;
    for (;;) {
        unit u;
        if (csv) {
            /* skip blank lines, then read one (possibly multi-line) record */
            while (it.pos < it.n && (it.s[it.pos] == '\n' || (it.s[it.pos] == '\r' && it.pos + 1 < it.n && it.s[it.pos + 1] == '\n'))) {
                it.pos += it.s[it.pos] == '\r' ? 2 : 1;
                it.line++;
            }
            if (it.pos >= it.n) break;
            r->line = it.line + 1;
            if (csv_record(r, &it, &fields, &nf, &cap)) goto done;
        } else {
            if (!next_line(&it, &s, &n)) break;
            r->line = it.line;
            if (n == 0) continue;
            if (check_text(r, s, n, "line")) goto done;
            if (split_tabs(s, &fields, &nf, &cap)) { rd_fail(r, "out of memory"); goto done; }
        }
        if (nf != 2) {
            rd_fail(r, "%lu field%s, expected 2 (label%ssentence)", (unsigned long)nf, nf == 1 ? "" : "s", csv ? "," : "<TAB>");
            goto done;
        }
        memset(&u, 0, sizeof u);
        if (parse_label_number(fields[0], t->info.n_candidates, &u.label)) {
            rd_fail(r, "label \"%.40s\" is not an integer from 0 to %d", fields[0], t->info.n_candidates - 1);
            goto done;
        }
        u.f[0] = fields[1];
        if (pool_add(r, &u)) goto done;
    }
    rc = 0;
done:
    free(fields);
    return rc;
}

/* A whole-file JSON document (SQuAD, DROP). Syntax errors say where: "path:line:col: what". */
static int read_json_document(const task_def *t, rd *r)
{
    json_value root;
    char msg[512];
    size_t at = 0, start = skip_bom(r->p->data, r->p->size);
    int rc;
    r->line = 0;
    if (json_parse(r->p->data + start, r->p->size - start, &root, &at, msg, sizeof msg)) {
        long line = 1;
        size_t i, col = 1;
        for (i = start; i < start + at && i < r->p->size; i++) {
            if (r->p->data[i] == '\n') { line++; col = 1; }
            else col++;
        }
        set_err(r->err, r->errlen, "%s:%ld:%lu: %s", r->p->path, line, (unsigned long)col, msg);
        return -1;
    }
    rc = t->from_doc(r, &root);
    json_free(&root);
    return rc;
}

/* Reads a whole file into a pool, picking the reader by extension. */
static int load_pool(const task_def *t, const char *path, pool *p, char *err, size_t errlen)
{
    const char *ext = file_extension(path);
    rd r;
    int rc;
    memset(p, 0, sizeof p[0]);
    p->path = path;
    r.p = p;
    r.line = 0;
    r.err = err;
    r.errlen = errlen;
    if (!(streq_nocase(ext, "jsonl") && t->from_json) && !(streq_nocase(ext, "tsv") && (t->from_tsv || t->label_text)) &&
        !(streq_nocase(ext, "csv") && t->label_text) && !(streq_nocase(ext, "json") && t->from_doc)) {
        set_err(err, errlen, "%s: %s cannot read this file (by its extension); it reads: %s", path, t->info.name,
                t->info.formats);
        return -1;
    }
    if (read_file(path, &p->data, &p->size, err, errlen)) return -1;
    p->path = path;
    p->hash = fnv1a64(p->data, p->size);
    if (streq_nocase(ext, "json")) rc = read_json_document(t, &r);
    else if (streq_nocase(ext, "jsonl")) rc = read_jsonl(t, &r);
    else if (streq_nocase(ext, "tsv") && t->from_tsv) rc = read_tsv_with_header(t, &r);
    else rc = read_label_text(t, &r, streq_nocase(ext, "csv"));
    if (rc == 0 && p->n == 0) {
        if (p->skipped)
            set_err(err, errlen, "%s: no examples in the file (%lu skipped: %s)", path, (unsigned long)p->skipped,
                    t->info.metric == TASKS_METRIC_DROP ? "no usable answer" : "no gold label");
        else set_err(err, errlen, "%s: no examples in the file", path);
        rc = -1;
    }
    if (rc) pool_release(p);
    return rc;
}

/* ======================================================================================
   Sampling
   ====================================================================================== */

static uint64_t splitmix64_next(uint64_t *state)
{
    uint64_t z;
    *state += UINT64_C(0x9E3779B97F4A7C15);
    z = *state;
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [0, bound): rejecting the lowest 2^64 mod bound values removes modulo bias. */
static uint64_t uniform_below(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = splitmix64_next(state);
        if (r >= threshold) return r % bound;
    }
}

int tasks_permutation(size_t n, uint64_t seed, size_t *p)
{
    uint64_t state = seed;
    size_t i;
    if (n && !p) return -1;
    for (i = 0; i < n; i++) p[i] = i;
    for (i = n; i > 1; i--) {
        size_t j = (size_t)uniform_below(&state, (uint64_t)i);
        size_t tmp = p[i - 1];
        p[i - 1] = p[j];
        p[j] = tmp;
    }
    return 0;
}

/* ======================================================================================
   Rendering a unit into an example: MeZO's prompt assembly (see tasks.h)
   ====================================================================================== */

static slice mezo_assemble(slice s) { return strip_spaces(lstrip_ws(strip_spaces(s))); }

/* The gold answers into the set's arena (the pool's goes when the load ends). */
static int copy_answers(arena *a, const unit *u, tasks_example *ex)
{
    qa_answer *golds = (qa_answer *)arena_alloc(a, (size_t)u->n_answers * sizeof *golds);
    int i, k;
    if (!golds) return -1;
    for (i = 0; i < u->n_answers; i++) {
        const char **spans = (const char **)arena_alloc(a, (size_t)(u->answers[i].n_spans ? u->answers[i].n_spans : 1) * sizeof *spans);
        if (!spans) return -1;
        for (k = 0; k < u->answers[i].n_spans; k++) {
            const char *s = u->answers[i].spans[k];
            if (!(spans[k] = arena_strndup(a, s, strlen(s)))) return -1;
        }
        golds[i].spans = spans;
        golds[i].n_spans = u->answers[i].n_spans;
    }
    ex->answers = golds;
    ex->n_answers = u->n_answers;
    ex->id = u->id ? arena_strndup(a, u->id, strlen(u->id)) : NULL;
    return u->id && !ex->id ? -1 : 0;
}

static int render_example(const task_def *t, const pool *p, const unit *u, size_t index, render_buf *rb, arena *a,
                          tasks_example *ex, char *err, size_t errlen)
{
    slice ctx;
    char *ctx_copy;
    int k;
    sb_reset(&rb->enc);
    for (k = 0; k < TASKS_MAX_CANDIDATES; k++) sb_reset(&rb->suf[k]);
    rb->n = 0;
    sb_put(&rb->enc, "", 0);
    t->render(t, u, rb);
    if (rb->enc.oom) goto oom;   /* then enc.p may be NULL */
    ctx = mezo_assemble(slice_of(rb->enc.p));
    if (!(ctx_copy = arena_strndup(a, ctx.p, ctx.n))) goto oom;
    memset(ex, 0, sizeof *ex);
    ex->context = ctx_copy;
    ex->n_candidates = rb->n;
    ex->gold = u->label;
    ex->source_index = index;
    ex->source_line = u->line;
    for (k = 0; k < rb->n; k++) {
        slice full;
        char *text;
        sb_reset(&rb->full);
        sb_put(&rb->full, rb->enc.p, rb->enc.len);
        sb_put(&rb->full, rb->suf[k].p ? rb->suf[k].p : "", rb->suf[k].len);
        if (rb->full.oom || rb->suf[k].oom) goto oom;
        full = mezo_assemble(slice_of(rb->full.p));
        /* the continuation must be a non-empty tail of the text, or nothing can be scored */
        if (full.n <= ctx.n || memcmp(full.p, ctx.p, ctx.n) != 0) {
            set_err(err, errlen, "%s:%ld: candidate %d renders to an empty continuation", p->path, u->line, k);
            return -1;
        }
        if (!(text = arena_strndup(a, full.p, full.n))) goto oom;
        ex->cand[k].context = ctx_copy;
        ex->cand[k].text = text;
        ex->cand[k].continuation = text + ctx.n;
        ex->cand[k].context_len = ctx.n;
    }
    if (ex->gold < 0 || ex->gold >= ex->n_candidates) {
        set_err(err, errlen, "%s:%ld: gold index %d out of range", p->path, u->line, ex->gold);
        return -1;
    }
    if (u->n_answers && copy_answers(a, u, ex)) goto oom;
    return 0;
oom:
    set_err(err, errlen, "out of memory while rendering %s", p->path);
    return -1;
}

static void render_buf_free(render_buf *rb)
{
    int k;
    sb_free(&rb->enc);
    sb_free(&rb->full);
    for (k = 0; k < TASKS_MAX_CANDIDATES; k++) sb_free(&rb->suf[k]);
}

/* ======================================================================================
   Loading
   ====================================================================================== */

static tasks_split *split_of(tasks_set *set, int which)
{
    return which == TASKS_TRAIN ? &set->train : which == TASKS_DEV ? &set->dev : which == TASKS_TEST ? &set->test : NULL;
}

const tasks_split *tasks_set_split(const tasks_set *set, int which)
{
    return split_of((tasks_set *)set, which);
}

static const char *const SPLIT_NAMES[3] = {"train", "dev", "test"};

static size_t count_or_default(long n, long dflt) { return (size_t)(n < 0 ? dflt : n); }

/* Indices to use, either drawn or taken from an indices file after checking they fit. */
typedef struct draw {
    size_t *idx[3];
    size_t n[3];
} draw;

static void draw_free(draw *d)
{
    int s;
    for (s = 0; s < 3; s++) free(d->idx[s]);
    memset(d, 0, sizeof *d);
}

static int draw_fresh(const tasks_load_desc *desc, const task_def *t, pool pools[3], int have_dev_file, draw *d,
                      char *err, size_t errlen)
{
    size_t want[3], *perm = NULL;
    int s;
    want[TASKS_TRAIN] = count_or_default(desc->n_train, t->info.default_train);
    want[TASKS_DEV] = count_or_default(desc->n_dev, t->info.default_dev);
    want[TASKS_TEST] = count_or_default(desc->n_test, t->info.default_test);
    for (s = 0; s < 3; s++) {
        pool *p = &pools[s == TASKS_DEV && !have_dev_file ? TASKS_TRAIN : s];
        size_t take;
        if (s == TASKS_DEV && !have_dev_file) continue; /* handled with train below */
        perm = (size_t *)malloc((p->n ? p->n : 1) * sizeof *perm);
        if (!perm) goto oom;
        tasks_permutation(p->n, desc->seed, perm);
        if (s == TASKS_TRAIN && !have_dev_file) {
            /* MeZO: draw num_train + num_dev, dev = the last num_dev of the draw */
            size_t total = want[TASKS_TRAIN] > SIZE_MAX - want[TASKS_DEV] ? SIZE_MAX : want[TASKS_TRAIN] + want[TASKS_DEV];
            size_t m = total < p->n ? total : p->n;
            size_t ndev = want[TASKS_DEV] < m ? want[TASKS_DEV] : m;
            d->n[TASKS_TRAIN] = m - ndev;
            d->n[TASKS_DEV] = ndev;
            if (want[TASKS_TRAIN] > 0 && d->n[TASKS_TRAIN] == 0) {
                set_err(err, errlen,
                        "%s: %lu examples, all taken by the %lu dev examples requested, so train would be empty; "
                        "ask for fewer dev examples or give a separate dev file",
                        p->path, (unsigned long)p->n, (unsigned long)want[TASKS_DEV]);
                free(perm);
                return -1;
            }
            d->idx[TASKS_TRAIN] = (size_t *)malloc((d->n[TASKS_TRAIN] + 1) * sizeof(size_t));
            d->idx[TASKS_DEV] = (size_t *)malloc((ndev + 1) * sizeof(size_t));
            if (!d->idx[TASKS_TRAIN] || !d->idx[TASKS_DEV]) goto oom;
            memcpy(d->idx[TASKS_TRAIN], perm, d->n[TASKS_TRAIN] * sizeof(size_t));
            memcpy(d->idx[TASKS_DEV], perm + d->n[TASKS_TRAIN], ndev * sizeof(size_t));
        } else {
            take = want[s] < p->n ? want[s] : p->n;
            d->n[s] = take;
            d->idx[s] = (size_t *)malloc((take + 1) * sizeof(size_t));
            if (!d->idx[s]) goto oom;
            memcpy(d->idx[s], perm, take * sizeof(size_t));
        }
        free(perm);
        perm = NULL;
    }
    return 0;
oom:
    free(perm);
    set_err(err, errlen, "out of memory while sampling");
    return -1;
}

/* Checks that an indices file fits the files given now, and copies its indices. */
static int draw_from_indices(const tasks_indices *ix, const task_def *t, pool pools[3], int have_dev_file, draw *d,
                             char *err, size_t errlen)
{
    unsigned char *seen[3] = {NULL, NULL, NULL};
    int s, rc = -1;
    if (strcmp(ix->task, t->info.name) != 0) {
        set_err(err, errlen, "the indices are for task %s, not %s", ix->task, t->info.name);
        return -1;
    }
    if (ix->dev_from_train == have_dev_file) {
        set_err(err, errlen, "the indices were drawn %s a separate dev file, but this load %s one",
                ix->dev_from_train ? "without" : "with", have_dev_file ? "gives" : "does not give");
        return -1;
    }
    for (s = 0; s < 3; s++) {
        const pool *p = &pools[s];
        if (s == TASKS_DEV && !have_dev_file) continue;
        if (p->n != ix->pool[s] || p->hash != ix->hash[s]) {
            set_err(err, errlen,
                    "%s has changed since the indices were written: %lu examples, hash %016" PRIx64
                    "; the indices say %lu examples, hash %016" PRIx64,
                    p->path, (unsigned long)p->n, p->hash, (unsigned long)ix->pool[s], ix->hash[s]);
            return -1;
        }
    }
    for (s = 0; s < 3; s++) {
        int src = (s == TASKS_DEV && !have_dev_file) ? TASKS_TRAIN : s;
        const pool *p = &pools[src];
        size_t i;
        if (!seen[src]) {
            seen[src] = (unsigned char *)calloc(p->n ? p->n : 1, 1);
            if (!seen[src]) { set_err(err, errlen, "out of memory"); goto done; }
        }
        if (ix->n[s] > p->n) {   /* a caller-built tasks_indices: never size a buffer by it unchecked */
            set_err(err, errlen, "%s: more indices than examples (%lu; %s has %lu)", SPLIT_NAMES[s], (unsigned long)ix->n[s],
                    p->path, (unsigned long)p->n);
            goto done;
        }
        d->n[s] = ix->n[s];
        d->idx[s] = (size_t *)malloc((ix->n[s] + 1) * sizeof(size_t));
        if (!d->idx[s]) { set_err(err, errlen, "out of memory"); goto done; }
        for (i = 0; i < ix->n[s]; i++) {
            size_t v = ix->idx[s][i];
            if (v >= p->n) {
                set_err(err, errlen, "%s index %lu is out of range (%s has %lu examples)", SPLIT_NAMES[s],
                        (unsigned long)v, p->path, (unsigned long)p->n);
                goto done;
            }
            if (seen[src][v]) {
                set_err(err, errlen, "%s index %lu appears twice%s", SPLIT_NAMES[s], (unsigned long)v,
                        src != s ? " (train and dev must be disjoint)" : "");
                goto done;
            }
            seen[src][v] = 1;
            d->idx[s][i] = v;
        }
    }
    rc = 0;
done:
    for (s = 0; s < 3; s++) free(seen[s]);
    return rc;
}

static int render_split(const task_def *t, const pool *p, const size_t *idx, size_t n, tasks_split *out, arena *a,
                        render_buf *rb, char *err, size_t errlen)
{
    size_t i;
    out->n = 0;
    out->ex = NULL;
    if (n == 0) return 0;
    if (n > SIZE_MAX / sizeof(tasks_example) ||
        !(out->ex = (tasks_example *)arena_alloc(a, n * sizeof(tasks_example)))) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < n; i++)
        if (render_example(t, p, &p->u[idx[i]], idx[i], rb, a, &out->ex[i], err, errlen)) return -1;
    out->n = n;
    return 0;
}

int tasks_load_ex(const tasks_load_desc *desc, tasks_set *set, char *err, size_t errlen)
{
    const task_def *t;
    pool pools[3];
    draw d;
    render_buf rb;
    arena *a = NULL;
    int have_dev, s, rc = -1;
    if (set) memset(set, 0, sizeof *set);
    memset(pools, 0, sizeof pools);
    memset(&d, 0, sizeof d);
    memset(&rb, 0, sizeof rb);
    if (!desc || !set) {
        set_err(err, errlen, "tasks_load_ex: desc and set are required");
        return -1;
    }
    if (!(t = find_task(desc->task))) {
        unknown_task_error(desc->task, err, errlen);
        return -1;
    }
    if (!desc->train_path || !desc->test_path) {
        set_err(err, errlen, "%s: a train file and a validation (test) file are required", t->info.name);
        return -1;
    }
    have_dev = desc->dev_path != NULL;
    /* a wrong task is worth saying before reading any file */
    if (desc->indices && strcmp(desc->indices->task, t->info.name) != 0) {
        set_err(err, errlen, "the indices are for task %s, not %s", desc->indices->task, t->info.name);
        return -1;
    }
    if (load_pool(t, desc->train_path, &pools[TASKS_TRAIN], err, errlen)) goto done;
    if (have_dev && load_pool(t, desc->dev_path, &pools[TASKS_DEV], err, errlen)) goto done;
    if (load_pool(t, desc->test_path, &pools[TASKS_TEST], err, errlen)) goto done;
    if (desc->indices ? draw_from_indices(desc->indices, t, pools, have_dev, &d, err, errlen)
                      : draw_fresh(desc, t, pools, have_dev, &d, err, errlen))
        goto done;
    if (!(a = (arena *)calloc(1, sizeof *a))) {
        set_err(err, errlen, "out of memory");
        goto done;
    }
    set->arena = a;
    set->task = &t->info;
    set->train_on_gold_tokens = t->info.train_on_gold_tokens;
    set->seed = desc->indices ? desc->indices->seed : desc->seed;
    set->dev_from_train = !have_dev;
    for (s = 0; s < 3; s++) {
        int src = (s == TASKS_DEV && !have_dev) ? TASKS_TRAIN : s;
        if (render_split(t, &pools[src], d.idx[s], d.n[s], split_of(set, s), a, &rb, err, errlen)) goto done;
        if (s == TASKS_DEV && !have_dev) continue;
        set->pool[s] = pools[s].n;
        set->hash[s] = pools[s].hash;
        set->skipped[s] = pools[s].skipped;
        if (!(set->path[s] = arena_strndup(a, pools[s].path, strlen(pools[s].path)))) {
            set_err(err, errlen, "out of memory");
            goto done;
        }
    }
    rc = 0;
done:
    for (s = 0; s < 3; s++) pool_release(&pools[s]);
    draw_free(&d);
    render_buf_free(&rb);
    if (rc) tasks_free(set);
    return rc;
}

int tasks_load(const char *task, const char *train_path, const char *val_path, uint64_t seed, long n_train, long n_dev,
               long n_test, tasks_set *set, char *err, size_t errlen)
{
    tasks_load_desc d;
    memset(&d, 0, sizeof d);
    d.task = task;
    d.train_path = train_path;
    d.test_path = val_path;
    d.seed = seed;
    d.n_train = n_train;
    d.n_dev = n_dev;
    d.n_test = n_test;
    return tasks_load_ex(&d, set, err, errlen);
}

void tasks_free(tasks_set *set)
{
    if (!set) return;
    if (set->arena) {
        arena_release((arena *)set->arena);
        free(set->arena);
    }
    memset(set, 0, sizeof *set);
}

/* ======================================================================================
   Indices files
   ====================================================================================== */

int tasks_write_indices(const char *path, const tasks_set *set, char *err, size_t errlen)
{
    file_out out;
    FILE *f;
    int s;
    size_t i;
    if (!path || !set || !set->task) {
        set_err(err, errlen, "tasks_write_indices: a path and a loaded set are required");
        return -1;
    }
    for (s = 0; s < 3; s++)
        if (set->path[s] && strchr(set->path[s], '\n')) {
            set_err(err, errlen, "%s: a data path contains a newline and cannot be recorded", path);
            return -1;
        }
    if (file_out_begin(&out, path, err, errlen) != 0) return -1;
    f = out.f;
    fprintf(f, "grzo-tasks-indices 1\ntask %s\nseed %" PRIu64 "\ndev_from_train %d\n", set->task->name, set->seed,
            set->dev_from_train);
    for (s = 0; s < 3; s++)
        fprintf(f, "file %s %lu %016" PRIx64 " %s\n", SPLIT_NAMES[s], (unsigned long)set->pool[s], set->hash[s],
                set->path[s] ? set->path[s] : "-");
    for (s = 0; s < 3; s++) {
        const tasks_split *sp = tasks_set_split(set, s);
        fprintf(f, "split %s %lu\n", SPLIT_NAMES[s], (unsigned long)sp->n);
        for (i = 0; i < sp->n; i++) fprintf(f, "%lu\n", (unsigned long)sp->ex[i].source_index);
    }
    fprintf(f, "end\n");
    return file_out_commit(&out, err, errlen);
}

/* Strict unsigned decimal; *end gets the first byte after it. */
static int parse_u64(const char *s, uint64_t *out, const char **end)
{
    uint64_t v = 0;
    if (!is_digit(*s)) return -1;
    while (is_digit(*s)) {
        uint64_t digit = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - digit) / 10) return -1;
        v = v * 10 + digit;
        s++;
    }
    *out = v;
    *end = s;
    return 0;
}

static int parse_size(const char *s, size_t *out, const char **end)
{
    uint64_t v;
    if (parse_u64(s, &v, end) || v > (uint64_t)SIZE_MAX) return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_hex64(const char *s, uint64_t *out, const char **end)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 16; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint64_t)(c - 'a' + 10);
        else return -1;
    }
    *out = v;
    *end = s + 16;
    return 0;
}

typedef struct ix_reader {
    const char *path;
    line_iter it;
    char *line;
    size_t len;
    char *err;
    size_t errlen;
} ix_reader;

static int ix_fail(ix_reader *x, const char *what)
{
    set_err(x->err, x->errlen, "%s:%ld: %s", x->path, x->it.line ? x->it.line : 1, what);
    return -1;
}

static int ix_next(ix_reader *x, const char *expect)
{
    char msg[128];
    if (next_line(&x->it, &x->line, &x->len)) return 0;
    x->it.line++;
    snprintf(msg, sizeof msg, "unexpected end of file (expected %s)", expect);
    return ix_fail(x, msg);
}

/* A line "<word> <rest>": returns rest, or NULL if the line does not start so. */
static const char *after_word(const char *line, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(line, word, n) != 0 || line[n] != ' ') return NULL;
    return line + n + 1;
}

static int ix_read_file_line(ix_reader *x, tasks_indices *out, int s)
{
    const char *rest, *e;
    char want[16];
    sprintf(want, "file %s", SPLIT_NAMES[s]);
    if (ix_next(x, want)) return -1;
    if (!(rest = after_word(x->line, "file")) || !(rest = after_word(rest, SPLIT_NAMES[s])))
        return ix_fail(x, s == TASKS_TRAIN ? "expected \"file train <count> <hash> <path>\""
                          : s == TASKS_DEV ? "expected \"file dev <count> <hash> <path>\""
                                           : "expected \"file test <count> <hash> <path>\"");
    if (parse_size(rest, &out->pool[s], &e) || *e != ' ' || parse_hex64(e + 1, &out->hash[s], &e) || *e != ' ' || !e[1])
        return ix_fail(x, "malformed file line (expected \"<count> <16 hex digits> <path>\")");
    return 0;
}

static int ix_read_split(ix_reader *x, tasks_indices *out, int s)
{
    const char *rest, *e;
    char want[16];
    size_t i, n;
    sprintf(want, "split %s", SPLIT_NAMES[s]);
    if (ix_next(x, want)) return -1;
    if (!(rest = after_word(x->line, "split")) || !(rest = after_word(rest, SPLIT_NAMES[s])) ||
        parse_size(rest, &n, &e) || *e)
        return ix_fail(x, s == TASKS_TRAIN ? "expected \"split train <count>\""
                          : s == TASKS_DEV ? "expected \"split dev <count>\""
                                           : "expected \"split test <count>\"");
    if (n > out->pool[s == TASKS_DEV && out->dev_from_train ? TASKS_TRAIN : s])
        return ix_fail(x, "more indices than examples in the file");
    /* Both counts come from the file: bound n by what the rest of the file can hold (an
       index line takes at least two bytes), which also keeps (n + 1) * sizeof(size_t)
       from wrapping. */
    if (n > (x->it.n - x->it.pos) / 2) return ix_fail(x, "the file is too short for the split count it gives");
    out->idx[s] = (size_t *)malloc((n + 1) * sizeof(size_t));
    if (!out->idx[s]) return ix_fail(x, "out of memory");
    out->n[s] = n;
    for (i = 0; i < n; i++) {
        if (ix_next(x, "an index")) return -1;
        if (parse_size(x->line, &out->idx[s][i], &e) || *e) return ix_fail(x, "expected one index (a decimal number)");
    }
    return 0;
}

int tasks_read_indices(const char *path, tasks_indices *out, char *err, size_t errlen)
{
    ix_reader x;
    char *data = NULL;
    size_t size;
    const char *rest, *e;
    int s, rc = -1;
    uint64_t v;
    if (out) memset(out, 0, sizeof *out);
    if (!path || !out) {
        set_err(err, errlen, "tasks_read_indices: path and out are required");
        return -1;
    }
    if (read_file(path, &data, &size, err, errlen)) return -1;
    memset(&x, 0, sizeof x);
    x.path = path;
    x.it.s = data;
    x.it.n = size;
    x.err = err;
    x.errlen = errlen;
    {
        int nul;
        size_t bad = utf8_first_bad(data, size, &nul);
        if (bad != size) {
            set_err(err, errlen, "%s: %s in the file", path, nul ? "NUL byte" : "invalid UTF-8");
            goto done;
        }
    }
    if (ix_next(&x, "the header") || strcmp(x.line, "grzo-tasks-indices 1") != 0) {
        if (x.line) ix_fail(&x, "not a grzo-tasks-indices 1 file");
        goto done;
    }
    if (ix_next(&x, "task")) goto done;
    if (!(rest = after_word(x.line, "task")) || !*rest || strlen(rest) >= sizeof out->task) {
        ix_fail(&x, "expected \"task <name>\"");
        goto done;
    }
    strcpy(out->task, rest);
    if (ix_next(&x, "seed")) goto done;
    if (!(rest = after_word(x.line, "seed")) || parse_u64(rest, &out->seed, &e) || *e) {
        ix_fail(&x, "expected \"seed <unsigned 64-bit integer>\"");
        goto done;
    }
    if (ix_next(&x, "dev_from_train")) goto done;
    if (!(rest = after_word(x.line, "dev_from_train")) || parse_u64(rest, &v, &e) || *e || v > 1) {
        ix_fail(&x, "expected \"dev_from_train 0\" or \"dev_from_train 1\"");
        goto done;
    }
    out->dev_from_train = (int)v;
    for (s = 0; s < 3; s++)
        if (ix_read_file_line(&x, out, s)) goto done;
    for (s = 0; s < 3; s++)
        if (ix_read_split(&x, out, s)) goto done;
    if (ix_next(&x, "end")) goto done;
    if (strcmp(x.line, "end") != 0) {
        ix_fail(&x, "expected \"end\" (more indices than the split count says?)");
        goto done;
    }
    while (next_line(&x.it, &x.line, &x.len))
        if (x.len) {
            ix_fail(&x, "text after \"end\"");
            goto done;
        }
    rc = 0;
done:
    free(data);
    if (rc) tasks_free_indices(out);
    return rc;
}

void tasks_free_indices(tasks_indices *idx)
{
    int s;
    if (!idx) return;
    for (s = 0; s < 3; s++) free(idx->idx[s]);
    memset(idx, 0, sizeof *idx);
}

/* ======================================================================================
   Directory resolution
   ====================================================================================== */

static int task_reads(const task_def *t, const char *name)
{
    const char *ext = file_extension(name);
    if (strcmp(ext, "jsonl") == 0) return t->from_json != NULL;
    if (strcmp(ext, "tsv") == 0) return t->from_tsv != NULL || t->label_text;
    if (strcmp(ext, "csv") == 0) return t->label_text;
    if (strcmp(ext, "json") == 0) return t->from_doc != NULL;
    return 0;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (a && dir[a - 1] == '/') a--;
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Is this test file labeled (1, 0; -1: no memory)? Headerless SST-5/TREC files always are;
   a headed TSV is when its header names the task's label column (GLUE's test.tsv does not). */
static int test_file_labeled(const task_def *t, const char *path)
{
    char line[4096];
    FILE *f;
    int labeled = 0;
    if (!(strcmp(file_extension(path), "tsv") == 0 && t->from_tsv)) return 1;
    if (!(f = fopen(path, "rb"))) return 0;
    if (fgets(line, sizeof line, f)) {
        tsv_header h = {NULL, 0};
        char **names = NULL;
        size_t cap = 0;
        line[strcspn(line, "\r\n")] = '\0';
        if (split_tabs(line, &names, &h.n, &cap) == 0) {
            h.name = names;
            labeled = column(&h, t->tsv_label_column) >= 0;
        } else {
            labeled = -1;
        }
        free(names);
    }
    fclose(f);
    return labeled;
}

/* *out: the first existing file of names[] the task can read (and, for tests, labeled), or
   NULL when there is none. Returns -1 when memory ran out: the answer is then unknown, and
   taking the next name instead would choose another file silently. */
static int first_existing(const task_def *t, const char *dir, const char *const *names, int need_labels,
                          const char **chosen, char **out)
{
    int i;
    *out = NULL;
    for (i = 0; names[i]; i++) {
        char *p;
        int labeled = 1;
        if (!task_reads(t, names[i])) continue;
        if (!(p = join_path(dir, names[i]))) return -1;
        if (file_exists(p) && (!need_labels || (labeled = test_file_labeled(t, p)) != 0)) {
            if (labeled < 0) {
                free(p);
                return -1;
            }
            *chosen = names[i];
            *out = p;
            return 0;
        }
        free(p);
    }
    return 0;
}

int tasks_resolve_dir(const char *task, const char *dir, tasks_paths *out, char *err, size_t errlen)
{
    static const char *const train_names[] = {"train.jsonl", "train.tsv", "train.csv", NULL};
    static const char *const fewglue_names[] = {"fewglue32_train.jsonl", NULL};
    static const char *const val_names[] = {"val.jsonl", NULL};
    static const char *const test_names[] = {"test.csv", "test.tsv", NULL};
    static const char *const devval_names[] = {"dev_matched.tsv", "dev.tsv", "dev.csv", NULL};
    static const char *const dev_names[] = {"dev.tsv", "dev.csv", "dev_matched.tsv", NULL};
    const task_def *t = find_task(task);
    const char *train_name = NULL, *test_name = NULL, *dev_name = NULL;
    size_t used = 0;
    int oom = 0;
    if (out) memset(out, 0, sizeof *out);
    if (!dir || !out) {
        set_err(err, errlen, "tasks_resolve_dir: a directory and out are required");
        return -1;
    }
    if (!t) {
        unknown_task_error(task, err, errlen);
        return -1;
    }
    if (t->from_doc) {   /* SQuAD, DROP: the released names, or train.json / dev.json */
        const char *const doc_train[] = {t->doc_files[0], "train.json", NULL};
        const char *const doc_val[] = {t->doc_files[1], "dev.json", NULL};
        oom = first_existing(t, dir, doc_train, 0, &train_name, &out->train) ||
              first_existing(t, dir, doc_val, 0, &test_name, &out->test);
    } else {
        oom = first_existing(t, dir, train_names, 0, &train_name, &out->train) ||
              (!out->train && first_existing(t, dir, fewglue_names, 0, &train_name, &out->train)) ||
              first_existing(t, dir, val_names, 0, &test_name, &out->test);
    }
    if (!oom && !out->test && !t->from_doc) {
        oom = first_existing(t, dir, test_names, 1, &test_name, &out->test);
        if (!oom && out->test) oom = first_existing(t, dir, dev_names, 0, &dev_name, &out->dev);
        else if (!oom) oom = first_existing(t, dir, devval_names, 0, &test_name, &out->test);
    }
    if (oom) {
        set_err(err, errlen, "%s: out of memory while looking for %s's files", dir, t->info.name);
        tasks_free_paths(out);
        return -1;
    }
    if (!out->train || !out->test) {
        set_err(err, errlen, "%s: no %s file for %s found (reads: %s)", dir, !out->train ? "train" : "validation",
                t->info.name, t->info.formats);
        tasks_free_paths(out);
        return -1;
    }
    used += (size_t)snprintf(out->note + used, sizeof out->note - used, "%s in %s: train = %s%s; ", t->info.name, dir,
                             train_name,
                             strcmp(train_name, "fewglue32_train.jsonl") == 0
                                 ? " (no full train file here; FewGLUE's 32-example subset)"
                                 : "");
    if (used < sizeof out->note)
        used += (size_t)snprintf(out->note + used, sizeof out->note - used, "test drawn from %s%s; ", test_name,
                                 strncmp(test_name, "test", 4) == 0 ? " (labeled: LM-BFF's copy of the original test/validation set)" : " (the validation split)");
    if (used < sizeof out->note)
        snprintf(out->note + used, sizeof out->note - used, "dev %s%s", dev_name ? "drawn from " : "carved from the train draw (MeZO)",
                 dev_name ? dev_name : "");
    return 0;
}

void tasks_free_paths(tasks_paths *p)
{
    if (!p) return;
    free(p->train);
    free(p->dev);
    free(p->test);
    memset(p, 0, sizeof *p);
}

/* ======================================================================================
   Printing
   ====================================================================================== */

static void print_c_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '\n') fputs("\\n", out);
        else if (*s == '"') fputs("\\\"", out);
        else fputc(*s, out);
    }
    fputc('"', out);
}

void tasks_print_table(FILE *out)
{
    size_t i;
    int k;
    for (i = 0; i < N_TASKS; i++) {
        const tasks_info *t = &TASKS[i].info;
        fprintf(out, "%s\n  files:        %s\n  context:      %s\n  continuation: %s\n  candidates:   ", t->name, t->formats,
                t->context, t->continuation);
        if (t->metric != TASKS_METRIC_ACCURACY) fputs("none: a generation task", out);
        else if (t->n_candidates == 0) fputs("the example's choices", out);
        for (k = 0; k < t->n_candidates; k++) {
            if (k) fputs(" | ", out);
            print_c_string(out, t->candidates[k]);
        }
        fprintf(out, "\n  training:     %s\n  defaults:     %ld train / %ld dev / %ld test\n  from:         %s\n",
                t->train_on_gold_tokens ? "LM loss on the gold continuation's tokens" : "classification over the candidates",
                t->default_train, t->default_dev, t->default_test, t->origin);
    }
}

void tasks_describe(const tasks_set *set, FILE *out)
{
    int s, k;
    size_t i;
    if (!set || !set->task) return;
    fprintf(out, "task %s (seed %" PRIu64 ", training: %s)\n", set->task->name, set->seed,
            set->task->metric != TASKS_METRIC_ACCURACY ? "LM loss on the gold answer; evaluation generates"
            : set->train_on_gold_tokens              ? "LM loss on the gold continuation"
                                                     : "classification");
    for (s = 0; s < 3; s++) {
        if (!set->path[s]) {
            fprintf(out, "  %-5s file: none (dev is the last part of the train draw)\n", SPLIT_NAMES[s]);
            continue;
        }
        fprintf(out, "  %-5s file: %s (%lu examples, hash %016" PRIx64 ")", SPLIT_NAMES[s], set->path[s],
                (unsigned long)set->pool[s], set->hash[s]);
        if (set->skipped[s])
            fprintf(out, ", %lu %s skipped", (unsigned long)set->skipped[s],
                    set->task->metric == TASKS_METRIC_DROP ? "questions without a usable answer (as HF \"drop\")"
                                                           : "rows without a gold label");
        fputc('\n', out);
    }
    for (s = 0; s < 3; s++) {
        const tasks_split *sp = tasks_set_split(set, s);
        size_t counts[TASKS_MAX_CANDIDATES] = {0};
        for (i = 0; i < sp->n; i++) counts[sp->ex[i].gold]++;
        if (set->task->metric != TASKS_METRIC_ACCURACY) {   /* no candidates to count */
            fprintf(out, "  %-5s %lu examples\n", SPLIT_NAMES[s], (unsigned long)sp->n);
            continue;
        }
        fprintf(out, "  %-5s %lu examples, gold:", SPLIT_NAMES[s], (unsigned long)sp->n);
        for (k = 0; k < TASKS_MAX_CANDIDATES; k++)
            if (counts[k] || (set->task->n_candidates && k < set->task->n_candidates)) fprintf(out, " [%d] %lu", k, (unsigned long)counts[k]);
        fputc('\n', out);
    }
}

/* ======================================================================================
   Scoring a generation task's prediction
   ====================================================================================== */

int tasks_score_prediction(const tasks_info *task, const tasks_example *ex, const char *prediction, double *em,
                           double *f1)
{
    if (!task || !ex || !prediction || !em || !f1 || ex->n_answers < 1) return -1;
    if (task->metric == TASKS_METRIC_SQUAD) return qa_squad_score(prediction, ex->answers, ex->n_answers, em, f1);
    if (task->metric == TASKS_METRIC_DROP) return qa_drop_score(prediction, ex->answers, ex->n_answers, em, f1);
    return -1;
}
