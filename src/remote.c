/* Remote frees, from the freeing thread to the owner; see remote.h.
 *   push:  a block (or a batch) onto the page's atomic xfree list; a page
 *          that asked to be told (NOTIFY) is queued in its heap's inbox;
 *   batch: the freeing thread's outbox, touched by that thread only;
 *   drain: the owner takes the inbox and collects those pages. */
#include "remote.h"
#include "queue.h"
#include "purge.h"
#include "page.h"
#include "segment.h"
#include "report.h"

void spry_page_remote_free(spry_page_t *page, spry_block_t *b) {
    spry_page_remote_free_list(page, b, b, 1);
}

void spry_page_remote_free_list(spry_page_t *page, spry_block_t *first, spry_block_t *last, uint32_t n) {
    uintptr_t old = atomic_load_explicit(&page->xfree, memory_order_relaxed), nw;
    uintptr_t more = spry_xfree_word(NULL, n, 0);
    do {
        spry_block_t *list = spry_xfree_list(old);
        /* the same block freed twice in a row would link to itself */
        if (spry_unlikely(first == list)) {
            spry_report_error("free", "double free", first);
            return;
        }
        last->next = list;
        /* the count and the flags kept, n more, the new head; NOTIFY asks
         * for QUEUED (the bit below it) */
        nw = (old - (uintptr_t)list + more) | (uintptr_t)first | ((old & SPRY_XFREE_NOTIFY) >> 1);
    } while (!spry_cas_weak_release(&page->xfree, &old, nw));
    /* Into a dormant heap (key 0): nobody collects it but a purge pass. */
    if (!spry_xfree_list(old) && (spry_key_get(page) & ~SPRY_KEY_FLAGS) == 0)
        spry_purge_notify();
    /* Only the free that set QUEUED links the page into the inbox. */
    if (!(nw & SPRY_XFREE_QUEUED) || (old & SPRY_XFREE_QUEUED)) return;
    spry_heap_t *heap = page->heap;
    spry_page_t *top = atomic_load_explicit(&heap->inbox, memory_order_relaxed);
    do {
        atomic_store_explicit(&page->inbox_next, top, memory_order_relaxed);
    } while (!spry_cas_weak_release(&heap->inbox, &top, page));
    /* The owner may be idle, and then collects nothing itself: the purge
     * thread (gone, maybe, for want of work) must look (steal.c). Not only
     * for heaps it collected already: one whose owner never cached a block
     * had never started it (32 MiB kept in a review), and a free landing
     * while the collection ends saw the flag still clear. Once per page
     * queued; cheap while the thread runs (a flag already set). */
    spry_purge_notify();
}

static __attribute__((noinline)) void outbox_send(spry_heap_t *heap, spry_outbox_t *o) {
    spry_page_remote_free_list(o->page, o->head, o->tail, o->count);
    o->page = NULL;
    o->head = o->tail = NULL;
    o->count = 0;
    heap->outbox_pending--;
}

/* A batch for another page starts in the slot. Apart from the common case
 * below, which then needs no stack frame (a remote free of a 32 B block
 * into a batch under way took 36 instructions there, 19 now). */
static __attribute__((noinline)) void outbox_start(spry_heap_t *heap, spry_outbox_t *o, spry_page_t *page,
                                                   spry_block_t *b) {
    if (o->page) outbox_send(heap, o);
    o->page = page;
    o->head = o->tail = b;
    b->next = NULL;
    o->count = 1;
    heap->outbox_pending++;
}

void spry_outbox_add(spry_heap_t *heap, spry_page_t *page, spry_block_t *b) {
    /* by cache line, descriptors being three apart, so that neighbours get
     * slots of their own, and by segment: the descriptors of one slice in
     * different segments lie whole 512-byte colour steps apart (types.h),
     * so by the line alone such pages of every thread's segments shared
     * two slots of 8 */
    uintptr_t at = ((uintptr_t)page >> 6) ^ ((uintptr_t)page >> SPRY_SEGMENT_SHIFT);
    spry_outbox_t *o = &heap->outbox[at % SPRY_OUTBOX_SLOTS];
    if (spry_unlikely(o->page != page)) {
        outbox_start(heap, o, page, b);
        return;
    }
    /* b was checked already (its free marker, or an 8-byte block's remote
     * bit): it is in no batch */
    b->next = o->head;
    o->head = b;
    if (spry_unlikely(++o->count >= SPRY_OUTBOX_MAX)) outbox_send(heap, o);
}

void spry_outbox_flush(spry_heap_t *heap) {
    for (unsigned i = 0; i < SPRY_OUTBOX_SLOTS && heap->outbox_pending; i++)
        if (heap->outbox[i].page) outbox_send(heap, &heap->outbox[i]);
}

