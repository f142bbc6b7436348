/* An agent sandbox (created with no command) driven through the engine's API, as a daemon would:
 * commands with pipes, stdin and a pty, their verdicts and accounting from their own cgroups, a
 * kill that takes a daemonized tree, an OOM that is one command's and not the sandbox's, the
 * protocol's requests, and a second process that reopens the sandbox it did not create. Then
 * agent sandboxes with a writable root (jail_spec.writable_root): what root commands may change,
 * what other sandboxes see of it, and that it outlives the sandbox. Runs as root; every wait is
 * bounded. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/paths.h"
#include "jail/command.h"
#include "jail/disk_layer.h"
#include "jail/jail.h"
#include "jail/record.h"
#include "jail/template.h"
#include "jail/userns.h"
#include "tap.h"

static char base[64], run_dir[PATH_MAX], lock_path[PATH_MAX];
static struct jail j;
static int run_fd = -1;
static uint32_t next_request = 1;
static struct jail_agent_msg msg; /* about 80 KiB */

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

/* Waits for the reply to id (EXITED events on the way are kept in exits). */
struct exit_seen {
    uint32_t cmd_id;
    int32_t code;
    uint32_t sig;
    const struct jail *from; /* command ids are per sandbox */
};
static struct exit_seen exits[64];
static size_t n_exits;

static int wait_reply(struct jail *jl, uint32_t id, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    while (now_ms() < deadline) {
        if (next_msg(jl, (unsigned)(deadline - now_ms())) != 1)
            return -1;
        if (msg.type == PROTO_EXITED) {
            if (n_exits < 64)
                exits[n_exits++] = (struct exit_seen){msg.command.cmd_id, msg.command.exit_code,
                                                      msg.command.signal, jl};
            continue;
        }
        if (msg.request_id == id)
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
        if (msg.type == PROTO_EXITED && n_exits < 64)
            exits[n_exits++] = (struct exit_seen){msg.command.cmd_id, msg.command.exit_code,
                                                  msg.command.signal, jl};
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
        snprintf(why, why_size, "%s", err.msg);
        return -1;
    }
    if (wait_reply(jl, id, 5000) < 0) {
        snprintf(why, why_size, "no reply");
        return -1;
    }
    if (msg.type == PROTO_ERROR) {
        snprintf(why, why_size, "%s", msg.message);
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
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/%s", run_dir, name);
    unlink(addr.sun_path); /* a sandbox made again under its old name */
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 8) < 0)
        return -1;
    return fd;
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
static void check_sh(struct jail *jl, bool as_root, const char *script, const char *want,
                     const char *what)
{
    const char *const argv[] = {"/bin/sh", "-c", script, NULL};
    char out[4096];
    int code = run_command(jl, argv, as_root, out, sizeof out);
    ok(code == 0 && strcmp(out, want) == 0, "%s", what);
    if (code != 0 || strcmp(out, want) != 0)
        printf("#   exit %d, output \"%s\", want \"%s\"\n", code, out, want);
}

/* An agent sandbox like base_spec's, named name, with a writable root on the disk layer
 * layer_dir, in the uid range u. A check that it starts, named what, unless what is NULL. */
static int start_writable(struct jail *jl, const struct jail_spec *base_spec, const char *name,
                          const char *layer_dir, const struct uid_range *u, const char *what,
                          err_t *err)
{
    char sock[96];
    snprintf(sock, sizeof sock, "%s.sock", name);
    struct jail_spec spec = *base_spec;
    spec.name = name;
    spec.writable_root = true;
    spec.layer_dir = layer_dir;
    spec.host_uid_base = u->host_base;
    spec.hold_fd = u->lock_fd;
    spec.listen_fd = make_listener(sock);
    if (spec.listen_fd < 0)
        return err_set(err, errno, "listen on %s", sock);
    int rc = jail_start(&spec, jl, err);
    close(spec.listen_fd);
    if (what)
        ok(rc == 0, "%s (%s)", what, rc ? err->msg : "ok");
    return rc;
}

