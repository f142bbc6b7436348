/* The common half of the cgroup module: mode detection, the host (hierarchies opened once, the
 * mode's table of operations), groups and their paths, the public entry points that dispatch to
 * the table, and the fd-relative file helpers every mode uses. */
#include "jail/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "jail/cgroup_internal.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/strfmt.h"

#define CGROUP_FS_ROOT    "/sys/fs/cgroup"
#define CGROUP_FS_UNIFIED "/sys/fs/cgroup/unified"
#define CGROUP_MAX_DEPTH  4 /* hutch/NAME/cmd-N is 2; the recursive walks stop here */

const char *const cgroup_v1_controller_names[CGROUP_V1_COUNT] = {
    [CGROUP_V1_MEMORY] = "memory",   [CGROUP_V1_PIDS] = "pids", [CGROUP_V1_CPUACCT] = "cpuacct",
    [CGROUP_V1_FREEZER] = "freezer", [CGROUP_V1_CPU] = "cpu",
};

/* ---------- small helpers ---------- */

int cgroup_error(err_t *err, int errnum, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->errnum = errnum;
    return -1;
}

int cgroup_parse_key(const char *text, const char *key, uint64_t *out)
{
    size_t key_len = strlen(key);
    for (const char *line = text; line; line = strchr(line, '\n')) {
        line += line[0] == '\n'; /* step over the newline strchr stopped at */
        if (strncmp(line, key, key_len) != 0 || line[key_len] != ' ')
            continue;
        const char *value = line + key_len + 1;
        if (*value < '0' || *value > '9')
            return -1;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (errno != 0 || (*end != '\n' && *end != '\0'))
            return -1;
        *out = v;
        return 0;
    }
    return -1;
}

bool cgroup_list_has(const char *list, const char *word)
{
    size_t len = strlen(word);
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, " ,\n");
        if (n == len && strncmp(p, word, len) == 0)
            return true;
        p += n;
        p += strspn(p, " ,\n");
    }
    return false;
}

/* ---------- files of one group, relative to its hierarchy's hutch/ ---------- */

int cgroup_fail(const struct cgroup *cg, const struct cgroup_hier *h, err_t *err)
{
    if (h->label[0])
        return err_wrap(err, "cgroup %s:" CGROUP_PARENT "/%s", h->label, cg->path);
    return err_wrap(err, "cgroup " CGROUP_PARENT "/%s", cg->path);
}

/* "PATH/FILE", or "PATH" for FILE "". Paths are bounded at creation, so this always fits. */
static const char *cgroup_rel(const struct cgroup *cg, const char *file, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s", cg->path, file[0] ? "/" : "", file);
    return buf;
}

int cgroup_mkdir(const struct cgroup *cg, const struct cgroup_hier *h, bool *made, err_t *err)
{
    char rel[CGROUP_PATH_MAX + 64];
    /* EEXIST means another sandbox owns the name: never adopt its group. */
    if (mkdirat(h->fd, cgroup_rel(cg, "", rel, sizeof rel), 0755) < 0) {
        err_set(err, errno, "mkdir");
        return cgroup_fail(cg, h, err);
    }
    *made = true;
    return 0;
}

int cgroup_open_file(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                     int flags)
{
    char rel[CGROUP_PATH_MAX + 64];
    return openat(h->fd, cgroup_rel(cg, file, rel, sizeof rel), flags | O_CLOEXEC | O_NOFOLLOW);
}

int cgroup_write(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                 const char *value, bool optional, err_t *err)
{
    char rel[CGROUP_PATH_MAX + 64];
    err_t local;
    if (file_write_str_at(h->fd, cgroup_rel(cg, file, rel, sizeof rel), value, &local) == 0)
        return 1;
    /* Only open() reports ENOENT, so this is "the kernel has no such file". */
    if (optional && local.errnum == ENOENT)
        return 0;
    if (err)
        *err = local;
    return cgroup_fail(cg, h, err);
}

int cgroup_write_u64(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                     uint64_t value, bool optional, err_t *err)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)value);
    return cgroup_write(cg, h, file, buf, optional, err);
}

