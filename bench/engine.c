/* The engine benchmarks: what the isolation core costs a daemon that holds agent sandboxes, each
 * against a baseline measured in the same run (bench/README.md says what each measures).
 *
 * usage: engine [-o OUT.json] [-c COMMIT] [-C COMMAND] [exec|create|density|freeze ...]
 * (all four when none is named). Needs root. The state and run directories are hutch's own
 * (HUTCH_STATE_DIR, HUTCH_RUN_DIR: bench/engine.sh makes private ones), shared with the `hutch
 * run` baseline, which takes its uid ranges from the same allocator. HUTCH_CGROUP_MODE forces
 * the cgroup mode, for this process and for hutch run alike.
 *
 * Cleanup: a first SIGINT, SIGTERM or SIGHUP stops the benchmark, which destroys its sandboxes
 * with the library's steps; a second one, or the watchdog (a library call that never returns),
 * kills and removes them with system calls and exits. Only a SIGKILL leaves them running. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/paths.h"
#include "engine.h"
#include "jail/seccomp.h"
#include "util/fileio.h"
#include "util/proctitle.h"
#include "util/strfmt.h"

#define WATCHDOG_S 900 /* per benchmark */

struct bench_env bench = {.run_dir_fd = -1, .null_fd = -1};
volatile sig_atomic_t bench_stopping;

unsigned bench_env_count(const char *name, unsigned def, unsigned max)
{
    const char *v = getenv(name);
    if (!v || !v[0])
        return def;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || n == 0 || n > max) {
        fprintf(stderr, "bench engine: %s=%s is not a count from 1 to %u; using %u\n", name, v, max,
                def);
        return def;
    }
    return (unsigned)n;
}

unsigned bench_rounds(const char *name, unsigned def)
{
    return bench_env_count(name, bench_env_count("BENCH_N", def, 100000), 100000);
}

unsigned bench_begin_timed(const char *name, const char *title, const char *var, unsigned def,
                           bool with_payload)
{
    unsigned rounds = bench_rounds(var, def);
    report_begin(name, title);
    if (with_payload)
        printf("command: %s %s %s; ", bench_payload[0], bench_payload[1], bench_payload[2]);
    printf("%u rounds (%s or BENCH_N), %u warm-up, interleaved\n", rounds, var, bench.warmup);
    return rounds;
}

int bench_interleave(unsigned rounds, int n_cases,
                     int (*one)(void *ctx, int which, bool record, err_t *err), void *ctx,
                     err_t *err)
{
    for (unsigned r = 0; r < bench.warmup + rounds; r++) {
        for (int k = 0; k < n_cases; k++) {
            if (bench_stopping)
                return err_set(err, EINTR, "stopped by a signal");
            if (one(ctx, (k + (int)r) % n_cases, r >= bench.warmup, err) < 0)
                return -1;
        }
    }
    return 0;
}

void bench_pause_ms(unsigned ms)
{
    uint64_t end = jail_now_ns() + ms * 1000000ull;
    for (uint64_t now; !bench_stopping && (now = jail_now_ns()) < end;)
        poll(NULL, 0, (int)((end - now) / 1000000u) + 1);
}

double bench_ms_since(uint64_t t0_ns)
{
    return bench_ms_between(jail_now_ns(), t0_ns);
}

double bench_ms_between(uint64_t t_ns, uint64_t t0_ns)
{
    return (double)(t_ns - t0_ns) / 1e6;
}

static void write_str(const char *s)
{
    (void)!write(2, s, strlen(s));
}

static void on_signal(int sig)
{
    /* A child of ours before its exec (a baseline's fork, a sandbox's clone before it resets
     * its signals) has this handler too, and a Ctrl-C reaches the whole process group: only
     * the driver stops or cleans up. getpid is a system call (glibc caches no pid), and in a
     * new pid namespace it says 1. */
    if (getpid() != bench.pid)
        return;
    if (sig != SIGALRM && !bench_stopping) {
        bench_stopping = 1;
        write_str("bench engine: stopping: destroying the sandboxes (again to force)\n");
        return;
    }
    write_str(sig == SIGALRM ? "bench engine: stuck (watchdog): " : "bench engine: forced: ");
    write_str("killing and removing the sandboxes\n");
    sandboxes_emergency();
    if (bench.seccomp_bpf[0])
        unlink(bench.seccomp_bpf);
    _exit(3);
}

/* Enough fds for everything held at once (3 a sandbox, plus setup's); root may raise the hard
 * limit too. */
static int raise_nofile(err_t *err)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return err_set(err, errno, "getrlimit");
    rlim_t want = BENCH_MAX_SANDBOXES * 4 + 256;
    if (rl.rlim_max < want) {
        struct rlimit hard = {.rlim_cur = want, .rlim_max = want};
        if (setrlimit(RLIMIT_NOFILE, &hard) == 0)
            return 0;
    }
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return err_set(err, errno, "raise RLIMIT_NOFILE to %llu", (unsigned long long)rl.rlim_max);
    return 0;
}

