/* A command's input (commands.h: scmd_input, scmd_close_stdin): written to its stdin pipe or its
 * pty without ever blocking the loop. What the fd does not take at once waits in a bounded queue
 * (SCMD_INPUT_MAX) and is written when the fd is writable again, in order; a stdin close asked
 * meanwhile happens once the queue is written. Each target has its own dup of the fd, so that
 * its writability is watched apart from the pty's output (commands.c polls the master for
 * reading). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/agent.h"
#include "serve/commands.h"

static struct scmd_input *queue_of(struct scmd *c, bool to_pty)
{
    return &c->input[to_pty ? 1 : 0];
}

static size_t queued(const struct scmd_input *q)
{
    return q->len - q->off;
}

static void input_closed(uv_handle_t *h)
{
    struct scmd *c = h->data;
    scmd_handle_closed(c);
}

static void queue_drop(struct scmd *c, struct scmd_input *q)
{
    if (q->poll_open) {
        uv_close((uv_handle_t *)&q->poll, input_closed);
        q->poll_open = q->polling = false;
    }
    if (q->fd >= 0)
        close(q->fd);
    q->fd = -1;
    free(q->buf);
    q->buf = NULL;
    q->len = q->off = q->cap = 0;
}

/* stdin closed here and in init (init keeps a copy of every pipe's end for ATTACH). */
static int close_stdin_now(struct scmd *c, agent_fn fn, void *user, err_t *err)
{
    queue_drop(c, queue_of(c, false));
    if (c->stdin_fd >= 0)
        close(c->stdin_fd);
    c->stdin_fd = -1;
    return scmd_request_answered(c, PROTO_STDIN_CLOSE, 0, false, fn, user, err);
}

/* Writes what the fd takes now. 0: all of it or EAGAIN (the rest stays queued); -1 with err. */
static int flush(struct scmd *c, struct scmd_input *q, err_t *err)
{
    while (queued(q) > 0) {
        ssize_t w = write(q->fd, q->buf + q->off, queued(q));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w < 0) {
            int e = errno;
            size_t lost = queued(q);
            q->off = q->len = 0;
            return err_set(err, e, "process %u: input (%zu bytes not written)", c->pid, lost);
        }
        q->off += (size_t)w;
    }
    q->off = q->len = 0;
    return 0;
}

static void on_writable(uv_poll_t *p, int status, int events)
{
    struct scmd *c = p->data;
    struct scmd_input *q = p == &c->input[0].poll ? &c->input[0] : &c->input[1];
    err_t err;
    int rc = status < 0 ? err_set(&err, EPIPE, "process %u: input fd failed", c->pid)
                        : flush(c, q, &err);
    if (rc < 0)
        q->off = q->len = 0; /* the reader is gone: what waited cannot be written */
    if (queued(q) > 0)
        return;
    uv_poll_stop(&q->poll);
    q->polling = false;
    if (q->close_after) {
        q->close_after = false;
        if (close_stdin_now(c, NULL, NULL, &err) < 0)
            fprintf(stderr, "hutch serve: %s: close stdin of %u: %s\n", c->sb->id, c->pid, err.msg);
    }
    if (c->input_drained) {
        scmd_drained_fn fn = c->input_drained;
        c->input_drained = NULL;
        fn(c, c->input_drained_user);
    }
}

/* The queue's own fd and poll, made on its first use. */
static int queue_open(struct scmd *c, struct scmd_input *q, bool to_pty, err_t *err)
{
    if (q->fd >= 0)
        return 0;
    int src = to_pty ? c->out_fd[2] : c->stdin_fd;
    if (src < 0)
        return err_set(err, EPIPE, "process %u has no %s open", c->pid, to_pty ? "pty" : "stdin");
    q->fd = fcntl(src, F_DUPFD_CLOEXEC, 3);
    if (q->fd < 0)
        return err_set(err, errno, "process %u: input fd", c->pid);
    if (uv_poll_init(c->sb->d->loop, &q->poll, q->fd) < 0) {
        close(q->fd);
        q->fd = -1;
        return err_set(err, EIO, "process %u: poll its input", c->pid);
    }
    q->poll.data = c;
    q->poll_open = true;
    c->open_handles++;
    return 0;
}

int scmd_input(struct scmd *c, bool to_pty, const uint8_t *data, size_t len, err_t *err)
{
    struct scmd_input *q = queue_of(c, to_pty);
    if (!to_pty && (c->stdin_fd < 0 || q->close_after))
        return err_set(err, EPIPE, "process %u has no stdin open", c->pid);
    if (queue_open(c, q, to_pty, err) < 0)
        return -1;
    if (queued(q) + len > SCMD_INPUT_MAX)
        return err_set(err, EAGAIN, "process %u: %zu bytes of input wait already (at most %u)",
                       c->pid, queued(q), SCMD_INPUT_MAX);
    size_t done = 0;
    while (queued(q) == 0 && done < len) { /* nothing waits: straight to the fd */
        ssize_t w = write(q->fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w < 0)
            return err_set(err, errno, "process %u: input", c->pid);
        done += (size_t)w;
    }
    if (done == len)
        return 0;
    size_t rest = len - done;
    if (q->off > 0) { /* compact before growing */
        memmove(q->buf, q->buf + q->off, queued(q));
        q->len -= q->off;
        q->off = 0;
    }
    if (q->len + rest > q->cap) {
        size_t cap = q->cap ? q->cap : 64u << 10;
        while (cap < q->len + rest)
            cap *= 2;
        uint8_t *grown = realloc(q->buf, cap);
        if (!grown)
            return err_set(err, ENOMEM, "process %u: input queue", c->pid);
        q->buf = grown;
        q->cap = cap;
    }
    memcpy(q->buf + q->len, data + done, rest);
    q->len += rest;
    if (!q->polling) {
        uv_poll_start(&q->poll, UV_WRITABLE, on_writable);
        q->polling = true;
    }
    return 0;
}

bool scmd_input_congested(const struct scmd *c)
{
    return queued(&c->input[0]) + queued(&c->input[1]) > SCMD_INPUT_HIGH;
}

void scmd_input_on_drained(struct scmd *c, scmd_drained_fn fn, void *user)
{
    c->input_drained = fn;
    c->input_drained_user = user;
}

int scmd_close_stdin(struct scmd *c, agent_fn fn, void *user, err_t *err)
{
    struct scmd_input *q = queue_of(c, false);
    if (queued(q) > 0) { /* after what waits */
        q->close_after = true;
        return 1;
    }
    return close_stdin_now(c, fn, user, err);
}

void scmd_input_init(struct scmd *c)
{
    for (unsigned i = 0; i < 2; i++)
        c->input[i].fd = -1;
}

void scmd_input_release(struct scmd *c)
{
    if (c->input_drained) { /* a writer that waits learns that nothing will be read any more */
        scmd_drained_fn fn = c->input_drained;
        c->input_drained = NULL;
        fn(c, c->input_drained_user);
    }
    for (unsigned i = 0; i < 2; i++) {
        c->input[i].close_after = false;
        queue_drop(c, &c->input[i]);
    }
}
