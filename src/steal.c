/* Collecting an idle heap's caches from a purge pass, or a blocked owner's
 * from a hurried look; see guard.h. */
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
    for (spry_heap_t *h = all; h; h = h->all_next)
        if (steal_collect(h, fenced, false)) spry_stat_add(&spry_stat.idle_collections, 1);
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

static void hurry_came_back(spry_heap_t *heap, uint64_t now);

/* A look at the owner's guard: true when it was in a guarded path since the
 * last look (or is in one now); an owner outside is marked seen, its idle
 * time counted from now. */
static bool owner_was_in(spry_heap_t *heap, uint64_t now) {
    uint8_t seen = atomic_load_explicit(&heap->busy, memory_order_acquire);
    if (seen == 0) return false;
    if (heap->hurried_at_us) hurry_came_back(heap, now);
    if (heap->hurry_recheck_us) heap->hurry_recheck_us = 0;
    /* OUT: active since the last look; mark it seen. IN: inside now. */
    if (seen == SPRY_GUARD_OUT &&
        atomic_compare_exchange_strong_explicit(&heap->busy, &seen, 0, memory_order_acq_rel,
                                                memory_order_relaxed))
        heap->idle_since_us = now;
    /* written only when set: looks come every 250 us while a heap grows */
    if (heap->idle_collected) heap->idle_collected = 0;
    if (heap->idle_passes) heap->idle_passes = 0;
    return true;
}

bool spry_heap_collect_idle(spry_heap_t *heap, uint64_t now) {
    if (owner_was_in(heap, now)) return true;
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
    if (took) spry_stat_add(&spry_stat.idle_collections, 1);
    bool done = took || !fenced;                /* else it came back meanwhile */
    heap->idle_collected = done;
    return !done;
}

/* Hurried looks. Threads that take turns with a working set each (a
 * pipeline's stages, a pool whose requests land on another worker each
 * time: bench turns) kept each their last set: the block cache (up to 16
 * MiB a heap) and the pages its blocks pin stay with a thread that waits,
 * its free spans do not exceed what its pages span, so it lends nothing,
 * and the purge passes collect it only after four purge delays (1 s),
 * where a turn takes milliseconds. 4 threads of 32 MiB turns of 1-4 KiB
 * blocks peaked at 140 MB, 16 threads at 552 MB (tcmalloc 56 and 97). A
 * heap that grows now has a look made (every MiB of fresh memory, at most
 * one every 250 us: by itself, or by the purge thread; purge.c), which
 * collects the heaps whose owners are blocked in the kernel and have made
 * no guarded call since a look 250 us or more before; their pages empty
 * and are lent at the growing heap's next span (spry_spans_offered). 4
 * threads: 44 MB, 16: 61 MB; with 32-256 KiB blocks 88 and 156 MB (155
 * and 620 before; pages of 1-2 MiB for those classes span 46 MiB for a
 * set of 32). An owner found
 * waiting for a CPU is left alone (below), and so is the heap whose growth
 * asked for the look: collecting it lends nothing, and a thread that grew,
 * then freed a block a millisecond, sleeping between, lost its cache at
 * each free (test block_cache).
 *
 * What a hurried look takes from a heap: the blocks cached above 1 KiB and
 * the hot large spans, read without the guard (a stale count only moves
 * the heap to the next look). Less is not worth holding its owner off. */
#define HURRY_MIN_BYTES ((size_t)256 << 10)
/* Out of its guarded paths at least this long, at two looks. An owner that
 * came back within HURRY_SOON_US of the look that took its caches waits
 * twice as long before the next (up to HURRY_IDLE_MAX_US); one that stayed
 * away longer, the least again; and each purge pass halves what it waits,
 * so that a phase of short waits does not keep it from looks for good. A
 * pool's 4 workers, waiting about 1 ms for each task beside a thread that
 * grew, had theirs taken at every wait (a review: 2,983 collections in 2
 * s, 5x the page faults, 1.25x the CPU time); now 44-48, 1.12x the faults,
 * the CPU time level. The wait is the owner's: a heap's next owner
 * (adoption, or a thread id reused) starts at the least (a review: a
 * pool's heaps, adopted by threads taking turns, kept theirs and were not
 * collected). */
#define HURRY_IDLE_US 250
#define HURRY_IDLE_MAX_US (16 * 1000)
#define HURRY_SOON_US 5000

static uint64_t hurry_idle(const spry_heap_t *heap) {
    bool own = heap->hurry_tid == atomic_load_explicit(&heap->os_tid, memory_order_relaxed);
    return own && heap->hurry_idle_us > HURRY_IDLE_US ? heap->hurry_idle_us : HURRY_IDLE_US;
}

