/* One file request in a files worker: checked again (init checked it, but the worker trusts no
 * one), performed by src/files beneath the sandbox's root with the worker's own rights, and
 * answered to init: files as FILE fields, a list in chunks, an opened file as its fd, a watch's
 * events in batches. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files/files.h"
#include "init/files_worker.h"
#include "proto/proto_files.h"
#include "util/cleanup.h"

/* The largest FILE field: a path, a symlink's text and its target of PATH_MAX each, a name,
 * metadata, the numbers. */
#define FILE_FIELD_MAX (3 * (PATH_MAX + 8) + NAME_MAX + 9 + FILES_METADATA_MAX + 9 + 11 * 16 + 8)
/* The largest EVENT field. */
#define EVENT_FIELD_MAX (PATH_MAX + 8 + 2 * 12 + 8)
/* E2B's modes for what it makes: files 0666 and directories 0777, less its umask 022. */
#define DEFAULT_FILE_MODE 0644
#define DEFAULT_DIR_MODE  0755

/* src/files and the protocol number file types and event kinds alike: passed as they are. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(FILES_TYPE_FILE, PROTO_FILE_TYPE_FILE) &&
                   SAME(FILES_TYPE_DIR, PROTO_FILE_TYPE_DIR) &&
                   SAME(FILES_TYPE_SYMLINK, PROTO_FILE_TYPE_SYMLINK) &&
                   SAME(FILES_TYPE_OTHER, PROTO_FILE_TYPE_OTHER),
               "file types");
_Static_assert(SAME(FILES_WATCH_CREATE, PROTO_WATCH_CREATE) &&
                   SAME(FILES_WATCH_WRITE, PROTO_WATCH_WRITE) &&
                   SAME(FILES_WATCH_REMOVE, PROTO_WATCH_REMOVE) &&
                   SAME(FILES_WATCH_RENAME, PROTO_WATCH_RENAME) &&
                   SAME(FILES_WATCH_CHMOD, PROTO_WATCH_CHMOD) &&
                   SAME(FILES_WATCH_OVERFLOW, PROTO_WATCH_OVERFLOW),
               "watch event kinds");

static void reply_error(struct files_worker *w, uint32_t id, const err_t *err)
{
    files_worker_send(
        w, w->out, proto_encode_error(w->out, sizeof w->out, id, err->errnum, err->msg), NULL, 0);
}

static void reply_ok(struct files_worker *w, uint32_t id, enum proto_tag tag, uint32_t value)
{
    struct proto_writer wr;
    proto_begin(&wr, w->out, sizeof w->out, PROTO_OK, id, 0);
    if (tag)
        proto_put_u32(&wr, tag, value);
    files_worker_send(w, w->out, proto_finish(&wr), NULL, 0);
}

static void entry_to_proto(const struct files_entry *e, unsigned level, struct proto_file_entry *p)
{
    *p = (struct proto_file_entry){.path = e->path,
                                   .name = e->name,
                                   .symlink = e->symlink_target,
                                   .type = (uint32_t)e->type,
                                   .mode = (uint32_t)e->mode,
                                   .uid = (uint32_t)e->uid,
                                   .gid = (uint32_t)e->gid,
                                   .level = level,
                                   .size = e->size,
                                   .mtime_ns = e->mtime_ns,
                                   .target = e->target,
                                   .target_type = (uint32_t)e->target_type,
                                   .target_mode = (uint32_t)e->target_mode,
                                   .metadata = e->metadata};
}

static void do_stat(struct files_worker *w, uint32_t id, const struct proto_file_request *r,
                    err_t *err)
{
    cleanup_free struct files_entry *e = malloc(sizeof *e);
    if (!e) {
        err_set(err, ENOMEM, "stat");
        reply_error(w, id, err);
        return;
    }
    if (files_stat(w->root_fd, r->path, r->follow, e, err) < 0) {
        reply_error(w, id, err);
        return;
    }
    struct proto_file_entry p;
    entry_to_proto(e, 0, &p);
    struct proto_writer wr;
    proto_begin(&wr, w->out, sizeof w->out, PROTO_FILE_INFO, id, 0);
    proto_put_file(&wr, &p);
    files_worker_send(w, w->out, proto_finish(&wr), NULL, 0);
}

/* A list goes out in chunks of whole entries, each chunk full (or PROTO_MAX_FILES) before the
 * next begins; the last one says MORE 0. An error after some chunks is an ERROR: the host drops
 * what it got. */
