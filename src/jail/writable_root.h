/* A root filesystem that sandbox root can change (jail_spec.writable_root), from the parent.
 *
 * The layers, in the order they travel in one CONTROL_LAYERS message:
 *   [0] the disk layer's filesystem (disk_layer.h): the upper layers, on disk, capped
 *   [1] the template, idmapped (idmap.h)                  lower of /
 *   [2] usr_dir, idmapped                                  lower of /usr
 *   [3] dpkg_dir, idmapped, only when the spec names one   lower of /var/lib/dpkg
 * The message's code is their number, its sig the JAIL_UNMAPPED_* bits of the lowers sent
 * without an idmap; the child then makes its mount points' parents in their uppers (rootfs.c).
 * The child attaches them in its own mount namespace and mounts one overlay per lower (rootfs.c),
 * each with its upper in the disk layer: DISK/root, DISK/usr, DISK/dpkg, each holding upper/ and
 * work/. Overlays do not share an upper, and overlayfs does not cross mounts inside a layer, so
 * each split-off host tree is an overlay of its own. */
#pragma once
#include "jail/jail.h"
#include <stddef.h>
#include <sys/types.h>

#define WRITABLE_ROOT_MAX_LAYERS 4

/* After the child's maps are written and before it mounts its root (so: after CONTROL_GO and
 * before CONTROL_CGROUPS): makes the layers for the child pid and sends them over ctl. Our own
 * fds are closed again whatever happens; the mounts then live only in the sandbox. Costs about
 * 40 us for the idmaps and 1-2 ms for the disk layer's loop device and ext4 mount (README.md).
 * *unmapped gets a bit for each lower whose filesystem could not be idmapped and was sent without
 * the map (idmap_clone): JAIL_UNMAPPED_TEMPLATE, _USR, _DPKG.
 * Returns 0, or -1 with err (EBUSY: another sandbox holds the disk layer). */
int writable_root_send(int ctl, pid_t pid, const struct jail_spec *spec, unsigned *unmapped,
                       err_t *err);

/* One line for a user saying which lowers in unmapped were sent without the map and what that
 * means inside, into buf (truncated to size). Returns buf. */
const char *writable_root_unmapped_note(unsigned unmapped, char *buf, size_t size);