static void hurry_came_back(spry_heap_t *heap, uint64_t now) {
    uint64_t idle = hurry_idle(heap);
    /* back within HURRY_SOON_US of the look, as a look saw it (every 250
     * us or more while a heap grows; the return has no time of its own): a
     * pool's 0.4-1 ms waits, not turns of others that take 10 ms */
    bool soon = now - heap->hurried_at_us < HURRY_SOON_US;
    heap->hurry_idle_us = soon ? (uint32_t)(2 * idle < HURRY_IDLE_MAX_US ? 2 * idle : HURRY_IDLE_MAX_US) : 0;
    heap->hurry_tid = atomic_load_explicit(&heap->os_tid, memory_order_relaxed);
    heap->hurried_at_us = 0;
}

void spry_heap_hurry_decay(spry_heap_t *heap) {
    if (heap->hurry_idle_us) heap->hurry_idle_us /= 2;
}

__attribute__((no_sanitize("thread")))
static size_t heap_cached(spry_heap_t *heap) {
    return spry_bcache_bytes_seen(heap) + *(volatile size_t *)&heap->hot_bytes;
}

/* An owner found runnable is asked again this much later (and its idle
 * time after that), twice as late each time it is found so, up to
 * HURRY_RECHECK_MAX_US, the least again once it has come back to its
 * paths: oversubscribed, dozens of threads wait for a CPU at once, each
 * read of /proc costs 7 us here, and looks come every 250 us while a heap
 * grows. The least is short: on 2 CPUs a thread that has just ended its
 * turn waits for a CPU to go to sleep, one CPU running the next turn and
 * the other the look; asked again 4 ms later, the next turn had taken
 * 8-20 MiB fresh by then (bench turns, 32-256 KiB blocks), and the
 * follow-ups (purge.c) now come for it. Asked again every 0.5 ms, 16-256
 * threads that yield or spin outside spry with caches made 2-10x the
 * reads, and a thread growing beside them ran up to 1.2x slower (a
 * review). */
#define HURRY_RECHECK_US 250
#define HURRY_RECHECK_MAX_US 4000
/* A look asks about this many owners at most, from where the last one
 * stopped: from the list's head each time, owners found runnable near it
 * took every place, and a blocked owner further down was never asked
 * (a review: 20-32 spinning threads before it, no collection). */
#define HURRY_ASK_MAX 8
static spry_heap_t *hurry_cursor;          /* pass_lock */

bool spry_heaps_collect_hurried(spry_heap_t *all, const spry_heap_t *asker, uint64_t now, uint64_t *due) {
    bool any = false;
    unsigned asked = 0;
    *due = 0;
    spry_heap_t *start = hurry_cursor ? hurry_cursor : all, *h = start;
    bool stopped = false;
    for (bool first = true; first || h != start; first = false, h = h->all_next ? h->all_next : all) {
        bool was_in = owner_was_in(h, now);
        if ((was_in && h->idle_since_us != now) || h->idle_collected || h == asker) continue;
        if (heap_cached(h) < HURRY_MIN_BYTES) continue;
        uint64_t at = h->idle_since_us + hurry_idle(h);
        if (now < at) {
            /* not yet idle long enough, or found runnable: a look then may
             * take it */
            if (*due == 0 || at < *due) *due = at;
            continue;
        }
        if (asked == HURRY_ASK_MAX) {
            if (!stopped) hurry_cursor = h;
            stopped = true;
            continue;
        }
        asked++;
        /* An owner that waits for a CPU comes back to its caches: 8
         * threads on 2 CPUs churning 64-512 KiB blocks had theirs taken
         * 38 times in 0.4 s, faulted in what they lent meanwhile, and
         * peaked at 1.3x the RSS. */
        if (!spry_os_thread_blocked(atomic_load_explicit(&h->os_tid, memory_order_relaxed))) {
            uint32_t wait = h->hurry_recheck_us ? h->hurry_recheck_us : HURRY_RECHECK_US;
            h->hurry_recheck_us = wait < HURRY_RECHECK_MAX_US ? 2 * wait : wait;
            h->idle_since_us = now + wait;
            at = h->idle_since_us + hurry_idle(h);
            if (*due == 0 || at < *due) *due = at;
            continue;
        }
        atomic_store_explicit(&h->steal, 1, memory_order_relaxed);
        any = true;
    }
    if (!any) return false;
    bool fenced = spry_os_fence_all(), took = false;
    /* `steal` marks the heaps picked: only collections set it, each under
     * the pass lock, and steal_collect clears it */
    for (spry_heap_t *h = all; h; h = h->all_next) {
        if (!atomic_load_explicit(&h->steal, memory_order_relaxed)) continue;
        if (steal_collect(h, fenced, true)) {
            spry_stat_add(&spry_stat.hurried_collections, 1);
            h->idle_collected = 1;
            h->hurried_at_us = now;
            took = true;
        }
    }
    return took;
}
