/* Scope-bound cleanup for locals (bubblewrap style). steal_pointer/steal_fd hand ownership on. */
#pragma once
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>
#include <stdio.h>

static inline void cleanup_freep(void *p)
{
    free(*(void **)p);
}
static inline void cleanup_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
static inline void cleanup_closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}
static inline void cleanup_fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define cleanup_free     __attribute__((cleanup(cleanup_freep)))
#define cleanup_fd       __attribute__((cleanup(cleanup_closep)))
#define cleanup_dir      __attribute__((cleanup(cleanup_closedirp)))
#define cleanup_file     __attribute__((cleanup(cleanup_fclosep)))

/* Type-checked: the result has the pointer's own type. */
#define steal_pointer(pp)                                                                          \
    ({                                                                                             \
        __typeof__(*(pp)) stolen_ = *(pp);                                                         \
        *(pp) = NULL;                                                                              \
        stolen_;                                                                                   \
    })

static inline int steal_fd(int *fd)
{
    int stolen = *fd;
    *fd = -1;
    return stolen;
}
