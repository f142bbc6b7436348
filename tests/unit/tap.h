/* Minimal TAP producer for unit tests: each check prints "ok N - name" or "not ok N - name". */
#pragma once
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strfmt.h"

static int tap_count, tap_failed;

#define ok(cond, ...)                                                                              \
    do {                                                                                           \
        int ok_ = !!(cond);                                                                        \
        tap_count++;                                                                               \
        if (!ok_)                                                                                  \
            tap_failed++;                                                                          \
        printf("%sok %d - ", ok_ ? "" : "not ", tap_count);                                        \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        if (!ok_)                                                                                  \
            printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
    } while (0)

#define is_u64(got, want, ...)                                                                     \
    do {                                                                                           \
        uint64_t g_ = (got), w_ = (want);                                                          \
        ok(g_ == w_, __VA_ARGS__);                                                                 \
        if (g_ != w_)                                                                              \
            printf("#   got %" PRIu64 ", want %" PRIu64 "\n", g_, w_);                             \
    } while (0)

#define is_str(got, want, ...)                                                                     \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        int same_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_;                                   \
        ok(same_, __VA_ARGS__);                                                                    \
        if (!same_)                                                                                \
            printf("#   got \"%s\", want \"%s\"\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)");       \
    } while (0)

/* A test's own path or name, never cut: one too long for its buffer ends the test. */
#define tap_path(buf, size, ...)                                                                   \
    do {                                                                                           \
        if (strfmt((buf), (size), __VA_ARGS__) < 0) {                                              \
            printf("Bail out! %s:%d: %s is too long\n", __FILE__, __LINE__, #buf);                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
/* A message for people into why[size]: cut visibly ("...") if it must be. */
#define tap_why(why, size, ...)                                                                    \
    do {                                                                                           \
        (why)[0] = '\0';                                                                           \
        strfmt_text_append((why), (size), __VA_ARGS__);                                            \
    } while (0)

static inline int done_testing(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}
