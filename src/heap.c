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
#include "huge.h"
#include "sizeclass.h"
#include "arena.h"
#include "purge.h"
#include "stats.h"
#include "init.h"
#include "remote.h"
#include "queue.h"
#include "large.h"
#include "block_cache.h"
#include "guard.h"
#include "../include/spry.h"
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
/* Heaps of exited threads, newest first. A purge pass holds them apart
 * for a moment (spry_heaps_purge); is_dormant says which. */
static struct { spry_heap_t *newest, *oldest; } dormant;
enum { DORMANT_NOT = 0, DORMANT_LISTED, DORMANT_HELD };
/* heap->leaving: its thread is in heap_thread_exit; a new thread waits */
enum { LEAVING = 1, LEAVING_WAITED };
/* 1 while a purge pass holds the dormant heaps detached (it collects what
 * other threads freed into them): a new thread waits for them rather than
 * make another heap (the fuzzer saw 41 heaps for 16 thread slots). */
static _Atomic(int) heaps_collecting;
static pthread_key_t heap_key;
/* Set when glibc ran this thread's heap destructor (heap_thread_exit):
 * a malloc after that, from a later destructor, must not leave a heap keyed
 * to a dying thread (see heap_malloc_late). */
static __thread int tls_exited __attribute__((tls_model("initial-exec")));

static void *heap_malloc_late(size_t n, size_t align);

/* The heap this thread freed into last while it had none of its own. */
static __thread spry_heap_t *tls_freed_into __attribute__((tls_model("initial-exec")));

void spry_heap_note_freed_into(spry_heap_t *heap) {
    tls_freed_into = heap;
}

/* A block of the heap's (n <= SPRY_LARGE_MAX, or a span asked for): a span
 * of its own when `align` asks for one (64 KiB and up: see
 * spry_heap_malloc_aligned and spry_heap_malloc_span), else what n calls
 * for. */
static void *heap_alloc_by_size(spry_heap_t *heap, size_t n, size_t align) {
    if (align >= SPRY_ALIGN_GROWABLE) return spry_large_alloc(heap, n, align);
    if (n <= SPRY_PAGED_MAX) return spry_class_alloc(heap, spry_class_of(n));
    return spry_large_alloc(heap, n, 1);
}

bool spry_heap_oom_trim(void) {
    if (spry_in_fork_window()) return false;
    spry_trim();
    return true;
}

/* The slow path proper: a heap for a new thread, the chores (remote frees
 * out and in, a trim the purge thread asked for, an inline purge), then a
 * block: the heap's (heap_alloc_by_size), or a huge one, which needs no
 * heap and is taken outside its guard (its retry trims, and the trim
 * collects this heap). */
static void *heap_malloc_slow(spry_heap_t *heap, size_t n, size_t align) {
    int errno_in = errno;
    if (spry_unlikely(heap == &spry_empty_heap)) {
        if (spry_unlikely(tls_exited)) return heap_malloc_late(n, align);
        heap = spry_heap_acquire();
        if (!heap) { errno = ENOMEM; return NULL; }
    }
    if (spry_unlikely(n > SPRY_ALLOC_MAX)) { errno = ENOMEM; return NULL; }
    spry_heap_enter(heap);
    if (heap->outbox_pending) spry_outbox_flush(heap);
    /* The caches' bounds follow the live heaps and the heap's size: a
     * division and four shared counters, so every 16th slow path (3% of the
     * instructions of a mixed-size test with a large live set). */
    if (heap->limits_in-- == 0) {
        heap->limits_in = 15;
        spry_large_refresh_limit(heap);
        spry_bcache_refresh_limit(heap);
        spry_heap_age_caches(heap);
        /* a purge pass collects the caches once the owner goes idle
         * (steal.c), and its ticks age the spares: the purge thread must
         * be there */
        if (spry_bcache_bytes(heap) || heap->hot_bytes || heap->spares) spry_purge_notify();
    }
    if (atomic_load_explicit(&heap->inbox, memory_order_relaxed)) spry_inbox_drain(heap);
    if (spry_unlikely(atomic_load_explicit(&heap->trim_request, memory_order_relaxed)))
        spry_heap_collect(heap);
    spry_purge_poll();
    bool huge = align < SPRY_ALIGN_GROWABLE && n > SPRY_LARGE_MAX;
    void *p = huge ? NULL : heap_alloc_by_size(heap, n, align);
    spry_heap_leave(heap);
    if (huge) {
        p = spry_huge_alloc(n, 0, false);
    } else if (spry_unlikely(!p) && spry_heap_oom_trim()) {
        spry_heap_enter(heap);
        p = heap_alloc_by_size(heap, n, align);
        spry_heap_leave(heap);
    }
    /* a success leaves errno as it was: a try on the way that failed (the
     * first one here, an arena's reservation halved under a limit) set
     * ENOMEM */
    errno = p ? errno_in : ENOMEM;
    /* after the work: the drains and collects above may have freed pages */
    spry_purge_start_point();
    return p;
}

