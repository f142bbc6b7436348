/* The daemon's live sandboxes and the steps of their lifecycle (sandbox.h). */
#include "serve/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "jail/disk_layer.h"
#include "jail/record.h"
#include "jail/writable_root.h"
#include "serve/agent.h"
#include "serve/commands.h"
#include "serve/disk_pool.h"
#include "serve/envd_watch.h"
#include "serve/interp.h"
#include "serve/layer_make.h"
#include "serve/metrics.h"
#include "util/strfmt.h"

#define SBX_SOCKET_SUFFIX   ".sock"
#define SBX_REMOVE_RETRY_MS 5
#define SBX_REMOVE_TRIES    2000 /* 10 s of a cgroup that stays busy */
#define SBX_FREEZE_POLL_MS  1
#define SBX_FREEZE_MAX_MS   5000

/* Init's environment: commands get theirs from the daemon with each spawn. */
static const char *const init_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};

int64_t sbx_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct sbx *find_open(struct serve *d, const char *id)
{
    for (struct sbx *sb = d->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0)
            return sb;
    return NULL;
}

static struct sbx *reopen_now(struct serve *d, const char *id);

struct sbx *sbx_find(struct serve *d, const char *id)
{
    struct sbx *sb = find_open(d, id);
    return sb ? sb : reopen_now(d, id); /* one not reopened yet after a restart: now */
}

static void unlink_from_list(struct sbx *sb)
{
    for (struct sbx **p = &sb->d->sandboxes; *p; p = &(*p)->next)
        if (*p == sb) {
            *p = sb->next;
            sb->d->n_sandboxes--;
            return;
        }
}

static void handle_closed(uv_handle_t *h)
{
    struct sbx *sb = h->data;
    if (--sb->open_handles == 0)
        free(sb);
}

/* ---------- the disk layer, made while the loop goes on ---------- */

/* A creation that ends before its layer is made (killed, the daemon stopping): mke2fs killed,
 * its temporary image removed. */
static void layer_wait_end(struct sbx *sb)
{
    layer_make_cancel(sb->layer_make);
    sb->layer_make = NULL;
}

/* The end of a sandbox in this daemon: out of the list, handles closed, memory freed after. */
static void sbx_release(struct sbx *sb)
{
    if (sb->gone)
        return;
    sb->gone = true;
    layer_wait_end(sb);
    unlink_from_list(sb);
    metrics_free(sb);
    agent_fail_all(sb, "the sandbox is gone");
    envd_watch_release_all(sb);
    interp_release_all(sb, sb->killing ? "the sandbox was killed" : "the daemon is stopping");
    scmd_release_all(sb, sb->killing ? "the sandbox was killed" : "the daemon is stopping");
    uv_close((uv_handle_t *)&sb->deadline_timer, handle_closed);
    uv_close((uv_handle_t *)&sb->step_timer, handle_closed);
    /* initialized, and not closing already (after a cold pause) */
    if (sb->ctl_poll.data == sb && !uv_is_closing((uv_handle_t *)&sb->ctl_poll))
        uv_close((uv_handle_t *)&sb->ctl_poll, handle_closed);
    if (sb->pidfd_poll.data == sb && !uv_is_closing((uv_handle_t *)&sb->pidfd_poll))
        uv_close((uv_handle_t *)&sb->pidfd_poll, handle_closed);
    if (sb->have_jail)
        jail_close(&sb->jail);
    sb->have_jail = false;
    uid_range_release(&sb->uids);
}

static struct sbx *sbx_new(struct serve *d, const char *id)
{
    struct sbx *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->d = d;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    sb->uids.lock_fd = -1;
    sb->next_request = 1;
    uv_timer_init(d->loop, &sb->deadline_timer);
    uv_timer_init(d->loop, &sb->step_timer);
    sb->deadline_timer.data = sb->step_timer.data = sb;
    sb->open_handles = 2;
    sb->next = d->sandboxes;
    d->sandboxes = sb;
    d->n_sandboxes++;
    return sb;
}

static void finish_step(struct sbx *sb, int rc, const char *message)
{
    sbx_done_fn done = sb->done;
    void *user = sb->done_user;
    sb->done = NULL;
    sb->done_user = NULL;
    if (done)
        done(sb, rc, message, user);
}

static int path_of(const struct serve *d, const char *dir, const char *id, const char *suffix,
                   char *out, size_t size, err_t *err)
{
    if (strfmt(out, size, "%s/%s%s", dir, id, suffix) < 0)
        return err_set(err, ENAMETOOLONG, "%s/%s%s: path too long", dir, id, suffix);
    (void)d;
    return 0;
}

/* What is left of a sandbox on the host once its processes are gone: its record, its init's
 * socket, its disk layer. Errors are logged: the row says how it ended regardless. */
