/* tokenizer_hf.c - Hugging Face tokenizer.json (and tokenizer_config.json) for the LLM
   module: the file is read with the one JSON reader (examples/common/json.h) and mapped
   onto the module's BPE tokenizer (tokenizer.c) through llm__tokenizer_build.

   tokenizer.json describes a pipeline: added tokens split the text, a normalizer and a
   pre-tokenizer prepare and split each fragment, the model (BPE: vocabulary and ranked
   merges) encodes each word, a post-processor adds BOS. Only the pipelines that
   Llama-family models publish are accepted, each recognised exactly:
     byte-level BPE: ByteLevel (use_regex: GPT-2's regex), or Sequence[Split(GPT-2's or
       Llama-3's regex, Isolated), ByteLevel(use_regex false)] (Llama-3), or
       Sequence[Digits(individual_digits), ByteLevel] (SmolLM2);
     character BPE with <0xXX> byte fallback (Llama-2, TinyLlama, Mistral): normalizer
       Sequence[Prepend("\u2581"), Replace(" ", "\u2581")], or pre-tokenizer Metaspace.
   Every other model type, normalizer, pre-tokenizer, regex or post-processor is refused
   with an error that names it, because a tokenizer that is almost right gives a model
   silently wrong input.

   Not read: the decoder (decoding follows from the model: the byte alphabet, or U+2581
   and <0xXX> tokens), truncation and padding (llm_tokenize encodes the whole text).

   The file is untrusted: every field is type-checked, ids must be dense enough to index
   an array, and merges must name vocabulary tokens (as the tokenizers library requires).
   It is fuzzed (tests/llm/fuzz_loaders.c). */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "llm.h"
#include "llm_internal.h"

#define HF_MAX_FILE ((size_t)1 << 30)
#define U2581 "\xe2\x96\x81"

