/* Listeners and connections: accepting (and refusing beyond max_connections), reading into the
 * connection's buffer and feeding the parser, the write queue and its backpressure, timeouts,
 * and the connection's state machine (http_conn_update), which decides when an exchange is over,
 * when the next request may be parsed and when the connection closes. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http/internal.h"

struct http_listener {
    struct http_server *server;
    struct http_listener *next;
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } sock;
    bool is_unix;
    char *path; /* the unix socket's, unlinked at close if it is still ours */
    dev_t dev;
    ino_t ino;
};

/* One write: the bytes are copied behind the request, so the caller's buffer is free at once. */
struct http_write {
    uv_write_t req;
    struct http_conn *conn;
    size_t len;
    char data[];
};

enum { TIMER_NONE, TIMER_IDLE, TIMER_HEADER, TIMER_LINGER };

static const struct http_limits default_limits = {
    .max_url = 8 * 1024,
    .max_header_bytes = 64 * 1024,
    .max_headers = 100,
    .header_timeout_ms = 30 * 1000,
    .idle_timeout_ms = 60 * 1000,
    .max_connections = 4096,
    .max_queued_write = 1 << 20,
};

static void server_handle_closed(struct http_server *s)
{
    if (--s->open_handles == 0 && s->closing)
        free(s);
}

/* ---------- connections: closing ---------- */

static void conn_handle_closed(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    struct http_server *s = c->server;
    free(c->in);
    free(c);
    server_handle_closed(s);
}

/* Closes at once: the exchange (if the handler knows it) is aborted. Pending writes are
 * cancelled by libuv, their callbacks run before the handles' close callbacks. */
