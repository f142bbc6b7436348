/* src/api/control_json: E2B's create, connect, timeout and pause bodies as the SDK sends them
 * (captured shapes, ../shared/e2b/PROTOCOL.md) and hostile ones; the list query with the SDK's
 * triple-encoded metadata; the Sandbox objects the SDK reads; RFC 3339 times; ids. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/control_json.h"
#include "tap.h"

#define BODY(s) s, strlen(s)

static void create_bodies(void)
{
    struct api_new_sandbox ns;
    err_t err = {0};
    ok(api_new_sandbox_parse(BODY("{\"templateID\":\"code-interpreter-v1\",\"metadata\":{\"a\":"
                                  "\"b\"},\"envVars\":{\"FOO\":\"bar\"},\"timeout\":120}"),
                             &ns, &err) == 0,
       "the SDK's v2 body parses (%s)", err.msg);
    ok(strcmp(ns.template_id, "code-interpreter-v1") == 0 && ns.timeout_s == 120 &&
           strcmp(ns.metadata_json, "{\"a\":\"b\"}") == 0 &&
           strcmp(ns.env_json, "{\"FOO\":\"bar\"}") == 0 && ns.allow_internet_access &&
           !ns.auto_pause,
       "with its template, timeout, metadata and env vars");
    api_new_sandbox_free(&ns);
    ok(api_new_sandbox_parse(BODY("{\"templateID\":\"base\",\"timeout\":300,\"secure\":true,"
                                  "\"allow_internet_access\":false,\"autoPause\":true,"
                                  "\"autoResume\":{\"enabled\":true},\"network\":{\"allowOut\":[]"
                                  "},\"mcp\":null}"),
                             &ns, &err) == 0 &&
           ns.auto_pause && ns.auto_resume && !ns.allow_internet_access,
       "v1's extra fields, autoPause, autoResume, allow_internet_access; unknown fields ignored");
    ok(!ns.auto_pause_cold, "without autoPauseMemory the deadline's pause keeps the memory");
    api_new_sandbox_free(&ns);
    ok(api_new_sandbox_parse(BODY("{\"autoPause\":true,\"autoPauseMemory\":false}"), &ns, &err) ==
               0 &&
           ns.auto_pause && ns.auto_pause_cold,
       "autoPauseMemory: false");
    api_new_sandbox_free(&ns);
    ok(api_new_sandbox_parse(
           BODY("{\"autoPause\":true,\"autoPauseMemory\":false,\"autoResume\":{\"enabled\":true}}"),
           &ns, &err) < 0 &&
           strstr(err.msg, "autoPauseMemory"),
       "autoPauseMemory: false with autoResume: refused (%s)", err.msg);
    ok(api_new_sandbox_parse(BODY("{\"autoPauseMemory\":\"no\"}"), &ns, &err) < 0,
       "autoPauseMemory not a boolean: refused");
    struct api_connect ac;
    ok(api_connect_parse(BODY("{\"timeout\":60,\"memory\":false}"), &ac, &err) == 0 && ac.reboot &&
           ac.has_timeout,
       "connect {memory: false}: a reboot");
    ok(api_connect_parse(BODY("{}"), &ac, &err) == 0 && !ac.reboot, "connect {}: no reboot");
    ok(api_new_sandbox_parse(BODY("{\"cpuCount\":1,\"memoryMB\":256,\"diskSizeMB\":512}"), &ns,
                             &err) == 0 &&
           ns.cpu_count == 1 && ns.memory_mb == 256 && ns.disk_mb == 512,
       "hutch's cpuCount, memoryMB, diskSizeMB (%s)", err.msg);
    api_new_sandbox_free(&ns);
    const char *bad_resources[] = {"{\"cpuCount\":0}",     "{\"cpuCount\":65}",
                                   "{\"cpuCount\":\"2\"}", "{\"cpuCount\":1.5}",
                                   "{\"memoryMB\":31}",    "{\"memoryMB\":-1}",
                                   "{\"diskSizeMB\":63}",  "{\"diskSizeMB\":1048577}",
                                   "{\"memoryMB\":true}",  "{\"cpuCount\":9223372036854775807}"};
    for (size_t i = 0; i < sizeof bad_resources / sizeof *bad_resources; i++)
        ok(api_new_sandbox_parse(BODY(bad_resources[i]), &ns, &err) < 0 && err.errnum == EINVAL &&
               !ns.metadata_json,
           "%s refused: %s", bad_resources[i], err.msg);
    ok(api_new_sandbox_parse("", 0, &ns, &err) == 0 && strcmp(ns.template_id, "base") == 0 &&
           ns.timeout_s == API_TIMEOUT_DEFAULT_S && strcmp(ns.metadata_json, "{}") == 0,
       "an empty body: base, 300 s, no metadata");
    api_new_sandbox_free(&ns);

    static const struct {
        const char *body, *says;
        int errnum;
    } bad[] = {
        {"{", "not JSON", EINVAL},
        {"[]", "JSON object", EINVAL},
        {"{\"a\":1,\"a\":2}", "not JSON", EINVAL},
        {"{\"templateID\":5}", "templateID must be a string", EINVAL},
        {"{\"templateID\":\"../etc\"}", "templateID must be letters", EINVAL},
        {"{\"templateID\":\"\"}", "templateID must be letters", EINVAL},
        {"{\"timeout\":\"60\"}", "timeout must be a whole number", EINVAL},
        {"{\"timeout\":1.5}", "timeout must be a whole number", EINVAL},
        {"{\"timeout\":-1}", "timeout must be between", EINVAL},
        {"{\"timeout\":0}", "at least 1 second", EINVAL},
        {"{\"timeout\":99999999999}", "timeout must be between", EINVAL},
        {"{\"autoPause\":\"yes\"}", "autoPause must be true or false", EINVAL},
        {"{\"autoResume\":{\"enabled\":1}}", "autoResume must be", EINVAL},
        {"{\"metadata\":[\"a\"]}", "metadata must be an object", EINVAL},
        {"{\"metadata\":{\"a\":1}}", "metadata.a must be a string", EINVAL},
        {"{\"metadata\":{\"a\":\"x\\u0000y\"}}", "is not allowed", EINVAL},
        {"{\"envVars\":{\"1X\":\"v\"}}", "not a variable name", EINVAL},
        {"{\"envVars\":{\"A=B\":\"v\"}}", "not a variable name", EINVAL},
        {"{\"envVars\":{\"\":\"v\"}}", "is empty", EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_clear(&err);
        int rc = api_new_sandbox_parse(BODY(bad[i].body), &ns, &err);
        ok(rc < 0 && err.errnum == bad[i].errnum && strstr(err.msg, bad[i].says) &&
               !ns.metadata_json,
           "%s: refused, \"%s\"", bad[i].body, err.msg);
    }

    /* sizes */
    char *big = malloc(1 << 20);
    strcpy(big, "{\"metadata\":{");
    for (int i = 0; i <= API_METADATA_MAX_ENTRIES; i++)
        sprintf(big + strlen(big), "%s\"k%d\":\"v\"", i ? "," : "", i);
    strcat(big, "}}");
    ok(api_new_sandbox_parse(BODY(big), &ns, &err) < 0 && err.errnum == E2BIG,
       "%d metadata entries: E2BIG (%s)", API_METADATA_MAX_ENTRIES + 1, err.msg);
    snprintf(big, 1 << 20, "{\"envVars\":{\"A\":\"%0*d\"}}", API_ENV_VALUE_MAX + 1, 0);
    ok(api_new_sandbox_parse(BODY(big), &ns, &err) < 0 && err.errnum == ENAMETOOLONG &&
           strstr(err.msg, "envVars.A"),
       "an env value over %d bytes: refused by name (%s)", API_ENV_VALUE_MAX, err.msg);
    snprintf(big, 1 << 20, "{\"envVars\":{\"A\":\"%0*d\"}}", API_ENV_VALUE_MAX, 0);
    ok(api_new_sandbox_parse(BODY(big), &ns, &err) == 0, "one of exactly %d bytes is taken",
       API_ENV_VALUE_MAX);
    api_new_sandbox_free(&ns);
    strcpy(big, "{\"envVars\":{");
    for (int i = 0; i < 10; i++)
        sprintf(big + strlen(big), "%s\"V%d\":\"%0*d\"", i ? "," : "", i, API_ENV_VALUE_MAX, 0);
    strcat(big, "}}");
    ok(api_new_sandbox_parse(BODY(big), &ns, &err) < 0 && err.errnum == E2BIG,
       "env vars over %u bytes in all: E2BIG", API_ENV_TOTAL_MAX);
    int depth = 100000;
    for (int i = 0; i < depth; i++)
        big[i] = '[';
    big[depth] = '\0';
    ok(api_new_sandbox_parse(big, (size_t)depth, &ns, &err) < 0 && err.errnum == EINVAL,
       "100,000 nested arrays: refused, no stack overflow");
    free(big);
}

