/* The disk layer: the writable layer of a persistent sandbox, on disk and capped at its size.
 *
 * It is one file, DIR/disk.img (DIR = STATE/sandboxes/ID): a sparse image holding an ext4
 * filesystem of exactly the sandbox's disk size, made once by disk_layer_create. Each start of
 * the sandbox opens it again (disk_layer_open): a loop device, the filesystem mounted as a
 * detached mount that only the sandbox's own mount namespace will hold, so it outlives neither
 * the sandbox nor a host reboot, while the file outlives both. Why a loop-mounted image and not
 * quotas: src/jail/README.md ("The disk layer").
 *
 * Ownership on disk is the sandbox's own: the mount is idmapped to the sandbox's user namespace,
 * so uid 0 in the image is the sandbox's root whatever host uid range it runs under next time.
 * The image must never be mounted on the host without nosuid and nodev: a set-uid file that the
 * sandbox's root made is set-uid root in the image.
 *
 * One sandbox at a time: disk_layer_open takes an OFD lock on the image through the open file
 * that the loop device keeps, so the lock lasts exactly as long as the filesystem is mounted, and
 * a second open gets EBUSY instead of a second mount of the same filesystem (which would corrupt
 * it). Every error names the path. */
#pragma once
#include "util/err.h"
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define DISK_LAYER_IMAGE     "disk.img"
#define DISK_LAYER_MIN_BYTES (16ull << 20) /* a journal and some room */
#define DISK_LAYER_MAX_BYTES                                                                       \
    (16ull << 40) /* ext4 with 4 KiB blocks goes far beyond; hutch's cap                           \
                   */

/* Makes DIR (mode 0700, its parent must exist) if it is missing and DIR/disk.img in it: a sparse
 * file of bytes (rounded down to 4 KiB) formatted ext4 by mke2fs, appearing at its name only once
 * complete. EEXIST if the image exists already, EBUSY while another process makes it. Blocks for
 * mke2fs (15-30 ms here): disk_layer_create_begin and _step, below, are the same without
 * blocking. */
int disk_layer_create(const char *dir, uint64_t bytes, err_t *err);

/* The creation as steps for an event loop: begin starts mke2fs and returns with job->pidfd,
 * which becomes readable when mke2fs exits; then step: 1 while it is still to be waited for
 * (poll job->pidfd again: it may be a new one), 0 once the layer exists, -1 with err (nothing
 * left behind). A job not finished is ended by abort (mke2fs killed, the temporary file gone).
 * mke2fs is a child of the caller, reaped here through its pidfd (a caller that reaps every
 * child itself must leave it alone). */
struct disk_layer_job {
    char dir[PATH_MAX];
    int dirfd, fd, pidfd;
    pid_t pid;
    unsigned try;
    char first_msg[256];
};
int disk_layer_create_begin(const char *dir, uint64_t bytes, struct disk_layer_job *job,
                            err_t *err);
int disk_layer_create_step(struct disk_layer_job *job, err_t *err);
void disk_layer_create_abort(struct disk_layer_job *job);
/* Moves the layer FROM/disk.img (made by disk_layer_create, ahead of need) to TO/disk.img, TO
 * made (mode 0700, its parent must exist) if missing, FROM removed once empty; the move is
 * durable when this returns. EINVAL (nothing moved) unless the image's filesystem is exactly
 * bytes (rounded down to 4 KiB) big; EEXIST if TO has a layer; on any failure the image is
 * where it was (one whose move could not be made durable is moved back). Microseconds plus two
 * directory fsyncs, against mke2fs's milliseconds. */
int disk_layer_adopt(const char *from, const char *to, uint64_t bytes, err_t *err);
/* Whether DIR/disk.img exists. */
bool disk_layer_exists(const char *dir);
/* Mounts the layer for one sandbox: returns a detached mount of its filesystem (nosuid, nodev,
 * idmapped through userns_fd), or -1 with err (errnum EBUSY while another sandbox holds it). The
 * caller hands it to the sandbox and closes its own fd; the filesystem is unmounted, the loop
 * device freed and the lock dropped when the last reference goes, at the latest when the
 * sandbox's mount namespace dies. */
int disk_layer_open(const char *dir, int userns_fd, err_t *err);

struct disk_layer_usage {
    uint64_t size_bytes;  /* the filesystem's size: the cap */
    uint64_t free_bytes;  /* what files can still take (ext4's own reserve excluded) */
    uint64_t free_inodes; /* files that can still be made */
    uint64_t host_bytes;  /* what the image takes on the host's disk now (it is sparse) */
};
/* The usage of a layer no sandbox holds (from its superblock, which the kernel writes when it
 * unmounts). EBUSY while in use. */
int disk_layer_usage(const char *dir, struct disk_layer_usage *out, err_t *err);
/* Removes DIR/disk.img, then DIR if that leaves it empty. EBUSY while in use; ENOENT if there is
 * no layer. */
int disk_layer_remove(const char *dir, err_t *err);
