/* The code interpreter's HTTP side and its kernels (interp.h, src/interp/PROTOCOL.md). */
#include "serve/interp.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/control_json.h"
#include "api/interp_json.h"
#include "jail/cgroup.h"
#include "serve/commands.h"
#include "serve/context_share.h"
#include "serve/host_zygote.h"
#include "util/strfmt.h"

#define KERNEL_LINE_MAX    (32u << 20) /* one message from a kernel */
#define EXECUTE_BODY_MAX   (2u << 20)  /* an execute's JSON: its code and env vars */
#define CONTEXT_BODY_MAX   (64u << 10)
#define CONTEXTS_MAX       128   /* per sandbox, the default ones included */
#define KEEPALIVE_MS       15000 /* a line while a cell runs (or waits) without other output */
#define INTERRUPT_GRACE_MS 3000  /* after a SIGINT, before the kernel is killed and restarted */
#define DIAG_MAX           2048  /* the tail of a kernel's stderr kept for an error message */
#define KERNEL_TAG_PREFIX  "hutch-interp "
#define ZYGOTE_STARTS_MAX  3 /* a zygote that keeps dying is given up: kernels start cold */
#define ZYGOTE_PRELOAD     "numpy,pandas,matplotlib.pyplot"
#define WARM_READY_WAIT_MS 10000 /* a warm pool's kernel not ready by then is not waited for */
#define ZYGOTE_FILE        "python_zygote.py"

struct language {
    const char *name, *alias;
    const char *interpreter, *file, *arg; /* argv: interpreter DIR/file [arg] */
    bool zygote; /* its kernels fork from a warm zygote (src/interp/README.md, "Zygotes") */
    /* a kernel kept ahead for the next create (spare_ensure): its kernel takes PROTOCOL.md's
     * environment request */
    bool spare;
};

static const struct language languages[] = {
    {"python", NULL, "/usr/bin/python3", "python_kernel.py", NULL, true, true},
    {"javascript", "js", "/usr/bin/node", "js_kernel.mjs", NULL, false, true},
    {"typescript", "ts", "/usr/bin/node", "js_kernel.mjs", "--typescript", false, true},
    {"bash", NULL, "/usr/bin/python3", "bash_kernel.py", NULL, false, false},
    {"r", NULL, "/usr/bin/python3", "r_kernel.py", NULL, false, false},
    {"java", NULL, "/usr/bin/python3", "java_kernel.py", NULL, false, false},
};
#define LANGUAGES (sizeof languages / sizeof *languages)

static unsigned language_bit(const struct language *l)
{
    return 1u << (unsigned)(l - languages);
}

enum icall_op { ICALL_EXECUTE, ICALL_CREATE, ICALL_RESTART };

/* One HTTP call, from its headers to its end; an execute lives on after its client left while
 * its kernel still runs it (x NULL), until the kernel ends it. */
struct icall {
    struct serve *d;
    char sandbox_id[STORE_ID_MAX + 1];
    struct http_exchange *x;
    enum icall_op op;
    char *body;
    size_t len;
    char ctx_id[40]; /* restart: the context named by the path */
    struct ictx *ctx;
    struct interp_execute exec; /* an execute's request */
    char exec_id[48]; /* "COUNT-HEX": the context's execution count, then 16 random bytes */
    bool responded, sent, held, interrupted, queued;
    uv_timer_t timer; /* keepalives, then an interrupt's grace */
    bool timer_open;
    uint64_t last_write_ms;
    /* a one-shot run's (interp_run): told once when the execution is over or its client went */
    void (*over)(void *user);
    void *over_user;
    struct icall *next;
};

/* An execution of the daemon's own: its kind is its id's first character, which a daemon after
 * a restart reads in the replay (a warm-up's end makes no context of a spare). */
enum marker {
    MARKER_NONE = 0,
    MARKER_WARM_UP = 'w',   /* a kernel started ahead: its first execution's page faults */
    MARKER_PROMOTION = '0', /* a spare given away: its end is in the kernel's output */
};

struct ictx {
    struct sbx *sb;
    char id[37];
    const struct language *lang;
    char cwd[INTERP_CWD_MAX + 1];
    bool is_default;
    struct scmd *kernel; /* NULL when none runs */
    int kernel_pidfd;    /* a kernel forked by the zygote: signalled by it (interrupts); or -1 */
    bool ready, ever_ready;
    bool adopted;  /* its kernel ran before this daemon: what it says between executions is old */
    bool via_stub; /* its kernel's command is the stub: a fork of the zygote, once allowed */
    bool via_host; /* ... of the host's zygote (host_zygote.h): the stub says its handover */
    bool handover_wait;    /* via_host, and the stub's handover line has not come yet */
    uint64_t host_request; /* the host's zygote's fork on its way (0: none) */
    bool discarding;       /* while attaching to an adopted kernel: its replayed output is old */
    bool share_pids;       /* its kernel's group has its pids limit (context_share.h) */
    bool doomed; /* made by a create whose kernel failed before its first ready: it goes */
    /* A spare kernel of the sandbox (spare_ensure): in no list, found by no id, until a create
     * takes it. Its command's tag says "spare" for good: a daemon after a restart tells a
     * spare given away by the end of the execution that gave it away (replayed_end). */
    bool spare;
    uv_timer_t *spare_timer; /* a spare not ready by d->kernel_ready_ms goes (spare_timed_out) */
    bool promoting;          /* given away: its create waits for the marker's end (marker_id) */
    /* an execution of the daemon's own in flight (marker_send), and its id "KIND-HEX" */
    enum marker marker;
    char marker_id[48];
    bool warm_up, warmed; /* a kernel started ahead: an empty execution once it is ready */
    bool replayed_end;    /* an end of execution came in an adopted kernel's replay */
    uint64_t kernel_started_ms;
    bool share_warned;
    unsigned execution_count;
    struct icall *queue;   /* executes in order: the first one is running once sent */
    struct icall *waiters; /* creates and restarts waiting for ready */
    char *line;            /* a message being read */
    size_t line_len, line_cap;
    char diag[DIAG_MAX + 1];
    size_t diag_len;
    struct ictx *next;
};

struct interp_state {
    struct ictx *contexts;
    unsigned n_contexts;
    /* the python zygote: a command of its own, started with the first context */
    struct scmd *zygote;
    bool zygote_ready; /* it said so: it listens */
    unsigned zygote_starts;
    bool preload;        /* the data stack imported in it (code-interpreter-v1) */
    bool host;           /* its python kernels fork from the host's zygote when it is ready */
    unsigned want_spare; /* language_bit()s: a kernel ahead for the next create (spare_ensure) */
};

static void kernel_kill(struct ictx *ctx);
static void kernel_lost(struct ictx *ctx, const char *why, bool may_free);
static void queue_kick(struct ictx *ctx);
static void icall_finish(struct icall *c);
static void exec_timer(uv_timer_t *t);
static int kernel_adopt(struct ictx *ctx, long ns_pid, err_t *err);
static void kernel_interrupt(struct ictx *ctx);
static void kernel_pidfd_close(struct ictx *ctx);
static void host_handover(struct ictx *ctx);

/* ---------- small things ---------- */

static const struct language *language_find(const char *name)
{
    for (size_t i = 0; i < LANGUAGES; i++)
        if (strcasecmp(name, languages[i].name) == 0 ||
            (languages[i].alias && strcasecmp(name, languages[i].alias) == 0))
            return &languages[i];
    return NULL;
}

static bool language_available(struct serve *d, const struct language *l)
{
    char path[PATH_MAX];
    return d->interp_path[0] && strfmt(path, sizeof path, "%s/%s", d->interp_path, l->file) == 0 &&
           access(path, R_OK) == 0;
}

static void random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    randombytes_buf(raw, bytes);
    sodium_bin2hex(out, 2 * bytes + 1, raw, bytes);
}

