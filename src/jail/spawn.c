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

static int init_exec_fd = -1;

int jail_init_exec_fd(void)
{
    if (init_exec_fd < 0)
        init_exec_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    return init_exec_fd;
}

int jail_use_init_binary(const char *path, err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open %s (hutch init)", path);
    if (init_exec_fd >= 0)
        close(init_exec_fd);
    init_exec_fd = fd;
    return 0;
}

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

/* Every name and path against its bound in jail.h, before anything is made: a name cut short
 * names another sandbox, a path cut short another file. */
static int validate_lengths(const struct jail_spec *spec, err_t *err)
{
    const char *const host_dirs[] = {spec->template_dir, spec->usr_dir, spec->stage_dir,
                                     spec->layer_dir, spec->dpkg_dir};
    static const char *const host_dir_fields[] = {"template_dir", "usr_dir", "stage_dir",
                                                  "layer_dir", "dpkg_dir"};
    if (jail_check_length(spec->name, JAIL_MAX_NAME, err, "name") < 0 ||
        jail_check_length(spec->hostname, JAIL_MAX_HOSTNAME, err, "hostname") < 0 ||
        jail_check_length(spec->cwd, JAIL_MAX_SANDBOX_PATH, err, "cwd") < 0)
        return -1;
    for (size_t i = 0; i < sizeof host_dirs / sizeof host_dirs[0]; i++)
        if (jail_check_length(host_dirs[i], JAIL_MAX_HOST_PATH, err, "%s", host_dir_fields[i]) < 0)
            return -1;
    for (size_t i = 0; i < spec->n_files && i < JAIL_MAX_FILES; i++)
        if (jail_check_length(spec->files[i].sandbox_path, JAIL_MAX_SANDBOX_PATH, err,
                              "files[%zu].sandbox_path", i) < 0)
            return -1;
    for (size_t i = 0; i < spec->n_mounts; i++)
        if (jail_check_length(spec->mounts[i].host_path, JAIL_MAX_HOST_PATH, err,
                              "mounts[%zu].host_path", i) < 0 ||
            jail_check_length(spec->mounts[i].sandbox_path, JAIL_MAX_SANDBOX_PATH, err,
                              "mounts[%zu].sandbox_path", i) < 0)
            return -1;
    return jail_check_args(spec->argv, spec->envp, 0, err);
}

static int validate_spec(const struct jail_spec *spec, err_t *err)
{
    if (!spec->name || !spec->template_dir || !spec->usr_dir || !spec->stage_dir)
        return err_set(err, EINVAL, "sandbox spec: name and layer directories are required");
    if (!spec->cgroups)
        return err_set(err, EINVAL, "sandbox spec: no cgroup host");
    if (validate_lengths(spec, err) < 0)
        return err_wrap(err, "sandbox spec");
    if (!spec->argv) {
        if (spec->listen_fd < 3 || spec->die_with_parent)
            return err_set(err, EINVAL,
                           "sandbox spec: a sandbox with no command needs a "
                           "listening socket and must outlive its creator");
    } else if (!spec->argv[0] || !spec->argv[0][0]) {
        return err_set(err, EINVAL, "sandbox spec: empty command");
    }

    if (!spec->envp)
        return err_set(err, EINVAL, "sandbox spec: no environment");
    if (spec->limits.cpu_millis > JAIL_MAX_CPU_MILLIS)
        return err_set(err, EINVAL, "sandbox spec: cpu_millis %llu is above %llu",
                       (unsigned long long)spec->limits.cpu_millis, JAIL_MAX_CPU_MILLIS);
    /* The child overwrites the argv area (proctitle_set) before it execs the payload. */
    for (size_t i = 0; spec->argv && spec->argv[i]; i++)
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
    if (spec->writable_root && (!spec->layer_dir || !spec->layer_dir[0]))
        return err_set(err, EINVAL, "sandbox spec: a writable root needs a disk layer");
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
 * holding keep_fd (the uid range lock) until then keeps the range from being reused early. A
 * socket rather than a pipe: telling a keeper that died must not raise SIGPIPE (MSG_NOSIGNAL). */
static int keeper_start(struct jail *jail, const struct jail_spec *spec, err_t *err)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
        return err_set(err, errno, "keeper socketpair");
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_set(err, errno, "fork keeper");
    }
    if (pid == 0) {
        /* The cgroup host's hierarchy fds are kept: the removal goes through them. */
        int keep[2 + CGROUP_HOST_MAX_FDS];
        size_t n = 0;
        keep[n++] = fds[0];
        keep[n++] = spec->keep_fd;
        n += cgroup_host_fds(spec->cgroups, keep + n, CGROUP_HOST_MAX_FDS);
        fd_close_all_except(keep, n);
        /* Out of the supervisor's session and deaf to its signals: Ctrl-C or a group kill
         * aimed at the supervisor must not take the keeper before it has cleaned up. */
        setsid();
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        char byte;
        ssize_t n_read;
        do {
            n_read = read(fds[0], &byte, 1);
        } while (n_read < 0 && errno == EINTR);
        if (n_read != 1) {
            err_t ignored;
            cgroup_remove_by_name(spec->cgroups, spec->name, &ignored);
        }
        _exit(0);
    }
    close(fds[0]);
    jail->keeper_pid = pid;
    jail->keeper_fd = fds[1];
    return 0;
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

