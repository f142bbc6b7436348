/* envd's filesystem: the Connect service's unary calls (Stat, MakeDir, Remove, ListDir, Move)
 * and the plain-HTTP /files download and upload (multipart or raw), each turned into requests
 * to the sandbox's files workers (src/jail/files.h). A file's bytes go between the HTTP body and
 * the fd the worker opened inside the sandbox; they never pass through init. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/conditional.h"
#include "api/connect_rpc.h"
#include "api/envd_files.h"
#include "api/gzip_body.h"
#include "api/json_input.h"
#include "api/multipart.h"
#include "api/query.h"
#include "serve/agent.h"
#include "serve/envd_routes.h"
#include "util/strfmt.h"

#define FILES_LIST_MAX   100000 /* entries of one ListDir answer */
#define FILES_CHUNK      (64u << 10)
#define FILES_MAX_UPLOAD (1ull << 40)
#define FILES_MODE       0644
#define FILES_DIR_MODE   0755

struct fcall;

/* One file of an upload: its open request, then its fd, and what came before the fd did. */
struct upload_file {
    struct fcall *f;
    char path[ENVD_PATH_MAX + 1];
    uint32_t request_id;
    int fd;
    bool opened, ended, failed;
    char *pending; /* data that arrived before the fd */
    size_t n_pending;
    struct proto_file_entry entry; /* strings copied below */
    char name[ENVD_PATH_MAX + 1], abs[ENVD_PATH_MAX + 1];
    uint64_t written, budget; /* a gzip body's: at most the free disk space at its open */
    char metadata[ENVD_METADATA_MAX + 1]; /* what the file kept, as init read it back */
    struct upload_file *next;
};

struct fcall {
    struct serve *d;
    struct http_exchange *x;
    struct sbx *sb;
    char sandbox_id[STORE_ID_MAX + 1];
    bool as_root, rpc, responded;
    char method[32];
    char *body;
    size_t len;
    /* ListDir's chunks */
    struct proto_file_entry *entries;
    char **strings;
    size_t n_entries, n_strings;
    /* Move: the destination, stat'ed once moved */
    char destination[ENVD_PATH_MAX + 1];
    /* download */
    char range[ENVD_RANGE_HEADER_MAX + 1]; /* its Range header, "" for none (or one ignored) */
    /* its preconditions (conditional.h): If-Match, If-Unmodified-Since, If-None-Match,
     * If-Modified-Since, If-Range; NULL where absent (or too long: ignored) */
    char *cond[5];
    int read_fd;
    uint64_t left;
    bool waiting_drain;
    /* upload */
    struct multipart_reader *mp;
    struct upload_file *files, *current;
    bool body_done, paused;
    char error[512];
    int error_status;
    unsigned discarding; /* a failed upload's files being removed before the answer */
    char metadata[ENVD_METADATA_MAX + 1]; /* X-Metadata-*: every file of the upload gets it */
    /* Content-Encoding: gzip; what a pause left of a piece of the body */
    struct gzip_decoder *gz;
    char *gz_backlog;
    size_t gz_backlog_len;
    /* a download that Accept-Encoding asked to gzip */
    struct gzip_encoder *gz_out;
};

static void fcall_free(struct fcall *f)
{
    if (f->sb && sbx_find(f->d, f->sandbox_id) == f->sb)
        agent_cancel(f->sb, f);
    free(f->body);
    for (size_t i = 0; i < sizeof f->cond / sizeof f->cond[0]; i++)
        free(f->cond[i]);
    free(f->entries);
    for (size_t i = 0; i < f->n_strings; i++)
        free(f->strings[i]);
    free(f->strings);
    if (f->read_fd >= 0)
        close(f->read_fd);
    multipart_reader_free(f->mp);
    gzip_decoder_free(f->gz);
    free(f->gz_backlog);
    gzip_encoder_free(f->gz_out);
    while (f->files) {
        struct upload_file *next = f->files->next;
        if (f->files->fd >= 0)
            close(f->files->fd);
        if (f->sb && sbx_find(f->d, f->sandbox_id) == f->sb)
            agent_cancel(f->sb, f->files);
        free(f->files->pending);
        free(f->files);
        f->files = next;
    }
    free(f);
}

static void on_end(struct http_exchange *x, void *user)
{
    struct fcall *f = user;
    f->x = NULL;
    fcall_free(f);
}

/* ---------- answers ---------- */

static void reply_json(struct fcall *f, int status, const char *json)
{
    static const struct http_header h[] = {{"Content-Type", "application/json"}};
    if (f->x && !f->responded) {
        f->responded = true;
        http_respond(f->x, status, h, 1, json, strlen(json));
    }
}

static int http_status_of(int errnum)
{
    switch (errnum) {
    case ENOENT:
        return 404;
    case EACCES:
    case EPERM:
        return 403;
    case EEXIST:
        return 409;
    case ENOSPC:
    case EDQUOT:
        return 507;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
        return 400;
    default:
        return 500;
    }
}

