/* The isolation core: a sandbox description in, a running sandbox out.
 *
 *   struct jail_spec  what to build (layers, files, limits, network mode, uid range, user, argv)
 *   jail_start()      builds it: cgroup, clone3 into fresh namespaces, maps, rootfs, drops, exec
 *   struct jail       what is running: init's pid and pidfd, the control channel, the cgroup
 *   jail_destroy()    kills and removes everything the sandbox owned
 *
 * Inside, pid 1 is hutch init (src/init/): it forks the payload, reaps, and reports the payload's
 * fate over the control channel (messages in src/init/init_msg.h). `hutch run` is the first
 * client; the daemon uses the same calls. */
#pragma once
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/seccomp.h"
#include "util/err.h"

#define JAIL_USER_UID   1000
#define JAIL_USER_NAME  "user"
#define JAIL_USER_HOME  "/home/user"
#define JAIL_OUTPUT_DIR "/output"
#define JAIL_UID_COUNT  65536u /* host ids per sandbox: each sandbox a range of its own */
/* Ids 0..65534 inside map to the first 65535 of the range. The last host id of the range owns the
 * sandbox's user namespace (spawn.c says why) and is mapped to nothing: no process or file inside
 * can ever carry it. */
#define JAIL_UID_MAPPED (JAIL_UID_COUNT - 1u)
#define JAIL_MAX_FILES  1024u /* files copied in per sandbox */
#define JAIL_MAX_DISK_BYTES (1ull << 50) /* 1 PiB: far below where the kernel's rounding wraps */
#define JAIL_MAX_TIME_MS    (400ull * 24 * 3600 * 1000) /* 400 days, for any time limit */

/* Shares of the kernel's per-user counters that each sandbox gets for itself (shares.c). The
 * counters are charged to the namespace's owner, an id of the sandbox's own, so a sandbox that
 * exhausts its share harms only itself; the shares bound what it may take of the kernel. */
#define JAIL_DEFAULT_PTYS              16         /* devpts max= */
#define JAIL_DEFAULT_INOTIFY_INSTANCES 128        /* the kernel's own per-user default */
#define JAIL_DEFAULT_INOTIFY_WATCHES   8192       /* each pins an inode and kernel memory */
#define JAIL_SIGPENDING                4096       /* queued signals, all processes together */
#define JAIL_MSGQUEUE_BYTES            819200u    /* POSIX message queues: the kernel's default */
#define JAIL_MEMLOCK_BYTES             (8u << 20) /* locked memory: the kernel's default */

/* What a payload run as root keeps in a writable root (jail_spec.writable_root), as capabilities
 * of the sandbox's own user namespace: dpkg -i of a package whose files belong to other users
 * and groups, or carry set-id bits, sets their owner (CHOWN), their times and modes once they
 * are no longer root's (FOWNER), keeps a set-gid bit on a file whose group root is not in
 * (FSETID), and looks into directories such as a 0700 one of another user (DAC_OVERRIDE). pip,
 * npm -g, and dpkg -i of root-owned files need none of them. They act only on files whose owner
 * and group the namespace maps and on its own namespaces (README.md, threat model). */
#define JAIL_WRITABLE_ROOT_CAPS                                                                   \
    ((1ull << CAP_CHOWN) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_FOWNER) | (1ull << CAP_FSETID))

enum jail_net_mode {
    JAIL_NET_NONE, /* new network namespace with loopback only */
};

struct jail_limits {
    uint64_t memory_bytes;      /* cgroup memory limit, swap excluded; 0 = none */
    uint64_t pids;              /* cgroup pids.max; 0 = none */
    uint64_t disk_bytes;        /* size of the writable layer (tmpfs); must be > 0 */
    uint64_t cpu_time_ms;       /* RLIMIT_CPU backstop (the supervisor enforces the exact limit) */
    uint64_t nofile;            /* RLIMIT_NOFILE; 0 = inherit */
    uint64_t fsize_bytes;       /* RLIMIT_FSIZE; 0 = none */
    uint64_t ptys;              /* ptys at once (devpts max=); 0 = JAIL_DEFAULT_PTYS */
    uint64_t inotify_instances; /* 0 = JAIL_DEFAULT_INOTIFY_INSTANCES */
    uint64_t inotify_watches;   /* 0 = JAIL_DEFAULT_INOTIFY_WATCHES */
};

/* A file copied into the sandbox before the payload starts: the parent opened it (as the host
 * user), the child copies its bytes to sandbox_path, owned by the sandbox user. */
