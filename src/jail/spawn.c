/* The parent side of starting a sandbox: cgroup first, then clone3 into fresh namespaces, the id
 * maps, the go signal, and the wait for init's READY. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/jail.h"
#include "jail/userns.h"
#include "jail/writable_root.h"
#include "util/cleanup.h"
#include "util/fds.h"
#include "util/proctitle.h"

#define SETUP_TIMEOUT_MS 30000

uint64_t jail_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The program compiled at build time (tools/seccomp_gen.c): compiling costs more than half a
 * millisecond, loading nothing. */
static const struct seccomp_program *seccomp_for(enum seccomp_profile profile, err_t *err)
{
    /* The init profile is init's own: it would kill a payload before its exec. */
    static struct seccomp_program programs[2];
    if ((unsigned)profile >= sizeof programs / sizeof programs[0] ||
        seccomp_builtin(profile, &programs[profile]) < 0) {
        err_set(err, EINVAL, "unknown seccomp profile %d", (int)profile);
        return NULL;
    }
    return &programs[profile];
}

/* Absolute, and no ".." component: nothing may point above the sandbox's root. */
static bool sandbox_path_ok(const char *path)
{
    if (!path || path[0] != '/' || path[1] == '\0')
        return false;
    for (const char *p = path; (p = strstr(p, "..")); p += 2)
        if (p[-1] == '/' && (p[2] == '/' || p[2] == '\0'))
            return false;
    return true;
}

static bool nofile_needs_raise(const struct jail_spec *spec)
{
    struct rlimit rl;
    return spec->limits.nofile && getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
           spec->limits.nofile > rl.rlim_max;
}

static bool have_capability(int cap)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    return syscall(SYS_capget, &hdr, data) == 0 && (data[cap / 32].effective & (1u << (cap % 32)));
}

static int validate_spec(const struct jail_spec *spec, err_t *err)
{
    if (!spec->name || !spec->template_dir || !spec->usr_dir || !spec->stage_dir)
        return err_set(err, EINVAL, "sandbox spec: name and layer directories are required");
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return err_set(err, EINVAL, "sandbox spec: no command");
    if (!spec->envp)
        return err_set(err, EINVAL, "sandbox spec: no environment");
    /* The child overwrites the argv area (proctitle_set) before it execs the payload. */
    for (size_t i = 0; spec->argv[i]; i++)
        if (proctitle_contains(spec->argv[i]))
            return err_set(err, EINVAL,
                           "sandbox spec: argv[%zu] lives in the process's own "
                           "argv area; copy it",
                           i);
    if (nofile_needs_raise(spec) && !have_capability(CAP_SYS_RESOURCE)) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        return err_set(err, 0,
                       "open-file limit %llu is above this process's own hard limit %llu, "
                       "which it cannot raise without CAP_SYS_RESOURCE (see ulimit -Hn)",
                       (unsigned long long)spec->limits.nofile, (unsigned long long)rl.rlim_max);
    }
    if (spec->cwd && spec->cwd[0] != '/')
        return err_set(err, EINVAL, "sandbox spec: working directory %s is not absolute",
                       spec->cwd);
    if (spec->n_files > JAIL_MAX_FILES)
        return err_set(err, E2BIG, "sandbox spec: %zu files, at most %u", spec->n_files,
                       JAIL_MAX_FILES);
    /* 0-2 become the sandbox's stdio in the child, before the files are copied. */
    for (size_t i = 0; i < spec->n_files; i++)
        if (spec->files[i].host_fd < 3)
            return err_set(err, EBADF, "sandbox spec: file source fd %d is one of stdio's",
                           spec->files[i].host_fd);
    if (spec->limits.disk_bytes == 0)
        return err_set(err, EINVAL, "sandbox spec: the writable layer needs a size");
    /* Sizes the kernel would round past 2^64: tmpfs turns size=16E into 0 pages, which it
     * reads as no limit at all. The same care for every figure that is scaled on the way. */
    if (spec->limits.disk_bytes > JAIL_MAX_DISK_BYTES)
        return err_set(err, EINVAL, "sandbox spec: writable layer of %llu bytes, at most %llu",
                       (unsigned long long)spec->limits.disk_bytes,
                       (unsigned long long)JAIL_MAX_DISK_BYTES);
    if (spec->limits.cpu_time_ms > JAIL_MAX_TIME_MS)
        return err_set(err, EINVAL, "sandbox spec: CPU time of %llu ms, at most %llu",
                       (unsigned long long)spec->limits.cpu_time_ms,
                       (unsigned long long)JAIL_MAX_TIME_MS);
    if (spec->host_uid_base == 0 || spec->host_uid_base < USERNS_HOST_BASE)
        return err_set(err, EINVAL, "sandbox spec: host uid range %u would include host users",
                       (unsigned)spec->host_uid_base);
    for (size_t i = 0; i < spec->n_files; i++)
        if (!sandbox_path_ok(spec->files[i].sandbox_path))
            return err_set(err, EINVAL,
                           "sandbox spec: file destination %s must be absolute, "
                           "without ..",
                           spec->files[i].sandbox_path);
    for (size_t i = 0; i < spec->n_mounts; i++)
        if (!spec->mounts[i].host_path || !sandbox_path_ok(spec->mounts[i].sandbox_path))
            return err_set(err, EINVAL, "sandbox spec: mount target must be absolute, without ..");
    return 0;
}

