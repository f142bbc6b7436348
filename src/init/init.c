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
#include "init/payload.h"
#include "jail/control.h"
#include "jail/privs.h"
#include "util/parse.h"
#include "util/proctitle.h"

struct init_options {
    int ctl;       /* the control channel to the host */
    int output_fd; /* the sandbox's /output directory, handed to the host with READY; or -1 */
    enum seccomp_profile seccomp;
    struct init_payload payload;
    bool agent;    /* no payload: serve the control protocol (agent.c) */
    int listen_fd; /* the agent's listening socket */
    int hold_fd;   /* kept open for init's life, or -1 */
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
static void parse_options(int argc, char **argv, struct init_options *o)
{
    o->ctl = -1;
    o->output_fd = -1;
    o->listen_fd = -1;
    o->hold_fd = -1;
    int i = 1, seccomp = -1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (option_int(a, "--ctl", 3, 1 << 20, &o->ctl) ||
            option_int(a, "--output", -1, 1 << 20, &o->output_fd) ||
            option_int(a, "--listen", 3, 1 << 20, &o->listen_fd) ||
            option_int(a, "--hold", 3, 1 << 20, &o->hold_fd) ||
            option_int(a, "--seccomp", 0, SECCOMP_PROFILE_INIT - 1, &seccomp))
            continue;
        if (strcmp(a, "--user=root") == 0 || strcmp(a, "--user=user") == 0)
            o->payload.as_root = strcmp(a, "--user=root") == 0;
        else if (strcmp(a, "--agent") == 0)
            o->agent = true;
        else if (strcmp(a, "--die-with-parent") == 0)
            o->payload.die_with_parent = true;
        else if (strcmp(a, "--writable-root") == 0)
            o->payload.writable_root = true;
        else if (strncmp(a, "--cwd=/", 7) == 0)
            o->payload.cwd = a + 6;
        else if (o->ctl >= 0)
            control_die(o->ctl, EINVAL, "hutch init: unknown option %.64s", a);
        else
            _exit(125);
    }
    if (o->ctl < 0)
        _exit(125); /* nothing to report to */
    if (seccomp < 0)
        control_die(o->ctl, EINVAL, "hutch init: needs --seccomp");
    o->seccomp = (enum seccomp_profile)seccomp;
    if (o->agent) {
        if (o->listen_fd < 0 || i < argc)
            control_die(o->ctl, EINVAL, "hutch init: --agent needs --listen and no payload");
        return;
    }
    if (i + 1 >= argc)
        control_die(o->ctl, EINVAL, "hutch init: needs a payload after --");
    o->payload.argv = argv + i + 1;
}

/* The payload's argv lives in the area proctitle_set wipes (so /proc/1/cmdline inside says
 * "hutch-init" and nothing of the host's): copy it first. */
static void copy_payload_argv(struct init_options *o)
{
    /* One block for the pointers and the strings: the count is bounded by ARG_MAX. */
    size_t n = 0, bytes = 0;
    while (o->payload.argv[n])
        bytes += strlen(o->payload.argv[n++]) + 1;
    size_t cwd_len = o->payload.cwd ? strlen(o->payload.cwd) + 1 : 0;
    char **copy = malloc((n + 1) * sizeof *copy + bytes + cwd_len);
    if (!copy)
        control_die(o->ctl, ENOMEM, "copy the payload's command line");
    char *at = (char *)(copy + n + 1);
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(o->payload.argv[k]) + 1;
        copy[k] = memcpy(at, o->payload.argv[k], len);
        at += len;
    }
    copy[n] = NULL;
    o->payload.argv = copy;
    if (o->payload.cwd)
        o->payload.cwd = memcpy(at, o->payload.cwd, cwd_len);
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
    parse_options(argc, argv, &o);
    o.payload.envp = envp;
    if (!o.agent)
        copy_payload_argv(&o);
    proctitle_init(argc, argv);
    proctitle_set("hutch-init");
    if (o.agent) {
        struct seccomp_program prog;
        if (seccomp_builtin(o.seccomp, &prog) < 0)
            control_die(o.ctl, EINVAL, "seccomp profile %d", (int)o.seccomp);
        agent_main(o.ctl, o.listen_fd, o.hold_fd, &prog, o.payload.writable_root);
    }
    /* The exec may have cleared the death signal (it does when credentials change); set again,
     * then look whether the parent is already gone: its end of the channel is closed then. */
    if (o.payload.die_with_parent) {
        struct pollfd pfd = {.fd = o.ctl, .events = 0};
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
            control_die(o.ctl, errno, "PR_SET_PDEATHSIG");
        if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR)))
            _exit(1);
    }
    struct seccomp_program prog;
    if (seccomp_builtin(o.seccomp, &prog) < 0)
        control_die(o.ctl, EINVAL, "seccomp profile %d", (int)o.seccomp);
    /* READY first: with vfork below we would only get to say it after the payload's exec, and
     * its own reports (an exec failure) must reach the host after READY, not before. */
    struct control_msg ready = {.type = CONTROL_READY};
    if (control_send(o.ctl, &ready, o.output_fd) < 0)
        _exit(1);
    /* vfork: the payload only prepares its exec, so copying init's page tables for it would be
     * wasted. Init waits until the payload has exec'd or died; the payload never returns from
     * payload_exec, and its fds are its own. */
    pid_t payload = vfork();
    if (payload < 0)
        control_die(o.ctl, errno, "fork payload");
    if (payload == 0) {
        if (o.output_fd >= 0)
            close(o.output_fd);
        payload_exec(&o.payload, o.ctl, &prog);
    }
    /* Whatever the payload did to the memory it shared with us until its exec: init is never
     * dumpable, so no process inside can read or write it through /proc/1. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        control_die(o.ctl, errno, "PR_SET_DUMPABLE");
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
        if (pid != payload)
            continue; /* an orphan re-parented to us: reaped, nothing to report */
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        control_send_simple(o.ctl, CONTROL_EXIT, code, sig, NULL);
        /* Init's exit kills every process left in the namespace (daemons the payload left). */
        _exit(0);
    }
}
