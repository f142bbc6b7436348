/* hutch init: pid 1 of every sandbox. Today a reaper that forks the payload and reports how it
 * ended; the agent half (commands, files, watches for the daemon) grows here. */
#pragma once
#include "jail/jail.h"

/* Forks the payload (jail_exec_payload), sends CONTROL_READY with output_fd, drops its own
 * privileges, reaps every child, and sends CONTROL_EXIT when the payload ends. Never returns:
 * init's exit takes the whole pid namespace with it. */
_Noreturn void init_main(const struct jail_spec *spec, int ctl, const struct seccomp_program *prog,
                         int output_fd);
