/* test_llm_tokenizer.c - the tokenizers, with known answers.

   usage: test_llm_tokenizer DATA_DIR          (DATA_DIR = tests/data)
          test_llm_tokenizer DATA_DIR --encode-gpt2 [--pre NAME] < NUL-separated texts
             prints one line of ids per text (cross-check against tests/llm/gpt2_reference.py)

   - llama2.c tok512.bin: "Once upon a time" and other texts encode to the ids llama2.c's
     encode() gives (derived by hand from the vocabulary's merge scores; see below), byte
     fallback, decoding rules (leading space after BOS, <0xXX> tokens), the capacity
     protocol of llm_tokenize, and damaged tokenizer.bin files;
   - a GGUF "llama" (SentencePiece) vocabulary with U+2581 spaces, <unk> fallback and
     control tokens in the text, loaded through llm_load as a model's embedded tokenizer;
   - a GGUF "gpt2" byte-level BPE vocabulary, small enough to merge by hand, with the
     "gpt2" and "smollm" pre-tokenizers (and the merge list kept: duplicates dropped), every
     pre-tokenizer name llama.cpp uses, a merge that makes token 0;
   - the real GPT-2 vocabulary (tests/data/gpt2/encoder.json and vocab.bpe, turned into a
     vocab-only GGUF here): known ids checked against encoder.json, and decode(encode(s))
     == s for random byte strings. */
#include "llm_test.h"
#include "toy_model.h"
#include "llm_internal.h" /* llm__tokenizer_view: the merge list that the exporters write */

static const char *data_dir = ".";

/* ---- llama2.c tok512 ---- */

/* How "Once upon a time" becomes [1, 403, 407, 261, 378] (ids and scores from tok512.bin):
   BOS, then the dummy prefix " " and the characters: ' ' O n c e ' ' u p o n ' ' a ' ' t i m e.
   Merges by best score: " t" (259, -0) > " a" (261, -2) > "im" (288, -29) > "on" (289, -30) >
   " u" (318, -59) > " O" (319, -60) > " On" (321, -62) > "ce" (331, -72) > " up" (350, -91) >
   "ime" (369, -110) > " time" (378, -119) > " Once" (403, -144) > " upon" (407, -148), which
   leaves " Once" " upon" " a" " time". */