/* Destroys jl and forgets its commands' ends (a sandbox made again in jl numbers from 1). */
static bool destroyed(struct jail *jl, const char *what)
{
    err_t err = {0};
    int rc = jail_destroy(jl, &err);
    jail_reap(jl);
    size_t kept = 0;
    for (size_t i = 0; i < n_exits; i++)
        if (exits[i].from != jl)
            exits[kept++] = exits[i];
    n_exits = kept;
    if (rc < 0)
        printf("# destroy %s: %s\n", what, err.msg);
    return rc == 0;
}

/* Persistent agent sandboxes: sandbox root changes /usr and /etc through the namespaced
 * capabilities a writable root keeps, the user does not; a second sandbox sees none of it and
 * cannot take the same layer; the changes outlive the sandbox, also under another uid range. */
static void writable_root_checks(const struct jail_spec *base_spec, const char *state_dir,
                                 const struct uid_range *uids, const struct template_paths *tpl)
{
    char sandboxes[PATH_MAX], layer_a[PATH_MAX], layer_b[PATH_MAX];
    snprintf(sandboxes, sizeof sandboxes, "%s/sandboxes", state_dir);
    snprintf(layer_a, sizeof layer_a, "%s/wr-a", sandboxes);
    snprintf(layer_b, sizeof layer_b, "%s/wr-b", sandboxes);
    err_t err = {0};
    struct uid_range uids2 = {.lock_fd = -1};
    /* A host that cannot give any sandbox a writable root is said to be one, not failed: the
     * test guest has no loop driver, and its /usr (the host's, over 9p) cannot be idmapped. */
    if (access("/dev/loop-control", F_OK) < 0) {
        ok(1, "writable root # SKIP no loop devices here (/dev/loop-control: %s)", strerror(errno));
        return;
    }
    mkdir(sandboxes, 0700);
    if (disk_layer_create(layer_a, 64ull << 20, &err) < 0 ||
        disk_layer_create(layer_b, 64ull << 20, &err) < 0 ||
        uid_range_acquire(lock_path, &uids2, &err) < 0) {
        ok(0, "writable root: setup: %s", err.msg);
        return;
    }
    char caps[64];
    snprintf(caps, sizeof caps, "CapEff:\t%016llx\n", (unsigned long long)JAIL_WRITABLE_ROOT_CAPS);

    struct jail a, b;
    int rc = start_writable(&a, base_spec, "agent-wr", layer_a, uids, NULL, &err);
    if (rc < 0 && err.errnum == EINVAL && strstr(err.msg, "can its filesystem be idmapped")) {
        ok(1, "writable root # SKIP %s", err.msg);
        goto out;
    }
    ok(rc == 0, "an agent sandbox starts with a writable root (%s)", rc ? err.msg : "ok");
    if (rc < 0)
        goto out;
    check_sh(&a, true,
             "echo v1 >/usr/hutch-wr && echo e1 >/etc/hutch-wr && chown 1000:1000 /etc/hutch-wr && "
             "mkdir -p /usr/local/lib/hutch-wr && grep ^CapEff /proc/self/status",
             caps,
             "a root command writes under /usr and /etc and chowns there, with CHOWN, "
             "DAC_OVERRIDE, FOWNER and FSETID of its namespace");
    check_sh(&a, false,
             "echo h >/home/user/h && ! (echo u >/usr/hutch-wr-user) 2>/dev/null && "
             "grep ^CapEff /proc/self/status",
             "CapEff:\t0000000000000000\n",
             "a user command writes its home but not /usr, and has no capability");
    struct stat st;
    char tpl_file[PATH_MAX + 16];
    snprintf(tpl_file, sizeof tpl_file, "%s/etc/hutch-wr", tpl->rootfs);
    ok(stat("/usr/hutch-wr", &st) < 0 && errno == ENOENT && stat(tpl_file, &st) < 0 &&
           errno == ENOENT,
       "the host's /usr and the template are unchanged");

    rc = start_writable(&b, base_spec, "agent-wr2", layer_a, &uids2, NULL, &err);
    ok(rc < 0 && err.errnum == EBUSY, "a second sandbox cannot take a layer in use (%s)",
       rc ? err.msg : "it could");
    if (rc == 0)
        destroyed(&b, "agent-wr2");
    if (start_writable(&b, base_spec, "agent-wr2", layer_b, &uids2,
                       "a second sandbox starts on a layer of its own", &err) == 0) {
        check_sh(&b, true,
                 "test ! -e /usr/hutch-wr && test ! -e /etc/hutch-wr && "
                 "test ! -e /usr/local/lib/hutch-wr && echo v2 >/usr/hutch-wr && cat /usr/hutch-wr",
                 "v2\n", "it sees nothing of the first one's changes, and makes its own");
        check_sh(&a, false, "cat /usr/hutch-wr", "v1\n", "which the first one does not see");
        ok(destroyed(&b, "agent-wr2"), "destroy the second");
    }
    ok(destroyed(&a, "agent-wr"), "destroy the first");
    struct disk_layer_usage u;
    rc = disk_layer_usage(layer_a, &u, &err);
    ok(rc == 0, "its layer is free again (%s)", rc ? err.msg : "ok");

    /* Made again on the same layer, under the other uid range: the layer's ids are the
     * sandbox's own, whatever host range it runs under. */
    if (start_writable(&a, base_spec, "agent-wr", layer_a, &uids2,
                       "the sandbox is made again on its layer", &err) == 0) {
        check_sh(&a, false,
                 "cat /usr/hutch-wr /etc/hutch-wr /home/user/h && stat -c %u:%g /etc/hutch-wr && "
                 "test -d /usr/local/lib/hutch-wr",
                 "v1\ne1\nh\n1000:1000\n", "what it changed is still there, with its owners");
        ok(destroyed(&a, "agent-wr"), "destroy it again");
    }
out:
    uid_range_release(&uids2);
    rc = disk_layer_remove(layer_a, &err) < 0 || disk_layer_remove(layer_b, &err) < 0 ? -1 : 0;
    ok(rc == 0, "the layers are removed, no sandbox holds them (%s)", rc ? err.msg : "ok");
}

