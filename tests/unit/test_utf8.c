/* UTF-8 repair: valid text passes unchanged, every invalid byte becomes U+FFFD; the same in
 * chunks; the JSON cost is what jansson writes; terminal rendering leaves no control through. */
#include <jansson.h>
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

/* in fed to a JSON text in chunks of `chunk` bytes */
static struct utf8_json_text json_chunked(const char *in, size_t len, size_t chunk, uint64_t limit,
                                          bool ascii)
{
    struct utf8_json_text t = {.limit = limit, .ascii = ascii};
    for (size_t i = 0; i < len; i += chunk)
        utf8_json_append(&t, in + i, len - i < chunk ? len - i : chunk, false);
    utf8_json_append(&t, NULL, 0, true);
    return t;
}

/* What jansson writes between the quotes for text. */
static size_t jansson_cost(const char *text, size_t len, bool ascii)
{
    json_t *j = json_stringn(text, len);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY | (ascii ? JSON_ENSURE_ASCII : 0)) : NULL;
    size_t n = d ? strlen(d) - 2 : (size_t)-1;
    free(d);
    json_decref(j);
    return n;
}

static void chunks_like_whole(const char *in, size_t len, const char *what)
{
    size_t want_len;
    char *want = utf8_sanitize(in, len, &want_len);
    int bad = 0;
    for (size_t chunk = 1; chunk <= len; chunk++) {
        struct utf8_json_text t = json_chunked(in, len, chunk, UINT64_MAX, false);
        if (t.len != want_len || memcmp(t.text, want, want_len) != 0 || t.full)
            bad++;
        free(t.text);
    }
    ok(!bad, "%s: every chunk size gives utf8_sanitize's result", what);
    free(want);
}