static void test_tok512(void)
{
    llm_tokenizer *t = NULL;
    char err[256] = "";
    int32_t ids[8] = {-7, -7, -7, -7, -7, -7, -7, -7}, n = 0;
    static const char *const round_trips[] = {
        "Once upon a time", "Lily and Tim saw a big dog.", "  two leading spaces", "trailing  ", "tabs\tand\nnewlines\n",
        "caf\xc3\xa9 \xe2\x80\x9cquoted\xe2\x80\x9d", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "x", "!!!???", "a\001b\177",
    };
    size_t i;

    REQUIRE(llm_tokenizer_load_llama2c(lt_path(data_dir, "tok512.bin"), 512, &t, err, sizeof err) == 0, "tok512: %s", err);
    CHECK(llm_tokenizer_vocab(t) == 512 && llm_tokenizer_bos(t) == 1 && llm_tokenizer_eos(t) == 2);
    CHECK(strcmp(llm_tokenizer_model(t), "llama2c") == 0 && strcmp(llm_tokenizer_pre(t), "") == 0);
    CHECK(llm_tokenizer_wants_bos(t) == 1);

    CHECK_ENCODES(t, "Once upon a time", 1, 1, 403, 407, 261, 378);
    CHECK_ENCODES(t, "Once upon a time", 0, 403, 407, 261, 378);
    /* " Lily": "il" (290, -31), " L" (307, -48), "ily" (310, -51), " Lily" (317, -58) */
    CHECK_ENCODES(t, "Lily", 1, 1, 317);
    /* no "  " token: the prefix space and the text's space stay apart */
    CHECK_ENCODES(t, " ", 1, 1, 410, 410);
    /* U+65E5 (E6 97 A5) is not in the vocabulary: byte tokens <0xE6> <0x97> <0xA5> = byte + 3 */
    CHECK_ENCODES(t, "\xe6\x97\xa5", 1, 1, 410, 233, 154, 168);
    CHECK_ENCODES(t, "", 1, 1);
    CHECK(llm_tokenize(t, "", 0, ids, 8, &n, err, sizeof err) == 0 && n == 0);

    /* capacity protocol: the full count comes back, only cap ids are written */
    CHECK(llm_tokenize(t, "Once upon a time", 1, ids, 2, &n, err, sizeof err) == 0);
    CHECK(n == 5 && ids[0] == 1 && ids[1] == 403 && ids[2] == -7);
    CHECK(llm_tokenize(t, "Once upon a time", 1, NULL, 0, &n, err, sizeof err) == 0 && n == 5);
    CHECK(llm_tokenize(t, NULL, 1, ids, 8, &n, err, sizeof err) != 0);
    /* the other refused arguments; the count reads 0 after a refusal */
    n = 99;
    CHECK(llm_tokenize(t, "Once", 1, ids, -1, &n, err, sizeof err) != 0 && n == 0);
    n = 99;
    CHECK(llm_tokenize(t, "Once", 1, NULL, 8, &n, err, sizeof err) != 0 && n == 0);
    CHECK(llm_tokenize(NULL, "Once", 1, ids, 8, &n, err, sizeof err) != 0);
    CHECK(llm_tokenize(t, "Once", 1, ids, 8, NULL, err, sizeof err) != 0);

    /* decoding */
    CHECK(strcmp(llm_token_text(t, 1, 403), "Once") == 0);    /* the prefix space goes after BOS */
    CHECK(strcmp(llm_token_text(t, 403, 407), " upon") == 0);
    CHECK(strcmp(llm_token_text(t, 5, 13), "\n") == 0);       /* <0x0A> */
    CHECK(strcmp(llm_token_text(t, 5, 258), "\xff") == 0);    /* <0xFF> */
    CHECK(strcmp(llm_token_text(t, 5, 512), "") == 0 && strcmp(llm_token_text(t, 5, -1), "") == 0);
    CHECK(strcmp(llm_token_text(t, 5, 513), "") == 0 && strcmp(llm_token_text(t, 5, INT32_MAX), "") == 0);
    CHECK(llm_token_id(t, " Once") == 403 && llm_token_id(t, "Once") == -1);

    for (i = 0; i < sizeof round_trips / sizeof round_trips[0]; i++)
        CHECKF(lt_round_trips(t, round_trips[i], 1), "tok512 round trip %zu", i);
    llm_tokenizer_free(t);
}

