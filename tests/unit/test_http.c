/* The HTTP server (src/http/) against a client made of plain sockets in the same process: the
 * loop runs (UV_RUN_ONCE, with a 1 ms tick so it never blocks for long) whenever the client
 * waits, every wait has a deadline, and all traffic is loopback or a unix socket in a temp dir.
 * The client reads responses with http-parser too. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>

#include "http/http.h"
#include "util/strfmt.h"
#include "tap.h"

#define MIB (1024u * 1024u)

static uv_loop_t loop;
static uv_timer_t tick;

static struct {
    int requests, done, aborted, twice, drains, pauses;
} st;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

static void pump(void)
{
    uv_run(&loop, UV_RUN_ONCE);
}

#define WAIT_FOR(cond, ms)                                                                         \
    ({                                                                                             \
        uint64_t until_ = now_ms() + (ms);                                                         \
        while (!(cond) && now_ms() < until_)                                                       \
            pump();                                                                                \
        (cond);                                                                                    \
    })

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static unsigned char pattern(uint64_t offset)
{
    return (unsigned char)(offset % 251);
}

/* ---------- the test handler ---------- */

enum route { R_HELLO, R_ECHO, R_COUNT, R_SMALL, R_DOWNLOAD, R_SLOW, R_HANG, R_STOP };

struct ex {
    struct http_exchange *x;
    enum route route;
    bool ended, timer_on;
    uint64_t n, target, bad, next_pause;
    bool with_length;
    char *buf;
    size_t len;
    uv_timer_t timer;
};

static void ex_free_closed(uv_handle_t *h)
{
    struct ex *e = h->data;
    free(e->buf);
    free(e);
}

static void ex_end(struct ex *e, bool done)
{
    if (e->ended)
        st.twice++;
    e->ended = true;
    if (done)
        st.done++;
    else
        st.aborted++;
    e->x = NULL;
    uv_close((uv_handle_t *)&e->timer, ex_free_closed);
}

static void on_done(struct http_exchange *x, void *user)
{
    (void)x;
    ex_end(user, true);
}

static void on_abort(struct http_exchange *x, void *user)
{
    (void)x;
    ex_end(user, false);
}

static void download_pump(struct ex *e)
{
    static unsigned char piece[64 * 1024];
    while (e->x && e->n < e->target) {
        size_t len = e->target - e->n < sizeof piece ? (size_t)(e->target - e->n) : sizeof piece;
        for (size_t i = 0; i < len; i++)
            piece[i] = pattern(e->n + i);
        int rc = http_respond_write(e->x, piece, len);
        if (rc < 0)
            return;
        e->n += len;
        if (rc == 1)
            return; /* on_drain brings us back */
    }
    if (e->x)
        http_respond_end(e->x);
}

static void on_drain(struct http_exchange *x, void *user)
{
    (void)x;
    st.drains++;
    download_pump(user);
}

static int on_data(struct http_exchange *x, const char *data, size_t len, void *user);
static void on_complete(struct http_exchange *x, void *user);

static void on_timer(uv_timer_t *t)
{
    struct ex *e = t->data;
    if (!e->x)
        return;
    if (e->route == R_COUNT) {
        http_exchange_resume_body(e->x);
        return;
    }
    http_respond(e->x, 200, NULL, 0, e->buf, e->len); /* R_SLOW */
}

