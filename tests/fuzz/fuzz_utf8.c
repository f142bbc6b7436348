/* utf8_sanitize() on arbitrary bytes (program output). Checked against a reference written
 * differently: the byte ranges of Unicode's table 3-7 instead of decoding code points. */
#include <string.h>

#include "fuzz.h"
#include "util/utf8.h"

/* Length of the well-formed sequence at s (Unicode 15, table 3-7), or 0. */
static size_t reference_sequence(const unsigned char *s, size_t n)
{
    static const struct {
        unsigned char first_lo, first_hi, second_lo, second_hi;
        size_t len;
    } forms[] = {
        {0x00, 0x7F, 0, 0, 1},       {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3},
        {0xE1, 0xEC, 0x80, 0xBF, 3}, {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3},
        {0xF0, 0xF0, 0x90, 0xBF, 4}, {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        if (s[0] < forms[f].first_lo || s[0] > forms[f].first_hi)
            continue;
        size_t len = forms[f].len;
        if (len == 1)
            return 1;
        if (n < len || s[1] < forms[f].second_lo || s[1] > forms[f].second_hi)
            return 0;
        for (size_t i = 2; i < len; i++)
            if (s[i] < 0x80 || s[i] > 0xBF)
                return 0;
        return len;
    }
    return 0;
}

static int reference_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t len = reference_sequence(s + i, n - i);
        if (len == 0)
            return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t out_len = (size_t)-1;
    char *out = utf8_sanitize((const char *)data, size, &out_len);
    fuzz_assert(out != NULL);
    fuzz_assert(out_len <= 3 * size);
    fuzz_assert(out[out_len] == '\0');
    fuzz_assert(reference_valid((const unsigned char *)out, out_len));

    /* The exact output: well-formed sequences copied, every other byte one U+FFFD. */
    size_t o = 0;
    for (size_t i = 0; i < size;) {
        size_t len = reference_sequence(data + i, size - i);
        if (len == 0) {
            fuzz_assert(o + 3 <= out_len && memcmp(out + o, "\xEF\xBF\xBD", 3) == 0);
            o += 3;
            i += 1;
        } else {
            fuzz_assert(o + len <= out_len && memcmp(out + o, data + i, len) == 0);
            o += len;
            i += len;
        }
    }
    fuzz_assert(o == out_len);

    if (reference_valid(data, size))
        fuzz_assert(out_len == size && memcmp(out, data, size) == 0);

    /* Idempotent: sanitized text is valid, so a second pass changes nothing. */
    size_t again_len = (size_t)-1;
    char *again = utf8_sanitize(out, out_len, &again_len);
    fuzz_assert(again != NULL);
    fuzz_assert(again_len == out_len && memcmp(again, out, out_len) == 0);
    free(again);
    free(out);
    return 0;
}
