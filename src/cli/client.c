/* The CLI's HTTP client over the daemon's unix socket (client.h). */
#include "cli/client.h"

#include <errno.h>
#include <http_parser.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/paths.h"

struct client {
    int fd;
    http_parser parser;
    struct client_response *r; /* the response being read */
    err_t *err;                /* where a callback's failure goes */
    bool body_failed;
    char field[32]; /* the header name being read, cut short (only a few are wanted) */
    size_t field_len;
    bool field_done;
    bool in_next_token;
    size_t next_token_len;
};

const char *client_socket_path(void)
{
    static char path[PATH_MAX];
    const char *env = getenv("HUTCH_SOCKET");
    if (env && env[0])
        return env;
    snprintf(path, sizeof path, "%s/hutch.sock", hutch_run_dir());
    return path;
}

struct client *client_open(err_t *err)
{
    const char *path = client_socket_path();
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        err_set(err, 0, "%s: socket path too long", path);
        return NULL;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    struct client *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, ENOMEM, "client");
        return NULL;
    }
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        err_set(err, errno, "socket");
        free(c);
        return NULL;
    }
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        if (e == ENOENT || e == ECONNREFUSED)
            err_set(err, 0, "no daemon at %s: start it with `hutch serve`", path);
        else if (e == EACCES || e == EPERM)
            err_set(err, 0, "%s: %s: the daemon's socket is for root only", path, strerror(e));
        else
            err_set(err, e, "connecting to %s", path);
        err->errnum = e;
        close(c->fd);
        free(c);
        return NULL;
    }
    return c;
}

void client_close(struct client *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c);
}

int client_fd(const struct client *c)
{
    return c->fd;
}

static int write_all(struct client *c, const void *data, size_t len, err_t *err)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, errno, "sending to the daemon");
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The head: the request line, Host, Connection: close, the caller's headers, then the body's
 * framing header. A name or value with CR or LF is refused (no header injection from an
 * argument). */
static int send_head(struct client *c, const char *method, const char *target,
                     const struct client_header *headers, size_t n, const char *framing,
                     const void *body, size_t body_len, err_t *err)
{
    if (strpbrk(target, "\r\n \t"))
        return err_set(err, 0, "a request target with white space: %.64s", target);
    size_t cap = strlen(method) + strlen(target) + strlen(framing) + body_len + 128;
    for (size_t i = 0; i < n; i++) {
        if (strpbrk(headers[i].name, "\r\n:") || strpbrk(headers[i].value, "\r\n"))
            return err_set(err, 0, "header %.64s: CR or LF in it", headers[i].name);
        cap += strlen(headers[i].name) + strlen(headers[i].value) + 4;
    }
    char *head = malloc(cap);
    if (!head)
        return err_set(err, ENOMEM, "request");
    size_t at = (size_t)snprintf(head, cap,
                                 "%s %s HTTP/1.1\r\nHost: localhost\r\n"
                                 "Connection: close\r\n",
                                 method, target);
    for (size_t i = 0; i < n; i++)
        at +=
            (size_t)snprintf(head + at, cap - at, "%s: %s\r\n", headers[i].name, headers[i].value);
    at += (size_t)snprintf(head + at, cap - at, "%s\r\n", framing);
    if (body_len) /* in the same write: a server that answers the head alone still has it */
        memcpy(head + at, body, body_len);
    int rc = write_all(c, head, at + body_len, err);
    free(head);
    return rc;
}

int client_send(struct client *c, const char *method, const char *target,
                const struct client_header *headers, size_t n, const void *body, size_t len,
                err_t *err)
{
    char framing[64];
    snprintf(framing, sizeof framing, "Content-Length: %zu\r\n", len);
    return send_head(c, method, target, headers, n, framing, body, len, err);
}

int client_send_chunked(struct client *c, const char *method, const char *target,
                        const struct client_header *headers, size_t n, err_t *err)
{
    return send_head(c, method, target, headers, n, "Transfer-Encoding: chunked\r\n", NULL, 0, err);
}

int client_send_chunk(struct client *c, const void *data, size_t len, err_t *err)
{
    char size[32];
    int k = snprintf(size, sizeof size, "%zx\r\n", len);
    if (write_all(c, size, (size_t)k, err) < 0 || (len && write_all(c, data, len, err) < 0))
        return -1;
    return write_all(c, "\r\n", 2, err); /* after the data, or the last chunk's empty trailer */
}

/* ---------- the response ---------- */

