/* counters: takes as much as it can of one kernel counter that is charged per user, says how
 * much it got, and can hold it while another process (on the host, or another sandbox) checks
 * that it still gets its own. For the per-sandbox shares (src/jail/shares.c) and socket memory.
 *
 *   counters take KIND [MAX] [hold]   takes up to MAX (default 1,000,000) of KIND and prints
 *                                     "KIND N errno E" (E: what stopped it, 0 if MAX did); with
 *                                     "hold", prints "READY" and sleeps until killed
 *   counters try KIND                 takes one; prints "ok" or "errno E" (exit 0 either way)
 *
 * KIND: inotify (instances), watch (inotify watches, on files it makes in the cwd), sigqueue
 * (queued real-time signals), timer (POSIX timers, each holds a queued signal), pty (opened
 * /dev/ptmx), tcp and udp (bytes of socket buffers queued on loopback: MAX is in KiB there),
 * unix (bytes queued in unix stream socket pairs, MAX in KiB).
 * Exit status 0, 2 for bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

static int watch_dir = -1;

/* Keeps what was taken until killed. */
_Noreturn static void hold_forever(void)
{
    printf("READY\n");
    fflush(stdout);
    for (;;)
        pause();
}

static int take_inotify(void)
{
    return inotify_init1(IN_CLOEXEC) < 0 ? -1 : 0;
}

static int take_watch(void)
{
    static int ifd = -1;
    static unsigned long n;
    if (ifd < 0 && (ifd = inotify_init1(IN_CLOEXEC)) < 0)
        return -1;
    char name[32];
    snprintf(name, sizeof name, "w%lu", n++);
    int fd = openat(watch_dir, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return inotify_add_watch(ifd, name, IN_MODIFY) < 0 ? -1 : 0;
}

static int take_sigqueue(void)
{
    union sigval v = {.sival_int = 0};
    return sigqueue(getpid(), SIGRTMIN, v);
}

static int take_timer(void)
{
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN};
    timer_t t;
    return timer_create(CLOCK_MONOTONIC, &ev, &t);
}

static int take_pty(void)
{
    return open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC) < 0 ? -1 : 0;
}

static long long meminfo(int fd, int which)
{
    unsigned int m[SK_MEMINFO_VARS];
    socklen_t len = sizeof m;
    if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, m, &len) < 0)
        return 0;
    return m[which];
}

/* One loopback pair filled until the kernel takes no more; returns the bytes it holds, or -1
 * when no pair could be made. */
static long long fill_pair(int type)
{
    static char buf[65536];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    int rx = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (rx < 0 || bind(rx, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(rx, (struct sockaddr *)&a, &alen) < 0)
        return -1;
    int tx;
    if (type == SOCK_STREAM) {
        if (listen(rx, 1) < 0)
            return -1;
        tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (tx < 0 || connect(tx, (struct sockaddr *)&a, sizeof a) < 0)
            return -1;
        int acc = accept4(rx, NULL, NULL, SOCK_CLOEXEC);
        if (acc < 0)
            return -1;
        close(rx);
        rx = acc;
    } else {
        tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (tx < 0 || connect(tx, (struct sockaddr *)&a, sizeof a) < 0)
            return -1;
    }
    fcntl(tx, F_SETFL, O_NONBLOCK);
    /* TCP: full when a send would block (after a moment for loopback to move what it can to
     * the receiver). UDP drops what does not fit at the receiver instead of blocking: full when
     * the receive queue stops growing. */
    long long last = -1;
    for (int stalls = 0; stalls < 5;) {
        ssize_t n = send(tx, buf, type == SOCK_STREAM ? sizeof buf : 8192, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != ENOMEM)
            break;
        long long now = meminfo(rx, SK_MEMINFO_RMEM_ALLOC) + meminfo(tx, SK_MEMINFO_WMEM_QUEUED);
        stalls = n < 0 || now <= last ? stalls + 1 : 0;
        if (n < 0)
            usleep(200);
        last = now;
    }
    return meminfo(rx, SK_MEMINFO_RMEM_ALLOC) + meminfo(tx, SK_MEMINFO_WMEM_QUEUED);
}

/* A unix stream pair filled until a send would block; returns the bytes written. */
static long long fill_unix_pair(void)
{
    static char buf[65536];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
        return -1;
    long long total = 0;
    for (;;) {
        ssize_t n = send(sv[0], buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0)
            return total;
        total += n;
    }
}

static int sockets(const char *kind, long long max_kib, int hold)
{
    int type = strcmp(kind, "tcp") == 0 ? SOCK_STREAM : SOCK_DGRAM;
    int unix_kind = strcmp(kind, "unix") == 0;
    long long total = 0;
    int pairs = 0, err = 0, empty = 0;
    while (total < max_kib * 1024 && empty < 3) {
        long long got = unix_kind ? fill_unix_pair() : fill_pair(type);
        if (got < 0) {
            err = errno;
            break;
        }
        pairs++;
        total += got;
        /* A pair that took (almost) nothing: the limit is reached. */
        empty = got < 4096 ? empty + 1 : 0;
    }
    printf("%s %lld pairs %d errno %d\n", kind, total, pairs, err);
    if (hold)
        hold_forever();
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3)
        goto usage;
    const char *kind = argv[2];
    struct {
        const char *name;
        int (*take)(void);
    } kinds[] = {{"inotify", take_inotify},
                 {"watch", take_watch},
                 {"sigqueue", take_sigqueue},
                 {"timer", take_timer},
                 {"pty", take_pty}};
    /* Queued signals stay queued: blocked, never delivered. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    watch_dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (strcmp(argv[1], "take") == 0) {
        long long max = argc > 3 && strcmp(argv[3], "hold") != 0 ? atoll(argv[3]) : 1000000;
        int hold = strcmp(argv[argc - 1], "hold") == 0;
        if (strcmp(kind, "tcp") == 0 || strcmp(kind, "udp") == 0 || strcmp(kind, "unix") == 0)
            return sockets(kind, max, hold);
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            if (strcmp(kind, kinds[k].name) != 0)
                continue;
            long long n = 0;
            int err = 0;
            while (n < max) {
                if (kinds[k].take() < 0) {
                    err = errno;
                    break;
                }
                n++;
            }
            printf("%s %lld errno %d\n", kind, n, err);
            if (hold)
        hold_forever();
    return 0;
        }
    } else if (strcmp(argv[1], "try") == 0) {
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            if (strcmp(kind, kinds[k].name) != 0)
                continue;
            if (kinds[k].take() < 0)
                printf("errno %d\n", errno);
            else
                printf("ok\n");
            return 0;
        }
    }
usage:
    fprintf(stderr, "usage: counters take KIND [MAX] [hold] | counters try KIND\n");
    return 2;
}
