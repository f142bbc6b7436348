/* The blocking compositions of the cgroup steps, for callers that may wait: `hutch run`, the
 * keeper, doctor and tests. Each wait is bounded and sleeps in poll(): on cgroup.events where
 * the group has one (its POLLPRI wakes us on a change), otherwise in short growing steps. An
 * event loop uses the steps themselves (cgroup.h) and never these. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "jail/cgroup_internal.h"

/* Long enough for a loaded machine, short enough that a stuck task turns into an error. */
#define CGROUP_EMPTY_TIMEOUT_MS  2000 /* kill: until no process is left */
#define CGROUP_FROZEN_TIMEOUT_MS 2000 /* freeze: until every task is frozen */
#define CGROUP_RMDIR_TIMEOUT_MS  1000 /* rmdir: exiting tasks leave the group asynchronously */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits for the next change: POLLPRI on events_fd, or a step of 1 ms doubling to 16 ms.
 * Even with events_fd the wait is bounded (64 ms): some changes raise no event there (v1
 * groups on hybrid; an rmdir that said EBUSY after the last event). */
static void wait_change(int events_fd, unsigned *step_ms, uint64_t deadline)
{
    uint64_t now = now_ms();
    unsigned left = deadline > now ? (unsigned)(deadline - now) : 0;
    if (*step_ms == 0)
        *step_ms = 1;
    unsigned cap = events_fd >= 0 ? 64 : *step_ms;
    int timeout = (int)(cap < left ? cap : left);
    struct pollfd pfd = {.fd = events_fd, .events = POLLPRI};
    int n = poll(events_fd >= 0 ? &pfd : NULL, events_fd >= 0 ? 1 : 0, timeout);
    /* kernfs keeps reporting POLLPRI until the file is read again: without this read every
     * later poll returns at once, and the wait turns into a busy loop. */
    if (n > 0 && (pfd.revents & POLLPRI))
        cgroup_events_rearm(events_fd);
    if (*step_ms < 16)
        *step_ms *= 2;
}

/* Until check(cg) says done (1), an error (-1), or the deadline; events_fd may be -1. */
static int wait_until(struct cgroup *cg, int (*check)(struct cgroup *, err_t *),
                      uint64_t timeout_ms, const char *what, err_t *err)
{
    int events_fd = cgroup_open_events_fd(cg, NULL);
    uint64_t deadline = now_ms() + timeout_ms;
    unsigned step = 0;
    int rc;
    for (;;) {
        rc = check(cg, err);
        if (rc != 0)
            break;
        if (now_ms() >= deadline) {
            rc = cgroup_error(err, ETIMEDOUT, "cgroup " CGROUP_PARENT "/%s: still %s after %llu ms",
                              cg->path, what, (unsigned long long)timeout_ms);
            break;
        }
        wait_change(events_fd, &step, deadline);
    }
    if (events_fd >= 0)
        close(events_fd);
    return rc < 0 ? -1 : 0;
}

/* Empty yet? Without an atomic kill, whoever is still there is killed again. */
static int check_empty_killing(struct cgroup *cg, err_t *err)
{
    bool populated;
    if (cgroup_populated(cg, &populated, err) < 0)
        return -1;
    if (!populated)
        return 1;
    bool atomic;
    if (cgroup_kill_start(cg, &atomic, err) < 0)
        return -1;
    return 0;
}

int cgroup_kill(struct cgroup *cg, err_t *err)
{
    if (cgroup_kill_start(cg, NULL, err) < 0)
        return -1;
    return wait_until(cg, check_empty_killing, CGROUP_EMPTY_TIMEOUT_MS, "populated", err);
}

static int check_frozen(struct cgroup *cg, err_t *err)
{
    bool frozen;
    if (cgroup_frozen(cg, &frozen, err) < 0)
        return -1;
    return frozen ? 1 : 0;
}

int cgroup_set_frozen(struct cgroup *cg, bool frozen, err_t *err)
{
    if (cgroup_freeze_start(cg, frozen, err) < 0)
        return -1;
    if (!frozen)
        return 0;
    if (wait_until(cg, check_frozen, CGROUP_FROZEN_TIMEOUT_MS, "not frozen", err) < 0) {
        /* Half frozen is the worst state to leave behind: undo. */
        cgroup_freeze_start(cg, false, NULL);
        return -1;
    }
    return 0;
}

static int check_removed(struct cgroup *cg, err_t *err)
{
    err_t local;
    if (cgroup_remove(cg, &local) == 0)
        return 1;
    if (local.errnum == EBUSY)
        return 0;
    if (err)
        *err = local;
    return -1;
}

int cgroup_destroy(struct cgroup *cg, err_t *err)
{
    if (!cg)
        return 0;
    /* The common case needs no kill: the sandbox's processes are gone, which one read says. */
    bool populated = true;
    int rc = 0;
    if (cgroup_populated(cg, &populated, NULL) < 0 || populated)
        rc = cgroup_kill(cg, err);
    /* Try the rmdirs even if the kill failed: an empty hierarchy still goes away. */
    if (wait_until(cg, check_removed, CGROUP_RMDIR_TIMEOUT_MS, "busy", rc < 0 ? NULL : err) < 0)
        rc = -1;
    cgroup_free(cg);
    return rc;
}

int cgroup_remove_by_name(struct cgroup_host *host, const char *path, err_t *err)
{
    struct cgroup *cg;
    if (cgroup_open(host, path, 0, &cg, err) < 0)
        return -1;
    return cgroup_destroy(cg, err);
}
