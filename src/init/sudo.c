/* Init's sudo socket (sudo.h). Every byte and fd that comes in is the sandbox's: a request is
 * read whole only when its size is known and bounded, decoded with the protocol's limits, and
 * re-encoded by init for the spawner (the spawner never sees what the asker wrote); the asker's
 * pid and ids come from the kernel (SCM_CREDENTIALS), never from the request. Init never waits on
 * an asker: replies are sent without blocking, and an asker that cannot take one is dropped. */
#include "init/sudo.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/proto.h"
#include "proto/proto_sudo.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sudo_listen(void)
{
    /* No sandbox code runs yet (an agent sandbox starts with none), so nothing races these
     * steps; what an earlier life left in a persistent root is the sandbox's own. A link where
     * the directory should be is not followed: the sandbox then has no sudo. */
    struct stat st;
    if (mkdir(PROTO_SUDO_DIR, 0755) < 0 && errno != EEXIST)
        return -1;
    if (lstat(PROTO_SUDO_DIR, &st) < 0 || !S_ISDIR(st.st_mode))
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", PROTO_SUDO_SOCKET);
    unlink(PROTO_SUDO_SOCKET); /* one left by an earlier life of this root */
    /* SO_PASSCRED is inherited by every accepted connection: each request comes with the
     * sender's pid and ids as the kernel knows them. */
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(PROTO_SUDO_SOCKET, 0666) < 0 ||
        listen(fd, SUDO_MAX_SESSIONS) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void sudo_init(struct sudo_server *sv, int listen_fd, sudo_submit_fn submit, void *arg)
{
    memset(sv, 0, sizeof *sv);
    sv->listen_fd = listen_fd;
    sv->submit = submit;
    sv->arg = arg;
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++)
        sv->s[i].fd = -1;
}

static void session_free(struct sudo_session *s)
{
    if (s->fd >= 0)
        close(s->fd);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

static void send_or_drop(struct sudo_session *s, const uint8_t *buf, size_t len);

/* The asker is gone (or misbehaved, which ends it the same way): its command gets SIGHUP, as a
 * terminal's hangup would give it, and SIGKILL if it is still there a little later. */
static void asker_gone(struct sudo_session *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    if (s->running && !s->hup_sent) {
        kill(-s->pid, SIGHUP);
        kill(-s->pid, SIGCONT);
        s->hup_sent = true;
        s->deadline_ms = now_ms() + SUDO_HANGUP_KILL_MS;
    } else if (!s->running && !s->queued) {
        session_free(s);
    }
}

static void send_or_drop(struct sudo_session *s, const uint8_t *buf, size_t len)
{
    if (s->fd >= 0 && (len == 0 || proto_send(s->fd, buf, len, NULL, 0) < 0))
        asker_gone(s);
}

static void send_error(struct sudo_session *s, int errnum, const char *msg)
{
    uint8_t buf[PROTO_MAX_STRING + 128];
    send_or_drop(s, buf, proto_encode_error(buf, sizeof buf, s->request_id, errnum, msg));
}

/* The environment the command gets: the asker's, but SUDO_USER, SUDO_UID and SUDO_GID say who
 * asked as the kernel says it. */
static char **sudo_env(char **envp, const struct ucred *cred, char vars[3][48])
{
    size_t n = 0;
    while (envp[n])
        n++;
    char **out = malloc((n + 4) * sizeof *out);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], "SUDO_USER=", 10) != 0 && strncmp(envp[i], "SUDO_UID=", 9) != 0 &&
            strncmp(envp[i], "SUDO_GID=", 9) != 0)
            out[k++] = envp[i];
    if (cred->uid == 0)
        snprintf(vars[0], 48, "SUDO_USER=root");
    else if (cred->uid == 1000)
        snprintf(vars[0], 48, "SUDO_USER=user");
    else
        snprintf(vars[0], 48, "SUDO_USER=%u", (unsigned)cred->uid);
    snprintf(vars[1], 48, "SUDO_UID=%u", (unsigned)cred->uid);
    snprintf(vars[2], 48, "SUDO_GID=%u", (unsigned)cred->gid);
    for (int i = 0; i < 3; i++)
        out[k++] = vars[i];
    out[k] = NULL;
    return out;
}

