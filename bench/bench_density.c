/* 3. N idle agent sandboxes held at once by this one process (default 1,000): what each costs
 * the host and its caller.
 *   - host memory: MemAvailable before and with the N (the drop over N is the figure held to the
 *     target), and after they are destroyed, so that the drift of a busy machine shows (the drop
 *     from the mean of before and after is printed beside it, as a cross-check);
 *     the /proc/meminfo lines that say where it went (tmpfs, slab, kernel stacks, page tables,
 *     per-CPU); the sum of the sandbox processes' RSS and PSS (/proc/PID/smaps_rollup); their
 *     cgroups' own memory counters;
 *   - the caller: fds (/proc/self/fd) and RSS per sandbox; processes per sandbox (its init
 *     group's cgroup.procs);
 *   - that every one answers: a HELLO round trip to each, timed, while all N are held;
 *   - starting them (8 under way at once) and destroying them (16 at once) with the steps;
 *   - that nothing is left: no cgroup of ours in any hierarchy, no child process. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine.h"
#include "util/fileio.h"

#define IN_FLIGHT         8
#define DYING             16
#define TARGET_MEMORY_KIB 1024.0 /* under 1 MiB of host memory a sandbox */
#define TARGET_FDS        3.0    /* at most 3 fds of the caller's a sandbox */
#define MAX_PIDS          16     /* per sandbox, read from its cgroup */
#define MEMINFO_READS     5
/* Processes a sandbox is expected to have (init and its spawner; a files worker only once a file
 * request comes: src/init/README.md), for the check that the host has room; the figure printed
 * is counted. */
#define PROCS_EXPECTED 2

/* A "Name:   1234 kB" line of a /proc file, in KiB; -1 if absent. */
static long field_kib(const char *text, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ':')
            return strtol(p + len + 1, NULL, 10);
    return -1;
}

static const char *const meminfo_fields[] = {
    "MemAvailable", "MemFree",     "Shmem",      "AnonPages", "SUnreclaim",
    "SReclaimable", "KernelStack", "PageTables", "Percpu",
};
#define N_MEMINFO (sizeof meminfo_fields / sizeof meminfo_fields[0])

struct meminfo {
    double kib[N_MEMINFO];
};

/* The mean of a few reads, 100 ms apart: a single read catches whatever the other core did. */
static void meminfo_read(struct meminfo *m)
{
    memset(m, 0, sizeof *m);
    char text[8192];
    for (int r = 0; r < MEMINFO_READS; r++) {
        if (r)
            bench_pause_ms(100);
        file_read_at(AT_FDCWD, "/proc/meminfo", text, sizeof text, NULL);
        for (size_t i = 0; i < N_MEMINFO; i++)
            m->kib[i] += (double)field_kib(text, meminfo_fields[i]) / MEMINFO_READS;
    }
}

static int not_dot(const struct dirent *de)
{
    return de->d_name[0] != '.';
}

/* Open fds of this process, by the entries of /proc/self/fd (less scandir's own). */
static int count_fds(void)
{
    struct dirent **list;
    int n = scandir("/proc/self/fd", &list, not_dot, NULL);
    for (int i = 0; i < n; i++)
        free(list[i]);
    if (n >= 0)
        free(list);
    return n < 0 ? -1 : n - 1;
}

static long self_rss_kib(void)
{
    char text[4096];
    return file_read_at(AT_FDCWD, "/proc/self/status", text, sizeof text, NULL) > 0
               ? field_kib(text, "VmRSS")
               : -1;
}

static long proc_limit(const char *path)
{
    char text[64];
    return file_read_at(AT_FDCWD, path, text, sizeof text, NULL) > 0 ? strtol(text, NULL, 10) : -1;
}

/* Threads on the host now (the 4th field of /proc/loadavg: running/total). */
static long host_threads(void)
{
    char text[128];
    if (file_read_at(AT_FDCWD, "/proc/loadavg", text, sizeof text, NULL) <= 0)
        return -1;
    const char *slash = strchr(text, '/');
    return slash ? strtol(slash + 1, NULL, 10) : -1;
}

