/* The daemon's state in SQLite (DESIGN.md, "Sandboxes: state and lifecycle"): the sandboxes, each
 * one's event log and its recent metrics, the API keys. One database file under the state
 * directory, in WAL mode, with a versioned schema that store_open migrates forward (one transaction
 * per step). Every lifecycle transition is one transaction that changes the sandbox's row and
 * appends its event, so a crash (kill -9 at any moment) leaves either both or neither.
 * Single-threaded, like the daemon: calls run to completion on the caller's thread (SQLite in WAL
 * mode commits in well under a millisecond on a local disk; the daemon's loop calls it directly).
 *
 * Every call returns 0 (or a count) or -1 with err; a sandbox that does not exist is ENOENT, a
 * transition from a state that does not allow it EBUSY (with both states named), a duplicate id
 * EEXIST. Strings are copied in; what a call hands out is the caller's to free where said. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/state.h"
#include "util/err.h"

/* The schema this build writes; store_open refuses a newer database (made by a newer hutch). */
#define STORE_SCHEMA_VERSION 4

/* Bounds on what is stored (the API checks the same before it gets here). */
#define STORE_ID_MAX     64         /* sandbox ids, template ids, aliases */
#define STORE_TOKEN_MAX  128        /* envd access tokens */
#define STORE_REASON_MAX 512        /* why a sandbox ended */
#define STORE_JSON_MAX   (1u << 20) /* metadata, env vars, an event's detail */

struct store;

struct store_sandbox {
    char id[STORE_ID_MAX + 1];
    char template_id[STORE_ID_MAX + 1];
    char alias[STORE_ID_MAX + 1]; /* the template's alias as asked, "" when none */
    enum sandbox_state state;
    int64_t created_ms;  /* wall clock, ms since the epoch */
    int64_t deadline_ms; /* when it is killed or paused (auto_pause) */
    unsigned cpu_count, memory_mb, disk_mb;
    bool auto_pause, auto_resume;
    /* paused without its memory: no process left, its disk layer kept; a resume boots it again
     * (schema version 2) */
    bool cold;
    bool auto_pause_cold; /* with auto_pause: the deadline's pause is without memory (version 3) */
    char envd_token[STORE_TOKEN_MAX + 1];
    char reason[STORE_REASON_MAX + 1]; /* why it was killed or failed, "" while live */
    char *metadata_json;               /* a JSON object; owned (store_sandbox_free_fields) */
    char *env_json;                    /* a JSON object of the sandbox's env vars; owned */
};

/* Frees what a store_sandbox owns (the JSON strings) and clears them; the struct stays. */
void store_sandbox_free_fields(struct store_sandbox *sb);

/* Opens (creating it when absent) the database at path, owner-only, in WAL mode, and migrates it
 * to STORE_SCHEMA_VERSION. */
struct store *store_open(const char *path, err_t *err);
void store_close(struct store *st);
/* The schema version of the open database. */
int store_schema_version(struct store *st, err_t *err);

/* A new sandbox, in sb->state, with its "created" event, in one transaction. */
int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, err_t *err);
/* Moves id to state `to` when it is in one of `from` (a set of SANDBOX_STATE_BIT) and the move is
 * one sandbox_state_can allows; reason (may be NULL) is kept for killed and failed; the event
 * (kind, detail_json: NULL for none) is appended in the same transaction. */
int store_sandbox_transition(struct store *st, const char *id, unsigned from, enum sandbox_state to,
                             const char *reason, const char *event_kind,
                             const char *event_detail_json, err_t *err);
/* running -> paused without memory (cold set), with its "paused" event, in one transaction.
 * Every other transition clears cold: only a paused sandbox can be cold. */
int store_sandbox_pause_cold(struct store *st, const char *id, err_t *err);
/* paused with memory -> paused without (cold set), with a "memory_dropped" event: a connect
 * that reboots it (EBUSY when it is not paused with its memory). */
