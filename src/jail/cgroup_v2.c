/* The cgroup2 group hutch/NAME. On V2 it carries the controllers and limits; on hybrid it has
 * none and serves clone3(CLONE_INTO_CGROUP), CPU time (cpu.stat), freezing and kill. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jail/cgroup_internal.h"
#include "util/cleanup.h"
#include "util/fileio.h"

enum {
    V2_MEMORY = 1u << 0,
    V2_PIDS = 1u << 1,
    V2_CPU = 1u << 2,
};

static const struct {
    unsigned bit;
    const char *name;
} v2_controllers[] = {
    {V2_MEMORY, "memory"},
    {V2_PIDS, "pids"},
    {V2_CPU, "cpu"},
};
#define V2_CONTROLLER_COUNT (sizeof v2_controllers / sizeof v2_controllers[0])

/* ---------- delegation: cgroup.subtree_control of the root and of hutch/ ---------- */

static int v2_read_list(int dirfd, const char *where, const char *file, char *buf, size_t size,
                        err_t *err)
{
    if (file_read_at(dirfd, file, buf, size, err) < 0)
        return err_wrap(err, "cgroup v2 %s", where);
    return 0;
}

/* The set of controllers that dirfd's cgroup.subtree_control hands to its children. */
static int v2_subtree_enabled(int dirfd, const char *where, unsigned *enabled, err_t *err)
{
    char list[1024];
    if (v2_read_list(dirfd, where, "cgroup.subtree_control", list, sizeof list, err) < 0)
        return -1;
    *enabled = 0;
    for (size_t i = 0; i < V2_CONTROLLER_COUNT; i++) {
        if (cgroup_list_has(list, v2_controllers[i].name))
            *enabled |= v2_controllers[i].bit;
    }
    return 0;
}

/* Enables each wanted controller that dirfd's cgroup.controllers offers. A needed one (a limit
 * was asked for) that is missing or refused is an error naming it; the others are best
 * effort, so a host without them still runs sandboxes, with 0 in the stats they would feed. */
static int v2_delegate(int dirfd, const char *where, unsigned wanted, unsigned needed,
                       unsigned *enabled, err_t *err)
{
    char avail[1024];
    if (v2_read_list(dirfd, where, "cgroup.controllers", avail, sizeof avail, err) < 0 ||
        v2_subtree_enabled(dirfd, where, enabled, err) < 0)
        return -1;
    for (size_t i = 0; i < V2_CONTROLLER_COUNT; i++) {
        unsigned bit = v2_controllers[i].bit;
        const char *name = v2_controllers[i].name;
        bool need = needed & bit;
        if (!(wanted & bit) || (*enabled & bit))
            continue;
        if (!cgroup_list_has(avail, name)) {
            if (need)
                return cgroup_error(err, ENODEV,
                                    "cgroup v2: controller '%s' is not available in "
                                    "%s/cgroup.controllers (a %s limit was asked for)",
                                    name, where, name);
            continue;
        }
        char change[32];
        snprintf(change, sizeof change, "+%s", name);
        err_t local;
        if (file_write_str_at(dirfd, "cgroup.subtree_control", change, &local) == 0)
            *enabled |= bit;
        else if (need)
            return cgroup_error(err, local.errnum, "cgroup v2: enable controller '%s' in %s: %s",
                                name, where, local.msg);
    }
    return 0;
}

/* Root first, then hutch/: a controller reaches hutch/NAME only if both hand it down. */
static int v2_prepare_parent(struct cgroup *cg, int root_fd, const char *root_path,
                             const struct cgroup_limits *limits, err_t *err)
{
    unsigned wanted = V2_MEMORY | V2_PIDS | V2_CPU;
    unsigned needed = (limits->memory_bytes ? V2_MEMORY : 0) | (limits->pids ? V2_PIDS : 0);
    unsigned enabled;
    char where[256];
    if (v2_delegate(root_fd, root_path, wanted, needed, &enabled, err) < 0)
        return -1;
    if (cgroup_dir_open_parent(&cg->v2, root_fd, err) < 0)
        return -1;
    snprintf(where, sizeof where, "%s/" CGROUP_PARENT, root_path);
    if (v2_delegate(cg->v2.parent_fd, where, enabled, needed, &enabled, err) < 0)
        return -1;
    cg->v2_memory = enabled & V2_MEMORY;
    cg->v2_pids = enabled & V2_PIDS;
    return 0;
}

