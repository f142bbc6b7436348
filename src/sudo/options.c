/* sudo's options and the request they make (options.h). What sudo does with each, where it
 * matters here: env_reset (a fresh environment, with TERM, PATH, the locale and display
 * variables kept, HOME, SHELL, USER, LOGNAME and MAIL the target's), -E keeping it all, -i the
 * target's login shell in its home, -s a shell, VAR=value before the command. */
#include "sudo/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kept by env_reset, as sudo's defaults keep them. A trailing '*' is a prefix. */
static const char *const kept_vars[] = {
    "TERM",   "PATH",      "LANG",      "LANGUAGE",   "LC_*",           "TZ",
    "COLORS", "LS_COLORS", "DISPLAY",   "XAUTHORITY", "XAUTHORIZATION", "PS1",
    "PS2",    "HOSTNAME",  "COLORTERM",
};
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static bool name_is(const char *entry, const char *pattern)
{
    size_t plen = strlen(pattern);
    if (plen && pattern[plen - 1] == '*')
        return strncmp(entry, pattern, plen - 1) == 0;
    return strncmp(entry, pattern, plen) == 0 && entry[plen] == '=';
}

static bool in_list(const char *entry, const char *list)
{
    for (const char *p = list; p && *p;) {
        const char *end = strchrnul(p, ',');
        size_t len = (size_t)(end - p);
        if (len && strncmp(entry, p, len) == 0 && entry[len] == '=')
            return true;
        p = *end ? end + 1 : end;
    }
    return false;
}

static bool is_assignment(const char *a)
{
    const char *eq = strchr(a, '=');
    if (!eq || eq == a)
        return false;
    for (const char *c = a; c < eq; c++)
        if (!(*c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
              (c > a && *c >= '0' && *c <= '9')))
            return false;
    return true;
}

int sudo_options_parse(int argc, char **argv, struct sudo_options *o, err_t *err)
{
    memset(o, 0, sizeof *o);
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
#define LONG_IS(s) (len == strlen(s) && strncmp(name, s, len) == 0)
            if (LONG_IS("user")) {
                if (eq)
                    o->user = eq + 1;
                else if (i + 1 < argc)
                    o->user = argv[++i];
                else
                    return err_set(err, 0, "option '--user' requires an argument");
            } else if (LONG_IS("preserve-env")) {
                if (eq)
                    o->preserve_list = eq + 1;
                else
                    o->preserve_env = true;
            } else if (LONG_IS("chdir")) {
                if (eq)
                    o->chdir = eq + 1;
                else if (i + 1 < argc)
                    o->chdir = argv[++i];
                else
                    return err_set(err, 0, "option '--chdir' requires an argument");
            } else if (!eq && LONG_IS("login")) {
                o->login = true;
            } else if (!eq && LONG_IS("shell")) {
                o->shell = true;
            } else if (!eq && (LONG_IS("non-interactive") || LONG_IS("stdin") ||
                               LONG_IS("set-home") || LONG_IS("askpass"))) {
                /* nothing asks for a password here */
            } else if (!eq && (LONG_IS("reset-timestamp") || LONG_IS("remove-timestamp") ||
                               LONG_IS("validate"))) {
                o->action = SUDO_ACTION_NOTHING;
            } else if (!eq && LONG_IS("help")) {
                o->action = SUDO_ACTION_HELP;
                return 0;
            } else if (!eq && LONG_IS("version")) {
                o->action = SUDO_ACTION_VERSION;
                return 0;
            } else if (!eq && LONG_IS("list")) {
                o->action = SUDO_ACTION_LIST;
            } else if (LONG_IS("prompt")) {
                if (!eq && ++i >= argc)
                    return err_set(err, 0, "option '--prompt' requires an argument");
            } else {
                return err_set(err, 0, "unrecognized option '%.64s'", a);
            }
#undef LONG_IS
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            /* Options that take a value: the rest of this word, or the next one. */
            if (*c == 'u' || *c == 'D' || *c == 'p' || *c == 'g' || *c == 'C' || *c == 'h') {
                const char *value = c[1] ? c + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
                if (*c == 'h' && !c[1]) { /* -h alone is help; -h HOST is not for us */
                    o->action = SUDO_ACTION_HELP;
                    return 0;
                }
                if (!value)
                    return err_set(err, 0, "option requires an argument -- '%c'", *c);
                if (!c[1])
                    i++;
                if (*c == 'u')
                    o->user = value;
                else if (*c == 'D')
                    o->chdir = value;
                else if (*c == 'g' || *c == 'C' || *c == 'h')
                    return err_set(err, 0, "option -%c is not supported in this sandbox", *c);
                break;
            }
            switch (*c) {
            case 'E':
                o->preserve_env = true;
                break;
            case 'i':
                o->login = true;
                break;
            case 's':
                o->shell = true;
                break;
            case 'n': /* non-interactive: nothing here ever asks for a password */
            case 'S': /* the password from stdin: none is read, stdin stays the command's */
            case 'H': /* HOME is the target's anyway */
            case 'A':
            case 'P': /* preserve groups: there are none to keep */
                break;
            case 'k':
            case 'K':
            case 'v':
                o->action = SUDO_ACTION_NOTHING;
                break;
            case 'l':
                o->action = SUDO_ACTION_LIST;
                break;
            case 'V':
                o->action = SUDO_ACTION_VERSION;
                return 0;
            default:
                return err_set(err, 0, "invalid option -- '%c'", *c);
            }
        }
    }
    /* VAR=value words before the command set variables for it, as sudo's do. */
    size_t first = (size_t)i;
    while (i < argc && is_assignment(argv[i]))
        i++;
    o->assignments = argv + first;
    o->n_assignments = (size_t)i - first;
    o->command = argv + i;
    o->n_command = (size_t)(argc - i);
    if (o->login && o->shell)
        return err_set(err, 0, "you may not specify both the -i and -s options");
    if (o->action == SUDO_ACTION_RUN && o->n_command == 0 && !o->login && !o->shell)
        return err_set(err, 0, "a command is needed");
    if (o->action == SUDO_ACTION_NOTHING && o->n_command > 0)
        o->action = SUDO_ACTION_RUN; /* sudo -k cmd: forget the timestamp, then run */
    return 0;
}

