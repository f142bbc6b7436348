/* The codec of the host <-> init control protocol (proto.h, README.md). */
#include "proto/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fds.h"

#define FIELD_HEADER 8

/* Both ends run on the same machine, and hutch builds for little-endian x86_64 only; memcpy of
 * native integers is the little-endian encoding the README specifies. */
static void put_raw(struct proto_writer *w, const void *p, size_t n)
{
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = true;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_field_header(struct proto_writer *w, enum proto_tag tag, size_t len)
{
    if (len > UINT32_MAX) {
        w->overflow = true;
        return;
    }
    uint16_t t = (uint16_t)tag, reserved = 0;
    uint32_t l = (uint32_t)len;
    put_raw(w, &t, 2);
    put_raw(w, &reserved, 2);
    put_raw(w, &l, 4);
}

void proto_begin(struct proto_writer *w, void *buf, size_t cap, enum proto_type type,
                 uint32_t request_id, size_t n_fds)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->overflow = cap < PROTO_HEADER_SIZE || n_fds > PROTO_MAX_FDS;
    if (w->overflow)
        return;
    uint32_t magic = PROTO_MAGIC, zero = 0;
    uint8_t version = (uint8_t)proto_type_version(type), fds = (uint8_t)n_fds;
    uint16_t t = (uint16_t)type;
    put_raw(w, &magic, 4);
    put_raw(w, &version, 1);
    put_raw(w, &fds, 1);
    put_raw(w, &t, 2);
    put_raw(w, &request_id, 4);
    put_raw(w, &zero, 4); /* body length, set by proto_finish */
}

void proto_put_u32(struct proto_writer *w, enum proto_tag tag, uint32_t value)
{
    put_field_header(w, tag, 4);
    put_raw(w, &value, 4);
}

void proto_put_i32(struct proto_writer *w, enum proto_tag tag, int32_t value)
{
    put_field_header(w, tag, 4);
    put_raw(w, &value, 4);
}

void proto_put_u64(struct proto_writer *w, enum proto_tag tag, uint64_t value)
{
    put_field_header(w, tag, 8);
    put_raw(w, &value, 8);
}

void proto_put_bytes(struct proto_writer *w, enum proto_tag tag, const void *data, size_t len)
{
    put_field_header(w, tag, len);
    put_raw(w, data, len);
}

void proto_put_str(struct proto_writer *w, enum proto_tag tag, const char *s)
{
    proto_put_bytes(w, tag, s, strlen(s) + 1);
}

size_t proto_begin_nested(struct proto_writer *w, enum proto_tag tag)
{
    size_t start = w->len;
    put_field_header(w, tag, 0);
    return start;
}

void proto_end_nested(struct proto_writer *w, size_t start)
{
    if (w->overflow)
        return;
    uint32_t len = (uint32_t)(w->len - start - FIELD_HEADER);
    memcpy(w->buf + start + 4, &len, 4);
}

size_t proto_finish(struct proto_writer *w)
{
    if (w->overflow)
        return 0;
    uint32_t body = (uint32_t)(w->len - PROTO_HEADER_SIZE);
    memcpy(w->buf + 12, &body, 4);
    return w->len;
}

unsigned proto_type_version(enum proto_type type)
{
    return type >= PROTO_FIRST_V3 ? 3 : type >= PROTO_FIRST_V2 ? 2 : 1;
}

/* ---------- reading ---------- */

