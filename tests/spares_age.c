/* Spare pages (queue.c, page_park) go back while their owner keeps working
 * on paths that are neither slow nor idle: a block cache hit every 20 ms
 * (guarded, so the purge thread never finds the heap idle; no slow path,
 * where the owner ages its spares). The purge passes then take them.
 * Before they did, such a thread kept a spare of every class it had
 * emptied for as long as it ran (a review: 12.6 MB of a 60 s run).
 *
 * Blocks of five classes between 1 KiB and 8 KiB fill about 120 pages; a
 * second thread frees them all, and the owner's next mallocs collect them:
 * each class keeps its head and one spare. In use then drops by at least
 * the five spares, polled for up to 60 s (one to two purge delays, 250 ms
 * each by default, are enough). */
#include "check.h"
#include <spry.h>
#include <pthread.h>
#include <time.h>

#define COUNT 400
#define KiB   ((size_t)1024)

static const size_t sizes[] = { 1100, 2000, 3000, 5000, 8000 };
#define CLASSES (sizeof sizes / sizeof sizes[0])

static void *blocks[CLASSES][COUNT];

static void *consume(void *arg) {
    for (size_t c = 0; c < CLASSES; c++)
        for (size_t i = 0; i < COUNT; i++) {
            unsigned char *p = blocks[c][i];
            CHECK(p[0] == (unsigned char)(c + i) && p[sizes[c] - 1] == (unsigned char)i);
            spry_free(p);
        }
    return arg;
}

static size_t in_use(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s.in_use;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* the light work: a block cache hit (4,000 bytes, a class of its own) */
static void touch(void) {
    unsigned char *p = spry_malloc(4000);
    CHECK(p != NULL);
    p[0] = 1;
    p[3999] = 2;
    spry_free(p);
}

int main(void) {
    touch();
    for (size_t c = 0; c < CLASSES; c++)
        for (size_t i = 0; i < COUNT; i++) {
            unsigned char *p = spry_malloc(sizes[c]);
            CHECK(p != NULL);
            p[0] = (unsigned char)(c + i);
            p[sizes[c] - 1] = (unsigned char)i;
            blocks[c][i] = p;
        }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, consume, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* the next mallocs of each class collect what came back: one page of
     * each stays as the head, one as the spare, the others go */
    for (size_t c = 0; c < CLASSES; c++) {
        void *p = spry_malloc(sizes[c]);
        CHECK(p != NULL);
        spry_free(p);
    }
    size_t start = in_use(), now = start;
    double t0 = now_s();
    while (now + CLASSES * 64 * KiB > start && now_s() - t0 < 60) {
        touch();
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        now = in_use();
    }
    CHECKF(now + CLASSES * 64 * KiB <= start, "spares kept: %zu KiB in use after %.0f s of light work, "
           "%zu KiB before", now / KiB, now_s() - t0, start / KiB);
    return 0;
}
