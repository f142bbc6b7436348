/* Paths from outside: checked and normalized before anything touches the file system. */
#include <errno.h>
#include <string.h>

#include "files/files_internal.h"

int files_path_normalize(const char *path, size_t len, char out[PATH_MAX], err_t *err)
{
    if (!path)
        return err_set(err, EINVAL, "no path");
    if (memchr(path, '\0', len))
        return err_set(err, EINVAL, "path " FILES_SHOWN ": contains a NUL byte", path);
    if (len >= PATH_MAX)
        return err_set(err, ENAMETOOLONG, "path %.*s...: %zu bytes, the limit is %d", 100, path,
                       len, PATH_MAX - 1);
    if (len == 0 || path[0] != '/')
        return err_set(err, EINVAL, "path \"%.*s\": not absolute", (int)(len < 400 ? len : 400),
                       path);
    /* out never grows past the input read so far (each component kept is preceded by at least
     * one slash of the input), so it fits, and it may even be path itself. */
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && path[i] == '/')
            i++;
        size_t end = i;
        while (end < len && path[end] != '/')
            end++;
        size_t n = end - i;
        if (n > NAME_MAX)
            return err_set(err, ENAMETOOLONG,
                           "path %.*s...: a component of %zu bytes, the limit is %d", 100, path, n,
                           NAME_MAX);
        if (n == 0 || (n == 1 && path[i] == '.')) {
            /* nothing: "//", "/./", or the end */
        } else if (n == 2 && path[i] == '.' && path[i + 1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else {
            out[o++] = '/';
            memmove(out + o, path + i, n);
            o += n;
        }
        i = end;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return 0;
}

int files_path_take(const char *op, const char *path, char out[PATH_MAX], err_t *err)
{
    if (!path)
        return err_set(err, EINVAL, "%s: no path", op);
    if (files_path_normalize(path, strnlen(path, PATH_MAX), out, err) < 0)
        return err_wrap(err, "%s", op);
    return 0;
}

const char *files_path_leaf(const char *norm, size_t *parent_len)
{
    const char *slash = strrchr(norm, '/');
    *parent_len = slash == norm ? 1 : (size_t)(slash - norm);
    return slash + 1;
}

int files_path_push(char *buf, size_t *len, const char *name)
{
    size_t n = strlen(name);
    size_t at = *len == 1 && buf[0] == '/' ? 1 : *len + 1;
    if (at + n >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    buf[at - 1] = '/';
    memcpy(buf + at, name, n + 1);
    *len = at + n;
    return 0;
}