int cgroup_read(const struct cgroup *cg, const struct cgroup_hier *h, const char *file, char *buf,
                size_t size, bool optional, err_t *err)
{
    char rel[CGROUP_PATH_MAX + 64];
    err_t local;
    if (file_read_at(h->fd, cgroup_rel(cg, file, rel, sizeof rel), buf, size, &local) >= 0)
        return 1;
    buf[0] = '\0';
    if (optional && local.errnum == ENOENT)
        return 0;
    if (err)
        *err = local;
    return cgroup_fail(cg, h, err);
}

int cgroup_read_u64(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                    uint64_t *out, bool optional, err_t *err)
{
    char buf[64];
    *out = 0;
    int r = cgroup_read(cg, h, file, buf, sizeof buf, optional, err);
    if (r <= 0)
        return r;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno != 0 || end == buf || (*end != '\n' && *end != '\0')) {
        cgroup_error(err, EINVAL, "%s: not a number: \"%.20s\"", file, buf);
        return cgroup_fail(cg, h, err);
    }
    *out = v;
    return 1;
}

int cgroup_read_key(const struct cgroup *cg, const struct cgroup_hier *h, const char *file,
                    const char *key, uint64_t *out, bool optional, err_t *err)
{
    char buf[4096];
    *out = 0;
    int r = cgroup_read(cg, h, file, buf, sizeof buf, optional, err);
    if (r <= 0)
        return r;
    if (cgroup_parse_key(buf, key, out) < 0)
        *out = 0; /* an older kernel without this key (e.g. oom_kill before 4.13) */
    return 1;
}

/* One line of cgroup.procs: a pid. Anything else is a kernel we do not understand. */
static int cgroup_procs_line(const char *line, pid_t *pid)
{
    char *end;
    errno = 0;
    long v = strtol(line, &end, 10);
    if (errno != 0 || end == line || v <= 0 || v > INT32_MAX || (*end != '\n' && *end != '\0'))
        return -1;
    *pid = (pid_t)v;
    return 0;
}

/* SIGKILL by pid. A pid read from cgroup.procs cannot be reused until its parent reaps it, so a
 * stranger is hit only if a reap and a full wrap of the pid counter both fall between our read
 * and the kill. pidfds would close even that window, at two syscalls per process. */
static int cgroup_kill_pid(pid_t pid)
{
    /* A bad attach must not make the caller shoot itself. */
    if (pid == getpid()) {
        errno = EPERM;
        return -1;
    }
    if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
        return -1;
    return 0;
}

/* cgroup.procs of the directory dirfd (a group), then of its subdirectories. */
static int cgroup_scan_dir(int dirfd, int depth, bool recursive, bool kill_them, size_t *count,
                           err_t *err)
{
    int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open cgroup.procs");
    cleanup_file FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return err_set(err, errno, "fdopen cgroup.procs");
    }
    char line[32];
    while (fgets(line, sizeof line, f)) {
        pid_t pid;
        if (cgroup_procs_line(line, &pid) < 0)
            return cgroup_error(err, EINVAL, "cgroup.procs: bad line \"%.20s\"", line);
        (*count)++;
        if (kill_them && cgroup_kill_pid(pid) < 0)
            return err_set(err, errno, "kill %d", (int)pid);
    }
    if (ferror(f))
        return err_set(err, errno, "read cgroup.procs");
    if (!recursive || depth >= CGROUP_MAX_DEPTH)
        return 0;
    int dup_fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0)
        return err_set(err, errno, "open group directory");
    cleanup_dir DIR *dir = fdopendir(dup_fd);
    if (!dir) {
        close(dup_fd);
        return err_set(err, errno, "fdopendir");
    }
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        cleanup_fd int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub < 0) {
            if (errno == ENOENT)
                continue; /* removed meanwhile */
            return err_set(err, errno, "open %s", de->d_name);
        }
        if (cgroup_scan_dir(sub, depth + 1, true, kill_them, count, err) < 0)
            return err_wrap(err, "%s", de->d_name);
    }
    return 0;
}

