/* Watches: inotify on a directory, or on every directory of a tree.
 *
 * inotify_add_watch takes a path, not an fd, so each directory is first opened (O_PATH, beneath
 * the watched directory, no symlinks) and then watched through /proc/self/fd/N of a verified
 * procfs: the watch lands on the inode that was opened, never on a name resolved again.
 * Each watched directory is known by its path relative to the watched one; renames inside the
 * tree rewrite those paths, a directory moved out loses its watches, one made or moved in gets
 * them (and its contents, made before its watch, are scanned and reported as CREATE). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "files/files_internal.h"
#include "util/cleanup.h"

#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO |                 \
     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
/* Reads of the inotify fd per files_watch_read: a tree that changes without pause still lets
 * the caller's loop run; the fd stays readable. */
#define READ_BUDGET 16
/* Directories moved away whose MOVED_TO has not been seen yet. */
#define MOVE_SLOTS 32

struct watched {
    int wd;
    char *rel; /* relative to the watched directory, "" for it */
};

struct pending_move {
    uint32_t cookie;
    char *rel;
};

struct files_watch {
    int inotify_fd;
    int root_fd; /* a dup of the caller's root */
    /* O_PATH of the watched directory, during a batch only: an fd held between batches would
     * hold its dentry, and the kernel reports IN_DELETE_SELF only once the last one goes. */
    int base_fd;
    dev_t base_dev;
    ino_t base_ino;
    bool recursive;
    bool broken;
    err_t broken_err;
    size_t base_len;
    char base[PATH_MAX];
    struct watched *dirs; /* sorted by wd */
    size_t n_dirs, cap_dirs;
    struct pending_move moves[MOVE_SLOTS];
    size_t n_moves;
    char path[PATH_MAX]; /* an event's path */
    char scan[PATH_MAX]; /* the directory being scanned */
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
};

/* The events handed to the callback in one files_watch_read. */
struct delivery {
    files_watch_fn fn;
    void *arg;
    int count;
};

static size_t find_wd(const struct files_watch *w, int wd, bool *found)
{
    size_t lo = 0, hi = w->n_dirs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->dirs[mid].wd < wd)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < w->n_dirs && w->dirs[lo].wd == wd;
    return lo;
}

static void drop_at(struct files_watch *w, size_t i)
{
    free(w->dirs[i].rel);
    memmove(&w->dirs[i], &w->dirs[i + 1], (w->n_dirs - i - 1) * sizeof *w->dirs);
    w->n_dirs--;
}

/* rel, a path relative to the base ("" for the base itself), into out; "." when it is "". */
static const char *rel_or_dot(const char *rel)
{
    return rel[0] ? rel : ".";
}

/* The watched directory, opened again from the root for this batch; ENOENT if its path now
 * leads elsewhere (it was removed or replaced: the inode watched is no longer there). */
static int base_fd(struct files_watch *w)
{
    if (w->base_fd >= 0)
        return w->base_fd;
    int fd = files_openat2(w->root_fd, w->base, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_dev != w->base_dev || st.st_ino != w->base_ino) {
        close(fd);
        errno = ENOENT;
        return -1;
    }
    return w->base_fd = fd;
}

static void base_done(struct files_watch *w)
{
    if (w->base_fd >= 0)
        close(w->base_fd);
    w->base_fd = -1;
}

