/* tokenizer.c - tokenizers for the grzo LLM examples.

   Two algorithms cover the supported files:

   SentencePiece-style BPE ("SPM": llama2.c tokenizer.bin, GGUF tokenizer.ggml.model =
   "llama"). The text, with a dummy-prefix space in front, is split into UTF-8 characters
   (characters missing from the vocabulary fall back to <0xXX> byte tokens); then the
   adjacent pair whose concatenation is the vocabulary entry with the highest score is
   merged, the leftmost on ties, until no pair merges. This is llama2.c's encode() (and
   llama.cpp's SPM tokenizer), done with a priority queue instead of rescanning the
   whole sequence after each merge, which gives the same merges in O(n log n).

   GPT-2 byte-level BPE ("gpt2"). Each byte is first written as one printable character
   (GPT-2's bytes_to_unicode: the space becomes "Ġ", the newline "Ċ"), the text is split
   into words by the pre-tokenizer the model declares (tokenizer.ggml.pre), and inside
   each word the adjacent pair with the lowest merge rank (tokenizer.ggml.merges) is merged,
   leftmost first, until none is left. Pre-tokenizers: GPT-2's regex
       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
   (hand-coded below), and "smollm" (also starcoder, refact, codeshell, command-r, exaone,
   minerva in llama.cpp): every \p{N} character is split off on its own first, then the
   GPT-2 regex runs on the pieces between.

   Hugging Face tokenizer.json (tokenizer_hf.c, spec.hf) adds to the BPE: Llama-3's regex
       (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
   (hand-coded beside GPT-2's), ByteLevel's add_prefix_space, ignore_merges (a word that is
   itself in the vocabulary is emitted whole), and character BPE (Llama-2's files): spaces
   become U+2581 (normalizer Replace / Metaspace, with Prepend or Metaspace's prefix), each
   character of the word is a symbol, else its <0xXX> byte tokens (byte_fallback), else
   <unk> (fused when fuse_unk), and merges go by rank as in the byte-level case. The
   tokenizers library is the reference for all of it (tests/llm/test_llm_tokenizer_hf.c).

   Special tokens (GGUF CONTROL/UNKNOWN types when parse_special is on, USER_DEFINED
   always) that occur verbatim in the text are emitted directly and split the text into
   fragments that are tokenized separately, as llama.cpp does. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "llm_internal.h"

/* Unicode classes for the pre-tokenizer (tables at the end of this file). */
static int cp_is_letter(uint32_t cp);
static int cp_is_number(uint32_t cp);
static int cp_is_space(uint32_t cp);


struct llm_tokenizer {
    int kind;                  /* LLM_TOK_SPM or LLM_TOK_BPE */
    const char *model_name;
    char pre_name[32];
    int pre;                   /* LLM_PRE_* (BPE) */
    int32_t n;                 /* vocabulary size */
    char *pool;                /* token texts, NUL-terminated, then decoded BPE texts */
    size_t *off;               /* token i's text at pool + off[i] */
    uint32_t *len;             /* its length in bytes (may contain NULs in hostile files) */
    const char **piece;        /* what llm_token_text returns for token i */
    float *score;              /* SPM merge priority (NaN read as -inf) */
    uint8_t *type;             /* GGUF token type */
    uint32_t vmask;            /* vocabulary hash: text -> lowest id */
    int32_t *vslot;
    uint32_t mmask;            /* BPE merge hash: (left id, right id) -> merge */
    int32_t *mslot;            /* merge index + 1; 0 = empty */
    int32_t *m_left, *m_right, *m_result;
    int32_t n_merges;
    int32_t byte_tok[256];     /* SPM: <0xXX>; BPE: the byte's character; -1 if absent */
    char byte_str[256][2];     /* one-byte strings for <0xXX> pieces */
    int32_t bos, eos, unk, pad;
    int add_bos, add_space_prefix;
    int byte_level;            /* BPE: 1 GPT-2 byte alphabet; 0 characters + <0xXX> (tokenizer.json) */
    llm_tokenizer_hf hf;       /* tokenizer.json's text preparation (all 0 otherwise) */
    int from_hf;               /* unknown characters: unk (fused) or dropped, as the tokenizers library */
    int strip_space_after_bos; /* the first word's prefix space is not part of the decoded text */
    char *chat_template;       /* NUL-terminated; NULL if none */
    int parse_special;
    int32_t *special;          /* special token ids, longest text first */
    int32_t n_special;
    uint8_t special_first[256];/* 1 if some special token starts with this byte */
};

/* ------------------------------------------------------------------------------------ */
/* Small helpers.                                                                        */

static uint32_t hash_bytes2(const char *a, size_t an, const char *b, size_t bn)
{
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < an; i++) h = (h ^ (uint8_t)a[i]) * 16777619u;
    for (i = 0; i < bn; i++) h = (h ^ (uint8_t)b[i]) * 16777619u;
    return h;
}

static uint32_t hash_pair(int32_t a, int32_t b)
{
    uint64_t x = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

static const char *tok_text(const llm_tokenizer *t, int32_t id)
{
    return t->pool + t->off[id];
}

/* The lowest id whose text is a followed by b, or -1. */
static int32_t vocab_find2(const llm_tokenizer *t, const char *a, size_t an, const char *b, size_t bn)
{
    uint32_t h;
    for (h = hash_bytes2(a, an, b, bn) & t->vmask; t->vslot[h]; h = (h + 1) & t->vmask) {
        int32_t id = t->vslot[h] - 1;
        const char *s = tok_text(t, id);
        if (t->len[id] == an + bn && memcmp(s, a, an) == 0 && memcmp(s + an, b, bn) == 0) return id;
    }
    return -1;
}

static int32_t vocab_find(const llm_tokenizer *t, const char *s, size_t n)
{
    return vocab_find2(t, s, n, "", 0);
}

/* Length of the UTF-8 sequence starting at s[0] (1 for invalid bytes), and its code point
   (invalid bytes read as 0xFFFD-like "other" characters: 0x110000 + byte, outside Unicode). */
static size_t utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const uint8_t *u = (const uint8_t *)s;
    uint32_t c = u[0], need, i, v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if ((c & 0xE0) == 0xC0) need = 1, v = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) need = 2, v = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) need = 3, v = c & 0x07, min = 0x10000;
    else goto invalid;
    if (need >= n) goto invalid;
    for (i = 1; i <= need; i++) {
        if ((u[i] & 0xC0) != 0x80) goto invalid;
        v = v << 6 | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto invalid;
    *cp = v;
    return need + 1;
invalid:
    *cp = 0x110000u + c;
    return 1;
}

static size_t utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's bytes_to_unicode: the printable Latin-1 bytes (33-126, 161-172, 174-255) stand
   for themselves; the other 68 (0-32, 127-160, 173) become U+0100.. U+0143 in byte order,
   so the space is U+0120 and the newline U+010A. */
static int byte_is_printable(uint32_t b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

static uint32_t byte_to_unicode(uint8_t b)
{
    if (byte_is_printable(b)) return b;
    if (b <= 32) return 256u + b;
    if (b <= 160) return 256u + 33u + (b - 127u);
    return 256u + 33u + 34u; /* 173, the soft hyphen */
}

/* The byte a byte-level character stands for, or -1. */
static int unicode_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 33 + 34) return (int)(cp - 256 - 33 + 127);
    return cp == 256 + 33 + 34 ? 173 : -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xXX>" -> XX, else -1. */
static int byte_token_value(const char *s, size_t n)
{
    int hi, lo;
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    hi = hexval(s[3]);
    lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* ------------------------------------------------------------------------------------ */
/* Construction.                                                                         */

void llm_tokenizer_free(llm_tokenizer *t)
{
    if (!t) return;
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->piece);
    free(t->score);
    free(t->type);
    free(t->vslot);
    free(t->mslot);
    free(t->m_left);
    free(t->m_right);
    free(t->m_result);
    free(t->special);
    free(t->chat_template);
    free(t);
}

static uint32_t table_mask_for(uint64_t count)
{
    uint64_t cap = 16;
    while (cap < 2 * count) cap *= 2;
    return (uint32_t)(cap - 1);
}

/* Copy the token texts into the pool (SPM from GGUF: U+2581 -> ' ') and hash them. */
static int build_vocab(llm_tokenizer *t, const llm_tokenizer_spec *s, char *err, size_t errlen)
{
    size_t total = 0, pos = 0;
    int32_t i;
    for (i = 0; i < s->n_tokens; i++) {
        if (s->tokens[i].n > UINT32_MAX || s->tokens[i].n > SIZE_MAX / 2 - total - 1)
            return llm__errf(err, errlen, "tokenizer vocabulary too large");
        total += s->tokens[i].n + 1;
    }
    /* BPE also stores each token's decoded bytes (never longer than its text) */
    t->pool = (char *)malloc(t->kind == LLM_TOK_BPE ? 2 * total : total);
    t->off = (size_t *)malloc((size_t)s->n_tokens * sizeof(size_t));
    t->len = (uint32_t *)malloc((size_t)s->n_tokens * sizeof(uint32_t));
    t->score = (float *)malloc((size_t)s->n_tokens * sizeof(float));
    t->type = (uint8_t *)malloc((size_t)s->n_tokens);
    t->piece = (const char **)malloc((size_t)s->n_tokens * sizeof(char *));
    t->vmask = table_mask_for((uint64_t)s->n_tokens);
    t->vslot = (int32_t *)calloc((size_t)t->vmask + 1, sizeof(int32_t));
    if (!t->pool || !t->off || !t->len || !t->score || !t->type || !t->piece || !t->vslot)
        return llm__errf(err, errlen, "out of memory");

    for (i = 0; i < s->n_tokens; i++) {
        const char *p = s->tokens[i].p;
        size_t n = s->tokens[i].n, k, start = pos;
        for (k = 0; k < n; k++) {
            if (s->spm_space_is_u2581 && k + 2 < n && (uint8_t)p[k] == 0xE2 && (uint8_t)p[k + 1] == 0x96 &&
                (uint8_t)p[k + 2] == 0x81) {
                t->pool[pos++] = ' ';
                k += 2;
            } else {
                t->pool[pos++] = p[k];
            }
        }
        t->pool[pos++] = '\0';
        t->off[i] = start;
        t->len[i] = (uint32_t)(pos - start - 1);
        t->score[i] = s->scores ? s->scores[i] : 0.0f;
        if (t->score[i] != t->score[i]) t->score[i] = -INFINITY;
        t->type[i] = (uint8_t)(s->types && s->types[i] >= 0 && s->types[i] <= 6 ? s->types[i] : LLM_TOKTYPE_NORMAL);
    }
    /* insert in id order so that duplicate texts resolve to the lowest id */
    for (i = 0; i < s->n_tokens; i++) {
        uint32_t h;
        if (vocab_find(t, tok_text(t, i), t->len[i]) >= 0) continue;
        for (h = hash_bytes2(tok_text(t, i), t->len[i], "", 0) & t->vmask; t->vslot[h]; h = (h + 1) & t->vmask) {}
        t->vslot[h] = i + 1;
    }
    return 0;
}

