/* dormant_trim.c: a heap whose thread exits keeps free resident memory for
 * an owner like the one that left, not for the largest of its earlier
 * owners (src/segment.h, spry_heap_trim_dormant).
 *
 * Run with purge ticks far off (SPRY_PURGE_DELAY_MS=3600000), so that only
 * the thread exits return memory:
 *  1. a thread uses 48 MiB of 1 MiB blocks, frees them and exits: its heap
 *     keeps them resident (a successor like it reuses them without page
 *     faults), dirty >= 40 MiB;
 *  2. a thread that takes the same heap (no new heap is made) and uses
 *     1 MiB exits: the heap is held to the budget of that owner (twice its
 *     use, at least the floor of 16 MiB or a CPU's share of it) and trimmed
 *     as a heap over its budget is, to half of it: dirty <= 12 MiB. Before,
 *     the 48 MiB stayed until the next ticks, here an hour; RSS must drop
 *     with it.
 * The blocks' contents are checked. */
#include <spry.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "in_thread.h"
#include "rss.h"

#define MIB ((size_t)1 << 20)
#define BIG_BLOCKS 48

static size_t blocks, block_bytes;

static void *use(void *arg) {
    (void)arg;
    static unsigned char *b[BIG_BLOCKS];
    for (size_t i = 0; i < blocks; i++) {
        b[i] = spry_malloc(block_bytes);
        CHECK(b[i] != NULL);
        CHECK(((uintptr_t)b[i] & 15) == 0);
        memset(b[i], (int)(i + 1), block_bytes);
    }
    for (size_t i = 0; i < blocks; i++) {
        CHECK(b[i][0] == (unsigned char)(i + 1) && b[i][block_bytes - 1] == (unsigned char)(i + 1));
        spry_free(b[i]);
    }
    return NULL;
}

static void run(size_t n, size_t bytes) {
    blocks = n;
    block_bytes = bytes;
    run_in_thread(use, NULL);
}

static spry_stats_t stats(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s;
}

int main(void) {
    CHECK(spry_option_get("SPRY_PURGE_DELAY_MS") >= 3600000);
    spry_free(spry_malloc(64));               /* the main thread's heap first */

    run(BIG_BLOCKS, MIB);
    spry_stats_t big = stats();
    size_t rss_big = rss_bytes();
    printf("dormant_trim: after 48 MiB: dirty %zu MiB, RSS %zu MiB\n", big.dirty / MIB, rss_big / MIB);
    CHECKF(big.dirty >= 40 * MIB, "the heap of a thread that used 48 MiB kept %zu MiB for a successor like it",
           big.dirty / MIB);

    run(16, 64 * 1024);
    spry_stats_t small = stats();
    size_t rss_small = rss_bytes();
    printf("dormant_trim: after 1 MiB: dirty %zu MiB, RSS %zu MiB\n", small.dirty / MIB, rss_small / MIB);
    CHECKF(small.heaps == big.heaps, "the second thread made a heap of its own (%zu -> %zu heaps)", big.heaps,
           small.heaps);
    CHECKF(small.dirty <= 12 * MIB, "a heap whose last owner used 1 MiB kept %zu MiB of free memory",
           small.dirty / MIB);
    CHECKF(rss_small + 32 * MIB <= rss_big, "RSS %zu MiB after the small owner, %zu MiB before", rss_small / MIB,
           rss_big / MIB);
    return 0;
}
