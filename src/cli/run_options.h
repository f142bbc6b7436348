/* `hutch run` options: parsed into a struct, validated, with the defaults `--help` prints.
 * Pure: no side effects beyond allocation, so it is unit-tested directly. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "jail/seccomp.h"
#include "util/err.h"

#define RUN_DEFAULT_TIMEOUT_MS      60000
#define RUN_DEFAULT_CPU_TIME_MS     30000
#define RUN_DEFAULT_MEMORY          (512ull << 20)
#define RUN_DEFAULT_PIDS            256
#define RUN_DEFAULT_DISK            (256ull << 20)
#define RUN_DEFAULT_OUTPUT_LIMIT    (4ull << 20)
#define RUN_DEFAULT_NOFILE          1024
#define RUN_DEFAULT_ARTIFACTS_LIMIT (64ull << 20)
#define RUN_MAX_ITEMS               256 /* --env and --file, each */
/* Upper bounds, refused beyond, so that nothing the supervisor computes from a value (a
 * deadline in ns, byte counts) can wrap: a year in ns is 2^55, 16T leaves 2^20 of headroom. */
#define RUN_MAX_DURATION_MS (365ull * 24 * 3600 * 1000) /* --timeout, --cpu-time */
#define RUN_MAX_SIZE        (16ull << 40)               /* --memory, --disk, --artifacts-limit */
#define RUN_MAX_OUTPUT      (1ull << 30)                /* --output-limit */

enum run_lang { RUN_LANG_NONE, RUN_LANG_PYTHON, RUN_LANG_NODE, RUN_LANG_BASH };

struct run_file {
    char *host_path;
    char *sandbox_path; /* absolute */
};

struct run_options {
    uint64_t timeout_ms, cpu_time_ms, memory_bytes, pids, disk_bytes, output_limit, nofile;
    uint64_t artifacts_limit;
    uint64_t ptys, inotify_instances, inotify_watches; /* 0: the core's defaults */
    enum run_lang lang;
    const char *code;      /* --code TEXT */
    const char *code_file; /* --code-file PATH ("-" = stdin) */
    const char *artifacts_dir;
    const char *cwd;
    const char *writable_root; /* --writable-root NAME: the persistent layer STATE/sandboxes/NAME */
    const char *state_dir;     /* --state-dir DIR, else hutch_state_dir() */
    enum seccomp_profile seccomp;
    bool json, as_root, help;
    char *env[RUN_MAX_ITEMS]; /* "K=V" as given */
    size_t n_env;
    struct run_file files[RUN_MAX_ITEMS];
    size_t n_files;
    struct run_file binds[RUN_MAX_ITEMS]; /* --ro-bind */
    size_t n_binds;
    char **argv; /* after "--" (command, or extra arguments for --lang) */
    int argc;
};

/* A layer's name: 1 to RUN_MAX_LAYER_NAME of [A-Za-z0-9._-], not starting with '.'. */
#define RUN_MAX_LAYER_NAME 64
bool run_layer_name_ok(const char *name);

/* Parses argv (argv[0] = "run"). Returns 0, or -1 with a message for the user in err. */
int run_options_parse(int argc, char **argv, struct run_options *out, err_t *err);
void run_options_free(struct run_options *opts);
void run_options_usage(FILE *out);
const char *run_lang_name(enum run_lang lang);
