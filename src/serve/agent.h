/* The daemon's side of one sandbox's init (src/jail/command.h, files.h): a uv_poll on the jail's
 * control fd reads every message init sends, checked by jail_agent_recv, and hands it on:
 *   - a reply (SPAWN_REPLY, OK, ERROR, LIST_REPLY, FILE_*) to the callback waiting for its
 *     request_id (agent_expect); chunked replies (more) keep it waiting for the next chunk;
 *   - EXITED to the subscriber of that command id, WATCH_EVENTS and WATCH_ENDED to the one of
 *     that watch id (agent_subscribe).
 * A route sends its request with the jail_agent_* / jail_command_start / jail_files_request
 * calls, with an id from agent_next_id, and registers its callback first. When init's end
 * closes, every waiting callback is called with m = NULL and the reason, and the sandbox is
 * killed (its init is gone). agent_cancel drops every callback of one owner (an HTTP exchange
 * that was aborted), so nothing is called for it afterwards. */
#pragma once
#include <stdint.h>

#include "jail/command.h"
#include "serve/sandbox.h"

/* m: the message (its fds are the callback's to take: set them to -1 in m->fds / m->files.fd,
 * or they are closed after it returns); NULL when it will never come, with why. */
typedef void (*agent_fn)(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user);

enum agent_sub_kind {
    AGENT_SUB_EXITED, /* id = cmd_id */
    AGENT_SUB_WATCH,  /* id = watch_id */
};

/* Starts dispatching init's messages (the sandbox is running). */
void agent_attach(struct sbx *sb);
uint32_t agent_next_id(struct sbx *sb);
int agent_expect(struct sbx *sb, uint32_t request_id, agent_fn fn, void *user, err_t *err);
int agent_subscribe(struct sbx *sb, enum agent_sub_kind kind, uint32_t id, agent_fn fn, void *user,
                    err_t *err);
/* Drops every expectation and subscription of user (no callback). */
void agent_cancel(struct sbx *sb, void *user);
void agent_unsubscribe(struct sbx *sb, enum agent_sub_kind kind, uint32_t id);
/* Calls every waiting callback with m = NULL and why, and drops them. */
void agent_fail_all(struct sbx *sb, const char *why);
