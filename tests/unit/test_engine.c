/* The engine held the way a daemon holds it: one single-threaded process, its own poll() loop,
 * its own SIGCHLD reaper, and 200 sandboxes at once, on every cgroup mode this host can run (its
 * own; forced v1 and forced v2 where the host has those hierarchies), all 200 in each. Per mode:
 *   - a setup failure that the loop reads only after the child died still gives the child's own
 *     reason;
 *   - every sandbox is started with jail_start_begin and completed with jail_start_complete when
 *     its control channel is readable, MAX_IN_FLIGHT at once, the loop never waiting but in poll;
 *   - each payload (/bin/sleep) runs; the caller's cost of an idle sandbox is at most 3 fds
 *     (init's pidfd, the control channel, the uid range's lock) and a bounded RSS;
 *   - half are frozen (and two CPU burners, which prove that the CPU check would notice), checked
 *     through the freezer's own file, the payloads' state and the CPU counters; a quarter thawed;
 *   - one sandbox's init dies of its own seccomp filter (a syscall injected with ptrace):
 *     jail_reap_init says so although the SIGCHLD handler reaped init first, and a control killed
 *     the ordinary way reports no such thing;
 *   - all are destroyed with the steps (kill; init's pidfd readable; reap; remove, retried on
 *     EBUSY after the next event or a timer; close), frozen ones included;
 *   - every library call is timed (wall and own time, p50/p99/max, as diagnostics) and bounded;
 *   - no child, cgroup, fd, mount or uid lock is left.
 *
 * die_with_parent is false, as in a daemon: its sandboxes must outlive a restart of the daemon
 * (issue 7, "reopen after restart"), and the keeper that die_with_parent starts costs a process
 * and a fourth fd per sandbox (its socket). So the test cleans up after itself on every path it
 * can see: a failed step goes to the blocking jail_destroy; a library call that never returns
 * (SIGALRM, the watchdog) or SIGINT, SIGTERM or SIGHUP kill and remove every sandbox with raw
 * system calls and bail out; a reader of its output that goes away (SIGPIPE) is ignored. Only a
 * SIGKILL of the test leaves its sandboxes running, as it would a daemon's.
 *
 * Needs root. The template and the uid-range lock live in a private directory under /tmp (what
 * HUTCH_STATE_DIR and HUTCH_RUN_DIR name for hutch run), removed at the end. The sandbox's init is
 * this binary (main hands pid 1 to init_main, as hutch's main does). HUTCH_TEST_TIME_SCALE=N
 * multiplies every time bound (for the TCG guest, tests/guest/); HUTCH_ENGINE_TEST_COUNT=N
 * changes the number of sandboxes per mode. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init/init.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/template.h"
#include "jail/userns.h"
#include "tap.h"
#include "util/proctitle.h"

#define DEFAULT_COUNT 200
#define N_BURNERS     2 /* sandboxes that spin, so that a frozen one's CPU counter means it */
#define MAX_IN_FLIGHT 8 /* starts under way at once; more only slows each call down */
/* Destroys under way at once. 200 pid, user and network namespaces torn down together load the
 * kernel's deferred work (RCU callbacks, softirqs) enough that a call of 0.1 ms of CPU that
 * never sleeps took 150 ms of wall time, none of it in a context switch. */
#define MAX_DYING 16
/* A call's own time (timing_report says what that is). jail_start_begin's clone3 copies the
 * caller's address space and makes a network namespace, and both can sleep on kernel locks the
 * rest of the host shares (measured here: up to 20 ms each, on the caller's mmap_lock in
 * dup_mmap and on a mutex in setup_net), so it gets twice the others' bound. */
#define CALL_BOUND_MS      50
#define BEGIN_BOUND_MS     100
#define CALL_WALL_BOUND_MS 1000 /* wall time, which includes waiting for the CPU */
#define FD_PER_SANDBOX     3
#define RSS_PER_SANDBOX    (8u * 1024) /* bytes of the caller's RSS per idle sandbox */
#define PHASE_TIMEOUT_MS   20000       /* a start, freeze or destroy phase of one mode */
#define CPU_WINDOW_MS      200
#define BURNER_MIN_CPU_MS                                                                          \
    1                        /* a running burner moves its counter by this much, a frozen one by 0 \
                              */
#define REMOVE_RETRY_MS 5    /* the timer for a retry of jail_remove after EBUSY */
#define WATCHDOG_S      150  /* per mode: longer means a library call never returned */
#define REAPED_MAX      4096 /* what the SIGCHLD handler records, per mode */
#define NAME_PREFIX     "engine"
/* Two sandboxes that are never frozen (the frozen half are the even ones). */
#define VICTIM  1 /* its init dies of its own seccomp filter */
#define CONTROL 3 /* its init is killed the ordinary way */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---------- timing of library calls ---------- */

enum call_kind {
    CALL_UID_ACQUIRE,
    CALL_BEGIN,
    CALL_COMPLETE,
    CALL_FREEZE,
    CALL_FROZEN,
    CALL_THAW,
    CALL_KILL,
    CALL_REAP,
    CALL_REMOVE,
    CALL_CLOSE,
    CALL_KINDS,
};

static const char *const call_names[CALL_KINDS] = {
    [CALL_UID_ACQUIRE] = "uid_range_acquire",
    [CALL_BEGIN] = "jail_start_begin",
    [CALL_COMPLETE] = "jail_start_complete",
    [CALL_FREEZE] = "jail_freeze_start(1)",
    [CALL_FROZEN] = "jail_frozen",
    [CALL_THAW] = "jail_freeze_start(0)",
    [CALL_KILL] = "jail_kill",
    [CALL_REAP] = "jail_reap_init",
    [CALL_REMOVE] = "jail_remove",
    [CALL_CLOSE] = "jail_close",
};

/* Two times per call. Wall time is what the caller waited, and on a loaded 2-core machine it
 * is mostly the scheduler's: a call of 0.2 ms of CPU that never sleeps was measured at 150 ms.
 * Its own time is wall time less the time it was runnable but another task had the CPU (the
 * run-queue wait of /proc/thread-self/schedstat): its CPU, plus every wait inside the library or
 * the kernel on its behalf. The library's promise, never to block, is about the second; the
 * first gets a bound of its own, generous enough for a busy host. */
struct timing {
    uint64_t *wall_ns, *own_ns; /* per call */
    size_t n, cap;
    uint64_t cpu_max_ns;     /* the most CPU one call used */
    size_t calls_that_slept; /* a voluntary context switch inside: the call waited */
};

static struct timing timings[CALL_KINDS];
static unsigned time_scale = 1;
static int schedstat_fd = -1; /* /proc/thread-self/schedstat, or -1: own time is wall time */

struct call_clock {
    uint64_t wall_ns, cpu_ns, runq_ns;
    long voluntary;
};

static uint64_t runq_wait_ns(void)
{
    char text[128];
    ssize_t n = schedstat_fd < 0 ? -1 : pread(schedstat_fd, text, sizeof text - 1, 0);
    unsigned long long run, wait;
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return sscanf(text, "%llu %llu", &run, &wait) == 2 ? wait : 0;
}

static struct call_clock call_clock_now(void)
{
    struct timespec ts;
    struct rusage ru;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    getrusage(RUSAGE_THREAD, &ru);
    return (struct call_clock){.wall_ns = jail_now_ns(),
                               .cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                               .runq_ns = runq_wait_ns(),
                               .voluntary = ru.ru_nvcsw};
}

