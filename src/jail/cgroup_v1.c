/* The legacy hierarchies: hutch/NAME under the memory, pids, cpuacct and freezer mounts (V1), or
 * only memory and pids (hybrid, see cgroup_v1_wanted). Mount points come from
 * /proc/self/mountinfo, never from a fixed list of paths. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail/cgroup_internal.h"
#include "util/cleanup.h"

#define V1_MOUNTINFO_FIELDS 64

/* ---------- finding the mounts ---------- */

/* Undoes mountinfo's octal escapes ("\040" for a space) into out. */
static void v1_unescape(const char *in, char *out, size_t size)
{
    size_t n = 0;
    while (*in && n + 1 < size) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            out[n++] = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 4;
        } else {
            out[n++] = *in++;
        }
    }
    out[n] = '\0';
}

/* One mountinfo line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SOURCE
 * SUPEROPTS". For a v1 cgroup mount, SUPEROPTS lists its controllers ("rw,cpu,cpuacct"). */
static void v1_scan_mount(char *line, char (*paths)[PATH_MAX], const struct cgroup_host *host)
{
    char *fields[V1_MOUNTINFO_FIELDS], *save = NULL;
    size_t n = 0;
    for (char *tok = strtok_r(line, " \n", &save); tok && n < V1_MOUNTINFO_FIELDS;
         tok = strtok_r(NULL, " \n", &save))
        fields[n++] = tok;
    size_t dash = 6;
    while (dash < n && strcmp(fields[dash], "-") != 0)
        dash++;
    if (dash + 3 >= n || strcmp(fields[dash + 1], "cgroup") != 0)
        return;
    for (size_t c = 0; c < CGROUP_V1_COUNT; c++) {
        if (cgroup_v1_wanted(host->mode, host->cpu_limits, c) && !paths[c][0] &&
            cgroup_list_has(fields[dash + 3], cgroup_v1_controller_names[c]))
            v1_unescape(fields[4], paths[c], PATH_MAX);
    }
}

static int v1_find_mounts(char (*paths)[PATH_MAX], const struct cgroup_host *host, err_t *err)
{
    cleanup_file FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return err_set(err, errno, "cgroup v1: open /proc/self/mountinfo");
    cleanup_free char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0)
        v1_scan_mount(line, paths, host);
    for (size_t c = 0; c < CGROUP_V1_COUNT; c++) {
        if (cgroup_v1_wanted(host->mode, host->cpu_limits, c) && !paths[c][0])
            return cgroup_error(err, ENODEV, "cgroup v1: controller '%s' is not mounted",
                                cgroup_v1_controller_names[c]);
    }
    return 0;
}

/* ---------- the hierarchies, found once ---------- */

/* Gives each controller its hierarchy; co-mounted controllers ("cpu,cpuacct") share one. */
static void v1_assign_hierarchies(struct cgroup_host *host, char (*paths)[PATH_MAX],
                                  size_t *first_of)
{
    for (size_t c = 0; c < CGROUP_V1_COUNT; c++) {
        if (!cgroup_v1_wanted(host->mode, host->cpu_limits, c))
            continue;
        size_t h = 0;
        while (h < host->v1_count && strcmp(paths[first_of[h]], paths[c]) != 0)
            h++;
        struct cgroup_hier *d = &host->v1[h];
        if (h == host->v1_count) {
            first_of[host->v1_count++] = c;
            d->fd = -1;
            snprintf(d->label, sizeof d->label, "%s", cgroup_v1_controller_names[c]);
        } else {
            size_t len = strlen(d->label);
            snprintf(d->label + len, sizeof d->label - len, ",%s", cgroup_v1_controller_names[c]);
        }
        host->v1_index[c] = h;
    }
}

