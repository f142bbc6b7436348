/* The daemon's live sandboxes: each one's engine handle (struct jail), its state as the store
 * keeps it, its deadline, and the steps of its lifecycle, each driven by the loop.
 *
 *   sbx_create()   a disk layer (mke2fs, waited for by its pidfd), a uid range, init's socket,
 *                  jail_start_begin; done() is called once init said READY (or setup failed:
 *                  everything is undone, the row failed)
 *   sbx_kill()     jail_kill, then (pidfd readable) reap, remove the cgroup (retrying while it is
 *                  busy), drop the record, the socket and the disk layer; the row killed
 *   sbx_pause()    freeze, done() once every task is frozen; sbx_resume() thaws
 *   sbx_pause_cold() without memory: the row paused and cold first, then every process killed
 *                  as for a kill, but the disk layer kept; done() once init is gone
 *   sbx_boot()     a cold-paused sandbox started again on its disk layer (same id, token, env
 *                  vars); done() once init said READY (a failed boot leaves it cold-paused)
 *   sbx_reopen_all() after a restart: every live row's sandbox reopened by its record, or marked
 *                  failed with the reason (the most of a thousand from the loop: below)
 *
 * The store is the truth for a sandbox's fields; struct sbx holds what only a running daemon
 * has (fds, handles, pending steps). A sandbox's memory is freed once its handles are closed. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "jail/jail.h"
#include "jail/userns.h"
#include "sandbox/state.h"
#include "serve/serve.h"

struct agent_pending;
struct agent_sub;
struct scmd;
struct sbx_metrics;
struct layer_make;
struct swatch;
struct interp_state;

/* A sandbox's resources unless its create asks for others (hutch's cpuCount, memoryMB,
 * diskSizeMB). */
#define SBX_CPU_COUNT 2
#define SBX_MEMORY_MB 512
#define SBX_DISK_MB   1024
#define SBX_PIDS      4096 /* every sandbox's pids limit */
/* Every sandbox's seccomp profile; every sandbox has a writable root (jail_spec). */
#define SBX_SECCOMP_PROFILE SECCOMP_PROFILE_DEFAULT

typedef void (*sbx_done_fn)(struct sbx *sb, int rc, const char *message, void *user);

struct sbx {
    struct serve *d;
    char id[STORE_ID_MAX + 1];
    enum sandbox_state state;
    bool auto_pause;
    bool auto_pause_cold; /* with auto_pause: the deadline's pause is without memory */
    bool auto_resume;     /* its next envd request resumes it when paused */
    int64_t deadline_ms;
    uint64_t paused_at_ns; /* jail_now_ns when it froze; 0 when not known (reopened paused) */
    char envd_token[STORE_TOKEN_MAX + 1];
    struct jail jail;
    bool have_jail;
    struct uid_range uids;
    /* while creating: its disk layer being made (layer_make.h; NULL when none is), and the
     * limits the start after it needs */
    struct layer_make *layer_make;
    uint32_t memory_mb, cpu_count, disk_mb;
    uv_poll_t ctl_poll;   /* control_fd: READY while creating, then init's messages */
    uv_poll_t pidfd_poll; /* init's pidfd, while killing */
    uv_timer_t deadline_timer;
    uv_timer_t step_timer; /* setup deadline, cgroup removal retries, freeze polling */
    unsigned open_handles;
    bool ctl_polling, pidfd_polling, killing, gone;
    bool adopt_on_resume;    /* reopened paused: its commands are attached once it runs */
    bool code_template;      /* reopened, of code-interpreter-v1: python kernels from the host's
                                zygote, as at its create (interp.h) */
    bool pooled;             /* in a warm pool (pool.c): nobody's yet, hidden from every call */
    unsigned char pool_kind; /* which pool (pool.c), while pooled */
    bool cold;               /* paused without memory: no jail, its disk layer on disk */
    bool cold_stopping;     /* its processes are being killed for a cold pause (the kill's steps) */
    bool booting;           /* cold-paused, being started again (the create's steps) */
    unsigned polls_closing; /* ctl_poll, pidfd_poll closed after a cold pause, not yet done */
    struct sbx_metrics *metrics;           /* metrics.c */
    unsigned step_count;                   /* removal retries, freeze polls */
    char end_reason[STORE_REASON_MAX + 1]; /* why it is being killed */
    /* the one lifecycle step in progress and who waits for it */
    sbx_done_fn done;
    void *done_user;
    /* agent.c */
    uint32_t next_request;
    struct agent_pending *pending;
    struct agent_sub *subs;
    struct scmd *cmds;       /* commands.c */
    struct swatch *watchers; /* envd_watch.c: CreateWatcher's */
    unsigned n_watchers;
    struct interp_state *interp; /* interp.c: its code contexts, made on first use */
    struct sbx *next;
};

/* What sbx_create makes: the row is inserted (creating) before the start. */
int sbx_create(struct serve *d, const struct store_sandbox *row, sbx_done_fn done, void *user,
               err_t *err);
/* Kills a live sandbox; done (may be NULL) when it is gone. reason goes into the row. */
void sbx_kill(struct sbx *sb, const char *reason, sbx_done_fn done, void *user);
int sbx_pause(struct sbx *sb, sbx_done_fn done, void *user, err_t *err);
int sbx_resume(struct sbx *sb, err_t *err);
/* A cold pause: EALREADY when paused already, EBUSY when it cannot be paused now. */
int sbx_pause_cold(struct sbx *sb, sbx_done_fn done, void *user, err_t *err);
/* A sandbox paused with its memory loses it: its processes killed, as by a cold pause (a
 * connect that reboots it, then sbx_boot). EBUSY when it is not so paused, or busy. */
int sbx_drop_memory(struct sbx *sb, sbx_done_fn done, void *user, err_t *err);
/* Boots a cold-paused sandbox; done(rc) once it runs (0) or the boot failed (-1: it stays
 * cold-paused). EINVAL when it is not cold-paused, EBUSY when a step is in flight. */
int sbx_boot(struct sbx *sb, sbx_done_fn done, void *user, err_t *err);
/* Moves the deadline (ms since the epoch) and re-arms its timer; kept in the store. */
int sbx_set_deadline(struct sbx *sb, int64_t deadline_ms, err_t *err);
struct sbx *sbx_find(struct serve *d, const char *id);
/* After a restart: reopens every live row's sandbox, the first SBX_REOPEN_FIRST now (returns how
 * many of them are live again), the rest from the loop, SBX_REOPEN_BATCH a turn, so that the
 * daemon answers while it reopens a thousand; sbx_find reopens a sandbox not reached yet at once.
 * then(d) is called once all are reopened (before this returns when none is left for the loop):
 * the daemon's background work that would compete with the reopen for the CPUs waits for it.
 * sbx_reopen_rest reopens all of the rest now (for a caller that must see every sandbox). */
#define SBX_REOPEN_FIRST 64
#define SBX_REOPEN_BATCH 32
size_t sbx_reopen_all(struct serve *d, void (*then)(struct serve *d));
void sbx_reopen_rest(struct serve *d);
/* The daemon stops: handles closed, sandboxes left running. */
void sbx_detach_all(struct serve *d);
int64_t sbx_wall_ms(void);
