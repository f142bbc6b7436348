/* init as the agent of a sandbox that was created without a command: it serves the control
 * protocol (src/proto/) on the setup channel and on every connection to its listening socket,
 * starts commands through its spawner, reaps them (CLONE_PARENT makes it their parent) and tells
 * every connected host how they ended; file requests go to a files worker per user, started by
 * the spawner on the first one (relay.c). One single-threaded poll loop; init never blocks on a
 * host: a host that does not read its replies is disconnected. */
#include "init/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "init/commands.h"
#include "init/relay.h"
#include "init/spawner.h"
#include "init/sudo.h"
#include "jail/control.h"
#include "jail/privs.h"
#include "proto/proto.h"
#include "proto/proto_files.h"

#define AGENT_MAX_CLIENTS 8
#define AGENT_MAX_QUEUE   64 /* spawns waiting for the spawner */
#define AGENT_EARLY_MAX   64

struct pending_spawn {
    uint32_t cmd_id;
    int client;          /* index, or -1 once the client went */
    uint32_t request_id; /* the client's */
    uint8_t *msg;        /* the SPAWN as received, request id rewritten to cmd_id */
    size_t len;
    int fds[PROTO_MAX_FDS];
    size_t n_fds;
    bool sudo; /* a SUDO_SPAWN of sudo.c's (cmd_id is its spawn id; no client) */
};

struct agent {
    int listen_fd, spawner_fd, sigfd;
    int clients[AGENT_MAX_CLIENTS];
    struct commands cmds;
    struct pending_spawn queue[AGENT_MAX_QUEUE];
    size_t queued;
    bool in_flight; /* queue[0] is with the spawner */
    /* Exits of unknown pids while a spawn is in flight: one may be that command's, ended before
     * its pid reached us. Cleared when the spawn is answered (the rest were orphans). */
    struct {
        pid_t pid;
        int status;
    } early[AGENT_EARLY_MAX];
    size_t n_early;
    /* The files workers: [0] the user's, [1] root's (a request's USER says which). */
    struct relay files[2];
    uint32_t next_file_id;
    struct sudo_server sudo;
};

/* ---------- replies ---------- */

static void drop_client(struct agent *a, int c)
{
    if (a->clients[c] < 0)
        return;
    close(a->clients[c]);
    a->clients[c] = -1;
    for (size_t i = 0; i < a->queued; i++)
        if (a->queue[i].client == c)
            a->queue[i].client = -1;
    for (size_t i = 0; i < 2; i++)
        relay_client_gone(&a->files[i], c);
}

static void relay_drop(void *arg, int c)
{
    drop_client(arg, c);
}

/* A client that cannot take a reply now is gone: init never waits for a host. */
static void send_to(struct agent *a, int c, const uint8_t *buf, size_t len, const int *fds,
                    size_t n_fds)
{
    if (c < 0 || a->clients[c] < 0)
        return;
    if (len == 0 || proto_send(a->clients[c], buf, len, fds, n_fds) < 0)
        drop_client(a, c);
}

static void reply_error(struct agent *a, int c, uint32_t id, int errnum, const char *msg)
{
    uint8_t buf[PROTO_MAX_STRING + 128];
    send_to(a, c, buf, proto_encode_error(buf, sizeof buf, id, errnum, msg), NULL, 0);
}

static void reply_ok(struct agent *a, int c, uint32_t id, int written)
{
    uint8_t buf[64];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_OK, id, 0);
    if (written >= 0)
        proto_put_u32(&w, PROTO_T_WRITTEN, (uint32_t)written);
    send_to(a, c, buf, proto_finish(&w), NULL, 0);
}

