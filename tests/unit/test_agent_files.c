/* A sandbox's files served through its agent (init's files workers) and driven as the daemon
 * will drive them (src/jail/files.h), against contents that the sandbox's own commands made
 * hostile: symlinks to / and to host paths, a symlink swapped in a loop while requests go on,
 * "..", paths at and past PATH_MAX, FIFOs (one with a writer waiting) and devices where a file is
 * expected; a 1 GiB file streamed in and out through the passed fds (length and cksum checked
 * inside and out); watches on trees that change fast; the user's rights kept (no write into a
 * root-owned 0755 directory, no read of root's 0600 file), owners and modes set as asked; the
 * workers' privileges and filter as seen from the host; a fake init that hands the host a file
 * of the host's. A canary tree on the host, outside the sandbox, is watched with inotify
 * throughout: nothing may open, read or write it. Runs as root; every wait is bounded. */
#include <dirent.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>

#include "agent_test.h"
#include "util/fileio.h"

#define GIB (1ull << 30)

static char canary_dir[PATH_MAX], canary_file[PATH_MAX];
static int canary_watch = -1;
static struct stat canary_before;
static bool quiet; /* errors expected by the hundred: not each one printed */

/* ---------- the watch events that arrive while waiting for other things ---------- */

struct seen_events {
    uint32_t watch_id;
    size_t count, per_kind[PROTO_WATCH_KIND_END];
    size_t bad_paths; /* not the watched directory's, nor below it */
    bool ended;
    const char *prefix;
    char wanted[8][PATH_MAX]; /* "KIND PATH" strings to look for */
    bool found[8];
    size_t n_wanted;
    size_t with_file;       /* events that carried a file (WATCH_ENTRIES) */
    size_t wrong_file;      /* ... whose file's path is not the event's, or of a kind without */
    bool chmod_file_ok;     /* a CHMOD of PATH_CHMODDED came with its file, mode 0640, size 6 */
    const char *chmod_path; /* the file whose CHMOD is looked for */
};
static struct seen_events seen;

static void on_watch(const struct jail_agent_msg *m)
{
    if (m->files.watch_id != seen.watch_id)
        return;
    if (m->type == PROTO_WATCH_ENDED) {
        seen.ended = true;
        printf("# watch ended: %s\n", m->message);
        return;
    }
    for (size_t i = 0; i < m->files.n_events; i++) {
        const struct proto_watch_event *e = &m->files.events[i];
        seen.count++;
        seen.per_kind[e->kind]++;
        size_t n = strlen(seen.prefix);
        if (strncmp(e->path, seen.prefix, n) != 0 || (e->path[n] != '\0' && e->path[n] != '/'))
            seen.bad_paths++;
        char what[PATH_MAX + 16];
        snprintf(what, sizeof what, "%u %s", e->kind, e->path);
        if (e->has_file) {
            seen.with_file++;
            if (strcmp(e->file.path, e->path) != 0 || e->kind == PROTO_WATCH_REMOVE ||
                e->kind == PROTO_WATCH_RENAME)
                seen.wrong_file++;
        }
        if (seen.chmod_path && e->kind == PROTO_WATCH_CHMOD &&
            strcmp(e->path, seen.chmod_path) == 0 && e->has_file &&
            e->file.type == PROTO_FILE_TYPE_FILE && e->file.mode == 0640 && e->file.size == 6 &&
            e->file.uid == JAIL_USER_UID)
            seen.chmod_file_ok = true;
        for (size_t k = 0; k < seen.n_wanted; k++)
            if (strcmp(what, seen.wanted[k]) == 0)
                seen.found[k] = true;
    }
}

/* ---------- requests ---------- */

/* Sends r and waits for its (first) answer: its type, or -errno for an ERROR. */
static int file_op(const struct proto_file_request *r)
{
    err_t err;
    uint32_t id = next_request++;
    if (jail_files_request(&j, id, r, &err) < 0) {
        printf("# request: %s\n", err.msg);
        return -err.errnum;
    }
    if (wait_reply(&j, id, 60000) < 0) {
        printf("# no answer to request %u\n", id);
        return -ETIMEDOUT;
    }
    if (msg.type == PROTO_ERROR) {
        if (!quiet)
            printf("#   -> %s\n", msg.message);
        return -msg.errnum;
    }
    return (int)msg.type;
}

static int do_stat(const char *path, bool as_root, bool follow)
{
    return file_op(&(struct proto_file_request){
        .type = PROTO_FILE_STAT, .path = path, .as_root = as_root, .follow = follow});
}

/* Opens path for reading: the fd, or -errno. */
static int open_read(const char *path, bool as_root)
{
    int rc = file_op(
        &(struct proto_file_request){.type = PROTO_FILE_READ, .path = path, .as_root = as_root});
    if (rc < 0)
        return rc;
    if (rc != PROTO_FILE_OPENED || msg.files.fd < 0 || msg.files.fd_writable)
        return -EPROTO;
    return msg.files.fd;
}

static int open_write(const char *path, bool as_root, unsigned flags, int mode, int64_t uid,
                      int64_t gid)
{
    struct proto_file_request r = {
        .type = PROTO_FILE_WRITE, .path = path, .as_root = as_root, .flags = flags};
    if (mode >= 0) {
        r.has_mode = true;
        r.mode = (uint32_t)mode;
    }
    if (uid >= 0) {
        r.has_owner = true;
        r.uid = (uint32_t)uid;
        r.gid = (uint32_t)gid;
    }
    int rc = file_op(&r);
    if (rc < 0)
        return rc;
    if (rc != PROTO_FILE_OPENED || msg.files.fd < 0 || !msg.files.fd_writable)
        return -EPROTO;
    return msg.files.fd;
}