static void conn_close(struct http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->x) {
        struct http_exchange *x = c->x;
        c->x = NULL;
        http_exchange_notify(x, false);
        http_exchange_free(x);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        c->server->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->server->n_conns--;
    uv_close(&c->sock.handle, conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    uv_close((uv_handle_t *)&c->defer_timer, conn_handle_closed);
}

static void on_timer(uv_timer_t *t);

static void timer_start(struct http_conn *c, int kind, unsigned ms)
{
    c->timer_kind = kind;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status; /* a failure ends in EOF or the linger timeout like a success */
}

/* The answer is out: shut the write side (the client reads EOF after the last byte) and drop
 * what the client still sends until it closes too or HTTP_LINGER_MS pass. */
static void conn_linger(struct http_conn *c)
{
    if (c->lingering || c->closing)
        return;
    c->lingering = true;
    c->in_off = c->in_len = 0;
    if (c->read_eof || uv_shutdown(&c->shutdown_req, &c->sock.stream, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    timer_start(c, TIMER_LINGER, HTTP_LINGER_MS);
    http_conn_set_reading(c);
}

/* The server answers for itself (the request was bad) and closes after: the exchange, if the
 * handler saw it, is aborted first. A response already begun cannot be followed by another: the
 * connection just closes. status 0: close without an answer. */
static void conn_fail(struct http_conn *c, int status, const char *message)
{
    struct http_exchange *x = c->x;
    bool can_answer = status != 0 && (!x || x->response == HTTP_RESPONSE_NONE);
    if (x) {
        c->x = NULL;
        http_exchange_notify(x, false);
        http_exchange_free(x);
    }
    c->fail_status = 0;
    if (!can_answer || http_conn_write_error(c, status, message) < 0) {
        conn_close(c);
        return;
    }
    c->final_answer = true;
    uv_timer_stop(&c->timer);
    http_conn_set_reading(c);
}

/* ---------- connections: reading ---------- */

static bool can_parse(const struct http_conn *c)
{
    const struct http_exchange *x = c->x;
    if (c->closing || c->lingering || c->final_answer || c->fail_status || c->write_failed)
        return false;
    if (!x)
        return true;
    if (x->request_done || x->body_paused || x->body_stopped)
        return false;
    /* The handler decides what becomes of the body: take it, or answer without it. */
    if (x->visible && !x->body_taken && x->response == HTTP_RESPONSE_NONE)
        return false;
    return true;
}

/* Feeds the buffered input to the parser while it may go on. An error of the parser (or a limit
 * a callback found) is left in c->fail_status for the caller. */
static void conn_parse(struct http_conn *c)
{
    while (c->in_off < c->in_len && can_parse(c)) {
        http_parser_pause(&c->parser, 0);
        c->in_parser = true;
        size_t n = http_parser_execute(&c->parser, &http_parser_callbacks, c->in + c->in_off,
                                       c->in_len - c->in_off);
        c->in_parser = false;
        c->in_off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_OK || e == HPE_PAUSED)
            continue;
        if (!c->fail_status) {
            c->fail_status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
            c->fail_message = e == HPE_HEADER_OVERFLOW ? "request header block too large"
                                                       : http_errno_description(e);
        }
        break;
    }
    if (c->in_off == c->in_len)
        c->in_off = c->in_len = 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct http_conn *c = h->data;
    if (!c->in && !(c->in = malloc(HTTP_READ_BUFFER))) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    if (c->in_off > 0) {
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    *buf = uv_buf_init(c->in + c->in_len, (unsigned)(HTTP_READ_BUFFER - c->in_len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct http_conn *c = stream->data;
    if (c->closing)
        return;
    if (nread == UV_ENOBUFS) {
        /* The buffer is full of pipelined input: wait until it is parsed. */
        c->reading = false;
        uv_read_stop(&c->sock.stream);
        return;
    }
    if (nread < 0) {
        c->read_eof = true;
        c->reading = false;
        uv_read_stop(&c->sock.stream);
        if (c->lingering)
            conn_close(c);
        else
            http_conn_update(c);
        return;
    }
    if (nread == 0)
        return;
    if (c->lingering || c->final_answer) {
        c->in_off = c->in_len = 0; /* dropped: nothing more is parsed here */
        return;
    }
    c->in_len += (size_t)nread;
    http_conn_update(c);
}

void http_conn_set_reading(struct http_conn *c)
{
    if (c->closing)
        return;
    bool want = !c->read_eof &&
                (c->lingering || c->final_answer ||
                 (c->in_len - c->in_off < HTTP_READ_BUFFER && !(c->x && c->x->body_paused)));
    if (want && !c->reading) {
        if (uv_read_start(&c->sock.stream, on_alloc, on_read) == 0)
            c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop(&c->sock.stream);
        c->reading = false;
    }
}

/* ---------- connections: the state machine ---------- */

void http_conn_update(struct http_conn *c)
{
    if (c->closing || c->lingering || c->in_parser)
        return;
    if (c->write_failed) {
        conn_close(c); /* the client is gone: the exchange is aborted */
        return;
    }
    if (c->read_eof)
        c->close_after = true;
    for (;;) {
        if (c->fail_status) {
            conn_fail(c, c->fail_status, c->fail_message);
            return;
        }
        struct http_exchange *x = c->x;
        if (!x) {
            if (c->final_answer) {
                if (c->queued == 0)
                    conn_linger(c);
                return;
            }
            if (c->read_eof) {
                conn_close(c);
                return;
            }
        } else if (x->visible && x->response == HTTP_RESPONSE_ENDED && c->queued == 0) {
            http_exchange_notify(x, true);
            /* Until the request's end is read (and its body dropped), the next one cannot be. */
            if (x->request_done || c->close_after) {
                bool keep = x->keep_alive && !c->close_after;
                c->x = NULL;
                http_exchange_free(x);
                if (!keep) {
                    conn_linger(c);
                    return;
                }
                timer_start(c, TIMER_IDLE, c->server->limits.idle_timeout_ms);
            }
        } else if (c->read_eof) {
            /* The client went away before its answer was whole. */
            conn_close(c);
            return;
        }
        conn_parse(c);
        if (c->closing)
            return;
        x = c->x;
        /* A request whose response went out before the end of its body may have ended now. */
        if (c->fail_status || (x && x->visible && x->response == HTTP_RESPONSE_ENDED &&
                               c->queued == 0 && x->request_done))
            continue;
        break;
    }
    http_conn_set_reading(c);
}

static void on_defer(uv_timer_t *t)
{
    http_conn_update(t->data);
}

void http_conn_defer_update(struct http_conn *c)
{
    if (!c->closing)
        uv_timer_start(&c->defer_timer, on_defer, 0, 0);
}

static void on_timer(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    int kind = c->timer_kind;
    c->timer_kind = TIMER_NONE;
    if (kind == TIMER_HEADER && c->x && !c->x->visible) {
        conn_fail(c, 408, "request headers not received in time");
        return;
    }
    if (kind != TIMER_NONE)
        conn_close(c);
}

void http_conn_timer_header(struct http_conn *c)
{
    timer_start(c, TIMER_HEADER, c->server->limits.header_timeout_ms);
}

void http_conn_timer_stop(struct http_conn *c)
{
    c->timer_kind = TIMER_NONE;
    uv_timer_stop(&c->timer);
}

/* ---------- connections: writing ---------- */

static void on_write(uv_write_t *req, int status)
{
    struct http_write *w = (struct http_write *)req;
    struct http_conn *c = w->conn;
    c->queued -= w->len;
    free(w);
    if (c->closing)
        return;
    if (status < 0) {
        c->write_failed = true;
    } else if (c->x && c->x->want_drain && c->queued < c->server->limits.max_queued_write) {
        struct http_exchange *x = c->x;
        x->want_drain = false;
        if (!x->notified && x->cb.on_drain)
            x->cb.on_drain(x, x->user);
    }
    http_conn_update(c);
}

int http_conn_writev(struct http_conn *c, const uv_buf_t *bufs, unsigned n)
{
    if (c->closing || c->write_failed || c->lingering)
        return -1;
    size_t len = 0;
    for (unsigned i = 0; i < n; i++)
        len += bufs[i].len;
    struct http_write *w = malloc(sizeof *w + len);
    if (!w)
        return -1;
    w->conn = c;
    w->len = len;
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(w->data + off, bufs[i].base, bufs[i].len);
        off += bufs[i].len;
    }
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, &c->sock.stream, &b, 1, on_write) < 0) {
        free(w);
        c->write_failed = true;
        http_conn_defer_update(c);
        return -1;
    }
    c->queued += len;
    return 0;
}

/* ---------- listeners ---------- */

static void on_connection(uv_stream_t *listener_stream, int status)
{
    struct http_listener *l = listener_stream->data;
    struct http_server *s = l->server;
    if (status < 0 || s->closing)
        return;
    struct http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->server = s;
    c->from_unix_socket = l->is_unix;
    if (l->is_unix)
        uv_pipe_init(s->loop, &c->sock.pipe, 0);
    else
        uv_tcp_init(s->loop, &c->sock.tcp);
    c->sock.handle.data = c;
    s->open_handles++;
    if (uv_accept(listener_stream, &c->sock.stream) < 0 || s->n_conns >= s->limits.max_connections) {
        /* Refused: closed at once (the client reads EOF), c freed with its one handle. */
        c->handles_open = 1;
        c->closing = true;
        uv_close(&c->sock.handle, conn_handle_closed);
        return;
    }
    if (!l->is_unix)
        uv_tcp_nodelay(&c->sock.tcp, 1); /* responses are written whole: no Nagle delay */
    uv_timer_init(s->loop, &c->timer);
    uv_timer_init(s->loop, &c->defer_timer);
    c->timer.data = c;
    c->defer_timer.data = c;
    c->handles_open = 3;
    timer_start(c, TIMER_IDLE, s->limits.idle_timeout_ms);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    http_conn_set_reading(c);
}

struct http_server *http_server_new(uv_loop_t *loop, const struct http_limits *limits,
                                    const struct http_handler *handler, err_t *err)
{
    if (!handler || !handler->on_request) {
        err_set(err, EINVAL, "http server: no request handler");
        return NULL;
    }
    struct http_server *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, ENOMEM, "http server");
        return NULL;
    }
    s->loop = loop;
    s->handler = *handler;
    s->limits = default_limits;
    if (limits) {
        /* A zero field keeps its default. */
#define TAKE(f)                                                                                    \
    if (limits->f)                                                                                 \
    s->limits.f = limits->f
        TAKE(max_url);
        TAKE(max_header_bytes);
        TAKE(max_headers);
        TAKE(header_timeout_ms);
        TAKE(idle_timeout_ms);
        TAKE(max_connections);
        TAKE(max_queued_write);
#undef TAKE
    }
    return s;
}

