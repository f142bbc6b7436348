/* The isolation core: a sandbox description in, a running sandbox out.
 *
 *   struct jail_spec      what to build (layers, files, limits, network mode, uid range, user, argv)
 *   jail_start_begin()    cgroup, clone3 into fresh namespaces, maps, go: returns at once
 *   jail_start_complete() when the control channel is readable: READY, or the child's error
 *   struct jail           what is running: init's pid and pidfd, the control channel, the cgroup
 *   jail_kill(), jail_reap_init(), jail_remove(), jail_close()   the steps of destroy
 *   jail_freeze_start(), jail_frozen()                            pause and resume
 *   jail_start(), jail_destroy(), jail_set_frozen()               blocking compositions
 *
 * Inside, pid 1 is hutch init (src/init/): it forks the payload, reaps, and reports the payload's
 * fate over the control channel (messages in src/jail/control.h). `hutch run` is the first
 * client; the daemon uses the same calls.
 *
 * The caller's contract: one thread calls into this library (no locking inside); the caller may
 * handle SIGCHLD and reap its own children (init's status then still comes through its pidfd on
 * Linux 6.15+, see jail_reap_init; reaping by pid keeps it on any kernel). Nothing
 * here raises SIGPIPE (every write to a socket or pipe uses MSG_NOSIGNAL or a socket), sleeps
 * (except the blocking compositions) or exits the process. */
#pragma once
#include <limits.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/seccomp.h"
#include "util/err.h"

#define JAIL_USER_UID   1000
#define JAIL_USER_GID   1000 /* the user's group: commands and the files worker run as both */
#define JAIL_USER_NAME  "user"
#define JAIL_USER_HOME  "/home/user"
#define JAIL_OUTPUT_DIR "/output"
#define JAIL_UID_COUNT  65536u /* host ids per sandbox: each sandbox a range of its own */
/* Ids 0..65534 inside map to the first 65535 of the range. The last host id of the range owns the
 * sandbox's user namespace (spawn.c says why) and is mapped to nothing: no process or file inside
 * can ever carry it. */
#define JAIL_UID_MAPPED (JAIL_UID_COUNT - 1u)
#define JAIL_MAX_FILES  1024u /* files copied in per sandbox */
#define JAIL_MAX_COMMANDS 1024u /* commands running at once in an agent sandbox */
#define JAIL_MAX_DISK_BYTES (1ull << 50) /* 1 PiB: far below where the kernel's rounding wraps */
#define JAIL_MAX_CPU_MILLIS (4096ull * 1000) /* 4096 CPUs' worth: the kernel's own cap */
#define JAIL_MAX_TIME_MS    (400ull * 24 * 3600 * 1000) /* 400 days, for any time limit */

/* Lengths of what enters the core (in bytes, without the NUL), checked by jail_start_begin and
 * jail_command_start before anything is made; the daemon checks its HTTP input against the same
 * (jail_check_length, jail_check_args). Nothing longer is ever cut to fit: it is refused, a name
 * or a path with ENAMETOOLONG, argv and environment with E2BIG (as execve says it). */
/* A sandbox's name: its cgroup (hutch/NAME, one level of [A-Za-z0-9._-], no leading dot), its
 * record (NAME.sandbox), its init's socket (NAME.sock) and struct jail's name. */
#define JAIL_MAX_NAME CGROUP_NAME_MAX
#define JAIL_MAX_HOSTNAME HOST_NAME_MAX /* 64: sethostname refuses more */
/* A host directory (template_dir, usr_dir, stage_dir, layer_dir, dpkg_dir) and a mount's host
 * path: PATH_MAX less room for what hutch appends inside its PATH_MAX buffers (the longest:
 * stage_dir + "/root/proc/sysrq-trigger", 24 bytes). */
#define JAIL_MAX_HOST_PATH (PATH_MAX - 64)
/* A path inside the sandbox (cwd, a file's destination, a mount's target): what the kernel
 * resolves at all. */
#define JAIL_MAX_SANDBOX_PATH (PATH_MAX - 1)
/* argv and the environment, of a sandbox's payload and of a command. One entry: the kernel's own
 * bound (MAX_ARG_STRLEN, 32 pages with the NUL). Entries of a command: as many as its SPAWN
 * carries (PROTO_MAX_ARGS); a payload's are bounded by the bytes alone. All together, counted as execve counts them (each string with its NUL and a
 * pointer): a quarter of the 2 MiB that execve allows under the default 8 MiB stack, so that init's
 * own options fit beside them and a command's SPAWN (PROTO_MAX_TO_INIT, 1 MiB) always holds
 * them. */
#define JAIL_MAX_ARG_BYTES     (128u * 1024 - 1)
#define JAIL_MAX_ARGS          4096u /* in a command's argv, and in its environment */
#define JAIL_MAX_ARGV_ENV_BYTES (512u * 1024)

