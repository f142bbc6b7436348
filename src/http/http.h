/* The daemon's HTTP/1.1 server: libuv for the event loop and sockets, http-parser for the wire
 * format. It knows nothing of E2B, JSON, sandboxes or routes: it turns bytes on a connection into
 * exchanges (one request, one response) and hands them to the daemon's handler, streaming in
 * both directions. Single-threaded: every call here runs on the loop's thread, every callback
 * is called from it.
 *
 * An exchange's life: the handler's on_request is called once the request's headers are in (the
 * body has not been read yet). The handler answers at once (http_respond_*) or later (after an
 * asynchronous step), and may take the body as it arrives (http_exchange_on_body). A response is
 * either whole (http_respond with a body and its length) or streamed (http_respond_start, then
 * http_respond_write any number of times, then http_respond_end; chunked encoding unless a
 * Content-Length was given). The exchange ends when its response is sent, or when the client
 * goes (on_abort); the handler must not touch it after its on_done/on_abort callback returned.
 * Keep-alive: the next request on the connection is parsed only after the current response is
 * complete (no pipelining out of order).
 *
 * Bad input is answered here, before any handler sees it, with a 4xx whose body is E2B's error
 * shape {"code": N, "message": "..."}: malformed HTTP (400), a URL or header block over the
 * limits (414, 431), a body larger than the handler allowed (413), a client too slow to send its
 * headers (408). The server never exits, aborts or leaks an fd on bad input. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/err.h"

struct http_server;
struct http_exchange;

struct http_limits {
    size_t max_url;             /* bytes of the request target; default 8 KiB */
    size_t max_header_bytes;    /* all header names and values together; default 64 KiB */
    size_t max_headers;         /* default 100 */
    unsigned header_timeout_ms; /* from a request's first byte to its last header; default 30 s */
    unsigned idle_timeout_ms;   /* a kept-alive connection with no request; default 60 s */
    unsigned max_connections;   /* beyond it, new connections are closed at once; default 4096 */
    size_t max_queued_write;    /* bytes of response queued on one connection before
                                 * http_respond_write reports backpressure; default 1 MiB */
};                              /* a field left 0 takes its default */

struct http_header {
    const char *name; /* as sent; compare with strcasecmp */
    const char *value;
};

/* What the handler sees of a request. Valid until the exchange ends. */
struct http_request {
    const char *method; /* "GET", "POST", ... */
    const char *target; /* the request target as sent, "/path?query" */
    const char *path;   /* the path part of target, percent-decoding NOT applied */
    const char *query;  /* the part after '?', "" when none */
    const struct http_header *headers;
    size_t n_headers;
    bool has_content_length;
    uint64_t content_length; /* when has_content_length */
    bool chunked;            /* Transfer-Encoding: chunked */
    bool from_unix_socket;   /* came in on the unix socket listener */
};

struct http_handler {
    /* A request's headers are in. Called once per exchange. */
    void (*on_request)(struct http_exchange *x, const struct http_request *req, void *ctx);
    void *ctx;
};

/* Callbacks an exchange's owner sets (http_exchange_on_body, http_exchange_on_end). Each may be
 * NULL. */
struct http_body_callbacks {
    /* A piece of the request body (after de-chunking). Return 0 to go on, -1 to stop reading it
     * (the handler then answers, e.g. 413 or 400, and the connection is closed after it). */
    int (*on_data)(struct http_exchange *x, const char *data, size_t len, void *user);
    /* The whole body is in. */
    void (*on_complete)(struct http_exchange *x, void *user);
};

struct http_exchange_callbacks {
    /* The response is sent whole: the exchange is about to be freed. */
    void (*on_done)(struct http_exchange *x, void *user);
    /* The client went away (or the connection failed, or the server is closing) before the
     * response was sent, or the server answers in the handler's place (a body over max_body:
     * 413; a malformed chunked body: 400): the exchange is about to be freed, the handler must
     * drop every pointer to it and stop what it was doing for it. */
    void (*on_abort)(struct http_exchange *x, void *user);
    /* The queued response went below max_queued_write after a write reported backpressure. */
    void (*on_drain)(struct http_exchange *x, void *user);
};

