/* The Connect request reader (src/api/connect_rpc.h): the input is a request body, fed in pieces
 * whose sizes come from its first byte. Checked: the reader completes exactly when the body starts
 * with a valid envelope header (flags 0, a length within the limit) followed by that many bytes and
 * nothing more; the message it gives is those bytes; every refusal has its errno and a message;
 * the same body fed whole gives the same result. */
#include <errno.h>
#include <string.h>

#include "api/connect_rpc.h"
#include "fuzz.h"

#define MAX 4096

static int feed(const uint8_t *data, size_t size, size_t piece, struct connect_reader *r,
                err_t *err)
{
    connect_reader_init(r, MAX);
    for (size_t at = 0; at < size; at += piece) {
        size_t n = size - at < piece ? size - at : piece;
        if (connect_reader_feed(r, data + at, n, err) < 0)
            return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t piece = 1 + data[0] % 17;
    data++;
    size--;
    struct connect_reader a, b;
    err_t ea = {0}, eb = {0};
    int ra = feed(data, size, piece, &a, &ea);
    int rb = feed(data, size, size ? size : 1, &b, &eb);
    fuzz_assert(ra == rb && a.complete == b.complete);
    bool header_ok = size >= 5 && data[0] == 0;
    uint32_t len = header_ok ? (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 |
                                   (uint32_t)data[3] << 8 | data[4]
                             : 0;
    bool want_complete = header_ok && len <= MAX && size == 5 + (size_t)len;
    fuzz_assert((ra == 0 && a.complete) == want_complete);
    if (ra < 0) {
        fuzz_assert(ea.errnum == EINVAL || ea.errnum == E2BIG || ea.errnum == EPROTO);
        fuzz_assert(ea.msg[0] && ea.errnum == eb.errnum);
    }
    if (want_complete)
        fuzz_assert(memcmp(a.message, data + 5, len) == 0 && a.message[len] == '\0');
    connect_reader_free(&a);
    connect_reader_free(&b);
    return 0;
}
