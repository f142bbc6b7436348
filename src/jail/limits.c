/* Length checks on what enters the core (jail.h, "limits"): a sandbox's spec, a command's, and
 * the daemon's input, against the same bounds. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "jail/jail.h"
#include "util/strfmt.h"

int jail_check_length(const char *value, size_t max, err_t *err, const char *field, ...)
{
    if (!value || strnlen(value, max + 1) <= max)
        return 0;
    char what[128] = "";
    va_list ap;
    va_start(ap, field);
    strfmt_text_vappend(what, sizeof what, field, ap);
    va_end(ap);
    return err_set(err, ENAMETOOLONG, "%s is longer than %zu bytes", what, max);
}

/* Adds one list's entries to *total (as execve counts them); -1 with err past a bound. */
static int check_list(const char *const *list, const char *what, size_t max_entries, size_t *total,
                      err_t *err)
{
    for (size_t i = 0; list && list[i]; i++) {
        if (max_entries && i == max_entries)
            return err_set(err, E2BIG, "%s has more than %zu entries", what, max_entries);
        size_t len = strnlen(list[i], JAIL_MAX_ARG_BYTES + 1);
        if (len > JAIL_MAX_ARG_BYTES)
            return err_set(err, E2BIG, "%s entry %zu is longer than %u bytes", what, i,
                           JAIL_MAX_ARG_BYTES);
        *total += len + 1 + sizeof(char *);
        if (*total > JAIL_MAX_ARGV_ENV_BYTES) /* stops the walk long before the sum could wrap */
            break;
    }
    return 0;
}

int jail_check_args(const char *const *argv, const char *const *envp, size_t max_entries,
                    err_t *err)
{
    size_t total = 0;
    if (check_list(argv, "argv", max_entries, &total, err) < 0 ||
        check_list(envp, "environment", max_entries, &total, err) < 0)
        return -1;
    if (total > JAIL_MAX_ARGV_ENV_BYTES)
        return err_set(err, E2BIG,
                       "argv and environment take %zu bytes (each string, its NUL and a pointer), "
                       "at most %u",
                       total, JAIL_MAX_ARGV_ENV_BYTES);
    return 0;
}
