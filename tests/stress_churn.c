/* stress_churn.c: thread churn. Generation after generation of short-lived
 * threads start, allocate, hand their blocks to two long-lived survivor
 * threads (through a lock-protected queue) and to later generations (an
 * orphan list), free some blocks of earlier generations, and exit while
 * their blocks are still held elsewhere. Every block is checked before it
 * is freed. At the end:
 * - all blocks were intact;
 * - heaps of exited threads were reused (stats.heaps stays near the number
 *   of threads alive at once, not the number ever created);
 * - after everything is freed and spry_trim(), RSS is back near its start
 *   (abandoned memory is not leaked).
 *
 * usage: stress_churn GENERATIONS WORKERS_PER_GENERATION BLOCKS_PER_WORKER
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
#include "rss.h"

struct block {
    void *p;
    size_t n;
};

/* a bounded queue from workers to survivors */
#define QUEUE_CAP 4096
static struct block queue[QUEUE_CAP];
static size_t q_head, q_len;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static int q_done;

/* blocks left behind for later generations */
#define ORPHAN_CAP 8192
static struct block orphans[ORPHAN_CAP];
static size_t n_orphans;
static pthread_mutex_t o_lock = PTHREAD_MUTEX_INITIALIZER;

static int blocks_per_worker;
static atomic_long survivor_frees, orphan_frees;
static atomic_int workers_running;

static struct block block_new(uint64_t *rng)
{
    struct block b;
    b.n = rng_size(rng);
    if (b.n > (256 << 10))
        b.n = 1 + b.n % (256 << 10); /* keep the churn in small/medium */
    b.p = A_malloc(b.n);
    CHECKF(b.p != NULL, "malloc(%zu) failed in a short-lived thread", b.n);
    pattern_fill(b.p, b.n);
    return b;
}

static void block_free(struct block b, const char *when)
{
    CHECK_PATTERN(b.p, b.n, pattern_seed(b.p, b.n), when);
    A_free(b.p);
}

static void queue_push(struct block b)
{
    pthread_mutex_lock(&q_lock);
    while (q_len == QUEUE_CAP) {
        pthread_mutex_unlock(&q_lock);
        sched_yield();
        pthread_mutex_lock(&q_lock);
    }
    queue[(q_head + q_len++) % QUEUE_CAP] = b;
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

static void *survivor(void *arg)
{
    (void)arg;
    long freed = 0;
    /* the survivor also allocates, so its own heap is busy meanwhile */
    uint64_t rng = 0xABCDEF + (uint64_t)(uintptr_t)&freed;
    struct block mine[16];
    for (int i = 0; i < 16; i++)
        mine[i] = block_new(&rng);
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (q_len == 0 && !q_done)
            pthread_cond_wait(&q_cond, &q_lock);
        if (q_len == 0 && q_done) {
            pthread_mutex_unlock(&q_lock);
            break;
        }
        struct block b = queue[q_head];
        q_head = (q_head + 1) % QUEUE_CAP;
        q_len--;
        pthread_mutex_unlock(&q_lock);
        block_free(b, "block of a (maybe exited) thread freed by a survivor");
        freed++;
        int i = (int)(rng_next(&rng) % 16);
        block_free(mine[i], "survivor's own block");
        mine[i] = block_new(&rng);
    }
    for (int i = 0; i < 16; i++)
        block_free(mine[i], "survivor's own block");
    atomic_fetch_add(&survivor_frees, freed);
    return NULL;
}

