/* The control protocol between the host (the daemon, `hutch run`, the CLI) and hutch init, the
 * agent inside every sandbox. Versioned, one message per SOCK_SEQPACKET datagram, fds passed with
 * SCM_RIGHTS. The wire format is specified in README.md; this is its codec.
 *
 * Everything received is hostile input: the host parses what init says (init shares its sandbox
 * with the program), and init parses what arrives on its socket. Decoding allocates only the
 * pointer arrays of argv and env; strings point into the received buffer (they are sent with
 * their NUL). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define PROTO_MAGIC       0x31545548u /* "HUT1" on the wire (little-endian) */
#define PROTO_VERSION     3 /* 1: commands; 2: files and watches; 3: sudo (README.md, "Versions") */
#define PROTO_HEADER_SIZE 16
#define PROTO_MAX_TO_INIT (1u << 20)  /* host -> init: a spawn carries argv and env */
#define PROTO_MAX_TO_HOST (64u << 10) /* init -> host: long answers come in chunks */
#define PROTO_MAX_FDS     8
#define PROTO_MAX_V1_FDS  5    /* a SPAWN's v1 tasks files: one per v1 hierarchy (cgroup.h) */
#define PROTO_MAX_STRING  4096 /* tags, paths, messages */
#define PROTO_MAX_ARG     (128u << 10) /* one argv or env entry, as the kernel's MAX_ARG_STRLEN */
#define PROTO_MAX_ARGS    4096         /* entries of argv, and of env */
#define PROTO_MAX_ENTRIES 256          /* entries per LIST_REPLY chunk */
#define PROTO_MAX_NAME    255          /* a file's NAME: one path component */
#define PROTO_MAX_FILES   512          /* FILE entries per FILE_LIST_REPLY chunk */
#define PROTO_MAX_EVENTS  512          /* EVENTs per WATCH_EVENTS */
#define PROTO_MAX_DEPTH   4096         /* a FILE_LIST's DEPTH */

enum proto_type {
    PROTO_HELLO = 1, /* host -> init: {VERSION} -> HELLO_REPLY {VERSION, PID} */
    PROTO_HELLO_REPLY,
    PROTO_OK,          /* a reply with nothing to say (fds may come with it) */
    PROTO_ERROR,       /* a reply: {ERRNO, MESSAGE} */
    PROTO_SPAWN,       /* host -> init: a command; fds: its cgroup (see README) */
    PROTO_SPAWN_REPLY, /* {CMD_ID, PID, FDS}; fds: the host's ends */
    PROTO_ATTACH,      /* {CMD_ID} -> SPAWN_REPLY with the same ends again */
    PROTO_SIGNAL,      /* {CMD_ID, SIGNAL, GROUP} -> OK */
    PROTO_STDIN_WRITE, /* {CMD_ID, DATA} -> OK {WRITTEN} */
    PROTO_STDIN_CLOSE, /* {CMD_ID} -> OK */
    PROTO_RESIZE,      /* {CMD_ID, ROWS, COLS} -> OK */
    PROTO_LIST,        /* {} -> LIST_REPLY chunks, the last without MORE */
    PROTO_LIST_REPLY,  /* {ENTRY...; MORE} */
    PROTO_FORGET,      /* {CMD_ID} -> OK: an ended command's record and fds go */
    PROTO_EXITED, /* init -> host, unsolicited (request id 0): {CMD_ID, PID, EXIT_CODE, SIGNAL} */
    /* Version 2: files, served by init's files workers (src/init/README.md). */
    PROTO_FILE_STAT,       /* {PATH, USER, FOLLOW} -> FILE_INFO */
    PROTO_FILE_INFO,       /* {FILE} */
    PROTO_FILE_LIST,       /* {PATH, USER, DEPTH} -> FILE_LIST_REPLY chunks, the last MORE 0 */
    PROTO_FILE_LIST_REPLY, /* {FILE...; MORE} */
    PROTO_FILE_READ,       /* {PATH, USER} -> FILE_OPENED */
    PROTO_FILE_WRITE,      /* {PATH, USER, MODE, UID+GID, FLAGS} -> FILE_OPENED */
    PROTO_FILE_OPENED,     /* {FILE, ACCESS}; one fd: the file, opened for ACCESS */
    PROTO_FILE_MKDIR,      /* {PATH, USER, MODE, UID+GID} -> OK {CREATED} */
    PROTO_FILE_MOVE,       /* {PATH, TO, USER, UID+GID, FLAGS} -> OK */
    PROTO_FILE_REMOVE,     /* {PATH, USER} -> OK */
    PROTO_WATCH_START,     /* {PATH, USER, RECURSIVE, FLAGS} -> OK {WATCH_ID} */
    PROTO_WATCH_STOP,      /* {WATCH_ID} -> OK */
    PROTO_WATCH_EVENTS,    /* init -> host, request id 0: {WATCH_ID, EVENT...} */
    PROTO_WATCH_ENDED,     /* init -> host, request id 0: {WATCH_ID, ERRNO, MESSAGE}: it broke */
    /* Version 3: sudo, on init's sudo socket inside the sandbox, and from init to its spawner
     * (proto_sudo.h; README.md, "The sudo socket"). Never between the host and init. */
    PROTO_SUDO,         /* a sandbox process -> init: {ARG+, ENV*, CWD?, USER}; fds: its stdin,
                           stdout, stderr -> SUDO_STARTED, then SUDO_EXITED; or ERROR */
    PROTO_SUDO_STARTED, /* init -> the client: {PID} */
    PROTO_SUDO_SIGNAL,  /* the client -> init: {SIGNAL}, to the command's process group */
    PROTO_SUDO_EXITED,  /* init -> the client: {EXIT_CODE, SIGNAL} */
    PROTO_SUDO_SPAWN,   /* init -> its spawner: {ARG+, ENV*, CWD?, USER, PID (the caller's)};
                           fds: the stdio -> SPAWN_REPLY {FDS 0} or ERROR */
    PROTO_FILES_START,  /* init -> its spawner: {USER}; one fd: the worker's end of its socket.
                           No answer: the worker is there when it serves that socket */
    PROTO_TYPE_END,
};
/* The first type of version 2: a message's header carries the version that defined its type. */
#define PROTO_FIRST_V2 PROTO_FILE_STAT
#define PROTO_FIRST_V3 PROTO_SUDO