static void new_context_id(char out[37])
{
    char hex[33];
    random_hex(hex, 16);
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

static struct interp_state *state_of(struct sbx *sb, bool make);

static struct ictx *context_find_in(struct interp_state *st, const char *id)
{
    for (struct ictx *c = st ? st->contexts : NULL; c; c = c->next)
        if (!c->spare && strcmp(c->id, id) == 0)
            return c;
    return NULL;
}

static struct ictx *spare_of(struct interp_state *st, const struct language *l)
{
    for (struct ictx *c = st ? st->contexts : NULL; c; c = c->next)
        if (c->spare && c->lang == l)
            return c;
    return NULL;
}

/* appended: the list shows the contexts in the order they were made (a spare: given away) */
static void context_append(struct interp_state *st, struct ictx *ctx)
{
    struct ictx **tail = &st->contexts;
    while (*tail)
        tail = &(*tail)->next;
    ctx->next = NULL;
    *tail = ctx;
}

static bool context_unlink(struct interp_state *st, struct ictx *ctx)
{
    for (struct ictx **p = &st->contexts; *p; p = &(*p)->next)
        if (*p == ctx) {
            *p = ctx->next;
            ctx->next = NULL;
            return true;
        }
    return false;
}

static struct ictx *context_find(struct sbx *sb, const char *id)
{
    return context_find_in(state_of(sb, true), id);
}

static struct ictx *context_new(struct sbx *sb, const struct language *lang, const char *cwd,
                                bool is_default)
{
    struct interp_state *st = state_of(sb, true);
    if (!st || st->n_contexts >= CONTEXTS_MAX)
        return NULL;
    struct ictx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->sb = sb;
    ctx->kernel_pidfd = -1;
    ctx->lang = lang;
    ctx->is_default = is_default;
    new_context_id(ctx->id);
    snprintf(ctx->cwd, sizeof ctx->cwd, "%s", cwd ? cwd : JAIL_USER_HOME);
    context_append(st, ctx);
    st->n_contexts++;
    return ctx;
}

static struct ictx *default_found(struct sbx *sb, const struct language *lang)
{
    for (struct ictx *c = sb->interp->contexts; c; c = c->next)
        if (c->is_default && c->lang == lang)
            return c;
    return NULL;
}

static const struct scmd_listener kernel_listener, zygote_listener;
static void context_free(struct ictx *ctx);
static pid_t group_host_pid(struct sbx *sb, const char *group, long ns_pid, long except,
                            err_t *err);

/* A kernel (or the zygote) a daemon before us started, by its command's tag
 * "hutch-interp ID LANGUAGE default|created" ("hutch-interp zygote python"): its context made
 * again, with its state, as idle (what ran at the restart ends unseen). false when the tag is
 * not one. */
static bool adopt_kernel(struct sbx *sb, struct scmd *c)
{
    struct interp_state *st = sb->interp;
    char id[37], lang[16], kind[16];
    if (sscanf(c->tag + sizeof KERNEL_TAG_PREFIX - 1, "%36s %15s %15s", id, lang, kind) < 2)
        return false;
    err_t err;
    if (strcmp(id, "zygote") == 0) {
        if (st->zygote || strcmp(lang, "python") != 0)
            return false;
        st->zygote = c;
        return scmd_attach(c, &zygote_listener, sb, &err) == 0;
    }
    const struct language *l = language_find(lang);
    bool is_default = strcmp(kind, "default") == 0;
    bool spare = strcmp(kind, "spare") == 0;
    if (!l || context_find_in(st, id) || (is_default && default_found(sb, l)) ||
        (spare && !l->spare))
        return false;
    struct ictx *ctx = context_new(sb, l, c->cwd && c->cwd[0] == '/' ? c->cwd : NULL, is_default);
    if (!ctx)
        return false;
    snprintf(ctx->id, sizeof ctx->id, "%s", id);
    ctx->kernel = c;
    ctx->ready = ctx->ever_ready = ctx->adopted = true;
    ctx->discarding = true;
    int rc = scmd_attach(c, &kernel_listener, ctx, &err);
    ctx->discarding = false;
    ctx->line_len = 0; /* what the replay ended in the middle of is old too */
    if (rc < 0) {
        ctx->kernel = NULL;
        context_free(ctx);
        return false;
    }
    /* a spare is a context once an execution ended in it: the one that gave it away, at least */
    if (spare && !ctx->replayed_end) {
        if (spare_of(st, l)) { /* one a language */
            scmd_detach(c, ctx);
            context_free(ctx);
            return false;
        }
        ctx->spare = true;
        st->want_spare |= language_bit(l);
    }
    /* one the zygote forked: its own process, not the stub, is the one to interrupt */
    if (l->zygote && c->argv && c->argv[0] && strcmp(c->argv[0], INTERP_SANDBOX_STUB) == 0) {
        pid_t host = group_host_pid(sb, c->group, 0, (long)c->pid, &err);
        if (host > 0)
            ctx->kernel_pidfd = (int)syscall(SYS_pidfd_open, host, 0);
    }
    return true;
}

/* Adopts every kernel a daemon before us started (their contexts lived in its memory only; a
 * command tagged as a kernel that is not one is killed), and makes the default contexts that
 * are missing. */
static struct interp_state *state_of(struct sbx *sb, bool make)
{
    if (sb->interp || !make)
        return sb->interp;
    sb->interp = calloc(1, sizeof *sb->interp);
    if (!sb->interp)
        return NULL;
    if (sb->code_template) { /* reopened: its new python kernels as at its create */
        sb->interp->host = true;
        sb->interp->zygote_starts = ZYGOTE_STARTS_MAX;
    }
    for (struct scmd *c = sb->cmds; c; c = c->next)
        if (c->tag && strncmp(c->tag, KERNEL_TAG_PREFIX, sizeof KERNEL_TAG_PREFIX - 1) == 0 &&
            !c->ended && !adopt_kernel(sb, c)) {
            err_t err;
            scmd_signal(c, SIGKILL, &err);
        }
    if (!default_found(sb, &languages[0]))
        context_new(sb, &languages[0], NULL, true);
    if (!default_found(sb, &languages[1]))
        context_new(sb, &languages[1], NULL, true);
    return sb->interp;
}

static struct ictx *default_context(struct sbx *sb, const struct language *lang)
{
    struct interp_state *st = state_of(sb, true);
    for (struct ictx *c = st ? st->contexts : NULL; c; c = c->next)
        if (c->is_default && c->lang == lang)
            return c;
    return context_new(sb, lang, NULL, true);
}

static char *context_json(const struct ictx *ctx)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s}", "id", ctx->id, "language", ctx->lang->name, "cwd", ctx->cwd);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* ---------- answers ---------- */

static void respond_json_text(struct http_exchange *x, int status, const char *json)
{
    static const struct http_header h[] = {{"Content-Type", "application/json"}};
    if (!json) {
        http_respond_error(x, 500, "out of memory");
        return;
    }
    http_respond(x, status, h, 1, json, strlen(json));
}

/* E2B's server answers an unknown context with a 404 whose body the SDK shows as it is. */
static void respond_not_found(struct http_exchange *x, const char *id)
{
    static const struct http_header h[] = {{"Content-Type", "text/plain"}};
    char body[128];
    snprintf(body, sizeof body, "Context %.40s not found", id);
    http_respond(x, 404, h, 1, body, strlen(body));
}

/* One NDJSON line to an execute's client (steals o). Its kernel's output is held while the
 * client is congested. */
static void exec_write(struct icall *c, json_t *o)
{
    size_t n = 0;
    char *s = c->x ? interp_line(o, &n) : (json_decref(o), NULL);
    if (!s)
        return;
    int rc = http_respond_write(c->x, s, n);
    free(s);
    c->last_write_ms = uv_now(c->d->loop);
    if (rc == 1 && !c->held && c->ctx && c->ctx->kernel) {
        c->held = true;
        scmd_hold(c->ctx->kernel, true);
    }
}

static void exec_error(struct icall *c, const char *name, const char *value)
{
    exec_write(c, json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", name, "value", value,
                            "traceback", value));
}

/* ---------- a call's life ---------- */

static void icall_freed(uv_handle_t *h)
{
    free(h->data);
}

static void icall_free(struct icall *c)
{
    free(c->body);
    interp_execute_free(&c->exec);
    if (c->held && c->ctx && c->ctx->kernel)
        scmd_hold(c->ctx->kernel, false);
    if (c->timer_open)
        uv_close((uv_handle_t *)&c->timer, icall_freed);
    else
        free(c);
}

static void list_remove(struct icall **list, struct icall *c)
{
    for (struct icall **p = list; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            c->next = NULL;
            return;
        }
}

/* An execute is over (ended, failed, or abandoned before it was sent): its response ended, out
 * of its context's queue, freed once its exchange is gone too. */
static void icall_over(struct icall *c)
{
    void (*over)(void *) = c->over;
    c->over = NULL;
    if (over)
        over(c->over_user);
}

