/* src/api/sandbox_logs: the logs query (E2B's start and limit, hutch's nextToken) and hostile
 * ones; each event kind as a line; a page in E2B's SandboxLogs shape, its fields all strings;
 * details that are not the daemon's JSON shown, never trusted. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/sandbox_logs.h"
#include "tap.h"

static void queries(void)
{
    struct api_logs_query q;
    err_t err = {0};
    ok(api_logs_query_parse("", &q, &err) == 0 && q.limit == API_LOGS_LIMIT_DEFAULT &&
           q.start_ms == 0 && q.after_seq == 0,
       "no query: the first %d from the start", API_LOGS_LIMIT_DEFAULT);
    ok(api_logs_query_parse("start=1764870000000&limit=1000&nextToken=42&other=x", &q, &err) == 0 &&
           q.start_ms == 1764870000000 && q.limit == 1000 && q.after_seq == 42,
       "start, limit, nextToken; an unknown parameter ignored");
    const char *bad[] = {
        "limit=0", "limit=1001",  "limit=-1",     "limit=1e3", "start=-5",
        "start=x", "nextToken=a", "nextToken=-1", "limit=%zz", "start=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err_clear(&err);
        ok(api_logs_query_parse(bad[i], &q, &err) < 0 && err.msg[0] && q.limit == 0,
           "%s refused (%s), the query cleared", bad[i], err.msg);
    }
}

static const char *line_of(const char *kind, const char *detail)
{
    static char out[1024];
    struct store_event ev = {.seq = 1, .at_ms = 0, .kind = kind, .detail = detail};
    api_log_line(&ev, out, sizeof out);
    return out;
}

static void lines(void)
{
    is_str(line_of("created", NULL), "sandbox created", "created");
    is_str(line_of("command_started", "{\"pid\":7,\"root\":true,\"cmd\":\"sh -c true\"}"),
           "command 7 started as root: sh -c true", "a command's start, with its line");
    is_str(line_of("command_ended", "{\"pid\":7,\"exitCode\":3,\"signal\":0,\"durationMs\":12,"
                                    "\"cpuNs\":2000000,\"memoryPeakBytes\":1048576,"
                                    "\"oomKills\":0}"),
           "command 7 ended: exit code 3 after 12 ms (CPU 2 ms, peak memory 1.0 MiB)",
           "a command's end: exit code, duration, CPU, peak memory");
    is_str(line_of("command_ended", "{\"pid\":8,\"exitCode\":-1,\"signal\":9,\"durationMs\":"
                                    "15000,\"cpuNs\":0,\"memoryPeakBytes\":10,\"oomKills\":1}"),
           "command 8 ended: killed by signal 9 (Killed) after 15.0 s (CPU 0 ms, peak memory 10 B, "
           "out of memory)",
           "a SIGKILLed one the OOM killer hit");
    is_str(line_of("command_ended", "{\"pid\":9,\"exitCode\":0,\"signal\":0,"
                                    "\"whileDaemonDown\":true}"),
           "command 9 ended: exit code 0 (while the daemon was down)", "one that ended unseen");
    is_str(line_of("killed", "{\"reason\":\"timeout: its deadline passed\"}"),
           "sandbox killed: timeout: its deadline passed", "killed, and why");
    is_str(line_of("paused", NULL), "sandbox paused", "paused");
    is_str(line_of("weird", "not json"), "weird not json", "a detail that is not JSON: shown");
    is_str(line_of("command_ended", "[1,2]"), "command_ended [1,2]", "one that is no object");
    ok(strncmp(line_of("command_ended", "{\"pid\":\"x\",\"exitCode\":{}}"), "command 0 ended",
               15) == 0,
       "fields of the wrong type read as 0");
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    char detail[5100];
    snprintf(detail, sizeof detail, "{\"cmd\":\"%s\"}", big);
    ok(strlen(line_of("command_started", detail)) < 1024, "a long command line is cut");
}

/* Zeroed: no level or search filter, every event is taken. */
static const struct api_logs_query every;

static void page(void)
{
    struct api_logs *l = api_logs_new();
    err_t err = {0};
    struct store_event evs[] = {
        {.seq = 5, .at_ms = 1764870000123, .kind = "created"},
        {.seq = 9,
         .at_ms = 1764870000456,
         .kind = "command_ended",
         .detail = "{\"pid\":1,\"exitCode\":2,\"oomKills\":3}"},
        {.seq = 11, .at_ms = 1764870000789, .kind = "failed", .detail = "{\"reason\":\"r\"}"},
    };
    for (size_t i = 0; i < 3; i++)
        api_logs_offer(l, &every, &evs[i], &err);
    is_u64((uint64_t)api_logs_last_seq(l), 11, "the page's next token is its last seq");
    char *s = api_logs_json(l, &err);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    json_t *logs = json_object_get(j, "logs"), *entries = json_object_get(j, "logEntries");
    ok(json_array_size(logs) == 3 && json_array_size(entries) == 3, "three logs, three entries");
    is_str(json_string_value(json_object_get(json_array_get(logs, 0), "timestamp")),
           "2025-12-04T17:40:00.123Z", "timestamps in RFC 3339");
    is_str(json_string_value(json_object_get(json_array_get(logs, 0), "line")), "sandbox created",
           "logs carry the line");
    json_t *e1 = json_array_get(entries, 1), *f1 = json_object_get(e1, "fields");
    is_str(json_string_value(json_object_get(e1, "level")), "warn", "an OOM-hit command: warn");
    is_str(json_string_value(json_object_get(f1, "exitCode")), "2", "fields: the detail's values");
    is_str(json_string_value(json_object_get(f1, "event")), "command_ended", "... and the kind");
    is_str(json_string_value(json_object_get(json_array_get(entries, 2), "level")), "error",
           "failed: error");
    bool all_strings = true;
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(e, "fields"), k, v) all_strings &= json_is_string(v);
    }
    ok(all_strings, "every field is a string, as E2B's schema has it");
    json_decref(j);
    free(s);
    api_logs_free(l);
    l = api_logs_new();
    s = api_logs_json(l, &err);
    is_str(s, "{\"logs\":[],\"logEntries\":[]}", "an empty page");
    free(s);
    struct store_event bin = {
        .seq = 12, .at_ms = 1, .kind = "command_started", .detail = "{\"pid\":1,\"cmd\":\"x\"}"};
    char bad_kind[] = "odd\xff";
    struct store_event odd = {.seq = 13, .at_ms = 1, .kind = bad_kind, .detail = NULL};
    ok(api_logs_offer(l, &every, &bin, &err) == 1 && api_logs_offer(l, &every, &odd, &err) == 1,
       "an event whose kind is not UTF-8 is still added");
    s = api_logs_json(l, &err);
    j = s ? json_loads(s, 0, NULL) : NULL;
    ok(json_array_size(json_object_get(j, "logs")) == 2 && strstr(s, "\\ufffd") == NULL &&
           strstr(s, "odd\xef\xbf\xbd"),
       "... its line with U+FFFD in place of the bad byte");
    json_decref(j);
    free(s);
    api_logs_free(l);
}

