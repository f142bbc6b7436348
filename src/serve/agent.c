/* Dispatching init's messages to whoever waits for them (agent.h). */
#include "serve/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/strfmt.h"

#define AGENT_MAX_PENDING 4096 /* requests in flight per sandbox */
#define AGENT_MAX_SUBS    4096
#define AGENT_MAX_BATCH   64 /* messages read per wake-up, so one sandbox cannot hold the loop */

struct agent_pending {
    uint32_t request_id;
    agent_fn fn;
    void *user;
    struct agent_pending *next;
};

struct agent_sub {
    enum agent_sub_kind kind;
    uint32_t id;
    agent_fn fn;
    void *user;
    struct agent_sub *next;
};

static struct jail_agent_msg msg; /* about 120 KiB: one for the daemon, which has one thread */

uint32_t agent_next_id(struct sbx *sb)
{
    uint32_t id = sb->next_request++;
    if (sb->next_request == 0)
        sb->next_request = 1;
    return id;
}

static size_t count_pending(const struct agent_pending *p)
{
    size_t n = 0;
    for (; p; p = p->next)
        n++;
    return n;
}

int agent_expect(struct sbx *sb, uint32_t request_id, agent_fn fn, void *user, err_t *err)
{
    if (count_pending(sb->pending) >= AGENT_MAX_PENDING)
        return err_set(err, EAGAIN, "sandbox %s: %d requests in flight already", sb->id,
                       AGENT_MAX_PENDING);
    struct agent_pending *p = malloc(sizeof *p);
    if (!p)
        return err_set(err, ENOMEM, "sandbox %s", sb->id);
    *p = (struct agent_pending){request_id, fn, user, sb->pending};
    sb->pending = p;
    return 0;
}

int agent_subscribe(struct sbx *sb, enum agent_sub_kind kind, uint32_t id, agent_fn fn, void *user,
                    err_t *err)
{
    size_t n = 0;
    for (struct agent_sub *s = sb->subs; s; s = s->next)
        n++;
    if (n >= AGENT_MAX_SUBS)
        return err_set(err, EAGAIN, "sandbox %s: too many subscriptions", sb->id);
    struct agent_sub *s = malloc(sizeof *s);
    if (!s)
        return err_set(err, ENOMEM, "sandbox %s", sb->id);
    *s = (struct agent_sub){kind, id, fn, user, sb->subs};
    sb->subs = s;
    return 0;
}

void agent_cancel(struct sbx *sb, void *user)
{
    for (struct agent_pending **p = &sb->pending; *p;) {
        struct agent_pending *q = *p;
        if (q->user == user) {
            *p = q->next;
            free(q);
        } else {
            p = &q->next;
        }
    }
    for (struct agent_sub **p = &sb->subs; *p;) {
        struct agent_sub *q = *p;
        if (q->user == user) {
            *p = q->next;
            free(q);
        } else {
            p = &q->next;
        }
    }
}

void agent_unsubscribe(struct sbx *sb, enum agent_sub_kind kind, uint32_t id)
{
    for (struct agent_sub **p = &sb->subs; *p; p = &(*p)->next)
        if ((*p)->kind == kind && (*p)->id == id) {
            struct agent_sub *q = *p;
            *p = q->next;
            free(q);
            return;
        }
}

void agent_fail_all(struct sbx *sb, const char *why)
{
    /* taken off the sandbox first: a callback may start (and fail) new requests */
    struct agent_pending *p = sb->pending;
    struct agent_sub *s = sb->subs;
    sb->pending = NULL;
    sb->subs = NULL;
    while (p) {
        struct agent_pending *next = p->next;
        p->fn(sb, NULL, why, p->user);
        free(p);
        p = next;
    }
    while (s) {
        struct agent_sub *next = s->next;
        s->fn(sb, NULL, why, s->user);
        free(s);
        s = next;
    }
}

static void close_msg_fds(struct jail_agent_msg *m)
{
    for (size_t i = 0; i < 4; i++)
        if (m->fds[i] >= 0) {
            close(m->fds[i]);
            m->fds[i] = -1;
        }
    if (m->files.fd >= 0) {
        close(m->files.fd);
        m->files.fd = -1;
    }
}

static bool chunk_follows(const struct jail_agent_msg *m)
{
    return (m->type == PROTO_LIST_REPLY || m->type == PROTO_FILE_LIST_REPLY) && m->more;
}

static void dispatch(struct sbx *sb, struct jail_agent_msg *m)
{
    if (m->type == PROTO_EXITED || m->type == PROTO_WATCH_EVENTS || m->type == PROTO_WATCH_ENDED) {
        enum agent_sub_kind kind = m->type == PROTO_EXITED ? AGENT_SUB_EXITED : AGENT_SUB_WATCH;
        uint32_t id = kind == AGENT_SUB_EXITED ? m->command.cmd_id : m->files.watch_id;
        for (struct agent_sub *s = sb->subs; s; s = s->next)
            if (s->kind == kind && s->id == id) {
                agent_fn fn = s->fn;
                void *user = s->user;
                if (m->type != PROTO_WATCH_EVENTS) /* the last one it gets */
                    agent_unsubscribe(sb, kind, id);
                fn(sb, m, NULL, user);
                return;
            }
        return; /* nobody listens (a command whose caller went): dropped */
    }
    for (struct agent_pending **p = &sb->pending; *p; p = &(*p)->next)
        if ((*p)->request_id == m->request_id) {
            struct agent_pending *q = *p;
            agent_fn fn = q->fn;
            void *user = q->user;
            if (!chunk_follows(m)) {
                *p = q->next;
                free(q);
            }
            fn(sb, m, NULL, user);
            return;
        }
}

static void on_readable(uv_poll_t *poll, int status, int events)
{
    struct sbx *sb = poll->data;
    for (int i = 0; i < AGENT_MAX_BATCH && !sb->killing && !sb->gone; i++) {
        err_t err;
        int rc = jail_agent_recv(&sb->jail, &msg, &err);
        if (rc == 0)
            return;
        if (rc < 0) {
            if (err.errnum != EPIPE) {
                /* a malformed message: init is not to be believed any more */
                fprintf(stderr, "hutch serve: %s: init: %s\n", sb->id, err.msg);
            }
            uv_poll_stop(poll);
            sb->ctl_polling = false;
            char why[STORE_REASON_MAX + 1] = "";
            strfmt_text_append(
                why, sizeof why, "its init %s: %s",
                err.errnum == EPIPE ? "closed its channel" : "sent a malformed message", err.msg);
            agent_fail_all(sb, why);
            sbx_kill(sb, why, NULL, NULL);
            return;
        }
        dispatch(sb, &msg);
        close_msg_fds(&msg);
    }
}

void agent_attach(struct sbx *sb)
{
    if (sb->ctl_poll.data != sb) {
        if (uv_poll_init(sb->d->loop, &sb->ctl_poll, sb->jail.control_fd) < 0)
            return;
        sb->ctl_poll.data = sb;
        sb->open_handles++;
    }
    sb->ctl_polling = true;
    uv_poll_start(&sb->ctl_poll, UV_READABLE, on_readable);
}
