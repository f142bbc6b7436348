/* Routing and E2B's control plane (routes.h): each request is found its handler by method and
 * path; control-plane requests need an API key; envd's (routed by the E2b-Sandbox-Id header)
 * go to envd_routes. Every answer that is not a success is E2B's {"code": N, "message": ...}. */
#include "serve/routes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/auth.h"
#include "api/control_json.h"
#include "api/metrics_json.h"
#include "api/sandbox_logs.h"
#include "http/http.h"
#include "serve/interp.h"
#include "serve/metrics.h"
#include "serve/oneshot.h"
#include "serve/pool.h"
#include "serve/sandbox.h"
#include "util/strfmt.h"

#define ROUTE_MAX_BODY   (2u << 20) /* a control-plane body: metadata and env vars fit */
#define ROUTE_MAX_SEGS   6
#define ROUTE_LIST_ITEMS API_LIST_LIMIT_MAX

static const char *const templates[] = {"base", "code-interpreter-v1"};

/* One control-plane exchange: its body gathered whole, then its handler; a handler that waits
 * for a sandbox's step keeps it until both have ended. */
struct call {
    struct serve *d;
    struct http_exchange *x; /* NULL once the exchange ended */
    char method[8];
    char segs[ROUTE_MAX_SEGS][STORE_ID_MAX + 1];
    size_t n_segs;
    char query[4096];
    char *body;
    size_t len;
    bool waiting; /* on a sandbox step */
    void (*handler)(struct call *c);
    struct store_sandbox row; /* create's */
    int status_ok;            /* connect's 200 or 201 */
    struct api_connect connect;
    bool v2; /* the path began with v2/ (normalize) */
};

static void call_free(struct call *c)
{
    free(c->body);
    store_sandbox_free_fields(&c->row);
    free(c);
}

static void on_done(struct http_exchange *x, void *user)
{
    struct call *c = user;
    c->x = NULL;
    if (!c->waiting)
        call_free(c);
}

static const struct http_exchange_callbacks call_callbacks = {
    .on_done = on_done,
    .on_abort = on_done,
};

static void respond_json(struct call *c, int status, const char *json)
{
    static const struct http_header h[] = {{"Content-Type", "application/json"}};
    if (c->x)
        http_respond(c->x, status, h, 1, json, strlen(json));
}

static void respond_empty(struct call *c, int status)
{
    if (c->x)
        http_respond(c->x, status, NULL, 0, NULL, 0);
}

/* An error: status from errnum where it says more than the caller's default. */
static void respond_err(struct call *c, int status, const err_t *err)
{
    if (c->x)
        http_respond_error(c->x, status, "%s", err->msg);
}

static void respond_sandbox(struct call *c, int status, const char *id, enum api_sandbox_view view)
{
    struct store_sandbox row = {0};
    err_t err;
    if (store_sandbox_get(c->d->store, id, &row, &err) < 0) {
        respond_err(c, err.errnum == ENOENT ? 404 : 500, &err);
        return;
    }
    char *json = api_sandbox_json(&row, view, SERVE_ENVD_VERSION, &err);
    store_sandbox_free_fields(&row);
    if (!json) {
        respond_err(c, 500, &err);
        return;
    }
    respond_json(c, status, json);
    free(json);
}

/* The live sandbox a path names, or an answer: 404 for one that is unknown or has ended (one
 * whose processes are being killed for a pause without memory is paused, not ending). */
static struct sbx *live_or_404(struct call *c, const char *id)
{
    struct sbx *sb = sbx_find(c->d, id);
    if (!sb || sb->pooled || (sb->killing && !sb->cold_stopping)) {
        if (c->x)
            http_respond_error(c->x, 404, "sandbox %s not found", id);
        return NULL;
    }
    return sb;
}

/* A sandbox step this call waits for has ended. */
static bool step_ended(struct call *c)
{
    c->waiting = false;
    if (!c->x) {
        call_free(c);
        return false;
    }
    return true;
}

/* ---------- create ---------- */

static void created(struct sbx *sb, int rc, const char *message, void *user)
{
    struct call *c = user;
    bool client = c->x != NULL;
    char id[STORE_ID_MAX + 1];
    snprintf(id, sizeof id, "%s", c->row.id);
    if (!step_ended(c)) {
        /* the client went away meanwhile: nobody knows its id, so it goes */
        if (rc == 0 && !client)
            sbx_kill(sb, "its creator went away before it was ready", NULL, NULL);
        return;
    }
    if (rc < 0) {
        http_respond_error(c->x, 500, "sandbox %s: %s", id, message ? message : "failed");
        return;
    }
    /* the template made for code: its default contexts warm before the first runCode */
    if (strcmp(c->row.alias, "code-interpreter-v1") == 0)
        interp_warm(sb, INTERP_WARM_PYTHON);
    respond_sandbox(c, 201, id, API_SANDBOX_CREATED);
}

