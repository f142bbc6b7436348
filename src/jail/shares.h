/* The sandbox's own share of kernel state that is counted per user: set from inside its user
 * namespace (the child, with the namespace's capabilities) before anything of the sandbox's runs,
 * where the sandbox cannot raise it again (its processes hold no capability, /proc/sys is
 * read-only inside, and a hard rlimit cannot be raised in a user namespace). */
#pragma once
#include "jail/jail.h"

/* The namespace's /proc/sys/user limits (inotify, fanotify, namespaces) and a session keyring
 * of the sandbox's own. Dies over ctl on failure. Returns an fd to max_cgroup_namespaces, which
 * can only be closed to 0 after the child's own cgroup namespace exists (or -1 if the kernel has
 * no such file): pass it to shares_close_cgroup_namespaces. */
int shares_apply(int ctl, const struct jail_limits *limits);
/* Sets max_cgroup_namespaces to max (0 for a one-shot sandbox; an agent sandbox's commands make
 * one each) and closes fd. */
void shares_close_cgroup_namespaces(int ctl, int fd, unsigned max);
