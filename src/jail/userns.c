#include "jail/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fileio.h"

int uid_range_acquire(const char *lock_path, struct uid_range *out, err_t *err)
{
    cleanup_fd int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, errno, "open uid slot file %s", lock_path);
    /* Start after the slot this process took last (a daemon's next ranges are then free at
     * once: each taken slot tried costs a walk of the file's whole lock list), else at a
     * pid-derived slot, so that concurrent runs rarely contend for the same byte. Moving on also
     * leaves a released range unused for as long as possible. */
    static unsigned next_start = USERNS_SLOT_COUNT;
    unsigned start =
        next_start < USERNS_SLOT_COUNT ? next_start : (unsigned)getpid() % USERNS_SLOT_COUNT;
    for (unsigned i = 0; i < USERNS_SLOT_COUNT; i++) {
        unsigned slot = (start + i) % USERNS_SLOT_COUNT;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = slot, .l_len = 1};
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
            out->slot = slot;
            next_start = (slot + 1) % USERNS_SLOT_COUNT;
            out->host_base = USERNS_HOST_BASE + slot * 65536u;
            out->lock_fd = steal_fd(&fd);
            return 0;
        }
        if (errno != EAGAIN && errno != EACCES)
            return err_set(err, errno, "lock uid slot %u in %s", slot, lock_path);
    }
    return err_set(err, EBUSY, "all %u uid ranges are in use", USERNS_SLOT_COUNT);
}

void uid_range_release(struct uid_range *range)
{
    if (range->lock_fd >= 0)
        close(range->lock_fd);
    range->lock_fd = -1;
}

int userns_write_maps(pid_t pid, uid_t host_base, uint32_t count, err_t *err)
{
    char dir[64], line[64];
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    cleanup_fd int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return err_set(err, errno, "open %s", dir);
    snprintf(line, sizeof line, "0 %u %u\n", (unsigned)host_base, (unsigned)count);
    /* setgroups stays "allow": the parent is privileged, and the child needs setgroups(0) to shed
     * the host's supplementary groups, which would otherwise still grant access to host files. */
    if (file_write_str_at(dirfd, "gid_map", line, err) < 0 ||
        file_write_str_at(dirfd, "uid_map", line, err) < 0)
        return err_wrap(err, "sandbox pid %d", (int)pid);
    return 0;
}

int userns_become_root(void)
{
    /* Until now the child's ids are the unmapped host ids (shown as 65534) and every file it
     * creates would fail with EOVERFLOW. gid first: after setresuid we could no longer change it.
     */
    if (setresgid(0, 0, 0) < 0)
        return -1;
    if (setgroups(0, NULL) < 0)
        return -1;
    if (setresuid(0, 0, 0) < 0)
        return -1;
    return 0;
}
