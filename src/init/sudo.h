/* Init's sudo socket (PROTO_SUDO_SOCKET): any process in the sandbox asks for a command as root
 * or as the user, passing its stdio; init checks the request as hostile input, has its spawner
 * start the command (as a host's root command is started, in the asker's command cgroup),
 * forwards the asker's signals to it, and tells the asker how it ended. README.md, "sudo". */
#pragma once
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SUDO_MAX_SESSIONS   128         /* connections at once; more wait in the listen backlog */
#define SUDO_MAX_QUEUED     8           /* requests waiting for the spawner; more are told EAGAIN */
#define SUDO_REQUEST_MS     10000       /* from accept to the request */
#define SUDO_HANGUP_KILL_MS 2000        /* from SIGHUP (the asker went) to SIGKILL */
#define SUDO_SPAWN_ID_BIT   0x80000000u /* spawner request ids of sudo commands */

/* Hands a SUDO_SPAWN (msg, malloc'd; fds) to the agent's spawner queue, which owns both from then
 * on, whatever it returns; -1 if it cannot take it: errno EAGAIN (full: ask again) or EIO (the
 * spawner is gone). */
typedef int (*sudo_submit_fn)(void *arg, uint32_t spawn_id, uint8_t *msg, size_t len, int *fds,
                              size_t n_fds);

struct sudo_session {
    int fd;       /* the asker's connection; -1 once it went */
    bool used;    /* the slot is taken */
    bool queued;  /* with the spawner */
    bool running; /* started, not reaped */
    bool hup_sent;
    int pending_signal; /* one that came while the command was starting: sent once it runs */
    uint32_t request_id, spawn_id;
    pid_t pid;
    int64_t deadline_ms; /* the request's, or SIGKILL's after a hangup; 0 = none */
};

struct sudo_server {
    int listen_fd; /* -1: no sudo in this sandbox */
    struct sudo_session s[SUDO_MAX_SESSIONS];
    unsigned queued;
    uint32_t next_spawn;
    unsigned short polled[SUDO_MAX_SESSIONS]; /* the session of each pollfd sudo_poll filled */
    sudo_submit_fn submit;
    void *arg;
};

/* Before init's filter: binds and listens on PROTO_SUDO_SOCKET (SO_PASSCRED, 0666). -1 when it
 * cannot (the sandbox then has no sudo; nothing else changes). */
int sudo_listen(void);
void sudo_init(struct sudo_server *sv, int listen_fd, sudo_submit_fn submit, void *arg);
/* Fills up to 1 + SUDO_MAX_SESSIONS pollfds; returns how many, and lowers *timeout_ms (-1 =
 * none) to the nearest deadline. */
size_t sudo_poll(struct sudo_server *sv, struct pollfd *p, int *timeout_ms);
/* After poll: the pollfds sudo_poll filled (n of them), then the deadlines. */
void sudo_ready(struct sudo_server *sv, const struct pollfd *p, size_t n);
/* The spawner's answer for spawn_id: pid > 0 started, else errnum and msg. False if not ours. */
bool sudo_spawned(struct sudo_server *sv, uint32_t spawn_id, pid_t pid, int errnum,
                  const char *msg);
/* A child that init reaped: true if it was a sudo command (its asker told). */
bool sudo_reaped(struct sudo_server *sv, pid_t pid, int status);