static void test_tokenizer_bin_damage(void)
{
    size_t size, len;
    uint8_t *full = lt_read_file(lt_path(data_dir, "tok512.bin"), &size);
    llm_tokenizer *t = NULL;
    char err[256];
    lt_rng r = {99};
    int it, bad = 0, boundaries = 0;
    REQUIRE(full != NULL, "cannot read tok512.bin");
    CHECK(llm_tokenizer_load_llama2c_memory(full, size, 0, &t, err, sizeof err) == 0 && llm_tokenizer_vocab(t) == 512);
    llm_tokenizer_free(t);
    CHECK(llm_tokenizer_load_llama2c_memory(full, size, 513, &t, err, sizeof err) != 0 && strstr(err, "truncated"));
    CHECK(llm_tokenizer_load_llama2c_memory(full, size, 511, &t, err, sizeof err) != 0 && strstr(err, "stray"));
    /* three bytes after the last token: the message counts them */
    {
        uint8_t *longer = (uint8_t *)calloc(size + 3, 1);
        REQUIRE(longer != NULL, "out of memory");
        memcpy(longer, full, size);
        CHECKF(llm_tokenizer_load_llama2c_memory(longer, size + 3, 512, &t, err, sizeof err) != 0 &&
                   strstr(err, "3 stray bytes after token 512"), "%s", err);
        free(longer);
    }
    /* a token may be empty: max_token_length 1, then (score 0, length 0), (0, 1, "a"), (0, 1, "b") */
    {
        static const uint8_t three[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0, 1, 0, 0, 0, 'b'};
        CHECKF(llm_tokenizer_load_llama2c_memory(three, sizeof three, 3, &t, err, sizeof err) == 0, "%s", err);
        CHECK(llm_tokenizer_vocab(t) == 3 && strcmp(llm_token_text(t, -1, 0), "") == 0 &&
              strcmp(llm_token_text(t, -1, 2), "b") == 0);
        llm_tokenizer_free(t);
        t = NULL;
    }
    for (len = 0; len < size; len++) {
        uint8_t *cut = (uint8_t *)malloc(len ? len : 1);
        REQUIRE(cut != NULL, "out of memory");
        memcpy(cut, full, len);
        err[0] = 0;
        if (llm_tokenizer_load_llama2c_memory(cut, len, 512, &t, err, sizeof err) == 0 || !err[0] || t) bad++;
        llm_tokenizer_free(t);
        t = NULL;
        /* "all tokens": prefixes ending on a record boundary are valid, others must fail */
        if (llm_tokenizer_load_llama2c_memory(cut, len, 0, &t, err, sizeof err) == 0) {
            int32_t ids[32], n;
            boundaries++;
            llm_tokenize(t, "Once upon", 1, ids, 32, &n, err, sizeof err);
            llm_tokenizer_free(t);
            t = NULL;
        }
        free(cut);
    }
    CHECKF(bad == 0, "%d prefixes of tok512.bin loaded or failed without a message", bad);
    /* the prefixes cut just after token 1, 2, ..., 511 (the header alone has no tokens) */
    CHECKF(boundaries == 511, "%d prefixes of tok512.bin loaded as \"all tokens\", not 511", boundaries);
    for (it = 0; it < 2000; it++) {
        uint8_t *d = (uint8_t *)malloc(size);
        int k;
        REQUIRE(d != NULL, "out of memory");
        memcpy(d, full, size);
        for (k = 0; k < 4; k++) d[lt_below(&r, (uint32_t)size)] ^= (uint8_t)(1u << lt_below(&r, 8));
        if (llm_tokenizer_load_llama2c_memory(d, size, (int32_t)lt_below(&r, 2) * 512, &t, err, sizeof err) == 0) {
            int32_t ids[64], n;
            llm_tokenize(t, "Once upon a time, \xe6\x97\xa5!", 1, ids, 64, &n, err, sizeof err);
            llm_tokenizer_free(t);
            t = NULL;
        }
        free(d);
    }
    free(full);
}

/* ---- a GGUF SentencePiece vocabulary (embedded in a toy model) ---- */

#define U2581 "\xe2\x96\x81"
/* "<0x4G>" looks like a byte token but is not one (G is no hex digit); "<0x41>" is 'A' */
static const char *const spm_tokens[] = {"<unk>", "<s>", "</s>", U2581, "a", "b", U2581 "a", "ab", "<x>", "<0x4G>", "<0x41>"};
static const float spm_scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0, 0, 0};
static const int32_t spm_types[] = {2, 3, 3, 1, 1, 0, 1, 1, 4, 1, 6}; /* "b": 0, undefined */

static llm_tokenizer *load_embedded(const toy_opts *o)
{
    toy_model m;
    llm_config c;
    llm_weights w;
    llm_tokenizer *t = NULL;
    char err[256] = "";
    toy_build(o, &m);
    REQUIRE(llm_load_memory(m.file, m.size, &c, &w, &t, err, sizeof err) == 0, "toy model: %s", err);
    REQUIRE(t != NULL, "no embedded tokenizer");
    llm_weights_free(&w);
    toy_free(&m);
    return t;
}

