/* src/sandbox: the lifecycle's transitions, and the SQLite store: schema and migrations, sandboxes,
 * their event log, lists with filters and paging, API keys kept hashed, bad input refused, and a
 * writer killed with SIGKILL at random moments leaving every sandbox with its "created" event
 * (the row and its event are one transaction). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/state.h"
#include "sandbox/store.h"
#include "tap.h"

static char dir[64], db_path[128];

static void transitions(void)
{
    /* Every pair, against the table in DESIGN.md. */
    static const char *const allowed[] = {"creating>running", "creating>failed", "running>paused",
                                          "running>killed",   "running>failed",  "paused>running",
                                          "paused>killed",    "paused>failed"};
    int wrong = 0;
    for (int a = 0; a < SANDBOX_STATE_COUNT; a++)
        for (int b = 0; b < SANDBOX_STATE_COUNT; b++) {
            char pair[32];
            snprintf(pair, sizeof pair, "%s>%s", sandbox_state_name(a), sandbox_state_name(b));
            bool want = false;
            for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
                want |= strcmp(allowed[i], pair) == 0;
            if (sandbox_state_can(a, b) != want) {
                printf("# %s: %d\n", pair, sandbox_state_can(a, b));
                wrong++;
            }
        }
    ok(wrong == 0, "the 25 pairs of states: exactly the 8 moves of the lifecycle are allowed");
    ok(!sandbox_state_can(SANDBOX_KILLED, SANDBOX_RUNNING) && !sandbox_state_can(99, 0) &&
           !sandbox_state_can(0, -1),
       "nothing leaves killed; a state out of range is no state");
    ok(sandbox_state_parse("paused") == SANDBOX_PAUSED && sandbox_state_parse("Paused") == -1 &&
           sandbox_state_parse("") == -1,
       "names parse exactly");
}

static struct store_sandbox make(const char *id, const char *tpl, int64_t created)
{
    struct store_sandbox sb = {.state = SANDBOX_CREATING,
                               .created_ms = created,
                               .deadline_ms = created + 300000,
                               .cpu_count = 2,
                               .memory_mb = 512,
                               .disk_mb = 1024,
                               .auto_pause = true,
                               .auto_pause_cold = true};
    snprintf(sb.id, sizeof sb.id, "%s", id);
    snprintf(sb.template_id, sizeof sb.template_id, "%s", tpl);
    snprintf(sb.envd_token, sizeof sb.envd_token, "token-%s", id);
    return sb;
}

struct collected {
    char ids[64][STORE_ID_MAX + 1];
    char kinds[64][32];
    size_t n;
};

static void collect_sandbox(const struct store_sandbox *sb, void *ctx)
{
    struct collected *c = ctx;
    if (c->n < 64)
        snprintf(c->ids[c->n++], sizeof c->ids[0], "%s", sb->id);
}

static void collect_event(const struct store_event *ev, void *ctx)
{
    struct collected *c = ctx;
    if (c->n < 64)
        snprintf(c->kinds[c->n++], sizeof c->kinds[0], "%s", ev->kind);
}

struct scanned {
    struct collected c;
    int64_t seqs[64];
    size_t stop_after;
};

static int scan_event(const struct store_event *ev, void *ctx)
{
    struct scanned *s = ctx;
    if (s->c.n < 64)
        s->seqs[s->c.n] = ev->seq;
    collect_event(ev, &s->c);
    return s->c.n >= s->stop_after;
}

static const char *joined(const struct collected *c, bool kinds)
{
    static char out[2048];
    out[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        strcat(out, i ? "," : "");
        strcat(out, kinds ? c->kinds[i] : c->ids[i]);
    }
    return out;
}