/* Reads path whole into buf (NUL-terminated): its length, or -errno. */
static ssize_t read_file(const char *path, bool as_root, char *buf, size_t size)
{
    int fd = open_read(path, as_root);
    if (fd < 0)
        return fd;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

static int write_file(const char *path, bool as_root, const char *text)
{
    int fd = open_write(path, as_root, PROTO_FILE_TRUNCATE | PROTO_FILE_MAKE_PARENTS, -1, -1, -1);
    if (fd < 0)
        return fd;
    int rc = fd_write_all(fd, text, strlen(text)) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Lists path down to depth: how many entries (all chunks), or -errno. *paths_ok: every entry's
 * path begins with prefix; *saw: an entry named name came. */
static long list(const char *path, unsigned depth, bool as_root, const char *prefix,
                 const char *name, bool *paths_ok, bool *saw, size_t *chunks)
{
    err_t err;
    uint32_t id = next_request++;
    struct proto_file_request r = {
        .type = PROTO_FILE_LIST, .path = path, .as_root = as_root, .depth = depth};
    if (jail_files_request(&j, id, &r, &err) < 0)
        return -err.errnum;
    long count = 0;
    *paths_ok = true;
    *saw = false;
    *chunks = 0;
    for (;;) {
        if (wait_reply(&j, id, 60000) < 0)
            return -ETIMEDOUT;
        if (msg.type == PROTO_ERROR) {
            if (!quiet)
                printf("#   -> %s\n", msg.message);
            return -msg.errnum;
        }
        if (msg.type != PROTO_FILE_LIST_REPLY)
            return -EPROTO;
        (*chunks)++;
        for (size_t i = 0; i < msg.files.n_entries; i++) {
            const struct proto_file_entry *e = &msg.files.entries[i];
            if (strncmp(e->path, prefix, strlen(prefix)) != 0)
                *paths_ok = false;
            if (name && strcmp(e->name, name) == 0)
                *saw = true;
            count++;
        }
        if (!msg.more)
            return count;
    }
}

static int simple_op(enum proto_type type, const char *path, const char *to, bool as_root,
                     unsigned flags)
{
    return file_op(&(struct proto_file_request){
        .type = type, .path = path, .to = to, .as_root = as_root, .flags = flags});
}

/* ---------- commands inside ---------- */

/* Runs script with sh as root or user; its stdout in out; its exit code (or -1). */
static int sh(const char *script, bool as_root, char *out, size_t size)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct jail_command_spec spec = {.argv = argv, .envp = env, .as_root = as_root};
    struct started s;
    char why[512], scratch[4096];
    if (!out) {
        out = scratch;
        size = sizeof scratch;
    }
    if (start(&j, &spec, &s, why, sizeof why) < 0) {
        printf("# sh: %s\n", why);
        return -1;
    }
    read_all(s.out, out, size, 120000);
    char err_text[1024];
    read_all(s.err, err_text, sizeof err_text, 1000);
    if (err_text[0])
        printf("# stderr: %.300s\n", err_text);
    const struct exit_seen *e = wait_exit(&j, s.cmd_id, 120000);
    int code = e ? e->code : -1;
    if (e)
        finish(&j, &s, e, NULL);
    else
        close_started(&s);
    return code;
}

/* Starts script in the background; stopped by stop_bg. */
static int bg_start(const char *script, bool as_root, struct started *s)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct jail_command_spec spec = {.argv = argv, .envp = env, .as_root = as_root};
    char why[512];
    if (start(&j, &spec, s, why, sizeof why) < 0) {
        printf("# background: %s\n", why);
        return -1;
    }
    return 0;
}

static bool bg_running(const struct started *s)
{
    for (size_t i = 0; i < n_exits; i++)
        if (exits[i].cmd_id == s->cmd_id)
            return false;
    return true;
}

static void bg_stop(struct started *s)
{
    err_t err;
    jail_command_kill_tree(&j, s->group, &err);
    const struct exit_seen *e = wait_exit(&j, s->cmd_id, 10000);
    if (e)
        finish(&j, s, e, NULL);
    else
        close_started(s);
}

/* ---------- the canary ---------- */

