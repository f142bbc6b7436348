/* A hostile client of init's sudo socket (/run/hutch/sudo), run inside a sandbox by
 * tests/integration/sudo.sh. Each mode does one bad thing and prints what came back; "ok" modes
 * exit 0 when the service answered as it should. Frames are made by hand (src/proto/README.md):
 * the probe must not share the codec it tests. Static, like every probe. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define SOCK "/run/hutch/sudo"
enum {
    T_HELLO = 1,
    T_ERROR = 4,
    T_SPAWN = 5,
    T_LIST = 12,
    T_SUDO = 30,
    T_STARTED,
    T_SIGNAL,
    T_EXITED,
    T_SUDO_SPAWN
};
enum { F_PID = 2, F_ARG = 5, F_USER = 8, F_EXIT_CODE = 17, F_ERRNO = 19 };

static uint8_t msg[1 << 20];
static size_t len;

static void begin(uint8_t version, uint8_t n_fds, uint16_t type)
{
    memcpy(msg, "HUT1", 4);
    msg[4] = version;
    msg[5] = n_fds;
    memcpy(msg + 6, &type, 2);
    uint32_t id = 7, zero = 0;
    memcpy(msg + 8, &id, 4);
    memcpy(msg + 12, &zero, 4);
    len = 16;
}
static void field(uint16_t tag, const void *data, uint32_t n)
{
    uint16_t zero = 0;
    memcpy(msg + len, &tag, 2);
    memcpy(msg + len + 2, &zero, 2);
    memcpy(msg + len + 4, &n, 4);
    memcpy(msg + len + 8, data, n);
    len += 8 + n;
}
static void str(uint16_t tag, const char *s)
{
    field(tag, s, (uint32_t)strlen(s) + 1);
}
static void u32(uint16_t tag, uint32_t v)
{
    field(tag, &v, 4);
}
static void finish(void)
{
    uint32_t body = (uint32_t)(len - 16);
    memcpy(msg + 12, &body, 4);
}

static int dial(void)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, SOCK);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect " SOCK);
        exit(2);
    }
    return s;
}

static int send_fds(int s, const void *buf, size_t n, const int *fds, int n_fds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};
    char ctl[CMSG_SPACE(sizeof(int) * 8)] = {0};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n_fds) {
        mh.msg_control = ctl;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n_fds);
    }
    return sendmsg(s, &mh, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* The type of the next answer (0 at EOF, -1 on timeout); *value its ERRNO or EXIT_CODE. */
static int answer(int s, int timeout_ms, int32_t *value)
{
    static uint8_t in[65536];
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        return -1;
    ssize_t n = recv(s, in, sizeof in, 0);
    if (n < 16)
        return 0;
    uint16_t type;
    memcpy(&type, in + 6, 2);
    for (size_t at = 16; at + 8 <= (size_t)n;) {
        uint16_t tag;
        uint32_t flen;
        memcpy(&tag, in + at, 2);
        memcpy(&flen, in + at + 4, 4);
        if ((tag == F_ERRNO || tag == F_EXIT_CODE) && flen == 4 && value)
            memcpy(value, in + at + 8, 4);
        at += 8 + flen;
    }
    return type;
}

/* A well-formed SUDO of argv, with fds. */
static void sudo_request(char **argv, int n_fds)
{
    begin(3, (uint8_t)n_fds, T_SUDO);
    for (; *argv; argv++)
        str(F_ARG, *argv);
    u32(F_USER, 1);
    finish();
}

/* The whole run of one request: the exit code, or -100 - errno for an ERROR. */
static int ask(char **argv, const int *fds, int n_fds)
{
    int s = dial();
    sudo_request(argv, n_fds);
    if (send_fds(s, msg, len, fds, n_fds) < 0)
        return -99;
    int32_t v = 0;
    for (;;) {
        int t = answer(s, 20000, &v);
        if (t == T_STARTED)
            continue;
        close(s);
        return t == T_EXITED ? v : t == T_ERROR ? -100 - v : -98;
    }
}