/* The passwd line of name (or of uid, when name is NULL): its uid, home, shell. */
static bool passwd_find(const char *passwd, const char *name, long uid, struct sudo_target *t,
                        long *uid_out)
{
    for (const char *l = passwd; l && *l; l = strchrnul(l, '\n'), l += *l ? 1 : 0) {
        const char *f[7];
        size_t len[7], n = 0;
        const char *end = strchrnul(l, '\n');
        for (const char *p = l; n < 7; n++) {
            const char *c = memchr(p, ':', (size_t)(end - p));
            f[n] = p;
            len[n] = (size_t)((c ? c : end) - p);
            if (!c) {
                n++;
                break;
            }
            p = c + 1;
        }
        if (n < 7)
            continue;
        char *stop;
        long u = strtol(f[2], &stop, 10);
        if (stop != f[2] + len[2])
            continue;
        if (name ? (strlen(name) != len[0] || strncmp(name, f[0], len[0]) != 0) : u != uid)
            continue;
        if (len[0] < sizeof t->name && len[5] < sizeof t->home && len[6] < sizeof t->shell) {
            memcpy(t->name, f[0], len[0]);
            t->name[len[0]] = '\0';
            memcpy(t->home, f[5], len[5]);
            t->home[len[5]] = '\0';
            memcpy(t->shell, f[6], len[6]);
            t->shell[len[6]] = '\0';
        }
        *uid_out = u;
        return true;
    }
    return false;
}

int sudo_target_resolve(const char *user, const char *passwd, struct sudo_target *t, err_t *err)
{
    memset(t, 0, sizeof *t);
    if (!user)
        user = "root";
    long uid = -1;
    const char *num = user[0] == '#' ? user + 1 : user;
    char *stop;
    long as_number = strtol(num, &stop, 10);
    bool numeric = *num && !*stop;
    if (!passwd_find(passwd, numeric ? NULL : user, as_number, t, &uid)) {
        if (numeric)
            uid = as_number;
        else if (strcmp(user, "root") == 0)
            uid = 0;
        else if (strcmp(user, "user") == 0)
            uid = 1000;
        if (uid == 0 || uid == 1000) {
            snprintf(t->name, sizeof t->name, "%s", uid == 0 ? "root" : "user");
            snprintf(t->home, sizeof t->home, "%s", uid == 0 ? "/root" : "/home/user");
        }
    }
    if (uid != 0 && uid != 1000)
        return err_set(err, 0, "unknown user %.64s (only root and uid 1000 can be run as here)",
                       user);
    t->root = uid == 0;
    if (!t->home[0])
        snprintf(t->home, sizeof t->home, "%s", t->root ? "/root" : "/home/user");
    if (!t->shell[0])
        snprintf(t->shell, sizeof t->shell, "/bin/sh");
    return 0;
}

/* A growing NULL-terminated array of strings, each malloc'd. */
struct strv {
    char **v;
    size_t n, cap;
    bool failed;
};

static void strv_add_owned(struct strv *s, char *str)
{
    if (!str || s->failed) {
        s->failed = true;
        free(str);
        return;
    }
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **more = realloc(s->v, cap * sizeof *more);
        if (!more) {
            s->failed = true;
            free(str);
            return;
        }
        s->v = more;
        s->cap = cap;
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
}

static void strv_add(struct strv *s, const char *str)
{
    strv_add_owned(s, strdup(str));
}

