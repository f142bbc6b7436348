/* The warm pools (pool.h). */
#include "serve/pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/control_json.h"
#include "serve/interp.h"
#include "serve/sandbox.h"
#include "util/parse.h"

#define POOL_DEFAULT  1
#define POOL_MAX      64
#define POOL_LIFETIME (7 * 24 * 3600 * 1000LL) /* a pool sandbox's deadline until it is taken */
#define POOL_METADATA "{\"" POOL_MARK "\":\"warm\"}"
/* A create's client starts its first command at once; a successor's start blocks the loop for
 * about 10 ms (the disk layer's mount, the clone) and takes a CPU for longer, which on 2 CPUs cost
 * that command 14 ms to its first output (33 against 19 ms, bench/README.md). 30 ms later it
 * meets the command's end or the creator's next call instead. */
#define POOL_REFILL_DELAY_MS 30

/* The pools: base's sandboxes are only started; code-interpreter-v1's have their default python
 * and javascript contexts' kernels running before they are taken; the one-shot runs' only the
 * python one (a run uses one context; node's start would cost each run 0.2-0.3 s of CPU). All
 * are the same jail (template "base"). */
static const struct pool_kind {
    const char *name;
    enum interp_warmth warmth;
} kinds[] = {
    {"base", INTERP_COLD}, {POOL_TEMPLATE, INTERP_WARM_ALL}, {POOL_ONE_SHOT, INTERP_WARM_PYTHON}};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

struct warm_pools {
    struct serve *d;
    unsigned wanted;   /* a bit a kind: a create of it came */
    unsigned target;   /* HUTCH_POOL */
    uv_timer_t refill; /* after a take: its successor is made a little later */
};

static const struct pool_kind *kind_of(const char *name)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (strcmp(kinds[i].name, name) == 0)
            return &kinds[i];
    return NULL;
}

static unsigned pool_target(void)
{
    const char *env = getenv("HUTCH_POOL");
    uint64_t n;
    if (!env || !env[0])
        return POOL_DEFAULT;
    if (parse_count(env, 0, POOL_MAX, &n) == 0)
        return (unsigned)n;
    fprintf(stderr, "hutch serve: HUTCH_POOL=%s is not 0 to %d: %d a template\n", env, POOL_MAX,
            POOL_DEFAULT);
    return POOL_DEFAULT;
}

bool pool_marked(const char *metadata_json)
{
    return metadata_json && strstr(metadata_json, "\"" POOL_MARK "\"");
}

static void pool_created(struct sbx *sb, int rc, const char *message, void *user)
{
    (void)user;
    if (rc < 0) {
        fprintf(stderr, "hutch serve: a warm pool sandbox failed: %s\n", message ? message : "");
        return;
    }
    if (kinds[sb->pool_kind].warmth != INTERP_COLD)
        interp_warm(sb, kinds[sb->pool_kind].warmth);
}

static bool available(const struct sbx *sb)
{
    return sb->pooled && !sb->killing && !sb->gone;
}

static void fill_kind(struct warm_pools *p, unsigned k)
{
    struct serve *d = p->d;
    unsigned have = 0;
    for (struct sbx *sb = d->sandboxes; sb; sb = sb->next)
        have += available(sb) && sb->pool_kind == k;
    while (have < p->target) {
        struct store_sandbox row = {0};
        api_sandbox_id_new(row.id);
        snprintf(row.template_id, sizeof row.template_id, "base");
        snprintf(row.alias, sizeof row.alias, "%s", kinds[k].name);
        row.state = SANDBOX_CREATING;
        row.created_ms = sbx_wall_ms();
        row.deadline_ms = row.created_ms + POOL_LIFETIME;
        row.cpu_count = SBX_CPU_COUNT;
        row.memory_mb = SBX_MEMORY_MB;
        row.disk_mb = SBX_DISK_MB;
        row.metadata_json = POOL_METADATA;
        row.env_json = "{}";
        err_t err;
        if (auth_token_new("", row.envd_token, sizeof row.envd_token) < 0 ||
            sbx_create(d, &row, pool_created, NULL, &err) < 0) {
            fprintf(stderr, "hutch serve: the warm pool of %s: %s\n", kinds[k].name, err.msg);
            return;
        }
        struct sbx *sb = sbx_find(d, row.id);
        if (sb) {
            sb->pooled = true;
            sb->pool_kind = (unsigned char)k;
        }
        have++;
    }
}

