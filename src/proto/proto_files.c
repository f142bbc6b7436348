/* The codec of the file messages (proto_files.h, README.md). */
#include "proto/proto_files.h"

#include <errno.h>
#include <string.h>

#define BIT(tag) (1ull << (tag))

/* The fields each request takes; PATH (TO for a move, WATCH_ID for a stop) is also required. */
static uint64_t request_fields(enum proto_type type)
{
    const uint64_t common = BIT(PROTO_T_PATH) | BIT(PROTO_T_USER);
    const uint64_t owner = BIT(PROTO_T_UID) | BIT(PROTO_T_GID) | BIT(PROTO_T_MODE);
    switch (type) {
    case PROTO_FILE_STAT:
        return common | BIT(PROTO_T_FOLLOW);
    case PROTO_FILE_LIST:
        return common | BIT(PROTO_T_DEPTH);
    case PROTO_FILE_READ:
    case PROTO_FILE_REMOVE:
        return common;
    case PROTO_FILE_WRITE:
        return common | owner | BIT(PROTO_T_FLAGS) | BIT(PROTO_T_METADATA);
    case PROTO_FILE_MKDIR:
        return common | owner;
    case PROTO_FILE_MOVE:
        return common | BIT(PROTO_T_TO) | BIT(PROTO_T_UID) | BIT(PROTO_T_GID) | BIT(PROTO_T_FLAGS);
    case PROTO_WATCH_START:
        return common | BIT(PROTO_T_RECURSIVE) | BIT(PROTO_T_FLAGS);
    case PROTO_WATCH_STOP:
        return BIT(PROTO_T_WATCH_ID);
    default:
        return 0;
    }
}

static uint32_t request_flags(enum proto_type type)
{
    if (type == PROTO_FILE_WRITE)
        return PROTO_FILE_TRUNCATE | PROTO_FILE_APPEND | PROTO_FILE_EXCLUSIVE |
               PROTO_FILE_MAKE_PARENTS | PROTO_FILE_OWN;
    if (type == PROTO_FILE_MOVE)
        return PROTO_FILE_MAKE_PARENTS | PROTO_FILE_NO_REPLACE;
    if (type == PROTO_WATCH_START)
        return PROTO_WATCH_ENTRIES;
    return 0;
}

bool proto_is_file_request(enum proto_type type)
{
    return request_fields(type) != 0;
}

size_t proto_encode_file_request(void *buf, size_t cap, uint32_t request_id,
                                 const struct proto_file_request *r)
{
    uint64_t fields = request_fields(r->type);
    if (!fields)
        return 0;
    struct proto_writer wr, *w = &wr;
    proto_begin(w, buf, cap, r->type, request_id, 0);
    if (fields & BIT(PROTO_T_PATH))
        proto_put_str(w, PROTO_T_PATH, r->path ? r->path : "");
    if ((fields & BIT(PROTO_T_TO)))
        proto_put_str(w, PROTO_T_TO, r->to ? r->to : "");
    if (fields & BIT(PROTO_T_USER))
        proto_put_u32(w, PROTO_T_USER, r->as_root ? 1 : 0);
    if ((fields & BIT(PROTO_T_UID)) && r->has_owner) {
        proto_put_u32(w, PROTO_T_UID, r->uid);
        proto_put_u32(w, PROTO_T_GID, r->gid);
    }
    if ((fields & BIT(PROTO_T_MODE)) && r->has_mode)
        proto_put_u32(w, PROTO_T_MODE, r->mode);
    if ((fields & BIT(PROTO_T_FLAGS)) && r->flags) /* absent is none (an older init's watch) */
        proto_put_u32(w, PROTO_T_FLAGS, r->flags);
    if (fields & BIT(PROTO_T_DEPTH))
        proto_put_u32(w, PROTO_T_DEPTH, r->depth ? r->depth : 1);
    if (fields & BIT(PROTO_T_FOLLOW))
        proto_put_u32(w, PROTO_T_FOLLOW, r->follow ? 1 : 0);
    if (fields & BIT(PROTO_T_RECURSIVE))
        proto_put_u32(w, PROTO_T_RECURSIVE, r->recursive ? 1 : 0);
    if (fields & BIT(PROTO_T_WATCH_ID))
        proto_put_u32(w, PROTO_T_WATCH_ID, r->watch_id);
    if ((fields & BIT(PROTO_T_METADATA)) && r->metadata)
        proto_put_str(w, PROTO_T_METADATA, r->metadata);
    return proto_finish(w);
}