static void canary_setup(void)
{
    tap_path(canary_dir, sizeof canary_dir, "%s/canary", base);
    tap_path(canary_file, sizeof canary_file, "%s/secret", canary_dir);
    mkdir(canary_dir, 0777);
    int fd = open(canary_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    (void)!write(fd, "HOST-CANARY\n", 12);
    close(fd);
    chmod(canary_file, 0666); /* even world-writable: only the sandbox boundary protects it */
    stat(canary_file, &canary_before);
    canary_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    inotify_add_watch(canary_watch, canary_dir, IN_ALL_EVENTS);
}

/* Forgets the events of the test's own use of the canary. */
static void canary_forget_own(void)
{
    char drain[4096];
    while (read(canary_watch, drain, sizeof drain) > 0)
        ;
}

/* Whether nothing touched the canary since canary_setup (or the last call). */
static bool canary_untouched(const char *when)
{
    char buf[4096];
    ssize_t n = read(canary_watch, buf, sizeof buf);
    struct stat now;
    char text[64] = "";
    int fd = -1;
    bool same = stat(canary_file, &now) == 0 && now.st_size == canary_before.st_size &&
                now.st_mtim.tv_nsec == canary_before.st_mtim.tv_nsec &&
                now.st_ctim.tv_nsec == canary_before.st_ctim.tv_nsec;
    /* Read through an fd of our own, after the inotify read: our open shows up next time, so
     * drain those events right away. */
    fd = open(canary_file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!read(fd, text, sizeof text - 1);
        close(fd);
    }
    canary_forget_own();
    DIR *d = opendir(canary_dir);
    size_t entries = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        entries++;
    if (d)
        closedir(d);
    canary_forget_own();
    bool ok_ = n < 0 && same && strcmp(text, "HOST-CANARY\n") == 0 && entries == 3;
    if (!ok_)
        printf("# canary after %s: %zd bytes of inotify events, same stat %d, text %s, %zu "
               "entries\n",
               when, n, same, text, entries);
    return ok_;
}

/* ---------- the workers, as the host sees them ---------- */

struct worker_info {
    pid_t pid;
    char uid[128], gid[128], groups[128];
    char cap_eff[32], cap_prm[32], cap_inh[32], cap_amb[32];
    int seccomp, no_new_privs;
    int fds;
};

static int status_field(const char *status, const char *name, char *out, size_t size)
{
    const char *p = strstr(status, name);
    if (!p)
        return -1;
    p += strlen(name);
    while (*p == '\t' || *p == ' ')
        p++;
    size_t n = strcspn(p, "\n");
    snprintf(out, size, "%.*s", (int)n, p);
    return 0;
}

/* The worker named comm among init's children. */
static int find_worker(const char *comm, struct worker_info *w)
{
    char path[128], text[4096];
    memset(w, 0, sizeof *w);
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)j.pid, (int)j.pid);
    if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0)
        return -1;
    for (char *p = text; *p;) {
        pid_t pid = (pid_t)strtol(p, &p, 10);
        if (pid <= 0)
            break;
        char name[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        file_read_at(AT_FDCWD, path, name, sizeof name, NULL);
        name[strcspn(name, "\n")] = '\0';
        if (strcmp(name, comm) != 0)
            continue;
        char status[4096], field[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
        if (file_read_at(AT_FDCWD, path, status, sizeof status, NULL) < 0)
            return -1;
        w->pid = pid;
        status_field(status, "Uid:", w->uid, sizeof w->uid);
        status_field(status, "Gid:", w->gid, sizeof w->gid);
        status_field(status, "Groups:", w->groups, sizeof w->groups);
        status_field(status, "CapEff:", w->cap_eff, sizeof w->cap_eff);
        status_field(status, "CapPrm:", w->cap_prm, sizeof w->cap_prm);
        status_field(status, "CapInh:", w->cap_inh, sizeof w->cap_inh);
        status_field(status, "CapAmb:", w->cap_amb, sizeof w->cap_amb);
        status_field(status, "Seccomp:", field, sizeof field);
        w->seccomp = atoi(field);
        status_field(status, "NoNewPrivs:", field, sizeof field);
        w->no_new_privs = atoi(field);
        snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (de->d_name[0] != '.')
                w->fds++;
        if (d)
            closedir(d);
        return 0;
    }
    return -1;
}

static long rss_kib(pid_t pid)
{
    char path[64], status[4096], field[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (file_read_at(AT_FDCWD, path, status, sizeof status, NULL) < 0 ||
        status_field(status, "VmRSS:", field, sizeof field) < 0)
        return -1;
    return atol(field);
}

static void check_workers(void)
{
    struct worker_info root = {0}, user = {0};
    char want[128];
    /* Their names and filters come a moment after init's loop has started. */
    for (int i = 0; i < 200; i++) {
        if (find_worker("hutch-files-0", &root) == 0 && find_worker("hutch-files-u", &user) == 0 &&
            root.seccomp == 2 && user.seccomp == 2)
            break;
        usleep(10000);
    }
    ok(root.pid > 0 && user.pid > 0, "init has two files workers (root's %d, the user's %d)",
       (int)root.pid, (int)user.pid);
    unsigned b = uids.host_base;
    snprintf(want, sizeof want, "%u\t%u\t%u\t%u", b, b, b, b);
    is_str(root.uid, want, "root's worker: uid 0 inside (host %u), all four ids", b);
    is_str(root.cap_eff, "000000000000000b",
           "root's worker: CAP_CHOWN, CAP_DAC_OVERRIDE, "
           "CAP_FOWNER effective, nothing else");
    is_str(root.cap_prm, "000000000000000b", "root's worker: the same permitted");
    snprintf(want, sizeof want, "%u\t%u\t%u\t%u", b, b, b, b + JAIL_USER_UID);
    is_str(user.uid, want, "the user's worker: fsuid %u (real, effective, saved uid 0)",
           JAIL_USER_UID);
    snprintf(want, sizeof want, "%u\t%u\t%u\t%u", b, b, b, b + JAIL_USER_GID);
    is_str(user.gid, want, "the user's worker: fsgid %u", JAIL_USER_GID);
    is_str(user.cap_eff, "0000000000000000", "the user's worker: no capability at all");
    is_str(user.cap_prm, "0000000000000000", "the user's worker: none permitted");
    ok(strcmp(root.cap_inh, "0000000000000000") == 0 &&
           strcmp(user.cap_inh, "0000000000000000") == 0 &&
           strcmp(root.cap_amb, "0000000000000000") == 0 &&
           strcmp(user.cap_amb, "0000000000000000") == 0,
       "neither has an inheritable or ambient capability");
    ok(root.groups[0] == '\0' && user.groups[0] == '\0', "neither has a supplementary group");
    ok(root.seccomp == 2 && user.seccomp == 2 && root.no_new_privs == 1 && user.no_new_privs == 1,
       "both run a seccomp filter with no_new_privs");
    ok(root.fds == 2 && user.fds == 2, "each holds two fds, its socket and the root (%d, %d)",
       root.fds, user.fds);
}

/* A worker is started by its user's first request, and again after it ended. */
/* The worker named comm among init's children, other than pid not: a worker that has answered
 * may still be its first fork's child for a moment, until that fork has exited. */
static int wait_worker(const char *comm, struct worker_info *w, pid_t not )
{
    for (int i = 0; i < 200; i++) {
        if (find_worker(comm, w) == 0 && w->pid != not )
            return 0;
        usleep(10000);
    }
    return -1;
}

static void lazy_workers(void)
{
    struct worker_info root, user;
    usleep(100000);
    char path[128], children[4096] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)j.pid, (int)j.pid);
    ok(file_read_at(AT_FDCWD, path, children, sizeof children, NULL) >= 0 && atoi(children) > 0,
       "init's children can be listed (its spawner: %s)", children);
    ok(find_worker("hutch-files-0", &root) < 0 && find_worker("hutch-files-u", &user) < 0,
       "before any file request, init has no files worker");
    ok(do_stat("/home/user", false, false) == PROTO_FILE_INFO, "the user's first request");
    ok(wait_worker("hutch-files-u", &user, 0) == 0 && find_worker("hutch-files-0", &root) < 0,
       "it started the user's worker only (pid %d)", (int)user.pid);
    ok(do_stat("/root", true, false) == PROTO_FILE_INFO, "root's first request");
    ok(wait_worker("hutch-files-0", &root, 0) == 0, "it started root's worker (pid %d)",
       (int)root.pid);
    /* Killed (as the sandbox's root could, or the OOM killer): the next request starts another,
     * this time while a command runs, so that the spawner holds its cgroup fds (sudo_groups.c). */
    struct started bg;
    bool running = bg_start("sleep 60", false, &bg) == 0;
    ok(running, "a command runs meanwhile");
    pid_t old = root.pid;
    ok(old > 0 && kill(old, SIGKILL) == 0, "root's worker killed");
    for (int i = 0; i < 200 && find_worker("hutch-files-0", &root) == 0 && root.pid == old; i++)
        usleep(10000);
    int rc = do_stat("/root", true, false);
    for (int i = 0; i < 3 && rc == -EIO; i++) /* asked before init saw the hang-up */
        rc = do_stat("/root", true, false);
    ok(rc == PROTO_FILE_INFO, "root's next request is answered (%d)", rc);
    ok(wait_worker("hutch-files-0", &root, old) == 0, "by a new worker (pid %d, was %d)",
       (int)root.pid, (int)old);
    ok(root.fds == 2, "it holds its socket and the root, none of the spawner's fds (%d)", root.fds);
    if (running)
        bg_stop(&bg);
    ok(find_worker("hutch-files-u", &user) == 0, "the user's worker went on");
}

/* ---------- parts ---------- */

static void hostile_tree(void)
{
    char script[4 * PATH_MAX];
    snprintf(script, sizeof script,
             "set -e; cd /home/user; mkdir t; cd t; echo inside > file;"
             "ln -s / to-root; ln -s %s to-host; ln -s %s to-host-file;"
             "ln -s ../../../../../../../../.. up; ln -s /dev/zero to-zero;"
             "ln -s /proc/self/environ to-environ; mkfifo fifo; mkfifo fifo-writer;"
             "echo kept > /home/user/keep",
             canary_dir, canary_file);
    is_u64(sh(script, false, NULL, 0), 0, "the user's command makes a hostile tree");
    ok(sh("set -e; echo root-only > /root/secret; chmod 600 /root/secret; mkdir /tmp/rootdir;"
          "chmod 755 /tmp/rootdir; echo data > /tmp/rootdir/data; chmod 644 /tmp/rootdir/data",
          true, NULL, 0) == 0,
       "root's command makes a 0600 file and a root-owned 0755 directory");
}

