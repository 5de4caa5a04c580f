/* What a thread of small blocks costs in resident memory: its heap, its
 * first segment's header, a page per class it uses. A program with many
 * such threads (a pool of workers, each holding a few small objects) pays
 * it per thread: with the thread's own memory, glibc about 14 KB, spry 37
 * KB for a thread of 8-byte blocks before two fixes, 30 after:
 *   - the 8-byte class's first carve began after its bitmaps, half an OS
 *     page in, and wrote into a second page (page.c, carve_count);
 *   - every heap's 4 OS pages were written; the last one, the block
 *     caches and spans, now stays untouched by a thread that frees no block
 *     above 1 KiB (types.h), and the purge thread's looks leave it so
 *     (block_cache.c).
 *
 * Measured against threads that allocate nothing (their stacks and the
 * C library's per-thread memory cancel out), THREADS at a time, each with
 * 16 blocks of 8 B and 16 of 16 B, checked before they are freed; at once,
 * and after the purge thread has had time for its looks. The bound
 * is per thread and the measure an average over THREADS, so a loaded
 * machine moves it little. */
#include "check.h"
#include "rss.h"
#include <spry.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 64
#define BLOCKS 16
#define KiB ((size_t)1024)
/* 16.3-17.3 KB a thread measured; 22.8 before the fixes, 20.2 with the
 * purge thread's looks writing the cold page */
#define BOUND (37 * KiB / 2)

static pthread_barrier_t ready, done;
static int allocate;

static void *worker(void *arg) {
    unsigned char *b8[BLOCKS], *b16[BLOCKS];
    uintptr_t tag = (uintptr_t)arg;
    if (allocate) {
        for (int i = 0; i < BLOCKS; i++) {
            b8[i] = spry_malloc(8);
            b16[i] = spry_malloc(16);
            CHECK(b8[i] && b16[i]);
            memset(b8[i], (int)(tag + i), 8);
            memset(b16[i], (int)(tag - i), 16);
        }
    }
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&done);
    if (allocate) {
        for (int i = 0; i < BLOCKS; i++) {
            CHECK(b8[i][7] == (unsigned char)(tag + i) && b16[i][15] == (unsigned char)(tag - i));
            spry_free(b8[i]);
            spry_free(b16[i]);
        }
    }
    return NULL;
}

/* Resident bytes THREADS threads add, measured while they wait, after
 * `settle_ms`. */
static size_t threads_rss(int with_blocks, unsigned settle_ms) {
    pthread_t t[THREADS];
    pthread_attr_t attr;
    CHECK(pthread_attr_init(&attr) == 0);
    CHECK(pthread_attr_setstacksize(&attr, 64 * KiB) == 0);
    allocate = with_blocks;
    CHECK(pthread_barrier_init(&ready, NULL, THREADS + 1) == 0);
    CHECK(pthread_barrier_init(&done, NULL, THREADS + 1) == 0);
    size_t base = rss_bytes();
    for (uintptr_t i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], &attr, worker, (void *)i) == 0);
    pthread_barrier_wait(&ready);
    if (settle_ms) {
        struct timespec ts = {settle_ms / 1000, (long)(settle_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
    size_t now = rss_bytes();
    pthread_barrier_wait(&done);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&done);
    pthread_attr_destroy(&attr);
    return now > base ? now - base : 0;
}

/* argv[1]: milliseconds to wait before measuring (the purge thread's
 * looks), 0 by default. One measure a process: threads that exit leave
 * their heaps to the next ones, resident. */
int main(int argc, char **argv) {
    unsigned ms = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
    /* the main thread's heap first, and a block cache, which starts the
     * purge thread (its passes look at every heap's caches) */
    spry_free(spry_malloc(1));
    spry_free(spry_malloc(4 * KiB));
    size_t bare = threads_rss(0, ms);
    size_t with = threads_rss(1, ms);
    size_t per = with > bare ? (with - bare) / THREADS : 0;
    CHECKF(per < BOUND, "%zu bytes resident a thread of small blocks (after %u ms), bound %zu", per, ms,
           BOUND);
    printf("thread_footprint: ok (%zu bytes a thread after %u ms)\n", per, ms);
    return 0;
}