static void handle_create(struct call *c)
{
    err_t err;
    struct api_new_sandbox ns = {0};
    if (api_new_sandbox_parse(c->body ? c->body : "", c->len, &ns, &err) < 0) {
        respond_err(c, 400, &err);
        return;
    }
    bool known = false;
    for (size_t i = 0; i < sizeof templates / sizeof *templates; i++)
        known |= strcmp(ns.template_id, templates[i]) == 0;
    if (!known) {
        http_respond_error(c->x, 404, "template '%s' not found", ns.template_id);
        api_new_sandbox_free(&ns);
        return;
    }
    struct store_sandbox *r = &c->row;
    api_sandbox_id_new(r->id);
    snprintf(r->template_id, sizeof r->template_id, "base");
    snprintf(r->alias, sizeof r->alias, "%s", ns.template_id);
    r->state = SANDBOX_CREATING;
    r->created_ms = sbx_wall_ms();
    r->deadline_ms = r->created_ms + ns.timeout_s * 1000;
    r->cpu_count = ns.cpu_count ? ns.cpu_count : SBX_CPU_COUNT; /* hutch's extensions */
    r->memory_mb = ns.memory_mb ? ns.memory_mb : SBX_MEMORY_MB;
    r->disk_mb = ns.disk_mb ? ns.disk_mb : SBX_DISK_MB;
    r->auto_pause = ns.auto_pause;
    r->auto_pause_cold = ns.auto_pause_cold;
    r->auto_resume = ns.auto_resume;
    bool ns_sized = ns.cpu_count || ns.memory_mb || ns.disk_mb;
    r->metadata_json = ns.metadata_json;
    r->env_json = ns.env_json;
    ns.metadata_json = ns.env_json = NULL; /* the row owns them now */
    api_new_sandbox_free(&ns);
    if (auth_token_new("", r->envd_token, sizeof r->envd_token) < 0) {
        http_respond_error(c->x, 500, "no random token");
        return;
    }
    pool_wanted(c->d, r->alias);
    /* one made ahead, unless other sizes were asked for */
    if (!ns_sized && pool_take(c->d, r->alias, r, &err)) {
        respond_sandbox(c, 201, r->id, API_SANDBOX_CREATED);
        return;
    }
    c->waiting = true;
    if (sbx_create(c->d, r, created, c, &err) < 0) {
        c->waiting = false;
        respond_err(c, 500, &err);
    }
}

/* ---------- get, list ---------- */

static void handle_get(struct call *c)
{
    struct sbx *sb = live_or_404(c, c->segs[1]);
    if (sb)
        respond_sandbox(c, 200, sb->id, API_SANDBOX_DETAIL);
}

struct list_out {
    const struct api_list_query *q;
    char **items;
    char (*ids)[STORE_ID_MAX + 1];
    size_t n;
    bool failed;
};

static void list_row(const struct store_sandbox *row, void *ctx)
{
    struct list_out *l = ctx;
    if (l->failed || l->n > l->q->limit || !api_metadata_matches(row->metadata_json, l->q) ||
        pool_marked(row->metadata_json)) /* the warm pool's are nobody's */
        return;
    err_t err;
    l->items[l->n] = api_sandbox_json(row, API_SANDBOX_LISTED, SERVE_ENVD_VERSION, &err);
    if (!l->items[l->n])
        l->failed = true;
    else
        snprintf(l->ids[l->n++], sizeof l->ids[0], "%s", row->id);
}

