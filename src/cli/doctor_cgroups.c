/* `hutch doctor`: the cgroup features sandboxes rely on, tried on test groups made through the
 * cgroup module (src/jail/cgroup.h) and removed again: the mode, the controllers with a limit
 * read back, swap accounting, the freezer with a running child, and cgroup.kill.
 *
 * The doctor looks at files inside its own test groups to verify what the cgroup calls did; the
 * cgroup module says where they are (cgroup_file_path), so the mounts are looked up once, there. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/doctor_internal.h"
#include "cli/paths.h"
#include "jail/cgroup.h"
#include "util/fileio.h"
#include "util/strfmt.h"

/* Where the host mounts its hierarchies, for the messages. */
#define CGROUP_FS_ROOT    "/sys/fs/cgroup"
#define CGROUP_FS_UNIFIED "/sys/fs/cgroup/unified"

/* A fresh name per test group: one that failed to go away must not break the next check. */
static void doctor_cgroup_name(char *out, size_t size)
{
    static unsigned counter;
    snprintf(out, size, "doctor-%d-%u", (int)getpid(), counter++);
}

void check_cgroup_mode(struct doctor_result *r)
{
    err_t err;
    struct cgroup_host *host = hutch_cgroup_host(&err);
    if (!host) {
        result_set(r, DOCTOR_FAIL,
                   "%s; hutch needs cgroup v2, v1 or hybrid mounted under " CGROUP_FS_ROOT,
                   err.msg);
        return;
    }
    const char *how = hutch_cgroup_mode_forced() ? " (forced by HUTCH_CGROUP_MODE)" : "";
    switch (cgroup_host_mode(host)) {
    case CGROUP_MODE_V2:
        result_set(r, DOCTOR_OK, "v2%s: unified hierarchy with controllers", how);
        break;
    case CGROUP_MODE_HYBRID:
        result_set(r, DOCTOR_OK,
                   "hybrid%s: v1 controllers under " CGROUP_FS_ROOT "/<controller>, "
                   "cgroup2 without controllers at " CGROUP_FS_UNIFIED "",
                   how);
        break;
    case CGROUP_MODE_V1:
        result_set(r, DOCTOR_OK, "v1%s: one hierarchy per controller under " CGROUP_FS_ROOT, how);
        break;
    }
}

/* Reads back the memory limit hutch wrote, from the file the kernel enforces. */
static int read_memory_limit(const struct cgroup *cg, enum cgroup_mode mode, uint64_t *out)
{
    char path[PATH_MAX];
    bool v2 = mode == CGROUP_MODE_V2;
    if (cgroup_file_path(cg, v2 ? "" : "memory", v2 ? "memory.max" : "memory.limit_in_bytes", path,
                         sizeof path, NULL) < 0)
        return -1;
    long long v = doctor_read_number(path);
    if (v < 0)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The directory of the group in the v1 hierarchy that carries controller. The cgroup module
 * knows only the hierarchies it uses; cpu is reported where it is co-mounted with one of them
 * ("cpu,cpuacct" on many hosts), found by its cpu.shares file, since cpu's files start "cpu.". */
static int v1_group_dir(const struct cgroup *cg, const char *controller, char *out, size_t size)
{
    static const char *const used[] = {"memory", "pids", "cpuacct", "freezer"};
    if (strcmp(controller, "cpu") != 0)
        return cgroup_file_path(cg, controller, "", out, size, NULL);
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
        if (cgroup_file_path(cg, used[i], "cpu.shares", out, size, NULL) == 0 &&
            access(out, F_OK) == 0)
            return cgroup_file_path(cg, used[i], "", out, size, NULL);
    }
    return -1;
}

