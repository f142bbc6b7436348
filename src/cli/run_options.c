#include "cli/run_options.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/artifacts.h"
#include "jail/jail.h"
#include "util/parse.h"

enum {
    OPT_TIMEOUT = 256, OPT_CPU_TIME, OPT_MEMORY, OPT_PIDS, OPT_DISK, OPT_OUTPUT_LIMIT, OPT_NOFILE,
    OPT_ENV, OPT_FILE, OPT_ARTIFACTS, OPT_ARTIFACTS_LIMIT, OPT_LANG, OPT_CODE, OPT_CODE_FILE,
    OPT_JSON, OPT_ROOT, OPT_CWD, OPT_SECCOMP, OPT_HELP, OPT_RO_BIND,
    OPT_PTYS, OPT_INOTIFY_INSTANCES, OPT_INOTIFY_WATCHES, OPT_WRITABLE_ROOT, OPT_STATE_DIR,
};

static const struct option long_options[] = {
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"cpu-time", required_argument, NULL, OPT_CPU_TIME},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT},
    {"nofile", required_argument, NULL, OPT_NOFILE},
    {"ptys", required_argument, NULL, OPT_PTYS},
    {"inotify-instances", required_argument, NULL, OPT_INOTIFY_INSTANCES},
    {"inotify-watches", required_argument, NULL, OPT_INOTIFY_WATCHES},
    {"env", required_argument, NULL, OPT_ENV},
    {"file", required_argument, NULL, OPT_FILE},
    {"ro-bind", required_argument, NULL, OPT_RO_BIND},
    {"artifacts", required_argument, NULL, OPT_ARTIFACTS},
    {"artifacts-limit", required_argument, NULL, OPT_ARTIFACTS_LIMIT},
    {"lang", required_argument, NULL, OPT_LANG},
    {"code", required_argument, NULL, OPT_CODE},
    {"code-file", required_argument, NULL, OPT_CODE_FILE},
    {"json", no_argument, NULL, OPT_JSON},
    {"root", no_argument, NULL, OPT_ROOT},
    {"cwd", required_argument, NULL, OPT_CWD},
    {"seccomp", required_argument, NULL, OPT_SECCOMP},
    {"writable-root", required_argument, NULL, OPT_WRITABLE_ROOT},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

void run_options_usage(FILE *out)
{
    fprintf(out,
            "usage: hutch run [OPTIONS] -- COMMAND [ARGS...]\n"
            "       hutch run [OPTIONS] --lang python|node|bash [--code TEXT | --code-file PATH]"
            " [-- ARGS...]\n"
            "\n"
            "Runs one program in a fresh sandbox and throws the sandbox away.\n"
            "With --lang and neither --code nor --code-file, the code is read from stdin.\n"
            "\n"
            "Limits (sizes take K, M, G, T suffixes, up to 16T; times are seconds, or e.g. 250ms,\n"
            "up to 365 days; a value out of range is refused):\n"
            "  --timeout SEC        wall-clock limit                      (default %g)\n"
            "  --cpu-time SEC       CPU time of all processes together    (default %g)\n"
            "  --memory SIZE        memory, swap excluded                 (default %llu MiB)\n"
            "  --pids N             processes and threads at once         (default %d)\n"
            "  --disk SIZE          writable layer; the program gets ENOSPC (default %llu MiB)\n"
            "  --output-limit SIZE  per stream, up to 1G; beyond it output is cut, and the\n"
            "                       program stopped (OL). With --json it counts the bytes as\n"
            "                       written in the JSON, escapes included  (default %llu MiB)\n"
            "  --nofile N           open files per process, up to 1048576 (default %d);\n"
            "                       above hutch's own hard limit only with CAP_SYS_RESOURCE\n"
            "Kernel shares (each sandbox its own; see the README's threat model):\n"
            "  --ptys N             ptys at once                          (default %d)\n"
            "  --inotify-instances N  inotify instances                   (default %d)\n"
            "  --inotify-watches N  inotify watches                       (default %d)\n"
            "Data:\n"
            "  --env K=V            add an environment variable (repeatable)\n"
            "  --file HOST:SANDBOX  copy a host file in (repeatable; relative SANDBOX is under "
            "%s)\n"
            "  --ro-bind HOST:SANDBOX  bind a world-readable host path read-only (repeatable)\n"
            "  --artifacts DIR      copy what the program writes to %s into DIR; a name\n"
            "                       that DIR already has is left as it is and not copied\n"
            "  --artifacts-limit SIZE  cap on the artifacts copied          (default %llu MiB)\n"
            "                       each entry (file, directory, link, ...) costs %d bytes,\n"
            "                       a file its bytes on top; at most %d entries, %d levels\n"
            "Other:\n"
            "  --root               run as sandbox root (uid 0, no capabilities) instead of %s\n"
            "  --cwd DIR            working directory (default the home directory)\n"
            "  --seccomp PROFILE    default or strict                     (default default)\n"
            "  --json               print one JSON object with the verdict and the output\n"
            "Persistent root (a sandbox whose root filesystem outlives the run):\n"
            "  --writable-root NAME  the root filesystem, /usr and /etc included, is writable\n"
            "                       by sandbox root (with --root: the capabilities dpkg, pip\n"
            "                       and npm need, namespaced), on the disk layer\n"
            "                       STATE/sandboxes/NAME, made with --disk SIZE on first use\n"
            "                       and kept (remove it with hutch layer rm NAME)\n"
            "  --state-dir DIR      STATE (default $HUTCH_STATE_DIR or /var/lib/hutch)\n"
            "\n"
            "Verdicts: OK, RE (non-zero exit), SG (killed by a signal), TO (wall or CPU time),\n"
            "ML (memory limit), OL (output limit), XX (hutch's own failure, with its reason).\n"
            "Exit status: 0 for OK, 1 when the program failed (RE SG TO ML OL), 2 for XX or\n"
            "a usage error.\n",
            RUN_DEFAULT_TIMEOUT_MS / 1000.0, RUN_DEFAULT_CPU_TIME_MS / 1000.0,
            RUN_DEFAULT_MEMORY >> 20, RUN_DEFAULT_PIDS, RUN_DEFAULT_DISK >> 20,
            RUN_DEFAULT_OUTPUT_LIMIT >> 20, RUN_DEFAULT_NOFILE, JAIL_DEFAULT_PTYS,
            JAIL_DEFAULT_INOTIFY_INSTANCES, JAIL_DEFAULT_INOTIFY_WATCHES, JAIL_USER_HOME,
            JAIL_OUTPUT_DIR, RUN_DEFAULT_ARTIFACTS_LIMIT >> 20, ARTIFACTS_ENTRY_COST,
            ARTIFACTS_MAX_ENTRIES, ARTIFACTS_MAX_DEPTH, JAIL_USER_NAME);
}