/* Watches the directory rel. 1 if watched, 0 if it is gone (or no longer a directory). */
static int watch_add(struct files_watch *w, const char *rel, err_t *err)
{
    int base = base_fd(w);
    cleanup_fd int fd =
        base < 0 ? -1
                 : files_openat2(base, rel_or_dot(rel), O_PATH | O_DIRECTORY, FILES_RESOLVE_TREE);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
            return 0;
        return err_set(err, errno, "watch " FILES_SHOWN ": open %s", w->base, rel_or_dot(rel));
    }
    char proc_path[40];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->inotify_fd, proc_path, WATCH_MASK);
    if (wd < 0) {
        if (errno == ENOSPC)
            return err_set(err, ENOSPC,
                           "watch " FILES_SHOWN ": inotify's watch limit for this user is reached "
                           "(fs.inotify.max_user_watches) at %s",
                           w->base, rel_or_dot(rel));
        return err_set(err, errno, "watch " FILES_SHOWN ": inotify_add_watch %s", w->base,
                       rel_or_dot(rel));
    }
    char *copy = strdup(rel);
    if (!copy)
        return err_set(err, ENOMEM, "watch " FILES_SHOWN, w->base);
    bool found;
    size_t at = find_wd(w, wd, &found);
    if (found) {
        /* The same directory again (met twice in a scan, or moved): its newest path holds. */
        free(w->dirs[at].rel);
        w->dirs[at].rel = copy;
        return 1;
    }
    if (w->n_dirs >= FILES_WATCH_MAX_DIRS) {
        free(copy);
        inotify_rm_watch(w->inotify_fd, wd);
        return err_set(err, ENOSPC, "watch " FILES_SHOWN ": more than %d directories to watch",
                       w->base, FILES_WATCH_MAX_DIRS);
    }
    if (w->n_dirs == w->cap_dirs) {
        size_t cap = w->cap_dirs ? w->cap_dirs * 2 : 16;
        struct watched *dirs = realloc(w->dirs, cap * sizeof *dirs);
        if (!dirs) {
            free(copy);
            inotify_rm_watch(w->inotify_fd, wd);
            return err_set(err, ENOMEM, "watch " FILES_SHOWN, w->base);
        }
        w->dirs = dirs;
        w->cap_dirs = cap;
    }
    memmove(&w->dirs[at + 1], &w->dirs[at], (w->n_dirs - at) * sizeof *w->dirs);
    w->dirs[at] = (struct watched){wd, copy};
    w->n_dirs++;
    return 1;
}

/* Whether rel is prefix or below it. */
static bool under(const char *rel, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(rel, prefix, n) == 0 && (rel[n] == '\0' || rel[n] == '/');
}

/* A directory moved inside the tree: the paths of its watches follow. */
static int rename_prefix(struct files_watch *w, const char *from, const char *to, err_t *err)
{
    size_t from_len = strlen(from), to_len = strlen(to);
    for (size_t i = 0; i < w->n_dirs; i++) {
        if (!under(w->dirs[i].rel, from))
            continue;
        const char *rest = w->dirs[i].rel + from_len;
        size_t rest_len = strlen(rest);
        char *rel = malloc(to_len + rest_len + 1);
        if (!rel)
            return err_set(err, ENOMEM, "watch " FILES_SHOWN, w->base);
        memcpy(rel, to, to_len);
        memcpy(rel + to_len, rest, rest_len + 1);
        free(w->dirs[i].rel);
        w->dirs[i].rel = rel;
    }
    return 0;
}

/* A directory moved out of the tree (or somewhere unknown): its watches go. */
static void drop_prefix(struct files_watch *w, const char *rel)
{
    for (size_t i = 0; i < w->n_dirs;) {
        if (rel[0] && under(w->dirs[i].rel, rel)) {
            inotify_rm_watch(w->inotify_fd, w->dirs[i].wd);
            drop_at(w, i);
        } else {
            i++;
        }
    }
}

static void flush_moves(struct files_watch *w, size_t keep)
{
    while (w->n_moves > keep) {
        drop_prefix(w, w->moves[0].rel);
        free(w->moves[0].rel);
        memmove(&w->moves[0], &w->moves[1], (w->n_moves - 1) * sizeof *w->moves);
        w->n_moves--;
    }
}

static int deliver(struct files_watch *w, struct delivery *d, enum files_watch_kind kind,
                   const char *path, size_t len, bool is_dir, err_t *err)
{
    const char *name = len == w->base_len ? "" : path + w->base_len + (w->base_len == 1 ? 0 : 1);
    struct files_watch_event event = {kind, path, name, is_dir};
    if (d->fn(&event, d->arg, err) < 0)
        return -1;
    d->count++;
    return 0;
}

