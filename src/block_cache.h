/* The block cache: per heap and size class above the direct table (1 KiB), a
 * stack of the blocks the owner freed. Owner thread only.
 *
 * Why: with thousands of live blocks per thread a class spans many pages, and
 * with frees going to their pages nearly every free met a full page (unlink
 * it from "full", clear NOTIFY by CAS, requeue at the head, repin) and the
 * next malloc emptied it again (NOTIFY by CAS, unlink, walk the queue): two
 * state changes of a page per block. Now a page's blocks go round through
 * the cache (tcmalloc's thread cache) and pages change state only when the
 * cache overflows and gives half of a class back in one batch.
 *
 * Every owner's free of these classes comes here, not only those into full
 * pages: their pages' keys carry CACHED, so the free fast path sends them to
 * spry_free_slow. Caching only the frees into full pages left two places
 * holding recently freed blocks (the cache and the head page's list), and
 * whichever malloc tried first, the block freed last often waited: 9-17%
 * slower at 64 live blocks of 2-128 KiB. One stack keeps the reuse LIFO;
 * the slow free costs about 13 instructions more per pair, and measured
 * alternating it is 7-15% faster at 64 live blocks and 15-27% at 1,024 and
 * 4,096.
 *
 * A cached block is free for every check: its marker is set (a second free of
 * it is caught whichever page state it meets), the pop clears it. It still
 * counts in its page's `used`, so a page never goes back to its segment with
 * a block in the cache. Pages of 1 KiB blocks or less (64 and more a page,
 * and class 0 with its live bitmap) are requeued as before: they seldom
 * fill up and empty again, so sending all their blocks round the cache,
 * off the fast paths, cost more than the flips it saved (16-128 B, 4,096
 * live: 5.6 k page flips per million calls against 112 k cached frees and
 * pops). The owner's frees into their full pages never reach the cache
 * (free.c, spry_free_cached_slow).
 *
 * Bounds: per class a count (4 MiB worth, 16 to 1,024 blocks); per heap
 * half the bytes its pages span, at least heap->hot_limit (the heap's
 * share of 4 MiB for hot large spans) and at most 16 MiB. With 1,024 live
 * blocks of 4-64 KiB the cache must hold about 10% of them: at 4 MiB a heap
 * it ran 25% slower; with a quarter of the span bytes, churns of 8-128 KiB
 * blocks at 64 live ran 9-15% slower. The heap bound was at most 4 times
 * the share, and a class 1 MiB worth (16 to 256 blocks): 16 MiB for one
 * thread, but 4 MiB a heap for 8 threads on 2 CPUs, where churns of 4-64
 * KiB at 1,024 and 4,096 live blocks ran 1.13-1.37x faster with the
 * larger bounds, at 0.7-0.9 times the peak RSS: pages that a class
 * overflowing every few frees gave back and took again went through the
 * span cache and the purge as dirty slices (callgrind, 1,024 live at 8
 * threads: 96 -> 77 instructions a pair, 0.36 -> 0.01 mispredicts; 4,096
 * live: 111 -> 79; 4,096 live blocks of 64-512 KiB, one thread: 187 ->
 * 168). Without the cap of 16 MiB a heap it was 73 and 77 instructions,
 * but a thread that keeps using every class kept 127 MB cached in a
 * review's test (10 with the old bounds). The minimum of 16 blocks
 * binds only without the scavenger now (4 MiB is 16 blocks of 256 KiB);
 * it made churns of 128-256 KiB blocks at 64 live 14% faster at 0.38
 * times the peak RSS (fewer pages emptied and taken again). Each cached
 * block pins its page (2 MiB above 128 KiB), so a thread that freed
 * hundreds of MB and went on working with other sizes keeps more in use
 * than its cache's bytes: the scavenger (each purge pass) gives back half
 * of a class whose stack it finds as the last pass left it, and all but
 * its top block at the next such pass (halving at every pass took 6 passes
 * for 64 blocks, 11 for 1,024): a thread that freed 1.2 GB of 1-250 KB
 * blocks and went on with 2,000 B pairs kept 250 MB in use right after, as
 * with the old bounds, 58 MB resident 1.2 s later (82 with them), none at
 * 2 s. A thread that keeps using 48 classes keeps full stacks: 16 MB at one
 * thread (10 with the old bounds), 134 MB at 8 threads (22). The scavenger
 * looks at the stack's top and count only, never at the pops: no
 * instruction on the paths. Where no scavenger runs (no purge thread, no
 * membarrier call) the bounds stay as they were before it: 1 MiB worth a
 * class, 8 to 256 blocks, and at most 4 times the share a heap; classes set
 * up before the first purge pass found the membarrier call refused take
 * them then (they kept the larger ones for good: 71 MB cached against 16,
 * a review). Both bounds are kept as room left (limit minus what is in), so
 * that a push checks and counts at once. Thread exit, spry_trim and
 * malloc_trim empty it (spry_heap_collect), and so does a purge pass that
 * finds the owner idle (steal.c); fork empties the
 * caches of the heaps it adopts. */
