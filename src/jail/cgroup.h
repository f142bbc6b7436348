/* Resource control for sandboxes: cgroup v2, v1 (legacy) and hybrid behind one interface.
 *
 * A process opens the host once (struct cgroup_host: the mode, detected or given, every
 * hierarchy's hutch/ directory opened, the table of operations for that mode chosen), then makes
 * groups below it: a sandbox's group hutch/NAME, and below a nested one its init's group and one
 * per command (hutch/NAME/init, hutch/NAME/cmd-3). A group holds no fd of its own: it is a path
 * below the host's directories, so an idle sandbox costs its caller none.
 *
 * Every call returns without sleeping except the blocking compositions at the end (for
 * `hutch run`, the keeper, doctor and tests). Every call is made from the host side, never from
 * inside a sandbox. */
#pragma once
#include "util/err.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_mode {
    CGROUP_MODE_V1,     /* legacy: one hierarchy per controller */
    CGROUP_MODE_HYBRID, /* v1 controllers, plus cgroup2 (no controllers) at /sys/fs/cgroup/unified
                         */
    CGROUP_MODE_V2,     /* unified hierarchy with controllers */
};
#define CGROUP_MODE_DETECT (-1) /* cgroup_host_open: look at the host */

/* Longest group path below hutch/ ("NAME/cmd-123"), and longest name of one level. */
#define CGROUP_NAME_MAX 64
#define CGROUP_PATH_MAX 160

struct cgroup_limits {
    uint64_t memory_bytes; /* 0 = no limit; swap is never allowed on top of it */
    uint64_t pids;         /* 0 = no limit */
    /* 0 = no limit; else thousandths of a CPU per period over all CPUs (1000: one CPU's worth).
     * v1 and hybrid need a host opened with CGROUP_HOST_CPU_LIMITS. */
    uint64_t cpu_millis;
};

#define CGROUP_CPU_PERIOD_US 100000u /* the kernel's default CFS period */

enum cgroup_flags {
    /* Groups will be made below this one (init's, each command's). On v2 its controllers are
     * handed down (cgroup.subtree_control), and then no process may join it itself: the kernel's
     * no-internal-process rule. */
    CGROUP_NESTED = 1u << 0,
    /* On an OOM inside it, the kernel kills all of the group, not one task (v2
     * memory.oom.group; v1 has no such thing and kills one task). */
    CGROUP_OOM_GROUP = 1u << 1,
};

struct cgroup_stats {
    uint64_t cpu_usage_ns;      /* user+system CPU time of every process ever in the group */
    uint64_t memory_peak_bytes; /* high-water mark of charged memory */
    uint64_t oom_kills;         /* processes killed by the OOM killer in the group */
    uint64_t pids_current;
};

/* What a group's memory is now (cgroup_read_memory): for a sampler such as the daemon's
 * metrics, not an accounting of a run (that is cgroup_stats' high-water mark). */
struct cgroup_memory {
    uint64_t current_bytes; /* charged now, the page cache included (v2 memory.current, v1
                               memory.usage_in_bytes) */
    uint64_t cache_bytes;   /* of which file-backed page cache (v2 "file", v1 "total_cache") */
    uint64_t limit_bytes;   /* the limit (memory.max, memory.limit_in_bytes); 0 = none */
};

struct cgroup_host;
struct cgroup;

const char *cgroup_mode_name(enum cgroup_mode mode);
/* "v1", "v2" or "hybrid" (as HUTCH_CGROUP_MODE gives it to the CLI and the tests). */
int cgroup_mode_parse(const char *text, enum cgroup_mode *mode, err_t *err);
/* The host's own mode (statfs of /sys/fs/cgroup, as crun does). */
int cgroup_detect(enum cgroup_mode *mode, err_t *err);

/* Once per process: mode is CGROUP_MODE_DETECT or a forced one (tests run every mode the host
 * can carry). Opens hutch/ in every hierarchy the mode uses, making it if needed, and on v2 hands
 * the memory, pids and cpu controllers down to it where the host offers them. */