static int field_bool(const struct proto_field *f, bool *out, err_t *err)
{
    uint32_t v;
    if (proto_field_u32_max(f, 1, &v, err) < 0)
        return -1;
    *out = v;
    return 0;
}

/* Metadata lines: KEY=VALUE, each line ended by '\n', printable ASCII only (the worker checks
 * the keys' characters and the bound again, src/files). */
static int field_metadata(const struct proto_field *f, const char **out, err_t *err)
{
    if (proto_field_str(f, PROTO_MAX_STRING, out, err) < 0)
        return -1;
    const char *s = *out;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n' && ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e))
            return err_set(err, EBADMSG, "protocol: metadata with byte 0x%02x",
                           (unsigned char)s[i]);
    if (n && s[n - 1] != '\n')
        return err_set(err, EBADMSG, "protocol: metadata not ended by a newline");
    return 0;
}

/* An absolute path (the daemon joins relative ones to the user's home first). */
static int field_path(const struct proto_field *f, const char **out, err_t *err)
{
    if (proto_field_str(f, PROTO_MAX_STRING, out, err) < 0)
        return -1;
    if ((*out)[0] != '/')
        return err_set(err, EINVAL, "protocol: field %u: path %.64s is not absolute", f->tag, *out);
    return 0;
}

/* The fields of body, each one in allowed and none twice but those in repeatable; *seen says
 * which came. fn decodes one. */
typedef int (*field_fn)(const struct proto_field *f, void *out, err_t *err);
static int walk_fields(const uint8_t *body, size_t len, uint64_t allowed, uint64_t repeatable,
                       const char *what, field_fn fn, void *out, uint64_t *seen, err_t *err)
{
    struct proto_iter it;
    struct proto_field f;
    int rc;
    *seen = 0;
    proto_iter_init(&it, body, len);
    while ((rc = proto_next(&it, &f, err)) == 1) {
        uint64_t bit = BIT(f.tag);
        if (!(allowed & bit))
            return err_set(err, EBADMSG, "protocol: field %u has no place in %s", f.tag, what);
        if ((*seen & bit & ~repeatable))
            return err_set(err, EBADMSG, "protocol: field %u twice in %s", f.tag, what);
        *seen |= bit;
        if (fn(&f, out, err) < 0)
            return -1;
    }
    return rc;
}

static int request_field(const struct proto_field *f, void *arg, err_t *err)
{
    struct proto_file_request *r = arg;
    switch (f->tag) {
    case PROTO_T_PATH:
        return field_path(f, &r->path, err);
    case PROTO_T_TO:
        return field_path(f, &r->to, err);
    case PROTO_T_USER:
        return field_bool(f, &r->as_root, err);
    case PROTO_T_UID:
        return proto_field_u32(f, &r->uid, err);
    case PROTO_T_GID:
        return proto_field_u32(f, &r->gid, err);
    case PROTO_T_MODE:
        r->has_mode = true;
        return proto_field_u32_max(f, 07777, &r->mode, err);
    case PROTO_T_FLAGS:
        if (proto_field_u32(f, &r->flags, err) < 0)
            return -1;
        if (r->flags & ~request_flags(r->type))
            return err_set(err, EINVAL, "protocol: flags 0x%x for message %u", r->flags, r->type);
        return 0;
    case PROTO_T_DEPTH:
        if (proto_field_u32_max(f, PROTO_MAX_DEPTH, &r->depth, err) < 0)
            return -1;
        return r->depth ? 0 : err_set(err, EINVAL, "protocol: depth 0");
    case PROTO_T_FOLLOW:
        return field_bool(f, &r->follow, err);
    case PROTO_T_RECURSIVE:
        return field_bool(f, &r->recursive, err);
    case PROTO_T_WATCH_ID:
        if (proto_field_u32(f, &r->watch_id, err) < 0)
            return -1;
        return r->watch_id ? 0 : err_set(err, EINVAL, "protocol: watch id 0");
    case PROTO_T_METADATA:
        return field_metadata(f, &r->metadata, err);
    default:
        return err_set(err, EBADMSG, "protocol: field %u", f->tag);
    }
}