static void handle_list(struct call *c)
{
    err_t err;
    struct api_list_query *q = calloc(1, sizeof *q);
    if (!q || api_list_query_parse(c->query, q, &err) < 0) {
        if (q)
            respond_err(c, 400, &err);
        else
            http_respond_error(c->x, 500, "out of memory");
        free(q);
        return;
    }
    struct list_out l = {.q = q,
                         .items = calloc(q->limit + 1, sizeof(char *)),
                         .ids = calloc(q->limit + 1, sizeof *l.ids)};
    struct store_list_filter f = {
        .states = q->states,
        .template_id = q->template_id[0] ? q->template_id : NULL,
        .created_after_ms = q->started_after_ms,
        .oldest_first = q->oldest_first,
        .limit = q->n_metadata ? 0 : q->limit + 1, /* one more: is there a next page? */
        .after_id = q->next_token[0] ? q->next_token : NULL,
    };
    if (!l.items || !l.ids || store_sandbox_list(c->d->store, &f, list_row, &l, &err) < 0 ||
        l.failed) {
        if (l.items && l.ids)
            respond_err(c, 500, &err);
        else
            http_respond_error(c->x, 500, "out of memory");
    } else {
        bool more = l.n > q->limit;
        size_t shown = more ? q->limit : l.n, total = 3;
        for (size_t i = 0; i < shown; i++)
            total += strlen(l.items[i]) + 1;
        char *body = malloc(total);
        if (!body) {
            http_respond_error(c->x, 500, "out of memory");
        } else {
            size_t at = 0;
            body[at++] = '[';
            for (size_t i = 0; i < shown; i++) {
                if (i)
                    body[at++] = ',';
                size_t n = strlen(l.items[i]);
                memcpy(body + at, l.items[i], n);
                at += n;
            }
            body[at++] = ']';
            body[at] = '\0';
            /* the next page starts after the last one shown */
            struct http_header h[2] = {{"Content-Type", "application/json"}};
            size_t n_h = 1;
            if (more && shown)
                h[n_h++] = (struct http_header){"X-Next-Token", l.ids[shown - 1]};
            http_respond(c->x, 200, h, n_h, body, at);
            free(body);
        }
    }
    for (size_t i = 0; l.items && i < l.n; i++)
        free(l.items[i]);
    free(l.items);
    free(l.ids);
    free(q);
}

/* ---------- kill, timeout, pause, connect ---------- */

static void killed(struct sbx *sb, int rc, const char *message, void *user)
{
    struct call *c = user;
    if (step_ended(c))
        respond_empty(c, 204);
}

static void handle_kill(struct call *c)
{
    struct sbx *sb = live_or_404(c, c->segs[1]);
    if (!sb)
        return;
    c->waiting = true;
    sbx_kill(sb, "killed through the API", killed, c);
}

static void handle_timeout(struct call *c)
{
    err_t err;
    int64_t timeout_s;
    if (api_timeout_parse(c->body ? c->body : "", c->len, &timeout_s, &err) < 0) {
        respond_err(c, 400, &err);
        return;
    }
    struct sbx *sb = live_or_404(c, c->segs[1]);
    if (!sb)
        return;
    if (sbx_set_deadline(sb, sbx_wall_ms() + timeout_s * 1000, &err) < 0)
        respond_err(c, 500, &err);
    else
        respond_empty(c, 204);
}

static void paused(struct sbx *sb, int rc, const char *message, void *user)
{
    struct call *c = user;
    if (!step_ended(c))
        return;
    if (rc < 0)
        http_respond_error(c->x, 500, "sandbox %s: %s", sb->id, message);
    else
        respond_empty(c, 204);
}

static void handle_pause(struct call *c)
{
    err_t err;
    bool keep_memory = true;
    if (api_pause_parse(c->body ? c->body : "", c->len, &keep_memory, &err) < 0) {
        respond_err(c, 400, &err);
        return;
    }
    struct sbx *sb = live_or_404(c, c->segs[1]);
    if (!sb)
        return;
    c->waiting = true;
    /* without memory: every process killed, the files kept; a resume boots it again */
    if ((keep_memory ? sbx_pause(sb, paused, c, &err) : sbx_pause_cold(sb, paused, c, &err)) < 0) {
        c->waiting = false;
        respond_err(c, 409, &err); /* already paused, or busy */
    }
}

/* connect's timeout counts from now and only ever extends the deadline, as E2B's does;
 * without one the deadline stays, and a resumed sandbox gets E2B's default from now. */
static int connect_deadline(const struct call *c, struct sbx *sb, int status, err_t *err)
{
    const struct api_connect *ac = &c->connect;
    int64_t until = ac->has_timeout ? sbx_wall_ms() + ac->timeout_s * 1000
                    : status == 201 ? sbx_wall_ms() + API_TIMEOUT_DEFAULT_S * 1000
                                    : 0;
    return until > sb->deadline_ms ? sbx_set_deadline(sb, until, err) : 0;
}

