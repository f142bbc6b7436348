/* Verdict rules: which verdict each combination of facts gives, and the exit statuses. */
#include <signal.h>

#include "cli/verdict.h"
#include "tap.h"

static enum verdict decide(struct run_facts f)
{
    return verdict_decide(&f);
}

int main(void)
{
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true})), "OK", "exit 0 is OK");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .exit_code = 3})), "RE",
           "exit 3 is RE");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .exit_code = 127,
                                                  .exec_failed = true})),
           "RE", "a command that cannot be executed is RE (the caller's fault, not hutch's)");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .exit_code = -1,
                                                  .signal = SIGSEGV})),
           "SG", "SIGSEGV is SG");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .signal = SIGKILL,
                                                  .wall_timeout = true})),
           "TO", "killed at the wall limit is TO, not SG");
    is_str(verdict_code(decide((struct run_facts){.cpu_timeout = true})), "TO",
           "CPU limit is TO even before the end is reported");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .signal = SIGXCPU})),
           "TO", "the RLIMIT_CPU backstop (SIGXCPU) is TO");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .signal = SIGKILL,
                                                  .oom_kills = 1})),
           "ML", "OOM-killed is ML");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .exit_code = 1,
                                                  .oom_kills = 2})),
           "ML", "a program failing after an OOM kill of a child is ML");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .oom_kills = 1})), "OK",
           "a program that survived an OOM kill of a child and exited 0 is OK");
    is_str(verdict_code(decide((struct run_facts){.payload_ended = true, .signal = SIGKILL,
                                                  .output_exceeded = true})),
           "OL", "killed for output is OL");
    is_str(verdict_code(decide((struct run_facts){.output_exceeded = true, .wall_timeout = true})),
           "TO", "timeout wins over output when both happened");
    is_str(verdict_code(decide((struct run_facts){.internal_error = true, .payload_ended = true})),
           "XX", "an internal error is XX whatever the program did");
    is_str(verdict_code(decide((struct run_facts){0})), "XX",
           "no end reported and no limit hit: hutch lost the program, XX");
    is_str(verdict_code((enum verdict)42), "XX", "an unknown verdict prints as XX");

    is_u64(verdict_exit_status(VERDICT_OK), 0, "OK exits 0");
    is_u64(verdict_exit_status(VERDICT_RE), 1, "RE exits 1");
    is_u64(verdict_exit_status(VERDICT_SG), 1, "SG exits 1");
    is_u64(verdict_exit_status(VERDICT_TO), 1, "TO exits 1");
    is_u64(verdict_exit_status(VERDICT_ML), 1, "ML exits 1");
    is_u64(verdict_exit_status(VERDICT_OL), 1, "OL exits 1");
    is_u64(verdict_exit_status(VERDICT_XX), 2, "XX exits 2");
    return done_testing();
}