/* The run directory's part of it: what a pause without memory removes too. */
static void remove_run_files(struct serve *d, const char *id)
{
    err_t err;
    char path[PATH_MAX];
    if (jail_record_remove(d->run_fd, id, &err) < 0 && err.errnum != ENOENT)
        fprintf(stderr, "hutch serve: %s: %s\n", id, err.msg);
    if (path_of(d, d->run_dir, id, SBX_SOCKET_SUFFIX, path, sizeof path, &err) == 0)
        unlink(path);
    scmd_record_remove_all(d, id);
}

static void remove_leftovers(struct serve *d, const char *id)
{
    err_t err;
    char path[PATH_MAX];
    remove_run_files(d, id);
    if (path_of(d, d->sandboxes_dir, id, "", path, sizeof path, &err) == 0 &&
        disk_layer_remove(path, &err) < 0 && err.errnum != ENOENT)
        fprintf(stderr, "hutch serve: %s: %s\n", id, err.msg);
}

/* ---------- the deadline ---------- */

static void on_deadline(uv_timer_t *t)
{
    struct sbx *sb = t->data;
    if (sb->killing || sb->state != SANDBOX_RUNNING)
        return;
    err_t err;
    if (sb->auto_pause) {
        if ((sb->auto_pause_cold ? sbx_pause_cold(sb, NULL, NULL, &err)
                                 : sbx_pause(sb, NULL, NULL, &err)) == 0)
            return;
        fprintf(stderr, "hutch serve: %s: pause at the deadline: %s\n", sb->id, err.msg);
    }
    sbx_kill(sb, "timeout: its deadline passed", NULL, NULL);
}

static void arm_deadline(struct sbx *sb)
{
    uv_timer_stop(&sb->deadline_timer);
    if (sb->state != SANDBOX_RUNNING)
        return;
    int64_t left = sb->deadline_ms - sbx_wall_ms();
    uv_timer_start(&sb->deadline_timer, on_deadline, left > 0 ? (uint64_t)left : 0, 0);
}

int sbx_set_deadline(struct sbx *sb, int64_t deadline_ms, err_t *err)
{
    if (store_sandbox_set_deadline(sb->d->store, sb->id, deadline_ms, err) < 0)
        return -1;
    sb->deadline_ms = deadline_ms;
    arm_deadline(sb);
    return 0;
}

/* ---------- kill ---------- */

static void cold_stop_finish(struct sbx *sb);

