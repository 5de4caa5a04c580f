/* spry's lock: one word, one atomic on each side when uncontended, a futex
 * sleep when contended (no spinning without bound: 64 threads on 2 cores must
 * not burn the lock holder's time slice). States: 0 free, 1 held, 2 held with
 * possible sleepers. Used on slow paths only (spans, arenas, thread start). */
#ifndef SPRY_LOCK_H
#define SPRY_LOCK_H

#include "atomic.h"
#include "os.h"

typedef struct spry_lock { _Atomic(int) state; } spry_lock_t;
#define SPRY_LOCK_INIT { 0 }

/* The fork window. spry's pthread_atfork prepare handler takes every spry
 * lock and then names the forking thread here, until its parent or child
 * handler runs. Handlers registered before spry's run inside that window
 * (prepare handlers run in reverse order of registration, parent and child
 * handlers in order), and they may call malloc: for the forking thread every
 * spry lock is then a no-op, since it holds them all already and no other
 * thread can be inside. Other threads wait as usual. */
extern _Atomic(uintptr_t) spry_fork_owner;

static inline bool spry_in_fork_window(void) {
    return spry_unlikely(atomic_load_explicit(&spry_fork_owner, memory_order_relaxed) ==
                         (uintptr_t)__builtin_thread_pointer());
}

static inline void spry_lock_init(spry_lock_t *l) { atomic_store_explicit(&l->state, 0, memory_order_relaxed); }

/* Contended path (lock.c). */
void spry_lock_slow(spry_lock_t *l);

static inline void spry_lock(spry_lock_t *l) {
    int e = 0;
    if (spry_likely(atomic_compare_exchange_strong_explicit(&l->state, &e, 1, memory_order_acquire,
                                                            memory_order_relaxed))) return;
    spry_lock_slow(l);
}

/* Takes the lock only if it is free at once: for a lock whose holder the
 * caller need not wait for (another heap's, segment.c). False in the fork
 * window too, where every lock is held. */
static inline bool spry_trylock(spry_lock_t *l) {
    int e = 0;
    return atomic_compare_exchange_strong_explicit(&l->state, &e, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void spry_unlock(spry_lock_t *l) {
    if (spry_in_fork_window()) return;
    if (spry_unlikely(atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2))
        spry_os_wake(&l->state);
}

#endif
