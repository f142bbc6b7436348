/* envd's process requests (src/api/envd_process.h): the first byte picks the parser, the rest
 * (up to its first NUL) is the message JSON (StreamInput's messages too). Checked: each succeeds
 * with fields within the limits (argv non-empty and NULL-terminated, env entries NAME=VALUE, pty
 * sizes 1..65535, input at most ENVD_MAX_INPUT bytes, signals SIGKILL or SIGTERM) or fails with an
 * errno and a message, holding nothing. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "api/envd_process.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *json = strndup((const char *)data + 1, size - 1);
    err_t err = {0};
    struct envd_selector sel;
    switch (data[0] % 6) {
    case 0: {
        struct envd_start s;
        if (envd_start_parse(json, &s, &err) == 0) {
            fuzz_assert(s.argv && s.argv[0] && s.argv[0][0] && s.envp);
            for (size_t i = 0; s.envp[i]; i++)
                fuzz_assert(strchr(s.envp[i], '=') && s.envp[i][0] != '=');
            fuzz_assert(!s.pty || (s.rows >= 1 && s.cols >= 1));
            envd_start_free(&s);
        } else {
            fuzz_assert(err.errnum && err.msg[0] && !s.argv && !s.envp && !s.cwd && !s.tag);
        }
        break;
    }
    case 1:
        if (envd_selector_parse(json, &sel, &err) < 0)
            fuzz_assert(err.errnum && err.msg[0]);
        break;
    case 2: {
        bool to_pty;
        uint8_t *in;
        size_t len;
        if (envd_input_parse(json, &sel, &to_pty, &in, &len, &err) == 0) {
            fuzz_assert(in && len <= ENVD_MAX_INPUT);
            free(in);
        } else {
            fuzz_assert(!in && err.errnum && err.msg[0]);
        }
        break;
    }
    case 3: {
        int signo = 0;
        if (envd_signal_parse(json, &sel, &signo, &err) == 0)
            fuzz_assert(signo == SIGKILL || signo == SIGTERM);
        break;
    }
    case 5: {
        enum envd_stream_input kind = ENVD_STREAM_INPUT_KEEPALIVE;
        bool to_pty;
        uint8_t *in;
        size_t len;
        if (envd_stream_input_parse(json, &kind, &sel, &to_pty, &in, &len, &err) == 0) {
            fuzz_assert(kind == ENVD_STREAM_INPUT_DATA ? in && len <= ENVD_MAX_INPUT : !in);
            free(in);
        } else {
            fuzz_assert(!in && err.errnum && err.msg[0]);
        }
        break;
    }
    case 4: {
        unsigned short rows = 0, cols = 0;
        if (envd_update_parse(json, &sel, &rows, &cols, &err) == 0)
            fuzz_assert(rows >= 1 && cols >= 1);
        break;
    }
    }
    free(json);
    return 0;
}
