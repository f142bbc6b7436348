/* The sudo messages' decoder (src/proto/proto_sudo.h) against hostile bytes: what any process in
 * a sandbox can send to init's sudo socket, and what init sends its spawner. The first byte
 * chooses the mode: even, the rest is a whole datagram; odd, the rest is a body framed with a
 * valid header of SUDO or SUDO_SPAWN (byte 1) and an fd count (byte 2). Checked: a decoded
 * request is only a SUDO or a SUDO_SPAWN with exactly three fds, a non-empty argv of strings
 * terminated inside the buffer, NAME=VALUE env entries, an absolute cwd or none; a PID only in a
 * SUDO_SPAWN, and there above 1; it encodes and decodes again to the same request; a refusal says
 * why and leaves nothing allocated. */
#include <string.h>

#include "fuzz.h"
#include "proto/proto_sudo.h"

static uint8_t frame[PROTO_HEADER_SIZE + 70000];
static uint8_t again[PROTO_MAX_TO_INIT];

static void check_string(const char *s, const uint8_t *buf, size_t len)
{
    const uint8_t *c = (const uint8_t *)s;
    fuzz_assert(c >= buf && c < buf + len);
    fuzz_assert(memchr(c, '\0', (size_t)(buf + len - c)) != NULL);
}

static size_t count(char **v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

static void check_message(const uint8_t *buf, size_t len)
{
    struct proto_msg m;
    err_t err = {0};
    if (proto_parse(buf, len, &m, &err) < 0)
        return;
    struct proto_sudo s;
    if (proto_decode_sudo(&m, &s, &err) < 0) {
        fuzz_assert(err.msg[0] != '\0');
        fuzz_assert(s.argv == NULL && s.envp == NULL);
        return;
    }
    fuzz_assert(m.type == PROTO_SUDO || m.type == PROTO_SUDO_SPAWN);
    fuzz_assert(m.n_fds == PROTO_SUDO_FDS);
    fuzz_assert(s.argv && s.argv[0] && s.argv[0][0] && s.envp);
    for (char **a = s.argv; *a; a++)
        check_string(*a, buf, len);
    for (char **e = s.envp; *e; e++) {
        check_string(*e, buf, len);
        fuzz_assert(strchr(*e, '=') && (*e)[0] != '=');
    }
    fuzz_assert(count(s.argv) <= PROTO_MAX_ARGS && count(s.envp) <= PROTO_MAX_ARGS);
    fuzz_assert(!s.cwd || s.cwd[0] == '/');
    if (m.type == PROTO_SUDO)
        fuzz_assert(s.caller_pid == 0);
    else
        fuzz_assert(s.caller_pid > 1);
    /* round trip */
    size_t n = proto_encode_sudo(again, sizeof again, m.type, m.request_id, &s);
    fuzz_assert(n > 0);
    struct proto_msg m2;
    struct proto_sudo s2;
    fuzz_assert(proto_parse(again, n, &m2, &err) == 0 && proto_decode_sudo(&m2, &s2, &err) == 0);
    fuzz_assert(count(s2.argv) == count(s.argv) && count(s2.envp) == count(s.envp));
    for (size_t i = 0; s.argv[i]; i++)
        fuzz_assert(strcmp(s.argv[i], s2.argv[i]) == 0);
    for (size_t i = 0; s.envp[i]; i++)
        fuzz_assert(strcmp(s.envp[i], s2.envp[i]) == 0);
    fuzz_assert((!s.cwd && !s2.cwd) || (s.cwd && s2.cwd && strcmp(s.cwd, s2.cwd) == 0));
    fuzz_assert(s.as_root == s2.as_root && s.caller_pid == s2.caller_pid);
    proto_sudo_free(&s2);
    proto_sudo_free(&s);
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
    uint16_t type = (data[1] & 1) ? PROTO_SUDO_SPAWN : PROTO_SUDO;
    memcpy(frame, &magic, 4);
    frame[4] = PROTO_VERSION;
    frame[5] = (data[2] & 7) == 0 ? (uint8_t)(data[2] >> 3) % (PROTO_MAX_FDS + 2) : PROTO_SUDO_FDS;
    memcpy(frame + 6, &type, 2);
    memcpy(frame + 8, &id, 4);
    memcpy(frame + 12, &len, 4);
    memcpy(frame + PROTO_HEADER_SIZE, data + 3, body);
    check_message(frame, PROTO_HEADER_SIZE + body);
    return 0;
}
