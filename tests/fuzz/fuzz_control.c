/* control_recv() against a hostile sandbox: the input is a list of datagrams sent through a real
 * SOCK_SEQPACKET socketpair, each received and checked before the next is sent. A record is
 *
 *     flags (1 byte)  length (2 bytes, little-endian)  payload (length bytes, cut at the end)
 *
 * flags 0x20: pad or cut the payload to exactly sizeof(struct control_msg), so well-formed
 *             messages are common;
 * flags 0x40: call control_recv with fd = NULL;
 * flags 0x80: attach (flags & 7) fds (SCM_RIGHTS, /dev/null), to check none ever leaks.
 * At the end the sending side is closed, and control_recv must report EOF. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "jail/control.h"

#define MAX_RECORDS 64
#define MAX_FDS     15
#define FD_WINDOW   32 /* fds above the lowest free one that are watched for leaks */

static int send_datagram(int sock, const void *buf, size_t len, int nfds)
{
    int fds[MAX_FDS];
    for (int i = 0; i < nfds; i++) {
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        fuzz_assert(fds[i] >= 0);
    }
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    /* The datagram holds its own references; ours go now. */
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return n == (ssize_t)len ? 0 : -1;
}

/* Bit i set when fd base+i is open. */
static unsigned open_fds(int base)
{
    unsigned mask = 0;
    for (int i = 0; i < FD_WINDOW; i++)
        if (fcntl(base + i, F_GETFD) >= 0)
            mask |= 1u << i;
    return mask;
}

static int lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fuzz_assert(fd >= 0);
    close(fd);
    return fd;
}

static void check_one(int receiver, const unsigned char *payload, size_t len, int nfds, int want_fd)
{
    int base = lowest_free_fd();
    unsigned before = open_fds(base);

    struct control_msg msg;
    memset(&msg, 0x5a, sizeof msg);
    int fd = -2;
    errno = 0;
    int rc = control_recv(receiver, &msg, want_fd ? &fd : NULL);

    struct control_msg sent;
    uint32_t type = 0;
    if (len >= sizeof type)
        memcpy(&type, payload, sizeof type);
    /* More fds than control_recv has room for arrive cut (MSG_CTRUNC): refused too. */
    int well_formed = len == sizeof sent && type != 0 && type < CONTROL_TYPE_MAX && nfds <= CONTROL_MAX_FDS;
    if (well_formed) {
        fuzz_assert(rc == 1);
        memcpy(&sent, payload, sizeof sent);
        sent.text[sizeof sent.text - 1] = '\0';
        fuzz_assert(msg.type == sent.type && msg.code == sent.code && msg.sig == sent.sig);
        fuzz_assert(memcmp(msg.text, sent.text, sizeof msg.text) == 0);
        fuzz_assert(memchr(msg.text, '\0', sizeof msg.text) != NULL);
        if (want_fd) {
            if (nfds > 0) {
                fuzz_assert(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC);
                close(fd);
            } else {
                fuzz_assert(fd == -1);
            }
        }
    } else {
        fuzz_assert(rc == -1 && errno == EBADMSG);
        fuzz_assert(!want_fd || fd == -1);
    }
    /* Every fd that arrived was handed over (and closed above) or closed by control_recv. */
    fuzz_assert(open_fds(base) == before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    fuzz_assert(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    /* Room for any record: a payload is at most 65535 bytes. */
    int sndbuf = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

    unsigned char padded[sizeof(struct control_msg)];
    size_t off = 0;
    for (int records = 0; off < size && records < MAX_RECORDS; records++) {
        unsigned flags = data[off++];
        size_t len = 0;
        if (off < size)
            len = data[off++];
        if (off < size)
            len |= (size_t)data[off++] << 8;
        if (len > size - off)
            len = size - off;
        const unsigned char *payload = data + off;
        off += len;
        if (flags & 0x20) {
            memset(padded, 0, sizeof padded);
            memcpy(padded, payload, len < sizeof padded ? len : sizeof padded);
            payload = padded;
            len = sizeof padded;
        }
        int nfds = (flags & 0x80) ? (int)(flags & 0x0f) : 0;
        if (send_datagram(sv[1], payload, len, nfds) < 0)
            continue; /* too big for the socket: nothing was sent */
        check_one(sv[0], payload, len, nfds, !(flags & 0x40));
    }

    close(sv[1]);
    struct control_msg msg;
    int fd = -2;
    fuzz_assert(control_recv(sv[0], &msg, &fd) == 0 && fd == -1);
    fuzz_assert(control_recv(sv[0], &msg, NULL) == 0);
    close(sv[0]);
    return 0;
}
