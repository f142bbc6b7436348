/* try-syscall: shows, from inside a sandbox, which syscalls its seccomp filter blocks.
 *
 *   try-syscall NAME...    (or "all", or "list" for the names)
 *
 * Prints one line per name: "NAME ok" if the call succeeded, else "NAME errno=ENAME". Exit
 * status 0, or 2 for a name it does not know.
 *
 * Every call is made with arguments the kernel rejects before doing anything (a bad fd, an
 * unmapped pointer, invalid flags or magic), so a call the filter lets through fails with EBADF,
 * EFAULT, EINVAL or similar, while a blocked one fails with the filter's errno (EPERM, ENOSYS,
 * EAFNOSUPPORT). The probe must stay harmless even run as root with no filter at all: that is how
 * the tests show the filter, not the kernel, produced each errno. Where a call has no harmless
 * form it is left out (vhangup would hang up the caller's terminal). Note that without
 * privileges the kernel itself answers EPERM for some of these (pivot_root, fsopen, ...), so
 * EPERM only proves a filter where the same probe run unfiltered says something else.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* Numbers shared by every arch since Linux 5.1, for headers older than the call. */
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_io_uring_enter
#define SYS_io_uring_enter 426
#endif
#ifndef SYS_io_uring_register
#define SYS_io_uring_register 427
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#ifndef SYS_fspick
#define SYS_fspick 433
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

/* Never mapped (below mmap_min_addr): any copy from or to it fails with EFAULT. */
#define WRONG_POINTER ((void *)1)
/* A flag bit no syscall here defines: the call fails with EINVAL before it acts. */
#define BAD_FLAG 0x40000000UL
/* Above SOCK_MAX: socket() checks the family range first, then fails with EINVAL before it
 * creates anything or loads a protocol module. */
#define BAD_SOCK_TYPE            15
#define CLONE_ARGS_SIZE          88 /* struct clone_args as of Linux 5.7 */
#define UFFD_USER_MODE_ONLY_FLAG 1

/* The clone tries carry a flag combination the kernel refuses (CLONE_FS with a new user or
 * mount namespace); should it ever succeed anyway, the new child leaves at once. */
static long clone_refused(unsigned long flags)
{
    long ret = syscall(SYS_clone, flags | CLONE_FS | SIGCHLD, NULL, NULL, NULL, 0);
    if (ret == 0)
        _exit(0);
    return ret;
}

/* A socket that was allowed and created is closed right away. */
static long socket_closed(int family, int type, int protocol)
{
    int fd = socket(family, type, protocol);
    if (fd >= 0)
        close(fd);
    return fd < 0 ? -1 : 0;
}

/* personality() cannot fail on a bad value; if the filter lets it through, put the old one
 * back at once. */
static long personality_restored(unsigned long persona)
{
    int old = personality(0xffffffff);
    long ret = syscall(SYS_personality, persona);
    if (ret >= 0 && old >= 0)
        personality((unsigned long)old);
    return ret;
}

