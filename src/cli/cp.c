/* hutch cp: files into and out of a sandbox through envd's /files (an upload of the raw bytes,
 * chunked, or a download), streamed both ways: no size limit, memory bounded by one buffer. */
#include "cli/sandbox_cmds.h"

#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/remote.h"

#define CP_BUFFER     (256u << 10)
#define CP_PATH_MAX   4095
#define CP_ERROR_BODY 4096 /* of a refusal's body, for its message */

static void cp_usage(FILE *out)
{
    fprintf(out, "usage: hutch cp [--user root] LOCAL ID:PATH\n"
                 "       hutch cp [--user root] ID:PATH LOCAL\n"
                 "Copies a file into or out of sandbox ID (LOCAL - is stdin or stdout; a PATH\n"
                 "or LOCAL ending in / or naming a directory gets the source's file name).\n");
}

/* "ID:PATH": the id before the first ':', if it could be one and PATH is not empty. */
static bool split_remote(const char *arg, char id[65], const char **path)
{
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg || (size_t)(colon - arg) > 64 || !colon[1])
        return false;
    snprintf(id, 65, "%.*s", (int)(colon - arg), arg);
    *path = colon + 1;
    return remote_id_ok(id);
}

/* /files?path=P, P percent-encoded (all but unreserved characters and '/'). */
static int files_target(const char *path, char *out, size_t size, err_t *err)
{
    if (strlen(path) > CP_PATH_MAX)
        return err_set(err, 0, "%.64s...: path too long", path);
    size_t at = (size_t)snprintf(out, size, "/files?path=");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (at + 4 > size)
            return err_set(err, 0, "path too long");
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            out[at++] = (char)*p;
        else
            at += (size_t)snprintf(out + at, size - at, "%%%02X", *p);
    }
    out[at] = '\0';
    return 0;
}

/* dir/ + base when target ends in '/' (or, locally, is a directory). */
static void join_base(char *out, size_t size, const char *target, const char *source, bool is_dir)
{
    size_t n = strlen(target);
    if (!is_dir && (n == 0 || target[n - 1] != '/')) {
        snprintf(out, size, "%s", target);
        return;
    }
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", source);
    snprintf(out, size, "%s%s%s", target, n && target[n - 1] == '/' ? "" : "/", basename(copy));
}

static int upload(const struct remote_envd *e, const char *local, const char *path, err_t *err)
{
    int fd = strcmp(local, "-") == 0 ? STDIN_FILENO : open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "%s", local);
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (fd != STDIN_FILENO)
            close(fd);
        return err_set(err, 0, "%s: only files are copied", local);
    }
    char dest[CP_PATH_MAX + 1];
    join_base(dest, sizeof dest, path, strcmp(local, "-") ? local : "stdin", false);
    char target[3 * CP_PATH_MAX + 32];
    struct client_header h[REMOTE_ENVD_HEADERS + 1];
    size_t n = remote_envd_headers(e, h);
    h[n++] = (struct client_header){"Content-Type", "application/octet-stream"};
    struct client *c = NULL;
    char *buf = malloc(CP_BUFFER);
    int rc = -1;
    if (!buf) {
        err_set(err, ENOMEM, "buffer");
        goto out;
    }
    if (files_target(dest, target, sizeof target, err) < 0 || !(c = client_open(err)) ||
        client_send_chunked(c, "POST", target, h, n, err) < 0)
        goto out;
    for (;;) {
        ssize_t got = read(fd, buf, CP_BUFFER);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            err_set(err, errno, "reading %s", local);
            goto out;
        }
        /* a refusal may come before the body is whole (the daemon then closes): its answer
         * is read below */
        if (client_send_chunk(c, buf, (size_t)got, err) < 0 || got == 0)
            break;
    }
    struct client_response r = {0};
    if (client_read_response(c, &r, err) == 0) {
        rc = r.status == 200 ? 0 : client_error_from(&r, err);
    }
    client_response_free(&r);
