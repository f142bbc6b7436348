#include "util/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if it is not valid:
 * overlongs, surrogates and code points above U+10FFFF are invalid (RFC 3629). */
static size_t valid_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

char *utf8_sanitize(const char *in, size_t len, size_t *out_len)
{
    /* Worst case: every byte becomes the 3-byte replacement character. */
    char *out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = valid_sequence(s + i, len - i);
        if (n == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += 1;
        } else {
            memcpy(out + o, s + i, n);
            o += n;
            i += n;
        }
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}
