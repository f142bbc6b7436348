/* The host's side of commands in an agent sandbox (command.h). */
#include "jail/command.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/parse.h"

#define SPAWN_BUF PROTO_MAX_TO_INIT

int jail_agent_send(struct jail *jail, const void *buf, size_t len, const int *fds, size_t n_fds,
                    err_t *err)
{
    if (len == 0)
        return err_set(err, E2BIG, "sandbox %s: the request does not fit in a message", jail->name);
    if (proto_send(jail->control_fd, buf, len, fds, n_fds) < 0)
        return err_set(err, errno, "sandbox %s: send to init", jail->name);
    return 0;
}

int jail_command_group_open(struct jail *jail, const char *group, struct cgroup **out, err_t *err)
{
    char path[CGROUP_PATH_MAX + 1];
    if (!jail->cgroup)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    int n = snprintf(path, sizeof path, "%s/%s", cgroup_path(jail->cgroup), group);
    if (n < 0 || (size_t)n >= sizeof path)
        return err_set(err, ENAMETOOLONG, "sandbox %s: command group %s", jail->name, group);
    return cgroup_open(cgroup_host_of(jail->cgroup), path, 0, out, err);
}

static void note_group(const char *name, void *user)
{
    uint32_t *first_free = user;
    uint64_t n;
    if (name[0] == 'c' && parse_count(name + 1, 1, UINT32_MAX - 1, &n) == 0 && n + 1 > *first_free)
        *first_free = (uint32_t)n + 1;
}

int jail_command_first_free_id(struct jail *jail, uint32_t *id, err_t *err)
{
    *id = 1;
    if (!jail->cgroup)
        return 0;
    if (cgroup_for_each_child(jail->cgroup, note_group, id, err) < 0)
        return err_wrap(err, "sandbox %s: its command groups", jail->name);
    return 0;
}

int jail_command_start(struct jail *jail, const struct jail_command_spec *spec, uint32_t request_id,
                       char group[JAIL_COMMAND_GROUP_MAX + 1], err_t *err)
{
    /* The request first: a bad one is refused whatever state the sandbox is in. */
    if (!spec->argv || !spec->argv[0])
        return err_set(err, EINVAL, "sandbox %s: a command needs argv", jail->name);
    if (jail_check_length(spec->cwd, JAIL_MAX_SANDBOX_PATH, err, "cwd") < 0 ||
        jail_check_length(spec->tag, JAIL_COMMAND_MAX_TAG, err, "tag") < 0 ||
        jail_check_args(spec->argv, spec->envp, JAIL_MAX_ARGS, err) < 0)
        return err_wrap(err, "sandbox %s: command", jail->name);
    if (!jail->cgroup || jail->control_fd < 0)
        return err_set(err, ESRCH, "sandbox %s: not running", jail->name);
    snprintf(group, JAIL_COMMAND_GROUP_MAX + 1, "c%u", (unsigned)request_id); /* 11 at most */
    struct cgroup *cg = NULL;
    uid_t root = jail->host_uid_base;
    if (cgroup_create(cgroup_host_of(jail->cgroup), jail->cgroup, group, NULL, CGROUP_OOM_GROUP,
                      &cg, err) < 0)
        return err_wrap(err, "sandbox %s", jail->name);
    int fds[1 + PROTO_MAX_V1_FDS], n_fds = 0;
    size_t n_v1 = 0;
    cleanup_free uint8_t *buf = NULL;
    bool has_dir = false;
    int rc = -1;
    if (cgroup_delegate_procs(cg, root, root, err) < 0)
        goto out;
    if (cgroup_mode_of(cg) != CGROUP_MODE_V1) {
        if ((fds[0] = cgroup_open_dir_fd(cg, err)) < 0)
            goto out;
        n_fds = 1;
        has_dir = true;
    }
    if (cgroup_self_attach_open(cg, fds + n_fds, PROTO_MAX_V1_FDS, &n_v1, err) < 0)
        goto out;
    n_fds += (int)n_v1;
    struct proto_spawn s = {.tag = spec->tag ? spec->tag : "",
                            .argv = (char **)spec->argv,
                            .envp = (char **)spec->envp,
                            .cwd = spec->cwd,
                            .as_root = spec->as_root,
                            .stdin_pipe = spec->stdin_pipe,
                            .pty = spec->pty,
                            .rows = spec->rows,
                            .cols = spec->cols,
                            .has_cgroup_fd = has_dir,
                            .n_v1_fds = (unsigned)n_v1,
                            .cgroup = group};
    buf = malloc(SPAWN_BUF);
    if (!buf) {
        err_set(err, ENOMEM, "sandbox %s: spawn", jail->name);
        goto out;
    }
    rc = jail_agent_send(jail, buf, proto_encode_spawn(buf, SPAWN_BUF, request_id, &s), fds,
                         (size_t)n_fds, err);
out:
    for (int i = 0; i < n_fds; i++)
        close(fds[i]);
    if (rc < 0)
        cgroup_remove(cg, NULL);
    cgroup_free(cg);
    return rc;
}

