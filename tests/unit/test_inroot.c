/* inroot_open_parent_upper (src/jail/inroot.h): the parents of a mount point made in an overlay's
 * upper layer, where the sandbox may have left whiteouts (0:0 character devices) of directories
 * it removed in an earlier life. A whiteout on the way becomes an empty opaque directory; any
 * other file there (another device, a regular file) fails and is left alone; the plain
 * inroot_open_parent never replaces one; a symlink on the way stays inside the root. Runs as root
 * (mknod), in a fresh temp dir. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "jail/inroot.h"
#include "tap.h"

static int root_fd;

static bool is_whiteout(const char *path)
{
    struct stat st;
    return fstatat(root_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) &&
           st.st_rdev == makedev(0, 0);
}

static bool opaque_dir(const char *path)
{
    struct stat st;
    char v[8] = "";
    int fd = openat(root_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = fgetxattr(fd, INROOT_OPAQUE_XATTR, v, sizeof v - 1);
    bool ok_ = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && n == 1 && v[0] == 'y';
    close(fd);
    return ok_;
}

int main(void)
{
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (mknod of a whiteout)\n");
        return 0;
    }
    char dir[] = "/tmp/hutch-inroot.XXXXXX";
    if (!mkdtemp(dir) || (root_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        printf("1..0 # SKIP no temp dir\n");
        return 0;
    }
    mkdirat(root_fd, "usr", 0755);
    mknodat(root_fd, "usr/local", S_IFCHR | 0000, makedev(0, 0)); /* rm -rf /usr/local, earlier */
    const char *leaf = NULL;

    int fd = inroot_open_parent(root_fd, "/usr/local/bin/sudo", RESOLVE_NO_XDEV, &leaf);
    ok(fd < 0 && errno == ENOTDIR, "the plain walk fails on a whiteout (ENOTDIR)");
    ok(is_whiteout("usr/local"), "... and leaves it");

    fd = inroot_open_parent_upper(root_fd, "/usr/local/bin/sudo", RESOLVE_NO_XDEV, &leaf);
    ok(fd >= 0 && leaf && strcmp(leaf, "sudo") == 0, "the upper's walk opens the parent of sudo");
    if (fd >= 0)
        close(fd);
    ok(opaque_dir("usr/local"), "the whiteout became an opaque directory (%s=y)",
       INROOT_OPAQUE_XATTR);
    struct stat st;
    ok(fstatat(root_fd, "usr/local/bin", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode),
       "the rest of the path was made under it");
    char v[8];
    ok(getxattr(dir, INROOT_OPAQUE_XATTR, v, sizeof v) < 0, "the root itself is not made opaque");

    fd = inroot_open_parent_upper(root_fd, "/usr/local/bin/sudo", RESOLVE_NO_XDEV, &leaf);
    ok(fd >= 0, "a second walk finds it all as made");
    if (fd >= 0)
        close(fd);

    mknodat(root_fd, "null", S_IFCHR | 0600, makedev(1, 3));
    fd = inroot_open_parent_upper(root_fd, "/null/x/y", RESOLVE_NO_XDEV, &leaf);
    ok(fd < 0 && errno == ENOTDIR, "another device on the way fails (ENOTDIR)");
    ok(fstatat(root_fd, "null", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) &&
           st.st_rdev == makedev(1, 3),
       "... and is left alone");

    int f = openat(root_fd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f >= 0)
        close(f);
    fd = inroot_open_parent_upper(root_fd, "/file/x", RESOLVE_NO_XDEV, &leaf);
    ok(fd < 0 && errno == ENOTDIR, "a regular file on the way fails (ENOTDIR)");
    ok(fstatat(root_fd, "file", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode),
       "... and is left alone");

    /* a link out of the root: followed inside it (to ROOT/tmp), never to the host's /tmp */
    mkdirat(root_fd, "tmp", 0755);
    symlinkat("/tmp", root_fd, "out");
    fd = inroot_open_parent_upper(root_fd, "/out/hutch-inroot-made/x", RESOLVE_NO_XDEV, &leaf);
    ok(fd >= 0, "a walk through an absolute symlink succeeds");
    if (fd >= 0)
        close(fd);
    ok(fstatat(root_fd, "tmp/hutch-inroot-made", &st, 0) == 0 && S_ISDIR(st.st_mode) &&
           access("/tmp/hutch-inroot-made", F_OK) < 0,
       "... inside the root, nothing made in the host's /tmp");

    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ok(system(cmd) == 0, "the temp dir is removed");
    printf("1..%d\n", tap_count);
    return tap_failed != 0;
}