static void sandboxes(struct store *st)
{
    err_t err = {0};
    struct store_sandbox sb = make("sb-a", "base", 1000);
    sb.metadata_json = "{\"user\":\"alice\"}";
    sb.env_json = "{\"A\":\"1\"}";
    int rc = store_sandbox_insert(st, &sb, &err);
    ok(rc == 0, "insert a sandbox (%s)", rc ? err.msg : "ok");
    ok(store_sandbox_insert(st, &sb, &err) < 0 && err.errnum == EEXIST,
       "the same id again: EEXIST (%s)", err.msg);
    struct store_sandbox got;
    ok(store_sandbox_get(st, "sb-a", &got, &err) == 0, "get it back");
    ok(strcmp(got.template_id, "base") == 0 && got.state == SANDBOX_CREATING &&
           got.created_ms == 1000 && got.deadline_ms == 301000 && got.cpu_count == 2 &&
           got.memory_mb == 512 && got.disk_mb == 1024 && got.auto_pause && got.auto_pause_cold &&
           !got.auto_resume && strcmp(got.envd_token, "token-sb-a") == 0 &&
           strcmp(got.metadata_json, "{\"user\":\"alice\"}") == 0 &&
           strcmp(got.env_json, "{\"A\":\"1\"}") == 0,
       "every field as stored");
    store_sandbox_free_fields(&got);
    ok(store_sandbox_get(st, "sb-none", &got, &err) < 0 && err.errnum == ENOENT,
       "an unknown id: ENOENT (%s)", err.msg);

    struct store_sandbox bad = make("", "base", 1);
    ok(store_sandbox_insert(st, &bad, &err) < 0 && err.errnum == EINVAL, "an empty id: EINVAL");
    bad = make("sb-big", "base", 1);
    char *huge = malloc(STORE_JSON_MAX + 2);
    memset(huge, 'x', STORE_JSON_MAX + 1);
    huge[STORE_JSON_MAX + 1] = '\0';
    bad.metadata_json = huge;
    ok(store_sandbox_insert(st, &bad, &err) < 0 && err.errnum == ENAMETOOLONG &&
           strstr(err.msg, "metadata"),
       "metadata over %u bytes is refused by name (%s)", STORE_JSON_MAX, err.msg);
    ok(store_sandbox_get(st, "sb-big", &got, &err) < 0 && err.errnum == ENOENT,
       "and nothing of it is stored");
    free(huge);

    /* transitions */
    unsigned live = SANDBOX_STATES_LIVE;
    rc = store_sandbox_transition(st, "sb-a", live, SANDBOX_RUNNING, NULL, "started", NULL, &err);
    ok(rc == 0, "creating -> running (%s)", rc ? err.msg : "ok");
    ok(store_sandbox_transition(st, "sb-a", live, SANDBOX_CREATING, NULL, NULL, NULL, &err) < 0 &&
           err.errnum == EBUSY && strstr(err.msg, "is running"),
       "running -> creating: EBUSY, naming the state (%s)", err.msg);
    ok(store_sandbox_transition(st, "sb-a", SANDBOX_STATE_BIT(SANDBOX_PAUSED), SANDBOX_RUNNING,
                                NULL, NULL, NULL, &err) < 0 &&
           err.errnum == EBUSY,
       "a move from a state the caller did not expect: EBUSY (resume of a running sandbox)");
    ok(store_sandbox_transition(st, "sb-a", live, SANDBOX_PAUSED, NULL, NULL, "{\"memory\":true}",
                                &err) == 0 &&
           store_sandbox_transition(st, "sb-a", live, SANDBOX_RUNNING, NULL, "resumed", NULL,
                                    &err) == 0,
       "running -> paused -> running");
    ok(store_sandbox_transition(st, "sb-a", live, SANDBOX_KILLED, "timeout", "timed_out", NULL,
                                &err) == 0,
       "running -> killed, with its reason");
    ok(store_sandbox_transition(st, "sb-a", ~0u, SANDBOX_RUNNING, NULL, NULL, NULL, &err) < 0 &&
           err.errnum == EBUSY,
       "nothing comes back from killed");
    ok(store_sandbox_get(st, "sb-a", &got, &err) == 0 && got.state == SANDBOX_KILLED &&
           strcmp(got.reason, "timeout") == 0,
       "the row says killed, and why");
    store_sandbox_free_fields(&got);
    ok(store_sandbox_transition(st, "sb-none", live, SANDBOX_RUNNING, NULL, NULL, NULL, &err) < 0 &&
           err.errnum == ENOENT,
       "a transition of an unknown sandbox: ENOENT");
    ok(store_sandbox_set_deadline(st, "sb-a", 5000, &err) == 0 &&
           store_sandbox_set_deadline(st, "sb-none", 5000, &err) < 0 && err.errnum == ENOENT,
       "the deadline is set; an unknown sandbox's is ENOENT");

    /* its event log */
    ok(store_event_add(st, "sb-a", "command_ended", "{\"exit_code\":3}", &err) == 0,
       "an event is added");
    ok(store_event_add(st, "sb-none", "x", NULL, &err) < 0 && err.errnum == ENOENT,
       "an event of an unknown sandbox: ENOENT (%s)", err.msg);
    struct collected c = {0};
    ok(store_event_list(st, "sb-a", 0, 0, collect_event, &c, &err) == 6, "6 events");
    is_str(joined(&c, true), "created,started,paused,resumed,timed_out,command_ended",
           "created, each transition's, then the added one, in order");
    c.n = 0;
    ok(store_event_list(st, "sb-a", 0, 2, collect_event, &c, &err) == 2 &&
           strcmp(joined(&c, true), "created,started") == 0,
       "a list of at most 2: the first two");

    /* a scan either way, from a seq and a time (the logs' pages) */
    struct scanned sc = {.stop_after = 100};
    ok(store_event_scan(st, "sb-a", &(struct store_event_range){.backward = true}, scan_event, &sc,
                        &err) == 6 &&
           strcmp(joined(&sc.c, true), "command_ended,timed_out,resumed,paused,started,created") == 0,
       "backward from the end: newest first");
    int64_t third = sc.seqs[3]; /* paused */
    sc = (struct scanned){.stop_after = 100};
    store_event_scan(st, "sb-a", &(struct store_event_range){.backward = true, .from_seq = third},
                     scan_event, &sc, &err);
    is_str(joined(&sc.c, true), "started,created", "backward below a seq");
    sc = (struct scanned){.stop_after = 100};
    store_event_scan(st, "sb-a", &(struct store_event_range){.from_seq = third}, scan_event, &sc,
                     &err);
    is_str(joined(&sc.c, true), "resumed,timed_out,command_ended", "forward above a seq");
    sc = (struct scanned){.stop_after = 2};
    ok(store_event_scan(st, "sb-a", &(struct store_event_range){0}, scan_event, &sc, &err) == 2,
       "the callback stops the scan");
    sc = (struct scanned){.stop_after = 100};
    ok(store_event_scan(st, "sb-a", &(struct store_event_range){.at_ms = INT64_MAX}, scan_event, &sc,
                        &err) == 0 &&
           store_event_scan(st, "sb-a", &(struct store_event_range){.backward = true, .at_ms = 1},
                            scan_event, &sc, &err) == 0,
       "forward from after the last event, backward from before the first: none");
}

