/* 1. A command in a running sandbox, to the first byte of its output: jail_command_start (the
 * command's cgroup, the SPAWN) to the first byte read from the stdout pipe init handed over.
 * Against the same program forked and exec'd bare by this process, and run by `hutch run` (a
 * fresh one-shot sandbox), interleaved round by round. The phases of the sandbox case (the
 * call, the SPAWN_REPLY, EXITED, the group removed) are kept too, to show where the time goes. */
#include <stdio.h>

#include "engine.h"

#define TARGET_RATIO 2.0 /* under 2x bare fork+exec, on p50 and on p99 */

enum { CASE_SANDBOX, CASE_BARE, CASE_HUTCH_RUN, N_CASES };

/* The first N_CASES are the cases' first bytes. */
enum {
    S_SANDBOX,
    S_BARE,
    S_HUTCH_RUN,
    S_CALL,
    S_REPLY,
    S_EXITED,
    S_DONE,
    S_BARE_EXIT,
    S_RUN_EXIT,
    N_SAMPLES
};
static const char *const sample_names[N_SAMPLES] = {
    [S_SANDBOX] = "sandbox exec: first byte",
    [S_BARE] = "bare fork+exec: first byte",
    [S_HUTCH_RUN] = "hutch run: first byte",
    [S_CALL] = "sandbox: jail_command_start returns",
    [S_REPLY] = "sandbox: SPAWN_REPLY read",
    [S_EXITED] = "sandbox: EXITED read",
    [S_DONE] = "sandbox: command's group removed",
    [S_BARE_EXIT] = "bare fork+exec: reaped",
    [S_RUN_EXIT] = "hutch run: reaped",
};

struct exec_run {
    struct bench_sandbox sb;
    struct samples s[N_SAMPLES];
};

static int one(void *ctx, int which, bool record, err_t *err)
{
    struct exec_run *x = ctx;
    struct external_times t;
    if (which == CASE_SANDBOX) {
        struct bench_command c;
        if (command_start(&x->sb, bench_payload, &c, err) < 0 ||
            command_wait_output(&x->sb, &c, true, BENCH_PAYLOAD_OUTPUT[0], err) < 0 ||
            command_finish(&x->sb, &c, err) < 0)
            return -1;
        if (record) {
            samples_add(&x->s[S_SANDBOX], bench_ms_between(c.first_ns, c.start_ns));
            samples_add(&x->s[S_CALL], bench_ms_between(c.called_ns, c.start_ns));
            samples_add(&x->s[S_REPLY], bench_ms_between(c.reply_ns, c.start_ns));
            samples_add(&x->s[S_EXITED], bench_ms_between(c.exited_ns, c.start_ns));
            samples_add(&x->s[S_DONE], bench_ms_between(c.done_ns, c.start_ns));
        }
        return 0;
    }
    bool bare = which == CASE_BARE;
    if (external_run(bare ? bench_payload : external_hutch_run_argv(), NULL, BENCH_PAYLOAD_OUTPUT,
                     &t, err) < 0)
        return -1;
    if (record) {
        samples_add(&x->s[bare ? S_BARE : S_HUTCH_RUN], t.first_ms);
        samples_add(&x->s[bare ? S_BARE_EXIT : S_RUN_EXIT], t.exit_ms);
    }
    return 0;
}

int bench_exec(void)
{
    unsigned rounds = bench_begin_timed(
        "exec", "1. exec in a running sandbox, first byte of output", "BENCH_EXEC_N", 200, true);
    static struct exec_run x;
    samples_init_all(x.s, sample_names, N_SAMPLES);
    err_t err = {0};
    int rc = -1;
    char name[48];
    snprintf(name, sizeof name, "%sexec", bench.prefix);
    if (sandbox_start(&x.sb, name, &err) == 0) {
        rc = bench_interleave(rounds, N_CASES, one, &x, &err);
        sandboxes_destroy(&x.sb, 1, 1);
    }
    if (rc < 0) {
        fprintf(stderr, "bench engine: exec: %s\n", err.msg);
    } else {
        static const int first[] = {S_SANDBOX, S_BARE, S_HUTCH_RUN};
        static const int phases[] = {S_CALL, S_REPLY,     S_SANDBOX, S_EXITED,
                                     S_DONE, S_BARE_EXIT, S_RUN_EXIT};
        report_table_of("first byte of output", x.s, first, 3);
        report_table_of("phases (from the start of each)", x.s, phases, 7);
        printf("\n");
        report_ratio("sandbox exec / bare fork+exec", &x.s[S_SANDBOX], &x.s[S_BARE]);
        report_ratio("sandbox exec / hutch run", &x.s[S_SANDBOX], &x.s[S_HUTCH_RUN]);
        report_ratio("hutch run / bare fork+exec", &x.s[S_HUTCH_RUN], &x.s[S_BARE]);
        struct summary s = samples_summary(&x.s[S_SANDBOX]), b = samples_summary(&x.s[S_BARE]);
        report_target("exec p50, x bare fork+exec", s.p50 / b.p50, TARGET_RATIO, false, "x");
        report_target("exec p99, x bare fork+exec", s.p99 / b.p99, TARGET_RATIO, false, "x");
    }
    report_end();
    samples_free_all(x.s, N_SAMPLES);
    return rc;
}
