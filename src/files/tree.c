/* Walks over directory trees: list and remove.
 *
 * A walk holds the directory it started from and opens each directory below it by its path
 * relative to that one, with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no symlink anywhere, no way
 * above the start, however the tree is changed meanwhile. A directory's names are read whole and
 * its fd closed before the walk goes down, so a walk holds two fds at any depth (no fd limit to
 * reach in a deep tree); depth is bounded by PATH_MAX instead. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/files_internal.h"
#include "util/cleanup.h"

/* At most this many directory visits in one files_remove: a tree that the sandbox refills as
 * fast as it is emptied ends with EAGAIN, not with init stuck in a loop. */
#define REMOVE_MAX_VISITS 4000000
/* Passes over one directory (each removes what it can and empties its subdirectories). */
#define REMOVE_PASSES 16
#define REMOVE_TRIES  8

void files_names_free(struct files_names *names)
{
    free(names->text);
    free(names->items);
    memset(names, 0, sizeof *names);
}

static int names_add(struct files_names *names, const char *name, unsigned char type)
{
    size_t n = strlen(name) + 1;
    if (names->text_len + n > names->text_cap) {
        size_t cap = names->text_cap ? names->text_cap * 2 : 4096;
        while (cap < names->text_len + n)
            cap *= 2;
        char *text = realloc(names->text, cap);
        if (!text)
            return -1;
        names->text = text;
        names->text_cap = cap;
    }
    if (names->count == names->slots) {
        size_t slots = names->slots ? names->slots * 2 : 64;
        struct files_name *items = realloc(names->items, slots * sizeof *items);
        if (!items)
            return -1;
        names->items = items;
        names->slots = slots;
    }
    memcpy(names->text + names->text_len, name, n);
    names->items[names->count++] = (struct files_name){names->text_len, type, false};
    names->text_len += n;
    return 0;
}

static int compare_names(const void *a, const void *b, void *text)
{
    const struct files_name *x = a, *y = b;
    return strcmp((const char *)text + x->offset, (const char *)text + y->offset);
}

int files_names_read(int fd, size_t max, struct files_names *names)
{
    memset(names, 0, sizeof *names);
    char buf[32768] __attribute__((aligned(__alignof__(struct dirent64))));
    for (;;) {
        ssize_t n = getdents64(fd, buf, sizeof buf);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        for (ssize_t at = 0; at < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(buf + at);
            at += d->d_reclen;
            const char *name = d->d_name;
            if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
                continue;
            if (names->count >= max) {
                errno = E2BIG;
                return -1;
            }
            if (names_add(names, name, d->d_type) < 0)
                return -1;
        }
    }
    if (names->count > 1)
        qsort_r(names->items, names->count, sizeof *names->items, compare_names, names->text);
    return 0;
}

static void names_cleanup(struct files_names *names)
{
    files_names_free(names);
}
#define cleanup_names __attribute__((cleanup(names_cleanup)))

struct list_walk {
    int root_fd;
    int start_fd;
    unsigned depth;
    files_list_fn fn;
    void *arg;
    size_t count;
    size_t base_len;
    const char *norm;
    char dir[PATH_MAX]; /* the directory being listed, absolute in the sandbox */
    struct files_entry entry;
};

