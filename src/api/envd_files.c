#include "api/envd_files.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/json_input.h"
#include "jail/jail.h"
#include "util/parse.h"
#include "util/strfmt.h"
#include "util/utf8.h"

static int take_path(const json_t *root, const char *field, char *out, err_t *err)
{
    const char *s = api_json_string(json_object_get(root, field), field, ENVD_PATH_MAX, err);
    if (!s)
        return -1;
    if (!s[0])
        return api_input_error(err, EINVAL, "%s is empty", field);
    snprintf(out, ENVD_PATH_MAX + 1, "%s", s);
    return 0;
}

static int take_bool(const json_t *root, const char *field, bool *out, err_t *err)
{
    const json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return api_input_error(err, EINVAL, "%s must be true or false", field);
    *out = json_is_true(v);
    return 0;
}

int envd_fs_request_parse(enum envd_fs_call call, const char *json, struct envd_fs_request *out,
                          err_t *err)
{
    memset(out, 0, sizeof *out);
    out->depth = 1;
    json_t *root = api_json_object(json, json ? strlen(json) : 0, err);
    if (!root)
        return -1;
    int rc;
    if (call == ENVD_FS_MOVE)
        rc = take_path(root, "source", out->path, err) < 0 ||
                     take_path(root, "destination", out->destination, err) < 0
                 ? -1
                 : 0;
    else
        rc = take_path(root, "path", out->path, err);
    if (rc == 0 && call == ENVD_FS_LIST_DIR) {
        const json_t *d = json_object_get(root, "depth");
        if (d && !json_is_null(d)) {
            if (!json_is_integer(d) || json_integer_value(d) < 0 ||
                json_integer_value(d) > ENVD_LIST_DEPTH_MAX)
                rc = api_input_error(err, EINVAL, "depth must be a number from 1 to %d",
                                     ENVD_LIST_DEPTH_MAX);
            else if (json_integer_value(d) > 0) /* 0 is proto3's default: 1 */
                out->depth = (uint32_t)json_integer_value(d);
        }
    }
    if (rc == 0 && call == ENVD_FS_WATCH_DIR)
        rc = take_bool(root, "recursive", &out->recursive, err) < 0 ||
                     take_bool(root, "includeEntry", &out->include_entry, err) < 0
                 ? -1
                 : 0;
    json_decref(root);
    if (rc < 0) {
        int errnum = err->errnum;
        memset(out, 0, sizeof *out);
        err->errnum = errnum;
    }
    return rc;
}

int envd_path_absolute(const char *path, bool as_root, char out[ENVD_PATH_MAX + 1], err_t *err)
{
    const char *home = as_root ? "/root" : "/home/user";
    if (!path || !path[0])
        return api_input_error(err, EINVAL, "the path is empty");
    int rc;
    if (path[0] == '/')
        rc = strfmt(out, ENVD_PATH_MAX + 1, "%s", path);
    else if (strcmp(path, "~") == 0)
        rc = strfmt(out, ENVD_PATH_MAX + 1, "%s", home);
    else if (strncmp(path, "~/", 2) == 0)
        rc = strfmt(out, ENVD_PATH_MAX + 1, "%s/%s", home, path + 2);
    else
        rc = strfmt(out, ENVD_PATH_MAX + 1, "%s/%s", home, path);
    if (rc < 0)
        return api_input_error(err, ENAMETOOLONG, "the path is longer than %d bytes",
                               ENVD_PATH_MAX);
    return 0;
}

void envd_permissions(uint32_t type, uint32_t mode, char out[16])
{
    /* Go's order of type letters, then the nine permission bits */
    size_t n = 0;
    if (type == PROTO_FILE_TYPE_DIR)
        out[n++] = 'd';
    if (type == PROTO_FILE_TYPE_SYMLINK)
        out[n++] = 'L';
    if (mode & 04000)
        out[n++] = 'u';
    if (mode & 02000)
        out[n++] = 'g';
    if (mode & 01000)
        out[n++] = 't';
    if (type == PROTO_FILE_TYPE_OTHER)
        out[n++] = '?';
    if (n == 0)
        out[n++] = '-';
    static const char rwx[] = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        out[n++] = (mode & (0400u >> i)) ? rwx[i] : '-';
    out[n] = '\0';
}

