#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(err_t *err, int errnum, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        err->msg[0] = '\0';
    size_t len = strnlen(err->msg, sizeof err->msg);
    if (errnum != 0 && len < sizeof err->msg)
        snprintf(err->msg + len, sizeof err->msg - len, ": %s", strerror(errnum));
    err->errnum = errnum;
    return -1;
}

int err_wrap(err_t *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}

void err_clear(err_t *err)
{
    err->errnum = 0;
    err->msg[0] = '\0';
}
