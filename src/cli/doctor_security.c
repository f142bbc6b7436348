/* `hutch doctor`: the walls inside a sandbox, each installed in a probe child and tested: the
 * built-in seccomp programs, Landlock, and nftables (for egress rules, not used yet). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/doctor_internal.h"
#include "jail/landlock.h"
#include "jail/seccomp.h"
#include "util/strfmt.h"

/* ---------- seccomp ---------- */

/* Calls the filter must refuse, each with a harmless argument set, and what it must answer.
 * Without the filter (we are root) each would succeed or fail differently. */
static enum doctor_status seccomp_child(struct probe *p, void *arg, char *detail, size_t size)
{
    const struct seccomp_program *prog = arg;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "prctl(PR_SET_NO_NEW_PRIVS): %s",
                          strerror(errno));
    if (seccomp_install(prog) < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "installing the filter: %s", strerror(errno));
    /* unshare(0) does nothing and succeeds when allowed */
    errno = 0;
    long rc = syscall(SYS_unshare, 0);
    if (rc != -1 || errno != EPERM)
        return doctor_say(detail, size, DOCTOR_FAIL, "unshare(0) returned %ld (%s), want EPERM", rc,
                          strerror(errno));
    /* io_uring_setup(0, NULL) is EINVAL/EFAULT when allowed */
    errno = 0;
    rc = syscall(SYS_io_uring_setup, 0, NULL);
    if (rc != -1 || errno != ENOSYS)
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "io_uring_setup returned %ld (%s), want ENOSYS", rc, strerror(errno));
    errno = 0;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        close(fd);
    if (fd != -1 || errno != EAFNOSUPPORT)
        return doctor_say(detail, size, DOCTOR_FAIL,
                          "socket(AF_NETLINK) returned %d (%s), want "
                          "EAFNOSUPPORT",
                          fd, strerror(errno));
    /* ...and ordinary calls still work */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return doctor_say(detail, size, DOCTOR_FAIL, "open(/dev/null) under the filter: %s",
                          strerror(errno));
    close(fd);
    return doctor_say(
        detail, size, DOCTOR_OK,
        "installed after no_new_privs in a child: unshare -> "
        "EPERM, io_uring_setup -> ENOSYS, socket(AF_NETLINK) -> EAFNOSUPPORT, open works");
}

static bool same_program(const struct seccomp_program *a, const struct seccomp_program *b)
{
    return a->len == b->len && memcmp(a->filter, b->filter, a->len * sizeof *a->filter) == 0;
}

void check_seccomp(struct doctor_result *r)
{
    /* Sandboxes load the programs compiled into hutch at build time; that is what is tried. */
    struct seccomp_program builtin, strict;
    if (seccomp_builtin(SECCOMP_PROFILE_DEFAULT, &builtin) < 0 ||
        seccomp_builtin(SECCOMP_PROFILE_STRICT, &strict) < 0) {
        result_set(r, DOCTOR_FAIL, "hutch was built without its seccomp programs");
        return;
    }
    doctor_probe_run(r, seccomp_child, NULL, &builtin);
    if (r->status != DOCTOR_OK)
        return;
    /* Compiling again with this host's libseccomp shows whether the build-time program still
     * matches the policy source as this libseccomp reads it (it differs after an upgrade that
     * learned new syscall numbers: a rebuild picks them up). */
    char rest[sizeof r->detail], compiled[160];
    struct seccomp_program fresh = {0};
    err_t err;
    compiled[0] = '\0';
    if (seccomp_compile(SECCOMP_PROFILE_DEFAULT, &fresh, &err) < 0)
        strfmt_text_append(compiled, sizeof compiled, "; compiling it again here failed: %s",
                           err.msg);
    else
        strfmt_text_append(compiled, sizeof compiled, "; libseccomp here compiles %s",
                 same_program(&fresh, &builtin) ? "the same program"
                                                : "a different program (rebuild hutch)");
    seccomp_program_free(&fresh);
    snprintf(rest, sizeof rest, "%s", r->detail);
    result_set(r, DOCTOR_OK, "built-in default profile (%u BPF instructions) %s%s; strict: %u",
               (unsigned)builtin.len, rest, compiled, (unsigned)strict.len);
}

/* ---------- Landlock ---------- */

/* The newest Landlock ABI whose features src/jail/landlock.c uses. A kernel below it still gets
 * every rule its ABI knows; what is missing, and what stands in for it, is reported, so that a
 * warn says what is weaker and not only a number. ABI 4 (network rules) is not used: the
 * sandbox's only network is its own loopback; ABI 7 (audit logging) is not used either. */
