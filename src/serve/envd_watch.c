/* envd's directory watching over Connect JSON (envd_watch.h): WatchDir, a server stream of a
 * directory's events, and the watchers of CreateWatcher / GetWatcherEvents / RemoveWatcher,
 * which buffer them in the daemon until they are asked for. Both stand on one watch of init's
 * files worker for the user who asked (WATCH_START; src/init/README.md, "Watches"), whose
 * WATCH_EVENTS carry absolute paths that are made relative to the watched directory here.
 *
 * Lifetimes. A watch (struct swatch) is owned by the stream that follows it, or by its
 * sandbox's list of watchers. WATCH_START's answer brings the watch's id, which WATCH_STOP
 * needs: a watch whose owner goes while the answer is on its way is an orphan, freed (and
 * stopped in init) when the answer comes. A sandbox that dies fails every expectation and
 * subscription (agent.c), which ends the streams; its watchers are freed with it
 * (envd_watch_release_all). A daemon restart loses every watcher: init ends the watches of a
 * connection that closed. */
#include "serve/envd_watch.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/connect_rpc.h"
#include "api/envd_files.h"
#include "files/files.h"
#include "serve/agent.h"
#include "serve/envd_routes.h"

/* Keepalive frames every this many seconds unless the client asks otherwise
 * (Keepalive-Ping-Interval; the SDK asks 50), within these bounds, as envd_process.c. */
#define KEEPALIVE_DEFAULT_S 90
#define KEEPALIVE_MAX_S     3600

struct wcall;

struct wevent {
    uint32_t kind;
    char *name;
    json_t *entry; /* includeEntry: the file's EntryInfo, when init sent it */
};

struct swatch {
    struct serve *d;
    struct sbx *sb; /* use through live_sb: the sandbox may be gone */
    char sandbox_id[STORE_ID_MAX + 1];
    char id[24];       /* a watcher's id ("w" and hex); "" for a stream's watch */
    uint32_t watch_id; /* init's, from WATCH_START's answer; 0 before */
    bool starting;     /* WATCH_START sent, its answer not in yet */
    bool running;      /* subscribed to its events; WATCH_STOP ends it in init */
    bool orphan;       /* its owner went while starting: freed when the answer comes */
    bool listed;       /* in the sandbox's watchers */
    bool as_root, recursive, include_entry;
    bool failed; /* it broke (overflow, WATCH_ENDED, the sandbox went): code and message say how */
    enum connect_code code;
    char message[256];
    size_t base_len;
    char base[PATH_MAX];
    /* a watcher's events until GetWatcherEvents, or a stream's while its client is behind */
    struct wevent *ring;
    size_t head, count;
    struct wcall *call; /* the stream it feeds, or the CreateWatcher waiting for it; or NULL */
    struct swatch *next;
};

/* One HTTP exchange: a WatchDir stream or one unary watcher call. */
struct wcall {
    struct serve *d;
    struct http_exchange *x; /* NULL once it ended */
    char sandbox_id[STORE_ID_MAX + 1];
    char method[32];
    bool as_root, stream, responded, finished, congested;
    struct connect_reader reader;
    char *body;
    size_t len;
    struct swatch *w;
    uv_timer_t timer;
    bool timer_open;
    uint64_t keepalive_ms, timeout_ms, deadline_ms, next_keepalive_ms;
};

static struct sbx *live_sb(struct serve *d, const char *id, struct sbx *sb)
{
    return sb && sbx_find(d, id) == sb && !sb->gone ? sb : NULL;
}

/* ---------- a watch ---------- */

static void send_stop(struct sbx *sb, uint32_t watch_id, bool as_root)
{
    if (sb->killing || sb->gone || !watch_id)
        return;
    /* Its OK matches no expectation and is dropped by agent.c. Should the send fail, init
     * still ends the watch when this connection closes. */
    struct proto_file_request r = {
        .type = PROTO_WATCH_STOP, .watch_id = watch_id, .as_root = as_root};
    err_t err;
    if (jail_files_request(&sb->jail, agent_next_id(sb), &r, &err) < 0)
        fprintf(stderr, "hutch serve: %s: stopping watch %u: %s\n", sb->id, watch_id, err.msg);
}

static void wevent_clear(struct wevent *e)
{
    free(e->name);
    json_decref(e->entry);
    *e = (struct wevent){0};
}

