/* Shared by cgroup.c (mode detection, common steps), cgroup_v1.c and cgroup_v2.c. Not for use
 * outside src/jail/cgroup*.c. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "util/err.h"

#define CGROUP_PARENT   "hutch" /* shared parent group in every hierarchy; never removed */
#define CGROUP_NAME_MAX 64

/* Bounds for the polling loops: long enough for a loaded machine, short enough that a stuck
 * task turns into an error instead of a hung daemon. */
#define CGROUP_EMPTY_TIMEOUT_MS  2000 /* kill: until no process is left */
#define CGROUP_FROZEN_TIMEOUT_MS 2000 /* freeze: until every task is frozen */
#define CGROUP_RMDIR_TIMEOUT_MS  1000 /* rmdir: exiting tasks leave the group asynchronously */

/* The v1 controllers hutch needs. Several may share one hierarchy (e.g. "cpu,cpuacct"). */
enum cgroup_v1_controller {
    CGROUP_V1_MEMORY,
    CGROUP_V1_PIDS,
    CGROUP_V1_CPUACCT,
    CGROUP_V1_FREEZER,
    CGROUP_V1_COUNT,
};

/* hutch/NAME in one hierarchy. */
struct cgroup_dir {
    int parent_fd;  /* hutch/ of the hierarchy: the final rmdir is relative to it */
    int fd;         /* hutch/NAME, -1 until opened */
    bool created;   /* we made hutch/NAME, so we must remove it (even if fd never opened) */
    char label[32]; /* "" for cgroup2, else the hierarchy's controllers ("memory") */
};

struct cgroup {
    enum cgroup_mode mode;
    bool adopt; /* cgroup_remove_by_name: open what exists of hutch/NAME instead of making it */
    char name[CGROUP_NAME_MAX + 1];
    struct cgroup_dir v2;                  /* cgroup2 group on V2 and HYBRID; fd -1 on V1 */
    bool v2_memory;                        /* memory controller enabled in the v2 group (V2 only) */
    bool v2_pids;                          /* pids controller enabled in the v2 group (V2 only) */
    struct cgroup_dir v1[CGROUP_V1_COUNT]; /* one per distinct v1 hierarchy, v1_count used */
    size_t v1_count;
    size_t v1_index[CGROUP_V1_COUNT]; /* controller -> its hierarchy in v1[] */
};

extern const char *const cgroup_v1_controller_names[CGROUP_V1_COUNT];

/* Which v1 controllers a mode uses. Hybrid takes only the limits from v1 (memory, pids): its
 * cgroup2 group already counts CPU (cpu.stat), freezes (cgroup.freeze) and kills (cgroup.kill)
 * without any controller, and every hierarchy less is a mkdir, a move and an rmdir less per run. */
static inline bool cgroup_v1_wanted(enum cgroup_mode mode, enum cgroup_v1_controller c)
{
    return mode == CGROUP_MODE_V1 || c == CGROUP_V1_MEMORY || c == CGROUP_V1_PIDS;
}

/* --- cgroup.c: steps shared by both versions --- */

/* Like err_set, but the message is exactly fmt (no strerror appended); err->errnum = errnum. */
int cgroup_error(err_t *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void cgroup_dir_init(struct cgroup_dir *d, const char *label);
/* Makes hutch/ under root_fd if missing (it is shared, so EEXIST is fine) and opens it. */
int cgroup_dir_open_parent(struct cgroup_dir *d, int root_fd, err_t *err);
/* Makes hutch/NAME and opens it; EEXIST is an error (names are unique per run). */
int cgroup_dir_make(const struct cgroup *cg, struct cgroup_dir *d, err_t *err);
/* rmdir hutch/NAME if we created it (retrying on EBUSY), then closes both fds. */
int cgroup_dir_remove(const struct cgroup *cg, struct cgroup_dir *d, err_t *err);
/* Prefixes err with "cgroup LABEL:hutch/NAME". Returns -1. */
int cgroup_dir_fail(const struct cgroup *cg, const struct cgroup_dir *d, err_t *err);
/* Returns 1 when written, 0 when optional and the file does not exist, -1 on error. */
int cgroup_dir_write(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                     const char *value, bool optional, err_t *err);
int cgroup_dir_write_u64(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                         uint64_t value, bool optional, err_t *err);
/* Reads the whole (small) file into buf. Returns 1 when read, 0 when optional and missing
 * (buf is then ""), -1 on error. */
int cgroup_dir_read(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                    char *buf, size_t size, bool optional, err_t *err);
/* A file holding one number; an optional missing file reads as 0. */
int cgroup_dir_read_u64(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                        uint64_t *out, bool optional, err_t *err);
/* "key value" lines (cpu.stat, memory.events, cgroup.events); an optional missing file or a
 * missing key reads as 0. */
int cgroup_dir_read_key(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                        const char *key, uint64_t *out, bool optional, err_t *err);
/* Counts the pids in cgroup.procs, sending SIGKILL to each one when kill_them. */
int cgroup_dir_scan_procs(const struct cgroup *cg, const struct cgroup_dir *d, bool kill_them,
                          size_t *count, err_t *err);

/* Finds key in "key value\n" text. Returns 0 and the value, or -1 if absent or not a number. */
int cgroup_parse_key(const char *text, const char *key, uint64_t *out);
/* True if word is one of the space- or comma-separated words of list. */
bool cgroup_list_has(const char *list, const char *word);

uint64_t cgroup_now_ms(void);
/* Sleeps a little longer each time it is called (1 ms doubling to 16 ms) for polling loops. */
void cgroup_backoff(unsigned *step_us);

/* --- cgroup_v2.c --- */

/* Creates the cgroup2 group under root_path. On V2 it also delegates controllers and writes
 * limits; on HYBRID the group carries no controllers and serves placement, CPU time, freezing
 * and kill. */
int cgroup_v2_create(struct cgroup *cg, const char *root_path, const struct cgroup_limits *limits,
                     err_t *err);
int cgroup_v2_attach(struct cgroup *cg, pid_t pid, err_t *err);
int cgroup_v2_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err);
int cgroup_v2_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
/* Returns 1 if killed through cgroup.kill, 0 if the kernel has no cgroup.kill (nothing done). */
int cgroup_v2_kill_atomic(struct cgroup *cg, err_t *err);
/* Pre-5.14 fallback: freeze, SIGKILL every member, thaw. */
int cgroup_v2_kill_frozen(struct cgroup *cg, err_t *err);
/* Waits for "populated 0"; kill_stragglers SIGKILLs members on the way (needed when the kill
 * was not atomic, since a member may have forked after it was signalled). */
int cgroup_v2_wait_empty(struct cgroup *cg, bool kill_stragglers, err_t *err);
int cgroup_v2_set_frozen(struct cgroup *cg, bool frozen, err_t *err);

/* --- cgroup_v1.c --- */

/* Finds the controllers' mount points and creates hutch/NAME in each hierarchy, limits first. */
int cgroup_v1_create(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
int cgroup_v1_attach(struct cgroup *cg, pid_t pid, err_t *err);
int cgroup_v1_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err);
int cgroup_v1_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
/* Freezes the group, SIGKILLs every member, thaws. Does not wait. */
int cgroup_v1_kill_frozen(struct cgroup *cg, err_t *err);
/* Waits until every v1 group is empty, SIGKILLing any straggler on the way. */
int cgroup_v1_wait_empty(struct cgroup *cg, err_t *err);
int cgroup_v1_set_frozen(struct cgroup *cg, bool frozen, err_t *err);
