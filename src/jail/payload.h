/* The payload's last steps before its execve, from inside: user, cwd, Landlock, seccomp, exec.
 * Run by the setup child for a sandbox's command (inside.c, in the process it vforks just
 * before init's exec) and by init's spawner for each command of an agent sandbox
 * (src/init/command.c). */
#pragma once
#include <stdbool.h>

#include "jail/seccomp.h"

struct payload {
    char *const *argv; /* argv[0] is looked up in the payload's own PATH */
    char *const *envp;
    const char *cwd; /* NULL = the user's home (root's for a root payload) */
    bool as_root;
    bool die_with_parent;
    /* The sandbox has a writable root (jail_spec.writable_root): a root program keeps
     * JAIL_WRITABLE_ROOT_CAPS, and Landlock allows writes beneath "/" (the root is the
     * sandbox's own). A property of the sandbox, never of one request. */
    bool writable_root;
    /* It runs on without an execve (a kernel from the host's zygote: enter.h): its oom score was
     * set before, and it stays non-dumpable throughout, its memory being the zygote's copy. */
    bool never_execs;
};

/* The steps before the execve: privileges dropped, oom score, cwd, Landlock, seccomp last. In
 * the process that then runs the payload (no fd but stdio should be open). 0, or -1 with errno
 * and *what naming the step that failed. Also run by a kernel forked from the host's zygote,
 * which never execs (src/jail/enter.h). */
int payload_confine(const struct payload *p, const struct seccomp_program *prog, const char **what);

/* cwd, drops, Landlock, seccomp, execve. stdio is already 0-2. Reports an exec failure over ctl
 * and exits 127; any other failure dies over ctl as a setup error. Never returns. */
_Noreturn void payload_exec(const struct payload *p, int ctl, const struct seccomp_program *prog);
