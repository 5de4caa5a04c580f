/* stats_walk_race.c: spry_stats_print's census beside heaps that change.
 * The census walks each heap's segments under that heap's lock, but owners
 * change their pages' counts without it, a purge pass collecting a dormant
 * heap does so under the heap's guard, and a span being freed is cleared
 * before its segment's lock is taken. The walk read those fields plainly:
 * ThreadSanitizer reported races with spry_page_take_remote and
 * spry_span_free in 1-2 of 2 prints at a review. Now it reads each field
 * once, as a snapshot (heap.c, page_view).
 *
 * Threads take turns with 4 MiB of 1-4 KiB blocks, each handing 64 blocks
 * to the next, which frees them (remote frees); the main thread prints the
 * statistics meanwhile, then again after the threads have left while the
 * purge thread collects their dormant heaps (SPRY_PURGE_DELAY_MS=1, set by
 * the test). Run under ThreadSanitizer; the test fails on any report. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"

#define THREADS 4
#define ROUNDS  4
#define SET     ((size_t)4 << 20)
#define HANDOFF 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static unsigned char *handoff[HANDOFF];
static atomic_int finished;

static size_t block_size(size_t i) { return 1024 + (i * 389) % 3072; }

static void *taker(void *arg) {
    int id = (int)(intptr_t)arg;
    size_t cap = SET / 1024 + 1;
    unsigned char **p = spry_malloc(cap * sizeof *p);
    CHECK(p != NULL);
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(pthread_mutex_lock(&mu) == 0);
        while (turn % THREADS != id) CHECK(pthread_cond_wait(&cv, &mu) == 0);
        for (int i = 0; i < HANDOFF; i++) {
            if (!handoff[i]) continue;
            CHECK(handoff[i][0] == (unsigned char)i);
            spry_free(handoff[i]);
            handoff[i] = NULL;
        }
        CHECK(pthread_mutex_unlock(&mu) == 0);
        size_t n = 0, bytes = 0;
        while (bytes < SET && n < cap) {
            p[n] = spry_malloc(block_size(n));
            CHECK(p[n] != NULL);
            memset(p[n], (int)(n + (size_t)id), 64);
            bytes += block_size(n++);
        }
        for (size_t i = 0; i < n; i++) {
            CHECK(p[i][63] == (unsigned char)(i + (size_t)id));
            spry_free(p[i]);
        }
        CHECK(pthread_mutex_lock(&mu) == 0);
        for (int i = 0; i < HANDOFF; i++) {
            handoff[i] = spry_malloc(block_size((size_t)i * 7));
            CHECK(handoff[i] != NULL);
            handoff[i][0] = (unsigned char)i;
        }
        turn++;
        CHECK(pthread_cond_broadcast(&cv) == 0);
        CHECK(pthread_mutex_unlock(&mu) == 0);
    }
    spry_free(p);
    atomic_fetch_add(&finished, 1);
    return NULL;
}

static void print_stats(int fd) {
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    spry_stats_print(fd);
}

int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    CHECK(fd >= 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, taker, (void *)(intptr_t)i) == 0);
    struct timespec ms = {0, 1000 * 1000};
    int prints = 0;
    while (atomic_load(&finished) < THREADS) {
        print_stats(fd);
        prints++;
        nanosleep(&ms, NULL);
    }
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    for (int i = 0; i < HANDOFF; i++) spry_free(handoff[i]);
    /* the threads' heaps are dormant now: the purge thread collects them */
    for (int i = 0; i < 50; i++, prints++) {
        print_stats(fd);
        nanosleep(&ms, NULL);
    }
    close(fd);
    printf("stats_walk_race: %d prints beside %d threads taking %d turns each, then their dormant heaps\n", prints,
           THREADS, ROUNDS);
    return 0;
}