int proto_decode_file_request(const struct proto_msg *m, struct proto_file_request *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->type = m->type;
    out->depth = 1;
    uint64_t allowed = request_fields(m->type), seen;
    if (!allowed)
        return err_set(err, EBADMSG, "protocol: message %u is not a file request", m->type);
    if (m->n_fds)
        return err_set(err, EBADMSG, "protocol: a file request takes no fds");
    if (walk_fields(m->body, m->body_len, allowed, 0, "a file request", request_field, out, &seen,
                    err) < 0)
        return -1;
    uint64_t required = allowed & (BIT(PROTO_T_PATH) | BIT(PROTO_T_TO) | BIT(PROTO_T_WATCH_ID));
    if ((seen & required) != required)
        return err_set(err, EINVAL, "protocol: message %u lacks its %s", m->type,
                       (required & ~seen & BIT(PROTO_T_WATCH_ID)) ? "watch id"
                       : (required & ~seen & BIT(PROTO_T_PATH))   ? "path"
                                                                  : "destination");
    bool uid = seen & BIT(PROTO_T_UID), gid = seen & BIT(PROTO_T_GID);
    if (uid != gid)
        return err_set(err, EINVAL, "protocol: an owner needs both UID and GID");
    /* (uid_t)-1 means "no change" to chown(2): never an owner. */
    if (uid && (out->uid == UINT32_MAX || out->gid == UINT32_MAX))
        return err_set(err, EINVAL, "protocol: owner %u:%u", out->uid, out->gid);
    out->has_owner = uid;
    return 0;
}

/* ---------- files ---------- */

void proto_put_file(struct proto_writer *w, const struct proto_file_entry *e)
{
    size_t start = proto_begin_nested(w, PROTO_T_FILE);
    proto_put_str(w, PROTO_T_PATH, e->path);
    proto_put_str(w, PROTO_T_NAME, e->name);
    proto_put_u32(w, PROTO_T_FILE_TYPE, e->type);
    proto_put_u32(w, PROTO_T_MODE, e->mode);
    proto_put_u32(w, PROTO_T_UID, e->uid);
    proto_put_u32(w, PROTO_T_GID, e->gid);
    proto_put_u64(w, PROTO_T_SIZE, e->size);
    proto_put_u64(w, PROTO_T_MTIME, (uint64_t)e->mtime_ns);
    if (e->symlink && e->symlink[0])
        proto_put_str(w, PROTO_T_SYMLINK, e->symlink);
    if (e->level)
        proto_put_u32(w, PROTO_T_LEVEL, e->level);
    if (e->target && e->target[0]) {
        proto_put_str(w, PROTO_T_TARGET, e->target);
        proto_put_u32(w, PROTO_T_TARGET_TYPE, e->target_type);
        proto_put_u32(w, PROTO_T_TARGET_MODE, e->target_mode);
    }
    if (e->metadata && e->metadata[0])
        proto_put_str(w, PROTO_T_METADATA, e->metadata);
    proto_end_nested(w, start);
}

static int file_field(const struct proto_field *f, void *arg, err_t *err)
{
    struct proto_file_entry *e = arg;
    uint64_t v;
    switch (f->tag) {
    case PROTO_T_PATH:
        return field_path(f, &e->path, err);
    case PROTO_T_NAME:
        if (proto_field_str(f, PROTO_MAX_NAME, &e->name, err) < 0)
            return -1;
        if (!e->name[0] || (strchr(e->name, '/') && strcmp(e->name, "/") != 0))
            return err_set(err, EBADMSG, "protocol: bad file name");
        return 0;
    case PROTO_T_FILE_TYPE:
        return proto_field_u32_max(f, PROTO_FILE_TYPE_END - 1, &e->type, err);
    case PROTO_T_MODE:
        return proto_field_u32_max(f, 07777, &e->mode, err);
    case PROTO_T_UID:
        return proto_field_u32(f, &e->uid, err);
    case PROTO_T_GID:
        return proto_field_u32(f, &e->gid, err);
    case PROTO_T_SIZE:
        return proto_field_u64(f, &e->size, err);
    case PROTO_T_MTIME:
        if (proto_field_u64(f, &v, err) < 0)
            return -1;
        memcpy(&e->mtime_ns, &v, sizeof v);
        return 0;
    case PROTO_T_SYMLINK:
        return proto_field_str(f, PROTO_MAX_STRING, &e->symlink, err);
    case PROTO_T_LEVEL:
        if (proto_field_u32_max(f, PROTO_MAX_DEPTH, &e->level, err) < 0)
            return -1;
        return e->level ? 0 : err_set(err, EBADMSG, "protocol: level 0");
    case PROTO_T_TARGET:
        return field_path(f, &e->target, err);
    case PROTO_T_TARGET_TYPE:
        return proto_field_u32_max(f, PROTO_FILE_TYPE_END - 1, &e->target_type, err);
    case PROTO_T_TARGET_MODE:
        return proto_field_u32_max(f, 07777, &e->target_mode, err);
    case PROTO_T_METADATA:
        return field_metadata(f, &e->metadata, err);
    default:
        return err_set(err, EBADMSG, "protocol: field %u", f->tag);
    }
}

