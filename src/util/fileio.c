#include "util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

int fd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int file_write_at(int dirfd, const char *path, const char *data, size_t len, err_t *err)
{
    cleanup_fd int fd = openat(dirfd, path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open %s", path);
    if (fd_write_all(fd, data, len) < 0)
        return err_set(err, errno, "write %s", path);
    return 0;
}

int file_write_str_at(int dirfd, const char *path, const char *s, err_t *err)
{
    return file_write_at(dirfd, path, s, strlen(s), err);
}

int file_create_at(int dirfd, const char *path, const char *data, size_t len, mode_t mode,
                   err_t *err)
{
    cleanup_fd int fd =
        openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return err_set(err, errno, "create %s", path);
    if (fd_write_all(fd, data, len) < 0)
        return err_set(err, errno, "write %s", path);
    if (fchmod(fd, mode) < 0)
        return err_set(err, errno, "chmod %s", path);
    return 0;
}

ssize_t file_read_at(int dirfd, const char *path, char *buf, size_t size, err_t *err)
{
    cleanup_fd int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open %s", path);
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return err_set(err, errno, "read %s", path);
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return (ssize_t)got;
}

int mkdir_p_at(int dirfd, const char *path, mode_t mode, err_t *err)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return err_set(err, ENAMETOOLONG, "mkdir %s", path);
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdirat(dirfd, buf, mode) < 0 && errno != EEXIST)
                return err_set(err, errno, "mkdir %s", buf);
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    return 0;
}
