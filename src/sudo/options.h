/* sudo's command line, as the sandbox's users type it, turned into the request for init
 * (proto_sudo.h): the command, its environment (reset as sudo resets it), its directory. Pure:
 * what it reads of the process (environment, cwd, /etc/passwd) is passed in. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

enum sudo_action {
    SUDO_ACTION_RUN,
    SUDO_ACTION_NOTHING, /* -k, -K, -v: nothing to validate or forget: exit 0 */
    SUDO_ACTION_HELP,
    SUDO_ACTION_VERSION,
    SUDO_ACTION_LIST,
};

struct sudo_options {
    enum sudo_action action;
    const char *user;          /* -u, NULL = root */
    bool preserve_env;         /* -E */
    const char *preserve_list; /* --preserve-env=A,B */
    bool login;                /* -i */
    bool shell;                /* -s */
    const char *chdir;         /* -D */
    char **assignments;        /* VAR=value before the command (into argv) */
    size_t n_assignments;
    char **command; /* the rest of argv (NULL-terminated, into argv); may be empty */
    size_t n_command;
};

/* Parses argv (argv[0] is "sudo"). -1 (err: the message sudo prints, exit 1) on a bad option. */
int sudo_options_parse(int argc, char **argv, struct sudo_options *o, err_t *err);

/* The target user, as /etc/passwd of the sandbox says (passwd: its text, or NULL). */
struct sudo_target {
    bool root; /* else the user, uid 1000 */
    char name[64], home[256], shell[256];
};
/* user: a name, a uid, or "#uid". Only root and the sandbox's user (uid 1000) exist for sudo. */
int sudo_target_resolve(const char *user, const char *passwd, struct sudo_target *t, err_t *err);

struct sudo_request {
    char **argv; /* malloc'd, with strings malloc'd where made (sudo_request_free) */
    char **envp;
    char *cwd; /* NULL = the target's home */
    bool as_root;
};
/* The command, environment and directory: environ is the caller's, cwd its directory (NULL if
 * unknown). */
int sudo_request_build(const struct sudo_options *o, const struct sudo_target *t,
                       char *const *environ, const char *cwd, struct sudo_request *r, err_t *err);
void sudo_request_free(struct sudo_request *r);