static void icall_finish(struct icall *c)
{
    void (*over)(void *) = c->over;
    void *over_user = c->over_user;
    c->over = NULL;
    if (c->ctx && c->queued) {
        list_remove(&c->ctx->queue, c);
        c->queued = false;
    }
    if (c->held && c->ctx && c->ctx->kernel)
        scmd_hold(c->ctx->kernel, false);
    c->held = false;
    c->ctx = NULL;
    if (c->timer_open)
        uv_timer_stop(&c->timer);
    if (c->x) {
        exec_write(c, json_pack("{s:s}", "type", "end_of_execution"));
        http_respond_end(c->x); /* on_done frees it */
    } else {
        icall_free(c);
    }
    if (over) /* after its end is written: a one-shot run's sandbox may go now */
        over(over_user);
}

static void on_exchange_end(struct http_exchange *x, void *user)
{
    struct icall *c = user;
    c->x = NULL;
    struct ictx *ctx = c->ctx;
    if (!ctx) {
        icall_over(c);
        icall_free(c);
        return;
    }
    if (c->op != ICALL_EXECUTE) {
        list_remove(&ctx->waiters, c);
        icall_free(c);
        return;
    }
    if (!c->sent) { /* still waiting: it never runs */
        icall_finish(c);
        return;
    }
    icall_over(c); /* a one-shot run's sandbox goes: nothing to interrupt then */
    if (!c->ctx)
        return; /* ... its end came meanwhile */
    /* Running: the client went (its timeout, or it gave up). The cell is interrupted, and the
     * context kept, unless the kernel does not end it in time. */
    if (c->held && ctx->kernel)
        scmd_hold(ctx->kernel, false);
    c->held = false;
    if (!c->interrupted && ctx->kernel) {
        c->interrupted = true;
        kernel_interrupt(ctx);
        if (c->timer_open)
            uv_timer_start(&c->timer, exec_timer, INTERRUPT_GRACE_MS, 0);
    }
}

static void on_drain(struct http_exchange *x, void *user)
{
    struct icall *c = user;
    if (c->held && c->ctx && c->ctx->kernel) {
        c->held = false;
        scmd_hold(c->ctx->kernel, false);
    }
}

static const struct http_exchange_callbacks icall_callbacks = {
    .on_done = on_exchange_end, .on_abort = on_exchange_end, .on_drain = on_drain};

/* Keepalives while it waits or runs; after an interrupt, the grace is over: the kernel that
 * did not end the cell is killed, and the context starts again with a new one. */
static void exec_timer(uv_timer_t *t)
{
    struct icall *c = t->data;
    struct ictx *waited = c->ctx;
    if (waited && waited->kernel && (!waited->ready || waited->promoting) &&
        uv_now(t->loop) - waited->kernel_started_ms >= c->d->kernel_ready_ms) {
        char why[96];
        snprintf(why, sizeof why, "the kernel did not get ready within %llu s: it was killed",
                 (unsigned long long)(c->d->kernel_ready_ms / 1000));
        kernel_kill(waited);
        kernel_lost(waited, why, true);
        return; /* c was answered (and may be gone) */
    }
    if (c->op != ICALL_EXECUTE)
        return; /* a create or restart: its timer is for the ready only */
    if (c->interrupted) {
        struct ictx *ctx = c->ctx;
        if (ctx) {
            kernel_kill(ctx);
            kernel_lost(ctx,
                        "the kernel did not stop the interrupted execution: it was killed, "
                        "and the context restarts with its state cleared",
                        false);
        }
        return;
    }
    uint64_t now = uv_now(t->loop);
    if (c->x && now - c->last_write_ms >= KEEPALIVE_MS)
        exec_write(c, json_pack("{s:s}", "type", "keepalive"));
    uv_timer_start(t, exec_timer, KEEPALIVE_MS, 0);
}

/* ---------- the kernel ---------- */

static void spare_ensure(struct sbx *sb);

/* The creates and restarts waiting for the kernel's ready get their answer: 200 with the
 * context, or a 500 with failure. A create answered 200 makes its language's spare wanted: more
 * creates of it may follow (spare_ensure). */
static void ready_answer(struct ictx *ctx, const char *failure)
{
    bool created = false;
    while (ctx->waiters) {
        struct icall *w = ctx->waiters;
        ctx->waiters = w->next;
        w->next = NULL;
        w->ctx = NULL;
        if (w->x && failure)
            http_respond_error(w->x, 500, "context %s (%s): %s", ctx->id, ctx->lang->name, failure);
        else if (w->x) {
            char *json = context_json(ctx);
            respond_json_text(w->x, 200, json);
            free(json);
            created |= w->op == ICALL_CREATE;
        } else {
            icall_free(w);
        }
    }
    struct interp_state *st = ctx->sb->interp;
    if (created && ctx->lang->spare && st) {
        st->want_spare |= language_bit(ctx->lang);
        spare_ensure(ctx->sb);
    }
}

static void timer_freed(uv_handle_t *h)
{
    free(h);
}

static void context_free(struct ictx *ctx)
{
    struct interp_state *st = ctx->sb->interp;
    if (context_unlink(st, ctx))
        st->n_contexts--;
    if (ctx->spare_timer) {
        ctx->spare_timer->data = NULL;
        uv_close((uv_handle_t *)ctx->spare_timer, timer_freed);
    }
    kernel_pidfd_close(ctx);
    free(ctx->line);
    free(ctx);
}

/* Every call of the context gets why: the running and waiting executes an error and their end,
 * the creates and restarts a 500. */
static void fail_calls(struct ictx *ctx, const char *name, const char *why)
{
    while (ctx->queue) {
        struct icall *c = ctx->queue;
        exec_error(c, name, why);
        icall_finish(c);
    }
    ready_answer(ctx, why);
}

/* A kernel through the stub: the zygote forks for that stub only once told its pid (a process of
 * the sandbox that asks the zygote itself gets nothing: src/interp/python_zygote.py). */
static void on_kernel_started(struct scmd *c, void *user)
{
    struct ictx *ctx = user;
    struct interp_state *st = ctx->sb->interp;
    if (!ctx->via_stub || ctx->via_host || !st || !st->zygote || ctx->kernel != c)
        return;
    char line[32];
    int n = snprintf(line, sizeof line, "allow %u\n", c->pid);
    err_t err;
    if (scmd_input(st->zygote, false, (const uint8_t *)line, (size_t)n, &err) < 0)
        fprintf(stderr, "hutch serve: sandbox %s: the zygote: %s\n", ctx->sb->id, err.msg);
}

static void diag_add(struct ictx *ctx, const uint8_t *data, size_t len)
{
    if (len > DIAG_MAX) {
        data += len - DIAG_MAX;
        len = DIAG_MAX;
    }
    if (ctx->diag_len + len > DIAG_MAX) {
        size_t drop = ctx->diag_len + len - DIAG_MAX;
        memmove(ctx->diag, ctx->diag + drop, ctx->diag_len - drop);
        ctx->diag_len -= drop;
    }
    memcpy(ctx->diag + ctx->diag_len, data, len);
    ctx->diag_len += len;
    ctx->diag[ctx->diag_len] = '\0';
}

/* The kernel broke the protocol: it is killed, and the context starts again. */
static void kernel_violation(struct ictx *ctx, const char *what)
{
    char why[2 * sizeof((err_t *)0)->msg];
    if (ctx->ready)
        snprintf(why, sizeof why,
                 "the kernel sent %s: it was killed, and the context restarts with its state "
                 "cleared",
                 what);
    else
        snprintf(why, sizeof why, "the kernel sent %s before it was ready: it was killed", what);
    kernel_kill(ctx);
    kernel_lost(ctx, why, false);
}

/* A line to the kernel between executions; one that cannot be written costs the kernel (killed,
 * and lost with why). -1 then: ctx may be freed (may_free). line NULL: out of memory. */
static int kernel_send(struct ictx *ctx, const char *line, size_t n, const char *why, bool may_free)
{
    err_t err;
    if (line && scmd_input(ctx->kernel, false, (const uint8_t *)line, n, &err) == 0)
        return 0;
    kernel_kill(ctx);
    kernel_lost(ctx, why, may_free);
    return -1;
}

/* An empty execution of the daemon's own (no count, no history in the kernel). A warm-up: a
 * kernel started ahead takes the page faults of its first execution (most of 20 ms, here) before
 * a call waits for them. A promotion: a spare given away, whose end the kernel's output then
 * holds, so that a daemon after a restart finds it a context. */