static struct client *of(http_parser *p)
{
    return p->data;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct client *c = of(p);
    if (c->field_done) { /* a new header begins */
        c->field_len = 0;
        c->field_done = false;
        c->in_next_token = false;
    }
    size_t room = sizeof c->field - 1 - c->field_len;
    size_t take = len < room ? len : room;
    memcpy(c->field + c->field_len, at, take);
    c->field_len += take;
    c->field[c->field_len] = '\0';
    if (len > room)
        c->field[0] = '\0'; /* longer than any wanted name */
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct client *c = of(p);
    if (!c->field_done) {
        c->field_done = true;
        c->in_next_token = strcasecmp(c->field, "X-Next-Token") == 0;
        if (c->in_next_token) {
            c->next_token_len = 0;
            c->r->next_token[0] = '\0';
        }
    }
    if (!c->in_next_token)
        return 0;
    char *t = c->r->next_token;
    if (c->next_token_len + len >= sizeof c->r->next_token) {
        t[0] = '\0'; /* no token of ours is that long: the next page is not followed */
        c->in_next_token = false;
        return 0;
    }
    memcpy(t + c->next_token_len, at, len);
    c->next_token_len += len;
    t[c->next_token_len] = '\0';
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct client *c = of(p);
    c->r->status = p->status_code;
    c->r->head_done = true;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct client *c = of(p);
    struct client_response *r = c->r;
    if (r->on_body) {
        if (r->on_body(at, len, r->user, c->err) < 0) {
            c->body_failed = true;
            return -1;
        }
        return 0;
    }
    if (len > CLIENT_MAX_BODY - r->len) {
        err_set(c->err, 0, "the daemon's answer is larger than %u bytes", CLIENT_MAX_BODY);
        c->body_failed = true;
        return -1;
    }
    if (r->cap - r->len < len + 1) { /* doubled: a large answer is not copied over and over */
        size_t cap = r->cap ? r->cap : 4096;
        while (cap - r->len < len + 1)
            cap *= 2;
        char *grown = realloc(r->body, cap);
        if (!grown) {
            err_set(c->err, ENOMEM, "the daemon's answer");
            c->body_failed = true;
            return -1;
        }
        r->body = grown;
        r->cap = cap;
    }
    memcpy(r->body + r->len, at, len);
    r->len += len;
    r->body[r->len] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    of(p)->r->complete = true;
    return 0;
}

static const http_parser_settings settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void client_response_free(struct client_response *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

int client_pump(struct client *c, struct client_response *r, err_t *err)
{
    if (c->r != r) { /* the first read of this response */
        c->r = r;
        http_parser_init(&c->parser, HTTP_RESPONSE);
        c->parser.data = c;
        c->field_done = true;
        c->field_len = 0;
    }
    c->err = err;
    if (r->complete)
        return 1;
    char buf[65536];
    ssize_t n;
    do
        n = read(c->fd, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return err_set(err, errno, "reading the daemon's answer");
    size_t used = http_parser_execute(&c->parser, &settings, buf, (size_t)n);
    if (c->body_failed)
        return -1;
    if (r->complete)
        return 1;
    if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || used != (size_t)n)
        return err_set(err, 0, "a malformed answer from the daemon: %s",
                       http_errno_description(HTTP_PARSER_ERRNO(&c->parser)));
    if (n == 0)
        return err_set(err, ECONNRESET,
                       "the daemon closed the connection before its answer "
                       "was whole");
    return 0;
}

int client_read_response(struct client *c, struct client_response *r, err_t *err)
{
    int rc;
    while ((rc = client_pump(c, r, err)) == 0)
        ;
    return rc < 0 ? -1 : 0;
}

int client_call(const char *method, const char *target, const struct client_header *headers,
                size_t n, const void *body, size_t len, struct client_response *r, err_t *err)
{
    struct client *c = client_open(err);
    if (!c)
        return -1;
    int rc = client_send(c, method, target, headers, n, body, len, err) < 0 ||
                     client_read_response(c, r, err) < 0
                 ? -1
                 : 0;
    client_close(c);
    return rc;
}

int client_error_from(const struct client_response *r, err_t *err)
{
    int errnum = r->status == 404 || r->status == 502 ? ENOENT : EIO;
    json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    const char *message = j ? json_string_value(json_object_get(j, "message")) : NULL;
    if (message && message[0])
        err_set(err, 0, "%s", message);
    else
        err_set(err, 0, "the daemon answered %d: %.200s", r->status,
                r->body && r->len ? r->body : "(no body)");
    json_decref(j);
    err->errnum = errnum;
    return -1;
}
