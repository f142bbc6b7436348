/* hog: misbehaves on purpose, so the tests can watch a sandbox's limits stop it.
 *
 *   hog mem MIB     allocates MIB MiB and touches every page; prints "touched MIB" if it lived
 *   hog segv        dereferences a null pointer (a real fault, not kill -SEGV)
 *   hog fork        forks children that sleep, without end, and counts the failures; prints
 *                   "forked N, failed M" after 2 s of failures (or never, if the limit is absent
 *                   and something else stops it)
 *   hog spin        burns CPU until killed
 *
 * Exit status 0 when the hog finished its job, 2 for bad usage.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int mem(long mib)
{
    size_t len = (size_t)mib << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < len; off += (size_t)page)
        p[off] = 1;
    printf("touched %ld\n", mib);
    return 0;
}

static int forker(void)
{
    unsigned long forked = 0, failed = 0;
    time_t first_fail = 0;
    for (;;) {
        pid_t pid = fork();
        if (pid == 0) {
            pause();
            _exit(0);
        }
        if (pid > 0) {
            forked++;
            continue;
        }
        failed++;
        if (!first_fail)
            first_fail = time(NULL);
        if (time(NULL) - first_fail >= 2)
            break;
        usleep(1000);
    }
    printf("forked %lu, failed %lu\n", forked, failed);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "mem") == 0)
        return mem(atol(argv[2]));
    if (argc == 2 && strcmp(argv[1], "segv") == 0) {
        volatile int *p = NULL;
        *p = 1;
        return 1;
    }
    if (argc == 2 && strcmp(argv[1], "fork") == 0)
        return forker();
    if (argc == 2 && strcmp(argv[1], "spin") == 0)
        for (volatile unsigned long i = 0;; i++)
            ;
    fprintf(stderr, "usage: hog mem MIB | segv | fork | spin\n");
    return 2;
}