static void lists(struct store *st)
{
    err_t err = {0};
    /* 20 sandboxes: created at 10, 20, ... (two at 100, ordered by id); every third paused. */
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "l%02d", i);
        struct store_sandbox sb =
            make(id, i % 2 ? "code-interpreter-v1" : "base", i == 10 ? 100 : 10 * (i + 1));
        store_sandbox_insert(st, &sb, &err);
        store_sandbox_transition(st, id, SANDBOX_STATES_LIVE, SANDBOX_RUNNING, NULL, NULL, NULL,
                                 &err);
        if (i % 3 == 0)
            store_sandbox_transition(st, id, SANDBOX_STATES_LIVE, SANDBOX_PAUSED, NULL, NULL, NULL,
                                     &err);
    }
    struct collected c = {0};
    struct store_list_filter f = {.states = SANDBOX_STATE_BIT(SANDBOX_PAUSED), .limit = 3};
    ok(store_sandbox_list(st, &f, collect_sandbox, &c, &err) == 3, "paused, 3 at most");
    is_str(joined(&c, false), "l18,l15,l12", "newest first by default");
    c.n = 0;
    f = (struct store_list_filter){.template_id = "base",
                                   .states = SANDBOX_STATE_BIT(SANDBOX_RUNNING),
                                   .oldest_first = true,
                                   .created_after_ms = 50};
    store_sandbox_list(st, &f, collect_sandbox, &c, &err);
    is_str(joined(&c, false), "l08,l10,l14,l16", "template, state and created-after filters");

    /* Pages of 6 by the previous page's last id: all 20 once, in order. */
    char all[2048] = "", last[STORE_ID_MAX + 1] = "";
    int pages = 0;
    for (;;) {
        c.n = 0;
        f = (struct store_list_filter){
            .states = SANDBOX_STATES_LIVE, .limit = 6, .after_id = last[0] ? last : NULL};
        int n = store_sandbox_list(st, &f, collect_sandbox, &c, &err);
        if (n <= 0)
            break;
        pages++;
        strcat(all, all[0] ? "," : "");
        strcat(all, joined(&c, false));
        snprintf(last, sizeof last, "%s", c.ids[c.n - 1]);
    }
    ok(pages == 4, "20 sandboxes in pages of 6: 4 pages");
    is_str(all, "l19,l18,l17,l16,l15,l14,l13,l12,l11,l10,l09,l08,l07,l06,l05,l04,l03,l02,l01,l00",
           "each once, newest first (the two created at the same time by id, descending)");
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

