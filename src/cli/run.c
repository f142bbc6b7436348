/* The one-shot supervisor: prepares a sandbox description from the options, starts it through
 * the isolation core, pumps its output, enforces wall and CPU time and the output limit, then
 * collects the verdict, the artifacts and the counters, and removes everything. */
#include "cli/run.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli/artifacts.h"
#include "cli/paths.h"
#include "cli/run_options.h"
#include "cli/stdin_pump.h"
#include "jail/control.h"
#include "jail/disk_layer.h"
#include "jail/jail.h"
#include "jail/template.h"
#include "jail/userns.h"
#include "jail/verdict.h"
#include "jail/writable_root.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/proctitle.h"
#include "util/strfmt.h"
#include "util/utf8.h"

#define TICK_MS        100
#define DRAIN_GRACE_MS 1000

/* Whether the last byte written to a place ended a line: hutch's own line must start one. */
struct line_state {
    bool at_start;
};

struct stream {
    int fd;         /* read end, -1 once at EOF */
    int forward_fd; /* plain mode: where the bytes go live; -1 in JSON mode or once it failed */
    bool render;    /* forward_fd is a terminal: the bytes go through utf8_render */
    struct utf8_decoder dec;
    struct line_state *line; /* where forward_fd's bytes land (shared by stdout and stderr
                                when they land in the same place) */
    /* Bytes read but not yet forwarded: we read again only when it is empty, so a slow reader
     * of ours slows the program down (its pipe fills) instead of blocking the supervisor. */
    char pending[65536];
    size_t pending_len, pending_off;
    struct utf8_json_text json; /* JSON mode: what was kept, already as it goes into the JSON */
    uint64_t total;             /* bytes seen */
    bool truncated;
};

struct run {
    struct run_options opt;
    struct jail jail;
    struct uid_range uids;
    struct stream out, err;
    struct line_state lines[2];
    struct stdin_pump pump;
    bool stdin_consumed; /* --lang read the code from it */
    int code_fd;
    struct jail_file files[RUN_MAX_ITEMS + 1];
    struct jail_mount mounts[RUN_MAX_ITEMS];
    int file_fds[RUN_MAX_ITEMS];
    size_t n_files;
    char **argv_buf; /* the payload's argv, sized for the command line: nothing is cut */
    bool *argv_owned;
    size_t argv_cap;
    char *cwd; /* --cwd, copied out of the argv area like the command line */
    char *envp_buf[RUN_MAX_ITEMS + 16];
    int sigfd;
    struct verdict_facts facts;
    bool init_exited, control_closed, killed;
    uint64_t end_ns;
    struct cgroup_stats stats_start; /* after setup: init's setup is not the program's */
    char message[1200];
    struct cgroup_stats stats;
    struct verdict_usage usage;
    struct artifacts_result artifacts;
    bool have_artifacts;
    char layer_dir[PATH_MAX]; /* --writable-root: STATE/sandboxes/NAME */
    struct disk_layer_usage disk;
    bool have_disk, disk_full;
};

static void set_message(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_message(struct run *r, const char *fmt, ...)
{
    if (r->message[0])
        return; /* the first reason is the one that matters */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

static const char *default_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "SHELL=/bin/bash",
    "MPLBACKEND=Agg",
};

static int build_env(struct run *r)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof default_env / sizeof default_env[0]; i++)
        r->envp_buf[n++] = (char *)default_env[i];
    static char home_root[] = "HOME=/root", home_user[] = "HOME=" JAIL_USER_HOME;
    static char user_root[] = "USER=root", user_user[] = "USER=" JAIL_USER_NAME;
    static char logname_root[] = "LOGNAME=root", logname_user[] = "LOGNAME=" JAIL_USER_NAME;
    r->envp_buf[n++] = r->opt.as_root ? home_root : home_user;
    r->envp_buf[n++] = r->opt.as_root ? user_root : user_user;
    r->envp_buf[n++] = r->opt.as_root ? logname_root : logname_user;
    /* --env overrides a default of the same name, in place. */
    for (size_t i = 0; i < r->opt.n_env; i++) {
        const char *kv = r->opt.env[i];
        size_t klen = (size_t)(strchr(kv, '=') - kv);
        size_t j;
        for (j = 0; j < n; j++)
            if (strncmp(r->envp_buf[j], kv, klen + 1) == 0)
                break;
        r->envp_buf[j] = r->opt.env[i];
        if (j == n)
            n++;
    }
    r->envp_buf[n] = NULL;
    return 0;
}

