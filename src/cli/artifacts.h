/* Artifacts: what the program left in /output, copied to a host directory after it ended.
 * The source is the sandbox's own tree, so it is read as hostile: one component at a time with
 * O_NOFOLLOW, regular files and directories only, bounded in bytes, count and depth. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "util/err.h"

#define ARTIFACTS_MAX_FILES 1000
#define ARTIFACTS_MAX_DEPTH 16

struct artifacts_result {
    json_t *files;  /* array of {"path", "size"} */
    uint64_t bytes; /* copied */
    bool truncated; /* a cap was reached: some files were skipped or cut */
    unsigned skipped; /* entries that were neither regular files nor directories */
};

/* Copies the tree under src_dirfd into dest_dir (created if missing). Returns 0 or -1 (a host-side
 * failure, such as an unwritable dest_dir). */
int artifacts_copy(int src_dirfd, const char *dest_dir, uint64_t limit,
                   struct artifacts_result *out, err_t *err);