/* Schema version 4: metrics samples, kept across a reopen, bounded by age, gone with a kill. */
static void metrics(struct store *st)
{
    err_t err = {0};
    struct store_sandbox sb = make("m1", "base", 5);
    ok(store_sandbox_insert(st, &sb, &err) == 0 &&
           store_sandbox_transition(st, "m1", SANDBOX_STATES_LIVE, SANDBOX_RUNNING, NULL, NULL,
                                    NULL, &err) == 0,
       "a running sandbox for metrics");
    bool all = true;
    for (int i = 1; i <= 5; i++) {
        struct store_metric m = {.at_ms = 1000 * i,
                                 .cpu_count = 2,
                                 .cpu_used_pct = 12.5 * i,
                                 .mem_used = (uint64_t)i << 20,
                                 .mem_total = 3ull << 40,
                                 .mem_cache = 7,
                                 .disk_used = (uint64_t)i << 30,
                                 .disk_total = 10ull << 30};
        all = all && store_metric_add(st, "m1", &m, 0, &err) == 0;
    }
    ok(all, "five samples kept (%s)", err.msg);
    struct store_metric out[8];
    int n = store_metric_list(st, "m1", out, 8, &err);
    ok(n == 5 && out[0].at_ms == 1000 && out[4].at_ms == 5000, "all five, oldest first (%d)", n);
    ok(n == 5 && out[2].cpu_count == 2 && out[2].cpu_used_pct == 37.5 &&
           out[2].mem_used == 3u << 20 && out[2].mem_total == 3ull << 40 && out[2].mem_cache == 7 &&
           out[2].disk_used == 3ull << 30 && out[2].disk_total == 10ull << 30,
       "every figure as it was kept");
    n = store_metric_list(st, "m1", out, 2, &err);
    ok(n == 2 && out[0].at_ms == 4000 && out[1].at_ms == 5000, "at most 2: the newest two");
    struct store_metric again = {.at_ms = 5000, .cpu_count = 4};
    ok(store_metric_add(st, "m1", &again, 0, &err) == 0 &&
           store_metric_list(st, "m1", out, 8, &err) == 5 && out[4].cpu_count == 4,
       "a sample at the same ms replaces the one there");
    struct store_metric later = {.at_ms = 6000, .cpu_count = 2};
    n = store_metric_add(st, "m1", &later, 3500, &err) == 0
            ? store_metric_list(st, "m1", out, 8, &err)
            : -1;
    ok(n == 3 && out[0].at_ms == 4000 && out[2].at_ms == 6000,
       "samples before keep_after go as a new one comes (%d left)", n);
    ok(store_metric_add(st, "nope", &later, 0, &err) < 0 && err.errnum == ENOENT,
       "a sample of an unknown sandbox: ENOENT (%s)", err.msg);
    ok(store_metric_list(st, "nope", out, 8, &err) == 0, "an unknown sandbox has none");
    store_metric_add(st, "l07", &later, 0, &err); /* kept for the reopen below */
}