/* SPAWN_REPLY with init's copies of the command's host-side ends. */
static void reply_fds(struct agent *a, int c, uint32_t id, const struct command_entry *e)
{
    const int ends[4] = {e->fds.stdout_r, e->fds.stderr_r, e->fds.stdin_w, e->fds.pty_master};
    int pass[4];
    size_t n;
    uint8_t buf[128];
    size_t len =
        proto_encode_spawn_reply(buf, sizeof buf, id, e->id, (uint32_t)e->pid, ends, pass, &n);
    send_to(a, c, buf, len, pass, n);
}

static void put_command(struct proto_writer *w, const struct command_entry *e)
{
    proto_put_u32(w, PROTO_T_CMD_ID, e->id);
    proto_put_u32(w, PROTO_T_PID, (uint32_t)e->pid);
    proto_put_u32(w, PROTO_T_RUNNING, e->running ? 1 : 0);
    if (!e->running) {
        proto_put_i32(w, PROTO_T_EXIT_CODE, e->exit_code);
        proto_put_u32(w, PROTO_T_SIGNAL, (uint32_t)e->signal);
    }
    if (e->tag[0])
        proto_put_str(w, PROTO_T_TAG, e->tag);
    if (e->cgroup[0])
        proto_put_str(w, PROTO_T_CGROUP, e->cgroup);
}

static void broadcast_exited(struct agent *a, const struct command_entry *e)
{
    uint8_t buf[512];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_EXITED, 0, 0);
    put_command(&w, e);
    size_t len = proto_finish(&w);
    for (int c = 0; c < AGENT_MAX_CLIENTS; c++)
        send_to(a, c, buf, len, NULL, 0);
}

/* ---------- spawns, one at a time through the spawner ---------- */

static void pending_free(struct pending_spawn *p)
{
    free(p->msg);
    for (size_t i = 0; i < p->n_fds; i++)
        close(p->fds[i]);
    memset(p, 0, sizeof *p);
}

static void queue_pop(struct agent *a)
{
    pending_free(&a->queue[0]);
    memmove(&a->queue[0], &a->queue[1], (a->queued - 1) * sizeof a->queue[0]);
    a->queued--;
    a->in_flight = false;
    a->n_early = 0;
}

static void spawn_next(struct agent *a)
{
    while (a->queued && !a->in_flight) {
        struct pending_spawn *p = &a->queue[0];
        if (proto_send(a->spawner_fd, p->msg, p->len, p->fds, p->n_fds) == 0) {
            a->in_flight = true;
            return;
        }
        int e_no = errno;
        struct pending_spawn failed = *p;
        memset(p, 0, sizeof *p); /* the fds and msg go below, after the answer */
        queue_pop(a);
        if (failed.sudo) {
            sudo_spawned(&a->sudo, failed.cmd_id, 0, e_no, "hand the command to the spawner");
        } else {
            struct command_entry *e = commands_find(&a->cmds, failed.cmd_id);
            reply_error(a, failed.client, failed.request_id, e_no,
                        "hand the command to the spawner");
            if (e)
                commands_drop(&a->cmds, e);
        }
        pending_free(&failed);
    }
}

/* sudo.c's SUDO_SPAWN, into the same queue as the host's spawns (one spawner does both). */
static int submit_sudo(void *arg, uint32_t spawn_id, uint8_t *msg, size_t len, int *fds,
                       size_t n_fds)
{
    struct agent *a = arg;
    if (a->queued >= AGENT_MAX_QUEUE || a->spawner_fd < 0) {
        free(msg);
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        errno = a->spawner_fd < 0 ? EIO : EAGAIN;
        return -1;
    }
    struct pending_spawn *p = &a->queue[a->queued++];
    memset(p, 0, sizeof *p);
    p->cmd_id = spawn_id;
    p->client = -1;
    p->sudo = true;
    p->msg = msg;
    p->len = len;
    memcpy(p->fds, fds, n_fds * sizeof *fds);
    p->n_fds = n_fds;
    spawn_next(a);
    return 0;
}