static long try_unshare(void)
{
    /* bit 0 is not a valid unshare flag: EINVAL before anything is unshared */
    return syscall(SYS_unshare, CLONE_NEWUSER | 0x1);
}
static long try_setns(void)
{
    return syscall(SYS_setns, -1, 0);
}
static long try_mount(void)
{
    return syscall(SYS_mount, WRONG_POINTER, WRONG_POINTER, WRONG_POINTER, 0, NULL);
}
static long try_umount2(void)
{
    return syscall(SYS_umount2, WRONG_POINTER, 0);
}
static long try_pivot_root(void)
{
    return syscall(SYS_pivot_root, WRONG_POINTER, WRONG_POINTER);
}
static long try_chroot(void)
{
    return syscall(SYS_chroot, WRONG_POINTER);
}
static long try_keyctl(void)
{
    return syscall(SYS_keyctl, 0x7fffffff, 0, 0, 0, 0); /* no such operation: EOPNOTSUPP */
}
static long try_add_key(void)
{
    return syscall(SYS_add_key, WRONG_POINTER, WRONG_POINTER, NULL, 0, 0);
}
static long try_request_key(void)
{
    return syscall(SYS_request_key, WRONG_POINTER, WRONG_POINTER, NULL, 0);
}
static long try_bpf(void)
{
    return syscall(SYS_bpf, 0x7fffffff, NULL, 0); /* no such command */
}
static long try_perf_event_open(void)
{
    return syscall(SYS_perf_event_open, WRONG_POINTER, 0, -1, -1, 0);
}
static long try_userfaultfd(void)
{
    /* user-mode-only passes the privilege check, the unknown bit then fails it */
    return syscall(SYS_userfaultfd, UFFD_USER_MODE_ONLY_FLAG | BAD_FLAG);
}
static long try_kexec_load(void)
{
    /* an undefined flag and too many segments: nothing is loaded (and loading never reboots) */
    return syscall(SYS_kexec_load, 0, 1000, NULL, 0x80UL);
}
static long try_kexec_file_load(void)
{
    return syscall(SYS_kexec_file_load, -1, -1, 0, NULL, BAD_FLAG);
}
static long try_init_module(void)
{
    return syscall(SYS_init_module, WRONG_POINTER, 0, ""); /* empty image: ENOEXEC */
}
static long try_finit_module(void)
{
    return syscall(SYS_finit_module, -1, "", 0);
}
static long try_delete_module(void)
{
    return syscall(SYS_delete_module, WRONG_POINTER, 0);
}
static long try_open_by_handle_at(void)
{
    return syscall(SYS_open_by_handle_at, -1, WRONG_POINTER, 0);
}
static long try_name_to_handle_at(void)
{
    return syscall(SYS_name_to_handle_at, -1, WRONG_POINTER, WRONG_POINTER, WRONG_POINTER,
                   BAD_FLAG);
}
static long try_lookup_dcookie(void)
{
    return syscall(SYS_lookup_dcookie, 0, WRONG_POINTER, 0);
}
static long try_ptrace(void)
{
    return syscall(SYS_ptrace, PTRACE_PEEKDATA, 0, 0, 0); /* pid 0: ESRCH */
}
static long try_process_vm_readv(void)
{
    return syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 1UL); /* flags must be 0 */
}
static long try_process_vm_writev(void)
{
    return syscall(SYS_process_vm_writev, getpid(), NULL, 0, NULL, 0, 1UL);
}
static long try_kcmp(void)
{
    return syscall(SYS_kcmp, getpid(), getpid(), 0x7fff, 0, 0); /* no such type */
}
static long try_pidfd_getfd(void)
{
    return syscall(SYS_pidfd_getfd, -1, 0, 0);
}
static long try_mbind(void)
{
    return syscall(SYS_mbind, NULL, 0, 99, NULL, 0, 0); /* no such mode */
}
static long try_set_mempolicy(void)
{
    return syscall(SYS_set_mempolicy, 99, NULL, 0);
}
static long try_get_mempolicy(void)
{
    return syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, BAD_FLAG);
}
static long try_migrate_pages(void)
{
    return syscall(SYS_migrate_pages, getpid(), 64, WRONG_POINTER, WRONG_POINTER);
}
static long try_move_pages(void)
{
    return syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, BAD_FLAG);
}
static long try_syslog(void)
{
    return syscall(SYS_syslog, 9999, NULL, 0); /* no such action */
}
static long try_acct(void)
{
    /* NULL would switch accounting off; an unmapped name changes nothing */
    return syscall(SYS_acct, WRONG_POINTER);
}
static long try_quotactl(void)
{
    return syscall(SYS_quotactl, 0xff, WRONG_POINTER, 0, NULL); /* quota type 0xff: EINVAL */
}
static long try_swapon(void)
{
    return syscall(SYS_swapon, WRONG_POINTER, BAD_FLAG);
}
static long try_swapoff(void)
{
    return syscall(SYS_swapoff, WRONG_POINTER);
}
static long try_reboot(void)
{
    /* wrong magic numbers: EINVAL, whatever the command and privileges */
    return syscall(SYS_reboot, 0xdead, 0xbeef, 0, NULL);
}
static long try_settimeofday(void)
{
    return syscall(SYS_settimeofday, WRONG_POINTER, NULL);
}
static long try_clock_settime(void)
{
    return syscall(SYS_clock_settime, CLOCK_REALTIME, WRONG_POINTER);
}
static long try_clock_adjtime(void)
{
    return syscall(SYS_clock_adjtime, CLOCK_REALTIME, WRONG_POINTER);
}
static long try_adjtimex(void)
{
    return syscall(SYS_adjtimex, WRONG_POINTER);
}
static long try_iopl(void)
{
    return syscall(SYS_iopl, 4); /* levels are 0..3 */
}
static long try_ioperm(void)
{
    return syscall(SYS_ioperm, 0, 0, 1); /* empty range */
}
static long try_modify_ldt(void)
{
    /* no such function: ENOSYS. The kernel returns modify_ldt's result cast to unsigned int,
     * so its own errors arrive as large positive numbers; a filter's errno arrives normally. */
    long ret = syscall(SYS_modify_ldt, 99, NULL, 0);
    if (ret > 0 && (int)ret < 0) {
        errno = -(int)ret;
        return -1;
    }
    return ret;
}
static long try_uselib(void)
{
    return syscall(SYS_uselib, WRONG_POINTER);
}
static long try_ustat(void)
{
    return syscall(SYS_ustat, 0, WRONG_POINTER);
}
static long try_sysfs(void)
{
    return syscall(SYS_sysfs, 99, 0, 0);
}
static long try_fanotify_init(void)
{
    return syscall(SYS_fanotify_init, BAD_FLAG, 0);
}
static long try_clone3(void)
{
    return syscall(SYS_clone3, WRONG_POINTER, CLONE_ARGS_SIZE);
}
static long try_clone_newuser(void)
{
    return clone_refused(CLONE_NEWUSER);
}
static long try_clone_newns(void)
{
    return clone_refused(CLONE_NEWNS);
}
static long try_io_uring_setup(void)
{
    return syscall(SYS_io_uring_setup, 1, WRONG_POINTER);
}
static long try_io_uring_enter(void)
{
    return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
}
static long try_io_uring_register(void)
{
    return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
}
static long try_io_setup(void)
{
    return syscall(SYS_io_setup, 1, WRONG_POINTER);
}
static long try_io_submit(void)
{
    return syscall(SYS_io_submit, 0, 0, NULL);
}
static long try_open_tree(void)
{
    return syscall(SYS_open_tree, -1, WRONG_POINTER, BAD_FLAG);
}
static long try_move_mount(void)
{
    return syscall(SYS_move_mount, -1, WRONG_POINTER, -1, WRONG_POINTER, BAD_FLAG);
}
static long try_fsopen(void)
{
    return syscall(SYS_fsopen, WRONG_POINTER, BAD_FLAG);
}
static long try_fsconfig(void)
{
    return syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0);
}
static long try_fsmount(void)
{
    return syscall(SYS_fsmount, -1, BAD_FLAG, 0);
}
static long try_fspick(void)
{
    return syscall(SYS_fspick, -1, WRONG_POINTER, BAD_FLAG);
}
static long try_mount_setattr(void)
{
    return syscall(SYS_mount_setattr, -1, WRONG_POINTER, BAD_FLAG, NULL, 0);
}
static long try_socket_packet(void)
{
    return socket_closed(AF_PACKET, BAD_SOCK_TYPE, 0);
}
static long try_socket_vsock(void)
{
    return socket_closed(AF_VSOCK, BAD_SOCK_TYPE, 0);
}
static long try_socket_netlink(void)
{
    return socket_closed(AF_NETLINK, BAD_SOCK_TYPE, 0);
}
static long try_socket_alg(void)
{
    return socket_closed(AF_ALG, BAD_SOCK_TYPE, 0);
}
static long try_socket_raw(void)
{
    return socket_closed(AF_INET, SOCK_RAW, IPPROTO_ICMP);
}
static long try_socket_inet(void)
{
    return socket_closed(AF_INET, SOCK_STREAM, 0);
}
static long try_socket_inet6(void)
{
    return socket_closed(AF_INET6, SOCK_STREAM, 0);
}
static long try_socket_unix(void)
{
    return socket_closed(AF_UNIX, SOCK_STREAM, 0);
}
static long try_socketpair_inet(void)
{
    return syscall(SYS_socketpair, AF_INET, SOCK_STREAM, 0, WRONG_POINTER);
}
/* The TIOCSTI and TIOCLINUX tries use fd -1 rather than a terminal: an allowed call then fails
 * with EBADF, which nothing else produces, while on a real terminal the kernel can itself
 * answer EPERM or EIO. The filter looks only at the command, so the fd does not matter to it. */
