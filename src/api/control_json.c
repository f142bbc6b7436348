#include "api/control_json.h"
#include "api/auth.h"
#include "api/json_input.h"
#include "api/query.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------- JSON bodies ---------- */

#define invalid(err, ...) api_input_error((err), EINVAL, __VA_ARGS__)

/* An optional boolean member; false with *present false when absent. */
static int optional_bool(const json_t *obj, const char *field, bool *out, bool *present, err_t *err)
{
    const json_t *v = json_object_get(obj, field);
    if (present)
        *present = v && !json_is_null(v);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return invalid(err, "%s must be true or false", field);
    *out = json_is_true(v);
    return 0;
}

/* An optional timeout in whole seconds, 1..API_TIMEOUT_MAX_S. */
static int optional_timeout(const json_t *obj, bool *present, int64_t *out, err_t *err)
{
    const json_t *v = json_object_get(obj, "timeout");
    *present = v && !json_is_null(v);
    if (!*present)
        return 0;
    if (!json_is_integer(v))
        return invalid(err, "%s must be a whole number of seconds", "timeout");
    json_int_t t = json_integer_value(v);
    if (t < 0 || t > API_TIMEOUT_MAX_S) {
        return api_input_error(err, EINVAL, "timeout must be between 0 and %d seconds",
                               API_TIMEOUT_MAX_S);
    }
    *out = t;
    return 0;
}

/* An optional whole number in [min, max] (hutch's resource fields); *out stays 0 when absent. */
static int optional_bounded(const json_t *obj, const char *field, unsigned min, unsigned max,
                            unsigned *out, err_t *err)
{
    const json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v))
        return 0;
    json_int_t n = json_integer_value(v);
    if (!json_is_integer(v) || n < (json_int_t)min || n > (json_int_t)max)
        return invalid(err, "%s must be a whole number from %u to %u", field, min, max);
    *out = (unsigned)n;
    return 0;
}

/* A member that must be an object of strings (metadata, envVars), with its limits; its JSON text
 * (compact, keys sorted) in *out. */
static int string_map(const json_t *obj, const char *field, size_t max_entries, size_t key_max,
                      size_t value_max, size_t total_max, bool env_names, char **out, err_t *err)
{
    const json_t *map = json_object_get(obj, field);
    if (!map || json_is_null(map)) {
        *out = strdup("{}");
        return *out ? 0 : err_set(err, ENOMEM, "%s", field);
    }
    if (!json_is_object(map))
        return invalid(err, "%s must be an object of strings", field);
    if (json_object_size(map) > max_entries) {
        return api_input_error(err, E2BIG, "%s has more than %zu entries", field, max_entries);
    }
    size_t total = 0;
    const char *key;
    size_t key_len;
    json_t *value;
    json_object_keylen_foreach((json_t *)map, key, key_len, value)
    {
        char what[96];
        snprintf(what, sizeof what, "a key of %s", field);
        if (key_len == 0 || strlen(key) != key_len)
            return invalid(err, "%s is empty or holds a NUL character", what);
        if (key_len > key_max) {
            return api_input_error(err, ENAMETOOLONG, "%s is longer than %zu bytes", what, key_max);
        }
        if (env_names && !api_env_name_valid(key)) {
            return api_input_error(err, EINVAL,
                                   "%s: \"%.64s\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                                   field, key);
        }
        snprintf(what, sizeof what, "%s.%.40s", field, key);
        if (!api_json_string(value, what, value_max, err))
            return -1;
        total += key_len + json_string_length(value);
    }
    if (total > total_max) {
        return api_input_error(err, E2BIG, "%s is larger than %zu bytes in all", field, total_max);
    }
    *out = json_dumps(map, JSON_COMPACT | JSON_SORT_KEYS);
    return *out ? 0 : err_set(err, ENOMEM, "%s", field);
}

int api_new_sandbox_parse(const char *body, size_t len, struct api_new_sandbox *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = api_json_object(body, len, err);
    if (!root)
        return -1;
    int rc = -1;
    bool present;
    const json_t *tpl = json_object_get(root, "templateID");
    const char *template_id = "base";
    if (tpl && !json_is_null(tpl)) {
        template_id = api_json_string(tpl, "templateID", STORE_ID_MAX, err);
        if (!template_id)
            goto out;
        if (!api_id_valid(template_id)) {
            invalid(err, "%s must be letters, digits, '.', '_' or '-'", "templateID");
            goto out;
        }
    }
    snprintf(out->template_id, sizeof out->template_id, "%s", template_id);
    out->timeout_s = API_TIMEOUT_DEFAULT_S;
    if (optional_timeout(root, &present, &out->timeout_s, err) < 0)
        goto out;
    if (present && out->timeout_s == 0) {
        invalid(err, "%s must be at least 1 second", "timeout");
        goto out;
    }
    out->allow_internet_access = true;
    if (optional_bool(root, "autoPause", &out->auto_pause, NULL, err) < 0 ||
        optional_bool(root, "allow_internet_access", &out->allow_internet_access, NULL, err) < 0)
        goto out;
    const json_t *resume = json_object_get(root, "autoResume");
    if (resume && !json_is_null(resume)) {
        /* {"enabled": bool} in 2.x; a bare boolean is taken too */
        if (json_is_boolean(resume))
            out->auto_resume = json_is_true(resume);
        else if (!json_is_object(resume) ||
                 optional_bool(resume, "enabled", &out->auto_resume, NULL, err) < 0) {
            invalid(err, "%s must be {\"enabled\": true|false}", "autoResume");
            goto out;
        }
    }
    bool keep_memory = true;
    if (optional_bool(root, "autoPauseMemory", &keep_memory, NULL, err) < 0)
        goto out;
    out->auto_pause_cold = !keep_memory;
    if (out->auto_pause_cold && out->auto_resume) {
        /* as the SDK says: what is booted again is resumed by a connect, not by traffic */
        invalid(err, "%s: false cannot go with %s: true", "autoPauseMemory", "autoResume");
        goto out;
    }
    if (optional_bounded(root, "cpuCount", 1, API_CPU_COUNT_MAX, &out->cpu_count, err) < 0 ||
        optional_bounded(root, "memoryMB", API_MEMORY_MB_MIN, API_MEMORY_MB_MAX, &out->memory_mb,
                         err) < 0 ||
        optional_bounded(root, "diskSizeMB", API_DISK_MB_MIN, API_DISK_MB_MAX, &out->disk_mb, err) <
            0)
        goto out;
    if (string_map(root, "metadata", API_METADATA_MAX_ENTRIES, API_METADATA_KEY_MAX,
                   API_METADATA_VALUE_MAX, (size_t)-1, false, &out->metadata_json, err) < 0 ||
        string_map(root, "envVars", API_ENV_MAX_ENTRIES, API_ENV_NAME_MAX, API_ENV_VALUE_MAX,
                   API_ENV_TOTAL_MAX, true, &out->env_json, err) < 0)
        goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc < 0)
        api_new_sandbox_free(out);
    return rc;
}