static int read_all_fd(int fd, char **out, size_t *len, size_t max)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                errno = EFBIG;
                return -1;
            }
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return -1;
            }
            buf = nb;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(buf);
            return -1;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* The code for --lang goes in as a file, so its size is not bound by the argument limit. */
static int prepare_code(struct run *r, err_t *err)
{
    static const char *const interp[] = {[RUN_LANG_PYTHON] = "python3", [RUN_LANG_NODE] = "node",
                                         [RUN_LANG_BASH] = "bash"};
    static const char *const path[] = {[RUN_LANG_PYTHON] = "/tmp/main.py",
                                       [RUN_LANG_NODE] = "/tmp/main.js",
                                       [RUN_LANG_BASH] = "/tmp/main.sh"};
    char *code = NULL;
    size_t len = 0;
    if (r->opt.code) {
        code = strdup(r->opt.code);
        len = strlen(r->opt.code);
        if (!code)
            return err_set(err, ENOMEM, "code");
    } else {
        bool from_stdin = !r->opt.code_file || strcmp(r->opt.code_file, "-") == 0;
        int fd = from_stdin ? 0 : open(r->opt.code_file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return err_set(err, errno, "--code-file %s", r->opt.code_file);
        int rc = read_all_fd(fd, &code, &len, 64u << 20);
        int saved = errno;
        if (!from_stdin)
            close(fd);
        if (rc < 0)
            return err_set(err, saved, "read code from %s", from_stdin ? "stdin" : r->opt.code_file);
        r->stdin_consumed = from_stdin; /* the program gets /dev/null */
    }
    r->code_fd = memfd_create("hutch-code", MFD_CLOEXEC);
    int rc = r->code_fd < 0 ? -1 : fd_write_all(r->code_fd, code, len);
    free(code);
    if (rc < 0)
        return err_set(err, errno, "store code");
    r->files[r->n_files++] =
        (struct jail_file){.host_fd = r->code_fd, .sandbox_path = path[r->opt.lang], .mode = 0644};
    size_t n = 0;
    r->argv_buf[n++] = (char *)interp[r->opt.lang];
    r->argv_buf[n++] = (char *)path[r->opt.lang];
    for (int i = 0; i < r->opt.argc; i++)
        r->argv_buf[n++] = r->opt.argv[i];
    r->argv_buf[n] = NULL;
    return 0;
}

/* The command line's strings are copied: the sandbox's init overwrites the original argv area
 * (see proctitle.h). Returns 0, or -1 on allocation failure. */
static int copy_argv(struct run *r)
{
    for (size_t i = 0; r->argv_buf[i]; i++) {
        if (!proctitle_contains(r->argv_buf[i]))
            continue;
        r->argv_buf[i] = strdup(r->argv_buf[i]);
        r->argv_owned[i] = true;
        if (!r->argv_buf[i])
            return -1;
    }
    return 0;
}

static int open_files(struct run *r, err_t *err)
{
    for (size_t i = 0; i < r->opt.n_files; i++) {
        const struct run_file *f = &r->opt.files[i];
        int fd = open(f->host_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return err_set(err, errno, "--file %s", f->host_path);
        r->file_fds[i] = fd;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
            return err_set(err, EINVAL, "--file %s: not a regular file", f->host_path);
        r->files[r->n_files++] = (struct jail_file){
            .host_fd = fd, .sandbox_path = f->sandbox_path, .mode = st.st_mode & 0755};
    }
    return 0;
}

static int make_stream(struct run *r, struct stream *s, int *child_end, int forward_fd, err_t *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, errno, "output pipe");
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    s->fd = p[0];
    *child_end = p[1];
    if (r->opt.json) {
        s->forward_fd = -1;
        /* On a terminal the JSON is ASCII: C1 controls (U+009B is CSI to some terminals) go
         * out escaped. The limit counts the bytes as they will be written either way. */
        s->json = (struct utf8_json_text){.limit = r->opt.output_limit, .ascii = isatty(1)};
    } else {
        s->forward_fd = forward_fd;
        s->render = isatty(forward_fd);
    }
    return 0;
}

/* Whether hutch's stdout and stderr land in the same place (a terminal, a pipe, a file): then
 * a line the program left open on either one is open where hutch's own line goes. */
static bool same_destination(int a, int b)
{
    struct stat sa, sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static void kill_sandbox(struct run *r)
{
    if (r->killed || r->jail.pidfd < 0)
        return;
    /* init is pid 1 of the sandbox's pid namespace: its death takes every process with it. */
    syscall(SYS_pidfd_send_signal, r->jail.pidfd, SIGKILL, NULL, 0);
    r->killed = true;
}

/* The output limit is reached on s: the rest is cut, and the program stopped. */
static void stream_cut(struct run *r, struct stream *s)
{
    if (s->truncated)
        return;
    s->truncated = true;
    if (!r->killed) {
        r->facts.output_exceeded = true;
        set_message(r, "output beyond the limit of %llu bytes%s",
                    (unsigned long long)r->opt.output_limit,
                    r->opt.json ? " (as written in the JSON)" : "");
        kill_sandbox(r);
    }
}

/* Keeps n new bytes of s (final: s is at its end). The limit counts what hutch will write: in
 * JSON mode the text as encoded (escapes and U+FFFD included), else the program's bytes. */
static void stream_keep(struct run *r, struct stream *s, const char *buf, size_t n, bool final)
{
    if (r->opt.json) {
        if (utf8_json_append(&s->json, buf, n, final) < 0 && !r->killed) {
            r->facts.internal_error = true;
            set_message(r, "keep the output: %s", strerror(errno));
            kill_sandbox(r);
        }
        if (s->json.full)
            stream_cut(r, s);
        return;
    }
    uint64_t before = s->total - n;
    uint64_t room = before >= r->opt.output_limit ? 0 : r->opt.output_limit - before;
    size_t keep = (uint64_t)n > room ? (size_t)room : n;
    if (keep < n)
        stream_cut(r, s);
    if (s->forward_fd < 0 || (keep == 0 && !final))
        return;
    if (s->render) {
        s->pending_len = utf8_render(&s->dec, buf, keep, final, false, s->pending);
    } else {
        if (keep > 0)
            memcpy(s->pending, buf, keep);
        s->pending_len = keep;
    }
    s->pending_off = 0;
}

static void stream_read(struct run *r, struct stream *s)
{
    char buf[65536];
    /* What a chunk can become once rendered must fit in pending. */
    size_t chunk = s->render ? sizeof s->pending / 4 - 3 : sizeof buf;
    /* Bounded: a program that writes without pause must not keep the supervisor from its
     * clock (timeouts are checked between polls). */
    for (int round = 0; round < 16 && s->pending_len == 0; round++) {
        ssize_t n = read(s->fd, buf, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            stream_keep(r, s, NULL, 0, true); /* a sequence cut at the end */
            close(s->fd);
            s->fd = -1;
            return;
        }
        s->total += (uint64_t)n;
        stream_keep(r, s, buf, (size_t)n, false);
    }
}

/* After POLLOUT: at most PIPE_BUF bytes, which a pipe that polled writable takes without
 * blocking, so the supervisor never waits on its own reader. */
static void stream_forward(struct stream *s)
{
    size_t n = s->pending_len - s->pending_off;
    if (n > PIPE_BUF)
        n = PIPE_BUF;
    ssize_t w = write(s->forward_fd, s->pending + s->pending_off, n);
    if (w < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (w < 0) {
        s->forward_fd = -1; /* our reader went away; keep supervising, drop the output */
        s->pending_len = s->pending_off = 0;
        return;
    }
    s->pending_off += (size_t)w;
    if (w > 0)
        s->line->at_start = s->pending[s->pending_off - 1] == '\n';
    if (s->pending_off == s->pending_len)
        s->pending_len = s->pending_off = 0;
}

/* When the sandbox is done: what is pending or still in the pipe goes out, waiting on a slow
 * reader of ours for at most DRAIN_GRACE_MS: a reader that never reads must not keep hutch run
 * from returning its verdict. */
static void stream_drain(struct run *r, struct stream *s)
{
    uint64_t deadline = jail_now_ns() + DRAIN_GRACE_MS * 1000000ull;
    for (;;) {
        while (s->forward_fd >= 0 && s->pending_len > s->pending_off) {
            uint64_t now = jail_now_ns();
            struct pollfd p = {.fd = s->forward_fd, .events = POLLOUT};
            if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000000) + 1) <= 0) {
                s->forward_fd = -1; /* the rest is dropped */
                break;
            }
            stream_forward(s);
        }
        s->pending_len = s->pending_off = 0;
        if (s->fd < 0)
            return;
        stream_read(r, s);
        if (s->pending_len == 0 && s->fd >= 0)
            return; /* EAGAIN: a writer outlived init; cannot happen, never hang on it */
    }
}

