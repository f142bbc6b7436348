/* E2B's sandbox metrics: the query and the samples' shape (metrics_json.h). */
#include "api/metrics_json.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/control_json.h"
#include "api/json_input.h"
#include "api/query.h"

#define METRICS_QUERY_VALUE_MAX 64
#define METRICS_IDS_VALUE_MAX   ((STORE_ID_MAX + 1) * API_METRICS_MAX_IDS)

/* Unix seconds: digits only (no sign, no space, no fraction), within 0..API_METRICS_MAX_S. */
static int seconds_parse(const char *name, const char *value, int64_t *out, err_t *err)
{
    int64_t v = 0;
    if (!value[0])
        return api_input_error(err, EINVAL, "%s: empty; give unix seconds", name);
    for (const char *p = value; *p; p++) {
        if (*p < '0' || *p > '9' || v > API_METRICS_MAX_S)
            return api_input_error(err, EINVAL,
                                   "%s must be unix seconds from 0 to %lld (an integer)", name,
                                   (long long)API_METRICS_MAX_S);
        v = v * 10 + (*p - '0');
    }
    if (v > API_METRICS_MAX_S)
        return api_input_error(err, EINVAL, "%s must be unix seconds from 0 to %lld", name,
                               (long long)API_METRICS_MAX_S);
    *out = v;
    return 0;
}

static int take_metrics_pair(const char *key, const char *value, void *ctx, err_t *err)
{
    struct api_metrics_query *q = ctx;
    if (strcmp(key, "start") == 0) {
        if (q->has_start)
            return api_input_error(err, EINVAL, "start is given twice");
        q->has_start = true;
        return seconds_parse("start", value, &q->start_s, err);
    }
    if (strcmp(key, "end") == 0) {
        if (q->has_end)
            return api_input_error(err, EINVAL, "end is given twice");
        q->has_end = true;
        return seconds_parse("end", value, &q->end_s, err);
    }
    return 0;
}

int api_metrics_query_parse(const char *query, struct api_metrics_query *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    if (api_query_each(query, 32, METRICS_QUERY_VALUE_MAX, "the metrics query", take_metrics_pair,
                       out, err) < 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    if (out->has_start && out->has_end && out->start_s > out->end_s) {
        memset(out, 0, sizeof *out);
        return api_input_error(err, EINVAL, "Invalid time range for metrics: start is after end");
    }
    return 0;
}

static int take_ids_pair(const char *key, const char *value, void *ctx, err_t *err)
{
    struct api_metrics_ids *ids = ctx;
    if (strcmp(key, "sandbox_ids") != 0)
        return 0;
    const char *p = value;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (ids->n == API_METRICS_MAX_IDS)
            return api_input_error(err, E2BIG, "Too many sandboxes requested, maximum is %d",
                                   API_METRICS_MAX_IDS);
        if (n == 0 || n > STORE_ID_MAX)
            return api_input_error(err, EINVAL, "sandbox_ids: an id is empty or too long");
        memcpy(ids->ids[ids->n], p, n);
        ids->ids[ids->n][n] = '\0';
        if (!api_id_valid(ids->ids[ids->n]))
            return api_input_error(err, EINVAL, "sandbox_ids: '%s' is not a sandbox id",
                                   ids->ids[ids->n]);
        ids->n++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int api_metrics_ids_parse(const char *query, struct api_metrics_ids *out, err_t *err)
{
    out->n = 0;
    if (api_query_each(query, 32, METRICS_IDS_VALUE_MAX, "the metrics query", take_ids_pair, out,
                       err) < 0) {
        out->n = 0;
        return -1;
    }
    if (out->n == 0)
        return api_input_error(err, EINVAL, "sandbox_ids is required (ids, comma-separated)");
    return 0;
}

static json_t *metric_object(const struct api_metric *m)
{
    char at[32];
    api_time_format(m->at_ms, at);
    /* json_integer is signed 64-bit: the counters are far below 2^63 */
    return json_pack("{s:s,s:I,s:i,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp", at, "timestampUnix",
                     (json_int_t)(m->at_ms / 1000), "cpuCount", (int)m->cpu_count, "cpuUsedPct",
                     m->cpu_used_pct, "memUsed", (json_int_t)m->mem_used, "memTotal",
                     (json_int_t)m->mem_total, "memCache", (json_int_t)m->mem_cache, "diskUsed",
                     (json_int_t)m->disk_used, "diskTotal", (json_int_t)m->disk_total);
}

static char *dump(json_t *j, err_t *err)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        err_set(err, ENOMEM, "metrics");
    return s;
}

char *api_metrics_json(const struct api_metric *m, size_t n, err_t *err)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, metric_object(&m[i])) < 0) {
            json_decref(a);
            a = NULL;
        }
    return dump(a, err);
}

char *api_metrics_by_sandbox_json(const char (*ids)[STORE_ID_MAX + 1],
                                  const struct api_metric *const *m, size_t n, err_t *err)
{
    json_t *by_id = json_object();
    for (size_t i = 0; by_id && i < n; i++)
        if (m[i] && json_object_set_new(by_id, ids[i], metric_object(m[i])) < 0) {
            json_decref(by_id);
            by_id = NULL;
        }
    return dump(by_id ? json_pack("{s:o}", "sandboxes", by_id) : NULL, err);
}