/* The pre-tokenizer regexes recognised, as tokenizer.json spells them (JSON-decoded). */
static const char GPT2_REGEX[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_REGEX[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct hf_load {
    llm_tokenizer_spec spec;
    llm_tokenizer_hf hf;
    llm_bytes *tokens;          /* spec.n_tokens, views into the JSON tree */
    int32_t *types;
    llm_bytes *merges;          /* 2 per merge */
    const char *bos_text;       /* the post-processor's leading special token */
    int has_normalizer;         /* Prepend/Replace: added tokens must then be "normalized": false */
    char *err;
    size_t errlen;
} hf_load;

/* ------------------------------------------------------------------------------------ */
/* Typed member access: absent and null read as the default; a wrong type is an error.    */

static int hf_bool(hf_load *h, const json_value *obj, const char *where, const char *key, int def, int *out)
{
    const json_value *v = json_get(obj, key);
    *out = def;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return llm__errf(h->err, h->errlen, "tokenizer.json: %s.%s is not a boolean", where, key);
    *out = v->type == JSON_TRUE;
    return 0;
}

/* A string member, or NULL when absent or null. */
static int hf_string(hf_load *h, const json_value *obj, const char *where, const char *key, const json_value **out)
{
    const json_value *v = json_get(obj, key);
    *out = NULL;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_STRING) return llm__errf(h->err, h->errlen, "tokenizer.json: %s.%s is not a string", where, key);
    *out = v;
    return 0;
}

static int is_str(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && strcmp(v->string, s) == 0;
}

/* The "type" of a pipeline step (normalizer, pre-tokenizer, ...). */
static const char *step_type(hf_load *h, const json_value *step, const char *what)
{
    const json_value *type = json_get(step, "type");
    if (!step || step->type != JSON_OBJECT || !type || type->type != JSON_STRING) {
        llm__errf(h->err, h->errlen, "tokenizer.json: a %s has no \"type\"", what);
        return NULL;
    }
    return type->string;
}

/* A pipeline step or a Sequence of steps: the steps as an array (members of key). */
static int step_list(hf_load *h, const json_value *v, const char *what, const char *key, const json_value **items,
                     size_t *n)
{
    const char *type = step_type(h, v, what);
    const json_value *list;
    if (!type) return 1;
    if (strcmp(type, "Sequence") != 0) {
        *items = v;
        *n = 1;
        return 0;
    }
    list = json_get(v, key);
    if (!list || list->type != JSON_ARRAY)
        return llm__errf(h->err, h->errlen, "tokenizer.json: %s Sequence has no \"%s\" array", what, key);
    *items = list->items;
    *n = list->n;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Vocabulary: model.vocab (text -> id) and added_tokens, into an id-indexed array.        */

static int hf_id(hf_load *h, const json_value *v, const char *what, int64_t *id)
{
    if (!v || v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer >= INT32_MAX - 1)
        return llm__errf(h->err, h->errlen, "tokenizer.json: %s has no valid id", what);
    *id = v->integer;
    return 0;
}

/* Highest id of the vocabulary and the added tokens, checking their shapes. */
static int hf_max_id(hf_load *h, const json_value *vocab, const json_value *added, int64_t *max_id, size_t *entries)
{
    size_t i;
    int64_t id = 0;
    *max_id = -1;
    for (i = 0; i < vocab->n; i++) {
        if (hf_id(h, &vocab->items[i], "a model.vocab entry", &id)) return 1;
        if (id > *max_id) *max_id = id;
    }
    for (i = 0; added && i < added->n; i++) {
        const json_value *a = &added->items[i], *content = json_get(a, "content");
        if (a->type != JSON_OBJECT || !content || content->type != JSON_STRING || content->string_len == 0)
            return llm__errf(h->err, h->errlen, "tokenizer.json: added_tokens[%zu] has no content", i);
        if (hf_id(h, json_get(a, "id"), "an added token", &id)) return 1;
        if (id > *max_id) *max_id = id;
    }
    *entries = vocab->n + (added ? added->n : 0);
    if (*max_id < 0) return llm__errf(h->err, h->errlen, "tokenizer.json: the vocabulary is empty");
    /* ids index an array: a hostile file must not make it huge (real files are dense) */
    if ((uint64_t)*max_id >= 2 * (uint64_t)*entries + 256)
        return llm__errf(h->err, h->errlen, "tokenizer.json: token id %lld is far beyond the %zu tokens",
                         (long long)*max_id, *entries);
    return 0;
}

static int hf_place(hf_load *h, int64_t id, const char *text, size_t len, int type)
{
    llm_bytes *slot = &h->tokens[id];
    if (slot->p) {
        if (slot->n == len && memcmp(slot->p, text, len) == 0) { /* an added token also in model.vocab */
            if (type != LLM_TOKTYPE_NORMAL) h->types[id] = type;
            return 0;
        }
        return llm__errf(h->err, h->errlen, "tokenizer.json: id %lld is given to two different tokens", (long long)id);
    }
    slot->p = text;
    slot->n = len;
    h->types[id] = type;
    return 0;
}

/* An added token's flags: only the plain kind is supported. */
static int hf_added_flags(hf_load *h, const json_value *a, int *special)
{
    static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
    const json_value *content = json_get(a, "content");
    size_t k;
    int on, normalized;
    for (k = 0; k < sizeof unsupported / sizeof unsupported[0]; k++) {
        if (hf_bool(h, a, "added_tokens[]", unsupported[k], 0, &on)) return 1;
        if (on)
            return llm__errf(h->err, h->errlen, "tokenizer.json: added token '%.64s' sets %s, which is not supported",
                             content->string, unsupported[k]);
    }
    if (hf_bool(h, a, "added_tokens[]", "special", 0, special) ||
        hf_bool(h, a, "added_tokens[]", "normalized", !*special, &normalized))
        return 1;
    /* a normalized added token is matched in the normalized text: with a normalizer
       that changes the text, that differs from matching the raw text, as grzo does */
    if (normalized && h->has_normalizer)
        return llm__errf(h->err, h->errlen,
                         "tokenizer.json: added token '%.64s' is \"normalized\" under a normalizer: not supported",
                         content->string);
    return 0;
}

static int hf_vocab(hf_load *h, const json_value *model, const json_value *added)
{
    const json_value *vocab = json_get(model, "vocab");
    int64_t max_id, id;
    size_t i, entries;
    if (!vocab || vocab->type != JSON_OBJECT) return llm__errf(h->err, h->errlen, "tokenizer.json: model.vocab is not an object");
    if (added && added->type != JSON_ARRAY) return llm__errf(h->err, h->errlen, "tokenizer.json: added_tokens is not an array");
    if (hf_max_id(h, vocab, added, &max_id, &entries)) return 1;
    h->spec.n_tokens = (int32_t)(max_id + 1);
    h->tokens = (llm_bytes *)calloc((size_t)h->spec.n_tokens, sizeof *h->tokens);
    h->types = (int32_t *)malloc((size_t)h->spec.n_tokens * sizeof *h->types);
    if (!h->tokens || !h->types) return llm__errf(h->err, h->errlen, "out of memory");
    for (i = 0; i < (size_t)h->spec.n_tokens; i++) h->types[i] = LLM_TOKTYPE_UNUSED; /* gaps: empty, unused */
    for (i = 0; i < vocab->n; i++)
        if (hf_place(h, vocab->items[i].integer, vocab->keys[i], strlen(vocab->keys[i]), LLM_TOKTYPE_NORMAL)) return 1;
    for (i = 0; added && i < added->n; i++) {
        const json_value *a = &added->items[i], *content = json_get(a, "content");
        int special = 0;
        if (hf_added_flags(h, a, &special)) return 1;
        id = json_get(a, "id")->integer;
        /* special ones are CONTROL (split out only with parse_special), the others
           USER_DEFINED (always split out), as in llama.cpp's GGUF conversion */
        if (hf_place(h, id, content->string, content->string_len, special ? LLM_TOKTYPE_CONTROL : LLM_TOKTYPE_USER_DEFINED))
            return 1;
    }
    for (i = 0; i < (size_t)h->spec.n_tokens; i++)
        if (!h->tokens[i].p) h->tokens[i].p = "";
    h->spec.tokens = h->tokens;
    h->spec.types = h->types;
    return 0;
}

/* The id of the token spelled text, or -1: a linear scan, for the few named tokens. */
static int32_t hf_find(const hf_load *h, const char *text)
{
    size_t n = strlen(text);
    int32_t i;
    for (i = 0; i < h->spec.n_tokens; i++)
        if (h->tokens[i].n == n && memcmp(h->tokens[i].p, text, n) == 0) return i;
    return -1;
}

/* ------------------------------------------------------------------------------------ */
/* The model: BPE only.                                                                   */

/* One merge: "left right" (exactly one space, as the tokenizers library reads it) or a
   [left, right] pair. */
static int hf_merge(hf_load *h, const json_value *m, size_t i)
{
    llm_bytes *pair = &h->merges[2 * i];
    if (m->type == JSON_STRING) {
        const char *sp = (const char *)memchr(m->string, ' ', m->string_len);
        if (!sp || memchr(sp + 1, ' ', m->string_len - (size_t)(sp + 1 - m->string)))
            return llm__errf(h->err, h->errlen, "tokenizer.json: merge %zu is not \"left right\"", i);
        pair[0].p = m->string, pair[0].n = (size_t)(sp - m->string);
        pair[1].p = sp + 1, pair[1].n = m->string_len - pair[0].n - 1;
        return 0;
    }
    if (m->type != JSON_ARRAY || m->n != 2 || m->items[0].type != JSON_STRING || m->items[1].type != JSON_STRING)
        return llm__errf(h->err, h->errlen, "tokenizer.json: merge %zu is neither \"left right\" nor [left, right]", i);
    pair[0].p = m->items[0].string, pair[0].n = m->items[0].string_len;
    pair[1].p = m->items[1].string, pair[1].n = m->items[1].string_len;
    return 0;
}

static int hf_merges(hf_load *h, const json_value *model)
{
    const json_value *merges = json_get(model, "merges");
    size_t i;
    if (!merges || merges->type != JSON_ARRAY) return llm__errf(h->err, h->errlen, "tokenizer.json: model.merges is not an array");
    if (merges->n > (size_t)INT32_MAX / 2) return llm__errf(h->err, h->errlen, "tokenizer.json: too many merges");
    h->merges = (llm_bytes *)malloc((2 * merges->n + 1) * sizeof *h->merges);
    if (!h->merges) return llm__errf(h->err, h->errlen, "out of memory");
    for (i = 0; i < merges->n; i++)
        if (hf_merge(h, &merges->items[i], i)) return 1;
    h->spec.n_merges = (int32_t)merges->n;
    h->hf.merge_pairs = h->merges;
    return 0;
}

/* Options of the BPE model that change the encoding and are not supported must be off. */
static int hf_model_options(hf_load *h, const json_value *model)
{
    const json_value *dropout = json_get(model, "dropout"), *unk, *prefix, *suffix;
    if (dropout && dropout->type != JSON_NULL && !(dropout->type == JSON_NUMBER && dropout->number == 0.0))
        return llm__errf(h->err, h->errlen, "tokenizer.json: BPE dropout is not supported");
    if (hf_string(h, model, "model", "continuing_subword_prefix", &prefix) ||
        hf_string(h, model, "model", "end_of_word_suffix", &suffix) || hf_string(h, model, "model", "unk_token", &unk))
        return 1;
    if ((prefix && prefix->string_len) || (suffix && suffix->string_len))
        return llm__errf(h->err, h->errlen, "tokenizer.json: BPE continuing_subword_prefix/end_of_word_suffix are not supported");
    if (hf_bool(h, model, "model", "byte_fallback", 0, &h->hf.byte_fallback) ||
        hf_bool(h, model, "model", "fuse_unk", 0, &h->hf.fuse_unk) ||
        hf_bool(h, model, "model", "ignore_merges", 0, &h->hf.ignore_merges))
        return 1;
    h->spec.unk = -1;
    if (unk && (h->spec.unk = hf_find(h, unk->string)) < 0)
        return llm__errf(h->err, h->errlen, "tokenizer.json: unk_token '%.64s' is not in the vocabulary", unk->string);
    return 0;
}

static int hf_model(hf_load *h, const json_value *root)
{
    const json_value *model = json_get(root, "model");
    const char *type;
    if (!model) return llm__errf(h->err, h->errlen, "tokenizer.json: no \"model\"");
    if (!(type = step_type(h, model, "model"))) return 1;
    if (strcmp(type, "BPE") != 0)
        return llm__errf(h->err, h->errlen, "tokenizer.json: model type '%.64s' is not supported (only BPE)", type);
    return hf_vocab(h, model, json_get(root, "added_tokens")) || hf_model_options(h, model) || hf_merges(h, model);
}

/* ------------------------------------------------------------------------------------ */
/* Normalizer: Prepend("\u2581") and Replace(" ", "\u2581"), alone or in a Sequence.       */

static int hf_normalizer(hf_load *h, const json_value *root)
{
    const json_value *norm = json_get(root, "normalizer"), *steps;
    size_t i, n;
    if (!norm || norm->type == JSON_NULL) return 0;
    if (step_list(h, norm, "normalizer", "normalizers", &steps, &n)) return 1;
    for (i = 0; i < n; i++) {
        const json_value *st = &steps[i], *pattern;
        const char *type = step_type(h, st, "normalizer");
        if (!type) return 1;
        if (strcmp(type, "Prepend") == 0 && is_str(json_get(st, "prepend"), U2581)) {
            h->hf.prepend_u2581 = 1;
        } else if (strcmp(type, "Replace") == 0 && (pattern = json_get(st, "pattern")) &&
                   is_str(json_get(pattern, "String"), " ") && is_str(json_get(st, "content"), U2581)) {
            h->hf.space_to_u2581 = 1;
        } else {
            return llm__errf(h->err, h->errlen,
                             "tokenizer.json: normalizer '%.64s' is not supported (only Prepend(\"\\u2581\") and "
                             "Replace(\" \", \"\\u2581\"))", type);
        }
    }
    h->has_normalizer = h->hf.prepend_u2581 || h->hf.space_to_u2581; /* an empty Sequence is none */
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Pre-tokenizer.                                                                         */

typedef struct pre_state {
    int digits, regex, byte_level, metaspace, steps;
} pre_state;

static int pre_split(hf_load *h, const json_value *st, pre_state *p)
{
    const json_value *pattern = json_get(st, "pattern"), *regex = json_get(pattern, "Regex");
    int invert;
    if (hf_bool(h, st, "Split", "invert", 0, &invert)) return 1;
    if (!regex || regex->type != JSON_STRING)
        return llm__errf(h->err, h->errlen, "tokenizer.json: Split pre-tokenizer without a regex pattern is not supported");
    if (p->regex || p->digits || p->byte_level || invert || !is_str(json_get(st, "behavior"), "Isolated"))
        return llm__errf(h->err, h->errlen,
                         "tokenizer.json: this Split pre-tokenizer is not supported (one Split, Isolated, not "
                         "inverted, before ByteLevel)");
    if (strcmp(regex->string, GPT2_REGEX) == 0) p->regex = LLM_PRE_GPT2;
    else if (strcmp(regex->string, LLAMA3_REGEX) == 0) p->regex = LLM_PRE_LLAMA3;
    else
        return llm__errf(h->err, h->errlen, "tokenizer.json: Split regex '%.200s' is not supported (only GPT-2's and Llama-3's)",
                         regex->string);
    return 0;
}

static int pre_byte_level(hf_load *h, const json_value *st, pre_state *p)
{
    int use_regex, prefix;
    if (hf_bool(h, st, "ByteLevel", "use_regex", 1, &use_regex) ||
        hf_bool(h, st, "ByteLevel", "add_prefix_space", 0, &prefix))
        return 1;
    if (p->byte_level) return llm__errf(h->err, h->errlen, "tokenizer.json: two ByteLevel pre-tokenizers");
    if (use_regex && p->regex)
        return llm__errf(h->err, h->errlen, "tokenizer.json: ByteLevel's regex after a Split regex is not supported");
    /* the prefix space goes in front of every piece the earlier steps made: supported
       only where those pieces are the fragments themselves */
    if (prefix && p->steps)
        return llm__errf(h->err, h->errlen, "tokenizer.json: ByteLevel add_prefix_space after another pre-tokenizer is not supported");
    if (use_regex) p->regex = LLM_PRE_GPT2;
    h->hf.byte_prefix_space = prefix;
    p->byte_level = 1;
    return 0;
}

static int pre_metaspace(hf_load *h, const json_value *st, pre_state *p)
{
    const json_value *scheme;
    int legacy_prefix, split;
    if (p->steps)
        return llm__errf(h->err, h->errlen, "tokenizer.json: Metaspace together with other pre-tokenizers is not supported");
    if (!is_str(json_get(st, "replacement"), U2581))
        return llm__errf(h->err, h->errlen, "tokenizer.json: Metaspace replacement other than \"\\u2581\" is not supported");
    if (hf_string(h, st, "Metaspace", "prepend_scheme", &scheme) ||
        hf_bool(h, st, "Metaspace", "add_prefix_space", 1, &legacy_prefix) || hf_bool(h, st, "Metaspace", "split", 1, &split))
        return 1;
    if (!scheme) h->hf.meta_prefix = legacy_prefix ? LLM_META_PREFIX_ALWAYS : LLM_META_PREFIX_NEVER;
    else if (strcmp(scheme->string, "always") == 0) h->hf.meta_prefix = LLM_META_PREFIX_ALWAYS;
    else if (strcmp(scheme->string, "first") == 0) h->hf.meta_prefix = LLM_META_PREFIX_FIRST;
    else if (strcmp(scheme->string, "never") == 0) h->hf.meta_prefix = LLM_META_PREFIX_NEVER;
    else return llm__errf(h->err, h->errlen, "tokenizer.json: Metaspace prepend_scheme '%.32s' is unknown", scheme->string);
    h->hf.space_to_u2581 = 1;
    h->hf.split_u2581 = split;
    p->metaspace = 1;
    return 0;
}

static int pre_step(hf_load *h, const json_value *st, pre_state *p)
{
    const char *type = step_type(h, st, "pre-tokenizer");
    int individual, rc;
    if (!type) return 1;
    if (p->byte_level || p->metaspace)
        return llm__errf(h->err, h->errlen, "tokenizer.json: pre-tokenizer '%.64s' after ByteLevel or Metaspace is not supported",
                         type);
    if (strcmp(type, "ByteLevel") == 0) {
        rc = pre_byte_level(h, st, p);
    } else if (strcmp(type, "Split") == 0) {
        rc = pre_split(h, st, p);
    } else if (strcmp(type, "Metaspace") == 0) {
        rc = pre_metaspace(h, st, p);
    } else if (strcmp(type, "Digits") == 0) {
        if (hf_bool(h, st, "Digits", "individual_digits", 0, &individual)) return 1;
        if (!individual || p->steps)
            return llm__errf(h->err, h->errlen,
                             "tokenizer.json: Digits pre-tokenizer is supported only first and with individual_digits");
        p->digits = 1;
        rc = 0;
    } else {
        return llm__errf(h->err, h->errlen, "tokenizer.json: pre-tokenizer '%.64s' is not supported", type);
    }
    p->steps++;
    return rc;
}

/* The pre-tokenizer steps into hf.pre / hf.byte_level / the Metaspace fields. */
static int hf_pre_tokenizer(hf_load *h, const json_value *root)
{
    const json_value *pre = json_get(root, "pre_tokenizer"), *steps;
    pre_state p;
    size_t i, n = 0;
    memset(&p, 0, sizeof p);
    if (pre && pre->type != JSON_NULL) {
        if (step_list(h, pre, "pre-tokenizer", "pretokenizers", &steps, &n)) return 1;
        for (i = 0; i < n; i++)
            if (pre_step(h, &steps[i], &p)) return 1;
    }
    if (p.byte_level && h->has_normalizer)
        return llm__errf(h->err, h->errlen, "tokenizer.json: ByteLevel with a normalizer is not supported");
    if (!p.byte_level && (p.regex || p.digits))
        return llm__errf(h->err, h->errlen, "tokenizer.json: Split or Digits without ByteLevel is not supported");
    if (p.digits && p.regex != LLM_PRE_GPT2)
        return llm__errf(h->err, h->errlen, "tokenizer.json: Digits is supported only with GPT-2's regex (SmolLM2)");
    h->hf.byte_level = p.byte_level;
    h->hf.pre = p.digits ? LLM_PRE_DIGITS_THEN_GPT2 : p.regex ? p.regex : LLM_PRE_WHOLE;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Post-processor: BOS in front (TemplateProcessing), nothing else.                        */

static int post_template(hf_load *h, const json_value *st)
{
    const json_value *single = json_get(st, "single"), *tok;
    size_t i;
    if (!single || single->type != JSON_ARRAY)
        return llm__errf(h->err, h->errlen, "tokenizer.json: TemplateProcessing has no \"single\" template");
    for (i = 0; i < single->n; i++) {
        const json_value *piece = &single->items[i];
        if (json_get(piece, "Sequence")) continue;
        tok = json_get(json_get(piece, "SpecialToken"), "id");
        if (!tok || tok->type != JSON_STRING || i != 0 || single->n != 2)
            return llm__errf(h->err, h->errlen,
                             "tokenizer.json: TemplateProcessing other than [BOS] $A is not supported");
        h->bos_text = tok->string;
    }
    return 0;
}

static int hf_post_processor(hf_load *h, const json_value *root)
{
    const json_value *post = json_get(root, "post_processor"), *steps;
    size_t i, n;
    if (!post || post->type == JSON_NULL) return 0;
    if (step_list(h, post, "post-processor", "processors", &steps, &n)) return 1;
    for (i = 0; i < n; i++) {
        const char *type = step_type(h, &steps[i], "post-processor");
        if (!type) return 1;
        if (strcmp(type, "TemplateProcessing") == 0) {
            if (post_template(h, &steps[i])) return 1;
        } else if (strcmp(type, "ByteLevel") != 0) { /* ByteLevel only trims offsets */
            return llm__errf(h->err, h->errlen, "tokenizer.json: post-processor '%.64s' is not supported", type);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* tokenizer_config.json: bos/eos/pad tokens, add_bos_token, chat_template.                */

/* A token named by the config: "text", {"content": "text"} or null. */
static int config_token(hf_load *h, const json_value *cfg, const char *key, int32_t *id)
{
    const json_value *v = json_get(cfg, key);
    if (v && v->type == JSON_OBJECT) v = json_get(v, "content");
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_STRING) return llm__errf(h->err, h->errlen, "tokenizer_config.json: %s is not a token", key);
    if ((*id = hf_find(h, v->string)) < 0)
        return llm__errf(h->err, h->errlen, "tokenizer_config.json: %s '%.64s' is not in the vocabulary", key, v->string);
    return 0;
}

/* chat_template: a string, or a list of {name, template} of which "default" is taken. */
static int config_chat_template(hf_load *h, const json_value *cfg)
{
    const json_value *v = json_get(cfg, "chat_template");
    size_t i;
    if (v && v->type == JSON_ARRAY) {
        const json_value *found = NULL;
        for (i = 0; i < v->n; i++)
            if (is_str(json_get(&v->items[i], "name"), "default")) found = json_get(&v->items[i], "template");
        v = found;
    }
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_STRING) return llm__errf(h->err, h->errlen, "tokenizer_config.json: chat_template is not a string");
    h->spec.chat_template.p = v->string;
    h->spec.chat_template.n = v->string_len;
    return 0;
}

static int hf_config(hf_load *h, const json_value *cfg)
{
    const json_value *add_bos = json_get(cfg, "add_bos_token");
    if (cfg->type != JSON_OBJECT) return llm__errf(h->err, h->errlen, "tokenizer_config.json: not an object");
    if (config_token(h, cfg, "bos_token", &h->spec.bos) || config_token(h, cfg, "eos_token", &h->spec.eos) ||
        config_token(h, cfg, "pad_token", &h->spec.pad) || config_chat_template(h, cfg))
        return 1;
    /* transformers rebuilds the post-processor from add_bos_token when the config has it */
    if (add_bos && add_bos->type != JSON_NULL && hf_bool(h, cfg, "tokenizer_config", "add_bos_token", 0, &h->spec.add_bos))
        return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Loading.                                                                               */

static int hf_parse(hf_load *h, const char *what, const char *text, size_t len, json_value *out)
{
    char msg[160];
    size_t at = 0;
    if (json_parse(text, len, out, &at, msg, sizeof msg))
        return llm__errf(h->err, h->errlen, "%s: %s at byte %zu", what, msg, at);
    return 0;
}

/* Everything in tokenizer.json, then the config's overrides. */
static int hf_describe(hf_load *h, const json_value *root, const json_value *cfg)
{
    if (root->type != JSON_OBJECT) return llm__errf(h->err, h->errlen, "tokenizer.json: not an object");
    h->spec.bos = h->spec.eos = h->spec.unk = h->spec.pad = -1;
    if (hf_normalizer(h, root) || hf_model(h, root) || hf_pre_tokenizer(h, root) || hf_post_processor(h, root)) return 1;
    if (h->bos_text) {
        if ((h->spec.bos = hf_find(h, h->bos_text)) < 0)
            return llm__errf(h->err, h->errlen, "tokenizer.json: the template's token '%.64s' is not in the vocabulary",
                             h->bos_text);
        h->spec.add_bos = 1;
    }
    if (cfg && hf_config(h, cfg)) return 1;
    if (h->hf.byte_level && h->hf.byte_fallback)
        return llm__errf(h->err, h->errlen, "tokenizer.json: byte_fallback with ByteLevel is not supported");
    h->spec.kind = LLM_TOK_BPE;
    h->spec.model_name = h->hf.byte_level ? "gpt2" : "llama";
    h->spec.pre.p = h->hf.pre == LLM_PRE_GPT2 ? "gpt2" : h->hf.pre == LLM_PRE_LLAMA3 ? "llama-bpe"
                  : h->hf.pre == LLM_PRE_DIGITS_THEN_GPT2 ? "smollm" : "";
    h->spec.pre.n = strlen(h->spec.pre.p);
    h->spec.hf = &h->hf;
    return 0;
}

int llm_tokenizer_load_hf_memory(const char *json, size_t len, const char *config_json, size_t config_len,
                                 llm_tokenizer **out, char *err, size_t errlen)
{
    hf_load h;
    json_value root, cfg;
    int rc;
    if (!out) return llm__errf(err, errlen, "llm_tokenizer_load_hf: missing argument");
    *out = NULL;
    if (!json || (!config_json && config_len)) return llm__errf(err, errlen, "llm_tokenizer_load_hf: missing argument");
    memset(&h, 0, sizeof h);
    h.err = err;
    h.errlen = errlen;
    if (hf_parse(&h, "tokenizer.json", json, len, &root)) return 1;
    if (config_json && hf_parse(&h, "tokenizer_config.json", config_json, config_len, &cfg)) {
        json_free(&root);
        return 1;
    }
    rc = hf_describe(&h, &root, config_json ? &cfg : NULL) || llm__tokenizer_build(&h.spec, out, err, errlen);
    free(h.tokens);
    free(h.types);
    free(h.merges);
    json_free(&root);
    if (config_json) json_free(&cfg);
    return rc;
}

/* dir/name into buf; 1 if it does not fit. */
static int join_path(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap;
}

/* tokenizer_config.json is optional: a missing file reads as none (*data NULL). */
static int read_optional(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    *data = NULL;
    *size = 0;
    if (!f && errno == ENOENT) return 0;
    if (f) fclose(f);
    return llm__read_file(path, HF_MAX_FILE, data, size, err, errlen);
}

int llm_tokenizer_load_hf(const char *dir, llm_tokenizer **out, char *err, size_t errlen)
{
    char path[4096];
    uint8_t *tok = NULL, *cfg = NULL;
    size_t tok_n = 0, cfg_n = 0;
    int rc;
    if (out) *out = NULL;
    if (!dir || !out) return llm__errf(err, errlen, "llm_tokenizer_load_hf: missing argument");
    if (join_path(path, sizeof path, dir, "tokenizer.json")) return llm__errf(err, errlen, "%s: path too long", dir);
    if (llm__read_file(path, HF_MAX_FILE, &tok, &tok_n, err, errlen)) return 1;
    if (join_path(path, sizeof path, dir, "tokenizer_config.json") || read_optional(path, &cfg, &cfg_n, err, errlen)) {
        free(tok);
        return 1;
    }
    rc = llm_tokenizer_load_hf_memory((const char *)tok, tok_n, cfg ? (const char *)cfg : NULL, cfg_n, out, err, errlen);
    if (rc) llm__err_prefix(err, errlen, dir);   /* name the folder: the messages say which of its files */
    free(tok);
    free(cfg);
    return rc;
}
