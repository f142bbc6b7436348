/* The registry of every sandbox that may have left something on the host, and its cleanup with
 * system calls only, for a signal handler (a second Ctrl-C, or the watchdog): SIGKILL through
 * init's pidfd, thaw, cgroup.kill, rmdir of each group in every hierarchy, the socket files. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

static struct bench_sandbox *volatile registry[BENCH_MAX_SANDBOXES];
static size_t registry_hint;

int registry_add(struct bench_sandbox *s)
{
    for (size_t k = 0; k < BENCH_MAX_SANDBOXES; k++) {
        size_t i = (registry_hint + k) % BENCH_MAX_SANDBOXES;
        if (!registry[i]) {
            registry[i] = s;
            s->slot = (int)i;
            registry_hint = i + 1;
            return 0;
        }
    }
    return -1;
}

void registry_remove(struct bench_sandbox *s)
{
    if (s->slot >= 0)
        registry[s->slot] = NULL;
    s->slot = -1;
}

/* ---------- the signal handler's cleanup ---------- */

/* a, sep, b into out: snprintf is not on the async-signal-safe list. */
static void join(char *out, size_t size, const char *a, const char *sep, const char *b)
{
    size_t n = 0;
    for (const char *const *part = (const char *const[]){a, sep, b, NULL}; *part; part++)
        for (const char *p = *part; *p && n + 1 < size; p++)
            out[n++] = *p;
    out[n] = '\0';
}

static void write_at(int dirfd, const char *dir, const char *file, const char *value)
{
    char path[160];
    join(path, sizeof path, dir, "/", file);
    int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, value, strlen(value));
        close(fd);
    }
}

void sandboxes_emergency(void)
{
    int hier[CGROUP_HOST_MAX_FDS];
    size_t n_hier = bench.host ? cgroup_host_fds(bench.host, hier, CGROUP_HOST_MAX_FDS) : 0;
    for (size_t i = 0; i < BENCH_MAX_SANDBOXES; i++) {
        struct bench_sandbox *s = registry[i];
        if (s && s->jail.pidfd >= 0)
            syscall(SYS_pidfd_send_signal, s->jail.pidfd, SIGKILL, NULL, 0);
    }
    for (int attempt = 0; attempt < 300; attempt++) {
        bool left = false;
        for (size_t i = 0; i < BENCH_MAX_SANDBOXES; i++) {
            struct bench_sandbox *s = registry[i];
            if (!s)
                continue;
            for (size_t h = 0; h < n_hier; h++) {
                char path[160];
                /* A v1 freezer keeps a frozen task's SIGKILL pending until it is thawed. */
                write_at(hier[h], s->name, "freezer.state", "THAWED");
                write_at(hier[h], s->name, "cgroup.freeze", "0");
                write_at(hier[h], s->name, "cgroup.kill", "1");
                if (s->command_group[0]) {
                    join(path, sizeof path, s->name, "/", s->command_group);
                    unlinkat(hier[h], path, AT_REMOVEDIR);
                }
                join(path, sizeof path, s->name, "/", "init");
                unlinkat(hier[h], path, AT_REMOVEDIR);
                if (unlinkat(hier[h], s->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                    left = true;
            }
        }
        if (!left)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < BENCH_MAX_SANDBOXES; i++) {
        struct bench_sandbox *s = registry[i];
        if (!s)
            continue;
        char sock[64];
        join(sock, sizeof sock, s->name, "", ".sock");
        unlinkat(bench.run_dir_fd, sock, 0);
    }
}
