/* The setup sequence from inside the new namespaces, in the order bubblewrap, crun and nsjail
 * converge on (DESIGN.md, "Isolation: the setup sequence"). Every step that fails dies over the
 * control channel, so the parent reports the reason instead of guessing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/inroot.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/payload.h"
#include "jail/privs.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "jail/shares.h"
#include "jail/userns.h"
#include "util/fds.h"
#include "util/fileio.h"
#include "util/proctitle.h"

static void wait_for_go(int ctl)
{
    struct control_msg msg;
    int rc = control_recv(ctl, &msg, NULL);
    /* EOF: the parent died or gave up before the maps were written; nothing to report to. */
    if (rc <= 0 || msg.type != CONTROL_GO)
        _exit(1);
}

/* The parent made the v1 groups while we built the root; it sends their `tasks` fds. */
static void join_cgroups(int ctl)
{
    struct control_msg msg;
    int fds[CONTROL_MAX_FDS];
    size_t n;
    int rc = control_recv_fds(ctl, &msg, fds, CONTROL_MAX_FDS, &n);
    if (rc <= 0)
        _exit(1); /* the parent gave up; it kills us anyway */
    if (msg.type != CONTROL_CGROUPS || (size_t)msg.code != n) {
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
        control_die(ctl, EPROTO, "expected the cgroup fds");
    }
    if (cgroup_self_attach(fds, n) < 0)
        control_die(ctl, errno, "join the sandbox's cgroups");
}

/* A mask of signals from a "SigIgn:" or "SigCgt:" line of /proc/self/status (hex, bit n-1 for
 * signal n); false when the line is missing or malformed. */
static bool status_sigmask(const char *status, const char *field, unsigned long long *mask)
{
    const char *line = strstr(status, field);
    if (!line)
        return false;
    char *end;
    errno = 0;
    *mask = strtoull(line + strlen(field), &end, 16);
    return errno == 0 && end != line + strlen(field) && (*end == '\n' || *end == '\0');
}

/* The supervisor blocks and ignores signals of its own, and may catch some; none of that may
 * leak into the sandbox, where a blocked or ignored SIGPIPE or SIGINT would survive execve (and
 * a caught one would run the supervisor's handler in here until then). Only the signals the
 * kernel lists as ignored or caught are reset: a sigaction per signal costs a system call each,
 * about 0.2 ms for all 64 on a virtual machine, and this is on the path to the program's start. */
static void reset_signals(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char status[4096];
    unsigned long long ign, cgt, to_reset = ~0ULL; /* all, if the kernel will not say */
    /* Still the host's /proc here, where we have a pid of our own. */
    if (file_read_at(AT_FDCWD, "/proc/self/status", status, sizeof status, NULL) > 0 &&
        status_sigmask(status, "\nSigIgn:\t", &ign) && status_sigmask(status, "\nSigCgt:\t", &cgt))
        to_reset = ign | cgt;
    /* The system call itself: libc's sigaction refuses the two real-time signals it reserves
     * (32, 33), yet a caller may have left them ignored, and ignored they would survive exec. */
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long long mask;
    } dfl = {.handler = SIG_DFL};
    for (int sig = 1; sig <= 64; sig++)
        if (to_reset & (1ULL << (sig - 1)))
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask); /* SIGKILL, SIGSTOP fail */
}

/* Moves the three stdio sources to 0, 1, 2 without clobbering one with another. */
static int install_stdio(const struct jail_spec *spec)
{
    int src[3] = {spec->stdin_fd, spec->stdout_fd, spec->stderr_fd};
    int tmp[3];
    for (int i = 0; i < 3; i++) {
        tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
        if (tmp[i] < 0)
            return -1;
    }
    for (int i = 0; i < 3; i++) {
        if (dup2(tmp[i], i) < 0)
            return -1;
        close(tmp[i]);
    }
    return 0;
}

/* The caller's descriptors end here, first thing: a clone copies every fd of the caller's, and
 * one that names a host directory (a cgroup of the supervisor's, say) would let a chdir or an
 * argv[0] through /proc/self/fd/N reach the host's tree (the runc CVE-2024-21626 pattern). The
 * sandbox's stdio move to 0-2 (closed again after the payload is forked, start_payload); only the
 * control channel and the files still to be copied in stay, and those go before anything of the
 * sandbox's runs (jail_child_main). */
