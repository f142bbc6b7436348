/* The control channel between the host side and a sandbox's init: a SOCK_SEQPACKET socketpair
 * carrying fixed-size messages, optionally with one fd (SCM_RIGHTS). The host side treats every
 * message from inside as hostile: control_recv() checks size, type and termination. */
#pragma once
#include <stddef.h>
#include <stdint.h>

enum control_type {
    CONTROL_GO = 1,      /* host -> child: maps written, cgroups joined; go on */
    CONTROL_READY,       /* init -> host: sandbox built, the payload starts next; fd = /output */
    CONTROL_SETUP_ERROR, /* child -> host: setup failed; code = errno, text = what */
    CONTROL_EXEC_ERROR,  /* payload -> host: execve failed; code = errno, text = argv[0] */
    CONTROL_EXIT,        /* init -> host: payload ended; code = exit status or -1, sig = signal */
    CONTROL_CGROUPS,     /* host -> child: fds of the v1 `tasks` files to join (cgroup.h) */
    CONTROL_LAYERS,      /* host -> child: a writable root's layers (writable_root.h) */
    CONTROL_TYPE_MAX,
};

struct control_msg {
    uint32_t type;
    int32_t code;
    int32_t sig;
    char text[500];
};

#define CONTROL_MAX_FDS 8

/* Sends msg (and fd if >= 0). Async-signal-safe; returns 0 or -1 with errno. */
int control_send(int sock, const struct control_msg *msg, int fd);
int control_send_fds(int sock, const struct control_msg *msg, const int *fds, size_t n_fds);
int control_send_simple(int sock, enum control_type type, int code, int sig, const char *text);
/* Receives one message. Returns 1 with *msg (and *fd = received fd or -1), 0 on EOF, -1 on
 * error or a malformed message (errno EBADMSG). Extra fds are closed. */
int control_recv(int sock, struct control_msg *msg, int *fd);
/* The same with up to max_fds fds (the rest are closed); *n_fds gets how many. */
int control_recv_fds(int sock, struct control_msg *msg, int *fds, size_t max_fds, size_t *n_fds);
/* In the pre-exec child: report "what: strerror(errno)" as a setup error and _exit(1). */
_Noreturn void control_die(int sock, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
