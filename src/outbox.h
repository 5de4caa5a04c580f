/* Batching of remote frees: a thread that frees small blocks of other
 * threads' pages collects them per page (a few pages at a time) and hands each
 * batch over with one CAS instead of one per block: fewer atomics, and the
 * owner's page line bounces once per batch (snmalloc's lesson for
 * producer/consumer programs). A batch is handed over when it holds
 * SPRY_OUTBOX_MAX blocks, when its slot is needed for another page, and on
 * the thread's allocator slow paths, spry_trim and thread exit; so a thread
 * that stops calling the allocator holds back at most a few dozen blocks. */
#ifndef SPRY_OUTBOX_H
#define SPRY_OUTBOX_H

#include "types.h"

#define SPRY_OUTBOX_MAX 32

/* Queues b (a block of `page`, owned by another heap) in heap's outbox. */
void spry_outbox_add(spry_heap_t *heap, spry_page_t *page, spry_block_t *b);
/* Hands every pending batch over. */
void spry_outbox_flush(spry_heap_t *heap);

#endif
