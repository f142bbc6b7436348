/* src/api/metrics_json: the metrics query as the SDK sends it (start/end in unix seconds, from
 * getMetrics({start, end}) rounding Date.getTime() / 1000), hostile queries, and the samples in
 * the shape the SDK maps (SandboxMetric). */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "api/metrics_json.h"
#include "tap.h"

static void queries(void)
{
    struct api_metrics_query q;
    err_t err;
    ok(api_metrics_query_parse("", &q, &err) == 0 && !q.has_start && !q.has_end,
       "no query: neither bound");
    ok(api_metrics_query_parse("start=1796407929&end=1796407999", &q, &err) == 0 && q.has_start &&
           q.has_end && q.start_s == 1796407929 && q.end_s == 1796407999,
       "the SDK's start and end");
    ok(api_metrics_query_parse("end=5&other=x", &q, &err) == 0 && !q.has_start && q.end_s == 5,
       "end alone, an unknown parameter ignored");
    ok(api_metrics_query_parse("start=0&end=0", &q, &err) == 0 && q.has_start && q.start_s == 0,
       "start = end = 0");
    ok(api_metrics_query_parse("start=10413791999", &q, &err) == 0, "the year 2299's last second");
    static const char *const bad[] = {"start=10413792000",
                                      "start=-1",
                                      "start=1e3",
                                      "start=1.5",
                                      "start=",
                                      "start=+5",
                                      "start=%00",
                                      "end=1%20",
                                      "start=1&start=2",
                                      "end=99999999999999999999",
                                      "start=20&end=10",
                                      "start=%zz",
                                      "start=0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        q.has_start = true;
        ok(api_metrics_query_parse(bad[i], &q, &err) < 0 && err.errnum == EINVAL && err.msg[0] &&
               !q.has_start && !q.has_end,
           "refused, output cleared: %s (%s)", bad[i], err.msg);
    }
    ok(api_metrics_query_parse("start=20&end=10", &q, &err) < 0 &&
           strstr(err.msg, "Invalid time range"),
       "start after end says so, as E2B does");
}

static void ids(void)
{
    static struct api_metrics_ids ids;
    err_t err;
    ok(api_metrics_ids_parse("sandbox_ids=abc,def", &ids, &err) == 0 && ids.n == 2 &&
           strcmp(ids.ids[0], "abc") == 0 && strcmp(ids.ids[1], "def") == 0,
       "two ids, comma-separated");
    ok(api_metrics_ids_parse("sandbox_ids=abc%2Cdef&sandbox_ids=ghi", &ids, &err) == 0 &&
           ids.n == 3,
       "an encoded comma, and a repeated parameter adds up");
    char many[2048] = "sandbox_ids=";
    for (int i = 0; i < 101; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%ss%d", i ? "," : "", i);
    ok(api_metrics_ids_parse(many, &ids, &err) < 0 && err.errnum == E2BIG && ids.n == 0,
       "101 ids: refused (%s)", err.msg);
    static const char *const bad[] = {"",
                                      "sandbox_ids=",
                                      "sandbox_ids=a,,b",
                                      "sandbox_ids=a,",
                                      "sandbox_ids=..%2F..",
                                      "sandbox_ids=a b",
                                      "other=1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ok(api_metrics_ids_parse(bad[i], &ids, &err) < 0 && err.errnum == EINVAL && ids.n == 0,
           "refused: '%s' (%s)", bad[i], err.msg);
}

static void shapes(void)
{
    err_t err;
    struct api_metric m[2] = {
        {.at_ms = 1796407929705,
         .cpu_count = 2,
         .cpu_used_pct = 12.5,
         .mem_used = 6934528,
         .mem_total = 536870912,
         .mem_cache = 4096,
         .disk_used = 126976,
         .disk_total = 1020702720},
        {.at_ms = 1796407934705, .cpu_count = 2},
    };
    char *s = api_metrics_json(m, 2, &err);
    json_t *a = s ? json_loads(s, 0, NULL) : NULL;
    json_t *o = json_array_get(a, 0);
    ok(json_is_array(a) && json_array_size(a) == 2, "an array of two");
    is_str(json_string_value(json_object_get(o, "timestamp")), "2026-12-04T18:12:09.705Z",
           "timestamp in RFC 3339, UTC, with milliseconds");
    ok(json_integer_value(json_object_get(o, "timestampUnix")) == 1796407929 &&
           json_integer_value(json_object_get(o, "cpuCount")) == 2 &&
           json_real_value(json_object_get(o, "cpuUsedPct")) == 12.5 &&
           json_integer_value(json_object_get(o, "memUsed")) == 6934528 &&
           json_integer_value(json_object_get(o, "memTotal")) == 536870912 &&
           json_integer_value(json_object_get(o, "memCache")) == 4096 &&
           json_integer_value(json_object_get(o, "diskUsed")) == 126976 &&
           json_integer_value(json_object_get(o, "diskTotal")) == 1020702720,
       "every field as the SDK reads it");
    ok(json_object_size(o) == 9, "and nothing else");
    json_decref(a);
    free(s);
    s = api_metrics_json(NULL, 0, &err);
    is_str(s, "[]", "no samples: []");
    free(s);
    char ids[2][STORE_ID_MAX + 1] = {"abc", "def"};
    const struct api_metric *latest[2] = {&m[1], NULL};
    s = api_metrics_by_sandbox_json(ids, latest, 2, &err);
    json_t *root = s ? json_loads(s, 0, NULL) : NULL;
    json_t *by = json_object_get(root, "sandboxes");
    ok(json_is_object(by) && json_object_size(by) == 1 && json_object_get(by, "abc"),
       "by sandbox: the one with a sample, the other left out (%s)", s ? s : err.msg);
    json_decref(root);
    free(s);
}

int main(void)
{
    queries();
    ids();
    shapes();
    return done_testing();
}
