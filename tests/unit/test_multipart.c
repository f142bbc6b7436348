/* src/api/multipart: a body as the SDK's fetch (undici) sends a files.write upload, a 10 MiB part
 * in odd-sized pieces, data that looks like the delimiter, and refusals (no closing delimiter,
 * headers too long, a part that is not form-data, Content-Types without a boundary). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/multipart.h"
#include "util/strfmt.h"
#include "tap.h"

struct got {
    char names[8][64], filenames[8][256];
    char data[8][256];
    size_t sizes[8];
    unsigned long long sums[8];
    size_t parts;
};

static int begin(const struct multipart_part *p, void *ctx, err_t *err)
{
    struct got *g = ctx;
    if (g->parts < 8) {
        /* the test's names are short: a longer one fails the comparison that follows */
        if (strfmt(g->names[g->parts], 64, "%s", p->name) < 0)
            g->names[g->parts][0] = '\0';
        if (strfmt(g->filenames[g->parts], 256, "%s", p->filename) < 0)
            g->filenames[g->parts][0] = '\0';
    }
    return 0;
}

static int data(const char *d, size_t len, void *ctx, err_t *err)
{
    struct got *g = ctx;
    if (g->parts >= 8)
        return 0;
    size_t have = g->sizes[g->parts];
    if (have < 255)
        memcpy(g->data[g->parts] + have, d, len < 255 - have ? len : 255 - have);
    for (size_t i = 0; i < len; i++)
        g->sums[g->parts] = g->sums[g->parts] * 31 + (unsigned char)d[i];
    g->sizes[g->parts] += len;
    return 0;
}

static int end(void *ctx, err_t *err)
{
    ((struct got *)ctx)->parts++;
    return 0;
}

static int read_body(const char *boundary, const char *body, size_t len, size_t piece,
                     struct got *g, err_t *err)
{
    memset(g, 0, sizeof *g);
    struct multipart_callbacks cb = {begin, data, end};
    struct multipart_reader *r = multipart_reader_new(boundary, &cb, g, err);
    if (!r)
        return -1;
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < len; at += piece)
        rc = multipart_reader_feed(r, body + at, len - at < piece ? len - at : piece, err);
    if (rc == 0)
        rc = multipart_reader_finish(r, err);
    multipart_reader_free(r);
    return rc;
}

int main(void)
{
    err_t err = {0};
    char boundary[MULTIPART_BOUNDARY_MAX + 1];
    ok(multipart_boundary("multipart/form-data; boundary=----formdata-undici-0123456789", boundary,
                          sizeof boundary, &err) == 0 &&
           strcmp(boundary, "----formdata-undici-0123456789") == 0,
       "the boundary of undici's Content-Type");
    ok(multipart_boundary("multipart/form-data; charset=utf-8; boundary=\"a b\"", boundary,
                          sizeof boundary, &err) == 0 &&
           strcmp(boundary, "a b") == 0,
       "a quoted boundary after another parameter");
    ok(multipart_boundary("application/json", boundary, sizeof boundary, &err) < 0 &&
           multipart_boundary("multipart/form-data", boundary, sizeof boundary, &err) < 0 &&
           multipart_boundary("multipart/form-data; boundary=", boundary, sizeof boundary, &err) <
               0,
       "another type, no boundary, an empty one: refused");

    const char *b = "----formdata-undici-0123456789";
    const char *sdk =
        "------formdata-undici-0123456789\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
        "hello\r\n--not-it\r\n"
        "\r\n------formdata-undici-0123456789\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"rel/b \\\"q\\\".txt\"\r\n"
        "\r\n"
        "\r\n------formdata-undici-0123456789--\r\n";
    struct got g;
    int all = 1;
    for (size_t piece = 1; piece <= strlen(sdk); piece++) {
        int rc = read_body(b, sdk, strlen(sdk), piece, &g, &err);
        if (rc != 0 || g.parts != 2 || strcmp(g.filenames[0], "/home/user/a.txt") != 0 ||
            strcmp(g.data[0], "hello\r\n--not-it\r\n") != 0 || g.sizes[1] != 0 ||
            strcmp(g.filenames[1], "rel/b \"q\".txt") != 0 || strcmp(g.names[1], "file") != 0) {
            printf("# piece %zu: rc %d (%s), %zu parts\n", piece, rc, err.msg, g.parts);
            all = 0;
            break;
        }
    }
    ok(all, "the SDK's two-file upload, in pieces of every size: names, paths (escapes "
            "undone), contents (a near-delimiter kept), an empty file");

    size_t big = 10u << 20;
    char *body = malloc(big + 512);
    int n = snprintf(body, 512,
                     "--X\r\nContent-Disposition: form-data; name=\"file\"; "
                     "filename=\"big\"\r\n\r\n");
    unsigned long long sum = 0;
    for (size_t i = 0; i < big; i++) {
        body[n + i] = (char)(i * 7 + (i >> 9));
        sum = sum * 31 + (unsigned char)body[n + i];
    }
    size_t len = (size_t)n + big;
    len += (size_t)snprintf(body + len, 32, "\r\n--X--");
    ok(read_body("X", body, len, 999, &g, &err) == 0 && g.parts == 1 && g.sizes[0] == big &&
           g.sums[0] == sum,
       "a 10 MiB part in 999-byte pieces: every byte, in order");
    free(body);

    static const struct {
        const char *body, *says;
        int errnum;
    } bad[] = {
        {"--X\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nabc", "closing delimiter",
         EINVAL},
        {"--X\r\nContent-Type: text/plain\r\n\r\nabc\r\n--X--", "no Content-Disposition", EINVAL},
        {"--X\r\nContent-Disposition: attachment\r\n\r\nabc\r\n--X--", "not form-data", EINVAL},
        {"--X\r\nno colon here\r\n\r\nabc\r\n--X--", "no colon", EINVAL},
        {"--Xjunk\r\n", "neither CRLF", EINVAL},
        {"--X\r\nContent-Disposition: form-data; name=\"unclosed\r\n\r\n\r\n--X--", "not closed",
         EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_clear(&err);
        int rc = read_body("X", bad[i].body, strlen(bad[i].body), 3, &g, &err);
        ok(rc < 0 && err.errnum == bad[i].errnum && strstr(err.msg, bad[i].says), "refused: %s",
           err.msg);
    }
    char *huge = malloc(MULTIPART_HEADERS_MAX + 64);
    n = snprintf(huge, 64, "--X\r\nX-Pad: ");
    memset(huge + n, 'a', MULTIPART_HEADERS_MAX);
    ok(read_body("X", huge, (size_t)n + MULTIPART_HEADERS_MAX, 100, &g, &err) < 0 &&
           err.errnum == E2BIG,
       "a part's headers over %d bytes: E2BIG", MULTIPART_HEADERS_MAX);
    free(huge);
    return done_testing();
}
