/* Thread heaps; see heap.h and the ownership rules in types.h.
 *
 * Queues: heap->queues[c] lists the pages of class c that may have free
 * blocks; queues[c].first is the page malloc pops from, mirrored in direct[]
 * for sizes up to SMALL_MAX. A page found with nothing to give is unlinked and
 * its key gets SPRY_KEY_FULL, so that the next free of one of its blocks by
 * the owner takes the slow path and links it back (spry_heap_free_full).
 *
 * Locks: heaps_lock guards the list of all heaps and the dormant list; it is
 * taken on thread start and exit only. */
#define _GNU_SOURCE
#include "heap.h"
#include "page.h"
#include "segment.h"
#include "sizeclass.h"
#include "arena.h"
#include "purge.h"
#include "stats.h"
#include "init.h"
#include "outbox.h"
#include <errno.h>
#include <string.h>

spry_page_t spry_empty_page;
spry_heap_t spry_empty_heap = {
    .direct = { [0 ... SPRY_DIRECT_SLOTS - 1] = &spry_empty_page },
    .lock = SPRY_LOCK_INIT,
};
__thread spry_heap_t *spry_tls_heap __attribute__((tls_model("initial-exec"))) = &spry_empty_heap;

static spry_lock_t heaps_lock = SPRY_LOCK_INIT;
static spry_heap_t *heaps_all;       /* every heap ever made (never freed) */
static spry_heap_t *heaps_dormant;   /* heaps of exited threads            */
static pthread_key_t heap_key;

/* ---- queues ------------------------------------------------------------ */

static void direct_update(spry_heap_t *heap, unsigned c) {
    size_t size = spry_class_size(c);
    if (size > SPRY_SMALL_MAX) return;
    spry_page_t *page = heap->queues[c].first ? heap->queues[c].first : &spry_empty_page;
    size_t lo = c == 0 ? 0 : spry_class_size(c - 1) / 8 + 1;
    for (size_t w = lo; w <= size / 8; w++) heap->direct[w] = page;
}

/* The head of a page queue is pinned (every class page: up to 128 KiB blocks
 * in pages of at most 16 slices): its used count holds one phantom block, so
 * frees never see
 * it reach 0 and a thread that mallocs and frees a few blocks of a class in a
 * loop neither returns nor re-takes the span, at no cost to the free fast
 * path. Unpinned when it stops heading the queue. What this keeps from the
 * kernel is at most one page per class and heap, given back when the thread
 * exits or calls spry_trim / malloc_trim. */
#define PIN_MAX_SLICES 16

static void page_pin(spry_page_t *page) {
    if (page->slice_count <= PIN_MAX_SLICES && !page->pinned) { page->pinned = 1; page->used++; }
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
    if (was_first) {
        page_unpin(page);
        if (q->first) page_pin(q->first);
        direct_update(heap, page->class_idx);
    }
}

static void page_release(spry_heap_t *heap, spry_page_t *page);

static void queue_push_front(spry_heap_t *heap, spry_page_t *page) {
    spry_page_queue_t *q = &heap->queues[page->class_idx];
    spry_page_t *old = q->first;
    page->prev = NULL;
    page->next = old;
    if (old) old->prev = page; else q->last = page;
    q->first = page;
    page_pin(page);
    direct_update(heap, page->class_idx);
    if (old && old->pinned) {
        page_unpin(old);
        if (old->used == 0) page_release(heap, old);
    }
}

/* ---- pages becoming empty or full -------------------------------------- */

/* ---- hot large blocks ----------------------------------------------------
 * A large block the owner frees is kept whole, as a span of its size, for the
 * owner's next malloc of that span size: no lock, no search, and the memory
 * is the same, so nothing new is touched. The purge thread cannot reach
 * these, so their bound is what an idle thread may keep (4 MiB, shared among
 * heaps beyond one per CPU); thread exit, spry_trim and malloc_trim give them
 * back to the segments. */
#define HOT_BYTES    ((size_t)4 << 20)
#define HOT_PER_SLOT 16

static bool hot_push(spry_heap_t *heap, spry_page_t *page) {
    unsigned s = page->slice_count;
    size_t bytes = (size_t)s * SPRY_SLICE_SIZE;
    if (heap->hot_count[s] >= HOT_PER_SLOT || heap->hot_bytes + bytes > heap->hot_limit)
        return false;
    page->kind = SPRY_PAGE_FREE;           /* a double free is reported */
    spry_key_set(page, 0);
    page->next = heap->hot[s];
    heap->hot[s] = page;
    heap->hot_count[s]++;
    heap->hot_bytes += bytes;
    return true;
}