static void timing_add(enum call_kind kind, struct call_clock start)
{
    struct call_clock end = call_clock_now();
    struct timing *t = &timings[kind];
    uint64_t wall = end.wall_ns - start.wall_ns, cpu = end.cpu_ns - start.cpu_ns;
    uint64_t runq = end.runq_ns - start.runq_ns;
    t->cpu_max_ns = cpu > t->cpu_max_ns ? cpu : t->cpu_max_ns;
    t->calls_that_slept += end.voluntary != start.voluntary;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        uint64_t *wall_grown = realloc(t->wall_ns, cap * sizeof *wall_grown);
        if (wall_grown)
            t->wall_ns = wall_grown;
        uint64_t *own_grown = realloc(t->own_ns, cap * sizeof *own_grown);
        if (own_grown)
            t->own_ns = own_grown;
        if (!wall_grown || !own_grown)
            return; /* the figure is lost, not the test */
        t->cap = cap;
    }
    t->wall_ns[t->n] = wall;
    t->own_ns[t->n++] = runq < wall ? wall - runq : 0;
}

/* Times one library call; its value is the call's. */
#define TIMED(kind, call)                                                                          \
    ({                                                                                             \
        struct call_clock t0_ = call_clock_now();                                                  \
        __typeof__(call) r_ = (call);                                                              \
        timing_add((kind), t0_);                                                                   \
        r_;                                                                                        \
    })

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct spread {
    uint64_t p50, p99, max;
    size_t over;
};

static struct spread spread_of(uint64_t *ns, size_t n, uint64_t bound)
{
    qsort(ns, n, sizeof *ns, cmp_u64);
    struct spread s = {.p50 = ns[(n - 1) / 2], .p99 = ns[(n - 1) * 99 / 100], .max = ns[n - 1]};
    for (size_t i = 0; i < n; i++)
        s.over += ns[i] > bound;
    return s;
}

/* Figures and two checks per kind of call, then the figures are reset. */
static void timing_report(const char *label)
{
    uint64_t wall_bound = (uint64_t)CALL_WALL_BOUND_MS * time_scale * 1000000u;
    for (size_t k = 0; k < CALL_KINDS; k++) {
        struct timing *t = &timings[k];
        if (t->n == 0)
            continue;
        unsigned own_ms = (k == CALL_BEGIN ? BEGIN_BOUND_MS : CALL_BOUND_MS) * time_scale;
        uint64_t own_bound = (uint64_t)own_ms * 1000000u;
        struct spread wall = spread_of(t->wall_ns, t->n, wall_bound);
        struct spread own = spread_of(t->own_ns, t->n, own_bound);
        printf("# %s: %-20s n=%4zu wall p50 %7.3f p99 %7.3f max %7.3f ms; own p99 %7.3f max "
               "%7.3f ms; CPU max %6.3f ms; slept in %zu\n",
               label, call_names[k], t->n, wall.p50 / 1e6, wall.p99 / 1e6, wall.max / 1e6,
               own.p99 / 1e6, own.max / 1e6, t->cpu_max_ns / 1e6, t->calls_that_slept);
        /* Own time still holds the kernel's waits on locks every sandbox of the host takes
         * (a guest under TCG once took 1.3 s in one clone3): 99 in 100 calls within the bound
         * (a library that slept would put every call over it), every one within the wall
         * bound below. */
        ok(own.over * 100 <= t->n,
           "%s: 99%% of %s calls take at most %u ms of their own time "
           "(%zu of %zu over)",
           label, call_names[k], own_ms, own.over, t->n);
        ok(wall.over == 0, "%s: every %s returns within %u ms of wall time (%zu of %zu over)",
           label, call_names[k], CALL_WALL_BOUND_MS * time_scale, wall.over, t->n);
        t->n = 0;
        t->cpu_max_ns = 0;
        t->calls_that_slept = 0;
    }
}

/* ---------- the other reaper ---------- */

/* What a daemon's own reaper does: collect every child that has ended, whoever it is. It runs
 * whenever SIGCHLD arrives, so it usually takes a sandbox's init before jail_reap_init can. */
static volatile sig_atomic_t reaped_count;
static pid_t reaped_pid[REAPED_MAX];
static int reaped_status[REAPED_MAX];

static void on_sigchld(int sig)
{
    int saved = errno;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        sig_atomic_t n = reaped_count;
        if (n < REAPED_MAX) {
            reaped_pid[n] = pid;
            reaped_status[n] = status;
            reaped_count = n + 1;
        }
    }
    errno = saved;
}

/* The status the handler got for pid, or -1 if it did not reap it. */
static int reaped_by_handler(pid_t pid)
{
    for (sig_atomic_t i = 0; i < reaped_count; i++)
        if (reaped_pid[i] == pid)
            return reaped_status[i];
    return -1;
}

static void sigchld_block(bool block)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* ---------- the sandboxes ---------- */

enum sandbox_state {
    SB_NONE,     /* nothing made */
    SB_STARTING, /* jail_start_begin done, READY not yet read */
    SB_READY,
    SB_SETUP_FAILED, /* jail_start_complete failed: destroyed with the steps like the rest */
    SB_KILLED,       /* jail_kill done (or init dying by itself): waiting for its pidfd */
    SB_REMOVING,     /* init reaped; jail_remove said EBUSY, retried after the next event */
    SB_CLOSED,
    SB_FAILED, /* a step failed: left to the blocking fallback */
};

struct sandbox {
    struct jail jail;
    struct uid_range uids;
    char name[64];
    enum sandbox_state state;
    volatile sig_atomic_t live; /* has something to clean up (read by the watchdog) */
    bool burner;
    bool bad_bind; /* its setup fails: a bind source that does not exist */
    bool want_frozen;
    bool thawed;
    bool settling;  /* freeze_all: asked, not yet seen frozen (or thawed) */
    int events_fd;  /* cgroup.events while freezing or removing (not on v1); else -1 */
    pid_t init_pid; /* kept: jail_reap_init clears jail.pid */
    int reap_rc;    /* what jail_reap_init returned in the end */
    char reap_msg[256];
    uint64_t cpu_ns;
};

struct mode_run {
    char label[16];
    int mode_arg; /* CGROUP_MODE_DETECT or the forced mode */
    enum cgroup_mode mode;
    bool limits; /* memory and pids limits can be set (not on a controller-less cgroup2) */
    struct cgroup_host *host;
    struct sandbox *sb;
    size_t n;       /* idle sandboxes */
    size_t n_all;   /* with the burners */
    size_t n_slots; /* with the one whose setup fails (the last) */
    struct pollfd *pfd;
    size_t *pfd_of; /* pfd[i] belongs to sb[pfd_of[i]] */
};

static struct mode_run *watched; /* what the watchdog cleans up */
static const char *phase = "setup";
static char lock_path[PATH_MAX], state_dir[PATH_MAX], base_dir[PATH_MAX];
static struct template_paths tpl;
static int null_fd = -1;
static bool kernel_pidfd_exit; /* PIDFD_INFO_EXIT: init's status after another reaper took it */
static pid_t self_pid;

/* hutch/ in every hierarchy there is, for the leftover check and the watchdog; kept open for
 * the whole run so that they do not move the fd counts. */
static const char *const hier_paths[] = {
    "/sys/fs/cgroup/hutch",      "/sys/fs/cgroup/unified/hutch", "/sys/fs/cgroup/memory/hutch",
    "/sys/fs/cgroup/pids/hutch", "/sys/fs/cgroup/cpuacct/hutch", "/sys/fs/cgroup/freezer/hutch",
};
static int hier_fd[COUNT(hier_paths)] = {-1, -1, -1, -1, -1, -1};

