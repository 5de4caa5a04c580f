/* Which dormant heap a new thread takes (heap.c, dormant_choose).
 *
 *   freed into a dormant heap first: that heap. A server's next worker,
 *     taking over its predecessor's blocks, then frees them as their owner
 *     and reuses their memory (bench relay: at 8 lanes on 2 cores it got
 *     another lane's heap, whose blocks were still live). Holders O, A and
 *     C go dormant in that order; thread B frees A's block, then mallocs:
 *     its block must come from A's heap (heaps own their segments, so from
 *     A's block's segment). It came from C's, the newest.
 *   freed into a heap whose thread lives on: the newest, as a thread that
 *     freed nothing (a server's acceptor allocates each request, a new
 *     thread frees it). Holder L stays; O and N go dormant; B frees L's
 *     block, then mallocs: from N's heap. A version took the oldest then,
 *     and such threads went round every heap of an earlier burst, coldest
 *     first (a review: 27x the peak RSS).
 *
 * Holders run at once, so each has a heap of its own, and each leaves its
 * block behind, so that its heap keeps a segment. */
#include "check.h"
#include <spry.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#define SIZE 100

typedef struct {
    pthread_t thread;
    sem_t ready, go;
    void *block;
} holder_t;

static uintptr_t segment_of(const void *p) { return (uintptr_t)p >> 22; }

static void *hold(void *arg) {
    holder_t *h = arg;
    h->block = spry_malloc(SIZE);
    CHECK(h->block != NULL);
    sem_post(&h->ready);
    while (sem_wait(&h->go) != 0) {}
    return NULL;                        /* the block stays behind */
}

static void holder_start(holder_t *h) {
    CHECK(sem_init(&h->ready, 0, 0) == 0 && sem_init(&h->go, 0, 0) == 0);
    CHECK(pthread_create(&h->thread, NULL, hold, h) == 0);
    while (sem_wait(&h->ready) != 0) {}
}

/* its heap is dormant once joined */
static void holder_end(holder_t *h) {
    sem_post(&h->go);
    CHECK(pthread_join(h->thread, NULL) == 0);
    sem_destroy(&h->ready);
    sem_destroy(&h->go);
}

static void *taker(void *arg) {
    void **io = arg;                    /* in: a block to free; out: a new one */
    spry_free(*io);                     /* before any malloc of this thread */
    *io = spry_malloc(SIZE);
    CHECK(*io != NULL);
    return NULL;
}

/* A new thread frees `block`, then mallocs: its new block. */
static void *take_after_freeing(void *block) {
    pthread_t t;
    void *io = block;
    CHECK(pthread_create(&t, NULL, taker, &io) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    return io;
}

/* got (a new thread's block) is in the segment of block `of`, of the heap
 * it should have taken */
static void expect_heap_of(const void *got, const void *of, int round, const char *which) {
    CHECKF(segment_of(got) == segment_of(of), "round %d: the block %p is not in the segment of %s "
           "(that of %p)", round, got, which, of);
}

int main(void) {
    spry_free(spry_malloc(16));         /* the main thread's own heap */
    for (int round = 0; round < 20; round++) {
        holder_t o, a, c;
        holder_start(&o);
        holder_start(&a);
        holder_start(&c);
        holder_end(&o);
        holder_end(&a);
        holder_end(&c);
        void *got = take_after_freeing(a.block);
        expect_heap_of(got, a.block, round, "the dormant heap's block it freed first");
        spry_free(got);
        spry_free(o.block);
        spry_free(c.block);
    }
    for (int round = 0; round < 20; round++) {
        holder_t l, o, n;
        holder_start(&l);
        holder_start(&o);
        holder_start(&n);
        holder_end(&o);
        holder_end(&n);
        void *got = take_after_freeing(l.block);
        expect_heap_of(got, n.block, round, "the newest dormant heap's block");
        holder_end(&l);
        spry_free(got);
        spry_free(o.block);
        spry_free(n.block);
    }
    spry_stats_t s;
    spry_stats_get(&s);
    /* main's, the holders' and the takers', taken again round after round
     * (and the purge thread's, if it ever mallocs) */
    CHECKF(s.heaps <= 6, "%zu heaps made", s.heaps);
    printf("heap_successor: 2 x 20 rounds, each new thread took the heap expected; %zu heaps\n",
           s.heaps);
    return 0;
}
