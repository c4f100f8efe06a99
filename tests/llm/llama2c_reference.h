/* llama2c_reference.h - llama2.c's greedy text from stories260K (test_all.py: `run
   stories260K.bin -z tok512.bin -t 0.0 -n 200`), shared by the CPU and GPU generation tests. */
#ifndef LLAMA2C_REFERENCE_H
#define LLAMA2C_REFERENCE_H

static const char llama2c_expected[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a "
    "big, red ball. She wanted to play with it, but it was too high.\nLily's mom said, \"Lily, let's go to the park.\" "
    "Lily was sad and didn't know what to do. She said, \"I want to play with your ball, but I can't find it.\"\nLily "
    "was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what to do.\"\nLily didn't want to "
    "help her mom, so she";

#include <ctype.h>
#include <string.h>

#include "llm.h"

typedef struct text { char buf[8192]; size_t n; const llm_tokenizer *tok; } text;

/* append like llama2.c's safe_printf: lone unprintable bytes are dropped */
static int collect(int32_t prev, int32_t token, void *user) {
    text *t = (text *)user;
    const char *piece = llm_token_text(t->tok, prev, token);
    size_t k = strlen(piece);
    if (k == 1 && !isprint((unsigned char)piece[0]) && !isspace((unsigned char)piece[0])) return 0;
    if (t->n + k >= sizeof t->buf) return 1;
    memcpy(t->buf + t->n, piece, k);
    t->n += k;
    t->buf[t->n] = '\0';
    return 0;
}

#endif /* LLAMA2C_REFERENCE_H */
