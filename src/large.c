/* Large blocks (256 KiB to 2 MiB): a span of slices each; see large.h. */
#include "large.h"
#include "segment.h"
#include "sizeclass.h"
#include "purge.h"
#include "os.h"
#include "stats.h"

/* ---- hot large blocks ----------------------------------------------------
 * A large block the owner frees is kept whole, as a span of its size, for the
 * owner's next malloc of that span size: no lock, no search, and the memory
 * is the same, so nothing new is touched. Bound: a quarter of the heap's
 * spans in use, at most HOT_MAX, at least its share of HOT_BYTES (4 MiB,
 * shared among heaps beyond one per CPU). A span not reused for two purge
 * ticks goes back to its segment (spry_heap_age_caches), and thread exit,
 * spry_trim, malloc_trim and a purge pass that finds the owner idle
 * (steal.c) give them all back.
 * The share alone (4 MiB for one thread, 1 MiB each for 8 threads on 2
 * CPUs) sent most spans of a churn of 64 live blocks of 64-512 KiB back to
 * the segments, whose slices other sizes then took, dirty or fresh: with
 * the quarter and the aging, 1.23x / 1.48x / 1.71x faster at 2 / 8 / 64
 * threads, at 0.64-0.70 times the peak RSS (1,024 live: 1.09x and 1.41x at
 * 2 and 8 threads, RSS 0.87 and 0.92); blocks of 256 KiB-1 MiB 1.49-1.87x
 * faster at 0.96-1.16 times the peak RSS (2 cores, 3 rounds alternating).
 * Without the aging, a thread that freed a burst of large blocks and went
 * on working with small ones (never the slow path, never idle) kept up to
 * the bound resident for good: 127 MB at 8 threads (a review); with it,
 * 2 MB after 2.4 s (9 MB for good with the share alone). 64 such threads
 * after 4.4 GB of frees, on 2 CPUs (the purge thread gets little time):
 * about 0.5 GB more resident for the first seconds, 7 MB after 14 s (63 MB
 * for good with the share alone). */
#define HOT_BYTES    ((size_t)4 << 20)
#define HOT_MAX      ((size_t)16 << 20)

/* The hot span of s slices freed last whose block is aligned to `align`
 * (1: any); an aligned request passes over the others. */
static spry_page_t *hot_pop(spry_heap_t *heap, unsigned s, size_t align) {
    spry_page_t **link = &heap->hot[s];
    while (*link && ((uintptr_t)(*link)->start & (align - 1))) link = &(*link)->next;
    return *link ? spry_large_hot_unlink(heap, link, s) : NULL;
}

void spry_large_hot_flush(spry_heap_t *heap) {
    for (unsigned s = 1; s < SPRY_SPAN_CACHE_SLOTS; s++) {
        spry_page_t *page;
        while ((page = hot_pop(heap, s, 1)) != NULL) spry_span_free(heap, page);
    }
}

void spry_large_hot_age(spry_heap_t *heap, uint32_t tick) {
    bool freed = false;
    for (unsigned s = 1; s < SPRY_SPAN_CACHE_SLOTS && heap->hot_bytes; s++) {
        spry_page_t **link = &heap->hot[s];
        while (*link) {
            if (tick - (*link)->cache_tick < 2) { link = &(*link)->next; continue; }
            spry_span_free(heap, spry_large_hot_unlink(heap, link, s));
            freed = true;
        }
    }
    if (freed) spry_purge_notify();           /* their slices, dirty, to purge */
}

/* A span of `slices` slices fresh from the segments, set up as a large page
 * (its block is set by spry_large_reuse). */
static spry_page_t *span_take(spry_heap_t *heap, unsigned slices, unsigned step) {
    spry_page_t *page = spry_span_alloc(heap, slices, step);
    if (!page) return NULL;
    spry_purge_notify();       /* it may end in the hot cache (steal.c) */
    page->class_idx = 0;
    page->pinned = 0;
    page->reserved = 1;
    spry_page_capacity_set(page, 1);
    page->next = page->prev = NULL;
    return page;
}

