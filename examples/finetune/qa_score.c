/* qa_score.c - see qa_score.h. Sections: Python's text semantics (UTF-8, whitespace,
   lower, word characters, float parsing and printing), code-point strings, SQuAD, DROP. */
#include "qa_score.h"
#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================================
   Python's text semantics
   ====================================================================================== */

/* The bytes at s[0..n) that one U+FFFD replaces when s does not start well-formed UTF-8:
   the maximal subpart of a sequence (a valid lead byte and the continuation bytes that
   can follow it), else one byte; Python's decoder does the same. */
static size_t ill_formed_run(const unsigned char *s, size_t n)
{
    size_t need, i = 1;
    unsigned char lo = 0x80, hi = 0xBF;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) need = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) { need = 3; lo = s[0] == 0xE0 ? 0xA0 : 0x80; hi = s[0] == 0xED ? 0x9F : 0xBF; }
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) { need = 4; lo = s[0] == 0xF0 ? 0x90 : 0x80; hi = s[0] == 0xF4 ? 0x8F : 0xBF; }
    else return 1;
    if (i >= n || s[i] < lo || s[i] > hi) return 1;
    for (i = 2; i < need && i < n && (s[i] & 0xC0) == 0x80; i++) {}
    return i;
}

char *qa_utf8_repair(const char *s, size_t n)
{
    char *out = n > ((size_t)-1) / 3 - 1 ? NULL : (char *)malloc(3 * n + 1), *p = out;
    size_t i = 0;
    if (!out) return NULL;
    while (i < n) {
        size_t l = utf8_seq((const unsigned char *)s + i, n - i, NULL);
        if (l && s[i] != '\0') {
            memcpy(p, s + i, l);
            p += l;
            i += l;
        } else {
            memcpy(p, "\xEF\xBF\xBD", 3);   /* U+FFFD */
            p += 3;
            i += s[i] ? ill_formed_run((const unsigned char *)s + i, n - i) : 1;
        }
    }
    *p = '\0';
    return out;
}

