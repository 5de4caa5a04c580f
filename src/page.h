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
/* Moves remote frees onto local_free; returns how many. Keeps the xfree
 * flags (the page may still sit in its heap's inbox). */
uint32_t spry_page_collect_remote(spry_page_t *page);
#endif
