#include "jail/inroot.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int inroot_open(int root_fd, const char *path, int flags, unsigned long long extra_resolve)
{
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_CLOEXEC),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | extra_resolve,
    };
    return (int)syscall(SYS_openat2, root_fd, path, &how, sizeof how);
}

int inroot_open_parent(int root_fd, const char *path, unsigned long long extra_resolve,
                       const char **leaf)
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
