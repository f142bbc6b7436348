#include "cli/layer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/paths.h"
#include "cli/run_options.h"
#include "jail/disk_layer.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: hutch layer info NAME [--state-dir DIR]\n"
                 "       hutch layer rm NAME [--state-dir DIR]\n"
                 "\n"
                 "The disk layer of hutch run --writable-root NAME, in STATE/sandboxes/NAME:\n"
                 "  info  its size, free space and what it takes on the host's disk (JSON)\n"
                 "  rm    removes it (refused while a sandbox uses it)\n");
}

int layer_main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    const char *state_dir = hutch_state_dir();
    if (argc == 5 && strcmp(argv[3], "--state-dir") == 0)
        state_dir = argv[4];
    else if (argc != 3) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1], *name = argv[2];
    if (!run_layer_name_ok(name)) {
        fprintf(stderr, "hutch layer: bad name (see hutch run --help, --writable-root)\n");
        return 2;
    }
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/sandboxes/%s", state_dir, name) >= sizeof dir) {
        fprintf(stderr, "hutch layer: state directory too long\n");
        return 2;
    }
    err_t err = {0};
    if (strcmp(cmd, "rm") == 0) {
        if (disk_layer_remove(dir, &err) < 0) {
            fprintf(stderr, "hutch layer rm: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    if (strcmp(cmd, "info") == 0) {
        struct disk_layer_usage u;
        if (disk_layer_usage(dir, &u, &err) < 0) {
            fprintf(stderr, "hutch layer info: %s\n", err.msg);
            return 1;
        }
        printf("{\"name\":\"%s\",\"size_bytes\":%llu,\"free_bytes\":%llu,\"free_inodes\":%llu,"
               "\"host_bytes\":%llu}\n",
               name, (unsigned long long)u.size_bytes, (unsigned long long)u.free_bytes,
               (unsigned long long)u.free_inodes, (unsigned long long)u.host_bytes);
        return 0;
    }
    usage(stderr);
    return 2;
}