static void other_bodies(void)
{
    err_t err = {0};
    struct api_connect c;
    ok(api_connect_parse(BODY("{\"timeout\":60}"), &c, &err) == 0 && c.has_timeout &&
           c.timeout_s == 60,
       "connect with a timeout");
    ok(api_connect_parse("", 0, &c, &err) == 0 && !c.has_timeout, "connect with no body");
    int64_t t;
    ok(api_timeout_parse(BODY("{\"timeout\":30}"), &t, &err) == 0 && t == 30, "set timeout");
    ok(api_timeout_parse(BODY("{}"), &t, &err) < 0 && strstr(err.msg, "timeout is required"),
       "set timeout without one: refused");
    bool keep;
    ok(api_pause_parse(BODY("{}"), &keep, &err) == 0 && keep, "pause {}: memory kept");
    ok(api_pause_parse(BODY("{\"memory\":false}"), &keep, &err) == 0 && !keep,
       "pause {\"memory\":false}: a reboot on resume");
    ok(api_pause_parse(BODY("{\"memory\":0}"), &keep, &err) < 0 && keep,
       "pause {\"memory\":0}: refused");
}

static void list_queries(void)
{
    err_t err = {0};
    static struct api_list_query q;
    ok(api_list_query_parse("", &q, &err) == 0 && q.limit == API_LIST_LIMIT_DEFAULT &&
           q.states == (SANDBOX_STATE_BIT(SANDBOX_RUNNING) | SANDBOX_STATE_BIT(SANDBOX_PAUSED)) &&
           !q.oldest_first && q.n_metadata == 0,
       "no query: running and paused, newest first, %d at most", API_LIST_LIMIT_DEFAULT);
    /* What the SDK sends for query {metadata: {"a b": "c&d", user: "x=y"}, state: ["paused"]}:
     * each key and value encodeURIComponent'd, joined by URLSearchParams, encoded once more. */
    const char *sdk = "metadata=a%252520b%3Dc%252526d%26user%3Dx%25253Dy&state=paused&limit=5&"
                      "order=asc&startedAfter=2026-12-03T20%3A17%3A39.123Z&template=base&"
                      "nextToken=i2x6zabcdefghij01234&unknown=1";
    int rc = api_list_query_parse(sdk, &q, &err);
    ok(rc == 0, "the SDK's list query parses (%s)", rc ? err.msg : "ok");
    ok(q.n_metadata == 2 && strcmp(q.metadata[0].key, "a b") == 0 &&
           strcmp(q.metadata[0].value, "c&d") == 0 && strcmp(q.metadata[1].key, "user") == 0 &&
           strcmp(q.metadata[1].value, "x=y") == 0,
       "metadata pairs decoded three times, as the SDK encoded them (%zu: \"%s\"=\"%s\")",
       q.n_metadata, q.metadata[0].key, q.metadata[0].value);
    ok(q.states == SANDBOX_STATE_BIT(SANDBOX_PAUSED) && q.limit == 5 && q.oldest_first &&
           q.started_after_ms == 1796329059123LL && strcmp(q.template_id, "base") == 0 &&
           strcmp(q.next_token, "i2x6zabcdefghij01234") == 0,
       "state, limit, order, startedAfter, template, nextToken");
    ok(api_list_query_parse("state=running,paused", &q, &err) == 0 &&
           q.states == (SANDBOX_STATE_BIT(SANDBOX_RUNNING) | SANDBOX_STATE_BIT(SANDBOX_PAUSED)),
       "states joined by a comma");
    ok(api_metadata_matches("{\"a b\":\"c&d\",\"user\":\"x=y\",\"more\":\"1\"}", &q) ||
           q.n_metadata == 0,
       "no metadata filter matches anything");
    api_list_query_parse(sdk, &q, &err);
    ok(api_metadata_matches("{\"a b\":\"c&d\",\"user\":\"x=y\",\"more\":\"1\"}", &q) &&
           !api_metadata_matches("{\"a b\":\"c&d\"}", &q) &&
           !api_metadata_matches("{\"a b\":\"c&d\",\"user\":\"x\"}", &q) &&
           !api_metadata_matches("garbage", &q),
       "metadata filters: every pair must match");
    static const char *const bad[] = {"state=killed",
                                      "state=",
                                      "limit=0",
                                      "limit=1001",
                                      "limit=5x",
                                      "order=up",
                                      "startedAfter=yesterday",
                                      "template=..%2Fx",
                                      "metadata=%ZZ",
                                      "nextToken=%2F",
                                      "state=%00running"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_clear(&err);
        ok(api_list_query_parse(bad[i], &q, &err) < 0 && err.errnum == EINVAL && err.msg[0],
           "%s: refused (%s)", bad[i], err.msg);
    }
}

