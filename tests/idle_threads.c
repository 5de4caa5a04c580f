/* idle_threads.c: threads that stop calling the allocator give their caches
 * back, and find their heaps whole when they come back.
 *
 * 1. Idle return: WORKERS threads churn blocks of 2 KiB-192 KiB (block-cache
 *    classes and large spans), free everything and then wait on a condition
 *    variable without calling the allocator. RSS must fall to within SLACK
 *    of the baseline taken before they started, polled for up to 30 s (the
 *    purge delay is 250 ms; a heap idle for 4 passes is collected). Before
 *    idle heaps were collected, 8 such
 *    threads kept about 110 MB.
 * 2. Return: the same threads churn again and check every block (a
 *    collection must leave their heaps consistent), then exit.
 * 3. After fork (usage: idle_threads fork): the parent's threads churn and
 *    exit, the parent forks, and the child runs test 1 with the heaps it
 *    inherited (its purge thread must start anew, and the kernel's
 *    barrier must be registered again for the child's address space).
 * 3b. The forking thread's own caches (usage: idle_threads forkown): the
 *    main thread frees 64 blocks of 128-192 KiB into its caches and forks;
 *    the child mallocs and frees such blocks (fast paths only) and then
 *    waits: its RSS must fall by most of what the caches held (it did not:
 *    the child's purge thread was never started).
 * 4. Late (usage: idle_threads late; the registration sets a purge delay of
 *    1 ms): a thread keeps 12 blocks of 300 KiB until the purge thread has
 *    left for want of work, then frees them (into its hot cache) and waits:
 *    the purge thread must come back and collect them (it did not: only a
 *    new span told it).
 * 5. Refused (usage: idle_threads refused): a seccomp filter fails
 *    membarrier (as old kernels and some sandboxes do); two threads go idle
 *    half a second apart: the purge thread must still leave once nothing
 *    is left to do (it did not: heaps whose collection failed were looked
 *    at again and again).
 * 5b. Freed by another thread (usage: idle_threads remote [trim]): the
 *    workers fill their slots (block-cache classes and large spans) and go
 *    idle, alive; the main thread checks and frees every block. What they
 *    held waits in their pages and inboxes, which only the owner used to
 *    collect: 200 MB stayed resident for as long as the workers slept,
 *    after malloc_trim(0) from the main thread too (two reviews). Without
 *    `trim`, main frees only once the idle heaps were collected and the
 *    purge thread has left for want of work (a third review: frees that
 *    came then were never collected, nothing woke the thread, and a heap
 *    collected once was skipped until its owner came back); the purge
 *    thread must come back and return it (polled for 30 s). With `trim`
 *    (registered with a purge delay of an hour, so the purge thread does
 *    nothing in time), main frees at once and one malloc_trim(0) /
 *    spry_trim() must return it before it returns. Then the workers fill
 *    and check their slots again (their heaps must be whole) and exit.
 * 6. Races (usage: idle_threads race SECONDS): threads alternate short
 *    bursts of churn with short waits, so that collections (run with a
 *    purge delay of 1 ms by the test's registration) meet owners coming
 *    back at every point of their paths; every block is checked.
 *
 * usage: idle_threads [fork | forkown | late | refused | remote [trim] |
 *                     remote8k [half] | race SECONDS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_api.h"
#include "check.h"
#include "printed_stats.h"
#include "pattern.h"
#include "refuse_membarrier.h"
#include "rss.h"
#include "threads.h"

#define WORKERS 8
#define SLOTS   128            /* about half of them live at a time */
#define MiB     ((size_t)1 << 20)
#define SLACK   (8 * MiB)
#define STEPS   6000           /* per worker and phase */

struct worker {
    pthread_t thread;
    uint64_t rng;
    void *p[SLOTS];
    size_t n[SLOTS];
};

