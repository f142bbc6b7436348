/* cgroup2 groups. On V2 they carry the controllers and limits; on hybrid they have none and
 * serve clone3(CLONE_INTO_CGROUP), CPU time (cpu.stat), freezing and kill. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail/cgroup_internal.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/strfmt.h"

static const struct {
    unsigned bit;
    const char *name;
} v2_controllers[] = {
    {CGROUP_V2_MEMORY, "memory"},
    {CGROUP_V2_PIDS, "pids"},
    {CGROUP_V2_CPU, "cpu"},
};
#define V2_CONTROLLER_COUNT (sizeof v2_controllers / sizeof v2_controllers[0])

/* ---------- delegation: cgroup.subtree_control ---------- */

/* The set of controllers named in a list ("memory pids cpu"). */
static unsigned v2_parse_set(const char *list)
{
    unsigned set = 0;
    for (size_t i = 0; i < V2_CONTROLLER_COUNT; i++)
        if (cgroup_list_has(list, v2_controllers[i].name))
            set |= v2_controllers[i].bit;
    return set;
}

/* Enables each wanted controller that dirfd's cgroup.controllers offers, best effort: a host
 * without one still runs sandboxes, and a limit that needs it fails when asked for, naming it.
 * *enabled gets what its cgroup.subtree_control then hands down. */
static int v2_delegate(int dirfd, const char *where, unsigned wanted, unsigned *enabled, err_t *err)
{
    char avail[1024], list[1024];
    if (file_read_at(dirfd, "cgroup.controllers", avail, sizeof avail, err) < 0 ||
        file_read_at(dirfd, "cgroup.subtree_control", list, sizeof list, err) < 0)
        return err_wrap(err, "cgroup v2 %s", where);
    *enabled = v2_parse_set(list);
    for (size_t i = 0; i < V2_CONTROLLER_COUNT; i++) {
        unsigned bit = v2_controllers[i].bit;
        if (!(wanted & bit) || (*enabled & bit) || !cgroup_list_has(avail, v2_controllers[i].name))
            continue;
        char change[32];
        snprintf(change, sizeof change, "+%s", v2_controllers[i].name);
        if (file_write_str_at(dirfd, "cgroup.subtree_control", change, NULL) == 0)
            *enabled |= bit;
    }
    return 0;
}

int cgroup_v2_host_open(struct cgroup_host *host, int root_fd, const char *root_path, err_t *err)
{
    host->v2.label[0] = '\0';
    if (host->mode != CGROUP_MODE_V2)
        return cgroup_hier_open_parent(&host->v2, root_fd, err);
    /* Root first, then hutch/: a controller reaches hutch/NAME only if both hand it down. */
    unsigned enabled;
    if (v2_delegate(root_fd, root_path, CGROUP_V2_MEMORY | CGROUP_V2_PIDS | CGROUP_V2_CPU, &enabled,
                    err) < 0 ||
        cgroup_hier_open_parent(&host->v2, root_fd, err) < 0)
        return -1;
    char where[256] = ""; /* for messages only: cut visibly */
    strfmt_text_append(where, sizeof where, "%s/" CGROUP_PARENT, root_path);
    cleanup_fd int parent = openat(host->v2.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0)
        return err_set(err, errno, "cgroup v2: open %s", where);
    return v2_delegate(parent, where, enabled, &host->v2_delegated, err);
}

/* ---------- creation ---------- */

/* A limit needs its controller in the group; saying which is missing beats the kernel's ENOENT
 * for memory.max. */
static int v2_need(const struct cgroup *cg, unsigned bit, const char *name, err_t *err)
{
    if (cg->v2_controllers & bit)
        return 0;
    return cgroup_error(err, ENODEV,
                        "cgroup v2: controller '%s' is not available to " CGROUP_PARENT
                        "/%s (the host's cgroup.controllers or a parent's "
                        "cgroup.subtree_control lacks it; a %s limit was asked for)",
                        name, cg->path, name);
}