/* v2: E2B's cursor, direction, level, search, and the same limit and nextToken. */
static void v2_queries(void)
{
    struct api_logs_query q;
    err_t err = {0};
    ok(api_logs_v2_query_parse("", &q, &err) == 0 && q.limit == API_LOGS_LIMIT_DEFAULT &&
           q.start_ms == 0 && !q.backward && q.min_level == API_LOG_DEBUG && q.search[0] == 0,
       "v2, no query: forward from the first, every level, no search");
    ok(api_logs_v2_query_parse("cursor=1764870000000&direction=backward&level=warn&limit=5&"
                               "search=exit+code%203&nextToken=7",
                               &q, &err) == 0 &&
           q.start_ms == 1764870000000 && q.backward && q.min_level == API_LOG_WARN &&
           q.limit == 5 && q.after_seq == 7 && strcmp(q.search, "exit code 3") == 0,
       "v2: cursor, direction, level, limit, search (decoded), nextToken");
    ok(api_logs_v2_query_parse("start=5", &q, &err) == 0 && q.start_ms == 0,
       "v2 ignores v1's start (its name is cursor)");
    char long_search[400] = "search=";
    memset(long_search + 7, 'a', API_LOGS_SEARCH_MAX + 1);
    const char *bad[] = {"direction=up", "level=fatal", "level=",     "cursor=-1",
                         "cursor=x",     "limit=0",     "limit=1001", long_search};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err_clear(&err);
        ok(api_logs_v2_query_parse(bad[i], &q, &err) < 0 && err.msg[0] && q.limit == 0,
           "v2: %.40s refused (%s)", bad[i], err.msg);
    }
}

static void v2_filters(void)
{
    struct api_logs_query q;
    err_t err = {0};
    struct store_event ok_end = {.seq = 1,
                                 .at_ms = 1,
                                 .kind = "command_ended",
                                 .detail = "{\"pid\":4,\"exitCode\":3,\"durationMs\":5}"};
    struct store_event oom = {.seq = 2,
                              .at_ms = 2,
                              .kind = "command_ended",
                              .detail = "{\"pid\":5,\"exitCode\":137,\"oomKills\":1}"};
    struct store_event failed = {
        .seq = 3, .at_ms = 3, .kind = "failed", .detail = "{\"reason\":\"timeout\"}"};
    api_logs_v2_query_parse("level=warn", &q, &err);
    struct api_logs *l = api_logs_new();
    ok(api_logs_offer(l, &q, &ok_end, &err) == 0 && api_logs_offer(l, &q, &oom, &err) == 1 &&
           api_logs_offer(l, &q, &failed, &err) == 1 && api_logs_count(l) == 2,
       "level=warn: an info entry left out, warn and error kept");
    char *s = api_logs_v2_json(l, &err);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    json_t *logs = json_object_get(j, "logs"), *e0 = json_array_get(logs, 0);
    ok(json_object_size(j) == 1 && json_array_size(logs) == 2,
       "v2's page: {\"logs\": [two entries]} and nothing else");
    ok(json_is_string(json_object_get(e0, "timestamp")) &&
           json_is_string(json_object_get(e0, "message")) &&
           json_is_object(json_object_get(e0, "fields")) &&
           strcmp(json_string_value(json_object_get(e0, "level")), "warn") == 0,
       "... each entry E2B's SandboxLogEntry: timestamp, level, message, fields");
    json_decref(j);
    free(s);
    api_logs_free(l);
    api_logs_v2_query_parse("search=exit+code+3", &q, &err);
    l = api_logs_new();
    ok(api_logs_offer(l, &q, &ok_end, &err) == 1 && api_logs_offer(l, &q, &oom, &err) == 0 &&
           api_logs_offer(l, &q, &failed, &err) == 0,
       "search: only the message that holds it");
    api_logs_free(l);
    api_logs_v2_query_parse("search=Exit", &q, &err);
    l = api_logs_new();
    ok(api_logs_offer(l, &q, &ok_end, &err) == 0, "search is case-sensitive, as E2B's");
    api_logs_free(l);
}

int main(void)
{
    queries();
    lines();
    page();
    v2_queries();
    v2_filters();
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}