struct list_out {
    struct files_worker *w;
    uint32_t id;
    struct proto_writer wr;
    size_t n;
};

static void list_begin(struct list_out *o)
{
    proto_begin(&o->wr, o->w->out, sizeof o->w->out, PROTO_FILE_LIST_REPLY, o->id, 0);
    o->n = 0;
}

static void list_flush(struct list_out *o, bool more)
{
    proto_put_u32(&o->wr, PROTO_T_MORE, more ? 1 : 0);
    files_worker_send(o->w, o->w->out, proto_finish(&o->wr), NULL, 0);
    list_begin(o);
}

static int list_entry(const struct files_entry *e, unsigned level, void *arg, err_t *err)
{
    struct list_out *o = arg;
    if (o->n == PROTO_MAX_FILES || o->wr.cap - o->wr.len < FILE_FIELD_MAX + 16)
        list_flush(o, true);
    struct proto_file_entry p;
    entry_to_proto(e, level, &p);
    proto_put_file(&o->wr, &p);
    o->n++;
    return 0;
}

static void do_list(struct files_worker *w, uint32_t id, const struct proto_file_request *r,
                    err_t *err)
{
    struct list_out o = {.w = w, .id = id};
    list_begin(&o);
    if (files_list(w->root_fd, r->path, r->depth, list_entry, &o, err) < 0)
        reply_error(w, id, err);
    else
        list_flush(&o, false);
}

/* FILE_OPENED with the fd: the file as it is now (its fstat), under the path asked for. */
static void reply_opened(struct files_worker *w, uint32_t id, const char *path, int fd, bool write,
                         err_t *err)
{
    cleanup_free struct files_entry *e = malloc(sizeof *e);
    struct stat st;
    if (!e || fstat(fd, &st) < 0) {
        err_set(err, e ? errno : ENOMEM, "%s: fstat", write ? "write" : "read");
        reply_error(w, id, err);
        return;
    }
    if (files_path_normalize(path, strlen(path), e->path, err) < 0) {
        reply_error(w, id, err);
        return;
    }
    size_t at = strlen(e->path);
    while (at > 0 && e->path[at - 1] != '/')
        at--;
    snprintf(e->name, sizeof e->name, "%s", e->path[at] ? e->path + at : "/");
    files_entry_fill(e, &st);
    if (write) /* what the upload kept, read back from the file as envd answers it */
        files_entry_metadata(fd, e);
    struct proto_file_entry p;
    entry_to_proto(e, 0, &p);
    struct proto_writer wr;
    proto_begin(&wr, w->out, sizeof w->out, PROTO_FILE_OPENED, id, 1);
    proto_put_file(&wr, &p);
    proto_put_u32(&wr, PROTO_T_ACCESS, write ? 1 : 0);
    files_worker_send(w, w->out, proto_finish(&wr), &fd, 1);
}

static unsigned files_flags(uint32_t proto_flags)
{
    unsigned f = 0;
    if (proto_flags & PROTO_FILE_TRUNCATE)
        f |= FILES_TRUNCATE;
    if (proto_flags & PROTO_FILE_APPEND)
        f |= FILES_APPEND;
    if (proto_flags & PROTO_FILE_EXCLUSIVE)
        f |= FILES_EXCLUSIVE;
    if (proto_flags & PROTO_FILE_MAKE_PARENTS)
        f |= FILES_MAKE_PARENTS;
    if (proto_flags & PROTO_FILE_NO_REPLACE)
        f |= FILES_NO_REPLACE;
    if (proto_flags & PROTO_FILE_OWN)
        f |= FILES_OWN;
    return f;
}

