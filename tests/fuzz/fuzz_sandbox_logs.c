/* The logs query and the event lines (src/api/sandbox_logs.h). The first byte picks: even, the
 * rest is a query (to its first NUL), v1's or (2 mod 4) v2's; odd, an event: its kind to the first
 * NUL, the detail after it (what the store holds is the daemon's own, but a line never trusts it).
 * Checked: a query either parses within its bounds or fails with EINVAL and a message, cleared; a
 * line always fits and is a string; a page of the event is JSON with its one entry, every field a
 * string. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/sandbox_logs.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    err_t err = {0};
    if (data[0] % 2 == 0) {
        struct api_logs_query q;
        bool v2 = data[0] % 4 == 2;
        if ((v2 ? api_logs_v2_query_parse : api_logs_query_parse)(text, &q, &err) == 0) {
            fuzz_assert(q.limit >= 1 && q.limit <= API_LOGS_LIMIT_MAX);
            fuzz_assert(q.start_ms >= 0 && q.after_seq >= 0);
            fuzz_assert(q.min_level <= API_LOG_ERROR && strlen(q.search) <= API_LOGS_SEARCH_MAX);
            fuzz_assert(v2 || (!q.backward && q.min_level == API_LOG_DEBUG && !q.search[0]));
        } else {
            fuzz_assert(err.errnum == EINVAL && err.msg[0]);
            fuzz_assert(q.limit == 0);
        }
    } else {
        size_t kind_len = strlen(text);
        const char *detail = kind_len + 1 < size - 1 ? text + kind_len + 1 : NULL;
        struct store_event ev = {.seq = 1, .at_ms = 1, .kind = text, .detail = detail};
        char line[256];
        api_log_line(&ev, line, sizeof line);
        fuzz_assert(strlen(line) < sizeof line);
        struct api_logs *l = api_logs_new();
        static const struct api_logs_query every; /* zeroed: no filter */
        fuzz_assert(l && api_logs_offer(l, &every, &ev, &err) == 1);
        {
            char *s = api_logs_json(l, &err);
            json_t *j = s ? json_loads(s, 0, NULL) : NULL;
            /* a line that is not UTF-8 is made so; a kind that is not UTF-8 is left out of the
             * fields (kinds are the daemon's own) */
            fuzz_assert(s && json_array_size(json_object_get(j, "logEntries")) == 1);
            fuzz_assert(json_array_size(json_object_get(j, "logs")) == 1);
            json_decref(j);
            free(s);
        }
        api_logs_free(l);
    }
    free(text);
    return 0;
}
