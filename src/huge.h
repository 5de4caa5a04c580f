/* Huge blocks: above SPRY_LARGE_MAX. No heap owns them; any thread frees
 * them under one lock (these are multi-MiB operations: the block's page
 * faults cost far more than the lock).
 *
 * Up to SPRY_AREA_BLOCK_MAX (and aligned to at most 64 KiB) a block takes
 * whole 64 KiB granules of a shared 256 MiB area, best fit among the free
 * granules; a freed block's granules stay resident for the next block until
 * the purge delay or the free-memory budget returns them. Larger or more
 * aligned blocks get a run of 4 MiB chunks of their own (a huge segment). */
#ifndef SPRY_HUGE_H
#define SPRY_HUGE_H

#include "types.h"

#define SPRY_AREA_BLOCK_MAX ((size_t)64 << 20)

/* A huge block of `size` bytes aligned to `align` (power of two, 0 = none),
 * zeroed if `zero`. NULL + ENOMEM, after a trim and a second try (so never
 * inside a heap's guard: the trim collects the caller's heap). */
void *spry_huge_alloc(size_t size, size_t align, bool zero);
/* The same, unaligned and not zeroed, for a block realloc moves to grow it:
 * placed where it can grow in place later. */
void *spry_huge_alloc_growable(size_t size);
/* Frees a huge segment's block (the chunk map named its segment). */
void  spry_huge_free(spry_segment_t *seg);
/* Frees p, whose chunk map value is an area's: reports a double free or a
 * pointer that is no block's start. */
void  spry_huge_area_free(void *p);
/* The descriptor of the area granule holding p (chunk map value of an
 * area): a block's page when p is in its first granule, else a free page. */
spry_page_t *spry_huge_area_page(const void *p);
/* Grows or shrinks the huge block of `page` in place to hold `size` bytes
 * (size > SPRY_LARGE_MAX); sets its block_size. False when it cannot. */
bool  spry_huge_resize(spry_page_t *page, size_t size);
/* Purges areas' free granules that were free at the previous call (all if
 * force) and returns areas that stayed empty. True while some are left. */
bool  spry_huge_purge(bool force);
/* Copies up to `max` live huge blocks (start, usable size) whose start is
 * above `after`, lowest first; returns how many. A block freed right after
 * may still be listed. */
size_t spry_huge_blocks_after(uintptr_t after, void **blocks, size_t *sizes, size_t max);

/* Lock order: area lock, then the arena's (areas take runs from it); the
 * huge-segment list's lock is a leaf. */
void  spry_huge_fork_prepare(void);
void  spry_huge_fork_parent(void);
void  spry_huge_fork_child(void);

#endif
