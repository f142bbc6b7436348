/* run_options_parse() on arbitrary command lines: the input split at NUL bytes is argv[1..], with
 * "run" as argv[0]. Each argument is its own allocation, freed after the parse, so a read past an
 * argument or a pointer kept into a previous command line is caught. Every command line is parsed
 * twice, from two copies, and must give the same result both times; a plain command line parsed
 * in between must succeed (getopt's state must not carry over from one parse to the next). */
#include <string.h>

#include "cli/run_options.h"
#include "fuzz.h"
#include "jail/jail.h"

#define MAX_ARGS 4096

struct command_line {
    int argc;
    char **argv;
};

static struct command_line split(const uint8_t *data, size_t size)
{
    struct command_line cl = {.argc = 1};
    for (size_t i = 0; i < size; i++)
        if (data[i] == '\0' && cl.argc < MAX_ARGS)
            cl.argc++;
    if (size > 0)
        cl.argc++;
    if (cl.argc > MAX_ARGS)
        cl.argc = MAX_ARGS;
    cl.argv = calloc((size_t)cl.argc + 1, sizeof *cl.argv);
    fuzz_assert(cl.argv != NULL);
    cl.argv[0] = strdup("run");
    fuzz_assert(cl.argv[0] != NULL);
    size_t start = 0;
    for (int i = 1; i < cl.argc; i++) {
        size_t end = start;
        while (end < size && data[end] != '\0')
            end++;
        cl.argv[i] = malloc(end - start + 1);
        fuzz_assert(cl.argv[i] != NULL);
        memcpy(cl.argv[i], data + start, end - start);
        cl.argv[i][end - start] = '\0';
        start = end + 1;
    }
    return cl;
}

static void free_command_line(struct command_line *cl)
{
    for (int i = 0; i < cl->argc; i++)
        free(cl->argv[i]);
    free(cl->argv);
}

static int points_into_argument(const struct command_line *cl, const char *p)
{
    for (int i = 1; i < cl->argc; i++)
        if (p >= cl->argv[i] && p <= cl->argv[i] + strlen(cl->argv[i]))
            return 1;
    return 0;
}

/* The sandbox path a HOST:SANDBOX argument should give: relative to the home directory, "." and
 * ".." resolved, never above "/". NULL when it would climb above "/" or name "/" itself. */
static char *reference_sandbox_path(const char *in)
{
    size_t cap = strlen(JAIL_USER_HOME) + strlen(in) + 3;
    char *joined = malloc(cap), *out = malloc(cap);
    fuzz_assert(joined && out);
    snprintf(joined, cap, "%s%s%s", in[0] == '/' ? "" : JAIL_USER_HOME, in[0] == '/' ? "" : "/",
             in);
    size_t len = 0;
    for (char *p = joined; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        if (n == 1 && p[0] == '.') {
            /* nothing */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (len == 0) {
                free(out);
                out = NULL;
                break;
            }
            while (out[--len] != '/')
                ;
        } else {
            out[len++] = '/';
            memcpy(out + len, p, n);
            len += n;
        }
        p += n;
    }
    free(joined);
    if (out && len == 0) {
        free(out);
        out = NULL;
    }
    if (out)
        out[len] = '\0';
    return out;
}

/* Some argument, or the value after "--option=", is HOST:SANDBOX for this entry. */
static int has_source(const struct command_line *cl, const struct run_file *f)
{
    size_t host_len = strlen(f->host_path);
    for (int i = 1; i < cl->argc; i++) {
        const char *candidates[2] = {cl->argv[i], NULL};
        if (strncmp(cl->argv[i], "--", 2) == 0 && strchr(cl->argv[i], '='))
            candidates[1] = strchr(cl->argv[i], '=') + 1;
        for (int c = 0; c < 2 && candidates[c]; c++) {
            const char *s = candidates[c];
            if (strncmp(s, f->host_path, host_len) != 0 || s[host_len] != ':' ||
                strchr(s + host_len + 1, ':'))
                continue;
            char *want = reference_sandbox_path(s + host_len + 1);
            int same = want && strcmp(want, f->sandbox_path) == 0;
            free(want);
            if (same)
                return 1;
        }
    }
    return 0;
}

static void check_files(const struct command_line *cl, const struct run_file *files, size_t n)
{
    fuzz_assert(n <= RUN_MAX_ITEMS);
    for (size_t i = 0; i < n; i++) {
        const char *p = files[i].sandbox_path;
        fuzz_assert(files[i].host_path && files[i].host_path[0] != '\0');
        fuzz_assert(p && p[0] == '/' && p[1] != '\0' && strlen(p) < 4096);
        fuzz_assert(!strstr(p, "//") && !strstr(p, "/../") && !strstr(p, "/./"));
        size_t len = strlen(p);
        fuzz_assert(p[len - 1] != '/');
        fuzz_assert(!(len >= 2 && strcmp(p + len - 2, "/.") == 0));
        fuzz_assert(!(len >= 3 && strcmp(p + len - 3, "/..") == 0));
        fuzz_assert(has_source(cl, &files[i]));
    }
}

