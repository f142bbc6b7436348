/* envd's process service over Connect JSON (envd_routes.h): Start and Connect as server streams
 * of a command's events, StreamInput as a client stream of input, List, SendInput, SendSignal,
 * CloseStdin and Update as unary calls. The commands themselves are commands.c's; this file maps
 * requests and events. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/connect_rpc.h"
#include "api/envd_process.h"
#include "serve/commands.h"
#include "serve/envd_routes.h"

/* Keepalive frames on a stream every this many seconds unless the client asks otherwise
 * (Keepalive-Ping-Interval; the SDK asks 50), within these bounds. */
#define KEEPALIVE_DEFAULT_S 90
#define KEEPALIVE_MAX_S     3600

struct pcall {
    struct serve *d;
    struct http_exchange *x; /* NULL once ended */
    struct sbx *sb;          /* looked up again once the body is in: it may have gone meanwhile */
    char sandbox_id[STORE_ID_MAX + 1];
    char method[32];
    bool as_root;
    bool stream;        /* a server stream (Start, Connect): its body is one envelope */
    bool client_stream; /* StreamInput: its body is envelopes of input, as they come */
    bool input_started, body_paused;
    struct envd_selector input_to; /* StreamInput's process, from its start message */
    struct connect_reader reader;
    char *body;
    size_t len;
    struct scmd *cmd; /* the command a stream follows */
    bool responded, held;
    bool awaiting; /* a unary call waits for init's answer (agent_expect's user is this call) */
    /* a stream's keepalives and (Connect) its deadline: one timer for both */
    uv_timer_t timer;
    bool timer_open;
    uint64_t keepalive_ms;
    uint64_t timeout_ms;  /* Connect-Timeout-Ms; 0: none */
    uint64_t deadline_ms; /* uv_now of a Connect stream's end; 0: none */
    uint64_t next_keepalive_ms;
};

static void stream_end(struct pcall *p, const enum connect_code *code, const char *message);

static void pcall_freed(uv_handle_t *h)
{
    free(h->data);
}

static void pcall_free(struct pcall *p)
{
    connect_reader_free(&p->reader);
    free(p->body);
    if (p->timer_open)
        uv_close((uv_handle_t *)&p->timer, pcall_freed);
    else
        free(p);
}

/* ---------- answers ---------- */

static void unary_ok(struct pcall *p, const char *json)
{
    static const struct http_header h[] = {{"Content-Type", "application/json"}};
    if (p->x)
        http_respond(p->x, 200, h, 1, json, strlen(json));
}

static void unary_error(struct pcall *p, enum connect_code code, const char *message)
{
    static const struct http_header h[] = {{"Content-Type", "application/json"}};
    char *json = connect_error_json(code, message);
    if (p->x && json)
        http_respond(p->x, connect_code_http_status(code), h, 1, json, strlen(json));
    else if (p->x)
        http_respond_error(p->x, 500, "out of memory");
    free(json);
}

static void stream_open(struct pcall *p)
{
    static const struct http_header h[] = {{"Content-Type", "application/connect+json"}};
    if (p->x && !p->responded) {
        http_respond_start(p->x, 200, h, 1, -1);
        p->responded = true;
    }
}

/* One event frame; true when the client is congested (wait for on_drain). */
static bool stream_event(struct pcall *p, char *json)
{
    if (!json)
        return false;
    stream_open(p);
    uint8_t *frame;
    size_t n;
    int rc = 0;
    if (p->x && connect_envelope(0, json, strlen(json), &frame, &n) == 0) {
        rc = http_respond_write(p->x, frame, n);
        free(frame);
    }
    free(json);
    return rc == 1;
}

static void stream_end(struct pcall *p, const enum connect_code *code, const char *message)
{
    stream_open(p);
    uint8_t *frame;
    size_t n;
    if (p->x && connect_end_stream(code, message, &frame, &n) == 0) {
        http_respond_write(p->x, frame, n);
        free(frame);
    }
    if (p->x)
        http_respond_end(p->x);
    if (p->timer_open)
        uv_timer_stop(&p->timer);
}

