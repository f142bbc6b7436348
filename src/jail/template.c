#include "jail/template.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/jail.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/strfmt.h"

/* Host /etc entries copied into the template. Not /etc/python3*: Debian's sitecustomize there
 * only tries to import apport's hook, a failed search of all of sys.path at every Python start.
 * Only world-readable entries are copied, so secrets
 * (shadow, ssl/private, ssh host keys) never are, even when listed by mistake. */
static const char *const host_etc[] = {
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone",
    "bash.bashrc", "profile", "profile.d", "inputrc", "environment", "shells", "mime.types",
    "matplotlibrc", "fonts", "ssl", "ca-certificates", "debian_version",
    "os-release", "protocols", "services", "gai.conf", "host.conf", "locale.alias", "magic",
    "magic.mime", "nanorc", "vim", "X11", "xdg", "perl", "login.defs", "adduser.conf", "skel",
    /* R's and the JDK's configuration, which their /usr trees link to (/usr/lib/R/etc/ldpaths,
     * /usr/lib/jvm/java-17-openjdk-amd64/conf/security/java.security): the code interpreter's
     * R and Java contexts (src/interp) cannot start without them */
    "R", "java-17-openjdk",
};

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "user:x:1000:1000:user:/home/user:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\ntty:x:5:\nusers:x:100:user\nuser:x:1000:\n"
                            "nogroup:x:65534:\n";
static const char hosts[] = "127.0.0.1\tlocalhost hutch\n::1\tlocalhost ip6-localhost\n";
static const char nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                               "networks: files\nprotocols: files\nservices: files\n";

static int copy_tree(int src_dir, int dst_dir, const char *name, err_t *err);

static int copy_file(int src_dir, int dst_dir, const char *name, const struct stat *st, err_t *err)
{
    cleanup_fd int in = openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == EACCES ? 0 : err_set(err, errno, "open host /etc/%s", name);
    cleanup_fd int out =
        openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 0755);
    if (out < 0)
        return err_set(err, errno, "create %s", name);
    for (;;) {
        ssize_t n = sendfile(out, in, NULL, 1 << 20);
        if (n < 0)
            return err_set(err, errno, "copy %s", name);
        if (n == 0)
            return 0;
    }
}

static int copy_dir(int src_dir, int dst_dir, const char *name, err_t *err)
{
    if (mkdirat(dst_dir, name, 0755) < 0)
        return err_set(err, errno, "mkdir %s", name);
    int sfd = openat(src_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return err_set(err, errno, "open host /etc/%s", name);
    cleanup_dir DIR *d = fdopendir(sfd);
    if (!d) {
        close(sfd);
        return err_set(err, errno, "opendir %s", name);
    }
    cleanup_fd int dfd = openat(dst_dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return err_set(err, errno, "open %s", name);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (copy_tree(dirfd(d), dfd, de->d_name, err) < 0)
            return err_wrap(err, "%s", name);
    }
    return 0;
}

static int copy_tree(int src_dir, int dst_dir, const char *name, err_t *err)
{
    struct stat st;
    if (fstatat(src_dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : err_set(err, errno, "stat host /etc/%s", name);
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(src_dir, name, target, sizeof target - 1);
        if (n < 0)
            return err_set(err, errno, "readlink %s", name);
        target[n] = '\0';
        return symlinkat(target, dst_dir, name) < 0 ? err_set(err, errno, "symlink %s", name) : 0;
    }
    if (!(st.st_mode & S_IROTH))
        return 0; /* not world-readable: possibly a secret; never copied */
    if (S_ISDIR(st.st_mode))
        return (st.st_mode & S_IXOTH) ? copy_dir(src_dir, dst_dir, name, err) : 0;
    if (S_ISREG(st.st_mode))
        return copy_file(src_dir, dst_dir, name, &st, err);
    return 0;
}

/* Splits line at ':' into at most max fields; returns how many. */
static int split_fields(char *line, char **field, int max)
{
    int n = 0;
    for (char *p = line; p && n < max; n++) {
        field[n] = p;
        p = strchr(p, ':');
        if (p)
            *p++ = '\0';
    }
    return n;
}

/* Whether the account lines of own have an entry with this name or this id (the third field). */
static bool account_taken(const char *own, const char *name, const char *id)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", own);
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[3];
        if (split_fields(line, f, 3) == 3 && (strcmp(f[0], name) == 0 || strcmp(f[2], id) == 0))
            return true;
    }
    return false;
}

