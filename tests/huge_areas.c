/* Huge blocks of 2-64 MiB in shared areas (huge.c):
 *  - a block takes its size in 64 KiB granules, not whole 4 MiB chunks;
 *  - a loop of blocks of varying sizes reuses the memory the last ones
 *    left resident: after a first round, a second one of the same sizes
 *    faults in almost none of its pages (issue 8's large-block loop: the
 *    chunk runs purged a reused run's tail at once and the next, bigger
 *    block faulted it back);
 *  - a block takes resident free granules before purged ones that fit it
 *    better;
 *  - realloc shrinks in place and the tail serves another block; grows in
 *    place into free granules, moves with its contents when they are taken;
 *  - a pointer inside a block, or freed twice, is reported and ignored;
 *  - spry_trim gives the free granules back.
 * Run with SPRY_PURGE_DELAY_MS long, so no timed purge lands inside the
 * measured round on a loaded machine. */
#include "check.h"
#include "reports.h"
#include "pattern.h"
#include <spry.h>
#include <stdlib.h>
#include <sys/resource.h>

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static size_t huge_in_use(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s.huge_in_use;
}

static long minor_faults(void) {
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    return ru.ru_minflt;
}

/* Every byte written with the pattern of `seed` (tests/pattern.h), and
 * checked: contents must survive moves and neighbours. */
static void touch(unsigned char *p, size_t n, unsigned seed) { pattern_fill_seed(p, n, seed); }
#define check_touch(p, n, seed) CHECK_PATTERN((p), (n), (seed), "huge block")

static void test_granularity(void) {
    size_t before = huge_in_use();
    void *p = spry_malloc(5 * MiB + 1);
    CHECK(p != NULL);
    CHECK(((uintptr_t)p & 15) == 0);
    size_t took = huge_in_use() - before;
    CHECKF(took >= 5 * MiB + 1 && took <= 5 * MiB + 64 * KiB,
           "a block of 5 MiB + 1 holds %zu KiB of huge memory", took / KiB);
    CHECKF(spry_usable_size(p) == spry_good_size(5 * MiB + 1) && spry_usable_size(p) > 5 * MiB,
           "usable size %zu, good size %zu", spry_usable_size(p), spry_good_size(5 * MiB + 1));
    spry_free(p);
    CHECK(huge_in_use() == before);
}

/* Two live at a time, sizes from 2 to 30 MiB in no order. */
static const size_t loop_mib[] = {3, 11, 5, 17, 7, 13, 2, 29, 9, 23, 4, 19};
#define LOOP_N (sizeof loop_mib / sizeof loop_mib[0])

static size_t loop_round(void) {
    unsigned char *prev = NULL;
    size_t prev_n = 0, pages = 0;
    for (size_t i = 0; i < LOOP_N; i++) {
        size_t n = loop_mib[i] * MiB + 12345;
        unsigned char *p = spry_malloc(n);
        CHECK(p != NULL);
        touch(p, n, (unsigned)i);
        pages += n / 4096;
        if (prev) {
            check_touch(prev, prev_n, (unsigned)i - 1);
            spry_free(prev);
        }
        prev = p;
        prev_n = n;
    }
    check_touch(prev, prev_n, LOOP_N - 1);
    spry_free(prev);
    return pages;
}

static void test_reuse_without_faults(void) {
    loop_round();
    long f0 = minor_faults();
    size_t pages = loop_round();
    long faults = minor_faults() - f0;
    printf("huge_areas: second round faulted %ld of %zu pages\n", faults, pages);
    CHECKF((size_t)faults * 20 < pages,
           "the second round of the same sizes faulted %ld of its %zu pages (want < 5%%)",
           faults, pages);
}

/* A block goes where free granules are still resident, even when a run
 * of clean ones (purged) would fit it exactly: best fit alone took the
 * clean run, and the block faulted in every page while the resident run
 * waited for the purge. The blocks between are huge blocks too, so the
 * clean and the resident granules are two runs. (Under an address-space
 * limit best fit stays: huge.c, area_find.) */
