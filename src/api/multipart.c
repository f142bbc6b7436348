#include "api/multipart.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/json_input.h"

enum state {
    PREAMBLE,        /* before the first delimiter */
    AFTER_DELIMITER, /* "--" ends the body, optional white space then CRLF starts a part */
    HEADERS,
    BODY,
    EPILOGUE,
};

struct multipart_reader {
    enum state state;
    char delimiter[MULTIPART_BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
    size_t delimiter_len;
    /* Bytes that may be the start of a delimiter, held until the next piece says. */
    char hold[MULTIPART_BOUNDARY_MAX + 5];
    size_t n_hold;
    char headers[MULTIPART_HEADERS_MAX + 1];
    size_t n_headers;
    char after[2]; /* AFTER_DELIMITER's bytes so far */
    size_t n_after;
    size_t parts;
    struct multipart_part part;
    struct multipart_callbacks cb;
    void *ctx;
};

#define refuse(err, errnum, ...) api_input_error((err), (errnum), "multipart: " __VA_ARGS__)

int multipart_boundary(const char *content_type, char *out, size_t size, err_t *err)
{
    out[0] = '\0';
    if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) != 0)
        return refuse(err, EINVAL, "the body is not multipart/form-data");
    const char *p = content_type + 19;
    while ((p = strchr(p, ';'))) {
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncasecmp(p, "boundary=", 9) != 0)
            continue;
        p += 9;
        size_t n = 0;
        if (*p == '"') {
            p++;
            while (p[n] && p[n] != '"')
                n++;
            if (p[n] != '"')
                return refuse(err, EINVAL, "the boundary's quote is not closed");
        } else {
            n = strcspn(p, "; \t");
        }
        if (n == 0 || n > MULTIPART_BOUNDARY_MAX || n + 1 > size)
            return refuse(err, EINVAL, "the boundary must be 1 to %d characters",
                          MULTIPART_BOUNDARY_MAX);
        memcpy(out, p, n);
        out[n] = '\0';
        return 0;
    }
    return refuse(err, EINVAL, "Content-Type has no boundary");
}

struct multipart_reader *multipart_reader_new(const char *boundary,
                                              const struct multipart_callbacks *cb, void *ctx,
                                              err_t *err)
{
    size_t n = strlen(boundary);
    if (n == 0 || n > MULTIPART_BOUNDARY_MAX) {
        refuse(err, EINVAL, "the boundary must be 1 to %d characters", MULTIPART_BOUNDARY_MAX);
        return NULL;
    }
    struct multipart_reader *r = calloc(1, sizeof *r);
    if (!r) {
        err_set(err, ENOMEM, "multipart");
        return NULL;
    }
    memcpy(r->delimiter, "\r\n--", 4);
    memcpy(r->delimiter + 4, boundary, n);
    r->delimiter_len = n + 4;
    /* The body's first delimiter has no CRLF before it: as if it had. */
    memcpy(r->hold, "\r\n", 2);
    r->n_hold = 2;
    r->cb = *cb;
    r->ctx = ctx;
    return r;
}

/* A parameter's value from a Content-Disposition ("name", "filename"), quoted or a token, with
 * backslash escapes in quotes; 1 when present, 0 absent, -1 with err. */
static int disposition_param(const char *value, const char *param, char *out, size_t size,
                             err_t *err)
{
    size_t plen = strlen(param);
    for (const char *p = strchr(value, ';'); p; p = strchr(p, ';')) {
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncasecmp(p, param, plen) != 0 || p[plen] != '=')
            continue;
        p += plen + 1;
        size_t n = 0;
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1])
                    p++;
                if (n + 1 >= size)
                    return refuse(err, E2BIG, "%s is longer than %zu bytes", param, size - 1);
                out[n++] = *p;
            }
            if (*p != '"')
                return refuse(err, EINVAL, "%s's quote is not closed", param);
        } else {
            n = strcspn(p, "; \t");
            if (n + 1 > size)
                return refuse(err, E2BIG, "%s is longer than %zu bytes", param, size - 1);
            memcpy(out, p, n);
        }
        out[n] = '\0';
        return 1;
    }
    return 0;
}

static int parse_headers(struct multipart_reader *r, err_t *err)
{
    memset(&r->part, 0, sizeof r->part);
    bool disposition = false;
    char *save = NULL;
    r->headers[r->n_headers] = '\0';
    for (char *line = strtok_r(r->headers, "\r\n", &save); line;
         line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');
        if (!colon)
            return refuse(err, EINVAL, "a part's header line has no colon");
        *colon = '\0';
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t')
            value++;
        if (strcasecmp(line, "Content-Disposition") != 0)
            continue;
        if (strncasecmp(value, "form-data", 9) != 0)
            return refuse(err, EINVAL, "a part is not form-data");
        disposition = true;
        if (disposition_param(value, "name", r->part.name, sizeof r->part.name, err) < 0)
            return -1;
        int f =
            disposition_param(value, "filename", r->part.filename, sizeof r->part.filename, err);
        if (f < 0)
            return -1;
        r->part.has_filename = f == 1;
    }
    if (!disposition)
        return refuse(err, EINVAL, "a part has no Content-Disposition");
    if (++r->parts > MULTIPART_PARTS_MAX)
        return refuse(err, E2BIG, "more than %d parts", MULTIPART_PARTS_MAX);
    return r->cb.part_begin ? r->cb.part_begin(&r->part, r->ctx, err) : 0;
}

