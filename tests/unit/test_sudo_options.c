/* sudo's command line (src/sudo/options.c): the options users type, the target user, the
 * environment reset as sudo resets it, -E, -i, -s, VAR=value, and refusals. */
#include "sudo/options.h"
#include "tap.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                             "user:x:1000:1000::/home/user:/bin/bash\n";

/* Parses a command line of words (NULL-terminated); 0 or -1. */
static int parse(struct sudo_options *o, err_t *err, char **words)
{
    int argc = 0;
    while (words[argc])
        argc++;
    return sudo_options_parse(argc, words, o, err);
}

static const char *env_of(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
            return *envp + len + 1;
    return NULL;
}

int main(void)
{
    struct sudo_options o;
    struct sudo_target t;
    struct sudo_request r;
    err_t err;
    char *caller_env[] = {"PATH=/home/user/.local/bin:/usr/bin",
                          "TERM=xterm",
                          "FOO=bar",
                          "HOME=/home/user",
                          "LC_ALL=C.UTF-8",
                          "SUDO_UID=0",
                          NULL};

    ok(parse(&o, &err, (char *[]){"sudo", "id", "-u", NULL}) == 0 && o.n_command == 2 && !o.user &&
           strcmp(o.command[1], "-u") == 0,
       "options stop at the command: `sudo id -u` runs `id -u` as root");
    ok(parse(&o, &err, (char *[]){"sudo", "-u", "user", "-n", "--", "-x", NULL}) == 0 &&
           strcmp(o.user, "user") == 0 && o.n_command == 1 && strcmp(o.command[0], "-x") == 0,
       "-u user -n -- -x");
    ok(parse(&o, &err, (char *[]){"sudo", "-nEuroot", "true", NULL}) == 0 && o.preserve_env &&
           strcmp(o.user, "root") == 0,
       "bundled short options, -u's value in the same word");
    ok(parse(&o, &err, (char *[]){"sudo", "--user=user", "--preserve-env=FOO,BAR", "env", NULL}) ==
               0 &&
           strcmp(o.user, "user") == 0 && strcmp(o.preserve_list, "FOO,BAR") == 0,
       "--user=, --preserve-env=LIST");
    ok(parse(&o, &err, (char *[]){"sudo", "-x", "true", NULL}) < 0 &&
           strstr(err.msg, "invalid option -- 'x'"),
       "an unknown option: %s", err.msg);
    ok(parse(&o, &err, (char *[]){"sudo", "--frobnicate", NULL}) < 0 &&
           strstr(err.msg, "unrecognized option"),
       "an unknown long option: %s", err.msg);
    ok(parse(&o, &err, (char *[]){"sudo", "-u", NULL}) < 0, "-u without a user");
    ok(parse(&o, &err, (char *[]){"sudo", NULL}) < 0, "no command");
    ok(parse(&o, &err, (char *[]){"sudo", "-i", "-s", NULL}) < 0, "-i and -s together");
    ok(parse(&o, &err, (char *[]){"sudo", "-k", NULL}) == 0 && o.action == SUDO_ACTION_NOTHING,
       "-k alone does nothing, and succeeds");
    ok(parse(&o, &err, (char *[]){"sudo", "-V", NULL}) == 0 && o.action == SUDO_ACTION_VERSION,
       "-V");
    ok(parse(&o, &err, (char *[]){"sudo", "FOO=1", "BAR=2", "env", NULL}) == 0 &&
           o.n_assignments == 2 && o.n_command == 1,
       "VAR=value words before the command");

    ok(sudo_target_resolve(NULL, passwd, &t, &err) == 0 && t.root && strcmp(t.home, "/root") == 0 &&
           strcmp(t.shell, "/bin/bash") == 0,
       "the default target is root, from /etc/passwd");
    ok(sudo_target_resolve("#1000", passwd, &t, &err) == 0 && !t.root &&
           strcmp(t.name, "user") == 0 && strcmp(t.home, "/home/user") == 0,
       "#1000 is the user");
    ok(sudo_target_resolve("daemon", passwd, &t, &err) < 0, "another user is refused: %s", err.msg);
    ok(sudo_target_resolve("root", NULL, &t, &err) == 0 && t.root && strcmp(t.home, "/root") == 0,
       "root without an /etc/passwd");

    parse(&o, &err, (char *[]){"sudo", "env", NULL});
    sudo_target_resolve(NULL, passwd, &t, &err);
    ok(sudo_request_build(&o, &t, caller_env, "/tmp", &r, &err) == 0, "a request");
    is_str(env_of(r.envp, "PATH"), "/home/user/.local/bin:/usr/bin", "PATH is kept");
    is_str(env_of(r.envp, "TERM"), "xterm", "TERM is kept");
    is_str(env_of(r.envp, "LC_ALL"), "C.UTF-8", "LC_* are kept");
    ok(env_of(r.envp, "FOO") == NULL, "anything else is not");
    is_str(env_of(r.envp, "HOME"), "/root", "HOME is the target's");
    is_str(env_of(r.envp, "USER"), "root", "USER is the target's");
    is_str(env_of(r.envp, "LOGNAME"), "root", "LOGNAME too");
    is_str(env_of(r.envp, "SUDO_COMMAND"), "env", "SUDO_COMMAND");
    is_str(r.cwd, "/tmp", "the caller's directory");
    ok(r.as_root && strcmp(r.argv[0], "env") == 0 && !r.argv[1], "argv as given, as root");
    sudo_request_free(&r);

    parse(&o, &err, (char *[]){"sudo", "-E", "FOO=baz", "env", NULL});
    sudo_request_build(&o, &t, caller_env, "/tmp", &r, &err);
    is_str(env_of(r.envp, "FOO"), "baz", "-E keeps the environment, VAR=value overrides");
    is_str(env_of(r.envp, "HOME"), "/home/user", "-E keeps HOME");
    sudo_request_free(&r);

    parse(&o, &err, (char *[]){"sudo", "-i", "echo", "a b", NULL});
    sudo_request_build(&o, &t, caller_env, "/tmp", &r, &err);
    ok(strcmp(r.argv[0], "/bin/bash") == 0 && strcmp(r.argv[1], "-l") == 0 &&
           strcmp(r.argv[2], "-c") == 0 && strcmp(r.argv[3], "echo a\\ b") == 0 && !r.argv[4],
       "-i: the target's login shell, the command escaped (%s)", r.argv[3] ? r.argv[3] : "");
    is_str(r.cwd, "/root", "-i runs in the target's home");
    sudo_request_free(&r);

    parse(&o, &err, (char *[]){"sudo", "-u", "user", "-D", "sub", "pwd", NULL});
    sudo_target_resolve(o.user, passwd, &t, &err);
    sudo_request_build(&o, &t, caller_env, "/tmp", &r, &err);
    ok(!r.as_root && strcmp(r.cwd, "/tmp/sub") == 0, "-u user -D sub: as the user, in /tmp/sub");
    sudo_request_free(&r);
    return done_testing();
}