/* The keeper outlives a supervisor killed with SIGKILL and removes the cgroup it left behind;
 * holding keep_fd (the uid range lock) until then keeps the range from being reused early. */
static int keeper_start(struct jail *jail, const char *cgroup_name, int keep_fd, err_t *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return err_set(err, errno, "keeper pipe");
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_set(err, errno, "fork keeper");
    }
    if (pid == 0) {
        int keep[2] = {fds[0], keep_fd};
        fd_close_all_except(keep, 2);
        /* Out of the supervisor's session and deaf to its signals: Ctrl-C or a group kill
         * aimed at the supervisor must not take the keeper before it has cleaned up. */
        setsid();
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        char byte;
        ssize_t n;
        do {
            n = read(fds[0], &byte, 1);
        } while (n < 0 && errno == EINTR);
        if (n != 1) {
            err_t ignored;
            cgroup_remove_by_name(cgroup_name, &ignored);
        }
        _exit(0);
    }
    close(fds[0]);
    jail->keeper_pid = pid;
    jail->keeper_fd = fds[1];
    return 0;
}

/* Tells the keeper that everything is gone (a byte) or that it must clean up (EOF). It exits
 * either way; jail_reap collects it. */
static void keeper_release(struct jail *jail, bool cleaned_up)
{
    if (jail->keeper_fd < 0)
        return;
    if (cleaned_up) {
        char byte = 'd';
        (void)!write(jail->keeper_fd, &byte, 1);
    }
    close(jail->keeper_fd);
    jail->keeper_fd = -1;
}

void jail_reap(struct jail *jail)
{
    if (jail->keeper_pid > 0) {
        while (waitpid(jail->keeper_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        jail->keeper_pid = 0;
    }
}

/* The user namespace belongs to the effective uid that creates it, and the kernel charges every
 * per-user counter of the processes inside (inotify instances and watches, pending signals,
 * message-queue bytes, locked memory, namespaces) to that owner too, in the host's namespace and
 * against the host's per-user limits. Created by host root, one sandbox holding 128 inotify
 * instances or 96,000 queued signals would leave none for host root and every other sandbox.
 * So the namespace is created under the last id of the sandbox's own range (JAIL_UID_MAPPED),
 * mapped to nothing inside: the sums land on an id no process or file can ever carry. The
 * process's real and saved ids stay 0, so it switches back after the clone, and the fs uid
 * stays 0: CLONE_INTO_CGROUP needs write access to the cgroups' root-owned cgroup.procs. */
struct owner_switch {
    int dumpable;
};

static int owner_enter(uid_t owner, struct owner_switch *sw)
{
    sw->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (setresgid((gid_t)-1, owner, (gid_t)-1) < 0)
        return -1;
    if (setresuid((uid_t)-1, owner, (uid_t)-1) < 0) {
        int saved = errno;
        (void)!setresgid((gid_t)-1, 0, (gid_t)-1);
        errno = saved;
        return -1;
    }
    setfsuid(0);
    return 0;
}

/* Back to root; the euid change made us non-dumpable, which we were not. */
static void owner_leave(const struct owner_switch *sw)
{
    /* Cannot fail: the real and saved ids are 0. */
    (void)!setresuid((uid_t)-1, 0, (uid_t)-1);
    (void)!setresgid((gid_t)-1, 0, (gid_t)-1);
    if (sw->dumpable > 0)
        prctl(PR_SET_DUMPABLE, sw->dumpable, 0, 0, 0);
}

static pid_t clone_into_namespaces(struct jail *jail, uid_t owner, int *pidfd)
{
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                 CLONE_NEWUTS | CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    int cgfd = cgroup_clone_into_fd(jail->cgroup);
    if (cgfd >= 0) {
        /* Born inside its cgroup: charged and countable from its first instruction. */
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)cgfd;
    }
    struct owner_switch sw;
    if (owner_enter(owner, &sw) < 0)
        return -1;
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid != 0) {
        int saved = errno;
        owner_leave(&sw);
        errno = saved;
    }
    return pid;
}

