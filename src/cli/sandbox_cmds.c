/* hutch create, ls, pause, resume, kill: the control plane of the daemon, through its socket. */
#include "cli/sandbox_cmds.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/control_json.h"
#include "cli/remote.h"
#include "util/parse.h"

/* The bounds the daemon takes (docs/API.md), checked here too for a usage error. */
#define CREATE_TIMEOUT_MAX API_TIMEOUT_MAX_S

static void create_usage(FILE *out)
{
    fprintf(out,
            "usage: hutch create [--template T] [--timeout S] [--cpu N] [--memory MB] "
            "[--disk MB]\n"
            "                    [--env K=V]... [--metadata K=V]... [--json]\n"
            "Creates a sandbox in the daemon (hutch serve) and prints its id (--json: the\n"
            "daemon's whole answer, with the envd access token).\n"
            "  --template T   base (default) or code-interpreter-v1\n"
            "  --timeout S    seconds until it is killed (default 300; hutch kill ends it sooner)\n"
            "  --cpu N        CPUs (default 2), --memory MB (default 512), --disk MB (default "
            "1024)\n"
            "  --env K=V      an env var of every command in it; --metadata K=V: a label\n");
}

static int number_arg(const char *cmd, const char *flag, const char *arg, uint64_t min,
                      uint64_t max, json_t *body, const char *field)
{
    uint64_t v;
    if (parse_count(arg, min, max, &v) < 0)
        return remote_usage(cmd, "%s %s: want a whole number from %llu to %llu", flag, arg,
                            (unsigned long long)min, (unsigned long long)max);
    json_object_set_new(body, field, json_integer((json_int_t)v));
    return 0;
}

int create_main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"template", required_argument, NULL, 't'}, {"timeout", required_argument, NULL, 'T'},
        {"cpu", required_argument, NULL, 'c'},      {"memory", required_argument, NULL, 'm'},
        {"disk", required_argument, NULL, 'd'},     {"env", required_argument, NULL, 'e'},
        {"metadata", required_argument, NULL, 'M'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},           {0}};
    json_t *body = json_object(), *env = json_object(), *meta = json_object();
    bool as_json = false;
    int rc = 0, c;
    err_t err;
    optind = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 't':
            json_object_set_new(body, "templateID", json_string(optarg));
            break;
        case 'T':
            rc = number_arg("create", "--timeout", optarg, 1, CREATE_TIMEOUT_MAX, body, "timeout");
            break;
        case 'c':
            rc = number_arg("create", "--cpu", optarg, 1, API_CPU_COUNT_MAX, body, "cpuCount");
            break;
        case 'm':
            rc = number_arg("create", "--memory", optarg, API_MEMORY_MB_MIN, API_MEMORY_MB_MAX,
                            body, "memoryMB");
            break;
        case 'd':
            rc = number_arg("create", "--disk", optarg, API_DISK_MB_MIN, API_DISK_MB_MAX, body,
                            "diskSizeMB");
            break;
        case 'e':
        case 'M':
            if (remote_add_pair(c == 'e' ? env : meta, optarg, c == 'e' ? "--env" : "--metadata",
                                &err) < 0)
                rc = remote_usage("create", "%s", err.msg);
            break;
        case 'j':
            as_json = true;
            break;
        case 'h':
            create_usage(stdout);
            rc = -1;
            break;
        default:
            create_usage(stderr);
            rc = REMOTE_EXIT_USAGE;
        }
    }
    if (rc == 0 && optind != argc)
        rc = remote_usage("create", "unexpected argument '%s'", argv[optind]);
    if (rc == 0) {
        if (json_object_size(env))
            json_object_set(body, "envVars", env);
        if (json_object_size(meta))
            json_object_set(body, "metadata", meta);
        json_t *sb;
        if (remote_json_call("POST", "/v2/sandboxes", body, &sb, NULL, &err) < 0) {
            rc = remote_fail("create", REMOTE_EXIT_ERROR, &err);
        } else {
            const char *id = json_string_value(json_object_get(sb, "sandboxID"));
            if (as_json) {
                json_dumpf(sb, stdout, JSON_INDENT(2));
                putchar('\n');
            } else {
                printf("%s\n", id ? id : "");
            }
            json_decref(sb);
        }
    }
    json_decref(body);
    json_decref(env);
    json_decref(meta);
    return rc < 0 ? 0 : rc;
}

/* ---------- ls ---------- */

static void ls_usage(FILE *out)
{
    fprintf(out, "usage: hutch ls [--state running|paused] [--json]\n"
                 "Lists the daemon's live sandboxes, newest first.\n");
}

