/* The host's python zygote (host_zygote.h). */
#include "serve/host_zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "jail/cgroup.h"
#include "jail/command.h"
#include "jail/jail.h"
#include "proto/proto.h"
#include "serve/interp.h"
#include "serve/sandbox.h"
#include "util/strfmt.h"

#define ZYGOTE_FILE    "python_zygote.py"
#define ZYGOTE_PRELOAD "numpy,pandas,matplotlib.pyplot"
#define ANSWER_MAX     4096
#define FDS_MAX        (3 + PROTO_MAX_V1_FDS)
/* under the stub's minute: a request older than this is not sent (host_zygote_fork) */
#define HOST_ZYGOTE_WAIT_MS 45000

struct hz_request {
    uint64_t id;
    host_zygote_done_fn done;
    void *user;
    /* not sent yet (asked while the zygote was starting): what sending it takes */
    bool sent;
    struct sbx *sb;
    char group[JAIL_COMMAND_GROUP_MAX + 1];
    int stub_pidfd;
    uint64_t asked_ms;
    struct hz_request *next;
};

struct host_zygote {
    struct serve *d;
    uv_process_t proc;
    uv_poll_t poll;
    int sock; /* our end of its stdin; -1 when none runs */
    bool running, ready, proc_open, poll_open;
    unsigned starts;
    uint64_t next_id;
    struct hz_request *pending;
    char lib[PATH_MAX]; /* build/libhutch-enter.so beside our binary, or $HUTCH_ENTER_LIB */
    char home[PATH_MAX];
};

static struct host_zygote *state(struct serve *d)
{
    return d->host_zygote;
}

static void request_free(struct hz_request *r)
{
    if (r->stub_pidfd >= 0)
        close(r->stub_pidfd);
    free(r);
}

static void fail_pending(struct host_zygote *z, const char *why)
{
    while (z->pending) {
        struct hz_request *r = z->pending;
        z->pending = r->next;
        if (r->done)
            r->done(r->user, 0, why);
        request_free(r);
    }
}

static int send_request(struct host_zygote *z, struct hz_request *r, err_t *err);

/* The zygote is ready: what waited for it is sent, but for what waited too long (its stub has
 * started the kernel itself after a minute: a fork now would take that kernel's pipes). */
static void send_waiting(struct host_zygote *z)
{
    uint64_t now = uv_now(z->d->loop);
    for (struct hz_request **at = &z->pending, *r; (r = *at);) {
        err_t err;
        if (r->sent) {
            at = &r->next;
            continue;
        }
        if (now - r->asked_ms > HOST_ZYGOTE_WAIT_MS)
            err_set(&err, ETIMEDOUT, "the host's zygote was not ready in time");
        else if (send_request(z, r, &err) == 0) {
            at = &r->next;
            continue;
        }
        *at = r->next;
        if (r->done)
            r->done(r->user, 0, err.msg);
        request_free(r);
    }
}

static void poll_closed(uv_handle_t *h)
{
    struct host_zygote *z = h->data;
    z->poll_open = false;
}

static void proc_closed(uv_handle_t *h)
{
    struct host_zygote *z = h->data;
    z->proc_open = false;
}

/* The zygote is gone or let go of: its socket closed (it exits at that end, if it still runs). */
static void drop(struct host_zygote *z, const char *why)
{
    if (z->poll_open && !uv_is_closing((uv_handle_t *)&z->poll))
        uv_close((uv_handle_t *)&z->poll, poll_closed);
    if (z->sock >= 0)
        close(z->sock);
    z->sock = -1;
    z->ready = false;
    fail_pending(z, why);
}

static void zygote_exited(uv_process_t *p, int64_t status, int signo)
{
    struct host_zygote *z = p->data;
    if (!z->d->stopping)
        fprintf(stderr, "hutch serve: the host's python zygote ended (status %lld, signal %d)\n",
                (long long)status, signo);
    z->running = false;
    drop(z, "the host's zygote ended");
    uv_close((uv_handle_t *)p, proc_closed);
}

