/* Shared by the fuzz targets and by driver.c, which runs them without libFuzzer. A target checks
 * properties of the parser's output with fuzz_assert(); a violation names itself and aborts, which
 * both libFuzzer and the driver report as a failure with the input that caused it. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn, unused)) static void fuzz_fail(const char *cond, const char *file,
                                                        int line)
{
    fprintf(stderr, "fuzz: property violated at %s:%d: %s\n", file, line, cond);
    abort();
}

#define fuzz_assert(cond) ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))
