/* hutch logs: a sandbox's event log (GET /sandboxes/{id}/logs, every page), as lines or, with
 * --json, the array of its structured entries. */
#include "cli/sandbox_cmds.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/remote.h"

static void logs_usage(FILE *out)
{
    fprintf(out, "usage: hutch logs ID [--json]\n"
                 "A sandbox's event log, live or ended: created, commands started and ended\n"
                 "(exit code, duration, CPU, peak memory), paused, resumed, killed and why.\n");
}

int logs_main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
    bool as_json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'j':
            as_json = true;
            break;
        case 'h':
            logs_usage(stdout);
            return 0;
        default:
            logs_usage(stderr);
            return REMOTE_EXIT_USAGE;
        }
    }
    if (argc - optind != 1)
        return remote_usage("logs", "want one sandbox id");
    const char *id = argv[optind];
    if (!remote_id_ok(id))
        return remote_usage("logs", "'%.80s' is not a sandbox id", id);
    json_t *all = json_array();
    char token[32] = "";
    err_t err;
    int rc = 0;
    do {
        char target[192];
        snprintf(target, sizeof target, "/sandboxes/%s/logs?limit=1000%s%s", id,
                 token[0] ? "&nextToken=" : "", token);
        struct client_response r = {0};
        if (client_call("GET", target, NULL, 0, NULL, 0, &r, &err) < 0 ||
            (r.status != 200 && client_error_from(&r, &err) < 0)) {
            client_response_free(&r);
            rc = remote_fail("logs", REMOTE_EXIT_ERROR, &err);
            break;
        }
        json_t *page = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
        json_t *entries = json_object_get(page, "logEntries");
        /* a next page only after a full one, with a token that moved on */
        if (json_is_array(entries) && json_array_size(entries) &&
            strspn(r.next_token, "0123456789") == strlen(r.next_token) &&
            strlen(r.next_token) < sizeof token && strcmp(r.next_token, token) != 0)
            snprintf(token, sizeof token, "%s", r.next_token);
        else
            token[0] = '\0';
        client_response_free(&r);
        if (!json_is_array(entries)) {
            json_decref(page);
            err_set(&err, 0, "the daemon's log page has no logEntries");
            rc = remote_fail("logs", REMOTE_EXIT_ERROR, &err);
            break;
        }
        json_array_extend(all, entries);
        json_decref(page);
    } while (token[0]);
    if (rc == 0 && as_json) {
        json_dumpf(all, stdout, JSON_INDENT(2));
        putchar('\n');
    } else if (rc == 0) {
        size_t i;
        json_t *e;
        json_array_foreach(all, i, e)
        {
            const char *when = json_string_value(json_object_get(e, "timestamp"));
            const char *message = json_string_value(json_object_get(e, "message"));
            printf("%s  %s\n", when ? when : "", message ? message : "");
        }
    }
    json_decref(all);
    return rc;
}
