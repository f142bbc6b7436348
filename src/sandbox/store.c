#include "sandbox/store.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/strfmt.h"

struct store {
    sqlite3 *db;
};

/* The schema, one step per version: migrations[i] takes a database from version i to i + 1.
 * A step is never edited once released; a change is a new step. */
static const char *const migrations[STORE_SCHEMA_VERSION] = {
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY,"
    "  template_id TEXT NOT NULL,"
    "  alias TEXT NOT NULL DEFAULT '',"
    "  state TEXT NOT NULL CHECK (state IN ('creating','running','paused','killed','failed')),"
    "  created_ms INTEGER NOT NULL,"
    "  deadline_ms INTEGER NOT NULL,"
    "  cpu_count INTEGER NOT NULL,"
    "  memory_mb INTEGER NOT NULL,"
    "  disk_mb INTEGER NOT NULL,"
    "  auto_pause INTEGER NOT NULL DEFAULT 0,"
    "  auto_resume INTEGER NOT NULL DEFAULT 0,"
    "  envd_token TEXT NOT NULL,"
    "  reason TEXT NOT NULL DEFAULT '',"
    "  metadata TEXT NOT NULL DEFAULT '{}',"
    "  env TEXT NOT NULL DEFAULT '{}'"
    ") STRICT;"
    "CREATE INDEX sandboxes_by_created ON sandboxes (created_ms, id);"
    "CREATE TABLE events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,"
    "  at_ms INTEGER NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  detail TEXT"
    ") STRICT;"
    "CREATE INDEX events_by_sandbox ON events (sandbox_id, seq);"
    "CREATE TABLE api_keys ("
    "  hash BLOB PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL"
    ") STRICT;",
    /* 2: a sandbox paused without its memory (its processes gone, its disk layer kept) */
    "ALTER TABLE sandboxes ADD COLUMN cold INTEGER NOT NULL DEFAULT 0;",
    /* 3: its deadline's pause is one without memory (autoPauseMemory: false) */
    "ALTER TABLE sandboxes ADD COLUMN auto_pause_cold INTEGER NOT NULL DEFAULT 0;",
    /* 4: metrics samples, so that a restarted daemon still answers for the last hour */
    "CREATE TABLE metrics ("
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,"
    "  at_ms INTEGER NOT NULL,"
    "  cpu_count INTEGER NOT NULL,"
    "  cpu_used_pct REAL NOT NULL,"
    "  mem_used INTEGER NOT NULL,"
    "  mem_total INTEGER NOT NULL,"
    "  mem_cache INTEGER NOT NULL,"
    "  disk_used INTEGER NOT NULL,"
    "  disk_total INTEGER NOT NULL,"
    "  PRIMARY KEY (sandbox_id, at_ms)"
    ") STRICT, WITHOUT ROWID;",
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* err from the database's last error: EEXIST for a constraint (a duplicate id, a missing
 * sandbox for an event), ENOSPC for a full disk, EBUSY for a lock, EIO for anything else. */
static int db_fail(struct store *st, err_t *err, const char *what)
{
    int code = sqlite3_extended_errcode(st->db) & 0xff;
    int errnum = code == SQLITE_CONSTRAINT ? EEXIST
                 : code == SQLITE_FULL     ? ENOSPC
                 : code == SQLITE_BUSY     ? EBUSY
                                           : EIO;
    err_set(err, 0, "%s: %s", what, sqlite3_errmsg(st->db));
    err->errnum = errnum;
    return -1;
}

static int exec_sql(struct store *st, const char *sql, const char *what, err_t *err)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(st, err, what);
    return 0;
}

static int begin(struct store *st, err_t *err)
{
    /* IMMEDIATE: the write lock is taken now, so a step never fails half-way for a lock. */
    return exec_sql(st, "BEGIN IMMEDIATE", "begin", err);
}

static int commit(struct store *st, err_t *err)
{
    return exec_sql(st, "COMMIT", "commit", err);
}

static void rollback(struct store *st)
{
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

/* A prepared statement; NULL with err. */
static sqlite3_stmt *prepare(struct store *st, const char *sql, err_t *err)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        db_fail(st, err, "prepare");
        return NULL;
    }
    return s;
}

