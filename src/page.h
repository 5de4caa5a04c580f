/* Pages: free lists of one size class inside a span. Owner thread only,
 * except spry_page_remote_free which any thread may call. */
#ifndef SPRY_PAGE_H
#define SPRY_PAGE_H

#include "types.h"

/* Sets up a fresh span as a page of class c (no block carved yet). */
void spry_page_init_class(spry_heap_t *heap, spry_page_t *page, unsigned c);
/* Refills page->free: from local_free, from remote frees, then by carving
 * more of the page. Leaves page->free NULL only when the page is full. */
void spry_page_refill(spry_page_t *page);
/* Class-0 pages (8-byte blocks): a bitmap of live blocks in front of the
 * blocks (one bit per block of a 64 KiB page), set when a block is handed
 * out and cleared when it is freed; owner only, remote frees are checked
 * when the owner collects them. */
#define SPRY_LIVE_MAP_BYTES 1024

static inline uint64_t *spry_page_live_map(const spry_page_t *page) {
    return (uint64_t *)(page->start - SPRY_LIVE_MAP_BYTES);
}
static inline void spry_page_live_set(spry_page_t *page, const void *b) {
    size_t i = (size_t)((const uint8_t *)b - page->start) >> 3;
    spry_page_live_map(page)[i >> 6] |= (uint64_t)1 << (i & 63);
}
/* Clears b's bit; false when it was clear already (b is free). */
static inline bool spry_page_live_clear(spry_page_t *page, const void *b) {
    size_t i = (size_t)((const uint8_t *)b - page->start) >> 3;
    uint64_t bit = (uint64_t)1 << (i & 63), *w = &spry_page_live_map(page)[i >> 6];
    if (!(*w & bit)) return false;
    *w &= ~bit;
    return true;
}

/* Appends a list of blocks taken from page->xfree to local_free and returns
 * how many it held; a block freed twice is reported and the list cut there. */
uint32_t spry_page_take_remote(spry_page_t *page, spry_block_t *list);
/* Moves remote frees onto local_free; returns how many. Keeps the xfree
 * flags (the page may still sit in its heap's inbox). */
uint32_t spry_page_collect_remote(spry_page_t *page);
#endif