/* ---------- keepalives and a Connect stream's deadline ---------- */

static void timer_arm(struct pcall *p);

static void deadline_passed(struct pcall *p)
{
    if (p->cmd) {
        if (p->held)
            scmd_hold(p->cmd, false);
        p->held = false;
        scmd_detach(p->cmd, p);
        p->cmd = NULL;
    }
    enum connect_code code = CONNECT_DEADLINE_EXCEEDED;
    stream_end(p, &code, "the request's Connect-Timeout-Ms passed");
}

static void timer_fired(uv_timer_t *t)
{
    struct pcall *p = t->data;
    uint64_t now = uv_now(t->loop);
    if (!p->x)
        return;
    if (p->deadline_ms && now >= p->deadline_ms) {
        deadline_passed(p); /* the client's timeout for following it; the command runs on */
        return;
    }
    if (now >= p->next_keepalive_ms) {
        if (p->responded)
            stream_event(p, envd_event_keepalive());
        p->next_keepalive_ms = now + p->keepalive_ms;
    }
    timer_arm(p);
}

static void timer_arm(struct pcall *p)
{
    if (!p->timer_open)
        return;
    uint64_t now = uv_now(p->timer.loop);
    uint64_t at = p->next_keepalive_ms;
    if (p->deadline_ms && p->deadline_ms < at)
        at = p->deadline_ms;
    uv_timer_start(&p->timer, timer_fired, at > now ? at - now : 0, 0);
}

static void stream_timer_start(struct pcall *p)
{
    if (!p->timer_open || !p->x)
        return;
    uint64_t now = uv_now(p->timer.loop);
    p->next_keepalive_ms = now + p->keepalive_ms;
    /* Connect's protocol: at the request's timeout the stream ends with deadline_exceeded. For a
     * Start that is also the command's lifetime (scmd_set_lifetime), and whichever timer fires
     * first ends the stream (on_lifetime_over): the SDK sees its TimeoutError, never the kill's
     * end event racing its own timer. */
    if (p->timeout_ms && (strcmp(p->method, "Connect") == 0 || strcmp(p->method, "Start") == 0))
        p->deadline_ms = now + p->timeout_ms;
    timer_arm(p);
}

/* A header of decimal digits only (at most 10, as Connect's timeout header is), or -1. */
static int64_t header_number(const char *v)
{
    if (!v || !v[0] || strlen(v) > 10)
        return -1;
    int64_t n = 0;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9')
            return -1;
        n = n * 10 + (*c - '0');
    }
    return n;
}

/* ---------- a stream following a command ---------- */

static void on_started(struct scmd *c, void *user)
{
    struct pcall *p = user;
    if (stream_event(p, envd_event_start(c->pid)) && !p->held) {
        p->held = true;
        scmd_hold(c, true);
    }
}

static void on_output(struct scmd *c, const char *stream, const uint8_t *data, size_t len,
                      void *user)
{
    struct pcall *p = user;
    if (stream_event(p, envd_event_data(stream, data, len)) && !p->held) {
        p->held = true;
        scmd_hold(c, true);
    }
}

static void on_end(struct scmd *c, void *user)
{
    struct pcall *p = user;
    p->cmd = NULL; /* detached by commands.c */
    if (c->exited && !c->error[0]) {
        stream_event(p, envd_event_end(c->exit_code, c->signo));
        stream_end(p, NULL, NULL);
    } else {
        enum connect_code code = c->started ? CONNECT_UNAVAILABLE : CONNECT_INVALID_ARGUMENT;
        if (!p->responded) { /* it never started: a unary-looking error in the stream */
            stream_end(p, &code, c->error[0] ? c->error : "the command could not start");
        } else {
            stream_end(p, &code, c->error[0] ? c->error : "the command was lost");
        }
    }
}