/* Appends the host's system accounts from host_file (ids below 1000 whose name and id hutch's
 * own lines, own, do not use) to out, as name:x:id:... without comments or member lists: the
 * host's /usr and package database name them (dpkg refuses to run when its statoverride names a
 * group that does not exist), and their files then show their names inside. passwd (7 fields) or
 * group (4). Both files are world-readable on the host. */
static void append_system_accounts(const char *host_file, const char *own, int fields, char *out,
                                   size_t size)
{
    static char buf[256 * 1024];
    if (file_read_at(AT_FDCWD, host_file, buf, sizeof buf, NULL) < 0)
        return;
    size_t len = strlen(out);
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[7];
        if (split_fields(line, f, 7) != fields)
            continue;
        const char *id = f[2];
        size_t id_len = strlen(id);
        if (!f[0][0] || strpbrk(f[0], " \t,") || id_len == 0 || id_len > 3 ||
            strspn(id, "0123456789") != id_len || account_taken(own, f[0], id))
            continue;
        int w = fields == 7 ? snprintf(out + len, size - len, "%s:x:%s:%s::%s:%s\n", f[0], id,
                                       f[3], f[5], f[6])
                            : snprintf(out + len, size - len, "%s:x:%s:\n", f[0], id);
        if (w < 0 || (size_t)w >= size - len)
            break; /* the rest does not fit; what is there is whole lines */
        len += (size_t)w;
    }
}

