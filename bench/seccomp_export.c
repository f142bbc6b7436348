/* Writes hutch's built-in default seccomp program (the one sandboxes load) to stdout as raw
 * struct sock_filter records, the format bwrap --seccomp FD reads. The bwrap cases then carry
 * the same filter as hutch's, so the comparison is between equally filtered sandboxes.
 * Built by bench/run.sh together with build/gen/seccomp_builtin.c. */
#include <stdio.h>

#include "jail/seccomp.h"

int main(void)
{
    struct seccomp_program prog;
    if (seccomp_builtin(SECCOMP_PROFILE_DEFAULT, &prog) < 0) {
        fprintf(stderr, "seccomp_export: no built-in default program\n");
        return 1;
    }
    if (fwrite(prog.filter, sizeof *prog.filter, prog.len, stdout) != prog.len ||
        fflush(stdout) != 0) {
        perror("seccomp_export: write");
        return 1;
    }
    return 0;
}