static void kill_finish(struct sbx *sb)
{
    struct serve *d = sb->d;
    err_t err;
    if (sb->have_jail)
        jail_close(&sb->jail);
    sb->have_jail = false;
    if (sb->cold_stopping) {
        cold_stop_finish(sb);
        return;
    }
    remove_leftovers(d, sb->id);
    /* a warm pool's was never anybody's: its row, creating, can only fail (with the reason) */
    enum sandbox_state to =
        sb->state == SANDBOX_CREATING || sb->pooled ? SANDBOX_FAILED : SANDBOX_KILLED;
    /* the event says why too: the log (GET /sandboxes/{id}/logs) shows it */
    json_t *why = json_pack("{s:s}", "reason", sb->end_reason);
    char *detail = why ? json_dumps(why, JSON_COMPACT) : NULL;
    json_decref(why);
    if (store_sandbox_transition(d->store, sb->id, SANDBOX_STATES_LIVE, to, sb->end_reason,
                                 to == SANDBOX_FAILED ? "failed" : "killed", detail, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", sb->id, err.msg);
    free(detail);
    sb->state = to;
    finish_step(sb, 0, sb->end_reason);
    sbx_release(sb);
}

static void try_remove(uv_timer_t *t);

/* The cgroup goes once its last member has left; until then, a retry on a short timer. */
static void remove_step(struct sbx *sb)
{
    err_t err = {0};
    if (jail_remove(&sb->jail, &err) < 0 && err.errnum == EBUSY &&
        ++sb->step_count < SBX_REMOVE_TRIES) {
        uv_timer_start(&sb->step_timer, try_remove, SBX_REMOVE_RETRY_MS, 0);
        return;
    }
    if (err.errnum)
        fprintf(stderr, "hutch serve: %s: remove: %s\n", sb->id, err.msg);
    kill_finish(sb);
}

static void try_remove(uv_timer_t *t)
{
    remove_step(t->data);
}

static void on_pidfd(uv_poll_t *p, int status, int events)
{
    struct sbx *sb = p->data;
    err_t err;
    int rc = jail_reap_init(&sb->jail, &err);
    if (rc == 0)
        return; /* not yet */
    uv_poll_stop(p);
    sb->pidfd_polling = false;
    if (rc < 0)
        fprintf(stderr, "hutch serve: %s: init: %s\n", sb->id, err.msg);
    sb->step_count = 0;
    remove_step(sb);
}

static void stop_processes(struct sbx *sb);

void sbx_kill(struct sbx *sb, const char *reason, sbx_done_fn done, void *user)
{
    if (sb->killing && sb->cold_stopping) {
        /* a cold pause's kill is under way: it ends as a kill, everything removed */
        sb->cold_stopping = false;
        finish_step(sb, -1, reason ? reason : "killed");
        sb->done = done;
        sb->done_user = user;
        strfmt_text_append(sb->end_reason, sizeof sb->end_reason, "%s", reason ? reason : "killed");
        return;
    }
    if (sb->killing) {
        if (done)
            done(sb, -1, "it is being killed already", user);
        return;
    }
    if (sb->done) /* a step in flight (a create, a boot, a freeze) ends here */
        finish_step(sb, -1, reason ? reason : "killed");
    sb->booting = false;
    sb->killing = true;
    layer_wait_end(sb);
    sb->done = done;
    sb->done_user = user;
    strfmt_text_append(sb->end_reason, sizeof sb->end_reason, "%s", reason ? reason : "killed");
    stop_processes(sb);
}

/* Every process of the sandbox killed, then init reaped and the cgroup removed, each step when
 * its fd or timer says so; kill_finish at the end. */
static void stop_processes(struct sbx *sb)
{
    metrics_stop(sb);
    uv_timer_stop(&sb->deadline_timer);
    uv_timer_stop(&sb->step_timer);
    if (sb->ctl_polling) {
        uv_poll_stop(&sb->ctl_poll);
        sb->ctl_polling = false;
    }
    agent_fail_all(sb, "the sandbox is being killed");
    if (!sb->have_jail) {
        kill_finish(sb);
        return;
    }
    err_t err;
    if (jail_kill(&sb->jail, &err) < 0)
        fprintf(stderr, "hutch serve: %s: kill: %s\n", sb->id, err.msg);
    sb->step_count = 0;
    if (sb->jail.pidfd < 0) {
        remove_step(sb);
        return;
    }
    if (uv_poll_init(sb->d->loop, &sb->pidfd_poll, sb->jail.pidfd) < 0) {
        remove_step(sb); /* jail_remove waits for nothing: EBUSY until init is gone */
        return;
    }
    sb->pidfd_poll.data = sb;
    sb->open_handles++;
    sb->pidfd_polling = true;
    uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
}

/* ---------- create ---------- */

static void on_setup_deadline(uv_timer_t *t);

static void on_ctl_creating(uv_poll_t *p, int status, int events)
{
    struct sbx *sb = p->data;
    err_t err;
    int rc = jail_start_complete(&sb->jail, &err);
    if (rc == 1)
        return;
    uv_poll_stop(p);
    sb->ctl_polling = false;
    uv_timer_stop(&sb->step_timer);
    char sock[STORE_ID_MAX + sizeof SBX_SOCKET_SUFFIX];
    snprintf(sock, sizeof sock, "%s%s", sb->id, SBX_SOCKET_SUFFIX);
    bool boot = sb->booting;
    /* a warm pool's stays creating in the store until a create takes it (pool.h): no list has
     * it, and a restarted daemon kills it as it kills any half-made sandbox */
    if (rc == 0 &&
        jail_record_save(&sb->jail, sb->uids.host_base, sb->d->run_fd, sock, &err) == 0 &&
        (sb->pooled ||
         store_sandbox_transition(sb->d->store, sb->id,
                                  SANDBOX_STATE_BIT(boot ? SANDBOX_PAUSED : SANDBOX_CREATING),
                                  SANDBOX_RUNNING, NULL, boot ? "resumed" : "started",
                                  boot ? "{\"memory\":false}" : NULL, &err) == 0)) {
        sb->state = SANDBOX_RUNNING;
        sb->cold = sb->booting = false;
        /* init holds the uid range from now on (hold_fd): the daemon's copy may go */
        uid_range_release(&sb->uids);
        agent_attach(sb);
        arm_deadline(sb);
        metrics_start(sb);
        finish_step(sb, 0, NULL);
        return;
    }
    char why[STORE_REASON_MAX + 1] = "";
    strfmt_text_append(why, sizeof why, "%s failed: %s", boot ? "boot" : "setup", err.msg);
    if (boot) { /* what began is undone; the sandbox stays paused without memory */
        finish_step(sb, -1, why);
        sb->booting = false;
        sb->cold_stopping = sb->killing = true;
        stop_processes(sb);
        return;
    }
    sbx_kill(sb, why, NULL, NULL);
}

static void on_setup_deadline(uv_timer_t *t)
{
    struct sbx *sb = t->data;
    if (sb->ctl_polling)
        on_ctl_creating(&sb->ctl_poll, 0, UV_READABLE); /* jail_start_complete: past the deadline */
}

static int make_listener(struct serve *d, const char *id, err_t *err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (path_of(d, d->run_dir, id, SBX_SOCKET_SUFFIX, a.sun_path, sizeof a.sun_path, err) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(err, errno, "socket");
    unlink(a.sun_path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(a.sun_path, 0600) < 0 ||
        listen(fd, 16) < 0) {
        err_set(err, errno, "%s", a.sun_path);
        close(fd);
        return -1;
    }
    return fd;
}

/* The start once its disk layer exists: a uid range, init's socket, jail_start_begin; READY is
 * waited for on the control fd. */
static int start_jail(struct sbx *sb, err_t *err)
{
    struct serve *d = sb->d;
    char layer[PATH_MAX];
    if (path_of(d, d->sandboxes_dir, sb->id, "", layer, sizeof layer, err) < 0 ||
        uid_range_acquire(d->lock_path, &sb->uids, err) < 0)
        return -1;
    int listen_fd = make_listener(d, sb->id, err);
    if (listen_fd < 0) {
        uid_range_release(&sb->uids);
        return -1;
    }
    struct jail_spec spec = {
        .cgroups = d->cgroups,
        .name = sb->id,
        .template_dir = d->tpl.rootfs,
        .usr_dir = "/usr",
        .stage_dir = d->tpl.stage,
        .limits = {.memory_bytes = (uint64_t)sb->memory_mb << 20,
                   .pids = SBX_PIDS,
                   .cpu_millis = (uint64_t)sb->cpu_count * 1000,
                   .disk_bytes = (uint64_t)sb->disk_mb << 20},
        .net = JAIL_NET_NONE,
        .host_uid_base = sb->uids.host_base,
        .seccomp = SBX_SECCOMP_PROFILE,
        .hostname = "e2b",
        .envp = init_env,
        .stdin_fd = d->null_fd,
        .stdout_fd = d->null_fd,
        .stderr_fd = d->null_fd,
        .keep_fd = -1,
        .listen_fd = listen_fd,
        .hold_fd = sb->uids.lock_fd,
        .writable_root = true,
        .layer_dir = layer,
        .dpkg_dir = access("/var/lib/dpkg/status", F_OK) == 0 ? "/var/lib/dpkg" : NULL,
        .mounts = d->mounts, /* sudo, the kernels, their stub (serve.c) */
        .n_mounts = d->n_mounts,
    };
    int rc = jail_start_begin(&spec, &sb->jail, err);
    close(listen_fd);
    if (rc < 0)
        return -1;
    sb->have_jail = true;
    static unsigned unmapped_said; /* once a daemon: it is the host's, not the sandbox's */
    if (sb->jail.unmapped_lowers & ~unmapped_said) {
        unmapped_said |= sb->jail.unmapped_lowers;
        char note[256];
        fprintf(stderr, "hutch serve: %s\n",
                writable_root_unmapped_note(sb->jail.unmapped_lowers, note, sizeof note));
    }
    if (uv_poll_init(d->loop, &sb->ctl_poll, sb->jail.control_fd) < 0)
        return err_set(err, EINVAL, "poll on the control fd");
    sb->ctl_poll.data = sb;
    sb->open_handles++;
    sb->ctl_polling = true;
    uv_poll_start(&sb->ctl_poll, UV_READABLE, on_ctl_creating);
    uint64_t now = jail_now_ns();
    uint64_t left_ms =
        sb->jail.setup_deadline_ns > now ? (sb->jail.setup_deadline_ns - now) / 1000000u + 1 : 0;
    uv_timer_start(&sb->step_timer, on_setup_deadline, left_ms, 0);
    return 0;
}

static void on_layer_made(void *user, const err_t *made)
{
    struct sbx *sb = user;
    sb->layer_make = NULL;
    err_t err;
    if (made)
        err = *made;
    else if (start_jail(sb, &err) == 0)
        return;
    char why[STORE_REASON_MAX + 1] = "";
    strfmt_text_append(why, sizeof why, "setup failed: %s", err.msg);
    sbx_kill(sb, why, NULL, NULL); /* done() hears of it; the row is failed */
}

/* A first start takes a disk layer made ahead (disk_pool.h), or makes one first: mke2fs runs
 * while the loop goes on. */
static int start(struct sbx *sb, const struct store_sandbox *row, err_t *err)
{
    struct serve *d = sb->d;
    char layer[PATH_MAX];
    sb->memory_mb = row->memory_mb;
    sb->cpu_count = row->cpu_count;
    sb->disk_mb = row->disk_mb;
    if (path_of(d, d->sandboxes_dir, sb->id, "", layer, sizeof layer, err) < 0)
        return -1;
    if (disk_layer_exists(layer))
        return start_jail(sb, err);
    err_t no_spare;
    if (disk_pool_take(d, (uint64_t)row->disk_mb << 20, layer, &no_spare) == 0)
        return start_jail(sb, err);
    if (no_spare.errnum != ENOENT)
        fprintf(stderr, "hutch serve: %s: a spare disk layer: %s; making its own\n", sb->id,
                no_spare.msg);
    sb->layer_make =
        layer_make_begin(d->loop, layer, (uint64_t)row->disk_mb << 20, on_layer_made, sb, err);
    return sb->layer_make ? 0 : -1;
}

int sbx_create(struct serve *d, const struct store_sandbox *row, sbx_done_fn done, void *user,
               err_t *err)
{
    if (sbx_find(d, row->id))
        return err_set(err, EEXIST, "sandbox %s exists", row->id);
    if (store_sandbox_insert(d->store, row, err) < 0)
        return -1;
    struct sbx *sb = sbx_new(d, row->id);
    if (!sb) {
        store_sandbox_transition(d->store, row->id, SANDBOX_STATES_LIVE, SANDBOX_FAILED,
                                 "out of memory", "failed", NULL, err);
        return err_set(err, ENOMEM, "sandbox %s", row->id);
    }
    sb->state = SANDBOX_CREATING;
    sb->auto_pause = row->auto_pause;
    sb->auto_pause_cold = row->auto_pause_cold;
    sb->auto_resume = row->auto_resume;
    sb->deadline_ms = row->deadline_ms;
    snprintf(sb->envd_token, sizeof sb->envd_token, "%s", row->envd_token);
    if (start(sb, row, err) < 0) {
        err_t ignored;
        char why[STORE_REASON_MAX + 1] = "";
        strfmt_text_append(why, sizeof why, "setup failed: %s", err->msg);
        if (sb->have_jail) { /* begun, then the loop refused its fd: kill what began */
            sbx_kill(sb, why, NULL, NULL);
            return -1;
        }
        remove_leftovers(d, sb->id);
        store_sandbox_transition(d->store, sb->id, SANDBOX_STATES_LIVE, SANDBOX_FAILED, why,
                                 "failed", NULL, &ignored);
        sbx_release(sb);
        return -1;
    }
    sb->done = done;
    sb->done_user = user;
    return 0;
}

/* ---------- pause and resume ---------- */

static void freeze_poll(uv_timer_t *t)
{
    struct sbx *sb = t->data;
    err_t err;
    bool frozen = false;
    if (jail_frozen(&sb->jail, &frozen, &err) < 0) {
        finish_step(sb, -1, err.msg);
        return;
    }
    if (!frozen) {
        if (++sb->step_count * SBX_FREEZE_POLL_MS < SBX_FREEZE_MAX_MS) {
            uv_timer_start(&sb->step_timer, freeze_poll, SBX_FREEZE_POLL_MS, 0);
            return;
        }
        jail_freeze_start(&sb->jail, false, &err);
        finish_step(sb, -1, "its processes did not freeze in time; it runs on");
        return;
    }
    if (store_sandbox_transition(sb->d->store, sb->id, SANDBOX_STATE_BIT(SANDBOX_RUNNING),
                                 SANDBOX_PAUSED, NULL, "paused", NULL, &err) < 0) {
        jail_freeze_start(&sb->jail, false, &err);
        finish_step(sb, -1, err.msg);
        return;
    }
    sb->state = SANDBOX_PAUSED;
    sb->paused_at_ns = jail_now_ns();
    scmd_pause_all(sb);
    uv_timer_stop(&sb->deadline_timer);
    metrics_stop(sb);
    finish_step(sb, 0, NULL);
}

/* Whether a pause (with or without memory) may begin: running, and no step in flight. */
static int pausable(const struct sbx *sb, err_t *err)
{
    if (sb->state == SANDBOX_PAUSED)
        return err_set(err, EALREADY, "sandbox %s is already paused", sb->id);
    if (sb->state != SANDBOX_RUNNING || sb->killing || sb->done)
        return err_set(err, EBUSY, "sandbox %s is %s", sb->id,
                       sb->killing ? "being killed"
                       : sb->done  ? "busy"
                                   : sandbox_state_name(sb->state));
    return 0;
}

int sbx_pause(struct sbx *sb, sbx_done_fn done, void *user, err_t *err)
{
    if (pausable(sb, err) < 0)
        return -1;
    if (jail_freeze_start(&sb->jail, true, err) < 0)
        return -1;
    sb->done = done;
    sb->done_user = user;
    sb->step_count = 0;
    uv_timer_start(&sb->step_timer, freeze_poll, 0, 0);
    return 0;
}

int sbx_resume(struct sbx *sb, err_t *err)
{
    if (sb->state != SANDBOX_PAUSED || sb->killing)
        return err_set(err, EINVAL, "sandbox %s is not paused", sb->id);
    if (sb->cold || sb->booting)
        return err_set(err, EINVAL, "sandbox %s was paused without its memory: it boots again",
                       sb->id);
    if (jail_freeze_start(&sb->jail, false, err) < 0 ||
        store_sandbox_transition(sb->d->store, sb->id, SANDBOX_STATE_BIT(SANDBOX_PAUSED),
                                 SANDBOX_RUNNING, NULL, "resumed", NULL, err) < 0)
        return -1;
    sb->state = SANDBOX_RUNNING;
    if (sb->paused_at_ns)
        scmd_resume_all(sb, jail_now_ns() - sb->paused_at_ns);
    sb->paused_at_ns = 0;
    if (sb->adopt_on_resume) {
        sb->adopt_on_resume = false;
        scmd_adopt_all(sb);
    }
    arm_deadline(sb);
    metrics_start(sb);
    return 0;
}

/* ---------- pause without memory, and the boot after it ---------- */

static void poll_closed(uv_handle_t *h)
{
    struct sbx *sb = h->data;
    h->data = NULL; /* uninitialized again: the next start makes it anew */
    sb->polls_closing--;
    if (--sb->open_handles == 0)
        free(sb);
}

/* The processes are gone and the cgroup removed: what stays is the disk layer. The polls of
 * init's fds are closed, so that a boot can make them again for the next init's. */
static void cold_stop_finish(struct sbx *sb)
{
    sb->cold_stopping = sb->killing = false;
    sb->end_reason[0] = '\0';
    scmd_release_all(sb, "the sandbox was paused without its memory");
    remove_run_files(sb->d, sb->id); /* after the commands: their records go with them */
    uv_handle_t *polls[] = {(uv_handle_t *)&sb->ctl_poll, (uv_handle_t *)&sb->pidfd_poll};
    for (size_t i = 0; i < 2; i++)
        if (polls[i]->data == sb && !uv_is_closing(polls[i])) {
            sb->polls_closing++;
            uv_close(polls[i], poll_closed);
        }
    sb->ctl_polling = sb->pidfd_polling = false;
    uid_range_release(&sb->uids);
    finish_step(sb, 0, NULL);
}

/* Its processes killed, its disk layer kept: from running (a cold pause) or paused. */
static int go_cold(struct sbx *sb, sbx_done_fn done, void *user, err_t *err)
{
    /* The row first: a daemon killed half-way finds it paused without memory and finishes the
     * job (sbx_reopen_all), where a row still running would be marked failed and its disk
     * layer, the files the pause is there to keep, removed. */
    if ((sb->state == SANDBOX_PAUSED ? store_sandbox_drop_memory(sb->d->store, sb->id, err)
                                     : store_sandbox_pause_cold(sb->d->store, sb->id, err)) < 0)
        return -1;
    sb->state = SANDBOX_PAUSED;
    sb->cold = true;
    sb->adopt_on_resume = false;
    sb->done = done;
    sb->done_user = user;
    sb->cold_stopping = sb->killing = true;
    stop_processes(sb);
    return 0;
}

int sbx_pause_cold(struct sbx *sb, sbx_done_fn done, void *user, err_t *err)
{
    if (pausable(sb, err) < 0)
        return -1;
    return go_cold(sb, done, user, err);
}

int sbx_drop_memory(struct sbx *sb, sbx_done_fn done, void *user, err_t *err)
{
    if (sb->state != SANDBOX_PAUSED || sb->cold || sb->booting || sb->killing || sb->done)
        return err_set(err, EBUSY, "sandbox %s is not paused with its memory now", sb->id);
    return go_cold(sb, done, user, err);
}

static void boot_later(uv_timer_t *t);

/* The boot proper, once the last init's polls are closed: on the disk layer the sandbox left,
 * never a new one in its place. */
static int boot_now(struct sbx *sb, err_t *err)
{
    char layer[PATH_MAX];
    if (path_of(sb->d, sb->d->sandboxes_dir, sb->id, "", layer, sizeof layer, err) < 0)
        return -1;
    if (!disk_layer_exists(layer))
        return err_set(err, ENOENT, "sandbox %s: its disk layer is gone", sb->id);
    if (start_jail(sb, err) == 0)
        return 0;
    if (sb->have_jail) { /* begun, then the loop refused its fd: undone, it stays cold */
        sb->cold_stopping = sb->killing = true;
        stop_processes(sb);
    }
    return -1;
}

static void boot_later(uv_timer_t *t)
{
    struct sbx *sb = t->data;
    err_t err;
    if (sb->polls_closing) {
        uv_timer_start(&sb->step_timer, boot_later, 1, 0);
        return;
    }
    if (boot_now(sb, &err) < 0) {
        sb->booting = false;
        finish_step(sb, -1, err.msg);
    }
}

int sbx_boot(struct sbx *sb, sbx_done_fn done, void *user, err_t *err)
{
    if (sb->cold_stopping || sb->booting || sb->done)
        return err_set(err, EBUSY, "sandbox %s is %s", sb->id,
                       sb->cold_stopping ? "being paused" : "busy");
    if (sb->state != SANDBOX_PAUSED || !sb->cold || sb->killing)
        return err_set(err, EINVAL, "sandbox %s is not paused without memory", sb->id);
    sb->booting = true;
    if (sb->polls_closing) { /* the last init's polls close at the end of this loop turn */
        sb->done = done;
        sb->done_user = user;
        uv_timer_start(&sb->step_timer, boot_later, 1, 0);
        return 0;
    }
    if (boot_now(sb, err) < 0) {
        sb->booting = false;
        return -1;
    }
    sb->done = done;
    sb->done_user = user;
    return 0;
}

/* ---------- after a restart ---------- */

struct live_row {
    bool taken; /* reopened (or tried), from the loop or for a request */
    char id[STORE_ID_MAX + 1];
    enum sandbox_state state;
    bool auto_pause, auto_pause_cold, auto_resume, cold, code_template;
    unsigned cpu_count, memory_mb, disk_mb;
    int64_t deadline_ms;
    char envd_token[STORE_TOKEN_MAX + 1];
};

struct live_rows {
    struct live_row *rows;
    size_t n, cap;
};

static void collect_row(const struct store_sandbox *row, void *ctx)
{
    struct live_rows *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct live_row *grown = realloc(l->rows, cap * sizeof *grown);
        if (!grown)
            return;
        l->rows = grown;
        l->cap = cap;
    }
    struct live_row *r = &l->rows[l->n++];
    snprintf(r->id, sizeof r->id, "%s", row->id);
    r->state = row->state;
    r->auto_pause = row->auto_pause;
    r->auto_pause_cold = row->auto_pause_cold;
    r->auto_resume = row->auto_resume;
    r->cold = row->cold;
    r->code_template = strcmp(row->alias, "code-interpreter-v1") == 0;
    r->cpu_count = row->cpu_count;
    r->memory_mb = row->memory_mb;
    r->disk_mb = row->disk_mb;
    r->deadline_ms = row->deadline_ms;
    snprintf(r->envd_token, sizeof r->envd_token, "%s", row->envd_token);
}

static void mark_failed(struct serve *d, const char *id, const char *why)
{
    err_t err;
    if (cgroup_remove_by_name(d->cgroups, id, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", id, err.msg);
    remove_leftovers(d, id);
    if (store_sandbox_transition(d->store, id, SANDBOX_STATES_LIVE, SANDBOX_FAILED, why, "failed",
                                 NULL, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", id, err.msg);
}

/* A sandbox paused without memory has no init to reopen: what a daemon killed half-way through
 * its pause (or its boot) left running is killed, and its record and socket go; its disk layer
 * stays for the boot. */
static bool reopen_cold(struct serve *d, const struct live_row *r)
{
    err_t err;
    if (cgroup_remove_by_name(d->cgroups, r->id, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", r->id, err.msg);
    remove_run_files(d, r->id);
    struct sbx *sb = sbx_new(d, r->id);
    if (!sb)
        return false;
    sb->state = SANDBOX_PAUSED;
    sb->cold = true;
    sb->auto_pause = r->auto_pause;
    sb->auto_pause_cold = r->auto_pause_cold;
    sb->auto_resume = r->auto_resume;
    sb->deadline_ms = r->deadline_ms;
    sb->cpu_count = r->cpu_count;
    sb->memory_mb = r->memory_mb;
    sb->disk_mb = r->disk_mb; /* a boot's jail_spec asks for it */
    snprintf(sb->envd_token, sizeof sb->envd_token, "%s", r->envd_token);
    return true;
}

static bool reopen_one(struct serve *d, const struct live_row *r)
{
    err_t err;
    struct jail j;
    struct jail_record rec;
    if (r->state == SANDBOX_PAUSED && r->cold)
        return reopen_cold(d, r);
    if (jail_reopen(d->cgroups, d->run_fd, r->id, &j, &rec, &err) < 0) {
        char why[STORE_REASON_MAX + 1] = "";
        if (r->state == SANDBOX_CREATING)
            strfmt_text_append(why, sizeof why, "the daemon stopped while it was being created");
        else if (err.errnum == ESRCH)
            strfmt_text_append(why, sizeof why, "its init ended while the daemon was down");
        else
            strfmt_text_append(why, sizeof why, "could not be reopened: %s", err.msg);
        mark_failed(d, r->id, why);
        return false;
    }
    struct sbx *sb = sbx_new(d, r->id);
    if (!sb) {
        jail_close(&j);
        return false;
    }
    sb->jail = j;
    sb->have_jail = true;
    sb->state = r->state;
    sb->auto_pause = r->auto_pause;
    sb->auto_pause_cold = r->auto_pause_cold;
    sb->auto_resume = r->auto_resume;
    sb->deadline_ms = r->deadline_ms;
    sb->cpu_count = r->cpu_count;
    sb->memory_mb = r->memory_mb;
    sb->disk_mb = r->disk_mb; /* a boot's jail_spec asks for it */
    sb->code_template = r->code_template;
    snprintf(sb->envd_token, sizeof sb->envd_token, "%s", r->envd_token);
    if (r->state == SANDBOX_CREATING) { /* half made: what began is killed */
        sbx_kill(sb, "the daemon stopped while it was being created", NULL, NULL);
        return false;
    }
    bool frozen = false;
    if (jail_frozen(&sb->jail, &frozen, &err) == 0 && frozen != (r->state == SANDBOX_PAUSED))
        jail_freeze_start(&sb->jail, r->state == SANDBOX_PAUSED, &err); /* as the row says */
    /* new commands' groups ("c" + request id) past those of the commands that ran on */
    uint32_t first_free;
    if (jail_command_first_free_id(&sb->jail, &first_free, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", sb->id, err.msg);
    else if (first_free > sb->next_request)
        sb->next_request = first_free;
    if (sb->jail.control_fd >= 0) {
        agent_attach(sb);
        if (r->state == SANDBOX_RUNNING)
            scmd_adopt_all(sb);
        else
            sb->adopt_on_resume = true;
    }
    metrics_restore(sb);
    if (r->state == SANDBOX_RUNNING)
        metrics_start(sb);
    arm_deadline(sb); /* one past due fires at once */
    return true;
}

/* The live rows of the last run not reopened before the daemon listened (d->reopen): the loop
 * reopens SBX_REOPEN_BATCH of them a turn, and a request for one reopens it at once (sbx_find). */
struct sbx_reopen {
    struct serve *d;
    struct live_rows l;
    size_t next; /* the rows before it are taken */
    size_t live; /* how many of them came back */
    uv_idle_t idle;
    void (*then)(struct serve *d);
};

static void take_row(struct sbx_reopen *r, struct live_row *row)
{
    row->taken = true;
    r->live += reopen_one(r->d, row);
}

static void reopen_free(uv_handle_t *h)
{
    struct sbx_reopen *r = h->data;
    free(r->l.rows);
    free(r);
}

/* The reopen from the loop ends: all done, or the daemon stops (the rest stay live for the next
 * one). */
static void reopen_end(struct serve *d, bool all)
{
    struct sbx_reopen *r = d->reopen;
    if (!r)
        return;
    if (all)
        fprintf(stderr, "hutch serve: %zu more sandboxes reopened from the loop\n", r->live);
    d->reopen = NULL;
    uv_idle_stop(&r->idle);
    uv_close((uv_handle_t *)&r->idle, reopen_free);
    if (all && r->then)
        r->then(d);
}

static void reopen_batch(uv_idle_t *h)
{
    struct sbx_reopen *r = h->data;
    for (size_t n = 0; r->next < r->l.n && n < SBX_REOPEN_BATCH; r->next++)
        if (!r->l.rows[r->next].taken) {
            take_row(r, &r->l.rows[r->next]);
            n++;
        }
    if (r->next >= r->l.n)
        reopen_end(r->d, true);
}

static struct sbx *reopen_now(struct serve *d, const char *id)
{
    struct sbx_reopen *r = d->reopen;
    for (size_t i = r ? r->next : 0; r && i < r->l.n; i++)
        if (!r->l.rows[i].taken && strcmp(r->l.rows[i].id, id) == 0) {
            take_row(r, &r->l.rows[i]);
            return find_open(d, id);
        }
    return NULL;
}

void sbx_reopen_rest(struct serve *d)
{
    while (d->reopen)
        reopen_batch(&d->reopen->idle);
}

size_t sbx_reopen_all(struct serve *d, void (*then)(struct serve *d))
{
    struct live_rows l = {0};
    err_t err;
    struct store_list_filter f = {.states = SANDBOX_STATES_LIVE, .oldest_first = true};
    if (store_sandbox_list(d->store, &f, collect_row, &l, &err) < 0)
        fprintf(stderr, "hutch serve: the sandboxes of the last run: %s\n", err.msg);
    size_t live = 0, i = 0;
    for (; i < l.n && i < SBX_REOPEN_FIRST; i++)
        live += reopen_one(d, &l.rows[i]);
    struct sbx_reopen *r = i < l.n ? calloc(1, sizeof *r) : NULL;
    if (r && uv_idle_init(d->loop, &r->idle) == 0) {
        fprintf(stderr, "hutch serve: %zu more live sandboxes are reopened from the loop\n",
                l.n - i);
        r->d = d;
        r->l = l;
        r->next = i;
        r->then = then;
        r->idle.data = r;
        d->reopen = r;
        uv_idle_start(&r->idle, reopen_batch);
        return live;
    }
    free(r);
    for (; i < l.n; i++) /* no loop to lean on: all of them now */
        live += reopen_one(d, &l.rows[i]);
    free(l.rows);
    if (then)
        then(d);
    return live;
}

void sbx_detach_all(struct serve *d)
{
    reopen_end(d, false); /* the rest stay live for the next daemon */
    for (;;) {
        /* the warm pool's, being killed (pool_stop), go when that is done */
        struct sbx *sb = d->sandboxes;
        while (sb && sb->pooled && sb->killing)
            sb = sb->next;
        if (!sb)
            break;
        if (sb->done)
            finish_step(sb, -1, "the daemon is stopping");
        sbx_release(sb);
    }
}