static void hier_open_all(void)
{
    for (size_t i = 0; i < COUNT(hier_paths); i++)
        if (hier_fd[i] < 0)
            hier_fd[i] = open(hier_paths[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static uint64_t ms_to_ns(uint64_t ms)
{
    return ms * time_scale * 1000000u;
}

/* ---------- the watchdog ---------- */

static void write_str(int fd, const char *s)
{
    (void)!write(fd, s, strlen(s));
}

static void write_at(int dirfd, const char *name, const char *file, const char *value)
{
    char path[160];
    size_t n = strlen(name), m = strlen(file);
    if (n + m + 2 > sizeof path)
        return;
    memcpy(path, name, n);
    path[n] = '/';
    memcpy(path + n + 1, file, m + 1);
    int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        write_str(fd, value);
        close(fd);
    }
}

/* A library call did not return (SIGALRM), or the test is being stopped (SIGINT, SIGTERM,
 * SIGHUP): kill and remove what can be, with system calls only, and bail out. */
static void on_fatal(int sig)
{
    write_str(1, "Bail out! ");
    write_str(1, sig == SIGALRM ? "stuck (a library call did not return)" : "stopped by a signal");
    write_str(1, " in phase: ");
    write_str(1, phase);
    write_str(1, "; killing the sandboxes\n");
    struct mode_run *r = watched;
    if (r) {
        for (size_t i = 0; i < r->n_slots; i++)
            if (r->sb[i].live && r->sb[i].jail.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, r->sb[i].jail.pidfd, SIGKILL, NULL, 0);
        for (int attempt = 0; attempt < 300; attempt++) {
            bool left = false;
            for (size_t i = 0; i < r->n_slots; i++) {
                if (!r->sb[i].live)
                    continue;
                for (size_t h = 0; h < COUNT(hier_fd); h++) {
                    if (hier_fd[h] < 0)
                        continue;
                    write_at(hier_fd[h], r->sb[i].name, "freezer.state", "THAWED");
                    write_at(hier_fd[h], r->sb[i].name, "cgroup.freeze", "0");
                    write_at(hier_fd[h], r->sb[i].name, "cgroup.kill", "1");
                    if (unlinkat(hier_fd[h], r->sb[i].name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                        left = true;
                }
            }
            if (!left)
                break;
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    write_str(1, "# the private directory under /tmp is left: ");
    write_str(1, base_dir);
    write_str(1, "\n");
    _exit(2);
}

/* ---------- small readers ---------- */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static long vmrss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static ssize_t read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

/* A group file of the sandbox, read by the test itself (not through the library's parser). */
static ssize_t read_group_file(const struct mode_run *r, struct sandbox *s, const char *ctrl,
                               const char *file, char *buf, size_t size)
{
    char path[PATH_MAX];
    err_t err;
    buf[0] = '\0';
    if (cgroup_file_path(s->jail.cgroup, ctrl, file, path, sizeof path, &err) < 0)
        return -1;
    return read_text(path, buf, size);
}

/* The payload's host pid: the member of the sandbox's group that is not its init. */
static pid_t payload_pid(const struct mode_run *r, struct sandbox *s)
{
    char text[512];
    if (read_group_file(r, s, r->mode == CGROUP_MODE_V1 ? "pids" : "", "cgroup.procs", text,
                        sizeof text) < 0)
        return -1;
    for (char *p = text; *p;) {
        pid_t pid = (pid_t)strtol(p, &p, 10);
        if (pid > 0 && pid != s->init_pid)
            return pid;
        while (*p == '\n')
            p++;
        if (pid <= 0)
            break;
    }
    return 0;
}

static bool proc_comm_is(pid_t pid, const char *want)
{
    char path[64], comm[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    if (read_text(path, comm, sizeof comm) <= 0)
        return false;
    comm[strcspn(comm, "\n")] = '\0';
    return strcmp(comm, want) == 0;
}

/* The one-letter state of /proc/PID/stat ('R', 'S', 'D', ...), or '?'. */
static char proc_state(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_text(path, stat, sizeof stat) <= 0)
        return '?';
    const char *close_paren = strrchr(stat, ')');
    return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

/* The freezer's own word: freezer.state on v1, cgroup.events' "frozen" on cgroup2. */
static bool group_says_frozen(const struct mode_run *r, struct sandbox *s)
{
    char text[512];
    if (r->mode == CGROUP_MODE_V1)
        return read_group_file(r, s, "freezer", "freezer.state", text, sizeof text) > 0 &&
               strcmp(text, "FROZEN\n") == 0;
    return read_group_file(r, s, "", "cgroup.events", text, sizeof text) > 0 &&
           strstr(text, "\nfrozen 1") != NULL;
}

/* Waits ms in the test's own loop (a daemon would be doing other work); signals do not cut it. */
static void pause_ms(uint64_t ms)
{
    uint64_t end = jail_now_ns() + ms * 1000000u;
    for (uint64_t now; (now = jail_now_ns()) < end;)
        poll(NULL, 0, (int)((end - now) / 1000000u) + 1);
}

static int poll_timeout(uint64_t deadline, int cap_ms)
{
    uint64_t now = jail_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t left = (deadline - now) / 1000000u + 1;
    return left < (uint64_t)cap_ms ? (int)left : cap_ms;
}

/* The first failure of a kind is shown; the rest are counted. */
struct failures {
    size_t n;
    char first[1400];
};

static void fail_note(struct failures *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail_note(struct failures *f, const char *fmt, ...)
{
    if (f->n++ > 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->first, sizeof f->first, fmt, ap);
    va_end(ap);
}

static void fail_show(const struct failures *f)
{
    if (f->n)
        printf("#   %zu failed; first: %s\n", f->n, f->first);
}

/* ---------- start ---------- */

static const char *const env_default[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=" JAIL_USER_HOME,
    "LANG=C.UTF-8",
    NULL,
};
static const char *const argv_sleeper[] = {"/bin/sleep", "1000", NULL};
static const char *const argv_burner[] = {"/bin/sh", "-c", "while :; do :; done", NULL};

static const struct jail_mount missing_bind = {.host_path = "/nonexistent-hutch-engine-test",
                                               .sandbox_path = "/mnt/missing"};

static int start_begin(struct mode_run *r, struct sandbox *s, err_t *err)
{
    if (TIMED(CALL_UID_ACQUIRE, uid_range_acquire(lock_path, &s->uids, err)) < 0)
        return -1;
    struct jail_spec spec = {
        .cgroups = r->host,
        .name = s->name,
        .template_dir = tpl.rootfs,
        .usr_dir = "/usr",
        .stage_dir = tpl.stage,
        .limits = {.memory_bytes = r->limits ? 256u << 20 : 0,
                   .pids = r->limits ? 64 : 0,
                   .disk_bytes = 16u << 20},
        .net = JAIL_NET_NONE,
        .host_uid_base = s->uids.host_base,
        .seccomp = SECCOMP_PROFILE_DEFAULT,
        .argv = s->burner ? argv_burner : argv_sleeper,
        .envp = env_default,
        .stdin_fd = null_fd,
        .stdout_fd = null_fd,
        .stderr_fd = null_fd,
        .mounts = s->bad_bind ? &missing_bind : NULL,
        .n_mounts = s->bad_bind ? 1 : 0,
        .die_with_parent = false,
        .keep_fd = -1,
    };
    s->live = 1; /* before the call: a stuck begin may have made a group already */
    if (TIMED(CALL_BEGIN, jail_start_begin(&spec, &s->jail, err)) < 0) {
        /* jail_start_begin leaves nothing behind on failure */
        uid_range_release(&s->uids);
        s->live = 0;
        return -1;
    }
    s->init_pid = s->jail.pid;
    s->state = SB_STARTING;
    return 0;
}

/* Starts sb[from..to) in one loop: a few begun at a time, each completed when its control
 * channel is readable. The loop never waits on anything but poll(). */
static void start_all(struct mode_run *r, size_t from, size_t to, struct failures *fail)
{
    uint64_t deadline = jail_now_ns() + ms_to_ns(PHASE_TIMEOUT_MS);
    size_t next = from, in_flight = 0;
    while (next < to || in_flight > 0) {
        if (next < to && in_flight < MAX_IN_FLIGHT) {
            err_t err = {0};
            struct sandbox *s = &r->sb[next++];
            if (start_begin(r, s, &err) < 0) {
                s->state = SB_NONE;
                fail_note(fail, "%s: jail_start_begin: %s", s->name, err.msg);
            } else {
                in_flight++;
            }
            continue; /* begin the next before waiting on anything */
        }
        size_t n = 0;
        for (size_t i = from; i < next; i++) {
            if (r->sb[i].state != SB_STARTING)
                continue;
            r->pfd[n] = (struct pollfd){.fd = r->sb[i].jail.control_fd, .events = POLLIN};
            r->pfd_of[n++] = i;
        }
        int got = poll(r->pfd, n, poll_timeout(deadline, 100));
        if (got < 0 && errno != EINTR) {
            fail_note(fail, "poll: %s", strerror(errno));
            break;
        }
        bool late = jail_now_ns() >= deadline;
        for (size_t k = 0; k < n; k++) {
            if (!r->pfd[k].revents && !late)
                continue;
            struct sandbox *s = &r->sb[r->pfd_of[k]];
            err_t err = {0};
            int rc = TIMED(CALL_COMPLETE, jail_start_complete(&s->jail, &err));
            if (rc == 1 && !late)
                continue;
            in_flight--;
            if (rc == 0) {
                s->state = SB_READY;
            } else {
                s->state = SB_SETUP_FAILED;
                fail_note(fail, "%s: jail_start_complete: %s", s->name,
                          rc == 1 ? "not ready within the phase's time" : err.msg);
            }
        }
        if (late)
            break;
    }
}

/* ---------- freeze and thaw ---------- */

/* Asks every sandbox marked want_frozen to freeze (or, with frozen false, every thawed one to
 * thaw), then waits in the loop: on cgroup2 for POLLPRI on cgroup.events, on v1 (no such file)
 * on a short timer, asking jail_frozen each time. */
static void freeze_all(struct mode_run *r, bool frozen, struct failures *fail)
{
    size_t pending = 0;
    for (size_t i = 0; i < r->n_all; i++) {
        struct sandbox *s = &r->sb[i];
        bool wanted = frozen ? s->want_frozen : s->thawed;
        if (s->state != SB_READY || !wanted)
            continue;
        err_t err = {0};
        if (TIMED(frozen ? CALL_FREEZE : CALL_THAW, jail_freeze_start(&s->jail, frozen, &err)) <
            0) {
            fail_note(fail, "%s: jail_freeze_start(%d): %s", s->name, frozen, err.msg);
            continue;
        }
        s->settling = true;
        if (r->mode != CGROUP_MODE_V1) {
            s->events_fd = cgroup_open_events_fd(s->jail.cgroup, &err);
            if (s->events_fd < 0)
                fail_note(fail, "%s: cgroup_open_events_fd: %s", s->name, err.msg);
        }
        pending++;
    }
    uint64_t deadline = jail_now_ns() + ms_to_ns(PHASE_TIMEOUT_MS);
    bool first = true;
    while (pending > 0) {
        size_t n = 0;
        for (size_t i = 0; i < r->n_all; i++) {
            if (r->sb[i].events_fd < 0)
                continue;
            r->pfd[n] = (struct pollfd){.fd = r->sb[i].events_fd, .events = POLLPRI};
            r->pfd_of[n++] = i;
        }
        /* The first round asks at once: a group with nothing running may be frozen already. */
        if (!first)
            poll(r->pfd, n, poll_timeout(deadline, r->mode == CGROUP_MODE_V1 ? 5 : 100));
        first = false;
        bool late = jail_now_ns() >= deadline;
        for (size_t i = 0; i < r->n_all; i++) {
            struct sandbox *s = &r->sb[i];
            if (!s->settling)
                continue;
            err_t err = {0};
            bool now_frozen = !frozen;
            if (TIMED(CALL_FROZEN, jail_frozen(&s->jail, &now_frozen, &err)) < 0) {
                fail_note(fail, "%s: jail_frozen: %s", s->name, err.msg);
            } else if (now_frozen != frozen && !late) {
                continue;
            } else if (now_frozen != frozen) {
                fail_note(fail, "%s: still %s after %d ms", s->name,
                          frozen ? "not frozen" : "frozen", PHASE_TIMEOUT_MS * time_scale);
            }
            s->settling = false;
            if (s->events_fd >= 0)
                close(s->events_fd);
            s->events_fd = -1;
            pending--;
        }
        if (late)
            break;
    }
    for (size_t i = 0; i < r->n_all; i++) {
        r->sb[i].settling = false;
        if (r->sb[i].events_fd >= 0)
            close(r->sb[i].events_fd);
        r->sb[i].events_fd = -1;
    }
}

/* CPU used by each sandbox in sel over one window, into sb[].cpu_ns. */
/* Each selected sandbox's CPU time over window_ms (cpu_ns). */
static void cpu_over_window(struct mode_run *r, bool (*sel)(const struct sandbox *),
                            unsigned window_ms, struct failures *fail)
{
    uint64_t *before = calloc(r->n_all, sizeof *before);
    if (!before) {
        fail_note(fail, "calloc: %s", strerror(errno));
        return;
    }
    for (size_t i = 0; i < r->n_all; i++) {
        err_t err;
        before[i] = 0;
        if (r->sb[i].state == SB_READY && sel(&r->sb[i]) &&
            cgroup_read_cpu_ns(r->sb[i].jail.cgroup, &before[i], &err) < 0)
            fail_note(fail, "%s: cgroup_read_cpu_ns: %s", r->sb[i].name, err.msg);
    }
    pause_ms(window_ms);
    for (size_t i = 0; i < r->n_all; i++) {
        err_t err;
        uint64_t after = 0;
        r->sb[i].cpu_ns = 0;
        if (r->sb[i].state != SB_READY || !sel(&r->sb[i]))
            continue;
        if (cgroup_read_cpu_ns(r->sb[i].jail.cgroup, &after, &err) < 0)
            fail_note(fail, "%s: cgroup_read_cpu_ns: %s", r->sb[i].name, err.msg);
        r->sb[i].cpu_ns = after - before[i];
    }
    free(before);
}

static bool is_burner(const struct sandbox *s)
{
    return s->burner;
}

static bool is_frozen_one(const struct sandbox *s)
{
    return s->want_frozen;
}

static bool is_thawed_burner(const struct sandbox *s)
{
    return s->burner && s->thawed;
}

/* ---------- destroy ---------- */

static void sandbox_release(struct mode_run *r, struct sandbox *s)
{
    uid_range_release(&s->uids);
    s->live = 0;
    s->state = SB_CLOSED;
}

/* One remove attempt; on success the sandbox is closed, on EBUSY it waits for the next event. */
static void try_remove(struct mode_run *r, struct sandbox *s, struct failures *fail)
{
    err_t err = {0};
    if (TIMED(CALL_REMOVE, jail_remove(&s->jail, &err)) < 0) {
        if (err.errnum != EBUSY) {
            fail_note(fail, "%s: jail_remove: %s", s->name, err.msg);
            s->state = SB_FAILED;
            return;
        }
        if (s->state != SB_REMOVING && r->mode != CGROUP_MODE_V1)
            s->events_fd = cgroup_open_events_fd(s->jail.cgroup, NULL);
        s->state = SB_REMOVING;
        return;
    }
    if (s->events_fd >= 0)
        close(s->events_fd);
    s->events_fd = -1;
    TIMED(CALL_CLOSE, (jail_close(&s->jail), 0));
    sandbox_release(r, s);
}

static bool destroyable(const struct sandbox *s)
{
    return s->state == SB_READY || s->state == SB_STARTING || s->state == SB_SETUP_FAILED;
}

/* Destroys sb[idx[0..n)] with the steps, in one loop, at most MAX_DYING under way at once (a
 * daemon paces its teardown as it paces its starts: see MAX_DYING). With kill false their inits
 * are expected to die by themselves (the seccomp case). */
static void destroy_set(struct mode_run *r, const size_t *idx, size_t n, bool kill,
                        struct failures *fail)
{
    uint64_t deadline = jail_now_ns() + ms_to_ns(PHASE_TIMEOUT_MS);
    size_t next = 0, dying = 0;
    for (;;) {
        for (; next < n && dying < MAX_DYING; next++) {
            struct sandbox *s = &r->sb[idx[next]];
            if (!destroyable(s))
                continue;
            err_t err = {0};
            if (kill && TIMED(CALL_KILL, jail_kill(&s->jail, &err)) < 0) {
                fail_note(fail, "%s: jail_kill: %s", s->name, err.msg);
                s->state = SB_FAILED;
                continue;
            }
            s->state = SB_KILLED;
            dying++;
        }
        size_t m = 0;
        bool removing = false;
        for (size_t k = 0; k < next; k++) {
            struct sandbox *s = &r->sb[idx[k]];
            removing |= s->state == SB_REMOVING;
            if (s->state == SB_KILLED)
                r->pfd[m] = (struct pollfd){.fd = s->jail.pidfd, .events = POLLIN};
            else if (s->state == SB_REMOVING && s->events_fd >= 0)
                r->pfd[m] = (struct pollfd){.fd = s->events_fd, .events = POLLPRI};
            else
                continue;
            r->pfd_of[m++] = idx[k];
        }
        if (m == 0 && !removing && next == n)
            break;
        if (jail_now_ns() >= deadline) {
            for (size_t k = 0; k < n; k++) {
                struct sandbox *s = &r->sb[idx[k]];
                if (s->state == SB_KILLED || s->state == SB_REMOVING || destroyable(s)) {
                    fail_note(fail, "%s: %s after %d ms", s->name,
                              s->state == SB_KILLED     ? "init's pidfd still not readable"
                              : s->state == SB_REMOVING ? "cgroup still busy"
                                                        : "not killed yet",
                              PHASE_TIMEOUT_MS * time_scale);
                    s->state = SB_FAILED;
                }
            }
            break;
        }
        /* EBUSY is retried after the next event or a short timer, never in a spin. */
        poll(r->pfd, m, poll_timeout(deadline, removing ? REMOVE_RETRY_MS : 100));
        for (size_t k = 0; k < next; k++) {
            struct sandbox *s = &r->sb[idx[k]];
            if (s->state == SB_REMOVING) {
                try_remove(r, s, fail);
                dying -= s->state != SB_REMOVING;
                continue;
            }
            if (s->state != SB_KILLED)
                continue;
            err_t err = {0};
            int rc = TIMED(CALL_REAP, jail_reap_init(&s->jail, &err));
            if (rc == 0)
                continue; /* not yet readable, or readable but not yet reapable */
            s->reap_rc = rc;
            tap_why(s->reap_msg, sizeof s->reap_msg, "%s", rc < 0 ? err.msg : "");
            if (rc < 0 && !s->jail.init_reaped) {
                fail_note(fail, "%s: jail_reap_init: %s", s->name, err.msg);
                s->state = SB_FAILED;
                dying--;
                continue;
            }
            try_remove(r, s, fail);
            dying -= s->state != SB_REMOVING;
        }
    }
}

/* Whatever a failed step left: the blocking composition, bounded, then the uid range. */
static void destroy_leftovers(struct mode_run *r)
{
    for (size_t i = 0; i < r->n_slots; i++) {
        struct sandbox *s = &r->sb[i];
        if (!s->live)
            continue;
        if (s->events_fd >= 0)
            close(s->events_fd);
        s->events_fd = -1;
        err_t err = {0};
        if (jail_destroy(&s->jail, &err) < 0)
            printf("#   fallback jail_destroy %s: %s\n", s->name, err.msg);
        jail_reap(&s->jail);
        sandbox_release(r, s);
    }
}

/* ---------- the seccomp death of init ---------- */

#if defined(__x86_64__)
/* Makes init execute a system call its filter forbids. Signals from outside cannot do it (a pid
 * namespace's init ignores what it has no handler for), so init is stopped with ptrace where it
 * waits in wait4, and sent back to its `syscall` instruction with uname in rax. SIGCHLD is
 * blocked meanwhile: the daemon's reaper would otherwise take the ptrace stop's report. */
static int inject_forbidden_syscall(pid_t pid, char *why, size_t why_size)
{
    int rc = -1, status;
    sigchld_block(true);
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0) {
        snprintf(why, why_size, "PTRACE_SEIZE: %s", strerror(errno));
        goto out;
    }
    if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0 || waitpid(pid, &status, __WALL) != pid) {
        snprintf(why, why_size, "PTRACE_INTERRUPT: %s", strerror(errno));
        goto detach;
    }
    if (!WIFSTOPPED(status) || (status >> 16) != PTRACE_EVENT_STOP) {
        snprintf(why, why_size, "init did not stop as asked (status 0x%x)", status);
        goto detach;
    }
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, 0, &regs) < 0) {
        snprintf(why, why_size, "PTRACE_GETREGS: %s", strerror(errno));
        goto detach;
    }
    errno = 0;
    long text = ptrace(PTRACE_PEEKTEXT, pid, regs.rip - 2, 0);
    if (errno != 0 || (text & 0xffff) != 0x050f) {
        snprintf(why, why_size, "no syscall instruction before rip 0x%llx (orig_rax %lld)",
                 (unsigned long long)regs.rip, (long long)regs.orig_rax);
        goto detach;
    }
    /* orig_rax -1: the kernel must not restart the interrupted wait4 on top of this. */
    regs.rip -= 2;
    regs.rax = SYS_uname;
    regs.orig_rax = (unsigned long long)-1;
    if (ptrace(PTRACE_SETREGS, pid, 0, &regs) < 0) {
        snprintf(why, why_size, "PTRACE_SETREGS: %s", strerror(errno));
        goto detach;
    }
    rc = 0;
detach:
    if (ptrace(PTRACE_DETACH, pid, 0, 0) < 0 && rc == 0) {
        snprintf(why, why_size, "PTRACE_DETACH: %s", strerror(errno));
        rc = -1;
    }
out:
    sigchld_block(false);
    return rc;
}
#endif

/* ---------- one mode ---------- */

static bool is_cgroup_dir_of_ours(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

/* Names of groups left in any hierarchy's hutch/ that start with prefix. */
static size_t groups_left(const char *prefix, char *first, size_t size)
{
    size_t left = 0;
    first[0] = '\0';
    for (size_t h = 0; h < COUNT(hier_fd); h++) {
        if (hier_fd[h] < 0)
            continue;
        int fd = openat(hier_fd[h], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_type != DT_DIR || !is_cgroup_dir_of_ours(de->d_name, prefix))
                continue;
            if (left++ == 0)
                snprintf(first, size, "%s/%s", hier_paths[h], de->d_name);
        }
        closedir(d);
    }
    return left;
}

/* Children of ours the kernel still lists (running, or zombies nobody reaped). */
static size_t children_left(char *first, size_t size)
{
    size_t left = 0;
    first[0] = '\0';
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX], text[4096];
        snprintf(path, sizeof path, "/proc/self/task/%s/children", de->d_name);
        if (read_text(path, text, sizeof text) <= 0)
            continue;
        for (char *p = text; *p;) {
            long pid = strtol(p, &p, 10);
            if (pid <= 0)
                break;
            if (left++ == 0)
                snprintf(first, size, "%ld", pid);
            while (*p == ' ' || *p == '\n')
                p++;
        }
    }
    closedir(d);
    return left;
}

static bool mounts_mention(const char *dir)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, dir) != NULL;
    fclose(f);
    return found;
}

