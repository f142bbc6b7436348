#include "jail/control.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int control_send(int sock, const struct control_msg *msg, int fd)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof *msg};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof *msg)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n >= 0)
            errno = EMSGSIZE;
        return -1;
    }
}

int control_send_simple(int sock, enum control_type type, int code, int sig, const char *text)
{
    struct control_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = type;
    msg.code = code;
    msg.sig = sig;
    if (text)
        snprintf(msg.text, sizeof msg.text, "%s", text);
    return control_send(sock, &msg, -1);
}

int control_recv(int sock, struct control_msg *msg, int *fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = msg, .iov_len = sizeof *msg};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (fd)
        *fd = -1;
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    int got_fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            if (got_fd < 0 && fd)
                got_fd = f;
            else
                close(f);
        }
    }
    if (n == 0) {
        if (got_fd >= 0)
            close(got_fd);
        /* SOCK_SEQPACKET delivers an empty datagram as a 0-byte read, like EOF: a peer that is
         * still there sent a malformed message, and must not make the host think it hung up. */
        struct pollfd pfd = {.fd = sock, .events = POLLRDHUP};
        if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLRDHUP)))
            return 0;
        errno = EBADMSG;
        return -1;
    }
    /* A short or truncated message, or an unknown type, is never trusted. */
    if (n != (ssize_t)sizeof *msg || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        msg->type == 0 || msg->type >= CONTROL_TYPE_MAX) {
        if (got_fd >= 0)
            close(got_fd);
        errno = EBADMSG;
        return -1;
    }
    msg->text[sizeof msg->text - 1] = '\0';
    if (fd)
        *fd = got_fd;
    else if (got_fd >= 0)
        close(got_fd);
    return 1;
}

void control_die(int sock, int errnum, const char *fmt, ...)
{
    struct control_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = CONTROL_SETUP_ERROR;
    msg.code = errnum;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg.text, sizeof msg.text, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : strnlen(msg.text, sizeof msg.text);
    if (errnum && len < sizeof msg.text)
        snprintf(msg.text + len, sizeof msg.text - len, ": %s", strerror(errnum));
    control_send(sock, &msg, -1);
    _exit(1);
}
