/* Large blocks, above SPRY_PAGED_MAX up to SPRY_LARGE_MAX, and blocks of up
 * to SPRY_LARGE_MAX aligned to 128 KiB..2 MiB: one span of slices each, the
 * block at its start. A freed one is kept whole in the owner's hot cache for
 * the next malloc of its span size. Owner thread only. */
#ifndef SPRY_LARGE_H
#define SPRY_LARGE_H

#include "types.h"
#include "sizeclass.h"
#include "purge.h"

/* A large block of n bytes (n <= SPRY_LARGE_MAX) aligned to `align` (a
 * power of two up to SPRY_LARGE_MAX; 1 when the 64 KiB of every span is
 * enough; SPRY_ALIGN_GROWABLE for a block realloc grows, which takes a
 * longer hot span too, cut to its size): hot cache first, then a span.
 * NULL when out of memory. */
#define SPRY_ALIGN_GROWABLE SPRY_SLICE_SIZE    /* every span is aligned so */
void *spry_large_alloc(spry_heap_t *heap, size_t n, size_t align);
/* The block of a large page: a page from the hot cache was a large page
 * before, so only what differs between two blocks is set here. */
static inline void *spry_large_reuse(spry_heap_t *heap, spry_page_t *page, size_t usable) {
    page->kind = SPRY_PAGE_LARGE;
    page->tail_pages = 0;
    page->block_size = usable;
    page->used = 1;
    page->free = page->local_free = NULL;        /* the last block's free */
    /* a large block's remote free must reach the owner at once */
    atomic_store_explicit(&page->xfree, SPRY_XFREE_NOTIFY, memory_order_relaxed);
    spry_key_set(page, heap->tid | SPRY_KEY_SLOW);   /* frees check the pointer */
    spry_block_mark_live(page->start);
    return page->start;
}

/* A large page's block was freed: one small growing block fewer when it
 * was one (alloc.c). The owner, or a purge pass collecting its heap;
 * inside the guard. */
static inline void spry_large_block_gone(spry_heap_t *heap, spry_page_t *page) {
    if (spry_unlikely(page->grows_small)) {
        page->grows_small = 0;
        atomic_fetch_sub_explicit(&heap->small_growing, 1, memory_order_relaxed);
        if (heap->small_tail == page) heap->small_tail = NULL;
    }
}

/* Gives the OS pages past a live large block in its span's last slice
 * (its counted tail) back to the kernel. Owner, inside the guard. */
void spry_large_tail_purge(spry_heap_t *heap, spry_page_t *page);

/* The large page's block is freed or grows over its tail: its resident
 * tail no longer counts (large.c). Owner. */
static inline void spry_large_tail_forget(spry_heap_t *heap, spry_page_t *page) {
    heap->tail_pages -= page->tail_pages;
    page->tail_pages = 0;
}

/* OS pages of a span of `slices` slices past a block of `usable` bytes
 * at its start: the block's resident tail once the span was in use. */
static inline uint32_t spry_large_tail_of(unsigned slices, size_t usable) {
    size_t keep = (usable + SPRY_OS_PAGE - 1) & ~(size_t)(SPRY_OS_PAGE - 1);
    return (uint32_t)(((size_t)slices * SPRY_SLICE_SIZE - keep) / SPRY_OS_PAGE);
}

/* The large page's block was resized in place by realloc (had_slices: the
 * span's length before). Grown within its span, the block covers part of
 * the tail: what is left past it stays counted (forgotten whole, a string
 * grown a few bytes after its move left its tail resident and uncounted,
 * and the heap's bound never bound: 3,000 strings of 40 KB kept 1.65x
 * their bytes, a review). Any other resize counts none: a longer span's
 * old last slice is the block's now, a shorter one's last slice was. */
static inline void spry_large_tail_resized(spry_heap_t *heap, spry_page_t *page, unsigned had_slices) {
    uint32_t left = 0;
    if (page->slice_count == had_slices) {
        uint32_t past = spry_large_tail_of(had_slices, page->block_size);
        left = past < page->tail_pages ? past : page->tail_pages;
    }
    heap->tail_pages -= page->tail_pages - left;
    page->tail_pages = (uint8_t)left;
}

/* Takes the page at *link out of hot slot s. */
static inline spry_page_t *spry_large_hot_unlink(spry_heap_t *heap, spry_page_t **link, unsigned s) {
    spry_page_t *page = *link;
    *link = page->next;
    heap->hot_count[s]--;
    heap->hot_bytes -= (size_t)s * SPRY_SLICE_SIZE;
    page->next = NULL;
    page->is_zero = 0;
    return page;
}

/* The hot cache's block of n's span size, or NULL (no lock, no search).
 * Inline in the malloc path, which then needs no frame before its slow
 * path. */
static inline void *spry_large_alloc_hot(spry_heap_t *heap, size_t n) {
    size_t usable = spry_large_size_of(n);
    unsigned s = (unsigned)((usable + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT);
    /* hot_pop for any alignment, inline: the span freed last, or one a
     * slice longer (its tail stays untouched); without the second, 27% of
     * the mallocs of a 128-256 KiB churn went to the slow path to find it */
    if (!heap->hot[s] && !heap->hot[++s]) return NULL;   /* at most hot[SPRY_SPAN_CACHE_SLOTS] */
    return spry_large_reuse(heap, spry_large_hot_unlink(heap, &heap->hot[s], s), usable);
}

/* Keeps an emptied large page in the hot cache; false when the cache is full
 * (the caller frees the span). Every large block's end passes here first:
 * its resident tail stops counting either way. Inline: the owner's free of
 * a large block goes nowhere else. A push into an empty hot cache must tell the purge
 * thread (the caller's, after its guarded region: the heap may have been
 * collected and the thread gone, and it must be there to see this one go
 * idle; a call in here gave the free path a stack frame). */
#define SPRY_HOT_PER_SLOT 16
static inline bool spry_large_hot_push(spry_heap_t *heap, spry_page_t *page) {
    unsigned s = page->slice_count;
    size_t bytes = (size_t)s * SPRY_SLICE_SIZE;
    spry_large_tail_forget(heap, page);
    if (heap->hot_count[s] >= SPRY_HOT_PER_SLOT || heap->hot_bytes + bytes > heap->hot_limit)
        return false;
    page->kind = SPRY_PAGE_FREE;           /* a double free is reported */
    spry_key_set(page, 0);
    page->cache_tick = __atomic_load_n(&heap->purge_tick, __ATOMIC_RELAXED);
    page->next = heap->hot[s];
    heap->hot[s] = page;
    heap->hot_count[s]++;
    heap->hot_bytes += bytes;
    return true;
}

/* Gives every hot span back to its segment. */
void  spry_large_hot_flush(spry_heap_t *heap);
/* Gives back the hot spans not reused for two purge ticks (one to two purge
 * delays; `tick`: the current one); spry_heap_age_caches. */
void  spry_large_hot_age(spry_heap_t *heap, uint32_t tick);
/* Recomputes how much the hot cache may hold (live heaps may have changed). */
void  spry_large_refresh_limit(spry_heap_t *heap);

#endif