static void stat_and_read(void)
{
    char buf[4096];
    ok(do_stat("/home/user/t/file", false, false) == PROTO_FILE_INFO &&
           msg.files.file.type == PROTO_FILE_TYPE_FILE && msg.files.file.size == 7 &&
           msg.files.file.uid == JAIL_USER_UID && strcmp(msg.files.file.name, "file") == 0 &&
           strcmp(msg.files.file.path, "/home/user/t/file") == 0,
       "stat: a file, 7 bytes, the user's");
    ok(do_stat("/home/user/t/to-host", false, false) == PROTO_FILE_INFO &&
           msg.files.file.type == PROTO_FILE_TYPE_SYMLINK &&
           strcmp(msg.files.file.symlink, canary_dir) == 0,
       "stat of a symlink to a host path: the link itself, its text");
    is_u64((uint64_t)-do_stat("/home/user/t/to-host", false, true), ENOENT,
           "stat following it: ENOENT (the host path means nothing inside)");
    ok(do_stat("/home/user/t/to-root", true, true) == PROTO_FILE_INFO &&
           msg.files.file.type == PROTO_FILE_TYPE_DIR &&
           strcmp(msg.files.file.name, "to-root") == 0,
       "stat following a link to /: the sandbox's root");
    ok(read_file("/home/user/t/file", false, buf, sizeof buf) == 7 && strcmp(buf, "inside\n") == 0,
       "read through the passed fd");
    ok(read_file("/home/user/../../../home/./user//t/file", false, buf, sizeof buf) == 7,
       "'..', '.' and '//' are resolved lexically, inside");
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "/home/user/t/up%s", canary_file);
    is_u64((uint64_t)-read_file(path, true, buf, sizeof buf), ENOENT,
           "a relative link that climbs stops at the sandbox's root (as root)");
    snprintf(path, sizeof path, "/../../..%s", canary_file);
    is_u64((uint64_t)-read_file(path, true, buf, sizeof buf), ENOENT, "so does a path that climbs");
    is_u64((uint64_t)-read_file("/home/user/t/to-host-file", true, buf, sizeof buf), ENOENT,
           "a symlink to the host's file leads nowhere");
    snprintf(path, sizeof path, "/home/user/t/to-host/secret");
    is_u64((uint64_t)-read_file(path, true, buf, sizeof buf), ENOENT,
           "nor does one to the host's directory");
    ok(read_file("/home/user/t/to-root/root/secret", true, buf, sizeof buf) > 0 &&
           strcmp(buf, "root-only\n") == 0,
       "through a link to /, root reads the sandbox's /root/secret");
    is_u64((uint64_t)-read_file("/root/secret", false, buf, sizeof buf), EACCES,
           "the user may not read root's 0600 file");
    is_u64((uint64_t)-read_file("/home/user/t", false, buf, sizeof buf), EISDIR,
           "a directory is not read");
    is_u64((uint64_t)-read_file("/dev/null", true, buf, sizeof buf), EINVAL,
           "a device is refused unopened");
    is_u64((uint64_t)-read_file("/home/user/t/to-zero", true, buf, sizeof buf), EINVAL,
           "so is a symlink to one");
    is_u64((uint64_t)-read_file("/home/user/t/fifo", false, buf, sizeof buf), EINVAL,
           "a FIFO is refused unopened");
    is_u64((uint64_t)-read_file("/home/user/t/to-environ", true, buf, sizeof buf), EPERM,
           "/proc files are refused (they would describe the worker)");
    is_u64((uint64_t)-read_file("/proc/1/environ", true, buf, sizeof buf), EPERM,
           "/proc/1/environ too");
    is_u64((uint64_t)-open_write("/home/user/t/fifo", false, 0, -1, -1, -1), EINVAL,
           "writing a FIFO is refused");
    is_u64((uint64_t)-open_write("/dev/null", true, 0, -1, -1, -1), EINVAL,
           "writing a device is refused");

    /* A FIFO with a writer waiting for a reader: the API must neither open it nor wake it. */
    struct started writer;
    if (bg_start("echo woken > /home/user/t/fifo-writer; echo done", false, &writer) == 0) {
        usleep(200000);
        is_u64((uint64_t)-read_file("/home/user/t/fifo-writer", false, buf, sizeof buf), EINVAL,
               "a FIFO with a waiting writer is refused");
        usleep(200000);
        wait_exit(&j, writer.cmd_id, 100);
        ok(bg_running(&writer), "and its writer still waits (the FIFO was never opened)");
        bg_stop(&writer);
    }
    ok(canary_untouched("reads"), "the host's canary was not touched by the reads");
}

static void long_paths(void)
{
    char buf[64];
    static char path[8192];
    memset(path, 0, sizeof path);
    strcpy(path, "/home/user/");
    memset(path + strlen(path), 'a', 300);
    is_u64((uint64_t)-read_file(path, false, buf, sizeof buf), ENAMETOOLONG,
           "a component of 300 bytes: ENAMETOOLONG");
    /* PATH_MAX bytes: the most the protocol carries, one more than a path may have. */
    for (size_t at = 0; at < PATH_MAX; at += 2)
        memcpy(path + at, "/b", 2);
    path[PATH_MAX] = '\0';
    is_u64((uint64_t)-do_stat(path, false, false), ENAMETOOLONG,
           "a path of PATH_MAX bytes: ENAMETOOLONG");
    memset(path + PATH_MAX, 'c', 5000 - PATH_MAX);
    path[5000] = '\0';
    is_u64((uint64_t)-do_stat(path, false, false), E2BIG,
           "a path of 5000 bytes: E2BIG, from init's check of the message");
    /* A tree whose paths reach PATH_MAX, made by the user's command. */
    ok(sh("cd /home/user && mkdir deep && cd deep && n=$(printf '%0200d' 0) && "
          "for i in $(seq 1 19); do mkdir $n && cd $n; done && echo x > f",
          false, NULL, 0) == 0,
       "the user's command makes a tree 3800 bytes deep");
    bool paths_ok, saw;
    size_t chunks;
    long n = list("/home/user/deep", 64, false, "/home/user/deep/", "f", &paths_ok, &saw, &chunks);
    ok(n == 20 && paths_ok && saw, "list goes down to the bottom of it (%ld entries)", n);
    ok(do_stat("/home/user", false, false) == PROTO_FILE_INFO, "and the sandbox still answers");
}

