/* A code context's share of its sandbox. Each context's kernel runs in a command cgroup of its
 * own below the sandbox's (hutch/ID/cN), and before each execution the daemon fits that group's
 * limits to what the rest of the sandbox holds now: a context that fills the memory or the pid
 * table is then stopped inside its own group (the OOM killer picks among its processes, fork()
 * fails in it), never at the sandbox's limit, where the OOM killer would pick the sandbox's
 * largest process, perhaps another context's kernel, and every fork of every context would fail.
 * Best effort by nature: the figures are those of the moment the execution starts, and two
 * contexts running at once are each fitted to the other's usage at its own start. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "jail/jail.h"
#include "util/err.h"

#define SHARE_MIB              (1ull << 20)
#define SHARE_GROW_MIN         (16 * SHARE_MIB)  /* a context may always grow this much */
#define SHARE_RESERVE_MIN      (32 * SHARE_MIB)  /* kept for the rest of the sandbox ... */
#define SHARE_RESERVE_MAX      (128 * SHARE_MIB) /* ... an eighth of it, within these bounds */
#define SHARE_PIDS_RESERVE_MIN 16

/* The memory limit for a context that uses context_used bytes (not counting page cache, which
 * the kernel can reclaim) in a sandbox of sandbox_limit bytes that uses sandbox_used: what the
 * others leave, less a reserve, and never less than what the context has plus SHARE_GROW_MIN,
 * never more than the sandbox's limit. Whole MiB. */
uint64_t share_memory_limit(uint64_t sandbox_limit, uint64_t sandbox_used, uint64_t context_used);
/* The pids limit of a context in a sandbox limited to sandbox_pids (0: none, and 0 back). */
uint64_t share_pids_limit(uint64_t sandbox_pids);

/* Fits the limits of the command group `group` of jail (a sandbox of sandbox_pids processes at
 * most; its memory limit is read from its cgroup). with_pids: write the pids limit too (once per
 * group is enough: it does not depend on the others). A limit that is already right is not
 * written again. */
int share_fit(struct jail *jail, const char *group, uint64_t sandbox_pids, bool with_pids,
              err_t *err);
