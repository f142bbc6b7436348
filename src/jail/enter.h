/* Entering a running sandbox from the host, without an execve: how a process forked from the
 * host's python zygote (src/interp/python_zygote.py --host) becomes a command of a sandbox, with
 * the memory it was forked with (IPython and the data stack imported once, for every sandbox).
 *
 * Built into build/libhutch-enter.so, which the zygote loads (ctypes); nothing of hutch's
 * daemon links it. Two halves, because entering a pid namespace takes a fork:
 *
 *   1. hutch_enter_prepare, in a child of the zygote, still host root, outside: a fresh
 *      session keyring, the sandbox's rlimits (init's own, which every command inherits),
 *      umask 022, the command's cgroups (joined, so that all it does from here is charged to
 *      it), then the sandbox's user, mount, network, IPC, UTS and pid namespaces (init's, by
 *      its pidfd: setns with all of them at once). The mount namespace puts root and cwd at the
 *      sandbox's root. The caller is not yet in the pid namespace: it forks.
 *   2. hutch_enter_confine, in that fork (a process of the sandbox's pid namespace): a cgroup
 *      namespace of its own, a session of its own, then exactly a command's last steps
 *      (payload_confine: privileges dropped to the sandbox's user, bounding set emptied,
 *      no_new_privs, cwd resolved inside the root, the Landlock domain, the seccomp filter).
 *
 * After 2 the process is as confined as any command the sandbox's init starts, with one
 * difference: it never execs, so its memory stays non-dumpable (payload_confine leaves it so),
 * and no process of the sandbox can open its /proc/PID/{mem,environ,fd}. Its parent is outside
 * the sandbox (the zygote, a subreaper, reaps it); inside, its parent pid reads 0. */
#pragma once
#include <stddef.h>

/* What the library exports (it is built with hidden visibility otherwise). */
#define ENTER_API __attribute__((visibility("default")))

/* 0, or -1 with a message in msg. cgroup_dir_fd: the command's cgroup2 directory, or -1 (v1
 * only); v1_fds: its v1 groups' "tasks" files (cgroup_self_attach_open), n_v1 of them. */
ENTER_API int hutch_enter_prepare(int init_pidfd, int cgroup_dir_fd, const int *v1_fds, int n_v1,
                                  char *msg, size_t msg_size);
/* 0, or -1 with a message in msg. cwd: the command's, inside the sandbox (NULL: the user's
 * home); profile: a seccomp_profile; writable_root: the sandbox's (jail_spec.writable_root). */
ENTER_API int hutch_enter_confine(const char *cwd, int profile, int writable_root, char *msg,
                                  size_t msg_size);
