/* A thread that takes fresh memory has the caches of blocked threads
 * collected at once (steal.c, hurried looks), so that what they freed is
 * lent to it; a thread that is running or waiting for a CPU keeps its own.
 *
 * blocked: a holder allocates 32 MiB of 4,000 B blocks, frees them (up to
 * 16 MiB stay in its block cache, pinning most of its pages) and waits on a
 * condition variable. Then the main thread allocates 32 MiB of the same
 * blocks. With the purge delay an hour away (the test's environment) no
 * purge pass collects the holder: its free memory beyond what its pages
 * span was lent, and the rest of the main thread's set was faulted in
 * fresh (33 MiB more resident, measured before hurried looks). Now the
 * holder is collected within the main thread's first few MiB and lends
 * what it freed: a few MiB more resident.
 *
 * running: the same holder spins instead, with no allocator call, while the
 * main thread allocates: no collection (a thread that is runnable comes
 * back to its caches; collecting threads that waited for a CPU cost 8
 * threads on 2 cores churning 64-512 KiB blocks 1.3x the peak RSS).
 *
 * behind: the blocked holder again, its heap behind those of 24 threads
 * that cached 512 KiB each and spin (niced) with no allocator call. A look
 * asks about 8 owners at most; asking from the list's head each time, it
 * found the spinners runnable again and again and never asked about the
 * holder (a review: no collection with 20-32 spinners). */
#include "check.h"
#include "in_child.h"
#include "rss.h"
#include "printed_stats.h"
#include <spry.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SET   ((size_t)32 << 20)
/* sizes over eight classes of 1-4 KiB: a class caches at most 4 MiB, the
 * heap 16 MiB */
#define BLOCK(i) ((size_t)1100 + (size_t)((i) % 8) * 400)
#define COUNT (SET / 2500)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage;                       /* 1: holder freed; 2: main done */
static atomic_int spin_done, spinners_ready;

static void set_stage(int s) {
    CHECK(pthread_mutex_lock(&mu) == 0);
    stage = s;
    CHECK(pthread_cond_broadcast(&cv) == 0);
    CHECK(pthread_mutex_unlock(&mu) == 0);
}

static void wait_stage(int s) {
    CHECK(pthread_mutex_lock(&mu) == 0);
    while (stage < s) CHECK(pthread_cond_wait(&cv, &mu) == 0);
    CHECK(pthread_mutex_unlock(&mu) == 0);
}

/* Block i of a set, written every KiB with `seed`'s pattern. */
static void take_block(unsigned char **p, size_t i, unsigned seed) {
    p[i] = spry_malloc(BLOCK(i));
    CHECK(p[i] != NULL);
    CHECK((uintptr_t)p[i] % 16 == 0);
    for (size_t o = 0; o < BLOCK(i); o += 1024) p[i][o] = (unsigned char)(seed + i + o);
}

/* COUNT blocks (checked when given back). */
static unsigned char **take_set(unsigned seed) {
    unsigned char **p = spry_malloc(COUNT * sizeof *p);
    CHECK(p != NULL);
    for (size_t i = 0; i < COUNT; i++) take_block(p, i, seed);
    return p;
}

static void give_set(unsigned char **p, unsigned seed) {
    for (size_t i = 0; i < COUNT; i++) {
        for (size_t o = 0; o < BLOCK(i); o += 1024)
            CHECKF(p[i][o] == (unsigned char)(seed + i + o), "block %zu damaged", i);
        spry_free(p[i]);
    }
    spry_free(p);
}

static void *blocked_holder(void *arg) {
    (void)arg;
    give_set(take_set(1), 1);
    set_stage(1);
    wait_stage(2);                      /* blocked: asleep in the kernel */
    give_set(take_set(3), 3);           /* its heap works after the collection */
    return NULL;
}

static void *running_holder(void *arg) {
    (void)arg;
    give_set(take_set(1), 1);
    set_stage(1);
    while (!atomic_load(&spin_done)) { }  /* runnable, no allocator call */
    give_set(take_set(3), 3);
    return NULL;
}