static void test_gguf_spm(void)
{
    toy_opts o = toy_defaults();
    llm_tokenizer *t;
    o.tok_model = "llama";
    o.n_tokens = 11;
    o.tokens = spm_tokens;
    o.scores = spm_scores;
    o.types = spm_types;
    t = load_embedded(&o);
    CHECK(strcmp(llm_tokenizer_model(t), "llama") == 0);
    CHECK(llm_tokenizer_bos(t) == 1 && llm_tokenizer_eos(t) == 2 && llm_tokenizer_wants_bos(t) == 1); /* defaults */
    /* " ab": "ab" (-0.25) beats U+2581 "a" (-0.5); U+2581 "ab" is not a token */
    CHECK_ENCODES(t, "ab", 1, 1, 3, 7);
    CHECK_ENCODES(t, "a", 0, 6);
    /* " aab": "ab" first, then U+2581 "a" */
    CHECK_ENCODES(t, "aab", 0, 6, 7);
    /* 'c' is not in the vocabulary and there are no byte tokens: <unk> */
    CHECK_ENCODES(t, "c", 0, 3, 0);
    /* control tokens in the text are tokens; the text after one gets the prefix space again */
    CHECK_ENCODES(t, "<s>ab", 0, 1, 3, 7);
    CHECK_ENCODES(t, "a</s>", 0, 6, 2);
    /* user-defined tokens always split the text */
    CHECK_ENCODES(t, "a<x>a", 0, 6, 8, 6);
    llm_tokenizer_set_parse_special(t, 0);
    CHECK_ENCODES(t, "<s>ab", 0, 3, 0, 0, 0, 7);
    CHECK_ENCODES(t, "a<x>a", 0, 6, 8, 6);
    llm_tokenizer_set_parse_special(t, 1);
    CHECK(strcmp(llm_token_text(t, 1, 6), "a") == 0 && strcmp(llm_token_text(t, 4, 6), " a") == 0);
    CHECK(llm_token_id(t, " a") == 6 && llm_token_id(t, "<s>") == 1);
    CHECK(strcmp(llm_token_text(t, 4, 9), "<0x4G>") == 0 && strcmp(llm_token_text(t, 4, 10), "A") == 0);
    /* the types as the file gives them (what the exporters write back): "b" stays 0 */
    {
        llm_tokenizer_view v;
        llm__tokenizer_view(t, &v);
        CHECK(v.types[5] == 0 && v.types[4] == LLM_TOKTYPE_NORMAL && v.types[8] == LLM_TOKTYPE_USER_DEFINED);
    }
    CHECK(lt_round_trips(t, "ab aab ba", 1));
    llm_tokenizer_free(t);
}

/* ---- a small GGUF byte-level BPE vocabulary ---- */

#define G "\xc4\xa0" /* U+0120 'G with dot', GPT-2's character for the space byte */
static const char *const bpe_tokens[] = {
    "h", "e", "l", "o", G, "w", "r", "d", "he", "ll", "llo", "hello", G "w", "or", G "wor", "ld", G "world",
    "<|end|>", "1", "2", G "1",
};
static const int32_t bpe_types[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1};
static const char *const bpe_merges[] = {
    "h e", "l l", "ll o", "he llo", G " w", "o r", G "w or", "l d", G "wor ld", G " 1",
    "x y", /* names tokens that do not exist: ignored */
    "h e", /* a second time: dropped, the first keeps rank 0 */
};

static llm_tokenizer *small_bpe(const char *pre)
{
    toy_opts o = toy_defaults();
    o.tok_model = "gpt2";
    o.tok_pre = pre;
    o.n_tokens = 21;
    o.tokens = bpe_tokens;
    o.types = bpe_types;
    o.n_merges = 12;
    o.merges = bpe_merges;
    o.eos = 17;
    return load_embedded(&o);
}