static void check_success(const struct command_line *cl, const struct run_options *o)
{
    fuzz_assert(o->argc >= 0 && o->argc <= cl->argc - 1);
    fuzz_assert(o->argv == cl->argv + (cl->argc - o->argc));
    fuzz_assert(o->argv[o->argc] == NULL);
    fuzz_assert(o->timeout_ms > 0 && o->cpu_time_ms > 0);
    fuzz_assert(o->timeout_ms <= RUN_MAX_DURATION_MS && o->cpu_time_ms <= RUN_MAX_DURATION_MS);
    fuzz_assert(o->memory_bytes >= (4ull << 20) && o->disk_bytes >= (1ull << 20));
    fuzz_assert(o->memory_bytes <= RUN_MAX_SIZE && o->disk_bytes <= RUN_MAX_SIZE &&
                o->artifacts_limit <= RUN_MAX_SIZE);
    fuzz_assert(o->pids >= 1 && o->pids <= (1u << 22));
    fuzz_assert(o->nofile >= 8 && o->nofile <= (1u << 20));
    fuzz_assert(o->output_limit <= (1ull << 30));
    fuzz_assert(o->lang == RUN_LANG_NONE || o->lang == RUN_LANG_PYTHON ||
                o->lang == RUN_LANG_NODE || o->lang == RUN_LANG_BASH);
    fuzz_assert(o->seccomp == SECCOMP_PROFILE_DEFAULT || o->seccomp == SECCOMP_PROFILE_STRICT);
    fuzz_assert(!o->code || points_into_argument(cl, o->code));
    fuzz_assert(!o->code_file || points_into_argument(cl, o->code_file));
    fuzz_assert(!o->artifacts_dir || points_into_argument(cl, o->artifacts_dir));
    fuzz_assert(!o->cwd || (o->cwd[0] == '/' && points_into_argument(cl, o->cwd)));

    fuzz_assert(o->n_env <= RUN_MAX_ITEMS);
    for (size_t i = 0; i < o->n_env; i++) {
        const char *eq = strchr(o->env[i], '=');
        fuzz_assert(eq && eq != o->env[i]);
        for (const char *p = o->env[i]; p < eq; p++)
            fuzz_assert(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                        (p > o->env[i] && *p >= '0' && *p <= '9'));
    }
    check_files(cl, o->files, o->n_files);
    check_files(cl, o->binds, o->n_binds);

    if (!o->help) {
        if (o->lang == RUN_LANG_NONE)
            fuzz_assert(!o->code && !o->code_file && o->argc > 0);
        else
            fuzz_assert(!(o->code && o->code_file));
    }
}

/* What a parse produced, as text, to compare two parses of the same command line. */
static void describe(const struct run_options *o, char *buf, size_t size)
{
    FILE *f = fmemopen(buf, size - 1, "w"); /* buf is zeroed: stays terminated */
    fuzz_assert(f != NULL);
    fprintf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %d %d %d %d %d %d %d %d|",
            (unsigned long long)o->timeout_ms, (unsigned long long)o->cpu_time_ms,
            (unsigned long long)o->memory_bytes, (unsigned long long)o->pids,
            (unsigned long long)o->disk_bytes, (unsigned long long)o->output_limit,
            (unsigned long long)o->nofile, (unsigned long long)o->artifacts_limit, (int)o->lang,
            (int)o->seccomp, o->json, o->as_root, o->help, o->argc, o->code != NULL,
            o->code_file != NULL);
    fprintf(f, "%s|%s|%s|%s|", o->code ? o->code : "", o->code_file ? o->code_file : "",
            o->artifacts_dir ? o->artifacts_dir : "", o->cwd ? o->cwd : "");
    for (size_t i = 0; i < o->n_env; i++)
        fprintf(f, "%s|", o->env[i]);
    for (size_t i = 0; i < o->n_files; i++)
        fprintf(f, "%s:%s|", o->files[i].host_path, o->files[i].sandbox_path);
    for (size_t i = 0; i < o->n_binds; i++)
        fprintf(f, "%s:%s|", o->binds[i].host_path, o->binds[i].sandbox_path);
    fclose(f);
}

/* Parses cl; returns rc and a description of the result. */
static int parse_once(struct command_line *cl, char *desc, size_t desc_size)
{
    struct run_options o;
    err_t err;
    err_clear(&err);
    memset(desc, 0, desc_size);
    int rc = run_options_parse(cl->argc, cl->argv, &o, &err);
    if (rc == 0) {
        check_success(cl, &o);
        describe(&o, desc, desc_size);
        run_options_free(&o);
        fuzz_assert(o.n_env == 0 && o.n_files == 0 && o.n_binds == 0);
    } else {
        fuzz_assert(rc == -1);
        fuzz_assert(err.msg[0] != '\0' && memchr(err.msg, '\0', sizeof err.msg) != NULL);
        /* a failed parse has already freed what it had */
        fuzz_assert(o.n_env == 0 && o.n_files == 0 && o.n_binds == 0);
        snprintf(desc, desc_size, "error: %s", err.msg);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char first[1 << 16], second[1 << 16];
    static const uint8_t plain[] = "--\0true";
    struct command_line cl1 = split(data, size), cl2 = split(data, size);
    struct command_line cl_plain = split(plain, sizeof plain - 1);

    int rc1 = parse_once(&cl1, first, sizeof first);
    /* Nothing carries over into the next parse: getopt keeps state between calls, and glibc's
     * own reads of a stale pointer are invisible to the sanitizers, so cl1 stays allocated. */
    fuzz_assert(parse_once(&cl_plain, second, sizeof second) == 0);
    fuzz_assert(strncmp(second, "60000 ", 6) == 0);
    free_command_line(&cl1);

    int rc2 = parse_once(&cl2, second, sizeof second);
    fuzz_assert(rc1 == rc2);
    fuzz_assert(strcmp(first, second) == 0);
    free_command_line(&cl2);
    free_command_line(&cl_plain);
    return 0;
}
