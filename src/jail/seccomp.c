/* Seccomp profiles, compiled with libseccomp in the parent and installed in the child.
 *
 * Both profiles allow by default: the namespaces carry the main isolation, and the filter takes
 * away the kernel attack surface a sandbox never needs (isolation-anchors.md §3, "Recommended
 * default for us"). The filter is built for the native architecture only; any other audit arch
 * (i386 through int $0x80) and x32 (syscall numbers with bit 30 set) kill the whole process,
 * because every rule below is written against x86_64 numbers and argument layouts, so another ABI
 * would slip past them.
 *
 * DEFAULT
 *   EPERM:  unshare setns mount umount umount2 pivot_root chroot
 *           keyctl add_key request_key  bpf perf_event_open userfaultfd
 *           kexec_load kexec_file_load init_module finit_module delete_module
 *           open_by_handle_at name_to_handle_at lookup_dcookie
 *           ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd
 *           mbind set_mempolicy get_mempolicy migrate_pages move_pages
 *           syslog acct quotactl swapon swapoff reboot
 *           settimeofday clock_settime clock_adjtime adjtimex
 *           iopl ioperm modify_ldt vm86 vm86old uselib ustat sysfs _sysctl nfsservctl vhangup
 *           fanotify_init
 *           (umount, vm86 and vm86old do not exist on x86_64 and are skipped)
 *   EPERM:  clone with any namespace flag (0x7E020000); unshare and clone3 are refused whole.
 *   EPERM:  personality other than 0, 0x8, 0x20000, 0x20008 and 0xffffffff (query).
 *   EPERM:  ioctl TIOCSTI and TIOCLINUX, compared on the low 32 bits of the command because the
 *           kernel truncates it (CVE-2019-10063: a 64-bit compare is bypassed by high bits).
 *   ENOSYS: clone3 (its flags live in memory, out of a filter's reach; ENOSYS makes libc fall back
 *           to clone, which we can filter), io_uring_setup/enter/register (io_uring performs
 *           operations without syscalls, so it bypasses this filter), Linux AIO (io_setup and
 *           the rest: its contexts count against fs.aio-max-nr, one host-wide counter), and the
 *           new mount API:
 *           open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr.
 *   EAFNOSUPPORT: socket with a family other than AF_UNIX, AF_INET, AF_INET6 (no netlink, packet,
 *           vsock, alg, ...: each family is its own body of kernel code); socketpair with a family
 *           other than AF_UNIX.
 *
 * STRICT = DEFAULT plus, for untrusted one-shot code:
 *   socket with any family but AF_UNIX -> EAFNOSUPPORT: one-shot sandboxes have no
 *           network anyway, so the whole IP stack is surface without use.
 *   mknod/mknodat of a character or block device -> EPERM: a device node is a way around the
 *           minimal /dev. FIFOs, sockets and plain files stay allowed (mkfifo is ordinary).
 *   chmod/fchmod/fchmodat/fchmodat2 setting S_ISUID or S_ISGID -> EPERM: no_new_privs makes
 *           set-id bits inert inside, but a set-id file left in the sandbox's upper layer could
 *           be run later by something on the host without it. Creating a file with those bits
 *           (open(O_CREAT), mkdir) is not covered: open's mode argument is garbage without O_CREAT
 *           and cannot be filtered without refusing ordinary opens.
 *   memfd_secret -> EPERM: removes pages from the kernel direct map, a rarely used path.
 *   personality other than 0 and 0xffffffff -> EPERM: 32-bit emulation personalities are not
 *           needed by one-shot code.
 *
 * Syscalls that libseccomp has no number for on this arch are skipped, not errors: a filter
 * cannot see a call that does not exist. Syscalls newer than libseccomp 2.5.4's table (e.g.
 * open_tree_attr, kernel 6.15) are not filtered.
 */
#include "jail/seccomp.h"

#include <assert.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"