static int expect_error(const char *what, int s, int want)
{
    int32_t v = 0;
    int t = answer(s, 5000, &v);
    printf("%s: %s %d\n", what, t == T_ERROR ? "error" : t == 0 ? "closed" : "other", v);
    close(s);
    return (t == T_ERROR && (!want || v == want)) || (t == 0 && want == 0) ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    char *true_argv[] = {"true", NULL};
    int stdio[3] = {0, 1, 2};
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(mode, "garbage") == 0) { /* random bytes, then a bad magic, then an empty datagram */
        int s = dial(), fails = 0;
        uint8_t junk[300];
        int r = open("/dev/urandom", O_RDONLY);
        if (r < 0 || read(r, junk, sizeof junk) != (ssize_t)sizeof junk)
            return 2;
        send(s, junk, sizeof junk, MSG_NOSIGNAL);
        fails += expect_error("random bytes", s, 0);
        s = dial();
        send(s, "", 0, MSG_NOSIGNAL);
        fails += expect_error("an empty datagram", s, 0);
        s = dial();
        send(s, "HUT1\3", 5, MSG_NOSIGNAL);
        fails += expect_error("a short header", s, 0);
        return fails;
    }
    if (strcmp(mode, "huge") == 0) { /* a length that lies, a field past the end, a big datagram */
        int s = dial(), fails = 0;
        sudo_request(true_argv, 3);
        uint32_t lie = 0xfffffff0u;
        memcpy(msg + 12, &lie, 4);
        send_fds(s, msg, len, stdio, 3);
        fails += expect_error("a body length of 4 GiB", s, EBADMSG);
        s = dial();
        begin(3, 3, T_SUDO);
        u32(F_USER, 1);
        uint32_t big = 0x7fffffff;
        memcpy(msg + len - 8, &big, 4); /* the USER field now claims 2 GiB */
        finish();
        send_fds(s, msg, len, stdio, 3);
        fails += expect_error("a field of 2 GiB", s, EBADMSG);
        s = dial();
        int size = 4 << 20;
        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        begin(3, 3, T_SUDO);
        memset(msg + len, 'a', sizeof msg - len - 64);
        len = sizeof msg - 64;
        finish();
        if (send_fds(s, msg, len, stdio, 3) < 0) /* the socket itself refuses it: fine too */
            printf("a 1 MiB datagram: refused by the socket (%s)\n", strerror(errno));
        else
            fails += expect_error("a 1 MiB datagram of junk", s, 0);
        return fails;
    }
    if (strcmp(mode, "fds") == 0) { /* fds that are no pipes; too few; too many */
        int fails = 0;
        int dir = open("/", O_PATH | O_DIRECTORY), ev = eventfd(0, 0);
        int sp[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
        int odd[3] = {dir, ev, sp[0]};
        int rc = ask(true_argv, odd, 3);
        printf("an O_PATH directory, an eventfd and a socket as stdio: %d\n", rc);
        fails += rc != 0;
        int s = dial();
        sudo_request(true_argv, 2);
        send_fds(s, msg, len, stdio, 2);
        fails += expect_error("two fds", s, EBADMSG);
        s = dial();
        int eight[8] = {0, 1, 2, 0, 1, 2, dir, ev};
        sudo_request(true_argv, 8);
        send_fds(s, msg, len, eight, 8);
        fails += expect_error("eight fds", s, EBADMSG);
        s = dial();
        sudo_request(true_argv, 3);
        msg[5] = 1; /* the header says one, three come */
        send_fds(s, msg, len, stdio, 3);
        fails += expect_error("a count that lies", s, 0);
        return fails;
    }
    if (strcmp(mode, "host") == 0) { /* the host's requests, and a claimed pid */
        int fails = 0, s = dial();
        begin(1, 0, T_HELLO);
        u32(1, 1);
        finish();
        send(s, msg, len, MSG_NOSIGNAL);
        fails += expect_error("HELLO", s, EOPNOTSUPP);
        s = dial();
        begin(1, 0, T_LIST);
        finish();
        send(s, msg, len, MSG_NOSIGNAL);
        fails += expect_error("LIST", s, EOPNOTSUPP);
        s = dial();
        begin(1, 0, T_SPAWN);
        str(F_ARG, "id");
        u32(F_USER, 1);
        u32(12, 0);
        finish();
        send(s, msg, len, MSG_NOSIGNAL);
        fails += expect_error("SPAWN", s, EOPNOTSUPP);
        s = dial();
        begin(3, 3, T_SUDO_SPAWN);
        str(F_ARG, "id");
        u32(F_USER, 1);
        u32(F_PID, 2);
        finish();
        send_fds(s, msg, len, stdio, 3);
        fails += expect_error("SUDO_SPAWN (the spawner's)", s, EOPNOTSUPP);
        s = dial();
        sudo_request(true_argv, 3);
        /* then a PID field, which only init may write */
        u32(F_PID, 2);
        finish();
        send_fds(s, msg, len, stdio, 3);
        fails += expect_error("SUDO with a PID", s, EBADMSG);
        return fails;
    }
    if (strcmp(mode, "die") == 0) { /* connect and die; send half a story and die */
        for (int i = 0; i < 20; i++) {
            pid_t p = fork();
            if (p == 0) {
                int s = dial();
                if (i % 2) {
                    char *sleep_argv[] = {"sleep", "4245", NULL};
                    sudo_request(sleep_argv, 3);
                    send_fds(s, msg, len, stdio, 3);
                }
                _exit(0);
            }
            waitpid(p, NULL, 0);
        }
        printf("20 clients died mid-request\n");
        return 0;
    }
    if (strcmp(mode, "idle") == 0) { /* connections that never ask */
        for (int i = 0; i < 200; i++)
            if (fork() == 0) {
                int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                strcpy(a.sun_path, SOCK);
                connect(s, (struct sockaddr *)&a, sizeof a);
                sleep(3);
                _exit(0);
            }
        while (wait(NULL) > 0)
            ;
        printf("200 idle clients for 3 s\n");
        return 0;
    }
    if (strcmp(mode, "flood") == 0) { /* N at once, each a real request */
        int n = argc > 2 ? atoi(argv[2]) : 100, good = 0;
        for (int i = 0; i < n; i++)
            if (fork() == 0) {
                for (int tries = 0; tries < 300; tries++) {
                    int rc = ask(true_argv, stdio, 3);
                    if (rc != -100 - EAGAIN)
                        _exit(rc == 0 ? 0 : 1);
                    usleep(20000);
                }
                _exit(1);
            }
        int status;
        while (wait(&status) > 0)
            good += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("%d of %d concurrent clients ran true\n", good, n);
        return good == n ? 0 : 1;
    }
    fprintf(stderr, "usage: sudo_client garbage|huge|fds|host|die|idle|flood [N]\n");
    return 2;
}
