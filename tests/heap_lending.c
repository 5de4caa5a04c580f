/* Memory one thread freed serves the next thread's blocks. Four threads,
 * all alive, take turns: each allocates 48 MiB of blocks of one size,
 * writes every page, checks them and frees them, then wakes the next. With
 * the purge delay far away (the test's environment) nothing goes back to
 * the kernel meanwhile, so a heap that took only its own free memory made
 * each turn fault in 48 MiB more: about 4 x 48 MiB resident at the last
 * turn (198 MiB measured). Another heap's free resident slices are now
 * lent (segment.c): 57-83 MiB, under the bound of 2 turns. Sizes: small
 * (2,000 B), medium class pages (40 KB, 150 KB) and one span a block
 * (300 KB); each in a child of its own.
 *
 * Also checks the pages of the heaps that borrowed after their threads
 * left: the next round of threads takes the dormant heaps over (their keys
 * rewritten, borrowed pages included) and frees blocks the first round left
 * live in them.
 *
 * And the statistics of a borrower's pages: a newer thread's blocks of
 * 3,072 B on a page borrowed from an older heap, half of them freed into
 * its block cache. The census walked the heaps' segments newest first and
 * took each heap's cached blocks off the count right after its own
 * segments, before the lender's were walked: all 40 counted in use (a
 * review). Now 20 in use, 20 cached. */
#include "check.h"
#include "in_child.h"
#include "rss.h"
#include "printed_stats.h"
#include <spry.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define THREADS 4
#define SET     ((size_t)48 << 20)

static size_t block_size;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static size_t peak_rss;
/* one block of each thread of the first round, freed by the second */
static unsigned char *kept[THREADS];

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)(seed + i / 4096);
    p[n - 1] = (unsigned char)seed;
}

static int intact(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 4096)
        if (p[i] != (unsigned char)(seed + i / 4096)) return 0;
    return p[n - 1] == (unsigned char)seed;
}

static void *take_turn(void *arg) {
    int me = (int)(intptr_t)arg;
    size_t count = SET / block_size;
    CHECK(pthread_mutex_lock(&mu) == 0);
    while (turn != me) CHECK(pthread_cond_wait(&cv, &mu) == 0);
    CHECK(pthread_mutex_unlock(&mu) == 0);

    unsigned char **p = spry_malloc(count * sizeof *p);
    CHECK(p != NULL);
    for (size_t i = 0; i < count; i++) {
        p[i] = spry_malloc(block_size);
        CHECK(p[i] != NULL);
        CHECK((uintptr_t)p[i] % 16 == 0);
        fill(p[i], block_size, (unsigned)(me * 131 + i));
    }
    size_t rss = rss_bytes();
    for (size_t i = 0; i < count; i++) {
        CHECKF(intact(p[i], block_size, (unsigned)(me * 131 + i)), "thread %d block %zu of %zu B damaged",
               me, i, block_size);
        if (i == 0) kept[me] = p[i];
        else spry_free(p[i]);
    }
    spry_free(p);

    CHECK(pthread_mutex_lock(&mu) == 0);
    if (rss > peak_rss) peak_rss = rss;
    turn++;
    CHECK(pthread_cond_broadcast(&cv) == 0);
    /* alive until every turn is done: no heap goes dormant meanwhile */
    while (turn < THREADS) CHECK(pthread_cond_wait(&cv, &mu) == 0);
    CHECK(pthread_mutex_unlock(&mu) == 0);
    return NULL;
}

/* The second round: dormant heaps taken over, the first round's blocks
 * checked and freed by threads that did not allocate them. */
static void *second_round(void *arg) {
    int me = (int)(intptr_t)arg;
    int from = (me + 1) % THREADS;
    CHECKF(intact(kept[from], block_size, (unsigned)(from * 131)), "kept block of thread %d damaged", from);
    spry_free(kept[from]);
    void *q = spry_malloc(block_size);
    CHECK(q != NULL);
    fill(q, block_size, 7);
    CHECK(intact(q, block_size, 7));
    spry_free(q);
    return NULL;
}

static void turns(void) {
    pthread_t t[THREADS];
    spry_free(spry_malloc(16));
    size_t base = rss_bytes();
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, take_turn, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    size_t grew = peak_rss > base ? peak_rss - base : 0;
    spry_stats_t s;
    spry_stats_get(&s);
    printf("heap_lending: %zu B blocks, %d turns of %zu MiB: resident grew by %zu MiB at most\n",
           block_size, THREADS, SET / MiB, grew / MiB);
    fflush(stdout);
    CHECKF(grew < 2 * SET, "%zu B blocks: %zu MiB resident for turns of %zu MiB (each heap kept its own)",
           block_size, grew / MiB, SET / MiB);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, second_round, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    spry_stats_get(&s);
    CHECKF(s.errors == 0, "%zu errors reported", s.errors);
}

static pthread_barrier_t lent, done;

static void *stats_lender(void *arg) {
    (void)arg;
    enum { N = 64 };
    void *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = spry_malloc(300000);
        CHECK(v[i] != NULL);
        memset(v[i], 1, 300000);
    }
    for (int i = 0; i < N; i++) spry_free(v[i]);
    pthread_barrier_wait(&lent);
    pthread_barrier_wait(&done);
    return NULL;
}

static void *stats_borrower(void *arg) {
    (void)arg;
    void *v[40];
    for (int i = 0; i < 40; i++) {
        v[i] = spry_malloc(3000);
        CHECK(v[i] != NULL);
        memset(v[i], 2, 3000);
    }
    for (int i = 0; i < 20; i++) spry_free(v[i]);      /* into the block cache */
    bool found;
    printed_row_t r = printed_class_row(printed_text(), NULL, 3072, &found);
    CHECK(found);
    size_t borrowed = printed_figure("spans_borrowed: ");
    printf("heap_lending: class 3072 of a borrower: in use %zu B, cached %zu B (%zu spans borrowed)\n",
           r.in_use, r.cached, borrowed);
    fflush(stdout);
    CHECKF(borrowed > 0, "the borrower's page was not borrowed: the check below proves nothing");
    CHECKF(r.in_use == 20 * 3072 && r.cached == 20 * 3072, "in use %zu, cached %zu: want %d each",
           r.in_use, r.cached, 20 * 3072);
    for (int i = 20; i < 40; i++) spry_free(v[i]);
    pthread_barrier_wait(&done);
    return NULL;
}

static void borrower_stats(void) {
    pthread_t l, b;
    CHECK(pthread_barrier_init(&lent, NULL, 2) == 0);
    CHECK(pthread_barrier_init(&done, NULL, 3) == 0);
    CHECK(pthread_create(&l, NULL, stats_lender, NULL) == 0);
    pthread_barrier_wait(&lent);
    CHECK(pthread_create(&b, NULL, stats_borrower, NULL) == 0);
    pthread_barrier_wait(&done);
    CHECK(pthread_join(b, NULL) == 0);
    CHECK(pthread_join(l, NULL) == 0);
}

int main(void) {
    static const size_t sizes[] = {2000, 40000, 150000, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        block_size = sizes[i];
        run_in_child(turns, "heap_lending");
    }
    run_in_child(borrower_stats, "heap_lending (statistics)");
    return 0;
}
