/* One table of operations per cgroup mode, chosen once by cgroup_host_open. Hybrid takes its
 * limits and memory counters from v1 and everything else (placement by clone3, CPU time,
 * freezing, kill, emptiness) from its controller-less cgroup2 group. */
#include "jail/cgroup_internal.h"

static int v1_make(struct cgroup *cg, const struct cgroup_limits *limits, bool with_v1, err_t *err)
{
    /* Pure v1 has nothing clone3 could use, so the first step makes nothing. */
    return with_v1 ? cgroup_v1_make(cg, limits, err) : 0;
}

static int v2_make(struct cgroup *cg, const struct cgroup_limits *limits, bool with_v1, err_t *err)
{
    return cgroup_v2_make(cg, limits, err);
}

static int v2_make_v1_rest(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    return 0;
}

const struct cgroup_ops cgroup_ops_v1 = {
    .make = v1_make,
    .make_v1_rest = cgroup_v1_make,
    .set_limits = cgroup_v1_set_limits,
    .attach = cgroup_v1_attach,
    .read_cpu = cgroup_v1_read_cpu,
    .read_stats = cgroup_v1_read_stats,
    .read_memory = cgroup_v1_read_memory,
    .kill_start = cgroup_v1_kill_start,
    .populated = cgroup_v1_populated,
    .freeze_start = cgroup_v1_freeze_start,
    .frozen = cgroup_v1_frozen,
};

const struct cgroup_ops cgroup_ops_v2 = {
    .make = v2_make,
    .make_v1_rest = v2_make_v1_rest,
    .set_limits = cgroup_v2_set_limits,
    .attach = cgroup_v2_attach,
    .read_cpu = cgroup_v2_read_cpu,
    .read_stats = cgroup_v2_read_stats,
    .read_memory = cgroup_v2_read_memory,
    .kill_start = cgroup_v2_kill_start,
    .populated = cgroup_v2_populated,
    .freeze_start = cgroup_v2_freeze_start,
    .frozen = cgroup_v2_frozen,
};

static int hybrid_make(struct cgroup *cg, const struct cgroup_limits *limits, bool with_v1,
                       err_t *err)
{
    if (cgroup_v2_make(cg, limits, err) < 0)
        return -1;
    return with_v1 ? cgroup_v1_make(cg, limits, err) : 0;
}

static int hybrid_attach(struct cgroup *cg, pid_t pid, err_t *err)
{
    if (cgroup_v1_attach(cg, pid, err) < 0)
        return -1;
    return cgroup_v2_attach(cg, pid, err);
}

static int hybrid_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err)
{
    if (cgroup_v1_read_stats(cg, out, err) < 0)
        return -1;
    return cgroup_v2_read_cpu(cg, &out->cpu_usage_ns, err);
}

/* The v1 groups normally hold the same processes as the cgroup2 one. A process that is only in
 * them (it joined the v1 groups through cgroup_self_attach but was never cloned into the cgroup2
 * group) is out of cgroup.kill's reach, and would keep the v1 directories from being removed:
 * it is killed by pid, and counted as a member. */
static int hybrid_kill_start(struct cgroup *cg, bool *atomic, err_t *err)
{
    if (cgroup_v2_kill_start(cg, atomic, err) < 0)
        return -1;
    for (size_t h = 0; h < cg->host->v1_count; h++) {
        size_t count;
        if (cg->made_v1[h] && cgroup_scan_procs(cg, &cg->host->v1[h], true, true, &count, err) < 0)
            return -1;
    }
    return 0;
}

/* cgroup2's one read says it in the common case; only an empty cgroup2 group costs a look at
 * the v1 groups. */
static int hybrid_populated(struct cgroup *cg, bool *populated, err_t *err)
{
    if (cgroup_v2_populated(cg, populated, err) < 0)
        return -1;
    return *populated ? 0 : cgroup_v1_populated(cg, populated, err);
}

const struct cgroup_ops cgroup_ops_hybrid = {
    .make = hybrid_make,
    .make_v1_rest = cgroup_v1_make,
    .set_limits = cgroup_v1_set_limits,
    .attach = hybrid_attach,
    .read_cpu = cgroup_v2_read_cpu,
    .read_stats = hybrid_read_stats,
    .read_memory = cgroup_v1_read_memory,
    .kill_start = hybrid_kill_start,
    .populated = hybrid_populated,
    .freeze_start = cgroup_v2_freeze_start,
    .frozen = cgroup_v2_frozen,
};