/* A command's end: every host is told, and the spawner drops its cgroup fds (sudo_groups.c). */
static void command_end(struct agent *a, struct command_entry *e, int status)
{
    commands_ended(&a->cmds, e, status);
    broadcast_exited(a, e);
    if (a->spawner_fd >= 0) {
        uint8_t buf[64];
        struct proto_writer w;
        proto_begin(&w, buf, sizeof buf, PROTO_FORGET, 0, 0);
        proto_put_u32(&w, PROTO_T_CMD_ID, e->id);
        size_t len = proto_finish(&w);
        if (len)
            proto_send(a->spawner_fd, buf, len, NULL, 0); /* best effort: no answer comes */
    }
}

static void handle_spawn(struct agent *a, int c, const struct proto_msg *m, uint8_t *buf,
                         size_t len, int *fds, size_t *n_fds)
{
    struct proto_spawn s;
    err_t err;
    /* Checked here too, so that the host hears a bad request at once. */
    if (proto_decode_spawn(m, &s, &err) < 0) {
        reply_error(a, c, m->request_id, err.errnum, err.msg);
        return;
    }
    char tag[COMMANDS_TAG_MAX + 1], group[33];
    size_t tag_len = strlen(s.tag);
    snprintf(group, sizeof group, "%s", s.cgroup);
    proto_spawn_free(&s);
    if (tag_len > COMMANDS_TAG_MAX) {
        reply_error(a, c, m->request_id, E2BIG, "tag longer than 128 bytes");
        return;
    }
    memcpy(tag, s.tag, tag_len + 1);
    struct command_entry *e = a->queued < AGENT_MAX_QUEUE ? commands_add(&a->cmds) : NULL;
    if (!e) {
        reply_error(a, c, m->request_id, EAGAIN, "too many commands at once in this sandbox");
        return;
    }
    memcpy(e->tag, tag, tag_len + 1);
    memcpy(e->cgroup, group, sizeof group);
    struct pending_spawn *p = &a->queue[a->queued++];
    p->cmd_id = e->id;
    p->client = c;
    p->request_id = m->request_id;
    p->msg = malloc(len);
    if (!p->msg) {
        a->queued--;
        commands_drop(&a->cmds, e);
        reply_error(a, c, m->request_id, ENOMEM, "spawn");
        return;
    }
    memcpy(p->msg, buf, len);
    p->len = len;
    memcpy(p->msg + 8, &e->id, 4); /* the request id the spawner answers with */
    memcpy(p->fds, fds, *n_fds * sizeof *fds);
    p->n_fds = *n_fds;
    *n_fds = 0; /* the queue owns them now */
    spawn_next(a);
}

/* The spawner's answer for queue[0], a sudo command: its pid (it takes no ends), or why not. */
static void spawned_for_sudo(struct agent *a, const struct proto_msg *m, size_t n_fds)
{
    uint32_t pid = 0, mask = 0, errnum = EIO;
    const char *msg = NULL;
    if (m->type == PROTO_SPAWN_REPLY && n_fds == 0 &&
        proto_get_u32(m, PROTO_T_PID, &pid, NULL) == 0 &&
        proto_get_u32(m, PROTO_T_FDS, &mask, NULL) == 0 && mask == 0 && pid > 1) {
        sudo_spawned(&a->sudo, a->queue[0].cmd_id, (pid_t)pid, 0, NULL);
        for (size_t i = 0; i < a->n_early; i++)
            if (a->early[i].pid == (pid_t)pid)
                sudo_reaped(&a->sudo, (pid_t)pid, a->early[i].status);
        return;
    }
    if (m->type == PROTO_ERROR) {
        proto_get_u32(m, PROTO_T_ERRNO, &errnum, NULL);
        proto_get_str(m, PROTO_T_MESSAGE, PROTO_MAX_STRING, &msg, NULL);
    }
    sudo_spawned(&a->sudo, a->queue[0].cmd_id, 0, (int)errnum, msg ? msg : "spawn failed");
}

