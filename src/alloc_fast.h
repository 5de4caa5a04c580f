/* The fast paths of malloc and free, inlined into every entry point
 * (spry_malloc, malloc, operator new, ...).
 *
 *   malloc(n) ── n <= 1 KiB and the class page has a free block ──> pop,
 *        │       clear the free marker, done
 *        ├── 1 KiB < n <= 256 KiB, the block cache has one ──> pop it,
 *        │       inside the heap's guard (guard.h), done; else
 *        │       ──> spry_heap_malloc_sized (heap.c, noinline)
 *        └── otherwise ──> spry_heap_malloc (heap.c, noinline)
 *   free(p) ── p in a spry segment, page owned by this thread's heap,
 *        │     page not full, not 8-byte blocks ──> push on page->free,
 *        │     set the free marker, used--, done
 *        ├── the marker was already set ──> spry_free_double (free.c)
 *        ├── past the page's carved blocks ──> spry_free_slow (reported)
 *        ├── used reached 0 ──> spry_page_empty (queue.c)
 *        ├── its own page of 8-byte blocks ──> spry_free_tiny (free.c)
 *        ├── its own full page, or blocks above 1 KiB ──> marker and
 *        │     carved end checked as above, and the page's start (its
 *        │     colour gap: spry_free_slow), pushed on the block cache
 *        │     inside the guard (block_cache.h); over its bounds, a full
 *        │     page of 1 KiB blocks or less, or the guard taken
 *        │                  ──> spry_free_cached_slow (free.c)
 *        ├── other owner / large / huge / class blocks above 128 KiB
 *        │                  ──> spry_free_slow
 *        └── NULL, foreign, >= 4 MiB-aligned huge ──> spry_free_special
 *
 * No lock, no atomic read-modify-write, no syscall on either fast path.
 * The paths above 1 KiB are inline too: behind calls, a malloc+free pair of
 * 4,000 B took 93 instructions (callgrind), inline 82 (tcmalloc 80), 78 with
 * the block caches addressed by offset and the cached pages' test first; the
 * paths of 1 KiB or less are the same instructions as before (8-byte frees
 * 2 more, behind that test). */
#ifndef SPRY_ALLOC_FAST_H
#define SPRY_ALLOC_FAST_H

#include "types.h"
#include "heap.h"
#include "queue.h"
#include "block_cache.h"

/* The entry points whose bodies are these paths (malloc, free, new,
 * delete, spry_malloc, spry_free) start on a 64-byte line: where they
 * started followed the size of unrelated code linked before them, and
 * moved churns of 128 B-4 KiB by 4-7% between builds with the same
 * instructions (measured: two builds 0.95x apart, level once both were
 * aligned). */
#define SPRY_HOT_ENTRY __attribute__((aligned(64)))

/* The calls below take their arguments in the registers free holds them
 * in (p, page, mine), but spry_free_slow, whose callee free_checked keeps
 * fewer registers with the page first (4 instructions a remote free).
 * mine: the page's key xor the thread's pointer. */
void spry_free_slow(spry_page_t *page, void *p, uintptr_t mine);
void spry_free_special(void *p);
void spry_free_double(void *p);
/* The owner frees an 8-byte block of a page that is not full (key TINY, not
 * FULL); the pointer is checked. */
void spry_free_tiny(void *p, spry_page_t *page);

static inline __attribute__((always_inline)) void *spry_malloc_inline(size_t n) {
    spry_heap_t *heap = spry_tls_heap;
    if (spry_likely(n <= SPRY_SMALL_MAX)) {
        spry_page_t *page = heap->direct[n];
        spry_block_t *b = page->free;
        if (spry_likely(b != NULL)) {
            page->free = b->next;
            page->used++;
            spry_block_mark_live(b);
            return b;
        }
    } else if (spry_likely(n <= SPRY_PAGED_MAX)) {
        void *b = spry_bcache_take(heap, n);
        return spry_likely(b != NULL) ? b : spry_heap_malloc_sized(n, heap);
    }
    return spry_heap_malloc(n, heap);
}

