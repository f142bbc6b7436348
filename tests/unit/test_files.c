/* File operations against hostile sandbox contents (src/files/). Runs as root on the host: a
 * fresh temp dir is the sandbox's root, and a canary tree OUTSIDE it (another temp dir, also the
 * process's cwd, so a relative lookup that escaped would land there) must never be read,
 * written, chmod'ed, chowned, renamed or removed: it is watched with inotify (IN_ALL_EVENTS;
 * every open, read, write, attribute change, move and delete shows up) and its stat (ctime
 * included) and contents compared after every operation. Negative controls show that the same
 * symlinks, followed by plain open(), do reach the canary and that the check notices.
 *
 * Inside the root: symlinks to "/", to the canary's host path (absolute and relative), a
 * procfs (magic links), FIFOs, sockets, devices, names at and past NAME_MAX and PATH_MAX, trees
 * deeper than PATH_MAX, and decoys at the canary's paths inside the root, so that a symlink
 * resolved inside the root is seen to reach the decoy. A second process swaps directories and
 * symlinks in a tight loop during the operations. Blocking is caught by alarm(). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "files/files.h"
#include "tap.h"

#define CANARY_TEXT "CANARY: outside the sandbox root\n"
#define DECOY_TEXT  "decoy inside the root\n"
#define INSIDE_TEXT "inside\n"

static char outside[64], root[64];
static int root_fd = -1;   /* O_PATH: what the library gets */
static int canary_fd = -1; /* held open, for /proc/self/fd/N */
static int canary_watch = -1;
static char canary[PATH_MAX], canary_dir[PATH_MAX], canary_dir_file[PATH_MAX];
static bool have_proc, have_mounts;
static int fds_at_start;

/* ---- small helpers ---- */

/* A host path inside the root: R("/x") is ROOT/x. A ring of buffers, so a few can be live. */
__attribute__((format(printf, 1, 2))) static char *R(const char *fmt, ...)
{
    static char ring[8][PATH_MAX + 64];
    static int next;
    char *buf = ring[next++ % 8];
    size_t n = (size_t)snprintf(buf, sizeof ring[0], "%s", root);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof ring[0] - n, fmt, ap);
    va_end(ap);
    return buf;
}

/* A string built with printf, from a ring of buffers. */
__attribute__((format(printf, 1, 2))) static char *S(const char *fmt, ...)
{
    static char ring[16][2 * PATH_MAX];
    static int next;
    char *buf = ring[next++ % 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof ring[0], fmt, ap);
    va_end(ap);
    return buf;
}

static void put(const char *host_path, const char *text)
{
    int fd = open(host_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        printf("# put %s: %s\n", host_path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

static void mkdirs(const char *host_path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", host_path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    }
    mkdir(buf, 0755);
}

/* Removes dir_fd/name and everything below, one fd per level (deep trees included). */
static void rm_at(int dir_fd, const char *name)
{
    if (unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT)
        return;
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rm_at(dirfd(d), e->d_name);
    }
    if (d)
        closedir(d);
    unlinkat(dir_fd, name, AT_REMOVEDIR);
}

static void rm_host(const char *host_path)
{
    rm_at(AT_FDCWD, host_path);
}

/* Empties the root, but its /proc mount. */
static void clean_root(void)
{
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fdopendir(fd);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "proc"))
            rm_at(dirfd(d), e->d_name);
    }
    if (d)
        closedir(d);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n - 3; /* ".", "..", and opendir's own fd */
}

/* Reads up to cap - 1 bytes of fd into buf. */
static ssize_t slurp(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    return (ssize_t)n;
}

static bool fd_reads(int fd, const char *text)
{
    char buf[4096];
    return fd >= 0 && slurp(fd, buf, sizeof buf) >= 0 && strcmp(buf, text) == 0;
}

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "not ok - timed out: a file operation blocked\n";
    if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) {
    }
    _exit(1);
}

/* ---- the canary ---- */

#define N_WATCHED 4
static const char *watched_paths[N_WATCHED];

struct snapshot {
    struct stat st[N_WATCHED];
    char text[2][128];
    int entries[2];
};
static struct snapshot taken;

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static void read_text(const char *path, char *buf, size_t cap)
{
    /* O_NOATIME: the check itself leaves atime alone (and its inotify events are drained). */
    int fd = open(path, O_RDONLY | O_NOATIME | O_CLOEXEC);
    buf[0] = '\0';
    if (fd >= 0) {
        slurp(fd, buf, cap);
        close(fd);
    }
}

static void drain_canary_events(void)
{
    char buf[4096];
    while (read(canary_watch, buf, sizeof buf) > 0) {
    }
}

static void take(struct snapshot *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < N_WATCHED; i++)
        lstat(watched_paths[i], &s->st[i]);
    read_text(canary, s->text[0], sizeof s->text[0]);
    read_text(canary_dir_file, s->text[1], sizeof s->text[1]);
    s->entries[0] = count_entries(outside);
    s->entries[1] = count_entries(canary_dir);
    drain_canary_events();
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
           a->st_uid == b->st_uid && a->st_gid == b->st_gid && a->st_size == b->st_size &&
           a->st_nlink == b->st_nlink && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
           a->st_ctim.tv_nsec == b->st_ctim.tv_nsec && a->st_atim.tv_sec == b->st_atim.tv_sec &&
           a->st_atim.tv_nsec == b->st_atim.tv_nsec;
}

/* True if nothing outside the root was touched since the last snapshot. */
static bool canary_check(bool quiet)
{
    bool intact = true;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(canary_watch, buf, sizeof buf);
    if (n > 0) {
        intact = false;
        const struct inotify_event *e = (const struct inotify_event *)buf;
        if (!quiet)
            printf("#   canary: inotify event 0x%x on %s%s%s\n", e->mask, watched_paths[e->wd - 1],
                   e->len ? "/" : "", e->len ? e->name : "");
    }
    struct snapshot now;
    take(&now);
    for (int i = 0; i < N_WATCHED; i++) {
        if (!same_stat(&now.st[i], &taken.st[i])) {
            intact = false;
            if (!quiet)
                printf("#   canary: %s changed (mode 0%o size %lld)\n", watched_paths[i],
                       now.st[i].st_mode, (long long)now.st[i].st_size);
        }
    }
    if (strcmp(now.text[0], taken.text[0]) || strcmp(now.text[1], taken.text[1]) ||
        now.entries[0] != taken.entries[0] || now.entries[1] != taken.entries[1]) {
        intact = false;
        if (!quiet)
            printf("#   canary: contents or entries changed\n");
    }
    return intact;
}

static bool canary_intact(void)
{
    return canary_check(false);
}

static void setup_canary(void)
{
    snprintf(canary, sizeof canary, "%s/canary", outside);
    snprintf(canary_dir, sizeof canary_dir, "%s/dir", outside);
    snprintf(canary_dir_file, sizeof canary_dir_file, "%s/dir/f", outside);
    put(canary, CANARY_TEXT);
    mkdir(canary_dir, 0755);
    put(canary_dir_file, CANARY_TEXT);
    /* atime older than mtime: under relatime any read would update it. Distinct mtimes. */
    struct timespec times[2] = {{now_s() - 7200, 0}, {now_s() - 3600, 123456789}};
    utimensat(AT_FDCWD, canary, times, 0);
    times[1].tv_nsec = 987654321;
    utimensat(AT_FDCWD, canary_dir_file, times, 0);
    canary_fd = open(canary, O_RDONLY | O_NOATIME | O_CLOEXEC);
    watched_paths[0] = outside;
    watched_paths[1] = canary;
    watched_paths[2] = canary_dir;
    watched_paths[3] = canary_dir_file;
    canary_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    for (int i = 0; i < N_WATCHED; i++)
        inotify_add_watch(canary_watch, watched_paths[i], IN_ALL_EVENTS);
    take(&taken);
}

static void retake(void)
{
    take(&taken);
}

/* ---- the hostile tree ---- */

/* "../" enough times to climb out of any directory of the root, then host_path. */
static char *climb(const char *host_path)
{
    return S("../../../../../../../../../../../..%s", host_path);
}

/* Decoys at the canary's paths inside the root. */
static void build_decoys(void)
{
    mkdirs(R("%s", canary_dir));
    put(R("%s", canary), DECOY_TEXT);
    put(R("%s", canary_dir_file), DECOY_TEXT);
}

static void build_hostile(void)
{
    clean_root();
    build_decoys();
    symlink("/", R("/evil_root"));
    symlink(canary, R("/evil_abs"));
    symlink(climb(canary), R("/evil_rel"));
    symlink(canary_dir, R("/evil_dir"));
    symlink(climb(canary_dir), R("/evil_dir_rel"));
    symlink("evil_rel", R("/chain"));
    symlink("/evil_dir", R("/chain_dir"));
    put(R("/plain"), INSIDE_TEXT);
}

/* Paths (in the sandbox) that lead to the canary if anything follows them outside the root. */
static const char *hostile[32];
static int n_hostile;

static void init_hostile(void)
{
    n_hostile = 0;
    hostile[n_hostile++] = "/evil_abs";
    hostile[n_hostile++] = "/evil_rel";
    hostile[n_hostile++] = "/chain";
    hostile[n_hostile++] = "/evil_dir/f";
    hostile[n_hostile++] = "/evil_dir_rel/f";
    hostile[n_hostile++] = "/chain_dir/f";
    hostile[n_hostile++] = strdup(S("/evil_root%s", canary));
    hostile[n_hostile++] = strdup(S("/../../../..%s", canary));
    hostile[n_hostile++] = strdup(S("/evil_dir/../../../../..%s", canary));
    hostile[n_hostile++] = strdup(S("/evil_root/..%s", canary_dir_file));
    hostile[n_hostile++] = strdup(canary + 1); /* relative */
    hostile[n_hostile++] = strdup(S("/proc/self/root%s", canary));
    hostile[n_hostile++] = strdup(S("/proc/1/root%s", canary));
    hostile[n_hostile++] = strdup(S("/proc/thread-self/root%s", canary));
    hostile[n_hostile++] = "/proc/self/cwd/canary";
    hostile[n_hostile++] = "/proc/self/cwd/dir/f";
    hostile[n_hostile++] = strdup(S("/proc/self/fd/%d", canary_fd));
    hostile[n_hostile++] = strdup(S("/proc/%d/fd/%d", getpid(), canary_fd));
}

/* Metadata that only the canary files have. */
static bool is_canary_entry(const struct files_entry *e)
{
    int64_t m0 = (int64_t)taken.st[1].st_mtim.tv_sec * 1000000000 + taken.st[1].st_mtim.tv_nsec;
    int64_t m1 = (int64_t)taken.st[3].st_mtim.tv_sec * 1000000000 + taken.st[3].st_mtim.tv_nsec;
    return e->mtime_ns == m0 || e->mtime_ns == m1;
}