/* The spawner's answer for queue[0]. */
static void handle_spawner(struct agent *a)
{
    uint8_t buf[PROTO_MAX_TO_HOST];
    int fds[PROTO_MAX_FDS];
    size_t n_fds;
    ssize_t n = proto_recv(a->spawner_fd, buf, sizeof buf, fds, PROTO_MAX_FDS, &n_fds);
    if (n < 0 && errno == EAGAIN)
        return;
    struct proto_msg m;
    err_t err;
    if (n <= 0 || proto_parse(buf, (size_t)n, &m, &err) < 0 || !a->in_flight ||
        m.request_id != a->queue[0].cmd_id) {
        /* The spawner is gone or confused: no command can start any more. Tell whoever
         * waits, and stop listening to it. */
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        while (a->queued) {
            if (a->queue[0].sudo) {
                sudo_spawned(&a->sudo, a->queue[0].cmd_id, 0, EIO, "the sandbox's spawner is gone");
            } else {
                struct command_entry *e = commands_find(&a->cmds, a->queue[0].cmd_id);
                reply_error(a, a->queue[0].client, a->queue[0].request_id, EIO,
                            "the sandbox's spawner is gone");
                if (e)
                    commands_drop(&a->cmds, e);
            }
            queue_pop(a);
        }
        close(a->spawner_fd);
        a->spawner_fd = -1;
        return;
    }
    struct pending_spawn *p = &a->queue[0];
    if (p->sudo) {
        spawned_for_sudo(a, &m, n_fds);
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        queue_pop(a);
        spawn_next(a);
        return;
    }
    struct command_entry *e = commands_find(&a->cmds, p->cmd_id);
    uint32_t pid = 0, mask = 0;
    if (m.type == PROTO_SPAWN_REPLY && e && proto_get_u32(&m, PROTO_T_PID, &pid, &err) == 0 &&
        proto_get_u32(&m, PROTO_T_FDS, &mask, &err) == 0 && pid > 1) {
        int *slots[4] = {&e->fds.stdout_r, &e->fds.stderr_r, &e->fds.stdin_w, &e->fds.pty_master};
        const uint32_t bits[4] = {PROTO_FD_STDOUT, PROTO_FD_STDERR, PROTO_FD_STDIN, PROTO_FD_PTY};
        size_t k = 0;
        for (size_t i = 0; i < 4; i++)
            if ((mask & bits[i]) && k < n_fds)
                *slots[i] = fds[k++];
        for (; k < n_fds; k++)
            close(fds[k]);
        e->pid = (pid_t)pid;
        reply_fds(a, p->client, p->request_id, e);
        for (size_t i = 0; i < a->n_early; i++)
            if (a->early[i].pid == e->pid)
                command_end(a, e, a->early[i].status);
    } else {
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        uint32_t errnum = EIO;
        const char *msg = NULL;
        if (m.type == PROTO_ERROR) {
            proto_get_u32(&m, PROTO_T_ERRNO, &errnum, NULL);
            proto_get_str(&m, PROTO_T_MESSAGE, PROTO_MAX_STRING, &msg, NULL);
        }
        reply_error(a, p->client, p->request_id, (int)errnum, msg ? msg : "spawn failed");
        if (e)
            commands_drop(&a->cmds, e);
    }
    queue_pop(a);
    spawn_next(a);
}

/* ---------- the other requests ---------- */

static struct command_entry *command_of(struct agent *a, int c, const struct proto_msg *m)
{
    uint32_t id;
    err_t err;
    if (proto_get_u32(m, PROTO_T_CMD_ID, &id, &err) < 0) {
        reply_error(a, c, m->request_id, err.errnum, err.msg);
        return NULL;
    }
    struct command_entry *e = commands_find(&a->cmds, id);
    if (!e || (!e->pid && e->running))
        reply_error(a, c, m->request_id, ESRCH, "no such command");
    return e && (e->pid || !e->running) ? e : NULL;
}