static int v2_write_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    const struct cgroup_hier *h = &cg->host->v2;
    if (limits->memory_bytes) {
        if (cgroup_write_u64(cg, h, "memory.max", limits->memory_bytes, false, err) < 0)
            return -1;
        /* Without this, swap turns memory.max into a soft limit. Absent when the kernel has
         * no swap accounting, and then there is nothing to turn off. */
        if (cgroup_write(cg, h, "memory.swap.max", "0", true, err) < 0)
            return -1;
    }
    /* On OOM kill the whole group, not one task: a half-dead command misleads. */
    if ((cg->flags & CGROUP_OOM_GROUP) && (cg->v2_controllers & CGROUP_V2_MEMORY) &&
        cgroup_write(cg, h, "memory.oom.group", "1", true, err) < 0)
        return -1;
    if (limits->pids && cgroup_write_u64(cg, h, "pids.max", limits->pids, false, err) < 0)
        return -1;
    if (limits->cpu_millis) { /* "QUOTA PERIOD" in microseconds, over all of its CPUs */
        char max[48];
        snprintf(max, sizeof max, "%llu %u",
                 (unsigned long long)(limits->cpu_millis * (CGROUP_CPU_PERIOD_US / 1000)),
                 CGROUP_CPU_PERIOD_US);
        if (cgroup_write(cg, h, "cpu.max", max, false, err) < 0)
            return -1;
    }
    return 0;
}

/* Hands the group's controllers down to the groups that will be made below it. */
static int v2_hand_down(struct cgroup *cg, err_t *err)
{
    char change[64] = "";
    size_t len = 0;
    for (size_t i = 0; i < V2_CONTROLLER_COUNT; i++)
        if (cg->v2_controllers & v2_controllers[i].bit)
            len += (size_t)snprintf(change + len, sizeof change - len, "%s+%s", len ? " " : "",
                                    v2_controllers[i].name);
    if (len == 0)
        return 0;
    return cgroup_write(cg, &cg->host->v2, "cgroup.subtree_control", change, false, err) < 0 ? -1
                                                                                             : 0;
}

static int v2_need_all(const struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    if ((limits->memory_bytes && v2_need(cg, CGROUP_V2_MEMORY, "memory", err) < 0) ||
        (limits->pids && v2_need(cg, CGROUP_V2_PIDS, "pids", err) < 0) ||
        (limits->cpu_millis && v2_need(cg, CGROUP_V2_CPU, "cpu", err) < 0))
        return -1;
    return 0;
}

int cgroup_v2_make(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    if (cg->host->mode != CGROUP_MODE_V2)
        return cgroup_mkdir(cg, &cg->host->v2, &cg->made_v2, err);
    /* Checked before the mkdir, so a missing controller leaves no group behind. */
    if (v2_need_all(cg, limits, err) < 0)
        return -1;
    if (cgroup_mkdir(cg, &cg->host->v2, &cg->made_v2, err) < 0)
        return -1;
    /* Limits before any process can join (the caller clones into it only after we return). */
    if (v2_write_limits(cg, limits, err) < 0)
        return -1;
    return (cg->flags & CGROUP_NESTED) ? v2_hand_down(cg, err) : 0;
}

int cgroup_v2_set_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    if (v2_need_all(cg, limits, err) < 0)
        return -1;
    return v2_write_limits(cg, limits, err);
}

/* ---------- placement ---------- */

/* Whether /proc/PID/cgroup already shows pid in our group, i.e. it was cloned into it. */
static bool v2_is_member(const struct cgroup *cg, pid_t pid)
{
    char path[64], text[4096], suffix[CGROUP_PATH_MAX + 16];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0)
        return false; /* let the write below report the real problem */
    const char *line = strstr(text, "0::");
    if (line != text && (!line || line[-1] != '\n'))
        return false;
    snprintf(suffix, sizeof suffix, "/" CGROUP_PARENT "/%s\n", cg->path); /* CGROUP_PATH_MAX */
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
    return cgroup_write_u64(cg, &cg->host->v2, "cgroup.procs", (uint64_t)pid, false, err) < 0 ? -1
                                                                                              : 0;
}

/* ---------- counters ---------- */

int cgroup_v2_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err)
{
    uint64_t usage_usec;
    /* cpu.stat's usage_usec exists without the cpu controller (basic accounting). */
    if (cgroup_read_key(cg, &cg->host->v2, "cpu.stat", "usage_usec", &usage_usec, true, err) < 0)
        return -1;
    *ns = usage_usec * 1000;
    return 0;
}

