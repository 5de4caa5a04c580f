/* Statistics: spry_stats_get, spry_stats_print; see stats.h. */
#include "stats.h"
#include "options.h"
#include "fmt.h"
#include "os.h"
#include "heap.h"
#include "../include/spry.h"

spry_stat_counters_t spry_stat;

static void stat_sub_saturating(_Atomic(size_t) *c, size_t v) {
    /* Estimates can cross (a purge of memory already counted clean); never wrap. */
    size_t cur = atomic_load_explicit(c, memory_order_relaxed);
    size_t next;
    do { next = cur > v ? cur - v : 0; }
    while (!atomic_compare_exchange_weak_explicit(c, &cur, next,
                                                  memory_order_relaxed, memory_order_relaxed));
}

void spry_stat_in_use_add(size_t v) {
    size_t now = atomic_fetch_add_explicit(&spry_stat.in_use, v, memory_order_relaxed) + v;
    now += atomic_load_explicit(&spry_stat.dirty, memory_order_relaxed);
    size_t peak = atomic_load_explicit(&spry_stat.committed_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&spry_stat.committed_peak, &peak, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {}
}

void spry_stat_in_use_sub(size_t v) { stat_sub_saturating(&spry_stat.in_use, v); }
void spry_stat_dirty_add(size_t v)  { spry_stat_add(&spry_stat.dirty, v); }
void spry_stat_dirty_sub(size_t v)  { stat_sub_saturating(&spry_stat.dirty, v); }

/* Process totals: the global counters plus every heap's span counters. */
static void stats_collect(spry_stats_t *out) {
#define X(name, doc) out->name = atomic_load_explicit(&spry_stat.name, memory_order_relaxed);
    SPRY_STAT_LIST(X)
#undef X
    spry_heaps_span_totals(&out->in_use, &out->dirty);
    out->committed = out->in_use + out->dirty;
    size_t peak = atomic_load_explicit(&spry_stat.committed_peak, memory_order_relaxed);
    while (out->committed > peak &&
           !atomic_compare_exchange_weak_explicit(&spry_stat.committed_peak, &peak, out->committed,
                                                  memory_order_relaxed, memory_order_relaxed)) {}
    if (out->committed > out->committed_peak) out->committed_peak = out->committed;
}

void spry_stat_sample_peak(void) {
    spry_stats_t s;
    stats_collect(&s);
}

__attribute__((visibility("default")))
void spry_stats_get(spry_stats_t *out) {
    if (out) stats_collect(out);
}

static void stats_line(int fd, const char *name, size_t v, const char *doc) {
    spry_fmt_t f; spry_fmt_init(&f);
    spry_fmt_str(&f, "  ");
    spry_fmt_str(&f, name);
    spry_fmt_str(&f, ": ");
    spry_fmt_ulong(&f, v);
    if (v >= 10 * 1024) {
        spry_fmt_str(&f, " (");
        if (v >= 10u * 1024 * 1024) { spry_fmt_ulong(&f, v >> 20); spry_fmt_str(&f, " MiB)"); }
        else { spry_fmt_ulong(&f, v >> 10); spry_fmt_str(&f, " KiB)"); }
    }
    spry_fmt_str(&f, "  # ");
    spry_fmt_str(&f, doc);
    spry_fmt_str(&f, "\n");
    spry_fmt_flush(&f, fd);
}

__attribute__((visibility("default")))
void spry_stats_print(int fd) {
    spry_stats_t s;
    stats_collect(&s);
    spry_os_write(fd, "spry statistics:\n", 17);
#define X(name, doc) stats_line(fd, #name, s.name, doc);
    SPRY_STAT_LIST(X)
#undef X
    spry_heap_walk_t w = {0};
    spry_heaps_walk(&w);
    stats_line(fd, "walk.segments", w.segments, "segments owned by heaps");
    stats_line(fd, "walk.free_slices", w.free_slices, "64 KiB slices free in them");
    stats_line(fd, "walk.class_pages", w.class_pages, "pages of size classes");
    stats_line(fd, "walk.full_pages", w.full_pages, "of which full");
    stats_line(fd, "walk.large_pages", w.large_pages, "pages holding one large block");
    stats_line(fd, "walk.class_bytes", w.class_bytes, "bytes spanned by class pages");
    stats_line(fd, "walk.used_bytes", w.used_bytes, "bytes in blocks not freed (or not yet collected)");
    spry_os_write(fd, "spry options:\n", 14);
    spry_options_print(fd);
}