void api_new_sandbox_free(struct api_new_sandbox *ns)
{
    free(ns->metadata_json);
    free(ns->env_json);
    memset(ns, 0, sizeof *ns);
}

int api_connect_parse(const char *body, size_t len, struct api_connect *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = api_json_object(body, len, err);
    if (!root)
        return -1;
    bool memory = true;
    int rc = optional_timeout(root, &out->has_timeout, &out->timeout_s, err) < 0 ||
                     optional_bool(root, "memory", &memory, NULL, err) < 0
                 ? -1
                 : 0;
    out->reboot = !memory;
    json_decref(root);
    if (rc < 0)
        memset(out, 0, sizeof *out);
    return rc;
}

int api_timeout_parse(const char *body, size_t len, int64_t *timeout_s, err_t *err)
{
    *timeout_s = 0;
    json_t *root = api_json_object(body, len, err);
    if (!root)
        return -1;
    bool present;
    int64_t t = 0;
    int rc = optional_timeout(root, &present, &t, err);
    json_decref(root);
    if (rc == 0 && !present)
        return invalid(err, "%s is required", "timeout");
    if (rc == 0)
        *timeout_s = t;
    return rc;
}

int api_pause_parse(const char *body, size_t len, bool *keep_memory, err_t *err)
{
    *keep_memory = true;
    json_t *root = api_json_object(body, len, err);
    if (!root)
        return -1;
    int rc = optional_bool(root, "memory", keep_memory, NULL, err);
    json_decref(root);
    if (rc < 0)
        *keep_memory = true;
    return rc;
}

/* ---------- the list query ---------- */

static int take_metadata_pair(const char *key, const char *value, void *ctx, err_t *err)
{
    struct api_list_query *q = ctx;
    if (q->n_metadata >= API_METADATA_MAX_ENTRIES) {
        return api_input_error(err, E2BIG, "metadata: more than %d pairs",
                               API_METADATA_MAX_ENTRIES);
    }
    /* The SDK encodes each key and value with encodeURIComponent before it forms the pairs:
     * once more to undo. */
    struct api_metadata_pair *p = &q->metadata[q->n_metadata];
    if (api_percent_decode(key, strlen(key), false, p->key, sizeof p->key) < 0 ||
        api_percent_decode(value, strlen(value), false, p->value, sizeof p->value) < 0 ||
        p->key[0] == '\0')
        return invalid(err, "%s: a pair is badly encoded, empty or too long", "metadata");
    q->n_metadata++;
    return 0;
}

