/* `hutch doctor`: tries, one at a time, each host feature `hutch run` needs, and says which work.
 *
 * Every check does the thing for real (creates the namespace, mounts the overlay, freezes a
 * cgroup, installs the filter) instead of reading a version number: distribution kernels
 * backport and configure features differently, and an LSM, a sysctl or a container runtime can
 * refuse what the version promises. Whatever a check changes about a process (namespaces,
 * seccomp, Landlock, mounts) happens in a forked child and dies with it; whatever it creates on
 * the host (cgroups, temporary directories, the state directory when it was missing) it removes
 * before it returns.
 *
 * A FAIL is something `hutch run` cannot work without; a warn is a weaker sandbox or a feature
 * that is not used yet. The exit status is 1 when any check failed. */
#include "cli/doctor.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/paths.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/seccomp.h"
#include "jail/template.h"
#include "jail/userns.h"
#include "util/cleanup.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/utf8.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The shared parent group jail/cgroup.c creates in every hierarchy (CGROUP_PARENT there). The
 * doctor looks at files inside its own test groups to verify what the cgroup calls did. */
#define DOCTOR_CGROUP_PARENT "hutch"
#define CGROUP_FS_ROOT       "/sys/fs/cgroup"
#define CGROUP_FS_UNIFIED    "/sys/fs/cgroup/unified"

/* A probe child that takes longer than this is stuck (e.g. in a hung mount): it is killed and
 * the check fails. Everything here normally takes milliseconds. */
#define PROBE_TIMEOUT_MS 10000

enum doctor_status { DOCTOR_OK, DOCTOR_WARN, DOCTOR_FAIL };

struct doctor_result {
    enum doctor_status status;
    char detail[1536];
};

struct doctor_check {
    const char *name;
    void (*run)(struct doctor_result *r);
};

/* ---------- small helpers ---------- */

__attribute__((format(printf, 4, 5))) static enum doctor_status
say(char *out, size_t size, enum doctor_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
    return status;
}

#define result_set(r, st_, ...)                                                                    \
    ((r)->status = say((r)->detail, sizeof(r)->detail, (st_), __VA_ARGS__))

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* waitpid with a deadline. Returns 0 with *status, or -1 when the child is still running. */
static int wait_bounded(pid_t pid, int *status, unsigned timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid)
            return 0;
        if (got < 0 && errno != EINTR)
            return -1;
        if (now_ms() >= deadline)
            return -1;
        sleep_ms(2);
    }
}

static void describe_wait_status(int status, char *out, size_t size)
{
    if (WIFEXITED(status))
        snprintf(out, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "wait status 0x%x", (unsigned)status);
}

/* A sysctl-style file holding one number; -1 when it is absent or unreadable. */
static long long read_number(const char *path)
{
    char buf[64];
    if (file_read_at(AT_FDCWD, path, buf, sizeof buf, NULL) < 0)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || end == buf)
        return -1;
    return v;
}

static bool has_overlay_special(const char *path)
{
    /* overlayfs splits its options at ',' and its lowerdir list at ':', and takes '\' as an
     * escape; hutch passes layer paths unescaped. */
    return strpbrk(path, ",:\\") != NULL;
}

/* ---------- probes: a check's work in a forked child ---------- */

/* The child reports over a SEQPACKET socket, one message per send:
 *   'P'  "do your part now" (e.g. write my id maps); the parent answers 'G' when done
 *   'R'  the result: a status byte and the detail text. */
struct probe_msg {
    char type;
    char status;
    char text[1200];
};

struct probe {
    int sock;
};

typedef enum doctor_status (*probe_child_fn)(struct probe *p, void *arg, char *detail, size_t size);
typedef int (*probe_parent_fn)(pid_t pid, void *arg, err_t *err);

/* From the child: asks the parent for its step and waits until it is done. */
static int probe_ask_parent(struct probe *p)
{
    char c = 'P';
    if (send(p->sock, &c, 1, MSG_NOSIGNAL) != 1)
        return -1;
    ssize_t n;
    do {
        n = recv(p->sock, &c, 1, 0);
    } while (n < 0 && errno == EINTR);
    return n == 1 && c == 'G' ? 0 : -1;
}

static _Noreturn void probe_child_main(int sock, pid_t parent, probe_child_fn fn, void *arg)
{
    /* A doctor killed half way must not leave a probe (with its namespaces) running. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    struct probe p = {.sock = sock};
    struct probe_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = 'R';
    msg.status = (char)fn(&p, arg, msg.text, sizeof msg.text);
    size_t len = offsetof(struct probe_msg, text) + strnlen(msg.text, sizeof msg.text - 1) + 1;
    (void)!send(sock, &msg, len, MSG_NOSIGNAL);
    /* _exit: no atexit handlers, no second flush of the parent's stdio buffers. */
    _exit(0);
}

/* Runs child_fn in a forked child and puts its verdict in r. parent_fn (may be NULL) runs in
 * the parent each time the child calls probe_ask_parent. */
static void probe_run(struct doctor_result *r, probe_child_fn child_fn, probe_parent_fn parent_fn,
                      void *arg)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        result_set(r, DOCTOR_FAIL, "socketpair for the probe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL, "fork a probe: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return;
    }
    if (pid == 0) {
        close(sv[0]);
        probe_child_main(sv[1], self, child_fn, arg);
    }
    close(sv[1]);
    bool have_result = false, killed = false;
    uint64_t deadline = now_ms() + PROBE_TIMEOUT_MS;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= deadline) {
            result_set(r, DOCTOR_FAIL, "the probe did not finish within %d ms", PROBE_TIMEOUT_MS);
            killed = true;
            break;
        }
        struct pollfd pfd = {.fd = sv[0], .events = POLLIN};
        int n = poll(&pfd, 1, (int)(deadline - now));
        if (n <= 0)
            continue; /* EINTR or the deadline: the top of the loop decides */
        struct probe_msg msg;
        memset(&msg, 0, sizeof msg);
        ssize_t got = recv(sv[0], &msg, sizeof msg - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* the child is gone */
        if (msg.type == 'P') {
            err_t err;
            err_clear(&err);
            if (!parent_fn || parent_fn(pid, arg, &err) < 0) {
                result_set(r, DOCTOR_FAIL, "%s", err.msg[0] ? err.msg : "no parent step");
                killed = true;
                break;
            }
            char go = 'G';
            (void)!send(sv[0], &go, 1, MSG_NOSIGNAL);
        } else if (msg.type == 'R' && got >= 2) {
            enum doctor_status st = (enum doctor_status)msg.status;
            if (st != DOCTOR_OK && st != DOCTOR_WARN)
                st = DOCTOR_FAIL;
            result_set(r, st, "%s", msg.text);
            have_result = true;
        }
    }
    close(sv[0]);
    if (killed)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!have_result && !killed) {
        char how[96];
        describe_wait_status(status, how, sizeof how);
        result_set(r, DOCTOR_FAIL, "the probe ended without a report (%s)", how);
    }
}

