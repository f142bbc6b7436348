#include "util/strfmt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int strfmt(char *buf, size_t size, const char *fmt, ...)
{
    if (size == 0) {
        errno = EINVAL;
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) {
        buf[0] = '\0';
        errno = n < 0 ? EINVAL : ENAMETOOLONG;
        return -1;
    }
    return 0;
}

size_t strfmt_text_vappend(char *buf, size_t size, const char *fmt, va_list ap)
{
    if (size == 0)
        return 0;
    size_t len = strnlen(buf, size);
    if (len == size) { /* not a string: make it one */
        buf[size - 1] = '\0';
        len = size - 1;
    }
    int n = vsnprintf(buf + len, size - len, fmt, ap);
    if (n < 0) {
        buf[len] = '\0';
        return len;
    }
    if ((size_t)n < size - len)
        return len + (size_t)n;
    /* cut: the last bytes say so */
    static const char mark[] = "...";
    if (size > sizeof mark)
        memcpy(buf + size - sizeof mark, mark, sizeof mark);
    return size - 1;
}

size_t strfmt_text_append(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = strfmt_text_vappend(buf, size, fmt, ap);
    va_end(ap);
    return len;
}