static void ls_print(json_t *all)
{
    printf("%-22s %-20s %-8s %-24s %-24s %4s %7s\n", "ID", "TEMPLATE", "STATE", "STARTED", "ENDS",
           "CPU", "MEMORY");
    size_t i;
    json_t *s;
    json_array_foreach(all, i, s)
    {
        const char *alias = json_string_value(json_object_get(s, "alias"));
        const char *tpl = json_string_value(json_object_get(s, "templateID"));
        const char *state = json_string_value(json_object_get(s, "state"));
        const char *started = json_string_value(json_object_get(s, "startedAt"));
        const char *ends = json_string_value(json_object_get(s, "endAt"));
        const char *id = json_string_value(json_object_get(s, "sandboxID"));
        printf("%-22s %-20s %-8s %-24s %-24s %4lld %4lldMiB\n", id ? id : "?",
               alias && alias[0] ? alias
               : tpl             ? tpl
                                 : "?",
               state ? state : "?", started ? started : "", ends ? ends : "",
               (long long)json_integer_value(json_object_get(s, "cpuCount")),
               (long long)json_integer_value(json_object_get(s, "memoryMB")));
    }
}

int ls_main(int argc, char **argv)
{
    static const struct option longs[] = {{"state", required_argument, NULL, 's'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
    const char *state = "running,paused";
    bool as_json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            if (strcmp(optarg, "running") && strcmp(optarg, "paused"))
                return remote_usage("ls", "--state %s: want running or paused", optarg);
            state = optarg;
            break;
        case 'j':
            as_json = true;
            break;
        case 'h':
            ls_usage(stdout);
            return 0;
        default:
            ls_usage(stderr);
            return REMOTE_EXIT_USAGE;
        }
    }
    if (optind != argc)
        return remote_usage("ls", "unexpected argument '%s'", argv[optind]);
    json_t *all = json_array();
    char token[128] = "";
    err_t err;
    int rc = 0;
    do { /* every page, each after the previous one's X-Next-Token */
        char target[512];
        snprintf(target, sizeof target, "/v2/sandboxes?state=%s&limit=1000%s%s", state,
                 token[0] ? "&nextToken=" : "", token);
        struct client_response r = {0};
        if (client_call("GET", target, NULL, 0, NULL, 0, &r, &err) < 0 ||
            (r.status != 200 && client_error_from(&r, &err) < 0)) {
            rc = remote_fail("ls", REMOTE_EXIT_ERROR, &err);
            client_response_free(&r);
            break;
        }
        json_t *page = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
        if (!json_is_array(page) || !remote_id_ok(r.next_token))
            token[0] = '\0';
        else
            snprintf(token, sizeof token, "%s", r.next_token);
        client_response_free(&r);
        if (!json_is_array(page)) {
            json_decref(page);
            err_set(&err, 0, "the daemon's list is not a JSON array");
            rc = remote_fail("ls", REMOTE_EXIT_ERROR, &err);
            break;
        }
        json_array_extend(all, page);
        json_decref(page);
    } while (token[0]);
    if (rc == 0) {
        if (as_json) {
            json_dumpf(all, stdout, JSON_INDENT(2));
            putchar('\n');
        } else {
            ls_print(all);
        }
    }
    json_decref(all);
    return rc;
}

/* ---------- pause, resume, kill ---------- */

/* hutch NAME ID: one call on one sandbox. */
static int one_sandbox(const char *name, int argc, char **argv, const char *method,
                       const char *suffix, const char *body)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: hutch %s ID\n", name);
        return 0;
    }
    if (argc != 2)
        return remote_usage(name, "want one sandbox id");
    if (!remote_id_ok(argv[1]))
        return remote_usage(name, "'%.80s' is not a sandbox id", argv[1]);
    char target[128];
    snprintf(target, sizeof target, "/sandboxes/%s%s", argv[1], suffix);
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    err_t err;
    int status = 0;
    int rc = remote_json_call(method, target, j, NULL, &status, &err);
    json_decref(j);
    if (rc < 0)
        return remote_fail(name, REMOTE_EXIT_ERROR, &err);
    if (strcmp(name, "resume") == 0 && status == 200)
        fprintf(stderr, "hutch resume: %s was running already\n", argv[1]);
    return 0;
}

int pause_main(int argc, char **argv)
{
    return one_sandbox("pause", argc, argv, "POST", "/pause", "{}");
}

int resume_main(int argc, char **argv)
{
    return one_sandbox("resume", argc, argv, "POST", "/connect", "{}");
}

int kill_main(int argc, char **argv)
{
    return one_sandbox("kill", argc, argv, "DELETE", "", NULL);
}