static int is_u2581(const char *s, size_t n)
{
    return n >= 3 && (uint8_t)s[0] == 0xE2 && (uint8_t)s[1] == 0x96 && (uint8_t)s[2] == 0x81;
}

/* Token i's decoded text into the pool at *pos: byte-level BPE maps characters back from
   the byte alphabet (characters outside it, as in hand-added tokens, stay as they are);
   character BPE (tokenizer.json without ByteLevel) spells U+2581 as a space. */
static const char *decode_bpe_piece(llm_tokenizer *t, int32_t i, size_t *pos)
{
    const char *s = tok_text(t, i);
    size_t k = 0, start = *pos;
    while (k < t->len[i]) {
        uint32_t cp;
        size_t l = utf8_next(s + k, t->len[i] - k, &cp);
        int b = t->byte_level ? unicode_to_byte(cp) : (cp == 0x2581 ? ' ' : -1);
        if (b >= 0) t->pool[(*pos)++] = (char)b;
        else memcpy(t->pool + *pos, s + k, l), *pos += l;
        k += l;
    }
    t->pool[(*pos)++] = '\0';
    return t->pool + start;
}

/* Decoded pieces: <0xXX> tokens (SPM, character BPE) become the byte; BPE texts as
   decode_bpe_piece says. */
static void build_pieces(llm_tokenizer *t)
{
    int32_t i;
    size_t pos = t->kind == LLM_TOK_BPE ? t->off[t->n - 1] + t->len[t->n - 1] + 1 : 0;
    for (i = 0; i < 256; i++) {
        t->byte_str[i][0] = (char)i;
        t->byte_str[i][1] = '\0';
    }
    for (i = 0; i < t->n; i++) {
        const char *s = tok_text(t, i);
        int b = t->kind == LLM_TOK_SPM || !t->byte_level ? byte_token_value(s, t->len[i]) : -1;
        if (b >= 0) t->piece[i] = t->byte_str[b];
        else if (t->kind == LLM_TOK_SPM) t->piece[i] = s;
        else t->piece[i] = decode_bpe_piece(t, i, &pos);
    }
}

static void build_byte_tokens(llm_tokenizer *t)
{
    int b;
    for (b = 0; b < 256; b++) {
        char s[8];
        size_t n;
        if (t->kind == LLM_TOK_SPM || !t->byte_level) {
            static const char hex[] = "0123456789ABCDEF";
            s[0] = '<', s[1] = '0', s[2] = 'x', s[3] = hex[b >> 4], s[4] = hex[b & 15], s[5] = '>';
            n = 6;
        } else {
            n = utf8_put(byte_to_unicode((uint8_t)b), s);
        }
        t->byte_tok[b] = vocab_find(t, s, n);
    }
}

/* Merge i's left and right token ids: from the "left right" string (GGUF), or the
   tokenizer.json pair. 0: found; 1: error; -1: a GGUF merge that can never apply. The
   tokenizers library refuses a tokenizer.json merge naming a token that is not in the
   vocabulary, and so does this. */
static int merge_ids(const llm_tokenizer *t, const llm_tokenizer_spec *s, int32_t i, int32_t *a, int32_t *b,
                     int32_t *r, char *err, size_t errlen)
{
    *a = *b = *r = -1;
    if (s->hf && s->hf->merge_pairs) {
        const llm_bytes *l = &s->hf->merge_pairs[2 * (size_t)i], *rt = l + 1;
        *a = vocab_find(t, l->p, l->n);
        *b = vocab_find(t, rt->p, rt->n);
        *r = *a < 0 || *b < 0 ? -1 : vocab_find2(t, l->p, l->n, rt->p, rt->n);
        if (*r < 0)
            return llm__errf(err, errlen, "merge %d (\"%.*s\" \"%.*s\") names a token that is not in the vocabulary",
                             (int)i, (int)(l->n > 64 ? 64 : l->n), l->p, (int)(rt->n > 64 ? 64 : rt->n), rt->p);
    } else {
        const char *p = s->merges[i].p;
        size_t len = s->merges[i].n, sp;
        /* split at the first space after the first byte (a token never holds a raw space
           in the byte alphabet; the first byte may be one in hand-made vocabularies) */
        for (sp = 1; sp < len && p[sp] != ' '; sp++) {}
        if (sp >= len) return llm__errf(err, errlen, "tokenizer merge %d has no space separator", (int)i);
        *a = vocab_find(t, p, sp);
        *b = vocab_find(t, p + sp + 1, len - sp - 1);
        if (*a < 0 || *b < 0) return -1;
        *r = vocab_find2(t, tok_text(t, *a), t->len[*a], tok_text(t, *b), t->len[*b]);
        if (*r < 0) return -1;
    }
    return 0;
}

/* Merges -> ids; GGUF merges naming tokens that are not in the vocabulary can never apply
   and are dropped. The first of duplicate pairs keeps its (lower) rank. */