/* Watches the directory w->scan[0..len) and, below it, every directory it holds; with d, every
 * entry found is reported as CREATE (it was made before its directory was watched). The watch
 * comes before the read, so nothing made in between is missed (it may be reported twice).
 * 1 if it is watched, 0 if it was gone, -1 on an error. */
static int scan(struct files_watch *w, size_t len, struct delivery *d, err_t *err)
{
    const char *rel = len == w->base_len ? "" : files_path_rel(w->scan, w->base_len, len);
    int added = watch_add(w, rel, err);
    if (added <= 0)
        return added;
    int base = base_fd(w);
    cleanup_fd int fd =
        base < 0 ? -1
                 : files_openat2(base, rel_or_dot(rel), O_RDONLY | O_DIRECTORY, FILES_RESOLVE_TREE);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
            return 0;
        return err_set(err, errno, "watch " FILES_SHOWN ": open " FILES_SHOWN, w->base, w->scan);
    }
    struct files_names names = {0};
    int rc = -1;
    if (files_names_read(fd, SIZE_MAX, &names) < 0) {
        if (errno == ENOENT) {
            rc = 0; /* removed while it was read */
            goto out;
        }
        err_set(err, errno, "watch " FILES_SHOWN ": read " FILES_SHOWN, w->base, w->scan);
        goto out;
    }
    for (size_t i = 0; i < names.count; i++) {
        const char *name = files_names_at(&names, i);
        bool is_dir = names.items[i].type == DT_DIR;
        if (names.items[i].type == DT_UNKNOWN) {
            struct stat st;
            if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            is_dir = S_ISDIR(st.st_mode);
        }
        names.items[i].mark = is_dir;
        if (!d)
            continue;
        size_t entry_len = len;
        memcpy(w->path, w->scan, len + 1);
        if (files_path_push(w->path, &entry_len, name) < 0) {
            err_set(err, ENAMETOOLONG, "watch " FILES_SHOWN ": " FILES_SHOWN "/%s", w->base,
                    w->scan, name);
            goto out;
        }
        if (deliver(w, d, FILES_WATCH_CREATE, w->path, entry_len, is_dir, err) < 0)
            goto out;
    }
    close(steal_fd(&fd));
    for (size_t i = 0; i < names.count; i++) {
        if (!names.items[i].mark)
            continue;
        size_t sub_len = len;
        if (files_path_push(w->scan, &sub_len, files_names_at(&names, i)) < 0) {
            err_set(err, ENAMETOOLONG, "watch " FILES_SHOWN ": " FILES_SHOWN "/%s", w->base,
                    w->scan, files_names_at(&names, i));
            goto out;
        }
        int sub = scan(w, sub_len, d, err);
        w->scan[len] = '\0';
        if (sub < 0)
            goto out;
    }
    rc = 1;
out:
    files_names_free(&names);
    return rc;
}

/* Scans the directory base/rel (rel "" for the base). */
static int scan_rel(struct files_watch *w, const char *rel, struct delivery *d, err_t *err)
{
    size_t len = w->base_len;
    memcpy(w->scan, w->base, len + 1);
    if (rel[0] && files_path_push(w->scan, &len, rel) < 0)
        return err_set(err, ENAMETOOLONG, "watch " FILES_SHOWN ": " FILES_SHOWN "/%s", w->base,
                       w->base, rel);
    return scan(w, len, d, err);
}

