/* test_llm_generate.c - greedy generation from stories260K reproduces llama2.c.

   usage: test_llm_generate DATA_DIR      (holding stories260K.bin and tok512.bin)

   llama2.c's own test (test_all.py) runs `run stories260K.bin -z tok512.bin -t 0.0 -n 200`
   and expects the text of llama2c_reference.h; this test runs the same decoding through llm_generate (the
   grzo forward, plain: outside any step) and compares all of it. Then one forward over the
   whole generated text, packed after another sequence with every position requested,
   must predict each next token again (argmax), so batched scoring agrees with decoding.
   Exit 0 pass, 1 fail, 77 skip (files missing). */
#include "llm_test_util.h"
#include "llama2c_reference.h"

static int32_t argmax(const float *x, int32_t n) {
    int32_t i, b = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* One packed batch: a 37-token distractor, then the generated text with all positions. */
static void check_teacher_forcing(grzo_ctx *ctx, llm_model *m, const int32_t *tokens, int32_t n) {
    int32_t other[37], pos[201], t, agree = 0, V = m->cfg.vocab_size;
    llm_seq seqs[2];
    llm_batch b;
    llm_state *st;
    llm_state_desc sd;
    float *logits = (float *)malloc((size_t)n * (size_t)V * sizeof(float));
    uint64_t rng = 3;
    if (!logits) exit(1);
    for (t = 0; t < 37; t++) other[t] = tu_token(&rng, V);
    for (t = 0; t < n; t++) pos[t] = t;
    memset(seqs, 0, sizeof seqs);
    seqs[0].tokens = other;
    seqs[0].n_tokens = 37;
    seqs[1].tokens = tokens;
    seqs[1].n_tokens = n - 1;       /* the last token was never fed back */
    seqs[1].out_pos = pos;
    seqs[1].n_out = n - 1;
    b.seqs = seqs;
    b.n_seqs = 2;
    b.n_segments = 0;
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 37 + n;
    sd.max_seqs = 2;
    sd.max_outputs = n;
    sd.max_seq_len = n;
    TU_OK(m, llm_state_create(ctx, m, &sd, &st));
    TU_OK(m, llm_forward(ctx, m, st, &b, logits));
    for (t = 0; t < n - 1; t++) agree += argmax(logits + (size_t)t * V, V) == tokens[t + 1];
    printf("one batched forward predicts %d of the %d generated tokens\n", agree, n - 1);
    TU_CHECK(agree == n - 1, "batched teacher forcing disagrees with decoding at %d positions", n - 1 - agree);
    llm_state_free(st);
    free(logits);
}

int main(int argc, char **argv) {
    char model_path[1024], tok_path[1024], err[512];
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_desc d;
    llm_model m;
    llm_state *st;
    llm_state_desc sd;
    llm_generate_desc g;
    int32_t tokens[201], n_total = 0;
    static text out;
    size_t same = 0;
    FILE *f;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
        return 1;
    }
    snprintf(model_path, sizeof model_path, "%s/stories260K.bin", argv[1]);
    snprintf(tok_path, sizeof tok_path, "%s/tok512.bin", argv[1]);
    if (!(f = fopen(model_path, "rb"))) {
        printf("SKIP: %s not found\n", model_path);
        return TEST_SKIP;
    }
    fclose(f);
    memset(&w, 0, sizeof w);
    if (llm_load(model_path, &cfg, &w, NULL, err, sizeof err) != 0 ||
        llm_tokenizer_load_llama2c(tok_path, cfg.vocab_size, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    printf("stories260K: dim %d hidden %d layers %d heads %d/%d vocab %d seq %d tied %d\n", cfg.dim, cfg.hidden_dim,
           cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.vocab_size, cfg.max_seq_len, cfg.tied_output);
    if (grzo_backend_cpu_create(&(grzo_cpu_desc){0}, &be) != GRZO_OK) return 1;
    memset(&d, 0, sizeof d);
    d.backend = &be;
    if (grzo_create(&d, &ctx) != GRZO_OK) return 1;
    TU_OK(&m, llm_model_register(ctx, &m, &cfg, &w));
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 200;
    sd.max_seqs = 1;
    sd.max_outputs = 1;
    sd.max_seq_len = 200;
    TU_OK(&m, llm_state_create(ctx, &m, &sd, &st));
    memset(&g, 0, sizeof g);
    g.steps = 200;
    g.temperature = 0.0f;
    g.stop[0] = llm_tokenizer_bos(tok);
    g.stop[1] = -1;                 /* llama2.c stops at BOS only */
    g.on_token = collect;
    g.user_data = &out;
    out.tok = tok;
    tokens[0] = llm_tokenizer_bos(tok);
    TU_OK(&m, llm_generate(ctx, &m, st, tokens, 1, &g, &n_total));
    while (same < out.n && same < sizeof llama2c_expected - 1 && out.buf[same] == llama2c_expected[same]) same++;
    printf("generated %d tokens:\n%s\n", n_total - 1, out.buf);
    printf("matches llama2.c's reference for %zu of its %zu bytes\n", same, sizeof llama2c_expected - 1);
    TU_CHECK(same >= 91, "the first sentence pair differs from llama2.c");
    TU_CHECK(out.n == sizeof llama2c_expected - 1 && same == out.n, "the text differs from llama2.c's after byte %zu", same);
    llm_state_free(st);
    check_teacher_forcing(ctx, &m, tokens, n_total);
    llm_model_free(&m);
    grzo_destroy(ctx);
    grzo_backend_destroy(&be);
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
    return tu_failures ? 1 : 0;
}