static void handle_control(struct run *r)
{
    struct control_msg msg;
    int rc = control_recv(r->jail.control_fd, &msg, NULL);
    if (rc <= 0) {
        if (rc < 0 && errno == EBADMSG)
            set_message(r, "malformed message from sandbox init");
        r->control_closed = true;
        return;
    }
    if (msg.type == CONTROL_EXIT && !r->facts.payload_ended) {
        r->facts.payload_ended = true;
        r->facts.exit_code = msg.code;
        r->facts.signal = msg.sig;
        r->end_ns = jail_now_ns();
    } else if (msg.type == CONTROL_EXEC_ERROR) {
        r->facts.exec_failed = true;
        set_message(r, "cannot execute %s: %s", msg.text, strerror(msg.code > 0 ? msg.code : EIO));
    } else if (msg.type == CONTROL_SETUP_ERROR) {
        r->facts.internal_error = true;
        set_message(r, "sandbox: %s", msg.text);
    }
}

static void check_limits(struct run *r, uint64_t deadline_ns)
{
    if (r->killed || r->facts.payload_ended)
        return;
    uint64_t now = jail_now_ns();
    if (now >= deadline_ns) {
        r->facts.wall_timeout = true;
        set_message(r, "wall-clock limit of %.3f s reached", r->opt.timeout_ms / 1000.0);
        kill_sandbox(r);
        return;
    }
    uint64_t cpu_ns;
    err_t ignored;
    /* cpu_time_ms is at most a year (run_options.h): in ns it cannot wrap */
    if (cgroup_read_cpu_ns(r->jail.cgroup, &cpu_ns, &ignored) == 0 &&
        cpu_ns >= r->stats_start.cpu_usage_ns &&
        cpu_ns - r->stats_start.cpu_usage_ns >= r->opt.cpu_time_ms * 1000000ull) {
        r->facts.cpu_timeout = true;
        set_message(r, "CPU time limit of %.3f s reached", r->opt.cpu_time_ms / 1000.0);
        kill_sandbox(r);
    }
}

