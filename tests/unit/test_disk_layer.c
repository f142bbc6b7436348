/* The disk layer's file side (no loop device, no mount: tests/integration/writable_root.sh has
 * those): creation, its size and usage from the superblock, refusals, the in-use lock, removal. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/disk_layer.h"
#include "tap.h"

int main(void)
{
    if (access("/usr/sbin/mke2fs", X_OK) < 0 && access("/sbin/mke2fs", X_OK) < 0) {
        printf("1..0 # SKIP mke2fs (e2fsprogs) is not installed\n");
        return 0;
    }
    char base[] = "/tmp/hutch-test-disk-layer.XXXXXX";
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    char dir[256], img[300], tmp[300];
    snprintf(dir, sizeof dir, "%s/sb", base);
    snprintf(img, sizeof img, "%s/" DISK_LAYER_IMAGE, dir);
    snprintf(tmp, sizeof tmp, "%s/" DISK_LAYER_IMAGE ".tmp", dir);
    err_t err = {0};

    ok(!disk_layer_exists(dir), "no layer before it is made");
    ok(disk_layer_create(dir, 4ull << 20, &err) < 0 && err.errnum == EINVAL, "4 MiB is refused: %s",
       err.msg);
    ok(disk_layer_create(dir, 17ull << 50, &err) < 0 && err.errnum == EINVAL,
       "17 PiB is refused: %s", err.msg);
    /* A creation cut short left its temporary file. */
    mkdir(dir, 0700);
    int fd = open(tmp, O_WRONLY | O_CREAT, 0600);
    close(fd);
    ok(disk_layer_create(dir, (64ull << 20) + 1000, &err) == 0, "a 64 MiB layer is made");
    ok(disk_layer_exists(dir), "and exists");
    ok(access(tmp, F_OK) < 0 && errno == ENOENT, "the stale temporary file is gone");
    struct stat st;
    ok(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "its directory is 0700");
    ok(stat(img, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == (64 << 20),
       "the image is 0600 and 64 MiB, rounded down to 4 KiB");
    ok(st.st_blocks * 512 < (4 << 20), "and sparse: %lld bytes on disk",
       (long long)st.st_blocks * 512);

    struct disk_layer_usage u;
    ok(disk_layer_usage(dir, &u, &err) == 0, "its usage is read");
    is_u64(u.size_bytes, 64ull << 20, "the filesystem is the layer's size");
    ok(u.free_bytes > (54ull << 20) && u.free_bytes < u.size_bytes,
       "free space is the size less ext4's journal, tables and reserve: %llu",
       (unsigned long long)u.free_bytes);
    ok(u.free_inodes > 1000, "there are inodes: %llu", (unsigned long long)u.free_inodes);
    ok(u.host_bytes == (uint64_t)st.st_blocks * 512, "host bytes are the image's blocks");

    ok(disk_layer_create(dir, 64ull << 20, &err) < 0 && err.errnum == EEXIST,
       "making it again: EEXIST (%s)", err.msg);

    /* In use: the OFD lock that the loop device's open file holds while it is mounted. */
    int holder = open(img, O_RDWR | O_CLOEXEC);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    ok(holder >= 0 && fcntl(holder, F_OFD_SETLK, &fl) == 0, "a holder locks the image");
    ok(disk_layer_usage(dir, &u, &err) < 0 && err.errnum == EBUSY, "usage while held: EBUSY (%s)",
       err.msg);
    ok(disk_layer_remove(dir, &err) < 0 && err.errnum == EBUSY, "removal while held: EBUSY (%s)",
       err.msg);
    ok(disk_layer_open(dir, -1, &err) < 0 && err.errnum == EBUSY, "opening while held: EBUSY (%s)",
       err.msg);
    ok(disk_layer_exists(dir), "the held layer is still there");
    close(holder);

    /* Not a filesystem: usage refuses it rather than inventing numbers. */
    char junk[300];
    snprintf(junk, sizeof junk, "%s/junk", base);
    mkdir(junk, 0700);
    char junk_img[320];
    snprintf(junk_img, sizeof junk_img, "%s/" DISK_LAYER_IMAGE, junk);
    fd = open(junk_img, O_WRONLY | O_CREAT, 0600);
    ok(fd >= 0 && ftruncate(fd, 1 << 20) == 0, "a layer of zeros");
    close(fd);
    ok(disk_layer_usage(junk, &u, &err) < 0 && err.errnum == EINVAL, "its usage is refused: %s",
       err.msg);
    ok(disk_layer_remove(junk, &err) == 0, "and it can be removed");

    ok(disk_layer_remove(dir, &err) == 0, "the layer is removed");
    ok(access(dir, F_OK) < 0 && errno == ENOENT, "with its directory");
    ok(disk_layer_remove(dir, &err) < 0 && err.errnum == ENOENT && strstr(err.msg, img),
       "removing it again: ENOENT, naming the image (%s)", err.msg);
    ok(disk_layer_usage(dir, &u, &err) < 0 && err.errnum == ENOENT, "no usage of a missing layer");

    /* The same in steps, as a daemon's loop takes it. */
    struct disk_layer_job job, other;
    ok(disk_layer_create_begin(dir, 64ull << 20, &job, &err) == 0 && job.pidfd >= 0 && job.pid > 0,
       "begin: mke2fs runs, with a pidfd to poll (%s)", err.msg);
    ok(disk_layer_create_begin(dir, 64ull << 20, &other, &err) < 0 && err.errnum == EBUSY,
       "a second creator meanwhile: EBUSY, not a wait (%s)", err.msg);
    int rc = 1, steps = 0;
    while (rc == 1 && steps < 1000) {
        struct pollfd p = {.fd = job.pidfd, .events = POLLIN};
        poll(&p, 1, 10000);
        rc = disk_layer_create_step(&job, &err);
        steps++;
    }
    ok(rc == 0 && disk_layer_exists(dir), "step: the layer exists once mke2fs has exited (%s)",
       err.msg);
    char errfile[320];
    snprintf(errfile, sizeof errfile, "%s/" DISK_LAYER_IMAGE ".mke2fs", dir);
    ok(access(tmp, F_OK) < 0 && access(errfile, F_OK) < 0,
       "no temporary image nor mke2fs's message file is left");
    ok(disk_layer_usage(dir, &u, &err) == 0 && u.size_bytes == 64ull << 20,
       "it is a whole 64 MiB filesystem");
    ok(disk_layer_remove(dir, &err) == 0, "and is removed");
    ok(disk_layer_create_begin(dir, 64ull << 20, &job, &err) == 0, "begin again");
    pid_t pid = job.pid;
    disk_layer_create_abort(&job);
    ok(kill(pid, 0) < 0 && errno == ESRCH, "abort: mke2fs killed and reaped");
    ok(!disk_layer_exists(dir) && access(tmp, F_OK) < 0 && access(errfile, F_OK) < 0,
       "and nothing of the layer is left");
    ok(disk_layer_create(dir, 64ull << 20, &err) == 0, "the lock was dropped: it can be made");
    disk_layer_remove(dir, &err);
    rmdir(base);
    return done_testing();
}
