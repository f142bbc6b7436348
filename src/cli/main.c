/* hutch: one binary, subcommands. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/doctor.h"
#include "cli/layer.h"
#include "cli/run.h"
#include "cli/sandbox_cmds.h"
#include "init/init.h"
#include "jail/jail.h"
#include "serve/serve.h"
#include "util/proctitle.h"

#define HUTCH_VERSION "0.1.0"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hutch COMMAND [ARGS...]\n"
            "\n"
            "commands:\n"
            "  serve    the daemon: persistent sandboxes over E2B's API (hutch serve --help)\n"
            "  run      run one program in a fresh, throwaway sandbox (hutch run --help)\n"
            "  doctor   check what this host supports, feature by feature\n"
            "  layer    the disk layers of persistent roots (hutch layer --help)\n"
            "\n"
            "the daemon's sandboxes (through its socket, RUN/hutch.sock):\n"
            "  create   make a sandbox, print its id\n"
            "  ls       list the live ones\n"
            "  exec     run a command in one: hutch exec ID -- CMD ARGS...\n"
            "  sh       an interactive shell in one\n"
            "  cp       copy a file in or out: hutch cp LOCAL ID:PATH, hutch cp ID:PATH LOCAL\n"
            "  pause, resume, kill ID\n"
            "  logs     a sandbox's event log\n"
            "\n"
            "  version  print the version\n");
}

int main(int argc, char **argv, char **envp)
{
    /* A sandbox's init is this same binary, exec'd as pid 1 of the sandbox (src/jail/inside.c). */
    if (argc > 0 && strcmp(argv[0], JAIL_INIT_ARGV0) == 0 && getpid() == 1)
        init_main(argc, argv, envp);
    proctitle_init(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0)
        return run_main(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return serve_main(argc - 1, argv + 1);
    if (strcmp(cmd, "layer") == 0)
        return layer_main(argc - 1, argv + 1);
    if (strcmp(cmd, "doctor") == 0)
        return doctor_main(argc - 1, argv + 1);
    static const struct {
        const char *name;
        int (*main)(int argc, char **argv);
    } clients[] = {{"create", create_main}, {"ls", ls_main},     {"exec", exec_main},
                   {"sh", sh_main},         {"cp", cp_main},     {"pause", pause_main},
                   {"resume", resume_main}, {"kill", kill_main}, {"logs", logs_main}};
    for (size_t i = 0; i < sizeof clients / sizeof *clients; i++)
        if (strcmp(cmd, clients[i].name) == 0) {
            static char name[32]; /* getopt's messages say "hutch ls: ..." */
            snprintf(name, sizeof name, "hutch %s", cmd);
            argv[1] = name;
            return clients[i].main(argc - 1, argv + 1);
        }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("hutch %s\n", HUTCH_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hutch: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