static void on_refill(uv_timer_t *t)
{
    struct warm_pools *p = t->data;
    if (p->d->stopping)
        return;
    for (unsigned k = 0; k < N_KINDS; k++)
        if (p->wanted & (1u << k))
            fill_kind(p, k);
}

/* The pools are filled POOL_REFILL_DELAY_MS after the last take (or the first create): the
 * creator's first command goes first. */
static void refill_later(struct warm_pools *p)
{
    uv_timer_start(&p->refill, on_refill, POOL_REFILL_DELAY_MS, 0);
}

void pool_wanted(struct serve *d, const char *pool)
{
    const struct pool_kind *kind = kind_of(pool);
    if (!kind || d->stopping)
        return;
    struct warm_pools *p = d->pools;
    if (!p) {
        if (!(p = calloc(1, sizeof *p)) || uv_timer_init(d->loop, &p->refill) < 0) {
            free(p);
            fprintf(stderr, "hutch serve: the warm pools: out of memory; none\n");
            return;
        }
        p->d = d;
        p->target = pool_target();
        p->refill.data = p;
        d->pools = p;
    }
    unsigned bit = 1u << (kind - kinds);
    if (p->wanted & bit)
        return;
    p->wanted |= bit;
    refill_later(p);
}

struct sbx *pool_take(struct serve *d, const char *pool, struct store_sandbox *want, err_t *err)
{
    const struct pool_kind *kind = kind_of(pool);
    struct warm_pools *p = d->pools;
    if (!kind || !p)
        return NULL;
    unsigned k = (unsigned)(kind - kinds);
    struct sbx *found = NULL;
    for (struct sbx *sb = d->sandboxes; sb && !found; sb = sb->next)
        if (available(sb) && sb->pool_kind == k && !sb->done && sb->state == SANDBOX_RUNNING &&
            (kind->warmth == INTERP_COLD || interp_warm_ready(sb)))
            found = sb;
    refill_later(p); /* its successor, or the first one if none was ready */
    if (!found)
        return NULL;
    char own_id[sizeof want->id];
    snprintf(own_id, sizeof own_id, "%s", want->id);
    snprintf(want->id, sizeof want->id, "%s", found->id);
    if (store_sandbox_claim(d->store, want, err) < 0) {
        fprintf(stderr, "hutch serve: the warm pool: %s\n", err->msg);
        sbx_kill(found, "the warm pool could not give it away", NULL, NULL);
        snprintf(want->id, sizeof want->id, "%s", own_id); /* the create makes its own */
        return NULL;
    }
    found->pooled = false;
    if (kind->warmth != INTERP_COLD)
        interp_claimed(found, want->env_json);
    found->auto_pause = want->auto_pause;
    found->auto_pause_cold = want->auto_pause_cold;
    found->auto_resume = want->auto_resume;
    if (sbx_set_deadline(found, want->deadline_ms, err) < 0)
        fprintf(stderr, "hutch serve: sandbox %s: %s\n", found->id, err->msg);
    return found;
}

static void pools_free(uv_handle_t *h)
{
    free(h->data);
}

void pool_stop(struct serve *d)
{
    for (struct sbx *sb = d->sandboxes, *next; sb; sb = next) {
        next = sb->next;
        if (available(sb))
            sbx_kill(sb, "the daemon stopped: its warm pool goes with it", NULL, NULL);
    }
    if (d->pools) {
        uv_close((uv_handle_t *)&d->pools->refill, pools_free);
        d->pools = NULL;
    }
}
