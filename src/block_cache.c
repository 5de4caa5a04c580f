/* The block cache; see block_cache.h. */
#include "block_cache.h"
#include "queue.h"
#include "purge.h"
#include "stats.h"

#include <string.h>

/* A class's bounds (block_cache.h): its bytes, its fewest and most
 * blocks; [0] where no scavenger runs, [1] where it does. A heap holds at
 * most 4 times its share of 4 MiB without the scavenger, HEAP_MAX with it. */
typedef struct { size_t bytes, min, max; } class_bounds_t;
static const class_bounds_t class_bounds[2] = {
    { (size_t)1 << 20, 8, 256 },
    { (size_t)4 << 20, 16, 1024 },
};
#define HEAP_MAX ((size_t)16 << 20)

static spry_page_t *page_of(const spry_block_t *b) {
    return spry_page_of(spry_segment_base(b), b);
}

/* The larger bounds only where the scavenger runs (a purge thread and the
 * membarrier call): without it, cached blocks above 128 KiB pinned 1.5-1.8x
 * as much memory for good with a minimum of 16 (block_cache.h). */
static uint16_t class_limit(size_t block_size) {
    const class_bounds_t *b = &class_bounds[spry_purge_collects()];
    size_t n = b->bytes / block_size;
    return (uint16_t)(n < b->min ? b->min : n > b->max ? b->max : n);
}

/* Gives the n blocks from *from on back to their pages, each out of the
 * stack before its page's list takes its link: the stack stays whole at
 * every step, so a fork child that finds it cut by fork puts it back on
 * the pages' lists with at most one block lost (linked from both, the
 * stack reached the pages' own lists: blocks handed out twice, a review). */
static void bcache_give_back(spry_heap_t *heap, spry_block_cache_t *bc, spry_block_t **from,
                             uint32_t n) {
    for (; n && *from; n--) {
        spry_block_t *b = *from;
        *from = b->next;
        atomic_signal_fence(memory_order_seq_cst);
        bc->room++;
        heap->bcache_room += bc->block_size;
        spry_heap_free_full(heap, page_of(b), b);
    }
}

/* Gives back the top n blocks of the stack (the hottest: the rest may
 * have left the data cache, and pages taking them back go to the queue
 * head, where the next malloc reaches them). */
static void bcache_drain(spry_heap_t *heap, spry_block_cache_t *bc, uint32_t n) {
    bcache_give_back(heap, bc, &bc->top, n);
}

void spry_bcache_push_over(spry_heap_t *heap, spry_page_t *page, spry_block_t *b) {
    spry_block_cache_t *bc = &heap->bcache[page->class_idx];
    size_t size = page->block_size;
    if (!bc->limit) {
        bc->limit = class_limit(size);
        bc->room = (int16_t)bc->limit;
        bc->block_size = (uint32_t)size;
        /* the purge thread collects caches of idle heaps (steal.c): it
         * must be running to see this one go idle */
        spry_purge_notify();
    }
    if (bc->room <= 0) bcache_drain(heap, bc, (uint32_t)(bc->limit - bc->room) / 2);
    if (heap->bcache_room < (ptrdiff_t)size) {
        spry_heap_free_full(heap, page, b);
    } else {
        b->next = bc->top;
        bc->top = b;
        bc->room--;
        heap->bcache_room -= (ptrdiff_t)size;
    }
}

/* The scavenger turned out not to run after all (the first purge pass
 * found the membarrier call refused, or the purge thread could not start):
 * classes set up before that keep its bounds no longer. Their room may go
 * below 0; pushes then go over, and give half back, until it is positive. */
static void bcache_tighten(spry_heap_t *heap) {
    heap->bcache_unscavenged = true;
    for (unsigned c = 1; c < SPRY_CLASS_COUNT; c++) {
        spry_block_cache_t *bc = &heap->bcache[c];
        if (!bc->limit) continue;
        uint16_t limit = class_limit(bc->block_size);
        if (limit >= bc->limit) continue;
        bc->room = (int16_t)(bc->room - (bc->limit - limit));
        bc->limit = limit;
    }
}

void spry_bcache_refresh_limit(spry_heap_t *heap) {
    bool scavenged = spry_purge_collects();
    if (!scavenged && !heap->bcache_unscavenged) bcache_tighten(heap);
    size_t half = atomic_load_explicit(&heap->span_in_use, memory_order_relaxed) / 2;
    /* (hot_limit is at most 16 MiB too: large.c, HOT_MAX) */
    size_t lo = heap->hot_limit, hi = scavenged ? HEAP_MAX : 4 * lo;
    size_t limit = half < lo ? lo : half > hi ? hi : half;
    /* room may go below 0: pushes then go over until pops make room */
    heap->bcache_room += (ptrdiff_t)limit - (ptrdiff_t)heap->bcache_limit;
    heap->bcache_limit = limit;
}

