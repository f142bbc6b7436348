/* E2B's sandbox metrics (GET /sandboxes/{id}/metrics?start=&end=, GET
 * /sandboxes/metrics?sandbox_ids=): the query parsed as hostile input, the samples written in
 * the shape the SDK's getMetrics() maps (SandboxMetric: timestamp, timestampUnix, cpuCount,
 * cpuUsedPct, memUsed, memTotal, memCache, diskUsed, diskTotal). Pure functions. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/store.h"
#include "util/err.h"

/* The latest second a query may name (E2B's own bound: the year 2299). */
#define API_METRICS_MAX_S 10413791999LL
/* sandbox_ids of the list call: E2B takes at most 100. */
#define API_METRICS_MAX_IDS 100

struct api_metric {
    int64_t at_ms; /* wall clock, ms since the epoch */
    unsigned cpu_count;
    double cpu_used_pct; /* of cpu_count CPUs: 100 is all of them busy */
    uint64_t mem_used, mem_total, mem_cache;
    uint64_t disk_used, disk_total;
};

/* start and end, unix seconds as the SDK sends them (integers, 0 up to API_METRICS_MAX_S);
 * absent ones are not has_; start after end is an error. Unknown parameters are ignored. */
struct api_metrics_query {
    bool has_start, has_end;
    int64_t start_s, end_s;
};
int api_metrics_query_parse(const char *query, struct api_metrics_query *out, err_t *err);

/* sandbox_ids=ID,ID,... (required, each a valid id, at most API_METRICS_MAX_IDS, repeated
 * parameters add up). */
struct api_metrics_ids {
    char ids[API_METRICS_MAX_IDS][STORE_ID_MAX + 1];
    size_t n;
};
int api_metrics_ids_parse(const char *query, struct api_metrics_ids *out, err_t *err);

/* A JSON array of n samples (malloc'd; NULL with err on no memory). */
char *api_metrics_json(const struct api_metric *m, size_t n, err_t *err);
/* {"sandboxes": {ID: metric, ...}} for the n ids that have a sample (m[i] NULL: left out). */
char *api_metrics_by_sandbox_json(const char (*ids)[STORE_ID_MAX + 1],
                                  const struct api_metric *const *m, size_t n, err_t *err);
