/* The code interpreter's JSON (src/api/interp_json.h): the first byte picks the parser, the rest
 * is its input: an execute's body, a context's body, or a kernel's line (hostile: code in the
 * sandbox can write it). Checked: each succeeds with its fields checked (code a string, not both
 * context_id and language, env_vars strings under names without '='; cwd absolute; a kernel's
 * message of a known type whose client line, when made, is one compact JSON line) or fails with
 * an errno and a message, holding nothing. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api/interp_json.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    err_t err = {0};
    switch (data[0] % 3) {
    case 0: {
        struct interp_execute e;
        if (interp_execute_parse(in, len, &e, &err) == 0) {
            fuzz_assert(json_is_string(e.code) && json_is_object(e.env_vars));
            fuzz_assert(!(e.context_id && e.language));
            const char *k;
            json_t *v;
            json_object_foreach(e.env_vars, k, v)
                fuzz_assert(k[0] && !strchr(k, '=') && json_is_string(v));
            size_t n = 0;
            char *line = interp_execute_request(&e, "id", &n);
            fuzz_assert(line && n > 0 && line[n - 1] == '\n' && !memchr(line, '\n', n - 1));
            free(line);
            interp_execute_free(&e);
        } else {
            fuzz_assert(err.errnum && err.msg[0] && !e.code && !e.env_vars && !e.context_id &&
                        !e.language);
        }
        break;
    }
    case 1: {
        struct interp_context_request r;
        if (interp_context_parse(in, len, &r, &err) == 0) {
            fuzz_assert(!r.cwd || (r.cwd[0] == '/' && strlen(r.cwd) <= INTERP_CWD_MAX));
            interp_context_free(&r);
        } else {
            fuzz_assert(err.errnum && err.msg[0] && !r.cwd && !r.language);
        }
        break;
    }
    case 2: {
        struct kernel_message m;
        if (kernel_message_parse(in, len, "2026-01-01T00:00:00.000Z", &m, &err) == 0) {
            bool has_line =
                m.type == KERNEL_OUTPUT || m.type == KERNEL_RESULT || m.type == KERNEL_ERROR;
            fuzz_assert(has_line == (m.client_line != NULL));
            fuzz_assert(m.type != KERNEL_END_OF_EXECUTION || m.end_id[0]);
            if (m.client_line) {
                size_t n = 0;
                char *line = interp_line(json_incref(m.client_line), &n);
                fuzz_assert(line && n > 0 && line[n - 1] == '\n' && !memchr(line, '\n', n - 1));
                free(line);
            }
            kernel_message_free(&m);
        } else {
            fuzz_assert(err.errnum && err.msg[0] && !m.client_line);
        }
        break;
    }
    }
    return 0;
}
