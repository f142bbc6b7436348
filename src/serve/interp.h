/* The code interpreter as `@e2b/code-interpreter` reaches it: a sandbox's port 49999 (routed
 * by E2b-Sandbox-Port, or a Host "49999-ID.DOMAIN"), served by the daemon itself. Each code
 * context is one kernel process inside the sandbox, a command started through init, spoken to
 * over its own pipes by the protocol of src/interp/PROTOCOL.md:
 *
 *   POST /execute                  {"code", "context_id"?, "language"?, "env_vars"?}: NDJSON
 *                                  lines as the kernel produces them (number_of_executions,
 *                                  stdout, stderr, result, error, keepalive, end_of_execution)
 *   POST /contexts                 {"language"?, "cwd"?}: a new context, answered once its
 *                                  kernel is ready
 *   GET /contexts                  every context: [{"id", "language", "cwd"}]
 *   DELETE /contexts/ID            the context and its kernel (its whole tree) gone
 *   POST /contexts/ID/restart      a new kernel, state cleared
 *   GET /health                    "OK"
 *
 * One execution at a time per context, the others wait in order; a client that goes away
 * interrupts its execution (SIGINT to the kernel; a kernel that does not end it within a grace
 * period is killed and started again). Every line from a kernel is parsed as hostile input. */
#pragma once
#include <stdbool.h>

#include "http/http.h"
#include "serve/sandbox.h"

/* Where every sandbox sees the kernels (serve.c binds src/interp there, read-only). */
#define INTERP_SANDBOX_DIR "/usr/local/lib/hutch/interp"
/* ... and the stub that takes a kernel forked from a zygote (src/kstub/main.c). */
#define INTERP_SANDBOX_STUB "/usr/local/lib/hutch/kernel-stub"
/* The port the SDK names for the code interpreter. */
#define INTERP_PORT "49999"

void interp_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                  const struct http_request *req);
/* How much of a sandbox made for code (code-interpreter-v1, a one-shot run's) runs before its
 * first call. */
enum interp_warmth {
    INTERP_COLD,        /* nothing: each kernel starts at its first use */
    INTERP_WARM_PYTHON, /* the python kernels' zygote, and the default python context's kernel */
    INTERP_WARM_ALL,    /* ... and the default javascript context's kernel */
};
/* Its python kernels fork warm, with the data stack (numpy, pandas, matplotlib) imported, from
 * the host's zygote (host_zygote.h) where there is one (the default python context's kernel
 * forked now), else from a zygote of the sandbox's own, started now; INTERP_WARM_ALL starts the
 * default javascript context's kernel too. */
void interp_warm(struct sbx *sb, enum interp_warmth warmth);
/* A one-shot run (oneshot.c): e (taken) in sb's default context of its language, its NDJSON to
 * x, as /execute answers; over(user) once, when the execution ended or failed, or its client
 * went. */
struct interp_execute;
void interp_run(struct sbx *sb, struct http_exchange *x, struct interp_execute *e,
                void (*over)(void *user), void *user);
/* A sandbox for one run: its kernel starts cold, no zygote is made (it would serve no other). */
void interp_no_zygote(struct sbx *sb);
/* A sandbox for one run, forked from the host's zygote (host_zygote.h) when it is ready, else
 * cold: no zygote of its own is made. */
void interp_host_zygote(struct sbx *sb);
/* A warm pool's sandbox was claimed by a create whose env vars are env_json (pool.h): its
 * kernels, started before, are given them (PROTOCOL.md, "environment"); one not yet ready is
 * killed (started again at its first use, with them). */
void interp_claimed(struct sbx *sb, const char *env_json);
/* Whether a warm pool may give it away: the zygote its python kernels fork from (its own, or
 * the host's) is ready, and so is each kernel started ahead (one not ready 10 s after its start
 * is not waited for). */
bool interp_warm_ready(struct sbx *sb);
/* The sandbox is gone: its contexts' calls get an error and their end, all is freed. */
void interp_release_all(struct sbx *sb, const char *why);
