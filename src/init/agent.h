/* init as a sandbox's agent (agent.c): serves the control protocol, starts commands. */
#pragma once
#include <stdbool.h>

#include "jail/seccomp.h"

/* ctl: the setup channel, which becomes the first host connection after READY; listen_fd: the
 * listening socket the host passed; hold_fd: kept open for init's life (the uid range lock), or
 * -1; prog: the commands' seccomp program; writable_root: the sandbox has one (struct payload).
 * Never returns. */
_Noreturn void agent_main(int ctl, int listen_fd, int hold_fd, const struct seccomp_program *prog,
                          bool writable_root);
