#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/strfmt.h"

int err_set(err_t *err, int errnum, const char *fmt, ...)
{
    if (!err)
        return -1;
    /* ": strerror" is kept whole: a message too long for the rest is cut, and ends in "...". */
    char suffix[128] = "";
    if (errnum != 0)
        strfmt_text_append(suffix, sizeof suffix, ": %s", strerror(errnum));
    err->msg[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    strfmt_text_vappend(err->msg, sizeof err->msg - strlen(suffix), fmt, ap);
    va_end(ap);
    strfmt_text_append(err->msg, sizeof err->msg, "%s", suffix);
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
    err->msg[0] = '\0';
    strfmt_text_append(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}

void err_clear(err_t *err)
{
    err->errnum = 0;
    err->msg[0] = '\0';
}
