#include "init/init.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/privs.h"

/* Closes every fd but keep: init must not hold the payload's pipes (the supervisor waits for
 * their EOF) nor anything of the host's. */
static void close_all_but(int keep)
{
    if (keep > 0)
        close_range(0, (unsigned)keep - 1, 0);
    close_range((unsigned)keep + 1, ~0U, 0);
}

void init_main(const struct jail_spec *spec, int ctl, const struct seccomp_program *prog,
               int output_fd)
{
    /* READY first: with vfork below we would only get to say it after the payload's exec, and
     * its own reports (an exec failure) must reach the host after READY, not before. */
    struct control_msg ready = {.type = CONTROL_READY};
    if (control_send(ctl, &ready, output_fd) < 0)
        _exit(1);
    /* vfork: the payload only prepares its exec, so copying init's page tables for it would be
     * wasted (a quarter of a millisecond here). Init waits until the payload has exec'd or
     * died; the payload never returns from jail_exec_payload, and its fds are its own. */
    pid_t payload = vfork();
    if (payload < 0)
        control_die(ctl, errno, "fork payload");
    if (payload == 0) {
        if (output_fd >= 0)
            close(output_fd);
        jail_exec_payload(spec, ctl, prog);
    }
    /* Whatever the payload did to the memory it shared with us until its exec: init is never
     * dumpable, so no process inside can read or write it through /proc/1. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        control_die(ctl, errno, "PR_SET_DUMPABLE");
    close_all_but(ctl);
    /* Init keeps sandbox uid 0 but no capability, under a filter that allows only reaping,
     * reporting and exiting. This runs beside the payload's start, often on its CPU: the
     * payload's full drop (41 bounding-set calls) and its long filter cost it 0.2-0.3 ms. */
    struct seccomp_program own;
    if (seccomp_builtin(SECCOMP_PROFILE_INIT, &own) < 0 || privs_drop_caps() < 0 ||
        seccomp_install(&own) < 0)
        control_die(ctl, errno, "drop init's privileges");
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
        control_send_simple(ctl, CONTROL_EXIT, code, sig, NULL);
        /* Init's exit kills every process left in the namespace (daemons the payload left). */
        _exit(0);
    }
}