static void connect_respond(struct call *c, struct sbx *sb, int status)
{
    err_t err;
    if (connect_deadline(c, sb, status, &err) < 0) {
        respond_err(c, 500, &err);
        return;
    }
    respond_sandbox(c, status, sb->id, API_SANDBOX_CREATED);
}

static void booted(struct sbx *sb, int rc, const char *message, void *user)
{
    struct call *c = user;
    err_t err;
    /* the deadline it left with has passed: a new one whether or not the client still waits */
    int set = rc == 0 ? connect_deadline(c, sb, 201, &err) : 0;
    if (!step_ended(c))
        return;
    if (rc < 0)
        http_respond_error(c->x, 500, "sandbox %s: %s", sb->id, message ? message : "boot failed");
    else if (set < 0)
        respond_err(c, 500, &err);
    else
        respond_sandbox(c, 201, sb->id, API_SANDBOX_CREATED);
}

/* A reboot's first step is over (its memory dropped): the boot, as of a cold-paused one. */
static void memory_dropped(struct sbx *sb, int rc, const char *message, void *user)
{
    struct call *c = user;
    err_t err;
    if (rc == 0 && sbx_boot(sb, booted, c, &err) == 0)
        return; /* booted() answers */
    if (!step_ended(c))
        return;
    http_respond_error(c->x, 500, "sandbox %s: %s", sb->id,
                       rc < 0 ? (message ? message : "its processes could not be stopped")
                              : err.msg);
}

static void handle_connect(struct call *c)
{
    err_t err;
    struct api_connect ac = {0};
    if (api_connect_parse(c->body ? c->body : "", c->len, &ac, &err) < 0) {
        respond_err(c, 400, &err);
        return;
    }
    c->connect = ac;
    struct sbx *sb = live_or_404(c, c->segs[1]);
    if (!sb)
        return;
    if (ac.reboot && sb->state == SANDBOX_PAUSED && !sb->cold && !sb->booting) {
        /* memory: false (onResume "reboot"): its processes go, then it boots on its files */
        c->waiting = true;
        if (sbx_drop_memory(sb, memory_dropped, c, &err) < 0) {
            c->waiting = false;
            respond_err(c, err.errnum == EBUSY ? 409 : 500, &err);
        }
        return;
    }
    if (sb->state == SANDBOX_PAUSED && (sb->cold || sb->booting)) {
        /* paused without memory: a new init on the same disk layer, 201 once it runs */
        c->waiting = true;
        if (sbx_boot(sb, booted, c, &err) < 0) {
            c->waiting = false;
            respond_err(c, err.errnum == EBUSY ? 409 : 500, &err);
        }
        return;
    }
    int status = 200;
    if (sb->state == SANDBOX_PAUSED) {
        if (sbx_resume(sb, &err) < 0) {
            respond_err(c, 500, &err);
            return;
        }
        status = 201;
    } else if (sb->state != SANDBOX_RUNNING) {
        http_respond_error(c->x, 409, "sandbox %s is %s", sb->id, sandbox_state_name(sb->state));
        return;
    }
    connect_respond(c, sb, status);
}

/* ---------- metrics ---------- */

/* GET /sandboxes/{id}/metrics?start=&end=: the samples in [start, end] (unix seconds; by
 * default from the sandbox's start to now). A paused sandbox answers with what was sampled
 * before its pause. */
static void handle_metrics(struct call *c)
{
    err_t err;
    struct api_metrics_query q;
    if (api_metrics_query_parse(c->query, &q, &err) < 0) {
        respond_err(c, 400, &err);
        return;
    }
    struct sbx *sb = live_or_404(c, c->segs[1]);
    if (!sb)
        return;
    struct api_metric *m = malloc(METRICS_RING_MAX * sizeof *m);
    if (!m) {
        http_respond_error(c->x, 500, "out of memory");
        return;
    }
    size_t n = metrics_between(sb, q.has_start ? q.start_s : 0,
                               q.has_end ? q.end_s : API_METRICS_MAX_S, m, METRICS_RING_MAX);
    char *json = api_metrics_json(m, n, &err);
    free(m);
    if (!json) {
        respond_err(c, 500, &err);
        return;
    }
    respond_json(c, 200, json);
    free(json);
}

/* GET /sandboxes/metrics?sandbox_ids=a,b: each live sandbox's latest sample; unknown ones and
 * those without a sample yet are left out, as E2B leaves them. */
