/* A files worker (files_worker.c): the process that serves a sandbox's files to the host for one
 * user, beneath the sandbox's root (src/files/). The spawner forks one per user (root and user)
 * when init first has a request for that user; what a request may do is what that user may do
 * (README.md, "Files"). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/proto.h"

/* Watches open at once in one worker: each is an inotify instance, and the sandbox's root (whose
 * count the workers share) may have 128 (JAIL_DEFAULT_INOTIFY_INSTANCES). */
#define FILES_WORKER_MAX_WATCHES 32

struct files_watch;

struct files_worker {
    int sock;     /* to init */
    int root_fd;  /* the sandbox's "/" */
    bool as_root; /* whose worker: root (0:0) or user (JAIL_USER_UID:JAIL_USER_GID) */
    struct {
        uint32_t id; /* init's, unique in the sandbox */
        struct files_watch *watch;
        bool entries; /* WATCH_ENTRIES: CREATE, WRITE and CHMOD events carry the file */
    } watches[FILES_WORKER_MAX_WATCHES];
    size_t n_watches;
    uint8_t out[PROTO_MAX_TO_HOST]; /* a reply or a batch of events, being built */
};

/* In a fork of the spawner's (unfiltered, with the sandbox root's capabilities): closes every fd
 * but sock, becomes the worker (identity, capabilities, filter) and serves requests from sock
 * until init goes. Never returns. */
_Noreturn void files_worker_main(int sock, bool as_root, bool writable_root);

/* files_ops.c: serves one request (a message from init, checked here again); the replies go to
 * init before it returns. */
void files_ops_serve(struct files_worker *w, const uint8_t *msg, size_t len);
/* Delivers what watch i has waiting as WATCH_EVENTS; a watch that broke is reported
 * (WATCH_ENDED) and closed. */
void files_ops_watch_read(struct files_worker *w, size_t i);

/* Sends one message to init, waiting while init's side is full (the worker has nothing else
 * to do meanwhile: its watches wait in the kernel's queue). Exits once init is gone. */
void files_worker_send(struct files_worker *w, const void *buf, size_t len, const int *fds,
                       size_t n_fds);