enum proto_tag {
    PROTO_T_VERSION = 1, /* u32 */
    PROTO_T_PID,         /* u32 */
    PROTO_T_CMD_ID,      /* u32 */
    PROTO_T_TAG,         /* string */
    PROTO_T_ARG,         /* string, repeated: argv in order */
    PROTO_T_ENV,         /* string, repeated: NAME=VALUE */
    PROTO_T_CWD,         /* string, absolute */
    PROTO_T_USER,        /* u32: 0 user, 1 root */
    PROTO_T_STDIN,       /* u32: 0 none, 1 pipe */
    PROTO_T_ROWS,        /* u32 (1..65535): with COLS, the command gets a pty */
    PROTO_T_COLS,        /* u32 */
    PROTO_T_CGROUP_FDS,  /* u32: fds that came with a SPAWN: bit 0 = the first is a cgroup2
                            directory, bits 8..15 = how many v1 `tasks` files follow */
    PROTO_T_SIGNAL,      /* u32 */
    PROTO_T_GROUP,       /* u32 0/1: to the command's process group */
    PROTO_T_DATA,        /* bytes (at most 64 KiB) */
    PROTO_T_WRITTEN,     /* u32 */
    PROTO_T_EXIT_CODE,   /* i32, -1 if killed by a signal */
    PROTO_T_RUNNING,     /* u32 0/1 */
    PROTO_T_ERRNO,       /* u32 */
    PROTO_T_MESSAGE,     /* string */
    PROTO_T_FDS,         /* u32: which ends came with a SPAWN_REPLY: PROTO_FD_* bits, in order */
    PROTO_T_ENTRY,       /* nested fields: one command of a LIST_REPLY */
    PROTO_T_MORE,        /* u32 0/1 */
    PROTO_T_CGROUP,      /* string [A-Za-z0-9._-]{1,32}: the command's cgroup, as the host named
                            it below the sandbox's; init keeps it and tells it back in lists */
    /* Version 2 */
    PROTO_T_PATH,        /* string, absolute in the sandbox */
    PROTO_T_TO,          /* string: FILE_MOVE's destination */
    PROTO_T_MODE,        /* u32, 07777 at most */
    PROTO_T_UID,         /* u32: with GID, the owner of what a request makes */
    PROTO_T_GID,         /* u32 */
    PROTO_T_FLAGS,       /* u32: PROTO_FILE_* */
    PROTO_T_DEPTH,       /* u32, 1..PROTO_MAX_DEPTH */
    PROTO_T_FOLLOW,      /* u32 0/1: FILE_STAT follows a final symlink */
    PROTO_T_FILE,        /* nested fields: one file (struct proto_file_entry) */
    PROTO_T_NAME,        /* string, at most PROTO_MAX_NAME */
    PROTO_T_FILE_TYPE,   /* u32: PROTO_FILE_TYPE_* */
    PROTO_T_SIZE,        /* u64 */
    PROTO_T_MTIME,       /* i64: ns since the epoch */
    PROTO_T_SYMLINK,     /* string: a symlink's own text */
    PROTO_T_LEVEL,       /* u32: 1 for a listed directory's own entries */
    PROTO_T_CREATED,     /* u32 0/1 */
    PROTO_T_WATCH_ID,    /* u32, not 0 */
    PROTO_T_RECURSIVE,   /* u32 0/1 */
    PROTO_T_EVENT,       /* nested fields: KIND, PATH, IS_DIR, and FILE (WATCH_ENTRIES) */
    PROTO_T_KIND,        /* u32: PROTO_WATCH_* */
    PROTO_T_IS_DIR,      /* u32 0/1 */
    PROTO_T_ACCESS,      /* u32: 0 read, 1 write */
    PROTO_T_TARGET,      /* string, absolute: where a symlink leads, every link on the way */
    PROTO_T_TARGET_TYPE, /* u32: PROTO_FILE_TYPE_* found there */
    PROTO_T_TARGET_MODE, /* u32, 07777 at most */
    PROTO_T_METADATA,    /* string: "KEY=VALUE\n" lines (src/files/files.h), at most 4096 bytes */
    PROTO_T_END,
};
_Static_assert(PROTO_T_END <= 64, "field sets are 64-bit masks");