static struct hz_request *take_request(struct host_zygote *z, uint64_t id)
{
    for (struct hz_request **at = &z->pending; *at; at = &(*at)->next)
        if ((*at)->id == id) {
            struct hz_request *r = *at;
            *at = r->next;
            return r;
        }
    return NULL;
}

/* "ready", "pid ID HOSTPID" or "fail ID why": anything else is ignored. */
static void on_answer(struct host_zygote *z, char *text)
{
    if (strcmp(text, "ready") == 0) {
        z->ready = true;
        send_waiting(z);
        return;
    }
    unsigned long long id;
    int at = 0;
    bool pid = strncmp(text, "pid ", 4) == 0, failed = strncmp(text, "fail ", 5) == 0;
    if ((!pid && !failed) || sscanf(text + (pid ? 4 : 5), "%llu %n", &id, &at) != 1 || !at)
        return;
    const char *rest = text + (pid ? 4 : 5) + at;
    struct hz_request *r = take_request(z, id);
    if (!r)
        return;
    char *end;
    long host = pid ? strtol(rest, &end, 10) : 0;
    if (r->done) {
        if (pid && *end == '\0' && host > 1)
            r->done(r->user, (pid_t)host, NULL);
        else
            r->done(r->user, 0, pid ? "the zygote said a malformed pid" : rest);
    }
    request_free(r);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct host_zygote *z = h->data;
    for (;;) {
        char buf[ANSWER_MAX + 1];
        ssize_t n = recv(z->sock, buf, ANSWER_MAX, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            drop(z, "the host's zygote closed its socket");
            return;
        }
        buf[n] = '\0';
        on_answer(z, buf);
    }
}

/* What the zygote runs with: nothing of the daemon's environment (a kernel can read the
 * environment its process started with, in its own memory), a home of its own for IPython's and
 * matplotlib's files. */
static int start(struct host_zygote *z, err_t *err)
{
    struct serve *d = z->d;
    char script[PATH_MAX], home_env[PATH_MAX + 8], mpl_env[PATH_MAX + 16], ipy_env[PATH_MAX + 16];
    if (strfmt(script, sizeof script, "%s/%s", d->interp_path, ZYGOTE_FILE) < 0 ||
        strfmt(z->home, sizeof z->home, "%s/host-zygote", d->run_dir) < 0 ||
        strfmt(home_env, sizeof home_env, "HOME=%s", z->home) < 0 ||
        strfmt(mpl_env, sizeof mpl_env, "MPLCONFIGDIR=%s/mpl", z->home) < 0 ||
        strfmt(ipy_env, sizeof ipy_env, "IPYTHONDIR=%s/ipython", z->home) < 0)
        return err_set(err, ENAMETOOLONG, "the host's zygote: path too long");
    if (mkdir(z->home, 0700) < 0 && errno != EEXIST)
        return err_set(err, errno, "%s", z->home);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return err_set(err, errno, "the host's zygote: socketpair");
    char *args[] = {"/usr/bin/python3", script,         "--host", z->lib,
                    "--preload",        ZYGOTE_PRELOAD, NULL};
    char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                   home_env,
                   mpl_env,
                   ipy_env,
                   "MPLBACKEND=Agg",
                   "PYTHONUNBUFFERED=1",
                   "PYTHONDONTWRITEBYTECODE=1",
                   "LANG=C.UTF-8",
                   NULL};
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_INHERIT_FD, .data.fd = sv[1]},
        {.flags = UV_INHERIT_FD, .data.fd = d->null_fd},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
    };
    uv_process_options_t o = {.exit_cb = zygote_exited,
                              .file = args[0],
                              .args = args,
                              .env = env,
                              .cwd = "/",
                              .stdio_count = 3,
                              .stdio = stdio};
    z->proc.data = z;
    int rc = uv_spawn(d->loop, &z->proc, &o);
    close(sv[1]);
    if (rc < 0) {
        close(sv[0]);
        uv_close((uv_handle_t *)&z->proc, NULL);
        return err_set(err, -rc, "the host's zygote: spawn %s", args[0]);
    }
    z->proc_open = true;
    z->running = true;
    z->sock = sv[0];
    /* never a blocking send: a zygote that stops reading fails its requests (they start cold) */
    if (fcntl(z->sock, F_SETFL, O_NONBLOCK) < 0 || uv_poll_init(d->loop, &z->poll, z->sock) < 0) {
        drop(z, "poll");
        return err_set(err, EIO, "the host's zygote: poll its socket");
    }
    z->poll.data = z;
    z->poll_open = true;
    uv_poll_start(&z->poll, UV_READABLE | UV_DISCONNECT, on_readable);
    return 0;
}

