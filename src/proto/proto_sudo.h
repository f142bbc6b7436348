/* The sudo messages (version 3): what a sandbox process sends on init's sudo socket (SUDO), and
 * what init sends its spawner for it (SUDO_SPAWN). README.md, "The sudo socket", is the
 * specification. Decoding allocates only the argv and env pointer arrays; strings point into the
 * received buffer. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "proto/proto.h"

/* Inside every agent sandbox: bound by init before its filter, 0666 (anyone inside may ask). */
#define PROTO_SUDO_DIR    "/run/hutch"
#define PROTO_SUDO_SOCKET PROTO_SUDO_DIR "/sudo"
/* A SUDO and a SUDO_SPAWN carry exactly these: stdin, stdout, stderr. */
#define PROTO_SUDO_FDS 3

struct proto_sudo {
    char **argv;         /* malloc'd array of pointers into the buffer, NULL-terminated */
    char **envp;         /* likewise; never NULL after a decode */
    const char *cwd;     /* NULL = the target user's home */
    bool as_root;        /* the target: root (USER 1) or the user (USER 0) */
    uint32_t caller_pid; /* SUDO_SPAWN only: the asking process (its credentials, not its word) */
};

/* A SUDO or a SUDO_SPAWN (type) with PROTO_SUDO_FDS fds. The length, or 0 if it does not fit. */
size_t proto_encode_sudo(void *buf, size_t cap, enum proto_type type, uint32_t request_id,
                         const struct proto_sudo *s);
/* Validates a SUDO or a SUDO_SPAWN: a non-empty argv, NAME=VALUE env entries, an absolute cwd,
 * USER exactly once, PID in a SUDO_SPAWN only (and above 1), exactly PROTO_SUDO_FDS fds, no field
 * of another message. On success the caller frees (proto_sudo_free). */
int proto_decode_sudo(const struct proto_msg *m, struct proto_sudo *out, err_t *err);
void proto_sudo_free(struct proto_sudo *s);

/* proto_recv, and the sender's credentials (SCM_CREDENTIALS: the socket has SO_PASSCRED), which
 * the kernel checked: a process cannot claim another's pid or ids. cred->pid is 0 when none came.
 */
ssize_t proto_recv_creds(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds,
                         struct ucred *cred);