struct syscall_entry {
    const char *name;
    int nr; /* negative: libseccomp's pseudo number, the call does not exist on this arch */
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* clang-format off */
#define SYSCALL_ENTRY(name) {#name, SCMP_SYS(name)}

static const struct syscall_entry default_eperm[] = {
    /* namespaces and mounts: the sandbox's view of the world is fixed before exec */
    SYSCALL_ENTRY(unshare), SYSCALL_ENTRY(setns), SYSCALL_ENTRY(mount), SYSCALL_ENTRY(umount),
    SYSCALL_ENTRY(umount2), SYSCALL_ENTRY(pivot_root), SYSCALL_ENTRY(chroot),
    /* the kernel keyring: shared kernel state with a long record of bugs */
    SYSCALL_ENTRY(keyctl), SYSCALL_ENTRY(add_key), SYSCALL_ENTRY(request_key),
    /* large, bug-prone kernel subsystems a workload does not need */
    SYSCALL_ENTRY(bpf), SYSCALL_ENTRY(perf_event_open), SYSCALL_ENTRY(userfaultfd),
    /* replacing or extending the kernel */
    SYSCALL_ENTRY(kexec_load), SYSCALL_ENTRY(kexec_file_load), SYSCALL_ENTRY(init_module),
    SYSCALL_ENTRY(finit_module), SYSCALL_ENTRY(delete_module),
    /* file handles reach outside the mount namespace (the "shocker" escape) */
    SYSCALL_ENTRY(open_by_handle_at), SYSCALL_ENTRY(name_to_handle_at),
    SYSCALL_ENTRY(lookup_dcookie),
    /* reading or poking other processes */
    SYSCALL_ENTRY(ptrace), SYSCALL_ENTRY(process_vm_readv), SYSCALL_ENTRY(process_vm_writev),
    SYSCALL_ENTRY(kcmp), SYSCALL_ENTRY(pidfd_getfd),
    /* NUMA policy: host-wide memory placement */
    SYSCALL_ENTRY(mbind), SYSCALL_ENTRY(set_mempolicy), SYSCALL_ENTRY(get_mempolicy),
    SYSCALL_ENTRY(migrate_pages), SYSCALL_ENTRY(move_pages),
    /* host administration: log, accounting, quotas, swap, power, clocks */
    SYSCALL_ENTRY(syslog), SYSCALL_ENTRY(acct), SYSCALL_ENTRY(quotactl), SYSCALL_ENTRY(swapon),
    SYSCALL_ENTRY(swapoff), SYSCALL_ENTRY(reboot), SYSCALL_ENTRY(settimeofday),
    SYSCALL_ENTRY(clock_settime), SYSCALL_ENTRY(clock_adjtime), SYSCALL_ENTRY(adjtimex),
    /* raw hardware access and obsolete interfaces */
    SYSCALL_ENTRY(iopl), SYSCALL_ENTRY(ioperm), SYSCALL_ENTRY(modify_ldt), SYSCALL_ENTRY(vm86),
    SYSCALL_ENTRY(vm86old), SYSCALL_ENTRY(uselib), SYSCALL_ENTRY(ustat), SYSCALL_ENTRY(sysfs),
    SYSCALL_ENTRY(_sysctl), SYSCALL_ENTRY(nfsservctl), SYSCALL_ENTRY(vhangup),
    SYSCALL_ENTRY(fanotify_init),
};

static const struct syscall_entry default_enosys[] = {
    SYSCALL_ENTRY(clone3),
    SYSCALL_ENTRY(io_uring_setup), SYSCALL_ENTRY(io_uring_enter), SYSCALL_ENTRY(io_uring_register),
    /* Linux AIO: every context counts against fs.aio-max-nr, one counter for the whole host
     * (65536 requests by default), so one sandbox could leave none for the host's databases.
     * glibc's POSIX AIO uses threads, not these. */
    SYSCALL_ENTRY(io_setup), SYSCALL_ENTRY(io_destroy), SYSCALL_ENTRY(io_submit),
    SYSCALL_ENTRY(io_cancel), SYSCALL_ENTRY(io_getevents), SYSCALL_ENTRY(io_pgetevents),
    SYSCALL_ENTRY(open_tree), SYSCALL_ENTRY(move_mount), SYSCALL_ENTRY(fsopen),
    SYSCALL_ENTRY(fsconfig), SYSCALL_ENTRY(fsmount), SYSCALL_ENTRY(fspick),
    SYSCALL_ENTRY(mount_setattr),
};

static const struct syscall_entry strict_eperm[] = {
    SYSCALL_ENTRY(memfd_secret),
};
/* clang-format on */

/* Every namespace flag clone(2) accepts; CLONE_NEWTIME only exists for clone3 and unshare. */
static const uint32_t clone_namespace_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
};
static_assert((CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
               CLONE_NEWPID | CLONE_NEWNET) == 0x7E020000,
              "clone namespace mask");

