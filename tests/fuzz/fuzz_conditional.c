/* A download's preconditions (src/api/conditional.h): the input, split at NULs, is up to five
 * header values (If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since, If-Range; an
 * empty one absent) against a file whose size and mtime come from the first 16 bytes. Checked:
 * the answer is 0, 304 or 412; a date parses to -1 or a time since 1970; the file's own validators
 * always satisfy If-Match, If-None-Match (304) and If-Range. */
#include <stdlib.h>
#include <string.h>

#include "api/conditional.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16)
        return 0;
    uint64_t fsize;
    int64_t mtime_ns;
    memcpy(&fsize, data, 8);
    memcpy(&mtime_ns, data + 8, 8);
    char *text = malloc(size - 16 + 1);
    if (!text)
        return 0;
    memcpy(text, data + 16, size - 16);
    text[size - 16] = '\0';
    const char *h[5] = {0};
    char *p = text, *end = text + (size - 16);
    for (size_t i = 0; i < 5 && p <= end; i++) {
        h[i] = *p ? p : NULL;
        p += strlen(p) + 1;
    }
    struct cond_validators v;
    cond_validators_make(fsize, mtime_ns, &v);
    fuzz_assert(v.etag[0] == '"' && strlen(v.etag) < sizeof v.etag);
    struct cond_request r = {h[0], h[1], h[2], h[3]};
    int st = cond_evaluate(&v, &r);
    fuzz_assert(st == 0 || st == 304 || st == 412);
    for (size_t i = 0; i < 5; i++)
        if (h[i]) {
            fuzz_assert(cond_http_date(h[i]) >= -1); /* -1, or a time since 1970 */
        }
    cond_if_range(&v, h[4]);
    fuzz_assert(cond_evaluate(&v, &(struct cond_request){.if_match = v.etag}) == 0);
    fuzz_assert(cond_evaluate(&v, &(struct cond_request){.if_none_match = v.etag}) == 304);
    fuzz_assert(cond_if_range(&v, v.etag));
    if (v.last_modified[0] && v.mtime_s >= 0) /* an HTTP-date before 1970 is none here */
        fuzz_assert(cond_if_range(&v, v.last_modified));
    free(text);
    return 0;
}
