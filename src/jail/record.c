/* Sandbox records on the host (record.h). */
#include "jail/record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fileio.h"

#define RECORD_MAGIC "hutch-sandbox 1"
#define RECORD_MAX   1024

/* The start time of pid (clock ticks after boot), from /proc/PID/stat: field 22, counted after
 * the command name, which is in parentheses and may itself hold spaces and parentheses. */
static int start_time_of(pid_t pid, unsigned long long *out)
{
    char path[64], stat[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (file_read_at(AT_FDCWD, path, stat, sizeof stat, NULL) < 0)
        return -1;
    const char *p = strrchr(stat, ')');
    if (!p)
        return -1;
    /* ") S ppid ..." : state is field 3, start time field 22. */
    for (int field = 2; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return -1;
    }
    char *end;
    errno = 0;
    *out = strtoull(p + 1, &end, 10);
    return errno || end == p + 1 ? -1 : 0;
}

static int record_path(const char *name, char *out, size_t size, err_t *err)
{
    if (!name || !name[0] || strlen(name) > CGROUP_NAME_MAX || strchr(name, '/') ||
        name[0] == '.')
        return err_set(err, EINVAL, "sandbox record: bad name");
    snprintf(out, size, "%s" JAIL_RECORD_SUFFIX, name);
    return 0;
}

int jail_record_save(const struct jail *jail, uid_t host_uid_base, int dirfd,
                     const char *socket_name, err_t *err)
{
    char file[CGROUP_NAME_MAX + 16], tmp[CGROUP_NAME_MAX + 32];
    unsigned long long start;
    if (record_path(jail->name, file, sizeof file, err) < 0)
        return -1;
    if (!jail->cgroup || jail->pid <= 0 || start_time_of(jail->pid, &start) < 0)
        return err_set(err, ESRCH, "sandbox %s: no running init to record", jail->name);
    if (socket_name && (strchr(socket_name, '/') || strchr(socket_name, '\n') ||
                        strlen(socket_name) >= sizeof((struct jail_record *)0)->socket))
        return err_set(err, EINVAL, "sandbox %s: bad socket name", jail->name);
    char text[RECORD_MAX];
    int n = snprintf(text, sizeof text,
                     RECORD_MAGIC "\nname %s\npid %d\nstart %llu\nuid_base %u\ncgroup %s\n"
                                  "socket %s\n",
                     jail->name, (int)jail->pid, start, (unsigned)host_uid_base,
                     cgroup_path(jail->cgroup), socket_name ? socket_name : "-");
    if (n < 0 || (size_t)n >= sizeof text)
        return err_set(err, ENAMETOOLONG, "sandbox %s: record too long", jail->name);
    snprintf(tmp, sizeof tmp, ".%s.tmp", file);
    if (file_create_at(dirfd, tmp, text, (size_t)n, 0600, err) < 0)
        return err_wrap(err, "sandbox %s: record", jail->name);
    if (renameat(dirfd, tmp, dirfd, file) < 0) {
        int saved = errno;
        unlinkat(dirfd, tmp, 0);
        return err_set(err, saved, "sandbox %s: rename its record into place", jail->name);
    }
    return 0;
}

int jail_record_remove(int dirfd, const char *name, err_t *err)
{
    char file[CGROUP_NAME_MAX + 16];
    if (record_path(name, file, sizeof file, err) < 0)
        return -1;
    if (unlinkat(dirfd, file, 0) < 0 && errno != ENOENT)
        return err_set(err, errno, "sandbox %s: remove its record", name);
    return 0;
}

/* "key value\n" at *p, value copied into out; advances *p. */
static int record_field(const char **p, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);
    if (strncmp(*p, key, klen) != 0 || (*p)[klen] != ' ')
        return -1;
    const char *value = *p + klen + 1;
    const char *end = strchr(value, '\n');
    if (!end || end == value || (size_t)(end - value) >= size)
        return -1;
    memcpy(out, value, (size_t)(end - value));
    out[end - value] = '\0';
    *p = end + 1;
    return 0;
}

