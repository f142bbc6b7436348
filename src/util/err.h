/* Error values for long-lived code: a failing call fills an err_t and returns -1 (crun style). */
#pragma once
#include <errno.h>
#include <stddef.h>

typedef struct {
    int errnum;     /* errno of the first failure, 0 if none */
    char msg[1024]; /* "context: context: failure: strerror" */
} err_t;

/* Fills err with a formatted message, appending strerror(errnum) when errnum != 0. Returns -1. */
int err_set(err_t *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes err's message with more context ("opening x: " + old). Returns -1. */
int err_wrap(err_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_clear(err_t *err);