static int list_check(const struct files_entry *e, unsigned level, void *arg, err_t *err)
{
    int *bad = arg;
    if (is_canary_entry(e)) {
        printf("#   listed the canary: %s\n", e->path);
        (*bad)++;
    }
    return 0;
}

/* ---- path validation ---- */

static void test_paths(void)
{
    struct {
        const char *in, *out;
        int err;
    } cases[] = {
        {"/", "/", 0},
        {"//", "/", 0},
        {"/a/./b/", "/a/b", 0},
        {"/a//b///c", "/a/b/c", 0},
        {"/a/../..", "/", 0},
        {"/../../etc/passwd", "/etc/passwd", 0},
        {"/a/b/../c/./../d", "/a/d", 0},
        {"/...", "/...", 0},
        {"/.a/..b/b..", "/.a/..b/b..", 0},
        {"/a/..", "/", 0},
        {"", NULL, EINVAL},
        {"a", NULL, EINVAL},
        {"./a", NULL, EINVAL},
        {"../a", NULL, EINVAL},
        {"~/a", NULL, EINVAL},
    };
    err_t err;
    char out[PATH_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = files_path_normalize(cases[i].in, strlen(cases[i].in), out, &err);
        if (cases[i].out)
            ok(rc == 0 && strcmp(out, cases[i].out) == 0, "path \"%s\" is \"%s\"", cases[i].in,
               cases[i].out);
        else
            ok(rc == -1 && err.errnum == cases[i].err && err.msg[0], "path \"%s\" is refused (%s)",
               cases[i].in, strerror(cases[i].err));
    }
    ok(files_path_normalize("/a\0b", 4, out, &err) == -1 && err.errnum == EINVAL,
       "a NUL inside the path is refused");
    ok(files_path_normalize(NULL, 0, out, &err) == -1 && err.errnum == EINVAL, "NULL is refused");

    static char p[PATH_MAX + 8];
    memset(p, 'a', sizeof p);
    p[0] = '/';
    for (size_t i = 200; i < sizeof p; i += 201)
        p[i] = '/';
    ok(files_path_normalize(p, PATH_MAX - 1, out, &err) == 0 && strlen(out) == PATH_MAX - 1,
       "a path of PATH_MAX - 1 bytes is taken whole");
    ok(files_path_normalize(p, PATH_MAX, out, &err) == -1 && err.errnum == ENAMETOOLONG,
       "a path of PATH_MAX bytes is ENAMETOOLONG");
    memset(p, 'n', 300);
    p[0] = '/';
    ok(files_path_normalize(p, NAME_MAX + 1, out, &err) == 0, "a component of NAME_MAX bytes");
    ok(files_path_normalize(p, NAME_MAX + 2, out, &err) == -1 && err.errnum == ENAMETOOLONG,
       "a component of NAME_MAX + 1 bytes is ENAMETOOLONG");
    /* Long only before ".." takes it back: the limits are on the input. */
    char *up = S("/%.*s/..", NAME_MAX + 1, p + 1);
    ok(files_path_normalize(up, strlen(up), out, &err) == -1 && err.errnum == ENAMETOOLONG,
       "an over-long component is refused even if \"..\" follows it");
    static char in_place[PATH_MAX] = "/x//y/./../z";
    ok(files_path_normalize(in_place, strlen(in_place), in_place, &err) == 0 &&
           strcmp(in_place, "/x/z") == 0,
       "normalizing in place works");
}

/* ---- plain semantics ---- */

struct listing {
    int n;
    char paths[64][PATH_MAX];
    enum files_type types[64];
    unsigned levels[64];
};

static int list_collect(const struct files_entry *e, unsigned level, void *arg, err_t *err)
{
    struct listing *l = arg;
    if (l->n < 64) {
        snprintf(l->paths[l->n], PATH_MAX, "%s", e->path);
        l->types[l->n] = e->type;
        l->levels[l->n] = level;
    }
    l->n++;
    return 0;
}

static int list_stop(const struct files_entry *e, unsigned level, void *arg, err_t *err)
{
    return err_set(err, ECANCELED, "stopped at %s", e->path);
}

