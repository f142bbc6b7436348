#include "jail/privs.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int set_limit(int resource, rlim_t value)
{
    struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
    return setrlimit(resource, &rl);
}

/* Never above the limit we were given: raising a hard limit needs the host's CAP_SYS_RESOURCE. */
static int set_limit_at_most(int resource, rlim_t value)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) < 0)
        return -1;
    return set_limit(resource, rl.rlim_max < value ? rl.rlim_max : value);
}

int privs_apply_rlimits(const struct jail_limits *limits)
{
    if (set_limit(RLIMIT_CORE, 0) < 0)
        return -1;
    /* Above the caller's own hard limit the parent has set it already (jail_start). */
    if (limits->nofile && set_limit_at_most(RLIMIT_NOFILE, limits->nofile) < 0)
        return -1;
    /* Per-user counters (shares.c): the hard limit cannot be raised again inside. */
    if (set_limit_at_most(RLIMIT_SIGPENDING, JAIL_SIGPENDING) < 0 ||
        set_limit_at_most(RLIMIT_MSGQUEUE, JAIL_MSGQUEUE_BYTES) < 0 ||
        set_limit_at_most(RLIMIT_MEMLOCK, JAIL_MEMLOCK_BYTES) < 0)
        return -1;
    if (limits->fsize_bytes && set_limit(RLIMIT_FSIZE, limits->fsize_bytes) < 0)
        return -1;
    if (limits->cpu_time_ms) {
        /* A backstop only: the supervisor measures the whole cgroup and stops it on time. The
         * kernel limit is per process and whole seconds, so it sits one second above. */
        rlim_t soft = (rlim_t)(limits->cpu_time_ms + 999) / 1000 + 1;
        struct rlimit rl = {.rlim_cur = soft, .rlim_max = soft + 1};
        if (setrlimit(RLIMIT_CPU, &rl) < 0)
            return -1;
    }
    return 0;
}

/* Sets the effective and permitted sets to caps (a mask of CAP_* bits), the inheritable set to
 * caps too when inheritable (ambient ones must be inheritable), else to nothing. */
static int capset_to(uint64_t caps, bool inheritable)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    for (int i = 0; i < 2; i++) {
        data[i].effective = data[i].permitted = (uint32_t)(caps >> (32 * i));
        data[i].inheritable = inheritable ? data[i].effective : 0;
    }
    return (int)syscall(SYS_capset, &hdr, data);
}

int privs_drop(uid_t uid, uint64_t keep_caps, bool die_with_parent)
{
    /* The bounding set needs CAP_SETPCAP, so it goes first, while we still have it. */
    for (int cap = 0; cap <= 63; cap++) {
        if (keep_caps & (1ull << cap))
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
            continue;
        if (errno == EINVAL)
            break; /* past the kernel's last capability */
        return -1;
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    /* Without NOROOT, uid 0 regains a full permitted set at every execve. */
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
        return -1;
    if (setgroups(0, NULL) < 0)
        return -1;
    if (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
        return -1;
    if (capset_to(keep_caps, true) < 0)
        return -1;
    /* NOROOT gives uid 0 nothing at execve, so the kept ones go through as ambient: they stay
     * across execve of any program without file capabilities, and no program gains more. */
    for (int cap = 0; cap <= 63; cap++)
        if ((keep_caps & (1ull << cap)) &&
            prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
            return -1;
    if (die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        return -1;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int privs_drop_caps(void)
{
    return privs_keep_caps(0);
}

int privs_keep_caps(uint64_t keep)
{
    if (capset_to(keep, false) < 0)
        return -1;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int netns_loopback_up(void)
{
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    int rc = ioctl(sock, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(sock, SIOCSIFFLAGS, &ifr);
    }
    int saved = errno;
    close(sock);
    errno = saved;
    return rc;
}