#define LANDLOCK_ABI_USED 6

static const struct {
    int abi;
    const char *what;
} landlock_missing[] = {
    {2, "ABI 2 (Linux 5.19, file reparenting): moving or linking a file into another directory "
        "fails with EXDEV everywhere, the writable places too (mv falls back to copying)"},
    {3, "ABI 3 (6.2, truncation): truncate(2) and O_RDONLY|O_TRUNC outside the writable "
        "places are refused only by the read-only mounts and the files' owner (host root, "
        "nobody inside)"},
    {5, "ABI 5 (6.10, device ioctls): nothing lost, devices exist only under /dev, where hutch "
        "allows them, and every other mount is nodev"},
    {6, "ABI 6 (6.12, signal and abstract-socket scoping): init stays out of the payload's "
        "reach by other means: as pid 1 of its namespace with no signal handler the kernel drops "
        "every signal the payload sends it, and it has no abstract socket"},
};

static enum doctor_status landlock_child(struct probe *p, void *arg, char *detail, size_t size)
{
    int abi = *(const int *)arg;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return doctor_say(detail, size, DOCTOR_WARN, "prctl(PR_SET_NO_NEW_PRIVS): %s",
                          strerror(errno));
    /* The write rule is tried on a place outside the writable ones that is certainly writable
     * without Landlock: a tmpfs of this probe's own over /usr, in a mount namespace of its own
     * (so nothing of the host's is written even if the rule did not hold, and a read-only / — a
     * container's, the test guest's — does not hide the answer behind EROFS). Without the
     * privilege for that, a mkdir in / stands in. */
    const char *where = "/";
    if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
        mount("tmpfs", "/usr", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") == 0)
        where = "/usr/";
    if (landlock_restrict() < 0)
        return doctor_say(detail, size, DOCTOR_WARN,
                          "landlock_restrict() failed: %s; sandboxes would "
                          "fail to start",
                          strerror(errno));
    /* As root, only Landlock can refuse this. */
    char dir[64];
    snprintf(dir, sizeof dir, "%s.hutch-doctor-landlock-%d", where, (int)getpid());
    const char *fs = "mkdir outside the writable places -> EACCES";
    if (mkdir(dir, 0700) == 0) {
        rmdir(dir);
        return doctor_say(detail, size, DOCTOR_WARN,
                          "after landlock_restrict() a mkdir in %s "
                          "still worked: the rules do not apply",
                          where);
    }
    if (errno == EROFS)
        fs = "(/ is read-only, write rule not testable)";
    else if (errno == EACCES && geteuid() != 0)
        fs = "(not root, so the write rule is not testable)";
    else if (errno != EACCES)
        return doctor_say(detail, size, DOCTOR_WARN,
                          "after landlock_restrict() mkdir in %s gave %s, "
                          "want EACCES",
                          where, strerror(errno));
    if (abi < 6)
        return doctor_say(detail, size, DOCTOR_OK, "landlock_restrict() in a child: %s", fs);
    /* Signal scoping: the parent is outside our domain, so even signal 0 must be refused. */
    if (kill(getppid(), 0) == 0 || errno != EPERM)
        return doctor_say(detail, size, DOCTOR_WARN,
                          "kill(parent, 0) was not refused with "
                          "EPERM after landlock_restrict()");
    return doctor_say(detail, size, DOCTOR_OK,
                      "landlock_restrict() in a child: %s, "
                      "kill(parent, 0) -> EPERM (signal scoping)",
                      fs);
}

void check_landlock(struct doctor_result *r)
{
    int abi = landlock_abi_version();
    if (abi <= 0) {
        result_set(r, DOCTOR_WARN,
                   "no Landlock (hutch uses up to ABI %d): the kernel lacks "
                   "CONFIG_SECURITY_LANDLOCK or 'landlock' is not in the lsm= boot parameter; "
                   "sandboxes run without this second wall (namespaces and seccomp still apply)",
                   LANDLOCK_ABI_USED);
        return;
    }
    doctor_probe_run(r, landlock_child, NULL, &abi);
    char tried[sizeof r->detail];
    snprintf(tried, sizeof tried, "%s", r->detail);
    /* Landlock is a second layer: never a reason to refuse to run. */
    if (r->status != DOCTOR_OK) {
        result_set(r, DOCTOR_WARN, "kernel ABI %d, hutch uses up to ABI %d: %s", abi,
                   LANDLOCK_ABI_USED, tried);
        return;
    }
    if (abi >= LANDLOCK_ABI_USED) {
        result_set(r, DOCTOR_OK, "kernel ABI %d, hutch uses up to ABI %d (all of it here); %s", abi,
                   LANDLOCK_ABI_USED, tried);
        return;
    }
    char missing[sizeof r->detail] = "";
    for (size_t i = 0; i < sizeof landlock_missing / sizeof landlock_missing[0]; i++)
        if (landlock_missing[i].abi > abi)
            strfmt_text_append(missing, sizeof missing, "%s%s", missing[0] ? "; " : "",
                               landlock_missing[i].what);
    result_set(r, DOCTOR_WARN, "kernel ABI %d, hutch uses up to ABI %d; %s; missing here: %s", abi,
               LANDLOCK_ABI_USED, tried, missing);
}

/* ---------- nftables (not used yet) ---------- */

/* In a child, in a network namespace of its own (so the host's rules are never touched and the
 * table vanishes with it): can the nft command create a table? That needs the tool and the
 * kernel's nf_tables, which is what egress rules will need. */
static enum doctor_status nft_child(struct probe *p, void *arg, char *detail, size_t size)
{
    const char *nft = arg;
    if (unshare(CLONE_NEWNET) < 0)
        return doctor_say(detail, size, DOCTOR_WARN, "unshare(CLONE_NEWNET): %s", strerror(errno));
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) < 0)
        return doctor_say(detail, size, DOCTOR_WARN, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(err_pipe[0]);
        close(err_pipe[1]);
        return doctor_say(detail, size, DOCTOR_WARN, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
        }
        dup2(err_pipe[1], STDERR_FILENO);
        execl(nft, "nft", "add", "table", "inet", "hutch_doctor", (char *)NULL);
        _exit(127);
    }
    close(err_pipe[1]);
    /* Wait first (bounded), read after: a hung nft must not hold us in read(). Its one-line
     * error fits in the pipe. */
    int status;
    bool done = doctor_wait_bounded(pid, &status, PROBE_TIMEOUT_MS / 2) == 0;
    if (!done) {
        kill(pid, SIGKILL);
        doctor_reap(pid);
    }
    char msg[512] = "";
    ssize_t n = done ? read(err_pipe[0], msg, sizeof msg - 1) : 0;
    msg[n > 0 ? n : 0] = '\0';
    msg[strcspn(msg, "\n")] = '\0';
    close(err_pipe[0]);
    if (!done)
        return doctor_say(detail, size, DOCTOR_WARN, "%s did not finish", nft);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[128];
        doctor_describe_wait_status(status, how, sizeof how);
        return doctor_say(detail, size, DOCTOR_WARN,
                          "'nft add table' in a new network namespace: %s%s%s", how,
                          msg[0] ? ": " : "", msg);
    }
    return doctor_say(detail, size, DOCTOR_OK, "ok");
}