static void on_request(struct http_exchange *x, const struct http_request *req, void *ctx)
{
    (void)ctx;
    st.requests++;
    struct ex *e = calloc(1, sizeof *e);
    e->x = x;
    uv_timer_init(&loop, &e->timer);
    e->timer.data = e;
    static const struct http_exchange_callbacks cbs = {on_done, on_abort, on_drain};
    http_exchange_set_callbacks(x, &cbs, e);
    static const struct http_body_callbacks body_cbs = {on_data, on_complete};
    const char *p = req->path;
    if (strcmp(p, "/hello") == 0) {
        char body[256];
        int n = snprintf(body, sizeof body, "hello %s %s", req->method, req->target);
        struct http_header h[] = {{"X-Unix", req->from_unix_socket ? "1" : "0"}};
        http_respond(x, 200, h, 1, body, (size_t)n);
    } else if (strcmp(p, "/header-values") == 0) {
        /* refused: a form feed, a DEL, a CR; then one with a tab and obs-text goes out */
        struct http_header ff[] = {{"X-Bad", "a\fb"}}, del[] = {{"X-Bad", "a\x7f"}},
                           cr[] = {{"X-Bad", "a\rb"}}, good[] = {{"X-Good", "t\tx \xc3\xa9"}};
        char body[64];
        int n = snprintf(body, sizeof body, "%d %d %d", http_respond(x, 200, ff, 1, "", 0),
                         http_respond(x, 200, del, 1, "", 0), http_respond(x, 200, cr, 1, "", 0));
        http_respond(x, 200, good, 1, body, (size_t)n);
    } else if (strcmp(p, "/echo") == 0) {
        e->route = R_ECHO;
        http_exchange_on_body(x, 1 * MIB, &body_cbs, e);
    } else if (strcmp(p, "/count") == 0) {
        e->route = R_COUNT;
        e->next_pause = MIB;
        http_exchange_on_body(x, 64 * MIB, &body_cbs, e);
    } else if (strcmp(p, "/small") == 0) {
        e->route = R_SMALL;
        http_exchange_on_body(x, 1000, &body_cbs, e);
    } else if (strcmp(p, "/stop") == 0) {
        e->route = R_STOP;
        http_exchange_on_body(x, 1000, &body_cbs, e);
    } else if (strcmp(p, "/download") == 0 || strcmp(p, "/download-length") == 0) {
        e->route = R_DOWNLOAD;
        e->target = strtoull(req->query, NULL, 10);
        e->with_length = p[9] == '-';
        http_respond_start(x, 200, NULL, 0, e->with_length ? (int64_t)e->target : -1);
        download_pump(e);
    } else if (strcmp(p, "/slow") == 0) {
        e->route = R_SLOW;
        e->buf = strdup(req->query);
        e->len = strlen(e->buf);
        uv_timer_start(&e->timer, on_timer, strtoull(req->query, NULL, 10), 0);
    } else if (strcmp(p, "/hang") == 0) {
        e->route = R_HANG;
    } else {
        http_respond_error(x, 404, "no route \"%s\"", p);
    }
}

static int on_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    struct ex *e = user;
    if (e->route == R_STOP) {
        http_respond_error(x, 400, "stopped after %zu bytes", len);
        return -1;
    }
    if (e->route == R_COUNT) {
        for (size_t i = 0; i < len; i++)
            e->bad += (unsigned char)data[i] != pattern(e->n + i);
        e->n += len;
        if (e->n >= e->next_pause) {
            e->next_pause += MIB;
            st.pauses++;
            http_exchange_pause_body(x);
            uv_timer_start(&e->timer, on_timer, 2, 0);
        }
        return 0;
    }
    e->buf = realloc(e->buf, e->len + len);
    memcpy(e->buf + e->len, data, len);
    e->len += len;
    return 0;
}

static void on_complete(struct http_exchange *x, void *user)
{
    struct ex *e = user;
    if (e->route == R_COUNT) {
        char body[128];
        int n = snprintf(body, sizeof body, "n=%llu bad=%llu", (unsigned long long)e->n,
                         (unsigned long long)e->bad);
        http_respond(x, 200, NULL, 0, body, (size_t)n);
    } else if (e->route == R_SMALL) {
        http_respond(x, 200, NULL, 0, "small", 5);
    } else {
        http_respond(x, 200, NULL, 0, e->buf, e->len);
    }
}

/* ---------- the client ---------- */

struct client {
    int fd;
    http_parser parser;
    bool head;       /* the response read next answers a HEAD */
    bool count_only; /* the body is checked against pattern() and counted, not kept */
    bool complete, eof;
    char headers[16384];
    size_t headers_len;
    bool in_value;
    char *body;
    size_t body_len;
    uint64_t counted, bad;
    char in[65536];
    size_t in_off, in_len;
};

