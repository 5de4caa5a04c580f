/* colour.c: pages of the classes above 1 KiB that are not powers of two
 * start their blocks a few 64-byte lines into their span, a different
 * number of lines from one span to the next (page.c, page_colour).
 *
 *  spread   blocks of 1,536, 5,120 and 40,960 bytes over at least 16 pages:
 *           their addresses take at least 16 distinct offsets in a 4 KiB
 *           page (uncoloured, 8, 4 and 1), and the blocks, sorted, do not
 *           overlap and keep their contents
 *  aligned  aligned_alloc, posix_memalign and memalign, alignments 128 B to
 *           64 KiB, sizes from 1,025 B to 500 KB, 24 blocks each (several
 *           pages): every block aligned, usable size >= the request,
 *           contents intact; the coloured classes must be passed over
 *  stale    a program's second free of a block that began at its span's
 *           start, once a coloured page took the span again: the address
 *           is in the gap before the first block, and is reported, and the
 *           blocks malloc gives next overlap no live one (a review: taken
 *           into the block cache and handed out over block 0) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spry.h"
#include "check.h"
#include "pattern.h"

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static size_t distinct_offsets(void **p, size_t n)
{
    unsigned char seen[4096 / 64] = {0};
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        size_t line = ((uintptr_t)p[i] & 4095) / 64;
        if (!seen[line]) seen[line] = 1, count++;
    }
    return count;
}

static void test_spread(size_t size, size_t blocks)
{
    void **p = malloc(blocks * sizeof *p);
    CHECK(p != NULL);
    for (size_t i = 0; i < blocks; i++) {
        p[i] = spry_malloc(size);
        CHECKF(p[i] != NULL, "malloc(%zu) failed", size);
        CHECKF((uintptr_t)p[i] % 64 == 0, "malloc(%zu) = %p is not 64-byte aligned", size, p[i]);
        pattern_fill(p[i], size);
    }
    size_t d = distinct_offsets(p, blocks);
    CHECKF(d >= 16, "%zu blocks of %zu bytes start at only %zu offsets of a 4 KiB page",
           blocks, size, d);
    qsort(p, blocks, sizeof *p, cmp_ptr);
    for (size_t i = 0; i + 1 < blocks; i++)
        CHECKF((uintptr_t)p[i] + spry_usable_size(p[i]) <= (uintptr_t)p[i + 1],
               "blocks %p and %p of %zu bytes overlap", p[i], p[i + 1], size);
    for (size_t i = 0; i < blocks; i++) {
        CHECK_PATTERN(p[i], size, pattern_seed(p[i], size), "coloured block");
        spry_free(p[i]);
    }
    free(p);
}

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

static void test_aligned(void)
{
    static const size_t sizes[] = {1025, 1100, 1500, 2500, 3000, 5000, 7000, 12000,
                                   20000, 40000, 100000, 300000, 500000};
    enum { EACH = 24 };
    void *live[3 * EACH];
    for (size_t a = 128; a <= 64 * 1024; a *= 2) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t n = sizes[k];
            for (int i = 0; i < EACH; i++) {
                void *q = NULL;
                live[3 * i] = spry_aligned_alloc(opaque(a), opaque(n));
                CHECKF(spry_posix_memalign(&q, opaque(a), opaque(n)) == 0,
                       "posix_memalign(%zu, %zu) failed", a, n);
                live[3 * i + 1] = q;
                live[3 * i + 2] = spry_memalign(opaque(a), opaque(n));
                for (int j = 3 * i; j < 3 * i + 3; j++) {
                    CHECKF(live[j] != NULL, "aligned %zu, %zu: NULL", a, n);
                    CHECKF((uintptr_t)live[j] % a == 0, "aligned %zu, %zu: %p is not aligned",
                           a, n, live[j]);
                    CHECKF(spry_usable_size(live[j]) >= n, "aligned %zu, %zu: %zu usable",
                           a, n, spry_usable_size(live[j]));
                    pattern_fill(live[j], n);
                }
            }
            for (int j = 0; j < 3 * EACH; j++) {
                CHECK_PATTERN(live[j], n, pattern_seed(live[j], n), "aligned block");
                spry_free(live[j]);
            }
        }
    }
}

static void test_stale(void)
{
    enum { OLD = 64, NEW = 96 };
    void *old[OLD], *nw[NEW], *more[NEW];
    const size_t old_size = 131072, size = 40000, bs = 40960;
    void *keep = spry_malloc(100);      /* the segment stays the thread's */
    CHECK(keep != NULL);
    for (int i = 0; i < OLD; i++) {
        old[i] = spry_malloc(old_size);
        CHECK(old[i] != NULL);
    }
    for (int i = 0; i < OLD; i++) spry_free(old[i]);
    spry_trim();
    for (int i = 0; i < NEW; i++) {
        nw[i] = spry_malloc(size);
        CHECK(nw[i] != NULL);
        pattern_fill(nw[i], size);
    }
    size_t tried = 0;
    for (int i = 0; i < OLD; i++) {
        /* outside every live block: in a gap (a span's start), past the
         * blocks of a page, or in memory no page uses */
        int inside = 0;
        for (int j = 0; j < NEW; j++)
            if ((uintptr_t)old[i] >= (uintptr_t)nw[j] && (uintptr_t)old[i] < (uintptr_t)nw[j] + bs)
                inside = 1;
        if (inside) continue;
        spry_stats_t before, after;
        spry_stats_get(&before);
        spry_free(old[i]);
        spry_stats_get(&after);
        CHECKF(after.errors == before.errors + 1, "stale free of %p not reported", old[i]);
        tried++;
    }
    CHECKF(tried > 0, "no old block fell outside the new blocks");
    for (int i = 0; i < NEW; i++) {
        more[i] = spry_malloc(size);
        CHECK(more[i] != NULL);
        pattern_fill(more[i], size);
    }
    for (int i = 0; i < NEW; i++) {
        CHECK_PATTERN(nw[i], size, pattern_seed(nw[i], size), "block live across stale frees");
        CHECK_PATTERN(more[i], size, pattern_seed(more[i], size), "block malloc gave after stale frees");
        spry_free(nw[i]);
        spry_free(more[i]);
    }
    spry_free(keep);
}

int main(void)
{
    test_spread(1536, 43 * 16);       /* 42 a page of one slice */
    test_spread(5000, 13 * 16);       /* class 5,120: 12 a page */
    test_spread(40000, 13 * 16);      /* class 40,960: 12 a page of 8 slices */
    test_aligned();
    test_stale();
    printf("colour: coloured blocks spread and aligned requests aligned\n");
    return 0;
}