struct jail_file {
    int host_fd;
    const char *sandbox_path; /* absolute */
    mode_t mode;
};

/* A host path bound read-only (and nosuid, nodev, recursively) into the sandbox. The child
 * resolves the source with the sandbox's unprivileged ids, so it must be world-reachable; the
 * target is created inside a place the sandbox owns (/tmp, /home/user, /mnt, /root, ...). */
struct jail_mount {
    const char *host_path;
    const char *sandbox_path; /* absolute, no ".." */
};

struct jail_spec {
    const char *name;         /* unique; names the cgroup ("run-PID-N") */
    const char *template_dir; /* read-only lower layer: a prepared rootfs (see template.h) */
    const char *usr_dir;      /* read-only lower of /usr, normally the host's "/usr" */
    const char *stage_dir;    /* empty host directory; the writable layer is mounted on it, in the
                                 sandbox's own mount namespace only */
    struct jail_limits limits;
    enum jail_net_mode net;
    uid_t host_uid_base; /* inside 0..JAIL_UID_MAPPED-1 map to host_uid_base.. */
    bool as_root;        /* run the payload as sandbox root (no capabilities) instead of user */
    enum seccomp_profile seccomp;
    const char *hostname;
    /* argv[0] is looked up in the sandbox's PATH. No string may live in the process's own argv
     * area: the child overwrites it so /proc/1/cmdline inside shows nothing of the host's. */
    const char *const *argv;
    const char *const *envp;
    const char *cwd;                    /* NULL = the user's home */
    int stdin_fd, stdout_fd, stderr_fd; /* host fds given to the payload as 0, 1, 2 */
    const struct jail_file *files;
    size_t n_files;
    const struct jail_mount *mounts;
    size_t n_mounts;
    bool output_dir; /* create JAIL_OUTPUT_DIR and hand its fd to the parent */
    /* One-shot runs: the sandbox dies with its supervisor (PR_SET_PDEATHSIG on init), and a
     * keeper process removes the cgroup if the supervisor is killed before it could. */
    bool die_with_parent;
    int keep_fd; /* held open by the keeper until cleanup is done (the uid range lock); or -1 */
    /* A root filesystem that sandbox root can change, /usr and /etc included (persistent
     * sandboxes; writable_root.h): overlays of template_dir, usr_dir and dpkg_dir, each seen
     * through the sandbox's id map, over the disk layer in layer_dir (disk_layer.h), which is
     * capped at its own size (limits.disk_bytes is not used then). A payload run as root keeps
     * JAIL_WRITABLE_ROOT_CAPS. */
    bool writable_root;
    const char *layer_dir; /* holds the disk layer (disk_layer_create) */
    const char *dpkg_dir;  /* lower of /var/lib/dpkg (the host's, with usr_dir = "/usr"), or NULL */
};

struct jail {
    char name[80];
    pid_t pid;        /* host pid of the sandbox's init */
    int pidfd;        /* pidfd of init: readable when init has exited */
    int control_fd;   /* SOCK_SEQPACKET to init (src/init/init_msg.h) */
    int output_dirfd; /* the sandbox's /output, readable after it dies; -1 if not asked */
    struct cgroup *cgroup;
    uint64_t start_ns; /* CLOCK_MONOTONIC when the payload was forked (READY) */
    pid_t keeper_pid;  /* the cleanup keeper, or 0 */
    int keeper_fd;     /* write end of its pipe: a byte means "done", EOF means "clean up" */
};

/* In the freshly cloned child: the setup sequence from inside, then init. Never returns. */
_Noreturn void jail_child_main(const struct jail_spec *spec, int ctl,
                               const struct seccomp_program *prog);
/* In the payload process forked by init: stdio, cwd, drops, Landlock, seccomp, execve. Reports
 * an exec failure over ctl and exits 127. Never returns. */
_Noreturn void jail_exec_payload(const struct jail_spec *spec, int ctl,
                                 const struct seccomp_program *prog);
uint64_t jail_now_ns(void);

/* Builds and starts the sandbox. On failure nothing is left behind and err says why. A failure
 * inside the child during setup (mount, pivot, exec setup) is reported through err too. */
int jail_start(const struct jail_spec *spec, struct jail *out, err_t *err);
/* Kills everything in the sandbox and removes its cgroup; closes fds; reaps init. Idempotent. */
int jail_destroy(struct jail *jail, err_t *err);
/* After jail_destroy: waits for the keeper, which exits on its own once told. Separate so that
 * the caller can do its own work (print the result) meanwhile. Idempotent. */
void jail_reap(struct jail *jail);