static void objects(void)
{
    err_t err = {0};
    struct store_sandbox sb = {.state = SANDBOX_PAUSED,
                               .created_ms = 1796329059123LL,
                               .deadline_ms = 1796329359123LL,
                               .cpu_count = 2,
                               .memory_mb = 512,
                               .disk_mb = 1024,
                               .auto_pause = true,
                               .metadata_json = "{\"a\":\"b\"}"};
    strcpy(sb.id, "i2x6zabcdefghij01234");
    strcpy(sb.template_id, "base");
    strcpy(sb.envd_token, "tok");
    char *created = api_sandbox_json(&sb, API_SANDBOX_CREATED, "0.6.4", &err);
    json_t *o = json_loads(created, 0, NULL);
    ok(o && strcmp(json_string_value(json_object_get(o, "sandboxID")), sb.id) == 0 &&
           strcmp(json_string_value(json_object_get(o, "envdVersion")), "0.6.4") == 0 &&
           strcmp(json_string_value(json_object_get(o, "envdAccessToken")), "tok") == 0 &&
           json_is_string(json_object_get(o, "clientID")) && !json_object_get(o, "state"),
       "Sandbox: id, template, clientID, envdVersion, the token (%s)", created);
    json_decref(o);
    free(created);
    char *detail = api_sandbox_json(&sb, API_SANDBOX_DETAIL, "0.6.4", &err);
    o = json_loads(detail, 0, NULL);
    json_t *lifecycle = json_object_get(o, "lifecycle");
    ok(o && strcmp(json_string_value(json_object_get(o, "state")), "paused") == 0 &&
           strcmp(json_string_value(json_object_get(o, "startedAt")), "2026-12-03T20:17:39.123Z") ==
               0 &&
           strcmp(json_string_value(json_object_get(o, "endAt")), "2026-12-03T20:22:39.123Z") ==
               0 &&
           json_integer_value(json_object_get(o, "memoryMB")) == 512 &&
           json_integer_value(json_object_get(o, "diskSizeMB")) == 1024 &&
           strcmp(json_string_value(json_object_get(json_object_get(o, "metadata"), "a")), "b") ==
               0 &&
           strcmp(json_string_value(json_object_get(lifecycle, "onTimeout")), "pause") == 0,
       "SandboxDetail: state, times in RFC 3339, resources, metadata, lifecycle (%s)", detail);
    json_decref(o);
    free(detail);
    char *listed = api_sandbox_json(&sb, API_SANDBOX_LISTED, "0.6.4", &err);
    o = json_loads(listed, 0, NULL);
    ok(o && !json_object_get(o, "envdAccessToken") &&
           json_is_array(json_object_get(o, "volumeMounts")),
       "ListedSandbox: no token");
    json_decref(o);
    free(listed);
}