/* An error in the shape of the call: Connect's for the RPC, envd's {"code","message"} for /files.
 */
static void reply_error(struct fcall *f, int errnum, const char *message)
{
    if (!f->x || f->responded)
        return;
    if (f->rpc) {
        enum connect_code code = connect_code_from_errno(errnum);
        char *json = connect_error_json(code, message);
        if (json)
            reply_json(f, connect_code_http_status(code), json);
        free(json);
    } else {
        f->responded = true;
        http_respond_error(f->x, http_status_of(errnum), "%s", message);
    }
}

static void reply_entry(struct fcall *f, const struct proto_file_entry *e)
{
    char *json = envd_entry_reply(e);
    if (json)
        reply_json(f, 200, json);
    else
        reply_error(f, ENOMEM, "out of memory");
    free(json);
}

/* ---------- the RPC ---------- */

static void on_stat_reply(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user);

static int send_request(struct fcall *f, const struct proto_file_request *r, void *owner,
                        agent_fn fn, uint32_t *id_out)
{
    err_t err;
    uint32_t id = agent_next_id(f->sb);
    if (agent_expect(f->sb, id, fn, owner, &err) < 0 ||
        jail_files_request(&f->sb->jail, id, r, &err) < 0) {
        agent_cancel(f->sb, owner);
        reply_error(f, err.errnum ? err.errnum : EIO, err.msg);
        return -1;
    }
    if (id_out)
        *id_out = id;
    return 0;
}

static bool answer_error(struct fcall *f, struct jail_agent_msg *m, const char *why)
{
    if (!m) {
        reply_error(f, EIO, why);
        return true;
    }
    if (m->type == PROTO_ERROR) {
        reply_error(f, m->errnum, m->message);
        return true;
    }
    return false;
}

static void on_stat_reply(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct fcall *f = user;
    if (answer_error(f, m, why))
        return;
    if (m->type != PROTO_FILE_INFO) {
        reply_error(f, EIO, "unexpected answer from the sandbox");
        return;
    }
    reply_entry(f, &m->files.file);
}

static void on_ok_reply(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct fcall *f = user;
    if (answer_error(f, m, why))
        return;
    if (strcmp(f->method, "MakeDir") == 0 && !m->files.created) {
        reply_error(f, EEXIST, "directory already exists");
        return;
    }
    if (strcmp(f->method, "Move") == 0) { /* its answer is the moved entry */
        struct proto_file_request r = {
            .type = PROTO_FILE_STAT, .path = f->destination, .as_root = f->as_root};
        send_request(f, &r, f, on_stat_reply, NULL);
        return;
    }
    if (strcmp(f->method, "MakeDir") == 0) {
        struct proto_file_request r = {
            .type = PROTO_FILE_STAT, .path = f->destination, .as_root = f->as_root};
        send_request(f, &r, f, on_stat_reply, NULL);
        return;
    }
    reply_json(f, 200, "{}");
}

static char *keep_string(struct fcall *f, const char *s)
{
    char **grown = realloc(f->strings, (f->n_strings + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    f->strings = grown;
    char *copy = strdup(s ? s : "");
    if (copy)
        f->strings[f->n_strings++] = copy;
    return copy;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct proto_file_entry *)a)->path,
                  ((const struct proto_file_entry *)b)->path);
}

static void on_list_reply(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct fcall *f = user;
    if (answer_error(f, m, why))
        return;
    if (m->type != PROTO_FILE_LIST_REPLY) {
        reply_error(f, EIO, "unexpected answer from the sandbox");
        return;
    }
    if (f->n_entries + m->files.n_entries > FILES_LIST_MAX) {
        agent_cancel(f->sb, f);
        reply_error(f, E2BIG, "more than 100000 entries: list with a smaller depth");
        return;
    }
    struct proto_file_entry *grown =
        realloc(f->entries, (f->n_entries + m->files.n_entries + 1) * sizeof *grown);
    if (!grown) {
        agent_cancel(f->sb, f);
        reply_error(f, ENOMEM, "out of memory");
        return;
    }
    f->entries = grown;
    for (size_t i = 0; i < m->files.n_entries; i++) {
        struct proto_file_entry e = m->files.entries[i];
        e.path = keep_string(f, e.path);
        e.name = keep_string(f, e.name);
        e.symlink = keep_string(f, e.symlink);
        e.target = keep_string(f, e.target);
        e.metadata = keep_string(f, e.metadata);
        if (!e.path || !e.name || !e.symlink || !e.target || !e.metadata) {
            agent_cancel(f->sb, f);
            reply_error(f, ENOMEM, "out of memory");
            return;
        }
        f->entries[f->n_entries++] = e;
    }
    if (m->more)
        return;
    qsort(f->entries, f->n_entries, sizeof *f->entries, by_path);
    char *json = envd_list_reply_files(f->entries, f->n_entries);
    if (json)
        reply_json(f, 200, json);
    else
        reply_error(f, ENOMEM, "out of memory");
    free(json);
}

