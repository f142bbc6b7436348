/* The fds a cgroup handle holds, for a process (the keeper) that closes everything else. */
#include "jail/cgroup_internal.h"

size_t cgroup_held_fds(const struct cgroup *cg, int *out, size_t max)
{
    size_t n = 0;
    const struct cgroup_dir *dirs[1 + CGROUP_V1_COUNT];
    size_t nd = 0;
    dirs[nd++] = &cg->v2;
    for (size_t i = 0; i < cg->v1_count; i++)
        dirs[nd++] = &cg->v1[i];
    for (size_t i = 0; i < nd; i++) {
        int fds[2] = {dirs[i]->parent_fd, dirs[i]->fd};
        for (int j = 0; j < 2; j++)
            if (fds[j] >= 0 && n < max)
                out[n++] = fds[j];
    }
    return n;
}
