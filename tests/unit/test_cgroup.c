/* cgroup module against the real kernel. Runs as root on a hybrid host (v1 controllers under
 * /sys/fs/cgroup/<ctrl>, cgroup2 without controllers at /sys/fs/cgroup/unified); forced modes
 * cover the pure-v1 path and the v2 path. Every group is named after our pid, every child is
 * reaped, and nothing is left in the hierarchies afterwards. */
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

#include "jail/cgroup.h"
#include "tap.h"

#define MIB (1024u * 1024u)

static const char *const v1_dirs[] = {"memory", "pids", "cpuacct", "freezer"};
#define V1_DIR_COUNT (sizeof v1_dirs / sizeof v1_dirs[0])

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

/* Path of hutch/NAME in one hierarchy ("memory", "unified", ...), plus an optional file. */
static const char *group_path(char *buf, size_t size, const char *hier, const char *name,
                              const char *file)
{
    snprintf(buf, size, "/sys/fs/cgroup/%s/hutch/%s%s%s", hier, name, file ? "/" : "",
             file ? file : "");
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
    for (size_t i = 0; i < V1_DIR_COUNT; i++) {
        if (group_exists(v1_dirs[i], name))
            return false;
    }
    return !group_exists("unified", name);
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

static void set_mode(const char *mode)
{
    if (mode)
        setenv("HUTCH_CGROUP_MODE", mode, 1);
    else
        unsetenv("HUTCH_CGROUP_MODE");
}

/* ---------- mode detection and names ---------- */

static void test_modes(void)
{
    enum cgroup_mode mode;
    err_t err;
    is_str(cgroup_mode_name(CGROUP_MODE_V1), "v1", "mode name v1");
    is_str(cgroup_mode_name(CGROUP_MODE_HYBRID), "hybrid", "mode name hybrid");
    is_str(cgroup_mode_name(CGROUP_MODE_V2), "v2", "mode name v2");

    set_mode(NULL);
    ok(cgroup_detect(&mode, &err) == 0 && mode == CGROUP_MODE_HYBRID, "this host is hybrid");

    static const struct {
        const char *env;
        enum cgroup_mode mode;
    } forced[] = {{"v1", CGROUP_MODE_V1}, {"v2", CGROUP_MODE_V2}, {"hybrid", CGROUP_MODE_HYBRID}};
    for (size_t i = 0; i < sizeof forced / sizeof forced[0]; i++) {
        set_mode(forced[i].env);
        ok(cgroup_detect(&mode, &err) == 0 && mode == forced[i].mode, "HUTCH_CGROUP_MODE=%s",
           forced[i].env);
    }
    set_mode("v3");
    ok(cgroup_detect(&mode, &err) < 0 && strstr(err.msg, "HUTCH_CGROUP_MODE"),
       "HUTCH_CGROUP_MODE=v3 is an error (%s)", err.msg);
    set_mode(NULL);
}

static void test_names(void)
{
    char long_name[80];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    const char *bad[] = {"", ".", "..", ".hidden", "a/b", "a b", "a\nb", "ä", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cgroup *cg = (struct cgroup *)1;
        err_t err;
        int rc = cgroup_create(bad[i], NULL, &cg, &err);
        ok(rc < 0 && cg == NULL && err.errnum == EINVAL, "bad name #%zu refused (%s)", i, err.msg);
    }
    struct cgroup *cg = NULL;
    err_t err;
    ok(cgroup_create(NULL, NULL, &cg, &err) < 0, "NULL name refused");

    /* The longest name allowed, using every allowed kind of character. */
    int prefix = snprintf(long_name, sizeof long_name, "t%d-Az9._-", (int)getpid());
    memset(long_name + prefix, 'x', (size_t)(64 - prefix));
    long_name[64] = '\0';
    ok_call(cgroup_create(long_name, NULL, &cg, &err_), "64-character name accepted");
    ok(group_exists("freezer", long_name), "it exists in freezer");
    ok(cgroup_destroy(cg, &err) == 0, "destroy it");
    ok(group_gone(long_name), "and it is gone");
    ok(cgroup_destroy(NULL, &err) == 0, "destroy(NULL) is a no-op");
}

/* ---------- creation, limits, rollback ---------- */

static void test_create_limits(void)
{
    char name[64], buf[256];
    group_name(name, sizeof name, "limits");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB, .pids = 64};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, &limits, &cg, &err) < 0) {
        ok(0, "create with limits: %s", err.msg);
        return;
    }
    ok(1, "create with limits");
    for (size_t i = 0; i < V1_DIR_COUNT; i++)
        ok(group_exists(v1_dirs[i], name), "group exists in %s", v1_dirs[i]);
    ok(group_exists("unified", name), "group exists in unified");
    ok(cgroup_clone_into_fd(cg) >= 0, "hybrid has a clone3 fd");
    is_str(read_group_file(buf, sizeof buf, "memory", name, "memory.limit_in_bytes"), "33554432\n",
           "memory.limit_in_bytes");
    char path[256];
    if (access(group_path(path, sizeof path, "memory", name, "memory.memsw.limit_in_bytes"),
               F_OK) == 0)
        is_str(read_group_file(buf, sizeof buf, "memory", name, "memory.memsw.limit_in_bytes"),
               "33554432\n", "memory.memsw.limit_in_bytes equals it (no swap on top)");
    is_str(read_group_file(buf, sizeof buf, "pids", name, "pids.max"), "64\n", "pids.max");

    struct cgroup *dup = (struct cgroup *)1;
    ok(cgroup_create(name, &limits, &dup, &err) < 0 && dup == NULL && err.errnum == EEXIST,
       "a second group with the same name is refused (%s)", err.msg);
    ok(strstr(err.msg, name) != NULL, "the error names the group");
    ok(group_exists("memory", name) && group_exists("unified", name),
       "the refused create left the first group alone");

    struct cgroup_stats st;
    ok(cgroup_read_stats(cg, &st, &err) == 0 && st.pids_current == 0 && st.oom_kills == 0,
       "stats of an empty group");
    ok_call(cgroup_kill(cg, &err_), "kill of an empty group");
    ok_call(cgroup_destroy(cg, &err_), "destroy");
    ok(group_gone(name), "no directory left");
}

