#include "jail/disk_layer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"

#define BLOCK_SIZE 4096u
#define TMP_IMAGE  DISK_LAYER_IMAGE ".tmp"

static int image_path(const char *dir, const char *name, char *out, size_t size, err_t *err)
{
    if (!dir || !dir[0])
        return err_set(err, EINVAL, "disk layer: no directory");
    if ((size_t)snprintf(out, size, "%s/%s", dir, name) >= size)
        return err_set(err, ENAMETOOLONG, "disk layer %s: path too long", dir);
    return 0;
}

/* An exclusive OFD lock on the whole image: held by whoever has the layer (see disk_layer.h). */
static int lock_image(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
        return 0;
    if (errno == EAGAIN || errno == EACCES)
        errno = EBUSY;
    return -1;
}

/* Opens DIR/disk.img and locks it. Returns the fd, or -1 with err. */
static int open_locked(const char *dir, err_t *err)
{
    char path[PATH_MAX];
    if (image_path(dir, DISK_LAYER_IMAGE, path, sizeof path, err) < 0)
        return -1;
    cleanup_fd int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno, "disk layer %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "disk layer %s: not a regular file", path);
    if (lock_image(fd) < 0)
        return err_set(err, errno, "disk layer %s: in use by another sandbox", path);
    return steal_fd(&fd);
}

bool disk_layer_exists(const char *dir)
{
    char path[PATH_MAX];
    err_t ignored;
    struct stat st;
    return image_path(dir, DISK_LAYER_IMAGE, path, sizeof path, &ignored) == 0 &&
           lstat(path, &st) == 0;
}

/* The extended options of each try: mke2fs before 1.47 lacks assume_storage_prezeroed (the file
 * is fresh and sparse, so all zero: nothing to zero now, and no lazy zeroing by the kernel at the
 * first mounts). */
static const char *const mke2fs_options[] = {
    "nodiscard,root_owner=0:0,assume_storage_prezeroed=1",
    "nodiscard,root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1",
};
#define MKE2FS_TRIES (sizeof mke2fs_options / sizeof mke2fs_options[0])
#define ERR_FILE     DISK_LAYER_IMAGE ".mke2fs"

/* Starts mke2fs on the job's temporary image with the options of its try; its stderr goes to a
 * file in the layer's directory (read at the end, so nothing has to drain a pipe meanwhile). */
