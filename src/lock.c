/* The contended side of spry_lock; see lock.h. */
#include "lock.h"

_Atomic(uintptr_t) spry_fork_owner;

void spry_lock_slow(spry_lock_t *l) {
    if (spry_in_fork_window()) return;      /* held by this thread's fork */
    for (int spin = 0; spin < 64; spin++) {
        __builtin_ia32_pause();
        int e = 0;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->state, &e, 1, memory_order_acquire,
                                                  memory_order_relaxed)) return;
    }
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
        spry_os_wait(&l->state, 2, -1);
}

