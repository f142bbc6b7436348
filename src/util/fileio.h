/* Small whole-file helpers on top of openat(2). All fds are O_CLOEXEC. */
#pragma once
#include <stddef.h>
#include <sys/types.h>
#include "util/err.h"

/* Writes len bytes to dirfd/path (O_WRONLY|O_TRUNC, no O_CREAT: for cgroup and /proc files). */
int file_write_at(int dirfd, const char *path, const char *data, size_t len, err_t *err);
int file_write_str_at(int dirfd, const char *path, const char *s, err_t *err);
/* Creates or replaces dirfd/path with data and mode. */
int file_create_at(int dirfd, const char *path, const char *data, size_t len, mode_t mode,
                   err_t *err);
/* Reads at most size-1 bytes of dirfd/path into buf, NUL-terminated. Returns bytes read or -1. */
ssize_t file_read_at(int dirfd, const char *path, char *buf, size_t size, err_t *err);
/* Writes all of buf to fd, retrying on EINTR and short writes. Returns 0 or -1 (errno set). */
int fd_write_all(int fd, const void *buf, size_t len);
/* mkdir -p relative to dirfd; existing directories are fine. */
int mkdir_p_at(int dirfd, const char *path, mode_t mode, err_t *err);