/* FLAGS: FILE_WRITE takes the first four and OWN, FILE_MOVE MAKE_PARENTS and NO_REPLACE,
 * WATCH_START WATCH_ENTRIES. */
enum {
    PROTO_FILE_TRUNCATE = 1u << 0,
    PROTO_FILE_APPEND = 1u << 1,
    PROTO_FILE_EXCLUSIVE = 1u << 2,
    PROTO_FILE_MAKE_PARENTS = 1u << 3,
    PROTO_FILE_NO_REPLACE = 1u << 4,
    PROTO_FILE_OWN = 1u << 5,      /* an existing file is given to UID:GID too (envd's upload) */
    PROTO_WATCH_ENTRIES = 1u << 6, /* its CREATE, WRITE and CHMOD events carry the file (FILE) */
};
enum {
    PROTO_FILE_TYPE_FILE,
    PROTO_FILE_TYPE_DIR,
    PROTO_FILE_TYPE_SYMLINK,
    PROTO_FILE_TYPE_OTHER,
    PROTO_FILE_TYPE_END
};
/* KIND of an EVENT, as fsnotify (E2B's) names them; OVERFLOW: events were lost. */
enum {
    PROTO_WATCH_CREATE,
    PROTO_WATCH_WRITE,
    PROTO_WATCH_REMOVE,
    PROTO_WATCH_RENAME,
    PROTO_WATCH_CHMOD,
    PROTO_WATCH_OVERFLOW,
    PROTO_WATCH_KIND_END
};

enum {
    PROTO_FD_STDOUT = 1u << 0,
    PROTO_FD_STDERR = 1u << 1,
    PROTO_FD_STDIN = 1u << 2,
    PROTO_FD_PTY = 1u << 3
};

/* ---- building a message ---- */

struct proto_writer {
    uint8_t *buf;
    size_t cap, len;
    bool overflow; /* a field did not fit: proto_finish returns 0 */
};

void proto_begin(struct proto_writer *w, void *buf, size_t cap, enum proto_type type,
                 uint32_t request_id, size_t n_fds);
void proto_put_u32(struct proto_writer *w, enum proto_tag tag, uint32_t value);
void proto_put_i32(struct proto_writer *w, enum proto_tag tag, int32_t value);
void proto_put_u64(struct proto_writer *w, enum proto_tag tag, uint64_t value);
void proto_put_bytes(struct proto_writer *w, enum proto_tag tag, const void *data, size_t len);
/* With its NUL, so that the receiver can point into its buffer. */
void proto_put_str(struct proto_writer *w, enum proto_tag tag, const char *s);
/* A nested group (LIST_REPLY's ENTRY): begin returns where it starts, end closes it. */
size_t proto_begin_nested(struct proto_writer *w, enum proto_tag tag);
void proto_end_nested(struct proto_writer *w, size_t start);
/* The message's length, or 0 if it did not fit. */
size_t proto_finish(struct proto_writer *w);
/* The version that defined a message type: what its header says. */
unsigned proto_type_version(enum proto_type type);

/* ---- reading a message ---- */

struct proto_msg {
    enum proto_type type;
    uint32_t request_id;
    size_t n_fds; /* as the header says; proto_recv checked it against what came */
    const uint8_t *body;
    size_t body_len;
};

