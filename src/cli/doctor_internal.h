/* Shared by the files of `hutch doctor` (src/cli/doctor*.c), not for use outside them: the
 * result every check fills in, the probe that runs a check's work in a forked child, small
 * helpers, and the checks themselves, which doctor.c lists in its table. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* A probe child that takes longer than this is stuck (e.g. in a hung mount): it is killed and
 * the check fails. Everything here normally takes milliseconds. */
#define PROBE_TIMEOUT_MS 10000

enum doctor_status { DOCTOR_OK, DOCTOR_WARN, DOCTOR_FAIL };

struct doctor_result {
    enum doctor_status status;
    char detail[1536];
};

/* Formats a check's detail into out and returns status, so that a step can end with
 * `return doctor_say(detail, size, DOCTOR_FAIL, ...)`; result_set does the same into a result. */
__attribute__((format(printf, 4, 5))) enum doctor_status
doctor_say(char *out, size_t size, enum doctor_status status, const char *fmt, ...);

#define result_set(r, st_, ...)                                                                    \
    ((r)->status = doctor_say((r)->detail, sizeof(r)->detail, (st_), __VA_ARGS__))

/* ---------- doctor_probe.c: small helpers ---------- */

uint64_t doctor_now_ms(void);
void doctor_sleep_ms(unsigned ms);
void doctor_reap(pid_t pid);
/* waitpid with a deadline. Returns 0 with *status, or -1 when the child is still running. */
int doctor_wait_bounded(pid_t pid, int *status, unsigned timeout_ms);
void doctor_describe_wait_status(int status, char *out, size_t size);
/* A sysctl-style file holding one number; -1 when it is absent or unreadable. */
long long doctor_read_number(const char *path);

/* ---------- doctor_probe.c: a check's work in a forked child ---------- */

struct probe {
    int sock;
};

typedef enum doctor_status (*probe_child_fn)(struct probe *p, void *arg, char *detail, size_t size);
typedef int (*probe_parent_fn)(pid_t pid, void *arg, err_t *err);

/* From the child: asks the parent for its step and waits until it is done. */
int doctor_probe_ask_parent(struct probe *p);
/* Runs child_fn in a forked child and puts its verdict in r. parent_fn (may be NULL) runs in
 * the parent each time the child calls probe_ask_parent. */
void doctor_probe_run(struct doctor_result *r, probe_child_fn child_fn, probe_parent_fn parent_fn,
                      void *arg);

/* ---------- the checks; doctor.c's table gives their names and order ---------- */

/* doctor_namespaces.c */
void check_userns(struct doctor_result *r);
void check_idmap(struct doctor_result *r);
void check_overlay(struct doctor_result *r);
void check_namespaces(struct doctor_result *r);
void check_clone3(struct doctor_result *r);

/* doctor_cgroups.c */
void check_cgroup_mode(struct doctor_result *r);
void check_cgroup_controllers(struct doctor_result *r);
void check_swap_accounting(struct doctor_result *r);
void check_freezer(struct doctor_result *r);
void check_cgroup_kill(struct doctor_result *r);

/* doctor_security.c */
void check_seccomp(struct doctor_result *r);
void check_landlock(struct doctor_result *r);
void check_nftables(struct doctor_result *r);

/* doctor_host.c */
void check_root(struct doctor_result *r);
void check_state_dir(struct doctor_result *r);
void check_run_dir(struct doctor_result *r);
void check_usr(struct doctor_result *r);
