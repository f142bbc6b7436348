/* hutch-kernel-stub: how a code context's kernel is started from a warm zygote inside its
 * sandbox (src/interp/README.md, "Zygotes").
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
 * differs.
 *
 *     hutch-kernel-stub --host -- PROGRAM [ARG...]
 *
 * The same with the host's zygote (src/interp/python_zygote.py --host), which forks outside any
 * sandbox and enters this one (src/jail/enter.h): the stub makes a pipe whose write end is its
 * fd 3 and says {"type":"handover"} on its stdout; the daemon then has the zygote fork a kernel
 * that takes the stub's fds 0 to 3 (pidfd_getfd: the zygote is host root) and, once inside and
 * confined, writes its pid on fd 3. From there on the stub waits for that kernel as above. A
 * "cold" line on its stdin (the daemon's: no fork came of it), or no pid within a minute, and it
 * execs PROGRAM.
 *
 * Small and static, with no library: it runs in every sandbox. */
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

#define HOST_HANDOVER_FD 3 /* the write end the kernel says its pid on */
#define HOST_MESSAGE_FD  4 /* the read end the kernel reads our cwd and environment from */
#define HOST_WAIT_MS     60000

/* Both ends of a new pipe moved to `at` (the kernel's end) and above it (ours), close-on-exec;
 * ours, or -1. */
static int pipe_at(int at, bool kernel_writes)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    int kernel_end = fcntl(p[kernel_writes ? 1 : 0], F_DUPFD_CLOEXEC, HOST_MESSAGE_FD + 1);
    int ours = fcntl(p[kernel_writes ? 0 : 1], F_DUPFD_CLOEXEC, HOST_MESSAGE_FD + 1);
    close(p[0]);
    close(p[1]);
    if (kernel_end < 0 || ours < 0 || dup3(kernel_end, at, O_CLOEXEC) < 0)
        return -1;
    close(kernel_end);
    return ours;
}

/* The host's zygote: the kernel's pid once it is in, or 0 (then the caller starts cold). Our cwd
 * and environment go to the kernel on a pipe of their own, never through the zygote, whose
 * memory every later kernel is a copy of. */
static long host_handover(void)
{
    static char msg[MESSAGE_MAX];
    size_t len = build_message(msg, sizeof msg);
    int r = len ? pipe_at(HOST_HANDOVER_FD, true) : -1;
    int w = r >= 0 ? pipe_at(HOST_MESSAGE_FD, false) : -1;
    if (w < 0)
        return 0;
    /* less than a pipe holds (64 KiB): written whole before anyone reads */
    bool sent = write(w, msg, len) == (ssize_t)len;
    close(w);
    if (!sent)
        return 0;
    static const char line[] = "{\"type\":\"handover\"}\n";
    if (write(1, line, sizeof line - 1) != (ssize_t)(sizeof line - 1))
        return 0;
    char buf[32];
    size_t n = 0;
    for (;;) {
        struct pollfd fds[2] = {{r, POLLIN, 0}, {0, POLLIN, 0}};
        int rc = poll(fds, 2, HOST_WAIT_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        /* The pipe first: once the kernel is in, stdin is its, never read here again. */
        if (fds[0].revents) {
            ssize_t got = read(r, buf + n, sizeof buf - 1 - n);
            if (got <= 0)
                break;
            n += (size_t)got;
            buf[n] = '\0';
            char *nl = strchr(buf, '\n'), *end;
            long pid = nl ? strtol(buf, &end, 10) : 0;
            if (nl && end == nl && pid > 1) {
                close(r);
                close(HOST_HANDOVER_FD);
                close(HOST_MESSAGE_FD);
                return pid;
            }
            if (nl || n == sizeof buf - 1)
                break;
            continue;
        }
        if (fds[1].revents) {
            /* the daemon's "cold" (nothing came of the fork), read to its end: the line is not
             * the kernel's to see */
            char c;
            while (read(0, &c, 1) == 1 && c != '\n')
                ;
            break;
        }
    }
    close(r);
    close(HOST_HANDOVER_FD);
    close(HOST_MESSAGE_FD);
    return 0;
}

int main(int argc, char **argv)
{
    char *end = "";
    bool host = argc >= 4 && strcmp(argv[1], "--host") == 0;
    long zygote_pid = !host && argc >= 5 ? strtol(argv[2], &end, 10) : 0;
    if (host ? strcmp(argv[2], "--") != 0
             : (argc < 5 || *end || zygote_pid <= 1 || strcmp(argv[3], "--") != 0)) {
        fprintf(stderr, "usage: hutch-kernel-stub ZYGOTE ZYGOTE_PID -- PROGRAM [ARG...]\n"
                        "       hutch-kernel-stub --host -- PROGRAM [ARG...]\n");
        return 2;
    }
    char **program = argv + (host ? 3 : 4);
    int s = -1;
    long pid = 0;
    if (host) {
        if ((pid = host_handover()) <= 0)
            cold_start(program);
    } else {
        static char msg[MESSAGE_MAX];
        size_t len = build_message(msg, sizeof msg);
        s = len ? connect_zygote(argv[1], (pid_t)zygote_pid) : -1;
        if (s < 0 || send_handover(s, msg, len) < 0)
            cold_start(program);
    }
    char word[16];
    /* Signals wait in a signalfd from here: one that came before the kernel's pid is known is
     * passed on once it is. */
    sigset_t relayed;
    sigemptyset(&relayed);
    int relay[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof relay / sizeof *relay; i++)
        sigaddset(&relayed, relay[i]);
    sigprocmask(SIG_BLOCK, &relayed, NULL);
    int sfd = signalfd(-1, &relayed, SFD_CLOEXEC);
    if (!host &&
        (read_word(s, word, sizeof word, &pid) != 1 || strcmp(word, "pid") != 0 || pid <= 1)) {
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
