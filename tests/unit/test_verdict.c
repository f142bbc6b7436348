/* Verdict rules: which verdict each combination of facts gives, and the exit statuses. */
#include <signal.h>

#include "jail/verdict.h"
#include "tap.h"

static enum verdict decide(struct verdict_facts f)
{
    return verdict_decide(&f);
}

int main(void)
{
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true})), "OK", "exit 0 is OK");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .exit_code = 3})), "RE",
           "exit 3 is RE");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .exit_code = 127,
                                                  .exec_failed = true})),
           "RE", "a command that cannot be executed is RE (the caller's fault, not hutch's)");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .exit_code = -1,
                                                  .signal = SIGSEGV})),
           "SG", "SIGSEGV is SG");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .signal = SIGKILL,
                                                  .wall_timeout = true})),
           "TO", "killed at the wall limit is TO, not SG");
    is_str(verdict_code(decide((struct verdict_facts){.cpu_timeout = true})), "TO",
           "CPU limit is TO even before the end is reported");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .signal = SIGXCPU})),
           "TO", "the RLIMIT_CPU backstop (SIGXCPU) is TO");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .signal = SIGKILL,
                                                  .oom_kills = 1})),
           "ML", "OOM-killed is ML");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .exit_code = 1,
                                                  .oom_kills = 2})),
           "ML", "a program failing after an OOM kill of a child is ML");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .oom_kills = 1})), "OK",
           "a program that survived an OOM kill of a child and exited 0 is OK");
    is_str(verdict_code(decide((struct verdict_facts){.payload_ended = true, .signal = SIGKILL,
                                                  .output_exceeded = true})),
           "OL", "killed for output is OL");
    is_str(verdict_code(decide((struct verdict_facts){.output_exceeded = true, .wall_timeout = true})),
           "TO", "timeout wins over output when both happened");
    is_str(verdict_code(decide((struct verdict_facts){.internal_error = true, .payload_ended = true})),
           "XX", "an internal error is XX whatever the program did");
    is_str(verdict_code(decide((struct verdict_facts){0})), "XX",
           "no end reported and no limit hit: hutch lost the program, XX");
    is_str(verdict_code((enum verdict)42), "XX", "an unknown verdict prints as XX");

    is_u64(verdict_exit_status(VERDICT_OK), 0, "OK exits 0");
    is_u64(verdict_exit_status(VERDICT_RE), 1, "RE exits 1");
    is_u64(verdict_exit_status(VERDICT_SG), 1, "SG exits 1");
    is_u64(verdict_exit_status(VERDICT_TO), 1, "TO exits 1");
    is_u64(verdict_exit_status(VERDICT_ML), 1, "ML exits 1");
    is_u64(verdict_exit_status(VERDICT_OL), 1, "OL exits 1");
    is_u64(verdict_exit_status(VERDICT_XX), 2, "XX exits 2");

    /* accounting: deltas over the program's own run */
    struct cgroup_stats start = {.cpu_usage_ns = 5000, .oom_kills = 2, .memory_peak_bytes = 7};
    struct cgroup_stats end = {.cpu_usage_ns = 12000, .oom_kills = 3, .memory_peak_bytes = 900};
    struct verdict_facts f = {.payload_ended = true, .signal = 9};
    struct verdict_usage u;
    verdict_account(&f, &start, &end, &u);
    is_u64(u.cpu_ns, 7000, "CPU is the delta over the run");
    is_u64(u.oom_kills, 1, "OOM kills are the delta over the run");
    is_u64(f.oom_kills, 1, "and go into the facts");
    is_u64(u.memory_peak_bytes, 900, "memory is the group's high-water mark");
    is_str(verdict_code(verdict_decide(&f)), "ML", "killed with an OOM kill in its run: ML");
    struct cgroup_stats back = {.cpu_usage_ns = 1000};
    verdict_account(&f, &start, &back, &u);
    is_u64(u.cpu_ns, 0, "a counter that went backwards (another group) counts 0, not 2^64");
    f = (struct verdict_facts){.init_ended = true};
    verdict_account(&f, &(struct cgroup_stats){0}, &end, &u);
    ok(f.payload_ended && f.signal == 9, "init taken by the OOM killer before the program could "
                                        "report: the program counts as SIGKILLed");
    is_str(verdict_code(verdict_decide(&f)), "ML", "and that is ML");
    f = (struct verdict_facts){.init_ended = true, .killed = true};
    verdict_account(&f, &(struct cgroup_stats){0}, &end, &u);
    ok(!f.payload_ended, "not when the supervisor killed it");
    f = (struct verdict_facts){.init_ended = true};
    verdict_account(&f, &(struct cgroup_stats){0}, &(struct cgroup_stats){0}, &u);
    is_str(verdict_code(verdict_decide(&f)), "XX", "init gone without OOM and without a report: XX");
    return done_testing();
}
