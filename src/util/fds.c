#include "util/fds.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void fd_close_all_except(int *keep, size_t n)
{
    /* Insertion sort: n is a handful (a few more with --file). */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned from = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 0 || (unsigned)keep[i] < from)
            continue;
        if ((unsigned)keep[i] > from)
            close_range(from, (unsigned)keep[i] - 1, 0);
        from = (unsigned)keep[i] + 1;
    }
    close_range(from, ~0U, 0);
}

size_t fd_take_rights(struct msghdr *mh, int *out, size_t max)
{
    size_t got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (got < max)
                out[got++] = fd;
            else
                close(fd);
        }
    }
    return got;
}

int fd_peer_hung_up(int sock)
{
    struct pollfd pfd = {.fd = sock, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLRDHUP));
}
