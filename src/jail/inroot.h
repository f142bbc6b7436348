/* Paths that come from the caller (or, later, from a network client), resolved inside a
 * sandbox's root only: beneath a directory fd taken as "/", never through a magic link
 * (/proc/self/fd/N, /proc/N/root, /proc/N/cwd), so no symlink, "..", or descriptor can lead out
 * to the host's tree. Used from inside the sandbox's mount namespace, before and after the pivot.
 * All fds are O_CLOEXEC; every call returns -1 with errno on failure and allocates nothing. */
#pragma once

#include <fcntl.h>
#include <linux/openat2.h>

/* openat2(2) with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | extra_resolve. */
int inroot_open(int root_fd, const char *path, int flags, unsigned long long extra_resolve);
/* Opens the directory that holds the last component of path (absolute or relative, taken from
 * root_fd), making missing directories on the way (mode 0755, owned by the caller's fs ids, as
 * `mkdir -p` would). *leaf points into path at the last component, which must not be empty (a
 * trailing slash), "." or "..". With RESOLVE_NO_XDEV in extra_resolve, no step may cross into
 * another mount. */
int inroot_open_parent(int root_fd, const char *path, unsigned long long extra_resolve,
                       const char **leaf);
/* inroot_open_parent in an overlay's upper layer (upper_fd its directory): a whiteout on the
 * way, a directory the sandbox removed in an earlier life, is replaced by an empty opaque
 * directory (INROOT_OPAQUE_XATTR "y"), so the overlay shows it empty, as the sandbox left it, and
 * not the lower's again. Any other file on the way fails (ENOTDIR), as with inroot_open_parent. */
#define INROOT_OPAQUE_XATTR "user.overlay.opaque"
int inroot_open_parent_upper(int upper_fd, const char *path, unsigned long long extra_resolve,
                             const char **leaf);
