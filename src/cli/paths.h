/* Where hutch keeps things on the host. Environment variables override the defaults. */
#pragma once
#include <stdbool.h>

/* HUTCH_STATE_DIR, default /var/lib/hutch: templates (and, later, sandboxes and the database). */
const char *hutch_state_dir(void);
/* HUTCH_RUN_DIR, default /run/hutch: runtime locks (uid ranges) and sockets. */
const char *hutch_run_dir(void);

struct cgroup_host;
/* The process's cgroup host (src/jail/cgroup.h), opened on first use: the mode the host has, or
 * the one HUTCH_CGROUP_MODE (v1, v2, hybrid) forces, for tests. NULL with err on failure. */
#include "util/err.h"
struct cgroup_host *hutch_cgroup_host(err_t *err);
/* Before the first hutch_cgroup_host: its groups may get CPU bandwidth limits (the daemon's
 * cpuCount; on v1 and hybrid one hierarchy more per group). */
void hutch_cgroup_want_cpu_limits(void);
/* Whether HUTCH_CGROUP_MODE forces the mode (doctor says so). */
bool hutch_cgroup_mode_forced(void);
