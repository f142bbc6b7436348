/* A command's record in the run directory (commands.h: scmd_record_*), so that a daemon started
 * after a kill -9 adopts a running command whole: RUN/ID.cmds/N.json (N: init's id of it) holds
 * what List shows and its lifetime, written once when it starts; N.out.0 and N.out.1 hold the
 * last of its output, written in turn as it is read from the command, each up to
 * SCMD_RECORD_HALF, so that the older and the newer one together keep between a half and the
 * whole of SCMD_REPLAY_MAX. Each output file starts with a 4-byte sequence number (the higher
 * one is the newer file), then records: a stream byte, a 4-byte length, the bytes; a record cut
 * short by a crash is ignored. The run directory is a tmpfs on a usual host: the records cost
 * memory, not disk writes, and do not outlive a reboot, which the commands do not either. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "serve/commands.h"
#include "util/strfmt.h"

#define RECORD_SUFFIX  ".cmds"
#define RECORD_HEADER  4
#define RECORD_ENTRY   5
#define RECORD_MAX_ARG (64u << 10) /* a record bigger than this was not written by hutch */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* RUN/ID.cmds/N.json, and output file n: RUN/ID.cmds/N.out.n (relative to the run dir's fd). */
static int json_path(const struct sbx *sb, uint32_t cmd_id, char *out, size_t size)
{
    return strfmt(out, size, "%s" RECORD_SUFFIX "/%u.json", sb->id, cmd_id);
}

static int out_path(const struct sbx *sb, uint32_t cmd_id, unsigned n, char *out, size_t size)
{
    return strfmt(out, size, "%s" RECORD_SUFFIX "/%u.out.%u", sb->id, cmd_id, n);
}

static json_t *list_json(char **list)
{
    json_t *a = json_array();
    for (size_t i = 0; a && list && list[i]; i++)
        json_array_append_new(a, json_string(list[i]));
    return a;
}

/* Opens output file n for appending, truncated, with sequence number seq. */
static int open_out(struct scmd *c, unsigned n, uint32_t seq)
{
    char path[PATH_MAX];
    if (out_path(c->sb, c->cmd_id, n, path, sizeof path) < 0)
        return -1;
    int fd =
        openat(c->sb->d->run_fd, path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    uint8_t h[RECORD_HEADER];
    put_u32(h, seq);
    if (write(fd, h, sizeof h) != (ssize_t)sizeof h) {
        close(fd);
        return -1;
    }
    c->record_fd = fd;
    c->record_file = n;
    c->record_seq = seq;
    c->record_size = RECORD_HEADER;
    return 0;
}

/* N.json: written whole to N.json.tmp, then renamed over it. */
static int write_meta(struct scmd *c, char *dir, size_t dir_size)
{
    struct serve *d = c->sb->d;
    char path[PATH_MAX], tmp[PATH_MAX];
    if (strfmt(dir, dir_size, "%s" RECORD_SUFFIX, c->sb->id) < 0 ||
        json_path(c->sb, c->cmd_id, path, sizeof path) < 0 ||
        strfmt(tmp, sizeof tmp, "%s.tmp", path) < 0)
        return -1;
    if (mkdirat(d->run_fd, dir, 0700) < 0 && errno != EEXIST)
        return -1;
    json_t *o = json_pack("{s:o, s:o, s:s?, s:s?, s:I, s:I}", "argv", list_json(c->argv), "envp",
                          list_json(c->envp), "cwd", c->cwd, "tag", c->tag, "startWallMs",
                          (json_int_t)c->start_wall_ms, "lifetimeMs", (json_int_t)c->lifetime_ms);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int fd = text ? openat(d->run_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    bool written = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    if (fd >= 0)
        close(fd);
    free(text);
    return written && renameat(d->run_fd, tmp, d->run_fd, path) == 0 ? 0 : -1;
}

void scmd_record_start(struct scmd *c)
{
    char dir[PATH_MAX] = "";
    c->record_fd = -1;
    if (write_meta(c, dir, sizeof dir) == 0 && open_out(c, 0, 1) == 0)
        return;
    fprintf(stderr, "hutch serve: %s: command %u: its record in %s: %s\n", c->sb->id, c->pid, dir,
            strerror(errno));
}

void scmd_record_update(struct scmd *c)
{
    char dir[PATH_MAX] = "";
    if (c->record_fd >= 0 && write_meta(c, dir, sizeof dir) < 0)
        fprintf(stderr, "hutch serve: %s: command %u: its record in %s: %s\n", c->sb->id, c->pid,
                dir, strerror(errno));
}

void scmd_record_output(struct scmd *c, unsigned stream, const uint8_t *data, size_t len)
{
    if (c->record_fd < 0)
        return;
    if (c->record_size + RECORD_ENTRY + len > SCMD_RECORD_HALF && c->record_size > RECORD_HEADER) {
        close(c->record_fd); /* the other one, truncated, becomes the newer */
        c->record_fd = -1;
        if (open_out(c, c->record_file ^ 1u, c->record_seq + 1) < 0)
            return;
    }
    uint8_t h[RECORD_ENTRY];
    h[0] = (uint8_t)stream;
    put_u32(h + 1, (uint32_t)len);
    struct iovec v[2] = {{h, sizeof h}, {(void *)data, len}};
    ssize_t w = writev(c->record_fd, v, 2);
    if (w != (ssize_t)(sizeof h + len)) { /* a full tmpfs: the record stops, the command not */
        close(c->record_fd);
        c->record_fd = -1;
        return;
    }
    c->record_size += (size_t)w;
}

void scmd_record_close(struct scmd *c)
{
    if (c->record_fd >= 0)
        close(c->record_fd);
    c->record_fd = -1;
}

void scmd_record_forget(struct sbx *sb, uint32_t cmd_id)
{
    char path[PATH_MAX];
    int run_fd = sb->d->run_fd;
    if (json_path(sb, cmd_id, path, sizeof path) == 0)
        unlinkat(run_fd, path, 0);
    for (unsigned n = 0; n < 2; n++)
        if (out_path(sb, cmd_id, n, path, sizeof path) == 0)
            unlinkat(run_fd, path, 0);
}

void scmd_record_remove(struct scmd *c)
{
    scmd_record_close(c);
    scmd_record_forget(c->sb, c->cmd_id);
}

/* ---------- adopting ---------- */

static char **list_from(const json_t *a)
{
    size_t n = json_array_size(a);
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s || strlen(s) > RECORD_MAX_ARG || !(out[i] = strdup(s))) {
            for (size_t k = 0; k < i; k++)
                free(out[k]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* The whole of output file n (malloc'd, *len bytes), or NULL. */
static uint8_t *read_out(struct scmd *c, unsigned n, size_t *len)
{
    char path[PATH_MAX];
    *len = 0;
    if (out_path(c->sb, c->cmd_id, n, path, sizeof path) < 0)
        return NULL;
    int fd = openat(c->sb->d->run_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < RECORD_HEADER ||
        (size_t)st.st_size > 2 * (size_t)SCMD_RECORD_HALF) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    uint8_t *buf = malloc((size_t)st.st_size);
    ssize_t got = buf ? pread(fd, buf, (size_t)st.st_size, 0) : -1;
    close(fd);
    if (got < RECORD_HEADER) {
        free(buf);
        return NULL;
    }
    *len = (size_t)got;
    return buf;
}

/* Its records into the replay buffer, in order; returns the bytes up to the last whole one. */
static size_t replay_records(struct scmd *c, const uint8_t *buf, size_t len)
{
    size_t at = RECORD_HEADER;
    while (len - at >= RECORD_ENTRY) {
        unsigned stream = buf[at];
        uint32_t n = get_u32(buf + at + 1);
        if (stream > 2 || n > len - at - RECORD_ENTRY)
            break;
        scmd_keep_for_replay(c, stream, buf + at + RECORD_ENTRY, n);
        at += RECORD_ENTRY + n;
    }
    return at;
}

int scmd_record_load(struct scmd *c)
{
    char path[PATH_MAX];
    c->record_fd = -1;
    if (json_path(c->sb, c->cmd_id, path, sizeof path) < 0)
        return -1;
    int fd = openat(c->sb->d->run_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    json_error_t jerr;
    json_t *o = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    close(fd);
    if (!json_is_object(o)) {
        json_decref(o);
        return -1;
    }
    char **argv = list_from(json_object_get(o, "argv"));
    char **envp = list_from(json_object_get(o, "envp"));
    const char *cwd = json_string_value(json_object_get(o, "cwd"));
    json_int_t start = json_integer_value(json_object_get(o, "startWallMs"));
    json_int_t lifetime = json_integer_value(json_object_get(o, "lifetimeMs"));
    if (!argv || !argv[0] || !envp) {
        scmd_free_list(argv);
        scmd_free_list(envp);
        json_decref(o);
        return -1;
    }
    scmd_free_list(c->argv);
    scmd_free_list(c->envp);
    c->argv = argv;
    c->envp = envp;
    free(c->cwd);
    c->cwd = cwd && strlen(cwd) <= RECORD_MAX_ARG ? strdup(cwd) : NULL;
    json_decref(o);
    /* its start and lifetime as they were: the lifetime goes on counting from its start */
    int64_t now = sbx_wall_ms();
    if (start > 0 && start <= now) {
        c->start_wall_ms = start;
        uint64_t ran_ns = (uint64_t)(now - start) * 1000000u, mono = jail_now_ns();
        c->start_ns = ran_ns < mono ? mono - ran_ns : 0;
    }
    c->lifetime_ms = lifetime > 0 ? (uint64_t)lifetime : 0;
    /* its output: the older file, then the newer one; appending goes on in the newer */
    size_t len[2];
    uint8_t *buf[2] = {read_out(c, 0, &len[0]), read_out(c, 1, &len[1])};
    uint32_t seq[2] = {buf[0] ? get_u32(buf[0]) : 0, buf[1] ? get_u32(buf[1]) : 0};
    unsigned newer = seq[1] > seq[0] ? 1 : 0;
    size_t whole = 0;
    if (buf[newer ^ 1u])
        replay_records(c, buf[newer ^ 1u], len[newer ^ 1u]);
    if (buf[newer])
        whole = replay_records(c, buf[newer], len[newer]);
    free(buf[0]);
    free(buf[1]);
    if (!seq[newer] || out_path(c->sb, c->cmd_id, newer, path, sizeof path) < 0)
        return 0;
    fd = openat(c->sb->d->run_fd, path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)whole) == 0) { /* a cut record goes */
        c->record_fd = fd;
        c->record_file = newer;
        c->record_seq = seq[newer];
        c->record_size = whole;
    } else if (fd >= 0) {
        close(fd);
    }
    return 0;
}

void scmd_record_remove_all(struct serve *d, const char *sandbox_id)
{
    char dir[PATH_MAX];
    if (strfmt(dir, sizeof dir, "%s" RECORD_SUFFIX, sandbox_id) < 0)
        return;
    int fd = openat(d->run_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *dh = fdopendir(fd);
    if (!dh) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dh)))
        if (e->d_name[0] != '.')
            unlinkat(fd, e->d_name, 0);
    closedir(dh);
    unlinkat(d->run_fd, dir, AT_REMOVEDIR);
}
