/* `hutch serve`: options, the state and run directories, the API key, the listeners, the loop
 * (serve.h). */
#include "serve/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/auth.h"
#include "cli/paths.h"
#include "http/http.h"
#include "serve/disk_pool.h"
#include "serve/host_zygote.h"
#include "serve/interp.h"
#include "serve/pool.h"
#include "serve/routes.h"
#include "serve/sandbox.h"
#include "util/fileio.h"
#include "util/parse.h"
#include "util/strfmt.h"

struct serve_options {
    char host[64];
    uint16_t port;
    const char *state_dir;
    const char *socket_path;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hutch serve [--listen ADDR:PORT] [--state DIR] [--socket PATH]\n"
            "\n"
            "The daemon: persistent sandboxes driven over E2B's HTTP API (the e2b SDK with\n"
            "E2B_API_URL=http://ADDR:PORT and E2B_SANDBOX_URL=http://ADDR:PORT).\n"
            "  --listen ADDR:PORT  TCP address (default %s:%d; [::1]:PORT for IPv6)\n"
            "  --state DIR         state directory (default $HUTCH_STATE_DIR or %s)\n"
            "  --socket PATH       unix socket for the CLI (default RUN/hutch.sock)\n"
            "On its first start it makes an API key and writes it to STATE/%s (root only);\n"
            "HUTCH_API_KEY in its environment is accepted as a key too.\n",
            SERVE_DEFAULT_HOST, SERVE_DEFAULT_PORT, hutch_state_dir(), SERVE_KEY_FILE);
}

static int parse_listen(const char *arg, struct serve_options *o)
{
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg)
        return -1;
    const char *host = arg;
    size_t n = (size_t)(colon - arg);
    if (arg[0] == '[') { /* [::1]:3000 */
        if (n < 3 || arg[n - 1] != ']')
            return -1;
        host = arg + 1;
        n -= 2;
    }
    uint64_t port;
    if (n >= sizeof o->host || parse_count(colon + 1, 0, 65535, &port) < 0)
        return -1;
    memcpy(o->host, host, n);
    o->host[n] = '\0';
    o->port = (uint16_t)port;
    return 0;
}

