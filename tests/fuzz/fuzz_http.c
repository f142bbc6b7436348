/* The HTTP server (src/http/) against one hostile client: the input, after its first byte, is
 * what the client sends on a unix socket connection, in pieces of (first byte % 64) + 1 bytes
 * (the whole input at once when the first byte is 0xff), the loop run between pieces; then the
 * client shuts its write side. Checked: the server answers or closes within a bound (the client
 * reads EOF); what it sent parses as a sequence of HTTP responses (unless a HEAD request may be
 * among them, whose responses a parser cannot delimit without knowing); every exchange the
 * handler saw ended exactly once (on_done or on_abort); the connection count is back to 0 and no
 * fd is left open. The test handler takes bodies, pauses them, streams, answers late, never
 * answers, or stops a body, by the path's first letter. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>

#include "fuzz.h"
#include "http/http.h"

#define OUTPUT_MAX (256 * 1024)
#define BOUND_MS   3000

static uv_loop_t loop;
static struct http_server *server;
static char dir[64], sock_path[128];
static int requests, ended, twice;

struct ex {
    struct http_exchange *x;
    char route;
    bool ended;
    size_t body;
    uv_timer_t timer;
};

static void ex_closed(uv_handle_t *h)
{
    free(h->data);
}

static void ex_end(struct http_exchange *x, void *user)
{
    (void)x;
    struct ex *e = user;
    twice += e->ended;
    e->ended = true;
    ended++;
    e->x = NULL;
    uv_close((uv_handle_t *)&e->timer, ex_closed);
}

static void on_timer(uv_timer_t *t)
{
    struct ex *e = t->data;
    if (!e->x)
        return;
    if (e->route == 'p')
        http_exchange_resume_body(e->x);
    else
        http_respond(e->x, 202, NULL, 0, "late", 4);
}

static int on_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    (void)data;
    struct ex *e = user;
    e->body += len;
    if (e->route == 'x') {
        http_respond_error(x, 400, "stopped at %zu bytes", e->body);
        return -1;
    }
    if (e->route == 'p') {
        http_exchange_pause_body(x);
        uv_timer_start(&e->timer, on_timer, 0, 0);
    }
    return 0;
}

static void on_complete(struct http_exchange *x, void *user)
{
    struct ex *e = user;
    http_respond_error(x, 200, "%zu bytes", e->body);
}

static void on_request(struct http_exchange *x, const struct http_request *req, void *ctx)
{
    (void)ctx;
    requests++;
    struct ex *e = calloc(1, sizeof *e);
    fuzz_assert(e != NULL);
    e->x = x;
    e->route = req->path[0] == '/' ? req->path[1] : 0;
    uv_timer_init(&loop, &e->timer);
    e->timer.data = e;
    static const struct http_exchange_callbacks cbs = {ex_end, ex_end, NULL};
    http_exchange_set_callbacks(x, &cbs, e);
    static const struct http_body_callbacks body = {on_data, on_complete};
    switch (e->route) {
    case 'b':
    case 'p':
    case 'x':
        http_exchange_on_body(x, 64, &body, e);
        break;
    case 's': {
        struct http_header h[] = {{"X-Path", req->path}};
        /* A path with a control character is refused as a header value: then without it. */
        if (http_respond_start(x, 200, h, 1, -1) < 0)
            http_respond_start(x, 200, NULL, 0, -1);
        for (int i = 0; i < 3; i++)
            http_respond_write(x, "piece", 5);
        http_respond_end(x);
        break;
    }
    case 'a':
        uv_timer_start(&e->timer, on_timer, 0, 0);
        break;
    case 'w':
        break; /* never answered: aborted when the client goes */
    default:
        http_respond(x, 200, NULL, 0, "ok", 2);
    }
}

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    fuzz_assert(d != NULL);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void cleanup(void)
{
    unlink(sock_path);
    rmdir(dir);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    fuzz_assert(uv_loop_init(&loop) == 0);
    snprintf(dir, sizeof dir, "/tmp/hutch-fuzz-http.XXXXXX");
    fuzz_assert(mkdtemp(dir) != NULL);
    snprintf(sock_path, sizeof sock_path, "%s/s", dir);
    atexit(cleanup);
    struct http_limits lim = {
        .max_url = 256,
        .max_header_bytes = 1024,
        .max_headers = 8,
        .header_timeout_ms = 10000,
        .idle_timeout_ms = 10000,
        .max_queued_write = 64,
    };
    struct http_handler h = {on_request, NULL};
    err_t err;
    server = http_server_new(&loop, &lim, &h, &err);
    fuzz_assert(server != NULL);
    fuzz_assert(http_server_listen_unix(server, sock_path, 0600, &err) == 0);
}

