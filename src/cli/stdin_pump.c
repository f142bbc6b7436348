#include "cli/stdin_pump.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int stdin_pump_open(struct stdin_pump *p, int source, bool consumed, err_t *err)
{
    p->source = source;
    p->done = false;
    p->child_fd = p->pipe_w = p->pipe_r = p->null_fd = -1;
    p->start = 0;
    p->fed = p->taken = 0;
    p->len = p->off = 0;
    struct stat st;
    if (consumed || fstat(source, &st) < 0 ||
        (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))) {
        /* A /dev/null of its own: the caller's, shared, would take the program's O_NONBLOCK. */
        p->mode = STDIN_NULL;
        p->done = true;
        p->child_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        return p->child_fd < 0 ? err_set(err, errno, "open /dev/null") : 0;
    }
    p->mode = S_ISREG(st.st_mode) ? STDIN_FILE : S_ISFIFO(st.st_mode) ? STDIN_PIPE : STDIN_STREAM;
    if (p->mode == STDIN_FILE && (p->start = lseek(source, 0, SEEK_CUR)) < 0)
        p->mode = STDIN_STREAM;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return err_set(err, errno, "stdin pipe");
    p->child_fd = fds[0];
    p->pipe_w = fds[1];
    if (fcntl(p->pipe_w, F_SETFL, O_NONBLOCK) < 0)
        goto fail;
    /* One page (the least it takes): the pipe then polls writable only when it is empty, that
     * is once the program has read all that was teed into it, and only then is it drained. */
    if (p->mode == STDIN_PIPE && (fcntl(p->pipe_w, F_SETPIPE_SZ, 1) < 0 ||
                                  (p->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0))
        goto fail;
    return 0;
fail:
    err_set(err, errno, "stdin pipe");
    stdin_pump_close(p);
    return -1;
}

void stdin_pump_started(struct stdin_pump *p)
{
    if (p->mode == STDIN_FILE)
        p->pipe_r = p->child_fd;
    else if (p->child_fd >= 0)
        close(p->child_fd);
    p->child_fd = -1;
}

void stdin_pump_events(const struct stdin_pump *p, struct pollfd *src, struct pollfd *dst)
{
    *src = (struct pollfd){.fd = -1, .events = POLLIN};
    *dst = (struct pollfd){.fd = -1, .events = POLLOUT};
    if (p->pipe_w < 0)
        return;
    switch (p->mode) {
    case STDIN_FILE: /* a regular file is always readable */
        dst->fd = p->pipe_w;
        break;
    case STDIN_PIPE:
        if (p->fed > 0)
            dst->fd = p->pipe_w;
        else if (!p->done)
            src->fd = p->source;
        break;
    case STDIN_STREAM:
        if (p->len > p->off)
            dst->fd = p->pipe_w;
        else if (!p->done)
            src->fd = p->source;
        break;
    case STDIN_NULL:
        break;
    }
}

/* Writes what is buffered, without blocking (the pipe is non-blocking). */
static void feed_buffered(struct stdin_pump *p)
{
    if (p->len == p->off)
        return;
    ssize_t n = write(p->pipe_w, p->buf + p->off, p->len - p->off);
    if (n > 0) {
        p->off += (size_t)n;
        p->fed += (uint64_t)n;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        p->done = true; /* EPIPE: the program closed its stdin */
        p->len = p->off = 0;
    }
}

static void file_run(struct stdin_pump *p, short dst_revents)
{
    if (!dst_revents)
        return;
    if (p->len == p->off && !p->done) {
        /* pread: the caller's offset moves once, at the end, by what the program took */
        ssize_t n = pread(p->source, p->buf, sizeof p->buf, p->start + (off_t)p->taken);
        if (n > 0) {
            p->len = (size_t)n;
            p->off = 0;
            p->taken += (uint64_t)n;
        } else if (n == 0 || errno != EINTR) {
            p->done = true;
        }
    }
    feed_buffered(p);
    if (p->done && p->len == p->off)
        close_fd(&p->pipe_w);
}