static int build_etc(int root, err_t *err)
{
    if (mkdirat(root, "etc", 0755) < 0)
        return err_set(err, errno, "mkdir etc");
    cleanup_fd int etc = openat(root, "etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    cleanup_fd int host = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (etc < 0 || host < 0)
        return err_set(err, errno, "open etc");
    for (size_t i = 0; i < sizeof host_etc / sizeof host_etc[0]; i++)
        if (copy_tree(host, etc, host_etc[i], err) < 0)
            return -1;
    static char all_passwd[64 * 1024], all_group[64 * 1024];
    snprintf(all_passwd, sizeof all_passwd, "%s", passwd);
    snprintf(all_group, sizeof all_group, "%s", group);
    append_system_accounts("/etc/passwd", passwd, 7, all_passwd, sizeof all_passwd);
    append_system_accounts("/etc/group", group, 4, all_group, sizeof all_group);
    struct {
        const char *name, *data;
    } generated[] = {
        {"passwd", all_passwd}, {"group", all_group},      {"hosts", hosts},
        {"hostname", "hutch\n"}, {"nsswitch.conf", nsswitch}, {"resolv.conf", ""},
    };
    for (size_t i = 0; i < sizeof generated / sizeof generated[0]; i++)
        if (file_create_at(etc, generated[i].name, generated[i].data, strlen(generated[i].data),
                           0644, err) < 0)
            return -1;
    return 0;
}

/* /dev's skeleton lives in the template, so a sandbox only binds devices onto it: no tmpfs, no
 * files or links made per run. Device nodes cannot be made in a user namespace; these empty
 * files are the mount points for the host's harmless character devices (rootfs.c). */
static int build_dev(int root, err_t *err)
{
    static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
    static const char *const links[][2] = {
        {"pts/ptmx", "dev/ptmx"},         {"/proc/self/fd", "dev/fd"},
        {"/proc/self/fd/0", "dev/stdin"}, {"/proc/self/fd/1", "dev/stdout"},
        {"/proc/self/fd/2", "dev/stderr"},
    };
    if (mkdirat(root, "dev/pts", 0755) < 0 || mkdirat(root, "dev/shm", 0755) < 0)
        return err_set(err, errno, "mkdir dev/pts, dev/shm");
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        char path[32];
        snprintf(path, sizeof path, "dev/%s", devices[i]);
        if (file_create_at(root, path, "", 0, 0666, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (symlinkat(links[i][0], root, links[i][1]) < 0)
            return err_set(err, errno, "symlink %s", links[i][1]);
    return 0;
}

/* The skeleton mirrors the host's merged-/usr links, so /bin/sh and /lib64/ld-linux resolve. */
static int build_skeleton(int root, err_t *err)
{
    static const char *const dirs[] = {"usr", "proc", "dev", "sys", "tmp", "var", "var/tmp",
                                       "run", "root", "home", "output", "mnt", "opt", "srv"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (mkdirat(root, dirs[i], 0755) < 0)
            return err_set(err, errno, "mkdir %s", dirs[i]);
    static const char *const links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char host[64], target[PATH_MAX];
        snprintf(host, sizeof host, "/%s", links[i]);
        ssize_t n = readlink(host, target, sizeof target - 1);
        if (n < 0) {
            if (errno == ENOENT)
                continue;
            return err_set(err, errno, "host /%s is not a symlink: hutch needs merged /usr",
                           links[i]);
        }
        target[n] = '\0';
        if (symlinkat(target, root, links[i]) < 0)
            return err_set(err, errno, "symlink %s", links[i]);
    }
    return build_dev(root, err);
}

static int remove_tree_at(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return unlinkat(parent, name, 0);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            remove_tree_at(dirfd(d), de->d_name);
    closedir(d);
    return unlinkat(parent, name, AT_REMOVEDIR);
}

/* A build killed part-way (kill -9, a crash, a power cut) leaves its temporary tree behind, and
 * nothing else would ever remove it; a later build could even be handed the same pid, so the
 * same name. Every build of every version runs under the lock, so with the lock held any
 * temporary tree is stale. Called with the lock held, before this build makes its own. */
static int remove_stale_builds(const char *templates, err_t *err)
{
    int fd = open(templates, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "open %s", templates);
    cleanup_dir DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return err_set(err, errno, "read %s", templates);
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, ".base-v", 7) == 0 && remove_tree_at(dirfd(d), de->d_name) < 0)
            return err_set(err, errno, "remove the stale build %s/%s", templates, de->d_name);
    return 0;
}

static int fill_paths(const char *dir, struct template_paths *out, err_t *err)
{
    if (strlen(dir) > PATH_MAX - 128)
        return err_set(err, ENAMETOOLONG, "state directory %s", dir);
    if (strpbrk(dir, ",:\\"))
        return err_set(err, EINVAL, "state directory %s: ',', ':' and '\\' cannot be used in "
                                    "overlayfs options", dir);
    if ((size_t)snprintf(out->rootfs, sizeof out->rootfs, "%s/rootfs", dir) >= sizeof out->rootfs ||
        (size_t)snprintf(out->stage, sizeof out->stage, "%s/stage", dir) >= sizeof out->stage)
        return err_set(err, ENAMETOOLONG, "template path %s", dir);
    return 0;
}

int template_prepare_base(const char *state_dir, struct template_paths *out, err_t *err)
{
    char dir[PATH_MAX], tmp[PATH_MAX], lock[PATH_MAX];
    if (strfmt(dir, sizeof dir, "%s/templates/base-v%d", state_dir, TEMPLATE_BASE_VERSION) < 0)
        return err_set(err, errno, "state directory %s", state_dir);
    /* fill_paths bounds dir to PATH_MAX - 128, and so state_dir: the paths below fit. */
    if (fill_paths(dir, out, err) < 0)
        return -1;
    struct stat st;
    if (stat(out->stage, &st) == 0)
        return 0; /* the common case: prepared by an earlier run */

    snprintf(tmp, sizeof tmp, "%s/templates", state_dir);
    if (mkdir_p_at(AT_FDCWD, tmp, 0755, err) < 0)
        return err_wrap(err, "state directory");
    snprintf(lock, sizeof lock, "%s/templates/.lock", state_dir);
    cleanup_fd int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0)
        return err_set(err, errno, "lock %s", lock);
    if (stat(out->stage, &st) == 0)
        return 0; /* another process built it while we waited */

    snprintf(tmp, sizeof tmp, "%s/templates", state_dir);
    if (remove_stale_builds(tmp, err) < 0)
        return err_wrap(err, "prepare template base");
    snprintf(tmp, sizeof tmp, "%s/templates/.base-v%d.%d", state_dir, TEMPLATE_BASE_VERSION,
             (int)getpid());
    if (mkdir(tmp, 0755) < 0)
        return err_set(err, errno, "mkdir %s", tmp);
    char rootfs[PATH_MAX + 16];
    snprintf(rootfs, sizeof rootfs, "%s/rootfs", tmp);
    int rc = -1;
    if (mkdir(rootfs, 0755) < 0) {
        err_set(err, errno, "mkdir %s", rootfs);
    } else {
        cleanup_fd int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char stage[PATH_MAX + 16];
        snprintf(stage, sizeof stage, "%s/stage", tmp);
        if (root < 0)
            err_set(err, errno, "open %s", rootfs);
        else if (build_skeleton(root, err) == 0 && build_etc(root, err) == 0) {
            if (mkdir(stage, 0700) < 0)
                err_set(err, errno, "mkdir %s", stage);
            else if (rename(tmp, dir) < 0)
                err_set(err, errno, "rename %s to %s", tmp, dir);
            else
                rc = 0;
        }
    }
    if (rc < 0) {
        remove_tree_at(AT_FDCWD, tmp);
        return err_wrap(err, "prepare template base");
    }
    return 0;
}
