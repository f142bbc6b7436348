/* Starting one command in a running sandbox: its own cgroup, its pipes or its pty, its user,
 * then the same last steps as a payload (src/jail/payload.c). Runs in init's spawner, the one
 * process inside that may still exec (README.md). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "jail/seccomp.h"
#include "util/err.h"

#define COMMAND_MAX_V1_FDS 5 /* CGROUP_HOST_MAX_FDS less the cgroup2 one */

struct command_spec {
    char **argv; /* argv[0] is looked up in the command's own PATH */
    char **envp;
    const char *cwd; /* NULL = the user's home */
    bool as_root;
    bool writable_root; /* the sandbox's (struct payload), not the request's */
    bool stdin_pipe; /* else stdin is /dev/null (or the pty) */
    bool pty;
    unsigned short rows, cols;
    /* A sudo command's stdio: the asker's own fds, which it gets as they are (no pipes made, no
     * ends for anyone); -1 each otherwise. */
    int stdio[3];
    int cgroup_fd;                     /* the command's cgroup2 directory (from the host), or -1 */
    int v1_fds[COMMAND_MAX_V1_FDS];    /* the command's v1 `tasks` files (from the host) */
    size_t n_v1_fds;
};

/* The host's ends: output pipes (or the pty's master) and stdin's write end. -1 where none. */
struct command_fds {
    int stdout_r, stderr_r, stdin_w, pty_master;
};

/* The host's ends are all -1 for a command with stdio given. */
/* Starts the command as a child of init (CLONE_PARENT: init reaps it and learns its status),
 * born in its cgroup. Returns once it has exec'd (0, *pid its pid in the sandbox) or failed
 * before (-1, err says why; the child is gone). Close-on-exec fds in out. */
int command_spawn(const struct command_spec *spec, const struct seccomp_program *prog,
                  pid_t *pid, struct command_fds *out, err_t *err);
void command_fds_close(struct command_fds *fds);