static void handle_signal(struct agent *a, int c, const struct proto_msg *m)
{
    struct command_entry *e = command_of(a, c, m);
    uint32_t sig = 0, group = 0;
    err_t err;
    if (!e)
        return;
    if (proto_get_u32(m, PROTO_T_SIGNAL, &sig, &err) < 0 || sig == 0 || sig > 64) {
        reply_error(a, c, m->request_id, EINVAL, "bad signal");
        return;
    }
    proto_get_u32(m, PROTO_T_GROUP, &group, NULL);
    if (!e->running) {
        reply_error(a, c, m->request_id, ESRCH, "the command has ended");
        return;
    }
    /* The command leads its own session (and process group): -pid is its group. */
    if (kill(group ? -e->pid : e->pid, (int)sig) < 0 && errno != ESRCH) {
        reply_error(a, c, m->request_id, errno, "kill");
        return;
    }
    reply_ok(a, c, m->request_id, -1);
}

/* Writes as much as fits without blocking: a pipe with room for PIPE_BUF takes a PIPE_BUF
 * write whole. The rest is the host's to send again (WRITTEN says how much went). */
static void handle_stdin_write(struct agent *a, int c, const struct proto_msg *m)
{
    struct command_entry *e = command_of(a, c, m);
    if (!e)
        return;
    int fd = e->fds.stdin_w >= 0 ? e->fds.stdin_w : e->fds.pty_master;
    struct proto_iter it;
    struct proto_field f;
    const uint8_t *data = NULL;
    size_t len = 0;
    err_t err;
    proto_iter_init(&it, m->body, m->body_len);
    int rc;
    while ((rc = proto_next(&it, &f, &err)) == 1)
        if (f.tag == PROTO_T_DATA) {
            data = f.data;
            len = f.len;
        }
    if (rc < 0 || !data || len > 65536) {
        reply_error(a, c, m->request_id, EINVAL, "stdin write: no data, or more than 64 KiB");
        return;
    }
    if (fd < 0 || !e->running) {
        reply_error(a, c, m->request_id, EPIPE, "the command's stdin is closed");
        return;
    }
    size_t done = 0;
    while (done < len) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
            break;
        size_t chunk = len - done < 4096 ? len - done : 4096;
        ssize_t w = write(fd, data + done, chunk);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    reply_ok(a, c, m->request_id, (int)done);
}

static void handle_stdin_close(struct agent *a, int c, const struct proto_msg *m)
{
    struct command_entry *e = command_of(a, c, m);
    if (!e)
        return;
    if (e->fds.stdin_w >= 0) {
        close(e->fds.stdin_w);
        e->fds.stdin_w = -1;
    } else if (e->fds.pty_master >= 0 && e->running) {
        /* A terminal's end of input is its EOF character at the start of a line. */
        (void)!write(e->fds.pty_master, "\x04", 1);
    }
    reply_ok(a, c, m->request_id, -1);
}

static void handle_resize(struct agent *a, int c, const struct proto_msg *m)
{
    struct command_entry *e = command_of(a, c, m);
    uint32_t rows = 0, cols = 0;
    if (!e)
        return;
    if (proto_get_u32(m, PROTO_T_ROWS, &rows, NULL) < 0 ||
        proto_get_u32(m, PROTO_T_COLS, &cols, NULL) < 0 || rows == 0 || cols == 0 || rows > 65535 ||
        cols > 65535) {
        reply_error(a, c, m->request_id, EINVAL, "resize needs rows and columns, 1..65535");
        return;
    }
    if (e->fds.pty_master < 0) {
        reply_error(a, c, m->request_id, ENOTTY, "the command has no pty");
        return;
    }
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (ioctl(e->fds.pty_master, TIOCSWINSZ, &ws) < 0) {
        reply_error(a, c, m->request_id, errno, "resize");
        return;
    }
    reply_ok(a, c, m->request_id, -1);
}

