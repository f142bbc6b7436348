/* The spawner's table of the commands' cgroup fds (sudo_groups.h). */
#include "init/sudo_groups.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "jail/jail.h"

static struct sudo_group *groups;
static size_t n_groups, cap_groups, fds_held;

/* At most half the spawner's fds go to the table: a command's pipes must always find room. */
static size_t fd_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return 512;
    return rl.rlim_cur > 64 ? (size_t)(rl.rlim_cur / 2) : 0;
}

void sudo_groups_add(uint32_t cmd_id, const char *name, const int *fds, bool has_dir, unsigned n_v1)
{
    size_t n = (has_dir ? 1 : 0) + n_v1;
    if (cmd_id == 0 || !name[0] || strlen(name) > 32 || n == 0 || n > 1 + PROTO_MAX_V1_FDS ||
        fds_held + n > fd_budget() || n_groups >= JAIL_MAX_COMMANDS)
        return;
    if (n_groups == cap_groups) {
        size_t cap = cap_groups ? 2 * cap_groups : 16;
        struct sudo_group *more = realloc(groups, cap * sizeof *more);
        if (!more)
            return;
        groups = more;
        cap_groups = cap;
    }
    struct sudo_group *g = &groups[n_groups];
    memset(g, 0, sizeof *g);
    for (size_t i = 0; i < n; i++) {
        g->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
        if (g->fds[i] < 0) {
            while (i--)
                close(g->fds[i]);
            return;
        }
    }
    g->cmd_id = cmd_id;
    snprintf(g->name, sizeof g->name, "%s", name);
    g->has_dir = has_dir;
    g->n_v1 = n_v1;
    n_groups++;
    fds_held += n;
}

void sudo_groups_forget(uint32_t cmd_id)
{
    for (size_t i = 0; i < n_groups; i++) {
        if (groups[i].cmd_id != cmd_id)
            continue;
        size_t n = (groups[i].has_dir ? 1 : 0) + groups[i].n_v1;
        for (size_t k = 0; k < n; k++)
            close(groups[i].fds[k]);
        fds_held -= n;
        groups[i] = groups[--n_groups];
        return;
    }
}

/* A small proc file, whole, NUL-terminated; -1 if it does not fit. */
static int read_proc(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t n;
    while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    if (len == cap - 1)
        return -1;
    buf[len] = '\0';
    return 0;
}

/* The line of text whose "ID:CONTROLLERS:" head is head's (a line of our own file), or NULL. */
static const char *line_with_head(const char *text, const char *head, size_t head_len)
{
    for (const char *l = text; *l; l = strchrnul(l, '\n'), l += *l ? 1 : 0)
        if (strncmp(l, head, head_len) == 0)
            return l;
    return NULL;
}

const struct sudo_group *sudo_groups_of(pid_t pid, err_t *err)
{
    char self[4096], peer[4096], path[48];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    if (read_proc("/proc/self/cgroup", self, sizeof self) < 0)
        return err_set(err, errno, "read the spawner's own cgroups"), NULL;
    if (read_proc(path, peer, sizeof peer) < 0)
        return err_set(err, errno ? errno : E2BIG, "read the caller's cgroups"), NULL;
    /* Each hierarchy where we sit in P/init: the caller must be in P/NAME, NAME a command's. */
    for (const char *l = self; *l; l = strchrnul(l, '\n'), l += *l ? 1 : 0) {
        const char *end = strchrnul(l, '\n');
        const char *c1 = memchr(l, ':', (size_t)(end - l));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        if (!c2 || end - c2 - 1 < 5 || memcmp(end - 5, "/init", 5) != 0)
            continue;
        size_t head_len = (size_t)(c2 + 1 - l), prefix_len = (size_t)(end - 4 - (c2 + 1));
        const char *p = line_with_head(peer, l, head_len);
        if (!p)
            continue;
        const char *ppath = p + head_len, *pend = strchrnul(p, '\n');
        if ((size_t)(pend - ppath) <= prefix_len || memcmp(ppath, c2 + 1, prefix_len) != 0)
            continue;
        const char *name = ppath + prefix_len;
        size_t name_len = (size_t)(pend - name);
        if (name_len > 32 || memchr(name, '/', name_len))
            continue;
        for (size_t i = 0; i < n_groups; i++)
            if (strlen(groups[i].name) == name_len && memcmp(groups[i].name, name, name_len) == 0)
                return &groups[i];
    }
    err_set(err, ESRCH, "the caller is in no running command's cgroup");
    return NULL;
}