bool run_layer_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > RUN_MAX_LAYER_NAME || name[0] == '.')
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

const char *run_lang_name(enum run_lang lang)
{
    switch (lang) {
    case RUN_LANG_PYTHON:
        return "python";
    case RUN_LANG_NODE:
        return "node";
    case RUN_LANG_BASH:
        return "bash";
    case RUN_LANG_NONE:
        break;
    }
    return "none";
}

static int parse_lang(const char *s, enum run_lang *out)
{
    static const struct {
        const char *name;
        enum run_lang lang;
    } langs[] = {{"python", RUN_LANG_PYTHON}, {"python3", RUN_LANG_PYTHON},
                 {"node", RUN_LANG_NODE},     {"js", RUN_LANG_NODE},
                 {"javascript", RUN_LANG_NODE}, {"bash", RUN_LANG_BASH}, {"sh", RUN_LANG_BASH}};
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++) {
        if (strcmp(s, langs[i].name) == 0) {
            *out = langs[i].lang;
            return 0;
        }
    }
    return -1;
}

static int parse_env(const char *s, struct run_options *o, err_t *err)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return err_set(err, 0, "--env %s: expected NAME=VALUE", s);
    for (const char *p = s; p < eq; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (p > s && *p >= '0' && *p <= '9')))
            return err_set(err, 0, "--env %s: invalid variable name", s);
    if (o->n_env >= RUN_MAX_ITEMS)
        return err_set(err, 0, "--env: at most %d variables", RUN_MAX_ITEMS);
    o->env[o->n_env] = strdup(s);
    if (!o->env[o->n_env])
        return err_set(err, ENOMEM, "--env");
    o->n_env++;
    return 0;
}

/* Resolves "a/../b" style components away and refuses to climb above "/". */
static int normalize_sandbox_path(const char *in, char *out, size_t size)
{
    char buf[4096];
    int n = in[0] == '/' ? snprintf(buf, sizeof buf, "%s", in)
                         : snprintf(buf, sizeof buf, "%s/%s", JAIL_USER_HOME, in);
    if (n < 0 || (size_t)n >= sizeof buf)
        return -1; /* cut short, it would name another path */
    size_t len = 0;
    char *save = NULL;
    out[0] = '\0';
    for (char *part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0) {
            char *slash = strrchr(out, '/');
            if (!slash)
                return -1;
            *slash = '\0';
            len = (size_t)(slash - out);
            continue;
        }
        size_t plen = strlen(part);
        if (len + 1 + plen + 1 > size)
            return -1;
        out[len++] = '/';
        memcpy(out + len, part, plen + 1);
        len += plen;
    }
    return len == 0 ? -1 : 0; /* "/" itself is not a file */
}

