/* A thread whose first malloc comes in glibc's last round of key destructors
 * (a destructor that set its key again three times): spry's own destructor
 * never runs for that heap, so it stays keyed to the thread's pointer, and
 * glibc gives the pointer to the next thread it creates (the joined
 * thread's stack is reused). That thread's frees of the old blocks pass
 * free's owner test. Before the fix, its frees of blocks above 1 KiB went
 * through the shared empty heap (the heap of every thread that has none
 * yet: its cache bounds were set) when made before its own first malloc,
 * and into its own heap's cache after it (two heaps' pages and counts
 * mixed), and the dead thread's heap stayed live for good. Now a thread
 * whose pointer keys a heap left so takes that heap over, at its first
 * malloc or at such a free.
 *
 * Phases, twice: A mallocs only in its last destructor round (several
 * pages of a class) and exits; B (the same thread pointer, checked, else
 * the test is skipped) frees A's blocks, the first time before any malloc,
 * the second after one, and trims. Then new threads C each malloc blocks
 * of those sizes: all distinct, contents kept. Then B' (the pointer once
 * more) mallocs and frees in a loop of
 * its own, the heap walk finds exactly the blocks still live, and main's
 * heap is the only one left live (the others dormant, for reuse). */
#include "check.h"
#include "alloc_api.h"
#include "pattern.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N       96
#define ROUNDS  4                   /* PTHREAD_DESTRUCTOR_ITERATIONS */
#define CTHREADS 8

static pthread_key_t key;
static void *stash[N];
static size_t stash_n[N];
static void *tp_first;
static __thread int round_no;

static size_t size_of(int i) { return i % 4 == 0 ? 200 : i % 4 == 1 ? 3000 : 40000; }

static void destructor(void *arg) {
    (void)arg;
    if (++round_no < ROUNDS) {
        CHECK_EQ(pthread_setspecific(key, (void *)1), 0);
        return;
    }
    for (int i = 0; i < N; i++) {      /* this thread's first mallocs */
        stash_n[i] = size_of(i);
        stash[i] = A_malloc(stash_n[i]);
        CHECK_NOTNULL(stash[i]);
        pattern_fill(stash[i], stash_n[i]);
    }
}

static void *thread_a(void *arg) {
    (void)arg;
    tp_first = __builtin_thread_pointer();
    CHECK_EQ(pthread_setspecific(key, (void *)1), 0);
    return NULL;
}

static bool malloc_first;

static void *thread_b(void *arg) {
    *(bool *)arg = __builtin_thread_pointer() == tp_first;
    void *own = NULL;
    if (malloc_first) {                 /* a heap of its own first */
        own = A_malloc(40000);
        CHECK_NOTNULL(own);
    }
    for (int i = 0; i < N; i++) {
        CHECK_PATTERN(stash[i], stash_n[i], pattern_seed(stash[i], stash_n[i]), "A's block");
        A_free(stash[i]);
    }
    A_trim();                           /* caches back to the pages */
    A_free(own);
    return NULL;
}

static void *got[CTHREADS][N];

static void *thread_c(void *arg) {
    void **out = arg;
    for (int i = 0; i < N; i++) {
        out[i] = A_malloc(size_of(i));
        CHECK_NOTNULL(out[i]);
        pattern_fill(out[i], size_of(i));
    }
    return NULL;
}

static void *thread_b2(void *arg) {
    *(bool *)arg = __builtin_thread_pointer() == tp_first;
    void *p[64] = { 0 };
    size_t n[64];
    for (int r = 0; r < 20000; r++) {
        int k = r % 64;
        if (p[k]) {
            CHECK_PATTERN(p[k], n[k], pattern_seed(p[k], n[k]), "B2's block");
            A_free(p[k]);
        }
        n[k] = size_of(r / 7);
        p[k] = A_malloc(n[k]);
        CHECK_NOTNULL(p[k]);
        pattern_fill(p[k], n[k]);
    }
    for (int k = 0; k < 64; k++) A_free(p[k]);
    return NULL;
}

static bool count_block(void *block, size_t size, void *arg) {
    (void)block; (void)size;
    ++*(size_t *)arg;
    return true;
}

int main(void) {
    printf("last_round (%s)\n", A_VARIANT);
    CHECK_EQ(pthread_key_create(&key, destructor), 0);
    A_free(A_malloc(16));                  /* main has its heap */
    pthread_t t;
    bool same = false;
    for (int pass = 0; pass < 2; pass++) {
        malloc_first = pass == 1;
        round_no = 0;
        CHECK_EQ(pthread_create(&t, NULL, thread_a, NULL), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
        CHECK_EQ(pthread_create(&t, NULL, thread_b, &same), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
        if (!same) {
            printf("the second thread got another thread pointer: skipped\n");
            return 77;
        }
    }
    for (int c = 0; c < CTHREADS; c++) {
        CHECK_EQ(pthread_create(&t, NULL, thread_c, got[c]), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);
    }
    for (int c = 0; c < CTHREADS; c++)
        for (int i = 0; i < N; i++) {
            CHECK_PATTERN(got[c][i], size_of(i), pattern_seed(got[c][i], size_of(i)), "C's block");
            for (int d = 0; d <= c; d++)
                for (int j = 0; j < (d == c ? i : N); j++)
                    CHECKF(got[c][i] != got[d][j], "block %p handed out twice", got[c][i]);
        }
    CHECK_EQ(pthread_create(&t, NULL, thread_b2, &same), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    size_t live = 0;
    spry_heap_walk(count_block, &live);
    printf("thread pointer reused %s; %d new threads' %d blocks distinct; %zu blocks live\n",
           same ? "twice" : "once", CTHREADS, CTHREADS * N, live);
    CHECK_GE(live, (size_t)CTHREADS * N);
    CHECK_LE(live, (size_t)CTHREADS * N + 16);   /* main's and the runtime's few */
    for (int c = 0; c < CTHREADS; c++)
        for (int i = 0; i < N; i++) A_free(got[c][i]);
    spry_stats_t st;
    spry_stats_get(&st);
    CHECK_EQ(st.errors, 0);
    /* every thread but main has exited: one live heap (before, the dead
     * thread's heap stayed live and keyed, once per pass) */
    printf("no error reported; %zu heaps, %zu of them dormant\n", st.heaps, st.heaps_abandoned);
    CHECK_EQ(st.heaps - st.heaps_abandoned, (size_t)1);
    return 0;
}
