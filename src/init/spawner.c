/* The spawner: forked by init before init loads its own seccomp filter, the one process in a
 * sandbox that can still exec or fork. It starts processes, for init only: on a SPAWN (as the
 * host sent it, with the command's cgroup fds) the command (command.c), answering with its pid
 * and the host's ends of its pipes or pty; on a SUDO_SPAWN, which init made from a sudo request
 * (sudo.c), the same with the asker's stdio, in the cgroup of the asker's command
 * (sudo_groups.c); on a FILES_START a files worker (files_worker.c) on the socket that came with
 * it. It reaches nothing but its socket to init, holds no fd of anyone else's, and runs no code of
 * the sandbox's: commands are its children only until clone3 returns (CLONE_PARENT makes init
 * their parent), a worker is init's child once its first fork has exited. */
#include "init/spawner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/command.h"
#include "init/files_worker.h"
#include "init/sudo_groups.h"
#include "proto/proto.h"
#include "proto/proto_sudo.h"

static void reply_error(int sock, uint32_t id, const err_t *err)
{
    uint8_t buf[1200];
    size_t len = proto_encode_error(buf, sizeof buf, id, err->errnum, err->msg);
    if (len)
        proto_send(sock, buf, len, NULL, 0);
}

static void reply_spawned(int sock, uint32_t id, pid_t pid, const struct command_fds *fds)
{
    const int ends[4] = {fds->stdout_r, fds->stderr_r, fds->stdin_w, fds->pty_master};
    int pass[4];
    size_t n;
    uint8_t buf[128];
    size_t len = proto_encode_spawn_reply(buf, sizeof buf, id, id, (uint32_t)pid, ends, pass, &n);
    if (len)
        proto_send(sock, buf, len, pass, n);
}

static void spawn_for_host(int sock, const struct proto_msg *m, int *fds,
                           const struct seccomp_program *prog, bool writable_root)
{
    struct proto_spawn s;
    err_t err;
    if (proto_decode_spawn(m, &s, &err) < 0) {
        reply_error(sock, m->request_id, &err);
        return;
    }
    struct command_spec spec = {.argv = s.argv,
                                .envp = s.envp,
                                .cwd = s.cwd,
                                .as_root = s.as_root,
                                .writable_root = writable_root,
                                .stdin_pipe = s.stdin_pipe,
                                .pty = s.pty,
                                .rows = s.rows,
                                .cols = s.cols,
                                .cgroup_fd = s.has_cgroup_fd ? fds[0] : -1,
                                .stdio = {-1, -1, -1}};
    for (unsigned i = 0; i < s.n_v1_fds; i++)
        spec.v1_fds[spec.n_v1_fds++] = fds[(s.has_cgroup_fd ? 1 : 0) + i];
    pid_t pid;
    struct command_fds out;
    if (command_spawn(&spec, prog, &pid, &out, &err) < 0) {
        reply_error(sock, m->request_id, &err);
    } else {
        /* Before the reply: init forgets it only once it knows its pid. */
        sudo_groups_add(m->request_id, s.cgroup, fds, s.has_cgroup_fd, s.n_v1_fds);
        reply_spawned(sock, m->request_id, pid, &out);
        command_fds_close(&out); /* init has its own copies now */
    }
    proto_spawn_free(&s);
}