/* Makes the v1 groups (with their limits) while the child builds its root filesystem, and hands
 * it their `tasks` files: it joins them itself before it forks anything untrusted. */
static int send_cgroups(struct jail *jail, const struct cgroup_limits *limits, err_t *err)
{
    if (cgroup_create_finish(jail->cgroup, limits, err) < 0)
        return -1;
    int fds[CONTROL_MAX_FDS];
    size_t n = 0;
    if (cgroup_self_attach_open(jail->cgroup, fds, CONTROL_MAX_FDS, &n, err) < 0)
        return -1;
    struct control_msg msg = {.type = CONTROL_CGROUPS, .code = (int32_t)n};
    int rc = control_send_fds(jail->control_fd, &msg, fds, n);
    int saved = errno;
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    return rc < 0 ? err_set(err, saved, "send cgroups to sandbox init") : 0;
}

/* Waits for init's READY. Returns 0, or -1 with err filled from the child's own report. */
static int wait_ready(struct jail *jail, err_t *err)
{
    struct pollfd pfd = {.fd = jail->control_fd, .events = POLLIN};
    int rc;
    do {
        rc = poll(&pfd, 1, SETUP_TIMEOUT_MS);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0)
        return err_set(err, ETIMEDOUT, "sandbox setup took over %d ms", SETUP_TIMEOUT_MS);
    struct control_msg msg;
    int fd = -1;
    rc = control_recv(jail->control_fd, &msg, &fd);
    if (rc < 0)
        return err_set(err, errno, "sandbox setup: control channel");
    if (rc == 0)
        return err_set(err, EPIPE, "sandbox init died during setup");
    if (msg.type == CONTROL_SETUP_ERROR) {
        if (fd >= 0)
            close(fd);
        err_set(err, 0, "sandbox setup: %s", msg.text);
        err->errnum = msg.code > 0 ? msg.code : EIO;
        return -1;
    }
    if (msg.type != CONTROL_READY) {
        if (fd >= 0)
            close(fd);
        return err_set(err, EBADMSG, "sandbox setup: unexpected message %u", msg.type);
    }
    jail->output_dirfd = fd;
    jail->start_ns = jail_now_ns();
    return 0;
}

static void jail_init_empty(struct jail *jail, const char *name)
{
    memset(jail, 0, sizeof *jail);
    snprintf(jail->name, sizeof jail->name, "%s", name);
    jail->pidfd = jail->control_fd = jail->output_dirfd = jail->keeper_fd = -1;
}

