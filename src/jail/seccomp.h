/* Seccomp policy: compiled once in the parent with libseccomp, installed last in the child with a
 * raw seccomp(2) call (no allocation, no library state after fork). */
#pragma once
#include <linux/filter.h>
#include "util/err.h"

enum seccomp_profile {
    SECCOMP_PROFILE_DEFAULT, /* allow by default, deny kernel attack surface (DESIGN.md) */
    SECCOMP_PROFILE_STRICT,  /* default plus more denials, for untrusted one-shot code */
    SECCOMP_PROFILE_INIT,    /* the sandbox's init: waits, reports, exits; nothing else. Not
                                selectable by users (seccomp_profile_parse refuses it) */
    SECCOMP_PROFILE_AGENT,   /* init as an agent: its poll loop, sockets, reaping, signals to
                                commands; no exec, fork, mount or namespace call. Not selectable */
    SECCOMP_PROFILE_FILES,   /* the agent's files workers: file calls beneath the root, inotify,
                                their socket to init; no exec, fork, socket creation, signal,
                                identity change, mount or namespace call. Not selectable */
};

struct seccomp_program {
    struct sock_filter *filter;
    unsigned short len;
};

int seccomp_profile_parse(const char *name, enum seccomp_profile *out);
const char *seccomp_profile_name(enum seccomp_profile profile);
/* Builds the BPF program for profile (native arch; foreign arches and x32 are killed). */
int seccomp_compile(enum seccomp_profile profile, struct seccomp_program *out, err_t *err);
/* Writes the profile as libseccomp PFC text to fd (for `hutch doctor`/debugging). */
int seccomp_dump_pfc(enum seccomp_profile profile, int fd, err_t *err);
void seccomp_program_free(struct seccomp_program *prog);
/* The programs compiled at build time by tools/seccomp_gen.c (build/gen/seccomp_builtin.c):
 * static storage, never freed. This is what sandboxes load: no compiling per run. -1 if the
 * profile is unknown. */
int seccomp_builtin(enum seccomp_profile profile, struct seccomp_program *out);
/* In the child, after no_new_privs: returns 0, or -1 with errno set. Async-signal-safe. */
int seccomp_install(const struct seccomp_program *prog);
