/* Agent sandboxes (created with no command) held the way a daemon holds them: started with
 * jail_start_begin and jail_start_complete, destroyed with the non-blocking steps. Each is in the
 * registry (engine_registry.c) from before its first step until its last. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/run_options.h"
#include "engine.h"
#include "util/fileio.h"

#define SETUP_WAIT_MS    30000 /* the library's own setup deadline is JAIL_SETUP_TIMEOUT_MS */
#define REMOVE_RETRY_MS  2
#define DESTROY_PHASE_MS 60000

/* ---------- start ---------- */

static int socket_path(const struct bench_sandbox *s, struct sockaddr_un *addr, err_t *err)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    int n = snprintf(addr->sun_path, sizeof addr->sun_path, "%s/%s.sock", bench.run_dir, s->name);
    if (n < 0 || (size_t)n >= sizeof addr->sun_path)
        return err_set(err, ENAMETOOLONG, "socket path in %s", bench.run_dir);
    return 0;
}

/* The socket init serves the protocol on, bound where only root reaches it (the run dir). */
static int make_listener(const struct bench_sandbox *s, err_t *err)
{
    struct sockaddr_un addr;
    if (socket_path(s, &addr, err) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(err, errno, "socket");
    unlink(addr.sun_path); /* one a crashed run left */
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 8) < 0) {
        int saved = errno;
        close(fd);
        return err_set(err, saved, "bind %s", addr.sun_path);
    }
    return fd;
}

static void unlink_socket(const struct bench_sandbox *s)
{
    struct sockaddr_un addr;
    if (socket_path(s, &addr, NULL) == 0)
        unlink(addr.sun_path);
}

int sandbox_begin(struct bench_sandbox *s, const char *name, err_t *err)
{
    memset(s, 0, sizeof *s);
    s->jail.pidfd = s->jail.control_fd = s->jail.output_dirfd = s->jail.keeper_fd = -1;
    s->uids.lock_fd = -1;
    s->events_fd = -1;
    s->slot = -1;
    s->next_request = 1;
    snprintf(s->name, sizeof s->name, "%s", name);
    /* In the registry before the call: a begin cut short may have made a group already. */
    if (registry_add(s) < 0)
        return err_set(err, ENOSPC, "more than %d sandboxes", BENCH_MAX_SANDBOXES);
    s->begin_ns = jail_now_ns();
    if (uid_range_acquire(bench.lock_path, &s->uids, err) < 0) {
        registry_remove(s);
        return -1;
    }
    s->acquired_ns = jail_now_ns();
    int listen_fd = make_listener(s, err);
    if (listen_fd < 0) {
        uid_range_release(&s->uids);
        registry_remove(s);
        return -1;
    }
    /* hutch run's default limits, so that both sandboxes cost the kernel the same. A cgroup2
     * forced on a hybrid host has no controllers: no memory or pids limits there. */
    bool limits = !bench.mode_forced || bench.mode != CGROUP_MODE_V2;
    struct jail_spec spec = {
        .cgroups = bench.host,
        .name = s->name,
        .template_dir = bench.tpl.rootfs,
        .usr_dir = "/usr",
        .stage_dir = bench.tpl.stage,
        .limits = {.memory_bytes = limits ? RUN_DEFAULT_MEMORY : 0,
                   .pids = limits ? RUN_DEFAULT_PIDS : 0,
                   .disk_bytes = RUN_DEFAULT_DISK,
                   .nofile = RUN_DEFAULT_NOFILE},
        .net = JAIL_NET_NONE,
        .host_uid_base = s->uids.host_base,
        .seccomp = SECCOMP_PROFILE_DEFAULT,
        .argv = NULL,
        .envp = bench_command_env,
        .stdin_fd = bench.null_fd,
        .stdout_fd = bench.null_fd,
        .stderr_fd = bench.null_fd,
        .die_with_parent = false,
        .keep_fd = -1,
        .listen_fd = listen_fd,
        .hold_fd = s->uids.lock_fd,
    };
    s->state = SB_STARTING;
    int rc = jail_start_begin(&spec, &s->jail, err);
    s->begun_ns = jail_now_ns();
    close(listen_fd); /* init has its own */
    if (rc < 0) {
        /* jail_start_begin leaves nothing behind on failure */
        unlink_socket(s);
        uid_range_release(&s->uids);
        registry_remove(s);
        s->state = SB_EMPTY;
        return -1;
    }
    return 0;
}

