/* Entering a running sandbox from the host without an execve (enter.h). */
#include "jail/enter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "jail/payload.h"
#include "jail/seccomp.h"
#include "util/fileio.h"

__attribute__((format(printf, 3, 4))) static int fail(char *msg, size_t msg_size, const char *fmt,
                                                      ...)
{
    int e = errno;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (msg && msg_size)
        snprintf(msg, msg_size, "%s: %s", what, strerror(e));
    errno = e;
    return -1;
}

/* The pid a pidfd stands for, as this process sees it (its fdinfo's "Pid:"); 0 when gone. */
static pid_t pidfd_pid(int pidfd)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    long pid = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Pid: %ld", &pid) == 1)
            break;
    fclose(f);
    return pid > 0 ? (pid_t)pid : 0;
}

static int parse_limit(const char *text, rlim_t *out)
{
    char *end;
    if (strncmp(text, "unlimited", 9) == 0) {
        *out = RLIM_INFINITY;
        return 0;
    }
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text)
        return -1;
    *out = (rlim_t)v;
    return 0;
}

/* Every limit as init has it: what each command of the sandbox starts with. Read from
 * /proc/PID/limits (prlimit on another process needs CAP_SYS_RESOURCE, which hosts may
 * withhold), whose lines are in the resources' order: "%-25s %-20s %-20s ...". Init's limits are
 * the daemon's lowered (privs_apply_rlimits), so this only lowers ours: nothing needs a
 * capability. */
static int copy_rlimits(pid_t init)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)init);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int r = 0, rc = 0;
    bool header = true;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        if (header) {
            header = false;
            continue;
        }
        struct rlimit rl;
        if (r >= RLIM_NLIMITS || strlen(line) < 68 || parse_limit(line + 26, &rl.rlim_cur) < 0 ||
            parse_limit(line + 47, &rl.rlim_max) < 0) {
            errno = EINVAL;
            rc = -1;
        } else if (setrlimit(r++, &rl) < 0) {
            rc = -1;
        }
    }
    fclose(f);
    if (rc == 0 && r != RLIM_NLIMITS) {
        errno = EINVAL;
        rc = -1;
    }
    return rc;
}

static int join_cgroups(int dir_fd, const int *v1_fds, int n_v1)
{
    if (dir_fd >= 0) {
        int fd = openat(dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        ssize_t w = write(fd, "0", 1);
        int e = errno;
        close(fd);
        if (w != 1) {
            errno = e;
            return -1;
        }
    }
    return n_v1 > 0 ? cgroup_self_attach(v1_fds, (size_t)n_v1) : 0;
}

int hutch_enter_prepare(int init_pidfd, int cgroup_dir_fd, const int *v1_fds, int n_v1, char *msg,
                        size_t msg_size)
{
    /* Born in the sandbox's pid namespace (the zygote forked us so): there, or nothing. */
    pid_t init = pidfd_pid(init_pidfd);
    if (init <= 0)
        return errno = ESRCH, fail(msg, msg_size, "the sandbox's init");
    char theirs_path[64];
    snprintf(theirs_path, sizeof theirs_path, "/proc/%d/ns/pid", (int)init);
    struct stat mine, theirs;
    if (stat("/proc/self/ns/pid", &mine) < 0 || stat(theirs_path, &theirs) < 0)
        return fail(msg, msg_size, "the pid namespaces");
    if (mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev)
        return errno = EINVAL, fail(msg, msg_size, "not born in the sandbox's pid namespace");
    if (n_v1 < 0 || n_v1 > 16)
        return errno = EINVAL, fail(msg, msg_size, "%d v1 groups", n_v1);
    /* Non-dumpable from here to the end (payload.never_execs): our memory belongs to the host's
     * user namespace, so no process of the sandbox, whatever its capabilities there, may then
     * open our /proc/PID/{mem,environ,fd} or trace us, in the steps below or ever after. The
     * OOM killer's choice, as every command's, while we still may set it. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
        file_write_str_at(AT_FDCWD, "/proc/self/oom_score_adj", "1000", NULL) < 0)
        return fail(msg, msg_size, "non-dumpable, oom_score_adj");
    /* The zygote's session keyring (host root's) is not to be held inside: a fresh one, empty.
     * (The sandbox's filter refuses the keyring calls anyway.) */
    if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
        return fail(msg, msg_size, "join a session keyring of its own");
    if (copy_rlimits(init) < 0)
        return fail(msg, msg_size, "the sandbox's rlimits");
    umask(022);
    if (join_cgroups(cgroup_dir_fd, v1_fds, n_v1) < 0)
        return fail(msg, msg_size, "join the command's cgroups");
    /* Not its cgroup namespace: init's is the host's (an agent sandbox's commands each make
     * their own, as hutch_enter_confine does), and entering the host's own needs capabilities
     * there, which the new user namespace does not give. */
    int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
    if (setns(init_pidfd, flags) < 0)
        return fail(msg, msg_size, "enter the sandbox's namespaces");
    return 0;
}

int hutch_enter_confine(const char *cwd, int profile, int writable_root, char *msg, size_t msg_size)
{
    struct seccomp_program prog;
    if (seccomp_builtin((enum seccomp_profile)profile, &prog) < 0)
        return errno = EINVAL, fail(msg, msg_size, "seccomp profile %d", profile);
    /* Its own group is the root of what it sees in /proc/self/cgroup, as every command's. */
    if (unshare(CLONE_NEWCGROUP) < 0)
        return fail(msg, msg_size, "unshare cgroup namespace");
    if (setsid() < 0)
        return fail(msg, msg_size, "setsid");
    struct payload p = {
        .cwd = cwd, .as_root = false, .writable_root = writable_root != 0, .never_execs = true};
    const char *what;
    if (payload_confine(&p, &prog, &what) < 0)
        return fail(msg, msg_size, "%s", what);
    return 0;
}