/* HOST:SANDBOX for --file and --ro-bind: split at the last colon (host paths may hold one). */
static int parse_host_sandbox(const char *opt, const char *s, struct run_file *list, size_t *n,
                              err_t *err)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || colon[1] == '\0')
        return err_set(err, 0, "%s %s: expected HOST:SANDBOX", opt, s);
    if (*n >= RUN_MAX_ITEMS)
        return err_set(err, 0, "%s: at most %d", opt, RUN_MAX_ITEMS);
    char dest[4096];
    if (normalize_sandbox_path(colon + 1, dest, sizeof dest) < 0)
        return err_set(err, 0, "%s %s: bad sandbox path", opt, s);
    struct run_file *f = &list[*n];
    f->host_path = strndup(s, (size_t)(colon - s));
    f->sandbox_path = strdup(dest);
    if (!f->host_path || !f->sandbox_path) {
        free(f->host_path);
        free(f->sandbox_path);
        return err_set(err, ENOMEM, "%s", opt);
    }
    (*n)++;
    return 0;
}

static int parse_duration_option(const char *opt, const char *arg, uint64_t *out, err_t *err)
{
    if (parse_duration_ms(arg, out) < 0 || *out == 0 || *out > RUN_MAX_DURATION_MS)
        return err_set(err, 0, "%s %s: expected a positive duration, at most 365 days (%llu s)",
                       opt, arg, RUN_MAX_DURATION_MS / 1000);
    return 0;
}

static int parse_size_option(const char *opt, const char *arg, uint64_t min, uint64_t max,
                             uint64_t *out, err_t *err)
{
    char lo[32], hi[32];
    if (parse_size(arg, out) < 0 || *out < min || *out > max) {
        format_size(max, hi, sizeof hi);
        if (min == 0)
            return err_set(err, 0, "%s %s: expected a size up to %s", opt, arg, hi);
        return err_set(err, 0, "%s %s: expected a size from %s to %s", opt, arg,
                       format_size(min, lo, sizeof lo), hi);
    }
    return 0;
}

static int parse_value(int opt, const char *arg, struct run_options *o, err_t *err)
{
    switch (opt) {
    case OPT_TIMEOUT:
        return parse_duration_option("--timeout", arg, &o->timeout_ms, err);
    case OPT_CPU_TIME:
        return parse_duration_option("--cpu-time", arg, &o->cpu_time_ms, err);
    case OPT_MEMORY:
        return parse_size_option("--memory", arg, 4ull << 20, RUN_MAX_SIZE, &o->memory_bytes, err);
    case OPT_PIDS:
        if (parse_count(arg, 1, 1u << 22, &o->pids) < 0)
            return err_set(err, 0, "--pids %s: expected a count from 1", arg);
        return 0;
    case OPT_DISK:
        return parse_size_option("--disk", arg, 1ull << 20, RUN_MAX_SIZE, &o->disk_bytes, err);
    case OPT_OUTPUT_LIMIT:
        return parse_size_option("--output-limit", arg, 0, RUN_MAX_OUTPUT, &o->output_limit, err);
    case OPT_NOFILE:
        if (parse_count(arg, 8, 1u << 20, &o->nofile) < 0)
            return err_set(err, 0, "--nofile %s: expected a count from 8 to 1048576", arg);
        return 0;
    /* The kernel's own per-user defaults bound these again in the host's namespace. */
    case OPT_PTYS:
        if (parse_count(arg, 1, 4096, &o->ptys) < 0)
            return err_set(err, 0, "--ptys %s: expected a count from 1 to 4096", arg);
        return 0;
    case OPT_INOTIFY_INSTANCES:
        if (parse_count(arg, 1, 1u << 16, &o->inotify_instances) < 0)
            return err_set(err, 0, "--inotify-instances %s: expected a count from 1 to 65536", arg);
        return 0;
    case OPT_INOTIFY_WATCHES:
        if (parse_count(arg, 1, 1u << 22, &o->inotify_watches) < 0)
            return err_set(err, 0, "--inotify-watches %s: expected a count from 1 to 4194304", arg);
        return 0;
    case OPT_ARTIFACTS_LIMIT:
        return parse_size_option("--artifacts-limit", arg, 0, RUN_MAX_SIZE, &o->artifacts_limit,
                                 err);
    case OPT_LANG:
        if (parse_lang(arg, &o->lang) < 0)
            return err_set(err, 0, "--lang %s: expected python, node or bash", arg);
        return 0;
    case OPT_SECCOMP:
        if (seccomp_profile_parse(arg, &o->seccomp) < 0)
            return err_set(err, 0, "--seccomp %s: expected default or strict", arg);
        return 0;
    case OPT_ENV:
        return parse_env(arg, o, err);
    case OPT_FILE:
        return parse_host_sandbox("--file", arg, o->files, &o->n_files, err);
    case OPT_RO_BIND:
        return parse_host_sandbox("--ro-bind", arg, o->binds, &o->n_binds, err);
    case OPT_CODE:
        o->code = arg;
        return 0;
    case OPT_CODE_FILE:
        o->code_file = arg;
        return 0;
    case OPT_ARTIFACTS:
        o->artifacts_dir = arg;
        return 0;
    case OPT_CWD:
        if (arg[0] != '/')
            return err_set(err, 0, "--cwd %s: must be an absolute sandbox path", arg);
        o->cwd = arg;
        return 0;
    case OPT_JSON:
        o->json = true;
        return 0;
    case OPT_WRITABLE_ROOT:
        if (!run_layer_name_ok(arg))
            return err_set(err, 0,
                           "--writable-root %s: expected a name of 1 to %d letters, digits, "
                           "'.', '_' or '-', not starting with '.'",
                           arg, RUN_MAX_LAYER_NAME);
        o->writable_root = arg;
        return 0;
    case OPT_STATE_DIR:
        if (arg[0] != '/' || strlen(arg) > 1024)
            return err_set(err, 0, "--state-dir %s: expected an absolute path of at most %d bytes",
                           arg, 1024);
        o->state_dir = arg;
        return 0;
    case OPT_ROOT:
        o->as_root = true;
        return 0;
    case OPT_HELP:
        o->help = true;
        return 0;
    default:
        return err_set(err, 0, "unknown option (see hutch run --help)");
    }
}