int proto_parse(const void *buf, size_t n, struct proto_msg *out, err_t *err)
{
    const uint8_t *b = buf;
    if (n < PROTO_HEADER_SIZE)
        return err_set(err, EBADMSG, "protocol: %zu bytes is shorter than a header", n);
    uint32_t magic, id, body;
    uint16_t type;
    memcpy(&magic, b, 4);
    memcpy(&type, b + 6, 2);
    memcpy(&id, b + 8, 4);
    memcpy(&body, b + 12, 4);
    if (magic != PROTO_MAGIC)
        return err_set(err, EBADMSG, "protocol: bad magic 0x%08x", magic);
    /* Each version adds types: a header says the version that defined its type, so that what
     * version 1 defined stays readable by a peer that speaks only 1, and a newer message reaches
     * an older peer as EPROTO, never as something misread. */
    if (b[4] == 0 || b[4] > PROTO_VERSION)
        return err_set(err, EPROTO, "protocol: version %u, this side speaks up to %u", b[4],
                       PROTO_VERSION);
    if (b[5] > PROTO_MAX_FDS)
        return err_set(err, EBADMSG, "protocol: %u fds, at most %u", b[5], PROTO_MAX_FDS);
    if (type == 0 || type >= PROTO_TYPE_END)
        return err_set(err, EBADMSG, "protocol: unknown message type %u", type);
    if (b[4] < proto_type_version((enum proto_type)type))
        return err_set(err, EBADMSG, "protocol: message type %u in a version %u header", type,
                       b[4]);
    if ((size_t)body != n - PROTO_HEADER_SIZE)
        return err_set(err, EBADMSG, "protocol: body of %u bytes in a message of %zu", body, n);
    out->type = (enum proto_type)type;
    out->request_id = id;
    out->n_fds = b[5];
    out->body = b + PROTO_HEADER_SIZE;
    out->body_len = body;
    return 0;
}

void proto_iter_init(struct proto_iter *it, const uint8_t *body, size_t len)
{
    it->p = body;
    it->end = body + len;
}

int proto_next(struct proto_iter *it, struct proto_field *f, err_t *err)
{
    size_t left = (size_t)(it->end - it->p);
    if (left == 0)
        return 0;
    if (left < FIELD_HEADER)
        return err_set(err, EBADMSG, "protocol: %zu stray bytes after the last field", left);
    uint16_t tag, reserved;
    uint32_t len;
    memcpy(&tag, it->p, 2);
    memcpy(&reserved, it->p + 2, 2);
    memcpy(&len, it->p + 4, 4);
    if (reserved != 0)
        return err_set(err, EBADMSG, "protocol: field %u has reserved bits set", tag);
    if (tag == 0 || tag >= PROTO_T_END)
        return err_set(err, EBADMSG, "protocol: unknown field %u", tag);
    if ((size_t)len > left - FIELD_HEADER)
        return err_set(err, EBADMSG, "protocol: field %u of %u bytes runs past the message",
                       tag, len);
    f->tag = (enum proto_tag)tag;
    f->data = it->p + FIELD_HEADER;
    f->len = len;
    it->p += FIELD_HEADER + len;
    return 1;
}

int proto_field_u32(const struct proto_field *f, uint32_t *out, err_t *err)
{
    if (f->len != 4)
        return err_set(err, EBADMSG, "protocol: field %u: %u bytes, not 4", f->tag, f->len);
    memcpy(out, f->data, 4);
    return 0;
}

int proto_field_u64(const struct proto_field *f, uint64_t *out, err_t *err)
{
    if (f->len != 8)
        return err_set(err, EBADMSG, "protocol: field %u: %u bytes, not 8", f->tag, f->len);
    memcpy(out, f->data, 8);
    return 0;
}

int proto_field_u32_max(const struct proto_field *f, uint32_t max, uint32_t *out, err_t *err)
{
    if (proto_field_u32(f, out, err) < 0)
        return -1;
    if (*out > max)
        return err_set(err, EINVAL, "protocol: field %u: %u, at most %u", f->tag, *out, max);
    return 0;
}

int proto_field_i32(const struct proto_field *f, int32_t *out, err_t *err)
{
    uint32_t v = 0;
    if (proto_field_u32(f, &v, err) < 0)
        return -1;
    memcpy(out, &v, 4);
    return 0;
}

