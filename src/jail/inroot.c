#include "jail/inroot.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

int inroot_open(int root_fd, const char *path, int flags, unsigned long long extra_resolve)
{
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_CLOEXEC),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | extra_resolve,
    };
    return (int)syscall(SYS_openat2, root_fd, path, &how, sizeof how);
}

/* A whiteout (a 0:0 character device in an overlay's upper layer: the sandbox removed the
 * directory there) at dir/name becomes an opaque directory: made again, empty, and the lower's
 * one stays hidden (overlays mounted with userxattr read user.overlay.opaque). 0 when it was
 * one, -1 (errno) when it was not or could not be replaced. */
static int replace_whiteout(int dir, const char *name)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(0, 0)) {
        errno = ENOTDIR;
        return -1;
    }
    if (unlinkat(dir, name, 0) < 0 || mkdirat(dir, name, 0755) < 0)
        return -1;
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsetxattr(fd, INROOT_OPAQUE_XATTR, "y", 1, 0);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

static int open_parent(int root_fd, const char *path, unsigned long long extra_resolve,
                       bool in_upper, const char **leaf)
{
    size_t len = strlen(path);
    size_t start = len;
    while (start > 0 && path[start - 1] != '/')
        start--;
    const char *last = path + start;
    size_t last_len = len - start;
    if (last_len == 0 || (last_len == 1 && last[0] == '.') ||
        (last_len == 2 && last[0] == '.' && last[1] == '.') || len >= PATH_MAX) {
        errno = EINVAL;
        return -1;
    }
    /* Each prefix is resolved from the root again (not from the previous directory), so that an
     * absolute symlink met on the way means what it means inside the sandbox. Paths are short and
     * this runs once per file or mount: the repeated walk costs nothing that matters. */
    char prefix[PATH_MAX];
    memcpy(prefix, path, start);
    prefix[start] = '\0';
    int dir = inroot_open(root_fd, "/", O_PATH | O_DIRECTORY, extra_resolve);
    for (size_t at = 0; dir >= 0 && at < start;) {
        while (at < start && prefix[at] == '/')
            at++;
        size_t end = at;
        while (end < start && prefix[end] != '/')
            end++;
        if (end == at)
            break;
        char saved = prefix[end];
        prefix[end] = '\0';
        int next = inroot_open(root_fd, prefix, O_PATH | O_DIRECTORY, extra_resolve);
        if (next < 0 && errno == ENOENT) {
            /* mkdirat never follows a last component, and dir is already inside the root. */
            if (mkdirat(dir, prefix + at, 0755) < 0 && errno != EEXIST) {
                int saved_errno = errno;
                close(dir);
                errno = saved_errno;
                return -1;
            }
            next = inroot_open(root_fd, prefix, O_PATH | O_DIRECTORY, extra_resolve);
        } else if (next < 0 && errno == ENOTDIR && in_upper &&
                   replace_whiteout(dir, prefix + at) == 0) {
            next = inroot_open(root_fd, prefix, O_PATH | O_DIRECTORY, extra_resolve);
        }
        prefix[end] = saved;
        int saved_errno = errno;
        close(dir);
        errno = saved_errno;
        dir = next;
        at = end;
    }
    if (dir >= 0)
        *leaf = last;
    return dir;
}

int inroot_open_parent(int root_fd, const char *path, unsigned long long extra_resolve,
                       const char **leaf)
{
    return open_parent(root_fd, path, extra_resolve, false, leaf);
}

int inroot_open_parent_upper(int upper_fd, const char *path, unsigned long long extra_resolve,
                             const char **leaf)
{
    return open_parent(upper_fd, path, extra_resolve, true, leaf);
}