void *spry_heap_malloc_span(spry_heap_t *heap, size_t n) {
    return heap_malloc_slow(heap, n, SPRY_ALIGN_GROWABLE);
}

void *spry_heap_malloc_tiny(spry_heap_t *heap) {
    spry_page_t *page = heap->queues[0].first;
    if (spry_likely(page && page->free)) {
        spry_block_t *b = spry_page_take(page);
        spry_page_live_set(page, b);
        return b;
    }
    return heap_malloc_slow(heap, 8, 1);
}

/* Another page already in the class's queue, without the slow path's
 * chores when none waits: with a large live set of small blocks most pages
 * hold one or two blocks freed into them while full, and the queue's head
 * changes every few mallocs (a mixed-size test at 200,000 live: 455 M ->
 * 422 M instructions in all). Remote frees out or in, or a trim another
 * thread asked for, send it the slow way, and so does a new page; the
 * inline purge (no purge thread) is polled here too. Skipping all of them
 * left a thread that switched pages of one class forever holding 64 MB
 * that another thread had freed into its inbox (a review; test
 * page_switch_chores). */
static __attribute__((noinline)) void *heap_malloc_queued(size_t n, spry_heap_t *heap, unsigned c) {
    void *p = NULL;
    if (spry_likely(!heap->outbox_pending && !atomic_load_explicit(&heap->inbox, memory_order_relaxed) &&
                    !atomic_load_explicit(&heap->trim_request, memory_order_relaxed)) &&
        spry_likely(spry_heap_try_enter(heap))) {
        spry_purge_poll();
        p = spry_class_alloc_queued(heap, c);
        spry_heap_leave(heap);
    }
    return p ? p : heap_malloc_slow(heap, n, 1);
}

/* After the fast path and the block cache found nothing: the same pop as
 * the fast path on the class's page, or for a large block the hot cache's
 * span of its size (freed last), else the slow path. (The empty heap's
 * queues and caches are empty: a new thread falls through.) */
__attribute__((noinline)) void *spry_heap_malloc_sized(size_t n, spry_heap_t *heap) {
    void *p = NULL;
    if (spry_likely(spry_heap_try_enter(heap))) {
        if (spry_likely(n <= SPRY_PAGED_MAX)) {
            unsigned c = n > SPRY_SMALL_MAX ? spry_bcache_class_mid(n) : spry_class_of(n);
            spry_page_t *page = heap->queues[c].first;
            if (spry_likely(page && page->free)) {
                p = spry_page_pop(page);
            } else if (page) {
                spry_heap_leave(heap);
                return heap_malloc_queued(n, heap, c);    /* a tail call: no frame here */
            }
        } else if (n <= SPRY_LARGE_MAX) {
            p = spry_large_alloc_hot(heap, n);
        }
        spry_heap_leave(heap);
        if (spry_likely(p != NULL)) return p;
    }
    return heap_malloc_slow(heap, n, 1);
}