static void supervise(struct run *r)
{
    /* timeout_ms is at most a year (run_options.h): the deadline in ns cannot wrap */
    uint64_t deadline = r->jail.start_ns + r->opt.timeout_ms * 1000000ull;
    for (;;) {
        bool streams_open = r->out.fd >= 0 || r->err.fd >= 0 || r->out.pending_len ||
                            r->err.pending_len;
        /* Done once the payload's end is known and its output complete; init need not have
         * finished tearing down its namespaces for the counters to be read (jail_destroy waits
         * for that). And once init is gone, nothing inside is left to supervise: what output
         * remains is drained below, bounded. */
        if (((r->init_exited || r->facts.payload_ended) && !streams_open) || r->init_exited)
            break;
        struct pollfd p[9];
        enum { P_OUT, P_ERR, P_CTL, P_PID, P_SIG, P_IN, P_PIPE, P_FWD_OUT, P_FWD_ERR };
        p[P_OUT] = (struct pollfd){.fd = r->out.pending_len ? -1 : r->out.fd, .events = POLLIN};
        p[P_ERR] = (struct pollfd){.fd = r->err.pending_len ? -1 : r->err.fd, .events = POLLIN};
        p[P_FWD_OUT] = (struct pollfd){.fd = r->out.pending_len ? r->out.forward_fd : -1,
                                       .events = POLLOUT};
        p[P_FWD_ERR] = (struct pollfd){.fd = r->err.pending_len ? r->err.forward_fd : -1,
                                       .events = POLLOUT};
        p[P_CTL] = (struct pollfd){.fd = r->control_closed ? -1 : r->jail.control_fd,
                                   .events = POLLIN};
        p[P_PID] = (struct pollfd){.fd = r->init_exited ? -1 : r->jail.pidfd, .events = POLLIN};
        p[P_SIG] = (struct pollfd){.fd = r->sigfd, .events = POLLIN};
        stdin_pump_events(&r->pump, &p[P_IN], &p[P_PIPE]);
        int rc = poll(p, 9, TICK_MS);
        if (rc < 0 && errno != EINTR) {
            r->facts.internal_error = true;
            set_message(r, "poll: %s", strerror(errno));
            kill_sandbox(r);
            break;
        }
        if (rc > 0) {
            if (p[P_CTL].revents)
                handle_control(r);
            if (p[P_OUT].revents)
                stream_read(r, &r->out);
            if (p[P_ERR].revents)
                stream_read(r, &r->err);
            if (p[P_FWD_OUT].revents)
                stream_forward(&r->out);
            if (p[P_FWD_ERR].revents)
                stream_forward(&r->err);
            if (p[P_IN].revents || p[P_PIPE].revents)
                stdin_pump_run(&r->pump, p[P_IN].revents, p[P_PIPE].revents);
            if (p[P_SIG].revents) {
                struct signalfd_siginfo si;
                if (read(r->sigfd, &si, sizeof si) == (ssize_t)sizeof si && !r->killed) {
                    r->facts.internal_error = true;
                    set_message(r, "interrupted by %s", strsignal((int)si.ssi_signo));
                    kill_sandbox(r);
                }
            }
            if (p[P_PID].revents) {
                /* Drain a last EXIT message that may sit behind the pidfd event. */
                while (!r->control_closed && !r->facts.payload_ended) {
                    struct pollfd c = {.fd = r->jail.control_fd, .events = POLLIN};
                    if (poll(&c, 1, 0) <= 0)
                        break;
                    handle_control(r);
                }
                r->init_exited = true;
                if (!r->end_ns)
                    r->end_ns = jail_now_ns();
            }
        }
        check_limits(r, deadline);
    }
    stream_drain(r, &r->out);
    stream_drain(r, &r->err);
}