/* Whether only root can change path and every directory above it (a directory anyone may write
 * to is fine when sticky, as /tmp: nobody but root may replace root's entries there). The
 * zygote runs as host root what these hold. */
static bool root_only(const char *path)
{
    char at[PATH_MAX];
    if (strfmt(at, sizeof at, "%s", path) < 0)
        return false;
    for (;;) {
        struct stat st;
        if (stat(at[0] ? at : "/", &st) < 0 || st.st_uid != 0 ||
            ((st.st_mode & 022) && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))))
            return false;
        char *slash = strrchr(at, '/');
        if (!slash || !at[0])
            return true;
        *slash = '\0';
    }
}

/* build/libhutch-enter.so beside our own binary, or $HUTCH_ENTER_LIB ("" for none). */
static void find_lib(struct host_zygote *z)
{
    const char *env = getenv("HUTCH_ENTER_LIB");
    char path[PATH_MAX] = "";
    if (env) {
        if (strfmt(path, sizeof path, "%s", env) < 0)
            path[0] = '\0';
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        char *slash = n > 0 ? (path[n] = '\0', strrchr(path, '/')) : NULL;
        if (!slash ||
            strfmt(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libhutch-enter.so") < 0)
            path[0] = '\0';
    }
    if (!path[0] || !realpath(path, z->lib) || access(z->lib, R_OK) < 0)
        z->lib[0] = '\0';
}

/* What the zygote would run (its library, its script and the kernel's modules) is root's alone. */
static bool files_trusted(struct host_zygote *z)
{
    char script[PATH_MAX], kernel[PATH_MAX], cache[PATH_MAX];
    if (strfmt(script, sizeof script, "%s/%s", z->d->interp_path, ZYGOTE_FILE) < 0 ||
        strfmt(kernel, sizeof kernel, "%s/python_kernel.py", z->d->interp_path) < 0 ||
        strfmt(cache, sizeof cache, "%s/__pycache__", z->d->interp_path) < 0)
        return false;
    const char *const paths[] = {z->lib, z->d->interp_path, script, kernel, cache};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if ((paths[i] != cache || access(cache, F_OK) == 0) && !root_only(paths[i])) {
            fprintf(stderr,
                    "hutch serve: %s may be changed by others than root: no host zygote "
                    "(its kernels start in their sandboxes)\n",
                    paths[i]);
            return false;
        }
    return true;
}

void host_zygote_want(struct serve *d)
{
    struct host_zygote *z = state(d);
    if (!z) {
        if (!(z = calloc(1, sizeof *z)))
            return;
        z->d = d;
        z->sock = -1;
        find_lib(z);
        if (z->lib[0] && d->interp_path[0] && !files_trusted(z))
            z->lib[0] = '\0';
        d->host_zygote = z;
        if (!z->lib[0] && getenv("HUTCH_ENTER_LIB") == NULL)
            fprintf(stderr, "hutch serve: no libhutch-enter.so beside hutch: one-shot runs start "
                            "their kernels in their own sandboxes\n");
    }
    if (z->running || z->proc_open || z->poll_open || d->stopping || !z->lib[0] ||
        !d->interp_path[0] || !d->kernel_stub_path[0] || z->starts >= HOST_ZYGOTE_STARTS)
        return;
    z->starts++;
    err_t err;
    if (start(z, &err) < 0)
        fprintf(stderr, "hutch serve: %s\n", err.msg);
}

bool host_zygote_ready(struct serve *d)
{
    struct host_zygote *z = state(d);
    return z && z->ready && z->sock >= 0;
}

/* fork ID NUL profile NUL writable NUL has_dir (python_zygote.host_request) */
static size_t build(char *buf, size_t cap, uint64_t id, bool has_dir)
{
    int n = snprintf(buf, cap, "fork %llu%c%d%c1%c%d", (unsigned long long)id, 0,
                     (int)SBX_SECCOMP_PROFILE, 0, 0, has_dir ? 1 : 0);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static int send_request(struct host_zygote *z, struct hz_request *r, err_t *err)
{
    struct cgroup *cg;
    if (jail_command_group_open(&r->sb->jail, r->group, &cg, err) < 0)
        return -1;
    int fds[FDS_MAX];
    size_t n_fds = 0, n_v1 = 0;
    fds[n_fds++] = r->sb->jail.pidfd;
    fds[n_fds++] = r->stub_pidfd;
    int dir_fd = -1, rc = -1;
    char buf[64];
    if (cgroup_mode_of(cg) != CGROUP_MODE_V1) {
        if ((dir_fd = cgroup_open_dir_fd(cg, err)) < 0)
            goto out;
        fds[n_fds++] = dir_fd;
    }
    if (cgroup_self_attach_open(cg, fds + n_fds, PROTO_MAX_V1_FDS, &n_v1, err) < 0)
        goto out;
    size_t len = build(buf, sizeof buf, r->id, dir_fd >= 0);
    if (proto_send(z->sock, buf, len, fds, n_fds + n_v1) < 0) {
        err_set(err, errno, "the host's zygote: send");
        goto out;
    }
    r->sent = true;
    close(r->stub_pidfd); /* the zygote's copy is the one it needs */
    r->stub_pidfd = -1;
    rc = 0;
out:
    for (size_t i = 0; i < n_v1; i++)
        close(fds[n_fds + i]);
    if (dir_fd >= 0)
        close(dir_fd);
    cgroup_free(cg);
    return rc;
}

bool host_zygote_available(struct serve *d)
{
    struct host_zygote *z = state(d);
    return z && z->lib[0] && d->interp_path[0] && d->kernel_stub_path[0] && !d->stopping &&
           (z->ready || z->running || z->starts < HOST_ZYGOTE_STARTS);
}

int host_zygote_fork(struct serve *d, struct sbx *sb, const char *group, int stub_pidfd,
                     host_zygote_done_fn done, void *user, uint64_t *id, err_t *err)
{
    host_zygote_want(d);
    struct host_zygote *z = state(d);
    if (!z || !host_zygote_available(d) || (!z->running && !z->ready))
        return err_set(err, EAGAIN, "the host's zygote does not run");
    struct hz_request *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(err, ENOMEM, "the host's zygote: a request");
    *r = (struct hz_request){
        .id = ++z->next_id, .done = done, .user = user, .sb = sb, .asked_ms = uv_now(d->loop)};
    snprintf(r->group, sizeof r->group, "%s", group);
    if ((r->stub_pidfd = fcntl(stub_pidfd, F_DUPFD_CLOEXEC, 3)) < 0) {
        free(r);
        return err_set(err, errno, "the stub's pidfd");
    }
    if (z->ready && send_request(z, r, err) < 0) {
        request_free(r);
        return -1;
    }
    r->next = z->pending;
    z->pending = r;
    *id = r->id;
    return 0;
}

void host_zygote_forget(struct serve *d, uint64_t id)
{
    struct host_zygote *z = state(d);
    struct hz_request *r = z ? take_request(z, id) : NULL;
    if (r)
        request_free(r);
}

void host_zygote_stop(struct serve *d)
{
    struct host_zygote *z = state(d);
    if (!z)
        return;
    z->starts = HOST_ZYGOTE_STARTS; /* not again */
    drop(z, "the daemon stops");
}
