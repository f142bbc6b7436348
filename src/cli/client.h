/* The CLI's HTTP/1.1 client for the daemon's unix socket (RUN/hutch.sock, src/serve/serve.c).
 * Blocking, one request per connection (each request says Connection: close). Requests are
 * formatted here; responses are parsed by http-parser, the library the daemon's server uses,
 * with their body handed to a callback as it arrives or gathered (bounded). The socket needs
 * no API key: only the daemon's user (root) can connect to it (serve.c says why). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* A gathered response body larger than this is refused (the control plane's answers are small;
 * downloads and streams go to a callback instead). */
#define CLIENT_MAX_BODY (16u << 20)

struct client_header {
    const char *name;
    const char *value;
};

/* The body arrives in pieces: return 0 to go on, -1 to stop (err filled). */
typedef int (*client_body_fn)(const char *data, size_t len, void *user, err_t *err);

struct client;

/* The daemon's socket path: $HUTCH_SOCKET when set, else RUN/hutch.sock. */
const char *client_socket_path(void);

/* Connects to the socket. Without a daemon: ECONNREFUSED or ENOENT, and a message that says to
 * start one ("no daemon at RUN/hutch.sock: start it with `hutch serve`"). */
struct client *client_open(err_t *err);
void client_close(struct client *c);
/* The connection's fd, for poll (a stream read alongside a terminal). */
int client_fd(const struct client *c);

/* Sends a request's head and body (len bytes, Content-Length), or with chunked = true only the
 * head with Transfer-Encoding: chunked, the body to follow by client_send_chunk. */
int client_send(struct client *c, const char *method, const char *target,
                const struct client_header *headers, size_t n, const void *body, size_t len,
                err_t *err);
int client_send_chunked(struct client *c, const char *method, const char *target,
                        const struct client_header *headers, size_t n, err_t *err);
/* One chunk; len 0 ends the body. */
int client_send_chunk(struct client *c, const void *data, size_t len, err_t *err);

/* The response as read so far. */
struct client_response {
    int status;             /* 0 until the head is in */
    bool head_done;         /* status and headers are in */
    bool complete;          /* the whole message is in */
    char next_token[128];   /* X-Next-Token, "" when absent */
    client_body_fn on_body; /* NULL: the body is gathered in body, len */
    void *user;
    char *body; /* NUL-terminated; owned (client_response_free) */
    size_t len, cap;
};
void client_response_free(struct client_response *r);

/* One read from the connection, parsed: 0 when more may come, 1 once r is complete, -1 with err
 * (the connection closed early, a malformed response, or on_body's own error). Blocks in read
 * unless poll said the fd is readable. */
int client_pump(struct client *c, struct client_response *r, err_t *err);
/* Reads until r is complete (client_pump in a loop). */
int client_read_response(struct client *c, struct client_response *r, err_t *err);

/* A whole call on a connection of its own: request, then the response read whole (gathered in
 * r->body unless r->on_body is set; the caller sets those before and frees r after). */
int client_call(const char *method, const char *target, const struct client_header *headers,
                size_t n, const void *body, size_t len, struct client_response *r, err_t *err);

/* A non-2xx response's reason into err: the message of E2B's {"code":N,"message":"..."} (or
 * Connect's {"code":"not_found","message":...}), else the status and the body's start. errnum
 * ENOENT for a 404 and a 502 (a sandbox that is not there), else EIO. Returns -1. */
int client_error_from(const struct client_response *r, err_t *err);