/* The hierarchies in which hutch/NAME exists, e.g. "v1 memory, v1 pids, cgroup2". */
static void cgroup_where(const struct cgroup *cg, char *out, size_t size)
{
    static const char *const v1[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
    char path[PATH_MAX], seen[5][PATH_MAX];
    size_t n_seen = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof v1 / sizeof v1[0]; i++) {
        if (v1_group_dir(cg, v1[i], path, sizeof path) < 0 || access(path, F_OK) < 0)
            continue;
        bool dup = false; /* co-mounted controllers ("cpu,cpuacct") share one directory */
        for (size_t k = 0; k < n_seen; k++)
            dup = dup || strcmp(seen[k], path) == 0;
        snprintf(seen[n_seen++], PATH_MAX, "%s", path); /* the same size */
        strfmt_text_append(out, size, "%sv1 %s%s", out[0] ? ", " : "", v1[i],
                           dup ? " (shared)" : "");
    }
    if (cgroup_file_path(cg, "", "", path, sizeof path, NULL) == 0 && access(path, F_OK) == 0)
        strfmt_text_append(out, size, "%scgroup2", out[0] ? ", " : "");
}

void check_cgroup_controllers(struct doctor_result *r)
{
    err_t err;
    struct cgroup_host *host = hutch_cgroup_host(&err);
    if (!host) {
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
        return;
    }
    enum cgroup_mode mode = cgroup_host_mode(host);
    char name[64];
    doctor_cgroup_name(name, sizeof name);
    const struct cgroup_limits limits = {.memory_bytes = 64u << 20, .pids = 64};
    struct cgroup *cg = NULL;
    if (cgroup_create(host, NULL, name, &limits, 0, &cg, &err) < 0) {
        const char *fix =
            mode == CGROUP_MODE_V2
                ? "on cgroup v2 the controller must be listed in " CGROUP_FS_ROOT
                  "/cgroup.controllers and delegable (not taken by a threaded subtree)"
                : "on cgroup v1 every controller needs its hierarchy mounted under " CGROUP_FS_ROOT;
        result_set(r, DOCTOR_FAIL,
                   "%s; hutch run needs the memory and pids controllers "
                   "(plus cpuacct/cpu and freezer); %s",
                   err.msg, fix);
        return;
    }
    uint64_t got = 0;
    bool limit_read = read_memory_limit(cg, mode, &got) == 0;
    char where[256];
    cgroup_where(cg, where, sizeof where);
    if (cgroup_destroy(cg, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "created hutch/%s but could not remove it: %s", name, err.msg);
        return;
    }
    if (!limit_read || got != limits.memory_bytes) {
        result_set(r, DOCTOR_FAIL,
                   "created hutch/%s but its memory limit reads back as %llu, "
                   "not %llu",
                   name, (unsigned long long)got, (unsigned long long)limits.memory_bytes);
        return;
    }
    result_set(r, DOCTOR_OK,
               "created and removed hutch/%s (in %s) with memory and pids limits; the memory "
               "limit read back",
               name, where);
}

void check_swap_accounting(struct doctor_result *r)
{
    err_t err;
    struct cgroup_host *host = hutch_cgroup_host(&err);
    if (!host) {
        result_set(r, DOCTOR_WARN, "cannot tell: %s", err.msg);
        return;
    }
    enum cgroup_mode mode = cgroup_host_mode(host);
    char name[64], path[PATH_MAX];
    doctor_cgroup_name(name, sizeof name);
    const struct cgroup_limits limits = {.memory_bytes = 64u << 20};
    struct cgroup *cg = NULL;
    if (cgroup_create(host, NULL, name, &limits, 0, &cg, &err) < 0) {
        result_set(r, DOCTOR_WARN, "cannot tell, no cgroup with a memory limit could be made: %s",
                   err.msg);
        return;
    }
    bool v2 = mode == CGROUP_MODE_V2;
    const char *file = v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
    bool present = cgroup_file_path(cg, v2 ? "" : "memory", file, path, sizeof path, NULL) == 0 &&
                   access(path, F_OK) == 0;
    cgroup_destroy(cg, NULL);
    if (present) {
        result_set(r, DOCTOR_OK,
                   "%s exists in a new group: hutch caps swap with the memory "
                   "limit",
                   file);
        return;
    }
    char meminfo[4096] = "";
    file_read_at(AT_FDCWD, "/proc/meminfo", meminfo, sizeof meminfo, NULL);
    const char *swap = strstr(meminfo, "SwapTotal:");
    unsigned long long swap_kb = 0;
    if (swap)
        sscanf(swap, "SwapTotal: %llu", &swap_kb);
    result_set(r, DOCTOR_WARN,
               "no %s: the kernel has no swap accounting, so a sandbox can use "
               "swap beyond its memory limit (%s); fix: boot without swapaccount=0%s",
               file, swap_kb ? "this host has swap" : "harmless today: this host has no swap",
               v2 ? "" : " (on kernels before 5.8, with swapaccount=1)");
}

