/* src/api/connect_rpc: frames byte for byte as the SDK reads them (the captures in
 * ../shared/e2b/PROTOCOL.md), the error codes and their HTTP statuses, the request reader over
 * pieces of every size. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/connect_rpc.h"
#include "tap.h"

int main(void)
{
    uint8_t *out;
    size_t n;
    const char *start = "{\"event\":{\"start\":{\"pid\":1234}}}";
    ok(connect_envelope(0, start, strlen(start), &out, &n) == 0 && n == 5 + strlen(start) &&
           memcmp(out, "\x00\x00\x00\x00\x20", 5) == 0 &&
           memcmp(out + 5, start, strlen(start)) == 0,
       "a message frame: 00, the length big-endian, the JSON");
    free(out);
    ok(connect_end_stream(NULL, NULL, &out, &n) == 0 && n == 7 &&
           memcmp(out, "\x02\x00\x00\x00\x02{}", 7) == 0,
       "the end of a stream: 02 00 00 00 02 {}");
    free(out);
    enum connect_code nf = CONNECT_NOT_FOUND;
    const char *want = "{\"error\":{\"code\":\"not_found\",\"message\":\"process with pid 1 not "
                       "found\"}}";
    ok(connect_end_stream(&nf, "process with pid 1 not found", &out, &n) == 0 &&
           n == 5 + strlen(want) && out[0] == 2 && out[4] == strlen(want) &&
           memcmp(out + 5, want, strlen(want)) == 0,
       "an error at the end of a stream, as envd sends it");
    free(out);
    char *e = connect_error_json(CONNECT_INVALID_ARGUMENT, "bad \"cwd\"\n");
    is_str(e, "{\"code\":\"invalid_argument\",\"message\":\"bad \\\"cwd\\\"\\n\"}",
           "a unary error's body, the message escaped");
    free(e);
    e = connect_error_json(CONNECT_INTERNAL, "\xff\xfe");
    ok(e && strstr(e, "not UTF-8"), "a message that is not UTF-8 still gives JSON");
    free(e);
    ok(connect_code_http_status(CONNECT_INVALID_ARGUMENT) == 400 &&
           connect_code_http_status(CONNECT_UNAUTHENTICATED) == 401 &&
           connect_code_http_status(CONNECT_NOT_FOUND) == 404 &&
           connect_code_http_status(CONNECT_ALREADY_EXISTS) == 409 &&
           connect_code_http_status(CONNECT_UNIMPLEMENTED) == 501 &&
           connect_code_http_status(CONNECT_UNAVAILABLE) == 503 &&
           connect_code_http_status((enum connect_code)99) == 500,
       "HTTP statuses as Connect's table has them");
    ok(connect_code_from_errno(ENOENT) == CONNECT_NOT_FOUND &&
           connect_code_from_errno(EEXIST) == CONNECT_ALREADY_EXISTS &&
           connect_code_from_errno(EACCES) == CONNECT_PERMISSION_DENIED &&
           connect_code_from_errno(ENOSPC) == CONNECT_RESOURCE_EXHAUSTED &&
           connect_code_from_errno(EIO) == CONNECT_INTERNAL,
       "errnos map to codes");

    const char *req =
        "\x00\x00\x00\x00\x4a{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\","
        "\"echo hi\"]},\"stdin\":false}";
    size_t req_len = 5 + 0x4a;
    int all_pieces = 1;
    for (size_t piece = 1; piece <= req_len; piece++) {
        struct connect_reader r;
        err_t err;
        connect_reader_init(&r, 0);
        int rc = 0;
        for (size_t at = 0; rc == 0 && at < req_len; at += piece)
            rc = connect_reader_feed(&r, (const uint8_t *)req + at,
                                     req_len - at < piece ? req_len - at : piece, &err);
        if (rc != 0 || !r.complete || strcmp(r.message, req + 5) != 0)
            all_pieces = 0;
        connect_reader_free(&r);
    }
    ok(all_pieces, "the captured Start request is read whole, in pieces of any size");
    struct connect_reader r;
    err_t err;
    connect_reader_init(&r, 16);
    ok(connect_reader_feed(&r, (const uint8_t *)"\x00\x00\x00\x00\x11", 5, &err) < 0 &&
           err.errnum == E2BIG,
       "a length over the limit is refused from the header alone (%s)", err.msg);
    connect_reader_free(&r);
    connect_reader_init(&r, 0);
    ok(connect_reader_feed(&r, (const uint8_t *)"\x01\x00\x00\x00\x02{}", 7, &err) < 0 &&
           err.errnum == EINVAL,
       "a compressed frame is refused");
    connect_reader_free(&r);
    connect_reader_init(&r, 0);
    ok(connect_reader_feed(&r, (const uint8_t *)"\x00\x00\x00\x00\x02{}x", 8, &err) < 0 &&
           err.errnum == EPROTO,
       "bytes after the one message are refused");
    connect_reader_free(&r);
    connect_reader_init(&r, 0);
    ok(connect_reader_feed(&r, (const uint8_t *)"\x00\x00\x00\x00\x00", 5, &err) == 0 &&
           r.complete && r.message[0] == '\0',
       "an empty message completes with its header");
    connect_reader_free(&r);

    /* a client stream: three envelopes (one empty) in one body, cut into pieces of every size */
    const char stream[] = "\x00\x00\x00\x00\x02{}"
                          "\x00\x00\x00\x00\x00"
                          "\x00\x00\x00\x00\x0b{\"data\":12}";
    size_t stream_len = sizeof stream - 1;
    static const char *const expect[] = {"{}", "", "{\"data\":12}"};
    int every_piece = 1;
    for (size_t piece = 1; piece <= stream_len; piece++) {
        connect_reader_init(&r, 0);
        size_t got = 0, at = 0;
        int rc = 0;
        while (rc == 0 && at < stream_len) {
            size_t cut = stream_len - at < piece ? stream_len - at : piece, off = 0;
            while (rc == 0 && off < cut) {
                size_t used;
                rc = connect_reader_take(&r, (const uint8_t *)stream + at + off, cut - off, &used,
                                         &err);
                off += used;
                if (rc == 0 && r.complete) {
                    if (got >= 3 || strcmp(r.message, expect[got]) != 0)
                        rc = -1;
                    got++;
                    connect_reader_next(&r);
                }
            }
            at += cut;
        }
        if (rc != 0 || got != 3)
            every_piece = 0;
        connect_reader_free(&r);
    }
    ok(every_piece, "a client stream's three messages are read in order, in pieces of any size");
    connect_reader_init(&r, 4);
    size_t used;
    ok(connect_reader_take(&r, (const uint8_t *)"\x00\x00\x00\x00\x02{}\x00\x00\x00\x00\x09", 12,
                           &used, &err) == 0 &&
           used == 7 && r.complete,
       "take stops at the end of one message (%zu bytes used)", used);
    connect_reader_next(&r);
    ok(connect_reader_take(&r, (const uint8_t *)"\x00\x00\x00\x00\x09", 5, &used, &err) < 0 &&
           err.errnum == E2BIG,
       "the next message keeps the reader's limit");
    connect_reader_free(&r);
    return done_testing();
}
