/* The stdin pump with real files and pipes, the "program" reading its end in this process: the
 * program never holds the caller's file description, gets every byte and EOF, and the caller's
 * stdin is left where the program stopped reading. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/stdin_pump.h"
#include "tap.h"

static char pattern[300000];

/* Runs the pump while the program reads its end `prog` in pieces of at most `piece` bytes, until
 * it has `want` bytes or EOF. Returns what it read; *eof says whether it saw EOF. */
static size_t drive(struct stdin_pump *p, int prog, char *got, size_t want, size_t piece, bool *eof)
{
    size_t n = 0;
    *eof = false;
    for (int rounds = 0; rounds < 200000 && n < want; rounds++) {
        struct pollfd fds[3];
        stdin_pump_events(p, &fds[0], &fds[1]);
        fds[2] = (struct pollfd){.fd = prog, .events = POLLIN};
        if (poll(fds, 3, 2000) <= 0)
            break;
        stdin_pump_run(p, fds[0].revents, fds[1].revents);
        if (fds[2].revents) {
            size_t ask = want - n < piece ? want - n : piece;
            ssize_t k = read(prog, got + n, ask);
            if (k == 0) {
                *eof = true;
                break;
            }
            if (k > 0)
                n += (size_t)k;
        }
    }
    return n;
}

/* Opens the pump on source; *prog gets the program's end (a copy, as the sandbox would hold). */
static int open_pump(struct stdin_pump *p, int source, bool consumed, int *prog)
{
    err_t err;
    if (stdin_pump_open(p, source, consumed, &err) < 0) {
        printf("# stdin_pump_open: %s\n", err.msg);
        return -1;
    }
    *prog = fcntl(p->child_fd, F_DUPFD_CLOEXEC, 3);
    stdin_pump_started(p);
    return *prog < 0 ? -1 : 0;
}

static void test_file(void)
{
    char path[] = "/tmp/hutch-test-stdin.XXXXXX";
    int fd = mkstemp(path);
    ok(fd >= 0 && write(fd, pattern, sizeof pattern) == (ssize_t)sizeof pattern, "a 300 kB file");
    unlink(path);
    static struct stdin_pump p;
    static char got[sizeof pattern];
    bool eof;
    int prog;

    lseek(fd, 1000, SEEK_SET);
    ok(open_pump(&p, fd, false, &prog) == 0 && p.mode == STDIN_FILE, "a regular file: FILE mode");
    struct stat st;
    ok(fstat(prog, &st) == 0 && S_ISFIFO(st.st_mode), "the program gets a pipe, not the file");
    fcntl(prog, F_SETFL, O_NONBLOCK);
    ok(!(fcntl(fd, F_GETFL) & O_NONBLOCK),
       "O_NONBLOCK on the program's end leaves the file's alone");
    fcntl(prog, F_SETFL, 0);
    size_t n = drive(&p, prog, got, 5000, 1000, &eof);
    ok(n == 5000 && memcmp(got, pattern + 1000, n) == 0,
       "the program reads from the caller's offset");
    close(prog);
    stdin_pump_close(&p);
    is_u64((uint64_t)lseek(fd, 0, SEEK_CUR), 6000,
           "the caller's offset ends where the program stopped reading, not where the pump did");

    ok(open_pump(&p, fd, false, &prog) == 0, "again from there");
    n = drive(&p, prog, got, sizeof got, 65536, &eof);
    ok(n == sizeof pattern - 6000 && eof && memcmp(got, pattern + 6000, n) == 0,
       "to the end: every byte, then EOF (%zu bytes)", n);
    close(prog);
    stdin_pump_close(&p);
    is_u64((uint64_t)lseek(fd, 0, SEEK_CUR), sizeof pattern, "offset at the end of the file");

    lseek(fd, 0, SEEK_SET);
    ok(open_pump(&p, fd, false, &prog) == 0, "a program that reads nothing");
    struct pollfd one;
    for (int i = 0; i < 20; i++) {
        struct pollfd src;
        stdin_pump_events(&p, &src, &one);
        if (poll(&one, 1, 0) <= 0)
            break;
        stdin_pump_run(&p, 0, one.revents);
    }
    close(prog);
    stdin_pump_close(&p);
    is_u64((uint64_t)lseek(fd, 0, SEEK_CUR), 0, "its stdin file is left untouched");
    close(fd);
}