static long try_tiocsti(void)
{
    /* CVE-2019-10063: the kernel reads the command as 32 bits, so a filter comparing all 64
     * is bypassed by setting a high bit */
    return syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI | (1UL << 32), WRONG_POINTER);
}
static long try_tiocsti_plain(void)
{
    return syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI, WRONG_POINTER);
}
static long try_tioclinux(void)
{
    return syscall(SYS_ioctl, -1, (unsigned long)TIOCLINUX, WRONG_POINTER);
}
static long try_personality(void)
{
    return personality_restored(ADDR_NO_RANDOMIZE);
}
static long try_personality_linux32(void)
{
    return personality_restored(PER_LINUX32);
}
static long try_personality_query(void)
{
    return syscall(SYS_personality, 0xffffffffUL);
}
static long try_memfd_secret(void)
{
    return syscall(SYS_memfd_secret, BAD_FLAG);
}
static long try_mknod_device(void)
{
    return syscall(SYS_mknod, WRONG_POINTER, S_IFCHR | 0600, makedev(1, 3));
}
static long try_mknod_fifo(void)
{
    return syscall(SYS_mknodat, AT_FDCWD, WRONG_POINTER, S_IFIFO | 0600, 0);
}
static long try_chmod_setuid(void)
{
    return syscall(SYS_chmod, WRONG_POINTER, 04755);
}
static long try_chmod_plain(void)
{
    return syscall(SYS_chmod, WRONG_POINTER, 0644);
}
static long try_fchmodat2_setuid(void)
{
    return syscall(SYS_fchmodat2, AT_FDCWD, WRONG_POINTER, 04755, 0);
}
static long try_getpid(void)
{
    return syscall(SYS_getpid);
}