static void *worker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 17;
    struct block *mine = A_malloc(sizeof(struct block) * (size_t)blocks_per_worker);
    CHECK_NOTNULL(mine);
    for (int i = 0; i < blocks_per_worker; i++)
        mine[i] = block_new(&rng);
    /* some blocks freed here, some handed to survivors, some left for
     * later generations; take and free orphans of earlier ones */
    long freed_orphans = 0;
    for (int i = 0; i < blocks_per_worker; i++) {
        switch (i % 4) {
        case 0:
            block_free(mine[i], "block freed by its own short-lived thread");
            break;
        case 1:
        case 2:
            queue_push(mine[i]);
            break;
        case 3: {
            struct block old = {0, 0};
            pthread_mutex_lock(&o_lock);
            if (n_orphans == ORPHAN_CAP || (n_orphans > 0 && rng_next(&rng) % 2))
                old = orphans[--n_orphans];
            if (n_orphans < ORPHAN_CAP)
                orphans[n_orphans++] = mine[i];
            else
                queue_push(mine[i]);
            pthread_mutex_unlock(&o_lock);
            if (old.p) {
                block_free(old, "block of an earlier generation's thread");
                freed_orphans++;
            }
            break;
        }
        }
    }
    A_free(mine);
    atomic_fetch_add(&orphan_frees, freed_orphans);
    atomic_fetch_sub(&workers_running, 1);
    return NULL; /* exits while survivors and later threads hold its blocks */
}

int main(int argc, char **argv)
{
    CHECKF(argc >= 4, "usage: %s GENERATIONS WORKERS BLOCKS", argv[0]);
    int generations = atoi(argv[1]);
    int workers = atoi(argv[2]);
    blocks_per_worker = atoi(argv[3]);
    CHECK(generations > 0 && workers > 0 && workers <= 256 &&
          blocks_per_worker > 0);

    void *first = A_malloc(100);
    CHECK_NOTNULL(first);
    A_free(first);
    spry_trim();
    size_t rss0 = rss_bytes();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    pthread_t surv[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&surv[i], NULL, survivor, NULL), 0);
    pthread_t *tid = A_malloc(sizeof(pthread_t) * (size_t)workers);
    CHECK_NOTNULL(tid);
    long created = 0;
    for (int g = 0; g < generations; g++) {
        for (int w = 0; w < workers; w++) {
            atomic_fetch_add(&workers_running, 1);
            CHECK_EQ(pthread_create(&tid[w], NULL, worker,
                                    (void *)(intptr_t)(created + 1)), 0);
            created++;
        }
        /* half the generations are joined at once, the others overlap with
         * the next generation */
        if (g % 2 == 1 || g == generations - 1)
            for (int w = 0; w < workers; w++)
                CHECK_EQ(pthread_join(tid[w], NULL), 0);
        else
            for (int w = 0; w < workers; w++)
                CHECK_EQ(pthread_detach(tid[w]), 0);
    }
    /* detached workers of the last overlapping generations may still run */
    while (atomic_load(&workers_running) > 0)
        sched_yield();
    pthread_mutex_lock(&q_lock);
    q_done = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_join(surv[i], NULL), 0);
    /* late pushes after q_done (a detached worker that was still running) */
    for (size_t i = 0; i < q_len; i++)
        block_free(queue[(q_head + i) % QUEUE_CAP], "late queued block");
    for (size_t i = 0; i < n_orphans; i++)
        block_free(orphans[i], "orphan freed by main after all threads exited");
    A_free(tid);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    spry_stats_t st;
    spry_stats_get(&st);
    spry_trim();
    size_t rss1 = rss_bytes();
    double secs = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("stress_churn (%s): %ld threads in %d generations, %ld blocks "
           "freed by survivors, %ld by later generations, %.2f s; heaps "
           "created %zu, abandoned %zu; RSS %zu MiB -> %zu MiB after trim\n",
           A_VARIANT, created, generations, (long)survivor_frees,
           (long)orphan_frees, secs, st.heaps, st.heaps_abandoned, rss0 / MiB,
           rss1 / MiB);
    /* at most 2 * workers + survivors + main are alive at once */
    size_t alive_max = (size_t)(2 * workers + 3);
    CHECKF(st.heaps <= 4 * alive_max,
           "%zu thread heaps created for %ld threads of which at most %zu were "
           "alive at once: heaps of exited threads are not reused",
           st.heaps, created, alive_max);
/* TSan's shadow memory is counted in RSS (gcc says TSan with
 * __SANITIZE_THREAD__, clang through __has_feature) */
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif
#ifndef TSAN_BUILD
    CHECKF(rss1 <= rss0 + 48 * MiB,
           "RSS %zu MiB after freeing everything and spry_trim(), %zu MiB at "
           "start: memory of exited threads' heaps is leaked",
           rss1 / MiB, rss0 / MiB);
#endif
    return 0;
}
