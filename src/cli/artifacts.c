#include "cli/artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/utf8.h"

struct copy_state {
    uint64_t limit;
    uint64_t used; /* charged against limit so far; never above it */
    unsigned entries;
    bool full; /* a cap was reached: read nothing more */
    struct artifacts_result *res;
    err_t *err;
};

static int copy_dir(int src, int dst, const char *rel, unsigned depth, struct copy_state *st);

/* Called for each entry as readdir returns it, before anything else is done with it: the
 * sandbox chooses how many entries there are, so the caps must hold for those it only makes us
 * read, not only for those we copy. */
static bool charge_entry(struct copy_state *st)
{
    if (st->entries >= ARTIFACTS_MAX_ENTRIES || st->limit - st->used < ARTIFACTS_ENTRY_COST) {
        st->res->truncated = true;
        st->full = true;
        return false;
    }
    st->entries++;
    st->used += ARTIFACTS_ENTRY_COST;
    return true;
}

static int report_file(const char *rel, uint64_t size, struct copy_state *st)
{
    /* A name is any bytes but "/" and NUL, JSON wants UTF-8: a name that is not gets U+FFFD for
     * its bad bytes in the report, rather than silently no entry at all. */
    size_t len;
    char *path = utf8_sanitize(rel, strlen(rel), &len);
    json_t *entry =
        path ? json_pack("{s:s%, s:I}", "path", path, len, "size", (json_int_t)size) : NULL;
    free(path);
    if (!entry || json_array_append_new(st->res->files, entry) < 0)
        return err_set(st->err, ENOMEM, "report artifact %s", rel);
    return 0;
}

static int copy_regular(int src_fd, int dst, const char *name, const char *rel, uint64_t size,
                        struct copy_state *st)
{
    /* O_EXCL: a name the caller already has (a build.sh, a git hook, a symlink to anywhere) is
     * never truncated, rewritten, followed or given a new mode. */
    cleanup_fd int out =
        openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0 && errno == EEXIST) {
        st->res->existing++;
        return 0;
    }
    if (out < 0)
        return err_set(st->err, errno, "artifact %s", rel);
    uint64_t want = size;
    if (want > st->limit - st->used) {
        want = st->limit - st->used;
        st->res->truncated = true;
        st->full = true;
    }
    char buf[65536];
    uint64_t copied = 0;
    while (copied < want) {
        size_t chunk = want - copied < sizeof buf ? (size_t)(want - copied) : sizeof buf;
        ssize_t n = read(src_fd, buf, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the file shrank: copy what there is */
        if (fd_write_all(out, buf, (size_t)n) < 0)
            return err_set(st->err, errno, "write artifact %s", rel);
        copied += (uint64_t)n;
    }
    st->used += copied;
    st->res->bytes += copied;
    return report_file(rel, copied, st);
}

/* Takes ownership of src, the sandbox's directory. */
static int copy_subdir(int src, int dst, const char *name, const char *rel, unsigned depth,
                       struct copy_state *st)
{
    cleanup_fd int owned = src;
    if (mkdirat(dst, name, 0755) < 0 && errno != EEXIST)
        return err_set(st->err, errno, "artifact directory %s", rel);
    /* Merged into only if the name is a real directory: a symlink there is never followed. */
    cleanup_fd int sub = openat(dst, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 && (errno == ENOTDIR || errno == ELOOP)) {
        st->res->existing++;
        return 0;
    }
    if (sub < 0)
        return err_set(st->err, errno, "artifact directory %s", rel);
    return copy_dir(steal_fd(&owned), sub, rel, depth + 1, st);
}

static int copy_entry(int src, int dst, const char *name, const char *rel, unsigned depth,
                      struct copy_state *st)
{
    /* O_NONBLOCK: a FIFO must not hang us; O_NOFOLLOW: a symlink is not followed anywhere. */
    cleanup_fd int fd = openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0) {
        st->res->skipped++;
        return 0;
    }
    if (S_ISDIR(sb.st_mode)) {
        if (depth + 1 > ARTIFACTS_MAX_DEPTH) {
            st->res->truncated = true;
            return 0;
        }
        return copy_subdir(steal_fd(&fd), dst, name, rel, depth, st);
    }
    if (!S_ISREG(sb.st_mode)) {
        st->res->skipped++;
        return 0;
    }
    return copy_regular(fd, dst, name, rel, (uint64_t)sb.st_size, st);
}

/* Takes ownership of src. */
static int copy_dir(int src, int dst, const char *rel, unsigned depth, struct copy_state *st)
{
    DIR *d = fdopendir(src);
    if (!d) {
        close(src);
        return err_set(st->err, errno, "read artifact directory");
    }
    cleanup_dir DIR *dir = d;
    struct dirent *de;
    /* Stops at the first cap reached, so a directory of a million entries costs no more time
     * than the caps allow. */
    while (!st->full && (de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (!charge_entry(st))
            break;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >=
            sizeof path) {
            st->res->truncated = true;
            continue;
        }
        if (copy_entry(dirfd(dir), dst, de->d_name, path, depth, st) < 0)
            return -1;
    }
    return 0;
}

int artifacts_copy(int src_dirfd, const char *dest_dir, uint64_t limit,
                   struct artifacts_result *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    if (!(out->files = json_array()))
        return err_set(err, ENOMEM, "report artifacts");
    if (mkdir_p_at(AT_FDCWD, dest_dir, 0755, err) < 0)
        return err_wrap(err, "--artifacts %s", dest_dir);
    cleanup_fd int dst = open(dest_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dst < 0)
        return err_set(err, errno, "--artifacts %s", dest_dir);
    int src = fcntl(src_dirfd, F_DUPFD_CLOEXEC, 3);
    if (src < 0)
        return err_set(err, errno, "dup artifact directory");
    /* readdir needs a fresh offset: the directory fd may have been read before. */
    lseek(src, 0, SEEK_SET);
    struct copy_state st = {.limit = limit, .res = out, .err = err};
    return copy_dir(src, dst, "", 0, &st);
}