void envd_owner_name(uint32_t id, char out[16])
{
    if (id == 0)
        snprintf(out, 16, "root");
    else if (id == JAIL_USER_UID)
        snprintf(out, 16, "user");
    else
        snprintf(out, 16, "%u", id);
}

static const char *file_type_name(uint32_t type)
{
    switch (type) {
    case PROTO_FILE_TYPE_FILE:
        return "FILE_TYPE_FILE";
    case PROTO_FILE_TYPE_DIR:
        return "FILE_TYPE_DIRECTORY";
    case PROTO_FILE_TYPE_SYMLINK:
        return "FILE_TYPE_SYMLINK";
    default:
        return "FILE_TYPE_UNSPECIFIED";
    }
}

/* google.protobuf.Timestamp's JSON: RFC 3339 in UTC, nanoseconds when there are any. */
static void timestamp(int64_t ns, char out[48])
{
    int64_t s = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        s--;
    }
    time_t t = (time_t)s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 1) {
        snprintf(out, 48, "1970-01-01T00:00:00Z");
        return;
    }
    int n = snprintf(out, 48, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (frac)
        snprintf(out + n, 48 - (size_t)n, ".%09lldZ", (long long)frac);
    else
        snprintf(out + n, 48 - (size_t)n, "Z");
}

/* A file name as JSON text: names are bytes, JSON is UTF-8; a byte that is not becomes U+FFFD,
 * as Go's encoding/json (envd's) writes it. */
static json_t *name_string(const char *s)
{
    size_t n;
    char *clean = utf8_sanitize(s ? s : "", s ? strlen(s) : 0, &n);
    json_t *v = clean ? json_stringn(clean, n) : NULL;
    free(clean);
    return v;
}

json_t *envd_metadata_object(const char *lines)
{
    if (!lines || !lines[0])
        return NULL;
    json_t *o = json_object();
    for (const char *line = lines; o && *line;) {
        const char *nl = strchr(line, '\n'), *eq = strchr(line, '=');
        if (!nl || !eq || eq > nl)
            break; /* init checked them: never */
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - line), line);
        json_object_set_new(o, key, json_stringn(eq + 1, (size_t)(nl - eq - 1)));
        line = nl + 1;
    }
    if (o && json_object_size(o) == 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int envd_metadata_from_headers(const struct http_header *headers, size_t n,
                               char out[ENVD_METADATA_MAX + 1], err_t *err)
{
    static const char prefix[] = "X-Metadata-";
    size_t len = 0, total = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *name = headers[i].name, *value = headers[i].value;
        if (strncasecmp(name, prefix, sizeof prefix - 1) != 0 || !name[sizeof prefix - 1])
            continue;
        char key[256];
        const char *k = name + sizeof prefix - 1;
        size_t klen = strlen(k);
        if (klen > 255 - 9)
            return api_input_error(err, EINVAL, "invalid metadata: a key longer than %d bytes",
                                   255 - 9);
        for (size_t j = 0; j <= klen; j++)
            key[j] = (char)tolower((unsigned char)k[j]);
        bool seen = false; /* a repeated header (any case): its first value, as Go's Get */
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcasecmp(headers[j].name, name) == 0;
        if (seen)
            continue;
        for (size_t j = 0; j < klen; j++)
            if (!isalnum((unsigned char)key[j]) && !strchr("!#$%&'*+-.^_`|~", key[j]))
                return api_input_error(err, EINVAL,
                                       "invalid metadata: key %.64s has a character that is not "
                                       "an HTTP token's",
                                       key);
        for (const char *v = value; *v; v++)
            if ((unsigned char)*v < 0x20 || (unsigned char)*v > 0x7e)
                return api_input_error(err, EINVAL,
                                       "invalid metadata: the value for key %.64s is not "
                                       "printable ASCII",
                                       key);
        total += 9 + klen + strlen(value);
        if (total > ENVD_METADATA_MAX)
            return api_input_error(err, EINVAL, "invalid metadata: more than %d bytes in all",
                                   ENVD_METADATA_MAX);
        len += (size_t)snprintf(out + len, ENVD_METADATA_MAX + 1 - len, "%s=%s\n", key, value);
    }
    return 0;
}