static void test_small_bpe(void)
{
    llm_tokenizer *t = small_bpe("gpt2");
    int32_t ids[8], n;
    char err[256] = "";
    CHECK(strcmp(llm_tokenizer_model(t), "gpt2") == 0 && strcmp(llm_tokenizer_pre(t), "gpt2") == 0);
    CHECK(llm_tokenizer_bos(t) == -1 && llm_tokenizer_eos(t) == 17 && llm_tokenizer_wants_bos(t) == 0);
    /* "hello": h e l l o -> he l l o -> he ll o -> he llo -> hello (ranks 0, 1, 2, 3)
       " world": Ġ w o r l d -> Ġw o r l d -> Ġw or l d -> Ġwor l d -> Ġwor ld -> Ġworld (4, 5, 6, 7, 8) */
    CHECK_ENCODES(t, "hello world", 0, 11, 16);
    CHECK_ENCODES(t, "hello world", 1, 11, 16); /* no BOS in this vocabulary: none added */
    CHECK_ENCODES(t, "hello<|end|> world", 0, 11, 17, 16);
    /* GPT-2's regex keeps " 12" together (' ?\p{N}+'): Ġ 1 2 -> Ġ1 2 */
    CHECK_ENCODES(t, " 12", 0, 20, 19);
    /* "he" + "llo" would merge, but the regex splits "he llo" at the space first, and
       "Ġ llo" is no merge */
    CHECK_ENCODES(t, "he llo", 0, 8, 4, 10);
    CHECK(strcmp(llm_token_text(t, 0, 16), " world") == 0 && llm_token_id(t, G "world") == 16);
    err[0] = 0;
    CHECK(llm_tokenize(t, "hex", 0, ids, 8, &n, err, sizeof err) != 0 && strstr(err, "0x78") != NULL);
    /* the merges kept, in rank order, are what the exporters write (llm__tokenizer_view):
       of the 12 listed, "x y" names no tokens and the second "h e" repeats rank 0's pair,
       which leaves 10, the first h (0) + e (1) and the last Ġ (4) + 1 (18) */
    {
        llm_tokenizer_view v;
        llm__tokenizer_view(t, &v);
        CHECKF(v.n_merges == 10, "%d merges kept, not 10", (int)v.n_merges);
        CHECK(v.n_merges >= 10 && v.merge_left[0] == 0 && v.merge_right[0] == 1 && v.merge_left[9] == 4 &&
              v.merge_right[9] == 18);
    }
    llm_tokenizer_free(t);

    /* SmolLM's pre-tokenizer splits off every digit first: " " "1" "2" */
    t = small_bpe("smollm");
    CHECK(strcmp(llm_tokenizer_pre(t), "smollm") == 0);
    CHECK_ENCODES(t, " 12", 0, 4, 18, 19);
    CHECK_ENCODES(t, "hello 1world", 0, 11, 4, 18, 5, 13, 15);
    /* a byte missing from the vocabulary before a digit is refused here too (GGUF vocabulary,
       no <unk>), not dropped with the rest of the text */
    err[0] = 0;
    CHECK(llm_tokenize(t, "hex1", 0, ids, 8, &n, err, sizeof err) != 0 && strstr(err, "0x78") != NULL);
    llm_tokenizer_free(t);
}

/* Every name llama.cpp gives the three pre-tokenizers: " 12" is Ġ1 2 (20, 19) under GPT-2's
   regex (' ?\p{N}+', then the merge Ġ 1), Ġ 1 2 (4, 18, 19) when the digits split first
   (smollm's names) and under Llama-3's regex (the space alone: \p{N}{1,3} takes no space). */
static void test_pre_names(void)
{
    static const char *const names[] = {"gpt2", "gpt-2", "default", "phi-2", "roberta-bpe", "mpt", "olmo", "jais",
                                        "smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva",
                                        "llama-bpe", "llama3", "llama-v3"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        llm_tokenizer *t = small_bpe(names[i]);
        CHECKF(strcmp(llm_tokenizer_pre(t), names[i]) == 0, "pre %s", names[i]);
        if (i < 8) CHECK_ENCODES(t, " 12", 0, 20, 19);
        else CHECK_ENCODES(t, " 12", 0, 4, 18, 19);
        llm_tokenizer_free(t);
    }
}