int sandbox_complete(struct bench_sandbox *s, err_t *err)
{
    int rc = jail_start_complete(&s->jail, err);
    if (rc == 0) {
        s->state = SB_READY;
        s->ready_ns = jail_now_ns();
    } else if (rc < 0) {
        s->state = SB_FAILED;
    }
    return rc;
}

int sandbox_start(struct bench_sandbox *s, const char *name, err_t *err)
{
    if (sandbox_begin(s, name, err) < 0)
        return -1;
    uint64_t deadline = jail_now_ns() + SETUP_WAIT_MS * 1000000ull;
    int rc;
    while ((rc = sandbox_complete(s, err)) == 1) {
        if (bench_stopping || jail_now_ns() >= deadline) {
            err_set(err, bench_stopping ? EINTR : ETIMEDOUT, "sandbox %s: not ready", s->name);
            rc = -1;
            break;
        }
        struct pollfd p = {.fd = s->jail.control_fd, .events = POLLIN};
        poll(&p, 1, 100);
    }
    if (rc == 0)
        return 0;
    sandboxes_destroy(s, 1, 1);
    return -1;
}

size_t sandboxes_start(struct bench_sandbox *set, size_t n, const char *tag, size_t in_flight,
                       err_t *err)
{
    struct pollfd *pfd = calloc(in_flight, sizeof *pfd);
    size_t *of = calloc(in_flight, sizeof *of);
    size_t next = 0, busy = 0, ready = 0;
    bool failed = false;
    uint64_t deadline = jail_now_ns() + (SETUP_WAIT_MS + 50ull * n) * 1000000ull;
    if (!pfd || !of) {
        err_set(err, ENOMEM, "start %zu sandboxes", n);
        goto out;
    }
    while ((next < n && !failed && !bench_stopping) || busy > 0) {
        if (next < n && busy < in_flight && !failed && !bench_stopping) {
            char name[48];
            snprintf(name, sizeof name, "%s%s%zu", bench.prefix, tag, next);
            err_t e = {0};
            if (sandbox_begin(&set[next], name, &e) < 0) {
                *err = e;
                failed = true;
            } else {
                busy++;
            }
            next++;
            continue; /* begin the next before waiting on anything */
        }
        size_t m = 0;
        for (size_t i = 0; i < next && m < in_flight; i++)
            if (set[i].state == SB_STARTING) {
                pfd[m] = (struct pollfd){.fd = set[i].jail.control_fd, .events = POLLIN};
                of[m++] = i;
            }
        poll(pfd, m, 100);
        bool late = jail_now_ns() >= deadline;
        for (size_t k = 0; k < m; k++) {
            if (!pfd[k].revents && !late)
                continue;
            err_t e = {0};
            int rc = sandbox_complete(&set[of[k]], &e);
            if (rc == 1 && !late)
                continue;
            busy--;
            if (rc == 0) {
                ready++;
                continue;
            }
            if (!failed)
                err_set(err, e.errnum ? e.errnum : ETIMEDOUT, "sandbox %s: %s", set[of[k]].name,
                        rc == 1 ? "not ready in time" : e.msg);
            set[of[k]].state = SB_FAILED;
            failed = true;
        }
    }
    if (!failed && ready < n)
        err_set(err, EINTR, "stopped by a signal");
out:
    free(pfd);
    free(of);
    return ready;
}

/* ---------- destroy ---------- */

static void sandbox_release(struct bench_sandbox *s)
{
    if (s->events_fd >= 0)
        close(s->events_fd);
    s->events_fd = -1;
    jail_close(&s->jail);
    uid_range_release(&s->uids);
    unlink_socket(s);
    s->command_group[0] = '\0';
    registry_remove(s);
    s->state = SB_EMPTY;
}

static bool destroyable(const struct bench_sandbox *s)
{
    return s->state == SB_STARTING || s->state == SB_READY;
}

