/* text.c - the string builder and the UTF-8 codec shared by the examples' readers. See text.h. */
#include "text.h"

#include <stdlib.h>
#include <string.h>

void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (n > SIZE_MAX - b->len - 1) {
        b->oom = 1;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        char *p;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                cap = b->len + n + 1;
                break;
            }
            cap *= 2;
        }
        p = (char *)realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_putc(sbuf *b, char c) { sb_put(b, &c, 1); }
void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
void sb_reset(sbuf *b) { b->len = 0; if (b->p) b->p[0] = '\0'; }

void sb_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4), or 0 if it is not one:
   overlong forms, UTF-16 surrogates and code points above U+10FFFF are rejected. */
size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp_out)
{
    uint32_t cp;
    size_t len, i;
    if (n == 0) return 0;
    if (s[0] < 0x80) {
        if (cp_out) *cp_out = s[0];
        return 1;
    }
    if (s[0] >= 0xC2 && s[0] <= 0xDF) { len = 2; cp = s[0] & 0x1Fu; }
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) { len = 3; cp = s[0] & 0x0Fu; }
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) { len = 4; cp = s[0] & 0x07u; }
    else return 0;
    if (n < len) return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp > 0x10FFFF) return 0;
    if (cp_out) *cp_out = cp;
    return len;
}

void utf8_put(sbuf *b, uint32_t cp)
{
    char t[4];
    if (cp < 0x80) {
        t[0] = (char)cp;
        sb_put(b, t, 1);
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        sb_put(b, t, 2);
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        sb_put(b, t, 3);
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        sb_put(b, t, 4);
    }
}
