/* `hutch doctor`: the namespaces a sandbox is made of, each created for real in a probe child:
 * user namespaces mapped to a host uid range, overlayfs mounted inside one, the other
 * namespaces, and clone3 with a pidfd. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/doctor_internal.h"
#include "cli/paths.h"
#include "jail/idmap.h"
#include "jail/jail.h"
#include "jail/userns.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/strfmt.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* ---------- user namespaces, as sandboxes use them ---------- */

/* The host ids a probe's user namespace maps to. When hutch's slot file exists, a range is
 * taken from it as hutch run does, so the probe never shares ids with a running sandbox;
 * without the file no sandbox holds any range, and creating it would leave something behind. */
static void doctor_uids_take(struct uid_range *range)
{
    char lock[PATH_MAX];
    err_t ignored;
    if (strfmt(lock, sizeof lock, "%s/uid-slots.lock", hutch_run_dir()) == 0 &&
        access(lock, F_OK) == 0 && uid_range_acquire(lock, range, &ignored) == 0)
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
    if (userns_write_maps(pid, u->host_base, JAIL_UID_MAPPED, err) < 0)
        return err_wrap(err, "the parent writing the id maps");
    return 0;
}

/* In the child: a new user namespace (plus extra_flags), mapped by the parent to the probe's
 * host range, then root inside it. Returns 0, or -1 with the reason in detail. */
static int userns_enter(struct probe *p, const struct userns_probe *u, char *detail, size_t size)
{
    if (unshare(CLONE_NEWUSER | u->extra_flags) < 0) {
        doctor_say(detail, size, DOCTOR_FAIL, "unshare(CLONE_NEWUSER%s): %s",
                   u->extra_flags ? "|CLONE_NEWNS" : "", strerror(errno));
        return -1;
    }
    if (doctor_probe_ask_parent(p) < 0) {
        doctor_say(detail, size, DOCTOR_FAIL, "the parent did not write the id maps");
        return -1;
    }
    /* Until now our ids are host root, which the map does not cover (they read as 65534). */
    if (userns_become_root() < 0) {
        doctor_say(detail, size, DOCTOR_FAIL, "setresuid/setresgid(0) inside the new namespace: %s",
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
        return doctor_say(detail, size, DOCTOR_FAIL, "cannot read /proc/self/uid_map inside: %s",
                          strerror(errno));
    if (inside != 0 || outside != u->host_base || count != JAIL_UID_MAPPED || getuid() != 0 ||
        getgid() != 0)
        return doctor_say(
            detail, size, DOCTOR_FAIL,
            "ids inside are uid %u gid %u with uid_map \"%u %u %u\"; want uid 0 mapped "
            "to host %u",
            (unsigned)getuid(), (unsigned)getgid(), inside, outside, count, (unsigned)u->host_base);
    return doctor_say(detail, size, DOCTOR_OK,
                      "unshare(CLONE_NEWUSER) in a child, the parent wrote uid_map/gid_map "
                      "\"0 %u %u\", root inside",
                      outside, count);
}

void check_userns(struct doctor_result *r)
{
    long long max = doctor_read_number("/proc/sys/user/max_user_namespaces");
    if (max == 0) {
        result_set(r, DOCTOR_FAIL,
                   "user.max_user_namespaces is 0, so no user namespace can be created; fix: "
                   "sysctl -w user.max_user_namespaces=15000 (and set it in /etc/sysctl.d/)");
        return;
    }
    struct uid_range range;
    doctor_uids_take(&range);
    struct userns_probe u = {.host_base = range.host_base};
    doctor_probe_run(r, userns_child, userns_parent_write_maps, &u);
    uid_range_release(&range);
    size_t len = strlen(r->detail);
    snprintf(r->detail + len, sizeof r->detail - len, "; max_user_namespaces=%lld", max);
    /* Debian's knob only governs unprivileged callers; hutch runs as root, so it is context. */
    long long unpriv = doctor_read_number("/proc/sys/kernel/unprivileged_userns_clone");
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
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "make / private in the new mount namespace: %s", strerror(errno));
    char mnt[PATH_MAX], merged[PATH_MAX], path[PATH_MAX], opts[3 * PATH_MAX];
    /* overlay_dir_make made u->dir/lower/hello: these fit. */
    snprintf(mnt, sizeof mnt, "%s/mnt", u->dir);
    snprintf(merged, sizeof merged, "%s/merged", u->dir);
    if (mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "mount a tmpfs inside the namespace: %s",
                          strerror(errno));
    int rc = strfmt(path, sizeof path, "%s/upper", mnt) < 0 ? -1 : mkdir(path, 0755);
    if (rc < 0 || strfmt(path, sizeof path, "%s/work", mnt) < 0 || mkdir(path, 0755) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "mkdir upper/work on the tmpfs: %s",
                          strerror(errno));
    if (strfmt(opts, sizeof opts, "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work,userxattr",
               u->dir, mnt, mnt) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "overlay options for %s: %s", u->dir,
                          strerror(errno));
    if (mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        return doctor_say(
            detail, size, DOCTOR_FAIL,
            "mount overlay (%s) in a user namespace: %s; hutch's sandbox root is such an "
            "overlay (needs Linux 5.11+ for overlay in user namespaces, and an upper "
            "filesystem with user.* xattrs)",
            opts, strerror(errno));
    char text[128];
    if (strfmt(path, sizeof path, "%s/hello", merged) < 0 || file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0 ||
        strcmp(text, OVERLAY_LOWER_TEXT) != 0)
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "reading the lower layer's file through the overlay "
                          "failed: %s",
                          strerror(errno));
    err_t err;
    if (strfmt(path, sizeof path, "%s/probe", merged) < 0) {
        err_set(&err, errno, "%s/probe", merged);
        return doctor_say(detail, size, DOCTOR_FAIL, "writing a file through the overlay: %s",
                          err.msg);
    }
    if (file_create_at(AT_FDCWD, path, OVERLAY_UPPER_TEXT, strlen(OVERLAY_UPPER_TEXT), 0644, &err) <
        0)
        return doctor_say(detail, size, DOCTOR_FAIL, "writing a file through the overlay: %s",
                          err.msg);
    if (strfmt(path, sizeof path, "%s/upper/probe", mnt) < 0 || file_read_at(AT_FDCWD, path, text, sizeof text, NULL) < 0 ||
        strcmp(text, OVERLAY_UPPER_TEXT) != 0)
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "the file written through the overlay is not in "
                          "its upper layer");
    return doctor_say(
        detail, size, DOCTOR_OK,
        "in a child with new user+mount namespaces mapped to host uid %u: tmpfs, then "
        "overlay (host lower dir, upper/work on the tmpfs, userxattr); read the lower "
        "file and wrote a new one through it",
        (unsigned)u->host_base);
}

