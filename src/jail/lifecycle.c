/* The parent side of a running sandbox: pause and resume, and destroy as steps (kill, reap init
 * through its pidfd, remove the cgroup, close) that never wait, plus their blocking
 * compositions for `hutch run`. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"

#define DESTROY_TIMEOUT_MS 5000 /* kill to init gone, and again to the cgroup removed */

/* PIDFD_GET_INFO (Linux 6.15), for headers that predate it: its first version, 64 bytes. With
 * PIDFD_INFO_EXIT it gives a reaped process's wait status through its pidfd. */
struct pidfd_info_v0 {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
#define PIDFD_INFO_EXIT_BIT  (1u << 3)
#define PIDFD_GET_INFO_V0    _IOWR(0xFF, 11, struct pidfd_info_v0)

/* ---------- pause ---------- */

int jail_freeze_start(struct jail *jail, bool frozen, err_t *err)
{
    if (!jail->cgroup)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    return cgroup_freeze_start(jail->cgroup, frozen, err);
}

int jail_frozen(struct jail *jail, bool *frozen, err_t *err)
{
    if (!jail->cgroup)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    return cgroup_frozen(jail->cgroup, frozen, err);
}

int jail_set_frozen(struct jail *jail, bool frozen, err_t *err)
{
    if (!jail->cgroup)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    return cgroup_set_frozen(jail->cgroup, frozen, err);
}

/* ---------- destroy, step by step ---------- */

int jail_kill(struct jail *jail, err_t *err)
{
    int rc = 0;
    /* init first: its death empties the pid namespace, whatever the cgroup can do. On a v1
     * freezer a frozen init keeps this SIGKILL pending: the cgroup kill below thaws it. */
    if (!jail->init_reaped && jail->pidfd >= 0 &&
        syscall(SYS_pidfd_send_signal, jail->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        rc = err_set(err, errno, "sandbox %s: kill init", jail->name);
    if (jail->cgroup && cgroup_kill_start(jail->cgroup, NULL, rc < 0 ? NULL : err) < 0)
        rc = -1;
    return rc;
}

/* What waitid says, as waitpid would have said it. */
static int status_of(const siginfo_t *info)
{
    switch (info->si_code) {
    case CLD_EXITED:
        return (info->si_status & 0xff) << 8;
    case CLD_KILLED:
        return info->si_status & 0x7f;
    case CLD_DUMPED:
        return (info->si_status & 0x7f) | 0x80;
    }
    return 0;
}

/* The status of a process someone else reaped, from its pidfd: -1 when the kernel cannot say. */
static int status_from_pidfd(int pidfd)
{
    struct pidfd_info_v0 info;
    memset(&info, 0, sizeof info);
    info.mask = PIDFD_INFO_EXIT_BIT;
    if (ioctl(pidfd, PIDFD_GET_INFO_V0, &info) < 0 || !(info.mask & PIDFD_INFO_EXIT_BIT))
        return -1;
    return info.exit_code;
}

int jail_reap_init(struct jail *jail, err_t *err)
{
    if (jail->init_reaped)
        return 1;
    if (jail->pidfd < 0)
        return err_set(err, EBADF, "sandbox %s: no pidfd for init", jail->name);
    /* Readable once init has exited; until then it is running (or a zombie not yet readable). */
    struct pollfd pfd = {.fd = jail->pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) == 0)
        return 0;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    /* Exec gave init SIGCHLD as its exit signal, so a caller that reaps with waitpid(-1) can take
     * it first: then the kernel still tells its status through the pidfd (6.15+). */
    int status = -1;
    if (waitid(P_PIDFD, (id_t)jail->pidfd, &info, WEXITED | WNOHANG | __WALL) == 0) {
        if (info.si_pid == 0)
            return 0;
        status = status_of(&info);
    } else if (errno == ECHILD) {
        status = status_from_pidfd(jail->pidfd);
    } else if (errno == EINTR) {
        return 0;
    } else {
        return err_set(err, errno, "sandbox %s: wait for init", jail->name);
    }
    jail->init_reaped = true;
    jail->init_status = status;
    jail->pid = 0;
    if (status == -1)
        return err_set(err, 0,
                       "sandbox %s: init has ended, but another reaper collected its status and "
                       "this kernel cannot tell it through the pidfd (Linux 6.15+ can)",
                       jail->name);
    /* Init's own filter is an allow-list: a call it lacks kills init, and the sandbox with it.
     * Never the program's fault, so never silent. */
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
        return err_set(err, 0, "sandbox %s: init was killed by its seccomp filter (SIGSYS)",
                       jail->name);
    return 1;
}

int jail_remove(struct jail *jail, err_t *err)
{
    if (!jail->cgroup)
        return 0;
    return cgroup_remove(jail->cgroup, err);
}

/* Tells the keeper that everything is gone (a byte) or that it must clean up (EOF). It exits
 * either way; jail_reap collects it. */
static void keeper_release(struct jail *jail, bool cleaned_up)
{
    if (jail->keeper_fd < 0)
        return;
    if (cleaned_up) {
        char byte = 'd';
        (void)!send(jail->keeper_fd, &byte, 1, MSG_NOSIGNAL);
    }
    close(jail->keeper_fd);
    jail->keeper_fd = -1;
}

void jail_close(struct jail *jail)
{
    bool removed = !jail->cgroup || cgroup_removed(jail->cgroup);
    cgroup_free(jail->cgroup);
    cgroup_free(jail->init_cgroup); /* a handle only: removed with its parent */
    jail->cgroup = jail->init_cgroup = NULL;
    keeper_release(jail, removed);
    int *fds[] = {&jail->pidfd, &jail->control_fd, &jail->output_dirfd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}

void jail_reap(struct jail *jail)
{
    if (jail->keeper_pid > 0) {
        while (waitpid(jail->keeper_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        jail->keeper_pid = 0;
    }
}

/* ---------- destroy, waiting ---------- */

static void wait_fd(int fd, short events, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    poll(fd >= 0 ? &pfd : NULL, fd >= 0 ? 1 : 0, ms);
}

int jail_destroy(struct jail *jail, err_t *err)
{
    int rc = 0;
    uint64_t deadline = jail_now_ns() + DESTROY_TIMEOUT_MS * 1000000ull;
    /* Usually init is gone already (the payload ended): then there is nothing to kill. */
    if (jail->pidfd >= 0 && !jail->init_reaped) {
        int reaped = jail_reap_init(jail, err);
        if (reaped == 0 && jail_kill(jail, err) < 0)
            rc = -1;
        while (reaped == 0 && (reaped = jail_reap_init(jail, rc < 0 ? NULL : err)) == 0) {
            if (jail_now_ns() >= deadline) {
                rc = rc < 0 ? rc
                            : err_set(err, ETIMEDOUT,
                                      "sandbox %s: init still alive %d ms after SIGKILL",
                                      jail->name, DESTROY_TIMEOUT_MS);
                break;
            }
            wait_fd(jail->pidfd, POLLIN, 10);
        }
        if (reaped < 0)
            rc = -1;
    }
    if (jail->cgroup) {
        /* Kills what is left (a process that joined outside the namespace) and waits, bounded,
         * for the directories to go; frees the handle either way. */
        err_t local;
        bool removed = cgroup_destroy(jail->cgroup, &local) == 0;
        jail->cgroup = NULL;
        if (!removed) {
            if (rc == 0 && err)
                *err = local;
            rc = -1;
        }
        keeper_release(jail, removed);
    }
    jail_close(jail);
    return rc;
}
