/* Pages of one class that another thread empties while they were full (a
 * producer's blocks freed by a consumer): the producer keeps at most two
 * empty pages a class for its next blocks, however many came back empty
 * (the head, and the class's spare: queue.c, page_park), gives the others
 * back while it goes on working, and the spares too once a purge tick went
 * by without their use.
 *
 * Each round the main thread allocates blocks of five classes between
 * 1 KiB and 8 KiB (about 120 pages, every one filled), a second thread
 * checks and frees them all, and the main thread's next calls collect what
 * came back. In use afterwards, beyond what a thread's start and end
 * leave: at most three pages a class (64 KiB each), the head, the spare,
 * and one that the block it mallocs and frees there holds (in its block
 * cache); keeping every such page would hold about 8 MB. After the rounds
 * the spares go back within two purge ticks of the owner's slow paths
 * (polled: huge blocks take the slow path every time).
 *
 *   remote_keep            the rounds
 *   remote_keep trimmed    a head that spry_trim unpinned (below)
 *   remote_keep light      spares of an owner that takes no slow path (below) */
#include "check.h"
#include "in_thread.h"
#include "threads.h"
#include "printed_stats.h"
#include <spry.h>
#include <time.h>

#define ROUNDS 20
#define COUNT  400                 /* blocks a class and round */
#define KiB    ((size_t)1024)

static const size_t sizes[] = { 1100, 2000, 3000, 5000, 8000 };
#define CLASSES (sizeof sizes / sizeof sizes[0])

static void *blocks[CLASSES][COUNT];

static void *consume(void *arg) {
    (void)arg;
    for (size_t c = 0; c < CLASSES; c++)
        for (size_t i = 0; i < COUNT; i++) {
            unsigned char *p = blocks[c][i];
            CHECK(p[0] == (unsigned char)(c + i) && p[sizes[c] - 1] == (unsigned char)i);
            spry_free(p);
        }
    return NULL;
}

static void *consume_none(void *arg) {
    void *p = spry_malloc(16);        /* the thread's heap, as consume's */
    CHECK(p != NULL);
    spry_free(p);
    return arg;
}

/* COUNT blocks of each class, stamped */
static void fill_round(void) {
    for (size_t c = 0; c < CLASSES; c++)
        for (size_t i = 0; i < COUNT; i++) {
            unsigned char *p = spry_malloc(sizes[c]);
            CHECK(p != NULL);
            p[0] = (unsigned char)(c + i);
            p[sizes[c] - 1] = (unsigned char)i;
            blocks[c][i] = p;
        }
}

/* the owner's next calls collect what came back, class by class */
static void collect_round(void) {
    for (size_t c = 0; c < CLASSES; c++) {
        void *p = spry_malloc(sizes[c]);
        CHECK(p != NULL);
        spry_free(p);
    }
}

static size_t in_use(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s.in_use;
}

/* After spry_trim, which unpins every head. A head whose blocks were live
 * at the trim, one of them freed by another thread and collected (which
 * clears its NOTIFY: later remote frees wait on its list, not in the
 * inbox), then all the others: the page kept displaces it empty, and being
 * unpinned it was not released by spry_queue_push_front. The first version
 * kept both (a review: 256 KiB here, 192 now). */
static size_t free_from, free_to;

static void *free_range(void *arg) {
    for (size_t i = free_from; i < free_to; i++) spry_free(blocks[0][i]);
    return arg;
}

static void free_remotely(size_t from, size_t to) {
    free_from = from;
    free_to = to;
    run_in_thread(free_range, NULL);
}

static void slow_path(size_t n) {
    void *p = spry_malloc(n);         /* a class with no block yet: the inbox drained */
    CHECK(p != NULL);
    spry_free(p);
}