static void ring_clear(struct swatch *w)
{
    for (size_t i = 0; i < w->count; i++)
        wevent_clear(&w->ring[(w->head + i) % WATCHER_MAX_EVENTS]);
    w->head = w->count = 0;
}

/* Appends an event (name copied, a reference to entry taken); a full ring drops its oldest.
 * -1: no memory. */
static int ring_push(struct swatch *w, uint32_t kind, const char *name, json_t *entry)
{
    if (!w->ring && !(w->ring = calloc(WATCHER_MAX_EVENTS, sizeof *w->ring)))
        return -1;
    char *copy = strdup(name);
    if (!copy)
        return -1;
    if (w->count == WATCHER_MAX_EVENTS) {
        wevent_clear(&w->ring[w->head]);
        w->head = (w->head + 1) % WATCHER_MAX_EVENTS;
        w->count--;
    }
    w->ring[(w->head + w->count) % WATCHER_MAX_EVENTS] =
        (struct wevent){kind, copy, json_incref(entry)};
    w->count++;
    return 0;
}

static void watch_free(struct swatch *w)
{
    struct sbx *sb = live_sb(w->d, w->sandbox_id, w->sb);
    if (sb) {
        if (w->running) {
            agent_unsubscribe(sb, AGENT_SUB_WATCH, w->watch_id);
            send_stop(sb, w->watch_id, w->as_root);
        }
        agent_cancel(sb, w);
    }
    if (w->listed) /* then w->sb is still there: envd_watch_release_all empties the list */
        for (struct swatch **p = &w->sb->watchers; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                w->sb->n_watchers--;
                break;
            }
    ring_clear(w);
    free(w->ring);
    free(w);
}

/* The owner lets go of w: freed now, or (starting) once WATCH_START's answer is in. */
static void watch_drop(struct swatch *w)
{
    w->call = NULL;
    if (w->starting)
        w->orphan = true;
    else
        watch_free(w);
}

void envd_watch_release_all(struct sbx *sb)
{
    /* Every expectation and subscription failed already (agent_fail_all): no callback of
     * these comes any more, and init's watches end with the sandbox. */
    while (sb->watchers) {
        struct swatch *w = sb->watchers;
        sb->watchers = w->next;
        if (w->call)
            w->call->w = NULL;
        ring_clear(w);
        free(w->ring);
        free(w);
    }
    sb->n_watchers = 0;
}

/* ---------- answers ---------- */

static void unary_json(struct wcall *c, int status, const char *json)
{
    static const struct http_header h[] = {{"Content-Type", "application/json"}};
    if (c->x && !c->responded) {
        c->responded = true;
        http_respond(c->x, status, h, 1, json, strlen(json));
    }
}

static void unary_error(struct wcall *c, enum connect_code code, const char *message)
{
    char *json = connect_error_json(code, message);
    if (json)
        unary_json(c, connect_code_http_status(code), json);
    else if (c->x && !c->responded) {
        c->responded = true;
        http_respond_error(c->x, 500, "out of memory");
    }
    free(json);
}

static void stream_open(struct wcall *c)
{
    static const struct http_header h[] = {{"Content-Type", "application/connect+json"}};
    if (c->x && !c->responded) {
        c->responded = true;
        http_respond_start(c->x, 200, h, 1, -1);
    }
}

/* One frame; its JSON is freed. -1 when it could not go (the call is gone, no memory). */
static int stream_frame(struct wcall *c, char *json)
{
    int rc = -1;
    uint8_t *frame;
    size_t n;
    if (json && c->x && !c->finished) {
        stream_open(c);
        if (connect_envelope(0, json, strlen(json), &frame, &n) == 0) {
            rc = http_respond_write(c->x, frame, n);
            free(frame);
            if (rc == 1)
                c->congested = true;
            rc = rc < 0 ? -1 : 0;
        }
    }
    free(json);
    return rc;
}

/* The stream's end: its watch let go, the end-of-stream frame (an error when code). */
static void stream_finish(struct wcall *c, const enum connect_code *code, const char *message)
{
    if (c->w) {
        struct swatch *w = c->w;
        c->w = NULL;
        watch_drop(w);
    }
    if (c->timer_open)
        uv_timer_stop(&c->timer);
    if (!c->x || c->finished)
        return;
    c->finished = true;
    stream_open(c);
    uint8_t *frame;
    size_t n;
    if (connect_end_stream(code, message, &frame, &n) == 0) {
        http_respond_write(c->x, frame, n);
        free(frame);
    }
    http_respond_end(c->x);
}

