/* The baselines: a program forked and exec'd by this process and timed from just before the fork
 * to the first byte of its stdout, and to its reaping. Every external case (bare, hutch run,
 * bubblewrap) starts the same way, so they differ only in the command. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"

extern char **environ;

#define EXTERNAL_TIMEOUT_MS 10000

const char *const bench_payload[] = {"/bin/echo", "-n", "x", NULL};

const char *const *external_hutch_run_argv(void)
{
    static const char *argv[8];
    argv[0] = bench.hutch;
    argv[1] = "run";
    argv[2] = "--";
    for (size_t i = 0; bench_payload[i]; i++)
        argv[3 + i] = bench_payload[i];
    return argv;
}

/* bubblewrap as close to a hutch sandbox as it gets, as bench/run.sh gives it (see
 * bench/README.md): every namespace, uid 1000, no capabilities, hutch's own seccomp program on
 * fd 9, the host /usr read-only, fresh /proc, /dev and /tmp. */
const char *const *external_bwrap_argv(void)
{
    static const char *const args[] = {"--unshare-all",
                                       "--unshare-user",
                                       "--uid",
                                       "1000",
                                       "--gid",
                                       "1000",
                                       "--cap-drop",
                                       "ALL",
                                       "--new-session",
                                       "--die-with-parent",
                                       "--ro-bind",
                                       "/usr",
                                       "/usr",
                                       "--symlink",
                                       "usr/lib64",
                                       "/lib64",
                                       "--symlink",
                                       "usr/lib",
                                       "/lib",
                                       "--symlink",
                                       "usr/bin",
                                       "/bin",
                                       "--proc",
                                       "/proc",
                                       "--dev",
                                       "/dev",
                                       "--tmpfs",
                                       "/tmp",
                                       "--seccomp",
                                       "9",
                                       "--",
                                       NULL};
    static const char *argv[64];
    size_t n = 0;
    argv[n++] = bench.bwrap;
    for (size_t i = 0; args[i]; i++)
        argv[n++] = args[i];
    for (size_t i = 0; bench_payload[i]; i++)
        argv[n++] = bench_payload[i];
    argv[n] = NULL;
    return argv;
}

/* In the child: stdio, fd 9, exec. Only async-signal-safe calls after a fork. */
static _Noreturn void child_exec(const char *const *argv, const char *fd9_path, int out_w)
{
    if (dup2(bench.null_fd, 0) < 0 || dup2(out_w, 1) < 0)
        _exit(126);
    if (fd9_path) {
        int fd = open(fd9_path, O_RDONLY);
        if (fd < 0 || (fd != 9 && (dup2(fd, 9) < 0 || close(fd) < 0)))
            _exit(126);
    }
    execve(argv[0], (char *const *)argv, environ);
    _exit(127);
}

static int wait_child(pid_t pid, int *status)
{
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

int external_run(const char *const *argv, const char *fd9_path, const char *expect,
                 struct external_times *out, err_t *err)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return err_set(err, errno, "pipe");
    uint64_t t0 = jail_now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(pipefd[0]);
        close(pipefd[1]);
        return err_set(err, saved, "fork");
    }
    if (pid == 0)
        child_exec(argv, fd9_path, pipefd[1]);
    close(pipefd[1]);
    char got[64];
    size_t n = 0;
    int rc = 0;
    out->first_ms = -1;
    for (;;) {
        struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
        int ready = poll(&p, 1, EXTERNAL_TIMEOUT_MS);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            rc = err_set(err, ready < 0 ? errno : ETIMEDOUT, "%s: no output", argv[0]);
            kill(pid, SIGKILL);
            break;
        }
        ssize_t r = read(pipefd[0], got + n, sizeof got - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0 && out->first_ms < 0)
            out->first_ms = bench_ms_since(t0);
        if (r <= 0 || (n += (size_t)r) == sizeof got - 1)
            break;
    }
    close(pipefd[0]);
    got[n] = '\0';
    int status = 0;
    if (wait_child(pid, &status) < 0 && rc == 0)
        rc = err_set(err, errno, "wait for %s", argv[0]);
    out->exit_ms = bench_ms_since(t0);
    if (rc == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
        rc = err_set(err, 0, "%s failed (wait status 0x%x)", argv[0], (unsigned)status);
    if (rc == 0 && strcmp(got, expect) != 0)
        rc = err_set(err, 0, "%s printed \"%s\", not \"%s\"", argv[0], got, expect);
    return rc;
}
