/* realloc_shrink.c: seed 000, comment 3. Strings are grown to 20,000 bytes
 * (one byte touched per 4 KiB page), then shrunk to 1 byte, one after the
 * other, in several loops. A shrink to a much smaller size must move the
 * data to a small block so that the big one is reused: the peak RSS must
 * stay near the live bytes (a few MiB), not count * 20,000 bytes
 * (6 GB here). It must also finish in seconds.
 *
 * usage: realloc_shrink COUNT LOOPS
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "spry.h"

#include "check.h"
#include "rss.h"

#define GROWN 20000
#define PEAK_LIMIT (512 * MiB)
#define TIME_LIMIT_S 30.0

int main(int argc, char **argv)
{
    CHECKF(argc >= 3, "usage: %s COUNT LOOPS", argv[0]);
    size_t count = strtoul(argv[1], NULL, 0);
    int loops = atoi(argv[2]);
    CHECK(count > 0 && loops > 0);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char **s = spry_calloc(count, sizeof *s);
    CHECK_NOTNULL(s);
    for (size_t i = 0; i < count; i++) {
        s[i] = spry_malloc(1);
        CHECK_NOTNULL(s[i]);
        s[i][0] = (char)('a' + i % 26);
    }
    for (int loop = 0; loop < loops; loop++) {
        for (size_t i = 0; i < count; i++) {
            char *p = spry_realloc(s[i], GROWN);
            CHECKF(p != NULL, "realloc to %d failed (string %zu, loop %d)",
                   GROWN, i, loop);
            CHECKF(p[0] == (char)('a' + i % 26),
                   "string %zu lost its first byte in realloc (%p)", i,
                   (void *)p);
            for (size_t off = 4096; off < GROWN; off += 4096)
                p[off] = 1;
            p[GROWN - 1] = 2;
            char *q = spry_realloc(p, 1);
            CHECKF(q != NULL, "realloc to 1 failed (string %zu)", i);
            CHECKF(q[0] == (char)('a' + i % 26),
                   "string %zu lost its first byte in shrink (%p)", i,
                   (void *)q);
            CHECKF(spry_usable_size(q) < GROWN / 2,
                   "realloc(20000-byte block, 1) kept %zu usable bytes: the "
                   "shrink does not move to a small block",
                   spry_usable_size(q));
            s[i] = q;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    size_t peak = (size_t)ru.ru_maxrss * 1024;
    double secs = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("realloc_shrink: %zu strings x %d loops grown to %d B and shrunk "
           "to 1 B in %.2f s; peak RSS %zu MiB (would be %zu MiB if shrinks "
           "stayed in place)\n",
           count, loops, GROWN, secs, peak / MiB, count * GROWN / MiB);
    CHECKF(peak < PEAK_LIMIT,
           "peak RSS %zu MiB for ~%zu MiB of live bytes (limit %zu MiB)",
           peak / MiB, count * 16 / MiB + 1, PEAK_LIMIT / MiB);
    CHECKF(secs < TIME_LIMIT_S, "took %.1f s (limit %.0f s)", secs,
           TIME_LIMIT_S);
    for (size_t i = 0; i < count; i++)
        spry_free(s[i]);
    spry_free(s);
    return 0;
}
