/* Why shares: the kernel counts inotify instances and watches, fanotify groups and marks,
 * namespaces, pending signals, message-queue bytes and locked memory per user, in the user's own
 * namespace and again, summed, for the namespace's owner in the parent namespace. The owner is an
 * id of the sandbox's own (spawn.c), so the sum harms nobody else; these limits bound what one
 * sandbox may take of the kernel at all. The rlimits among them are set in privs.c. */
#include "jail/shares.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/control.h"
#include "util/fileio.h"

/* Still the host's /proc: its sys/user shows the user namespace of whoever reads it. */
#define USER_SYSCTL_DIR "/proc/sys/user/"

static void set_user_limit(int ctl, const char *name, unsigned long long value)
{
    char path[96], text[24];
    snprintf(path, sizeof path, USER_SYSCTL_DIR "%s", name);
    snprintf(text, sizeof text, "%llu", value);
    err_t err;
    /* A file the kernel does not have (older kernels lack fanotify's) counts nothing. */
    if (file_write_str_at(AT_FDCWD, path, text, &err) < 0 && err.errnum != ENOENT)
        control_die(ctl, err.errnum, "set %s", path);
}

int shares_apply(int ctl, const struct jail_limits *limits)
{
    set_user_limit(ctl, "max_inotify_instances",
                   limits->inotify_instances ? limits->inotify_instances
                                             : JAIL_DEFAULT_INOTIFY_INSTANCES);
    set_user_limit(ctl, "max_inotify_watches",
                   limits->inotify_watches ? limits->inotify_watches
                                           : JAIL_DEFAULT_INOTIFY_WATCHES);
    /* Nothing inside may make these (seccomp refuses the calls too): none is the right share. */
    static const char *const none[] = {
        "max_fanotify_groups", "max_fanotify_marks", "max_user_namespaces",
        "max_pid_namespaces",  "max_net_namespaces", "max_mnt_namespaces",
        "max_ipc_namespaces",  "max_uts_namespaces", "max_time_namespaces",
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        set_user_limit(ctl, none[i], 0);
    /* The caller's session keyring would otherwise stay ours (a fork keeps it): a fresh,
     * anonymous one, charged to the sandbox's own root. */
    if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
        control_die(ctl, errno, "join a session keyring of the sandbox's own");
    int fd = open(USER_SYSCTL_DIR "max_cgroup_namespaces", O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT)
        control_die(ctl, errno, "open " USER_SYSCTL_DIR "max_cgroup_namespaces");
    return fd;
}

void shares_close_cgroup_namespaces(int ctl, int fd, unsigned max)
{
    if (fd < 0)
        return;
    char text[16];
    int len = snprintf(text, sizeof text, "%u", max);
    if (fd_write_all(fd, text, (size_t)len) < 0)
        control_die(ctl, errno, "set " USER_SYSCTL_DIR "max_cgroup_namespaces");
    close(fd);
}