/* The kept text into a JSON string (valid UTF-8 already). jansson copies it, so ours goes at
 * once: a stream is held twice only for the moment of the copy. NULL when out of memory. */
static json_t *json_text(struct stream *s)
{
    json_t *j = json_stringn_nocheck(s->json.text ? s->json.text : "", s->json.len);
    free(s->json.text);
    s->json.text = NULL;
    s->json.len = s->json.cap = 0;
    return j;
}

/* hutch's own line in plain mode. It starts a line of its own, its message (which can hold
 * bytes of the sandbox's choosing, such as argv[0]) is rendered on one line with no control
 * left in it, and on a terminal "hutch:" is in reverse video, which the sandbox's output, with
 * ESC rendered visible, cannot produce. */
static void print_plain_line(struct run *r, enum verdict v)
{
    char msg[UTF8_RENDER_MAX(sizeof r->message)];
    struct utf8_decoder dec = {0};
    size_t n = utf8_render(&dec, r->message, strlen(r->message), true, true, msg);
    msg[n] = '\0';
    bool tty = isatty(2);
    fprintf(stderr, "%s%shutch:%s %s%s%s\n", r->err.line->at_start ? "" : "\n",
            tty ? "\033[1;7m" : "", tty ? "\033[0m" : "", verdict_code(v), n ? ": " : "", msg);
}

static void print_result(struct run *r, enum verdict v)
{
    uint64_t wall_ms = r->end_ns > r->jail.start_ns && r->jail.start_ns
                           ? (r->end_ns - r->jail.start_ns) / 1000000
                           : 0;
    uint64_t cpu_ns = r->usage.cpu_ns;
    if (!r->opt.json) {
        if (v != VERDICT_OK)
            print_plain_line(r, v);
        return;
    }
    bool exited = r->facts.payload_ended && r->facts.signal == 0;
    size_t message_len;
    char *message = utf8_sanitize(r->message, strlen(r->message), &message_len);
    json_t *o = json_pack(
        "{s:s, s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:b, s:b, s:o, s:s%}", "status",
        verdict_code(v), "exit_code",
        exited ? json_integer(r->facts.exit_code) : json_null(), "signal",
        r->facts.signal ? json_integer(r->facts.signal) : json_null(), "wall_ms",
        (json_int_t)wall_ms, "cpu_ms", (json_int_t)(cpu_ns / 1000000), "memory_peak_bytes",
        (json_int_t)r->usage.memory_peak_bytes, "stdout", json_text(&r->out), "stderr",
        json_text(&r->err), "stdout_truncated", r->out.truncated, "stderr_truncated",
        r->err.truncated, "artifacts",
        r->have_artifacts ? json_incref(r->artifacts.files) : json_array(), "message",
        message ? message : "", message ? message_len : 0);
    free(message);
    if (!o) {
        /* Only out of memory gets here: every string is valid UTF-8 by now. What needs no
         * allocation still goes out, so that the status agrees with hutch's exit status. */
        char code[16] = "null", sig[16] = "null";
        if (exited)
            snprintf(code, sizeof code, "%d", r->facts.exit_code);
        if (r->facts.signal)
            snprintf(sig, sizeof sig, "%d", r->facts.signal);
        printf("{\"status\":\"%s\",\"exit_code\":%s,\"signal\":%s,\"message\":\"cannot encode "
               "the result: out of memory\"}\n",
               verdict_code(v), code, sig);
        fflush(stdout);
        return;
    }
    if (r->have_artifacts) {
        json_object_set_new(o, "artifacts_truncated", json_boolean(r->artifacts.truncated));
        json_object_set_new(o, "artifacts_skipped_existing",
                            json_integer((json_int_t)r->artifacts.existing));
    }
    json_object_set_new(o, "oom_kills", json_integer((json_int_t)r->usage.oom_kills));
    if (r->have_disk)
        json_object_set_new(o, "disk",
                            json_pack("{s:I, s:I, s:I, s:b}", "size_bytes",
                                      (json_int_t)r->disk.size_bytes, "free_bytes",
                                      (json_int_t)r->disk.free_bytes, "host_bytes",
                                      (json_int_t)r->disk.host_bytes, "full", r->disk_full));
    json_dumpf(o, stdout, JSON_COMPACT | (isatty(1) ? JSON_ENSURE_ASCII : 0));
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(o);
}

