/* A block grown by realloc a few bytes at a time (a string appended to)
 * keeps little more than its own size resident, grows in place once it is
 * past 32 KiB, and stays a block like any other: contents survive every
 * move, its usable size covers the request, it shrinks, another thread can
 * free it, and a second free of it is reported and ignored.
 *
 * Strings built one after another by appends of 8 KiB (a text writer's
 * flushes) take no madvise call each: the span a string leaves is taken
 * again with what it has resident past the next string's first size (24
 * KiB at 40 KB; purged every time, every string cost a call and the page
 * faults after it: 1.6x jemalloc's time at 4 threads on 2 cores).
 *
 * Before the growth moved into a span of its own, every class it passed
 * between 1 KiB and 256 KiB kept one block resident in the block cache: a
 * 200,000-byte string left about 1.8 MB per thread (9 times its size;
 * glibc about 0.2), and moved at every class boundary; from 32 KiB, 1.0
 * MB. Now a few strings at a time (8 a thread) grow in a span from 1 KiB:
 * more kept ones pass the classes, and a freed one makes room again. */
#include "check.h"
#include "rss.h"
#include <spry.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define FINAL ((size_t)200000)
#define STEP 23

static unsigned char byte_at(size_t i, unsigned round) { return (unsigned char)(i * 7 + round); }

/* Grows a string to FINAL bytes by STEP-byte reallocs, checking what it
 * holds; returns it, with the moves made beyond 64 KiB in *moves. */
static unsigned char *grow(unsigned round, unsigned *moves) {
    unsigned char *s = NULL;
    size_t len = 0;
    *moves = 0;
    while (len < FINAL) {
        size_t n = len + STEP;
        unsigned char *t = spry_realloc(s, n);
        CHECK(t != NULL);
        CHECKF(((uintptr_t)t & 15) == 0, "%p not 16-byte aligned", (void *)t);
        CHECKF(spry_usable_size(t) >= n, "usable %zu < %zu", spry_usable_size(t), n);
        if (t != s && len > 64 * KiB) ++*moves;
        /* the copy kept the old bytes: check a few at once (all would be
         * quadratic), the first and last always */
        if (t != s && len) {
            CHECK(t[0] == byte_at(0, round) && t[len - 1] == byte_at(len - 1, round));
            for (size_t i = 0; i < len; i += 4093) CHECK(t[i] == byte_at(i, round));
        }
        for (size_t i = len; i < n; i++) t[i] = byte_at(i, round);
        s = t;
        len = n;
    }
    for (size_t i = 0; i < len; i++) CHECKF(s[i] == byte_at(i, round), "byte %zu lost", i);
    return s;
}

/* A string of n bytes built by appends of 100 bytes. */
static char *append_to(size_t n) {
    char *s = NULL;
    for (size_t len = 0; len < n; len += 100) {
        s = spry_realloc(s, len + 100);
        CHECK(s != NULL);
        memset(s + len, 'x', 100);
    }
    return s;
}

/* Grown blocks that stop growing keep about their own size resident, on
 * memory other blocks left resident too (a review of the first version:
 * 40 KB strings each kept in a 256 KiB span a temporary string had left in
 * the hot cache, or on 64 KiB of a freed block's resident memory: 247 MB
 * and 117 MB resident for 17-33 MB of strings). */
