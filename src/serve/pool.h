/* The warm pools: sandboxes made ahead of the creates that will take them, one pool a template,
 * and one for the one-shot runs (oneshot.c). A create of base takes a started sandbox instead of
 * waiting for its start (27 ms here); one of code-interpreter-v1 takes one whose default python
 * and javascript contexts' kernels run already (the python one forked from the host's zygote,
 * with the data stack imported, or, without it, the sandbox's own zygote warm), so that a first
 * runCode finds its kernel ready instead of starting Python (1.4 s of CPU) or node (0.3 s); a
 * one-shot run takes one whose python kernel runs (interp.h, enum interp_warmth).
 *
 * HUTCH_POOL sandboxes a pool (default 1; 0: none), made once the first create of that template
 * (or the first run) came, and made again after each one is taken (30 ms after the last take:
 * the creator's first command goes first; pool.c says why). One is taken by a create of its
 * template with the default sizes (cpuCount, memoryMB, diskSizeMB not given), once it runs and
 * its kernels are ready (interp_warm_ready); the create's metadata, env vars, timeout and
 * lifecycle become its own (store_sandbox_claim), and its commands see the env vars (each
 * command's env is made at its start), as do its running kernels, given them at the claim
 * (interp_claimed). Nothing ran in it before: it holds its init and, for code, its kernels (and
 * zygote), which ran no call.
 *
 * Until taken, a pool sandbox is nobody's: hidden from get and every other call (its id was never
 * told), and creating in the store (so in no list; its metadata has POOL_MARK too), which a
 * restarted daemon kills as any half-made sandbox; the daemon's stop kills the ones it holds. */
#pragma once
#include <stdbool.h>

#include "sandbox/store.h"
#include "serve/serve.h"

#define POOL_TEMPLATE "code-interpreter-v1"
#define POOL_ONE_SHOT "hutch-one-shot" /* the one-shot runs' pool (oneshot.c), not a template */
#define POOL_MARK     "hutch.pool"

/* A create of the template (or a one-shot run: POOL_ONE_SHOT) came: its pool is filled from now
 * on (none for a template without one). */
void pool_wanted(struct serve *d, const char *pool);
/* A ready sandbox of that pool, given want's alias, times, flags, metadata and env vars (want->id
 * is set to its id); NULL when none is ready (the create then makes one as usual). */
struct sbx *pool_take(struct serve *d, const char *pool, struct store_sandbox *want, err_t *err);
/* Whether a row's metadata is a pool sandbox's (never listed, whatever its state). */
bool pool_marked(const char *metadata_json);
/* The daemon stops: its pool sandboxes are killed (the loop runs until they are gone), no more
 * are made. */
void pool_stop(struct serve *d);
