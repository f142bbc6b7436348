/* The common half of the cgroup module: mode detection, the public entry points that dispatch
 * to cgroup_v1.c / cgroup_v2.c, and small fd-relative helpers both versions use. */
#include "jail/cgroup.h"

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
#include <time.h>
#include <unistd.h>

#include "jail/cgroup_internal.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define CGROUP_FS_ROOT    "/sys/fs/cgroup"
#define CGROUP_FS_UNIFIED "/sys/fs/cgroup/unified"

const char *const cgroup_v1_controller_names[CGROUP_V1_COUNT] = {
    [CGROUP_V1_MEMORY] = "memory",
    [CGROUP_V1_PIDS] = "pids",
    [CGROUP_V1_CPUACCT] = "cpuacct",
    [CGROUP_V1_FREEZER] = "freezer",
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

uint64_t cgroup_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void cgroup_backoff(unsigned *step_us)
{
    if (*step_us == 0)
        *step_us = 1000;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)*step_us * 1000};
    nanosleep(&ts, NULL);
    if (*step_us < 16000)
        *step_us *= 2;
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

/* ---------- one directory hutch/NAME ---------- */

void cgroup_dir_init(struct cgroup_dir *d, const char *label)
{
    d->parent_fd = -1;
    d->fd = -1;
    d->created = false;
    snprintf(d->label, sizeof d->label, "%s", label);
}

int cgroup_dir_fail(const struct cgroup *cg, const struct cgroup_dir *d, err_t *err)
{
    if (d->label[0])
        return err_wrap(err, "cgroup %s:" CGROUP_PARENT "/%s", d->label, cg->name);
    return err_wrap(err, "cgroup " CGROUP_PARENT "/%s", cg->name);
}

int cgroup_dir_open_parent(struct cgroup_dir *d, int root_fd, err_t *err)
{
    const char *where = d->label[0] ? d->label : "cgroup2";
    if (mkdirat(root_fd, CGROUP_PARENT, 0755) < 0 && errno != EEXIST)
        return err_set(err, errno, "cgroup %s: mkdir " CGROUP_PARENT, where);
    d->parent_fd = openat(root_fd, CGROUP_PARENT, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->parent_fd < 0)
        return err_set(err, errno, "cgroup %s: open " CGROUP_PARENT, where);
    return 0;
}

int cgroup_dir_make(const struct cgroup *cg, struct cgroup_dir *d, err_t *err)
{
    if (cg->adopt) {
        /* Whatever exists is ours to remove (created = true); a missing one is no error. */
        d->fd = openat(d->parent_fd, cg->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d->created = d->fd >= 0;
        if (d->fd < 0 && errno != ENOENT) {
            err_set(err, errno, "open");
            return cgroup_dir_fail(cg, d, err);
        }
        return 0;
    }
    /* EEXIST means another sandbox of this run owns the name: never adopt its group. */
    if (mkdirat(d->parent_fd, cg->name, 0755) < 0) {
        err_set(err, errno, "mkdir");
        return cgroup_dir_fail(cg, d, err);
    }
    d->created = true;
    /* O_RDONLY rather than O_PATH: clone3(CLONE_INTO_CGROUP) is given this fd. */
    d->fd = openat(d->parent_fd, cg->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0) {
        err_set(err, errno, "open");
        return cgroup_dir_fail(cg, d, err);
    }
    return 0;
}

/* rmdir, retrying while the kernel still counts exiting tasks as members. */
static int cgroup_rmdir_retry(int parent_fd, const char *name)
{
    uint64_t deadline = cgroup_now_ms() + CGROUP_RMDIR_TIMEOUT_MS;
    unsigned step = 0;
    for (;;) {
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || cgroup_now_ms() >= deadline)
            return -1;
        cgroup_backoff(&step);
    }
}

