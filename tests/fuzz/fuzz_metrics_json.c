/* The metrics query parsers (src/api/metrics_json.h): the first byte picks the parser, the rest
 * (to its first NUL) is the query. Checked: each succeeds with every field inside its limits
 * (seconds within 0..API_METRICS_MAX_S, start <= end when both are given; ids valid, at most
 * API_METRICS_MAX_IDS, at least one), or fails with EINVAL or E2BIG and a message, leaving its
 * output cleared; what a success yields writes as JSON that parses back. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "api/control_json.h"
#include "api/metrics_json.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char query[4096];
    size_t len = size - 1 < sizeof query - 1 ? size - 1 : sizeof query - 1;
    memcpy(query, data + 1, len);
    query[len] = '\0';
    err_t err = {0};
    if (data[0] % 2 == 0) {
        struct api_metrics_query q;
        if (api_metrics_query_parse(query, &q, &err) == 0) {
            fuzz_assert(!q.has_start || (q.start_s >= 0 && q.start_s <= API_METRICS_MAX_S));
            fuzz_assert(!q.has_end || (q.end_s >= 0 && q.end_s <= API_METRICS_MAX_S));
            fuzz_assert(!(q.has_start && q.has_end) || q.start_s <= q.end_s);
            struct api_metric m = {.at_ms = q.start_s * 1000, .cpu_count = 2, .cpu_used_pct = 1.5};
            char *json = api_metrics_json(&m, 1, &err);
            fuzz_assert(json);
            json_t *back = json_loads(json, 0, NULL);
            fuzz_assert(json_is_array(back) && json_array_size(back) == 1);
            json_decref(back);
            free(json);
        } else {
            fuzz_assert(err.errnum == EINVAL && err.msg[0]);
            fuzz_assert(!q.has_start && !q.has_end && q.start_s == 0 && q.end_s == 0);
        }
        return 0;
    }
    static struct api_metrics_ids ids;
    if (api_metrics_ids_parse(query, &ids, &err) == 0) {
        fuzz_assert(ids.n >= 1 && ids.n <= API_METRICS_MAX_IDS);
        for (size_t i = 0; i < ids.n; i++)
            fuzz_assert(api_id_valid(ids.ids[i]));
        const struct api_metric *none[API_METRICS_MAX_IDS] = {0};
        char *json = api_metrics_by_sandbox_json(ids.ids, none, ids.n, &err);
        fuzz_assert(json);
        json_t *back = json ? json_loads(json, 0, NULL) : NULL;
        fuzz_assert(json_is_object(json_object_get(back, "sandboxes")));
        json_decref(back);
        free(json);
    } else {
        fuzz_assert((err.errnum == EINVAL || err.errnum == E2BIG) && err.msg[0]);
        fuzz_assert(ids.n == 0);
    }
    return 0;
}
