/* Segments: the spans of slices a heap carves pages from.
 * Span functions take the lock of the segment's heap themselves (for a span
 * lent to another heap, the lender's); the caller holds no heap lock. */
#ifndef SPRY_SEGMENT_H
#define SPRY_SEGMENT_H

#include "types.h"
#include <string.h>

/* A page descriptor for `slices` contiguous free slices of one of the heap's
 * segments (a new segment when none has room), starting at a slice index
 * that is a multiple of `step` (a power of two up to 32; 1 for any), with
 * slice_count, start and is_zero (memory fresh from the kernel) set. Since
 * segments are 4 MiB aligned, the span is then aligned to step * 64 KiB;
 * slices + step <= SPRY_SLICES always fits a segment. NULL when out of
 * memory. */
spry_page_t *spry_span_alloc(spry_heap_t *heap, unsigned slices, unsigned step);
/* Blocked threads' caches were collected (a hurried look): heaps that
 * found nothing to borrow look again at their next fresh span. */
void spry_spans_offered(void);
/* The same (step 1), but where neither the span cache nor the resident free
 * slices hold `slices` in a row, the longest resident run of at least
 * `least` slices, if any, rather than slices never used: the page's
 * slice_count says which. */
spry_page_t *spry_span_alloc_least(spry_heap_t *heap, unsigned slices, unsigned least);
/* Gives the page's slices back to its segment (its heap's, which lent them
 * when it is not `user`, the page's); memory purged later. */
void spry_span_free(spry_heap_t *user, spry_page_t *page);
/* Calls visit(page, arg) for each span in use by the heap's pages: those in
 * its segments but the ones it lent, and those it borrowed from other heaps
 * (segment.c, lending). lock: each segment's heap is locked while its
 * segments are walked, one at a time (the caller holds none); false in a
 * fork child, which is alone. Only the heap's owner (or the fork child)
 * may call it: nothing else adds spans to the heap meanwhile. */
void spry_heap_spans(spry_heap_t *heap, bool lock, void (*visit)(spry_page_t *, void *), void *arg);
/* `bytes` when there are no more live heaps than CPUs the process may use,
 * else this heap's share of it (cpus / live heaps), at least 1 MiB. */
size_t spry_heap_share(size_t bytes);

/* Resizes a large block's span in place to hold `usable` bytes: more slices
 * when the ones after it are free; a shrink to fewer slices gives the tail
 * back, a growth that still fits keeps them all. The caller owns the page.
 * False when it cannot grow in place. */
bool spry_span_resize(spry_heap_t *heap, spry_page_t *page, size_t usable);
/* Gives back the slices of an owned span after its first `keep`. */
void spry_span_cut(spry_heap_t *heap, spry_page_t *page, unsigned keep);
/* The purge thread's side of a heap gone over its free-memory budget. */
void spry_heap_trim_urgent(spry_heap_t *heap);
/* Purges the heap's free slices that were free at the previous call (all if
 * force) and returns segments that stayed entirely free to the arena. Returns
 * true while free dirty memory is left waiting. */
bool spry_heap_purge_spans(spry_heap_t *heap, bool force);

/* The page whose span starts at slice i of a normal segment, or NULL when
 * the slice is free or inside another span. For walks over a heap's pages
 * (heap lock held, or no other thread using the heap). */
static inline spry_page_t *spry_segment_span_at(spry_segment_t *seg, unsigned i) {
    spry_page_t *page = &spry_segment_pages(seg)[i];
    return spry_segment_slices(seg)[i] == page && !((seg->free_mask >> i) & 1) ? page : NULL;
}

/* Slices [first, end) of seg name `page` in its slice table. */
static inline void spry_segment_name(spry_segment_t *seg, unsigned first, unsigned end, spry_page_t *page) {
    spry_page_t **slices = spry_segment_slices(seg);
    for (unsigned i = first; i < end; i++) slices[i] = page;
}

/* Zeroes a reused segment's header: the fixed part, the slice table and
 * the first `pages` descriptors (the header slice is 64 KiB; its colour
 * leaves most of it unused, and untouched). */
static inline void spry_segment_clear(spry_segment_t *seg, unsigned pages) {
    memset(seg, 0, sizeof *seg);
    memset(spry_segment_slices(seg), 0, SPRY_SLICES * sizeof(spry_page_t *) + pages * sizeof(spry_page_t));
}

/* The segment of a block whose chunk-map value is SPRY_CHUNK_ALIGNED. */
static inline spry_segment_t *spry_aligned_huge_segment(const void *p) {
    return spry_segment_at(spry_segment_base(p) - SPRY_SEGMENT_SIZE);
}

#endif
