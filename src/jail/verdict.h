/* Verdicts and accounting, isolate-style: the sandbox's own fault (XX) is never mixed up with the
 * program's, and a program's counters are deltas over its own run. The same rules for `hutch
 * run`'s payload and for every command in an agent sandbox. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "jail/cgroup.h"

enum verdict { VERDICT_OK, VERDICT_RE, VERDICT_SG, VERDICT_TO, VERDICT_ML, VERDICT_OL, VERDICT_XX };

/* What the supervisor observed; verdict_decide() turns it into one verdict. */
struct verdict_facts {
    bool internal_error;  /* hutch failed: setup, cgroup, channel */
    bool payload_ended;   /* init reported the program's end */
    int exit_code;        /* if it exited */
    int signal;           /* if it was killed by a signal, else 0 */
    bool exec_failed;     /* the command could not be executed (exit 127) */
    bool wall_timeout;    /* the supervisor killed it at the wall-clock limit */
    bool cpu_timeout;     /* the CPU time limit was reached */
    bool output_exceeded; /* the supervisor killed it for output beyond the limit */
    bool killed;          /* the supervisor killed it (for a limit or on request) */
    bool init_ended;      /* the sandbox's init is gone */
    uint64_t oom_kills;   /* OOM kills in the program's cgroup during its run */
};

/* A program's use of the machine over its run: the cgroup's counters at its end less those at
 * its start (CPU, OOM kills); memory is the group's high-water mark. */
struct verdict_usage {
    uint64_t cpu_ns;
    uint64_t memory_peak_bytes;
    uint64_t oom_kills;
};

/* Fills usage from the counters at the start and at the end, and the facts' OOM count. The OOM
 * killer may pick init itself (tmpfs pages belong to no process, so init can be the biggest one
 * left): its death then took the program, which never got to report; that is the memory limit at
 * work, not a fault of hutch's, and the program counts as killed by SIGKILL. */
void verdict_account(struct verdict_facts *facts, const struct cgroup_stats *start,
                     const struct cgroup_stats *end, struct verdict_usage *usage);
enum verdict verdict_decide(const struct verdict_facts *facts);
const char *verdict_code(enum verdict v);
/* The exit status of `hutch run`: 0 OK, 1 program failure, 2 internal error. */
int verdict_exit_status(enum verdict v);