/* The thread may have been cut anywhere in spry_outbox_add or outbox_send:
 * a batch half linked, or handed over already but still in its slot. Sent
 * again, such a batch linked a page's remote list into itself or into
 * garbage, and the child crashed collecting it, or reported valid frees as
 * double (a review: 2-3% of the children of a program forking every
 * millisecond while its threads exchange blocks). Its blocks are lost to
 * the child instead: at most SPRY_OUTBOX_SLOTS x SPRY_OUTBOX_MAX blocks per
 * such thread, once. */
void spry_outbox_drop(spry_heap_t *heap) {
    for (unsigned i = 0; i < SPRY_OUTBOX_SLOTS; i++) {
        spry_outbox_t *o = &heap->outbox[i];
        o->page = NULL;
        o->head = o->tail = NULL;
        o->count = 0;
    }
    heap->outbox_pending = 0;
}

/* One page of the inbox: one that asked to be told (a full class page, a
 * large block) and got remote frees since the last drain. */
static void inbox_collect(spry_heap_t *heap, spry_page_t *page) {
    /* Take the list and clear QUEUED, so the next remote free can queue
     * the page again; NOTIFY stays only if the page stays full. */
    bool full = page->kind == SPRY_PAGE_LARGE ||
                (page->kind == SPRY_PAGE_CLASS && (spry_key_get(page) & SPRY_KEY_FULL));
    uintptr_t head = atomic_load_explicit(&page->xfree, memory_order_relaxed), nw;
    do {
        nw = (full && !spry_xfree_list(head)) ? SPRY_XFREE_NOTIFY : 0;
    } while (!atomic_compare_exchange_weak_explicit(&page->xfree, &head, nw,
                                                    memory_order_acquire, memory_order_relaxed));
    if (spry_page_take_remote(page, head)) {
        if (page->kind == SPRY_PAGE_CLASS && (spry_key_get(page) & SPRY_KEY_FULL) && page->used > 0) {
            spry_key_set(page, spry_key_get(page) & ~SPRY_KEY_FULL);
            spry_queue_push_back_in(heap, page);
        }
    }
    if (page->used == 0) spry_page_release(heap, page);
}

void spry_inbox_drain(spry_heap_t *heap) {
    spry_page_t *page = atomic_exchange_explicit(&heap->inbox, NULL, memory_order_acquire);
    while (page) {
        spry_page_t *next = atomic_load_explicit(&page->inbox_next, memory_order_relaxed);
        inbox_collect(heap, page);
        page = next;
    }
}

/* Pages of blocks of 1 KiB or less are the owner's unguarded fast paths'
 * (guard.h): they go back into the inbox, still QUEUED, for the owner, and
 * only into an inbox found empty, so that what is returned (the inbox as
 * this drain leaves it) holds no page queued meanwhile: the idle
 * collection compares it with the inbox at its next pass (steal.c). A page
 * queued while the pages were sorted is drained in another round (a
 * review: one queued as the collection ended was taken for the owner's,
 * and waited for it). */
spry_page_t *spry_inbox_drain_guarded(spry_heap_t *heap) {
    spry_page_t *keep = NULL, *keep_last = NULL;
    for (;;) {
        spry_page_t *page = atomic_exchange_explicit(&heap->inbox, NULL, memory_order_acquire);
        while (page) {
            spry_page_t *next = atomic_load_explicit(&page->inbox_next, memory_order_relaxed);
            if (page->kind == SPRY_PAGE_CLASS && page->block_size <= SPRY_SMALL_MAX) {
                atomic_store_explicit(&page->inbox_next, keep, memory_order_relaxed);
                if (!keep) keep_last = page;
                keep = page;
            } else {
                inbox_collect(heap, page);
            }
            page = next;
        }
        spry_page_t *empty = NULL;
        if (!keep) {
            if (!atomic_load_explicit(&heap->inbox, memory_order_acquire)) return NULL;
            continue;
        }
        atomic_store_explicit(&keep_last->inbox_next, NULL, memory_order_relaxed);
        if (atomic_compare_exchange_strong_explicit(&heap->inbox, &empty, keep, memory_order_release,
                                                    memory_order_relaxed)) return keep;
    }
}

static void inbox_page(spry_page_t *page, void *list) {
    if (!(atomic_load_explicit(&page->xfree, memory_order_relaxed) & SPRY_XFREE_QUEUED)) return;
    atomic_store_explicit(&page->inbox_next, *(spry_page_t **)list, memory_order_relaxed);
    *(spry_page_t **)list = page;
}

/* fork child: a remote free cut in two by fork may have marked its page
 * QUEUED without linking it into the inbox, and then no later free would
 * link it. The inbox is made anew from the pages' QUEUED flags. */
void spry_inbox_rebuild(spry_heap_t *heap) {
    spry_page_t *list = NULL;
    spry_heap_spans(heap, false, inbox_page, &list);
    atomic_store_explicit(&heap->inbox, list, memory_order_relaxed);
}