static void test_pipe(void)
{
    int src[2];
    ok(pipe2(src, O_CLOEXEC) == 0, "a pipe as hutch's stdin");
    ok(write(src[1], pattern, 10000) == 10000, "10000 bytes in it");
    static struct stdin_pump p;
    static char got[sizeof pattern];
    bool eof;
    int prog;
    ok(open_pump(&p, src[0], false, &prog) == 0 && p.mode == STDIN_PIPE, "a pipe: PIPE mode");
    size_t n = drive(&p, prog, got, 3000, 1000, &eof);
    ok(n == 3000 && memcmp(got, pattern, n) == 0, "the program reads 3000 bytes");
    close(prog);
    stdin_pump_close(&p);
    n = (size_t)read(src[0], got, sizeof got);
    ok(n == 7000 && memcmp(got, pattern + 3000, n) == 0,
       "the caller's pipe still holds the other 7000 (got %zd)", (ssize_t)n);

    ok(write(src[1], pattern, 5000) == 5000, "5000 more bytes");
    ok(open_pump(&p, src[0], false, &prog) == 0, "a program that closes its stdin unread");
    for (int i = 0; i < 3; i++) {
        struct pollfd a, b;
        stdin_pump_events(&p, &a, &b);
        struct pollfd fds[2] = {a, b};
        poll(fds, 2, 100);
        stdin_pump_run(&p, fds[0].revents, fds[1].revents);
    }
    close(prog);
    for (int i = 0; i < 3; i++) {
        struct pollfd a, b;
        stdin_pump_events(&p, &a, &b);
        struct pollfd fds[2] = {a, b};
        poll(fds, 2, 100);
        stdin_pump_run(&p, fds[0].revents, fds[1].revents);
    }
    ok(p.pipe_w < 0, "the pump notices and stops");
    stdin_pump_close(&p);
    n = (size_t)read(src[0], got, sizeof got);
    is_u64(n, 5000, "nothing was taken from the caller's pipe");

    /* large input, then EOF when the writer closes */
    ok(open_pump(&p, src[0], false, &prog) == 0, "300 kB through the pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(prog);
        ssize_t w = write(src[1], pattern, sizeof pattern);
        _exit(w == (ssize_t)sizeof pattern ? 0 : 1);
    }
    close(src[1]);
    n = drive(&p, prog, got, sizeof got, 65536, &eof);
    int status = -1;
    waitpid(pid, &status, 0);
    ok(n == sizeof pattern && memcmp(got, pattern, n) == 0 && status == 0, "every byte, in order");
    bool eof2;
    drive(&p, prog, got, 1, 1, &eof2);
    ok(eof2, "then EOF");
    close(prog);
    stdin_pump_close(&p);
    close(src[0]);

    /* bulk: past STDIN_EXACT_MAX the pump reads ahead, and every byte still arrives in order */
    ok(pipe2(src, O_CLOEXEC) == 0 && open_pump(&p, src[0], false, &prog) == 0,
       "3 MB through a pipe");
    pid = fork();
    if (pid == 0) {
        close(prog);
        for (int i = 0; i < 10; i++)
            if (write(src[1], pattern, sizeof pattern) != (ssize_t)sizeof pattern)
                _exit(1);
        _exit(0);
    }
    close(src[1]);
    static char big[10 * sizeof pattern];
    n = drive(&p, prog, big, sizeof big, 65536, &eof);
    waitpid(pid, &status, 0);
    int same = n == sizeof big && status == 0;
    for (int i = 0; same && i < 10; i++)
        same = memcmp(big + i * sizeof pattern, pattern, sizeof pattern) == 0;
    ok(same, "every byte, in order (%zu)", n);
    ok(p.mode == STDIN_STREAM, "and past %u bytes the pump reads ahead", STDIN_EXACT_MAX);
    drive(&p, prog, got, 1, 1, &eof2);
    ok(eof2, "then EOF");
    close(prog);
    stdin_pump_close(&p);
    close(src[0]);
}

static void test_stream_and_null(void)
{
    int sv[2];
    ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "a socket as hutch's stdin");
    static struct stdin_pump p;
    char got[64];
    bool eof;
    int prog;
    ok(open_pump(&p, sv[0], false, &prog) == 0 && p.mode == STDIN_STREAM, "a socket: STREAM mode");
    ok(write(sv[1], "hello\n", 6) == 6, "6 bytes sent");
    shutdown(sv[1], SHUT_WR);
    size_t n = drive(&p, prog, got, sizeof got, sizeof got, &eof);
    ok(n == 6 && eof && memcmp(got, "hello\n", 6) == 0, "they arrive, then EOF");
    close(prog);
    stdin_pump_close(&p);
    close(sv[0]);
    close(sv[1]);

    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ok(open_pump(&p, null, false, &prog) == 0 && p.mode == STDIN_NULL, "/dev/null: NULL mode");
    fcntl(prog, F_SETFL, O_NONBLOCK);
    ok(!(fcntl(null, F_GETFL) & O_NONBLOCK), "the program's /dev/null is a description of its own");
    struct stat st;
    ok(fstat(prog, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3) &&
           read(prog, got, 1) == 0,
       "and it is /dev/null, empty");
    close(prog);
    stdin_pump_close(&p);
    ok(open_pump(&p, null, true, &prog) == 0 && p.mode == STDIN_NULL,
       "a consumed stdin: /dev/null");
    close(prog);
    stdin_pump_close(&p);
    ok(open_pump(&p, 987, false, &prog) == 0 && p.mode == STDIN_NULL, "a closed stdin: /dev/null");
    close(prog);
    stdin_pump_close(&p);
    close(null);
    stdin_pump_close(&p); /* idempotent */
}

int main(void)
{
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = (char)(i * 7 + i / 251);
    signal(SIGPIPE, SIG_IGN);
    test_file();
    test_pipe();
    test_stream_and_null();
    /* nothing left open: the next fd is the lowest free one */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ok(fd == 3, "no fd left open (next fd %d)", fd);
    return done_testing();
}