static void handle_metrics_list(struct call *c)
{
    err_t err;
    struct api_metrics_ids *ids = malloc(sizeof *ids);
    if (!ids) {
        http_respond_error(c->x, 500, "out of memory");
        return;
    }
    if (api_metrics_ids_parse(c->query, ids, &err) < 0) {
        respond_err(c, 400, &err);
        free(ids);
        return;
    }
    const struct api_metric *latest[API_METRICS_MAX_IDS];
    for (size_t i = 0; i < ids->n; i++) {
        struct sbx *sb = sbx_find(c->d, ids->ids[i]);
        latest[i] = sb && !sb->killing ? metrics_latest(sb) : NULL;
    }
    char *json = api_metrics_by_sandbox_json(ids->ids, latest, ids->n, &err);
    free(ids);
    if (!json) {
        respond_err(c, 500, &err);
        return;
    }
    respond_json(c, 200, json);
    free(json);
}

/* ---------- logs ---------- */

struct log_page {
    struct api_logs *l;
    const struct api_logs_query *q;
    err_t err;
    bool failed;
};

static int log_event(const struct store_event *ev, void *ctx)
{
    struct log_page *p = ctx;
    if (api_logs_offer(p->l, p->q, ev, &p->err) < 0) {
        p->failed = true;
        return 1;
    }
    return api_logs_count(p->l) >= p->q->limit;
}

/* A sandbox's event log, live or ended (the log is most read after the end: why it ended): v1's
 * SandboxLogs from start, or v2's entries from cursor either way, filtered by level and search. */
static void handle_logs(struct call *c)
{
    err_t err;
    struct api_logs_query q;
    struct store_sandbox row = {0};
    if ((c->v2 ? api_logs_v2_query_parse : api_logs_query_parse)(c->query, &q, &err) < 0) {
        respond_err(c, 400, &err);
        return;
    }
    if (store_sandbox_get(c->d->store, c->segs[1], &row, &err) < 0) {
        if (err.errnum == ENOENT)
            http_respond_error(c->x, 404, "sandbox %s not found", c->segs[1]);
        else
            respond_err(c, 500, &err);
        return;
    }
    store_sandbox_free_fields(&row);
    struct log_page p = {.l = api_logs_new(), .q = &q};
    struct store_event_range r = {
        .backward = q.backward, .from_seq = q.after_seq, .at_ms = q.start_ms};
    int n = p.l ? store_event_scan(c->d->store, c->segs[1], &r, log_event, &p, &err)
                : err_set(&err, ENOMEM, "logs");
    if (p.failed) {
        err = p.err;
        n = -1;
    }
    char *body = n < 0 ? NULL : c->v2 ? api_logs_v2_json(p.l, &err) : api_logs_json(p.l, &err);
    if (!body) {
        respond_err(c, 500, &err);
    } else {
        /* a full page may have a next one: it starts after (backward: before) its last event */
        char token[24];
        snprintf(token, sizeof token, "%lld", (long long)api_logs_last_seq(p.l));
        struct http_header h[2] = {{"Content-Type", "application/json"}, {"X-Next-Token", token}};
        http_respond(c->x, 200, h, api_logs_count(p.l) == q.limit ? 2 : 1, body, strlen(body));
    }
    free(body);
    api_logs_free(p.l);
}

static void handle_alias(struct call *c)
{
    for (size_t i = 0; i < sizeof templates / sizeof *templates; i++)
        if (strcmp(c->segs[2], templates[i]) == 0) {
            char body[256];
            snprintf(body, sizeof body, "{\"templateID\":\"%s\",\"public\":true}", templates[i]);
            respond_json(c, 200, body);
            return;
        }
    http_respond_error(c->x, 404, "template alias '%s' not found", c->segs[2]);
}

/* ---------- the table ---------- */

struct route {
    const char *method;
    const char *pattern[ROUTE_MAX_SEGS]; /* "*": a sandbox id or alias */
    void (*handler)(struct call *c);
    bool body;
};

static const struct route routes[] = {
    {"POST", {"v2", "sandboxes"}, handle_create, true},
    {"POST", {"sandboxes"}, handle_create, true},
    {"GET", {"v2", "sandboxes"}, handle_list, false},
    {"GET", {"sandboxes"}, handle_list, false},
    {"GET", {"sandboxes", "metrics"}, handle_metrics_list, false}, /* before sandboxes/ID */
    {"GET", {"sandboxes", "*"}, handle_get, false},
    {"GET", {"sandboxes", "*", "metrics"}, handle_metrics, false},
    {"DELETE", {"sandboxes", "*"}, handle_kill, false},
    {"POST", {"sandboxes", "*", "timeout"}, handle_timeout, true},
    {"POST", {"sandboxes", "*", "pause"}, handle_pause, true},
    {"POST", {"sandboxes", "*", "connect"}, handle_connect, true},
    {"POST", {"sandboxes", "*", "resume"}, handle_connect, true},
    {"POST", {"v2", "sandboxes", "*", "connect"}, handle_connect, true},
    {"GET", {"sandboxes", "*", "logs"}, handle_logs, false},
    {"GET", {"v2", "sandboxes", "*", "logs"}, handle_logs, false}, /* c->v2: v2's query, shape */
    {"GET", {"templates", "aliases", "*"}, handle_alias, false},
};

