/* What every parser of src/api does first with hostile JSON: load an object with duplicate keys
 * refused, take a string member that holds no NUL and fits, check an env var's name. Each fills
 * err with EINVAL (or ENAMETOOLONG) and a message naming the field, with no strerror appended. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* err's message from fmt, errno errnum; returns -1. */
int api_input_error(err_t *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The body (len bytes) as a JSON object (a new reference); an empty body is {}. */
json_t *api_json_object(const char *body, size_t len, err_t *err);
/* The text of v when it is a string with no NUL and at most max bytes; NULL with err. */
const char *api_json_string(const json_t *v, const char *field, size_t max, err_t *err);
/* [A-Za-z_][A-Za-z0-9_]*, as a shell takes it. */
bool api_env_name_valid(const char *s);
