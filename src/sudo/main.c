/* hutch's sudo, the program a sandbox's users run as `sudo` (bound read-only at
 * /usr/local/bin/sudo in every sandbox of `hutch serve`). It is no setuid program and gains no
 * privilege itself: it asks init, over the sandbox's sudo socket, to start the command as root
 * (or as the user), passing its own stdin, stdout and stderr, forwards the signals it gets to the
 * command, and ends as the command ended. README.md says why that is the sandbox's root's power
 * and nothing more. Built alone and static (the Makefile's build/hutch-sudo): it runs with
 * whatever libc the sandbox's root has, or none. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto/proto.h"
#include "proto/proto_sudo.h"
#include "sudo/options.h"
#include "sudo/tty_relay.h"

extern char **environ;

static const char usage[] =
    "usage: sudo -h | -K | -k | -V\n"
    "usage: sudo -v [-nS] [-u user]\n"
    "usage: sudo -l [-nS] [-u user] [command [arg ...]]\n"
    "usage: sudo [-EHnS] [-D directory] [-u user] [VAR=value] [-i | -s] [command [arg ...]]\n";

/* Signals the command gets when sudo does (a terminal's ^C reaches sudo, whose group has the
 * terminal; the command leads a session of its own). */
static const int relayed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

/* On a terminal, the command's own pty (tty_relay.h); restored before any end of ours. */
static struct tty_relay relay;

static void blocked_signals(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof relayed / sizeof relayed[0]; i++)
        sigaddset(set, relayed[i]);
    sigaddset(set, SIGWINCH);
}

/* After the relay began: it ends (the terminal as it was) before "sudo: MESSAGE" is said. */
static _Noreturn __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
    tty_relay_end(&relay);
    va_list ap;
    va_start(ap, fmt);
    fputs("sudo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    _exit(1);
}

static char *read_passwd(void)
{
    static char buf[65536];
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

/* Blocking, unlike proto_send: a request waits for room in init's socket. */
static int send_all(int sock, const void *buf, size_t len, const int *fds, size_t n_fds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * PROTO_SUDO_FDS)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n_fds) {
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)len ? 0 : -1;
}

static int connect_service(void)
{
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", PROTO_SUDO_SOCKET);
    if (connect(sock, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(sock);
        errno = e;
        return -1;
    }
    proto_socket_tune(sock);
    return sock;
}

static _Noreturn void end_as(int32_t code, uint32_t sig)
{
    tty_relay_end(&relay);
    if (sig > 0 && sig < 65) {
        /* As sudo does: the command's death by a signal is ours too (no core: a dump of sudo
         * tells nothing about the command). */
        signal((int)sig, SIG_DFL);
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_UNBLOCK, &all, NULL);
        kill(getpid(), (int)sig);
        _exit(128 + (int)sig);
    }
    _exit(code >= 0 && code <= 255 ? code : 1);
}

