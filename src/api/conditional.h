/* Conditional downloads (RFC 9110, section 13): a file's validators as a download states them
 * (ETag, Last-Modified) and the preconditions a client sends against them (If-Match,
 * If-Unmodified-Since, If-None-Match, If-Modified-Since, If-Range), evaluated in the RFC's order.
 * Pure functions over header values the caller took from the request; a header that does not
 * parse is ignored, as the RFC asks. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define COND_HEADER_MAX 512 /* longer precondition headers are ignored */

struct cond_validators {
    char etag[48];          /* strong: "MTIME_NS-SIZE" in hex, quoted */
    char last_modified[32]; /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    int64_t mtime_s;        /* what Last-Modified says, in seconds */
};
/* The validators of a file of size bytes last modified at mtime_ns (ns since the epoch). */
void cond_validators_make(uint64_t size, int64_t mtime_ns, struct cond_validators *v);

/* The request's preconditions; NULL for an absent header. */
struct cond_request {
    const char *if_match, *if_unmodified_since, *if_none_match, *if_modified_since;
};
/* 0: serve the file; 304: Not Modified (a GET's If-None-Match or If-Modified-Since holds);
 * 412: Precondition Failed (If-Match or If-Unmodified-Since fails). */
int cond_evaluate(const struct cond_validators *v, const struct cond_request *r);
/* If-Range (NULL: absent): true when a Range may be honoured (no If-Range, or one that names the
 * current ETag, strongly, or the exact Last-Modified date), false when the whole file is the
 * answer. */
bool cond_if_range(const struct cond_validators *v, const char *if_range);

/* An HTTP-date in any of the RFC's three forms (IMF-fixdate, RFC 850, asctime) as seconds since
 * the epoch; -1 when it is none (or before 1970). */
int64_t cond_http_date(const char *s);
