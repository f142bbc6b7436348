#include "sandbox/state.h"

#include <string.h>

static const char *const names[SANDBOX_STATE_COUNT] = {
    [SANDBOX_CREATING] = "creating", [SANDBOX_RUNNING] = "running", [SANDBOX_PAUSED] = "paused",
    [SANDBOX_KILLED] = "killed",     [SANDBOX_FAILED] = "failed",
};

const char *sandbox_state_name(enum sandbox_state s)
{
    return (unsigned)s < SANDBOX_STATE_COUNT ? names[s] : "unknown";
}

int sandbox_state_parse(const char *name)
{
    for (int s = 0; s < SANDBOX_STATE_COUNT; s++)
        if (strcmp(name, names[s]) == 0)
            return s;
    return -1;
}

bool sandbox_state_can(enum sandbox_state from, enum sandbox_state to)
{
    /* The rows are the states left, the columns the states reached. */
    static const unsigned allowed[SANDBOX_STATE_COUNT] = {
        [SANDBOX_CREATING] = SANDBOX_STATE_BIT(SANDBOX_RUNNING) | SANDBOX_STATE_BIT(SANDBOX_FAILED),
        [SANDBOX_RUNNING] = SANDBOX_STATE_BIT(SANDBOX_PAUSED) | SANDBOX_STATE_BIT(SANDBOX_KILLED) |
                            SANDBOX_STATE_BIT(SANDBOX_FAILED),
        [SANDBOX_PAUSED] = SANDBOX_STATE_BIT(SANDBOX_RUNNING) | SANDBOX_STATE_BIT(SANDBOX_KILLED) |
                           SANDBOX_STATE_BIT(SANDBOX_FAILED),
    };
    if ((unsigned)from >= SANDBOX_STATE_COUNT || (unsigned)to >= SANDBOX_STATE_COUNT)
        return false;
    return (allowed[from] & SANDBOX_STATE_BIT(to)) != 0;
}
