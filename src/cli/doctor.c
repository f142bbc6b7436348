/* `hutch doctor`: tries, one at a time, each host feature `hutch run` needs, and says which work.
 *
 * Every check does the thing for real (creates the namespace, mounts the overlay, freezes a
 * cgroup, installs the filter) instead of reading a version number: distribution kernels
 * backport and configure features differently, and an LSM, a sysctl or a container runtime can
 * refuse what the version promises. Whatever a check changes about a process (namespaces,
 * seccomp, Landlock, mounts) happens in a forked child and dies with it; whatever it creates on
 * the host (cgroups, temporary directories, the state directory when it was missing) it removes
 * before it returns.
 *
 * A FAIL is something `hutch run` cannot work without; a warn is a weaker sandbox or a feature
 * that is not used yet. The exit status is 1 when any check failed.
 *
 * This file holds the table of checks and the report. The checks live by concern in
 * doctor_namespaces.c, doctor_cgroups.c, doctor_security.c and doctor_host.c; the forked-child
 * probe they share in doctor_probe.c (declared in doctor_internal.h). */
#include "cli/doctor.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/doctor_internal.h"
#include "util/cleanup.h"
#include "util/utf8.h"

/* ---------- the table and the report ---------- */

struct doctor_check {
    const char *name;
    void (*run)(struct doctor_result *r);
};

static const struct doctor_check checks[] = {
    {"root", check_root},
    {"user-namespaces", check_userns},
    {"overlay-in-userns", check_overlay},
    {"writable-root-idmap", check_idmap},
    {"namespaces", check_namespaces},
    {"clone3-pidfd", check_clone3},
    {"cgroup-mode", check_cgroup_mode},
    {"cgroup-controllers", check_cgroup_controllers},
    {"memory-swap-accounting", check_swap_accounting},
    {"freezer", check_freezer},
    {"cgroup-kill", check_cgroup_kill},
    {"seccomp", check_seccomp},
    {"landlock", check_landlock},
    {"nftables", check_nftables},
    {"state-dir", check_state_dir},
    {"run-dir", check_run_dir},
    {"usr-path", check_usr},
};
#define CHECK_COUNT (sizeof checks / sizeof checks[0])

static const char *status_word(enum doctor_status s, bool json)
{
    switch (s) {
    case DOCTOR_OK:
        return json ? "ok" : "ok  ";
    case DOCTOR_WARN:
        return "warn";
    case DOCTOR_FAIL:
        return json ? "fail" : "FAIL";
    }
    return "?";
}

static json_t *json_clean_string(const char *text)
{
    size_t len;
    cleanup_free char *clean = utf8_sanitize(text, strlen(text), &len);
    return clean ? json_stringn(clean, len) : json_string("");
}

static void usage(FILE *out)
{
    fprintf(out, "usage: hutch doctor [--json]\n"
                 "\n"
                 "Tries each host feature hutch run needs and prints one line per check:\n"
                 "  ok   NAME: what was tried\n"
                 "  warn NAME: works, but weaker or not used yet\n"
                 "  FAIL NAME: what is missing and how to fix it\n"
                 "--json prints a JSON array of {name, status: ok|warn|fail, detail} instead.\n"
                 "Exit status: 0 when everything hutch run needs works, 1 otherwise.\n");
}

int doctor_main(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "hutch doctor: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    json_t *array = json ? json_array() : NULL;
    if (json && !array) {
        fprintf(stderr, "hutch doctor: out of memory\n");
        return 1;
    }
    unsigned counts[3] = {0, 0, 0};
    for (size_t i = 0; i < CHECK_COUNT; i++) {
        struct doctor_result r = {.status = DOCTOR_OK, .detail = ""};
        checks[i].run(&r);
        counts[r.status]++;
        if (json) {
            json_t *entry =
                json_pack("{s:s, s:s, s:o}", "name", checks[i].name, "status",
                          status_word(r.status, true), "detail", json_clean_string(r.detail));
            if (!entry || json_array_append_new(array, entry) < 0) {
                fprintf(stderr, "hutch doctor: out of memory\n");
                json_decref(array);
                return 1;
            }
        } else {
            printf("%s %s: %s\n", status_word(r.status, false), checks[i].name, r.detail);
            fflush(stdout);
        }
    }
    if (json) {
        json_dumpf(array, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(array);
    } else {
        printf("\n%u ok, %u warn, %u FAIL: %s\n", counts[DOCTOR_OK], counts[DOCTOR_WARN],
               counts[DOCTOR_FAIL],
               counts[DOCTOR_FAIL] ? "hutch run will not work on this host until the FAIL lines "
                                     "are fixed"
                                   : "hutch run can work on this host");
    }
    return counts[DOCTOR_FAIL] ? 1 : 0;
}