#ifndef SPRY_BLOCK_CACHE_H
#define SPRY_BLOCK_CACHE_H

#include "types.h"
#include "guard.h"
#include "sizeclass.h"

/* Where a class's block cache lies in its heap: spry_page_t's bcache_off
 * and the table spry_bcache_mid hold it in 16 bits. */
_Static_assert(offsetof(spry_heap_t, bcache) + SPRY_CLASS_COUNT * sizeof(spry_block_cache_t) <= UINT16_MAX,
               "block cache offsets fit 16 bits");

/* A block from the heap's block cache at byte offset `off` (a class's
 * heap->bcache[c]: spry_bcache_off_mid), marked live; NULL when it has
 * none. */
static inline void *spry_bcache_pop(spry_heap_t *heap, size_t off) {
    spry_block_cache_t *bc = (spry_block_cache_t *)((char *)heap + off);
    spry_block_t *b = bc->top;
    if (!b) return NULL;
    bc->top = b->next;
    bc->room++;
    heap->bcache_room += bc->block_size;
    spry_block_mark_live(b);
    return b;
}

/* A block of n bytes (SPRY_SMALL_MAX < n <= SPRY_PAGED_MAX) from the cache,
 * popped inside the heap's guard (guard.h); NULL when the class has none or
 * a collection holds the guard. */
static inline void *spry_bcache_take(spry_heap_t *heap, size_t n) {
    if (spry_unlikely(!spry_heap_try_enter(heap))) return NULL;
    void *b = spry_bcache_pop(heap, spry_bcache_off_mid(n));
    spry_heap_leave(heap);
    return b;
}

/* spry_class_of(n) for SPRY_SMALL_MAX < n <= SPRY_PAGED_MAX, from the
 * cache's table: 3 instructions, not 10 (a malloc of such a size that found
 * the cache empty, a producer's whose blocks other threads free: 8 fewer a
 * malloc, callgrind). */
static inline unsigned spry_bcache_class_mid(size_t n) {
    return (unsigned)((spry_bcache_off_mid(n) - offsetof(spry_heap_t, bcache)) / sizeof(spry_block_cache_t));
}

/* Bytes in the cache (statistics, flushes). */
static inline size_t spry_bcache_bytes(const spry_heap_t *heap) {
    return heap->bcache_limit - (size_t)heap->bcache_room;
}

/* The same, read by another thread without the heap's guard (the census,
 * hurried looks): the owner may be changing both counts, so each is read
 * once and the difference clamped (a stale figure only). */
