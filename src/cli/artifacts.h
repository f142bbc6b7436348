/* Artifacts: what the program left in /output, copied to a host directory after it ended.
 * The source is the sandbox's own tree, so it is read as hostile: one component at a time with
 * O_NOFOLLOW, regular files and directories only, bounded in entries, bytes and depth. The
 * destination is the caller's: nothing that exists there is replaced, modified or followed. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

/* Every entry the copy sees counts, whatever its type and whether it is copied or skipped. */
#define ARTIFACTS_MAX_ENTRIES 1000
#define ARTIFACTS_MAX_DEPTH   16
/* What each entry costs against the size limit, on top of a file's bytes: on the host it is a
 * name and an inode, and a directory is a block, so empty entries are not free. */
#define ARTIFACTS_ENTRY_COST 4096

struct artifacts_result {
    json_t *files;     /* array of {"path", "size"} */
    uint64_t bytes;    /* file bytes copied */
    bool truncated;    /* a cap was reached: the walk stopped there, or a file was cut */
    unsigned skipped;  /* entries that were neither regular files nor directories */
    unsigned existing; /* not copied: the name was already taken in the destination */
};

/* Copies the tree under src_dirfd into dest_dir (created if missing). Returns 0 or -1 (a host-side
 * failure, such as an unwritable dest_dir). */
int artifacts_copy(int src_dirfd, const char *dest_dir, uint64_t limit,
                   struct artifacts_result *out, err_t *err);
