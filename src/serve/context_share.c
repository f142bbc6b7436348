/* A code context's share of its sandbox: the arithmetic, and the cgroup reads and writes that
 * apply it (context_share.h). */
#include "serve/context_share.h"

#include "jail/cgroup.h"
#include "jail/command.h"

static uint64_t used_of(const struct cgroup_memory *m)
{
    return m->current_bytes > m->cache_bytes ? m->current_bytes - m->cache_bytes : 0;
}

uint64_t share_memory_limit(uint64_t sandbox_limit, uint64_t sandbox_used, uint64_t context_used)
{
    if (!sandbox_limit)
        return 0;
    uint64_t reserve = sandbox_limit / 8;
    if (reserve < SHARE_RESERVE_MIN)
        reserve = SHARE_RESERVE_MIN;
    if (reserve > SHARE_RESERVE_MAX)
        reserve = SHARE_RESERVE_MAX;
    /* the two reads are not atomic: the context may read as more than the whole */
    uint64_t others = sandbox_used > context_used ? sandbox_used - context_used : 0;
    uint64_t left = sandbox_limit > others ? sandbox_limit - others : 0;
    uint64_t limit = left > reserve ? left - reserve : 0;
    uint64_t floor = context_used < sandbox_limit && sandbox_limit - context_used > SHARE_GROW_MIN
                         ? context_used + SHARE_GROW_MIN
                         : sandbox_limit; /* saturated: no wrap */
    if (limit < floor)
        limit = floor;
    if (limit > sandbox_limit)
        limit = sandbox_limit;
    limit &= ~(SHARE_MIB - 1);
    return limit ? limit : SHARE_MIB;
}

uint64_t share_pids_limit(uint64_t sandbox_pids)
{
    if (!sandbox_pids)
        return 0;
    uint64_t reserve = sandbox_pids / 8;
    if (reserve < SHARE_PIDS_RESERVE_MIN)
        reserve = SHARE_PIDS_RESERVE_MIN;
    return sandbox_pids > reserve + 1 ? sandbox_pids - reserve : 1;
}

int share_fit(struct jail *jail, const char *group, uint64_t sandbox_pids, bool with_pids,
              err_t *err)
{
    struct cgroup_memory sandbox, context;
    if (!jail->cgroup)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    if (cgroup_read_memory(jail->cgroup, &sandbox, err) < 0)
        return -1;
    struct cgroup *cg;
    if (jail_command_group_open(jail, group, &cg, err) < 0)
        return -1;
    int rc = cgroup_read_memory(cg, &context, err);
    if (rc == 0) {
        struct cgroup_limits limits = {
            .memory_bytes =
                share_memory_limit(sandbox.limit_bytes, used_of(&sandbox), used_of(&context)),
            .pids = with_pids ? share_pids_limit(sandbox_pids) : 0,
        };
        if (limits.memory_bytes == context.limit_bytes)
            limits.memory_bytes = 0; /* as it is */
        if (limits.memory_bytes || limits.pids)
            rc = cgroup_set_limits(cg, &limits, err);
    }
    cgroup_free(cg);
    return rc;
}