static int setup_signals(struct run *r, err_t *err)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    /* Blocked here, read through the signalfd; the sandbox resets its mask before anything. */
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return err_set(err, errno, "sigprocmask");
    r->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (r->sigfd < 0)
        return err_set(err, errno, "signalfd");
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* --writable-root NAME: the disk layer STATE/sandboxes/NAME, made on first use with --disk's
 * size and reused as it is afterwards. */
static int prepare_layer(struct run *r, const char *state_dir, err_t *err)
{
    char sandboxes[PATH_MAX];
    if ((size_t)snprintf(sandboxes, sizeof sandboxes, "%s/sandboxes", state_dir) >=
            sizeof sandboxes ||
        (size_t)snprintf(r->layer_dir, sizeof r->layer_dir, "%s/%s", sandboxes,
                         r->opt.writable_root) >= sizeof r->layer_dir)
        return err_set(err, ENAMETOOLONG, "state directory %s", state_dir);
    if (mkdir_p_at(AT_FDCWD, sandboxes, 0700, err) < 0)
        return err_wrap(err, "--writable-root");
    if (disk_layer_exists(r->layer_dir))
        return 0;
    if (disk_layer_create(r->layer_dir, r->opt.disk_bytes, err) < 0 && err->errnum != EEXIST)
        return err_wrap(err, "--writable-root %s", r->opt.writable_root);
    return 0;
}

/* After the sandbox is gone, the disk layer's superblock is current: a layer found full says
 * why the program may have failed, in its own words (ENOSPC) and in ours. */
static void check_layer(struct run *r)
{
    err_t err;
    if (!r->opt.writable_root || !r->layer_dir[0] ||
        disk_layer_usage(r->layer_dir, &r->disk, &err) < 0)
        return;
    r->have_disk = true;
    /* ext4 leaves a few blocks that no file of the size being written fits in */
    r->disk_full = r->disk.free_bytes < (1u << 20) || r->disk.free_inodes == 0;
    if (r->disk_full)
        set_message(r, "the writable root is full: disk layer %s, %llu bytes, %llu free",
                    r->opt.writable_root, (unsigned long long)r->disk.size_bytes,
                    (unsigned long long)r->disk.free_bytes);
}