static int take_state(struct api_list_query *q, const char *value, err_t *err)
{
    q->states = 0;
    char copy[128];
    if (snprintf(copy, sizeof copy, "%s", value) >= (int)sizeof copy)
        return invalid(err, "%s is too long", "state");
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int s = sandbox_state_parse(t);
        if (s != SANDBOX_RUNNING && s != SANDBOX_PAUSED) {
            return api_input_error(err, EINVAL, "state: \"%.32s\" is not running or paused", t);
        }
        q->states |= SANDBOX_STATE_BIT(s);
    }
    if (!q->states)
        return invalid(err, "%s names no state", "state");
    return 0;
}

static int take_param(const char *key, const char *value, void *ctx, err_t *err)
{
    struct api_list_query *q = ctx;
    if (strcmp(key, "state") == 0)
        return take_state(q, value, err);
    if (strcmp(key, "metadata") == 0)
        return api_query_each(value, API_METADATA_KEY_MAX * 3, API_METADATA_VALUE_MAX * 3,
                              "metadata", take_metadata_pair, q, err);
    if (strcmp(key, "template") == 0) {
        if (value[0] && !api_id_valid(value))
            return invalid(err, "%s is not a template id", "template");
        snprintf(q->template_id, sizeof q->template_id, "%s", value);
        return 0;
    }
    if (strcmp(key, "startedAfter") == 0) {
        if (api_time_parse(value, &q->started_after_ms) < 0)
            return invalid(err, "%s must be an RFC 3339 time", "startedAfter");
        return 0;
    }
    if (strcmp(key, "order") == 0) {
        if (strcmp(value, "asc") != 0 && strcmp(value, "desc") != 0)
            return invalid(err, "%s must be asc or desc", "order");
        q->oldest_first = strcmp(value, "asc") == 0;
        return 0;
    }
    if (strcmp(key, "limit") == 0) {
        char *end;
        errno = 0;
        long long n = strtoll(value, &end, 10);
        if (errno || end == value || *end || n < 1 || n > API_LIST_LIMIT_MAX) {
            return api_input_error(err, EINVAL, "limit must be a number from 1 to %d",
                                   API_LIST_LIMIT_MAX);
        }
        q->limit = (size_t)n;
        return 0;
    }
    if (strcmp(key, "nextToken") == 0) {
        if (value[0] && !api_id_valid(value))
            return invalid(err, "%s is not one this server gave", "nextToken");
        snprintf(q->next_token, sizeof q->next_token, "%s", value);
        return 0;
    }
    return 0; /* unknown parameters are ignored */
}

int api_list_query_parse(const char *query, struct api_list_query *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->states = SANDBOX_STATE_BIT(SANDBOX_RUNNING) | SANDBOX_STATE_BIT(SANDBOX_PAUSED);
    out->limit = API_LIST_LIMIT_DEFAULT;
    /* The metadata parameter is the longest: its pairs, encoded twice. */
    size_t value_max = 9 * (API_METADATA_KEY_MAX + API_METADATA_VALUE_MAX + 2) * 4;
    if (api_query_each(query, 64, value_max, "query", take_param, out, err) < 0) {
        int errnum = err->errnum;
        memset(out, 0, sizeof *out);
        err->errnum = errnum;
        return -1;
    }
    return 0;
}

bool api_metadata_matches(const char *metadata_json, const struct api_list_query *q)
{
    if (q->n_metadata == 0)
        return true;
    json_t *m = json_loads(metadata_json ? metadata_json : "{}", 0, NULL);
    bool all = json_is_object(m);
    for (size_t i = 0; all && i < q->n_metadata; i++) {
        const json_t *v = json_object_get(m, q->metadata[i].key);
        all = json_is_string(v) && strcmp(json_string_value(v), q->metadata[i].value) == 0;
    }
    json_decref(m);
    return all;
}

/* ---------- the objects ---------- */