/* ---------- user namespaces, as sandboxes use them ---------- */

/* The host ids a probe's user namespace maps to. When hutch's slot file exists, a range is
 * taken from it as hutch run does, so the probe never shares ids with a running sandbox;
 * without the file no sandbox holds any range, and creating it would leave something behind. */
static void doctor_uids_take(struct uid_range *range)
{
    char lock[PATH_MAX];
    snprintf(lock, sizeof lock, "%s/uid-slots.lock", hutch_run_dir());
    err_t ignored;
    if (access(lock, F_OK) == 0 && uid_range_acquire(lock, range, &ignored) == 0)
        return;
    range->lock_fd = -1;
    range->slot = USERNS_SLOT_COUNT - 1;
    range->host_base = USERNS_HOST_BASE + range->slot * JAIL_UID_COUNT;
}

struct userns_probe {
    uid_t host_base;
    int extra_flags; /* unshared together with CLONE_NEWUSER */
    const char *dir; /* overlay probe: the temporary directory */
};

static int userns_parent_write_maps(pid_t pid, void *arg, err_t *err)
{
    const struct userns_probe *u = arg;
    if (userns_write_maps(pid, u->host_base, JAIL_UID_COUNT, err) < 0)
        return err_wrap(err, "the parent writing the id maps");
    return 0;
}

/* In the child: a new user namespace (plus extra_flags), mapped by the parent to the probe's
 * host range, then root inside it. Returns 0, or -1 with the reason in detail. */
static int userns_enter(struct probe *p, const struct userns_probe *u, char *detail, size_t size)
{
    if (unshare(CLONE_NEWUSER | u->extra_flags) < 0) {
        say(detail, size, DOCTOR_FAIL, "unshare(CLONE_NEWUSER%s): %s",
            u->extra_flags ? "|CLONE_NEWNS" : "", strerror(errno));
        return -1;
    }
    if (probe_ask_parent(p) < 0) {
        say(detail, size, DOCTOR_FAIL, "the parent did not write the id maps");
        return -1;
    }
    /* Until now our ids are host root, which the map does not cover (they read as 65534). */
    if (userns_become_root() < 0) {
        say(detail, size, DOCTOR_FAIL, "setresuid/setresgid(0) inside the new namespace: %s",
            strerror(errno));
        return -1;
    }
    return 0;
}

static enum doctor_status userns_child(struct probe *p, void *arg, char *detail, size_t size)
{
    const struct userns_probe *u = arg;
    if (userns_enter(p, u, detail, size) < 0)
        return DOCTOR_FAIL;
    char map[256];
    unsigned inside, outside, count;
    if (file_read_at(AT_FDCWD, "/proc/self/uid_map", map, sizeof map, NULL) < 0 ||
        sscanf(map, "%u %u %u", &inside, &outside, &count) != 3)
        return say(detail, size, DOCTOR_FAIL, "cannot read /proc/self/uid_map inside: %s",
                   strerror(errno));
    if (inside != 0 || outside != u->host_base || count != JAIL_UID_COUNT || getuid() != 0 ||
        getgid() != 0)
        return say(detail, size, DOCTOR_FAIL,
                   "ids inside are uid %u gid %u with uid_map \"%u %u %u\"; want uid 0 mapped "
                   "to host %u",
                   (unsigned)getuid(), (unsigned)getgid(), inside, outside, count,
                   (unsigned)u->host_base);
    return say(detail, size, DOCTOR_OK,
               "unshare(CLONE_NEWUSER) in a child, the parent wrote uid_map/gid_map "
               "\"0 %u %u\", root inside",
               outside, count);
}

static void check_userns(struct doctor_result *r)
{
    long long max = read_number("/proc/sys/user/max_user_namespaces");
    if (max == 0) {
        result_set(r, DOCTOR_FAIL,
                   "user.max_user_namespaces is 0, so no user namespace can be created; fix: "
                   "sysctl -w user.max_user_namespaces=15000 (and set it in /etc/sysctl.d/)");
        return;
    }
    struct uid_range range;
    doctor_uids_take(&range);
    struct userns_probe u = {.host_base = range.host_base};
    probe_run(r, userns_child, userns_parent_write_maps, &u);
    uid_range_release(&range);
    size_t len = strlen(r->detail);
    snprintf(r->detail + len, sizeof r->detail - len, "; max_user_namespaces=%lld", max);
    /* Debian's knob only governs unprivileged callers; hutch runs as root, so it is context. */
    long long unpriv = read_number("/proc/sys/kernel/unprivileged_userns_clone");
    if (unpriv >= 0) {
        len = strlen(r->detail);
        snprintf(r->detail + len, sizeof r->detail - len,
                 ", kernel.unprivileged_userns_clone=%lld (does not matter to root)", unpriv);
    }
}

/* ---------- overlayfs inside a user namespace ---------- */

#define OVERLAY_LOWER_TEXT "from the lower layer\n"
#define OVERLAY_UPPER_TEXT "written through the overlay\n"

