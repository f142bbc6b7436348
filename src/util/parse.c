#include "util/parse.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Parses "INT[.FRAC]" into an integer part and a fraction scaled to 1e9; returns the rest. */
static const char *parse_decimal(const char *s, uint64_t *whole, uint64_t *frac_nano)
{
    if (!isdigit((unsigned char)*s))
        return NULL;
    uint64_t w = 0;
    while (isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s++ - '0');
        if (w > (UINT64_MAX - d) / 10)
            return NULL;
        w = w * 10 + d;
    }
    uint64_t f = 0, scale = 100000000;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return NULL;
        while (isdigit((unsigned char)*s)) {
            f += (uint64_t)(*s++ - '0') * scale;
            scale /= 10;
        }
    }
    *whole = w;
    *frac_nano = f;
    return s;
}

static int scale_checked(uint64_t whole, uint64_t frac_nano, uint64_t unit, uint64_t *out)
{
    if (unit != 0 && whole > UINT64_MAX / unit)
        return -1;
    uint64_t v = whole * unit;
    /* fraction * unit / 1e9 without overflow for units up to 2^60 */
    uint64_t fpart = (uint64_t)((unsigned __int128)frac_nano * unit / 1000000000u);
    if (v > UINT64_MAX - fpart)
        return -1;
    *out = v + fpart;
    return 0;
}

int parse_size(const char *s, uint64_t *out)
{
    if (!s)
        return -1;
    uint64_t whole, frac;
    const char *rest = parse_decimal(s, &whole, &frac);
    if (!rest)
        return -1;
    static const struct {
        const char *suffix;
        uint64_t unit;
    } units[] = {
        {"", 1},          {"b", 1},         {"k", 1ull << 10},  {"kb", 1ull << 10},
        {"kib", 1ull << 10}, {"m", 1ull << 20}, {"mb", 1ull << 20}, {"mib", 1ull << 20},
        {"g", 1ull << 30}, {"gb", 1ull << 30}, {"gib", 1ull << 30}, {"t", 1ull << 40},
        {"tb", 1ull << 40}, {"tib", 1ull << 40},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(rest, units[i].suffix) == 0) {
            if (units[i].unit == 1 && frac != 0)
                return -1; /* "1.5" bytes is meaningless */
            return scale_checked(whole, frac, units[i].unit, out);
        }
    }
    return -1;
}

int parse_duration_ms(const char *s, uint64_t *out)
{
    if (!s)
        return -1;
    uint64_t whole, frac;
    const char *rest = parse_decimal(s, &whole, &frac);
    if (!rest)
        return -1;
    if (*rest == '\0' || strcmp(rest, "s") == 0)
        return scale_checked(whole, frac, 1000, out);
    if (strcmp(rest, "ms") == 0) {
        if (frac != 0)
            return -1;
        *out = whole;
        return 0;
    }
    if (strcmp(rest, "m") == 0 || strcmp(rest, "min") == 0)
        return scale_checked(whole, frac, 60000, out);
    return -1;
}

int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t whole, frac;
    const char *rest = s ? parse_decimal(s, &whole, &frac) : NULL;
    if (!rest || *rest != '\0' || frac != 0 || strchr(s, '.'))
        return -1;
    if (whole < min || whole > max)
        return -1;
    *out = whole;
    return 0;
}

const char *format_size(uint64_t bytes, char *buf, unsigned size)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned i = 0;
    while (i < 4 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        i++;
    }
    snprintf(buf, size, "%llu %s", (unsigned long long)bytes, names[i]);
    return buf;
}
