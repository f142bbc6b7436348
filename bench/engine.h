/* The engine benchmarks (bench/engine.c runs them): what the isolation core costs a daemon that
 * holds agent sandboxes, each measured against a baseline in the same run. One concern a file:
 *
 *   engine.c           the run: private dirs, the cgroup host, signals, which benchmarks
 *   engine_sandbox.c   agent sandboxes started and destroyed with the library's non-blocking steps
 *   engine_command.c   commands in an agent sandbox, to their first byte and their end; HELLO
 *   engine_registry.c  every sandbox that may have left something, and the signal handler's
 *                      cleanup of them with system calls only
 *   engine_external.c  the baselines: a program forked and exec'd, timed to its first byte
 *   engine_report.c    samples, percentiles, tables, ratios, targets, the JSON file
 *   bench_exec.c       1: a command in a running sandbox, against bare fork+exec and hutch run
 *   bench_create.c     2: create an agent sandbox and get its first command's output, against
 *                      hutch run, bubblewrap and bare fork+exec
 *   bench_density.c    3: N idle sandboxes held by one process: memory, fds, processes
 *   bench_freeze.c     4: freeze and thaw */
#pragma once
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/command.h"
#include "jail/jail.h"
#include "jail/template.h"
#include "jail/userns.h"

/* ---------- the run (engine.c) ---------- */

struct bench_env {
    struct cgroup_host *host;
    enum cgroup_mode mode;
    bool mode_forced; /* HUTCH_CGROUP_MODE */
    struct template_paths tpl;
    char run_dir[PATH_MAX];
    char lock_path[PATH_MAX];   /* the uid ranges, shared with the hutch run baseline */
    char hutch[PATH_MAX];       /* build/hutch: the baseline and every sandbox's init */
    char bwrap[PATH_MAX];       /* "" when bubblewrap is not installed */
    char seccomp_bpf[PATH_MAX]; /* hutch's default program as raw BPF, for bwrap --seccomp */
    int run_dir_fd;
    int null_fd;
    unsigned warmup;
    char prefix[32]; /* of every sandbox's name: "bench-PID-" */
    pid_t pid;       /* this process: a child between fork and exec ignores our signals */
};

extern struct bench_env bench;
/* Set by the first SIGINT, SIGTERM or SIGHUP: every loop stops and cleans up. */
extern volatile sig_atomic_t bench_stopping;

/* A count from the environment (1..max), else def. */
unsigned bench_env_count(const char *name, unsigned def, unsigned max);
/* BENCH_x_N, else BENCH_N, else def. */
unsigned bench_rounds(const char *name, unsigned def);
/* report_begin, then the rounds (from var, else BENCH_N, else def) said with the payload's
 * command line: returns them. */
unsigned bench_begin_timed(const char *name, const char *title, const char *var, unsigned def,
                           bool with_payload);
/* BENCH_WARMUP rounds, then rounds recorded: each round runs every case once, starting at case
 * round mod n_cases, so that the machine's noise falls on all of them alike. Stops at the first
 * failure (-1, err) or signal (-1). */
int bench_interleave(unsigned rounds, int n_cases,
                     int (*one)(void *ctx, int which, bool record, err_t *err), void *ctx,
                     err_t *err);
/* Sleeps ms (unless stopping). */
void bench_pause_ms(unsigned ms);
double bench_ms_since(uint64_t t0_ns);
/* t_ns - t0_ns in ms. */
double bench_ms_between(uint64_t t_ns, uint64_t t0_ns);

/* The benchmarks (bench_*.c): 0, or -1 when one could not run to its end. */
int bench_exec(void);
int bench_create(void);
int bench_density(void);
int bench_freeze(void);

/* ---------- agent sandboxes (engine_sandbox.c) ---------- */

#define BENCH_MAX_SANDBOXES 4000 /* below the uid allocator's USERNS_SLOT_COUNT */

enum sandbox_state {
    SB_EMPTY,
    SB_STARTING, /* jail_start_begin done */
    SB_READY,
    SB_KILLED,   /* jail_kill done: waiting for init's pidfd */
    SB_REMOVING, /* init reaped; jail_remove said EBUSY */
    SB_FAILED,   /* a step failed: the blocking jail_destroy finishes it */
};

struct bench_sandbox {
    struct jail jail;
    struct uid_range uids;
    char name[48];
    enum sandbox_state state;
    int slot;      /* in the registry, or -1 */
    int events_fd; /* cgroup.events while removing (cgroup2 only), else -1 */
    uint32_t next_request;
    /* A command's group that may exist (the signal handler removes it); "" if none. */
    char command_group[JAIL_COMMAND_GROUP_MAX + 1];
    /* before the uid range, after it, after jail_start_begin; READY read */
    uint64_t begin_ns, acquired_ns, begun_ns, ready_ns;
};

/* The registry (engine_registry.c): -1 when full. */
int registry_add(struct bench_sandbox *s);
void registry_remove(struct bench_sandbox *s);

/* The spec every benchmark's agent sandbox gets: hutch run's default limits. */
int sandbox_begin(struct bench_sandbox *s, const char *name, err_t *err);
/* 0 ready, 1 not yet (poll control_fd), -1 failed (then destroy it). */
int sandbox_complete(struct bench_sandbox *s, err_t *err);
/* begin, wait, complete. On failure the sandbox is destroyed. */
int sandbox_start(struct bench_sandbox *s, const char *name, err_t *err);
/* Starts n sandboxes named PREFIX+tag+index, at most in_flight under way at once. Returns how many
 * started; the first failure is in err. */
