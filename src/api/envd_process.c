#include "api/envd_process.h"
#include "api/json_input.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(err_t *err, int errnum, const char *field, const char *why)
{
    return api_input_error(err, errnum, "%s %s", field, why);
}

/* The message as a JSON object; an empty one is refused (every request has a field). */
static json_t *load(const char *json, err_t *err)
{
    if (!json || !json[0]) {
        fail(err, EINVAL, "the message", "is empty");
        return NULL;
    }
    return api_json_object(json, strlen(json), err);
}

#define text api_json_string

/* A uint32 (protobuf-JSON: a number, or a string of digits). */
static int uint32_value(const json_t *v, const char *field, uint32_t *out, err_t *err)
{
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        n = strtoll(s, &end, 10);
        if (errno || end == s || *end)
            return fail(err, EINVAL, field, "must be a number");
    } else {
        return fail(err, EINVAL, field, "must be a number");
    }
    if (n < 0 || n > UINT32_MAX)
        return fail(err, EINVAL, field, "is out of range");
    *out = (uint32_t)n;
    return 0;
}

static char **vector_new(size_t n)
{
    return calloc(n + 1, sizeof(char *));
}

static void vector_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* {size:{cols, rows}}, each 1..65535 */
static int pty_size(const json_t *pty, unsigned short *rows, unsigned short *cols, err_t *err)
{
    const json_t *size = json_object_get(pty, "size");
    uint32_t r = 0, c = 0;
    if (!json_is_object(size) ||
        uint32_value(json_object_get(size, "rows"), "pty.size.rows", &r, err) < 0 ||
        uint32_value(json_object_get(size, "cols"), "pty.size.cols", &c, err) < 0)
        return err->msg[0] ? -1 : fail(err, EINVAL, "pty.size", "must be {cols, rows}");
    if (r < 1 || r > 65535 || c < 1 || c > 65535)
        return fail(err, EINVAL, "pty.size", "must be 1 to 65535 rows and columns");
    *rows = (unsigned short)r;
    *cols = (unsigned short)c;
    return 0;
}

int envd_start_parse(const char *json, struct envd_start *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    err->msg[0] = '\0';
    json_t *root = load(json, err);
    if (!root)
        return -1;
    int rc = -1;
    const json_t *process = json_object_get(root, "process");
    if (!json_is_object(process)) {
        fail(err, EINVAL, "process", "must be an object {cmd, args, envs, cwd}");
        goto out;
    }
    const char *cmd = text(json_object_get(process, "cmd"), "process.cmd", ENVD_MAX_ARG, err);
    if (!cmd)
        goto out;
    if (!cmd[0]) {
        fail(err, EINVAL, "process.cmd", "is empty");
        goto out;
    }
    const json_t *args = json_object_get(process, "args");
    if (args && !json_is_null(args) && !json_is_array(args)) {
        fail(err, EINVAL, "process.args", "must be an array of strings");
        goto out;
    }
    size_t n_args = json_is_array(args) ? json_array_size(args) : 0;
    if (n_args + 1 > ENVD_MAX_ARGS) {
        fail(err, E2BIG, "process.args", "has too many entries");
        goto out;
    }
    out->argv = vector_new(n_args + 1);
    if (!out->argv || !(out->argv[0] = strdup(cmd))) {
        fail(err, ENOMEM, "process", "no memory");
        goto out;
    }
    for (size_t i = 0; i < n_args; i++) {
        const char *a = text(json_array_get(args, i), "process.args[]", ENVD_MAX_ARG, err);
        if (!a || !(out->argv[i + 1] = strdup(a))) {
            if (a)
                fail(err, ENOMEM, "process", "no memory");
            goto out;
        }
    }
    const json_t *envs = json_object_get(process, "envs");
    if (envs && !json_is_null(envs) && !json_is_object(envs)) {
        fail(err, EINVAL, "process.envs", "must be an object of strings");
        goto out;
    }
    size_t n_envs = json_is_object(envs) ? json_object_size(envs) : 0;
    if (n_envs > ENVD_MAX_ENVS) {
        fail(err, E2BIG, "process.envs", "has too many entries");
        goto out;
    }
    out->envp = vector_new(n_envs);
    if (!out->envp) {
        fail(err, ENOMEM, "process", "no memory");
        goto out;
    }
    const char *key;
    json_t *value;
    size_t i = 0;
    json_object_foreach((json_t *)envs, key, value)
    {
        const char *v = text(value, "process.envs value", ENVD_MAX_ARG, err);
        if (!v)
            goto out;
        if (!api_env_name_valid(key) || strlen(key) > 256) {
            fail(err, EINVAL, "process.envs", "has a name that is not a variable name");
            goto out;
        }
        if (asprintf(&out->envp[i], "%s=%s", key, v) < 0) {
            out->envp[i] = NULL;
            fail(err, ENOMEM, "process", "no memory");
            goto out;
        }
        i++;
    }
    const json_t *cwd = json_object_get(process, "cwd");
    if (cwd && !json_is_null(cwd)) {
        const char *c = text(cwd, "process.cwd", ENVD_MAX_CWD, err);
        if (!c)
            goto out;
        if (c[0] && !(out->cwd = strdup(c))) {
            fail(err, ENOMEM, "process", "no memory");
            goto out;
        }
    }
    const json_t *tag = json_object_get(root, "tag");
    if (tag && !json_is_null(tag)) {
        const char *t = text(tag, "tag", ENVD_MAX_TAG, err);
        if (!t || !(out->tag = strdup(t)))
            goto out;
    }
    const json_t *pty = json_object_get(root, "pty");
    if (pty && !json_is_null(pty)) {
        if (!json_is_object(pty) || pty_size(pty, &out->rows, &out->cols, err) < 0) {
            if (!err->msg[0])
                fail(err, EINVAL, "pty", "must be {size:{cols, rows}}");
            goto out;
        }
        out->pty = true;
    }
    const json_t *in = json_object_get(root, "stdin");
    out->stdin_open = true;
    if (in && !json_is_null(in)) {
        if (!json_is_boolean(in)) {
            fail(err, EINVAL, "stdin", "must be true or false");
            goto out;
        }
        out->stdin_open = json_is_true(in);
    }
    rc = 0;
out:
    json_decref(root);
    if (rc < 0)
        envd_start_free(out);
    return rc;
}