static void test_semantics(void)
{
    clean_root();
    err_t err;
    struct files_entry *e = malloc(sizeof *e);
    mode_t old_umask = umask(077);

    int fd = files_open_write(root_fd, "/home/user/a.txt", 0640, 1234, 5678,
                              FILES_MAKE_PARENTS | FILES_EXCLUSIVE, &err);
    ok(fd >= 0, "write a new file with its parents made");
    ok(fd >= 0 && write(fd, "hello", 5) == 5, "write through the fd");
    ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) && !(fcntl(fd, F_GETFL) & O_NONBLOCK) &&
           (fcntl(fd, F_GETFL) & O_ACCMODE) == O_WRONLY,
       "the fd is O_WRONLY, close-on-exec, blocking");
    if (fd >= 0)
        close(fd);
    struct stat st;
    ok(stat(R("/home/user/a.txt"), &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_uid == 1234 &&
           st.st_gid == 5678,
       "the new file has the mode asked for (umask 077 does not apply) and uid:gid");
    ok(stat(R("/home/user"), &st) == 0 && (st.st_mode & 07777) == FILES_PARENT_MODE &&
           st.st_uid == 1234 && st.st_gid == 5678,
       "parents made have FILES_PARENT_MODE and uid:gid");
    ok(stat(R("/home"), &st) == 0 && st.st_uid == 1234, "so does the parent's parent");

    ok(files_stat(root_fd, "/home/user/a.txt", false, e, &err) == 0 && e->type == FILES_TYPE_FILE &&
           e->size == 5 && e->mode == 0640 && e->uid == 1234 && e->gid == 5678 &&
           strcmp(e->name, "a.txt") == 0 && strcmp(e->path, "/home/user/a.txt") == 0 &&
           e->symlink_target[0] == '\0',
       "stat: type, size, mode, owner, name, path");
    ok(stat(R("/home/user/a.txt"), &st) == 0 &&
           e->mtime_ns == (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
       "stat: mtime in ns");
    ok(files_stat(root_fd, "/", false, e, &err) == 0 && e->type == FILES_TYPE_DIR &&
           strcmp(e->name, "/") == 0 && strcmp(e->path, "/") == 0,
       "stat /: the root, named \"/\"");

    fd = files_open_write(root_fd, "/home/user/a.txt", 0600, 0, 0, FILES_EXCLUSIVE, &err);
    ok(fd == -1 && err.errnum == EEXIST, "EXCLUSIVE on an existing file is EEXIST");
    fd = files_open_write(root_fd, "/home/user/a.txt", 0600, 0, 0, FILES_APPEND, &err);
    ok(fd >= 0 && write(fd, " world", 6) == 6, "APPEND");
    if (fd >= 0)
        close(fd);
    fd = files_open_read(root_fd, "/home/user/a.txt", &err);
    ok(fd_reads(fd, "hello world"), "read back what was written and appended");
    ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) &&
           (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY && !(fcntl(fd, F_GETFL) & O_NONBLOCK),
       "the read fd is O_RDONLY, close-on-exec, blocking");
    if (fd >= 0)
        close(fd);
    ok(stat(R("/home/user/a.txt"), &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_uid == 1234,
       "writing an existing file keeps its mode and owner");
    fd = files_open_write(root_fd, "/home/user/a.txt", 0600, 0, 0, FILES_TRUNCATE, &err);
    ok(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0, "TRUNCATE");
    if (fd >= 0)
        close(fd);
    fd = files_open_write(root_fd, "/home/user/a.txt", 0600, 0, 0, 0, &err);
    ok(fd >= 0, "no flags: an existing file opened as it is");
    if (fd >= 0)
        close(fd);
    ok(files_open_write(root_fd, "/home/user/x", 0600, 0, 0, 1 << 9, &err) == -1 &&
           err.errnum == EINVAL,
       "unknown flags are EINVAL");
    ok(files_open_write(root_fd, "/home/user/x", 010000, 0, 0, 0, &err) == -1 &&
           err.errnum == EINVAL,
       "a mode beyond 07777 is EINVAL");
    ok(files_open_write(root_fd, "/nope/x", 0600, 0, 0, 0, &err) == -1 && err.errnum == ENOENT &&
           strstr(err.msg, "/nope/x"),
       "no parent, no MAKE_PARENTS: ENOENT, and the message names the path (%s)", err.msg);
    ok(files_open_write(root_fd, "/home", 0600, 0, 0, 0, &err) == -1 && err.errnum == EISDIR,
       "writing a directory is EISDIR");
    ok(files_open_write(root_fd, "/", 0600, 0, 0, 0, &err) == -1 && err.errnum == EISDIR,
       "writing / is EISDIR");
    ok(files_open_read(root_fd, "/home", &err) == -1 && err.errnum == EISDIR,
       "reading a directory is EISDIR");
    ok(files_open_read(root_fd, "/nope", &err) == -1 && err.errnum == ENOENT &&
           strstr(err.msg, "read /nope"),
       "reading a missing file is ENOENT (%s)", err.msg);
    put(R("/home/file"), "x");
    ok(files_open_write(root_fd, "/home/file/x", 0600, 0, 0, FILES_MAKE_PARENTS, &err) == -1 &&
           err.errnum == ENOTDIR,
       "MAKE_PARENTS through a file is ENOTDIR (%s)", err.msg);

    /* symlinks inside the root */
    symlink("/home/user/a.txt", R("/link_abs"));
    symlink("home/user", R("/link_dir"));
    symlink("/nowhere", R("/dangling"));
    ok(files_stat(root_fd, "/link_abs", false, e, &err) == 0 && e->type == FILES_TYPE_SYMLINK &&
           strcmp(e->symlink_target, "/home/user/a.txt") == 0,
       "stat without follow: the link and its text");
    ok(files_stat(root_fd, "/link_abs", true, e, &err) == 0 && e->type == FILES_TYPE_FILE &&
           e->mode == 0640 && strcmp(e->name, "link_abs") == 0 && e->symlink_target[0] == '\0',
       "stat with follow: the target's metadata under the link's name");
    ok(files_stat(root_fd, "/dangling", true, e, &err) == -1 && err.errnum == ENOENT,
       "stat with follow of a dangling link is ENOENT");
    ok(files_stat(root_fd, "/link_abs", false, e, &err) == 0 &&
           strcmp(e->target, "/home/user/a.txt") == 0 && e->target_type == FILES_TYPE_FILE &&
           e->target_mode == 0640,
       "a link's target: the absolute path in the root, the target's type and mode (%s)",
       e->target);
    symlink("../../link_abs", R("/home/user/rel_chain"));
    ok(files_stat(root_fd, "/home/user/rel_chain", false, e, &err) == 0 &&
           strcmp(e->target, "/home/user/a.txt") == 0,
       "a relative link to a link: resolved to the end, in the root (%s)", e->target);
    ok(files_stat(root_fd, "/dangling", false, e, &err) == 0 && e->target[0] == '\0',
       "a dangling link has no target");
    {
        int wfd =
            files_open_write(root_fd, "/home/user/m.txt", 0644, (uid_t)-1, (gid_t)-1, 0, &err);
        ok(wfd >= 0 && files_metadata_write(wfd, "a=1\nb=two words\n", &err) == 0,
           "metadata written on the file's fd (%s)", err.msg);
        ok(files_stat(root_fd, "/home/user/m.txt", false, e, &err) == 0 &&
               strcmp(e->metadata, "a=1\nb=two words\n") == 0,
           "stat reads it back (%s)", e->metadata);
        ok(wfd >= 0 && files_metadata_write(wfd, "b=x\n", &err) == 0 &&
               files_stat(root_fd, "/home/user/m.txt", false, e, &err) == 0 &&
               strcmp(e->metadata, "b=x\n") == 0,
           "a new set replaces the old whole");
        ok(wfd >= 0 && fsetxattr(wfd, "user.e2b.bad", "\x01", 1, 0) == 0 &&
               fsetxattr(wfd, "user.other", "x", 1, 0) == 0 &&
               files_stat(root_fd, "/home/user/m.txt", false, e, &err) == 0 &&
               strcmp(e->metadata, "b=x\n") == 0,
           "attributes the SDK cannot take, or of another namespace, are left out");
        const char *bad_sets[] = {"a\n", "=v\n", "a=b", "a=\x01\n", "a b=c\n", "a=1\na=2\n"};
        int refused = 0;
        for (size_t i = 0; wfd >= 0 && i < sizeof bad_sets / sizeof *bad_sets; i++)
            refused += files_metadata_write(wfd, bad_sets[i], &err) < 0 && err.errnum == EINVAL;
        ok(refused == 6, "malformed metadata refused: %d of 6", refused);
        if (wfd >= 0)
            close(wfd);
    }
    ok(files_stat(root_fd, "/link_dir/a.txt", false, e, &err) == 0 && e->type == FILES_TYPE_FILE,
       "symlinks before the last component are followed (inside the root)");
    fd = files_open_read(root_fd, "/link_abs", &err);
    ok(fd >= 0, "read follows a final symlink inside the root");
    if (fd >= 0)
        close(fd);
    ok(files_open_write(root_fd, "/link_abs", 0600, 0, 0, FILES_TRUNCATE, &err) == -1 &&
           err.errnum == ELOOP,
       "write refuses a final symlink (ELOOP)");
    ok(files_open_write(root_fd, "/dangling", 0600, 0, 0, 0, &err) == -1 && err.errnum == ELOOP &&
           access(R("/nowhere"), F_OK) != 0,
       "write refuses a dangling final symlink, and creates nothing at its target");

    /* mkdir */
    bool created = true;
    ok(files_mkdir(root_fd, "/m/a/b", 0750, 1000, 1000, &created, &err) == 0 && created,
       "mkdir -p: made");
    ok(stat(R("/m/a/b"), &st) == 0 && (st.st_mode & 07777) == 0750 && st.st_uid == 1000 &&
           stat(R("/m"), &st) == 0 && (st.st_mode & 07777) == 0750 && st.st_gid == 1000,
       "mkdir: every directory made has the mode and owner");
    ok(files_mkdir(root_fd, "/m/a/b", 0700, 0, 0, &created, &err) == 0 && !created,
       "mkdir of an existing directory: created false");
    ok(stat(R("/m/a/b"), &st) == 0 && (st.st_mode & 07777) == 0750, "and its mode is left alone");
    ok(files_mkdir(root_fd, "/link_dir", 0700, 0, 0, &created, &err) == 0 && !created,
       "mkdir of a symlink to a directory: exists");
    ok(files_mkdir(root_fd, "/home/user/a.txt", 0700, 0, 0, &created, &err) == -1 &&
           err.errnum == EEXIST && !created,
       "mkdir of an existing file: EEXIST");
    ok(files_mkdir(root_fd, "/dangling", 0700, 0, 0, &created, &err) == -1 &&
           err.errnum == EEXIST && access(R("/nowhere"), F_OK) != 0,
       "mkdir of a dangling symlink: EEXIST, nothing made at its target");
    ok(files_mkdir(root_fd, "/dangling/sub", 0700, 0, 0, &created, &err) == -1 &&
           access(R("/nowhere"), F_OK) != 0,
       "mkdir -p through a dangling symlink fails and makes nothing at its target");
    ok(files_mkdir(root_fd, "/", 0700, 0, 0, &created, &err) == 0 && !created, "mkdir /: exists");
    ok(files_mkdir(root_fd, "/m/x", 0700, (uid_t)-1, (gid_t)-1, &created, &err) == 0 &&
           stat(R("/m/x"), &st) == 0 && st.st_uid == 0,
       "uid -1: the creator's own");

    /* move */
    ok(files_move(root_fd, "/home/user/a.txt", "/m/a/moved.txt", 0, 0, 0, &err) == 0 &&
           access(R("/m/a/moved.txt"), F_OK) == 0 && access(R("/home/user/a.txt"), F_OK) != 0,
       "move a file");
    ok(files_move(root_fd, "/m/a/moved.txt", "/new/parent/x.txt", 0, 0, 0, &err) == -1 &&
           err.errnum == ENOENT,
       "move to a missing parent without MAKE_PARENTS: ENOENT");
    ok(files_move(root_fd, "/m/a/moved.txt", "/new/parent/x.txt", FILES_MAKE_PARENTS, 77, 88,
                  &err) == 0 &&
           stat(R("/new/parent"), &st) == 0 && st.st_uid == 77 && st.st_gid == 88,
       "with MAKE_PARENTS: parents made, owned by uid:gid");
    put(R("/m/other"), "o");
    ok(files_move(root_fd, "/m/other", "/new/parent/x.txt", FILES_NO_REPLACE, 0, 0, &err) == -1 &&
           err.errnum == EEXIST,
       "NO_REPLACE: an existing destination is EEXIST");
    ok(files_move(root_fd, "/m/other", "/new/parent/x.txt", 0, 0, 0, &err) == 0,
       "without it, replaced");
    ok(files_move(root_fd, "/link_dir", "/link_moved", 0, 0, 0, &err) == 0 &&
           lstat(R("/link_moved"), &st) == 0 && S_ISLNK(st.st_mode) &&
           stat(R("/home/user"), &st) == 0,
       "move a symlink: the link moves, its target stays");
    ok(files_move(root_fd, "/", "/x", 0, 0, 0, &err) == -1 && err.errnum == EBUSY &&
           files_move(root_fd, "/m", "/", 0, 0, 0, &err) == -1 && err.errnum == EBUSY,
       "move from or to / is EBUSY");
    ok(files_move(root_fd, "/m", "/m/a/inside", 0, 0, 0, &err) == -1 && err.errnum == EINVAL,
       "move a directory into itself: EINVAL");
    ok(files_move(root_fd, "/m", "/x", 1 << 9, 0, 0, &err) == -1 && err.errnum == EINVAL,
       "move: unknown flags are EINVAL");

    /* list */
    clean_root();
    mkdirs(R("/l/b/deep/deeper"));
    mkdirs(R("/l/a"));
    put(R("/l/c"), "c");
    put(R("/l/b/f"), "f");
    put(R("/l/b/deep/g"), "g");
    put(R("/l/b/deep/deeper/h"), "h");
    symlink("/l/b", R("/l/link"));
    static struct listing l;
    memset(&l, 0, sizeof l);
    ok(files_list(root_fd, "/l", 1, list_collect, &l, &err) == 0 && l.n == 4 &&
           strcmp(l.paths[0], "/l/a") == 0 && strcmp(l.paths[1], "/l/b") == 0 &&
           strcmp(l.paths[2], "/l/c") == 0 && strcmp(l.paths[3], "/l/link") == 0 &&
           l.types[3] == FILES_TYPE_SYMLINK && l.types[0] == FILES_TYPE_DIR,
       "list depth 1: the directory's own entries, sorted, the symlink as a symlink");
    memset(&l, 0, sizeof l);
    ok(files_list(root_fd, "/l", 2, list_collect, &l, &err) == 0 && l.n == 6 &&
           strcmp(l.paths[4], "/l/b/deep") == 0 && strcmp(l.paths[5], "/l/b/f") == 0 &&
           l.levels[4] == 2,
       "list depth 2: then the subdirectories' entries, not through the symlink");
    memset(&l, 0, sizeof l);
    ok(files_list(root_fd, "/l", 100, list_collect, &l, &err) == 0 && l.n == 9,
       "list depth 100: everything, once (%d)", l.n);
    memset(&l, 0, sizeof l);
    ok(files_list(root_fd, "/l/link", 1, list_collect, &l, &err) == 0 && l.n == 2 &&
           strcmp(l.paths[0], "/l/link/deep") == 0,
       "the listed directory itself may be a symlink: paths as asked");
    memset(&l, 0, sizeof l);
    ok(files_list(root_fd, "/", 1, list_collect, &l, &err) == 0 && l.n >= 1 &&
           strncmp(l.paths[0], "/", 1) == 0 && strstr(l.paths[0], "//") == NULL,
       "list /: paths without a double slash");
    ok(files_list(root_fd, "/l", 0, list_collect, &l, &err) == -1 && err.errnum == EINVAL,
       "depth 0 is EINVAL");
    ok(files_list(root_fd, "/l/c", 1, list_collect, &l, &err) == -1 && err.errnum == ENOTDIR,
       "listing a file is ENOTDIR");
    ok(files_list(root_fd, "/l", 2, list_stop, NULL, &err) == -1 && err.errnum == ECANCELED &&
           strstr(err.msg, "stopped at /l/a"),
       "a callback's error stops the listing and comes back");

    /* remove */
    ok(files_remove(root_fd, "/l/link", &err) == 0 && lstat(R("/l/link"), &st) != 0 &&
           stat(R("/l/b/f"), &st) == 0,
       "remove a symlink to a directory: the link goes, the target stays");
    ok(files_remove(root_fd, "/l/c", &err) == 0 && access(R("/l/c"), F_OK) != 0, "remove a file");
    ok(files_remove(root_fd, "/l", &err) == 0 && access(R("/l"), F_OK) != 0, "remove a tree");
    ok(files_remove(root_fd, "/l", &err) == -1 && err.errnum == ENOENT, "remove again: ENOENT");
    ok(files_remove(root_fd, "/", &err) == -1 && err.errnum == EBUSY, "remove / is EBUSY");
    ok(files_remove(root_fd, "/..", &err) == -1 && err.errnum == EBUSY, "so is /..");

    umask(old_umask);
    free(e);
    ok(count_fds() == fds_at_start, "semantics: no fd left open");
}

/* ---- negative controls ---- */

static void test_controls(void)
{
    build_hostile();
    retake();
    ok(canary_intact(), "control: the canary is intact after setup");
    int fd = open(R("/evil_abs"), O_RDONLY | O_CLOEXEC);
    ok(fd_reads(fd, CANARY_TEXT), "control: plain open() of the root's /evil_abs reads the canary");
    if (fd >= 0)
        close(fd);
    ok(!canary_check(true), "control: and the canary check notices that read");
    retake();
    fd = open(R("/evil_dir_rel/f"), O_RDONLY | O_NOATIME | O_CLOEXEC);
    ok(fd >= 0, "control: plain open() through the relative directory symlink reaches the canary");
    if (fd >= 0)
        close(fd);
    ok(!canary_check(true), "control: noticed, even with O_NOATIME (inotify sees the open)");
    retake();
    ok(chmod(R("/evil_abs"), 0600) == 0 && !canary_check(true),
       "control: a chmod through the symlink is noticed");
    chmod(canary, 0644);
    retake();
    struct stat st;
    ok(stat(R("/evil_abs"), &st) == 0 && st.st_ino == taken.st[1].st_ino,
       "control: plain stat() through the symlink sees the canary's inode");
    ok(canary_intact(), "control: after a new snapshot, intact again");
    fd = open(R("/proc/self/fd/%d", canary_fd), O_RDONLY | O_CLOEXEC);
    ok(!have_proc || fd_reads(fd, CANARY_TEXT),
       "control: plain open() of the root's /proc/self/fd/N reaches the canary");
    if (fd >= 0)
        close(fd);
    retake();
}

/* ---- every operation through every hostile path ---- */

static void test_hostile(void)
{
    err_t err;
    struct files_entry *e = malloc(sizeof *e);

    /* What each path gives when read: the decoy, or a refusal. */
    build_hostile();
    retake();
    struct {
        const char *path;
        const char *text; /* NULL: refused */
        int errnum;
    } reads[] = {
        {"/evil_abs", DECOY_TEXT, 0},       {"/evil_rel", DECOY_TEXT, 0},
        {"/chain", DECOY_TEXT, 0},          {"/evil_dir/f", DECOY_TEXT, 0},
        {"/evil_dir_rel/f", DECOY_TEXT, 0}, {"/chain_dir/f", DECOY_TEXT, 0},
        {hostile[6], DECOY_TEXT, 0},        {hostile[7], DECOY_TEXT, 0},
        {hostile[8], DECOY_TEXT, 0},        {hostile[9], DECOY_TEXT, 0},
        {hostile[10], NULL, EINVAL},        {hostile[11], NULL, ELOOP},
        {hostile[12], NULL, ELOOP},         {hostile[13], NULL, ELOOP},
        {hostile[14], NULL, ELOOP},         {hostile[16], NULL, ELOOP},
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        if (!have_proc && strncmp(reads[i].path, "/proc/", 6) == 0) {
            ok(1, "read %s # SKIP no procfs in the root", reads[i].path);
            continue;
        }
        int fd = files_open_read(root_fd, reads[i].path, &err);
        if (reads[i].text) {
            ok(fd_reads(fd, reads[i].text), "read %s: the decoy inside the root", reads[i].path);
        } else {
            /* /proc/1/root: ptrace access to the host's init may be refused (EACCES) before
             * RESOLVE_NO_MAGICLINKS has its say; refused either way. */
            bool proc1 = strncmp(reads[i].path, "/proc/1/", 8) == 0;
            ok(fd == -1 && (err.errnum == reads[i].errnum || (proc1 && err.errnum == EACCES)),
               "read %s: refused, %s (%s)", reads[i].path, strerror(reads[i].errnum),
               fd >= 0 ? "opened!" : err.msg);
        }
        if (fd >= 0)
            close(fd);
    }
    ok(canary_intact(), "reads: canary untouched");

    int bad = 0;
    for (int i = 0; i < n_hostile; i++) {
        for (int follow = 0; follow < 2; follow++) {
            if (files_stat(root_fd, hostile[i], follow, e, &err) == 0 && is_canary_entry(e)) {
                printf("#   stat %s: the canary's metadata\n", hostile[i]);
                bad++;
            }
        }
    }
    ok(bad == 0 && canary_intact(), "stat (both ways) of %d hostile paths: never the canary",
       n_hostile);
    /* A target is a path in the root: never the root's own host path (the prefix is taken off),
     * and a link to the canary's host path leads to the decoy at that path inside. */
    char root_host[PATH_MAX];
    snprintf(root_host, sizeof root_host, "%s", R("/"));
    bad = 0;
    int targets = 0;
    const char *links[] = {"/evil_abs",     "/evil_rel",  "/chain",    "/evil_dir",
                           "/evil_dir_rel", "/chain_dir", "/evil_root"};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        if (files_stat(root_fd, links[i], false, e, &err) < 0 || !e->target[0])
            continue;
        targets++;
        if (strncmp(e->target, root_host, strlen(root_host)) == 0 || e->target[0] != '/') {
            printf("#   stat %s: target %s\n", links[i], e->target);
            bad++;
        }
    }
    ok(bad == 0 && targets == 7, "hostile links' targets: %d, none with the root's host path",
       targets);
    ok(files_stat(root_fd, "/chain", false, e, &err) == 0 && strcmp(e->target, canary) == 0 &&
           files_stat(root_fd, "/evil_root", false, e, &err) == 0 && strcmp(e->target, "/") == 0,
       "a chain to the canary's host path: the decoy at that path inside; a link to /: /");

    bad = 0;
    const char *dirs[] = {"/evil_dir",       "/evil_dir_rel",  "/chain_dir",  "/evil_root",
                          "/proc/self/root", "/proc/self/cwd", "/proc/1/root"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        int rc = files_list(root_fd, dirs[i], 50, list_check, &bad, &err);
        if (strncmp(dirs[i], "/proc/", 6) == 0 && rc == 0 && have_proc) {
            printf("#   list %s succeeded\n", dirs[i]);
            bad++;
        }
    }
    for (int i = 0; i < n_hostile; i++)
        files_list(root_fd, hostile[i], 3, list_check, &bad, &err);
    ok(bad == 0 && canary_intact(),
       "list through directory symlinks and magic links: never outside");

    bad = 0;
    for (int i = 0; i < n_hostile; i++) {
        build_hostile();
        int fd = files_open_write(root_fd, hostile[i], 0644, 0, 0, FILES_TRUNCATE, &err);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && st.st_ino == taken.st[1].st_ino)
                bad++;
            if (write(fd, "PWNED\n", 6) != 6)
                bad++;
            close(fd);
        }
        fd = files_open_write(root_fd, hostile[i], 0644, 0, 0, FILES_APPEND, &err);
        if (fd >= 0)
            close(fd);
        fd = files_open_write(root_fd, S("%s_new", hostile[i]), 0644, 0, 0,
                              FILES_EXCLUSIVE | FILES_MAKE_PARENTS, &err);
        if (fd >= 0)
            close(fd);
        fd = files_open_write(root_fd, S("%s/sub/new", hostile[i]), 0644, 0, 0, FILES_MAKE_PARENTS,
                              &err);
        if (fd >= 0)
            close(fd);
        if (!canary_check(false)) {
            printf("#   after write %s\n", hostile[i]);
            bad++;
            retake();
        }
    }
    ok(bad == 0,
       "write (truncate, append, exclusive, make parents) through %d hostile paths: "
       "canary untouched",
       n_hostile);
    build_hostile();
    ok(files_open_write(root_fd, "/evil_abs", 0644, 0, 0, FILES_TRUNCATE, &err) == -1 &&
           err.errnum == ELOOP,
       "write /evil_abs: refused as a final symlink");
    int fd = files_open_write(root_fd, "/evil_dir/f", 0644, 0, 0, FILES_TRUNCATE, &err);
    ok(fd >= 0 && write(fd, "W", 1) == 1, "write /evil_dir/f: allowed, into the root");
    if (fd >= 0)
        close(fd);
    int dfd = open(R("%s", canary_dir_file), O_RDONLY | O_CLOEXEC);
    ok(fd_reads(dfd, "W"), "and it is the decoy that was written");
    if (dfd >= 0)
        close(dfd);
    fd = files_open_write(root_fd, S("/evil_root%s/dir/new", outside), 0644, 0, 0, 0, &err);
    ok(fd >= 0 && access(R("%s/dir/new", outside), F_OK) == 0 &&
           access(S("%s/dir/new", outside), F_OK) != 0,
       "write /evil_root/<outside>/dir/new: made inside the root, not outside");
    if (fd >= 0)
        close(fd);

    bad = 0;
    for (int i = 0; i < n_hostile; i++) {
        build_hostile();
        bool created;
        files_mkdir(root_fd, hostile[i], 0755, 0, 0, &created, &err);
        files_mkdir(root_fd, S("%s_d/a/b", hostile[i]), 0755, 0, 0, &created, &err);
        files_mkdir(root_fd, S("%s/../x", hostile[i]), 0755, 0, 0, &created, &err);
        if (!canary_check(false)) {
            printf("#   after mkdir %s\n", hostile[i]);
            bad++;
            retake();
        }
    }
    ok(bad == 0, "mkdir through %d hostile paths: canary untouched", n_hostile);

    bad = 0;
    for (int i = 0; i < n_hostile; i++) {
        build_hostile();
        files_move(root_fd, hostile[i], "/moved", 0, 0, 0, &err);
        build_hostile();
        files_move(root_fd, "/plain", hostile[i], 0, 0, 0, &err);
        build_hostile();
        files_move(root_fd, "/plain", S("%s/x/y", hostile[i]), FILES_MAKE_PARENTS, 0, 0, &err);
        build_hostile();
        files_move(root_fd, hostile[i], S("%s.2", hostile[i]), 0, 0, 0, &err);
        if (!canary_check(false)) {
            printf("#   after move %s\n", hostile[i]);
            bad++;
            retake();
        }
    }
    ok(bad == 0, "move from and to %d hostile paths: canary untouched", n_hostile);
    build_hostile();
    struct stat st;
    ok(files_move(root_fd, "/evil_abs", "/moved", 0, 0, 0, &err) == 0 &&
           lstat(R("/moved"), &st) == 0 && S_ISLNK(st.st_mode),
       "move /evil_abs: the symlink itself moved");

    bad = 0;
    for (int i = 0; i < n_hostile; i++) {
        build_hostile();
        files_remove(root_fd, hostile[i], &err);
        build_hostile();
        files_remove(root_fd, S("%s/", hostile[i]), &err);
        if (!canary_check(false)) {
            printf("#   after remove %s\n", hostile[i]);
            bad++;
            retake();
        }
    }
    const char *trees[] = {"/evil_dir", "/evil_dir_rel", "/chain_dir", "/evil_root", "/proc/self"};
    for (size_t i = 0; i < sizeof trees / sizeof trees[0]; i++) {
        build_hostile();
        files_remove(root_fd, trees[i], &err);
    }
    ok(bad == 0 && canary_intact(), "remove %d hostile paths and directory links: canary untouched",
       n_hostile);
    build_hostile();
    mkdirs(R("/t/a/b"));
    symlink(canary_dir, R("/t/a/to_dir"));
    symlink(climb(canary_dir), R("/t/a/b/to_dir_rel"));
    symlink(canary, R("/t/to_file"));
    ok(files_remove(root_fd, "/t", &err) == 0 && access(R("/t"), F_OK) != 0 && canary_intact(),
       "remove a tree full of links to the outside: the links go, the outside stays");

    bad = 0;
    for (int i = 0; i < n_hostile; i++) {
        build_hostile();
        for (int rec = 0; rec < 2; rec++) {
            struct files_watch *w = files_watch_open(root_fd, hostile[i], rec, &err);
            files_watch_close(w);
        }
    }
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        struct files_watch *w = files_watch_open(root_fd, dirs[i], true, &err);
        if (w && strncmp(dirs[i], "/proc/", 6) == 0 && have_proc)
            bad++;
        files_watch_close(w);
    }
    ok(bad == 0 && canary_intact(), "watch hostile paths: never outside, magic links refused");

    if (have_proc) {
        ok(files_open_read(root_fd, "/proc/self/status", &err) == -1 && err.errnum == EPERM,
           "read a procfs file: EPERM (%s)", err.msg);
        ok(files_open_read(root_fd, "/proc/self/mem", &err) == -1 && err.errnum == EPERM,
           "read /proc/self/mem: EPERM");
        ok(files_open_write(root_fd, "/proc/self/comm", 0644, 0, 0, 0, &err) == -1 &&
               err.errnum == EPERM,
           "write a procfs file: EPERM");
        ok(files_stat(root_fd, "/proc/self", false, e, &err) == 0 &&
               e->type == FILES_TYPE_SYMLINK && atoi(e->symlink_target) == getpid(),
           "stat /proc/self: a symlink to the pid (metadata is fine)");
        int n = 0;
        ok(files_list(root_fd, "/proc/self/fd", 1, list_check, &n, &err) == 0 && n == 0,
           "list /proc/self/fd: the magic links are listed, not followed");
    }
    free(e);
    ok(count_fds() == fds_at_start, "hostile: no fd left open");
}

