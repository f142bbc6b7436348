/* Disk layers made ahead (disk_pool.h). */
#include "serve/disk_pool.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <uv.h>

#include "jail/disk_layer.h"
#include "serve/layer_make.h"
#include "serve/sandbox.h"
#include "util/parse.h"
#include "util/strfmt.h"

struct disk_pool {
    struct serve *d;
    char dir[PATH_MAX]; /* STATE/disk-pool */
    unsigned want;
    uint64_t bytes;
    bool broken;
    int making; /* the slot being made, -1 for none */
    struct layer_make *make;
};

static int slot_dir(const struct disk_pool *pool, unsigned i, char *out, size_t size)
{
    return strfmt(out, size, "%s/%u", pool->dir, i);
}

static void give_up(struct disk_pool *pool, const err_t *err)
{
    fprintf(stderr, "hutch serve: disk layers made ahead: %s; each create makes its own\n",
            err->msg);
    pool->broken = true;
}

static void refill(struct disk_pool *pool);

static void on_made(void *user, const err_t *err)
{
    struct disk_pool *pool = user;
    pool->make = NULL;
    pool->making = -1;
    if (err)
        give_up(pool, err);
    else
        refill(pool);
}

/* The first empty slot is made, if none is being made. */
static void refill(struct disk_pool *pool)
{
    if (pool->broken || pool->making >= 0)
        return;
    for (unsigned i = 0; i < pool->want; i++) {
        char dir[PATH_MAX];
        err_t err;
        if (slot_dir(pool, i, dir, sizeof dir) < 0) {
            err_set(&err, ENAMETOOLONG, "%s: path too long", pool->dir);
            give_up(pool, &err);
            return;
        }
        if (disk_layer_exists(dir))
            continue;
        if (!(pool->make =
                  layer_make_begin(pool->d->loop, dir, pool->bytes, on_made, pool, &err))) {
            give_up(pool, &err);
            return;
        }
        pool->making = (int)i;
        return;
    }
}

/* A spare of another size (SBX_DISK_MB was different when it was made) is of no use. */
static void drop_other_sizes(const struct disk_pool *pool)
{
    for (unsigned i = 0; i < DISK_POOL_MAX; i++) {
        char dir[PATH_MAX];
        struct disk_layer_usage u;
        err_t err;
        if (slot_dir(pool, i, dir, sizeof dir) < 0 || !disk_layer_exists(dir))
            continue;
        if (i >= pool->want ||
            (disk_layer_usage(dir, &u, &err) == 0 && u.size_bytes != pool->bytes))
            disk_layer_remove(dir, &err);
    }
}

void disk_pool_start(struct serve *d)
{
    struct disk_pool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        fprintf(stderr, "hutch serve: disk layers made ahead: out of memory; none\n");
        return;
    }
    pool->d = d;
    pool->making = -1;
    pool->want = DISK_POOL_DEFAULT;
    pool->bytes = (uint64_t)SBX_DISK_MB << 20;
    d->disk_pool = pool;
    const char *env = getenv("HUTCH_DISK_POOL");
    uint64_t n;
    if (env && parse_count(env, 0, DISK_POOL_MAX, &n) == 0)
        pool->want = (unsigned)n;
    else if (env)
        fprintf(stderr, "hutch serve: HUTCH_DISK_POOL=%s is not 0 to %d: %u spares\n", env,
                DISK_POOL_MAX, pool->want);
    err_t err;
    if (strfmt(pool->dir, sizeof pool->dir, "%s/disk-pool", d->state_dir) < 0) {
        err_set(&err, ENAMETOOLONG, "%s: path too long", d->state_dir);
        give_up(pool, &err);
        return;
    }
    if (mkdir(pool->dir, 0700) < 0 && errno != EEXIST) {
        err_set(&err, errno, "mkdir %s", pool->dir);
        give_up(pool, &err);
        return;
    }
    drop_other_sizes(pool);
    refill(pool);
}

int disk_pool_take(struct serve *d, uint64_t bytes, const char *layer_dir, err_t *err)
{
    struct disk_pool *pool = d->disk_pool;
    if (!pool || bytes != pool->bytes)
        return err_set(err, ENOENT, "no spare disk layer of %llu bytes", (unsigned long long)bytes);
    for (unsigned i = 0; i < pool->want; i++) {
        char dir[PATH_MAX];
        if ((int)i == pool->making || slot_dir(pool, i, dir, sizeof dir) < 0 ||
            !disk_layer_exists(dir))
            continue;
        int rc = disk_layer_adopt(dir, layer_dir, bytes, err);
        if (rc < 0 && err->errnum == EINVAL) {
            err_t ignored; /* not an image of that size after all: made again */
            disk_layer_remove(dir, &ignored);
        }
        refill(pool);
        return rc;
    }
    return err_set(err, ENOENT, "no spare disk layer ready");
}

void disk_pool_stop(struct serve *d)
{
    struct disk_pool *pool = d->disk_pool;
    if (!pool)
        return;
    layer_make_cancel(pool->make);
    free(pool);
    d->disk_pool = NULL;
}
