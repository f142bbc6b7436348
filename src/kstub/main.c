/* hutch-kernel-stub: how a code context's kernel is started from a warm zygote inside its
 * sandbox (src/interp/PROTOCOL.md, "Zygotes").
 *
 *     hutch-kernel-stub ZYGOTE ZYGOTE_PID -- PROGRAM [ARG...]
 *
 * The daemon starts this as the context's command (its own command cgroup, its stdin and
 * stdout pipes). It connects to the zygote named ZYGOTE (the unix socket
 * /tmp/.hutch-zygote-ZYGOTE, in the sandbox's own /tmp: an abstract name would be simpler, but
 * every command is a Landlock domain of its own, scoped, which cannot reach another's abstract
 * sockets), checks that the socket's listener is the zygote the daemon started (ZYGOTE_PID, by
 * SO_PEERCRED: a process of the sandbox may put a socket of its own in that place, and would get
 * the context's pipes), and hands it its cwd, its
 * environment and its fds 0, 1 and 2; the zygote forks a kernel that takes them, and answers
 * with the kernel's pid. The daemon then moves that kernel into this command's cgroup (it says
 * its pid in its ready message), so that killing the command takes the kernel and its whole
 * tree. The stub stays as the command's first process and ends as the kernel ended; the signals
 * it gets it tries to pass on (Landlock's signal scope may refuse: the daemon signals a forked
 * kernel itself, by its pidfd).
 *
 * Without a zygote (none yet, or it went), or when anything of the handover fails before the
 * zygote took the fds, it execs PROGRAM itself: the kernel then starts cold, and nothing else
 * differs. Small and static, with no library: it runs in every sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MESSAGE_MAX (60u << 10) /* cwd and environment, in one datagram */

extern char **environ;

static void cold_start(char **argv)
{
    execv(argv[0], argv);
    fprintf(stderr, "hutch-kernel-stub: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* cwd NUL, then every NAME=VALUE NUL; 0 when it does not fit. */
static size_t build_message(char *buf, size_t cap)
{
    if (!getcwd(buf, cap))
        return 0;
    size_t n = strlen(buf) + 1;
    for (char **e = environ; *e; e++) {
        size_t len = strlen(*e) + 1;
        if (n + len > cap)
            return 0;
        memcpy(buf + n, *e, len);
        n += len;
    }
    return n;
}

static int connect_zygote(const char *name, pid_t zygote_pid)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int n = snprintf(addr.sun_path, sizeof addr.sun_path, "/tmp/.hutch-zygote-%s", name);
    if (n < 0 || (size_t)n >= sizeof addr.sun_path)
        return -1;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ucred peer;
    socklen_t len = sizeof peer;
    /* the listener's credentials, as they were when it listened: only the zygote's will do */
    if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        getsockopt(s, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 || peer.pid != zygote_pid) {
        close(s);
        return -1;
    }
    return s;
}

static int send_handover(int s, const char *msg, size_t len)
{
    int fds[3] = {0, 1, 2};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof fds)];
    } control = {0};
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    return sendmsg(s, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* "pid N", "exit N" or "signal N" from the zygote; 0 at its end, -1 on error. */
static int read_word(int s, char *word, size_t wsize, long *value)
{
    char buf[64];
    ssize_t r;
    do
        r = recv(s, buf, sizeof buf - 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return (int)r;
    buf[r] = '\0';
    char *sp = strchr(buf, ' ');
    if (!sp || (size_t)(sp - buf) >= wsize)
        return -1;
    memcpy(word, buf, (size_t)(sp - buf));
    word[sp - buf] = '\0';
    char *end;
    *value = strtol(sp + 1, &end, 10);
    return end != sp + 1 ? 1 : -1;
}

static void end_as(int signo, int code)
{
    if (signo > 0 && signo < 65) {
        signal(signo, SIG_DFL);
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_UNBLOCK, &all, NULL);
        raise(signo);
    }
    _exit(code);
}

int main(int argc, char **argv)
{
    char *end;
    long zygote_pid = argc >= 5 ? strtol(argv[2], &end, 10) : 0;
    if (argc < 5 || *end || zygote_pid <= 1 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: hutch-kernel-stub ZYGOTE ZYGOTE_PID -- PROGRAM [ARG...]\n");
        return 2;
    }
    char **program = argv + 4;
    static char msg[MESSAGE_MAX];
    size_t len = build_message(msg, sizeof msg);
    int s = len ? connect_zygote(argv[1], (pid_t)zygote_pid) : -1;
    if (s < 0 || send_handover(s, msg, len) < 0)
        cold_start(program);
    char word[16];
    long pid = 0;
    /* Signals wait in a signalfd from here: one that came before the kernel's pid is known is
     * passed on once it is. */
    sigset_t relayed;
    sigemptyset(&relayed);
    int relay[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof relay / sizeof *relay; i++)
        sigaddset(&relayed, relay[i]);
    sigprocmask(SIG_BLOCK, &relayed, NULL);
    int sfd = signalfd(-1, &relayed, SFD_CLOEXEC);
    if (read_word(s, word, sizeof word, &pid) != 1 || strcmp(word, "pid") != 0 || pid <= 1) {
        /* the zygote took nothing it forked from: start cold, with the fds still ours */
        close(s);
        sigprocmask(SIG_UNBLOCK, &relayed, NULL);
        cold_start(program);
    }
    /* Only the kernel holds the command's pipes now: their end is its end. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++)
        if (null >= 0)
            dup2(null, fd);
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    int signo = 0, code = 0;
    bool kernel_gone = false;
    /* Until the zygote says how the kernel ended (it reaps it), or, without the zygote, until
     * the kernel is gone (its pidfd; the status is then unknown: 0). */
    while (s >= 0 || (pidfd >= 0 && !kernel_gone)) {
        struct pollfd p[3] = {
            {sfd, POLLIN, 0}, {s, POLLIN, 0}, {kernel_gone ? -1 : pidfd, POLLIN, 0}};
        /* once the kernel is gone, its status comes at once or never */
        int rc = poll(p, 3, kernel_gone ? 1000 : -1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == sizeof si && !kernel_gone)
                kill((pid_t)pid, (int)si.ssi_signo);
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            long v;
            int r = read_word(s, word, sizeof word, &v);
            if (r == 1 && strcmp(word, "exit") == 0) {
                code = (int)v;
                break;
            }
            if (r == 1 && strcmp(word, "signal") == 0) {
                signo = (int)v;
                break;
            }
            if (r <= 0) {
                close(s);
                s = -1;
            }
        }
        if (p[2].revents & (POLLIN | POLLHUP))
            kernel_gone = true;
    }
    end_as(signo, code);
}