static void rpc_call(struct fcall *f)
{
    static const struct {
        const char *name;
        enum envd_fs_call call;
    } calls[] = {{"Stat", ENVD_FS_STAT},
                 {"MakeDir", ENVD_FS_MAKE_DIR},
                 {"Remove", ENVD_FS_REMOVE},
                 {"ListDir", ENVD_FS_LIST_DIR},
                 {"Move", ENVD_FS_MOVE}};
    size_t i = 0;
    while (i < sizeof calls / sizeof *calls && strcmp(calls[i].name, f->method) != 0)
        i++;
    if (i == sizeof calls / sizeof *calls) {
        char *json = connect_error_json(CONNECT_UNIMPLEMENTED, "no such method (yet)");
        if (json)
            reply_json(f, 501, json);
        free(json);
        return;
    }
    err_t err;
    struct envd_fs_request *q = calloc(1, sizeof *q);
    char *path = malloc(ENVD_PATH_MAX + 1);
    if (!q || !path) {
        reply_error(f, ENOMEM, "out of memory");
    } else if (envd_fs_request_parse(calls[i].call, f->body ? f->body : "{}", q, &err) < 0 ||
               envd_path_absolute(q->path, f->as_root, path, &err) < 0 ||
               (calls[i].call == ENVD_FS_MOVE &&
                envd_path_absolute(q->destination, f->as_root, f->destination, &err) < 0)) {
        reply_error(f, EINVAL, err.msg);
    } else {
        struct proto_file_request r = {.path = path, .as_root = f->as_root};
        agent_fn fn = on_ok_reply;
        switch (calls[i].call) {
        case ENVD_FS_STAT:
            r.type = PROTO_FILE_STAT;
            fn = on_stat_reply;
            break;
        case ENVD_FS_MAKE_DIR:
            r.type = PROTO_FILE_MKDIR;
            r.has_mode = true;
            r.mode = FILES_DIR_MODE;
            snprintf(f->destination, sizeof f->destination, "%s", path);
            break;
        case ENVD_FS_REMOVE:
            r.type = PROTO_FILE_REMOVE;
            break;
        case ENVD_FS_LIST_DIR:
            r.type = PROTO_FILE_LIST;
            r.depth = q->depth ? q->depth : 1;
            fn = on_list_reply;
            break;
        case ENVD_FS_MOVE:
            r.type = PROTO_FILE_MOVE;
            r.to = f->destination;
            break;
        default:
            break;
        }
        send_request(f, &r, f, fn, NULL);
    }
    free(q);
    free(path);
}

/* ---------- download ---------- */

/* Encodes buf[0..len) (finish: and the end) into the answer; 1 when it must wait for a drain. */
static int download_gzip(struct fcall *f, const char *buf, size_t len, bool finish)
{
    static char out[FILES_CHUNK];
    bool done = false;
    while (len > 0 || (finish && !done)) {
        size_t used, made;
        err_t err;
        if (gzip_encoder_step(f->gz_out, buf, len, finish, &used, out, sizeof out, &made, &done,
                              &err) < 0)
            return -1;
        buf += used;
        len -= used;
        if (made && http_respond_write(f->x, out, made) < 0)
            return -1;
        if (!used && !made && !done)
            return -1; /* no progress: never spin */
    }
    return 0;
}

static void download_more(struct fcall *f)
{
    static char buf[FILES_CHUNK];
    while (f->x && f->left > 0) {
        size_t want = f->left < sizeof buf ? (size_t)f->left : sizeof buf;
        ssize_t r = read(f->read_fd, buf, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) { /* shrunk meanwhile: the answer is cut, and the connection closed */
            f->left = 0;
            break;
        }
        f->left -= (uint64_t)r;
        int w = f->gz_out ? download_gzip(f, buf, (size_t)r, false)
                          : http_respond_write(f->x, buf, (size_t)r);
        if (w < 0) /* the exchange is gone, or zlib failed: the answer is cut */
            f->left = 0;
        if ((w == 1 || (f->gz_out && f->x && http_respond_write(f->x, "", 0) == 1)) &&
            f->left > 0) {
            f->waiting_drain = true;
            return;
        }
    }
    if (f->x && f->gz_out)
        download_gzip(f, "", 0, true);
    if (f->x)
        http_respond_end(f->x);
}

static void on_drain(struct http_exchange *x, void *user)
{
    struct fcall *f = user;
    if (f->waiting_drain) {
        f->waiting_drain = false;
        download_more(f);
    }
}

