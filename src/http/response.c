/* The response side of an exchange: the status line and headers (Content-Length or chunked,
 * Connection), whole and streamed bodies, chunk framing, and the error body in E2B's shape
 * {"code": N, "message": "..."}, built with jansson so the message is escaped properly. */
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/internal.h"
#include "util/utf8.h"

/* A growing text for a response head. */
struct text {
    char *p;
    size_t len, cap;
    bool failed;
};

__attribute__((format(printf, 2, 3))) static void text_printf(struct text *t, const char *fmt, ...)
{
    for (;;) {
        if (t->failed)
            return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->p && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 256;
        while (cap - t->len <= (size_t)n)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->failed = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

static bool header_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return false;
    return true;
}

/* A field value as RFC 9110 (5.5) has it: visible characters, spaces, tabs and obs-text; no
 * other control character (CR or LF would add headers or end the head, the rest make a
 * response that clients refuse). */
static bool header_value_ok(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return false;
    return true;
}

/* The handler's headers: names that are tokens, values of field characters only (a value from
 * a sandbox must not add headers or end the head), and none of the names the server writes
 * itself. */
static bool headers_ok(const struct http_header *h, size_t n)
{
    static const char *const reserved[] = {"Content-Length", "Transfer-Encoding", "Connection"};
    for (size_t i = 0; i < n; i++) {
        if (!h[i].name || !h[i].value || !header_name_ok(h[i].name) || !header_value_ok(h[i].value))
            return false;
        for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++)
            if (strcasecmp(h[i].name, reserved[r]) == 0)
                return false;
    }
    return true;
}

static bool status_has_body(int status)
{
    return status != 204 && status != 304;
}

/* Writes the head; content_length < 0: the body's length is not known (chunked, or for
 * HTTP/1.0 up to the connection's close). */
static int response_start(struct http_exchange *x, int status, const struct http_header *headers,
                          size_t n, int64_t content_length, const void *body, size_t body_len)
{
    struct http_conn *c = x->conn;
    if (x->notified || x->response != HTTP_RESPONSE_NONE || c->closing || status < 200 ||
        status > 999 || !headers_ok(headers, n))
        return -1;
    x->response_no_body = x->is_head || !status_has_body(status);
    bool keep = x->keep_alive && !c->close_after;
    /* The client waits for "100 Continue" before its body: it may never send it now. */
    if (x->expect_continue && !x->request_done)
        keep = false;
    const char *reason = http_status_str((enum http_status)status);
    struct text t = {0};
    text_printf(&t, "HTTP/1.1 %d %s\r\n", status, strcmp(reason, "<unknown>") ? reason : "Status");
    for (size_t i = 0; i < n; i++)
        text_printf(&t, "%s: %s\r\n", headers[i].name, headers[i].value);
    x->chunked_response = false;
    x->length_known = false;
    if (status_has_body(status)) {
        if (content_length >= 0) {
            text_printf(&t, "Content-Length: %lld\r\n", (long long)content_length);
            x->length_known = true;
            x->length_left = (uint64_t)content_length;
        } else if (x->http_minor >= 1) {
            text_printf(&t, "Transfer-Encoding: chunked\r\n");
            x->chunked_response = true;
        } else {
            keep = false; /* HTTP/1.0 knows no chunks: the body ends with the connection */
        }
    }
    if (!keep)
        text_printf(&t, "Connection: close\r\n");
    else if (x->http_minor == 0)
        text_printf(&t, "Connection: keep-alive\r\n");
    text_printf(&t, "\r\n");
    if (t.failed) {
        free(t.p);
        return -1;
    }
    if (!keep)
        c->close_after = true;
    x->response = HTTP_RESPONSE_STARTED;
    uv_buf_t bufs[2] = {uv_buf_init(t.p, (unsigned)t.len),
                        uv_buf_init((char *)body, (unsigned)body_len)};
    bool with_body = body_len > 0 && !x->response_no_body;
    int rc = http_conn_writev(c, bufs, with_body ? 2 : 1);
    free(t.p);
    return rc;
}

