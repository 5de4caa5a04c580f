/* Class page queues (owner thread only); see queue.h.
 *
 * heap->queues[c] lists the pages of class c that may have free blocks;
 * queues[c].first is the page malloc pops from, mirrored in direct[] for
 * sizes up to SMALL_MAX. A page found with nothing to give is unlinked and its
 * key gets SPRY_KEY_FULL, so that the next free of one of its blocks by the
 * owner takes the slow path and links it back (spry_heap_free_full). */
#include "queue.h"
#include "page.h"
#include "segment.h"
#include "sizeclass.h"
#include "large.h"
#include "purge.h"
#include "block_cache.h"

/* Class 0 is never in direct[]: its blocks are handed out on the slow path
 * (their live bitmap, see page.h). */
/* Every class in the table covers a multiple of 8 byte sizes (8 for class
 * 1, then 16, 32, 64), written eight entries at a time with four 16-byte
 * stores: a page switch at large working sets rewrites up to 64 entries
 * (with a large live set of mixed sizes, a switch every few mallocs: the
 * loop's own instructions were half of it at two stores a turn). */
typedef uintptr_t direct_pair_t __attribute__((vector_size(16), aligned(8), may_alias));

static void direct_update(spry_heap_t *heap, unsigned c) {
    size_t size = spry_class_size(c);
    if (c == 0 || size > SPRY_SMALL_MAX) return;
    spry_page_t *page = heap->queues[c].first ? heap->queues[c].first : &spry_empty_page;
    direct_pair_t v = { (uintptr_t)page, (uintptr_t)page };
    for (size_t n = spry_class_size(c - 1) + 1; n <= size; n += 8) {
        *(direct_pair_t *)&heap->direct[n] = v;
        *(direct_pair_t *)&heap->direct[n + 2] = v;
        *(direct_pair_t *)&heap->direct[n + 4] = v;
        *(direct_pair_t *)&heap->direct[n + 6] = v;
    }
}

/* The head of a page queue is pinned (every class page, whatever the length
 * of the span it got: a cached span may be a slice longer than its class
 * asks): its used count holds one phantom block, so frees never see
 * it reach 0 and a thread that mallocs and frees a few blocks of a class in a
 * loop neither returns nor re-takes the span, at no cost to the free fast
 * path. Unpinned when it stops heading the queue. What this keeps from the
 * kernel is at most one page per class and heap, given back when the thread
 * exits or calls spry_trim / malloc_trim (and for the classes above 1 KiB,
 * a spare for a purge tick or two: page_park). */
static void page_pin(spry_page_t *page) {
    if (!page->pinned) { page->pinned = 1; page->used++; }
}

static void page_unpin(spry_page_t *page) {
    if (page->pinned) { page->pinned = 0; page->used--; }
}

static void queue_remove(spry_heap_t *heap, spry_page_t *page) {
    spry_page_queue_t *q = &heap->queues[page->class_idx];
    bool was_first = q->first == page;
    if (page->prev) page->prev->next = page->next; else q->first = page->next;
    if (page->next) page->next->prev = page->prev; else q->last = page->prev;
    page->next = page->prev = NULL;
    q->count--;
    if (was_first) {
        page_unpin(page);
        if (q->first) page_pin(q->first);
        direct_update(heap, page->class_idx);
    }
}

void spry_queue_push_front(spry_heap_t *heap, spry_page_t *page) {
    spry_page_queue_t *q = &heap->queues[page->class_idx];
    spry_page_t *old = q->first;
    page->prev = NULL;
    page->next = old;
    if (old) old->prev = page; else q->last = page;
    q->first = page;
    q->count++;
    page_pin(page);
    direct_update(heap, page->class_idx);
    /* the head it displaces goes back (or becomes the spare) if empty:
     * pinned, its phantom block kept it */
    if (old) {
        page_unpin(old);
        if (old->used == 0) spry_page_release(heap, old);
    }
}

