/* 4. Freeze and thaw: jail_freeze_start, then jail_frozen until it says so, on the host's cgroup
 * mode (or HUTCH_CGROUP_MODE's). Between two questions the loop waits for the cgroup's event
 * (cgroup.events POLLPRI, where there is a cgroup2 freezer) or BENCH_FREEZE_POLL_US (default
 * 100), whichever comes first; opening that events fd is inside the timed span. Two sandboxes,
 * interleaved: an idle agent sandbox (init and its spawner, asleep) and a busy one (a command
 * spinning on a CPU: a task that must be interrupted to freeze). The call that asks is timed
 * too (the rest is the tasks' own way to the freezer, which needs a CPU), and the time this
 * thread spent runnable but off the CPU meanwhile (/proc/thread-self/schedstat): on a busy
 * 2-core host that is where a p99 goes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

#define TARGET_MS     5.0
#define SETTLE_WAIT_S 5

enum { CASE_IDLE, CASE_BUSY, N_CASES };

/* Per case: freeze, thaw, the two calls, and how long this thread waited for a CPU in each. */
enum { S_FREEZE, S_THAW, S_FREEZE_CALL, S_THAW_CALL, S_FREEZE_RUNQ, S_THAW_RUNQ, S_PER_CASE };
static const char *const sample_names[N_CASES * S_PER_CASE] = {
    "idle sandbox: freeze",
    "idle sandbox: thaw",
    "idle: the jail_freeze_start(1) call",
    "idle: the jail_freeze_start(0) call",
    "idle: freeze, we waited for a CPU",
    "idle: thaw, we waited for a CPU",
    "busy sandbox: freeze",
    "busy sandbox: thaw",
    "busy: the jail_freeze_start(1) call",
    "busy: the jail_freeze_start(0) call",
    "busy: freeze, we waited for a CPU",
    "busy: thaw, we waited for a CPU",
};

struct freeze_run {
    struct bench_sandbox sb[N_CASES];
    struct samples s[N_CASES * S_PER_CASE];
    unsigned poll_us;
    int schedstat_fd; /* /proc/thread-self/schedstat, or -1 */
};

/* The time this thread has spent runnable but waiting for a CPU (the second field of
 * schedstat), in ms; 0 without CONFIG_SCHED_INFO. */
static double runq_wait_ms(int fd)
{
    char text[128];
    ssize_t n = fd < 0 ? -1 : pread(fd, text, sizeof text - 1, 0);
    unsigned long long run, wait;
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return sscanf(text, "%llu %llu", &run, &wait) == 2 ? (double)wait / 1e6 : 0;
}

static const char *const burner[] = {"/bin/sh", "-c", "while :; do :; done", NULL};

/* One transition, timed: asked, then asked again until it holds. */
static int transition(struct bench_sandbox *s, bool frozen, unsigned poll_us, double *ms,
                      double *call_ms, err_t *err)
{
    uint64_t t0 = jail_now_ns();
    if (jail_freeze_start(&s->jail, frozen, err) < 0)
        return -1;
    *call_ms = bench_ms_since(t0);
    int events_fd = bench.mode == CGROUP_MODE_V1 ? -1 : cgroup_open_events_fd(s->jail.cgroup, NULL);
    struct timespec wait = {0, (long)poll_us * 1000};
    int rc = -1;
    for (;;) {
        bool now = !frozen;
        if (jail_frozen(&s->jail, &now, err) < 0)
            break;
        if (now == frozen) {
            *ms = bench_ms_since(t0);
            rc = 0;
            break;
        }
        if (bench_ms_since(t0) > SETTLE_WAIT_S * 1000.0) {
            err_set(err, ETIMEDOUT, "sandbox %s: still %s after %d s", s->name,
                    frozen ? "not frozen" : "frozen", SETTLE_WAIT_S);
            break;
        }
        struct pollfd p = {.fd = events_fd, .events = POLLPRI};
        if (events_fd >= 0) {
            char buf[256];
            (void)!pread(events_fd, buf, sizeof buf, 0); /* re-arms POLLPRI */
        }
        ppoll(&p, events_fd >= 0 ? 1 : 0, &wait, NULL);
    }
    if (events_fd >= 0)
        close(events_fd);
    return rc;
}