int cgroup_dir_remove(const struct cgroup *cg, struct cgroup_dir *d, err_t *err)
{
    int rc = 0;
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    if (d->created && cgroup_rmdir_retry(d->parent_fd, cg->name) < 0) {
        err_set(err, errno, "rmdir");
        rc = cgroup_dir_fail(cg, d, err);
    }
    d->created = false;
    if (d->parent_fd >= 0)
        close(d->parent_fd);
    d->parent_fd = -1;
    return rc;
}

/* ---------- files in hutch/NAME ---------- */

int cgroup_dir_write(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                     const char *value, bool optional, err_t *err)
{
    err_t local;
    if (file_write_str_at(d->fd, file, value, &local) == 0)
        return 1;
    /* Only open() reports ENOENT, so this is "the kernel has no such file". */
    if (optional && local.errnum == ENOENT)
        return 0;
    if (err)
        *err = local;
    return cgroup_dir_fail(cg, d, err);
}

int cgroup_dir_write_u64(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                         uint64_t value, bool optional, err_t *err)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)value);
    return cgroup_dir_write(cg, d, file, buf, optional, err);
}

int cgroup_dir_read(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                    char *buf, size_t size, bool optional, err_t *err)
{
    err_t local;
    if (file_read_at(d->fd, file, buf, size, &local) >= 0)
        return 1;
    buf[0] = '\0';
    if (optional && local.errnum == ENOENT)
        return 0;
    if (err)
        *err = local;
    return cgroup_dir_fail(cg, d, err);
}

int cgroup_dir_read_u64(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                        uint64_t *out, bool optional, err_t *err)
{
    char buf[64];
    *out = 0;
    int r = cgroup_dir_read(cg, d, file, buf, sizeof buf, optional, err);
    if (r <= 0)
        return r;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno != 0 || end == buf || (*end != '\n' && *end != '\0')) {
        cgroup_error(err, EINVAL, "%s: not a number: \"%.20s\"", file, buf);
        return cgroup_dir_fail(cg, d, err);
    }
    *out = v;
    return 1;
}

int cgroup_dir_read_key(const struct cgroup *cg, const struct cgroup_dir *d, const char *file,
                        const char *key, uint64_t *out, bool optional, err_t *err)
{
    char buf[4096];
    *out = 0;
    int r = cgroup_dir_read(cg, d, file, buf, sizeof buf, optional, err);
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
    /* A bad attach must not make the daemon shoot itself. */
    if (pid == getpid()) {
        errno = EPERM;
        return -1;
    }
    if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
        return -1;
    return 0;
}

int cgroup_dir_scan_procs(const struct cgroup *cg, const struct cgroup_dir *d, bool kill_them,
                          size_t *count, err_t *err)
{
    *count = 0;
    int fd = openat(d->fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, errno, "open cgroup.procs");
        return cgroup_dir_fail(cg, d, err);
    }
    cleanup_file FILE *f = fdopen(fd, "r");
    if (!f) {
        err_set(err, errno, "fdopen cgroup.procs");
        close(fd);
        return cgroup_dir_fail(cg, d, err);
    }
    char line[32];
    while (fgets(line, sizeof line, f)) {
        pid_t pid;
        if (cgroup_procs_line(line, &pid) < 0) {
            cgroup_error(err, EINVAL, "cgroup.procs: bad line \"%.20s\"", line);
            return cgroup_dir_fail(cg, d, err);
        }
        (*count)++;
        if (kill_them && cgroup_kill_pid(pid) < 0) {
            err_set(err, errno, "kill %d", (int)pid);
            return cgroup_dir_fail(cg, d, err);
        }
    }
    if (ferror(f)) {
        err_set(err, errno, "read cgroup.procs");
        return cgroup_dir_fail(cg, d, err);
    }
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

static int cgroup_mode_parse(const char *value, enum cgroup_mode *mode, err_t *err)
{
    static const enum cgroup_mode modes[] = {CGROUP_MODE_V1, CGROUP_MODE_HYBRID, CGROUP_MODE_V2};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(value, cgroup_mode_name(modes[i])) == 0) {
            *mode = modes[i];
            return 0;
        }
    }
    return cgroup_error(err, EINVAL, "cgroup: HUTCH_CGROUP_MODE=\"%.40s\" is not v1, v2 or hybrid",
                        value);
}