/* Runs a statement that returns no rows, then finalizes it. */
static int step_done(struct store *st, sqlite3_stmt *s, const char *what, err_t *err)
{
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) {
        db_fail(st, err, what);
        sqlite3_finalize(s);
        return -1;
    }
    sqlite3_finalize(s);
    return 0;
}

static int user_version(struct store *st, err_t *err)
{
    sqlite3_stmt *s = prepare(st, "PRAGMA user_version", err);
    if (!s)
        return -1;
    int v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    if (v < 0)
        return db_fail(st, err, "read the schema version");
    return v;
}

static int migrate(struct store *st, err_t *err)
{
    int v = user_version(st, err);
    if (v < 0)
        return -1;
    if (v > STORE_SCHEMA_VERSION)
        return err_set(err, EPROTO,
                       "the database has schema version %d; this hutch knows up to %d (a newer "
                       "hutch made it)",
                       v, STORE_SCHEMA_VERSION);
    for (; v < STORE_SCHEMA_VERSION; v++) {
        char set_version[64];
        snprintf(set_version, sizeof set_version, "PRAGMA user_version = %d", v + 1);
        if (begin(st, err) < 0)
            return -1;
        if (exec_sql(st, migrations[v], "migrate", err) < 0 ||
            exec_sql(st, set_version, "migrate", err) < 0 || commit(st, err) < 0) {
            rollback(st);
            return err_wrap(err, "schema version %d to %d", v, v + 1);
        }
    }
    return 0;
}

struct store *store_open(const char *path, err_t *err)
{
    if (sodium_init() < 0) {
        err_set(err, EIO, "libsodium does not start");
        return NULL;
    }
    /* Owner-only from the start: the file holds key hashes and sandbox tokens. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        err_set(err, errno, "open %s", path);
        return NULL;
    }
    close(fd);
    struct store *st = calloc(1, sizeof *st);
    if (!st) {
        err_set(err, ENOMEM, "store");
        return NULL;
    }
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL) !=
        SQLITE_OK) {
        err_set(err, EIO, "open %s: %s", path, st->db ? sqlite3_errmsg(st->db) : "no memory");
        store_close(st);
        return NULL;
    }
    /* WAL: a commit is one append and one fsync of the log; synchronous=NORMAL keeps every
     * committed transaction across a crash of the daemon (kill -9), and loses at most the last
     * ones on a power cut, never the database's consistency. */
    if (exec_sql(st, "PRAGMA journal_mode = WAL", "WAL", err) < 0 ||
        exec_sql(st, "PRAGMA synchronous = NORMAL", "synchronous", err) < 0 ||
        exec_sql(st, "PRAGMA foreign_keys = ON", "foreign keys", err) < 0 || migrate(st, err) < 0) {
        err_wrap(err, "database %s", path);
        store_close(st);
        return NULL;
    }
    return st;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    sqlite3_close_v2(st->db);
    free(st);
}

int store_schema_version(struct store *st, err_t *err)
{
    return user_version(st, err);
}

void store_sandbox_free_fields(struct store_sandbox *sb)
{
    free(sb->metadata_json);
    free(sb->env_json);
    sb->metadata_json = sb->env_json = NULL;
}

static int check_text(const char *what, const char *s, size_t max, err_t *err)
{
    if (!s)
        return err_set(err, EINVAL, "%s is missing", what);
    if (strlen(s) > max)
        return err_set(err, ENAMETOOLONG, "%s is longer than %zu bytes", what, max);
    return 0;
}

static int add_event(struct store *st, const char *id, const char *kind, const char *detail,
                     err_t *err)
{
    if (check_text("event kind", kind, STORE_ID_MAX, err) < 0 ||
        (detail && check_text("event detail", detail, STORE_JSON_MAX, err) < 0))
        return -1;
    sqlite3_stmt *s = prepare(
        st, "INSERT INTO events (sandbox_id, at_ms, kind, detail) VALUES (?, ?, ?, ?)", err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_ms());
    sqlite3_bind_text(s, 3, kind, -1, SQLITE_STATIC);
    if (detail)
        sqlite3_bind_text(s, 4, detail, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 4);
    return step_done(st, s, "append an event", err);
}

