/* 2. Create an idle (agent) sandbox, then its first command's output: from the uid range and
 * the listening socket through jail_start_begin, READY, jail_command_start and the SPAWN_REPLY
 * to the first byte of the command's stdout. Against `hutch run` of the same program (a one-shot
 * sandbox, from the fork of hutch to the first byte), bubblewrap (as bench/run.sh runs it) and
 * bare fork+exec, interleaved. What follows in each agent sandbox is timed apart, off the path
 * the user waits on: a second command (what the first paid for being first) and the destroy. */
#include <stdio.h>

#include "engine.h"

enum { CASE_AGENT, CASE_HUTCH_RUN, CASE_BWRAP, CASE_BARE, N_CASES };

enum {
    S_AGENT,
    S_HUTCH_RUN,
    S_BWRAP,
    S_BARE,
    S_READY,
    S_FIRST_REPLY,
    S_FIRST_BYTE,
    S_SECOND,
    S_FINISHED,
    S_DESTROY,
    S_RUN_EXIT,
    S_BWRAP_EXIT,
    N_SAMPLES
};
static const char *const sample_names[N_SAMPLES] = {
    [S_AGENT] = "agent sandbox: create + first byte",
    [S_HUTCH_RUN] = "hutch run: first byte",
    [S_BWRAP] = "bwrap: first byte",
    [S_BARE] = "bare fork+exec: first byte",
    [S_READY] = "agent sandbox: READY",
    [S_FIRST_REPLY] = "1st command: SPAWN_REPLY",
    [S_FIRST_BYTE] = "1st command: first byte",
    [S_SECOND] = "2nd command: first byte",
    [S_FINISHED] = "agent sandbox: 1st command's group removed",
    [S_DESTROY] = "agent sandbox: destroy (apart)",
    [S_RUN_EXIT] = "hutch run: reaped",
    [S_BWRAP_EXIT] = "bwrap: reaped",
};

/* A command to its first byte, then to its end. */
static int command_once(struct bench_sandbox *sb, struct bench_command *c, err_t *err)
{
    if (command_start(sb, bench_payload, c, err) < 0 ||
        command_wait_output(sb, c, true, BENCH_PAYLOAD_OUTPUT[0], err) < 0)
        return -1;
    return command_finish(sb, c, err);
}

static int agent_once(struct samples *x, bool record, err_t *err)
{
    static unsigned counter;
    char name[48];
    snprintf(name, sizeof name, "%screate%u", bench.prefix, counter++);
    struct bench_sandbox sb;
    if (sandbox_start(&sb, name, err) < 0)
        return -1;
    struct bench_command c, c2;
    int rc = command_once(&sb, &c, err);
    if (rc == 0)
        rc = command_once(&sb, &c2, err);
    uint64_t t_destroy = jail_now_ns();
    size_t fallbacks = sandboxes_destroy(&sb, 1, 1);
    if (rc == 0 && fallbacks)
        rc = err_set(err, 0, "sandbox %s: the steps of destroy failed", name);
    if (rc == 0 && record) {
        samples_add(&x[S_AGENT], bench_ms_between(c.first_ns, sb.begin_ns));
        samples_add(&x[S_READY], bench_ms_between(sb.ready_ns, sb.begin_ns));
        samples_add(&x[S_FIRST_REPLY], bench_ms_between(c.reply_ns, c.start_ns));
        samples_add(&x[S_FIRST_BYTE], bench_ms_between(c.first_ns, c.start_ns));
        samples_add(&x[S_SECOND], bench_ms_between(c2.first_ns, c2.start_ns));
        samples_add(&x[S_FINISHED], bench_ms_between(c.done_ns, sb.begin_ns));
        samples_add(&x[S_DESTROY], bench_ms_since(t_destroy));
    }
    return rc;
}

static int one(void *ctx, int which, bool record, err_t *err)
{
    struct samples *x = ctx;
    if (which == CASE_AGENT)
        return agent_once(x, record, err);
    if (which == CASE_BWRAP && !bench.bwrap[0])
        return 0;
    static const int first[N_CASES] = {
        [CASE_HUTCH_RUN] = S_HUTCH_RUN, [CASE_BWRAP] = S_BWRAP, [CASE_BARE] = S_BARE};
    static const int reaped[N_CASES] = {
        [CASE_HUTCH_RUN] = S_RUN_EXIT, [CASE_BWRAP] = S_BWRAP_EXIT, [CASE_BARE] = -1};
    const char *const *argv = which == CASE_HUTCH_RUN ? external_hutch_run_argv()
                              : which == CASE_BWRAP   ? external_bwrap_argv()
                                                      : bench_payload;
    struct external_times t;
    if (external_run(argv, which == CASE_BWRAP ? bench.seccomp_bpf : NULL, BENCH_PAYLOAD_OUTPUT, &t,
                     err) < 0)
        return -1;
    if (record) {
        samples_add(&x[first[which]], t.first_ms);
        if (reaped[which] >= 0)
            samples_add(&x[reaped[which]], t.exit_ms);
    }
    return 0;
}

int bench_create(void)
{
    unsigned rounds =
        bench_begin_timed("create", "2. create an idle sandbox, then its first command's output",
                          "BENCH_CREATE_N", 100, true);
    bool bwrap = bench.bwrap[0] != '\0';
    if (!bwrap)
        report_note("bubblewrap is not installed: no bwrap case");
    static struct samples x[N_SAMPLES];
    samples_init_all(x, sample_names, N_SAMPLES);
    err_t err = {0};
    int rc = bench_interleave(rounds, N_CASES, one, x, &err);
    if (rc < 0) {
        fprintf(stderr, "bench engine: create: %s\n", err.msg);
    } else {
        static const int first[] = {S_AGENT, S_HUTCH_RUN, S_BARE, S_BWRAP};
        static const int phases[] = {S_READY,   S_AGENT,    S_FINISHED,
                                     S_DESTROY, S_RUN_EXIT, S_BWRAP_EXIT};
        static const int commands[] = {S_FIRST_REPLY, S_FIRST_BYTE, S_SECOND};
        report_table_of("first byte of output", x, first, bwrap ? 4 : 3);
        report_table_of("phases (from the start of each)", x, phases, bwrap ? 6 : 5);
        report_table_of("commands (from jail_command_start)", x, commands, 3);
        printf("\n");
        report_ratio("agent / hutch run", &x[S_AGENT], &x[S_HUTCH_RUN]);
        if (bwrap) {
            report_ratio("agent / bwrap", &x[S_AGENT], &x[S_BWRAP]);
            report_ratio("hutch run / bwrap", &x[S_HUTCH_RUN], &x[S_BWRAP]);
        }
        report_ratio("agent / bare fork+exec", &x[S_AGENT], &x[S_BARE]);
        struct summary a = samples_summary(&x[S_AGENT]), h = samples_summary(&x[S_HUTCH_RUN]);
        report_target("create+first byte p50, x hutch run", a.p50 / h.p50, 1.0, true, "x");
        report_target("create+first byte p99, x hutch run", a.p99 / h.p99, 1.0, true, "x");
    }
    report_end();
    samples_free_all(x, N_SAMPLES);
    return rc;
}