static void on_read_opened(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct fcall *f = user;
    if (answer_error(f, m, why))
        return;
    if (m->type != PROTO_FILE_OPENED || m->files.fd < 0 || m->files.fd_writable) {
        reply_error(f, EIO, "unexpected answer from the sandbox");
        return;
    }
    f->read_fd = m->files.fd;
    m->files.fd = -1;
    uint64_t size = m->files.file.size, first = 0;
    f->left = size;
    struct cond_validators v;
    cond_validators_make(size, m->files.file.mtime_ns, &v);
    char content_range[80];
    struct http_header h[6] = {{"Content-Type", "application/octet-stream"},
                               {"Accept-Ranges", "bytes"},
                               {"ETag", v.etag},
                               {"Last-Modified", v.last_modified}};
    size_t n = v.last_modified[0] ? 4 : 3;
    int status = cond_evaluate(&v, &(struct cond_request){.if_match = f->cond[0],
                                                          .if_unmodified_since = f->cond[1],
                                                          .if_none_match = f->cond[2],
                                                          .if_modified_since = f->cond[3]});
    if (status == 304) { /* the validators, no body */
        f->responded = true;
        http_respond(f->x, 304, h + 2, n - 2, NULL, 0);
        return;
    }
    if (status == 412) {
        f->responded = true;
        http_respond_error(f->x, 412,
                           "the file does not meet the request's preconditions "
                           "(If-Match or If-Unmodified-Since)");
        return;
    }
    status = 200;
    const char *range = f->range[0] && cond_if_range(&v, f->cond[4]) ? f->range : NULL;
    switch (envd_range_parse(range, size, &first, &f->left)) {
    case ENVD_RANGE_UNSATISFIABLE:
        snprintf(content_range, sizeof content_range, "bytes */%llu", (unsigned long long)size);
        h[n++] = (struct http_header){"Content-Range", content_range};
        f->responded = true;
        http_respond(f->x, 416, h, n, NULL, 0);
        return;
    case ENVD_RANGE_ONE:
        if (lseek(f->read_fd, (off_t)first, SEEK_SET) < 0) {
            reply_error(f, EIO, "cannot seek to the range's start");
            return;
        }
        /* the part as it is stored: a range of a gzip encoding is no use to anyone */
        gzip_encoder_free(f->gz_out);
        f->gz_out = NULL;
        snprintf(content_range, sizeof content_range, "bytes %llu-%llu/%llu",
                 (unsigned long long)first, (unsigned long long)(first + f->left - 1),
                 (unsigned long long)size);
        h[n++] = (struct http_header){"Content-Range", content_range};
        status = 206;
        break;
    case ENVD_RANGE_NONE: /* the parser left f->left as it was: size */
        if (f->gz_out) {
            h[n++] = (struct http_header){"Vary", "Accept-Encoding"};
            h[n++] = (struct http_header){"Content-Encoding", "gzip"};
        }
        break;
    }
    f->responded = true;
    if (http_respond_start(f->x, status, h, n, f->gz_out ? -1 : (int64_t)f->left) < 0)
        return;
    download_more(f);
}

/* ---------- upload ---------- */

static void upload_answer(struct fcall *f);

static void on_discarded(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct fcall *f = user;
    if (f->discarding > 0 && --f->discarding == 0)
        upload_answer(f);
}

/* A failed upload leaves nothing half-written in place: each file it opened is removed (an
 * overwritten one too, whose old bytes its truncation took), and the answer waits for that. */
static void upload_discard(struct fcall *f)
{
    if (!f->sb || sbx_find(f->d, f->sandbox_id) != f->sb || f->sb->killing)
        return; /* gone with the sandbox */
    for (struct upload_file *u = f->files; u; u = u->next) {
        if (!u->abs[0])
            continue; /* never opened */
        struct proto_file_request r = {
            .type = PROTO_FILE_REMOVE, .path = u->abs, .as_root = f->as_root};
        err_t err;
        uint32_t id = agent_next_id(f->sb);
        if (agent_expect(f->sb, id, on_discarded, f, &err) == 0 &&
            jail_files_request(&f->sb->jail, id, &r, &err) == 0)
            f->discarding++;
        u->abs[0] = '\0';
    }
}