static int build_merges(llm_tokenizer *t, const llm_tokenizer_spec *s, char *err, size_t errlen)
{
    int32_t i, n = 0;
    if (s->n_merges <= 0) return 0;
    t->mmask = table_mask_for((uint64_t)s->n_merges);
    t->mslot = (int32_t *)calloc((size_t)t->mmask + 1, sizeof(int32_t));
    t->m_left = (int32_t *)malloc((size_t)s->n_merges * sizeof(int32_t));
    t->m_right = (int32_t *)malloc((size_t)s->n_merges * sizeof(int32_t));
    t->m_result = (int32_t *)malloc((size_t)s->n_merges * sizeof(int32_t));
    if (!t->mslot || !t->m_left || !t->m_right || !t->m_result) return llm__errf(err, errlen, "out of memory");
    for (i = 0; i < s->n_merges; i++) {
        int32_t a, b, r;
        uint32_t h;
        int dup = 0, rc = merge_ids(t, s, i, &a, &b, &r, err, errlen);
        if (rc > 0) return 1;
        if (rc < 0) continue;
        for (h = hash_pair(a, b) & t->mmask; t->mslot[h]; h = (h + 1) & t->mmask) {
            int32_t m = t->mslot[h] - 1;
            if (t->m_left[m] == a && t->m_right[m] == b) {
                dup = 1;
                break;
            }
        }
        if (dup) continue;
        t->m_left[n] = a;
        t->m_right[n] = b;
        t->m_result[n] = r;
        t->mslot[h] = ++n; /* rank = n - 1: kept merges stay in file order */
    }
    t->n_merges = n;
    return 0;
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int special_cmp_longest_first(const void *pa, const void *pb)
{
    const special_key *a = (const special_key *)pa, *b = (const special_key *)pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int is_special_type(uint8_t type)
{
    return type == LLM_TOKTYPE_CONTROL || type == LLM_TOKTYPE_USER_DEFINED || type == LLM_TOKTYPE_UNKNOWN;
}

/* Special tokens, longest first (so that "<|im_start|>" wins over a prefix of it). */
static int build_specials(llm_tokenizer *t, char *err, size_t errlen)
{
    int32_t i, n = 0;
    special_key *keys;
    for (i = 0; i < t->n; i++)
        if (is_special_type(t->type[i]) && t->len[i] > 0) n++;
    if (!n) return 0;
    keys = (special_key *)malloc((size_t)n * sizeof *keys);
    t->special = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    if (!keys || !t->special) {
        free(keys);
        return llm__errf(err, errlen, "out of memory");
    }
    for (i = 0, n = 0; i < t->n; i++) {
        if (!is_special_type(t->type[i]) || t->len[i] == 0) continue;
        keys[n].len = t->len[i];
        keys[n].id = i;
        n++;
        t->special_first[(uint8_t)tok_text(t, i)[0]] = 1;
    }
    qsort(keys, (size_t)n, sizeof *keys, special_cmp_longest_first);
    for (i = 0; i < n; i++) t->special[i] = keys[i].id;
    t->n_special = n;
    free(keys);
    return 0;
}

static int set_pre(llm_tokenizer *t, llm_bytes pre, char *err, size_t errlen)
{
    static const char *const gpt2_names[] = {"gpt2", "gpt-2", "default", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"};
    static const char *const digit_names[] = {"smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva"};
    /* llama.cpp's LLAMA3 pre-tokenizer: Llama-3's regex, with ignore_merges */
    static const char *const llama3_names[] = {"llama-bpe", "llama3", "llama-v3"};
    size_t i, n = pre.n < sizeof t->pre_name - 1 ? pre.n : sizeof t->pre_name - 1;
    if (pre.n) memcpy(t->pre_name, pre.p, n);
    t->pre_name[n] = '\0';
    if (t->kind != LLM_TOK_BPE || t->pre != LLM_PRE_BY_NAME) return 0;
    if (pre.n == 0) { /* no pre-tokenizer declared: GPT-2's own */
        t->pre = LLM_PRE_GPT2;
        return 0;
    }
    for (i = 0; i < sizeof gpt2_names / sizeof gpt2_names[0]; i++)
        if (pre.n == strlen(gpt2_names[i]) && memcmp(pre.p, gpt2_names[i], pre.n) == 0) t->pre = LLM_PRE_GPT2;
    for (i = 0; i < sizeof digit_names / sizeof digit_names[0]; i++)
        if (pre.n == strlen(digit_names[i]) && memcmp(pre.p, digit_names[i], pre.n) == 0) t->pre = LLM_PRE_DIGITS_THEN_GPT2;
    for (i = 0; i < sizeof llama3_names / sizeof llama3_names[0]; i++)
        if (pre.n == strlen(llama3_names[i]) && memcmp(pre.p, llama3_names[i], pre.n) == 0) {
            t->pre = LLM_PRE_LLAMA3;
            t->hf.ignore_merges = 1;
        }
    if (t->pre == LLM_PRE_BY_NAME)
        return llm__errf(err, errlen, "pre-tokenizer '%s' is not supported (supported: gpt2, smollm, llama-bpe and their aliases)",
                         t->pre_name);
    return 0;
}

/* tokenizer.json's options (BPE only): the pre-tokenizer, text preparation, chat template. */
static int set_hf(llm_tokenizer *t, const llm_tokenizer_hf *hf, char *err, size_t errlen)
{
    if (t->kind != LLM_TOK_BPE || hf->pre < LLM_PRE_GPT2 || hf->pre > LLM_PRE_WHOLE)
        return llm__errf(err, errlen, "tokenizer.json options need a BPE model and a known pre-tokenizer");
    t->hf = *hf;
    t->hf.merge_pairs = NULL; /* the spec's arrays are not kept */
    t->from_hf = 1;
    t->pre = hf->pre;
    t->byte_level = hf->byte_level != 0;
    t->strip_space_after_bos = !t->byte_level && (hf->prepend_u2581 || hf->meta_prefix != LLM_META_PREFIX_NEVER);
    return 0;
}

/* A NUL-terminated copy of the chat template (a template holding a NUL ends there). */
static int set_chat_template(llm_tokenizer *t, llm_bytes tmpl, char *err, size_t errlen)
{
    if (!tmpl.n) return 0;
    if (tmpl.n == SIZE_MAX || !(t->chat_template = (char *)malloc(tmpl.n + 1))) return llm__errf(err, errlen, "out of memory");
    memcpy(t->chat_template, tmpl.p, tmpl.n);
    t->chat_template[tmpl.n] = '\0';
    return 0;
}

int llm__tokenizer_build(const llm_tokenizer_spec *s, llm_tokenizer **out, char *err, size_t errlen)
{
    llm_tokenizer *t;
    *out = NULL;
    if (s->n_tokens <= 0) return llm__errf(err, errlen, "tokenizer has no tokens");
    t = (llm_tokenizer *)calloc(1, sizeof *t);
    if (!t) return llm__errf(err, errlen, "out of memory");
    t->kind = s->kind;
    t->model_name = s->model_name;
    t->n = s->n_tokens;
    t->bos = s->bos >= 0 && s->bos < s->n_tokens ? s->bos : -1;
    t->eos = s->eos >= 0 && s->eos < s->n_tokens ? s->eos : -1;
    t->unk = s->unk >= 0 && s->unk < s->n_tokens ? s->unk : -1;
    t->pad = s->pad >= 0 && s->pad < s->n_tokens ? s->pad : -1;
    t->add_bos = s->add_bos;
    t->add_space_prefix = s->add_space_prefix;
    t->parse_special = 1;
    t->byte_level = s->kind == LLM_TOK_BPE;
    t->strip_space_after_bos = s->kind == LLM_TOK_SPM;
    if ((s->hf && set_hf(t, s->hf, err, errlen)) || set_chat_template(t, s->chat_template, err, errlen)) {
        llm_tokenizer_free(t);
        return 1;
    }
    if (set_pre(t, s->pre, err, errlen) || build_vocab(t, s, err, errlen) || build_merges(t, s, err, errlen) ||
        build_specials(t, err, errlen)) {
        llm_tokenizer_free(t);
        return 1;
    }
    build_byte_tokens(t);
    build_pieces(t);
    *out = t;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32
   length, bytes. The vocabulary size is not in the file (it is the model's).            */

static uint32_t le32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Count the token records (vocab_size <= 0: all of them), checking that each lies in the
   file and that the file ends with the last one. */
static int llama2c_count_tokens(const uint8_t *d, size_t size, int32_t vocab_size, int32_t *count, char *err,
                                size_t errlen)
{
    size_t pos = 4, n = 0;
    if (size < 4) return llm__errf(err, errlen, "tokenizer.bin: truncated header");
    while (size - pos >= 8 && (vocab_size <= 0 || n < (size_t)vocab_size)) {
        int32_t len = (int32_t)le32_at(d + pos + 4);
        if (len < 0 || (size_t)len > size - pos - 8)
            return llm__errf(err, errlen, "tokenizer.bin: token %zu has bad length %d at offset %zu", n, (int)len, pos);
        pos += 8 + (size_t)len;
        if (++n > (size_t)INT32_MAX) return llm__errf(err, errlen, "tokenizer.bin: too many tokens");
    }
    if (vocab_size > 0 && n < (size_t)vocab_size)
        return llm__errf(err, errlen, "tokenizer.bin: truncated: %zu of %d tokens", n, (int)vocab_size);
    if (pos != size)
        return llm__errf(err, errlen, "tokenizer.bin: %zu stray bytes after token %zu (vocabulary size mismatch?)",
                         size - pos, n);
    if (n == 0) return llm__errf(err, errlen, "tokenizer.bin: no tokens");
    *count = (int32_t)n;
    return 0;
}

int llm_tokenizer_load_llama2c_memory(const void *data, size_t size, int32_t vocab_size, llm_tokenizer **out,
                                      char *err, size_t errlen)
{
    const uint8_t *d = (const uint8_t *)data;
    llm_tokenizer_spec spec;
    llm_bytes *tokens;
    float *scores;
    size_t pos = 4;
    int32_t i, n = 0;
    int rc;

    if (!out) return llm__errf(err, errlen, "llm_tokenizer_load_llama2c: missing argument");
    *out = NULL;
    if (!d && size) return llm__errf(err, errlen, "llm_tokenizer_load_llama2c: missing argument");
    if (llama2c_count_tokens(d, size, vocab_size, &n, err, errlen)) return 1;
    tokens = (llm_bytes *)malloc((size_t)n * sizeof *tokens);
    scores = (float *)malloc((size_t)n * sizeof *scores);
    if (!tokens || !scores) {
        free(tokens);
        free(scores);
        return llm__errf(err, errlen, "out of memory");
    }
    for (i = 0; i < n; i++) { /* records already checked by llama2c_count_tokens */
        uint32_t bits = le32_at(d + pos), len = le32_at(d + pos + 4);
        memcpy(&scores[i], &bits, 4);
        tokens[i].p = (const char *)d + pos + 8;
        tokens[i].n = len;
        pos += 8 + len;
    }
    memset(&spec, 0, sizeof spec);
    spec.kind = LLM_TOK_SPM;
    spec.model_name = "llama2c";
    spec.n_tokens = n;
    spec.tokens = tokens;
    spec.scores = scores;
    /* llama2.c: <unk>=0, <s>=1, </s>=2, and encode() always adds the dummy prefix */
    spec.unk = 0;
    spec.pad = -1;
    spec.bos = n > 1 ? 1 : -1;
    spec.eos = n > 2 ? 2 : -1;
    spec.add_bos = 1;
    spec.add_space_prefix = 1;
    rc = llm__tokenizer_build(&spec, out, err, errlen);
    free(tokens);
    free(scores);
    return rc;
}

int llm_tokenizer_load_llama2c(const char *path, int32_t vocab_size, llm_tokenizer **out, char *err, size_t errlen)
{
    uint8_t *d;
    size_t n;
    int rc;
    if (out) *out = NULL;
    if (llm__read_file(path, SIZE_MAX, &d, &n, err, errlen)) return 1;
    rc = llm_tokenizer_load_llama2c_memory(d, n, vocab_size, out, err, errlen);
    free(d);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Accessors.                                                                            */

int32_t llm_tokenizer_bos(const llm_tokenizer *t) { return t ? t->bos : -1; }
int32_t llm_tokenizer_eos(const llm_tokenizer *t) { return t ? t->eos : -1; }
int32_t llm_tokenizer_vocab(const llm_tokenizer *t) { return t ? t->n : 0; }
const char *llm_tokenizer_model(const llm_tokenizer *t) { return t ? t->model_name : ""; }
const char *llm_tokenizer_pre(const llm_tokenizer *t) { return t ? t->pre_name : ""; }
int llm_tokenizer_wants_bos(const llm_tokenizer *t) { return t ? t->add_bos : 0; }
const char *llm_tokenizer_chat_template(const llm_tokenizer *t) { return t && t->chat_template ? t->chat_template : ""; }
void llm_tokenizer_set_parse_special(llm_tokenizer *t, int on) { if (t) t->parse_special = on != 0; }

void llm__tokenizer_view(const llm_tokenizer *t, llm_tokenizer_view *v)
{
    memset(v, 0, sizeof *v);
    v->kind = t->kind;
    v->model_name = t->model_name;
    v->pre_name = t->pre_name;
    v->n_tokens = t->n;
    v->pool = t->pool;
    v->off = t->off;
    v->len = t->len;
    v->scores = t->score;
    v->types = t->type;
    v->n_merges = t->n_merges;
    v->merge_left = t->m_left;
    v->merge_right = t->m_right;
    v->bos = t->bos;
    v->eos = t->eos;
    v->unk = t->unk;
    v->pad = t->pad;
    v->add_bos = t->add_bos;
    v->add_space_prefix = t->add_space_prefix;
    v->chat_template = t->chat_template;
    v->hf = t->from_hf ? &t->hf : NULL;
}

int32_t llm_token_id(const llm_tokenizer *t, const char *text)
{
    if (!t || !text) return -1;
    return vocab_find(t, text, strlen(text));
}

const char *llm_token_text(const llm_tokenizer *t, int32_t prev, int32_t id)
{
    const char *p;
    if (!t || id < 0 || id >= t->n) return "";
    p = t->piece[id];
    /* SentencePiece: the dummy-prefix space of the first word is not part of the text */
    if (t->strip_space_after_bos && t->bos >= 0 && prev == t->bos && p[0] == ' ') p++;
    return p;
}

/* ------------------------------------------------------------------------------------ */
/* Merging: a linked list of symbols and a max-heap of candidate adjacent pairs.          */

typedef struct sym {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
} sym;

typedef struct pair {
    double key;         /* SPM: score of the merged token; BPE: -rank. Larger merges first. */
    int32_t left, right;
    int32_t left_id, right_id, merged;
} pair;

typedef struct scratch {
    sym *syms;
    size_t syms_cap;
    pair *heap;
    size_t heap_n, heap_cap;
    char *text;         /* the fragment with its prefix space (SPM, ByteLevel), or normalized (character BPE) */
    size_t text_cap;
    char *word;         /* a byte-level word in the byte alphabet (ignore_merges) */
    size_t word_cap;
} scratch;

typedef struct tok_out {
    int32_t *ids;
    int32_t cap;
    int64_t n;
} tok_out;

static void out_push(tok_out *o, int32_t id)
{
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t c = *cap ? *cap : 64;
    void *q;
    if (need <= *cap) return 0;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return 1;
        c *= 2;
    }
    q = realloc(*p, c * elem);
    if (!q) return 1;
    *p = q;
    *cap = c;
    return 0;
}

static int pair_before(const pair *a, const pair *b)
{
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(scratch *s, const pair *p)
{
    size_t i;
    if (s->heap_n == s->heap_cap && grow((void **)&s->heap, &s->heap_cap, s->heap_n + 1, sizeof(pair))) return 1;
    i = s->heap_n++;
    while (i > 0 && pair_before(p, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = *p;
    return 0;
}

static pair heap_pop(scratch *s)
{
    pair top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!pair_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* Queue the merge of symbols left and right, if the tokenizer has one (1: out of memory). */
static int try_pair(const llm_tokenizer *t, scratch *s, int32_t left, int32_t right)
{
    pair p;
    int32_t a, b;
    if (left < 0 || right < 0) return 0;
    a = s->syms[left].id;
    b = s->syms[right].id;
    if (t->kind == LLM_TOK_SPM) {
        p.merged = vocab_find2(t, tok_text(t, a), t->len[a], tok_text(t, b), t->len[b]);
        if (p.merged < 0) return 0;
        p.key = t->score[p.merged];
    } else {
        uint32_t h;
        int32_t m = -1;
        if (!t->mslot) return 0;
        for (h = hash_pair(a, b) & t->mmask; t->mslot[h]; h = (h + 1) & t->mmask) {
            int32_t k = t->mslot[h] - 1;
            if (t->m_left[k] == a && t->m_right[k] == b) {
                m = k;
                break;
            }
        }
        if (m < 0) return 0;
        p.merged = t->m_result[m];
        p.key = -(double)m;
    }
    p.left = left;
    p.right = right;
    p.left_id = a;
    p.right_id = b;
    return heap_push(s, &p);
}

/* Merge s->syms[0..n) (linked in order) to the end and emit the surviving ids. */
static int merge_and_emit(const llm_tokenizer *t, scratch *s, int32_t n, tok_out *o, char *err, size_t errlen)
{
    int32_t i;
    s->heap_n = 0;
    for (i = 0; i + 1 < n; i++)
        if (try_pair(t, s, i, i + 1)) return llm__errf(err, errlen, "out of memory");
    while (s->heap_n) {
        pair p = heap_pop(s);
        sym *L = &s->syms[p.left];
        /* stale candidates: a side has merged since the pair was queued */
        if (L->id != p.left_id || L->next != p.right || s->syms[p.right].id != p.right_id) continue;
        L->id = p.merged;
        L->next = s->syms[p.right].next;
        if (L->next >= 0) s->syms[L->next].prev = p.left;
        s->syms[p.right].id = -1;
        if (try_pair(t, s, L->prev, p.left) || try_pair(t, s, p.left, L->next))
            return llm__errf(err, errlen, "out of memory");
    }
    for (i = n ? 0 : -1; i >= 0; i = s->syms[i].next) out_push(o, s->syms[i].id);
    return 0;
}

/* Room for n symbols (the pair queue grows as needed). */
static int scratch_reserve(scratch *s, size_t n, char *err, size_t errlen)
{
    if (n > (size_t)INT32_MAX - 1) return llm__errf(err, errlen, "text too long to tokenize");
    if (grow((void **)&s->syms, &s->syms_cap, n + 1, sizeof(sym))) return llm__errf(err, errlen, "out of memory");
    return 0;
}

static void sym_append(scratch *s, int32_t *n, int32_t id)
{
    s->syms[*n].id = id;
    s->syms[*n].prev = *n - 1;
    s->syms[*n].next = -1;
    if (*n > 0) s->syms[*n - 1].next = *n;
    (*n)++;
}

/* ------------------------------------------------------------------------------------ */
/* SentencePiece-style encoding of one fragment.                                          */

static int spm_encode(const llm_tokenizer *t, scratch *s, const char *text, size_t len, int prefix, tok_out *o,
                      char *err, size_t errlen)
{
    size_t n = len + (prefix ? 1 : 0), i;
    int32_t count = 0;
    const char *p;
    if (len == 0) return 0; /* llama2.c: no dummy prefix for empty text */
    /* before the copy, not only in scratch_reserve: n must not have wrapped around */
    if (len > (size_t)INT32_MAX - 2) return llm__errf(err, errlen, "text too long to tokenize");
    if (grow((void **)&s->text, &s->text_cap, n, 1)) return llm__errf(err, errlen, "out of memory");
    if (prefix) s->text[0] = ' ';
    memcpy(s->text + (prefix ? 1 : 0), text, len);
    p = s->text;
    if (scratch_reserve(s, n, err, errlen)) return 1;
    for (i = 0; i < n;) {
        /* one UTF-8 character: a byte and up to three continuation bytes (llama2.c's grouping) */
        size_t l = 1;
        int32_t id;
        while (i + l < n && l < 4 && ((uint8_t)p[i + l] & 0xC0) == 0x80) l++;
        id = vocab_find(t, p + i, l);
        if (id >= 0) {
            sym_append(s, &count, id);
        } else {
            size_t k;
            for (k = 0; k < l; k++) {
                int32_t b = t->byte_tok[(uint8_t)p[i + k]];
                if (b < 0) b = t->unk;
                if (b < 0)
                    return llm__errf(err, errlen, "cannot encode byte 0x%02X: no <0x%02X> or <unk> token", (uint8_t)p[i + k],
                                     (uint8_t)p[i + k]);
                sym_append(s, &count, b);
            }
        }
        i += l;
    }
    return merge_and_emit(t, s, count, o, err, errlen);
}

/* ------------------------------------------------------------------------------------ */
/* BPE with merge ranks: word encoding and the pre-tokenizers.                           */

/* A character or byte missing from the vocabulary becomes <unk> (consecutive ones fused
   when tokenizer.json says fuse_unk); without <unk>, tokenizer.json models drop it, as the
   tokenizers library does, and the other formats refuse the text. */
static int push_unknown(const llm_tokenizer *t, scratch *s, int32_t *count, int *last_unk, uint8_t byte, char *err,
                        size_t errlen)
{
    if (t->unk >= 0) {
        if (!(t->hf.fuse_unk && *last_unk)) sym_append(s, count, t->unk);
        *last_unk = 1;
        return 0;
    }
    if (t->from_hf) return 0;
    return llm__errf(err, errlen, "cannot encode byte 0x%02X: the vocabulary lacks it", byte);
}

/* ignore_merges (Llama-3): the id of the whole word spelled in the byte alphabet, or -1. */
static int32_t bpe_whole_word(const llm_tokenizer *t, scratch *s, const char *w, size_t len, char *err, size_t errlen)
{
    size_t i, n = 0;
    if (len > SIZE_MAX / 2 || grow((void **)&s->word, &s->word_cap, 2 * len, 1)) {
        llm__errf(err, errlen, "out of memory");
        return -2;
    }
    for (i = 0; i < len; i++) n += utf8_put(byte_to_unicode((uint8_t)w[i]), s->word + n);
    return vocab_find(t, s->word, n);
}

static int bpe_word(const llm_tokenizer *t, scratch *s, const char *w, size_t len, tok_out *o, char *err, size_t errlen)
{
    size_t i;
    int32_t count = 0;
    int last_unk = 0;
    if (t->hf.ignore_merges) {
        int32_t id = bpe_whole_word(t, s, w, len, err, errlen);
        if (id == -2) return 1;
        if (id >= 0) {
            out_push(o, id);
            return 0;
        }
    }
    if (scratch_reserve(s, len, err, errlen)) return 1;
    for (i = 0; i < len; i++) {
        int32_t id = t->byte_tok[(uint8_t)w[i]];
        if (id >= 0) {
            sym_append(s, &count, id);
            last_unk = 0;
        } else if (push_unknown(t, s, &count, &last_unk, (uint8_t)w[i], err, errlen)) {
            return 1;
        }
    }
    return merge_and_emit(t, s, count, o, err, errlen);
}

/* Character BPE (tokenizer.json without ByteLevel, Llama-2): one symbol per UTF-8
   character of the vocabulary, else its <0xXX> byte tokens (byte_fallback), else <unk>. */
static int char_bpe_word(const llm_tokenizer *t, scratch *s, const char *w, size_t len, tok_out *o, char *err,
                         size_t errlen)
{
    size_t i, l, k;
    int32_t count = 0, id;
    int last_unk = 0;
    if (t->hf.ignore_merges && (id = vocab_find(t, w, len)) >= 0) {
        out_push(o, id);
        return 0;
    }
    if (scratch_reserve(s, len, err, errlen)) return 1;
    for (i = 0; i < len; i += l) {
        uint32_t cp;
        int bytes_known = t->hf.byte_fallback;
        l = utf8_next(w + i, len - i, &cp);
        if ((id = vocab_find(t, w + i, l)) >= 0) {
            sym_append(s, &count, id);
            last_unk = 0;
            continue;
        }
        for (k = 0; k < l; k++) bytes_known = bytes_known && t->byte_tok[(uint8_t)w[i + k]] >= 0;
        if (bytes_known) {
            for (k = 0; k < l; k++) sym_append(s, &count, t->byte_tok[(uint8_t)w[i + k]]);
            last_unk = 0;
        } else if (push_unknown(t, s, &count, &last_unk, (uint8_t)w[i], err, errlen)) {
            return 1;
        }
    }
    return merge_and_emit(t, s, count, o, err, errlen);
}

static int is_contraction_letter(uint32_t c) { return c == 's' || c == 't' || c == 'm' || c == 'd'; }

/* Case folding for the contraction letters: ASCII, and U+017F (long s), which Unicode
   folds to 's' (the tokenizers library's regex engine matches it in (?i:'s)). */
static uint32_t contraction_fold(uint32_t c)
{
    if (c == 0x17F) return 's';
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Length of 's|'t|'re|'ve|'m|'ll|'d at s[0..n), or 0; any_case: Llama-3's (?i:...). */
static size_t contraction_len(const char *s, size_t n, int any_case)
{
    uint32_t c1, c2;
    size_t l;
    if (n < 2 || s[0] != '\'') return 0;
    l = utf8_next(s + 1, n - 1, &c1);
    if (any_case) c1 = contraction_fold(c1);
    if (is_contraction_letter(c1)) return 1 + l;
    if (n > 2 && l == 1) {
        utf8_next(s + 2, n - 2, &c2);
        if (any_case) c2 = contraction_fold(c2);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    }
    return 0;
}

static int cp_is_other(uint32_t c) { return !cp_is_space(c) && !cp_is_letter(c) && !cp_is_number(c); }

/* End of the run of characters of class cls that starts at s[from] (from <= n). */
static size_t class_run_end(const char *s, size_t n, size_t from, int (*cls)(uint32_t))
{
    size_t k, l;
    uint32_t c;
    for (k = from; k < n; k += l) {
        l = utf8_next(s + k, n - k, &c);
        if (!cls(c)) break;
    }
    return k;
}

/* The regexes' whitespace tail '\s+(?!\S)|\s+' for the run of whitespace at s[0..n): the
   run, minus its last character when a non-space follows (that character then leads the
   next word). newline_ends: Llama-3's '\s*[\r\n]+' first, the run up to its last newline. */
static size_t whitespace_match(const char *s, size_t n, int newline_ends)
{
    size_t k, l = 0, last_start = 0, after_newline = 0, ws_count = 0;
    uint32_t c;
    for (k = 0; k < n; k += l) {
        l = utf8_next(s + k, n - k, &c);
        if (!cp_is_space(c)) break;
        if (c == '\r' || c == '\n') after_newline = k + 1;
        last_start = k;
        ws_count++;
    }
    if (ws_count == 0) return l; /* unreachable: the callers match every other character */
    if (newline_ends && after_newline) return after_newline;
    if (k == n || ws_count < 2) return k;
    return last_start;
}

/* Length in bytes of the GPT-2 regex match at the start of s[0..n) (n > 0). Alternatives
   in the regex's order; the first that matches wins, as in a backtracking regex engine. */
static size_t gpt2_match(const char *s, size_t n)
{
    uint32_t c0, c;
    size_t l, j, m;

    utf8_next(s, n, &c0);
    /* 's|'t|'re|'ve|'m|'ll|'d */
    if ((m = contraction_len(s, n, 0))) return m;
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
    j = c0 == ' ' ? 1 : 0;
    if (j < n) {
        l = utf8_next(s + j, n - j, &c);
        if (cp_is_letter(c)) return class_run_end(s, n, j + l, cp_is_letter);
        if (cp_is_number(c)) return class_run_end(s, n, j + l, cp_is_number);
        if (cp_is_other(c)) return class_run_end(s, n, j + l, cp_is_other);
    }
    /* '\s+(?!\S)|\s+': c0 is whitespace here */
    return whitespace_match(s, n, 0);
}

/* The same for Llama-3's regex:
   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t llama3_match(const char *s, size_t n)
{
    uint32_t c0, c;
    size_t l0 = utf8_next(s, n, &c0), l, j, k, m, i;

    if ((m = contraction_len(s, n, 1))) return m;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cp_is_letter(c0)) return class_run_end(s, n, l0, cp_is_letter);
    if (c0 != '\r' && c0 != '\n' && !cp_is_number(c0) && l0 < n) {
        utf8_next(s + l0, n - l0, &c);
        if (cp_is_letter(c)) return class_run_end(s, n, l0, cp_is_letter);
    }
    /* \p{N}{1,3} */
    if (cp_is_number(c0)) {
        for (k = l0, i = 1; i < 3 && k < n; i++, k += l) {
            l = utf8_next(s + k, n - k, &c);
            if (!cp_is_number(c)) break;
        }
        return k;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    j = c0 == ' ' ? 1 : 0;
    if (j < n) {
        utf8_next(s + j, n - j, &c);
        if (cp_is_other(c)) {
            k = class_run_end(s, n, j, cp_is_other);
            while (k < n && (s[k] == '\r' || s[k] == '\n')) k++;
            return k;
        }
    }
    /* \s*[\r\n]+|\s+(?!\S)|\s+ : c0 is whitespace here */
    return whitespace_match(s, n, 1);
}

/* Split text into the regex's matches and encode each as a word. */
static int bpe_regex_split(const llm_tokenizer *t, scratch *s, const char *text, size_t len,
                           size_t (*match)(const char *, size_t), tok_out *o, char *err, size_t errlen)
{
    size_t pos = 0;
    while (pos < len) {
        size_t m = match(text + pos, len - pos);
        if (bpe_word(t, s, text + pos, m, o, err, errlen)) return 1;
        pos += m;
    }
    return 0;
}

/* every \p{N} character on its own, the GPT-2 regex on the text between */
static int bpe_digits_then_gpt2(const llm_tokenizer *t, scratch *s, const char *text, size_t len, tok_out *o,
                                char *err, size_t errlen)
{
    size_t start = 0, pos = 0;
    while (pos < len) {
        uint32_t c;
        size_t l = utf8_next(text + pos, len - pos, &c);
        if (cp_is_number(c)) {
            if (bpe_regex_split(t, s, text + start, pos - start, gpt2_match, o, err, errlen) ||
                bpe_word(t, s, text + pos, l, o, err, errlen))
                return 1;
            start = pos + l;
        }
        pos += l;
    }
    return bpe_regex_split(t, s, text + start, len - start, gpt2_match, o, err, errlen);
}

static int put_u2581(char *p)
{
    p[0] = (char)0xE2, p[1] = (char)0x96, p[2] = (char)0x81;
    return 3;
}

/* Character BPE: tokenizer.json's normalizer (Prepend, Replace) and Metaspace on the
   fragment, then the words (Metaspace split: each U+2581 starts one). first: the fragment
   starts the text (Metaspace prepend_scheme "first"). */
static int char_bpe_encode(const llm_tokenizer *t, scratch *s, const char *text, size_t len, int first, tok_out *o,
                           char *err, size_t errlen)
{
    const llm_tokenizer_hf *hf = &t->hf;
    size_t i, n = 0, start, pos;
    char *p;
    if (len > (SIZE_MAX - 6) / 3 || grow((void **)&s->text, &s->text_cap, 3 * len + 6, 1))
        return llm__errf(err, errlen, "out of memory");
    p = s->text + 3; /* room for a Metaspace prefix */
    if (hf->prepend_u2581) n += put_u2581(p);
    for (i = 0; i < len; i++) {
        if (hf->space_to_u2581 && text[i] == ' ') n += put_u2581(p + n);
        else p[n++] = text[i];
    }
    if ((hf->meta_prefix == LLM_META_PREFIX_ALWAYS || (hf->meta_prefix == LLM_META_PREFIX_FIRST && first)) &&
        !is_u2581(p, n)) {
        p -= 3;
        put_u2581(p);
        n += 3;
    }
    if (!hf->split_u2581) return char_bpe_word(t, s, p, n, o, err, errlen);
    for (start = 0, pos = 1; pos < n; pos++) {
        if (!is_u2581(p + pos, n - pos)) continue;
        if (char_bpe_word(t, s, p + start, pos - start, o, err, errlen)) return 1;
        start = pos;
    }
    return char_bpe_word(t, s, p + start, n - start, o, err, errlen);
}

static int bpe_encode(const llm_tokenizer *t, scratch *s, const char *text, size_t len, int first, tok_out *o,
                      char *err, size_t errlen)
{
    if (!t->byte_level) return char_bpe_encode(t, s, text, len, first, o, err, errlen);
    if (t->hf.byte_prefix_space && text[0] != ' ') { /* ByteLevel add_prefix_space */
        if (len == SIZE_MAX || grow((void **)&s->text, &s->text_cap, len + 1, 1)) return llm__errf(err, errlen, "out of memory");
        s->text[0] = ' ';
        memcpy(s->text + 1, text, len);
        text = s->text;
        len++;
    }
    switch (t->pre) {
    case LLM_PRE_DIGITS_THEN_GPT2: return bpe_digits_then_gpt2(t, s, text, len, o, err, errlen);
    case LLM_PRE_LLAMA3: return bpe_regex_split(t, s, text, len, llama3_match, o, err, errlen);
    case LLM_PRE_WHOLE: return bpe_word(t, s, text, len, o, err, errlen);
    default: return bpe_regex_split(t, s, text, len, gpt2_match, o, err, errlen);
    }
}

/* ------------------------------------------------------------------------------------ */
/* llm_tokenize: special tokens split the text into fragments.                            */

/* The special token that starts at text[0..n), longest first, or -1. */
static int32_t special_at(const llm_tokenizer *t, const char *text, size_t n)
{
    int32_t i;
    if (!t->special_first[(uint8_t)text[0]]) return -1;
    for (i = 0; i < t->n_special; i++) {
        int32_t id = t->special[i];
        if (!t->parse_special && t->type[id] != LLM_TOKTYPE_USER_DEFINED) continue;
        if (t->len[id] <= n && memcmp(tok_text(t, id), text, t->len[id]) == 0) return id;
    }
    return -1;
}

/* first: the fragment starts the text. */
static int encode_fragment(const llm_tokenizer *t, scratch *s, const char *text, size_t len, int after_special,
                           int first, tok_out *o, char *err, size_t errlen)
{
    if (t->kind == LLM_TOK_SPM) return spm_encode(t, s, text, len, t->add_space_prefix && after_special, o, err, errlen);
    return bpe_encode(t, s, text, len, first, o, err, errlen);
}

int llm_tokenize(const llm_tokenizer *t, const char *text, int add_bos, int32_t *ids, int32_t cap, int32_t *n_out,
                 char *err, size_t errlen)
{
    scratch s;
    tok_out o;
    size_t len, pos, start;
    int after_special = 1; /* the first fragment gets the dummy prefix, as after BOS */
    int rc = 1;

    if (n_out) *n_out = 0;
    if (!t || !text || !n_out || cap < 0 || (cap > 0 && !ids)) return llm__errf(err, errlen, "llm_tokenize: bad argument");
    memset(&s, 0, sizeof s);
    o.ids = ids;
    o.cap = cap;
    o.n = 0;
    if (add_bos && t->bos >= 0) out_push(&o, t->bos);

    len = strlen(text);
    for (pos = start = 0; pos < len;) {
        int32_t sp = t->n_special ? special_at(t, text + pos, len - pos) : -1;
        if (sp < 0) {
            pos++;
            continue;
        }
        if (pos > start) {
            if (encode_fragment(t, &s, text + start, pos - start, after_special, start == 0, &o, err, errlen)) goto done;
        }
        out_push(&o, sp);
        after_special = 1;
        pos += t->len[sp];
        start = pos;
    }
    if (len > start && encode_fragment(t, &s, text + start, len - start, after_special, start == 0, &o, err, errlen))
        goto done;
    if (o.n > INT32_MAX) {
        llm__errf(err, errlen, "text too long: more than %d tokens", INT32_MAX);
        goto done;
    }
    *n_out = (int32_t)o.n;
    rc = 0;
done:
    free(s.syms);
    free(s.heap);
    free(s.text);
    free(s.word);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Unicode classes.                                                                      */

static int cp_in_ranges(uint32_t cp, const uint32_t (*r)[2], size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

/* White_Space (what \s matches in Unicode-aware regex engines). */
static int cp_is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Unicode 14.0.0 general categories, from tests/llm/gen_unicode_ranges.py */
static const uint32_t unicode_letter_ranges[][2] = { /* 648 ranges */
    {0x41, 0x5a}, {0x61, 0x7a}, {0xaa, 0xaa}, {0xb5, 0xb5}, {0xba, 0xba}, {0xc0, 0xd6}, {0xd8, 0xf6}, {0xf8, 0x2c1},
    {0x2c6, 0x2d1}, {0x2e0, 0x2e4}, {0x2ec, 0x2ec}, {0x2ee, 0x2ee}, {0x370, 0x374}, {0x376, 0x377}, {0x37a, 0x37d},
    {0x37f, 0x37f}, {0x386, 0x386}, {0x388, 0x38a}, {0x38c, 0x38c}, {0x38e, 0x3a1}, {0x3a3, 0x3f5}, {0x3f7, 0x481},
    {0x48a, 0x52f}, {0x531, 0x556}, {0x559, 0x559}, {0x560, 0x588}, {0x5d0, 0x5ea}, {0x5ef, 0x5f2}, {0x620, 0x64a},
    {0x66e, 0x66f}, {0x671, 0x6d3}, {0x6d5, 0x6d5}, {0x6e5, 0x6e6}, {0x6ee, 0x6ef}, {0x6fa, 0x6fc}, {0x6ff, 0x6ff},
    {0x710, 0x710}, {0x712, 0x72f}, {0x74d, 0x7a5}, {0x7b1, 0x7b1}, {0x7ca, 0x7ea}, {0x7f4, 0x7f5}, {0x7fa, 0x7fa},
    {0x800, 0x815}, {0x81a, 0x81a}, {0x824, 0x824}, {0x828, 0x828}, {0x840, 0x858}, {0x860, 0x86a}, {0x870, 0x887},
    {0x889, 0x88e}, {0x8a0, 0x8c9}, {0x904, 0x939}, {0x93d, 0x93d}, {0x950, 0x950}, {0x958, 0x961}, {0x971, 0x980},
    {0x985, 0x98c}, {0x98f, 0x990}, {0x993, 0x9a8}, {0x9aa, 0x9b0}, {0x9b2, 0x9b2}, {0x9b6, 0x9b9}, {0x9bd, 0x9bd},
    {0x9ce, 0x9ce}, {0x9dc, 0x9dd}, {0x9df, 0x9e1}, {0x9f0, 0x9f1}, {0x9fc, 0x9fc}, {0xa05, 0xa0a}, {0xa0f, 0xa10},
    {0xa13, 0xa28}, {0xa2a, 0xa30}, {0xa32, 0xa33}, {0xa35, 0xa36}, {0xa38, 0xa39}, {0xa59, 0xa5c}, {0xa5e, 0xa5e},
    {0xa72, 0xa74}, {0xa85, 0xa8d}, {0xa8f, 0xa91}, {0xa93, 0xaa8}, {0xaaa, 0xab0}, {0xab2, 0xab3}, {0xab5, 0xab9},
    {0xabd, 0xabd}, {0xad0, 0xad0}, {0xae0, 0xae1}, {0xaf9, 0xaf9}, {0xb05, 0xb0c}, {0xb0f, 0xb10}, {0xb13, 0xb28},
    {0xb2a, 0xb30}, {0xb32, 0xb33}, {0xb35, 0xb39}, {0xb3d, 0xb3d}, {0xb5c, 0xb5d}, {0xb5f, 0xb61}, {0xb71, 0xb71},
    {0xb83, 0xb83}, {0xb85, 0xb8a}, {0xb8e, 0xb90}, {0xb92, 0xb95}, {0xb99, 0xb9a}, {0xb9c, 0xb9c}, {0xb9e, 0xb9f},
    {0xba3, 0xba4}, {0xba8, 0xbaa}, {0xbae, 0xbb9}, {0xbd0, 0xbd0}, {0xc05, 0xc0c}, {0xc0e, 0xc10}, {0xc12, 0xc28},
    {0xc2a, 0xc39}, {0xc3d, 0xc3d}, {0xc58, 0xc5a}, {0xc5d, 0xc5d}, {0xc60, 0xc61}, {0xc80, 0xc80}, {0xc85, 0xc8c},
    {0xc8e, 0xc90}, {0xc92, 0xca8}, {0xcaa, 0xcb3}, {0xcb5, 0xcb9}, {0xcbd, 0xcbd}, {0xcdd, 0xcde}, {0xce0, 0xce1},
    {0xcf1, 0xcf2}, {0xd04, 0xd0c}, {0xd0e, 0xd10}, {0xd12, 0xd3a}, {0xd3d, 0xd3d}, {0xd4e, 0xd4e}, {0xd54, 0xd56},
    {0xd5f, 0xd61}, {0xd7a, 0xd7f}, {0xd85, 0xd96}, {0xd9a, 0xdb1}, {0xdb3, 0xdbb}, {0xdbd, 0xdbd}, {0xdc0, 0xdc6},
    {0xe01, 0xe30}, {0xe32, 0xe33}, {0xe40, 0xe46}, {0xe81, 0xe82}, {0xe84, 0xe84}, {0xe86, 0xe8a}, {0xe8c, 0xea3},
    {0xea5, 0xea5}, {0xea7, 0xeb0}, {0xeb2, 0xeb3}, {0xebd, 0xebd}, {0xec0, 0xec4}, {0xec6, 0xec6}, {0xedc, 0xedf},
    {0xf00, 0xf00}, {0xf40, 0xf47}, {0xf49, 0xf6c}, {0xf88, 0xf8c}, {0x1000, 0x102a}, {0x103f, 0x103f},
    {0x1050, 0x1055}, {0x105a, 0x105d}, {0x1061, 0x1061}, {0x1065, 0x1066}, {0x106e, 0x1070}, {0x1075, 0x1081},
    {0x108e, 0x108e}, {0x10a0, 0x10c5}, {0x10c7, 0x10c7}, {0x10cd, 0x10cd}, {0x10d0, 0x10fa}, {0x10fc, 0x1248},
    {0x124a, 0x124d}, {0x1250, 0x1256}, {0x1258, 0x1258}, {0x125a, 0x125d}, {0x1260, 0x1288}, {0x128a, 0x128d},
    {0x1290, 0x12b0}, {0x12b2, 0x12b5}, {0x12b8, 0x12be}, {0x12c0, 0x12c0}, {0x12c2, 0x12c5}, {0x12c8, 0x12d6},
    {0x12d8, 0x1310}, {0x1312, 0x1315}, {0x1318, 0x135a}, {0x1380, 0x138f}, {0x13a0, 0x13f5}, {0x13f8, 0x13fd},
    {0x1401, 0x166c}, {0x166f, 0x167f}, {0x1681, 0x169a}, {0x16a0, 0x16ea}, {0x16f1, 0x16f8}, {0x1700, 0x1711},
    {0x171f, 0x1731}, {0x1740, 0x1751}, {0x1760, 0x176c}, {0x176e, 0x1770}, {0x1780, 0x17b3}, {0x17d7, 0x17d7},
    {0x17dc, 0x17dc}, {0x1820, 0x1878}, {0x1880, 0x1884}, {0x1887, 0x18a8}, {0x18aa, 0x18aa}, {0x18b0, 0x18f5},
    {0x1900, 0x191e}, {0x1950, 0x196d}, {0x1970, 0x1974}, {0x1980, 0x19ab}, {0x19b0, 0x19c9}, {0x1a00, 0x1a16},
    {0x1a20, 0x1a54}, {0x1aa7, 0x1aa7}, {0x1b05, 0x1b33}, {0x1b45, 0x1b4c}, {0x1b83, 0x1ba0}, {0x1bae, 0x1baf},
    {0x1bba, 0x1be5}, {0x1c00, 0x1c23}, {0x1c4d, 0x1c4f}, {0x1c5a, 0x1c7d}, {0x1c80, 0x1c88}, {0x1c90, 0x1cba},
    {0x1cbd, 0x1cbf}, {0x1ce9, 0x1cec}, {0x1cee, 0x1cf3}, {0x1cf5, 0x1cf6}, {0x1cfa, 0x1cfa}, {0x1d00, 0x1dbf},
    {0x1e00, 0x1f15}, {0x1f18, 0x1f1d}, {0x1f20, 0x1f45}, {0x1f48, 0x1f4d}, {0x1f50, 0x1f57}, {0x1f59, 0x1f59},
    {0x1f5b, 0x1f5b}, {0x1f5d, 0x1f5d}, {0x1f5f, 0x1f7d}, {0x1f80, 0x1fb4}, {0x1fb6, 0x1fbc}, {0x1fbe, 0x1fbe},
    {0x1fc2, 0x1fc4}, {0x1fc6, 0x1fcc}, {0x1fd0, 0x1fd3}, {0x1fd6, 0x1fdb}, {0x1fe0, 0x1fec}, {0x1ff2, 0x1ff4},
    {0x1ff6, 0x1ffc}, {0x2071, 0x2071}, {0x207f, 0x207f}, {0x2090, 0x209c}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210a, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211d}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212a, 0x212d}, {0x212f, 0x2139}, {0x213c, 0x213f}, {0x2145, 0x2149}, {0x214e, 0x214e}, {0x2183, 0x2184},
    {0x2c00, 0x2ce4}, {0x2ceb, 0x2cee}, {0x2cf2, 0x2cf3}, {0x2d00, 0x2d25}, {0x2d27, 0x2d27}, {0x2d2d, 0x2d2d},
    {0x2d30, 0x2d67}, {0x2d6f, 0x2d6f}, {0x2d80, 0x2d96}, {0x2da0, 0x2da6}, {0x2da8, 0x2dae}, {0x2db0, 0x2db6},
    {0x2db8, 0x2dbe}, {0x2dc0, 0x2dc6}, {0x2dc8, 0x2dce}, {0x2dd0, 0x2dd6}, {0x2dd8, 0x2dde}, {0x2e2f, 0x2e2f},
    {0x3005, 0x3006}, {0x3031, 0x3035}, {0x303b, 0x303c}, {0x3041, 0x3096}, {0x309d, 0x309f}, {0x30a1, 0x30fa},
    {0x30fc, 0x30ff}, {0x3105, 0x312f}, {0x3131, 0x318e}, {0x31a0, 0x31bf}, {0x31f0, 0x31ff}, {0x3400, 0x4dbf},
    {0x4e00, 0xa48c}, {0xa4d0, 0xa4fd}, {0xa500, 0xa60c}, {0xa610, 0xa61f}, {0xa62a, 0xa62b}, {0xa640, 0xa66e},
    {0xa67f, 0xa69d}, {0xa6a0, 0xa6e5}, {0xa717, 0xa71f}, {0xa722, 0xa788}, {0xa78b, 0xa7ca}, {0xa7d0, 0xa7d1},
    {0xa7d3, 0xa7d3}, {0xa7d5, 0xa7d9}, {0xa7f2, 0xa801}, {0xa803, 0xa805}, {0xa807, 0xa80a}, {0xa80c, 0xa822},
    {0xa840, 0xa873}, {0xa882, 0xa8b3}, {0xa8f2, 0xa8f7}, {0xa8fb, 0xa8fb}, {0xa8fd, 0xa8fe}, {0xa90a, 0xa925},
    {0xa930, 0xa946}, {0xa960, 0xa97c}, {0xa984, 0xa9b2}, {0xa9cf, 0xa9cf}, {0xa9e0, 0xa9e4}, {0xa9e6, 0xa9ef},
    {0xa9fa, 0xa9fe}, {0xaa00, 0xaa28}, {0xaa40, 0xaa42}, {0xaa44, 0xaa4b}, {0xaa60, 0xaa76}, {0xaa7a, 0xaa7a},
    {0xaa7e, 0xaaaf}, {0xaab1, 0xaab1}, {0xaab5, 0xaab6}, {0xaab9, 0xaabd}, {0xaac0, 0xaac0}, {0xaac2, 0xaac2},
    {0xaadb, 0xaadd}, {0xaae0, 0xaaea}, {0xaaf2, 0xaaf4}, {0xab01, 0xab06}, {0xab09, 0xab0e}, {0xab11, 0xab16},
    {0xab20, 0xab26}, {0xab28, 0xab2e}, {0xab30, 0xab5a}, {0xab5c, 0xab69}, {0xab70, 0xabe2}, {0xac00, 0xd7a3},
    {0xd7b0, 0xd7c6}, {0xd7cb, 0xd7fb}, {0xf900, 0xfa6d}, {0xfa70, 0xfad9}, {0xfb00, 0xfb06}, {0xfb13, 0xfb17},
    {0xfb1d, 0xfb1d}, {0xfb1f, 0xfb28}, {0xfb2a, 0xfb36}, {0xfb38, 0xfb3c}, {0xfb3e, 0xfb3e}, {0xfb40, 0xfb41},
    {0xfb43, 0xfb44}, {0xfb46, 0xfbb1}, {0xfbd3, 0xfd3d}, {0xfd50, 0xfd8f}, {0xfd92, 0xfdc7}, {0xfdf0, 0xfdfb},
    {0xfe70, 0xfe74}, {0xfe76, 0xfefc}, {0xff21, 0xff3a}, {0xff41, 0xff5a}, {0xff66, 0xffbe}, {0xffc2, 0xffc7},
    {0xffca, 0xffcf}, {0xffd2, 0xffd7}, {0xffda, 0xffdc}, {0x10000, 0x1000b}, {0x1000d, 0x10026},
    {0x10028, 0x1003a}, {0x1003c, 0x1003d}, {0x1003f, 0x1004d}, {0x10050, 0x1005d}, {0x10080, 0x100fa},
    {0x10280, 0x1029c}, {0x102a0, 0x102d0}, {0x10300, 0x1031f}, {0x1032d, 0x10340}, {0x10342, 0x10349},
    {0x10350, 0x10375}, {0x10380, 0x1039d}, {0x103a0, 0x103c3}, {0x103c8, 0x103cf}, {0x10400, 0x1049d},
    {0x104b0, 0x104d3}, {0x104d8, 0x104fb}, {0x10500, 0x10527}, {0x10530, 0x10563}, {0x10570, 0x1057a},
    {0x1057c, 0x1058a}, {0x1058c, 0x10592}, {0x10594, 0x10595}, {0x10597, 0x105a1}, {0x105a3, 0x105b1},
    {0x105b3, 0x105b9}, {0x105bb, 0x105bc}, {0x10600, 0x10736}, {0x10740, 0x10755}, {0x10760, 0x10767},
    {0x10780, 0x10785}, {0x10787, 0x107b0}, {0x107b2, 0x107ba}, {0x10800, 0x10805}, {0x10808, 0x10808},
    {0x1080a, 0x10835}, {0x10837, 0x10838}, {0x1083c, 0x1083c}, {0x1083f, 0x10855}, {0x10860, 0x10876},
    {0x10880, 0x1089e}, {0x108e0, 0x108f2}, {0x108f4, 0x108f5}, {0x10900, 0x10915}, {0x10920, 0x10939},
    {0x10980, 0x109b7}, {0x109be, 0x109bf}, {0x10a00, 0x10a00}, {0x10a10, 0x10a13}, {0x10a15, 0x10a17},
    {0x10a19, 0x10a35}, {0x10a60, 0x10a7c}, {0x10a80, 0x10a9c}, {0x10ac0, 0x10ac7}, {0x10ac9, 0x10ae4},
    {0x10b00, 0x10b35}, {0x10b40, 0x10b55}, {0x10b60, 0x10b72}, {0x10b80, 0x10b91}, {0x10c00, 0x10c48},
    {0x10c80, 0x10cb2}, {0x10cc0, 0x10cf2}, {0x10d00, 0x10d23}, {0x10e80, 0x10ea9}, {0x10eb0, 0x10eb1},
    {0x10f00, 0x10f1c}, {0x10f27, 0x10f27}, {0x10f30, 0x10f45}, {0x10f70, 0x10f81}, {0x10fb0, 0x10fc4},
    {0x10fe0, 0x10ff6}, {0x11003, 0x11037}, {0x11071, 0x11072}, {0x11075, 0x11075}, {0x11083, 0x110af},
    {0x110d0, 0x110e8}, {0x11103, 0x11126}, {0x11144, 0x11144}, {0x11147, 0x11147}, {0x11150, 0x11172},
    {0x11176, 0x11176}, {0x11183, 0x111b2}, {0x111c1, 0x111c4}, {0x111da, 0x111da}, {0x111dc, 0x111dc},
    {0x11200, 0x11211}, {0x11213, 0x1122b}, {0x11280, 0x11286}, {0x11288, 0x11288}, {0x1128a, 0x1128d},
    {0x1128f, 0x1129d}, {0x1129f, 0x112a8}, {0x112b0, 0x112de}, {0x11305, 0x1130c}, {0x1130f, 0x11310},
    {0x11313, 0x11328}, {0x1132a, 0x11330}, {0x11332, 0x11333}, {0x11335, 0x11339}, {0x1133d, 0x1133d},
    {0x11350, 0x11350}, {0x1135d, 0x11361}, {0x11400, 0x11434}, {0x11447, 0x1144a}, {0x1145f, 0x11461},
    {0x11480, 0x114af}, {0x114c4, 0x114c5}, {0x114c7, 0x114c7}, {0x11580, 0x115ae}, {0x115d8, 0x115db},
    {0x11600, 0x1162f}, {0x11644, 0x11644}, {0x11680, 0x116aa}, {0x116b8, 0x116b8}, {0x11700, 0x1171a},
    {0x11740, 0x11746}, {0x11800, 0x1182b}, {0x118a0, 0x118df}, {0x118ff, 0x11906}, {0x11909, 0x11909},
    {0x1190c, 0x11913}, {0x11915, 0x11916}, {0x11918, 0x1192f}, {0x1193f, 0x1193f}, {0x11941, 0x11941},
    {0x119a0, 0x119a7}, {0x119aa, 0x119d0}, {0x119e1, 0x119e1}, {0x119e3, 0x119e3}, {0x11a00, 0x11a00},
    {0x11a0b, 0x11a32}, {0x11a3a, 0x11a3a}, {0x11a50, 0x11a50}, {0x11a5c, 0x11a89}, {0x11a9d, 0x11a9d},
    {0x11ab0, 0x11af8}, {0x11c00, 0x11c08}, {0x11c0a, 0x11c2e}, {0x11c40, 0x11c40}, {0x11c72, 0x11c8f},
    {0x11d00, 0x11d06}, {0x11d08, 0x11d09}, {0x11d0b, 0x11d30}, {0x11d46, 0x11d46}, {0x11d60, 0x11d65},
    {0x11d67, 0x11d68}, {0x11d6a, 0x11d89}, {0x11d98, 0x11d98}, {0x11ee0, 0x11ef2}, {0x11fb0, 0x11fb0},
    {0x12000, 0x12399}, {0x12480, 0x12543}, {0x12f90, 0x12ff0}, {0x13000, 0x1342e}, {0x14400, 0x14646},
    {0x16800, 0x16a38}, {0x16a40, 0x16a5e}, {0x16a70, 0x16abe}, {0x16ad0, 0x16aed}, {0x16b00, 0x16b2f},
    {0x16b40, 0x16b43}, {0x16b63, 0x16b77}, {0x16b7d, 0x16b8f}, {0x16e40, 0x16e7f}, {0x16f00, 0x16f4a},
    {0x16f50, 0x16f50}, {0x16f93, 0x16f9f}, {0x16fe0, 0x16fe1}, {0x16fe3, 0x16fe3}, {0x17000, 0x187f7},
    {0x18800, 0x18cd5}, {0x18d00, 0x18d08}, {0x1aff0, 0x1aff3}, {0x1aff5, 0x1affb}, {0x1affd, 0x1affe},
    {0x1b000, 0x1b122}, {0x1b150, 0x1b152}, {0x1b164, 0x1b167}, {0x1b170, 0x1b2fb}, {0x1bc00, 0x1bc6a},
    {0x1bc70, 0x1bc7c}, {0x1bc80, 0x1bc88}, {0x1bc90, 0x1bc99}, {0x1d400, 0x1d454}, {0x1d456, 0x1d49c},
    {0x1d49e, 0x1d49f}, {0x1d4a2, 0x1d4a2}, {0x1d4a5, 0x1d4a6}, {0x1d4a9, 0x1d4ac}, {0x1d4ae, 0x1d4b9},
    {0x1d4bb, 0x1d4bb}, {0x1d4bd, 0x1d4c3}, {0x1d4c5, 0x1d505}, {0x1d507, 0x1d50a}, {0x1d50d, 0x1d514},
    {0x1d516, 0x1d51c}, {0x1d51e, 0x1d539}, {0x1d53b, 0x1d53e}, {0x1d540, 0x1d544}, {0x1d546, 0x1d546},
    {0x1d54a, 0x1d550}, {0x1d552, 0x1d6a5}, {0x1d6a8, 0x1d6c0}, {0x1d6c2, 0x1d6da}, {0x1d6dc, 0x1d6fa},
    {0x1d6fc, 0x1d714}, {0x1d716, 0x1d734}, {0x1d736, 0x1d74e}, {0x1d750, 0x1d76e}, {0x1d770, 0x1d788},
    {0x1d78a, 0x1d7a8}, {0x1d7aa, 0x1d7c2}, {0x1d7c4, 0x1d7cb}, {0x1df00, 0x1df1e}, {0x1e100, 0x1e12c},
    {0x1e137, 0x1e13d}, {0x1e14e, 0x1e14e}, {0x1e290, 0x1e2ad}, {0x1e2c0, 0x1e2eb}, {0x1e7e0, 0x1e7e6},
    {0x1e7e8, 0x1e7eb}, {0x1e7ed, 0x1e7ee}, {0x1e7f0, 0x1e7fe}, {0x1e800, 0x1e8c4}, {0x1e900, 0x1e943},
    {0x1e94b, 0x1e94b}, {0x1ee00, 0x1ee03}, {0x1ee05, 0x1ee1f}, {0x1ee21, 0x1ee22}, {0x1ee24, 0x1ee24},
    {0x1ee27, 0x1ee27}, {0x1ee29, 0x1ee32}, {0x1ee34, 0x1ee37}, {0x1ee39, 0x1ee39}, {0x1ee3b, 0x1ee3b},
    {0x1ee42, 0x1ee42}, {0x1ee47, 0x1ee47}, {0x1ee49, 0x1ee49}, {0x1ee4b, 0x1ee4b}, {0x1ee4d, 0x1ee4f},
    {0x1ee51, 0x1ee52}, {0x1ee54, 0x1ee54}, {0x1ee57, 0x1ee57}, {0x1ee59, 0x1ee59}, {0x1ee5b, 0x1ee5b},
    {0x1ee5d, 0x1ee5d}, {0x1ee5f, 0x1ee5f}, {0x1ee61, 0x1ee62}, {0x1ee64, 0x1ee64}, {0x1ee67, 0x1ee6a},
    {0x1ee6c, 0x1ee72}, {0x1ee74, 0x1ee77}, {0x1ee79, 0x1ee7c}, {0x1ee7e, 0x1ee7e}, {0x1ee80, 0x1ee89},
    {0x1ee8b, 0x1ee9b}, {0x1eea1, 0x1eea3}, {0x1eea5, 0x1eea9}, {0x1eeab, 0x1eebb}, {0x20000, 0x2a6df},
    {0x2a700, 0x2b738}, {0x2b740, 0x2b81d}, {0x2b820, 0x2cea1}, {0x2ceb0, 0x2ebe0}, {0x2f800, 0x2fa1d},
    {0x30000, 0x3134a},
};
static const uint32_t unicode_number_ranges[][2] = { /* 134 ranges */
    {0x30, 0x39}, {0xb2, 0xb3}, {0xb9, 0xb9}, {0xbc, 0xbe}, {0x660, 0x669}, {0x6f0, 0x6f9}, {0x7c0, 0x7c9},
    {0x966, 0x96f}, {0x9e6, 0x9ef}, {0x9f4, 0x9f9}, {0xa66, 0xa6f}, {0xae6, 0xaef}, {0xb66, 0xb6f}, {0xb72, 0xb77},
    {0xbe6, 0xbf2}, {0xc66, 0xc6f}, {0xc78, 0xc7e}, {0xce6, 0xcef}, {0xd58, 0xd5e}, {0xd66, 0xd78}, {0xde6, 0xdef},
    {0xe50, 0xe59}, {0xed0, 0xed9}, {0xf20, 0xf33}, {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x137c},
    {0x16ee, 0x16f0}, {0x17e0, 0x17e9}, {0x17f0, 0x17f9}, {0x1810, 0x1819}, {0x1946, 0x194f}, {0x19d0, 0x19da},
    {0x1a80, 0x1a89}, {0x1a90, 0x1a99}, {0x1b50, 0x1b59}, {0x1bb0, 0x1bb9}, {0x1c40, 0x1c49}, {0x1c50, 0x1c59},
    {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249b},
    {0x24ea, 0x24ff}, {0x2776, 0x2793}, {0x2cfd, 0x2cfd}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303a},
    {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324f}, {0x3251, 0x325f}, {0x3280, 0x3289}, {0x32b1, 0x32bf},
    {0xa620, 0xa629}, {0xa6e6, 0xa6ef}, {0xa830, 0xa835}, {0xa8d0, 0xa8d9}, {0xa900, 0xa909}, {0xa9d0, 0xa9d9},
    {0xa9f0, 0xa9f9}, {0xaa50, 0xaa59}, {0xabf0, 0xabf9}, {0xff10, 0xff19}, {0x10107, 0x10133}, {0x10140, 0x10178},
    {0x1018a, 0x1018b}, {0x102e1, 0x102fb}, {0x10320, 0x10323}, {0x10341, 0x10341}, {0x1034a, 0x1034a},
    {0x103d1, 0x103d5}, {0x104a0, 0x104a9}, {0x10858, 0x1085f}, {0x10879, 0x1087f}, {0x108a7, 0x108af},
    {0x108fb, 0x108ff}, {0x10916, 0x1091b}, {0x109bc, 0x109bd}, {0x109c0, 0x109cf}, {0x109d2, 0x109ff},
    {0x10a40, 0x10a48}, {0x10a7d, 0x10a7e}, {0x10a9d, 0x10a9f}, {0x10aeb, 0x10aef}, {0x10b58, 0x10b5f},
    {0x10b78, 0x10b7f}, {0x10ba9, 0x10baf}, {0x10cfa, 0x10cff}, {0x10d30, 0x10d39}, {0x10e60, 0x10e7e},
    {0x10f1d, 0x10f26}, {0x10f51, 0x10f54}, {0x10fc5, 0x10fcb}, {0x11052, 0x1106f}, {0x110f0, 0x110f9},
    {0x11136, 0x1113f}, {0x111d0, 0x111d9}, {0x111e1, 0x111f4}, {0x112f0, 0x112f9}, {0x11450, 0x11459},
    {0x114d0, 0x114d9}, {0x11650, 0x11659}, {0x116c0, 0x116c9}, {0x11730, 0x1173b}, {0x118e0, 0x118f2},
    {0x11950, 0x11959}, {0x11c50, 0x11c6c}, {0x11d50, 0x11d59}, {0x11da0, 0x11da9}, {0x11fc0, 0x11fd4},
    {0x12400, 0x1246e}, {0x16a60, 0x16a69}, {0x16ac0, 0x16ac9}, {0x16b50, 0x16b59}, {0x16b5b, 0x16b61},
    {0x16e80, 0x16e96}, {0x1d2e0, 0x1d2f3}, {0x1d360, 0x1d378}, {0x1d7ce, 0x1d7ff}, {0x1e140, 0x1e149},
    {0x1e2f0, 0x1e2f9}, {0x1e8c7, 0x1e8cf}, {0x1e950, 0x1e959}, {0x1ec71, 0x1ecab}, {0x1ecad, 0x1ecaf},
    {0x1ecb1, 0x1ecb4}, {0x1ed01, 0x1ed2d}, {0x1ed2f, 0x1ed3d}, {0x1f100, 0x1f10c}, {0x1fbf0, 0x1fbf9},
};

static int cp_is_letter(uint32_t cp)
{
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return cp_in_ranges(cp, unicode_letter_ranges, sizeof unicode_letter_ranges / sizeof unicode_letter_ranges[0]);
}

static int cp_is_number(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return cp_in_ranges(cp, unicode_number_ranges, sizeof unicode_number_ranges / sizeof unicode_number_ranges[0]);
}
