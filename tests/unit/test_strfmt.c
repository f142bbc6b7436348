/* strfmt: a path that does not fit is refused, never cut; a message that does not fit is cut
 * visibly ("..."); err_set keeps ": strerror" whole however long the message. */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "util/err.h"
#include "util/strfmt.h"

int main(void)
{
    char buf[8];
    ok(strfmt(buf, sizeof buf, "%s/%s", "ab", "cd") == 0, "a path that fits");
    is_str(buf, "ab/cd", "is written whole");
    ok(strfmt(buf, sizeof buf, "%s/%s", "abc", "defg") == -1 && errno == ENAMETOOLONG,
       "8 bytes with the NUL do not fit in 8: ENAMETOOLONG");
    is_str(buf, "", "and the buffer holds nothing that looks like a path");
    ok(strfmt(buf, sizeof buf, "%s", "1234567") == 0, "7 characters fit in 8");
    errno = 0;
    ok(strfmt(buf, 0, "x") == -1 && errno == EINVAL, "size 0 is EINVAL");

    char text[12] = "";
    is_u64(strfmt_text_append(text, sizeof text, "%s", "abc"), 3, "text that fits: its length");
    is_u64(strfmt_text_append(text, sizeof text, " %d", 42), 6, "appended");
    is_str(text, "abc 42", "both parts");
    is_u64(strfmt_text_append(text, sizeof text, "%s", " and much more"), 11, "cut to the buffer");
    is_str(text, "abc 42 a...", "ends in ...");
    char full[4] = {'x', 'y', 'z', 'w'};
    is_u64(strfmt_text_append(full, sizeof full, "q"), 3, "a buffer with no NUL becomes a string");

    err_t err;
    char longname[2000];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    err_set(&err, ENOENT, "open %s", longname);
    size_t len = strlen(err.msg);
    const char *tail = ": No such file or directory";
    ok(len < sizeof err.msg && len > strlen(tail) + 3 &&
           strcmp(err.msg + len - strlen(tail), tail) == 0 &&
           strncmp(err.msg + len - strlen(tail) - 3, "...", 3) == 0,
       "err_set: a message too long is cut with ... and keeps its strerror");
    err_set(&err, EACCES, "open %s", "x");
    is_str(err.msg, "open x: Permission denied", "err_set: a short one is whole");
    err_wrap(&err, "%s", longname);
    len = strlen(err.msg);
    ok(len == sizeof err.msg - 1 && strcmp(err.msg + len - 3, "...") == 0,
       "err_wrap: a prefix too long is cut visibly");
    return done_testing();
}