/* Drops n bytes from the head of the source pipe: the bytes the program read from its copy.
 * splice, not read: it never blocks, even if another reader of the caller's pipe took them. */
static void pipe_drain(struct stdin_pump *p, uint64_t n)
{
    while (n > 0) {
        ssize_t k = splice(p->source, NULL, p->null_fd, NULL, n, SPLICE_F_NONBLOCK);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        n -= (uint64_t)k;
    }
}

static uint64_t pipe_unread(int fd)
{
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? (uint64_t)n : 0;
}

static void stream_run(struct stdin_pump *p, short src_revents, short dst_revents);

static void pipe_run(struct stdin_pump *p, short src_revents, short dst_revents)
{
    if (p->fed > 0) {
        if (dst_revents & POLLERR) {
            /* the program closed its stdin, perhaps with some of the page unread */
            uint64_t unread = pipe_unread(p->pipe_w);
            pipe_drain(p, p->fed > unread ? p->fed - unread : 0);
            p->fed = 0;
            p->done = true;
        } else if (dst_revents & POLLOUT) {
            pipe_drain(p, p->fed); /* empty: the program read it all */
            p->taken += p->fed;
            p->fed = 0;
            if (p->taken >= STDIN_EXACT_MAX) {
                /* A page per round costs about 50 us: a program that reads this much wants
                 * speed, so from here on the source is read ahead, a pipe's worth at a time. */
                p->mode = STDIN_STREAM;
                fcntl(p->pipe_w, F_SETPIPE_SZ, (int)sizeof p->buf);
                return;
            }
        }
    }
    if (p->fed == 0 && !p->done) {
        ssize_t n = tee(p->source, p->pipe_w, sizeof p->buf, SPLICE_F_NONBLOCK);
        if (n > 0) {
            p->fed = (uint64_t)n;
        } else if (n < 0 && errno == EINVAL) {
            p->mode = STDIN_STREAM; /* a FIFO that tee does not take: read it ahead instead */
            stream_run(p, src_revents, dst_revents);
            return;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            p->done = true; /* end of the source, or EPIPE */
        }
    }
    if (p->done && p->fed == 0)
        close_fd(&p->pipe_w);
}

static void stream_run(struct stdin_pump *p, short src_revents, short dst_revents)
{
    if (p->len == p->off && !p->done && (src_revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = read(p->source, p->buf, sizeof p->buf);
        if (n > 0) {
            p->len = (size_t)n;
            p->off = 0;
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            p->done = true;
        }
    }
    feed_buffered(p);
    if (p->done && p->len == p->off)
        close_fd(&p->pipe_w);
}

void stdin_pump_run(struct stdin_pump *p, short src_revents, short dst_revents)
{
    if (p->pipe_w < 0)
        return;
    switch (p->mode) {
    case STDIN_FILE:
        file_run(p, dst_revents);
        break;
    case STDIN_PIPE:
        pipe_run(p, src_revents, dst_revents);
        break;
    case STDIN_STREAM:
        stream_run(p, src_revents, dst_revents);
        break;
    case STDIN_NULL:
        break;
    }
}

void stdin_pump_close(struct stdin_pump *p)
{
    if (p->mode == STDIN_FILE && p->pipe_r >= 0) {
        uint64_t unread = pipe_unread(p->pipe_r);
        if (p->fed > unread)
            lseek(p->source, p->start + (off_t)(p->fed - unread), SEEK_SET);
    }
    if (p->mode == STDIN_PIPE && p->fed > 0 && p->pipe_w >= 0) {
        uint64_t unread = pipe_unread(p->pipe_w);
        pipe_drain(p, p->fed > unread ? p->fed - unread : 0);
    }
    p->fed = 0;
    close_fd(&p->child_fd);
    close_fd(&p->pipe_w);
    close_fd(&p->pipe_r);
    close_fd(&p->null_fd);
}
