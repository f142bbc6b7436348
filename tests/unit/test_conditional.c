/* src/api/conditional: a file's validators, HTTP-dates in the RFC's three forms, and the
 * preconditions in RFC 9110's order (If-Match before If-None-Match, each date only without its
 * tag header), If-Range; hostile values ignored, never matched. */
#include <string.h>

#include "api/conditional.h"
#include "tap.h"

int main(void)
{
    /* 1994-11-06 08:49:37 UTC, the RFC's own example, plus 0.5 s */
    const int64_t t = 784111777;
    struct cond_validators v;
    cond_validators_make(1234, t * 1000000000 + 500000000, &v);
    is_str(v.last_modified, "Sun, 06 Nov 1994 08:49:37 GMT",
           "Last-Modified: IMF-fixdate, whole seconds");
    ok(v.etag[0] == '"' && v.etag[strlen(v.etag) - 1] == '"' && strstr(v.etag, "-4d2\""),
       "ETag: a strong quoted tag of mtime and size (%s)", v.etag);
    struct cond_validators other;
    cond_validators_make(1235, t * 1000000000 + 500000000, &other);
    ok(strcmp(v.etag, other.etag) != 0, "another size, another ETag");
    cond_validators_make(1234, t * 1000000000 + 500000001, &other);
    ok(strcmp(v.etag, other.etag) != 0, "another mtime (1 ns), another ETag");

    is_u64((uint64_t)cond_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), (uint64_t)t, "IMF-fixdate");
    is_u64((uint64_t)cond_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), (uint64_t)t, "RFC 850");
    is_u64((uint64_t)cond_http_date("Sun Nov  6 08:49:37 1994"), (uint64_t)t, "asctime");
    const char *bad_dates[] = {"",
                               "yesterday",
                               "Sun, 06 Nov 1994 08:49:37",
                               "Sun, 06 Nov 1994 08:49:37 GMT x",
                               "Sun, 32 Nov 1994 08:49:37 GMT",
                               "1994-11-06T08:49:37Z"};
    for (size_t i = 0; i < sizeof bad_dates / sizeof *bad_dates; i++)
        ok(cond_http_date(bad_dates[i]) == -1, "not a date: '%s'", bad_dates[i]);

    char tag[64], weak[70], list[160];
    snprintf(tag, sizeof tag, "%s", v.etag);
    snprintf(weak, sizeof weak, "W/%s", v.etag);
    snprintf(list, sizeof list, "\"nope\", %s ,\"x\"", v.etag);
    struct cond_request none = {0};
    is_u64((uint64_t)cond_evaluate(&v, &none), 0, "no precondition: the file");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_none_match = tag}), 304,
           "If-None-Match with its ETag: 304");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_none_match = weak}), 304,
           "... weakly compared (W/ matches)");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_none_match = list}), 304,
           "... in a list");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_none_match = "*"}), 304,
           "If-None-Match: * on a file that exists: 304");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_none_match = "\"other\""}), 0,
           "another tag: the file");
    is_u64((uint64_t)cond_evaluate(
               &v, &(struct cond_request){.if_none_match = "\"other\"",
                                          .if_modified_since = "Sun, 06 Nov 1994 08:49:37 GMT"}),
           0, "If-Modified-Since is not looked at beside If-None-Match");
    is_u64((uint64_t)cond_evaluate(
               &v, &(struct cond_request){.if_modified_since = "Sun, 06 Nov 1994 08:49:37 GMT"}),
           304, "If-Modified-Since at its Last-Modified: 304");
    is_u64((uint64_t)cond_evaluate(
               &v, &(struct cond_request){.if_modified_since = "Sun, 06 Nov 1994 08:49:36 GMT"}),
           0, "a second before: the file");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_modified_since = "garbage"}), 0,
           "an If-Modified-Since that is no date is ignored");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_match = tag}), 0,
           "If-Match with its ETag: the file");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_match = weak}), 412,
           "If-Match compares strongly: a weak tag fails, 412");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_match = "\"other\""}), 412,
           "If-Match with another tag: 412");
    is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_match = "*"}), 0,
           "If-Match: *: the file");
    is_u64((uint64_t)cond_evaluate(
               &v, &(struct cond_request){.if_match = "\"other\"", .if_none_match = tag}),
           412, "If-Match is evaluated first");
    is_u64((uint64_t)cond_evaluate(
               &v, &(struct cond_request){.if_unmodified_since = "Sun, 06 Nov 1994 08:49:36 GMT"}),
           412, "If-Unmodified-Since before its Last-Modified: 412");
    is_u64((uint64_t)cond_evaluate(
               &v, &(struct cond_request){.if_match = tag,
                                          .if_unmodified_since = "Sun, 06 Nov 1994 08:49:36 GMT"}),
           0, "If-Unmodified-Since is not looked at beside If-Match");
    const char *bad_lists[] = {"nope", "\"unclosed", "W/", "\"a\" junk", "\"a\",,W/x"};
    for (size_t i = 0; i < sizeof bad_lists / sizeof *bad_lists; i++)
        is_u64((uint64_t)cond_evaluate(&v, &(struct cond_request){.if_none_match = bad_lists[i]}),
               0, "an If-None-Match that does not parse matches nothing: '%s'", bad_lists[i]);

    ok(cond_if_range(&v, NULL), "no If-Range: a Range is honoured");
    ok(cond_if_range(&v, tag), "If-Range with its ETag: honoured");
    ok(!cond_if_range(&v, weak), "a weak tag: the whole file");
    ok(!cond_if_range(&v, "\"other\""), "another tag: the whole file");
    ok(cond_if_range(&v, "Sun, 06 Nov 1994 08:49:37 GMT"), "its Last-Modified date: honoured");
    ok(!cond_if_range(&v, "Sun, 06 Nov 1994 08:49:38 GMT"), "another date: the whole file");
    ok(!cond_if_range(&v, "x"), "garbage: the whole file");
    return done_testing();
}
