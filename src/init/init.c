#include "init/init.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/agent.h"
#include "jail/control.h"
#include "jail/privs.h"
#include "util/parse.h"
#include "util/proctitle.h"

struct init_options {
    int ctl;       /* the control channel to the host */
    pid_t payload; /* the payload, started by the setup child before our exec; or 0 */
    bool die_with_parent;
    bool agent;                   /* no payload: serve the control protocol (agent.c) */
    enum seccomp_profile seccomp; /* the agent's commands' profile (never init's own) */
    bool writable_root;           /* the agent's commands' (struct payload) */
    int listen_fd;                /* the agent's listening socket */
    int hold_fd;                  /* kept open for init's life, or -1 */
};

/* "--NAME=N" into *out; false when arg is not that option or N is not a number in range. */
static bool option_int(const char *arg, const char *name, int min, int max, int *out)
{
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0 || arg[len] != '=')
        return false;
    char *end;
    errno = 0;
    long v = strtol(arg + len + 1, &end, 10);
    if (errno || end == arg + len + 1 || *end || v < min || v > max)
        return false;
    *out = (int)v;
    return true;
}

/* The command line comes from the setup child, i.e. from hutch itself, never from the sandbox's
 * program; it is still checked, so that a mistake fails loudly instead of running something. */
static void parse_options(char **opts, struct init_options *o)
{
    o->ctl = -1;
    o->listen_fd = -1;
    o->hold_fd = -1;
    int seccomp = -1, payload = 0;
    for (; *opts; opts++) {
        const char *a = *opts;
        if (option_int(a, "--ctl", 3, 1 << 20, &o->ctl) ||
            option_int(a, "--payload", 2, 1 << 22, &payload) ||
            option_int(a, "--listen", 3, 1 << 20, &o->listen_fd) ||
            option_int(a, "--hold", 3, 1 << 20, &o->hold_fd) ||
            option_int(a, "--seccomp", 0, SECCOMP_PROFILE_INIT - 1, &seccomp))
            continue;
        if (strcmp(a, "--agent") == 0)
            o->agent = true;
        else if (strcmp(a, "--die-with-parent") == 0)
            o->die_with_parent = true;
        else if (strcmp(a, "--writable-root") == 0)
            o->writable_root = true;
        else if (o->ctl >= 0)
            control_die(o->ctl, EINVAL, "hutch init: unknown option %.64s", a);
        else
            _exit(125);
    }
    if (o->ctl < 0)
        _exit(125); /* nothing to report to */
    o->payload = (pid_t)payload;
    if (o->agent) {
        if (seccomp < 0 || o->listen_fd < 0 || o->payload)
            control_die(o->ctl, EINVAL,
                        "hutch init: --agent needs --seccomp, --listen, no payload");
        o->seccomp = (enum seccomp_profile)seccomp;
    } else if (!o->payload) {
        control_die(o->ctl, EINVAL, "hutch init: needs --payload or --agent");
    }
}

/* Closes every fd but keep: init must not hold the payload's pipes (the supervisor waits for
 * their EOF) nor anything of the host's. */
static void close_all_but(int keep)
{
    if (keep > 0)
        close_range(0, (unsigned)keep - 1, 0);
    close_range((unsigned)keep + 1, ~0U, 0);
}

void init_main(int argc, char **argv, char **envp)
{
    struct init_options o = {0};
    /* A sandbox's command runs already, and may read /proc/1/cmdline before our first
     * instruction: its init has its options in the environment (which /proc/1/environ shows to
     * no process inside, the kernel's ptrace check), and "hutch-init" alone as its command line.
     * An agent's init has them on its command line, wiped below. */
    parse_options(argc > 1 ? argv + 1 : envp, &o);
    if (o.agent) {
        proctitle_init(argc, argv);
        proctitle_set("hutch-init");
        struct seccomp_program prog;
        if (seccomp_builtin(o.seccomp, &prog) < 0)
            control_die(o.ctl, EINVAL, "seccomp profile %d", (int)o.seccomp);
        agent_main(o.ctl, o.listen_fd, o.hold_fd, &prog, o.writable_root);
    }
    /* The payload runs already, beside us: non-dumpable first, so that no process inside can
     * read or write init's memory through /proc/1. Until this step the exec's full capability
     * set (which no process inside has) kept them out. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        control_die(o.ctl, errno, "PR_SET_DUMPABLE");
    /* The exec may have cleared the death signal (it does when credentials change); set again,
     * then look whether the parent is already gone: its end of the channel is closed then. */
    if (o.die_with_parent) {
        struct pollfd pfd = {.fd = o.ctl, .events = 0};
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
            control_die(o.ctl, errno, "PR_SET_PDEATHSIG");
        if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR)))
            _exit(1);
    }
    close_all_but(o.ctl);
    /* Init keeps sandbox uid 0 but no capability, under a filter that allows only reaping,
     * reporting and exiting. This runs beside the payload's start, often on its CPU. */
    struct seccomp_program own;
    if (seccomp_builtin(SECCOMP_PROFILE_INIT, &own) < 0 || privs_drop_caps() < 0 ||
        seccomp_install(&own) < 0)
        control_die(o.ctl, errno, "drop init's privileges");
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            _exit(1); /* no children left: cannot happen before the payload is reaped */
        if (pid != o.payload)
            continue; /* an orphan re-parented to us: reaped, nothing to report */
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        control_send_simple(o.ctl, CONTROL_EXIT, code, sig, NULL);
        /* Init's exit kills every process left in the namespace (daemons the payload left). */
        _exit(0);
    }
}