static void writes_and_owners(void)
{
    char buf[256];
    ok(write_file("/home/user/new/dir/a.txt", false, "from the host\n") == 0,
       "the user writes a new file, parents made");
    ok(do_stat("/home/user/new/dir/a.txt", false, false) == PROTO_FILE_INFO &&
           msg.files.file.uid == JAIL_USER_UID && msg.files.file.gid == JAIL_USER_GID &&
           msg.files.file.mode == 0644 && msg.files.file.size == 14,
       "it is the user's, 0644, 14 bytes (uid %u mode 0%o)", msg.files.file.uid,
       msg.files.file.mode);
    ok(do_stat("/home/user/new/dir", false, false) == PROTO_FILE_INFO &&
           msg.files.file.uid == JAIL_USER_UID && msg.files.file.mode == 0755,
       "its parents too, 0755");
    ok(sh("cat /home/user/new/dir/a.txt", false, buf, sizeof buf) == 0 &&
           strcmp(buf, "from the host\n") == 0,
       "a command inside reads what the host wrote");
    is_u64((uint64_t)-write_file("/tmp/rootdir/x", false, "no"), EACCES,
           "the user may not write into a root-owned 0755 directory");
    is_u64((uint64_t)-write_file("/home/y", false, "no"), EACCES, "nor into /home");
    is_u64((uint64_t)-write_file("/tmp/rootdir/data", false, "no"), EACCES,
           "nor over root's 0644 file");
    is_u64((uint64_t)-simple_op(PROTO_FILE_REMOVE, "/tmp/rootdir/data", NULL, false, 0), EACCES,
           "nor remove it");
    is_u64(
        (uint64_t)-simple_op(PROTO_FILE_MOVE, "/tmp/rootdir/data", "/home/user/stolen", false, 0),
        EACCES, "nor move it away");
    ok(sh("cat /tmp/rootdir/data; ls /tmp/rootdir", true, buf, sizeof buf) == 0 &&
           strcmp(buf, "data\ndata\n") == 0,
       "root's directory is as it was");
    int fd = open_write("/tmp/rootdir/for-user", true, PROTO_FILE_EXCLUSIVE, 0640, JAIL_USER_UID,
                        JAIL_USER_GID);
    ok(fd >= 0, "root writes a file for the user, mode 0640, owner %u:%u", JAIL_USER_UID,
       JAIL_USER_GID);
    if (fd >= 0)
        close(fd);
    ok(do_stat("/tmp/rootdir/for-user", true, false) == PROTO_FILE_INFO &&
           msg.files.file.uid == JAIL_USER_UID && msg.files.file.gid == JAIL_USER_GID &&
           msg.files.file.mode == 0640,
       "owner and mode are as asked (%u:%u 0%o)", msg.files.file.uid, msg.files.file.gid,
       msg.files.file.mode);
    is_u64((uint64_t)-open_write("/tmp/rootdir/for-user", true, PROTO_FILE_EXCLUSIVE, -1, -1, -1),
           EEXIST, "EXCLUSIVE on an existing file: EEXIST");
    is_u64((uint64_t)-open_write("/home/user/for-root", false, 0, 0600, 0, 0), EPERM,
           "the user may not make a file owned by root");
    is_u64((uint64_t)-do_stat("/home/user/for-root", false, false), ENOENT,
           "and the attempt left nothing behind");
    fd = open_write("/home/user/t/to-host-file", true, PROTO_FILE_TRUNCATE, -1, -1, -1);
    is_u64((uint64_t)-fd, ELOOP, "a write through a final symlink (to the host's file) is refused");
    fd = open_write("/home/user/t/to-host/new", true, PROTO_FILE_MAKE_PARENTS, -1, -1, -1);
    ok(fd < 0, "a write below a symlink to the host's directory fails (%d)", -fd);
    if (fd >= 0)
        close(fd);
    int appended = open_write("/home/user/keep", false, PROTO_FILE_APPEND, -1, -1, -1);
    ok(appended >= 0 && write(appended, "more\n", 5) == 5, "append through the fd");
    if (appended >= 0)
        close(appended);
    ok(read_file("/home/user/keep", false, buf, sizeof buf) == 10 &&
           strcmp(buf, "kept\nmore\n") == 0,
       "what was there stays, the rest follows");
    ok(canary_untouched("writes"), "the host's canary was not touched by the writes");
}

static void dirs_moves_removes(void)
{
    struct proto_file_request mk = {
        .type = PROTO_FILE_MKDIR, .path = "/home/user/m/a/b", .has_mode = true, .mode = 0700};
    ok(file_op(&mk) == PROTO_OK && msg.files.created, "mkdir -p as the user, mode 0700");
    ok(do_stat("/home/user/m/a", false, false) == PROTO_FILE_INFO && msg.files.file.mode == 0700 &&
           msg.files.file.uid == JAIL_USER_UID,
       "its parents are made the same way");
    ok(file_op(&mk) == PROTO_OK && !msg.files.created, "again: there already (created 0)");
    mk.path = "/tmp/rootdir/sub";
    is_u64((uint64_t)-file_op(&mk), EACCES, "mkdir as the user in root's directory: EACCES");
    mk.as_root = true;
    ok(file_op(&mk) == PROTO_OK && msg.files.created, "as root it is made");
    mk.path = "/home/user/t/to-host/sub";
    mk.as_root = false;
    ok(file_op(&mk) < 0, "mkdir through a symlink to the host's directory fails");
    ok(simple_op(PROTO_FILE_MOVE, "/home/user/m/a", "/home/user/m2/x", false,
                 PROTO_FILE_MAKE_PARENTS) == PROTO_OK,
       "move, the destination's parents made");
    ok(do_stat("/home/user/m2/x/b", false, false) == PROTO_FILE_INFO &&
           do_stat("/home/user/m/a", false, false) == -ENOENT,
       "the tree is at its new name");
    ok(simple_op(PROTO_FILE_MOVE, "/home/user/keep", "/home/user/m2/x", false,
                 PROTO_FILE_NO_REPLACE) < 0,
       "NO_REPLACE refuses an existing destination");
    is_u64((uint64_t)-simple_op(PROTO_FILE_MOVE, "/home/user/t/file", "/home/user/t/to-host/file",
                                false, 0),
           ENOENT, "a move into a symlink to the host's directory: ENOENT");
    ok(simple_op(PROTO_FILE_REMOVE, "/home/user/m2", NULL, false, 0) == PROTO_OK &&
           do_stat("/home/user/m2", false, false) == -ENOENT,
       "remove a tree");
    ok(simple_op(PROTO_FILE_REMOVE, "/home/user/t/to-host", NULL, false, 0) == PROTO_OK,
       "remove a symlink to the host's directory: the link goes");
    ok(simple_op(PROTO_FILE_REMOVE, "/home/user/t/to-root", NULL, false, 0) == PROTO_OK &&
           do_stat("/home", false, false) == PROTO_FILE_INFO,
       "remove a symlink to /: the link goes, / stays");
    is_u64((uint64_t)-simple_op(PROTO_FILE_REMOVE, "/", NULL, true, 0), EBUSY,
           "remove / is refused");
    bool paths_ok, saw;
    size_t chunks;
    ok(list("/home/user/t", 2, false, "/home/user/t/", "fifo", &paths_ok, &saw, &chunks) >= 5 &&
           paths_ok && saw,
       "list shows the tree's own entries");
    ok(list("/home/user/t/up", 1, true, "/home/user/t/up/", "home", &paths_ok, &saw, &chunks) > 3 &&
           paths_ok && saw,
       "list through a link that climbs: the sandbox's root");
    list("/home/user/t/up", 1, true, "/", "work", &paths_ok, &saw, &chunks);
    ok(!saw, "(not the host's: no /work in it)");
    ok(sh("cd /home/user && mkdir many && cd many && seq 1 3000 | xargs touch", false, NULL, 0) ==
           0,
       "the user's command makes 3000 files");
    long n =
        list("/home/user/many", 1, false, "/home/user/many/", "2999", &paths_ok, &saw, &chunks);
    ok(n == 3000 && paths_ok && saw && chunks >= 2, "list brings all 3000 in %zu chunks", chunks);
    ok(canary_untouched("directories"), "the host's canary was not touched");
}