/* Shares of the kernel's per-user counters that each sandbox gets for itself (shares.c). The
 * counters are charged to the namespace's owner, an id of the sandbox's own, so a sandbox that
 * exhausts its share harms only itself; the shares bound what it may take of the kernel. */
#define JAIL_DEFAULT_PTYS              16         /* devpts max= */
#define JAIL_DEFAULT_INOTIFY_INSTANCES 128        /* the kernel's own per-user default */
#define JAIL_DEFAULT_INOTIFY_WATCHES   8192       /* each pins an inode and kernel memory */
#define JAIL_SIGPENDING                4096       /* queued signals, all processes together */
#define JAIL_MSGQUEUE_BYTES            819200u    /* POSIX message queues: the kernel's default */
#define JAIL_MEMLOCK_BYTES             (8u << 20) /* locked memory: the kernel's default */

/* What a payload or command run as root keeps in a writable root (jail_spec.writable_root), as
 * capabilities of the sandbox's own user namespace: dpkg -i of a package whose files belong to other users
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
    /* CPU bandwidth in thousandths of a CPU (2000: two CPUs' worth); 0 = none. v1 and hybrid
     * need spec.cgroups opened with CGROUP_HOST_CPU_LIMITS. */
    uint64_t cpu_millis;
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
    struct cgroup_host *cgroups; /* the process's (cgroup_host_open) */
    const char *name;         /* unique; names the cgroup ("run-PID-N") */
    const char *template_dir; /* read-only lower layer: a prepared rootfs (see template.h) */
    const char *usr_dir;      /* read-only lower of /usr, normally the host's "/usr" */
    const char *stage_dir;    /* empty host directory; the writable layer is mounted on it, in the
                                 sandbox's own mount namespace only */
    struct jail_limits limits;
    enum jail_net_mode net;
    uid_t host_uid_base; /* inside 0..JAIL_UID_MAPPED-1 map to host_uid_base.. */
    bool as_root;        /* run the payload as sandbox root (no capabilities but in a writable
                            root) instead of user */
    enum seccomp_profile seccomp;
    const char *hostname;
    /* argv[0] is looked up in the sandbox's PATH. No string may live in the process's own argv
     * area: the child overwrites it so /proc/1/cmdline inside shows nothing of the host's.
     * NULL: a sandbox with no command (an agent sandbox): init stays as the agent and commands
     * are started in it for as long as it lives (listen_fd). */
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
     * capped at its own size (limits.disk_bytes is not used then). A payload run as root, or
     * in an agent sandbox every command run as root, keeps JAIL_WRITABLE_ROOT_CAPS. */
    bool writable_root;
    const char *layer_dir; /* holds the disk layer (disk_layer_create) */
    const char *dpkg_dir;  /* lower of /var/lib/dpkg (the host's, with usr_dir = "/usr"), or NULL */
    /* Agent sandboxes: a listening SOCK_SEQPACKET unix socket, bound where only the caller can
     * reach it, on which init serves the control protocol to whoever connects (a restarted
     * daemon included); and an fd init holds for its whole life (the uid range lock, so that the
     * range stays taken while the sandbox lives, whoever else comes and goes). Any value below 3
     * (stdio's) means none, so that a zeroed spec asks for neither. */
    int listen_fd;
    int hold_fd;
};

struct jail {
    char name[80];
    pid_t pid;        /* host pid of the sandbox's init */
    uid_t host_uid_base; /* the sandbox's uid range (its root as the host sees it) */
    int pidfd;        /* pidfd of init: readable when init has exited */
    int control_fd;   /* SOCK_SEQPACKET to init (src/jail/control.h), non-blocking */
    int output_dirfd; /* the sandbox's /output, readable after it dies; -1 if not asked */
    struct cgroup *cgroup;      /* hutch/NAME */
    struct cgroup *init_cgroup; /* hutch/NAME/init in an agent sandbox, else NULL */
    uint64_t setup_deadline_ns; /* CLOCK_MONOTONIC: jail_start_complete fails after it */
    uint64_t start_ns;          /* CLOCK_MONOTONIC when the payload was forked (READY) */
    bool ready;                 /* READY received */
    bool init_reaped;           /* init's status is in init_status */
    int init_status;            /* as waitpid gives it */
    pid_t keeper_pid;           /* the cleanup keeper, or 0 */
    int keeper_fd;              /* its socket: a byte means "done", EOF means "clean up" */
    unsigned unmapped_lowers;   /* writable root: JAIL_UNMAPPED_* of lowers shown without idmap */
};

/* The lowers of a writable root whose filesystem could not be idmapped (idmap.h): their files
 * are owned by nobody inside, so that sandbox root cannot change them. */
enum {
    JAIL_UNMAPPED_TEMPLATE = 1u << 0,
    JAIL_UNMAPPED_USR = 1u << 1,
    JAIL_UNMAPPED_DPKG = 1u << 2,
};