static struct http_listener *listener_new(struct http_server *s, bool is_unix)
{
    struct http_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->server = s;
    l->is_unix = is_unix;
    if (is_unix)
        uv_pipe_init(s->loop, &l->sock.pipe, 0);
    else
        uv_tcp_init(s->loop, &l->sock.tcp);
    l->sock.handle.data = l;
    s->open_handles++;
    return l;
}

static void listener_closed(uv_handle_t *h)
{
    struct http_listener *l = h->data;
    struct http_server *s = l->server;
    free(l->path);
    free(l);
    server_handle_closed(s);
}

static void listener_close(struct http_listener *l)
{
    struct stat st;
    if (l->path && lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
        unlink(l->path);
    uv_close(&l->sock.handle, listener_closed);
}

static int listener_fail(struct http_listener *l, err_t *err, int uv_err, const char *what,
                         const char *where)
{
    err_set(err, -uv_err, "http: %s %s", what, where);
    listener_close(l);
    return -1;
}

static void listener_add(struct http_server *s, struct http_listener *l)
{
    l->next = s->listeners;
    s->listeners = l;
}

int http_server_listen_tcp(struct http_server *s, const char *host, uint16_t port,
                           uint16_t *bound_port, err_t *err)
{
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr) != 0)
        return err_set(err, EINVAL, "http: listen on %s: not an IPv4 or IPv6 address", host);
    struct http_listener *l = listener_new(s, false);
    if (!l)
        return err_set(err, ENOMEM, "http: listen on %s", host);
    char where[80];
    snprintf(where, sizeof where, "%s port %u", host, port);
    int rc = uv_tcp_bind(&l->sock.tcp, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen(&l->sock.stream, 511, on_connection);
    if (rc < 0)
        return listener_fail(l, err, rc, "listen on", where);
    if (bound_port) {
        struct sockaddr_storage got;
        int len = sizeof got;
        if ((rc = uv_tcp_getsockname(&l->sock.tcp, (struct sockaddr *)&got, &len)) < 0)
            return listener_fail(l, err, rc, "getsockname of", where);
        *bound_port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                     : ((struct sockaddr_in6 *)&got)->sin6_port);
    }
    listener_add(s, l);
    return 0;
}

