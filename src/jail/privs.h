/* The last steps before exec, from inside: rlimits, dropping every capability and becoming the
 * sandbox user, no_new_privs. All of these return -1 with errno and allocate nothing. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "jail/jail.h"

int privs_apply_rlimits(const struct jail_limits *limits);
/* Empties the bounding, ambient, inheritable, permitted and effective sets but for keep_caps (a
 * mask of 1 << CAP_*, kept in all five so they survive execve; only for uid 0, 0 otherwise),
 * locks securebits so uid 0 gains nothing at exec, switches to uid (0 or JAIL_USER_UID), re-arms
 * PR_SET_PDEATHSIG when die_with_parent (credential changes clear it), and sets no_new_privs. */
int privs_drop(uid_t uid, uint64_t keep_caps, bool die_with_parent);
/* For the sandbox's init, which never execs (its seccomp filter kills it if it tries): empties
 * the capability sets and sets no_new_privs; uid, bounding set and securebits, which only
 * matter at exec, stay as they are. Keeps PR_SET_PDEATHSIG (no credential change). */
int privs_drop_caps(void);
/* privs_drop_caps, but the capabilities in keep (a mask of 1 << CAP_*) stay in the permitted
 * and effective sets; none is inheritable. */
int privs_keep_caps(uint64_t keep);
/* Brings up lo in the current network namespace. */
int netns_loopback_up(void);
