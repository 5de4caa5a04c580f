/* fork at the edges (issue 7, case 5):
 *  - pthread_atfork handlers that allocate, registered before spry
 *    initialised (a constructor that runs before spry's) and after it (in
 *    main), in the prepare, parent and child stage, with other threads busy
 *    in the allocator: no deadlock in parent or child;
 *  - the child adopts the heaps of the parent's other threads: they are
 *    dormant there (reused by the child's threads, not orphaned), and the
 *    blocks those threads allocated can be freed in the child and their
 *    memory comes back.
 * A watchdog alarm turns a deadlock into a failure; the child has its own. */
#include "check.h"
#include "reports.h"
#include "alloc_api.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define KEPT    2000           /* blocks each thread leaves live for the child */

static atomic_int stop;
static atomic_int ready;
static char *kept[THREADS][KEPT];
static atomic_int handler_calls;

/* Every size path that takes a lock: class pages (span lock when a page is
 * new), large spans (heap lock), huge blocks (arena lock). */
static void allocate_everywhere(void) {
    static const size_t sizes[] = {24, 3000, 70000, 300000, 5u << 20};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = A_malloc(sizes[i]);
        if (!p) _exit(4);
        memset(p, 0x33, sizes[i] < 64 ? sizes[i] : 64);   /* the 24-byte block: 24 */
        A_free(p);
    }
    atomic_fetch_add(&handler_calls, 1);
}

static void h_prepare(void) { allocate_everywhere(); }
static void h_parent(void)  { allocate_everywhere(); }
static void h_child(void)   { allocate_everywhere(); }

/* Registered before spry's own handlers: this constructor runs before
 * spry's (same priority, this object comes first in the link) and before
 * any malloc. */
__attribute__((constructor(101))) static void register_early(void) {
    pthread_atfork(h_prepare, h_parent, h_child);
}

static void *busy(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < KEPT; i++) {
        kept[id][i] = A_malloc((size_t)(16 + (i * 37) % 5000));
        CHECK(kept[id][i] != NULL);
        memset(kept[id][i], id + 1, 16);
    }
    atomic_fetch_add(&ready, 1);
    unsigned x = (unsigned)id * 2654435761u + 1;
    while (!atomic_load(&stop)) {
        x = x * 1103515245u + 12345u;
        size_t n = (x >> 8) % 3 == 0 ? 200000 + (x % 100000) : 16 + (x >> 12) % 4000;
        char *p = A_malloc(n);
        CHECK(p != NULL);
        p[0] = 1;
        A_free(p);
    }
    return NULL;
}

static void *child_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        char *p = A_malloc((size_t)(i % 3000) + 1);
        CHECK(p != NULL);
        A_free(p);
    }
    return NULL;
}

static void child_body(void) {
    alarm(60);
    spry_stats_t st;
    spry_stats_get(&st);
    /* only the forking thread's heap is live; the others were adopted */
    CHECKF(st.heaps - st.heaps_abandoned == 1, "child: %zu live heaps of %zu (orphaned)",
           st.heaps - st.heaps_abandoned, st.heaps);
    size_t heaps_before = st.heaps;
    /* the parent's other threads' blocks: intact, and freeable here */
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < KEPT; i++) {
            for (int k = 0; k < 16; k++) CHECK(kept[t][i][k] == (char)(t + 1));
            A_free(kept[t][i]);
        }
    /* new threads in the child reuse the adopted heaps */
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, child_thread, NULL) == 0);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    spry_trim();
    spry_stats_get(&st);
    CHECKF(st.heaps == heaps_before, "child: new threads made %zu new heaps", st.heaps - heaps_before);
    /* what the adopted heaps held comes back: no more than a few pages each */
    CHECKF(st.in_use < (size_t)(THREADS + 2) * 8 * 1024 * 1024, "child: %zu bytes still in use", st.in_use);
    _exit(0);
}

int main(void) {
    watchdog_start(240);
    /* registered after spry initialised */
    CHECK(pthread_atfork(h_prepare, h_parent, h_child) == 0);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, busy, (void *)(intptr_t)t) == 0);
    while (atomic_load(&ready) < THREADS) sched_yield();

    for (int round = 0; round < 20; round++) {
        int calls = atomic_load(&handler_calls);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (round == 0) child_body();
            allocate_everywhere();
            _exit(0);
        }
        /* prepare x2 and parent x2 ran in this process */
        CHECKF(atomic_load(&handler_calls) == calls + 4, "handlers ran %d times", atomic_load(&handler_calls) - calls);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child of round %d: status %d", round, st);
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < KEPT; i++) A_free(kept[t][i]);
    printf("fork_handlers: handlers allocated in every stage, child adopted %d heaps\n", THREADS);
    return 0;
}
