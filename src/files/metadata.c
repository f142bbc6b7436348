/* What an entry says beyond its stat: a symlink's destination (resolved inside the root, as
 * envd's EvalSymlinks does it in its VM), and user metadata kept as user.e2b.* extended
 * attributes (envd's X-Metadata-*). Attributes are read through /proc/self/fd of a verified
 * procfs (the l- calls on "N/name" or the following ones on "N": the inode the fds lead to, never
 * a name looked up again from the root), written on the fd of the file being written. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "files/files_internal.h"
#include "util/cleanup.h"

#define PREFIX_LEN (sizeof FILES_METADATA_PREFIX - 1)

static bool is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool key_ok(const char *k, size_t n)
{
    if (n == 0 || n > 255 - PREFIX_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_token_char((unsigned char)k[i]))
            return false;
    return true;
}

static bool value_ok(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return false;
    return true;
}

int files_metadata_check(const char *text, err_t *err)
{
    size_t total = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n'), *eq = strchr(line, '=');
        if (!nl || !eq || eq > nl)
            return err_set(err, EINVAL, "metadata: a line that is not KEY=VALUE");
        if (!key_ok(line, (size_t)(eq - line)) || !value_ok(eq + 1, (size_t)(nl - eq - 1)))
            return err_set(err, EINVAL, "metadata: a key or value out of its characters");
        total += PREFIX_LEN + (size_t)(nl - line) - 1;
        /* keys unique: the same key again on a later line */
        size_t klen = (size_t)(eq - line) + 1;
        for (const char *l = nl + 1; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
            if (strncmp(l, line, klen) == 0)
                return err_set(err, EINVAL, "metadata: a key twice");
        line = nl + 1;
    }
    if (total > FILES_METADATA_MAX)
        return err_set(err, EINVAL, "metadata: more than %d bytes", FILES_METADATA_MAX);
    return 0;
}

int files_metadata_write(int fd, const char *text, err_t *err)
{
    if (files_metadata_check(text, err) < 0)
        return -1;
    char names[16384];
    ssize_t n = flistxattr(fd, names, sizeof names);
    if (n < 0 && (errno == EOPNOTSUPP || errno == ENOTSUP))
        return 0; /* no user attributes here (a pseudo filesystem): nothing kept, as envd */
    if (n < 0)
        return err_set(err, errno, "metadata: list the attributes");
    for (ssize_t at = 0; at < n; at += (ssize_t)strlen(names + at) + 1) {
        const char *name = names + at;
        if (strncmp(name, FILES_METADATA_PREFIX, PREFIX_LEN) != 0)
            continue;
        if (fremovexattr(fd, name) < 0 && errno != ENODATA)
            return err_set(err, errno, "metadata: remove %.300s", name);
    }
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n'), *eq = strchr(line, '=');
        char name[256];
        snprintf(name, sizeof name, "%s%.*s", FILES_METADATA_PREFIX, (int)(eq - line), line);
        if (fsetxattr(fd, name, eq + 1, (size_t)(nl - eq - 1), 0) < 0)
            return err_set(err, errno == ENOSPC || errno == E2BIG ? ENOSPC : errno,
                           "metadata: set %.300s", name);
        line = nl + 1;
    }
    return 0;
}

/* The user.e2b.* attributes of proc_path (beneath /proc/self/fd; follow: the following calls)
 * as lines into out; what fails to read, or is out of the characters the SDK takes (a sandbox
 * process may set anything with setfattr), is left out, as envd leaves out what is not UTF-8. */