static int handle(struct files_watch *w, const struct inotify_event *e, struct delivery *d,
                  err_t *err)
{
    if (e->mask & IN_Q_OVERFLOW) {
        if (deliver(w, d, FILES_WATCH_OVERFLOW, w->base, w->base_len, true, err) < 0)
            return -1;
        /* Directories made while events were lost have no watch yet: add them (their contents
         * are not reported; OVERFLOW told the caller to look again). */
        return w->recursive && scan_rel(w, "", NULL, err) < 0 ? -1 : 0;
    }
    bool found;
    size_t at = find_wd(w, e->wd, &found);
    if (!found)
        return 0; /* a watch already dropped */
    if (e->mask & IN_IGNORED) {
        drop_at(w, at);
        return 0;
    }
    bool is_base = w->dirs[at].rel[0] == '\0';
    if (e->len == 0 || e->name[0] == '\0') {
        /* The directory itself. Below the base, its parent's watch reports it. */
        if (!is_base)
            return 0;
        if (e->mask & IN_DELETE_SELF)
            return deliver(w, d, FILES_WATCH_REMOVE, w->base, w->base_len, true, err);
        if (e->mask & IN_MOVE_SELF)
            return deliver(w, d, FILES_WATCH_RENAME, w->base, w->base_len, true, err);
        if (e->mask & IN_ATTRIB)
            return deliver(w, d, FILES_WATCH_CHMOD, w->base, w->base_len, true, err);
        return 0;
    }
    /* Copied out before the table changes (a scan may grow it). */
    char rel[PATH_MAX];
    size_t len = w->base_len;
    memcpy(w->path, w->base, len + 1);
    if ((w->dirs[at].rel[0] && files_path_push(w->path, &len, w->dirs[at].rel) < 0) ||
        files_path_push(w->path, &len, e->name) < 0)
        return err_set(err, ENAMETOOLONG, "watch " FILES_SHOWN ": a path below %s reaches %d bytes",
                       w->base, w->dirs[at].rel, PATH_MAX);
    snprintf(rel, sizeof rel, "%s", files_path_rel(w->path, w->base_len, len));
    bool is_dir = e->mask & IN_ISDIR;

    if (e->mask & IN_CREATE) {
        if (deliver(w, d, FILES_WATCH_CREATE, w->path, len, is_dir, err) < 0)
            return -1;
        if (is_dir && w->recursive)
            return scan_rel(w, rel, d, err) < 0 ? -1 : 0;
    }
    if (e->mask & IN_MOVED_TO) {
        if (deliver(w, d, FILES_WATCH_CREATE, w->path, len, is_dir, err) < 0)
            return -1;
        if (is_dir && w->recursive) {
            for (size_t i = 0; i < w->n_moves; i++) {
                if (w->moves[i].cookie != e->cookie)
                    continue;
                /* Moved inside the tree: its watches stay, under the new name. */
                int rc = rename_prefix(w, w->moves[i].rel, rel, err);
                free(w->moves[i].rel);
                memmove(&w->moves[i], &w->moves[i + 1], (w->n_moves - i - 1) * sizeof *w->moves);
                w->n_moves--;
                return rc;
            }
            /* Moved in from outside: new to us, contents and all. */
            return scan_rel(w, rel, d, err) < 0 ? -1 : 0;
        }
    }
    if (e->mask & IN_MOVED_FROM) {
        if (deliver(w, d, FILES_WATCH_RENAME, w->path, len, is_dir, err) < 0)
            return -1;
        if (is_dir && w->recursive) {
            flush_moves(w, MOVE_SLOTS - 1);
            char *copy = strdup(rel);
            if (!copy)
                return err_set(err, ENOMEM, "watch " FILES_SHOWN, w->base);
            w->moves[w->n_moves++] = (struct pending_move){e->cookie, copy};
        }
    }
    if ((e->mask & IN_MODIFY) && deliver(w, d, FILES_WATCH_WRITE, w->path, len, is_dir, err) < 0)
        return -1;
    if ((e->mask & IN_ATTRIB) && deliver(w, d, FILES_WATCH_CHMOD, w->path, len, is_dir, err) < 0)
        return -1;
    if ((e->mask & IN_DELETE) && deliver(w, d, FILES_WATCH_REMOVE, w->path, len, is_dir, err) < 0)
        return -1;
    return 0;
}