static int start(struct run *r, err_t *err)
{
    /* Said plainly up front rather than as the first EACCES of a cgroup mkdir. */
    if (geteuid() != 0)
        return err_set(err, 0, "hutch run needs root (it makes cgroups and maps a host uid "
                                   "range for each sandbox; see hutch doctor)");
    if (setup_signals(r, err) < 0)
        return -1;
    /* --lang's interpreter and code path, the arguments, NULL */
    r->argv_cap = (size_t)r->opt.argc + 3;
    r->argv_buf = calloc(r->argv_cap, sizeof *r->argv_buf);
    r->argv_owned = calloc(r->argv_cap, sizeof *r->argv_owned);
    if (!r->argv_buf || !r->argv_owned)
        return err_set(err, ENOMEM, "the command line");
    if (r->opt.lang != RUN_LANG_NONE) {
        if (prepare_code(r, err) < 0)
            return -1;
    } else {
        for (int i = 0; i < r->opt.argc; i++)
            r->argv_buf[i] = r->opt.argv[i];
    }
    if (copy_argv(r) < 0)
        return err_set(err, ENOMEM, "copy the command line");
    /* The child reads --cwd after proctitle_set has wiped the argv area it points into. */
    if (r->opt.cwd && !(r->cwd = strdup(r->opt.cwd)))
        return err_set(err, ENOMEM, "copy --cwd");
    if (open_files(r, err) < 0 || stdin_pump_open(&r->pump, 0, r->stdin_consumed, err) < 0)
        return -1;
    build_env(r);
    for (size_t i = 0; i < r->opt.n_binds; i++)
        r->mounts[i] = (struct jail_mount){.host_path = r->opt.binds[i].host_path,
                                           .sandbox_path = r->opt.binds[i].sandbox_path};

    struct cgroup_host *cgroups = hutch_cgroup_host(err);
    if (!cgroups)
        return -1;
    const char *state_dir = r->opt.state_dir ? r->opt.state_dir : hutch_state_dir();
    struct template_paths tpl;
    if (template_prepare_base(state_dir, &tpl, err) < 0)
        return -1;
    if (r->opt.writable_root && prepare_layer(r, state_dir, err) < 0)
        return -1;
    char lock[PATH_MAX];
    if (strfmt(lock, sizeof lock, "%s/uid-slots.lock", hutch_run_dir()) < 0)
        return err_set(err, errno, "run directory %s (HUTCH_RUN_DIR)", hutch_run_dir());
    if (mkdir_p_at(AT_FDCWD, hutch_run_dir(), 0755, err) < 0 ||
        uid_range_acquire(lock, &r->uids, err) < 0)
        return -1;

    int out_w = -1, err_w = -1;
    if (!r->opt.json && same_destination(1, 2))
        r->err.line = r->out.line;
    if (make_stream(r, &r->out, &out_w, 1, err) < 0 ||
        make_stream(r, &r->err, &err_w, 2, err) < 0) {
        if (out_w >= 0)
            close(out_w);
        return -1;
    }
    char name[64]; /* 25 bytes at most */
    static unsigned counter;
    snprintf(name, sizeof name, "run-%d-%u", (int)getpid(), counter++);
    struct jail_spec spec = {
        .cgroups = cgroups,
        .name = name,
        .template_dir = tpl.rootfs,
        .usr_dir = "/usr",
        .stage_dir = tpl.stage,
        .limits = {.memory_bytes = r->opt.memory_bytes, .pids = r->opt.pids,
                   .disk_bytes = r->opt.disk_bytes, .cpu_time_ms = r->opt.cpu_time_ms,
                   .nofile = r->opt.nofile, .ptys = r->opt.ptys,
                   .inotify_instances = r->opt.inotify_instances,
                   .inotify_watches = r->opt.inotify_watches},
        .net = JAIL_NET_NONE,
        .host_uid_base = r->uids.host_base,
        .as_root = r->opt.as_root,
        .seccomp = r->opt.seccomp,
        .argv = (const char *const *)r->argv_buf,
        .envp = (const char *const *)r->envp_buf,
        .cwd = r->cwd,
        .stdin_fd = r->pump.child_fd,
        .stdout_fd = out_w,
        .stderr_fd = err_w,
        .files = r->files,
        .n_files = r->n_files,
        .mounts = r->mounts,
        .n_mounts = r->opt.n_binds,
        .output_dir = r->opt.artifacts_dir != NULL,
        .die_with_parent = true,
        .keep_fd = r->uids.lock_fd,
        .listen_fd = -1,
        .hold_fd = -1,
        .writable_root = r->opt.writable_root != NULL,
        .layer_dir = r->layer_dir,
        /* The host's package database goes with the host's /usr: dpkg inside then knows what
         * is installed there. */
        .dpkg_dir = r->opt.writable_root && access("/var/lib/dpkg/status", F_OK) == 0
                        ? "/var/lib/dpkg"
                        : NULL,
    };
    int rc = jail_start(&spec, &r->jail, err);
    /* Our copies of the write ends go now, or the streams would never reach EOF. */
    close(out_w);
    close(err_w);
    stdin_pump_started(&r->pump);
    if (rc < 0)
        return -1;
    if (r->jail.unmapped_lowers) {
        char note[256];
        fprintf(stderr, "hutch run: --writable-root: %s\n",
                writable_root_unmapped_note(r->jail.unmapped_lowers, note, sizeof note));
    }
    err_t ignored;
    /* init's setup is not the program's CPU time */
    cgroup_read_cpu_ns(r->jail.cgroup, &r->stats_start.cpu_usage_ns, &ignored);
    return 0;
}

