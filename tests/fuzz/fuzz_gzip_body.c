/* gzip bodies and upload metadata (src/api/gzip_body.h, envd_metadata_from_headers): the first
 * byte picks what is fuzzed and the size of the pieces, the rest is the input.
 *   - decode: the input as a gzip body, fed in pieces into a small output buffer, must give the
 *     same bytes and the same verdict as the input decoded in one piece into a large buffer (the
 *     pieces and a full output buffer change nothing), and every step must make progress;
 *   - round trip: the input encoded in pieces decodes to itself;
 *   - headers: the input split at NULs into name/value pairs; accepted metadata is lines
 *     KEY=VALUE with lowercase token keys, printable values, within 4096 bytes as envd counts;
 *   - the encoding headers' parsers take the input as text and never fail on it but with err. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/envd_files.h"
#include "api/gzip_body.h"
#include "fuzz.h"

/* Decodes in[0..len) in pieces of `piece` into a buffer of `cap`: the bytes, their count, and
 * whether the body was accepted whole. */
static char *decode(const uint8_t *in, size_t len, size_t piece, size_t cap, size_t *n, bool *good)
{
    err_t err;
    struct gzip_decoder *g = gzip_decoder_new(&err);
    fuzz_assert(g);
    size_t have = 0, room = 1 << 16;
    char *outs = malloc(room), *buf = malloc(cap);
    *good = true;
    size_t at = 0;
    while (*good) {
        size_t take = len - at < piece ? len - at : piece;
        size_t used, made;
        if (gzip_decoder_step(g, (const char *)in + at, take, &used, buf, cap, &made, &err) < 0) {
            fuzz_assert(err.errnum == EINVAL && err.msg[0] && made <= cap);
            have += made; /* decoded before the corrupt byte: counted, never delivered */
            *good = false;
            break;
        }
        fuzz_assert(used <= take && made <= cap);
        at += used;
        if (have + made > room) {
            room = (have + made) * 2;
            outs = realloc(outs, room);
        }
        memcpy(outs + have, buf, made);
        have += made;
        if (have > (1u << 20)) { /* a bomb: enough seen */
            *good = false;
            break;
        }
        if (!used && !made) {
            if (at == len)
                break;
            fuzz_assert(take == 0); /* input offered and nothing done: no progress */
        }
    }
    fuzz_assert(gzip_decoder_total(g) == have);
    if (*good && gzip_decoder_finish(g, &err) < 0)
        *good = false;
    gzip_decoder_free(g);
    free(buf);
    *n = have;
    return outs;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned pick = data[0] % 4;
    size_t piece = 1 + (data[0] >> 2) * 37;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    if (pick == 0) {
        size_t n1, n2;
        bool g1, g2;
        char *a = decode(in, len, piece, 1 + (piece % 97), &n1, &g1);
        char *b = decode(in, len, len ? len : 1, 1 << 16, &n2, &g2);
        if (n1 <= (1u << 20) && n2 <= (1u << 20) && (g1 || g2)) {
            fuzz_assert(g1 == g2 && n1 == n2 && memcmp(a, b, n1) == 0);
        }
        free(a);
        free(b);
    } else if (pick == 1) {
        err_t err;
        struct gzip_encoder *e = gzip_encoder_new(&err);
        fuzz_assert(e);
        size_t room = len + 1024, have = 0;
        char *z = malloc(room);
        size_t at = 0;
        bool done = false;
        while (!done) {
            size_t take = len - at < piece ? len - at : piece;
            bool finish = at + take == len;
            size_t used, made;
            char out[257];
            fuzz_assert(gzip_encoder_step(e, (const char *)in + at, take, finish, &used, out,
                                          sizeof out, &made, &done, &err) == 0);
            at += used;
            if (have + made > room)
                z = realloc(z, room = (have + made) * 2);
            memcpy(z + have, out, made);
            have += made;
            fuzz_assert(used || made || done);
        }
        gzip_encoder_free(e);
        size_t n;
        bool good;
        char *back = decode((const uint8_t *)z, have, piece, 64, &n, &good);
        fuzz_assert(good && n == len && memcmp(back, in, len) == 0);
        free(back);
        free(z);
    } else if (pick == 2) {
        char *s = malloc(len + 2);
        memcpy(s, in, len);
        s[len] = s[len + 1] = '\0';
        struct http_header h[16];
        size_t nh = 0;
        for (char *p = s; nh < 16 && p < s + len;) {
            h[nh].name = p;
            p += strlen(p) + 1;
            h[nh].value = p < s + len ? p : "";
            p += strlen(p) + 1;
            nh++;
        }
        static char lines[ENVD_METADATA_MAX + 1];
        err_t err = {0};
        if (envd_metadata_from_headers(h, nh, lines, &err) == 0) {
            size_t total = 0;
            for (const char *l = lines; *l;) {
                const char *nl = strchr(l, '\n'), *eq = strchr(l, '=');
                fuzz_assert(nl && eq && eq < nl && eq > l);
                for (const char *k = l; k < eq; k++)
                    fuzz_assert(!(*k >= 'A' && *k <= 'Z') && *k > 0x20 && *k < 0x7f &&
                                !strchr("\"(),/:;<=>?@[\\]{}", *k));
                for (const char *v = eq + 1; v < nl; v++)
                    fuzz_assert(*v >= 0x20 && *v <= 0x7e);
                total += 9 + (size_t)(nl - l) - 1;
                l = nl + 1;
            }
            fuzz_assert(total <= ENVD_METADATA_MAX);
        } else {
            fuzz_assert(err.errnum == EINVAL && err.msg[0]);
        }
        free(s);
    } else {
        char *s = strndup((const char *)in, len);
        err_t err = {0};
        int rc = gzip_content_encoding(s, &err);
        fuzz_assert(rc == 0 || rc == 1 || (rc == -1 && err.errnum == EINVAL));
        (void)gzip_accepted(s);
        fuzz_assert(gzip_accepted("gzip, deflate") && !gzip_accepted("gzip;q=0") &&
                    !gzip_accepted(NULL) && !gzip_accepted("identity"));
        free(s);
    }
    return 0;
}
