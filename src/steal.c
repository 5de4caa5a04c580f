/* Collecting an idle heap's caches from a purge pass; see guard.h. */
#include "guard.h"
#include "heap.h"
#include "remote.h"
#include "queue.h"
#include "sizeclass.h"
#include "os.h"
#include "stats.h"
#include "block_cache.h"

void spry_heap_enter_wait(spry_heap_t *heap) {
    for (;;) {
        atomic_store_explicit(&heap->busy, SPRY_GUARD_OUT, memory_order_release);
        while (atomic_load_explicit(&heap->steal, memory_order_acquire))
            spry_os_wait(&heap->steal, 1, -1);
        atomic_store_explicit(&heap->busy, SPRY_GUARD_IN, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (!atomic_load_explicit(&heap->steal, memory_order_acquire)) return;
    }
}

/* A heap is collected when its owner has not been in a guarded path for
 * IDLE_PASSES passes in a row (a purge delay apart: 1 s by default): every
 * call above 1 KiB goes through one. With one pass, a churn of 64 threads
 * on 2 cores (4-64 KiB, 4,096 live) had 3-19 heaps collected during its
 * run, waiting for a CPU or at the benchmark's barrier, and refilled them;
 * with four, 1-2 (at its end). Once collected, a heap is left alone until its owner comes
 * back (one process-wide barrier per idle period). Pinned pages above 1 KiB
 * go with the caches; those of smaller classes stay (at most one 64 KiB
 * page a class). */
#define IDLE_PASSES 4

/* The collection proper, `steal` set and the barrier run: collects the
 * heap when its owner is outside its guarded paths (or, with `idle_only`,
 * has not been in one since the last pass), then hands it back. What the
 * guard covers goes: remote frees queued in the inbox for large blocks and
 * classes above 1 KiB (other threads' frees into an idle owner's pages
 * waited there for its next call: a review measured 400 MB kept), the
 * block cache, the hot spans, the empty pages above 1 KiB; the pages left
 * above 1 KiB then ask to be told of remote frees (queue.c). */
static bool steal_collect(spry_heap_t *heap, bool fenced, bool idle_only) {
    uint8_t busy = atomic_load_explicit(&heap->busy, memory_order_acquire);
    bool take = fenced && (idle_only ? busy == 0 : busy != SPRY_GUARD_IN);
    if (take) {
        unsigned above = spry_class_of(SPRY_SMALL_MAX + 1);
        /* what the drain leaves there is the owner's (pages of 1 KiB blocks
         * or less); a page queued from now on, during the rest of the
         * collection included, changes the inbox and is collected at the
         * next pass, which its free asked for */
        heap->idle_inbox = spry_inbox_drain_guarded(heap);
        spry_heap_drop_caches(heap, above, true);
        spry_stat_add(&spry_stat.idle_collections, 1);
    }
    atomic_store_explicit(&heap->steal, 0, memory_order_release);
    spry_os_wake_all(&heap->steal);
    return take;
}

void spry_heaps_collect_now(spry_heap_t *all) {
    /* every `steal` first, then one barrier for them all: an owner that
     * enters meanwhile waits until its own heap is done */
    for (spry_heap_t *h = all; h; h = h->all_next) atomic_store_explicit(&h->steal, 1, memory_order_relaxed);
    bool fenced = spry_os_fence_all();
    for (spry_heap_t *h = all; h; h = h->all_next) steal_collect(h, fenced, false);
}

void spry_heaps_scavenge(spry_heap_t *all) {
    bool any = false;
    for (spry_heap_t *h = all; h; h = h->all_next) {
        /* both looks every pass: the first keeps its record */
        h->scavenge = !h->idle_collected &&
                      (spry_bcache_untouched(h) | spry_heap_caches_due(h));
        if (!h->scavenge) continue;
        atomic_store_explicit(&h->steal, 1, memory_order_relaxed);
        any = true;
    }
    if (!any) return;
    bool fenced = spry_os_fence_all();
    for (spry_heap_t *h = all; h; h = h->all_next) {
        if (!h->scavenge) continue;
        if (fenced && atomic_load_explicit(&h->busy, memory_order_acquire) != SPRY_GUARD_IN) {
            spry_bcache_scavenge(h);
            spry_heap_age_caches(h);
        }
        atomic_store_explicit(&h->steal, 0, memory_order_release);
        spry_os_wake_all(&h->steal);
    }
}

bool spry_heap_collect_idle(spry_heap_t *heap) {
    uint8_t seen = atomic_load_explicit(&heap->busy, memory_order_acquire);
    if (seen != 0) {
        /* OUT: active since the last look; mark it seen. IN: inside now. */
        if (seen == SPRY_GUARD_OUT)
            atomic_compare_exchange_strong_explicit(&heap->busy, &seen, 0, memory_order_acq_rel,
                                                    memory_order_relaxed);
        heap->idle_collected = 0;
        heap->idle_passes = 0;
        return true;
    }
    if (heap->idle_collected) {
        /* Collected, the owner still away: again only when other threads
         * queued pages in its inbox since (every page left asks to be told,
         * and the free that queues one wakes this thread: remote.c).
         * Skipped until the owner came back, 800 MB they freed stayed
         * resident (a review). */
        if (atomic_load_explicit(&heap->inbox, memory_order_relaxed) == heap->idle_inbox) return false;
    } else if (++heap->idle_passes < IDLE_PASSES) {
        return true;
    }
    heap->idle_passes = 0;
    /* Refused (an old kernel, a sandbox): the heap counts as collected,
     * so that idle heaps do not keep the purge thread from leaving. */
    atomic_store_explicit(&heap->steal, 1, memory_order_relaxed);
    /* the owner's `busy` store is now visible, or its next read of `steal`
     * sees 1 */
    bool fenced = spry_os_fence_all();
    bool took = steal_collect(heap, fenced, true);
    bool done = took || !fenced;                /* else it came back meanwhile */
    heap->idle_collected = done;
    return !done;
}
