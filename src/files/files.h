/* File operations beneath a sandbox's root, for hutch init to perform on the daemon's behalf (they
 * are served as E2B's filesystem API: stat, list, read, write, mkdir, move, remove, watch).
 *
 * Every function takes root_fd, a directory fd that is the sandbox's "/", and paths that come
 * from outside (HTTP): hostile. Every path resolves beneath root_fd: absolute and relative
 * symlinks, "..", magic links (/proc/self/fd/N, /proc/PID/root) and a component swapped for a
 * symlink during the call never lead outside it. Paths are absolute in the sandbox
 * ("/home/user/x"); relative paths are refused (EINVAL: the daemon knows the user's home and joins
 * them first). ".." is resolved lexically, as E2B does, and "/.." is "/". See README.md.
 *
 * Each call returns 0 (or an fd, or a pointer) on success and -1 (NULL) with err filled on
 * failure: err->errnum is the errno, err->msg names the operation and the path. Nothing prints or
 * exits; no global state; every fd is O_CLOEXEC; nothing stays allocated or open on an error path.
 * Ownership: uid or gid (uid_t)-1 / (gid_t)-1 leave the creator's own. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/err.h"

/* files_list fails (E2BIG) rather than return more entries than this. */
#define FILES_LIST_MAX_ENTRIES 100000
/* A recursive watch fails (ENOSPC) rather than watch more directories than this: inotify's
 * per-user limit in a sandbox's user namespace is 8192 (fs.inotify.max_user_watches). */
#define FILES_WATCH_MAX_DIRS 8192
/* The mode of parent directories made by FILES_MAKE_PARENTS (E2B's, before the umask). */
#define FILES_PARENT_MODE 0755

/* Checks a path from outside and normalizes it into out: absolute, len < PATH_MAX, each
 * component at most NAME_MAX bytes, no NUL in path[0..len); "//" and "/./" collapse, ".." removes
 * the component before it (never past "/"), no trailing slash. out holds at most len + 1 bytes
 * (never more than PATH_MAX). Every operation below calls it on its own paths. */
int files_path_normalize(const char *path, size_t len, char out[PATH_MAX], err_t *err);

enum files_type {
    FILES_TYPE_FILE,
    FILES_TYPE_DIR,
    FILES_TYPE_SYMLINK,
    FILES_TYPE_OTHER, /* FIFO, socket, device */
};

/* User metadata (E2B's X-Metadata-*): the file's user.e2b.KEY extended attributes as
 * "KEY=VALUE\n" lines, KEY of HTTP token characters, VALUE printable ASCII, at most this many
 * bytes in all (envd's bound: the sum of the attributes' full names and values, 4096). */
#define FILES_METADATA_MAX    4096
#define FILES_METADATA_PREFIX "user.e2b."

/* One file's metadata. The caller provides the storage (about 17 KiB): nothing to free. */
struct files_entry {
    char path[PATH_MAX];           /* absolute in the sandbox, normalized */
    char name[NAME_MAX + 1];       /* its last component; "/" for the root */
    char symlink_target[PATH_MAX]; /* the link's own text when type is SYMLINK, else "" */
    /* A symlink's destination as E2B's envd reports it (filepath.EvalSymlinks): the absolute
     * path in the sandbox after every link on the way (inside the root), and the type and mode
     * found there; "" when it leads nowhere (dangling, a loop, a magic link). */
    char target[PATH_MAX];
    enum files_type target_type;
    mode_t target_mode;
    char metadata[FILES_METADATA_MAX + 1]; /* files and directories: "KEY=VALUE\n" lines */
    enum files_type type;
    mode_t mode; /* permission bits, 07777 */
    uint64_t size;
    uid_t uid;
    gid_t gid;
    int64_t mtime_ns; /* modification time, ns since the epoch */
};

/* Fills the metadata part of entry (all but path and name) from st, e.g. an opened file's fstat;
 * target and metadata "". */
void files_entry_fill(struct files_entry *entry, const struct stat *st);

/* Whether text is metadata as above: lines "KEY=VALUE\n", keys unique. 0, or -1 with err
 * (EINVAL) naming what is wrong. */
int files_metadata_check(const char *text, err_t *err);
/* Replaces the user.e2b.* attributes of the open file fd with text's (checked first): the ones
 * absent from it are removed, so an overwrite without metadata clears it, as envd does.
 * EOPNOTSUPP from a filesystem without user attributes is not an error: nothing is kept. */
int files_metadata_write(int fd, const char *text, err_t *err);
/* Reads the metadata of the open file fd into entry->metadata ("" when none). */
void files_entry_metadata(int fd, struct files_entry *entry);

/* Metadata of path. With follow_final_symlink, a final symlink is followed (inside the root) and
 * the target's metadata is returned under the link's name; without it, the link itself is. */
int files_stat(int root_fd, const char *path, bool follow_final_symlink, struct files_entry *out,
               err_t *err);

/* Called by files_list for each entry; level is 1 for the directory's own entries. Returns 0 to
 * go on, or -1 (with err filled) to stop the listing, which then returns -1. */
typedef int (*files_list_fn)(const struct files_entry *entry, unsigned level, void *arg,
                             err_t *err);
