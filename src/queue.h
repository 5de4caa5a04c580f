/* Class page queues of a heap, and the state changes of a class page: queued
 * (may have free blocks), full (out of its queue, key FULL, remote frees
 * NOTIFY the owner), empty (its span given back). Owner thread only. */
#ifndef SPRY_QUEUE_H
#define SPRY_QUEUE_H

#include "types.h"
#include "page.h"

/* Takes the first free block off a class page (page->free not NULL); the
 * caller marks it live. */
static inline spry_block_t *spry_page_take(spry_page_t *page) {
    spry_block_t *b = page->free;
    page->free = b->next;
    page->used++;
    return b;
}

/* Hands out the first free block of a class page (page->free not NULL). */
static inline void *spry_page_pop(spry_page_t *page) {
    spry_block_t *b = spry_page_take(page);
    if (spry_unlikely(page->class_idx == 0)) spry_page_live_set(page, b);
    else spry_block_mark_live(b);
    return b;
}

/* The owner saw page->used drop to 0 on the fast path. */
void  spry_page_empty(spry_page_t *page);

/* The owner gives b (marked free already where its class has a marker)
 * back to its page, not full: on the list malloc pops from, LIFO (the next
 * malloc of the class gets the block just freed, still in cache: 2x on
 * 4-64 KiB churn against pushing on a separate list, as mimalloc does). */
static inline void spry_page_push(spry_page_t *page, spry_block_t *b) {
    b->next = page->free;
    page->free = b;
    if (spry_unlikely(--page->used == 0)) spry_page_empty(page);
}

/* A block of class c from the first page of its queue that has one (pages
 * found full leave the queue), or from a new page. NULL when out of memory. */
void *spry_class_alloc(spry_heap_t *heap, unsigned c);
/* The same from the pages already queued only: NULL when none has a free
 * block (the malloc slow path's chores, then a new page, are needed). */
void *spry_class_alloc_queued(spry_heap_t *heap, unsigned c);
/* Makes the page the one its class queue pops from. */
void  spry_queue_push_front(spry_heap_t *heap, spry_page_t *page);
/* A page full until now, blocks of 1 KiB or less, while the head has free
 * blocks: last in its queue, or second where the class has many partly free
 * pages (queue.c); else first. */
void  spry_queue_push_back_in(spry_heap_t *heap, spry_page_t *page);
/* A page whose used count reached 0 (class or large) goes back to its
 * segment, or to the hot cache (large); one still in the inbox waits for the
 * drain. */
void  spry_page_release(spry_heap_t *heap, spry_page_t *page);
/* Gives back the spare pages (queue.c, page_park) unused since the purge
 * tick before last (`tick`: the current one); spry_heap_age_caches. */
void  spry_queues_age_spares(spry_heap_t *heap, uint32_t tick);
/* A purge pass's look, without the guard: the heap holds spares. */
bool  spry_queues_spares_held(spry_heap_t *heap);
/* The owner frees a block of a page whose key says FULL. */
void  spry_heap_free_full(spry_heap_t *heap, spry_page_t *page, spry_block_t *b);
/* Collects the remote frees of every queued page of class `from` and up,
 * unpins the queue heads and releases the pages left empty (thread exit,
 * trim: from 0; an idle heap's collection: the classes above 1 KiB, and
 * `watch`: the pages left ask to be told of remote frees, queue.c). */
void  spry_queues_release_empty(spry_heap_t *heap, unsigned from, bool watch);
/* fork child: remakes the queues of a heap whose owner did not survive. */
void  spry_queues_rebuild(spry_heap_t *heap);

#endif
