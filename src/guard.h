/* The owner's guard around the parts of its heap that a purge pass may
 * collect while the owner sleeps (steal.c): the block cache, the hot large
 * spans, and the class pages above 1 KiB with their queues.
 *
 * Why: a thread that used blocks of a few KiB to 2 MiB and then waits (a
 * pool worker between bursts) made no more calls, so nothing it cached ever
 * went back: 8 such threads after a 64-128 KiB churn kept 113 MB two
 * seconds after freeing everything (tcmalloc 95, mimalloc 97, glibc 2).
 *
 * How: an asymmetric Dekker handshake. The owner sets `busy`, then reads
 * `steal`; the collector sets `steal`, runs a process-wide memory barrier
 * (membarrier: every running thread of the process executes a full fence),
 * then reads `busy`. So the owner needs no fence of its own (three plain
 * instructions and a store to leave): either the collector sees it busy and
 * gives up, or the owner sees `steal` and waits until the collection is
 * done. The fast paths of blocks of 1 KiB or less touch none of it and are
 * not guarded. Guarded regions do not nest, but for one case: the purge
 * thread's start (pthread_create, which allocates) at the very end of a
 * region leaves it OUT early, with nothing left to do in it. */
#ifndef SPRY_GUARD_H
#define SPRY_GUARD_H

#include "types.h"

/* Waits out a collection, then enters. */
void spry_heap_enter_wait(spry_heap_t *heap);

/* `busy`: SPRY_GUARD_IN inside; SPRY_GUARD_OUT outside, having been in
 * since a purge pass last looked; 0 when that pass set it back from OUT. */
enum { SPRY_GUARD_IN = 1, SPRY_GUARD_OUT = 2 };

static inline void spry_heap_enter(spry_heap_t *heap) {
    atomic_store_explicit(&heap->busy, SPRY_GUARD_IN, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (spry_unlikely(atomic_load_explicit(&heap->steal, memory_order_acquire)))
        spry_heap_enter_wait(heap);
}

/* ThreadSanitizer builds: gcc says so with __SANITIZE_THREAD__, clang only
 * through __has_feature (without this its builds took the asm path and
 * reported the guarded accesses as races). */
#if defined(__SANITIZE_THREAD__)
#define SPRY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPRY_TSAN 1
#endif
#endif

/* The same without waiting, for the paths kept frameless: false (and not
 * entered) while a collection runs; the caller then takes a slower path
 * that waits. */
static inline bool spry_heap_try_enter(spry_heap_t *heap) {
#if defined(__x86_64__) && !defined(SPRY_TSAN)
    /* The same three steps as below, as three instructions (the compiler
     * makes four of them: a load and a test for the compare). Plain moves
     * are what the relaxed store and the acquire load compile to on x86-64;
     * the clobber orders the caller's accesses after them. (ThreadSanitizer
     * builds take the C path, whose atomics it sees.) */
    __asm__ goto("movb %[in], %[busy]\n\t"
                 "cmpl $0, %[steal]\n\t"
                 "jne %l[stolen]"
                 : : [busy] "m"(heap->busy), [steal] "m"(heap->steal), [in] "i"(SPRY_GUARD_IN)
                 : "memory", "cc" : stolen);
    return true;
stolen:
#else
    atomic_store_explicit(&heap->busy, SPRY_GUARD_IN, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (spry_likely(!atomic_load_explicit(&heap->steal, memory_order_acquire))) return true;
#endif
    atomic_store_explicit(&heap->busy, SPRY_GUARD_OUT, memory_order_release);
    return false;
}

static inline void spry_heap_leave(spry_heap_t *heap) {
    atomic_store_explicit(&heap->busy, SPRY_GUARD_OUT, memory_order_release);
}

/* The purge thread's passes: collects what a heap caches once its owner has
 * not been in a guarded path for several passes in a row (steal.c). True
 * while a later pass should look at the heap again. */
bool spry_heap_collect_idle(spry_heap_t *heap, uint64_t now);
/* A hurried look (spry_purge_hurry: heap `asker` took fresh memory):
 * collects the other heaps whose owners are blocked in the kernel and have
 * been out of their guarded paths since a look at least 250 us ago (more
 * for owners that came back soon after a look took their caches), and
 * that cache enough to matter. True when it collected one; *due: when the
 * first heap that caches enough but was out for less, or whose owner was
 * found waiting for a CPU, may be taken (0: none). */
bool spry_heaps_collect_hurried(spry_heap_t *all, const spry_heap_t *asker, uint64_t now, uint64_t *due);
/* Each purge pass: halves how long the owner must stay out before a look
 * takes its heap (steal.c). */
void spry_heap_hurry_decay(spry_heap_t *heap);
/* A trim's collection of every heap of the list (from `all` on, through
 * all_next): the same, at once, but for a heap whose owner is inside a
 * guarded path right now. */
void spry_heaps_collect_now(spry_heap_t *all);
/* Each pass, before the idle collections: the block caches of the heaps not
 * collected give back what sat unused since the last pass (block_cache.h).
 * A look without the guard picks the heaps with such a class; only those
 * are held off (one process-wide barrier for them all): held off every
 * pass, 256 threads on 2 cores waited up to 17 ms at a time (a review). A
 * heap whose owner is inside a guarded path right now waits for the next
 * pass. Without it an active thread kept what it cached of a size it no
 * longer used until it idled or trimmed. */
void spry_heaps_scavenge(spry_heap_t *all);

#endif