int cgroup_host_open(int mode, struct cgroup_host **out, err_t *err);
enum cgroup_host_flags {
    /* Groups may get CPU bandwidth limits (cgroup_limits.cpu_millis): on v1 and hybrid the cpu
     * hierarchy is used too, one more directory and fd per group. v2 needs no flag. */
    CGROUP_HOST_CPU_LIMITS = 1u << 0,
};
int cgroup_host_open_flags(int mode, unsigned flags, struct cgroup_host **out, err_t *err);
void cgroup_host_close(struct cgroup_host *host);
enum cgroup_mode cgroup_host_mode(const struct cgroup_host *host);
/* The host's fds (its hutch/ directories), for a forked helper that keeps them while it closes
 * everything else. Returns how many were written to fds (at most max). */
#define CGROUP_HOST_MAX_FDS 6 /* cgroup2 and five v1 hierarchies */
size_t cgroup_host_fds(const struct cgroup_host *host, int *fds, size_t max);

/* Makes hutch/NAME (parent NULL) or PARENT/NAME in every hierarchy the mode uses and writes every
 * limit before any process can join. NAME is [A-Za-z0-9._-]{1,64}, no leading dot; a name that
 * exists is an error (EEXIST), never adopted. A controller a limit needs and the host lacks is an
 * error that names it. */
int cgroup_create(struct cgroup_host *host, const struct cgroup *parent, const char *name,
                  const struct cgroup_limits *limits, unsigned flags, struct cgroup **out,
                  err_t *err);
/* cgroup_create in two steps, so that a sandbox can be building its root filesystem while the
 * v1 groups are made: the first makes only what clone3(CLONE_INTO_CGROUP) needs (the cgroup2
 * group, with its limits on v2; nothing on pure v1), the second the v1 groups and their limits.
 * A process cloned in between must join the v1 groups (cgroup_self_attach) before it runs
 * anything untrusted. After a failure of the second, cgroup_destroy cleans up both. */
int cgroup_create_for_clone(struct cgroup_host *host, const char *name,
                            const struct cgroup_limits *limits, unsigned flags, struct cgroup **out,
                            err_t *err);
