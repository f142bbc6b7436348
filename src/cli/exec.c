/* hutch exec and hutch sh: a command in a sandbox, its output streamed to this terminal, and
 * hutch's exit status the command's. exec forwards stdin when it is not a terminal (SendInput,
 * then CloseStdin at its end); sh runs an interactive shell on a pty: this terminal in raw mode,
 * each keystroke sent as it comes, the size followed on SIGWINCH (Update), and the terminal
 * restored on every way out. */
#include "cli/sandbox_cmds.h"

#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/remote.h"
#include "cli/stream.h"

#define INPUT_CHUNK (64u << 10) /* bytes of stdin per SendInput */

/* ---------- signals, through a pipe into the poll loop ---------- */

static int signal_pipe[2] = {-1, -1};

static void on_signal(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    if (write(signal_pipe[1], &b, 1) < 0) {
        /* full: the loop has signals to read already */
    }
    errno = saved;
}

static int signals_catch(const int *signos, size_t n, err_t *err)
{
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return err_set(err, errno, "pipe");
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < n; i++)
        sigaction(signos[i], &sa, NULL);
    return 0;
}

/* ---------- the terminal ---------- */

static struct termios saved_termios;
static bool terminal_raw;

static void terminal_restore(void)
{
    if (terminal_raw)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_termios);
    terminal_raw = false;
}

static int terminal_make_raw(err_t *err)
{
    if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
        return err_set(err, errno, "tcgetattr");
    struct termios raw = saved_termios;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
        return err_set(err, errno, "tcsetattr");
    terminal_raw = true;
    atexit(terminal_restore);
    return 0;
}

static void terminal_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws = {0};
    if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0) ||
        !ws.ws_row || !ws.ws_col) {
        ws.ws_row = 24;
        ws.ws_col = 80;
    }
    *rows = ws.ws_row;
    *cols = ws.ws_col;
}

/* ---------- envd's unary calls on the running command ---------- */

static json_t *selector(const struct stream *s)
{
    return json_pack("{s:I}", "pid", (json_int_t)s->pid);
}

static int send_input(const struct stream *s, bool pty, const uint8_t *data, size_t len, err_t *err)
{
    size_t b64_len = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(b64_len);
    if (!b64)
        return err_set(err, ENOMEM, "input");
    sodium_bin2base64(b64, b64_len, data, len, sodium_base64_VARIANT_ORIGINAL);
    json_t *req =
        json_pack("{s:o, s:{s:s}}", "process", selector(s), "input", pty ? "pty" : "stdin", b64);
    free(b64);
    int rc = req ? remote_envd_unary(&s->envd, "/process.Process/SendInput", req, err)
                 : err_set(err, ENOMEM, "input");
    json_decref(req);
    return rc;
}

static int simple_call(const struct stream *s, const char *method, json_t *req, err_t *err)
{
    char path[64];
    snprintf(path, sizeof path, "/process.Process/%s", method);
    int rc = req ? remote_envd_unary(&s->envd, path, req, err) : err_set(err, ENOMEM, "%s", method);
    json_decref(req);
    return rc;
}

static int close_stdin(const struct stream *s, err_t *err)
{
    return simple_call(s, "CloseStdin", json_pack("{s:o}", "process", selector(s)), err);
}

static int send_signal(const struct stream *s, const char *name, err_t *err)
{
    return simple_call(s, "SendSignal",
                       json_pack("{s:o, s:s}", "process", selector(s), "signal", name), err);
}

static int update_size(const struct stream *s, err_t *err)
{
    unsigned rows, cols;
    terminal_size(&rows, &cols);
    return simple_call(s, "Update",
                       json_pack("{s:o, s:{s:{s:i, s:i}}}", "process", selector(s), "pty", "size",
                                 "cols", (int)cols, "rows", (int)rows),
                       err);
}

/* ---------- the loop ---------- */

struct session {
    struct stream s;
    bool pty;
    bool forward_input; /* stdin (or the keystrokes) go to the command */
    bool input_closed;
    int signalled; /* a terminating signal came to hutch */
};

/* stdin is readable: what it has goes to the command; at its end, CloseStdin (a pty's shell
 * gets nothing more). */