/* The two common cases first, before the frame the others need is set
 * up: 8-byte blocks, and the block cache's top for sizes between the direct
 * table and the large blocks (above 1 KiB every block the owner frees goes
 * there, so its top is the block freed last, still in cache; about 20
 * instructions fewer a malloc). Smaller classes are never cached. malloc
 * pops the cache inline (alloc_fast.h) and comes here for the other
 * sizes; the cache's pop here is for the aligned requests, which come
 * with sizes of the classes (spry_heap_malloc_aligned). */
void *spry_heap_malloc(size_t n, spry_heap_t *heap) {
    if (n <= 8) return spry_heap_malloc_tiny(heap);
    if (spry_likely(n > SPRY_SMALL_MAX && n <= SPRY_PAGED_MAX)) {
        void *b = spry_bcache_take(heap, n);
        if (spry_likely(b != NULL)) return b;
    }
    return spry_heap_malloc_sized(n, heap);
}

/* Alignment by choice of size, never by offset inside a block, so that every
 * pointer spry returns is a block start (free needs no search):
 *  - a class page starts on a 64 KiB boundary and its blocks sit at multiples
 *    of the block size, so a class whose size is a multiple of `align` gives
 *    aligned blocks (power-of-two classes exist at every doubling); but the
 *    coloured classes start a few lines in (sizeclass.h), so above 64 bytes
 *    of alignment they are passed over: a request above 1 KiB then gets the
 *    next power of two (up to 2x its size, where 1.125x would do);
 *  - large spans start on 64 KiB slices of 4 MiB-aligned segments, so a
 *    span whose first slice index is a multiple of align / 64 KiB is
 *    aligned; up to 2 MiB of alignment and of size such a span always fits
 *    a segment (first slice at most 32, at most 32 slices long), under the
 *    heap's own lock, sharing segments with the thread's other blocks;
 *  - beyond, huge blocks place themselves. */
void *spry_heap_malloc_aligned(spry_heap_t *heap, size_t n, size_t align) {
    if (n > SPRY_ALLOC_MAX) { errno = ENOMEM; return NULL; }
    if (align <= SPRY_SLICE_SIZE) {
        size_t want = n < align ? align : n;
        if (want <= SPRY_PAGED_MAX) {
            unsigned c = spry_class_of(want);
            while (spry_class_size(c) % align || (align > SPRY_COLOUR_STEP && spry_class_coloured(c))) c++;
            return spry_heap_malloc(spry_class_size(c), heap);
        }
        if (want <= SPRY_LARGE_MAX) return spry_heap_malloc(want, heap);
    } else if (align <= SPRY_LARGE_MAX && n <= SPRY_LARGE_MAX) {
        return heap_malloc_slow(heap, n, align);
    }
    spry_init();                       /* huge blocks need no heap */
    return spry_huge_alloc(n, align, false);
}

/* ---- heap life ---------------------------------------------------------- */

static void rekey_page(spry_page_t *page, void *tid) {
    if (page->kind == SPRY_PAGE_CLASS || page->kind == SPRY_PAGE_LARGE)
        spry_key_set(page, *(uintptr_t *)tid | (spry_key_get(page) & SPRY_KEY_FLAGS));
}

/* Rewrites the keys of every page the heap owns (see types.h), the span
 * layout held still by the segments' locks; remote threads may read a key
 * meanwhile and see either value, both of which send them remote. */
static void heap_rekey(spry_heap_t *heap, uintptr_t tid) {
    __atomic_store_n(&heap->tid, tid, __ATOMIC_RELAXED);   /* heap_left_keyed reads it unlocked */
    spry_heap_spans(heap, true, rekey_page, &tid);
}

/* The dormant list (heaps_lock held). */
static void dormant_push(spry_heap_t *heap) {
    heap->dormant_prev = NULL;
    heap->dormant_next = dormant.newest;
    if (dormant.newest) dormant.newest->dormant_prev = heap; else dormant.oldest = heap;
    dormant.newest = heap;
    heap->is_dormant = DORMANT_LISTED;
}

static void dormant_unlink(spry_heap_t *heap) {
    if (heap->dormant_prev) heap->dormant_prev->dormant_next = heap->dormant_next;
    else dormant.newest = heap->dormant_next;
    if (heap->dormant_next) heap->dormant_next->dormant_prev = heap->dormant_prev;
    else dormant.oldest = heap->dormant_prev;
    heap->dormant_next = heap->dormant_prev = NULL;
}

