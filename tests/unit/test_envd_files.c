/* src/api/envd_files: the filesystem service's requests as the SDK sends them and hostile ones,
 * paths made absolute against the user's home, and EntryInfo and watch events as the SDK reads
 * them (Go's permission strings, sizes as strings, RFC 3339 times, names that are not UTF-8). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/envd_files.h"
#include "tap.h"

static const char *field(json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

int main(void)
{
    err_t err = {0};
    struct envd_fs_request r;
    ok(envd_fs_request_parse(ENVD_FS_STAT, "{\"path\":\"/home/user/a.txt\"}", &r, &err) == 0 &&
           strcmp(r.path, "/home/user/a.txt") == 0,
       "Stat {path}");
    ok(envd_fs_request_parse(ENVD_FS_LIST_DIR, "{\"path\":\"/tmp\",\"depth\":3}", &r, &err) == 0 &&
           r.depth == 3,
       "ListDir with a depth");
    ok(envd_fs_request_parse(ENVD_FS_LIST_DIR, "{\"path\":\"/tmp\"}", &r, &err) == 0 &&
           r.depth == 1,
       "ListDir without one: 1");
    ok(envd_fs_request_parse(ENVD_FS_MOVE, "{\"source\":\"a\",\"destination\":\"/b\"}", &r, &err) ==
               0 &&
           strcmp(r.path, "a") == 0 && strcmp(r.destination, "/b") == 0,
       "Move {source, destination}");
    ok(envd_fs_request_parse(ENVD_FS_WATCH_DIR,
                             "{\"path\":\"/w\",\"recursive\":true,\"includeEntry\":false}", &r,
                             &err) == 0 &&
           r.recursive && !r.include_entry,
       "WatchDir {path, recursive, includeEntry}");
    static const struct {
        enum envd_fs_call call;
        const char *json, *says;
    } bad[] = {
        {ENVD_FS_STAT, "{}", "path must be a string"},
        {ENVD_FS_STAT, "{\"path\":\"\"}", "path is empty"},
        {ENVD_FS_STAT, "{\"path\":7}", "path must be a string"},
        {ENVD_FS_REMOVE, "{\"path\":\"/a\\u0000b\"}", "not allowed"},
        {ENVD_FS_MOVE, "{\"source\":\"/a\"}", "destination must be a string"},
        {ENVD_FS_LIST_DIR, "{\"path\":\"/\",\"depth\":-1}", "depth must be"},
        {ENVD_FS_LIST_DIR, "{\"path\":\"/\",\"depth\":65}", "depth must be"},
        {ENVD_FS_WATCH_DIR, "{\"path\":\"/\",\"recursive\":1}", "recursive must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_clear(&err);
        ok(envd_fs_request_parse(bad[i].call, bad[i].json, &r, &err) < 0 && err.errnum == EINVAL &&
               strstr(err.msg, bad[i].says) && r.path[0] == '\0',
           "%s: refused (%s)", bad[i].json, err.msg);
    }
    char *big = malloc(ENVD_PATH_MAX + 64);
    snprintf(big, ENVD_PATH_MAX + 64, "{\"path\":\"/%0*d\"}", ENVD_PATH_MAX, 0);
    ok(envd_fs_request_parse(ENVD_FS_STAT, big, &r, &err) < 0 && err.errnum == ENAMETOOLONG,
       "a path over %d bytes: ENAMETOOLONG", ENVD_PATH_MAX);

    char abs[ENVD_PATH_MAX + 1];
    ok(envd_path_absolute("a.txt", false, abs, &err) == 0 && strcmp(abs, "/home/user/a.txt") == 0,
       "a relative path is the user's home's");
    ok(envd_path_absolute("a.txt", true, abs, &err) == 0 && strcmp(abs, "/root/a.txt") == 0,
       "root's, from /root");
    ok(envd_path_absolute("~/x", false, abs, &err) == 0 && strcmp(abs, "/home/user/x") == 0 &&
           envd_path_absolute("~", false, abs, &err) == 0 && strcmp(abs, "/home/user") == 0,
       "~ and ~/x");
    ok(envd_path_absolute("/etc/../x", false, abs, &err) == 0 && strcmp(abs, "/etc/../x") == 0,
       "an absolute path is left to the files workers to normalize");
    memset(big, 'a', ENVD_PATH_MAX - 5);
    big[ENVD_PATH_MAX - 5] = '\0';
    ok(envd_path_absolute(big, false, abs, &err) < 0 && err.errnum == ENAMETOOLONG,
       "a relative path that the home makes too long: ENAMETOOLONG, not cut");
    ok(envd_path_absolute("", false, abs, &err) < 0 && err.errnum == EINVAL, "empty: EINVAL");
    free(big);

    char perms[16];
    envd_permissions(PROTO_FILE_TYPE_FILE, 0644, perms);
    is_str(perms, "-rw-r--r--", "a file 0644");
    envd_permissions(PROTO_FILE_TYPE_DIR, 0755, perms);
    is_str(perms, "drwxr-xr-x", "a directory 0755");
    envd_permissions(PROTO_FILE_TYPE_SYMLINK, 0777, perms);
    is_str(perms, "Lrwxrwxrwx", "a symlink, as Go writes it");
    envd_permissions(PROTO_FILE_TYPE_DIR, 01777, perms);
    is_str(perms, "dtrwxrwxrwx", "/tmp, sticky");
    envd_permissions(PROTO_FILE_TYPE_FILE, 04755, perms);
    is_str(perms, "urwxr-xr-x", "setuid");

    struct proto_file_entry e = {.path = "/home/user/a\xff.txt",
                                 .name = "a\xff.txt",
                                 .symlink = "",
                                 .type = PROTO_FILE_TYPE_FILE,
                                 .mode = 0644,
                                 .uid = 1000,
                                 .gid = 1000,
                                 .size = 10,
                                 .mtime_ns = 1796329059123000000LL};
    char *text = envd_entry_reply(&e);
    json_t *o = json_loads(text ? text : "", 0, NULL);
    json_t *entry = json_object_get(o, "entry");
    ok(entry && strcmp(field(entry, "name"), "a\xef\xbf\xbd.txt") == 0 &&
           strcmp(field(entry, "type"), "FILE_TYPE_FILE") == 0 &&
           strcmp(field(entry, "size"), "10") == 0 &&
           json_integer_value(json_object_get(entry, "mode")) == 0644 &&
           strcmp(field(entry, "permissions"), "-rw-r--r--") == 0 &&
           strcmp(field(entry, "owner"), "user") == 0 &&
           strcmp(field(entry, "modifiedTime"), "2026-12-03T20:17:39.123000000Z") == 0 &&
           !json_object_get(entry, "symlinkTarget"),
       "EntryInfo: a name that is not UTF-8 with U+FFFD, size as a string, mode, permissions, "
       "owner, time (%s)",
       text);
    json_decref(o);
    free(text);
    struct proto_file_entry l = {.path = "/home/user/l",
                                 .name = "l",
                                 .symlink = "../../etc/passwd",
                                 .target = "/etc/passwd",
                                 .target_type = PROTO_FILE_TYPE_FILE,
                                 .target_mode = 0644,
                                 .type = PROTO_FILE_TYPE_SYMLINK,
                                 .mode = 0777};
    struct proto_file_entry both[] = {e, l};
    text = envd_list_reply_files(both, 2);
    o = json_loads(text ? text : "", 0, NULL);
    json_t *second = json_array_get(json_object_get(o, "entries"), 1);
    ok(json_array_size(json_object_get(o, "entries")) == 2 &&
           strcmp(field(second, "type"), "FILE_TYPE_FILE") == 0 &&
           json_integer_value(json_object_get(second, "mode")) == 0644 &&
           strcmp(field(second, "permissions"), "Lrwxrwxrwx") == 0 &&
           strcmp(field(second, "symlinkTarget"), "/etc/passwd") == 0 &&
           strcmp(field(second, "owner"), "root") == 0 &&
           strcmp(field(second, "modifiedTime"), "1970-01-01T00:00:00Z") == 0,
       "ListDir's entries; a symlink as envd shows it: its target's absolute path, type and mode");
    json_decref(o);
    free(text);
    struct proto_file_entry dangling = {.path = "/home/user/d",
                                        .name = "d",
                                        .symlink = "nowhere",
                                        .type = PROTO_FILE_TYPE_SYMLINK,
                                        .mode = 0777};
    text = envd_entry_json(&dangling);
    o = json_loads(text ? text : "", 0, NULL);
    ok(o && strcmp(field(o, "type"), "FILE_TYPE_UNSPECIFIED") == 0 &&
           strcmp(field(o, "symlinkTarget"), "/home/user/d") == 0,
       "a dangling symlink: no type, its own path as target (envd's EvalSymlinks fallback)");
    json_decref(o);
    free(text);
    struct proto_file_entry meta = e;
    meta.metadata = "owner=alice\nempty=\n";
    text = envd_entry_json(&meta);
    o = json_loads(text ? text : "", 0, NULL);
    json_t *md = o ? json_object_get(o, "metadata") : NULL;
    ok(md && json_object_size(md) == 2 && strcmp(field(md, "owner"), "alice") == 0 &&
           strcmp(field(md, "empty"), "") == 0,
       "metadata lines become EntryInfo's metadata (%s)", text ? text : "");
    json_decref(o);
    free(text);
    text = envd_entry_json(&e);
    ok(text && !strstr(text, "metadata"), "no metadata: no field (proto3 omits an empty map)");
    free(text);

    char lines[ENVD_METADATA_MAX + 1];
    err_t merr = {0};
    struct http_header hs[] = {{"X-Metadata-Owner", "alice"},
                               {"Content-Type", "x"},
                               {"x-metadata-owner", "bob"},
                               {"X-Metadata-", "skipped"},
                               {"X-METADATA-Stage", "a b"}};
    ok(envd_metadata_from_headers(hs, 5, lines, &merr) == 0 &&
           strcmp(lines, "owner=alice\nstage=a b\n") == 0,
       "X-Metadata-* headers: keys lowercased, the first of a repeated one, an empty key "
       "skipped");
    struct http_header bad_value[] = {{"X-Metadata-k", "caf\xc3\xa9"}};
    ok(envd_metadata_from_headers(bad_value, 1, lines, &merr) < 0 && merr.errnum == EINVAL,
       "a value out of printable ASCII: refused");
    struct http_header bad_key[] = {{"X-Metadata-a=b", "v"}};
    ok(envd_metadata_from_headers(bad_key, 1, lines, &merr) < 0, "a key with '=': refused");
    static char huge[5000];
    memset(huge, 'v', sizeof huge - 1);
    struct http_header too_big[] = {{"X-Metadata-k", huge}};
    ok(envd_metadata_from_headers(too_big, 1, lines, &merr) < 0 && strstr(merr.msg, "4096"),
       "more than 4096 bytes: refused");
    text = envd_watch_event(PROTO_WATCH_CREATE, "sub/new.txt", NULL);
    is_str(text, "{\"filesystem\":{\"name\":\"sub/new.txt\",\"type\":\"EVENT_TYPE_CREATE\"}}",
           "a watch event, its name relative to the watched directory");
    free(text);
    json_t *entry_obj = envd_entry_object(&e);
    char *entry_text = envd_entry_json(&e);
    text = envd_watch_event(PROTO_WATCH_WRITE, "a.txt", entry_obj);
    json_t *parsed = text ? json_loads(text, 0, NULL) : NULL;
    json_t *got_entry = json_object_get(json_object_get(parsed, "filesystem"), "entry");
    char *got_text = got_entry ? json_dumps(got_entry, JSON_COMPACT) : NULL;
    ok(got_text && entry_text && strcmp(got_text, entry_text) == 0,
       "an event of a watch with includeEntry carries the file's EntryInfo, as Stat has it");
    free(got_text);
    json_decref(parsed);
    free(text);
    free(entry_text);
    ok(envd_watch_event(PROTO_WATCH_OVERFLOW, "x", NULL) == NULL &&
           envd_watch_event(99, "x", entry_obj) == NULL,
       "an overflow or an unknown kind gives no event frame");
    struct envd_watch_item with_entry[] = {{PROTO_WATCH_CREATE, "a", entry_obj},
                                           {PROTO_WATCH_REMOVE, "b", NULL}};
    text = envd_watcher_events_reply(with_entry, 2);
    ok(text && strstr(text, "\"entry\":{") &&
           strstr(text, "\"name\":\"b\",\"type\":\"EVENT_TYPE_REMOVE\"}"),
       "GetWatcherEvents: the entry where there is one, none where not (%s)", text ? text : "");
    free(text);
    ok(entry_obj && entry_obj->refcount == 1, "the caller's entry is not taken");
    json_decref(entry_obj);
    text = envd_watch_start();
    is_str(text, "{\"start\":{}}", "WatchDir's first frame");
    free(text);
    text = envd_watch_keepalive();
    is_str(text, "{\"keepalive\":{}}", "WatchDir's keepalive frame");
    free(text);

    /* the watcher calls */
    char id[ENVD_WATCHER_ID_MAX + 1];
    ok(envd_watcher_id_parse("{\"watcherId\":\"w0123abcd\"}", id, &err) == 0 &&
           strcmp(id, "w0123abcd") == 0,
       "GetWatcherEvents / RemoveWatcher {watcherId}");
    static const char *const bad_ids[] = {
        "{}",
        "{\"watcherId\":\"\"}",
        "{\"watcherId\":7}",
        "{\"watcherId\":null}",
        "{\"watcherId\":\"a b\"}",
        "{\"watcherId\":\"a\\nb\"}",
        "{\"watcherId\":\"a\\u0000b\"}",
        "{\"watcherId\":\"\u00e9\"}",
        "{\"watcherId\":\"a\",\"watcherId\":\"b\"}",
        "{\"watcherId\":",
        "[\"w1\"]",
        "{\"watcherId\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
    };
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        err = (err_t){0};
        strcpy(id, "stale");
        ok(envd_watcher_id_parse(bad_ids[i], id, &err) < 0 && err.errnum && err.msg[0] && !id[0],
           "a bad watcherId is refused: %s", bad_ids[i]);
    }
    char sixty_four[80];
    memset(sixty_four, 'a', 64);
    sixty_four[64] = '\0';
    char body[128];
    snprintf(body, sizeof body, "{\"watcherId\":\"%s\"}", sixty_four);
    ok(envd_watcher_id_parse(body, id, &err) == 0 && strlen(id) == 64,
       "a watcherId of ENVD_WATCHER_ID_MAX bytes is taken");
    text = envd_watcher_created("w42");
    is_str(text, "{\"watcherId\":\"w42\"}", "CreateWatcher's answer");
    free(text);
    struct envd_watch_item items[] = {{PROTO_WATCH_CREATE, "a", NULL},
                                      {PROTO_WATCH_OVERFLOW, ".", NULL},
                                      {PROTO_WATCH_RENAME, "d/\xff", NULL},
                                      {PROTO_WATCH_CHMOD, "b", NULL}};
    text = envd_watcher_events_reply(items, 4);
    is_str(
        text,
        "{\"events\":[{\"name\":\"a\",\"type\":\"EVENT_TYPE_CREATE\"},{\"name\":\"d/\xef\xbf\xbd\","
        "\"type\":\"EVENT_TYPE_RENAME\"},{\"name\":\"b\",\"type\":\"EVENT_TYPE_CHMOD\"}]}",
        "GetWatcherEvents' answer: in order, an overflow left out, a name that is not UTF-8 with "
        "U+FFFD");
    free(text);
    text = envd_watcher_events_reply(NULL, 0);
    is_str(text, "{\"events\":[]}", "no events: an empty list");
    free(text);
    /* Range (RFC 9110 14.2) against a file of 100 bytes */
    static const struct {
        const char *header;
        uint64_t size;
        enum envd_range want;
        uint64_t first, len;
    } ranges[] = {
        {"bytes=0-9", 100, ENVD_RANGE_ONE, 0, 10},
        {"bytes=10-", 100, ENVD_RANGE_ONE, 10, 90},
        {"bytes=-5", 100, ENVD_RANGE_ONE, 95, 5},
        {"bytes=-500", 100, ENVD_RANGE_ONE, 0, 100},
        {"bytes=90-500", 100, ENVD_RANGE_ONE, 90, 10},
        {"Bytes= 99-99 ", 100, ENVD_RANGE_ONE, 99, 1},
        {"bytes=100-", 100, ENVD_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=-0", 100, ENVD_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=0-", 0, ENVD_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=-1", 0, ENVD_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=18446744073709551615-", 100, ENVD_RANGE_UNSATISFIABLE, 0, 0},
        {NULL, 100, ENVD_RANGE_NONE, 0, 0},
        {"", 100, ENVD_RANGE_NONE, 0, 0},
        {"items=0-1", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=0-1,5-6", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=5-1", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=-", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=a-b", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=+1-2", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=1--2", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=1 -2", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=18446744073709551616-", 100, ENVD_RANGE_NONE, 0, 0},
        {"bytes=0-99999999999999999999999", 100, ENVD_RANGE_NONE, 0, 0},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        uint64_t first = 7, len = 7;
        enum envd_range got = envd_range_parse(ranges[i].header, ranges[i].size, &first, &len);
        ok(got == ranges[i].want &&
               (got != ENVD_RANGE_ONE || (first == ranges[i].first && len == ranges[i].len)),
           "Range '%s' of %llu bytes: %d [%llu, +%llu)",
           ranges[i].header ? ranges[i].header : "(none)", (unsigned long long)ranges[i].size,
           (int)got, (unsigned long long)first, (unsigned long long)len);
    }
    char longer[ENVD_RANGE_HEADER_MAX + 16] = "bytes=0-1";
    memset(longer + 9, ' ', sizeof longer - 10);
    longer[sizeof longer - 1] = '\0';
    uint64_t first, len;
    ok(envd_range_parse(longer, 100, &first, &len) == ENVD_RANGE_NONE,
       "a Range header past %d bytes is ignored", ENVD_RANGE_HEADER_MAX);
    return done_testing();
}
