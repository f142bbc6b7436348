/* sudo's pty (tty_relay.h): the command's own terminal, relayed to ours. */
#include "sudo/tty_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* After the command's end: its last output is read until the pty hangs up (every holder of the
 * slave gone), stays quiet DRAIN_QUIET_MS (a process it left behind still holds it), or for
 * DRAIN_MAX_MS in all (one left behind that writes without end must not keep sudo alive). */
#define DRAIN_QUIET_MS 100
#define DRAIN_MAX_MS   1000

static bool same_terminal(int fd, const struct stat *term)
{
    struct stat st;
    return isatty(fd) && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == term->st_rdev;
}

static int open_pty(int *slave)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -1;
    int unlock = 0;
    if (ioctl(m, TIOCSPTLCK, &unlock) < 0 ||
        (*slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
        close(m);
        return -1;
    }
    return m;
}

void tty_relay_begin(struct tty_relay *r, int stdio[3])
{
    memset(r, 0, sizeof *r);
    r->master = r->slave = r->term_in = r->term_out = -1;
    struct stat term;
    int first = -1;
    for (int i = 0; i < 3 && first < 0; i++)
        if (isatty(stdio[i]) && fstat(stdio[i], &term) == 0)
            first = i;
    if (first < 0)
        return;
    bool is_term[3];
    for (int i = 0; i < 3; i++)
        is_term[i] = same_terminal(stdio[i], &term);
    /* The pty's output (the command's, and the echo of what is typed) goes to the terminal. */
    int out = is_term[1] ? stdio[1] : is_term[2] ? stdio[2] : -1;
    if (out < 0 && is_term[0] && (fcntl(stdio[0], F_GETFL) & O_ACCMODE) != O_RDONLY)
        out = stdio[0];
    if (out < 0)
        return; /* nowhere to show it: the command gets our fds as they are */
    int slave;
    int m = open_pty(&slave);
    if (m < 0)
        return; /* no pty left in the sandbox's share: likewise */
    struct termios modes;
    struct winsize ws;
    if (tcgetattr(stdio[first], &modes) == 0)
        tcsetattr(slave, TCSANOW, &modes);
    if (ioctl(stdio[first], TIOCGWINSZ, &ws) == 0)
        ioctl(m, TIOCSWINSZ, &ws);
    r->master = m;
    r->slave = slave;
    r->term_out = out;
    for (int i = 0; i < 3; i++)
        if (is_term[i])
            stdio[i] = slave;
    /* Input only in the foreground: a background sudo reading the terminal would be stopped. */
    if (is_term[0] && tcgetpgrp(0) == getpgrp() && tcgetattr(0, &r->saved) == 0) {
        struct termios raw = r->saved;
        cfmakeraw(&raw);
        if (tcsetattr(0, TCSADRAIN, &raw) == 0) {
            r->raw = true;
            r->term_in = 0;
        }
    }
    fcntl(m, F_SETFL, O_NONBLOCK);
}

void tty_relay_started(struct tty_relay *r)
{
    if (r->slave >= 0)
        close(r->slave);
    r->slave = -1;
}

size_t tty_relay_poll(struct tty_relay *r, struct pollfd *p)
{
    if (r->master < 0)
        return 0;
    size_t n = 0;
    p[n++] = (struct pollfd){.fd = r->master, .events = POLLIN | (r->pending_len ? POLLOUT : 0)};
    if (r->term_in >= 0 && !r->pending_len)
        p[n++] = (struct pollfd){.fd = r->term_in, .events = POLLIN};
    return n;
}

/* Blocking: the terminal's reader is the user's; nothing the command wrote is dropped. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        len -= (size_t)w;
    }
}

/* What the pty has for us, up to 128 KiB a call (a writer faster than we read must not starve
 * the rest of the loop); -1 when it hung up. */
static int pump_output(struct tty_relay *r)
{
    char buf[8192];
    for (int i = 0; i < 16; i++) {
        ssize_t n = read(r->master, buf, sizeof buf);
        if (n > 0) {
            write_all(r->term_out, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -1; /* EIO: no slave left */
    }
    return 0;
}

static void pump_input(struct tty_relay *r)
{
    while (r->pending_len) {
        ssize_t w = write(r->master, r->pending + r->pending_at, r->pending_len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* full (the command does not read): later */
        r->pending_at += (size_t)w;
        r->pending_len -= (size_t)w;
    }
    r->pending_at = 0;
}

void tty_relay_ready(struct tty_relay *r, const struct pollfd *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!p[i].revents)
            continue;
        if (p[i].fd == r->master) {
            if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
                pump_output(r);
            if (p[i].revents & POLLOUT)
                pump_input(r);
        } else if (p[i].fd == r->term_in) {
            ssize_t got = read(r->term_in, r->pending, sizeof r->pending);
            if (got > 0) {
                r->pending_len = (size_t)got;
                r->pending_at = 0;
                pump_input(r);
            } else if (got == 0 || errno != EINTR) {
                r->term_in = -1; /* our terminal is gone */
            }
        }
    }
}

void tty_relay_winch(struct tty_relay *r)
{
    struct winsize ws;
    if (r->master >= 0 && ioctl(r->term_out, TIOCGWINSZ, &ws) == 0)
        ioctl(r->master, TIOCSWINSZ, &ws);
}

void tty_relay_end(struct tty_relay *r)
{
    if (r->master >= 0) {
        tty_relay_started(r);
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            struct pollfd p = {.fd = r->master, .events = POLLIN};
            int rc = poll(&p, 1, DRAIN_QUIET_MS);
            if (rc < 0 && errno == EINTR)
                continue;
            if (rc <= 0 || pump_output(r) < 0)
                break;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >=
                DRAIN_MAX_MS)
                break;
        }
        close(r->master);
        r->master = -1;
    }
    if (r->raw)
        tcsetattr(0, TCSADRAIN, &r->saved);
    r->raw = false;
}