static int one(void *ctx, int which, bool record, err_t *err)
{
    struct freeze_run *x = ctx;
    double f_ms, t_ms, fc_ms, tc_ms;
    double q0 = runq_wait_ms(x->schedstat_fd);
    if (transition(&x->sb[which], true, x->poll_us, &f_ms, &fc_ms, err) < 0)
        return -1;
    double q1 = runq_wait_ms(x->schedstat_fd);
    if (transition(&x->sb[which], false, x->poll_us, &t_ms, &tc_ms, err) < 0)
        return -1;
    double q2 = runq_wait_ms(x->schedstat_fd);
    if (record) {
        struct samples *s = &x->s[which * S_PER_CASE];
        samples_add(&s[S_FREEZE], f_ms);
        samples_add(&s[S_THAW], t_ms);
        samples_add(&s[S_FREEZE_CALL], fc_ms);
        samples_add(&s[S_THAW_CALL], tc_ms);
        samples_add(&s[S_FREEZE_RUNQ], q1 - q0);
        samples_add(&s[S_THAW_RUNQ], q2 - q1);
    }
    bench_pause_ms(2); /* the busy one's task runs again before it is frozen again */
    return 0;
}

int bench_freeze(void)
{
    static struct freeze_run x;
    x.poll_us = bench_env_count("BENCH_FREEZE_POLL_US", 100, 100000);
    x.schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    unsigned rounds =
        bench_begin_timed("freeze", "4. freeze and thaw", "BENCH_FREEZE_N", 200, false);
    printf("freezer: %s; jail_frozen asked again on the event or every %u us\n",
           bench.mode == CGROUP_MODE_V1 ? "v1 freezer.state" : "cgroup2 cgroup.freeze", x.poll_us);
    samples_init_all(x.s, sample_names, N_CASES * S_PER_CASE);
    struct bench_command spin = {.out = -1, .err = -1, .in = -1, .pty = -1};
    err_t err = {0};
    int rc = -1;
    size_t n_sb = 0;
    for (; n_sb < N_CASES; n_sb++) {
        char name[48];
        snprintf(name, sizeof name, "%sfreeze%zu", bench.prefix, n_sb);
        if (sandbox_start(&x.sb[n_sb], name, &err) < 0)
            break;
    }
    /* The busy one's command runs until the sandbox is destroyed. */
    if (n_sb == N_CASES && command_start(&x.sb[CASE_BUSY], burner, &spin, &err) == 0 &&
        command_wait_output(&x.sb[CASE_BUSY], &spin, false, 0, &err) == 0)
        rc = bench_interleave(rounds, N_CASES, one, &x, &err);
    if (spin.out >= 0)
        close(spin.out);
    if (spin.err >= 0)
        close(spin.err);
    sandboxes_destroy(x.sb, n_sb, N_CASES);
    if (x.schedstat_fd >= 0)
        close(x.schedstat_fd);
    if (rc < 0) {
        fprintf(stderr, "bench engine: freeze: %s\n", err.msg);
    } else {
        static const int done[] = {S_FREEZE, S_THAW, S_PER_CASE + S_FREEZE, S_PER_CASE + S_THAW};
        static const int calls[] = {S_FREEZE_CALL, S_THAW_CALL, S_PER_CASE + S_FREEZE_CALL,
                                    S_PER_CASE + S_THAW_CALL};
        report_table_of("until jail_frozen says so", x.s, done, 4);
        static const int runq[] = {S_FREEZE_RUNQ, S_THAW_RUNQ, S_PER_CASE + S_FREEZE_RUNQ,
                                   S_PER_CASE + S_THAW_RUNQ};
        report_table_of("of which the call that asks", x.s, calls, 4);
        report_table_of("in which this thread waited for a CPU", x.s, runq, 4);
        printf("\n");
        for (size_t i = 0; i < 4; i++) {
            const struct samples *s = &x.s[done[i]];
            struct summary sum = samples_summary(s);
            char what[96];
            snprintf(what, sizeof what, "%s p50", s->name);
            report_target(what, sum.p50, TARGET_MS, false, "ms");
            snprintf(what, sizeof what, "%s p99", s->name);
            report_target(what, sum.p99, TARGET_MS, false, "ms");
        }
    }
    report_end();
    samples_free_all(x.s, N_CASES * S_PER_CASE);
    return rc;
}