static int broken(struct files_watch *w, err_t *err)
{
    base_done(w);
    w->broken = true;
    w->broken_err = *err;
    return -1;
}

int files_watch_read(struct files_watch *w, files_watch_fn fn, void *arg, err_t *err)
{
    if (w->broken) {
        *err = w->broken_err;
        return -1;
    }
    struct delivery d = {fn, arg, 0};
    bool drained = false;
    for (int r = 0; r < READ_BUDGET && !drained; r++) {
        ssize_t n = read(w->inotify_fd, w->buf, sizeof w->buf);
        if (n < 0) {
            if (errno == EAGAIN) {
                drained = true;
                break;
            }
            if (errno == EINTR)
                continue;
            err_set(err, errno, "watch " FILES_SHOWN ": read events", w->base);
            return broken(w, err);
        }
        for (ssize_t at = 0; at < n;) {
            const struct inotify_event *e = (const struct inotify_event *)(w->buf + at);
            at += (ssize_t)(sizeof *e + e->len);
            if (handle(w, e, &d, err) < 0)
                return broken(w, err);
        }
    }
    /* Moved away, and no MOVED_TO came with them: out of the tree. (When the budget ends the
     * batch, a MOVED_TO may still be queued; the next call pairs it.) */
    if (drained)
        flush_moves(w, 0);
    base_done(w);
    return d.count;
}

struct files_watch *files_watch_open(int root_fd, const char *path, bool recursive, err_t *err)
{
    struct files_watch *w = calloc(1, sizeof *w);
    if (!w) {
        err_set(err, ENOMEM, "watch");
        return NULL;
    }
    w->inotify_fd = -1;
    w->base_fd = -1;
    w->root_fd = -1;
    w->recursive = recursive;
    if (files_path_take("watch", path, w->base, err) < 0)
        goto fail;
    w->base_len = strlen(w->base);
    w->base_fd = files_openat2(root_fd, w->base, O_PATH | O_DIRECTORY, FILES_RESOLVE_ROOT);
    struct stat st;
    if (w->base_fd < 0 || fstat(w->base_fd, &st) < 0) {
        err_set(err, errno, "watch " FILES_SHOWN, w->base);
        goto fail;
    }
    w->base_dev = st.st_dev;
    w->base_ino = st.st_ino;
    w->root_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
    if (w->root_fd < 0) {
        err_set(err, errno, "watch " FILES_SHOWN ": dup the root fd", w->base);
        goto fail;
    }
    /* The watches are added through /proc/self/fd: check once that it is what it says. */
    int proc = files_proc_fd_dir("watch", err);
    if (proc < 0)
        goto fail;
    close(proc);
    w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->inotify_fd < 0) {
        err_set(err, errno, "watch " FILES_SHOWN ": inotify_init1%s", w->base,
                errno == EMFILE ? " (fs.inotify.max_user_instances reached)" : "");
        goto fail;
    }
    int rc = recursive ? scan_rel(w, "", NULL, err) : watch_add(w, "", err);
    if (rc < 0)
        goto fail;
    if (rc == 0) {
        err_set(err, ENOENT, "watch " FILES_SHOWN ": gone", w->base);
        goto fail;
    }
    base_done(w);
    return w;
fail:
    files_watch_close(w);
    return NULL;
}

int files_watch_fd(const struct files_watch *w)
{
    return w->inotify_fd;
}

void files_watch_close(struct files_watch *w)
{
    if (!w)
        return;
    if (w->inotify_fd >= 0)
        close(w->inotify_fd);
    if (w->root_fd >= 0)
        close(w->root_fd);
    base_done(w);
    for (size_t i = 0; i < w->n_dirs; i++)
        free(w->dirs[i].rel);
    free(w->dirs);
    for (size_t i = 0; i < w->n_moves; i++)
        free(w->moves[i].rel);
    free(w);
}
