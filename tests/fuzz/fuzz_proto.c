/* The control protocol's decoders (src/proto/proto.h) against hostile bytes. The first byte
 * chooses the mode: even, the rest is a whole datagram as it came off the socket; odd, the rest is
 * a message body framed with a valid header of type (byte 1) and fd count (byte 2), so that the
 * typed decoders see many well-formed headers. Checked: proto_parse accepts only a header whose
 * length is the datagram's; the field walk never leaves the body; a decoded SPAWN has a non-empty
 * argv of terminated strings inside the buffer, env entries NAME=VALUE, an absolute cwd, cgroup
 * fds that add up to the header's count; encoding it again and decoding that gives the same
 * command; a decoded command has an id, a sane exit code and signal. */
#include <string.h>

#include "fuzz.h"
#include "proto/proto.h"

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
    err_t err;
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

static void check_message(const uint8_t *buf, size_t len)
{
    struct proto_msg m;
    err_t err;
    if (proto_parse(buf, len, &m, &err) < 0) {
        fuzz_assert(err.msg[0] != '\0');
        return;
    }
    fuzz_assert(m.body_len == len - PROTO_HEADER_SIZE && m.n_fds <= PROTO_MAX_FDS);
    fuzz_assert(m.type > 0 && m.type < PROTO_TYPE_END);
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