/* A child for the freezer and kill checks: counts in shared memory while it runs. */
static pid_t start_counting_child(volatile uint64_t *counter)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        for (;;) {
            (*counter)++;
            doctor_sleep_ms(1);
        }
    }
    return pid;
}

/* Waits until the counter moves past from; false if it did not within timeout_ms. */
static bool counter_moves(volatile uint64_t *counter, uint64_t from, unsigned timeout_ms)
{
    uint64_t deadline = doctor_now_ms() + timeout_ms;
    while (*counter == from) {
        if (doctor_now_ms() >= deadline)
            return false;
        doctor_sleep_ms(1);
    }
    return true;
}

/* Which interface reads the group as frozen: cgroup2's cgroup.events or the v1 freezer.state.
 * Both are looked at, since the cgroup module may freeze through either on a hybrid host.
 * NULL when neither does. */
static const char *cgroup_frozen_by(const struct cgroup *cg, enum cgroup_mode mode)
{
    char path[PATH_MAX], text[512];
    if (mode != CGROUP_MODE_V1 &&
        cgroup_file_path(cg, "", "cgroup.events", path, sizeof path, NULL) == 0 &&
        file_read_at(AT_FDCWD, path, text, sizeof text, NULL) >= 0 && strstr(text, "frozen 1\n"))
        return "cgroup.freeze";
    if (mode != CGROUP_MODE_V2 &&
        cgroup_file_path(cg, "freezer", "freezer.state", path, sizeof path, NULL) == 0 &&
        file_read_at(AT_FDCWD, path, text, sizeof text, NULL) >= 0 && strcmp(text, "FROZEN\n") == 0)
        return "v1 freezer.state";
    return NULL;
}

/* The freezer steps; the caller owns the group and the child. */
static enum doctor_status freezer_steps(struct cgroup *cg, enum cgroup_mode mode, const char *name,
                                        pid_t pid, volatile uint64_t *counter, char *detail,
                                        size_t size)
{
    err_t err;
    if (cgroup_attach(cg, pid, &err) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    if (!counter_moves(counter, *counter, 1000))
        return doctor_say(detail, size, DOCTOR_FAIL, "the test child does not run");
    if (cgroup_set_frozen(cg, true, &err) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "freeze: %s", err.msg);
    const char *how = cgroup_frozen_by(cg, mode);
    if (!how)
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "the group does not read as frozen after a freeze");
    uint64_t before = *counter;
    doctor_sleep_ms(50);
    if (*counter != before)
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "a frozen child kept running (%llu steps in 50 ms)",
                          (unsigned long long)(*counter - before));
    if (cgroup_set_frozen(cg, false, &err) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "thaw: %s", err.msg);
    if (!counter_moves(counter, before, 1000))
        return doctor_say(detail, size, DOCTOR_FAIL, "the child did not run again after the thaw");
    return doctor_say(
        detail, size, DOCTOR_OK,
        "%s: froze hutch/%s with a child in it, which stopped "
        "(state read back, no progress for 50 ms), thawed it, it ran again; killed and "
        "removed",
        how, name);
}