/* A merge whose result is token 0 ("ab" 0, "a" 1, "b" 2, merge "a b"): "ab" -> [0]. */
static void test_merge_to_token0(void)
{
    static const char *const tokens[] = {"ab", "a", "b"};
    static const int32_t types[] = {1, 1, 1};
    static const char *const merges[] = {"a b"};
    toy_opts o = toy_defaults();
    llm_tokenizer *t;
    o.tok_model = "gpt2";
    o.tok_pre = "gpt2";
    o.n_tokens = 3;
    o.tokens = tokens;
    o.types = types;
    o.n_merges = 1;
    o.merges = merges;
    t = load_embedded(&o);
    CHECK_ENCODES(t, "ab", 0, 0);
    llm_tokenizer_free(t);
}

/* ---- the real GPT-2 vocabulary ---- */

/* Parse one JSON string at *p (after its opening quote) into UTF-8 at out (room for cap
   bytes); returns its length. */
static size_t json_string(const char **p, char *out, size_t cap)
{
    const char *s = *p;
    size_t n = 0;
    while (*s && *s != '"') {
        REQUIRE(n + 5 < cap, "encoder.json: key longer than %zu bytes", cap);
        if (*s != '\\') {
            out[n++] = *s++;
            continue;
        }
        s++;
        switch (*s) {
        case 'n': out[n++] = '\n', s++; break;
        case 't': out[n++] = '\t', s++; break;
        case 'r': out[n++] = '\r', s++; break;
        case 'b': out[n++] = '\b', s++; break;
        case 'f': out[n++] = '\f', s++; break;
        case 'u': {
            unsigned cp = 0;
            int k;
            s++;
            for (k = 0; k < 4; k++, s++) cp = cp * 16 + (unsigned)(*s <= '9' ? *s - '0' : (*s | 32) - 'a' + 10);
            if (cp >= 0xD800 && cp < 0xDC00 && s[0] == '\\' && s[1] == 'u') { /* surrogate pair */
                unsigned lo = 0;
                s += 2;
                for (k = 0; k < 4; k++, s++) lo = lo * 16 + (unsigned)(*s <= '9' ? *s - '0' : (*s | 32) - 'a' + 10);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) out[n++] = (char)cp;
            else if (cp < 0x800) out[n++] = (char)(0xC0 | cp >> 6), out[n++] = (char)(0x80 | (cp & 63));
            else if (cp < 0x10000)
                out[n++] = (char)(0xE0 | cp >> 12), out[n++] = (char)(0x80 | (cp >> 6 & 63)), out[n++] = (char)(0x80 | (cp & 63));
            else
                out[n++] = (char)(0xF0 | cp >> 18), out[n++] = (char)(0x80 | (cp >> 12 & 63)),
                out[n++] = (char)(0x80 | (cp >> 6 & 63)), out[n++] = (char)(0x80 | (cp & 63));
            break;
        }
        default: out[n++] = *s++; break; /* \" \\ \/ */
        }
    }
    *p = *s ? s + 1 : s;
    out[n] = '\0';
    return n;
}

