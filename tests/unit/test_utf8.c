/* UTF-8 repair: valid text passes unchanged, every invalid byte becomes U+FFFD. */
#include <stdlib.h>

#include "tap.h"
#include "util/utf8.h"

static void same_n(const char *in, size_t len, const char *want, size_t want_len, const char *what)
{
    size_t out_len;
    char *out = utf8_sanitize(in, len, &out_len);
    ok(out && out_len == want_len && memcmp(out, want, out_len) == 0, "%s", what);
    free(out);
}

static void same(const char *in, size_t len, const char *want, const char *what)
{
    same_n(in, len, want, strlen(want), what);
}

int main(void)
{
    same("hello", 5, "hello", "ASCII unchanged");
    same("", 0, "", "empty");
    same("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15, "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
         "2-, 3- and 4-byte sequences unchanged");
    same("a\xff" "b", 3, "a\xef\xbf\xbd" "b", "0xff is replaced");
    same("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", "overlong encoding is replaced byte by byte");
    same("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "UTF-16 surrogate is invalid");
    same("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
         "above U+10FFFF is invalid");
    same("ab\xe2\x82", 4, "ab\xef\xbf\xbd\xef\xbf\xbd", "truncated sequence at the end");
    same_n("a\0b", 3, "a\0b", 3, "NUL is kept (JSON escapes it)");
    /* every single byte value, to exercise the decoder's edges under the sanitizers */
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    size_t n;
    char *out = utf8_sanitize(all, sizeof all, &n);
    ok(out && n == 128 + 128 * 3, "256 byte values: 128 ASCII kept, 128 high bytes replaced");
    free(out);
    return done_testing();
}