static void strv_setenv(struct strv *s, const char *name, const char *value)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->v[i], name, len) == 0 && s->v[i][len] == '=') {
            free(s->v[i]);
            memmove(&s->v[i], &s->v[i + 1], (s->n - i) * sizeof *s->v);
            s->n--;
            break;
        }
    char *e = NULL;
    if (asprintf(&e, "%s=%s", name, value) < 0)
        e = NULL;
    strv_add_owned(s, e);
}

static void strv_free(struct strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* sudo -i and -s run "shell -c 'the command'", each character that a shell would read as more
 * than itself escaped with a backslash (sudo does the same). */
static char *shell_command(char **words, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += 2 * strlen(words[i]) + 1;
    char *out = malloc(len), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ' ';
        for (const char *c = words[i]; *c; c++) {
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '$' || *c == '/' ||
                  *c == '.' || *c == '=' || *c == ',' || *c == ':'))
                *p++ = '\\';
            *p++ = *c;
        }
    }
    *p = '\0';
    return out;
}

int sudo_request_build(const struct sudo_options *o, const struct sudo_target *t,
                       char *const *environ, const char *cwd, struct sudo_request *r, err_t *err)
{
    memset(r, 0, sizeof *r);
    struct strv env = {0}, argv = {0};
    for (char *const *e = environ; e && *e; e++) {
        bool keep = o->preserve_env || in_list(*e, o->preserve_list);
        for (size_t k = 0; !keep && k < sizeof kept_vars / sizeof kept_vars[0]; k++)
            keep = name_is(*e, kept_vars[k]);
        if (keep && strchr(*e, '=') && (*e)[0] != '=')
            strv_add(&env, *e);
    }
    bool have_path = false;
    for (size_t i = 0; i < env.n; i++)
        have_path = have_path || strncmp(env.v[i], "PATH=", 5) == 0;
    if (!have_path)
        strv_setenv(&env, "PATH", DEFAULT_PATH);
    if (!o->preserve_env || o->login)
        strv_setenv(&env, "HOME", t->home);
    strv_setenv(&env, "SHELL", t->shell);
    strv_setenv(&env, "USER", t->name);
    strv_setenv(&env, "LOGNAME", t->name);
    char mail[96];
    snprintf(mail, sizeof mail, "/var/mail/%s", t->name);
    strv_setenv(&env, "MAIL", mail);
    for (size_t i = 0; i < o->n_assignments; i++) {
        const char *eq = strchr(o->assignments[i], '=');
        char name[256];
        size_t len = (size_t)(eq - o->assignments[i]);
        if (len >= sizeof name) {
            strv_free(&env);
            return err_set(err, 0, "variable name too long");
        }
        memcpy(name, o->assignments[i], len);
        name[len] = '\0';
        strv_setenv(&env, name, eq + 1);
    }
    if (o->login || o->shell) {
        const char *sh = o->shell ? NULL : t->shell;
        if (!sh) {
            for (char *const *e = environ; e && *e && !sh; e++)
                if (strncmp(*e, "SHELL=", 6) == 0 && (*e)[6])
                    sh = *e + 6;
            if (!sh)
                sh = t->shell;
        }
        strv_add(&argv, sh);
        if (o->login)
            strv_add(&argv, "-l");
        if (o->n_command) {
            strv_add(&argv, "-c");
            strv_add_owned(&argv, shell_command(o->command, o->n_command));
        }
    } else {
        for (size_t i = 0; i < o->n_command; i++)
            strv_add(&argv, o->command[i]);
    }
    /* SUDO_COMMAND: what was asked, as sudo sets it (cut at 4096 bytes). */
    char command[4096] = "";
    size_t at = 0;
    for (size_t i = 0; i < argv.n && at < sizeof command - 1; i++) {
        int w = snprintf(command + at, sizeof command - at, "%s%s", i ? " " : "", argv.v[i]);
        at = w < 0 || (size_t)w >= sizeof command - at ? sizeof command - 1 : at + (size_t)w;
    }
    strv_setenv(&env, "SUDO_COMMAND", command);
    if (env.failed || argv.failed || argv.n == 0) {
        strv_free(&env);
        strv_free(&argv);
        return err_set(err, ENOMEM, "sudo");
    }
    r->argv = argv.v;
    r->envp = env.v;
    r->as_root = t->root;
    const char *dir = o->login ? t->home : o->chdir ? o->chdir : cwd;
    if (dir && dir[0] != '/' && cwd && o->chdir) {
        if (asprintf(&r->cwd, "%s/%s", cwd, dir) < 0)
            r->cwd = NULL;
    } else if (dir && dir[0] == '/') {
        r->cwd = strdup(dir);
    }
    return 0;
}

void sudo_request_free(struct sudo_request *r)
{
    struct strv a = {.v = r->argv}, e = {.v = r->envp};
    while (a.v && a.v[a.n])
        a.n++;
    while (e.v && e.v[e.n])
        e.n++;
    strv_free(&a);
    strv_free(&e);
    free(r->cwd);
    memset(r, 0, sizeof *r);
}