/* spry_free_cached_inline's rarer cases (see the picture above); p is
 * marked free already. */
void spry_free_cached_slow(spry_heap_t *heap, spry_page_t *page, void *p);
/* Marks p freed and pushes it on the caller's block cache. */
static inline __attribute__((always_inline)) void spry_free_into_cache(spry_page_t *page, void *p) {
    spry_block_mark_free(p, page);
    spry_heap_t *heap = spry_tls_heap;
    if (spry_likely(spry_heap_try_enter(heap))) {
        bool kept = spry_bcache_push(heap, page, p);
        spry_heap_leave(heap);
        if (spry_likely(kept)) return;
    }
    spry_free_cached_slow(heap, page, p);
}

/* The owner's free of a block of a page keyed CACHED or FULL (not TINY;
 * `mine`: those flags): into the block cache. Not checked for a block
 * start, like the fast path's frees. */
static inline __attribute__((always_inline)) void spry_free_cached_inline(void *p, spry_page_t *page,
                                                                          uintptr_t mine) {
    /* no TINY: blocks of 16 B or more, which carry the free marker */
    if (spry_unlikely(spry_block_marker(p) == page)) { spry_free_double(p); return; }
    /* past the carved blocks (see the fast path), or before the first: the
     * colour gap in front of block 0 (page.c, page_colour), in no block;
     * taken, the next malloc handed it out over block 0 (a review). Both
     * reported there */
    if (spry_unlikely((uint8_t *)p >= page->carve_end || (uint8_t *)p < page->start)) {
        spry_free_slow(page, p, mine);
        return;
    }
    spry_free_into_cache(page, p);
}

static inline __attribute__((always_inline)) void spry_free_inline(void *p) {
    uintptr_t chunk = (uintptr_t)p >> SPRY_SEGMENT_SHIFT;
    /* (Empty: clang tested p >> 47 for the bound, a copy and a shift more
     * than comparing the chunk number.) */
    __asm__("" : "+r"(chunk));
    if (spry_unlikely(chunk >= SPRY_CHUNK_MAP_SIZE || spry_chunk_map[chunk] != SPRY_CHUNK_SEGMENT)) {
        spry_free_special(p);
        return;
    }
    /* The segment's start from the chunk number already in a register: one
     * shift. (The empty asm keeps the compiler from turning it back into a
     * mask of p, which costs a register copy more.) */
    __asm__("" : "+r"(chunk));
    spry_page_t *page = spry_page_of((const uint8_t *)(chunk << SPRY_SEGMENT_SHIFT), p);
    uintptr_t mine = spry_key_get(page) ^ spry_thread_key();   /* 0: ours, on the fast path */
    if (spry_unlikely(mine != 0)) {
        /* the block cache's pages first: 2 instructions fewer on their
         * frees, 2 more on 8-byte blocks' short slow path */
        if ((mine & ~(SPRY_KEY_FULL | SPRY_KEY_CACHED)) == 0) spry_free_cached_inline(p, page, mine);
        else if (mine == SPRY_KEY_TINY) spry_free_tiny(p, page);
        else spry_free_slow(page, p, mine);
        return;
    }
    if (spry_unlikely(spry_block_marker(p) == page)) {
        spry_free_double(p);
        return;
    }
    /* Past the blocks carved so far: never handed out from this page (a
     * stale pointer into a slice the class took again, whose purge cleared
     * the old marker; carving would hand the block out a second time): the
     * 2 instructions the fast path may spend on a double-free check. */
    if (spry_unlikely((uint8_t *)p >= page->carve_end)) {
        spry_free_slow(page, p, 0);
        return;
    }
    spry_block_mark_free(p, page);
    spry_page_push(page, p);
}

#endif
