/* Shared by the files of src/http/ only: the connection and the exchange as server.c (sockets,
 * timers, the write queue), request.c (http-parser's callbacks, the request body) and
 * response.c (status line, headers, chunks, error bodies) see them. */
#pragma once
#include <http_parser.h>

#include "http/http.h"

/* What a handler that never called http_exchange_on_body may send as a body before the
 * connection is closed after the response instead of read to its end. */
#define HTTP_DISCARD_MAX (1u << 20)
/* How long a connection closed after an error is still read (and the bytes dropped) once its
 * answer is out: closing with unread input makes the kernel send a reset, which can destroy the
 * answer before the client reads it. */
#define HTTP_LINGER_MS 2000
/* Bytes read from a socket in one go; also what is kept of pipelined requests while one is
 * answered (reading stops when it is full). */
#define HTTP_READ_BUFFER (64 * 1024)

struct http_server {
    uv_loop_t *loop;
    struct http_limits limits;
    struct http_handler handler;
    struct http_listener *listeners;
    struct http_conn *conns; /* open connections, a doubly linked list */
    size_t n_conns;
    size_t open_handles; /* listeners, connections and rejected sockets not yet closed */
    bool closing;
};

enum http_response_state {
    HTTP_RESPONSE_NONE,    /* nothing sent yet */
    HTTP_RESPONSE_STARTED, /* status line and headers queued, body being written */
    HTTP_RESPONSE_ENDED,   /* all of it queued */
};

struct http_header_offsets {
    size_t name, value; /* offsets in the exchange's arena; value SIZE_MAX until one came */
};

struct http_exchange {
    struct http_conn *conn;
    /* The request as it is parsed: every piece (URL, header names and values) NUL-terminated in
     * one arena, by offset because the arena moves as it grows; pointers once it is whole. */
    char *arena;
    size_t arena_len, arena_cap;
    size_t url_len; /* the URL is the arena's first piece */
    struct http_header_offsets *header_offsets;
    size_t n_header_offsets, header_bytes;
    enum { HTTP_PIECE_NONE, HTTP_PIECE_URL, HTTP_PIECE_FIELD, HTTP_PIECE_VALUE } last_piece;
    struct http_request req;
    struct http_header *headers;
    bool visible;      /* on_request was called: the handler knows this exchange */
    bool notified;     /* on_done or on_abort was called: the handler has let go of it */
    bool request_done; /* the whole request (body included) was parsed */
    bool is_head;
    unsigned short http_minor; /* of HTTP/1.x; 0 also for anything older */
    bool keep_alive;       /* the client allows another request on this connection */
    bool expect_continue;  /* "Expect: 100-continue", and "100 Continue" not sent yet */
    bool body_taken;       /* http_exchange_on_body was called */
    bool body_stopped;     /* the handler's on_data said stop */
    bool body_paused;      /* http_exchange_pause_body */
    uint64_t max_body, body_bytes;
    struct http_body_callbacks body_cb;
    void *body_user;
    struct http_exchange_callbacks cb;
    void *user;
    enum http_response_state response;
    bool chunked_response;   /* the body goes out in chunks */
    bool response_no_body;   /* HEAD, 204, 304: headers only */
    bool want_drain;         /* a write reported backpressure; on_drain when below again */
    bool length_known;       /* a Content-Length was sent: written bytes are counted */
    uint64_t length_left;    /* bytes of that length still to write */
};

struct http_conn {
    struct http_server *server;
    struct http_conn *prev, *next;
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } sock;
    uv_timer_t timer;       /* the header, idle or linger timeout */
    int timer_kind;
    uv_timer_t defer_timer; /* http_conn_defer_update */
    uv_shutdown_t shutdown_req;
    http_parser parser;
    bool from_unix_socket;
    struct http_exchange *x; /* the request being parsed or answered; NULL between requests */
    char *in;                /* read and not yet parsed: in[in_off..in_len) */
    size_t in_off, in_len;
    size_t queued; /* bytes written to the socket whose write has not completed */
    int handles_open;
    bool reading;       /* uv_read_start is on */
    bool in_parser;     /* inside http_parser_execute: nothing may be freed */
    bool read_eof;      /* the client sent EOF (or reading failed) */
    bool write_failed;  /* a write failed: the client is gone */
    bool close_after;   /* close once the current response is out */
    bool closing;       /* uv_close was called */
    bool lingering;     /* the last answer is out, the write side shut: reading to drop input */
    bool final_answer;  /* the server's own error answer is queued: nothing more to parse */
    int fail_status;    /* set by a parser callback: answer this (or close) once it returns */
    const char *fail_message;
};

/* server.c */
/* Looks at a connection's state after anything happened to it and moves it on: finishes an
 * exchange whose response is out, starts the next, answers errors, closes. Never called from
 * inside http_parser_execute; safe from anywhere else (it frees nothing the caller holds). */
void http_conn_update(struct http_conn *c);
/* Runs http_conn_update soon from the loop, for calls made by the handler, which still holds
 * its exchange. */
void http_conn_defer_update(struct http_conn *c);
/* Queues the pieces on the socket as one write (copied). -1 when the connection is closing or
 * failed. */
int http_conn_writev(struct http_conn *c, const uv_buf_t *bufs, unsigned n);
void http_conn_set_reading(struct http_conn *c);
/* The header timeout, from a request's first byte; stopped once its headers are in. */
void http_conn_timer_header(struct http_conn *c);
void http_conn_timer_stop(struct http_conn *c);

/* request.c */
extern const http_parser_settings http_parser_callbacks;
void http_exchange_free(struct http_exchange *x);
/* Calls on_done (done) or on_abort once, only if the handler knows the exchange. */
void http_exchange_notify(struct http_exchange *x, bool done);

/* response.c */
/* The server's own error answer, E2B's JSON shape, with Connection: close. */
int http_conn_write_error(struct http_conn *c, int status, const char *message);