/* ---------- 1 GiB in and out ---------- */

/* POSIX cksum (CRC-32, polynomial 0x04C11DB7, the length appended), as cksum(1) inside says. */
static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i << 24;
        for (int k = 0; k < 8; k++)
            c = (c & 0x80000000u) ? (c << 1) ^ 0x04C11DB7u : c << 1;
        crc_table[i] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n--)
        crc = (crc << 8) ^ crc_table[(crc >> 24) ^ *p++];
    return crc;
}

static uint32_t crc_finish(uint32_t crc, uint64_t len)
{
    for (; len; len >>= 8) {
        uint8_t b = (uint8_t)len;
        crc = crc_update(crc, &b, 1);
    }
    return ~crc;
}

/* Generated data: xorshift64, the same stream for the same seed. */
static void generate(uint64_t *state, uint8_t *buf, size_t n)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t x = *state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *state = x;
        memcpy(buf + i, &x, 8);
    }
}

static void big_file(void)
{
    crc_init();
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    uint64_t state = 0x6875746368ull, t0 = now_ms();
    int fd = open_write("/home/user/big.bin", false, PROTO_FILE_TRUNCATE, -1, -1, -1);
    ok(fd >= 0, "open a new file for a 1 GiB write, as the user");
    uint32_t crc = 0;
    uint64_t written = 0;
    while (fd >= 0 && written < GIB) {
        generate(&state, buf, CHUNK);
        crc = crc_update(crc, buf, CHUNK);
        if (fd_write_all(fd, buf, CHUNK) < 0) {
            printf("# write: %s\n", strerror(errno));
            break;
        }
        written += CHUNK;
    }
    if (fd >= 0)
        close(fd);
    crc = crc_finish(crc, written);
    is_u64(written, GIB, "1 GiB of generated data written through the fd (%.1f s)",
           (double)(now_ms() - t0) / 1000);
    char out[256], want[256];
    snprintf(want, sizeof want, "%u %llu /home/user/big.bin\n", crc, (unsigned long long)GIB);
    ok(sh("cksum /home/user/big.bin", false, out, sizeof out) == 0, "cksum inside");
    is_str(out, want, "the file inside has the length and the cksum written");
    t0 = now_ms();
    fd = open_read("/home/user/big.bin", false);
    ok(fd >= 0 && msg.files.file.size == GIB, "open it for reading: its size comes with the fd");
    uint32_t back = 0;
    uint64_t got = 0;
    for (ssize_t n; fd >= 0 && got < GIB && (n = read(fd, buf, CHUNK)) > 0; got += (uint64_t)n)
        back = crc_update(back, buf, (size_t)n);
    if (fd >= 0)
        close(fd);
    back = crc_finish(back, got);
    ok(got == GIB && back == crc, "1 GiB read back through the fd, same cksum (%.1f s)",
       (double)(now_ms() - t0) / 1000);
    ok(simple_op(PROTO_FILE_REMOVE, "/home/user/big.bin", NULL, false, 0) == PROTO_OK,
       "and removed");
    free(buf);
}

/* ---------- a symlink swapped while requests go on ---------- */

static void swapped_symlink(void)
{
    char script[2 * PATH_MAX];
    snprintf(script, sizeof script,
             "cd /home/user && mkdir swap && cd swap && mkdir real && echo swapped-inside > "
             "real/f && exec perl -e 'while (1) { symlink(\"real\", \"n1\"); rename(\"n1\", "
             "\"d\"); symlink(\"%s\", \"n2\"); rename(\"n2\", \"d\"); symlink(\"/\", \"n3\"); "
             "rename(\"n3\", \"d\"); }'",
             canary_dir);
    struct started swapper;
    if (bg_start(script, false, &swapper) < 0) {
        ok(0, "start the swapper");
        return;
    }
    usleep(300000);
    size_t read_ok = 0, read_failed = 0, wrong = 0, write_ok = 0, write_failed = 0;
    quiet = true;
    uint64_t t0 = now_ms();
    for (int i = 0; i < 400 && now_ms() - t0 < 20000; i++) {
        char buf[64];
        ssize_t n = read_file("/home/user/swap/d/f", i % 2 == 0, buf, sizeof buf);
        if (n >= 0 && strcmp(buf, "swapped-inside\n") == 0)
            read_ok++;
        else if (n >= 0)
            wrong++;
        else
            read_failed++;
        int fd = open_write("/home/user/swap/d/w", i % 2 == 0,
                            PROTO_FILE_TRUNCATE | PROTO_FILE_MAKE_PARENTS, -1, -1, -1);
        if (fd >= 0) {
            write_ok++;
            close(fd);
        } else {
            write_failed++;
        }
        bool paths_ok, saw;
        size_t chunks;
        list("/home/user/swap/d", 1, i % 2 == 0, "/", NULL, &paths_ok, &saw, &chunks);
    }
    quiet = false;
    ok(bg_running(&swapper), "the swapper ran throughout");
    bg_stop(&swapper);
    printf("# reads: %zu inside, %zu failed; writes: %zu made, %zu failed\n", read_ok, read_failed,
           write_ok, write_failed);
    ok(wrong == 0 && read_ok > 0, "every read that succeeded read the sandbox's own file");
    ok(canary_untouched("the swapped symlink"),
       "the host's canary, one of the link's targets, was never touched");
}

/* ---------- watches ---------- */

static uint32_t watch_start(const char *path, bool as_root, bool recursive)
{
    struct proto_file_request r = {
        .type = PROTO_WATCH_START, .path = path, .as_root = as_root, .recursive = recursive};
    int rc = file_op(&r);
    return rc == PROTO_OK ? msg.files.watch_id : 0;
}

static int watch_stop(uint32_t id)
{
    return file_op(&(struct proto_file_request){.type = PROTO_WATCH_STOP, .watch_id = id});
}

static void want_event(unsigned kind, const char *path)
{
    snprintf(seen.wanted[seen.n_wanted++], PATH_MAX, "%u %s", kind, path);
}