int cgroup_v2_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err)
{
    const struct cgroup_hier *h = &cg->host->v2;
    if (cgroup_v2_read_cpu(cg, &out->cpu_usage_ns, err) < 0)
        return -1;
    if (cg->v2_controllers & CGROUP_V2_MEMORY) {
        /* memory.peak is 5.19+; before that there is no high-water mark to read: 0. */
        if (cgroup_read_u64(cg, h, "memory.peak", &out->memory_peak_bytes, true, err) < 0 ||
            cgroup_read_key(cg, h, "memory.events", "oom_kill", &out->oom_kills, true, err) < 0)
            return -1;
    }
    if ((cg->v2_controllers & CGROUP_V2_PIDS) &&
        cgroup_read_u64(cg, h, "pids.current", &out->pids_current, false, err) < 0)
        return -1;
    return 0;
}

int cgroup_v2_read_memory(struct cgroup *cg, struct cgroup_memory *out, err_t *err)
{
    const struct cgroup_hier *h = &cg->host->v2;
    if (!(cg->v2_controllers & CGROUP_V2_MEMORY))
        return 0;
    char max[64];
    if (cgroup_read_u64(cg, h, "memory.current", &out->current_bytes, false, err) < 0 ||
        cgroup_read_key(cg, h, "memory.stat", "file", &out->cache_bytes, false, err) < 0 ||
        cgroup_read(cg, h, "memory.max", max, sizeof max, false, err) < 0)
        return -1;
    if (strcmp(max, "max\n") != 0) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(max, &end, 10);
        if (errno != 0 || end == max || *end != '\n') {
            cgroup_error(err, EINVAL, "memory.max: not a number: \"%.20s\"", max);
            return cgroup_fail(cg, h, err);
        }
        out->limit_bytes = v;
    }
    return 0;
}

/* ---------- kill and freeze ---------- */

int cgroup_v2_freeze_start(struct cgroup *cg, bool frozen, err_t *err)
{
    return cgroup_write(cg, &cg->host->v2, "cgroup.freeze", frozen ? "1" : "0", false, err) < 0 ? -1
                                                                                                : 0;
}

int cgroup_v2_kill_start(struct cgroup *cg, bool *atomic, err_t *err)
{
    /* Never made (or removed): no process can be in it. Without this a half-made group (or a
     * missing one, found by cgroup_open) fails on cgroup.freeze below, and
     * cgroup_remove_by_name with it, although there is nothing to kill. */
    *atomic = true;
    if (!cg->made_v2)
        return 0;
    /* 5.14+: the kernel kills every member and any child forked during the kill, frozen or not. */
    int r = cgroup_write(cg, &cg->host->v2, "cgroup.kill", "1", true, err);
    if (r < 0)
        return -1;
    *atomic = r == 1;
    if (*atomic)
        return 0;
    /* Before 5.14: frozen first, so that what has stopped cannot fork between the read of
     * cgroup.procs and its kill (what has not stopped yet may: the caller asks again while the
     * group is populated). v2 frozen tasks die on SIGKILL without a thaw; thawing anyway leaves
     * the group sane. */
    size_t count;
    if (cgroup_v2_freeze_start(cg, true, err) < 0 ||
        cgroup_scan_procs(cg, &cg->host->v2, true, true, &count, err) < 0)
        return -1;
    return cgroup_v2_freeze_start(cg, false, err);
}

int cgroup_v2_populated(struct cgroup *cg, bool *populated, err_t *err)
{
    uint64_t value;
    *populated = false;
    if (!cg->made_v2)
        return 0; /* no directory, no member */
    if (cgroup_read_key(cg, &cg->host->v2, "cgroup.events", "populated", &value, false, err) < 0)
        return -1;
    *populated = value != 0;
    return 0;
}

int cgroup_v2_frozen(struct cgroup *cg, bool *frozen, err_t *err)
{
    uint64_t value;
    if (cgroup_read_key(cg, &cg->host->v2, "cgroup.events", "frozen", &value, false, err) < 0)
        return -1;
    *frozen = value != 0;
    return 0;
}