int cgroup_v1_host_open(struct cgroup_host *host, err_t *err)
{
    cleanup_free char(*paths)[PATH_MAX] = calloc(CGROUP_V1_COUNT, PATH_MAX);
    if (!paths)
        return err_set(err, errno, "cgroup v1: calloc");
    /* Every controller is found before anything is opened, so a missing one costs nothing. */
    if (v1_find_mounts(paths, host, err) < 0)
        return -1;
    size_t first_of[CGROUP_V1_COUNT];
    v1_assign_hierarchies(host, paths, first_of);
    for (size_t h = 0; h < host->v1_count; h++) {
        const char *mount = paths[first_of[h]];
        cleanup_fd int root_fd = open(mount, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
            return err_set(err, errno, "cgroup %s: open %s", host->v1[h].label, mount);
        if (cgroup_hier_open_parent(&host->v1[h], root_fd, err) < 0)
            return -1;
    }
    return 0;
}

/* ---------- creation ---------- */

/* The kernel keeps memory.limit_in_bytes at or below memory.memsw.limit_in_bytes (memory plus
 * swap), so a limit that goes down is written to memory first and one that goes up to memsw
 * first; a new group's limits only go down. Equal values leave no room for swap on top. The memsw
 * file exists only with swap accounting; without it there is no swap to cap. */
static int v1_write_memory(struct cgroup *cg, uint64_t bytes, bool fresh, err_t *err)
{
    const struct cgroup_hier *mem = cgroup_v1_hier(cg, CGROUP_V1_MEMORY);
    uint64_t now = 0;
    if (!fresh && cgroup_read_u64(cg, mem, "memory.limit_in_bytes", &now, false, err) < 0)
        return -1;
    bool raising = !fresh && bytes > now;
    if ((raising &&
         cgroup_write_u64(cg, mem, "memory.memsw.limit_in_bytes", bytes, true, err) < 0) ||
        cgroup_write_u64(cg, mem, "memory.limit_in_bytes", bytes, false, err) < 0 ||
        (!raising &&
         cgroup_write_u64(cg, mem, "memory.memsw.limit_in_bytes", bytes, true, err) < 0))
        return -1;
    /* v1 keeps socket buffers (TCP, UDP, every protocol with socket memory accounting) out of
     * memory.limit_in_bytes and takes them from the host-wide budget that the host's own network
     * shares; writing this limit is also what turns their accounting on. v2 charges them to
     * memory.max. The same figure again: the sandbox's sockets cannot take more of the host than
     * its memory limit says. Optional: kernels without v1 kmem have no file. */
    return cgroup_write_u64(cg, mem, "memory.kmem.tcp.limit_in_bytes", bytes, true, err) < 0 ? -1
                                                                                             : 0;
}

static int v1_write_limits(struct cgroup *cg, const struct cgroup_limits *limits, bool fresh,
                           err_t *err)
{
    if (limits->memory_bytes && v1_write_memory(cg, limits->memory_bytes, fresh, err) < 0)
        return -1;
    if (limits->pids && cgroup_write_u64(cg, cgroup_v1_hier(cg, CGROUP_V1_PIDS), "pids.max",
                                         limits->pids, false, err) < 0)
        return -1;
    if (limits->cpu_millis) {
        if (!cg->host->cpu_limits)
            return cgroup_error(err, EINVAL,
                                "cgroup %s: a CPU limit needs a host opened with "
                                "CGROUP_HOST_CPU_LIMITS",
                                cg->path);
        /* CFS bandwidth: quota microseconds of CPU per period, over all of the group's CPUs. */
        const struct cgroup_hier *cpu = cgroup_v1_hier(cg, CGROUP_V1_CPU);
        if (cgroup_write_u64(cg, cpu, "cpu.cfs_period_us", CGROUP_CPU_PERIOD_US, false, err) < 0 ||
            cgroup_write_u64(cg, cpu, "cpu.cfs_quota_us",
                             limits->cpu_millis * (CGROUP_CPU_PERIOD_US / 1000), false, err) < 0)
            return -1;
    }
    return 0;
}

int cgroup_v1_make(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    for (size_t h = 0; h < cg->host->v1_count; h++)
        if (cgroup_mkdir(cg, &cg->host->v1[h], &cg->made_v1[h], err) < 0)
            return -1;
    return v1_write_limits(cg, limits, true, err);
}

int cgroup_v1_set_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    return v1_write_limits(cg, limits, false, err);
}

/* ---------- placement and counters ---------- */

int cgroup_v1_attach(struct cgroup *cg, pid_t pid, err_t *err)
{
    /* Charges made before the move stay with the old memory group, so the caller attaches
     * before the child does any work (it is still waiting on its pipe). */
    for (size_t h = 0; h < cg->host->v1_count; h++) {
        if (cgroup_write_u64(cg, &cg->host->v1[h], "cgroup.procs", (uint64_t)pid, false, err) < 0)
            return -1;
    }
    return 0;
}

/* Undoes a partial cgroup_self_attach_open. Only closes: cgroup_self_attach would write "0",
 * i.e. move the caller itself into the sandbox's groups. */
static void v1_close_attach_fds(int *fds, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        close(fds[i]);
    *n = 0;
}

int cgroup_self_attach_open(const struct cgroup *cg, int *fds, size_t max, size_t *n, err_t *err)
{
    *n = 0;
    if (cg->host->mode == CGROUP_MODE_V2)
        return 0;
    for (size_t h = 0; h < cg->host->v1_count; h++) {
        if (*n >= max) {
            v1_close_attach_fds(fds, n);
            return cgroup_error(err, EMFILE, "cgroup %s: too many v1 hierarchies", cg->path);
        }
        int fd = cgroup_open_file(cg, &cg->host->v1[h], "tasks", O_WRONLY);
        if (fd < 0) {
            int saved = errno;
            v1_close_attach_fds(fds, n);
            cgroup_error(err, saved, "open tasks: %s", strerror(saved));
            return cgroup_fail(cg, &cg->host->v1[h], err);
        }
        fds[(*n)++] = fd;
    }
    return 0;
}

