/* The request side of an exchange: http-parser's callbacks, which gather the request line and
 * headers within the limits and hand the request to the handler, and the body, given to the
 * handler's callbacks or dropped. A callback never frees anything: it records a failure in
 * c->fail_status and stops the parser, and server.c acts once http_parser_execute returned. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/internal.h"

static struct http_conn *conn_of(http_parser *p)
{
    return p->data;
}

/* Stops the parser with an answer for server.c to send. Returns what stops a data callback. */
static int fail(struct http_conn *c, int status, const char *message)
{
    if (!c->fail_status) {
        c->fail_status = status;
        c->fail_message = message;
    }
    return -1;
}

static int arena_append(struct http_exchange *x, const char *data, size_t len)
{
    if (x->arena_cap - x->arena_len < len) {
        size_t cap = x->arena_cap ? x->arena_cap : 512;
        while (cap - x->arena_len < len)
            cap *= 2;
        char *p = realloc(x->arena, cap);
        if (!p)
            return -1;
        x->arena = p;
        x->arena_cap = cap;
    }
    memcpy(x->arena + x->arena_len, data, len);
    x->arena_len += len;
    return 0;
}

/* Appends a copy of arena[off..off+len): the arena may move as it grows, so the piece is
 * copied out first (a path or query, within max_url). */
static int arena_append_own(struct http_exchange *x, size_t off, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    memcpy(copy, x->arena + off, len);
    int rc = arena_append(x, copy, len);
    free(copy);
    return rc;
}

static int arena_end_piece(struct http_exchange *x)
{
    return arena_append(x, "", 1);
}

void http_exchange_free(struct http_exchange *x)
{
    if (!x)
        return;
    free(x->arena);
    free(x->header_offsets);
    free(x->headers);
    free(x);
}

void http_exchange_notify(struct http_exchange *x, bool done)
{
    if (!x->visible || x->notified)
        return;
    x->notified = true;
    if (done && x->cb.on_done)
        x->cb.on_done(x, x->user);
    else if (!done && x->cb.on_abort)
        x->cb.on_abort(x, x->user);
}

static int on_message_begin(http_parser *p)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = calloc(1, sizeof *x);
    if (!x)
        return fail(c, 503, "out of memory");
    x->conn = c;
    c->x = x;
    http_conn_timer_header(c);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = c->x;
    if (x->url_len + len > c->server->limits.max_url)
        return fail(c, 414, "request target too long");
    x->last_piece = HTTP_PIECE_URL;
    x->url_len += len;
    return arena_append(x, at, len) < 0 ? fail(c, 503, "out of memory") : 0;
}

static int count_header_bytes(struct http_conn *c, size_t len)
{
    struct http_exchange *x = c->x;
    x->header_bytes += len;
    return x->header_bytes > c->server->limits.max_header_bytes
               ? fail(c, 431, "request header block too large")
               : 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = c->x;
    if (x->last_piece != HTTP_PIECE_FIELD) {
        /* A new header (a name may come in pieces, split across reads). */
        if (x->n_header_offsets == c->server->limits.max_headers)
            return fail(c, 431, "too many request headers");
        if (arena_end_piece(x) < 0)
            return fail(c, 503, "out of memory");
        if ((x->n_header_offsets & (x->n_header_offsets - 1)) == 0) {
            size_t cap = x->n_header_offsets ? 2 * x->n_header_offsets : 8;
            struct http_header_offsets *o = realloc(x->header_offsets, cap * sizeof *o);
            if (!o)
                return fail(c, 503, "out of memory");
            x->header_offsets = o;
        }
        x->header_offsets[x->n_header_offsets++] =
            (struct http_header_offsets){.name = x->arena_len, .value = SIZE_MAX};
        x->last_piece = HTTP_PIECE_FIELD;
    }
    if (count_header_bytes(c, len) < 0)
        return -1;
    return arena_append(x, at, len) < 0 ? fail(c, 503, "out of memory") : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = c->x;
    if (x->last_piece != HTTP_PIECE_VALUE) {
        if (arena_end_piece(x) < 0)
            return fail(c, 503, "out of memory");
        x->header_offsets[x->n_header_offsets - 1].value = x->arena_len;
        x->last_piece = HTTP_PIECE_VALUE;
    }
    if (count_header_bytes(c, len) < 0)
        return -1;
    return arena_append(x, at, len) < 0 ? fail(c, 503, "out of memory") : 0;
}

static bool request_has_body(const struct http_request *req)
{
    return req->chunked || (req->has_content_length && req->content_length > 0);
}

