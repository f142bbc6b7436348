/* The host's side of a sandbox's files (files.h): requests out, answers checked in. Everything
 * from init is hostile (init shares its sandbox with the program), fds most of all: a
 * compromised init could hand over any fd it holds, and it holds one file of the host's (the
 * uid range's lock) for its whole life. */
#include "jail/files.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/command.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
/* A sandbox's mountinfo is a few dozen lines: it cannot mount (its seccomp and capabilities). */
#define MOUNTINFO_MAX (256u << 10)

int jail_files_request(struct jail *jail, uint32_t request_id, const struct proto_file_request *r,
                       err_t *err)
{
    if (jail->control_fd < 0)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    if (!proto_is_file_request(r->type))
        return err_set(err, EINVAL, "sandbox %s: message %u is not a file request", jail->name,
                       r->type);
    if (r->type != PROTO_WATCH_STOP && (!r->path || r->path[0] != '/'))
        return err_set(err, EINVAL, "sandbox %s: a file request needs an absolute path",
                       jail->name);
    if (r->type == PROTO_FILE_MOVE && (!r->to || r->to[0] != '/'))
        return err_set(err, EINVAL, "sandbox %s: a move needs an absolute destination", jail->name);
    uint8_t buf[2 * PROTO_MAX_STRING + 512];
    return jail_agent_send(jail, buf, proto_encode_file_request(buf, sizeof buf, request_id, r),
                           NULL, 0, err);
}

/* Whether mount_id is a mount of the namespace that init (still running) is in. */
static int mount_in_sandbox(struct jail *jail, uint64_t mount_id, err_t *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)jail->pid);
    cleanup_free char *text = malloc(MOUNTINFO_MAX);
    if (!text)
        return err_set(err, ENOMEM, "mountinfo");
    ssize_t n = file_read_at(AT_FDCWD, path, text, MOUNTINFO_MAX, err);
    if (n < 0)
        return -1;
    if ((size_t)n + 1 >= MOUNTINFO_MAX)
        return err_set(err, E2BIG, "%s is too long", path);
    /* Read first, then make sure the pid was still init's: once init has gone, its pid could
     * name another process, whose mounts these would be. */
    struct pollfd p = {.fd = jail->pidfd, .events = POLLIN};
    if (jail->pidfd < 0 || poll(&p, 1, 0) != 0)
        return err_set(err, ESRCH, "init is gone");
    for (char *line = text; *line;) {
        char *end;
        unsigned long long id = strtoull(line, &end, 10);
        if (end != line && *end == ' ' && id == mount_id)
            return 1;
        line = strchrnul(line, '\n');
        if (*line)
            line++;
    }
    return 0;
}

int jail_files_check_fd(struct jail *jail, int fd, bool writable, err_t *err)
{
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_MNT_ID, &stx) < 0)
        return err_set(err, errno, "statx of the file init passed");
    if (!S_ISREG(stx.stx_mode))
        return err_set(err, EPERM, "init passed an fd that is not a regular file (type 0%o)",
                       (unsigned)(stx.stx_mode & S_IFMT));
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_PATH) || (fl & O_ACCMODE) != (writable ? O_WRONLY : O_RDONLY))
        return err_set(err, EPERM, "init passed a file opened for other than %s only",
                       writable ? "writing" : "reading");
    if (!(stx.stx_mask & STATX_MNT_ID))
        return err_set(err, EPERM, "the kernel cannot say which mount the file init passed is on");
    int inside = mount_in_sandbox(jail, stx.stx_mnt_id, err);
    if (inside < 0)
        return -1;
    if (!inside)
        return err_set(err, EPERM, "init passed a file that is not on the sandbox's mounts");
    return 0;
}

int jail_files_decode(struct jail *jail, const struct proto_msg *m, const int *fds, size_t *n_fds,
                      struct jail_agent_msg *out, err_t *err)
{
    struct jail_files_msg *f = &out->files;
    uint32_t access = 0, e = EIO;
    const char *text = NULL;
    switch (m->type) {
    case PROTO_FILE_INFO:
        return proto_decode_file_reply(m, &f->file, NULL, err);
    case PROTO_FILE_OPENED:
        /* proto_recv matched the fds to the header's count, the decoder the count to one. */
        if (proto_decode_file_reply(m, &f->file, &access, err) < 0 ||
            jail_files_check_fd(jail, fds[0], access == 1, err) < 0)
            return -1;
        f->fd = fds[0];
        f->fd_writable = access == 1;
        *n_fds = 0;
        return 0;
    case PROTO_FILE_LIST_REPLY:
        return proto_decode_file_list(m, f->entries, PROTO_MAX_FILES, &f->n_entries, &out->more,
                                      err);
    case PROTO_WATCH_EVENTS:
        return proto_decode_watch_events(m, &f->watch_id, f->events, PROTO_MAX_EVENTS, &f->n_events,
                                         err);
    case PROTO_WATCH_ENDED:
        if (proto_get_u32(m, PROTO_T_WATCH_ID, &f->watch_id, err) < 0 ||
            proto_get_u32(m, PROTO_T_ERRNO, &e, err) < 0 ||
            proto_get_str(m, PROTO_T_MESSAGE, PROTO_MAX_STRING, &text, err) < 0)
            return -1;
        out->errnum = e > 0 && e < 4096 ? (int)e : EIO;
        snprintf(out->message, sizeof out->message, "%s", text ? text : "");
        return 0;
    default:
        return err_set(err, EBADMSG, "protocol: message %u is not a file answer", m->type);
    }
}
