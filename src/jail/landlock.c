#include "jail/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's headers stop at ABI 2; the kernel may be far newer. The values are kernel ABI. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL               (1ULL << 1)
#endif

/* struct landlock_ruleset_attr as of ABI 6; the kernel takes a prefix of it by size. */
struct ruleset_attr_v6 {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

int landlock_abi_version(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : (int)v;
}

/* Rights each ABI version knows; asking for more than the kernel has is EINVAL. */
static uint64_t fs_rights_for(int abi)
{
    uint64_t r = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                 LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return r;
}

static const uint64_t read_rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                                    LANDLOCK_ACCESS_FS_READ_DIR;

static int allow_beneath(int ruleset, const char *path, uint64_t rights)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct landlock_path_beneath_attr attr = {.allowed_access = rights, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc < 0 ? -1 : 0;
}

int landlock_restrict(void)
{
    return landlock_restrict_for(false);
}

int landlock_restrict_for(bool writable_root)
{
    int abi = landlock_abi_version();
    if (abi <= 0)
        return 0;
    /* Only the rights that change the file system are handled. Reading and executing are
     * allowed everywhere anyway (what the sandbox may read is decided by its mounts and the
     * file modes), and a handled right costs a rule walk up the path on every open: handling
     * reads made each Python start about a millisecond slower for no restriction at all. */
    uint64_t all = fs_rights_for(abi) & ~read_rights;
    struct ruleset_attr_v6 ra = {.handled_access_fs = all};
    size_t size = offsetof(struct ruleset_attr_v6, handled_access_net);
    if (abi >= 6) {
        /* Signals and abstract unix sockets stay within the payload's own domain: init, outside
         * it, can be neither killed nor spoken to. */
        ra.scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
        size = sizeof ra;
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &ra, size, 0);
    if (ruleset < 0)
        return -1;
    /* Changes only where the sandbox's writable places are. Devices under /dev need write
     * (e.g. /dev/null) and ioctl (ptys). */
    static const char *const writable[] = {"/tmp", "/var/tmp", "/home", "/root",
                                           "/output", "/run", "/dev", "/proc"};
    static const char *const everywhere[] = {"/"};
    const char *const *places = writable_root ? everywhere : writable;
    size_t n_places = writable_root ? 1 : sizeof writable / sizeof writable[0];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_places; i++)
        rc = allow_beneath(ruleset, places[i], all);
    if (rc == 0)
        rc = (int)syscall(SYS_landlock_restrict_self, ruleset, 0);
    int saved = errno;
    close(ruleset);
    errno = saved;
    return rc < 0 ? -1 : 0;
}
