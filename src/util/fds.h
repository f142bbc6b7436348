/* Descriptor-table helpers for the pre-exec child and the keeper: async-signal-safe, no
 * allocation. */
#pragma once
#include <stddef.h>

/* Closes every fd not in keep[0..n) (negative entries are ignored). Sorts keep in place. */
void fd_close_all_except(int *keep, size_t n);