/* ---- FIFOs, sockets, devices, leases ---- */

static void test_special(void)
{
    clean_root();
    err_t err;
    alarm(60);
    ok(mkfifo(R("/fifo"), 0666) == 0, "a FIFO in the root");
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", R("/sock"));
    ok(bind(sock, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(sock, 1) == 0,
       "a listening socket in the root");
    ok(mknod(R("/null"), S_IFCHR | 0666, makedev(1, 3)) == 0, "a character device (1:3)");
    ok(mknod(R("/ptmx"), S_IFCHR | 0666, makedev(5, 2)) == 0, "a ptmx device (5:2)");
    ok(mknod(R("/blk"), S_IFBLK | 0600, makedev(7, 250)) == 0, "a block device");
    symlink("/fifo", R("/fifo_link"));
    symlink("null", R("/null_link"));
    mkdir(R("/dir"), 0755);

    /* Anything that opens them shows up as IN_OPEN. */
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    const char *special[] = {"/fifo", "/sock", "/null", "/ptmx", "/blk"};
    for (size_t i = 0; i < 5; i++)
        inotify_add_watch(in, R("%s", special[i]), IN_OPEN | IN_ACCESS | IN_MODIFY | IN_ATTRIB);
    /* A writer waiting for a reader: if anything opens the FIFO for reading, it goes on. */
    int report[2];
    pipe2(report, O_CLOEXEC);
    pid_t writer = fork();
    if (writer == 0) {
        int w = open(R("/fifo"), O_WRONLY);
        if (w >= 0 && write(report[1], "opened", 6) < 0)
            _exit(1);
        _exit(0);
    }
    close(report[1]);

    const char *paths[] = {"/fifo", "/sock", "/null", "/ptmx", "/blk", "/fifo_link", "/null_link"};
    int refused_read = 0, refused_write = 0, n = 7;
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        int fd = files_open_read(root_fd, paths[i], &err);
        if (fd < 0 && err.errnum == EINVAL)
            refused_read++;
        else
            printf("#   read %s: %s\n", paths[i], fd >= 0 ? "opened" : err.msg);
        if (fd >= 0)
            close(fd);
        for (unsigned f = 0; f < 4; f++) {
            unsigned flags = (unsigned[]){0, FILES_TRUNCATE, FILES_APPEND, FILES_MAKE_PARENTS}[f];
            fd = files_open_write(root_fd, paths[i], 0644, 0, 0, flags, &err);
            bool link = strstr(paths[i], "_link") != NULL;
            if (fd < 0 && err.errnum == (link ? ELOOP : EINVAL))
                refused_write++;
            else
                printf("#   write %s: %s\n", paths[i], fd >= 0 ? "opened" : err.msg);
            if (fd >= 0)
                close(fd);
        }
    }
    ok(refused_read == n, "read of FIFO, socket, devices (and links to them): EINVAL, %d of %d",
       refused_read, n);
    ok(refused_write == 4 * n,
       "write (every flag) of them: EINVAL, or ELOOP for the links; %d of %d", refused_write,
       4 * n);
    ok(now_ms() - t0 < 5000, "none of it blocked (%.0f ms)", now_ms() - t0);
    char ev[4096];
    ok(read(in, ev, sizeof ev) < 0 && errno == EAGAIN, "none of them was opened (no IN_OPEN)");
    struct pollfd p = {report[0], POLLIN, 0};
    ok(poll(&p, 1, 200) == 0, "the FIFO's waiting writer still waits: no reader ever came");

    struct files_entry *e = malloc(sizeof *e);
    int other = 0;
    for (size_t i = 0; i < 5; i++)
        other += files_stat(root_fd, special[i], true, e, &err) == 0 && e->type == FILES_TYPE_OTHER;
    ok(other == 5, "stat: FIFO, socket, devices are OTHER");
    ok(read(in, ev, sizeof ev) < 0 && errno == EAGAIN, "and stat opened none of them");
    free(e);

    /* The controls: the same checks notice a real open. */
    int c = open(R("/null"), O_RDONLY | O_CLOEXEC);
    close(c);
    ok(read(in, ev, sizeof ev) > 0, "control: a plain open() of the device shows up as IN_OPEN");
    c = open(R("/fifo"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ok(poll(&p, 1, 2000) == 1, "control: a reader on the FIFO lets the writer go on");
    close(c);
    waitpid(writer, NULL, 0);
    close(report[0]);
    close(in);
    close(sock);

    /* Leases: an open that would have to break one fails at once instead of waiting for
     * lease-break-time (45 s by default). */
    put(R("/leased"), "leased");
    int ready[2];
    pipe2(ready, O_CLOEXEC);
    pid_t holder = fork();
    if (holder == 0) {
        int fd = open(R("/leased"), O_RDONLY);
        char ch = fcntl(fd, F_SETLEASE, F_RDLCK) == 0 ? 'y' : 'n';
        if (write(ready[1], &ch, 1) < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    char ch = 'n';
    if (read(ready[0], &ch, 1) != 1)
        ch = 'n';
    if (ch == 'y') {
        t0 = now_ms();
        int fd = files_open_write(root_fd, "/leased", 0644, 0, 0, FILES_TRUNCATE, &err);
        ok(fd == -1 && err.errnum == EWOULDBLOCK && now_ms() - t0 < 1000,
           "write of a file under a read lease: EWOULDBLOCK at once (%.0f ms)", now_ms() - t0);
        if (fd >= 0)
            close(fd);
        fd = files_open_read(root_fd, "/leased", &err);
        ok(fd_reads(fd, "leased"), "a read does not conflict with a read lease");
        if (fd >= 0)
            close(fd);
    } else {
        ok(1, "leases # SKIP F_SETLEASE failed here");
        ok(1, "leases # SKIP");
    }
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    holder = fork();
    if (holder == 0) {
        int fd = open(R("/leased"), O_WRONLY);
        char ok_ch = fcntl(fd, F_SETLEASE, F_WRLCK) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok_ch, 1) < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    if (read(ready[0], &ch, 1) != 1)
        ch = 'n';
    if (ch == 'y') {
        t0 = now_ms();
        int fd = files_open_read(root_fd, "/leased", &err);
        ok(fd == -1 && err.errnum == EWOULDBLOCK && now_ms() - t0 < 1000,
           "read of a file under a write lease: EWOULDBLOCK at once (%.0f ms)", now_ms() - t0);
        if (fd >= 0)
            close(fd);
    } else {
        ok(1, "write lease # SKIP F_SETLEASE F_WRLCK failed here");
    }
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    alarm(0);
    ok(count_fds() == fds_at_start, "special files: no fd left open");
}

/* ---- long names and paths ---- */

static int count_cb(const struct files_entry *e, unsigned level, void *arg, err_t *err)
{
    (*(int *)arg)++;
    return 0;
}

static void test_long(void)
{
    clean_root();
    err_t err;
    char name255[NAME_MAX + 1], name256[NAME_MAX + 2];
    memset(name255, 'n', NAME_MAX);
    name255[NAME_MAX] = '\0';
    memset(name256, 'n', NAME_MAX + 1);
    name256[NAME_MAX + 1] = '\0';
    char *p255 = S("/long/%s", name255), *p256 = S("/long/%s", name256);
    int fd = files_open_write(root_fd, p255, 0644, 0, 0, FILES_MAKE_PARENTS, &err);
    ok(fd >= 0, "write a name of NAME_MAX bytes");
    if (fd >= 0)
        close(fd);
    struct files_entry *e = malloc(sizeof *e);
    ok(files_stat(root_fd, p255, false, e, &err) == 0 && strcmp(e->name, name255) == 0,
       "stat it: the whole name comes back");
    bool created;
    int refused = 0;
    refused += files_open_write(root_fd, p256, 0644, 0, 0, FILES_MAKE_PARENTS, &err) == -1 &&
               err.errnum == ENAMETOOLONG;
    refused += files_open_read(root_fd, p256, &err) == -1 && err.errnum == ENAMETOOLONG;
    refused += files_stat(root_fd, p256, false, e, &err) == -1 && err.errnum == ENAMETOOLONG;
    refused +=
        files_mkdir(root_fd, p256, 0755, 0, 0, &created, &err) == -1 && err.errnum == ENAMETOOLONG;
    refused += files_move(root_fd, p255, p256, 0, 0, 0, &err) == -1 && err.errnum == ENAMETOOLONG;
    refused += files_remove(root_fd, p256, &err) == -1 && err.errnum == ENAMETOOLONG;
    int n = 0;
    refused += files_list(root_fd, p256, 1, count_cb, &n, &err) == -1 && err.errnum == ENAMETOOLONG;
    refused += files_watch_open(root_fd, p256, true, &err) == NULL && err.errnum == ENAMETOOLONG;
    ok(refused == 8, "a name of NAME_MAX + 1 bytes: every operation ENAMETOOLONG (%d of 8)",
       refused);
    ok(files_remove(root_fd, p255, &err) == 0, "remove the NAME_MAX name");

    /* A path of exactly PATH_MAX - 1 bytes: "/L", 20 components of 200, one of 72. */
    static char p4095[PATH_MAX + 2];
    size_t len = (size_t)snprintf(p4095, sizeof p4095, "/L");
    for (int i = 0; i < 20; i++) {
        p4095[len++] = '/';
        memset(p4095 + len, 'a' + i, 200);
        len += 200;
    }
    p4095[len++] = '/';
    memset(p4095 + len, 'z', 72);
    len += 72;
    p4095[len] = '\0';
    ok(len == PATH_MAX - 1, "a path of %zu bytes", len);
    fd = files_open_write(root_fd, p4095, 0644, 0, 0, FILES_MAKE_PARENTS | FILES_EXCLUSIVE, &err);
    ok(fd >= 0 && write(fd, "deep", 4) == 4, "write at a path of PATH_MAX - 1 bytes (%s)",
       fd < 0 ? err.msg : "ok");
    if (fd >= 0)
        close(fd);
    fd = files_open_read(root_fd, p4095, &err);
    ok(fd_reads(fd, "deep"), "read it back");
    if (fd >= 0)
        close(fd);
    ok(files_stat(root_fd, p4095, true, e, &err) == 0 && strcmp(e->path, p4095) == 0,
       "stat it: the whole path comes back");
    n = 0;
    ok(files_list(root_fd, "/L", 100, count_cb, &n, &err) == 0 && n == 21,
       "list it whole: 21 entries, the deepest path PATH_MAX - 1 bytes long (%d)", n);
    p4095[len] = 'z';
    p4095[len + 1] = '\0';
    fd = files_open_write(root_fd, p4095, 0644, 0, 0, FILES_MAKE_PARENTS, &err);
    ok(fd == -1 && err.errnum == ENAMETOOLONG, "one byte more: ENAMETOOLONG");
    ok(files_remove(root_fd, "/L", &err) == 0, "remove the long tree");

    /* ".." does not shorten the check: the limit is on what comes in. */
    static char dots[3 * PATH_MAX];
    len = 0;
    while (len + 5 < sizeof dots - 1) {
        memcpy(dots + len, "/a/..", 5);
        len += 5;
    }
    dots[len] = '\0';
    ok(files_stat(root_fd, dots, false, e, &err) == -1 && err.errnum == ENAMETOOLONG,
       "a very long path of \"/a/..\" is ENAMETOOLONG, not walked");

    /* Many components: 400 nested directories. */
    static char many[PATH_MAX];
    len = (size_t)snprintf(many, sizeof many, "/many");
    for (int i = 0; i < 400; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, "/d");
    ok(files_mkdir(root_fd, many, 0755, 0, 0, &created, &err) == 0 && created,
       "mkdir -p of 400 nested directories");
    n = 0;
    ok(files_list(root_fd, "/many", 1000, count_cb, &n, &err) == 0 && n == 400,
       "list them all (%d)", n);
    struct files_watch *w = files_watch_open(root_fd, "/many", true, &err);
    ok(w != NULL, "watch them all (%s)", w ? "ok" : err.msg);
    files_watch_close(w);
    ok(files_remove(root_fd, "/many", &err) == 0 && access(R("/many"), F_OK) != 0,
       "remove them all");

    /* A tree deeper than PATH_MAX, made from inside (relative mkdirs): refused, not truncated. */
    int dir = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    mkdirat(dir, "deep", 0755);
    int cur = openat(dir, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 25; i++) {
        char comp[201];
        memset(comp, 'a' + i, 200);
        comp[200] = '\0';
        mkdirat(cur, comp, 0755);
        int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = next;
    }
    int leaf = openat(cur, "bottom", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    close(leaf);
    close(cur);
    n = 0;
    ok(files_list(root_fd, "/deep", 1000, count_cb, &n, &err) == -1 && err.errnum == ENAMETOOLONG,
       "list a tree deeper than PATH_MAX: ENAMETOOLONG (%s)", err.msg);
    ok(files_remove(root_fd, "/deep", &err) == -1 && err.errnum == ENAMETOOLONG,
       "remove it: ENAMETOOLONG");
    w = files_watch_open(root_fd, "/deep", true, &err);
    ok(w == NULL && err.errnum == ENAMETOOLONG, "watch it recursively: ENAMETOOLONG");
    files_watch_close(w);
    rm_at(dir, "deep");
    close(dir);
    free(e);
    ok(count_fds() == fds_at_start, "long paths: no fd left open");
}

/* ---- races: a second process swaps names in a tight loop ---- */

static pid_t start_swapper(const char *a, const char *b)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
    }
    return pid;
}

static void stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* A directory on the path ("/race/d") swapped with a symlink to the canary's directory. */
static void race_directory(const char *target, const char *what, int iterations)
{
    clean_root();
    build_decoys();
    mkdirs(R("/race/d"));
    put(R("/race/d/f"), INSIDE_TEXT);
    put(R("/race/d/t"), INSIDE_TEXT);
    put(R("/race/d/m1"), INSIDE_TEXT);
    symlink(target, R("/race/other"));
    retake();
    struct stat real_f, decoy_f;
    stat(R("/race/d/f"), &real_f);
    stat(R("%s", canary_dir_file), &decoy_f);
    err_t err;
    struct files_entry *e = malloc(sizeof *e);
    int inside = 0, decoy = 0, bad = 0;
    alarm(120);
    pid_t swapper = start_swapper(R("/race/d"), R("/race/other"));
    for (int i = 0; i < iterations; i++) {
        int fd;
        bool created;
        struct stat st;
        switch (i % 11) {
        case 0:
            fd = files_open_read(root_fd, "/race/d/f", &err);
            if (fd >= 0 && fstat(fd, &st) == 0) {
                inside += st.st_ino == real_f.st_ino;
                decoy += st.st_ino == decoy_f.st_ino;
                bad += st.st_ino == taken.st[3].st_ino;
            }
            if (fd >= 0)
                close(fd);
            break;
        case 1:
            for (int follow = 0; follow < 2; follow++)
                if (files_stat(root_fd, "/race/d/f", follow, e, &err) == 0 && is_canary_entry(e))
                    bad++;
            break;
        case 2:
            fd = files_open_write(root_fd, "/race/d/f", 0644, 0, 0, FILES_APPEND, &err);
            if (fd >= 0 && fstat(fd, &st) == 0)
                bad += st.st_ino == taken.st[3].st_ino;
            if (fd >= 0)
                close(fd);
            break;
        case 3:
            fd = files_open_write(root_fd, "/race/d/n", 0644, 0, 0, FILES_EXCLUSIVE, &err);
            if (fd >= 0)
                close(fd);
            files_remove(root_fd, "/race/d/n", &err);
            break;
        case 4:
            files_mkdir(root_fd, "/race/d/sub/a", 0755, 0, 0, &created, &err);
            files_remove(root_fd, "/race/d/sub", &err);
            break;
        case 5:
            if (files_move(root_fd, "/race/d/m1", "/race/d/m2", 0, 0, 0, &err) < 0)
                files_move(root_fd, "/race/d/m2", "/race/d/m1", 0, 0, 0, &err);
            break;
        case 6:
            files_list(root_fd, "/race/d", 3, list_check, &bad, &err);
            break;
        case 7:
            fd = files_open_write(root_fd, "/race/d/t", 0644, 0, 0, FILES_TRUNCATE, &err);
            if (fd >= 0 && fstat(fd, &st) == 0)
                bad += st.st_ino == taken.st[3].st_ino;
            if (fd >= 0)
                close(fd);
            break;
        case 8: {
            struct files_watch *w = files_watch_open(root_fd, "/race/d", i % 2, &err);
            files_watch_close(w);
            break;
        }
        case 9:
            fd = files_open_write(root_fd, "/race/d/r/x", 0644, 0, 0, FILES_MAKE_PARENTS, &err);
            if (fd >= 0)
                close(fd);
            files_remove(root_fd, "/race/d/r", &err);
            break;
        case 10:
            files_remove(root_fd, "/race/d/f", &err);
            fd = files_open_write(root_fd, "/race/d/f", 0644, 0, 0, FILES_EXCLUSIVE, &err);
            if (fd >= 0) {
                fstat(fd, &st);
                /* Keep telling the real one from the decoy by inode. */
                if (st.st_ino != decoy_f.st_ino)
                    real_f = st;
                close(fd);
            }
            if (stat(R("%s", canary_dir_file), &st) == 0)
                decoy_f = st;
            break;
        }
    }
    stop(swapper);
    alarm(0);
    ok(bad == 0, "race (%s): %d operations while /race/d flips: never the canary", what,
       iterations);
    ok(canary_intact(), "race (%s): canary untouched", what);
    ok(inside > 0 && decoy > 0,
       "race (%s): the flips really interleaved (reads: %d the real file, %d through the link)",
       what, inside, decoy);
    free(e);
}

/* The last component swapped: a regular file with a symlink to the canary, or with a FIFO. */
static void race_final(void)
{
    clean_root();
    build_decoys();
    mkdirs(R("/race"));
    put(R("/race/x"), INSIDE_TEXT);
    symlink(canary, R("/race/y"));
    retake();
    err_t err;
    alarm(120);
    int bad = 0, refused = 0, opened = 0;
    pid_t swapper = start_swapper(R("/race/x"), R("/race/y"));
    for (int i = 0; i < 3000; i++) {
        struct stat st;
        int fd = files_open_write(root_fd, "/race/x", 0644, 0, 0, i % 2 ? FILES_TRUNCATE : 0, &err);
        if (fd >= 0) {
            opened++;
            if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino == taken.st[1].st_ino)
                bad++;
            close(fd);
        } else if (err.errnum == ELOOP) {
            refused++;
        }
        fd = files_open_read(root_fd, "/race/x", &err);
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == taken.st[1].st_ino)
            bad++;
        if (fd >= 0)
            close(fd);
    }
    stop(swapper);
    ok(bad == 0 && canary_intact(),
       "race: final name flips between a file and a symlink to the canary: never written through "
       "(%d opened, %d refused as a symlink)",
       opened, refused);
    ok(opened > 0 && refused > 0, "race: both states were met");

    /* The swapper stopped anywhere: start again from a known state. */
    unlink(R("/race/x"));
    unlink(R("/race/y"));
    put(R("/race/x"), INSIDE_TEXT);
    mkfifo(R("/race/y"), 0644);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    int fifo_wd = inotify_add_watch(in, R("/race/y"), IN_OPEN);
    int file_wd = inotify_add_watch(in, R("/race/x"), IN_OPEN);
    bad = refused = opened = 0;
    int other_errors = 0;
    swapper = start_swapper(R("/race/x"), R("/race/y"));
    double t0 = now_ms();
    for (int i = 0; i < 3000; i++) {
        struct stat st;
        int fd = i % 2 ? files_open_read(root_fd, "/race/x", &err)
                       : files_open_write(root_fd, "/race/x", 0644, 0, 0, FILES_TRUNCATE, &err);
        if (fd >= 0) {
            opened++;
            if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
                bad++;
            close(fd);
        } else if (err.errnum == EINVAL) {
            refused++;
        } else if (other_errors++ < 3) {
            printf("#   %s\n", err.msg);
        }
    }
    stop(swapper);
    /* inotify watches inodes: opens of the regular file show up (under either name), the
     * FIFO's never may. */
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t got;
    int fifo_opens = 0, file_opens = 0;
    while ((got = read(in, buf, sizeof buf)) > 0) {
        for (ssize_t at = 0; at < got;) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf + at);
            at += (ssize_t)(sizeof *ev + ev->len);
            fifo_opens += ev->wd == fifo_wd;
            file_opens += ev->wd == file_wd;
        }
    }
    ok(fifo_opens == 0 && file_opens > 0,
       "race: the FIFO was never opened (%d opens of the file, %d of the FIFO)", file_opens,
       fifo_opens);
    ok(bad == 0 && now_ms() - t0 < 60000,
       "race: final name flips between a file and a FIFO: every fd a regular file, nothing "
       "blocked (%d opened, %d refused)",
       opened, refused);
    ok(opened > 0 && refused > 0, "race: both states were met");
    close(in);
    alarm(0);
}