static void headers_add(struct client *c, const char *s, size_t len)
{
    if (c->headers_len + len < sizeof c->headers) {
        memcpy(c->headers + c->headers_len, s, len);
        c->headers_len += len;
        c->headers[c->headers_len] = '\0';
    }
}

static int c_field(http_parser *p, const char *at, size_t len)
{
    struct client *c = p->data;
    if (c->in_value)
        headers_add(c, "\n", 1);
    c->in_value = false;
    headers_add(c, at, len);
    return 0;
}

static int c_value(http_parser *p, const char *at, size_t len)
{
    struct client *c = p->data;
    if (!c->in_value)
        headers_add(c, ": ", 2);
    c->in_value = true;
    headers_add(c, at, len);
    return 0;
}

static int c_headers_complete(http_parser *p)
{
    struct client *c = p->data;
    headers_add(c, "\n", 1);
    return c->head ? 1 : 0;
}

static int c_body(http_parser *p, const char *at, size_t len)
{
    struct client *c = p->data;
    if (c->count_only) {
        for (size_t i = 0; i < len; i++)
            c->bad += (unsigned char)at[i] != pattern(c->counted + i);
        c->counted += len;
        return 0;
    }
    c->body = realloc(c->body, c->body_len + len + 1);
    memcpy(c->body + c->body_len, at, len);
    c->body_len += len;
    c->body[c->body_len] = '\0';
    return 0;
}

static int c_complete(http_parser *p)
{
    struct client *c = p->data;
    c->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings client_settings = {
    .on_header_field = c_field,
    .on_header_value = c_value,
    .on_headers_complete = c_headers_complete,
    .on_body = c_body,
    .on_message_complete = c_complete,
};

static void client_init(struct client *c, int fd)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    http_parser_init(&c->parser, HTTP_RESPONSE);
    c->parser.data = c;
}

static struct client *client_tcp(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return NULL;
    }
    struct client *c = malloc(sizeof *c);
    client_init(c, fd);
    return c;
}

static struct client *client_unix(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strfmt(a.sun_path, sizeof a.sun_path, "%s", path) < 0) {
        close(fd);
        return NULL;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return NULL;
    }
    struct client *c = malloc(sizeof *c);
    client_init(c, fd);
    return c;
}

static void client_free(struct client *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c->body);
    free(c);
}

/* Sends it all, running the loop whenever the socket is full. */
static int client_send(struct client *c, const void *data, size_t len)
{
    const char *p = data;
    uint64_t until = now_ms() + 30000;
    while (len > 0 && now_ms() < until) {
        ssize_t n = send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        } else {
            pump();
        }
    }
    return len == 0 ? 0 : -1;
}

static int client_send_str(struct client *c, const char *s)
{
    return client_send(c, s, strlen(s));
}

/* Reads the next response whole: 1, or 0 (EOF or a parse error or the deadline first). */
static int client_response(struct client *c, unsigned ms)
{
    c->complete = false;
    c->headers_len = 0;
    c->headers[0] = '\0';
    c->in_value = false;
    free(c->body);
    c->body = NULL;
    c->body_len = 0;
    c->counted = c->bad = 0;
    uint64_t until = now_ms() + ms;
    for (;;) {
        if (c->in_off < c->in_len) {
            http_parser_pause(&c->parser, 0);
            size_t n = http_parser_execute(&c->parser, &client_settings, c->in + c->in_off,
                                           c->in_len - c->in_off);
            c->in_off += n;
            enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
            if (e != HPE_OK && e != HPE_PAUSED)
                return 0;
        }
        if (c->complete)
            return 1;
        if (c->eof || now_ms() >= until)
            return 0;
        c->in_off = c->in_len = 0;
        ssize_t n = recv(c->fd, c->in, sizeof c->in, MSG_DONTWAIT);
        if (n > 0) {
            c->in_len = (size_t)n;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            c->eof = true;
            http_parser_pause(&c->parser, 0);
            http_parser_execute(&c->parser, &client_settings, NULL, 0); /* a body up to EOF */
        } else {
            pump();
        }
    }
}

