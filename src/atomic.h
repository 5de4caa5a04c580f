/* Atomics with their memory order spelled out (style rule 5). Every shared
 * field in spry is touched through one of these, so a reader sees at each use
 * which ordering the code relies on. */
#ifndef SPRY_ATOMIC_H
#define SPRY_ATOMIC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define spry_load_relaxed(p)      atomic_load_explicit((p), memory_order_relaxed)
#define spry_load_acquire(p)      atomic_load_explicit((p), memory_order_acquire)
#define spry_store_relaxed(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)
#define spry_store_release(p, v)  atomic_store_explicit((p), (v), memory_order_release)
#define spry_exchange_acq_rel(p, v) atomic_exchange_explicit((p), (v), memory_order_acq_rel)
#define spry_add_relaxed(p, v)    atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define spry_sub_relaxed(p, v)    atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
/* Weak CAS for retry loops: release on success publishes what the caller wrote
 * before (a block's next pointer), acquire on failure is not needed because the
 * loop re-reads with the value returned. */
#define spry_cas_weak_release(p, expected, desired) \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), \
        memory_order_release, memory_order_relaxed)
#define spry_cas_weak_acq_rel(p, expected, desired) \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), \
        memory_order_acq_rel, memory_order_acquire)

/* Keep a relaxed statistic counter (size_t) up to date. */
static inline void spry_stat_add(_Atomic(size_t) *c, size_t v) { spry_add_relaxed(c, v); }
static inline void spry_stat_sub(_Atomic(size_t) *c, size_t v) { spry_sub_relaxed(c, v); }

#define spry_likely(x)   __builtin_expect(!!(x), 1)
#define spry_unlikely(x) __builtin_expect(!!(x), 0)

#endif
