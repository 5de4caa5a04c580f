/* Process-wide statistics. Updated only on slow paths (segment, page and
 * purge operations), relaxed atomics: they are figures, not synchronisation.
 * One list generates the struct, the printer and spry_stats_get. */
#ifndef SPRY_STATS_H
#define SPRY_STATS_H

#include "atomic.h"
#include <stddef.h>

/* X(name, bytes, doc): `bytes` says whether the figure is an amount of
 * memory (printed also in KiB or MiB) or a count. */
#define SPRY_STAT_LIST(X) \
    X(mapped,          true,  "address space reserved from the kernel") \
    X(committed,       true,  "bytes that may be resident: in_use + dirty") \
    X(committed_peak,  true,  "highest committed") \
    X(in_use,          true,  "bytes in pages and blocks handed to heaps") \
    X(huge_in_use,     true,  "bytes in huge blocks") \
    X(dirty,           true,  "free bytes not yet returned to the kernel") \
    X(purged_total,    true,  "bytes returned to the kernel so far") \
    X(purges,          false, "madvise calls made") \
    X(budget_purges,   false, "times a heap went over its free-memory budget") \
    X(segments,        false, "live 4 MiB segments") \
    X(arenas,          false, "kernel mappings made for the heap") \
    X(heaps,           false, "thread heaps created") \
    X(heaps_abandoned, false, "heaps of exited threads waiting for reuse") \
    X(foreign_frees,   false, "pointers of another allocator passed to free") \
    X(errors,          false, "double frees and invalid pointers reported and ignored")
/* Printed, not in spry_stats_t: a field added there would overflow the
 * struct of a program built against an older spry.h. */
#define SPRY_STAT_LIST_PRINTED(X) \
    X(idle_collections, false, "caches of idle threads' heaps given back by purge passes") \
    X(scavenges,        false, "block-cache classes found untouched that purge passes cut (half, then all but a block)") \
    X(spans_borrowed,   false, "spans a heap took from another heap's free resident slices") \
    X(hurried_collections, false, "caches of blocked threads' heaps given back as another thread took fresh memory")

typedef struct spry_stat_counters {
#define X(name, bytes, doc) _Atomic(size_t) name;
    SPRY_STAT_LIST(X)
    SPRY_STAT_LIST_PRINTED(X)
#undef X
} spry_stat_counters_t;

extern spry_stat_counters_t spry_stat;

/* in_use and dirty; committed is their sum, kept only as a peak. */
void spry_stat_in_use_add(size_t v);
void spry_stat_in_use_sub(size_t v);
void spry_stat_dirty_add(size_t v);
void spry_stat_dirty_sub(size_t v);
/* The statistics at exit (SPRY_STATS): text or JSON, to stderr or
 * SPRY_STATS_FILE. */
void spry_stats_at_exit(void);
/* Updates committed_peak from the current totals (purge passes call it,
 * under their lock); with SPRY_STATS set, a new peak also takes the class
 * table that the print adds (stats.c). */
void spry_stat_sample_peak(void);
/* fork: the lock of that table's copy, taken last, released first. */
void spry_stats_fork_prepare(void);
void spry_stats_fork_parent(void);
void spry_stats_fork_child(void);

#endif