/* A clash in a later hierarchy must roll back the ones made before it, and must not remove
 * the directory that clashed (it is not ours). */
static void test_rollback_one(const char *clash_hier)
{
    char name[64], path[256];
    group_name(name, sizeof name, "clash");
    group_path(path, sizeof path, clash_hier, "", NULL); /* .../hutch/ */
    mkdir(path, 0755);
    group_path(path, sizeof path, clash_hier, name, NULL);
    if (mkdir(path, 0755) < 0) {
        ok(0, "mkdir %s: %s", path, strerror(errno));
        return;
    }
    struct cgroup *cg = NULL;
    err_t err;
    struct cgroup_limits limits = {.memory_bytes = 16 * MIB, .pids = 8};
    ok(cgroup_create(name, &limits, &cg, &err) < 0 && err.errnum == EEXIST,
       "clash in %s refused (%s)", clash_hier, err.msg);
    ok(group_exists(clash_hier, name), "the clashing %s directory is not removed", clash_hier);
    bool others_gone = true;
    for (size_t i = 0; i < V1_DIR_COUNT; i++) {
        if (strcmp(v1_dirs[i], clash_hier) != 0 && group_exists(v1_dirs[i], name))
            others_gone = false;
    }
    if (strcmp(clash_hier, "unified") != 0 && group_exists("unified", name))
        others_gone = false;
    ok(others_gone, "every other directory made before the clash was rolled back");
    rmdir(path);
    ok(group_gone(name), "clean after the clash in %s", clash_hier);
}

static void test_rollback(void)
{
    test_rollback_one("pids");
    test_rollback_one("freezer");
    test_rollback_one("unified");
}

/* ---------- placement, counters, kill ---------- */

