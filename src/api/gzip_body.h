/* gzip bodies for envd's /files (zlib): uploads sent with Content-Encoding: gzip decoded in
 * pieces, downloads encoded when Accept-Encoding picks gzip, as envd does. Streams only: nothing
 * here holds a body, and each step's output is bounded by the caller's buffer, so a gzip bomb
 * costs as much as its decoded bytes are let through, never more memory. Hostile input: a corrupt
 * or truncated stream is EINVAL with a message. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Whether a Content-Encoding value asks for gzip (1), for nothing ("", identity: 0), or for what
 * envd does not take (-1 with err). */
int gzip_content_encoding(const char *value, err_t *err);
/* Whether an Accept-Encoding value picks gzip for the answer: gzip listed with a quality above
 * 0 and not below identity's (envd's choice; "gzip, deflate", the SDK's fetch default, picks it).
 */
bool gzip_accepted(const char *accept_encoding);

struct gzip_decoder;
struct gzip_decoder *gzip_decoder_new(err_t *err);
/* One step: decodes from in[0..len) into out (cap > 0 bytes); *used input bytes were taken,
 * *made output bytes written. Members that follow one another are one body, as Go's reader
 * takes them. -1 with err (EINVAL) for a stream that is not gzip or is corrupt. */
int gzip_decoder_step(struct gzip_decoder *g, const char *in, size_t len, size_t *used, char *out,
                      size_t cap, size_t *made, err_t *err);
/* The body ended: -1 with err (EINVAL) unless it ended at the end of a member. */
int gzip_decoder_finish(const struct gzip_decoder *g, err_t *err);
uint64_t gzip_decoder_total(const struct gzip_decoder *g); /* bytes decoded so far */
void gzip_decoder_free(struct gzip_decoder *g);

struct gzip_encoder;
struct gzip_encoder *gzip_encoder_new(err_t *err); /* level 1: the daemon's loop pays for it */
/* One step: encodes from in[0..len) into out (cap bytes); with finish (all input given), the
 * stream's end too. *used, *made as above; *done once the end was written whole. */
int gzip_encoder_step(struct gzip_encoder *g, const char *in, size_t len, bool finish, size_t *used,
                      char *out, size_t cap, size_t *made, bool *done, err_t *err);
void gzip_encoder_free(struct gzip_encoder *g);
