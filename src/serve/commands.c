/* A sandbox's commands in the daemon (commands.h). */
#include "serve/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "serve/agent.h"
#include "util/strfmt.h"

#define SCMD_READ_CHUNK      (64u << 10)
#define SCMD_READS_PER_WAKE  4
#define SCMD_FINISH_RETRY_MS 5
#define SCMD_FINISH_TRIES    400 /* 2 s of a group whose members are still leaving */

static const char *const stream_names[3] = {"stdout", "stderr", "pty"};

struct scmd_chunk {
    unsigned stream;
    size_t len;
    struct scmd_chunk *next;
    uint8_t data[];
};

struct scmd_attach {
    const struct scmd_listener *l;
    void *user;
    struct scmd_attach *next;
};

/* A listener may detach itself (or another) from inside a callback: while the list is walked,
 * a detached entry is only marked (l NULL) and freed once the walk is over. */
static void dispatch_begin(struct scmd *c)
{
    c->dispatching++;
}

static void sweep_detached(struct scmd *c)
{
    for (struct scmd_attach **p = &c->attached; *p;) {
        struct scmd_attach *a = *p;
        if (a->l) {
            p = &a->next;
            continue;
        }
        *p = a->next;
        free(a);
    }
}

static void dispatch_end(struct scmd *c)
{
    if (--c->dispatching == 0)
        sweep_detached(c);
}

static char **copy_list(const char *const *list)
{
    size_t n = 0;
    while (list && list[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(list[i]))) {
            for (size_t k = 0; k < i; k++)
                free(out[k]);
            free(out);
            return NULL;
        }
    return out;
}

