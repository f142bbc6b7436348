/* init's spawner (spawner.c): the one process in a sandbox that can still exec. */
#pragma once
#include <stdbool.h>

#include "jail/seccomp.h"

/* Serves SPAWN messages from init on sock until init closes it; never returns. prog is the
 * commands' seccomp program; writable_root says whether the sandbox has one (struct payload), for
 * every command alike: a SPAWN cannot ask for it. */
_Noreturn void spawner_main(int sock, const struct seccomp_program *prog, bool writable_root);
