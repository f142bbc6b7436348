#include "cli/paths.h"

#include <stdlib.h>

#include "jail/cgroup.h"

const char *hutch_state_dir(void)
{
    const char *dir = getenv("HUTCH_STATE_DIR");
    return dir && dir[0] ? dir : "/var/lib/hutch";
}

const char *hutch_run_dir(void)
{
    const char *dir = getenv("HUTCH_RUN_DIR");
    return dir && dir[0] ? dir : "/run/hutch";
}

bool hutch_cgroup_mode_forced(void)
{
    const char *forced = getenv("HUTCH_CGROUP_MODE");
    return forced && forced[0];
}

static unsigned host_flags;

void hutch_cgroup_want_cpu_limits(void)
{
    host_flags |= CGROUP_HOST_CPU_LIMITS;
}

struct cgroup_host *hutch_cgroup_host(err_t *err)
{
    static struct cgroup_host *host;
    if (host)
        return host;
    int mode = CGROUP_MODE_DETECT;
    if (hutch_cgroup_mode_forced()) {
        enum cgroup_mode forced;
        if (cgroup_mode_parse(getenv("HUTCH_CGROUP_MODE"), &forced, err) < 0) {
            err_wrap(err, "HUTCH_CGROUP_MODE");
            return NULL;
        }
        mode = (int)forced;
    }
    if (cgroup_host_open_flags(mode, host_flags, &host, err) < 0)
        return NULL;
    return host;
}