size_t sandboxes_start(struct bench_sandbox *set, size_t n, const char *tag, size_t in_flight,
                       err_t *err);
/* Destroys with the non-blocking steps (kill; init's pidfd; reap; remove, retried after the
 * next cgroup event or a short timer; close), at most dying at once; whatever a step fails is
 * finished by the blocking jail_destroy. Then the uid range, the socket file, the registry.
 * Returns how many needed the fallback or failed. Ignores empty slots. */
size_t sandboxes_destroy(struct bench_sandbox *set, size_t n, size_t dying);
/* Kills and removes every registered sandbox with system calls only, then returns: for a signal
 * handler. */
void sandboxes_emergency(void);
/* The host pids in the sandbox's groups (init's group; commands' groups are not counted). */
size_t sandbox_pids(struct bench_sandbox *s, int *pids, size_t max);

/* The environment of every sandbox and command (engine_command.c). */
extern const char *const bench_command_env[];

struct bench_command {
    uint32_t request_id, cmd_id;
    char group[JAIL_COMMAND_GROUP_MAX + 1];
    int out, err, in, pty; /* the host's ends */
    bool replied, exited;
    int32_t exit_code;
    uint32_t signal;
    uint64_t start_ns;  /* before jail_command_start */
    uint64_t called_ns; /* jail_command_start returned */
    uint64_t reply_ns;  /* SPAWN_REPLY read */
    uint64_t first_ns;  /* first byte of stdout read */
    uint64_t exited_ns; /* EXITED read and stdout at EOF */
    uint64_t done_ns;   /* its group removed */
};

/* Sends the SPAWN (stdout and stderr pipes; no stdin). */
int command_start(struct bench_sandbox *s, const char *const *argv, struct bench_command *c,
                  err_t *err);
/* Waits for the SPAWN_REPLY; then, with want_byte, for a byte on stdout (which must be expect). */
int command_wait_output(struct bench_sandbox *s, struct bench_command *c, bool want_byte,
                        char expect, err_t *err);
/* Reads stdout to its end, waits for EXITED (exit 0 expected unless killed is allowed) and
 * removes the command's group. Closes the ends. */
int command_finish(struct bench_sandbox *s, struct bench_command *c, err_t *err);
/* A HELLO and its reply: the round trip to an idle init. */
int sandbox_hello(struct bench_sandbox *s, err_t *err);

/* ---------- external programs (engine_external.c) ---------- */

struct external_times {
    double first_ms; /* fork to the first byte of its stdout */
    double exit_ms;  /* fork to its reaping */
};

/* Forks and execs argv (stdin /dev/null, stdout a pipe, stderr inherited; with fd9_path, that file
 * opened as fd 9), and times it from just before the fork. It must print exactly expect and exit
 * 0. */
int external_run(const char *const *argv, const char *fd9_path, const char *expect,
                 struct external_times *out, err_t *err);
/* The same command lines in every benchmark. */
extern const char *const bench_payload[]; /* /bin/echo -n x */
#define BENCH_PAYLOAD_OUTPUT "x"
/* argv of `hutch run -- PAYLOAD` and of bwrap ... -- PAYLOAD (bench.bwrap must be set). */
const char *const *external_hutch_run_argv(void);
const char *const *external_bwrap_argv(void);

/* ---------- samples and the report (engine_report.c) ---------- */

struct samples {
    char name[48];
    double *ms;
    size_t n, cap;
};

struct summary {
    size_t n;
    double p50, p99, min, max, mean; /* nearest-rank percentiles */
};

void samples_init(struct samples *s, const char *name);
/* s[i] named names[i], for n of them; and their end. */
void samples_init_all(struct samples *s, const char *const *names, size_t n);
void samples_free_all(struct samples *s, size_t n);
void samples_add(struct samples *s, double ms);
void samples_free(struct samples *s);
struct summary samples_summary(const struct samples *s);

/* The JSON file (-o): one object, {"meta": ..., "benchmarks": [{"name", "items": [...]}]}. */
int report_open(const char *path, const char *commit, const char *command, err_t *err);
void report_close(void);
void report_begin(const char *name, const char *title);
void report_end(void);
/* The host's load average and CPU pressure, printed and kept (report_begin and report_end call
 * it: on a shared machine they say how much a figure can be trusted). */
void report_load(const char *when);
/* A table of cases (printed and kept with every sample). */
void report_table(const char *heading, struct samples *const *cases, size_t n);
/* The same for all[idx[0..n)]. */
void report_table_of(const char *heading, struct samples *all, const int *idx, size_t n);
/* num/den on p50 and on p99. */
void report_ratio(const char *label, const struct samples *num, const struct samples *den);
/* A figure with its unit, printed "label: value unit". */
void report_figure(const char *label, double value, const char *unit);
/* The same, in the JSON file only (a table printed it). */
void report_record(const char *label, double value, const char *unit);
/* A target: value against limit (strictly below, or at most), printed with "met" or "MISSED". */
bool report_target(const char *what, double value, double limit, bool at_most, const char *unit);
/* How many targets were missed in the whole run. */
unsigned report_missed(void);
void report_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