char *api_sandbox_json(const struct store_sandbox *sb, enum api_sandbox_view view,
                       const char *envd_version, err_t *err)
{
    json_t *o = json_object();
    if (!o) {
        err_set(err, ENOMEM, "sandbox %s", sb->id);
        return NULL;
    }
    json_object_set_new(o, "sandboxID", json_string(sb->id));
    json_object_set_new(o, "templateID", json_string(sb->template_id));
    if (sb->alias[0])
        json_object_set_new(o, "alias", json_string(sb->alias));
    json_object_set_new(o, "clientID", json_string("local"));
    json_object_set_new(o, "envdVersion", json_string(envd_version));
    if (view != API_SANDBOX_LISTED && sb->envd_token[0])
        json_object_set_new(o, "envdAccessToken", json_string(sb->envd_token));
    json_object_set_new(o, "domain", json_null());
    if (view != API_SANDBOX_CREATED) {
        char started[32], end[32];
        api_time_format(sb->created_ms, started);
        api_time_format(sb->deadline_ms, end);
        json_object_set_new(o, "startedAt", json_string(started));
        json_object_set_new(o, "endAt", json_string(end));
        json_object_set_new(o, "state",
                            json_string(sb->state == SANDBOX_PAUSED ? "paused" : "running"));
        json_object_set_new(o, "cpuCount", json_integer(sb->cpu_count));
        json_object_set_new(o, "memoryMB", json_integer(sb->memory_mb));
        json_object_set_new(o, "diskSizeMB", json_integer(sb->disk_mb));
        json_t *metadata = json_loads(sb->metadata_json ? sb->metadata_json : "{}", 0, NULL);
        json_object_set_new(o, "metadata", json_is_object(metadata) ? metadata : json_object());
        if (metadata && !json_is_object(metadata))
            json_decref(metadata);
        json_object_set_new(o, "volumeMounts", json_array());
    }
    if (view == API_SANDBOX_DETAIL)
        json_object_set_new(o, "lifecycle",
                            json_pack("{s:s, s:b}", "onTimeout", sb->auto_pause ? "pause" : "kill",
                                      "autoResume", sb->auto_resume));
    else if (view == API_SANDBOX_CREATED) {
        char traffic[AUTH_TOKEN_MAX + 1];
        json_object_set_new(o, "trafficAccessToken",
                            sb->envd_token[0] &&
                                    auth_traffic_token(sb->envd_token, traffic, sizeof traffic) == 0
                                ? json_string(traffic)
                                : json_null());
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        err_set(err, ENOMEM, "sandbox %s", sb->id);
    return text;
}

/* ---------- times and ids ---------- */

void api_time_format(int64_t ms, char out[32])
{
    time_t s = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    if (frac < 0) {
        frac += 1000;
        s -= 1;
    }
    struct tm tm;
    if (!gmtime_r(&s, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        snprintf(out, 32, "1970-01-01T00:00:00.000Z");
        return;
    }
    /* 4-digit years only (checked above): 19 bytes, then ".mmmZ" */
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03uZ", (unsigned)frac % 1000u);
}

/* n digits at *p into *out; advances *p. */
static bool digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

int api_time_parse(const char *s, int64_t *ms)
{
    const char *p = s;
    int year, mon, day, hour, min, sec, ms_part = 0;
    if (!digits(&p, 4, &year) || *p++ != '-' || !digits(&p, 2, &mon) || *p++ != '-' ||
        !digits(&p, 2, &day) || (*p != 'T' && *p != 't' && *p != ' '))
        return -1;
    p++;
    if (!digits(&p, 2, &hour) || *p++ != ':' || !digits(&p, 2, &min) || *p++ != ':' ||
        !digits(&p, 2, &sec))
        return -1;
    if (*p == '.') {
        p++;
        int n = 0;
        while (isdigit((unsigned char)*p)) {
            if (n < 3)
                ms_part = ms_part * 10 + (*p - '0');
            n++;
            p++;
        }
        if (n == 0 || n > 9)
            return -1;
        for (; n < 3; n++)
            ms_part *= 10;
    }
    int offset_min = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset_min = sign * (oh * 60 + om);
    } else {
        return -1;
    }
    if (*p || mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
        return -1;
    struct tm tm = {.tm_year = year - 1900,
                    .tm_mon = mon - 1,
                    .tm_mday = day,
                    .tm_hour = hour,
                    .tm_min = min,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_mday != day) /* 2026-02-31 came back as March */
        return -1;
    *ms = ((int64_t)t - (int64_t)offset_min * 60) * 1000 + ms_part;
    return 0;
}

void api_sandbox_id_new(char out[API_SANDBOX_ID_LEN + 1])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int i = 0; i < API_SANDBOX_ID_LEN; i++)
        out[i] = alphabet[randombytes_uniform(sizeof alphabet - 1)];
    out[API_SANDBOX_ID_LEN] = '\0';
}

bool api_id_valid(const char *s)
{
    size_t n = 0;
    if (!s || s[0] == '.' || s[0] == '-')
        return false;
    for (; s[n]; n++)
        if (!(isalnum((unsigned char)s[n]) || s[n] == '.' || s[n] == '_' || s[n] == '-'))
            return false;
    return n >= 1 && n <= STORE_ID_MAX;
}