int qa_py_isspace(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

/* str.lower() of Latin Extended-B's capitals, whose lower cases are scattered (the pairs
   CPython's str.lower() gives, sorted) */
static const uint32_t LOWER_LATIN_B[][2] = {
    {0x181, 0x253}, {0x182, 0x183}, {0x184, 0x185}, {0x186, 0x254}, {0x187, 0x188}, {0x189, 0x256}, {0x18A, 0x257},
    {0x18B, 0x18C}, {0x18E, 0x1DD}, {0x18F, 0x259}, {0x190, 0x25B}, {0x191, 0x192}, {0x193, 0x260}, {0x194, 0x263},
    {0x196, 0x269}, {0x197, 0x268}, {0x198, 0x199}, {0x19C, 0x26F}, {0x19D, 0x272}, {0x19F, 0x275}, {0x1A0, 0x1A1},
    {0x1A2, 0x1A3}, {0x1A4, 0x1A5}, {0x1A6, 0x280}, {0x1A7, 0x1A8}, {0x1A9, 0x283}, {0x1AC, 0x1AD}, {0x1AE, 0x288},
    {0x1AF, 0x1B0}, {0x1B1, 0x28A}, {0x1B2, 0x28B}, {0x1B3, 0x1B4}, {0x1B5, 0x1B6}, {0x1B7, 0x292}, {0x1B8, 0x1B9},
    {0x1BC, 0x1BD}, {0x1C4, 0x1C6}, {0x1C5, 0x1C6}, {0x1C7, 0x1C9}, {0x1C8, 0x1C9}, {0x1CA, 0x1CC}, {0x1CB, 0x1CC},
    {0x1CD, 0x1CE}, {0x1CF, 0x1D0}, {0x1D1, 0x1D2}, {0x1D3, 0x1D4}, {0x1D5, 0x1D6}, {0x1D7, 0x1D8}, {0x1D9, 0x1DA},
    {0x1DB, 0x1DC}, {0x1DE, 0x1DF}, {0x1E0, 0x1E1}, {0x1E2, 0x1E3}, {0x1E4, 0x1E5}, {0x1E6, 0x1E7}, {0x1E8, 0x1E9},
    {0x1EA, 0x1EB}, {0x1EC, 0x1ED}, {0x1EE, 0x1EF}, {0x1F1, 0x1F3}, {0x1F2, 0x1F3}, {0x1F4, 0x1F5}, {0x1F6, 0x195},
    {0x1F7, 0x1BF}, {0x1F8, 0x1F9}, {0x1FA, 0x1FB}, {0x1FC, 0x1FD}, {0x1FE, 0x1FF}, {0x200, 0x201}, {0x202, 0x203},
    {0x204, 0x205}, {0x206, 0x207}, {0x208, 0x209}, {0x20A, 0x20B}, {0x20C, 0x20D}, {0x20E, 0x20F}, {0x210, 0x211},
    {0x212, 0x213}, {0x214, 0x215}, {0x216, 0x217}, {0x218, 0x219}, {0x21A, 0x21B}, {0x21C, 0x21D}, {0x21E, 0x21F},
    {0x220, 0x19E}, {0x222, 0x223}, {0x224, 0x225}, {0x226, 0x227}, {0x228, 0x229}, {0x22A, 0x22B}, {0x22C, 0x22D},
    {0x22E, 0x22F}, {0x230, 0x231}, {0x232, 0x233}, {0x23A, 0x2C65}, {0x23B, 0x23C}, {0x23D, 0x19A}, {0x23E, 0x2C66},
    {0x241, 0x242}, {0x243, 0x180}, {0x244, 0x289}, {0x245, 0x28C}, {0x246, 0x247}, {0x248, 0x249}, {0x24A, 0x24B},
    {0x24C, 0x24D}, {0x24E, 0x24F}
};

/* str.lower() for the scripts qa_score.h names; U+0130 is handled by the caller (it
   lowers to two code points). */
static uint32_t py_lower(uint32_t c)
{
    if (c >= 0x180 && c <= 0x24F) {   /* binary search of the pairs */
        size_t lo = 0, hi = sizeof LOWER_LATIN_B / sizeof LOWER_LATIN_B[0];
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (LOWER_LATIN_B[mid][0] < c) lo = mid + 1;
            else hi = mid;
        }
        return lo < sizeof LOWER_LATIN_B / sizeof LOWER_LATIN_B[0] && LOWER_LATIN_B[lo][0] == c ? LOWER_LATIN_B[lo][1] : c;
    }
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
        return c + 32;
    if ((c >= 0x100 && c <= 0x137 && c % 2 == 0) || (c >= 0x139 && c <= 0x148 && c % 2 == 1) ||
        (c >= 0x14A && c <= 0x177 && c % 2 == 0) || (c >= 0x179 && c <= 0x17E && c % 2 == 1) ||
        c == 0x370 || c == 0x372 || c == 0x376 || (c >= 0x3D8 && c <= 0x3EE && c % 2 == 0) || c == 0x3F7 ||
        c == 0x3FA || (c >= 0x460 && c <= 0x481 && c % 2 == 0) || (c >= 0x48A && c <= 0x4BF && c % 2 == 0) ||
        (c >= 0x4C1 && c <= 0x4CD && c % 2 == 1) || (c >= 0x4D0 && c <= 0x52F && c % 2 == 0))
        return c + 1;
    if (c == 0x178) return 0xFF;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x3FD && c <= 0x3FF) return c - 130;   /* the reversed lunate sigmas */
    switch (c) {   /* archaic and symbol forms of Greek, Cyrillic palochka */
    case 0x37F: return 0x3F3;
    case 0x3CF: return 0x3D7;
    case 0x3F4: return 0x3B8;
    case 0x3F9: return 0x3F2;
    case 0x4C0: return 0x4CF;
    default: return c;
    }
}

/* whether c lies in one of the n closed ranges r */
static int in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (c >= r[i][0] && c <= r[i][1]) return 1;
    return 0;
}

/* Non-ASCII blocks whose characters are not alphanumeric (so not \w for Python's re): up to
   U+052F every such character (as CPython has it), beyond it whole blocks of punctuation and
   symbols. */