void scmd_free_list(char **list)
{
    for (size_t i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}

/* Why it failed (cut with "..." if long: for the client's message). */
static void set_error(struct scmd *c, const char *why)
{
    c->error[0] = '\0';
    strfmt_text_append(c->error, sizeof c->error, "%s", why);
}

static void handle_closed(uv_handle_t *h)
{
    scmd_handle_closed(h->data);
}

void scmd_handle_closed(struct scmd *c)
{
    if (--c->open_handles > 0)
        return;
    while (c->replay) {
        struct scmd_chunk *next = c->replay->next;
        free(c->replay);
        c->replay = next;
    }
    scmd_free_list(c->argv);
    scmd_free_list(c->envp);
    free(c->cwd);
    free(c->tag);
    free(c);
}

static void stop_output(struct scmd *c, unsigned i)
{
    if (c->polling[i]) {
        uv_poll_stop(&c->poll[i]);
        c->polling[i] = false;
    }
    if (c->out_fd[i] >= 0) {
        uv_close((uv_handle_t *)&c->poll[i], handle_closed);
        close(c->out_fd[i]);
        c->out_fd[i] = -1;
    }
}

/* Out of the sandbox's list; every handle closed; freed once they are. */
static void scmd_free(struct scmd *c)
{
    for (struct scmd **p = &c->sb->cmds; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    for (unsigned i = 0; i < 3; i++)
        stop_output(c, i);
    scmd_input_release(c);
    scmd_record_close(c); /* kept: a daemon after this one adopts the command by it */
    if (c->stdin_fd >= 0)
        close(c->stdin_fd);
    c->stdin_fd = -1;
    while (c->attached) {
        struct scmd_attach *next = c->attached->next;
        free(c->attached);
        c->attached = next;
    }
    uv_close((uv_handle_t *)&c->finish_timer, handle_closed);
}

/* Tells every listener it ended and drops them. */
static void notify_end(struct scmd *c)
{
    struct scmd_attach *a = c->attached;
    c->attached = NULL;
    while (a) {
        struct scmd_attach *next = a->next;
        if (a->l && a->l->on_end)
            a->l->on_end(c, a->user);
        free(a);
        a = next;
    }
}

/* ---------- the end ---------- */

static void log_end(struct scmd *c, const struct verdict_usage *u)
{
    char detail[512];
    uint64_t ms = (jail_now_ns() - c->start_ns) / 1000000u;
    snprintf(detail, sizeof detail,
             "{\"pid\":%u,\"exitCode\":%d,\"signal\":%d,\"durationMs\":%llu,\"cpuNs\":%llu,"
             "\"memoryPeakBytes\":%llu,\"oomKills\":%llu}",
             c->pid, (int)c->exit_code, c->signo, (unsigned long long)ms,
             (unsigned long long)(u ? u->cpu_ns : 0),
             (unsigned long long)(u ? u->memory_peak_bytes : 0),
             (unsigned long long)(u ? u->oom_kills : 0));
    err_t err;
    if (store_event_add(c->sb->d->store, c->sb->id, "command_ended", detail, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", c->sb->id, err.msg);
}

static void try_finish(uv_timer_t *t);

/* The start in the log, with its command line (its first 400 bytes, for people to read). */
static void log_start(struct scmd *c)
{
    char line[401] = "";
    size_t at = 0;
    for (size_t i = 0; c->argv && c->argv[i] && at < sizeof line - 1; i++)
        at += (size_t)snprintf(line + at, sizeof line - at, "%s%s", i ? " " : "", c->argv[i]);
    line[sizeof line - 1] = '\0';
    json_t *j =
        json_pack("{s:I, s:b, s:s}", "pid", (json_int_t)c->pid, "root", c->as_root, "cmd", line);
    if (!j) /* a line that is not UTF-8 (or cut inside a character) */
        j = json_pack("{s:I, s:b}", "pid", (json_int_t)c->pid, "root", c->as_root);
    char *detail = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    err_t err;
    if (store_event_add(c->sb->d->store, c->sb->id, "command_started", detail, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", c->sb->id, err.msg);
    free(detail);
}

/* Its group's counters read and the group removed (retried while members leave). */
static void finish_group(struct scmd *c)
{
    struct proto_command end = {
        .cmd_id = c->cmd_id, .exit_code = c->exit_code, .signal = (uint32_t)c->signo};
    struct verdict_facts facts = {0};
    struct verdict_usage usage = {0};
    err_t err;
    if (jail_command_finish(&c->sb->jail, c->group, &end, &facts, &usage, &err) < 0) {
        if (err.errnum == EBUSY && ++c->finish_tries < SCMD_FINISH_TRIES) {
            uv_timer_start(&c->finish_timer, try_finish, SCMD_FINISH_RETRY_MS, 0);
            return;
        }
        fprintf(stderr, "hutch serve: %s: command %u: %s\n", c->sb->id, c->pid, err.msg);
        log_end(c, NULL);
    } else {
        log_end(c, &usage);
    }
    scmd_free(c);
}

static void try_finish(uv_timer_t *t)
{
    finish_group(t->data);
}

static void maybe_end(struct scmd *c)
{
    if (c->ended || !c->exited || c->out_fd[0] >= 0 || c->out_fd[1] >= 0 || c->out_fd[2] >= 0)
        return;
    c->ended = true;
    uv_timer_stop(&c->finish_timer); /* its lifetime */
    scmd_record_remove(c);
    /* init's record of it, and its copies of the ends, go */
    err_t err;
    if (!c->error[0] && !c->sb->killing &&
        jail_agent_request(&c->sb->jail, PROTO_FORGET, agent_next_id(c->sb), c->cmd_id, 0, false,
                           &err) < 0)
        fprintf(stderr, "hutch serve: %s: forget command %u: %s\n", c->sb->id, c->pid, err.msg);
    notify_end(c);
    /* one that EXITED is a command init no longer tracks */
    agent_unsubscribe(c->sb, AGENT_SUB_EXITED, c->cmd_id);
    finish_group(c);
}

/* ---------- output ---------- */

void scmd_keep_for_replay(struct scmd *c, unsigned stream, const uint8_t *data, size_t len)
{
    struct scmd_chunk *k = malloc(sizeof *k + len);
    if (!k)
        return;
    k->stream = stream;
    k->len = len;
    k->next = NULL;
    memcpy(k->data, data, len);
    if (c->replay_tail)
        c->replay_tail->next = k;
    else
        c->replay = k;
    c->replay_tail = k;
    c->replay_bytes += len;
    while (c->replay_bytes > SCMD_REPLAY_MAX && c->replay != c->replay_tail) {
        struct scmd_chunk *old = c->replay;
        c->replay = old->next;
        c->replay_bytes -= old->len;
        free(old);
    }
}

static void on_output(uv_poll_t *p, int status, int events)
{
    struct scmd *c = p->data;
    unsigned i = (unsigned)(p - c->poll);
    static uint8_t buf[SCMD_READ_CHUNK];
    for (int n = 0; n < SCMD_READS_PER_WAKE && c->out_fd[i] >= 0; n++) {
        ssize_t r = read(c->out_fd[i], buf, sizeof buf);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (r <= 0) { /* EOF, or EIO from a pty whose last slave closed */
            stop_output(c, i);
            maybe_end(c);
            return;
        }
        scmd_keep_for_replay(c, i, buf, (size_t)r);
        scmd_record_output(c, i, buf, (size_t)r);
        dispatch_begin(c);
        for (struct scmd_attach *a = c->attached; a; a = a->next)
            if (a->l && a->l->on_output)
                a->l->on_output(c, stream_names[i], buf, (size_t)r, a->user);
        dispatch_end(c);
        if (c->holds)
            return;
    }
}

static void set_reading(struct scmd *c, bool on)
{
    for (unsigned i = 0; i < 3; i++) {
        if (c->out_fd[i] < 0 || c->polling[i] == on)
            continue;
        if (on)
            uv_poll_start(&c->poll[i], UV_READABLE | UV_DISCONNECT, on_output);
        else
            uv_poll_stop(&c->poll[i]);
        c->polling[i] = on;
    }
}

void scmd_hold(struct scmd *c, bool hold)
{
    if (hold)
        c->holds++;
    else if (c->holds)
        c->holds--;
    set_reading(c, c->holds == 0);
}

/* ---------- start ---------- */

static void on_exited(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct scmd *c = user;
    if (!m && c->sb->d->stopping && !c->sb->killing)
        return; /* it runs on: scmd_release_all keeps its record for the daemon after us */
    if (!m) {
        set_error(c, why);
        c->exited = true;
        c->exit_code = -1;
        for (unsigned i = 0; i < 3; i++)
            stop_output(c, i);
        maybe_end(c);
        return;
    }
    c->exited = true;
    c->exit_code = m->command.exit_code;
    c->signo = (int)m->command.signal;
    maybe_end(c);
}

static void on_spawn_reply(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct scmd *c = user;
    err_t err;
    if (!m || m->type != PROTO_SPAWN_REPLY) {
        set_error(c, !m                       ? why
                     : m->type == PROTO_ERROR ? m->message
                                              : "unexpected answer from init");
        struct verdict_facts facts = {0};
        struct verdict_usage usage = {0};
        jail_command_finish(&sb->jail, c->group, &(struct proto_command){0}, &facts, &usage, &err);
        c->ended = true;
        notify_end(c);
        scmd_free(c);
        return;
    }
    c->cmd_id = m->command.cmd_id;
    c->pid = m->command.pid;
    int fds[3] = {m->fds[0], m->fds[1], m->fds[3]};
    c->stdin_fd = m->fds[2];
    m->fds[0] = m->fds[1] = m->fds[2] = m->fds[3] = -1; /* ours now */
    if (c->stdin_fd >= 0)
        fcntl(c->stdin_fd, F_SETFL, fcntl(c->stdin_fd, F_GETFL) | O_NONBLOCK);
    for (unsigned i = 0; i < 3; i++) {
        if (fds[i] < 0)
            continue;
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        if (uv_poll_init(sb->d->loop, &c->poll[i], fds[i]) < 0) {
            close(fds[i]);
            continue;
        }
        c->poll[i].data = c;
        c->open_handles++;
        c->out_fd[i] = fds[i];
    }
    c->started = true;
    if (agent_subscribe(sb, AGENT_SUB_EXITED, c->cmd_id, on_exited, c, &err) < 0) {
        /* it runs, but its end would never be seen: kill it now */
        set_error(c, err.msg);
        jail_command_kill_tree(&sb->jail, c->group, &err);
    }
    if (!c->adopted) {
        log_start(c);
        scmd_record_start(c);
    }
    dispatch_begin(c);
    for (struct scmd_attach *a = c->attached; a; a = a->next)
        if (a->l && a->l->on_started)
            a->l->on_started(c, a->user);
    dispatch_end(c);
    set_reading(c, c->holds == 0);
    scmd_set_lifetime(c, c->lifetime_ms);
}

/* ---------- lifetime ---------- */

static void lifetime_over(uv_timer_t *t)
{
    struct scmd *c = t->data;
    err_t err;
    if (c->exited || c->ended)
        return;
    dispatch_begin(c);
    for (struct scmd_attach *a = c->attached; a; a = a->next)
        if (a->l && a->l->on_lifetime_over)
            a->l->on_lifetime_over(c, a->user);
    dispatch_end(c);
    if (jail_command_kill_tree(&c->sb->jail, c->group, &err) < 0)
        fprintf(stderr, "hutch serve: %s: command %u past its timeout: %s\n", c->sb->id, c->pid,
                err.msg);
}

void scmd_set_lifetime(struct scmd *c, uint64_t lifetime_ms)
{
    c->lifetime_ms = lifetime_ms;
    if (!c->started || c->exited || c->ended) /* armed when it starts */
        return;
    if (!lifetime_ms) {
        uv_timer_stop(&c->finish_timer);
        return;
    }
    uint64_t ran_ms = (jail_now_ns() - c->start_ns) / 1000000u;
    uv_timer_start(&c->finish_timer, lifetime_over, lifetime_ms > ran_ms ? lifetime_ms - ran_ms : 0,
                   0);
}

void scmd_pause_all(struct sbx *sb)
{
    for (struct scmd *c = sb->cmds; c; c = c->next)
        if (c->started && !c->exited && !c->ended && c->lifetime_ms)
            uv_timer_stop(&c->finish_timer);
}

void scmd_resume_all(struct sbx *sb, uint64_t paused_ns)
{
    for (struct scmd *c = sb->cmds; c; c = c->next) {
        if (!c->started || c->exited || c->ended)
            continue;
        c->start_ns += paused_ns; /* as if it had started later */
        c->start_wall_ms += (int64_t)(paused_ns / 1000000u);
        scmd_record_update(c);
        if (c->lifetime_ms)
            scmd_set_lifetime(c, c->lifetime_ms);
    }
}

struct scmd *scmd_start(struct sbx *sb, const struct jail_command_spec *spec,
                        const struct scmd_listener *l, void *user, err_t *err)
{
    struct scmd *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, ENOMEM, "command");
        return NULL;
    }
    c->sb = sb;
    c->out_fd[0] = c->out_fd[1] = c->out_fd[2] = c->stdin_fd = c->record_fd = -1;
    scmd_input_init(c);
    c->as_root = spec->as_root;
    c->argv = copy_list(spec->argv);
    c->envp = copy_list(spec->envp);
    c->cwd = spec->cwd ? strdup(spec->cwd) : NULL;
    c->tag = spec->tag ? strdup(spec->tag) : NULL;
    c->start_ns = jail_now_ns();
    c->start_wall_ms = sbx_wall_ms();
    if (!c->argv || !c->envp || (spec->cwd && !c->cwd) || (spec->tag && !c->tag)) {
        scmd_free_list(c->argv);
        scmd_free_list(c->envp);
        free(c->cwd);
        free(c->tag);
        free(c);
        err_set(err, ENOMEM, "command");
        return NULL;
    }
    uv_timer_init(sb->d->loop, &c->finish_timer);
    c->finish_timer.data = c;
    c->open_handles = 1;
    c->next = sb->cmds;
    sb->cmds = c;
    c->request_id = agent_next_id(sb);
    if (agent_expect(sb, c->request_id, on_spawn_reply, c, err) < 0 ||
        jail_command_start(&sb->jail, spec, c->request_id, c->group, err) < 0) {
        agent_cancel(sb, c);
        scmd_free(c);
        return NULL;
    }
    if (l && scmd_attach(c, l, user, err) < 0) {
        /* it starts anyway; nobody follows it */
    }
    return c;
}

/* ---------- attach ---------- */

int scmd_attach(struct scmd *c, const struct scmd_listener *l, void *user, err_t *err)
{
    struct scmd_attach *a = malloc(sizeof *a);
    if (!a)
        return err_set(err, ENOMEM, "attach");
    *a = (struct scmd_attach){l, user, c->attached};
    c->attached = a;
    if (!c->started)
        return 0;
    if (l->on_started)
        l->on_started(c, user);
    for (struct scmd_chunk *k = c->replay; k && l->on_output; k = k->next)
        l->on_output(c, stream_names[k->stream], k->data, k->len, user);
    return 0;
}

void scmd_detach(struct scmd *c, void *user)
{
    for (struct scmd_attach *a = c->attached; a; a = a->next)
        if (a->l && a->user == user) {
            a->l = NULL;
            a->user = NULL;
            if (!c->dispatching)
                sweep_detached(c);
            return;
        }
}

struct scmd *scmd_find(struct sbx *sb, uint32_t pid, const char *tag)
{
    for (struct scmd *c = sb->cmds; c; c = c->next) {
        if (!c->started || c->ended)
            continue;
        if (pid ? c->pid == pid : (tag && c->tag && strcmp(c->tag, tag) == 0))
            return c;
    }
    return NULL;
}

/* ---------- requests ---------- */

int scmd_signal(struct scmd *c, int signo, err_t *err)
{
    return scmd_signal_answered(c, signo, NULL, NULL, err) < 0 ? -1 : 0;
}

int scmd_answer_check(const struct jail_agent_msg *m, const char *why, err_t *err)
{
    if (!m)
        return err_set(err, EPIPE, "%s", why ? why : "the sandbox's init is gone");
    if (m->type == PROTO_ERROR)
        return err_set(err, m->errnum ? m->errnum : EIO, "%s", m->message);
    if (m->type != PROTO_OK)
        return err_set(err, EPROTO, "init answered with message type %d", (int)m->type);
    return 0;
}

int scmd_request_answered(struct scmd *c, enum proto_type type, uint32_t arg, bool group,
                          agent_fn fn, void *user, err_t *err)
{
    struct sbx *sb = c->sb;
    uint32_t id = agent_next_id(sb);
    if (fn && agent_expect(sb, id, fn, user, err) < 0)
        return -1;
    if (jail_agent_request(&sb->jail, type, id, c->cmd_id, arg, group, err) < 0) {
        if (fn)
            agent_cancel(sb, user);
        return -1;
    }
    return 0;
}

int scmd_signal_answered(struct scmd *c, int signo, agent_fn fn, void *user, err_t *err)
{
    if (signo == SIGKILL)
        return jail_command_kill_tree(&c->sb->jail, c->group, err) < 0 ? -1 : 1;
    return scmd_request_answered(c, PROTO_SIGNAL, (uint32_t)signo, true, fn, user, err);
}

int scmd_signal_leader(struct scmd *c, int signo, err_t *err)
{
    return jail_agent_request(&c->sb->jail, PROTO_SIGNAL, agent_next_id(c->sb), c->cmd_id,
                              (uint32_t)signo, false, err);
}

int scmd_resize(struct scmd *c, unsigned short rows, unsigned short cols, err_t *err)
{
    if (c->out_fd[2] < 0)
        return err_set(err, EINVAL, "process %u has no pty", c->pid);
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    if (ioctl(c->out_fd[2], TIOCSWINSZ, &ws) < 0)
        return err_set(err, errno, "process %u: resize", c->pid);
    return 0;
}

void scmd_release_all(struct sbx *sb, const char *why)
{
    while (sb->cmds) {
        struct scmd *c = sb->cmds;
        if (!c->ended) {
            set_error(c, why);
            c->ended = true;
            notify_end(c);
        }
        scmd_free(c);
    }
}

/* ---------- after a restart ---------- */

static const char *const unknown_argv[] = {"", NULL};
static const char *const no_env[] = {NULL};

/* One that ended while no daemon was there: its end logged, its group and init's record gone. */
static void forget_ended(struct sbx *sb, const struct proto_command *e)
{
    struct verdict_facts facts = {0};
    struct verdict_usage usage = {0};
    err_t err;
    char detail[256];
    if (e->cgroup && strlen(e->cgroup) <= JAIL_COMMAND_GROUP_MAX)
        jail_command_finish(&sb->jail, e->cgroup, e, &facts, &usage, &err);
    snprintf(detail, sizeof detail,
             "{\"pid\":%u,\"exitCode\":%d,\"signal\":%u,\"whileDaemonDown\":true}", e->pid,
             (int)e->exit_code, e->signal);
    store_event_add(sb->d->store, sb->id, "command_ended", detail, &err);
    scmd_record_forget(sb, e->cmd_id);
    jail_agent_request(&sb->jail, PROTO_FORGET, agent_next_id(sb), e->cmd_id, 0, false, &err);
}

static void adopt(struct sbx *sb, const struct proto_command *e)
{
    err_t err;
    if (!e->cgroup || strlen(e->cgroup) > JAIL_COMMAND_GROUP_MAX)
        return;
    struct scmd *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->sb = sb;
    c->out_fd[0] = c->out_fd[1] = c->out_fd[2] = c->stdin_fd = c->record_fd = -1;
    scmd_input_init(c);
    c->adopted = true;
    c->argv = copy_list(unknown_argv); /* what it runs is init's to know, not told by LIST */
    c->envp = copy_list(no_env);
    c->tag = e->tag && e->tag[0] ? strdup(e->tag) : NULL;
    snprintf(c->group, sizeof c->group, "%s", e->cgroup);
    c->start_ns = jail_now_ns();
    c->start_wall_ms = sbx_wall_ms();
    uv_timer_init(sb->d->loop, &c->finish_timer);
    c->finish_timer.data = c;
    c->open_handles = 1;
    c->next = sb->cmds;
    sb->cmds = c;
    if (!c->argv || !c->envp) {
        scmd_free(c);
        return;
    }
    c->cmd_id = e->cmd_id;
    scmd_record_load(c); /* argv, env, cwd, lifetime and output as the daemon before had them */
    c->request_id = agent_next_id(sb);
    if (agent_expect(sb, c->request_id, on_spawn_reply, c, &err) < 0 ||
        jail_agent_request(&sb->jail, PROTO_ATTACH, c->request_id, e->cmd_id, 0, false, &err) < 0) {
        agent_cancel(sb, c);
        scmd_free(c);
    }
}

static void on_adopt_list(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    if (!m || m->type != PROTO_LIST_REPLY) {
        fprintf(stderr, "hutch serve: %s: its commands: %s\n", sb->id,
                !m                       ? why
                : m->type == PROTO_ERROR ? m->message
                                         : "unexpected answer");
        return;
    }
    for (size_t i = 0; i < m->n_entries; i++) {
        if (m->entries[i].running)
            adopt(sb, &m->entries[i]);
        else
            forget_ended(sb, &m->entries[i]);
    }
}

void scmd_adopt_all(struct sbx *sb)
{
    err_t err;
    uint32_t id = agent_next_id(sb);
    if (agent_expect(sb, id, on_adopt_list, sb, &err) < 0 ||
        jail_agent_request(&sb->jail, PROTO_LIST, id, 0, 0, false, &err) < 0) {
        agent_cancel(sb, sb);
        fprintf(stderr, "hutch serve: %s: its commands: %s\n", sb->id, err.msg);
    }
}

/* ---------- a command's environment ---------- */

#define ENV_MAX_ENTRIES                                                                            \
    1100 /* the defaults, the sandbox's (API_ENV_MAX_ENTRIES), the command's                       \
          */

/* NAME=VALUE into env (replacing an earlier NAME: later wins, as envd merges them). */
static void env_put(char **env, size_t *n, char *entry)
{
    size_t name_len = strcspn(entry, "=");
    for (size_t i = 0; i < *n; i++)
        if (strncmp(env[i], entry, name_len) == 0 && env[i][name_len] == '=') {
            free(env[i]);
            env[i] = entry;
            return;
        }
    if (*n < ENV_MAX_ENTRIES)
        env[(*n)++] = entry;
    else
        free(entry);
}

static char *env_entry(const char *name, const char *value)
{
    char *s = NULL;
    return asprintf(&s, "%s=%s", name, value) < 0 ? NULL : s;
}

char **scmd_env(struct sbx *sb, bool as_root, char *const *extra)
{
    char **env = calloc(ENV_MAX_ENTRIES + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t n = 0;
    const char *user = as_root ? "root" : JAIL_USER_NAME;
    env_put(env, &n,
            env_entry("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    env_put(env, &n, env_entry("HOME", as_root ? "/root" : JAIL_USER_HOME));
    env_put(env, &n, env_entry("USER", user));
    env_put(env, &n, env_entry("LOGNAME", user));
    struct store_sandbox row = {0};
    err_t err;
    if (store_sandbox_get(sb->d->store, sb->id, &row, &err) == 0 && row.env_json) {
        json_t *o = json_loads(row.env_json, 0, NULL);
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) if (json_is_string(v))
            env_put(env, &n, env_entry(k, json_string_value(v)));
        json_decref(o);
    }
    store_sandbox_free_fields(&row);
    for (size_t i = 0; extra && extra[i]; i++)
        env_put(env, &n, strdup(extra[i]));
    for (size_t i = 0; i < n; i++)
        if (!env[i]) { /* an allocation failed: no half environment */
            for (size_t k = 0; k < n; k++)
                free(env[k]);
            free(env);
            return NULL;
        }
    return env;
}