/* A request, checked and passed on; any failure is answered and ends the session. */
static void take_request(struct sudo_server *sv, struct sudo_session *s, const uint8_t *buf,
                         size_t len, int *fds, size_t *n_fds, const struct ucred *cred)
{
    struct proto_msg m;
    struct proto_sudo r;
    err_t err;
    if (proto_parse(buf, len, &m, &err) < 0) {
        send_error(s, err.errnum, err.msg);
        asker_gone(s);
        return;
    }
    s->request_id = m.request_id;
    if (m.type != PROTO_SUDO) {
        /* The host's requests are not served here, whatever they say. */
        send_error(s, EOPNOTSUPP, "the sudo socket serves SUDO only");
        asker_gone(s);
        return;
    }
    if (proto_decode_sudo(&m, &r, &err) < 0) {
        send_error(s, err.errnum, err.msg);
        asker_gone(s);
        return;
    }
    if (cred->pid <= 1) {
        proto_sudo_free(&r);
        send_error(s, EPERM, "no credentials came with the request");
        asker_gone(s);
        return;
    }
    if (sv->queued >= SUDO_MAX_QUEUED) {
        proto_sudo_free(&r);
        send_error(s, EAGAIN, "busy: too many sudo requests at once, ask again");
        asker_gone(s);
        return;
    }
    char vars[3][48];
    char **env = sudo_env(r.envp, cred, vars);
    size_t cap = len + 512;
    uint8_t *out = env ? malloc(cap) : NULL;
    size_t out_len = 0;
    if (out) {
        struct proto_sudo spawn = {.argv = r.argv,
                                   .envp = env,
                                   .cwd = r.cwd,
                                   .as_root = r.as_root,
                                   .caller_pid = (uint32_t)cred->pid};
        if (++sv->next_spawn >= SUDO_SPAWN_ID_BIT)
            sv->next_spawn = 1;
        s->spawn_id = SUDO_SPAWN_ID_BIT | sv->next_spawn;
        out_len = proto_encode_sudo(out, cap, PROTO_SUDO_SPAWN, s->spawn_id, &spawn);
    }
    free(env);
    proto_sudo_free(&r);
    if (out_len == 0) {
        free(out);
        send_error(s, ENOMEM, "sudo");
        asker_gone(s);
        return;
    }
    size_t n = *n_fds;
    *n_fds = 0; /* the queue owns them now, whatever happens */
    /* Queued before the call: the spawner's failure may be answered within it (sudo_spawned). */
    s->queued = true;
    s->deadline_ms = 0;
    sv->queued++;
    if (sv->submit(sv->arg, s->spawn_id, out, out_len, fds, n) < 0) {
        bool busy = errno == EAGAIN;
        s->queued = false;
        sv->queued--;
        send_error(s, busy ? EAGAIN : EIO,
                   busy ? "busy: the sandbox has too many commands starting, ask again"
                        : "the sandbox's spawner is gone");
        asker_gone(s);
    }
}