/* A page of blocks of 1 KiB or less that was full and has a free block
 * again, while the head can still give blocks it has carved: at the back of
 * its queue while the queue is short (BACK_MAX pages) or holds at most a
 * quarter of the class's pages, else second, behind the head; when the
 * head cannot, at the front.
 * Each head change of these classes rewrites their direct[] entries (up to
 * 64) and moves the pin, so a head should serve many mallocs. With a large
 * live set of mixed sizes most frees meet a full page; second in the queue,
 * the next head was the page freed into last, with one free block: a head
 * change every few mallocs (the mixed test spent 65 instructions an
 * operation in the queue code; 0.84 s against 0.66 at the back). At the
 * back, a page gathers the frees that come while the pages before it are
 * used up (mimalloc appends too).
 * But the back is the emptiest end: where many pages are partly free (a
 * live set that shrank), mallocs spread over the sparse pages and keep
 * them, where second puts them on the page freed into last, the fullest,
 * and lets the others empty and go back (a review: 1,000,000 blocks down
 * to 10,000 kept 126 MB after malloc_trim at the back, 88 MB second).
 * Hence the two bounds: only a short queue, or one that is a small part of
 * the class, takes pages at the back (mixed 0.81x the time of second,
 * after the shrink 1.00-1.01x its memory).
 * A head that would carve fresh blocks does not keep the front, and larger
 * classes (no direct[] entries) always take it: the freed block is reused
 * first (otherwise peak RSS rose 40-67% on churns of 8-128 KiB at 64 live,
 * 3-5% with the carving rule alone). */
#define BACK_MAX 32
void spry_queue_push_back_in(spry_heap_t *heap, spry_page_t *page) {
    spry_page_queue_t *q = &heap->queues[page->class_idx];
    spry_page_t *head = q->first;
    if (!head || !head->free || page->block_size > SPRY_SMALL_MAX ||
        spry_page_capacity(head) < head->reserved) {
        spry_queue_push_front(heap, page);
        return;
    }
    q->count++;
    if (q->count > BACK_MAX && (size_t)q->count * 4 > q->pages) {
        page->prev = head;
        page->next = head->next;
        if (head->next) head->next->prev = page; else q->last = page;
        head->next = page;
    } else {
        page->next = NULL;
        page->prev = q->last;
        q->last->next = page;
        q->last = page;
    }
}

/* Sets or clears NOTIFY; false (nothing changed) when setting it finds remote
 * frees waiting: the page is not full after all. */
static bool xfree_set_notify(spry_page_t *page, bool on) {
    uintptr_t old = atomic_load_explicit(&page->xfree, memory_order_relaxed);
    for (;;) {
        if (on && (old & ~SPRY_XFREE_FLAGS)) return false;
        uintptr_t nw = on ? old | SPRY_XFREE_NOTIFY : old & ~SPRY_XFREE_NOTIFY;
        if (atomic_compare_exchange_weak_explicit(&page->xfree, &old, nw, memory_order_acq_rel,
                                                  memory_order_relaxed)) return true;
    }
}

/* An empty page goes back to its segment (its memory is purged after the
 * delay). */
static void page_give_back(spry_heap_t *heap, spry_page_t *page) {
    if (page->kind == SPRY_PAGE_LARGE) {
        spry_large_block_gone(heap, page);
        bool was_empty = heap->hot_bytes == 0;
        if (spry_large_hot_push(heap, page)) {
            if (was_empty) spry_purge_notify();             /* see spry_large_hot_push */
            return;
        }
    }
    if (page->kind == SPRY_PAGE_CLASS) {
        atomic_fetch_add_explicit(&heap->pages_given_back, 1, memory_order_relaxed);
        heap->queues[page->class_idx].pages--;
        if (spry_key_get(page) & SPRY_KEY_FULL) spry_key_set(page, spry_key_get(page) & ~SPRY_KEY_FULL);
        else queue_remove(heap, page);
    }
    spry_span_free(heap, page);
    spry_purge_notify();
}

/* A class of blocks above 1 KiB keeps one emptied page as its spare, out of
 * the queue, for its next new page, its carved blocks still on its lists.
 * Such a page holds 2-56 blocks, and it empties often: where the block
 * cache gives the owner's blocks back (a churn of 4-64 KiB blocks), or where
 * other threads free them, each page's blocks coming back together (a
 * producer/consumer: 270,000 pages released a second at 4 producers and 4
 * consumers, 50,000 with spares). Released, its span went to the span
 * cache or to another class, and the next page of the class often to a
 * span not resident yet: peak RSS 0.60-0.79x with spares on churns of
 * 4-64 KiB at 64 and 1,024 live, rate level. Blocks of 1 KiB or less are
 * freed on the owner's unguarded fast path, where the purge thread could
 * not take a spare back (guard.h). A spare unused for two purge ticks (one
 * to two purge delays) goes back, at the owner's slow path or at a purge
 * pass that finds the owner outside its guarded paths
 * (spry_heap_age_caches), and an idle heap's with its caches. */
