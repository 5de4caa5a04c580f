/* stress_exchange.c: many threads (oversubscribed: 16 or 64 on 2 cores)
 * allocate random sizes from 1 B to 4 MiB, fill every block with a pattern
 * derived from its address and size, hand blocks to each other through a
 * shared exchange (an array of lock-protected slots), realloc them, and free
 * blocks that other threads allocated. Every block is checked before it is
 * freed, after a realloc and when taken from the exchange; a mismatch prints
 * the block's address and the bad byte and fails at once.
 *
 * usage: stress_exchange THREADS TOTAL_OPS [SEED]
 * The operations of each thread are deterministic (its own random stream);
 * only the interleaving varies from run to run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_api.h"
#include "check.h"
#include "pattern.h"

#define LOCAL_SLOTS 32
#define EXCHANGE_SLOTS 256

struct block {
    void *p;
    size_t n;
};

struct exchange_slot {
    pthread_mutex_t lock;
    struct block b;
};

static struct exchange_slot exchange[EXCHANGE_SLOTS];
static long ops_per_thread;
static uint64_t base_seed;
static atomic_long cross_frees, reallocs, handoffs;

/* checks the block's pattern and its allocator facts */
static void block_check(struct block b, const char *when)
{
    if (!b.p)
        return;
    CHECK_PATTERN(b.p, b.n, pattern_seed(b.p, b.n), when);
}

static struct block block_new(uint64_t *rng)
{
    struct block b;
    b.n = rng_size(rng);
    if (rng_next(rng) % 16 == 0) {
        size_t align = (size_t)64 << (rng_next(rng) % 7); /* 64 B .. 4 KiB */
        b.p = A_aligned_alloc(align, b.n);
        CHECKF(b.p != NULL, "aligned_alloc(%zu, %zu) failed", align, b.n);
        CHECKF((uintptr_t)b.p % align == 0,
               "aligned_alloc(%zu, %zu) = %p misaligned", align, b.n, b.p);
    } else if (rng_next(rng) % 8 == 0) {
        b.p = A_calloc(1, b.n);
        CHECKF(b.p != NULL, "calloc(1, %zu) failed", b.n);
        const unsigned char *c = b.p;
        for (size_t i = 0; i < b.n; i += 61)
            CHECKF(c[i] == 0, "calloc(1, %zu) = %p: byte %zu is 0x%02x", b.n,
                   b.p, i, c[i]);
    } else {
        b.p = A_malloc(b.n);
        CHECKF(b.p != NULL, "malloc(%zu) failed", b.n);
    }
    CHECKF((uintptr_t)b.p % check_min_align(b.n) == 0,
           "block %p of %zu bytes is not %zu-aligned", b.p, b.n,
           check_min_align(b.n));
    CHECKF(A_usable_size(b.p) >= b.n, "usable size %zu of block %p < %zu",
           A_usable_size(b.p), b.p, b.n);
    pattern_fill(b.p, b.n);
    return b;
}

static void block_free(struct block b, const char *when, uint64_t *rng)
{
    if (!b.p)
        return;
    block_check(b, when);
#ifndef SPRY_TEST_PLAIN
    if (rng_next(rng) % 4 == 0) {
        spry_free_sized(b.p, b.n);
        return;
    }
#endif
    (void)rng;
    A_free(b.p);
}

static struct block block_realloc(struct block b, uint64_t *rng)
{
    size_t m = rng_size(rng);
    if (rng_next(rng) % 2)
        m = b.n / 2 + 1 + m % 64; /* shrinks too */
    size_t keep = b.n < m ? b.n : m;
    uint64_t old_seed = pattern_seed(b.p, b.n);
    void *q = A_realloc(b.p, m);
    CHECKF(q != NULL, "realloc(%p, %zu) failed", b.p, m);
    CHECK_PATTERN(q, keep, old_seed, "contents kept by realloc");
    b.p = q;
    b.n = m;
    pattern_fill(b.p, b.n);
    return b;
}

static void *worker(void *arg)
{
    long id = (long)(intptr_t)arg;
    uint64_t rng = base_seed * 0x9E3779B97F4A7C15ull + (uint64_t)id * 7919 + 1;
    struct block local[LOCAL_SLOTS];
    memset(local, 0, sizeof local);
    long my_cross = 0, my_realloc = 0, my_handoff = 0;

    for (long op = 0; op < ops_per_thread; op++) {
        unsigned r = (unsigned)(rng_next(&rng) % 100);
        unsigned i = (unsigned)(rng_next(&rng) % LOCAL_SLOTS);
        if (r < 40) { /* allocate */
            block_free(local[i], "block freed by its owner", &rng);
            local[i] = block_new(&rng);
        } else if (r < 55) { /* free our own */
            block_free(local[i], "block freed by its owner", &rng);
            local[i].p = NULL;
        } else if (r < 80) { /* swap with the exchange */
            unsigned j = (unsigned)(rng_next(&rng) % EXCHANGE_SLOTS);
            pthread_mutex_lock(&exchange[j].lock);
            struct block theirs = exchange[j].b;
            exchange[j].b = local[i];
            pthread_mutex_unlock(&exchange[j].lock);
            block_check(theirs, "block taken from the exchange");
            local[i] = theirs;
            my_handoff++;
        } else if (r < 92) { /* realloc (often another thread's block) */
            if (local[i].p) {
                local[i] = block_realloc(local[i], &rng);
                my_realloc++;
            }
        } else { /* take a block from the exchange and free it here */
            unsigned j = (unsigned)(rng_next(&rng) % EXCHANGE_SLOTS);
            pthread_mutex_lock(&exchange[j].lock);
            struct block theirs = exchange[j].b;
            exchange[j].b.p = NULL;
            pthread_mutex_unlock(&exchange[j].lock);
            if (theirs.p)
                my_cross++;
            block_free(theirs, "block freed by another thread", &rng);
        }
    }
    for (unsigned i = 0; i < LOCAL_SLOTS; i++)
        block_free(local[i], "block freed at thread end", &rng);
    atomic_fetch_add_explicit(&cross_frees, my_cross, memory_order_relaxed);
    atomic_fetch_add_explicit(&reallocs, my_realloc, memory_order_relaxed);
    atomic_fetch_add_explicit(&handoffs, my_handoff, memory_order_relaxed);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECKF(argc >= 3, "usage: %s THREADS TOTAL_OPS [SEED]", argv[0]);
    int threads = atoi(argv[1]);
    long total = atol(argv[2]);
    base_seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 42;
    CHECK(threads > 0 && threads <= 1024 && total > 0);
    ops_per_thread = total / threads;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int j = 0; j < EXCHANGE_SLOTS; j++)
        pthread_mutex_init(&exchange[j].lock, NULL);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    CHECK_NOTNULL(tid);
    for (int t = 0; t < threads; t++)
        CHECK_EQ(pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t), 0);
    for (int t = 0; t < threads; t++)
        CHECK_EQ(pthread_join(tid[t], NULL), 0);
    free(tid);
    /* what is left in the exchange is freed by the main thread */
    uint64_t rng = 99;
    for (int j = 0; j < EXCHANGE_SLOTS; j++)
        block_free(exchange[j].b, "block left in the exchange", &rng);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("stress_exchange (%s): %d threads, %ld ops, %ld hand-offs, %ld "
           "frees by another thread, %ld reallocs, %.2f s: all blocks intact\n",
           A_VARIANT, threads, ops_per_thread * threads,
           (long)atomic_load(&handoffs), (long)atomic_load(&cross_frees),
           (long)atomic_load(&reallocs), secs);
    return 0;
}