static const uint32_t NON_WORD[][2] = {
    {0x80, 0xA9},       {0xAB, 0xB1},       {0xB4, 0xB4},       {0xB6, 0xB8},       {0xBB, 0xBB},
    {0xBF, 0xBF},       {0xD7, 0xD7},       {0xF7, 0xF7},       {0x2C2, 0x2C5},     {0x2D2, 0x2DF},
    {0x2E5, 0x2EB},     {0x2ED, 0x2ED},     {0x2EF, 0x36F},     {0x375, 0x375},     {0x378, 0x379},
    {0x37E, 0x37E},     {0x380, 0x385},     {0x387, 0x387},     {0x38B, 0x38B},     {0x38D, 0x38D},
    {0x3A2, 0x3A2},     {0x3F6, 0x3F6},     {0x482, 0x489},     {0x2000, 0x206F},
    {0x20A0, 0x20FF},   {0x2190, 0x245F},   {0x2500, 0x2775},   {0x2794, 0x2BFF},   {0x2E00, 0x2E7F},
    {0x3000, 0x3004},   {0x3008, 0x3020},   {0x3030, 0x3030},   {0x3036, 0x3037},   {0x303D, 0x303F},
    {0xFE10, 0xFE1F},   {0xFE30, 0xFE6F},   {0xFF01, 0xFF0F},   {0xFF1A, 0xFF20},   {0xFF3B, 0xFF40},
    {0xFF5B, 0xFF65},   {0xFFE0, 0xFFFF},   {0x1F000, 0x1FAFF},
};

static int is_word(uint32_t c)
{
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    return !qa_py_isspace(c) && !in_ranges(c, NON_WORD, sizeof NON_WORD / sizeof NON_WORD[0]);
}

static int is_ascii_punct(uint32_t c) { return c < 0x80 && c > 0x20 && c != 0x7F && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", (int)c); }

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* digit (_? digit)*: Python's digit groups; returns the characters used (0: none). */
static size_t digit_group(const char *s)
{
    size_t i = 0;
    if (!is_digit(s[0])) return 0;
    for (i = 1;;) {
        if (is_digit(s[i])) i++;
        else if (s[i] == '_' && is_digit(s[i + 1])) i += 2;
        else return i;
    }
}

static int word_nocase(const char *s, size_t n, const char *w)
{
    size_t i;
    if (strlen(w) != n) return 0;
    for (i = 0; i < n; i++)
        if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]) != w[i]) return 0;
    return 1;
}

/* What float() strips around a number: str.isspace()'s characters but the four information
   separators U+001C..U+001F (float("\x1c1") raises). */
static int py_float_space(uint32_t cp) { return qa_py_isspace(cp) && !(cp >= 0x1C && cp <= 0x1F); }

/* The length of whitespace (by `space`) at the start of s[0..n). */
static size_t space_prefix(const char *s, size_t n, int (*space)(uint32_t))
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = utf8_seq((const unsigned char *)s + i, n - i, &cp);
        if (!l || !space(cp)) break;
        i += l;
    }
    return i;
}

/* Whitespace (by `space`) at the end: the start of the trailing run. */
static size_t space_suffix_start(const char *s, size_t n, int (*space)(uint32_t))
{
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        uint32_t cp;
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
        if (utf8_seq((const unsigned char *)s + start, end - start, &cp) != end - start || !space(cp)) break;
        end = start;
    }
    return end;
}

int qa_py_is_number(const char *s, double *value)
{
    size_t n = strlen(s), a = space_prefix(s, n, py_float_space), b = space_suffix_start(s, n, py_float_space), i, g;
    char clean[512];
    size_t m = 0;
    const char *p;
    if (b <= a || b - a >= sizeof clean) return 0;
    p = s + a;
    n = b - a;
    i = (p[0] == '+' || p[0] == '-') ? 1 : 0;
    if (word_nocase(p + i, n - i, "inf") || word_nocase(p + i, n - i, "infinity") || word_nocase(p + i, n - i, "nan")) {
        if (value) *value = p[i] == 'n' || p[i] == 'N' ? NAN : (p[0] == '-' ? -INFINITY : INFINITY);
        return 1;
    }
    /* [sign] (digits [. [digits]] | . digits) [e [sign] digits], underscores between digits */
    g = digit_group(p + i);
    i += g;
    if (i < n && p[i] == '.') {
        size_t f = digit_group(p + i + 1);
        if (!g && !f) return 0;
        i += 1 + f;
    } else if (!g) return 0;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (p[j] == '+' || p[j] == '-')) j++;
        if (!(g = digit_group(p + j))) return 0;
        i = j + g;
    }
    if (i != n) return 0;
    if (value) {
        for (i = 0; i < n; i++)
            if (p[i] != '_') clean[m++] = p[i];
        clean[m] = '\0';
        *value = strtod(clean, NULL);
    }
    return 1;
}