static void keep_only_sandbox_fds(const struct jail_spec *spec, int ctl)
{
    if (install_stdio(spec) < 0)
        control_die(ctl, errno, "set up stdio");
    int keep[JAIL_MAX_FILES + 7] = {0, 1, 2, ctl, jail_init_exec_fd()};
    size_t n = 5;
    if (spec->listen_fd >= 3)
        keep[n++] = spec->listen_fd;
    if (spec->hold_fd >= 3)
        keep[n++] = spec->hold_fd;
    for (size_t i = 0; i < spec->n_files; i++)
        keep[n++] = spec->files[i].host_fd;
    fd_close_all_except(keep, n);
}

static void close_file_sources(const struct jail_spec *spec)
{
    for (size_t i = 0; i < spec->n_files; i++)
        close(spec->files[i].host_fd);
}

/* Init is exec'd, never this fork of the caller: from here on its memory is its own (in a daemon
 * the caller's holds other tenants' data). The binary is the caller's own, opened before the
 * clone (jail_init_exec_fd) and run through that fd, since no path in here leads to it. Its
 * options are init's whole configuration (src/init/README.md). Capabilities survive: uid 0
 * execs into the full set of the user namespace, which init drops itself. For a sandbox with a
 * command, payload is the pid of the payload, already started (start_payload): init adopts it. */
static _Noreturn void exec_init(const struct jail_spec *spec, int ctl, pid_t payload)
{
    char ctl_arg[32], seccomp_arg[32], payload_arg[32];
    snprintf(ctl_arg, sizeof ctl_arg, "--ctl=%d", ctl);
    snprintf(seccomp_arg, sizeof seccomp_arg, "--seccomp=%d", (int)spec->seccomp);
    snprintf(payload_arg, sizeof payload_arg, "--payload=%d", (int)payload);
    char listen_arg[32], hold_arg[32];
    snprintf(listen_arg, sizeof listen_arg, "--listen=%d", spec->listen_fd);
    snprintf(hold_arg, sizeof hold_arg, "--hold=%d", spec->hold_fd);
    /* argv[0] for the command line, then at most 6 options. */
    const char *args[8] = {JAIL_INIT_ARGV0}, **opts = args + 1;
    size_t i = 0;
    opts[i++] = ctl_arg;
    if (spec->die_with_parent)
        opts[i++] = "--die-with-parent";
    if (spec->argv) {
        opts[i++] = payload_arg;
    } else {
        opts[i++] = seccomp_arg;
        if (spec->writable_root)
            opts[i++] = "--writable-root";
        opts[i++] = "--agent";
        opts[i++] = listen_arg;
        if (spec->hold_fd >= 3)
            opts[i++] = hold_arg;
    }
    opts[i] = NULL;
    /* A sandbox with a command: the payload runs already, and may read /proc/1/cmdline before
     * init's first instruction, so the command line is "hutch-init" alone and the options are
     * init's environment (src/init/README.md, "Its command line"); the payload has its own. */
    const char *name_only[] = {JAIL_INIT_ARGV0, NULL};
    const char *const *argv = spec->argv ? name_only : args;
    const char *const *envp = spec->argv ? opts : spec->envp;
    /* These cross the exec; everything else of ours is close-on-exec. */
    int pass[] = {ctl, spec->argv ? -1 : spec->listen_fd, spec->argv ? -1 : spec->hold_fd};
    for (size_t k = 0; k < sizeof pass / sizeof pass[0]; k++)
        if (pass[k] >= 0 && fcntl(pass[k], F_SETFD, 0) < 0)
            control_die(ctl, errno, "hand the control channel to init");
    syscall(SYS_execveat, jail_init_exec_fd(), "", (char *const *)argv, (char *const *)envp,
            AT_EMPTY_PATH);
    control_die(ctl, errno, "exec hutch init");
}

/* A sandbox with a command: READY, then the payload, then init's exec. The payload is vforked
 * here, before init's exec, not by init after it: its exec then runs beside init's, on the other
 * CPU, instead of after it (the exec of init costs about 1.5 ms, bench/README.md). vfork shares
 * our memory until the payload's execve, and we are suspended until then, so the payload's last
 * steps see our state as it is; the execve gives it memory of its own, and ours goes at init's
 * exec. What the payload holds: stdio (0-2) and the control channel until its exec (it reports
 * an exec failure there), nothing else (keep_only_sandbox_fds, and payload_exec closes the rest
 * at exec). Init adopts it: a child survives its parent's execve, and a payload that already
 * ended waits as a zombie for init's first waitpid. Returns the payload's pid. */