int proto_field_str(const struct proto_field *f, size_t max, const char **out, err_t *err)
{
    if (f->len == 0 || f->data[f->len - 1] != '\0')
        return err_set(err, EBADMSG, "protocol: field %u is not a terminated string", f->tag);
    if (f->len - 1 > max)
        return err_set(err, E2BIG, "protocol: field %u: %u bytes, at most %zu", f->tag,
                       f->len - 1, max);
    if (memchr(f->data, '\0', f->len - 1))
        return err_set(err, EBADMSG, "protocol: field %u holds a NUL", f->tag);
    *out = (const char *)f->data;
    return 0;
}

/* The only field tag of a message: 1 found, 0 absent, -1 twice or malformed. */
static int find_one(const struct proto_msg *m, enum proto_tag tag, struct proto_field *out,
                    err_t *err)
{
    struct proto_iter it;
    struct proto_field f;
    int found = 0, rc;
    proto_iter_init(&it, m->body, m->body_len);
    while ((rc = proto_next(&it, &f, err)) == 1) {
        if (f.tag != tag)
            continue;
        if (found)
            return err_set(err, EBADMSG, "protocol: field %u twice", tag);
        *out = f;
        found = 1;
    }
    return rc < 0 ? -1 : found;
}

int proto_get_u32(const struct proto_msg *m, enum proto_tag tag, uint32_t *out, err_t *err)
{
    struct proto_field f;
    int r = find_one(m, tag, &f, err);
    if (r == 0)
        return err_set(err, EBADMSG, "protocol: message %u lacks field %u", m->type, tag);
    return r < 0 ? -1 : proto_field_u32(&f, out, err);
}

int proto_get_i32(const struct proto_msg *m, enum proto_tag tag, int32_t *out, err_t *err)
{
    struct proto_field f;
    int r = find_one(m, tag, &f, err);
    if (r == 0)
        return err_set(err, EBADMSG, "protocol: message %u lacks field %u", m->type, tag);
    return r < 0 ? -1 : proto_field_i32(&f, out, err);
}

int proto_get_str(const struct proto_msg *m, enum proto_tag tag, size_t max, const char **out,
                  err_t *err)
{
    struct proto_field f;
    *out = NULL;
    int r = find_one(m, tag, &f, err);
    return r <= 0 ? r : proto_field_str(&f, max, out, err);
}

/* ---------- SPAWN ---------- */

size_t proto_encode_spawn(void *buf, size_t cap, uint32_t request_id, const struct proto_spawn *s)
{
    size_t n_fds = (s->has_cgroup_fd ? 1 : 0) + s->n_v1_fds;
    struct proto_writer wr, *w = &wr;
    proto_begin(w, buf, cap, PROTO_SPAWN, request_id, n_fds);
    if (s->tag && s->tag[0])
        proto_put_str(w, PROTO_T_TAG, s->tag);
    if (s->cgroup && s->cgroup[0])
        proto_put_str(w, PROTO_T_CGROUP, s->cgroup);
    for (char **a = s->argv; a && *a; a++)
        proto_put_str(w, PROTO_T_ARG, *a);
    for (char **e = s->envp; e && *e; e++)
        proto_put_str(w, PROTO_T_ENV, *e);
    if (s->cwd)
        proto_put_str(w, PROTO_T_CWD, s->cwd);
    proto_put_u32(w, PROTO_T_USER, s->as_root ? 1 : 0);
    proto_put_u32(w, PROTO_T_STDIN, s->stdin_pipe ? 1 : 0);
    if (s->pty) {
        proto_put_u32(w, PROTO_T_ROWS, s->rows);
        proto_put_u32(w, PROTO_T_COLS, s->cols);
    }
    proto_put_u32(w, PROTO_T_CGROUP_FDS, (s->has_cgroup_fd ? 1u : 0u) | (s->n_v1_fds << 8));
    return proto_finish(w);
}

void proto_spawn_free(struct proto_spawn *s)
{
    free(s->argv);
    free(s->envp);
    s->argv = s->envp = NULL;
}

