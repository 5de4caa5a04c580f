/* Statistics: spry_stats_get, spry_stats_print; see stats.h. */
#include "stats.h"
#include "options.h"
#include "fmt.h"
#include "os.h"
#include "../include/spry.h"

spry_stat_counters_t spry_stat;

void spry_stat_commit(size_t v) {
    size_t now = atomic_fetch_add_explicit(&spry_stat.committed, v, memory_order_relaxed) + v;
    size_t peak = atomic_load_explicit(&spry_stat.committed_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&spry_stat.committed_peak, &peak, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {}
}

void spry_stat_uncommit(size_t v) {
    /* Estimates can cross (a purge of memory counted as clean); never wrap. */
    size_t cur = atomic_load_explicit(&spry_stat.committed, memory_order_relaxed);
    size_t next;
    do { next = cur > v ? cur - v : 0; }
    while (!atomic_compare_exchange_weak_explicit(&spry_stat.committed, &cur, next,
                                                  memory_order_relaxed, memory_order_relaxed));
}

__attribute__((visibility("default")))
void spry_stats_get(spry_stats_t *out) {
    if (!out) return;
#define X(name, doc) out->name = atomic_load_explicit(&spry_stat.name, memory_order_relaxed);
    SPRY_STAT_LIST(X)
#undef X
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
    spry_os_write(fd, "spry statistics:\n", 17);
#define X(name, doc) stats_line(fd, #name, atomic_load_explicit(&spry_stat.name, memory_order_relaxed), doc);
    SPRY_STAT_LIST(X)
#undef X
    spry_os_write(fd, "spry options:\n", 14);
    spry_options_print(fd);
}
