/* A files worker: forked by the spawner on init's first request for its user, it serves the
 * sandbox's files for one user (root or user) and holds nothing else. It is in the sandbox's mount
 * namespace, with "/" (the sandbox's root) as the root of every path; it holds its socket to init
 * and the root's fd, and the files it opens only until init has them. Its rights are its user's,
 * fixed before its filter and kept by it (README.md, "Files"):
 *
 *   root's worker: uid 0, and of all capabilities only CAP_CHOWN, CAP_DAC_OVERRIDE and
 *                  CAP_FOWNER (in the sandbox's user namespace: none of the host's);
 *   both:          the Landlock rules of a command in the same sandbox (writes beneath the
 *                  writable places only, or beneath / in a writable root);
 *   user's worker: fsuid JAIL_USER_UID and fsgid JAIL_USER_GID, no supplementary group, no
 *                  capability: every permission check is the user's. Its real and effective
 *                  uid stay 0 (sandbox root's, with no capability), so that the user's own
 *                  processes cannot signal it; the filter has no setfsuid to undo it.
 *
 * Both are non-dumpable (their /proc entries belong to the sandbox's root, and nothing can
 * ptrace them) and run the `files` seccomp allow-list: file calls, inotify, their socket;
 * execve, fork, clone, socket creation, kill, ptrace, mount, namespace and set*id calls kill. */
#include "init/files_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "files/files.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/privs.h"
#include "jail/seccomp.h"
#include "util/fds.h"

/* Requests are small (two paths and a few numbers): anything longer is not from init. */
#define REQUEST_MAX (2 * PROTO_MAX_STRING + 1024)

void files_worker_send(struct files_worker *w, const void *buf, size_t len, const int *fds,
                       size_t n_fds)
{
    if (len == 0)
        return; /* did not fit: never happens with the bounds the builders keep */
    for (;;) {
        if (proto_send(w->sock, buf, len, fds, n_fds) == 0)
            return;
        if (errno != EAGAIN)
            _exit(0); /* init is gone: so is the sandbox */
        struct pollfd p = {.fd = w->sock, .events = POLLOUT};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            _exit(1);
        if (p.revents & (POLLHUP | POLLERR))
            _exit(0);
    }
}

/* Identity and capabilities, in this order: the fsuid change drops the file capabilities from
 * the effective set, capset then leaves exactly the ones kept. */
static int become(bool as_root)
{
    /* Commands run as the user have no supplementary group either (privs_drop). */
    if (setgroups(0, NULL) < 0)
        return -1;
    if (!as_root) {
        setfsgid(JAIL_USER_GID);
        setfsuid(JAIL_USER_UID);
        /* Both return the previous value whatever happens: ask again to know. */
        if ((gid_t)setfsgid((gid_t)-1) != JAIL_USER_GID ||
            (uid_t)setfsuid((uid_t)-1) != JAIL_USER_UID) {
            errno = EPERM;
            return -1;
        }
    }
    uint32_t keep = as_root ? (1u << CAP_CHOWN) | (1u << CAP_DAC_OVERRIDE) | (1u << CAP_FOWNER) : 0;
    return privs_keep_caps(keep);
}

static void serve_request(struct files_worker *w)
{
    uint8_t buf[REQUEST_MAX];
    int fds[PROTO_MAX_FDS];
    size_t n_fds = 0;
    ssize_t n = proto_recv(w->sock, buf, sizeof buf, fds, PROTO_MAX_FDS, &n_fds);
    if (n == 0)
        _exit(0); /* init closed us */
    /* Requests carry no fds; a message that does not fit is not init's. */
    for (size_t i = 0; i < n_fds; i++)
        close(fds[i]);
    if (n > 0 && n_fds == 0)
        files_ops_serve(w, buf, (size_t)n);
}

_Noreturn void files_worker_main(int sock, bool as_root, bool writable_root)
{
    /* Nothing of the spawner's: its socket to init, the running commands' cgroup fds. */
    fd_close_all_except(&sock, 1);
    static struct files_worker w;
    w.sock = sock;
    w.as_root = as_root;
    prctl(PR_SET_NAME, as_root ? "hutch-files-0" : "hutch-files-u", 0, 0, 0);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        _exit(1);
    /* The pivot made "/" the sandbox's root, for init and so for us. */
    w.root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct seccomp_program prog;
    /* Landlock as for a command of the same sandbox: writes only where a command could write. */
    if (w.root_fd < 0 || become(as_root) < 0 || landlock_restrict_for(writable_root) < 0 ||
        seccomp_builtin(SECCOMP_PROFILE_FILES, &prog) < 0 || seccomp_install(&prog) < 0)
        _exit(1); /* init sees the socket close, and answers file requests with EIO */
    for (;;) {
        struct pollfd p[1 + FILES_WORKER_MAX_WATCHES];
        uint32_t ids[FILES_WORKER_MAX_WATCHES];
        size_t n = w.n_watches;
        p[0] = (struct pollfd){.fd = w.sock, .events = POLLIN};
        for (size_t i = 0; i < n; i++) {
            p[1 + i] = (struct pollfd){.fd = files_watch_fd(w.watches[i].watch), .events = POLLIN};
            ids[i] = w.watches[i].id;
        }
        if (poll(p, 1 + n, -1) < 0)
            continue;
        /* Watches first: a request may close one, and its fd number with it. */
        for (size_t i = 0; i < n; i++) {
            if (!p[1 + i].revents)
                continue;
            for (size_t k = 0; k < w.n_watches; k++)
                if (w.watches[k].id == ids[i]) {
                    files_ops_watch_read(&w, k);
                    break;
                }
        }
        if (p[0].revents & POLLIN)
            serve_request(&w);
        else if (p[0].revents & (POLLHUP | POLLERR))
            _exit(0);
    }
}