static int record_number(const char **p, const char *key, unsigned long long max,
                         unsigned long long *out)
{
    char buf[32], *end;
    if (record_field(p, key, buf, sizeof buf) < 0 || buf[0] < '0' || buf[0] > '9')
        return -1;
    errno = 0;
    *out = strtoull(buf, &end, 10);
    return errno || *end || *out > max ? -1 : 0;
}

int jail_record_load(int dirfd, const char *name, struct jail_record *out, err_t *err)
{
    char file[CGROUP_NAME_MAX + 16], text[RECORD_MAX];
    memset(out, 0, sizeof *out);
    if (record_path(name, file, sizeof file, err) < 0)
        return -1;
    if (file_read_at(dirfd, file, text, sizeof text, err) < 0)
        return err_wrap(err, "sandbox %s: record", name);
    const char *p = text;
    unsigned long long pid, uid;
    if (strncmp(p, RECORD_MAGIC "\n", sizeof RECORD_MAGIC) != 0)
        return err_set(err, EINVAL, "sandbox %s: record: not a version 1 record", name);
    p += sizeof RECORD_MAGIC;
    if (record_field(&p, "name", out->name, sizeof out->name) < 0 ||
        record_number(&p, "pid", INT32_MAX, &pid) < 0 ||
        record_number(&p, "start", ~0ULL, &out->start_time) < 0 ||
        record_number(&p, "uid_base", UINT32_MAX, &uid) < 0 ||
        record_field(&p, "cgroup", out->cgroup, sizeof out->cgroup) < 0 ||
        record_field(&p, "socket", out->socket, sizeof out->socket) < 0 || *p != '\0')
        return err_set(err, EINVAL, "sandbox %s: record: malformed", name);
    if (strcmp(out->name, name) != 0 || pid == 0)
        return err_set(err, EINVAL, "sandbox %s: record names another sandbox", name);
    if (strcmp(out->socket, "-") == 0)
        out->socket[0] = '\0';
    else if (strchr(out->socket, '/'))
        return err_set(err, EINVAL, "sandbox %s: record: bad socket name", name);
    out->pid = (pid_t)pid;
    out->host_uid_base = (uid_t)uid;
    return 0;
}

/* A connection to the listening socket dirfd/name, non-blocking. */
static int connect_socket(int dirfd, const char *name, err_t *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    /* Through /proc/self/fd: the directory may sit deeper than sun_path allows. */
    int n = snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/%s", dirfd, name);
    if (n < 0 || (size_t)n >= sizeof addr.sun_path)
        return err_set(err, ENAMETOOLONG, "socket name %s", name);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_set(err, errno, "socket");
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
        int saved = errno;
        close(fd);
        return err_set(err, saved, "connect to %s", name);
    }
    return fd;
}

int jail_reopen(struct cgroup_host *cgroups, int dirfd, const char *name, struct jail *out,
                struct jail_record *record, err_t *err)
{
    memset(out, 0, sizeof *out);
    out->pidfd = out->control_fd = out->output_dirfd = out->keeper_fd = -1;
    if (jail_record_load(dirfd, name, record, err) < 0)
        return -1;
    snprintf(out->name, sizeof out->name, "%s", name);
    /* The pidfd first, then the check: once it is open the pid cannot name another process, so
     * a matching start time proves it is the recorded init. */
    int pidfd = (int)syscall(SYS_pidfd_open, record->pid, 0);
    unsigned long long start;
    if (pidfd < 0 || start_time_of(record->pid, &start) < 0 || start != record->start_time) {
        if (pidfd >= 0)
            close(pidfd);
        return err_set(err, ESRCH, "sandbox %s: its init (pid %d) is gone", name,
                       (int)record->pid);
    }
    out->pidfd = pidfd;
    out->pid = record->pid;
    out->host_uid_base = record->host_uid_base;
    out->ready = true;
    if (cgroup_open(cgroups, record->cgroup, CGROUP_NESTED, &out->cgroup, err) < 0)
        goto fail;
    if (record->socket[0]) {
        out->control_fd = connect_socket(dirfd, record->socket, err);
        if (out->control_fd < 0)
            goto fail;
    }
    return 0;
fail:
    err_wrap(err, "sandbox %s", name);
    jail_close(out);
    return -1;
}