static void marker_send(struct ictx *ctx, enum marker kind, bool may_free)
{
    char hex[33];
    random_hex(hex, 16);
    snprintf(ctx->marker_id, sizeof ctx->marker_id, "%c-%s", (char)kind, hex);
    ctx->marker = kind;
    struct interp_execute e = {.code = json_string(""), .env_vars = json_object()};
    size_t n;
    char *line = e.code && e.env_vars ? interp_execute_request(&e, ctx->marker_id, &n) : NULL;
    json_decref(e.code);
    json_decref(e.env_vars);
    /* A promotion first has the kernel take again what a start takes from the environment and
     * the files (PYTHONPATH, the user's site-packages, matplotlib's configuration): a spare
     * forked before a `pip install --user` sees the package, as a kernel started now would. */
    static const char refresh[] = "{\"type\":\"environment\",\"env_vars\":{}}\n";
    const char *why = kind == MARKER_PROMOTION ? "the spare kernel could not be given away"
                                               : "the kernel's warm-up could not be sent";
    int rc = 0;
    if (kind == MARKER_PROMOTION)
        rc = kernel_send(ctx, line ? refresh : NULL, sizeof refresh - 1, why, may_free);
    if (rc == 0)
        kernel_send(ctx, line, n, why, may_free);
    free(line);
}

/* A line of an adopted kernel's replayed output (what it wrote before this daemon): nothing is
 * forwarded or judged (the replay may begin mid-line); an end of execution gives back the
 * context's execution count, which the daemon before us put in the id. */
static void replayed_message(struct ictx *ctx, const char *line, size_t len)
{
    struct kernel_message m;
    err_t err;
    if (kernel_message_parse(line, len, "", &m, &err) < 0)
        return;
    unsigned count;
    char dash;
    if (m.type == KERNEL_END_OF_EXECUTION && m.end_id[0] != MARKER_WARM_UP) /* no context */
        ctx->replayed_end = true;
    if (m.type == KERNEL_END_OF_EXECUTION && sscanf(m.end_id, "%u%c", &count, &dash) == 2 &&
        dash == '-')
        ctx->execution_count = count;
    kernel_message_free(&m);
}

static void handle_message(struct ictx *ctx, const char *line, size_t len)
{
    if (ctx->discarding) {
        replayed_message(ctx, line, len);
        return;
    }
    if (ctx->handover_wait) {
        static const char handover[] = "{\"type\":\"handover\"}";
        ctx->handover_wait = false;
        if (len == sizeof handover - 1 && memcmp(line, handover, len) == 0) {
            host_handover(ctx);
            return;
        }
        /* else the stub could not even begin, and started the kernel cold: its ready */
    }
    char at[32];
    api_time_format(sbx_wall_ms(), at);
    struct kernel_message m;
    err_t err;
    if (kernel_message_parse(line, len, at, &m, &err) < 0) {
        kernel_violation(ctx, err.msg);
        return;
    }
    struct icall *run = ctx->queue && ctx->queue->sent ? ctx->queue : NULL;
    if (!ctx->ready) {
        kernel_message_free(&m);
        if (m.type != KERNEL_READY) {
            kernel_violation(ctx, "a message other than its ready");
            return;
        }
        if (ctx->via_host && m.pid && ctx->kernel && m.pid != (long)ctx->kernel->pid) {
            /* a fork of the host's zygote, in its command's group already; the fork's answer
             * may come after this ready */
            pid_t host = group_host_pid(ctx->sb, ctx->kernel->group, m.pid, 0, &err);
            if (!host) {
                kernel_violation(ctx, "a ready for a process not in its command's group");
                return;
            }
            if (ctx->kernel_pidfd < 0)
                ctx->kernel_pidfd = (int)syscall(SYS_pidfd_open, host, 0);
        } else if (m.pid && ctx->kernel && m.pid != (long)ctx->kernel->pid &&
                   kernel_adopt(ctx, m.pid, &err) < 0) {
            char what[sizeof err.msg + 64];
            snprintf(what, sizeof what, "a ready for a process the daemon could not adopt (%s)",
                     err.msg);
            kernel_violation(ctx, what);
            return;
        }
        ctx->ready = ctx->ever_ready = true;
        if (ctx->promoting) { /* given away before it was ready */
            marker_send(ctx, MARKER_PROMOTION, false);
            return;
        }
        if (ctx->warm_up && !ctx->warmed && !ctx->queue && !ctx->waiters) {
            marker_send(ctx, MARKER_WARM_UP, false);
            return;
        }
        ready_answer(ctx, NULL);
        queue_kick(ctx);
        return;
    }
    switch (m.type) {
    case KERNEL_READY:
        kernel_violation(ctx, "a second ready");
        return;
    case KERNEL_KEEPALIVE:
        return;
    case KERNEL_OUTPUT:
    case KERNEL_RESULT:
    case KERNEL_ERROR: /* output between executions (a thread's) is dropped */
        if (run)
            exec_write(run, m.client_line);
        else
            json_decref(m.client_line);
        return;
    case KERNEL_END_OF_EXECUTION:
        if (ctx->marker && strcmp(m.end_id, ctx->marker_id) == 0) {
            bool warm_up = ctx->marker == MARKER_WARM_UP;
            ctx->marker = MARKER_NONE;
            ctx->warmed = true;
            if (ctx->promoting && warm_up) { /* given away during its warm-up */
                marker_send(ctx, MARKER_PROMOTION, false);
                return;
            }
            if (ctx->promoting) {
                ctx->promoting = false; /* the spare is a context, for a daemon after us too */
                ready_answer(ctx, NULL);
            }
            queue_kick(ctx);
            return;
        }
        if (ctx->adopted && (!run || strcmp(m.end_id, run->exec_id) != 0))
            return; /* the end of one the daemon before us sent */
        if (!run || strcmp(m.end_id, run->exec_id) != 0) {
            kernel_violation(ctx, "the end of an execution that was not running");
            return;
        }
        icall_finish(run);
        queue_kick(ctx);
        return;
    }
}

static void kernel_output(struct ictx *ctx, struct scmd *c, const char *stream, const uint8_t *data,
                          size_t len)
{
    if (strcmp(stream, "stdout") != 0) {
        if (!ctx->discarding)
            diag_add(ctx, data, len);
        return;
    }
    while (len > 0 && ctx->kernel == c) {
        const uint8_t *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (ctx->line_len + take > KERNEL_LINE_MAX) {
            if (ctx->discarding) { /* old: skipped */
                ctx->line_len = 0;
                return;
            }
            kernel_violation(ctx, "a line longer than 32 MiB");
            return;
        }
        if (ctx->line_len + take + 1 > ctx->line_cap) {
            size_t cap = ctx->line_cap ? ctx->line_cap : 4096;
            while (cap < ctx->line_len + take + 1)
                cap *= 2;
            char *p = realloc(ctx->line, cap);
            if (!p) {
                kernel_violation(ctx, "more than the daemon could hold");
                return;
            }
            ctx->line = p;
            ctx->line_cap = cap;
        }
        memcpy(ctx->line + ctx->line_len, data, take);
        ctx->line_len += take;
        if (!nl)
            return;
        data += take + 1;
        len -= take + 1;
        size_t n = ctx->line_len;
        ctx->line_len = 0;
        if (n > 0)
            handle_message(ctx, ctx->line, n);
    }
}

static void on_kernel_output(struct scmd *c, const char *stream, const uint8_t *data, size_t len,
                             void *user)
{
    struct ictx *ctx = user;
    kernel_output(ctx, c, stream, data, len);
    if (ctx->doomed) /* its kernel is detached: nothing calls us for it again */
        context_free(ctx);
}

static void on_kernel_end(struct scmd *c, void *user)
{
    struct ictx *ctx = user;
    if (ctx->kernel != c)
        return;
    ctx->kernel = NULL;
    char why[DIAG_MAX + 512];
    const char *tail = ctx->diag_len ? ctx->diag : "";
    if (c->error[0])
        snprintf(why, sizeof why, "the kernel was lost: %s%s%s", c->error, tail[0] ? "; " : "",
                 tail);
    else if (c->signo)
        snprintf(why, sizeof why, "the kernel died of signal %d%s%s", c->signo, tail[0] ? ": " : "",
                 tail);
    else
        snprintf(why, sizeof why, "the kernel exited with status %d%s%s", c->exit_code,
                 tail[0] ? ": " : "", tail);
    kernel_lost(ctx, why, true);
}

static const struct scmd_listener kernel_listener = {
    .on_started = on_kernel_started, .on_output = on_kernel_output, .on_end = on_kernel_end};

