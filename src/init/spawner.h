/* init's spawner (spawner.c): the one process in a sandbox that can still exec. */
#pragma once
#include "jail/seccomp.h"

/* Serves SPAWN messages from init on sock until init closes it; never returns. prog is the
 * commands' seccomp program. */
_Noreturn void spawner_main(int sock, const struct seccomp_program *prog);
