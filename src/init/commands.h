/* The agent's table of commands: every command started in the sandbox, running or ended, with
 * init's own duplicates of its host-side fds (so that a reconnecting host can attach again:
 * output waits in the pipe, nothing flows through init) until the host forgets it. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "init/command.h"
#include "jail/jail.h"

#define COMMANDS_TAG_MAX 128
/* Ended commands kept for the host to collect, beyond the running ones; the oldest ended record
 * goes first when more end. */
#define COMMANDS_MAX_ENDED 256

struct command_entry {
    uint32_t id; /* 0 = free */
    pid_t pid;   /* in the sandbox */
    char tag[COMMANDS_TAG_MAX + 1];
    char cgroup[33]; /* the host's name for its cgroup */
    struct command_fds fds; /* init's copies, -1 once closed (stdin closed, or ended) */
    bool running;
    int exit_code; /* -1 if killed by a signal */
    int signal;
    uint64_t ended_seq; /* order of ending, for eviction */
};

/* Grown as needed: an idle sandbox's init holds a few entries, not the whole bound. */
struct commands {
    struct command_entry *entries;
    size_t cap;
    uint32_t next_id;
    uint64_t next_end;
    unsigned running, ended;
};

void commands_init(struct commands *t);
/* A free entry for a new command (id assigned), or NULL when JAIL_MAX_COMMANDS are running (or
 * memory is short: errno ENOMEM). Pointers into the table stay valid until the next add. */
struct command_entry *commands_add(struct commands *t);
/* Undoes commands_add for a command that did not start. */
void commands_drop(struct commands *t, struct command_entry *e);
struct command_entry *commands_find(struct commands *t, uint32_t id);
struct command_entry *commands_find_pid(struct commands *t, pid_t pid);
/* Marks e ended with a wait status; closes init's copies of its fds except the output ends,
 * which stay until forgotten (what the command wrote before it ended is still in the pipe). */
void commands_ended(struct commands *t, struct command_entry *e, int status);
/* Forgets an ended command (closes what is left). -1 (ESRCH, EBUSY) if unknown or running. */
int commands_forget(struct commands *t, uint32_t id);
