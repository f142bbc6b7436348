/* hutch init: pid 1 of every sandbox, exec'd by the sandbox's setup child (src/jail/inside.c),
 * never a fork image of its caller. Today a reaper that forks the payload and reports how it
 * ended; the agent half (commands, files, watches for the daemon) grows here. */
#pragma once

/* main() of a process started as pid 1 under the name JAIL_INIT_ARGV0. Its command line
 * (src/init/README.md) is its whole configuration; its environment is the payload's. Never
 * returns: init's exit takes the whole pid namespace with it. */
_Noreturn void init_main(int argc, char **argv, char **envp);