/* encoder.json + vocab.bpe -> a vocab-only GGUF tokenizer ("gpt2", with the given pre). */
static llm_tokenizer *load_gpt2(const char *pre)
{
    enum { N_VOCAB = 50257 };
    size_t jsize, bsize, i;
    char *json = (char *)lt_read_file(lt_path(data_dir, "gpt2/encoder.json"), &jsize);
    char *bpe = (char *)lt_read_file(lt_path(data_dir, "gpt2/vocab.bpe"), &bsize);
    char **tokens = (char **)calloc(N_VOCAB, sizeof(char *));
    char **merges;
    int32_t *types = (int32_t *)malloc(N_VOCAB * sizeof(int32_t));
    int n_merges = 0, filled = 0;
    const char *p;
    char key[4096], *line, *next;
    gguf_builder g;
    uint8_t *img;
    size_t img_size;
    llm_tokenizer *t = NULL;
    char err[256] = "";

    REQUIRE(json && bpe && tokens && types, "cannot read %s/gpt2/encoder.json and vocab.bpe", data_dir);
    for (p = json; (p = strchr(p, '"')) != NULL;) {
        long id;
        p++;
        json_string(&p, key, sizeof key);
        REQUIRE(*p == ':', "encoder.json: expected ':' after \"%s\"", key);
        id = strtol(p + 1, (char **)&p, 10);
        REQUIRE(id >= 0 && id < N_VOCAB && !tokens[id], "encoder.json: bad id %ld", id);
        tokens[id] = (char *)malloc(strlen(key) + 1);
        REQUIRE(tokens[id] != NULL, "out of memory");
        strcpy(tokens[id], key);
        filled++;
    }
    REQUIRE(filled == N_VOCAB, "encoder.json has %d entries", filled);
    for (i = 0; i < N_VOCAB; i++) types[i] = i == 50256 ? 3 : 1; /* <|endoftext|> is a control token */

    merges = (char **)malloc(60000 * sizeof(char *));
    REQUIRE(merges != NULL, "out of memory");
    for (line = bpe; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (line[0] == '\0' || (line == bpe && strncmp(line, "#version", 8) == 0)) continue;
        REQUIRE(n_merges < 60000, "too many merges");
        merges[n_merges++] = line;
    }
    REQUIRE(n_merges == 50000, "vocab.bpe has %d merges", n_merges);

    gb_init(&g);
    gb_kv_str(&g, "general.architecture", "gpt2");
    gb_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    gb_kv_str(&g, "tokenizer.ggml.pre", pre);
    gb_kv_strings(&g, "tokenizer.ggml.tokens", (const char *const *)tokens, N_VOCAB);
    gb_kv_i32s(&g, "tokenizer.ggml.token_type", types, N_VOCAB);
    gb_kv_strings(&g, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)n_merges);
    gb_kv_u32(&g, "tokenizer.ggml.bos_token_id", 50256);
    gb_kv_u32(&g, "tokenizer.ggml.eos_token_id", 50256);
    img = gb_finish(&g, &img_size);
    REQUIRE(llm_tokenizer_load_gguf_memory(img, img_size, &t, err, sizeof err) == 0, "GPT-2 GGUF: %s", err);

    free(img);
    gb_free(&g);
    for (i = 0; i < N_VOCAB; i++) free(tokens[i]);
    free(tokens);
    free(types);
    free(merges);
    free(json);
    free(bpe);
    return t;
}

/* Expected ids: whole-token cases read from encoder.json ("Hello": 15496, "\u0120world": 995,
   "\u0120Hello": 18435, "hello": 31373, ",": 11, "!": 0, "I": 40, "'m": 1101, "\u010a": 198,
   "\u0120123": 17031, "123": 10163, "a": 64, "\u0120": 220, "\u0120b": 275, "The": 464,
   "\u0120the": 262, "1": 16, "2": 17, "3": 18, "<|endoftext|>": 50256); the multi-merge
   cases from tests/llm/gpt2_reference.py (OpenAI's encoder.py algorithm), whose pieces are
   "c" "af" "\u00c3\u00a9" (66, 1878, 2634) and "token" "ization" (30001, 1634). */
