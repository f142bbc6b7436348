/* Starting one command in a running sandbox (command.h). */
#include "init/command.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "jail/control.h"
#include "jail/payload.h"

void command_fds_close(struct command_fds *fds)
{
    int *all[] = {&fds->stdout_r, &fds->stderr_r, &fds->stdin_w, &fds->pty_master};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i] >= 0)
            close(*all[i]);
        *all[i] = -1;
    }
}

/* The child's ends of its stdio, made before the clone; the parent keeps the other ends. */
struct child_ends {
    int in, out, err;
    char pty_name[64];
};

static int make_pipe(int *read_end, int *write_end, err_t *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, errno, "pipe");
    *read_end = p[0];
    *write_end = p[1];
    return 0;
}

static int open_pty(const struct command_spec *spec, struct command_fds *out,
                    struct child_ends *child, err_t *err)
{
    out->pty_master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (out->pty_master < 0)
        return err_set(err, errno, "open a pty (the sandbox's share of ptys may be used up)");
    int unlock = 0;
    if (ioctl(out->pty_master, TIOCSPTLCK, &unlock) < 0 ||
        ptsname_r(out->pty_master, child->pty_name, sizeof child->pty_name) != 0)
        return err_set(err, errno, "pty");
    struct winsize ws = {.ws_row = spec->rows ? spec->rows : 24, .ws_col = spec->cols ? spec->cols : 80};
    if (ioctl(out->pty_master, TIOCSWINSZ, &ws) < 0)
        return err_set(err, errno, "pty window size");
    return 0;
}

static int make_stdio(const struct command_spec *spec, struct command_fds *out,
                      struct child_ends *child, err_t *err)
{
    if (spec->stdio[0] >= 0) {
        int *ends[3] = {&child->in, &child->out, &child->err};
        for (int i = 0; i < 3; i++)
            if ((*ends[i] = fcntl(spec->stdio[i], F_DUPFD_CLOEXEC, 3)) < 0)
                return err_set(err, errno, "the given stdio");
        return 0;
    }
    if (spec->pty)
        return open_pty(spec, out, child, err);
    if (make_pipe(&out->stdout_r, &child->out, err) < 0 ||
        make_pipe(&out->stderr_r, &child->err, err) < 0)
        return -1;
    if (spec->stdin_pipe)
        return make_pipe(&child->in, &out->stdin_w, err);
    child->in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return child->in < 0 ? err_set(err, errno, "open /dev/null") : 0;
}

static void close_child_ends(struct child_ends *c)
{
    int *all[] = {&c->in, &c->out, &c->err};
    for (size_t i = 0; i < 3; i++) {
        if (*all[i] >= 0)
            close(*all[i]);
        *all[i] = -1;
    }
}

/* In the new child: cgroups, a cgroup namespace rooted at its own group, a session of its own,
 * stdio; then the payload's last steps. Failures go to report as the payload's do. */
static _Noreturn void child_main(const struct command_spec *spec, struct child_ends *c,
                                 int report, const struct seccomp_program *prog)
{
    if (cgroup_self_attach(spec->v1_fds, spec->n_v1_fds) < 0)
        control_die(report, errno, "join the command's cgroups");
    /* Its own group is the root of what it sees in /proc/self/cgroup. */
    if (unshare(CLONE_NEWCGROUP) < 0)
        control_die(report, errno, "unshare cgroup namespace");
    if (setsid() < 0)
        control_die(report, errno, "setsid");
    if (spec->pty) {
        int tty = open(c->pty_name, O_RDWR | O_CLOEXEC);
        if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) < 0)
            control_die(report, errno, "open the pty %s", c->pty_name);
        c->in = tty;
        c->out = dup(tty);
        c->err = dup(tty);
        if (c->out < 0 || c->err < 0)
            control_die(report, errno, "dup the pty");
    } else {
        /* A terminal among fds it was given (sudo's own pty, src/sudo/tty_relay.h) becomes its
         * controlling one if it has no session yet; one that is another session's stays
         * that session's (TIOCSCTTY with 0 never steals). */
        int given[3] = {c->in, c->out, c->err};
        for (int i = 0; i < 3; i++)
            if (given[i] >= 0 && isatty(given[i]) && ioctl(given[i], TIOCSCTTY, 0) == 0)
                break;
    }
    /* Through fresh numbers above 2 first, so that no end is clobbered by another. */
    int src[3] = {c->in, c->out, c->err}, tmp[3];
    for (int i = 0; i < 3; i++)
        if ((tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3)) < 0)
            control_die(report, errno, "stdio");
    for (int i = 0; i < 3; i++)
        if (dup2(tmp[i], i) < 0)
            control_die(report, errno, "stdio");
    struct payload p = {.argv = spec->argv,
                        .envp = spec->envp,
                        .cwd = spec->cwd,
                        .as_root = spec->as_root,
                        .writable_root = spec->writable_root};
    payload_exec(&p, report, prog);
}

/* EOF on the report socket: the child exec'd (its end was close-on-exec). A message: it failed
 * before, and says why. */
static int read_report(int report, err_t *err)
{
    struct control_msg msg;
    int rc;
    do {
        rc = control_recv(report, &msg, NULL);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0)
        return 0;
    if (rc < 0)
        return err_set(err, errno, "the command's start report");
    if (msg.type == CONTROL_EXEC_ERROR)
        return err_set(err, msg.code > 0 ? msg.code : EIO, "cannot execute %s", msg.text);
    err_set(err, 0, "%s", msg.text);
    err->errnum = msg.code > 0 ? msg.code : EIO;
    return -1;
}

int command_spawn(const struct command_spec *spec, const struct seccomp_program *prog,
                  pid_t *pid, struct command_fds *out, err_t *err)
{
    *out = (struct command_fds){-1, -1, -1, -1};
    struct child_ends child = {-1, -1, -1, ""};
    int report[2] = {-1, -1};
    if (make_stdio(spec, out, &child, err) < 0)
        goto fail;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, report) < 0) {
        err_set(err, errno, "socketpair");
        goto fail;
    }
    struct clone_args args;
    memset(&args, 0, sizeof args);
    /* CLONE_PARENT: init, not this spawner, is the command's parent, so init reaps it and
     * learns how it ended. */
    args.flags = CLONE_PARENT;
    /* clone3 refuses an exit signal with CLONE_PARENT: the child takes the spawner's own,
     * SIGCHLD (fork's). */
    args.exit_signal = 0;
    if (spec->cgroup_fd >= 0) {
        /* Born inside its group: everything it does is charged to it from the start. */
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)spec->cgroup_fd;
    }
    pid_t child_pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (child_pid < 0) {
        err_set(err, errno, "clone3 into the command's cgroup");
        goto fail;
    }
    if (child_pid == 0) {
        close(report[0]);
        child_main(spec, &child, report[1], prog);
    }
    close(report[1]);
    report[1] = -1;
    close_child_ends(&child);
    int rc = read_report(report[0], err);
    close(report[0]);
    if (rc < 0) {
        command_fds_close(out);
        return -1; /* the child exits; init reaps it */
    }
    *pid = child_pid;
    return 0;
fail:
    close_child_ends(&child);
    command_fds_close(out);
    for (int i = 0; i < 2; i++)
        if (report[i] >= 0)
            close(report[i]);
    return -1;
}