/* A subdirectory of a tree being removed swapped with a symlink to the canary's directory. */
static void race_remove(void)
{
    clean_root();
    build_decoys();
    retake();
    mkdirs(R("/rt"));
    symlink(canary_dir, R("/rt/link"));
    err_t err;
    alarm(120);
    int done = 0, failed = 0;
    pid_t swapper = start_swapper(R("/rt/top/a"), R("/rt/link"));
    for (int round = 0; round < 300; round++) {
        /* The test's own plain calls follow symlinks: stop the swapper and put the link back
         * where it belongs before building the next tree with them. */
        kill(swapper, SIGSTOP);
        waitpid(swapper, NULL, WUNTRACED);
        struct stat st;
        if (lstat(R("/rt/top/a"), &st) == 0 && S_ISLNK(st.st_mode))
            unlink(R("/rt/top/a"));
        if (lstat(R("/rt/link"), &st) == 0 && !S_ISLNK(st.st_mode))
            rm_host(R("/rt/link"));
        if (lstat(R("/rt/link"), &st) != 0)
            symlink(canary_dir, R("/rt/link"));
        mkdirs(R("/rt/top/a/b/c"));
        put(R("/rt/top/a/f"), "f");
        put(R("/rt/top/a/b/f"), "f");
        put(R("/rt/top/a/b/c/f"), "f");
        kill(swapper, SIGCONT);
        if (files_remove(root_fd, "/rt/top", &err) == 0)
            done++;
        else
            failed++;
    }
    stop(swapper);
    alarm(0);
    ok(canary_intact(),
       "race: remove trees while a subdirectory flips with a link to the canary's directory: "
       "canary untouched (%d removed, %d failed)",
       done, failed);

    /* A tree refilled while it is removed: success or EAGAIN, never a hang. */
    mkdirs(R("/fill"));
    pid_t filler = fork();
    if (filler == 0) {
        for (unsigned long i = 0;; i++) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/fill/%lu", root, i % 64);
            mkdir(p, 0755);
            snprintf(p, sizeof p, "%s/fill/%lu/%lu", root, i % 64, i);
            close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        }
    }
    usleep(50000);
    alarm(120);
    double t0 = now_ms();
    int rc = files_remove(root_fd, "/fill", &err);
    double took = now_ms() - t0;
    stop(filler);
    alarm(0);
    ok(rc == 0 || err.errnum == EAGAIN || err.errnum == ENOTEMPTY,
       "remove a tree while another process refills it: done or EAGAIN in %.0f ms (%s)", took,
       rc == 0 ? "removed" : err.msg);
    ok(canary_intact() && count_fds() == fds_at_start, "races: canary untouched, no fd left open");
}