static void renders(const char *in, size_t len, bool one_line, const char *want, const char *what)
{
    char out[UTF8_RENDER_MAX(64)];
    struct utf8_decoder d = {0};
    size_t n = utf8_render(&d, in, len, true, one_line, out);
    out[n] = '\0';
    is_str(out, want, "render: %s", what);
    /* byte by byte, as the slowest pipe would deliver it */
    struct utf8_decoder d2 = {0};
    size_t m = 0;
    char out2[UTF8_RENDER_MAX(64)];
    for (size_t i = 0; i < len; i++)
        m += utf8_render(&d2, in + i, 1, false, one_line, out2 + m);
    m += utf8_render(&d2, NULL, 0, true, one_line, out2 + m);
    out2[m] = '\0';
    is_str(out2, want, "render byte by byte: %s", what);
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

    /* --- in chunks ----------------------------------------------------------------------- */
    /* valid, cut, overlong, surrogate, above U+10FFFF, cut at the end */
    static const char mixed[] = "a\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x82"
                                "b\xc0\xaf\xed\xa0\x80"
                                "\xf4\x90\x80\x80\xc3\xa9\xe0\x80\x80\xf0\x9f\x98";
    chunks_like_whole(mixed, sizeof mixed - 1, "mixed valid, cut, overlong, surrogate");
    chunks_like_whole(all, sizeof all, "all byte values");
    char cut_end[] = "x\xf0\x9f\x98";
    chunks_like_whole(cut_end, sizeof cut_end - 1, "a sequence cut by the end of the input");

    /* --- JSON cost ----------------------------------------------------------------------- */
    int bad = 0;
    for (int c = 0; c < 128; c++) {
        char s = (char)c;
        for (int a = 0; a < 2; a++)
            if (utf8_json_cost(&s, 1, a) != jansson_cost(&s, 1, a))
                bad++, printf("# byte %02x ascii=%d: %zu, jansson %zu\n", c, a,
                              utf8_json_cost(&s, 1, a), jansson_cost(&s, 1, a));
    }
    ok(!bad, "JSON cost of every ASCII byte is what jansson writes, with and without ENSURE_ASCII");
    static const char *const seqs[] = {"\xc2\x80",        "\xc3\xa9",     "\xe2\x82\xac",
                                       "\xe2\x80\xa8",    "\xef\xbf\xbd", "\xf0\x9f\x98\x80",
                                       "\xf4\x8f\xbf\xbf"};
    bad = 0;
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++)
        for (int a = 0; a < 2; a++)
            if (utf8_json_cost(seqs[i], strlen(seqs[i]), a) !=
                jansson_cost(seqs[i], strlen(seqs[i]), a))
                bad++;
    ok(!bad,
       "JSON cost of 2-, 3- and 4-byte characters is jansson's, with and without ENSURE_ASCII");
    struct utf8_json_text t = json_chunked(all, sizeof all, 7, UINT64_MAX, false);
    is_u64(t.cost, jansson_cost(t.text, t.len, false), "JSON cost of all 256 bytes, sanitized");
    free(t.text);
    t = json_chunked(all, sizeof all, 7, UINT64_MAX, true);
    is_u64(t.cost, jansson_cost(t.text, t.len, true), "the same with ENSURE_ASCII");
    free(t.text);

    /* --- JSON limit ---------------------------------------------------------------------- */
    static char yes[30000];
    for (size_t i = 0; i < sizeof yes; i += 2)
        yes[i] = 'y', yes[i + 1] = '\n';
    t = json_chunked(yes, sizeof yes, 4096, 10240, false);
    /* y costs 1, \n 2: 3413 lines cost 10239, one more y fits, its \n does not */
    ok(t.full && t.cost == 10240 && t.len == 3413 * 2 + 1,
       "\"y\\n\" under a limit of 10240: cut at cost %llu, %zu bytes kept",
       (unsigned long long)t.cost, t.len);
    is_u64(jansson_cost(t.text, t.len, false), 10240,
           "and jansson writes exactly 10240 bytes of it");
    free(t.text);
    static char ones[1 << 20];
    memset(ones, 1, sizeof ones);
    t = json_chunked(ones, sizeof ones, 65536, 100000, false);
    ok(t.full && t.cost == 99996 && t.len == 16666 && t.cap <= 100000,
       "1 MiB of \\x01 (6 bytes each) under a limit of 100000: 16666 kept, memory %zu <= limit",
       t.cap);
    free(t.text);
    t = json_chunked("abc", 3, 1, 3, false);
    ok(!t.full && t.cost == 3 && t.len == 3, "exactly at the limit: kept, not full");
    free(t.text);
    t = json_chunked("ab\xe2\x82", 4, 1, 5, false);
    ok(t.full && t.len == 5 && memcmp(t.text, "ab\xef\xbf\xbd", 5) == 0,
       "a cut sequence at the end costs its replacements: 2 + 3 fit in 5, the next does not");
    free(t.text);
    t = json_chunked("x", 1, 1, 0, false);
    ok(t.full && t.len == 0 && t.text == NULL, "limit 0: nothing kept, nothing allocated");
    free(t.text);
    t = (struct utf8_json_text){.limit = 4};
    utf8_json_append(&t, "abcdef", 6, false);
    utf8_json_append(&t, "gh", 2, false);
    ok(t.full && t.len == 4 && memcmp(t.text, "abcd", 4) == 0,
       "once full, later chunks are dropped");
    free(t.text);
    t = json_chunked("\xe2\x82\xac\xe2\x82\xac", 6, 1, 11, true);
    ok(t.full && t.len == 3 && t.cost == 6,
       "ENSURE_ASCII: a euro sign costs 6, two do not fit in 11");
    free(t.text);

    /* --- terminal rendering -------------------------------------------------------------- */
    renders("plain text\n", 11, false, "plain text\n", "text and newline pass");
    renders("a\tb\rc\bd\n", 8, false, "a\tb\rc\bd\n", "tab, carriage return, backspace pass");
    renders("a\tb\rc\bd\n", 8, true, "a^Ib^Mc^Hd^J", "one line: they are shown too");
    renders("\x1b]52;c;SGVsbG8=\x07", 16, false, "^[]52;c;SGVsbG8=^G", "OSC 52 clipboard write");
    renders("\x1b[21t\x1b]0;title\x1b\\", 16, false, "^[[21t^[]0;title^[\\",
            "title report request and title change");
    renders("\x7f\x00", 2, false, "^?^@", "DEL and NUL");
    renders("\302\2336n\xc2\xa0", 6, false, "\\xc2\\x9b6n\xc2\xa0",
            "UTF-8 C1 CSI shown as bytes; U+00A0 passes");
    renders("\2336n", 3, false, "\\x9b6n", "8-bit CSI (not UTF-8) shown as a byte");
    renders("\xe2\x82\xac \xf0\x9f\x98\x80", 8, false, "\xe2\x82\xac \xf0\x9f\x98\x80",
            "multibyte text passes, even cut between chunks");
    renders("ok\xe2\x82", 4, false, "ok\\xe2\\x82", "a sequence cut by the end: its bytes shown");
    char worst[64];
    memset(worst, 0xff, sizeof worst);
    char wout[UTF8_RENDER_MAX(64)];
    struct utf8_decoder wd = {.held = {0xf0, 0x9f, 0x98}, .n_held = 3};
    size_t wn = utf8_render(&wd, worst, sizeof worst, true, true, wout);
    ok(wn == UTF8_RENDER_MAX(64), "worst case fills UTF8_RENDER_MAX exactly (%zu)", wn);
    return done_testing();
}