int cgroup_scan_procs(const struct cgroup *cg, const struct cgroup_hier *h, bool recursive,
                      bool kill_them, size_t *count, err_t *err)
{
    *count = 0;
    cleanup_fd int dirfd = cgroup_open_file(cg, h, "", O_RDONLY | O_DIRECTORY);
    if (dirfd < 0) {
        err_set(err, errno, "open");
        return cgroup_fail(cg, h, err);
    }
    if (cgroup_scan_dir(dirfd, 0, recursive, kill_them, count, err) < 0)
        return cgroup_fail(cg, h, err);
    return 0;
}

int cgroup_for_each_child(const struct cgroup *cg, void (*fn)(const char *name, void *user),
                          void *user, err_t *err)
{
    const struct cgroup_hier *h =
        cg->host->mode != CGROUP_MODE_V1 && cg->made_v2 ? &cg->host->v2 : NULL;
    for (size_t i = 0; !h && i < cg->host->v1_count; i++)
        if (cg->made_v1[i])
            h = &cg->host->v1[i];
    if (!h)
        return 0; /* nothing made: no children */
    int fd = cgroup_open_file(cg, h, "", O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        err_set(err, errno, "open");
        return cgroup_fail(cg, h, err);
    }
    cleanup_dir DIR *dir = fdopendir(fd);
    if (!dir) {
        close(fd);
        return cgroup_error(err, errno, "cgroup %s: fdopendir", cg->path);
    }
    struct dirent *de;
    while ((de = readdir(dir)))
        if (de->d_type == DT_DIR && de->d_name[0] != '.')
            fn(de->d_name, user);
    return 0;
}

/* ---------- mode detection ---------- */

const char *cgroup_mode_name(enum cgroup_mode mode)
{
    switch (mode) {
    case CGROUP_MODE_V1:
        return "v1";
    case CGROUP_MODE_HYBRID:
        return "hybrid";
    case CGROUP_MODE_V2:
        return "v2";
    }
    return "unknown";
}

static bool cgroup_is_cgroup2(const char *path)
{
    struct statfs st;
    return statfs(path, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}

int cgroup_mode_parse(const char *text, enum cgroup_mode *mode, err_t *err)
{
    static const enum cgroup_mode modes[] = {CGROUP_MODE_V1, CGROUP_MODE_HYBRID, CGROUP_MODE_V2};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(text, cgroup_mode_name(modes[i])) == 0) {
            *mode = modes[i];
            return 0;
        }
    }
    return cgroup_error(err, EINVAL, "cgroup mode \"%.40s\" is not v1, v2 or hybrid", text);
}

int cgroup_detect(enum cgroup_mode *mode, err_t *err)
{
    struct statfs st;
    if (statfs(CGROUP_FS_ROOT, &st) < 0)
        return err_set(err, errno, "cgroup: statfs " CGROUP_FS_ROOT);
    if (st.f_type == CGROUP2_SUPER_MAGIC) {
        *mode = CGROUP_MODE_V2;
        return 0;
    }
    if (st.f_type != TMPFS_MAGIC)
        return cgroup_error(
            err, EINVAL, "cgroup: " CGROUP_FS_ROOT " is neither cgroup2 nor tmpfs (f_type 0x%lx)",
            (unsigned long)st.f_type);
    *mode = cgroup_is_cgroup2(CGROUP_FS_UNIFIED) ? CGROUP_MODE_HYBRID : CGROUP_MODE_V1;
    return 0;
}

/* The cgroup2 mount: /sys/fs/cgroup on V2, /sys/fs/cgroup/unified on hybrid. Looking at both
 * lets a forced mode use whatever this host has. */
static const char *cgroup_v2_root(err_t *err)
{
    if (cgroup_is_cgroup2(CGROUP_FS_ROOT))
        return CGROUP_FS_ROOT;
    if (cgroup_is_cgroup2(CGROUP_FS_UNIFIED))
        return CGROUP_FS_UNIFIED;
    cgroup_error(err, ENOENT,
                 "cgroup v2: no cgroup2 mounted at " CGROUP_FS_ROOT " or " CGROUP_FS_UNIFIED);
    return NULL;
}

