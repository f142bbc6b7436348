/* cgroup module against the real kernel. Runs as root on a hybrid host (v1 controllers under
 * /sys/fs/cgroup/<ctrl>, cgroup2 without controllers at /sys/fs/cgroup/unified). Hybrid uses
 * only the memory and pids v1 controllers and does CPU time, freezing and kill in its cgroup2
 * group; the mode-dependent tests run once for the host's own mode (hybrid) and once for a
 * forced v1 (all four v1 controllers, freezer.state, freezer-based kill), each through a
 * cgroup_host of its own, opened once; forced v2 covers the v2 path.
 * On a pure cgroup v2 host (the test guest, tests/guest/) the native-v2 tests run instead: limits
 * in memory.max, memory.swap.max, memory.oom.group and pids.max, OOM attribution from
 * memory.events, cpu.stat, cgroup.freeze and cgroup.kill, all in /sys/fs/cgroup/hutch/NAME.
 * Then, for every mode the host can run (its own, forced v1, forced v2; the native v2 on the
 * guest), what the host interface adds: the host's fds the only ones the module holds, nested
 * groups, the non-blocking steps (kill_start, populated, the events fd, freeze_start, frozen,
 * remove), cgroup_open of a group another process made, and the blocking compositions over them.
 * Every group is named after our pid, every child is reaped, every test is bounded by alarm(),
 * and nothing is left in the hierarchies afterwards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/paths.h"
#include "jail/cgroup.h"
#include "tap.h"

#define MIB (1024u * 1024u)

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every hierarchy a group could appear in; group_gone() checks them all, whatever the mode. */
static const char *const all_hiers[] = {"memory", "pids", "cpuacct", "freezer", "unified", ""};

/* What one mode is expected to do on this host. Hybrid takes only the limits from v1 (memory,
 * pids) and does CPU time, freezing and kill in its cgroup2 group; pure v1 needs all four v1
 * controllers and no cgroup2 group. */
struct mode {
    const char *label;        /* for test names and group names */
    int open_as;              /* cgroup_host_open's mode: CGROUP_MODE_DETECT or a forced one */
    struct cgroup_host *host; /* opened once in main, closed at the end */
    const char *const *used;  /* hierarchies that get hutch/NAME */
    size_t n_used;
    const char *const *unused; /* hierarchies that must not */
    size_t n_unused;
    size_t v1_count;          /* v1 hierarchies (each controller is mounted alone here) */
    bool v1_freezer;          /* freezes through freezer.state, else through cgroup.freeze */
    const char *spaced_ctrl;  /* a controller the mode uses, re-mounted at a path with spaces */
    const char *missing_ctrl; /* a controller the mode needs, unmounted to see the error */
    const char *cgroup2;      /* its cgroup2 group: "unified" (hybrid), "" (pure v2), NULL (v1) */
    enum cgroup_mode kind;    /* what cgroup_host_mode says */
    size_t host_fds;          /* hutch/ directories the host holds open */
    bool limits;              /* memory and pids controllers: limits and their counters */
    bool atomic_kill;         /* cgroup.kill (5.14+), else the freezer-based kill */
};

static const char *const hybrid_used[] = {"memory", "pids", "unified"};
static const char *const hybrid_unused[] = {"cpuacct", "freezer"};
static const char *const v1_used[] = {"memory", "pids", "cpuacct", "freezer"};
static const char *const v1_unused[] = {"unified"};

static struct mode mode_hybrid = {
    .label = "hybrid",
    .open_as = CGROUP_MODE_DETECT,
    .used = hybrid_used,
    .n_used = COUNT(hybrid_used),
    .unused = hybrid_unused,
    .n_unused = COUNT(hybrid_unused),
    .v1_count = 2,
    .v1_freezer = false,
    .spaced_ctrl = "pids",
    .missing_ctrl = "pids",
    .cgroup2 = "unified",
    .kind = CGROUP_MODE_HYBRID,
    .host_fds = 3, /* cgroup2, memory, pids */
    .limits = true,
    .atomic_kill = true,
};

static struct mode mode_v1 = {
    .label = "v1",
    .open_as = CGROUP_MODE_V1,
    .used = v1_used,
    .n_used = COUNT(v1_used),
    .unused = v1_unused,
    .n_unused = COUNT(v1_unused),
    .v1_count = 4,
    .v1_freezer = true,
    .spaced_ctrl = "cpuacct",
    .missing_ctrl = "freezer",
    .kind = CGROUP_MODE_V1,
    .host_fds = 4, /* memory, pids, cpuacct, freezer */
    .limits = true,
    .atomic_kill = false,
};

/* v2 forced on this hybrid host: its cgroup2 (at unified) has no controllers, so it can place,
 * freeze, kill and count CPU, and must refuse memory and pids limits. */
static const char *const v2_forced_used[] = {"unified"};
static const char *const v2_forced_unused[] = {"memory", "pids", "cpuacct", "freezer"};

static struct mode mode_v2_forced = {
    .label = "v2",
    .open_as = CGROUP_MODE_V2,
    .used = v2_forced_used,
    .n_used = COUNT(v2_forced_used),
    .unused = v2_forced_unused,
    .n_unused = COUNT(v2_forced_unused),
    .v1_count = 0,
    .v1_freezer = false,
    .cgroup2 = "unified",
    .kind = CGROUP_MODE_V2,
    .host_fds = 1,
    .limits = false,
    .atomic_kill = true,
};

/* ---------- helpers ---------- */

/* Every test is bounded in time: a hang (a kill that never completes, a frozen child that
 * never dies) ends the run with a TAP "Bail out!" naming the test, not a stuck make. */
static const char *test_running = "";

static void on_alarm(int sig)
{
    static const char head[] = "Bail out! time limit reached in ";
    (void)sig;
    if (write(STDOUT_FILENO, head, sizeof head - 1) < 0 ||
        write(STDOUT_FILENO, test_running, strlen(test_running)) < 0 ||
        write(STDOUT_FILENO, "\n", 1) < 0)
        _exit(3);
    _exit(3);
}

#define RUN(seconds, call)                                                                         \
    do {                                                                                           \
        test_running = #call;                                                                      \
        alarm(seconds);                                                                            \
        call;                                                                                      \
        alarm(0);                                                                                  \
    } while (0)

/* ok() for a call that takes &err_: on failure its message is printed as a diagnostic. */
#define ok_call(call, ...)                                                                         \
    do {                                                                                           \
        err_t err_ = {0};                                                                          \
        int rc_ = (call);                                                                          \
        ok(rc_ == 0, __VA_ARGS__);                                                                 \
        if (rc_ != 0)                                                                              \
            printf("#   %s\n", err_.msg);                                                          \
    } while (0)

static void group_name(char *buf, size_t size, const char *tag)
{
    snprintf(buf, size, "t%d-%s", (int)getpid(), tag);
}

/* "t<pid>-<mode>-<tag>", so the two modes' groups never share a name. */
static void mode_group_name(char *buf, size_t size, const struct mode *m, const char *tag)
{
    snprintf(buf, size, "t%d-%s-%s", (int)getpid(), m->label, tag);
}

/* Path of hutch/NAME in one hierarchy ("memory", "unified", ..., "" for a pure v2 host's root),
 * plus an optional file. */
static const char *group_path(char *buf, size_t size, const char *hier, const char *name,
                              const char *file)
{
    snprintf(buf, size, "/sys/fs/cgroup%s%s/hutch/%s%s%s", hier[0] ? "/" : "", hier, name,
             file ? "/" : "", file ? file : "");
    return buf;
}

static bool group_exists(const char *hier, const char *name)
{
    char path[256];
    struct stat st;
    return stat(group_path(path, sizeof path, hier, name, NULL), &st) == 0;
}

/* True if hutch/NAME exists in none of the hierarchies. */
static bool group_gone(const char *name)
{
    for (size_t i = 0; i < COUNT(all_hiers); i++) {
        if (group_exists(all_hiers[i], name))
            return false;
    }
    return true;
}

/* One check per hierarchy: the mode's group exists where it uses one, and nowhere else. */
static void check_layout(const struct mode *m, const char *name)
{
    for (size_t i = 0; i < m->n_used; i++)
        ok(group_exists(m->used[i], name), "%s: group exists in %s", m->label, m->used[i]);
    for (size_t i = 0; i < m->n_unused; i++)
        ok(!group_exists(m->unused[i], name), "%s: no group in %s", m->label, m->unused[i]);
}

static const char *read_group_file(char *buf, size_t size, const char *hier, const char *name,
                                   const char *file)
{
    char path[256];
    buf[0] = '\0';
    FILE *f = fopen(group_path(path, sizeof path, hier, name, file), "re");
    if (!f)
        return buf;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static bool procs_has(const char *hier, const char *name, pid_t pid)
{
    char text[4096], line[32];
    read_group_file(text, sizeof text, hier, name, "cgroup.procs");
    snprintf(line, sizeof line, "%d\n", (int)pid);
    size_t len = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += len) {
        if (p == text || p[-1] == '\n')
            return true;
    }
    return false;
}

/* The number after "key " in a flat-keyed file (cpu.stat, cgroup.events); UINT64_MAX if none. */
static uint64_t read_group_key(const char *hier, const char *name, const char *file,
                               const char *key)
{
    char text[4096];
    size_t len = strlen(key);
    read_group_file(text, sizeof text, hier, name, file);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, len) == 0 && p[len] == ' ')
            return strtoull(p + len + 1, NULL, 10);
    }
    return UINT64_MAX;
}

static uint64_t read_group_u64(const char *hier, const char *name, const char *file)
{
    char text[64];
    read_group_file(text, sizeof text, hier, name, file);
    return text[0] ? strtoull(text, NULL, 10) : UINT64_MAX;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void pause_forever(void)
{
    for (;;)
        pause();
}

/* Forks a child that waits for one byte on a pipe (so the parent can attach it before it does
 * anything), then runs body and exits 0. *go is the pipe's write end. */
static pid_t spawn_waiting(int *go, void (*body)(void))
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(p[1]);
        if (read(p[0], &c, 1) != 1)
            _exit(99);
        body();
        _exit(0);
    }
    close(p[0]);
    *go = p[1];
    return pid;
}

static void release(int go)
{
    if (write(go, "g", 1) != 1)
        perror("write go");
    close(go);
}

/* clone3(CLONE_INTO_CGROUP): the child starts inside the group and just pauses. */
static pid_t clone_into(int cgroup_fd)
{
    struct clone_args args = {
        .flags = CLONE_INTO_CGROUP,
        .exit_signal = SIGCHLD,
        .cgroup = (uint64_t)cgroup_fd,
    };
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0)
        pause_forever();
    return (pid_t)pid;
}

/* Reaps pid and returns the signal that killed it, 0 on a normal exit, -1 on error. */
static int reap(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* Like reap, for a child that should already be dying: one still alive after ms is killed by
 * us and reaped (so a failed kill is a failed check, not a hung test), and -2 returned. */
static int reap_within(pid_t pid, unsigned ms)
{
    for (unsigned waited = 0; waited < ms; waited += 5) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        if (r < 0)
            return -1;
        sleep_ms(5);
    }
    kill(pid, SIGKILL);
    reap(pid);
    return -2;
}

/* Reaps n children of any kind (we are a subreaper) and counts those killed by SIGKILL. */
static int reap_any_killed(int n)
{
    int killed = 0;
    for (int i = 0; i < n; i++) {
        int status;
        if (waitpid(-1, &status, 0) < 0)
            break;
        killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    }
    return killed;
}

static bool wait_pids_current(struct cgroup *cg, uint64_t want)
{
    for (int i = 0; i < 400; i++) {
        struct cgroup_stats st;
        err_t err;
        if (cgroup_read_stats(cg, &st, &err) == 0 && st.pids_current == want)
            return true;
        sleep_ms(5);
    }
    return false;
}

