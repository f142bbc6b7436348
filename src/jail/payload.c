/* The payload's last steps, in the process made for it (vforked by the setup child, cloned by
 * init's spawner for a command): privileges, working directory, Landlock, seccomp last, and the
 * execve of what the sandbox's own tree names. */
#include "jail/payload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/inroot.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/privs.h"
#include "util/fileio.h"

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

int payload_confine(const struct payload *p, const struct seccomp_program *prog, const char **what)
{
    uid_t uid = p->as_root ? 0 : JAIL_USER_UID;
    const char *cwd = p->cwd ? p->cwd : (p->as_root ? "/root" : JAIL_USER_HOME);
    uint64_t keep_caps = p->as_root && p->writable_root ? JAIL_WRITABLE_ROOT_CAPS : 0;
    *what = "drop privileges";
    if (privs_drop(uid, keep_caps, p->die_with_parent) < 0)
        return -1;
    /* The OOM killer must pick the program, never init: tmpfs pages belong to no process, so at
     * the memory limit init (a copy of the supervisor) can look largest. Lowering init's score
     * needs CAP_SYS_RESOURCE, which hosts may withhold; raising the payload's needs nothing, and
     * under host memory pressure it is right too: a sandbox goes before the host's services.
     * Dumpable first: the credential change made us not, and /proc/self would then belong to
     * host root, out of our reach. (execve sets it again as for any program.) */
    *what = "set oom_score_adj";
    if (!p->never_execs &&
        (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 ||
         file_write_str_at(AT_FDCWD, "/proc/self/oom_score_adj", "1000", NULL) < 0))
        return -1;
    /* And back: dumpable belongs to the memory, which until execve is our parent's (vfork): the
     * setup child's, soon to be init's, or the spawner's. A dumpable parent would open its
     * /proc/PID/{mem,fd} to a payload of the same uid. */
    *what = "PR_SET_DUMPABLE";
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return -1;
    /* Resolved inside the sandbox's root only (RESOLVE_IN_ROOT from "/", which the pivot made
     * our cwd), and never through a magic link. */
    *what = "working directory";
    int cwd_fd = inroot_open(AT_FDCWD, cwd, O_PATH | O_DIRECTORY, 0);
    if (cwd_fd < 0 || fchdir(cwd_fd) < 0)
        return -1;
    close(cwd_fd);
    *what = "landlock";
    if (landlock_restrict_for(p->writable_root) < 0)
        return -1;
    /* Last: from here on the filter applies to us, and it forbids much of the above. */
    *what = "install seccomp filter";
    if (seccomp_install(prog) < 0)
        return -1;
    return 0;
}

void payload_exec(const struct payload *p, int ctl, const struct seccomp_program *prog)
{
    /* stdio is in place since the child's start (keep_only_sandbox_fds). Every other inherited
     * fd closes at exec; ctl stays open until then to report failure. */
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
        control_die(ctl, errno, "close_range");
    const char *what;
    if (payload_confine(p, prog, &what) < 0) {
        if (strcmp(what, "working directory") == 0)
            control_die(ctl, errno, "working directory %s",
                        p->cwd ? p->cwd : (p->as_root ? "/root" : JAIL_USER_HOME));
        control_die(ctl, errno, "%s", what);
    }
    exec_in_path(p->argv[0], p->argv, p->envp);
    int e = errno;
    control_send_simple(ctl, CONTROL_EXEC_ERROR, e, 0, p->argv[0]);
    _exit(127);
}
