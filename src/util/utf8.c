#include "util/utf8.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* How long the sequence a byte starts is, or 0 if no sequence starts with it. */
static size_t sequence_length(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        return 2;
    if ((c & 0xF0) == 0xE0)
        return 3;
    if ((c & 0xF8) == 0xF0)
        return 4;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if it is not valid:
 * overlongs, surrogates and code points above U+10FFFF are invalid (RFC 3629). */
static size_t valid_sequence(const unsigned char *s, size_t n)
{
    size_t len = sequence_length(s[0]);
    if (len <= 1)
        return len;
    if (n < len)
        return 0;
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t cp = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
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

int utf8_decode(struct utf8_decoder *d, const char *in, size_t len, bool final, utf8_span_fn fn,
                void *ctx)
{
    const unsigned char *s = (const unsigned char *)in;
    int rc;
    /* What the previous chunk cut, completed from this one. Its bytes are decided exactly as
     * the main loop would decide them in one buffer: the same valid_sequence on the same bytes. */
    while (d->n_held > 0) {
        size_t want = sequence_length(d->held[0]);
        while (d->n_held < want && len > 0) {
            d->held[d->n_held++] = *s++;
            len--;
        }
        if (d->n_held < want && !final)
            return 0;
        size_t n = valid_sequence(d->held, d->n_held);
        rc = fn(ctx, (const char *)d->held, n ? n : 1, n != 0);
        n = n ? n : 1;
        memmove(d->held, d->held + n, d->n_held - n);
        d->n_held -= n;
        if (rc)
            return rc;
    }
    size_t i = 0, start = 0;
    while (i < len) {
        size_t n = valid_sequence(s + i, len - i);
        if (n) {
            i += n;
            continue;
        }
        if (i > start && (rc = fn(ctx, (const char *)s + start, i - start, true)))
            return rc;
        if (!final && sequence_length(s[i]) > len - i) {
            /* cut by the chunk's end (at most 3 bytes): the next chunk may complete it */
            memcpy(d->held, s + i, len - i);
            d->n_held = len - i;
            return 0;
        }
        if ((rc = fn(ctx, (const char *)s + i, 1, false)))
            return rc;
        start = ++i;
    }
    return i > start ? fn(ctx, (const char *)s + start, i - start, true) : 0;
}

size_t utf8_json_cost(const char *seq, size_t n, bool ascii)
{
    unsigned char c = (unsigned char)seq[0];
    if (n == 1) {
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            return 2;
        return c < 0x20 ? 6 : 1; /* \u00XX */
    }
    if (!ascii)
        return n;
    return n == 4 ? 12 : 6; /* \uXXXX; above U+FFFF a surrogate pair */
}

/* Room for more bytes of text, growing geometrically but never past the limit, which the text
 * cannot outgrow (each byte of it costs at least one). */
static int json_reserve(struct utf8_json_text *t, size_t more)
{
    if (t->len + more <= t->cap)
        return 0;
    size_t cap = t->cap ? t->cap * 2 : 4096;
    if (cap < t->len + more)
        cap = t->len + more;
    if (cap > t->limit && t->limit >= t->len + more)
        cap = (size_t)t->limit;
    char *p = realloc(t->text, cap);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    t->text = p;
    t->cap = cap;
    return 0;
}

static int json_span(void *ctx, const char *s, size_t n, bool valid)
{
    struct utf8_json_text *t = ctx;
    if (!valid) {
        s = "\xEF\xBF\xBD";
        n = 3;
    }
    size_t keep = 0;
    uint64_t cost = t->cost;
    while (keep < n) {
        size_t len = sequence_length((unsigned char)s[keep]); /* s is valid: 1..4, within n */
        size_t c = utf8_json_cost(s + keep, len, t->ascii);
        if (cost + c > t->limit) {
            t->full = true;
            break;
        }
        cost += c;
        keep += len;
    }
    if (keep > 0) {
        if (json_reserve(t, keep) < 0)
            return -1;
        memcpy(t->text + t->len, s, keep);
        t->len += keep;
        t->cost = cost;
    }
    return t->full ? 1 : 0;
}

int utf8_json_append(struct utf8_json_text *t, const char *in, size_t len, bool final)
{
    if (t->full)
        return 0;
    return utf8_decode(&t->dec, in, len, final, json_span, t) < 0 ? -1 : 0;
}

struct render {
    char *out;
    size_t len;
    bool one_line;
};

static int render_span(void *ctx, const char *s, size_t n, bool valid)
{
    static const char hex[] = "0123456789abcdef";
    struct render *r = ctx;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = valid ? sequence_length(c) : 1;
        /* C1 controls: some terminals obey them in UTF-8 too (U+009B is CSI) */
        bool c1 = valid && len == 2 && c == 0xC2 && (unsigned char)s[i + 1] < 0xA0;
        bool layout = c == '\n' || c == '\t' || c == '\r' || c == '\b';
        if (!valid || c1) {
            for (size_t k = 0; k < len; k++) {
                unsigned char b = (unsigned char)s[i + k];
                r->out[r->len++] = '\\';
                r->out[r->len++] = 'x';
                r->out[r->len++] = hex[b >> 4];
                r->out[r->len++] = hex[b & 15];
            }
        } else if (len == 1 && (c < 0x20 || c == 0x7F) && (r->one_line || !layout)) {
            r->out[r->len++] = '^';
            r->out[r->len++] = c == 0x7F ? '?' : (char)(c + 0x40);
        } else {
            memcpy(r->out + r->len, s + i, len);
            r->len += len;
        }
        i += len;
    }
    return 0;
}

size_t utf8_render(struct utf8_decoder *d, const char *in, size_t len, bool final, bool one_line,
                   char *out)
{
    struct render r = {.out = out, .one_line = one_line};
    utf8_decode(d, in, len, final, render_span, &r);
    return r.len;
}