static int emit(struct multipart_reader *r, const char *data, size_t len, err_t *err)
{
    if (len == 0 || r->state != BODY)
        return 0;
    return r->cb.part_data ? r->cb.part_data(data, len, r->ctx, err) : 0;
}

/* Bytes after a delimiter: "--" ends the body; else optional spaces, then CRLF. */
static int after_delimiter(struct multipart_reader *r, const char **data, size_t *len, err_t *err)
{
    while (*len > 0) {
        char c = **data;
        (*data)++;
        (*len)--;
        if (r->n_after == 0 && (c == ' ' || c == '\t'))
            continue;
        r->after[r->n_after++] = c;
        if (r->n_after < 2)
            continue;
        r->n_after = 0;
        if (r->after[0] == '-' && r->after[1] == '-') {
            r->state = EPILOGUE;
            return 0;
        }
        if (r->after[0] == '\r' && r->after[1] == '\n') {
            r->state = HEADERS;
            r->n_headers = 0;
            return 0;
        }
        return refuse(err, EINVAL, "a delimiter is followed by neither CRLF nor \"--\"");
    }
    return 0;
}

static int headers_take(struct multipart_reader *r, const char **data, size_t *len, err_t *err)
{
    while (*len > 0) {
        if (r->n_headers >= MULTIPART_HEADERS_MAX)
            return refuse(err, E2BIG, "a part's headers are longer than %d bytes",
                          MULTIPART_HEADERS_MAX);
        r->headers[r->n_headers++] = **data;
        (*data)++;
        (*len)--;
        /* A part with no headers at all: its blank line comes first. */
        bool none = r->n_headers == 2 && memcmp(r->headers, "\r\n", 2) == 0;
        bool end = r->n_headers >= 4 && memcmp(r->headers + r->n_headers - 4, "\r\n\r\n", 4) == 0;
        if (none || end) {
            r->n_headers -= none ? 2 : 4;
            if (parse_headers(r, err) < 0)
                return -1;
            r->state = BODY;
            return 0;
        }
    }
    return 0;
}

/* PREAMBLE and BODY: look for the delimiter across pieces. Data before it goes out (in BODY),
 * a possible start of it is held. */
static int scan(struct multipart_reader *r, const char **data, size_t *len, err_t *err)
{
    /* Work on hold + a slice of the piece, at most 64 KiB at a time. */
    enum { SLICE = 64 * 1024 };
    static char buf[SLICE + sizeof r->hold];
    size_t take = *len < SLICE ? *len : SLICE;
    memcpy(buf, r->hold, r->n_hold);
    memcpy(buf + r->n_hold, *data, take);
    size_t n = r->n_hold + take;
    *data += take;
    *len -= take;
    r->n_hold = 0;
    char *hit = memmem(buf, n, r->delimiter, r->delimiter_len);
    if (hit) {
        size_t before = (size_t)(hit - buf);
        if (emit(r, buf, before, err) < 0)
            return -1;
        if (r->state == BODY && r->cb.part_end && r->cb.part_end(r->ctx, err) < 0)
            return -1;
        r->state = AFTER_DELIMITER;
        r->n_after = 0;
        /* What follows the delimiter in this slice goes back to the front of the piece. */
        size_t rest = n - before - r->delimiter_len;
        *data -= rest;
        *len += rest;
        return 0;
    }
    /* No delimiter: keep the longest tail that is a prefix of it. */
    size_t keep = r->delimiter_len - 1 < n ? r->delimiter_len - 1 : n;
    while (keep > 0 && memcmp(buf + n - keep, r->delimiter, keep) != 0)
        keep--;
    if (emit(r, buf, n - keep, err) < 0)
        return -1;
    memcpy(r->hold, buf + n - keep, keep);
    r->n_hold = keep;
    return 0;
}

int multipart_reader_feed(struct multipart_reader *r, const char *data, size_t len, err_t *err)
{
    while (len > 0) {
        int rc;
        switch (r->state) {
        case PREAMBLE:
        case BODY:
            rc = scan(r, &data, &len, err);
            break;
        case AFTER_DELIMITER:
            rc = after_delimiter(r, &data, &len, err);
            break;
        case HEADERS:
            rc = headers_take(r, &data, &len, err);
            break;
        case EPILOGUE:
        default:
            return 0; /* ignored, as RFC 2046 says */
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

int multipart_reader_finish(struct multipart_reader *r, err_t *err)
{
    if (r->state != EPILOGUE)
        return refuse(err, EINVAL, "the body ended before its closing delimiter");
    return 0;
}

void multipart_reader_free(struct multipart_reader *r)
{
    free(r);
}
