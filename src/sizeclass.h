/* Size classes.
 *   <= 8 B: 8;  9..128 B: multiples of 16 (16-byte alignment forbids finer);
 *   above 128 B: 8 classes per doubling, so a request never gets more than
 *   12.5% over what it asked (BigBrain 2020's point: power-of-two classes
 *   waste half). 105 classes up to 512 KiB.
 * Each class lives in pages of a fixed slice count, chosen so that a page
 * holds at least 8 blocks. */
#ifndef SPRY_SIZECLASS_H
#define SPRY_SIZECLASS_H

#include "types.h"

static inline unsigned spry_class_of(size_t n) {
    if (n <= 8) return 0;
    if (n <= 128) return (unsigned)((n + 15) >> 4);
    size_t m = n - 1;
    unsigned k = 63u - (unsigned)__builtin_clzl(m);     /* 2^k <= m < 2^(k+1) */
    unsigned top = (unsigned)(m >> (k - 3));             /* 8..15             */
    return 9u + (k - 7u) * 8u + (top - 8u);
}

/* For SPRY_SMALL_MAX < n <= SPRY_PAGED_MAX, by table: where in a heap the
 * block cache of spry_class_of(n) lies, heap->bcache[spry_class_of(n)] as
 * a byte offset (the block cache's pop in malloc: 7 instructions fewer a
 * malloc than the class computed, 2 fewer than the class by table). */
extern const uint16_t spry_bcache_mid[SPRY_PAGED_MAX >> 7];
static inline size_t spry_bcache_off_mid(size_t n) {
    return spry_bcache_mid[(n - 1) >> 7];
}

/* Entry c: ceil(2^64 / the size of class c), for the block-start test
 * (page.h, spry_page_class_block_start). */
extern const uint64_t spry_class_divides[SPRY_CLASS_COUNT];

/* spry_good_size_of(n) for 128 KiB < n <= SPRY_LARGE_MAX, by table
 * (in 16 KiB units: class sizes from 128 KiB on are multiples of it). */
extern const uint8_t spry_large_units[SPRY_LARGE_MAX >> 14];
static inline size_t spry_large_size_of(size_t n) {
    return (size_t)spry_large_units[(n - 1) >> 14] << 14;
}

static inline size_t spry_class_size(unsigned c) {
    if (c == 0) return 8;
    if (c <= 8) return (size_t)c << 4;
    unsigned i = c - 9, k = 7 + i / 8, top = 8 + i % 8;
    return (size_t)(top + 1) << (k - 3);
}

/* Slices in a page of class c. */
static inline unsigned spry_class_slices(unsigned c) {
    size_t s = spry_class_size(c);
    if (s <= 8 * 1024) return 1;
    if (s <= 16 * 1024) return 2;
    if (s <= 32 * 1024) return 4;
    if (s <= 64 * 1024) return 8;
    if (s <= 128 * 1024) return 16;
    return 32;
}

/* Slices of the next page of class c for a heap that holds `pages` of that
 * class: the first page of a class of blocks above 32 KiB holds two blocks,
 * the next ones spry_class_slices(c) (512 KiB to 2 MiB; the second may be
 * shorter, spry_class_page_least). Why: a thread
 * that used a block or two of many such classes held a page of 7 to 14
 * blocks for each (2 MiB for one block of 200 KiB); the span bytes a heap
 * has in use set the budget of dirty memory it may keep (segment.c), and
 * new pages, taken from resident slices first, kept them resident. Threads
 * that come and go passing blocks of 8 B-400 KiB to each other (in the
 * manner of mimalloc's stress test, 8 and 16 threads): peak RSS 0.6-0.65
 * times, page faults 0.45 times, as fast. Pages that double from two
 * blocks (2, 4, 8, ...) cost the chunk test of 256 B-512 KiB at 14 threads
 * 7% more peak RSS (its classes keep a block or two live each: small pages
 * made and given back again), and two-block first pages for the classes of
 * 9-32 KiB (pages of 128 and 256 KiB) 3% at 256 B-32 KiB, 10 threads, for
 * little gain. Churns of 4-512 KiB blocks, which fill their classes'
 * pages, run the same instructions with the same cache misses (callgrind). */
static inline unsigned spry_class_page_slices(unsigned c, uint32_t pages) {
    unsigned full = spry_class_slices(c);
    if (full < 8 || pages > 0) return full;
    return (unsigned)((2 * spry_class_size(c) + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT);
}

/* The fewest slices that page may take instead, from resident free slices
 * where no free run holds spry_class_page_slices (segment.h,
 * spry_span_alloc_least): the first page's length for the second page,
 * else the same. The second page is the first of full length, and a heap
 * that holds one page of the class may never need it: threads that pass
 * blocks of up to 400 KiB around (bench exchange) took most such pages
 * from slices never used, their heaps' free resident runs being shorter
 * (at 8 threads, blocks written through, these pages were over half of the
 * slices taken fresh). Cut to a resident run: 0.75x the peak RSS at 8
 * threads, 0.83x at 2, 0.73x the page faults, the rate level (alternating
 * runs). Letting every later page be cut so as well cost churns of
 * 64-512 KiB blocks 0.78-0.94x the rate and 1.07-1.35x the RSS (their
 * classes' many pages cut short); the second page alone leaves them level. */
static inline unsigned spry_class_page_least(unsigned c, uint32_t pages) {
    return spry_class_page_slices(c, pages == 1 ? 0 : pages);
}

/* Pages of these classes start their first block a few 64-byte lines past
 * the span's start (page.c, page_colour): the classes above 1 KiB whose
 * size is not a power of two, the ones whose pages have room left over.
 * Their blocks are 64-byte aligned, not aligned to their size's power-of-two
 * factor, so an aligned request above 64 takes another class
 * (spry_heap_malloc_aligned). Powers of two fill their pages exactly. */
#define SPRY_COLOUR_STEP 64
static inline bool spry_class_coloured(unsigned c) {
    size_t s = spry_class_size(c);
    return s > SPRY_SMALL_MAX && (s & (s - 1)) != 0;
}

/* What a request of n bytes really gets (n <= SPRY_ALLOC_MAX). */
static inline size_t spry_good_size_of(size_t n) {
    if (n <= SPRY_CLASS_MAX) return spry_class_size(spry_class_of(n));
    /* beyond: whole 64 KiB slices (large spans) or granules (huge blocks) */
    return (n + SPRY_SLICE_SIZE - 1) & ~(SPRY_SLICE_SIZE - 1);
}

#endif
