/* What a writable root (hutch run --writable-root, jail_spec.writable_root) costs per sandbox,
 * phase by phase, with the core's own idmap.c and disk_layer.c:
 *   idmap      the parent's idmapped clones of a template, /usr and /var/lib/dpkg
 *   disk-open  the disk layer: loop device, ext4 mount, idmap (disk_layer_open)
 *   attach     the child attaching the four detached mounts it was sent (move_mount)
 *   setns      for comparison: a helper that joins the child's mount namespace to attach them
 *   overlays   the child's three overlays (/, /usr, /var/lib/dpkg) on the disk layer
 *   teardown   from the child's last instruction to its reaping: the namespace dies, the layer's
 *              ext4 is unmounted (its journal committed), the loop device cleared
 *   create     disk_layer_create (sparse file + mke2fs), per size, with the space it leaves
 * It is a throwaway child in a user and mount namespace of its own, not a whole sandbox (no
 * pid namespace, cgroup or init): the figures are the writable root's own share of a start.
 *
 * usage (root): writable_root [-n ROUNDS] [-d DIR]   (DIR: scratch directory, default /tmp) */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/disk_layer.h"
#include "jail/idmap.h"

#define MAX_ROUNDS 1000

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void die(const char *what)
{
    fprintf(stderr, "writable_root bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void die_err(const err_t *err)
{
    fprintf(stderr, "writable_root bench: %s\n", err->msg);
    exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    printf("%-10s median %7llu us   p90 %7llu us   min %7llu us   (n=%d)\n", name,
           (unsigned long long)v[n / 2], (unsigned long long)v[(n * 9) / 10],
           (unsigned long long)v[0], n);
}

/* The layers travel as the core sends them (writable_root.c): one CONTROL_LAYERS message. */
static int send_layers(int sock, const int *fds, size_t n)
{
    struct control_msg msg = {.type = CONTROL_LAYERS, .code = (int32_t)n};
    return control_send_fds(sock, &msg, fds, n);
}

static const char *const names[] = {"disk", "lower", "usr", "dpkg"};

struct child_times {
    uint64_t attach, overlays;
};

/* The child: waits for its maps, builds the stage, attaches what it gets (or finds it attached
 * by the helper), mounts the overlays, reports, exits. */
static _Noreturn void child(int sock, const char *stage, bool self_attach)
{
    char b;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
        die("unshare");
    if (write(sock, "u", 1) != 1 || read(sock, &b, 1) != 1)
        _exit(1);
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        die("setresuid");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", stage, "tmpfs", 0, "size=64k") < 0 || chdir(stage) < 0)
        die("stage");
    for (int i = 0; i < 4; i++)
        mkdir(names[i], 0755);
    mkdir("root", 0755);
    if (write(sock, "s", 1) != 1)
        _exit(1);
    int fds[4];
    struct control_msg msg;
    size_t n;
    if (control_recv_fds(sock, &msg, fds, 4, &n) != 1)
        die("receive the layers");
    struct child_times t;
    uint64_t t0 = now_us();
    for (size_t i = 0; self_attach && i < n; i++)
        if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, names[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
            die("move_mount");
    t.attach = now_us() - t0;
    static const char *const dirs[] = {"disk/root", "disk/root/upper", "disk/root/work",
                                       "disk/usr",  "disk/usr/upper",  "disk/usr/work",
                                       "disk/dpkg", "disk/dpkg/upper", "disk/dpkg/work"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        mkdir(dirs[i], 0755);
    t0 = now_us();
    if (mount("overlay", "root", "overlay", 0,
              "lowerdir=lower,upperdir=disk/root/upper,workdir=disk/root/work,userxattr") < 0 ||
        mount("overlay", "root/usr", "overlay", 0,
              "lowerdir=usr,upperdir=disk/usr/upper,workdir=disk/usr/work,userxattr") < 0 ||
        mount("overlay", "root/dpkg", "overlay", 0,
              "lowerdir=dpkg,upperdir=disk/dpkg/upper,workdir=disk/dpkg/work,userxattr") < 0)
        die("overlay");
    t.overlays = now_us() - t0;
    if (write(sock, &t, sizeof t) != (ssize_t)sizeof t)
        _exit(1);
    _exit(0);
}

int main(int argc, char **argv)
{
    int rounds = 30;
    const char *scratch = "/tmp";
    for (int opt; (opt = getopt(argc, argv, "n:d:")) != -1;) {
        if (opt == 'n')
            rounds = atoi(optarg);
        else if (opt == 'd')
            scratch = optarg;
        else
            return 2;
    }
    if (rounds < 1 || rounds > MAX_ROUNDS)
        return 2;
    char dir[256], stage[300], tmpl[300], layer[300];
    snprintf(dir, sizeof dir, "%s/hutch-bench-wr.XXXXXX", scratch);
    if (!mkdtemp(dir))
        die("mkdtemp");
    chmod(dir, 0755);
    snprintf(stage, sizeof stage, "%s/stage", dir);
    snprintf(tmpl, sizeof tmpl, "%s/template", dir);
    snprintf(layer, sizeof layer, "%s/layer", dir);
    mkdir(stage, 0755);
    mkdir(tmpl, 0755);
    char sub[320];
    snprintf(sub, sizeof sub, "%s/usr", tmpl);
    mkdir(sub, 0755);
    snprintf(sub, sizeof sub, "%s/dpkg", tmpl);
    mkdir(sub, 0755);
    err_t err = {0};
    static uint64_t idmap[MAX_ROUNDS], open_[MAX_ROUNDS], attach[MAX_ROUNDS], setns_[MAX_ROUNDS],
        overlays[MAX_ROUNDS], teardown[MAX_ROUNDS];
    if (disk_layer_create(layer, 256ull << 20, &err) < 0)
        die_err(&err);
    const char *dpkg = access("/var/lib/dpkg", F_OK) == 0 ? "/var/lib/dpkg" : "/usr";
    for (int r = 0; r < 2 * rounds; r++) {
        bool self_attach = r % 2 == 0; /* interleaved: the child attaches, or a setns helper */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
            die("socketpair");
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            close(sv[0]);
            child(sv[1], stage, self_attach);
        }
        close(sv[1]);
        char b, path[64], line[64];
        if (read(sv[0], &b, 1) != 1)
            die("child");
        snprintf(line, sizeof line, "0 %u 65535\n", 0x40000000u + 4000u * 65536u);
        static const char *const maps[] = {"setgroups", "gid_map", "uid_map"};
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, maps[i]);
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            const char *data = i == 0 ? "deny" : line;
            if (fd < 0 || write(fd, data, strlen(data)) < 0)
                die(path);
            close(fd);
        }
        if (write(sv[0], "m", 1) != 1 || read(sv[0], &b, 1) != 1)
            die("child");
        int fds[4];
        uint64_t t0 = now_us();
        int userns = idmap_userns_open(pid, &err);
        if (userns < 0 || (fds[1] = idmap_clone(userns, tmpl, &err)) < 0 ||
            (fds[2] = idmap_clone(userns, "/usr", &err)) < 0 ||
            (fds[3] = idmap_clone(userns, dpkg, &err)) < 0)
            die_err(&err);
        uint64_t t1 = now_us();
        if ((fds[0] = disk_layer_open(layer, userns, &err)) < 0)
            die_err(&err);
        uint64_t t2 = now_us();
        close(userns);
        if (self_attach) {
            if (send_layers(sv[0], fds, 4) < 0)
                die("send");
        } else {
            uint64_t a = now_us();
            snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)pid);
            int mntns = open(path, O_RDONLY | O_CLOEXEC);
            pid_t helper = fork();
            if (helper == 0) {
                if (setns(mntns, CLONE_NEWNS) < 0 || chdir(stage) < 0)
                    _exit(1);
                for (int i = 0; i < 4; i++)
                    if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, names[i],
                                MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        _exit(1);
                _exit(0);
            }
            int status;
            waitpid(helper, &status, 0);
            close(mntns);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                errno = EIO;
                die("setns helper");
            }
            setns_[r / 2] = now_us() - a;
            if (send_layers(sv[0], fds, 0) < 0)
                die("send");
        }
        for (int i = 0; i < 4; i++)
            close(fds[i]);
        struct child_times t;
        if (read(sv[0], &t, sizeof t) != (ssize_t)sizeof t)
            die("child's times");
        uint64_t t3 = now_us();
        int status;
        waitpid(pid, &status, 0);
        uint64_t t4 = now_us();
        close(sv[0]);
        if (self_attach) {
            idmap[r / 2] = t1 - t0;
            open_[r / 2] = t2 - t1;
            attach[r / 2] = t.attach;
            overlays[r / 2] = t.overlays;
            teardown[r / 2] = t4 - t3;
        }
        struct disk_layer_usage u;
        if (disk_layer_usage(layer, &u, &err) < 0)
            die_err(&err); /* still held after the reaping: that would be a finding */
    }
    printf("writable root, per sandbox (%d rounds; kernel's loop + ext4 + overlayfs):\n", rounds);
    report("idmap", idmap, rounds);
    report("disk-open", open_, rounds);
    report("attach", attach, rounds);
    report("setns", setns_, rounds);
    report("overlays", overlays, rounds);
    report("teardown", teardown, rounds);
    disk_layer_remove(layer, &err);

    printf("disk_layer_create (sparse file + mke2fs), and what the layer leaves for files:\n");
    static const uint64_t sizes[] = {256ull << 20, 1ull << 30, 10ull << 30, 100ull << 30};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        static uint64_t create[MAX_ROUNDS];
        int n = rounds < 10 ? rounds : 10;
        struct disk_layer_usage u = {0};
        for (int i = 0; i < n; i++) {
            uint64_t t0 = now_us();
            if (disk_layer_create(layer, sizes[s], &err) < 0)
                die_err(&err);
            create[i] = now_us() - t0;
            if (disk_layer_usage(layer, &u, &err) < 0 || disk_layer_remove(layer, &err) < 0)
                die_err(&err);
        }
        char name[32];
        snprintf(name, sizeof name, "%llu MiB", (unsigned long long)(sizes[s] >> 20));
        report(name, create, n);
        printf("           free for files %.1f%% of the size; %llu KiB on the host's disk\n",
               100.0 * (double)u.free_bytes / (double)u.size_bytes,
               (unsigned long long)(u.host_bytes >> 10));
    }
    rmdir(stage);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/usr", tmpl);
    rmdir(sub);
    rmdir(tmpl);
    rmdir(dir);
    return 0;
}