/* Lists the directory at path (symlinks on the way followed inside the root) down to depth
 * levels (1 = its own entries; 0 is EINVAL). Each directory's entries come in byte order of their
 * names, then the contents of its subdirectories in the same order. Symlinks are listed as
 * symlinks and never followed; entries that vanish while listing, and subdirectories that even
 * init may not read (EACCES, EPERM: /proc/1/map_files), are skipped. More than
 * FILES_LIST_MAX_ENTRIES entries, or an entry whose path would reach PATH_MAX, fail the call
 * (E2BIG, ENAMETOOLONG) after fn has seen the earlier ones: the caller discards what it has. */
int files_list(int root_fd, const char *path, unsigned depth, files_list_fn fn, void *arg,
               err_t *err);

/* Opens a regular file for reading (O_RDONLY | O_CLOEXEC; symlinks followed inside the root).
 * Directories (EISDIR), FIFOs, sockets and devices (EINVAL) are refused without being opened,
 * files of kernel pseudo-filesystems (/proc, /sys, cgroupfs, ...) with EPERM, and a file under a
 * lease that an open would have to break with EWOULDBLOCK, never by blocking. */
int files_open_read(int root_fd, const char *path, err_t *err);

/* Flags of files_open_write and files_move. */
enum {
    FILES_TRUNCATE = 1 << 0,     /* an existing file is truncated */
    FILES_APPEND = 1 << 1,       /* O_APPEND */
    FILES_EXCLUSIVE = 1 << 2,    /* an existing file is EEXIST */
    FILES_MAKE_PARENTS = 1 << 3, /* missing parents made (mkdir -p), FILES_PARENT_MODE, uid:gid */
    FILES_NO_REPLACE = 1 << 4,   /* files_move only: an existing destination is EEXIST */
    FILES_OWN = 1 << 5, /* files_open_write: an existing file is given to uid:gid too, as E2B's
                           upload does; where the caller may not chown (EPERM), it keeps its own */
};

/* Opens path for writing (O_WRONLY | O_CLOEXEC). A new file gets mode (07777; the umask does not
 * apply) and uid:gid; an existing one keeps its mode, and its owner unless FILES_OWN. Refused: a
 * final symlink (ELOOP; never written through), a directory (EISDIR), anything else that is not a
 * regular file (EINVAL), pseudo-filesystems (EPERM), a lease (EWOULDBLOCK). */
int files_open_write(int root_fd, const char *path, mode_t mode, uid_t uid, gid_t gid,
                     unsigned flags, err_t *err);

/* mkdir -p: makes path and its missing parents, each with mode (07777) and uid:gid. *created is
 * true if path itself was made, false if it was already a directory (symlinks followed inside
 * the root); an existing non-directory is EEXIST. */
int files_mkdir(int root_fd, const char *path, mode_t mode, uid_t uid, gid_t gid, bool *created,
                err_t *err);

/* rename(2) from -> to: a symlink is moved itself, never its target; an existing `to` is
 * replaced as rename(2) would (unless FILES_NO_REPLACE). With FILES_MAKE_PARENTS, the missing
 * parents of `to` are made, FILES_PARENT_MODE and uid:gid, as E2B's Move does (EnsureDirs). */
int files_move(int root_fd, const char *from, const char *to, unsigned flags, uid_t uid, gid_t gid,
               err_t *err);

/* Removes a file, a symlink (not its target), or a directory tree, following no symlink and never
 * descending into another mount (a mount point in the tree is EBUSY, as rmdir says, and nothing
 * below it is touched). A tree that keeps changing while it is removed fails
 * with EAGAIN rather than loop; paths in it that reach PATH_MAX fail with ENAMETOOLONG. "/" is
 * refused (EBUSY). A missing path is ENOENT. */
int files_remove(int root_fd, const char *path, err_t *err);

/* Watches (watch.c). */

enum files_watch_kind {
    FILES_WATCH_CREATE, /* created, or moved in (as fsnotify, which E2B uses, reports it) */
    FILES_WATCH_WRITE,
    FILES_WATCH_REMOVE,
    FILES_WATCH_RENAME,   /* moved away: path is the old name */
    FILES_WATCH_CHMOD,    /* attributes changed (mode, owner, times) */
    FILES_WATCH_OVERFLOW, /* the kernel's queue overflowed: events were lost (path is the base) */
};

struct files_watch_event {
    enum files_watch_kind kind;
    const char *path; /* absolute in the sandbox */
    const char *name; /* relative to the watched directory, "" for the directory itself */
    bool is_dir;
};

/* Called for each event; returns 0 to go on, or -1 (err filled) to stop files_watch_read. */
typedef int (*files_watch_fn)(const struct files_watch_event *event, void *arg, err_t *err);

struct files_watch;

/* Watches the directory at path (symlinks on the way followed inside the root). Recursive:
 * every directory beneath it, including ones made or moved in later, whose existing contents are
 * then reported as CREATE; at most FILES_WATCH_MAX_DIRS directories. Between calls the watch
 * holds two fds: inotify's and its own dup of root_fd (each batch opens the watched directory
 * again from the root, and only if it is still the same inode). */
struct files_watch *files_watch_open(int root_fd, const char *path, bool recursive, err_t *err);
/* Readable (poll) when events are waiting. */
int files_watch_fd(const struct files_watch *w);
/* Delivers the events that are waiting (a bounded batch; the fd stays readable if more remain).
 * Returns how many, or -1 on an error (a callback's, the directory limit, a path that reaches
 * PATH_MAX), after which the watch is broken: every later call fails the same way. A CREATE may
 * come twice for an entry made while its new directory was being scanned. */
int files_watch_read(struct files_watch *w, files_watch_fn fn, void *arg, err_t *err);
void files_watch_close(struct files_watch *w);
