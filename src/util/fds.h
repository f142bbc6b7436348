/* Descriptor-table helpers for the pre-exec child and the keeper: async-signal-safe, no
 * allocation. */
#pragma once
#include <stddef.h>

/* Closes every fd not in keep[0..n) (negative entries are ignored). Sorts keep in place. */
void fd_close_all_except(int *keep, size_t n);

struct msghdr;
/* The fds of every SCM_RIGHTS message in mh, in order: the first max go to out, the rest are
 * closed, so a hostile peer cannot make the receiver leak them. Returns how many went to out. */
size_t fd_take_rights(struct msghdr *mh, int *out, size_t max);
/* Whether the peer of a SOCK_SEQPACKET socket has hung up. A 0-byte read is either that or an
 * empty datagram from a peer still there, which must not pass for its end. */
int fd_peer_hung_up(int sock);
