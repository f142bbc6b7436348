/* A streaming multipart/form-data reader (RFC 7578, RFC 2046 section 5.1) for envd's /files
 * uploads, which the SDK sends as one part per file, field "file", filename = the file's path.
 * Bodies of any size pass through in pieces, never held whole; what it holds is bounded (a
 * part's header block, the delimiter's length). Hostile input: every refusal is EINVAL or E2BIG
 * with a message; a fuzz target (fuzz_multipart) checks it against a whole-body reference. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define MULTIPART_BOUNDARY_MAX 70   /* RFC 2046 */
#define MULTIPART_HEADERS_MAX  8192 /* one part's header block */
#define MULTIPART_NAME_MAX     4096 /* a name or filename: a path */
#define MULTIPART_PARTS_MAX    1000

struct multipart_part {
    char name[MULTIPART_NAME_MAX + 1];     /* Content-Disposition's name */
    char filename[MULTIPART_NAME_MAX + 1]; /* its filename, "" when none */
    bool has_filename;
};

struct multipart_callbacks {
    /* Each returns 0 to go on, -1 (err filled) to stop the reading. */
    int (*part_begin)(const struct multipart_part *part, void *ctx, err_t *err);
    int (*part_data)(const char *data, size_t len, void *ctx, err_t *err);
    int (*part_end)(void *ctx, err_t *err);
};

struct multipart_reader; /* opaque; about 9 KiB */

/* The boundary from a Content-Type value ("multipart/form-data; boundary=..."), quoted or not,
 * into out (MULTIPART_BOUNDARY_MAX + 1 bytes); -1 with err for another type or no boundary. */
int multipart_boundary(const char *content_type, char *out, size_t size, err_t *err);
struct multipart_reader *multipart_reader_new(const char *boundary,
                                              const struct multipart_callbacks *cb, void *ctx,
                                              err_t *err);
/* Takes the next piece of the body. */
int multipart_reader_feed(struct multipart_reader *r, const char *data, size_t len, err_t *err);
/* The body ended: -1 with err unless the closing delimiter came. */
int multipart_reader_finish(struct multipart_reader *r, err_t *err);
void multipart_reader_free(struct multipart_reader *r);
