/* Query strings and form-encoded pairs from a URL (application/x-www-form-urlencoded, as
 * URLSearchParams writes them: '+' for a space): decoded into bounded buffers, a NUL or a bad
 * escape refused. Pure functions. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* Percent-decodes in[0..len) into out (size bytes with the NUL); '+' is a space when form.
 * -1 for a bad escape, a NUL, or an output that does not fit. */
int api_percent_decode(const char *in, size_t len, bool form, char *out, size_t size);
/* Calls each(key, value) for each pair of a form-encoded string (&-separated k=v, both decoded,
 * at most key_max and value_max bytes); -1 with err (EINVAL, naming what) for a pair that does not
 * decode or fit, or each's -1. */
int api_query_each(const char *s, size_t key_max, size_t value_max, const char *what,
                   int (*each)(const char *key, const char *value, void *ctx, err_t *err),
                   void *ctx, err_t *err);
/* The decoded value of the first parameter named name in query into out (size bytes): 1 when
 * found, 0 when absent, -1 with err when it does not decode or fit. */
int api_query_get(const char *query, const char *name, char *out, size_t size, err_t *err);