/* The child's exit signal is SIGCHLD, whatever clone3 says: exec resets it. Only the user and
 * pid namespaces are made here (the child must be the new pid namespace's init); the child makes
 * its mount, network, IPC and UTS namespaces itself as its first step (jail_child_main). Made
 * here, they cost the caller's clone3 the kernel's locks that every dying sandbox also takes
 * (namespace_sem for a mount namespace's copy, rtnl for a network namespace's loopback): in a
 * loaded guest that was over a second of the caller's loop. */
static pid_t clone_into_namespaces(struct jail *jail, uid_t owner, int *pidfd, err_t *err)
{
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    cleanup_fd int cgfd = -1;
    struct cgroup *into = jail->init_cgroup ? jail->init_cgroup : jail->cgroup;
    if (cgroup_mode_of(into) != CGROUP_MODE_V1) {
        cgfd = cgroup_open_dir_fd(into, err);
        if (cgfd < 0)
            return -1;
        /* Born inside its cgroup: charged and countable from its first instruction. */
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)cgfd;
    }
    struct owner_switch sw;
    if (owner_enter(owner, &sw) < 0)
        return err_set(err, errno, "become the namespace's owner");
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid != 0) {
        int saved = errno;
        owner_leave(&sw);
        errno = saved;
        if (pid < 0)
            err_set(err, errno, "clone3 into new namespaces");
    }
    return pid;
}

/* Makes the v1 groups (with their limits) while the child builds its root filesystem, and hands
 * it their `tasks` files: it joins them itself before it forks anything untrusted. */
static int send_cgroups(struct jail *jail, const struct cgroup_limits *limits, err_t *err)
{
    if (!jail->init_cgroup && cgroup_create_finish(jail->cgroup, limits, err) < 0)
        return -1;
    int fds[CONTROL_MAX_FDS];
    size_t n = 0;
    struct cgroup *into = jail->init_cgroup ? jail->init_cgroup : jail->cgroup;
    if (cgroup_self_attach_open(into, fds, CONTROL_MAX_FDS, &n, err) < 0)
        return -1;
    struct control_msg msg = {.type = CONTROL_CGROUPS, .code = (int32_t)n};
    int rc = control_send_fds(jail->control_fd, &msg, fds, n);
    int saved = errno;
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    return rc < 0 ? err_set(err, saved, "send cgroups to sandbox init") : 0;
}

static void jail_init_empty(struct jail *jail, const char *name)
{
    memset(jail, 0, sizeof *jail);
    snprintf(jail->name, sizeof jail->name, "%s", name);
    jail->pidfd = jail->control_fd = jail->output_dirfd = jail->keeper_fd = -1;
    jail->init_cgroup = NULL;
}

int jail_start_complete(struct jail *jail, err_t *err)
{
    if (jail->ready)
        return 0;
    struct control_msg msg;
    int fd = -1;
    int rc = control_recv(jail->control_fd, &msg, &fd);
    /* A child that failed and exited with our cgroup message unread resets the connection, and
     * the kernel reports that ahead of the child's own report, still queued: read that. */
    if (rc < 0 && errno == ECONNRESET)
        rc = control_recv(jail->control_fd, &msg, &fd);
    if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (jail_now_ns() < jail->setup_deadline_ns)
            return 1;
        return err_set(err, ETIMEDOUT, "sandbox setup took over %d ms", JAIL_SETUP_TIMEOUT_MS);
    }
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
    jail->ready = true;
    return 0;
}

/* The control socket's end for the child; ours is non-blocking (the caller's loop waits). */
static int control_pair(struct jail *jail, int *child_end, err_t *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return err_set(err, errno, "control socketpair");
    jail->control_fd = sv[0];
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
        close(sv[1]);
        return err_set(err, errno, "control socket");
    }
    /* The child's end must not be one of 0-2, which become the sandbox's stdio there. */
    if (sv[1] < 3) {
        int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
        close(sv[1]);
        if (moved < 0)
            return err_set(err, errno, "control socket");
        sv[1] = moved;
    }
    *child_end = sv[1];
    return 0;
}

