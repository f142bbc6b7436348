/* The programs embedded at build time are exactly what libseccomp compiles from the policy now:
 * a stale generated file would make sandboxes run an old policy. */
#include <stdlib.h>

#include "jail/seccomp.h"
#include "tap.h"

static void same_program(enum seccomp_profile profile)
{
    struct seccomp_program built, fresh;
    err_t err;
    ok(seccomp_builtin(profile, &built) == 0, "%s: embedded program exists",
       seccomp_profile_name(profile));
    ok(seccomp_compile(profile, &fresh, &err) == 0, "%s: compiles", seccomp_profile_name(profile));
    ok(built.len == fresh.len && built.len > 0 &&
           memcmp(built.filter, fresh.filter, built.len * sizeof built.filter[0]) == 0,
       "%s: embedded (%u instructions) equals compiled (%u)", seccomp_profile_name(profile),
       built.len, fresh.len);
    seccomp_program_free(&fresh);
}

int main(void)
{
    same_program(SECCOMP_PROFILE_DEFAULT);
    same_program(SECCOMP_PROFILE_STRICT);
    same_program(SECCOMP_PROFILE_INIT);
    struct seccomp_program p;
    ok(seccomp_builtin((enum seccomp_profile)7, &p) < 0, "unknown profile refused");
    return done_testing();
}
