/* test_llm_tokenizer_hf.c - Hugging Face tokenizer.json against the tokenizers package.

   usage: test_llm_tokenizer_hf SCRIPT PYLIB OUT_DIR GPT2_DIR PYTHON...
          test_llm_tokenizer_hf --compare OUT_DIR     the folders of OUT_DIR/index.txt only
             (bench/hf_tokenizer_real.py writes real Llama-2 and SmolLM2 ones)

   - Refusals (no Python needed): unknown model types, normalizers, pre-tokenizers, Split
     regexes and post-processors, merges naming missing tokens, hostile ids, broken JSON,
     flags that are not booleans, a tokenizer_config.json that cannot be read: each gives
     an error that names the problem, and no tokenizer.
   - Known answers: SCRIPT (hf_tokenizer_cases.py) builds tokenizer.json files with the
     `tokenizers` package, trained in the script (byte-level GPT-2 regex, GPT-2's real
     vocabulary from GPT2_DIR, a vocabulary with an id that names no token, a merge of a
     token with a space, Llama-3's Split regex with ignore_merges and special tokens,
     SmolLM2's Digits, Llama-2's byte-fallback character BPE, two Metaspace variants;
     eleven in all) and
     the package's ids for 400 strings; grzo must give exactly the same ids, BOS included.
     The first PYTHON that imports tokenizers (PYLIB on its path; tests/run.sh installs the
     package there) runs it; without one the test skips (77) and says why. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif

#include <errno.h>
#if !defined(_WIN32)
#include <sys/stat.h> /* mkdir */
#include <unistd.h>   /* symlink, unlink, rmdir */
#endif

#include "llm_test.h"
#include "llm_internal.h" /* llm__tokenizer_view: pad and types, which the exporters write */

/* ---- refusals ---- */

static const char *const MINI_MODEL =
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}";

/* tokenizer.json = {PARTS, MINI_MODEL}; the load must fail with `needle` in the message. */
static void check_refused(const char *parts, const char *needle)
{
    char json[2048], err[512] = "";
    llm_tokenizer *t = (llm_tokenizer *)&err; /* must come back NULL */
    snprintf(json, sizeof json, "{%s%s%s}", parts, *parts ? "," : "", MINI_MODEL);
    CHECKF(llm_tokenizer_load_hf_memory(json, strlen(json), NULL, 0, &t, err, sizeof err) != 0 && t == NULL,
           "accepted: %s", json);
    CHECKF(strstr(err, needle) != NULL, "for %s\n    the error '%s' does not name '%s'", json, err, needle);
}

static void check_refused_whole(const char *json, const char *config, const char *needle)
{
    char err[512] = "";
    llm_tokenizer *t = NULL;
    CHECKF(llm_tokenizer_load_hf_memory(json, strlen(json), config, config ? strlen(config) : 0, &t, err, sizeof err) != 0 &&
               t == NULL, "accepted: %s", json);
    CHECKF(strstr(err, needle) != NULL, "for %s\n    the error '%s' does not name '%s'", json, err, needle);
    llm_tokenizer_free(t);
}

