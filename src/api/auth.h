/* Who may do what (DESIGN.md, "API"): API keys for the control plane, each sandbox's envd access
 * token for its envd traffic, and the signed file URLs the SDK makes from that token
 * (`downloadUrl`/`uploadUrl`: "v1_" + base64(SHA-256("path:operation:user:token[:expiry]")),
 * padding stripped, e2b@2.51 src/sandbox/signature.ts). libsodium for randomness, hashing and
 * constant-time comparison. Pure functions but for the key file. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* A fresh token: prefix then 64 hex digits of 32 random bytes. out holds AUTH_TOKEN_MAX + 1. */
#define AUTH_TOKEN_MAX 96
int auth_token_new(const char *prefix, char *out, size_t size);
/* Whether a presented token equals the expected one, in time that depends on neither's
 * contents (NULL or empty presented: false). */
bool auth_token_equal(const char *presented, const char *expected);

/* A sandbox's traffic token (the create answer's trafficAccessToken, which
 * `@e2b/code-interpreter` sends as E2B-Traffic-Access-Token on its /contexts calls, where it sends
 * no X-Access-Token): "tt_" and 64 hex digits of a keyed BLAKE2b of the envd token, so that it
 * needs no storage of its own, survives a restart, and tells nothing of the envd token.
 * out holds AUTH_TOKEN_MAX + 1. */
int auth_traffic_token(const char *envd_token, char *out, size_t size);

/* The signature the SDK puts in a file URL; out holds AUTH_SIGNATURE_MAX + 1. expiration 0:
 * none. user "" when the URL has no username. */
#define AUTH_SIGNATURE_MAX 64
int auth_file_signature(const char *path, const char *operation, const char *user,
                        const char *token, int64_t expiration, char *out, size_t size);
/* Checks a file URL's signature (and its expiration, when given, against now_s): 0, or -1 with
 * err in envd's words: EACCES "invalid signature", or ETIMEDOUT "signature is already expired"
 * (the signature matched: the URL is this token's). operation "read" for a download, "write"
 * for an upload. */
int auth_file_signature_check(const char *path, const char *operation, const char *user,
                              const char *token, const char *signature, const char *expiration,
                              int64_t now_s, err_t *err);

/* The user an envd request is for: from "Authorization: Basic base64(user:)" when present,
 * else from the username query parameter, else "user". Only "user" and "root" exist: anything
 * else is -1 with err (EINVAL). *as_root set. */
int auth_envd_user(const char *authorization, const char *username_param, bool *as_root,
                   err_t *err);

/* Writes key to path, created owner-only (0600) and new: an existing file (or a symlink in its
 * place) is EEXIST/ELOOP, never overwritten. */
int auth_key_file_create(const char *path, const char *key, err_t *err);
