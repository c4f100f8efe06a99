/* test_llm_smollm.c - the real SmolLM2-135M-Instruct GGUF (Q4_1), when it is available.

   The file is not in the repository: set GRZO_SMOLLM_GGUF to its path; otherwise this test
   skips (exit 77). It checks the config the metadata gives, that every weight is finite,
   the tokenizer settings (byte-level BPE, "smollm" pre-tokenizer, <|im_start|> = 1,
   <|im_end|> = 2), and known encodings. The expected ids are those of the Hugging Face
   tokenizer for this model as published in other projects' tokenizer self-checks; they
   also agree with the byte-level BPE algorithm applied by hand to this vocabulary
   ("The" = 504, " capital" = 3575, " of" = 282, " France" = 4649, " is" = 314, ...). */
#include <math.h>

#include "llm_test.h"

static int all_finite(const float *x, uint64_t n)
{
    uint64_t i;
    for (i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

int main(void)
{
    const char *path = getenv("GRZO_SMOLLM_GGUF");
    llm_config c;
    llm_weights w;
    llm_tokenizer *t = NULL;
    char err[512] = "";
    FILE *f;
    int32_t l;

    if (!path || !*path || !(f = fopen(path, "rb"))) {
        printf("test_llm_smollm: skipped (set GRZO_SMOLLM_GGUF to SmolLM2-135M-Instruct.Q4_1.gguf)\n");
        return 77;
    }
    fclose(f);
    REQUIRE(llm_load(path, &c, &w, &t, err, sizeof err) == 0, "%s", err);
    CHECKF(c.dim == 576 && c.hidden_dim == 1536 && c.n_layers == 30 && c.n_heads == 9 && c.n_kv_heads == 3 &&
               c.head_dim == 64 && c.vocab_size == 49152 && c.max_seq_len == 8192 && c.tied_output == 1,
           "config %d %d %d %d %d %d %d %d %d", (int)c.dim, (int)c.hidden_dim, (int)c.n_layers, (int)c.n_heads,
           (int)c.n_kv_heads, (int)c.head_dim, (int)c.vocab_size, (int)c.max_seq_len, (int)c.tied_output);
    CHECK(c.norm_eps == 1e-5f && c.rope_theta == 100000.0f);
    CHECK(all_finite(w.tok_emb, (uint64_t)c.vocab_size * (uint64_t)c.dim));
    CHECK(all_finite(w.final_norm, (uint64_t)c.dim));
    for (l = 0; l < c.n_layers; l++) {
        const llm_layer *L = &w.layers[l];
        uint64_t d = (uint64_t)c.dim, kv = (uint64_t)c.n_kv_heads * (uint64_t)c.head_dim, h = (uint64_t)c.hidden_dim;
        CHECKF(all_finite(L->attn_norm, d) && all_finite(L->wq, d * d) && all_finite(L->wk, kv * d) &&
                   all_finite(L->wv, kv * d) && all_finite(L->wo, d * d) && all_finite(L->ffn_norm, d) &&
                   all_finite(L->w1, h * d) && all_finite(L->w2, d * h) && all_finite(L->w3, h * d),
               "layer %d has a non-finite weight", (int)l);
    }
    llm_weights_free(&w);

    REQUIRE(t != NULL, "no tokenizer");
    CHECK(strcmp(llm_tokenizer_model(t), "gpt2") == 0 && strcmp(llm_tokenizer_pre(t), "smollm") == 0);
    /* GGUF tokenizer.chat_template, through the accessor tokenizer_config.json fills too */
    CHECK(strstr(llm_tokenizer_chat_template(t), "<|im_start|>") != NULL);
    CHECK(llm_tokenizer_vocab(t) == 49152 && llm_tokenizer_bos(t) == 1 && llm_tokenizer_eos(t) == 2);
    CHECK(llm_tokenizer_wants_bos(t) == 0);
    CHECK(llm_token_id(t, "<|im_start|>") == 1 && llm_token_id(t, "<|im_end|>") == 2);
    CHECK_ENCODES(t, "The capital of France is", 0, 504, 3575, 282, 4649, 314);
    CHECK_ENCODES(t, "Hello, we can use", 0, 19556, 28, 392, 416, 722);
    CHECK_ENCODES(t, "Hello world! 123", 0, 19556, 905, 17, 216, 33, 34, 35);
    CHECK_ENCODES(t, "Caf\xc3\xa9 d\xc3\xa9j\xc3\xa0 vu.", 0, 51, 1939, 2756, 32564, 90, 16739, 386, 101, 30);
    CHECK_ENCODES(t, "  multiple   spaces", 0, 216, 2701, 256, 5600);
    CHECK_ENCODES(t, "\n", 0, 198);
    CHECK_ENCODES(t, "<|im_start|>user\nHi<|im_end|>", 0, 1, 4093, 198, 26843, 2);
    CHECK(lt_round_trips(t, "Hello, world! The capital of France is", 0));
    CHECK(lt_round_trips(t, "<|im_start|>system\nYou are helpful.<|im_end|>\n\xe6\x97\xa5\xe6\x9c\xac 3.14159", 0));
    llm_tokenizer_free(t);
    return lt_finish("test_llm_smollm");
}
