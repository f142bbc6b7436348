/* Templates: prepared read-only root filesystems that sandboxes use as their lower layer.
 * `base` is generated from the host, once, under STATE/templates/: a skeleton tree (empty /usr to
 * mount the host's /usr on, the usual merged-/usr symlinks, mount points, /dev's files and links) and a generated /etc
 * (user `user`, uid 1000, home /home/user) plus a short list of non-secret host /etc files that
 * programs need (ld.so.cache, alternatives, localtime, ...). */
#pragma once
#include <limits.h>
#include "util/err.h"

#define TEMPLATE_BASE_VERSION 5

struct template_paths {
    char rootfs[PATH_MAX]; /* the lower layer */
    char stage[PATH_MAX];  /* an empty directory the sandbox mounts its writable layer on */
};

/* Prepares `base` under state_dir if it is missing (concurrent callers wait on a lock; the tree
 * appears atomically by rename), and fills out. */
int template_prepare_base(const char *state_dir, struct template_paths *out, err_t *err);