static void test_refusals(void)
{
    check_refused("\"normalizer\":{\"type\":\"NFC\"}", "NFC");
    check_refused("\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]}", "Lowercase");
    check_refused("\"pre_tokenizer\":{\"type\":\"Whitespace\"}", "Whitespace");
    check_refused("\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}", "BertPreTokenizer");
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
                  "\"use_regex\":false}]}",
                  "\\s+");
    /* Qwen2's regex differs from Llama-3's only in \p{N} (not {1,3}): still refused */
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
                  "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
                  "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
                  "{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "not supported");
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|"
                  "\\\\s+\"},\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "Isolated");
    /* Isolated, but inverted (what the regex does not match would be split out instead) */
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|"
                  "\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":true},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "not inverted");
    /* flags that are not booleans are refused, not read as their default */
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|"
                  "\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":\"no\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "Split.invert is not a boolean");
    check_refused("\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"lstrip\":0,\"special\":true}]",
                  "added_tokens[].lstrip is not a boolean");
    check_refused("\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"special\":\"yes\"}]",
                  "added_tokens[].special is not a boolean");
    check_refused("\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"split\":\"yes\"}",
                  "Metaspace.split is not a boolean");
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":1},"
                  "{\"type\":\"ByteLevel\"}]}",
                  "Digits.individual_digits is not a boolean");
    /* a second Split, and steps after Metaspace */
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|"
                  "\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"Split\",\"pattern\":"
                  "{\"Regex\":\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|"
                  "\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "one Split");
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Metaspace\",\"replacement\":"
                  "\"\\u2581\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                  "after ByteLevel or Metaspace");
    /* a Sequence without its list of steps, a step without a type */
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\"}", "Sequence has no \"pretokenizers\" array");
    check_refused("\"post_processor\":{\"type\":\"Sequence\"}", "Sequence has no \"processors\" array");
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"use_regex\":false},{\"type\":\"ByteLevel\"}]}",
                  "a pre-tokenizer has no \"type\"");
    check_refused("\"post_processor\":{\"type\":\"TemplateProcessing\"}", "no \"single\" template");
    check_refused("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":{\"a\":{\"type\":\"ByteLevel\"}}}",
                  "Sequence has no \"pretokenizers\" array");
    check_refused("\"pre_tokenizer\":{\"type\":\"Digits\",\"individual_digits\":false}", "individual_digits");
    check_refused("\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"always\"}",
                  "replacement");
    check_refused("\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"sometimes\"}",
                  "sometimes");
    check_refused("\"post_processor\":{\"type\":\"RobertaProcessing\"}", "RobertaProcessing");
    check_refused("\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"A\"}},"
                  "{\"SpecialToken\":{\"id\":\"b\"}}]}",
                  "TemplateProcessing");
    check_refused("\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"lstrip\":true,\"special\":true}]", "lstrip");
    check_refused("\"added_tokens\":[{\"id\":1,\"content\":\"<x>\",\"special\":true}]", "two different tokens");
    /* the same length as model.vocab's "b" (id 1), other bytes */
    check_refused("\"added_tokens\":[{\"id\":1,\"content\":\"c\",\"special\":true}]", "two different tokens");
    check_refused("\"added_tokens\":[{\"id\":99999999,\"content\":\"<x>\",\"special\":true}]", "far beyond");
    /* the bound: 4 entries (3 in model.vocab, 1 added) allow ids below 2 * 4 + 256 = 264
       (test_hand_cases loads one with id 263) */
    check_refused("\"added_tokens\":[{\"id\":264,\"content\":\"<x>\",\"special\":true}]", "far beyond");
    check_refused("\"added_tokens\":[{\"id\":3,\"special\":true}]", "added_tokens[0] has no content");
    check_refused("\"added_tokens\":[{\"id\":-1,\"content\":\"<x>\",\"special\":true}]", "id");
    check_refused_whole("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", NULL, "Unigram");
    check_refused_whole("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", NULL, "WordPiece");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", NULL,
                        "not in the vocabulary");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a  b\"]}}", NULL,
                        "merge 0");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\"]]}}", NULL,
                        "merge 0");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\",\"b\"]]}}",
                        NULL, "merge 0 is neither");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",1]]}}", NULL,
                        "merge 0 is neither");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0.5},\"merges\":[]}}", NULL, "id");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"dropout\":0.1}}", NULL, "dropout");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}}", NULL, "tokenizer.json");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}", NULL, "tokenizer.json");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", "{\"bos_token\":\"<s>\"}",
                        "bos_token");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", "[1]", "tokenizer_config.json");
    check_refused_whole("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", "{\"add_bos_token\":\"yes\"}",
                        "add_bos_token is not a boolean");
}