void envd_start_free(struct envd_start *s)
{
    vector_free(s->argv);
    vector_free(s->envp);
    free(s->cwd);
    free(s->tag);
    memset(s, 0, sizeof *s);
}

static int selector_from(const json_t *root, struct envd_selector *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    const json_t *p = json_object_get(root, "process");
    if (!json_is_object(p))
        return fail(err, EINVAL, "process", "must be {pid} or {tag}");
    const json_t *pid = json_object_get(p, "pid"), *tag = json_object_get(p, "tag");
    if (pid && !json_is_null(pid))
        return uint32_value(pid, "process.pid", &out->pid, err);
    if (tag && !json_is_null(tag)) {
        const char *t = text(tag, "process.tag", ENVD_MAX_TAG, err);
        if (!t)
            return -1;
        out->by_tag = true;
        snprintf(out->tag, sizeof out->tag, "%s", t);
        return 0;
    }
    return fail(err, EINVAL, "process", "must be {pid} or {tag}");
}

int envd_selector_parse(const char *json, struct envd_selector *out, err_t *err)
{
    json_t *root = load(json, err);
    if (!root)
        return -1;
    int rc = selector_from(root, out, err);
    json_decref(root);
    return rc;
}

/* ProcessInput: {stdin: base64} or {pty: base64}, decoded into *data (malloc'd). */
static int input_from(const json_t *input, bool *to_pty, uint8_t **data, size_t *len, err_t *err)
{
    *data = NULL;
    *len = 0;
    const json_t *b64 = json_object_get(input, "stdin");
    *to_pty = false;
    if (!b64) {
        b64 = json_object_get(input, "pty");
        *to_pty = true;
    }
    if (!json_is_object(input) || !b64)
        return fail(err, EINVAL, "input", "must be {stdin} or {pty}");
    const char *s = text(b64, "input", (size_t)ENVD_MAX_INPUT * 4 / 3 + 4, err);
    if (!s)
        return -1;
    size_t n = strlen(s), max = n / 4 * 3 + 3;
    *data = malloc(max + 1);
    /* standard base64, with or without its padding */
    if (!*data ||
        (sodium_base642bin(*data, max, s, n, NULL, len, NULL, sodium_base64_VARIANT_ORIGINAL) < 0 &&
         sodium_base642bin(*data, max, s, n, NULL, len, NULL,
                           sodium_base64_VARIANT_ORIGINAL_NO_PADDING) < 0)) {
        free(*data);
        *data = NULL;
        *len = 0;
        return fail(err, EINVAL, "input", "is not base64");
    }
    if (*len > ENVD_MAX_INPUT) {
        free(*data);
        *data = NULL;
        *len = 0;
        return fail(err, E2BIG, "input", "is larger than 1 MiB");
    }
    return 0;
}

int envd_input_parse(const char *json, struct envd_selector *sel, bool *to_pty, uint8_t **data,
                     size_t *len, err_t *err)
{
    *data = NULL;
    *len = 0;
    json_t *root = load(json, err);
    if (!root)
        return -1;
    int rc = selector_from(root, sel, err);
    if (rc == 0)
        rc = input_from(json_object_get(root, "input"), to_pty, data, len, err);
    json_decref(root);
    return rc;
}