/* SIGINT to the kernel: a forked one by its pidfd (its stub, a Landlock domain apart, may not
 * signal it), one started cold as its command's first process. */
static void kernel_interrupt(struct ictx *ctx)
{
    err_t err;
    if (ctx->kernel_pidfd >= 0)
        syscall(SYS_pidfd_send_signal, ctx->kernel_pidfd, SIGINT, NULL, 0);
    else if (ctx->kernel)
        scmd_signal_leader(ctx->kernel, SIGINT, &err);
}

static void kernel_pidfd_close(struct ictx *ctx)
{
    if (ctx->kernel_pidfd >= 0)
        close(ctx->kernel_pidfd);
    ctx->kernel_pidfd = -1;
    if (ctx->host_request) /* its kernel is gone: the fork's answer no longer matters */
        host_zygote_forget(ctx->sb->d, ctx->host_request);
    ctx->host_request = 0;
}

/* ---------- the host's zygote ---------- */

/* Nothing came of the fork: the stub starts the kernel itself. */
static void host_fork_failed(struct ictx *ctx, const char *why)
{
    fprintf(stderr, "hutch serve: sandbox %s: context %s: the host's zygote: %s; starting cold\n",
            ctx->sb->id, ctx->id, why);
    err_t err;
    if (ctx->kernel && scmd_input(ctx->kernel, false, (const uint8_t *)"cold\n", 5, &err) < 0)
        kernel_violation(ctx, "its stub could not be told to start cold");
}

static void on_host_forked(void *user, pid_t host_pid, const char *failure)
{
    struct ictx *ctx = user;
    ctx->host_request = 0;
    if (failure) {
        host_fork_failed(ctx, failure);
        return;
    }
    /* the kernel is in its command's cgroup from its birth: only its pidfd, for interrupts */
    if (ctx->kernel_pidfd < 0)
        ctx->kernel_pidfd = (int)syscall(SYS_pidfd_open, host_pid, 0);
}

/* The stub said its handover line: the host's zygote forks the kernel into the sandbox. */
static void host_handover(struct ictx *ctx)
{
    struct sbx *sb = ctx->sb;
    err_t err;
    pid_t stub = group_host_pid(sb, ctx->kernel->group, (long)ctx->kernel->pid, 0, &err);
    int pidfd = stub > 0 ? (int)syscall(SYS_pidfd_open, stub, 0) : -1;
    if (stub > 0 && pidfd < 0)
        err_set(&err, errno, "the stub's pidfd");
    int rc = pidfd >= 0 ? host_zygote_fork(sb->d, sb, ctx->kernel->group, pidfd, on_host_forked,
                                           ctx, &ctx->host_request, &err)
                        : -1;
    if (pidfd >= 0)
        close(pidfd);
    if (rc < 0)
        host_fork_failed(ctx, err.msg);
}

/* ---------- the zygote ---------- */

static void on_zygote_started(struct scmd *c, void *user)
{
    (void)c;
    (void)user;
}

/* Read to keep its pipes flowing; its one line, that it listens, is all it says. */
static void on_zygote_output(struct scmd *c, const char *stream, const uint8_t *data, size_t len,
                             void *user)
{
    struct sbx *sb = user;
    static const char ready[] = "{\"type\":\"ready\"";
    if (sb->interp && sb->interp->zygote == c && strcmp(stream, "stdout") == 0 &&
        len >= sizeof ready - 1 && memcmp(data, ready, sizeof ready - 1) == 0)
        sb->interp->zygote_ready = true;
}

static void on_zygote_end(struct scmd *c, void *user)
{
    struct sbx *sb = user;
    if (sb->interp && sb->interp->zygote == c) {
        sb->interp->zygote = NULL;
        sb->interp->zygote_ready = false;
    }
}

static const struct scmd_listener zygote_listener = {
    .on_started = on_zygote_started, .on_output = on_zygote_output, .on_end = on_zygote_end};

/* Starts the sandbox's python zygote unless it runs (or kept dying, or there is no stub): the
 * kernels started meanwhile start cold, the stub falls back when nothing listens. */
static void zygote_start(struct sbx *sb)
{
    struct interp_state *st = sb->interp;
    const struct language *py = &languages[0];
    if (!st || st->zygote || st->zygote_starts >= ZYGOTE_STARTS_MAX ||
        !sb->d->kernel_stub_path[0] || !language_available(sb->d, py))
        return;
    st->zygote_starts++;
    char file[sizeof INTERP_SANDBOX_DIR + 64], host[PATH_MAX];
    if (strfmt(host, sizeof host, "%s/%s", sb->d->interp_path, ZYGOTE_FILE) < 0 ||
        access(host, R_OK) < 0)
        return;
    snprintf(file, sizeof file, "%s/%s", INTERP_SANDBOX_DIR, ZYGOTE_FILE);
    const char *argv[] = {py->interpreter, file, py->name, st->preload ? "--preload" : NULL,
                          ZYGOTE_PRELOAD,  NULL};
    char *extra[] = {"MPLBACKEND=Agg", "PYTHONUNBUFFERED=1", NULL};
    char **env = scmd_env(sb, false, extra);
    if (!env)
        return;
    struct jail_command_spec spec = {
        .argv = argv,
        .envp = (const char *const *)env,
        .cwd = JAIL_USER_HOME,
        .tag = KERNEL_TAG_PREFIX "zygote python",
        .stdin_pipe = true, /* its end (the daemon's) ends it */
    };
    err_t err;
    st->zygote = scmd_start(sb, &spec, &zygote_listener, sb, &err);
    scmd_free_list(env);
    if (!st->zygote)
        fprintf(stderr, "hutch serve: sandbox %s: the python zygote: %s\n", sb->id, err.msg);
}

/* The pid, as the host sees it, of a process in the command group `group`: the one the sandbox
 * knows as ns_pid (when > 0), else the oldest one whose sandbox pid is not `except`; 0 (err)
 * when none is. */
static pid_t group_host_pid(struct sbx *sb, const char *group, long ns_pid, long except, err_t *err)
{
    struct cgroup *cg;
    if (jail_command_group_open(&sb->jail, group, &cg, err) < 0)
        return 0;
    char path[PATH_MAX];
    static const char *const holders[] = {"", "pids", "memory"};
    int rc = -1;
    for (size_t i = 0; i < sizeof holders / sizeof *holders && rc < 0; i++)
        rc = cgroup_file_path(cg, holders[i], "cgroup.procs", path, sizeof path, err);
    cgroup_free(cg);
    FILE *f = rc == 0 ? fopen(path, "re") : NULL;
    if (!f)
        return err_set(err, errno ? errno : ENOENT, "command %s: its cgroup.procs", group), 0;
    pid_t found = 0;
    unsigned long long found_start = 0;
    long host;
    while ((ns_pid <= 0 || !found) && fscanf(f, "%ld", &host) == 1) {
        char file[64], line[256];
        long inner = 0;
        snprintf(file, sizeof file, "/proc/%ld/status", host);
        FILE *st = fopen(file, "re");
        while (st && fgets(line, sizeof line, st))
            if (strncmp(line, "NSpid:", 6) == 0) {
                /* the last one is the pid in the innermost namespace: the sandbox's */
                char *last = strrchr(line, '\t');
                inner = last ? strtol(last + 1, NULL, 10) : 0;
                break;
            }
        if (st)
            fclose(st);
        if (ns_pid > 0) {
            if (inner == ns_pid)
                found = (pid_t)host;
            continue;
        }
        /* field 22 of stat, after the command name's closing parenthesis: the start time */
        unsigned long long start = 0;
        snprintf(file, sizeof file, "/proc/%ld/stat", host);
        FILE *sf = inner && inner != except ? fopen(file, "re") : NULL;
        char buf[1024];
        size_t n = sf ? fread(buf, 1, sizeof buf - 1, sf) : 0;
        if (sf)
            fclose(sf);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        for (int field = 2; p && field < 22; field++)
            p = strchr(p + 1, ' ');
        if (p && sscanf(p + 1, "%llu", &start) == 1 && (!found || start < found_start)) {
            found = (pid_t)host;
            found_start = start;
        }
    }
    fclose(f);
    if (!found)
        err_set(err, ESRCH, "command %s: no such process", group);
    return found;
}

/* A kernel forked by the zygote joins its context's command cgroup, so that killing the command
 * takes it and all it starts (it starts nothing before its first execute). */
