/* Shared by cgroup.c (the host, groups, dispatch), cgroup_wait.c (blocking compositions),
 * cgroup_v1.c and cgroup_v2.c. Not for use outside src/jail/cgroup*.c. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "util/err.h"

#define CGROUP_PARENT "hutch" /* shared parent group in every hierarchy; never removed */

/* The v1 controllers hutch needs. Several may share one hierarchy (e.g. "cpu,cpuacct"). */
enum cgroup_v1_controller {
    CGROUP_V1_MEMORY,
    CGROUP_V1_PIDS,
    CGROUP_V1_CPUACCT,
    CGROUP_V1_FREEZER,
    CGROUP_V1_CPU, /* only for a host opened with CGROUP_HOST_CPU_LIMITS */
    CGROUP_V1_COUNT,
};

/* cgroup2 controllers, as bits. */
enum {
    CGROUP_V2_MEMORY = 1u << 0,
    CGROUP_V2_PIDS = 1u << 1,
    CGROUP_V2_CPU = 1u << 2,
};

/* One hierarchy the mode uses: its hutch/ directory, held open for the process's life. */
struct cgroup_hier {
    int fd;         /* hutch/ (O_PATH): every group file is opened relative to it */
    char label[32]; /* "" for cgroup2, else the hierarchy's controllers ("memory"; all four: 27) */
};

struct cgroup_ops;

struct cgroup_host {
    enum cgroup_mode mode;
    bool cpu_limits; /* CGROUP_HOST_CPU_LIMITS: the v1 cpu hierarchy is used too */
    const struct cgroup_ops *ops;
    struct cgroup_hier v2;                  /* fd -1 on V1 */
    unsigned v2_delegated;                  /* V2: controllers hutch/ hands to its children */
    struct cgroup_hier v1[CGROUP_V1_COUNT]; /* one per distinct v1 hierarchy, v1_count used */
    size_t v1_count;
    size_t v1_index[CGROUP_V1_COUNT]; /* controller -> its hierarchy in v1[] */
};

struct cgroup {
    struct cgroup_host *host;
    char path[CGROUP_PATH_MAX + 1]; /* below hutch/ */
    unsigned flags;
    unsigned v2_controllers; /* V2: the controllers this group has (its parent handed down) */
    bool made_v2;            /* the directory exists in cgroup2 (made or opened by us) */
    bool made_v1[CGROUP_V1_COUNT];
};

