/* spry_heap_walk: every live block exactly once, no freed one.
 *   1. four threads allocate blocks of 8 B to 8 MiB (class pages, large
 *      spans, huge and aligned huge blocks), free a third of their own and
 *      a third of the next thread's (remote frees: some wait in outboxes,
 *      8-byte ones with their live bit still set); walked while the threads
 *      wait alive, and again after they exit;
 *   2. a visitor that returns false stops the walk there;
 *   3. a visitor that allocates, and frees the blocks it is given;
 *   4. walks while two threads churn: never a crash or a hang, and the
 *      count right. */
#include "check.h"
#include <spry.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define THREADS 4
#define SMALL   1500              /* blocks of class pages, per thread */

static const size_t small_sizes[] = { 1, 8, 9, 16, 24, 32, 48, 64, 100, 128, 256, 500,
                                      1000, 1024, 1025, 2000, 4096, 5000, 16384, 65536 };
static const size_t big_sizes[] = { 100000, 131072, 131073, 300000, 1 << 20, 2 << 20,
                                    (2 << 20) + 1, 3 << 20, 8 << 20 };
#define NSMALL (sizeof small_sizes / sizeof small_sizes[0])
#define NBIG   (sizeof big_sizes / sizeof big_sizes[0])
#define PER_THREAD (SMALL + NBIG + 2)

typedef struct rec { void *p; size_t size; } rec_t;

static rec_t blocks[THREADS][PER_THREAD];   /* p NULL once freed */
static rec_t freed[THREADS][PER_THREAD];
static size_t nfreed[THREADS];
static pthread_barrier_t allocated, own_freed, remote_done, walked;

/* ---- the record of one walk (mmap'd: the visitor must not need malloc) -- */
#define SEEN_MAX (1u << 20)
static rec_t *seen;
static size_t nseen;

static bool record(void *block, size_t size, void *arg) {
    CHECK_LT(nseen, SEEN_MAX);
    seen[nseen].p = block;
    seen[nseen++].size = size;
    return true;
}

static int rec_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const rec_t *)a)->p, y = (uintptr_t)((const rec_t *)b)->p;
    return x < y ? -1 : x > y;
}

static const rec_t *seen_find(const void *p) {
    rec_t key = { (void *)p, 0 };
    return bsearch(&key, seen, nseen, sizeof *seen, rec_cmp);
}

/* Walks, then checks: no block twice, the count right, each live block of
 * ours seen with its usable size, no freed one seen. */
static void walk_and_check(const char *when) {
    nseen = 0;
    size_t n = spry_heap_walk(record, NULL);
    CHECKF(n == nseen, "%s: walk returned %zu, visited %zu", when, n, nseen);
    qsort(seen, nseen, sizeof *seen, rec_cmp);
    for (size_t i = 1; i < nseen; i++)
        CHECKF(seen[i].p != seen[i - 1].p, "%s: block %p visited twice", when, seen[i].p);
    for (size_t i = 0; i < nseen; i++) CHECKF(spry_owns(seen[i].p), "%s: %p not spry's", when, seen[i].p);
    size_t live = 0;
    for (int t = 0; t < THREADS; t++) {
        for (size_t i = 0; i < PER_THREAD; i++) {
            const rec_t *b = &blocks[t][i];
            if (!b->p) continue;
            live++;
            const rec_t *s = seen_find(b->p);
            CHECKF(s, "%s: live block %p of %zu B (thread %d) not visited", when, b->p, b->size, t);
            CHECKF(s->size >= b->size && s->size == spry_usable_size(b->p),
                   "%s: block %p of %zu B visited with size %zu (usable %zu)", when, b->p,
                   b->size, s->size, spry_usable_size(b->p));
        }
        for (size_t i = 0; i < nfreed[t]; i++)
            CHECKF(!seen_find(freed[t][i].p), "%s: freed block %p of %zu B visited", when,
                   freed[t][i].p, freed[t][i].size);
    }
    CHECK_GE(nseen, live);
}

static void free_block(int t, size_t i) {
    rec_t *b = &blocks[t][i];
    spry_free(b->p);
    freed[t][nfreed[t]++] = *b;
    b->p = NULL;
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    size_t k = 0;
    for (size_t i = 0; i < SMALL; i++, k++) {
        blocks[t][k].size = small_sizes[(i + (size_t)t) % NSMALL];
        blocks[t][k].p = spry_malloc(blocks[t][k].size);
    }
    for (size_t i = 0; i < NBIG; i++, k++) {
        blocks[t][k].size = big_sizes[i];
        blocks[t][k].p = spry_malloc(big_sizes[i]);
    }
    blocks[t][k].size = 300000;                       /* an aligned large span */
    blocks[t][k++].p = spry_aligned_alloc(256 << 10, 300000);
    blocks[t][k].size = 5 << 20;                      /* an aligned huge block */
    blocks[t][k++].p = spry_aligned_alloc(4 << 20, 5 << 20);
    for (size_t i = 0; i < PER_THREAD; i++) CHECK_NOTNULL(blocks[t][i].p);
    /* no free before every allocation: a freed address must not be handed
     * out again to a block the walk then rightly visits */
    pthread_barrier_wait(&allocated);
    /* a third of its own, including one big block in three */
    for (size_t i = 0; i < PER_THREAD; i += 3) free_block(t, i);
    pthread_barrier_wait(&own_freed);
    /* a third of the next thread's (blocks[u] is only written by u before
     * the barriers): remote frees, the last batches left in the outbox */
    int u = (t + 1) % THREADS;
    for (size_t i = 1; i < PER_THREAD; i += 3) free_block(u, i);
    pthread_barrier_wait(&remote_done);
    pthread_barrier_wait(&walked);
    return NULL;
}