static void handle_list(struct agent *a, int c, const struct proto_msg *m)
{
    uint8_t buf[PROTO_MAX_TO_HOST];
    struct proto_writer w;
    size_t in_chunk = 0, total = a->cmds.running + a->cmds.ended, sent = 0;
    proto_begin(&w, buf, sizeof buf, PROTO_LIST_REPLY, m->request_id, 0);
    for (size_t i = 0; i < a->cmds.cap; i++) {
        const struct command_entry *e = &a->cmds.entries[i];
        if (!e->id || !e->pid)
            continue;
        size_t start = proto_begin_nested(&w, PROTO_T_ENTRY);
        put_command(&w, e);
        proto_end_nested(&w, start);
        sent++;
        /* Each entry is at most ~200 bytes: a chunk of PROTO_MAX_ENTRIES always fits. */
        if (++in_chunk == PROTO_MAX_ENTRIES && sent < total) {
            proto_put_u32(&w, PROTO_T_MORE, 1);
            send_to(a, c, buf, proto_finish(&w), NULL, 0);
            proto_begin(&w, buf, sizeof buf, PROTO_LIST_REPLY, m->request_id, 0);
            in_chunk = 0;
        }
    }
    proto_put_u32(&w, PROTO_T_MORE, 0);
    send_to(a, c, buf, proto_finish(&w), NULL, 0);
}

/* A files worker for user (as_root): init cannot fork, so it makes the worker's socket and the
 * spawner starts the worker on the other end (src/init/README.md, "Files"). Init's end, or -1. */
static int start_files_worker(struct agent *a, bool as_root)
{
    int sp[2];
    if (a->spawner_fd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return -1;
    uint8_t buf[64];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_FILES_START, 0, 1);
    proto_put_u32(&w, PROTO_T_USER, as_root);
    size_t len = proto_finish(&w);
    int rc = len ? proto_send(a->spawner_fd, buf, len, &sp[1], 1) : -1;
    close(sp[1]);
    if (rc < 0 || fcntl(sp[0], F_SETFL, O_NONBLOCK) < 0) {
        close(sp[0]);
        return -1;
    }
    return sp[0];
}

/* A file request: checked here too (the host hears a bad one at once), then to its user's
 * worker; a watch is stopped by the worker that holds it, for the host that started it. */
static void handle_file(struct agent *a, int c, const struct proto_msg *m, uint8_t *buf, size_t len)
{
    struct proto_file_request r;
    err_t err;
    if (proto_decode_file_request(m, &r, &err) < 0) {
        reply_error(a, c, m->request_id, err.errnum, err.msg);
        return;
    }
    struct relay *to = &a->files[r.as_root ? 1 : 0];
    if (r.type == PROTO_WATCH_STOP) {
        to = NULL;
        for (size_t i = 0; i < 2; i++)
            if (relay_has_watch(&a->files[i], r.watch_id, c))
                to = &a->files[i];
        if (!to) {
            reply_error(a, c, m->request_id, ESRCH, "no such watch");
            return;
        }
    }
    if (!relay_has_worker(to))
        relay_attach(to, start_files_worker(a, to == &a->files[1]));
    if (relay_forward(to, c, buf, len, m, &err) < 0)
        reply_error(a, c, m->request_id, err.errnum, err.msg);
}

static void handle_hello(struct agent *a, int c, const struct proto_msg *m)
{
    uint8_t buf[64];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_HELLO_REPLY, m->request_id, 0);
    proto_put_u32(&w, PROTO_T_VERSION, PROTO_VERSION);
    proto_put_u32(&w, PROTO_T_PID, (uint32_t)getpid());
    send_to(a, c, buf, proto_finish(&w), NULL, 0);
}

