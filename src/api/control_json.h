/* E2B's control-plane shapes (the SDK's, e2b@2.51 and earlier 2.x; ../shared/e2b/PROTOCOL.md
 * section 2): request bodies and list queries parsed from hostile input with explicit limits,
 * and the Sandbox / SandboxDetail / ListedSandbox objects written from the store's rows. Pure
 * functions: no I/O, no state, nothing of HTTP beyond the query string. Every parser fills err
 * with EINVAL (or ENAMETOOLONG, E2BIG) and a message naming the field, for a 400 that says what is
 * wrong; nothing is half-filled on failure (the out struct is cleared). Unknown fields are ignored,
 * as E2B's API ignores them (the SDK sends network, mcp, volumeMounts, ...). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/store.h"
#include "util/err.h"

/* Limits on what a client may ask for (E2B documents none; these keep one request small). */
#define API_METADATA_MAX_ENTRIES 64
#define API_METADATA_KEY_MAX     256
#define API_METADATA_VALUE_MAX   4096
#define API_ENV_MAX_ENTRIES      512
#define API_ENV_NAME_MAX         256
#define API_ENV_VALUE_MAX        32768
#define API_ENV_TOTAL_MAX        (256u << 10) /* all names and values together */
#define API_TIMEOUT_DEFAULT_S    300
#define API_TIMEOUT_MAX_S        (30 * 86400) /* 30 days */
#define API_LIST_LIMIT_DEFAULT   100
#define API_LIST_LIMIT_MAX       1000
#define API_SANDBOX_ID_LEN       20 /* E2B's: 20 characters of [a-z0-9] */
/* hutch's extensions to the create body (docs/API.md): a sandbox's resources. 0 in
 * api_new_sandbox: absent, the template's default. */
#define API_CPU_COUNT_MAX 64
#define API_MEMORY_MB_MIN 32
#define API_MEMORY_MB_MAX (1u << 20) /* 1 TiB */
#define API_DISK_MB_MIN   64
#define API_DISK_MB_MAX   (1u << 20) /* 1 TiB */

/* POST /v2/sandboxes (NewSandboxV2) and POST /sandboxes (NewSandbox, e2b <= 2.50). */
struct api_new_sandbox {
    char template_id[STORE_ID_MAX + 1]; /* "base" when absent */
    int64_t timeout_s;                  /* API_TIMEOUT_DEFAULT_S when absent */
    bool auto_pause;                    /* autoPause: pause, not kill, at the deadline */
    bool auto_resume;                   /* autoResume.enabled */
    bool auto_pause_cold;               /* autoPauseMemory: false (with autoPause) */
    bool allow_internet_access;         /* allow_internet_access, true when absent */
    char *metadata_json;                /* a JSON object of strings, "{}" when absent; owned */
    char *env_json;                     /* envVars, a JSON object of strings; owned */
    /* hutch's cpuCount, memoryMB, diskSizeMB; 0 when absent */
    unsigned cpu_count, memory_mb, disk_mb;
};
int api_new_sandbox_parse(const char *body, size_t len, struct api_new_sandbox *out, err_t *err);
void api_new_sandbox_free(struct api_new_sandbox *ns);

/* POST /v2/sandboxes/{id}/connect, /sandboxes/{id}/connect and /resume: {timeout?, memory?}
 * (an empty body is {}). */
struct api_connect {
    bool has_timeout;
    int64_t timeout_s;
    bool reboot; /* memory: false (the SDK's onResume "reboot"): a paused one boots afresh */
};
int api_connect_parse(const char *body, size_t len, struct api_connect *out, err_t *err);
/* POST /sandboxes/{id}/timeout: {"timeout": seconds}, required. */
int api_timeout_parse(const char *body, size_t len, int64_t *timeout_s, err_t *err);
/* POST /sandboxes/{id}/pause: {} or {"memory": false}; *keep_memory true unless memory is
 * false. */
int api_pause_parse(const char *body, size_t len, bool *keep_memory, err_t *err);

/* GET /v2/sandboxes?state=running,paused&metadata=...&template=&startedAfter=&order=&limit=
 * &nextToken= */
struct api_metadata_pair {
    char key[API_METADATA_KEY_MAX + 1];
    char value[API_METADATA_VALUE_MAX + 1];
};
struct api_list_query {
    unsigned states; /* SANDBOX_STATE_BIT of running and paused; both when absent */
    char template_id[STORE_ID_MAX + 1]; /* "" for any */
    int64_t started_after_ms;           /* 0 for any */
    bool oldest_first;                  /* order=asc */
    size_t limit;
    char next_token[STORE_ID_MAX + 1]; /* "" on the first page */
    struct api_metadata_pair metadata[API_METADATA_MAX_ENTRIES];
    size_t n_metadata;
};
/* query: the part of the URL after '?', still percent-encoded ("" for none). */
int api_list_query_parse(const char *query, struct api_list_query *out, err_t *err);
/* Whether a sandbox's metadata (a JSON object of strings, as stored) has every pair of q. */
bool api_metadata_matches(const char *metadata_json, const struct api_list_query *q);

/* The objects the SDK reads. */
enum api_sandbox_view {
    API_SANDBOX_CREATED, /* Sandbox: create and connect */
    API_SANDBOX_DETAIL,  /* SandboxDetail: GET /sandboxes/{id} */
    API_SANDBOX_LISTED,  /* ListedSandbox: an item of GET /v2/sandboxes */
};
/* The JSON text of sb as view shows it (malloc'd; NULL with err). envd_version: the version
 * hutch's agent reports (a semver). */
char *api_sandbox_json(const struct store_sandbox *sb, enum api_sandbox_view view,
                       const char *envd_version, err_t *err);

/* RFC 3339 in UTC with milliseconds, "2026-12-03T20:17:39.123Z"; out holds 32 bytes. */
void api_time_format(int64_t ms, char out[32]);
/* RFC 3339 with any offset and fraction ("2026-12-03T21:17:39.5+01:00") to ms since the epoch;
 * -1 for anything else. */
int api_time_parse(const char *s, int64_t *ms);

/* A new sandbox id: API_SANDBOX_ID_LEN characters of [a-z0-9] from libsodium's generator. */
void api_sandbox_id_new(char out[API_SANDBOX_ID_LEN + 1]);
/* Whether s could be an id the daemon made or a template id: 1 to STORE_ID_MAX characters of
 * [a-zA-Z0-9._-], not starting with '.' or '-'. Checked before any lookup. */
bool api_id_valid(const char *s);