/* The path's segments (v2/... normalized so that segs[1] is the id); false when the path has
 * more segments than any route, an empty one, or one that could not be an id. */
static bool split_path(const char *path, struct call *c)
{
    if (path[0] != '/')
        return false;
    const char *p = path + 1;
    c->n_segs = 0;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || n > STORE_ID_MAX || c->n_segs == ROUTE_MAX_SEGS)
            return false;
        memcpy(c->segs[c->n_segs], p, n);
        c->segs[c->n_segs][n] = '\0';
        c->n_segs++;
        p += n;
        if (*p == '/')
            p++;
    }
    return true;
}

static const struct route *match(struct call *c, bool *path_known)
{
    *path_known = false;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        const struct route *r = &routes[i];
        size_t n = 0;
        while (n < ROUTE_MAX_SEGS && r->pattern[n])
            n++;
        if (n != c->n_segs)
            continue;
        bool ok = true;
        for (size_t k = 0; k < n && ok; k++)
            ok = strcmp(r->pattern[k], "*") == 0 ? api_id_valid(c->segs[k])
                                                 : strcmp(r->pattern[k], c->segs[k]) == 0;
        if (!ok)
            continue;
        *path_known = true;
        if (strcmp(r->method, c->method) == 0)
            return r;
    }
    return NULL;
}

static int on_body_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    struct call *c = user;
    return http_body_append(&c->body, &c->len, data, len);
}

static void on_body_complete(struct http_exchange *x, void *user)
{
    struct call *c = user;
    c->handler(c);
}

static const struct http_body_callbacks body_callbacks = {on_body_data, on_body_complete};

/* v2/sandboxes/ID/... is handled as sandboxes/ID/...: segs[1] is the id for every route. */
static void normalize(struct call *c)
{
    if (c->n_segs >= 3 && strcmp(c->segs[0], "v2") == 0) {
        c->v2 = true;
        for (size_t i = 0; i + 1 < c->n_segs; i++)
            memcpy(c->segs[i], c->segs[i + 1], sizeof c->segs[i]);
        c->n_segs--;
    }
}

void routes_control(struct serve *d, struct http_exchange *x, const struct http_request *req)
{
    /* the unix socket needs no key: only the daemon's user reaches it (serve.c) */
    if (!req->from_unix_socket && !serve_api_key_ok(d, http_request_header(req, "X-API-KEY"))) {
        http_respond_error(x, 401,
                           "Invalid API key: give one in the X-API-KEY header (the key "
                           "the daemon wrote to its state directory, or HUTCH_API_KEY)");
        return;
    }
    if (strcmp(req->path, "/run") == 0 && strcmp(req->method, "POST") == 0) {
        oneshot_route(d, x, req); /* hutch's one-shot runs */
        return;
    }
    struct call *c = calloc(1, sizeof *c);
    if (!c) {
        http_respond_error(x, 500, "out of memory");
        return;
    }
    c->d = d;
    c->x = x;
    snprintf(c->method, sizeof c->method, "%s", req->method);
    bool known = false;
    const struct route *r = NULL;
    if (strlen(req->query) >= sizeof c->query) {
        http_respond_error(x, 414, "query string too long");
    } else if (split_path(req->path, c) && (r = match(c, &known))) {
        snprintf(c->query, sizeof c->query, "%s", req->query);
        if (r->pattern[0] && strcmp(r->pattern[0], "v2") == 0)
            normalize(c);
        c->handler = r->handler;
    } else {
        http_respond_error(x, known ? 405 : 404, "%s %s: %s", req->method, req->path,
                           known ? "method not allowed" : "no such route");
    }
    http_exchange_set_callbacks(x, &call_callbacks, c);
    if (!c->handler)
        return;
    if (r->body)
        http_exchange_on_body(x, ROUTE_MAX_BODY, &body_callbacks, c);
    else
        c->handler(c);
}