static int write_seccomp_bpf(err_t *err)
{
    struct seccomp_program prog;
    if (seccomp_builtin(SECCOMP_PROFILE_DEFAULT, &prog) < 0)
        return err_set(err, 0, "no built-in default seccomp program");
    if (strfmt(bench.seccomp_bpf, sizeof bench.seccomp_bpf, "%s/bench-seccomp.bpf", bench.run_dir) < 0)
        return err_set(err, ENAMETOOLONG, "%s: run directory path too long", bench.run_dir);
    FILE *f = fopen(bench.seccomp_bpf, "we");
    if (!f)
        return err_set(err, errno, "open %s", bench.seccomp_bpf);
    bool ok = fwrite(prog.filter, sizeof *prog.filter, prog.len, f) == prog.len;
    if (fclose(f) != 0 || !ok)
        return err_set(err, errno, "write %s", bench.seccomp_bpf);
    return 0;
}

static int setup(err_t *err)
{
    const char *hutch = getenv("BENCH_HUTCH") ? getenv("BENCH_HUTCH") : "build/hutch";
    if (!realpath(hutch, bench.hutch))
        return err_set(err, errno, "%s (build it with make)", hutch);
    /* Every sandbox's init is hutch itself, as in a daemon (hutch serve execs its own binary). */
    if (jail_use_init_binary(bench.hutch, err) < 0)
        return -1;
    const char *bwrap = getenv("BENCH_BWRAP") ? getenv("BENCH_BWRAP") : "/usr/bin/bwrap";
    if (access(bwrap, X_OK) == 0)
        if (strfmt(bench.bwrap, sizeof bench.bwrap, "%s", bwrap) < 0)
            return err_set(err, ENAMETOOLONG, "%s: path too long", bwrap);
    if (strfmt(bench.run_dir, sizeof bench.run_dir, "%s", hutch_run_dir()) < 0)
        return err_set(err, ENAMETOOLONG, "%s: path too long", hutch_run_dir());
    if (mkdir_p_at(AT_FDCWD, bench.run_dir, 0755, err) < 0)
        return -1;
    bench.run_dir_fd = open(bench.run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (bench.run_dir_fd < 0)
        return err_set(err, errno, "open %s", bench.run_dir);
    if (strfmt(bench.lock_path, sizeof bench.lock_path, "%s/uid-slots.lock", bench.run_dir) < 0)
        return err_set(err, ENAMETOOLONG, "%s: run directory path too long", bench.run_dir);
    if (template_prepare_base(hutch_state_dir(), &bench.tpl, err) < 0)
        return -1;
    bench.host = hutch_cgroup_host(err);
    if (!bench.host)
        return -1;
    bench.mode = cgroup_host_mode(bench.host);
    bench.mode_forced = hutch_cgroup_mode_forced();
    bench.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (bench.null_fd < 0)
        return err_set(err, errno, "open /dev/null");
    snprintf(bench.prefix, sizeof bench.prefix, "bench-%d-", (int)bench.pid);
    bench.warmup = bench_env_count("BENCH_WARMUP", 5, 10000);
    if (raise_nofile(err) < 0 || write_seccomp_bpf(err) < 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    proctitle_init(argc, argv);
    bench.pid = getpid(); /* before the signal handlers, which compare it */
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *out = NULL, *commit = NULL, *command = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "o:c:C:")) != -1) {
        switch (opt) {
        case 'o':
            out = optarg;
            break;
        case 'c':
            commit = optarg;
            break;
        case 'C':
            command = optarg;
            break;
        default:
            fprintf(stderr, "usage: engine [-o OUT.json] [-c COMMIT] [-C COMMAND] "
                            "[exec|create|density|freeze ...]\n");
            return 2;
        }
    }
    if (geteuid() != 0) {
        fprintf(stderr, "bench engine: needs root (sandboxes map uid ranges, make cgroups)\n");
        return 2;
    }
    static const struct {
        const char *name;
        int (*run)(void);
    } all[] = {{"exec", bench_exec},
               {"create", bench_create},
               {"density", bench_density},
               {"freeze", bench_freeze}};
    bool chosen[4] = {optind == argc, optind == argc, optind == argc, optind == argc};
    for (int i = optind; i < argc; i++) {
        size_t k = 0;
        while (k < 4 && strcmp(argv[i], all[k].name) != 0)
            k++;
        if (k == 4) {
            fprintf(stderr, "bench engine: no benchmark %s (exec, create, density, freeze)\n",
                    argv[i]);
            return 2;
        }
        chosen[k] = true;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigfillset(&sa.sa_mask);
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGALRM};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
        sigaction(stops[i], &sa, NULL);
    /* A reader that goes away (`| head`) must not kill us before the cleanup. */
    signal(SIGPIPE, SIG_IGN);

    err_t err = {0};
    int rc = 0;
    if (setup(&err) < 0 || (out && report_open(out, commit, command, &err) < 0)) {
        fprintf(stderr, "bench engine: %s\n", err.msg);
        rc = 2;
        goto out;
    }
    printf("bench engine: cgroup mode %s%s; hutch %s; state %s, run dir %s\n",
           cgroup_mode_name(bench.mode), bench.mode_forced ? " (HUTCH_CGROUP_MODE)" : "",
           bench.hutch, hutch_state_dir(), bench.run_dir);
    for (size_t k = 0; k < 4 && !bench_stopping; k++) {
        if (!chosen[k])
            continue;
        alarm(WATCHDOG_S);
        if (all[k].run() < 0)
            rc = 1;
        alarm(0);
    }
    printf("\nbench engine: %u target%s missed%s\n", report_missed(),
           report_missed() == 1 ? "" : "s", bench_stopping ? " (stopped early)" : "");
out:
    report_close();
    if (bench.seccomp_bpf[0])
        unlink(bench.seccomp_bpf);
    return bench_stopping ? 130 : rc;
}