static void kept_strings(void) {
    enum { N = 400 };
    static char *keep[N], *big[N];
    size_t base = rss_bytes();
    for (int i = 0; i < N; i++) {             /* a temporary, then a keeper */
        spry_free(append_to(250000));
        keep[i] = append_to(40000);
    }
    size_t live = (size_t)N * 40000, rss = rss_bytes() - base;
    CHECKF(rss < live + live / 2 + 4 * 1024 * KiB, "%zu KiB resident for %zu KiB of strings",
           rss / KiB, live / KiB);
    for (int i = 0; i < N; i++) spry_free(keep[i]);
    spry_trim();
    base = rss_bytes();
    for (int i = 0; i < N; i++) {             /* resident memory, freed */
        big[i] = spry_malloc(200000);
        CHECK(big[i] != NULL);
        memset(big[i], 1, 200000);
    }
    for (int i = 0; i < N; i++) spry_free(big[i]);
    for (int i = 0; i < N; i++) {
        keep[i] = spry_malloc(20000);
        CHECK(keep[i] != NULL);
        memset(keep[i], 2, 20000);
        keep[i] = spry_realloc(keep[i], 40000);
        CHECK(keep[i] != NULL && keep[i][19999] == 2);
        memset(keep[i], 3, 40000);
    }
    spry_trim();
    rss = rss_bytes() > base ? rss_bytes() - base : 0;
    CHECKF(rss < live + live / 2 + 4 * 1024 * KiB,
           "%zu KiB resident for %zu KiB of strings after spry_trim", rss / KiB, live / KiB);
    for (int i = 0; i < N; i++) spry_free(keep[i]);
}

/* Strings past their move grown a little more each, kept, many: their
 * spans' resident tails stay bounded by the heap's share of 1 MiB (a
 * review of the first version, which forgot a tail once its string grew
 * in place: 1,500 strings of 40 KB kept 1.66x their bytes; 1.06x now). */
static void many_kept_strings(void) {
    enum { N = 1500 };
    static char *keep[N];
    size_t base = rss_bytes();
    for (int i = 0; i < N; i++) {
        spry_free(append_to(250000));
        keep[i] = append_to(40000);
    }
    size_t live = (size_t)N * 40000, rss = rss_bytes() - base;
    CHECKF(rss < live + live / 8 + 4 * 1024 * KiB, "%zu KiB resident for %zu KiB of strings",
           rss / KiB, live / KiB);
    for (int i = 0; i < N; i++) {
        CHECK(keep[i][0] == 'x' && keep[i][39999] == 'x');
        spry_free(keep[i]);
    }
}

/* Moves of a string grown by 100-byte appends from 1 KiB to 30 KB. */
static unsigned small_growth_moves(char **out) {
    char *s = append_to(1100);
    unsigned moves = 0;
    for (size_t len = 1100; len < 30000; len += 100) {
        char *t = spry_realloc(s, len + 100);
        CHECK(t != NULL);
        moves += t != s;
        memset(t + len, 'y', 100);
        s = t;
    }
    CHECK(s[0] == 'x' && s[1099] == 'x' && s[1100] == 'y' && s[29999] == 'y');
    *out = s;
    return moves;
}

static void *free_strings(void *arg) {
    char **s = arg;
    for (int i = 0; i < 8; i++) spry_free(s[i]);
    return NULL;
}

/* The first 8 strings that grow from 1 KiB and stay live grow in place
 * (one span each); the 9th passes the block cache's classes (about 20
 * moves); once one of the 8 is freed, the next grows in place again, and
 * so it does once another thread has freed them all (its frees wait in the
 * owner's inbox: a review, the count stayed at 8 until the owner's next
 * slow path). A shrink to 2,000 B moves out of the span (in place it kept
 * the span's written pages resident: a review). */
static void small_growing_bound(void) {
    enum { N = 8 };
    char *keep[N], *s;
    for (int i = 0; i < N; i++) {
        unsigned m = small_growth_moves(&keep[i]);
        CHECKF(m <= 2, "string %d: %u moves growing from 1 KiB to 30 KB", i, m);
    }
    unsigned m = small_growth_moves(&s);
    CHECKF(m >= 10, "a 9th kept string: %u moves, want the classes' (its own span?)", m);
    spry_free(s);
    spry_free(keep[3]);
    m = small_growth_moves(&keep[3]);
    CHECKF(m <= 2, "after a free: %u moves, want growth in place (count not given back?)", m);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, free_strings, keep) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    m = small_growth_moves(&s);
    CHECKF(m <= 2, "after another thread's frees: %u moves, want growth in place", m);
    char *t = spry_realloc(s, 2000);
    CHECK(t != NULL && t[0] == 'x' && t[1999] == 'y');
    CHECKF(t != s, "a shrink from 30 KB to 2,000 B stayed in its span (usable %zu)", spry_usable_size(t));
    CHECK(spry_usable_size(t) >= 2000 && spry_usable_size(t) < 4 * KiB);
    spry_free(t);
}

