/* The process's own argv area, which /proc/PID/cmdline shows to anyone in its pid namespace.
 * A sandbox's init is a fork of its supervisor and would otherwise show the supervisor's command
 * line (host paths, --code, --env values) to the sandbox. */
#pragma once

/* Remembers where argv's strings lie; call first thing in main. */
void proctitle_init(int argc, char **argv);
/* Whether p points into that area (whatever points there is gone after proctitle_set). */
int proctitle_contains(const void *p);
/* Overwrites that area with title (cut to fit) and zeros. Async-signal-safe. */
void proctitle_set(const char *title);
