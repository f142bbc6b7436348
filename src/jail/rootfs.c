#include "jail/rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/idmap.h"
#include "jail/inroot.h"
#include "jail/writable_root.h"
#include "util/fileio.h"
#include "util/strfmt.h"

/* Directories that must exist in the writable layer before the overlay is mounted: overlay
 * cannot copy up a lower directory owned by an unmapped host uid (EOVERFLOW), so every place the
 * sandbox may write is created here, with its owner. */
struct upper_dir {
    const char *path;
    mode_t mode;
    int owner; /* 0 = sandbox root, 1 = sandbox user, 2 = whoever the payload runs as */
};
static const struct upper_dir upper_dirs[] = {
    {"upper/tmp", 01777, 0},      {"upper/var", 0755, 0},      {"upper/var/tmp", 01777, 0},
    {"upper/run", 0755, 0},       {"upper/root", 0700, 0},     {"upper/home", 0755, 0},
    {"upper/home/user", 0755, 1}, {"upper/output", 0755, 2},   {"upper/mnt", 0755, 0},
    {"upper/dev", 0755, 0},       {"upper/dev/shm", 01777, 0},
};

/* The places a writable root's mounts go on, in the disk layer's root (see
 * check_mount_targets): made if missing, never followed if they are links. */
struct mount_target {
    const char *path;
    bool dir;
};
static const struct mount_target mount_targets[] = {
    {"dev", true},       {"dev/pts", true},     {"dev/null", false},    {"dev/zero", false},
    {"dev/full", false}, {"dev/random", false}, {"dev/urandom", false}, {"dev/tty", false},
    {"proc", true},      {"usr", true},
};

