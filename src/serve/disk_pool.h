/* Disk layers made ahead: a create of the default disk size (SBX_DISK_MB) takes a formatted image
 * by a rename (disk_layer_adopt) instead of waiting for mke2fs, which costs a create 7-30 ms here.
 *
 * HUTCH_DISK_POOL spares (default DISK_POOL_DEFAULT; 0: none, at most DISK_POOL_MAX), each
 * STATE/disk-pool/N/disk.img, made one at a time in the loop (mke2fs is a child reaped through its
 * pidfd) from the daemon's start and after each take. They are kept across restarts: an image
 * that exists is whole (disk_layer_create makes it under another name and renames it when done),
 * and one cut short is made again. Each is formatted on its own, so no two share a filesystem
 * UUID, and nothing of one sandbox ever was in it. When mke2fs fails the pool says so once and
 * stops refilling; creates then make their layers as before. */
#pragma once
#include <stdint.h>

#include "serve/serve.h"
#include "util/err.h"

#define DISK_POOL_DEFAULT 4
#define DISK_POOL_MAX     64

/* From the daemon's start (the loop and the state directory exist): spares are made. */
void disk_pool_start(struct serve *d);
/* Moves a ready spare of exactly bytes to layer_dir/disk.img: 0; -1 when there is none (err's
 * errnum ENOENT) or the move failed (err says why; the create then makes its own). */
int disk_pool_take(struct serve *d, uint64_t bytes, const char *layer_dir, err_t *err);
/* The daemon stops: a spare being made is abandoned (mke2fs killed and reaped, its temporary file
 * removed). */
void disk_pool_stop(struct serve *d);