struct probe {
    const char *name;
    long (*run)(void);
};

/* clang-format off */
#define PROBE(name) {#name, try_##name}
static const struct probe probes[] = {
    PROBE(unshare),           PROBE(setns),
    PROBE(mount),             PROBE(umount2),
    PROBE(pivot_root),        PROBE(chroot),
    PROBE(keyctl),            PROBE(add_key),
    PROBE(request_key),       PROBE(bpf),
    PROBE(perf_event_open),   PROBE(userfaultfd),
    PROBE(kexec_load),        PROBE(kexec_file_load),
    PROBE(init_module),       PROBE(finit_module),
    PROBE(delete_module),     PROBE(open_by_handle_at),
    PROBE(name_to_handle_at), PROBE(lookup_dcookie),
    PROBE(ptrace),            PROBE(process_vm_readv),
    PROBE(process_vm_writev), PROBE(kcmp),
    PROBE(pidfd_getfd),       PROBE(mbind),
    PROBE(set_mempolicy),     PROBE(get_mempolicy),
    PROBE(migrate_pages),     PROBE(move_pages),
    PROBE(syslog),            PROBE(acct),
    PROBE(quotactl),          PROBE(swapon),
    PROBE(swapoff),           PROBE(reboot),
    PROBE(settimeofday),      PROBE(clock_settime),
    PROBE(clock_adjtime),     PROBE(adjtimex),
    PROBE(iopl),              PROBE(ioperm),
    PROBE(modify_ldt),        PROBE(uselib),
    PROBE(ustat),             PROBE(sysfs),
    PROBE(fanotify_init),     PROBE(clone3),
    PROBE(clone_newuser),     PROBE(clone_newns),
    PROBE(io_uring_setup),    PROBE(io_uring_enter),
    PROBE(io_uring_register), PROBE(io_setup),
    PROBE(io_submit),         PROBE(open_tree),
    PROBE(move_mount),        PROBE(fsopen),
    PROBE(fsconfig),          PROBE(fsmount),
    PROBE(fspick),            PROBE(mount_setattr),
    PROBE(socket_packet),     PROBE(socket_vsock),
    PROBE(socket_netlink),    PROBE(socket_alg),
    PROBE(socket_raw),        PROBE(socket_inet),
    PROBE(socket_inet6),      PROBE(socket_unix),
    PROBE(socketpair_inet),   PROBE(tiocsti),
    PROBE(tiocsti_plain),     PROBE(tioclinux),
    PROBE(personality),       PROBE(personality_linux32),
    PROBE(personality_query), PROBE(memfd_secret),
    PROBE(mknod_device),      PROBE(mknod_fifo),
    PROBE(chmod_setuid),      PROBE(chmod_plain),
    PROBE(fchmodat2_setuid),  PROBE(getpid),
};
/* clang-format on */
#define PROBE_COUNT (sizeof(probes) / sizeof(probes[0]))

static void run_probe(const struct probe *probe)
{
    errno = 0;
    long ret = probe->run();
    if (ret >= 0) {
        printf("%s ok\n", probe->name);
        return;
    }
    int saved = errno;
    const char *name = strerrorname_np(saved);
    if (name)
        printf("%s errno=%s\n", probe->name, name);
    else
        printf("%s errno=%d\n", probe->name, saved);
}

int main(int argc, char **argv)
{
    /* Line-buffered: if a call kills the process (a KILL filter), the lines before it stay. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s NAME... | all | list\n", argv[0]);
        return 2;
    }
    int status = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "all") == 0) {
            for (size_t p = 0; p < PROBE_COUNT; p++)
                run_probe(&probes[p]);
            continue;
        }
        if (strcmp(argv[i], "list") == 0) {
            for (size_t p = 0; p < PROBE_COUNT; p++)
                printf("%s\n", probes[p].name);
            continue;
        }
        size_t p = 0;
        while (p < PROBE_COUNT && strcmp(probes[p].name, argv[i]) != 0)
            p++;
        if (p == PROBE_COUNT) {
            fprintf(stderr, "try-syscall: unknown syscall name \"%s\"\n", argv[i]);
            status = 2;
            continue;
        }
        run_probe(&probes[p]);
    }
    return status;
}
