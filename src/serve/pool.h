/* The warm pools: sandboxes made ahead of the creates that will take them, one pool a template.
 * A create of base takes a started sandbox instead of waiting for its start (27 ms here); one of
 * code-interpreter-v1 takes one with its python zygote warm and the data stack imported in it
 * (interp.h), so that its first runCode forks a kernel with pandas imported, instead of starting
 * Python (1.4 s of CPU).
 *
 * HUTCH_POOL sandboxes a template (default 1; 0: none), made once the first create of that
 * template came, and made again after each one is taken (30 ms after the last take: the
 * creator's first command goes first; pool.c says why). One is taken by a create of its template
 * with the default sizes (cpuCount, memoryMB, diskSizeMB not given), once it runs (and, for
 * code-interpreter-v1, its zygote is ready); the create's metadata, env vars, timeout and lifecycle
 * become its own (store_sandbox_claim), and its commands, kernels included, see the env vars (each
 * command's env is made at its start). Nothing ran in it before: it holds its init and, for
 * code-interpreter-v1, its zygote.
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

/* A create of the template alias came: its pool is filled from now on (none for a template
 * without one). */
void pool_wanted(struct serve *d, const char *alias);
/* A ready sandbox of the pool of want's alias, given want's alias, times, flags, metadata and env
 * vars (want->id is set to its id); NULL when none is ready (the create then makes one as
 * usual). */
struct sbx *pool_take(struct serve *d, struct store_sandbox *want, err_t *err);
/* Whether a row's metadata is a pool sandbox's (never listed, whatever its state). */
bool pool_marked(const char *metadata_json);
/* The daemon stops: its pool sandboxes are killed (the loop runs until they are gone), no more
 * are made. */
void pool_stop(struct serve *d);
