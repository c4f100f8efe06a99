/* fuzz_loaders.c - fuzz target for the model and tokenizer parsers of examples/llm.

   LLVMFuzzerTestOneInput feeds the bytes to every parser that reads untrusted files:
   llm_load_memory (GGUF by magic, else llama2.c checkpoint), the GGUF tokenizer loader, the
   llama2.c tokenizer.bin loader, and the Hugging Face tokenizer.json loader (the bytes up to
   the first NUL are tokenizer.json, those after it tokenizer_config.json). Whatever loads is then used: every weight array is
   touched at both ends (so a short arena shows under AddressSanitizer), the tokenizer
   encodes a few fixed texts and the input's own tail, every id must be in range, and every
   id decodes to a string. A violated invariant calls abort().

   Two builds:
     libFuzzer:  tests/fuzz/fuzz.sh loaders [SECONDS]   (clang -fsanitize=fuzzer,address,undefined
                 -DFUZZ_WITH_LIBFUZZER; libFuzzer provides main)
     plain:      fuzz_loaders [--runs N] [--seed S] [--max-len BYTES] CORPUS_DIR_OR_FILE...
                 replays every file, then runs N random mutations of them
                 (tests/fuzz/fuzz_driver.h); what meson's 'fuzz' suite runs, with any compiler.
     corpus:     fuzz_loaders --write-corpus DIR   writes the seed files (small valid models
                 and tokenizers) that tests/llm/corpus holds. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"
#include "fuzz_weights.h"
#include "gguf_write.h"
#include "llm.h"
#include "llm_internal.h"
#include "toy_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void encode_and_decode(const llm_tokenizer *t, const char *text)
{
    int32_t ids[256], n = 0, i, vocab = llm_tokenizer_vocab(t), prev = -1;
    char err[256];
    if (llm_tokenize(t, text, 1, ids, 256, &n, err, sizeof err) != 0) {
        require(err[0] != '\0', "tokenize failed without a message");
        return;
    }
    require(n >= 0, "negative token count");
    for (i = 0; i < n && i < 256; i++) {
        require(ids[i] >= 0 && ids[i] < vocab, "token id out of range");
        sink += (float)strlen(llm_token_text(t, prev, ids[i]));
        prev = ids[i];
    }
}

static void exercise_tokenizer(const llm_tokenizer *t, const uint8_t *data, size_t size)
{
    static const char *const texts[] = {
        "Once upon a time", " hello  world\n\n\t!", "<s>a</s><|im_start|>user\n1234<|im_end|>",
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "\xff\xfe\x80 broken \xe2\x82", "I'm 3.14, you're 42",
        "\xe2\x96\x81 x'\xc5\xbf" "t \r\n\r\n  \n\"ab\tab  ", " ab ab\xe2\x96\x81" "ab",
    };
    char tail[65];
    size_t i, n = size < 64 ? size : 64;
    int32_t k;
    require(llm_tokenizer_vocab(t) > 0, "empty tokenizer");
    for (i = 0; i < sizeof texts / sizeof texts[0]; i++) encode_and_decode(t, texts[i]);
    for (i = 0; i < n; i++) tail[i] = data[size - n + i] ? (char)data[size - n + i] : ' ';
    tail[n] = '\0';
    encode_and_decode(t, tail);
    /* every piece decodes (a few ids: tokenizers can be large) */
    for (k = 0; k < llm_tokenizer_vocab(t) && k < 64; k++) sink += (float)strlen(llm_token_text(t, 0, k));
    sink += (float)strlen(llm_token_text(t, 0, llm_tokenizer_vocab(t)));
}

