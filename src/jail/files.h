/* The host's side of a sandbox's files (an agent sandbox: one started without a command): stat,
 * list, read, write, mkdir, move, remove and watch, served inside by init's files workers with
 * the rights of the user the request names (src/init/README.md, "Files"). Every call returns at
 * once; answers and watch events arrive on the jail's control_fd, read by jail_agent_recv
 * (command.h), which checks them here. A read or write answer is an fd of the file itself:
 * its bytes never pass through init, and the caller reads or writes it in its own loop.
 *
 * What the caller must know about such an fd, which comes from inside the sandbox:
 *   - it was checked to be a regular file on one of the sandbox's own mounts, opened only for
 *     reading or only for writing (jail_files_check_fd); the caller checks that it is the
 *     access it asked for (jail_files_msg.fd_writable);
 *   - the sandbox may change the file meanwhile (append, truncate, rename): read at most the
 *     size the answer gave, and never mmap it (a truncation would be SIGBUS in the caller);
 *   - what the caller writes into the sandbox's tmpfs is charged to the caller's memory cgroup
 *     (the kernel charges the writer), up to the sandbox's disk size. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "jail/jail.h"
#include "proto/proto_files.h"

/* What a file answer carried: a part of struct jail_agent_msg (command.h). Strings point into
 * that message's raw buffer. */
struct jail_files_msg {
    struct proto_file_entry file; /* FILE_INFO, FILE_OPENED */
    int fd;           /* FILE_OPENED: the file, checked; the caller's to close. Else -1 */
    bool fd_writable; /* FILE_OPENED: opened for writing, else for reading */
    struct proto_file_entry entries[PROTO_MAX_FILES]; /* FILE_LIST_REPLY (more: the message's) */
    size_t n_entries;
    uint32_t watch_id; /* WATCH_EVENTS, WATCH_ENDED (errnum, message: the message's), and the OK
                          of a WATCH_START */
    struct proto_watch_event events[PROTO_MAX_EVENTS];
    size_t n_events;
    bool created; /* the OK of a FILE_MKDIR: made now, not there already */
};

/* Sends a file request: r->type is one of PROTO_FILE_STAT .. PROTO_WATCH_STOP, its paths
 * absolute (the caller joins relative ones to the user's home: JAIL_USER_HOME or /root).
 * r->as_root: whose rights (root's, or the user's JAIL_USER_UID:JAIL_USER_GID). The answer
 * comes later with request_id: FILE_INFO, FILE_LIST_REPLY chunks, FILE_OPENED, OK or ERROR. */
int jail_files_request(struct jail *jail, uint32_t request_id, const struct proto_file_request *r,
                       err_t *err);

struct jail_agent_msg;
/* For jail_agent_recv: decodes a file message of init's (m, with the n_fds fds that came) into
 * out. Takes the fd it keeps (*n_fds becomes 0); the caller closes what is left. */
int jail_files_decode(struct jail *jail, const struct proto_msg *m, const int *fds, size_t *n_fds,
                      struct jail_agent_msg *out, err_t *err);
/* Whether fd, received from inside, may be used as the sandbox file it claims to be: a regular
 * file, opened for writing only (writable) or reading only, on a mount of the sandbox's own
 * mount namespace (never a file of the host's that a compromised init held, such as the uid
 * range's lock). 0, or -1 with err (EPERM); the caller adds the sandbox's name. */
int jail_files_check_fd(struct jail *jail, int fd, bool writable, err_t *err);