/* Processes listed in cgroup.procs of hutch/PATH in one hierarchy (not below it). */
static size_t count_procs(const char *hier, const char *path)
{
    char text[8192];
    size_t n = 0;
    read_group_file(text, sizeof text, hier, path, "cgroup.procs");
    for (const char *p = text; (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

/* Waits until the group holds want processes: pids_current where the mode has the pids
 * controller, else cgroup.procs of its first hierarchy. */
static bool wait_members(const struct mode *m, struct cgroup *cg, const char *path, size_t want)
{
    if (m->limits)
        return wait_pids_current(cg, want);
    for (int i = 0; i < 400; i++) {
        if (count_procs(m->used[0], path) == want)
            return true;
        sleep_ms(5);
    }
    return false;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Polls cgroup_populated (the test sleeps, the library never does) until it says want. */
static bool wait_populated(struct cgroup *cg, bool want, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    do {
        bool populated;
        if (cgroup_populated(cg, &populated, NULL) < 0)
            return false;
        if (populated == want)
            return true;
        sleep_ms(1);
    } while (now_ms() < deadline);
    return false;
}

/* Polls cgroup_frozen until it says want; the number of polls it took, or -1. */
static int wait_frozen(struct cgroup *cg, bool want, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    int polls = 0;
    do {
        bool frozen;
        polls++;
        if (cgroup_frozen(cg, &frozen, NULL) < 0)
            return -1;
        if (frozen == want)
            return polls;
        sleep_ms(1);
    } while (now_ms() < deadline);
    return -1;
}

/* cgroup_remove, again while it says EBUSY (exiting members still counted), for at most ms. */
static int remove_within(struct cgroup *cg, unsigned ms, err_t *err)
{
    uint64_t deadline = now_ms() + ms;
    for (;;) {
        if (cgroup_remove(cg, err) == 0)
            return 0;
        if (err->errnum != EBUSY || now_ms() >= deadline)
            return -1;
        sleep_ms(1);
    }
}

/* Reaps every child we have (we are a subreaper: orphans come to us) until there is none; the
 * number killed by SIGKILL, or -1 if some child is still alive after ms (the caller then kills
 * the group and reaps again, so that a failed kill is a failed check, not a hang or a leak). */
static int reap_all_within(unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    int killed = 0;
    for (;;) {
        int status;
        pid_t r = waitpid(-1, &status, WNOHANG);
        if (r > 0)
            killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        else if (r < 0)
            return killed; /* ECHILD: none left */
        else if (now_ms() >= deadline)
            return -1;
        else
            sleep_ms(1);
    }
}

/* ---------- mode detection and names ---------- */

static void test_modes(void)
{
    enum cgroup_mode mode;
    err_t err;
    is_str(cgroup_mode_name(CGROUP_MODE_V1), "v1", "mode name v1");
    is_str(cgroup_mode_name(CGROUP_MODE_HYBRID), "hybrid", "mode name hybrid");
    is_str(cgroup_mode_name(CGROUP_MODE_V2), "v2", "mode name v2");

    ok(cgroup_detect(&mode, &err) == 0 && mode == CGROUP_MODE_HYBRID, "this host is hybrid");
    /* The override is the CLI's business now (src/cli/paths.c): the library reads no
     * environment, so a forced mode reaches it only as cgroup_host_open's parameter. */
    setenv("HUTCH_CGROUP_MODE", "v1", 1);
    ok(cgroup_detect(&mode, &err) == 0 && mode == CGROUP_MODE_HYBRID,
       "cgroup_detect ignores HUTCH_CGROUP_MODE=v1");
    unsetenv("HUTCH_CGROUP_MODE");

    static const struct {
        const char *text;
        enum cgroup_mode mode;
    } forced[] = {{"v1", CGROUP_MODE_V1}, {"v2", CGROUP_MODE_V2}, {"hybrid", CGROUP_MODE_HYBRID}};
    for (size_t i = 0; i < sizeof forced / sizeof forced[0]; i++) {
        struct cgroup_host *host = NULL;
        /* Anything but the answer, so that a parse that writes nothing fails. */
        mode = forced[i].mode == CGROUP_MODE_V1 ? CGROUP_MODE_V2 : CGROUP_MODE_V1;
        ok(cgroup_mode_parse(forced[i].text, &mode, &err) == 0 && mode == forced[i].mode,
           "cgroup_mode_parse(\"%s\")", forced[i].text);
        int rc = cgroup_host_open((int)forced[i].mode, &host, &err);
        ok(rc == 0 && cgroup_host_mode(host) == forced[i].mode, "a host forced to %s is %s (%s)",
           forced[i].text, forced[i].text, rc == 0 ? "opened" : err.msg);
        cgroup_host_close(host);
    }
    ok(cgroup_mode_parse("v3", &mode, &err) < 0 && err.errnum == EINVAL && strstr(err.msg, "v3"),
       "mode \"v3\" is an error that names it (%s)", err.msg);
    ok(cgroup_mode_parse("", &mode, &err) < 0, "mode \"\" is an error");
    struct cgroup_host *host = (struct cgroup_host *)1;
    ok(cgroup_host_open(7, &host, &err) < 0 && host == NULL && err.errnum == EINVAL,
       "cgroup_host_open of mode 7 is refused (%s)", err.msg);
    /* The CLI reads the variable, and says so when it is wrong. */
    setenv("HUTCH_CGROUP_MODE", "v3", 1);
    ok(hutch_cgroup_host(&err) == NULL && strstr(err.msg, "HUTCH_CGROUP_MODE"),
       "HUTCH_CGROUP_MODE=v3 is an error in the CLI (%s)", err.msg);
    unsetenv("HUTCH_CGROUP_MODE");
}

static void test_names(struct cgroup_host *host)
{
    char long_name[80];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    const char *bad[] = {"", ".", "..", ".hidden", "a/b", "a b", "a\nb", "ä", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cgroup *cg = (struct cgroup *)1;
        err_t err;
        int rc = cgroup_create(host, NULL, bad[i], NULL, 0, &cg, &err);
        ok(rc < 0 && cg == NULL && err.errnum == EINVAL, "bad name #%zu refused (%s)", i, err.msg);
    }
    struct cgroup *cg = NULL;
    err_t err;
    ok(cgroup_create(host, NULL, NULL, NULL, 0, &cg, &err) < 0, "NULL name refused");

    /* The longest name allowed, using every allowed kind of character. */
    int prefix = snprintf(long_name, sizeof long_name, "t%d-Az9._-", (int)getpid());
    memset(long_name + prefix, 'x', (size_t)(64 - prefix));
    long_name[64] = '\0';
    ok_call(cgroup_create(host, NULL, long_name, NULL, 0, &cg, &err_),
            "64-character name accepted");
    ok(group_exists("memory", long_name) && group_exists("pids", long_name) &&
           group_exists("unified", long_name),
       "it exists in memory, pids and unified");
    ok(!group_exists("cpuacct", long_name) && !group_exists("freezer", long_name),
       "and not in cpuacct or freezer (hybrid does not use them)");
    ok(cgroup_destroy(cg, &err) == 0, "destroy it");
    ok(group_gone(long_name), "and it is gone");
    ok(cgroup_destroy(NULL, &err) == 0, "destroy(NULL) is a no-op");
}

/* ---------- creation, limits, rollback ---------- */

static void test_create_limits(const struct mode *m)
{
    char name[64], buf[256];
    mode_group_name(name, sizeof name, m, "limits");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB, .pids = 64};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err) < 0) {
        ok(0, "%s: create with limits: %s", m->label, err.msg);
        return;
    }
    ok(1, "%s: create with limits", m->label);
    check_layout(m, name);
    int dir_fd = cgroup_open_dir_fd(cg, &err);
    if (m->v1_freezer)
        ok(dir_fd == -1 && err.errnum == ENOTSUP, "%s: no clone3 fd (%s)", m->label, err.msg);
    else
        ok(dir_fd >= 0, "%s: has a clone3 fd", m->label);
    if (dir_fd >= 0)
        close(dir_fd);
    is_str(read_group_file(buf, sizeof buf, "memory", name, "memory.limit_in_bytes"), "33554432\n",
           "%s: memory.limit_in_bytes", m->label);
    char path[256];
    if (access(group_path(path, sizeof path, "memory", name, "memory.memsw.limit_in_bytes"),
               F_OK) == 0)
        is_str(read_group_file(buf, sizeof buf, "memory", name, "memory.memsw.limit_in_bytes"),
               "33554432\n", "%s: memory.memsw.limit_in_bytes equals it (no swap on top)",
               m->label);
    is_str(read_group_file(buf, sizeof buf, "pids", name, "pids.max"), "64\n", "%s: pids.max",
           m->label);

    struct cgroup *dup = (struct cgroup *)1;
    ok(cgroup_create(m->host, NULL, name, &limits, 0, &dup, &err) < 0 && dup == NULL &&
           err.errnum == EEXIST,
       "%s: a second group with the same name is refused (%s)", m->label, err.msg);
    ok(strstr(err.msg, name) != NULL, "%s: the error names the group", m->label);
    bool all_there = true;
    for (size_t i = 0; i < m->n_used; i++)
        all_there = all_there && group_exists(m->used[i], name);
    ok(all_there, "%s: the refused create left the first group alone", m->label);

    struct cgroup_stats st;
    ok(cgroup_read_stats(cg, &st, &err) == 0 && st.pids_current == 0 && st.oom_kills == 0,
       "%s: stats of an empty group", m->label);
    ok_call(cgroup_kill(cg, &err_), "%s: kill of an empty group", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static void touch_64mib(void);

/* cgroup_set_limits on a group in use: a memory limit raised lets a process have what the old
 * one refused (v1 must write memsw before memory when raising, after it when lowering), one
 * lowered again kills it, a 0 field leaves that limit alone, and pids.max changes. */
static void test_set_limits(const struct mode *m)
{
    char name[64], buf[256];
    mode_group_name(name, sizeof name, m, "setlim");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB, .pids = 64};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, &limits, CGROUP_OOM_GROUP, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    const char *pids_hier = m->kind == CGROUP_MODE_V2 ? "" : "pids";
    struct cgroup_limits up = {.memory_bytes = 96 * MIB};
    ok_call(cgroup_set_limits(cg, &up, &err_), "%s: raise the memory limit to 96 MiB", m->label);
    struct cgroup_memory mem;
    ok(cgroup_read_memory(cg, &mem, &err) == 0 && mem.limit_bytes == 96 * MIB,
       "%s: it reads as 96 MiB (%" PRIu64 ")", m->label, mem.limit_bytes);
    char path[256];
    if (m->kind != CGROUP_MODE_V2 &&
        access(group_path(path, sizeof path, "memory", name, "memory.memsw.limit_in_bytes"),
               F_OK) == 0)
        is_str(read_group_file(buf, sizeof buf, "memory", name, "memory.memsw.limit_in_bytes"),
               "100663296\n", "%s: memsw follows it", m->label);
    is_str(read_group_file(buf, sizeof buf, pids_hier, name, "pids.max"), "64\n",
           "%s: a pids field of 0 left pids.max alone", m->label);
    int go;
    pid_t pid = spawn_waiting(&go, touch_64mib);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    is_u64((uint64_t)reap(pid), 0, "%s: 64 MiB fits under the raised limit", m->label);

    struct cgroup_limits down = {.memory_bytes = 40 * MIB, .pids = 100};
    ok_call(cgroup_set_limits(cg, &down, &err_), "%s: lower it to 40 MiB, pids.max 100", m->label);
    ok(cgroup_read_memory(cg, &mem, &err) == 0 && mem.limit_bytes == 40 * MIB,
       "%s: it reads as 40 MiB (%" PRIu64 ")", m->label, mem.limit_bytes);
    is_str(read_group_file(buf, sizeof buf, pids_hier, name, "pids.max"), "100\n",
           "%s: pids.max 100", m->label);
    pid = spawn_waiting(&go, touch_64mib);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    ok(reap(pid) == SIGKILL, "%s: under the lowered limit 64 MiB is killed", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static void collect_child(const char *name, void *user)
{
    char *list = user;
    if (strlen(list) + strlen(name) + 2 < 128) {
        strcat(list, name);
        strcat(list, " ");
    }
}

/* cgroup_for_each_child names each child group once (a daemon after a restart finds the command
 * groups that ran on by it), and none of a childless group. */
static void test_children(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "children");
    struct cgroup *parent = NULL, *kids[3] = {NULL};
    static const char *const kid_names[] = {"c12", "c3", "x9"};
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, CGROUP_NESTED, &parent, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    char list[128] = "";
    ok_call(cgroup_for_each_child(parent, collect_child, list, &err_), "%s: list no children",
            m->label);
    is_str(list, "", "%s: a new group has no children", m->label);
    for (size_t i = 0; i < 3; i++)
        ok_call(cgroup_create(m->host, parent, kid_names[i], NULL, 0, &kids[i], &err_),
                "%s: child %s", m->label, kid_names[i]);
    list[0] = '\0';
    ok_call(cgroup_for_each_child(parent, collect_child, list, &err_), "%s: list the children",
            m->label);
    ok(strlen(list) == strlen("c12 c3 x9 ") && strstr(list, "c12 ") && strstr(list, "c3 ") &&
           strstr(list, "x9 "),
       "%s: each child named once (%s)", m->label, list);
    for (size_t i = 0; i < 3; i++)
        ok_call(cgroup_destroy(kids[i], &err_), "%s: destroy %s", m->label, kid_names[i]);
    ok_call(cgroup_destroy(parent, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

/* A clash in a hierarchy the mode uses must fail the create and roll back the ones made before
 * it, and must not remove the directory that clashed (it is not ours). */
static void test_rollback_one(const struct mode *m, const char *clash_hier)
{
    char name[64], path[256];
    mode_group_name(name, sizeof name, m, "clash");
    group_path(path, sizeof path, clash_hier, "", NULL); /* .../hutch/ */
    mkdir(path, 0755);
    group_path(path, sizeof path, clash_hier, name, NULL);
    if (mkdir(path, 0755) < 0) {
        ok(0, "%s: mkdir %s: %s", m->label, path, strerror(errno));
        return;
    }
    struct cgroup *cg = NULL;
    err_t err = {0};
    struct cgroup_limits limits = {.memory_bytes = 16 * MIB, .pids = 8};
    int rc = cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err);
    ok(rc < 0 && cg == NULL && err.errnum == EEXIST, "%s: clash in %s refused (%s)", m->label,
       clash_hier, err.msg);
    if (rc == 0) /* a create that should have failed still owns its groups */
        cgroup_destroy(cg, NULL);
    ok(group_exists(clash_hier, name), "%s: the clashing %s directory is not removed", m->label,
       clash_hier);
    bool others_gone = true;
    for (size_t i = 0; i < COUNT(all_hiers); i++) {
        if (strcmp(all_hiers[i], clash_hier) != 0 && group_exists(all_hiers[i], name))
            others_gone = false;
    }
    ok(others_gone, "%s: every other directory made before the clash was rolled back", m->label);
    rmdir(path);
    ok(group_gone(name), "%s: clean after the clash in %s", m->label, clash_hier);
}

/* A directory of the same name in a hierarchy the mode does not use is none of its business:
 * the create succeeds, and destroy leaves that directory alone. */
static void test_unused_clash(const struct mode *m, const char *hier)
{
    char name[64], path[256];
    mode_group_name(name, sizeof name, m, "unused");
    group_path(path, sizeof path, hier, "", NULL);
    mkdir(path, 0755);
    group_path(path, sizeof path, hier, name, NULL);
    if (mkdir(path, 0755) < 0) {
        ok(0, "%s: mkdir %s: %s", m->label, path, strerror(errno));
        return;
    }
    struct cgroup *cg = NULL;
    err_t err = {0};
    int rc = cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err);
    ok(rc == 0, "%s: a directory in %s (not used) is no clash (%s)", m->label, hier,
       rc == 0 ? "created" : err.msg);
    if (rc == 0)
        ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_exists(hier, name), "%s: the %s directory is left alone", m->label, hier);
    rmdir(path);
    ok(group_gone(name), "%s: clean after the directory in %s", m->label, hier);
}

static void test_rollback(const struct mode *m)
{
    for (size_t i = 0; i < m->n_used; i++)
        test_rollback_one(m, m->used[i]);
    for (size_t i = 0; i < m->n_unused; i++)
        test_unused_clash(m, m->unused[i]);
}

/* ---------- placement, counters, kill ---------- */

static void test_placement(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "place");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    /* clone3(CLONE_INTO_CGROUP) where there is a cgroup2 group, and a plain fork always. */
    pid_t pids[2];
    const char *kinds[2];
    size_t n = 0;
    int dir_fd = cgroup_open_dir_fd(cg, NULL);
    if (dir_fd >= 0) {
        pid_t cloned = clone_into(dir_fd);
        close(dir_fd);
        ok(cloned > 0, "%s: clone3 into the cgroup2 group", m->label);
        ok_call(cgroup_attach(cg, cloned, &err_), "%s: attach the cloned child", m->label);
        kinds[n] = "cloned";
        pids[n++] = cloned;
    }
    int go;
    pid_t forked = spawn_waiting(&go, pause_forever);
    ok_call(cgroup_attach(cg, forked, &err_), "%s: attach a plainly forked child", m->label);
    release(go);
    kinds[n] = "forked";
    pids[n++] = forked;
    for (size_t i = 0; i < m->n_used; i++) {
        for (size_t k = 0; k < n; k++)
            ok(procs_has(m->used[i], name, pids[k]), "%s: %s child in %s cgroup.procs", m->label,
               kinds[k], m->used[i]);
    }
    for (size_t i = 0; i < m->n_unused; i++)
        ok(!group_exists(m->unused[i], name), "%s: still no group in %s", m->label, m->unused[i]);
    ok(!procs_has(m->used[0], name, getpid()), "%s: the caller itself was not moved", m->label);
    struct cgroup_stats st;
    ok(cgroup_read_stats(cg, &st, &err) == 0, "%s: read stats", m->label);
    if (m->limits)
        is_u64(st.pids_current, n, "%s: pids_current counts every child", m->label);
    ok(cgroup_attach(cg, 0, &err) < 0, "%s: attach of pid 0 refused", m->label);
    ok_call(cgroup_kill(cg, &err_), "%s: kill", m->label);
    for (size_t k = 0; k < n; k++)
        ok(reap(pids[k]) == SIGKILL, "%s: %s child died of SIGKILL", m->label, kinds[k]);
    bool empty = true;
    for (size_t i = 0; i < m->n_used; i++) {
        for (size_t k = 0; k < n; k++)
            empty = empty && !procs_has(m->used[i], name, pids[k]);
    }
    ok(empty, "%s: every cgroup.procs empty after kill", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static void touch_64mib(void)
{
    size_t size = 64 * MIB;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(2);
    for (size_t i = 0; i < size; i += 4096)
        p[i] = 1;
}

/* 24 MiB of anonymous memory and 4 MiB of page cache (a tmpfs file, shmem: "file" on v2,
 * "cache" on v1), then a pause until killed. */
static char memory_file[64];
static void hold_28mib(void)
{
    size_t size = 24 * MIB;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(2);
    for (size_t i = 0; i < size; i += 4096)
        p[i] = 1;
    int fd = open(memory_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        _exit(3);
    for (size_t i = 0; i < 4 * MIB; i += 4096)
        if (write(fd, p, 4096) != 4096)
            _exit(4);
    close(fd);
    pause_forever();
}

static void test_memory(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "memory");
    snprintf(memory_file, sizeof memory_file, "/dev/shm/hutch-test-%d-memory", (int)getpid());
    struct cgroup_limits limits = {.memory_bytes = m->limits ? 64 * MIB : 0};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    struct cgroup_memory mem;
    ok_call(cgroup_read_memory(cg, &mem, &err_), "%s: read the memory of an empty group", m->label);
    is_u64(mem.limit_bytes, m->limits ? 64 * MIB : 0, "%s: the limit reads as written", m->label);
    int go;
    pid_t pid = spawn_waiting(&go, hold_28mib);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    /* the child touches its memory after the release: until then the group holds less */
    bool seen = false;
    for (int i = 0; i < 400 && !seen; i++) {
        seen = cgroup_read_memory(cg, &mem, &err) == 0 && mem.cache_bytes >= 4 * MIB;
        if (!seen)
            usleep(5000);
    }
    if (m->limits) {
        ok(seen, "%s: the page cache of a 4 MiB tmpfs file is counted (%" PRIu64 ")", m->label,
           mem.cache_bytes);
        ok(mem.current_bytes >= 28 * MIB && mem.current_bytes <= 64 * MIB,
           "%s: 28 MiB <= current <= the limit (%" PRIu64 ")", m->label, mem.current_bytes);
        ok(mem.cache_bytes <= mem.current_bytes, "%s: the cache is part of current", m->label);
    } else {
        ok(!seen && mem.current_bytes == 0 && mem.limit_bytes == 0,
           "%s: without the memory controller the group reads as zeros", m->label);
    }
    ok_call(cgroup_kill(cg, &err_), "%s: kill", m->label);
    ok(reap(pid) == SIGKILL, "%s: the child died of SIGKILL", m->label);
    unlink(memory_file);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static void test_oom(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "oom");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, touch_64mib);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    ok(reap(pid) == SIGKILL, "%s: 64 MiB under a 32 MiB limit is killed", m->label);
    struct cgroup_stats st;
    ok_call(cgroup_read_stats(cg, &st, &err_), "%s: read stats", m->label);
    ok(st.oom_kills >= 1, "%s: oom_kills >= 1 (%" PRIu64 ")", m->label, st.oom_kills);
    ok(st.memory_peak_bytes > 0 && st.memory_peak_bytes <= 32 * MIB,
       "%s: 0 < memory_peak <= limit (%" PRIu64 ")", m->label, st.memory_peak_bytes);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static void burn_200ms(void)
{
    struct timespec ts;
    do
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    while (ts.tv_sec == 0 && ts.tv_nsec < 200000000L);
}

/* The CPU counter read straight from the file the mode is meant to use: cpu.stat's usage_usec
 * in the cgroup2 group (hybrid), cpuacct.usage (v1). In ns; UINT64_MAX if unreadable. */
static uint64_t cpu_file_ns(const struct mode *m, const char *name)
{
    if (m->v1_freezer)
        return read_group_u64("cpuacct", name, "cpuacct.usage");
    uint64_t usec = read_group_key(m->cgroup2, name, "cpu.stat", "usage_usec");
    return usec == UINT64_MAX ? usec : usec * 1000;
}

static void test_cpu(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "cpu");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, burn_200ms);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    ok(reap(pid) == 0, "%s: the burner exits normally", m->label);

    /* The counters only grow, so each value read through the module must lie between two reads
     * of the file it is meant to come from. */
    uint64_t file_before = cpu_file_ns(m, name);
    struct cgroup_stats st;
    ok_call(cgroup_read_stats(cg, &st, &err_), "%s: read stats", m->label);
    uint64_t cpu_ns = 0;
    ok_call(cgroup_read_cpu_ns(cg, &cpu_ns, &err_), "%s: cgroup_read_cpu_ns", m->label);
    uint64_t file_after = cpu_file_ns(m, name);
    const char *file = m->v1_freezer ? "cpuacct.usage" : "cgroup2 cpu.stat usage_usec";

    ok(st.cpu_usage_ns >= 150000000u, "%s: cpu_usage_ns covers the 200 ms burn (%" PRIu64 ")",
       m->label, st.cpu_usage_ns);
    ok(cpu_ns > 0, "%s: cgroup_read_cpu_ns > 0 after the burn (%" PRIu64 ")", m->label, cpu_ns);
    ok(cpu_ns >= 150000000u, "%s: cgroup_read_cpu_ns covers the 200 ms burn", m->label);
    ok(file_before != UINT64_MAX && file_before <= st.cpu_usage_ns && st.cpu_usage_ns <= cpu_ns &&
           cpu_ns <= file_after,
       "%s: both come from %s (%" PRIu64 " <= %" PRIu64 " <= %" PRIu64 " <= %" PRIu64 ")", m->label,
       file, file_before, st.cpu_usage_ns, cpu_ns, file_after);
    ok(st.oom_kills == 0, "%s: no oom kill", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static volatile uint64_t *counter;

static void count_forever(void)
{
    for (;;)
        (*counter)++;
}

/* The frozen state as the kernel reports it: freezer.state on v1, cgroup.freeze (what was
 * asked) and cgroup.events (what is done) in the cgroup2 group on hybrid. */
static void check_frozen(const struct mode *m, const char *name, bool frozen)
{
    char buf[256];
    if (m->v1_freezer) {
        is_str(read_group_file(buf, sizeof buf, "freezer", name, "freezer.state"),
               frozen ? "FROZEN\n" : "THAWED\n", "%s: freezer.state reads %s", m->label,
               frozen ? "FROZEN" : "THAWED");
        return;
    }
    is_str(read_group_file(buf, sizeof buf, m->cgroup2, name, "cgroup.freeze"),
           frozen ? "1\n" : "0\n", "%s: cgroup2 cgroup.freeze reads %d", m->label, frozen);
    is_u64(read_group_key(m->cgroup2, name, "cgroup.events", "frozen"), frozen ? 1 : 0,
           "%s: cgroup2 cgroup.events says frozen %d", m->label, frozen);
    ok(!group_exists("freezer", name), "%s: no v1 freezer group involved", m->label);
}

static void test_freeze(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "freeze");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    *counter = 0;
    int go;
    pid_t pid = spawn_waiting(&go, count_forever);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    while (*counter == 0)
        sleep_ms(1);

    ok_call(cgroup_set_frozen(cg, true, &err_), "%s: freeze", m->label);
    check_frozen(m, name, true);
    uint64_t before = *counter;
    sleep_ms(100);
    is_u64(*counter, before, "%s: a frozen child makes no progress", m->label);

    ok_call(cgroup_set_frozen(cg, false, &err_), "%s: thaw", m->label);
    check_frozen(m, name, false);
    sleep_ms(50);
    ok(*counter > before, "%s: a thawed child runs again", m->label);

    /* Destroying a frozen group must still kill it (v1: SIGKILL is queued before the thaw;
     * cgroup2: a frozen task dies of SIGKILL). */
    ok_call(cgroup_set_frozen(cg, true, &err_), "%s: freeze again", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy while frozen", m->label);
    ok(reap(pid) == SIGKILL, "%s: the frozen child died of SIGKILL", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

static void fork_three_then_pause(void)
{
    for (int i = 0; i < 3; i++) {
        if (fork() == 0)
            pause_forever();
    }
    pause_forever();
}

/* A child and its three children (which we adopt as subreaper) all die in one kill: through
 * cgroup.kill on hybrid, through the freezer on v1. */
static void test_kill_tree(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "tree");
    struct cgroup_limits limits = {.pids = m->limits ? 16 : 0};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, fork_three_then_pause);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    ok(wait_members(m, cg, name, 4), "%s: child and three grandchildren are in the group",
       m->label);
    ok_call(cgroup_kill(cg, &err_), "%s: kill", m->label);
    ok(reap(pid) == SIGKILL, "%s: child died of SIGKILL", m->label);
    is_u64(reap_any_killed(3), 3, "%s: all three grandchildren died of SIGKILL", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

/* ---------- self-attach: the child moves itself into the v1 hierarchies ---------- */

/* A child (clone3 into cgroup_fd when >= 0, else a plain fork) that calls cgroup_self_attach
 * first thing, reports errno (0 for success) on the pipe *report, then pauses. */
static pid_t spawn_self_attaching(int cgroup_fd, const int *fds, size_t n, int *report)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    struct clone_args args = {
        .flags = cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0,
        .exit_signal = SIGCHLD,
        .cgroup = cgroup_fd >= 0 ? (uint64_t)cgroup_fd : 0,
    };
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) {
        int e = cgroup_self_attach(fds, n) == 0 ? 0 : errno;
        if (write(p[1], &e, sizeof e) != (ssize_t)sizeof e)
            _exit(98);
        pause_forever();
    }
    close(p[1]);
    *report = p[0];
    return (pid_t)pid;
}

static int read_report(int fd)
{
    int e = -1;
    if (read(fd, &e, sizeof e) != (ssize_t)sizeof e)
        e = -1;
    close(fd);
    return e;
}

/* True if fd is open in pid and is some cgroup's tasks file. */
static bool child_holds_tasks_fd(pid_t pid, int fd)
{
    char path[64], target[512];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0)
        return false;
    target[n] = '\0';
    return n >= 6 && strcmp(target + n - 6, "/tasks") == 0;
}

static void test_self_attach(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "self");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    int fds[8];
    size_t n = 0;
    ok_call(cgroup_self_attach_open(cg, fds, COUNT(fds), &n, &err_), "%s: self_attach_open",
            m->label);
    is_u64(n, m->v1_count, "%s: one tasks fd per v1 hierarchy", m->label);

    /* As spawn.c does it: cloned into the cgroup2 group (if any), then self-attached to v1. */
    int report;
    int dir_fd = cgroup_open_dir_fd(cg, NULL); /* -1 on v1: a plain fork */
    pid_t pid = spawn_self_attaching(dir_fd, fds, n, &report);
    if (dir_fd >= 0)
        close(dir_fd);
    ok(pid > 0, "%s: spawn the self-attaching child", m->label);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    is_u64((uint64_t)read_report(report), 0, "%s: cgroup_self_attach succeeded in the child",
           m->label);
    for (size_t i = 0; i < m->n_used; i++)
        ok(procs_has(m->used[i], name, pid), "%s: the child is in %s cgroup.procs", m->label,
           m->used[i]);
    bool held = false;
    for (size_t i = 0; i < n; i++)
        held = held || child_holds_tasks_fd(pid, fds[i]);
    ok(!held, "%s: the child closed the tasks fds", m->label);
    ok(!procs_has("memory", name, getpid()) && !procs_has("pids", name, getpid()),
       "%s: the caller itself was not moved", m->label);
    ok(wait_members(m, cg, name, 1), "%s: the group counts the child", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(reap_within(pid, 2000) == SIGKILL, "%s: the self-attached child died of SIGKILL", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

/* ---------- cgroup_file_path ---------- */

/* The paths come from the group's own directories: on hybrid, memory and "" (cgroup2) resolve
 * to files that exist, and freezer (a hierarchy hybrid does not use) is an error. */
static void test_file_path(void)
{
    char name[64], path[4096], want[256];
    mode_group_name(name, sizeof name, &mode_hybrid, "path");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(mode_hybrid.host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "hybrid: create: %s", err.msg);
        return;
    }
    ok_call(cgroup_file_path(cg, "memory", "memory.limit_in_bytes", path, sizeof path, &err_),
            "hybrid: memory resolves");
    is_str(path, group_path(want, sizeof want, "memory", name, "memory.limit_in_bytes"),
           "hybrid: it is memory.limit_in_bytes of the group's memory directory");
    ok(access(path, F_OK) == 0, "hybrid: and the file exists");
    ok_call(cgroup_file_path(cg, "", "cgroup.events", path, sizeof path, &err_),
            "hybrid: \"\" resolves");
    is_str(path, group_path(want, sizeof want, "unified", name, "cgroup.events"),
           "hybrid: it is cgroup.events of the group's cgroup2 directory");
    ok(access(path, F_OK) == 0, "hybrid: and the file exists");
    ok_call(cgroup_file_path(cg, "pids", "", path, sizeof path, &err_),
            "hybrid: an empty file name resolves");
    is_str(path, group_path(want, sizeof want, "pids", name, NULL),
           "hybrid: to the group's directory itself");

    strcpy(path, "untouched");
    ok(cgroup_file_path(cg, "freezer", "freezer.state", path, sizeof path, &err) < 0 &&
           err.errnum == ENOENT,
       "hybrid: freezer fails (%s)", err.msg);
    ok(strstr(err.msg, name) && strstr(err.msg, "freezer"),
       "hybrid: the error names the group and the controller");
    ok(cgroup_file_path(cg, "blkio", "blkio.weight", path, sizeof path, &err) < 0 &&
           err.errnum == EINVAL,
       "hybrid: a controller hutch does not use is refused (%s)", err.msg);
    ok(cgroup_file_path(cg, "memory", "memory.limit_in_bytes", path, 20, &err) < 0 &&
           err.errnum == ENAMETOOLONG,
       "hybrid: a buffer too small is an error, not a cut path (%s)", err.msg);
    ok_call(cgroup_destroy(cg, &err_), "hybrid: destroy");

    /* Between the two steps of a split create the v1 groups do not exist yet. */
    mode_group_name(name, sizeof name, &mode_hybrid, "path2");
    if (cgroup_create_for_clone(mode_hybrid.host, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "hybrid: create_for_clone: %s", err.msg);
        return;
    }
    ok(cgroup_file_path(cg, "memory", "", path, sizeof path, &err) < 0,
       "hybrid: before create_finish, memory fails (%s)", err.msg);
    ok_call(cgroup_file_path(cg, "", "", path, sizeof path, &err_),
            "hybrid: before create_finish, cgroup2 resolves");
    ok_call(cgroup_create_finish(cg, NULL, &err_), "hybrid: create_finish");
    ok_call(cgroup_file_path(cg, "memory", "", path, sizeof path, &err_),
            "hybrid: after create_finish, memory resolves");
    ok(access(path, F_OK) == 0, "hybrid: and the directory exists");
    ok_call(cgroup_destroy(cg, &err_), "hybrid: destroy");

    /* Pure v1 is the other way round: freezer is there, cgroup2 is not. */
    mode_group_name(name, sizeof name, &mode_v1, "path");
    if (cgroup_create(mode_v1.host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "v1: create: %s", err.msg);
        return;
    }
    ok_call(cgroup_file_path(cg, "freezer", "freezer.state", path, sizeof path, &err_),
            "v1: freezer resolves");
    is_str(path, group_path(want, sizeof want, "freezer", name, "freezer.state"),
           "v1: to freezer.state of the group's freezer directory");
    ok(access(path, F_OK) == 0, "v1: and the file exists");
    ok(cgroup_file_path(cg, "", "cgroup.events", path, sizeof path, &err) < 0 &&
           err.errnum == ENOENT,
       "v1: \"\" fails, there is no cgroup2 group (%s)", err.msg);
    ok_call(cgroup_destroy(cg, &err_), "v1: destroy");
    ok(group_gone(name), "v1: no directory left");
}

/* Hybrid kill is cgroup.kill in the cgroup2 group, then a check of the v1 groups: a process
 * that is only in the v1 groups (it self-attached, but was never cloned into the cgroup2 group)
 * must still be killed before the v1 groups can be removed. */
static void test_self_attach_v1_only(void)
{
    char name[64];
    mode_group_name(name, sizeof name, &mode_hybrid, "v1only");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(mode_hybrid.host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "hybrid: create: %s", err.msg);
        return;
    }
    int fds[8];
    size_t n = 0;
    ok_call(cgroup_self_attach_open(cg, fds, COUNT(fds), &n, &err_), "hybrid: self_attach_open");
    int report;
    pid_t pid = spawn_self_attaching(-1, fds, n, &report);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    is_u64((uint64_t)read_report(report), 0, "hybrid: a plain fork self-attaches");
    ok(procs_has("memory", name, pid) && procs_has("pids", name, pid) &&
           !procs_has("unified", name, pid),
       "hybrid: it is in the v1 groups only");
    ok_call(cgroup_kill(cg, &err_), "hybrid: kill");
    ok(reap_within(pid, 2000) == SIGKILL, "hybrid: the v1-only member died of SIGKILL");
    ok_call(cgroup_destroy(cg, &err_), "hybrid: destroy");
    ok(group_gone(name), "hybrid: no directory left");
}

/* fds too small for the hierarchies: an error with no fd left open, and (run in a child, so a
 * regression cannot move the test itself) the caller must not have joined any group. */
static void test_self_attach_open_too_small(void)
{
    char name[64];
    mode_group_name(name, sizeof name, &mode_hybrid, "small");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(mode_hybrid.host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "hybrid: create: %s", err.msg);
        return;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        ok(0, "pipe: %s", strerror(errno));
        cgroup_destroy(cg, NULL);
        return;
    }
    int fds_before = count_fds();
    pid_t pid = fork();
    if (pid == 0) {
        int fds[1] = {-1};
        size_t n = 99;
        err_t cerr = {0};
        int answer[3];
        answer[0] = cgroup_self_attach_open(cg, fds, 1, &n, &cerr);
        answer[1] = (int)n;
        answer[2] = cerr.errnum;
        answer[0] = answer[0] < 0 && count_fds() == fds_before ? answer[0] : -2;
        if (write(p[1], answer, sizeof answer) != (ssize_t)sizeof answer)
            _exit(98);
        pause_forever();
    }
    close(p[1]);
    int answer[3] = {0, 0, 0};
    if (read(p[0], answer, sizeof answer) != (ssize_t)sizeof answer)
        answer[0] = 0;
    close(p[0]);
    ok(answer[0] == -1 && answer[1] == 0 && answer[2] == EMFILE,
       "hybrid: room for 1 fd of 2 is EMFILE, 0 fds, none left open (rc %d, n %d, errno %d)",
       answer[0], answer[1], answer[2]);
    ok(!procs_has("memory", name, pid) && !procs_has("pids", name, pid),
       "hybrid: the failed open did not move its caller into the group");
    kill(pid, SIGKILL);
    ok(reap(pid) == SIGKILL, "hybrid: that child reaped");
    ok_call(cgroup_destroy(cg, &err_), "hybrid: destroy");
    ok(group_gone(name), "hybrid: no directory left");
}

/* ---------- v1 mounts found through mountinfo (each in a private mount namespace) ---------- */

/* Runs body in a child with its own mount namespace; body writes a one-line verdict ("ok" or
 * what went wrong) to the fd it is given, which is returned in buf. */
static const char *in_mount_ns(void (*body)(int out), char *buf, size_t size)
{
    int p[2];
    snprintf(buf, size, "no answer");
    if (pipe2(p, O_CLOEXEC) < 0)
        return buf;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            dprintf(p[1], "unshare/mount: %s", strerror(errno));
        else
            body(p[1]);
        _exit(0);
    }
    close(p[1]);
    ssize_t n = read(p[0], buf, size - 1);
    if (n > 0)
        buf[n] = '\0';
    close(p[0]);
    reap(pid);
    return buf;
}

/* Per test process, so parallel runs do not share them; set before each in_mount_ns.
 *
 * The mounts are found when a host is opened, once per process: the host the test opened in
 * main still holds its hierarchies (its fds keep them reachable after the umounts below), so
 * each body opens a host of its own after changing the mounts, as a process started on such a
 * machine would. */
static const struct mode *ns_mode;
static char spaced_dir[64], spaced_mnt[96], ns_name[64];

static void create_without_controller(int out)
{
    char path[64];
    struct cgroup_host *host = (struct cgroup_host *)1;
    err_t err = {0};
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s", ns_mode->missing_ctrl);
    if (umount2(path, MNT_DETACH) < 0) {
        dprintf(out, "umount: %s", strerror(errno));
    } else if (cgroup_host_open(ns_mode->open_as, &host, &err) == 0) {
        struct cgroup *cg = NULL;
        dprintf(out, "host opened although %s is not mounted", ns_mode->missing_ctrl);
        if (cgroup_create(host, NULL, ns_name, NULL, 0, &cg, &err) == 0)
            cgroup_destroy(cg, NULL);
        cgroup_host_close(host);
    } else if (host != NULL) {
        dprintf(out, "a failed open left *out set");
    } else if (!group_gone(ns_name)) {
        dprintf(out, "a directory was left behind");
    } else {
        dprintf(out, "%s", err.msg);
    }
}

/* Hybrid does not need cpuacct or freezer: without them mounted it still works. */
static void create_without_unused(int out)
{
    struct cgroup_host *host = NULL;
    struct cgroup *cg = NULL;
    err_t err = {0};
    if (umount2("/sys/fs/cgroup/cpuacct", MNT_DETACH) < 0 ||
        umount2("/sys/fs/cgroup/freezer", MNT_DETACH) < 0) {
        dprintf(out, "umount: %s", strerror(errno));
        return;
    }
    if (cgroup_host_open(ns_mode->open_as, &host, &err) < 0) {
        dprintf(out, "host: %s", err.msg);
        return;
    }
    if (cgroup_create(host, NULL, ns_name, NULL, 0, &cg, &err) < 0) {
        dprintf(out, "create: %s", err.msg);
        cgroup_host_close(host);
        return;
    }
    bool placed = group_exists("memory", ns_name) && group_exists("pids", ns_name) &&
                  group_exists("unified", ns_name);
    if (cgroup_destroy(cg, &err) < 0)
        dprintf(out, "destroy: %s", err.msg);
    else if (!placed)
        dprintf(out, "not in memory, pids and unified");
    else if (!group_gone(ns_name))
        dprintf(out, "left behind after destroy");
    else
        dprintf(out, "ok");
    cgroup_host_close(host);
}

/* A controller the mode uses, mounted (again: same hierarchy) where mountinfo has to escape
 * the spaces. Whatever happens, a group that was created is destroyed. */
static void create_with_spaced_mount(int out)
{
    char path[256], old_mnt[64], resolved[4096] = "";
    struct stat st;
    struct cgroup_host *host = NULL;
    struct cgroup *cg = NULL;
    err_t err = {0};
    snprintf(old_mnt, sizeof old_mnt, "/sys/fs/cgroup/%s", ns_mode->spaced_ctrl);
    if (umount2(old_mnt, MNT_DETACH) < 0 ||
        mount("cgroup", spaced_mnt, "cgroup", 0, ns_mode->spaced_ctrl) < 0) {
        dprintf(out, "setting up %s: %s", spaced_mnt, strerror(errno));
        return;
    }
    snprintf(path, sizeof path, "%s/hutch/%s", spaced_mnt, ns_name);
    if (cgroup_host_open(ns_mode->open_as, &host, &err) < 0) {
        dprintf(out, "host: %s", err.msg);
    } else if (cgroup_create(host, NULL, ns_name, NULL, 0, &cg, &err) < 0) {
        dprintf(out, "create: %s", err.msg);
    } else {
        bool there = stat(path, &st) == 0;
        bool named =
            cgroup_file_path(cg, ns_mode->spaced_ctrl, "", resolved, sizeof resolved, NULL) == 0 &&
            strcmp(resolved, path) == 0;
        if (cgroup_destroy(cg, &err) < 0)
            dprintf(out, "destroy: %s", err.msg);
        else if (!there)
            dprintf(out, "no group at %s", path);
        else if (!named)
            dprintf(out, "cgroup_file_path says \"%s\", not %s", resolved, path);
        else if (stat(path, &st) == 0 || !group_gone(ns_name))
            dprintf(out, "left behind after destroy");
        else
            dprintf(out, "ok");
    }
    cgroup_host_close(host);
    umount2(spaced_mnt, MNT_DETACH);
}

static void test_v1_mounts(const struct mode *m)
{
    char verdict[1024], want[128];
    ns_mode = m;

    mode_group_name(ns_name, sizeof ns_name, m, "nomount");
    in_mount_ns(create_without_controller, verdict, sizeof verdict);
    snprintf(want, sizeof want, "cgroup v1: controller '%s' is not mounted", m->missing_ctrl);
    is_str(verdict, want, "%s: a missing %s is an error naming it, with nothing left behind",
           m->label, m->missing_ctrl);
    ok(group_gone(ns_name), "%s: nothing left behind in the host's mounts either", m->label);

    if (m->n_unused && strcmp(m->unused[0], "cpuacct") == 0) {
        mode_group_name(ns_name, sizeof ns_name, m, "unmounted");
        is_str(in_mount_ns(create_without_unused, verdict, sizeof verdict), "ok",
               "%s: works without cpuacct and freezer mounted", m->label);
        ok(group_gone(ns_name), "%s: nothing left behind", m->label);
    }

    mode_group_name(ns_name, sizeof ns_name, m, "spaced");
    snprintf(spaced_dir, sizeof spaced_dir, "/tmp/hutch test-cgroup.%d", (int)getpid());
    snprintf(spaced_mnt, sizeof spaced_mnt, "%s/%s mount", spaced_dir, m->spaced_ctrl);
    mkdir(spaced_dir, 0700);
    mkdir(spaced_mnt, 0700);
    is_str(in_mount_ns(create_with_spaced_mount, verdict, sizeof verdict), "ok",
           "%s: a %s mount point with spaces (escaped in mountinfo) is found and used", m->label,
           m->spaced_ctrl);
    ok(group_gone(ns_name), "%s: nothing left behind in the host's mounts", m->label);
    rmdir(spaced_mnt);
    rmdir(spaced_dir);
}

/* ---------- forced modes ---------- */

static void test_forced_v2_refuses_limits(struct cgroup_host *host)
{
    char name[64];
    group_name(name, sizeof name, "v2-limit");
    struct cgroup *cg = (struct cgroup *)1;
    err_t err;
    struct cgroup_limits mem = {.memory_bytes = 32 * MIB};
    ok(cgroup_create(host, NULL, name, &mem, 0, &cg, &err) < 0 && cg == NULL,
       "v2 without the memory controller: a memory limit is refused");
    ok(strstr(err.msg, "'memory'") != NULL, "the error names the memory controller (%s)", err.msg);
    ok(group_gone(name), "no directory left");

    struct cgroup_limits pids = {.pids = 10};
    ok(cgroup_create(host, NULL, name, &pids, 0, &cg, &err) < 0 &&
           strstr(err.msg, "'pids'") != NULL,
       "a pids limit is refused naming pids (%s)", err.msg);
    ok(group_gone(name), "no directory left");
}

static void test_forced_v2_placement(struct cgroup_host *host)
{
    char name[64], buf[256];
    group_name(name, sizeof name, "v2");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "v2: create: %s", err.msg);
        return;
    }
    ok(group_exists("unified", name) && !group_exists("memory", name),
       "v2: only the cgroup2 group exists");
    int fds[8] = {-1};
    size_t n = 99;
    ok_call(cgroup_self_attach_open(cg, fds, COUNT(fds), &n, &err_), "v2: self_attach_open");
    is_u64(n, 0, "v2: no v1 hierarchy, so no tasks fd");
    int dir_fd = cgroup_open_dir_fd(cg, &err);
    ok(dir_fd >= 0, "v2: the cgroup2 directory opens for clone3 (%s)",
       dir_fd >= 0 ? "ok" : err.msg);
    pid_t cloned = clone_into(dir_fd);
    if (dir_fd >= 0)
        close(dir_fd);
    ok(cloned > 0 && procs_has("unified", name, cloned), "v2: clone3 places the child");
    ok_call(cgroup_attach(cg, cloned, &err_), "v2: attach of a cloned child is fine");
    int go;
    pid_t forked = spawn_waiting(&go, pause_forever);
    ok_call(cgroup_attach(cg, forked, &err_), "v2: attach a forked child");
    ok(procs_has("unified", name, forked), "v2: attach placed it in the cgroup2 group");
    release(go);

    ok_call(cgroup_set_frozen(cg, true, &err_), "v2: freeze");
    ok(strstr(read_group_file(buf, sizeof buf, "unified", name, "cgroup.events"), "frozen 1"),
       "v2: cgroup.events says frozen 1");
    ok_call(cgroup_set_frozen(cg, false, &err_), "v2: thaw");

    struct cgroup_stats st;
    ok_call(cgroup_read_stats(cg, &st, &err_), "v2: stats without controllers");
    is_u64(st.memory_peak_bytes, 0, "v2: no memory controller, memory_peak 0");
    ok_call(cgroup_kill(cg, &err_), "v2: cgroup.kill");
    ok(reap(cloned) == SIGKILL && reap(forked) == SIGKILL, "v2: both children died of SIGKILL");
    ok_call(cgroup_destroy(cg, &err_), "v2: destroy");
    ok(group_gone(name), "v2: no directory left");
}