out:
    free(buf);
    client_close(c);
    if (fd != STDIN_FILENO)
        close(fd);
    return rc;
}

/* A download's body: to the local file, opened once the answer is known to be a 200 (a
 * refusal leaves an existing file as it was). */
struct sink {
    const char *local;
    int fd;
    struct client_response *r;
    char error[CP_ERROR_BODY + 1];
    size_t error_len;
};

static int sink_write(const char *data, size_t len, void *user, err_t *err)
{
    struct sink *s = user;
    if (s->r->status != 200) {
        size_t take = CP_ERROR_BODY - s->error_len < len ? CP_ERROR_BODY - s->error_len : len;
        memcpy(s->error + s->error_len, data, take);
        s->error_len += take;
        s->error[s->error_len] = '\0';
        return 0;
    }
    if (s->fd < 0) {
        s->fd = strcmp(s->local, "-") == 0
                    ? STDOUT_FILENO
                    : open(s->local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (s->fd < 0)
            return err_set(err, errno, "%s", s->local);
    }
    while (len) {
        ssize_t n = write(s->fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, errno, "writing %s", s->local);
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int download(const struct remote_envd *e, const char *path, const char *local, err_t *err)
{
    struct stat st;
    char dest[PATH_MAX];
    bool is_dir = strcmp(local, "-") && stat(local, &st) == 0 && S_ISDIR(st.st_mode);
    join_base(dest, sizeof dest, local, path, is_dir);
    char target[3 * CP_PATH_MAX + 32];
    if (files_target(path, target, sizeof target, err) < 0)
        return -1;
    struct client_header h[REMOTE_ENVD_HEADERS];
    size_t n = remote_envd_headers(e, h);
    struct client_response r = {0};
    struct sink s = {.local = dest, .fd = -1, .r = &r};
    r.on_body = sink_write;
    r.user = &s;
    int rc = client_call("GET", target, h, n, NULL, 0, &r, err);
    if (rc == 0 && r.status != 200) {
        struct client_response refusal = {.status = r.status, .body = s.error, .len = s.error_len};
        rc = client_error_from(&refusal, err);
    } else if (rc == 0 && s.fd < 0) { /* an empty file: nothing came to open it */
        s.fd = strcmp(dest, "-") == 0 ? STDOUT_FILENO
                                      : open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (s.fd < 0)
            rc = err_set(err, errno, "%s", dest);
    }
    if (s.fd > STDERR_FILENO && close(s.fd) < 0 && rc == 0)
        rc = err_set(err, errno, "closing %s", dest);
    return rc;
}

int cp_main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"user", required_argument, NULL, 'u'}, {"help", no_argument, NULL, 'h'}, {0}};
    bool as_root = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 'u':
            if (strcmp(optarg, "root") && strcmp(optarg, "user"))
                return remote_usage("cp", "--user %s: want root or user", optarg);
            as_root = strcmp(optarg, "root") == 0;
            break;
        case 'h':
            cp_usage(stdout);
            return 0;
        default:
            cp_usage(stderr);
            return REMOTE_EXIT_USAGE;
        }
    }
    if (argc - optind != 2)
        return remote_usage("cp", "want a source and a destination");
    const char *from = argv[optind], *to = argv[optind + 1], *from_path, *to_path;
    char from_id[65], to_id[65];
    bool from_remote = split_remote(from, from_id, &from_path);
    bool to_remote = split_remote(to, to_id, &to_path);
    if (from_remote == to_remote)
        return remote_usage("cp", "want one side local and the other ID:PATH");
    struct remote_envd e;
    err_t err;
    int rc = remote_envd_open(from_remote ? from_id : to_id, as_root, &e, &err);
    if (rc == 0)
        rc = from_remote ? download(&e, from_path, to, &err) : upload(&e, from, to_path, &err);
    return rc < 0 ? remote_fail("cp", REMOTE_EXIT_ERROR, &err) : 0;
}
