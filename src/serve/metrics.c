/* A sandbox's metrics: the sampler, its ring, and the samples kept in the store (metrics.h). */
#include "serve/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <uv.h>

#include "jail/cgroup.h"
#include "sandbox/store.h"
#include "serve/sandbox.h"

struct sbx_metrics {
    struct sbx *sb; /* NULL once the sandbox let go of it (the timer is closing) */
    uv_timer_t timer;
    bool running;
    bool store_failed; /* a sample could not be kept: said once */
    bool from_store;   /* reopened: the ring is read from the store when first asked for */
    uint64_t last_cpu_ns, last_mono_ns; /* the previous sample's, for the CPU share */
    struct api_metric *ring;
    size_t cap, head, n; /* ring[head] is the oldest of n */
};

static void on_closed(uv_handle_t *h)
{
    struct sbx_metrics *m = h->data;
    free(m->ring);
    free(m);
}

static void ring_push(struct sbx_metrics *m, const struct api_metric *s)
{
    if (m->n == m->cap && m->cap < METRICS_RING_MAX) {
        /* grown as samples come, so an idle daemon's many short sandboxes cost little */
        size_t cap = m->cap ? m->cap * 2 : 16;
        if (cap > METRICS_RING_MAX)
            cap = METRICS_RING_MAX;
        struct api_metric *grown = malloc(cap * sizeof *grown);
        if (!grown)
            return;
        for (size_t i = 0; i < m->n; i++)
            grown[i] = m->ring[(m->head + i) % m->cap];
        free(m->ring);
        m->ring = grown;
        m->cap = cap;
        m->head = 0;
    }
    if (m->n < m->cap) {
        m->ring[(m->head + m->n++) % m->cap] = *s;
        return;
    }
    m->ring[m->head] = *s; /* full: the oldest goes */
    m->head = (m->head + 1) % m->cap;
}

/* A sample as the store keeps it (src/sandbox knows no API types), and back. */
static struct store_metric stored(const struct api_metric *s)
{
    return (struct store_metric){.at_ms = s->at_ms,
                                 .cpu_count = s->cpu_count,
                                 .cpu_used_pct = s->cpu_used_pct,
                                 .mem_used = s->mem_used,
                                 .mem_total = s->mem_total,
                                 .mem_cache = s->mem_cache,
                                 .disk_used = s->disk_used,
                                 .disk_total = s->disk_total};
}

static struct api_metric from_store(const struct store_metric *k)
{
    return (struct api_metric){.at_ms = k->at_ms,
                               .cpu_count = k->cpu_count,
                               .cpu_used_pct = k->cpu_used_pct,
                               .mem_used = k->mem_used,
                               .mem_total = k->mem_total,
                               .mem_cache = k->mem_cache,
                               .disk_used = k->disk_used,
                               .disk_total = k->disk_total};
}

