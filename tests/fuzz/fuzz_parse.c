/* The command-line value parsers (parse_size, parse_duration_ms, parse_count) and format_size.
 * The input up to its first NUL is the string; its first 16 bytes also give numbers for
 * format_size and parse_count's range. Results are checked against a reference parser written
 * with 128-bit arithmetic, against strtoull for plain numbers, and by round trips. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "util/parse.h"

struct unit {
    const char *suffix;
    uint64_t unit;
};

static const struct unit size_units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1ull << 10},
    {"kb", 1ull << 10},
    {"kib", 1ull << 10},
    {"m", 1ull << 20},
    {"mb", 1ull << 20},
    {"mib", 1ull << 20},
    {"g", 1ull << 30},
    {"gb", 1ull << 30},
    {"gib", 1ull << 30},
    {"t", 1ull << 40},
    {"tb", 1ull << 40},
    {"tib", 1ull << 40},
};
static const struct unit duration_units[] = {
    {"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"min", 60000},
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* "DIGITS[.DIGITS]SUFFIX" with a suffix from units. A fraction is kept to nine digits
 * (nano-units), the parser's documented precision; with a unit of 1 it must be zero. */
static int reference_parse(const char *s, const struct unit *units, size_t n_units, int ignore_case,
                           uint64_t *out)
{
    unsigned __int128 whole = 0;
    const char *p = s;
    if (!is_digit(*p))
        return -1;
    for (; is_digit(*p); p++) {
        whole = whole * 10 + (unsigned)(*p - '0');
        if (whole > UINT64_MAX)
            return -1;
    }
    uint64_t frac = 0; /* nano-units */
    if (*p == '.') {
        p++;
        if (!is_digit(*p))
            return -1;
        uint64_t scale = 100000000;
        for (; is_digit(*p); p++) {
            frac += (uint64_t)(*p - '0') * scale;
            scale /= 10;
        }
    }
    for (size_t i = 0; i < n_units; i++) {
        if ((ignore_case ? strcasecmp(p, units[i].suffix) : strcmp(p, units[i].suffix)) != 0)
            continue;
        if (units[i].unit == 1 && frac != 0)
            return -1;
        unsigned __int128 v =
            whole * units[i].unit + (unsigned __int128)frac * units[i].unit / 1000000000u;
        if (v > UINT64_MAX)
            return -1;
        *out = (uint64_t)v;
        return 0;
    }
    return -1;
}

/* Only digits, and fits: the value strtoull gives. Returns -1 otherwise. */
static int plain_number(const char *s, uint64_t *out)
{
    if (!*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (!is_digit(*p))
            return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

/* format_size's text is "N UNIT" with N * UNIT == bytes in the largest unit that divides it. */
static void check_format_size(uint64_t bytes)
{
    static const struct unit names[] = {
        {"B", 1},
        {"KiB", 1ull << 10},
        {"MiB", 1ull << 20},
        {"GiB", 1ull << 30},
        {"TiB", 1ull << 40},
    };
    char buf[64];
    fuzz_assert(format_size(bytes, buf, sizeof buf) == buf);
    const char *space = strchr(buf, ' ');
    fuzz_assert(space != NULL);
    char number[32];
    fuzz_assert((size_t)(space - buf) < sizeof number);
    memcpy(number, buf, (size_t)(space - buf));
    number[space - buf] = '\0';
    uint64_t n;
    fuzz_assert(plain_number(number, &n) == 0);
    size_t u = 0;
    while (u < 5 && strcmp(space + 1, names[u].suffix) != 0)
        u++;
    fuzz_assert(u < 5);
    fuzz_assert((unsigned __int128)n * names[u].unit == bytes);
    if (u < 4)
        fuzz_assert(n < 1024 || n % 1024 != 0);

    /* Round trip: parse_size reads the text back once the space is gone ("64MiB"). */
    char joined[64];
    snprintf(joined, sizeof joined, "%s%s", number, space + 1);
    uint64_t back = 0;
    fuzz_assert(parse_size(joined, &back) == 0 && back == bytes);

    /* A short buffer gets a terminated prefix. */
    for (unsigned size = 1; size < 12; size++) {
        char small[12];
        memset(small, 'X', sizeof small);
        format_size(bytes, small, size);
        fuzz_assert(memchr(small, '\0', size) != NULL);
        fuzz_assert(strncmp(small, buf, strlen(small)) == 0);
        fuzz_assert(strlen(small) == (strlen(buf) < size ? strlen(buf) : size - 1));
    }
}

static void swap_case(char *s)
{
    for (; *s; s++) {
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
        else if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exactly-sized copy, so a read past the terminator is caught. */
    size_t len = strnlen((const char *)data, size);
    char *s = malloc(len + 1);
    fuzz_assert(s != NULL);
    memcpy(s, data, len);
    s[len] = '\0';

    uint64_t v = 0xdeadbeef, ref = 0, plain = 0;
    int rc = parse_size(s, &v);
    fuzz_assert(rc == 0 || rc == -1);
    int ref_rc = reference_parse(s, size_units, sizeof size_units / sizeof size_units[0], 1, &ref);
    fuzz_assert(rc == ref_rc);
    if (rc == 0) {
        fuzz_assert(v == ref);
        check_format_size(v);
    }
    if (plain_number(s, &plain) == 0)
        fuzz_assert(rc == 0 && v == plain);
    char *swapped = strdup(s);
    fuzz_assert(swapped != NULL);
    swap_case(swapped);
    uint64_t v2 = 0;
    int rc2 = parse_size(swapped, &v2);
    fuzz_assert(rc2 == rc && (rc < 0 || v2 == v));
    free(swapped);

    rc = parse_duration_ms(s, &v);
    ref_rc = reference_parse(s, duration_units, sizeof duration_units / sizeof duration_units[0], 0,
                             &ref);
    fuzz_assert(rc == ref_rc && (rc < 0 || v == ref));
    if (plain_number(s, &plain) == 0)
        fuzz_assert(plain > UINT64_MAX / 1000 ? rc < 0 : rc == 0 && v == plain * 1000);

    /* parse_count: plain numbers only, inside the range. */
    uint64_t lo = 0, hi = UINT64_MAX;
    if (size >= 16) {
        memcpy(&lo, data, sizeof lo);
        memcpy(&hi, data + 8, sizeof hi);
    }
    uint64_t ranges[][2] = {{0, UINT64_MAX}, {1, 1u << 22}, {8, 1u << 20}, {lo, hi}};
    int is_plain = plain_number(s, &plain) == 0;
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        v = 0xdeadbeef;
        rc = parse_count(s, ranges[i][0], ranges[i][1], &v);
        int want = is_plain && plain >= ranges[i][0] && plain <= ranges[i][1];
        fuzz_assert(want ? rc == 0 && v == plain : rc == -1 && v == 0xdeadbeef);
    }

    if (size >= 8) {
        memcpy(&v, data, sizeof v);
        check_format_size(v);
        check_format_size(v & ~0x3ffull);
        check_format_size(v & ((1ull << 50) - 1) & ~((1ull << 20) - 1));
    }
    free(s);
    return 0;
}