void qa_py_float_repr(double x, char buf[32])
{
    char e[40], digits[24];
    int prec, exp10, decpt, nd = 0, i;
    const char *sign = signbit(x) ? "-" : "";
    if (isnan(x)) { strcpy(buf, "nan"); return; }
    if (isinf(x)) { strcpy(buf, x < 0 ? "-inf" : "inf"); return; }
    if (x == 0) { snprintf(buf, 32, "%s0.0", sign); return; }
    /* the shortest %e that reads back as x: repr's digits */
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, fabs(x));
        if (strtod(e, NULL) == fabs(x)) break;
    }
    for (i = 0; e[i] && e[i] != 'e'; i++)
        if (is_digit(e[i])) digits[nd++] = e[i];
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    exp10 = atoi(e + i + 1);
    decpt = exp10 + 1;   /* x = 0.DIGITS * 10^decpt */
    if (decpt > -4 && decpt <= 16) {
        char *p = buf + strlen(strcpy(buf, sign));
        if (decpt <= 0) {   /* 0.000DIGITS */
            *p++ = '0';
            *p++ = '.';
            for (i = 0; i < -decpt; i++) *p++ = '0';
            strcpy(p, digits);
        } else if (decpt >= nd) {   /* DIGITS000.0 */
            memcpy(p, digits, (size_t)nd);
            p += nd;
            for (i = 0; i < decpt - nd; i++) *p++ = '0';
            strcpy(p, ".0");
        } else {   /* DIG.ITS */
            memcpy(p, digits, (size_t)decpt);
            p += decpt;
            *p++ = '.';
            strcpy(p, digits + decpt);
        }
    } else {   /* D.IGITSe+XX, at least two exponent digits */
        snprintf(buf, 32, "%s%c%s%.16se%c%02d", sign, digits[0], nd > 1 ? "." : "", digits + 1, decpt - 1 < 0 ? '-' : '+',
                 abs(decpt - 1) % 1000);   /* |exponent| <= 324 */
    }
}

/* ======================================================================================
   Code-point strings
   ====================================================================================== */

typedef struct cps {
    uint32_t *v;
    size_t n, cap;
    int oom;
} cps;

static void cps_push(cps *s, uint32_t c)
{
    if (s->oom) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        uint32_t *v = cap > ((size_t)-1) / sizeof *v ? NULL : (uint32_t *)realloc(s->v, cap * sizeof *v);
        if (!v) { s->oom = 1; return; }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = c;
}

/* UTF-8 bytes [s, s+n) appended as code points; invalid bytes read as U+FFFD. */
static void cps_decode(cps *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = utf8_seq((const unsigned char *)s + i, n - i, &cp);
        if (!l) { cp = 0xFFFD; l = 1; }
        cps_push(out, cp);
        i += l;
    }
}

/* The code points as a malloc'd UTF-8 string. */
static char *cps_encode(const cps *s)
{
    char *out, *p;
    size_t i;
    if (s->oom || s->n > ((size_t)-1) / 4 - 1 || !(out = (char *)malloc(4 * s->n + 1))) return NULL;
    for (p = out, i = 0; i < s->n; i++) {
        uint32_t c = s->v[i];
        if (c < 0x80) *p++ = (char)c;
        else if (c < 0x800) { *p++ = (char)(0xC0 | (c >> 6)); *p++ = (char)(0x80 | (c & 0x3F)); }
        else if (c < 0x10000) {
            *p++ = (char)(0xE0 | (c >> 12)); *p++ = (char)(0x80 | ((c >> 6) & 0x3F)); *p++ = (char)(0x80 | (c & 0x3F));
        } else {
            *p++ = (char)(0xF0 | (c >> 18)); *p++ = (char)(0x80 | ((c >> 12) & 0x3F));
            *p++ = (char)(0x80 | ((c >> 6) & 0x3F)); *p++ = (char)(0x80 | (c & 0x3F));
        }
    }
    *p = '\0';
    return out;
}

/* What Python's final-sigma rule reads, up to U+052F (the scripts py_lower covers; measured
   against CPython's str.lower() by tests/finetune/qa_unicode_ref.py): the case-ignorable
   characters it skips (apostrophes, periods, colons, modifier letters, accents, combining
   marks) and, of the rest, the cased letters. */
