/* A thread that frees blocks of a thread that exited, before its own first
 * malloc, takes that thread's dormant heap, not the newest one: a server's
 * next worker, taking over its predecessor's blocks, then frees them as
 * their owner and reuses their memory (bench relay: at 8 lanes on 2 cores
 * it got another lane's heap, whose blocks were still live).
 *
 * Threads A and C run at once (so they have a heap each); A leaves blocks
 * behind and exits first, so C's heap is the newest dormant one; thread B
 * frees one of A's blocks, then mallocs: its block must come from A's heap
 * (heaps own their segments, so from one of A's segments). It came from
 * C's before. */
#include "check.h"
#include <spry.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#define BLOCKS 64
#define SIZE   100

static void *left[BLOCKS];
static sem_t ready, go_a, go_c;

static uintptr_t segment_of(const void *p) { return (uintptr_t)p >> 22; }

static void *leaver(void *arg) {
    (void)arg;
    for (int i = 0; i < BLOCKS; i++) {
        left[i] = spry_malloc(SIZE);
        CHECK(left[i] != NULL);
    }
    sem_post(&ready);
    while (sem_wait(&go_a) != 0) {}
    return NULL;
}

static void *passer_by(void *arg) {
    (void)arg;
    void *p[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) CHECK((p[i] = spry_malloc(SIZE)) != NULL);
    for (int i = 0; i < BLOCKS; i++) spry_free(p[i]);
    sem_post(&ready);
    while (sem_wait(&go_c) != 0) {}
    return NULL;
}

static void *successor(void *arg) {
    void **got = arg;
    spry_free(left[0]);                 /* before any malloc of this thread */
    *got = spry_malloc(SIZE);
    CHECK(*got != NULL);
    for (int i = 1; i < BLOCKS; i++) spry_free(left[i]);
    spry_free(*got);
    return NULL;
}

static void start(pthread_t *t, void *(*fn)(void *), void *arg) {
    CHECK(pthread_create(t, NULL, fn, arg) == 0);
}

static void finish(pthread_t t) {
    CHECK(pthread_join(t, NULL) == 0);  /* its heap is dormant by now */
}

int main(void) {
    spry_free(spry_malloc(16));         /* the main thread's own heap */
    CHECK(sem_init(&ready, 0, 0) == 0 && sem_init(&go_a, 0, 0) == 0 && sem_init(&go_c, 0, 0) == 0);
    for (int round = 0; round < 20; round++) {
        pthread_t a, c, b;
        start(&a, leaver, NULL);
        while (sem_wait(&ready) != 0) {}
        start(&c, passer_by, NULL);
        while (sem_wait(&ready) != 0) {}
        sem_post(&go_a);
        finish(a);
        sem_post(&go_c);
        finish(c);
        uintptr_t seg = segment_of(left[0]);
        void *got = NULL;
        start(&b, successor, &got);
        finish(b);
        CHECKF(segment_of(got) == seg, "round %d: the successor's block %p is not in the "
               "segment of the blocks it freed (%p): it took another dormant heap",
               round, got, left[0]);
    }
    spry_stats_t s;
    spry_stats_get(&s);
    /* main's, and A's and C's, taken again each round (and the purge
     * thread's, if it ever mallocs) */
    CHECKF(s.heaps <= 4, "%zu heaps made", s.heaps);
    printf("heap_successor: 20 rounds, each successor took its predecessor's heap; %zu heaps\n",
           s.heaps);
    return 0;
}
