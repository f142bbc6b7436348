/* The client subcommands over the daemon's socket (src/cli/README.md): each takes argv from its
 * own name on and returns the process's exit status (remote.h: 0, 1 for an error the daemon or
 * the sandbox reports, 2 for a usage error; exec and sh the command's own). */
#pragma once

int create_main(int argc, char **argv); /* sandbox_cmds.c */
int ls_main(int argc, char **argv);
int pause_main(int argc, char **argv);
int resume_main(int argc, char **argv);
int kill_main(int argc, char **argv);
int logs_main(int argc, char **argv); /* logs.c */
int exec_main(int argc, char **argv); /* exec.c */
int sh_main(int argc, char **argv);
int cp_main(int argc, char **argv); /* cp.c */
