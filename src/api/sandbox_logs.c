/* A sandbox's event log in E2B's SandboxLogs shape (sandbox_logs.h). */
#include "api/sandbox_logs.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/control_json.h"
#include "api/json_input.h"
#include "api/query.h"
#include "util/parse.h"
#include "util/utf8.h"

/* v1's start and v2's cursor: ms since the epoch, up to the year 5000. */
static int take_time(const char *key, const char *value, struct api_logs_query *q, err_t *err)
{
    uint64_t n;
    if (parse_count(value, 0, 95617584000000ull, &n) < 0)
        return api_input_error(err, EINVAL, "%s must be a time in ms since the epoch", key);
    q->start_ms = (int64_t)n;
    return 0;
}

static int take_param(const char *key, const char *value, void *ctx, err_t *err)
{
    struct api_logs_query *q = ctx;
    uint64_t n;
    if (strcmp(key, "start") == 0) {
        return take_time(key, value, q, err);
    } else if (strcmp(key, "limit") == 0) {
        if (parse_count(value, 1, API_LOGS_LIMIT_MAX, &n) < 0)
            return api_input_error(err, EINVAL, "limit must be a number from 1 to %d",
                                   API_LOGS_LIMIT_MAX);
        q->limit = (size_t)n;
    } else if (strcmp(key, "nextToken") == 0) {
        if (value[0] && parse_count(value, 1, INT64_MAX, &n) < 0)
            return api_input_error(err, EINVAL, "nextToken is not one this server gave");
        q->after_seq = value[0] ? (int64_t)n : 0;
    }
    return 0;
}

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int take_v2_param(const char *key, const char *value, void *ctx, err_t *err)
{
    struct api_logs_query *q = ctx;
    if (strcmp(key, "cursor") == 0) {
        return take_time(key, value, q, err);
    } else if (strcmp(key, "direction") == 0) {
        if (strcmp(value, "forward") != 0 && strcmp(value, "backward") != 0)
            return api_input_error(err, EINVAL, "direction must be forward or backward");
        q->backward = value[0] == 'b';
    } else if (strcmp(key, "level") == 0) {
        size_t i = 0;
        while (i < 4 && strcmp(value, level_names[i]) != 0)
            i++;
        if (i == 4)
            return api_input_error(err, EINVAL, "level must be debug, info, warn or error");
        q->min_level = (enum api_log_level)i;
    } else if (strcmp(key, "search") == 0) {
        if (strlen(value) > API_LOGS_SEARCH_MAX)
            return api_input_error(err, EINVAL, "search is longer than %d bytes",
                                   API_LOGS_SEARCH_MAX);
        snprintf(q->search, sizeof q->search, "%s", value);
    } else if (strcmp(key, "limit") == 0 || strcmp(key, "nextToken") == 0) {
        return take_param(key, value, ctx, err);
    }
    return 0;
}

