#include "jail/control.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fds.h"
#include "util/strfmt.h"

int control_send_fds(int sock, const struct control_msg *msg, const int *fds, size_t n_fds)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof *msg};
    union {
        char buf[CMSG_SPACE(sizeof(int) * CONTROL_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n_fds > CONTROL_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    if (n_fds > 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
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

int control_send(int sock, const struct control_msg *msg, int fd)
{
    return control_send_fds(sock, msg, &fd, fd >= 0 ? 1 : 0);
}

int control_send_simple(int sock, enum control_type type, int code, int sig, const char *text)
{
    struct control_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = type;
    msg.code = code;
    msg.sig = sig;
    if (text)
        strfmt_text_append(msg.text, sizeof msg.text, "%s", text);
    return control_send(sock, &msg, -1);
}

static void close_all(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

int control_recv_fds(int sock, struct control_msg *msg, int *fds, size_t max_fds, size_t *n_fds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * CONTROL_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = msg, .iov_len = sizeof *msg};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    *n_fds = 0;
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    /* Every fd that arrived is either handed out or closed: a hostile peer cannot make us
     * leak them. */
    size_t got = fd_take_rights(&mh, fds, max_fds);
    if (n == 0) {
        close_all(fds, got);
        /* SOCK_SEQPACKET delivers an empty datagram as a 0-byte read, like EOF: a peer that is
         * still there sent a malformed message, and must not make the host think it hung up. */
        if (fd_peer_hung_up(sock))
            return 0;
        errno = EBADMSG;
        return -1;
    }
    /* A short or truncated message, or an unknown type, is never trusted. */
    if (n != (ssize_t)sizeof *msg || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        msg->type == 0 || msg->type >= CONTROL_TYPE_MAX) {
        close_all(fds, got);
        errno = EBADMSG;
        return -1;
    }
    msg->text[sizeof msg->text - 1] = '\0';
    *n_fds = got;
    return 1;
}

int control_recv(int sock, struct control_msg *msg, int *fd)
{
    int fds[1];
    size_t n;
    int rc = control_recv_fds(sock, msg, fds, fd ? 1 : 0, &n);
    if (fd)
        *fd = rc == 1 && n == 1 ? fds[0] : -1;
    return rc;
}

void control_die(int sock, int errnum, const char *fmt, ...)
{
    struct control_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = CONTROL_SETUP_ERROR;
    msg.code = errnum;
    /* As err_set: ": strerror" is kept whole, a message too long for the rest ends in "...". */
    char suffix[128] = "";
    if (errnum)
        strfmt_text_append(suffix, sizeof suffix, ": %s", strerror(errnum));
    va_list ap;
    va_start(ap, fmt);
    strfmt_text_vappend(msg.text, sizeof msg.text - strlen(suffix), fmt, ap);
    va_end(ap);
    strfmt_text_append(msg.text, sizeof msg.text, "%s", suffix);
    control_send(sock, &msg, -1);
    _exit(1);
}
