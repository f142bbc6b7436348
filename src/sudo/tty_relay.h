/* sudo on a terminal: the command gets a pty of its own, which becomes its controlling terminal
 * (the spawner makes a tty it is given with no session its own), and this relays it to ours, as
 * sudo's `use_pty` does. Without it the command would lead a session with no terminal: no
 * /dev/tty, no job control, no ^C from the line discipline. */
#pragma once
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <termios.h>

struct tty_relay {
    int master;   /* -1: no relay (none of our stdio is a terminal) */
    int slave;    /* ours until the command has started (a busy answer means asking again) */
    int term_in;  /* the terminal read for input, or -1 (stdin is no terminal, or we are in the
                     background) */
    int term_out; /* the terminal the pty's output is written to */
    bool raw;     /* term_in is raw until tty_relay_end, as it was in `saved` before */
    struct termios saved;
    char pending[4096]; /* read from term_in, not yet taken by the pty */
    size_t pending_len, pending_at;
};

/* If one of stdio[0..2] is a terminal: opens a pty, gives it the terminal's modes and size, puts
 * its slave in every stdio slot that is that terminal, and sets the terminal raw. Otherwise (or if
 * no pty can be had) r->master is -1 and stdio is unchanged. */
void tty_relay_begin(struct tty_relay *r, int stdio[3]);
/* The command has started: our copy of the slave goes, so that the pty hangs up once it is done. */
void tty_relay_started(struct tty_relay *r);
/* Adds its fds to p (at most 2); returns how many. */
size_t tty_relay_poll(struct tty_relay *r, struct pollfd *p);
/* After poll: moves what is ready. */
void tty_relay_ready(struct tty_relay *r, const struct pollfd *p, size_t n);
/* SIGWINCH: the terminal's size, given to the pty (whose group then gets SIGWINCH). */
void tty_relay_winch(struct tty_relay *r);
/* The command ended: the rest of its output (until the pty hangs up, or is quiet for a moment),
 * then the terminal's modes as they were. Safe to call twice, and when there is no relay. */
void tty_relay_end(struct tty_relay *r);
