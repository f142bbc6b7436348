/* snprintf without silent truncation. A path or a name cut short names something else, so
 * strfmt() refuses to cut; a message for people may be cut, but visibly (strfmt_text). */
#pragma once
#include <stdarg.h>
#include <stddef.h>

/* Formats into buf[size]. Returns 0, or -1 with errno ENAMETOOLONG when the result does not
 * fit (buf then holds ""), EINVAL when size is 0 or the format fails. */
int strfmt(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends to the string in buf[size] what fmt makes; a result that does not fit is cut and ends
 * in "..." (when there is room for it). Returns the new length. */
size_t strfmt_text_append(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
size_t strfmt_text_vappend(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