/* ---------- native cgroup v2 (a pure v2 host with delegated controllers) ---------- */

/* /sys/fs/cgroup/hutch/NAME[/FILE] on a pure v2 host. */
static const char *v2_path(char *buf, size_t size, const char *name, const char *file)
{
    return group_path(buf, size, "", name, file);
}

static bool v2_exists(const char *name)
{
    char path[256];
    struct stat st;
    return stat(v2_path(path, sizeof path, name, NULL), &st) == 0;
}

static void test_native_v2_limits(struct cgroup_host *host)
{
    char name[64], buf[256], path[4096], want[256];
    group_name(name, sizeof name, "v2n-limits");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB, .pids = 64};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(host, NULL, name, &limits, CGROUP_OOM_GROUP, &cg, &err) < 0) {
        ok(0, "v2: create with limits: %s", err.msg);
        return;
    }
    ok(v2_exists(name), "v2: the group is /sys/fs/cgroup/hutch/%s", name);
    int dir_fd = cgroup_open_dir_fd(cg, &err);
    ok(dir_fd >= 0, "v2: has a clone3 fd");
    if (dir_fd >= 0)
        close(dir_fd);
    is_str(read_group_file(buf, sizeof buf, "", name, "memory.max"), "33554432\n",
           "v2: memory.max");
    is_str(read_group_file(buf, sizeof buf, "", name, "memory.swap.max"), "0\n",
           "v2: memory.swap.max 0 (no swap on top of the limit)");
    is_str(read_group_file(buf, sizeof buf, "", name, "memory.oom.group"), "1\n",
           "v2: memory.oom.group 1 with CGROUP_OOM_GROUP (an OOM kill takes the whole sandbox)");
    is_str(read_group_file(buf, sizeof buf, "", name, "pids.max"), "64\n", "v2: pids.max");
    read_group_file(buf, sizeof buf, "", "", "cgroup.subtree_control");
    ok(strstr(buf, "memory") && strstr(buf, "pids") && strstr(buf, "cpu"),
       "v2: hutch/ hands memory, pids and cpu down (%.*s)", (int)strcspn(buf, "\n"), buf);

    ok_call(cgroup_file_path(cg, "", "memory.max", path, sizeof path, &err_), "v2: \"\" resolves");
    is_str(path, v2_path(want, sizeof want, name, "memory.max"),
           "v2: to memory.max of the group's directory");
    ok(cgroup_file_path(cg, "memory", "memory.limit_in_bytes", path, sizeof path, &err) < 0 &&
           err.errnum == ENOENT,
       "v2: a v1 hierarchy is an error (%s)", err.msg);

    struct cgroup *dup = (struct cgroup *)1;
    ok(cgroup_create(host, NULL, name, &limits, 0, &dup, &err) < 0 && dup == NULL &&
           err.errnum == EEXIST,
       "v2: a second group with the same name is refused (%s)", err.msg);
    ok(v2_exists(name), "v2: the refused create left the first group alone");
    int fds[4];
    size_t n = 99;
    ok_call(cgroup_self_attach_open(cg, fds, COUNT(fds), &n, &err_), "v2: self_attach_open");
    is_u64(n, 0, "v2: no v1 hierarchy, so no tasks fd");
    struct cgroup_stats st;
    ok(cgroup_read_stats(cg, &st, &err) == 0 && st.pids_current == 0 && st.oom_kills == 0,
       "v2: stats of an empty group");
    ok_call(cgroup_destroy(cg, &err_), "v2: destroy");
    ok(!v2_exists(name), "v2: no directory left");
}

