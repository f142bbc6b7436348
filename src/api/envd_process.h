/* envd's process service in Connect JSON (`process.Process`, ../shared/e2b/PROTOCOL.md section 3,
 * "Process service"): the requests the SDK sends, parsed from hostile input with the engine's
 * limits, and the events and replies it reads. Pure functions: the daemon maps a parsed Start to
 * a jail_command_spec and the engine's ends to these events. Parsers fill err with EINVAL (or
 * E2BIG, ENAMETOOLONG) naming the field, for an invalid_argument error. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define ENVD_MAX_ARGS  4096         /* argv entries, as the agent protocol allows */
#define ENVD_MAX_ARG   (128u << 10) /* one argument, the kernel's MAX_ARG_STRLEN */
#define ENVD_MAX_ENVS  512          /* per-command env entries */
#define ENVD_MAX_CWD   4095
#define ENVD_MAX_TAG   128
#define ENVD_MAX_INPUT (1u << 20) /* decoded bytes of one SendInput */

/* Start: {process:{cmd, args[], envs{}, cwd?}, pty?{size{cols,rows}}, stdin?, tag?} */
struct envd_start {
    char **argv;     /* cmd, then args; NULL-terminated; owned */
    char **envp;     /* NAME=VALUE, NULL-terminated; owned (the sandbox's own come first, later) */
    char *cwd;       /* NULL: the user's home */
    char *tag;       /* NULL: none */
    bool stdin_open; /* stdin omitted: true (the SDK's default for a pty) */
    bool pty;
    unsigned short rows, cols;
};
int envd_start_parse(const char *json, struct envd_start *out, err_t *err);
void envd_start_free(struct envd_start *s);

/* ProcessSelector: {process:{pid}} or {process:{tag}}. */
struct envd_selector {
    bool by_tag;
    uint32_t pid;
    char tag[ENVD_MAX_TAG + 1];
};
/* Connect, CloseStdin: just the selector. */
int envd_selector_parse(const char *json, struct envd_selector *out, err_t *err);

/* SendInput: {process, input:{stdin|pty: base64}}; *data malloc'd (*len bytes). */
int envd_input_parse(const char *json, struct envd_selector *sel, bool *to_pty, uint8_t **data,
                     size_t *len, err_t *err);
/* One message of StreamInput's request stream: {start:{process}}, {data:{input:{stdin|pty}}} or
 * {keepalive:{}}; sel is set for a start, *data (malloc'd) for data. */
enum envd_stream_input {
    ENVD_STREAM_INPUT_START,
    ENVD_STREAM_INPUT_DATA,
    ENVD_STREAM_INPUT_KEEPALIVE
};
int envd_stream_input_parse(const char *json, enum envd_stream_input *kind,
                            struct envd_selector *sel, bool *to_pty, uint8_t **data, size_t *len,
                            err_t *err);
/* SendSignal: {process, signal: "SIGNAL_SIGKILL" | "SIGNAL_SIGTERM" | 9 | 15}. */
int envd_signal_parse(const char *json, struct envd_selector *sel, int *signo, err_t *err);
/* Update: {process, pty:{size:{cols, rows}}}. */
int envd_update_parse(const char *json, struct envd_selector *sel, unsigned short *rows,
                      unsigned short *cols, err_t *err);

/* The events of a Start or Connect stream, each one frame's JSON (malloc'd; NULL on no memory):
 * {"event":{"start":{"pid":N}}}, {"event":{"data":{"stdout":"<base64>"}}} (stream "stdout",
 * "stderr" or "pty"), {"event":{"keepalive":{}}}, and the end. */
char *envd_event_start(uint32_t pid);
char *envd_event_data(const char *stream, const uint8_t *data, size_t len);
char *envd_event_keepalive(void);
/* The end as Go's os.ProcessState prints it: exit code (omitted when 0), exited, "exit status N"
 * or "signal: killed", and error (the same text) unless it exited 0. signo 0: it exited. */
char *envd_event_end(int exit_code, int signo);

/* One entry of List's {processes:[{config:{cmd,args,envs,cwd?},pid,tag?}]}. */
struct envd_process_entry {
    uint32_t pid;
    const char *tag; /* NULL or "" for none */
    const char *const *argv;
    const char *const *envp;
    const char *cwd; /* NULL for none */
};
char *envd_list_reply(const struct envd_process_entry *entries, size_t n);
