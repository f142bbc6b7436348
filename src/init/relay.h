/* init's side of a files worker (relay.c): requests go to the worker under ids of init's own,
 * answers come back to the host that asked (fds and all: no file's bytes pass through init),
 * a watch's events to the host that started it. init never waits: an answer that its host
 * cannot take yet is held, and the worker is not read again until it has gone, so a slow host
 * slows only the worker (which waits in its send), never init's loop. "Cannot take" starts at
 * RELAY_QUEUE_MAX bytes queued to the host, well below a socket's buffer: the rest stays free
 * for init's own answers and EXITED, which a host that is merely behind must still get (init
 * drops a host that cannot take those). */
#pragma once
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "util/err.h"

#define RELAY_MAX_PENDING 64 /* requests with a worker at once */
#define RELAY_MAX_WATCHES 64 /* a worker's watches (it takes fewer: FILES_WORKER_MAX_WATCHES) */
/* Bytes queued to a host (SIOCOUTQ) beyond which a worker's messages wait. A host socket takes
 * at least 416 KiB (the default wmem, doubled): this leaves room for a LIST_REPLY and more. */
#define RELAY_QUEUE_MAX (128u << 10)
#define RELAY_RETRY_MS  5 /* how soon a held message is tried again */

struct relay_pending {
    uint32_t id;        /* init's */
    int client;         /* -1 once the host went: the answer is dropped */
    uint32_t client_id; /* the host's own request id */
    enum proto_type type;
};

struct relay_watch {
    uint32_t id; /* init's id of the WATCH_START, which the worker took for the watch's */
    int client;
};

struct relay {
    int fd;             /* the socket to the worker; -1 before it is started, and once gone */
    const int *clients; /* the agent's host connections, by number (-1: none) */
    size_t n_clients;
    uint32_t *next_id; /* shared by the agent's relays: ids, watch ids too, are unique */
    /* Called when a host's connection failed (not when it is only full): the agent drops it,
     * and calls relay_client_gone. */
    void (*drop)(void *arg, int client);
    void *drop_arg;
    struct relay_pending pending[RELAY_MAX_PENDING];
    size_t n_pending;
    struct relay_watch watches[RELAY_MAX_WATCHES];
    size_t n_watches;
    /* The message being read, or held for held_client. */
    bool held;
    int held_client;
    size_t held_len;
    int held_fds[PROTO_MAX_FDS];
    size_t held_n_fds;
    uint8_t buf[PROTO_MAX_TO_HOST];
};

void relay_init(struct relay *r, int fd, const int *clients, size_t n_clients, uint32_t *next_id,
                void (*drop)(void *arg, int client), void *drop_arg);
/* Whether the relay has a worker: none before the first request, nor once one has gone. */
bool relay_has_worker(const struct relay *r);
/* Gives the relay a new worker's socket (fd; -1: none could be started, and nothing changes). */
void relay_attach(struct relay *r, int fd);
/* Forwards a checked file request of client's (msg, len: as received; m: parsed). -1 with err
 * when it cannot go (the worker gone or busy, too many requests): the caller answers ERROR. */
int relay_forward(struct relay *r, int client, uint8_t *msg, size_t len, const struct proto_msg *m,
                  err_t *err);
/* Whether this relay's worker holds watch_id for client. */
bool relay_has_watch(const struct relay *r, uint32_t watch_id, int client);
/* What to poll: the worker, unless a message is held. Returns the poll timeout the relay needs:
 * RELAY_RETRY_MS while a message is held (a queue's shrinking wakes no poll), else -1. */
int relay_poll(const struct relay *r, struct pollfd *p);
/* After the poll: tries the held message again, or reads and routes one of the worker's. */
void relay_ready(struct relay *r, const struct pollfd *p);
/* The host is gone: its answers are dropped, its watches stopped. */
void relay_client_gone(struct relay *r, int client);