/* ---- a large file streamed through the fds ---- */

static uint64_t hash_words(uint64_t h, const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001b3ull;
    return h;
}

static void test_large(void)
{
    clean_root();
    err_t err;
    const size_t chunk = 1 << 20, total = (size_t)256 << 20;
    uint64_t *buf = malloc(chunk);
    uint64_t x = 0x9e3779b97f4a7c15ull, h_in = 0xcbf29ce484222325ull, h_out = h_in;
    int fd = files_open_write(root_fd, "/big/file", 0644, 0, 0,
                              FILES_MAKE_PARENTS | FILES_EXCLUSIVE, &err);
    ok(fd >= 0, "open a new file to stream 256 MiB into");
    size_t written = 0;
    double t0 = now_ms();
    while (fd >= 0 && written < total) {
        for (size_t i = 0; i < chunk / 8; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = x;
        }
        h_in = hash_words(h_in, buf, chunk / 8);
        size_t off = 0;
        while (off < chunk) {
            ssize_t n = write(fd, (char *)buf + off, chunk - off);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        if (off != chunk)
            break;
        written += chunk;
    }
    if (fd >= 0)
        close(fd);
    ok(written == total, "wrote 256 MiB (%.0f ms)", now_ms() - t0);
    struct files_entry *e = malloc(sizeof *e);
    ok(files_stat(root_fd, "/big/file", false, e, &err) == 0 && e->size == total, "stat: 256 MiB");
    fd = files_open_read(root_fd, "/big/file", &err);
    size_t got = 0, fill = 0;
    t0 = now_ms();
    while (fd >= 0) {
        ssize_t n = read(fd, (char *)buf + fill, chunk - fill);
        if (n <= 0)
            break;
        fill += (size_t)n;
        got += (size_t)n;
        if (fill == chunk) {
            h_out = hash_words(h_out, buf, chunk / 8);
            fill = 0;
        }
    }
    if (fd >= 0)
        close(fd);
    ok(got == total && fill == 0 && h_out == h_in,
       "read 256 MiB back, checksum equal (%.0f ms, %016llx)", now_ms() - t0,
       (unsigned long long)h_out);
    ok(files_remove(root_fd, "/big", &err) == 0 && access(R("/big"), F_OK) != 0,
       "remove the large file");
    free(e);
    free(buf);
}

/* ---- watches ---- */

struct events {
    size_t n, cap;
    int *kinds;
    char **paths;
    char **names;
    int overflows;
    int outside_base; /* paths that do not start with the base */
    const char *base;
};

static int collect(const struct files_watch_event *ev, void *arg, err_t *err)
{
    struct events *l = arg;
    if (ev->kind == FILES_WATCH_OVERFLOW)
        l->overflows++;
    size_t bl = strlen(l->base);
    if (strncmp(ev->path, l->base, bl) != 0 || (ev->path[bl] != '/' && ev->path[bl] != '\0'))
        l->outside_base++;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->kinds = realloc(l->kinds, l->cap * sizeof *l->kinds);
        l->paths = realloc(l->paths, l->cap * sizeof *l->paths);
        l->names = realloc(l->names, l->cap * sizeof *l->names);
    }
    l->kinds[l->n] = ev->kind;
    l->paths[l->n] = strdup(ev->path);
    l->names[l->n] = strdup(ev->name);
    l->n++;
    return 0;
}