static int list_dir(struct list_walk *w, size_t len, unsigned level, err_t *err)
{
    cleanup_fd int fd = files_openat2(w->start_fd, files_path_rel(w->dir, w->base_len, len),
                                      O_RDONLY | O_DIRECTORY, FILES_RESOLVE_TREE);
    if (fd < 0) {
        /* Gone, or swapped for a symlink or a file, since it was read: not listed. Nor is a
         * directory that even init may not read (/proc/1/map_files): the rest of the tree is
         * still worth having. */
        if (level > 1 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP ||
                          errno == EACCES || errno == EPERM))
            return 0;
        return err_set(err, errno, "list " FILES_SHOWN ": open " FILES_SHOWN, w->norm, w->dir);
    }
    cleanup_names struct files_names names = {0};
    if (files_names_read(fd, FILES_LIST_MAX_ENTRIES - w->count, &names) < 0) {
        if (errno == ENOENT && level > 1)
            return 0; /* removed while it was read */
        if (errno == E2BIG)
            return err_set(err, E2BIG, "list " FILES_SHOWN ": more than %d entries", w->norm,
                           FILES_LIST_MAX_ENTRIES);
        return err_set(err, errno, "list " FILES_SHOWN ": read " FILES_SHOWN, w->norm, w->dir);
    }
    w->count += names.count;
    struct files_entry *e = &w->entry;
    for (size_t i = 0; i < names.count; i++) {
        const char *name = files_names_at(&names, i);
        struct stat st;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            return err_set(err, errno, "list " FILES_SHOWN ": stat " FILES_SHOWN "/%s", w->norm,
                           w->dir, name);
        }
        size_t entry_len = len;
        memcpy(e->path, w->dir, len + 1);
        if (files_path_push(e->path, &entry_len, name) < 0)
            return err_set(err, ENAMETOOLONG, "list " FILES_SHOWN ": " FILES_SHOWN "/%s", w->norm,
                           w->dir, name);
        strcpy(e->name, name);
        files_entry_fill(e, &st);
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(fd, name, e->symlink_target, sizeof e->symlink_target);
            /* Changed since the stat, or longer than any link can be: no target to show. */
            if (n < 0 || (size_t)n >= sizeof e->symlink_target)
                n = 0;
            e->symlink_target[n] = '\0';
        }
        files_entry_extras(w->root_fd, fd, name, e);
        if (w->fn(e, level, w->arg, err) < 0)
            return -1;
        names.items[i].mark = S_ISDIR(st.st_mode) && level < w->depth;
    }
    close(steal_fd(&fd));
    for (size_t i = 0; i < names.count; i++) {
        if (!names.items[i].mark)
            continue;
        size_t sub_len = len;
        if (files_path_push(w->dir, &sub_len, files_names_at(&names, i)) < 0)
            return err_set(err, ENAMETOOLONG, "list " FILES_SHOWN ": " FILES_SHOWN "/%s", w->norm,
                           w->dir, files_names_at(&names, i));
        int rc = list_dir(w, sub_len, level + 1, err);
        w->dir[len] = '\0';
        if (rc < 0)
            return -1;
    }
    return 0;
}

