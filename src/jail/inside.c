/* The setup sequence from inside the new namespaces, in the order bubblewrap, crun and nsjail
 * converge on (DESIGN.md, "Isolation: the setup sequence"). Every step that fails dies over the
 * control channel, so the parent reports the reason instead of guessing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init/init.h"
#include "jail/control.h"
#include "jail/inroot.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/privs.h"
#include "jail/rootfs.h"
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
 * sandbox's stdio move to 0-2 (init closes its copies after it forks the payload); only the
 * control channel and the files still to be copied in stay, and those go before anything of the
 * sandbox's runs (jail_child_main). */
static void keep_only_sandbox_fds(const struct jail_spec *spec, int ctl)
{
    if (install_stdio(spec) < 0)
        control_die(ctl, errno, "set up stdio");
    int keep[JAIL_MAX_FILES + 4] = {0, 1, 2, ctl};
    size_t n = 4;
    for (size_t i = 0; i < spec->n_files; i++)
        keep[n++] = spec->files[i].host_fd;
    fd_close_all_except(keep, n);
}

static void close_file_sources(const struct jail_spec *spec)
{
    for (size_t i = 0; i < spec->n_files; i++)
        close(spec->files[i].host_fd);
}

void jail_child_main(const struct jail_spec *spec, int ctl, const struct seccomp_program *prog)
{
    keep_only_sandbox_fds(spec, ctl);
    reset_signals();
    proctitle_set("hutch-init");
    wait_for_go(ctl);
    if (userns_become_root() < 0)
        control_die(ctl, errno, "become root in the user namespace");
    /* After the credential change above: a change of credentials clears the death signal. */
    if (spec->die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        control_die(ctl, errno, "PR_SET_PDEATHSIG");
    /* As the sandbox's root, whose namespace capabilities set them, and before the sandbox's
     * /proc hides the knobs read-only. */
    int cgroupns_limit = shares_apply(ctl, &spec->limits);
    const char *hostname = spec->hostname ? spec->hostname : "hutch";
    if (sethostname(hostname, strlen(hostname)) < 0)
        control_die(ctl, errno, "sethostname");
    if (netns_loopback_up() < 0)
        control_die(ctl, errno, "bring up lo");
    umask(022);
    int output_fd = rootfs_enter(ctl, spec);
    /* Into the v1 groups before anything the caller or the program controls is charged: the
     * files copied in, and everything after. */
    join_cgroups(ctl);
    /* Now, not at clone: only after we joined every cgroup does the namespace's
     * root sit at our own cgroup, hiding the host's tree. */
    if (unshare(CLONE_NEWCGROUP) < 0)
        control_die(ctl, errno, "unshare cgroup namespace");
    shares_close_cgroup_namespaces(ctl, cgroupns_limit);
    rootfs_copy_files(ctl, spec, spec->as_root ? 0 : JAIL_USER_UID);
    close_file_sources(spec);
    if (privs_apply_rlimits(&spec->limits) < 0)
        control_die(ctl, errno, "setrlimit");
    if (setsid() < 0)
        control_die(ctl, errno, "setsid");
    init_main(spec, ctl, prog, output_fd);
}

/* execve, but only of what the sandbox's own tree names: never through a magic link
 * (/proc/self/fd/N, /proc/N/root, /proc/N/cwd). No fd of the host's is open in here any more, so
 * such a link could only lead back inside; refusing them keeps it so if one ever were. */
static void exec_resolved(const char *path, char *const argv[], char *const envp[])
{
    /* Not RESOLVE_IN_ROOT: a relative path must name what execve will run, from the cwd. */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0)
        return;
    close(fd);
    execve(path, argv, envp);
}

/* Looks file up in the PATH of the payload's own environment (execvpe would use ours). */
static void exec_in_path(const char *file, char *const argv[], char *const envp[])
{
    if (strchr(file, '/')) {
        exec_resolved(file, argv, envp);
        return;
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    int best = ENOENT;
    char buf[PATH_MAX];
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        size_t flen = strlen(file);
        if (dlen + flen + 2 <= sizeof buf) {
            memcpy(buf, dlen ? p : ".", dlen ? dlen : 1);
            size_t at = dlen ? dlen : 1;
            buf[at] = '/';
            memcpy(buf + at + 1, file, flen + 1);
            exec_resolved(buf, argv, envp);
            if (errno != ENOENT && errno != ENOTDIR)
                best = errno;
        }
        if (*end == '\0')
            break;
        p = end;
    }
    errno = best;
}

void jail_exec_payload(const struct jail_spec *spec, int ctl, const struct seccomp_program *prog)
{
    /* stdio is in place since the child's start (keep_only_sandbox_fds). Every other inherited
     * fd closes at exec; ctl stays open until then to report failure. */
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
        control_die(ctl, errno, "close_range");
    uid_t uid = spec->as_root ? 0 : JAIL_USER_UID;
    const char *cwd = spec->cwd ? spec->cwd : (spec->as_root ? "/root" : JAIL_USER_HOME);
    if (privs_drop(uid, spec->as_root && spec->writable_root ? JAIL_WRITABLE_ROOT_CAPS : 0,
                   spec->die_with_parent) < 0)
        control_die(ctl, errno, "drop privileges");
    /* The OOM killer must pick the program, never init: tmpfs pages belong to no process, so at
     * the memory limit init (a copy of the supervisor) can look largest. Lowering init's score
     * needs CAP_SYS_RESOURCE, which hosts may withhold; raising the payload's needs nothing, and
     * under host memory pressure it is right too: a sandbox goes before the host's services.
     * Dumpable first: the credential change made us not, and /proc/self would then belong to
     * host root, out of our reach. (execve sets it again as for any program.) */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 ||
        file_write_str_at(AT_FDCWD, "/proc/self/oom_score_adj", "1000", NULL) < 0)
        control_die(ctl, errno, "set oom_score_adj");
    /* And back: dumpable belongs to the memory, which until execve is init's (vfork). A
     * dumpable init would open its /proc/1/{mem,fd} to a payload of the same uid. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        control_die(ctl, errno, "PR_SET_DUMPABLE");
    /* Resolved inside the sandbox's root only (RESOLVE_IN_ROOT from "/", which the pivot made
     * our cwd), and never through a magic link. */
    int cwd_fd = inroot_open(AT_FDCWD, cwd, O_PATH | O_DIRECTORY, 0);
    if (cwd_fd < 0 || fchdir(cwd_fd) < 0)
        control_die(ctl, errno, "working directory %s", cwd);
    close(cwd_fd);
    if (landlock_restrict_for(spec->writable_root) < 0)
        control_die(ctl, errno, "landlock");
    /* Last: from here on the filter applies to us, and it forbids much of the above. */
    if (seccomp_install(prog) < 0)
        control_die(ctl, errno, "install seccomp filter");
    exec_in_path(spec->argv[0], (char *const *)spec->argv, (char *const *)spec->envp);
    int e = errno;
    control_send_simple(ctl, CONTROL_EXEC_ERROR, e, 0, spec->argv[0]);
    _exit(127);
}