/* The last `pages` OS pages of the page's span back to the kernel. */
static void tail_purge(spry_page_t *page, uint32_t pages) {
    size_t bytes = (size_t)pages * SPRY_OS_PAGE;
    spry_os_purge(page->start + (size_t)page->slice_count * SPRY_SLICE_SIZE - bytes, bytes);
    spry_stat_add(&spry_stat.purged_total, bytes);
    spry_stat_add(&spry_stat.purges, 1);
}

/* Resident OS pages a heap may leave past its growable blocks (below): its
 * share of this (spry_heap_share), 1 MiB for a thread with a CPU of its
 * own. */
#define TAIL_BYTES ((size_t)1 << 20)

/* A block realloc grows (spry_heap_malloc_span): any hot span at least as
 * long, cut to what the block needs (it grows into the slices after it
 * while they stay free), else a span from the segments. Growing strings
 * built one after another then reuse the same memory, and a block that
 * stops growing keeps only its own pages: a grown block kept in a longer
 * hot span whole, or on a resident span of a freed block, held up to 15
 * times its size resident for its life (a review: 247 MB where glibc keeps
 * 18). What a span that was in use before has resident past the block in
 * its last slice (up to 60 KiB) is left while the heap's tails stay under
 * its share of TAIL_BYTES, and purged beyond: purged every time, every
 * string a thread built took a madvise call and the page faults after it
 * as it grew (strings of 200 KB built by 4 threads on 2 cores: 1.6x
 * jemalloc's time). */
static void *large_alloc_growable(spry_heap_t *heap, size_t n) {
    size_t usable = spry_good_size_of(n);
    unsigned slices = (unsigned)((usable + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT);
    spry_page_t *page = NULL;
    for (unsigned s = slices; !page && s < SPRY_SPAN_CACHE_SLOTS; s++) page = hot_pop(heap, s, 1);
    if (page) {
        if (page->slice_count > slices) spry_span_cut(heap, page, slices);
    } else {
        page = span_take(heap, slices, 1);
        if (!page) return NULL;
    }
    uint32_t tail = page->is_zero ? 0 : spry_large_tail_of(slices, usable);
    if (tail && heap->tail_pages + tail > heap->tail_limit) {
        tail_purge(page, tail);
        tail = 0;
    }
    void *p = spry_large_reuse(heap, page, usable);
    page->tail_pages = (uint8_t)tail;
    heap->tail_pages += tail;
    return p;
}

/* Blocks above 256 KiB, and blocks aligned above 64 KiB: a span each,
 * usable size rounded to the size class (the span's tail beyond it is never
 * touched, so never resident). Spans are taken hot-first (spry_span_alloc),
 * so a churn of such blocks keeps reusing the same resident memory. */
void *spry_large_alloc(spry_heap_t *heap, size_t n, size_t align) {
    if (align == SPRY_ALIGN_GROWABLE) return large_alloc_growable(heap, n);
    size_t usable = spry_good_size_of(n);
    unsigned slices = (unsigned)((usable + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT);
    /* a hot span one slice longer does too: its tail stays untouched. (For
     * align 1 the inline pop looked already; the slow path's inbox drain,
     * in between, may have brought large pages back.) */
    spry_page_t *page = hot_pop(heap, slices, align);
    if (!page && slices + 1 < SPRY_SPAN_CACHE_SLOTS) page = hot_pop(heap, slices + 1, align);
    if (page) return spry_large_reuse(heap, page, usable);
    /* spans start on 64 KiB slices: a larger alignment is a slice multiple */
    unsigned step = align > SPRY_SLICE_SIZE ? (unsigned)(align >> SPRY_SLICE_SHIFT) : 1;
    page = span_take(heap, slices, step);
    return page ? spry_large_reuse(heap, page, usable) : NULL;
}

void spry_large_tail_purge(spry_heap_t *heap, spry_page_t *page) {
    if (!page->tail_pages) return;
    tail_purge(page, page->tail_pages);
    spry_large_tail_forget(heap, page);
}

void spry_large_refresh_limit(spry_heap_t *heap) {
    size_t share = spry_heap_share(HOT_BYTES);
    size_t quarter = atomic_load_explicit(&heap->span_in_use, memory_order_relaxed) / 4;
    if (quarter > HOT_MAX) quarter = HOT_MAX;
    heap->hot_limit = quarter > share ? quarter : share;
    heap->tail_limit = (uint32_t)(spry_heap_share(TAIL_BYTES) / SPRY_OS_PAGE);
}