static void stream_fail(struct wcall *c, enum connect_code code, const char *message)
{
    stream_finish(c, &code, message);
}

/* ---------- keepalives and the deadline (Connect-Timeout-Ms) ---------- */

static void timer_arm(struct wcall *c);

static void timer_fired(uv_timer_t *t)
{
    struct wcall *c = t->data;
    if (!c->x || c->finished)
        return;
    uint64_t now = uv_now(t->loop);
    if (c->deadline_ms && now >= c->deadline_ms) {
        stream_fail(c, CONNECT_DEADLINE_EXCEEDED, "the request's Connect-Timeout-Ms passed");
        return;
    }
    if (now >= c->next_keepalive_ms) {
        stream_frame(c, envd_watch_keepalive());
        c->next_keepalive_ms = now + c->keepalive_ms;
    }
    timer_arm(c);
}

static void timer_arm(struct wcall *c)
{
    if (!c->timer_open || c->finished)
        return;
    uint64_t now = uv_now(c->timer.loop);
    uint64_t at = c->next_keepalive_ms;
    if (c->deadline_ms && c->deadline_ms < at)
        at = c->deadline_ms;
    uv_timer_start(&c->timer, timer_fired, at > now ? at - now : 0, 0);
}

/* A header of decimal digits only (at most 10, as Connect's timeout header is), or -1. */
static int64_t header_number(const char *v)
{
    if (!v || !v[0] || strlen(v) > 10)
        return -1;
    int64_t n = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        n = n * 10 + (*p - '0');
    }
    return n;
}

/* ---------- events ---------- */

/* path (absolute, from init) relative to the watched directory, "." for the directory itself;
 * NULL for a path outside it, which init has no business sending. */
static const char *relative_name(const struct swatch *w, const char *path)
{
    if (strncmp(path, w->base, w->base_len) != 0)
        return NULL;
    const char *rest = path + w->base_len;
    if (!rest[0])
        return ".";
    if (w->base_len == 1) /* the base is "/" */
        return rest;
    return rest[0] == '/' && rest[1] ? rest + 1 : NULL;
}

/* A stream's queued events, while its client takes them. */
static void stream_flush(struct wcall *c)
{
    struct swatch *w = c->w;
    while (w && w->count && !c->congested && !c->finished) {
        struct wevent *e = &w->ring[w->head];
        int rc = stream_frame(c, envd_watch_event(e->kind, e->name, e->entry));
        wevent_clear(e);
        w->head = (w->head + 1) % WATCHER_MAX_EVENTS;
        w->count--;
        if (rc < 0)
            return;
    }
}

static void watch_failed(struct swatch *w, enum connect_code code, const char *message)
{
    if (!w->failed) {
        w->failed = true;
        w->code = code;
        snprintf(w->message, sizeof w->message, "%s", message);
    }
    struct wcall *c = w->call;
    if (c && c->stream)
        stream_fail(c, code, message); /* frees w (stream_finish drops it) */
}

/* -1 when w failed (and a stream's w is freed already). */
static int deliver(struct swatch *w, uint32_t kind, const char *name, json_t *entry)
{
    struct wcall *c = w->call;
    if (c && c->stream) {
        if (!c->congested && !w->count) {
            if (stream_frame(c, envd_watch_event(kind, name, entry)) == 0)
                c->next_keepalive_ms = uv_now(c->timer.loop) + c->keepalive_ms;
            return 0;
        }
        if (w->count == WATCHER_MAX_EVENTS) {
            watch_failed(w, CONNECT_RESOURCE_EXHAUSTED,
                         "the client takes the events slower than they come: more than 4096 "
                         "are waiting");
            return -1;
        }
    }
    if (ring_push(w, kind, name, entry) < 0) {
        watch_failed(w, CONNECT_RESOURCE_EXHAUSTED, "out of memory for the watch's events");
        return -1;
    }
    return 0;
}

/* init's messages for a running watch: WATCH_EVENTS, its last one WATCH_ENDED, or NULL when the
 * sandbox (or init's channel) went. */