int jail_agent_request(struct jail *jail, enum proto_type type, uint32_t request_id,
                       uint32_t cmd_id, uint32_t arg, bool group, err_t *err)
{
    uint8_t buf[128];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, type, request_id, 0);
    if (type == PROTO_HELLO)
        proto_put_u32(&w, PROTO_T_VERSION, PROTO_VERSION);
    else if (type != PROTO_LIST)
        proto_put_u32(&w, PROTO_T_CMD_ID, cmd_id);
    if (type == PROTO_SIGNAL) {
        proto_put_u32(&w, PROTO_T_SIGNAL, arg);
        proto_put_u32(&w, PROTO_T_GROUP, group ? 1 : 0);
    }
    return jail_agent_send(jail, buf, proto_finish(&w), NULL, 0, err);
}

int jail_agent_stdin_write(struct jail *jail, uint32_t request_id, uint32_t cmd_id,
                           const void *data, size_t len, err_t *err)
{
    if (len > 65536)
        return err_set(err, E2BIG, "stdin write of %zu bytes, at most 64 KiB", len);
    uint8_t buf[65536 + 64];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_STDIN_WRITE, request_id, 0);
    proto_put_u32(&w, PROTO_T_CMD_ID, cmd_id);
    proto_put_bytes(&w, PROTO_T_DATA, data, len);
    return jail_agent_send(jail, buf, proto_finish(&w), NULL, 0, err);
}

int jail_agent_resize(struct jail *jail, uint32_t request_id, uint32_t cmd_id, unsigned short rows,
                      unsigned short cols, err_t *err)
{
    uint8_t buf[128];
    struct proto_writer w;
    proto_begin(&w, buf, sizeof buf, PROTO_RESIZE, request_id, 0);
    proto_put_u32(&w, PROTO_T_CMD_ID, cmd_id);
    proto_put_u32(&w, PROTO_T_ROWS, rows);
    proto_put_u32(&w, PROTO_T_COLS, cols);
    return jail_agent_send(jail, buf, proto_finish(&w), NULL, 0, err);
}

/* SPAWN_REPLY: the ends, in PROTO_FD_* order, exactly as many as the mask says. */
static int take_fds(struct jail_agent_msg *out, const struct proto_msg *m, int *fds, size_t n_fds,
                    err_t *err)
{
    uint32_t mask;
    if (proto_get_u32(m, PROTO_T_FDS, &mask, err) < 0)
        return -1;
    if (mask & ~0xfu || (size_t)__builtin_popcount(mask) != n_fds ||
        ((mask & PROTO_FD_PTY) && (mask & (PROTO_FD_STDOUT | PROTO_FD_STDERR | PROTO_FD_STDIN))))
        return err_set(err, EBADMSG, "protocol: the reply's ends (0x%x) do not match its %zu fds",
                       mask, n_fds);
    size_t k = 0;
    for (int i = 0; i < 4; i++)
        out->fds[i] = (mask & (1u << i)) ? fds[k++] : -1;
    out->fds_mask = mask;
    return 0;
}

