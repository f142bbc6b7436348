/* A disk layer made while the loop goes on (layer_make.h). */
#include "serve/layer_make.h"

#include <errno.h>
#include <stdlib.h>

#include "jail/disk_layer.h"

struct layer_make {
    uv_loop_t *loop;
    struct disk_layer_job job;
    /* on the pidfd of the job's current mke2fs: a retry has a pidfd (and a handle) of its own,
     * so a handle being closed never touches the making */
    uv_poll_t *poll;
    unsigned try; /* the job's try that poll watches */
    layer_made_fn done;
    void *user;
};

static void poll_free(uv_handle_t *h)
{
    free(h);
}

static void poll_close(struct layer_make *m)
{
    if (m->poll)
        uv_close((uv_handle_t *)m->poll, poll_free);
    m->poll = NULL;
}

static void on_exit_readable(uv_poll_t *p, int status, int events);

static int poll_open(struct layer_make *m, err_t *err)
{
    uv_poll_t *p = malloc(sizeof *p);
    if (!p)
        return err_set(err, ENOMEM, "disk layer: a wait for mke2fs");
    if (uv_poll_init(m->loop, p, m->job.pidfd) < 0) {
        free(p);
        return err_set(err, EINVAL, "poll on mke2fs's pidfd");
    }
    p->data = m;
    m->poll = p;
    m->try = m->job.try;
    uv_poll_start(p, UV_READABLE, on_exit_readable);
    return 0;
}

static void on_exit_readable(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    struct layer_make *m = p->data;
    err_t err;
    int rc = disk_layer_create_step(&m->job, &err);
    if (rc == 1 && m->job.try == m->try)
        return; /* not yet */
    poll_close(m);
    if (rc == 1 && poll_open(m, &err) == 0)
        return; /* mke2fs again, with an older one's options */
    if (rc == 1)
        disk_layer_create_abort(&m->job);
    layer_made_fn done = m->done;
    void *user = m->user;
    free(m);
    done(user, rc == 0 ? NULL : &err);
}

struct layer_make *layer_make_begin(uv_loop_t *loop, const char *dir, uint64_t bytes,
                                    layer_made_fn done, void *user, err_t *err)
{
    struct layer_make *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(err, ENOMEM, "disk layer");
        return NULL;
    }
    m->loop = loop;
    m->done = done;
    m->user = user;
    if (disk_layer_create_begin(dir, bytes, &m->job, err) < 0) {
        free(m);
        return NULL;
    }
    if (poll_open(m, err) < 0) {
        disk_layer_create_abort(&m->job);
        free(m);
        return NULL;
    }
    return m;
}

void layer_make_cancel(struct layer_make *m)
{
    if (!m)
        return;
    poll_close(m);
    disk_layer_create_abort(&m->job);
    free(m);
}