static int kernel_adopt(struct ictx *ctx, long ns_pid, err_t *err)
{
    struct scmd *z = ctx->sb->interp ? ctx->sb->interp->zygote : NULL;
    if (!z)
        return err_set(err, ESRCH, "no zygote runs");
    if ((long)z->pid == ns_pid)
        return err_set(err, EPERM, "that is the zygote itself");
    pid_t host = group_host_pid(ctx->sb, z->group, ns_pid, 0, err);
    if (!host)
        return -1;
    struct cgroup *cg;
    if (jail_command_group_open(&ctx->sb->jail, ctx->kernel->group, &cg, err) < 0)
        return -1;
    int rc = cgroup_attach(cg, host, err);
    cgroup_free(cg);
    if (rc == 0) {
        kernel_pidfd_close(ctx);
        ctx->kernel_pidfd = (int)syscall(SYS_pidfd_open, host, 0);
    }
    return rc;
}

static int kernel_start(struct ictx *ctx, err_t *err)
{
    struct sbx *sb = ctx->sb;
    if (!language_available(sb->d, ctx->lang))
        return err_set(err, ENOENT, "language '%s' is not available: this daemon has no %s kernel",
                       ctx->lang->name, ctx->lang->name);
    char file[sizeof INTERP_SANDBOX_DIR + 64], tag[JAIL_COMMAND_MAX_TAG + 1];
    snprintf(file, sizeof file, "%s/%s", INTERP_SANDBOX_DIR, ctx->lang->file);
    snprintf(tag, sizeof tag, "%s%s %s %s", KERNEL_TAG_PREFIX, ctx->id, ctx->lang->name,
             ctx->is_default ? "default"
             : ctx->spare    ? "spare"
                             : "created");
    struct interp_state *st = sb->interp;
    bool forked = ctx->lang->zygote && sb->d->kernel_stub_path[0];
    bool host = forked && st && st->host && host_zygote_available(sb->d);
    if (forked && !host)
        zygote_start(sb);
    /* through the stub, the zygote's fork, or (none listening) the interpreter all the same */
    const char *cold[] = {ctx->lang->interpreter, file, ctx->lang->arg, NULL};
    char zygote_pid[16];
    snprintf(zygote_pid, sizeof zygote_pid, "%u", st && st->zygote ? st->zygote->pid : 0);
    const char *via_stub[] = {INTERP_SANDBOX_STUB,
                              ctx->lang->name,
                              zygote_pid,
                              "--",
                              ctx->lang->interpreter,
                              file,
                              ctx->lang->arg,
                              NULL};
    const char *via_host[] = {INTERP_SANDBOX_STUB, "--host", "--", ctx->lang->interpreter, file,
                              ctx->lang->arg,      NULL};
    /* the stub checks the zygote's pid: one not yet known (its start on its way) starts cold */
    const char *const *argv = host                                            ? via_host
                              : forked && st && st->zygote && st->zygote->pid ? via_stub
                                                                              : cold;
    ctx->via_stub = argv != cold;
    ctx->via_host = ctx->handover_wait = argv == via_host;
    char *extra[] = {"MPLBACKEND=Agg", "PYTHONUNBUFFERED=1", NULL};
    char **env = scmd_env(sb, false, extra);
    if (!env)
        return err_set(err, ENOMEM, "context %s: its environment", ctx->id);
    struct jail_command_spec spec = {
        .argv = argv,
        .envp = (const char *const *)env,
        .cwd = ctx->cwd,
        .tag = tag,
        .stdin_pipe = true,
    };
    ctx->ready = false;
    ctx->share_pids = false;
    ctx->kernel_started_ms = uv_now(sb->d->loop);
    ctx->line_len = 0;
    ctx->diag_len = 0;
    ctx->diag[0] = '\0';
    ctx->kernel = scmd_start(sb, &spec, &kernel_listener, ctx, err);
    scmd_free_list(env);
    return ctx->kernel ? 0 : -1;
}

/* A context no client has been given yet: a spare, one being given away (its create waits), or
 * one whose create's kernel never got ready. It goes when its kernel does. */
static bool context_unknown(const struct ictx *ctx)
{
    return !ctx->is_default && (ctx->spare || ctx->promoting || !ctx->ever_ready);
}

/* The kernel is gone (dead, or killed by us): what it ran fails with why; the waiting executes
 * start a new kernel, unless it never got ready (then it cannot start: all of them fail). */
static void kernel_lost(struct ictx *ctx, const char *why, bool may_free)
{
    kernel_pidfd_close(ctx);
    bool unknown = context_unknown(ctx);
    /* a spare being given away is no context yet: its create fails, and it goes */
    bool was_ready = ctx->ready && !ctx->promoting;
    ctx->ready = false;
    ctx->promoting = false;
    ctx->marker = MARKER_NONE;
    ctx->line_len = 0;
    struct icall *run = ctx->queue && ctx->queue->sent ? ctx->queue : NULL;
    if (run) {
        exec_error(run, "KernelError", why);
        icall_finish(run);
    }
    if (!was_ready || ctx->spare) {
        fail_calls(ctx, "KernelError", why);
        /* it goes now where nothing walks it after us (the command's end, a timer), else at
         * the end of its output's callback */
        if (unknown) {
            if (may_free)
                context_free(ctx);
            else
                ctx->doomed = true;
        }
        return;
    }
    ctx->execution_count = 0;
    queue_kick(ctx);
}

static void kernel_kill(struct ictx *ctx)
{
    struct scmd *k = ctx->kernel;
    kernel_pidfd_close(ctx);
    if (!k)
        return;
    ctx->kernel = NULL;
    for (struct icall *c = ctx->queue; c; c = c->next)
        if (c->held) {
            c->held = false;
            scmd_hold(k, false);
        }
    scmd_detach(k, ctx);
    err_t err;
    scmd_signal(k, SIGKILL, &err); /* its whole tree; the command ends on its own */
}

/* Before each execution: the context's limits fitted to what the rest of its sandbox holds now.
 * A failure costs the protection, not the execution: said once per context. */
static void context_fit(struct ictx *ctx)
{
    err_t err;
    if (!ctx->sb->have_jail || !ctx->kernel)
        return;
    if (share_fit(&ctx->sb->jail, ctx->kernel->group, SBX_PIDS, !ctx->share_pids, &err) == 0)
        ctx->share_pids = true;
    else if (!ctx->share_warned) {
        ctx->share_warned = true;
        fprintf(stderr, "hutch serve: sandbox %s: context %s: its share of the sandbox: %s\n",
                ctx->sb->id, ctx->id, err.msg);
    }
}

/* The next execute is sent when the kernel is ready and none runs; a kernel is started when
 * one waits and none runs. */
static void queue_kick(struct ictx *ctx)
{
    while (ctx->queue && !ctx->queue->sent && !ctx->queue->x) { /* gone before it ran */
        icall_finish(ctx->queue);
    }
    struct icall *c = ctx->queue;
    if (!c || c->sent || ctx->promoting || ctx->marker)
        return;
    err_t err;
    if (!ctx->kernel) {
        if (kernel_start(ctx, &err) < 0)
            fail_calls(ctx, "KernelError", err.msg);
        return;
    }
    if (!ctx->ready)
        return;
    /* the count in the id: a daemon after a restart finds it in the replayed output */
    char hex[33];
    random_hex(hex, 16);
    snprintf(c->exec_id, sizeof c->exec_id, "%u-%s", ctx->execution_count + 1, hex);
    size_t n;
    char *s = interp_execute_request(&c->exec, c->exec_id, &n);
    if (!s) {
        exec_error(c, "KernelError", "out of memory");
        icall_finish(c);
        queue_kick(ctx);
        return;
    }
    context_fit(ctx);
    int rc = scmd_input(ctx->kernel, false, (const uint8_t *)s, n, &err);
    free(s);
    if (rc < 0) {
        exec_error(c, "KernelError", err.msg);
        icall_finish(c);
        queue_kick(ctx);
        return;
    }
    c->sent = true;
    ctx->execution_count++;
    exec_write(c, json_pack("{s:s,s:i}", "type", "number_of_executions", "execution_count",
                            (json_int_t)ctx->execution_count));
}

/* ---------- the routes ---------- */

/* A create or restart waits for the kernel's ready, d->kernel_ready_ms at most (exec_timer). */
static void ready_wait(struct icall *c, struct ictx *ctx)
{
    c->ctx = ctx;
    c->next = ctx->waiters;
    ctx->waiters = c;
    if (!c->timer_open && uv_timer_init(c->d->loop, &c->timer) == 0) {
        c->timer.data = c;
        c->timer_open = true;
    }
    if (c->timer_open)
        uv_timer_start(&c->timer, exec_timer, c->d->kernel_ready_ms, 0);
}