/* The command's lifetime is over, and with it the Start's Connect-Timeout-Ms (the same figure,
 * counted from a little later): the stream ends with deadline_exceeded now, before the kill's end
 * event, whichever of the two timers the loop ran first. */
static void on_lifetime_over(struct scmd *c, void *user)
{
    struct pcall *p = user;
    if (p->x && p->deadline_ms && strcmp(p->method, "Start") == 0)
        deadline_passed(p);
}

static const struct scmd_listener stream_listener = {on_started, on_output, on_end,
                                                     on_lifetime_over};

static struct scmd *input_target(struct pcall *p);

static void on_exchange_end(struct http_exchange *x, void *user)
{
    struct pcall *p = user;
    p->x = NULL;
    if (p->awaiting) /* init's answer would come to nobody: the sandbox lives while it waits */
        agent_cancel(p->sb, p);
    struct scmd *in = p->client_stream && p->input_started ? input_target(p) : NULL;
    if (in && in->input_drained_user == p)
        scmd_input_on_drained(in, NULL, NULL);
    if (p->cmd) { /* the client went; the command runs on (a background command) */
        if (p->held)
            scmd_hold(p->cmd, false);
        scmd_detach(p->cmd, p);
    }
    pcall_free(p);
}

static void on_drain(struct http_exchange *x, void *user)
{
    struct pcall *p = user;
    if (p->held && p->cmd) {
        p->held = false;
        scmd_hold(p->cmd, false);
    }
}

static const struct http_exchange_callbacks pcall_callbacks = {
    .on_done = on_exchange_end, .on_abort = on_exchange_end, .on_drain = on_drain};

/* ---------- Start ---------- */

static void do_start(struct pcall *p, const char *json)
{
    err_t err;
    struct envd_start s = {0};
    if (envd_start_parse(json, &s, &err) < 0) {
        enum connect_code code = CONNECT_INVALID_ARGUMENT;
        stream_end(p, &code, err.msg);
        return;
    }
    char **env = scmd_env(p->sb, p->as_root, s.envp);
    if (!env) {
        enum connect_code code = CONNECT_RESOURCE_EXHAUSTED;
        stream_end(p, &code, "out of memory");
        envd_start_free(&s);
        return;
    }
    struct jail_command_spec spec = {
        .argv = (const char *const *)s.argv,
        .envp = (const char *const *)env,
        .cwd = s.cwd        ? s.cwd
               : p->as_root ? "/root"
                            : JAIL_USER_HOME,
        .tag = s.tag,
        .as_root = p->as_root,
        .stdin_pipe = s.stdin_open,
        .pty = s.pty,
        .rows = s.rows,
        .cols = s.cols,
    };
    p->cmd = scmd_start(p->sb, &spec, &stream_listener, p, &err);
    if (p->cmd) /* envd kills a command at its Start's Connect-Timeout-Ms */
        scmd_set_lifetime(p->cmd, p->timeout_ms);
    for (size_t i = 0; env[i]; i++)
        free(env[i]);
    free(env);
    envd_start_free(&s);
    if (!p->cmd) {
        enum connect_code code = connect_code_from_errno(err.errnum);
        stream_end(p, &code, err.msg);
    }
}

/* ---------- the others ---------- */

static struct scmd *selected(struct pcall *p, const struct envd_selector *sel)
{
    struct scmd *c = scmd_find(p->sb, sel->by_tag ? 0 : sel->pid, sel->by_tag ? sel->tag : NULL);
    if (!c) {
        char why[160];
        if (sel->by_tag)
            snprintf(why, sizeof why, "process with tag %s not found", sel->tag);
        else
            snprintf(why, sizeof why, "process with pid %u not found", sel->pid);
        if (p->stream) {
            enum connect_code code = CONNECT_NOT_FOUND;
            stream_end(p, &code, why);
        } else {
            unary_error(p, CONNECT_NOT_FOUND, why);
        }
    }
    return c;
}