static void seccomp_ctx_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}
#define cleanup_seccomp_ctx __attribute__((cleanup(seccomp_ctx_releasep)))

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, int nr,
                    unsigned int arg_count, const struct scmp_arg_cmp *args, err_t *err)
{
    if (nr < 0)
        return 0;
    int rc = seccomp_rule_add_array(ctx, action, nr, arg_count, args);
    if (rc < 0)
        return err_set(err, -rc, "seccomp: add rule for %s", name);
    return 0;
}

static int add_rules(scmp_filter_ctx ctx, uint32_t action, const struct syscall_entry *entries,
                     size_t count, err_t *err)
{
    for (size_t i = 0; i < count; i++)
        if (add_rule(ctx, action, entries[i].name, entries[i].nr, 0, NULL, err) < 0)
            return -1;
    return 0;
}

/* One rule per comparison: libseccomp refuses two comparisons on the same argument in a rule. */
static int add_masked_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, int nr,
                           unsigned int arg, uint64_t mask, uint64_t value, err_t *err)
{
    struct scmp_arg_cmp cmp = {
        .arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask, .datum_b = value};
    return add_rule(ctx, action, name, nr, 1, &cmp, err);
}

/* Refuses a socket family outside `allowed` (ascending). Families below the largest allowed one
 * are refused one by one; everything above it with one 64-bit "greater or equal", which also
 * refuses an allowed family carrying garbage in the upper 32 bits (the kernel reads an int).
 * That errs towards refusing, never towards letting a family through. */
static int deny_socket_families(scmp_filter_ctx ctx, const char *name, int nr,
                                const uint32_t *allowed, size_t count, err_t *err)
{
    uint32_t action = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    size_t next = 0;
    for (uint32_t family = 0; family < allowed[count - 1]; family++) {
        if (family == allowed[next]) {
            next++;
            continue;
        }
        struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_EQ, family);
        if (add_rule(ctx, action, name, nr, 1, &cmp, err) < 0)
            return -1;
    }
    struct scmp_arg_cmp above = SCMP_A0(SCMP_CMP_GE, (uint64_t)allowed[count - 1] + 1);
    return add_rule(ctx, action, name, nr, 1, &above, err);
}

/* Refuses every personality except 0xffffffff (a query) and values made only of allowed_bits.
 * The kernel reads the argument as unsigned int, so only the low 32 bits are compared. Without
 * "not equal" on one argument twice, the refused set (some bit outside allowed_bits set, some
 * bit clear) is covered by 32 two-bit masks: "bit c clear, and the next bit above c (wrapping)
 * that is outside allowed_bits set". From any clear bit, walking up through the bits outside
 * allowed_bits must reach a set one, and the step before it is a clear bit: so each refused
 * value matches one mask, and no allowed value matches any. */
static int deny_personality_outside(scmp_filter_ctx ctx, uint32_t allowed_bits, err_t *err)
{
    for (unsigned int clear = 0; clear < 32; clear++) {
        unsigned int set = (clear + 1) % 32;
        while (allowed_bits & (UINT32_C(1) << set))
            set = (set + 1) % 32;
        if (set == clear)
            continue;
        uint64_t set_bit = UINT64_C(1) << set;
        uint64_t mask = set_bit | (UINT64_C(1) << clear);
        if (add_masked_rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", SCMP_SYS(personality), 0,
                            mask, set_bit, err) < 0)
            return -1;
    }
    return 0;
}

