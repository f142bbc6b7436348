/* Disk layers made ahead (disk_pool.h). */
#include "serve/disk_pool.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <uv.h>

#include "jail/disk_layer.h"
#include "serve/sandbox.h"
#include "util/parse.h"
#include "util/strfmt.h"

struct pool_wait {
    uv_poll_t poll;
    unsigned try; /* the mke2fs this poll is on: a retry has a pidfd of its own */
};

static struct {
    struct serve *d;
    char dir[PATH_MAX]; /* STATE/disk-pool */
    unsigned want;
    uint64_t bytes;
    bool broken, stopping;
    int making; /* the slot being made, -1 for none */
    struct disk_layer_job job;
    struct pool_wait *wait;
} pool = {.making = -1};

static int slot_dir(unsigned i, char *out, size_t size)
{
    return strfmt(out, size, "%s/%u", pool.dir, i);
}

static void give_up(const err_t *err)
{
    fprintf(stderr, "hutch serve: disk layers made ahead: %s; each create makes its own\n",
            err->msg);
    pool.broken = true;
}

static void free_wait(uv_handle_t *h)
{
    free(h->data);
}

static void wait_close(void)
{
    if (!pool.wait)
        return;
    uv_poll_stop(&pool.wait->poll);
    uv_close((uv_handle_t *)&pool.wait->poll, free_wait);
    pool.wait = NULL;
}

static void refill(void);
static int wait_open(err_t *err);

static void on_made(uv_poll_t *p, int status, int events)
{
    struct pool_wait *w = p->data;
    err_t err;
    int rc = disk_layer_create_step(&pool.job, &err);
    if (rc == 1 && pool.job.try == w->try)
        return; /* not yet */
    wait_close();
    if (rc == 1 && wait_open(&err) == 0)
        return; /* mke2fs again, with an older one's options */
    if (rc == 1)
        disk_layer_create_abort(&pool.job);
    pool.making = -1;
    if (rc != 0) {
        give_up(&err);
        return;
    }
    refill();
}

static int wait_open(err_t *err)
{
    struct pool_wait *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(err, ENOMEM, "disk pool");
    w->try = pool.job.try;
    if (uv_poll_init(pool.d->loop, &w->poll, pool.job.pidfd) < 0) {
        free(w);
        return err_set(err, EINVAL, "poll on mke2fs's pidfd");
    }
    w->poll.data = w;
    pool.wait = w;
    uv_poll_start(&w->poll, UV_READABLE, on_made);
    return 0;
}

/* The first empty slot is made, if none is being made. */
static void refill(void)
{
    if (pool.broken || pool.stopping || pool.making >= 0)
        return;
    for (unsigned i = 0; i < pool.want; i++) {
        char dir[PATH_MAX];
        err_t err;
        if (slot_dir(i, dir, sizeof dir) < 0) {
            err_set(&err, ENAMETOOLONG, "%s: path too long", pool.dir);
            give_up(&err);
            return;
        }
        if (disk_layer_exists(dir))
            continue;
        if (disk_layer_create_begin(dir, pool.bytes, &pool.job, &err) < 0) {
            give_up(&err);
            return;
        }
        pool.making = (int)i;
        if (wait_open(&err) < 0) {
            disk_layer_create_abort(&pool.job);
            pool.making = -1;
            give_up(&err);
        }
        return;
    }
}

/* A spare of another size (SBX_DISK_MB was different when it was made) is of no use. */
static void drop_other_sizes(void)
{
    for (unsigned i = 0; i < DISK_POOL_MAX; i++) {
        char dir[PATH_MAX];
        struct disk_layer_usage u;
        err_t err;
        if (slot_dir(i, dir, sizeof dir) < 0 || !disk_layer_exists(dir))
            continue;
        if (i >= pool.want || (disk_layer_usage(dir, &u, &err) == 0 && u.size_bytes != pool.bytes))
            disk_layer_remove(dir, &err);
    }
}

void disk_pool_start(struct serve *d)
{
    pool.d = d;
    pool.want = DISK_POOL_DEFAULT;
    pool.bytes = (uint64_t)SBX_DISK_MB << 20;
    const char *env = getenv("HUTCH_DISK_POOL");
    uint64_t n;
    if (env && parse_count(env, 0, DISK_POOL_MAX, &n) == 0)
        pool.want = (unsigned)n;
    else if (env)
        fprintf(stderr, "hutch serve: HUTCH_DISK_POOL=%s is not 0 to %d: %u spares\n", env,
                DISK_POOL_MAX, pool.want);
    err_t err;
    if (strfmt(pool.dir, sizeof pool.dir, "%s/disk-pool", d->state_dir) < 0) {
        err_set(&err, ENAMETOOLONG, "%s: path too long", d->state_dir);
        give_up(&err);
        return;
    }
    if (mkdir(pool.dir, 0700) < 0 && errno != EEXIST) {
        err_set(&err, errno, "mkdir %s", pool.dir);
        give_up(&err);
        return;
    }
    drop_other_sizes();
    refill();
}

int disk_pool_take(struct serve *d, uint64_t bytes, const char *layer_dir, err_t *err)
{
    if (!pool.d || bytes != pool.bytes)
        return err_set(err, ENOENT, "no spare disk layer of %llu bytes", (unsigned long long)bytes);
    for (unsigned i = 0; i < pool.want; i++) {
        char dir[PATH_MAX];
        if ((int)i == pool.making || slot_dir(i, dir, sizeof dir) < 0 || !disk_layer_exists(dir))
            continue;
        int rc = disk_layer_adopt(dir, layer_dir, bytes, err);
        if (rc < 0 && err->errnum == EINVAL) {
            err_t ignored; /* not an image of that size after all: made again */
            disk_layer_remove(dir, &ignored);
        }
        refill();
        return rc;
    }
    return err_set(err, ENOENT, "no spare disk layer ready");
}

void disk_pool_stop(struct serve *d)
{
    pool.stopping = true;
    if (pool.making < 0)
        return;
    wait_close();
    disk_layer_create_abort(&pool.job);
    pool.making = -1;
}