/* ---------- the host ---------- */

static const struct cgroup_ops *cgroup_ops_for(enum cgroup_mode mode)
{
    switch (mode) {
    case CGROUP_MODE_V1:
        return &cgroup_ops_v1;
    case CGROUP_MODE_HYBRID:
        return &cgroup_ops_hybrid;
    case CGROUP_MODE_V2:
        return &cgroup_ops_v2;
    }
    return NULL;
}

void cgroup_host_close(struct cgroup_host *host)
{
    if (!host)
        return;
    if (host->v2.fd >= 0)
        close(host->v2.fd);
    for (size_t i = 0; i < host->v1_count; i++)
        if (host->v1[i].fd >= 0)
            close(host->v1[i].fd);
    free(host);
}

static void cgroup_host_closep(struct cgroup_host **host)
{
    cgroup_host_close(*host);
}

int cgroup_hier_open_parent(struct cgroup_hier *h, int root_fd, err_t *err)
{
    const char *where = h->label[0] ? h->label : "cgroup2";
    if (mkdirat(root_fd, CGROUP_PARENT, 0755) < 0 && errno != EEXIST)
        return err_set(err, errno, "cgroup %s: mkdir " CGROUP_PARENT, where);
    h->fd = openat(root_fd, CGROUP_PARENT, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (h->fd < 0)
        return err_set(err, errno, "cgroup %s: open " CGROUP_PARENT, where);
    return 0;
}

int cgroup_host_open(int mode, struct cgroup_host **out, err_t *err)
{
    return cgroup_host_open_flags(mode, 0, out, err);
}

int cgroup_host_open_flags(int mode, unsigned flags, struct cgroup_host **out, err_t *err)
{
    *out = NULL;
    if (flags & ~(unsigned)CGROUP_HOST_CPU_LIMITS)
        return cgroup_error(err, EINVAL, "cgroup: unknown host flags %#x", flags);
    enum cgroup_mode m;
    if (mode == CGROUP_MODE_DETECT) {
        if (cgroup_detect(&m, err) < 0)
            return -1;
    } else if (!cgroup_ops_for((enum cgroup_mode)mode)) {
        return cgroup_error(err, EINVAL, "cgroup: no mode %d", mode);
    } else {
        m = (enum cgroup_mode)mode;
    }
    __attribute__((cleanup(cgroup_host_closep))) struct cgroup_host *host = calloc(1, sizeof *host);
    if (!host)
        return err_set(err, errno, "cgroup: calloc");
    host->mode = m;
    host->cpu_limits = flags & CGROUP_HOST_CPU_LIMITS;
    host->ops = cgroup_ops_for(m);
    host->v2.fd = -1;
    if (m != CGROUP_MODE_V1) {
        const char *root = cgroup_v2_root(err);
        if (!root)
            return -1;
        cleanup_fd int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
            return err_set(err, errno, "cgroup v2: open %s", root);
        if (cgroup_v2_host_open(host, root_fd, root, err) < 0)
            return -1;
    }
    if (m != CGROUP_MODE_V2 && cgroup_v1_host_open(host, err) < 0)
        return -1;
    *out = steal_pointer(&host);
    return 0;
}

enum cgroup_mode cgroup_host_mode(const struct cgroup_host *host)
{
    return host->mode;
}

size_t cgroup_host_fds(const struct cgroup_host *host, int *fds, size_t max)
{
    size_t n = 0;
    if (host->v2.fd >= 0 && n < max)
        fds[n++] = host->v2.fd;
    for (size_t i = 0; i < host->v1_count && n < max; i++)
        fds[n++] = host->v1[i].fd;
    return n;
}

/* ---------- groups ---------- */

static int cgroup_name_check(const char *name, err_t *err)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > CGROUP_NAME_MAX)
        return cgroup_error(err, EINVAL, "cgroup: name must be 1..%d characters", CGROUP_NAME_MAX);
    /* The name is not echoed until it is known to be printable. */
    size_t good = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
    if (good != len)
        return cgroup_error(
            err, EINVAL, "cgroup: name has a character outside [A-Za-z0-9._-] at offset %zu", good);
    /* A leading dot would allow "." and "..", and hides the group from ls. */
    if (name[0] == '.')
        return cgroup_error(err, EINVAL, "cgroup: name \"%s\" starts with a dot", name);
    return 0;
}

