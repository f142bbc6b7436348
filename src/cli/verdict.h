/* Verdicts, isolate-style: the sandbox's own fault (XX) is never mixed up with the program's. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

enum verdict { VERDICT_OK, VERDICT_RE, VERDICT_SG, VERDICT_TO, VERDICT_ML, VERDICT_OL, VERDICT_XX };

/* What the supervisor observed; verdict_decide() turns it into one verdict. */
struct run_facts {
    bool internal_error;  /* hutch failed: setup, cgroup, channel */
    bool payload_ended;   /* init reported the payload's end */
    int exit_code;        /* if it exited */
    int signal;           /* if it was killed by a signal, else 0 */
    bool exec_failed;     /* the command could not be executed (exit 127) */
    bool wall_timeout;    /* the supervisor killed it at the wall-clock limit */
    bool cpu_timeout;     /* the CPU time limit was reached */
    bool output_exceeded; /* the supervisor killed it for output beyond the limit */
    uint64_t oom_kills;   /* OOM kills in the sandbox's cgroup */
};

enum verdict verdict_decide(const struct run_facts *facts);
const char *verdict_code(enum verdict v);
/* The exit status of `hutch run`: 0 OK, 1 program failure, 2 internal error. */
int verdict_exit_status(enum verdict v);