/* What a small tokenizer.json with a config gives through the accessors. */
static void test_accessors(void)
{
    static const char json[] =
        "{\"added_tokens\":[{\"id\":3,\"content\":\"<s>\",\"special\":true},{\"id\":4,\"content\":\"</s>\",\"special\":true}],"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{}},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}}";
    static const char config[] = "{\"eos_token\":{\"content\":\"</s>\"},\"chat_template\":\"{{ bos_token }}\"}";
    char err[256] = "";
    llm_tokenizer *t = NULL;
    int32_t ids[8], n = 0;
    REQUIRE(llm_tokenizer_load_hf_memory(json, strlen(json), config, strlen(config), &t, err, sizeof err) == 0, "load: %s",
            err);
    CHECK(llm_tokenizer_vocab(t) == 5 && llm_tokenizer_bos(t) == 3 && llm_tokenizer_eos(t) == 4);
    CHECK(llm_tokenizer_wants_bos(t) == 1 && strcmp(llm_tokenizer_model(t), "gpt2") == 0);
    CHECK(strcmp(llm_tokenizer_chat_template(t), "{{ bos_token }}") == 0);
    CHECK(llm_tokenize(t, "ab<s>ba", 1, ids, 8, &n, err, sizeof err) == 0);
    CHECK(n == 5 && ids[0] == 3 && ids[1] == 2 && ids[2] == 3 && ids[3] == 1 && ids[4] == 0);
    /* a byte missing from the vocabulary (no unk): dropped, as the tokenizers library does */
    CHECK(llm_tokenize(t, "a c", 0, ids, 8, &n, err, sizeof err) == 0 && n == 1 && ids[0] == 0);
    llm_tokenizer_free(t);
    t = NULL;
    REQUIRE(llm_tokenizer_load_hf_memory(json, strlen(json), NULL, 0, &t, err, sizeof err) == 0, "load: %s", err);
    CHECK(llm_tokenizer_eos(t) == -1 && strcmp(llm_tokenizer_chat_template(t), "") == 0);
    llm_tokenizer_free(t);
    t = NULL;
    /* the config may name token 0 as BOS and EOS (SmolLM2's <|endoftext|> is its id 0; here
       "a"), and a list of chat templates gives the one named "default" wherever it stands */
    {
        static const char config0[] =
            "{\"bos_token\":\"a\",\"eos_token\":{\"content\":\"a\"},\"pad_token\":\"a\",\"chat_template\":[{\"name\":"
            "\"tool_use\",\"template\":\"T\"},{\"name\":\"default\",\"template\":\"D\"},{\"name\":\"rag\",\"template\":\"R\"}]}";
        /* "default" first of 8 (the JSON reader's first array capacity: the ASan build sees
           a read past the list) */
        static const char config8[] =
            "{\"chat_template\":[{\"name\":\"default\",\"template\":\"D\"},{\"name\":\"t1\"},{\"name\":\"t2\"},"
            "{\"name\":\"t3\"},{\"name\":\"t4\"},{\"name\":\"t5\"},{\"name\":\"t6\"},{\"name\":\"t7\"}]}";
        llm_tokenizer_view v;
        REQUIRE(llm_tokenizer_load_hf_memory(json, strlen(json), config0, strlen(config0), &t, err, sizeof err) == 0,
                "load: %s", err);
        CHECK(llm_tokenizer_bos(t) == 0 && llm_tokenizer_eos(t) == 0 && strcmp(llm_tokenizer_chat_template(t), "D") == 0);
        llm__tokenizer_view(t, &v);
        CHECK(v.pad == 0);
        llm_tokenizer_free(t);
        t = NULL;
        REQUIRE(llm_tokenizer_load_hf_memory(json, strlen(json), config8, strlen(config8), &t, err, sizeof err) == 0,
                "load: %s", err);
        CHECK(strcmp(llm_tokenizer_chat_template(t), "D") == 0);
        llm_tokenizer_free(t);
        t = NULL;
    }
    /* an empty normalizer Sequence is no normalizer: ByteLevel stays allowed */
    {
        static const char empty_norm[] = "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[]},"
                                         "\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
                                         "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
        CHECKF(llm_tokenizer_load_hf_memory(empty_norm, strlen(empty_norm), NULL, 0, &t, err, sizeof err) == 0, "%s", err);
        llm_tokenizer_free(t);
        t = NULL;
    }
    CHECK(llm_tokenizer_load_hf("/nonexistent-dir", &t, err, sizeof err) != 0 && t == NULL && strstr(err, "tokenizer.json"));
}

/* tokenizer.json (no config) that must load; the error otherwise. */
static llm_tokenizer *load_json(const char *json)
{
    char err[512] = "";
    llm_tokenizer *t = NULL;
    REQUIRE(llm_tokenizer_load_hf_memory(json, strlen(json), NULL, 0, &t, err, sizeof err) == 0, "%s: %s", json, err);
    return t;
}