/* Every level of a path below hutch/ is a valid name; at most CGROUP_MAX_DEPTH levels. */
static int cgroup_path_check(const char *path, err_t *err)
{
    if (!path || strlen(path) > CGROUP_PATH_MAX)
        return cgroup_error(err, EINVAL, "cgroup: path must be 1..%d characters", CGROUP_PATH_MAX);
    char copy[CGROUP_PATH_MAX + 1];
    snprintf(copy, sizeof copy, "%s", path);
    int depth = 0;
    char *save = NULL;
    for (char *level = strtok_r(copy, "/", &save); level; level = strtok_r(NULL, "/", &save)) {
        if (cgroup_name_check(level, err) < 0 || ++depth > CGROUP_MAX_DEPTH)
            return depth > CGROUP_MAX_DEPTH
                       ? cgroup_error(err, EINVAL, "cgroup: path is deeper than %d levels",
                                      CGROUP_MAX_DEPTH)
                       : -1;
    }
    if (depth == 0 || path[0] == '/' || path[strlen(path) - 1] == '/' || strstr(path, "//"))
        return cgroup_error(err, EINVAL, "cgroup: \"%.64s\" is not a path of names", path);
    return 0;
}

static struct cgroup *cgroup_alloc(struct cgroup_host *host, const char *path, unsigned flags,
                                   err_t *err)
{
    struct cgroup *cg = calloc(1, sizeof *cg);
    if (!cg) {
        err_set(err, errno, "cgroup %s: calloc", path);
        return NULL;
    }
    cg->host = host;
    cg->flags = flags;
    if (strfmt(cg->path, sizeof cg->path, "%s", path) < 0) { /* checked before: never */
        err_set(err, errno, "cgroup %.64s...", path);
        free(cg);
        return NULL;
    }
    return cg;
}

void cgroup_free(struct cgroup *cg)
{
    free(cg);
}

/* Cleanup for a half-built group in cgroup_create: no process can be in it yet. */
static void cgroup_rollbackp(struct cgroup **cgp)
{
    if (!*cgp)
        return;
    cgroup_remove(*cgp, NULL);
    free(*cgp);
}

static int cgroup_build(struct cgroup_host *host, const struct cgroup *parent, const char *name,
                        const struct cgroup_limits *limits, unsigned flags, bool with_v1,
                        struct cgroup **out, err_t *err)
{
    static const struct cgroup_limits no_limits;
    *out = NULL;
    if (!limits)
        limits = &no_limits;
    if (cgroup_name_check(name, err) < 0)
        return -1;
    char path[CGROUP_PATH_MAX + 2];
    int n =
        snprintf(path, sizeof path, "%s%s%s", parent ? parent->path : "", parent ? "/" : "", name);
    if (n < 0 || (size_t)n > CGROUP_PATH_MAX)
        return cgroup_error(err, ENAMETOOLONG, "cgroup: %s/%s is longer than %d characters",
                            parent ? parent->path : "", name, CGROUP_PATH_MAX);
    if (parent && !(parent->flags & CGROUP_NESTED))
        return cgroup_error(err, EINVAL, "cgroup %s: not made to hold groups (CGROUP_NESTED)",
                            parent->path);
    __attribute__((cleanup(cgroup_rollbackp))) struct cgroup *cg =
        cgroup_alloc(host, path, flags, err);
    if (!cg)
        return -1;
    /* What the parent hands down; the top groups get what hutch/ has. */
    cg->v2_controllers = parent ? parent->v2_controllers : host->v2_delegated;
    if (host->ops->make(cg, limits, with_v1, err) < 0)
        return -1;
    *out = steal_pointer(&cg);
    return 0;
}