/* One table per mode, chosen once in cgroup_host_open. */
struct cgroup_ops {
    int (*make)(struct cgroup *cg, const struct cgroup_limits *limits, bool with_v1, err_t *err);
    int (*make_v1_rest)(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
    int (*set_limits)(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
    int (*attach)(struct cgroup *cg, pid_t pid, err_t *err);
    int (*read_cpu)(struct cgroup *cg, uint64_t *ns, err_t *err);
    int (*read_stats)(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
    int (*read_memory)(struct cgroup *cg, struct cgroup_memory *out, err_t *err);
    int (*kill_start)(struct cgroup *cg, bool *atomic, err_t *err);
    int (*populated)(struct cgroup *cg, bool *populated, err_t *err);
    int (*freeze_start)(struct cgroup *cg, bool frozen, err_t *err);
    int (*frozen)(struct cgroup *cg, bool *frozen, err_t *err);
};

extern const struct cgroup_ops cgroup_ops_v1, cgroup_ops_hybrid, cgroup_ops_v2;
extern const char *const cgroup_v1_controller_names[CGROUP_V1_COUNT];

/* Which v1 controllers a mode uses. Hybrid takes only the limits from v1 (memory, pids): its
 * cgroup2 group already counts CPU (cpu.stat), freezes (cgroup.freeze) and kills (cgroup.kill)
 * without any controller, and every hierarchy less is a mkdir, a move and an rmdir less per run.
 * The cpu controller (CPU bandwidth limits) only when the host was opened for them: hutch run
 * limits time, not bandwidth, and does without its hierarchy. */
static inline bool cgroup_v1_wanted(enum cgroup_mode mode, bool cpu_limits,
                                    enum cgroup_v1_controller c)
{
    if (c == CGROUP_V1_CPU)
        return cpu_limits && mode != CGROUP_MODE_V2;
    return mode == CGROUP_MODE_V1 ||
           (mode == CGROUP_MODE_HYBRID && (c == CGROUP_V1_MEMORY || c == CGROUP_V1_PIDS));
}

static inline struct cgroup_hier *cgroup_v1_hier(const struct cgroup *cg,
                                                 enum cgroup_v1_controller c)
{
    return &cg->host->v1[cg->host->v1_index[c]];
}

/* --- cgroup.c: steps shared by every mode --- */

/* Like err_set, but the message is exactly fmt (no strerror appended); err->errnum = errnum. */
int cgroup_error(err_t *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes err with "cgroup LABEL:hutch/PATH". Returns -1. */
int cgroup_fail(const struct cgroup *cg, const struct cgroup_hier *h, err_t *err);
/* Makes hutch/ under root_fd if missing (it is shared, so EEXIST is fine) and opens it. */
int cgroup_hier_open_parent(struct cgroup_hier *h, int root_fd, err_t *err);
/* Makes the group's directory in h. EEXIST is an error (names are unique); *made set on success. */
int cgroup_mkdir(const struct cgroup *cg, const struct cgroup_hier *h, bool *made, err_t *err);
/* Opens FILE of the group in h (O_CLOEXEC | flags). -1 with errno. */
int cgroup_open_file(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                     int flags);
/* Returns 1 when written, 0 when optional and the file does not exist, -1 on error. */
int cgroup_write(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                 const char *value, bool optional, err_t *err);
int cgroup_write_u64(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                     uint64_t value, bool optional, err_t *err);
/* Reads the whole (small) file into buf. Returns 1 when read, 0 when optional and missing
 * (buf is then ""), -1 on error. */
int cgroup_read(const struct cgroup *cg, const struct cgroup_hier *h, const char *file, char *buf,
                size_t size, bool optional, err_t *err);
/* A file holding one number; an optional missing file reads as 0. */
int cgroup_read_u64(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                    uint64_t *out, bool optional, err_t *err);
/* "key value" lines (cpu.stat, memory.events, cgroup.events); an optional missing file or a
 * missing key reads as 0. */
int cgroup_read_key(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                    const char *key, uint64_t *out, bool optional, err_t *err);
/* Counts the pids in FILE (cgroup.procs) of the group in h, and of every group below it when
 * recursive, sending SIGKILL to each one when kill_them. */
int cgroup_scan_procs(const struct cgroup *cg, const struct cgroup_hier *h, bool recursive,
                      bool kill_them, size_t *count, err_t *err);

/* Reads an events fd (cgroup_open_events_fd) again, so that its next POLLPRI is a new change.
 * 0, or -1 with errno. */
int cgroup_events_rearm(int fd);

/* Finds key in "key value\n" text. Returns 0 and the value, or -1 if absent or not a number. */
int cgroup_parse_key(const char *text, const char *key, uint64_t *out);
/* True if word is one of the space- or comma-separated words of list. */
bool cgroup_list_has(const char *list, const char *word);

/* --- cgroup_v2.c --- */

/* Hands the controllers down from the cgroup2 root to hutch/ (V2 only; best effort). */
int cgroup_v2_host_open(struct cgroup_host *host, int root_fd, const char *root_path, err_t *err);
/* The pieces the mode tables are made of. */
int cgroup_v2_make(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
int cgroup_v2_set_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
int cgroup_v2_attach(struct cgroup *cg, pid_t pid, err_t *err);
int cgroup_v2_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err);
int cgroup_v2_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
int cgroup_v2_read_memory(struct cgroup *cg, struct cgroup_memory *out, err_t *err);
int cgroup_v2_kill_start(struct cgroup *cg, bool *atomic, err_t *err);
int cgroup_v2_populated(struct cgroup *cg, bool *populated, err_t *err);
int cgroup_v2_freeze_start(struct cgroup *cg, bool frozen, err_t *err);
int cgroup_v2_frozen(struct cgroup *cg, bool *frozen, err_t *err);

/* --- cgroup_v1.c --- */

/* Finds the controllers' mount points and opens hutch/ in each hierarchy. */
int cgroup_v1_host_open(struct cgroup_host *host, err_t *err);
int cgroup_v1_make(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
/* Also hybrid's: its limits are v1's. */
int cgroup_v1_set_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err);
int cgroup_v1_attach(struct cgroup *cg, pid_t pid, err_t *err);
int cgroup_v1_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err);
int cgroup_v1_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err);
/* Also hybrid's: its memory controller is v1's. */
int cgroup_v1_read_memory(struct cgroup *cg, struct cgroup_memory *out, err_t *err);
int cgroup_v1_kill_start(struct cgroup *cg, bool *atomic, err_t *err);
int cgroup_v1_populated(struct cgroup *cg, bool *populated, err_t *err);
int cgroup_v1_freeze_start(struct cgroup *cg, bool frozen, err_t *err);
int cgroup_v1_frozen(struct cgroup *cg, bool *frozen, err_t *err);