static int pump_input(struct session *ss, err_t *err)
{
    static uint8_t buf[INPUT_CHUNK];
    ssize_t n = read(STDIN_FILENO, buf, ss->pty ? 4096 : sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0) {
        ss->input_closed = true;
        return ss->pty ? 0 : close_stdin(&ss->s, err);
    }
    return send_input(&ss->s, ss->pty, buf, (size_t)n, err);
}

static int pump_signals(struct session *ss, err_t *err)
{
    unsigned char b[16];
    ssize_t n = read(signal_pipe[0], b, sizeof b);
    for (ssize_t i = 0; i < n; i++) {
        if (b[i] == SIGWINCH) {
            if (ss->pty && ss->s.started && update_size(&ss->s, err) < 0)
                return -1;
            continue;
        }
        /* SIGINT, SIGTERM, SIGHUP: the command is asked to stop (SIGTERM; a second one
         * SIGKILLs), and hutch goes on reading until its end */
        if (!ss->s.started)
            return err_set(err, 0, "interrupted by signal %d", b[i]);
        if (send_signal(&ss->s, ss->signalled ? "SIGNAL_SIGKILL" : "SIGNAL_SIGTERM", err) < 0)
            return -1;
        ss->signalled = b[i];
    }
    return 0;
}

/* Runs the session until the command's end; its exit status, or -1 with err. */
static int session_run(struct session *ss, const struct remote_envd *e, const json_t *request,
                       err_t *err)
{
    static const int signos[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
    if (signals_catch(signos, 4, err) < 0)
        return -1;
    if (stream_start(&ss->s, e, request, err) < 0) {
        stream_close(&ss->s);
        return -1;
    }
    int rc = 0;
    while (rc == 0) {
        struct pollfd p[3] = {{.fd = client_fd(ss->s.c), .events = POLLIN},
                              {.fd = signal_pipe[0], .events = POLLIN},
                              {.fd = -1, .events = POLLIN}};
        /* stdin is read once the command's pid is known: SendInput names it */
        if (ss->forward_input && !ss->input_closed && ss->s.started && !ss->s.ended)
            p[2].fd = STDIN_FILENO;
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = err_set(err, errno, "poll");
            break;
        }
        if (p[1].revents & POLLIN)
            rc = pump_signals(ss, err);
        if (rc == 0 && p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
            rc = pump_input(ss, err);
            /* the command may have ended meanwhile: its stdin is gone, which is no error */
            if (rc < 0 && ss->s.ended)
                rc = 0;
            if (rc < 0 && ss->s.ended == false && err->errnum == ENOENT)
                rc = 0, ss->input_closed = true;
        }
        if (rc == 0 && p[0].revents & (POLLIN | POLLHUP | POLLERR))
            rc = stream_pump(&ss->s, err);
    }
    int status = rc < 0 ? -1 : ss->s.exit_status;
    stream_close(&ss->s);
    return status;
}

/* ---------- hutch exec ---------- */

static void exec_usage(FILE *out)
{
    fprintf(out,
            "usage: hutch exec ID [--user root] [--cwd DIR] [--env K=V]... -- CMD [ARGS...]\n"
            "Runs CMD in sandbox ID (found on its PATH), its output streamed here as it comes;\n"
            "stdin is forwarded unless it is a terminal. Exits with CMD's status (128+N for a\n"
            "signal N); 127 when CMD is not found, 126 when it cannot run, 125 when hutch\n"
            "itself fails.\n");
}

/* The options every session takes: --user, --cwd, --env. */
struct session_options {
    bool as_root;
    const char *cwd;
    json_t *envs;
};

static int session_options_parse(const char *cmd, int argc, char **argv, struct session_options *o,
                                 void (*usage)(FILE *))
{
    static const struct option longs[] = {{"user", required_argument, NULL, 'u'},
                                          {"cwd", required_argument, NULL, 'C'},
                                          {"env", required_argument, NULL, 'e'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
    int c;
    err_t err;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 'u':
            if (strcmp(optarg, "root") && strcmp(optarg, "user"))
                return remote_usage(cmd, "--user %s: want root or user", optarg);
            o->as_root = strcmp(optarg, "root") == 0;
            break;
        case 'C':
            o->cwd = optarg;
            break;
        case 'e':
            if (remote_add_pair(o->envs, optarg, "--env", &err) < 0)
                return remote_usage(cmd, "%s", err.msg);
            break;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return REMOTE_EXIT_USAGE;
        }
    }
    return 0;
}

