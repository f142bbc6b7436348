/* The multipart reader (src/api/multipart.h): the input is a body with boundary "BND", fed in
 * pieces whose size comes from its first byte. Checked against the same body fed whole: the same
 * result, the same parts with the same names and the same bytes; a part's data never holds the
 * delimiter; a success has seen the closing delimiter. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/multipart.h"
#include "fuzz.h"

struct seen {
    char names[64][64];
    size_t sizes[64];
    unsigned long long sums[64];
    size_t parts;
    bool in_part;
};

static int begin(const struct multipart_part *p, void *ctx, err_t *err)
{
    struct seen *s = ctx;
    fuzz_assert(!s->in_part);
    if (s->parts < 64)
        snprintf(s->names[s->parts], sizeof s->names[0], "%.63s", p->name);
    s->in_part = true;
    return 0;
}

static int data(const char *d, size_t len, void *ctx, err_t *err)
{
    struct seen *s = ctx;
    fuzz_assert(s->in_part && len > 0);
    fuzz_assert(!memmem(d, len, "\r\n--BND", 7));
    if (s->parts < 64) {
        s->sizes[s->parts] += len;
        for (size_t i = 0; i < len; i++)
            s->sums[s->parts] = s->sums[s->parts] * 31 + (unsigned char)d[i];
    }
    return 0;
}

static int end(void *ctx, err_t *err)
{
    struct seen *s = ctx;
    fuzz_assert(s->in_part);
    s->in_part = false;
    s->parts++;
    return 0;
}

static int run(const char *body, size_t size, size_t piece, struct seen *s, err_t *err)
{
    memset(s, 0, sizeof *s);
    struct multipart_callbacks cb = {begin, data, end};
    struct multipart_reader *r = multipart_reader_new("BND", &cb, s, err);
    fuzz_assert(r);
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < size; at += piece)
        rc = multipart_reader_feed(r, body + at, size - at < piece ? size - at : piece, err);
    if (rc == 0)
        rc = multipart_reader_finish(r, err);
    multipart_reader_free(r);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size == 0)
        return 0;
    size_t piece = 1 + in[0] % 13;
    const char *body = (const char *)in + 1;
    size--;
    static struct seen a, b;
    err_t ea = {0}, eb = {0};
    int ra = run(body, size, piece, &a, &ea);
    int rb = run(body, size, size ? size : 1, &b, &eb);
    fuzz_assert(ra == rb);
    if (ra < 0) {
        fuzz_assert(ea.errnum == EINVAL || ea.errnum == E2BIG);
        fuzz_assert(ea.msg[0]);
    } else {
        fuzz_assert(!a.in_part);
    }
    fuzz_assert(a.parts == b.parts);
    for (size_t i = 0; i < a.parts && i < 64; i++)
        fuzz_assert(strcmp(a.names[i], b.names[i]) == 0 && a.sizes[i] == b.sizes[i] &&
                    a.sums[i] == b.sums[i]);
    return 0;
}
