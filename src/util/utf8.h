/* UTF-8 for text that comes out of a sandbox: program output is arbitrary bytes, and it goes into
 * JSON (which must be valid UTF-8, and whose size the caller bounds) or to a terminal (which
 * must not take the program's escape sequences as commands). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copies in[0..len) to a new NUL-free-safe buffer where every invalid sequence becomes U+FFFD.
 * Returns a malloc'd buffer and its length in *out_len, or NULL on allocation failure. */
char *utf8_sanitize(const char *in, size_t len, size_t *out_len);

/* Decoding in chunks (pipe reads), which may cut a sequence in two. The bytes are split into
 * spans of well-formed UTF-8 and single bytes that are part of none: the split utf8_sanitize
 * makes of the whole input, whatever the chunks. A sequence cut at a chunk's end is held (at
 * most 3 bytes) for the next chunk, or until the last (final), where it counts as invalid. */
struct utf8_decoder {
    unsigned char held[4];
    size_t n_held;
};
/* s[0..n) is well-formed UTF-8 (valid) or one byte that is not (!valid). A nonzero return stops
 * the decoding; utf8_decode returns it. */
typedef int (*utf8_span_fn)(void *ctx, const char *s, size_t n, bool valid);
int utf8_decode(struct utf8_decoder *d, const char *in, size_t len, bool final, utf8_span_fn fn,
                void *ctx);

/* Program output kept for a JSON string: valid UTF-8 (each invalid byte as U+FFFD, as
 * utf8_sanitize), and its cost, the bytes it takes between the quotes as jansson writes it:
 * escapes included, and with ascii as JSON_ENSURE_ASCII writes it. Characters are kept while
 * the cost stays within limit; the first that would go past it ends the text (full). The text
 * is never longer than its cost, so its memory is bounded by limit. */
struct utf8_json_text {
    char *text; /* malloc'd, not terminated */
    size_t len, cap;
    uint64_t cost, limit;
    bool ascii, full;
    struct utf8_decoder dec;
};
/* Appends the next chunk (final: the last). Returns 0, or -1 with errno ENOMEM, in which case
 * the text keeps what it had. */
int utf8_json_append(struct utf8_json_text *t, const char *in, size_t len, bool final);
/* The cost in a JSON string of one character: a well-formed sequence of n bytes. */
size_t utf8_json_cost(const char *seq, size_t n, bool ascii);

/* Renders bytes for a terminal, so that none is taken as a command: printable text and valid
 * UTF-8 pass, with \n \t \r and \b unless one_line; other C0 controls and DEL in caret notation
 * (ESC as "^["); C1 controls (U+0080..U+009F) and bytes that are not UTF-8 as "\xNN" per byte.
 * Writes to out, which must hold UTF8_RENDER_MAX(len) bytes, and returns the length written. */
#define UTF8_RENDER_MAX(len) (4 * ((len) + 3))
size_t utf8_render(struct utf8_decoder *d, const char *in, size_t len, bool final, bool one_line,
                   char *out);