static int build_default(scmp_filter_ctx ctx, err_t *err)
{
    uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    if (add_rules(ctx, eperm, default_eperm, ARRAY_LEN(default_eperm), err) < 0 ||
        add_rules(ctx, SCMP_ACT_ERRNO(ENOSYS), default_enosys, ARRAY_LEN(default_enosys), err) < 0)
        return -1;

    /* Each namespace bit is its own rule: the kernel only looks at the low 32 bits of clone's
     * flags, and a single-bit mask ignores the upper half. */
    for (size_t i = 0; i < ARRAY_LEN(clone_namespace_flags); i++)
        if (add_masked_rule(ctx, eperm, "clone", SCMP_SYS(clone), 0, clone_namespace_flags[i],
                            clone_namespace_flags[i], err) < 0)
            return -1;

    /* TIOCSTI pushes input into the terminal the sandbox shares with its caller; TIOCLINUX can
     * do the same on a virtual console. */
    if (add_masked_rule(ctx, eperm, "ioctl", SCMP_SYS(ioctl), 1, 0xffffffff, TIOCSTI, err) < 0 ||
        add_masked_rule(ctx, eperm, "ioctl", SCMP_SYS(ioctl), 1, 0xffffffff, TIOCLINUX, err) < 0)
        return -1;

    /* 0x0008 is PER_LINUX32 and 0x20000 UNAME26: the personalities moby allows. */
    if (deny_personality_outside(ctx, 0x20008, err) < 0)
        return -1;

    static const uint32_t families[] = {AF_UNIX, AF_INET, AF_INET6};
    static const uint32_t pair_families[] = {AF_UNIX};
    if (deny_socket_families(ctx, "socket", SCMP_SYS(socket), families, ARRAY_LEN(families), err) <
            0 ||
        deny_socket_families(ctx, "socketpair", SCMP_SYS(socketpair), pair_families,
                             ARRAY_LEN(pair_families), err) < 0)
        return -1;
    return 0;
}

static int build_strict(scmp_filter_ctx ctx, err_t *err)
{
    uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    if (add_rules(ctx, eperm, strict_eperm, ARRAY_LEN(strict_eperm), err) < 0)
        return -1;

    static const uint32_t families[] = {AF_UNIX};
    if (deny_socket_families(ctx, "socket", SCMP_SYS(socket), families, ARRAY_LEN(families), err) <
        0)
        return -1;

    if (deny_personality_outside(ctx, 0, err) < 0)
        return -1;

    static const uint32_t device_types[] = {S_IFCHR, S_IFBLK};
    for (size_t i = 0; i < ARRAY_LEN(device_types); i++)
        if (add_masked_rule(ctx, eperm, "mknod", SCMP_SYS(mknod), 1, S_IFMT, device_types[i], err) <
                0 ||
            add_masked_rule(ctx, eperm, "mknodat", SCMP_SYS(mknodat), 2, S_IFMT, device_types[i],
                            err) < 0)
            return -1;

    /* fchmodat2 (Linux 6.6) is newer than the kernel headers this is built against, so
     * SCMP_SYS() cannot name it; libseccomp's own table may still know it. */
    const struct {
        const char *name;
        int nr;
        unsigned int mode_arg;
    } chmods[] = {
        {"chmod", SCMP_SYS(chmod), 1},
        {"fchmod", SCMP_SYS(fchmod), 1},
        {"fchmodat", SCMP_SYS(fchmodat), 2},
        {"fchmodat2", seccomp_syscall_resolve_name("fchmodat2"), 2},
    };
    static const uint32_t setid_bits[] = {S_ISUID, S_ISGID};
    for (size_t i = 0; i < ARRAY_LEN(chmods); i++)
        for (size_t b = 0; b < ARRAY_LEN(setid_bits); b++)
            if (add_masked_rule(ctx, eperm, chmods[i].name, chmods[i].nr, chmods[i].mode_arg,
                                setid_bits[b], setid_bits[b], err) < 0)
                return -1;
    return 0;
}

