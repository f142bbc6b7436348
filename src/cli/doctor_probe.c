/* `hutch doctor`'s probe machinery: a check's work done in a forked child that reports back
 * over a socket (whatever it changes about a process dies with it), with a deadline; and the
 * small helpers the checks share. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/doctor_internal.h"
#include "util/fileio.h"

/* ---------- small helpers ---------- */

enum doctor_status doctor_say(char *out, size_t size, enum doctor_status status, const char *fmt,
                              ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
    return status;
}

uint64_t doctor_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void doctor_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void doctor_reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

int doctor_wait_bounded(pid_t pid, int *status, unsigned timeout_ms)
{
    uint64_t deadline = doctor_now_ms() + timeout_ms;
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid)
            return 0;
        if (got < 0 && errno != EINTR)
            return -1;
        if (doctor_now_ms() >= deadline)
            return -1;
        doctor_sleep_ms(2);
    }
}

void doctor_describe_wait_status(int status, char *out, size_t size)
{
    if (WIFEXITED(status))
        snprintf(out, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "wait status 0x%x", (unsigned)status);
}

long long doctor_read_number(const char *path)
{
    char buf[64];
    if (file_read_at(AT_FDCWD, path, buf, sizeof buf, NULL) < 0)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || end == buf)
        return -1;
    return v;
}

/* ---------- probes: a check's work in a forked child ---------- */

/* The child reports over a SEQPACKET socket, one message per send:
 *   'P'  "do your part now" (e.g. write my id maps); the parent answers 'G' when done
 *   'R'  the result: a status byte and the detail text. */
struct probe_msg {
    char type;
    char status;
    char text[1200];
};

int doctor_probe_ask_parent(struct probe *p)
{
    char c = 'P';
    if (send(p->sock, &c, 1, MSG_NOSIGNAL) != 1)
        return -1;
    ssize_t n;
    do {
        n = recv(p->sock, &c, 1, 0);
    } while (n < 0 && errno == EINTR);
    return n == 1 && c == 'G' ? 0 : -1;
}

static _Noreturn void probe_child_main(int sock, pid_t parent, probe_child_fn fn, void *arg)
{
    /* A doctor killed half way must not leave a probe (with its namespaces) running. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    struct probe p = {.sock = sock};
    struct probe_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = 'R';
    msg.status = (char)fn(&p, arg, msg.text, sizeof msg.text);
    size_t len = offsetof(struct probe_msg, text) + strnlen(msg.text, sizeof msg.text - 1) + 1;
    (void)!send(sock, &msg, len, MSG_NOSIGNAL);
    /* _exit: no atexit handlers, no second flush of the parent's stdio buffers. */
    _exit(0);
}

void doctor_probe_run(struct doctor_result *r, probe_child_fn child_fn, probe_parent_fn parent_fn,
                      void *arg)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        result_set(r, DOCTOR_FAIL, "socketpair for the probe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL, "fork a probe: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return;
    }
    if (pid == 0) {
        close(sv[0]);
        probe_child_main(sv[1], self, child_fn, arg);
    }
    close(sv[1]);
    bool have_result = false, killed = false;
    uint64_t deadline = doctor_now_ms() + PROBE_TIMEOUT_MS;
    for (;;) {
        uint64_t now = doctor_now_ms();
        if (now >= deadline) {
            result_set(r, DOCTOR_FAIL, "the probe did not finish within %d ms", PROBE_TIMEOUT_MS);
            killed = true;
            break;
        }
        struct pollfd pfd = {.fd = sv[0], .events = POLLIN};
        int n = poll(&pfd, 1, (int)(deadline - now));
        if (n <= 0)
            continue; /* EINTR or the deadline: the top of the loop decides */
        struct probe_msg msg;
        memset(&msg, 0, sizeof msg);
        ssize_t got = recv(sv[0], &msg, sizeof msg - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* the child is gone */
        if (msg.type == 'P') {
            err_t err;
            err_clear(&err);
            if (!parent_fn || parent_fn(pid, arg, &err) < 0) {
                result_set(r, DOCTOR_FAIL, "%s", err.msg[0] ? err.msg : "no parent step");
                killed = true;
                break;
            }
            char go = 'G';
            (void)!send(sv[0], &go, 1, MSG_NOSIGNAL);
        } else if (msg.type == 'R' && got >= 2) {
            enum doctor_status st = (enum doctor_status)msg.status;
            if (st != DOCTOR_OK && st != DOCTOR_WARN)
                st = DOCTOR_FAIL;
            result_set(r, st, "%s", msg.text);
            have_result = true;
        }
    }
    close(sv[0]);
    if (killed)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!have_result && !killed) {
        char how[96];
        doctor_describe_wait_status(status, how, sizeof how);
        result_set(r, DOCTOR_FAIL, "the probe ended without a report (%s)", how);
    }
}
