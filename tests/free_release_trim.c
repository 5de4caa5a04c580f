/* free_release_trim.c: the owner's free of a large block that empties its
 * span, with another thread's spry_trim returning the segment before the
 * free has finished. The free used to read page->heap again after the span
 * was given back: with the segment returned (its header, page descriptors
 * included, purged to zero) that read NULL and the free crashed (a review;
 * seen in a fork and trim stress too).
 *
 * The window is made certain: the purge thread leaves when idle, so the
 * free starts it again (pthread_create, interposed here), and at that call
 * another thread runs spry_trim. Run with SPRY_PURGE_DELAY_MS=1. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <spry.h>
#include "check.h"

static sem_t go, done;
static volatile int armed, hits;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg) {
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real) real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
    if (armed) {                /* spry starting its purge thread inside a free */
        armed = 0;
        hits++;
        sem_post(&go);
        sem_wait(&done);        /* the other thread's spry_trim has run */
    }
    return real(t, a, f, arg);
}

static void *idle_thread(void *x) {
    (void)x;
    spry_free(spry_malloc(16));  /* a live heap: the hot cache's share shrinks */
    pause();
    return NULL;
}

static void *trimmer(void *x) {
    (void)x;
    sem_wait(&go);
    spry_trim();
    sem_post(&done);
    return NULL;
}

static int threads_now(void) {
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

int main(void) {
    CHECK(sem_init(&go, 0, 0) == 0 && sem_init(&done, 0, 0) == 0);
    /* four live heaps per CPU: the hot cache keeps about 1 MiB (4 MiB
     * shared among the heaps beyond one per CPU), so no 2 MiB block stays
     * there and each free gives its span back */
    cpu_set_t cpus;
    CHECK(sched_getaffinity(0, sizeof cpus, &cpus) == 0);
    int nidle = 4 * CPU_COUNT(&cpus);
    if (nidle > 256) nidle = 256;
    pthread_t tr, idle[256];
    for (int i = 0; i < nidle; i++) CHECK(pthread_create(&idle[i], NULL, idle_thread, NULL) == 0);
    for (int i = 1; i <= 40; i++) spry_malloc((size_t)i * 24);   /* slow paths: bounds refreshed */
    CHECK(pthread_create(&tr, NULL, trimmer, NULL) == 0);
    enum { N = 6 };
    void *b[N];
    for (int i = 0; i < N; i++) CHECK((b[i] = spry_malloc(2000 * 1024)) != NULL);
    /* wait (generously) for the idle purge thread to leave: main, the idle
     * threads and the trimmer remain */
    struct timespec tick = {0, 20 * 1000 * 1000};
    for (int waited = 0; threads_now() > nidle + 2 && waited < 1500; waited++) nanosleep(&tick, NULL);
    CHECKF(threads_now() <= nidle + 2, "the purge thread did not leave in 30 s of idleness (%d threads)",
           threads_now());
    armed = 1;
    for (int i = N - 1; i >= 0; i--) spry_free(b[i]);   /* the last ones alone in their segments */
    if (!hits) {                 /* no purge thread started: let the trimmer go */
        sem_post(&go);
    }
    CHECK(pthread_join(tr, NULL) == 0);
    CHECKF(hits == 1, "the frees did not start the purge thread (%d)", hits);
    spry_stats_t st;
    spry_stats_get(&st);
    CHECK_EQ(st.errors, 0);
    return 0;
}
