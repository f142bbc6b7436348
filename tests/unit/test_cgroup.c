/* cgroup module against the real kernel. Runs as root on a hybrid host (v1 controllers under
 * /sys/fs/cgroup/<ctrl>, cgroup2 without controllers at /sys/fs/cgroup/unified). Hybrid uses
 * only the memory and pids v1 controllers and does CPU time, freezing and kill in its cgroup2
 * group; the mode-dependent tests run once for the host's own mode (hybrid) and once for a
 * forced v1 (all four v1 controllers, freezer.state, freezer-based kill), each through a
 * cgroup_host of its own, opened once; forced v2 covers the v2 path.
 * On a pure cgroup v2 host (the test guest, tests/guest/) the native-v2 tests run instead: limits
 * in memory.max, memory.swap.max, memory.oom.group and pids.max, OOM attribution from
 * memory.events, cpu.stat, cgroup.freeze and cgroup.kill, all in /sys/fs/cgroup/hutch/NAME.
 * Every group is named after our pid, every child is reaped, and nothing is left in the
 * hierarchies afterwards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
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
    const char *cgroup2;      /* where its cgroup2 group is: "unified" (hybrid) or "" (pure v2) */
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
};

/* ---------- helpers ---------- */

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
    struct cgroup_limits limits = {.pids = 16};
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
    ok(wait_pids_current(cg, 4), "%s: child and three grandchildren are in the group", m->label);
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
    ok(wait_pids_current(cg, 1), "%s: pids_current counts the child", m->label);
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
    ok(cgroup_file_path(cg, "cpu", "cpu.shares", path, sizeof path, &err) < 0 &&
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
    test_native_v2_limits(host);
    test_native_v2_pids(host);
    test_native_v2_oom(host);
    test_placement(&mode_v2_native);
    test_cpu(&mode_v2_native);
    test_freeze(&mode_v2_native);
    test_kill_tree(&mode_v2_native);
    test_native_v2_forced(CGROUP_MODE_HYBRID, "hybrid");
    test_native_v2_forced(CGROUP_MODE_V1, "v1");
    is_u64((uint64_t)count_fds(), (uint64_t)fds_before, "no fd leaked");
    ok(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "no child left");
    close_host(&mode_v2_native);
    is_u64((uint64_t)count_fds(), (uint64_t)fds_start, "closing the host closes its fds");
    return done_testing();
}

/* Everything that depends on the mode, for one mode. */
static void test_mode(const struct mode *m)
{
    test_create_limits(m);
    test_rollback(m);
    test_placement(m);
    test_oom(m);
    test_cpu(m);
    test_freeze(m);
    test_kill_tree(m);
    test_self_attach(m);
    test_v1_mounts(m);
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
    counter =
        mmap(NULL, sizeof *counter, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mode == CGROUP_MODE_V2)
        return test_native_v2();
    int fds_start = count_fds();

    test_modes();
    /* One host per mode, each opened once for the whole run. */
    if (!open_host(&mode_hybrid) || !open_host(&mode_v1) || !open_host(&mode_v2_forced)) {
        close_host(&mode_hybrid);
        close_host(&mode_v1);
        close_host(&mode_v2_forced);
        return done_testing();
    }
    int fds_before = count_fds();

    test_names(mode_hybrid.host);
    test_mode(&mode_hybrid);
    test_file_path();
    test_self_attach_v1_only();
    test_self_attach_open_too_small();
    test_mode(&mode_v1); /* pure v1: cpuacct, freezer.state, the freezer-based kill */
    test_forced_v2_refuses_limits(mode_v2_forced.host);
    test_forced_v2_placement(mode_v2_forced.host);

    is_u64((uint64_t)count_fds(), (uint64_t)fds_before, "no fd leaked");
    ok(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "no child left");
    close_host(&mode_hybrid);
    close_host(&mode_v1);
    close_host(&mode_v2_forced);
    is_u64((uint64_t)count_fds(), (uint64_t)fds_start, "closing the hosts closes their fds");
    return done_testing();
}