/* A heap whose thread is gone goes dormant: keys zeroed (its blocks' frees
 * take the remote path), what it holds collected, then on the dormant list
 * for the next new thread; purge passes collect what is freed into it. */
static void heap_make_dormant(spry_heap_t *heap) {
    atomic_store_explicit(&heap->os_tid, 0, memory_order_relaxed);
    spry_heap_enter(heap);
    heap_rekey(heap, 0);
    spry_heap_collect(heap);
    spry_heap_leave(heap);
    spry_lock(&heaps_lock);
    dormant_push(heap);
    spry_stat_add(&spry_stat.heaps_abandoned, 1);
    spry_unlock(&heaps_lock);
    if (atomic_exchange_explicit(&heap->leaving, 0, memory_order_release) == LEAVING_WAITED)
        spry_os_wake_all(&heap->leaving);
    spry_purge_notify();
}

static void heap_thread_exit(void *arg) {
    spry_heap_t *heap = arg;
    atomic_store_explicit(&heap->leaving, LEAVING, memory_order_relaxed);
    /* Frees made after this point (later destructors) go the remote way. */
    spry_tls_heap = &spry_empty_heap;
    tls_exited = 1;
    heap_make_dormant(heap);
    spry_purge_start_point();
}

void spry_heaps_init(void) {
    pthread_key_create(&heap_key, heap_thread_exit);
}

/* Which dormant heap a new thread takes (heaps_lock held), if any:
 *  - the one it freed into before its first malloc: a thread that takes
 *    over the blocks of one that exited (a server's next worker, freeing
 *    its predecessor's blocks: bench relay, Larson's test) then frees them
 *    as their owner and reuses their memory at once. Taking the newest
 *    instead, at 8 such lanes on 2 cores, it got another lane's heap,
 *    whose blocks were still live: twice their memory a heap, its frees
 *    all remote;
 *  - if the heap it freed into was on its way to dormant (`left`: its
 *    thread was exiting, heap_wait_leaving) but another thread took it
 *    meanwhile, or the wait timed out, the oldest: the newest is most
 *    likely the one another such thread is about to take, which would then
 *    take another in turn (relay at 8 lanes: 0.8x the peak RSS at 1.1x the
 *    rate, at 32 lanes 0.55x at 1.05x, 7 rounds side by side);
 *  - else the newest, the warmest in cache. Not the oldest for a thread
 *    that freed a block of a thread that lives on (a server's acceptor
 *    allocates each request, a new thread frees it): each such thread went
 *    round every heap of an earlier burst, coldest first (a review: 27x
 *    the peak RSS at 0.63x the rate after a burst of 64), and so did
 *    threads started one at a time leaving a block or two (2x the time). */
static spry_heap_t *dormant_choose(bool left) {
    spry_heap_t *h = tls_freed_into;
    if (h && h->is_dormant == DORMANT_LISTED) return h;
    return left ? dormant.oldest : dormant.newest;
}

/* Before a new thread that freed into a heap still in use takes another:
 * that heap's thread may be on its way out, having just started this one
 * (which the kernel often runs first, on the creator's CPU). A yield lets
 * it go on; if it is then leaving (in heap_thread_exit), the new thread
 * waits until its heap is dormant, at most LEAVE_WAIT_MS (it may be
 * descheduled). Without them, at relay's 8 lanes on 2 cores 11% of the
 * new threads took another heap (2% with them; 32 lanes: 34% and 15%),
 * and peak RSS was 1.4x. Once per thread at most: a malloc of a thread
 * that freed another's block first. */
#define LEAVE_WAIT_MS 2
static bool heap_wait_leaving(spry_heap_t *heap) {
    if (!atomic_load_explicit(&heap->leaving, memory_order_acquire)) spry_os_yield();
    int v = LEAVING;
    if (!atomic_compare_exchange_strong_explicit(&heap->leaving, &v, LEAVING_WAITED,
                                                 memory_order_relaxed, memory_order_relaxed) &&
        v != LEAVING_WAITED)
        return false;
    spry_os_wait(&heap->leaving, LEAVING_WAITED, LEAVE_WAIT_MS);
    return true;
}