static void on_watch_message(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct swatch *w = user;
    if (!m || m->type == PROTO_WATCH_ENDED) {
        w->running = false; /* unsubscribed by agent.c */
        if (!m)
            watch_failed(w, CONNECT_UNAVAILABLE, why ? why : "the sandbox is gone");
        else
            watch_failed(w, m->errnum ? connect_code_from_errno(m->errnum) : CONNECT_INTERNAL,
                         m->message[0] ? m->message : "the watch ended");
        return;
    }
    if (m->type != PROTO_WATCH_EVENTS || w->failed)
        return;
    for (size_t i = 0; i < m->files.n_events; i++) {
        const struct proto_watch_event *e = &m->files.events[i];
        if (e->kind == PROTO_WATCH_OVERFLOW) {
            /* as fsnotify's overflow error ends envd's watch: events were lost */
            agent_unsubscribe(sb, AGENT_SUB_WATCH, w->watch_id);
            send_stop(sb, w->watch_id, w->as_root);
            w->running = false;
            watch_failed(w, CONNECT_INTERNAL,
                         "the sandbox's event queue overflowed: events were lost");
            return;
        }
        const char *name = e->path ? relative_name(w, e->path) : NULL;
        if (!name || e->kind >= PROTO_WATCH_OVERFLOW)
            continue;
        /* without memory for it, the event goes without its entry rather than not at all */
        json_t *entry = w->include_entry && e->has_file ? envd_entry_object(&e->file) : NULL;
        int rc = deliver(w, e->kind, name, entry);
        json_decref(entry);
        if (rc < 0)
            return;
    }
}

/* ---------- starting a watch ---------- */

static void start_failed(struct swatch *w, enum connect_code code, const char *message)
{
    struct wcall *c = w->call;
    w->call = NULL;
    if (c) {
        c->w = NULL;
        if (c->stream)
            stream_fail(c, code, message);
        else
            unary_error(c, code, message);
    }
    watch_free(w);
}

