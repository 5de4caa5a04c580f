/* From any pointer to its block, for the checks off the fast paths
 * (realloc, calloc, usable size, the cautious layer). O(1), no lock. */
#ifndef SPRY_BLOCK_H
#define SPRY_BLOCK_H

#include "types.h"
#include "page.h"
#include "segment.h"
#include "huge.h"

/* The page of a spry block, or NULL for foreign pointers (and for the
 * chunks inside a huge block after its first). */
static inline spry_page_t *spry_block_page(const void *p) {
    unsigned k = spry_chunk_kind(p);
    if (spry_likely(k == SPRY_CHUNK_SEGMENT)) return spry_page_of(spry_segment_base(p), p);
    if (k >= SPRY_CHUNK_AREA) return spry_huge_area_page(p);
    if (k == SPRY_CHUNK_ALIGNED) return &spry_segment_pages(spry_aligned_huge_segment(p))[1];
    return NULL;
}

/* True when p is a live block's start: not a freed block (marker, live
 * bitmap, freed span), not inside a block, not a page without blocks. */
static inline bool spry_block_is_live(spry_page_t *page, const void *p) {
    if (page->kind == SPRY_PAGE_FREE || !spry_page_block_start(page, p)) return false;
    return page->kind == SPRY_PAGE_HUGE || !spry_page_block_free(page, p);
}

/* The start of the block of `page` that holds p, or NULL when p is in no
 * block (a page without blocks, past the carved ones). */
static inline uint8_t *spry_block_containing(const spry_page_t *page, const void *p) {
    if (page->kind == SPRY_PAGE_FREE) return NULL;
    size_t off = (size_t)((const uint8_t *)p - page->start);
    if (page->kind != SPRY_PAGE_CLASS) return off < page->block_size ? page->start : NULL;
    if (off >= (size_t)spry_page_capacity(page) * page->block_size) return NULL;
    return page->start + off / page->block_size * page->block_size;
}

#endif