static void times_and_ids(void)
{
    int64_t ms;
    ok(api_time_parse("2026-12-03T21:17:39.5+01:00", &ms) == 0 && ms == 1796329059500LL,
       "an offset and a short fraction");
    ok(api_time_parse("2026-12-03T20:17:39Z", &ms) == 0 && ms == 1796329059000LL, "no fraction");
    static const char *const bad[] = {"2026-02-31T00:00:00Z",
                                      "2026-12-03",
                                      "2026-12-03T20:17:39",
                                      "2026-12-03T20:17:39.Z",
                                      "2026-12-03T25:00:00Z",
                                      "2026-12-03T20:17:39Zjunk",
                                      ""};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused += api_time_parse(bad[i], &ms) < 0;
    ok(refused == (int)(sizeof bad / sizeof bad[0]), "bad times refused (%d of %zu)", refused,
       sizeof bad / sizeof bad[0]);
    char a[API_SANDBOX_ID_LEN + 1], b[API_SANDBOX_ID_LEN + 1];
    api_sandbox_id_new(a);
    api_sandbox_id_new(b);
    ok(strlen(a) == API_SANDBOX_ID_LEN &&
           strspn(a, "abcdefghijklmnopqrstuvwxyz0123456789") == API_SANDBOX_ID_LEN &&
           strcmp(a, b) != 0 && api_id_valid(a),
       "ids: %d of [a-z0-9], fresh each time (%s, %s)", API_SANDBOX_ID_LEN, a, b);
    ok(!api_id_valid("") && !api_id_valid("..") && !api_id_valid("a/b") && !api_id_valid("-x") &&
           !api_id_valid("a b") && api_id_valid("code-interpreter-v1") && api_id_valid("base"),
       "ids and template ids: checked before any lookup");
}

int main(void)
{
    create_bodies();
    other_bodies();
    list_queries();
    objects();
    times_and_ids();
    return done_testing();
}