/* Small files with the ids worked out by hand (and the same from the tokenizers package):
   what the pipelines of hf_tokenizer_cases.py, trained on a text, never meet. */
static void test_hand_cases(void)
{
    char json[1024], x31[32], y31[32];
    llm_tokenizer *t;
    llm_tokenizer_view v;
    /* Metaspace split: each U+2581 starts a word, so the merge "a" + U+2581 never applies:
       "a b" -> U+2581 a U+2581 b, words (U+2581 a) (U+2581 b) -> [0, 1, 0, 2] (unsplit it
       would be [0, 3, 2]) */
    t = load_json("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\","
                  "\"split\":true},\"model\":{\"type\":\"BPE\",\"vocab\":{\"\\u2581\":0,\"a\":1,\"b\":2,\"a\\u2581\":3},"
                  "\"merges\":[\"a \\u2581\"]}}");
    CHECK_ENCODES(t, "a b", 0, 0, 1, 0, 2);
    llm_tokenizer_free(t);
    /* ByteLevel without "use_regex" (files older than the field): GPT-2's regex, its
       default, so "a a" is the words "a" " a" -> [0, 1, 0], not one word merged to [2, 0] */
    t = load_json("{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},\"model\":{\"type\":\"BPE\","
                  "\"vocab\":{\"a\":0,\"\\u0120\":1,\"a\\u0120\":2},\"merges\":[\"a \\u0120\"]}}");
    CHECK_ENCODES(t, "a a", 0, 0, 1, 0);
    llm_tokenizer_free(t);
    /* ignore_merges in character BPE: the word "ab" is token 0 itself, though no merge makes it */
    t = load_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"ab\":0,\"a\":1,\"b\":2},\"merges\":[],\"ignore_merges\":true}}");
    CHECK_ENCODES(t, "ab", 0, 0);
    llm_tokenizer_free(t);
    /* byte_fallback with some byte tokens missing: U+65E5 (E6 97 A5) has <0xE6> but not
       <0x97> or <0xA5>, so the whole character is <unk>, not a part of its bytes */
    t = load_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0,\"<0xE6>\":1,\"a\":2,\"<0x61>\":3},\"merges\":[],"
                  "\"byte_fallback\":true,\"unk_token\":\"<unk>\"}}");
    CHECK_ENCODES(t, "aa\xe6\x97\xa5", 0, 2, 2, 0);
    llm_tokenizer_free(t);
    /* byte-level: an added token outside the byte alphabet decodes to its own text */
    t = load_json("{\"added_tokens\":[{\"id\":1,\"content\":\"\\u65e5\",\"special\":false}],\"pre_tokenizer\":"
                  "{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}");
    CHECK_ENCODES(t, "a\xe6\x97\xa5" "a", 0, 0, 1, 0);
    CHECK(strcmp(llm_token_text(t, -1, 1), "\xe6\x97\xa5") == 0);
    llm_tokenizer_free(t);
    /* ids 1 and 3: tokens 0 and 2 are gaps, empty and of type unused; the bound of the "far beyond"
       refusal (test_refusals) less one loads */
    t = load_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1,\"b\":3},\"merges\":[]}}");
    llm__tokenizer_view(t, &v);
    CHECK(llm_tokenizer_vocab(t) == 4 && v.types[0] == LLM_TOKTYPE_UNUSED && v.types[2] == LLM_TOKTYPE_UNUSED &&
          strcmp(llm_token_text(t, -1, 0), "") == 0 && strcmp(llm_token_text(t, -1, 2), "") == 0);
    CHECK_ENCODES(t, "ab", 0, 1, 3);
    llm_tokenizer_free(t);
    t = load_json("{\"added_tokens\":[{\"id\":263,\"content\":\"<x>\",\"special\":true}],"
                  "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}");
    CHECK(llm_tokenizer_vocab(t) == 264);
    llm_tokenizer_free(t);
    /* a "left right" merge of 63 bytes fills the JSON reader's first string buffer (64): the
       search for a second space must stop at its end (the ASan build sees a read past it) */
    memset(x31, 'x', 31), x31[31] = '\0';
    memset(y31, 'y', 31), y31[31] = '\0';
    snprintf(json, sizeof json, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"%s\":0,\"%s\":1,\"%s%s\":2},\"merges\":[\"%s %s\"]}}",
             x31, y31, x31, y31, x31, y31);
    t = load_json(json);
    llm__tokenizer_view(t, &v);
    CHECK(v.n_merges == 1 && v.merge_left[0] == 0 && v.merge_right[0] == 1);
    llm_tokenizer_free(t);
}