static void test_placement(void)
{
    char name[64];
    group_name(name, sizeof name, "place");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, NULL, &cg, &err) < 0) {
        ok(0, "create: %s", err.msg);
        return;
    }
    pid_t cloned = clone_into(cgroup_clone_into_fd(cg));
    ok(cloned > 0, "clone3 into the cgroup2 group");
    ok_call(cgroup_attach(cg, cloned, &err_), "attach the cloned child");
    int go;
    pid_t forked = spawn_waiting(&go, pause_forever);
    ok_call(cgroup_attach(cg, forked, &err_), "attach a plainly forked child");
    release(go);
    static const char *const all[] = {"memory", "pids", "cpuacct", "freezer", "unified"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ok(procs_has(all[i], name, cloned), "cloned child in %s cgroup.procs", all[i]);
        ok(procs_has(all[i], name, forked), "forked child in %s cgroup.procs", all[i]);
    }
    struct cgroup_stats st;
    ok(cgroup_read_stats(cg, &st, &err) == 0, "read stats");
    is_u64(st.pids_current, 2, "pids_current counts both");
    ok(cgroup_attach(cg, 0, &err) < 0, "attach of pid 0 refused");
    ok_call(cgroup_kill(cg, &err_), "kill");
    ok(reap(cloned) == SIGKILL, "cloned child died of SIGKILL");
    ok(reap(forked) == SIGKILL, "forked child died of SIGKILL");
    ok(!procs_has("memory", name, forked) && !procs_has("unified", name, cloned),
       "cgroup.procs empty after kill");
    ok_call(cgroup_destroy(cg, &err_), "destroy");
    ok(group_gone(name), "no directory left");
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

static void test_oom(void)
{
    char name[64];
    group_name(name, sizeof name, "oom");
    struct cgroup_limits limits = {.memory_bytes = 32 * MIB};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, &limits, &cg, &err) < 0) {
        ok(0, "create: %s", err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, touch_64mib);
    ok_call(cgroup_attach(cg, pid, &err_), "attach");
    release(go);
    ok(reap(pid) == SIGKILL, "64 MiB under a 32 MiB limit is killed");
    struct cgroup_stats st;
    ok_call(cgroup_read_stats(cg, &st, &err_), "read stats");
    ok(st.oom_kills >= 1, "oom_kills >= 1 (%" PRIu64 ")", st.oom_kills);
    ok(st.memory_peak_bytes > 0 && st.memory_peak_bytes <= 32 * MIB,
       "0 < memory_peak <= limit (%" PRIu64 ")", st.memory_peak_bytes);
    ok_call(cgroup_destroy(cg, &err_), "destroy");
    ok(group_gone(name), "no directory left");
}

static void burn_200ms(void)
{
    struct timespec ts;
    do
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    while (ts.tv_sec == 0 && ts.tv_nsec < 200000000L);
}

static void test_cpu(void)
{
    char name[64];
    group_name(name, sizeof name, "cpu");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, NULL, &cg, &err) < 0) {
        ok(0, "create: %s", err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, burn_200ms);
    ok_call(cgroup_attach(cg, pid, &err_), "attach");
    release(go);
    ok(reap(pid) == 0, "the burner exits normally");
    struct cgroup_stats st;
    ok_call(cgroup_read_stats(cg, &st, &err_), "read stats");
    ok(st.cpu_usage_ns >= 150000000u, "cpu_usage_ns covers the 200 ms burn (%" PRIu64 ")",
       st.cpu_usage_ns);
    ok(st.oom_kills == 0, "no oom kill");
    ok_call(cgroup_destroy(cg, &err_), "destroy");
    ok(group_gone(name), "no directory left");
}

static volatile uint64_t *counter;

static void count_forever(void)
{
    for (;;)
        (*counter)++;
}

static void test_freeze(void)
{
    char name[64], buf[64];
    group_name(name, sizeof name, "freeze");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, NULL, &cg, &err) < 0) {
        ok(0, "create: %s", err.msg);
        return;
    }
    *counter = 0;
    int go;
    pid_t pid = spawn_waiting(&go, count_forever);
    ok_call(cgroup_attach(cg, pid, &err_), "attach");
    release(go);
    while (*counter == 0)
        sleep_ms(1);

    ok_call(cgroup_set_frozen(cg, true, &err_), "freeze");
    is_str(read_group_file(buf, sizeof buf, "freezer", name, "freezer.state"), "FROZEN\n",
           "freezer.state reads FROZEN");
    uint64_t before = *counter;
    sleep_ms(100);
    is_u64(*counter, before, "a frozen child makes no progress");

    ok_call(cgroup_set_frozen(cg, false, &err_), "thaw");
    is_str(read_group_file(buf, sizeof buf, "freezer", name, "freezer.state"), "THAWED\n",
           "freezer.state reads THAWED");
    sleep_ms(50);
    ok(*counter > before, "a thawed child runs again");

    /* Destroying a frozen group must still kill it: SIGKILL is queued before the thaw. */
    ok_call(cgroup_set_frozen(cg, true, &err_), "freeze again");
    ok_call(cgroup_destroy(cg, &err_), "destroy while frozen");
    ok(reap(pid) == SIGKILL, "the frozen child died of SIGKILL");
    ok(group_gone(name), "no directory left");
}