void check_freezer(struct doctor_result *r)
{
    err_t err;
    struct cgroup_host *host = hutch_cgroup_host(&err);
    if (!host) {
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
        return;
    }
    enum cgroup_mode mode = cgroup_host_mode(host);
    char name[64];
    doctor_cgroup_name(name, sizeof name);
    struct cgroup *cg = NULL;
    if (cgroup_create(host, NULL, name, NULL, 0, &cg, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "no cgroup to freeze: %s", err.msg);
        return;
    }
    volatile uint64_t *counter =
        mmap(NULL, sizeof *counter, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (counter == MAP_FAILED) {
        result_set(r, DOCTOR_FAIL, "mmap: %s", strerror(errno));
        cgroup_destroy(cg, NULL);
        return;
    }
    pid_t pid = start_counting_child(counter);
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL, "fork: %s", strerror(errno));
    } else {
        r->status = freezer_steps(cg, mode, name, pid, counter, r->detail, sizeof r->detail);
        /* A child left frozen by a failed step dies on SIGKILL only once thawed: thaw first. */
        cgroup_set_frozen(cg, false, NULL);
        kill(pid, SIGKILL);
        doctor_reap(pid);
    }
    if (cgroup_destroy(cg, &err) < 0 && r->status != DOCTOR_FAIL)
        result_set(r, DOCTOR_FAIL, "removing hutch/%s: %s", name, err.msg);
    munmap((void *)counter, sizeof *counter);
}

/* A child born in the cgroup2 group through clone3(CLONE_INTO_CGROUP), as sandboxes are. */
static pid_t clone_into_cgroup(int cgroup_fd)
{
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_INTO_CGROUP;
    args.cgroup = (uint64_t)cgroup_fd;
    args.exit_signal = SIGCHLD;
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        for (;;)
            pause();
    }
    return pid;
}

static enum doctor_status cgroup_kill_steps(struct cgroup *cg, const char *name, pid_t pid,
                                            char *detail, size_t size)
{
    err_t err;
    char path[PATH_MAX];
    /* Hybrid: the v1 hierarchies are not covered by CLONE_INTO_CGROUP. */
    if (cgroup_attach(cg, pid, &err) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    if (cgroup_file_path(cg, "", "cgroup.kill", path, sizeof path, &err) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    if (access(path, F_OK) < 0)
        return doctor_say(detail, size, DOCTOR_WARN,
                          "no cgroup.kill (Linux < 5.14): hutch kills "
                          "through the freezer instead, which a forking payload can make slower");
    if (file_write_str_at(AT_FDCWD, path, "1", &err) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    int status;
    if (doctor_wait_bounded(pid, &status, 2000) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "the child survived a write to cgroup.kill");
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        char how[96];
        doctor_describe_wait_status(status, how, sizeof how);
        return doctor_say(detail, size, DOCTOR_FAIL, "after cgroup.kill the child ended with %s",
                          how);
    }
    return doctor_say(detail, size, DOCTOR_OK,
                      "clone3(CLONE_INTO_CGROUP) put a child in hutch/%s; "
                      "writing 1 to its cgroup.kill SIGKILLed it",
                      name);
}

void check_cgroup_kill(struct doctor_result *r)
{
    err_t err;
    struct cgroup_host *host = hutch_cgroup_host(&err);
    if (!host) {
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
        return;
    }
    enum cgroup_mode mode = cgroup_host_mode(host);
    if (mode == CGROUP_MODE_V1) {
        result_set(r, DOCTOR_WARN,
                   "pure cgroup v1 has no cgroup.kill and no clone3 into a "
                   "cgroup: hutch kills through the v1 freezer, which works but is slower");
        return;
    }
    char name[64];
    doctor_cgroup_name(name, sizeof name);
    struct cgroup *cg = NULL;
    if (cgroup_create(host, NULL, name, NULL, 0, &cg, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "no cgroup to test with: %s", err.msg);
        return;
    }
    int dir_fd = cgroup_open_dir_fd(cg, &err);
    pid_t pid = dir_fd < 0 ? -1 : clone_into_cgroup(dir_fd);
    if (dir_fd >= 0)
        close(dir_fd);
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL,
                   "clone3(CLONE_INTO_CGROUP): %s; hutch run starts sandboxes "
                   "this way on cgroup v2 and hybrid hosts (Linux 5.7+)",
                   strerror(errno));
    } else {
        r->status = cgroup_kill_steps(cg, name, pid, r->detail, sizeof r->detail);
        kill(pid, SIGKILL); /* already dead unless a step failed */
        doctor_reap(pid);
    }
    if (cgroup_destroy(cg, &err) < 0 && r->status != DOCTOR_FAIL)
        result_set(r, DOCTOR_FAIL, "removing hutch/%s: %s", name, err.msg);
}
