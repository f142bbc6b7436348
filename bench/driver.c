/* Benchmark driver: runs several command lines N times each, round-robin, and records the wall
 * time of every run (CLOCK_MONOTONIC from just before posix_spawn to just after waitpid) and its
 * CPU time (user+system of the process and the descendants it reaped, from wait4).
 *
 * Every case is started the same way, from the same process, so the only difference between
 * two cases is the command itself. Round-robin (with the starting case rotating each round)
 * spreads machine noise, thermal drift and page-cache state over all cases equally.
 *
 * usage: driver [-n RUNS] [-w WARMUP] -o OUT.json CASES.tsv
 * CASES.tsv: one case a line, fields separated by tabs:
 *     NAME  [fd=N:PATH ...]  ARGV0  ARGV1 ...
 * fd=N:PATH opens PATH read-only as fd N of the command, fresh for every run (e.g. a seccomp
 * program for bwrap --seccomp N). stdin and stdout are /dev/null; stderr is inherited, so a
 * failing command says why. Any run that does not exit 0 stops the benchmark: timing a failure
 * would be meaningless. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_CASES 32
#define MAX_ARGS  64
#define MAX_FDS   4

struct bench_case {
    char *name;
    char *argv[MAX_ARGS + 1];
    int argc;
    int fd_num[MAX_FDS];
    char *fd_path[MAX_FDS];
    int fd_count;
    double *wall_ms;
    double *cpu_ms;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench driver: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t parse_cases(const char *path, struct bench_case *cases)
{
    FILE *f = fopen(path, "re");
    if (!f)
        die("open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, count = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (count == MAX_CASES)
            die("more than %d cases", MAX_CASES);
        struct bench_case *c = &cases[count++];
        memset(c, 0, sizeof *c);
        char *save = NULL;
        char *copy = strdup(line);
        if (!copy)
            die("out of memory");
        c->name = strtok_r(copy, "\t", &save);
        for (char *tok = strtok_r(NULL, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save)) {
            int n;
            int off = 0;
            if (c->argc == 0 && sscanf(tok, "fd=%d:%n", &n, &off) == 1 && off > 0) {
                if (c->fd_count == MAX_FDS || n < 3)
                    die("case %s: bad or too many fd= fields", c->name);
                c->fd_num[c->fd_count] = n;
                c->fd_path[c->fd_count++] = tok + off;
                continue;
            }
            if (c->argc == MAX_ARGS)
                die("case %s: more than %d arguments", c->name, MAX_ARGS);
            c->argv[c->argc++] = tok;
        }
        if (!c->name || c->argc == 0)
            die("%s: a line without a command", path);
    }
    free(line);
    fclose(f);
    if (count == 0)
        die("%s: no cases", path);
    return count;
}

/* Runs one case once; returns its wall time and fills *cpu. */
static double run_once(const struct bench_case *c, double *cpu)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < c->fd_count; i++)
        posix_spawn_file_actions_addopen(&fa, c->fd_num[i], c->fd_path[i], O_RDONLY, 0);
    pid_t pid;
    double start = now_ms();
    int rc = posix_spawn(&pid, c->argv[0], &fa, NULL, c->argv, environ);
    if (rc != 0)
        die("case %s: spawn %s: %s", c->name, c->argv[0], strerror(rc));
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR)
            die("case %s: wait4: %s", c->name, strerror(errno));
    }
    double end = now_ms();
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("case %s: the command failed (wait status 0x%x)", c->name, (unsigned)status);
    *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    return end - start;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_numbers(FILE *f, const double *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.4f", i ? ", " : "", v[i]);
    fputc(']', f);
}

static void write_json(const char *path, const struct bench_case *cases, size_t count, int runs,
                       int warmup)
{
    FILE *f = fopen(path, "we");
    if (!f)
        die("open %s: %s", path, strerror(errno));
    fprintf(f, "{\"runs\": %d, \"warmup\": %d, \"cases\": [\n", runs, warmup);
    for (size_t i = 0; i < count; i++) {
        const struct bench_case *c = &cases[i];
        fprintf(f, "  {\"name\": ");
        json_string(f, c->name);
        fprintf(f, ", \"argv\": [");
        for (int a = 0; a < c->argc; a++) {
            if (a)
                fputs(", ", f);
            json_string(f, c->argv[a]);
        }
        fprintf(f, "],\n   \"wall_ms\": ");
        json_numbers(f, c->wall_ms, runs);
        fprintf(f, ",\n   \"cpu_ms\": ");
        json_numbers(f, c->cpu_ms, runs);
        fprintf(f, "}%s\n", i + 1 < count ? "," : "");
    }
    fprintf(f, "]}\n");
    if (fclose(f) != 0)
        die("write %s: %s", path, strerror(errno));
}

int main(int argc, char **argv)
{
    int runs = 200, warmup = 5, opt;
    const char *out = NULL;
    while ((opt = getopt(argc, argv, "n:w:o:")) != -1) {
        switch (opt) {
        case 'n':
            runs = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        case 'o':
            out = optarg;
            break;
        default:
            die("usage: driver [-n RUNS] [-w WARMUP] -o OUT.json CASES.tsv");
        }
    }
    if (!out || optind != argc - 1 || runs < 1 || warmup < 0)
        die("usage: driver [-n RUNS] [-w WARMUP] -o OUT.json CASES.tsv");
    static struct bench_case cases[MAX_CASES];
    size_t count = parse_cases(argv[optind], cases);
    for (size_t i = 0; i < count; i++) {
        cases[i].wall_ms = calloc((size_t)runs, sizeof(double));
        cases[i].cpu_ms = calloc((size_t)runs, sizeof(double));
        if (!cases[i].wall_ms || !cases[i].cpu_ms)
            die("out of memory");
    }
    double cpu;
    /* Warm-up: page cache, dentry cache, hutch's template, python's .pyc files. */
    for (int r = 0; r < warmup; r++)
        for (size_t i = 0; i < count; i++)
            run_once(&cases[i], &cpu);
    double started = now_ms();
    for (int r = 0; r < runs; r++) {
        for (size_t k = 0; k < count; k++) {
            struct bench_case *c = &cases[(k + (size_t)r) % count];
            c->wall_ms[r] = run_once(c, &c->cpu_ms[r]);
        }
        if ((r + 1) % 50 == 0 || r + 1 == runs)
            fprintf(stderr, "bench driver: %d/%d rounds, %.1f s\n", r + 1, runs,
                    (now_ms() - started) / 1e3);
    }
    write_json(out, cases, count, runs, warmup);
    return 0;
}
