#include "api/interp_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ENV_VARS_MAX 1024 /* per execution */
#define NAME_MAX_LEN 256  /* a language, a context id, an env var's name */

/* A string member, absent or null as NULL; anything else but a string (or one with a NUL byte,
 * or longer than max) is an error. */
static int opt_string(json_t *o, const char *key, size_t max, char **out, err_t *err)
{
    *out = NULL;
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return err_set(err, EINVAL, "%s must be a string", key);
    size_t n = json_string_length(v);
    if (n > max || strlen(json_string_value(v)) != n)
        return err_set(err, EINVAL, "%s is longer than %zu bytes or has a NUL byte", key, max);
    *out = strdup(json_string_value(v));
    return *out ? 0 : err_set(err, ENOMEM, "%s", key);
}

static json_t *load_object(const char *body, size_t len, err_t *err)
{
    if (len == 0)
        return json_object();
    json_error_t jerr;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(o)) {
        json_decref(o);
        err_set(err, EINVAL, "the body must be a JSON object%s%s", o ? "" : ": ",
                o ? "" : jerr.text);
        return NULL;
    }
    return o;
}

int interp_execute_parse(const char *body, size_t len, struct interp_execute *out, err_t *err)
{
    *out = (struct interp_execute){0};
    json_t *o = load_object(body, len, err);
    if (!o)
        return -1;
    json_t *code = json_object_get(o, "code");
    json_t *env = json_object_get(o, "env_vars");
    int rc = -1;
    if (!json_is_string(code)) {
        err_set(err, EINVAL, "code must be a string");
        goto out;
    }
    if (opt_string(o, "context_id", NAME_MAX_LEN, &out->context_id, err) < 0 ||
        opt_string(o, "language", NAME_MAX_LEN, &out->language, err) < 0)
        goto out;
    if (out->context_id && out->language) {
        err_set(err, EINVAL, "give context_id or language, not both");
        goto out;
    }
    if (env && !json_is_null(env)) {
        if (!json_is_object(env) || json_object_size(env) > ENV_VARS_MAX) {
            err_set(err, EINVAL, "env_vars must be an object of at most %d strings", ENV_VARS_MAX);
            goto out;
        }
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v)
        {
            size_t n = strlen(k);
            if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
                err_set(err, EINVAL, "env_vars.%.64s must be a string without NUL bytes", k);
                goto out;
            }
            if (n == 0 || n > NAME_MAX_LEN || strchr(k, '=')) {
                err_set(err, EINVAL, "env_vars: '%.64s' is not a variable's name", k);
                goto out;
            }
        }
        out->env_vars = json_incref(env);
    } else {
        out->env_vars = json_object();
    }
    out->code = json_incref(code);
    rc = 0;
out:
    json_decref(o);
    if (rc < 0)
        interp_execute_free(out);
    return rc;
}

void interp_execute_free(struct interp_execute *e)
{
    json_decref(e->code);
    json_decref(e->env_vars);
    free(e->context_id);
    free(e->language);
    *e = (struct interp_execute){0};
}

char *interp_line(json_t *o, size_t *len)
{
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    *len = n + 1;
    return line;
}

char *interp_execute_request(const struct interp_execute *e, const char *id, size_t *len)
{
    return interp_line(json_pack("{s:s,s:s,s:O,s:O}", "type", "execute", "id", id, "code", e->code,
                                 "env_vars", e->env_vars),
                       len);
}

char *interp_environment_request(const char *env_json, size_t *len)
{
    json_t *env = env_json ? json_loads(env_json, 0, NULL) : NULL;
    json_t *vars = json_object();
    const char *k;
    json_t *v;
    if (json_is_object(env) && vars) {
        json_object_foreach(env, k, v)
        {
            if (json_is_string(v) && json_object_set(vars, k, v) < 0) {
                json_decref(vars);
                vars = NULL;
                break;
            }
        }
    }
    json_decref(env);
    if (!vars || json_object_size(vars) == 0) {
        json_decref(vars);
        return NULL;
    }
    return interp_line(json_pack("{s:s,s:o}", "type", "environment", "env_vars", vars), len);
}

int interp_context_parse(const char *body, size_t len, struct interp_context_request *out,
                         err_t *err)
{
    *out = (struct interp_context_request){0};
    json_t *o = load_object(body, len, err);
    if (!o)
        return -1;
    int rc = opt_string(o, "language", NAME_MAX_LEN, &out->language, err);
    if (rc == 0)
        rc = opt_string(o, "cwd", INTERP_CWD_MAX, &out->cwd, err);
    if (rc == 0 && out->cwd && out->cwd[0] != '/')
        rc = err_set(err, EINVAL, "cwd must be an absolute path");
    json_decref(o);
    if (rc < 0)
        interp_context_free(out);
    return rc;
}