static int exit_of(int rc)
{
    return rc < 0 ? 0 : rc;
}

int exec_main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            exec_usage(stdout);
            return 0;
        }
        return remote_usage("exec", "want a sandbox id first");
    }
    const char *id = argv[1];
    struct session_options o = {.envs = json_object()};
    optind = 2;
    int rc = session_options_parse("exec", argc, argv, &o, exec_usage);
    if (rc == 0 && optind >= argc)
        rc = remote_usage("exec", "want a command after --");
    if (rc != 0) {
        json_decref(o.envs);
        return exit_of(rc);
    }
    json_t *args = json_array();
    for (int i = optind + 1; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    struct session ss = {.forward_input = !isatty(STDIN_FILENO)};
    json_t *process =
        json_pack("{s:s, s:o, s:o}", "cmd", argv[optind], "args", args, "envs", o.envs);
    if (process && o.cwd)
        json_object_set_new(process, "cwd", json_string(o.cwd));
    json_t *request = json_pack("{s:o, s:b}", "process", process, "stdin", ss.forward_input);
    err_t err;
    struct remote_envd e;
    int status = -1;
    if (!request)
        err_set(&err, 0, "the command or its env is not UTF-8");
    else if (remote_envd_open(id, o.as_root, &e, &err) == 0)
        status = session_run(&ss, &e, request, &err);
    json_decref(request);
    /* as a shell says a command it cannot run: 127 not found, 126 found but not runnable */
    if (status < 0 && ss.s.start_failed)
        return remote_fail("exec", strstr(err.msg, "No such file") ? 127 : 126, &err);
    if (status < 0)
        return remote_fail("exec", REMOTE_EXIT_EXEC, &err);
    return status;
}

/* ---------- hutch sh ---------- */

static void sh_usage(FILE *out)
{
    fprintf(out, "usage: hutch sh ID [--user root] [--cwd DIR] [--env K=V]...\n"
                 "An interactive shell (bash -i -l on a pty) in sandbox ID. Exits with the "
                 "shell's status.\n");
}

int sh_main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            sh_usage(stdout);
            return 0;
        }
        return remote_usage("sh", "want a sandbox id first");
    }
    const char *id = argv[1];
    struct session_options o = {.envs = json_object()};
    optind = 2;
    int rc = session_options_parse("sh", argc, argv, &o, sh_usage);
    if (rc == 0 && optind != argc)
        rc = remote_usage("sh", "unexpected argument '%s'", argv[optind]);
    if (rc != 0) {
        json_decref(o.envs);
        return exit_of(rc);
    }
    /* as the SDK's pty.create: TERM, LANG and LC_ALL unless given */
    const char *term = getenv("TERM");
    if (!json_object_get(o.envs, "TERM"))
        json_object_set_new(o.envs, "TERM", json_string(term && term[0] ? term : "xterm-256color"));
    if (!json_object_get(o.envs, "LANG"))
        json_object_set_new(o.envs, "LANG", json_string("C.UTF-8"));
    if (!json_object_get(o.envs, "LC_ALL"))
        json_object_set_new(o.envs, "LC_ALL", json_string("C.UTF-8"));
    unsigned rows, cols;
    terminal_size(&rows, &cols);
    json_t *process =
        json_pack("{s:s, s:[s,s], s:o}", "cmd", "/bin/bash", "args", "-i", "-l", "envs", o.envs);
    if (process && o.cwd)
        json_object_set_new(process, "cwd", json_string(o.cwd));
    json_t *request = json_pack("{s:o, s:{s:{s:i, s:i}}}", "process", process, "pty", "size",
                                "cols", (int)cols, "rows", (int)rows);
    err_t err;
    struct remote_envd e;
    struct session ss = {.pty = true, .forward_input = true};
    int status = -1;
    if (!request)
        err_set(&err, 0, "an env var that is not UTF-8");
    else if (remote_envd_open(id, o.as_root, &e, &err) == 0 &&
             (!isatty(STDIN_FILENO) || terminal_make_raw(&err) == 0))
        status = session_run(&ss, &e, request, &err);
    terminal_restore();
    json_decref(request);
    if (status < 0)
        return remote_fail("sh", REMOTE_EXIT_EXEC, &err);
    return status;
}