static json_t *entry_object(const struct proto_file_entry *e)
{
    char perms[16], owner[16], group[16], mtime[48], size[24];
    envd_permissions(e->type, e->mode, perms);
    envd_owner_name(e->uid, owner);
    envd_owner_name(e->gid, group);
    timestamp(e->mtime_ns, mtime);
    snprintf(size, sizeof size, "%llu", (unsigned long long)e->size);
    /* envd's for a symlink: the type and mode of where it leads (none when nowhere) */
    bool link = e->type == PROTO_FILE_TYPE_SYMLINK, leads = link && e->target && e->target[0];
    uint32_t type = !link ? e->type : leads ? e->target_type : PROTO_FILE_TYPE_OTHER;
    uint32_t mode = !link ? e->mode : leads ? e->target_mode : 0;
    json_t *o = json_pack(
        "{s:o, s:s, s:o, s:s, s:i, s:s, s:s, s:s, s:s}", "name", name_string(e->name), "type",
        file_type_name(type == PROTO_FILE_TYPE_SYMLINK ? PROTO_FILE_TYPE_OTHER : type), "path",
        name_string(e->path), "size", size, "mode", (int)(mode & 0777), "permissions", perms,
        "owner", owner, "group", group, "modifiedTime", mtime);
    if (o && link)
        json_object_set_new(o, "symlinkTarget", name_string(leads ? e->target : e->path));
    json_t *metadata = envd_metadata_object(e->metadata);
    if (o && metadata)
        json_object_set_new(o, "metadata", metadata);
    return o;
}

static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *envd_entry_json(const struct proto_file_entry *e)
{
    return dump(entry_object(e));
}

json_t *envd_entry_object(const struct proto_file_entry *e)
{
    return entry_object(e);
}

char *envd_entry_reply(const struct proto_file_entry *e)
{
    json_t *entry = entry_object(e);
    return entry ? dump(json_pack("{s:o}", "entry", entry)) : NULL;
}