static void try_remove(struct bench_sandbox *s)
{
    err_t err = {0};
    if (jail_remove(&s->jail, &err) == 0) {
        sandbox_release(s);
        return;
    }
    if (err.errnum != EBUSY) {
        fprintf(stderr, "bench engine: %s: jail_remove: %s\n", s->name, err.msg);
        s->state = SB_FAILED;
        return;
    }
    if (s->state != SB_REMOVING && bench.mode != CGROUP_MODE_V1)
        s->events_fd = cgroup_open_events_fd(s->jail.cgroup, NULL);
    s->state = SB_REMOVING;
}

size_t sandboxes_destroy(struct bench_sandbox *set, size_t n, size_t dying)
{
    struct pollfd *pfd = calloc(n, sizeof *pfd);
    size_t next = 0, under_way = 0, fallbacks = 0;
    uint64_t deadline = jail_now_ns() + (DESTROY_PHASE_MS + 20ull * n) * 1000000ull;
    while (pfd) {
        for (; next < n && under_way < dying; next++) {
            struct bench_sandbox *s = &set[next];
            if (!destroyable(s))
                continue;
            err_t err = {0};
            if (jail_kill(&s->jail, &err) < 0) {
                fprintf(stderr, "bench engine: %s: jail_kill: %s\n", s->name, err.msg);
                s->state = SB_FAILED;
                continue;
            }
            s->state = SB_KILLED;
            under_way++;
        }
        size_t m = 0;
        bool removing = false;
        for (size_t i = 0; i < next; i++) {
            struct bench_sandbox *s = &set[i];
            removing |= s->state == SB_REMOVING;
            if (s->state == SB_KILLED)
                pfd[m++] = (struct pollfd){.fd = s->jail.pidfd, .events = POLLIN};
            else if (s->state == SB_REMOVING && s->events_fd >= 0)
                pfd[m++] = (struct pollfd){.fd = s->events_fd, .events = POLLPRI};
        }
        if (m == 0 && !removing && next == n)
            break;
        if (jail_now_ns() >= deadline) {
            fprintf(stderr, "bench engine: destroy: still under way after %llu ms\n",
                    (unsigned long long)(DESTROY_PHASE_MS + 20ull * n));
            break;
        }
        /* EBUSY is retried after the next event or a short timer, never in a spin. */
        poll(pfd, m, removing ? REMOVE_RETRY_MS : 100);
        for (size_t i = 0; i < next; i++) {
            struct bench_sandbox *s = &set[i];
            if (s->state == SB_REMOVING) {
                if (s->events_fd >= 0) {
                    char buf[256];
                    (void)!pread(s->events_fd, buf, sizeof buf, 0); /* re-arms POLLPRI */
                }
                try_remove(s);
            } else if (s->state == SB_KILLED) {
                err_t err = {0};
                int rc = jail_reap_init(&s->jail, &err);
                if (rc == 0)
                    continue;
                if (rc < 0 && !s->jail.init_reaped) {
                    fprintf(stderr, "bench engine: %s: jail_reap_init: %s\n", s->name, err.msg);
                    s->state = SB_FAILED;
                } else {
                    try_remove(s);
                }
            } else {
                continue;
            }
            if (s->state != SB_REMOVING && s->state != SB_KILLED)
                under_way--;
        }
    }
    free(pfd);
    /* Whatever a step failed (or the deadline cut): the blocking composition, bounded. */
    for (size_t i = 0; i < n; i++) {
        struct bench_sandbox *s = &set[i];
        if (s->state == SB_EMPTY)
            continue;
        fallbacks++;
        err_t err = {0};
        if (jail_destroy(&s->jail, &err) < 0)
            fprintf(stderr, "bench engine: %s: jail_destroy: %s\n", s->name, err.msg);
        jail_reap(&s->jail);
        sandbox_release(s);
    }
    return fallbacks;
}

size_t sandbox_pids(struct bench_sandbox *s, int *pids, size_t max)
{
    char path[PATH_MAX], text[4096];
    const char *controller = bench.mode == CGROUP_MODE_V1 ? "pids" : "";
    if (!s->jail.init_cgroup || cgroup_file_path(s->jail.init_cgroup, controller, "cgroup.procs",
                                                 path, sizeof path, NULL) < 0)
        return 0;
    if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0)
        return 0;
    size_t n = 0;
    for (char *p = text; *p && n < max;) {
        long pid = strtol(p, &p, 10);
        if (pid <= 0)
            break;
        pids[n++] = (int)pid;
        while (*p == '\n')
            p++;
    }
    return n;
}
