#include "jail/verdict.h"

#include <signal.h>

void verdict_account(struct verdict_facts *f, const struct cgroup_stats *start,
                     const struct cgroup_stats *end, struct verdict_usage *usage)
{
    usage->cpu_ns = end->cpu_usage_ns > start->cpu_usage_ns
                        ? end->cpu_usage_ns - start->cpu_usage_ns
                        : 0;
    usage->memory_peak_bytes = end->memory_peak_bytes;
    usage->oom_kills = end->oom_kills > start->oom_kills ? end->oom_kills - start->oom_kills : 0;
    f->oom_kills = usage->oom_kills;
    if (f->init_ended && !f->killed && !f->payload_ended && f->oom_kills) {
        f->payload_ended = true;
        f->signal = SIGKILL;
    }
}

enum verdict verdict_decide(const struct verdict_facts *f)
{
    if (f->internal_error)
        return VERDICT_XX;
    /* Limits the supervisor enforced come first: whatever the program did next (die of the
     * SIGKILL, say) is a consequence of the limit. */
    if (f->wall_timeout || f->cpu_timeout)
        return VERDICT_TO;
    if (f->output_exceeded)
        return VERDICT_OL;
    if (!f->payload_ended)
        return VERDICT_XX; /* neither a verdict of ours nor an end of its own: we lost it */
    /* The kernel's RLIMIT_CPU backstop ends a process with SIGXCPU (then SIGKILL). */
    if (f->signal == SIGXCPU)
        return VERDICT_TO;
    /* An OOM kill is ML when it ended the program or made it fail; a program that survived
     * the loss of a child and exited 0 is OK. */
    if (f->oom_kills > 0 && (f->signal != 0 || f->exit_code != 0))
        return VERDICT_ML;
    if (f->signal != 0)
        return VERDICT_SG;
    if (f->exit_code != 0)
        return VERDICT_RE;
    return VERDICT_OK;
}

const char *verdict_code(enum verdict v)
{
    static const char *const codes[] = {"OK", "RE", "SG", "TO", "ML", "OL", "XX"};
    return (unsigned)v < sizeof codes / sizeof codes[0] ? codes[v] : "XX";
}

int verdict_exit_status(enum verdict v)
{
    if (v == VERDICT_OK)
        return 0;
    return v == VERDICT_XX ? 2 : 1;
}
