/* Resolution beneath the root: openat2, parents (and mkdir -p), and opening a checked O_PATH fd
 * for real through procfs. */
#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "files/files_internal.h"
#include "util/cleanup.h"

/* A rename or mount during a RESOLVE_IN_ROOT or RESOLVE_BENEATH lookup makes the kernel return
 * EAGAIN rather than risk a ".." that leaves the root; trying again is safe. A sandbox that
 * renames in a tight loop could make every try fail: then the call fails with EAGAIN. */
#define OPENAT2_TRIES 64

int files_openat2(int dir_fd, const char *path, int flags, uint64_t resolve)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .resolve = resolve,
    };
    for (int i = 0;; i++) {
        int fd = (int)syscall(SYS_openat2, dir_fd, path, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN || i + 1 == OPENAT2_TRIES)
            return fd;
    }
}

int files_make_dir_at(int dir_fd, const char *name, const struct files_make *make)
{
    /* mkdirat never follows a final symlink: whatever has this name stays as it is. */
    if (mkdirat(dir_fd, name, 0700) < 0)
        return errno == EEXIST ? 0 : -1;
    /* Made 0700 and root's, then given away: never reachable by the user with the wrong mode.
     * The name is opened again to get an fd; had the sandbox swapped it meanwhile, the fd is
     * still a directory inside the root (O_NOFOLLOW, one component), now given to uid:gid. */
    cleanup_fd int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 ||
        ((make->uid != (uid_t)-1 || make->gid != (gid_t)-1) &&
         fchown(fd, make->uid, make->gid) < 0) ||
        fchmod(fd, make->mode & 07777) < 0) {
        /* Not left behind half made (rmdir takes it only while it is still empty). */
        int saved = errno;
        unlinkat(dir_fd, name, AT_REMOVEDIR);
        errno = saved;
        return -1;
    }
    return 1;
}

/* Makes the missing directories of norm[0..parent_len), component by component. Each prefix is
 * resolved from the root again, not from the directory before it, so that an absolute symlink on
 * the way means what it means in the sandbox (as `mkdir -p` would see it); each lookup is
 * RESOLVE_IN_ROOT, so none can leave the root however the tree changes in between. */
