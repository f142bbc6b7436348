#include "api/query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_input.h"

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int api_percent_decode(const char *in, size_t len, bool form, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_digit(in[i + 1]) : -1;
            int lo = i + 2 < len ? hex_digit(in[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && form) {
            c = ' ';
        }
        if (c == '\0' || n + 1 >= size)
            return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

int api_query_each(const char *s, size_t key_max, size_t value_max, const char *what,
                   int (*each)(const char *key, const char *value, void *ctx, err_t *err),
                   void *ctx, err_t *err)
{
    char *key = malloc(key_max + 1), *value = malloc(value_max + 1);
    int rc = key && value ? 0 : err_set(err, ENOMEM, "%s", what);
    while (rc == 0 && *s) {
        size_t pair_len = strcspn(s, "&");
        const char *eq = memchr(s, '=', pair_len);
        size_t key_len = eq ? (size_t)(eq - s) : pair_len;
        const char *v = eq ? eq + 1 : s + pair_len;
        size_t value_len = eq ? pair_len - key_len - 1 : 0;
        if (pair_len > 0) {
            if (api_percent_decode(s, key_len, true, key, key_max + 1) < 0 ||
                api_percent_decode(v, value_len, true, value, value_max + 1) < 0) {
                api_input_error(err, EINVAL, "%s: a parameter is badly encoded or too long", what);
                rc = -1;
            } else {
                rc = each(key, value, ctx, err);
            }
        }
        s += pair_len;
        if (*s == '&')
            s++;
    }
    free(key);
    free(value);
    return rc;
}

struct query_find {
    const char *name;
    char *out;
    size_t size;
    int found;
};

static int find_one(const char *key, const char *value, void *ctx, err_t *err)
{
    struct query_find *f = ctx;
    if (f->found || strcmp(key, f->name) != 0)
        return 0;
    if (strlen(value) + 1 > f->size)
        return api_input_error(err, EINVAL, "%s is too long", f->name);
    memcpy(f->out, value, strlen(value) + 1);
    f->found = 1;
    return 0;
}

int api_query_get(const char *query, const char *name, char *out, size_t size, err_t *err)
{
    struct query_find f = {.name = name, .out = out, .size = size};
    out[0] = '\0';
    if (api_query_each(query ? query : "", 256, size * 3 + 3, "query", find_one, &f, err) < 0)
        return -1;
    return f.found;
}