static bool cgroup_name_ok(const char *n)
{
    if (!n[0] || n[0] == '.')
        return false;
    return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
           strlen(n);
}

static bool env_entry_ok(const char *e)
{
    const char *eq = strchr(e, '=');
    if (!eq || eq == e)
        return false;
    for (const char *c = e; c < eq; c++)
        if (!(*c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
              (c > e && *c >= '0' && *c <= '9')))
            return false;
    return true;
}

/* Appends s to a NULL-terminated array that grows in steps. */
static int push(char ***arr, size_t *n, const char *s, err_t *err)
{
    if (*n >= PROTO_MAX_ARGS)
        return err_set(err, E2BIG, "protocol: more than %u entries", PROTO_MAX_ARGS);
    if ((*n & (*n + 1)) == 0 || !*arr) { /* n + 1 is a power of two: grow */
        char **more = realloc(*arr, (2 * (*n + 1) + 1) * sizeof *more);
        if (!more)
            return err_set(err, ENOMEM, "protocol: spawn");
        *arr = more;
    }
    (*arr)[(*n)++] = (char *)s;
    (*arr)[*n] = NULL;
    return 0;
}

/* A single field's first time: sets *have. A second time refuses the message. */
static int once(bool *have, const struct proto_field *f, err_t *err)
{
    if (*have)
        return err_set(err, EBADMSG, "protocol: field %u twice", f->tag);
    *have = true;
    return 0;
}

int proto_decode_spawn(const struct proto_msg *m, struct proto_spawn *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->tag = "";
    out->cgroup = "";
    bool have_cgroup = false;
    size_t n_argv = 0, n_env = 0;
    uint32_t rows = 0, cols = 0, v, cgroup_fds = 0;
    bool have_rows = false, have_cols = false, have_cwd = false, have_tag = false;
    struct proto_iter it;
    struct proto_field f;
    int rc;
    proto_iter_init(&it, m->body, m->body_len);
    while ((rc = proto_next(&it, &f, err)) == 1) {
        const char *s;
        switch (f.tag) {
        case PROTO_T_TAG:
            if (once(&have_tag, &f, err) < 0 ||
                proto_field_str(&f, PROTO_MAX_STRING, &out->tag, err) < 0)
                goto bad;
            break;
        case PROTO_T_CGROUP:
            if (once(&have_cgroup, &f, err) < 0 || proto_field_str(&f, 32, &out->cgroup, err) < 0)
                goto bad;
            if (!cgroup_name_ok(out->cgroup)) {
                err_set(err, EINVAL, "protocol: bad cgroup name");
                goto bad;
            }
            break;
        case PROTO_T_ARG:
            if (proto_field_str(&f, PROTO_MAX_ARG, &s, err) < 0 ||
                push(&out->argv, &n_argv, s, err) < 0)
                goto bad;
            break;
        case PROTO_T_ENV:
            if (proto_field_str(&f, PROTO_MAX_ARG, &s, err) < 0)
                goto bad;
            if (!env_entry_ok(s)) {
                err_set(err, EINVAL, "protocol: environment entry %.40s is not NAME=VALUE", s);
                goto bad;
            }
            if (push(&out->envp, &n_env, s, err) < 0)
                goto bad;
            break;
        case PROTO_T_CWD:
            if (once(&have_cwd, &f, err) < 0 ||
                proto_field_str(&f, PROTO_MAX_STRING, &out->cwd, err) < 0)
                goto bad;
            if (out->cwd[0] != '/') {
                err_set(err, EINVAL, "protocol: working directory %.64s is not absolute",
                        out->cwd);
                goto bad;
            }
            break;
        case PROTO_T_USER:
            if (proto_field_u32_max(&f, 1, &v, err) < 0)
                goto bad;
            out->as_root = v;
            break;
        case PROTO_T_STDIN:
            if (proto_field_u32_max(&f, 1, &v, err) < 0)
                goto bad;
            out->stdin_pipe = v;
            break;
        case PROTO_T_ROWS:
            if (once(&have_rows, &f, err) < 0 || proto_field_u32_max(&f, 65535, &rows, err) < 0)
                goto bad;
            break;
        case PROTO_T_COLS:
            if (once(&have_cols, &f, err) < 0 || proto_field_u32_max(&f, 65535, &cols, err) < 0)
                goto bad;
            break;
        case PROTO_T_CGROUP_FDS:
            if (proto_field_u32(&f, &cgroup_fds, err) < 0)
                goto bad;
            break;
        default:
            err_set(err, EBADMSG, "protocol: field %u has no place in a spawn", f.tag);
            goto bad;
        }
    }
    if (rc < 0)
        goto bad;
    if (n_argv == 0 || !out->argv[0][0]) {
        err_set(err, EINVAL, "protocol: a spawn without a command");
        goto bad;
    }
    if (have_rows != have_cols || (have_rows && (rows == 0 || cols == 0))) {
        err_set(err, EINVAL, "protocol: a pty needs both rows and columns, each 1..65535");
        goto bad;
    }
    if (!out->envp && !(out->envp = calloc(1, sizeof *out->envp))) {
        err_set(err, ENOMEM, "protocol: spawn");
        goto bad;
    }
    out->pty = have_rows;
    out->rows = (unsigned short)rows;
    out->cols = (unsigned short)cols;
    out->has_cgroup_fd = cgroup_fds & 1;
    out->n_v1_fds = (cgroup_fds >> 8) & 0xff;
    if ((cgroup_fds & ~0xff01u) || out->n_v1_fds > PROTO_MAX_V1_FDS ||
        (out->has_cgroup_fd ? 1 : 0) + out->n_v1_fds != m->n_fds) {
        err_set(err, EBADMSG, "protocol: the spawn's cgroup fds (0x%x) do not match its %zu fds",
                cgroup_fds, m->n_fds);
        goto bad;
    }
    return 0;
bad:
    proto_spawn_free(out);
    return -1;
}

