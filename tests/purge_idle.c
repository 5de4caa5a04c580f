/* purge_idle.c: freed memory goes back to the kernel.
 *
 * 1. Idle return: allocate about 200 MiB in small, medium and 8 MiB blocks
 *    (all touched), free them all, then sleep without calling the
 *    allocator. Within 1.5 s RSS must be back within 20 MiB of the baseline
 *    taken before (the requirement: an idle program's RSS falls to near its
 *    live bytes within about a second of its last free).
 * 2. spry_trim(): the same again, but trim right after the frees: RSS must
 *    drop at once, with no sleep.
 * RSS is read from /proc/self/statm with open/read only (no allocation).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spry.h"

#include "check.h"
#include "rss.h"

#define SLACK (20 * MiB)

static void *small[400000];
static void *medium[800];
static void *big[12];

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

/* 400,000 x 16..176 B (~40 MiB with class rounding), 800 x 80 KiB
 * (~62 MiB), 12 x 8 MiB (96 MiB): about 200 MiB, every page touched. */
static void allocate_all(void)
{
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        size_t n = 16 + (i % 11) * 16;
        small[i] = spry_malloc(opaque(n));
        CHECK_NOTNULL(small[i]);
        memset(small[i], (int)i, n);
    }
    for (size_t i = 0; i < sizeof medium / sizeof medium[0]; i++) {
        medium[i] = spry_malloc(opaque(80 << 10));
        CHECK_NOTNULL(medium[i]);
        memset(medium[i], (int)i, 80 << 10);
    }
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        big[i] = spry_malloc(opaque((size_t)8 << 20));
        CHECK_NOTNULL(big[i]);
        memset(big[i], (int)i, (size_t)8 << 20);
    }
}

static void free_all(void)
{
    /* freed in an interleaved order, as a real program would */
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i += 2)
        spry_free(small[i]);
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        spry_free(big[i]);
    for (size_t i = 1; i < sizeof small / sizeof small[0]; i += 2)
        spry_free(small[i]);
    for (size_t i = 0; i < sizeof medium / sizeof medium[0]; i++)
        spry_free(medium[i]);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
    double d = t - now_s();
    if (d <= 0)
        return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

int main(void)
{
    /* spry is initialised and this thread has a heap before the baseline */
    void *warm = spry_malloc(opaque(64));
    CHECK_NOTNULL(warm);
    spry_free(warm);
    spry_trim();
    size_t base = rss_bytes();

    /* 1. idle return, no allocator call after the last free */
    allocate_all();
    size_t peak = rss_bytes();
    CHECKF(peak >= base + 150 * MiB,
           "RSS only grew from %zu to %zu MiB with ~200 MiB allocated",
           base / MiB, peak / MiB);
    free_all();
    double t_free = now_s();
    size_t at_free = rss_bytes();
    size_t seen[6];
    static const double when[6] = {0.5, 1.0, 1.5, 2.0, 3.0, 5.0};
    for (int k = 0; k < 6; k++) {
        sleep_until(t_free + when[k]);
        seen[k] = rss_bytes();
        if (k == 2 && seen[k] <= base + SLACK)
            break;
    }
    printf("purge_idle: baseline %zu MiB, peak %zu MiB, right after free %zu "
           "MiB, after 0.5 s %zu MiB, 1.0 s %zu MiB, 1.5 s %zu MiB\n",
           base / MiB, peak / MiB, at_free / MiB, seen[0] / MiB, seen[1] / MiB,
           seen[2] / MiB);
    if (seen[2] > base + SLACK) {
        fprintf(stderr,
                "purge_idle: FAILED: 1.5 s after the last free (no allocator "
                "call since) RSS is %zu MiB, baseline %zu MiB (limit +%zu "
                "MiB); later: 2 s %zu MiB, 3 s %zu MiB, 5 s %zu MiB\n",
                seen[2] / MiB, base / MiB, SLACK / MiB, seen[3] / MiB,
                seen[4] / MiB, seen[5] / MiB);
        return 1;
    }

    /* 2. spry_trim() makes RSS drop at once */
    allocate_all();
    size_t peak2 = rss_bytes();
    CHECK(peak2 >= base + 150 * MiB);
    free_all();
    spry_trim();
    size_t after_trim = rss_bytes();
    printf("purge_idle: second round peak %zu MiB, right after spry_trim() "
           "%zu MiB\n", peak2 / MiB, after_trim / MiB);
    CHECKF(after_trim <= base + SLACK,
           "right after spry_trim() RSS is %zu MiB, baseline %zu MiB (limit "
           "+%zu MiB)", after_trim / MiB, base / MiB, SLACK / MiB);

    spry_stats_t st;
    spry_stats_get(&st);
    CHECKF(st.purged_total >= 150 * MiB,
           "stats.purged_total = %zu MiB after returning ~400 MiB",
           st.purged_total / MiB);
    /* amortised: far fewer madvise calls than frees (2 x ~401k) */
    CHECKF(st.purges > 0 && st.purges < 200000,
           "stats.purges = %zu madvise calls for 2 x 401k frees (want "
           "amortised purging, not one syscall per free)", st.purges);
    printf("purge_idle: %zu MiB purged in %zu madvise calls; all checks "
           "passed\n", st.purged_total / MiB, st.purges);
    return 0;
}