static const uint32_t CASE_IGNORABLE[][2] = {
    {0x27, 0x27},   {0x2E, 0x2E},   {0x3A, 0x3A},     {0x5E, 0x5E},     {0x60, 0x60},     {0xA8, 0xA8},
    {0xAD, 0xAD},   {0xAF, 0xAF},   {0xB4, 0xB4},     {0xB7, 0xB8},     {0x2B0, 0x36F},   {0x374, 0x375},
    {0x37A, 0x37A}, {0x384, 0x385}, {0x387, 0x387},   {0x483, 0x489},   {0x2018, 0x2019}, {0x2024, 0x2024},
    {0x2027, 0x2027},
};
static const uint32_t CASED[][2] = {
    {0x41, 0x5A},   {0x61, 0x7A},   {0xAA, 0xAA},   {0xB5, 0xB5},   {0xBA, 0xBA},   {0xC0, 0xD6},
    {0xD8, 0xF6},   {0xF8, 0x1BA},  {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373},
    {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F},
};

static int is_cased(uint32_t c) { return in_ranges(c, CASED, sizeof CASED / sizeof CASED[0]); }

static int is_case_ignorable(uint32_t c) { return in_ranges(c, CASE_IGNORABLE, sizeof CASE_IGNORABLE / sizeof CASE_IGNORABLE[0]); }

/* Python lowers capital sigma to final sigma at the end of a word: after a cased letter
   and before none (case-ignorable characters between are skipped). */
static int final_sigma(const cps *s, size_t i)
{
    size_t j;
    int before = 0, after = 0;
    for (j = i; j > 0 && is_case_ignorable(s->v[j - 1]); j--) {}
    before = j > 0 && is_cased(s->v[j - 1]);
    for (j = i + 1; j < s->n && is_case_ignorable(s->v[j]); j++) {}
    after = j < s->n && is_cased(s->v[j]);
    return before && !after;
}

static void lower_in_place(cps *s)
{
    cps t = {NULL, 0, 0, 0};
    size_t i;
    if (s->oom) return;   /* s is cut short: keep its mark (a fresh t would drop it) */
    for (i = 0; i < s->n; i++) {
        if (s->v[i] == 0x130) { cps_push(&t, 'i'); cps_push(&t, 0x307); }
        else if (s->v[i] == 0x3A3 && final_sigma(s, i)) cps_push(&t, 0x3C2);
        else cps_push(&t, py_lower(s->v[i]));
    }
    free(s->v);
    *s = t;
}

static void remove_punc(cps *s)
{
    size_t i, w = 0;
    for (i = 0; i < s->n; i++)
        if (!is_ascii_punct(s->v[i])) s->v[w++] = s->v[i];
    s->n = w;
}

/* Does the word w (ASCII) stand alone at s[i..]: \b before and after? */
static int article_at(const cps *s, size_t i, const char *w)
{
    size_t k, n = strlen(w);
    if (i > 0 && is_word(s->v[i - 1])) return 0;
    if (i + n > s->n) return 0;
    for (k = 0; k < n; k++)
        if (s->v[i + k] != (uint32_t)w[k]) return 0;
    return i + n == s->n || !is_word(s->v[i + n]);
}

/* re.sub(r'\b(a|an|the)\b', ' ', text) */
static void remove_articles(cps *s)
{
    static const char *const ARTICLES[] = {"a", "an", "the"};
    size_t i, w = 0;
    for (i = 0; i < s->n;) {
        size_t k, len = 0;
        for (k = 0; k < 3 && !len; k++)
            if (article_at(s, i, ARTICLES[k])) len = strlen(ARTICLES[k]);
        if (len) {
            s->v[w++] = ' ';
            i += len;
        } else s->v[w++] = s->v[i++];
    }
    s->n = w;
}

/* ' '.join(text.split()) */
static void white_space_fix(cps *s)
{
    size_t i, w = 0;
    int pending = 0;
    for (i = 0; i < s->n; i++) {
        if (qa_py_isspace(s->v[i])) {
            pending = w > 0;
            continue;
        }
        if (pending) s->v[w++] = ' ';
        pending = 0;
        s->v[w++] = s->v[i];
    }
    s->n = w;
}

