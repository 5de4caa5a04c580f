/* fork_exchange.c: fork many times while threads pass small blocks to each
 * other (so their outboxes of remote frees are always busy), each child
 * freeing the blocks left in the ring and allocating a while. fork cuts the
 * other threads anywhere, in the middle of batching a remote free too: the
 * child must neither crash nor report a valid free as double (2-3% of the
 * children did, when the child sent the cut threads' batches on: a review).
 *
 * usage: fork_exchange THREADS FORKS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spry.h>
#include "check.h"

#define RING 4096
#define CHILD_DEADLINE_S 20

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static void *ring[RING];
static uint64_t ring_tag[RING];
static int ring_head, ring_n;
static atomic_int stop;
static atomic_ulong next_tag = 1;

static int ring_push(void *p, uint64_t tag) {
    int ok = 0;
    pthread_mutex_lock(&ring_lock);
    if (ring_n < RING) {
        int i = (ring_head + ring_n) % RING;
        ring[i] = p;
        ring_tag[i] = tag;
        ring_n++;
        ok = 1;
    }
    pthread_mutex_unlock(&ring_lock);
    return ok;
}

static void *ring_pop(uint64_t *tag) {
    void *p = NULL;
    pthread_mutex_lock(&ring_lock);
    if (ring_n) {
        p = ring[ring_head];
        *tag = ring_tag[ring_head];
        ring_head = (ring_head + 1) % RING;
        ring_n--;
    }
    pthread_mutex_unlock(&ring_lock);
    return p;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void check_tag(const void *p, uint64_t tag) {
    uint64_t v;
    memcpy(&v, p, 8);
    CHECKF(v == tag, "block %p holds tag %llu, not %llu: handed out twice", p, (unsigned long long)v,
           (unsigned long long)tag);
}

/* 8 to 72 bytes: 8-byte blocks (remote bits) and marked ones */
static void *busy(void *arg) {
    uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + 1;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (rng_next(&rng) % 2) {
            uint64_t tag = atomic_fetch_add(&next_tag, 1);
            void *p = spry_malloc(8 + rng_next(&rng) % 4 * 16);
            CHECK(p != NULL);
            memcpy(p, &tag, 8);
            if (!ring_push(p, tag)) spry_free(p);
        } else {
            uint64_t tag;
            void *p = ring_pop(&tag);
            if (!p) continue;
            check_tag(p, tag);
            spry_free(p);
        }
    }
    return NULL;
}

static int child(void) {
    alarm(CHILD_DEADLINE_S);
    pthread_mutex_init(&ring_lock, NULL);   /* held by the forking thread */
    uint64_t tag;
    void *p;
    while ((p = ring_pop(&tag)) != NULL) {
        check_tag(p, tag);
        spry_free(p);
    }
    void *a[2000];
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 2000; i++) CHECK((a[i] = spry_malloc(8 + i % 5 * 16)) != NULL);
        for (int i = 0; i < 2000; i++) spry_free(a[i]);
    }
    spry_stats_t s;
    spry_stats_get(&s);
    return s.errors ? 2 : 0;
}

int main(int argc, char **argv) {
    CHECKF(argc >= 3, "usage: %s THREADS FORKS", argv[0]);
    int threads = atoi(argv[1]), forks = atoi(argv[2]);
    CHECK(threads > 0 && threads <= 64 && forks > 0);
    pthread_t tid[64];
    for (int t = 0; t < threads; t++) CHECK_EQ(pthread_create(&tid[t], NULL, busy, (void *)(uintptr_t)(t + 1)), 0);
    int failed = 0;
    for (int f = 0; f < forks; f++) {
        struct timespec pause = {0, 1000 * 1000};
        nanosleep(&pause, NULL);
        /* the ring whole in the child (its lock held across fork); the
         * threads are cut anywhere in the allocator */
        pthread_mutex_lock(&ring_lock);
        pid_t pid = fork();
        if (pid == 0) _exit(child());
        pthread_mutex_unlock(&ring_lock);
        CHECK(pid >= 0);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            fprintf(stderr, "fork %d: child %s %d\n", f, WIFSIGNALED(st) ? "killed by signal" : "exit status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < threads; t++) CHECK_EQ(pthread_join(tid[t], NULL), 0);
    CHECKF(failed == 0, "%d of %d fork children failed", failed, forks);
    printf("fork_exchange: %d threads, %d forks, every child clean\n", threads, forks);
    return 0;
}
