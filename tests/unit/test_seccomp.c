/* Seccomp profiles: names, compilation, and the installed filter's behaviour in real children.
 *
 * Every check runs in a forked child that sets no_new_privs, installs the compiled filter and
 * makes one call; the child exits with the call's errno (0 on success) and the parent asserts.
 * Each denial is also tried without the filter, to show that the errno came from the filter and
 * not from the kernel (such a control is skipped where the kernel answers the same errno). */
#include "jail/seccomp.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/io_uring.h>

#include "util/cleanup.h"

#define PROBE_PATH "build/probe/try-syscall"
/* Child exit codes that are not errno values. */
#define CHILD_SETUP_FAILED 200

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif
#define X32_SYSCALL_BIT 0x40000000L

/* Paths the strict checks work on, made by main() before any child forks. */
static char scratch_dir[] = "/tmp/hutch-test-seccomp-XXXXXX";
static char scratch_file[sizeof scratch_dir + 16];
static char scratch_node[sizeof scratch_dir + 16];
static char scratch_fifo[sizeof scratch_dir + 16];

static int result_of(long ret)
{
    return ret < 0 ? errno : 0;
}

/* Runs fn in a child, under prog if it is not NULL. Returns the raw wait status. */
static int run_child(const struct seccomp_program *prog, int (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* A killed child must not leave a core dump behind. */
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        if (prog && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(prog) < 0))
            _exit(CHILD_SETUP_FAILED);
        _exit(fn());
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

static const char *describe_status(int status, char *buf, size_t size)
{
    if (status == -1)
        snprintf(buf, size, "fork or wait failed");
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by %s", sigabbrev_np(WTERMSIG(status)));
    else if (WEXITSTATUS(status) == 0)
        snprintf(buf, size, "success");
    else if (WEXITSTATUS(status) == CHILD_SETUP_FAILED)
        snprintf(buf, size, "filter setup failed");
    else {
        const char *name = strerrorname_np(WEXITSTATUS(status));
        snprintf(buf, size, "errno=%s", name ? name : "?");
    }
    return buf;
}

static bool exited_with(int status, int code)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

/* Asserts fn fails with want under prog, and (the control) that it does not without a filter. */
static void expect_denied(const struct seccomp_program *prog, const char *profile, int (*fn)(void),
                          int want, const char *what)
{
    char got[64], control[64];
    int status = run_child(prog, fn);
    ok(exited_with(status, want), "%s: %s fails with %s", profile, what, strerrorname_np(want));
    if (!exited_with(status, want))
        printf("#   got %s\n", describe_status(status, got, sizeof got));

    int unfiltered = run_child(NULL, fn);
    if (exited_with(unfiltered, want))
        ok(1, "%s: control for %s # SKIP the kernel itself answers %s here", profile, what,
           strerrorname_np(want));
    else
        ok(unfiltered != -1, "%s: control: without the filter %s gives %s", profile, what,
           describe_status(unfiltered, control, sizeof control));
}

static void expect_allowed(const struct seccomp_program *prog, const char *profile, int (*fn)(void),
                           const char *what)
{
    char got[64];
    int status = run_child(prog, fn);
    ok(exited_with(status, 0), "%s: %s still works", profile, what);
    if (!exited_with(status, 0))
        printf("#   got %s\n", describe_status(status, got, sizeof got));
}

/* --- calls made in the children; each returns 0 or an errno --- */

static int call_unshare_user(void)
{
    return result_of(unshare(CLONE_NEWUSER));
}
static int call_mount(void)
{
    return result_of(mount("none", "/nonexistent-hutch-test", "tmpfs", 0, NULL));
}
static int call_keyctl(void)
{
    return result_of(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0));
}
static int call_bpf(void)
{
    /* BPF_MAP_CREATE with an all-zero attribute: EINVAL when the kernel sees it */
    return result_of(syscall(SYS_bpf, 0, NULL, 0));
}
static int call_perf_event_open(void)
{
    struct perf_event_attr attr = {.type = PERF_TYPE_SOFTWARE,
                                   .size = sizeof attr,
                                   .config = PERF_COUNT_SW_CPU_CLOCK,
                                   .disabled = 1,
                                   .exclude_kernel = 1};
    long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd >= 0)
        close((int)fd);
    return result_of(fd);
}
static int call_ptrace(void)
{
    /* we are not traced, so the kernel says ESRCH */
    return result_of(ptrace(PTRACE_PEEKDATA, getpid(), NULL, NULL));
}
static int call_clone3(void)
{
    return result_of(syscall(SYS_clone3, NULL, 0));
}
static int call_io_uring_setup(void)
{
    struct io_uring_params params = {0};
    long fd = syscall(SYS_io_uring_setup, 1, &params);
    if (fd >= 0)
        close((int)fd);
    return result_of(fd);
}
static int socket_result(int family, int type, int protocol)
{
    int fd = socket(family, type, protocol);
    if (fd >= 0)
        close(fd);
    return result_of(fd);
}
static int call_socket_packet(void)
{
    return socket_result(AF_PACKET, SOCK_RAW, 0);
}
static int call_socket_vsock(void)
{
    return socket_result(AF_VSOCK, SOCK_STREAM, 0);
}
static int call_socket_netlink(void)
{
    return socket_result(AF_NETLINK, SOCK_RAW, 0);
}
static int call_socket_inet(void)
{
    return socket_result(AF_INET, SOCK_STREAM, 0);
}
static int call_socket_inet6(void)
{
    return socket_result(AF_INET6, SOCK_STREAM, 0);
}
static int call_socket_unix(void)
{
    return socket_result(AF_UNIX, SOCK_STREAM, 0);
}
static int call_socketpair_unix(void)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0)
        return errno;
    close(fds[0]);
    close(fds[1]);
    return 0;
}
static int call_socketpair_inet(void)
{
    int fds[2];
    if (socketpair(AF_INET, SOCK_STREAM, 0, fds) < 0)
        return errno;
    close(fds[0]);
    close(fds[1]);
    return 0;
}
static int call_tiocsti_high_bits(void)
{
    /* CVE-2019-10063: the kernel truncates the command to 32 bits, so this is TIOCSTI */
    char c = 'x';
    return result_of(syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI | (1UL << 32), &c));
}
static int call_tioclinux(void)
{
    char c = 0;
    return result_of(syscall(SYS_ioctl, -1, (unsigned long)TIOCLINUX, &c));
}
static int call_ioctl_fionread(void)
{
    int fds[2], n = 0;
    if (pipe(fds) < 0)
        return errno;
    int rc = result_of(ioctl(fds[0], FIONREAD, &n));
    close(fds[0]);
    close(fds[1]);
    return rc;
}
static int clone_result(unsigned long flags)
{
    long pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return errno;
    int status;
    waitpid((pid_t)pid, &status, 0);
    return 0;
}
static int call_clone_newns(void)
{
    return clone_result(CLONE_NEWNS);
}
static int call_clone_newnet(void)
{
    return clone_result(CLONE_NEWNET);
}
static int personality_result(unsigned long persona)
{
    int old = personality(0xffffffff);
    if (old < 0)
        return errno;
    if (personality(persona) < 0)
        return errno;
    personality((unsigned long)old);
    return 0;
}
static int call_personality_addr_no_randomize(void)
{
    return personality_result(ADDR_NO_RANDOMIZE);
}
static int call_personality_linux32(void)
{
    return personality_result(PER_LINUX32);
}
static int call_personality_query(void)
{
    return personality(0xffffffff) < 0 ? errno : 0;
}
static int call_getpid(void)
{
    return syscall(SYS_getpid) == getpid() ? 0 : EINVAL;
}
static int call_fork(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    if (pid < 0)
        return errno;
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return errno;
    return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : ECHILD;
}
static void *thread_main(void *arg)
{
    return arg;
}
static int call_pthread_create(void)
{
    /* glibc tries clone3 first; ENOSYS must make it fall back to clone */
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, thread_main, NULL);
    if (rc != 0)
        return rc;
    return pthread_join(thread, NULL);
}
#ifdef __x86_64__
static int call_i386_getpid(void)
{
    /* int $0x80 enters the kernel as i386, where 20 is getpid */
    long ret = 20;
    __asm__ volatile("int $0x80" : "+a"(ret) : : "memory", "r8", "r9", "r10", "r11");
    return ret == getpid() ? 0 : ENOSYS;
}
static int call_x32_getpid(void)
{
    long ret = syscall(X32_SYSCALL_BIT | SYS_getpid);
    return ret == getpid() ? 0 : ENOSYS;
}
#endif
static int call_chmod_setuid(void)
{
    return result_of(chmod(scratch_file, 04755));
}
static int call_fchmodat_setgid(void)
{
    return result_of(fchmodat(AT_FDCWD, scratch_file, 02755, 0));
}
static int call_fchmod_setuid_high_bits(void)
{
    /* mode is 16 bits to the kernel; junk above must not hide the set-id bit */
    int fd = open(scratch_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = result_of(syscall(SYS_fchmod, fd, (1UL << 40) | 04755));
    close(fd);
    return rc;
}
static int call_chmod_plain(void)
{
    return result_of(chmod(scratch_file, 0644));
}
static int call_mknod_char_device(void)
{
    return result_of(mknod(scratch_node, S_IFCHR | 0600, makedev(1, 3)));
}
static int call_mkfifo(void)
{
    return result_of(mkfifo(scratch_fifo, 0600));
}
static int call_memfd_secret(void)
{
    long fd = syscall(SYS_memfd_secret, 0);
    if (fd >= 0)
        close((int)fd);
    return result_of(fd);
}

/* --- tests --- */

static void test_profile_names(void)
{
    static const enum seccomp_profile all[] = {SECCOMP_PROFILE_DEFAULT, SECCOMP_PROFILE_STRICT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = seccomp_profile_name(all[i]);
        enum seccomp_profile back = (enum seccomp_profile) - 1;
        ok(name && seccomp_profile_parse(name, &back) == 0 && back == all[i],
           "profile %s parses back to itself", name ? name : "(null)");
    }
    is_str(seccomp_profile_name(SECCOMP_PROFILE_DEFAULT), "default", "default profile name");
    is_str(seccomp_profile_name(SECCOMP_PROFILE_STRICT), "strict", "strict profile name");
    is_str(seccomp_profile_name(SECCOMP_PROFILE_INIT), "init", "init profile name");
    ok(seccomp_profile_name((enum seccomp_profile)42) == NULL, "unknown profile has no name");

    static const char *bad[] = {"",     "Default",    "STRICT",   "default ", " strict",
                                "none", "unconfined", "defaults", "stric",    "init"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        enum seccomp_profile out = SECCOMP_PROFILE_STRICT;
        ok(seccomp_profile_parse(bad[i], &out) < 0 && out == SECCOMP_PROFILE_STRICT,
           "profile name \"%s\" is rejected", bad[i]);
    }
    enum seccomp_profile out;
    ok(seccomp_profile_parse(NULL, &out) < 0, "NULL profile name is rejected");
}

static void test_compile_errors(void)
{
    err_t err = {0};
    struct seccomp_program prog = {.filter = (struct sock_filter *)1, .len = 7};
    ok(seccomp_compile((enum seccomp_profile)42, &prog, &err) < 0 && err.errnum == EINVAL,
       "compiling an unknown profile fails with EINVAL (%s)", err.msg);
    ok(prog.filter == NULL && prog.len == 0, "a failed compile leaves an empty program");
    seccomp_program_free(&prog);
    seccomp_program_free(NULL);

    errno = 0;
    ok(seccomp_install(&prog) < 0 && errno == EINVAL, "installing an empty program fails");
    errno = 0;
    ok(seccomp_install(NULL) < 0 && errno == EINVAL, "installing NULL fails");
}

static void test_dump_pfc(void)
{
    err_t err = {0};
    cleanup_fd int fd = memfd_create("pfc", MFD_CLOEXEC);
    ok(fd >= 0 && seccomp_dump_pfc(SECCOMP_PROFILE_STRICT, fd, &err) == 0, "strict PFC dumps%s%s",
       err.msg[0] ? ": " : "", err.msg);
    char text[65536] = {0};
    ssize_t n = fd >= 0 ? pread(fd, text, sizeof text - 1, 0) : -1;
    ok(n > 0 && strstr(text, "action ERRNO(1)") && strstr(text, "action ERRNO(38)") &&
           strstr(text, "action ERRNO(97)"),
       "PFC shows the EPERM, ENOSYS and EAFNOSUPPORT actions");
    ok(n > 0 && strstr(text, "invalid architecture action\naction KILL_PROCESS"),
       "PFC kills the process on a foreign architecture");
    ok(n > 0 && strstr(text, "\"mknodat\"") && strstr(text, "\"chmod\""),
       "strict PFC filters mknodat and chmod");
    ok(seccomp_dump_pfc((enum seccomp_profile)42, fd, &err) < 0 && err.errnum == EINVAL,
       "dumping an unknown profile fails");
    ok(seccomp_dump_pfc(SECCOMP_PROFILE_DEFAULT, -1, &err) < 0, "dumping to a bad fd fails (%s)",
       err.msg);
}

static void test_default_filter(const struct seccomp_program *prog)
{
    const char *p = "default";
    expect_denied(prog, p, call_unshare_user, EPERM, "unshare(CLONE_NEWUSER)");
    expect_denied(prog, p, call_mount, EPERM, "mount");
    expect_denied(prog, p, call_keyctl, EPERM, "keyctl");
    expect_denied(prog, p, call_bpf, EPERM, "bpf");
    expect_denied(prog, p, call_perf_event_open, EPERM, "perf_event_open");
    expect_denied(prog, p, call_ptrace, EPERM, "ptrace");
    expect_denied(prog, p, call_clone3, ENOSYS, "clone3");
    expect_denied(prog, p, call_io_uring_setup, ENOSYS, "io_uring_setup");
    expect_denied(prog, p, call_socket_packet, EAFNOSUPPORT, "socket(AF_PACKET)");
    expect_denied(prog, p, call_socket_vsock, EAFNOSUPPORT, "socket(AF_VSOCK)");
    expect_denied(prog, p, call_socket_netlink, EAFNOSUPPORT, "socket(AF_NETLINK)");
    expect_denied(prog, p, call_socketpair_inet, EAFNOSUPPORT, "socketpair(AF_INET)");
    expect_denied(prog, p, call_tiocsti_high_bits, EPERM, "ioctl(TIOCSTI | 1<<32)");
    expect_denied(prog, p, call_tioclinux, EPERM, "ioctl(TIOCLINUX)");
    expect_denied(prog, p, call_clone_newns, EPERM, "clone(CLONE_NEWNS)");
    expect_denied(prog, p, call_clone_newnet, EPERM, "clone(CLONE_NEWNET)");
    expect_denied(prog, p, call_personality_addr_no_randomize, EPERM,
                  "personality(ADDR_NO_RANDOMIZE)");

    expect_allowed(prog, p, call_socket_inet, "socket(AF_INET, SOCK_STREAM)");
    expect_allowed(prog, p, call_socket_inet6, "socket(AF_INET6, SOCK_STREAM)");
    expect_allowed(prog, p, call_socket_unix, "socket(AF_UNIX)");
    expect_allowed(prog, p, call_socketpair_unix, "socketpair(AF_UNIX)");
    expect_allowed(prog, p, call_getpid, "getpid");
    expect_allowed(prog, p, call_fork, "fork (clone without namespace flags)");
    expect_allowed(prog, p, call_pthread_create, "pthread_create (falls back from clone3)");
    expect_allowed(prog, p, call_ioctl_fionread, "ioctl(FIONREAD)");
    expect_allowed(prog, p, call_personality_linux32, "personality(PER_LINUX32)");
    expect_allowed(prog, p, call_personality_query, "personality(0xffffffff)");
    expect_allowed(prog, p, call_chmod_setuid, "chmod(04755)");
}

static void test_foreign_arch(const struct seccomp_program *prog)
{
#ifdef __x86_64__
    char got[64];
    int control = run_child(NULL, call_i386_getpid);
    if (!exited_with(control, 0)) {
        ok(1, "i386 syscall is killed # SKIP no i386 emulation here (%s)",
           describe_status(control, got, sizeof got));
    } else {
        int status = run_child(prog, call_i386_getpid);
        ok(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
           "i386 getpid via int $0x80 kills the child with SIGSYS (control: it works unfiltered)");
        if (!(status != -1 && WIFSIGNALED(status)))
            printf("#   got %s\n", describe_status(status, got, sizeof got));
    }
    int status = run_child(prog, call_x32_getpid);
    ok(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
       "x32 getpid kills the child with SIGSYS");
    if (!(status != -1 && WIFSIGNALED(status)))
        printf("#   got %s\n", describe_status(status, got, sizeof got));
#else
    ok(1, "foreign arch # SKIP only written for x86_64");
#endif
}

static void test_strict_filter(const struct seccomp_program *prog)
{
    const char *p = "strict";
    /* First the set-id attempts alone, to see the file untouched afterwards (the unfiltered
     * controls below really do set the bits). */
    chmod(scratch_file, 0600);
    int status = run_child(prog, call_chmod_setuid);
    status =
        status == -1 || exited_with(status, EPERM) ? run_child(prog, call_fchmodat_setgid) : status;
    status = exited_with(status, EPERM) ? run_child(prog, call_fchmod_setuid_high_bits) : status;
    struct stat st;
    ok(exited_with(status, EPERM) && stat(scratch_file, &st) == 0 && (st.st_mode & 07777) == 0600,
       "strict: set-id chmods all fail and leave the file at 0600");
    /* no unfiltered control for mknod: as root it would really make a device node */
    status = run_child(prog, call_mknod_char_device);
    ok(exited_with(status, EPERM) && access(scratch_node, F_OK) != 0,
       "strict: mknod(S_IFCHR) fails with EPERM and makes nothing");

    expect_denied(prog, p, call_socket_inet, EAFNOSUPPORT, "socket(AF_INET)");
    expect_denied(prog, p, call_socket_inet6, EAFNOSUPPORT, "socket(AF_INET6)");
    expect_denied(prog, p, call_chmod_setuid, EPERM, "chmod(04755)");
    expect_denied(prog, p, call_fchmodat_setgid, EPERM, "fchmodat(02755)");
    expect_denied(prog, p, call_fchmod_setuid_high_bits, EPERM, "fchmod(04755 | 1<<40)");
    expect_denied(prog, p, call_personality_linux32, EPERM, "personality(PER_LINUX32)");
    expect_denied(prog, p, call_memfd_secret, EPERM, "memfd_secret");

    expect_allowed(prog, p, call_chmod_plain, "chmod(0644)");
    ok(stat(scratch_file, &st) == 0 && (st.st_mode & 07777) == 0644,
       "strict: chmod(0644) took effect");
    expect_allowed(prog, p, call_mkfifo, "mkfifo");
    expect_allowed(prog, p, call_socket_unix, "socket(AF_UNIX)");
    expect_allowed(prog, p, call_getpid, "getpid");
    expect_allowed(prog, p, call_fork, "fork");
    expect_allowed(prog, p, call_personality_query, "personality(0xffffffff)");
    /* and the default denials are still there */
    expect_denied(prog, p, call_mount, EPERM, "mount");
    expect_denied(prog, p, call_clone3, ENOSYS, "clone3");
    expect_denied(prog, p, call_socket_netlink, EAFNOSUPPORT, "socket(AF_NETLINK)");
}

/* --- the probe, as it will run inside sandboxes --- */

struct probe_expectation {
    const char *name;
    const char *result; /* "ok" or "errno=NAME" */
};

static const struct probe_expectation probe_default[] = {
    {"unshare", "errno=EPERM"},
    {"setns", "errno=EPERM"},
    {"mount", "errno=EPERM"},
    {"umount2", "errno=EPERM"},
    {"pivot_root", "errno=EPERM"},
    {"chroot", "errno=EPERM"},
    {"keyctl", "errno=EPERM"},
    {"add_key", "errno=EPERM"},
    {"request_key", "errno=EPERM"},
    {"bpf", "errno=EPERM"},
    {"perf_event_open", "errno=EPERM"},
    {"userfaultfd", "errno=EPERM"},
    {"kexec_load", "errno=EPERM"},
    {"kexec_file_load", "errno=EPERM"},
    {"init_module", "errno=EPERM"},
    {"finit_module", "errno=EPERM"},
    {"delete_module", "errno=EPERM"},
    {"open_by_handle_at", "errno=EPERM"},
    {"name_to_handle_at", "errno=EPERM"},
    {"lookup_dcookie", "errno=EPERM"},
    {"ptrace", "errno=EPERM"},
    {"process_vm_readv", "errno=EPERM"},
    {"process_vm_writev", "errno=EPERM"},
    {"kcmp", "errno=EPERM"},
    {"pidfd_getfd", "errno=EPERM"},
    {"mbind", "errno=EPERM"},
    {"set_mempolicy", "errno=EPERM"},
    {"get_mempolicy", "errno=EPERM"},
    {"migrate_pages", "errno=EPERM"},
    {"move_pages", "errno=EPERM"},
    {"syslog", "errno=EPERM"},
    {"acct", "errno=EPERM"},
    {"quotactl", "errno=EPERM"},
    {"swapon", "errno=EPERM"},
    {"swapoff", "errno=EPERM"},
    {"reboot", "errno=EPERM"},
    {"settimeofday", "errno=EPERM"},
    {"clock_settime", "errno=EPERM"},
    {"clock_adjtime", "errno=EPERM"},
    {"adjtimex", "errno=EPERM"},
    {"iopl", "errno=EPERM"},
    {"ioperm", "errno=EPERM"},
    {"modify_ldt", "errno=EPERM"},
    {"uselib", "errno=EPERM"},
    {"ustat", "errno=EPERM"},
    {"sysfs", "errno=EPERM"},
    {"fanotify_init", "errno=EPERM"},
    {"clone_newuser", "errno=EPERM"},
    {"clone_newns", "errno=EPERM"},
    {"tiocsti", "errno=EPERM"},
    {"tiocsti_plain", "errno=EPERM"},
    {"tioclinux", "errno=EPERM"},
    {"personality", "errno=EPERM"},
    {"clone3", "errno=ENOSYS"},
    {"io_uring_setup", "errno=ENOSYS"},
    {"io_uring_enter", "errno=ENOSYS"},
    {"io_uring_register", "errno=ENOSYS"},
    {"io_setup", "errno=ENOSYS"},
    {"io_submit", "errno=ENOSYS"},
    {"open_tree", "errno=ENOSYS"},
    {"move_mount", "errno=ENOSYS"},
    {"fsopen", "errno=ENOSYS"},
    {"fsconfig", "errno=ENOSYS"},
    {"fsmount", "errno=ENOSYS"},
    {"fspick", "errno=ENOSYS"},
    {"mount_setattr", "errno=ENOSYS"},
    {"socket_packet", "errno=EAFNOSUPPORT"},
    {"socket_vsock", "errno=EAFNOSUPPORT"},
    {"socket_netlink", "errno=EAFNOSUPPORT"},
    {"socket_alg", "errno=EAFNOSUPPORT"},
    {"socketpair_inet", "errno=EAFNOSUPPORT"},
    /* allowed: these must not show a filter errno */
    {"getpid", "ok"},
    {"socket_inet", "ok"},
    {"socket_inet6", "ok"},
    {"socket_unix", "ok"},
    {"personality_linux32", "ok"},
    {"personality_query", "ok"},
    {"chmod_setuid", "errno=EFAULT"},
    {"mknod_device", "errno=EFAULT"},
};

static const struct probe_expectation probe_strict[] = {
    {"socket_inet", "errno=EAFNOSUPPORT"},
    {"socket_inet6", "errno=EAFNOSUPPORT"},
    {"socket_raw", "errno=EAFNOSUPPORT"},
    {"chmod_setuid", "errno=EPERM"},
    {"fchmodat2_setuid", "errno=EPERM"},
    {"mknod_device", "errno=EPERM"},
    {"memfd_secret", "errno=EPERM"},
    {"personality_linux32", "errno=EPERM"},
    {"mount", "errno=EPERM"},
    {"clone3", "errno=ENOSYS"},
    {"socket_netlink", "errno=EAFNOSUPPORT"},
    {"chmod_plain", "errno=EFAULT"},
    {"mknod_fifo", "errno=EFAULT"},
    {"socket_unix", "ok"},
    {"personality_query", "ok"},
    {"getpid", "ok"},
};

/* Runs the probe with "all" under prog (or unfiltered) and returns its malloc'd stdout. */
static char *run_probe(const struct seccomp_program *prog, int *status_out)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return NULL;
    }
    if (pid == 0) {
        if (dup2(fds[1], STDOUT_FILENO) < 0)
            _exit(CHILD_SETUP_FAILED);
        if (prog && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(prog) < 0))
            _exit(CHILD_SETUP_FAILED);
        char *argv[] = {"try-syscall", "all", NULL};
        execv(PROBE_PATH, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    while (out && len < cap - 1) {
        ssize_t n = read(fds[0], out + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fds[0]);
    if (out)
        out[len] = '\0';
    int status = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *status_out = status;
    return out;
}

/* The result the probe printed for name ("ok", "errno=EPERM"), copied into buf. */
static const char *probe_result(const char *output, const char *name, char *buf, size_t size)
{
    size_t name_len = strlen(name);
    for (const char *line = output; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t line_len = end ? (size_t)(end - line) : strlen(line);
        if (line_len > name_len && strncmp(line, name, name_len) == 0 && line[name_len] == ' ') {
            snprintf(buf, size, "%.*s", (int)(line_len - name_len - 1), line + name_len + 1);
            return buf;
        }
        line = end ? end + 1 : NULL;
    }
    return "(missing)";
}

static void check_probe(const struct seccomp_program *prog, const char *profile,
                        const struct probe_expectation *want, size_t count)
{
    int status, control_status;
    cleanup_free char *out = run_probe(prog, &status);
    cleanup_free char *control = run_probe(NULL, &control_status);
    ok(out && exited_with(status, 0), "probe under the %s filter exits 0", profile);
    ok(control && exited_with(control_status, 0), "probe without a filter exits 0");
    if (!out || !control)
        return;
    for (size_t i = 0; i < count; i++) {
        char got[64], unfiltered[64];
        probe_result(out, want[i].name, got, sizeof got);
        probe_result(control, want[i].name, unfiltered, sizeof unfiltered);
        is_str(got, want[i].result, "probe %s: %s (unfiltered: %s)", profile, want[i].name,
               unfiltered);
        /* The errno must come from the filter, so the unfiltered probe must say something
         * else. Where the kernel itself gives the same answer (without privileges, pivot_root
         * says EPERM on its own) the check cannot tell, and says so. */
        bool filter_errno = strcmp(want[i].result, "errno=EPERM") == 0 ||
                            strcmp(want[i].result, "errno=ENOSYS") == 0 ||
                            strcmp(want[i].result, "errno=EAFNOSUPPORT") == 0;
        if (!filter_errno)
            continue;
        if (strcmp(unfiltered, want[i].result) == 0)
            ok(1, "probe control %s # SKIP the kernel itself answers %s here", want[i].name,
               unfiltered);
        else
            ok(1, "probe control %s: %s unfiltered", want[i].name, unfiltered);
    }
}

static void test_probe(const struct seccomp_program *def, const struct seccomp_program *strict)
{
    if (access(PROBE_PATH, X_OK) != 0) {
        ok(1, "probe under the default filter # SKIP probe not built");
        ok(1, "probe under the strict filter # SKIP probe not built");
        return;
    }
    check_probe(def, "default", probe_default, sizeof probe_default / sizeof probe_default[0]);
    check_probe(strict, "strict", probe_strict, sizeof probe_strict / sizeof probe_strict[0]);
}

/* --- the init profile: an allow-list --- */

static int call_wait4_no_child(void)
{
    return result_of(wait4(-1, NULL, WNOHANG, NULL));
}

static int call_sendmsg_bad_fd(void)
{
    struct msghdr msg = {0};
    return result_of(sendmsg(-1, &msg, 0));
}

static int call_openat(void)
{
    long fd = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    return result_of(fd);
}

static int call_execve(void)
{
    char *argv[] = {"true", NULL};
    return result_of(syscall(SYS_execve, "/bin/true", argv, NULL));
}

static int call_kill_self_zero(void)
{
    return result_of(syscall(SYS_kill, getpid(), 0));
}

static void expect_killed(const struct seccomp_program *prog, int (*fn)(void), const char *what)
{
    char got[64];
    int status = run_child(prog, fn);
    bool killed = status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS;
    ok(killed, "init: %s kills the caller with SIGSYS", what);
    if (!killed)
        printf("#   got %s\n", describe_status(status, got, sizeof got));
    int control = run_child(NULL, fn);
    ok(control != -1 && WIFEXITED(control), "init: control: without the filter %s returns (%s)",
       what, describe_status(control, got, sizeof got));
}

static void test_init_filter(void)
{
    err_t err = {0};
    struct seccomp_program init = {0};
    ok(seccomp_compile(SECCOMP_PROFILE_INIT, &init, &err) == 0 && init.filter && init.len > 0 &&
           init.len < 40,
       "init profile compiles to a short program (%u instructions)%s", init.len, err.msg);
    if (!init.filter)
        return;
    /* run_child's own exit is exit_group: that it reports at all shows exit is allowed */
    char got[64];
    int status = run_child(&init, call_wait4_no_child);
    ok(exited_with(status, ECHILD), "init: wait4 reaches the kernel (ECHILD, no child): %s",
       describe_status(status, got, sizeof got));
    status = run_child(&init, call_sendmsg_bad_fd);
    ok(exited_with(status, EBADF), "init: sendmsg reaches the kernel (EBADF on fd -1): %s",
       describe_status(status, got, sizeof got));
    expect_killed(&init, call_getpid, "getpid");
    expect_killed(&init, call_openat, "openat");
    expect_killed(&init, call_execve, "execve");
    expect_killed(&init, call_kill_self_zero, "kill");
    expect_killed(&init, call_fork, "fork");
    seccomp_program_free(&init);
}

int main(void)
{
    test_profile_names();
    test_init_filter();
    test_compile_errors();
    test_dump_pfc();

    err_t err = {0};
    struct seccomp_program def = {0}, strict = {0};
    ok(seccomp_compile(SECCOMP_PROFILE_DEFAULT, &def, &err) == 0 && def.filter && def.len > 0,
       "default profile compiles (%u instructions)%s", def.len, err.msg);
    ok(seccomp_compile(SECCOMP_PROFILE_STRICT, &strict, &err) == 0 && strict.filter &&
           strict.len > def.len,
       "strict profile compiles, larger than default (%u instructions)%s", strict.len, err.msg);
    if (!def.filter || !strict.filter)
        return done_testing();

    if (!mkdtemp(scratch_dir)) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return done_testing();
    }
    snprintf(scratch_file, sizeof scratch_file, "%s/file", scratch_dir);
    snprintf(scratch_node, sizeof scratch_node, "%s/node", scratch_dir);
    snprintf(scratch_fifo, sizeof scratch_fifo, "%s/fifo", scratch_dir);
    int fd = open(scratch_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ok(fd >= 0, "scratch file created");
    if (fd >= 0)
        close(fd);

    test_default_filter(&def);
    test_foreign_arch(&def);
    test_strict_filter(&strict);
    test_probe(&def, &strict);

    unlink(scratch_fifo);
    unlink(scratch_node);
    unlink(scratch_file);
    rmdir(scratch_dir);
    seccomp_program_free(&def);
    seccomp_program_free(&strict);
    ok(def.filter == NULL && def.len == 0, "freed program is empty");
    return done_testing();
}