/* Checks the header of a received datagram of n bytes (magic, version, type, length). */
int proto_parse(const void *buf, size_t n, struct proto_msg *out, err_t *err);

struct proto_field {
    enum proto_tag tag;
    const uint8_t *data;
    uint32_t len;
};
struct proto_iter {
    const uint8_t *p, *end;
};
void proto_iter_init(struct proto_iter *it, const uint8_t *body, size_t len);
/* 1 with the next field, 0 at the end, -1 (err) when the rest is malformed. */
int proto_next(struct proto_iter *it, struct proto_field *f, err_t *err);
int proto_field_u32(const struct proto_field *f, uint32_t *out, err_t *err);
int proto_field_i32(const struct proto_field *f, int32_t *out, err_t *err);
int proto_field_u64(const struct proto_field *f, uint64_t *out, err_t *err);
/* A u32 field no greater than max (EINVAL beyond). */
int proto_field_u32_max(const struct proto_field *f, uint32_t max, uint32_t *out, err_t *err);
/* A NUL-terminated string of at most max bytes (without the NUL), no NUL inside. */
int proto_field_str(const struct proto_field *f, size_t max, const char **out, err_t *err);

/* ---- typed messages ---- */

struct proto_spawn {
    const char *tag; /* "" if none */
    char **argv;     /* malloc'd array of pointers into the buffer, NULL-terminated */
    char **envp;     /* likewise */
    const char *cwd; /* NULL = the user's home */
    bool as_root;
    bool stdin_pipe;
    bool pty;
    unsigned short rows, cols;
    bool has_cgroup_fd;
    unsigned n_v1_fds;
    const char *cgroup; /* "" if none */
};
/* The message's length, or 0 if it does not fit in cap. */
size_t proto_encode_spawn(void *buf, size_t cap, uint32_t request_id, const struct proto_spawn *s);
/* Validates every field (env entries NAME=VALUE, cwd absolute, bounds); on success the caller
 * frees argv and envp (proto_spawn_free). */
int proto_decode_spawn(const struct proto_msg *m, struct proto_spawn *out, err_t *err);
void proto_spawn_free(struct proto_spawn *s);

/* SPAWN_REPLY {CMD_ID, PID, FDS}: ends are stdout, stderr, stdin and the pty's master, -1 where
 * none; pass gets the ones to send with it, in that order, *n_pass how many. The length, or 0. */
size_t proto_encode_spawn_reply(void *buf, size_t cap, uint32_t request_id, uint32_t cmd_id,
                                uint32_t pid, const int ends[4], int pass[4], size_t *n_pass);
/* ERROR {ERRNO, MESSAGE}; errnum <= 0 is sent as EIO. The length, or 0. */
size_t proto_encode_error(void *buf, size_t cap, uint32_t request_id, int errnum,
                          const char *message);

/* A command as LIST_REPLY and EXITED carry it. */
struct proto_command {
    uint32_t cmd_id;
    uint32_t pid;
    const char *tag;
    const char *cgroup;
    bool running;
    int32_t exit_code;
    uint32_t signal;
};
int proto_decode_command(const uint8_t *body, size_t len, struct proto_command *out, err_t *err);

/* The u32 or i32 field tag of a message; 0 when present, -1 (err) when absent or malformed. */
int proto_get_u32(const struct proto_msg *m, enum proto_tag tag, uint32_t *out, err_t *err);
int proto_get_i32(const struct proto_msg *m, enum proto_tag tag, int32_t *out, err_t *err);
/* The string field tag; *out NULL when absent. -1 (err) when malformed. */
int proto_get_str(const struct proto_msg *m, enum proto_tag tag, size_t max, const char **out,
                  err_t *err);

/* ---- the socket ---- */

/* The file messages (version 2) are in proto_files.h, sudo's (version 3) in proto_sudo.h. */

/* Sends one message with fds; never blocks (EAGAIN to the caller), never raises SIGPIPE. */
int proto_send(int sock, const void *buf, size_t len, const int *fds, size_t n_fds);
/* Receives one message: its length (0 once the peer has hung up), or -1 with errno (EAGAIN;
 * EMSGSIZE for a datagram or control data that did not fit, EBADMSG for fds that do not match
 * the header's count or an empty datagram from a peer still there). Received fds are close-on-exec
 * and, on any failure, closed. */
ssize_t proto_recv(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds);
/* Raises a socket's buffers so that a PROTO_MAX_TO_INIT message fits (with the FORCE variants
 * where permitted). */
void proto_socket_tune(int sock);