/* ---------- replies both init and its spawner send ---------- */

size_t proto_encode_spawn_reply(void *buf, size_t cap, uint32_t request_id, uint32_t cmd_id,
                                uint32_t pid, const int ends[4], int pass[4], size_t *n_pass)
{
    static const uint32_t bits[4] = {PROTO_FD_STDOUT, PROTO_FD_STDERR, PROTO_FD_STDIN,
                                     PROTO_FD_PTY};
    uint32_t mask = 0;
    *n_pass = 0;
    for (size_t i = 0; i < 4; i++)
        if (ends[i] >= 0) {
            pass[(*n_pass)++] = ends[i];
            mask |= bits[i];
        }
    struct proto_writer w;
    proto_begin(&w, buf, cap, PROTO_SPAWN_REPLY, request_id, *n_pass);
    proto_put_u32(&w, PROTO_T_CMD_ID, cmd_id);
    proto_put_u32(&w, PROTO_T_PID, pid);
    proto_put_u32(&w, PROTO_T_FDS, mask);
    return proto_finish(&w);
}

size_t proto_encode_error(void *buf, size_t cap, uint32_t request_id, int errnum,
                          const char *message)
{
    struct proto_writer w;
    proto_begin(&w, buf, cap, PROTO_ERROR, request_id, 0);
    proto_put_u32(&w, PROTO_T_ERRNO, (uint32_t)(errnum > 0 ? errnum : EIO));
    proto_put_str(&w, PROTO_T_MESSAGE, message);
    return proto_finish(&w);
}

/* ---------- a command (LIST_REPLY entry, EXITED) ---------- */

