/* fuzz_weights.h - what the LLM fuzz targets (fuzz_loaders.c, fuzz_hf.c) check on a model
   that loaded: a sane config, and every weight array touched at both ends (so that a short
   arena shows under AddressSanitizer). A violated invariant calls abort(). */
#ifndef GRZO_FUZZ_WEIGHTS_H
#define GRZO_FUZZ_WEIGHTS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm.h"

#ifndef FUZZ_UNUSED   /* fuzz_driver.h defines it, but not in libFuzzer builds */
#if defined(__GNUC__) || defined(__clang__)
#define FUZZ_UNUSED __attribute__((unused))
#else
#define FUZZ_UNUSED
#endif
#endif

FUZZ_UNUSED static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz: invariant violated: %s\n", what);
        abort();
    }
}

static volatile float sink;

FUZZ_UNUSED static void touch(const float *p, uint64_t n)
{
    require(p != NULL, "weight pointer is NULL");
    sink += p[0] + p[n - 1];
}

FUZZ_UNUSED static void exercise_weights(const llm_config *c, const llm_weights *w)
{
    uint64_t d = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, h = (uint64_t)c->hidden_dim;
    int32_t l;
    require(c->dim > 0 && c->hidden_dim > 0 && c->n_layers > 0 && c->n_heads > 0 && c->n_kv_heads > 0 &&
                c->head_dim > 0 && c->vocab_size > 0 && c->max_seq_len > 0 && c->n_heads % c->n_kv_heads == 0,
            "config out of range");
    touch(w->tok_emb, (uint64_t)c->vocab_size * d);
    touch(w->output, (uint64_t)c->vocab_size * d);
    touch(w->final_norm, d);
    require((w->output == w->tok_emb) == (c->tied_output != 0), "tied_output disagrees with the pointers");
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &w->layers[l];
        touch(L->attn_norm, d), touch(L->wq, q * d), touch(L->wk, kv * d), touch(L->wv, kv * d), touch(L->wo, d * q);
        touch(L->ffn_norm, d), touch(L->w1, h * d), touch(L->w2, d * h), touch(L->w3, h * d);
    }
}

#endif /* GRZO_FUZZ_WEIGHTS_H */
