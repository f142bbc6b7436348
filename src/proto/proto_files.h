/* The file messages of the control protocol (version 2, README.md): the requests the host sends
 * for a sandbox's files, the files that the answers describe, the events of a watch. A codec
 * only, as proto.h is: everything received is hostile input, checked field by field against the
 * limits; strings point into the received buffer. It knows nothing of users, roots or inotify. */
#pragma once
#include "proto/proto.h"

/* A request, as the host sends it and init (then its files worker) receives it. */
struct proto_file_request {
    enum proto_type type; /* PROTO_FILE_STAT .. PROTO_WATCH_STOP, the replies excluded */
    const char *path;     /* absolute; every type but WATCH_STOP */
    const char *to;       /* FILE_MOVE: absolute */
    bool as_root;         /* USER: whose rights the request has (0 user, 1 root; absent: user) */
    bool has_owner;       /* UID and GID came (both or neither): the owner of what is made */
    uint32_t uid, gid;
    bool has_mode; /* MODE came: the mode of what is made */
    uint32_t mode;
    uint32_t flags;       /* PROTO_FILE_*: FILE_WRITE and FILE_MOVE, each its own set */
    uint32_t depth;       /* FILE_LIST: 1..PROTO_MAX_DEPTH (absent: 1) */
    bool follow;          /* FILE_STAT: a final symlink is followed */
    bool recursive;       /* WATCH_START */
    uint32_t watch_id;    /* WATCH_STOP: not 0 */
    const char *metadata; /* FILE_WRITE: the file's metadata replaced by these lines; NULL: kept */
};

/* Whether type is one of the requests above. */
bool proto_is_file_request(enum proto_type type);
/* The message's length, or 0 if it does not fit in cap (or r->type is not a file request). */
size_t proto_encode_file_request(void *buf, size_t cap, uint32_t request_id,
                                 const struct proto_file_request *r);
/* Checks every field: which the type takes, none twice, the required ones there, bounds. */
int proto_decode_file_request(const struct proto_msg *m, struct proto_file_request *out,
                              err_t *err);

/* One file, as FILE_INFO, FILE_OPENED and FILE_LIST_REPLY carry it (a FILE field). */
struct proto_file_entry {
    const char *path;    /* absolute in the sandbox */
    const char *name;    /* its last component, "/" for the root; no "/" in it otherwise */
    const char *symlink; /* a symlink's own text, "" for anything else */
    uint32_t type;       /* PROTO_FILE_TYPE_* */
    uint32_t mode;       /* 07777 */
    uint32_t uid, gid;   /* as the sandbox sees them */
    uint32_t level;      /* in a list: 1 for the directory's own entries; else 0 */
    uint64_t size;
    int64_t mtime_ns;
    const char *target;   /* a symlink's destination (absolute), "" when it leads nowhere */
    uint32_t target_type; /* with a target: what is there */
    uint32_t target_mode;
    const char *metadata; /* "KEY=VALUE\n" lines, "" when none */
};
void proto_put_file(struct proto_writer *w, const struct proto_file_entry *e);
/* The nested fields of a FILE field. */
int proto_decode_file(const uint8_t *body, size_t len, struct proto_file_entry *out, err_t *err);
/* FILE_INFO {FILE} or FILE_OPENED {FILE, ACCESS}; *access (0 read, 1 write) for the latter. */
int proto_decode_file_reply(const struct proto_msg *m, struct proto_file_entry *file,
                            uint32_t *access, err_t *err);
/* FILE_LIST_REPLY: at most max entries (PROTO_MAX_FILES) into entries, *more from MORE. */
int proto_decode_file_list(const struct proto_msg *m, struct proto_file_entry *entries, size_t max,
                           size_t *n, bool *more, err_t *err);

/* One event of a watch (an EVENT field). */
struct proto_watch_event {
    uint32_t kind; /* PROTO_WATCH_* */
    const char *path;
    bool is_dir;
    bool has_file;                /* a watch's with WATCH_ENTRIES: the file, as a stat found it */
    struct proto_file_entry file; /* its path is the event's */
};
void proto_put_event(struct proto_writer *w, const struct proto_watch_event *e);
/* WATCH_EVENTS {WATCH_ID, EVENT...}: at most max (PROTO_MAX_EVENTS) events into events. */
int proto_decode_watch_events(const struct proto_msg *m, uint32_t *watch_id,
                              struct proto_watch_event *events, size_t max, size_t *n, err_t *err);