static void fork_ten_then_report(void)
{
    int made = 0, eagain = 0;
    for (int i = 0; i < 10; i++) {
        pid_t pid = fork();
        if (pid == 0)
            pause_forever();
        if (pid > 0)
            made++;
        else if (errno == EAGAIN)
            eagain++;
    }
    (*counter) = (uint64_t)made * 100 + (uint64_t)eagain;
    pause_forever();
}

static void test_native_v2_pids(struct cgroup_host *host)
{
    char name[64];
    group_name(name, sizeof name, "v2n-pids");
    struct cgroup_limits limits = {.pids = 4};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(host, NULL, name, &limits, 0, &cg, &err) < 0) {
        ok(0, "v2: create: %s", err.msg);
        return;
    }
    *counter = UINT64_MAX;
    int go;
    pid_t pid = spawn_waiting(&go, fork_ten_then_report);
    ok_call(cgroup_attach(cg, pid, &err_), "v2: attach");
    release(go);
    for (int i = 0; i < 400 && *counter == UINT64_MAX; i++)
        sleep_ms(5);
    is_u64(*counter, 3 * 100 + 7, "v2: pids.max 4: three forks made, seven refused with EAGAIN");
    ok(wait_pids_current(cg, 4), "v2: pids_current is 4");
    is_u64(read_group_key("", name, "pids.events", "max"), 7, "v2: pids.events counts 7 refusals");
    ok_call(cgroup_kill(cg, &err_), "v2: kill");
    ok(reap(pid) == SIGKILL, "v2: child died of SIGKILL");
    is_u64(reap_any_killed(3), 3, "v2: its three children died of SIGKILL");
    ok_call(cgroup_destroy(cg, &err_), "v2: destroy");
    ok(!v2_exists(name), "v2: no directory left");
}

