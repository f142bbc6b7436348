/* CPU bandwidth limits (cgroup_limits.cpu_millis) in every mode this host can carry: two
 * spinners in a group limited to 0.3 CPU get at most 0.3 CPU-seconds per second and are
 * throttled by the kernel (cpu.stat's nr_throttled: the limit, not the machine's load, held
 * them); a limit on a host opened without CGROUP_HOST_CPU_LIMITS is
 * refused (v1, hybrid); the limit files hold what was asked. On a pure v2 host (the test guest)
 * the v2 path runs; here v2 is forced onto a cgroup2 without controllers, and its refusal is
 * checked instead. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "tap.h"
#include "util/fileio.h"

#define SPIN_MS      1500
#define LIMIT_MILLIS 300 /* 0.3 CPU */
#define SPINNERS     2

static const char *label_of(int mode)
{
    return mode == CGROUP_MODE_DETECT ? "host" : cgroup_mode_name((enum cgroup_mode)mode);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs SPINNERS busy loops in cg for SPIN_MS; the group's CPU time in ms, or -1. */
static long spin_in(struct cgroup *cg, const char *label)
{
    pid_t kids[SPINNERS];
    int go[2];
    if (pipe(go) < 0)
        return -1;
    size_t n = 0;
    for (; n < SPINNERS; n++) {
        pid_t pid = fork();
        if (pid < 0)
            break;
        if (pid == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 1)
                _exit(1);
            for (volatile unsigned long i = 0;; i++) {
            }
        }
        kids[n] = pid;
    }
    close(go[0]);
    err_t err;
    bool attached = n == SPINNERS;
    for (size_t i = 0; i < n && attached; i++)
        if (cgroup_attach(cg, kids[i], &err) < 0) {
            printf("# %s: attach: %s\n", label, err.msg);
            attached = false;
        }
    uint64_t cpu_ns = 0;
    if (attached) {
        if (write(go[1], "gg", SPINNERS) != SPINNERS)
            attached = false;
        uint64_t t0 = now_ms();
        while (now_ms() - t0 < SPIN_MS)
            usleep(20000);
        if (cgroup_read_cpu_ns(cg, &cpu_ns, &err) < 0) {
            printf("# %s: read cpu: %s\n", label, err.msg);
            attached = false;
        }
    }
    close(go[1]);
    for (size_t i = 0; i < n; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    return attached ? (long)(cpu_ns / 1000000u) : -1;
}

static void test_mode(int mode)
{
    const char *label = label_of(mode);
    err_t err;
    struct cgroup_host *plain = NULL, *host = NULL;
    if (cgroup_host_open_flags(mode, CGROUP_HOST_CPU_LIMITS, &host, &err) < 0) {
        ok(0, "%s: a host opened for CPU limits (%s)", label, err.msg);
        return;
    }
    enum cgroup_mode m = cgroup_host_mode(host);
    char name[64];
    snprintf(name, sizeof name, "cpu-test-%d-%s", (int)getpid(), label);
    struct cgroup_limits limited = {.cpu_millis = LIMIT_MILLIS};
    struct cgroup *cg = NULL;
    if (cgroup_create(host, NULL, name, &limited, 0, &cg, &err) < 0) {
        /* v2 forced onto this hybrid host's cgroup2, which has no controllers */
        if (m == CGROUP_MODE_V2 && strstr(err.msg, "cpu"))
            printf("ok %d - # SKIP %s: this cgroup2 has no cpu controller (%s)\n", ++tap_count,
                   label, err.msg);
        else
            ok(0, "%s: a group limited to %u thousandths of a CPU (%s)", label, LIMIT_MILLIS,
               err.msg);
        cgroup_host_close(host);
        return;
    }
    char path[4096], text[128] = "";
    if (m == CGROUP_MODE_V2) {
        if (cgroup_file_path(cg, "", "cpu.max", path, sizeof path, &err) == 0)
            file_read_at(AT_FDCWD, path, text, sizeof text, NULL);
        is_str(strtok(text, "\n"), "30000 100000", "%s: cpu.max holds the quota and period", label);
    } else {
        if (cgroup_file_path(cg, "cpu", "cpu.cfs_quota_us", path, sizeof path, &err) == 0)
            file_read_at(AT_FDCWD, path, text, sizeof text, NULL);
        is_str(strtok(text, "\n"), "30000", "%s: cpu.cfs_quota_us holds the quota", label);
    }
    long capped = spin_in(cg, label);
    /* the bound: the quota over the run, and a period's slack on each side */
    long cap = (long)LIMIT_MILLIS * SPIN_MS / 1000 + 2 * 100 * LIMIT_MILLIS / 1000 + 60;
    ok(capped >= 0 && capped <= cap,
       "%s: %d spinners limited to 0.%u CPU use %ld ms of CPU in %d ms (at most %ld)", label,
       SPINNERS, LIMIT_MILLIS / 100, capped, SPIN_MS, cap);
    /* and the limit is what held them (the machine's load may too): the kernel throttled them */
    char stat[1024] = "";
    if (cgroup_file_path(cg, m == CGROUP_MODE_V2 ? "" : "cpu", "cpu.stat", path, sizeof path,
                         &err) == 0)
        file_read_at(AT_FDCWD, path, stat, sizeof stat, NULL);
    const char *t = strstr(stat, "nr_throttled ");
    long throttled = t ? strtol(t + 13, NULL, 10) : -1;
    ok(throttled > 0, "%s: the kernel throttled the group %ld times in its periods", label,
       throttled);
    cgroup_destroy(cg, NULL); /* frees it */
    cgroup_host_close(host);

    if (m == CGROUP_MODE_V2)
        return; /* v2 needs no flag for CPU limits */
    if (cgroup_host_open(mode, &plain, &err) < 0) {
        ok(0, "%s: a host opened without CPU limits (%s)", label, err.msg);
        return;
    }
    snprintf(name, sizeof name, "cpu-refused-%d-%s", (int)getpid(), label);
    int rc = cgroup_create(plain, NULL, name, &limited, 0, &cg, &err);
    ok(rc < 0 && err.errnum == EINVAL && strstr(err.msg, "CGROUP_HOST_CPU_LIMITS"),
       "%s: a CPU limit on a host opened without CGROUP_HOST_CPU_LIMITS is refused (%s)", label,
       rc < 0 ? err.msg : "made");
    if (rc == 0) {
        cgroup_destroy(cg, NULL); /* frees it */
    }
    cgroup_host_close(plain);
}

int main(void)
{
    struct cgroup_host *host = NULL;
    err_t err;
    ok(cgroup_host_open_flags(CGROUP_MODE_DETECT, 1u << 7, &host, &err) < 0 && !host &&
           err.errnum == EINVAL,
       "unknown host flags are refused (%s)", err.msg);
    enum cgroup_mode own;
    if (cgroup_detect(&own, &err) < 0) {
        ok(0, "cgroup_detect (%s)", err.msg);
        return 1;
    }
    test_mode(CGROUP_MODE_DETECT);
    /* the other modes this host can carry: a hybrid host carries v1 and v2 too */
    if (own == CGROUP_MODE_HYBRID) {
        test_mode(CGROUP_MODE_V1);
        test_mode(CGROUP_MODE_V2);
    }
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}