/* Runs script as the user and takes the events that come until it ended and then some. */
static int run_watched(const char *script)
{
    struct started s;
    if (bg_start(script, false, &s) < 0)
        return -1;
    const struct exit_seen *e = wait_exit(&j, s.cmd_id, 120000);
    int code = e ? e->code : -1;
    if (e)
        finish(&j, &s, e, NULL);
    else
        bg_stop(&s);
    /* What is still on its way: a stat's answer comes after everything queued before it. */
    for (int i = 0; i < 3; i++) {
        usleep(100000);
        do_stat("/home/user", false, false);
    }
    return code;
}

/* WATCH_ENTRIES: CREATE, WRITE and CHMOD come with the file as a stat finds it then (envd's
 * includeEntry); REMOVE and RENAME without. */
static void watch_entries(void)
{
    on_watch_msg = on_watch;
    ok(simple_op(PROTO_FILE_MKDIR, "/home/user/we", NULL, false, 0) == PROTO_OK, "mkdir we");
    memset(&seen, 0, sizeof seen);
    seen.prefix = "/home/user/we";
    seen.chmod_path = "/home/user/we/f";
    struct proto_file_request r = {
        .type = PROTO_WATCH_START, .path = "/home/user/we", .flags = PROTO_WATCH_ENTRIES};
    int start_rc = file_op(&r);
    seen.watch_id = start_rc == PROTO_OK ? msg.files.watch_id : 0;
    if (!seen.watch_id)
        printf("# WATCH_START: %d %s\n", start_rc, msg.message);
    ok(seen.watch_id != 0, "a watch with WATCH_ENTRIES");
    want_event(PROTO_WATCH_REMOVE, "/home/user/we/f");
    ok(run_watched("cd /home/user/we && echo hello > f && chmod 640 f && sleep 0.5 && "
                   "mv f g && sleep 0.5 && rm g") == 0,
       "a command writes, chmods, renames and removes a file");
    ok(seen.chmod_file_ok, "its CHMOD came with the file: a regular file, 0640, 6 bytes, the "
                           "user's");
    ok(seen.with_file >= 2 && seen.wrong_file == 0,
       "files came with the kinds that leave one, each the event's own path (%zu, %zu wrong)",
       seen.with_file, seen.wrong_file);
    ok(seen.per_kind[PROTO_WATCH_REMOVE] >= 1, "the remove came too");
    ok(watch_stop(seen.watch_id) == PROTO_OK, "stop the watch");
    r.flags = 1u << 30;
    ok(file_op(&r) == -EINVAL || msg.type == PROTO_ERROR, "a WATCH_START with an unknown flag is "
                                                          "refused");
    on_watch_msg = NULL;
}

static void watches(void)
{
    on_watch_msg = on_watch;
    ok(simple_op(PROTO_FILE_MKDIR, "/home/user/w", NULL, false, 0) == PROTO_OK, "mkdir a tree");
    memset(&seen, 0, sizeof seen);
    seen.prefix = "/home/user/w";
    seen.watch_id = watch_start("/home/user/w", false, true);
    ok(seen.watch_id != 0, "a recursive watch as the user (id %u)", seen.watch_id);
    want_event(PROTO_WATCH_CREATE, "/home/user/w/d1");
    want_event(PROTO_WATCH_WRITE, "/home/user/w/d1/f");
    want_event(PROTO_WATCH_CHMOD, "/home/user/w/d1/f");
    want_event(PROTO_WATCH_RENAME, "/home/user/w/d1");
    want_event(PROTO_WATCH_CREATE, "/home/user/w/e1");
    want_event(PROTO_WATCH_REMOVE, "/home/user/w/e1/f");
    /* d1 waits a moment before its file is written: a recursive watch on a directory comes
     * only after its CREATE was read, as with inotify everywhere, and a loaded machine could
     * otherwise write d1/f before it (the other 99 run flat out). */
    ok(run_watched("cd /home/user/w && for i in $(seq 1 100); do mkdir d$i && "
                   "{ [ $i -gt 1 ] || sleep 0.5; } && echo x > d$i/f && "
                   "chmod 600 d$i/f && mv d$i e$i && rm -r e$i; done") == 0,
       "a command makes, writes, chmods, renames and removes 100 directories");
    bool all = true;
    for (size_t k = 0; k < seen.n_wanted; k++) {
        if (!seen.found[k])
            printf("# missing: %s\n", seen.wanted[k]);
        all = all && seen.found[k];
    }
    ok(all,
       "created, written, chmod, renamed, and removed below the renamed directory, each "
       "with its path (%zu events)",
       seen.count);
    ok(seen.bad_paths == 0 && !seen.ended, "every event's path is absolute and in the tree");
    ok(seen.with_file == 0, "a watch without WATCH_ENTRIES sends no files (%zu)", seen.with_file);

    /* A tree that changes as fast as it can: the events come, nothing breaks, memory stays. */
    struct worker_info user;
    find_worker("hutch-files-u", &user);
    static const char storm[] =
        "cd /home/user/w && exec perl -e 'for $i (1..30000) { mkdir \"x$i\"; open F, \">x$i/f\"; "
        "print F \"y\"; close F; unlink \"x$i/f\"; rmdir \"x$i\" }'";
    long rss_init[4], rss_worker[4];
    size_t before = seen.count;
    rss_init[0] = rss_kib(j.pid);
    rss_worker[0] = rss_kib(user.pid);
    for (int round = 1; round <= 3; round++) {
        ok(run_watched(storm) == 0,
           "a command changes the tree 150000 times as fast as it can "
           "(round %d)",
           round);
        rss_init[round] = rss_kib(j.pid);
        rss_worker[round] = rss_kib(user.pid);
    }
    printf("# %zu events, %zu overflows; RSS of init %ld -> %ld -> %ld -> %ld KiB, of the "
           "worker %ld -> %ld -> %ld -> %ld KiB\n",
           seen.count - before, seen.per_kind[PROTO_WATCH_OVERFLOW], rss_init[0], rss_init[1],
           rss_init[2], rss_init[3], rss_worker[0], rss_worker[1], rss_worker[2], rss_worker[3]);
    ok(seen.count - before > 3000, "events keep coming (%zu)", seen.count - before);
    /* The sanitizer build keeps some freed memory aside (ASAN_OPTIONS in main bounds that to
     * 1 MiB): after the first storm, two more as large take nothing more. */
    ok(rss_init[3] - rss_init[0] < 2048 && rss_worker[3] - rss_worker[1] < 2048,
       "init's and the worker's memory stay bounded");
    ok(!seen.ended && seen.bad_paths == 0, "the watch goes on, paths still right");
    /* A host that does not read for a while: init holds the worker's messages rather than
     * fill the host's socket, the worker stops reading inotify, and the kernel's queue
     * overflows, which the host hears as OVERFLOW; init does not drop the host. */
    struct started slow;
    size_t overflows = seen.per_kind[PROTO_WATCH_OVERFLOW];
    if (bg_start(storm, false, &slow) == 0) {
        sleep(4);
        const struct exit_seen *e = wait_exit(&j, slow.cmd_id, 120000);
        ok(e && e->code == 0, "a storm while the host does not read: its EXITED still comes");
        if (e)
            finish(&j, &slow, e, NULL);
        else
            bg_stop(&slow);
        run_watched("true");
    }
    ok(seen.per_kind[PROTO_WATCH_OVERFLOW] > overflows && !seen.ended,
       "the events lost meanwhile are reported as OVERFLOW, and the watch goes on (%zu)",
       seen.per_kind[PROTO_WATCH_OVERFLOW] - overflows);
    ok(do_stat("/home/user", false, false) == PROTO_FILE_INFO, "the host is still connected");
    ok(watch_stop(seen.watch_id) == PROTO_OK, "stop the watch");
    size_t after_stop = seen.count;
    run_watched("touch /home/user/w/late");
    ok(seen.count == after_stop, "no event after the stop");
    is_u64((uint64_t)-watch_stop(seen.watch_id), ESRCH, "stopping it again: ESRCH");
    is_u64((uint64_t)-watch_stop(777777), ESRCH, "stopping an unknown watch: ESRCH");
    ok(watch_start("/root", false, true) == 0 && msg.errnum == EACCES,
       "the user may not watch /root (EACCES)");
    ok(watch_start("/home/user/t/fifo", false, false) == 0, "a FIFO is no directory to watch");

    /* A watch belongs to the connection that started it: when it goes, so does the watch. */
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    tap_path(addr.sun_path, sizeof addr.sun_path, "%s/agent-f.sock", run_dir);
    int second = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct jail other = j;
    other.control_fd = second;
    bool connected = connect(second, (struct sockaddr *)&addr, sizeof addr) == 0;
    uint32_t id = next_request++;
    err_t err;
    ok(connected &&
           jail_files_request(
               &other, id,
               &(struct proto_file_request){.type = PROTO_WATCH_START, .path = "/home/user/w"},
               &err) == 0 &&
           wait_reply(&other, id, 10000) == 0 && msg.type == PROTO_OK,
       "a second connection starts a watch");
    find_worker("hutch-files-u", &user);
    int fds_with = user.fds;
    is_u64((uint64_t)-watch_stop(msg.files.watch_id), ESRCH,
           "the first connection may not stop the second's watch");
    close(second);
    do_stat("/home/user", false, false); /* init has seen the hang-up by the time it answers */
    usleep(200000);
    do_stat("/home/user", false, false);
    find_worker("hutch-files-u", &user);
    /* A watch holds two fds: inotify's, and its own dup of the root. */
    ok(fds_with == 4 && user.fds == 2,
       "the connection gone, the worker closed its watch (fds %d -> %d)", fds_with, user.fds);
    on_watch_msg = NULL;
}

