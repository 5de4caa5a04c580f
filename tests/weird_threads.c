/* weird_threads.c: threads in the situations the requirements name
 * (prefixed API, libspry.a):
 * - threads created before the first spry call of the process, which then
 *   all allocate at once;
 * - a thread whose first spry call frees another thread's block;
 * - a thread that exits while other threads still hold its blocks, which
 *   are freed later by a thread created afterwards and by main;
 * - new threads after that (the abandoned heap may be adopted);
 * - spry calls from a thread-specific-data destructor at thread exit.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spry.h"

#include "check.h"
#include "pattern.h"

#define EARLY_THREADS 8
#define HELD 3000

static pthread_barrier_t start_barrier;
static void *early_out[EARLY_THREADS][64];
static size_t early_n[EARLY_THREADS][64];

static void *held[HELD];
static size_t held_n[HELD];

static size_t size_of(size_t i)
{
    static const size_t cls[] = {8, 24, 100, 512, 3000, 20000, 100000, 1 << 20};
    return cls[i % 8] + i % 13;
}

static void *early_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start_barrier); /* all created before any spry call */
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 64; i++) {
            size_t n = size_of((size_t)(i + round + id));
            void *p = spry_malloc(n);
            CHECKF(p != NULL, "spry_malloc(%zu) in a pre-existing thread", n);
            pattern_fill(p, n);
            if (round < 49) {
                CHECK_PATTERN(p, n, pattern_seed(p, n), "early thread block");
                spry_free(p);
            } else {
                early_out[id][i] = p;
                early_n[id][i] = n;
            }
        }
    }
    return NULL;
}

/* first spry call of this thread: free a block of another thread */
static void *first_call_is_free(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 64; i++) {
        void *p = early_out[id][i];
        CHECK_PATTERN(p, early_n[id][i], pattern_seed(p, early_n[id][i]),
                      "block freed by a thread whose first call is free");
        spry_free(p);
    }
    return NULL;
}

static void *allocate_and_exit(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < HELD; i++) {
        held_n[i] = size_of(i * 7);
        held[i] = spry_malloc(held_n[i]);
        CHECK_NOTNULL(held[i]);
        pattern_fill(held[i], held_n[i]);
    }
    return NULL; /* exits; its blocks live on */
}

static void *free_half_of_held(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < HELD; i += 2) {
        CHECK_PATTERN(held[i], held_n[i], pattern_seed(held[i], held_n[i]),
                      "block of an exited thread, freed by a later thread");
        spry_free(held[i]);
    }
    return NULL;
}

static void *busy_new_thread(void *arg)
{
    (void)arg;
    void *mine[500];
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < 500; i++) {
            mine[i] = spry_malloc(size_of(i * 3 + (size_t)round));
            CHECK_NOTNULL(mine[i]);
            pattern_fill(mine[i], size_of(i * 3 + (size_t)round));
        }
        for (size_t i = 0; i < 500; i++) {
            size_t n = size_of(i * 3 + (size_t)round);
            CHECK_PATTERN(mine[i], n, pattern_seed(mine[i], n),
                          "block of a thread started after another exited");
            spry_free(mine[i]);
        }
    }
    return NULL;
}

static pthread_key_t key;

static void tsd_destructor(void *v)
{
    CHECK_PATTERN(v, 777, pattern_seed(v, 777), "TSD block at thread exit");
    spry_free(v);
    void *p = spry_malloc(4000);
    CHECKF(p != NULL, "spry_malloc in a TSD destructor at thread exit");
    memset(p, 9, 4000);
    spry_free(p);
}

static void *tsd_thread(void *arg)
{
    (void)arg;
    void *v = spry_malloc(777);
    CHECK_NOTNULL(v);
    pattern_fill(v, 777);
    CHECK_EQ(pthread_setspecific(key, v), 0);
    return NULL;
}

int main(void)
{
    pthread_t t[EARLY_THREADS];
    CHECK_EQ(pthread_barrier_init(&start_barrier, NULL, EARLY_THREADS + 1), 0);
    for (int i = 0; i < EARLY_THREADS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, early_thread, (void *)(intptr_t)i), 0);
    pthread_barrier_wait(&start_barrier);
    for (int i = 0; i < EARLY_THREADS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < EARLY_THREADS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, first_call_is_free,
                                (void *)(intptr_t)i), 0);
    for (int i = 0; i < EARLY_THREADS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);

    pthread_t a, b;
    CHECK_EQ(pthread_create(&a, NULL, allocate_and_exit, NULL), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    /* new threads run while the exited thread's blocks are still live */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, busy_new_thread, NULL), 0);
    CHECK_EQ(pthread_create(&b, NULL, free_half_of_held, NULL), 0);
    CHECK_EQ(pthread_join(b, NULL), 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    for (size_t i = 1; i < HELD; i += 2) {
        CHECK_PATTERN(held[i], held_n[i], pattern_seed(held[i], held_n[i]),
                      "block of an exited thread, freed by main");
        spry_free(held[i]);
    }

    CHECK_EQ(pthread_key_create(&key, tsd_destructor), 0);
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 4; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, tsd_thread, NULL), 0);
        for (int i = 0; i < 4; i++)
            CHECK_EQ(pthread_join(t[i], NULL), 0);
    }
    printf("weird_threads: all checks passed\n");
    return 0;
}
