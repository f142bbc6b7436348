/* Parsers for command-line values: sizes ("64M"), durations ("1.5"), counts. Pure functions. */
#pragma once
#include <stdint.h>

/* "4096", "64k", "64K", "64KiB", "1.5G", "512MB" (binary units: K=1024). Rejects negatives,
 * junk, overflow. Returns 0 on success, -1 on bad input. */
int parse_size(const char *s, uint64_t *out);
/* Seconds with an optional fraction and optional "s"/"ms" suffix, to milliseconds:
 * "2" -> 2000, "0.25" -> 250, "150ms" -> 150. */
int parse_duration_ms(const char *s, uint64_t *out);
/* Plain decimal count in [min, max]. */
int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Human-readable size into buf ("64 MiB"). */
const char *format_size(uint64_t bytes, char *buf, unsigned size);
