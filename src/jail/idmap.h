/* Idmapped views of host trees for one sandbox: the files of a host directory, shown through the
 * id map of the sandbox's user namespace, so that what host root owns appears owned by the
 * sandbox's own root. They are the lower layers of a writable root (writable_root.h): overlayfs
 * can then copy them up for sandbox root, while the host's files stay as they are.
 *
 * The parent makes them (only a caller privileged over the host's filesystem may idmap it) as
 * detached mounts, and hands their fds to the child, which attaches them in its own mount
 * namespace (idmap_attach): overlayfs takes a layer only from a mount in the mounter's
 * namespace. A fd over the control channel costs microseconds, where a helper that joins the
 * child's mount namespace with setns costs a fork (about 2 ms measured here). */
#pragma once
#include "util/err.h"
#include <stdbool.h>
#include <sys/types.h>

/* The user namespace of pid, O_CLOEXEC. Its maps must have been written. */
int idmap_userns_open(pid_t pid, err_t *err);
/* A detached mount of the host directory path, read-only, nosuid, nodev, showing file owners
 * through userns_fd's map (host uid N appears as the uid that maps to N inside; host root as the
 * sandbox's root). Only path's own mount is cloned, never its submounts: overlayfs does not
 * cross mounts inside a layer, so they would be invisible anyway, and a submount whose
 * filesystem cannot be idmapped would fail the whole tree. Where path's filesystem cannot be
 * idmapped (EINVAL: 9p, NFS, ...), the clone is made without the map and *unmapped set: inside,
 * what host root owns there is then owned by nobody, so sandbox root can read and run it but not
 * change it. Returns the fd, or -1 with err. */
int idmap_clone(int userns_fd, const char *path, bool *unmapped, err_t *err);
/* Child side: attaches the detached mount tree_fd at the directory dirfd/name, in the caller's
 * mount namespace. Returns 0, or -1 with errno. */
int idmap_attach(int tree_fd, int dirfd, const char *name);
