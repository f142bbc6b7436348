/* A sandbox's lifecycle states and the transitions between them (DESIGN.md, "Sandboxes: state and
 * lifecycle"): creating -> running <-> paused -> killed, and failed from any live state. killed
 * and failed are final: nothing comes back from them. Pure logic, no I/O. */
#pragma once
#include <stdbool.h>

enum sandbox_state {
    SANDBOX_CREATING,
    SANDBOX_RUNNING,
    SANDBOX_PAUSED,
    SANDBOX_KILLED,
    SANDBOX_FAILED,
};
#define SANDBOX_STATE_COUNT 5
/* A set of states, for filters and for the states a transition may start from. */
#define SANDBOX_STATE_BIT(s) (1u << (s))
#define SANDBOX_STATES_LIVE                                                                        \
    (SANDBOX_STATE_BIT(SANDBOX_CREATING) | SANDBOX_STATE_BIT(SANDBOX_RUNNING) |                    \
     SANDBOX_STATE_BIT(SANDBOX_PAUSED))

/* "creating", "running", "paused", "killed", "failed" (E2B's list filter uses the middle two). */
const char *sandbox_state_name(enum sandbox_state s);
/* The state named name; -1 for a name that is none. */
int sandbox_state_parse(const char *name);
/* Whether a sandbox may go from `from` to `to`. */
bool sandbox_state_can(enum sandbox_state from, enum sandbox_state to);
