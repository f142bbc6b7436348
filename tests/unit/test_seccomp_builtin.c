/* The programs embedded at build time are exactly what libseccomp compiles from the policy now:
 * a stale generated file would make sandboxes run an old policy. */
#include <linux/sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/seccomp.h"
#include "tap.h"

static void same_program(enum seccomp_profile profile)
{
    struct seccomp_program built, fresh;
    err_t err;
    ok(seccomp_builtin(profile, &built) == 0, "%s: embedded program exists",
       seccomp_profile_name(profile));
    ok(seccomp_compile(profile, &fresh, &err) == 0, "%s: compiles", seccomp_profile_name(profile));
    ok(built.len == fresh.len && built.len > 0 &&
           memcmp(built.filter, fresh.filter, built.len * sizeof built.filter[0]) == 0,
       "%s: embedded (%u instructions) equals compiled (%u)", seccomp_profile_name(profile),
       built.len, fresh.len);
    seccomp_program_free(&fresh);
}

/* In a child under profile, one raw system call: how the child ended. */
static int profile_try(enum seccomp_profile profile, long nr, long a0, long a1)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct seccomp_program prog;
        if (seccomp_builtin(profile, &prog) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            seccomp_install(&prog) < 0)
            _exit(90);
        syscall(nr, a0, a1, 0, 0, 0, 0);
        _exit(0); /* survived: allowed (its result does not matter) */
    }
    int status;
    waitpid(pid, &status, 0);
    return status;
}

struct named_call {
    const char *name;
    long nr;
};

/* Each of denied kills a process under profile; each of allowed does not (the controls, which
 * show that a kill is the filter's and not the child's own failure). */
static void profile_kills(enum seccomp_profile profile, const struct named_call *denied,
                          size_t n_denied, const struct named_call *allowed, size_t n_allowed)
{
    const char *name = seccomp_profile_name(profile);
    for (size_t i = 0; i < n_denied; i++) {
        int st = profile_try(profile, denied[i].nr, -1, 0);
        ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "%s profile: %s kills", name,
           denied[i].name);
    }
    for (size_t i = 0; i < n_allowed; i++) {
        /* Each gets -1 (a bad fd or pointer) and returns at once; kill gets pid 0, signal 0. */
        int st = profile_try(profile, allowed[i].nr, allowed[i].nr == SYS_kill ? 0 : -1, 0);
        ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s profile: %s is allowed (control)", name,
           allowed[i].name);
    }
}

static void agent_profile(void)
{
    static const struct named_call denied[] = {
        {"execve", SYS_execve},   {"execveat", SYS_execveat}, {"fork", SYS_fork},
        {"vfork", SYS_vfork},     {"clone", SYS_clone},       {"clone3", SYS_clone3},
        {"ptrace", SYS_ptrace},   {"mount", SYS_mount},       {"unshare", SYS_unshare},
        {"setns", SYS_setns},     {"openat", SYS_openat},     {"socket", SYS_socket},
        {"connect", SYS_connect}, {"setuid", SYS_setuid},     {"bpf", SYS_bpf},
    };
    static const struct named_call allowed[] = {{"poll", SYS_poll},
                                                {"close", SYS_close},
                                                {"getpid", SYS_getpid},
                                                {"kill", SYS_kill},
                                                {"recvmsg", SYS_recvmsg}};
    profile_kills(SECCOMP_PROFILE_AGENT, denied, sizeof denied / sizeof denied[0], allowed,
                  sizeof allowed / sizeof allowed[0]);
    /* socketpair for a files worker's socket: AF_UNIX only. */
    int st = profile_try(SECCOMP_PROFILE_AGENT, SYS_socketpair, AF_UNIX, SOCK_SEQPACKET);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "agent profile: socketpair(AF_UNIX) is allowed");
    static const long families[] = {AF_INET,   AF_INET6, AF_NETLINK,
                                    AF_PACKET, AF_VSOCK, AF_UNIX | (1L << 32)};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        st = profile_try(SECCOMP_PROFILE_AGENT, SYS_socketpair, families[i], SOCK_STREAM);
        ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "agent profile: socketpair(%#lx) kills",
           families[i]);
    }
}

/* A files worker (src/init/files_worker.c): file calls yes; no exec, no new process, no socket
 * of its own, no signal, no change of who it is. */
static void files_profile(void)
{
    static const struct named_call denied[] = {
        {"execve", SYS_execve},       {"execveat", SYS_execveat},   {"fork", SYS_fork},
        {"vfork", SYS_vfork},         {"clone", SYS_clone},         {"clone3", SYS_clone3},
        {"ptrace", SYS_ptrace},       {"mount", SYS_mount},         {"umount2", SYS_umount2},
        {"unshare", SYS_unshare},     {"setns", SYS_setns},         {"pivot_root", SYS_pivot_root},
        {"chroot", SYS_chroot},       {"socket", SYS_socket},       {"socketpair", SYS_socketpair},
        {"connect", SYS_connect},     {"bind", SYS_bind},           {"accept4", SYS_accept4},
        {"kill", SYS_kill},           {"tgkill", SYS_tgkill},       {"setuid", SYS_setuid},
        {"setresuid", SYS_setresuid}, {"setfsuid", SYS_setfsuid},   {"setfsgid", SYS_setfsgid},
        {"setgroups", SYS_setgroups}, {"capset", SYS_capset},       {"prctl", SYS_prctl},
        {"ioctl", SYS_ioctl},         {"bpf", SYS_bpf},             {"memfd_create", SYS_memfd_create},
        {"wait4", SYS_wait4},         {"linkat", SYS_linkat},       {"symlinkat", SYS_symlinkat},
        {"mknodat", SYS_mknodat},     {"process_vm_readv", SYS_process_vm_readv},
    };
    static const struct named_call allowed[] = {
        {"openat", SYS_openat},         {"openat2", SYS_openat2},     {"getdents64", SYS_getdents64},
        {"mkdirat", SYS_mkdirat},       {"renameat", SYS_renameat},   {"renameat2", SYS_renameat2},
        {"unlinkat", SYS_unlinkat},     {"fchown", SYS_fchown},       {"fchmod", SYS_fchmod},
        {"inotify_init1", SYS_inotify_init1},                         {"recvmsg", SYS_recvmsg},
        {"sendmsg", SYS_sendmsg},       {"poll", SYS_poll},           {"close", SYS_close},
    };
    profile_kills(SECCOMP_PROFILE_FILES, denied, sizeof denied / sizeof denied[0], allowed,
                  sizeof allowed / sizeof allowed[0]);
}

int main(void)
{
    same_program(SECCOMP_PROFILE_DEFAULT);
    same_program(SECCOMP_PROFILE_STRICT);
    same_program(SECCOMP_PROFILE_INIT);
    same_program(SECCOMP_PROFILE_AGENT);
    same_program(SECCOMP_PROFILE_FILES);
    agent_profile();
    files_profile();
    struct seccomp_program p;
    ok(seccomp_builtin((enum seccomp_profile)17, &p) < 0, "unknown profile refused");
    return done_testing();
}
