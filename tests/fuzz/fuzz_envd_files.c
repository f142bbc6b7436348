/* envd's filesystem requests and paths (src/api/envd_files.h): the first byte picks the call (and
 * for paths, the user), the rest (up to its first NUL) is the message JSON or the path. Checked:
 * a parsed request has a non-empty path (and destination for Move) within ENVD_PATH_MAX and a
 * depth of 1..64, or the failure has an errno, a message and a cleared request; an absolute path
 * starts with '/', keeps an absolute input as it is, and a relative one below the user's home.
 * Every input is also a watcher call's {watcherId}: taken only as 1..64 bytes of printable ASCII,
 * and a download's Range header against a file of one of a few sizes (picked by the first byte):
 * a range to serve is 1 or more bytes wholly inside the file, an empty file has none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/envd_files.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *s = strndup((const char *)data + 1, size - 1);
    err_t err = {0};
    unsigned pick = data[0] % 8;
    if (pick < 6) {
        static struct envd_fs_request r;
        if (envd_fs_request_parse((enum envd_fs_call)pick, s, &r, &err) == 0) {
            fuzz_assert(r.path[0] && strlen(r.path) <= ENVD_PATH_MAX);
            fuzz_assert(pick != ENVD_FS_MOVE || r.destination[0]);
            fuzz_assert(r.depth >= 1 && r.depth <= ENVD_LIST_DEPTH_MAX);
        } else {
            fuzz_assert(err.errnum && err.msg[0] && !r.path[0]);
        }
    } else {
        bool root = pick == 7;
        static char abs[ENVD_PATH_MAX + 1];
        if (envd_path_absolute(s, root, abs, &err) == 0) {
            fuzz_assert(abs[0] == '/');
            if (s[0] == '/')
                fuzz_assert(strcmp(abs, s) == 0);
            else
                fuzz_assert(strncmp(abs, root ? "/root" : "/home/user", root ? 5 : 10) == 0);
        } else {
            fuzz_assert(err.errnum == EINVAL || err.errnum == ENAMETOOLONG);
        }
    }
    static char id[ENVD_WATCHER_ID_MAX + 1];
    if (envd_watcher_id_parse(s, id, &err) == 0) {
        fuzz_assert(id[0] && strlen(id) <= ENVD_WATCHER_ID_MAX);
        for (const char *c = id; *c; c++)
            fuzz_assert(*c > 0x20 && *c < 0x7f);
    } else {
        fuzz_assert(err.errnum && !id[0]);
    }
    static const uint64_t sizes[] = {0, 1, 10, 100, 1ull << 40, UINT64_MAX};
    uint64_t file = sizes[(data[0] >> 3) % (sizeof sizes / sizeof sizes[0])], first = 0, len = 0;
    enum envd_range range = envd_range_parse(s, file, &first, &len);
    fuzz_assert(range == ENVD_RANGE_NONE || range == ENVD_RANGE_ONE ||
                range == ENVD_RANGE_UNSATISFIABLE);
    if (range == ENVD_RANGE_ONE)
        fuzz_assert(file > 0 && len >= 1 && first < file && len <= file - first);
    free(s);
    return 0;
}
