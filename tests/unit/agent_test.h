/* What the unit tests that drive an agent sandbox (one created with no command) share:
 * test_agent and test_agent_files. A sandbox in a private temp tree (its own template, uid
 * range and listening socket), init's messages waited for with a bound, commands started and
 * collected as a daemon would. Static state and functions: a test includes this once. Runs as
 * root. */
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/paths.h"
#include "jail/command.h"
#include "jail/jail.h"
#include "jail/record.h"
#include "jail/template.h"
#include "jail/userns.h"
#include "tap.h"

static char base[64], run_dir[PATH_MAX], lock_path[PATH_MAX], state_dir[PATH_MAX];
static struct jail j;
static int run_fd = -1, null_fd = -1;
static struct uid_range uids = {.lock_fd = -1};
static struct cgroup_host *host;
static struct template_paths tpl;
static struct jail_spec agent_spec; /* the spec agent_start used, for more sandboxes like it */
static uint32_t next_request = 1;
static struct jail_agent_msg msg; /* about 120 KiB */
/* Called with each WATCH_EVENTS and WATCH_ENDED met while waiting for something else. */
static void (*on_watch_msg)(const struct jail_agent_msg *m);

static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user", NULL};

static uint64_t now_ms(void)
{
    return jail_now_ns() / 1000000u;
}

/* The next message from init within ms, or -1. */
static int next_msg(struct jail *jl, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    for (;;) {
        err_t err;
        int rc = jail_agent_recv(jl, &msg, &err);
        if (rc != 0) {
            if (rc < 0)
                printf("# recv: %s\n", err.msg);
            return rc;
        }
        uint64_t now = now_ms();
        if (now >= deadline)
            return -1;
        struct pollfd p = {.fd = jl->control_fd, .events = POLLIN};
        poll(&p, 1, (int)(deadline - now));
    }
}

/* EXITED events met on the way to something else are kept here. */
struct exit_seen {
    uint32_t cmd_id;
    int32_t code;
    uint32_t sig;
    const struct jail *from; /* command ids are per sandbox */
};
static struct exit_seen exits[64];
static size_t n_exits;

/* Keeps an unsolicited message from jl (EXITED, a watch's); false for anything else. */
static bool keep_unsolicited(const struct jail *jl)
{
    if (msg.type == PROTO_EXITED) {
        if (n_exits < 64)
            exits[n_exits++] = (struct exit_seen){msg.command.cmd_id, msg.command.exit_code,
                                                  msg.command.signal, jl};
        return true;
    }
    if (msg.type == PROTO_WATCH_EVENTS || msg.type == PROTO_WATCH_ENDED) {
        if (on_watch_msg)
            on_watch_msg(&msg);
        return true;
    }
    return false;
}

/* Waits for the reply to id. */
static int wait_reply(struct jail *jl, uint32_t id, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    while (now_ms() < deadline) {
        if (next_msg(jl, (unsigned)(deadline - now_ms())) != 1)
            return -1;
        if (!keep_unsolicited(jl) && msg.request_id == id)
            return 0;
    }
    return -1;
}

static const struct exit_seen *wait_exit(struct jail *jl, uint32_t cmd_id, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    for (;;) {
        for (size_t i = 0; i < n_exits; i++)
            if (exits[i].cmd_id == cmd_id && exits[i].from == jl)
                return &exits[i];
        if (now_ms() >= deadline || next_msg(jl, (unsigned)(deadline - now_ms())) != 1)
            return NULL;
        keep_unsolicited(jl);
    }
}

struct started {
    uint32_t cmd_id;
    char group[JAIL_COMMAND_GROUP_MAX + 1];
    int out, err, in, pty;
};

static int start(struct jail *jl, const struct jail_command_spec *spec, struct started *s,
                 char *why, size_t why_size)
{
    err_t err;
    uint32_t id = next_request++;
    memset(s, 0, sizeof *s);
    s->out = s->err = s->in = s->pty = -1;
    if (jail_command_start(jl, spec, id, s->group, &err) < 0) {
        tap_why(why, why_size, "%s", err.msg);
        return -1;
    }
    if (wait_reply(jl, id, 5000) < 0) {
        tap_why(why, why_size, "no reply");
        return -1;
    }
    if (msg.type == PROTO_ERROR) {
        tap_why(why, why_size, "%s", msg.message);
        jail_command_finish(jl, s->group, &msg.command, &(struct verdict_facts){0},
                            &(struct verdict_usage){0}, &err);
        return -1;
    }
    s->cmd_id = msg.command.cmd_id;
    s->out = msg.fds[0];
    s->err = msg.fds[1];
    s->in = msg.fds[2];
    s->pty = msg.fds[3];
    return 0;
}

/* What fd gives until want appears in it (NULL: until EOF, or EIO from a pty whose other side
 * is gone), bounded. */
static size_t read_until(int fd, char *buf, size_t size, const char *want, unsigned ms)
{
    size_t n = 0;
    uint64_t deadline = now_ms() + ms;
    buf[0] = '\0';
    while (n + 1 < size && now_ms() < deadline && !(want && strstr(buf, want))) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        buf[n] = '\0';
    }
    return n;
}

static size_t read_all(int fd, char *buf, size_t size, unsigned ms)
{
    return read_until(fd, buf, size, NULL, ms);
}

