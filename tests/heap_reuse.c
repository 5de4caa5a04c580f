/* Heaps of exited threads are reused even while purge passes run: threads
 * start and exit one after another (each joined before the next starts, so
 * a dormant heap is always there for it) while another thread calls
 * spry_trim() in a loop, whose pass holds the dormant heaps for a moment to
 * collect them. A new thread that came then used to make a heap of its own
 * (the fuzzer saw 41 heaps for 16 thread slots); now it waits for them. */
#include "check.h"
#include <spry.h>
#include <pthread.h>
#include <stdatomic.h>

static atomic_int stop;

static void *trimmer(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) spry_trim();
    return NULL;
}

static void *short_life(void *arg) {
    (void)arg;
    void *p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = spry_malloc(64 << i);
        CHECK(p[i] != NULL);
    }
    for (int i = 0; i < 8; i++) spry_free(p[i]);
    return NULL;
}

int main(void) {
    spry_free(spry_malloc(16));                  /* the main thread's heap */
    pthread_t trim, t;
    CHECK(pthread_create(&trim, NULL, trimmer, NULL) == 0);
    for (int i = 0; i < 3000; i++) {
        CHECK(pthread_create(&t, NULL, short_life, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(trim, NULL) == 0);
    spry_stats_t s;
    spry_stats_get(&s);
    /* main, the trimmer (spry_trim makes none, but allow it), one thread
     * at a time, and the purge thread's */
    printf("heap_reuse: %zu heaps for 3000 short threads\n", s.heaps);
    CHECKF(s.heaps <= 4, "%zu heaps made for threads that never overlapped", s.heaps);
    return 0;
}