static void test_threads(void) {
    pthread_t th[THREADS];
    pthread_barrier_init(&allocated, NULL, THREADS);
    pthread_barrier_init(&own_freed, NULL, THREADS);
    pthread_barrier_init(&remote_done, NULL, THREADS + 1);
    pthread_barrier_init(&walked, NULL, THREADS + 1);
    for (int t = 0; t < THREADS; t++)
        CHECK_EQ(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t), 0);
    pthread_barrier_wait(&remote_done);
    walk_and_check("threads alive");
    pthread_barrier_wait(&walked);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    walk_and_check("threads gone");
    for (int t = 0; t < THREADS; t++)
        for (size_t i = 0; i < PER_THREAD; i++)
            if (blocks[t][i].p) free_block(t, i);
    walk_and_check("all freed");
}

/* ---- 2. early stop ---------------------------------------------------- */
static bool stop_after(void *block, size_t size, void *arg) {
    size_t *left = arg;
    return --*left > 0;
}

static void test_early_stop(void) {
    void *p[100];
    for (int i = 0; i < 100; i++) CHECK_NOTNULL(p[i] = spry_malloc(40));
    size_t total = spry_heap_walk(NULL, NULL);
    CHECK_GE(total, 100);
    size_t left = 7;
    CHECK_EQ(spry_heap_walk(stop_after, &left), 7);
    CHECK_EQ(left, 0);
    left = 1;
    CHECK_EQ(spry_heap_walk(stop_after, &left), 1);
    for (int i = 0; i < 100; i++) spry_free(p[i]);
    CHECK_EQ(spry_heap_walk(NULL, NULL), total - 100);
}

/* ---- 3. a visitor that allocates and frees ------------------------------ */
#define MINE 3000
static void *mine[MINE];

static int ptr_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static bool free_mine(void *block, size_t size, void *arg) {
    size_t *freed_count = arg;
    /* allocation inside the walk: needs the heap's own locks */
    void *q = spry_malloc(size);
    CHECK_NOTNULL(q);
    spry_free(q);
    void **hit = bsearch(&block, mine, MINE, sizeof *mine, ptr_cmp);
    if (hit) {
        spry_free(block);
        ++*freed_count;
    }
    return true;
}

static void test_visitor_allocates(void) {
    for (int i = 0; i < MINE; i++) {
        size_t size = i % 50 == 0 ? 200000 : i % 97 == 0 ? (3 << 20) : (size_t)(8 + i % 700);
        CHECK_NOTNULL(mine[i] = spry_malloc(size));
    }
    qsort(mine, MINE, sizeof *mine, ptr_cmp);
    size_t freed_count = 0;
    spry_heap_walk(free_mine, &freed_count);
    CHECK_EQ(freed_count, MINE);
    nseen = 0;
    spry_heap_walk(record, NULL);
    qsort(seen, nseen, sizeof *seen, rec_cmp);
    for (int i = 0; i < MINE; i++) CHECKF(!seen_find(mine[i]), "block %p freed in the walk visited", mine[i]);
}

/* ---- 4. walks while threads churn ---------------------------------------- */
static _Atomic int churn_stop;

static void *churner(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *slot[512] = {0};
    while (!atomic_load_explicit(&churn_stop, memory_order_relaxed)) {
        for (int k = 0; k < 1000; k++) {
            seed = seed * 1103515245u + 12345u;
            unsigned i = (seed >> 8) % 512;
            size_t size = (seed >> 20) % 8 == 0 ? (seed >> 4) % 300000 : (seed >> 12) % 600;
            spry_free(slot[i]);
            slot[i] = spry_malloc(size);
        }
    }
    for (int i = 0; i < 512; i++) spry_free(slot[i]);
    return NULL;
}

/* (not spry_owns: a block freed since it was gathered may have taken its
 * segment back to the arena) */
static bool check_sane(void *block, size_t size, void *arg) {
    CHECKF(block && size > 0 && size <= (64u << 20), "walk during churn gave %p, %zu B", block, size);
    ++*(size_t *)arg;
    return true;
}

static void test_concurrent(void) {
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        CHECK_EQ(pthread_create(&th[t], NULL, churner, (void *)(uintptr_t)(t + 1)), 0);
    for (int i = 0; i < 50; i++) {
        size_t visits = 0;
        CHECK_EQ(spry_heap_walk(check_sane, &visits), visits);
    }
    atomic_store(&churn_stop, 1);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
}

int main(void) {
    seen = mmap(NULL, SEEN_MAX * sizeof *seen, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(seen != MAP_FAILED);
    test_threads();
    test_early_stop();
    test_visitor_allocates();
    test_concurrent();
    return 0;
}