static enum doctor_status overlay_child(struct probe *p, void *arg, char *detail, size_t size)
{
    const struct userns_probe *u = arg;
    if (userns_enter(p, u, detail, size) < 0)
        return DOCTOR_FAIL;
    /* Private first: nothing mounted below may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return say(detail, size, DOCTOR_FAIL, "make / private in the new mount namespace: %s",
                   strerror(errno));
    char mnt[PATH_MAX], merged[PATH_MAX], path[PATH_MAX], opts[3 * PATH_MAX];
    snprintf(mnt, sizeof mnt, "%s/mnt", u->dir);
    snprintf(merged, sizeof merged, "%s/merged", u->dir);
    if (mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
        return say(detail, size, DOCTOR_FAIL, "mount a tmpfs inside the namespace: %s",
                   strerror(errno));
    snprintf(path, sizeof path, "%s/upper", mnt);
    int rc = mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/work", mnt);
    if (rc < 0 || mkdir(path, 0755) < 0)
        return say(detail, size, DOCTOR_FAIL, "mkdir upper/work on the tmpfs: %s", strerror(errno));
    snprintf(opts, sizeof opts, "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work,userxattr",
             u->dir, mnt, mnt);
    if (mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        return say(detail, size, DOCTOR_FAIL,
                   "mount overlay (%s) in a user namespace: %s; hutch's sandbox root is such an "
                   "overlay (needs Linux 5.11+ for overlay in user namespaces, and an upper "
                   "filesystem with user.* xattrs)",
                   opts, strerror(errno));
    char text[128];
    snprintf(path, sizeof path, "%s/hello", merged);
    if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0 ||
        strcmp(text, OVERLAY_LOWER_TEXT) != 0)
        return say(detail, size, DOCTOR_FAIL,
                   "reading the lower layer's file through the overlay "
                   "failed: %s",
                   strerror(errno));
    snprintf(path, sizeof path, "%s/probe", merged);
    err_t err;
    if (file_create_at(AT_FDCWD, path, OVERLAY_UPPER_TEXT, strlen(OVERLAY_UPPER_TEXT), 0644, &err) <
        0)
        return say(detail, size, DOCTOR_FAIL, "writing a file through the overlay: %s", err.msg);
    snprintf(path, sizeof path, "%s/upper/probe", mnt);
    if (file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0 ||
        strcmp(text, OVERLAY_UPPER_TEXT) != 0)
        return say(detail, size, DOCTOR_FAIL,
                   "the file written through the overlay is not in "
                   "its upper layer");
    return say(detail, size, DOCTOR_OK,
               "in a child with new user+mount namespaces mapped to host uid %u: tmpfs, then "
               "overlay (host lower dir, upper/work on the tmpfs, userxattr); read the lower "
               "file and wrote a new one through it",
               (unsigned)u->host_base);
}

/* The overlay probe's host side: DIR/lower (world-readable, one file), DIR/mnt, DIR/merged. */
static int overlay_dir_make(char *dir, size_t size, err_t *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, size, "%s/hutch-doctor.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return err_set(err, errno, "mkdtemp %s", dir);
    /* mkdtemp makes it 0700; the namespace's root is an unprivileged host uid that must get
     * through it to the layers. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lower/hello", dir);
    if (chmod(dir, 0755) < 0)
        return err_set(err, errno, "chmod %s", dir);
    static const char *const subdirs[] = {"lower", "mnt", "merged"};
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/%s", dir, subdirs[i]);
        if (mkdir(sub, 0755) < 0 || chmod(sub, 0755) < 0)
            return err_set(err, errno, "mkdir %s", sub);
    }
    if (file_create_at(AT_FDCWD, path, OVERLAY_LOWER_TEXT, strlen(OVERLAY_LOWER_TEXT), 0644, err) <
            0 ||
        chmod(path, 0644) < 0)
        return -1;
    return 0;
}

static void overlay_dir_remove(const char *dir)
{
    /* The mounts lived in the probe's mount namespace and went away with it. */
    static const char *const paths[] = {"lower/hello", "lower", "mnt", "merged", ""};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, paths[i]);
        if (unlink(path) < 0)
            rmdir(path);
    }
}

static void check_overlay(struct doctor_result *r)
{
    char dir[PATH_MAX];
    err_t err;
    err_clear(&err);
    if (overlay_dir_make(dir, sizeof dir, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "preparing the layers: %s", err.msg);
        overlay_dir_remove(dir);
        return;
    }
    struct uid_range range;
    doctor_uids_take(&range);
    struct userns_probe u = {.host_base = range.host_base, .extra_flags = CLONE_NEWNS, .dir = dir};
    probe_run(r, overlay_child, userns_parent_write_maps, &u);
    uid_range_release(&range);
    overlay_dir_remove(dir);
}

/* ---------- the other namespaces ---------- */

struct ns_probe {
    const char *name;
    int flag;
};

static enum doctor_status ns_child(struct probe *p, void *arg, char *detail, size_t size)
{
    const struct ns_probe *ns = arg;
    if (unshare(ns->flag) < 0)
        return say(detail, size, DOCTOR_FAIL, "unshare: %s", strerror(errno));
    switch (ns->flag) {
    case CLONE_NEWPID: {
        /* Only children enter the new pid namespace; the first one is its pid 1. */
        pid_t pid = fork();
        if (pid < 0)
            return say(detail, size, DOCTOR_FAIL, "fork into it: %s", strerror(errno));
        if (pid == 0)
            _exit(getpid() == 1 ? 0 : 1);
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return say(detail, size, DOCTOR_FAIL, "its first child is not pid 1");
        break;
    }
    case CLONE_NEWNET: {
        /* A fresh network namespace holds loopback and nothing else. */
        struct if_nameindex *ifs = if_nameindex();
        size_t n = 0;
        bool only_lo = ifs != NULL;
        for (struct if_nameindex *i = ifs; i && i->if_index; i++, n++)
            only_lo = only_lo && strcmp(i->if_name, "lo") == 0;
        if (ifs)
            if_freenameindex(ifs);
        if (!only_lo || n != 1)
            return say(detail, size, DOCTOR_FAIL, "the new namespace does not hold just lo");
        break;
    }
    case CLONE_NEWUTS: {
        static const char name[] = "hutch-doctor";
        char got[HOST_NAME_MAX + 1] = "";
        if (sethostname(name, sizeof name - 1) < 0 || gethostname(got, sizeof got) < 0 ||
            strcmp(got, name) != 0)
            return say(detail, size, DOCTOR_FAIL, "sethostname inside: %s", strerror(errno));
        break;
    }
    case CLONE_NEWCGROUP: {
        /* Our own cgroups become the roots of the new view. */
        char text[4096];
        if (file_read_at(AT_FDCWD, "/proc/self/cgroup", text, sizeof text, NULL) < 0)
            return say(detail, size, DOCTOR_FAIL, "read /proc/self/cgroup: %s", strerror(errno));
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            size_t len = strlen(line);
            if (len < 2 || strcmp(line + len - 2, ":/") != 0)
                return say(detail, size, DOCTOR_FAIL, "/proc/self/cgroup inside shows \"%s\"",
                           line);
        }
        break;
    }
    default:
        break;
    }
    return say(detail, size, DOCTOR_OK, "ok");
}

static void check_namespaces(struct doctor_result *r)
{
    static const struct ns_probe probes[] = {
        {"mount", CLONE_NEWNS}, {"pid", CLONE_NEWPID}, {"net", CLONE_NEWNET},
        {"ipc", CLONE_NEWIPC},  {"uts", CLONE_NEWUTS}, {"cgroup", CLONE_NEWCGROUP},
    };
    char host_before[HOST_NAME_MAX + 1] = "", host_after[HOST_NAME_MAX + 1] = "";
    gethostname(host_before, sizeof host_before);
    char good[128] = "", bad[1200] = "";
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        struct doctor_result one;
        probe_run(&one, ns_child, NULL, (void *)&probes[i]);
        char *list = one.status == DOCTOR_OK ? good : bad;
        size_t cap = one.status == DOCTOR_OK ? sizeof good : sizeof bad;
        size_t len = strlen(list);
        if (one.status == DOCTOR_OK)
            snprintf(list + len, cap - len, "%s%s", len ? " " : "", probes[i].name);
        else
            snprintf(list + len, cap - len, "%s%s: %s", len ? "; " : "", probes[i].name,
                     one.detail);
    }
    gethostname(host_after, sizeof host_after);
    if (strcmp(host_before, host_after) != 0) {
        /* Should never happen; if it does the host's own name was changed: say so loudly. */
        result_set(r, DOCTOR_FAIL,
                   "the uts probe changed the host's hostname from \"%s\" to "
                   "\"%s\": uts namespaces do not isolate",
                   host_before, host_after);
        return;
    }
    if (bad[0])
        result_set(r, DOCTOR_FAIL,
                   "%s (works: %s); hutch run needs all of them, check the "
                   "kernel config (CONFIG_*_NS) and any seccomp/LSM policy around hutch",
                   bad, good[0] ? good : "none");
    else
        result_set(r, DOCTOR_OK, "%s: each unshared in a child and looked at from inside", good);
}