/* ---------- watches ---------- */

static ssize_t watch_find(const struct files_worker *w, uint32_t id)
{
    for (size_t i = 0; i < w->n_watches; i++)
        if (w->watches[i].id == id)
            return (ssize_t)i;
    return -1;
}

static void watch_drop(struct files_worker *w, size_t i)
{
    files_watch_close(w->watches[i].watch);
    w->watches[i] = w->watches[--w->n_watches];
}

static void do_watch_start(struct files_worker *w, uint32_t id, const struct proto_file_request *r,
                           err_t *err)
{
    if (w->n_watches == FILES_WORKER_MAX_WATCHES) {
        err_set(err, ENOSPC, "watch: at most %d watches at once for one user",
                FILES_WORKER_MAX_WATCHES);
        reply_error(w, id, err);
        return;
    }
    /* init numbers requests uniquely: the request's id is the watch's. */
    if (id == 0 || watch_find(w, id) >= 0) {
        err_set(err, EEXIST, "watch: id %u is taken", id);
        reply_error(w, id, err);
        return;
    }
    struct files_watch *watch = files_watch_open(w->root_fd, r->path, r->recursive, err);
    if (!watch) {
        reply_error(w, id, err);
        return;
    }
    w->watches[w->n_watches].id = id;
    w->watches[w->n_watches].entries = r->flags & PROTO_WATCH_ENTRIES;
    w->watches[w->n_watches++].watch = watch;
    reply_ok(w, id, PROTO_T_WATCH_ID, id);
}

/* A watch's events go out in batches: one WATCH_EVENTS as full as it gets. */
struct events_out {
    struct files_worker *w;
    uint32_t watch_id;
    struct files_entry *entry; /* WATCH_ENTRIES: room for a stat, else NULL */
    struct proto_writer wr;
    size_t n;
};

static void events_begin(struct events_out *o)
{
    proto_begin(&o->wr, o->w->out, sizeof o->w->out, PROTO_WATCH_EVENTS, 0, 0);
    proto_put_u32(&o->wr, PROTO_T_WATCH_ID, o->watch_id);
    o->n = 0;
}

static void events_flush(struct events_out *o)
{
    if (o->n)
        files_worker_send(o->w, o->w->out, proto_finish(&o->wr), NULL, 0);
    events_begin(o);
}

static int watch_event(const struct files_watch_event *e, void *arg, err_t *err)
{
    struct events_out *o = arg;
    if (o->n == PROTO_MAX_EVENTS ||
        o->wr.cap - o->wr.len < EVENT_FIELD_MAX + (o->entry ? FILE_FIELD_MAX + 16 : 0))
        events_flush(o);
    struct proto_watch_event p = {.kind = (uint32_t)e->kind, .path = e->path, .is_dir = e->is_dir};
    /* As envd: the file as it is now, for the kinds that leave one (none when it is gone
     * already: a stat that fails leaves the event without). */
    err_t stat_err;
    if (o->entry &&
        (e->kind == FILES_WATCH_CREATE || e->kind == FILES_WATCH_WRITE ||
         e->kind == FILES_WATCH_CHMOD) &&
        files_stat(o->w->root_fd, e->path, false, o->entry, &stat_err) == 0) {
        entry_to_proto(o->entry, 0, &p.file);
        p.has_file = true;
    }
    proto_put_event(&o->wr, &p);
    o->n++;
    return 0;
}

void files_ops_watch_read(struct files_worker *w, size_t i)
{
    cleanup_free struct files_entry *entry =
        w->watches[i].entries ? malloc(sizeof *entry) : NULL; /* none: events without files */
    struct events_out o = {.w = w, .watch_id = w->watches[i].id, .entry = entry};
    err_t err;
    events_begin(&o);
    int rc = files_watch_read(w->watches[i].watch, watch_event, &o, &err);
    events_flush(&o);
    if (rc >= 0)
        return;
    /* Broken (the directory limit, a path at PATH_MAX): say so, and let it go. */
    struct proto_writer wr;
    proto_begin(&wr, w->out, sizeof w->out, PROTO_WATCH_ENDED, 0, 0);
    proto_put_u32(&wr, PROTO_T_WATCH_ID, o.watch_id);
    proto_put_u32(&wr, PROTO_T_ERRNO, (uint32_t)(err.errnum > 0 ? err.errnum : EIO));
    proto_put_str(&wr, PROTO_T_MESSAGE, err.msg);
    files_worker_send(w, w->out, proto_finish(&wr), NULL, 0);
    watch_drop(w, i);
}