int cgroup_create(struct cgroup_host *host, const struct cgroup *parent, const char *name,
                  const struct cgroup_limits *limits, unsigned flags, struct cgroup **out,
                  err_t *err)
{
    return cgroup_build(host, parent, name, limits, flags, true, out, err);
}

int cgroup_create_for_clone(struct cgroup_host *host, const char *name,
                            const struct cgroup_limits *limits, unsigned flags, struct cgroup **out,
                            err_t *err)
{
    return cgroup_build(host, NULL, name, limits, flags, false, out, err);
}

int cgroup_create_finish(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    static const struct cgroup_limits no_limits;
    if (cg->host->mode == CGROUP_MODE_V2)
        return 0;
    return cg->host->ops->make_v1_rest(cg, limits ? limits : &no_limits, err);
}

/* Whether the directory PATH exists in h. */
static bool cgroup_exists_in(const struct cgroup *cg, const struct cgroup_hier *h)
{
    struct stat st;
    char rel[CGROUP_PATH_MAX + 64];
    return fstatat(h->fd, cgroup_rel(cg, "", rel, sizeof rel), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISDIR(st.st_mode);
}

int cgroup_open(struct cgroup_host *host, const char *path, unsigned flags, struct cgroup **out,
                err_t *err)
{
    *out = NULL;
    if (cgroup_path_check(path, err) < 0)
        return -1;
    struct cgroup *cg = cgroup_alloc(host, path, flags, err);
    if (!cg)
        return -1;
    if (host->mode != CGROUP_MODE_V1)
        cg->made_v2 = cgroup_exists_in(cg, &host->v2);
    for (size_t h = 0; h < host->v1_count; h++)
        cg->made_v1[h] = cgroup_exists_in(cg, &host->v1[h]);
    if (host->mode == CGROUP_MODE_V2 && cg->made_v2) {
        /* What it has is what its cgroup.controllers lists. */
        char list[256];
        if (cgroup_read(cg, &host->v2, "cgroup.controllers", list, sizeof list, true, NULL) > 0)
            cg->v2_controllers = (cgroup_list_has(list, "memory") ? CGROUP_V2_MEMORY : 0) |
                                 (cgroup_list_has(list, "pids") ? CGROUP_V2_PIDS : 0) |
                                 (cgroup_list_has(list, "cpu") ? CGROUP_V2_CPU : 0);
    }
    *out = cg;
    return 0;
}

const char *cgroup_path(const struct cgroup *cg)
{
    return cg->path;
}

struct cgroup_host *cgroup_host_of(const struct cgroup *cg)
{
    return cg->host;
}

enum cgroup_mode cgroup_mode_of(const struct cgroup *cg)
{
    return cg->host->mode;
}

/* The v1 controller called name, or CGROUP_V1_COUNT if hutch uses none by that name. */
static enum cgroup_v1_controller cgroup_v1_controller_by_name(const char *name)
{
    size_t c = 0;
    while (c < CGROUP_V1_COUNT && strcmp(name, cgroup_v1_controller_names[c]) != 0)
        c++;
    return (enum cgroup_v1_controller)c;
}

int cgroup_file_path(const struct cgroup *cg, const char *controller, const char *file, char *out,
                     size_t size, err_t *err)
{
    enum cgroup_mode mode = cg->host->mode;
    const struct cgroup_hier *h = NULL;
    bool made = false;
    const char *kind = controller[0] ? "v1 " : "cgroup2"; /* "v1 memory" or "cgroup2" */
    if (controller[0] == '\0') {
        if (mode != CGROUP_MODE_V1) {
            h = &cg->host->v2;
            made = cg->made_v2;
        }
    } else {
        enum cgroup_v1_controller c = cgroup_v1_controller_by_name(controller);
        if (c == CGROUP_V1_COUNT)
            return cgroup_error(err, EINVAL,
                                "cgroup %s: '%.32s' is not memory, pids, cpuacct, freezer, cpu "
                                "or \"\" (cgroup2)",
                                cg->path, controller);
        if (cgroup_v1_wanted(mode, cg->host->cpu_limits, c)) {
            h = cgroup_v1_hier(cg, c);
            made = cg->made_v1[cg->host->v1_index[c]];
        }
    }
    if (!h)
        return cgroup_error(err, ENOENT, "cgroup %s: no %s%s hierarchy in mode %s", cg->path, kind,
                            controller, cgroup_mode_name(mode));
    if (!made)
        return cgroup_error(err, ENOENT, "cgroup %s: its %s%s directory is not made yet", cg->path,
                            kind, controller);
    /* The fd names hutch/ wherever its hierarchy is mounted (spaces and all), without a second
     * reading of /proc/self/mountinfo. */
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", h->fd);
    ssize_t n = readlink(link, out, size);
    if (n < 0)
        return err_set(err, errno, "cgroup %s: readlink %s", cg->path, link);
    /* readlink does not terminate; the snprintf does, also when file is "". */
    size_t len = (size_t)n;
    int added = len < size
                    ? snprintf(out + len, size - len, "/%s%s%s", cg->path, file[0] ? "/" : "", file)
                    : -1;
    if (added < 0 || (size_t)added >= size - len)
        return cgroup_error(err, ENAMETOOLONG,
                            "cgroup %s: the path of %s does not fit in %zu bytes", cg->path,
                            file[0] ? file : "its directory", size);
    /* "(unreachable)/..." is what the kernel says for a directory outside our root. */
    if (out[0] != '/')
        return cgroup_error(err, ENOENT, "cgroup %s: %s is not a path: \"%.64s\"", cg->path, link,
                            out);
    return 0;
}

/* ---------- placement ---------- */

int cgroup_open_dir_fd(const struct cgroup *cg, err_t *err)
{
    if (cg->host->mode == CGROUP_MODE_V1 || !cg->made_v2)
        return cgroup_error(err, ENOTSUP, "cgroup %s: no cgroup2 directory", cg->path);
    /* O_RDONLY rather than O_PATH: clone3(CLONE_INTO_CGROUP) wants a real open. */
    int fd = cgroup_open_file(cg, &cg->host->v2, "", O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        err_set(err, errno, "open");
        return cgroup_fail(cg, &cg->host->v2, err);
    }
    return fd;
}

int cgroup_attach(struct cgroup *cg, pid_t pid, err_t *err)
{
    if (pid <= 0)
        return cgroup_error(err, EINVAL, "cgroup %s: attach: bad pid %d", cg->path, (int)pid);
    return cg->host->ops->attach(cg, pid, err);
}

/* ---------- dispatch ---------- */

int cgroup_read_cpu_ns(struct cgroup *cg, uint64_t *ns, err_t *err)
{
    *ns = 0;
    return cg->host->ops->read_cpu(cg, ns, err);
}

int cgroup_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    return cg->host->ops->read_stats(cg, out, err);
}

