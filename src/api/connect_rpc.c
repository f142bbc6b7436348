#include "api/connect_rpc.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int http;
} codes[] = {
    [CONNECT_CANCELED] = {"canceled", 408},
    [CONNECT_UNKNOWN] = {"unknown", 500},
    [CONNECT_INVALID_ARGUMENT] = {"invalid_argument", 400},
    [CONNECT_DEADLINE_EXCEEDED] = {"deadline_exceeded", 408},
    [CONNECT_NOT_FOUND] = {"not_found", 404},
    [CONNECT_ALREADY_EXISTS] = {"already_exists", 409},
    [CONNECT_PERMISSION_DENIED] = {"permission_denied", 403},
    [CONNECT_RESOURCE_EXHAUSTED] = {"resource_exhausted", 429},
    [CONNECT_FAILED_PRECONDITION] = {"failed_precondition", 412},
    [CONNECT_ABORTED] = {"aborted", 409},
    [CONNECT_OUT_OF_RANGE] = {"out_of_range", 400},
    [CONNECT_UNIMPLEMENTED] = {"unimplemented", 501},
    [CONNECT_INTERNAL] = {"internal", 500},
    [CONNECT_UNAVAILABLE] = {"unavailable", 503},
    [CONNECT_DATA_LOSS] = {"data_loss", 500},
    [CONNECT_UNAUTHENTICATED] = {"unauthenticated", 401},
};

const char *connect_code_name(enum connect_code c)
{
    return (unsigned)c < sizeof codes / sizeof codes[0] ? codes[c].name : "unknown";
}

int connect_code_http_status(enum connect_code c)
{
    return (unsigned)c < sizeof codes / sizeof codes[0] ? codes[c].http : 500;
}

enum connect_code connect_code_from_errno(int errnum)
{
    switch (errnum) {
    case ENOENT:
    case ESRCH:
        return CONNECT_NOT_FOUND;
    case EEXIST:
        return CONNECT_ALREADY_EXISTS;
    case EACCES:
    case EPERM:
        return CONNECT_PERMISSION_DENIED;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENOTEMPTY:
        return CONNECT_INVALID_ARGUMENT;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case E2BIG:
    case EAGAIN: /* a bounded queue is full */
        return CONNECT_RESOURCE_EXHAUSTED;
    case ETIMEDOUT:
        return CONNECT_DEADLINE_EXCEEDED;
    default:
        return CONNECT_INTERNAL;
    }
}

char *connect_error_json(enum connect_code c, const char *message)
{
    json_t *o =
        json_pack("{s:s, s:s}", "code", connect_code_name(c), "message", message ? message : "");
    if (!o) /* a message that is not UTF-8 */
        o = json_pack("{s:s, s:s}", "code", connect_code_name(c), "message",
                      "(a message that is not UTF-8)");
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

int connect_envelope(uint8_t flags, const char *json, size_t len, uint8_t **out, size_t *out_len)
{
    if (len > UINT32_MAX)
        return -1;
    uint8_t *buf = malloc(CONNECT_ENVELOPE_HEADER + len);
    if (!buf)
        return -1;
    buf[0] = flags;
    buf[1] = (uint8_t)(len >> 24);
    buf[2] = (uint8_t)(len >> 16);
    buf[3] = (uint8_t)(len >> 8);
    buf[4] = (uint8_t)len;
    memcpy(buf + CONNECT_ENVELOPE_HEADER, json, len);
    *out = buf;
    *out_len = CONNECT_ENVELOPE_HEADER + len;
    return 0;
}

int connect_end_stream(const enum connect_code *code, const char *message, uint8_t **out,
                       size_t *out_len)
{
    if (!code)
        return connect_envelope(CONNECT_FLAG_END_STREAM, "{}", 2, out, out_len);
    char *error = connect_error_json(*code, message);
    if (!error)
        return -1;
    size_t n = strlen(error) + sizeof "{\"error\":}" - 1;
    char *json = malloc(n + 1);
    int rc = -1;
    if (json) {
        snprintf(json, n + 1, "{\"error\":%s}", error);
        rc = connect_envelope(CONNECT_FLAG_END_STREAM, json, n, out, out_len);
    }
    free(json);
    free(error);
    return rc;
}

void connect_reader_init(struct connect_reader *r, size_t max)
{
    memset(r, 0, sizeof *r);
    r->max = max ? max : CONNECT_MAX_REQUEST;
}

int connect_reader_take(struct connect_reader *r, const uint8_t *data, size_t len, size_t *used,
                        err_t *err)
{
    const uint8_t *start = data;
    *used = 0;
    while (len > 0 && !r->complete) {
        if (r->header_have < CONNECT_ENVELOPE_HEADER) {
            size_t take = CONNECT_ENVELOPE_HEADER - r->header_have;
            take = take < len ? take : len;
            memcpy(r->header + r->header_have, data, take);
            r->header_have += take;
            data += take;
            len -= take;
            if (r->header_have < CONNECT_ENVELOPE_HEADER)
                break;
            if (r->header[0] != 0) {
                err_set(err, 0,
                        "envelope flags 0x%02x: compressed and end-of-stream request "
                        "frames are not taken",
                        r->header[0]);
                err->errnum = EINVAL;
                return -1;
            }
            r->length = (uint32_t)r->header[1] << 24 | (uint32_t)r->header[2] << 16 |
                        (uint32_t)r->header[3] << 8 | r->header[4];
            if (r->length > r->max) {
                err_set(err, 0, "a request message of %u bytes (at most %zu)", r->length, r->max);
                err->errnum = E2BIG;
                return -1;
            }
            r->message = malloc((size_t)r->length + 1);
            if (!r->message)
                return err_set(err, ENOMEM, "request message");
        }
        size_t take = r->length - r->have;
        take = take < len ? take : len;
        memcpy(r->message + r->have, data, take);
        r->have += take;
        data += take;
        len -= take;
        if (r->have == r->length) {
            r->message[r->length] = '\0';
            r->complete = true;
        }
    }
    *used = (size_t)(data - start);
    return 0;
}

int connect_reader_feed(struct connect_reader *r, const uint8_t *data, size_t len, err_t *err)
{
    size_t used;
    if (len > 0 && r->complete)
        used = 0;
    else if (connect_reader_take(r, data, len, &used, err) < 0)
        return -1;
    if (used < len) {
        err_set(err, 0, "more than one message in a request stream");
        err->errnum = EPROTO;
        return -1;
    }
    return 0;
}

void connect_reader_next(struct connect_reader *r)
{
    size_t max = r->max;
    connect_reader_free(r);
    r->max = max;
}

void connect_reader_free(struct connect_reader *r)
{
    free(r->message);
    memset(r, 0, sizeof *r);
}