/* A daemon's loop may get to a control channel late, after the child has reported its failure
 * and died: jail_start_complete must still give the child's own reason, not whatever the dead
 * socket says. The child fails on a bind source that does not exist, after it got the go and
 * before it reads the cgroup message that jail_start_begin queued for it. */
static void check_late_setup_failure(struct mode_run *r)
{
    struct sandbox *s = &r->sb[r->n_all];
    err_t err = {0};
    const char *reported_by = "jail_start_begin";
    int rc = start_begin(r, s, &err);
    if (rc == 0) {
        struct pollfd pfd = {.fd = s->jail.pidfd, .events = POLLIN};
        uint64_t deadline = jail_now_ns() + ms_to_ns(5000);
        while (!(pfd.revents & POLLIN) && jail_now_ns() < deadline)
            poll(&pfd, 1, poll_timeout(deadline, 100));
        ok(pfd.revents & POLLIN, "%s: the child with a missing bind source died in setup",
           r->label);
        reported_by = "jail_start_complete";
        rc = TIMED(CALL_COMPLETE, jail_start_complete(&s->jail, &err));
        s->state = rc == 0 ? SB_READY : SB_SETUP_FAILED;
    }
    ok(rc < 0 && strstr(err.msg, "bind source") && strstr(err.msg, missing_bind.host_path),
       "%s: a setup failure read after the child died says the child's reason (%s: \"%s\")",
       r->label, reported_by, err.msg);
    if (rc < 0 && err.errnum == ECONNRESET)
        printf("#   the child exited with our cgroup message unread, so the first recv on the "
               "channel says ECONNRESET; its report is still queued behind it\n");
    struct failures fail = {0};
    size_t idx = r->n_all;
    destroy_set(r, &idx, 1, true, &fail);
    ok(fail.n == 0 && !s->live, "%s: the failed sandbox destroyed with the steps", r->label);
    fail_show(&fail);
}