/* ---------- the server ---------- */

/* A server on loop, no listener yet; limits NULL for the defaults. NULL with err on failure. */
struct http_server *http_server_new(uv_loop_t *loop, const struct http_limits *limits,
                                    const struct http_handler *handler, err_t *err);
/* Listens on TCP host:port (host a literal IPv4 or IPv6 address). Port 0 picks one; the port
 * actually bound is stored in *bound_port when not NULL. */
int http_server_listen_tcp(struct http_server *s, const char *host, uint16_t port,
                           uint16_t *bound_port, err_t *err);
/* Listens on a unix socket at path (an old socket file there is replaced), mode applied to it. */
int http_server_listen_unix(struct http_server *s, const char *path, unsigned mode, err_t *err);
/* Stops listening, aborts every exchange (on_abort), closes every connection; frees s once the
 * handles are closed (the loop must run for that). Not from inside one of s's callbacks. */
void http_server_close(struct http_server *s);
/* Connections open now (for tests: fd leak checks, floods). */
size_t http_server_connection_count(const struct http_server *s);

/* ---------- an exchange ---------- */

void http_exchange_set_callbacks(struct http_exchange *x, const struct http_exchange_callbacks *cb,
                                 void *user);
/* Takes the request body as it arrives, at most max_body bytes (more: 413, sent by the server,
 * on_abort, and the connection closed after it; a Content-Length over it is refused before a
 * byte is read). Until the handler calls this or responds, the body is not read, so it may call
 * this later, after an asynchronous step. "Expect: 100-continue" is answered here. A handler
 * that responds without calling it gets the body discarded (up to 1 MiB; more closes the
 * connection after the response). */
void http_exchange_on_body(struct http_exchange *x, uint64_t max_body,
                           const struct http_body_callbacks *cb, void *user);
/* Appends a piece of a body to a NUL-terminated buffer (*body, *len bytes; *body NULL at first),
 * for a handler that takes a small body whole. -1 when out of memory (the buffer is kept). */
int http_body_append(char **body, size_t *len, const char *data, size_t n);
/* Stops and restarts reading the request body (backpressure while the handler writes it out,
 * e.g. into a sandbox's file). */
void http_exchange_pause_body(struct http_exchange *x);
void http_exchange_resume_body(struct http_exchange *x);
/* A header of the request by name (case-insensitive), NULL when absent. */
const char *http_request_header(const struct http_request *req, const char *name);

/* A whole response: status (200..999), extra headers (n of them; Content-Length,
 * Transfer-Encoding and Connection are the server's), body of len bytes (copied). 0, or -1 when
 * the exchange already has a response or a header is refused (a reserved name, a name that is
 * not a token, a control character but HTAB in a value). No body goes out for HEAD, 204 and
 * 304. */
int http_respond(struct http_exchange *x, int status, const struct http_header *headers, size_t n,
                 const void *body, size_t len);
/* An error response in E2B's shape: {"code": status, "message": message}. */
int http_respond_error(struct http_exchange *x, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A streamed response: headers now, the body in pieces. content_length < 0: chunked. */
int http_respond_start(struct http_exchange *x, int status, const struct http_header *headers,
                       size_t n, int64_t content_length);
/* Queues len bytes (copied). Returns 0 when the queue is below max_queued_write, 1 when it is
 * above (the caller should wait for on_drain before writing more), -1 when the exchange is
 * gone or has no streamed response started. */
int http_respond_write(struct http_exchange *x, const void *data, size_t len);
/* Ends a streamed response (the last chunk). -1 also when fewer bytes than its Content-Length
 * were written: the connection is then closed after them. */
int http_respond_end(struct http_exchange *x);