static bool page_park(spry_heap_t *heap, spry_page_t *page) {
    spry_page_queue_t *q = &heap->queues[page->class_idx];
    if (page->block_size <= SPRY_SMALL_MAX || q->spare) return false;
    uintptr_t key = spry_key_get(page);
    if (!(key & SPRY_KEY_FULL)) {
        queue_remove(heap, page);
        spry_key_set(page, key | SPRY_KEY_FULL);
    }
    page->cache_tick = __atomic_load_n(&heap->purge_tick, __ATOMIC_RELAXED);
    q->spare = page;
    /* the purge thread's ticks age it, and its passes take it from an
     * owner that no longer comes by (steal.c) */
    if (heap->spares++ == 0) spry_purge_notify();
    return true;
}

/* The class's spare, out of its place. */
static spry_page_t *spare_unpark(spry_heap_t *heap, spry_page_queue_t *q) {
    spry_page_t *page = q->spare;
    q->spare = NULL;
    heap->spares--;
    return page;
}

static void spare_give_back(spry_heap_t *heap, unsigned c) {
    page_give_back(heap, spare_unpark(heap, &heap->queues[c]));
}

/* The owner's stores are plain: read as the scavenger reads the block
 * caches (block_cache.c, spry_bcache_untouched), and looked at again under
 * the guard. */
__attribute__((no_sanitize("thread")))
bool spry_queues_spares_held(spry_heap_t *heap) {
    return *(volatile uint32_t *)&heap->spares != 0;
}

void spry_queues_age_spares(spry_heap_t *heap, uint32_t tick) {
    for (unsigned c = spry_class_of(SPRY_SMALL_MAX + 1); c < SPRY_CLASS_COUNT && heap->spares; c++) {
        spry_page_t *page = heap->queues[c].spare;
        if (page && tick - page->cache_tick >= 2) spare_give_back(heap, c);
    }
}

/* A page still queued in the inbox waits for the drain, which will see it
 * empty. `park`: a class page may become its class's spare. */
static void page_release(spry_heap_t *heap, spry_page_t *page, bool park) {
    if (page->kind == SPRY_PAGE_FREE) return;     /* already given back */
    if (atomic_load_explicit(&page->xfree, memory_order_acquire) & SPRY_XFREE_QUEUED) return;
    if (park && page->kind == SPRY_PAGE_CLASS && page_park(heap, page)) return;
    page_give_back(heap, page);
}

void spry_page_release(spry_heap_t *heap, spry_page_t *page) {
    page_release(heap, page, true);
}

void spry_page_empty(spry_page_t *page) {
    spry_page_release(page->heap, page);
    spry_purge_free_point(__builtin_return_address(0));
}

void spry_heap_free_full(spry_heap_t *heap, spry_page_t *page, spry_block_t *b) {
    b->next = page->free;
    page->free = b;
    if (page->kind == SPRY_PAGE_CLASS && (spry_key_get(page) & SPRY_KEY_FULL)) {
        spry_key_set(page, spry_key_get(page) & ~SPRY_KEY_FULL);
        xfree_set_notify(page, false);
        spry_queue_push_back_in(heap, page);
    }
    if (--page->used == 0) spry_page_release(heap, page);
}

/* The class's spare becomes its head (its blocks are all free) and gives
 * a block. */
static void *spare_take(spry_heap_t *heap, spry_page_queue_t *q) {
    spry_page_t *page = spare_unpark(heap, q);
    atomic_fetch_add_explicit(&heap->spares_taken, 1, memory_order_relaxed);
    spry_key_set(page, spry_key_get(page) & ~SPRY_KEY_FULL);
    if (!page->free) spry_page_refill(page);
    spry_queue_push_front(heap, page);
    return spry_page_pop(page);
}

