/* The heap walk: every live block spry has handed out (spry_heap_walk).
 *
 * No spry lock is held while the visitor runs, so it may allocate, free, or
 * walk again. Blocks are gathered in batches under one heap's lock (the span
 * layout, segment list and page kinds then hold still) and visited once the
 * lock is dropped. The walk resumes from an address, not from a pointer into
 * a list: the segment it was in may have been given back meanwhile. Within a
 * heap addresses only grow, so no block is gathered twice.
 *
 * A block is live when it was carved (index < capacity) and is not free:
 * blocks of 16 B or more carry the free marker while free, wherever they
 * wait (page lists, remote-free lists, outboxes, the block cache; types.h);
 * 8-byte blocks have their live and remote bits (page.h): live, and not
 * freed by another thread and waiting to be collected. Large blocks carry
 * the marker in their one block; huge blocks are live while listed or while
 * their area descriptor says so (huge.c).
 *
 * The owner-only fields read here (a page's start, block size, capacity)
 * and the blocks' markers are plain reads: exact while the other threads do
 * not allocate or free, a snapshot that may miss or include a block
 * changing at that moment otherwise. Every address read is kept inside the
 * page's segment, whose memory stays mapped (arenas are never unmapped), so
 * a racing owner can never make the walk fault. */
#include "walk.h"
#include "heap.h"
#include "page.h"
#include "segment.h"
#include "huge.h"

#define WALK_BATCH 128

typedef struct walk_batch {
    void  *block[WALK_BATCH];
    size_t size[WALK_BATCH];
    size_t n;
} walk_batch_t;

static inline bool batch_full(const walk_batch_t *b) { return b->n == WALK_BATCH; }

static inline void batch_add(walk_batch_t *b, void *block, size_t size) {
    b->block[b->n] = block;
    b->size[b->n++] = size;
}

/* Gathers the live blocks of a class page at or above `from` into the
 * batch; returns where to resume when the batch fills, else 0. */
static uintptr_t class_gather(spry_segment_t *seg, spry_page_t *page, uintptr_t from,
                              walk_batch_t *batch) {
    uint8_t *base = spry_segment_base(seg);
    uint8_t *lo = base + SPRY_SLICE_SIZE, *hi = base + SPRY_SEGMENT_SIZE;
    uint8_t *start = page->start;
    size_t bs = page->block_size;
    bool tiny = page->class_idx == 0;
    /* a page being set up, or read mid-change: nothing sane to follow */
    if (start < lo + (tiny ? SPRY_TINY_MAPS_BYTES : 0) || start >= hi || bs < (tiny ? 8u : 16u)) return 0;
    uint32_t cap = spry_page_capacity(page);
    if (cap > (size_t)(hi - start) / bs) cap = (uint32_t)((size_t)(hi - start) / bs);
    size_t i = 0;
    if (from > (uintptr_t)start) i = (from - (uintptr_t)start + bs - 1) / bs;
    if (i >= cap) return 0;
    if (tiny && cap > SPRY_LIVE_MAP_BYTES * 8) cap = SPRY_LIVE_MAP_BYTES * 8;
    for (; i < cap; i++) {
        uint8_t *b = start + i * bs;
        bool live = tiny ? !spry_page_tiny_free_at(page, i) : spry_block_marker(b) != page;
        if (!live) continue;
        if (batch_full(batch)) return (uintptr_t)b;
        batch_add(batch, b, bs);
    }
    return 0;
}

/* The segment's live blocks at or above `from`; returns where to resume
 * when the batch fills, else the segment's end. */
static uintptr_t segment_gather(spry_segment_t *seg, uintptr_t from, walk_batch_t *batch) {
    uint8_t *base = spry_segment_base(seg), *hi = base + SPRY_SEGMENT_SIZE;
    for (unsigned s = 1; s < SPRY_SLICES; s++) {
        spry_page_t *page = spry_segment_span_at(seg, s);
        if (!page) continue;
        if (page->kind == SPRY_PAGE_CLASS) {
            uintptr_t resume = class_gather(seg, page, from, batch);
            if (resume) return resume;
        } else if (page->kind == SPRY_PAGE_LARGE) {
            uint8_t *b = page->start;
            if ((uintptr_t)b < from || b < base + SPRY_SLICE_SIZE || b + 16 > hi) continue;
            if (spry_block_marker(b) == page) continue;
            /* read once, after the marker: an owner freeing the block to
             * its segment clears the size before it takes the heap lock,
             * and a visit of 0 bytes failed test heap_walk (1-2 runs in
             * 300 under load) */
            size_t size = page->block_size;
            if (size == 0) continue;
            if (batch_full(batch)) return (uintptr_t)b;
            batch_add(batch, b, size);
        }
    }
    return (uintptr_t)hi;
}

/* The heap's live blocks at or above `from`, until the batch fills (heap
 * lock held); returns where to resume, or UINTPTR_MAX when the heap is done. */
static uintptr_t heap_gather(spry_heap_t *heap, uintptr_t from, walk_batch_t *batch) {
    for (;;) {
        /* the segment list is in no address order: the lowest segment
         * ending above `from`, each time */
        spry_segment_t *seg = NULL;
        for (spry_segment_t *s = heap->segments; s; s = s->next)
            if ((uintptr_t)spry_segment_base(s) + SPRY_SEGMENT_SIZE > from && (!seg || s < seg)) seg = s;
        if (!seg) return UINTPTR_MAX;
        from = segment_gather(seg, from, batch);
        if (batch_full(batch)) return from;
    }
}

/* Visits the batch; false when the visitor asked to stop. */
static bool batch_visit(const walk_batch_t *batch, spry_walk_visit_t visit, void *arg,
                        size_t *count) {
    for (size_t i = 0; i < batch->n; i++) {
        (*count)++;
        if (visit && !visit(batch->block[i], batch->size[i], arg)) return false;
    }
    return true;
}

size_t spry_walk_blocks(spry_walk_visit_t visit, void *arg) {
    size_t count = 0;
    walk_batch_t batch;
    for (spry_heap_t *h = spry_heaps_list(); h; h = h->all_next) {
        uintptr_t from = 0;
        while (from != UINTPTR_MAX) {
            batch.n = 0;
            spry_lock(&h->lock);
            from = heap_gather(h, from, &batch);
            spry_unlock(&h->lock);
            if (!batch_visit(&batch, visit, arg, &count)) return count;
        }
    }
    uintptr_t after = 0;
    do {
        batch.n = spry_huge_blocks_after(after, batch.block, batch.size, WALK_BATCH);
        if (!batch_visit(&batch, visit, arg, &count)) return count;
        if (batch.n) after = (uintptr_t)batch.block[batch.n - 1];
    } while (batch.n == WALK_BATCH);
    return count;
}