int store_sandbox_drop_memory(struct store *st, const char *id, err_t *err);
int store_sandbox_set_deadline(struct store *st, const char *id, int64_t deadline_ms, err_t *err);
/* A sandbox of the warm pool (src/serve/pool.c; running, but creating in the store until now)
 * becomes the one a create asked for: running, with the alias, created and deadline times,
 * lifecycle flags, metadata and env vars of sb (by sb->id), and a "claimed" event, in one
 * transaction. ENOENT when it is not creating. */
int store_sandbox_claim(struct store *st, const struct store_sandbox *sb, err_t *err);
/* Fills *out (its JSON strings the caller's: store_sandbox_free_fields). */
int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out, err_t *err);

struct store_list_filter {
    unsigned states;          /* a set of SANDBOX_STATE_BIT; 0: every state */
    const char *template_id;  /* NULL: any */
    int64_t created_after_ms; /* 0: any */
    bool oldest_first;        /* default newest first */
    size_t limit;             /* 0: no limit */
    const char *after_id;     /* paging: continue after this id (the previous page's last) */
};
/* Calls cb with each matching sandbox, in order; cb's struct is valid during the call only.
 * Returns how many were listed. */
int store_sandbox_list(struct store *st, const struct store_list_filter *f,
                       void (*cb)(const struct store_sandbox *sb, void *ctx), void *ctx,
                       err_t *err);

struct store_event {
    int64_t seq; /* increasing over the whole database */
    int64_t at_ms;
    const char *kind;   /* "created", "command_started", "command_ended", "paused", ... */
    const char *detail; /* a JSON object or NULL */
};
/* Appends an event to id's log. */
int store_event_add(struct store *st, const char *id, const char *kind, const char *detail_json,
                    err_t *err);
/* Calls cb with id's events after seq after_seq (0: all), oldest first, at most limit (0: all). */
int store_event_list(struct store *st, const char *id, int64_t after_seq, size_t limit,
                     void (*cb)(const struct store_event *ev, void *ctx), void *ctx, err_t *err);
/* Where a scan of a log starts and which way it goes: a page of the log (GET /sandboxes/{id}/logs
 * and /v2/sandboxes/{id}/logs). */
struct store_event_range {
    bool backward;     /* newest first: seq below from_seq, at_ms at most at_ms */
    int64_t from_seq;  /* forward: seq above it (0: from the first); backward: below it (0: none) */
    int64_t at_ms;     /* forward: at_ms at least it; backward: at most it (0: no bound) */
};
/* Calls cb with id's events in r's order until cb returns non-zero or they end. Returns how many
 * cb was called with, or -1 with err. */
int store_event_scan(struct store *st, const char *id, const struct store_event_range *r,
                     int (*cb)(const struct store_event *ev, void *ctx), void *ctx, err_t *err);

/* One metrics sample of a sandbox (src/serve/metrics.h says what each figure is). */
struct store_metric {
    int64_t at_ms; /* wall clock, ms since the epoch; one sample per sandbox and ms */
    unsigned cpu_count;
    double cpu_used_pct;
    uint64_t mem_used, mem_total, mem_cache, disk_used, disk_total;
};
/* Keeps a sample of id's, and drops id's samples taken before keep_after_ms, in one transaction
 * (schema version 4). A sandbox's samples go with it when it is killed or fails. */
int store_metric_add(struct store *st, const char *id, const struct store_metric *m,
                     int64_t keep_after_ms, err_t *err);
/* id's latest samples, at most max, into out oldest first: how many. */
int store_metric_list(struct store *st, const char *id, struct store_metric *out, size_t max,
                      err_t *err);

/* API keys are kept as their BLAKE2b hash (libsodium), never in the clear. */
int store_api_key_add(struct store *st, const char *key, const char *name, err_t *err);
/* 1 when key is one of the stored ones, 0 when not, -1 on error. */
int store_api_key_check(struct store *st, const char *key, err_t *err);
/* How many keys are stored. */
int store_api_key_count(struct store *st, err_t *err);