/* Groups of ours (names starting with prefix) in any hierarchy's hutch/. */
static size_t groups_left(const char *prefix)
{
    int hier[CGROUP_HOST_MAX_FDS];
    size_t n_hier = cgroup_host_fds(bench.host, hier, CGROUP_HOST_MAX_FDS), left = 0;
    for (size_t h = 0; h < n_hier; h++) {
        int fd = openat(hier[h], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        for (struct dirent *de; (de = readdir(d));)
            left += de->d_type == DT_DIR && strncmp(de->d_name, prefix, strlen(prefix)) == 0;
        closedir(d);
    }
    return left;
}

static size_t children_left(void)
{
    char text[4096];
    size_t n = 0;
    if (file_read_at(AT_FDCWD, "/proc/thread-self/children", text, sizeof text, NULL) <= 0)
        return 0;
    for (char *p = text; *p;) {
        if (strtol(p, &p, 10) <= 0)
            break;
        n++;
        while (*p == ' ' || *p == '\n')
            p++;
    }
    return n;
}

/* The memory charged to the sandbox's cgroup (hierarchical), in KiB; -1 if not readable. */
static double cgroup_memory_kib(struct bench_sandbox *s)
{
    char path[PATH_MAX], text[64];
    bool v2 = bench.mode == CGROUP_MODE_V2;
    if (cgroup_file_path(s->jail.cgroup, v2 ? "" : "memory",
                         v2 ? "memory.current" : "memory.usage_in_bytes", path, sizeof path,
                         NULL) < 0 ||
        file_read_at(AT_FDCWD, path, text, sizeof text, NULL) <= 0)
        return -1;
    return (double)strtoull(text, NULL, 10) / 1024.0;
}

struct held {
    double rss_kib, pss_kib, cgroup_kib;
    size_t processes, without_init, cgroup_unreadable;
};

static void measure_held(struct bench_sandbox *set, size_t n, struct held *h)
{
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        int pids[MAX_PIDS];
        size_t m = sandbox_pids(&set[i], pids, MAX_PIDS);
        h->processes += m;
        h->without_init += m == 0;
        for (size_t k = 0; k < m; k++) {
            char path[64], text[4096];
            snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pids[k]);
            if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) <= 0)
                continue;
            h->rss_kib += (double)field_kib(text, "Rss");
            h->pss_kib += (double)field_kib(text, "Pss");
        }
        double cg = cgroup_memory_kib(&set[i]);
        if (cg < 0)
            h->cgroup_unreadable++;
        else
            h->cgroup_kib += cg;
    }
}

/* Whether this host can hold n more sandboxes; says why not. */
static bool room_for(size_t n)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    size_t fds_needed = (size_t)count_fds() + 3 * n + 64;
    if (rl.rlim_cur < fds_needed) {
        fprintf(stderr, "bench engine: density: RLIMIT_NOFILE %llu, %zu needed\n",
                (unsigned long long)rl.rlim_cur, fds_needed);
        return false;
    }
    /* PROCS_EXPECTED a sandbox, plus a setup child for each under way. */
    long pid_max = proc_limit("/proc/sys/kernel/pid_max");
    long threads_max = proc_limit("/proc/sys/kernel/threads-max");
    long now = host_threads();
    long need = now + PROCS_EXPECTED * (long)n + PROCS_EXPECTED * IN_FLIGHT + 256;
    if ((pid_max > 0 && need > pid_max) || (threads_max > 0 && need > threads_max)) {
        fprintf(stderr,
                "bench engine: density: %ld threads now, %zu sandboxes need about %ld; "
                "kernel.pid_max %ld, kernel.threads-max %ld\n",
                now, n, need, pid_max, threads_max);
        return false;
    }
    printf("room: RLIMIT_NOFILE %llu (%zu needed); threads %ld now, pid_max %ld, threads-max "
           "%ld; uid ranges: %u slots\n",
           (unsigned long long)rl.rlim_cur, fds_needed, now, pid_max, threads_max,
           USERNS_SLOT_COUNT);
    return true;
}

/* How start-up scales with the number already held: per tenth of the sandboxes (in the order
 * they were begun), the wall time it took over its count (the start rate, 8 under way at
 * once), and the medians of uid_range_acquire, of the jail_start_begin call and of the whole
 * start (uid range to READY). */