#if !defined(_WIN32)
/* A tokenizer_config.json that is there but cannot be read (a symbolic link to itself:
   ELOOP) is an error naming it, not a missing config: loading on without it would drop its
   BOS, EOS and chat template without a word. In the folder DIR-unreadable-config. */
static void test_unreadable_config(const char *out)
{
    static const char json[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    char dir[1024], tok[1100], cfg[1100], err[512] = "";
    llm_tokenizer *t = NULL;
    FILE *f;
    snprintf(dir, sizeof dir, "%s-unreadable-config", out);
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    REQUIRE(mkdir(dir, 0777) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
    unlink(cfg);
    REQUIRE((f = fopen(tok, "wb")) != NULL && fputs(json, f) >= 0 && fclose(f) == 0, "cannot write %s", tok);
    REQUIRE(symlink("tokenizer_config.json", cfg) == 0, "symlink %s: %s", cfg, strerror(errno));
    CHECKF(llm_tokenizer_load_hf(dir, &t, err, sizeof err) != 0 && t == NULL && strstr(err, "tokenizer_config.json"),
           "a config that cannot be read: '%s'", err);
    llm_tokenizer_free(t);
    unlink(cfg);
    unlink(tok);
    rmdir(dir);
}
#endif

/* ---- known answers from the tokenizers package ---- */

/* Every case of OUT_DIR/NAME/cases.txt (lt_compare_cases); returns the number of mismatches. */
static int compare_cases(const char *dir, const char *name)
{
    char path[1024], err[512] = "";
    llm_tokenizer *t = NULL;
    int bad;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (llm_tokenizer_load_hf(path, &t, err, sizeof err) != 0) {
        CHECKF(0, "%s: %s", name, err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/%s/cases.txt", dir, name);
    bad = lt_compare_cases(t, path, name);
    llm_tokenizer_free(t);
    return bad;
}

/* Every folder that OUT_DIR/index.txt names; returns their number. */
static int compare_index(const char *out)
{
    char name[256], path[1024];
    int folders = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/index.txt", out);
    f = fopen(path, "r");
    CHECKF(f != NULL, "%s: %s", path, strerror(errno));
    while (f && fscanf(f, "%255s", name) == 1) {
        compare_cases(out, name);
        folders++;
    }
    if (f) fclose(f);
    return folders;
}

static void test_known_answers(const char *script, const char *python, const char *out, const char *gpt2)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s' '%s' '%s' '%s'", out, python, script, out, gpt2);
    fflush(stdout);
    REQUIRE(system(cmd) == 0, "%s failed", script);
    CHECK(compare_index(out) == 11);
}

int main(int argc, char **argv)
{
    const char *python;
    if (argc == 3 && strcmp(argv[1], "--compare") == 0) {
        compare_index(argv[2]);
        return lt_finish("test_llm_tokenizer_hf --compare");
    }
    if (argc < 6) {
        fprintf(stderr, "usage: test_llm_tokenizer_hf SCRIPT PYLIB OUT_DIR GPT2_DIR PYTHON...\n");
        return 2;
    }
    test_refusals();
    test_accessors();
    test_hand_cases();
#if !defined(_WIN32)
    test_unreadable_config(argv[3]);
#endif
    python = lt_python_importing("tokenizers", argv[2], argv + 5, argc - 5);
    if (!python) {
        if (lt_failures) return lt_finish("test_llm_tokenizer_hf");
        printf("SKIP: no Python with the tokenizers package (tests/run.sh installs it into %s)\n", argv[2]);
        return 77;
    }
    test_known_answers(argv[1], python, argv[3], argv[4]);
    return lt_finish("test_llm_tokenizer_hf");
}
