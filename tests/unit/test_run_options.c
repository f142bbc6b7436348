/* hutch run's command line: defaults, every option, and every kind of bad input. */
#include <stdlib.h>

#include "cli/run_options.h"
#include "tap.h"

static int parse(struct run_options *o, err_t *err, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return run_options_parse(argc, argv, o, err);
}

#define ARGV(...) ((char *[]){"run", __VA_ARGS__, NULL})

static void bad(char **argv, const char *needle, const char *what)
{
    struct run_options o;
    err_t err = {0};
    int rc = parse(&o, &err, argv);
    ok(rc < 0 && strstr(err.msg, needle), "rejected: %s (message: %s)", what, err.msg);
}

int main(void)
{
    struct run_options o;
    err_t err = {0};

    char *argv1[] = {"run", "--", "/bin/true", NULL};
    ok(parse(&o, &err, argv1) == 0, "plain command");
    ok(o.argc == 1 && strcmp(o.argv[0], "/bin/true") == 0, "command after --");
    is_u64(o.timeout_ms, RUN_DEFAULT_TIMEOUT_MS, "default timeout");
    is_u64(o.memory_bytes, RUN_DEFAULT_MEMORY, "default memory");
    is_u64(o.pids, RUN_DEFAULT_PIDS, "default pids");
    is_u64(o.disk_bytes, RUN_DEFAULT_DISK, "default disk");
    is_u64(o.output_limit, RUN_DEFAULT_OUTPUT_LIMIT, "default output limit");
    ok(!o.json && !o.as_root && o.lang == RUN_LANG_NONE, "default flags");
    run_options_free(&o);

    char *argv2[] = {"run",
                     "--timeout",
                     "2.5",
                     "--cpu-time",
                     "1",
                     "--memory",
                     "64M",
                     "--pids",
                     "10",
                     "--disk",
                     "1G",
                     "--output-limit",
                     "10K",
                     "--nofile",
                     "64",
                     "--json",
                     "--root",
                     "--env",
                     "A=1",
                     "--env",
                     "B_2=x=y",
                     "--file",
                     "/etc/hosts:/tmp/h",
                     "--file",
                     "/a:b:rel/../f",
                     "--artifacts",
                     "/tmp/out",
                     "--cwd",
                     "/tmp",
                     "--seccomp",
                     "strict",
                     "--",
                     "ls",
                     "-l",
                     "--json",
                     NULL};
    ok(parse(&o, &err, argv2) == 0, "every option");
    is_u64(o.timeout_ms, 2500, "--timeout 2.5");
    is_u64(o.cpu_time_ms, 1000, "--cpu-time 1");
    is_u64(o.memory_bytes, 64ull << 20, "--memory 64M");
    is_u64(o.pids, 10, "--pids 10");
    is_u64(o.disk_bytes, 1ull << 30, "--disk 1G");
    is_u64(o.output_limit, 10240, "--output-limit 10K");
    is_u64(o.nofile, 64, "--nofile 64");
    ok(o.json && o.as_root, "--json --root");
    ok(o.n_env == 2 && strcmp(o.env[1], "B_2=x=y") == 0, "--env twice, value with =");
    ok(o.n_files == 2, "--file twice");
    is_str(o.files[0].host_path, "/etc/hosts", "--file host path");
    is_str(o.files[0].sandbox_path, "/tmp/h", "--file sandbox path");
    is_str(o.files[1].host_path, "/a:b", "--file splits at the last colon");
    is_str(o.files[1].sandbox_path, "/home/user/f",
           "relative destination is under home, .. resolved");
    is_str(o.artifacts_dir, "/tmp/out", "--artifacts");
    ok(o.seccomp == SECCOMP_PROFILE_STRICT, "--seccomp strict");
    ok(o.argc == 3 && strcmp(o.argv[2], "--json") == 0, "the command's own flags are its own");
    run_options_free(&o);

    char *argv3[] = {"run", "--lang", "python", "--code", "print(1)", NULL};
    ok(parse(&o, &err, argv3) == 0, "--lang with --code");
    run_options_free(&o);
    char *argv_bind[] = {"run", "--ro-bind", "/srv/data:/mnt/d", "--ro-bind", "/a:b", "--",
                         "x",   NULL};
    ok(parse(&o, &err, argv_bind) == 0 && o.n_binds == 2, "--ro-bind twice");
    is_str(o.binds[0].sandbox_path, "/mnt/d", "--ro-bind target");
    is_str(o.binds[1].sandbox_path, "/home/user/b", "--ro-bind relative target is under home");
    run_options_free(&o);
    ok(parse(&o, &err, argv3) == 0, "--lang with --code again");
    ok(o.lang == RUN_LANG_PYTHON && strcmp(o.code, "print(1)") == 0 && o.argc == 0,
       "--lang python --code");
    run_options_free(&o);
    char *argv4[] = {"run", "--lang", "node", NULL};
    ok(parse(&o, &err, argv4) == 0 && o.lang == RUN_LANG_NODE,
       "--lang without code reads stdin later");
    run_options_free(&o);
    char *argv5[] = {"run", "--lang", "bash", "--code-file", "x.sh", "--", "a", "b", NULL};
    ok(parse(&o, &err, argv5) == 0 && o.argc == 2, "--lang with --code-file and arguments");
    run_options_free(&o);
    char *argv_shares[] = {
        "run", "--ptys", "3", "--inotify-instances", "5", "--inotify-watches", "100",
        "--",  "x",      NULL};
    ok(parse(&o, &err, argv_shares) == 0 && o.ptys == 3 && o.inotify_instances == 5 &&
           o.inotify_watches == 100,
       "--ptys, --inotify-instances, --inotify-watches");
    run_options_free(&o);
    char *argv6[] = {"run", "--help", NULL};
    ok(parse(&o, &err, argv6) == 0 && o.help, "--help");
    run_options_free(&o);

    /* --- ranges: the largest value is taken, one past it refused, never wrapped ---------- */
    char *argv_max[] = {"run",      "--timeout",
                        "31536000", "--cpu-time",
                        "525600m",  "--memory",
                        "16T",      "--disk",
                        "16384G",   "--artifacts-limit",
                        "16T",      "--output-limit",
                        "1G",       "--",
                        "x",        NULL};
    ok(parse(&o, &err, argv_max) == 0, "every limit at its maximum (%s)", err.msg);
    is_u64(o.timeout_ms, RUN_MAX_DURATION_MS, "--timeout 31536000: a year");
    is_u64(o.cpu_time_ms, RUN_MAX_DURATION_MS, "--cpu-time 525600m: a year");
    ok(o.memory_bytes == RUN_MAX_SIZE && o.disk_bytes == RUN_MAX_SIZE &&
           o.artifacts_limit == RUN_MAX_SIZE,
       "--memory, --disk, --artifacts-limit 16T");
    is_u64(o.output_limit, RUN_MAX_OUTPUT, "--output-limit 1G");
    run_options_free(&o);
    char *argv_small[] = {"run", "--timeout", "1ms", "--output-limit", "0", "--", "x", NULL};
    ok(parse(&o, &err, argv_small) == 0 && o.timeout_ms == 1 && o.output_limit == 0,
       "--timeout 1ms, --output-limit 0");
    run_options_free(&o);
    /* a timeout in ns must fit in 64 bits with the clock added: 584 years would wrap */
    ok((uint64_t)-1 / 1000000 / 2 > RUN_MAX_DURATION_MS, "a year in ns is far from wrapping");
    bad(ARGV("--timeout", "18446744074", "--", "x"), "at most 365 days", "--timeout of 584 years");
    bad(ARGV("--timeout", "31536000.001", "--", "x"), "at most 365 days",
        "--timeout a ms past a year");
    bad(ARGV("--timeout", "525601m", "--", "x"), "at most 365 days",
        "--timeout a minute past a year");
    bad(ARGV("--timeout", "18446744073709551616ms", "--", "x"), "--timeout",
        "--timeout past 2^64 ms");
    bad(ARGV("--cpu-time", "18446744074", "--", "x"), "at most 365 days",
        "--cpu-time of 584 years");
    bad(ARGV("--cpu-time", "0.0001", "--", "x"), "positive duration", "--cpu-time below 1 ms");
    bad(ARGV("--memory", "17T", "--", "x"), "from 4 MiB to 16 TiB", "--memory past 16T");
    bad(ARGV("--memory", "18446744073709551615", "--", "x"), "--memory", "--memory 2^64-1");
    bad(ARGV("--disk", "16385G", "--", "x"), "from 1 MiB to 16 TiB", "--disk past 16T");
    bad(ARGV("--artifacts-limit", "17T", "--", "x"), "up to 16 TiB", "--artifacts-limit past 16T");
    bad(ARGV("--output-limit", "1025M", "--", "x"), "up to 1 GiB", "--output-limit past 1G");
    bad(ARGV("--pids", "4194305", "--", "x"), "--pids", "--pids past the kernel's pid limit");

    /* --env, --file and --ro-bind hold at most RUN_MAX_ITEMS each: one more is refused, not cut */
    static const char *const repeatable[] = {"--env", "--file", "--ro-bind"};
    for (size_t k = 0; k < 3; k++) {
        static char *many[2 * (RUN_MAX_ITEMS + 1) + 4];
        static char values[RUN_MAX_ITEMS + 1][32];
        for (int count = RUN_MAX_ITEMS; count <= RUN_MAX_ITEMS + 1; count++) {
            int n = 0;
            many[n++] = "run";
            for (int i = 0; i < count; i++) {
                snprintf(values[i], sizeof values[i], k == 0 ? "V%d=x" : "/h%d:/s%d", i, i);
                many[n++] = (char *)repeatable[k];
                many[n++] = values[i];
            }
            many[n++] = "--";
            many[n++] = "x";
            many[n] = NULL;
            int rc = parse(&o, &err, many);
            if (count == RUN_MAX_ITEMS) {
                ok(rc == 0, "%s %d times: taken", repeatable[k], count);
                run_options_free(&o);
            } else {
                ok(rc < 0 && strstr(err.msg, "at most 256"), "%s %d times: refused (%s)",
                   repeatable[k], count, err.msg);
            }
        }
    }

    bad(ARGV("--", NULL), "no command", "no command");
    bad((char *[]){"run", NULL}, "no command", "nothing at all");
    bad(ARGV("--bogus", "--", "x"), "unknown option", "unknown option");
    bad(ARGV("--timeout"), "missing value", "missing value");
    bad(ARGV("--timeout", "0", "--", "x"), "--timeout", "zero timeout");
    bad(ARGV("--timeout", "-1", "--", "x"), "--timeout", "negative timeout");
    bad(ARGV("--memory", "abc", "--", "x"), "--memory", "memory not a size");
    bad(ARGV("--memory", "1K", "--", "x"), "--memory", "memory too small");
    bad(ARGV("--pids", "0", "--", "x"), "--pids", "zero pids");
    bad(ARGV("--pids", "1.5", "--", "x"), "--pids", "fractional pids");
    bad(ARGV("--disk", "10", "--", "x"), "--disk", "disk too small");
    bad(ARGV("--output-limit", "2G", "--", "x"), "--output-limit", "output limit too large");
    bad(ARGV("--nofile", "2", "--", "x"), "--nofile", "nofile too small");
    bad(ARGV("--ptys", "0", "--", "x"), "--ptys", "zero ptys");
    bad(ARGV("--ptys", "5000", "--", "x"), "--ptys", "more ptys than the host has");
    bad(ARGV("--inotify-instances", "0", "--", "x"), "--inotify-instances", "zero instances");
    bad(ARGV("--inotify-watches", "99999999", "--", "x"), "--inotify-watches", "too many watches");
    bad(ARGV("--env", "NOVALUE", "--", "x"), "NAME=VALUE", "env without =");
    bad(ARGV("--env", "=v", "--", "x"), "NAME=VALUE", "env without name");
    bad(ARGV("--env", "1A=v", "--", "x"), "invalid variable name", "env name starting with digit");
    bad(ARGV("--env", "A-B=v", "--", "x"), "invalid variable name", "env name with dash");
    bad(ARGV("--file", "nocolon", "--", "x"), "HOST:SANDBOX", "file without colon");
    bad(ARGV("--file", "/a:", "--", "x"), "HOST:SANDBOX", "file with empty destination");
    bad(ARGV("--file", "/a:/../..", "--", "x"), "bad sandbox path", "file destination above /");
    bad(ARGV("--file", "/a:/", "--", "x"), "bad sandbox path", "file destination /");
    bad(ARGV("--ro-bind", "/etc", "--", "x"), "HOST:SANDBOX", "ro-bind without a target");
    bad(ARGV("--ro-bind", "/etc:/..", "--", "x"), "bad sandbox path", "ro-bind target above /");
    bad(ARGV("--lang", "cobol"), "--lang", "unknown language");
    bad(ARGV("--code", "x", "--", "y"), "need --lang", "--code without --lang");
    bad(ARGV("--lang", "python", "--code", "x", "--code-file", "y"), "mutually exclusive",
        "--code and --code-file");
    bad(ARGV("--cwd", "relative", "--", "x"), "absolute", "relative --cwd");
    bad(ARGV("--seccomp", "none", "--", "x"), "--seccomp", "unknown seccomp profile");

    char *argv_wr[] = {"run", "--writable-root", "ws-1.a_b", "--state-dir", "/tmp/s", "--", "true",
                       NULL};
    ok(parse(&o, &err, argv_wr) == 0 && o.writable_root &&
           strcmp(o.writable_root, "ws-1.a_b") == 0 && o.state_dir &&
           strcmp(o.state_dir, "/tmp/s") == 0,
       "--writable-root NAME and --state-dir DIR");
    run_options_free(&o);
    char *argv_nowr[] = {"run", "--", "true", NULL};
    ok(parse(&o, &err, argv_nowr) == 0 && !o.writable_root && !o.state_dir,
       "no writable root by default");
    run_options_free(&o);
    bad(ARGV("--writable-root", "", "--", "x"), "--writable-root", "empty layer name");
    bad(ARGV("--writable-root", "../etc", "--", "x"), "--writable-root", "layer name with ..");
    bad(ARGV("--writable-root", ".hidden", "--", "x"), "--writable-root",
        "layer name with a dot first");
    bad(ARGV("--writable-root", "a/b", "--", "x"), "--writable-root", "layer name with a slash");
    bad(ARGV("--writable-root", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "--", "x"),
        "--writable-root", "layer name of 65 bytes");
    bad(ARGV("--state-dir", "relative", "--", "x"), "--state-dir", "relative --state-dir");
    return done_testing();
}