int proto_decode_file(const uint8_t *body, size_t len, struct proto_file_entry *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->symlink = out->target = out->metadata = "";
    const uint64_t required = BIT(PROTO_T_PATH) | BIT(PROTO_T_NAME) | BIT(PROTO_T_FILE_TYPE);
    const uint64_t target =
        BIT(PROTO_T_TARGET) | BIT(PROTO_T_TARGET_TYPE) | BIT(PROTO_T_TARGET_MODE);
    const uint64_t allowed = required | BIT(PROTO_T_MODE) | BIT(PROTO_T_UID) | BIT(PROTO_T_GID) |
                             BIT(PROTO_T_SIZE) | BIT(PROTO_T_MTIME) | BIT(PROTO_T_SYMLINK) |
                             BIT(PROTO_T_LEVEL) | target | BIT(PROTO_T_METADATA);
    uint64_t seen;
    if (walk_fields(body, len, allowed, 0, "a file", file_field, out, &seen, err) < 0)
        return -1;
    if ((seen & required) != required)
        return err_set(err, EBADMSG, "protocol: a file without its path, name or type");
    if (out->symlink[0] && out->type != PROTO_FILE_TYPE_SYMLINK)
        return err_set(err, EBADMSG, "protocol: a symlink's text on a file of type %u", out->type);
    if ((seen & target) && ((seen & target) != target || out->type != PROTO_FILE_TYPE_SYMLINK))
        return err_set(err, EBADMSG, "protocol: a target, its type and mode, on symlinks only");
    if (out->metadata[0] && out->type != PROTO_FILE_TYPE_FILE && out->type != PROTO_FILE_TYPE_DIR)
        return err_set(err, EBADMSG, "protocol: metadata on a file of type %u", out->type);
    return 0;
}

/* The fields of a reply with files: FILE (once, or up to max times), ACCESS, MORE. */
struct reply_walk {
    struct proto_file_entry *files;
    size_t max, n;
    uint32_t access;
    bool more;
};

static int reply_field(const struct proto_field *f, void *arg, err_t *err)
{
    struct reply_walk *r = arg;
    switch (f->tag) {
    case PROTO_T_FILE:
        if (r->n >= r->max)
            return err_set(err, E2BIG, "protocol: more than %zu files in a reply", r->max);
        return proto_decode_file(f->data, f->len, &r->files[r->n++], err);
    case PROTO_T_ACCESS:
        return proto_field_u32_max(f, 1, &r->access, err);
    case PROTO_T_MORE:
        return field_bool(f, &r->more, err);
    default:
        return err_set(err, EBADMSG, "protocol: field %u", f->tag);
    }
}

int proto_decode_file_reply(const struct proto_msg *m, struct proto_file_entry *file,
                            uint32_t *access, err_t *err)
{
    bool opened = m->type == PROTO_FILE_OPENED;
    if (!opened && m->type != PROTO_FILE_INFO)
        return err_set(err, EBADMSG, "protocol: message %u is not a file", m->type);
    if (m->n_fds != (opened ? 1u : 0u))
        return err_set(err, EBADMSG, "protocol: message %u with %zu fds", m->type, m->n_fds);
    struct reply_walk r = {.files = file, .max = 1};
    uint64_t need = BIT(PROTO_T_FILE) | (opened ? BIT(PROTO_T_ACCESS) : 0), seen;
    if (walk_fields(m->body, m->body_len, need, 0, "a file reply", reply_field, &r, &seen, err) < 0)
        return -1;
    if (seen != need)
        return err_set(err, EBADMSG, "protocol: message %u lacks its file%s", m->type,
                       opened ? " or access" : "");
    if (access)
        *access = r.access;
    return 0;
}

