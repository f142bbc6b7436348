/* envd's filesystem service in Connect JSON (`filesystem.Filesystem`, ../shared/e2b/PROTOCOL.md
 * section 3, "Filesystem service"): the requests parsed from hostile input, paths made absolute
 * against the user's home as envd does, and EntryInfo and watch events written the way the SDK
 * reads them (Go's permission strings, int64 sizes as strings, RFC 3339 times). Pure functions;
 * the files workers (src/files, through the agent) do the file work and the final path checks. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "http/http.h"
#include "proto/proto_files.h"
#include "util/err.h"

#define ENVD_PATH_MAX       4095
#define ENVD_LIST_DEPTH_MAX 64

/* One request of Stat, MakeDir, Remove ({path}), ListDir ({path, depth}), Move ({source,
 * destination}), WatchDir ({path, recursive, includeEntry}). Paths as sent (maybe relative). */
struct envd_fs_request {
    char path[ENVD_PATH_MAX + 1];
    char destination[ENVD_PATH_MAX + 1]; /* Move */
    uint32_t depth;                      /* ListDir: 1 when absent */
    bool recursive, include_entry;       /* WatchDir */
};
enum envd_fs_call {
    ENVD_FS_STAT,
    ENVD_FS_MAKE_DIR,
    ENVD_FS_REMOVE,
    ENVD_FS_LIST_DIR,
    ENVD_FS_MOVE,
    ENVD_FS_WATCH_DIR,
};
int envd_fs_request_parse(enum envd_fs_call call, const char *json, struct envd_fs_request *out,
                          err_t *err);

/* path made absolute as envd makes it: a relative path is taken from the user's home
 * (/home/user, or /root for root), "~" and "~/..." too. out holds ENVD_PATH_MAX + 1 bytes;
 * -1 with err (EINVAL empty, ENAMETOOLONG) otherwise. No "..", symlink or length check beyond
 * that: the files workers normalize and resolve inside the sandbox's root. */
int envd_path_absolute(const char *path, bool as_root, char out[ENVD_PATH_MAX + 1], err_t *err);

/* A download's Range header (RFC 9110, 14.2) against a file of size bytes. ENVD_RANGE_NONE: no
 * range to honour (absent, another unit, several ranges, or malformed: the whole file is the
 * answer, as the RFC lets a server do); ENVD_RANGE_ONE: bytes [*first, *first + *len), all
 * inside the file (a last position past its end is cut to it); ENVD_RANGE_UNSATISFIABLE: a 416
 * (a first position at or past the end, a suffix of 0, any range of an empty file). *first and
 * *len are written for ENVD_RANGE_ONE only. */
enum envd_range { ENVD_RANGE_NONE, ENVD_RANGE_ONE, ENVD_RANGE_UNSATISFIABLE };
#define ENVD_RANGE_HEADER_MAX 96 /* longer Range headers are ignored */
enum envd_range envd_range_parse(const char *header, uint64_t size, uint64_t *first, uint64_t *len);

/* Go's fs.FileMode.String() of a type and mode: "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx",
 * "urwxr-xr-x" (setuid), "dtrwxrwxrwx" (sticky). out holds 16 bytes. */
void envd_permissions(uint32_t type, uint32_t mode, char out[16]);
/* The owner name the SDK shows: "root" for 0, "user" for JAIL_USER_UID, else the number. */
void envd_owner_name(uint32_t id, char out[16]);

/* EntryInfo as JSON (a new jansson object as text, malloc'd): name, type, path, size, mode,
 * permissions, owner, group, modifiedTime, metadata when the file has some; entries of another
 * type (a FIFO, a device) have FILE_TYPE_UNSPECIFIED, which the SDK drops from lists. A symlink
 * is what envd makes of it: the type and mode of what it leads to, symlinkTarget that place's
 * absolute path; one that leads nowhere is UNSPECIFIED with its own path as symlinkTarget. */
char *envd_entry_json(const struct proto_file_entry *e);
/* The same EntryInfo as a new jansson object (NULL: no memory). */
json_t *envd_entry_object(const struct proto_file_entry *e);
/* The metadata object of an entry's "KEY=VALUE\n" lines; NULL when there are none. */
json_t *envd_metadata_object(const char *lines);

/* An upload's X-Metadata-KEY headers as metadata lines into out (ENVD_METADATA_MAX + 1 bytes),
 * as envd takes them: KEY lowercased, the first of a repeated header, an empty KEY skipped; a
 * KEY or value out of printable ASCII, or more than ENVD_METADATA_MAX bytes in all (each entry
 * counted as "user.e2b." + KEY + value), is -1 with err (EINVAL). */
#define ENVD_METADATA_MAX 4096
int envd_metadata_from_headers(const struct http_header *headers, size_t n,
                               char out[ENVD_METADATA_MAX + 1], err_t *err);

/* {"entry": EntryInfo} (Stat, MakeDir, Move). */
char *envd_entry_reply(const struct proto_file_entry *e);
/* {"entries": [EntryInfo...]} (ListDir). */
char *envd_list_reply_files(const struct proto_file_entry *entries, size_t n);
/* A WatchDir frame: {"filesystem":{"name": name relative to the watched directory, "type":
 * "EVENT_TYPE_CREATE"..., "entry": EntryInfo when entry (includeEntry)}}; NULL for an overflow
 * (the stream ends with an error instead). */
char *envd_watch_event(uint32_t kind, const char *name, json_t *entry);
/* WatchDir's first frame: {"start":{}}. */
char *envd_watch_start(void);
/* WatchDir's keepalive frame: {"keepalive":{}}. */
char *envd_watch_keepalive(void);

/* The watcher calls (CreateWatcher takes WatchDir's request). A watcher id as the daemon makes
 * them ("w" and hex digits) is far shorter; one from a client is checked against this. */
#define ENVD_WATCHER_ID_MAX 64
/* GetWatcherEvents, RemoveWatcher: {"watcherId": "..."}: non-empty, at most ENVD_WATCHER_ID_MAX
 * bytes of printable ASCII; -1 with err (EINVAL) otherwise. */
int envd_watcher_id_parse(const char *json, char out[ENVD_WATCHER_ID_MAX + 1], err_t *err);
/* CreateWatcher's answer: {"watcherId": id}. */
char *envd_watcher_created(const char *id);
/* One buffered event of a watcher. */
struct envd_watch_item {
    uint32_t kind; /* PROTO_WATCH_CREATE .. PROTO_WATCH_CHMOD */
    const char *name;
    json_t *entry; /* its EntryInfo (includeEntry), or NULL; not taken */
};
/* GetWatcherEvents' answer: {"events": [{"name", "type"}...]} in order; an item of another kind
 * (OVERFLOW) is left out. */
char *envd_watcher_events_reply(const struct envd_watch_item *items, size_t n);