int http_respond(struct http_exchange *x, int status, const struct http_header *headers, size_t n,
                 const void *body, size_t len)
{
    if (response_start(x, status, headers, n, (int64_t)len, body, len) < 0 &&
        x->response == HTTP_RESPONSE_NONE)
        return -1;
    x->response = HTTP_RESPONSE_ENDED;
    return 0;
}

/* {"code": status, "message": message}; an invalid UTF-8 message gets its bad bytes replaced. */
static char *error_body(int status, const char *message, size_t *len)
{
    json_t *j = json_pack("{s:i,s:s}", "code", status, "message", message);
    if (!j) {
        size_t clean_len;
        char *clean = utf8_sanitize(message, strlen(message), &clean_len);
        if (clean)
            j = json_pack("{s:i,s:s%}", "code", status, "message", clean, clean_len);
        free(clean);
    }
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s)
        *len = strlen(s);
    return s;
}

static const struct http_header json_content_type[] = {{"Content-Type", "application/json"}};

int http_respond_error(struct http_exchange *x, int status, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    size_t len;
    char *body = error_body(status, message, &len);
    if (!body)
        return -1;
    int rc = http_respond(x, status, json_content_type, 1, body, len);
    free(body);
    return rc;
}

int http_conn_write_error(struct http_conn *c, int status, const char *message)
{
    size_t len;
    char *body = error_body(status, message, &len);
    if (!body)
        return -1;
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, http_status_str((enum http_status)status), len);
    uv_buf_t bufs[2] = {uv_buf_init(head, (unsigned)n), uv_buf_init(body, (unsigned)len)};
    int rc = http_conn_writev(c, bufs, 2);
    free(body);
    return rc;
}

int http_respond_start(struct http_exchange *x, int status, const struct http_header *headers,
                       size_t n, int64_t content_length)
{
    return response_start(x, status, headers, n, content_length, NULL, 0) < 0 &&
                   x->response == HTTP_RESPONSE_NONE
               ? -1
               : 0;
}

static int queue_state(struct http_exchange *x)
{
    struct http_conn *c = x->conn;
    if (c->queued < c->server->limits.max_queued_write)
        return 0;
    x->want_drain = true;
    return 1;
}

int http_respond_write(struct http_exchange *x, const void *data, size_t len)
{
    struct http_conn *c = x->conn;
    if (x->notified || x->response != HTTP_RESPONSE_STARTED || c->closing || c->write_failed)
        return -1;
    if (x->length_known) {
        if (len > x->length_left)
            return -1; /* past its Content-Length: the client would take it for the next */
        x->length_left -= len;
    }
    if (len == 0 || x->response_no_body)
        return queue_state(x); /* an empty chunk would end the body */
    char size[24];
    uv_buf_t bufs[3];
    unsigned nb = 0;
    if (x->chunked_response)
        bufs[nb++] = uv_buf_init(size, (unsigned)snprintf(size, sizeof size, "%zx\r\n", len));
    bufs[nb++] = uv_buf_init((char *)data, (unsigned)len);
    if (x->chunked_response)
        bufs[nb++] = uv_buf_init("\r\n", 2);
    if (http_conn_writev(c, bufs, nb) < 0)
        return -1;
    return queue_state(x);
}

int http_respond_end(struct http_exchange *x)
{
    struct http_conn *c = x->conn;
    if (x->notified || x->response != HTTP_RESPONSE_STARTED)
        return -1;
    x->response = HTTP_RESPONSE_ENDED;
    int rc = 0;
    if (x->length_known && x->length_left > 0) {
        /* Shorter than announced: the client can only tell by the connection's end. */
        c->close_after = true;
        rc = -1;
    } else if (x->chunked_response && !x->response_no_body) {
        uv_buf_t last = uv_buf_init("0\r\n\r\n", 5);
        rc = http_conn_writev(c, &last, 1);
    }
    http_conn_defer_update(c); /* nothing may be left to write, so no write callback comes */
    return rc;
}
