/* The control protocol's decoders (src/proto/proto.h) against hostile bytes. The first byte
 * chooses the mode: even, the rest is a whole datagram as it came off the socket; odd, the rest is
 * a message body framed with a valid header of type (byte 1) and fd count (byte 2), so that the
 * typed decoders see many well-formed headers. Checked: proto_parse accepts only a header whose
 * length is the datagram's; the field walk never leaves the body; a decoded SPAWN has a non-empty
 * argv of terminated strings inside the buffer, env entries NAME=VALUE, an absolute cwd, cgroup
 * fds that add up to the header's count; encoding it again and decoding that gives the same
 * command; a decoded command has an id, a sane exit code and signal. Version 2: a header's
 * version is never below its type's; a decoded file request has only what its type takes, its
 * paths absolute and inside the buffer, and encodes and decodes again to the same request; the
 * files, lists and watch events the host decodes are within their limits, strings inside the
 * buffer. */
#include <string.h>

#include "fuzz.h"
#include "proto/proto.h"
#include "proto/proto_files.h"

static uint8_t frame[PROTO_HEADER_SIZE + 70000];
static uint8_t again[PROTO_MAX_TO_INIT];

static bool inside(const void *p, const uint8_t *buf, size_t len)
{
    const uint8_t *c = p;
    return c >= buf && c < buf + len;
}

static void check_string(const char *s, const uint8_t *buf, size_t len)
{
    fuzz_assert(inside(s, buf, len));
    size_t n = strnlen(s, (size_t)(buf + len - (const uint8_t *)s));
    fuzz_assert((const uint8_t *)s + n < buf + len); /* terminated inside the buffer */
}

static void check_spawn(const struct proto_msg *m, const uint8_t *buf, size_t len)
{
    struct proto_spawn s;
    err_t err = {0}; /* a failure must say why: an empty message is one that did not */
    if (proto_decode_spawn(m, &s, &err) < 0) {
        fuzz_assert(err.msg[0] != '\0');
        fuzz_assert(s.argv == NULL && s.envp == NULL);
        return;
    }
    fuzz_assert(s.argv && s.argv[0] && s.argv[0][0]);
    size_t n_argv = 0;
    for (char **a = s.argv; *a; a++, n_argv++)
        check_string(*a, buf, len);
    fuzz_assert(n_argv <= PROTO_MAX_ARGS);
    for (char **e = s.envp; *e; e++) {
        check_string(*e, buf, len);
        fuzz_assert(strchr(*e, '=') && (*e)[0] != '=');
    }
    fuzz_assert(!s.cwd || s.cwd[0] == '/');
    fuzz_assert((s.has_cgroup_fd ? 1u : 0u) + s.n_v1_fds == m->n_fds);
    fuzz_assert(!s.pty || (s.rows > 0 && s.cols > 0));
    /* round trip */
    size_t n = proto_encode_spawn(again, sizeof again, m->request_id, &s);
    fuzz_assert(n > 0);
    struct proto_msg m2;
    struct proto_spawn s2;
    fuzz_assert(proto_parse(again, n, &m2, &err) == 0);
    fuzz_assert(proto_decode_spawn(&m2, &s2, &err) == 0);
    size_t k = 0;
    for (; s.argv[k]; k++)
        fuzz_assert(s2.argv[k] && strcmp(s.argv[k], s2.argv[k]) == 0);
    fuzz_assert(s2.argv[k] == NULL);
    fuzz_assert(s.as_root == s2.as_root && s.stdin_pipe == s2.stdin_pipe && s.pty == s2.pty);
    fuzz_assert(strcmp(s.tag, s2.tag) == 0 && strcmp(s.cgroup, s2.cgroup) == 0);
    fuzz_assert((!s.cwd && !s2.cwd) || (s.cwd && s2.cwd && strcmp(s.cwd, s2.cwd) == 0));
    proto_spawn_free(&s2);
    proto_spawn_free(&s);
}

static void check_path(const char *p, const uint8_t *buf, size_t len)
{
    check_string(p, buf, len);
    fuzz_assert(p[0] == '/' && strlen(p) <= PROTO_MAX_STRING);
}