/* A dormant heap, or a new one, keyed to the calling thread. */
static spry_heap_t *heap_take(void) {
    spry_init();
    spry_heap_t *heap;
    bool left = false;
    spry_lock(&heaps_lock);
    if (tls_freed_into && tls_freed_into->is_dormant == DORMANT_NOT) {
        spry_unlock(&heaps_lock);
        left = heap_wait_leaving(tls_freed_into);
        spry_lock(&heaps_lock);
    }
    while (!dormant.newest && atomic_load_explicit(&heaps_collecting, memory_order_acquire)) {
        spry_unlock(&heaps_lock);
        spry_os_wait(&heaps_collecting, 1, 10);
        spry_lock(&heaps_lock);
    }
    heap = dormant_choose(left);
    if (heap) {
        dormant_unlink(heap);
        heap->is_dormant = DORMANT_NOT;
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
    /* guarded: a purge pass may be collecting this heap, dormant until now */
    spry_heap_enter(heap);
    heap_rekey(heap, spry_thread_key());
    spry_heap_leave(heap);
    return heap;
}

/* A heap still keyed to the calling thread's pointer, which a thread that
 * no longer lives left: one whose first malloc came in glibc's last round
 * of key destructors, too late for spry's own to run and make it dormant.
 * Its pages pass the free fast path's owner test for the thread glibc gave
 * the pointer to next (this one), so this thread takes it over: its frees
 * of the old blocks and its own allocations then work on one heap (they
 * mixed the two heaps' pages and counts, and the old heap stayed live for
 * good). Live threads' pointers are distinct, and a dormant heap's key is
 * 0, so a match is such a heap. Once per thread, over every heap made. */
static spry_heap_t *heap_left_keyed(uintptr_t tid) {
    for (spry_heap_t *h = spry_heaps_list(); h; h = h->all_next)
        if (__atomic_load_n(&h->tid, __ATOMIC_RELAXED) == tid) return h;
    return NULL;
}

spry_heap_t *spry_heap_acquire(void) {
    spry_init();
    spry_heap_t *heap = heap_left_keyed(spry_thread_key());
    if (!heap) heap = heap_take();
    if (!heap) return NULL;
    heap->limits_in = 0;                  /* bounds at the first slow path */
    atomic_store_explicit(&heap->os_tid, spry_os_thread_id(), memory_order_relaxed);
    spry_tls_heap = heap;
    pthread_setspecific(heap_key, heap);
    return heap;
}

/* malloc from a destructor that glibc runs after spry's own for this thread
 * (thread_local or pthread key destructors; glibc runs key destructors in at
 * most four rounds, so re-registering ours could miss the last one). Each
 * such call borrows a heap and makes it dormant again at once: no heap stays
 * keyed to a thread that is going away (its thread pointer will be reused),
 * and the live-heap count that budgets depend on stays right. Rare: a few
 * calls per exiting thread at most. */
static void *heap_malloc_late(size_t n, size_t align) {
    spry_heap_t *heap = heap_take();
    if (!heap) { errno = ENOMEM; return NULL; }
    spry_tls_heap = heap;
    void *p = heap_malloc_slow(heap, n, align);
    int saved = errno;
    spry_tls_heap = &spry_empty_heap;
    heap_make_dormant(heap);
    errno = saved;
    return p;
}

void spry_heap_drop_caches(spry_heap_t *heap, unsigned from, bool watch) {
    spry_bcache_flush(heap);
    spry_queues_release_empty(heap, from, watch);
    if (heap->hot_bytes) {
        spry_large_hot_flush(heap);
        spry_purge_notify();
    }
}

void spry_heap_collect(spry_heap_t *heap) {
    atomic_store_explicit(&heap->trim_request, 0, memory_order_relaxed);
    spry_outbox_flush(heap);
    spry_inbox_drain(heap);
    spry_heap_drop_caches(heap, 0, false);
    /* a trim or the thread's exit: the growing block's reused tail too */
    if (heap->small_tail) {
        spry_large_tail_purge(heap, heap->small_tail);
        heap->small_tail = NULL;
    }
}

bool spry_heaps_dormant_hold(void) {
    bool hold = false;
    spry_lock(&heaps_lock);
    for (spry_heap_t *h = dormant.newest; h && !hold; h = h->dormant_next)
        /* its pages: in its segments but those lent, and those borrowed
         * (a racy read of span_lent: a pass more or fewer) */
        hold = atomic_load_explicit(&h->span_in_use, memory_order_relaxed) !=
                   __atomic_load_n(&h->span_lent, __ATOMIC_RELAXED) ||
               atomic_load_explicit(&h->span_borrowed, memory_order_relaxed) != 0;
    spry_unlock(&heaps_lock);
    return hold;
}

/* heaps_all only grows at its head and heaps are never freed, so the list
 * from its head on can be walked without the lock. */
spry_heap_t *spry_heaps_list(void) {
    spry_lock(&heaps_lock);
    spry_heap_t *all = heaps_all;
    spry_unlock(&heaps_lock);
    return all;
}

void spry_heap_age_caches(spry_heap_t *heap) {
    uint32_t tick = __atomic_load_n(&heap->purge_tick, __ATOMIC_RELAXED);
    if (tick == heap->aged_tick) return;
    heap->aged_tick = tick;
    if (heap->spares) spry_queues_age_spares(heap, tick);
    if (heap->hot_bytes) spry_large_hot_age(heap, tick);
}

/* The owner's stores are plain: read as the scavenger reads the block
 * caches (block_cache.c, spry_bcache_untouched), and looked at again under
 * the guard. */
__attribute__((no_sanitize("thread")))
bool spry_heap_caches_due(spry_heap_t *heap) {
    uint32_t aged = *(volatile uint32_t *)&heap->aged_tick;
    uint32_t tick = __atomic_load_n(&heap->purge_tick, __ATOMIC_RELAXED);
    return (spry_queues_spares_held(heap) || *(volatile size_t *)&heap->hot_bytes != 0) && tick - aged >= 2;
}

bool spry_heaps_purge(bool force, bool collect) {
    bool waiting = false;
    /* Dormant heaps have no owner: claim them all, collect what other threads
     * freed into them, and put them back. */
    spry_lock(&heaps_lock);
    spry_heap_t *held = dormant.newest, *held_oldest = dormant.oldest;
    dormant.newest = dormant.oldest = NULL;
    for (spry_heap_t *h = held; h; h = h->dormant_next) h->is_dormant = DORMANT_HELD;
    if (held) atomic_store_explicit(&heaps_collecting, 1, memory_order_relaxed);
    spry_unlock(&heaps_lock);
    for (spry_heap_t *h = held; h; h = h->dormant_next) spry_heap_collect(h);
    if (held) {
        /* back behind those that went dormant meanwhile, which are newer */
        spry_lock(&heaps_lock);
        for (spry_heap_t *h = held; h; h = h->dormant_next) h->is_dormant = DORMANT_LISTED;
        held->dormant_prev = dormant.oldest;
        if (dormant.oldest) dormant.oldest->dormant_next = held; else dormant.newest = held;
        dormant.oldest = held_oldest;
        atomic_store_explicit(&heaps_collecting, 0, memory_order_release);
        spry_unlock(&heaps_lock);
        spry_os_wake_all(&heaps_collecting);
    }
    spry_heap_t *all = spry_heaps_list();
    /* a trim (force) takes what the guard covers from every heap at once,
     * before their spans are purged; a pass, from idle ones */
    if (collect && force) spry_heaps_collect_now(all);
    if (collect && !force) spry_heaps_scavenge(all);
    uint64_t now = spry_os_now_us();
    for (spry_heap_t *h = all; h; h = h->all_next) {
        if (collect && !force) {
            if (spry_heap_collect_idle(h, now)) waiting = true;
            spry_heap_hurry_decay(h);
        }
        if (spry_heap_purge_spans(h, force)) waiting = true;
        /* Spares age by the ticks of the passes (queue.c), at the owner's
         * slow path or in a pass that collects the idle owner. An idle
         * owner's, which no pass can collect (the membarrier call
         * refused), wait for the owner: counted here, they kept the purge
         * thread waking for good (test idle_threads_refused). */
        if (spry_queues_spares_held(h) && !(collect && h->idle_collected)) waiting = true;
        /* A live owner lets the rest (its smaller classes' empty pages, the
         * remote frees into them) go at its next slow path. */
        if (force) atomic_store_explicit(&h->trim_request, 1, memory_order_relaxed);
    }
    return waiting;
}

uint64_t spry_heaps_hurry(const spry_heap_t *asker, uint64_t now) {
    uint64_t due;
    if (spry_heaps_collect_hurried(spry_heaps_list(), asker, now, &due)) spry_spans_offered();
    return due;
}

void spry_heaps_trim_urgent(void) {
    spry_heap_t *all = spry_heaps_list();
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

/* In the child only the forking thread lives on. Every heap's inbox is
 * remade (a remote free cut in two may have marked a page QUEUED without
 * linking it). The heaps of the other live threads are adopted: their
 * batched remote frees are dropped (remote.c spry_outbox_drop: a batch cut
 * in two cannot be told from a whole one), their queues remade (their
 * owners may have been mid-operation; span-level state was consistent,
 * fork_prepare held their locks), and they go dormant, to be reused by the
 * child's next thread and purged like any other. Dormant heaps stay dormant; no purge pass was
 * running (fork_prepare waited for it). A heap's request for an urgent trim
 * is dropped: the purge thread and its kick are gone, and a flag left set
 * would make every later request look answered (the next free over budget
 * asks again). */
void spry_heaps_fork_child(void) {
    spry_lock_init(&heaps_lock);
    atomic_store_explicit(&heaps_collecting, 0, memory_order_relaxed);
    for (spry_heap_t *h = heaps_all; h; h = h->all_next) {
        spry_lock_init(&h->lock);
        atomic_store_explicit(&h->purge_urgent, 0, memory_order_relaxed);
        /* owners cut mid-call by fork left `busy` set (no pass ran) */
        atomic_store_explicit(&h->busy, 0, memory_order_relaxed);
        /* a thread on its way out in the parent is not in the child */
        atomic_store_explicit(&h->leaving, 0, memory_order_relaxed);
        atomic_store_explicit(&h->steal, 0, memory_order_relaxed);
        spry_inbox_rebuild(h);
    }
    /* The forking thread's own caches go back too: the child's purge thread
     * is gone, and a heap whose block cache classes start over tells it at
     * its next push over a bound (a fast path reaches no start point). */
    spry_heap_t *own = spry_tls_heap;
    if (own != &spry_empty_heap) {
        /* the thread has the child's id now */
        atomic_store_explicit(&own->os_tid, spry_os_thread_id(), memory_order_relaxed);
        spry_heap_drop_caches(own, spry_class_of(SPRY_SMALL_MAX + 1), false);
        spry_purge_notify();
    }
    for (spry_heap_t *h = heaps_all; h; h = h->all_next) {
        if (h == spry_tls_heap || h->is_dormant) continue;
        spry_outbox_drop(h);
        spry_queues_rebuild(h);
        spry_large_hot_flush(h);     /* the counts may be off by a cut push */
        for (unsigned s = 0; s < SPRY_SPAN_CACHE_SLOTS; s++) h->hot_count[s] = 0;
        h->hot_bytes = 0;
        heap_make_dormant(h);
    }
}

/* ---- statistics (the census of pages: census.c) ------------------------ */

void spry_heaps_span_totals(size_t *in_use, size_t *dirty) {
    spry_heap_t *all = spry_heaps_list();
    for (spry_heap_t *h = all; h; h = h->all_next) {
        *in_use += atomic_load_explicit(&h->span_in_use, memory_order_relaxed);
        *dirty += atomic_load_explicit(&h->span_dirty, memory_order_relaxed);
    }
}