/* Tokens of a normalized text (split at single spaces), pointing into it (it is cut up). */
static int split_spaces(char *s, char ***tokens, int *n)
{
    int count = 0, k = 0;
    char *p;
    *tokens = NULL;
    *n = 0;
    for (p = s; *p; p++) count += *p == ' ';
    if (!*s) return 0;
    if (!(*tokens = (char **)malloc(sizeof(char *) * (size_t)(count + 1)))) return -1;
    (*tokens)[k++] = s;
    for (p = s; *p; p++)
        if (*p == ' ') { *p = '\0'; (*tokens)[k++] = p + 1; }
    *n = k;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted token list; with unique set, repeats are dropped (a bag of DROP is a set). */
static int token_list(char *normalized, int unique, char ***tokens, int *n)
{
    int i, w = 0;
    if (split_spaces(normalized, tokens, n)) return -1;
    if (*n > 1) qsort(*tokens, (size_t)*n, sizeof(char *), cmp_str);
    if (!unique) return 0;
    for (i = 0; i < *n; i++)
        if (w == 0 || strcmp((*tokens)[w - 1], (*tokens)[i]) != 0) (*tokens)[w++] = (*tokens)[i];
    *n = w;
    return 0;
}

/* Common tokens of two sorted lists (multiset intersection; sets give set intersection). */
static int common_tokens(char **a, int na, char **b, int nb)
{
    int i = 0, j = 0, common = 0;
    while (i < na && j < nb) {
        int c = strcmp(a[i], b[j]);
        if (c == 0) { common++; i++; j++; }
        else if (c < 0) i++;
        else j++;
    }
    return common;
}

/* ======================================================================================
   SQuAD v1.1
   ====================================================================================== */

int qa_squad_normalize(const char *s, char **out)
{
    cps c = {NULL, 0, 0, 0};
    if (!s || !out) return -1;
    cps_decode(&c, s, strlen(s));
    lower_in_place(&c);
    remove_punc(&c);
    remove_articles(&c);
    white_space_fix(&c);
    *out = cps_encode(&c);
    free(c.v);
    return *out ? 0 : -1;
}

/* evaluate-v1.1.py's f1_score of two normalized texts (they are cut up) */
static int squad_f1(char *pred, char *gold, double *f1)
{
    char **p = NULL, **g = NULL;
    int np, ng, same, rc = -1;
    if (token_list(pred, 0, &p, &np) == 0 && token_list(gold, 0, &g, &ng) == 0) {
        same = common_tokens(p, np, g, ng);
        if (same == 0) *f1 = 0;
        else {
            double precision = (double)same / np, recall = (double)same / ng;
            *f1 = 2 * precision * recall / (precision + recall);
        }
        rc = 0;
    }
    free(p);
    free(g);
    return rc;
}

int qa_squad_score(const char *prediction, const qa_answer *golds, int n_golds, double *em, double *f1)
{
    char *pred = NULL;
    int i, rc = 0;
    if (!prediction || !golds || n_golds < 1 || !em || !f1) return -1;
    *em = *f1 = 0;
    if (qa_squad_normalize(prediction, &pred)) return -1;
    for (i = 0; i < n_golds && rc == 0; i++) {
        char *gold = NULL, *pred_copy = NULL;
        double f;
        if (golds[i].n_spans < 1 || !golds[i].spans[0] || qa_squad_normalize(golds[i].spans[0], &gold) ||
            !(pred_copy = (char *)malloc(strlen(pred) + 1))) {
            rc = -1;
        } else {
            strcpy(pred_copy, pred);
            if (strcmp(pred, gold) == 0) *em = 1;
            if (squad_f1(pred_copy, gold, &f) == 0) { if (f > *f1) *f1 = f; }
            else rc = -1;
        }
        free(gold);
        free(pred_copy);
    }
    free(pred);
    return rc;
}

/* ======================================================================================
   DROP
   ====================================================================================== */

/* The code points of c become Python's str(value). */
static void set_float_repr(cps *c, double value)
{
    char repr[32];
    size_t i;
    qa_py_float_repr(value, repr);
    c->n = 0;
    for (i = 0; repr[i]; i++) cps_push(c, (uint32_t)repr[i]);
}

/* One piece of _normalize_answer: lower, punctuation (unless a number), number, articles,
   whitespace; appended to out (with a separating space) when not empty. */
static void drop_piece(cps *out, const char *piece, size_t n)
{
    cps c = {NULL, 0, 0, 0};
    char *text;
    double value;
    size_t i;
    cps_decode(&c, piece, n);
    lower_in_place(&c);
    text = cps_encode(&c);
    if (text && !qa_py_is_number(text, NULL)) {   /* "$1,000" loses "$" and "," and becomes a number */
        remove_punc(&c);
        free(text);
        text = cps_encode(&c);
    }
    if (!text) {
        out->oom = 1;
        free(c.v);
        return;
    }
    if (qa_py_is_number(text, &value)) set_float_repr(&c, value);
    free(text);
    remove_articles(&c);
    white_space_fix(&c);
    if (c.oom) out->oom = 1;
    if (c.n && out->n) cps_push(out, ' ');
    for (i = 0; i < c.n; i++) cps_push(out, c.v[i]);
    free(c.v);
}

int qa_drop_normalize(const char *span, char **out)
{
    cps c = {NULL, 0, 0, 0};
    const char *p, *start;
    if (!span || !out) return -1;
    for (start = p = span;; p++) {
        if (*p == ' ' || *p == '-' || *p == '\0') {
            drop_piece(&c, start, (size_t)(p - start));
            start = p + 1;
        }
        if (!*p) break;
    }
    *out = cps_encode(&c);
    free(c.v);
    return *out ? 0 : -1;
}

/* A span's bag: its normalized text and the sorted set of its tokens. */
typedef struct bag {
    char *text;      /* the normalized span (kept whole for exact match) */
    char *storage;   /* a copy cut into the tokens */
    char **tok;
    int n;
} bag;

static void bag_free(bag *b)
{
    free(b->text);
    free(b->storage);
    free(b->tok);
}

static int bag_make(const char *span, bag *b)
{
    memset(b, 0, sizeof *b);
    if (qa_drop_normalize(span, &b->text) || !(b->storage = (char *)malloc(strlen(b->text) + 1))) return -1;
    strcpy(b->storage, b->text);
    return token_list(b->storage, 1, &b->tok, &b->n);
}

static int bag_has_number(const bag *b)
{
    int i;
    for (i = 0; i < b->n; i++)
        if (qa_py_is_number(b->tok[i], NULL)) return 1;
    return 0;
}

/* _match_numbers_if_present: no numbers in the gold bag, or a number both bags hold */
static int numbers_match(const bag *gold, const bag *pred)
{
    int i, j;
    if (!bag_has_number(gold)) return 1;
    for (i = 0; i < gold->n; i++) {
        if (!qa_py_is_number(gold->tok[i], NULL)) continue;
        for (j = 0; j < pred->n; j++)
            if (strcmp(gold->tok[i], pred->tok[j]) == 0) return 1;
    }
    return 0;
}

/* _compute_f1 on two bags (sets); an empty bag has precision (or recall) 1 */
static double bag_f1(const bag *pred, const bag *gold)
{
    int common = common_tokens(pred->tok, pred->n, gold->tok, gold->n);
    double precision = pred->n ? (double)common / pred->n : 1.0, recall = gold->n ? (double)common / gold->n : 1.0;
    return precision == 0.0 && recall == 0.0 ? 0.0 : 2 * precision * recall / (precision + recall);
}

/* The largest total of a one-to-one matching of rows to columns of score[r x c] (row-major),
   r <= c: the Hungarian algorithm on costs -score (as scipy's linear_sum_assignment). */
static int best_matching(const double *score, int r, int c, double *total)
{
    double *u = (double *)calloc((size_t)r + 1, sizeof(double)), *v = (double *)calloc((size_t)c + 1, sizeof(double));
    double *minv = (double *)malloc(((size_t)c + 1) * sizeof(double));
    int *p = (int *)calloc((size_t)c + 1, sizeof(int)), *way = (int *)calloc((size_t)c + 1, sizeof(int));
    char *used = (char *)malloc((size_t)c + 1);
    int i, j, rc = -1;
    if (!u || !v || !minv || !p || !way || !used) goto done;
    for (i = 1; i <= r; i++) {
        int j0 = 0;
        p[0] = i;
        for (j = 0; j <= c; j++) { minv[j] = INFINITY; used[j] = 0; }
        do {
            int i0 = p[j0], j1 = 0;
            double delta = INFINITY;
            used[j0] = 1;
            for (j = 1; j <= c; j++) {
                if (used[j]) continue;
                {
                    double cur = -score[(size_t)(i0 - 1) * (size_t)c + (size_t)(j - 1)] - u[i0] - v[j];
                    if (cur < minv[j]) { minv[j] = cur; way[j] = j0; }
                    if (minv[j] < delta) { delta = minv[j]; j1 = j; }
                }
            }
            for (j = 0; j <= c; j++) {
                if (used[j]) { u[p[j]] += delta; v[j] -= delta; }
                else minv[j] -= delta;
            }
            j0 = j1;
        } while (p[j0] != 0);
        do {
            int j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0);
    }
    *total = 0;
    for (j = 1; j <= c; j++)
        if (p[j]) *total += score[(size_t)(p[j] - 1) * (size_t)c + (size_t)(j - 1)];
    rc = 0;
done:
    free(u); free(v); free(minv); free(p); free(way); free(used);
    return rc;
}

/* _align_bags summed: the best one-to-one total of the number-gated F1s */
static int align_bags(const bag *pred, int np, const bag *gold, int ng, double *total)
{
    int small = np < ng ? np : ng, large = np < ng ? ng : np, i, j, rc;
    double *score = (double *)calloc((size_t)small * (size_t)large, sizeof(double));
    if (!score) return -1;
    for (i = 0; i < ng; i++)
        for (j = 0; j < np; j++) {
            double f = numbers_match(&gold[i], &pred[j]) ? bag_f1(&pred[j], &gold[i]) : 0.0;
            /* rows = the smaller side */
            if (ng <= np) score[(size_t)i * (size_t)np + (size_t)j] = f;
            else score[(size_t)j * (size_t)ng + (size_t)i] = f;
        }
    rc = best_matching(score, small, large, total);
    free(score);
    return rc;
}

static int same_span_sets(const bag *a, int na, const bag *b, int nb)
{
    int i, j;
    if (na != nb) return 0;
    for (i = 0; i < na; i++) {
        int in_b = 0, in_a = 0;
        for (j = 0; j < nb && !in_b; j++) in_b = strcmp(a[i].text, b[j].text) == 0;
        for (j = 0; j < na && !in_a; j++) in_a = strcmp(b[i].text, a[j].text) == 0;
        if (!in_b || !in_a) return 0;
    }
    return 1;
}

int qa_drop_metrics(const char *const *predicted, int n_predicted, const char *const *gold, int n_gold, double *em,
                    double *f1)
{
    bag *p, *g;
    int i, rc = -1;
    double total = 0;
    if (!predicted || !gold || n_predicted < 1 || n_gold < 1 || !em || !f1) return -1;
    p = (bag *)calloc((size_t)n_predicted, sizeof *p);
    g = (bag *)calloc((size_t)n_gold, sizeof *g);
    if (!p || !g) goto done;
    for (i = 0; i < n_predicted; i++)
        if (!predicted[i] || bag_make(predicted[i], &p[i])) goto done;
    for (i = 0; i < n_gold; i++)
        if (!gold[i] || bag_make(gold[i], &g[i])) goto done;
    if (align_bags(p, n_predicted, g, n_gold, &total)) goto done;
    *em = same_span_sets(p, n_predicted, g, n_gold) ? 1.0 : 0.0;
    *f1 = rint(100.0 * (total / (n_gold > n_predicted ? n_gold : n_predicted))) / 100.0;
    rc = 0;
done:
    for (i = 0; p && i < n_predicted; i++) bag_free(&p[i]);
    for (i = 0; g && i < n_gold; i++) bag_free(&g[i]);
    free(p);
    free(g);
    return rc;
}

/* gold_answer[0].strip() != "" */
static int blank(const char *s)
{
    size_t n = strlen(s);
    return space_prefix(s, n, qa_py_isspace) == n;
}

int qa_drop_score(const char *prediction, const qa_answer *golds, int n_golds, double *em, double *f1)
{
    int i;
    if (!prediction || !golds || n_golds < 1 || !em || !f1) return -1;
    *em = *f1 = 0;
    for (i = 0; i < n_golds; i++) {
        double e, f;
        if (golds[i].n_spans < 1 || !golds[i].spans[0]) return -1;
        if (blank(golds[i].spans[0])) continue;
        if (qa_drop_metrics(&prediction, 1, golds[i].spans, golds[i].n_spans, &e, &f)) return -1;
        if (e > *em) *em = e;
        if (f > *f1) *f1 = f;
    }
    return 0;
}