static void check_file(const struct proto_file_entry *e, const uint8_t *buf, size_t len)
{
    check_path(e->path, buf, len);
    check_string(e->name, buf, len);
    fuzz_assert(e->name[0] && strlen(e->name) <= PROTO_MAX_NAME);
    fuzz_assert(!strchr(e->name, '/') || strcmp(e->name, "/") == 0);
    fuzz_assert(e->type < PROTO_FILE_TYPE_END && e->mode <= 07777 && e->level <= PROTO_MAX_DEPTH);
    fuzz_assert(!e->symlink[0] || e->type == PROTO_FILE_TYPE_SYMLINK);
    if (e->symlink[0])
        check_string(e->symlink, buf, len);
}

/* A decoded file request is what its type allows, and encodes and decodes again to the same. */
static void check_file_request(const struct proto_msg *m, const uint8_t *buf, size_t len)
{
    struct proto_file_request r, r2;
    err_t err = {0};
    if (proto_decode_file_request(m, &r, &err) < 0) {
        fuzz_assert(err.msg[0] != '\0');
        return;
    }
    fuzz_assert(r.type == m->type && m->n_fds == 0);
    if (r.type == PROTO_WATCH_STOP) {
        fuzz_assert(r.watch_id != 0 && !r.path);
    } else {
        check_path(r.path, buf, len);
    }
    fuzz_assert((r.type == PROTO_FILE_MOVE) == (r.to != NULL));
    if (r.to)
        check_path(r.to, buf, len);
    fuzz_assert(r.depth >= 1 && r.depth <= PROTO_MAX_DEPTH && r.mode <= 07777);
    fuzz_assert(!r.has_owner || (r.uid != UINT32_MAX && r.gid != UINT32_MAX));
    if (r.type != PROTO_FILE_WRITE && r.type != PROTO_FILE_MOVE)
        fuzz_assert(r.flags == 0);
    if (r.type == PROTO_FILE_MOVE)
        fuzz_assert(!(r.flags & ~(uint32_t)(PROTO_FILE_MAKE_PARENTS | PROTO_FILE_NO_REPLACE)));
    size_t n = proto_encode_file_request(again, sizeof again, m->request_id, &r);
    fuzz_assert(n > 0);
    struct proto_msg m2;
    fuzz_assert(proto_parse(again, n, &m2, &err) == 0);
    fuzz_assert(proto_decode_file_request(&m2, &r2, &err) == 0);
    fuzz_assert(r2.type == r.type && r2.as_root == r.as_root && r2.flags == r.flags &&
                r2.depth == r.depth && r2.follow == r.follow && r2.recursive == r.recursive &&
                r2.watch_id == r.watch_id && r2.has_owner == r.has_owner &&
                r2.has_mode == r.has_mode);
    fuzz_assert(!r.has_owner || (r2.uid == r.uid && r2.gid == r.gid));
    fuzz_assert(!r.has_mode || r2.mode == r.mode);
    fuzz_assert((!r.path && !r2.path) || (r.path && r2.path && strcmp(r.path, r2.path) == 0));
    fuzz_assert((!r.to && !r2.to) || (r.to && r2.to && strcmp(r.to, r2.to) == 0));
}

static struct proto_file_entry files[PROTO_MAX_FILES];
static struct proto_watch_event events[PROTO_MAX_EVENTS];