int http_server_listen_unix(struct http_server *s, const char *path, unsigned mode, err_t *err)
{
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return err_set(err, ENAMETOOLONG, "http: listen on %s", path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return err_set(err, EEXIST, "http: listen on %s: not a socket", path);
        if (unlink(path) < 0)
            return err_set(err, errno, "http: listen on %s: removing the old socket", path);
    }
    struct http_listener *l = listener_new(s, true);
    if (!l || !(l->path = strdup(path))) {
        if (l)
            listener_close(l);
        return err_set(err, ENOMEM, "http: listen on %s", path);
    }
    int rc = uv_pipe_bind(&l->sock.pipe, path);
    if (rc < 0)
        return listener_fail(l, err, rc, "bind", path);
    /* The mode before listen: no client can connect to the socket while it is still wider. */
    if (chmod(path, mode) < 0 || lstat(path, &st) < 0) {
        err_set(err, errno, "http: chmod %s", path);
        listener_close(l);
        return -1;
    }
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    if ((rc = uv_listen(&l->sock.stream, 511, on_connection)) < 0)
        return listener_fail(l, err, rc, "listen on", path);
    listener_add(s, l);
    return 0;
}

void http_server_close(struct http_server *s)
{
    if (!s || s->closing)
        return;
    s->closing = true;
    while (s->listeners) {
        struct http_listener *l = s->listeners;
        s->listeners = l->next;
        listener_close(l);
    }
    while (s->conns)
        conn_close(s->conns);
    if (s->open_handles == 0)
        free(s);
}

size_t http_server_connection_count(const struct http_server *s)
{
    return s->n_conns;
}