static void test_gpt2_vocab(void)
{
    llm_tokenizer *t = load_gpt2("gpt2");
    lt_rng r = {2024};
    int it;
    CHECK(llm_tokenizer_vocab(t) == 50257 && llm_tokenizer_eos(t) == 50256);
    CHECK_ENCODES(t, "Hello world", 0, 15496, 995);
    CHECK_ENCODES(t, " Hello", 0, 18435);
    CHECK_ENCODES(t, "hello, world!", 0, 31373, 11, 995, 0);
    CHECK_ENCODES(t, "I'm", 0, 40, 1101);
    CHECK_ENCODES(t, "\n", 0, 198);
    CHECK_ENCODES(t, " 123", 0, 17031);
    CHECK_ENCODES(t, "123", 0, 10163);
    CHECK_ENCODES(t, "a  b", 0, 64, 220, 275);
    CHECK_ENCODES(t, "The the", 0, 464, 262);
    CHECK_ENCODES(t, "Hello<|endoftext|>", 0, 15496, 50256);
    CHECK_ENCODES(t, "Hello<|endoftext|>", 1, 50256, 15496, 50256);
    CHECK_ENCODES(t, "caf\xc3\xa9", 0, 66, 1878, 2634);
    CHECK_ENCODES(t, "tokenization", 0, 30001, 1634);
    CHECK(strcmp(llm_token_text(t, -1, 995), " world") == 0 && strcmp(llm_token_text(t, -1, 198), "\n") == 0);
    CHECK(strcmp(llm_token_text(t, -1, 2634), "\xc3\xa9") == 0);
    /* the ends of the byte alphabet's ranges (encoder.json): "\u0100" (188) is byte 0, so
       the C string is empty, "\u0101" (189) byte 1, "\u0142" (254) byte 0xA0, "\u0143" (255)
       byte 0xAD, the soft hyphen */
    CHECK(strcmp(llm_token_text(t, -1, 188), "") == 0 && strcmp(llm_token_text(t, -1, 189), "\x01") == 0);
    CHECK(strcmp(llm_token_text(t, -1, 254), "\xa0") == 0 && strcmp(llm_token_text(t, -1, 255), "\xad") == 0);
    CHECK(llm_token_id(t, "<|endoftext|>") == 50256);
    /* every byte string (but NUL, which C strings cannot hold) survives the round trip */
    for (it = 0; it < 300; it++) {
        char s[64];
        int k, len = 1 + (int)lt_below(&r, 60);
        for (k = 0; k < len; k++) {
            uint32_t c = lt_below(&r, 4);
            s[k] = c == 0 ? (char)(1 + lt_below(&r, 255)) : c == 1 ? ' ' : (char)('a' + lt_below(&r, 26));
        }
        s[len] = '\0';
        CHECKF(lt_round_trips(t, s, 0), "gpt2 round trip %d", it);
    }
    CHECK(lt_round_trips(t, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 it's 2024!\n\n  ok  ", 0));
    llm_tokenizer_free(t);

    t = load_gpt2("smollm");
    CHECK_ENCODES(t, " 123", 0, 220, 16, 17, 18);
    CHECK_ENCODES(t, "Hello world", 0, 15496, 995);
    llm_tokenizer_free(t);
}

/* --encode-gpt2: ids for NUL-separated texts on stdin, one line each */
static int encode_stdin(const char *pre)
{
    llm_tokenizer *t = load_gpt2(pre);
    size_t cap = 1 << 20, n = 0, start, i;
    char *buf = (char *)malloc(cap);
    int c;
    REQUIRE(buf != NULL, "out of memory");
    while ((c = getchar()) != EOF) {
        if (n + 1 >= cap) {
            char *nb = (char *)realloc(buf, cap *= 2);
            REQUIRE(nb != NULL, "out of memory");
            buf = nb;
        }
        buf[n++] = (char)c;
    }
    buf[n] = '\0';
    for (start = 0; start < n; start = i + 1) {
        int32_t *ids, k, cnt;
        for (i = start; i < n && buf[i]; i++) {}
        if (i == start) continue;
        ids = lt_tokenize(t, buf + start, 0, &cnt);
        for (k = 0; k < cnt; k++) printf("%s%d", k ? " " : "", (int)ids[k]);
        printf("\n");
        free(ids);
    }
    free(buf);
    llm_tokenizer_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR [--encode-gpt2 [--pre NAME]]\n", argv[0]);
        return 1;
    }
    data_dir = argv[1];
    if (argc > 2 && strcmp(argv[2], "--encode-gpt2") == 0)
        return encode_stdin(argc > 4 && strcmp(argv[3], "--pre") == 0 ? argv[4] : "gpt2");
    test_tok512();
    test_tokenizer_bin_damage();
    test_gguf_spm();
    test_small_bpe();
    test_pre_names();
    test_merge_to_token0();
    test_gpt2_vocab();
    return lt_finish("test_llm_tokenizer");
}
