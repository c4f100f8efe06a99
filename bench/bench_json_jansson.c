/* bench_json_jansson.c - bench_json's calls into jansson, in their own translation unit:
   jansson.h and examples/common/json.h both name their types JSON_NULL, JSON_ARRAY, ... */
#include <jansson.h>
#include <stddef.h>

/* Parse text[0..n) with jansson; 0 if accepted. mode 0: default flags; 1: JSON_DECODE_ANY
   (json.h takes any value at the top, so that a scalar is judged on its syntax, not its
   place); 2: also JSON_REJECT_DUPLICATES (json.h always rejects duplicate keys). */
int bench_jansson_parse(const char *text, size_t n, int mode)
{
    json_error_t e;
    size_t flags = mode >= 1 ? JSON_DECODE_ANY : 0;
    json_t *v;
    if (mode >= 2) flags |= JSON_REJECT_DUPLICATES;
    v = json_loadb(text, n, flags, &e);
    if (!v) return 1;
    json_decref(v);
    return 0;
}