/* Whether the server closed the connection (EOF or reset) within ms, nothing more read. */
static bool client_closed(struct client *c, unsigned ms)
{
    uint64_t until = now_ms() + ms;
    while (!c->eof && now_ms() < until) {
        char b[4096];
        ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            c->eof = true;
        else if (n > 0)
            return false;
        else
            pump();
    }
    return c->eof;
}

static bool has_header(const struct client *c, const char *line)
{
    return strcasestr(c->headers, line) != NULL;
}

/* A JSON error body in E2B's shape with this code. */
static bool is_error_json(const struct client *c, int code)
{
    json_error_t je;
    json_t *j = c->body ? json_loads(c->body, 0, &je) : NULL;
    json_t *cd = json_object_get(j, "code"), *msg = json_object_get(j, "message");
    bool ok = json_is_integer(cd) && json_integer_value(cd) == code && json_is_string(msg) &&
              json_string_length(msg) > 0 && has_header(c, "content-type: application/json");
    json_decref(j);
    return ok;
}

/* One request on a fresh connection, its response read: the client, for more checks. */
static struct client *exchange_once(uint16_t port, const char *request)
{
    struct client *c = client_tcp(port);
    if (c && client_send_str(c, request) == 0)
        client_response(c, 5000);
    return c;
}

/* ---------- the tests ---------- */