/* The overlay probe's host side: DIR/lower (world-readable, one file), DIR/mnt, DIR/merged. */
static int overlay_dir_make(char *dir, size_t size, err_t *err)
{
    const char *tmp = getenv("TMPDIR");
    if (strfmt(dir, size, "%s/hutch-doctor.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp") < 0)
        return err_set(err, errno, "TMPDIR %s", tmp);
    if (!mkdtemp(dir))
        return err_set(err, errno, "mkdtemp %s", dir);
    /* mkdtemp makes it 0700; the namespace's root is an unprivileged host uid that must get
     * through it to the layers. */
    char path[PATH_MAX];
    if (strfmt(path, sizeof path, "%s/lower/hello", dir) < 0)
        return err_set(err, errno, "%s/lower/hello", dir);
    if (chmod(dir, 0755) < 0)
        return err_set(err, errno, "chmod %s", dir);
    static const char *const subdirs[] = {"lower", "mnt", "merged"};
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        char sub[PATH_MAX];
        if (strfmt(sub, sizeof sub, "%s/%s", dir, subdirs[i]) < 0)
            return err_set(err, errno, "%s/%s", dir, subdirs[i]);
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
        char path[PATH_MAX]; /* overlay_dir_make made dir/lower/hello: these fit */
        snprintf(path, sizeof path, "%s/%s", dir, paths[i]);
        if (unlink(path) < 0)
            rmdir(path);
    }
}

void check_overlay(struct doctor_result *r)
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
    doctor_probe_run(r, overlay_child, userns_parent_write_maps, &u);
    uid_range_release(&range);
    overlay_dir_remove(dir);
}

/* ---------- idmapped lower layers ---------- */