/* ---------- creation ---------- */

static int v2_write_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    struct cgroup_dir *d = &cg->v2;
    if (limits->memory_bytes) {
        if (cgroup_dir_write_u64(cg, d, "memory.max", limits->memory_bytes, false, err) < 0)
            return -1;
        /* Without this, swap turns memory.max into a soft limit. Absent when the kernel has
         * no swap accounting, and then there is nothing to turn off. */
        if (cgroup_dir_write(cg, d, "memory.swap.max", "0", true, err) < 0)
            return -1;
        /* On OOM kill the whole sandbox, not one task: a half-dead sandbox misleads. */
        if (cgroup_dir_write(cg, d, "memory.oom.group", "1", true, err) < 0)
            return -1;
    }
    if (limits->pids && cgroup_dir_write_u64(cg, d, "pids.max", limits->pids, false, err) < 0)
        return -1;
    return 0;
}

int cgroup_v2_create(struct cgroup *cg, const char *root_path, const struct cgroup_limits *limits,
                     err_t *err)
{
    cleanup_fd int root_fd = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return err_set(err, errno, "cgroup v2: open %s", root_path);
    if (cg->mode == CGROUP_MODE_V2) {
        /* Delegate before mkdir hutch/NAME, so a missing controller leaves no group behind. */
        if (v2_prepare_parent(cg, root_fd, root_path, limits, err) < 0)
            return -1;
    } else if (cgroup_dir_open_parent(&cg->v2, root_fd, err) < 0) {
        return -1;
    }
    if (cgroup_dir_make(cg, &cg->v2, err) < 0)
        return -1;
    /* Limits before any process can join (the caller clones into it only after we return). */
    if (cg->mode == CGROUP_MODE_V2 && v2_write_limits(cg, limits, err) < 0)
        return -1;
    return 0;
}

/* ---------- placement ---------- */

/* Whether /proc/PID/cgroup already shows pid in our group, i.e. it was cloned into it. */
static bool v2_is_member(const struct cgroup *cg, pid_t pid)
{
    char path[64], text[4096], suffix[CGROUP_NAME_MAX + 16];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0)
        return false; /* let the write below report the real problem */
    const char *line = strstr(text, "0::");
    if (line != text && (!line || line[-1] != '\n'))
        return false;
    snprintf(suffix, sizeof suffix, "/" CGROUP_PARENT "/%s\n", cg->name);
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
    size_t suffix_len = strlen(suffix);
    return len >= suffix_len && memcmp(line + len - suffix_len, suffix, suffix_len) == 0;
}

int cgroup_v2_attach(struct cgroup *cg, pid_t pid, err_t *err)
{
    /* Skipping a process CLONE_INTO_CGROUP already placed saves a migration, which takes the
     * kernel's global cgroup_threadgroup_rwsem for writing. A process that was forked plainly
     * is moved here, so attach alone is also enough. */
    if (v2_is_member(cg, pid))
        return 0;
    return cgroup_dir_write_u64(cg, &cg->v2, "cgroup.procs", (uint64_t)pid, false, err) < 0 ? -1
                                                                                            : 0;
}

/* ---------- counters ---------- */

int cgroup_v2_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err)
{
    uint64_t usage_usec;
    /* cpu.stat's usage_usec exists without the cpu controller (basic accounting). */
    if (cgroup_dir_read_key(cg, &cg->v2, "cpu.stat", "usage_usec", &usage_usec, true, err) < 0)
        return -1;
    *ns = usage_usec * 1000;
    return 0;
}