static void start_by_tenth(const struct bench_sandbox *set, size_t n, uint64_t t0)
{
    if (n < 10)
        return;
    printf("\n%-6s %6s %14s %14s %14s %14s\n", "tenth", "held", "wall/count ms", "uid range p50",
           "begin p50", "to READY p50");
    uint64_t prev_end = t0;
    for (size_t k = 0; k < 10; k++) {
        size_t from = k * n / 10, to = (k + 1) * n / 10;
        struct samples uids, call, ready;
        samples_init(&uids, "");
        samples_init(&call, "");
        samples_init(&ready, "");
        uint64_t end = prev_end;
        for (size_t i = from; i < to; i++) {
            samples_add(&uids, bench_ms_between(set[i].acquired_ns, set[i].begin_ns));
            samples_add(&call, bench_ms_between(set[i].begun_ns, set[i].acquired_ns));
            samples_add(&ready, bench_ms_between(set[i].ready_ns, set[i].begin_ns));
            end = set[i].ready_ns > end ? set[i].ready_ns : end;
        }
        double per = (double)(end - prev_end) / 1e6 / (double)(to - from);
        struct summary u = samples_summary(&uids), c = samples_summary(&call),
                       r = samples_summary(&ready);
        printf("%-6zu %6zu %14.2f %14.3f %14.3f %14.3f\n", k + 1, from, per, u.p50, c.p50, r.p50);
        char label[80];
        snprintf(label, sizeof label, "start, tenth %zu: wall/count", k + 1);
        report_record(label, per, "ms");
        snprintf(label, sizeof label, "start, tenth %zu: uid_range_acquire p50", k + 1);
        report_record(label, u.p50, "ms");
        snprintf(label, sizeof label, "start, tenth %zu: jail_start_begin p50", k + 1);
        report_record(label, c.p50, "ms");
        snprintf(label, sizeof label, "start, tenth %zu: to READY p50", k + 1);
        report_record(label, r.p50, "ms");
        prev_end = end;
        samples_free(&uids);
        samples_free(&call);
        samples_free(&ready);
    }
}

static double delta_per(double before, double after, size_t n)
{
    return (after - before) / (double)n;
}

