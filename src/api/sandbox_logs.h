/* GET /sandboxes/{id}/logs: a sandbox's event log (src/sandbox/store.h) in E2B's SandboxLogs
 * shape, {"logs":[{timestamp, line}], "logEntries":[{timestamp, level, message, fields}]}, one
 * entry per event (created, started, commands started and ended with their exit code, duration,
 * CPU and peak memory, paused, resumed, killed or failed and why). The query is E2B's (start:
 * ms since the epoch, the first entry's time at the earliest; limit) and hutch's nextToken (the
 * X-Next-Token of the previous page: paging stays exact when events share a millisecond).
 * Pure functions: the daemon reads the store and hands each event here. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "sandbox/store.h"
#include "util/err.h"

#define API_LOGS_LIMIT_DEFAULT 100
#define API_LOGS_LIMIT_MAX     1000

struct api_logs_query {
    int64_t start_ms;  /* 0: from the first */
    size_t limit;      /* 1..API_LOGS_LIMIT_MAX */
    int64_t after_seq; /* nextToken; 0 on the first page */
};
/* query: the part of the URL after '?' ("" for none). -1 with err (EINVAL) naming the
 * parameter. Unknown parameters are ignored. */
int api_logs_query_parse(const char *query, struct api_logs_query *out, err_t *err);

/* One event as a line people read: "command ended: exit code 3 after 12 ms (CPU 2 ms, peak
 * memory 1.2 MiB)". A detail that is not the JSON the daemon writes is shown as it is. */
void api_log_line(const struct store_event *ev, char *out, size_t size);

/* The page under construction. */
struct api_logs;
struct api_logs *api_logs_new(void);
/* Adds one event (in order); -1 with err on no memory. */
int api_logs_add(struct api_logs *l, const struct store_event *ev, err_t *err);
/* The seq of the last event added (the page's next token), 0 for none. */
int64_t api_logs_last_seq(const struct api_logs *l);
/* The page's JSON (malloc'd), NULL with err. */
char *api_logs_json(const struct api_logs *l, err_t *err);
void api_logs_free(struct api_logs *l);