/* ---------- one request ---------- */

static void perform(struct files_worker *w, uint32_t id, const struct proto_file_request *r,
                    err_t *err)
{
    /* Owner of what is made: the one asked for, else the worker's own (-1: the creator's). */
    uid_t uid = r->has_owner ? (uid_t)r->uid : (uid_t)-1;
    gid_t gid = r->has_owner ? (gid_t)r->gid : (gid_t)-1;
    int rc = 0;
    switch (r->type) {
    case PROTO_FILE_STAT:
        do_stat(w, id, r, err);
        return;
    case PROTO_FILE_LIST:
        do_list(w, id, r, err);
        return;
    case PROTO_FILE_READ:
    case PROTO_FILE_WRITE: {
        bool write = r->type == PROTO_FILE_WRITE;
        mode_t mode = r->has_mode ? (mode_t)r->mode : DEFAULT_FILE_MODE;
        cleanup_fd int fd = write ? files_open_write(w->root_fd, r->path, mode, uid, gid,
                                                     files_flags(r->flags), err)
                                  : files_open_read(w->root_fd, r->path, err);
        if (fd < 0 || (write && r->metadata && files_metadata_write(fd, r->metadata, err) < 0)) {
            rc = -1;
            break;
        }
        reply_opened(w, id, r->path, fd, write, err);
        return; /* the fd is init's now (and the host's): ours closes */
    }
    case PROTO_FILE_MKDIR: {
        bool created;
        mode_t mode = r->has_mode ? (mode_t)r->mode : DEFAULT_DIR_MODE;
        if ((rc = files_mkdir(w->root_fd, r->path, mode, uid, gid, &created, err)) == 0)
            reply_ok(w, id, PROTO_T_CREATED, created ? 1 : 0);
        break;
    }
    case PROTO_FILE_MOVE:
        if ((rc = files_move(w->root_fd, r->path, r->to, files_flags(r->flags), uid, gid, err)) ==
            0)
            reply_ok(w, id, 0, 0);
        break;
    case PROTO_FILE_REMOVE:
        if ((rc = files_remove(w->root_fd, r->path, err)) == 0)
            reply_ok(w, id, 0, 0);
        break;
    case PROTO_WATCH_START:
        do_watch_start(w, id, r, err);
        return;
    case PROTO_WATCH_STOP: {
        ssize_t i = watch_find(w, r->watch_id);
        if (i < 0) {
            rc = err_set(err, ESRCH, "no such watch");
            break;
        }
        watch_drop(w, (size_t)i);
        reply_ok(w, id, 0, 0);
        return;
    }
    default:
        rc = err_set(err, EOPNOTSUPP, "not a file request");
        break;
    }
    if (rc < 0)
        reply_error(w, id, err);
}

void files_ops_serve(struct files_worker *w, const uint8_t *msg, size_t len)
{
    struct proto_msg m;
    struct proto_file_request r;
    err_t err = {0};
    if (proto_parse(msg, len, &m, &err) < 0)
        return; /* no id to answer to: init never sends that */
    if (proto_decode_file_request(&m, &r, &err) < 0) {
        reply_error(w, m.request_id, &err);
        return;
    }
    /* init sends each user's requests to that user's worker; anything else is refused. */
    if (r.type != PROTO_WATCH_STOP && r.as_root != w->as_root) {
        err_set(&err, EPERM, "a request for another user's worker");
        reply_error(w, m.request_id, &err);
        return;
    }
    perform(w, m.request_id, &r, &err);
}