static void test_resident_first(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
        printf("huge_areas: resident first skipped: an address-space limit keeps best fit\n");
        return;
    }
    spry_trim();
    unsigned char *a = spry_malloc(4 * MiB), *b = spry_malloc(3 * MiB);
    unsigned char *c = spry_malloc(12 * MiB), *d = spry_malloc(3 * MiB);
    CHECK(a && b && c && d);
    touch(a, 4 * MiB, 40);
    touch(c, 12 * MiB, 42);
    spry_free(a);
    spry_trim();                          /* a's granules: free and clean */
    spry_free(c);                         /* c's: free and resident */
    long f0 = minor_faults();
    unsigned char *p = spry_malloc(4 * MiB);
    CHECK(p != NULL);
    touch(p, 4 * MiB, 43);
    long faults = minor_faults() - f0;
    size_t pages = 4 * MiB / 4096;
    printf("huge_areas: a block beside a clean exact fit faulted %ld of %zu pages\n", faults, pages);
    CHECKF((size_t)faults * 20 < pages,
           "a 4 MiB block faulted %ld of its %zu pages while 12 MiB of freed granules were "
           "resident (want < 5%%: it took the purged granules)", faults, pages);
    check_touch(p, 4 * MiB, 43);
    spry_free(p);
    spry_free(b);
    spry_free(d);
}

static void test_realloc(void) {
    unsigned char *p = spry_malloc(20 * MiB);
    CHECK(p != NULL);
    touch(p, 20 * MiB, 1);
    size_t before = huge_in_use();
    unsigned char *q = spry_realloc(p, 6 * MiB);
    CHECKF(q == p, "20 -> 6 MiB moved (%p -> %p)", (void *)p, (void *)q);
    CHECKF(before - huge_in_use() >= 13 * MiB, "shrinking 20 -> 6 MiB gave back %zu KiB",
           (before - huge_in_use()) / KiB);
    check_touch(q, 6 * MiB, 1);
    /* the tail is free memory now: another block may take it, not overlap */
    unsigned char *r = spry_malloc(10 * MiB);
    CHECK(r != NULL);
    CHECK(r >= q + spry_usable_size(q) || r + 10 * MiB <= q);
    touch(r, 10 * MiB, 2);
    /* grow: in place if the granules after it are free, else moved */
    unsigned char *s = spry_realloc(q, 12 * MiB);
    CHECK(s != NULL);
    check_touch(s, 6 * MiB, 1);
    check_touch(r, 10 * MiB, 2);
    CHECK(s >= r + 10 * MiB || s + 12 * MiB <= r);
    CHECK(spry_usable_size(s) >= 12 * MiB);
    spry_free(r);
    /* r's granules are free again: s grows over them without moving when
     * they follow it */
    unsigned char *t = spry_realloc(s, 14 * MiB);
    CHECK(t != NULL);
    check_touch(t, 6 * MiB, 1);
    spry_free(t);
}

static void bad_frees(void *arg) {
    unsigned char *p = arg;
    spry_free(p + 64 * KiB);         /* inside, on a granule of its own  */
    spry_free(p + 16);               /* inside its first granule          */
    spry_free(p + 9 * MiB);          /* past its end, in the area         */
    spry_free(p);
    spry_free(p);                    /* twice                             */
}

static void test_bad_frees(void) {
    unsigned char *p = spry_malloc(8 * MiB);
    CHECK(p != NULL);
    touch(p, 8 * MiB, 3);
    size_t e0 = errors_now();
    int n = count_reports(bad_frees, p, "spry:");
    CHECKF(n == 4, "4 bad frees of a huge block, %d reports", n);
    CHECK(errors_now() - e0 == 4);
    /* nothing was freed twice: two blocks now never overlap */
    unsigned char *a = spry_malloc(8 * MiB), *b = spry_malloc(8 * MiB);
    CHECK(a && b && a != b);
    CHECK(a + 8 * MiB <= b || b + 8 * MiB <= a);
    touch(a, 8 * MiB, 4);
    touch(b, 8 * MiB, 5);
    check_touch(a, 8 * MiB, 4);
    spry_free(a);
    spry_free(b);
}

static void test_trim(void) {
    spry_trim();
    spry_stats_t s;
    spry_stats_get(&s);
    CHECKF(s.dirty == 0, "after spry_trim %zu bytes of free memory are still resident", s.dirty);
    CHECK(s.huge_in_use == 0);
}

int main(void) {
    test_granularity();
    test_reuse_without_faults();
    test_resident_first();
    test_realloc();
    test_bad_frees();
    test_trim();
    printf("huge_areas: ok\n");
    return 0;
}