int jail_agent_recv(struct jail *jail, struct jail_agent_msg *out, err_t *err)
{
    int fds[PROTO_MAX_FDS];
    size_t n_fds = 0;
    memset(out, 0, offsetof(struct jail_agent_msg, raw));
    for (int i = 0; i < 4; i++)
        out->fds[i] = -1;
    out->files.fd = -1;
    ssize_t n = proto_recv(jail->control_fd, out->raw, sizeof out->raw, fds, PROTO_MAX_FDS, &n_fds);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n < 0)
        return err_set(err, errno, "sandbox %s: from init", jail->name);
    if (n == 0)
        return err_set(err, EPIPE, "sandbox %s: init closed the channel", jail->name);
    struct proto_msg m;
    int rc = -1;
    if (proto_parse(out->raw, (size_t)n, &m, err) < 0)
        goto out;
    out->type = m.type;
    out->request_id = m.request_id;
    switch (m.type) {
    case PROTO_SPAWN_REPLY:
        if (proto_decode_command(m.body, m.body_len, &out->command, err) < 0 ||
            take_fds(out, &m, fds, n_fds, err) < 0)
            goto out;
        n_fds = 0;
        break;
    case PROTO_EXITED:
        if (proto_decode_command(m.body, m.body_len, &out->command, err) < 0)
            goto out;
        break;
    case PROTO_ERROR: {
        uint32_t e = EIO;
        const char *text = NULL;
        if (proto_get_u32(&m, PROTO_T_ERRNO, &e, err) < 0 ||
            proto_get_str(&m, PROTO_T_MESSAGE, PROTO_MAX_STRING, &text, err) < 0)
            goto out;
        out->errnum = e > 0 && e < 4096 ? (int)e : EIO;
        snprintf(out->message, sizeof out->message, "%s", text ? text : "");
        break;
    }
    case PROTO_OK: {
        uint32_t created = 0;
        proto_get_u32(&m, PROTO_T_WRITTEN, &out->written, NULL);
        proto_get_u32(&m, PROTO_T_WATCH_ID, &out->files.watch_id, NULL);
        proto_get_u32(&m, PROTO_T_CREATED, &created, NULL);
        out->files.created = created == 1;
        break;
    }
    case PROTO_FILE_INFO:
    case PROTO_FILE_OPENED:
    case PROTO_FILE_LIST_REPLY:
    case PROTO_WATCH_EVENTS:
    case PROTO_WATCH_ENDED:
        if (jail_files_decode(jail, &m, fds, &n_fds, out, err) < 0)
            goto out;
        break;
    case PROTO_HELLO_REPLY:
        if (proto_get_u32(&m, PROTO_T_VERSION, &out->version, err) < 0)
            goto out;
        break;
    case PROTO_LIST_REPLY: {
        struct proto_iter it;
        struct proto_field f;
        int r;
        proto_iter_init(&it, m.body, m.body_len);
        while ((r = proto_next(&it, &f, err)) == 1) {
            if (f.tag == PROTO_T_MORE) {
                uint32_t more;
                if (proto_field_u32(&f, &more, err) < 0)
                    goto out;
                out->more = more != 0;
            } else if (f.tag == PROTO_T_ENTRY && out->n_entries < PROTO_MAX_ENTRIES) {
                if (proto_decode_command(f.data, f.len, &out->entries[out->n_entries++], err) < 0)
                    goto out;
            } else {
                err_set(err, EBADMSG, "protocol: field %u in a list", f.tag);
                goto out;
            }
        }
        if (r < 0)
            goto out;
        break;
    }
    default:
        err_set(err, EBADMSG, "protocol: init sent message type %u", m.type);
        goto out;
    }
    if (n_fds) {
        err_set(err, EBADMSG, "protocol: fds with message type %u", m.type);
        goto out;
    }
    rc = 1;
out:
    for (size_t i = 0; i < n_fds; i++)
        close(fds[i]);
    if (rc < 0)
        err_wrap(err, "sandbox %s", jail->name);
    return rc;
}

int jail_command_kill_tree(struct jail *jail, const char *group, err_t *err)
{
    struct cgroup *cg;
    if (jail_command_group_open(jail, group, &cg, err) < 0)
        return -1;
    int rc = cgroup_kill_start(cg, NULL, err);
    cgroup_free(cg);
    return rc;
}

int jail_command_finish(struct jail *jail, const char *group, const struct proto_command *end,
                        struct verdict_facts *facts, struct verdict_usage *usage, err_t *err)
{
    struct cgroup *cg;
    if (jail_command_group_open(jail, group, &cg, err) < 0)
        return -1;
    struct cgroup_stats start = {0}, stats;
    int rc = cgroup_read_stats(cg, &stats, err);
    facts->payload_ended = true;
    facts->exit_code = end->exit_code;
    facts->signal = (int)end->signal;
    if (rc == 0)
        verdict_account(facts, &start, &stats, usage);
    /* What it left behind (a daemon it forked) goes with its group. */
    bool populated = false;
    if (rc == 0 && cgroup_populated(cg, &populated, err) == 0 && populated)
        cgroup_kill_start(cg, NULL, NULL);
    if (rc == 0)
        rc = cgroup_remove(cg, err);
    cgroup_free(cg);
    return rc;
}
