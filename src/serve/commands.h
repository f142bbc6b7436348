/* The commands of one sandbox as the daemon holds them: started through init (jail_command_start),
 * their output read straight from the pipes or the pty init handed over, kept in a bounded replay
 * buffer, and given to whoever is attached (a Start or Connect stream; none while the client is
 * away: a background command keeps running and its output is kept, up to the buffer's size).
 * A command ends when init said EXITED and its outputs are at EOF; its group is then removed, its
 * end (code, signal, CPU, peak memory) goes into the sandbox's event log, and it is forgotten. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "jail/command.h"
#include "serve/agent.h"
#include "serve/sandbox.h"

#define SCMD_REPLAY_MAX  (1u << 20)            /* bytes of output kept for a Connect */
#define SCMD_RECORD_HALF (SCMD_REPLAY_MAX / 2) /* each of a command's two output files */
#define SCMD_INPUT_MAX   (4u << 20) /* bytes of input waiting for a command to read them */
#define SCMD_INPUT_HIGH                                                                            \
    (256u << 10) /* above it, a streaming writer waits (scmd_input_congested)                      \
                  */

struct scmd;

/* What an attached stream is told. on_output's stream: "stdout", "stderr" or "pty". */
struct scmd_listener {
    void (*on_started)(struct scmd *c, void *user); /* the pid is known */
    void (*on_output)(struct scmd *c, const char *stream, const uint8_t *data, size_t len,
                      void *user);
    /* It ended (c->exit_code, c->signo), or could not start or was lost (c->error set). The
     * listener is detached after it. */
    void (*on_end)(struct scmd *c, void *user);
    /* Optional: its lifetime (scmd_set_lifetime) is over and it is about to be killed. A Start's
     * stream ends here with deadline_exceeded, before the kill's end could reach its client. */
    void (*on_lifetime_over)(struct scmd *c, void *user);
};

struct scmd_chunk;
struct scmd_attach;

/* Input that waits for the command to read it (command_input.c). */
struct scmd_input {
    int fd; /* its own dup of the stdin pipe's write end or of the pty master; -1 until used */
    uv_poll_t poll;
    bool poll_open, polling;
    uint8_t *buf;
    size_t off, len, cap;
    bool close_after; /* stdin: closed once what waits is written */
};
typedef void (*scmd_drained_fn)(struct scmd *c, void *user);

struct scmd {
    struct sbx *sb;
    uint32_t request_id, cmd_id, pid;
    char group[JAIL_COMMAND_GROUP_MAX + 1];
    char *tag;
    char **argv, **envp, *cwd; /* for List */
    int out_fd[3];             /* stdout, stderr, pty master; -1 when none or at EOF */
    uv_poll_t poll[3];
    bool polling[3];
    int stdin_fd;               /* the write end of its stdin, -1 when none or closed */
    struct scmd_input input[2]; /* to stdin, to the pty */
    scmd_drained_fn input_drained;
    void *input_drained_user;
    bool started, exited, ended, as_root, adopted;
    int32_t exit_code;
    int signo;
    char error[256];
    uint64_t start_ns;
    int64_t start_wall_ms;
    /* its record in the run directory (command_record.c): the output file written now */
    int record_fd;
    unsigned record_file;
    uint32_t record_seq;
    size_t record_size;
    unsigned holds; /* attached streams that asked to stop reading (backpressure) */
    unsigned finish_tries;
    uv_timer_t finish_timer; /* its lifetime while it runs; the group's removal retries after */
    uint64_t lifetime_ms;    /* 0: none */
    struct scmd_chunk *replay, *replay_tail;
    size_t replay_bytes;
    struct scmd_attach *attached;
    unsigned dispatching; /* its listeners are being called: a detach only marks (commands.c) */
    unsigned open_handles;
    struct scmd *next;
};

/* Starts a command; the listener (may be NULL: a command nobody follows) is attached. */
struct scmd *scmd_start(struct sbx *sb, const struct jail_command_spec *spec,
                        const struct scmd_listener *l, void *user, err_t *err);
/* Attaches a listener to a running command: on_started at once, the replay buffer's output,
 * then what follows. */
int scmd_attach(struct scmd *c, const struct scmd_listener *l, void *user, err_t *err);
void scmd_detach(struct scmd *c, void *user);
/* Backpressure from one attached stream: hold (stop reading the outputs) or release. */
void scmd_hold(struct scmd *c, bool hold);
/* The running command with this pid, or this tag (pid 0); NULL when none. */
struct scmd *scmd_find(struct sbx *sb, uint32_t pid, const char *tag);
/* Kills its whole tree lifetime_ms after it started (envd's Connect-Timeout-Ms on Start);
 * 0 leaves it to run. */
