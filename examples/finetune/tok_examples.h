/* tok_examples.h - grzo-finetune's examples as token ids: each candidate's context and
   continuation tokenized together (MeZO's encode_prompt), left-truncated to the model's
   length; a generation task's prompt besides. */
#ifndef GRZO_FINETUNE_TOK_EXAMPLES_H
#define GRZO_FINETUNE_TOK_EXAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"
#include "tasks.h"

typedef struct tok_example {
    int n_cand, gold;
    int32_t *tokens[TASKS_MAX_CANDIDATES];   /* context + continuation, BOS first if the model wants it */
    int32_t n_tokens[TASKS_MAX_CANDIDATES];
    int32_t n_context[TASKS_MAX_CANDIDATES]; /* tokens before the scored continuation */
    int32_t *prompt, n_prompt;               /* generation tasks: the context's tokens to decode from,
                                                left-truncated to leave room for the answer */
} tok_example;

typedef struct tok_split {
    tok_example *ex;
    size_t n;
    int32_t max_total, max_len;
    int32_t max_generate;        /* generation tasks: the longest prompt + TASKS_MAX_NEW_TOKENS - 1 */
    const tasks_split *src;      /* the examples (gold answers) behind ex */
} tok_split;

int tokenize_split(const llm_tokenizer *t, int bos, int32_t max_len, const tasks_split *src, tok_split *dst,
                   char *err, size_t errlen);
void free_tok_split(tok_split *s);

#endif
