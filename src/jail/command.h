/* The host's side of commands in an agent sandbox (a sandbox started without a command): each
 * command gets a cgroup of its own below the sandbox's, is started by init's spawner, and its
 * output comes straight to the host through the fds init hands over. Every call returns at once;
 * answers and ends arrive on the jail's control_fd (jail_agent_recv). Messages from init are
 * hostile input: checked by src/proto before anything is believed. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "jail/files.h"
#include "jail/jail.h"
#include "jail/verdict.h"
#include "proto/proto.h"

#define JAIL_COMMAND_GROUP_MAX 32
/* A command's tag, as init keeps it (COMMANDS_TAG_MAX); longer is ENAMETOOLONG. A command's cwd,
 * argv and environment have the bounds of a sandbox's (jail.h), which its SPAWN always holds: */
#define JAIL_COMMAND_MAX_TAG 128
_Static_assert(JAIL_MAX_SANDBOX_PATH <= PROTO_MAX_STRING &&
                   JAIL_COMMAND_MAX_TAG <= PROTO_MAX_STRING &&
                   JAIL_MAX_ARG_BYTES <= PROTO_MAX_ARG && JAIL_MAX_ARGS <= PROTO_MAX_ARGS,
               "init takes what jail_command_start lets through");
/* each entry costs its string, its NUL and an 8-byte field header: what the total counts */
_Static_assert(JAIL_MAX_ARGV_ENV_BYTES + 2 * (PROTO_MAX_STRING + 9) + 256 <= PROTO_MAX_TO_INIT,
               "a SPAWN holds the largest argv and environment");

struct jail_command_spec {
    const char *const *argv; /* non-empty */
    const char *const *envp; /* NAME=VALUE entries */
    const char *cwd;         /* NULL = the user's home */
    const char *tag;         /* NULL or up to JAIL_COMMAND_MAX_TAG bytes, told back by lists */
    bool as_root;
    bool stdin_pipe;
    bool pty;
    unsigned short rows, cols;
};

/* Makes the command's cgroup (hutch/NAME/group, group = "c" + request_id) and sends the SPAWN.
 * The answer (SPAWN_REPLY or ERROR, with request_id) comes later; on an ERROR the caller removes
 * the group (jail_command_group_remove). */
int jail_command_start(struct jail *jail, const struct jail_command_spec *spec, uint32_t request_id,
                       char group[JAIL_COMMAND_GROUP_MAX + 1], err_t *err);

/* The first request id whose group is free: one past the largest "cN" the sandbox's cgroup has
 * (1 when none). A daemon that reopens a sandbox starts its ids there, since the commands that
 * ran on through its restart keep their groups. */
int jail_command_first_free_id(struct jail *jail, uint32_t *id, err_t *err);

/* What init said, checked. */
struct jail_agent_msg {
    enum proto_type type;
    uint32_t request_id;
    struct proto_command command; /* EXITED, SPAWN_REPLY (cmd_id, pid) */
    uint32_t fds_mask;            /* SPAWN_REPLY: PROTO_FD_* */
    int fds[4];                   /* SPAWN_REPLY: stdout, stderr, stdin, pty (or -1); the
                                     caller's to close */
    uint32_t written;             /* OK of a STDIN_WRITE */
    uint32_t version;             /* HELLO_REPLY: the protocol version init speaks (files: 2) */
    struct jail_files_msg files;  /* the file answers and watch events (files.h) */
    int errnum;                   /* ERROR, WATCH_ENDED */
    char message[512];            /* ERROR, WATCH_ENDED */
    /* LIST_REPLY: the entries, and whether more chunks follow */
    struct proto_command entries[PROTO_MAX_ENTRIES];
    size_t n_entries;
    bool more;
    uint8_t raw[PROTO_MAX_TO_HOST]; /* the message itself: every string above points into it */
};
/* About 120 KiB: not for the stack of a deep call. 1 with a message, 0 when nothing is waiting, -1
 * (err) on a malformed message or when init's end has closed (EPIPE). */
int jail_agent_recv(struct jail *jail, struct jail_agent_msg *out, err_t *err);

/* Sends an encoded request (len 0: it did not fit, E2BIG) with fds; never blocks. */
int jail_agent_send(struct jail *jail, const void *buf, size_t len, const int *fds, size_t n_fds,
                    err_t *err);

/* Requests about one command (cmd_id as init numbered it): SIGNAL (arg = signal, group when
 * to its process group), STDIN_CLOSE, FORGET, ATTACH, LIST (cmd_id 0), HELLO. */
int jail_agent_request(struct jail *jail, enum proto_type type, uint32_t request_id,
                       uint32_t cmd_id, uint32_t arg, bool group, err_t *err);
int jail_agent_stdin_write(struct jail *jail, uint32_t request_id, uint32_t cmd_id,
                           const void *data, size_t len, err_t *err);
int jail_agent_resize(struct jail *jail, uint32_t request_id, uint32_t cmd_id, unsigned short rows,
                      unsigned short cols, err_t *err);

/* The command's cgroup, by the name jail_command_start gave it. */
int jail_command_group_open(struct jail *jail, const char *group, struct cgroup **out, err_t *err);
/* Kills the command's whole tree (daemonized grandchildren included): returns at once. */
int jail_command_kill_tree(struct jail *jail, const char *group, err_t *err);
/* After its EXITED: reads its counters into the verdict's accounting (facts from the exit) and
 * removes its group (killing what it left behind). EBUSY while members are still leaving. */
int jail_command_finish(struct jail *jail, const char *group, const struct proto_command *end,
                        struct verdict_facts *facts, struct verdict_usage *usage, err_t *err);
