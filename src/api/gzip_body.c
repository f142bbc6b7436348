#include "api/gzip_body.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "api/json_input.h"

struct gzip_decoder {
    z_stream z;
    bool in_member; /* a member began and has not ended */
    unsigned members;
    uint64_t total;
};

struct gzip_encoder {
    z_stream z;
};

/* One token of a comma-separated header value: its name (trimmed) and its q (1 by default). */
static const char *next_token(const char *s, char *name, size_t size, double *q)
{
    while (*s == ' ' || *s == '\t' || *s == ',')
        s++;
    size_t n = 0;
    while (*s && *s != ',' && *s != ';' && *s != ' ' && *s != '\t') {
        if (n + 1 < size)
            name[n++] = *s;
        s++;
    }
    name[n] = '\0';
    *q = 1;
    while (*s && *s != ',') {
        if (*s == ';') {
            const char *p = s + 1;
            while (*p == ' ')
                p++;
            if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
                char *end;
                double v = strtod(p + 2, &end);
                *q = end == p + 2 || v < 0 ? 0 : v > 1 ? 1 : v;
            }
        }
        s++;
    }
    return s;
}

int gzip_content_encoding(const char *value, err_t *err)
{
    if (!value)
        return 0;
    char name[32];
    double q;
    const char *rest = next_token(value, name, sizeof name, &q);
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (*rest)
        return api_input_error(err, EINVAL, "one Content-Encoding at most (gzip)");
    if (!name[0] || strcasecmp(name, "identity") == 0)
        return 0;
    if (strcasecmp(name, "gzip") == 0 || strcasecmp(name, "x-gzip") == 0)
        return 1;
    return api_input_error(err, EINVAL, "unsupported Content-Encoding: %.32s, supported: [gzip]",
                           name);
}

bool gzip_accepted(const char *accept_encoding)
{
    if (!accept_encoding)
        return false;
    double gzip = -1, identity = -1, any = -1;
    const char *s = accept_encoding;
    for (int i = 0; *s && i < 64; i++) {
        char name[32];
        double q;
        s = next_token(s, name, sizeof name, &q);
        if (strcasecmp(name, "gzip") == 0 || strcasecmp(name, "x-gzip") == 0)
            gzip = q > gzip ? q : gzip;
        else if (strcasecmp(name, "identity") == 0)
            identity = q;
        else if (strcmp(name, "*") == 0)
            any = q;
    }
    if (gzip < 0) /* not listed: "*" may stand for it, when identity is refused */
        gzip = identity == 0 || (identity < 0 && any == 0) ? any : -1;
    return gzip > 0 && gzip >= identity;
}

struct gzip_decoder *gzip_decoder_new(err_t *err)
{
    struct gzip_decoder *g = calloc(1, sizeof *g);
    if (!g) {
        err_set(err, ENOMEM, "gzip: out of memory");
        return NULL;
    }
    /* 16 + MAX_WBITS: the gzip wrapper only, never zlib's or raw deflate */
    if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
        free(g);
        err_set(err, ENOMEM, "gzip: inflateInit2");
        return NULL;
    }
    return g;
}

int gzip_decoder_step(struct gzip_decoder *g, const char *in, size_t len, size_t *used, char *out,
                      size_t cap, size_t *made, err_t *err)
{
    *used = *made = 0;
    if (len > UINT32_MAX)
        len = UINT32_MAX;
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    if (!g->in_member) {
        if (len == 0)
            return 0;
        inflateReset(&g->z); /* the next member */
        g->in_member = true;
        g->members++;
    }
    g->z.next_in = (Bytef *)in;
    g->z.avail_in = (uInt)len;
    g->z.next_out = (Bytef *)out;
    g->z.avail_out = (uInt)cap;
    int rc = inflate(&g->z, Z_NO_FLUSH);
    *used = len - g->z.avail_in;
    *made = cap - g->z.avail_out;
    g->total += *made;
    if (rc == Z_STREAM_END) {
        g->in_member = false;
        return 0;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && (*used || *made || len == 0)))
        return 0;
    return api_input_error(err, EINVAL, "the gzip body is corrupt: %s",
                           g->z.msg ? g->z.msg : "not a gzip stream");
}

int gzip_decoder_finish(const struct gzip_decoder *g, err_t *err)
{
    if (g->in_member)
        return api_input_error(err, EINVAL, "the gzip body is truncated: it ends inside a member");
    if (g->members == 0) /* as Go's reader: no header is an error, not an empty file */
        return api_input_error(err, EINVAL, "the gzip body is empty: no gzip header");
    return 0;
}

uint64_t gzip_decoder_total(const struct gzip_decoder *g)
{
    return g->total;
}

void gzip_decoder_free(struct gzip_decoder *g)
{
    if (!g)
        return;
    inflateEnd(&g->z);
    free(g);
}

struct gzip_encoder *gzip_encoder_new(err_t *err)
{
    struct gzip_encoder *g = calloc(1, sizeof *g);
    if (!g) {
        err_set(err, ENOMEM, "gzip: out of memory");
        return NULL;
    }
    if (deflateInit2(&g->z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(g);
        err_set(err, ENOMEM, "gzip: deflateInit2");
        return NULL;
    }
    return g;
}

int gzip_encoder_step(struct gzip_encoder *g, const char *in, size_t len, bool finish, size_t *used,
                      char *out, size_t cap, size_t *made, bool *done, err_t *err)
{
    *used = *made = 0;
    *done = false;
    if (len > UINT32_MAX)
        len = UINT32_MAX;
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    g->z.next_in = (Bytef *)in;
    g->z.avail_in = (uInt)len;
    g->z.next_out = (Bytef *)out;
    g->z.avail_out = (uInt)cap;
    int rc = deflate(&g->z, finish ? Z_FINISH : Z_NO_FLUSH);
    *used = len - g->z.avail_in;
    *made = cap - g->z.avail_out;
    if (rc == Z_STREAM_END) {
        *done = true;
        return 0;
    }
    if (rc == Z_OK || rc == Z_BUF_ERROR)
        return 0;
    return err_set(err, EIO, "gzip: deflate: %s", g->z.msg ? g->z.msg : "failed");
}

void gzip_encoder_free(struct gzip_encoder *g)
{
    if (!g)
        return;
    deflateEnd(&g->z);
    free(g);
}