static int parse_with(const char *query, struct api_logs_query *out,
                      int (*take)(const char *, const char *, void *, err_t *), err_t *err)
{
    memset(out, 0, sizeof *out);
    out->limit = API_LOGS_LIMIT_DEFAULT;
    out->min_level = API_LOG_DEBUG;
    if (api_query_each(query, 64, API_LOGS_SEARCH_MAX, "query", take, out, err) < 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

int api_logs_query_parse(const char *query, struct api_logs_query *out, err_t *err)
{
    return parse_with(query, out, take_param, err);
}

int api_logs_v2_query_parse(const char *query, struct api_logs_query *out, err_t *err)
{
    return parse_with(query, out, take_v2_param, err);
}

/* ---------- lines ---------- */

static void human_ms(uint64_t ms, char *out, size_t size)
{
    if (ms < 10000)
        snprintf(out, size, "%llu ms", (unsigned long long)ms);
    else
        snprintf(out, size, "%.1f s", (double)ms / 1000);
}

static void human_bytes(uint64_t b, char *out, size_t size)
{
    if (b < 1024)
        snprintf(out, size, "%llu B", (unsigned long long)b);
    else if (b < (1u << 20))
        snprintf(out, size, "%.1f KiB", (double)b / 1024);
    else
        snprintf(out, size, "%.1f MiB", (double)b / (1 << 20));
}

static uint64_t field_u64(const json_t *d, const char *name)
{
    json_int_t v = json_integer_value(json_object_get(d, name));
    return v > 0 ? (uint64_t)v : 0;
}

static void command_ended_line(const json_t *d, char *out, size_t size)
{
    int code = (int)json_integer_value(json_object_get(d, "exitCode"));
    int signo = (int)json_integer_value(json_object_get(d, "signal"));
    char how[96];
    if (signo > 0)
        snprintf(how, sizeof how, "killed by signal %d (%s)", signo,
                 strsignal(signo) ? strsignal(signo) : "?");
    else
        snprintf(how, sizeof how, "exit code %d", code);
    unsigned long long pid = field_u64(d, "pid");
    if (json_is_true(json_object_get(d, "whileDaemonDown"))) {
        snprintf(out, size, "command %llu ended: %s (while the daemon was down)", pid, how);
        return;
    }
    char took[32], cpu[32], mem[32];
    human_ms(field_u64(d, "durationMs"), took, sizeof took);
    human_ms(field_u64(d, "cpuNs") / 1000000u, cpu, sizeof cpu);
    human_bytes(field_u64(d, "memoryPeakBytes"), mem, sizeof mem);
    uint64_t ooms = field_u64(d, "oomKills");
    snprintf(out, size, "command %llu ended: %s after %s (CPU %s, peak memory %s%s)", pid, how,
             took, cpu, mem, ooms ? ", out of memory" : "");
}

/* An event's detail, parsed once for its line, level and fields: NULL for none or not JSON. */
static json_t *detail_of(const struct store_event *ev)
{
    return ev->detail ? json_loads(ev->detail, 0, NULL) : NULL;
}

static void line_of(const struct store_event *ev, const json_t *d, char *out, size_t size)
{
    const char *reason = json_string_value(json_object_get(d, "reason"));
    if (ev->detail && !json_is_object(d)) {
        snprintf(out, size, "%s %.200s", ev->kind, ev->detail);
    } else if (strcmp(ev->kind, "created") == 0) {
        snprintf(out, size, "sandbox created");
    } else if (strcmp(ev->kind, "started") == 0) {
        snprintf(out, size, "sandbox started");
    } else if (strcmp(ev->kind, "command_started") == 0) {
        const char *cmd = json_string_value(json_object_get(d, "cmd"));
        snprintf(out, size, "command %llu started%s%s%.400s",
                 (unsigned long long)field_u64(d, "pid"),
                 json_is_true(json_object_get(d, "root")) ? " as root" : "", cmd ? ": " : "",
                 cmd ? cmd : "");
    } else if (strcmp(ev->kind, "command_ended") == 0) {
        command_ended_line(d, out, size);
    } else if (reason) {
        snprintf(out, size, "sandbox %s: %s", ev->kind, reason);
    } else {
        snprintf(out, size, "sandbox %s", ev->kind);
    }
}

void api_log_line(const struct store_event *ev, char *out, size_t size)
{
    json_t *d = detail_of(ev);
    line_of(ev, d, out, size);
    json_decref(d);
}

/* ---------- the page ---------- */

struct api_logs {
    json_t *logs, *entries;
    int64_t last_seq;
};

struct api_logs *api_logs_new(void)
{
    struct api_logs *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->logs = json_array();
    l->entries = json_array();
    if (!l->logs || !l->entries) {
        api_logs_free(l);
        return NULL;
    }
    return l;
}

/* fields: the event's kind and seq, and each member of its detail as a string (E2B's fields
 * are a map of strings). */
static json_t *entry_fields(const struct store_event *ev, json_t *d)
{
    json_t *f = json_object();
    char seq[24];
    snprintf(seq, sizeof seq, "%lld", (long long)ev->seq);
    json_object_set_new(f, "event", json_string(ev->kind));
    json_object_set_new(f, "seq", json_string(seq));
    const char *key;
    json_t *v;
    json_object_foreach(d, key, v)
    {
        if (json_is_string(v)) {
            json_object_set(f, key, v);
        } else {
            char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            if (text)
                json_object_set_new(f, key, json_string(text));
            free(text);
        }
    }
    return f;
}

static enum api_log_level level_of(const struct store_event *ev, const json_t *d)
{
    if (strcmp(ev->kind, "failed") == 0)
        return API_LOG_ERROR;
    if (strcmp(ev->kind, "command_ended") == 0 && field_u64(d, "oomKills") > 0)
        return API_LOG_WARN;
    return API_LOG_INFO;
}

/* raw: the event's line as line_of made it (the filters look at the same text); d its detail. */
static int add_line(struct api_logs *l, const struct store_event *ev, json_t *d, const char *raw,
                    enum api_log_level level, err_t *err)
{
    char when[32];
    api_time_format(ev->at_ms, when);
    /* a line cut inside a character (or a command line that was never UTF-8) is still one
     * entry: U+FFFD where its bytes are not UTF-8 */
    size_t n;
    char *line = utf8_sanitize(raw, strlen(raw), &n);
    if (!line)
        return err_set(err, ENOMEM, "logs");
    json_t *log = json_pack("{s:s, s:s%}", "timestamp", when, "line", line, n);
    json_t *entry = json_pack("{s:s, s:s, s:s%, s:o}", "timestamp", when, "level", level_names[level],
                              "message", line, n, "fields", entry_fields(ev, d));
    free(line);
    if (!log || !entry) {
        json_decref(log);
        json_decref(entry);
        return err_set(err, ENOMEM, "logs");
    }
    /* both or neither: logs[i] and logEntries[i] are the same event */
    if (json_array_append_new(l->logs, log) < 0) {
        json_decref(entry);
        return err_set(err, ENOMEM, "logs");
    }
    if (json_array_append_new(l->entries, entry) < 0) {
        json_array_remove(l->logs, json_array_size(l->logs) - 1);
        return err_set(err, ENOMEM, "logs");
    }
    l->last_seq = ev->seq;
    return 0;
}

int api_logs_offer(struct api_logs *l, const struct api_logs_query *q, const struct store_event *ev,
                   err_t *err)
{
    json_t *d = detail_of(ev);
    enum api_log_level level = level_of(ev, d);
    char raw[1024];
    line_of(ev, d, raw, sizeof raw);
    /* E2B's search is a case-sensitive substring of the message; a message that is not UTF-8 is
     * matched as it is stored, before U+FFFD stands in for its bad bytes */
    int rc = 0;
    if (level >= q->min_level && (!q->search[0] || strstr(raw, q->search)))
        rc = add_line(l, ev, d, raw, level, err) < 0 ? -1 : 1;
    json_decref(d);
    return rc;
}

size_t api_logs_count(const struct api_logs *l)
{
    return json_array_size(l->entries);
}

int64_t api_logs_last_seq(const struct api_logs *l)
{
    return l->last_seq;
}

char *api_logs_json(const struct api_logs *l, err_t *err)
{
    json_t *page = json_pack("{s:O, s:O}", "logs", l->logs, "logEntries", l->entries);
    char *s = page ? json_dumps(page, JSON_COMPACT) : NULL;
    json_decref(page);
    if (!s)
        err_set(err, ENOMEM, "logs");
    return s;
}

char *api_logs_v2_json(const struct api_logs *l, err_t *err)
{
    json_t *page = json_pack("{s:O}", "logs", l->entries);
    char *s = page ? json_dumps(page, JSON_COMPACT) : NULL;
    json_decref(page);
    if (!s)
        err_set(err, ENOMEM, "logs");
    return s;
}

void api_logs_free(struct api_logs *l)
{
    if (!l)
        return;
    json_decref(l->logs);
    json_decref(l->entries);
    free(l);
}
