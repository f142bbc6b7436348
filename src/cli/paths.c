#include "cli/paths.h"

#include <stdlib.h>

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