/* Everything that does not depend on v1 files runs through the mode-generic tests too. */
static const char *const v2_used[] = {""};
static const char *const v2_unused[] = {"memory", "pids", "cpuacct", "freezer", "unified"};
static struct mode mode_v2_native = {
    .label = "v2",
    .open_as = CGROUP_MODE_DETECT,
    .used = v2_used,
    .n_used = COUNT(v2_used),
    .unused = v2_unused,
    .n_unused = COUNT(v2_unused),
    .v1_count = 0,
    .v1_freezer = false,
    .cgroup2 = "",
    .kind = CGROUP_MODE_V2,
    .host_fds = 1,
    .limits = true,
    .atomic_kill = true,
};

static void test_native_v2_oom(struct cgroup_host *host)
{
    char name[64];
    group_name(name, sizeof name, "v2n-oom");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(host, NULL, name, &limits, 0, &cg, &err) < 0) {
        ok(0, "v2: create: %s", err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, touch_64mib);
    ok_call(cgroup_attach(cg, pid, &err_), "v2: attach");
    release(go);
    ok(reap(pid) == SIGKILL, "v2: 64 MiB under a 32 MiB memory.max is killed");
    struct cgroup_stats st;
    ok_call(cgroup_read_stats(cg, &st, &err_), "v2: read stats");
    uint64_t events = read_group_key("", name, "memory.events", "oom_kill");
    ok(st.oom_kills >= 1 && st.oom_kills == events,
       "v2: oom_kills from memory.events (%" PRIu64 ", file says %" PRIu64 ")", st.oom_kills,
       events);
    uint64_t peak = read_group_u64("", name, "memory.peak");
    ok(st.memory_peak_bytes > 0 && st.memory_peak_bytes <= 32 * MIB && st.memory_peak_bytes == peak,
       "v2: 0 < memory_peak <= limit, from memory.peak (%" PRIu64 ", file %" PRIu64 ")",
       st.memory_peak_bytes, peak);
    ok_call(cgroup_destroy(cg, &err_), "v2: destroy");
    ok(!v2_exists(name), "v2: no directory left");
}

/* hybrid (or v1) forced on a pure v2 host: no v1 hierarchy is mounted, so the host does not
 * open, with a clear error, and nothing is left behind. */
static void test_native_v2_forced(int open_as, const char *label)
{
    char name[64];
    snprintf(name, sizeof name, "t%d-v2n-%s", (int)getpid(), label);
    struct cgroup_host *host = (struct cgroup_host *)1;
    err_t err = {0};
    int rc = cgroup_host_open(open_as, &host, &err);
    ok(rc < 0 && host == NULL && strstr(err.msg, "not mounted"), "v2 host, %s forced: refused (%s)",
       label, rc < 0 ? err.msg : "opened");
    if (rc == 0) {
        struct cgroup *cg = NULL;
        struct cgroup_limits limits = {.memory_bytes = 32 * MIB, .pids = 8};
        if (cgroup_create(host, NULL, name, &limits, 0, &cg, &err) == 0)
            cgroup_destroy(cg, NULL);
        cgroup_host_close(host);
    }
    ok(group_gone(name) && !v2_exists(name), "v2 host, %s forced: nothing left behind", label);
}

/* ---------- the host: opened once, the only fds the module holds ---------- */