void scmd_set_lifetime(struct scmd *c, uint64_t lifetime_ms);
/* The sandbox is frozen, and thawed after paused_ns: a command's lifetime does not count the
 * time it was frozen (as in E2B, whose paused VM has no clock running). */
void scmd_pause_all(struct sbx *sb);
void scmd_resume_all(struct sbx *sb, uint64_t paused_ns);
/* SIGKILL takes its whole tree (its cgroup); another signal goes to its process group. */
int scmd_signal(struct scmd *c, int signo, err_t *err);
/* scmd_signal, for a caller that waits for init's answer: 1 when done now (SIGKILL; fn is not
 * called), 0 when fn will have the answer (agent.h: agent_expect's, so agent_cancel(sb, user)
 * drops it; scmd_answer_check reads it), -1 with err (fn is not called). */
int scmd_signal_answered(struct scmd *c, int signo, agent_fn fn, void *user, err_t *err);
/* What init answered to a signal or a close of stdin (m and why as an agent_fn has them): 0 when
 * it was done, else -1 with why not (init's error, or init gone). */
int scmd_answer_check(const struct jail_agent_msg *m, const char *why, err_t *err);
/* Writes to its stdin (or its pty), in order: what the fd does not take now waits and is written
 * when it can be; EAGAIN (nothing taken) when more than SCMD_INPUT_MAX bytes would wait. */
int scmd_input(struct scmd *c, bool to_pty, const uint8_t *data, size_t len, err_t *err);
/* More than SCMD_INPUT_HIGH bytes wait: a writer that streams should wait for on_drained. */
bool scmd_input_congested(const struct scmd *c);
/* fn once, when nothing waits any more (NULL: none); dropped when the command is freed. */
void scmd_input_on_drained(struct scmd *c, scmd_drained_fn fn, void *user);
/* Closes its stdin, once the input that waits is written: 1 when that is left to the queue (or
 * done without init), 0 when fn will have init's answer (fn NULL: nobody waits for it), -1 with
 * err. */
int scmd_close_stdin(struct scmd *c, agent_fn fn, void *user, err_t *err);
int scmd_resize(struct scmd *c, unsigned short rows, unsigned short cols, err_t *err);
/* After a restart: init's running commands attached again (LIST, then ATTACH: their ends come
 * again, and what they wrote meanwhile waits in the pipes), the ended ones logged and forgotten. */
void scmd_adopt_all(struct sbx *sb);
/* For command_input.c: a request about the command (SIGNAL, STDIN_CLOSE) sent to init, its
 * answer to fn (NULL: nobody waits for it). */
int scmd_request_answered(struct scmd *c, enum proto_type type, uint32_t arg, bool group,
                          agent_fn fn, void *user, err_t *err);
/* For commands.c: the input queues made ready, and dropped (their handles closed). */
void scmd_input_init(struct scmd *c);
void scmd_input_release(struct scmd *c);
/* For commands.c: one of the command's handles has closed; freed after the last. */
void scmd_handle_closed(struct scmd *c);
/* For command_record.c: output into the replay buffer (no record of it), a list freed. */
void scmd_keep_for_replay(struct scmd *c, unsigned stream, const uint8_t *data, size_t len);
void scmd_free_list(char **list);

/* Its record in the run directory, for a daemon that adopts it after a restart
 * (command_record.c): started once it runs (argv, env, cwd, start, lifetime), output added as it
 * is read, closed when the daemon lets go of it, removed when it ended; loaded (cmd_id set) by
 * the daemon that adopts it, -1 when there is none; forget removes one by id; remove_all every
 * record of a sandbox that is gone. */
void scmd_record_start(struct scmd *c);
void scmd_record_update(struct scmd *c); /* its start or lifetime moved */
void scmd_record_output(struct scmd *c, unsigned stream, const uint8_t *data, size_t len);
void scmd_record_close(struct scmd *c);
void scmd_record_remove(struct scmd *c);
int scmd_record_load(struct scmd *c);
void scmd_record_forget(struct sbx *sb, uint32_t cmd_id);
void scmd_record_remove_all(struct serve *d, const char *sandbox_id);

/* A command's environment (NULL-terminated, freed with scmd_free_list; NULL when out of
 * memory): envd's defaults (PATH, HOME, USER, LOGNAME of the user or root), the sandbox's
 * envVars, then extra's NAME=VALUE entries (NULL: none), a later one replacing an earlier. */
char **scmd_env(struct sbx *sb, bool as_root, char *const *extra);
/* Sends signo to the command's first process only (its process group is left alone): a
 * kernel's SIGINT (src/interp/PROTOCOL.md). */
int scmd_signal_leader(struct scmd *c, int signo, err_t *err);

/* The sandbox is gone: every command's listeners get on_end with the reason, all is freed. */
void scmd_release_all(struct sbx *sb, const char *why);