static void finish(struct run *r)
{
    err_t err;
    if (r->jail.cgroup && cgroup_read_stats(r->jail.cgroup, &r->stats, &err) < 0) {
        r->facts.internal_error = true;
        set_message(r, "%s", err.msg);
    }
    r->facts.killed = r->killed;
    r->facts.init_ended = r->init_exited;
    verdict_account(&r->facts, &r->stats_start, &r->stats, &r->usage);
    if (r->opt.artifacts_dir && r->jail.output_dirfd >= 0) {
        if (artifacts_copy(r->jail.output_dirfd, r->opt.artifacts_dir, r->opt.artifacts_limit,
                           &r->artifacts, &err) < 0) {
            r->facts.internal_error = true;
            set_message(r, "%s", err.msg);
        }
        r->have_artifacts = true;
        if (r->artifacts.truncated)
            set_message(r,
                        "artifacts beyond the limits (%llu bytes, counting %d for each entry "
                        "plus a file's bytes; %d entries; %d levels) were not copied",
                        (unsigned long long)r->opt.artifacts_limit, ARTIFACTS_ENTRY_COST,
                        ARTIFACTS_MAX_ENTRIES, ARTIFACTS_MAX_DEPTH);
        else if (r->artifacts.existing)
            set_message(r, "%u artifacts not copied: the name already exists in --artifacts DIR",
                        r->artifacts.existing);
    }
    if (jail_destroy(&r->jail, &err) < 0) {
        r->facts.internal_error = true;
        set_message(r, "cleanup: %s", err.msg);
    }
    uid_range_release(&r->uids);
    check_layer(r);
    if (r->facts.oom_kills && !r->facts.wall_timeout && !r->facts.cpu_timeout)
        set_message(r, "memory limit of %llu bytes reached",
                    (unsigned long long)r->opt.memory_bytes);
    if (r->facts.payload_ended && r->facts.signal)
        set_message(r, "killed by signal %d (%s)", r->facts.signal, strsignal(r->facts.signal));
    else if (r->facts.payload_ended && r->facts.exit_code)
        set_message(r, "exited with status %d", r->facts.exit_code);
}

static void release(struct run *r)
{
    for (size_t i = 0; i < r->opt.n_files; i++)
        if (r->file_fds[i] >= 0)
            close(r->file_fds[i]);
    if (r->code_fd >= 0)
        close(r->code_fd);
    /* The program is gone: hutch's stdin is settled to what it read. */
    stdin_pump_close(&r->pump);
    if (r->sigfd >= 0)
        close(r->sigfd);
    for (size_t i = 0; i < r->argv_cap; i++)
        if (r->argv_owned && r->argv_owned[i])
            free(r->argv_buf[i]);
    free(r->argv_buf);
    free(r->argv_owned);
    free(r->cwd);
    free(r->out.json.text);
    free(r->err.json.text);
    if (r->have_artifacts)
        json_decref(r->artifacts.files);
    run_options_free(&r->opt);
}

/* hutch's own 0, 1 and 2 must be open: else a pipe made for the sandbox could take one of
 * those numbers, and the program's output be forwarded into hutch's own pipe. */
static void ensure_stdio_open(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            open("/dev/null", (fd == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
}

int run_main(int argc, char **argv)
{
    err_t err = {0};
    struct run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "hutch run: out of memory\n");
        return 2;
    }
    ensure_stdio_open();
    r->code_fd = r->sigfd = r->out.fd = r->err.fd = -1;
    r->uids.lock_fd = -1;
    r->pump.child_fd = r->pump.pipe_w = r->pump.pipe_r = r->pump.null_fd = -1;
    r->lines[0].at_start = r->lines[1].at_start = true;
    r->out.line = &r->lines[0];
    r->err.line = &r->lines[1];
    memset(r->file_fds, -1, sizeof r->file_fds);
    r->jail.pidfd = r->jail.control_fd = r->jail.output_dirfd = r->jail.keeper_fd = -1;
    if (run_options_parse(argc, argv, &r->opt, &err) < 0) {
        /* the message quotes the command line, which an agent may have written */
        char msg[UTF8_RENDER_MAX(sizeof err.msg)];
        struct utf8_decoder dec = {0};
        msg[utf8_render(&dec, err.msg, strlen(err.msg), true, true, msg)] = '\0';
        fprintf(stderr, "hutch run: %s\n", msg);
        free(r);
        return 2;
    }
    if (r->opt.help) {
        run_options_usage(stdout);
        run_options_free(&r->opt);
        free(r);
        return 0;
    }
    if (start(r, &err) < 0) {
        r->facts.internal_error = true;
        set_message(r, "%s", err.msg);
    } else {
        supervise(r);
    }
    finish(r);
    enum verdict v = verdict_decide(&r->facts);
    print_result(r, v);
    jail_reap(&r->jail);
    release(r);
    free(r);
    return verdict_exit_status(v);
}
