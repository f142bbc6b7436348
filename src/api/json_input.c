#include "api/json_input.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/strfmt.h"

int api_input_error(err_t *err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err->msg[0] = '\0';
    strfmt_text_vappend(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->errnum = errnum;
    return -1;
}

json_t *api_json_object(const char *body, size_t len, err_t *err)
{
    if (len == 0)
        return json_object();
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        api_input_error(err, EINVAL, "the body is not JSON: %s (line %d, column %d)", jerr.text,
                        jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        api_input_error(err, EINVAL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

const char *api_json_string(const json_t *v, const char *field, size_t max, err_t *err)
{
    if (!json_is_string(v)) {
        api_input_error(err, EINVAL, "%s must be a string", field);
        return NULL;
    }
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (strlen(s) != n) {
        api_input_error(err, EINVAL, "%s holds a NUL character", field);
        return NULL;
    }
    if (n > max) {
        api_input_error(err, ENAMETOOLONG, "%s is longer than %zu bytes", field, max);
        return NULL;
    }
    return s;
}

bool api_env_name_valid(const char *s)
{
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}
