/* Commands in an agent sandbox, as a daemon runs them: jail_command_start, the SPAWN_REPLY with
 * the output pipes init hands over, the first byte, EXITED, jail_command_finish; and HELLO. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#define COMMAND_WAIT_MS 10000

const char *const bench_command_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=" JAIL_USER_HOME,
    "LANG=C.UTF-8",
    NULL,
};

static struct jail_agent_msg msg; /* about 80 KiB */

static void close_msg_fds(void)
{
    for (int i = 0; i < 4; i++)
        if (msg.fds[i] >= 0)
            close(msg.fds[i]);
}

/* Reads every message waiting; what concerns c is recorded, the rest dropped. */
static int pump(struct bench_sandbox *s, struct bench_command *c, err_t *err)
{
    for (;;) {
        int rc = jail_agent_recv(&s->jail, &msg, err);
        if (rc <= 0)
            return rc;
        switch (msg.type) {
        case PROTO_SPAWN_REPLY:
            if (msg.request_id != c->request_id || c->replied) {
                close_msg_fds();
                break;
            }
            c->replied = true;
            c->reply_ns = jail_now_ns();
            c->cmd_id = msg.command.cmd_id;
            c->out = msg.fds[0];
            c->err = msg.fds[1];
            /* Our loops poll, then read until EAGAIN. */
            if (c->out >= 0)
                fcntl(c->out, F_SETFL, O_NONBLOCK);
            c->in = msg.fds[2];
            c->pty = msg.fds[3];
            break;
        case PROTO_ERROR:
            if (msg.request_id == c->request_id)
                return err_set(err, msg.errnum, "init refused the command: %s", msg.message);
            break;
        case PROTO_EXITED:
            if (c->replied && msg.command.cmd_id == c->cmd_id) {
                c->exited = true;
                c->exited_ns = jail_now_ns();
                c->exit_code = msg.command.exit_code;
                c->signal = msg.command.signal;
            }
            break;
        default:
            break;
        }
    }
}

static int left_ms(uint64_t deadline)
{
    uint64_t now = jail_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now) / 1000000u) + 1;
}

int command_start(struct bench_sandbox *s, const char *const *argv, struct bench_command *c,
                  err_t *err)
{
    memset(c, 0, sizeof *c);
    c->out = c->err = c->in = c->pty = -1;
    c->request_id = s->next_request++;
    struct jail_command_spec spec = {.argv = argv, .envp = bench_command_env};
    /* Named before it exists: the signal handler removes it if we are stopped half-way. */
    snprintf(s->command_group, sizeof s->command_group, "c%u", (unsigned)c->request_id);
    c->start_ns = jail_now_ns();
    if (jail_command_start(&s->jail, &spec, c->request_id, c->group, err) < 0) {
        s->command_group[0] = '\0';
        return -1;
    }
    c->called_ns = jail_now_ns();
    return 0;
}

int command_wait_output(struct bench_sandbox *s, struct bench_command *c, bool want_byte,
                        char expect, err_t *err)
{
    uint64_t deadline = jail_now_ns() + COMMAND_WAIT_MS * 1000000ull;
    while (!c->replied) {
        if (pump(s, c, err) < 0)
            return -1;
        if (c->replied)
            break;
        if (left_ms(deadline) == 0)
            return err_set(err, ETIMEDOUT, "sandbox %s: no SPAWN_REPLY", s->name);
        struct pollfd p = {.fd = s->jail.control_fd, .events = POLLIN};
        poll(&p, 1, left_ms(deadline));
    }
    if (!want_byte)
        return 0;
    if (c->out < 0)
        return err_set(err, EBADMSG, "sandbox %s: the reply has no stdout", s->name);
    for (;;) {
        char byte;
        ssize_t r = read(c->out, &byte, 1);
        if (r == 1) {
            c->first_ns = jail_now_ns();
            return byte == expect
                       ? 0
                       : err_set(err, 0, "sandbox %s: the command printed '%c'", s->name, byte);
        }
        if (r == 0)
            return err_set(err, 0, "sandbox %s: the command printed nothing", s->name);
        if (errno != EAGAIN && errno != EINTR)
            return err_set(err, errno, "sandbox %s: read the command's stdout", s->name);
        if (left_ms(deadline) == 0)
            return err_set(err, ETIMEDOUT, "sandbox %s: no output", s->name);
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        poll(&p, 1, left_ms(deadline));
    }
}

static void close_ends(struct bench_command *c)
{
    int *ends[] = {&c->out, &c->err, &c->in, &c->pty};
    for (size_t i = 0; i < 4; i++) {
        if (*ends[i] >= 0)
            close(*ends[i]);
        *ends[i] = -1;
    }
}

int command_finish(struct bench_sandbox *s, struct bench_command *c, err_t *err)
{
    uint64_t deadline = jail_now_ns() + COMMAND_WAIT_MS * 1000000ull;
    int rc = -1;
    while (!c->exited || c->out >= 0) {
        if (pump(s, c, err) < 0)
            goto out;
        char buf[256];
        ssize_t r = c->out >= 0 ? read(c->out, buf, sizeof buf) : -1;
        if (r == 0) {
            close(c->out);
            c->out = -1;
        }
        if (c->exited && c->out < 0)
            break;
        if (left_ms(deadline) == 0) {
            err_set(err, ETIMEDOUT, "sandbox %s: the command did not end", s->name);
            goto out;
        }
        struct pollfd p[2] = {{.fd = s->jail.control_fd, .events = POLLIN},
                              {.fd = c->out, .events = POLLIN}};
        poll(p, c->out >= 0 ? 2 : 1, left_ms(deadline));
    }
    if (c->exit_code != 0 || c->signal != 0) {
        err_set(err, 0, "sandbox %s: the command ended with code %d, signal %u", s->name,
                (int)c->exit_code, (unsigned)c->signal);
        goto out;
    }
    struct proto_command end = {
        .cmd_id = c->cmd_id, .exit_code = c->exit_code, .signal = c->signal};
    struct verdict_facts facts = {0};
    struct verdict_usage usage = {0};
    /* EBUSY while its members are still leaving: a short timer, bounded. */
    while ((rc = jail_command_finish(&s->jail, c->group, &end, &facts, &usage, err)) < 0 &&
           err->errnum == EBUSY && left_ms(deadline) > 0)
        poll(NULL, 0, 1);
    if (rc == 0) {
        s->command_group[0] = '\0';
        c->done_ns = jail_now_ns();
    }
out:
    close_ends(c);
    return rc;
}

int sandbox_hello(struct bench_sandbox *s, err_t *err)
{
    uint32_t id = s->next_request++;
    if (jail_agent_request(&s->jail, PROTO_HELLO, id, 0, 0, false, err) < 0)
        return -1;
    uint64_t deadline = jail_now_ns() + COMMAND_WAIT_MS * 1000000ull;
    for (;;) {
        int rc = jail_agent_recv(&s->jail, &msg, err);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            close_msg_fds();
            if (msg.type == PROTO_HELLO_REPLY && msg.request_id == id)
                return 0;
            continue;
        }
        if (left_ms(deadline) == 0)
            return err_set(err, ETIMEDOUT, "sandbox %s: no HELLO_REPLY", s->name);
        struct pollfd p = {.fd = s->jail.control_fd, .events = POLLIN};
        poll(&p, 1, left_ms(deadline));
    }
}