static void trimmed(size_t start) {
    for (size_t i = 0; i < COUNT; i++) {
        blocks[0][i] = spry_malloc(2000);
        CHECK(blocks[0][i] != NULL);
    }
    spry_trim();
    free_remotely(COUNT - 1, COUNT);  /* the head's last block */
    slow_path(5000);
    free_remotely(0, COUNT - 1);
    slow_path(3000);
    size_t now = in_use(), kept = now > start ? now - start : 0;
    CHECKF(kept <= 4 * 64 * KiB, "after a trim: %zu KiB kept in use after every block came back (at "
           "most 256: a page for each of the three classes, and the spare of the one emptied)",
           kept / KiB);
}

/* Spares go back while their owner keeps working on paths that are
 * neither slow nor idle: a block cache hit every 20 ms (guarded, so the
 * purge thread never finds the heap idle; no slow path, where the owner
 * ages its spares). The purge passes take them then. Before they did, such
 * a thread kept a spare of every class it had emptied for as long as it
 * ran (a review: 12.6 MB over 60 s). One round of the five classes, then
 * in use must drop by the five spares, polled for up to 60 s (one to two
 * purge delays are enough). */
static void touch(void) {
    unsigned char *p = spry_malloc(4000);     /* a class of its own */
    CHECK(p != NULL);
    p[0] = 1;
    p[3999] = 2;
    spry_free(p);
}

static void light(void) {
    touch();
    fill_round();
    run_in_thread(consume, NULL);
    collect_round();
    size_t start = in_use(), now = start;
    double t0 = threads_now_s();
    while (now + CLASSES * 64 * KiB > start && threads_now_s() - t0 < 60) {
        touch();
        threads_sleep_ms(20);
        now = in_use();
    }
    CHECKF(now + CLASSES * 64 * KiB <= start, "spares kept: %zu KiB in use after %.0f s of light "
           "work, %zu KiB before", now / KiB, threads_now_s() - t0, start / KiB);
}

int main(int argc, char **argv) {
    /* what any round leaves besides the classes' pages: this heap's pages
     * of the thread machinery's blocks, the second thread's heap (dormant
     * between rounds, taken again by the next thread) */
    run_in_thread(consume_none, NULL);
    size_t start = in_use(), total = 0;
    if (argc > 1 && strcmp(argv[1], "trimmed") == 0) {
        trimmed(start);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "light") == 0) {
        light();
        return 0;
    }
    for (size_t c = 0; c < CLASSES; c++) total += sizes[c];
    for (int r = 0; r < ROUNDS; r++) {
        fill_round();
        CHECKF(in_use() >= COUNT * total, "round %d: %zu KiB in use with every block live", r,
               in_use() / KiB);
        run_in_thread(consume, NULL);
        collect_round();
        size_t now = in_use(), kept = now > start ? now - start : 0;
        CHECKF(kept <= 3 * CLASSES * 64 * KiB, "round %d: %zu KiB kept in use after every block came "
               "back (at most %zu: a page a class, its spare, and one for the block just freed)", r,
               kept / KiB, 3 * CLASSES * 64);
    }
    /* each round after the first took the spares the one before left */
    size_t taken = printed_figure("walk.spares_taken: ");
    CHECKF(taken >= (ROUNDS - 1) * CLASSES, "spares taken again: %zu in %d rounds of %zu classes",
           taken, ROUNDS, CLASSES);
    /* the spares age out: in use drops by at least a page a class of the
     * five (the spares of the last round), polled for up to 60 s */
    size_t aged_start = in_use(), now = aged_start;
    double t0 = threads_now_s();
    while (now + CLASSES * 64 * KiB > aged_start && threads_now_s() - t0 < 60) {
        for (int i = 0; i < 32; i++) {
            void *p = spry_malloc(4 << 20);
            CHECK(p != NULL);
            spry_free(p);
        }
        threads_sleep_ms(20);
        now = in_use();
    }
    CHECKF(now + CLASSES * 64 * KiB <= aged_start, "spares kept: %zu KiB in use after %.0f s of slow "
           "paths, %zu KiB before", now / KiB, threads_now_s() - t0, aged_start / KiB);
    return 0;
}