static void on_start_reply(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct swatch *w = user;
    w->starting = false;
    uint32_t watch_id = m && m->type == PROTO_OK ? m->files.watch_id : 0;
    if (w->orphan) {
        send_stop(sb, watch_id, w->as_root);
        watch_free(w);
        return;
    }
    if (!m) {
        start_failed(w, CONNECT_UNAVAILABLE, why ? why : "the sandbox is gone");
        return;
    }
    if (m->type == PROTO_ERROR) {
        start_failed(w, connect_code_from_errno(m->errnum), m->message);
        return;
    }
    err_t err;
    if (!watch_id) {
        start_failed(w, CONNECT_INTERNAL, "unexpected answer from the sandbox");
        return;
    }
    if (agent_subscribe(sb, AGENT_SUB_WATCH, watch_id, on_watch_message, w, &err) < 0) {
        send_stop(sb, watch_id, w->as_root);
        start_failed(w, CONNECT_RESOURCE_EXHAUSTED, err.msg);
        return;
    }
    w->watch_id = watch_id;
    w->running = true;
    struct wcall *c = w->call;
    if (c && c->stream) {
        stream_frame(c, envd_watch_start());
        uint64_t now = uv_now(c->timer.loop);
        c->next_keepalive_ms = now + c->keepalive_ms;
        if (c->timeout_ms)
            c->deadline_ms = now + c->timeout_ms;
        timer_arm(c);
    } else if (c) {
        char *json = envd_watcher_created(w->id);
        if (json)
            unary_json(c, 200, json);
        else
            unary_error(c, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        free(json);
        w->call = NULL;
        c->w = NULL;
    }
}

static struct swatch *watcher_find(struct sbx *sb, const char *id)
{
    for (struct swatch *w = sb->watchers; w; w = w->next)
        if (!w->starting && strcmp(w->id, id) == 0)
            return w;
    return NULL;
}

static void watcher_new_id(struct sbx *sb, char out[24])
{
    do {
        uint64_t r;
        randombytes_buf(&r, sizeof r);
        snprintf(out, 24, "w%016llx", (unsigned long long)r);
    } while (watcher_find(sb, out));
}

/* WatchDir and CreateWatcher: the request parsed, the watch started in init. */
static void watch_begin(struct wcall *c, struct sbx *sb, const char *json)
{
    err_t err;
    struct envd_fs_request *q = calloc(1, sizeof *q);
    char *abs = malloc(ENVD_PATH_MAX + 1);
    struct swatch *w = calloc(1, sizeof *w);
    enum connect_code code = CONNECT_INVALID_ARGUMENT;
    const char *why = NULL;
    if (!q || !abs || !w) {
        code = CONNECT_RESOURCE_EXHAUSTED;
        why = "out of memory";
    } else if (envd_fs_request_parse(ENVD_FS_WATCH_DIR, json, q, &err) < 0 ||
               envd_path_absolute(q->path, c->as_root, abs, &err) < 0 ||
               files_path_normalize(abs, strlen(abs), w->base, &err) < 0) {
        why = err.msg;
    } else if (!c->stream && sb->n_watchers >= WATCHERS_PER_SANDBOX) {
        code = CONNECT_RESOURCE_EXHAUSTED;
        why = "at most 64 watchers per sandbox: remove one first (RemoveWatcher)";
    }
    if (!why) {
        w->d = c->d;
        w->sb = sb;
        snprintf(w->sandbox_id, sizeof w->sandbox_id, "%s", sb->id);
        w->as_root = c->as_root;
        w->recursive = q->recursive;
        w->include_entry = q->include_entry;
        w->base_len = strlen(w->base);
        struct proto_file_request r = {.type = PROTO_WATCH_START,
                                       .path = w->base,
                                       .as_root = w->as_root,
                                       .recursive = w->recursive,
                                       .flags = w->include_entry ? PROTO_WATCH_ENTRIES : 0};
        uint32_t id = agent_next_id(sb);
        if (agent_expect(sb, id, on_start_reply, w, &err) < 0 ||
            jail_files_request(&sb->jail, id, &r, &err) < 0) {
            agent_cancel(sb, w);
            code = connect_code_from_errno(err.errnum ? err.errnum : EIO);
            if (err.errnum == EAGAIN)
                code = CONNECT_RESOURCE_EXHAUSTED;
            why = err.msg;
        }
    }
    if (why) {
        if (c->stream)
            stream_fail(c, code, why);
        else
            unary_error(c, code, why);
        free(w);
    } else {
        w->starting = true;
        w->call = c;
        c->w = w;
        if (!c->stream) {
            watcher_new_id(sb, w->id);
            w->listed = true;
            w->next = sb->watchers;
            sb->watchers = w;
            sb->n_watchers++;
        }
    }
    free(q);
    free(abs);
}

/* GetWatcherEvents and RemoveWatcher. */
static void watcher_call(struct wcall *c, struct sbx *sb, const char *json)
{
    err_t err;
    char id[ENVD_WATCHER_ID_MAX + 1];
    if (envd_watcher_id_parse(json, id, &err) < 0) {
        unary_error(c, CONNECT_INVALID_ARGUMENT, err.msg);
        return;
    }
    struct swatch *w = watcher_find(sb, id);
    if (!w) {
        char why[ENVD_WATCHER_ID_MAX + 64];
        snprintf(why, sizeof why, "watcher with id %s not found", id);
        unary_error(c, CONNECT_NOT_FOUND, why);
        return;
    }
    if (strcmp(c->method, "RemoveWatcher") == 0) {
        watch_free(w);
        unary_json(c, 200, "{}");
        return;
    }
    if (!w->count && w->failed) { /* what came before it broke went out first */
        unary_error(c, w->code, w->message);
        return;
    }
    struct envd_watch_item *items = calloc(w->count + 1, sizeof *items);
    char *reply = NULL;
    if (items) {
        for (size_t i = 0; i < w->count; i++) {
            const struct wevent *e = &w->ring[(w->head + i) % WATCHER_MAX_EVENTS];
            items[i] = (struct envd_watch_item){e->kind, e->name, e->entry};
        }
        reply = envd_watcher_events_reply(items, w->count);
    }
    free(items);
    if (!reply) {
        unary_error(c, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    ring_clear(w);
    unary_json(c, 200, reply);
    free(reply);
}

/* ---------- the exchange ---------- */

static void call_freed(uv_handle_t *h)
{
    free(h->data);
}

static void on_exchange_end(struct http_exchange *x, void *user)
{
    struct wcall *c = user;
    c->x = NULL;
    if (c->w) { /* a stream whose client went, or a CreateWatcher not answered yet */
        struct swatch *w = c->w;
        c->w = NULL;
        watch_drop(w);
    }
    connect_reader_free(&c->reader);
    free(c->body);
    if (c->timer_open)
        uv_close((uv_handle_t *)&c->timer, call_freed);
    else
        free(c);
}

static void on_drain(struct http_exchange *x, void *user)
{
    struct wcall *c = user;
    c->congested = false;
    stream_flush(c);
}

static const struct http_exchange_callbacks call_callbacks = {
    .on_done = on_exchange_end, .on_abort = on_exchange_end, .on_drain = on_drain};

static int on_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    struct wcall *c = user;
    err_t err;
    if (c->stream) {
        if (connect_reader_feed(&c->reader, (const uint8_t *)data, len, &err) < 0) {
            unary_error(c, CONNECT_INVALID_ARGUMENT, err.msg);
            return -1;
        }
        return 0;
    }
    if (c->len + len > CONNECT_MAX_REQUEST) {
        unary_error(c, CONNECT_RESOURCE_EXHAUSTED, "request too large");
        return -1;
    }
    return http_body_append(&c->body, &c->len, data, len);
}

static void on_complete(struct http_exchange *x, void *user)
{
    struct wcall *c = user;
    struct sbx *sb = sbx_find(c->d, c->sandbox_id);
    if (!sb || sb->killing || sb->gone) {
        unary_error(c, CONNECT_NOT_FOUND, "the sandbox is gone");
        return;
    }
    if (c->stream && !c->reader.complete) {
        unary_error(c, CONNECT_INVALID_ARGUMENT, "the request's envelope is incomplete");
        return;
    }
    if (sb->state != SANDBOX_RUNNING) {
        if (c->stream)
            stream_fail(c, CONNECT_UNAVAILABLE, "the sandbox is not running");
        else
            unary_error(c, CONNECT_UNAVAILABLE, "the sandbox is not running");
        return;
    }
    const char *json = c->stream ? c->reader.message : c->body ? c->body : "{}";
    if (c->stream || strcmp(c->method, "CreateWatcher") == 0)
        watch_begin(c, sb, json);
    else
        watcher_call(c, sb, json);
}

static const struct http_body_callbacks body_callbacks = {on_data, on_complete};

bool envd_watch_handles(const char *method)
{
    return strcmp(method, "WatchDir") == 0 || strcmp(method, "CreateWatcher") == 0 ||
           strcmp(method, "GetWatcherEvents") == 0 || strcmp(method, "RemoveWatcher") == 0;
}

void envd_watch_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                      const struct http_request *req, const char *method)
{
    struct wcall *c = calloc(1, sizeof *c);
    if (!c) {
        http_respond_error(x, 500, "out of memory");
        return;
    }
    c->d = d;
    c->x = x;
    snprintf(c->sandbox_id, sizeof c->sandbox_id, "%s", sb->id);
    snprintf(c->method, sizeof c->method, "%s", method);
    c->stream = strcmp(method, "WatchDir") == 0;
    connect_reader_init(&c->reader, CONNECT_MAX_REQUEST);
    http_exchange_set_callbacks(x, &call_callbacks, c);
    if (c->stream) {
        if (uv_timer_init(d->loop, &c->timer) < 0) {
            unary_error(c, CONNECT_RESOURCE_EXHAUSTED, "no timer for the stream");
            return;
        }
        c->timer.data = c;
        c->timer_open = true;
        const char *timeout = http_request_header(req, "Connect-Timeout-Ms");
        int64_t timeout_ms = timeout ? header_number(timeout) : 0;
        if (timeout_ms < 0) {
            unary_error(c, CONNECT_INVALID_ARGUMENT,
                        "Connect-Timeout-Ms must be at most 10 decimal digits");
            return;
        }
        c->timeout_ms = (uint64_t)timeout_ms;
        int64_t keepalive_s = header_number(http_request_header(req, "Keepalive-Ping-Interval"));
        c->keepalive_ms =
            (uint64_t)(keepalive_s > 0 && keepalive_s <= KEEPALIVE_MAX_S ? keepalive_s
                                                                         : KEEPALIVE_DEFAULT_S) *
            1000u;
    }
    err_t err;
    if (auth_envd_user(http_request_header(req, "Authorization"), NULL, &c->as_root, &err) < 0) {
        unary_error(c, CONNECT_UNAUTHENTICATED, err.msg);
        return;
    }
    http_exchange_on_body(x, CONNECT_MAX_REQUEST + CONNECT_ENVELOPE_HEADER, &body_callbacks, c);
}