static void fork_three_then_pause(void)
{
    for (int i = 0; i < 3; i++) {
        if (fork() == 0)
            pause_forever();
    }
    pause_forever();
}

/* A child and its three children (which we adopt as subreaper) all die in one kill. */
static void kill_tree(const char *mode_label)
{
    char name[64];
    group_name(name, sizeof name, mode_label);
    struct cgroup_limits limits = {.pids = 16};
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, &limits, &cg, &err) < 0) {
        ok(0, "%s: create: %s", mode_label, err.msg);
        return;
    }
    int go;
    pid_t pid = spawn_waiting(&go, fork_three_then_pause);
    ok_call(cgroup_attach(cg, pid, &err_), "%s: attach", mode_label);
    release(go);
    ok(wait_pids_current(cg, 4), "%s: child and three grandchildren are in the group", mode_label);
    ok_call(cgroup_kill(cg, &err_), "%s: kill", mode_label);
    ok(reap(pid) == SIGKILL, "%s: child died of SIGKILL", mode_label);
    is_u64(reap_any_killed(3), 3, "%s: all three grandchildren died of SIGKILL", mode_label);
    ok_call(cgroup_destroy(cg, &err_), "%s: destroy", mode_label);
    ok(group_gone(name), "%s: no directory left", mode_label);
}

