/* src/api/auth: tokens, constant-time comparison, the SDK's file URL signatures (vectors made
 * with node's crypto by the SDK's own formula), envd's user, the key file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/query.h"
#include "tap.h"

int main(void)
{
    char a[AUTH_TOKEN_MAX + 1], b[AUTH_TOKEN_MAX + 1];
    ok(auth_token_new("hutch_", a, sizeof a) == 0 && auth_token_new("hutch_", b, sizeof b) == 0 &&
           strlen(a) == 6 + 64 && strncmp(a, "hutch_", 6) == 0 && strcmp(a, b) != 0,
       "tokens: the prefix and 64 hex digits, fresh each time (%s)", a);
    char small[16];
    ok(auth_token_new("hutch_", small, sizeof small) < 0, "a buffer too small: refused, not cut");
    ok(auth_token_equal(a, a) && !auth_token_equal(b, a) && !auth_token_equal("", a) &&
           !auth_token_equal(NULL, a) && !auth_token_equal("hutch_", a),
       "token comparison");

    char sig[AUTH_SIGNATURE_MAX + 1];
    ok(auth_file_signature("/home/user/a.txt", "read", "user", "tok123", 0, sig, sizeof sig) == 0 &&
           strcmp(sig, "v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0") == 0,
       "a download signature as the SDK computes it (%s)", sig);
    ok(auth_file_signature("/home/user/a.txt", "write", "", "tok123", 1796329059, sig,
                           sizeof sig) == 0 &&
           strcmp(sig, "v1_fUd2ahDXK7EYa3ZkIwXMBo+k96HWT40Yx5p4ea8jNMg") == 0,
       "an upload signature with no user and an expiration (%s)", sig);
    err_t err = {0};
    /* the query of a URL the SDK made (URLSearchParams: a space as '+') */
    const char *q = "path=%2Fhome%2Fuser%2Fa+b%2B.txt&signature=v1_8mUY%2FYakbQ6c3g5IhyfTgXNrL7HA"
                    "65Ux%2BK8cDpV3cr0";
    char path[256], signature[128];
    ok(api_query_get(q, "path", path, sizeof path, &err) == 1 &&
           api_query_get(q, "signature", signature, sizeof signature, &err) == 1 &&
           strcmp(path, "/home/user/a b+.txt") == 0,
       "the SDK's URL decodes: \"%s\"", path);
    ok(auth_file_signature_check(path, "read", "user", "tok123", signature, NULL, 0, &err) == 0,
       "and its signature checks (%s)", err.msg);
    ok(auth_file_signature_check(path, "write", "user", "tok123", signature, NULL, 0, &err) < 0 &&
           err.errnum == EACCES && strstr(err.msg, "invalid signature"),
       "not for another operation");
    ok(auth_file_signature_check(path, "read", "root", "tok123", signature, NULL, 0, &err) < 0,
       "nor another user");
    ok(auth_file_signature_check(path, "read", "user", "tok124", signature, NULL, 0, &err) < 0,
       "nor another sandbox's token");
    ok(auth_file_signature_check("/home/user/a.txt", "read", "user", "", "v1_x", NULL, 0, &err) < 0,
       "a sandbox with no token signs nothing");
    auth_file_signature("/f", "read", "user", "tok", 2000, sig, sizeof sig);
    ok(auth_file_signature_check("/f", "read", "user", "tok", sig, "2000", 1999, &err) == 0,
       "an expiration not reached yet");
    ok(auth_file_signature_check("/f", "read", "user", "tok", sig, "2000", 2001, &err) < 0 &&
           err.errnum == ETIMEDOUT && strstr(err.msg, "expired"),
       "past it: expired");
    ok(auth_file_signature_check("/f", "read", "user", "tok", sig, "3000", 2001, &err) < 0 &&
           err.errnum == EACCES && strstr(err.msg, "invalid signature"),
       "an expiration moved later breaks the signature");
    ok(auth_file_signature_check("/f", "read", "user", "tok", sig, "20x0", 0, &err) < 0,
       "an expiration that is no number: refused");

    bool root = true;
    ok(auth_envd_user(NULL, NULL, &root, &err) == 0 && !root, "no user given: user");
    ok(auth_envd_user("Basic cm9vdDo=", NULL, &root, &err) == 0 && root,
       "Basic cm9vdDo= (\"root:\"): root");
    ok(auth_envd_user(NULL, "root", &root, &err) == 0 && root, "username=root: root");
    ok(auth_envd_user("Basic ZGVtbzo=", NULL, &root, &err) < 0 && err.errnum == EINVAL &&
           strstr(err.msg, "demo"),
       "a user that does not exist: refused by name (%s)", err.msg);
    ok(auth_envd_user("Bearer x", NULL, &root, &err) < 0 &&
           auth_envd_user("Basic !!!", NULL, &root, &err) < 0 &&
           auth_envd_user("Basic cm9vdA==", NULL, &root, &err) < 0,
       "another scheme, bad base64, no colon: refused");

    char dir[] = "/tmp/hutch-auth-test.XXXXXX", file[64], link[64];
    if (!mkdtemp(dir))
        return done_testing();
    snprintf(file, sizeof file, "%s/api-key", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    struct stat st;
    ok(auth_key_file_create(file, a, &err) == 0 && stat(file, &st) == 0 &&
           (st.st_mode & 0777) == 0600 && st.st_size == (off_t)strlen(a) + 1,
       "the key file: owner-only, the key and a newline");
    ok(auth_key_file_create(file, b, &err) < 0 && err.errnum == EEXIST,
       "never overwritten (EEXIST)");
    symlink("/tmp/hutch-auth-target-never", link);
    ok(auth_key_file_create(link, b, &err) < 0 && access("/tmp/hutch-auth-target-never", F_OK) < 0,
       "a symlink in its place is not followed");
    unlink(file);
    unlink(link);
    rmdir(dir);
    return done_testing();
}