static struct icall *icall_new(struct serve *d, struct sbx *sb, struct http_exchange *x,
                               enum icall_op op)
{
    struct icall *c = calloc(1, sizeof *c);
    if (!c) {
        http_respond_error(x, 500, "out of memory");
        return NULL;
    }
    c->d = d;
    c->x = x;
    c->op = op;
    snprintf(c->sandbox_id, sizeof c->sandbox_id, "%s", sb->id);
    http_exchange_set_callbacks(x, &icall_callbacks, c);
    return c;
}

static void exec_accept(struct icall *c, struct ictx *ctx)
{
    c->ctx = ctx;
    static const struct http_header h[] = {{"Content-Type", "application/x-ndjson"}};
    http_respond_start(c->x, 200, h, 1, -1);
    c->responded = true;
    c->last_write_ms = uv_now(c->d->loop);
    if (uv_timer_init(c->d->loop, &c->timer) == 0) {
        c->timer.data = c;
        c->timer_open = true;
        uv_timer_start(&c->timer, exec_timer, KEEPALIVE_MS, 0);
    }
    struct icall **tail = &ctx->queue;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
    c->queued = true;
    queue_kick(ctx);
}

static void execute_parsed(struct icall *c, struct sbx *sb);

static void do_execute(struct icall *c, struct sbx *sb)
{
    err_t err;
    if (interp_execute_parse(c->body, c->len, &c->exec, &err) < 0) {
        http_respond_error(c->x, 400, "%s", err.msg);
        return;
    }
    execute_parsed(c, sb);
}

/* An execute whose request is parsed (c->exec) goes to its context, or is answered. */
static void execute_parsed(struct icall *c, struct sbx *sb)
{
    struct ictx *ctx;
    if (c->exec.context_id) {
        ctx = context_find(sb, c->exec.context_id);
        if (!ctx) {
            respond_not_found(c->x, c->exec.context_id);
            return;
        }
    } else {
        const struct language *l =
            c->exec.language ? language_find(c->exec.language) : &languages[0];
        if (!l) {
            http_respond_error(c->x, 400, "language '%.64s' is not supported", c->exec.language);
            return;
        }
        ctx = default_context(sb, l);
        if (!ctx) {
            http_respond_error(c->x, 429, "this sandbox has %d contexts already", CONTEXTS_MAX);
            return;
        }
    }
    exec_accept(c, ctx);
}

/* A spare whose kernel never got ready (a hostile startup file, say) is killed and freed: no
 * create waits for it, and it would hold its processes for good. */
static void spare_timed_out(uv_timer_t *t)
{
    struct ictx *ctx = t->data;
    if (!ctx || !ctx->spare || ctx->ready || !ctx->kernel)
        return;
    fprintf(stderr, "hutch serve: sandbox %s: its spare %s kernel did not get ready: killed\n",
            ctx->sb->id, ctx->lang->name);
    kernel_kill(ctx);
    kernel_lost(ctx, "the spare kernel did not get ready", true);
}

/* The sandbox's spares: a kernel started ahead of the next create of a context of its language
 * with the default cwd, which takes it. Python's is forked from the host's zygote (about 50 ms of
 * a fork and a kernel's start, here, no longer waited for); javascript's and typescript's start
 * cold (node: 0.2 s). One a language, once a create of that language was made. */
static void spare_ensure(struct sbx *sb)
{
    struct interp_state *st = sb->interp;
    if (!st || !st->want_spare || sb->killing || sb->gone || sb->state != SANDBOX_RUNNING)
        return;
    for (const struct language *l = languages; l < languages + LANGUAGES; l++) {
        if (!(st->want_spare & language_bit(l)) || !l->spare || spare_of(st, l) ||
            (l->zygote && !(st->host && host_zygote_available(sb->d))) ||
            !language_available(sb->d, l))
            continue;
        struct ictx *spare = context_new(sb, l, NULL, false);
        if (!spare)
            return;
        spare->spare = true;
        spare->warm_up = true; /* its first execution's cost ahead (page faults, JIT) */
        err_t err;
        if (kernel_start(spare, &err) < 0) {
            fprintf(stderr, "hutch serve: sandbox %s: a spare %s kernel: %s\n", sb->id, l->name,
                    err.msg);
            context_free(spare);
            continue;
        }
        spare->spare_timer = malloc(sizeof *spare->spare_timer);
        if (spare->spare_timer && uv_timer_init(sb->d->loop, spare->spare_timer) < 0) {
            free(spare->spare_timer);
            spare->spare_timer = NULL;
        }
        if (spare->spare_timer) {
            spare->spare_timer->data = spare;
            uv_timer_start(spare->spare_timer, spare_timed_out, sb->d->kernel_ready_ms, 0);
        }
    }
}

/* A create of a context with the default cwd takes its language's spare: it becomes a context,
 * made now (the last in the list), and the create is answered once the marker's execution
 * ended. */
static struct ictx *spare_take(struct sbx *sb, const struct language *l, const char *cwd)
{
    struct interp_state *st = sb->interp;
    struct ictx *ctx = spare_of(st, l);
    if (!ctx || (cwd && strcmp(cwd, ctx->cwd) != 0) || !ctx->kernel || ctx->doomed)
        return NULL;
    context_unlink(st, ctx);
    context_append(st, ctx); /* made now */
    ctx->spare = false;
    ctx->promoting = true;
    return ctx;
}

static void do_create(struct icall *c, struct sbx *sb)
{
    struct interp_context_request r;
    err_t err;
    if (interp_context_parse(c->body, c->len, &r, &err) < 0) {
        http_respond_error(c->x, 400, "%s", err.msg);
        return;
    }
    const struct language *l = r.language ? language_find(r.language) : &languages[0];
    if (!l) {
        http_respond_error(c->x, 400,
                           "language '%.64s' is not supported: python, javascript (js), "
                           "typescript (ts), bash, r or java",
                           r.language);
        interp_context_free(&r);
        return;
    }
    if (!language_available(sb->d, l)) {
        http_respond_error(c->x, 400,
                           "language '%s' is not available: this daemon has no %s kernel", l->name,
                           l->name);
        interp_context_free(&r);
        return;
    }
    struct interp_state *st = state_of(sb, true);
    struct ictx *ctx = st ? spare_take(sb, l, r.cwd) : NULL;
    if (ctx) {
        interp_context_free(&r);
        ready_wait(c, ctx);
        if (ctx->ready && !ctx->marker) /* else once it is, or its warm-up ended */
            marker_send(ctx, MARKER_PROMOTION, true);
        /* the next one now, beside the promotion: started at its answer instead, creates back
         * to back waited twice as long (35-40 against 17-20 ms) */
        spare_ensure(sb);
        return;
    }
    ctx = context_new(sb, l, r.cwd, false);
    interp_context_free(&r);
    if (!ctx) {
        http_respond_error(c->x, 429, "this sandbox has %d contexts already", CONTEXTS_MAX);
        return;
    }
    if (kernel_start(ctx, &err) < 0) {
        http_respond_error(c->x, 500, "context %s: %s", ctx->id, err.msg);
        context_free(ctx);
        return;
    }
    ready_wait(c, ctx); /* its answer starts the language's spare */
}

/* The context's kernel killed, its calls ended, and then (restart) a new kernel or (delete)
 * the context gone. */
static void context_stop(struct ictx *ctx, const char *why)
{
    kernel_kill(ctx);
    fail_calls(ctx, "ContextRestarted", why);
    ctx->ready = false;
    ctx->execution_count = 0;
}

static void do_restart(struct icall *c, struct sbx *sb)
{
    struct ictx *ctx = context_find(sb, c->ctx_id);
    if (!ctx) {
        respond_not_found(c->x, c->ctx_id);
        return;
    }
    context_stop(ctx, "the context was restarted");
    err_t err;
    if (kernel_start(ctx, &err) < 0) {
        http_respond_error(c->x, 500, "context %s: %s", ctx->id, err.msg);
        return;
    }
    ready_wait(c, ctx);
}

static int on_body_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    (void)x;
    struct icall *c = user;
    return http_body_append(&c->body, &c->len, data, len);
}

