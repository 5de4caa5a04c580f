/* stats_classes.c: the statistics' table of size classes (spry_stats_print,
 * SPRY_STATS) says where each class's memory is. Run with the purge thread
 * off, so that no purge pass collects between the frees and the census.
 *
 *  main mallocs 400 blocks of 3,000 B (class 3,072) and 100 of 40 B (class
 *  48), writing all of each; frees 100 of the large ones itself; a thread
 *  that never mallocs frees 50 more (pushed on their pages' remote lists),
 *  and a thread that has a heap frees 50 more and waits while main prints
 *  (held in its outbox, or pushed: a review found these counted in use).
 *  The owner collects none: it mallocs nothing after them. Then, from the
 *  printed row of each class:
 *   class 3,072  in use exactly 200 blocks, waiting exactly 100, carved at
 *                least 400, cached at most the 100 the owner freed, in use +
 *                cached + waiting <= carved, spanned = pages x 64 KiB,
 *                in use <= resident <= spanned
 *   class 48     in use exactly 100 blocks, nothing waiting or cached
 *  It also mallocs 5 large blocks of 1 MiB, writes them and frees 3; the
 *  thread that never mallocs frees the fifth (on its page's remote list:
 *  counted in use before a review). The rows past the classes must show
 *  the spans of large blocks with 1 MiB in use and 1 MiB waiting, at least
 *  the 5 MiB written resident in large spans and slices in no page (freed,
 *  not purged: no purge thread), and the segments' headers resident. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spry.h"
#include "check.h"
#include "printed_stats.h"

#define BIG 3000
#define BIG_CLASS 3072
#define SMALL 40
#define SMALL_CLASS 48

static void *big[400], *small[100], *large[5];

static void *remote_free(void *arg)
{
    (void)arg;
    for (int i = 100; i < 150; i++) spry_free(big[i]);
    spry_free(large[4]);
    return NULL;
}

/* with a heap of its own: its remote frees are batched in its outbox */
static pthread_barrier_t freed, printed;
static void *remote_free_batched(void *arg)
{
    (void)arg;
    void *own = spry_malloc(16);
    CHECK(own != NULL);
    for (int i = 150; i < 200; i++) spry_free(big[i]);
    pthread_barrier_wait(&freed);
    pthread_barrier_wait(&printed);
    spry_free(own);
    return NULL;
}

/* The row of the class of `size` bytes in the printed statistics. */
static printed_row_t class_row(const char *text, size_t size)
{
    bool found;
    printed_row_t r = printed_class_row(text, NULL, size, &found);
    CHECKF(found, "no row for the class of %zu B in:\n%s", size, text);
    return r;
}

/* A row past the classes ("large", "free", "headers"): its figures after
 * the name (3, or 5 for large, by `want`), or CHECK fails. */
static void span_row(const char *text, const char *name, const char *count, size_t *v, int want)
{
    char head[48];
    snprintf(head, sizeof head, "\n  %s: %s ", name, count);
    const char *s = strstr(text, head);
    CHECKF(s != NULL, "no row %s in:\n%s", name, text);
    v[3] = v[4] = 0;
    int n = sscanf(s + strlen(head), "%zu spanned %zu resident %zu in_use %zu waiting %zu", &v[0], &v[1], &v[2], &v[3],
                   &v[4]);
    CHECKF(n >= want, "the row %s did not parse (%d fields): %.200s", name, n, s + 1);
}

int main(void)
{
    for (int i = 0; i < 5; i++) {
        large[i] = spry_malloc(1 << 20);
        CHECK(large[i] != NULL);
        memset(large[i], 0x3c, 1 << 20);
    }
    for (int i = 1; i < 4; i++) spry_free(large[i]);
    for (int i = 0; i < 400; i++) {
        big[i] = spry_malloc(BIG);
        CHECK(big[i] != NULL);
        memset(big[i], 0x5a, BIG);
    }
    for (int i = 0; i < 100; i++) {
        small[i] = spry_malloc(SMALL);
        CHECK(small[i] != NULL);
        memset(small[i], 0xa5, SMALL);
    }
    for (int i = 0; i < 100; i++) spry_free(big[i]);
    pthread_t t, tb;
    CHECK(pthread_create(&t, NULL, remote_free, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(pthread_barrier_init(&freed, NULL, 2) == 0);
    CHECK(pthread_barrier_init(&printed, NULL, 2) == 0);
    CHECK(pthread_create(&tb, NULL, remote_free_batched, NULL) == 0);
    pthread_barrier_wait(&freed);

    const char *text = printed_text();
    pthread_barrier_wait(&printed);
    CHECK(pthread_join(tb, NULL) == 0);

    printed_row_t b = class_row(text, BIG_CLASS);
    printf("%d B: pages %zu spanned %zu resident %zu carved %zu in_use %zu cached %zu waiting %zu\n", BIG_CLASS,
           b.pages, b.spanned, b.resident, b.carved, b.in_use, b.cached, b.waiting);
    CHECK_EQ(b.in_use, (size_t)200 * BIG_CLASS);
    CHECK_EQ(b.waiting, (size_t)100 * BIG_CLASS);
    CHECK_GE(b.carved, (size_t)400 * BIG_CLASS);
    CHECK_LE(b.cached, (size_t)100 * BIG_CLASS);
    CHECK_LE(b.in_use + b.cached + b.waiting, b.carved);
    CHECK_GE(b.pages, (size_t)1);
    CHECK_EQ(b.spanned, b.pages * 65536);
    CHECK_LE(b.in_use, b.resident);
    CHECK_LE(b.resident, b.spanned);

    printed_row_t s = class_row(text, SMALL_CLASS);
    CHECK_EQ(s.in_use, (size_t)100 * SMALL_CLASS);
    CHECK_EQ(s.waiting, (size_t)0);
    CHECK_EQ(s.cached, (size_t)0);

    size_t l[5], fr[5], h[5];
    span_row(text, "large", "spans", l, 5);
    span_row(text, "free", "slices", fr, 3);
    span_row(text, "headers", "segments", h, 3);
    printf("large: spans %zu spanned %zu resident %zu in_use %zu waiting %zu; free: slices %zu resident %zu; "
           "headers: segments %zu resident %zu\n", l[0], l[1], l[2], l[3], l[4], fr[0], fr[2], h[0], h[2]);
    CHECK_EQ(l[3], (size_t)1 << 20);
    CHECK_EQ(l[4], (size_t)1 << 20);
    CHECK_GE(l[2], (size_t)2 << 20);
    CHECK_LE(l[2], l[1]);
    CHECK_GE(l[2] + fr[2], (size_t)5 << 20);
    CHECK_EQ(fr[1], fr[0] * 65536);
    CHECK_GE(h[0], (size_t)1);
    CHECK_EQ(h[1], h[0] * 65536);
    CHECK(h[2] > 0);

    spry_free(large[0]);
    for (int i = 200; i < 400; i++) spry_free(big[i]);
    for (int i = 0; i < 100; i++) spry_free(small[i]);
    return 0;
}
