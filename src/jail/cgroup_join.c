/* Joining groups through their "tasks" files, opened before (cgroup_self_attach, cgroup.h): apart
 * from the rest of the cgroup code because it needs none of it, and a process that enters a
 * sandbox from the host links only this (src/jail/enter.c). */
#include <errno.h>
#include <unistd.h>

#include "jail/cgroup.h"

int cgroup_self_attach(const int *fds, size_t n)
{
    int rc = 0, saved = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && write(fds[i], "0", 1) != 1) {
            saved = errno;
            rc = -1;
        }
        close(fds[i]);
    }
    errno = saved;
    return rc;
}