/* A child that only holds a fresh user namespace (mapped by the parent) until ends[0] closes. */
static pid_t userns_holder(int ends[2])
{
    int ready[2];
    if (pipe2(ends, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(ready, O_CLOEXEC) < 0) {
        close(ends[0]);
        close(ends[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(ends[1]);
        close(ready[0]);
        char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || c != 'y')
            _exit(1);
        while (read(ends[0], &c, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    close(ends[0]);
    close(ready[1]);
    char c = 'n';
    if (pid > 0 && (read(ready[0], &c, 1) != 1 || c != 'y')) {
        close(ends[1]);
        doctor_reap(pid);
        pid = -1;
    }
    close(ready[0]);
    return pid;
}

/* The lower layers of a sandbox's writable root (`hutch serve`): /usr, /var/lib/dpkg and the
 * templates in the state directory are idmapped mounts where their filesystems allow it (the
 * same call the daemon makes, idmap_clone, with a user namespace mapped as a sandbox's). Where
 * one does not (9p, NFS, FUSE), sandboxes still start, but their root sees those files owned by
 * nobody and cannot change them: a warning, not a failure. */
void check_idmap(struct doctor_result *r)
{
    const char *paths[] = {"/usr", "/var/lib/dpkg", hutch_state_dir()};
    struct uid_range range;
    doctor_uids_take(&range);
    int ends[2];
    pid_t pid = userns_holder(ends);
    if (pid < 0) {
        result_set(r, DOCTOR_FAIL, "a user namespace to map them with: %s", strerror(errno));
        uid_range_release(&range);
        return;
    }
    err_t err;
    err_clear(&err);
    int ns = userns_write_maps(pid, range.host_base, JAIL_UID_MAPPED, &err) < 0
                 ? -1
                 : idmap_userns_open(pid, &err);
    char mapped[512] = "", refused[512] = "";
    bool failed = ns < 0;
    for (size_t i = 0; ns >= 0 && i < sizeof paths / sizeof paths[0]; i++) {
        /* A state directory not made yet: the directory it will be made in. */
        char at_path[PATH_MAX];
        snprintf(at_path, sizeof at_path, "%s", paths[i]);
        struct stat st;
        int found;
        char *cut;
        while ((found = stat(at_path, &st)) < 0 && (cut = strrchr(at_path, '/')) && cut > at_path)
            *cut = '\0';
        if (found < 0 || !S_ISDIR(st.st_mode) || strcmp(at_path, "/") == 0)
            continue; /* a host without dpkg */
        bool unmapped;
        int fd = idmap_clone(ns, at_path, &unmapped, &err);
        if (fd < 0) {
            failed = true;
            break;
        }
        close(fd);
        char *list = unmapped ? refused : mapped;
        size_t at = strlen(list);
        snprintf(list + at, sizeof mapped - at, "%s%s", at ? ", " : "", paths[i]);
    }
    if (ns >= 0)
        close(ns);
    close(ends[1]);
    doctor_reap(pid);
    uid_range_release(&range);
    if (failed)
        result_set(r, DOCTOR_FAIL, "%s", err.msg);
    else if (refused[0])
        result_set(r, DOCTOR_WARN,
                   "cannot be idmapped (their filesystem refuses idmapped mounts, as 9p, NFS and "
                   "FUSE do): %s%s%s; hutch serve's sandboxes still start, but their root sees "
                   "those files owned by nobody and cannot change them (no dpkg -i or pip install "
                   "into them); fix: keep them on ext4, xfs, btrfs or tmpfs (Linux 6.3+)",
                   refused, mapped[0] ? "; idmapped: " : "", mapped);
    else
        result_set(r, DOCTOR_OK,
                   "idmapped as a sandbox's writable root needs them (its root owns their files "
                   "and may change its copy): %s",
                   mapped);
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
        return doctor_say(detail, size, DOCTOR_FAIL, "unshare: %s", strerror(errno));
    switch (ns->flag) {
    case CLONE_NEWPID: {
        /* Only children enter the new pid namespace; the first one is its pid 1. */
        pid_t pid = fork();
        if (pid < 0)
            return doctor_say(detail, size, DOCTOR_FAIL, "fork into it: %s", strerror(errno));
        if (pid == 0)
            _exit(getpid() == 1 ? 0 : 1);
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return doctor_say(detail, size, DOCTOR_FAIL, "its first child is not pid 1");
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
            return doctor_say(detail, size, DOCTOR_FAIL, "the new namespace does not hold just lo");
        break;
    }
    case CLONE_NEWUTS: {
        static const char name[] = "hutch-doctor";
        char got[HOST_NAME_MAX + 1] = "";
        if (sethostname(name, sizeof name - 1) < 0 || gethostname(got, sizeof got) < 0 ||
            strcmp(got, name) != 0)
            return doctor_say(detail, size, DOCTOR_FAIL, "sethostname inside: %s", strerror(errno));
        break;
    }
    case CLONE_NEWCGROUP: {
        /* Our own cgroups become the roots of the new view. */
        char text[4096];
        if (file_read_at(AT_FDCWD, "/proc/self/cgroup", text, sizeof text, NULL) < 0)
            return doctor_say(detail, size, DOCTOR_FAIL, "read /proc/self/cgroup: %s",
                              strerror(errno));
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            size_t len = strlen(line);
            if (len < 2 || strcmp(line + len - 2, ":/") != 0)
                return doctor_say(detail, size, DOCTOR_FAIL,
                                  "/proc/self/cgroup inside shows \"%s\"", line);
        }
        break;
    }
    default:
        break;
    }
    return doctor_say(detail, size, DOCTOR_OK, "ok");
}

void check_namespaces(struct doctor_result *r)
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
        doctor_probe_run(&one, ns_child, NULL, (void *)&probes[i]);
        char *list = one.status == DOCTOR_OK ? good : bad;
        size_t cap = one.status == DOCTOR_OK ? sizeof good : sizeof bad;
        bool first = list[0] == '\0';
        if (one.status == DOCTOR_OK)
            strfmt_text_append(list, cap, "%s%s", first ? "" : " ", probes[i].name);
        else
            strfmt_text_append(list, cap, "%s%s: %s", first ? "" : "; ", probes[i].name,
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

void check_clone3(struct doctor_result *r)
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
        doctor_reap(pid);
        return;
    }
    if (waitid((idtype_t)P_PIDFD, (id_t)fd, &info, WEXITED) < 0) {
        result_set(r, DOCTOR_FAIL, "waitid(P_PIDFD): %s", strerror(errno));
        doctor_reap(pid);
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