void *spry_class_alloc_queued(spry_heap_t *heap, unsigned c) {
    spry_page_queue_t *q = &heap->queues[c];
    spry_page_t *page = q->first;
    while (page) {
        if (!page->free && !spry_page_reclaim(page) && page->capacity < page->reserved) {
            /* blocks never handed out: the spare's, resident, first */
            if (q->spare) return spare_take(heap, q);
            spry_page_carve(page);
        }
        if (page->free) {
            if (page != q->first) { queue_remove(heap, page); spry_queue_push_front(heap, page); }
            return spry_page_pop(page);
        }
        /* Full: out of the queue, and remote frees must now tell us. If
         * some arrived meanwhile, the page is not full: take them. */
        if (!xfree_set_notify(page, true)) continue;
        spry_page_t *next = page->next;
        queue_remove(heap, page);
        spry_key_set(page, spry_key_get(page) | SPRY_KEY_FULL);
        page = next;
    }
    return NULL;
}

void *spry_class_alloc(spry_heap_t *heap, unsigned c) {
    void *p = spry_class_alloc_queued(heap, c);
    if (p) return p;
    spry_page_queue_t *q = &heap->queues[c];
    if (q->spare) return spare_take(heap, q);
    spry_page_t *page = spry_span_alloc_least(heap, spry_class_page_slices(c, q->pages),
                                              spry_class_page_least(c, q->pages));
    if (!page) return NULL;
    spry_page_init_class(heap, page, c);
    atomic_fetch_add_explicit(&heap->pages_made, 1, memory_order_relaxed);
    q->pages++;
    spry_page_refill(page);
    spry_queue_push_front(heap, page);
    return spry_page_pop(page);
}

void spry_queues_release_empty(spry_heap_t *heap, unsigned from, bool watch) {
    for (unsigned c = from; c < SPRY_CLASS_COUNT; c++) {
        if (heap->queues[c].spare) spare_give_back(heap, c);
        spry_page_t *page = heap->queues[c].first;
        while (page) {
            spry_page_t *next = page->next;
            page_unpin(page);
            /* The idle collection's pages ask to be told, as a full page
             * does, so that the next remote free into one queues it in the
             * inbox and wakes the purge thread, which then collects the
             * heap again (remote frees into a page that was not full waited
             * there for the owner: 158 MiB in a review). What came
             * meanwhile is taken first. The owner's next drain clears
             * NOTIFY of a page that is not full. */
            if (watch) while (!xfree_set_notify(page, true)) spry_page_collect_remote(page);
            else spry_page_collect_remote(page);
            if (page->used == 0) page_release(heap, page, false);
            page = next;
        }
    }
}

static void rebuild_page(spry_page_t *page, void *arg) {
    spry_heap_t *heap = arg;
    if (page->kind != SPRY_PAGE_CLASS) return;
    page_unpin(page);
    page->next = page->prev = NULL;
    spry_page_collect_remote(page);
    uintptr_t key = spry_key_get(page);
    spry_page_queue_t *q = &heap->queues[page->class_idx];
    q->pages++;
    if (page->free || page->local_free || page->capacity < page->reserved) {
        spry_key_set(page, key & ~SPRY_KEY_FULL);
        atomic_fetch_and_explicit(&page->xfree, ~SPRY_XFREE_NOTIFY, memory_order_relaxed);
        page->prev = q->last;
        if (q->last) q->last->next = page; else q->first = page;
        q->last = page;
        q->count++;
    } else {
        spry_key_set(page, key | SPRY_KEY_FULL);
        atomic_fetch_or_explicit(&page->xfree, SPRY_XFREE_NOTIFY, memory_order_relaxed);
    }
}

/* fork child: the owner of this heap did not survive fork and may have been
 * in the middle of changing a queue, so queues, pins and direct[] are made
 * anew from the page descriptors (whose span fields were consistent:
 * fork_prepare held the heap lock). A page that can still give a block is
 * queued, the others are marked full. A block whose pop or push the fork cut
 * in two is at worst lost, or keeps its page from being released. The block
 * cache goes back to the pages first, so that they count its blocks free. */
void spry_queues_rebuild(spry_heap_t *heap) {
    spry_bcache_rebuild(heap);
    for (unsigned c = 0; c < SPRY_CLASS_COUNT; c++)
        heap->queues[c] = (spry_page_queue_t){ NULL, NULL, 0, 0, NULL };
    heap->spares = 0;
    for (size_t n = 0; n < SPRY_DIRECT_SLOTS; n++) heap->direct[n] = &spry_empty_page;
    spry_heap_spans(heap, false, rebuild_page, heap);
    for (unsigned c = 0; c < SPRY_CLASS_COUNT; c++) {
        if (!heap->queues[c].first) continue;
        page_pin(heap->queues[c].first);
        direct_update(heap, c);
    }
}