static void do_connect(struct pcall *p, const char *json)
{
    err_t err;
    struct envd_selector sel;
    if (envd_selector_parse(json, &sel, &err) < 0) {
        enum connect_code code = CONNECT_INVALID_ARGUMENT;
        stream_end(p, &code, err.msg);
        return;
    }
    struct scmd *c = selected(p, &sel);
    if (!c)
        return;
    p->cmd = c;
    if (scmd_attach(c, &stream_listener, p, &err) < 0) {
        p->cmd = NULL;
        enum connect_code code = CONNECT_RESOURCE_EXHAUSTED;
        stream_end(p, &code, err.msg);
    }
}

static void do_list(struct pcall *p)
{
    size_t n = 0;
    for (struct scmd *c = p->sb->cmds; c; c = c->next)
        n += c->started && !c->ended;
    struct envd_process_entry *e = calloc(n + 1, sizeof *e);
    size_t k = 0;
    for (struct scmd *c = p->sb->cmds; e && c; c = c->next)
        if (c->started && !c->ended)
            e[k++] = (struct envd_process_entry){c->pid, c->tag, (const char *const *)c->argv,
                                                 (const char *const *)c->envp, c->cwd};
    char *json = e ? envd_list_reply(e, k) : NULL;
    if (json)
        unary_ok(p, json);
    else
        unary_error(p, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
    free(json);
    free(e);
}

/* init's answer to SendSignal or CloseStdin: the unary call's. */
static void on_init_answer(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    (void)sb;
    struct pcall *p = user;
    err_t err;
    p->awaiting = false;
    if (scmd_answer_check(m, why, &err) < 0)
        unary_error(p, connect_code_from_errno(err.errnum), err.msg);
    else
        unary_ok(p, "{}");
}

static void do_unary(struct pcall *p, const char *json)
{
    err_t err = {0};
    struct envd_selector sel;
    struct scmd *c;
    int rc = 0;
    if (strcmp(p->method, "List") == 0) {
        do_list(p);
        return;
    }
    if (strcmp(p->method, "SendInput") == 0) {
        bool to_pty;
        uint8_t *data = NULL;
        size_t len;
        if (envd_input_parse(json, &sel, &to_pty, &data, &len, &err) < 0) {
            unary_error(p, CONNECT_INVALID_ARGUMENT, err.msg);
            return;
        }
        if ((c = selected(p, &sel)))
            rc = scmd_input(c, to_pty, data, len, &err);
        free(data);
        if (!c)
            return;
    } else if (strcmp(p->method, "SendSignal") == 0) {
        int signo;
        if (envd_signal_parse(json, &sel, &signo, &err) < 0) {
            unary_error(p, CONNECT_INVALID_ARGUMENT, err.msg);
            return;
        }
        if (!(c = selected(p, &sel)))
            return;
        if ((rc = scmd_signal_answered(c, signo, on_init_answer, p, &err)) == 0)
            p->awaiting = true; /* answered by on_init_answer */
    } else if (strcmp(p->method, "CloseStdin") == 0) {
        if (envd_selector_parse(json, &sel, &err) < 0) {
            unary_error(p, CONNECT_INVALID_ARGUMENT, err.msg);
            return;
        }
        if (!(c = selected(p, &sel)))
            return;
        if ((rc = scmd_close_stdin(c, on_init_answer, p, &err)) == 0)
            p->awaiting = true;
    } else if (strcmp(p->method, "Update") == 0) {
        unsigned short rows, cols;
        if (envd_update_parse(json, &sel, &rows, &cols, &err) < 0) {
            unary_error(p, CONNECT_INVALID_ARGUMENT, err.msg);
            return;
        }
        if (!(c = selected(p, &sel)))
            return;
        rc = scmd_resize(c, rows, cols, &err);
    } else {
        unary_error(p, CONNECT_UNIMPLEMENTED, "no such method");
        return;
    }
    if (rc < 0)
        unary_error(p, connect_code_from_errno(err.errnum), err.msg);
    else if (!p->awaiting)
        unary_ok(p, "{}");
}

/* ---------- StreamInput ---------- */

/* The process a StreamInput writes to, found again for each message: it may have ended. */
static struct scmd *input_target(struct pcall *p)
{
    struct sbx *sb = sbx_find(p->d, p->sandbox_id);
    if (!sb || sb->killing)
        return NULL;
    const struct envd_selector *s = &p->input_to;
    return scmd_find(sb, s->by_tag ? 0 : s->pid, s->by_tag ? s->tag : NULL);
}

static void input_resume(uv_timer_t *t)
{
    struct pcall *p = t->data;
    if (p->x && p->body_paused) {
        p->body_paused = false;
        http_exchange_resume_body(p->x);
    }
}

/* The queue is written (or the command is gone): reading the body goes on from the loop. */
static void input_drained(struct scmd *c, void *user)
{
    struct pcall *p = user;
    if (p->timer_open)
        uv_timer_start(&p->timer, input_resume, 0, 0);
}

static int input_fail(struct pcall *p, enum connect_code code, const char *why)
{
    stream_end(p, &code, why);
    return -1;
}

static int input_message(struct pcall *p, const char *json)
{
    err_t err;
    enum envd_stream_input kind;
    struct envd_selector sel;
    bool to_pty;
    uint8_t *data;
    size_t len;
    if (envd_stream_input_parse(json, &kind, &sel, &to_pty, &data, &len, &err) < 0)
        return input_fail(p, CONNECT_INVALID_ARGUMENT, err.msg);
    if (kind == ENVD_STREAM_INPUT_KEEPALIVE)
        return 0;
    if (kind == ENVD_STREAM_INPUT_START && p->input_started)
        return input_fail(p, CONNECT_INVALID_ARGUMENT, "a second start event in the stream");
    if (kind == ENVD_STREAM_INPUT_DATA && !p->input_started) {
        free(data);
        return input_fail(p, CONNECT_INVALID_ARGUMENT, "a data event before the start event");
    }
    if (kind == ENVD_STREAM_INPUT_START) {
        p->input_to = sel;
        p->input_started = true;
    }
    struct scmd *c = input_target(p);
    if (!c) {
        free(data);
        char why[160];
        if (p->input_to.by_tag)
            snprintf(why, sizeof why, "process with tag %s not found", p->input_to.tag);
        else
            snprintf(why, sizeof why, "process with pid %u not found", p->input_to.pid);
        return input_fail(p, CONNECT_NOT_FOUND, why);
    }
    if (kind == ENVD_STREAM_INPUT_START)
        return 0;
    int rc = scmd_input(c, to_pty, data, len, &err);
    free(data);
    if (rc < 0)
        return input_fail(p, connect_code_from_errno(err.errnum), err.msg);
    if (scmd_input_congested(c) && p->x) { /* wait until the command has read some */
        http_exchange_pause_body(p->x);
        p->body_paused = true;
        scmd_input_on_drained(c, input_drained, p);
    }
    return 0;
}

/* Every envelope of the body as it arrives, each one message. */
static int input_data(struct pcall *p, const uint8_t *data, size_t len)
{
    err_t err;
    while (len > 0) {
        size_t used;
        if (connect_reader_take(&p->reader, data, len, &used, &err) < 0)
            return input_fail(p, CONNECT_INVALID_ARGUMENT, err.msg);
        data += used;
        len -= used;
        if (!p->reader.complete)
            continue;
        int rc = input_message(p, p->reader.message);
        connect_reader_next(&p->reader);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The body's end: StreamInputResponse is {}. */
static void input_complete(struct pcall *p)
{
    if (p->responded)
        return;
    if (p->reader.header_have > 0) {
        input_fail(p, CONNECT_INVALID_ARGUMENT, "the stream ends inside an envelope");
        return;
    }
    stream_event(p, strdup("{}"));
    stream_end(p, NULL, NULL);
}

/* ---------- the body ---------- */

static int on_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    struct pcall *p = user;
    err_t err;
    if (p->client_stream)
        return p->responded ? -1 : input_data(p, (const uint8_t *)data, len);
    if (p->stream) {
        if (connect_reader_feed(&p->reader, (const uint8_t *)data, len, &err) < 0) {
            unary_error(p, CONNECT_INVALID_ARGUMENT, err.msg);
            return -1;
        }
        return 0;
    }
    if (p->len + len > CONNECT_MAX_REQUEST) {
        unary_error(p, CONNECT_RESOURCE_EXHAUSTED, "request too large");
        return -1;
    }
    return http_body_append(&p->body, &p->len, data, len);
}

static void on_complete(struct http_exchange *x, void *user)
{
    struct pcall *p = user;
    if (p->client_stream) {
        input_complete(p);
        return;
    }
    p->sb = sbx_find(p->d, p->sandbox_id);
    if (!p->sb || p->sb->killing) {
        unary_error(p, CONNECT_NOT_FOUND, "the sandbox is gone");
        return;
    }
    if (p->stream) {
        if (!p->reader.complete) {
            unary_error(p, CONNECT_INVALID_ARGUMENT, "the request's envelope is incomplete");
            return;
        }
        if (p->sb->state != SANDBOX_RUNNING || p->sb->killing) {
            enum connect_code code = CONNECT_UNAVAILABLE;
            stream_end(p, &code, "the sandbox is not running");
            return;
        }
        if (strcmp(p->method, "Start") == 0)
            do_start(p, p->reader.message);
        else
            do_connect(p, p->reader.message);
        stream_timer_start(p);
        return;
    }
    if (p->sb->state != SANDBOX_RUNNING || p->sb->killing) {
        unary_error(p, CONNECT_UNAVAILABLE, "the sandbox is not running");
        return;
    }
    do_unary(p, p->body ? p->body : "{}");
}

static const struct http_body_callbacks body_callbacks = {on_data, on_complete};

void envd_process_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                        const struct http_request *req, const char *method)
{
    struct pcall *p = calloc(1, sizeof *p);
    if (!p) {
        http_respond_error(x, 500, "out of memory");
        return;
    }
    p->d = d;
    p->x = x;
    snprintf(p->sandbox_id, sizeof p->sandbox_id, "%s", sb->id);
    snprintf(p->method, sizeof p->method, "%s", method);
    p->stream = strcmp(method, "Start") == 0 || strcmp(method, "Connect") == 0;
    p->client_stream = strcmp(method, "StreamInput") == 0;
    connect_reader_init(&p->reader, CONNECT_MAX_REQUEST);
    http_exchange_set_callbacks(x, &pcall_callbacks, p);
    if ((p->stream || p->client_stream) && uv_timer_init(d->loop, &p->timer) == 0) {
        p->timer.data = p;
        p->timer_open = true;
    }
    const char *timeout = http_request_header(req, "Connect-Timeout-Ms");
    int64_t timeout_ms = timeout ? header_number(timeout) : 0;
    if (timeout_ms < 0) {
        unary_error(p, CONNECT_INVALID_ARGUMENT,
                    "Connect-Timeout-Ms must be at most 10 decimal digits");
        return;
    }
    p->timeout_ms = (uint64_t)timeout_ms;
    int64_t keepalive_s = header_number(http_request_header(req, "Keepalive-Ping-Interval"));
    p->keepalive_ms =
        (uint64_t)(keepalive_s > 0 && keepalive_s <= KEEPALIVE_MAX_S ? keepalive_s
                                                                     : KEEPALIVE_DEFAULT_S) *
        1000u;
    err_t err;
    if (auth_envd_user(http_request_header(req, "Authorization"), NULL, &p->as_root, &err) < 0) {
        unary_error(p, CONNECT_UNAUTHENTICATED, err.msg);
        return;
    }
    /* a client stream's body is as long as its input */
    http_exchange_on_body(
        x, p->client_stream ? UINT64_MAX : CONNECT_MAX_REQUEST + CONNECT_ENVELOPE_HEADER,
        &body_callbacks, p);
}