static void close_started(struct started *s)
{
    int *all[] = {&s->out, &s->err, &s->in, &s->pty};
    for (size_t i = 0; i < 4; i++)
        if (*all[i] >= 0) {
            close(*all[i]);
            *all[i] = -1;
        }
}

static enum verdict finish(struct jail *jl, struct started *s, const struct exit_seen *e,
                           struct verdict_usage *usage)
{
    struct proto_command end = {.cmd_id = e->cmd_id, .exit_code = e->code, .signal = e->sig};
    struct verdict_facts facts = {0};
    err_t err;
    struct verdict_usage u = {0};
    int rc = -1;
    for (int i = 0; i < 200 && rc < 0; i++) {
        rc = jail_command_finish(jl, s->group, &end, &facts, &u, &err);
        if (rc < 0 && err.errnum != EBUSY)
            break;
        if (rc < 0)
            usleep(5000);
    }
    if (rc < 0)
        printf("# finish %s: %s\n", s->group, err.msg);
    if (usage)
        *usage = u;
    close_started(s);
    return rc < 0 ? VERDICT_XX : verdict_decide(&facts);
}

static int make_listener(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    tap_path(addr.sun_path, sizeof addr.sun_path, "%s/%s", run_dir, name);
    unlink(addr.sun_path); /* a sandbox made again under its old name */
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 8) < 0)
        return -1;
    return fd;
}

/* Makes the temp tree (base_pattern: "/tmp/NAME.XXXXXX"), the template and a uid range, then
 * starts the sandbox `name` (listening on run_dir/name.sock) with limits, init's environment
 * envp. -1 with err when the start failed; exits (after "Bail out!") when the setup before it
 * did. */
static int agent_start(const char *base_pattern, const char *name, const struct jail_limits *limits,
                       const char *const *envp, err_t *err)
{
    tap_path(base, sizeof base, "%s", base_pattern);
    if (!mkdtemp(base) || chmod(base, 0755) < 0) {
        printf("Bail out! mkdtemp\n");
        exit(1);
    }
    char sock[128];
    tap_path(state_dir, sizeof state_dir, "%s/state", base);
    tap_path(run_dir, sizeof run_dir, "%s/run", base);
    tap_path(lock_path, sizeof lock_path, "%s/uid-slots.lock", run_dir);
    tap_path(sock, sizeof sock, "%s.sock", name);
    mkdir(run_dir, 0700);
    run_fd = open(run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    host = hutch_cgroup_host(err);
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int listen_fd = make_listener(sock);
    if (!host || jail_use_init_binary("build/hutch-san", err) < 0 ||
        template_prepare_base(state_dir, &tpl, err) < 0 ||
        uid_range_acquire(lock_path, &uids, err) < 0 || listen_fd < 0 || null_fd < 0) {
        printf("Bail out! setup: %s\n", err->msg);
        exit(1);
    }
    struct jail_spec spec = {
        .cgroups = host,
        .name = name,
        .template_dir = tpl.rootfs,
        .usr_dir = "/usr",
        .stage_dir = tpl.stage,
        .limits = *limits,
        .host_uid_base = uids.host_base,
        .seccomp = SECCOMP_PROFILE_DEFAULT,
        .envp = envp,
        .stdin_fd = null_fd,
        .stdout_fd = null_fd,
        .stderr_fd = null_fd,
        .listen_fd = listen_fd,
        .hold_fd = uids.lock_fd,
        .keep_fd = -1,
    };
    agent_spec = spec;
    int rc = jail_start(&spec, &j, err);
    close(listen_fd);
    agent_spec.listen_fd = -1;
    return rc;
}

/* Runs argv in jl (as root or as the user), its stdout in out; returns its exit code, or -1 if
 * it could not start or was killed. */
static int run_command(struct jail *jl, const char *const *argv, bool as_root, char *out,
                       size_t size)
{
    struct jail_command_spec c = {.argv = argv, .envp = env, .as_root = as_root};
    struct started s;
    char why[512];
    out[0] = '\0';
    if (start(jl, &c, &s, why, sizeof why) < 0) {
        printf("# start %s: %s\n", argv[0], why);
        return -1;
    }
    read_all(s.out, out, size, 10000);
    const struct exit_seen *e = wait_exit(jl, s.cmd_id, 10000);
    if (!e) {
        close_started(&s);
        return -1;
    }
    int code = e->sig ? -1 : e->code;
    finish(jl, &s, e, NULL);
    return code;
}

/* One check: `sh -c script` in jl exits 0 and prints want. */
__attribute__((unused)) static void check_sh(struct jail *jl, bool as_root, const char *script, const char *want,
                     const char *what)
{
    const char *const argv[] = {"/bin/sh", "-c", script, NULL};
    char out[4096];
    int code = run_command(jl, argv, as_root, out, sizeof out);
    ok(code == 0 && strcmp(out, want) == 0, "%s", what);
    if (code != 0 || strcmp(out, want) != 0)
        printf("#   exit %d, output \"%s\", want \"%s\"\n", code, out, want);
}

/* After the sandbox is destroyed: its record, the uid range, the temp tree. */
static void agent_cleanup(const char *name)
{
    err_t err;
    jail_record_remove(run_fd, name, &err);
    uid_range_release(&uids);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    (void)!system(cmd);
}
