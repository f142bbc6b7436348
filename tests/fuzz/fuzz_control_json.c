/* E2B's control-plane parsers (src/api/control_json.h): the first byte picks the parser, the rest
 * is the request body (or the list query, NUL-terminated at its first NUL). Checked: each either
 * succeeds with every field inside its limits, or fails with EINVAL, ENAMETOOLONG or E2BIG and a
 * message, leaving its output cleared; what a create body yields re-parses as JSON objects of
 * strings; the time parser's result formats and parses back to itself. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "api/control_json.h"
#include "fuzz.h"

static void check_failure(const err_t *err)
{
    fuzz_assert(err->errnum == EINVAL || err->errnum == ENAMETOOLONG || err->errnum == E2BIG);
    fuzz_assert(err->msg[0] != '\0');
}

static void check_string_object(const char *text, size_t max_entries)
{
    json_t *o = json_loads(text, 0, NULL);
    fuzz_assert(json_is_object(o) && json_object_size(o) <= max_entries);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) fuzz_assert(json_is_string(v));
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    err_t err = {0};
    switch (data[0] % 6) {
    case 0: {
        struct api_new_sandbox ns;
        if (api_new_sandbox_parse(body, len, &ns, &err) == 0) {
            fuzz_assert(api_id_valid(ns.template_id));
            fuzz_assert(ns.timeout_s >= 1 && ns.timeout_s <= API_TIMEOUT_MAX_S);
            check_string_object(ns.metadata_json, API_METADATA_MAX_ENTRIES);
            check_string_object(ns.env_json, API_ENV_MAX_ENTRIES);
            fuzz_assert(ns.cpu_count <= API_CPU_COUNT_MAX);
            fuzz_assert(!ns.memory_mb ||
                        (ns.memory_mb >= API_MEMORY_MB_MIN && ns.memory_mb <= API_MEMORY_MB_MAX));
            fuzz_assert(!ns.disk_mb ||
                        (ns.disk_mb >= API_DISK_MB_MIN && ns.disk_mb <= API_DISK_MB_MAX));
            api_new_sandbox_free(&ns);
        } else {
            check_failure(&err);
            fuzz_assert(!ns.metadata_json && !ns.env_json);
        }
        break;
    }
    case 1: {
        struct api_connect c;
        if (api_connect_parse(body, len, &c, &err) == 0)
            fuzz_assert(!c.has_timeout || (c.timeout_s >= 0 && c.timeout_s <= API_TIMEOUT_MAX_S));
        else
            check_failure(&err);
        break;
    }
    case 2: {
        int64_t t;
        bool keep;
        if (api_timeout_parse(body, len, &t, &err) < 0)
            check_failure(&err);
        err_clear(&err);
        if (api_pause_parse(body, len, &keep, &err) < 0)
            check_failure(&err);
        break;
    }
    case 3: {
        char *q = strndup(body, len);
        static struct api_list_query lq;
        if (api_list_query_parse(q, &lq, &err) == 0) {
            fuzz_assert(lq.limit >= 1 && lq.limit <= API_LIST_LIMIT_MAX);
            fuzz_assert(lq.states && !(lq.states & ~(SANDBOX_STATE_BIT(SANDBOX_RUNNING) |
                                                     SANDBOX_STATE_BIT(SANDBOX_PAUSED))));
            fuzz_assert(lq.n_metadata <= API_METADATA_MAX_ENTRIES);
            for (size_t i = 0; i < lq.n_metadata; i++)
                fuzz_assert(lq.metadata[i].key[0] != '\0');
            fuzz_assert(!lq.template_id[0] || api_id_valid(lq.template_id));
        } else {
            check_failure(&err);
            fuzz_assert(lq.n_metadata == 0 && lq.limit == 0);
        }
        free(q);
        break;
    }
    case 4: {
        char *s = strndup(body, len);
        int64_t ms, again;
        if (api_time_parse(s, &ms) == 0 && ms >= 0 && ms < 253402300800000LL) {
            char out[32];
            api_time_format(ms, out);
            fuzz_assert(api_time_parse(out, &again) == 0 && again == ms);
        }
        free(s);
        break;
    }
    case 5: {
        char *s = strndup(body, len);
        if (api_id_valid(s))
            fuzz_assert(
                strlen(s) >= 1 && strlen(s) <= STORE_ID_MAX &&
                strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                    strlen(s));
        free(s);
        break;
    }
    }
    return 0;
}
