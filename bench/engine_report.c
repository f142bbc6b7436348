/* Samples, percentiles and the report: tables and ratios on stdout, the same (with every sample)
 * in a JSON file. Percentiles are nearest-rank, as bench/report.py computes them: the smallest
 * sample with at least p% of the samples at or below it. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

void samples_init(struct samples *s, const char *name)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
}

void samples_init_all(struct samples *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        samples_init(&s[i], names[i]);
}

void samples_free_all(struct samples *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        samples_free(&s[i]);
}

void samples_add(struct samples *s, double ms)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *grown = realloc(s->ms, cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "bench engine: out of memory for samples\n");
            return; /* the sample is lost, not the run */
        }
        s->ms = grown;
        s->cap = cap;
    }
    s->ms[s->n++] = ms;
}

void samples_free(struct samples *s)
{
    free(s->ms);
    s->ms = NULL;
    s->n = s->cap = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double nearest_rank(const double *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return sorted[(rank ? rank : 1) - 1];
}

struct summary samples_summary(const struct samples *s)
{
    struct summary sum = {.n = s->n};
    if (s->n == 0)
        return sum;
    double *sorted = malloc(s->n * sizeof *sorted);
    if (!sorted)
        return sum;
    memcpy(sorted, s->ms, s->n * sizeof *sorted);
    qsort(sorted, s->n, sizeof *sorted, cmp_double);
    double total = 0;
    for (size_t i = 0; i < s->n; i++)
        total += sorted[i];
    sum.p50 = nearest_rank(sorted, s->n, 50);
    sum.p99 = nearest_rank(sorted, s->n, 99);
    sum.min = sorted[0];
    sum.max = sorted[s->n - 1];
    sum.mean = total / (double)s->n;
    free(sorted);
    return sum;
}

/* ---------- the JSON file (jansson) ---------- */

static char *json_path;
static json_t *json_root, *json_items; /* the file, and the current benchmark's items */
static unsigned missed;

/* A finite number, or null (a ratio over a zero). */
static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Appends {"kind": kind, ...obj} to the current benchmark's items; takes obj. */
static void item_add(const char *kind, json_t *obj)
{
    if (!json_items || !obj) {
        json_decref(obj);
        return;
    }
    json_object_set_new(obj, "kind", json_string(kind));
    json_array_append_new(json_items, obj);
}

int report_open(const char *path, const char *commit, const char *command, err_t *err)
{
    struct utsname u;
    uname(&u);
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    json_path = strdup(path);
    json_root = json_pack("{s:{s:s, s:s, s:s, s:s, s:i, s:s, s:b}, s:[]}", "meta", "date", date,
                          "commit", commit ? commit : "unknown", "command", command ? command : "",
                          "kernel", u.release, "cpus", (int)sysconf(_SC_NPROCESSORS_ONLN),
                          "cgroup_mode", cgroup_mode_name(bench.mode), "cgroup_mode_forced",
                          bench.mode_forced, "benchmarks");
    if (!json_path || !json_root)
        return err_set(err, ENOMEM, "the JSON report");
    return 0;
}

void report_close(void)
{
    if (!json_root)
        return;
    json_object_set_new(json_root, "targets_missed", json_integer(missed));
    if (json_dump_file(json_root, json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(6)) < 0)
        fprintf(stderr, "bench engine: write %s failed\n", json_path);
    json_decref(json_root);
    json_root = json_items = NULL;
    free(json_path);
    json_path = NULL;
}

/* How busy the host is: the load average and the CPU pressure (the share of time some task
 * waited for a CPU over the last 10 s), from the first lines of two /proc files. */
static void host_load(double *load1, double *cpu_some10)
{
    *load1 = *cpu_some10 = -1;
    FILE *f = fopen("/proc/loadavg", "re");
    if (f) {
        if (fscanf(f, "%lf", load1) != 1)
            *load1 = -1;
        fclose(f);
    }
    f = fopen("/proc/pressure/cpu", "re");
    if (f) {
        if (fscanf(f, "some avg10=%lf", cpu_some10) != 1)
            *cpu_some10 = -1;
        fclose(f);
    }
}

void report_load(const char *when)
{
    double load1, some10;
    host_load(&load1, &some10);
    printf("host %s: load average %.2f, CPU pressure (some, 10 s) %.1f%%\n", when, load1, some10);
    char label[64];
    snprintf(label, sizeof label, "load average, %s", when);
    report_record(label, load1, "");
    snprintf(label, sizeof label, "CPU pressure some avg10, %s", when);
    report_record(label, some10, "%");
}

void report_begin(const char *name, const char *title)
{
    printf("\n== %s (cgroup mode %s%s) ==\n", title, cgroup_mode_name(bench.mode),
           bench.mode_forced ? ", forced by HUTCH_CGROUP_MODE" : "");
    if (json_root) {
        json_items = json_array();
        json_array_append_new(json_object_get(json_root, "benchmarks"),
                              json_pack("{s:s, s:o}", "name", name, "items", json_items));
    }
    report_load("before");
}

void report_end(void)
{
    report_load("after");
    json_items = NULL;
}

void report_table(const char *heading, struct samples *const *cases, size_t n)
{
    printf("\n%-44s %6s %9s %9s %9s %9s\n", heading, "n", "p50 ms", "p99 ms", "min ms", "mean ms");
    for (size_t i = 0; i < n; i++) {
        struct summary s = samples_summary(cases[i]);
        printf("%-44s %6zu %9.3f %9.3f %9.3f %9.3f\n", cases[i]->name, s.n, s.p50, s.p99, s.min,
               s.mean);
        if (!json_items)
            continue;
        json_t *ms = json_array();
        for (size_t k = 0; k < cases[i]->n; k++)
            json_array_append_new(ms, number(cases[i]->ms[k]));
        item_add("case", json_pack("{s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
                                   cases[i]->name, "n", (json_int_t)s.n, "p50_ms", number(s.p50),
                                   "p99_ms", number(s.p99), "min_ms", number(s.min), "max_ms",
                                   number(s.max), "mean_ms", number(s.mean), "ms", ms));
    }
}

void report_table_of(const char *heading, struct samples *all, const int *idx, size_t n)
{
    struct samples *cases[32];
    size_t m = 0;
    for (size_t i = 0; i < n && m < 32; i++)
        cases[m++] = &all[idx[i]];
    report_table(heading, cases, m);
}

void report_ratio(const char *label, const struct samples *num, const struct samples *den)
{
    struct summary a = samples_summary(num), b = samples_summary(den);
    double p50 = a.p50 / b.p50, p99 = a.p99 / b.p99;
    printf("ratio %-40s p50 %6.2fx   p99 %6.2fx\n", label, p50, p99);
    item_add("ratio",
             json_pack("{s:s, s:o, s:o}", "label", label, "p50", number(p50), "p99", number(p99)));
}

void report_figure(const char *label, double value, const char *unit)
{
    printf("%-52s %12.2f %s\n", label, value, unit);
    report_record(label, value, unit);
}

void report_record(const char *label, double value, const char *unit)
{
    item_add("figure",
             json_pack("{s:s, s:o, s:s}", "label", label, "value", number(value), "unit", unit));
}

bool report_target(const char *what, double value, double limit, bool at_most, const char *unit)
{
    bool met = at_most ? value <= limit : value < limit;
    missed += !met;
    printf("target %-45s %9.3f %s (%s %.2f %s): %s\n", what, value, unit, at_most ? "<=" : "<",
           limit, unit, met ? "met" : "MISSED");
    item_add("target",
             json_pack("{s:s, s:o, s:o, s:b, s:s, s:b}", "what", what, "value", number(value),
                       "limit", number(limit), "at_most", at_most, "unit", unit, "met", met));
    return met;
}

unsigned report_missed(void)
{
    return missed;
}

void report_note(const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("%s\n", text);
    item_add("note", json_pack("{s:s}", "text", text));
}
