/* The codec of the sudo messages (proto_sudo.h, README.md "The sudo socket"). */
#include "proto/proto_sudo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fds.h"

size_t proto_encode_sudo(void *buf, size_t cap, enum proto_type type, uint32_t request_id,
                         const struct proto_sudo *s)
{
    struct proto_writer w;
    proto_begin(&w, buf, cap, type, request_id, PROTO_SUDO_FDS);
    for (char **a = s->argv; a && *a; a++)
        proto_put_str(&w, PROTO_T_ARG, *a);
    for (char **e = s->envp; e && *e; e++)
        proto_put_str(&w, PROTO_T_ENV, *e);
    if (s->cwd)
        proto_put_str(&w, PROTO_T_CWD, s->cwd);
    proto_put_u32(&w, PROTO_T_USER, s->as_root ? 1 : 0);
    if (type == PROTO_SUDO_SPAWN)
        proto_put_u32(&w, PROTO_T_PID, s->caller_pid);
    return proto_finish(&w);
}

void proto_sudo_free(struct proto_sudo *s)
{
    free(s->argv);
    free(s->envp);
    s->argv = s->envp = NULL;
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

/* Appends s to a NULL-terminated array, grown by doubling. */
static int push(char ***arr, size_t *n, const char *s, err_t *err)
{
    if (*n >= PROTO_MAX_ARGS)
        return err_set(err, E2BIG, "protocol: more than %u entries", PROTO_MAX_ARGS);
    if (!*arr || ((*n + 1) & *n) == 0) {
        char **more = realloc(*arr, (2 * (*n + 1) + 1) * sizeof *more);
        if (!more)
            return err_set(err, ENOMEM, "protocol: sudo");
        *arr = more;
    }
    (*arr)[(*n)++] = (char *)s;
    (*arr)[*n] = NULL;
    return 0;
}

int proto_decode_sudo(const struct proto_msg *m, struct proto_sudo *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    if (m->type != PROTO_SUDO && m->type != PROTO_SUDO_SPAWN)
        return err_set(err, EBADMSG, "protocol: message %u is not a sudo request", m->type);
    bool spawn = m->type == PROTO_SUDO_SPAWN, have_user = false, have_cwd = false, have_pid = false;
    size_t n_argv = 0, n_env = 0;
    uint32_t v;
    struct proto_iter it;
    struct proto_field f;
    int rc;
    proto_iter_init(&it, m->body, m->body_len);
    while ((rc = proto_next(&it, &f, err)) == 1) {
        const char *s;
        switch (f.tag) {
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
            if (have_cwd) {
                err_set(err, EBADMSG, "protocol: field %u twice", f.tag);
                goto bad;
            }
            have_cwd = true;
            if (proto_field_str(&f, PROTO_MAX_STRING, &out->cwd, err) < 0)
                goto bad;
            if (out->cwd[0] != '/') {
                err_set(err, EINVAL, "protocol: working directory %.64s is not absolute", out->cwd);
                goto bad;
            }
            break;
        case PROTO_T_USER:
            if (have_user) {
                err_set(err, EBADMSG, "protocol: field %u twice", f.tag);
                goto bad;
            }
            have_user = true;
            if (proto_field_u32_max(&f, 1, &v, err) < 0)
                goto bad;
            out->as_root = v == 1;
            break;
        case PROTO_T_PID:
            /* Only init says who asked, from the kernel's credentials; a client's claim is
             * refused, never read. */
            if (!spawn || have_pid) {
                err_set(err, EBADMSG, "protocol: a PID has no place here");
                goto bad;
            }
            have_pid = true;
            if (proto_field_u32(&f, &out->caller_pid, err) < 0)
                goto bad;
            break;
        default:
            err_set(err, EBADMSG, "protocol: field %u has no place in a sudo request", f.tag);
            goto bad;
        }
    }
    if (rc < 0)
        goto bad;
    if (n_argv == 0 || !out->argv[0][0]) {
        err_set(err, EINVAL, "protocol: a sudo request without a command");
        goto bad;
    }
    if (!have_user) {
        err_set(err, EINVAL, "protocol: a sudo request without its USER");
        goto bad;
    }
    if (spawn && (!have_pid || out->caller_pid <= 1 || out->caller_pid > (1u << 22))) {
        err_set(err, EINVAL, "protocol: a sudo spawn without the caller's pid");
        goto bad;
    }
    if (m->n_fds != PROTO_SUDO_FDS) {
        err_set(err, EBADMSG, "protocol: a sudo request takes %d fds, not %zu", PROTO_SUDO_FDS,
                m->n_fds);
        goto bad;
    }
    if (!out->envp && !(out->envp = calloc(1, sizeof *out->envp))) {
        err_set(err, ENOMEM, "protocol: sudo");
        goto bad;
    }
    return 0;
bad:
    proto_sudo_free(out);
    return -1;
}

ssize_t proto_recv_creds(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds,
                         struct ucred *cred)
{
    *n_fds = 0;
    memset(cred, 0, sizeof *cred);
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
            c->cmsg_len == CMSG_LEN(sizeof *cred))
            memcpy(cred, CMSG_DATA(c), sizeof *cred);
    int got[PROTO_MAX_FDS];
    size_t n_got = fd_take_rights(&mh, got, PROTO_MAX_FDS);
    uint8_t declared = n >= PROTO_HEADER_SIZE ? ((uint8_t *)buf)[5] : 0;
    bool bad = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (n == 0 && !fd_peer_hung_up(sock)) ||
               (n > 0 && (declared != n_got || n_got > max_fds));
    if (bad) {
        int e = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? EMSGSIZE : EBADMSG;
        for (size_t i = 0; i < n_got; i++)
            close(got[i]);
        errno = e;
        return -1;
    }
    memcpy(fds, got, n_got * sizeof(int));
    *n_fds = n_got;
    return n;
}
