/* Shared by the files/ sources; not part of the interface. */
#pragma once
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "files/files.h"

/* A path as it appears in a message: at most this many bytes of it, so that the strerror text
 * still fits in err_t's 1024. */
#define FILES_SHOWN "%.400s"

/* Whole paths from the caller: inside the root, symlinks followed there, never a magic link. */
#define FILES_RESOLVE_ROOT (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
/* Paths that the library builds from names it read itself (a walk beneath a directory it holds):
 * no symlink at all, no way out of that directory. */
#define FILES_RESOLVE_TREE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* openat2(2) with O_CLOEXEC added; retries the EAGAIN that RESOLVE_IN_ROOT and RESOLVE_BENEATH
 * return when a rename or mount raced the lookup. -1 with errno. */
int files_openat2(int dir_fd, const char *path, int flags, uint64_t resolve);

/* Normalizes path (NUL-terminated, from the caller) into out; "op" names the operation in the
 * message. */
int files_path_take(const char *op, const char *path, char out[PATH_MAX], err_t *err);
/* The last component of a normalized path other than "/", and the length of its parent's path
 * (at least 1: "/"). */
const char *files_path_leaf(const char *norm, size_t *parent_len);
/* Appends "/" name to the path of length *len in buf (PATH_MAX); -1 (ENAMETOOLONG) if it does
 * not fit. "/" + name gives "/name". */
int files_path_push(char *buf, size_t *len, const char *name);

/* How to make missing directories. */
struct files_make {
    mode_t mode;
    uid_t uid;
    gid_t gid;
};

/* Opens (O_PATH | O_DIRECTORY) the directory that holds the last component of norm, a normalized
 * path other than "/", and sets *leaf to that component. With make, missing directories on the
 * way are made as `mkdir -p` would (through existing symlinks, inside the root). */
int files_open_parent(const char *op, int root_fd, const char *norm, const struct files_make *make,
                      const char **leaf, err_t *err);
/* mkdirat(dir_fd, name) with make's mode and owner. 1 if made, 0 if something already has the
 * name, -1 with errno. */
int files_make_dir_at(int dir_fd, const char *name, const struct files_make *make);

/* Refuses, without opening it, what must not be opened as a file: returns 0 if st (of fd, an
 * O_PATH fd) is a regular file outside a kernel pseudo-filesystem, else -1 with err. */
int files_check_regular(const char *op, const char *norm, int fd, const struct stat *st,
                        err_t *err);
/* Opens again, with flags (O_RDONLY or O_WRONLY, O_TRUNC, O_APPEND), the regular file that the
 * O_PATH fd refers to (st its fstat), through /proc/self/fd of a verified procfs: the very inode,
 * whatever has happened to its name since. O_NONBLOCK during the open (cleared after) turns a
 * lease that would block it into EWOULDBLOCK. Returns the new fd. */
int files_reopen(const char *op, const char *norm, int fd, const struct stat *st, int flags,
                 err_t *err);
/* The O_PATH fd of /proc/self/fd, after checking that /proc is the root of a procfs mount and
 * that no other mount sits on the way. */
int files_proc_fd_dir(const char *op, err_t *err);

/* Fills e's target (a symlink's: resolved from root_fd, inside it) and metadata (a file's or a
 * directory's user.e2b.* attributes), each "" when there is none or it cannot be read. The entry
 * is (fd, leaf): a directory fd and one name in it; or fd alone (leaf NULL), an fd of the entry
 * itself. e's path and type are set. */
void files_entry_extras(int root_fd, int fd, const char *leaf, struct files_entry *e);

/* The names in a directory (without "." and ".."), sorted bytewise, with their d_type. */
struct files_name {
    size_t offset;      /* into files_names.text */
    unsigned char type; /* d_type (DT_UNKNOWN on some filesystems) */
    bool mark;          /* free for the caller's use */
};
struct files_names {
    char *text; /* the names, each NUL-terminated */
    struct files_name *items;
    size_t count;
    size_t text_len, text_cap, slots;
};
/* Reads every name of the directory fd (O_RDONLY) into names, failing with E2BIG once more than
 * max are seen. -1 with errno. The caller frees names with files_names_free, also after a
 * failure. */
int files_names_read(int fd, size_t max, struct files_names *names);
void files_names_free(struct files_names *names);
static inline const char *files_names_at(const struct files_names *names, size_t i)
{
    return names->text + names->items[i].offset;
}
/* The path of a walk's current directory relative to the directory it started from, whose path
 * is path[0..base_len): "." for that directory itself. */
static inline const char *files_path_rel(const char *path, size_t base_len, size_t len)
{
    if (len == base_len)
        return ".";
    return path + base_len + (base_len == 1 ? 0 : 1);
}
