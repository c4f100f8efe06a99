/* text.h - small text helpers shared by the examples' readers (json.c, tasks.c, qa_score.c):
   a growable string whose appends never fail loudly (a sticky oom flag is checked once at the
   end, which keeps template code a plain sequence of appends), and the strict UTF-8 codec. */
#ifndef GRZO_TEXT_H
#define GRZO_TEXT_H

#include <stddef.h>
#include <stdint.h>

typedef struct sbuf {
    char *p;          /* NUL-terminated once anything was appended */
    size_t len, cap;
    int oom;          /* an append failed: the content is incomplete */
} sbuf;

void sb_put(sbuf *b, const char *s, size_t n);
void sb_putc(sbuf *b, char c);
void sb_puts(sbuf *b, const char *s);
void sb_reset(sbuf *b);   /* empty, capacity kept */
void sb_free(sbuf *b);

/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4), or 0 if it is not one:
   overlong forms, UTF-16 surrogates and code points above U+10FFFF are rejected. The code
   point goes to *cp_out when it is not NULL. */
size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp_out);
/* Appends code point cp (at most U+10FFFF) as UTF-8. */
void utf8_put(sbuf *b, uint32_t cp);

#endif