__attribute__((no_sanitize("thread")))
static inline size_t spry_bcache_bytes_seen(const spry_heap_t *heap) {
    ptrdiff_t cached = (ptrdiff_t)*(const volatile size_t *)&heap->bcache_limit -
                       *(const volatile ptrdiff_t *)&heap->bcache_room;
    return cached > 0 ? (size_t)cached : 0;
}

/* spry_bcache_push beyond a bound (or the class's first push). */
void spry_bcache_push_over(spry_heap_t *heap, spry_page_t *page, spry_block_t *b);

/* The owner frees b (marked free already) of a class page whose key says
 * CACHED or FULL: into the cache; false, with nothing done, over its bounds
 * (then spry_bcache_push_over). Reads only the page's first cache line. */
static inline bool spry_bcache_push(spry_heap_t *heap, spry_page_t *page, spry_block_t *b) {
    size_t off = page->bcache_off;
    ptrdiff_t size = (ptrdiff_t)page->block_size;
#if defined(__x86_64__) && !defined(SPRY_TSAN)
    /* Both bounds compared in memory, then both counted in memory: six
     * instructions. Whichever way the C below is written, the compiler
     * loads both counts, keeps them for the undo or the store, and spends
     * ten. The class's stack is addressed as heap + the page's offset of
     * it (no index scaled, no sum formed), the link included: 4 fewer a
     * free than the index and the C link. (ThreadSanitizer builds take the
     * C path, whose accesses it sees.) */
    __asm__ goto("cmpw $0, %c[room](%[heap],%[off])\n\t"
                 "jle %l[over]\n\t"
                 "cmpq %[size], %[heap_room]\n\t"
                 "jl %l[over]\n\t"
                 "subw $1, %c[room](%[heap],%[off])\n\t"
                 "subq %[size], %[heap_room]\n\t"
                 "movq %c[top](%[heap],%[off]), %%r11\n\t"
                 "movq %%r11, (%[b])\n\t"
                 "movq %[b], %c[top](%[heap],%[off])"
                 : : [heap] "r"(heap), [off] "r"(off), [b] "r"(b),
                     [room] "i"(offsetof(spry_block_cache_t, room)),
                     [top] "i"(offsetof(spry_block_cache_t, top)),
                     [heap_room] "m"(heap->bcache_room), [size] "r"(size)
                 : "memory", "cc", "r11" : over);
    return true;
#else
    spry_block_cache_t *bc = (spry_block_cache_t *)((char *)heap + off);
    if (spry_unlikely(bc->room <= 0 || heap->bcache_room < size)) return false;
    bc->room--;
    heap->bcache_room -= size;
    b->next = bc->top;
    bc->top = b;
    return true;
#endif
#if defined(__x86_64__) && !defined(SPRY_TSAN)
over:
    return false;
#endif
}

/* The scavenger, in two steps. Without the guard, each purge pass: true
 * when a class's stack of two blocks or more looks untouched since the last
 * pass (same top, same count); the others' top and count are noted for the
 * next pass. */
bool spry_bcache_untouched(spry_heap_t *heap);
/* Then, the owner held off by the guard (steal.c): each class that the look
 * found untouched and that is still as it saw it gives back half of its
 * blocks (rounded down), from the bottom, and if the next pass finds it so
 * again, all but the top one (the look records the other classes anew, and
 * they would compare equal here). A class keeps its last block (at most one
 * page a class stays pinned): a stack that only served malloc/free pairs
 * looks untouched too, and giving its one block back had 256 such threads
 * held off every other pass (a review). */
void spry_bcache_scavenge(spry_heap_t *heap);
/* Recomputes the heap's bound (slow paths, after hot_limit). */
void spry_bcache_refresh_limit(spry_heap_t *heap);
/* Every cached block back to its page (thread exit, trim). */
void spry_bcache_flush(spry_heap_t *heap);
/* fork child, before the queues of an adopted heap are remade: every cached
 * block back onto its page's free list, no queue touched. */
void spry_bcache_rebuild(spry_heap_t *heap);

#endif
