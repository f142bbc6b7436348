/* A command in a sandbox, started through envd's process.Process/Start (a Connect JSON server
 * stream over the daemon's socket): the request sent, the stream's envelopes decoded as they
 * arrive, its events (start, data, keepalive, end) handled, and the command's exit status made
 * from its end as a shell would show it (the exit code, or 128 + the signal). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/client.h"
#include "cli/remote.h"

/* An envelope larger than this ends the stream with an error (the daemon's data frames carry
 * at most 64 KiB of output, base64'd). */
#define STREAM_MAX_FRAME (4u << 20)

struct stream {
    struct remote_envd envd;
    struct client *c;
    struct client_response r;
    /* the envelope being read */
    uint8_t header[5];
    size_t header_have;
    uint32_t length;
    char *message;
    size_t have;
    /* what the stream said */
    uint32_t pid;
    bool started, ended, end_of_stream;
    int exit_status;   /* once ended */
    char status[128];  /* the end's status text, "exit status 3", "signal: killed" */
    char error[512];   /* the end-of-stream's error, or a non-200 answer's message */
    bool start_failed; /* the stream ended with an error before the command started */
};

/* Sends Start with request (the StartRequest JSON: process, pty, stdin) and reads the answer's
 * head. -1 with err when the daemon refuses it. */
int stream_start(struct stream *s, const struct remote_envd *e, const json_t *request, err_t *err);
/* One read from the stream (poll said readable), its events handled: output written to fd 1
 * and 2 (pty output to 1). 0 while it goes on, 1 once it is over (s->ended tells whether the
 * command's end came), -1 with err. */
int stream_pump(struct stream *s, err_t *err);
void stream_close(struct stream *s);

/* Go's ProcessState text for a signal, "signal: killed", to 128 + its number; -1 if unknown. */
int stream_signal_status(const char *status);
