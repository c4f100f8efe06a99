/* tokenizer_hf.c - tokenizer.json of a Hugging Face folder (llm_tokenizer_load_hf, llm.h).

   PLACEHOLDER on the hf-load branch: the tokenizer.json reader is written on its own branch
   (issue 14 item 1, the tokenizer half) and its tokenizer_hf.c replaces this file when the
   branches are merged. Until then a folder loads without a tokenizer only (llm_load with
   tok == NULL); asking for its tokenizer is a clear error, never a wrong tokenizer. */
#include "llm.h"
#include "llm_internal.h"

int llm_tokenizer_load_hf(const char *dir, llm_tokenizer **out, char *err, size_t errlen)
{
    if (out) *out = NULL;
    if (!dir || !out) return llm__errf(err, errlen, "llm_tokenizer_load_hf: missing argument");
    return llm__errf(err, errlen, "tokenizer.json: not supported yet");
}
