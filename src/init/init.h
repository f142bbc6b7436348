/* hutch init: pid 1 of every sandbox, exec'd by the sandbox's setup child (src/jail/inside.c),
 * never a fork image of its caller. In a sandbox with a command, the reaper of the payload that
 * the setup child started before the exec, reporting how it ended; in one without, the agent
 * (commands, files, watches for the daemon). */
#pragma once

/* main() of a process started as pid 1 under the name JAIL_INIT_ARGV0. Its options, on its
 * command line or (with a command) as its environment (src/init/README.md), are its whole
 * configuration. Never returns: init's exit takes the whole pid namespace with it. */
_Noreturn void init_main(int argc, char **argv, char **envp);