static void events_free(struct events *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->paths[i]);
        free(l->names[i]);
    }
    free(l->kinds);
    free(l->paths);
    free(l->names);
    memset(l, 0, sizeof *l);
}

/* Reads events until none came for quiet_ms. */
static int pump(struct files_watch *w, struct events *l, int quiet_ms)
{
    err_t err;
    for (;;) {
        struct pollfd p = {files_watch_fd(w), POLLIN, 0};
        if (poll(&p, 1, quiet_ms) <= 0)
            return 0;
        if (files_watch_read(w, collect, l, &err) < 0) {
            printf("#   files_watch_read: %s\n", err.msg);
            return -1;
        }
    }
}

static bool has(const struct events *l, int kind, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->kinds[i] == kind && strcmp(l->paths[i], path) == 0)
            return true;
    return false;
}

static void test_watch_basic(void)
{
    clean_root();
    err_t err;
    mkdirs(R("/wb"));
    struct events l = {.base = "/wb"};
    struct files_watch *w = files_watch_open(root_fd, "/wb", false, &err);
    ok(w != NULL, "watch a directory");
    if (!w)
        return;
    int fd = files_watch_fd(w);
    ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) && (fcntl(fd, F_GETFL) & O_NONBLOCK),
       "its fd is close-on-exec and non-blocking");
    put(R("/wb/a"), "1");
    chmod(R("/wb/a"), 0600);
    rename(R("/wb/a"), R("/wb/b"));
    mkdir(R("/wb/sub"), 0755);
    put(R("/wb/sub/inner"), "x");
    unlink(R("/wb/b"));
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_CREATE, "/wb/a"), "CREATE");
    ok(has(&l, FILES_WATCH_WRITE, "/wb/a"), "WRITE");
    ok(has(&l, FILES_WATCH_CHMOD, "/wb/a"), "CHMOD");
    ok(has(&l, FILES_WATCH_RENAME, "/wb/a") && has(&l, FILES_WATCH_CREATE, "/wb/b"),
       "RENAME of the old name, CREATE of the new");
    ok(has(&l, FILES_WATCH_REMOVE, "/wb/b"), "REMOVE");
    ok(has(&l, FILES_WATCH_CREATE, "/wb/sub") && !has(&l, FILES_WATCH_CREATE, "/wb/sub/inner"),
       "not recursive: a subdirectory is seen, not what is inside it");
    bool names_ok = true;
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.paths[i] + 4, l.names[i]) != 0)
            names_ok = false;
    ok(names_ok, "each event's name is its path relative to the watched directory");
    events_free(&l);
    l.base = "/wb";
    rm_host(R("/wb"));
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_REMOVE, "/wb"), "the watched directory removed: REMOVE of itself");
    files_watch_close(w);
    events_free(&l);

    /* Recursive: moves inside, out of, and into the tree. */
    clean_root();
    mkdirs(R("/wr/pre/x"));
    mkdirs(R("/elsewhere/tree/y"));
    put(R("/elsewhere/tree/y/z"), "z");
    l.base = "/wr";
    w = files_watch_open(root_fd, "/wr", true, &err);
    ok(w != NULL, "watch a tree recursively (%s)", w ? "ok" : err.msg);
    if (!w)
        return;
    put(R("/wr/pre/x/f"), "f");
    mkdirs(R("/wr/n1/n2/n3"));
    put(R("/wr/n1/n2/n3/g"), "g");
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_CREATE, "/wr/pre/x/f"), "an existing subdirectory is watched");
    ok(has(&l, FILES_WATCH_CREATE, "/wr/n1") && has(&l, FILES_WATCH_CREATE, "/wr/n1/n2") &&
           has(&l, FILES_WATCH_CREATE, "/wr/n1/n2/n3") &&
           has(&l, FILES_WATCH_CREATE, "/wr/n1/n2/n3/g"),
       "a new tree (mkdir -p and a file, faster than the watch): all of it reported");
    rename(R("/wr/n1"), R("/wr/moved"));
    pump(w, &l, 100);
    put(R("/wr/moved/n2/n3/h"), "h");
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_RENAME, "/wr/n1") && has(&l, FILES_WATCH_CREATE, "/wr/moved"),
       "a directory moved inside the tree: RENAME, CREATE");
    ok(has(&l, FILES_WATCH_CREATE, "/wr/moved/n2/n3/h"),
       "and what is made in it afterwards has the new path");
    rename(R("/wr/moved"), R("/gone"));
    pump(w, &l, 100);
    put(R("/gone/n2/n3/i"), "i");
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_RENAME, "/wr/moved"), "a directory moved out: RENAME");
    bool silent = true;
    for (size_t i = 0; i < l.n; i++)
        if (strstr(l.paths[i], "/i"))
            silent = false;
    ok(silent, "and what is made in it afterwards is not reported");
    rename(R("/elsewhere/tree"), R("/wr/in"));
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_CREATE, "/wr/in") && has(&l, FILES_WATCH_CREATE, "/wr/in/y") &&
           has(&l, FILES_WATCH_CREATE, "/wr/in/y/z"),
       "a tree moved in: it and its contents are reported as CREATE");
    put(R("/wr/in/y/later"), "l");
    pump(w, &l, 100);
    ok(has(&l, FILES_WATCH_CREATE, "/wr/in/y/later"), "and it is watched");
    ok(l.outside_base == 0, "no event outside the watched tree");
    files_watch_close(w);
    events_free(&l);
    ok(count_fds() == fds_at_start, "watch: no fd left open");
}

