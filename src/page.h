/* Pages: free lists of one size class inside a span. Owner thread only,
 * except spry_page_remote_free which any thread may call. */
#ifndef SPRY_PAGE_H
#define SPRY_PAGE_H

#include "types.h"
#include "sizeclass.h"

/* Sets up a fresh span as a page of class c (no block carved yet). */
void spry_page_init_class(spry_heap_t *heap, spry_page_t *page, unsigned c);
/* Refills page->free: from local_free, from remote frees, then by carving
 * more of the page. Leaves page->free NULL only when the page is full. */
void spry_page_refill(spry_page_t *page);
/* The refill's first half: the blocks other threads freed into the page
 * (collected earlier, or waiting on its remote list) onto page->free;
 * false when there are none. */
bool spry_page_reclaim(spry_page_t *page);
/* The refill's second half: the next few blocks never handed out. */
void spry_page_carve(spry_page_t *page);
/* Class-0 pages (8-byte blocks, no room for a free marker) carry two
 * bitmaps in front of their blocks, one bit per block of a 64 KiB page:
 *  - live: set when a block is handed out, cleared when the owner frees it
 *    or collects another thread's free of it; written by the owner only.
 *    Other threads read it (a free of a block whose bit is clear is a double
 *    free), so its words are read and written with relaxed atomics: plain
 *    moves on x86-64, and the bit of a block another thread frees changes
 *    only with that block's hand-over, which the program orders.
 *  - remote: set by another thread's free (an atomic OR: several threads may
 *    free blocks of the page at once), cleared when the owner collects that
 *    free. Until then the block's live bit is still set, and without this
 *    bit the owner's free of it, or a realloc, put it on the owner's list
 *    while it waited on the remote list: the same block twice, and the rest
 *    of the list linked behind it (511 blocks handed out twice). */
#define SPRY_LIVE_MAP_BYTES 1024
#define SPRY_TINY_MAPS_BYTES (2 * SPRY_LIVE_MAP_BYTES)

static inline uint64_t *spry_page_live_word_at(const spry_page_t *page, size_t i, uint64_t *bit) {
    *bit = (uint64_t)1 << (i & 63);
    return (uint64_t *)(page->start - SPRY_LIVE_MAP_BYTES) + (i >> 6);
}
/* The index of b, a block start of a class-0 page. */
static inline size_t spry_page_tiny_at(const spry_page_t *page, const void *b) {
    return (size_t)((const uint8_t *)b - page->start) >> 3;
}
static inline uint64_t *spry_page_live_word(const spry_page_t *page, const void *b, uint64_t *bit) {
    return spry_page_live_word_at(page, spry_page_tiny_at(page, b), bit);
}
/* The index of p in a class-0 page, or a number >= page->reserved when p is
 * not one of its block starts (below the blocks or misaligned: the rotate
 * moves the low bits to the top). */
static inline size_t spry_page_tiny_index(const spry_page_t *page, const void *p) {
    size_t off = (size_t)((const uint8_t *)p - page->start);
    return (off >> 3) | (off << 61);
}
static inline void spry_page_live_set(spry_page_t *page, const void *b) {
    uint64_t bit, *w = spry_page_live_word(page, b, &bit);
    __atomic_store_n(w, __atomic_load_n(w, __ATOMIC_RELAXED) | bit, __ATOMIC_RELAXED);
}
/* Any thread: is block i live? */
static inline bool spry_page_live_test_at(const spry_page_t *page, size_t i) {
    uint64_t bit, *w = spry_page_live_word_at(page, i, &bit);
    return (__atomic_load_n(w, __ATOMIC_RELAXED) & bit) != 0;
}
/* Owner: clears block i's bit; false when it was clear already (b is free). */
static inline bool spry_page_live_clear_at(spry_page_t *page, size_t i) {
    uint64_t bit, *w = spry_page_live_word_at(page, i, &bit);
    uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
#if defined(__x86_64__)
    /* one instruction clears the bit and says whether it was set (a
     * register operand's bit number is taken modulo 64); the compiler's
     * mask, test and clear are five */
    bool was_set;
    (void)bit;
    __asm__("btr %2, %0" : "+r"(v), "=@ccc"(was_set) : "r"(i) : "cc");
    if (!was_set) return false;
#else
    if (!(v & bit)) return false;
    v &= ~bit;
#endif
    __atomic_store_n(w, v, __ATOMIC_RELAXED);
    return true;
}