static int parse_options(int argc, char **argv, struct serve_options *o)
{
    static const struct option longs[] = {{"listen", required_argument, NULL, 'l'},
                                          {"state", required_argument, NULL, 's'},
                                          {"socket", required_argument, NULL, 'u'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
    snprintf(o->host, sizeof o->host, "%s", SERVE_DEFAULT_HOST);
    o->port = SERVE_DEFAULT_PORT;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (parse_listen(optarg, o) < 0) {
                fprintf(stderr,
                        "hutch serve: --listen %s: want ADDR:PORT, such as 127.0.0.1:3000\n",
                        optarg);
                return -1;
            }
            break;
        case 's':
            o->state_dir = optarg;
            break;
        case 'u':
            o->socket_path = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "hutch serve: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

bool serve_api_key_ok(struct serve *d, const char *key)
{
    if (!key || !key[0] || strlen(key) > 256)
        return false;
    if (d->env_api_key[0] && auth_token_equal(key, d->env_api_key))
        return true;
    err_t err;
    return store_api_key_check(d->store, key, &err) == 1;
}

/* The first start makes a key and writes it where only root can read it. */
static int bootstrap_key(struct serve *d, err_t *err)
{
    int n = store_api_key_count(d->store, err);
    if (n < 0)
        return -1;
    char path[PATH_MAX];
    if (strfmt(path, sizeof path, "%s/%s", d->state_dir, SERVE_KEY_FILE) < 0)
        return err_set(err, ENAMETOOLONG, "%s: path too long", d->state_dir);
    if (n > 0)
        return 0;
    char key[AUTH_TOKEN_MAX + 1];
    if (auth_token_new("hutch_", key, sizeof key) < 0)
        return err_set(err, EIO, "no random key");
    unlink(path); /* a file of an earlier database's key: that key is not in this one */
    if (store_api_key_add(d->store, key, "first", err) < 0 ||
        auth_key_file_create(path, key, err) < 0)
        return -1;
    fprintf(stderr, "hutch serve: an API key was made: export E2B_API_KEY=$(cat %s)\n", path);
    return 0;
}

static void handle_request(struct http_exchange *x, const struct http_request *req, void *ctx)
{
    struct serve *d = ctx;
    if (routes_is_envd(req)) {
        routes_envd(d, x, req);
        return;
    }
    if (strcmp(req->path, "/health") == 0) {
        http_respond(x, 200, NULL, 0, NULL, 0);
        return;
    }
    routes_control(d, x, req);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void on_stop_signal(uv_signal_t *s, int signum)
{
    struct serve *d = s->data;
    if (d->stopping)
        return;
    d->stopping = true;
    fprintf(stderr, "hutch serve: signal %d: stopping (sandboxes keep running)\n", signum);
    http_server_close(d->http);
    pool_stop(d);
    disk_pool_stop(d);
    host_zygote_stop(d);
    sbx_detach_all(d);
    uv_signal_stop(&d->sig_term);
    uv_signal_stop(&d->sig_int);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
}

/* Whether a sandbox's root, a uid of no group of the host's, can reach path and run it (a file)
 * or read it (a directory): the setup child binds it as that uid, and a bind it cannot make would
 * fail the whole sandbox. */
static bool reachable_by_others(const char *path)
{
    char dir[PATH_MAX];
    struct stat st;
    if (stat(path, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) ||
        (st.st_mode & 0005) != 0005 || strfmt(dir, sizeof dir, "%s", path) < 0)
        return false;
    for (char *slash = strrchr(dir, '/'); slash && slash > dir; slash = strrchr(dir, '/')) {
        *slash = '\0';
        if (stat(dir, &st) < 0 || !(st.st_mode & S_IXOTH))
            return false;
    }
    return true;
}

/* A program of hutch's that every sandbox gets bound read-only at sandbox_path: $env ("" for
 * none), else NAME in the directory of our own binary. Without it (or where sandboxes cannot
 * reach it) they have none, and nothing else changes. */
static void bind_beside(struct serve *d, const char *env_name, const char *name, char *out,
                        const char *sandbox_path, const char *what)
{
    const char *env = getenv(env_name);
    char path[PATH_MAX] = "";
    ssize_t n;
    out[0] = '\0';
    if (env) {
        if (!env[0] || strfmt(path, sizeof path, "%s", env) < 0)
            return;
    } else if ((n = readlink("/proc/self/exe", path, sizeof path - 1)) > 0) {
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        if (!slash || strfmt(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", name) < 0)
            return;
    }
    if (!path[0] || !realpath(path, out) || access(out, X_OK) < 0) {
        fprintf(stderr, "hutch serve: no %s in sandboxes (%s: %s)\n", what, path[0] ? path : name,
                strerror(errno));
        out[0] = '\0';
        return;
    }
    if (!reachable_by_others(out)) {
        fprintf(stderr,
                "hutch serve: no %s in sandboxes: %s is not readable and executable by other "
                "users (sandboxes run as uids of their own); set %s to a copy that is\n",
                what, out, env_name);
        out[0] = '\0';
        return;
    }
    d->mounts[d->n_mounts++] = (struct jail_mount){.host_path = out, .sandbox_path = sandbox_path};
}

static uint64_t kernel_ready_timeout_ms(void)
{
    const char *env = getenv("HUTCH_KERNEL_READY_TIMEOUT");
    uint64_t s = 120;
    if (env && env[0] && parse_count(env, 1, 3600, &s) < 0) {
        fprintf(stderr,
                "hutch serve: HUTCH_KERNEL_READY_TIMEOUT=%s is not 1..3600 seconds: 120 it is\n",
                env);
        s = 120;
    }
    return s * 1000;
}

/* The code contexts' kernels (src/interp): $HUTCH_INTERP ("" for none), else src/interp of the
 * source tree our binary was built in (BIN/../src/interp), else an installed
 * BIN/../lib/hutch/interp. Without them sandboxes have no code contexts (port 49999 answers so),
 * and nothing else changes. */
static void find_interp(struct serve *d)
{
    const char *env = getenv("HUTCH_INTERP");
    char self[PATH_MAX], path[PATH_MAX] = "";
    ssize_t n;
    if (env) {
        if (!env[0] || strfmt(path, sizeof path, "%s", env) < 0)
            return;
    } else if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
            return;
        *slash = '\0';
        static const char *const beside[] = {"../src/interp", "../lib/hutch/interp"};
        for (size_t i = 0; i < sizeof beside / sizeof *beside && !path[0]; i++)
            if (strfmt(path, sizeof path, "%s/%s/PROTOCOL.md", self, beside[i]) < 0 ||
                access(path, R_OK) < 0)
                path[0] = '\0';
        char *end = path[0] ? strrchr(path, '/') : NULL;
        if (end)
            *end = '\0';
    }
    if (!path[0] || !realpath(path, d->interp_path)) {
        fprintf(stderr, "hutch serve: no code contexts in sandboxes (%s: %s)\n",
                path[0] ? path : "src/interp", path[0] ? strerror(errno) : "not found");
        d->interp_path[0] = '\0';
        return;
    }
    if (!reachable_by_others(d->interp_path)) {
        fprintf(stderr,
                "hutch serve: no code contexts in sandboxes: %s is not readable by other users "
                "(sandboxes run as uids of their own); set HUTCH_INTERP to a copy that is\n",
                d->interp_path);
        d->interp_path[0] = '\0';
        return;
    }
    d->mounts[d->n_mounts++] =
        (struct jail_mount){.host_path = d->interp_path, .sandbox_path = INTERP_SANDBOX_DIR};
}

static int setup(struct serve *d, const struct serve_options *o, err_t *err)
{
    if (strfmt(d->state_dir, sizeof d->state_dir, "%s",
               o->state_dir ? o->state_dir : hutch_state_dir()) < 0 ||
        strfmt(d->run_dir, sizeof d->run_dir, "%s", hutch_run_dir()) < 0 ||
        strfmt(d->lock_path, sizeof d->lock_path, "%s/uid-slots.lock", d->run_dir) < 0 ||
        strfmt(d->sandboxes_dir, sizeof d->sandboxes_dir, "%s/sandboxes", d->state_dir) < 0)
        return err_set(err, ENAMETOOLONG, "state or run directory: path too long");
    const char *env_key = getenv("HUTCH_API_KEY");
    if (env_key && strfmt(d->env_api_key, sizeof d->env_api_key, "%s", env_key) < 0)
        return err_set(err, EINVAL, "HUTCH_API_KEY is longer than %zu bytes",
                       sizeof d->env_api_key - 1);
    if (mkdir_p_at(AT_FDCWD, d->state_dir, 0755, err) < 0 ||
        mkdir_p_at(AT_FDCWD, d->sandboxes_dir, 0700, err) < 0 ||
        mkdir_p_at(AT_FDCWD, d->run_dir, 0755, err) < 0)
        return -1;
    d->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (d->null_fd < 0)
        return err_set(err, errno, "/dev/null");
    d->run_fd = open(d->run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (d->run_fd < 0)
        return err_set(err, errno, "%s", d->run_dir);
    char db[PATH_MAX];
    if (strfmt(db, sizeof db, "%s/hutch.db", d->state_dir) < 0)
        return err_set(err, ENAMETOOLONG, "%s: path too long", d->state_dir);
    d->store = store_open(db, err);
    if (!d->store || bootstrap_key(d, err) < 0)
        return -1;
    hutch_cgroup_want_cpu_limits(); /* every sandbox's cpuCount is enforced */
    d->cgroups = hutch_cgroup_host(err);
    if (!d->cgroups || template_prepare_base(d->state_dir, &d->tpl, err) < 0)
        return -1;
    if (jail_init_exec_fd() < 0)
        return err_set(err, ENOENT, "cannot open hutch's own binary to run as init");
    /* the sandboxes' sudo (src/sudo/main.c) */
    bind_beside(d, "HUTCH_SUDO", "hutch-sudo", d->sudo_path, "/usr/local/bin/sudo", "sudo");
    find_interp(d);
    d->kernel_ready_ms = kernel_ready_timeout_ms();
    if (d->interp_path[0])
        bind_beside(d, "HUTCH_KERNEL_STUB", "hutch-kernel-stub", d->kernel_stub_path,
                    INTERP_SANDBOX_STUB, "kernel zygotes");
    return 0;
}

/* The daemon's own work ahead of need, once the last run's sandboxes are all reopened: the host's
 * python zygote (its imports take a second or two of a CPU), so that the first code context does
 * not wait for it (it lives as long as the daemon), and the disk layers made ahead (mke2fs). */
static void start_background(struct serve *d)
{
    if (d->stopping)
        return;
    host_zygote_want(d);
    disk_pool_start(d);
}

int serve_main(int argc, char **argv)
{
    struct serve_options o = {0};
    if (parse_options(argc, argv, &o) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    static struct serve d = {.run_fd = -1, .null_fd = -1};
    err_t err;
    if (setup(&d, &o, &err) < 0) {
        fprintf(stderr, "hutch serve: %s\n", err.msg);
        return 1;
    }
    d.loop = uv_default_loop();
    const struct http_handler handler = {handle_request, &d};
    d.http = http_server_new(d.loop, NULL, &handler, &err);
    char sock[PATH_MAX];
    if (!o.socket_path && strfmt(sock, sizeof sock, "%s/hutch.sock", d.run_dir) < 0) {
        fprintf(stderr, "hutch serve: %s: path too long\n", d.run_dir);
        return 1;
    }
    /* The unix socket is the CLI's, and takes control-plane calls without an API key: it is
     * mode 0600, made so before it listens (http_server_listen_unix), so only the daemon's own
     * user (root) can connect, and that user can read the key file anyway. envd calls on it
     * still need the sandbox's access token (the CLI gets it from GET /sandboxes/{id}). */
    uint16_t port = 0;
    if (!d.http || http_server_listen_tcp(d.http, o.host, o.port, &port, &err) < 0 ||
        http_server_listen_unix(d.http, o.socket_path ? o.socket_path : sock, 0600, &err) < 0) {
        fprintf(stderr, "hutch serve: %s\n", err.msg);
        return 1;
    }
    uv_signal_init(d.loop, &d.sig_term);
    uv_signal_init(d.loop, &d.sig_int);
    d.sig_term.data = d.sig_int.data = &d;
    uv_signal_start(&d.sig_term, on_stop_signal, SIGTERM);
    uv_signal_start(&d.sig_int, on_stop_signal, SIGINT);
    size_t live = sbx_reopen_all(&d, start_background);
    fprintf(stderr, "hutch serve: listening on http://%s%s%s:%u and %s; %zu sandboxes reopened\n",
            strchr(o.host, ':') ? "[" : "", o.host, strchr(o.host, ':') ? "]" : "", port,
            o.socket_path ? o.socket_path : sock, live);
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_walk(d.loop, close_walk, NULL);
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_loop_close(d.loop);
    store_close(d.store);
    close(d.run_fd);
    return 0;
}