static void handle_session(struct sudo_server *sv, struct sudo_session *s)
{
    uint8_t probe[1];
    ssize_t size = recv(s->fd, probe, sizeof probe, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    if (size < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    /* Gone, an empty datagram, or more than any request may be. */
    if (size <= 0 || (size_t)size > PROTO_MAX_TO_INIT) {
        asker_gone(s);
        return;
    }
    uint8_t *buf = malloc((size_t)size);
    if (!buf) {
        asker_gone(s);
        return;
    }
    int fds[PROTO_MAX_FDS];
    size_t n_fds = 0;
    struct ucred cred;
    ssize_t n = proto_recv_creds(s->fd, buf, (size_t)size, fds, PROTO_MAX_FDS, &n_fds, &cred);
    if (n < 0 && errno == EAGAIN) {
        free(buf);
        return;
    }
    struct proto_msg m;
    uint32_t sig;
    if (n <= 0) {
        asker_gone(s);
    } else if (!s->queued && !s->running) {
        take_request(sv, s, buf, (size_t)n, fds, &n_fds, &cred);
    } else if (n_fds == 0 && proto_parse(buf, (size_t)n, &m, NULL) == 0 &&
               m.type == PROTO_SUDO_SIGNAL && proto_get_u32(&m, PROTO_T_SIGNAL, &sig, NULL) == 0 &&
               sig >= 1 && sig <= 64) {
        /* To its process group (it leads its own session), as a terminal signals a job. One
         * for a command still starting waits for its start (the last one only). */
        if (s->running)
            kill(-s->pid, (int)sig);
        else
            s->pending_signal = (int)sig;
    } else {
        asker_gone(s); /* anything else, once the request is in, ends the session */
    }
    for (size_t i = 0; i < n_fds; i++)
        close(fds[i]);
    free(buf);
}

size_t sudo_poll(struct sudo_server *sv, struct pollfd *p, int *timeout_ms)
{
    size_t n = 0, used = 0;
    int64_t now = now_ms();
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++) {
        struct sudo_session *s = &sv->s[i];
        if (!s->used)
            continue;
        used++;
        sv->polled[n] = (unsigned short)i;
        p[n++] = (struct pollfd){.fd = s->fd, .events = POLLIN};
        if (s->deadline_ms) {
            int64_t left = s->deadline_ms > now ? s->deadline_ms - now : 0;
            if (*timeout_ms < 0 || left < *timeout_ms)
                *timeout_ms = (int)left;
        }
    }
    /* Full: new askers wait in the backlog until a session ends. */
    p[n++] = (struct pollfd){.fd = used < SUDO_MAX_SESSIONS ? sv->listen_fd : -1, .events = POLLIN};
    return n;
}

static void accept_one(struct sudo_server *sv)
{
    int fd = accept4(sv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++)
        if (!sv->s[i].used) {
            sv->s[i] = (struct sudo_session){
                .fd = fd, .used = true, .deadline_ms = now_ms() + SUDO_REQUEST_MS};
            return;
        }
    close(fd);
}

void sudo_ready(struct sudo_server *sv, const struct pollfd *p, size_t n)
{
    if (sv->listen_fd < 0)
        return;
    /* The sessions sudo_poll listed, then the listener. One that ended meanwhile (its fd
     * closed, or the slot another's) is not the pollfd's any more. */
    for (size_t k = 0; k + 1 < n; k++) {
        struct sudo_session *s = &sv->s[sv->polled[k]];
        if (s->used && p[k].fd >= 0 && p[k].fd == s->fd && p[k].revents)
            handle_session(sv, s);
    }
    if (n && p[n - 1].fd >= 0 && (p[n - 1].revents & POLLIN))
        accept_one(sv);
    int64_t now = now_ms();
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++) {
        struct sudo_session *s = &sv->s[i];
        if (!s->used || !s->deadline_ms || s->deadline_ms > now)
            continue;
        s->deadline_ms = 0;
        if (s->running)
            kill(-s->pid, SIGKILL); /* the hangup's grace is over */
        else if (!s->queued)
            asker_gone(s); /* no request in time */
    }
}

static struct sudo_session *by_spawn(struct sudo_server *sv, uint32_t spawn_id)
{
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++)
        if (sv->s[i].used && sv->s[i].queued && sv->s[i].spawn_id == spawn_id)
            return &sv->s[i];
    return NULL;
}

bool sudo_spawned(struct sudo_server *sv, uint32_t spawn_id, pid_t pid, int errnum, const char *msg)
{
    if (!(spawn_id & SUDO_SPAWN_ID_BIT))
        return false;
    if (sv->queued)
        sv->queued--;
    struct sudo_session *s = by_spawn(sv, spawn_id);
    if (!s)
        return true; /* cannot happen: a session waits for its spawn */
    s->queued = false;
    if (pid <= 1) {
        send_error(s, errnum, msg ? msg : "sudo: the command did not start");
        if (s->used)
            asker_gone(s);
        return true;
    }
    s->running = true;
    s->pid = pid;
    if (s->pending_signal)
        kill(-pid, s->pending_signal);
    if (s->fd < 0) {
        s->fd = -1;
        asker_gone(s); /* it went while its command was starting */
        return true;
    }
    uint8_t buf[64];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_SUDO_STARTED, s->request_id, 0);
    proto_put_u32(&w, PROTO_T_PID, (uint32_t)pid);
    send_or_drop(s, buf, proto_finish(&w));
    return true;
}

bool sudo_reaped(struct sudo_server *sv, pid_t pid, int status)
{
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++) {
        struct sudo_session *s = &sv->s[i];
        if (!s->used || !s->running || s->pid != pid)
            continue;
        s->running = false;
        uint8_t buf[64];
        struct proto_writer w;
        proto_begin(&w, buf, sizeof buf, PROTO_SUDO_EXITED, s->request_id, 0);
        proto_put_i32(&w, PROTO_T_EXIT_CODE, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        proto_put_u32(&w, PROTO_T_SIGNAL, WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : 0);
        send_or_drop(s, buf, proto_finish(&w));
        session_free(s);
        return true;
    }
    return false;
}
