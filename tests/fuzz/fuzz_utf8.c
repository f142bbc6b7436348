/* utf8_sanitize() on arbitrary bytes (program output). Checked against a reference written
 * differently: the byte ranges of Unicode's table 3-7 instead of decoding code points. Then the
 * chunked forms on the same bytes, cut where the input's first bytes say: the JSON text must be
 * utf8_sanitize's result (or a prefix of it at a character boundary, within the limit, whose
 * cost is what jansson writes), and the terminal rendering must hold no control at all. */
#include <jansson.h>
#include <stdbool.h>
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

/* data fed in chunks whose sizes cycle through cuts[] (each 1..16) */
static struct utf8_json_text json_chunked(const uint8_t *data, size_t size, const uint8_t *cuts,
                                          size_t n_cuts, uint64_t limit, bool ascii)
{
    struct utf8_json_text t = {.limit = limit, .ascii = ascii};
    for (size_t i = 0, k = 0; i < size; k++) {
        size_t n = (size_t)(cuts[k % n_cuts] % 16) + 1;
        n = n > size - i ? size - i : n;
        fuzz_assert(utf8_json_append(&t, (const char *)data + i, n, false) == 0);
        i += n;
    }
    fuzz_assert(utf8_json_append(&t, NULL, 0, true) == 0);
    return t;
}

static size_t jansson_cost(const char *text, size_t len, bool ascii)
{
    json_t *j = json_stringn(text, len);
    fuzz_assert(j != NULL);
    char *d = json_dumps(j, JSON_ENCODE_ANY | (ascii ? JSON_ENSURE_ASCII : 0));
    fuzz_assert(d != NULL);
    size_t n = strlen(d) - 2;
    free(d);
    json_decref(j);
    return n;
}

static void check_json(const uint8_t *data, size_t size, const char *clean, size_t clean_len)
{
    uint8_t one = 1;
    const uint8_t *cuts = size > 0 ? data : &one;
    size_t n_cuts = size > 0 ? (size < 8 ? size : 8) : 1;
    for (int ascii = 0; ascii < 2; ascii++) {
        struct utf8_json_text t = json_chunked(data, size, cuts, n_cuts, UINT64_MAX, ascii);
        fuzz_assert(!t.full && t.len == clean_len);
        fuzz_assert(clean_len == 0 || memcmp(t.text, clean, clean_len) == 0);
        uint64_t whole = jansson_cost(clean, clean_len, ascii);
        fuzz_assert(t.cost == whole);
        free(t.text);

        /* Under a limit taken from the input: the longest prefix (whole characters) that fits. */
        uint64_t limit = size >= 2 ? (uint64_t)(data[0] | data[1] << 8) % (whole + 2) : 0;
        t = json_chunked(data, size, cuts, n_cuts, limit, ascii);
        fuzz_assert(t.cost <= limit && t.len <= clean_len &&
                    t.cap <= (limit > 4096 ? limit : 4096));
        fuzz_assert(t.len == 0 || memcmp(t.text, clean, t.len) == 0);
        uint64_t prefix_cost = 0;
        for (size_t i = 0; i < t.len;) {
            size_t len = reference_sequence((const unsigned char *)clean + i, clean_len - i);
            prefix_cost += utf8_json_cost(clean + i, len, ascii);
            i += len;
        }
        fuzz_assert(t.cost == prefix_cost);
        fuzz_assert(t.full == (t.len < clean_len));
        if (t.full) {
            size_t next =
                reference_sequence((const unsigned char *)clean + t.len, clean_len - t.len);
            fuzz_assert(next > 0);
            fuzz_assert(t.cost + utf8_json_cost(clean + t.len, next, ascii) > limit);
        }
        free(t.text);
    }
}

static void check_render(const uint8_t *data, size_t size, bool one_line)
{
    char *whole = malloc(UTF8_RENDER_MAX(size) + 1);
    char *parts = malloc(UTF8_RENDER_MAX(size) + 1);
    fuzz_assert(whole && parts);
    struct utf8_decoder d = {0};
    size_t n = utf8_render(&d, (const char *)data, size, true, one_line, whole);
    fuzz_assert(n <= UTF8_RENDER_MAX(size) && d.n_held == 0);
    size_t m = 0;
    struct utf8_decoder d2 = {0};
    for (size_t i = 0; i < size; i += 3)
        m += utf8_render(&d2, (const char *)data + i, size - i < 3 ? size - i : 3, false, one_line,
                         parts + m);
    m += utf8_render(&d2, NULL, 0, true, one_line, parts + m);
    fuzz_assert(m == n && memcmp(whole, parts, n) == 0);
    fuzz_assert(reference_valid((const unsigned char *)whole, n));
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)whole[i];
        bool layout = c == '\n' || c == '\t' || c == '\r' || c == '\b';
        fuzz_assert(c >= 0x20 || (layout && !one_line));
        fuzz_assert(c != 0x7F);
        fuzz_assert(!(c == 0xC2 && i + 1 < n && (unsigned char)whole[i + 1] < 0xA0));
    }
    free(whole);
    free(parts);
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

    check_json(data, size, out, out_len);
    check_render(data, size, false);
    check_render(data, size, true);
    free(out);
    return 0;
}