/* The second process: reopens by name, lists, runs a command, freezes and thaws. */
static int second_process(struct cgroup_host *first)
{
    /* A cgroup host of its own, in the mode the sandbox was made in (the first may be forced). */
    struct cgroup_host *host;
    err_t err;
    if (cgroup_host_open((int)cgroup_host_mode(first), &host, &err) < 0)
        return 10;
    struct jail other;
    struct jail_record rec;
    if (jail_reopen(host, run_fd, "agent-t", &other, &rec, &err) < 0) {
        printf("# reopen: %s\n", err.msg);
        return 11;
    }
    uint32_t id = 9000;
    if (jail_agent_request(&other, PROTO_LIST, id, 0, 0, false, &err) < 0 ||
        wait_reply(&other, id, 5000) < 0 || msg.type != PROTO_LIST_REPLY)
        return 12;
    bool saw_tag = false;
    for (size_t i = 0; i < msg.n_entries; i++)
        saw_tag = saw_tag || strcmp(msg.entries[i].tag, "first") == 0;
    if (!saw_tag)
        return 13;
    static const char *const argv[] = {"/bin/echo", "from-second", NULL};
    struct jail_command_spec spec = {.argv = argv, .envp = env};
    struct started s;
    char why[256];
    next_request = 9100;
    if (start(&other, &spec, &s, why, sizeof why) < 0) {
        printf("# second start: %s\n", why);
        return 14;
    }
    char out[256];
    read_all(s.out, out, sizeof out, 5000);
    const struct exit_seen *e = wait_exit(&other, s.cmd_id, 5000);
    if (strcmp(out, "from-second\n") != 0 || !e || finish(&other, &s, e, NULL) != VERDICT_OK)
        return 15;
    if (jail_set_frozen(&other, true, &err) < 0 || jail_set_frozen(&other, false, &err) < 0)
        return 16;
    jail_close(&other);
    cgroup_host_close(host);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(base, sizeof base, "/tmp/hutch-agent-test.XXXXXX");
    if (!mkdtemp(base) || chmod(base, 0755) < 0) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    char state_dir[PATH_MAX];
    snprintf(state_dir, sizeof state_dir, "%s/state", base);
    snprintf(run_dir, sizeof run_dir, "%s/run", base);
    snprintf(lock_path, sizeof lock_path, "%s/uid-slots.lock", run_dir);
    mkdir(run_dir, 0700);
    run_fd = open(run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    err_t err = {0};
    struct template_paths tpl;
    struct cgroup_host *host = hutch_cgroup_host(&err);
    struct uid_range uids = {.lock_fd = -1};
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int listen_fd = make_listener("agent-t.sock");
    if (!host || jail_use_init_binary("build/hutch-san", &err) < 0 ||
        template_prepare_base(state_dir, &tpl, &err) < 0 ||
        uid_range_acquire(lock_path, &uids, &err) < 0 || listen_fd < 0 || null_fd < 0) {
        printf("Bail out! setup: %s\n", err.msg);
        return 1;
    }
    struct jail_spec spec = {
        .cgroups = host,
        .name = "agent-t",
        .template_dir = tpl.rootfs,
        .usr_dir = "/usr",
        .stage_dir = tpl.stage,
        .limits = {.memory_bytes = 96u << 20, .pids = 256, .disk_bytes = 64u << 20},
        .host_uid_base = uids.host_base,
        .seccomp = SECCOMP_PROFILE_DEFAULT,
        .envp = env,
        .stdin_fd = null_fd,
        .stdout_fd = null_fd,
        .stderr_fd = null_fd,
        .listen_fd = listen_fd,
        .hold_fd = uids.lock_fd,
        .keep_fd = -1,
    };
    int rc = jail_start(&spec, &j, &err);
    ok(rc == 0, "an agent sandbox starts with no command (%s)", rc ? err.msg : "ok");
    close(listen_fd);
    if (rc < 0)
        return done_testing();
    ok(j.init_cgroup != NULL, "its init has a group of its own below the sandbox's");

    uint32_t id = next_request++;
    ok(jail_agent_request(&j, PROTO_HELLO, id, 0, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_HELLO_REPLY,
       "HELLO is answered");

    /* pipes, exit status, verdict */
    static const char *const argv1[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    struct jail_command_spec c1 = {.argv = argv1, .envp = env, .tag = "first"};
    struct started s;
    char why[512], out[4096];
    ok(start(&j, &c1, &s, why, sizeof why) == 0, "a command starts (%s)", why);
    read_all(s.out, out, sizeof out, 5000);
    is_str(out, "out\n", "its stdout comes through the fd init handed over");
    read_all(s.err, out, sizeof out, 5000);
    is_str(out, "err\n", "and its stderr");
    const struct exit_seen *e = wait_exit(&j, s.cmd_id, 5000);
    ok(e && e->code == 3 && e->sig == 0, "EXITED says exit 3");
    is_str(verdict_code(e ? finish(&j, &s, e, NULL) : VERDICT_XX), "RE", "verdict RE");

    /* user and root */
    static const char *const argv_id[] = {"/usr/bin/id", "-u", NULL};
    struct jail_command_spec c2 = {.argv = argv_id, .envp = env};
    for (int root = 0; root <= 1; root++) {
        c2.as_root = root;
        if (start(&j, &c2, &s, why, sizeof why) < 0) {
            ok(0, "id -u: %s", why);
            continue;
        }
        read_all(s.out, out, sizeof out, 5000);
        is_str(out, root ? "0\n" : "1000\n", "a command runs as %s", root ? "root" : "user");
        e = wait_exit(&j, s.cmd_id, 5000);
        if (e)
            finish(&j, &s, e, NULL);
    }

    /* stdin through the fd, and through STDIN_WRITE */
    static const char *const argv_cat[] = {"/bin/cat", NULL};
    struct jail_command_spec c3 = {.argv = argv_cat, .envp = env, .stdin_pipe = true};
    if (start(&j, &c3, &s, why, sizeof why) == 0) {
        ok(s.in >= 0, "a command with stdin gets its write end");
        uint32_t wid = next_request++;
        ok(jail_agent_stdin_write(&j, wid, s.cmd_id, "via-init ", 9, &err) == 0 &&
               wait_reply(&j, wid, 5000) == 0 && msg.type == PROTO_OK && msg.written == 9,
           "STDIN_WRITE writes 9 bytes");
        (void)!write(s.in, "via-fd", 6);
        close(s.in);
        s.in = -1;
        wid = next_request++;
        ok(jail_agent_request(&j, PROTO_STDIN_CLOSE, wid, s.cmd_id, 0, false, &err) == 0 &&
               wait_reply(&j, wid, 5000) == 0 && msg.type == PROTO_OK,
           "STDIN_CLOSE closes init's copy");
        read_all(s.out, out, sizeof out, 5000);
        is_str(out, "via-init via-fd", "cat got both, then EOF");
        e = wait_exit(&j, s.cmd_id, 5000);
        ok(e && e->code == 0, "and exited 0");
        if (e)
            finish(&j, &s, e, NULL);
    } else {
        ok(0, "cat: %s", why);
    }

    /* a pty with its size, and a resize */
    static const char *const argv_tty[] = {"/bin/sh", "-c", "tty; stty size; read x; stty size",
                                           NULL};
    struct jail_command_spec c4 = {.argv = argv_tty, .envp = env, .pty = true, .rows = 30,
                                   .cols = 100};
    if (start(&j, &c4, &s, why, sizeof why) == 0) {
        ok(s.pty >= 0 && s.out < 0, "a pty command gets the master only");
        /* Resized once the first size is out, not after a fixed sleep: a slow sandbox (the
         * test guest, under TCG) would print the new size twice. */
        size_t n = read_until(s.pty, out, sizeof out, "30 100", 10000);
        uint32_t rid = next_request++;
        ok(jail_agent_resize(&j, rid, s.cmd_id, 40, 120, &err) == 0 &&
               wait_reply(&j, rid, 5000) == 0 && msg.type == PROTO_OK,
           "RESIZE is answered");
        (void)!write(s.pty, "\n", 1);
        read_all(s.pty, out + n, sizeof out - n, 3000);
        ok(strstr(out, "/dev/pts/") && strstr(out, "30 100") && strstr(out, "40 120"),
           "the command sees a pts of its own, 30x100, then 40x120");
        e = wait_exit(&j, s.cmd_id, 5000);
        if (e)
            finish(&j, &s, e, NULL);
    } else {
        ok(0, "pty: %s", why);
    }

    /* kill takes a tree that double-forked and left its session */
    static const char *const argv_tree[] = {
        "/bin/sh", "-c", "setsid sh -c 'sleep 1000 & sleep 1000' & sleep 1000 & wait", NULL};
    struct jail_command_spec c5 = {.argv = argv_tree, .envp = env};
    if (start(&j, &c5, &s, why, sizeof why) == 0) {
        usleep(300000);
        struct cgroup *cg;
        bool populated = false;
        if (jail_command_group_open(&j, s.group, &cg, &err) == 0) {
            struct cgroup_stats st;
            cgroup_read_stats(cg, &st, &err);
            printf("# the tree's group holds %llu processes\n", (unsigned long long)st.pids_current);
            ok(jail_command_kill_tree(&j, s.group, &err) == 0, "kill the command's tree");
            e = wait_exit(&j, s.cmd_id, 5000);
            ok(e && e->sig == SIGKILL, "EXITED says SIGKILL");
            for (int i = 0; i < 100; i++) {
                cgroup_populated(cg, &populated, &err);
                if (!populated)
                    break;
                usleep(10000);
            }
            ok(!populated, "nothing of the tree is left, the setsid'd daemons included");
            cgroup_free(cg);
        }
        if (e)
            is_str(verdict_code(finish(&j, &s, e, NULL)), "SG", "verdict SG");
    } else {
        ok(0, "tree: %s", why);
    }

    /* an OOM is the command's: the sandbox goes on */
    static const char *const argv_oom[] = {"/bin/sh", "-c", "head -c 400M /dev/zero | tail -c 300M >/dev/null",
                                           NULL};
    struct jail_command_spec c6 = {.argv = argv_oom, .envp = env};
    if (start(&j, &c6, &s, why, sizeof why) == 0) {
        e = wait_exit(&j, s.cmd_id, 20000);
        struct verdict_usage u = {0};
        enum verdict v = e ? finish(&j, &s, e, &u) : VERDICT_XX;
        is_str(verdict_code(v), "ML", "a command past the sandbox's memory is ML (oom_kills %llu)",
               (unsigned long long)u.oom_kills);
        ok(u.memory_peak_bytes > 0, "its peak memory is counted (%llu bytes)",
           (unsigned long long)u.memory_peak_bytes);
        static const char *const argv_echo[] = {"/bin/echo", "alive", NULL};
        struct jail_command_spec c7 = {.argv = argv_echo, .envp = env};
        if (start(&j, &c7, &s, why, sizeof why) == 0) {
            read_all(s.out, out, sizeof out, 5000);
            is_str(out, "alive\n", "the sandbox goes on after a command's OOM");
            e = wait_exit(&j, s.cmd_id, 5000);
            if (e)
                finish(&j, &s, e, NULL);
        } else {
            ok(0, "after the OOM: %s", why);
        }
    } else {
        ok(0, "oom: %s", why);
    }

    /* bad requests get errors, and init goes on */
    static const char *const argv_none[] = {"/nonexistent", NULL};
    struct jail_command_spec c8 = {.argv = argv_none, .envp = env};
    ok(start(&j, &c8, &s, why, sizeof why) < 0 && strstr(why, "/nonexistent"),
       "a command that cannot be executed is an ERROR that names it (%s)", why);
    id = next_request++;
    ok(jail_agent_request(&j, PROTO_SIGNAL, id, 777777, 9, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_ERROR && msg.errnum == ESRCH,
       "SIGNAL to an unknown command: ESRCH");
    uint8_t junk[64] = {1, 2, 3};
    ok(proto_send(j.control_fd, junk, sizeof junk, NULL, 0) == 0 &&
           next_msg(&j, 5000) == 1 && msg.type == PROTO_ERROR,
       "a malformed message gets an ERROR");

    /* LIST and FORGET */
    id = next_request++;
    ok(jail_agent_request(&j, PROTO_LIST, id, 0, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_LIST_REPLY && msg.n_entries >= 5,
       "LIST shows the ended commands (%zu)", msg.n_entries);
    uint32_t first = 0;
    for (size_t i = 0; i < msg.n_entries; i++)
        if (strcmp(msg.entries[i].tag, "first") == 0)
            first = msg.entries[i].cmd_id;
    ok(first != 0, "with their tags");

    /* without a writable root, root has no capability and /usr stays the host's (the control
     * for writable_root_checks) */
    check_sh(&j, true, "grep ^CapEff /proc/self/status; ! (echo x >/usr/hutch-wr) 2>/dev/null",
             "CapEff:\t0000000000000000\n",
             "without a writable root a root command cannot write /usr, and has no capability");

    /* a process that did not create it */
    ok(jail_record_save(&j, uids.host_base, run_fd, "agent-t.sock", &err) == 0,
       "record the sandbox (%s)", err.msg);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0)
        _exit(second_process(host));
    int status = 0;
    waitpid(child, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a second process reopens it by name: lists, runs a command, freezes and thaws (%d)",
       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    id = next_request++;
    ok(jail_agent_request(&j, PROTO_FORGET, id, first, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_OK,
       "FORGET an ended command");

    /* destroy */
    char cg_path[PATH_MAX] = "";
    bool have_path = cgroup_file_path(j.cgroup, "memory", "", cg_path, sizeof cg_path, NULL) == 0 ||
                     cgroup_file_path(j.cgroup, "", "", cg_path, sizeof cg_path, NULL) == 0;
    ok(have_path, "the sandbox's cgroup directory is known (%s)", cg_path);
    ok(jail_destroy(&j, &err) == 0, "destroy (%s)", err.msg);
    jail_reap(&j);
    struct stat st;
    ok(have_path && stat(cg_path, &st) < 0 && errno == ENOENT, "its cgroups are gone");
    jail_record_remove(run_fd, "agent-t", &err);

    writable_root_checks(&spec, state_dir, &uids, &tpl);
    uid_range_release(&uids);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    (void)!system(cmd);
    return done_testing();
}