static void api_keys(struct store *st)
{
    err_t err = {0};
    const char *key = "hutch_5a0c1f3e9b7d4a6e8f2c0b1d3e5f7a9c";
    ok(store_api_key_count(st, &err) == 0, "no key at first");
    int rc = store_api_key_add(st, key, "first", &err);
    ok(rc == 0, "a key is added (%s)", rc ? err.msg : "ok");
    ok(store_api_key_check(st, key, &err) == 1, "it is accepted");
    ok(store_api_key_check(st, "hutch_5a0c1f3e9b7d4a6e8f2c0b1d3e5f7a9d", &err) == 0 &&
           store_api_key_check(st, "", &err) == 0 && store_api_key_check(st, NULL, &err) == 0,
       "a key one character off, an empty one and none are not");
    ok(store_api_key_add(st, key, "again", &err) < 0 && err.errnum == EEXIST,
       "the same key twice: EEXIST");
    ok(store_api_key_count(st, &err) == 1, "one key");
    char wal[160];
    snprintf(wal, sizeof wal, "%s-wal", db_path);
    ok(!file_contains(db_path, key) && !file_contains(wal, key) &&
           !file_contains(db_path, "5a0c1f3e9b7d") && !file_contains(wal, "5a0c1f3e9b7d"),
       "the key is in neither the database nor its log, only its hash");
}

/* A writer that inserts and moves sandboxes until it is killed. */
/* Writes sandboxes until killed; a byte on started once the first one is in (so that a loaded
 * machine cannot make the kill come before anything was written). */
static _Noreturn void writer(const char *path, int round, int started)
{
    err_t err;
    struct store *st = store_open(path, &err);
    if (!st)
        _exit(1);
    for (int i = 0;; i++) {
        if (i == 1 && (write(started, "x", 1) != 1 || close(started) < 0))
            _exit(3);
        char id[32];
        snprintf(id, sizeof id, "k%d-%d", round, i);
        struct store_sandbox sb = make(id, "base", 1000 + i);
        if (store_sandbox_insert(st, &sb, &err) < 0 ||
            store_sandbox_transition(st, id, SANDBOX_STATES_LIVE, SANDBOX_RUNNING, NULL, NULL, NULL,
                                     &err) < 0)
            _exit(2);
    }
}

struct crash_check {
    struct store *st;
    int sandboxes, without_created, state_mismatch;
};

static void check_one(const struct store_sandbox *sb, void *ctx)
{
    struct crash_check *k = ctx;
    struct collected c = {0};
    err_t err;
    k->sandboxes++;
    store_event_list(k->st, sb->id, 0, 0, collect_event, &c, &err);
    if (c.n == 0 || strcmp(c.kinds[0], "created") != 0)
        k->without_created++;
    /* running exactly when its "running" event is there */
    bool has_running = c.n >= 2 && strcmp(c.kinds[1], "running") == 0;
    if (has_running != (sb->state == SANDBOX_RUNNING))
        k->state_mismatch++;
}

static void crashes(void)
{
    char path[160];
    snprintf(path, sizeof path, "%s/crash.db", dir);
    int rounds_ok = 0, total = 0;
    srand((unsigned)time(NULL));
    for (int round = 0; round < 5; round++) {
        fflush(stdout);
        int started[2];
        if (pipe(started) < 0)
            continue;
        pid_t pid = fork();
        if (pid == 0) {
            close(started[0]);
            writer(path, round, started[1]);
        }
        close(started[1]);
        struct pollfd p = {.fd = started[0], .events = POLLIN};
        poll(&p, 1, 30000); /* its first sandbox is in, or it failed */
        close(started[0]);
        usleep(20000 + (unsigned)(rand() % 80000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        err_t err;
        struct store *st = store_open(path, &err);
        if (!st)
            continue;
        struct crash_check k = {.st = st};
        struct store_list_filter f = {0};
        store_sandbox_list(st, &f, check_one, &k, &err);
        sqlite3 *db;
        char *msg = NULL;
        bool intact = false;
        if (sqlite3_open(path, &db) == SQLITE_OK) {
            sqlite3_stmt *s;
            if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) == SQLITE_OK) {
                intact = sqlite3_step(s) == SQLITE_ROW &&
                         strcmp((const char *)sqlite3_column_text(s, 0), "ok") == 0;
                sqlite3_finalize(s);
            }
            sqlite3_close(db);
        }
        sqlite3_free(msg);
        store_close(st);
        total = k.sandboxes;
        if (intact && k.without_created == 0 && k.state_mismatch == 0 && WIFSIGNALED(status) &&
            WTERMSIG(status) == SIGKILL)
            rounds_ok++;
        else
            printf("# round %d: intact %d, %d sandboxes, %d without created, %d mismatched, "
                   "status %d\n",
                   round, intact, k.sandboxes, k.without_created, k.state_mismatch, status);
    }
    ok(rounds_ok == 5 && total > 0,
       "5 writers killed with SIGKILL mid-stream: the database is intact, each of the %d "
       "sandboxes has its created event and a state matching its events",
       total);
}

