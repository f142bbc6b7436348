/* A disk layer made while the loop goes on: disk_layer_create_begin's mke2fs, waited for through
 * its pidfd (retried with an older mke2fs's options when disk_layer_create_step asks for it), and
 * a callback at the end. Used by a create that found no spare (sandbox.c) and by the spares
 * themselves (disk_pool.c). */
#pragma once
#include <stdint.h>
#include <uv.h>

#include "util/err.h"

struct layer_make;
/* The end of a making: err NULL when DIR/disk.img exists, else why not (nothing is left
 * behind). The making is freed by then. */
typedef void (*layer_made_fn)(void *user, const err_t *err);

/* Starts making dir's layer of bytes: the making, or NULL with err (nothing left behind). */
struct layer_make *layer_make_begin(uv_loop_t *loop, const char *dir, uint64_t bytes,
                                    layer_made_fn done, void *user, err_t *err);
/* A making not ended yet is abandoned: mke2fs killed and reaped, its temporary image removed,
 * done never called. NULL is a no-op. */
void layer_make_cancel(struct layer_make *m);