static void upload_answer(struct fcall *f)
{
    if (!f->body_done || f->responded || f->discarding)
        return;
    for (struct upload_file *u = f->files; u; u = u->next)
        if (!u->opened || !u->ended || u->fd >= 0)
            return; /* one still opening, or open */
    if (f->error[0]) {
        upload_discard(f);
        if (f->discarding)
            return;
        f->responded = true;
        http_respond_error(f->x, f->error_status, "%s", f->error);
        return;
    }
    json_t *list = json_array();
    for (struct upload_file *u = f->files; list && u; u = u->next) {
        json_t *o = json_pack("{s:s,s:s,s:s}", "name", u->name, "type", "file", "path", u->abs);
        json_t *metadata = envd_metadata_object(u->metadata);
        if (o && metadata)
            json_object_set_new(o, "metadata", metadata);
        else
            json_decref(metadata);
        if (!o || json_array_append_new(list, o) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    char *json = list ? json_dumps(list, JSON_COMPACT) : NULL;
    json_decref(list);
    if (!json) {
        reply_error(f, ENOMEM, "out of memory");
        return;
    }
    reply_json(f, 200, json);
    free(json);
}

static void upload_fail(struct fcall *f, int errnum, const char *message)
{
    if (!f->error[0]) {
        strfmt_text_append(f->error, sizeof f->error, "%s", message);
        f->error_status = http_status_of(errnum);
    }
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes to the file's fd; a gzip body's decoded bytes are held to the disk's free space. */
static int upload_write(struct upload_file *u, const char *data, size_t len)
{
    if (u->f->gz && len > u->budget - u->written) {
        if (!u->f->error[0]) {
            snprintf(u->f->error, sizeof u->f->error,
                     "the gzip body decodes to more than the sandbox's free disk space (%llu "
                     "bytes)",
                     (unsigned long long)u->budget);
            u->f->error_status = 400;
        }
        return -1;
    }
    if (write_all(u->fd, data, len) < 0) {
        upload_fail(u->f, errno, "writing the file");
        return -1;
    }
    u->written += len;
    return 0;
}

static void upload_close(struct upload_file *u)
{
    if (u->fd >= 0 && close(u->fd) < 0)
        upload_fail(u->f, errno, "closing the file");
    u->fd = -1;
}

/* The body cannot go on (a gzip error found while it was paused): it is not read further, the
 * files are closed and the answer says why. */
static void body_failed(struct fcall *f)
{
    for (struct upload_file *u = f->files; u; u = u->next) {
        u->ended = true;
        upload_close(u);
    }
    f->body_done = true;
    upload_answer(f);
}

static int gz_pump(struct fcall *f, const char *in, size_t len);

static void maybe_resume(struct fcall *f)
{
    if (f->body_done)
        return; /* failed meanwhile: answered, or about to be */
    for (struct upload_file *u = f->files; u; u = u->next)
        if (!u->opened && !u->failed)
            return;
    if (!f->paused || !f->x)
        return;
    f->paused = false;
    if (f->gz_backlog) { /* what the pause left of a gzip piece, first */
        char *backlog = f->gz_backlog;
        f->gz_backlog = NULL;
        int rc = gz_pump(f, backlog, f->gz_backlog_len);
        free(backlog);
        if (rc < 0) {
            /* resumed first: what follows is refused by on_data (the error is set), and the
             * connection closed after the answer instead of read as a next request */
            http_exchange_resume_body(f->x);
            body_failed(f);
            return;
        }
        if (f->paused)
            return; /* the next file waits for its fd: so does the body */
    }
    http_exchange_resume_body(f->x);
}

static void on_write_opened(struct sbx *sb, struct jail_agent_msg *m, const char *why, void *user)
{
    struct upload_file *u = user;
    struct fcall *f = u->f;
    u->opened = true;
    if (!m || m->type != PROTO_FILE_OPENED || m->files.fd < 0 || !m->files.fd_writable) {
        u->failed = true;
        upload_fail(f, m && m->type == PROTO_ERROR ? m->errnum : EIO,
                    !m                       ? why
                    : m->type == PROTO_ERROR ? m->message
                                             : "unexpected answer");
    } else {
        u->fd = m->files.fd;
        m->files.fd = -1;
        snprintf(u->abs, sizeof u->abs, "%s", m->files.file.path);
        snprintf(u->name, sizeof u->name, "%s", m->files.file.name);
        snprintf(u->metadata, sizeof u->metadata, "%s", m->files.file.metadata);
        struct statfs fs;
        u->budget = UINT64_MAX;
        if (f->gz && fstatfs(u->fd, &fs) == 0)
            u->budget = (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize;
        if (u->n_pending && upload_write(u, u->pending, u->n_pending) < 0)
            u->failed = true;
        free(u->pending);
        u->pending = NULL;
        u->n_pending = 0;
        if (u->ended)
            upload_close(u);
    }
    maybe_resume(f);
    upload_answer(f);
}

static struct upload_file *upload_open(struct fcall *f, const char *path_in)
{
    err_t err;
    struct upload_file *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->f = f;
    u->fd = -1;
    if (envd_path_absolute(path_in, f->as_root, u->path, &err) < 0) {
        free(u);
        upload_fail(f, EINVAL, err.msg);
        return NULL;
    }
    struct upload_file **tail = &f->files;
    while (*tail)
        tail = &(*tail)->next;
    *tail = u;
    uint32_t uid = f->as_root ? 0 : JAIL_USER_UID, gid = f->as_root ? 0 : JAIL_USER_GID;
    struct proto_file_request r = {.type = PROTO_FILE_WRITE,
                                   .path = u->path,
                                   .as_root = f->as_root,
                                   .has_owner = true,
                                   .uid = uid,
                                   .gid = gid,
                                   .has_mode = true,
                                   .mode = FILES_MODE,
                                   .flags = PROTO_FILE_TRUNCATE | PROTO_FILE_MAKE_PARENTS |
                                            PROTO_FILE_OWN,
                                   .metadata = f->metadata};
    u->request_id = agent_next_id(f->sb);
    if (agent_expect(f->sb, u->request_id, on_write_opened, u, &err) < 0 ||
        jail_files_request(&f->sb->jail, u->request_id, &r, &err) < 0) {
        agent_cancel(f->sb, u);
        u->opened = u->failed = u->ended = true;
        upload_fail(f, err.errnum, err.msg);
    }
    return u;
}

static int upload_data(struct upload_file *u, const char *data, size_t len)
{
    struct fcall *f = u->f;
    if (u->failed)
        return 0; /* dropped: the answer says why */
    if (u->fd >= 0) {
        if (upload_write(u, data, len) < 0) {
            u->failed = true;
            return f->gz ? -1 : 0; /* a bomb stops the body; a plain body's error is answered */
        }
        return 0;
    }
    /* before the fd: kept, and the body paused until it comes */
    char *grown = realloc(u->pending, u->n_pending + len);
    if (!grown) {
        upload_fail(f, ENOMEM, "out of memory");
        return -1;
    }
    memcpy(grown + u->n_pending, data, len);
    u->pending = grown;
    u->n_pending += len;
    if (!f->paused && f->x) {
        f->paused = true;
        http_exchange_pause_body(f->x);
    }
    return 0;
}

static int mp_begin(const struct multipart_part *part, void *ctx, err_t *err)
{
    struct fcall *f = ctx;
    const char *path = f->destination[0] ? f->destination : part->filename;
    if (!path[0])
        return err_set(err, EINVAL, "a part without a file name, and no path in the URL");
    f->current = upload_open(f, path);
    if (!f->current && !f->error[0])
        return err_set(err, ENOMEM, "out of memory");
    return 0;
}

static int mp_data(const char *data, size_t len, void *ctx, err_t *err)
{
    struct fcall *f = ctx;
    if (f->current && upload_data(f->current, data, len) < 0)
        return err_set(err, ENOMEM, "out of memory");
    return 0;
}

static int mp_end(void *ctx, err_t *err)
{
    struct fcall *f = ctx;
    if (f->current) {
        f->current->ended = true;
        if (f->current->fd >= 0)
            upload_close(f->current);
    }
    f->current = NULL;
    return 0;
}

static const struct multipart_callbacks mp_callbacks = {mp_begin, mp_data, mp_end};

/* ---------- bodies ---------- */

/* A piece of the body as it was sent (decoded, when it came gzipped). */
static int plain_data(struct fcall *f, const char *data, size_t len)
{
    err_t err;
    if (f->mp) {
        if (multipart_reader_feed(f->mp, data, len, &err) < 0) {
            upload_fail(f, err.errnum ? err.errnum : EINVAL, err.msg);
            return -1;
        }
        return 0;
    }
    if (f->current) /* a raw upload */
        return upload_data(f->current, data, len);
    if (f->len + len > CONNECT_MAX_REQUEST) {
        reply_error(f, E2BIG, "the request is larger than envd takes");
        return -1;
    }
    if (http_body_append(&f->body, &f->len, data, len) < 0) {
        reply_error(f, ENOMEM, "out of memory");
        return -1;
    }
    return 0;
}

/* Decodes what it can of in[0..len). A piece that must wait for its file's fd pauses the body
 * (upload_data): the rest of the input is kept, and decoded when the fd came (maybe_resume), so
 * at most one decoded piece waits in memory whatever the body's ratio. */
static int gz_pump(struct fcall *f, const char *in, size_t len)
{
    static char out[FILES_CHUNK];
    size_t made;
    do {
        if (f->paused) {
            char *keep = malloc(len ? len : 1);
            if (!keep) {
                upload_fail(f, ENOMEM, "out of memory");
                return -1;
            }
            memcpy(keep, in, len);
            free(f->gz_backlog);
            f->gz_backlog = keep;
            f->gz_backlog_len = len;
            return 0;
        }
        size_t used;
        err_t err;
        if (gzip_decoder_step(f->gz, in, len, &used, out, sizeof out, &made, &err) < 0) {
            upload_fail(f, EINVAL, err.msg);
            return -1;
        }
        in += used;
        len -= used;
        if (made && plain_data(f, out, made) < 0)
            return -1;
        if (!used && !made)
            break;
    } while (len > 0 || made == sizeof out);
    return 0;
}

static int on_data(struct http_exchange *x, const char *data, size_t len, void *user)
{
    struct fcall *f = user;
    if (sbx_find(f->d, f->sandbox_id) != f->sb || f->sb->killing) {
        f->sb = NULL; /* the sandbox went meanwhile: nothing more to ask it */
        reply_error(f, ENOENT, "the sandbox is gone");
        return -1;
    }
    if (f->body_done)
        return -1;
    int rc = f->gz && f->error[0] ? -1 : f->gz ? gz_pump(f, data, len) : plain_data(f, data, len);
    if (rc < 0 && !f->rpc && (f->mp || f->files))
        body_failed(f); /* the body is not read on: the answer is now */
    return rc;
}

static void on_complete(struct http_exchange *x, void *user)
{
    struct fcall *f = user;
    if (f->body_done)
        return;
    f->sb = sbx_find(f->d, f->sandbox_id);
    if (!f->sb || f->sb->killing || f->sb->state != SANDBOX_RUNNING) {
        reply_error(f, ENOENT, "the sandbox is gone or not running");
        return;
    }
    if (f->rpc) {
        rpc_call(f);
        return;
    }
    err_t err;
    if (f->gz && gzip_decoder_finish(f->gz, &err) < 0)
        upload_fail(f, EINVAL, err.msg);
    if (f->mp && !f->error[0] && multipart_reader_finish(f->mp, &err) < 0)
        upload_fail(f, EINVAL, err.msg);
    if (f->current) { /* a raw upload's one file */
        f->current->ended = true;
        if (f->current->fd >= 0)
            upload_close(f->current);
    }
    f->body_done = true;
    if (!f->files && !f->error[0])
        upload_fail(f, EINVAL, "no file in the upload");
    if (!f->files) {
        f->responded = true;
        http_respond_error(f->x, f->error_status, "%s", f->error);
        return;
    }
    upload_answer(f);
}

static const struct http_body_callbacks body_callbacks = {on_data, on_complete};
static const struct http_exchange_callbacks fcall_callbacks = {
    .on_done = on_end, .on_abort = on_end, .on_drain = on_drain};

static struct fcall *fcall_new(struct serve *d, struct sbx *sb, struct http_exchange *x)
{
    struct fcall *f = calloc(1, sizeof *f);
    if (!f) {
        http_respond_error(x, 500, "out of memory");
        return NULL;
    }
    f->d = d;
    f->x = x;
    f->sb = sb;
    f->read_fd = -1;
    snprintf(f->sandbox_id, sizeof f->sandbox_id, "%s", sb->id);
    http_exchange_set_callbacks(x, &fcall_callbacks, f);
    return f;
}

void envd_files_rpc_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                          const struct http_request *req, const char *method)
{
    struct fcall *f = fcall_new(d, sb, x);
    if (!f)
        return;
    f->rpc = true;
    snprintf(f->method, sizeof f->method, "%s", method);
    err_t err;
    if (auth_envd_user(http_request_header(req, "Authorization"), NULL, &f->as_root, &err) < 0) {
        reply_error(f, EACCES, err.msg);
        return;
    }
    http_exchange_on_body(x, CONNECT_MAX_REQUEST, &body_callbacks, f);
}

/* ---------- signed URLs ---------- */

/* What the SDK signs, as its URL carries it (each "" when absent, as envd takes it). */
struct signed_url {
    char path[ENVD_PATH_MAX + 1], username[64];
    char signature[AUTH_SIGNATURE_MAX + 1], expiration[24];
    const char *operation;
};

static int signed_url_read(const struct http_request *req, struct signed_url *u, err_t *err)
{
    memset(u, 0, sizeof *u);
    u->operation = strcmp(req->method, "POST") == 0 ? "write" : "read";
    if (api_query_get(req->query, "path", u->path, sizeof u->path, err) < 0 ||
        api_query_get(req->query, "username", u->username, sizeof u->username, err) < 0 ||
        api_query_get(req->query, "signature", u->signature, sizeof u->signature, err) < 0 ||
        api_query_get(req->query, "signature_expiration", u->expiration, sizeof u->expiration,
                      err) < 0)
        return api_input_error(err, EACCES, "invalid signature");
    return 0;
}

bool envd_files_signed(const struct http_request *req)
{
    char signature[4];
    err_t err;
    return strcmp(req->path, "/files") == 0 &&
           (strcmp(req->method, "GET") == 0 || strcmp(req->method, "POST") == 0) &&
           api_query_get(req->query, "signature", signature, sizeof signature, &err) != 0;
}

/* The URL's signature checked against sb's token: 0, or -1 with err in envd's words. */
static int signature_check(const struct sbx *sb, const struct signed_url *u, err_t *err)
{
    if (!u->signature[0])
        return api_input_error(err, EACCES, "missing signature query parameter");
    return auth_file_signature_check(u->path, u->operation, u->username, sb->envd_token,
                                     u->signature, u->expiration, (int64_t)time(NULL), err);
}

struct sbx *envd_files_signer(struct serve *d, const struct http_request *req)
{
    struct signed_url u;
    err_t err;
    if (signed_url_read(req, &u, &err) < 0 || !u.signature[0])
        return NULL;
    /* One SHA-256 per live sandbox: a signature is its token's, and only that one's. Every one:
     * those a restart has not reopened yet too. */
    sbx_reopen_rest(d);
    for (struct sbx *sb = d->sandboxes; sb; sb = sb->next) {
        if (sb->killing || sb->gone || !sb->envd_token[0])
            continue;
        if (signature_check(sb, &u, &err) == 0 || err.errnum == ETIMEDOUT)
            return sb;
    }
    return NULL;
}

/* ---------- routes ---------- */

void envd_files_http_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                           const struct http_request *req)
{
    struct fcall *f = fcall_new(d, sb, x);
    if (!f)
        return;
    err_t err;
    const char *token = http_request_header(req, "X-Access-Token");
    if (!token || !token[0]) { /* routes_envd let it in for its signature: check it */
        struct signed_url u;
        if (signed_url_read(req, &u, &err) < 0 || signature_check(sb, &u, &err) < 0) {
            f->responded = true;
            http_respond_error(x, 401, "%s", err.msg);
            return;
        }
    }
    char path[ENVD_PATH_MAX + 1] = "", username[64] = "";
    if (api_query_get(req->query, "path", path, sizeof path, &err) < 0 ||
        api_query_get(req->query, "username", username, sizeof username, &err) < 0) {
        reply_error(f, EINVAL, err.msg);
        return;
    }
    if (auth_envd_user(http_request_header(req, "Authorization"), username[0] ? username : NULL,
                       &f->as_root, &err) < 0) {
        reply_error(f, EACCES, err.msg);
        return;
    }
    if (sb->state != SANDBOX_RUNNING) {
        reply_error(f, ENOENT, "the sandbox is not running");
        return;
    }
    if (strcmp(req->method, "GET") == 0) {
        char abs[ENVD_PATH_MAX + 1];
        if (!path[0] || envd_path_absolute(path, f->as_root, abs, &err) < 0) {
            reply_error(f, EINVAL, path[0] ? err.msg : "a path is needed");
            return;
        }
        if (gzip_accepted(http_request_header(req, "Accept-Encoding")) &&
            !(f->gz_out = gzip_encoder_new(&err))) {
            reply_error(f, ENOMEM, err.msg);
            return;
        }
        /* One range (If-Range checked once the file's validators are known) */
        const char *range = http_request_header(req, "Range");
        if (range && strlen(range) <= ENVD_RANGE_HEADER_MAX)
            snprintf(f->range, sizeof f->range, "%s", range);
        static const char *const cond_names[] = {"If-Match", "If-Unmodified-Since", "If-None-Match",
                                                 "If-Modified-Since", "If-Range"};
        for (size_t i = 0; i < 5; i++) {
            const char *value = http_request_header(req, cond_names[i]);
            if (value && strlen(value) <= COND_HEADER_MAX && !(f->cond[i] = strdup(value))) {
                reply_error(f, ENOMEM, "the request's preconditions");
                return;
            }
        }
        struct proto_file_request r = {.type = PROTO_FILE_READ, .path = abs, .as_root = f->as_root};
        send_request(f, &r, f, on_read_opened, NULL);
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        http_respond_error(x, 405, "/files takes GET and POST");
        return;
    }
    snprintf(f->destination, sizeof f->destination, "%s", path);
    if (envd_metadata_from_headers(req->headers, req->n_headers, f->metadata, &err) < 0) {
        reply_error(f, EINVAL, err.msg);
        return;
    }
    /* gzip covers the whole body, multipart or raw, as envd decodes it before it looks */
    int gz = gzip_content_encoding(http_request_header(req, "Content-Encoding"), &err);
    if (gz < 0 || (gz == 1 && !(f->gz = gzip_decoder_new(&err)))) {
        reply_error(f, EINVAL, err.msg);
        return;
    }
    const char *type = http_request_header(req, "Content-Type");
    if (type && strncasecmp(type, "multipart/", 10) == 0) {
        char boundary[MULTIPART_BOUNDARY_MAX + 1];
        if (multipart_boundary(type, boundary, sizeof boundary, &err) < 0 ||
            !(f->mp = multipart_reader_new(boundary, &mp_callbacks, f, &err))) {
            reply_error(f, EINVAL, err.msg);
            return;
        }
    } else {
        if (!path[0]) {
            reply_error(f, EINVAL, "a raw upload needs ?path=");
            return;
        }
        f->current = upload_open(f, path);
        if (!f->current) {
            reply_error(f, f->error_status ? EINVAL : ENOMEM, f->error[0] ? f->error : "upload");
            return;
        }
    }
    http_exchange_on_body(x, FILES_MAX_UPLOAD, &body_callbacks, f);
}