/* Reads what is there; false once the server closed. */
static bool drain(int fd, char *out, size_t *out_len)
{
    for (;;) {
        char buf[16384];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            size_t take = (size_t)n < OUTPUT_MAX - *out_len ? (size_t)n : OUTPUT_MAX - *out_len;
            memcpy(out + *out_len, buf, take);
            *out_len += take;
            continue;
        }
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    }
}

static int count_complete(http_parser *p)
{
    (*(int *)p->data)++;
    return 0;
}

/* The server's bytes are whole HTTP responses, one after another. */
static void check_responses(const char *out, size_t len)
{
    if (len == 0)
        return;
    static const http_parser_settings settings = {.on_message_complete = count_complete};
    http_parser p;
    int complete = 0;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &complete;
    size_t n = http_parser_execute(&p, &settings, out, len);
    fuzz_assert(HTTP_PARSER_ERRNO(&p) == HPE_OK && n == len);
    http_parser_execute(&p, &settings, NULL, 0); /* a body up to the close */
    fuzz_assert(complete > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        setup();
    if (size == 0)
        return 0;
    size_t step = data[0] == 0xff ? size : (size_t)(data[0] % 64) + 1;
    const char *in = (const char *)data + 1;
    size_t in_len = size - 1;
    int fds = fd_count(), requests0 = requests, ended0 = ended;

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    fuzz_assert(fd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
    fuzz_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);

    static char out[OUTPUT_MAX];
    size_t out_len = 0;
    bool open = true;
    uint64_t until = now_ms() + BOUND_MS;
    for (size_t off = 0; off < in_len && open && now_ms() < until;) {
        size_t len = in_len - off < step ? in_len - off : step;
        ssize_t n = send(fd, in + off, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            break; /* the server closed already */
        for (int i = 0; i < 2; i++)
            uv_run(&loop, UV_RUN_NOWAIT);
        open = drain(fd, out, &out_len);
    }
    shutdown(fd, SHUT_WR);
    while (open && now_ms() < until) {
        uv_run(&loop, UV_RUN_NOWAIT);
        open = drain(fd, out, &out_len);
    }
    fuzz_assert(!open); /* answered (or not) and closed, within the bound */
    close(fd);
    while ((http_server_connection_count(server) > 0 || ended - ended0 < requests - requests0) &&
           now_ms() < until)
        uv_run(&loop, UV_RUN_NOWAIT);
    for (int i = 0; i < 4; i++)
        uv_run(&loop, UV_RUN_NOWAIT); /* close callbacks */
    fuzz_assert(http_server_connection_count(server) == 0);
    fuzz_assert(ended - ended0 == requests - requests0);
    fuzz_assert(twice == 0);
    fuzz_assert(fd_count() == fds);
    if (getenv("FUZZ_HTTP_SHOW"))
        fprintf(stderr, "%zu requests, %zu bytes out: %.*s\n", (size_t)(requests - requests0),
                out_len, (int)(out_len < 200 ? out_len : 200), out);
    if (!memmem(in, in_len, "HEAD", 4))
        check_responses(out, out_len);
    return 0;
}