/* ---------- clone3 with a pidfd ---------- */

static void check_clone3(struct doctor_result *r)
{
    int pidfd = -1;
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)&pidfd;
    args.exit_signal = SIGCHLD;
    fflush(NULL);
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL,
                   "clone3(CLONE_PIDFD): %s; hutch run starts sandboxes with "
                   "clone3 (Linux 5.3+, CLONE_INTO_CGROUP 5.7+)",
                   strerror(errno));
        return;
    }
    if (pid == 0)
        _exit(42);
    cleanup_fd int fd = pidfd;
    /* The pidfd becomes readable when the child exits; waitid(P_PIDFD) then reaps it. */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int n;
    do {
        n = poll(&pfd, 1, PROBE_TIMEOUT_MS);
    } while (n < 0 && errno == EINTR);
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (n != 1) {
        result_set(r, DOCTOR_FAIL, "the pidfd never became readable when the child exited");
        kill(pid, SIGKILL);
        reap(pid);
        return;
    }
    if (waitid((idtype_t)P_PIDFD, (id_t)fd, &info, WEXITED) < 0) {
        result_set(r, DOCTOR_FAIL, "waitid(P_PIDFD): %s", strerror(errno));
        reap(pid);
        return;
    }
    if (info.si_pid != pid || info.si_code != CLD_EXITED || info.si_status != 42) {
        result_set(r, DOCTOR_FAIL,
                   "waitid(P_PIDFD) reported pid %d code %d status %d, not the "
                   "child's exit 42",
                   (int)info.si_pid, info.si_code, info.si_status);
        return;
    }
    result_set(r, DOCTOR_OK,
               "clone3(CLONE_PIDFD) started a child; its pidfd polled readable "
               "and waitid(P_PIDFD) reaped its exit status");
}

/* ---------- cgroups ---------- */

/* Mount point of the v1 hierarchy that carries controller, from /proc/self/mountinfo. */
static int v1_mount_point(const char *controller, char *out, size_t size)
{
    cleanup_file FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    cleanup_free char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SOURCE SUPEROPTS" */
        char *fields[64], *save = NULL;
        size_t n = 0;
        for (char *tok = strtok_r(line, " \n", &save); tok && n < 64;
             tok = strtok_r(NULL, " \n", &save))
            fields[n++] = tok;
        size_t dash = 6;
        while (dash < n && strcmp(fields[dash], "-") != 0)
            dash++;
        if (dash + 3 >= n || strcmp(fields[dash + 1], "cgroup") != 0)
            continue;
        char *opts_save = NULL;
        for (char *opt = strtok_r(fields[dash + 3], ",", &opts_save); opt;
             opt = strtok_r(NULL, ",", &opts_save)) {
            if (strcmp(opt, controller) == 0) {
                /* cgroup mount points have no spaces to unescape on any sane host */
                snprintf(out, size, "%s", fields[4]);
                return 0;
            }
        }
    }
    return -1;
}