/* Whether fd is some hierarchy's hutch/ directory, one of those the mode uses. */
static bool is_host_dir(const struct mode *m, int fd)
{
    char link[64], target[512], want[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        return false;
    target[n] = '\0';
    for (size_t i = 0; i < m->n_used; i++) {
        group_path(want, sizeof want, m->used[i], "", NULL);
        want[strlen(want) - 1] = '\0'; /* ".../hutch/" without its slash */
        if (strcmp(target, want) == 0)
            return true;
    }
    return false;
}

static void test_host(const struct mode *m)
{
    err_t err;
    is_u64(cgroup_host_mode(m->host), m->kind, "%s: cgroup_host_mode says %s", m->label,
           cgroup_mode_name(m->kind));
    int fds[CGROUP_HOST_MAX_FDS + 2];
    size_t n = cgroup_host_fds(m->host, fds, COUNT(fds));
    is_u64(n, m->host_fds, "%s: the host holds %zu fds, one hutch/ per hierarchy", m->label,
           m->host_fds);
    ok(n <= CGROUP_HOST_MAX_FDS, "%s: no more than CGROUP_HOST_MAX_FDS", m->label);
    bool cloexec = true, dirs = true;
    for (size_t i = 0; i < n; i++) {
        int flags = fcntl(fds[i], F_GETFD);
        cloexec = cloexec && flags >= 0 && (flags & FD_CLOEXEC);
        dirs = dirs && is_host_dir(m, fds[i]);
    }
    ok(cloexec, "%s: every host fd is close-on-exec", m->label);
    ok(dirs, "%s: each is the hutch/ directory of a hierarchy the mode uses", m->label);
    int one = -1;
    ok(cgroup_host_fds(m->host, &one, 1) == 1 && one == fds[0] &&
           cgroup_host_fds(m->host, fds, 0) == 0,
       "%s: cgroup_host_fds writes at most max", m->label);

    /* A host costs exactly its fds (a second one stands for a second process). */
    int before = count_fds();
    struct cgroup_host *second = NULL;
    ok_call(cgroup_host_open(m->open_as, &second, &err_), "%s: open a second host", m->label);
    is_u64((uint64_t)(count_fds() - before), n, "%s: opening a host costs its %zu fds", m->label,
           n);
    cgroup_host_close(second);
    is_u64((uint64_t)count_fds(), (uint64_t)before, "%s: closing it gives them back", m->label);

    /* 200 sandboxes' groups, each nested with an init below it: a group is a path, not an fd,
     * whatever is asked of it. */
    enum { GROUPS = 200 };
    static struct cgroup *top[GROUPS], *sub[GROUPS];
    char name[64];
    before = count_fds();
    size_t made = 0, asked = 0;
    for (size_t i = 0; i < GROUPS; i++) {
        char tag[16];
        snprintf(tag, sizeof tag, "many-%zu", i);
        mode_group_name(name, sizeof name, m, tag);
        top[i] = sub[i] = NULL;
        if (cgroup_create(m->host, NULL, name, NULL, CGROUP_NESTED, &top[i], &err) == 0)
            made++;
        else if (i == 0)
            printf("#   %s\n", err.msg);
        if (top[i] && cgroup_create(m->host, top[i], "init", NULL, 0, &sub[i], &err) == 0)
            made++;
        bool populated = true;
        uint64_t ns;
        if (sub[i] && cgroup_populated(top[i], &populated, NULL) == 0 && !populated &&
            cgroup_read_cpu_ns(sub[i], &ns, NULL) == 0)
            asked++;
    }
    is_u64(made, 2 * GROUPS, "%s: %d groups made, %d of them nested", m->label, 2 * GROUPS, GROUPS);
    is_u64(asked, GROUPS, "%s: each answers cgroup_populated and cgroup_read_cpu_ns", m->label);
    is_u64((uint64_t)count_fds(), (uint64_t)before, "%s: and the process's fd count rose by 0",
           m->label);
    bool there = true;
    for (size_t i = 0; i < GROUPS && there; i++) {
        char path[CGROUP_PATH_MAX + 1];
        snprintf(path, sizeof path, "%s/init", top[i] ? cgroup_path(top[i]) : "?");
        for (size_t h = 0; h < m->n_used; h++)
            there = there && group_exists(m->used[h], path);
    }
    ok(there, "%s: every NAME/init is in every hierarchy the mode uses", m->label);
    size_t removed = 0;
    bool gone = true;
    for (size_t i = 0; i < GROUPS; i++) {
        if (top[i]) {
            snprintf(name, sizeof name, "%s", cgroup_path(top[i]));
            removed += cgroup_remove(top[i], NULL) == 0;
            gone = gone && group_gone(name);
        }
        cgroup_free(sub[i]);
        cgroup_free(top[i]);
    }
    is_u64(removed, GROUPS, "%s: cgroup_remove of each parent", m->label);
    ok(gone, "%s: took its init with it, in every hierarchy", m->label);
    is_u64((uint64_t)count_fds(), (uint64_t)before, "%s: still no fd gained", m->label);

    /* What the module hands out is the caller's: a new fd per call, for it to close. */
    struct cgroup *cg = NULL;
    mode_group_name(name, sizeof name, m, "fds");
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    before = count_fds();
    int a = cgroup_open_dir_fd(cg, &err), b = cgroup_open_dir_fd(cg, NULL);
    int e = cgroup_open_events_fd(cg, NULL);
    if (m->cgroup2) {
        struct stat st;
        ok(a >= 0 && b >= 0 && a != b && fstat(a, &st) == 0 && S_ISDIR(st.st_mode),
           "%s: two cgroup_open_dir_fd calls give two directory fds", m->label);
        ok(e >= 0, "%s: cgroup_open_events_fd gives one more", m->label);
        int flags = a >= 0 ? fcntl(a, F_GETFD) : -1;
        ok(flags >= 0 && (flags & FD_CLOEXEC) && (fcntl(a, F_GETFL) & O_ACCMODE) == O_RDONLY,
           "%s: O_RDONLY (as clone3 wants it) and close-on-exec", m->label);
        is_u64((uint64_t)count_fds(), (uint64_t)before + 3, "%s: all three are new", m->label);
    } else {
        ok(a < 0 && b < 0 && err.errnum == ENOTSUP, "%s: no cgroup2 directory to open (%s)",
           m->label, err.msg);
        ok(e < 0, "%s: and no cgroup.events", m->label);
        is_u64((uint64_t)count_fds(), (uint64_t)before, "%s: and no fd opened", m->label);
    }
    for (int *fd = (int[]){a, b, e, -2}; *fd != -2; fd++)
        if (*fd >= 0)
            close(*fd);
    is_u64((uint64_t)count_fds(), (uint64_t)before, "%s: the caller closed them all", m->label);
    bool host_ok = true;
    for (size_t i = 0; i < n; i++)
        host_ok = host_ok && fcntl(fds[i], F_GETFD) >= 0;
    ok(host_ok, "%s: and the host's own fds are untouched", m->label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
}

/* ---------- nested groups ---------- */

/* Directories directly below hutch/PATH in one hierarchy. */
static size_t count_subdirs(const char *hier, const char *path)
{
    char dir[256];
    DIR *d = opendir(group_path(dir, sizeof dir, hier, path, NULL));
    size_t n = 0;
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_type == DT_DIR && de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void burn_200ms_then_pause(void)
{
    burn_200ms();
    *counter = 1;
    pause_forever();
}

/* Until the shared counter is nonzero (a child has started counting). */
static bool wait_counting(unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    while (*counter == 0) {
        if (now_ms() >= deadline)
            return false;
        sleep_ms(1);
    }
    return true;
}

static bool wait_counter(uint64_t want, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    while (*counter != want) {
        if (now_ms() >= deadline)
            return false;
        sleep_ms(1);
    }
    return true;
}

/* Names below a parent: refused before anything is made, and nothing is. */
static void test_nested_refusals(const struct mode *m, struct cgroup *parent)
{
    char long_name[80];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    const char *bad[] = {"", ".", "..", ".x", "a/b", "a b", long_name};
    bool refused = true;
    for (size_t i = 0; i < COUNT(bad); i++) {
        struct cgroup *cg = (struct cgroup *)1;
        err_t err = {0};
        refused = refused && cgroup_create(m->host, parent, bad[i], NULL, 0, &cg, &err) < 0 &&
                  cg == NULL && err.errnum == EINVAL;
    }
    ok(refused, "%s: bad child names refused (\"\", \".\", \"..\", \".x\", \"a/b\", 65 chars)",
       m->label);
    bool none = true;
    for (size_t i = 0; i < m->n_used; i++)
        none = none && count_subdirs(m->used[i], cgroup_path(parent)) == 2;
    ok(none, "%s: the parent still has only its two children", m->label);

    /* A group made without CGROUP_NESTED holds no groups. */
    char flat_name[64], path[CGROUP_PATH_MAX + 16];
    mode_group_name(flat_name, sizeof flat_name, m, "flat");
    struct cgroup *flat = NULL, *child = (struct cgroup *)1;
    err_t err = {0};
    if (cgroup_create(m->host, NULL, flat_name, NULL, 0, &flat, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    ok(cgroup_create(m->host, flat, "init", NULL, 0, &child, &err) < 0 && child == NULL &&
           err.errnum == EINVAL && strstr(err.msg, "CGROUP_NESTED"),
       "%s: a parent without CGROUP_NESTED refuses children (%s)", m->label, err.msg);
    snprintf(path, sizeof path, "%s/init", flat_name);
    ok(group_gone(path), "%s: and nothing was made below it", m->label);
    ok_call(cgroup_destroy(flat, &err_), "%s: destroy it", m->label);

    /* Paths are bounded by CGROUP_PATH_MAX: 64 + 1 + 64 + 1 + 30 fits exactly, 31 does not. */
    char a[CGROUP_NAME_MAX + 1], b[CGROUP_NAME_MAX + 1], c[CGROUP_NAME_MAX + 1];
    int prefix = snprintf(a, sizeof a, "t%d-%s-", (int)getpid(), m->label);
    memset(a + prefix, 'L', (size_t)(CGROUP_NAME_MAX - prefix));
    a[CGROUP_NAME_MAX] = '\0';
    memset(b, 'M', CGROUP_NAME_MAX);
    b[CGROUP_NAME_MAX] = '\0';
    struct cgroup *la = NULL, *lb = NULL, *lc = NULL;
    if (cgroup_create(m->host, NULL, a, NULL, CGROUP_NESTED, &la, &err) < 0 ||
        cgroup_create(m->host, la, b, NULL, CGROUP_NESTED, &lb, &err) < 0) {
        ok(0, "%s: two 64-character levels: %s", m->label, err.msg);
    } else {
        size_t room = CGROUP_PATH_MAX - strlen(cgroup_path(lb)) - 1;
        memset(c, 'N', room + 1);
        c[room + 1] = '\0';
        struct cgroup *too = (struct cgroup *)1;
        ok(cgroup_create(m->host, lb, c, NULL, 0, &too, &err) < 0 && too == NULL &&
               err.errnum == ENAMETOOLONG,
           "%s: a path of %d characters is refused (%s)", m->label, CGROUP_PATH_MAX + 1, err.msg);
        c[room] = '\0';
        ok_call(cgroup_create(m->host, lb, c, NULL, 0, &lc, &err_),
                "%s: one of CGROUP_PATH_MAX (%d) is made", m->label, CGROUP_PATH_MAX);
        ok(lc && strlen(cgroup_path(lc)) == CGROUP_PATH_MAX &&
               group_exists(m->used[0], cgroup_path(lc)),
           "%s: and exists", m->label);
    }
    if (la)
        ok_call(cgroup_remove(la, &err_), "%s: cgroup_remove of the top removes all three levels",
                m->label);
    ok(group_gone(a), "%s: nothing of them is left", m->label);
    cgroup_free(lc);
    cgroup_free(lb);
    cgroup_free(la);

    /* cgroup_open takes paths from outside: each level a name, bounded in length and depth. */
    char longest[CGROUP_PATH_MAX + 8];
    memset(longest, 'x', CGROUP_PATH_MAX + 1);
    longest[CGROUP_PATH_MAX + 1] = '\0';
    const char *bad_paths[] = {"",      "/a",   "a/",  "a//b",      "a/../b",
                               "a/./b", "a/.b", "a b", "a/b/c/d/e", longest};
    refused = true;
    for (size_t i = 0; i < COUNT(bad_paths); i++) {
        struct cgroup *cg = (struct cgroup *)1;
        bool r = cgroup_open(m->host, bad_paths[i], 0, &cg, &err) < 0 && cg == NULL &&
                 err.errnum == EINVAL;
        if (!r)
            printf("#   cgroup_open(\"%.20s\") was not refused\n", bad_paths[i]);
        refused = refused && r;
        if (!r && cg != (struct cgroup *)1)
            cgroup_free(cg);
    }
    ok(refused,
       "%s: cgroup_open refuses bad paths (\"/a\", \"a//b\", \"..\", 5 levels, %d "
       "characters)",
       m->label, CGROUP_PATH_MAX + 1);
}

static void test_nested(const struct mode *m)
{
    char name[64], init_path[96], cmd_path[96], buf[256];
    mode_group_name(name, sizeof name, m, "nest");
    snprintf(init_path, sizeof init_path, "%s/init", name);
    snprintf(cmd_path, sizeof cmd_path, "%s/cmd-1", name);
    struct cgroup *parent = NULL, *init = NULL, *cmd = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, CGROUP_NESTED, &parent, &err) < 0) {
        ok(0, "%s: create a nested parent: %s", m->label, err.msg);
        return;
    }
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB, .pids = 16};
    ok_call(cgroup_create(m->host, parent, "init", NULL, 0, &init, &err_), "%s: create PARENT/init",
            m->label);
    ok_call(cgroup_create(m->host, parent, "cmd-1", m->limits ? &limits : NULL, CGROUP_OOM_GROUP,
                          &cmd, &err_),
            "%s: create PARENT/cmd-1 (with limits where the mode has them, OOM group)", m->label);
    if (!init || !cmd) {
        cgroup_free(init);
        cgroup_free(cmd);
        cgroup_destroy(parent, NULL);
        return;
    }
    is_str(cgroup_path(init), init_path, "%s: cgroup_path is PARENT/init", m->label);
    is_str(cgroup_path(cmd), cmd_path, "%s: and PARENT/cmd-1", m->label);
    check_layout(m, init_path);
    check_layout(m, cmd_path);
    if (m->limits && m->kind != CGROUP_MODE_V2) {
        is_str(read_group_file(buf, sizeof buf, "memory", cmd_path, "memory.limit_in_bytes"),
               "33554432\n", "%s: the child's own memory.limit_in_bytes", m->label);
        is_str(read_group_file(buf, sizeof buf, "pids", cmd_path, "pids.max"), "16\n",
               "%s: the child's own pids.max", m->label);
        is_str(read_group_file(buf, sizeof buf, "pids", init_path, "pids.max"), "max\n",
               "%s: its sibling has none", m->label);
    } else if (m->limits) {
        is_str(read_group_file(buf, sizeof buf, "", cmd_path, "memory.max"), "33554432\n",
               "%s: the child's own memory.max", m->label);
        is_str(read_group_file(buf, sizeof buf, "", cmd_path, "pids.max"), "16\n",
               "%s: the child's own pids.max", m->label);
        is_str(read_group_file(buf, sizeof buf, "", cmd_path, "memory.oom.group"), "1\n",
               "%s: CGROUP_OOM_GROUP wrote memory.oom.group", m->label);
        is_str(read_group_file(buf, sizeof buf, "", init_path, "memory.oom.group"), "0\n",
               "%s: its sibling without the flag has memory.oom.group 0", m->label);
        read_group_file(buf, sizeof buf, "", name, "cgroup.subtree_control");
        ok(strstr(buf, "memory") && strstr(buf, "pids") && strstr(buf, "cpu"),
           "%s: the parent hands memory, pids and cpu down (%.*s)", m->label,
           (int)strcspn(buf, "\n"), buf);
    } else {
        struct cgroup *limited = (struct cgroup *)1;
        char path[96];
        ok(cgroup_create(m->host, parent, "cmd-2", &limits, 0, &limited, &err) < 0 &&
               limited == NULL && strstr(err.msg, "'memory'"),
           "%s: a child with a memory limit is refused, naming memory (%s)", m->label, err.msg);
        snprintf(path, sizeof path, "%s/cmd-2", name);
        ok(group_gone(path), "%s: and is not made", m->label);
    }
    test_nested_refusals(m, parent);

    /* Processes in the children: each counted in its own group, all of them in the parent. */
    *counter = 0;
    int go_cmd, go_init;
    pid_t burner = spawn_waiting(&go_cmd, burn_200ms_then_pause);
    pid_t idler = spawn_waiting(&go_init, pause_forever);
    ok_call(cgroup_attach(cmd, burner, &err_), "%s: attach a burner to cmd-1", m->label);
    ok_call(cgroup_attach(init, idler, &err_), "%s: attach an idler to init", m->label);
    release(go_cmd);
    release(go_init);
    bool placed = true;
    for (size_t i = 0; i < m->n_used; i++)
        placed = placed && procs_has(m->used[i], cmd_path, burner) &&
                 procs_has(m->used[i], init_path, idler) && !procs_has(m->used[i], name, burner) &&
                 !procs_has(m->used[i], name, idler);
    ok(placed, "%s: each child is in its own group, in every hierarchy, not in the parent's",
       m->label);
    ok(wait_counter(1, 5000), "%s: the burner burned 200 ms", m->label);
    bool p_parent = false, p_init = false, p_cmd = false;
    ok(cgroup_populated(parent, &p_parent, NULL) == 0 && p_parent &&
           cgroup_populated(init, &p_init, NULL) == 0 && p_init &&
           cgroup_populated(cmd, &p_cmd, NULL) == 0 && p_cmd,
       "%s: the parent and both children are populated", m->label);
    uint64_t cpu_cmd = 0, cpu_init = 0, cpu_parent = 0;
    ok(cgroup_read_cpu_ns(cmd, &cpu_cmd, NULL) == 0 &&
           cgroup_read_cpu_ns(init, &cpu_init, NULL) == 0 &&
           cgroup_read_cpu_ns(parent, &cpu_parent, NULL) == 0,
       "%s: read CPU time of each", m->label);
    ok(cpu_cmd >= 150000000u && cpu_init < 100000000u,
       "%s: CPU time is per child (cmd-1 %" PRIu64 " ns, init %" PRIu64 " ns)", m->label, cpu_cmd,
       cpu_init);
    ok(cpu_parent >= cpu_cmd, "%s: the parent counts its children (%" PRIu64 " ns)", m->label,
       cpu_parent);
    if (m->limits) {
        struct cgroup_stats st_cmd, st_parent;
        ok(cgroup_read_stats(cmd, &st_cmd, NULL) == 0 &&
               cgroup_read_stats(parent, &st_parent, NULL) == 0 && st_cmd.pids_current == 1 &&
               st_parent.pids_current == 2,
           "%s: pids_current 1 in cmd-1, 2 in the parent", m->label);
    }

    /* Not removed while anything below it runs; killing it takes its children's processes. */
    int rc = cgroup_remove(parent, &err);
    ok(rc < 0 && err.errnum == EBUSY, "%s: cgroup_remove of a busy parent is EBUSY (%s)", m->label,
       rc < 0 ? err.msg : "removed");
    bool intact = !cgroup_removed(parent) && group_exists(m->used[0], name);
    for (size_t i = 0; i < m->n_used; i++)
        intact =
            intact && group_exists(m->used[i], cmd_path) && procs_has(m->used[i], cmd_path, burner);
    ok(intact, "%s: and leaves the busy child and its member where they were", m->label);
    ok_call(cgroup_kill(parent, &err_), "%s: cgroup_kill of the parent", m->label);
    ok(reap_within(burner, 2000) == SIGKILL && reap_within(idler, 2000) == SIGKILL,
       "%s: both children's processes died of SIGKILL", m->label);
    ok(wait_populated(init, false, 2000) && wait_populated(cmd, false, 2000),
       "%s: both children are empty", m->label);
    ok_call(remove_within(parent, 2000, &err_), "%s: cgroup_remove of the parent", m->label);
    ok(cgroup_removed(parent), "%s: cgroup_removed says so", m->label);
    ok(group_gone(init_path) && group_gone(cmd_path) && group_gone(name),
       "%s: its children went first, then it, in every hierarchy", m->label);
    cgroup_free(init);
    cgroup_free(cmd);
    cgroup_free(parent);
}

/* On a pure v2 host with controllers: the no-internal-process rule, and memory, OOM and CPU
 * accounted per child. */
static void touch_8mib_burn_then_pause(void)
{
    size_t size = 8 * MIB;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(2);
    for (size_t i = 0; i < size; i += 4096)
        p[i] = 1;
    burn_200ms();
    *counter = 1;
    pause_forever();
}

static void test_native_v2_nested(const struct mode *m)
{
    char name[64], one[96], two[96], buf[256];
    mode_group_name(name, sizeof name, m, "nest-v2");
    snprintf(one, sizeof one, "%s/cmd-1", name);
    snprintf(two, sizeof two, "%s/cmd-2", name);
    struct cgroup_limits sandbox = {.memory_bytes = 256 * MIB, .pids = 32};
    struct cgroup_limits small = {.memory_bytes = 32 * MIB}, big = {.memory_bytes = 128 * MIB};
    struct cgroup *parent = NULL, *c1 = NULL, *c2 = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, &sandbox, CGROUP_NESTED, &parent, &err) < 0 ||
        cgroup_create(m->host, parent, "cmd-1", &small, CGROUP_OOM_GROUP, &c1, &err) < 0 ||
        cgroup_create(m->host, parent, "cmd-2", &big, 0, &c2, &err) < 0) {
        ok(0, "v2: nested create: %s", err.msg);
        cgroup_free(c1);
        cgroup_free(c2);
        cgroup_destroy(parent, NULL);
        return;
    }
    read_group_file(buf, sizeof buf, "", name, "cgroup.subtree_control");
    ok(strstr(buf, "memory") && strstr(buf, "pids") && strstr(buf, "cpu"),
       "v2: the sandbox's subtree_control hands memory, pids and cpu down (%.*s)",
       (int)strcspn(buf, "\n"), buf);
    read_group_file(buf, sizeof buf, "", one, "cgroup.controllers");
    ok(strstr(buf, "memory") && strstr(buf, "pids") && strstr(buf, "cpu"),
       "v2: cmd-1 has them (%.*s)", (int)strcspn(buf, "\n"), buf);
    is_str(read_group_file(buf, sizeof buf, "", name, "memory.max"), "268435456\n",
           "v2: the sandbox's memory.max");
    is_str(read_group_file(buf, sizeof buf, "", one, "memory.max"), "33554432\n",
           "v2: cmd-1's memory.max");
    is_str(read_group_file(buf, sizeof buf, "", two, "memory.max"), "134217728\n",
           "v2: cmd-2's memory.max");
    is_str(read_group_file(buf, sizeof buf, "", one, "memory.oom.group"), "1\n",
           "v2: cmd-1 (CGROUP_OOM_GROUP) has memory.oom.group 1");
    is_str(read_group_file(buf, sizeof buf, "", two, "memory.oom.group"), "0\n",
           "v2: cmd-2 has memory.oom.group 0");

    /* A parent that hands controllers down holds no process itself. */
    int go_idle, go_oom, go_two;
    pid_t idler = spawn_waiting(&go_idle, pause_forever);
    ok(cgroup_attach(parent, idler, &err) < 0,
       "v2: a process cannot join the nested parent itself (%s)", err.msg);
    ok_call(cgroup_attach(c1, idler, &err_), "v2: it joins cmd-1 instead");
    release(go_idle);
    *counter = 0;
    pid_t worker = spawn_waiting(&go_two, touch_8mib_burn_then_pause);
    ok_call(cgroup_attach(c2, worker, &err_), "v2: a worker joins cmd-2");
    release(go_two);
    ok(wait_counter(1, 20000), "v2: the worker touched 8 MiB and burned 200 ms");
    pid_t hog = spawn_waiting(&go_oom, touch_64mib);
    ok_call(cgroup_attach(c1, hog, &err_), "v2: a 64 MiB hog joins cmd-1 (32 MiB)");
    release(go_oom);
    ok(reap_within(hog, 20000) == SIGKILL, "v2: the hog is OOM-killed");
    ok(reap_within(idler, 5000) == SIGKILL,
       "v2: and memory.oom.group took cmd-1's other process with it");
    ok(kill(worker, 0) == 0 && waitpid(worker, NULL, WNOHANG) == 0, "v2: cmd-2's worker lives on");

    struct cgroup_stats s1, s2, sp;
    ok(cgroup_read_stats(c1, &s1, &err) == 0 && cgroup_read_stats(c2, &s2, &err) == 0 &&
           cgroup_read_stats(parent, &sp, &err) == 0,
       "v2: read each group's stats");
    ok(s1.oom_kills >= 1 && s2.oom_kills == 0,
       "v2: oom_kill is per child (cmd-1 %" PRIu64 ", cmd-2 %" PRIu64 ")", s1.oom_kills,
       s2.oom_kills);
    ok(s1.memory_peak_bytes > 0 && s1.memory_peak_bytes <= 32 * MIB &&
           s2.memory_peak_bytes >= 8 * MIB && s2.memory_peak_bytes < 32 * MIB,
       "v2: memory.peak is per child (cmd-1 %" PRIu64 ", cmd-2 %" PRIu64 ")", s1.memory_peak_bytes,
       s2.memory_peak_bytes);
    ok(s2.cpu_usage_ns >= 150000000u && sp.cpu_usage_ns >= s1.cpu_usage_ns + s2.cpu_usage_ns,
       "v2: CPU is per child, the parent counts both (cmd-1 %" PRIu64 ", cmd-2 %" PRIu64
       ", sandbox %" PRIu64 ")",
       s1.cpu_usage_ns, s2.cpu_usage_ns, sp.cpu_usage_ns);
    ok(s2.pids_current == 1 && sp.pids_current == 1, "v2: pids_current 1 in cmd-2 and the sandbox");
    ok_call(cgroup_kill(parent, &err_), "v2: kill the sandbox");
    ok(reap_within(worker, 2000) == SIGKILL, "v2: the worker died of SIGKILL");
    ok_call(remove_within(parent, 2000, &err_), "v2: remove the sandbox");
    ok(!v2_exists(one) && !v2_exists(two) && !v2_exists(name), "v2: no directory left");
    cgroup_free(c1);
    cgroup_free(c2);
    cgroup_free(parent);
}

/* ---------- the non-blocking steps ---------- */

/* Touches 128 MiB in small pages, then says so and waits: its exit (the kernel freeing them)
 * takes milliseconds, far longer than a read of cgroup.events. */
static void hold_128mib_then_pause(void)
{
    size_t size = 128 * MIB;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(2);
    madvise(p, size, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < size; i += 4096)
        p[i] = 1;
    *counter = 1;
    pause_forever();
}

