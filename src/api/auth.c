#include "api/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/json_input.h"
#include "util/fileio.h"
#include "util/strfmt.h"

int auth_token_new(const char *prefix, char *out, size_t size)
{
    unsigned char raw[32];
    char hex[2 * sizeof raw + 1];
    if (sodium_init() < 0)
        return -1;
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
    sodium_memzero(raw, sizeof raw);
    return strfmt(out, size, "%s%s", prefix, hex);
}

bool auth_token_equal(const char *presented, const char *expected)
{
    if (!presented || !expected || !presented[0] || !expected[0])
        return false;
    size_t n = strlen(expected);
    /* The length is no secret (every token of a kind has the same); the bytes are. */
    if (strlen(presented) != n)
        return false;
    return sodium_memcmp(presented, expected, n) == 0;
}

int auth_traffic_token(const char *envd_token, char *out, size_t size)
{
    static const unsigned char key[] = "hutch traffic access token v1";
    unsigned char raw[32];
    char hex[2 * sizeof raw + 1];
    if (sodium_init() < 0 || !envd_token || !envd_token[0] ||
        crypto_generichash(raw, sizeof raw, (const unsigned char *)envd_token, strlen(envd_token),
                           key, sizeof key - 1) < 0)
        return -1;
    sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
    return strfmt(out, size, "tt_%s", hex);
}

int auth_file_signature(const char *path, const char *operation, const char *user,
                        const char *token, int64_t expiration, char *out, size_t size)
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    const char *parts[] = {path, operation, user ? user : "", token};
    for (size_t i = 0; i < 4; i++) {
        if (i)
            crypto_hash_sha256_update(&st, (const unsigned char *)":", 1);
        crypto_hash_sha256_update(&st, (const unsigned char *)parts[i], strlen(parts[i]));
    }
    if (expiration) {
        char exp[32];
        snprintf(exp, sizeof exp, ":%lld", (long long)expiration);
        crypto_hash_sha256_update(&st, (const unsigned char *)exp, strlen(exp));
    }
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, digest);
    char b64[sodium_base64_ENCODED_LEN(crypto_hash_sha256_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof b64, digest, sizeof digest, sodium_base64_VARIANT_ORIGINAL);
    size_t n = strlen(b64);
    while (n > 0 && b64[n - 1] == '=')
        b64[--n] = '\0';
    return strfmt(out, size, "v1_%s", b64);
}

int auth_file_signature_check(const char *path, const char *operation, const char *user,
                              const char *token, const char *signature, const char *expiration,
                              int64_t now_s, err_t *err)
{
    int64_t exp = 0;
    if (expiration && expiration[0]) {
        char *end;
        errno = 0;
        long long v = strtoll(expiration, &end, 10);
        if (errno || end == expiration || *end || v <= 0)
            return api_input_error(err, EACCES,
                                   "invalid signature: signature_expiration is not a time");
        exp = v;
    }
    char want[AUTH_SIGNATURE_MAX + 1];
    if (!token || !token[0] ||
        auth_file_signature(path, operation, user, token, exp, want, sizeof want) < 0 ||
        !auth_token_equal(signature, want))
        return api_input_error(err, EACCES, "invalid signature");
    /* Checked after the signature: an expiry that was not signed tells nothing. */
    if (exp && exp < now_s)
        return api_input_error(err, ETIMEDOUT, "signature is already expired");
    return 0;
}

int auth_envd_user(const char *authorization, const char *username_param, bool *as_root, err_t *err)
{
    char user[64] = "user";
    if (authorization && authorization[0]) {
        const char *b64 = authorization;
        if (strncasecmp(b64, "Basic ", 6) != 0)
            return api_input_error(err, EINVAL, "Authorization must be Basic");
        b64 += 6;
        unsigned char raw[64];
        size_t n = 0;
        if (sodium_base642bin(raw, sizeof raw - 1, b64, strlen(b64), NULL, &n, NULL,
                              sodium_base64_VARIANT_ORIGINAL) < 0)
            return api_input_error(err, EINVAL, "Authorization is not base64");
        raw[n] = '\0';
        char *colon = memchr(raw, ':', n);
        if (!colon || strlen((char *)raw) != n)
            return api_input_error(err, EINVAL, "Authorization must be base64(\"user:\")");
        *colon = '\0';
        snprintf(user, sizeof user, "%s", (char *)raw);
    } else if (username_param && username_param[0]) {
        if (strfmt(user, sizeof user, "%s", username_param) < 0)
            return api_input_error(err, EINVAL, "the username is too long");
    }
    if (strcmp(user, "root") != 0 && strcmp(user, "user") != 0)
        return api_input_error(err, EINVAL, "user \"%.32s\" does not exist (user or root)", user);
    *as_root = strcmp(user, "root") == 0;
    return 0;
}

int auth_key_file_create(const char *path, const char *key, err_t *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, errno, "create %s", path);
    size_t n = strlen(key);
    int rc = 0;
    if (fd_write_all(fd, key, n) < 0 || fd_write_all(fd, "\n", 1) < 0 || fsync(fd) < 0)
        rc = err_set(err, errno, "write %s", path);
    close(fd);
    if (rc < 0)
        unlink(path);
    return rc;
}
