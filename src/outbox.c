/* Remote-free batching; see outbox.h. The outbox belongs to the freeing
 * thread's heap and is touched by that thread only. */
#include "outbox.h"
#include "page.h"

static void outbox_send(spry_heap_t *heap, spry_outbox_t *o) {
    spry_page_remote_free_list(o->page, o->head, o->tail);
    o->page = NULL;
    o->head = o->tail = NULL;
    o->count = 0;
    heap->outbox_pending--;
}

void spry_outbox_add(spry_heap_t *heap, spry_page_t *page, spry_block_t *b) {
    spry_outbox_t *o = &heap->outbox[((uintptr_t)page >> 7) % SPRY_OUTBOX_SLOTS];
    if (o->page != page) {
        if (o->page) outbox_send(heap, o);
        o->page = page;
        o->tail = b;
        b->next = NULL;
        heap->outbox_pending++;
    } else {
        b->next = o->head;
    }
    o->head = b;
    if (++o->count >= SPRY_OUTBOX_MAX) outbox_send(heap, o);
}

void spry_outbox_flush(spry_heap_t *heap) {
    for (unsigned i = 0; i < SPRY_OUTBOX_SLOTS && heap->outbox_pending; i++)
        if (heap->outbox[i].page) outbox_send(heap, &heap->outbox[i]);
}
