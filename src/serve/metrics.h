/* A sandbox's metrics as E2B's getMetrics() reads them: sampled by the daemon on a timer while
 * the sandbox runs (the first sample half a second after it starts or resumes, then every
 * METRICS_INTERVAL_MS), kept in a bounded ring in memory (METRICS_RING_MAX samples: an hour).
 *
 * A sample reads the sandbox's cgroup through the engine (cgroup_read_cpu_ns,
 * cgroup_read_memory: a few small files) and statfs of its root, whose overlay reports the disk
 * layer it writes to: nothing that waits. CPU is the cgroup's CPU time over the interval, as a
 * share of the sandbox's cpuCount (100: all of them busy); memUsed leaves out the page cache,
 * which is memCache, as envd's figures do; memTotal is the cgroup's limit.
 *
 * No samples are taken while the sandbox is paused (E2B's paused sandboxes send none either);
 * what was sampled before stays queryable. Each sample is also kept in the store (the last
 * METRICS_RING_MAX intervals of it), so a restarted daemon fills a reopened sandbox's ring from
 * there (metrics_restore) and answers for the hour before the restart too; a killed sandbox's
 * samples go with it. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "api/metrics_json.h"

#define METRICS_FIRST_MS    500
#define METRICS_INTERVAL_MS 5000
#define METRICS_RING_MAX    720

struct sbx;

/* The sandbox runs (created, resumed, reopened running): a CPU baseline now, the first sample
 * METRICS_FIRST_MS later, then one every METRICS_INTERVAL_MS. */
void metrics_start(struct sbx *sb);
/* A sandbox reopened by a restarted daemon (running or paused): its ring is the store's samples,
 * read when first asked for (a restart reopens a thousand sandboxes at once). */
void metrics_restore(struct sbx *sb);
/* It pauses or ends: no more samples; the ring stays. */
void metrics_stop(struct sbx *sb);
/* Its struct sbx goes: the ring and the timer with it. */
void metrics_free(struct sbx *sb);
/* The samples with start_s <= timestampUnix <= end_s, oldest first, into out (at most max);
 * returns how many. */
size_t metrics_between(struct sbx *sb, int64_t start_s, int64_t end_s, struct api_metric *out,
                       size_t max);
/* The latest sample, or NULL when there is none. */
const struct api_metric *metrics_latest(struct sbx *sb);