int cgroup_set_limits(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    return cg->host->ops->set_limits(cg, limits, err);
}

int cgroup_read_memory(struct cgroup *cg, struct cgroup_memory *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    return cg->host->ops->read_memory(cg, out, err);
}

int cgroup_kill_start(struct cgroup *cg, bool *atomic, err_t *err)
{
    bool ignored;
    return cg->host->ops->kill_start(cg, atomic ? atomic : &ignored, err);
}

int cgroup_populated(struct cgroup *cg, bool *populated, err_t *err)
{
    return cg->host->ops->populated(cg, populated, err);
}

int cgroup_events_rearm(int fd)
{
    char buf[256];
    return pread(fd, buf, sizeof buf, 0) < 0 ? -1 : 0;
}

int cgroup_open_events_fd(const struct cgroup *cg, err_t *err)
{
    if (cg->host->mode == CGROUP_MODE_V1 || !cg->made_v2)
        return cgroup_error(err, ENOTSUP, "cgroup %s: no cgroup.events on cgroup v1", cg->path);
    int fd = cgroup_open_file(cg, &cg->host->v2, "cgroup.events", O_RDONLY);
    if (fd < 0) {
        err_set(err, errno, "open cgroup.events");
        return cgroup_fail(cg, &cg->host->v2, err);
    }
    /* A new kernfs fd reports POLLPRI until its first read: read it here, so that the first
     * POLLPRI the caller sees is a change. */
    if (cgroup_events_rearm(fd) < 0) {
        err_set(err, errno, "read cgroup.events");
        close(fd);
        return cgroup_fail(cg, &cg->host->v2, err);
    }
    return fd;
}

