/* User namespaces: per-sandbox host uid ranges, the id maps, and becoming root inside. */
#pragma once
#include <stdint.h>
#include <sys/types.h>
#include "util/err.h"

/* First host uid handed to sandboxes: far above any real account, never host root. */
#define USERNS_HOST_BASE  0x40000000u
#define USERNS_SLOT_COUNT 4096u

struct uid_range {
    uid_t host_base; /* sandbox id 0 maps here; JAIL_UID_COUNT ids follow */
    unsigned slot;
    int lock_fd; /* holds an OFD lock on byte `slot` of the slot file while the range is in use */
};

/* Takes a free range, locked in lock_path with an OFD lock: the kernel drops it when the last fd
 * to it closes, so a crashed owner frees its range without any cleanup. */
int uid_range_acquire(const char *lock_path, struct uid_range *out, err_t *err);
void uid_range_release(struct uid_range *range);

/* From the parent, while the child waits: gid_map then uid_map, one line each. */
int userns_write_maps(pid_t pid, uid_t host_base, uint32_t count, err_t *err);
/* In the child after the maps exist: become uid/gid 0 inside and drop host supplementary groups
 * (they would otherwise keep their host meaning for permission checks). -1 with errno. */
int userns_become_root(void);