int proto_decode_file_list(const struct proto_msg *m, struct proto_file_entry *entries, size_t max,
                           size_t *n, bool *more, err_t *err)
{
    *n = 0;
    *more = false;
    if (m->type != PROTO_FILE_LIST_REPLY || m->n_fds)
        return err_set(err, EBADMSG, "protocol: message %u is not a file list", m->type);
    struct reply_walk r = {.files = entries, .max = max};
    uint64_t seen;
    if (walk_fields(m->body, m->body_len, BIT(PROTO_T_FILE) | BIT(PROTO_T_MORE), BIT(PROTO_T_FILE),
                    "a file list", reply_field, &r, &seen, err) < 0)
        return -1;
    if (!(seen & BIT(PROTO_T_MORE)))
        return err_set(err, EBADMSG, "protocol: a file list without MORE");
    *n = r.n;
    *more = r.more;
    return 0;
}

/* ---------- watch events ---------- */

void proto_put_event(struct proto_writer *w, const struct proto_watch_event *e)
{
    size_t start = proto_begin_nested(w, PROTO_T_EVENT);
    proto_put_u32(w, PROTO_T_KIND, e->kind);
    proto_put_str(w, PROTO_T_PATH, e->path);
    proto_put_u32(w, PROTO_T_IS_DIR, e->is_dir ? 1 : 0);
    if (e->has_file)
        proto_put_file(w, &e->file);
    proto_end_nested(w, start);
}

static int event_field(const struct proto_field *f, void *arg, err_t *err)
{
    struct proto_watch_event *e = arg;
    switch (f->tag) {
    case PROTO_T_KIND:
        return proto_field_u32_max(f, PROTO_WATCH_KIND_END - 1, &e->kind, err);
    case PROTO_T_PATH:
        return field_path(f, &e->path, err);
    case PROTO_T_IS_DIR:
        return field_bool(f, &e->is_dir, err);
    case PROTO_T_FILE:
        e->has_file = true;
        return proto_decode_file(f->data, f->len, &e->file, err);
    default:
        return err_set(err, EBADMSG, "protocol: field %u", f->tag);
    }
}

/* The fields of a WATCH_EVENTS: its WATCH_ID, and EVENTs up to max. */
struct events_walk {
    uint32_t *watch_id;
    struct proto_watch_event *events;
    size_t max, n;
};

static int events_field(const struct proto_field *f, void *arg, err_t *err)
{
    struct events_walk *w = arg;
    if (f->tag == PROTO_T_WATCH_ID)
        return proto_field_u32(f, w->watch_id, err);
    if (w->n >= w->max)
        return err_set(err, E2BIG, "protocol: more than %zu events", w->max);
    struct proto_watch_event *e = &w->events[w->n++];
    memset(e, 0, sizeof *e);
    const uint64_t all = BIT(PROTO_T_KIND) | BIT(PROTO_T_PATH) | BIT(PROTO_T_IS_DIR);
    uint64_t seen;
    if (walk_fields(f->data, f->len, all | BIT(PROTO_T_FILE), 0, "an event", event_field, e, &seen,
                    err) < 0)
        return -1;
    if ((seen & all) != all)
        return err_set(err, EBADMSG, "protocol: an event without its kind, path or type");
    if (e->has_file && strcmp(e->file.path, e->path) != 0)
        return err_set(err, EBADMSG, "protocol: an event's file is not at the event's path");
    return 0;
}

int proto_decode_watch_events(const struct proto_msg *m, uint32_t *watch_id,
                              struct proto_watch_event *events, size_t max, size_t *n, err_t *err)
{
    *n = 0;
    *watch_id = 0;
    if (m->type != PROTO_WATCH_EVENTS || m->n_fds)
        return err_set(err, EBADMSG, "protocol: message %u is not a watch's events", m->type);
    struct events_walk w = {.watch_id = watch_id, .events = events, .max = max};
    uint64_t seen;
    if (walk_fields(m->body, m->body_len, BIT(PROTO_T_WATCH_ID) | BIT(PROTO_T_EVENT),
                    BIT(PROTO_T_EVENT), "a watch's events", events_field, &w, &seen, err) < 0)
        return -1;
    if (*watch_id == 0)
        return err_set(err, EBADMSG, "protocol: events without their watch");
    *n = w.n;
    return 0;
}
