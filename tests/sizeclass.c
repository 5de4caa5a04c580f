/* sizeclass.c: the size classes' waste bound, over every request size from
 * 1 byte to 1 MiB (and sampled beyond):
 * - spry_good_size(n) >= n, monotonic in n;
 * - n <= 128: 8-byte steps at the bottom, every class 8 or a multiple of 16
 *   (16-byte alignment of blocks >= 16 B), waste < 16 bytes;
 * - n > 128: waste (good_size(n) - n) <= n / 8 (12.5%);
 * - what malloc(n) really gets (usable size) is good_size(n);
 * - the block-start test's divisibility table (src/page.h): for every class
 *   and every offset inside a page of 2 MiB, off * m < m exactly when the
 *   class size divides off;
 * - the block cache's table (src/sizeclass.h): for every n above 1 KiB up
 *   to 256 KiB, the offset of heap->bcache[spry_class_of(n)] (malloc's pop
 *   takes the cache there; one class off would hand out a block of another
 *   size whenever that cache held one).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "spry.h"

#include "check.h"
#include "../src/sizeclass.h"

#define LIMIT ((size_t)1 << 20)

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

int main(void)
{
    size_t prev = 0, classes = 0, worst_n = 0;
    double worst = 0;
    for (size_t n = 1; n <= LIMIT; n++) {
        size_t g = spry_good_size(n);
        CHECKF(g >= n, "spry_good_size(%zu) = %zu < n", n, g);
        CHECKF(g >= prev, "spry_good_size not monotonic: good(%zu) = %zu < "
                          "good(%zu) = %zu", n, g, n - 1, prev);
        if (n <= 128) {
            CHECKF(g - n < 16, "spry_good_size(%zu) = %zu wastes %zu >= 16 "
                               "bytes", n, g, g - n);
            CHECKF(g == 8 || g % 16 == 0,
                   "spry_good_size(%zu) = %zu is neither 8 nor a multiple of "
                   "16", n, g);
        } else {
            CHECKF(g - n <= n / 8,
                   "spry_good_size(%zu) = %zu wastes %zu bytes > n/8 = %zu "
                   "(%.2f%%)", n, g, g - n, n / 8, 100.0 * (double)(g - n) / (double)n);
        }
        if (n <= 8)
            CHECKF(g == 8, "spry_good_size(%zu) = %zu, want 8", n, g);
        if (g != prev)
            classes++;
        double w = (double)(g - n) / (double)n;
        if (n > 128 && w > worst)
            worst = w, worst_n = n;
        prev = g;
    }
    /* beyond 1 MiB, sampled up to 1 GiB: still >= n, monotonic, <= 12.5% */
    prev = spry_good_size(LIMIT);
    for (size_t n = LIMIT + 1; n <= ((size_t)1 << 30); n += n / 97 + 4093) {
        size_t g = spry_good_size(n);
        CHECKF(g >= n && g - n <= n / 8,
               "spry_good_size(%zu) = %zu (waste %zu > n/8 %zu)", n, g, g - n,
               n / 8);
        CHECKF(g >= prev, "spry_good_size not monotonic near %zu", n);
        prev = g;
    }
    /* what malloc really gives, for every size up to 64 KiB and a sample
     * above, past the large blocks' 2 MiB (a block freed and one of the next
     * size taken goes through the block cache or the hot large spans, whose
     * sizes come from tables) */
    for (size_t n = 1; n <= 2 * LIMIT + 65536; n += (n < 65536 ? 1 : n < LIMIT ? 61 : 1021)) {
        void *p = spry_malloc(opaque(n));
        CHECKF(p != NULL, "spry_malloc(%zu) failed, errno %d", n, errno);
        CHECKF(spry_usable_size(p) == spry_good_size(n),
               "spry_usable_size(spry_malloc(%zu)) = %zu != spry_good_size = "
               "%zu", n, spry_usable_size(p), spry_good_size(n));
        spry_free(p);
    }
    for (size_t n = SPRY_SMALL_MAX + 1; n <= SPRY_PAGED_MAX; n++) {
        size_t want = offsetof(spry_heap_t, bcache) + spry_class_of(n) * sizeof(spry_block_cache_t);
        CHECKF(spry_bcache_off_mid(n) == want, "spry_bcache_off_mid(%zu) = %zu, want %zu (class %u)", n,
               spry_bcache_off_mid(n), want, spry_class_of(n));
    }
    for (unsigned c = 0; c < SPRY_CLASS_COUNT; c++) {
        uint64_t d = spry_class_divides[c];
        size_t size = spry_class_size(c), next = 0;
        for (size_t off = 0; off < ((size_t)32 << 16); off++) {
            int multiple = off == next;
            if (multiple) next += size;
            CHECKF((off * d < d) == multiple, "class %u (%zu B): offset %zu taken for %s", c, size,
                   off, multiple ? "no block start" : "a block start");
        }
    }
    printf("sizeclass: %zu distinct sizes up to 1 MiB; worst waste above 128 "
           "B: %.2f%% at n = %zu\n", classes, 100 * worst, worst_n);
    return 0;
}
