/* What the client subcommands share (remote.h). */
#include "cli/remote.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int remote_fail(const char *cmd, int status, const err_t *err)
{
    fprintf(stderr, "hutch %s: %s\n", cmd, err->msg);
    return status;
}

int remote_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hutch %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (hutch %s --help)\n", cmd);
    va_end(ap);
    return REMOTE_EXIT_USAGE;
}

int remote_add_pair(json_t *obj, const char *arg, const char *what, err_t *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return err_set(err, 0, "%s '%s': want KEY=VALUE", what, arg);
    char *key = strndup(arg, (size_t)(eq - arg));
    if (!key || json_object_set_new(obj, key, json_string(eq + 1)) < 0) {
        free(key);
        return err_set(err, 0, "%s '%s': not UTF-8, or no memory", what, arg);
    }
    free(key);
    return 0;
}

bool remote_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

int remote_json_call(const char *method, const char *target, const json_t *body, json_t **out,
                     int *status, err_t *err)
{
    if (out)
        *out = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text)
        return err_set(err, ENOMEM, "request body");
    static const struct client_header json_type[] = {{"Content-Type", "application/json"}};
    struct client_response r = {0};
    int rc = client_call(method, target, json_type, text ? 1 : 0, text, text ? strlen(text) : 0, &r,
                         err);
    free(text);
    if (rc < 0)
        goto out;
    if (status)
        *status = r.status;
    if (r.status < 200 || r.status > 299) {
        rc = client_error_from(&r, err);
        goto out;
    }
    if (out && r.len) {
        json_error_t je;
        *out = json_loadb(r.body, r.len, 0, &je);
        if (!*out)
            rc = err_set(err, 0, "the daemon's answer is not JSON: %s", je.text);
    }
out:
    client_response_free(&r);
    return rc;
}

int remote_envd_open(const char *id, bool as_root, struct remote_envd *e, err_t *err)
{
    memset(e, 0, sizeof *e);
    if (!remote_id_ok(id))
        return err_set(err, 0, "'%.80s' is not a sandbox id", id);
    char target[128];
    snprintf(target, sizeof target, "/sandboxes/%s", id);
    json_t *detail;
    if (remote_json_call("GET", target, NULL, &detail, NULL, err) < 0)
        return -1;
    const char *state = json_string_value(json_object_get(detail, "state"));
    const char *token = json_string_value(json_object_get(detail, "envdAccessToken"));
    int rc = 0;
    if (state && strcmp(state, "paused") == 0)
        rc = err_set(err, 0, "sandbox %s is paused: resume it with `hutch resume %s`", id, id);
    else if (!token || strlen(token) >= sizeof e->token)
        rc = err_set(err, 0, "sandbox %s: the daemon gave no access token", id);
    else {
        snprintf(e->id, sizeof e->id, "%s", id);
        snprintf(e->token, sizeof e->token, "%s", token);
        e->as_root = as_root;
    }
    json_decref(detail);
    return rc;
}

size_t remote_envd_headers(const struct remote_envd *e, struct client_header *h)
{
    size_t n = 0;
    h[n++] = (struct client_header){"E2b-Sandbox-Id", e->id};
    h[n++] = (struct client_header){"E2b-Sandbox-Port", "49983"};
    h[n++] = (struct client_header){"X-Access-Token", e->token};
    if (e->as_root)
        h[n++] = (struct client_header){"Authorization", "Basic cm9vdDo="}; /* "root:" */
    return n;
}

int remote_envd_unary(const struct remote_envd *e, const char *path, const json_t *request,
                      err_t *err)
{
    char *text = json_dumps(request, JSON_COMPACT);
    if (!text)
        return err_set(err, ENOMEM, "request");
    struct client_header h[REMOTE_ENVD_HEADERS + 2];
    size_t n = remote_envd_headers(e, h);
    h[n++] = (struct client_header){"Content-Type", "application/json"};
    h[n++] = (struct client_header){"Connect-Protocol-Version", "1"};
    struct client_response r = {0};
    int rc = client_call("POST", path, h, n, text, strlen(text), &r, err);
    free(text);
    if (rc == 0 && r.status != 200)
        rc = client_error_from(&r, err);
    client_response_free(&r);
    return rc;
}