static void run_mode(struct mode_run *r)
{
    uint64_t t_mode = jail_now_ns();
    err_t err = {0};
    char prefix[64];
    tap_path(prefix, sizeof prefix, NAME_PREFIX "-%d-%s-", (int)self_pid, r->label);
    phase = "cgroup_host_open";
    if (cgroup_host_open(r->mode_arg, &r->host, &err) < 0) {
        ok(0, "%s: cgroup_host_open", r->label);
        printf("#   %s\n", err.msg);
        return;
    }
    r->mode = cgroup_host_mode(r->host);
    hier_open_all();
    r->n_all = r->n + N_BURNERS;
    r->n_slots = r->n_all + 1;
    r->sb = calloc(r->n_slots, sizeof *r->sb);
    r->pfd = calloc(r->n_slots, sizeof *r->pfd);
    r->pfd_of = calloc(r->n_slots, sizeof *r->pfd_of);
    if (!r->sb || !r->pfd || !r->pfd_of) {
        ok(0, "%s: allocate the sandbox table", r->label);
        goto out;
    }
    for (size_t i = 0; i < r->n_slots; i++) {
        struct sandbox *s = &r->sb[i];
        tap_path(s->name, sizeof s->name, "%s%zu", prefix, i);
        s->jail.pidfd = s->jail.control_fd = s->jail.output_dirfd = s->jail.keeper_fd = -1;
        s->uids.lock_fd = -1;
        s->events_fd = -1;
        s->burner = i >= r->n && i < r->n_all;
        s->bad_bind = i == r->n_all;
        /* Half are frozen: the even ones (neither the seccomp victim, 1, nor the control, 3),
         * and both burners. A quarter are thawed again, and one burner. */
        s->want_frozen = s->burner || i % 2 == 0;
        s->thawed = s->burner ? i == r->n : i % 4 == 0;
    }
    reaped_count = 0;
    watched = r;
    alarm(WATCHDOG_S * time_scale);

    phase = "late setup failure";
    check_late_setup_failure(r);

    /* The baseline: everything the test holds for the whole mode is open and allocated. */
    int fds_before = count_fds();
    long rss_before = vmrss_kib();

    phase = "start";
    struct failures fail = {0};
    uint64_t t0 = jail_now_ns();
    start_all(r, 0, r->n, &fail);
    double start_s = (jail_now_ns() - t0) / 1e9;
    ok(fail.n == 0, "%s: %zu sandboxes started in one loop (%.2f s)", r->label, r->n, start_s);
    fail_show(&fail);
    if (fail.n)
        goto destroy;

    /* Each payload runs: a sleep in its sandbox's group beside init. Right after READY it may
     * still be init's vfork child, so this waits a little in the loop. */
    phase = "payloads";
    uint64_t deadline = jail_now_ns() + ms_to_ns(5000);
    size_t not_running;
    do {
        not_running = 0;
        for (size_t i = 0; i < r->n; i++) {
            pid_t pid = payload_pid(r, &r->sb[i]);
            not_running += !(pid > 0 && proc_comm_is(pid, "sleep"));
        }
        if (not_running)
            pause_ms(10);
    } while (not_running && jail_now_ns() < deadline);
    ok(not_running == 0, "%s: every sandbox runs its payload (%zu do not)", r->label, not_running);

    int fds_after = count_fds();
    long rss_after = vmrss_kib();
    double fds_per = (double)(fds_after - fds_before) / (double)r->n;
    double rss_per = (double)(rss_after - rss_before) * 1024.0 / (double)r->n;
    printf("# %s: fds %d -> %d: %.2f per idle sandbox\n", r->label, fds_before, fds_after, fds_per);
    ok(fds_after - fds_before <= (int)(FD_PER_SANDBOX * r->n),
       "%s: at most %d fds per idle sandbox (%.2f)", r->label, FD_PER_SANDBOX, fds_per);
    printf("# %s: VmRSS %ld -> %ld KiB: %.0f bytes per idle sandbox\n", r->label, rss_before,
           rss_after, rss_per);
    ok(rss_after - rss_before <= (long)(RSS_PER_SANDBOX / 1024 * r->n),
       "%s: caller's RSS grows by at most %u KiB per sandbox (%.1f KiB)", r->label,
       RSS_PER_SANDBOX / 1024, rss_per / 1024);

    /* ---- pause and resume ---- */
    phase = "burners";
    struct failures bfail = {0};
    start_all(r, r->n, r->n_all, &bfail);
    ok(bfail.n == 0, "%s: %d CPU burners started", r->label, N_BURNERS);
    fail_show(&bfail);
    if (bfail.n)
        goto destroy;
    struct failures cfail = {0};
    /* a burner must get the CPU within the window: under TCG with a loaded host that takes
     * longer (the window is stretched by the time scale; the frozen check keeps its own) */
    cpu_over_window(r, is_burner, CPU_WINDOW_MS * time_scale, &cfail);
    uint64_t least = UINT64_MAX;
    for (size_t i = r->n; i < r->n_all; i++)
        least = r->sb[i].cpu_ns < least ? r->sb[i].cpu_ns : least;
    ok(cfail.n == 0 && least >= BURNER_MIN_CPU_MS * 1000000ull,
       "%s: a running burner's CPU counter moves (at least %.1f ms in %u ms): the frozen check "
       "would notice",
       r->label, least / 1e6, CPU_WINDOW_MS * time_scale);
    fail_show(&cfail);

    phase = "freeze";
    struct failures ffail = {0};
    t0 = jail_now_ns();
    freeze_all(r, true, &ffail);
    size_t n_frozen = 0;
    for (size_t i = 0; i < r->n_all; i++)
        n_frozen += r->sb[i].want_frozen;
    ok(ffail.n == 0, "%s: %zu sandboxes frozen from the loop (%.0f ms)", r->label, n_frozen,
       (jail_now_ns() - t0) / 1e6);
    fail_show(&ffail);

    /* The freezer's own file says so; a burner is no longer running; the others are not. */
    size_t wrong = 0, not_frozen_file = 0, running_burners = 0;
    char states[128] = "";
    size_t n_states = 0;
    for (size_t i = 0; i < r->n_all; i++) {
        struct sandbox *s = &r->sb[i];
        bool frozen = false;
        err_t ferr;
        if (jail_frozen(&s->jail, &frozen, &ferr) < 0 || frozen != s->want_frozen)
            wrong++;
        if (s->want_frozen && !group_says_frozen(r, s))
            not_frozen_file++;
        if (!s->want_frozen && group_says_frozen(r, s))
            not_frozen_file++;
        pid_t pid = payload_pid(r, s);
        char st = pid > 0 ? proc_state(pid) : '?';
        if (s->burner && st == 'R')
            running_burners++;
        if (s->want_frozen && n_states + 4 < sizeof states && (s->burner || i < 6))
            n_states += (size_t)snprintf(states + n_states, sizeof states - n_states, "%s%c",
                                         n_states ? " " : "", st);
    }
    ok(wrong == 0, "%s: jail_frozen is true for the frozen half only (%zu wrong)", r->label, wrong);
    ok(not_frozen_file == 0, "%s: the cgroup's %s agrees (%zu wrong)", r->label,
       r->mode == CGROUP_MODE_V1 ? "freezer.state" : "cgroup.events", not_frozen_file);
    printf("# %s: /proc/PID/stat state of frozen payloads (sleepers, then burners): %s\n", r->label,
           states);
    ok(running_burners == 0, "%s: no frozen burner's payload is in state R (%zu are)", r->label,
       running_burners);
    cfail.n = 0;
    cpu_over_window(r, is_frozen_one, CPU_WINDOW_MS, &cfail);
    uint64_t most = 0;
    size_t moved = 0;
    for (size_t i = 0; i < r->n_all; i++) {
        if (!is_frozen_one(&r->sb[i]))
            continue;
        moved += r->sb[i].cpu_ns != 0;
        most = r->sb[i].cpu_ns > most ? r->sb[i].cpu_ns : most;
    }
    ok(cfail.n == 0 && moved == 0,
       "%s: no frozen sandbox's CPU counter moves in %d ms (%zu moved, most %.3f ms)", r->label,
       CPU_WINDOW_MS, moved, most / 1e6);
    fail_show(&cfail);

    phase = "thaw";
    struct failures tfail = {0};
    freeze_all(r, false, &tfail);
    size_t n_thawed = 0, still = 0;
    for (size_t i = 0; i < r->n_all; i++) {
        struct sandbox *s = &r->sb[i];
        if (!s->thawed)
            continue;
        n_thawed++;
        bool frozen = true;
        err_t ferr;
        if (jail_frozen(&s->jail, &frozen, &ferr) < 0 || frozen || group_says_frozen(r, s))
            still++;
    }
    ok(tfail.n == 0 && still == 0, "%s: %zu sandboxes thawed (%zu still frozen)", r->label,
       n_thawed, still);
    fail_show(&tfail);
    cfail.n = 0;
    cpu_over_window(r, is_thawed_burner, CPU_WINDOW_MS * time_scale, &cfail);
    ok(cfail.n == 0 && r->sb[r->n].cpu_ns >= BURNER_MIN_CPU_MS * 1000000ull,
       "%s: the thawed burner runs again (%.1f ms in %u ms)", r->label, r->sb[r->n].cpu_ns / 1e6,
       CPU_WINDOW_MS * time_scale);

    /* ---- a seccomp death of init, with the other reaper running ---- */
    phase = "seccomp";
    const size_t victim = VICTIM, control = CONTROL;
    struct failures sfail = {0};
#if defined(__x86_64__)
    char why[256] = "";
    pid_t vpid = r->sb[victim].init_pid;
    int injected = inject_forbidden_syscall(vpid, why, sizeof why);
    ok(injected == 0, "%s: init of %s made to call uname (forbidden by its filter)", r->label,
       r->sb[victim].name);
    if (injected < 0)
        printf("#   %s\n", why);
    destroy_set(r, &victim, 1, injected < 0, &sfail);
    fail_show(&sfail);
    int vstatus = reaped_by_handler(vpid);
    ok(vstatus != -1 && WIFSIGNALED(vstatus) && WTERMSIG(vstatus) == SIGSYS,
       "%s: the SIGCHLD handler reaped init first, killed by SIGSYS (status 0x%x)", r->label,
       vstatus);
    const struct sandbox *v = &r->sb[victim];
    if (kernel_pidfd_exit) {
        ok(v->reap_rc == -1 && strstr(v->reap_msg, "seccomp") && strstr(v->reap_msg, "SIGSYS"),
           "%s: jail_reap_init reports init's seccomp death (rc %d: \"%s\")", r->label, v->reap_rc,
           v->reap_msg);
    } else {
        ok(v->reap_rc == -1 && strstr(v->reap_msg, "cannot tell"),
           "%s: jail_reap_init says init's status is unknown on this kernel, never success (rc "
           "%d: \"%s\")",
           r->label, v->reap_rc, v->reap_msg);
    }
#else
    ok(1, "# SKIP %s: injecting a syscall into init is written for x86_64", r->label);
    destroy_set(r, &victim, 1, true, &sfail);
#endif
    /* The control: killed the ordinary way, reaped by the handler too, and no error. */
    struct failures kfail = {0};
    destroy_set(r, &control, 1, true, &kfail);
    fail_show(&kfail);
    const struct sandbox *c = &r->sb[control];
    int cstatus = reaped_by_handler(c->init_pid);
    if (kernel_pidfd_exit)
        ok(cstatus != -1 && c->reap_rc == 1 && WIFSIGNALED(c->jail.init_status) &&
               WTERMSIG(c->jail.init_status) == SIGKILL,
           "%s: the control (killed, reaped by the handler: %s) reports no error (rc %d, status "
           "0x%x: \"%s\")",
           r->label, cstatus != -1 ? "yes" : "no", c->reap_rc, c->jail.init_status, c->reap_msg);
    else
        ok(c->reap_rc == -1 && !strstr(c->reap_msg, "seccomp"),
           "%s: the control's status is unknown too on this kernel, and not called seccomp (rc "
           "%d: \"%s\")",
           r->label, c->reap_rc, c->reap_msg);

destroy:
    /* ---- destroy all, frozen ones included ---- */
    phase = "destroy";
    size_t *all = calloc(r->n_all, sizeof *all), n_left = 0, frozen_left = 0;
    for (size_t i = 0; all && i < r->n_all; i++) {
        enum sandbox_state st = r->sb[i].state;
        if (st != SB_READY && st != SB_STARTING && st != SB_SETUP_FAILED)
            continue;
        all[n_left++] = i;
        frozen_left += r->sb[i].want_frozen && !r->sb[i].thawed;
    }
    struct failures dfail = {0};
    t0 = jail_now_ns();
    if (all)
        destroy_set(r, all, n_left, true, &dfail);
    free(all);
    size_t bad_reap = 0;
    struct failures rfail = {0};
    for (size_t i = 0; i < r->n_all; i++) {
        const struct sandbox *s = &r->sb[i];
        if (i == VICTIM || i == CONTROL || s->state != SB_CLOSED)
            continue;
        bool good = kernel_pidfd_exit ? s->reap_rc == 1 && WIFSIGNALED(s->jail.init_status) &&
                                            WTERMSIG(s->jail.init_status) == SIGKILL
                                      : s->reap_rc == 1 || strstr(s->reap_msg, "cannot tell");
        if (!good) {
            bad_reap++;
            fail_note(&rfail, "%s: rc %d status 0x%x \"%s\"", s->name, s->reap_rc,
                      s->jail.init_status, s->reap_msg);
        }
    }
    ok(dfail.n == 0 && n_left > 0,
       "%s: %zu sandboxes destroyed step by step (%zu of them frozen) in %.0f ms", r->label, n_left,
       frozen_left, (jail_now_ns() - t0) / 1e6);
    fail_show(&dfail);
    ok(bad_reap == 0, "%s: jail_reap_init: SIGKILL for every killed init (%zu not)", r->label,
       bad_reap);
    fail_show(&rfail);
    printf("# %s: the SIGCHLD handler reaped %d inits\n", r->label, (int)reaped_count);

    phase = "leftovers";
    size_t leftovers = 0;
    for (size_t i = 0; i < r->n_slots; i++)
        leftovers += r->sb[i].live != 0;
    ok(leftovers == 0, "%s: nothing needed the blocking fallback (%zu did)", r->label, leftovers);
    destroy_leftovers(r);

    /* ---- nothing left ---- */
    char first[PATH_MAX];
    size_t kids = children_left(first, sizeof first);
    errno = 0;
    pid_t w = waitpid(-1, NULL, WNOHANG);
    ok(kids == 0 && w == -1 && errno == ECHILD,
       "%s: no child process left (%zu listed, first %s; waitpid %d)", r->label, kids, first,
       (int)w);
    size_t groups = groups_left(prefix, first, sizeof first);
    ok(groups == 0, "%s: no cgroup left (%zu, first %s)", r->label, groups, first);
    int fds_end = count_fds();
    ok(fds_end == fds_before, "%s: no fd left (%d before, %d after)", r->label, fds_before,
       fds_end);
    ok(!mounts_mention(base_dir), "%s: no mount of the test's left in our namespace", r->label);
    timing_report(r->label);
    double total = (jail_now_ns() - t_mode) / 1e9;
    printf("# %s: %zu sandboxes (+%d burners) in %.2f s\n", r->label, r->n, N_BURNERS, total);
out:
    alarm(0);
    watched = NULL;
    if (r->sb)
        destroy_leftovers(r);
    free(r->sb);
    free(r->pfd);
    free(r->pfd_of);
    r->sb = NULL;
    cgroup_host_close(r->host);
    r->host = NULL;
}