int run_options_parse(int argc, char **argv, struct run_options *o, err_t *err)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = RUN_DEFAULT_TIMEOUT_MS;
    o->cpu_time_ms = RUN_DEFAULT_CPU_TIME_MS;
    o->memory_bytes = RUN_DEFAULT_MEMORY;
    o->pids = RUN_DEFAULT_PIDS;
    o->disk_bytes = RUN_DEFAULT_DISK;
    o->output_limit = RUN_DEFAULT_OUTPUT_LIMIT;
    o->nofile = RUN_DEFAULT_NOFILE;
    o->artifacts_limit = RUN_DEFAULT_ARTIFACTS_LIMIT;
    o->seccomp = SECCOMP_PROFILE_DEFAULT;
    /* 0, not 1: glibc then resets all of getopt's state. With 1 it would go on from where the
     * previous call stopped inside a cluster of short options ("-ab"), in that call's argv. */
    optind = 0;
    opterr = 0;
    int opt;
    /* "+": stop at the first non-option, so the command's own flags are never ours. */
    while ((opt = getopt_long(argc, argv, "+", long_options, NULL)) != -1) {
        if (opt == '?') {
            err_set(err, 0, "unknown option or missing value: %s (see hutch run --help)",
                    argv[optind - 1]);
            goto fail;
        }
        if (parse_value(opt, optarg, o, err) < 0)
            goto fail;
    }
    o->argv = argv + optind;
    o->argc = argc - optind;
    if (o->help)
        return 0;
    if (o->lang == RUN_LANG_NONE) {
        if (o->code || o->code_file) {
            err_set(err, 0, "--code and --code-file need --lang");
            goto fail;
        }
        if (o->argc == 0) {
            err_set(err, 0, "no command given (hutch run [OPTIONS] -- COMMAND [ARGS...])");
            goto fail;
        }
    } else if (o->code && o->code_file) {
        err_set(err, 0, "--code and --code-file are mutually exclusive");
        goto fail;
    }
    return 0;
fail:
    run_options_free(o);
    return -1;
}

void run_options_free(struct run_options *o)
{
    for (size_t i = 0; i < o->n_env; i++)
        free(o->env[i]);
    for (size_t i = 0; i < o->n_files; i++) {
        free(o->files[i].host_path);
        free(o->files[i].sandbox_path);
    }
    for (size_t i = 0; i < o->n_binds; i++) {
        free(o->binds[i].host_path);
        free(o->binds[i].sandbox_path);
    }
    o->n_env = o->n_files = o->n_binds = 0;
}