static bool is_cgroup2(const char *path)
{
    struct statfs st;
    return statfs(path, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}

static const char *v2_mount_point(void)
{
    if (is_cgroup2(CGROUP_FS_ROOT))
        return CGROUP_FS_ROOT;
    if (is_cgroup2(CGROUP_FS_UNIFIED))
        return CGROUP_FS_UNIFIED;
    return NULL;
}

/* Path of file in hutch/NAME: in controller's v1 hierarchy, or in cgroup2 when it is NULL. */
static int cgroup_file(const char *controller, const char *name, const char *file, char *out,
                       size_t size)
{
    char mount_point[PATH_MAX];
    if (controller) {
        if (v1_mount_point(controller, mount_point, sizeof mount_point) < 0)
            return -1;
    } else {
        const char *root = v2_mount_point();
        if (!root)
            return -1;
        snprintf(mount_point, sizeof mount_point, "%s", root);
    }
    snprintf(out, size, "%s/" DOCTOR_CGROUP_PARENT "/%s/%s", mount_point, name, file);
    return 0;
}

/* A fresh name per test group: one that failed to go away must not break the next check. */
static void doctor_cgroup_name(char *out, size_t size)
{
    static unsigned counter;
    snprintf(out, size, "doctor-%d-%u", (int)getpid(), counter++);
}

static void check_cgroup_mode(struct doctor_result *r)
{
    enum cgroup_mode mode;
    err_t err;
    if (cgroup_detect(&mode, &err) < 0) {
        result_set(r, DOCTOR_FAIL,
                   "%s; hutch needs cgroup v2, v1 or hybrid mounted under " CGROUP_FS_ROOT,
                   err.msg);
        return;
    }
    const char *forced = getenv("HUTCH_CGROUP_MODE");
    const char *how = forced && forced[0] ? " (forced by HUTCH_CGROUP_MODE)" : "";
    switch (mode) {
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
static int read_memory_limit(enum cgroup_mode mode, const char *name, uint64_t *out)
{
    char path[PATH_MAX];
    bool v2 = mode == CGROUP_MODE_V2;
    if (cgroup_file(v2 ? NULL : "memory", name, v2 ? "memory.max" : "memory.limit_in_bytes", path,
                    sizeof path) < 0)
        return -1;
    long long v = read_number(path);
    if (v < 0)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The hierarchies in which hutch/NAME exists, e.g. "v1 memory, v1 pids, cgroup2". */
static void cgroup_where(const char *name, char *out, size_t size)
{
    static const char *const v1[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
    char path[PATH_MAX], seen[5][PATH_MAX];
    size_t n_seen = 0, len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof v1 / sizeof v1[0]; i++) {
        if (cgroup_file(v1[i], name, "", path, sizeof path) < 0 || access(path, F_OK) < 0)
            continue;
        bool dup = false; /* co-mounted controllers ("cpu,cpuacct") share one directory */
        for (size_t k = 0; k < n_seen; k++)
            dup = dup || strcmp(seen[k], path) == 0;
        snprintf(seen[n_seen++], PATH_MAX, "%s", path);
        len += (size_t)snprintf(out + len, size - len, "%sv1 %s%s", len ? ", " : "", v1[i],
                                dup ? " (shared)" : "");
        if (len >= size)
            return;
    }
    if (cgroup_file(NULL, name, "", path, sizeof path) == 0 && access(path, F_OK) == 0)
        snprintf(out + len, size - len, "%scgroup2", len ? ", " : "");
}

static void check_cgroup_controllers(struct doctor_result *r)
{
    enum cgroup_mode mode;
    err_t err;
    if (cgroup_detect(&mode, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
        return;
    }
    char name[64];
    doctor_cgroup_name(name, sizeof name);
    const struct cgroup_limits limits = {.memory_bytes = 64u << 20, .pids = 64};
    struct cgroup *cg = NULL;
    if (cgroup_create(name, &limits, &cg, &err) < 0) {
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
    bool limit_read = read_memory_limit(mode, name, &got) == 0;
    char where[256];
    cgroup_where(name, where, sizeof where);
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

static void check_swap_accounting(struct doctor_result *r)
{
    enum cgroup_mode mode;
    err_t err;
    if (cgroup_detect(&mode, &err) < 0) {
        result_set(r, DOCTOR_WARN, "cannot tell: %s", err.msg);
        return;
    }
    char name[64], path[PATH_MAX];
    doctor_cgroup_name(name, sizeof name);
    const struct cgroup_limits limits = {.memory_bytes = 64u << 20};
    struct cgroup *cg = NULL;
    if (cgroup_create(name, &limits, &cg, &err) < 0) {
        result_set(r, DOCTOR_WARN, "cannot tell, no cgroup with a memory limit could be made: %s",
                   err.msg);
        return;
    }
    bool v2 = mode == CGROUP_MODE_V2;
    const char *file = v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
    bool present = cgroup_file(v2 ? NULL : "memory", name, file, path, sizeof path) == 0 &&
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
            sleep_ms(1);
        }
    }
    return pid;
}

/* Waits until the counter moves past from; false if it did not within timeout_ms. */
static bool counter_moves(volatile uint64_t *counter, uint64_t from, unsigned timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    while (*counter == from) {
        if (now_ms() >= deadline)
            return false;
        sleep_ms(1);
    }
    return true;
}

/* Which interface reads the group as frozen: cgroup2's cgroup.events or the v1 freezer.state.
 * Both are looked at, since the cgroup module may freeze through either on a hybrid host.
 * NULL when neither does. */
static const char *cgroup_frozen_by(enum cgroup_mode mode, const char *name)
{
    char path[PATH_MAX], text[512];
    if (mode != CGROUP_MODE_V1 &&
        cgroup_file(NULL, name, "cgroup.events", path, sizeof path) == 0 &&
        file_read_at(AT_FDCWD, path, text, sizeof text, NULL) >= 0 && strstr(text, "frozen 1\n"))
        return "cgroup.freeze";
    if (mode != CGROUP_MODE_V2 &&
        cgroup_file("freezer", name, "freezer.state", path, sizeof path) == 0 &&
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
        return say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    if (!counter_moves(counter, *counter, 1000))
        return say(detail, size, DOCTOR_FAIL, "the test child does not run");
    if (cgroup_set_frozen(cg, true, &err) < 0)
        return say(detail, size, DOCTOR_FAIL, "freeze: %s", err.msg);
    const char *how = cgroup_frozen_by(mode, name);
    if (!how)
        return say(detail, size, DOCTOR_FAIL, "the group does not read as frozen after a freeze");
    uint64_t before = *counter;
    sleep_ms(50);
    if (*counter != before)
        return say(detail, size, DOCTOR_FAIL, "a frozen child kept running (%llu steps in 50 ms)",
                   (unsigned long long)(*counter - before));
    if (cgroup_set_frozen(cg, false, &err) < 0)
        return say(detail, size, DOCTOR_FAIL, "thaw: %s", err.msg);
    if (!counter_moves(counter, before, 1000))
        return say(detail, size, DOCTOR_FAIL, "the child did not run again after the thaw");
    return say(detail, size, DOCTOR_OK,
               "%s: froze hutch/%s with a child in it, which stopped "
               "(state read back, no progress for 50 ms), thawed it, it ran again; killed and "
               "removed",
               how, name);
}

static void check_freezer(struct doctor_result *r)
{
    enum cgroup_mode mode;
    err_t err;
    if (cgroup_detect(&mode, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
        return;
    }
    char name[64];
    doctor_cgroup_name(name, sizeof name);
    struct cgroup *cg = NULL;
    if (cgroup_create(name, NULL, &cg, &err) < 0) {
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
        reap(pid);
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
        return say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    if (cgroup_file(NULL, name, "cgroup.kill", path, sizeof path) < 0)
        return say(detail, size, DOCTOR_FAIL, "cgroup2 is not mounted");
    if (access(path, F_OK) < 0)
        return say(detail, size, DOCTOR_WARN,
                   "no cgroup.kill (Linux < 5.14): hutch kills "
                   "through the freezer instead, which a forking payload can make slower");
    if (file_write_str_at(AT_FDCWD, path, "1", &err) < 0)
        return say(detail, size, DOCTOR_FAIL, "%s", err.msg);
    int status;
    if (wait_bounded(pid, &status, 2000) < 0)
        return say(detail, size, DOCTOR_FAIL, "the child survived a write to cgroup.kill");
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        char how[96];
        describe_wait_status(status, how, sizeof how);
        return say(detail, size, DOCTOR_FAIL, "after cgroup.kill the child ended with %s", how);
    }
    return say(detail, size, DOCTOR_OK,
               "clone3(CLONE_INTO_CGROUP) put a child in hutch/%s; "
               "writing 1 to its cgroup.kill SIGKILLed it",
               name);
}

static void check_cgroup_kill(struct doctor_result *r)
{
    enum cgroup_mode mode;
    err_t err;
    if (cgroup_detect(&mode, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
        return;
    }
    if (mode == CGROUP_MODE_V1) {
        result_set(r, DOCTOR_WARN,
                   "pure cgroup v1 has no cgroup.kill and no clone3 into a "
                   "cgroup: hutch kills through the v1 freezer, which works but is slower");
        return;
    }
    char name[64];
    doctor_cgroup_name(name, sizeof name);
    struct cgroup *cg = NULL;
    if (cgroup_create(name, NULL, &cg, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "no cgroup to test with: %s", err.msg);
        return;
    }
    pid_t pid = clone_into_cgroup(cgroup_clone_into_fd(cg));
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL,
                   "clone3(CLONE_INTO_CGROUP): %s; hutch run starts sandboxes "
                   "this way on cgroup v2 and hybrid hosts (Linux 5.7+)",
                   strerror(errno));
    } else {
        r->status = cgroup_kill_steps(cg, name, pid, r->detail, sizeof r->detail);
        kill(pid, SIGKILL); /* already dead unless a step failed */
        reap(pid);
    }
    if (cgroup_destroy(cg, &err) < 0 && r->status != DOCTOR_FAIL)
        result_set(r, DOCTOR_FAIL, "removing hutch/%s: %s", name, err.msg);
}

/* ---------- seccomp ---------- */

/* Calls the filter must refuse, each with a harmless argument set, and what it must answer.
 * Without the filter (we are root) each would succeed or fail differently. */
static enum doctor_status seccomp_child(struct probe *p, void *arg, char *detail, size_t size)
{
    const struct seccomp_program *prog = arg;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return say(detail, size, DOCTOR_FAIL, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    if (seccomp_install(prog) < 0)
        return say(detail, size, DOCTOR_FAIL, "installing the filter: %s", strerror(errno));
    /* unshare(0) does nothing and succeeds when allowed */
    errno = 0;
    long rc = syscall(SYS_unshare, 0);
    if (rc != -1 || errno != EPERM)
        return say(detail, size, DOCTOR_FAIL, "unshare(0) returned %ld (%s), want EPERM", rc,
                   strerror(errno));
    /* io_uring_setup(0, NULL) is EINVAL/EFAULT when allowed */
    errno = 0;
    rc = syscall(SYS_io_uring_setup, 0, NULL);
    if (rc != -1 || errno != ENOSYS)
        return say(detail, size, DOCTOR_FAIL, "io_uring_setup returned %ld (%s), want ENOSYS", rc,
                   strerror(errno));
    errno = 0;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        close(fd);
    if (fd != -1 || errno != EAFNOSUPPORT)
        return say(detail, size, DOCTOR_FAIL,
                   "socket(AF_NETLINK) returned %d (%s), want "
                   "EAFNOSUPPORT",
                   fd, strerror(errno));
    /* ...and ordinary calls still work */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return say(detail, size, DOCTOR_FAIL, "open(/dev/null) under the filter: %s",
                   strerror(errno));
    close(fd);
    return say(detail, size, DOCTOR_OK,
               "installed after no_new_privs in a child: unshare -> "
               "EPERM, io_uring_setup -> ENOSYS, socket(AF_NETLINK) -> EAFNOSUPPORT, open works");
}

static bool same_program(const struct seccomp_program *a, const struct seccomp_program *b)
{
    return a->len == b->len && memcmp(a->filter, b->filter, a->len * sizeof *a->filter) == 0;
}

static void check_seccomp(struct doctor_result *r)
{
    /* Sandboxes load the programs compiled into hutch at build time; that is what is tried. */
    struct seccomp_program builtin, strict;
    if (seccomp_builtin(SECCOMP_PROFILE_DEFAULT, &builtin) < 0 ||
        seccomp_builtin(SECCOMP_PROFILE_STRICT, &strict) < 0) {
        result_set(r, DOCTOR_FAIL, "hutch was built without its seccomp programs");
        return;
    }
    probe_run(r, seccomp_child, NULL, &builtin);
    if (r->status != DOCTOR_OK)
        return;
    /* Compiling again with this host's libseccomp shows whether the build-time program still
     * matches the policy source as this libseccomp reads it (it differs after an upgrade that
     * learned new syscall numbers: a rebuild picks them up). */
    char rest[sizeof r->detail], compiled[160];
    struct seccomp_program fresh = {0};
    err_t err;
    if (seccomp_compile(SECCOMP_PROFILE_DEFAULT, &fresh, &err) < 0)
        snprintf(compiled, sizeof compiled, "; compiling it again here failed: %s", err.msg);
    else
        snprintf(compiled, sizeof compiled, "; libseccomp here compiles %s",
                 same_program(&fresh, &builtin) ? "the same program"
                                                : "a different program (rebuild hutch)");
    seccomp_program_free(&fresh);
    snprintf(rest, sizeof rest, "%s", r->detail);
    result_set(r, DOCTOR_OK, "built-in default profile (%u BPF instructions) %s%s; strict: %u",
               (unsigned)builtin.len, rest, compiled, (unsigned)strict.len);
}

/* ---------- Landlock ---------- */

static enum doctor_status landlock_child(struct probe *p, void *arg, char *detail, size_t size)
{
    int abi = *(const int *)arg;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return say(detail, size, DOCTOR_WARN, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    if (landlock_restrict() < 0)
        return say(detail, size, DOCTOR_WARN,
                   "landlock_restrict() failed: %s; sandboxes would "
                   "fail to start",
                   strerror(errno));
    /* "/" is outside the places a sandbox may write; as root, only Landlock can refuse this. */
    char dir[64];
    snprintf(dir, sizeof dir, "/.hutch-doctor-landlock-%d", (int)getpid());
    const char *fs = "mkdir outside the writable places -> EACCES";
    if (mkdir(dir, 0700) == 0) {
        rmdir(dir);
        return say(detail, size, DOCTOR_WARN,
                   "ABI %d, but after landlock_restrict() a mkdir in / "
                   "still worked: the rules do not apply",
                   abi);
    }
    if (errno == EROFS)
        fs = "(/ is read-only, write rule not testable)";
    else if (errno == EACCES && geteuid() != 0)
        fs = "(not root, so the write rule is not testable)";
    else if (errno != EACCES)
        return say(detail, size, DOCTOR_WARN,
                   "after landlock_restrict() mkdir in / gave %s, "
                   "want EACCES",
                   strerror(errno));
    if (abi < 6)
        return say(detail, size, DOCTOR_WARN,
                   "ABI %d: %s; below ABI 6 there is no signal or "
                   "abstract-socket scoping, so a payload can signal processes outside its "
                   "domain (Linux 6.12+ has it)",
                   abi, fs);
    /* Signal scoping: the parent is outside our domain, so even signal 0 must be refused. */
    if (kill(getppid(), 0) == 0 || errno != EPERM)
        return say(detail, size, DOCTOR_WARN,
                   "ABI %d, but kill(parent, 0) was not refused with "
                   "EPERM after landlock_restrict()",
                   abi);
    return say(detail, size, DOCTOR_OK,
               "ABI %d; landlock_restrict() in a child: %s, "
               "kill(parent, 0) -> EPERM (signal scoping)",
               abi, fs);
}

static void check_landlock(struct doctor_result *r)
{
    int abi = landlock_abi_version();
    if (abi <= 0) {
        result_set(r, DOCTOR_WARN,
                   "no Landlock: the kernel lacks CONFIG_SECURITY_LANDLOCK or "
                   "'landlock' is not in the lsm= boot parameter; sandboxes run without this "
                   "second wall (namespaces and seccomp still apply)");
        return;
    }
    probe_run(r, landlock_child, NULL, &abi);
    /* Landlock is a second layer: never a reason to refuse to run. */
    if (r->status == DOCTOR_FAIL)
        r->status = DOCTOR_WARN;
}

/* ---------- nftables (not used yet) ---------- */

static enum doctor_status nft_lib_child(struct probe *p, void *arg, char *detail, size_t size)
{
    /* In a child: loading it runs its constructors, which the doctor itself has no use for. */
    void *lib = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return say(detail, size, DOCTOR_WARN, "%s", dlerror());
    bool has_api = dlsym(lib, "nft_run_cmd_from_buffer") != NULL;
    return say(detail, size, has_api ? DOCTOR_OK : DOCTOR_WARN,
               has_api ? "ok" : "libnftables.so.1 lacks nft_run_cmd_from_buffer");
}

static bool find_in_path(const char *prog, char *out, size_t size)
{
    /* root's usual sbin directories too: a plain user PATH often lacks them */
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/%s", d, prog);
        if (access(out, X_OK) == 0)
            return true;
    }
    return false;
}

static void check_nftables(struct doctor_result *r)
{
    char nft[PATH_MAX];
    bool have_nft = find_in_path("nft", nft, sizeof nft);
    struct doctor_result lib;
    probe_run(&lib, nft_lib_child, NULL, NULL);
    if (have_nft && lib.status == DOCTOR_OK) {
        result_set(r, DOCTOR_OK,
                   "nft at %s, libnftables.so.1 loads (for sandbox network egress "
                   "rules, not used yet)",
                   nft);
        return;
    }
    result_set(r, DOCTOR_WARN,
               "%s%s%s: not needed yet (sandboxes have no network), needed "
               "later for egress rules; fix: apt-get install nftables libnftables1",
               have_nft ? "" : "no nft command", have_nft || lib.status == DOCTOR_OK ? "" : ", ",
               lib.status == DOCTOR_OK ? "" : "libnftables does not load");
}

/* ---------- host directories ---------- */

/* mkdir -p that remembers the shortest prefix it created, so the check can undo it. */
static int mkdir_p_tracked(const char *path, size_t *first_made, err_t *err)
{
    char buf[PATH_MAX];
    *first_made = 0;
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return err_set(err, ENAMETOOLONG, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (p[-1] != '/') {
            if (mkdir(buf, 0755) == 0) {
                if (!*first_made)
                    *first_made = strlen(buf);
            } else if (errno != EEXIST) {
                return err_set(err, errno, "mkdir %s", buf);
            }
        }
        *p = c;
        if (!c)
            return 0;
    }
}

static void rmdir_made(const char *path, size_t first_made)
{
    if (!first_made)
        return;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (;;) {
        size_t len = strlen(buf);
        while (len > 1 && buf[len - 1] == '/')
            buf[--len] = '\0';
        if (len < first_made || rmdir(buf) < 0)
            return;
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf)
            return;
        *slash = '\0';
    }
}

/* Finds the first directory on the real path to `path` (symlinks resolved) that others cannot
 * search (no o+x). Returns 0 when there is none, 1 with it in bad/bad_mode, -1 on error. */
static int find_untraversable(const char *path, char *bad, size_t size, mode_t *bad_mode)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return -1;
    for (char *p = real;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat st;
        const char *prefix = real[0] ? real : "/";
        if (stat(prefix, &st) < 0)
            return -1;
        if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) {
            snprintf(bad, size, "%s", prefix);
            *bad_mode = st.st_mode & 07777;
            return 1;
        }
        *p = c;
        if (!c)
            return 0;
    }
}

/* Creates and removes a directory in dir: a real write test (root may still hit a read-only
 * mount or an immutable attribute). */
static int try_write_in(const char *dir, err_t *err)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.hutch-doctor.XXXXXX", dir);
    if (!mkdtemp(tmp))
        return err_set(err, errno, "create a directory in %s", dir);
    rmdir(tmp);
    return 0;
}

static void check_state_dir(struct doctor_result *r)
{
    const char *dir = hutch_state_dir();
    if (dir[0] != '/') {
        result_set(r, DOCTOR_FAIL,
                   "state directory \"%s\" is not absolute; fix: set "
                   "HUTCH_STATE_DIR to an absolute path",
                   dir);
        return;
    }
    if (has_overlay_special(dir)) {
        result_set(r, DOCTOR_FAIL,
                   "state directory %s contains ',', ':' or '\\', which break "
                   "the overlay mount options its template is passed in; fix: set "
                   "HUTCH_STATE_DIR to a path without them",
                   dir);
        return;
    }
    size_t first_made;
    err_t err;
    if (mkdir_p_tracked(dir, &first_made, &err) < 0) {
        result_set(r, DOCTOR_FAIL,
                   "cannot create the state directory: %s; fix: create %s as "
                   "root with mode 0755, or set HUTCH_STATE_DIR",
                   err.msg, dir);
        rmdir_made(dir, first_made);
        return;
    }
    char bad[PATH_MAX], tpl[PATH_MAX];
    mode_t mode = 0;
    /* Sandboxes run as unprivileged host uids and must reach the template below it, so the
     * whole way down to the template (when it exists) must be searchable by others. */
    snprintf(tpl, sizeof tpl, "%s/templates/base-v%d/rootfs", dir, TEMPLATE_BASE_VERSION);
    const char *deepest = access(tpl, F_OK) == 0 ? tpl : dir;
    int found = find_untraversable(deepest, bad, sizeof bad, &mode);
    if (found < 0) {
        result_set(r, DOCTOR_FAIL, "resolving %s: %s", deepest, strerror(errno));
    } else if (found > 0) {
        result_set(r, DOCTOR_FAIL,
                   "%s has mode %04o, without o+x: sandboxes run as unprivileged "
                   "host uids and must traverse it to reach the template under %s/templates; "
                   "fix: chmod o+x %s, or set HUTCH_STATE_DIR to a path where every directory "
                   "has o+x",
                   bad, (unsigned)mode, dir, bad);
    } else if (try_write_in(dir, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "%s; fix: make %s writable by root", err.msg, dir);
    } else {
        result_set(r, DOCTOR_OK, "%s %s, writable, every directory down to %s has o+x", dir,
                   first_made ? "can be created (and was removed again)" : "exists",
                   deepest == tpl ? "the template" : "it");
    }
    rmdir_made(dir, first_made);
}

static void check_run_dir(struct doctor_result *r)
{
    const char *dir = hutch_run_dir();
    size_t first_made;
    err_t err;
    if (dir[0] != '/') {
        result_set(r, DOCTOR_FAIL,
                   "run directory \"%s\" is not absolute; fix: set HUTCH_RUN_DIR "
                   "to an absolute path",
                   dir);
        return;
    }
    if (mkdir_p_tracked(dir, &first_made, &err) < 0)
        result_set(r, DOCTOR_FAIL,
                   "cannot create the run directory (uid range locks): %s; fix: "
                   "set HUTCH_RUN_DIR to a writable place such as /run/hutch",
                   err.msg);
    else if (try_write_in(dir, &err) < 0)
        result_set(r, DOCTOR_FAIL, "%s; fix: set HUTCH_RUN_DIR to a writable place", err.msg);
    else
        result_set(r, DOCTOR_OK, "%s %s and writable (uid range locks)", dir,
                   first_made ? "can be created (and was removed again)" : "exists");
    rmdir_made(dir, first_made);
}

static void check_usr(struct doctor_result *r)
{
    char real[PATH_MAX], bad[PATH_MAX];
    if (!realpath("/usr", real)) {
        result_set(r, DOCTOR_FAIL, "/usr: %s", strerror(errno));
        return;
    }
    if (has_overlay_special(real)) {
        result_set(r, DOCTOR_FAIL,
                   "/usr resolves to %s, which contains ',', ':' or '\\': "
                   "overlay cannot take it as a lower layer; fix: mount /usr at a plain path",
                   real);
        return;
    }
    mode_t mode = 0;
    int found = find_untraversable(real, bad, sizeof bad, &mode);
    struct stat st;
    if (found != 0 || stat(real, &st) < 0 || !(st.st_mode & S_IROTH)) {
        result_set(r, DOCTOR_FAIL,
                   "%s is not readable and searchable by others (mode %04o): "
                   "sandboxes see the host's /usr as unprivileged uids; fix: chmod o+rx %s",
                   found > 0 ? bad : real, (unsigned)(found > 0 ? mode : st.st_mode & 07777),
                   found > 0 ? bad : real);
        return;
    }
    result_set(r, DOCTOR_OK,
               "/usr%s%s: no ',' ':' '\\' in the path, readable and searchable by "
               "others",
               strcmp(real, "/usr") ? " -> " : "", strcmp(real, "/usr") ? real : "");
}

/* ---------- root ---------- */

static void check_root(struct doctor_result *r)
{
    if (geteuid() != 0) {
        result_set(r, DOCTOR_FAIL,
                   "running as uid %u: hutch run needs root (it creates cgroups, "
                   "user namespaces mapped to host uid ranges and overlay mounts); run it as "
                   "root, e.g. sudo hutch ...",
                   (unsigned)geteuid());
        return;
    }
    /* Root in a container may lack the capabilities, or sit in a user namespace of its own. */
    char status[4096] = "", map[256] = "";
    file_read_at(AT_FDCWD, "/proc/self/status", status, sizeof status, NULL);
    const char *cap = strstr(status, "CapEff:");
    unsigned long long eff = cap ? strtoull(cap + 7, NULL, 16) : 0;
    static const struct {
        int bit;
        const char *name;
    } needed[] = {{21, "CAP_SYS_ADMIN"}, {6, "CAP_SETGID"}, {7, "CAP_SETUID"}};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        if (!(eff >> needed[i].bit & 1)) {
            result_set(r, DOCTOR_FAIL,
                       "euid 0 but without %s (CapEff %llx): hutch needs a "
                       "fully privileged root, not one inside a restricted container",
                       needed[i].name, eff);
            return;
        }
    }
    file_read_at(AT_FDCWD, "/proc/self/uid_map", map, sizeof map, NULL);
    unsigned inside = 1, outside = 1, count = 0;
    sscanf(map, "%u %u %u", &inside, &outside, &count);
    bool initial = inside == 0 && outside == 0 && count == 4294967295u;
    result_set(r, DOCTOR_OK, "euid 0 with CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID%s",
               initial ? ", in the initial user namespace"
                       : "; not in the initial user namespace, so host uid ranges may be short");
}

/* ---------- the table and the report ---------- */

static const struct doctor_check checks[] = {
    {"root", check_root},
    {"user-namespaces", check_userns},
    {"overlay-in-userns", check_overlay},
    {"namespaces", check_namespaces},
    {"clone3-pidfd", check_clone3},
    {"cgroup-mode", check_cgroup_mode},
    {"cgroup-controllers", check_cgroup_controllers},
    {"memory-swap-accounting", check_swap_accounting},
    {"freezer", check_freezer},
    {"cgroup-kill", check_cgroup_kill},
    {"seccomp", check_seccomp},
    {"landlock", check_landlock},
    {"nftables", check_nftables},
    {"state-dir", check_state_dir},
    {"run-dir", check_run_dir},
    {"usr-path", check_usr},
};
#define CHECK_COUNT (sizeof checks / sizeof checks[0])

static const char *status_word(enum doctor_status s, bool json)
{
    switch (s) {
    case DOCTOR_OK:
        return json ? "ok" : "ok  ";
    case DOCTOR_WARN:
        return "warn";
    case DOCTOR_FAIL:
        return json ? "fail" : "FAIL";
    }
    return "?";
}

static json_t *json_clean_string(const char *text)
{
    size_t len;
    cleanup_free char *clean = utf8_sanitize(text, strlen(text), &len);
    return clean ? json_stringn(clean, len) : json_string("");
}

static void usage(FILE *out)
{
    fprintf(out, "usage: hutch doctor [--json]\n"
                 "\n"
                 "Tries each host feature hutch run needs and prints one line per check:\n"
                 "  ok   NAME: what was tried\n"
                 "  warn NAME: works, but weaker or not used yet\n"
                 "  FAIL NAME: what is missing and how to fix it\n"
                 "--json prints a JSON array of {name, status: ok|warn|fail, detail} instead.\n"
                 "Exit status: 0 when everything hutch run needs works, 1 otherwise.\n");
}

int doctor_main(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "hutch doctor: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    json_t *array = json ? json_array() : NULL;
    if (json && !array) {
        fprintf(stderr, "hutch doctor: out of memory\n");
        return 1;
    }
    unsigned counts[3] = {0, 0, 0};
    for (size_t i = 0; i < CHECK_COUNT; i++) {
        struct doctor_result r = {.status = DOCTOR_OK, .detail = ""};
        checks[i].run(&r);
        counts[r.status]++;
        if (json) {
            json_t *entry =
                json_pack("{s:s, s:s, s:o}", "name", checks[i].name, "status",
                          status_word(r.status, true), "detail", json_clean_string(r.detail));
            if (!entry || json_array_append_new(array, entry) < 0) {
                fprintf(stderr, "hutch doctor: out of memory\n");
                json_decref(array);
                return 1;
            }
        } else {
            printf("%s %s: %s\n", status_word(r.status, false), checks[i].name, r.detail);
            fflush(stdout);
        }
    }
    if (json) {
        json_dumpf(array, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(array);
    } else {
        printf("\n%u ok, %u warn, %u FAIL: %s\n", counts[DOCTOR_OK], counts[DOCTOR_WARN],
               counts[DOCTOR_FAIL],
               counts[DOCTOR_FAIL] ? "hutch run will not work on this host until the FAIL lines "
                                     "are fixed"
                                   : "hutch run can work on this host");
    }
    return counts[DOCTOR_FAIL] ? 1 : 0;
}