int cgroup_v2_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err)
{
    struct cgroup_dir *d = &cg->v2;
    if (cgroup_v2_read_cpu(cg, &out->cpu_usage_ns, err) < 0)
        return -1;
    if (cg->v2_memory) {
        /* memory.peak is 5.19+; before that there is no high-water mark to read: 0. */
        if (cgroup_dir_read_u64(cg, d, "memory.peak", &out->memory_peak_bytes, true, err) < 0 ||
            cgroup_dir_read_key(cg, d, "memory.events", "oom_kill", &out->oom_kills, true, err) < 0)
            return -1;
    }
    if (cg->v2_pids &&
        cgroup_dir_read_u64(cg, d, "pids.current", &out->pids_current, false, err) < 0)
        return -1;
    return 0;
}

/* ---------- kill and freeze ---------- */

int cgroup_v2_kill_atomic(struct cgroup *cg, err_t *err)
{
    /* 5.14+: the kernel kills every member and any child forked during the kill. */
    return cgroup_dir_write(cg, &cg->v2, "cgroup.kill", "1", true, err);
}

/* Polls cgroup.events until key has value want, or the deadline passes. */
static int v2_wait_event(struct cgroup *cg, const char *key, uint64_t want, uint64_t timeout_ms,
                         bool kill_stragglers, err_t *err)
{
    uint64_t deadline = cgroup_now_ms() + timeout_ms;
    unsigned step = 0;
    for (;;) {
        uint64_t value;
        size_t count;
        if (cgroup_dir_read_key(cg, &cg->v2, "cgroup.events", key, &value, false, err) < 0)
            return -1;
        if (value == want)
            return 0;
        if (cgroup_now_ms() >= deadline) {
            cgroup_error(err, ETIMEDOUT, "cgroup.events: still \"%s %llu\" after %llu ms", key,
                         (unsigned long long)value, (unsigned long long)timeout_ms);
            return cgroup_dir_fail(cg, &cg->v2, err);
        }
        if (kill_stragglers && cgroup_dir_scan_procs(cg, &cg->v2, true, &count, err) < 0)
            return -1;
        cgroup_backoff(&step);
    }
}

int cgroup_v2_wait_empty(struct cgroup *cg, bool kill_stragglers, err_t *err)
{
    return v2_wait_event(cg, "populated", 0, CGROUP_EMPTY_TIMEOUT_MS, kill_stragglers, err);
}

int cgroup_v2_set_frozen(struct cgroup *cg, bool frozen, err_t *err)
{
    if (cgroup_dir_write(cg, &cg->v2, "cgroup.freeze", frozen ? "1" : "0", false, err) < 0)
        return -1;
    if (!frozen)
        return 0;
    /* The write only starts freezing; tasks stop at their next return to user space. */
    if (v2_wait_event(cg, "frozen", 1, CGROUP_FROZEN_TIMEOUT_MS, false, err) < 0) {
        cgroup_dir_write(cg, &cg->v2, "cgroup.freeze", "0", false, NULL);
        return -1;
    }
    return 0;
}

int cgroup_v2_kill_frozen(struct cgroup *cg, err_t *err)
{
    size_t count;
    /* Frozen first so nobody forks between reading cgroup.procs and the kills. A freeze that
     * times out is not fatal: the wait that follows kills stragglers. */
    if (cgroup_dir_write(cg, &cg->v2, "cgroup.freeze", "1", false, err) < 0)
        return -1;
    v2_wait_event(cg, "frozen", 1, CGROUP_FROZEN_TIMEOUT_MS, false, NULL);
    /* v2 frozen tasks die on SIGKILL without a thaw; thaw anyway so the group is left sane. */
    if (cgroup_dir_scan_procs(cg, &cg->v2, true, &count, err) < 0)
        return -1;
    return cgroup_dir_write(cg, &cg->v2, "cgroup.freeze", "0", false, err) < 0 ? -1 : 0;
}
