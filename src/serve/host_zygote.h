/* The host's python zygote: one per daemon, outside every sandbox, with IPython and the data
 * stack (numpy, pandas, matplotlib) imported once, forking kernels that enter the sandbox they
 * serve (src/interp/python_zygote.py --host, src/jail/enter.h). A sandbox of one run (oneshot.c)
 * then needs no zygote of its own, whose imports cost 1.4 s of CPU per sandbox.
 *
 * Started at the daemon's start, as a child of the daemon (uv_spawn) with a clean
 * environment; its stdin is a SOCK_SEQPACKET socket only the daemon holds. It is ready once it
 * says so (after its imports). A zygote that dies is started again at the next want, at most
 * HOST_ZYGOTE_STARTS times; the daemon's stop closes its socket, and it exits (the kernels it
 * forked live on, as the commands they stand in). Disabled by HUTCH_ENTER_LIB="" or when the
 * daemon has no kernels or no stub. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/serve.h"
#include "util/err.h"

#define HOST_ZYGOTE_STARTS 3

struct sbx;

/* Starts the zygote unless it runs, is starting, or was given up. */
void host_zygote_want(struct serve *d);
/* Whether it said it is ready (a fork asked for now is served at once). */
bool host_zygote_ready(struct serve *d);
/* Whether it is ready, starting, or may be started: a fork asked for now is served, at once or
 * once it is ready (after its imports, about 1.5 s of CPU). */
bool host_zygote_available(struct serve *d);

/* How a fork ended: host_pid > 0, the kernel's pid as the host sees it, once it is inside and
 * confined; else failure says why (the zygote refused, failed, or died). */
typedef void (*host_zygote_done_fn)(void *user, pid_t host_pid, const char *failure);

/* Has the zygote fork a kernel into sb for the stub (its pidfd) that runs as command `group` (the
 * stub said its handover line): the kernel takes the stub's fds 0-4, reads the stub's cwd and
 * environment from fd 4 (the zygote never holds a sandbox's), and joins the group's cgroups.
 * done(user, ...) once, unless forgotten first; *id names the request for host_zygote_forget. -1
 * (err) when it cannot be asked. Asked while the zygote starts, the fork waits for its ready (at
 * most 45 s, under the stub's minute). The stub's pidfd stays the caller's. */
int host_zygote_fork(struct serve *d, struct sbx *sb, const char *group, int stub_pidfd,
                     host_zygote_done_fn done, void *user, uint64_t *id, err_t *err);
/* The request's done is not called (its asker went). */
void host_zygote_forget(struct serve *d, uint64_t id);
/* The daemon stops: the zygote's socket is closed (it exits), pending requests are failed. */
void host_zygote_stop(struct serve *d);