/* Sandbox init, once the payload runs, only reaps (wait4), reports over its control socket
 * (sendmsg) and exits. Anything else kills it, and with it the sandbox: no exec, no open, no
 * signal to anyone. Short, so it also costs little to load on the way to the payload's start. */
static int build_init(scmp_filter_ctx ctx, err_t *err)
{
    static const struct syscall_entry allowed[] = {
        {"wait4", SCMP_SYS(wait4)},
        {"waitid", SCMP_SYS(waitid)},
        {"sendmsg", SCMP_SYS(sendmsg)},
        {"exit", SCMP_SYS(exit)},
        {"exit_group", SCMP_SYS(exit_group)},
        {"rt_sigreturn", SCMP_SYS(rt_sigreturn)},
        {"restart_syscall", SCMP_SYS(restart_syscall)},
        /* the sanitizer build's exit path turns off its alternate signal stack */
        {"sigaltstack", SCMP_SYS(sigaltstack)},
    };
    return add_rules(ctx, SCMP_ACT_ALLOW, allowed, ARRAY_LEN(allowed), err);
}

/* The agent: init's own calls plus what its loop needs (agent.c). Memory calls are there for
 * malloc (a message's buffer) and the sanitizer build's allocator; socketpair, AF_UNIX only, for
 * a files worker's socket (the spawner starts the worker on it). */
static int build_agent(scmp_filter_ctx ctx, err_t *err)
{
    static const struct syscall_entry allowed[] = {
        {"poll", SCMP_SYS(poll)},
        {"ppoll", SCMP_SYS(ppoll)},
        {"accept4", SCMP_SYS(accept4)},
        {"recvmsg", SCMP_SYS(recvmsg)},
        {"recvfrom", SCMP_SYS(recvfrom)},
        {"sendto", SCMP_SYS(sendto)},
        {"read", SCMP_SYS(read)},
        {"write", SCMP_SYS(write)},
        {"close", SCMP_SYS(close)},
        {"fcntl", SCMP_SYS(fcntl)},
        {"ioctl", SCMP_SYS(ioctl)},
        {"kill", SCMP_SYS(kill)},
        {"getpid", SCMP_SYS(getpid)},
        {"rt_sigprocmask", SCMP_SYS(rt_sigprocmask)},
        {"clock_gettime", SCMP_SYS(clock_gettime)},
        {"brk", SCMP_SYS(brk)},
        {"mmap", SCMP_SYS(mmap)},
        {"munmap", SCMP_SYS(munmap)},
        {"mremap", SCMP_SYS(mremap)},
        {"madvise", SCMP_SYS(madvise)},
        {"mprotect", SCMP_SYS(mprotect)},
        {"futex", SCMP_SYS(futex)},
        {"sched_yield", SCMP_SYS(sched_yield)},
        {"getrandom", SCMP_SYS(getrandom)},
    };
    if (build_init(ctx, err) < 0)
        return -1;
    struct scmp_arg_cmp unix_only = SCMP_A0(SCMP_CMP_EQ, AF_UNIX);
    if (add_rule(ctx, SCMP_ACT_ALLOW, "socketpair", SCMP_SYS(socketpair), 1, &unix_only, err) < 0)
        return -1;
    return add_rules(ctx, SCMP_ACT_ALLOW, allowed, ARRAY_LEN(allowed), err);
}

/* A files worker (src/init/files_worker.c): the calls of src/files (its README lists them) on
 * the sandbox's tree and on the worker's own /proc/self/fd, inotify, its socket to init, memory
 * for malloc. Not even a signal to anyone, nor a change of its identity (setfsuid and the rest
 * are absent: the user's worker stays the user). renameat: glibc's renameat2() with no flags.
 * sysinfo: glibc's qsort asks how much memory there is before it sorts a large directory.
 * The xattr calls: metadata (user.e2b.*), read through /proc/self/fd, written on the file's fd. */