void interp_context_free(struct interp_context_request *r)
{
    free(r->language);
    free(r->cwd);
    *r = (struct interp_context_request){0};
}

/* ---------- a kernel's messages ---------- */

static const char *const result_strings[] = {"text", "html", "markdown", "svg",       "png",
                                             "jpeg", "pdf",  "latex",    "javascript"};
static const char *const result_values[] = {"json", "data", "chart"};

/* A result as the client gets it: only E2B's keys, each of the right kind. */
static json_t *result_line(json_t *m, err_t *err)
{
    json_t *out = json_pack("{s:s}", "type", "result");
    for (size_t i = 0; out && i < sizeof result_strings / sizeof *result_strings; i++) {
        json_t *v = json_object_get(m, result_strings[i]);
        if (v && !json_is_string(v) && !json_is_null(v)) {
            json_decref(out);
            err_set(err, EPROTO, "a result whose %s is not a string", result_strings[i]);
            return NULL;
        }
        if (json_is_string(v))
            json_object_set(out, result_strings[i], v);
    }
    for (size_t i = 0; out && i < sizeof result_values / sizeof *result_values; i++) {
        json_t *v = json_object_get(m, result_values[i]);
        if (v && !json_is_null(v))
            json_object_set(out, result_values[i], v);
    }
    json_t *extra = json_object_get(m, "extra");
    if (out) {
        json_object_set_new(out, "extra",
                            json_is_object(extra) ? json_incref(extra) : json_object());
        json_object_set_new(out, "is_main_result",
                            json_boolean(json_is_true(json_object_get(m, "is_main_result"))));
    }
    if (!out)
        err_set(err, ENOMEM, "a result");
    return out;
}

int kernel_message_parse(const char *line, size_t len, const char *timestamp_iso,
                         struct kernel_message *out, err_t *err)
{
    *out = (struct kernel_message){0};
    json_error_t jerr;
    json_t *m = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *type = json_string_value(json_object_get(m, "type"));
    int rc = 0;
    if (!json_is_object(m) || !type) {
        rc = err_set(err, EPROTO, "a line that is not a message");
    } else if (strcmp(type, "ready") == 0) {
        json_t *pid = json_object_get(m, "pid");
        out->type = KERNEL_READY;
        if (pid && (!json_is_integer(pid) || json_integer_value(pid) < 2 ||
                    json_integer_value(pid) > (1 << 22)))
            rc = err_set(err, EPROTO, "a ready whose pid is not one");
        else if (pid)
            out->pid = (long)json_integer_value(pid);
    } else if (strcmp(type, "keepalive") == 0) {
        out->type = KERNEL_KEEPALIVE;
    } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        json_t *text = json_object_get(m, "text");
        out->type = KERNEL_OUTPUT;
        if (!json_is_string(text))
            rc = err_set(err, EPROTO, "output without its text");
        else if (!(out->client_line = json_pack("{s:s,s:O,s:s}", "type", type, "text", text,
                                                "timestamp", timestamp_iso)))
            rc = err_set(err, ENOMEM, "output");
    } else if (strcmp(type, "result") == 0) {
        out->type = KERNEL_RESULT;
        if (!(out->client_line = result_line(m, err)))
            rc = -1;
    } else if (strcmp(type, "error") == 0) {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *value = json_string_value(json_object_get(m, "value"));
        const char *tb = json_string_value(json_object_get(m, "traceback"));
        out->type = KERNEL_ERROR;
        if (!(out->client_line =
                  json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", name ? name : "Error",
                            "value", value ? value : "", "traceback", tb ? tb : "")))
            rc = err_set(err, ENOMEM, "an error");
    } else if (strcmp(type, "end_of_execution") == 0) {
        const char *id = json_string_value(json_object_get(m, "id"));
        out->type = KERNEL_END_OF_EXECUTION;
        if (!id || !id[0] || strlen(id) >= sizeof out->end_id)
            rc = err_set(err, EPROTO, "the end of an execution without its id");
        else
            memcpy(out->end_id, id, strlen(id) + 1);
    } else {
        rc = err_set(err, EPROTO, "a message of an unknown type");
    }
    json_decref(m);
    if (rc < 0)
        kernel_message_free(out);
    return rc;
}

void kernel_message_free(struct kernel_message *m)
{
    json_decref(m->client_line);
    m->client_line = NULL;
}