static int make_parents(const char *op, int root_fd, const char *norm, size_t parent_len,
                        const struct files_make *make, err_t *err)
{
    char prefix[PATH_MAX];
    memcpy(prefix, norm, parent_len);
    prefix[parent_len] = '\0';
    cleanup_fd int dir = files_openat2(root_fd, "/", O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    if (dir < 0)
        return err_set(err, errno, "%s " FILES_SHOWN ": open the root", op, norm);
    for (size_t at = 1; at < parent_len;) {
        size_t end = at;
        while (end < parent_len && prefix[end] != '/')
            end++;
        char saved = prefix[end];
        prefix[end] = '\0';
        /* A few rounds: a name that exists but does not lead to a directory (a dangling
         * symlink) stays EEXIST; one that the sandbox keeps swapping gives up. */
        int next = -1, fail = EEXIST;
        for (int round = 0; round < 8; round++) {
            next = files_openat2(root_fd, prefix, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
            if (next >= 0 || errno != ENOENT) {
                fail = errno;
                break;
            }
            if (files_make_dir_at(dir, prefix + at, make) < 0)
                return err_set(err, errno, "%s " FILES_SHOWN ": make " FILES_SHOWN, op, norm,
                               prefix);
        }
        if (next < 0)
            return err_set(err, fail, "%s " FILES_SHOWN ": parent " FILES_SHOWN, op, norm, prefix);
        prefix[end] = saved;
        close(dir);
        dir = next;
        at = end + 1;
    }
    return 0;
}

int files_open_parent(const char *op, int root_fd, const char *norm, const struct files_make *make,
                      const char **leaf, err_t *err)
{
    size_t parent_len;
    const char *last = files_path_leaf(norm, &parent_len);
    char parent[PATH_MAX];
    memcpy(parent, norm, parent_len);
    parent[parent_len] = '\0';
    int fd = files_openat2(root_fd, parent, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    if (fd < 0 && errno == ENOENT && make) {
        if (make_parents(op, root_fd, norm, parent_len, make, err) < 0)
            return -1;
        fd = files_openat2(root_fd, parent, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    }
    if (fd < 0)
        return err_set(err, errno, "%s " FILES_SHOWN ": open its directory", op, norm);
    *leaf = last;
    return fd;
}

static const char *kind_of(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFDIR:
        return "a directory";
    case S_IFLNK:
        return "a symlink";
    case S_IFIFO:
        return "a FIFO";
    case S_IFSOCK:
        return "a socket";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    default:
        return "not a regular file";
    }
}

/* Kernel interfaces that look like files: opening them acts on the opener (init, whose memory
 * and capabilities are not the sandbox user's: /proc/self/mem, /proc/1/environ) or on the
 * kernel. The file API is for data; a command can still `cat /proc/cpuinfo` as its user. */
static bool pseudo_filesystem(unsigned long type)
{
    switch (type) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case BPF_FS_MAGIC:
    case SELINUX_MAGIC:
    case SMACK_MAGIC:
    case EFIVARFS_MAGIC:
    case PSTOREFS_MAGIC:
    case BINFMTFS_MAGIC:
    case DEVPTS_SUPER_MAGIC:
    case NSFS_MAGIC:
    case 0x62656570: /* configfs */
    case 0x65735543: /* fusectl */
        return true;
    default:
        return false;
    }
}

int files_check_regular(const char *op, const char *norm, int fd, const struct stat *st, err_t *err)
{
    if (S_ISDIR(st->st_mode))
        return err_set(err, EISDIR, "%s " FILES_SHOWN, op, norm);
    if (S_ISLNK(st->st_mode))
        return err_set(err, ELOOP, "%s " FILES_SHOWN ": a symlink; not followed", op, norm);
    if (!S_ISREG(st->st_mode))
        return err_set(err, EINVAL, "%s " FILES_SHOWN ": %s, not a regular file; not opened", op,
                       norm, kind_of(st->st_mode));
    struct statfs fs;
    if (fstatfs(fd, &fs) < 0)
        return err_set(err, errno, "%s " FILES_SHOWN ": statfs", op, norm);
    if (pseudo_filesystem((unsigned long)fs.f_type))
        return err_set(err, EPERM, "%s " FILES_SHOWN ": on a kernel pseudo-filesystem (0x%lx)", op,
                       norm, (unsigned long)fs.f_type);
    return 0;
}

int files_proc_fd_dir(const char *op, err_t *err)
{
    /* /proc of the process's own root: in init that is the sandbox's /proc, which the sandbox
     * cannot remount (mount calls are denied to it). Checked anyway: the root of a procfs mount
     * (inode 1), no symlink on the way. */
    cleanup_fd int proc = files_openat2(AT_FDCWD, "/proc", O_PATH | O_DIRECTORY,
                                        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (proc < 0)
        return err_set(err, errno, "%s: open /proc (needed to reopen files safely)", op);
    struct statfs fs;
    struct stat st;
    if (fstatfs(proc, &fs) < 0 || fstat(proc, &st) < 0)
        return err_set(err, errno, "%s: stat /proc", op);
    if (fs.f_type != PROC_SUPER_MAGIC || st.st_ino != 1)
        return err_set(err, ENOTSUP, "%s: /proc is not the root of a procfs mount", op);
    /* "self" is procfs's own symlink to the pid, not a magic link; RESOLVE_NO_XDEV: nothing is
     * mounted over it or over fd/. */
    int dir = files_openat2(proc, "self/fd", O_PATH | O_DIRECTORY,
                            RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS);
    if (dir < 0)
        return err_set(err, errno, "%s: open /proc/self/fd", op);
    return dir;
}

int files_reopen(const char *op, const char *norm, int fd, const struct stat *st, int flags,
                 err_t *err)
{
    cleanup_fd int dir = files_proc_fd_dir(op, err);
    if (dir < 0)
        return -1;
    char name[16];
    snprintf(name, sizeof name, "%d", fd);
    /* /proc/self/fd/N is a magic link to the open file itself: the open reaches the inode the
     * O_PATH fd holds, not a name that could have been swapped since. That inode is a regular
     * file (checked by the caller; a file never changes type), so no FIFO can block this open
     * and no device driver is called. O_NONBLOCK makes a lease that this open would have to
     * break fail at once (EWOULDBLOCK) instead of holding init for lease-break-time. */
    cleanup_fd int file = openat(dir, name, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (file < 0)
        return err_set(err, errno, "%s " FILES_SHOWN, op, norm);
    struct stat now;
    if (fstat(file, &now) < 0)
        return err_set(err, errno, "%s " FILES_SHOWN ": fstat", op, norm);
    if (now.st_dev != st->st_dev || now.st_ino != st->st_ino || !S_ISREG(now.st_mode))
        return err_set(err, EAGAIN, "%s " FILES_SHOWN ": reopened a different file", op, norm);
    int fl = fcntl(file, F_GETFL);
    if (fl < 0 || fcntl(file, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return err_set(err, errno, "%s " FILES_SHOWN ": clear O_NONBLOCK", op, norm);
    return steal_fd(&file);
}