int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, err_t *err)
{
    const char *metadata = sb->metadata_json ? sb->metadata_json : "{}";
    const char *env = sb->env_json ? sb->env_json : "{}";
    if (sb->id[0] == '\0')
        return err_set(err, EINVAL, "the sandbox id is empty");
    if (check_text("metadata", metadata, STORE_JSON_MAX, err) < 0 ||
        check_text("env vars", env, STORE_JSON_MAX, err) < 0)
        return -1;
    if ((unsigned)sb->state >= SANDBOX_STATE_COUNT)
        return err_set(err, EINVAL, "sandbox %s: no such state %d", sb->id, (int)sb->state);
    if (begin(st, err) < 0)
        return -1;
    sqlite3_stmt *s = prepare(st,
                              "INSERT INTO sandboxes (id, template_id, alias, state, created_ms, "
                              "deadline_ms, cpu_count, memory_mb, disk_mb, auto_pause, "
                              "auto_resume, envd_token, reason, metadata, env, auto_pause_cold) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              err);
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_text(s, 1, sb->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, sb->template_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, sb->alias, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, sandbox_state_name(sb->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, sb->created_ms);
    sqlite3_bind_int64(s, 6, sb->deadline_ms);
    sqlite3_bind_int64(s, 7, sb->cpu_count);
    sqlite3_bind_int64(s, 8, sb->memory_mb);
    sqlite3_bind_int64(s, 9, sb->disk_mb);
    sqlite3_bind_int(s, 10, sb->auto_pause);
    sqlite3_bind_int(s, 11, sb->auto_resume);
    sqlite3_bind_text(s, 12, sb->envd_token, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 13, sb->reason, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 14, metadata, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 15, env, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 16, sb->auto_pause_cold);
    if (step_done(st, s, "insert", err) < 0 || add_event(st, sb->id, "created", NULL, err) < 0 ||
        commit(st, err) < 0) {
        rollback(st);
        return err_wrap(err, "sandbox %s", sb->id);
    }
    return 0;
}

/* The state of id within the open transaction: its enum, or -1 with err (ENOENT). */
static int current_state(struct store *st, const char *id, err_t *err)
{
    sqlite3_stmt *s = prepare(st, "SELECT state FROM sandboxes WHERE id = ?", err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int state = -1;
    if (rc == SQLITE_ROW)
        state = sandbox_state_parse((const char *)sqlite3_column_text(s, 0));
    else if (rc == SQLITE_DONE)
        err_set(err, ENOENT, "no sandbox %s", id);
    else
        db_fail(st, err, "read the state");
    if (rc == SQLITE_ROW && state < 0)
        err_set(err, EIO, "sandbox %s: an unknown state in the database", id);
    sqlite3_finalize(s);
    return state;
}

/* Within the open transaction: id's metrics samples taken before before_ms go
 * (INT64_MAX: all). */
static int drop_metrics_before(struct store *st, const char *id, int64_t before_ms, err_t *err)
{
    sqlite3_stmt *s = prepare(st, "DELETE FROM metrics WHERE sandbox_id = ? AND at_ms < ?", err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, before_ms);
    return step_done(st, s, "drop metrics", err);
}

static int drop_metrics(struct store *st, const char *id, err_t *err)
{
    return drop_metrics_before(st, id, INT64_MAX, err);
}

static int transition(struct store *st, const char *id, unsigned from, enum sandbox_state to,
                      bool cold, const char *reason, const char *event_kind,
                      const char *event_detail_json, err_t *err)
{
    if (check_text("sandbox id", id, STORE_ID_MAX, err) < 0 ||
        (reason && check_text("reason", reason, STORE_REASON_MAX, err) < 0))
        return -1;
    if (begin(st, err) < 0)
        return -1;
    int now = current_state(st, id, err);
    if (now < 0) {
        rollback(st);
        return -1;
    }
    if (!(from & SANDBOX_STATE_BIT(now)) || !sandbox_state_can((enum sandbox_state)now, to)) {
        rollback(st);
        return err_set(err, EBUSY, "sandbox %s is %s: it cannot become %s", id,
                       sandbox_state_name((enum sandbox_state)now), sandbox_state_name(to));
    }
    sqlite3_stmt *s =
        prepare(st, "UPDATE sandboxes SET state = ?, reason = ?, cold = ? WHERE id = ?", err);
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_text(s, 1, sandbox_state_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, reason ? reason : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, cold);
    sqlite3_bind_text(s, 4, id, -1, SQLITE_STATIC);
    if (step_done(st, s, "update the state", err) < 0 ||
        ((to == SANDBOX_KILLED || to == SANDBOX_FAILED) && drop_metrics(st, id, err) < 0) ||
        add_event(st, id, event_kind ? event_kind : sandbox_state_name(to), event_detail_json,
                  err) < 0 ||
        commit(st, err) < 0) {
        rollback(st);
        return err_wrap(err, "sandbox %s", id);
    }
    return 0;
}

int store_sandbox_transition(struct store *st, const char *id, unsigned from, enum sandbox_state to,
                             const char *reason, const char *event_kind,
                             const char *event_detail_json, err_t *err)
{
    return transition(st, id, from, to, false, reason, event_kind, event_detail_json, err);
}

int store_sandbox_pause_cold(struct store *st, const char *id, err_t *err)
{
    return transition(st, id, SANDBOX_STATE_BIT(SANDBOX_RUNNING), SANDBOX_PAUSED, true, NULL,
                      "paused", "{\"memory\":false}", err);
}

int store_sandbox_drop_memory(struct store *st, const char *id, err_t *err)
{
    if (check_text("sandbox id", id, STORE_ID_MAX, err) < 0 || begin(st, err) < 0)
        return -1;
    sqlite3_stmt *s = prepare(
        st, "UPDATE sandboxes SET cold = 1 WHERE id = ? AND state = 'paused' AND cold = 0", err);
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (step_done(st, s, "drop the memory", err) < 0) {
        rollback(st);
        return err_wrap(err, "sandbox %s", id);
    }
    if (sqlite3_changes(st->db) != 1) {
        rollback(st);
        return err_set(err, EBUSY, "sandbox %s is not paused with its memory", id);
    }
    if (add_event(st, id, "memory_dropped", NULL, err) < 0 || commit(st, err) < 0) {
        rollback(st);
        return err_wrap(err, "sandbox %s", id);
    }
    return 0;
}

int store_sandbox_claim(struct store *st, const struct store_sandbox *sb, err_t *err)
{
    if (check_text("sandbox id", sb->id, STORE_ID_MAX, err) < 0 ||
        check_text("alias", sb->alias, STORE_ID_MAX, err) < 0 ||
        (sb->metadata_json && check_text("metadata", sb->metadata_json, STORE_JSON_MAX, err) < 0) ||
        (sb->env_json && check_text("env vars", sb->env_json, STORE_JSON_MAX, err) < 0))
        return -1;
    if (begin(st, err) < 0)
        return -1;
    sqlite3_stmt *s = prepare(st,
                              "UPDATE sandboxes SET state = 'running', alias = ?, created_ms = ?, "
                              "deadline_ms = ?, auto_pause = ?, auto_resume = ?, metadata = ?, "
                              "env = ?, auto_pause_cold = ? WHERE id = ? AND state = 'creating'",
                              err);
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_text(s, 1, sb->alias, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, sb->created_ms);
    sqlite3_bind_int64(s, 3, sb->deadline_ms);
    sqlite3_bind_int(s, 4, sb->auto_pause);
    sqlite3_bind_int(s, 5, sb->auto_resume);
    sqlite3_bind_text(s, 6, sb->metadata_json ? sb->metadata_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, sb->env_json ? sb->env_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 8, sb->auto_pause_cold);
    sqlite3_bind_text(s, 9, sb->id, -1, SQLITE_STATIC);
    if (step_done(st, s, "claim", err) < 0) {
        rollback(st);
        return err_wrap(err, "sandbox %s", sb->id);
    }
    if (sqlite3_changes(st->db) == 0) {
        rollback(st);
        return err_set(err, ENOENT, "sandbox %s is not one being made", sb->id);
    }
    if (add_event(st, sb->id, "claimed", NULL, err) < 0 || commit(st, err) < 0) {
        rollback(st);
        return err_wrap(err, "sandbox %s", sb->id);
    }
    return 0;
}

int store_sandbox_set_deadline(struct store *st, const char *id, int64_t deadline_ms, err_t *err)
{
    sqlite3_stmt *s = prepare(st, "UPDATE sandboxes SET deadline_ms = ? WHERE id = ?", err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, deadline_ms);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    if (step_done(st, s, "set the deadline", err) < 0)
        return err_wrap(err, "sandbox %s", id);
    if (sqlite3_changes(st->db) == 0)
        return err_set(err, ENOENT, "no sandbox %s", id);
    return 0;
}

#define SANDBOX_COLUMNS                                                                            \
    "id, template_id, alias, state, created_ms, deadline_ms, cpu_count, memory_mb, disk_mb, "      \
    "auto_pause, auto_resume, envd_token, reason, metadata, env, cold, auto_pause_cold"

static void copy_text(char *dst, size_t size, const unsigned char *src)
{
    /* Every column was length-checked on the way in; a database edited by hand is cut, not
     * overflowed. */
    strfmt_text_append((dst[0] = '\0', dst), size, "%s", src ? (const char *)src : "");
}

/* Fills sb from a row of SANDBOX_COLUMNS; the JSON strings point into the row (valid until the
 * next step) unless own, when they are copies. */
static int read_row(sqlite3_stmt *s, struct store_sandbox *sb, bool own, err_t *err)
{
    memset(sb, 0, sizeof *sb);
    copy_text(sb->id, sizeof sb->id, sqlite3_column_text(s, 0));
    copy_text(sb->template_id, sizeof sb->template_id, sqlite3_column_text(s, 1));
    copy_text(sb->alias, sizeof sb->alias, sqlite3_column_text(s, 2));
    int state = sandbox_state_parse((const char *)sqlite3_column_text(s, 3));
    if (state < 0)
        return err_set(err, EIO, "sandbox %s: an unknown state in the database", sb->id);
    sb->state = (enum sandbox_state)state;
    sb->created_ms = sqlite3_column_int64(s, 4);
    sb->deadline_ms = sqlite3_column_int64(s, 5);
    sb->cpu_count = (unsigned)sqlite3_column_int64(s, 6);
    sb->memory_mb = (unsigned)sqlite3_column_int64(s, 7);
    sb->disk_mb = (unsigned)sqlite3_column_int64(s, 8);
    sb->auto_pause = sqlite3_column_int(s, 9) != 0;
    sb->auto_resume = sqlite3_column_int(s, 10) != 0;
    copy_text(sb->envd_token, sizeof sb->envd_token, sqlite3_column_text(s, 11));
    copy_text(sb->reason, sizeof sb->reason, sqlite3_column_text(s, 12));
    const char *metadata = (const char *)sqlite3_column_text(s, 13);
    const char *env = (const char *)sqlite3_column_text(s, 14);
    sb->cold = sqlite3_column_int(s, 15) != 0;
    sb->auto_pause_cold = sqlite3_column_int(s, 16) != 0;
    if (!own) {
        sb->metadata_json = (char *)metadata;
        sb->env_json = (char *)env;
        return 0;
    }
    sb->metadata_json = strdup(metadata ? metadata : "{}");
    sb->env_json = strdup(env ? env : "{}");
    if (!sb->metadata_json || !sb->env_json) {
        store_sandbox_free_fields(sb);
        return err_set(err, ENOMEM, "sandbox %s", sb->id);
    }
    return 0;
}

int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = prepare(st, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = ?", err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s), ret;
    if (rc == SQLITE_ROW)
        ret = read_row(s, out, true, err);
    else if (rc == SQLITE_DONE)
        ret = err_set(err, ENOENT, "no sandbox %s", id);
    else
        ret = db_fail(st, err, "read a sandbox");
    sqlite3_finalize(s);
    return ret;
}

int store_sandbox_list(struct store *st, const struct store_list_filter *f,
                       void (*cb)(const struct store_sandbox *sb, void *ctx), void *ctx, err_t *err)
{
    /* Paging by (created_ms, id) of the previous page's last sandbox: stable while sandboxes
     * are created and removed between pages. */
    char sql[1024];
    const char *cmp = f->oldest_first ? ">" : "<";
    const char *dir = f->oldest_first ? "ASC" : "DESC";
    snprintf(sql, sizeof sql,
             "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE "
             "(?1 = 0 OR ((1 << CASE state WHEN 'creating' THEN 0 WHEN 'running' THEN 1 "
             "WHEN 'paused' THEN 2 WHEN 'killed' THEN 3 ELSE 4 END) & ?1) != 0) "
             "AND (?2 IS NULL OR template_id = ?2) AND created_ms > ?3 "
             "AND (?4 IS NULL OR (created_ms, id) %s (SELECT created_ms, id FROM sandboxes "
             "WHERE id = ?4)) "
             "ORDER BY created_ms %s, id %s LIMIT ?5",
             cmp, dir, dir);
    sqlite3_stmt *s = prepare(st, sql, err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, f->states);
    if (f->template_id)
        sqlite3_bind_text(s, 2, f->template_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, f->created_after_ms);
    if (f->after_id)
        sqlite3_bind_text(s, 4, f->after_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, f->limit ? (int64_t)f->limit : -1);
    int n = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_sandbox sb;
        if (read_row(s, &sb, false, err) < 0) {
            sqlite3_finalize(s);
            return -1;
        }
        cb(&sb, ctx);
        n++;
    }
    if (rc != SQLITE_DONE)
        n = db_fail(st, err, "list sandboxes");
    sqlite3_finalize(s);
    return n;
}

int store_event_add(struct store *st, const char *id, const char *kind, const char *detail_json,
                    err_t *err)
{
    if (check_text("sandbox id", id, STORE_ID_MAX, err) < 0)
        return -1;
    if (add_event(st, id, kind, detail_json, err) < 0) {
        /* The foreign key names no sandbox. */
        if (err->errnum == EEXIST)
            return err_set(err, ENOENT, "no sandbox %s", id);
        return err_wrap(err, "sandbox %s", id);
    }
    return 0;
}

/* Memory and disk figures are bytes, far below INT64_MAX; one above it is stored as that. */
static int64_t bytes_column(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

int store_metric_add(struct store *st, const char *id, const struct store_metric *m,
                     int64_t keep_after_ms, err_t *err)
{
    if (check_text("sandbox id", id, STORE_ID_MAX, err) < 0 || begin(st, err) < 0)
        return -1;
    sqlite3_stmt *s = prepare(st, "INSERT OR REPLACE INTO metrics VALUES (?,?,?,?,?,?,?,?,?)", err);
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, m->at_ms);
    sqlite3_bind_int64(s, 3, m->cpu_count);
    sqlite3_bind_double(s, 4, m->cpu_used_pct);
    sqlite3_bind_int64(s, 5, bytes_column(m->mem_used));
    sqlite3_bind_int64(s, 6, bytes_column(m->mem_total));
    sqlite3_bind_int64(s, 7, bytes_column(m->mem_cache));
    sqlite3_bind_int64(s, 8, bytes_column(m->disk_used));
    sqlite3_bind_int64(s, 9, bytes_column(m->disk_total));
    if (step_done(st, s, "keep a metrics sample", err) < 0 ||
        drop_metrics_before(st, id, keep_after_ms, err) < 0 || commit(st, err) < 0) {
        rollback(st);
        if (err->errnum == EEXIST) /* the foreign key names no sandbox */
            return err_set(err, ENOENT, "no sandbox %s", id);
        return err_wrap(err, "sandbox %s", id);
    }
    return 0;
}

static uint64_t bytes_of(sqlite3_stmt *s, int col)
{
    int64_t v = sqlite3_column_int64(s, col);
    return v > 0 ? (uint64_t)v : 0;
}

int store_metric_list(struct store *st, const char *id, struct store_metric *out, size_t max,
                      err_t *err)
{
    if (max == 0)
        return 0;
    sqlite3_stmt *s = prepare(st,
                              "SELECT at_ms, cpu_count, cpu_used_pct, mem_used, mem_total, "
                              "mem_cache, disk_used, disk_total FROM metrics WHERE sandbox_id = ? "
                              "ORDER BY at_ms DESC LIMIT ?",
                              err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, max > INT32_MAX ? INT32_MAX : (int64_t)max);
    size_t n = 0;
    int rc = SQLITE_DONE;
    while (n < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t cpus = sqlite3_column_int64(s, 1);
        /* newest first from the query: filled from the end, moved to the front below */
        out[max - 1 - n++] = (struct store_metric){
            .at_ms = sqlite3_column_int64(s, 0),
            .cpu_count = cpus > 0 && cpus < 1 << 16 ? (unsigned)cpus : 0,
            .cpu_used_pct = sqlite3_column_double(s, 2),
            .mem_used = bytes_of(s, 3),
            .mem_total = bytes_of(s, 4),
            .mem_cache = bytes_of(s, 5),
            .disk_used = bytes_of(s, 6),
            .disk_total = bytes_of(s, 7),
        };
    }
    if (n < max && rc != SQLITE_DONE) {
        db_fail(st, err, "read metrics");
        sqlite3_finalize(s);
        return -1;
    }
    sqlite3_finalize(s);
    memmove(out, out + (max - n), n * sizeof *out);
    return (int)n;
}

struct event_list {
    size_t limit, n;
    void (*cb)(const struct store_event *ev, void *ctx);
    void *ctx;
};

static int list_one(const struct store_event *ev, void *ctx)
{
    struct event_list *l = ctx;
    l->cb(ev, l->ctx);
    return l->limit && ++l->n >= l->limit;
}

int store_event_list(struct store *st, const char *id, int64_t after_seq, size_t limit,
                     void (*cb)(const struct store_event *ev, void *ctx), void *ctx, err_t *err)
{
    struct event_list l = {.limit = limit, .cb = cb, .ctx = ctx};
    return store_event_scan(st, id, &(struct store_event_range){.from_seq = after_seq}, list_one,
                            &l, err);
}

int store_event_scan(struct store *st, const char *id, const struct store_event_range *r,
                     int (*cb)(const struct store_event *ev, void *ctx), void *ctx, err_t *err)
{
    sqlite3_stmt *s = prepare(st,
                              r->backward
                                  ? "SELECT seq, at_ms, kind, detail FROM events WHERE sandbox_id = ? "
                                    "AND seq < ? AND at_ms <= ? ORDER BY seq DESC"
                                  : "SELECT seq, at_ms, kind, detail FROM events WHERE sandbox_id = ? "
                                    "AND seq > ? AND at_ms >= ? ORDER BY seq",
                              err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, r->backward && r->from_seq <= 0 ? INT64_MAX : r->from_seq);
    sqlite3_bind_int64(s, 3, r->backward && r->at_ms <= 0 ? INT64_MAX : r->at_ms);
    int n = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_event ev = {
            .seq = sqlite3_column_int64(s, 0),
            .at_ms = sqlite3_column_int64(s, 1),
            .kind = (const char *)sqlite3_column_text(s, 2),
            .detail = (const char *)sqlite3_column_text(s, 3),
        };
        n++;
        if (cb(&ev, ctx)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE)
        n = db_fail(st, err, "list events");
    sqlite3_finalize(s);
    return n;
}

static void key_hash(const char *key, unsigned char out[crypto_generichash_BYTES])
{
    /* API keys are random and long (the daemon makes them from 32 random bytes), so a fast hash
     * is enough: nothing to brute-force, unlike a password. */
    crypto_generichash(out, crypto_generichash_BYTES, (const unsigned char *)key, strlen(key), NULL,
                       0);
}

int store_api_key_add(struct store *st, const char *key, const char *name, err_t *err)
{
    if (check_text("API key", key, STORE_TOKEN_MAX, err) < 0 ||
        check_text("API key name", name, STORE_ID_MAX, err) < 0)
        return -1;
    unsigned char h[crypto_generichash_BYTES];
    key_hash(key, h);
    sqlite3_stmt *s =
        prepare(st, "INSERT INTO api_keys (hash, name, created_ms) VALUES (?, ?, ?)", err);
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, h, sizeof h, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now_ms());
    return step_done(st, s, "store the API key", err);
}

int store_api_key_check(struct store *st, const char *key, err_t *err)
{
    if (!key || strlen(key) > STORE_TOKEN_MAX)
        return 0;
    unsigned char h[crypto_generichash_BYTES];
    key_hash(key, h);
    sqlite3_stmt *s = prepare(st, "SELECT 1 FROM api_keys WHERE hash = ?", err);
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, h, sizeof h, SQLITE_TRANSIENT);
    int rc = sqlite3_step(s);
    int found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_fail(st, err, "check a key");
    sqlite3_finalize(s);
    return found;
}

int store_api_key_count(struct store *st, err_t *err)
{
    sqlite3_stmt *s = prepare(st, "SELECT count(*) FROM api_keys", err);
    if (!s)
        return -1;
    int n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : db_fail(st, err, "count");
    sqlite3_finalize(s);
    return n;
}
