#include "jail/idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"

int idmap_userns_open(pid_t pid, err_t *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open %s", path);
    return fd;
}

int idmap_clone(int userns_fd, const char *path, bool *unmapped, err_t *err)
{
    /* No AT_RECURSIVE: see idmap.h. */
    cleanup_fd int fd =
        (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open_tree %s", path);
    /* Read-only although overlayfs never writes to a lower layer (and makes its own private
     * copy of the mount read-only): until the child has mounted its overlays, this mount sits
     * in the sandbox's namespace, and a write through it would reach the host's file with the
     * sandbox's root seen as its owner. */
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        .userns_fd = (uint64_t)userns_fd,
    };
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0) {
        *unmapped = false;
        return steal_fd(&fd);
    }
    if (errno != EINVAL)
        return err_set(err, errno, "idmap %s", path);
    /* Its filesystem cannot be idmapped (9p, NFS, FUSE and tmpfs before 6.3, ...): the same
     * clone without the map. Its owners are then unmapped inside (nobody), which only takes
     * away: sandbox root cannot copy such a file up or change it, reading and running it work. */
    attr.attr_set &= ~(uint64_t)MOUNT_ATTR_IDMAP;
    attr.userns_fd = 0;
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
        return err_set(err, errno, "make the clone of %s read-only", path);
    *unmapped = true;
    return steal_fd(&fd);
}

int idmap_attach(int tree_fd, int dirfd, const char *name)
{
    return (int)syscall(SYS_move_mount, tree_fd, "", dirfd, name, MOVE_MOUNT_F_EMPTY_PATH);
}