int jail_start(const struct jail_spec *spec, struct jail *out, err_t *err)
{
    jail_init_empty(out, spec->name ? spec->name : "");
    if (validate_spec(spec, err) < 0)
        return -1;
    const struct seccomp_program *prog = seccomp_for(spec->seccomp, err);
    if (!prog)
        return -1;
    struct cgroup_limits cg_limits = {.memory_bytes = spec->limits.memory_bytes,
                                      .pids = spec->limits.pids};
    /* The keeper first: from the first mkdir on, a SIGKILLed supervisor leaves nothing. */
    if (spec->die_with_parent && keeper_start(out, spec->name, spec->keep_fd, err) < 0)
        return -1;
    /* Only what clone3 needs now; the v1 groups are made while the child builds its root. */
    if (cgroup_create_for_clone(spec->name, &cg_limits, &out->cgroup, err) < 0)
        goto fail;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_set(err, errno, "control socketpair");
        goto fail;
    }
    out->control_fd = sv[0];
    /* The child's end must not be one of 0-2, which become the sandbox's stdio there. */
    if (sv[1] < 3) {
        int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
        close(sv[1]);
        if (moved < 0) {
            err_set(err, errno, "control socket");
            goto fail;
        }
        sv[1] = moved;
    }
    pid_t pid = clone_into_namespaces(out, spec->host_uid_base + JAIL_UID_MAPPED, &out->pidfd);
    if (pid < 0) {
        err_set(err, errno, "clone3 into new namespaces");
        close(sv[1]);
        goto fail;
    }
    if (pid == 0) {
        close(sv[0]);
        if (out->keeper_fd >= 0)
            close(out->keeper_fd); /* or the keeper would never see the supervisor die */
        jail_child_main(spec, sv[1], prog);
    }
    close(sv[1]);
    out->pid = pid;
    if (userns_write_maps(pid, spec->host_uid_base, JAIL_UID_MAPPED, err) < 0)
        goto fail;
    /* Above our own hard limit only we can raise it (validate_spec checked that we may); the
     * child sets anything below it itself. */
    if (nofile_needs_raise(spec)) {
        struct rlimit rl = {.rlim_cur = spec->limits.nofile, .rlim_max = spec->limits.nofile};
        if (prlimit(pid, RLIMIT_NOFILE, &rl, NULL) < 0) {
            err_set(err, errno, "open-file limit %llu (at most fs.nr_open)",
                    (unsigned long long)spec->limits.nofile);
            goto fail;
        }
    }
    if (control_send_simple(out->control_fd, CONTROL_GO, 0, 0, NULL) < 0) {
        err_set(err, errno, "send go to sandbox init");
        goto fail;
    }
    /* While the child does its first steps; it receives them when it builds its root. */
    if (spec->writable_root && writable_root_send(out->control_fd, pid, spec, err) < 0)
        goto fail;
    if (send_cgroups(out, &cg_limits, err) < 0) {
        /* The child may have failed first (a missing bind source) and closed its end: its own
         * report, already queued on the channel, says why better than our EPIPE. */
        err_t child_err = {0};
        if ((err->errnum == EPIPE || err->errnum == ECONNRESET) &&
            wait_ready(out, &child_err) < 0 && child_err.errnum != EPIPE)
            *err = child_err;
        goto fail;
    }
    if (wait_ready(out, err) < 0)
        goto fail;
    return 0;
fail:;
    err_t ignored;
    jail_destroy(out, &ignored);
    jail_reap(out);
    return -1;
}

int jail_destroy(struct jail *jail, err_t *err)
{
    int rc = 0;
    if (jail->pid > 0) {
        if (jail->pidfd >= 0)
            syscall(SYS_pidfd_send_signal, jail->pidfd, SIGKILL, NULL, 0);
        int status = 0;
        while (waitpid(jail->pid, &status, 0) < 0 && errno == EINTR)
            ;
        jail->pid = 0;
        /* Init's own filter is an allow-list: a call it lacks kills init, and the sandbox with
         * it. Never the program's fault, so never silent. */
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
            rc = err_set(err, 0, "sandbox init was killed by its seccomp filter (SIGSYS)");
    }
    bool removed = true;
    if (jail->cgroup) {
        removed = cgroup_destroy(jail->cgroup, rc < 0 ? &(err_t){0} : err) == 0;
        rc = removed ? rc : -1;
        jail->cgroup = NULL;
    }
    keeper_release(jail, removed);
    int *fds[] = {&jail->pidfd, &jail->control_fd, &jail->output_dirfd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
    return rc;
}
