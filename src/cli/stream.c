/* A Start stream (stream.h). */
#include "cli/stream.h"

#include <ctype.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int stream_signal_status(const char *status)
{
    static const char prefix[] = "signal: ";
    if (strncmp(status, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *name = status + sizeof prefix - 1;
    /* the daemon writes strsignal's text with a lower-case first letter (Go's texts are
     * the same words); compared case-insensitively */
    for (int signo = 1; signo < NSIG; signo++) {
        const char *text = strsignal(signo);
        if (text && strcasecmp(text, name) == 0)
            return 128 + signo;
    }
    return -1;
}

static int write_all(int fd, const uint8_t *p, size_t len, err_t *err)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, errno, "writing the command's output");
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int on_data(struct stream *s, json_t *data, err_t *err)
{
    static const char *const names[] = {"stdout", "stderr", "pty"};
    static const int fds[] = {STDOUT_FILENO, STDERR_FILENO, STDOUT_FILENO};
    for (size_t i = 0; i < 3; i++) {
        const char *b64 = json_string_value(json_object_get(data, names[i]));
        if (!b64)
            continue;
        size_t n = strlen(b64), out_len;
        uint8_t *bytes = malloc(n / 4 * 3 + 3);
        if (!bytes)
            return err_set(err, ENOMEM, "output");
        int rc = sodium_base642bin(bytes, n / 4 * 3 + 3, b64, n, NULL, &out_len, NULL,
                                   sodium_base64_VARIANT_ORIGINAL);
        if (rc == 0)
            rc = write_all(fds[i], bytes, out_len, err);
        else
            rc = err_set(err, 0, "output that is not base64");
        free(bytes);
        return rc;
    }
    return 0;
}

static void on_end(struct stream *s, json_t *end)
{
    json_int_t code = json_integer_value(json_object_get(end, "exitCode"));
    bool exited = json_is_true(json_object_get(end, "exited"));
    const char *status = json_string_value(json_object_get(end, "status"));
    snprintf(s->status, sizeof s->status, "%s", status ? status : "");
    s->ended = true;
    if (exited)
        s->exit_status = (int)(code & 0xff);
    else if ((s->exit_status = stream_signal_status(s->status)) < 0)
        s->exit_status = 255; /* killed, by what it did not say */
}

/* One whole envelope. */
static int on_frame(struct stream *s, uint8_t flags, const char *json, size_t len, err_t *err)
{
    json_error_t je;
    json_t *j = json_loadb(json, len, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        return err_set(err, 0, "a stream frame that is not a JSON object");
    }
    int rc = 0;
    if (flags & 0x02) { /* end of stream: {} or {"error":{code, message}} */
        s->end_of_stream = true;
        json_t *e = json_object_get(j, "error");
        if (e) {
            const char *code = json_string_value(json_object_get(e, "code"));
            const char *message = json_string_value(json_object_get(e, "message"));
            if (message && message[0])
                snprintf(s->error, sizeof s->error, "%s", message);
            else
                snprintf(s->error, sizeof s->error, "%s", code ? code : "error");
        }
    } else {
        json_t *ev = json_object_get(j, "event"), *v;
        if ((v = json_object_get(ev, "start"))) {
            s->pid = (uint32_t)json_integer_value(json_object_get(v, "pid"));
            s->started = true;
        } else if ((v = json_object_get(ev, "data"))) {
            rc = on_data(s, v, err);
        } else if ((v = json_object_get(ev, "end"))) {
            on_end(s, v);
        } /* keepalive and what a later envd adds: nothing to do */
    }
    json_decref(j);
    return rc;
}

/* The body: envelopes in pieces; a non-200 answer's body is gathered for its message. */
static int on_body(const char *data, size_t len, void *user, err_t *err)
{
    struct stream *s = user;
    if (s->r.status != 200) {
        size_t room = sizeof s->error - 1 - strlen(s->error);
        strncat(s->error, data, len < room ? len : room);
        return 0;
    }
    const uint8_t *p = (const uint8_t *)data;
    while (len) {
        if (s->header_have < sizeof s->header) {
            size_t take = sizeof s->header - s->header_have;
            take = take < len ? take : len;
            memcpy(s->header + s->header_have, p, take);
            s->header_have += take;
            p += take;
            len -= take;
            if (s->header_have < sizeof s->header)
                return 0;
            s->length = (uint32_t)s->header[1] << 24 | (uint32_t)s->header[2] << 16 |
                        (uint32_t)s->header[3] << 8 | s->header[4];
            if (s->header[0] & 0x01)
                return err_set(err, 0, "a compressed stream frame");
            if (s->length > STREAM_MAX_FRAME)
                return err_set(err, 0, "a stream frame of %u bytes", s->length);
            s->message = malloc(s->length + 1);
            s->have = 0;
            if (!s->message)
                return err_set(err, ENOMEM, "a stream frame");
        }
        size_t take = s->length - s->have;
        take = take < len ? take : len;
        memcpy(s->message + s->have, p, take);
        s->have += take;
        p += take;
        len -= take;
        if (s->have == s->length) {
            int rc = on_frame(s, s->header[0], s->message, s->length, err);
            free(s->message);
            s->message = NULL;
            s->header_have = 0;
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

int stream_start(struct stream *s, const struct remote_envd *e, const json_t *request, err_t *err)
{
    memset(s, 0, sizeof *s);
    s->envd = *e;
    char *json = json_dumps(request, JSON_COMPACT);
    if (!json)
        return err_set(err, ENOMEM, "request");
    size_t len = strlen(json);
    uint8_t *env = malloc(len + 5);
    if (!env) {
        free(json);
        return err_set(err, ENOMEM, "request");
    }
    env[0] = 0;
    env[1] = (uint8_t)(len >> 24);
    env[2] = (uint8_t)(len >> 16);
    env[3] = (uint8_t)(len >> 8);
    env[4] = (uint8_t)len;
    memcpy(env + 5, json, len);
    free(json);
    struct client_header h[REMOTE_ENVD_HEADERS + 2];
    size_t n = remote_envd_headers(e, h);
    h[n++] = (struct client_header){"Content-Type", "application/connect+json"};
    h[n++] = (struct client_header){"Connect-Protocol-Version", "1"};
    s->r.on_body = on_body;
    s->r.user = s;
    int rc = -1;
    s->c = client_open(err);
    if (s->c && client_send(s->c, "POST", "/process.Process/Start", h, n, env, len + 5, err) == 0)
        rc = 0;
    free(env);
    return rc;
}

int stream_pump(struct stream *s, err_t *err)
{
    int rc = client_pump(s->c, &s->r, err);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return 0;
    if (s->r.status != 200) {
        struct client_response r = {
            .status = s->r.status, .body = s->error, .len = strlen(s->error)};
        return client_error_from(&r, err);
    }
    if (!s->ended && !s->started && s->error[0]) { /* "cannot execute x: No such file ..." */
        s->start_failed = true;
        return err_set(err, 0, "%s", s->error);
    }
    if (!s->ended)
        return err_set(err, 0, "the command's stream ended without its end%s%s",
                       s->error[0] ? ": " : "", s->error);
    return 1;
}

void stream_close(struct stream *s)
{
    client_close(s->c);
    s->c = NULL;
    free(s->message);
    s->message = NULL;
}