static void files_metadata_read_at(const char *proc_path, bool follow,
                                   char out[FILES_METADATA_MAX + 1])
{
    out[0] = '\0';
    char names[16384];
    ssize_t n = follow ? listxattr(proc_path, names, sizeof names)
                       : llistxattr(proc_path, names, sizeof names);
    size_t len = 0;
    for (ssize_t at = 0; n > 0 && at < n; at += (ssize_t)strlen(names + at) + 1) {
        const char *name = names + at;
        if (strncmp(name, FILES_METADATA_PREFIX, PREFIX_LEN) != 0 ||
            !key_ok(name + PREFIX_LEN, strlen(name + PREFIX_LEN)))
            continue;
        char value[FILES_METADATA_MAX];
        ssize_t v = follow ? getxattr(proc_path, name, value, sizeof value)
                           : lgetxattr(proc_path, name, value, sizeof value);
        if (v < 0 || !value_ok(value, (size_t)v))
            continue;
        size_t need = strlen(name) - PREFIX_LEN + 1 + (size_t)v + 1;
        if (len + need > FILES_METADATA_MAX)
            break;
        len += (size_t)snprintf(out + len, FILES_METADATA_MAX + 1 - len, "%s=%.*s\n",
                                name + PREFIX_LEN, (int)v, value);
    }
}

/* Where fd (an O_PATH fd of the entry's target, after every link) is, as a path in the sandbox:
 * its /proc/self/fd link, less the root's own (the root is "/" inside a sandbox; a directory in
 * the unit tests). */
static int path_in_root(int proc_dir, int root_fd, int fd, char out[PATH_MAX])
{
    char name[16], root[PATH_MAX], at[PATH_MAX];
    snprintf(name, sizeof name, "%d", root_fd);
    ssize_t rn = readlinkat(proc_dir, name, root, sizeof root - 1);
    snprintf(name, sizeof name, "%d", fd);
    ssize_t n = readlinkat(proc_dir, name, at, sizeof at - 1);
    if (rn <= 0 || n <= 0 || root[0] != '/' || at[0] != '/')
        return -1;
    root[rn] = at[n] = '\0';
    const char *rel = at;
    if (strcmp(root, "/") != 0) {
        size_t rl = (size_t)rn;
        if (strncmp(at, root, rl) != 0 || (at[rl] != '/' && at[rl] != '\0'))
            return -1; /* not beneath the root as this process sees it: not shown */
        rel = at[rl] ? at + rl : "/";
    }
    snprintf(out, PATH_MAX, "%s", rel);
    return 0;
}

void files_entry_extras(int root_fd, int fd, const char *leaf, struct files_entry *e)
{
    e->target[0] = '\0';
    e->metadata[0] = '\0';
    if (e->type == FILES_TYPE_OTHER)
        return;
    err_t err;
    cleanup_fd int proc_dir = files_proc_fd_dir("stat", &err);
    if (proc_dir < 0)
        return;
    if (e->type == FILES_TYPE_FILE || e->type == FILES_TYPE_DIR) {
        /* leaf is one name read from the directory fd (no '/', never . or ..): the l- calls do
         * not follow it; without a leaf, fd is the entry's own (a magic link to its inode) */
        char path[64 + NAME_MAX + 2];
        if (leaf)
            snprintf(path, sizeof path, "/proc/self/fd/%d/%s", fd, leaf);
        else
            snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        files_metadata_read_at(path, !leaf, e->metadata);
        return;
    }
    cleanup_fd int target = files_openat2(root_fd, e->path, O_PATH, FILES_RESOLVE_ROOT);
    struct stat st;
    if (target < 0 || fstat(target, &st) < 0 ||
        path_in_root(proc_dir, root_fd, target, e->target) < 0) {
        e->target[0] = '\0';
        return;
    }
    e->target_type = S_ISREG(st.st_mode)   ? FILES_TYPE_FILE
                     : S_ISDIR(st.st_mode) ? FILES_TYPE_DIR
                                           : FILES_TYPE_OTHER;
    e->target_mode = st.st_mode & 07777;
}

void files_entry_metadata(int fd, struct files_entry *entry)
{
    entry->metadata[0] = '\0';
    err_t err;
    cleanup_fd int proc_dir = files_proc_fd_dir("metadata", &err);
    if (proc_dir < 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    files_metadata_read_at(path, true, entry->metadata);
}
