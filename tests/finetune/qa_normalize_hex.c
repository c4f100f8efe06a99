/* qa_normalize_hex.c - the QA scorer's text functions over stdin, for qa_unicode_ref.py:
   each line "squad HEX", "drop HEX" or "repair HEX" (HEX: the input's bytes) gets a line with
   the hex of qa_squad_normalize's, qa_drop_normalize's or qa_utf8_repair's result, or "ERR". */
#include "qa_score.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char *h, char *out, size_t *n)
{
    size_t i, len = strlen(h);
    if (len % 2) return -1;
    for (i = 0; i < len / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (char)v;
    }
    out[len / 2] = '\0';
    *n = len / 2;
    return 0;
}

int main(void)
{
    static char line[1 << 16], bytes[1 << 15];
    while (fgets(line, sizeof line, stdin)) {
        char mode[16], *hex = strchr(line, ' '), *out = NULL;
        size_t n = 0, i;
        int rc = -1;
        line[strcspn(line, "\n")] = '\0';
        if (!hex || (size_t)(hex - line) >= sizeof mode) return 2;
        memcpy(mode, line, (size_t)(hex - line));
        mode[hex - line] = '\0';
        if (unhex(hex + 1, bytes, &n)) return 2;
        if (strcmp(mode, "squad") == 0) rc = qa_squad_normalize(bytes, &out);
        else if (strcmp(mode, "drop") == 0) rc = qa_drop_normalize(bytes, &out);
        else if (strcmp(mode, "repair") == 0) rc = (out = qa_utf8_repair(bytes, n)) ? 0 : -1;
        else return 2;
        if (rc) fputs("ERR", stdout);
        for (i = 0; !rc && out[i]; i++) printf("%02x", (unsigned char)out[i]);
        putchar('\n');
        free(out);
    }
    return 0;
}