static void sample(struct sbx_metrics *m)
{
    struct sbx *sb = m->sb;
    if (!sb || !sb->have_jail || !sb->jail.cgroup)
        return;
    err_t err;
    uint64_t cpu_ns = 0, mono_ns = jail_now_ns();
    struct cgroup_memory mem;
    if (cgroup_read_cpu_ns(sb->jail.cgroup, &cpu_ns, &err) < 0 ||
        cgroup_read_memory(sb->jail.cgroup, &mem, &err) < 0) {
        fprintf(stderr, "hutch serve: %s: metrics: %s\n", sb->id, err.msg);
        return;
    }
    struct api_metric s = {.at_ms = sbx_wall_ms(), .cpu_count = sb->cpu_count};
    uint64_t wall = mono_ns - m->last_mono_ns;
    if (wall > 0 && sb->cpu_count > 0 && cpu_ns >= m->last_cpu_ns) {
        double pct = (double)(cpu_ns - m->last_cpu_ns) * 100.0 / ((double)wall * sb->cpu_count);
        s.cpu_used_pct = pct > 100.0 ? 100.0 : pct;
    }
    m->last_cpu_ns = cpu_ns;
    m->last_mono_ns = mono_ns;
    s.mem_cache = mem.cache_bytes;
    s.mem_used = mem.current_bytes > mem.cache_bytes ? mem.current_bytes - mem.cache_bytes : 0;
    s.mem_total = mem.limit_bytes ? mem.limit_bytes : (uint64_t)sb->memory_mb << 20;
    /* init's root is the sandbox's overlay, whose statfs is its upper layer's: the disk layer */
    char root[64];
    struct statfs fs;
    snprintf(root, sizeof root, "/proc/%d/root", (int)sb->jail.pid);
    if (statfs(root, &fs) == 0) {
        s.disk_total = (uint64_t)fs.f_blocks * (uint64_t)fs.f_bsize;
        s.disk_used = (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
    }
    ring_push(m, &s);
    /* Kept for a restarted daemon; the sample stands in the ring regardless. */
    struct store_metric kept = stored(&s);
    if (store_metric_add(sb->d->store, sb->id, &kept,
                         s.at_ms - (int64_t)METRICS_RING_MAX * METRICS_INTERVAL_MS, &err) < 0 &&
        !m->store_failed) {
        fprintf(stderr, "hutch serve: %s: metrics not kept: %s\n", sb->id, err.msg);
        m->store_failed = true; /* said once per sandbox */
    }
}

static void on_tick(uv_timer_t *t)
{
    struct sbx_metrics *m = t->data;
    if (m->running)
        sample(m);
}

/* sb's sampler, made on first use; NULL without memory (the sandbox runs regardless). */
static struct sbx_metrics *metrics_of(struct sbx *sb)
{
    struct sbx_metrics *m = sb->metrics;
    if (!m) {
        m = calloc(1, sizeof *m);
        if (!m)
            return NULL;
        m->sb = sb;
        uv_timer_init(sb->d->loop, &m->timer);
        m->timer.data = m;
        sb->metrics = m;
    }
    return m;
}

void metrics_restore(struct sbx *sb)
{
    struct sbx_metrics *m = metrics_of(sb);
    if (m)
        m->from_store = true; /* read when first asked for: a restart reopens many at once */
}

/* The ring as the store has it: every sample, the ones since the restart included (each was
 * kept as it was taken). If the store cannot say, the ring stays as it is. */
static void load_kept(struct sbx_metrics *m)
{
    if (!m->from_store || !m->sb)
        return;
    m->from_store = false;
    struct store_metric *kept = malloc(METRICS_RING_MAX * sizeof *kept);
    err_t err;
    int n = kept ? store_metric_list(m->sb->d->store, m->sb->id, kept, METRICS_RING_MAX, &err) : 0;
    if (n < 0)
        fprintf(stderr, "hutch serve: %s: earlier metrics not read: %s\n", m->sb->id, err.msg);
    if (n > 0)
        m->n = m->head = 0;
    for (int i = 0; i < n; i++) {
        struct api_metric s = from_store(&kept[i]);
        ring_push(m, &s);
    }
    free(kept);
}

void metrics_start(struct sbx *sb)
{
    struct sbx_metrics *m = metrics_of(sb);
    if (!m)
        return;
    m->running = true;
    m->last_mono_ns = jail_now_ns();
    m->last_cpu_ns = 0;
    err_t err;
    if (sb->have_jail && sb->jail.cgroup)
        cgroup_read_cpu_ns(sb->jail.cgroup, &m->last_cpu_ns, &err);
    uv_timer_start(&m->timer, on_tick, METRICS_FIRST_MS, METRICS_INTERVAL_MS);
}

void metrics_stop(struct sbx *sb)
{
    if (!sb->metrics)
        return;
    sb->metrics->running = false;
    uv_timer_stop(&sb->metrics->timer);
}

void metrics_free(struct sbx *sb)
{
    struct sbx_metrics *m = sb->metrics;
    if (!m)
        return;
    sb->metrics = NULL;
    m->sb = NULL;
    uv_close((uv_handle_t *)&m->timer, on_closed);
}

size_t metrics_between(struct sbx *sb, int64_t start_s, int64_t end_s, struct api_metric *out,
                       size_t max)
{
    struct sbx_metrics *m = sb->metrics;
    if (m)
        load_kept(m);
    size_t got = 0;
    for (size_t i = 0; m && i < m->n && got < max; i++) {
        const struct api_metric *s = &m->ring[(m->head + i) % m->cap];
        int64_t at = s->at_ms / 1000;
        if (at >= start_s && at <= end_s)
            out[got++] = *s;
    }
    return got;
}

const struct api_metric *metrics_latest(struct sbx *sb)
{
    struct sbx_metrics *m = sb->metrics;
    if (m)
        load_kept(m);
    if (!m || m->n == 0)
        return NULL;
    return &m->ring[(m->head + m->n - 1) % m->cap];
}
