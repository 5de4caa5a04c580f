/* The 8-byte blocks' bitmaps (page.h: live, and remote for frees by other
 * threads waiting to be collected), on two cases a review found:
 *  - an 8-byte page on a span one slice longer than asked (the span cache
 *    hands those out): its blocks must stop where the bitmaps end, or block
 *    8,192's bits are block 0's live bit and data, and a correct program's
 *    frees are reported as double frees;
 *  - the remote bits the owner clears when it collects must not lose the
 *    bits other threads set at the same time: with a plain write, freed
 *    blocks stayed "remote-clear" and the heap walk listed them as live
 *    (16 runs of 20), and their second free went unseen.
 * Correct programs: no error may be reported. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *free_one(void *p) {
    spry_free(p);
    return NULL;
}

static void long_span_page(void) {
    enum { BIG = 1000, SMALL = 9000 };
    void **big = malloc(BIG * sizeof *big), **p = malloc(SMALL * sizeof *p);
    CHECK(big && p);
    /* freed 12 KiB pages leave 2-slice spans in the span cache */
    for (int i = 0; i < BIG; i++) CHECK((big[i] = spry_malloc(12288)) != NULL);
    for (int i = 0; i < BIG; i++) spry_free(big[i]);
    for (int i = 0; i < SMALL; i++) {
        CHECK((p[i] = spry_malloc(8)) != NULL);
        memset(p[i], 0, 8);                 /* data that must not be bits */
    }
    size_t before = errors_now();
    for (int i = 8100; i < 8300; i++) {     /* around block 8,192 */
        pthread_t t;
        CHECK(pthread_create(&t, NULL, free_one, p[i]) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    }
    for (int i = 0; i < SMALL; i++)
        if (i < 8100 || i >= 8300) spry_free(p[i]);
    CHECKF(errors_now() == before, "%zu valid frees of 8-byte blocks reported", errors_now() - before);
    free(big);
    free(p);
}

/* ---- one owner, one freer, a ring between them; every 8th block kept */

#define RING 1024
static _Atomic(void *) g_slot[RING];
static atomic_uint g_head, g_tail;
static atomic_int g_done;

static void *freer(void *arg) {
    (void)arg;
    for (;;) {
        unsigned h = atomic_load(&g_head), t = atomic_load_explicit(&g_tail, memory_order_acquire);
        if (h == t) {
            if (atomic_load(&g_done) && h == atomic_load(&g_tail)) return NULL;
            continue;
        }
        void *p = atomic_load_explicit(&g_slot[h % RING], memory_order_relaxed);
        atomic_store_explicit(&g_head, h + 1, memory_order_release);
        spry_free(p);
    }
}

static void **g_kept;
static size_t g_nkept, g_seen, g_extra;

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static bool visit(void *b, size_t size, void *arg) {
    (void)arg;
    if (size != 8) return true;
    g_seen++;
    if (!bsearch(&b, g_kept, g_nkept, sizeof *g_kept, cmp_ptr)) g_extra++;
    return true;
}

static void walk_after_remote_frees(long n) {
    g_kept = malloc((size_t)(n / 8 + 1) * sizeof *g_kept);
    CHECK(g_kept != NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0);
    for (long i = 0; i < n; i++) {
        void *p = spry_malloc(8);
        CHECK(p != NULL);
        if (i % 8 == 0) { g_kept[g_nkept++] = p; continue; }
        for (;;) {
            unsigned tl = atomic_load(&g_tail), h = atomic_load_explicit(&g_head, memory_order_acquire);
            if (tl - h < RING) {
                atomic_store_explicit(&g_slot[tl % RING], p, memory_order_relaxed);
                atomic_store_explicit(&g_tail, tl + 1, memory_order_release);
                break;
            }
        }
    }
    atomic_store(&g_done, 1);
    CHECK(pthread_join(t, NULL) == 0);       /* its outbox is flushed at exit */
    qsort(g_kept, g_nkept, sizeof *g_kept, cmp_ptr);
    size_t before = errors_now();
    spry_heap_walk(visit, NULL);
    CHECKF(g_extra == 0, "the walk listed %zu freed 8-byte blocks as live (%zu seen, %zu kept)", g_extra,
           g_seen, g_nkept);
    CHECK(g_seen >= g_nkept);
    for (size_t i = 0; i < g_nkept; i++) spry_free(g_kept[i]);
    CHECK_EQ(errors_now(), before);
    free(g_kept);
}

int main(void) {
    watchdog_start(120);
    long_span_page();
    walk_after_remote_frees(2000000);
    CHECK_EQ(errors_now(), 0);
    return 0;
}