static spry_page_t *hot_pop(spry_heap_t *heap, unsigned s) {
    spry_page_t *page = heap->hot[s];
    if (page) {
        heap->hot[s] = page->next;
        heap->hot_count[s]--;
        heap->hot_bytes -= (size_t)s * SPRY_SLICE_SIZE;
        page->next = NULL;
        page->is_zero = 0;
    }
    return page;
}

static void hot_flush(spry_heap_t *heap) {
    for (unsigned s = 1; s < SPRY_SPAN_CACHE_SLOTS; s++) {
        spry_page_t *page;
        while ((page = hot_pop(heap, s)) != NULL) spry_span_free(heap, page);
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
 * delay). A page still queued in the inbox waits for the drain, which will
 * see it empty. */
static void page_release(spry_heap_t *heap, spry_page_t *page) {
    if (page->kind == SPRY_PAGE_FREE) return;     /* already given back */
    if (atomic_load_explicit(&page->xfree, memory_order_acquire) & SPRY_XFREE_QUEUED) return;
    if (page->kind == SPRY_PAGE_LARGE && hot_push(heap, page)) return;
    if (page->kind == SPRY_PAGE_CLASS) {
        if (spry_key_get(page) & SPRY_KEY_FULL) spry_key_set(page, heap->tid);
        else queue_remove(heap, page);
    }
    spry_span_free(heap, page);
    spry_purge_notify();
}

void spry_page_empty(spry_page_t *page) {
    page_release(page->heap, page);
    spry_purge_start_point();
}

void spry_heap_free_full(spry_heap_t *heap, spry_page_t *page, spry_block_t *b) {
    b->next = page->free;
    page->free = b;
    if (page->kind == SPRY_PAGE_CLASS && (spry_key_get(page) & SPRY_KEY_FULL)) {
        spry_key_set(page, heap->tid);
        xfree_set_notify(page, false);
        queue_push_front(heap, page);
    }
    if (--page->used == 0) page_release(heap, page);
}

/* Pages that asked to be told (full class pages, large blocks) and got
 * remote frees since the last drain. */
static void heap_drain_inbox(spry_heap_t *heap) {
    spry_page_t *page = atomic_exchange_explicit(&heap->inbox, NULL, memory_order_acquire);
    while (page) {
        spry_page_t *next = atomic_load_explicit(&page->inbox_next, memory_order_relaxed);
        /* Take the list and clear QUEUED, so the next remote free can queue
         * the page again; NOTIFY stays only if the page stays full. */
        bool full = page->kind == SPRY_PAGE_LARGE ||
                    (page->kind == SPRY_PAGE_CLASS && (spry_key_get(page) & SPRY_KEY_FULL));
        uintptr_t head = atomic_load_explicit(&page->xfree, memory_order_relaxed), nw;
        do {
            nw = (full && !(head & ~SPRY_XFREE_FLAGS)) ? SPRY_XFREE_NOTIFY : 0;
        } while (!atomic_compare_exchange_weak_explicit(&page->xfree, &head, nw,
                                                        memory_order_acquire, memory_order_relaxed));
        spry_block_t *list = (spry_block_t *)(head & ~SPRY_XFREE_FLAGS);
        if (list) {
            uint32_t n = 1;
            spry_block_t *t = list;
            while (t->next) { t = t->next; n++; }
            t->next = page->local_free;
            page->local_free = list;
            page->used -= n;
            if (page->kind == SPRY_PAGE_CLASS && (spry_key_get(page) & SPRY_KEY_FULL) && page->used > 0) {
                spry_key_set(page, heap->tid);
                queue_push_front(heap, page);
            }
        }
        if (page->used == 0) page_release(heap, page);
        page = next;
    }
}

/* ---- allocation --------------------------------------------------------- */

static inline void *page_pop(spry_page_t *page) {
    spry_block_t *b = page->free;
    page->free = b->next;
    page->used++;
    return b;
}


static void *class_alloc(spry_heap_t *heap, unsigned c) {
    spry_page_queue_t *q = &heap->queues[c];
    spry_page_t *page = q->first;
    while (page) {
        if (!page->free) spry_page_refill(page);
        if (page->free) {
            if (page != q->first) { queue_remove(heap, page); queue_push_front(heap, page); }
            return page_pop(page);
        }
        /* Full: out of the queue, and remote frees must now tell us. If
         * some arrived meanwhile, the page is not full: take them. */
        if (!xfree_set_notify(page, true)) continue;
        spry_page_t *next = page->next;
        queue_remove(heap, page);
        spry_key_set(page, heap->tid | SPRY_KEY_FULL);
        page = next;
    }
    page = spry_span_alloc(heap, spry_class_slices(c));
    if (!page) return NULL;
    spry_page_init_class(heap, page, c);
    spry_page_refill(page);
    queue_push_front(heap, page);
    return page_pop(page);
}

/* Blocks above 128 KiB: a span each, usable size rounded to the size class
 * (the span's tail beyond it is never touched, so never resident). Spans are
 * taken hot-first (spry_span_alloc), so a churn of such blocks keeps reusing
 * the same resident memory. */
/* The block of a large page taken from the hot cache: the page was a large
 * page before, so only what differs is set. */
static inline void *large_reuse(spry_heap_t *heap, spry_page_t *page, size_t usable) {
    page->kind = SPRY_PAGE_LARGE;
    page->block_size = usable;
    page->used = 1;
    atomic_store_explicit(&page->xfree, SPRY_XFREE_NOTIFY, memory_order_relaxed);
    spry_key_set(page, heap->tid);
    return page->start;
}

static void *large_alloc(spry_heap_t *heap, size_t n) {
    size_t usable = spry_good_size_of(n);
    unsigned slices = (unsigned)((usable + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT);
    /* a hot span one slice longer does too: its tail stays untouched */
    spry_page_t *page = hot_pop(heap, slices);
    if (!page && slices + 1 < SPRY_SPAN_CACHE_SLOTS) page = hot_pop(heap, slices + 1);
    if (page) return large_reuse(heap, page, usable);
    page = spry_span_alloc(heap, slices);
    if (!page) return NULL;
    page->kind = SPRY_PAGE_LARGE;
    page->class_idx = 0;
    page->block_size = usable;
    page->pinned = 0;
    page->reserved = page->capacity = page->used = 1;
    page->free = page->local_free = NULL;
    page->next = page->prev = NULL;
    /* a large block's remote free must reach the owner at once */
    atomic_store_explicit(&page->xfree, SPRY_XFREE_NOTIFY, memory_order_relaxed);
    spry_key_set(page, heap->tid);
    return page->start;
}

void *spry_heap_malloc(size_t n, spry_heap_t *heap) {
    /* Sizes above the direct table: the same pop, after a class lookup. (The
     * empty heap's queues are empty, so a new thread falls through.) */
    if (spry_likely(n <= SPRY_PAGED_MAX)) {
        spry_page_t *page = heap->queues[spry_class_of(n)].first;
        if (spry_likely(page && page->free)) return page_pop(page);
    } else if (n <= SPRY_LARGE_MAX) {
        /* the same span size freed last, from the hot cache (the empty
         * heap's is empty) */
        size_t usable = spry_good_size_of(n);
        spry_page_t *page = hot_pop(heap, (unsigned)((usable + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT));
        if (spry_likely(page != NULL)) return large_reuse(heap, page, usable);
    }
    if (spry_unlikely(heap == &spry_empty_heap)) {
        heap = spry_heap_acquire();
        if (!heap) { errno = ENOMEM; return NULL; }
    }
    spry_purge_start_point();
    if (spry_unlikely(n > SPRY_ALLOC_MAX)) { errno = ENOMEM; return NULL; }
    if (heap->outbox_pending) spry_outbox_flush(heap);
    heap->hot_limit = spry_heap_share(HOT_BYTES);
    if (atomic_load_explicit(&heap->inbox, memory_order_relaxed)) heap_drain_inbox(heap);
    if (spry_unlikely(atomic_load_explicit(&heap->trim_request, memory_order_relaxed)))
        spry_heap_collect(heap, true);
    spry_purge_poll();
    void *p;
    if (n <= SPRY_PAGED_MAX) p = class_alloc(heap, spry_class_of(n));
    else if (n <= SPRY_LARGE_MAX) p = large_alloc(heap, n);
    else p = spry_huge_alloc(n, 0, false);
    if (!p) errno = ENOMEM;
    return p;
}

/* Alignment by choice of size, never by offset inside a block, so that every
 * pointer spry returns is a block start (free needs no search):
 *  - a class page starts on a 64 KiB boundary and its blocks sit at multiples
 *    of the block size, so a class whose size is a multiple of `align` gives
 *    aligned blocks (power-of-two classes exist at every doubling);
 *  - large spans are 64 KiB aligned; huge blocks place themselves. */
void *spry_heap_malloc_aligned(spry_heap_t *heap, size_t n, size_t align) {
    if (n > SPRY_ALLOC_MAX) { errno = ENOMEM; return NULL; }
    if (align <= SPRY_SLICE_SIZE) {
        size_t want = n < align ? align : n;
        if (want <= SPRY_PAGED_MAX) {
            unsigned c = spry_class_of(want);
            while (spry_class_size(c) % align) c++;
            return spry_heap_malloc(spry_class_size(c), heap);
        }
        if (want <= SPRY_LARGE_MAX) return spry_heap_malloc(want, heap);
    }
    if (heap == &spry_empty_heap && !spry_heap_acquire()) { errno = ENOMEM; return NULL; }
    void *p = spry_huge_alloc(n, align, false);
    if (!p) errno = ENOMEM;
    return p;
}

/* ---- heap life ---------------------------------------------------------- */

/* Rewrites the keys of every page the heap owns (see types.h). Under the
 * heap lock so that the span layout holds still; remote threads may read a
 * key meanwhile and see either value, both of which send them remote. */
static void heap_rekey(spry_heap_t *heap, uintptr_t tid) {
    spry_lock(&heap->lock);
    heap->tid = tid;
    for (spry_segment_t *seg = heap->segments; seg; seg = seg->next) {
        for (unsigned i = 1; i < SPRY_SLICES; i++) {
            spry_page_t *page = &seg->pages[i];
            if (page->kind == SPRY_PAGE_CLASS || page->kind == SPRY_PAGE_LARGE)
                spry_key_set(page, tid | (spry_key_get(page) & SPRY_KEY_FULL));
        }
    }
    spry_unlock(&heap->lock);
}

static void heap_thread_exit(void *arg) {
    spry_heap_t *heap = arg;
    /* Frees made after this point (later destructors) go the remote way. */
    spry_tls_heap = &spry_empty_heap;
    heap_rekey(heap, 0);
    spry_heap_collect(heap, true);
    spry_lock(&heaps_lock);
    heap->is_dormant = 1;
    heap->dormant_next = heaps_dormant;
    heaps_dormant = heap;
    spry_stat_add(&spry_stat.heaps_abandoned, 1);
    spry_unlock(&heaps_lock);
    spry_purge_notify();
    spry_purge_start_point();
}

void spry_heaps_init(void) {
    pthread_key_create(&heap_key, heap_thread_exit);
}

spry_heap_t *spry_heap_acquire(void) {
    spry_init();
    spry_heap_t *heap;
    spry_lock(&heaps_lock);
    heap = heaps_dormant;
    if (heap) {
        heaps_dormant = heap->dormant_next;
        heap->dormant_next = NULL;
        heap->is_dormant = 0;
        spry_stat_sub(&spry_stat.heaps_abandoned, 1);
    }
    spry_unlock(&heaps_lock);
    if (!heap) {
        heap = spry_meta_alloc(sizeof *heap);
        if (!heap) return NULL;
        for (size_t w = 0; w < SPRY_DIRECT_SLOTS; w++) heap->direct[w] = &spry_empty_page;
        spry_lock_init(&heap->lock);
        spry_lock(&heaps_lock);
        heap->all_next = heaps_all;
        heaps_all = heap;
        spry_unlock(&heaps_lock);
        spry_stat_add(&spry_stat.heaps, 1);
    }
    heap_rekey(heap, spry_thread_key());
    spry_tls_heap = heap;
    pthread_setspecific(heap_key, heap);
    return heap;
}

void spry_heap_collect(spry_heap_t *heap, bool release_retained) {
    atomic_store_explicit(&heap->trim_request, 0, memory_order_relaxed);
    spry_outbox_flush(heap);
    heap_drain_inbox(heap);
    if (!release_retained) return;
    for (unsigned c = 0; c < SPRY_CLASS_COUNT; c++) {
        spry_page_t *page = heap->queues[c].first;
        while (page) {
            spry_page_t *next = page->next;
            spry_page_collect_remote(page);
            page_unpin(page);
            if (page->used == 0) page_release(heap, page);
            page = next;
        }
    }
    if (heap->hot_bytes) {
        hot_flush(heap);
        spry_purge_notify();
    }
}

bool spry_heaps_purge(bool force) {
    bool waiting = false;
    /* Dormant heaps have no owner: claim them all, collect what other threads
     * freed into them, and put them back. */
    spry_lock(&heaps_lock);
    spry_heap_t *dormant = heaps_dormant;
    heaps_dormant = NULL;
    spry_unlock(&heaps_lock);
    spry_heap_t *last = NULL;
    for (spry_heap_t *h = dormant; h; h = h->dormant_next) {
        spry_heap_collect(h, true);
        last = h;
    }
    if (last) {
        spry_lock(&heaps_lock);
        last->dormant_next = heaps_dormant;
        heaps_dormant = dormant;
        spry_unlock(&heaps_lock);
    }
    spry_lock(&heaps_lock);
    spry_heap_t *all = heaps_all;
    spry_unlock(&heaps_lock);
    /* heaps_all only grows at its head, so this walk is safe unlocked. */
    for (spry_heap_t *h = all; h; h = h->all_next) {
        if (spry_heap_purge_spans(h, force)) waiting = true;
        /* A live owner lets its retained pages go at its next slow path. */
        if (force) atomic_store_explicit(&h->trim_request, 1, memory_order_relaxed);
    }
    return waiting;
}

void spry_heaps_trim_urgent(void) {
    spry_lock(&heaps_lock);
    spry_heap_t *all = heaps_all;
    spry_unlock(&heaps_lock);
    for (spry_heap_t *h = all; h; h = h->all_next)
        if (atomic_load_explicit(&h->purge_urgent, memory_order_relaxed)) spry_heap_trim_urgent(h);
}

/* ---- fork ---------------------------------------------------------------- */

void spry_heaps_fork_prepare(void) {
    spry_lock(&heaps_lock);
    for (spry_heap_t *h = heaps_all; h; h = h->all_next) spry_lock(&h->lock);
}

void spry_heaps_fork_parent(void) {
    for (spry_heap_t *h = heaps_all; h; h = h->all_next) spry_unlock(&h->lock);
    spry_unlock(&heaps_lock);
}

/* In the child only the forking thread lives on. The other live heaps may
 * have been in the middle of an owner-only operation (a queue half linked)
 * when fork came, so they are never adopted: they are orphaned, their keys
 * zeroed so that frees of their blocks take the remote path, and what they
 * hold stays with them (as mimalloc does). Dormant heaps were consistent and
 * remain reusable; no purge pass was running (fork_prepare waited). */
void spry_heaps_fork_child(void) {
    spry_lock_init(&heaps_lock);
    for (spry_heap_t *h = heaps_all; h; h = h->all_next) {
        spry_lock_init(&h->lock);
        if (h != spry_tls_heap && !h->is_dormant) heap_rekey(h, 0);
    }
}

/* ---- heap walk (statistics, debugging) ---------------------------------- */

void spry_heaps_span_totals(size_t *in_use, size_t *dirty) {
    spry_lock(&heaps_lock);
    spry_heap_t *all = heaps_all;
    spry_unlock(&heaps_lock);
    for (spry_heap_t *h = all; h; h = h->all_next) {
        *in_use += atomic_load_explicit(&h->span_in_use, memory_order_relaxed);
        *dirty += atomic_load_explicit(&h->span_dirty, memory_order_relaxed);
    }
}

void spry_heaps_walk(spry_heap_walk_t *w) {
    spry_lock(&heaps_lock);
    spry_heap_t *all = heaps_all;
    spry_unlock(&heaps_lock);
    for (spry_heap_t *h = all; h; h = h->all_next) {
        spry_lock(&h->lock);
        for (spry_segment_t *seg = h->segments; seg; seg = seg->next) {
            w->segments++;
            w->free_slices += (size_t)__builtin_popcountll(seg->free_mask);
            for (unsigned i = 1; i < SPRY_SLICES; i++) {
                spry_page_t *p = &seg->pages[i];
                if (seg->slice_page[i] != p || (seg->free_mask >> i) & 1) continue;
                if (p->kind == SPRY_PAGE_CLASS) {
                    w->class_pages++;
                    if (spry_key_get(p) & SPRY_KEY_FULL) w->full_pages++;
                    w->class_bytes += (size_t)p->slice_count * SPRY_SLICE_SIZE;
                    w->used_bytes += (size_t)(p->used - p->pinned) * p->block_size;
                } else if (p->kind == SPRY_PAGE_LARGE) {
                    w->large_pages++;
                    w->used_bytes += p->used ? p->block_size : 0;
                }
            }
        }
        spry_unlock(&h->lock);
    }
}