static pid_t start_payload(const struct jail_spec *spec, int ctl, int output_fd)
{
    struct seccomp_program prog;
    if (seccomp_builtin(spec->seccomp, &prog) < 0)
        control_die(ctl, EINVAL, "seccomp profile %d", (int)spec->seccomp);
    /* READY first: the payload's own reports (an exec failure) must reach the host after it. */
    struct control_msg ready = {.type = CONTROL_READY};
    if (control_send(ctl, &ready, output_fd) < 0)
        _exit(1);
    if (output_fd >= 0)
        close(output_fd);
    /* The payload's strings are the caller's (jail_spec); execve takes them as they are. */
    struct payload p = {.argv = (char *const *)spec->argv,
                        .envp = (char *const *)spec->envp,
                        .cwd = spec->cwd,
                        .as_root = spec->as_root,
                        .die_with_parent = spec->die_with_parent,
                        .writable_root = spec->writable_root};
    pid_t pid = vfork();
    if (pid < 0)
        control_die(ctl, errno, "fork payload");
    if (pid == 0)
        payload_exec(&p, ctl, &prog);
    /* Init holds no stdio of the sandbox's: the supervisor waits for the payload's pipes to
     * reach EOF. */
    close_range(0, 2, 0);
    return pid;
}

void jail_child_main(const struct jail_spec *spec, int ctl)
{
    keep_only_sandbox_fds(spec, ctl);
    /* The namespaces clone3 left to us (clone_into_namespaces says why), before
     * shares_set_limits allows no more of them. The capabilities to make them are the ones the
     * new user namespace gave us. */
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
        control_die(ctl, errno, "unshare mount, network, IPC and UTS namespaces");
    reset_signals();
    proctitle_set("hutch-init");
    /* While the parent writes the id maps, which takes it most of a millisecond: these steps
     * need only the capabilities the clone gave us in the new namespaces, not our ids. Before
     * the sandbox's /proc hides the /proc/sys knobs read-only. */
    int cgroupns_limit = shares_set_limits(ctl, &spec->limits);
    const char *hostname = spec->hostname ? spec->hostname : "hutch";
    if (sethostname(hostname, strlen(hostname)) < 0)
        control_die(ctl, errno, "sethostname");
    if (netns_loopback_up() < 0)
        control_die(ctl, errno, "bring up lo");
    wait_for_go(ctl);
    if (userns_become_root() < 0)
        control_die(ctl, errno, "become root in the user namespace");
    /* After the credential change above: a change of credentials clears the death signal. */
    if (spec->die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        control_die(ctl, errno, "PR_SET_PDEATHSIG");
    shares_join_keyring(ctl);
    umask(022);
    int output_fd = rootfs_enter(ctl, spec);
    /* Into the v1 groups before anything the caller or the program controls is charged: the
     * files copied in, and everything after. */
    join_cgroups(ctl);
    /* Now, not at clone: only after we joined every cgroup does the namespace's
     * root sit at our own cgroup, hiding the host's tree. Not in an agent sandbox: its spawner
     * clones each command into a sibling of init's group, which must stay in view; each command
     * makes a namespace of its own instead (src/init/command.c), up to JAIL_MAX_COMMANDS. */
    if (spec->argv && unshare(CLONE_NEWCGROUP) < 0)
        control_die(ctl, errno, "unshare cgroup namespace");
    shares_close_cgroup_namespaces(ctl, cgroupns_limit, spec->argv ? 0 : JAIL_MAX_COMMANDS);
    rootfs_copy_files(ctl, spec, spec->as_root ? 0 : JAIL_USER_UID);
    close_file_sources(spec);
    if (privs_apply_rlimits(&spec->limits) < 0)
        control_die(ctl, errno, "setrlimit");
    if (setsid() < 0)
        control_die(ctl, errno, "setsid");
    /* An agent sandbox has no /output to hand over (its READY comes from init, with none). */
    pid_t payload = spec->argv ? start_payload(spec, ctl, output_fd) : 0;
    exec_init(spec, ctl, payload);
}