/* Small strings grown past 1 KiB and kept, each on a span an earlier,
 * freed string wrote: only one of them keeps the rest of its slice
 * resident (a review: each kept about 60 KiB for its life; here 528 KiB
 * for 8 before, 136 now). */
static void kept_small_tails(void) {
    enum { N = 8 };
    char *keep[N];
    spry_trim();
    size_t base = rss_bytes();
    for (int i = 0; i < N; i++) keep[i] = append_to(60000);    /* N spans, written */
    for (int i = 0; i < N; i++) spry_free(keep[i]);
    for (int i = 0; i < N; i++) keep[i] = append_to(1500);
    size_t rss = rss_bytes() - base;
    CHECKF(rss < 320 * KiB, "%zu KiB resident for %d kept strings of 1,500 B", rss / KiB, N);
    for (int i = 0; i < N; i++) {
        CHECK(keep[i][0] == 'x' && keep[i][1499] == 'x');
        spry_free(keep[i]);
    }
}

static void *free_it(void *p) {
    spry_free(p);
    return NULL;
}

int main(void) {
    unsigned moves;
    size_t base = rss_bytes(), peak = base;
    for (unsigned round = 0; round <= 20; round++) {
        unsigned char *s = grow(round, &moves);
        size_t now = rss_bytes();
        if (now > peak) peak = now;
        spry_free(s);
    }
    /* the string's own 200 KB, a block of each class up to 1 KiB, the heap
     * and its first segment: 424-548 KiB measured (1,060 with the classes
     * up to 32 KiB, 2.7 MiB up to 256 KiB) */
    CHECKF(peak - base < 768 * KiB, "growing a %zu-byte string kept %zu KiB resident", FINAL,
           (peak - base) / KiB);
    /* later rounds grow in the span the first one left: in place */
    CHECKF(moves <= 2, "%u moves beyond 64 KiB in one growth to %zu bytes", moves, FINAL);

    /* shrinks: in place while above 32 KiB, then back to a small block */
    unsigned char *s = grow(3, &moves);
    unsigned char *t = spry_realloc(s, 40 * KiB);
    CHECK(t == s);
    CHECK(spry_usable_size(t) >= 40 * KiB && spry_usable_size(t) < 80 * KiB);
    t = spry_realloc(t, 100);
    CHECK(t != NULL && spry_usable_size(t) < 1 * KiB);
    for (size_t i = 0; i < 100; i++) CHECK(t[i] == byte_at(i, 3));
    spry_free(t);

    /* another thread frees a grown block; the owner goes on growing */
    s = grow(4, &moves);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, free_it, s) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    spry_free(grow(5, &moves));

    /* a second free of a grown block, and a pointer inside one: reported */
    spry_stats_t st0, st1;
    spry_stats_get(&st0);
    s = grow(6, &moves);
    spry_free(s + 64);
    spry_free(s);
    spry_free(s);
    spry_stats_get(&st1);
    CHECK_OP(st1.errors - st0.errors, ==, 2);
    t = grow(7, &moves);                  /* the heap is whole */
    spry_free(t);
    kept_small_tails();
    kept_strings();
    many_kept_strings();
    small_growing_bound();

    /* strings built one after another: no purge each */
    spry_trim();
    spry_stats_get(&st0);
    for (unsigned i = 0; i < 200; i++) {
        char *w = NULL;
        size_t len;
        for (len = 8 * KiB; len <= FINAL; len += 8 * KiB) {
            w = spry_realloc(w, len);
            CHECK(w != NULL);
            memset(w + len - 8 * KiB, (int)i, 8 * KiB);
        }
        CHECK(w[0] == (char)i && w[len - 8 * KiB - 1] == (char)i);
        spry_free(w);
    }
    spry_stats_get(&st1);
    CHECKF(st1.purges - st0.purges < 20, "%zu madvise calls for 200 strings", st1.purges - st0.purges);
    printf("realloc_growth: ok (%zu KiB resident at the peak)\n", (peak - base) / KiB);
    return 0;
}