int cgroup_v1_read_cpu(struct cgroup *cg, uint64_t *ns, err_t *err)
{
    /* 0 on success, as on v2: cgroup_read_u64 itself returns 1 for "read". */
    if (cgroup_read_u64(cg, cgroup_v1_hier(cg, CGROUP_V1_CPUACCT), "cpuacct.usage", ns, false,
                        err) < 0)
        return -1;
    return 0;
}

int cgroup_v1_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err)
{
    const struct cgroup_hier *mem = cgroup_v1_hier(cg, CGROUP_V1_MEMORY);
    /* CPU time lives in cpuacct on pure v1 only; hybrid reads it from its cgroup2 group. */
    if ((cg->host->mode == CGROUP_MODE_V1 && cgroup_v1_read_cpu(cg, &out->cpu_usage_ns, err) < 0) ||
        cgroup_read_u64(cg, mem, "memory.max_usage_in_bytes", &out->memory_peak_bytes, false, err) <
            0 ||
        /* the oom_kill line is 4.13+; an older kernel reads as 0 */
        cgroup_read_key(cg, mem, "memory.oom_control", "oom_kill", &out->oom_kills, false, err) <
            0 ||
        cgroup_read_u64(cg, cgroup_v1_hier(cg, CGROUP_V1_PIDS), "pids.current", &out->pids_current,
                        false, err) < 0)
        return -1;
    return 0;
}

/* v1 writes "no limit" as the largest page-aligned long: anything from 2^62 up is none. */
#define CGROUP_V1_NO_LIMIT (1ull << 62)

int cgroup_v1_read_memory(struct cgroup *cg, struct cgroup_memory *out, err_t *err)
{
    const struct cgroup_hier *mem = cgroup_v1_hier(cg, CGROUP_V1_MEMORY);
    /* total_cache counts the groups below too, as usage_in_bytes does (hierarchy is always on
     * since 5.x); plain "cache" would be this group's own, which in a sandbox is nothing. */
    if (cgroup_read_u64(cg, mem, "memory.usage_in_bytes", &out->current_bytes, false, err) < 0 ||
        cgroup_read_key(cg, mem, "memory.stat", "total_cache", &out->cache_bytes, false, err) < 0 ||
        cgroup_read_u64(cg, mem, "memory.limit_in_bytes", &out->limit_bytes, false, err) < 0)
        return -1;
    if (out->limit_bytes >= CGROUP_V1_NO_LIMIT)
        out->limit_bytes = 0;
    return 0;
}

/* ---------- freezer and kill (pure v1) ---------- */

int cgroup_v1_freeze_start(struct cgroup *cg, bool frozen, err_t *err)
{
    return cgroup_write(cg, cgroup_v1_hier(cg, CGROUP_V1_FREEZER), "freezer.state",
                        frozen ? "FROZEN" : "THAWED", false, err) < 0
               ? -1
               : 0;
}

int cgroup_v1_frozen(struct cgroup *cg, bool *frozen, err_t *err)
{
    char state[32];
    /* FREEZING while tasks are still stopping. */
    if (cgroup_read(cg, cgroup_v1_hier(cg, CGROUP_V1_FREEZER), "freezer.state", state, sizeof state,
                    false, err) < 0)
        return -1;
    *frozen = strcmp(state, "FROZEN\n") == 0;
    return 0;
}

int cgroup_v1_kill_start(struct cgroup *cg, bool *atomic, err_t *err)
{
    size_t count;
    *atomic = false;
    /* Freeze first: v1 has no atomic kill, and a task that forks between our read of
     * cgroup.procs and its SIGKILL would leave a child we never saw. The freeze completes
     * asynchronously, so a task still running may fork anyway: the caller asks again while the
     * group is populated. */
    if (cgroup_v1_freeze_start(cg, true, err) < 0 ||
        cgroup_scan_procs(cg, cgroup_v1_hier(cg, CGROUP_V1_FREEZER), true, true, &count, err) < 0)
        return -1;
    /* A v1-frozen task keeps its SIGKILL pending until thawed, so thaw only after the kills
     * are queued: the tasks then go straight to exit without running user code. */
    return cgroup_v1_freeze_start(cg, false, err);
}

int cgroup_v1_populated(struct cgroup *cg, bool *populated, err_t *err)
{
    *populated = false;
    for (size_t h = 0; h < cg->host->v1_count && !*populated; h++) {
        size_t count;
        if (!cg->made_v1[h])
            continue;
        if (cgroup_scan_procs(cg, &cg->host->v1[h], true, false, &count, err) < 0)
            return -1;
        *populated = count > 0;
    }
    return 0;
}