/* Schema version 2: a version-1 database (its schema as released, with a running sandbox)
 * migrates, its row not cold; a cold pause sets the flag and the resume clears it; a normal
 * pause is not cold. */
static void cold_pause(const char *path)
{
    char old_path[192];
    snprintf(old_path, sizeof old_path, "%s.v1", path);
    sqlite3 *db;
    int rc = sqlite3_open(old_path, &db);
    rc |= sqlite3_exec(db,
                       "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, template_id TEXT NOT NULL,"
                       " alias TEXT NOT NULL DEFAULT '', state TEXT NOT NULL CHECK (state IN"
                       " ('creating','running','paused','killed','failed')), created_ms INTEGER"
                       " NOT NULL, deadline_ms INTEGER NOT NULL, cpu_count INTEGER NOT NULL,"
                       " memory_mb INTEGER NOT NULL, disk_mb INTEGER NOT NULL, auto_pause INTEGER"
                       " NOT NULL DEFAULT 0, auto_resume INTEGER NOT NULL DEFAULT 0, envd_token"
                       " TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', metadata TEXT NOT NULL"
                       " DEFAULT '{}', env TEXT NOT NULL DEFAULT '{}') STRICT;"
                       "CREATE INDEX sandboxes_by_created ON sandboxes (created_ms, id);"
                       "CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT"
                       " NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE, at_ms INTEGER NOT"
                       " NULL, kind TEXT NOT NULL, detail TEXT) STRICT;"
                       "CREATE INDEX events_by_sandbox ON events (sandbox_id, seq);"
                       "CREATE TABLE api_keys (hash BLOB PRIMARY KEY, name TEXT NOT NULL,"
                       " created_ms INTEGER NOT NULL) STRICT;"
                       "INSERT INTO sandboxes (id, template_id, state, created_ms, deadline_ms,"
                       " cpu_count, memory_mb, disk_mb, envd_token) VALUES ('old1', 'base',"
                       " 'running', 1, 2, 2, 512, 1024, 'tok');"
                       "PRAGMA user_version = 1;",
                       NULL, NULL, NULL);
    sqlite3_close(db);
    ok(rc == SQLITE_OK, "a database of schema version 1");
    err_t err = {0};
    struct store *st = store_open(old_path, &err);
    ok(st && store_schema_version(st, &err) == STORE_SCHEMA_VERSION,
       "it migrates to version %d (%s)", STORE_SCHEMA_VERSION, st ? "ok" : err.msg);
    if (!st)
        return;
    struct store_sandbox got = {0};
    ok(store_sandbox_get(st, "old1", &got, &err) == 0 && got.state == SANDBOX_RUNNING &&
           !got.cold && !got.auto_pause_cold && strcmp(got.envd_token, "tok") == 0,
       "its sandbox is kept, running and not cold, its deadline's pause with memory");
    store_sandbox_free_fields(&got);
    ok(store_sandbox_pause_cold(st, "old1", &err) == 0, "a cold pause (%s)", err.msg);
    ok(store_sandbox_get(st, "old1", &got, &err) == 0 && got.state == SANDBOX_PAUSED && got.cold,
       "paused and cold");
    store_sandbox_free_fields(&got);
    ok(store_sandbox_pause_cold(st, "old1", &err) < 0 && err.errnum == EBUSY,
       "a second cold pause is refused (%s)", err.msg);
    ok(store_sandbox_drop_memory(st, "old1", &err) < 0 && err.errnum == EBUSY,
       "a cold one has no memory to drop (%s)", err.msg);
    ok(store_sandbox_transition(st, "old1", SANDBOX_STATE_BIT(SANDBOX_PAUSED), SANDBOX_RUNNING,
                                NULL, "resumed", NULL, &err) == 0 &&
           store_sandbox_get(st, "old1", &got, &err) == 0 && got.state == SANDBOX_RUNNING &&
           !got.cold,
       "the resume clears cold");
    store_sandbox_free_fields(&got);
    ok(store_sandbox_transition(st, "old1", SANDBOX_STATE_BIT(SANDBOX_RUNNING), SANDBOX_PAUSED,
                                NULL, "paused", NULL, &err) == 0 &&
           store_sandbox_get(st, "old1", &got, &err) == 0 && got.state == SANDBOX_PAUSED &&
           !got.cold,
       "a pause with memory is not cold");
    store_sandbox_free_fields(&got);
    ok(store_sandbox_drop_memory(st, "old1", &err) == 0 &&
           store_sandbox_get(st, "old1", &got, &err) == 0 && got.state == SANDBOX_PAUSED &&
           got.cold,
       "a paused one's memory dropped: paused and cold (%s)", err.msg);
    store_sandbox_free_fields(&got);
    ok(store_sandbox_pause_cold(st, "nope", &err) < 0 && err.errnum == ENOENT,
       "a cold pause of an unknown sandbox: ENOENT");
    store_close(st);
}