/* Gives back the bottom n blocks of the stack (the coldest), keeping the
 * top that the owner's next mallocs take. */
static void bcache_drain_bottom(spry_heap_t *heap, spry_block_cache_t *bc, uint32_t n) {
    uint32_t keep = (uint32_t)(bc->limit - bc->room) - n;
    spry_block_t **cut = &bc->top;
    for (; keep; keep--) cut = &(*cut)->next;
    bcache_give_back(heap, bc, cut, n);
}

/* A class never pushed to since its last flush (limit 0): its record is
 * what a look would leave (all zero) and is not written again, so a heap
 * whose thread caches nothing keeps its cold page untouched (types.h). */
static bool seen_unused(spry_bcache_seen_t *seen, int limit) {
    if (limit) return false;
    static const spry_bcache_seen_t zero;
    if (memcmp(seen, &zero, sizeof zero)) *seen = zero;
    return true;
}

/* A stack with blocks whose top and count are as the last look saw them. */
static bool seen_again(const spry_bcache_seen_t *seen, const spry_block_t *top, int16_t room) {
    return top && top == seen->top && room == seen->room;
}

/* The owner may be pushing and popping meanwhile: the loads are single
 * aligned loads (volatile: neither split nor merged nor repeated), so each
 * value is whole, though maybe stale, and the answer may be wrong either
 * way; spry_bcache_scavenge looks again under the guard. ThreadSanitizer
 * is told not to watch them: the owner's stores are plain, on purpose (its
 * paths stay as they are). Not atomic loads: clang instruments those even
 * in a function it is told not to watch, and its ThreadSanitizer builds
 * then reported this race. */
__attribute__((no_sanitize("thread")))
bool spry_bcache_untouched(spry_heap_t *heap) {
    bool found = false;
    for (unsigned c = 1; c < SPRY_CLASS_COUNT; c++) {
        spry_block_cache_t *bc = &heap->bcache[c];
        spry_bcache_seen_t *seen = &heap->bcache_seen[c];
        spry_block_t *top = *(spry_block_t *volatile *)&bc->top;
        int16_t room = *(volatile int16_t *)&bc->room;
        int limit = *(volatile uint16_t *)&bc->limit;
        if (seen_unused(seen, limit)) continue;
        seen->untouched = seen_again(seen, top, room) && room < limit - 1;
        if (seen->untouched) {
            found = true;
        } else {
            seen->top = top;
            seen->room = room;
            seen->scavenged = false;
        }
    }
    return found;
}

void spry_bcache_scavenge(spry_heap_t *heap) {
    for (unsigned c = 1; c < SPRY_CLASS_COUNT; c++) {
        spry_block_cache_t *bc = &heap->bcache[c];
        spry_bcache_seen_t *seen = &heap->bcache_seen[c];
        if (seen_unused(seen, bc->limit)) continue;
        /* only a class the look found as the pass before left it, and
         * still so: the look records every other class's top and count
         * anew, so these compare equal to the record (cutting them cut
         * classes in use, a review) */
        bool cut = seen->untouched && seen_again(seen, bc->top, bc->room);
        uint32_t count = (uint32_t)(bc->limit - bc->room);
        uint32_t n = !cut ? 0 : seen->scavenged ? count - 1 : count / 2;
        if (n) {
            bcache_drain_bottom(heap, bc, n);
            spry_stat_add(&spry_stat.scavenges, 1);
        }
        seen->top = bc->top;
        seen->room = bc->room;
        seen->scavenged = cut;
        seen->untouched = false;
    }
}

/* Each class starts over: its next push goes over and tells the purge
 * thread again (a heap that caches after a collection is watched again,
 * and a fork child's heaps, collected, start the child's thread). */
void spry_bcache_flush(spry_heap_t *heap) {
    for (unsigned c = 1; c < SPRY_CLASS_COUNT; c++) {
        spry_block_cache_t *bc = &heap->bcache[c];
        if (!bc->limit) continue;
        bcache_drain(heap, bc, UINT32_MAX);
        bc->limit = 0;
        bc->room = 0;
    }
}

/* The owner died mid-operation at worst: each push and pop moves `top` with
 * one store, so the stack is whole; the counts may be off and are reset. */
void spry_bcache_rebuild(spry_heap_t *heap) {
    for (unsigned c = 1; c < SPRY_CLASS_COUNT; c++) {
        spry_block_cache_t *bc = &heap->bcache[c];
        spry_block_t *b = bc->top;
        while (b) {
            spry_block_t *next = b->next;
            spry_page_t *page = page_of(b);
            b->next = page->free;
            page->free = b;
            page->used--;
            b = next;
        }
        bc->top = NULL;
        bc->room = (int16_t)bc->limit;
    }
    heap->bcache_room = (ptrdiff_t)heap->bcache_limit;
}
