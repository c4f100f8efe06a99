/* The examples' text helpers (examples/common/text.h):
     - utf8_seq against the well-formed byte sequences of the Unicode Standard's Table 3-7,
       written out here as ranges (a second reading, not a copy of the decoder): every 1-,
       2- and 3-byte input, every first two bytes of a 4-byte one, and each cut short;
     - utf8_put round trips every scalar value through utf8_seq, at the right length, and the
       boundary code points have their known bytes;
     - sbuf: appends, reset, free, the sticky oom flag, a capacity that doubles (an append of
       one character must not reallocate each time), and lengths that would overflow size_t
       set oom without touching memory. */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* Table 3-7: each row is a first-byte range and the ranges its following bytes may take. */
typedef struct row { unsigned char lo[4], hi[4]; int len; } row;
static const row TABLE[] = {
    {{0x00}, {0x7F}, 1},
    {{0xC2, 0x80}, {0xDF, 0xBF}, 2},
    {{0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}, 3},
    {{0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}, 3},
    {{0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}, 3},
    {{0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}, 3},
    {{0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}, 4},
    {{0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}, 4},
    {{0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}, 4},
};

/* The length of the well-formed sequence at s[0..n) by the table, or 0. */
static size_t table_len(const unsigned char *s, size_t n) {
    size_t r;
    int i;
    if (n == 0) return 0;
    for (r = 0; r < sizeof TABLE / sizeof *TABLE; r++) {
        const row *t = &TABLE[r];
        if (s[0] < t->lo[0] || s[0] > t->hi[0]) continue;
        if (n < (size_t)t->len) return 0;
        for (i = 1; i < t->len; i++)
            if (s[i] < t->lo[i] || s[i] > t->hi[i]) return 0;
        return (size_t)t->len;
    }
    return 0;
}

/* utf8_seq on s[0..n) agrees with the table, with and without cp_out; counts a disagreement
   once per input (a broken decoder would otherwise print millions of lines). */
static int agrees(const unsigned char *s, size_t n) {
    uint32_t cp = 0xFFFFFFFFu;
    size_t want = table_len(s, n);
    return utf8_seq(s, n, &cp) == want && utf8_seq(s, n, NULL) == want && (want == 0 || cp <= 0x10FFFF);
}

static void seq_table(void) {
    static const unsigned char tails[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xF5, 0xFF};
    unsigned char s[4];
    unsigned a, b, c, d;
    long bad = 0;
    CHECK(utf8_seq((const unsigned char *)"A", 0, NULL) == 0, "n = 0");
    for (a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        bad += !agrees(s, 1);
        for (b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            bad += !agrees(s, 2);
            for (c = 0; c < 256; c++) {
                s[2] = (unsigned char)c;
                bad += !agrees(s, 3);
            }
            /* 4 bytes: every first two, the last two from the edges of the ranges */
            for (c = 0; c < sizeof tails; c++)
                for (d = 0; d < sizeof tails; d++) {
                    s[2] = tails[c];
                    s[3] = tails[d];
                    bad += !agrees(s, 4);
                }
        }
    }
    CHECK(bad == 0, "%ld inputs disagree with Table 3-7", bad);
}

/* Known encodings at every length boundary: utf8_put writes them, utf8_seq reads them back
   whole and refuses them cut short. */
static void known(void) {
    static const struct { uint32_t cp; const char *bytes; } K[] = {
        {0x0, ""}, {0x41, "A"}, {0x7F, "\x7F"}, {0x80, "\xC2\x80"}, {0xE9, "\xC3\xA9"}, {0x7FF, "\xDF\xBF"},
        {0x800, "\xE0\xA0\x80"}, {0x20AC, "\xE2\x82\xAC"}, {0xD7FF, "\xED\x9F\xBF"}, {0xE000, "\xEE\x80\x80"},
        {0xFFFF, "\xEF\xBF\xBF"}, {0x10000, "\xF0\x90\x80\x80"}, {0x1F600, "\xF0\x9F\x98\x80"},
        {0x10FFFF, "\xF4\x8F\xBF\xBF"}};
    size_t k;
    for (k = 0; k < sizeof K / sizeof *K; k++) {
        size_t len = K[k].cp ? strlen(K[k].bytes) : 1;
        sbuf b = {0};
        uint32_t cp = 0xFFFFFFFFu;
        utf8_put(&b, K[k].cp);
        CHECK(!b.oom && b.len == len && memcmp(b.p, K[k].bytes, len) == 0, "utf8_put U+%04X", (unsigned)K[k].cp);
        CHECK(utf8_seq((const unsigned char *)b.p, len, &cp) == len && cp == K[k].cp, "utf8_seq U+%04X", (unsigned)K[k].cp);
        CHECK(utf8_seq((const unsigned char *)b.p, len - 1, &cp) == 0, "U+%04X cut short", (unsigned)K[k].cp);
        sb_free(&b);
    }
}

