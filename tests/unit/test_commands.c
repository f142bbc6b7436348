/* The agent's table of commands (src/init/commands.c): ids, bounds, ended records, eviction. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/commands.h"
#include "tap.h"

static int count_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

int main(void)
{
    static struct commands t;
    commands_init(&t);
    struct command_entry *a = commands_add(&t);
    ok(a && a->id == 1 && a->running, "the first command gets id 1");
    uint32_t a_id = a->id;
    struct command_entry *b = commands_add(&t);
    ok(b && b->id == 2, "the next gets id 2");
    b->pid = 42;
    ok(commands_find_pid(&t, 42) == b, "found by pid while it runs");
    ok(commands_find(&t, 0) == NULL, "id 0 is no command");
    ok(commands_forget(&t, b->id) < 0 && errno == EBUSY, "a running command cannot be forgotten");
    int p[2];
    ok(pipe(p) == 0, "pipe");
    int before = count_fds();
    b->fds.stdin_w = p[1];
    b->fds.stdout_r = p[0];
    commands_ended(&t, b, W_EXITCODE(3, 0));
    ok(!b->running && b->exit_code == 3 && b->signal == 0, "ended: exit 3");
    ok(b->fds.stdin_w == -1 && b->fds.stdout_r == p[0], "its stdin closes, its output stays");
    ok(commands_find_pid(&t, 42) == NULL, "an ended command is not found by pid");
    uint32_t b_id = b->id;
    ok(commands_forget(&t, b_id) == 0, "forgotten");
    is_u64((uint64_t)count_fds(), (uint64_t)before - 2, "its fds closed");
    ok(commands_find(&t, b_id) == NULL, "and gone");
    ok(commands_forget(&t, b_id) < 0 && errno == ESRCH, "forgetting it again: ESRCH");
    a = commands_find(&t, a_id);
    commands_ended(&t, a, 9);
    ok(a->exit_code == -1 && a->signal == 9, "killed by signal 9");

    /* the bound on running commands */
    commands_init(&t);
    unsigned n = 0;
    while (commands_add(&t))
        n++;
    is_u64(n, JAIL_MAX_COMMANDS, "at most JAIL_MAX_COMMANDS run at once");
    /* ended records beyond the bound evict the oldest ended one */
    for (uint32_t id = 1; id <= JAIL_MAX_COMMANDS; id++)
        commands_ended(&t, commands_find(&t, id), 0);
    unsigned added = 0;
    for (unsigned i = 0; i < JAIL_MAX_COMMANDS; i++) {
        struct command_entry *e = commands_add(&t);
        if (!e)
            break;
        added++;
        commands_ended(&t, e, 0);
    }
    is_u64(added, JAIL_MAX_COMMANDS, "ended commands never block new ones");
    ok(t.ended <= COMMANDS_MAX_ENDED + JAIL_MAX_COMMANDS, "the ended records stay bounded");
    ok(commands_find(&t, 1) == NULL, "the oldest ended record went first");
    free(t.entries);
    return done_testing();
}
