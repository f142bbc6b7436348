/* stat, read, write, mkdir, move: each on a (directory fd, final name) pair or an fd, never on a
 * path string resolved again after it was checked. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "files/files_internal.h"
#include "util/cleanup.h"

/* How often an operation starts again when the sandbox swaps a name under it. */
#define RACE_TRIES 8

void files_entry_fill(struct files_entry *entry, const struct stat *st)
{
    switch (st->st_mode & S_IFMT) {
    case S_IFREG:
        entry->type = FILES_TYPE_FILE;
        break;
    case S_IFDIR:
        entry->type = FILES_TYPE_DIR;
        break;
    case S_IFLNK:
        entry->type = FILES_TYPE_SYMLINK;
        break;
    default:
        entry->type = FILES_TYPE_OTHER;
    }
    entry->mode = st->st_mode & 07777;
    entry->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
    entry->uid = st->st_uid;
    entry->gid = st->st_gid;
    entry->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    if (entry->type != FILES_TYPE_SYMLINK)
        entry->symlink_target[0] = '\0';
    entry->target[0] = '\0';
    entry->target_type = FILES_TYPE_OTHER;
    entry->target_mode = 0;
    entry->metadata[0] = '\0';
}

int files_stat(int root_fd, const char *path, bool follow_final_symlink, struct files_entry *out,
               err_t *err)
{
    if (files_path_take("stat", path, out->path, err) < 0)
        return -1;
    struct stat st;
    if (strcmp(out->path, "/") == 0) {
        if (fstat(root_fd, &st) < 0)
            return err_set(err, errno, "stat /");
        strcpy(out->name, "/");
        files_entry_fill(out, &st);
        files_entry_extras(root_fd, root_fd, NULL, out);
        return 0;
    }
    size_t parent_len;
    strcpy(out->name, files_path_leaf(out->path, &parent_len));
    cleanup_fd int fd = -1;
    if (follow_final_symlink) {
        fd = files_openat2(root_fd, out->path, O_PATH, FILES_RESOLVE_ROOT);
    } else {
        const char *leaf;
        cleanup_fd int dir = files_open_parent("stat", root_fd, out->path, NULL, &leaf, err);
        if (dir < 0)
            return -1;
        /* The link itself, as an fd: its stat and its text come from one inode, whatever
         * happens to the name in between. */
        fd = openat(dir, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0 || fstat(fd, &st) < 0)
        return err_set(err, errno, "stat " FILES_SHOWN, out->path);
    files_entry_fill(out, &st);
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlinkat(fd, "", out->symlink_target, sizeof out->symlink_target);
        if (n < 0)
            return err_set(err, errno, "stat " FILES_SHOWN ": readlink", out->path);
        if ((size_t)n >= sizeof out->symlink_target)
            return err_set(err, ENAMETOOLONG, "stat " FILES_SHOWN ": readlink", out->path);
        out->symlink_target[n] = '\0';
    }
    /* fd is the entry's own inode (the link, or what it led to when followed) */
    files_entry_extras(root_fd, fd, NULL, out);
    return 0;
}

int files_open_read(int root_fd, const char *path, err_t *err)
{
    char norm[PATH_MAX];
    if (files_path_take("read", path, norm, err) < 0)
        return -1;
    /* O_PATH first: it opens nothing (no FIFO wait, no driver's open, no lease break, no
     * inotify event), so what it finds can be refused without side effects. */
    cleanup_fd int fd = files_openat2(root_fd, norm, O_PATH, FILES_RESOLVE_ROOT);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return err_set(err, errno, "read " FILES_SHOWN, norm);
    if (files_check_regular("read", norm, fd, &st, err) < 0)
        return -1;
    return files_reopen("read", norm, fd, &st, O_RDONLY, err);
}

/* Creates leaf in dir: O_EXCL, so it never follows a symlink and never opens anything that
 * exists (a FIFO swapped in is EEXIST, not opened). 1 with *out set, 0 if the name exists. */