int envd_stream_input_parse(const char *json, enum envd_stream_input *kind,
                            struct envd_selector *sel, bool *to_pty, uint8_t **data, size_t *len,
                            err_t *err)
{
    *data = NULL;
    *len = 0;
    json_t *root = load(json, err);
    if (!root)
        return -1;
    const json_t *start = json_object_get(root, "start"), *d = json_object_get(root, "data"),
                 *keepalive = json_object_get(root, "keepalive");
    int rc;
    if ((start != NULL) + (d != NULL) + (keepalive != NULL) != 1) {
        rc = fail(err, EINVAL, "event", "must be one of start, data and keepalive");
    } else if (start) {
        *kind = ENVD_STREAM_INPUT_START;
        rc = json_is_object(start) ? selector_from(start, sel, err)
                                   : fail(err, EINVAL, "start", "must be {process}");
    } else if (d) {
        *kind = ENVD_STREAM_INPUT_DATA;
        rc = json_is_object(d) ? input_from(json_object_get(d, "input"), to_pty, data, len, err)
                               : fail(err, EINVAL, "data", "must be {input}");
    } else {
        *kind = ENVD_STREAM_INPUT_KEEPALIVE;
        rc = 0;
    }
    json_decref(root);
    return rc;
}

int envd_signal_parse(const char *json, struct envd_selector *sel, int *signo, err_t *err)
{
    json_t *root = load(json, err);
    if (!root)
        return -1;
    int rc = selector_from(root, sel, err);
    const json_t *sig = json_object_get(root, "signal");
    if (rc == 0) {
        if (json_is_string(sig) && strcmp(json_string_value(sig), "SIGNAL_SIGKILL") == 0)
            *signo = SIGKILL;
        else if (json_is_string(sig) && strcmp(json_string_value(sig), "SIGNAL_SIGTERM") == 0)
            *signo = SIGTERM;
        else if (json_is_integer(sig) &&
                 (json_integer_value(sig) == SIGKILL || json_integer_value(sig) == SIGTERM))
            *signo = (int)json_integer_value(sig);
        else
            rc = fail(err, EINVAL, "signal", "must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
    }
    json_decref(root);
    return rc;
}

int envd_update_parse(const char *json, struct envd_selector *sel, unsigned short *rows,
                      unsigned short *cols, err_t *err)
{
    err->msg[0] = '\0';
    json_t *root = load(json, err);
    if (!root)
        return -1;
    int rc = selector_from(root, sel, err);
    const json_t *pty = json_object_get(root, "pty");
    if (rc == 0 && (!json_is_object(pty) || pty_size(pty, rows, cols, err) < 0))
        rc = err->msg[0] ? -1 : fail(err, EINVAL, "pty", "must be {size:{cols, rows}}");
    json_decref(root);
    return rc;
}

/* ---------- events ---------- */

static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *envd_event_start(uint32_t pid)
{
    return dump(json_pack("{s:{s:{s:I}}}", "event", "start", "pid", (json_int_t)pid));
}

char *envd_event_data(const char *stream, const uint8_t *data, size_t len)
{
    size_t size = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(size);
    if (!b64)
        return NULL;
    sodium_bin2base64(b64, size, data, len, sodium_base64_VARIANT_ORIGINAL);
    char *s = dump(json_pack("{s:{s:{s:s}}}", "event", "data", stream, b64));
    free(b64);
    return s;
}

char *envd_event_keepalive(void)
{
    return dump(json_pack("{s:{s:{}}}", "event", "keepalive"));
}

char *envd_event_end(int exit_code, int signo)
{
    char status[96];
    if (signo) {
        /* Go prints strsignal's text with a lower-case first letter ("signal: killed") */
        const char *name = strsignal(signo);
        snprintf(status, sizeof status, "signal: %s", name ? name : "unknown signal");
        status[8] = (char)tolower((unsigned char)status[8]);
    } else {
        snprintf(status, sizeof status, "exit status %d", exit_code);
    }
    json_t *end = json_object();
    if (!end)
        return NULL;
    int code = signo ? -1 : exit_code;
    if (code != 0)
        json_object_set_new(end, "exitCode", json_integer(code));
    if (!signo)
        json_object_set_new(end, "exited", json_true());
    json_object_set_new(end, "status", json_string(status));
    if (code != 0)
        json_object_set_new(end, "error", json_string(status));
    return dump(json_pack("{s:{s:o}}", "event", "end", end));
}

char *envd_list_reply(const struct envd_process_entry *entries, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        const struct envd_process_entry *e = &entries[i];
        json_t *args = json_array(), *envs = json_object();
        for (size_t a = 1; e->argv && e->argv[0] && e->argv[a]; a++)
            json_array_append_new(args, json_string(e->argv[a]));
        for (size_t v = 0; e->envp && e->envp[v]; v++) {
            const char *eq = strchr(e->envp[v], '=');
            if (!eq)
                continue;
            char name[257];
            snprintf(name, sizeof name, "%.*s", (int)(eq - e->envp[v]), e->envp[v]);
            json_object_set_new(envs, name, json_string(eq + 1));
        }
        json_t *config =
            json_pack("{s:s, s:o, s:o}", "cmd", e->argv && e->argv[0] ? e->argv[0] : "", "args",
                      args, "envs", envs);
        if (config && e->cwd)
            json_object_set_new(config, "cwd", json_string(e->cwd));
        json_t *p = json_pack("{s:o, s:I}", "config", config, "pid", (json_int_t)e->pid);
        if (p && e->tag && e->tag[0])
            json_object_set_new(p, "tag", json_string(e->tag));
        json_array_append_new(list, p);
    }
    return dump(json_pack("{s:o}", "processes", list));
}