static void test_kill_start(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "kill-start");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    *counter = 0;
    int go;
    pid_t pid = spawn_waiting(&go, hold_128mib_then_pause);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    ok(wait_counter(1, 20000), "%s: the child holds 128 MiB", m->label);
    bool atomic = !m->atomic_kill, populated = false;
    uint64_t t0 = now_ms();
    int rc = cgroup_kill_start(cg, &atomic, &err);
    bool read_ok = cgroup_populated(cg, &populated, NULL) == 0;
    uint64_t t1 = now_ms();
    ok(rc == 0, "%s: cgroup_kill_start (%s)", m->label, rc == 0 ? "ok" : err.msg);
    ok(atomic == m->atomic_kill, "%s: the kill is %s", m->label,
       m->atomic_kill ? "atomic (cgroup.kill)" : "not atomic (freeze, SIGKILL each, thaw)");
    ok(read_ok && populated,
       "%s: it returned without waiting: still populated right after (%" PRIu64 " ms)", m->label,
       t1 - t0);
    ok(wait_populated(cg, false, 5000), "%s: and empty later, when the child has exited", m->label);
    ok(reap_within(pid, 2000) == SIGKILL, "%s: the child died of SIGKILL", m->label);

    /* The blocking cgroup_kill waits for the same exit asleep, in poll() on cgroup.events (which
     * must be read again after each wake-up, or it wakes at once forever): a busy wait would cost
     * as much CPU as the exit takes. On v1 it sleeps in short steps, but each check repeats the
     * freezer-based kill, and each freezer.state write costs milliseconds of kernel time (6.1+
     * flips a static key per freeze and thaw): there the figure is only shown. */
    *counter = 0;
    pid = spawn_waiting(&go, hold_128mib_then_pause);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach another", m->label);
    release(go);
    ok(wait_counter(1, 20000), "%s: it holds 128 MiB", m->label);
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    uint64_t w0 = now_ns();
    ok_call(cgroup_kill(cg, &err_), "%s: cgroup_kill", m->label);
    uint64_t wall = now_ns() - w0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    uint64_t cpu = (uint64_t)(cpu1.tv_sec - cpu0.tv_sec) * 1000000000u +
                   (uint64_t)(cpu1.tv_nsec - cpu0.tv_nsec);
    if (m->cgroup2)
        ok(wall < 2000000u || cpu * 2 < wall,
           "%s: it waited asleep (%" PRIu64 " us of CPU in %" PRIu64 " us)", m->label, cpu / 1000,
           wall / 1000);
    else
        printf("# %s: cgroup_kill took %" PRIu64 " us of CPU in %" PRIu64 " us\n", m->label,
               cpu / 1000, wall / 1000);
    populated = true;
    ok(cgroup_populated(cg, &populated, NULL) == 0 && !populated,
       "%s: and returned when the group was empty", m->label);
    ok(reap_within(pid, 2000) == SIGKILL, "%s: that child died of SIGKILL", m->label);
    ok_call(remove_within(cg, 2000, &err_), "%s: remove", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
    cgroup_free(cg);
}

/* A frozen group is killed: a frozen task keeps a v1 SIGKILL pending until thawed, which hung
 * destroy before. Blocking and non-blocking, every process of a tree. */
static void test_kill_frozen(const struct mode *m)
{
    for (int blocking = 1; blocking >= 0; blocking--) {
        const char *how = blocking ? "cgroup_kill" : "one cgroup_kill_start";
        char name[64];
        mode_group_name(name, sizeof name, m, blocking ? "kill-frozen" : "kill-frozen-step");
        struct cgroup_limits limits = {.pids = m->limits ? 16 : 0};
        struct cgroup *cg = NULL;
        err_t err;
        if (cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err) < 0) {
            ok(0, "%s: create: %s", m->label, err.msg);
            return;
        }
        int go;
        pid_t pid = spawn_waiting(&go, fork_three_then_pause);
        ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
        release(go);
        ok(wait_members(m, cg, name, 4), "%s: a tree of four", m->label);
        ok_call(cgroup_set_frozen(cg, true, &err_), "%s: freeze it", m->label);
        bool frozen = false;
        ok(cgroup_frozen(cg, &frozen, NULL) == 0 && frozen, "%s: it is frozen", m->label);
        if (blocking) {
            ok_call(cgroup_kill(cg, &err_), "%s: cgroup_kill of the frozen tree returns", m->label);
        } else {
            /* A frozen tree cannot fork: one kill_start must take all of it. */
            ok_call(cgroup_kill_start(cg, NULL, &err_), "%s: cgroup_kill_start of the frozen tree",
                    m->label);
            ok(wait_populated(cg, false, 5000), "%s: it empties with no second kill_start",
               m->label);
        }
        ok(reap_within(pid, 2000) == SIGKILL, "%s: %s: the frozen child died of SIGKILL", m->label,
           how);
        int killed = reap_all_within(2000);
        is_u64((uint64_t)killed, 3, "%s: %s: its three frozen children too", m->label, how);
        if (killed < 0) { /* clean up what a failed kill left */
            cgroup_kill(cg, NULL);
            reap_all_within(2000);
        }
        ok_call(remove_within(cg, 2000, &err_), "%s: remove", m->label);
        ok(group_gone(name), "%s: no directory left", m->label);
        cgroup_free(cg);
    }
}

/* Whether fd reports POLLPRI within ms. */
static bool poll_pri(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLPRI};
    return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLPRI);
}

/* Reading cgroup.events again is what re-arms its POLLPRI; the text read goes to buf. */
static const char *rearm(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void test_events(const struct mode *m)
{
    char name[64], buf[256];
    mode_group_name(name, sizeof name, m, "events");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, CGROUP_NESTED, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    if (!m->cgroup2) {
        int before = count_fds();
        int fd = cgroup_open_events_fd(cg, &err);
        ok(fd < 0 && err.errnum == ENOTSUP, "%s: no cgroup.events on v1: ENOTSUP (%s)", m->label,
           err.msg);
        if (fd >= 0)
            close(fd);
        is_u64((uint64_t)count_fds(), (uint64_t)before, "%s: and no fd opened", m->label);
        ok_call(cgroup_destroy(cg, &err_), "%s: destroy", m->label);
        return;
    }
    struct cgroup *child = NULL;
    ok_call(cgroup_create(m->host, cg, "cmd-1", NULL, 0, &child, &err_), "%s: create a child",
            m->label);
    *counter = 0;
    int go;
    pid_t pid = spawn_waiting(&go, count_forever);
    if (child)
        ok_call(cgroup_attach(child, pid, &err_), "%s: attach a counter to the child", m->label);
    release(go);
    ok(wait_counting(2000), "%s: the counter runs", m->label);

    /* Events of the parent: its subtree freezes, thaws and empties. */
    int fd = cgroup_open_events_fd(cg, &err);
    ok(fd >= 0, "%s: cgroup_open_events_fd (%s)", m->label, fd >= 0 ? "ok" : err.msg);
    if (fd < 0) {
        kill(pid, SIGKILL);
        reap(pid);
        cgroup_free(child);
        cgroup_destroy(cg, NULL);
        return;
    }
    ok(!poll_pri(fd, 0), "%s: nothing pending right after the open (it comes armed)", m->label);
    ok_call(cgroup_freeze_start(cg, true, &err_), "%s: cgroup_freeze_start", m->label);
    ok(poll_pri(fd, 2000), "%s: POLLPRI when the group has frozen", m->label);
    ok(strstr(rearm(fd, buf, sizeof buf), "frozen 1") != NULL, "%s: cgroup.events says frozen 1",
       m->label);
    bool frozen = false;
    ok(cgroup_frozen(cg, &frozen, NULL) == 0 && frozen, "%s: and so does cgroup_frozen", m->label);
    ok(!poll_pri(fd, 0), "%s: the read re-armed it", m->label);
    ok_call(cgroup_freeze_start(cg, false, &err_), "%s: thaw", m->label);
    ok(poll_pri(fd, 2000), "%s: POLLPRI when it has thawed", m->label);
    ok(strstr(rearm(fd, buf, sizeof buf), "frozen 0") != NULL, "%s: cgroup.events says frozen 0",
       m->label);
    /* The last process below it is killed directly, not through the cgroup: the parent's
     * populated changes all the same. */
    kill(pid, SIGKILL);
    ok(poll_pri(fd, 2000), "%s: POLLPRI when the last process below it has exited", m->label);
    ok(strstr(rearm(fd, buf, sizeof buf), "populated 0") != NULL,
       "%s: cgroup.events says populated 0", m->label);
    bool populated = true;
    ok(cgroup_populated(cg, &populated, NULL) == 0 && !populated,
       "%s: and so does cgroup_populated", m->label);
    ok(reap(pid) == SIGKILL, "%s: the child died of SIGKILL", m->label);
    close(fd);

    /* A child's own events fd, when cgroup_kill_start empties it. */
    pid = spawn_waiting(&go, pause_forever);
    if (child)
        cgroup_attach(child, pid, NULL);
    release(go);
    ok(child && wait_populated(child, true, 2000), "%s: a new member in the child", m->label);
    fd = child ? cgroup_open_events_fd(child, &err) : -1;
    ok(fd >= 0 && !poll_pri(fd, 0) && strstr(rearm(fd, buf, sizeof buf), "populated 1"),
       "%s: the child's events fd: populated 1, nothing pending", m->label);
    ok_call(cgroup_kill_start(child ? child : cg, NULL, &err_), "%s: cgroup_kill_start", m->label);
    ok(fd >= 0 && poll_pri(fd, 2000), "%s: the child's events fd: POLLPRI when it empties",
       m->label);
    if (fd >= 0) {
        ok(strstr(rearm(fd, buf, sizeof buf), "populated 0") != NULL, "%s: populated 0 there too",
           m->label);
        close(fd);
    }
    ok(reap_within(pid, 2000) == SIGKILL, "%s: the member died of SIGKILL", m->label);
    cgroup_free(child);
    ok_call(remove_within(cg, 2000, &err_), "%s: remove", m->label);
    ok(group_gone(name), "%s: no directory left", m->label);
    cgroup_free(cg);
}

static void test_remove_busy(const struct mode *m)
{
    char name[64];
    mode_group_name(name, sizeof name, m, "busy");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, 0, &cg, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, pause_forever);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
    release(go);
    uint64_t t0 = now_ms();
    int rc = cgroup_remove(cg, &err);
    uint64_t took = now_ms() - t0;
    ok(rc == -1 && err.errnum == EBUSY, "%s: cgroup_remove of a populated group: -1 EBUSY (%s)",
       m->label, rc < 0 ? err.msg : "removed");
    ok(strstr(err.msg, name) != NULL, "%s: the error names the group", m->label);
    ok(took < 500, "%s: at once, no waiting (%" PRIu64 " ms)", m->label, took);
    ok(!cgroup_removed(cg), "%s: cgroup_removed says it is not", m->label);
    check_layout(m, name);
    bool member = true;
    for (size_t i = 0; i < m->n_used; i++)
        member = member && procs_has(m->used[i], name, pid);
    ok(member, "%s: the member is still in every hierarchy", m->label);
    ok_call(cgroup_kill(cg, &err_), "%s: kill", m->label);
    ok(reap(pid) == SIGKILL, "%s: the member died of SIGKILL", m->label);
    ok_call(remove_within(cg, 2000, &err_), "%s: now cgroup_remove succeeds", m->label);
    ok(cgroup_removed(cg) && group_gone(name), "%s: and the group is gone", m->label);
    ok_call(cgroup_remove(cg, &err_), "%s: a second cgroup_remove is a no-op", m->label);
    cgroup_free(cg);
}

/* A tree that keeps forking while it is killed: a churner forks short-lived children without
 * end, one child double-forks and calls setsid (a daemon, re-parented to us), another grows
 * the tree by one process every 2 ms. At most about 30 processes at once. */
static void churn(void)
{
    for (;;) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
}

static void grow(void)
{
    for (int i = 0; i < 20; i++) {
        if (fork() == 0)
            pause_forever();
        sleep_ms(2);
    }
    pause_forever();
}

static void forking_tree(void)
{
    pid_t middle = fork();
    if (middle == 0) {
        if (fork() == 0) {
            setsid();
            if (fork() == 0)
                churn();
            churn();
        }
        _exit(0);
    }
    if (middle > 0)
        waitpid(middle, NULL, 0);
    if (fork() == 0)
        grow();
    for (int i = 0; i < 2; i++)
        if (fork() == 0)
            churn();
    *counter = 1;
    churn();
}

static void test_kill_forking_tree(const struct mode *m)
{
    for (int blocking = 0; blocking <= 1; blocking++) {
        char name[64];
        mode_group_name(name, sizeof name, m, blocking ? "bomb-kill" : "bomb-steps");
        struct cgroup_limits limits = {.pids = m->limits ? 64 : 0};
        struct cgroup *cg = NULL;
        err_t err;
        if (cgroup_create(m->host, NULL, name, &limits, 0, &cg, &err) < 0) {
            ok(0, "%s: create: %s", m->label, err.msg);
            return;
        }
        *counter = 0;
        int go;
        pid_t pid = spawn_waiting(&go, forking_tree);
        ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", m->label);
        release(go);
        ok(wait_counter(1, 5000), "%s: the tree is forking", m->label);
        sleep_ms(20); /* let it grow */
        bool populated = true;
        if (blocking) {
            ok_call(cgroup_kill(cg, &err_), "%s: cgroup_kill of the forking tree", m->label);
            ok(cgroup_populated(cg, &populated, NULL) == 0 && !populated,
               "%s: returns only when the group is empty", m->label);
        } else {
            uint64_t deadline = now_ms() + 5000;
            int calls = 0;
            do {
                if (cgroup_kill_start(cg, NULL, &err) < 0 ||
                    cgroup_populated(cg, &populated, &err) < 0) {
                    printf("#   %s\n", err.msg);
                    break;
                }
                calls++;
                if (populated)
                    sleep_ms(1);
            } while (populated && now_ms() < deadline);
            ok(!populated,
               "%s: cgroup_kill_start, again while cgroup_populated says so, empties it (%d "
               "call%s)",
               m->label, calls, calls == 1 ? "" : "s");
        }
        int killed = reap_all_within(5000);
        ok(killed >= 5,
           "%s: every process of the tree is gone, the daemonised one too (%d "
           "SIGKILLed)",
           m->label, killed);
        if (killed < 0) {
            cgroup_kill(cg, NULL);
            reap_all_within(5000);
        }
        ok_call(remove_within(cg, 2000, &err_), "%s: remove", m->label);
        ok(group_gone(name), "%s: no directory left", m->label);
        cgroup_free(cg);
    }
}

/* ---------- cgroup_open: a group made by another process ---------- */

