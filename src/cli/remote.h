/* What the daemon's client subcommands share (create, ls, exec, sh, cp, pause, resume, kill,
 * logs): the exit statuses, the error line, K=V arguments, a sandbox's envd access, and envd's
 * unary Connect calls. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/client.h"
#include "util/err.h"

/* Exit statuses of the client subcommands. exec and sh exit with the command's own status, so
 * their own failures are 125 (as docker and podman say theirs). */
#define REMOTE_EXIT_ERROR 1
#define REMOTE_EXIT_USAGE 2
#define REMOTE_EXIT_EXEC  125

/* "hutch CMD: message" on stderr; returns status. */
int remote_fail(const char *cmd, int status, const err_t *err);
/* "hutch CMD: ..." on stderr, a usage error; returns REMOTE_EXIT_USAGE. */
int remote_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "K=V" into obj[K] = V; -1 with err for one without '=' or with an empty K. */
int remote_add_pair(json_t *obj, const char *arg, const char *what, err_t *err);
/* Whether s could be a sandbox id (the daemon's own check: [a-zA-Z0-9._-], 1..64). */
bool remote_id_ok(const char *s);

/* A control-plane call whose 2xx answer is JSON (or empty): into *out (NULL for none; the
 * caller's, json_decref), the status in *status when not NULL. A non-2xx answer is -1 with the
 * daemon's message. */
int remote_json_call(const char *method, const char *target, const json_t *body, json_t **out,
                     int *status, err_t *err);

/* A running sandbox's envd: its id and access token, and the user commands run as. */
struct remote_envd {
    char id[65];
    char token[129];
    bool as_root;
};
/* Looks id up (GET /sandboxes/ID): an unknown id is the daemon's 404 message; a paused one
 * says how to resume it. */
int remote_envd_open(const char *id, bool as_root, struct remote_envd *e, err_t *err);
/* The headers of an envd request (E2b-Sandbox-Id, X-Access-Token, Authorization for root):
 * fills h (room for REMOTE_ENVD_HEADERS more after *n) and returns the count. */
#define REMOTE_ENVD_HEADERS 4
size_t remote_envd_headers(const struct remote_envd *e, struct client_header *h);
/* A unary Connect call (POST /process.Process/SendInput, ...) with a JSON request; the reply
 * ignored. -1 with Connect's message on an error. */
int remote_envd_unary(const struct remote_envd *e, const char *path, const json_t *request,
                      err_t *err);