/* tokenizer.json up to the first NUL, tokenizer_config.json after it (if there is one). */
static int load_hf_split(const uint8_t *data, size_t size, llm_tokenizer **t, char *err, size_t errlen)
{
    const uint8_t *nul = size ? (const uint8_t *)memchr(data, 0, size) : NULL;
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *config = nul ? (const char *)nul + 1 : NULL;
    return llm_tokenizer_load_hf_memory((const char *)data, json_len, config, nul ? size - json_len - 1 : 0, t, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llm_config c;
    llm_weights w;
    llm_tokenizer *t = NULL;
    char err[512];

    err[0] = '\0';
    if (llm_load_memory(data, size, &c, &w, &t, err, sizeof err) == 0) {
        exercise_weights(&c, &w);
        if (t) exercise_tokenizer(t, data, size);
        llm_weights_free(&w);
        llm_tokenizer_free(t);
    } else {
        require(err[0] != '\0' && t == NULL && w.arena == NULL, "failed model load left no message or outputs");
    }
    t = NULL;
    if (llm_tokenizer_load_gguf_memory(data, size, &t, err, sizeof err) == 0) {
        exercise_tokenizer(t, data, size);
        llm_tokenizer_free(t);
    }
    t = NULL;
    if (llm_tokenizer_load_llama2c_memory(data, size, 0, &t, err, sizeof err) == 0) {
        exercise_tokenizer(t, data, size);
        llm_tokenizer_free(t);
    }
    t = NULL;
    if (load_hf_split(data, size, &t, err, sizeof err) == 0) {
        exercise_tokenizer(t, data, size);
        llm_tokenizer_free(t);
    } else {
        require(err[0] != '\0' && t == NULL, "failed tokenizer.json load left no message or a tokenizer");
    }
    return 0;
}

#ifndef FUZZ_WITH_LIBFUZZER

#include "hf_fixtures.h"

/* The tokenizer.json seeds (hf_fixtures.h): the config, where there is one, after a NUL. */
static int write_hf_corpus(const char *dir)
{
    size_t i;
    int rc = 0;
    for (i = 0; i < HF_N_FIXTURES; i++) {
        const hf_fixture *f = &HF_FIXTURES[i];
        size_t n = strlen(f->json), m = f->config ? strlen(f->config) : 0;
        char *seed = (char *)malloc(n + 1 + m);
        if (!seed) return 1;
        memcpy(seed, f->json, n);
        if (f->config) {
            seed[n] = '\0';
            memcpy(seed + n + 1, f->config, m);
        }
        rc |= fuzz_write_file(dir, f->name, seed, f->config ? n + 1 + m : n);
        free(seed);
    }
    return rc;
}

/* A GGUF as grzo-export writes it from a Hugging Face folder (gguf_write.h): the Llama-3
   tokenizer seed, llama3 rope scaling (rope_freqs.weight and its grzo.rope.llama3.* keys),
   head_dim != dim / heads, small deterministic weights. */
static int write_exported_gguf(const char *dir)
{
    char path[4096], err[256];
    llm_tokenizer *tok = NULL;
    llm_hf_tensor t[9 + 4];
    llm_config c;
    llm_weights w;
    uint64_t k;
    int i, n, rc = 1;
    if (llm_tokenizer_load_hf_memory(HF_LLAMA3_TOKENIZER, strlen(HF_LLAMA3_TOKENIZER), NULL, 0, &tok, err, sizeof err))
        return fprintf(stderr, "%s\n", err), 1;
    memset(&c, 0, sizeof c);
    c.dim = 32, c.hidden_dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 8;
    c.vocab_size = llm_tokenizer_vocab(tok), c.max_seq_len = 64, c.norm_eps = 1e-5f, c.rope_theta = 10000.0f;
    c.rope_scaling = LLM_ROPE_SCALING_LLAMA3, c.rope_factor = 8.0f, c.rope_low_freq_factor = 1.0f;
    c.rope_high_freq_factor = 4.0f, c.rope_original_max_pos = 16;
    if (llm__weights_alloc(&c, &w, err, sizeof err) == 0) {
        n = llm__hf_tensors(&c, &w, t);
        for (i = 0; i < n; i++)
            for (k = 0; k < t[i].rows * t[i].cols; k++) t[i].data[k] = (float)((k * 37 + (uint64_t)i) % 11) * 0.01f;
        snprintf(path, sizeof path, "%s/gguf_f32_bpe_llama3_exported.gguf", dir);
        rc = llm_gguf_write_model(&c, &w, tok, "seed", LLM_GGUF_F32, path, err, sizeof err);
        if (rc) fprintf(stderr, "%s\n", err);
        llm_weights_free(&w);
    }
    llm_tokenizer_free(tok);
    return rc;
}

/* The seed corpus: small valid files of every kind the loaders read. */
static int write_corpus(const char *dir)
{
    static const char *const spm_tokens[] = {"<unk>", "<s>", "</s>", HF_U2581, "a", "b", HF_U2581 "a", "ab", "<0x0A>", "<x>"};
    static const float spm_scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0, 0};
    static const int32_t spm_types[] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 4};
    static const char *const bpe_tokens[] = {"h", "e", "l", "o", HF_G_SP, "w", "1", "he", "ll", "llo", "hello", HF_G_SP "w",
                                             "<|im_start|>", "<|im_end|>"};
    static const int32_t bpe_types[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3};
    static const char *const bpe_merges[] = {"h e", "l l", "ll o", "he llo", HF_G_SP " w"};
    toy_model m;
    toy_opts o = toy_defaults();
    uint8_t *p;
    size_t n;
    int rc = 0;
    /* tiny shapes: one layer, widths of one quantization block */
    o.dim = 32, o.hidden = 32, o.layers = 1, o.heads = 2, o.kv_heads = 1, o.vocab = 16, o.ctx = 64;

    o.wtype = GW_F32, o.tok_model = "llama", o.n_tokens = 10, o.tokens = spm_tokens, o.scores = spm_scores;
    o.types = spm_types, o.bos = 1, o.eos = 2;
    toy_build(&o, &m), rc |= fuzz_write_file(dir, "gguf_f32_spm.gguf", m.file, m.size), toy_free(&m);

    o.wtype = TOY_MIXED, o.untied = 1, o.extra_kv = 1, o.alignment = 64;
    toy_build(&o, &m), rc |= fuzz_write_file(dir, "gguf_mixed_untied_spm.gguf", m.file, m.size), toy_free(&m);

    o.wtype = GW_Q4_1, o.untied = 0, o.extra_kv = 0, o.alignment = 0, o.key_length = 32;
    o.tok_model = "gpt2", o.tok_pre = "smollm", o.n_tokens = 14, o.tokens = bpe_tokens, o.scores = NULL;
    o.types = bpe_types, o.n_merges = 5, o.merges = bpe_merges, o.bos = 12, o.eos = 13, o.add_bos = 0;
    toy_build(&o, &m), rc |= fuzz_write_file(dir, "gguf_q4_1_bpe_smollm.gguf", m.file, m.size), toy_free(&m);

    o.wtype = GW_Q8_0, o.key_length = 0, o.tok_pre = "gpt2", o.norm_type = GW_F16;
    toy_build(&o, &m), rc |= fuzz_write_file(dir, "gguf_q8_0_bpe_gpt2.gguf", m.file, m.size), toy_free(&m);

    o.no_model = 1;
    toy_build(&o, &m), rc |= fuzz_write_file(dir, "gguf_vocab_only_bpe.gguf", m.file, m.size), toy_free(&m);

    p = toy_llama2c(8, 16, 1, 2, 1, 12, 8, 0, &n), rc |= fuzz_write_file(dir, "llama2c_tied.bin", p, n), free(p);
    p = toy_llama2c(8, 16, 2, 2, 2, 12, 4, 1, &n), rc |= fuzz_write_file(dir, "llama2c_untied.bin", p, n), free(p);
    {
        /* tokenizer.bin: max_token_length, then (score, length, bytes) per token */
        static const char *const toks[] = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", " ", "a", "b", " a", "ab", "\xc3\xa9"};
        gw_buf b = {0, 0, 0};
        int i;
        gw_u32(&b, 6);
        for (i = 0; i < 10; i++) {
            gw_f32(&b, -(float)i);
            gw_u32(&b, (uint32_t)strlen(toks[i]));
            gw_raw(&b, toks[i], strlen(toks[i]));
        }
        rc |= fuzz_write_file(dir, "tokenizer.bin", b.p, b.n);
        free(b.p);
    }
    rc |= write_hf_corpus(dir);
    rc |= write_exported_gguf(dir);
    return rc;
}

int main(int argc, char **argv)
{
    return fuzz_main(argc, argv, "fuzz_loaders", write_corpus);
}

#endif /* FUZZ_WITH_LIBFUZZER */
