#include "util/proctitle.h"

#include <string.h>

static char *area_start;
static size_t area_len;

void proctitle_init(int argc, char **argv)
{
    if (argc < 1 || !argv[0])
        return;
    /* argv strings are contiguous on the initial stack; stop at the first one that is not. */
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; i++)
        end = argv[i] + strlen(argv[i]) + 1;
    area_start = argv[0];
    area_len = (size_t)(end - argv[0]);
}

int proctitle_contains(const void *p)
{
    const char *c = p;
    return area_start && c >= area_start && c < area_start + area_len;
}

void proctitle_set(const char *title)
{
    if (!area_start || area_len == 0)
        return;
    size_t n = strlen(title);
    if (n >= area_len)
        n = area_len - 1;
    memset(area_start, 0, area_len);
    memcpy(area_start, title, n);
    /* /proc/PID/cmdline shows the whole area, NULs included, when its last byte is NUL; when it
     * is not, the kernel takes the area as a setproctitle(3) title and shows it up to its first
     * NUL. Without this the title would come padded to the length of the caller's command line,
     * which tells a sandbox how long that was. */
    if (n + 1 < area_len)
        area_start[area_len - 1] = ' ';
}