int cgroup_detect(enum cgroup_mode *mode, err_t *err)
{
    const char *forced = getenv("HUTCH_CGROUP_MODE");
    if (forced && forced[0])
        return cgroup_mode_parse(forced, mode, err);
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

/* ---------- lifetime ---------- */

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

/* Removes every directory we made; keeps the first error. Processes must already be gone. */
static int cgroup_remove_all(struct cgroup *cg, err_t *err)
{
    int rc = 0;
    for (size_t i = 0; i < cg->v1_count; i++) {
        if (cgroup_dir_remove(cg, &cg->v1[i], rc < 0 ? NULL : err) < 0)
            rc = -1;
    }
    if (cgroup_dir_remove(cg, &cg->v2, rc < 0 ? NULL : err) < 0)
        rc = -1;
    return rc;
}

/* Cleanup for a half-built cgroup in cgroup_create: no process can be in it yet. */
static void cgroup_rollbackp(struct cgroup **cgp)
{
    if (!*cgp)
        return;
    cgroup_remove_all(*cgp, NULL);
    free(*cgp);
}

static struct cgroup *cgroup_alloc(const char *name, enum cgroup_mode mode, err_t *err)
{
    struct cgroup *cg = calloc(1, sizeof *cg);
    if (!cg) {
        err_set(err, errno, "cgroup %s: calloc", name);
        return NULL;
    }
    cg->mode = mode;
    snprintf(cg->name, sizeof cg->name, "%s", name);
    cgroup_dir_init(&cg->v2, "");
    for (size_t i = 0; i < CGROUP_V1_COUNT; i++)
        cgroup_dir_init(&cg->v1[i], "");
    return cg;
}

static int cgroup_build(const char *name, const struct cgroup_limits *limits, bool adopt,
                        bool with_v1, struct cgroup **out, err_t *err)
{
    static const struct cgroup_limits no_limits;
    *out = NULL;
    if (!limits || adopt)
        limits = &no_limits;
    enum cgroup_mode mode;
    if (cgroup_name_check(name, err) < 0 || cgroup_detect(&mode, err) < 0)
        return -1;
    __attribute__((cleanup(cgroup_rollbackp))) struct cgroup *cg = cgroup_alloc(name, mode, err);
    if (!cg)
        return -1;
    cg->adopt = adopt;
    if (mode != CGROUP_MODE_V1) {
        const char *root = cgroup_v2_root(err);
        if (!root || cgroup_v2_create(cg, root, limits, err) < 0)
            return -1;
    }
    if (with_v1 && mode != CGROUP_MODE_V2 && cgroup_v1_create(cg, limits, err) < 0)
        return -1;
    *out = steal_pointer(&cg);
    return 0;
}

int cgroup_create(const char *name, const struct cgroup_limits *limits, struct cgroup **out,
                  err_t *err)
{
    return cgroup_build(name, limits, false, true, out, err);
}

int cgroup_create_for_clone(const char *name, const struct cgroup_limits *limits,
                            struct cgroup **out, err_t *err)
{
    return cgroup_build(name, limits, false, false, out, err);
}

int cgroup_create_finish(struct cgroup *cg, const struct cgroup_limits *limits, err_t *err)
{
    static const struct cgroup_limits no_limits;
    if (cg->mode == CGROUP_MODE_V2)
        return 0;
    return cgroup_v1_create(cg, limits ? limits : &no_limits, err);
}

/* Whether every hierarchy the mode uses has hutch/NAME: only then can a process be inside,
 * because processes are cloned in after cgroup_create has made all of them. */
static bool cgroup_complete(const struct cgroup *cg)
{
    for (size_t i = 0; i < cg->v1_count; i++)
        if (cg->v1[i].fd < 0)
            return false;
    return cg->mode == CGROUP_MODE_V1 || cg->v2.fd >= 0;
}

int cgroup_remove_by_name(const char *name, err_t *err)
{
    struct cgroup *cg;
    if (cgroup_build(name, NULL, true, true, &cg, err) < 0)
        return -1;
    if (cgroup_complete(cg))
        return cgroup_destroy(cg, err);
    int rc = cgroup_remove_all(cg, err);
    free(cg);
    return rc;
}

/* The v1 controller called name, or CGROUP_V1_COUNT if hutch uses none by that name. */
static enum cgroup_v1_controller cgroup_v1_controller_by_name(const char *name)
{
    size_t c = 0;
    while (c < CGROUP_V1_COUNT && strcmp(name, cgroup_v1_controller_names[c]) != 0)
        c++;
    return (enum cgroup_v1_controller)c;
}

/* The directory of hutch/NAME in the hierarchy of controller (a known one, or "" for cgroup2);
 * NULL when the mode uses no such hierarchy. Its fd is -1 while it is not made yet (between
 * cgroup_create_for_clone and cgroup_create_finish). */
static const struct cgroup_dir *cgroup_dir_of(const struct cgroup *cg, const char *controller)
{
    if (controller[0] == '\0')
        return cg->mode == CGROUP_MODE_V1 ? NULL : &cg->v2;
    enum cgroup_v1_controller c = cgroup_v1_controller_by_name(controller);
    if (c == CGROUP_V1_COUNT || cg->mode == CGROUP_MODE_V2 || !cgroup_v1_wanted(cg->mode, c))
        return NULL;
    return &cg->v1[cg->v1_index[c]];
}

int cgroup_file_path(const struct cgroup *cg, const char *controller, const char *file, char *out,
                     size_t size, err_t *err)
{
    if (controller[0] && cgroup_v1_controller_by_name(controller) == CGROUP_V1_COUNT)
        return cgroup_error(err, EINVAL,
                            "cgroup %s: '%.32s' is not memory, pids, cpuacct, freezer or \"\" "
                            "(cgroup2)",
                            cg->name, controller);
    const char *kind = controller[0] ? "v1 " : "cgroup2"; /* "v1 memory" or "cgroup2" */
    const struct cgroup_dir *d = cgroup_dir_of(cg, controller);
    if (!d)
        return cgroup_error(err, ENOENT, "cgroup %s: no %s%s hierarchy in mode %s", cg->name, kind,
                            controller, cgroup_mode_name(cg->mode));
    if (d->fd < 0)
        return cgroup_error(err, ENOENT, "cgroup %s: its %s%s directory is not made yet", cg->name,
                            kind, controller);
    /* The fd names the directory we made wherever its hierarchy is mounted (spaces and all),
     * without a second reading of /proc/self/mountinfo. */
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", d->fd);
    ssize_t n = readlink(link, out, size);
    if (n < 0)
        return err_set(err, errno, "cgroup %s: readlink %s", cg->name, link);
    /* readlink does not terminate; the snprintf does, also when file is "". */
    size_t len = (size_t)n;
    int added = len < size ? snprintf(out + len, size - len, "%s%s", file[0] ? "/" : "", file) : -1;
    if (added < 0 || (size_t)added >= size - len)
        return cgroup_error(err, ENAMETOOLONG,
                            "cgroup %s: the path of %s does not fit in %zu bytes", cg->name,
                            file[0] ? file : "its directory", size);
    /* "(unreachable)/..." is what the kernel says for a directory outside our root. */
    if (out[0] != '/')
        return cgroup_error(err, ENOENT, "cgroup %s: %s is not a path: \"%.64s\"", cg->name, link,
                            out);
    return 0;
}

int cgroup_clone_into_fd(const struct cgroup *cg)
{
    return cg->mode == CGROUP_MODE_V1 ? -1 : cg->v2.fd;
}

int cgroup_attach(struct cgroup *cg, pid_t pid, err_t *err)
{
    if (pid <= 0)
        return cgroup_error(err, EINVAL, "cgroup %s: attach: bad pid %d", cg->name, (int)pid);
    if (cg->mode != CGROUP_MODE_V2 && cgroup_v1_attach(cg, pid, err) < 0)
        return -1;
    if (cg->mode != CGROUP_MODE_V1 && cgroup_v2_attach(cg, pid, err) < 0)
        return -1;
    return 0;
}

int cgroup_read_cpu_ns(struct cgroup *cg, uint64_t *ns, err_t *err)
{
    *ns = 0;
    return cg->mode == CGROUP_MODE_V1 ? cgroup_v1_read_cpu(cg, ns, err)
                                      : cgroup_v2_read_cpu(cg, ns, err);
}

int cgroup_read_stats(struct cgroup *cg, struct cgroup_stats *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    if (cg->mode == CGROUP_MODE_V2)
        return cgroup_v2_read_stats(cg, out, err);
    /* Hybrid: memory and pids counters live in v1, CPU time in the cgroup2 group. */
    if (cgroup_v1_read_stats(cg, out, err) < 0)
        return -1;
    return cg->mode == CGROUP_MODE_HYBRID ? cgroup_v2_read_cpu(cg, &out->cpu_usage_ns, err) : 0;
}

/* Hybrid: everything but the limits happens in the cgroup2 group, as on v2; the v1 groups are
 * then checked empty too before they can be removed. */
static int cgroup_kill_hybrid(struct cgroup *cg, err_t *err)
{
    int atomic = cgroup_v2_kill_atomic(cg, err);
    if (atomic < 0 || (atomic == 0 && cgroup_v2_kill_frozen(cg, err) < 0))
        return -1;
    if (cgroup_v2_wait_empty(cg, atomic == 0, err) < 0)
        return -1;
    return cgroup_v1_wait_empty(cg, err);
}

int cgroup_kill(struct cgroup *cg, err_t *err)
{
    switch (cg->mode) {
    case CGROUP_MODE_V1:
        if (cgroup_v1_kill_frozen(cg, err) < 0)
            return -1;
        return cgroup_v1_wait_empty(cg, err);
    case CGROUP_MODE_HYBRID:
        return cgroup_kill_hybrid(cg, err);
    case CGROUP_MODE_V2: {
        int atomic = cgroup_v2_kill_atomic(cg, err);
        if (atomic < 0 || (atomic == 0 && cgroup_v2_kill_frozen(cg, err) < 0))
            return -1;
        return cgroup_v2_wait_empty(cg, atomic == 0, err);
    }
    }
    return cgroup_error(err, EINVAL, "cgroup %s: bad mode", cg->name);
}

int cgroup_set_frozen(struct cgroup *cg, bool frozen, err_t *err)
{
    if (cg->mode == CGROUP_MODE_V1)
        return cgroup_v1_set_frozen(cg, frozen, err);
    /* Hybrid too: cgroup.freeze is core cgroup2, no controller needed. */
    return cgroup_v2_set_frozen(cg, frozen, err);
}

int cgroup_destroy(struct cgroup *cg, err_t *err)
{
    if (!cg)
        return 0;
    /* The common case needs no kill: the sandbox's processes are gone, which cgroup2 says in one
     * read (and then the v1 groups, holding the same processes, are empty too). */
    uint64_t populated = 1;
    int rc = 0;
    if (cg->mode == CGROUP_MODE_V1 || cg->v2.fd < 0 ||
        cgroup_dir_read_key(cg, &cg->v2, "cgroup.events", "populated", &populated, false, NULL) <
            0 ||
        populated != 0)
        rc = cgroup_kill(cg, err);
    /* Try the rmdirs even if the kill failed: an empty hierarchy still goes away. */
    if (cgroup_remove_all(cg, rc < 0 ? NULL : err) < 0)
        rc = -1;
    free(cg);
    return rc;
}