static void handle_client(struct agent *a, int c)
{
    int fd = a->clients[c];
    uint8_t probe[1];
    ssize_t size = recv(fd, probe, sizeof probe, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    if (size < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (size <= 0 || (size_t)size > PROTO_MAX_TO_INIT) {
        drop_client(a, c); /* gone, or a message no host sends */
        return;
    }
    uint8_t *buf = malloc((size_t)size);
    if (!buf) {
        drop_client(a, c);
        return;
    }
    int fds[PROTO_MAX_FDS];
    size_t n_fds = 0;
    ssize_t n = proto_recv(fd, buf, (size_t)size, fds, PROTO_MAX_FDS, &n_fds);
    struct proto_msg m;
    err_t err;
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN)
            drop_client(a, c);
    } else if (proto_parse(buf, (size_t)n, &m, &err) < 0) {
        reply_error(a, c, 0, err.errnum, err.msg);
    } else if (m.type != PROTO_SPAWN && n_fds) {
        reply_error(a, c, m.request_id, EBADMSG, "fds with a message that takes none");
    } else {
        switch (m.type) {
        case PROTO_HELLO:
            handle_hello(a, c, &m);
            break;
        case PROTO_SPAWN:
            handle_spawn(a, c, &m, buf, (size_t)n, fds, &n_fds);
            break;
        case PROTO_ATTACH: {
            struct command_entry *e = command_of(a, c, &m);
            if (e)
                reply_fds(a, c, m.request_id, e);
            break;
        }
        case PROTO_SIGNAL:
            handle_signal(a, c, &m);
            break;
        case PROTO_STDIN_WRITE:
            handle_stdin_write(a, c, &m);
            break;
        case PROTO_STDIN_CLOSE:
            handle_stdin_close(a, c, &m);
            break;
        case PROTO_RESIZE:
            handle_resize(a, c, &m);
            break;
        case PROTO_LIST:
            handle_list(a, c, &m);
            break;
        case PROTO_FORGET: {
            uint32_t id;
            if (proto_get_u32(&m, PROTO_T_CMD_ID, &id, &err) < 0)
                reply_error(a, c, m.request_id, err.errnum, err.msg);
            else if (commands_forget(&a->cmds, id) < 0)
                reply_error(a, c, m.request_id, errno,
                            errno == EBUSY ? "the command is running" : "no such command");
            else
                reply_ok(a, c, m.request_id, -1);
            break;
        }
        default:
            if (proto_is_file_request(m.type))
                handle_file(a, c, &m, buf, (size_t)n);
            else
                reply_error(a, c, m.request_id, EOPNOTSUPP, "not a request init serves");
        }
    }
    for (size_t i = 0; i < n_fds; i++)
        close(fds[i]);
    free(buf);
}

static void handle_accept(struct agent *a)
{
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    for (int c = 0; c < AGENT_MAX_CLIENTS; c++)
        if (a->clients[c] < 0) {
            a->clients[c] = fd;
            return;
        }
    close(fd); /* full: the host retries once one has gone */
}

/* Every child that ended: commands (CLONE_PARENT made init their parent) and orphans. */
static void reap(struct agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        ;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        struct command_entry *e = commands_find_pid(&a->cmds, pid);
        if (e) {
            command_end(a, e, status);
        } else if (sudo_reaped(&a->sudo, pid, status)) {
            /* a sudo command: its asker was told */
        } else if (a->in_flight && a->n_early < AGENT_EARLY_MAX) {
            a->early[a->n_early].pid = pid;
            a->early[a->n_early++].status = status;
        }
    }
}

/* The spawner, forked before init's filter, with a socket to it: returns init's end in init, the
 * spawner's end in the spawner (*child). */
static int fork_spawner(bool *child)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        _exit(1);
    proto_socket_tune(sp[0]);
    proto_socket_tune(sp[1]);
    pid_t pid = fork();
    if (pid < 0)
        _exit(1);
    *child = pid == 0;
    close(sp[*child ? 0 : 1]);
    return sp[*child ? 1 : 0];
}