_Static_assert(JAIL_MAX_NAME < sizeof((struct jail *)0)->name, "a name fits in struct jail");

#define JAIL_SETUP_TIMEOUT_MS 30000 /* from jail_start_begin to READY */

/* ---- limits (limits.c) ---- */

/* 0 if value (NULL: absent) is at most max bytes long; else -1 with ENAMETOOLONG and a message
 * naming the field (a printf format) and the limit. Reads at most max + 1 bytes of value. */
int jail_check_length(const char *value, size_t max, err_t *err, const char *field, ...)
    __attribute__((format(printf, 4, 5)));
/* 0 if argv and envp (NULL-terminated; either may be NULL) are within JAIL_MAX_ARG_BYTES and
 * JAIL_MAX_ARGV_ENV_BYTES, and each has at most max_entries entries (0: no count of its own; the
 * byte bound then limits it, as execve does: a sandbox's payload is exec'd straight from the
 * setup child, while a command's SPAWN carries at most JAIL_MAX_ARGS); else -1 with E2BIG and a
 * message naming the entry or the total, and the limit. */
int jail_check_args(const char *const *argv, const char *const *envp, size_t max_entries,
                    err_t *err);

/* In the freshly cloned child: the setup sequence from inside, then the exec of hutch init.
 * Never returns. */
_Noreturn void jail_child_main(const struct jail_spec *spec, int ctl);
/* The name init runs under (its argv[0]): the binary is this process's own, and main() hands a
 * process started as pid 1 under this name to init_main (src/init/init.h). */
#define JAIL_INIT_ARGV0 "hutch-init"
/* An fd of this process's own executable (close-on-exec), opened once; the child execs init
 * through it. -1 if it could not be opened (jail_start_begin then fails). */
int jail_init_exec_fd(void);
/* A program other than the hutch binary itself that links this library (a test) names the hutch
 * binary to run as init. Once, before the first sandbox. */
int jail_use_init_binary(const char *path, err_t *err);
uint64_t jail_now_ns(void);

/* ---- start ---- */

/* Validates the spec, makes the cgroup, clones the child, writes its id maps and tells it to go;
 * returns without waiting for the child. On failure nothing is left behind and err says why. On
 * success the caller waits for control_fd to be readable (until setup_deadline_ns), then calls
 * jail_start_complete. */
int jail_start_begin(const struct jail_spec *spec, struct jail *out, err_t *err);
/* Reads what the child said: 0 when the sandbox is ready, 1 when nothing has arrived yet (call
 * again when control_fd is readable), -1 when setup failed or the deadline passed (err says why,
 * from the child's own report where there is one; the caller then destroys the sandbox). */
int jail_start_complete(struct jail *jail, err_t *err);
/* Both, waiting in between (bounded by the deadline, whatever signals arrive). On failure
 * everything is destroyed. */
int jail_start(const struct jail_spec *spec, struct jail *out, err_t *err);

/* ---- pause ---- */

/* Freezes or thaws every process in the sandbox; returns at once. The freeze completes when the
 * tasks next return to user space: jail_frozen says when (on cgroup2 the cgroup's events fd,
 * cgroup_open_events_fd, wakes a poll on it). */
int jail_freeze_start(struct jail *jail, bool frozen, err_t *err);
int jail_frozen(struct jail *jail, bool *frozen, err_t *err);
/* Freezes and waits until frozen (bounded), or thaws. */
int jail_set_frozen(struct jail *jail, bool frozen, err_t *err);

/* ---- destroy ---- */

/* SIGKILLs every process in the sandbox, frozen or not, and returns. Then pidfd becomes readable
 * once init is gone, and with init the whole pid namespace (the kernel kills and reaps the rest
 * before init's exit completes). */
int jail_kill(struct jail *jail, err_t *err);
/* Collects init's exit status through its pidfd: 1 when init has ended (init_status set, -1 if
 * unknown), 0 while it runs, -1 with err when it died of its own seccomp filter, when its status
 * is unknown, or on error. If the caller's own reaper (waitpid(-1)) took init first, the status
 * comes from the pidfd (PIDFD_INFO_EXIT, Linux 6.15+); an older kernel cannot tell it, which is
 * then the error. */
int jail_reap_init(struct jail *jail, err_t *err);
/* Removes the cgroup once init is reaped: 0, or -1 with errnum EBUSY while exiting processes are
 * still counted (try again after the cgroup's next event or a short timer). */
int jail_remove(struct jail *jail, err_t *err);
/* Closes what is left (fds, the cgroup handle) and tells the keeper whether cleanup is done.
 * Idempotent. */
void jail_close(struct jail *jail);
/* kill, reap, remove, close, waiting as needed (bounded). Idempotent. */
int jail_destroy(struct jail *jail, err_t *err);
/* After jail_destroy: waits for the keeper, which exits on its own once told. Separate so that
 * the caller can do its own work (print the result) meanwhile. Idempotent. */
void jail_reap(struct jail *jail);
