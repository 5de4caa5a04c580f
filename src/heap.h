/* Thread heaps: the slow path of malloc, and the life of a heap across
 * thread exit (dormant, then reused by the next new thread) and fork. */
#ifndef SPRY_HEAP_H
#define SPRY_HEAP_H

#include "types.h"

/* malloc's slow path: first call of a thread, empty page, or n > SMALL_MAX.
 * n <= SPRY_ALLOC_MAX is not assumed. NULL + ENOMEM on failure. */
void *spry_heap_malloc(size_t n, spry_heap_t *heap);
/* The same for 1 KiB < n <= SPRY_LARGE_MAX once the block cache had no
 * block of n's class (or its guard was taken). */
void *spry_heap_malloc_sized(size_t n, spry_heap_t *heap);
/* An 8-byte block (class 0: never in direct[], see page.h). */
void *spry_heap_malloc_tiny(spry_heap_t *heap);
/* A block of n bytes (n <= SPRY_LARGE_MAX) in a span of slices of its own,
 * which realloc can grow in place (alloc.c). */
void *spry_heap_malloc_span(spry_heap_t *heap, size_t n);
/* Allocation of n bytes aligned to `align` (a power of two > 16). */
void *spry_heap_malloc_aligned(spry_heap_t *heap, size_t n, size_t align);
/* After an allocation found no memory or address space (RLIMIT_AS): what
 * the heaps keep free (segments waiting for a purge tick to go back to the
 * arena, caches) goes back (spry_trim), so that the caller may try once
 * more; false, nothing done, inside the fork window. Outside any guarded
 * region. A program that freed all it had under a limit of 300 MiB got no
 * block of 3 MiB until a purge pass ran (a review; glibc 88 of them).
 * Callers: the heap's slow path for its own blocks, and huge.c for every
 * huge block. */
bool spry_heap_oom_trim(void);
/* The calling thread's heap, creating or reusing one; NULL if out of memory. */
spry_heap_t *spry_heap_acquire(void);
/* A thread without a heap yet freed a block of `heap`'s: if that heap is
 * dormant when the thread first needs one, the thread takes it (heap.c,
 * heap_take). */
void spry_heap_note_freed_into(spry_heap_t *heap);
/* Collects remote frees and returns every empty page and hot large span of
 * a heap the caller owns (its own, or a dormant one it claimed). */
void  spry_heap_collect(spry_heap_t *heap);
/* The caller owns the heap (or holds its guard's collection): the block
 * cache and the hot spans back to their pages and segments, and the empty
 * pages of class `from` and up released (pinned ones included); `watch`:
 * see spry_queues_release_empty. */
void  spry_heap_drop_caches(spry_heap_t *heap, unsigned from, bool watch);
/* A purge pass over all heaps; true while memory waits. `collect`: also
 * other threads' heaps (guard.h), idle ones, or with `force` (a trim) all. */
bool  spry_heaps_purge(bool force, bool collect);
/* The caches that age by purge ticks, the spare pages (queue.c) and the hot
 * large spans (large.c): what is unused for two ticks goes back, at most
 * once a tick. Owner (every 16th slow path), or a purge pass holding the
 * owner off (steal.c) once spry_heap_caches_due, read without the guard,
 * says the owner has not aged them for two ticks. */
void  spry_heap_age_caches(spry_heap_t *heap);
bool  spry_heap_caches_due(spry_heap_t *heap);
/* Every heap ever made, through all_next (dormant ones included); safe to
 * walk without a lock. */
spry_heap_t *spry_heaps_list(void);
/* Whether a dormant heap still has blocks in use: others may free them,
 * and only a purge pass collects what they free (the purge thread stays). */
bool spry_heaps_dormant_hold(void);
/* A hurried look for heap `asker` (spry_purge_hurry: made by that heap or
 * by the purge thread): collects blocked threads' caches (steal.c), and if it did,
 * heaps that found nothing to borrow look again at their next fresh span.
 * Returns when a later look may collect more (guard.h), 0: none. */
uint64_t spry_heaps_hurry(const spry_heap_t *asker, uint64_t now);
/* Trims every heap marked over budget (the purge thread, on a kick). */
void  spry_heaps_trim_urgent(void);

/* One size class over every heap, in bytes but for pages: what its pages
 * span, how much of that is resident, carved (blocks put on lists so far),
 * in use (handed out and not freed), in block caches, and freed by other
 * threads but not yet collected by the owner (a census of where a class's
 * memory is: carved = in use + cached + waiting + free on page lists). */
typedef struct spry_class_walk {
    size_t pages, spanned, resident, carved, in_use, cached, waiting;
} spry_class_walk_t;
/* The census's rows past the classes, so that it accounts for all of the
 * segments: the spans of large blocks not yet freed (in_use: their bytes;
 * waiting: freed by another thread, not yet collected), the slices in no
 * page (free, or in a span kept whole for reuse; pages: slices), and the
 * segments' header slices (pages: segments). Only pages, spanned,
 * resident, in_use and waiting. */
enum { SPRY_WALK_LARGE = SPRY_CLASS_COUNT, SPRY_WALK_FREE, SPRY_WALK_HEADERS, SPRY_WALK_ROWS };

typedef struct spry_heap_walk {
    size_t segments, free_slices, class_pages, full_pages, large_pages;
    size_t class_bytes, used_bytes;
    size_t pages_made, pages_given_back, spares_taken;   /* so far */
} spry_heap_walk_t;
/* Counts over every heap's segments (takes each heap lock in turn; the
 * owner-only fields read are a snapshot, good for statistics only); with
 * `classes` (SPRY_WALK_ROWS entries, zeroed by the caller) also each
 * class's figures and the rows past them, resident bytes asked of the
 * kernel once a segment. */
void  spry_heaps_walk(spry_heap_walk_t *w, spry_class_walk_t *classes);
/* Adds every heap's span counters (relaxed reads, no heap lock). */
void  spry_heaps_span_totals(size_t *in_use, size_t *dirty);

void  spry_heaps_fork_prepare(void);
void  spry_heaps_fork_parent(void);
void  spry_heaps_fork_child(void);
void  spry_heaps_init(void);

#endif
