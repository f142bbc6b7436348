/* The program's stdin. The sandbox never gets an open file description of the host's: what it
 * could do to one (set O_NONBLOCK, move the offset, write through a `0<>file`, readlink
 * /proc/self/fd/0 for a host path) would reach the caller. The program reads a pipe of its own
 * that the supervisor feeds from hutch's stdin, or a /dev/null opened for it when there is
 * nothing to read (hutch's stdin is /dev/null or closed, or --lang took it for the code).
 *
 * hutch's stdin is consumed by what the program read, not by what the pump read ahead, so
 * `while read f; do hutch run ...; done <list` works as it would with a plain program:
 *   - a regular file is read with pread(2), and its offset moved at the end to where the
 *     program stopped reading;
 *   - a pipe or FIFO is copied with tee(2), one page at a time into a one-page pipe, and only
 *     what the program took is drained from it; once the program has taken STDIN_EXACT_MAX,
 *     the pipe is read ahead instead (a page per round is slow for bulk input);
 *   - anything else (a terminal, a socket, a device) is read ahead, as by any filter. */
#pragma once
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define STDIN_EXACT_MAX (1u << 20)

enum stdin_mode {
    STDIN_NULL,   /* nothing to read: the program gets /dev/null */
    STDIN_FILE,   /* a regular file, read with pread */
    STDIN_PIPE,   /* a pipe or FIFO, copied with tee */
    STDIN_STREAM, /* read ahead */
};

struct stdin_pump {
    enum stdin_mode mode;
    int source;     /* hutch's stdin (never closed here) */
    bool done;      /* end of the source, or the program closed its stdin */
    int child_fd;   /* the program's stdin until the sandbox has its copy, then -1 */
    int pipe_w;     /* our end of the program's pipe, -1 once closed */
    int pipe_r;     /* FILE: a copy of the program's end, to count what it has not read */
    int null_fd;    /* PIPE: /dev/null, where what the program took from the source goes */
    off_t start;    /* FILE: the source's offset at the start */
    uint64_t fed;   /* FILE: bytes written into the pipe; PIPE: bytes teed and not yet drained */
    uint64_t taken; /* FILE: bytes read from the source; PIPE: bytes the program took */
    char buf[65536];
    size_t len, off;
};

/* Prepares the program's stdin from source (hutch's fd 0; consumed: it was read already).
 * p->child_fd is what the sandbox gets as fd 0. Returns 0, or -1 with nothing left open. */
int stdin_pump_open(struct stdin_pump *p, int source, bool consumed, err_t *err);
/* Once the sandbox holds its copy: drops ours, but for what the pump needs. */
void stdin_pump_started(struct stdin_pump *p);
/* What the pump waits for: src on the source, dst on the program's pipe (fd -1: nothing). */
void stdin_pump_events(const struct stdin_pump *p, struct pollfd *src, struct pollfd *dst);
void stdin_pump_run(struct stdin_pump *p, short src_revents, short dst_revents);
/* After the program is gone: leaves the source where the program stopped reading (FILE, PIPE),
 * closes everything. Idempotent; safe on a pump that was never opened (all fds -1). */
void stdin_pump_close(struct stdin_pump *p);
