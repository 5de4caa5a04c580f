/* Remote frees: blocks freed by a thread other than their page's owner.
 *
 * Batching: a thread that frees small blocks of other
 * threads' pages collects them per page (a few pages at a time) and hands each
 * batch over with one CAS instead of one per block: fewer atomics, and the
 * owner's page line bounces once per batch (snmalloc's lesson for
 * producer/consumer programs). A batch is handed over when it holds
 * SPRY_OUTBOX_MAX blocks, when its slot is needed for another page, and on
 * the thread's allocator slow paths, spry_trim and thread exit; so a thread
 * that stops calling the allocator holds back at most SPRY_OUTBOX_SLOTS
 * batches, each of one page's blocks (at most 32 of them). */
#ifndef SPRY_REMOTE_H
#define SPRY_REMOTE_H

#include "types.h"

#define SPRY_OUTBOX_MAX 32

/* Any thread other than the owner: push a block onto the page's remote list;
 * if the page asks for it (NOTIFY), the first push also queues the page in
 * the owner heap's inbox. */
void spry_page_remote_free(spry_page_t *page, spry_block_t *b);
/* The same for a list of n blocks of the page, linked first to last. */
void spry_page_remote_free_list(spry_page_t *page, spry_block_t *first, spry_block_t *last, uint32_t n);

/* Queues b (a block of `page`, owned by another heap) in heap's outbox. */
void spry_outbox_add(spry_heap_t *heap, spry_page_t *page, spry_block_t *b);
/* Hands every pending batch over. */
void spry_outbox_flush(spry_heap_t *heap);
/* fork child: forgets the batches of a heap whose thread fork cut off. */
void spry_outbox_drop(spry_heap_t *heap);
/* The owner collects the pages queued in its inbox: their remote frees go
 * to local_free, full pages that got some back rejoin their queue, empty
 * ones are released. */
void spry_inbox_drain(spry_heap_t *heap);
/* The same for a collector holding the heap's guard (steal.c): only the
 * pages the guard covers, large blocks and classes above 1 KiB. Returns the
 * inbox as it leaves it (the owner's pages only). */
spry_page_t *spry_inbox_drain_guarded(spry_heap_t *heap);
/* fork child: remakes a heap's inbox from its pages' QUEUED flags. */
void spry_inbox_rebuild(spry_heap_t *heap);

#endif
