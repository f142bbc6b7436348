/* Size, duration and count parsers: the values users type on the command line. */
#include "tap.h"
#include "util/parse.h"

static void size_ok(const char *s, uint64_t want)
{
    uint64_t v = 0;
    int rc = parse_size(s, &v);
    ok(rc == 0 && v == want, "parse_size(\"%s\") = %llu (got rc %d, %llu)", s,
       (unsigned long long)want, rc, (unsigned long long)v);
}

static void size_bad(const char *s)
{
    uint64_t v;
    ok(parse_size(s, &v) < 0, "parse_size rejects \"%s\"", s);
}

static void dur_ok(const char *s, uint64_t want)
{
    uint64_t v = 0;
    int rc = parse_duration_ms(s, &v);
    ok(rc == 0 && v == want, "parse_duration_ms(\"%s\") = %llu (got %llu)", s,
       (unsigned long long)want, (unsigned long long)v);
}

static void dur_bad(const char *s)
{
    uint64_t v;
    ok(parse_duration_ms(s, &v) < 0, "parse_duration_ms rejects \"%s\"", s);
}

int main(void)
{
    size_ok("0", 0);
    size_ok("4096", 4096);
    size_ok("64k", 65536);
    size_ok("64K", 65536);
    size_ok("64KiB", 65536);
    size_ok("1M", 1048576);
    size_ok("512mb", 512ull << 20);
    size_ok("1.5G", 3ull << 29);
    size_ok("2T", 2ull << 40);
    size_ok("16777215T", 16777215ull << 40);
    size_bad("");
    size_bad("-1");
    size_bad("abc");
    size_bad("1.5");
    size_bad("1.M");
    size_bad("10X");
    size_bad("1 M");
    size_bad("99999999999999999999");
    size_bad("16777216T"); /* 2^64: overflow */
    size_bad(NULL);

    dur_ok("2", 2000);
    dur_ok("0.25", 250);
    dur_ok("1.5s", 1500);
    dur_ok("150ms", 150);
    dur_ok("2m", 120000);
    dur_ok("0.0001", 0);
    dur_bad("");
    dur_bad("-1");
    dur_bad("1h");
    dur_bad("1.5ms");
    dur_bad("s");
    dur_bad("99999999999999999999");

    uint64_t v;
    ok(parse_count("64", 1, 100, &v) == 0 && v == 64, "parse_count 64");
    ok(parse_count("0", 1, 100, &v) < 0, "parse_count below min");
    ok(parse_count("101", 1, 100, &v) < 0, "parse_count above max");
    ok(parse_count("1.0", 1, 100, &v) < 0, "parse_count rejects a fraction");
    ok(parse_count("12x", 1, 100, &v) < 0, "parse_count rejects junk");
    ok(parse_count(NULL, 1, 100, &v) < 0, "parse_count rejects NULL");

    char buf[32];
    is_str(format_size(64ull << 20, buf, sizeof buf), "64 MiB", "format_size 64 MiB");
    is_str(format_size(1000, buf, sizeof buf), "1000 B", "format_size 1000 B");
    return done_testing();
}