int bench_density(void)
{
    size_t n = bench_env_count("BENCH_DENSITY_N", 1000, BENCH_MAX_SANDBOXES);
    unsigned settle = bench_env_count("BENCH_DENSITY_SETTLE_MS", 2000, 600000);
    report_begin("density", "3. idle sandboxes held at once by one process");
    printf("%zu sandboxes (BENCH_DENSITY_N), %d starting at once, %d dying at once; %u ms to "
           "settle before each memory reading (BENCH_DENSITY_SETTLE_MS)\n",
           n, IN_FLIGHT, DYING, settle);
    if (!room_for(n)) {
        report_end();
        return -1;
    }
    struct bench_sandbox *set = calloc(n, sizeof *set);
    struct samples start, hello;
    samples_init(&start, "start: begin to READY");
    samples_init(&hello, "HELLO round trip, all held");
    int rc = -1;
    err_t err = {0};
    char prefix[48];
    snprintf(prefix, sizeof prefix, "%sd", bench.prefix);
    if (!set) {
        fprintf(stderr, "bench engine: density: out of memory\n");
        goto out;
    }

    bench_pause_ms(settle); /* the earlier benchmarks' namespaces are torn down late */
    struct meminfo before, with, after;
    meminfo_read(&before);
    int fds_before = count_fds();
    long rss_before = self_rss_kib();

    uint64_t t0 = jail_now_ns();
    size_t started = sandboxes_start(set, n, "d", IN_FLIGHT, &err);
    double start_s = bench_ms_since(t0) / 1e3;
    if (started < n) {
        fprintf(stderr, "bench engine: density: %zu of %zu started: %s\n", started, n, err.msg);
        goto destroy;
    }
    for (size_t i = 0; i < n; i++)
        samples_add(&start, bench_ms_between(set[i].ready_ns, set[i].begin_ns));

    bench_pause_ms(settle);
    meminfo_read(&with);
    int fds_with = count_fds();
    long rss_with = self_rss_kib();
    struct held held;
    measure_held(set, n, &held);
    for (size_t i = 0; i < n && !bench_stopping; i++) {
        uint64_t h0 = jail_now_ns();
        if (sandbox_hello(&set[i], &err) < 0) {
            fprintf(stderr, "bench engine: density: %s\n", err.msg);
            goto destroy;
        }
        samples_add(&hello, bench_ms_since(h0));
    }
    rc = bench_stopping ? -1 : 0;

destroy:;
    uint64_t t_destroy = jail_now_ns();
    size_t fallbacks = sandboxes_destroy(set, n, DYING);
    double destroy_s = bench_ms_since(t_destroy) / 1e3;
    if (rc < 0)
        goto out;
    bench_pause_ms(settle);
    meminfo_read(&after);
    size_t groups = groups_left(prefix), children = children_left();

    struct samples *const tables[] = {&start, &hello};
    report_table("latency", tables, 2);
    start_by_tenth(set, n, t0);
    printf("\n");
    report_figure("sandboxes held at once", (double)n, "");
    report_figure("started in (8 at once)", start_s, "s");
    report_figure("destroyed in (16 at once, with the steps)", destroy_s, "s");
    report_figure("needed the blocking fallback", (double)fallbacks, "sandboxes");

    printf("\nhost memory, per sandbox (KiB; /proc/meminfo means of %d reads):\n", MEMINFO_READS);
    double drop = -delta_per(before.kib[0], with.kib[0], n);
    double bracket = -delta_per((before.kib[0] + after.kib[0]) / 2, with.kib[0], n);
    double drift = delta_per(before.kib[0], after.kib[0], n);
    report_figure("MemAvailable drop, before -> with", drop, "KiB");
    report_figure("MemAvailable drop, mean(before, after) -> with", bracket, "KiB");
    report_figure("MemAvailable drift, before -> after destroy", drift, "KiB");
    /* Other processes on the host move MemAvailable too: a drift of the order of the estimate
     * makes it noise, whatever the target says. */
    if (drop <= 0 || fabs(drift) > drop / 4)
        report_note("the host's own use of memory moved by %.0f KiB a sandbox meanwhile: the "
                    "MemAvailable estimate is not reliable in this run (more sandboxes, or a "
                    "quieter host)",
                    fabs(drift));
    for (size_t i = 1; i < N_MEMINFO; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s, before -> with", meminfo_fields[i]);
        report_figure(label, delta_per(before.kib[i], with.kib[i], n), "KiB");
    }
    report_figure("sandbox processes' RSS (sum / N)", held.rss_kib / (double)n, "KiB");
    report_figure("sandbox processes' PSS (sum / N)", held.pss_kib / (double)n, "KiB");
    if (held.cgroup_unreadable < n)
        report_figure(bench.mode == CGROUP_MODE_V2 ? "cgroup memory.current (sum / N)"
                                                   : "cgroup memory.usage_in_bytes (sum / N)",
                      held.cgroup_kib / (double)(n - held.cgroup_unreadable), "KiB");
    printf("\nthe caller, per sandbox:\n");
    report_figure("fds held", delta_per(fds_before, fds_with, n), "");
    report_figure("caller's RSS", delta_per(rss_before, rss_with, n), "KiB");
    report_figure("processes (init group's cgroup.procs)", (double)held.processes / (double)n, "");
    if (held.without_init)
        report_note("%zu sandboxes showed no process in their init group", held.without_init);
    printf("\nleft behind:\n");
    report_figure("cgroups of ours in any hierarchy", (double)groups, "");
    report_figure("child processes", (double)children, "");
    printf("\n");
    report_target("host memory a sandbox (MemAvailable drop)", drop, TARGET_MEMORY_KIB, false,
                  "KiB");
    report_target("fds a sandbox", delta_per(fds_before, fds_with, n), TARGET_FDS, true, "fds");
    if (groups || children || fallbacks)
        rc = -1;
out:
    report_end();
    samples_free(&start);
    samples_free(&hello);
    free(set);
    return rc;
}
