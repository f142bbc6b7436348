/* GET /sandboxes/{id}/logs and /v2/sandboxes/{id}/logs: a sandbox's event log (src/sandbox/store.h)
 * in E2B's SandboxLogs shape, {"logs":[{timestamp, line}], "logEntries":[{timestamp, level,
 * message, fields}]}, one entry per event (created, started, commands started and ended with their
 * exit code, duration, CPU and peak memory, paused, resumed, killed or failed and why). The query
 * is E2B's (start: ms since the epoch, the first entry's time at the earliest; limit) and hutch's
 * nextToken (the X-Next-Token of the previous page: paging stays exact when events share a
 * millisecond). Pure functions: the daemon reads the store and hands each event here. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/store.h"
#include "util/err.h"

#define API_LOGS_LIMIT_DEFAULT 100
#define API_LOGS_LIMIT_MAX     1000
#define API_LOGS_SEARCH_MAX    256

/* The levels of E2B's LogLevel, in order. */
enum api_log_level { API_LOG_DEBUG, API_LOG_INFO, API_LOG_WARN, API_LOG_ERROR };

struct api_logs_query {
    int64_t start_ms;  /* v1 start, v2 cursor: 0 from the first (forward), from now (backward) */
    size_t limit;      /* 1..API_LOGS_LIMIT_MAX */
    int64_t after_seq; /* nextToken; 0 on the first page (backward: the seq to go below) */
    /* v2 only */
    bool backward;                        /* direction=backward: newest first, at or before */
    enum api_log_level min_level;         /* level: entries at it or above */
    char search[API_LOGS_SEARCH_MAX + 1]; /* search: a substring of the message ("": any) */
};
/* query: the part of the URL after '?' ("" for none). -1 with err (EINVAL) naming the
 * parameter. Unknown parameters are ignored. v1 takes start, limit and nextToken; v2 (E2B's
 * /v2/sandboxes/{id}/logs) cursor, direction, level, limit, search and nextToken. */
int api_logs_query_parse(const char *query, struct api_logs_query *out, err_t *err);
int api_logs_v2_query_parse(const char *query, struct api_logs_query *out, err_t *err);

/* One event as a line people read: "command ended: exit code 3 after 12 ms (CPU 2 ms, peak
 * memory 1.2 MiB)". A detail that is not the JSON the daemon writes is shown as it is. */
void api_log_line(const struct store_event *ev, char *out, size_t size);

/* The page under construction. */
struct api_logs;
struct api_logs *api_logs_new(void);
/* Adds ev (events come in order) if it passes q's level and search: 1 when added, 0 when not,
 * -1 with err on no memory. A zeroed query takes every event. */
int api_logs_offer(struct api_logs *l, const struct api_logs_query *q, const struct store_event *ev,
                   err_t *err);
/* How many events the page holds. */
size_t api_logs_count(const struct api_logs *l);
/* The seq of the last event added (the page's next token), 0 for none. */
int64_t api_logs_last_seq(const struct api_logs *l);
/* The page's JSON (malloc'd), NULL with err: v1's SandboxLogs, or v2's SandboxLogsV2Response
 * ({"logs": [entries]}, the entries as v1's logEntries). */
char *api_logs_json(const struct api_logs *l, err_t *err);
char *api_logs_v2_json(const struct api_logs *l, err_t *err);
void api_logs_free(struct api_logs *l);