/* After the clone: maps, limits only we can set, go, the v1 groups. */
static int start_child(const struct jail_spec *spec, struct jail *jail,
                       const struct cgroup_limits *cg_limits, err_t *err)
{
    if (userns_write_maps(jail->pid, spec->host_uid_base, JAIL_UID_MAPPED, err) < 0)
        return -1;
    /* Above our own hard limit only we can raise it (validate_spec checked that we may); the
     * child sets anything below it itself. */
    if (nofile_needs_raise(spec)) {
        struct rlimit rl = {.rlim_cur = spec->limits.nofile, .rlim_max = spec->limits.nofile};
        if (prlimit(jail->pid, RLIMIT_NOFILE, &rl, NULL) < 0)
            return err_set(err, errno, "open-file limit %llu (at most fs.nr_open)",
                           (unsigned long long)spec->limits.nofile);
    }
    if (control_send_simple(jail->control_fd, CONTROL_GO, 0, 0, NULL) < 0)
        return err_set(err, errno, "send go to sandbox init");
    /* The layers go while the child does its first steps (it takes them when it builds its
     * root, before it joins the cgroups), and before the cgroups, which it reads next. */
    if ((spec->writable_root && writable_root_send(jail->control_fd, jail->pid, spec, &jail->unmapped_lowers,
                                              err) < 0) ||
        send_cgroups(jail, cg_limits, err) < 0) {
        /* The child may have failed first (a missing bind source, a link planted at a writable
         * root's mount point) and closed its end: its own report, already queued on the
         * channel, says why better than our EPIPE. */
        err_t child_err = {0};
        if ((err->errnum == EPIPE || err->errnum == ECONNRESET) &&
            jail_start_complete(jail, &child_err) < 0 && child_err.errnum != EPIPE)
            *err = child_err;
        return -1;
    }
    return 0;
}

/* One-shot: hutch/NAME alone, the whole sandbox one OOM group, and only what clone3 needs now
 * (the v1 groups are made while the child builds its root). Agent sandboxes: hutch/NAME holds
 * the limits and hands its controllers down to hutch/NAME/init (init and its spawner) and to one
 * group per command; the sandbox's root may clone into them (cgroup_delegate_procs). */
static int make_cgroups(const struct jail_spec *spec, struct jail *out,
                        const struct cgroup_limits *limits, err_t *err)
{
    if (spec->argv)
        return cgroup_create_for_clone(spec->cgroups, spec->name, limits, CGROUP_OOM_GROUP,
                                       &out->cgroup, err);
    uid_t root = spec->host_uid_base;
    if (cgroup_create(spec->cgroups, NULL, spec->name, limits, CGROUP_NESTED, &out->cgroup, err) <
            0 ||
        cgroup_create(spec->cgroups, out->cgroup, "init", NULL, 0, &out->init_cgroup, err) < 0 ||
        cgroup_delegate_procs(out->cgroup, root, root, err) < 0 ||
        cgroup_delegate_procs(out->init_cgroup, root, root, err) < 0)
        return -1;
    return 0;
}

int jail_start_begin(const struct jail_spec *spec, struct jail *out, err_t *err)
{
    jail_init_empty(out, spec->name ? spec->name : "");
    out->host_uid_base = spec->host_uid_base;
    out->setup_deadline_ns = jail_now_ns() + JAIL_SETUP_TIMEOUT_MS * 1000000ull;
    if (validate_spec(spec, err) < 0)
        return -1;
    /* Init loads the program itself; an unknown profile is refused here, before anything. */
    if (!seccomp_for(spec->seccomp, err))
        return -1;
    if (jail_init_exec_fd() < 0)
        return err_set(err, errno, "open /proc/self/exe (to exec hutch init in the sandbox)");
    struct cgroup_limits cg_limits = {.memory_bytes = spec->limits.memory_bytes,
                                      .pids = spec->limits.pids,
                                      .cpu_millis = spec->limits.cpu_millis};
    /* The keeper first: from the first mkdir on, a SIGKILLed supervisor leaves nothing. */
    if (spec->die_with_parent && keeper_start(out, spec, err) < 0)
        return -1;
    int child_end = -1;
    if (make_cgroups(spec, out, &cg_limits, err) < 0 || control_pair(out, &child_end, err) < 0)
        goto fail;
    pid_t pid = clone_into_namespaces(out, spec->host_uid_base + JAIL_UID_MAPPED, &out->pidfd, err);
    if (pid < 0) {
        close(child_end);
        goto fail;
    }
    if (pid == 0) {
        close(out->control_fd);
        if (out->keeper_fd >= 0)
            close(out->keeper_fd); /* or the keeper would never see the supervisor die */
        jail_child_main(spec, child_end);
    }
    close(child_end);
    out->pid = pid;
    if (start_child(spec, out, &cg_limits, err) < 0)
        goto fail;
    return 0;
fail:;
    err_t ignored;
    jail_destroy(out, &ignored);
    jail_reap(out);
    return -1;
}

int jail_start(const struct jail_spec *spec, struct jail *out, err_t *err)
{
    if (jail_start_begin(spec, out, err) < 0)
        return -1;
    int rc;
    while ((rc = jail_start_complete(out, err)) == 1) {
        /* The deadline is absolute: a signal that interrupts the poll does not restart it. */
        uint64_t now = jail_now_ns();
        int left_ms =
            out->setup_deadline_ns > now ? (int)((out->setup_deadline_ns - now) / 1000000u) + 1 : 0;
        struct pollfd pfd = {.fd = out->control_fd, .events = POLLIN};
        poll(&pfd, 1, left_ms);
    }
    if (rc == 0)
        return 0;
    err_t ignored;
    jail_destroy(out, &ignored);
    jail_reap(out);
    return -1;
}
