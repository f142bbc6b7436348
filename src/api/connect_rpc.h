/* The Connect protocol's JSON flavour as E2B's envd speaks it (../shared/e2b/PROTOCOL.md section
 * 3): the framing of streams (envelopes: a flags byte, a 4-byte big-endian length, the JSON), the
 * error codes with their HTTP statuses, and the end-of-stream frame. Pure functions, no I/O: the
 * decoder takes bytes as they arrive and is fed hostile input (fuzz_connect_rpc). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define CONNECT_ENVELOPE_HEADER 5
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END_STREAM 0x02
/* A request envelope larger than this is refused (envd's requests are small: a command line and
 * its env, a path; the env's own limit is below it). */
#define CONNECT_MAX_REQUEST (1u << 20)

/* Connect's error codes, as envd and the SDK name them. */
enum connect_code {
    CONNECT_CANCELED,
    CONNECT_UNKNOWN,
    CONNECT_INVALID_ARGUMENT,
    CONNECT_DEADLINE_EXCEEDED,
    CONNECT_NOT_FOUND,
    CONNECT_ALREADY_EXISTS,
    CONNECT_PERMISSION_DENIED,
    CONNECT_RESOURCE_EXHAUSTED,
    CONNECT_FAILED_PRECONDITION,
    CONNECT_ABORTED,
    CONNECT_OUT_OF_RANGE,
    CONNECT_UNIMPLEMENTED,
    CONNECT_INTERNAL,
    CONNECT_UNAVAILABLE,
    CONNECT_DATA_LOSS,
    CONNECT_UNAUTHENTICATED,
};
/* "invalid_argument", ... */
const char *connect_code_name(enum connect_code c);
/* The HTTP status of a unary error with this code (Connect's table: invalid_argument 400, ...). */
int connect_code_http_status(enum connect_code c);
/* The code for an errno from the engine or the files workers (ENOENT not_found, EEXIST
 * already_exists, EACCES/EPERM permission_denied, EINVAL/ENAMETOOLONG/ENOTDIR/EISDIR
 * invalid_argument, ENOSPC/EDQUOT resource_exhausted, else internal). */
enum connect_code connect_code_from_errno(int errnum);

/* {"code":"not_found","message":"..."}: a unary error's body, and inside an end-of-stream frame
 * as {"error":{...}}. malloc'd, NULL on no memory. */
char *connect_error_json(enum connect_code c, const char *message);

/* One envelope around json (len bytes) with flags, malloc'd into *out (*out_len bytes). */
int connect_envelope(uint8_t flags, const char *json, size_t len, uint8_t **out, size_t *out_len);
/* The stream's last frame: {} when message is NULL, else {"error":{code, message}}. */
int connect_end_stream(const enum connect_code *code, const char *message, uint8_t **out,
                       size_t *out_len);

/* Reads one request envelope from a body that arrives in pieces. */
struct connect_reader {
    uint8_t header[CONNECT_ENVELOPE_HEADER];
    size_t header_have;
    uint32_t length;
    char *message; /* malloc'd once the header is in; NUL-terminated when complete */
    size_t have;
    bool complete;
    size_t max;
};
void connect_reader_init(struct connect_reader *r, size_t max);
/* Takes data[0..len). 0: more wanted, or complete (r->complete: r->message holds the JSON); -1
 * with err (EINVAL for a compressed or end-stream flag, E2BIG for a length over max, EPROTO for
 * bytes past the one envelope). */
int connect_reader_feed(struct connect_reader *r, const uint8_t *data, size_t len, err_t *err);
/* For a client stream (many envelopes): takes data up to the end of one message at most, *used
 * bytes of it; r->complete then holds that message, and connect_reader_next makes ready for the
 * next. -1 with err as connect_reader_feed. */
int connect_reader_take(struct connect_reader *r, const uint8_t *data, size_t len, size_t *used,
                        err_t *err);
void connect_reader_next(struct connect_reader *r);
void connect_reader_free(struct connect_reader *r);