static void on_body_complete(struct http_exchange *x, void *user)
{
    struct icall *c = user;
    struct sbx *sb = sbx_find(c->d, c->sandbox_id);
    if (!sb || sb->gone || sb->killing || sb->state != SANDBOX_RUNNING) {
        http_respond_error(x, 502, "sandbox %s is not running", c->sandbox_id);
        return;
    }
    if (c->op == ICALL_EXECUTE)
        do_execute(c, sb);
    else if (c->op == ICALL_CREATE)
        do_create(c, sb);
    else
        do_restart(c, sb);
}

static const struct http_body_callbacks body_callbacks = {on_body_data, on_body_complete};

static void do_list(struct http_exchange *x, struct sbx *sb)
{
    struct interp_state *st = state_of(sb, true);
    json_t *a = json_array();
    for (struct ictx *c = st ? st->contexts : NULL; c; c = c->next)
        if (!c->spare)
            json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "id", c->id, "language",
                                               c->lang->name, "cwd", c->cwd));
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    respond_json_text(x, 200, s);
    free(s);
}

static void do_delete(struct http_exchange *x, struct sbx *sb, const char *id)
{
    struct ictx *ctx = context_find(sb, id);
    if (!ctx) {
        respond_not_found(x, id);
        return;
    }
    context_stop(ctx, "the context was removed");
    context_free(ctx);
    http_respond(x, 204, NULL, 0, NULL, 0);
}

/* "/contexts/ID" or "/contexts/ID/restart": the id into out (a context id's characters only). */
static bool context_path(const char *path, char out[40], const char **rest)
{
    static const char prefix[] = "/contexts/";
    if (strncmp(path, prefix, sizeof prefix - 1) != 0)
        return false;
    path += sizeof prefix - 1;
    size_t n = strcspn(path, "/");
    if (n == 0 || n >= 40)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((path[i] >= '0' && path[i] <= '9') || (path[i] >= 'a' && path[i] <= 'z') ||
              (path[i] >= 'A' && path[i] <= 'Z') || path[i] == '-' || path[i] == '_'))
            return false;
    memcpy(out, path, n);
    out[n] = '\0';
    *rest = path + n;
    return true;
}

void interp_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                  const struct http_request *req)
{
    const char *path = req->path;
    const char *m = req->method;
    char id[40];
    const char *rest = NULL;
    if (strcmp(path, "/health") == 0 && strcmp(m, "GET") == 0) {
        static const struct http_header h[] = {{"Content-Type", "application/json"}};
        http_respond(x, 200, h, 1, "\"OK\"", 4);
        return;
    }
    if (!d->interp_path[0]) {
        http_respond_error(x, 501,
                           "this daemon has no code interpreter kernels (src/interp was not "
                           "found; see HUTCH_INTERP)");
        return;
    }
    struct icall *c = NULL;
    uint64_t max = CONTEXT_BODY_MAX;
    if (strcmp(path, "/execute") == 0 && strcmp(m, "POST") == 0) {
        c = icall_new(d, sb, x, ICALL_EXECUTE);
        max = EXECUTE_BODY_MAX;
    } else if (strcmp(path, "/contexts") == 0 && strcmp(m, "POST") == 0) {
        c = icall_new(d, sb, x, ICALL_CREATE);
    } else if (strcmp(path, "/contexts") == 0 && strcmp(m, "GET") == 0) {
        do_list(x, sb);
        return;
    } else if (context_path(path, id, &rest) && rest[0] == '\0' && strcmp(m, "DELETE") == 0) {
        do_delete(x, sb, id);
        return;
    } else if (context_path(path, id, &rest) && strcmp(rest, "/restart") == 0 &&
               strcmp(m, "POST") == 0) {
        c = icall_new(d, sb, x, ICALL_RESTART);
        if (c)
            snprintf(c->ctx_id, sizeof c->ctx_id, "%s", id);
    } else if (strncmp(path, "/contexts/", 10) == 0) {
        respond_not_found(x, path + 10);
        return;
    } else {
        http_respond_error(x, 404, "%s %s: no such route on the code interpreter's port", m, path);
        return;
    }
    if (c)
        http_exchange_on_body(x, max, &body_callbacks, c);
}

/* A default context's kernel started now, before any call asks for it. */
static void warm_default(struct sbx *sb, const struct language *lang)
{
    struct ictx *ctx = default_context(sb, lang);
    err_t err;
    if (ctx)
        ctx->warm_up = lang->zygote; /* a fork's first execution: its page faults ahead */
    if (ctx && !ctx->kernel && kernel_start(ctx, &err) < 0)
        fprintf(stderr, "hutch serve: sandbox %s: its %s kernel: %s\n", sb->id, lang->name,
                err.msg);
}

void interp_warm(struct sbx *sb, enum interp_warmth warmth)
{
    struct interp_state *st = state_of(sb, true);
    if (!st || warmth == INTERP_COLD)
        return;
    /* the host's zygote, which has the data stack imported for every sandbox: the default
     * python context's kernel forked from it now, so that a first runCode finds it ready */
    host_zygote_want(sb->d);
    if (host_zygote_available(sb->d)) {
        interp_host_zygote(sb);
        warm_default(sb, &languages[0]);
    } else if (!st->zygote) {
        /* else a zygote of its own only: the default contexts' kernels are forked from it at
         * their first use (one started now would start cold, beside the zygote's imports) */
        st->preload = true;
        zygote_start(sb);
    }
    if (warmth == INTERP_WARM_ALL) {
        warm_default(sb, &languages[1]);               /* node, started cold: it has no zygote */
        st->want_spare |= language_bit(&languages[0]); /* a python kernel for the first create */
        spare_ensure(sb);
    }
}

void interp_run(struct sbx *sb, struct http_exchange *x, struct interp_execute *e,
                void (*over)(void *user), void *user)
{
    struct icall *c = icall_new(sb->d, sb, x, ICALL_EXECUTE);
    if (!c) {
        interp_execute_free(e);
        over(user);
        return;
    }
    c->exec = *e;
    *e = (struct interp_execute){0};
    c->over = over;
    c->over_user = user;
    free(c->exec.context_id); /* a run has no context of its own choosing */
    c->exec.context_id = NULL;
    execute_parsed(c, sb); /* answered at once (a language it does not know): over at its end */
}

void interp_no_zygote(struct sbx *sb)
{
    struct interp_state *st = state_of(sb, true);
    if (st)
        st->zygote_starts = ZYGOTE_STARTS_MAX;
}

void interp_host_zygote(struct sbx *sb)
{
    struct interp_state *st = state_of(sb, true);
    if (st) {
        st->zygote_starts = ZYGOTE_STARTS_MAX;
        st->host = true;
    }
}

void interp_claimed(struct sbx *sb, const char *env_json)
{
    struct interp_state *st = sb->interp;
    size_t n;
    char *line = st ? interp_environment_request(env_json, &n) : NULL;
    if (!line)
        return;
    for (struct ictx *ctx = st->contexts, *next; ctx; ctx = next) {
        next = ctx->next; /* a spare lost here is freed */
        if (!ctx->kernel)
            continue;
        /* ready: nothing runs, the line comes before any execute; else its start is killed,
         * and the kernel started again at its first use has them from its start */
        static const char why[] = "the kernel started before its sandbox's env vars were set";
        if (ctx->ready) {
            kernel_send(ctx, line, n, why, true);
        } else {
            kernel_kill(ctx);
            kernel_lost(ctx, why, true);
        }
    }
    free(line);
    spare_ensure(sb); /* again, if its spare was one of those */
}

bool interp_warm_ready(struct sbx *sb)
{
    struct interp_state *st = sb->interp;
    if (!st || !(st->host ? host_zygote_ready(sb->d) : st->zygote && st->zygote_ready))
        return false;
    uint64_t now = uv_now(sb->d->loop);
    for (struct ictx *ctx = st->contexts; ctx; ctx = ctx->next)
        if (ctx->kernel && !ctx->ready && now - ctx->kernel_started_ms < WARM_READY_WAIT_MS)
            return false;
    return true;
}

void interp_release_all(struct sbx *sb, const char *why)
{
    struct interp_state *st = sb->interp;
    if (!st)
        return;
    while (st->contexts) {
        struct ictx *ctx = st->contexts;
        if (ctx->kernel) {
            scmd_detach(ctx->kernel, ctx);
            ctx->kernel = NULL;
        }
        fail_calls(ctx, "SandboxError", why);
        context_free(ctx);
    }
    if (st->zygote)
        scmd_detach(st->zygote, sb);
    free(st);
    sb->interp = NULL;
}
