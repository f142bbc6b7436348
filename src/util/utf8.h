/* UTF-8 repair for text that must go into JSON: program output is arbitrary bytes. */
#pragma once
#include <stddef.h>

/* Copies in[0..len) to a new NUL-free-safe buffer where every invalid sequence becomes U+FFFD.
 * Returns a malloc'd buffer and its length in *out_len, or NULL on allocation failure. */
char *utf8_sanitize(const char *in, size_t len, size_t *out_len);
