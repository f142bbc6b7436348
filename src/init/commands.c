/* The agent's table of commands (commands.h). */
#include "init/commands.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define COMMANDS_CAP (JAIL_MAX_COMMANDS + COMMANDS_MAX_ENDED)

void commands_init(struct commands *t)
{
    memset(t, 0, sizeof *t);
    t->next_id = 1;
}

/* Room for more entries: double, up to the bound. */
static int grow(struct commands *t)
{
    if (t->cap >= COMMANDS_CAP) {
        errno = EAGAIN;
        return -1;
    }
    size_t cap = t->cap ? t->cap * 2 : 16;
    if (cap > COMMANDS_CAP)
        cap = COMMANDS_CAP;
    struct command_entry *more = realloc(t->entries, cap * sizeof *more);
    if (!more)
        return -1;
    for (size_t i = t->cap; i < cap; i++) {
        memset(&more[i], 0, sizeof more[i]);
        more[i].fds = (struct command_fds){-1, -1, -1, -1};
    }
    t->entries = more;
    t->cap = cap;
    return 0;
}

static void entry_clear(struct command_entry *e)
{
    command_fds_close(&e->fds);
    memset(e, 0, sizeof *e);
    e->fds = (struct command_fds){-1, -1, -1, -1};
}

/* The ended command that ended first: it makes room for a newer one. */
static struct command_entry *oldest_ended(struct commands *t)
{
    struct command_entry *oldest = NULL;
    for (size_t i = 0; i < t->cap; i++) {
        struct command_entry *e = &t->entries[i];
        if (e->id && !e->running && (!oldest || e->ended_seq < oldest->ended_seq))
            oldest = e;
    }
    return oldest;
}

struct command_entry *commands_add(struct commands *t)
{
    if (t->running >= JAIL_MAX_COMMANDS)
        return NULL;
    struct command_entry *free_entry = NULL;
    for (size_t i = 0; i < t->cap && !free_entry; i++)
        if (!t->entries[i].id)
            free_entry = &t->entries[i];
    if (!free_entry && grow(t) == 0)
        return commands_add(t);
    if (!free_entry && errno == ENOMEM)
        return NULL;
    if (!free_entry) {
        /* Full of ended records: the running ones are fewer than JAIL_MAX_COMMANDS, so at
         * least one ended record exists. */
        free_entry = oldest_ended(t);
        if (!free_entry)
            return NULL;
        entry_clear(free_entry);
        t->ended--;
    }
    free_entry->id = t->next_id++;
    if (t->next_id == 0)
        t->next_id = 1; /* 0 means free */
    free_entry->running = true;
    t->running++;
    return free_entry;
}

void commands_drop(struct commands *t, struct command_entry *e)
{
    if (e->running)
        t->running--;
    entry_clear(e);
}

struct command_entry *commands_find(struct commands *t, uint32_t id)
{
    if (id == 0)
        return NULL;
    for (size_t i = 0; i < t->cap; i++)
        if (t->entries[i].id == id)
            return &t->entries[i];
    return NULL;
}

struct command_entry *commands_find_pid(struct commands *t, pid_t pid)
{
    for (size_t i = 0; i < t->cap; i++)
        if (t->entries[i].id && t->entries[i].running && t->entries[i].pid == pid)
            return &t->entries[i];
    return NULL;
}

void commands_ended(struct commands *t, struct command_entry *e, int status)
{
    if (!e->running)
        return;
    e->running = false;
    e->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    e->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    e->ended_seq = t->next_end++;
    /* Nothing can write to its stdin any more that matters; the pty's master and the output
     * pipes keep what it wrote. */
    if (e->fds.stdin_w >= 0) {
        close(e->fds.stdin_w);
        e->fds.stdin_w = -1;
    }
    t->running--;
    t->ended++;
}

int commands_forget(struct commands *t, uint32_t id)
{
    struct command_entry *e = commands_find(t, id);
    if (!e) {
        errno = ESRCH;
        return -1;
    }
    if (e->running) {
        errno = EBUSY;
        return -1;
    }
    entry_clear(e);
    t->ended--;
    return 0;
}