/* The main thread's set while the holder waits or spins: the resident
 * growth it caused and the hurried collections made meanwhile. The set is
 * taken a MiB at a time, with a pause of a millisecond between steps until
 * a collection is seen: the purge thread looks when it gets a CPU, and
 * what this test checks is what the heap takes once it has (a loaded
 * machine may make the look come late, not change what it does). */
static void main_set(size_t *grew, size_t *hurried) {
    size_t before = printed_figure("hurried_collections: ");
    size_t base = rss_bytes();
    unsigned char **p = spry_malloc(COUNT * sizeof *p);
    CHECK(p != NULL);
    size_t step = COUNT / 32;
    for (size_t i = 0; i < COUNT; i++) {
        if (i % step == 0 && printed_figure("hurried_collections: ") == before) {
            struct timespec ms = {0, 1000 * 1000};
            nanosleep(&ms, NULL);
        }
        take_block(p, i, 2);
    }
    size_t rss = rss_bytes();
    *grew = rss > base ? rss - base : 0;
    *hurried = printed_figure("hurried_collections: ") - before;
    give_set(p, 2);
}

/* Starts `holder`, waits until it freed its set, then takes the main
 * thread's set beside it (main_set); the holder is left running. */
static pthread_t beside(void *(*holder)(void *), const char *what, size_t *grew, size_t *hurried) {
    pthread_t t;
    spry_free(spry_malloc(16));
    CHECK(pthread_create(&t, NULL, holder, NULL) == 0);
    wait_stage(1);
    main_set(grew, hurried);
    printf("hurried_look: holder %s: %zu collection(s), resident grew by %zu MiB for %zu MiB\n", what,
           *hurried, *grew / MiB, SET / MiB);
    fflush(stdout);
    return t;
}

static void blocked(void) {
    size_t grew, hurried;
    pthread_t t = beside(blocked_holder, "blocked", &grew, &hurried);
    CHECKF(hurried >= 1, "the blocked holder was not collected");
    CHECKF(grew < SET / 2, "%zu MiB more resident: the holder's freed memory was not reused", grew / MiB);
    set_stage(2);
    CHECK(pthread_join(t, NULL) == 0);
}

static void running(void) {
    size_t grew, hurried;
    pthread_t t = beside(running_holder, "running", &grew, &hurried);
    atomic_store(&spin_done, 1);
    CHECK(pthread_join(t, NULL) == 0);
    CHECKF(hurried == 0, "a running holder was collected %zu time(s)", hurried);
}

#define SPINNERS 24

static void *spinner(void *arg) {
    void *p[16];
    for (int i = 0; i < 16; i++) {
        p[i] = spry_malloc(32 << 10);
        CHECK(p[i] != NULL);
        memset(p[i], i, 32 << 10);
    }
    for (int i = 0; i < 16; i++) spry_free(p[i]);
    CHECK(setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) == 0);
    atomic_fetch_add(&spinners_ready, 1);
    volatile unsigned long x = 0;
    while (!atomic_load(&spin_done)) x++;
    return arg;
}

static void behind(void) {
    size_t grew, hurried;
    pthread_t t, s[SPINNERS];
    spry_free(spry_malloc(16));
    CHECK(pthread_create(&t, NULL, blocked_holder, NULL) == 0);
    wait_stage(1);
    for (int i = 0; i < SPINNERS; i++) CHECK(pthread_create(&s[i], NULL, spinner, NULL) == 0);
    while (atomic_load(&spinners_ready) < SPINNERS) sched_yield();
    main_set(&grew, &hurried);
    printf("hurried_look: holder blocked behind %d spinning threads: %zu collection(s), resident grew by %zu MiB "
           "for %zu MiB\n", SPINNERS, hurried, grew / MiB, SET / MiB);
    fflush(stdout);
    atomic_store(&spin_done, 1);
    for (int i = 0; i < SPINNERS; i++) CHECK(pthread_join(s[i], NULL) == 0);
    CHECKF(hurried >= 1, "the blocked holder behind the spinning threads was not collected");
    set_stage(2);
    CHECK(pthread_join(t, NULL) == 0);
}

int main(void) {
    run_in_child(blocked, "hurried_look (blocked)");
    run_in_child(running, "hurried_look (running)");
    run_in_child(behind, "hurried_look (behind)");
    return 0;
}
