/* The sandbox's root filesystem, built from inside the child's mount namespace:
 *   stage (tmpfs, size = disk limit)  holds the writable layer: upper/, work/, usr-upper/, ...
 *   /       overlay: template rootfs (read-only lower) + stage/upper
 *   /usr    the host's /usr, bound read-only, nosuid, nodev
 *   /dev    tmpfs with null, zero, full, random, urandom, tty bound from the host, devpts, shm
 *   /proc   fresh proc; sys, sysrq-trigger, irq, bus read-only
 * then pivot_root. Everything lives in the sandbox's mount namespace and the stage tmpfs, so it
 * all disappears with the sandbox, however its supervisor ends. */
#pragma once
#include "jail/jail.h"

/* Builds the tree and pivots into it. Dies over ctl on failure. Returns an fd of /output (opened
 * before the pivot), or -1 if spec->output_dir is false. */
int rootfs_enter(int ctl, const struct jail_spec *spec);
/* After the pivot: copies spec->files in, owned by uid. Dies over ctl on failure. */
void rootfs_copy_files(int ctl, const struct jail_spec *spec, uid_t uid);
