/* One-shot code runs (oneshot.h). */
#include "serve/oneshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/control_json.h"
#include "api/interp_json.h"
#include "serve/host_zygote.h"
#include "serve/interp.h"
#include "serve/pool.h"
#include "serve/sandbox.h"

#define ONESHOT_BODY_MAX   (2u << 20)
#define ONESHOT_TIMEOUT_MS 60000 /* E2B's runCode default: the sandbox lives no longer */

struct oneshot {
    struct serve *d;
    struct http_exchange *x; /* NULL once the client went, or once interp_run took it */
    char *body;
    size_t len;
    struct interp_execute exec;
    struct store_sandbox row;
    bool creating;    /* its sandbox is being made: freed by the create's end */
    uv_timer_t later; /* the kill after the run, outside the call that said it was over */
};

static void oneshot_free(struct oneshot *o)
{
    free(o->body);
    interp_execute_free(&o->exec);
    free(o);
}

static void later_closed(uv_handle_t *h)
{
    oneshot_free(h->data);
}

static void kill_now(uv_timer_t *t)
{
    struct oneshot *o = t->data;
    struct sbx *sb = sbx_find(o->d, o->row.id);
    if (sb && !sb->killing && !sb->gone)
        sbx_kill(sb, "its one-shot run ended", NULL, NULL);
    uv_close((uv_handle_t *)t, later_closed);
}

/* The run is over: its sandbox goes, from the loop's next turn (the kernel's message that ended
 * the run is still being handled). */
static void run_over(void *user)
{
    struct oneshot *o = user;
    if (uv_timer_init(o->d->loop, &o->later) < 0) { /* it does not fail: it only sets fields */
        struct sbx *sb = sbx_find(o->d, o->row.id);
        if (sb && !sb->killing && !sb->gone)
            sbx_kill(sb, "its one-shot run ended", NULL, NULL);
        oneshot_free(o);
        return;
    }
    o->later.data = o;
    uv_timer_start(&o->later, kill_now, 0, 0);
}

static void run_in(struct oneshot *o, struct sbx *sb)
{
    struct http_exchange *x = o->x;
    o->x = NULL;
    interp_run(sb, x, &o->exec, run_over, o);
}

static void created(struct sbx *sb, int rc, const char *message, void *user)
{
    struct oneshot *o = user;
    o->creating = false;
    if (!o->x) { /* the client went meanwhile */
        if (rc == 0)
            sbx_kill(sb, "its one-shot run's client went away before it was ready", NULL, NULL);
        oneshot_free(o);
        return;
    }
    if (rc < 0) {
        http_respond_error(o->x, 500, "a sandbox for the run: %s", message ? message : "failed");
        return;
    }
    /* its kernel from the host's zygote, or cold: never a zygote of its own */
    interp_host_zygote(sb);
    run_in(o, sb);
}

static void on_exchange_end(struct http_exchange *x, void *user)
{
    struct oneshot *o = user;
    o->x = NULL;
    if (!o->creating)
        oneshot_free(o);
}

static const struct http_exchange_callbacks callbacks = {.on_done = on_exchange_end,
                                                         .on_abort = on_exchange_end};

static int on_body_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    struct oneshot *o = user;
    return http_body_append(&o->body, &o->len, data, len);
}

static void on_body_complete(struct http_exchange *x, void *user)
{
    struct oneshot *o = user;
    err_t err;
    if (interp_execute_parse(o->body, o->len, &o->exec, &err) < 0) {
        http_respond_error(x, 400, "%s", err.msg);
        return;
    }
    if (o->exec.context_id) {
        http_respond_error(x, 400, "a one-shot run has no context_id: it runs in a fresh one");
        return;
    }
    struct store_sandbox *r = &o->row;
    api_sandbox_id_new(r->id);
    snprintf(r->template_id, sizeof r->template_id, "base");
    snprintf(r->alias, sizeof r->alias, "%s", POOL_TEMPLATE);
    r->state = SANDBOX_CREATING;
    r->created_ms = sbx_wall_ms();
    r->deadline_ms = r->created_ms + ONESHOT_TIMEOUT_MS;
    r->cpu_count = SBX_CPU_COUNT;
    r->memory_mb = SBX_MEMORY_MB;
    r->disk_mb = SBX_DISK_MB;
    r->metadata_json = "{\"hutch.run\":\"one-shot\"}";
    r->env_json = "{}";
    if (auth_token_new("", r->envd_token, sizeof r->envd_token) < 0) {
        http_respond_error(x, 500, "no random token");
        return;
    }
    /* One of the warm pool (its kernel forked from the host's zygote, or from the sandbox's own
     * where there is no host's), else a fresh one (the host's zygote's, or cold). */
    host_zygote_want(o->d);
    pool_wanted(o->d, POOL_ONE_SHOT);
    struct sbx *sb = pool_take(o->d, POOL_ONE_SHOT, r, &err);
    if (sb) {
        run_in(o, sb);
        return;
    }
    if (sbx_create(o->d, r, created, o, &err) < 0) {
        http_respond_error(x, 500, "a sandbox for the run: %s", err.msg);
        return;
    }
    o->creating = true;
}

static const struct http_body_callbacks body_callbacks = {on_body_data, on_body_complete};

void oneshot_route(struct serve *d, struct http_exchange *x, const struct http_request *req)
{
    struct oneshot *o = calloc(1, sizeof *o);
    if (!o) {
        http_respond_error(x, 500, "out of memory");
        return;
    }
    o->d = d;
    o->x = x;
    http_exchange_set_callbacks(x, &callbacks, o);
    http_exchange_on_body(x, ONESHOT_BODY_MAX, &body_callbacks, o);
}
