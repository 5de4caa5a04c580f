/* Thread heaps; see heap.h and the ownership rules in types.h: the slow
 * path of malloc, and a heap's life (created or reused at a thread's first
 * malloc, dormant at its exit, adopted after fork).
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
#include "remote.h"
#include "queue.h"
#include "large.h"
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

void *spry_heap_malloc(size_t n, spry_heap_t *heap) {
    /* Sizes above the direct table: the same pop, after a class lookup. (The
     * empty heap's queues are empty, so a new thread falls through.) */
    if (spry_likely(n <= SPRY_PAGED_MAX)) {
        spry_page_t *page = heap->queues[spry_class_of(n)].first;
        if (spry_likely(page && page->free)) return spry_page_pop(page);
    } else if (n <= SPRY_LARGE_MAX) {
        /* the same span size freed last, from the hot cache (the empty
         * heap's is empty) */
        void *p = spry_large_alloc_hot(heap, n);
        if (spry_likely(p != NULL)) return p;
    }
    if (spry_unlikely(heap == &spry_empty_heap)) {
        heap = spry_heap_acquire();
        if (!heap) { errno = ENOMEM; return NULL; }
    }
    if (spry_unlikely(n > SPRY_ALLOC_MAX)) { errno = ENOMEM; return NULL; }
    if (heap->outbox_pending) spry_outbox_flush(heap);
    spry_large_refresh_limit(heap);
    if (atomic_load_explicit(&heap->inbox, memory_order_relaxed)) spry_inbox_drain(heap);
    if (spry_unlikely(atomic_load_explicit(&heap->trim_request, memory_order_relaxed)))
        spry_heap_collect(heap, true);
    spry_purge_poll();
    void *p;
    if (n <= SPRY_PAGED_MAX) p = spry_class_alloc(heap, spry_class_of(n));
    else if (n <= SPRY_LARGE_MAX) p = spry_large_alloc(heap, n);
    else p = spry_huge_alloc(n, 0, false);
    if (!p) errno = ENOMEM;
    /* after the work: the drains and collects above may have freed pages */
    spry_purge_start_point();
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
    spry_inbox_drain(heap);
    if (!release_retained) return;
    spry_queues_release_empty(heap);
    if (heap->hot_bytes) {
        spry_large_hot_flush(heap);
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
 * remain reusable; no purge pass was running (fork_prepare waited).
 * A heap's request for an urgent trim is dropped: the purge thread and its
 * kick are gone, and a flag left set would make every later request look
 * answered (the next free over budget asks again). */
void spry_heaps_fork_child(void) {
    spry_lock_init(&heaps_lock);
    for (spry_heap_t *h = heaps_all; h; h = h->all_next) {
        spry_lock_init(&h->lock);
        atomic_store_explicit(&h->purge_urgent, 0, memory_order_relaxed);
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