/* every scalar value (no surrogates) round trips at the length its range gives */
static void round_trip(void) {
    sbuf b = {0};
    uint32_t cp;
    long bad = 0;
    for (cp = 0; cp <= 0x10FFFF; cp++) {
        uint32_t back = 0xFFFFFFFFu;
        size_t len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        sb_reset(&b);
        utf8_put(&b, cp);
        bad += b.len != len || utf8_seq((const unsigned char *)b.p, b.len, &back) != len || back != cp;
    }
    CHECK(!b.oom && bad == 0, "%ld code points do not round trip", bad);
    sb_free(&b);
}

static void builder(void) {
    sbuf b = {0};
    size_t i, grown = 0, cap = 0;
    sb_put(&b, "", 0);
    CHECK(b.p && b.p[0] == 0 && b.len == 0 && !b.oom, "an empty append makes an empty string");
    sb_puts(&b, "ab");
    sb_putc(&b, 'c');
    sb_put(&b, "defXX", 3);
    CHECK(b.len == 6 && strcmp(b.p, "abcdef") == 0 && b.cap >= 7, "appends: '%s' (%zu)", b.p ? b.p : "", b.len);
    cap = b.cap;
    sb_reset(&b);
    CHECK(b.len == 0 && b.p[0] == 0 && b.cap == cap, "reset keeps the capacity");
    /* one character at a time: the capacity doubles (a few reallocations, not one each) */
    for (i = 0; i < 10000; i++) {
        sb_putc(&b, (char)('a' + i % 26));
        grown += b.cap != cap;
        cap = b.cap;
    }
    CHECK(b.len == 10000 && strlen(b.p) == 10000 && b.p[9999] == 'a' + 9999 % 26, "10000 appends");
    CHECK(grown <= 12, "%zu reallocations for 10000 appends", grown);
    b.oom = 1;
    sb_puts(&b, "more");
    CHECK(b.len == 10000 && b.p[10000] == 0, "nothing is appended after oom");
    sb_free(&b);
    CHECK(!b.p && !b.len && !b.cap && !b.oom, "free clears everything, oom too");
}

/* overflow() asks realloc for SIZE_MAX bytes, which must fail with NULL: AddressSanitizer
   (CI's build-asan) would stop the program instead unless told so. Its ASAN_OPTIONS from the
   environment still apply on top. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* Sizes that overflow size_t (len + n + 1) set oom before any copy: s is never read. A size
   one below that limit asks realloc for SIZE_MAX bytes, which fails, through the capacity
   loop's cap at half of SIZE_MAX. */
static void overflow(void) {
    sbuf b = {0};
    static const char one = 'x';
    sb_puts(&b, "0123456789");
    sb_put(&b, &one, SIZE_MAX - 10);
    CHECK(b.oom && b.len == 10 && strcmp(b.p, "0123456789") == 0, "len + n + 1 past SIZE_MAX");
    b.oom = 0;
    sb_put(&b, &one, SIZE_MAX - 11);
    CHECK(b.oom && b.len == 10 && strcmp(b.p, "0123456789") == 0, "len + n + 1 = SIZE_MAX");
    b.oom = 0;
    sb_put(&b, &one, 1);
    CHECK(!b.oom && b.len == 11 && strcmp(b.p, "0123456789x") == 0, "a refused append leaves a usable buffer");
    sb_free(&b);
}

int main(void) {
    seq_table();
    known();
    round_trip();
    builder();
    overflow();
    printf("%s (%d checks, %d failed)\n", fails ? "FAIL" : "ok", checks, fails);
    return fails ? 1 : 0;
}