int cgroup_freeze_start(struct cgroup *cg, bool frozen, err_t *err)
{
    return cg->host->ops->freeze_start(cg, frozen, err);
}

int cgroup_frozen(struct cgroup *cg, bool *frozen, err_t *err)
{
    return cg->host->ops->frozen(cg, frozen, err);
}

/* ---------- removal ---------- */

/* rmdir of the directory name below dirfd, its subdirectories first (a cgroup directory holds
 * only the kernel's files, which go with it, and its child groups). */
static int cgroup_rmdir_tree(int dirfd, const char *name, int depth)
{
    /* Most groups have no children: one rmdir. A parent with children says EBUSY, as does one
     * with exiting members; only then are its subdirectories looked for. */
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
    if (errno != EBUSY)
        return -1;
    if (depth < CGROUP_MAX_DEPTH) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return errno == ENOENT ? 0 : -1;
        DIR *dir = fdopendir(fd);
        if (!dir) {
            close(fd);
            return -1;
        }
        struct dirent *de;
        int rc = 0;
        while (rc == 0 && (de = readdir(dir))) {
            if (de->d_type == DT_DIR && de->d_name[0] != '.')
                rc = cgroup_rmdir_tree(fd, de->d_name, depth + 1);
        }
        int saved = errno;
        closedir(dir);
        if (rc < 0) {
            errno = saved;
            return -1;
        }
    }
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -1;
    return 0;
}

static int cgroup_remove_in(struct cgroup *cg, const struct cgroup_hier *h, bool *made, err_t *err)
{
    if (!*made)
        return 0;
    char rel[CGROUP_PATH_MAX + 64];
    if (cgroup_rmdir_tree(h->fd, cgroup_rel(cg, "", rel, sizeof rel), 0) < 0) {
        err_set(err, errno, "rmdir");
        return cgroup_fail(cg, h, err);
    }
    *made = false;
    return 0;
}

int cgroup_remove(struct cgroup *cg, err_t *err)
{
    int rc = 0;
    /* Every hierarchy is tried: an empty one still goes away. The first error is kept. */
    for (size_t h = 0; h < cg->host->v1_count; h++)
        if (cgroup_remove_in(cg, &cg->host->v1[h], &cg->made_v1[h], rc < 0 ? NULL : err) < 0)
            rc = -1;
    if (cg->host->mode != CGROUP_MODE_V1 &&
        cgroup_remove_in(cg, &cg->host->v2, &cg->made_v2, rc < 0 ? NULL : err) < 0)
        rc = -1;
    return rc;
}

bool cgroup_removed(const struct cgroup *cg)
{
    for (size_t h = 0; h < cg->host->v1_count; h++)
        if (cg->made_v1[h])
            return false;
    return !cg->made_v2;
}

int cgroup_delegate_procs(struct cgroup *cg, uid_t uid, gid_t gid, err_t *err)
{
    if (cg->host->mode == CGROUP_MODE_V1)
        return 0;
    char rel[CGROUP_PATH_MAX + 64];
    if (fchownat(cg->host->v2.fd, cgroup_rel(cg, "cgroup.procs", rel, sizeof rel), uid, gid,
                 AT_SYMLINK_NOFOLLOW) < 0) {
        err_set(err, errno, "chown cgroup.procs");
        return cgroup_fail(cg, &cg->host->v2, err);
    }
    return 0;
}