static void make_dir(int ctl, int dirfd, const char *path, mode_t mode, uid_t uid)
{
    if (mkdirat(dirfd, path, mode) < 0 && errno != EEXIST)
        control_die(ctl, errno, "mkdir %s", path);
    /* mkdir honours the umask (022 here) and may drop the sticky bit: set those exactly. */
    if ((mode & ~(mode_t)0755) && fchmodat(dirfd, path, mode, 0) < 0)
        control_die(ctl, errno, "chmod %s", path);
    if (uid != 0 && fchownat(dirfd, path, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
        control_die(ctl, errno, "chown %s", path);
}

/* dir + suffix into buf[PATH_MAX], never cut: validate_spec bounds the stage directory
 * (JAIL_MAX_DIR_PATH) so that this fails only if that bound and the suffixes here drift apart. */
static void join_or_die(int ctl, char *buf, size_t size, const char *dir, const char *suffix)
{
    if (strfmt(buf, size, "%s%s", dir, suffix) < 0)
        control_die(ctl, errno, "path %s%s", dir, suffix);
}

static void mount_or_die(int ctl, const char *src, const char *target, const char *type,
                         unsigned long flags, const char *data)
{
    if (mount(src, target, type, flags, data) < 0)
        control_die(ctl, errno, "mount %s on %s (%s)", src ? src : "none", target,
                    type ? type : "bind");
}

/* Mounts the overlay on stage/root. The options name the layers by a descriptor and by paths
 * relative to the stage, because /proc/self/mountinfo shows them to the sandbox as given: the
 * host's paths to its state directory are none of its business. Leaves the cwd in the stage. */
static void mount_overlay(int ctl, const char *lower, int stage)
{
    int lower_fd = open(lower, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (lower_fd < 0)
        control_die(ctl, errno, "open %s", lower);
    if (fchdir(stage) < 0)
        control_die(ctl, errno, "enter the stage directory");
    char opts[128]; /* 72 bytes with the longest int */
    /* userxattr: overlay in a user namespace keeps its metadata in user.* xattrs. */
    snprintf(opts, sizeof opts, "lowerdir=/proc/self/fd/%d,upperdir=upper,workdir=work,userxattr",
             lower_fd);
    mount_or_die(ctl, "overlay", "root", "overlay", MS_NOSUID | MS_NODEV, opts);
    close(lower_fd);
}

/* /usr is the host's, bound read-only (nosuid, nodev) rather than overlaid: every sandbox then
 * shares the host's warm dentry cache, where a fresh overlay makes each lookup build its own
 * (about a millisecond per Python start). Writes to /usr fail with EROFS, plainly. */
static void bind_usr(int ctl, const char *host_usr, const char *target)
{
    mount_or_die(ctl, host_usr, target, NULL, MS_BIND | MS_REC, NULL);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (syscall(SYS_mount_setattr, AT_FDCWD, target, AT_RECURSIVE, &attr, sizeof attr) < 0)
        control_die(ctl, errno, "make %s read-only", target);
}

/* Binds the host's tree at src onto the object target_fd names (through /proc/self/fd: the
 * host's /proc is still ours before the pivot, and mount(2) resolves the magic link to exactly
 * the object we opened), then makes the new mount read-only, found as parent/leaf: a lookup of
 * one component from a directory we hold, which crosses into the mount just made. */
static void bind_read_only_onto(int ctl, const char *src, int target_fd, int parent,
                                const char *leaf, const char *what)
{
    char target[32]; /* "/proc/self/fd/" and an int: 25 bytes at most */
    snprintf(target, sizeof target, "/proc/self/fd/%d", target_fd);
    if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
        control_die(ctl, errno, "bind %s", what);
    int mounted = openat(parent, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    /* mount_setattr changes the whole subtree at once and keeps the flags the host locked. */
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (mounted < 0 || syscall(SYS_mount_setattr, mounted, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                               sizeof attr) < 0)
        control_die(ctl, errno, "make %s read-only", what);
    close(mounted);
}

/* The target is the caller's path inside the sandbox: resolved beneath the new root only (the
 * template's own /dev/fd is an absolute link to /proc/self/fd, which before the pivot is the
 * host's), its missing parents made on the way, and never a symlink itself. */
static void bind_read_only(int ctl, int root_fd, const struct jail_mount *m)
{
    struct stat st;
    if (stat(m->host_path, &st) < 0)
        control_die(ctl, errno, "bind source %s (it must be reachable by unprivileged users)",
                    m->host_path);
    const char *leaf;
    int parent = inroot_open_parent(root_fd, m->sandbox_path, 0, &leaf);
    if (parent < 0)
        control_die(ctl, errno, "bind target %s", m->sandbox_path);
    int rc = S_ISDIR(st.st_mode) ? mkdirat(parent, leaf, 0755)
                                 : mknodat(parent, leaf, S_IFREG | 0644, 0);
    if (rc < 0 && errno != EEXIST)
        control_die(ctl, errno, "bind target %s", m->sandbox_path);
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    int target = (int)syscall(SYS_openat2, parent, leaf, &how, sizeof how);
    struct stat tst;
    if (target < 0 || fstat(target, &tst) < 0)
        control_die(ctl, errno, "bind target %s", m->sandbox_path);
    if (S_ISDIR(tst.st_mode) != S_ISDIR(st.st_mode))
        control_die(ctl, S_ISDIR(st.st_mode) ? ENOTDIR : EISDIR, "bind target %s", m->sandbox_path);
    bind_read_only_onto(ctl, m->host_path, target, parent, leaf, m->sandbox_path);
    close(target);
    close(parent);
}

static void setup_dev(int ctl, const struct jail_spec *spec, const char *root)
{
    char path[PATH_MAX];
    /* No mknod in a user namespace: the host's harmless character devices are bound onto the
     * template's empty files (template.c). */
    static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        char host[16]; /* "/dev/urandom", the longest */
        snprintf(host, sizeof host, "/dev/%s", devices[i]);
        join_or_die(ctl, path, sizeof path, root, host);
        mount_or_die(ctl, host, path, NULL, MS_BIND, NULL);
    }
    /* A private devpts instance: the sandbox sees only its own ptys, never the host's. The ptys
     * of every instance but the host's come from one pool (kernel.pty.max minus pty.reserve):
     * max= is this sandbox's share of it, so that one sandbox cannot take them all. */
    char opts[96]; /* 60 bytes with the longest number */
    snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620,max=%llu",
             (unsigned long long)(spec->limits.ptys ? spec->limits.ptys : JAIL_DEFAULT_PTYS));
    join_or_die(ctl, path, sizeof path, root, "/dev/pts");
    mount_or_die(ctl, "devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, opts);
}

/* The kernel's boot id is the host's, the same in every sandbox and for as long as the host
 * runs: it would tell one sandbox's code which others share its host, and it would survive a
 * sandbox's reboot (a resume without memory), which must show a new one. So each start writes a
 * random one (a version 4 uuid, as the kernel formats its own) on the stage tmpfs, outside
 * anything the sandbox sees, and binds it read-only over the kernel's file. Nothing inside can
 * uncover the host's: the bind is read-only (EROFS even for sandbox root), and umount needs
 * CAP_SYS_ADMIN, which no process of the sandbox keeps, and is refused by seccomp besides. */
static void setup_boot_id(int ctl, const char *stage, const char *proc)
{
    char target[PATH_MAX], source[PATH_MAX];
    join_or_die(ctl, target, sizeof target, proc, "/sys/kernel/random/boot_id");
    if (access(target, F_OK) < 0)
        return; /* a kernel without it has nothing to hide */
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        control_die(ctl, errno, "getrandom for the boot id");
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    char id[40];
    int n = snprintf(id, sizeof id,
                     "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0],
                     b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                     b[13], b[14], b[15]);
    join_or_die(ctl, source, sizeof source, stage, "/boot_id");
    int fd = open(source, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0 || fd_write_all(fd, id, (size_t)n) < 0)
        control_die(ctl, errno, "write the boot id");
    close(fd);
    mount_or_die(ctl, source, target, NULL, MS_BIND, NULL);
    mount_or_die(ctl, NULL, target, NULL,
                 MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static void setup_proc(int ctl, const char *stage, const char *root)
{
    char proc[PATH_MAX], path[PATH_MAX];
    join_or_die(ctl, proc, sizeof proc, root, "/proc");
    /* Mounted by pid 1 of the new pid namespace, so it shows only the sandbox's processes. */
    mount_or_die(ctl, "proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    /* Kernel knobs stay readable but not writable, even for sandbox root. */
    static const char *const read_only[] = {"/sys", "/sysrq-trigger", "/irq", "/bus"};
    for (size_t i = 0; i < sizeof read_only / sizeof read_only[0]; i++) {
        join_or_die(ctl, path, sizeof path, proc, read_only[i]);
        if (access(path, F_OK) < 0)
            continue;
        mount_or_die(ctl, path, path, NULL, MS_BIND | MS_REC, NULL);
        mount_or_die(ctl, NULL, path, NULL,
                     MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    }
    /* After /proc/sys is read-only: the bind goes on top of that mount. */
    setup_boot_id(ctl, stage, proc);
}

static void pivot_into(int ctl, const char *root)
{
    if (chdir(root) < 0)
        control_die(ctl, errno, "chdir %s", root);
    /* pivot_root(".", "."): the old root ends up stacked under the new one, then is detached.
     * The stage tmpfs goes with it, but the overlays keep their upper layers referenced. */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        control_die(ctl, errno, "pivot_root %s", root);
    if (umount2(".", MNT_DETACH) < 0)
        control_die(ctl, errno, "detach old root");
    if (chdir("/") < 0)
        control_die(ctl, errno, "chdir /");
}

/* The upper layer's own directories, under dirfd/prefix ("upper" for `upper/tmp` and so on). */
static void make_upper_dirs(int ctl, int dirfd, const char *prefix, uid_t payload_uid)
{
    for (size_t i = 0; i < sizeof upper_dirs / sizeof upper_dirs[0]; i++) {
        char path[64]; /* the longest: "disk/root.new/upper/home/user" */
        join_or_die(ctl, path, sizeof path, prefix, upper_dirs[i].path + strlen("upper"));
        int owner = upper_dirs[i].owner;
        make_dir(ctl, dirfd, path, upper_dirs[i].mode,
                 owner == 2   ? payload_uid
                 : owner == 1 ? JAIL_USER_UID
                              : 0);
    }
}

/* A one-shot root: the stage is a tmpfs of the disk size that holds the upper layer, over the
 * template; the host's /usr is bound read-only. */
static void mount_throwaway_root(int ctl, const struct jail_spec *spec, uid_t payload_uid)
{
    char opts[64]; /* 35 bytes with the longest number */
    snprintf(opts, sizeof opts, "mode=0755,size=%llu", (unsigned long long)spec->limits.disk_bytes);
    mount_or_die(ctl, "tmpfs", spec->stage_dir, "tmpfs", MS_NOSUID | MS_NODEV, opts);
    int stage = open(spec->stage_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (stage < 0)
        control_die(ctl, errno, "open %s", spec->stage_dir);
    static const char *const stage_dirs[] = {"upper", "work", "root"};
    for (size_t i = 0; i < sizeof stage_dirs / sizeof stage_dirs[0]; i++)
        make_dir(ctl, stage, stage_dirs[i], 0755, 0);
    make_upper_dirs(ctl, stage, "upper", payload_uid);
    mount_overlay(ctl, spec->template_dir, stage);
    close(stage);

    char usr[PATH_MAX];
    join_or_die(ctl, usr, sizeof usr, spec->stage_dir, "/root/usr");
    bind_usr(ctl, spec->usr_dir, usr);
}

/* The layers of a writable root, in writable_root.h's order. */
enum { LAYER_DISK, LAYER_ROOT, LAYER_USR, LAYER_DPKG };
static const char *const layer_names[] = {"disk", "lower", "usr", "dpkg"};

/* Returns the number of layers; *unmapped gets the JAIL_UNMAPPED_* bits of the lowers that came
 * without an idmap (msg.sig: writable_root.h). */
static size_t receive_layers(int ctl, const struct jail_spec *spec, int *fds, unsigned *unmapped)
{
    struct control_msg msg;
    size_t n;
    int rc = control_recv_fds(ctl, &msg, fds, WRITABLE_ROOT_MAX_LAYERS, &n);
    if (rc <= 0)
        _exit(1); /* the parent gave up; it kills us anyway */
    size_t want = spec->dpkg_dir ? 4 : 3;
    if (msg.type != CONTROL_LAYERS || (size_t)msg.code != n || n != want) {
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
        control_die(ctl, EPROTO, "expected the writable root's %zu layers", want);
    }
    *unmapped = (unsigned)msg.sig;
    return n;
}

/* The disk layer's own directories: DISK/root, DISK/usr, DISK/dpkg, each with upper/ and work/.
 * Nothing of the sandbox's reaches this level (it sees the inside of each upper/ only), so what
 * is here was made by us. The root's upper is made whole under a temporary name first, so that a
 * start cut short never leaves a root without its home and /tmp for the next start to take. */
static void prepare_disk(int ctl, int stage, bool dpkg, uid_t payload_uid)
{
    struct stat st;
    if (fstatat(stage, "disk/root", &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            control_die(ctl, errno, "disk layer: stat root");
        make_dir(ctl, stage, "disk/root.new", 0755, 0);
        make_dir(ctl, stage, "disk/root.new/upper", 0755, 0);
        make_dir(ctl, stage, "disk/root.new/work", 0755, 0);
        make_upper_dirs(ctl, stage, "disk/root.new/upper", payload_uid);
        if (renameat(stage, "disk/root.new", stage, "disk/root") < 0)
            control_die(ctl, errno, "disk layer: rename root.new to root");
    }
    static const char *const dirs[] = {"disk/usr",  "disk/usr/upper",  "disk/usr/work",
                                       "disk/dpkg", "disk/dpkg/upper", "disk/dpkg/work"};
    for (size_t i = 0; i < (dpkg ? 6 : 3); i++)
        make_dir(ctl, stage, dirs[i], 0755, 0);
}

/* The root's mount points, before anything is mounted on them: the disk layer is the sandbox's
 * to change, and a link left there in an earlier life (/dev moved away and replaced by a link to
 * "/", say) would send a mount made by path out of the new root, into the host's tree as this
 * namespace sees it. So each is looked up without following any link, and made if missing. */
static void check_mount_targets(int ctl, int root_fd)
{
    for (size_t i = 0; i < sizeof mount_targets / sizeof mount_targets[0]; i++) {
        const struct mount_target *t = &mount_targets[i];
        struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
        int fd = (int)syscall(SYS_openat2, root_fd, t->path, &how, sizeof how);
        if (fd < 0 && errno == ENOENT) {
            int rc = t->dir ? mkdirat(root_fd, t->path, 0755)
                            : mknodat(root_fd, t->path, S_IFREG | 0666, 0);
            if (rc < 0 && errno != EEXIST)
                control_die(ctl, errno, "writable root: make /%s", t->path);
            fd = (int)syscall(SYS_openat2, root_fd, t->path, &how, sizeof how);
        }
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
            control_die(ctl, errno, "writable root: /%s", t->path);
        close(fd);
        /* O_PATH | O_NOFOLLOW opens a link itself; a link on the way fails with ELOOP above. */
        if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode) != t->dir)
            control_die(ctl, 0, "writable root: /%s must be a %s, not a %s", t->path,
                        t->dir ? "directory" : "file",
                        S_ISLNK(st.st_mode) ? "link"
                        : t->dir            ? "file"
                                            : "directory");
    }
}

/* Under a lower shown without an idmap, sandbox root may not copy a directory up (its owner is
 * nobody inside), so the caller's mount points there could not be made in the overlay. Their
 * parent directories are made in the upper layer instead, before the overlay is mounted: each
 * then merges with the lower's, owned by sandbox root. upper is the upper/ directory under the
 * stage; prefix is where its overlay goes ("/usr"; "" for the root, which takes every mount point
 * outside skip). Resolved inside upper/ only, which the sandbox may have changed in an earlier
 * life: where it removed one of those directories (a daemon without sudo or the kernels then),
 * the whiteout it left becomes an empty opaque directory, and the boot goes on. */
static void make_mount_parents(int ctl, const struct jail_spec *spec, int stage, const char *upper,
                               const char *prefix, const char *skip)
{
    int upper_fd = openat(stage, upper, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (upper_fd < 0)
        control_die(ctl, errno, "disk layer: open %s", upper);
    size_t plen = strlen(prefix), slen = strlen(skip);
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const char *path = spec->mounts[i].sandbox_path, *leaf;
        if (strncmp(path, prefix, plen) != 0 || path[plen] != '/' ||
            (slen && strncmp(path, skip, slen) == 0 && path[slen] == '/'))
            continue;
        int parent = inroot_open_parent_upper(upper_fd, path + plen, RESOLVE_NO_XDEV, &leaf);
        if (parent < 0)
            control_die(ctl, errno, "disk layer: make the parents of %s", path);
        close(parent);
    }
    close(upper_fd);
}

/* Mounts an overlay of lower (a directory of the stage) with upper/ and work/ of the disk
 * layer's upper_dir onto the directory target_fd. cwd is the stage. */
static void mount_layer(int ctl, int target_fd, const char *lower, const char *upper_dir)
{
    /* lower and upper_dir are layer_names and "root", "usr", "dpkg": 72 bytes at most. */
    char opts[160], target[32];
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=disk/%s/upper,workdir=disk/%s/work,userxattr",
             lower, upper_dir, upper_dir);
    snprintf(target, sizeof target, "/proc/self/fd/%d", target_fd);
    mount_or_die(ctl, "overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts);
}

/* A writable root (writable_root.h): the layers arrive from the parent as detached mounts and
 * are attached on the stage, a small tmpfs; each lower gets an overlay with its upper on the disk
 * layer. Then the layers leave the namespace again: the overlays hold private copies of their
 * mounts, so after this nothing in here, not even our own code, can reach an idmapped view of a
 * host tree except through an overlay, which writes only to its upper layer. */
static void mount_writable_root(int ctl, const struct jail_spec *spec, uid_t payload_uid)
{
    mount_or_die(ctl, "tmpfs", spec->stage_dir, "tmpfs", MS_NOSUID | MS_NODEV,
                 "mode=0755,size=64k");
    int stage = open(spec->stage_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (stage < 0 || fchdir(stage) < 0)
        control_die(ctl, errno, "open %s", spec->stage_dir);
    make_dir(ctl, stage, "root", 0755, 0);
    int fds[WRITABLE_ROOT_MAX_LAYERS];
    unsigned unmapped;
    size_t n = receive_layers(ctl, spec, fds, &unmapped);
    for (size_t i = 0; i < n; i++) {
        make_dir(ctl, stage, layer_names[i], 0755, 0);
        if (idmap_attach(fds[i], stage, layer_names[i]) < 0)
            control_die(ctl, errno, "attach the writable root's %s layer", layer_names[i]);
        close(fds[i]);
    }
    prepare_disk(ctl, stage, n > LAYER_DPKG, payload_uid);
    if (unmapped & JAIL_UNMAPPED_TEMPLATE)
        make_mount_parents(ctl, spec, stage, "disk/root/upper", "", "/usr");
    if (unmapped & JAIL_UNMAPPED_USR)
        make_mount_parents(ctl, spec, stage, "disk/usr/upper", "/usr", "");
    int root_fd = open("root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        control_die(ctl, errno, "open the stage's root");
    mount_layer(ctl, root_fd, layer_names[LAYER_ROOT], "root");
    close(root_fd);
    /* The overlay, not the directory under it. */
    root_fd = open("root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        control_die(ctl, errno, "open the writable root");
    check_mount_targets(ctl, root_fd);
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
    int usr = (int)syscall(SYS_openat2, root_fd, "usr", &how, sizeof how);
    if (usr < 0)
        control_die(ctl, errno, "writable root: open /usr");
    mount_layer(ctl, usr, layer_names[LAYER_USR], "usr");
    close(usr);
    if (n > LAYER_DPKG) {
        /* Made where the root's own links lead, but never out of it. */
        const char *leaf;
        int parent = inroot_open_parent(root_fd, "/var/lib/dpkg", 0, &leaf);
        if (parent < 0 || (mkdirat(parent, leaf, 0755) < 0 && errno != EEXIST))
            control_die(ctl, errno, "writable root: make /var/lib/dpkg");
        int dpkg = (int)syscall(SYS_openat2, parent, leaf, &how, sizeof how);
        if (dpkg < 0)
            control_die(ctl, errno, "writable root: open /var/lib/dpkg");
        mount_layer(ctl, dpkg, layer_names[LAYER_DPKG], "dpkg");
        close(dpkg);
        close(parent);
    }
    close(root_fd);
    for (size_t i = 0; i < n; i++)
        if (umount2(layer_names[i], MNT_DETACH) < 0)
            control_die(ctl, errno, "detach the writable root's %s layer", layer_names[i]);
    close(stage);
}

int rootfs_enter(int ctl, const struct jail_spec *spec)
{
    /* First mount call: nothing we do from here on may propagate back to the host. */
    mount_or_die(ctl, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    /* Sandbox root has no capabilities, so /output must be its own when it runs as root. */
    uid_t payload_uid = spec->as_root ? 0 : JAIL_USER_UID;
    if (spec->writable_root)
        mount_writable_root(ctl, spec, payload_uid);
    else
        mount_throwaway_root(ctl, spec, payload_uid);

    char root[PATH_MAX];
    join_or_die(ctl, root, sizeof root, spec->stage_dir, "/root");
    if (spec->n_mounts > 0) {
        int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
            control_die(ctl, errno, "open %s", root);
        for (size_t i = 0; i < spec->n_mounts; i++)
            bind_read_only(ctl, root_fd, &spec->mounts[i]);
        close(root_fd);
    }
    setup_dev(ctl, spec, root);
    setup_proc(ctl, spec->stage_dir, root);

    int output = -1;
    if (spec->output_dir) {
        char path[PATH_MAX];
        join_or_die(ctl, path, sizeof path, root, JAIL_OUTPUT_DIR);
        output = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (output < 0)
            control_die(ctl, errno, "open %s", path);
    }
    pivot_into(ctl, root);
    return output;
}

/* Copies from, to its end, into out. Small files (code, most inputs) take a read, a write and
 * the read that sees the end: sendfile's internal pipe costs more than that. Once a read fills
 * the buffer, the rest goes by sendfile. */
static void copy_fd(int ctl, int from, int out, const char *what)
{
    char buf[64 * 1024];
    for (;;) {
        ssize_t n = read(from, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n > 0 && fd_write_all(out, buf, (size_t)n) < 0))
            control_die(ctl, errno, "copy into %s", what);
        if (n == 0)
            return;
        if ((size_t)n == sizeof buf)
            break;
    }
    for (;;) {
        ssize_t n = sendfile(out, from, NULL, 1 << 20);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            control_die(ctl, errno, "copy into %s", what);
        if (n == 0)
            return;
    }
}

void rootfs_copy_files(int ctl, const struct jail_spec *spec, uid_t uid)
{
    if (spec->n_files == 0)
        return;
    int root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        control_die(ctl, errno, "open /");
    for (size_t i = 0; i < spec->n_files; i++) {
        const struct jail_file *f = &spec->files[i];
        /* Only into the sandbox's own filesystem (RESOLVE_NO_XDEV): not /proc, where a file's
         * bytes would be written into kernel knobs of the sandbox's init, not /dev, /usr or a
         * bind mount. Nothing of the sandbox's has run yet, so the tree holds only what the
         * template put there; the last component is never followed. */
        const char *leaf;
        int parent = inroot_open_parent(root_fd, f->sandbox_path, RESOLVE_NO_XDEV, &leaf);
        if (parent < 0 && errno == EXDEV)
            control_die(ctl, errno,
                        "copy to %s: only the sandbox's own filesystem takes files (not "
                        "/proc, /dev, /usr or a bind mount)",
                        f->sandbox_path);
        if (parent < 0)
            control_die(ctl, errno, "create %s", f->sandbox_path);
        int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC;
        int out = openat(parent, leaf, flags | O_EXCL, f->mode & 07777);
        /* A file the template already has keeps its own mode unless we set ours */
        bool existed = out < 0 && errno == EEXIST;
        if (existed)
            out = openat(parent, leaf, flags, f->mode & 07777);
        /* The template's own files and directories belong to the host's root, which has no
         * uid in here: say where a file can go instead of only "Permission denied". */
        if (out < 0 && errno == EACCES)
            control_die(ctl, errno,
                        "create %s: the base template's files and directories cannot be "
                        "written; copy into /tmp, /home/user or a new directory",
                        f->sandbox_path);
        if (out < 0)
            control_die(ctl, errno, "create %s", f->sandbox_path);
        close(parent);
        if (lseek(f->host_fd, 0, SEEK_SET) < 0 && errno != ESPIPE)
            control_die(ctl, errno, "rewind source of %s", f->sandbox_path);
        copy_fd(ctl, f->host_fd, out, f->sandbox_path);
        /* A new file got its mode at creation, under umask 022 (jail_child_main): only a
         * group- or other-writable one, or one that existed, needs it set again. */
        bool set_mode = existed || (f->mode & 022);
        if (fchown(out, uid, uid) < 0 || (set_mode && fchmod(out, f->mode & 07777) < 0))
            control_die(ctl, errno, "set owner of %s", f->sandbox_path);
        close(out);
    }
    close(root_fd);
}