/* Nested directories made and removed fast by another process, while the watch runs. */
static void test_watch_fast(void)
{
    clean_root();
    err_t err;
    mkdirs(R("/wf"));
    struct events l = {.base = "/wf"};
    struct files_watch *w = files_watch_open(root_fd, "/wf", true, &err);
    ok(w != NULL, "watch a tree that will change fast");
    if (!w)
        return;
    enum { TREES = 300 };
    pid_t maker = fork();
    if (maker == 0) {
        for (int i = 0; i < TREES; i++) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/wf/t%d/a/b", root, i);
            mkdirs(p);
            snprintf(p, sizeof p, "%s/wf/t%d/a/b/f", root, i);
            close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
            snprintf(p, sizeof p, "%s/wf/t%d/a/g", root, i);
            close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
            if (i % 3 == 2) {
                snprintf(p, sizeof p, "%s/wf/t%d", root, i - 1);
                rm_host(p);
            }
        }
        _exit(0);
    }
    int status;
    alarm(120);
    while (waitpid(maker, &status, WNOHANG) == 0) {
        struct pollfd p = {files_watch_fd(w), POLLIN, 0};
        if (poll(&p, 1, 10) > 0 && files_watch_read(w, collect, &l, &err) < 0) {
            printf("#   %s\n", err.msg);
            break;
        }
    }
    int rc = pump(w, &l, 300);
    alarm(0);
    int missing = 0;
    for (int i = 0; i < TREES; i++) {
        if (i % 3 == 1)
            continue; /* removed right after it was made */
        if (!has(&l, FILES_WATCH_CREATE, S("/wf/t%d/a/b/f", i)) ||
            !has(&l, FILES_WATCH_CREATE, S("/wf/t%d/a/g", i)))
            missing++;
    }
    ok(rc == 0 && (missing == 0 || l.overflows > 0),
       "every file made in a new subdirectory is reported (%d missing, %d overflows, %zu events)",
       missing, l.overflows, l.n);
    ok(l.outside_base == 0, "no event outside the watched tree");
    files_watch_close(w);
    events_free(&l);

    /* Overflow: more events than the kernel queues (fs.inotify.max_queued_events), unread. */
    clean_root();
    mkdirs(R("/wo"));
    int max_queued = 16384;
    FILE *f = fopen("/proc/sys/fs/inotify/max_queued_events", "re");
    if (f) {
        if (fscanf(f, "%d", &max_queued) != 1)
            max_queued = 16384;
        fclose(f);
    }
    l.base = "/wo";
    w = files_watch_open(root_fd, "/wo", true, &err);
    int dir = open(R("/wo"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < max_queued + 500; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d", i);
        close(openat(dir, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    }
    rc = w ? pump(w, &l, 100) : -1;
    ok(rc == 0 && l.overflows > 0, "queue overflow (%d events queued at most): OVERFLOW reported",
       max_queued);
    size_t before = l.n;
    mkdirat(dir, "after", 0755);
    close(openat(dir, "after/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (w)
        pump(w, &l, 100);
    ok(l.n > before && has(&l, FILES_WATCH_CREATE, "/wo/after/file"),
       "after the overflow, the watch goes on, new directories included");
    close(dir);
    files_watch_close(w);
    events_free(&l);
    files_remove(root_fd, "/wo", &err);

    /* The directory limit. */
    clean_root();
    mkdirs(R("/wl"));
    dir = open(R("/wl"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < FILES_WATCH_MAX_DIRS - 1; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d", i);
        mkdirat(dir, name, 0755);
    }
    l.base = "/wl";
    w = files_watch_open(root_fd, "/wl", true, &err);
    ok(w != NULL, "watch %d directories: at the limit, fine", FILES_WATCH_MAX_DIRS);
    mkdirat(dir, "one-more", 0755);
    rc = w ? pump(w, &l, 100) : 0;
    ok(w && rc == -1, "one more directory made: files_watch_read fails");
    ok(w && files_watch_read(w, collect, &l, &err) == -1 && err.errnum == ENOSPC &&
           strstr(err.msg, "8192"),
       "and keeps failing, clearly (%s)", err.msg);
    files_watch_close(w);
    events_free(&l);
    w = files_watch_open(root_fd, "/wl", true, &err);
    ok(w == NULL && err.errnum == ENOSPC, "a tree of %d directories: refused, ENOSPC",
       FILES_WATCH_MAX_DIRS + 1);
    w = files_watch_open(root_fd, "/wl", false, &err);
    ok(w != NULL, "but watching it non-recursively is fine");
    files_watch_close(w);
    close(dir);
    ok(files_remove(root_fd, "/wl", &err) == 0, "remove the %d directories",
       FILES_WATCH_MAX_DIRS + 1);
    ok(files_watch_open(root_fd, "/nope", true, &err) == NULL && err.errnum == ENOENT,
       "watch a missing directory: ENOENT");
    put(R("/file"), "f");
    ok(files_watch_open(root_fd, "/file", true, &err) == NULL && err.errnum == ENOTDIR,
       "watch a file: ENOTDIR");
    ok(count_fds() == fds_at_start, "watch: no fd left open");
}

static void test_list_cap(void)
{
    clean_root();
    err_t err;
    mkdirs(R("/cap"));
    int dir = open(R("/cap"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < FILES_LIST_MAX_ENTRIES; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d", i);
        mknodat(dir, name, S_IFREG | 0644, 0);
    }
    int n = 0;
    ok(files_list(root_fd, "/cap", 1, count_cb, &n, &err) == 0 && n == FILES_LIST_MAX_ENTRIES,
       "list %d entries: all of them", FILES_LIST_MAX_ENTRIES);
    mknodat(dir, "one-more", S_IFREG | 0644, 0);
    n = 0;
    ok(files_list(root_fd, "/cap", 1, count_cb, &n, &err) == -1 && err.errnum == E2BIG && n == 0,
       "one more: E2BIG, not a truncated list (%s)", err.msg);
    mkdirat(dir, "sub", 0755);
    close(dir);
    ok(files_remove(root_fd, "/cap", &err) == 0, "remove them all");
    ok(count_fds() == fds_at_start, "list cap: no fd left open");
}

/* A mount inside the tree: listed through, never removed through. */
static void test_mounts(void)
{
    if (!have_mounts) {
        ok(1, "mounts # SKIP no private mount namespace");
        return;
    }
    clean_root();
    err_t err;
    mkdirs(R("/rm/mnt"));
    put(R("/rm/before"), "b");
    ok(mount("tmpfs", R("/rm/mnt"), "tmpfs", 0, "size=1m") == 0, "a tmpfs mounted in the tree");
    put(R("/rm/mnt/kept"), "k");
    int n = 0;
    ok(files_list(root_fd, "/rm", 2, count_cb, &n, &err) == 0 && n == 3,
       "list goes into the mount (%d)", n);
    ok(files_remove(root_fd, "/rm", &err) == -1 && err.errnum == EBUSY &&
           strstr(err.msg, "/rm/mnt"),
       "remove stops at the mount point: EBUSY, naming it (%s)", err.msg);
    ok(access(R("/rm/mnt/kept"), F_OK) == 0, "and nothing in the mount was removed");
    umount2(R("/rm/mnt"), MNT_DETACH);
    ok(files_remove(root_fd, "/rm", &err) == 0, "once unmounted, removed");
}

/* Each part under alarm(): a call that blocked fails the test instead of hanging it. */
#define PART(call)                                                                                 \
    do {                                                                                           \
        alarm(300);                                                                                \
        call;                                                                                      \
    } while (0)

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (geteuid() != 0) {
        printf("1..0 # SKIP the file tests need root (mknod, chown, mounts)\n");
        return 0;
    }
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    /* A private mount namespace: the procfs and tmpfs mounted in the root stay ours. */
    have_mounts =
        unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    snprintf(outside, sizeof outside, "/tmp/hutch-files-out.XXXXXX");
    snprintf(root, sizeof root, "/tmp/hutch-files-root.XXXXXX");
    if (!mkdtemp(outside) || !mkdtemp(root)) {
        printf("1..0 # SKIP mkdtemp: %s\n", strerror(errno));
        return 0;
    }
    /* The cwd is the outside: a relative path that escaped any dirfd would land here. */
    if (chdir(outside) != 0)
        printf("# chdir %s: %s\n", outside, strerror(errno));
    mkdir(S("%s/proc", root), 0755);
    have_proc = have_mounts && mount("proc", S("%s/proc", root), "proc", 0, NULL) == 0;
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    setup_canary();
    init_hostile();
    fds_at_start = count_fds();

    PART(test_paths());
    PART(test_semantics());
    PART(test_controls());
    PART(test_hostile());
    PART(test_special());
    PART(test_long());
    PART(race_directory(canary_dir, "absolute symlink", 4000));
    PART(race_directory(climb(canary_dir), "relative symlink", 4000));
    PART(race_final());
    PART(race_remove());
    PART(test_large());
    PART(test_watch_basic());
    PART(test_watch_fast());
    PART(test_list_cap());
    PART(test_mounts());
    alarm(0);
    ok(canary_intact(), "at the end: the canary untouched");
    ok(count_fds() == fds_at_start, "at the end: no fd left open (%d)", count_fds());

    close(root_fd);
    close(canary_fd);
    close(canary_watch);
    clean_root();
    if (have_proc)
        umount2(S("%s/proc", root), MNT_DETACH);
    rm_host(root);
    if (chdir("/") != 0)
        printf("# chdir /: %s\n", strerror(errno));
    rm_host(outside);
    return done_testing();
}