/* One request, from start to end. Returns only when init said busy (EAGAIN): ask again. */
static void run(const uint8_t *req, size_t len, const int stdio[3], const char *command)
{
    int sock = connect_service();
    if (sock < 0)
        fail("cannot reach the sandbox's sudo service (%s): %s", PROTO_SUDO_SOCKET,
             strerror(errno));
    if (send_all(sock, req, len, stdio, 3) < 0)
        fail("%s", errno == EMSGSIZE ? "argument list too long" : strerror(errno));
    sigset_t set;
    blocked_signals(&set);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    static uint8_t buf[PROTO_MAX_TO_HOST];
    for (;;) {
        struct pollfd p[4] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        size_t n_relay = tty_relay_poll(&relay, &p[2]);
        if (poll(p, 2 + n_relay, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        tty_relay_ready(&relay, &p[2], n_relay);
        struct signalfd_siginfo si;
        if (sfd < 0 || !(p[1].revents & POLLIN) || read(sfd, &si, sizeof si) != sizeof si) {
            /* no signal */
        } else if (si.ssi_signo == SIGWINCH) {
            tty_relay_winch(&relay);
        } else {
            uint8_t out[64];
            struct proto_writer w;
            proto_begin(&w, out, sizeof out, PROTO_SUDO_SIGNAL, 1, 0);
            proto_put_u32(&w, PROTO_T_SIGNAL, si.ssi_signo);
            size_t n = proto_finish(&w);
            if (n)
                send_all(sock, out, n, NULL, 0);
        }
        if (!p[0].revents)
            continue;
        ssize_t n = recv(sock, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        struct proto_msg m;
        if (n <= 0 || proto_parse(buf, (size_t)n, &m, NULL) < 0)
            break;
        if (m.type == PROTO_SUDO_EXITED) {
            int32_t code = 1;
            uint32_t sig = 0;
            proto_get_i32(&m, PROTO_T_EXIT_CODE, &code, NULL);
            proto_get_u32(&m, PROTO_T_SIGNAL, &sig, NULL);
            end_as(code, sig);
        }
        if (m.type == PROTO_ERROR) {
            uint32_t errnum = EIO;
            const char *msg = NULL;
            proto_get_u32(&m, PROTO_T_ERRNO, &errnum, NULL);
            proto_get_str(&m, PROTO_T_MESSAGE, PROTO_MAX_STRING, &msg, NULL);
            if (errnum == EAGAIN) {
                close(sock);
                if (sfd >= 0)
                    close(sfd);
                return;
            }
            if (errnum == ENOENT && msg && strncmp(msg, "cannot execute", 14) == 0)
                fail("%s: command not found", command);
            fail("%s", msg ? msg : strerror((int)errnum));
        }
        if (m.type == PROTO_SUDO_STARTED)
            tty_relay_started(&relay);
        /* anything else: nothing to do */
    }
    fail("the sandbox's sudo service closed the connection");
}

int main(int argc, char **argv)
{
    struct sudo_options o;
    err_t err;
    if (sudo_options_parse(argc, argv, &o, &err) < 0) {
        fprintf(stderr, "sudo: %s\n%s", err.msg, usage);
        return 1;
    }
    switch (o.action) {
    case SUDO_ACTION_HELP:
        printf("sudo - execute a command as another user (hutch: passwordless, inside this "
               "sandbox)\n\n%s",
               usage);
        return 0;
    case SUDO_ACTION_VERSION:
        printf("Sudo version 1.9 (hutch: the sandbox's sudo service, %s)\n", PROTO_SUDO_SOCKET);
        return 0;
    case SUDO_ACTION_NOTHING:
        return 0;
    default:
        break;
    }
    struct sudo_target t;
    if (sudo_target_resolve(o.user, read_passwd(), &t, &err) < 0) {
        fprintf(stderr, "sudo: %s\n", err.msg);
        return 1;
    }
    if (o.action == SUDO_ACTION_LIST) {
        char host[256] = "localhost";
        gethostname(host, sizeof host - 1);
        printf("User %s may run the following commands on %s:\n    (ALL : ALL) NOPASSWD: ALL\n",
               getuid() == 0      ? "root"
               : getuid() == 1000 ? "user"
                                  : "this user",
               host);
        return 0;
    }
    char cwd_buf[4096];
    const char *cwd = getcwd(cwd_buf, sizeof cwd_buf);
    struct sudo_request r;
    if (sudo_request_build(&o, &t, environ, cwd, &r, &err) < 0) {
        fprintf(stderr, "sudo: %s\n", err.msg);
        return 1;
    }
    /* Our own stdio, as it is; /dev/null for one that is closed. */
    int stdio[3];
    for (int i = 0; i < 3; i++) {
        stdio[i] = i;
        if (fcntl(i, F_GETFD) < 0 &&
            (stdio[i] = open("/dev/null", i ? O_WRONLY : O_RDONLY | O_CLOEXEC)) < 0) {
            fprintf(stderr, "sudo: /dev/null: %s\n", strerror(errno));
            return 1;
        }
    }
    size_t cap = 64;
    for (char **a = r.argv; *a; a++)
        cap += strlen(*a) + 16;
    for (char **e = r.envp; *e; e++)
        cap += strlen(*e) + 16;
    cap += r.cwd ? strlen(r.cwd) + 16 : 0;
    uint8_t *req = malloc(cap);
    struct proto_sudo s = {.argv = r.argv, .envp = r.envp, .cwd = r.cwd, .as_root = r.as_root};
    size_t len = req ? proto_encode_sudo(req, cap, PROTO_SUDO, 1, &s) : 0;
    if (len == 0 || len > PROTO_MAX_TO_INIT) {
        fprintf(stderr, "sudo: argument list too long\n");
        return 1;
    }
    /* Signals that would end us before the command does are relayed instead; SIGWINCH resizes
     * the command's pty. */
    sigset_t set;
    blocked_signals(&set);
    sigprocmask(SIG_BLOCK, &set, NULL);
    tty_relay_begin(&relay, stdio);
    /* Busy (many asking at once): ask again, for up to about a minute. */
    for (int attempt = 0; attempt < 600; attempt++) {
        run(req, len, stdio, r.argv[0]);
        struct timespec ts = {0, (attempt < 10 ? 10 : 100) * 1000000L};
        nanosleep(&ts, NULL);
    }
    fail("the sandbox's sudo service stays busy");
}
