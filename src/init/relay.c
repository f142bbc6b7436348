/* init's side of a files worker (relay.h). The worker is inside the sandbox like init, and what
 * it sends is checked before it is routed: a known request id or watch, an answer that fits the
 * request, fds only with FILE_OPENED. The host checks the rest (src/jail/files.c). */
#include "init/relay.h"

#include <errno.h>
#include <linux/sockios.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "proto/proto_files.h"

void relay_init(struct relay *r, int fd, const int *clients, size_t n_clients, uint32_t *next_id,
                void (*drop)(void *arg, int client), void *drop_arg)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->clients = clients;
    r->n_clients = n_clients;
    r->next_id = next_id;
    r->drop = drop;
    r->drop_arg = drop_arg;
    r->held_client = -1;
}

static void close_fds(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

static uint32_t new_id(struct relay *r)
{
    if (++*r->next_id == 0)
        ++*r->next_id;
    return *r->next_id;
}

static int client_fd(const struct relay *r, int client)
{
    return client >= 0 && (size_t)client < r->n_clients ? r->clients[client] : -1;
}

/* 1 sent, 0 the host cannot take it yet, -1 the host is gone (dropped). With room, only up to
 * RELAY_QUEUE_MAX bytes queued to the host. */
static int send_client(struct relay *r, int client, const uint8_t *buf, size_t len, const int *fds,
                       size_t n_fds, bool keep_room)
{
    int fd = client_fd(r, client);
    if (fd < 0)
        return -1;
    int queued = 0;
    if (keep_room && ioctl(fd, SIOCOUTQ, &queued) == 0 && (size_t)queued + len > RELAY_QUEUE_MAX)
        return 0;
    if (proto_send(fd, buf, len, fds, n_fds) == 0)
        return 1;
    if (errno == EAGAIN)
        return 0;
    r->drop(r->drop_arg, client);
    return -1;
}

/* A message of init's own to a host (an error, a watch's end): a host that cannot take it now
 * is dropped, as init does with every reply of its own. */
static void send_own(struct relay *r, int client, const uint8_t *buf, size_t len)
{
    if (len && send_client(r, client, buf, len, NULL, 0, false) == 0)
        r->drop(r->drop_arg, client);
}

static void release_held(struct relay *r)
{
    if (!r->held)
        return;
    close_fds(r->held_fds, r->held_n_fds);
    r->held = false;
    r->held_client = -1;
}

static ssize_t find_pending(const struct relay *r, uint32_t id)
{
    for (size_t i = 0; i < r->n_pending; i++)
        if (r->pending[i].id == id)
            return (ssize_t)i;
    return -1;
}

static ssize_t find_watch(const struct relay *r, uint32_t id)
{
    for (size_t i = 0; i < r->n_watches; i++)
        if (r->watches[i].id == id)
            return (ssize_t)i;
    return -1;
}

static void remove_watch(struct relay *r, size_t i)
{
    r->watches[i] = r->watches[--r->n_watches];
}

/* Tells the worker to close a watch no host has any more. Its answer matches no request and is
 * dropped; should the worker be too busy to take this now, the watch's next events (which no
 * host takes either) ask again. */
static void stop_at_worker(struct relay *r, uint32_t watch_id)
{
    uint8_t buf[64];
    struct proto_file_request stop = {.type = PROTO_WATCH_STOP, .watch_id = watch_id};
    size_t len = proto_encode_file_request(buf, sizeof buf, new_id(r), &stop);
    if (r->fd >= 0 && len)
        proto_send(r->fd, buf, len, NULL, 0);
}

bool relay_has_worker(const struct relay *r)
{
    return r->fd >= 0;
}

void relay_attach(struct relay *r, int fd)
{
    if (fd >= 0 && r->fd < 0)
        r->fd = fd;
}

int relay_forward(struct relay *r, int client, uint8_t *msg, size_t len, const struct proto_msg *m,
                  err_t *err)
{
    if (r->fd < 0)
        return err_set(err, EIO, "the sandbox's files worker is gone");
    if (r->n_pending == RELAY_MAX_PENDING)
        return err_set(err, EAGAIN, "too many file requests at once in this sandbox");
    uint32_t id = new_id(r), client_id = m->request_id;
    memcpy(msg + 8, &id, 4); /* the request id the worker answers with */
    int rc = proto_send(r->fd, msg, len, NULL, 0);
    if (rc < 0)
        return err_set(err, errno == EAGAIN ? EAGAIN : EIO, "the sandbox's files worker %s",
                       errno == EAGAIN ? "is busy" : "is gone");
    r->pending[r->n_pending++] = (struct relay_pending){id, client, client_id, m->type};
    uint32_t watch_id;
    ssize_t w;
    /* From now on the watch's events are nobody's: dropped. */
    if (m->type == PROTO_WATCH_STOP && proto_get_u32(m, PROTO_T_WATCH_ID, &watch_id, NULL) == 0 &&
        (w = find_watch(r, watch_id)) >= 0)
        remove_watch(r, (size_t)w);
    return 0;
}

bool relay_has_watch(const struct relay *r, uint32_t watch_id, int client)
{
    ssize_t i = find_watch(r, watch_id);
    return i >= 0 && r->watches[i].client == client;
}

int relay_poll(const struct relay *r, struct pollfd *p)
{
    *p = (struct pollfd){.fd = r->held ? -1 : r->fd, .events = POLLIN};
    return r->held ? RELAY_RETRY_MS : -1;
}

/* Sends r->buf[0..len) with fds to client, or holds it until the host can take it. */
static void deliver(struct relay *r, int client, size_t len, int *fds, size_t n_fds)
{
    int rc = send_client(r, client, r->buf, len, fds, n_fds, true);
    if (rc == 0) {
        r->held = true;
        r->held_client = client;
        r->held_len = len;
        memcpy(r->held_fds, fds, n_fds * sizeof *fds);
        r->held_n_fds = n_fds;
        return;
    }
    close_fds(fds, n_fds); /* the host has its own copies, or is gone */
}

/* The worker is gone: every request waiting for it fails, every watch ends. */
static void worker_gone(struct relay *r)
{
    close(r->fd);
    r->fd = -1;
    /* Copied out first: a host dropped on the way changes the tables. */
    struct relay_pending pending[RELAY_MAX_PENDING];
    struct relay_watch watches[RELAY_MAX_WATCHES];
    size_t n_pending = r->n_pending, n_watches = r->n_watches;
    memcpy(pending, r->pending, sizeof pending);
    memcpy(watches, r->watches, sizeof watches);
    r->n_pending = r->n_watches = 0;
    static const char gone[] = "the sandbox's files worker is gone";
    uint8_t buf[256];
    for (size_t i = 0; i < n_pending; i++)
        send_own(r, pending[i].client, buf,
                 proto_encode_error(buf, sizeof buf, pending[i].client_id, EIO, gone));
    for (size_t i = 0; i < n_watches; i++) {
        struct proto_writer w;
        proto_begin(&w, buf, sizeof buf, PROTO_WATCH_ENDED, 0, 0);
        proto_put_u32(&w, PROTO_T_WATCH_ID, watches[i].id);
        proto_put_u32(&w, PROTO_T_ERRNO, EIO);
        proto_put_str(&w, PROTO_T_MESSAGE, gone);
        send_own(r, watches[i].client, buf, proto_finish(&w));
    }
}

/* Whether type answers a request of type req, with n_fds fds. */
static bool answers(enum proto_type type, enum proto_type req, size_t n_fds)
{
    if (type == PROTO_FILE_OPENED)
        return n_fds == 1 && (req == PROTO_FILE_READ || req == PROTO_FILE_WRITE);
    if (n_fds)
        return false;
    return type == PROTO_OK || type == PROTO_ERROR ||
           (type == PROTO_FILE_INFO && req == PROTO_FILE_STAT) ||
           (type == PROTO_FILE_LIST_REPLY && req == PROTO_FILE_LIST);
}

/* Routes a watch's message (request id 0) to the host that started the watch: -1 for none. */
static int route_watch(struct relay *r, const struct proto_msg *m, size_t n_fds)
{
    uint32_t watch_id;
    if (n_fds || m->request_id != 0 || proto_get_u32(m, PROTO_T_WATCH_ID, &watch_id, NULL) < 0)
        return -1;
    ssize_t i = find_watch(r, watch_id);
    if (i < 0) {
        stop_at_worker(r, watch_id); /* its host went, or it was being stopped */
        return -1;
    }
    int client = r->watches[i].client;
    if (m->type == PROTO_WATCH_ENDED)
        remove_watch(r, (size_t)i);
    return client;
}

/* Routes an answer to the host that asked, under its own request id: -1 for none. */
static int route_answer(struct relay *r, const struct proto_msg *m, size_t n_fds)
{
    ssize_t i = find_pending(r, m->request_id);
    if (i < 0)
        return -1;
    struct relay_pending p = r->pending[i];
    uint32_t more = 0;
    if (m->type == PROTO_FILE_LIST_REPLY)
        proto_get_u32(m, PROTO_T_MORE, &more, NULL);
    if (!more)
        r->pending[i] = r->pending[--r->n_pending];
    if (!answers(m->type, p.type, n_fds)) {
        /* The host hears that the request failed, whatever the worker meant. */
        uint8_t buf[256];
        send_own(r, p.client, buf,
                 proto_encode_error(buf, sizeof buf, p.client_id, EIO,
                                    "the sandbox's files worker answered out of turn"));
        if (more)
            r->pending[i] = r->pending[--r->n_pending];
        return -1;
    }
    if (p.type == PROTO_WATCH_START && m->type == PROTO_OK) {
        if (p.client < 0 || r->n_watches == RELAY_MAX_WATCHES)
            stop_at_worker(r, p.id);
        else
            r->watches[r->n_watches++] = (struct relay_watch){p.id, p.client};
    }
    memcpy(r->buf + 8, &p.client_id, 4);
    return p.client;
}

static void read_one(struct relay *r)
{
    int fds[PROTO_MAX_FDS];
    size_t n_fds = 0;
    ssize_t n = proto_recv(r->fd, r->buf, sizeof r->buf, fds, PROTO_MAX_FDS, &n_fds);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n == 0 || (n < 0 && errno != EBADMSG && errno != EMSGSIZE)) {
        worker_gone(r);
        return;
    }
    if (n < 0)
        return; /* a malformed datagram: dropped, its fds closed */
    struct proto_msg m;
    err_t err;
    int client = -1;
    if (proto_parse(r->buf, (size_t)n, &m, &err) == 0)
        client = m.type == PROTO_WATCH_EVENTS || m.type == PROTO_WATCH_ENDED
                     ? route_watch(r, &m, n_fds)
                     : route_answer(r, &m, n_fds);
    if (client < 0 || client_fd(r, client) < 0) {
        close_fds(fds, n_fds);
        return;
    }
    deliver(r, client, (size_t)n, fds, n_fds);
}

void relay_ready(struct relay *r, const struct pollfd *p)
{
    if (r->held) {
        int rc =
            send_client(r, r->held_client, r->buf, r->held_len, r->held_fds, r->held_n_fds, true);
        if (rc != 0)
            release_held(r); /* sent (the host has its copies), or the host is gone */
        return;              /* p was not polled (held): the worker is read on the next round */
    }
    if (p->revents && r->fd >= 0)
        read_one(r);
}

void relay_client_gone(struct relay *r, int client)
{
    for (size_t i = 0; i < r->n_pending; i++)
        if (r->pending[i].client == client)
            r->pending[i].client = -1;
    for (size_t i = 0; i < r->n_watches;) {
        if (r->watches[i].client == client) {
            stop_at_worker(r, r->watches[i].id);
            remove_watch(r, i);
        } else {
            i++;
        }
    }
    if (r->held && r->held_client == client)
        release_held(r);
}