int main(void)
{
    transitions();
    snprintf(dir, sizeof dir, "/tmp/hutch-store-test.XXXXXX");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    snprintf(db_path, sizeof db_path, "%s/hutch.db", dir);
    err_t err = {0};
    struct store *st = store_open(db_path, &err);
    ok(st != NULL, "a new database (%s)", st ? "ok" : err.msg);
    if (!st)
        return done_testing();
    struct stat sbuf;
    ok(stat(db_path, &sbuf) == 0 && (sbuf.st_mode & 0777) == 0600, "owner-only (%o)",
       sbuf.st_mode & 0777);
    ok(store_schema_version(st, &err) == STORE_SCHEMA_VERSION, "at schema version %d",
       STORE_SCHEMA_VERSION);
    sandboxes(st);
    lists(st);
    metrics(st);
    api_keys(st);
    store_close(st);

    st = store_open(db_path, &err);
    struct store_sandbox got = {0};
    ok(st && store_sandbox_get(st, "l05", &got, &err) == 0 && got.state == SANDBOX_RUNNING &&
           store_api_key_count(st, &err) == 1,
       "reopened: the same sandboxes and keys");
    store_sandbox_free_fields(&got);
    struct store_metric kept[4];
    ok(st && store_metric_list(st, "m1", kept, 4, &err) == 3 && kept[2].at_ms == 6000,
       "reopened: the metrics samples too");
    ok(st &&
           store_sandbox_transition(st, "m1", SANDBOX_STATES_LIVE, SANDBOX_KILLED, "test", NULL,
                                    NULL, &err) == 0 &&
           store_metric_list(st, "m1", kept, 4, &err) == 0,
       "killed: its samples are gone");
    ok(st && store_metric_list(st, "l07", kept, 4, &err) == 1, "another sandbox's samples stay");
    store_close(st);

    cold_pause(db_path);

    /* a database from a newer hutch */
    sqlite3 *db;
    sqlite3_open(db_path, &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    st = store_open(db_path, &err);
    ok(!st && err.errnum == EPROTO && strstr(err.msg, "99"),
       "a database of schema version 99 is refused, saying so (%s)", err.msg);
    store_close(st);
    char link_path[160];
    snprintf(link_path, sizeof link_path, "%s/link.db", dir);
    if (symlink(db_path, link_path) == 0) {
        st = store_open(link_path, &err);
        ok(!st && err.errnum == ELOOP, "a symlink in the database's place is refused (%s)",
           err.msg);
        store_close(st);
    }

    crashes();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)!system(cmd);
    return done_testing();
}