/* A sudo command: the asker's stdio, the cgroup of the command the asker belongs to. */
static void spawn_for_sudo(int sock, const struct proto_msg *m, int *fds,
                           const struct seccomp_program *prog, bool writable_root)
{
    struct proto_sudo s;
    err_t err;
    if (proto_decode_sudo(m, &s, &err) < 0) {
        reply_error(sock, m->request_id, &err);
        return;
    }
    const struct sudo_group *g = sudo_groups_of((pid_t)s.caller_pid, &err);
    if (!g) {
        err_wrap(&err, "sudo");
        reply_error(sock, m->request_id, &err);
        proto_sudo_free(&s);
        return;
    }
    struct command_spec spec = {.argv = s.argv,
                                .envp = s.envp,
                                .cwd = s.cwd,
                                .as_root = s.as_root,
                                .writable_root = writable_root,
                                .cgroup_fd = g->has_dir ? g->fds[0] : -1,
                                .stdio = {fds[0], fds[1], fds[2]}};
    for (unsigned i = 0; i < g->n_v1; i++)
        spec.v1_fds[spec.n_v1_fds++] = g->fds[(g->has_dir ? 1 : 0) + i];
    pid_t pid;
    struct command_fds out;
    if (command_spawn(&spec, prog, &pid, &out, &err) < 0) {
        reply_error(sock, m->request_id, &err);
    } else {
        reply_spawned(sock, m->request_id, pid, &out);
        command_fds_close(&out); /* none: the stdio was given */
    }
    proto_sudo_free(&s);
}

/* A files worker for user (as_root) on sock, init's child: forked twice, the first fork reaped
 * here. Nothing is answered; a worker that cannot start closes sock, and init answers its
 * requests with EIO. */
static void start_files_worker(int sock, bool as_root, bool writable_root)
{
    proto_socket_tune(sock); /* its answers are up to PROTO_MAX_TO_HOST; the spawner may force */
    pid_t pid = fork();
    if (pid == 0) {
        if (fork() == 0)
            files_worker_main(sock, as_root, writable_root);
        _exit(0);
    }
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
}

static void serve_one(int sock, const uint8_t *buf, size_t len, int *fds, size_t n_fds,
                      const struct seccomp_program *prog, bool writable_root)
{
    struct proto_msg m;
    err_t err = {0};
    uint32_t id;
    if (proto_parse(buf, len, &m, &err) < 0) {
        reply_error(sock, len >= PROTO_HEADER_SIZE ? m.request_id : 0, &err);
        return;
    }
    switch (m.type) {
    case PROTO_SPAWN:
        spawn_for_host(sock, &m, fds, prog, writable_root);
        break;
    case PROTO_SUDO_SPAWN:
        spawn_for_sudo(sock, &m, fds, prog, writable_root);
        break;
    case PROTO_FORGET: /* a command ended: no answer */
        if (n_fds == 0 && proto_get_u32(&m, PROTO_T_CMD_ID, &id, NULL) == 0)
            sudo_groups_forget(id);
        break;
    case PROTO_FILES_START: /* no answer */
        if (n_fds == 1 && proto_get_u32(&m, PROTO_T_USER, &id, NULL) == 0 && id <= 1)
            start_files_worker(fds[0], id == 1, writable_root);
        break;
    default:
        err_set(&err, EBADMSG, "spawner: not a spawn");
        reply_error(sock, m.request_id, &err);
    }
}

void spawner_main(int sock, const struct seccomp_program *prog, bool writable_root)
{
    /* Blocking: the spawner has nothing else to do. */
    for (;;) {
        uint8_t probe[1];
        ssize_t size;
        do {
            size = recv(sock, probe, sizeof probe, MSG_PEEK | MSG_TRUNC);
        } while (size < 0 && errno == EINTR);
        if (size <= 0)
            _exit(0); /* init is gone, or closed us */
        if ((size_t)size > PROTO_MAX_TO_INIT)
            _exit(1); /* init never sends that */
        uint8_t *buf = malloc((size_t)size);
        if (!buf)
            _exit(1);
        int fds[PROTO_MAX_FDS];
        size_t n_fds;
        /* The message is there (the peek saw it): this does not wait. */
        ssize_t n = proto_recv(sock, buf, (size_t)size, fds, PROTO_MAX_FDS, &n_fds);
        if (n > 0)
            serve_one(sock, buf, (size_t)n, fds, n_fds, prog, writable_root);
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        /* A SPAWN's env may hold secrets: no later fork (a files worker) inherits them. */
        explicit_bzero(buf, (size_t)size);
        free(buf);
        if (n == 0)
            _exit(0);
    }
}