static void test_kill_tree(void)
{
    kill_tree("tree-hybrid");
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

static void create_without_pids(int out)
{
    char name[64];
    group_name(name, sizeof name, "nopids");
    struct cgroup *cg = NULL;
    err_t err = {0};
    if (umount2("/sys/fs/cgroup/pids", MNT_DETACH) < 0)
        dprintf(out, "umount: %s", strerror(errno));
    else if (cgroup_create(name, NULL, &cg, &err) == 0)
        dprintf(out, "created although pids is not mounted");
    else if (!group_gone(name))
        dprintf(out, "a directory was left behind");
    else
        dprintf(out, "%s", err.msg);
}

/* Per test process, so parallel runs do not share it. */
static char spaced_dir[64], spaced_mnt[96];

/* cpuacct mounted (again: same hierarchy) where mountinfo has to escape the spaces. */
static void create_with_spaced_mount(int out)
{
    char name[64], path[256];
    struct stat st;
    group_name(name, sizeof name, "spaced");
    struct cgroup *cg = NULL;
    err_t err = {0};
    if (umount2("/sys/fs/cgroup/cpuacct", MNT_DETACH) < 0 ||
        mount("cgroup", spaced_mnt, "cgroup", 0, "cpuacct") < 0) {
        dprintf(out, "setting up %s: %s", spaced_mnt, strerror(errno));
        return;
    }
    snprintf(path, sizeof path, "%s/hutch/%s", spaced_mnt, name);
    if (cgroup_create(name, NULL, &cg, &err) < 0)
        dprintf(out, "create: %s", err.msg);
    else if (stat(path, &st) < 0)
        dprintf(out, "no group at %s", path);
    else if (cgroup_destroy(cg, &err) < 0)
        dprintf(out, "destroy: %s", err.msg);
    else if (stat(path, &st) == 0 || !group_gone(name))
        dprintf(out, "left behind after destroy");
    else
        dprintf(out, "ok");
    umount2(spaced_mnt, MNT_DETACH);
}

static void test_v1_mounts(void)
{
    char verdict[1024];
    in_mount_ns(create_without_pids, verdict, sizeof verdict);
    is_str(verdict, "cgroup v1: controller 'pids' is not mounted",
           "a missing controller is an error naming it, with nothing left behind");

    snprintf(spaced_dir, sizeof spaced_dir, "/tmp/hutch test-cgroup.%d", (int)getpid());
    snprintf(spaced_mnt, sizeof spaced_mnt, "%s/cpu acct", spaced_dir);
    mkdir(spaced_dir, 0700);
    mkdir(spaced_mnt, 0700);
    is_str(in_mount_ns(create_with_spaced_mount, verdict, sizeof verdict), "ok",
           "a mount point with spaces (escaped in mountinfo) is found and used");
    rmdir(spaced_mnt);
    rmdir(spaced_dir);
}

/* ---------- forced modes ---------- */

static void test_forced_v1(void)
{
    char name[64];
    group_name(name, sizeof name, "v1");
    set_mode("v1");
    struct cgroup *cg = NULL;
    err_t err;
    struct cgroup_limits limits = {.memory_bytes = 64 * MIB, .pids = 32};
    if (cgroup_create(name, &limits, &cg, &err) < 0) {
        ok(0, "v1: create: %s", err.msg);
        set_mode(NULL);
        return;
    }
    ok(cgroup_clone_into_fd(cg) == -1, "v1: no clone3 fd");
    ok(!group_exists("unified", name), "v1: no cgroup2 group");
    ok(group_exists("memory", name) && group_exists("freezer", name), "v1: v1 groups exist");
    ok_call(cgroup_destroy(cg, &err_), "v1: destroy");
    ok(group_gone(name), "v1: no directory left");

    /* The freezer-based kill, which hybrid only uses without cgroup.kill. */
    kill_tree("tree-v1");
    set_mode(NULL);
}

static void test_forced_v2_refuses_limits(void)
{
    char name[64];
    group_name(name, sizeof name, "v2-limit");
    set_mode("v2");
    struct cgroup *cg = (struct cgroup *)1;
    err_t err;
    struct cgroup_limits mem = {.memory_bytes = 32 * MIB};
    ok(cgroup_create(name, &mem, &cg, &err) < 0 && cg == NULL,
       "v2 without the memory controller: a memory limit is refused");
    ok(strstr(err.msg, "'memory'") != NULL, "the error names the memory controller (%s)", err.msg);
    ok(group_gone(name), "no directory left");

    struct cgroup_limits pids = {.pids = 10};
    ok(cgroup_create(name, &pids, &cg, &err) < 0 && strstr(err.msg, "'pids'") != NULL,
       "a pids limit is refused naming pids (%s)", err.msg);
    ok(group_gone(name), "no directory left");
    set_mode(NULL);
}

static void test_forced_v2_placement(void)
{
    char name[64], buf[256];
    group_name(name, sizeof name, "v2");
    set_mode("v2");
    struct cgroup *cg = NULL;
    err_t err;
    if (cgroup_create(name, NULL, &cg, &err) < 0) {
        ok(0, "v2: create: %s", err.msg);
        set_mode(NULL);
        return;
    }
    ok(group_exists("unified", name) && !group_exists("memory", name),
       "v2: only the cgroup2 group exists");
    pid_t cloned = clone_into(cgroup_clone_into_fd(cg));
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
    set_mode(NULL);
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
    unsetenv("HUTCH_CGROUP_MODE");
    if (cgroup_detect(&mode, &err) < 0 || mode != CGROUP_MODE_HYBRID) {
        printf("1..0 # SKIP written for a hybrid host\n");
        return 0;
    }
    /* Orphaned grandchildren come to us, so the kill tests can reap and check them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    counter =
        mmap(NULL, sizeof *counter, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fds_before = count_fds();

    test_modes();
    test_names();
    test_create_limits();
    test_rollback();
    test_placement();
    test_oom();
    test_cpu();
    test_freeze();
    test_kill_tree();
    test_v1_mounts();
    test_forced_v1();
    test_forced_v2_refuses_limits();
    test_forced_v2_placement();

    is_u64((uint64_t)count_fds(), (uint64_t)fds_before, "no fd leaked");
    ok(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "no child left");
    return done_testing();
}
