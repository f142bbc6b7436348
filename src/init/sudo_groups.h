/* The spawner's table of the running commands' cgroups (their fds, as the host sent them with
 * each SPAWN), so that a command started by sudo joins the cgroup of the command it was asked
 * from: charged to it, and killed with it. Lives in the spawner only. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "util/err.h"

struct sudo_group {
    uint32_t cmd_id; /* 0 = free */
    char name[33];   /* the host's name for the group (a SPAWN's CGROUP) */
    int fds[1 + PROTO_MAX_V1_FDS];
    bool has_dir; /* fds[0] is the cgroup2 directory */
    unsigned n_v1;
};

/* Keeps duplicates of a started command's cgroup fds under its id. Best effort: a table that is
 * full, or fds short, leave the command without (a sudo from it is then refused). */
void sudo_groups_add(uint32_t cmd_id, const char *name, const int *fds, bool has_dir,
                     unsigned n_v1);
/* The command ended: its fds go. */
void sudo_groups_forget(uint32_t cmd_id);
/* The group of the command whose cgroup process pid is in, from /proc/PID/cgroup read against
 * our own (init's group and the commands' are siblings); NULL (err) if none. */
const struct sudo_group *sudo_groups_of(pid_t pid, err_t *err);