static inline uint64_t *spry_page_remote_word_at(const spry_page_t *page, size_t i) {
    return (uint64_t *)(page->start - SPRY_TINY_MAPS_BYTES) + (i >> 6);
}
/* Another thread frees block i: false when its remote bit was set already
 * (freed twice before the owner collected it). */
static inline bool spry_page_remote_mark_at(spry_page_t *page, size_t i) {
    uint64_t bit = (uint64_t)1 << (i & 63);
    return !(__atomic_fetch_or(spry_page_remote_word_at(page, i), bit, __ATOMIC_RELAXED) & bit);
}
/* Any thread: is block i freed by another thread and not collected yet? */
static inline bool spry_page_remote_test_at(const spry_page_t *page, size_t i) {
    return (__atomic_load_n(spry_page_remote_word_at(page, i), __ATOMIC_RELAXED) >> (i & 63)) & 1;
}
/* Any thread: is block i free: never handed out or freed by the owner
 * (live bit clear), or freed by another thread (remote bit set)? */
static inline bool spry_page_tiny_free_at(const spry_page_t *page, size_t i) {
    return !spry_page_live_test_at(page, i) || spry_page_remote_test_at(page, i);
}
/* Owner, collecting: clears the bits of `bits` in the remote word w (an
 * atomic AND: other threads set bits of the same word meanwhile). */
static inline void spry_page_remote_unmark(uint64_t *w, uint64_t bits) {
    __atomic_fetch_and(w, ~bits, __ATOMIC_RELAXED);
}

/* Exact divisibility without a division (every free off the fast path
 * checks its pointer): an offset x below 2^32 is a multiple of a class size
 * d exactly when x * ceil(2^64 / d) (mod 2^64) < ceil(2^64 / d) (Lemire,
 * Kaser and Kurz, "Faster remainder by direct computation", 2019: 64 bits
 * suffice for a 32-bit x and any d below 2^32). One multiply; tests/
 * sizeclass.c checks every class against every offset of its page (the
 * table, spry_class_divides: sizeclass.h). */

/* True when p is the start of a block of the page (class pages: a carved
 * block; large and huge pages: their one block). */
static inline bool spry_page_class_block_start(const spry_page_t *page, const void *p) {
    size_t off = (size_t)((const uint8_t *)p - page->start);
    uint64_t d = spry_class_divides[page->class_idx];
    /* p below the blocks wraps to an offset past them; a block not carved
     * yet was never handed out (it carries no free marker: another thread's
     * free of it would put it on a list twice) */
    if (off >= (size_t)spry_page_capacity(page) * page->block_size) return false;
    return off * d < d;
}
static inline bool spry_page_block_start(const spry_page_t *page, const void *p) {
    if (page->kind == SPRY_PAGE_CLASS) return spry_page_class_block_start(page, p);
    return (const uint8_t *)p == page->start;
}
/* True when the block p (a block start of a class or large page) is free:
 * its live bit is clear or its remote bit set (8-byte blocks), or it carries
 * the free marker. */
static inline bool spry_page_block_free(const spry_page_t *page, const void *p) {
    if (page->kind == SPRY_PAGE_CLASS && page->class_idx == 0)
        return spry_page_tiny_free_at(page, spry_page_tiny_at(page, p));
    return spry_block_marker(p) == page;
}

/* Appends the list of blocks an xfree word held (taken from page->xfree) to
 * local_free and returns how many it held; a block freed twice is reported
 * and the list cut there. */
uint32_t spry_page_take_remote(spry_page_t *page, uintptr_t xfree);
/* Moves remote frees onto local_free; returns how many. Keeps the xfree
 * flags (the page may still sit in its heap's inbox). */
uint32_t spry_page_collect_remote(spry_page_t *page);
#endif
