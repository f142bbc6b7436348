/* A running sandbox's record on the host, so that a process that did not create it (a restarted
 * daemon, the CLI) can find it by name and reopen it: kill, freeze, thaw, inspect, and (through
 * its init's socket) start commands. One small text file per sandbox, NAME.sandbox, in a
 * directory of the caller's (the daemon's run directory; root-only). */
#pragma once
#include "jail/jail.h"

#define JAIL_RECORD_SUFFIX ".sandbox"

/* Writes NAME.sandbox in dirfd (atomically: a temporary file renamed into place) after
 * jail_start_complete: init's pid and start time (which together name that process and no
 * other), the uid range, the cgroup, and socket_name (the listening socket of its init,
 * relative to dirfd; NULL if none). */
int jail_record_save(const struct jail *jail, uid_t host_uid_base, int dirfd,
                     const char *socket_name, err_t *err);
/* Removes NAME.sandbox (after the sandbox is destroyed). A missing one is no error. */
int jail_record_remove(int dirfd, const char *name, err_t *err);

/* What a record says, checked. */
struct jail_record {
    char name[CGROUP_NAME_MAX + 1];
    pid_t pid;
    unsigned long long start_time; /* field 22 of /proc/PID/stat */
    uid_t host_uid_base;
    char cgroup[CGROUP_PATH_MAX + 1];
    char socket[CGROUP_NAME_MAX + 16]; /* "" if none */
};
int jail_record_load(int dirfd, const char *name, struct jail_record *out, err_t *err);

/* Reopens the sandbox a record names: a pidfd for its init (only if the process under that pid
 * is still the one recorded: same start time), its cgroup, and a connection to its init's socket
 * when it has one (control_fd, non-blocking; -1 otherwise). The jail is then as jail_start left
 * it, without a keeper. ESRCH when its init is gone: the caller records why and removes what is
 * left (cgroup_remove_by_name, jail_record_remove). */
int jail_reopen(struct cgroup_host *cgroups, int dirfd, const char *name, struct jail *out,
                struct jail_record *record, err_t *err);