static int spawn_mke2fs(struct disk_layer_job *job, err_t *err)
{
    static const char *const tools[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs"};
    const char *tool = NULL;
    for (size_t i = 0; i < sizeof tools / sizeof tools[0] && !tool; i++)
        if (access(tools[i], X_OK) == 0)
            tool = tools[i];
    if (!tool)
        return err_set(err, ENOENT, "mke2fs (Debian package e2fsprogs) is not installed");
    char tmp[PATH_MAX], errpath[PATH_MAX];
    if (image_path(job->dir, TMP_IMAGE, tmp, sizeof tmp, err) < 0 ||
        image_path(job->dir, ERR_FILE, errpath, sizeof errpath, err) < 0)
        return -1;
    /* -m 0: ext4 reserves its 5% for the filesystem's own uid 0, which the sandbox's root is
     * not as far as the host's kernel checks it (its fs uid is a host uid of its range), so a
     * reserve would only shrink the layer. -b 4096: also for small images, where mke2fs would
     * pick 1 KiB blocks. */
    char *const argv[] = {(char *)tool,
                          "-q",
                          "-F",
                          "-t",
                          "ext4",
                          "-b",
                          "4096",
                          "-m",
                          "0",
                          "-L",
                          "hutch-disk",
                          "-E",
                          (char *)mke2fs_options[job->try],
                          tmp,
                          NULL};
    char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int rc = posix_spawn(&pid, tool, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return err_set(err, rc, "run %s", tool);
    job->pid = pid;
    job->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (job->pidfd < 0) {
        int e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        job->pid = 0;
        return err_set(err, e, "pidfd of mke2fs");
    }
    return 0;
}

/* The first line mke2fs wrote to its stderr file. */
static void mke2fs_message(const struct disk_layer_job *job, char *msg, size_t size)
{
    char path[PATH_MAX];
    err_t ignored;
    msg[0] = '\0';
    if (image_path(job->dir, ERR_FILE, path, sizeof path, &ignored) < 0)
        return;
    cleanup_fd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, msg, size - 1, 0) : -1;
    msg[n > 0 ? n : 0] = '\0';
    msg[strcspn(msg, "\n")] = '\0';
}

/* The fields of an ext4 superblock that hutch reads (little-endian, at byte 1024). */
struct superblock {
    uint64_t blocks, reserved, free_blocks, free_inodes;
    uint32_t block_size;
    bool extents;
};

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int read_superblock(int fd, struct superblock *sb)
{
    unsigned char b[1024];
    if (pread(fd, b, sizeof b, 1024) != (ssize_t)sizeof b)
        return -1;
    if ((b[0x38] | b[0x39] << 8) != 0xEF53 || le32(b + 0x18) > 6) {
        errno = EINVAL;
        return -1;
    }
    uint32_t incompat = le32(b + 0x60);
    bool is64 = incompat & 0x80;
    sb->block_size = 1024u << le32(b + 0x18);
    sb->blocks = le32(b + 0x04) | (is64 ? (uint64_t)le32(b + 0x150) << 32 : 0);
    sb->reserved = le32(b + 0x08) | (is64 ? (uint64_t)le32(b + 0x154) << 32 : 0);
    sb->free_blocks = le32(b + 0x0C) | (is64 ? (uint64_t)le32(b + 0x158) << 32 : 0);
    sb->free_inodes = le32(b + 0x10);
    sb->extents = incompat & 0x40;
    return 0;
}

static void job_clear(struct disk_layer_job *job)
{
    char path[PATH_MAX];
    err_t ignored;
    if (image_path(job->dir, ERR_FILE, path, sizeof path, &ignored) == 0)
        unlink(path);
    if (job->pidfd >= 0)
        close(job->pidfd);
    if (job->fd >= 0)
        close(job->fd);
    if (job->dirfd >= 0)
        close(job->dirfd); /* drops the directory's lock */
    job->pidfd = job->fd = job->dirfd = -1;
    job->pid = 0;
}

/* A job that failed: mke2fs killed and reaped if it runs, the temporary image removed. */
static int job_fail(struct disk_layer_job *job)
{
    if (job->pid > 0) {
        kill(job->pid, SIGKILL);
        siginfo_t info;
        waitid(P_PIDFD, (id_t)job->pidfd, &info, WEXITED | __WALL);
    }
    if (job->dirfd >= 0)
        unlinkat(job->dirfd, TMP_IMAGE, 0);
    job_clear(job);
    return -1;
}

int disk_layer_create_begin(const char *dir, uint64_t bytes, struct disk_layer_job *job, err_t *err)
{
    memset(job, 0, sizeof *job);
    job->pidfd = job->fd = job->dirfd = -1;
    char path[PATH_MAX];
    if (image_path(dir, DISK_LAYER_IMAGE, path, sizeof path, err) < 0 ||
        image_path(dir, ERR_FILE, path, sizeof path, err) < 0)
        return -1;
    if ((size_t)snprintf(job->dir, sizeof job->dir, "%s", dir) >= sizeof job->dir)
        return err_set(err, ENAMETOOLONG, "disk layer %s: path too long", dir);
    if (bytes < DISK_LAYER_MIN_BYTES || bytes > DISK_LAYER_MAX_BYTES)
        return err_set(err, EINVAL, "disk layer %s: size %llu, expected %llu to %llu bytes", dir,
                       (unsigned long long)bytes, (unsigned long long)DISK_LAYER_MIN_BYTES,
                       (unsigned long long)DISK_LAYER_MAX_BYTES);
    bytes -= bytes % BLOCK_SIZE;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_set(err, errno, "disk layer: mkdir %s", dir);
    job->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (job->dirfd < 0)
        return err_set(err, errno, "disk layer: open %s", dir);
    /* One creator at a time; another one's job holds the lock until it ends. */
    if (flock(job->dirfd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno == EWOULDBLOCK ? EBUSY : errno;
        job_clear(job);
        return err_set(err, e, "disk layer %s: being made by another process", dir);
    }
    struct stat st;
    if (fstatat(job->dirfd, DISK_LAYER_IMAGE, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        job_clear(job);
        return err_set(err, EEXIST, "disk layer %s/%s exists already", dir, DISK_LAYER_IMAGE);
    }
    /* A creation cut short (a crash, kill -9) leaves only the temporary file. */
    if (unlinkat(job->dirfd, TMP_IMAGE, 0) < 0 && errno != ENOENT) {
        err_set(err, errno, "disk layer: remove %s/%s", dir, TMP_IMAGE);
        return job_fail(job);
    }
    job->fd = openat(job->dirfd, TMP_IMAGE, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (job->fd < 0) {
        err_set(err, errno, "disk layer: create %s/%s", dir, TMP_IMAGE);
        return job_fail(job);
    }
    if (ftruncate(job->fd, (off_t)bytes) < 0) {
        err_set(err, errno, "disk layer: size %s/%s to %llu bytes", dir, TMP_IMAGE,
                (unsigned long long)bytes);
        return job_fail(job);
    }
    if (spawn_mke2fs(job, err) < 0)
        return job_fail(job);
    return 0;
}

int disk_layer_create_step(struct disk_layer_job *job, err_t *err)
{
    siginfo_t info = {0};
    if (waitid(P_PIDFD, (id_t)job->pidfd, &info, WEXITED | WNOHANG | __WALL) < 0) {
        err_set(err, errno, "disk layer %s: wait for mke2fs", job->dir);
        return job_fail(job);
    }
    if (info.si_pid == 0)
        return 1; /* still running */
    job->pid = 0;
    close(job->pidfd);
    job->pidfd = -1;
    if (info.si_code != CLD_EXITED || info.si_status != 0) {
        if (job->try == 0) /* the newest options' complaint is the one to report */
            mke2fs_message(job, job->first_msg, sizeof job->first_msg);
        if (++job->try < MKE2FS_TRIES && spawn_mke2fs(job, err) == 0)
            return 1; /* again, with the options of an older mke2fs */
        err_set(err, 0, "mke2fs %s/%s failed%s%s", job->dir, TMP_IMAGE,
                job->first_msg[0] ? ": " : "", job->first_msg);
        return job_fail(job);
    }
    struct superblock sb;
    if (read_superblock(job->fd, &sb) < 0) {
        err_set(err, errno, "disk layer %s/%s: no ext4 superblock after mke2fs", job->dir,
                TMP_IMAGE);
        return job_fail(job);
    }
    /* Durable before it appears: a layer that exists is a whole filesystem. */
    if (fsync(job->fd) < 0 || renameat(job->dirfd, TMP_IMAGE, job->dirfd, DISK_LAYER_IMAGE) < 0 ||
        fsync(job->dirfd) < 0) {
        err_set(err, errno, "disk layer: write %s/%s", job->dir, DISK_LAYER_IMAGE);
        return job_fail(job);
    }
    job_clear(job);
    return 0;
}

int disk_layer_adopt(const char *from, const char *to, uint64_t bytes, err_t *err)
{
    char src[PATH_MAX], dst[PATH_MAX];
    if (image_path(from, DISK_LAYER_IMAGE, src, sizeof src, err) < 0 ||
        image_path(to, DISK_LAYER_IMAGE, dst, sizeof dst, err) < 0)
        return -1;
    cleanup_fd int fromdir = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fromdir < 0)
        return err_set(err, errno, "disk layer: open %s", from);
    cleanup_fd int img = openat(fromdir, DISK_LAYER_IMAGE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct superblock sb;
    if (img < 0 || read_superblock(img, &sb) < 0)
        return err_set(err, errno, "disk layer %s: no ext4 image", src);
    uint64_t want = bytes - bytes % BLOCK_SIZE;
    if (sb.blocks * sb.block_size != want)
        return err_set(err, EINVAL, "disk layer %s holds %llu bytes, not %llu", src,
                       (unsigned long long)(sb.blocks * sb.block_size), (unsigned long long)want);
    if (mkdir(to, 0700) < 0 && errno != EEXIST)
        return err_set(err, errno, "disk layer: mkdir %s", to);
    cleanup_fd int todir = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (todir < 0)
        return err_set(err, errno, "disk layer: open %s", to);
    struct stat st;
    if (fstatat(todir, DISK_LAYER_IMAGE, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return err_set(err, EEXIST, "disk layer %s exists already", dst);
    /* The image is whole and durable already (disk_layer_create_step): only the names move. */
    if (renameat(fromdir, DISK_LAYER_IMAGE, todir, DISK_LAYER_IMAGE) < 0)
        return err_set(err, errno, "disk layer: move %s to %s", src, dst);
    if (fsync(todir) < 0 || fsync(fromdir) < 0) {
        /* Not durable: moved back (best effort), so that a failure means nothing moved. */
        err_set(err, errno, "disk layer: write the move of %s to %s", src, dst);
        renameat(todir, DISK_LAYER_IMAGE, fromdir, DISK_LAYER_IMAGE);
        return -1;
    }
    unlinkat(fromdir, ERR_FILE, 0);
    rmdir(from); /* empty now, unless something else was put there */
    return 0;
}

void disk_layer_create_abort(struct disk_layer_job *job)
{
    if (job->dirfd >= 0 || job->pidfd >= 0)
        job_fail(job);
}

int disk_layer_create(const char *dir, uint64_t bytes, err_t *err)
{
    struct disk_layer_job job;
    if (disk_layer_create_begin(dir, bytes, &job, err) < 0)
        return -1;
    for (;;) {
        struct pollfd p = {.fd = job.pidfd, .events = POLLIN};
        if (poll(&p, 1, -1) < 0 && errno != EINTR) {
            err_set(err, errno, "disk layer %s: wait for mke2fs", dir);
            disk_layer_create_abort(&job);
            return -1;
        }
        int rc = disk_layer_create_step(&job, err);
        if (rc <= 0)
            return rc;
    }
}

/* Binds a free loop device to image_fd, cleared by the kernel once its last user closes it
 * (LO_FLAGS_AUTOCLEAR): the mount made on it is then its only holder. Returns the device's fd,
 * or -1 with err. */
static int loop_attach(int image_fd, const char *what, char *dev, size_t dev_size, err_t *err)
{
    cleanup_fd int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (control < 0)
        return err_set(err, errno, "disk layer %s: open /dev/loop-control", what);
    /* Another process (losetup, another sandbox) can take the device between GET_FREE and our
     * LOOP_CONFIGURE: then EBUSY, and the next free one. */
    for (int attempt = 0; attempt < 64; attempt++) {
        int n = ioctl(control, LOOP_CTL_GET_FREE);
        if (n < 0)
            return err_set(err, errno, "disk layer %s: find a free loop device", what);
        snprintf(dev, dev_size, "/dev/loop%d", n);
        cleanup_fd int loop = open(dev, O_RDWR | O_CLOEXEC);
        if (loop < 0)
            return err_set(err, errno, "disk layer %s: open %s", what, dev);
        struct loop_config config;
        memset(&config, 0, sizeof config);
        config.fd = (uint32_t)image_fd;
        config.block_size = BLOCK_SIZE;
        /* Direct I/O: the image's pages are not cached a second time in the host's page cache
         * under the filesystem's own; the kernel falls back to buffered I/O where it cannot. */
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
        if (ioctl(loop, LOOP_CONFIGURE, &config) == 0)
            return steal_fd(&loop);
        if (errno != EBUSY)
            return err_set(err, errno, "disk layer %s: attach %s", what, dev);
    }
    return err_set(err, EBUSY, "disk layer %s: no free loop device", what);
}

static int fs_set(int fs, unsigned cmd, const char *key, const char *value)
{
    return (int)syscall(SYS_fsconfig, fs, cmd, key, value, 0);
}

int disk_layer_open(const char *dir, int userns_fd, err_t *err)
{
    char path[PATH_MAX], dev[32];
    if (image_path(dir, DISK_LAYER_IMAGE, path, sizeof path, err) < 0)
        return -1;
    cleanup_fd int image = open_locked(dir, err);
    if (image < 0)
        return -1;
    cleanup_fd int loop = loop_attach(image, path, dev, sizeof dev, err);
    if (loop < 0)
        return -1;
    /* From here an error needs no undoing: closing the loop's fd clears it (autoclear), which
     * closes the image and drops the lock. */
    cleanup_fd int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
    if (fs < 0)
        return err_set(err, errno, "disk layer %s: fsopen ext4", path);
    /* discard: space freed inside is punched out of the sparse image, so the host's disk holds
     * what the sandbox holds, not its high-water mark. remount-ro: a filesystem error stops the
     * sandbox's writes rather than letting them go on over damage. */
    if (fs_set(fs, FSCONFIG_SET_STRING, "source", dev) < 0 ||
        fs_set(fs, FSCONFIG_SET_STRING, "errors", "remount-ro") < 0 ||
        fs_set(fs, FSCONFIG_SET_FLAG, "discard", NULL) < 0 ||
        fs_set(fs, FSCONFIG_CMD_CREATE, NULL, NULL) < 0)
        return err_set(err, errno, "disk layer %s: mount ext4 from %s", path, dev);
    cleanup_fd int mnt =
        (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (mnt < 0)
        return err_set(err, errno, "disk layer %s: fsmount", path);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns_fd};
    if (syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
        return err_set(err, errno, "disk layer %s: idmap the mount", path);
    return steal_fd(&mnt);
}

int disk_layer_usage(const char *dir, struct disk_layer_usage *out, err_t *err)
{
    cleanup_fd int fd = open_locked(dir, err);
    if (fd < 0)
        return -1;
    struct superblock sb;
    struct stat st;
    if (read_superblock(fd, &sb) < 0 || fstat(fd, &st) < 0)
        return err_set(err, errno, "disk layer %s/%s: read the superblock", dir, DISK_LAYER_IMAGE);
    /* ext4 keeps back min(2%, 4096) blocks for its own metadata (s_resv_clusters), which
     * statfs does not count as available either. */
    uint64_t reserve =
        sb.reserved + (sb.extents ? (sb.blocks / 50 < 4096 ? sb.blocks / 50 : 4096) : 0);
    out->size_bytes = sb.blocks * sb.block_size;
    out->free_bytes = sb.free_blocks > reserve ? (sb.free_blocks - reserve) * sb.block_size : 0;
    out->free_inodes = sb.free_inodes;
    out->host_bytes = (uint64_t)st.st_blocks * 512;
    return 0;
}

int disk_layer_remove(const char *dir, err_t *err)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (image_path(dir, DISK_LAYER_IMAGE, path, sizeof path, err) < 0 ||
        image_path(dir, TMP_IMAGE, tmp, sizeof tmp, err) < 0)
        return -1;
    /* Held while unlinking: no sandbox can have it mounted meanwhile. */
    cleanup_fd int fd = open_locked(dir, err);
    if (fd < 0)
        return -1;
    if (unlink(path) < 0)
        return err_set(err, errno, "disk layer: remove %s", path);
    if (unlink(tmp) < 0 && errno != ENOENT)
        return err_set(err, errno, "disk layer: remove %s", tmp);
    if (rmdir(dir) < 0 && errno != ENOTEMPTY && errno != EEXIST)
        return err_set(err, errno, "disk layer: remove %s", dir);
    return 0;
}
