/* bench_text.h - the default text the tokenizer benchmarks encode: an English, code and
   Unicode paragraph repeated to 1 MiB (bench_json.c, bench_pretok_pcre2.c). */
#ifndef GRZO_BENCH_TEXT_H
#define GRZO_BENCH_TEXT_H

#include <stdlib.h>
#include <string.h>

static const char BENCH_PARAGRAPH[] =
    "Once upon a time, in a small village by the sea, there lived a girl named Lily. She loved to read "
    "books about the stars; every night she'd count them: 1, 2, 3... up to 1000! \"They're so far away,\" "
    "she said. The year was 2024 and 12,345 people lived there.\n"
    "def main():\n    for i in range(10):\n        print(f\"value {i} = {i * 2}\")\n    return 0\n\n"
    "Caf\xc3\xa9 au lait, na\xc3\xafve r\xc3\xa9sum\xc3\xa9, Stra\xc3\x9f" "e, \xd1\x80\xd1\x83\xd1\x81\xd1\x81\xd0\xba\xd0\xb8\xd0\xb9 "
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\n";

/* The paragraph repeated to about 1 MiB (malloc'd, NUL-terminated), or NULL. */
static char *bench_default_text(size_t *n)
{
    size_t len = strlen(BENCH_PARAGRAPH), reps = ((size_t)1 << 20) / len, i;
    char *p = (char *)malloc(reps * len + 1);
    if (!p) return NULL;
    for (i = 0; i < reps; i++) memcpy(p + i * len, BENCH_PARAGRAPH, len);
    p[reps * len] = '\0';
    *n = reps * len;
    return p;
}

#endif
