/* Large blocks, above SPRY_PAGED_MAX up to SPRY_LARGE_MAX, and blocks of up
 * to SPRY_LARGE_MAX aligned to 128 KiB..2 MiB: one span of slices each, the
 * block at its start. A freed one is kept whole in the owner's hot cache for
 * the next malloc of its span size. Owner thread only. */
#ifndef SPRY_LARGE_H
#define SPRY_LARGE_H

#include "types.h"

/* A large block of n bytes (n <= SPRY_LARGE_MAX) aligned to `align` (a
 * power of two up to SPRY_LARGE_MAX; 1 when the 64 KiB of every span is
 * enough): hot cache first, then a span. NULL when out of memory. */
void *spry_large_alloc(spry_heap_t *heap, size_t n, size_t align);
/* The hot cache's block of n's span size, or NULL (no lock, no search). */
void *spry_large_alloc_hot(spry_heap_t *heap, size_t n);
/* Keeps an emptied large page in the hot cache; false when the cache is full
 * (the caller frees the span). */
bool  spry_large_hot_push(spry_heap_t *heap, spry_page_t *page);
/* Gives every hot span back to its segment. */
void  spry_large_hot_flush(spry_heap_t *heap);
/* Recomputes how much the hot cache may hold (live heaps may have changed). */
void  spry_large_refresh_limit(spry_heap_t *heap);

#endif
