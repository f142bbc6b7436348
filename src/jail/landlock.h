/* Landlock, as a second wall inside the namespaces: the payload may write only beneath the
 * sandbox's writable places, and (ABI 6+) may not signal or reach abstract sockets of processes
 * outside its domain, such as init. */
#pragma once
#include <stdbool.h>

/* Kernel's Landlock ABI version, or 0 when the kernel has none. */
int landlock_abi_version(void);
/* From inside, after no_new_privs. Returns 0 (also when the kernel has no Landlock: the caller
 * learns that from landlock_abi_version()), or -1 with errno. Allocates nothing. */
int landlock_restrict(void);
/* The same for a payload in a writable root (jail_spec.writable_root), where every place of the
 * root filesystem is the sandbox's own: writes are allowed beneath "/", and only the scoping
 * (signals, abstract sockets) restricts. */
int landlock_restrict_for(bool writable_root);