/* ---------- setup ---------- */

/* PIDFD_GET_INFO with PIDFD_INFO_EXIT (Linux 6.15): a reaped child's status through its pidfd.
 * The layout of its first version, as lifecycle.c uses it. */
struct pidfd_info_v0 {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
#define PIDFD_INFO_EXIT_BIT (1u << 3)
#define PIDFD_GET_INFO_V0   _IOWR(0xFF, 11, struct pidfd_info_v0)

static bool probe_pidfd_exit_info(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    if (pid < 0)
        return false;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* a zombie still has one */
    int status;
    waitpid(pid, &status, 0);
    if (pidfd < 0)
        return false;
    struct pidfd_info_v0 info;
    memset(&info, 0, sizeof info);
    info.mask = PIDFD_INFO_EXIT_BIT;
    bool has = ioctl(pidfd, PIDFD_GET_INFO_V0, &info) == 0 && (info.mask & PIDFD_INFO_EXIT_BIT) &&
               info.exit_code == (7 << 8);
    close(pidfd);
    return has;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static unsigned env_unsigned(const char *name, unsigned def)
{
    const char *v = getenv(name);
    if (!v || !v[0])
        return def;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    return *end || n == 0 || n > 100000 ? def : (unsigned)n;
}

int main(int argc, char **argv, char **envp)
{
    /* A sandbox's init is this binary, exec'd as pid 1 (src/jail/inside.c), as with hutch. */
    if (argc > 0 && strcmp(argv[0], JAIL_INIT_ARGV0) == 0 && getpid() == 1)
        init_main(argc, argv, envp);
    proctitle_init(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (geteuid() != 0) {
        printf("1..0 # SKIP the engine test needs root\n");
        return 0;
    }
    self_pid = getpid();
    time_scale = env_unsigned("HUTCH_TEST_TIME_SCALE", 1);
    unsigned count = env_unsigned("HUTCH_ENGINE_TEST_COUNT", DEFAULT_COUNT);
    if (count < 4)
        count = 4; /* the victim is 1, the control 3 */
    uint64_t t_all = jail_now_ns();

    snprintf(base_dir, sizeof base_dir, "/tmp/hutch-engine-test.XXXXXX");
    if (!mkdtemp(base_dir)) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    /* The sandbox's root resolves the stage directory with its own unprivileged ids. */
    if (chmod(base_dir, 0755) < 0) {
        printf("Bail out! chmod %s: %s\n", base_dir, strerror(errno));
        rmdir(base_dir);
        return 1;
    }
    tap_path(state_dir, sizeof state_dir, "%s/state", base_dir);
    tap_path(lock_path, sizeof lock_path, "%s/run/uid-slots.lock", base_dir);
    char run_dir[PATH_MAX];
    tap_path(run_dir, sizeof run_dir, "%s/run", base_dir);
    err_t err = {0};
    int rc = 1;
    if (mkdir(run_dir, 0755) < 0 || template_prepare_base(state_dir, &tpl, &err) < 0) {
        printf("Bail out! template in %s: %s\n", state_dir, err.msg[0] ? err.msg : strerror(errno));
        goto cleanup;
    }
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    /* Opened once per process, like the library's own: not a per-sandbox fd. */
    if (null_fd < 0 || jail_init_exec_fd() < 0) {
        printf("Bail out! open /dev/null or /proc/self/exe: %s\n", strerror(errno));
        goto cleanup;
    }
    schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (schedstat_fd < 0)
        printf("# no /proc/thread-self/schedstat (CONFIG_SCHED_INFO): own time is wall time\n");
    kernel_pidfd_exit = probe_pidfd_exit_info();
    printf("# kernel gives a reaped child's status through its pidfd (PIDFD_INFO_EXIT): %s\n",
           kernel_pidfd_exit ? "yes" : "no");

    struct sigaction sa = {.sa_handler = on_sigchld, .sa_flags = SA_NOCLDSTOP};
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: every call of the library must cope with EINTR, as in a daemon whose
     * handlers do not restart. */
    sigaction(SIGCHLD, &sa, NULL);
    struct sigaction fatal_sa = {.sa_handler = on_fatal};
    sigfillset(&fatal_sa.sa_mask);
    static const int fatal_signals[] = {SIGALRM, SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < COUNT(fatal_signals); i++)
        sigaction(fatal_signals[i], &fatal_sa, NULL);
    /* A reader that goes away (`| head`) must not kill the test before it has cleaned up. */
    signal(SIGPIPE, SIG_IGN);

    /* The host's own mode with the full count, then each forced mode the host has the
     * hierarchies for. Forced v2 on a hybrid host is a cgroup2 without controllers: no memory
     * or pids limits there, everything else works. */
    enum cgroup_mode host_mode;
    if (cgroup_detect(&host_mode, &err) < 0) {
        printf("Bail out! %s\n", err.msg);
        goto cleanup;
    }
    struct mode_run runs[3];
    size_t n_runs = 0;
    memset(runs, 0, sizeof runs);
    runs[n_runs++] = (struct mode_run){.mode_arg = CGROUP_MODE_DETECT, .limits = true, .n = count};
    snprintf(runs[0].label, sizeof runs[0].label, "%s", cgroup_mode_name(host_mode));
    static const enum cgroup_mode forced[] = {CGROUP_MODE_V1, CGROUP_MODE_V2};
    for (size_t i = 0; i < COUNT(forced); i++) {
        if (forced[i] == host_mode)
            continue;
        struct cgroup_host *probe;
        err_t perr = {0};
        if (cgroup_host_open((int)forced[i], &probe, &perr) < 0) {
            printf("# forced %s cannot run here: %s\n", cgroup_mode_name(forced[i]), perr.msg);
            continue;
        }
        cgroup_host_close(probe);
        struct mode_run *m = &runs[n_runs++];
        *m = (struct mode_run){.mode_arg = (int)forced[i], .n = count};
        m->limits = forced[i] != CGROUP_MODE_V2; /* a v2 host is never forced into v2 */
        snprintf(m->label, sizeof m->label, "forced-%s", cgroup_mode_name(forced[i]));
    }
    for (size_t i = 0; i < n_runs; i++)
        run_mode(&runs[i]);
    rc = 0;

cleanup:
    signal(SIGCHLD, SIG_DFL);
    if (null_fd >= 0)
        close(null_fd);
    for (size_t h = 0; h < COUNT(hier_fd); h++)
        if (hier_fd[h] >= 0)
            close(hier_fd[h]);
    for (size_t k = 0; k < CALL_KINDS; k++) {
        free(timings[k].wall_ns);
        free(timings[k].own_ns);
    }
    if (schedstat_fd >= 0)
        close(schedstat_fd);
    ok(nftw(base_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0,
       "private directory %s removed (template, uid-range lock)", base_dir);
    printf("# total %.2f s\n", (jail_now_ns() - t_all) / 1e9);
    return rc ? rc : done_testing();
}