char *envd_list_reply_files(const struct proto_file_entry *entries, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *entry = entry_object(&entries[i]);
        if (!entry || json_array_append_new(list, entry) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list ? dump(json_pack("{s:o}", "entries", list)) : NULL;
}

static const char *event_type_name(uint32_t kind)
{
    static const char *const names[] = {
        [PROTO_WATCH_CREATE] = "EVENT_TYPE_CREATE", [PROTO_WATCH_WRITE] = "EVENT_TYPE_WRITE",
        [PROTO_WATCH_REMOVE] = "EVENT_TYPE_REMOVE", [PROTO_WATCH_RENAME] = "EVENT_TYPE_RENAME",
        [PROTO_WATCH_CHMOD] = "EVENT_TYPE_CHMOD",
    };
    return kind < sizeof names / sizeof names[0] ? names[kind] : NULL;
}

/* FilesystemEvent: {"name", "type", "entry"?}; NULL for a kind that has no EventType. */
static json_t *event_object(uint32_t kind, const char *name, json_t *entry)
{
    const char *type = event_type_name(kind);
    json_t *e = type ? json_pack("{s:o, s:s}", "name", name_string(name), "type", type) : NULL;
    if (e && entry && json_object_set(e, "entry", entry) < 0) {
        json_decref(e);
        return NULL;
    }
    return e;
}

char *envd_watch_event(uint32_t kind, const char *name, json_t *entry)
{
    json_t *e = event_object(kind, name, entry);
    return e ? dump(json_pack("{s:o}", "filesystem", e)) : NULL;
}

char *envd_watch_start(void)
{
    return dump(json_pack("{s:{}}", "start"));
}

char *envd_watch_keepalive(void)
{
    return dump(json_pack("{s:{}}", "keepalive"));
}

int envd_watcher_id_parse(const char *json, char out[ENVD_WATCHER_ID_MAX + 1], err_t *err)
{
    out[0] = '\0';
    json_t *root = api_json_object(json, json ? strlen(json) : 0, err);
    if (!root)
        return -1;
    const json_t *v = json_object_get(root, "watcherId");
    const char *id = v ? api_json_string(v, "watcherId", ENVD_WATCHER_ID_MAX, err) : NULL;
    int rc = 0;
    if (!v)
        rc = api_input_error(err, EINVAL, "watcherId is missing");
    else if (!id)
        rc = -1;
    else if (!id[0])
        rc = api_input_error(err, EINVAL, "watcherId is empty");
    for (const char *c = id; rc == 0 && *c; c++)
        if (*c < 0x21 || *c > 0x7e)
            rc = api_input_error(err, EINVAL, "watcherId holds a byte that is not printable ASCII");
    if (rc == 0)
        snprintf(out, ENVD_WATCHER_ID_MAX + 1, "%s", id);
    json_decref(root);
    return rc;
}

char *envd_watcher_created(const char *id)
{
    return dump(json_pack("{s:s}", "watcherId", id));
}

char *envd_watcher_events_reply(const struct envd_watch_item *items, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        if (!event_type_name(items[i].kind))
            continue;
        json_t *e = event_object(items[i].kind, items[i].name, items[i].entry);
        if (!e || json_array_append_new(list, e) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list ? dump(json_pack("{s:o}", "events", list)) : NULL;
}

/* ---------- Range ---------- */

/* A byte position of a Range: 1 to 20 digits, nothing else. */
static bool range_pos(const char *s, size_t n, uint64_t *out)
{
    char digits[21];
    if (n == 0 || n >= sizeof digits)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    memcpy(digits, s, n);
    digits[n] = '\0';
    return parse_count(digits, 0, UINT64_MAX, out) == 0;
}

enum envd_range envd_range_parse(const char *header, uint64_t size, uint64_t *first, uint64_t *len)
{
    if (!header || strlen(header) > ENVD_RANGE_HEADER_MAX || strncasecmp(header, "bytes=", 6) != 0)
        return ENVD_RANGE_NONE;
    const char *spec = header + 6;
    while (*spec == ' ' || *spec == '\t')
        spec++;
    size_t n = strlen(spec);
    while (n && (spec[n - 1] == ' ' || spec[n - 1] == '\t'))
        n--;
    const char *dash = memchr(spec, '-', n);
    if (!dash || memchr(spec, ',', n))
        return ENVD_RANGE_NONE; /* malformed, or several ranges: the whole file */
    size_t left = (size_t)(dash - spec), right = n - left - 1;
    uint64_t a, b;
    if (left == 0) { /* a suffix: the last b bytes */
        if (!range_pos(dash + 1, right, &b))
            return ENVD_RANGE_NONE;
        if (b == 0 || size == 0)
            return ENVD_RANGE_UNSATISFIABLE;
        *first = b >= size ? 0 : size - b;
        *len = size - *first;
        return ENVD_RANGE_ONE;
    }
    if (!range_pos(spec, left, &a))
        return ENVD_RANGE_NONE;
    if (right == 0)
        b = UINT64_MAX;
    else if (!range_pos(dash + 1, right, &b) || b < a)
        return ENVD_RANGE_NONE;
    if (a >= size)
        return ENVD_RANGE_UNSATISFIABLE;
    if (b >= size)
        b = size - 1;
    *first = a;
    *len = b - a + 1;
    return ENVD_RANGE_ONE;
}