int proto_decode_command(const uint8_t *body, size_t len, struct proto_command *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->tag = "";
    out->cgroup = "";
    uint64_t seen = 0;
    struct proto_iter it;
    struct proto_field f;
    int rc;
    proto_iter_init(&it, body, len);
    while ((rc = proto_next(&it, &f, err)) == 1) {
        uint32_t v = 0;
        uint64_t bit = 1ull << f.tag; /* proto_next checked tag < PROTO_T_END <= 64 */
        if (seen & bit)
            return err_set(err, EBADMSG, "protocol: field %u twice in a command", f.tag);
        seen |= bit;
        switch (f.tag) {
        case PROTO_T_CMD_ID:
            if (proto_field_u32(&f, &out->cmd_id, err) < 0)
                return -1;
            break;
        case PROTO_T_PID:
            if (proto_field_u32(&f, &out->pid, err) < 0)
                return -1;
            break;
        case PROTO_T_TAG:
            if (proto_field_str(&f, PROTO_MAX_STRING, &out->tag, err) < 0)
                return -1;
            break;
        case PROTO_T_FDS: /* a SPAWN_REPLY's: its reader checks it against the fds */
            break;
        case PROTO_T_CGROUP:
            if (proto_field_str(&f, 32, &out->cgroup, err) < 0)
                return -1;
            if (out->cgroup[0] && !cgroup_name_ok(out->cgroup))
                return err_set(err, EBADMSG, "protocol: bad cgroup name");
            break;
        case PROTO_T_RUNNING:
            if (proto_field_u32(&f, &v, err) < 0)
                return -1;
            if (v > 1)
                return err_set(err, EBADMSG, "protocol: running is %u", v);
            out->running = v;
            break;
        case PROTO_T_EXIT_CODE:
            if (proto_field_i32(&f, &out->exit_code, err) < 0)
                return -1;
            if (out->exit_code < -1 || out->exit_code > 255)
                return err_set(err, EBADMSG, "protocol: exit code %d", out->exit_code);
            break;
        case PROTO_T_SIGNAL:
            if (proto_field_u32(&f, &out->signal, err) < 0)
                return -1;
            if (out->signal > 64)
                return err_set(err, EBADMSG, "protocol: signal %u", out->signal);
            break;
        default:
            return err_set(err, EBADMSG, "protocol: field %u has no place in a command", f.tag);
        }
    }
    if (rc < 0)
        return -1;
    if (!(seen & (1ull << PROTO_T_CMD_ID)) || out->cmd_id == 0)
        return err_set(err, EBADMSG, "protocol: a command without its id");
    return 0;
}

/* ---------- the socket ---------- */

int proto_send(int sock, const void *buf, size_t len, const int *fds, size_t n_fds)
{
    if (n_fds > PROTO_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
        struct cmsghdr align;
    } u;
    if (n_fds) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if ((size_t)n != len) {
        errno = EMSGSIZE;
        return -1;
    }
    return 0;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

ssize_t proto_recv(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds)
{
    *n_fds = 0;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    union {
        char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    int got[PROTO_MAX_FDS];
    size_t n_got = fd_take_rights(&mh, got, PROTO_MAX_FDS);
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        close_all(got, n_got);
        errno = EMSGSIZE;
        return -1;
    }
    /* An empty datagram reads as 0 bytes, like the end: only a peer that has hung up ends. */
    if (n == 0 && !fd_peer_hung_up(sock)) {
        close_all(got, n_got);
        errno = EBADMSG;
        return -1;
    }
    /* The header's count must match what came: a mismatch is a malformed message. */
    uint8_t declared = n >= PROTO_HEADER_SIZE ? ((uint8_t *)buf)[5] : 0;
    if (n > 0 && (declared != n_got || n_got > max_fds)) {
        close_all(got, n_got);
        errno = EBADMSG;
        return -1;
    }
    memcpy(fds, got, n_got * sizeof(int));
    *n_fds = n_got;
    return n;
}

void proto_socket_tune(int sock)
{
    int size = (int)PROTO_MAX_TO_INIT + 4096;
    if (setsockopt(sock, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
        setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
        setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}