static int create_file(int dir, const char *leaf, const char *norm, mode_t mode, uid_t uid,
                       gid_t gid, unsigned flags, int *out, err_t *err)
{
    int oflags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
                 (flags & FILES_APPEND ? O_APPEND : 0);
    /* 0600 and root's until it is given away: never visible with the wrong owner's rights. */
    cleanup_fd int fd = openat(dir, leaf, oflags, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            return 0;
        return err_set(err, errno, "write " FILES_SHOWN ": create", norm);
    }
    int fl;
    if (((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0) ||
        fchmod(fd, mode) < 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int saved = errno;
        /* Take back what was made, if the name is still this file. */
        struct stat made, named;
        if (fstat(fd, &made) == 0 && fstatat(dir, leaf, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
            made.st_dev == named.st_dev && made.st_ino == named.st_ino)
            unlinkat(dir, leaf, 0);
        return err_set(err, saved, "write " FILES_SHOWN ": set owner and mode", norm);
    }
    *out = steal_fd(&fd);
    return 1;
}

int files_open_write(int root_fd, const char *path, mode_t mode, uid_t uid, gid_t gid,
                     unsigned flags, err_t *err)
{
    char norm[PATH_MAX];
    if (files_path_take("write", path, norm, err) < 0)
        return -1;
    if (flags & ~(unsigned)(FILES_TRUNCATE | FILES_APPEND | FILES_EXCLUSIVE | FILES_MAKE_PARENTS |
                            FILES_OWN))
        return err_set(err, EINVAL, "write " FILES_SHOWN ": unknown flags 0x%x", norm, flags);
    if (mode & ~(mode_t)07777)
        return err_set(err, EINVAL, "write " FILES_SHOWN ": mode 0%o", norm, (unsigned)mode);
    if (strcmp(norm, "/") == 0)
        return err_set(err, EISDIR, "write /");
    const struct files_make make = {FILES_PARENT_MODE, uid, gid};
    const char *leaf;
    cleanup_fd int dir = files_open_parent("write", root_fd, norm,
                                           flags & FILES_MAKE_PARENTS ? &make : NULL, &leaf, err);
    if (dir < 0)
        return -1;
    for (int i = 0; i < RACE_TRIES; i++) {
        cleanup_fd int fd = openat(dir, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
            return err_set(err, errno, "write " FILES_SHOWN, norm);
        if (fd < 0) {
            int out;
            int made = create_file(dir, leaf, norm, mode, uid, gid, flags, &out, err);
            if (made != 0)
                return made < 0 ? -1 : out;
            continue; /* it appeared meanwhile: look again */
        }
        if (flags & FILES_EXCLUSIVE)
            return err_set(err, EEXIST, "write " FILES_SHOWN, norm);
        struct stat st;
        if (fstat(fd, &st) < 0)
            return err_set(err, errno, "write " FILES_SHOWN ": fstat", norm);
        if (files_check_regular("write", norm, fd, &st, err) < 0)
            return -1;
        int oflags = O_WRONLY | (flags & FILES_TRUNCATE ? O_TRUNC : 0) |
                     (flags & FILES_APPEND ? O_APPEND : 0);
        cleanup_fd int file = files_reopen("write", norm, fd, &st, oflags, err);
        if (file < 0)
            return -1;
        /* on the opened file: the inode that was checked, whatever its name is now */
        if ((flags & FILES_OWN) && (uid != (uid_t)-1 || gid != (gid_t)-1) &&
            (st.st_uid != uid || st.st_gid != gid) && fchown(file, uid, gid) < 0 && errno != EPERM)
            return err_set(err, errno, "write " FILES_SHOWN ": give it to %d:%d", norm, (int)uid,
                           (int)gid);
        return steal_fd(&file);
    }
    return err_set(err, EAGAIN, "write " FILES_SHOWN ": the name keeps changing", norm);
}

int files_mkdir(int root_fd, const char *path, mode_t mode, uid_t uid, gid_t gid, bool *created,
                err_t *err)
{
    char norm[PATH_MAX];
    *created = false;
    if (files_path_take("mkdir", path, norm, err) < 0)
        return -1;
    if (mode & ~(mode_t)07777)
        return err_set(err, EINVAL, "mkdir " FILES_SHOWN ": mode 0%o", norm, (unsigned)mode);
    if (strcmp(norm, "/") == 0)
        return 0;
    const struct files_make make = {mode, uid, gid};
    const char *leaf;
    cleanup_fd int dir = files_open_parent("mkdir", root_fd, norm, &make, &leaf, err);
    if (dir < 0)
        return -1;
    int made = files_make_dir_at(dir, leaf, &make);
    if (made < 0)
        return err_set(err, errno, "mkdir " FILES_SHOWN, norm);
    if (made == 1) {
        *created = true;
        return 0;
    }
    /* Something has the name: a directory (through symlinks, inside the root) is success. */
    int found = files_openat2(root_fd, norm, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    if (found < 0)
        return err_set(err, EEXIST, "mkdir " FILES_SHOWN ": exists, and is not a directory", norm);
    close(found);
    return 0;
}

int files_move(int root_fd, const char *from, const char *to, unsigned flags, uid_t uid, gid_t gid,
               err_t *err)
{
    char from_norm[PATH_MAX], to_norm[PATH_MAX];
    if (files_path_take("move", from, from_norm, err) < 0 ||
        files_path_take("move", to, to_norm, err) < 0)
        return -1;
    if (flags & ~(unsigned)(FILES_MAKE_PARENTS | FILES_NO_REPLACE))
        return err_set(err, EINVAL, "move " FILES_SHOWN ": unknown flags 0x%x", from_norm, flags);
    if (strcmp(from_norm, "/") == 0 || strcmp(to_norm, "/") == 0)
        return err_set(err, EBUSY, "move " FILES_SHOWN " to " FILES_SHOWN ": the root", from_norm,
                       to_norm);
    const struct files_make make = {FILES_PARENT_MODE, uid, gid};
    const char *from_leaf, *to_leaf;
    cleanup_fd int from_dir = files_open_parent("move", root_fd, from_norm, NULL, &from_leaf, err);
    if (from_dir < 0)
        return -1;
    cleanup_fd int to_dir = files_open_parent(
        "move", root_fd, to_norm, flags & FILES_MAKE_PARENTS ? &make : NULL, &to_leaf, err);
    if (to_dir < 0)
        return -1;
    /* Both sides are (directory fd, one name): rename never follows either name. */
    unsigned rflags = flags & FILES_NO_REPLACE ? RENAME_NOREPLACE : 0;
    if (renameat2(from_dir, from_leaf, to_dir, to_leaf, rflags) < 0)
        return err_set(err, errno, "move " FILES_SHOWN " to " FILES_SHOWN, from_norm, to_norm);
    return 0;
}