static void test_reopen(const struct mode *m)
{
    char name[64], path[4096], want[256];
    mode_group_name(name, sizeof name, m, "reopen");
    struct cgroup_host *second = NULL;
    err_t err;
    /* A second host is what a restarted daemon would open. */
    if (cgroup_host_open(m->open_as, &second, &err) < 0) {
        ok(0, "%s: open a second host: %s", m->label, err.msg);
        return;
    }
    struct cgroup_limits limits = {.pids = m->limits ? 16 : 0};
    struct cgroup *made = NULL, *cg = NULL;
    if (cgroup_create(m->host, NULL, name, &limits, 0, &made, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        cgroup_host_close(second);
        return;
    }
    *counter = 0;
    int go;
    pid_t pid = spawn_waiting(&go, count_forever);
    ok_call(cgroup_attach(made, pid, &err_), "%s: attach", m->label);
    release(go);
    ok(wait_counting(2000), "%s: the counter runs", m->label);

    ok_call(cgroup_open(second, name, 0, &cg, &err_), "%s: cgroup_open by path", m->label);
    if (!cg) {
        kill(pid, SIGKILL);
        reap(pid);
        cgroup_destroy(made, NULL);
        cgroup_host_close(second);
        return;
    }
    is_str(cgroup_path(cg), name, "%s: its path", m->label);
    ok(cgroup_mode_of(cg) == m->kind && !cgroup_removed(cg), "%s: its mode, and it exists",
       m->label);
    const char *where = m->cgroup2 ? "" : "freezer";
    ok_call(cgroup_file_path(cg, where, "", path, sizeof path, &err_),
            "%s: cgroup_file_path works on it", m->label);
    is_str(path, group_path(want, sizeof want, m->cgroup2 ? m->cgroup2 : "freezer", name, NULL),
           "%s: and names the group's directory", m->label);
    bool populated = false;
    ok(cgroup_populated(cg, &populated, NULL) == 0 && populated, "%s: it is populated", m->label);
    struct cgroup_stats st = {0};
    uint64_t deadline = now_ms() + 2000;
    while ((cgroup_read_stats(cg, &st, &err) < 0 || st.cpu_usage_ns == 0) && now_ms() < deadline)
        sleep_ms(5);
    ok(st.cpu_usage_ns > 0, "%s: read_stats through it: CPU %" PRIu64 " ns", m->label,
       st.cpu_usage_ns);
    if (m->limits)
        is_u64(st.pids_current, 1, "%s: and pids_current 1", m->label);

    ok_call(cgroup_freeze_start(cg, true, &err_), "%s: freeze through it", m->label);
    ok(wait_frozen(cg, true, 2000) > 0, "%s: it freezes", m->label);
    bool frozen = false;
    ok(cgroup_frozen(made, &frozen, NULL) == 0 && frozen,
       "%s: the first process's handle sees it frozen too", m->label);
    uint64_t before = *counter;
    sleep_ms(50);
    is_u64(*counter, before, "%s: no progress while frozen", m->label);
    ok_call(cgroup_freeze_start(cg, false, &err_), "%s: thaw through it", m->label);
    ok(wait_frozen(cg, false, 2000) > 0, "%s: it thaws", m->label);
    sleep_ms(20);
    ok(*counter > before, "%s: and runs again", m->label);
    if (m->cgroup2) {
        int fd = cgroup_open_events_fd(cg, &err);
        ok(fd >= 0, "%s: its events fd opens", m->label);
        if (fd >= 0)
            close(fd);
    }
    ok_call(cgroup_kill(cg, &err_), "%s: kill through it", m->label);
    ok(reap(pid) == SIGKILL, "%s: the member died of SIGKILL", m->label);
    ok_call(remove_within(cg, 2000, &err_), "%s: remove through it", m->label);
    ok(cgroup_removed(cg) && group_gone(name), "%s: the group is gone", m->label);
    ok_call(cgroup_remove(made, &err_),
            "%s: the maker's cgroup_remove then finds nothing to do, and says 0", m->label);
    cgroup_free(cg);
    cgroup_free(made);

    /* A reopened sandbox: its init found by path, a new command's group made under it. */
    char parent_name[64], init_path[96], cmd_path[96], buf[64];
    mode_group_name(parent_name, sizeof parent_name, m, "reopen-nest");
    snprintf(init_path, sizeof init_path, "%s/init", parent_name);
    snprintf(cmd_path, sizeof cmd_path, "%s/cmd-2", parent_name);
    struct cgroup *parent = NULL, *init = NULL, *parent2 = NULL, *init2 = NULL, *cmd2 = NULL;
    if (cgroup_create(m->host, NULL, parent_name, NULL, CGROUP_NESTED, &parent, &err) < 0 ||
        cgroup_create(m->host, parent, "init", NULL, 0, &init, &err) < 0) {
        ok(0, "%s: create nested: %s", m->label, err.msg);
        cgroup_free(init);
        cgroup_destroy(parent, NULL);
        cgroup_host_close(second);
        return;
    }
    pid = spawn_waiting(&go, pause_forever);
    ok_call(cgroup_attach(init, pid, &err_), "%s: attach to init", m->label);
    release(go);
    cgroup_free(init);
    cgroup_free(parent); /* the first process is gone */
    ok_call(cgroup_open(second, parent_name, CGROUP_NESTED, &parent2, &err_),
            "%s: reopen the sandbox (nested)", m->label);
    ok_call(cgroup_open(second, init_path, 0, &init2, &err_), "%s: reopen its init", m->label);
    populated = false;
    ok(init2 && cgroup_populated(init2, &populated, NULL) == 0 && populated,
       "%s: init is populated", m->label);
    struct cgroup_limits cmd_limits = {.pids = m->limits ? 8 : 0};
    if (parent2)
        ok_call(cgroup_create(second, parent2, "cmd-2", &cmd_limits, 0, &cmd2, &err_),
                "%s: a new command's group under the reopened sandbox", m->label);
    check_layout(m, cmd_path);
    if (m->limits)
        is_str(read_group_file(buf, sizeof buf, m->kind == CGROUP_MODE_V2 ? "" : "pids", cmd_path,
                               "pids.max"),
               "8\n", "%s: with its limit", m->label);
    if (parent2) {
        ok_call(cgroup_kill(parent2, &err_), "%s: kill the reopened sandbox", m->label);
        ok(reap_within(pid, 2000) == SIGKILL, "%s: init's process died of SIGKILL", m->label);
        ok_call(remove_within(parent2, 2000, &err_), "%s: remove it", m->label);
    } else {
        kill(pid, SIGKILL);
        reap(pid);
    }
    ok(group_gone(init_path) && group_gone(cmd_path) && group_gone(parent_name),
       "%s: sandbox, init and command are gone", m->label);
    cgroup_free(cmd2);
    cgroup_free(init2);
    cgroup_free(parent2);

    /* Nothing there: a handle whose remove does nothing, and remove_by_name says 0. */
    mode_group_name(name, sizeof name, m, "nothing");
    cg = NULL;
    ok_call(cgroup_open(second, name, 0, &cg, &err_), "%s: cgroup_open of a missing group",
            m->label);
    ok(cg && cgroup_removed(cg), "%s: gives a handle to nothing", m->label);
    if (cg)
        ok_call(cgroup_remove(cg, &err_), "%s: whose cgroup_remove is a no-op", m->label);
    ok(group_gone(name), "%s: and makes nothing", m->label);
    cgroup_free(cg);
    ok_call(cgroup_remove_by_name(second, name, &err_),
            "%s: cgroup_remove_by_name of a missing group is no error", m->label);

    /* Half made, as a supervisor that died in cgroup_create leaves it. */
    mode_group_name(name, sizeof name, m, "half");
    cg = NULL;
    if (cgroup_create_for_clone(m->host, name, NULL, 0, &cg, &err) == 0) {
        pid_t cloned = -1;
        int dir_fd = cgroup_open_dir_fd(cg, NULL);
        if (dir_fd >= 0) { /* the first step done, a child cloned in, and no second step */
            cloned = clone_into(dir_fd);
            close(dir_fd);
        }
        cgroup_free(cg);
        ok_call(cgroup_remove_by_name(second, name, &err_),
                "%s: cgroup_remove_by_name of a group made by create_for_clone only", m->label);
        if (cloned > 0)
            ok(reap_within(cloned, 2000) == SIGKILL, "%s: the child cloned into it was killed",
               m->label);
        ok(group_gone(name), "%s: nothing of it is left", m->label);
    } else {
        ok(0, "%s: create_for_clone: %s", m->label, err.msg);
    }
    if (m->limits && m->kind != CGROUP_MODE_V2) {
        /* Only the first v1 directory made. */
        mode_group_name(name, sizeof name, m, "half-v1");
        group_path(path, sizeof path, "memory", name, NULL);
        ok(mkdir(path, 0755) == 0, "%s: make only memory:hutch/NAME", m->label);
        ok_call(cgroup_remove_by_name(second, name, &err_),
                "%s: cgroup_remove_by_name of a group with one v1 directory", m->label);
        ok(group_gone(name), "%s: removes it", m->label);
        rmdir(path);
    }
    cgroup_host_close(second);
}

/* ---------- freeze and thaw as steps ---------- */

static void test_freeze_steps(const struct mode *m)
{
    char name[64], child_path[96];
    mode_group_name(name, sizeof name, m, "freeze-steps");
    snprintf(child_path, sizeof child_path, "%s/cmd-1", name);
    struct cgroup *cg = NULL, *child = NULL;
    err_t err;
    if (cgroup_create(m->host, NULL, name, NULL, CGROUP_NESTED, &cg, &err) < 0 ||
        cgroup_create(m->host, cg, "cmd-1", NULL, 0, &child, &err) < 0) {
        ok(0, "%s: create: %s", m->label, err.msg);
        cgroup_destroy(cg, NULL);
        return;
    }
    *counter = 0;
    int go;
    pid_t pid = spawn_waiting(&go, count_forever);
    ok_call(cgroup_attach(child, pid, &err_), "%s: attach a counter below the group", m->label);
    release(go);
    ok(wait_counting(2000), "%s: the counter runs", m->label);

    uint64_t t0 = now_ms();
    ok_call(cgroup_freeze_start(cg, true, &err_), "%s: cgroup_freeze_start", m->label);
    uint64_t took = now_ms() - t0;
    ok(took < 500, "%s: returns at once (%" PRIu64 " ms)", m->label, took);
    int polls = wait_frozen(cg, true, 2000);
    ok(polls > 0, "%s: cgroup_frozen, polled, becomes true (%d polls)", m->label, polls);
    bool frozen = false;
    ok(cgroup_frozen(child, &frozen, NULL) == 0 && frozen,
       "%s: the child is frozen with its parent", m->label);
    uint64_t before = *counter;
    sleep_ms(100);
    is_u64(*counter, before, "%s: the frozen child makes no progress", m->label);
    ok_call(cgroup_freeze_start(cg, false, &err_), "%s: cgroup_freeze_start(false)", m->label);
    ok(wait_frozen(cg, false, 2000) > 0 && wait_frozen(child, false, 2000) > 0,
       "%s: cgroup_frozen becomes false, for the child too", m->label);
    sleep_ms(50);
    ok(*counter > before, "%s: and the child runs again", m->label);

    ok_call(cgroup_kill(cg, &err_), "%s: kill", m->label);
    ok(reap(pid) == SIGKILL, "%s: the counter died of SIGKILL", m->label);
    ok_call(remove_within(cg, 2000, &err_), "%s: remove", m->label);
    ok(group_gone(child_path) && group_gone(name), "%s: no directory left", m->label);
    cgroup_free(child);
    cgroup_free(cg);
}

/* Everything new in the host interface, for one mode. Generous limits: the guest is slow. */
static void test_steps(const struct mode *m)
{
    RUN(120, test_host(m));
    RUN(120, test_nested(m));
    RUN(60, test_kill_start(m));
    RUN(60, test_kill_frozen(m));
    RUN(60, test_events(m));
    RUN(60, test_remove_busy(m));
    RUN(60, test_kill_forking_tree(m));
    RUN(60, test_reopen(m));
    RUN(60, test_freeze_steps(m));
}

/* Opens m's host, once for the whole run, as a daemon would. */
static bool open_host(struct mode *m)
{
    err_t err = {0};
    int rc = cgroup_host_open(m->open_as, &m->host, &err);
    ok(rc == 0, "%s: open the host (%s)", m->label, rc == 0 ? "ok" : err.msg);
    return rc == 0;
}

static void close_host(struct mode *m)
{
    cgroup_host_close(m->host);
    m->host = NULL;
}

static int test_native_v2(void)
{
    enum cgroup_mode mode;
    err_t err;
    ok(cgroup_detect(&mode, &err) == 0 && mode == CGROUP_MODE_V2, "this host is pure cgroup v2");
    int fds_start = count_fds();
    if (!open_host(&mode_v2_native))
        return done_testing();
    int fds_before = count_fds();
    struct cgroup_host *host = mode_v2_native.host;
    RUN(60, test_native_v2_limits(host));
    RUN(60, test_native_v2_pids(host));
    RUN(60, test_set_limits(&mode_v2_native));
    RUN(60, test_children(&mode_v2_native));
    RUN(60, test_native_v2_oom(host));
    RUN(60, test_memory(&mode_v2_native));
    RUN(60, test_placement(&mode_v2_native));
    RUN(60, test_cpu(&mode_v2_native));
    RUN(60, test_freeze(&mode_v2_native));
    RUN(60, test_kill_tree(&mode_v2_native));
    RUN(60, test_native_v2_forced(CGROUP_MODE_HYBRID, "hybrid"));
    RUN(60, test_native_v2_forced(CGROUP_MODE_V1, "v1"));
    test_steps(&mode_v2_native);
    RUN(120, test_native_v2_nested(&mode_v2_native));
    is_u64((uint64_t)count_fds(), (uint64_t)fds_before, "no fd leaked");
    ok(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "no child left");
    close_host(&mode_v2_native);
    is_u64((uint64_t)count_fds(), (uint64_t)fds_start, "closing the host closes its fds");
    return done_testing();
}

/* Everything that depends on the mode, for one mode. */
static void test_mode(const struct mode *m)
{
    RUN(30, test_create_limits(m));
    RUN(30, test_set_limits(m));
    RUN(30, test_children(m));
    RUN(30, test_rollback(m));
    RUN(30, test_placement(m));
    RUN(30, test_oom(m));
    RUN(30, test_memory(m));
    RUN(30, test_cpu(m));
    RUN(30, test_freeze(m));
    RUN(30, test_kill_tree(m));
    RUN(30, test_self_attach(m));
    RUN(30, test_v1_mounts(m));
}

/* What forced v2 can do on this host, whose cgroup2 has no controllers. */
static void test_mode_v2_forced(const struct mode *m)
{
    RUN(30, test_forced_v2_refuses_limits(m->host));
    RUN(30, test_forced_v2_placement(m->host));
    RUN(30, test_placement(m));
    RUN(30, test_memory(m));
    RUN(30, test_cpu(m));
    RUN(30, test_freeze(m));
    RUN(30, test_kill_tree(m));
    RUN(30, test_self_attach(m));
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (geteuid() != 0) {
        printf("1..0 # SKIP cgroup tests need root\n");
        return 0;
    }
    enum cgroup_mode mode;
    err_t err;
    if (cgroup_detect(&mode, &err) < 0 || (mode != CGROUP_MODE_HYBRID && mode != CGROUP_MODE_V2)) {
        printf("1..0 # SKIP written for a hybrid or a pure cgroup v2 host\n");
        return 0;
    }
    /* Orphaned grandchildren come to us, so the kill tests can reap and check them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGALRM, on_alarm);
    counter =
        mmap(NULL, sizeof *counter, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mode == CGROUP_MODE_V2)
        return test_native_v2();
    int fds_start = count_fds();

    RUN(30, test_modes());
    /* One host per mode, each opened once for the whole run. */
    if (!open_host(&mode_hybrid) || !open_host(&mode_v1) || !open_host(&mode_v2_forced)) {
        close_host(&mode_hybrid);
        close_host(&mode_v1);
        close_host(&mode_v2_forced);
        return done_testing();
    }
    int fds_before = count_fds();

    RUN(30, test_names(mode_hybrid.host));
    test_mode(&mode_hybrid);
    RUN(30, test_file_path());
    RUN(30, test_self_attach_v1_only());
    RUN(30, test_self_attach_open_too_small());
    test_mode(&mode_v1); /* pure v1: cpuacct, freezer.state, the freezer-based kill */
    test_mode_v2_forced(&mode_v2_forced);
    test_steps(&mode_hybrid);
    test_steps(&mode_v1);
    test_steps(&mode_v2_forced);

    is_u64((uint64_t)count_fds(), (uint64_t)fds_before, "no fd leaked");
    ok(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "no child left");
    close_host(&mode_hybrid);
    close_host(&mode_v1);
    close_host(&mode_v2_forced);
    is_u64((uint64_t)count_fds(), (uint64_t)fds_start, "closing the hosts closes their fds");
    return done_testing();
}
