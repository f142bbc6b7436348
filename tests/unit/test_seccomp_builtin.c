/* The programs embedded at build time are exactly what libseccomp compiles from the policy now:
 * a stale generated file would make sandboxes run an old policy. */
#include <linux/sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

/* In a child under the agent profile, one raw system call: how the child ended. */
static int agent_try(long nr, long a0, long a1)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct seccomp_program prog;
        if (seccomp_builtin(SECCOMP_PROFILE_AGENT, &prog) < 0 ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(&prog) < 0)
            _exit(90);
        syscall(nr, a0, a1, 0, 0, 0, 0);
        _exit(0); /* survived: allowed (its result does not matter) */
    }
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void agent_profile(void)
{
    static const struct {
        const char *name;
        long nr;
    } denied[] = {
        {"execve", SYS_execve},   {"execveat", SYS_execveat}, {"fork", SYS_fork},
        {"vfork", SYS_vfork},     {"clone", SYS_clone},       {"clone3", SYS_clone3},
        {"ptrace", SYS_ptrace},   {"mount", SYS_mount},       {"unshare", SYS_unshare},
        {"setns", SYS_setns},     {"openat", SYS_openat},     {"socket", SYS_socket},
        {"connect", SYS_connect}, {"setuid", SYS_setuid},     {"bpf", SYS_bpf},
    };
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        int st = agent_try(denied[i].nr, -1, 0);
        ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "agent profile: %s kills", denied[i].name);
    }
    static const struct {
        const char *name;
        long nr;
    } allowed[] = {{"poll", SYS_poll}, {"close", SYS_close}, {"getpid", SYS_getpid},
                   {"kill", SYS_kill}, {"recvmsg", SYS_recvmsg}};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        /* poll(NULL, 0) returns at once; close(-1), kill(-1? no: pid 0 with signal 0). */
        int st = agent_try(allowed[i].nr, allowed[i].nr == SYS_kill ? 0 : -1, 0);
        ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "agent profile: %s is allowed (control)",
           allowed[i].name);
    }
}

int main(void)
{
    same_program(SECCOMP_PROFILE_DEFAULT);
    same_program(SECCOMP_PROFILE_STRICT);
    same_program(SECCOMP_PROFILE_INIT);
    same_program(SECCOMP_PROFILE_AGENT);
    agent_profile();
    struct seccomp_program p;
    ok(seccomp_builtin((enum seccomp_profile)17, &p) < 0, "unknown profile refused");
    return done_testing();
}
