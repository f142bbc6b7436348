/* hutch serve: the daemon. One libuv loop on one thread holds every live sandbox, the HTTP
 * server (src/http) and the store (src/sandbox); the routes (routes.c) map E2B's API onto the
 * sandbox registry (sandbox.h). Nothing here blocks the loop on a sandbox: starts, stops and
 * freezes are steps driven by the control fd, the pidfd and timers. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <uv.h>

#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/template.h"
#include "sandbox/store.h"

#define SERVE_DEFAULT_HOST "127.0.0.1"
#define SERVE_DEFAULT_PORT 3000
#define SERVE_ENVD_VERSION "0.6.4" /* what the SDK is told: the features it then uses */
#define SERVE_KEY_FILE     "api-key"

struct sbx;
struct http_server;
struct disk_pool;
struct warm_pools;
struct sbx_reopen;

struct serve {
    uv_loop_t *loop;
    struct store *store;
    struct http_server *http;
    struct cgroup_host *cgroups;
    struct template_paths tpl;
    char state_dir[PATH_MAX];
    char run_dir[PATH_MAX];
    char lock_path[PATH_MAX];     /* RUN/uid-slots.lock: the uid ranges */
    char sandboxes_dir[PATH_MAX]; /* STATE/sandboxes: each one's disk layer */
    int run_fd;                   /* RUN: sandbox records and init sockets */
    int null_fd;                  /* /dev/null: init's stdio */
    char env_api_key[128];        /* HUTCH_API_KEY, "" when not set */
    /* hutch-sudo beside our own binary (or $HUTCH_SUDO), bound read-only at /usr/local/bin/sudo
     * in each sandbox; host_path NULL when there is none (sandboxes then have no sudo). */
    char sudo_path[PATH_MAX];
    /* the code contexts' kernels (src/interp), bound read-only at INTERP_SANDBOX_DIR in each
     * sandbox (serve.c, find_interp); "" when there are none (no code contexts then) */
    char interp_path[PATH_MAX];
    /* hutch-kernel-stub beside our binary (or $HUTCH_KERNEL_STUB), bound at
     * INTERP_SANDBOX_STUB: contexts forked from a zygote (src/kstub); "" when none */
    char kernel_stub_path[PATH_MAX];
    /* how long a kernel may take to its ready before it is killed: $HUTCH_KERNEL_READY_TIMEOUT
     * seconds (1..3600), else 120 (jshell takes seconds on a busy host) */
    uint64_t kernel_ready_ms;
    struct jail_mount mounts[3]; /* what every sandbox has bound: sudo, the kernels, the stub */
    size_t n_mounts;
    struct sbx *sandboxes; /* the live ones (sandbox.c) */
    size_t n_sandboxes;
    struct sbx_reopen *reopen;   /* the last run's sandboxes still to reopen (sandbox.c) */
    struct disk_pool *disk_pool; /* disk layers made ahead (disk_pool.c); NULL when stopped */
    uv_signal_t sig_term, sig_int;
    bool stopping;
    struct warm_pools *pools; /* pool.c; NULL until a create of a template with a pool came */
    struct host_zygote
        *host_zygote; /* the host's python zygote (host_zygote.c); NULL until wanted */
};

/* `hutch serve [--listen ADDR:PORT] [--state DIR] [--socket PATH]`: runs until SIGTERM or
 * SIGINT. Sandboxes outlive it: a new daemon on the same state and run directories reopens them. */
int serve_main(int argc, char **argv);

/* Whether key is a valid API key (HUTCH_API_KEY, or one whose hash is in the store). */
bool serve_api_key_ok(struct serve *d, const char *key);