static bool find_in_path(const char *prog, char *out, size_t size)
{
    /* root's usual sbin directories too: a plain user PATH often lacks them */
    const char *path = getenv("PATH");
    char dirs[4096];
    /* A PATH too long to hold is not searched half: the usual directories are. */
    if (strfmt(dirs, sizeof dirs, "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin") < 0)
        strfmt(dirs, sizeof dirs, "/usr/bin:/bin:/usr/sbin:/sbin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save))
        if (strfmt(out, size, "%s/%s", d, prog) == 0 && access(out, X_OK) == 0)
            return true;
    return false;
}

void check_nftables(struct doctor_result *r)
{
    char nft[PATH_MAX];
    if (!find_in_path("nft", nft, sizeof nft)) {
        result_set(r, DOCTOR_WARN,
                   "no nft command: not needed yet (sandboxes have no network), needed later "
                   "for egress rules; fix: apt-get install nftables");
        return;
    }
    doctor_probe_run(r, nft_child, NULL, nft);
    if (r->status == DOCTOR_OK) {
        result_set(r, DOCTOR_OK,
                   "%s creates a table in a fresh network namespace (for sandbox network "
                   "egress rules, not used yet)",
                   nft);
        return;
    }
    char why[sizeof r->detail];
    snprintf(why, sizeof why, "%s", r->detail);
    result_set(r, DOCTOR_WARN, "%s: not needed yet (sandboxes have no network)", why);
}