int cgroup_create_finish(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
/* Changes the limits of a group that may have processes in it (a daemon fits a code context's
 * share to what its sandbox has left). A field of 0 leaves that limit as it is. A memory limit
 * below what the group holds now makes the kernel reclaim, and then refuse it (v1: EBUSY) or
 * OOM-kill in the group (v2). */
int cgroup_set_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
/* An existing group, by its path below hutch/ ("NAME" or "NAME/init"): for a process that did
 * not make it (a restarted daemon, the keeper). Whatever exists of it is the caller's to remove. */
int cgroup_open(struct cgroup_host *host, const char *path, unsigned flags, struct cgroup **out,
                err_t *err);
/* Frees the handle only; the directories stay. Safe on NULL. */
void cgroup_free(struct cgroup *cg);

const char *cgroup_path(const struct cgroup *cg); /* below hutch/: "NAME/cmd-3" */
enum cgroup_mode cgroup_mode_of(const struct cgroup *cg);
struct cgroup_host *cgroup_host_of(const struct cgroup *cg);
/* The absolute path of FILE in the group in the hierarchy that holds CONTROLLER ("memory",
 * "pids", "cpuacct", "freezer", or "" for the cgroup2 group); FILE "" gives the directory itself.
 * -1 with err when the mode has no such hierarchy (e.g. "freezer" on hybrid, "" on v1), the
 * group's directory there is not made, or the path does not fit. */
int cgroup_file_path(const struct cgroup *cg, const char *controller, const char *file, char *out,
                     size_t size, err_t *err);

/* ---- placement ---- */

/* A new fd (O_RDONLY, close-on-exec; the caller closes it) of the group's cgroup2 directory, for
 * clone3(CLONE_INTO_CGROUP); -1 with err on pure v1 or before the directory exists. */
int cgroup_open_dir_fd(const struct cgroup *cg, err_t *err);
/* Lets uid (a sandbox's root, as the host sees it) clone processes into the group's children:
 * clone3(CLONE_INTO_CGROUP) checks the caller's write access to cgroup.procs of the groups
 * involved, with the caller's credentials. Only the cgroup2 file (v1 groups are joined through
 * `tasks` fds the host opens). Nothing to do on pure v1. */
int cgroup_delegate_procs(struct cgroup *cg, uid_t uid, gid_t gid, err_t *err);
/* Moves pid into every hierarchy CLONE_INTO_CGROUP did not cover (all of them on v1). */
int cgroup_attach(struct cgroup *cg, pid_t pid, err_t *err);
/* Self-attach, for v1 hierarchies: a freshly cloned child moves itself by writing "0" to each
 * hierarchy's `tasks` file. Moving only the calling thread skips the kernel's global
 * cgroup_threadgroup_rwsem, whose write side waits for an RCU grace period (about 10 ms per
 * run here); the child is single-threaded, so its whole process moves. The caller opens the files
 * (the kernel checks the opener's credentials, so the child's user namespace does not matter).
 * Opens one fd per v1 hierarchy into fds (at most max); *n gets the count (0 on pure v2). */
int cgroup_self_attach_open(const struct cgroup *cg, int *fds, size_t max, size_t *n, err_t *err);
/* In the child, first thing: async-signal-safe; closes the fds. 0, or -1 with errno. */
int cgroup_self_attach(const int *fds, size_t n);

/* ---- counters ---- */

/* Only the CPU counter (one file): what a supervisor polls. */
int cgroup_read_cpu_ns(struct cgroup *cg, uint64_t *ns, err_t *err);
int cgroup_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
/* The group's memory now, the groups below it included (both versions count hierarchically).
 * A group without the memory controller (v2 on a host that does not hand it down) reads as
 * zeros. Three small files: cheap enough for an event loop's timer. */
int cgroup_read_memory(struct cgroup *cg, struct cgroup_memory *out, err_t *err);

/* ---- the non-blocking steps ---- */

/* SIGKILLs every process in the group and below, frozen or not, and returns. v2 and hybrid write
 * cgroup.kill, which also takes a child forked during the kill (5.14+; before that, and on v1:
 * freeze, SIGKILL every member, thaw). Without an atomic kill a member may fork between the
 * read and the kill: call again while cgroup_populated says so. *atomic (may be NULL) says which
 * kind it was. */
int cgroup_kill_start(struct cgroup *cg, bool *atomic, err_t *err);
/* Whether any process is left in the group or below. */
int cgroup_populated(struct cgroup *cg, bool *populated, err_t *err);
/* A new fd of the group's cgroup2 cgroup.events: poll() reports POLLPRI when "populated" or
 * "frozen" changes. It comes read once; the kernel then keeps reporting POLLPRI until the fd is
 * read again, so after each wake-up read it (pread at offset 0) before polling again. -1 with
 * err (ENOTSUP) on pure v1, which has no such file: there the caller learns that a sandbox is
 * empty from its init's pidfd, or asks again on a timer. */
int cgroup_open_events_fd(const struct cgroup *cg, err_t *err);
/* Asks for the group (and everything below) to freeze or thaw; a frozen task stops at its next
 * return to user space, so the freeze completes later: cgroup_frozen says when. */
int cgroup_freeze_start(struct cgroup *cg, bool frozen, err_t *err);
/* Whether every task in the group has stopped (v2 "frozen 1", v1 FROZEN). */
int cgroup_frozen(struct cgroup *cg, bool *frozen, err_t *err);
/* Removes the group's directories, the groups below it first, in every hierarchy. EBUSY while
 * exiting processes are still counted as members: try again after the next event. On success
 * the directories are gone (the handle stays valid until cgroup_free). */
int cgroup_remove(struct cgroup *cg, err_t *err);
/* Whether no directory of the group is left (after cgroup_remove, or nothing was ever made). */
bool cgroup_removed(const struct cgroup *cg);
/* Calls fn with the name of each child group of cg, as one of its hierarchies lists them
 * (cgroup2 where it has a directory there; they are made in all alike). */
int cgroup_for_each_child(const struct cgroup *cg, void (*fn)(const char *name, void *user),
                          void *user, err_t *err);

/* ---- blocking compositions (bounded by a few seconds; not for an event loop) ---- */

/* cgroup_kill_start, then waits until the group is empty. */
int cgroup_kill(struct cgroup *cg, err_t *err);
/* Freezes and waits until frozen (undone on a timeout), or thaws. */
int cgroup_set_frozen(struct cgroup *cg, bool frozen, err_t *err);
/* Kills what is left, removes the directories, frees cg. Safe on NULL. */
int cgroup_destroy(struct cgroup *cg, err_t *err);
/* Kills and removes whatever exists of hutch/PATH, found afresh (for a keeper whose supervisor
 * died, perhaps half-way through cgroup_create). Nothing there is no error. */
int cgroup_remove_by_name(struct cgroup_host *host, const char *path, err_t *err);
