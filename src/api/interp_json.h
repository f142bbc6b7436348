/* The code interpreter's JSON (src/serve/interp.h): the requests a client sends to port 49999,
 * and the messages a kernel sends (src/interp/PROTOCOL.md), each parsed with its limits and
 * every field checked. A kernel's line is hostile input (code in the sandbox can write to the
 * protocol's fd): what goes on to the client is re-encoded from the checked fields only. */
#pragma once
#include <jansson.h>
#include <stddef.h>

#include "util/err.h"

#define INTERP_CWD_MAX 1024

/* POST /execute: code, and context_id or language (both: EINVAL), env_vars strings only. */
struct interp_execute {
    json_t *code;     /* a string */
    char *context_id; /* NULL when none */
    char *language;   /* NULL when none */
    json_t *env_vars; /* an object of strings; {} when none */
};
int interp_execute_parse(const char *body, size_t len, struct interp_execute *out, err_t *err);
void interp_execute_free(struct interp_execute *e);
/* The request for the kernel: {"type":"execute","id","code","env_vars"}, one line with its '\n'
 * (*len bytes, malloc'd), or NULL when out of memory. */
char *interp_execute_request(const struct interp_execute *e, const char *id, size_t *len);
/* The request that gives a kernel its sandbox's env vars after its start (a warm pool's kernel
 * once its sandbox is claimed): {"type":"environment","env_vars"}, one line with its '\n', from
 * env_json (an object; its members that are not strings left out). NULL when it has no string
 * member, is not an object, or memory is out. */
char *interp_environment_request(const char *env_json, size_t *len);

/* POST /contexts: language (NULL: python) and cwd (NULL: the default; else absolute, without NUL
 * bytes, at most INTERP_CWD_MAX bytes). An empty body is {}. */
struct interp_context_request {
    char *language, *cwd;
};
int interp_context_parse(const char *body, size_t len, struct interp_context_request *out,
                         err_t *err);
void interp_context_free(struct interp_context_request *r);

/* One line from a kernel. */
enum kernel_message_type {
    KERNEL_READY,
    KERNEL_KEEPALIVE,
    KERNEL_OUTPUT,          /* stdout, stderr: client_line made */
    KERNEL_RESULT,          /* client_line made */
    KERNEL_ERROR,           /* client_line made */
    KERNEL_END_OF_EXECUTION /* end_id set */
};
struct kernel_message {
    enum kernel_message_type type;
    json_t *client_line; /* what the client gets (timestamp_iso added to output); NULL if none */
    char end_id[65];
    long pid; /* READY: the kernel's pid in its sandbox when it says it (a zygote's fork), or 0 */
};
/* EPROTO with what was wrong in err (for the error that says why the kernel was stopped). */
int kernel_message_parse(const char *line, size_t len, const char *timestamp_iso,
                         struct kernel_message *out, err_t *err);
void kernel_message_free(struct kernel_message *m);
/* A client line (steals o): compact JSON and its '\n', *len bytes; NULL when out of memory. */
char *interp_line(json_t *o, size_t *len);