static int build_files(scmp_filter_ctx ctx, err_t *err)
{
    /* clang-format off */
    static const struct syscall_entry allowed[] = {
        SYSCALL_ENTRY(openat),        SYSCALL_ENTRY(openat2),         SYSCALL_ENTRY(close),
        SYSCALL_ENTRY(fstat),         SYSCALL_ENTRY(newfstatat),      SYSCALL_ENTRY(statx),
        SYSCALL_ENTRY(fstatfs),       SYSCALL_ENTRY(getdents64),      SYSCALL_ENTRY(readlinkat),
        SYSCALL_ENTRY(mkdirat),       SYSCALL_ENTRY(unlinkat),        SYSCALL_ENTRY(renameat2),
        SYSCALL_ENTRY(renameat),
        SYSCALL_ENTRY(fchown),        SYSCALL_ENTRY(fchmod),          SYSCALL_ENTRY(fcntl),
        SYSCALL_ENTRY(flistxattr),    SYSCALL_ENTRY(fsetxattr),       SYSCALL_ENTRY(fremovexattr),
        SYSCALL_ENTRY(listxattr),     SYSCALL_ENTRY(llistxattr),      SYSCALL_ENTRY(getxattr),
        SYSCALL_ENTRY(lgetxattr),
        SYSCALL_ENTRY(read),          SYSCALL_ENTRY(write),           SYSCALL_ENTRY(inotify_init1),
        SYSCALL_ENTRY(inotify_add_watch), SYSCALL_ENTRY(inotify_rm_watch),
        SYSCALL_ENTRY(poll),          SYSCALL_ENTRY(ppoll),           SYSCALL_ENTRY(recvmsg),
        SYSCALL_ENTRY(recvfrom),      SYSCALL_ENTRY(sendmsg),         SYSCALL_ENTRY(sendto),
        SYSCALL_ENTRY(brk),           SYSCALL_ENTRY(mmap),            SYSCALL_ENTRY(munmap),
        SYSCALL_ENTRY(mremap),        SYSCALL_ENTRY(madvise),         SYSCALL_ENTRY(mprotect),
        SYSCALL_ENTRY(futex),         SYSCALL_ENTRY(sched_yield),     SYSCALL_ENTRY(getrandom),
        SYSCALL_ENTRY(getpid),        SYSCALL_ENTRY(clock_gettime),   SYSCALL_ENTRY(sysinfo),
        SYSCALL_ENTRY(rt_sigprocmask), SYSCALL_ENTRY(rt_sigreturn),   SYSCALL_ENTRY(restart_syscall),
        SYSCALL_ENTRY(sigaltstack),   SYSCALL_ENTRY(exit),            SYSCALL_ENTRY(exit_group),
    };
    /* clang-format on */
    return add_rules(ctx, SCMP_ACT_ALLOW, allowed, ARRAY_LEN(allowed), err);
}

static int seccomp_build(enum seccomp_profile profile, scmp_filter_ctx *out, err_t *err)
{
    if (profile != SECCOMP_PROFILE_DEFAULT && profile != SECCOMP_PROFILE_STRICT &&
        profile != SECCOMP_PROFILE_INIT && profile != SECCOMP_PROFILE_AGENT &&
        profile != SECCOMP_PROFILE_FILES)
        return err_set(err, EINVAL, "seccomp: unknown profile %d", (int)profile);

    bool allow_list = profile == SECCOMP_PROFILE_INIT || profile == SECCOMP_PROFILE_AGENT ||
                      profile == SECCOMP_PROFILE_FILES;
    cleanup_seccomp_ctx scmp_filter_ctx ctx =
        seccomp_init(allow_list ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ALLOW);
    if (!ctx)
        return err_set(err, ENOMEM, "seccomp: seccomp_init");

    int rc;
    /* Raw errno values from libseccomp instead of a blanket ECANCELED. */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1)) < 0)
        return err_set(err, -rc, "seccomp: set SYSRAWRC");
    /* Kill the whole process, not just the thread, on a foreign arch or x32: a half-killed
     * multithreaded program could keep running in a state nobody reasons about. */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
        return err_set(err, -rc, "seccomp: set bad-arch action");
    /* With allow-by-default every permitted syscall walks the filter; a binary tree keeps that
     * to a handful of compares instead of one per listed syscall. */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
        return err_set(err, -rc, "seccomp: set binary-tree optimization");

    if (profile == SECCOMP_PROFILE_AGENT) {
        if (build_agent(ctx, err) < 0)
            return -1;
    } else if (profile == SECCOMP_PROFILE_FILES) {
        if (build_files(ctx, err) < 0)
            return -1;
    } else if (allow_list) {
        if (build_init(ctx, err) < 0)
            return -1;
    } else if (build_default(ctx, err) < 0) {
        return -1;
    }
    if (profile == SECCOMP_PROFILE_STRICT && build_strict(ctx, err) < 0)
        return -1;

    *out = steal_pointer(&ctx);
    return 0;
}

