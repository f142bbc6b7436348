/* Resource control for one sandbox: cgroup v2, v1 (legacy) and hybrid behind one interface.
 * The mode is detected at run time; HUTCH_CGROUP_MODE=v1|v2|hybrid forces one (for tests).
 * Every call here is made from the host side (parent, supervisor, keeper), never from inside. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "util/err.h"

enum cgroup_mode {
    CGROUP_MODE_V1,     /* legacy: one hierarchy per controller */
    CGROUP_MODE_HYBRID, /* v1 controllers, plus cgroup2 (no controllers) at /sys/fs/cgroup/unified */
    CGROUP_MODE_V2,     /* unified hierarchy with controllers */
};

struct cgroup_limits {
    uint64_t memory_bytes; /* 0 = no limit; swap is never allowed on top of it */
    uint64_t pids;         /* 0 = no limit */
};

struct cgroup_stats {
    uint64_t cpu_usage_ns;      /* user+system CPU time of every process ever in the cgroup */
    uint64_t memory_peak_bytes; /* high-water mark of charged memory */
    uint64_t oom_kills;         /* processes killed by the OOM killer because of our limit */
    uint64_t pids_current;
};

struct cgroup;

const char *cgroup_mode_name(enum cgroup_mode mode);
/* Detects the host's mode (statfs of /sys/fs/cgroup, as crun does), honouring HUTCH_CGROUP_MODE. */
int cgroup_detect(enum cgroup_mode *mode, err_t *err);
/* Creates hutch/NAME in every hierarchy it needs and writes every limit before any process
 * joins. A controller the host lacks is an error that names it. */
int cgroup_create(const char *name, const struct cgroup_limits *limits, struct cgroup **out,
                  err_t *err);
/* cgroup_create in two steps, so that a sandbox can be building its root filesystem while the
 * v1 groups are made: the first makes only what clone3(CLONE_INTO_CGROUP) needs (the cgroup2
 * group, with its limits on v2; nothing on pure v1), the second the v1 groups and their limits.
 * A process cloned in between must join the v1 groups (cgroup_self_attach) before it runs
 * anything untrusted. After a failure of the second, cgroup_destroy cleans up both. */
int cgroup_create_for_clone(const char *name, const struct cgroup_limits *limits,
                            struct cgroup **out, err_t *err);
int cgroup_create_finish(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
/* The absolute path of FILE in hutch/NAME of the hierarchy that holds CONTROLLER ("memory",
 * "pids", "cpuacct", "freezer", or "" for the cgroup2 group); FILE "" gives the directory itself.
 * Found from the group's own directory fds, not by looking at the mounts again. -1 with err when
 * the group has no such hierarchy (e.g. "freezer" on hybrid, "" on v1) or the path does not fit. */
int cgroup_file_path(const struct cgroup *cg, const char *controller, const char *file, char *out,
                     size_t size, err_t *err);
/* fd of the cgroup2 directory for clone3(CLONE_INTO_CGROUP), or -1 on pure v1. Owned by cg. */
int cgroup_clone_into_fd(const struct cgroup *cg);
/* Moves pid into the hierarchies that CLONE_INTO_CGROUP did not cover (all of them on v1). */
int cgroup_attach(struct cgroup *cg, pid_t pid, err_t *err);
/* Self-attach, for v1 hierarchies: a freshly cloned child moves itself by writing "0" to each
 * hierarchy's `tasks` file. Moving only the calling thread skips the kernel's global
 * cgroup_threadgroup_rwsem, whose write side waits for an RCU grace period (about 10 ms per
 * run here); the child is single-threaded, so its whole process moves. The parent opens the files
 * (the kernel checks the opener's credentials, so the child's user namespace does not matter).
 * Opens one fd per v1 hierarchy into fds (at most max); *n gets the count (0 on pure v2). */
int cgroup_self_attach_open(const struct cgroup *cg, int *fds, size_t max, size_t *n, err_t *err);
/* In the child, first thing: async-signal-safe; closes the fds. 0, or -1 with errno. */
int cgroup_self_attach(const int *fds, size_t n);
/* Only the CPU counter (one file): what the supervisor polls. */
int cgroup_read_cpu_ns(struct cgroup *cg, uint64_t *ns, err_t *err);
int cgroup_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
/* SIGKILLs every process in the cgroup and waits (bounded) until it is empty. */
int cgroup_kill(struct cgroup *cg, err_t *err);
int cgroup_set_frozen(struct cgroup *cg, bool frozen, err_t *err);
/* Kills and removes whatever exists of hutch/NAME, found afresh (for a keeper whose supervisor
 * died, perhaps half-way through cgroup_create). Nothing there is no error. */
int cgroup_remove_by_name(const char *name, err_t *err);
/* Kills what is left, removes the directories, frees cg. Safe on NULL. */
int cgroup_destroy(struct cgroup *cg, err_t *err);
