/* The warm pool (pool.h). */
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

static unsigned pool_target(void)
{
    const char *env = getenv("HUTCH_POOL");
    if (!env || !env[0])
        return POOL_DEFAULT;
    char *end;
    unsigned long n = strtoul(env, &end, 10);
    return *end || n > POOL_MAX ? POOL_DEFAULT : (unsigned)n;
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
    interp_warm(sb); /* its zygote, the data stack imported */
}

static void pool_fill(struct serve *d)
{
    if (!d->pool_wanted || d->stopping)
        return;
    unsigned have = 0, target = pool_target();
    for (struct sbx *sb = d->sandboxes; sb; sb = sb->next)
        have += sb->pooled && !sb->killing && !sb->gone;
    while (have < target) {
        struct store_sandbox row = {0};
        api_sandbox_id_new(row.id);
        snprintf(row.template_id, sizeof row.template_id, "base");
        snprintf(row.alias, sizeof row.alias, "%s", POOL_TEMPLATE);
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
            fprintf(stderr, "hutch serve: the warm pool: %s\n", err.msg);
            return;
        }
        struct sbx *sb = sbx_find(d, row.id);
        if (sb)
            sb->pooled = true;
        have++;
    }
}

void pool_wanted(struct serve *d)
{
    if (d->pool_wanted)
        return;
    d->pool_wanted = true;
    pool_fill(d);
}

struct sbx *pool_take(struct serve *d, struct store_sandbox *want, err_t *err)
{
    struct sbx *found = NULL;
    for (struct sbx *sb = d->sandboxes; sb && !found; sb = sb->next)
        if (sb->pooled && !sb->killing && !sb->gone && !sb->done && sb->state == SANDBOX_RUNNING &&
            interp_zygote_ready(sb))
            found = sb;
    if (!found) {
        pool_fill(d);
        return NULL;
    }
    snprintf(want->id, sizeof want->id, "%s", found->id);
    if (store_sandbox_claim(d->store, want, err) < 0) {
        sbx_kill(found, "the warm pool could not give it away", NULL, NULL);
        pool_fill(d);
        return NULL;
    }
    found->pooled = false;
    found->auto_pause = want->auto_pause;
    found->auto_pause_cold = want->auto_pause_cold;
    found->auto_resume = want->auto_resume;
    if (sbx_set_deadline(found, want->deadline_ms, err) < 0)
        fprintf(stderr, "hutch serve: sandbox %s: %s\n", found->id, err->msg);
    pool_fill(d); /* its successor */
    return found;
}

void pool_stop(struct serve *d)
{
    for (struct sbx *sb = d->sandboxes, *next; sb; sb = next) {
        next = sb->next;
        if (sb->pooled && !sb->killing && !sb->gone)
            sbx_kill(sb, "the daemon stopped: its warm pool goes with it", NULL, NULL);
    }
}