static struct worker workers[WORKERS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int phase, idle_count;
static atomic_int stop;

static uint64_t next(struct worker *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

/* One malloc or free at a random slot; blocks are checked before free. */
static void step(struct worker *w)
{
    uint64_t r = next(w);
    unsigned k = (unsigned)(r % SLOTS);
    if (w->p[k]) {
        CHECK_PATTERN(w->p[k], w->n[k], pattern_seed(w->p[k], w->n[k]), "churned block");
        A_free(w->p[k]);
        w->p[k] = NULL;
        return;
    }
    /* half the blocks 2-16 KiB, a quarter 16-128 KiB, a quarter 128-192 KiB */
    size_t n;
    switch ((r >> 32) & 3) {
    case 0: case 1: n = 2048 + (r >> 40) % (14 * 1024); break;
    case 2: n = 16384 + (r >> 40) % (112 * 1024); break;
    default: n = 131072 + (r >> 40) % (64 * 1024); break;
    }
    void *p = A_malloc(n);
    CHECK_NOTNULL(p);
    pattern_fill(p, n);
    w->p[k] = p;
    w->n[k] = n;
}

static void free_all(struct worker *w)
{
    for (unsigned k = 0; k < SLOTS; k++) {
        if (!w->p[k]) continue;
        CHECK_PATTERN(w->p[k], w->n[k], pattern_seed(w->p[k], w->n[k]), "block at the end");
        A_free(w->p[k]);
        w->p[k] = NULL;
    }
}

static void wait_phase(int want)
{
    pthread_mutex_lock(&lock);
    idle_count++;
    pthread_cond_broadcast(&cond);
    while (phase < want) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

/* Main's side of the phases: wait until n threads reached wait_phase, and
 * let them go on to phase p. */
static void wait_idle(int n)
{
    pthread_mutex_lock(&lock);
    while (idle_count < n) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void set_phase(int p)
{
    pthread_mutex_lock(&lock);
    phase = p;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

/* Starts n workers running fn, worker i's generator seeded with
 * mult * (i + add). */
static void start_workers(int n, void *(*fn)(void *), uint64_t mult, uint64_t add)
{
    for (int i = 0; i < n; i++) {
        workers[i].rng = mult * ((uint64_t)i + add);
        CHECK_EQ(pthread_create(&workers[i].thread, NULL, fn, &workers[i]), 0);
    }
}

static void join_workers(int n)
{
    for (int i = 0; i < n; i++) CHECK_EQ(pthread_join(workers[i].thread, NULL), 0);
}

static void *idle_worker(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < STEPS; i++) step(w);
    free_all(w);
    wait_phase(1);                      /* idle: no allocator call */
    for (int i = 0; i < STEPS; i++) step(w);
    free_all(w);
    return NULL;
}

/* The idle_collections figure of spry_stats_print (printed only). */
static size_t idle_collections(void)
{
    return printed_figure("idle_collections: ");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_idle_return(void)
{
    size_t base = rss_bytes();
    start_workers(WORKERS, idle_worker, 0x9E3779B97F4A7C15ull, 1);
    wait_idle(WORKERS);
    size_t held = rss_bytes();
    double t0 = now_s(), waited = 0;
    size_t rss = held;
    while (rss > base + SLACK && (waited = now_s() - t0) < 30) {
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        rss = rss_bytes();
    }
    printf("idle return: baseline %zu MiB, all freed %zu MiB, %zu MiB after %.2f s "
           "(%zu collections)\n", base / MiB, held / MiB, rss / MiB, waited, idle_collections());
    CHECKF(rss <= base + SLACK, "idle threads kept %zu MiB over the baseline", (rss - base) / MiB);
    set_phase(1);
    join_workers(WORKERS);
}

static void *race_worker(void *arg)
{
    struct worker *w = arg;
    while (!atomic_load(&stop)) {
        int burst = (int)(next(w) % 600);
        for (int i = 0; i < burst; i++) step(w);
        /* a wait of 0-8 ms: often long enough for the passes (every 1 ms)
         * to find the heap idle four times and collect it */
        struct timespec ts = { 0, (long)(next(w) % 8000000) };
        nanosleep(&ts, NULL);
    }
    free_all(w);
    return NULL;
}

static void test_races(double seconds)
{
    start_workers(WORKERS, race_worker, 0xD6E8FEB86659FD93ull, 7);
    double t0 = now_s();
    while (now_s() - t0 < seconds) {
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, 1);
    join_workers(WORKERS);
    size_t collections = idle_collections();
    printf("races: %.1f s of bursts and waits, %zu collections, every block intact\n",
           seconds, collections);
    /* the races this test is for did happen */
    CHECK_GT(collections, (size_t)10);
}

static void *parent_worker(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < STEPS; i++) step(w);
    free_all(w);
    return NULL;
}

static void test_fork(void)
{
    start_workers(WORKERS, parent_worker, 0x2545F4914F6CDD1Dull, 3);
    join_workers(WORKERS);
    A_trim();              /* the child's baseline: not the parent's peak */
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        test_idle_return();
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child failed (status %d)", status);
    printf("fork: the child's idle threads gave their caches back\n");
}

static void test_fork_own(void)
{
    void *p[64];
    for (int i = 0; i < 64; i++) {
        size_t n = 131072 + (size_t)i * 1024;
        p[i] = A_malloc(n);
        CHECK_NOTNULL(p[i]);
        memset(p[i], 0x3c, n);
    }
    for (int i = 0; i < 64; i++) A_free(p[i]);
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        size_t at_fork = rss_bytes();
        for (int i = 0; i < 1000; i++) {
            void *q = A_malloc(150000);
            CHECK_NOTNULL(q);
            A_free(q);
        }
        double t0 = now_s();
        size_t rss = rss_bytes();
        while (rss + 6 * MiB > at_fork && now_s() - t0 < 30) {
            threads_sleep_ms(20);
            rss = rss_bytes();
        }
        printf("forkown: child %zu MiB at fork, %zu MiB %.2f s later\n", at_fork / MiB, rss / MiB,
               now_s() - t0);
        CHECKF(rss + 6 * MiB <= at_fork, "the child kept the forking thread's caches");
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child failed (status %d)", status);
}

/* A burst of one class freed whole: most of its pages empty, and the
 * class keeps one as its spare (queue.c), which only the owner's slow path
 * or a collecting pass can give back. Such spares kept the purge thread
 * waking for good where the membarrier call is refused. */
static void spare_burst(void)
{
    enum { BURST = 512, SIZE = 20000 };
    static void *p[BURST];
    for (int i = 0; i < BURST; i++) {
        p[i] = A_malloc(SIZE);
        CHECK_NOTNULL(p[i]);
        pattern_fill(p[i], SIZE);
    }
    for (int i = 0; i < BURST; i++) {
        CHECK_PATTERN(p[i], SIZE, pattern_seed(p[i], SIZE), "burst block");
        A_free(p[i]);
    }
}

static void *refused_worker(void *arg)
{
    struct worker *w = arg;
    threads_sleep_ms(w == &workers[0] ? 0 : 520);
    for (int i = 0; i < STEPS / 4; i++) step(w);
    free_all(w);
    if (w == &workers[0]) spare_burst();
    wait_phase(1);
    return NULL;
}

static int only_three(int n) { return n == 3; }

static void test_refused(void)
{
    refuse_membarrier("refused");
    start_workers(2, refused_worker, 0x9E3779B97F4A7C15ull, 11);
    wait_idle(2);
    /* main and the two workers: the purge thread left */
    double took = threads_wait(only_three, 30);
    printf("refused: the purge thread %s (Threads: %d)\n", took >= 0 ? "left" : "stayed", proc_threads());
    CHECKF(took >= 0, "the purge thread stayed though membarrier is refused");
    set_phase(1);
    join_workers(2);
}

/* Fills every slot: the step's size mix, a quarter of them large spans. */
static void fill_all(struct worker *w)
{
    for (unsigned k = 0; k < SLOTS; k++) {
        uint64_t r = next(w);
        size_t n = (r & 3) == 3 ? 262144 + (r >> 40) % (512 * 1024) : 2048 + (r >> 40) % (190 * 1024);
        w->p[k] = A_malloc(n);
        CHECK_NOTNULL(w->p[k]);
        pattern_fill(w->p[k], n);
        w->n[k] = n;
    }
}

static void *remote_worker(void *arg)
{
    struct worker *w = arg;
    fill_all(w);
    wait_phase(1);                      /* idle while main frees its blocks */
    fill_all(w);
    free_all(w);
    return NULL;
}

static int only_main_and_workers(int n) { return n == 1 + WORKERS; }

/* Main freed the idle workers' blocks: RSS must be back within SLACK of
 * the baseline, polled for up to `seconds`; then the workers go on (phase
 * 1) and are joined. */
static void remote_returned(const char *what, size_t base, size_t held, double seconds)
{
    double t0 = now_s(), waited = 0;
    size_t rss = rss_bytes();
    while (rss > base + SLACK && (waited = now_s() - t0) < seconds) {
        threads_sleep_ms(20);
        rss = rss_bytes();
    }
    printf("%s: baseline %zu MiB, %zu MiB live, %zu MiB %.2f s after main freed them\n",
           what, base / MiB, held / MiB, rss / MiB, waited);
    CHECKF(rss <= base + SLACK, "idle owners kept %zu MiB that another thread freed",
           (rss - base) / MiB);
    set_phase(1);
    join_workers(WORKERS);
}

static void test_remote(bool trim)
{
    size_t base = rss_bytes();
    start_workers(WORKERS, remote_worker, 0x9E3779B97F4A7C15ull, 21);
    wait_idle(WORKERS);
    size_t held = rss_bytes();
    if (!trim) {
        /* main and the workers only: the idle heaps were collected (with
         * nothing to give back) and the purge thread left */
        CHECKF(threads_wait(only_main_and_workers, 60) >= 0,
               "the purge thread did not leave (Threads: %d)", proc_threads());
    }
    for (int i = 0; i < WORKERS; i++) {
        for (unsigned k = 0; k < SLOTS; k++) {
            struct worker *w = &workers[i];
            CHECK_PATTERN(w->p[k], w->n[k], pattern_seed(w->p[k], w->n[k]), "block freed by main");
            A_free(w->p[k]);
            w->p[k] = NULL;
        }
    }
    if (trim) A_trim();
    remote_returned(trim ? "remote trim" : "remote", base, held, trim ? 0 : 30);
}

/* 5c. Pages that were not full (usage: idle_threads remote8k [half]): each
 *    worker mallocs PAGE_BLOCKS blocks of 8 KiB, class pages only (no
 *    large block, so nothing may have started the purge thread), with
 *    `half` frees the even ones itself, and waits; once the purge thread
 *    is gone (or never came), main frees the rest. Two reviews: with
 *    `half`, the pages were in their queues, not full, and remote frees
 *    into them waited for the owner (158 MiB kept); without, the heaps had
 *    never been collected, so nothing woke the purge thread (32 MiB). The
 *    memory must come back (polled for 30 s). */
#define PAGE_BLOCKS 4096
static void *page_blocks[WORKERS][PAGE_BLOCKS];
static bool half;

static void *pages_worker(void *arg) {
    void **b = page_blocks[(struct worker *)arg - workers];
    for (int k = 0; k < PAGE_BLOCKS; k++) {
        b[k] = A_malloc(8192);
        CHECK_NOTNULL(b[k]);
        pattern_fill(b[k], 8192);
    }
    for (int k = 0; half && k < PAGE_BLOCKS; k += 2) {
        A_free(b[k]);
        b[k] = NULL;
    }
    wait_phase(1);
    return NULL;
}

static void test_remote_pages(void) {
    size_t base = rss_bytes();
    start_workers(WORKERS, pages_worker, 0, 0);
    wait_idle(WORKERS);
    size_t held = rss_bytes();
    CHECKF(threads_wait(only_main_and_workers, 60) >= 0,
           "the purge thread did not leave (Threads: %d)", proc_threads());
    for (int i = 0; i < WORKERS; i++)
        for (int k = 0; k < PAGE_BLOCKS; k++) {
            void *p = page_blocks[i][k];
            if (!p) continue;
            CHECK_PATTERN(p, 8192, pattern_seed(p, 8192), "block freed by main");
            A_free(p);
        }
    remote_returned(half ? "remote8k half" : "remote8k", base, held, 30);
}

#define LATE_BLOCKS 12
static void *late_blocks[LATE_BLOCKS];

static void *late_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < LATE_BLOCKS; i++) {
        late_blocks[i] = A_malloc(300 * 1024);
        CHECK_NOTNULL(late_blocks[i]);
        pattern_fill(late_blocks[i], 300 * 1024);
    }
    wait_phase(1);
    for (int i = 0; i < LATE_BLOCKS; i++) {
        CHECK_PATTERN(late_blocks[i], 300 * 1024, pattern_seed(late_blocks[i], 300 * 1024), "late block");
        A_free(late_blocks[i]);
    }
    wait_phase(2);                      /* idle, its hot cache full */
    return NULL;
}

static int only_two(int n) { return n == 2; }

static void test_late(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, late_worker, NULL), 0);
    wait_idle(1);
    /* main and the worker only: the purge thread left, nothing to do */
    CHECKF(threads_wait(only_two, 60) >= 0, "the purge thread did not leave (Threads: %d)", proc_threads());
    size_t base = rss_bytes();
    set_phase(1);
    wait_idle(2);
    double t0 = now_s();
    size_t rss = rss_bytes();
    while (rss + 2 * MiB > base && now_s() - t0 < 30) {
        threads_sleep_ms(20);
        rss = rss_bytes();
    }
    printf("late: %zu MiB with the blocks live, %zu MiB %.2f s after their free\n",
           base / MiB, rss / MiB, now_s() - t0);
    CHECKF(rss + 2 * MiB <= base, "the freed blocks stayed resident (%zu of %zu MiB)", rss / MiB, base / MiB);
    set_phase(2);
    CHECK_EQ(pthread_join(t, NULL), 0);
}

int main(int argc, char **argv)
{
    printf("idle_threads (%s)\n", A_VARIANT);
    if (argc >= 3 && strcmp(argv[1], "race") == 0) test_races(atof(argv[2]));
    else if (argc >= 2 && strcmp(argv[1], "fork") == 0) test_fork();
    else if (argc >= 2 && strcmp(argv[1], "late") == 0) test_late();
    else if (argc >= 2 && strcmp(argv[1], "forkown") == 0) test_fork_own();
    else if (argc >= 2 && strcmp(argv[1], "refused") == 0) test_refused();
    else if (argc >= 2 && strcmp(argv[1], "remote") == 0) test_remote(argc >= 3 && strcmp(argv[2], "trim") == 0);
    else if (argc >= 2 && strcmp(argv[1], "remote8k") == 0) {
        half = argc >= 3 && strcmp(argv[2], "half") == 0;
        test_remote_pages();
    }
    else test_idle_return();
    return 0;
}