/* ---------- a compromised init's fds ---------- */

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* From a fake init (the far end of a socketpair), a FILE_OPENED that passes fd claiming access:
 * whether jail_agent_recv accepted it (its fd closed again here). */
static bool fake_opened(int fd, uint32_t access)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) < 0)
        return false;
    struct jail fake = j;
    fake.control_fd = sp[0];
    uint8_t buf[512];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_FILE_OPENED, 42, 1);
    proto_put_file(&w, &(struct proto_file_entry){
                           .path = "/home/user/x", .name = "x", .type = PROTO_FILE_TYPE_FILE});
    proto_put_u32(&w, PROTO_T_ACCESS, access);
    proto_send(sp[1], buf, proto_finish(&w), &fd, 1);
    err_t err;
    int rc = jail_agent_recv(&fake, &msg, &err);
    if (rc < 0)
        printf("#   refused: %s\n", err.msg);
    bool took = rc == 1 && msg.files.fd >= 0;
    if (took)
        close(msg.files.fd);
    close(sp[0]);
    close(sp[1]);
    return took;
}

static void compromised_init(void)
{
    int before = count_fds();
    int host_file = open(canary_file, O_WRONLY | O_CLOEXEC);
    ok(!fake_opened(host_file, 1), "a host file passed as the file to write is refused");
    close(host_file);
    canary_forget_own(); /* that open was the test's own */
    int lock = open(lock_path, O_RDONLY | O_CLOEXEC);
    ok(!fake_opened(lock, 0), "so is the uid range's lock, passed to be read");
    close(lock);
    int p[2];
    (void)!pipe2(p, O_CLOEXEC);
    ok(!fake_opened(p[1], 1), "a pipe is refused (the host could block on it)");
    close(p[0]);
    close(p[1]);
    int sandbox_file = open_read("/home/user/t/file", false);
    ok(sandbox_file >= 0, "(a real file of the sandbox's, read-only)");
    ok(!fake_opened(sandbox_file, 1), "claimed writable while it is read-only: refused");
    ok(fake_opened(sandbox_file, 0), "claimed as what it is: taken (the control)");
    close(sandbox_file);
    int rw = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    ok(!fake_opened(rw, 0), "a host file opened read-only is refused too");
    close(rw);
    is_u64((uint64_t)count_fds(), (uint64_t)before, "no fd is left behind by the refusals");
    ok(canary_untouched("the fake init"), "the canary was not written");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    err_t err = {0};
    const struct jail_limits limits = {
        .memory_bytes = 256u << 20, .pids = 256, .disk_bytes = 1280ull << 20};
    /* The sanitizer build's init (and its workers) keep at most 1 MiB of freed memory aside,
     * so that a bound on their memory says something (watches). */
    static const char *const init_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user",
                                           "ASAN_OPTIONS=quarantine_size_mb=1", NULL};
    int rc = agent_start("/tmp/hutch-agent-files.XXXXXX", "agent-f", &limits, init_env, &err);
    ok(rc == 0, "an agent sandbox starts (%s)", rc ? err.msg : "ok");
    if (rc < 0)
        return done_testing();
    canary_setup();
    uint32_t id = next_request++;
    ok(jail_agent_request(&j, PROTO_HELLO, id, 0, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_HELLO_REPLY && msg.version >= 2,
       "HELLO says init speaks version 2 (files) or later");
    int fds_at_start = count_fds();
    lazy_workers();
    check_workers();
    hostile_tree();
    stat_and_read();
    long_paths();
    writes_and_owners();
    dirs_moves_removes();
    swapped_symlink();
    watches();
    watch_entries();
    big_file();
    compromised_init();
    check_workers();
    is_u64((uint64_t)count_fds(), (uint64_t)fds_at_start,
           "the host holds no more fds than before the first request");
    ok(canary_untouched("everything"), "in the end, nothing outside the sandbox was touched");
    ok(jail_destroy(&j, &err) == 0, "destroy (%s)", err.msg);
    jail_reap(&j);
    close(canary_watch);
    agent_cleanup("agent-f");
    return done_testing();
}