static void test_basics(uint16_t port)
{
    struct client *c = exchange_once(port, "GET /hello?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    ok(c && c->complete && c->parser.status_code == 200, "GET: 200");
    is_str(c->body, "hello GET /hello?x=1", "GET: the body names method and target");
    ok(has_header(c, "content-length: 20") && has_header(c, "x-unix: 0"),
       "GET: Content-Length and the handler's header");
    client_free(c);

    c = exchange_once(port, "GET /header-values HTTP/1.1\r\n\r\n");
    ok(c && c->complete && c->parser.status_code == 200 && c->body &&
           strcmp(c->body, "-1 -1 -1") == 0 && has_header(c, "x-good: t\tx \xc3\xa9"),
       "header values with a form feed, a DEL or a CR are refused; a tab and obs-text go out (%s)",
       c && c->body ? c->body : "no body");
    client_free(c);

    c = exchange_once(port, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world");
    ok(c && c->complete && c->parser.status_code == 200, "POST with Content-Length: 200");
    is_str(c->body, "hello world", "POST with Content-Length: the body came through");
    client_free(c);

    c = exchange_once(port, "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "5\r\nhello\r\n1\r\n \r\n6;ext=1\r\nworld!\r\n0\r\nTrailer: t\r\n\r\n");
    ok(c && c->complete && c->parser.status_code == 200, "POST chunked: 200");
    is_str(c->body, "hello world!", "POST chunked: de-chunked for the handler");
    client_free(c);

    /* Every byte in its own read: the parser's pieces are joined. */
    const char *req = "POST /echo?q=split HTTP/1.1\r\nHost: h\r\nX-Long-Header-Name: some value\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    c = client_tcp(port);
    bool sent = true;
    for (size_t i = 0; req[i] && sent; i++) {
        sent = client_send(c, req + i, 1) == 0;
        pump();
    }
    ok(sent && client_response(c, 5000) && c->parser.status_code == 200,
       "a request sent a byte at a time: 200");
    is_str(c->body, "abcde", "and its body whole");
    client_free(c);

    c = exchange_once(port, "GET /nowhere HTTP/1.1\r\n\r\n");
    ok(c && c->parser.status_code == 404 && is_error_json(c, 404),
       "the handler's error: 404 with E2B's JSON");
    ok(c && strstr(c->body, "no route \\\"/nowhere\\\""), "its message escaped in JSON: %s",
       c ? c->body : "");
    client_free(c);
}

static void test_keep_alive(uint16_t port, struct http_server *s)
{
    struct client *c = client_tcp(port);
    int good = 0;
    for (int i = 0; i < 3; i++) {
        char req[64];
        snprintf(req, sizeof req, "GET /hello?%d HTTP/1.1\r\n\r\n", i);
        if (client_send_str(c, req) == 0 && client_response(c, 5000) &&
            c->parser.status_code == 200 && !has_header(c, "connection: close"))
            good++;
    }
    is_u64(good, 3, "keep-alive: 3 requests answered on one connection");
    is_u64(http_server_connection_count(s), 1, "one connection on the server");
    client_free(c);

    c = client_tcp(port);
    client_send_str(c, "GET /slow?40 HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\n\r\n"
                       "HEAD /hello HTTP/1.1\r\n\r\nGET /slow?1 HTTP/1.1\r\n\r\n");
    bool r1 = client_response(c, 5000) && c->body && strcmp(c->body, "40") == 0;
    bool r2 = client_response(c, 5000) && c->body && strcmp(c->body, "hello GET /hello") == 0;
    c->head = true;
    bool r3 = client_response(c, 5000) && !c->body && has_header(c, "content-length: 17");
    c->head = false;
    bool r4 = client_response(c, 5000) && c->body && strcmp(c->body, "1") == 0;
    if (!(r1 && r2 && r3 && r4))
        printf("# %d %d %d %d\n", r1, r2, r3, r4);
    ok(r1 && r2 && r3 && r4, "pipelined: 4 requests (a slow one first, a HEAD) answered in order");
    ok(!client_closed(c, 50), "and the connection stays open");
    client_free(c);

    c = exchange_once(port, "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n");
    ok(c && c->parser.status_code == 200 && has_header(c, "connection: close"),
       "Connection: close: answered with Connection: close");
    ok(client_closed(c, 3000), "and closed");
    client_free(c);

    c = exchange_once(port, "GET /hello HTTP/1.0\r\n\r\n");
    ok(c && c->parser.status_code == 200 && client_closed(c, 3000), "HTTP/1.0: closed after");
    client_free(c);
    c = exchange_once(port, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ok(c && c->parser.status_code == 200 && has_header(c, "connection: keep-alive"),
       "HTTP/1.0 with keep-alive: kept");
    ok(client_send_str(c, "GET /download?1000 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == 0 &&
           client_response(c, 5000) && c->body_len == 1000 &&
           !has_header(c, "transfer-encoding") && client_closed(c, 3000),
       "HTTP/1.0: a streamed body without chunks, ended by the close");
    client_free(c);

    c = client_tcp(port);
    client_send_str(c, "POST /echo HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    bool got100 = client_response(c, 5000) && c->parser.status_code == 100;
    client_send_str(c, "body");
    ok(got100 && client_response(c, 5000) && c->parser.status_code == 200 && c->body &&
           strcmp(c->body, "body") == 0,
       "Expect: 100-continue: 100, then the body, then 200");
    client_free(c);
    c = exchange_once(port, "POST /small HTTP/1.1\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
    ok(c && c->parser.status_code == 413 && is_error_json(c, 413),
       "Expect with a body over the handler's max: 413 at once, no 100");
    client_free(c);
}

static void test_errors(uint16_t port)
{
    struct client *c = exchange_once(port, "GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n");
    ok(c && c->parser.status_code == 400 && is_error_json(c, 400),
       "malformed header: 400 with E2B's JSON (%s)", c && c->body ? c->body : "");
    ok(c && client_closed(c, 3000), "and the connection closed");
    client_free(c);
    c = exchange_once(port, "\x01\x02garbage\r\n\r\n");
    ok(c && c->parser.status_code == 400 && is_error_json(c, 400), "garbage: 400");
    client_free(c);

    char big[8192];
    snprintf(big, sizeof big, "GET /%0*d HTTP/1.1\r\n\r\n", 3000, 0);
    c = exchange_once(port, big);
    ok(c && c->parser.status_code == 414 && is_error_json(c, 414), "URL too long: 414");
    client_free(c);

    snprintf(big, sizeof big, "GET / HTTP/1.1\r\nX-Big: %0*d\r\n\r\n", 7000, 0);
    c = exchange_once(port, big);
    ok(c && c->parser.status_code == 431 && is_error_json(c, 431), "headers too big: 431");
    client_free(c);

    size_t off = (size_t)snprintf(big, sizeof big, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 20; i++)
        off += (size_t)snprintf(big + off, sizeof big - off, "X-H%d: v\r\n", i);
    snprintf(big + off, sizeof big - off, "\r\n");
    c = exchange_once(port, big);
    ok(c && c->parser.status_code == 431 && is_error_json(c, 431), "too many headers: 431");
    client_free(c);

    /* The client sends its whole body at once: the answer must still reach it. */
    static char body[5000];
    memset(body, 'b', sizeof body);
    c = client_tcp(port);
    client_send_str(c, "POST /small HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
    client_send(c, body, sizeof body);
    ok(client_response(c, 5000) && c->parser.status_code == 413 && is_error_json(c, 413),
       "Content-Length over the handler's max: 413");
    ok(client_closed(c, 3000), "and closed");
    client_free(c);

    int aborted = st.aborted;
    c = client_tcp(port);
    client_send_str(c, "POST /small HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++) {
        client_send_str(c, "1F4\r\n");
        client_send(c, body, 500);
        client_send_str(c, "\r\n");
    }
    ok(client_response(c, 5000) && c->parser.status_code == 413 && is_error_json(c, 413),
       "a chunked body growing over the handler's max: 413");
    is_u64(st.aborted - aborted, 1, "and the handler's exchange aborted");
    client_free(c);

    c = exchange_once(port, "POST /small HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    ok(c && c->parser.status_code == 400 && is_error_json(c, 400), "a malformed chunk: 400");
    client_free(c);

    c = exchange_once(port, "POST /stop HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
    ok(c && c->parser.status_code == 400 && is_error_json(c, 400) && client_closed(c, 3000),
       "on_data stops the body: the handler's 400, then closed");
    client_free(c);

    uint64_t t0 = now_ms();
    c = client_tcp(port);
    client_send_str(c, "GET /hello HTTP/1.1\r\nHost:");
    ok(client_response(c, 5000) && c->parser.status_code == 408 && is_error_json(c, 408),
       "headers never finished: 408");
    uint64_t took = now_ms() - t0;
    ok(took >= 280 && took < 3000, "after the header timeout (300 ms): %llu ms",
       (unsigned long long)took);
    client_free(c);

    t0 = now_ms();
    c = client_tcp(port);
    ok(client_closed(c, 5000), "a connection with no request: closed");
    took = now_ms() - t0;
    ok(took >= 750 && took < 4000, "after the idle timeout (800 ms): %llu ms",
       (unsigned long long)took);
    client_free(c);
}

static void test_streams(uint16_t port)
{
    size_t size = 10 * MIB;
    char *up = malloc(size);
    for (size_t i = 0; i < size; i++)
        up[i] = (char)pattern(i);
    int pauses = st.pauses;
    struct client *c = client_tcp(port);
    char head[128];
    snprintf(head, sizeof head, "POST /count HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", size);
    bool sent = client_send_str(c, head) == 0 && client_send(c, up, size) == 0;
    ok(sent && client_response(c, 30000) && c->parser.status_code == 200,
       "10 MiB upload: 200");
    is_str(c->body, "n=10485760 bad=0", "every byte in order");
    ok(st.pauses - pauses >= 9, "the handler paused the body %d times", st.pauses - pauses);
    client_free(c);

    c = client_tcp(port);
    snprintf(head, sizeof head, "POST /count HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    client_send_str(c, head);
    for (size_t off = 0; off < size; off += 100000) {
        size_t n = size - off < 100000 ? size - off : 100000;
        char ch[32];
        snprintf(ch, sizeof ch, "%zx\r\n", n);
        client_send_str(c, ch);
        client_send(c, up + off, n);
        client_send_str(c, "\r\n");
    }
    client_send_str(c, "0\r\n\r\n");
    ok(client_response(c, 30000) && c->body && strcmp(c->body, "n=10485760 bad=0") == 0,
       "10 MiB chunked upload: every byte in order");
    client_free(c);
    free(up);

    int drains = st.drains;
    c = client_tcp(port);
    snprintf(head, sizeof head, "GET /download?%zu HTTP/1.1\r\n\r\n", size);
    client_send_str(c, head);
    for (int i = 0; i < 100; i++) /* the client does not read yet: the queue fills */
        pump();
    c->count_only = true;
    ok(client_response(c, 30000) && c->parser.status_code == 200 &&
           has_header(c, "transfer-encoding: chunked"),
       "10 MiB download: 200, chunked");
    ok(c->counted == size && c->bad == 0, "every byte in order (%llu)",
       (unsigned long long)c->counted);
    ok(st.drains - drains >= 1, "backpressure: the handler waited for on_drain %d times",
       st.drains - drains);
    snprintf(head, sizeof head, "GET /download-length?%u HTTP/1.1\r\n\r\n", 3 * MIB);
    client_send_str(c, head);
    ok(client_response(c, 30000) && c->counted == 3 * MIB && c->bad == 0 &&
           has_header(c, "content-length: 3145728"),
       "a streamed download with Content-Length, on the same connection");
    client_free(c);
}

static void test_aborts(uint16_t port, struct http_server *s)
{
    int done = st.done, aborted = st.aborted;
    struct client *c = client_tcp(port);
    client_send_str(c, "GET /download?100000000000 HTTP/1.1\r\n\r\n");
    char buf[65536];
    size_t got = 0;
    WAIT_FOR((got += (size_t)(recv(c->fd, buf, sizeof buf, MSG_DONTWAIT) > 0)) > 5, 5000);
    client_free(c);
    ok(WAIT_FOR(st.aborted == aborted + 1, 5000), "a client gone mid-response: on_abort");
    ok(WAIT_FOR(http_server_connection_count(s) == 0, 5000), "its connection closed");

    c = client_tcp(port);
    client_send_str(c, "GET /hang HTTP/1.1\r\n\r\n");
    int requests = st.requests;
    WAIT_FOR(st.requests == requests + 1, 2000);
    client_free(c);
    ok(WAIT_FOR(st.aborted == aborted + 2, 5000), "a client gone while the handler waits: on_abort");
    for (int i = 0; i < 20; i++)
        pump();
    is_u64(st.done - done, 0, "and never on_done for them");
    is_u64(st.aborted - aborted, 2, "on_abort exactly once each");
}

static void test_flood(uint16_t port, struct http_server *s)
{
    int fds = fd_count();
    enum { N = 500 };
    static struct client *cs[N];
    int opened = 0;
    for (int i = 0; i < N; i++) {
        if (!(cs[i] = client_tcp(port)))
            break;
        opened++;
        if (i % 50 == 49)
            WAIT_FOR(http_server_connection_count(s) == (size_t)opened, 5000);
    }
    is_u64(opened, N, "a flood: %d connections opened", N);
    ok(WAIT_FOR(http_server_connection_count(s) == N, 10000), "all %d on the server", N);
    for (int i = 0; i < opened; i++)
        client_free(cs[i]);
    ok(WAIT_FOR(http_server_connection_count(s) == 0, 10000), "closed: the count back to 0");
    for (int i = 0; i < 20; i++)
        pump();
    is_u64(fd_count(), fds, "and the process's fds back to what they were");
}

static void test_max_connections(void)
{
    err_t err;
    struct http_limits lim = {.max_connections = 3};
    struct http_handler h = {on_request, NULL};
    struct http_server *s = http_server_new(&loop, &lim, &h, &err);
    uint16_t port = 0;
    ok(s && http_server_listen_tcp(s, "127.0.0.1", 0, &port, &err) == 0, "a server for at most 3");
    struct client *cs[4];
    for (int i = 0; i < 3; i++)
        cs[i] = client_tcp(port);
    ok(WAIT_FOR(http_server_connection_count(s) == 3, 5000), "3 connections");
    cs[3] = client_tcp(port);
    ok(cs[3] && client_closed(cs[3], 5000), "the 4th is closed at once");
    is_u64(http_server_connection_count(s), 3, "still 3");
    ok(client_send_str(cs[0], "GET /hello HTTP/1.1\r\n\r\n") == 0 && client_response(cs[0], 5000) &&
           cs[0]->parser.status_code == 200,
       "the first 3 are served");
    int requests = st.requests, aborted = st.aborted;
    client_send_str(cs[1], "GET /hang HTTP/1.1\r\n\r\n");
    ok(WAIT_FOR(st.requests == requests + 1, 5000), "a request left waiting");
    http_server_close(s);
    ok(st.aborted == aborted + 1, "closing the server aborts its exchange");
    for (int i = 0; i < 4; i++)
        ok(client_closed(cs[i], 5000), "and closes connection %d", i);
    for (int i = 0; i < 4; i++)
        client_free(cs[i]);
}

static void test_unix(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/http.sock", dir);
    /* A stale socket from an earlier daemon. */
    int old = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    ok(strfmt(a.sun_path, sizeof a.sun_path, "%s", path) == 0, "the socket path fits");
    bind(old, (struct sockaddr *)&a, sizeof a);
    close(old);

    err_t err;
    struct http_handler h = {on_request, NULL};
    struct http_server *s = http_server_new(&loop, NULL, &h, &err);
    ok(s && http_server_listen_unix(s, path, 0600, &err) == 0, "listen on a unix socket over a stale one: %s",
       s ? "" : err.msg);
    struct stat sb;
    ok(stat(path, &sb) == 0 && S_ISSOCK(sb.st_mode) && (sb.st_mode & 0777) == 0600,
       "the socket has mode 0600");
    struct client *c = client_unix(path);
    ok(c && client_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0 && client_response(c, 5000) &&
           c->parser.status_code == 200 && has_header(c, "x-unix: 1"),
       "GET over the unix socket, and the handler knows it came that way");
    client_free(c);
    char file[256];
    snprintf(file, sizeof file, "%s/plain", dir);
    close(open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    ok(http_server_listen_unix(s, file, 0600, &err) < 0 && err.errnum == EEXIST,
       "a file that is not a socket is not replaced");
    http_server_close(s);
    ok(stat(path, &sb) < 0, "the socket is removed at close");
    unlink(file);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* libuv's first loop opens a process-wide pipe (its signal lock) that stays: a scratch loop
     * opens it before the count that the end is compared with. */
    uv_loop_t scratch;
    uv_loop_init(&scratch);
    uv_loop_close(&scratch);
    int fds = fd_count();
    uv_loop_init(&loop);
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, on_tick, 1, 1);

    char dir[] = "/tmp/hutch-test-http.XXXXXX";
    ok(mkdtemp(dir) != NULL, "a temp dir");

    struct http_limits lim = {
        .max_url = 2048,
        .max_header_bytes = 4096,
        .max_headers = 16,
        .header_timeout_ms = 300,
        .idle_timeout_ms = 800,
        .max_queued_write = 256 * 1024,
    };
    struct http_handler h = {on_request, NULL};
    err_t err;
    struct http_server *s = http_server_new(&loop, &lim, &h, &err);
    uint16_t port = 0;
    ok(s && http_server_listen_tcp(s, "127.0.0.1", 0, &port, &err) == 0 && port != 0,
       "listening on 127.0.0.1 port %u", port);
    ok(http_server_listen_tcp(s, "not-an-address", 0, NULL, &err) < 0 && err.errnum == EINVAL,
       "a host that is not an address: EINVAL");

    test_basics(port);
    test_keep_alive(port, s);
    test_errors(port);
    test_streams(port);
    test_aborts(port, s);
    test_flood(port, s);
    test_max_connections();
    test_unix(dir);

    ok(WAIT_FOR(http_server_connection_count(s) == 0, 5000), "no connection left");
    http_server_close(s);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ok(uv_loop_close(&loop) == 0, "every handle closed");
    is_u64(st.twice, 0, "no exchange ended twice");
    is_u64(st.requests, st.done + st.aborted, "every exchange ended: %d requests, %d done, %d aborted",
           st.requests, st.done, st.aborted);
    is_u64(fd_count(), fds, "no fd left open");
    rmdir(dir);
    return done_testing();
}