/* The arena is whole: the path and query are added to it, then every pointer is made. */
static int request_build(http_parser *p, struct http_exchange *x)
{
    size_t url_len = x->url_len;
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (url_len == 0 || http_parser_parse_url(x->arena, url_len, p->method == HTTP_CONNECT, &u))
        return fail(x->conn, 400, "invalid request target");
    size_t path_off = x->arena_len;
    if (u.field_set & (1 << UF_PATH)) {
        if (arena_append_own(x, u.field_data[UF_PATH].off, u.field_data[UF_PATH].len) < 0)
            return fail(x->conn, 503, "out of memory");
    } else if (p->method != HTTP_CONNECT && arena_append(x, "/", 1) < 0) {
        return fail(x->conn, 503, "out of memory");
    }
    if (arena_end_piece(x) < 0)
        return fail(x->conn, 503, "out of memory");
    size_t query_off = x->arena_len;
    if ((u.field_set & (1 << UF_QUERY)) &&
        arena_append_own(x, u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len) < 0)
        return fail(x->conn, 503, "out of memory");
    if (arena_end_piece(x) < 0)
        return fail(x->conn, 503, "out of memory");

    if (x->n_header_offsets && !(x->headers = calloc(x->n_header_offsets, sizeof *x->headers)))
        return fail(x->conn, 503, "out of memory");
    for (size_t i = 0; i < x->n_header_offsets; i++) {
        x->headers[i].name = x->arena + x->header_offsets[i].name;
        x->headers[i].value =
            x->header_offsets[i].value == SIZE_MAX ? "" : x->arena + x->header_offsets[i].value;
    }
    struct http_request *req = &x->req;
    req->method = http_method_str(p->method);
    req->target = x->arena;
    req->path = x->arena + path_off;
    req->query = x->arena + query_off;
    req->headers = x->headers;
    req->n_headers = x->n_header_offsets;
    req->has_content_length = (p->flags & F_CONTENTLENGTH) != 0;
    req->content_length = req->has_content_length ? p->content_length : 0;
    req->chunked = (p->flags & F_CHUNKED) != 0;
    req->from_unix_socket = x->conn->from_unix_socket;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = c->x;
    if (arena_end_piece(x) < 0)
        return fail(c, 503, "out of memory");
    if (request_build(p, x) < 0)
        return -1;
    x->is_head = p->method == HTTP_HEAD;
    x->http_minor = p->http_major == 1 ? p->http_minor : 0;
    /* After an upgrade (or CONNECT) the rest is not HTTP: answered, then closed. */
    x->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    const char *expect = http_request_header(&x->req, "Expect");
    x->expect_continue = expect && x->http_minor >= 1 && strcasecmp(expect, "100-continue") == 0 &&
                         request_has_body(&x->req);
    http_conn_timer_stop(c);
    x->visible = true;
    c->server->handler.on_request(x, &x->req, c->server->handler.ctx);
    if (c->fail_status)
        return -1;
    /* The body waits until the handler takes it or answers without it. */
    if (request_has_body(&x->req) && !x->body_taken && x->response == HTTP_RESPONSE_NONE)
        http_parser_pause(p, 1);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = c->x;
    x->body_bytes += len;
    if (x->body_taken && !x->notified && !x->body_stopped) {
        if (x->body_bytes > x->max_body)
            return fail(c, 413, "request body too large");
        if (x->body_cb.on_data && x->body_cb.on_data(x, at, len, x->body_user) < 0) {
            x->body_stopped = true;
            c->close_after = true;
        }
    } else if (x->body_bytes > HTTP_DISCARD_MAX) {
        /* Not worth reading to its end to keep the connection: closed after the answer. */
        x->body_stopped = true;
        c->close_after = true;
    }
    if (x->body_stopped || x->body_paused || c->fail_status)
        http_parser_pause(p, 1);
    return c->fail_status ? -1 : 0;
}

static int on_message_complete(http_parser *p)
{
    struct http_conn *c = conn_of(p);
    struct http_exchange *x = c->x;
    x->request_done = true;
    if (x->body_taken && !x->notified && !x->body_stopped && x->body_cb.on_complete)
        x->body_cb.on_complete(x, x->body_user);
    /* The next request on the connection waits for this one's answer. */
    http_parser_pause(p, 1);
    return c->fail_status ? -1 : 0;
}

const http_parser_settings http_parser_callbacks = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---------- the handler's calls ---------- */

const char *http_request_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers; i++)
        if (strcasecmp(req->headers[i].name, name) == 0)
            return req->headers[i].value;
    return NULL;
}

void http_exchange_set_callbacks(struct http_exchange *x, const struct http_exchange_callbacks *cb,
                                 void *user)
{
    x->cb = *cb;
    x->user = user;
}

void http_exchange_on_body(struct http_exchange *x, uint64_t max_body,
                           const struct http_body_callbacks *cb, void *user)
{
    struct http_conn *c = x->conn;
    if (x->notified || x->body_taken || x->response != HTTP_RESPONSE_NONE)
        return;
    x->body_taken = true;
    x->max_body = max_body;
    if (cb)
        x->body_cb = *cb;
    x->body_user = user;
    if (x->req.has_content_length && x->req.content_length > max_body) {
        /* Refused before a byte of it is read, and without "100 Continue". */
        fail(c, 413, "request body too large");
    } else if (x->expect_continue) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        uv_buf_t b = uv_buf_init((char *)cont, sizeof cont - 1);
        x->expect_continue = false;
        http_conn_writev(c, &b, 1);
    }
    if (!c->in_parser)
        http_conn_defer_update(c); /* the parser waited for this */
}

int http_body_append(char **body, size_t *len, const char *data, size_t n)
{
    char *grown = realloc(*body, *len + n + 1);
    if (!grown)
        return -1;
    memcpy(grown + *len, data, n);
    *len += n;
    grown[*len] = '\0';
    *body = grown;
    return 0;
}

void http_exchange_pause_body(struct http_exchange *x)
{
    struct http_conn *c = x->conn;
    if (x->body_paused)
        return;
    x->body_paused = true;
    if (c->in_parser)
        http_parser_pause(&c->parser, 1);
    http_conn_set_reading(c);
}

void http_exchange_resume_body(struct http_exchange *x)
{
    struct http_conn *c = x->conn;
    if (!x->body_paused)
        return;
    x->body_paused = false;
    http_conn_set_reading(c);
    if (!c->in_parser)
        http_conn_defer_update(c); /* what was read before the pause is parsed */
}