int files_list(int root_fd, const char *path, unsigned depth, files_list_fn fn, void *arg,
               err_t *err)
{
    cleanup_free struct list_walk *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(err, ENOMEM, "list");
    if (files_path_take("list", path, w->dir, err) < 0)
        return -1;
    if (depth == 0)
        return err_set(err, EINVAL, "list " FILES_SHOWN ": depth 0", w->dir);
    w->base_len = strlen(w->dir);
    w->root_fd = root_fd;
    w->depth = depth;
    w->fn = fn;
    w->arg = arg;
    /* The listed directory itself may be reached through symlinks (inside the root); nothing
     * below it is. */
    cleanup_fd int start = files_openat2(root_fd, w->dir, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    if (start < 0)
        return err_set(err, errno, "list " FILES_SHOWN, w->dir);
    w->start_fd = start;
    char norm[PATH_MAX];
    memcpy(norm, w->dir, w->base_len + 1);
    w->norm = norm;
    return list_dir(w, w->base_len, 1, err);
}

struct remove_walk {
    int top_fd;
    size_t base_len;
    unsigned long visits;
    const char *norm;
    char path[PATH_MAX];
};

/* Empties the directory path[0..len) (below top_fd), without following any symlink or crossing
 * into another mount. 0 once a pass found nothing it could not remove. */
static int empty_dir(struct remove_walk *w, size_t len, err_t *err)
{
    for (int pass = 0; pass < REMOVE_PASSES; pass++) {
        if (++w->visits > REMOVE_MAX_VISITS)
            break;
        cleanup_fd int fd =
            files_openat2(w->top_fd, files_path_rel(w->path, w->base_len, len),
                          O_RDONLY | O_DIRECTORY, FILES_RESOLVE_TREE | RESOLVE_NO_XDEV);
        if (fd < 0) {
            /* Gone, or replaced by a symlink or a file: the caller's unlink takes the name. */
            if (len > w->base_len && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP))
                return 0;
            if (errno == EXDEV)
                return err_set(err, EXDEV,
                               "remove " FILES_SHOWN ": " FILES_SHOWN
                               " is a mount point; not descended into",
                               w->norm, w->path);
            return err_set(err, errno, "remove " FILES_SHOWN ": open " FILES_SHOWN, w->norm,
                           w->path);
        }
        cleanup_names struct files_names names = {0};
        if (files_names_read(fd, SIZE_MAX, &names) < 0) {
            if (errno == ENOENT)
                return 0; /* removed meanwhile: the caller's rmdir sees */
            return err_set(err, errno, "remove " FILES_SHOWN ": read " FILES_SHOWN, w->norm,
                           w->path);
        }
        bool descend = false;
        for (size_t i = 0; i < names.count; i++) {
            const char *name = files_names_at(&names, i);
            /* unlinkat never follows the name: a symlink goes, its target stays. */
            int r = unlinkat(fd, name, names.items[i].type == DT_DIR ? AT_REMOVEDIR : 0);
            if (r < 0 && (errno == EISDIR || errno == ENOTDIR))
                r = unlinkat(fd, name, errno == EISDIR ? AT_REMOVEDIR : 0);
            if (r == 0 || errno == ENOENT)
                continue;
            if (errno == ENOTEMPTY || errno == EEXIST) {
                names.items[i].mark = descend = true;
                continue;
            }
            return err_set(err, errno, "remove " FILES_SHOWN ": " FILES_SHOWN "/%s", w->norm,
                           w->path, name);
        }
        if (!descend)
            return 0;
        close(steal_fd(&fd));
        for (size_t i = 0; i < names.count; i++) {
            if (!names.items[i].mark)
                continue;
            size_t sub_len = len;
            if (files_path_push(w->path, &sub_len, files_names_at(&names, i)) < 0)
                return err_set(err, ENAMETOOLONG, "remove " FILES_SHOWN ": " FILES_SHOWN "/%s",
                               w->norm, w->path, files_names_at(&names, i));
            int rc = empty_dir(w, sub_len, err);
            w->path[len] = '\0';
            if (rc < 0)
                return -1;
        }
        /* The next pass removes the subdirectories just emptied. */
    }
    return err_set(err, EAGAIN, "remove " FILES_SHOWN ": " FILES_SHOWN " keeps changing", w->norm,
                   w->path);
}

int files_remove(int root_fd, const char *path, err_t *err)
{
    cleanup_free struct remove_walk *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(err, ENOMEM, "remove");
    char norm[PATH_MAX];
    if (files_path_take("remove", path, norm, err) < 0)
        return -1;
    if (strcmp(norm, "/") == 0)
        return err_set(err, EBUSY, "remove /: the root");
    w->norm = norm;
    const char *leaf;
    cleanup_fd int dir = files_open_parent("remove", root_fd, norm, NULL, &leaf, err);
    if (dir < 0)
        return -1;
    for (int i = 0; i < REMOVE_TRIES; i++) {
        if (unlinkat(dir, leaf, 0) == 0)
            return 0;
        if (errno != EISDIR)
            return err_set(err, errno, "remove " FILES_SHOWN, norm);
        /* A directory: held by an fd of its own (O_NOFOLLOW: a symlink swapped in is ELOOP, and
         * the next round unlinks the link), emptied beneath that fd, then removed by name. */
        cleanup_fd int top = openat(dir, leaf, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0) {
            if (errno == ELOOP || errno == ENOTDIR || errno == ENOENT)
                continue;
            return err_set(err, errno, "remove " FILES_SHOWN, norm);
        }
        w->top_fd = top;
        w->base_len = strlen(norm);
        memcpy(w->path, norm, w->base_len + 1);
        if (empty_dir(w, w->base_len, err) < 0)
            return -1;
        if (unlinkat(dir, leaf, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR)
            return err_set(err, errno, "remove " FILES_SHOWN, norm);
        /* Refilled or swapped meanwhile: again. */
    }
    return err_set(err, EAGAIN, "remove " FILES_SHOWN ": keeps changing", norm);
}
