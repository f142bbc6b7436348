/* The warm pool: sandboxes of code-interpreter-v1 made ahead of the creates that will take them,
 * each with its python zygote warm and the data stack imported in it (interp.h), so that a
 * create of that template takes one at once and its first runCode forks a kernel with pandas
 * imported, instead of starting Python (1.4 s of CPU).
 *
 * HUTCH_POOL sandboxes (default 1; 0: none), made once the first create of that template came,
 * and made again after each one is taken. One is taken by a create of code-interpreter-v1 with
 * the default sizes (cpuCount, memoryMB, diskSizeMB not given), once its zygote is ready; the
 * create's metadata, env vars, timeout and lifecycle become its own (store_sandbox_claim), and
 * its commands, kernels included, see the env vars (each command's env is made at its start).
 *
 * Until taken, a pool sandbox is nobody's: hidden from get and every other call (its id was never
 * told), and creating in the store (so in no list; its metadata has POOL_MARK too), which a
 * restarted daemon kills as any half-made sandbox; the daemon's stop kills the ones it holds. */
#pragma once
#include <stdbool.h>

#include "sandbox/store.h"
#include "serve/serve.h"

#define POOL_TEMPLATE "code-interpreter-v1"
#define POOL_MARK     "hutch.pool"

/* A create of POOL_TEMPLATE came: the pool is filled from now on. */
void pool_wanted(struct serve *d);
/* A ready sandbox of the pool, given want's alias, times, flags, metadata and env vars (want->id
 * is set to its id); NULL when none is ready (the create then makes one as usual). */
struct sbx *pool_take(struct serve *d, struct store_sandbox *want, err_t *err);
/* Whether a row's metadata is a pool sandbox's (never listed, whatever its state). */
bool pool_marked(const char *metadata_json);
/* The daemon stops: its pool sandboxes are killed (the loop runs until they are gone). */
void pool_stop(struct serve *d);