void agent_main(int ctl, int listen_fd, int hold_fd, const struct seccomp_program *prog,
                bool writable_root)
{
    /* The spawner first, while init still may fork and exec: it keeps the privileges a command
     * needs to become its user, and nothing else of init's. Before READY, so that the host's
     * first SPAWN finds it serving (bench/README.md, "Where the time goes"). */
    bool child;
    int spawner_fd = fork_spawner(&child);
    if (child) {
        close(ctl);
        close(listen_fd);
        if (hold_fd >= 0)
            close(hold_fd);
        spawner_main(spawner_fd, prog, writable_root);
    }
    struct control_msg ready = {.type = CONTROL_READY};
    if (control_send(ctl, &ready, -1) < 0)
        _exit(1);
    static struct agent a;
    a.listen_fd = listen_fd;
    a.spawner_fd = spawner_fd;
    /* After the spawner's fork, so that it does not hold it (nor the files workers it forks). */
    sudo_init(&a.sudo, sudo_listen(), submit_sudo, &a);
    for (int c = 0; c < AGENT_MAX_CLIENTS; c++)
        a.clients[c] = -1;
    a.clients[0] = ctl;
    commands_init(&a.cmds);
    for (int i = 0; i < 2; i++)
        relay_init(&a.files[i], -1, a.clients, AGENT_MAX_CLIENTS, &a.next_file_id, relay_drop, &a);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    a.sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (a.sigfd < 0 || fcntl(ctl, F_SETFL, O_NONBLOCK) < 0 ||
        fcntl(listen_fd, F_SETFL, O_NONBLOCK) < 0)
        _exit(1);
    proto_socket_tune(ctl);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        _exit(1);
    /* Of all capabilities only CAP_KILL, in the sandbox's user namespace: a command's signal
     * reaches the default user's processes too (uid 1000, which init's uid 0 without it may not
     * signal); nothing outside that namespace is within its reach. And an allow-list without
     * exec, fork or anything that changes the sandbox's mounts or namespaces (the agent
     * profile). */
    struct seccomp_program own;
    if (seccomp_builtin(SECCOMP_PROFILE_AGENT, &own) < 0 || privs_keep_caps(1ull << CAP_KILL) < 0 ||
        seccomp_install(&own) < 0)
        _exit(1);
    for (;;) {
        enum {
            FILES_AT = 3 + AGENT_MAX_CLIENTS,
            SUDO_AT = FILES_AT + 2,
            N_POLL_MAX = SUDO_AT + 1 + SUDO_MAX_SESSIONS
        };
        struct pollfd p[N_POLL_MAX];
        p[0] = (struct pollfd){.fd = a.sigfd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = a.spawner_fd, .events = POLLIN};
        p[2] = (struct pollfd){.fd = a.listen_fd, .events = POLLIN};
        for (int c = 0; c < AGENT_MAX_CLIENTS; c++)
            p[3 + c] = (struct pollfd){.fd = a.clients[c], .events = POLLIN};
        int timeout = -1;
        for (int i = 0; i < 2; i++) {
            int t = relay_poll(&a.files[i], &p[FILES_AT + i]);
            if (t >= 0 && (timeout < 0 || t < timeout))
                timeout = t;
        }
        size_t n_sudo = a.sudo.listen_fd >= 0 ? sudo_poll(&a.sudo, &p[SUDO_AT], &timeout) : 0;
        if (poll(p, SUDO_AT + n_sudo, timeout) < 0)
            continue;
        /* The spawner's answers before the exits: a command's pid is known before its end. */
        if (p[1].revents)
            handle_spawner(&a);
        if (p[0].revents)
            reap(&a);
        if (p[2].revents)
            handle_accept(&a);
        for (int c = 0; c < AGENT_MAX_CLIENTS; c++)
            if (p[3 + c].revents && a.clients[c] >= 0)
                handle_client(&a, c);
        for (int i = 0; i < 2; i++)
            relay_ready(&a.files[i], &p[FILES_AT + i]);
        sudo_ready(&a.sudo, &p[SUDO_AT], n_sudo);
    }
}