/* The answers and events the host decodes. */
static void check_file_answers(const struct proto_msg *m, const uint8_t *buf, size_t len)
{
    err_t err;
    uint32_t access = 7, watch_id;
    size_t n;
    bool more;
    if (proto_decode_file_reply(m, &files[0], &access, &err) == 0) {
        fuzz_assert(m->type == PROTO_FILE_INFO || m->type == PROTO_FILE_OPENED);
        fuzz_assert(m->n_fds == (m->type == PROTO_FILE_OPENED ? 1u : 0u));
        fuzz_assert(m->type != PROTO_FILE_OPENED || access <= 1);
        check_file(&files[0], buf, len);
    }
    if (proto_decode_file_list(m, files, PROTO_MAX_FILES, &n, &more, &err) == 0) {
        fuzz_assert(m->type == PROTO_FILE_LIST_REPLY && n <= PROTO_MAX_FILES);
        for (size_t i = 0; i < n; i++)
            check_file(&files[i], buf, len);
    }
    if (proto_decode_watch_events(m, &watch_id, events, PROTO_MAX_EVENTS, &n, &err) == 0) {
        fuzz_assert(m->type == PROTO_WATCH_EVENTS && watch_id != 0 && n <= PROTO_MAX_EVENTS);
        for (size_t i = 0; i < n; i++) {
            fuzz_assert(events[i].kind < PROTO_WATCH_KIND_END);
            check_path(events[i].path, buf, len);
            if (events[i].has_file)
                check_file(&events[i].file, buf, len);
        }
    }
    struct proto_file_entry e;
    if (proto_decode_file(m->body, m->body_len, &e, &err) == 0)
        check_file(&e, buf, len);
}

static void check_message(const uint8_t *buf, size_t len)
{
    struct proto_msg m;
    err_t err = {0};
    if (proto_parse(buf, len, &m, &err) < 0) {
        fuzz_assert(err.msg[0] != '\0');
        return;
    }
    fuzz_assert(m.body_len == len - PROTO_HEADER_SIZE && m.n_fds <= PROTO_MAX_FDS);
    fuzz_assert(m.type > 0 && m.type < PROTO_TYPE_END);
    fuzz_assert(buf[4] >= proto_type_version(m.type) && buf[4] <= PROTO_VERSION);
    struct proto_iter it;
    struct proto_field f;
    int rc;
    proto_iter_init(&it, m.body, m.body_len);
    while ((rc = proto_next(&it, &f, &err)) == 1) {
        fuzz_assert(f.data >= m.body && f.data + f.len <= m.body + m.body_len);
        fuzz_assert(f.tag > 0 && f.tag < PROTO_T_END);
        const char *s;
        if (proto_field_str(&f, PROTO_MAX_STRING, &s, &err) == 0)
            check_string(s, buf, len);
    }
    if (m.type == PROTO_SPAWN)
        check_spawn(&m, buf, len);
    if (proto_is_file_request(m.type))
        check_file_request(&m, buf, len);
    else
        fuzz_assert(proto_decode_file_request(&m, &(struct proto_file_request){0}, &err) < 0);
    check_file_answers(&m, buf, len);
    struct proto_command c;
    if (proto_decode_command(m.body, m.body_len, &c, &err) == 0) {
        fuzz_assert(c.cmd_id != 0 && c.exit_code >= -1 && c.exit_code <= 255 && c.signal <= 64);
        if (c.tag[0])
            check_string(c.tag, buf, len);
    }
    uint32_t v;
    const char *str;
    proto_get_u32(&m, PROTO_T_CMD_ID, &v, &err);
    if (proto_get_str(&m, PROTO_T_MESSAGE, PROTO_MAX_STRING, &str, &err) == 1 && str)
        check_string(str, buf, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if ((data[0] & 1) == 0) {
        check_message(data + 1, size - 1);
        return 0;
    }
    if (size < 3 || size - 3 > sizeof frame - PROTO_HEADER_SIZE)
        return 0;
    size_t body = size - 3;
    uint32_t magic = PROTO_MAGIC, id = 7, len = (uint32_t)body;
    uint16_t type = data[1] % (PROTO_TYPE_END + 1);
    memcpy(frame, &magic, 4);
    frame[4] = PROTO_VERSION;
    frame[5] = data[2] % (PROTO_MAX_FDS + 2);
    memcpy(frame + 6, &type, 2);
    memcpy(frame + 8, &id, 4);
    memcpy(frame + 12, &len, 4);
    memcpy(frame + PROTO_HEADER_SIZE, data + 3, body);
    check_message(frame, PROTO_HEADER_SIZE + body);
    return 0;
}