int seccomp_profile_parse(const char *name, enum seccomp_profile *out)
{
    if (!name)
        return -1;
    if (strcmp(name, "default") == 0)
        *out = SECCOMP_PROFILE_DEFAULT;
    else if (strcmp(name, "strict") == 0)
        *out = SECCOMP_PROFILE_STRICT;
    else
        return -1;
    return 0;
}

const char *seccomp_profile_name(enum seccomp_profile profile)
{
    switch (profile) {
    case SECCOMP_PROFILE_DEFAULT:
        return "default";
    case SECCOMP_PROFILE_STRICT:
        return "strict";
    case SECCOMP_PROFILE_INIT:
        return "init";
    case SECCOMP_PROFILE_AGENT:
        return "agent";
    case SECCOMP_PROFILE_FILES:
        return "files";
    }
    return NULL;
}

int seccomp_compile(enum seccomp_profile profile, struct seccomp_program *out, err_t *err)
{
    out->filter = NULL;
    out->len = 0;

    cleanup_seccomp_ctx scmp_filter_ctx ctx = NULL;
    if (seccomp_build(profile, &ctx, err) < 0)
        return -1;

    /* libseccomp 2.5 can only export to an fd: go through an anonymous memory file. */
    cleanup_fd int fd = memfd_create("hutch-seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "seccomp: memfd_create");
    int rc = seccomp_export_bpf(ctx, fd);
    if (rc < 0)
        return err_set(err, -rc, "seccomp: export %s BPF", seccomp_profile_name(profile));

    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_set(err, errno, "seccomp: fstat BPF memfd");
    size_t size = (size_t)st.st_size;
    size_t count = size / sizeof(struct sock_filter);
    if (size == 0 || size % sizeof(struct sock_filter) != 0 || count > BPF_MAXINSNS)
        return err_set(err, EINVAL, "seccomp: %s filter has a bad size (%zu bytes)",
                       seccomp_profile_name(profile), size);

    cleanup_free struct sock_filter *filter = malloc(size);
    if (!filter)
        return err_set(err, ENOMEM, "seccomp: allocate %zu bytes", size);
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, (char *)filter + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, errno, "seccomp: read BPF memfd");
        if (n == 0)
            return err_set(err, EIO, "seccomp: BPF memfd shrank");
        done += (size_t)n;
    }

    out->filter = steal_pointer(&filter);
    out->len = (unsigned short)count;
    return 0;
}

int seccomp_dump_pfc(enum seccomp_profile profile, int fd, err_t *err)
{
    cleanup_seccomp_ctx scmp_filter_ctx ctx = NULL;
    if (seccomp_build(profile, &ctx, err) < 0)
        return -1;
    int rc = seccomp_export_pfc(ctx, fd);
    if (rc < 0)
        return err_set(err, -rc, "seccomp: export %s PFC", seccomp_profile_name(profile));
    return 0;
}

void seccomp_program_free(struct seccomp_program *prog)
{
    if (!prog)
        return;
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}

int seccomp_install(const struct seccomp_program *prog)
{
    if (!prog || !prog->filter || prog->len == 0) {
        errno = EINVAL;
        return -1;
    }
    struct sock_fprog fprog = {.len = prog->len, .filter = prog->filter};
    /* No flags: in particular not SPEC_ALLOW, so the kernel keeps its speculative-store-bypass
     * mitigation on for the sandboxed program. No TSYNC either: the child is single-threaded. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
    /* seccomp(2) appeared in Linux 3.17; the prctl form is older. */
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0);
}
