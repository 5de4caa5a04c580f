/* The owner's free or realloc of a pointer into the part of its own class
 * page not carved yet (a page hands out its blocks 4 KiB at a time), or
 * into the gap before its first block, is reported and ignored, not taken
 * (found by reviews hunting misuse):
 *   - a stale pointer: the class's pages went back (spry_trim purges them,
 *     which clears the blocks' free markers) and the class took the same
 *     slice again; a second free of an old block past what the new page has
 *     carved passed the marker check, went on the free list, was handed out,
 *     and carving reached it later and handed it out again;
 *   - a wild pointer at a block start past the carved part, the same way;
 *   - a realloc of either to a size its block holds kept the pointer as a
 *     live block, and the carving later handed it out again;
 *   - a pointer into the colour gap in front of block 0 of a class page
 *     above 1 KiB (page.c, page_colour), in no block: freed, it went into
 *     the block cache and the next malloc returned it over block 0;
 *     realloc'd, it came back as a live block.
 * For blocks of 1 KiB or less (the free fast path) and above (the block
 * cache's path). Each such free must make one report, and every block
 * malloc hands out afterwards must be distinct from the live ones.
 * Run with SPRY_PURGE_THREAD=0: spry_trim alone decides when pages go. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <stdlib.h>
#include <errno.h>
#include <stdbool.h>

#define N 4000

static void *old[N], *live[3 * N];

static void refree(void *p) { spry_free(p); }

static void *realloc_got;
static int realloc_errno;
static void rerealloc(void *p) {
    errno = 0;
    realloc_got = spry_realloc(p, spry_usable_size(live[0]));
    realloc_errno = errno;
}

/* A realloc of w (in no live block of live[0]'s class) to live[0]'s size
 * reports once, fails with EINVAL and keeps nothing. */
static void realloc_refused(void *w, size_t size) {
    size_t e = errors_now();
    int reports = count_reports(rerealloc, w, "spry:");
    CHECKF(reports == 1 && errors_now() == e + 1 && realloc_got == NULL && realloc_errno == EINVAL,
           "a realloc of %p (%zu-byte blocks, the page's first %p) returned %p, errno %d, %d reports",
           w, size, live[0], realloc_got, realloc_errno, reports);
}

/* Every pointer in live[0..n) distinct; sorted copy, no allocation inside
 * spry's heap being checked beyond what the test made. */
static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static void check_distinct(size_t n, size_t size) {
    static void *sorted[3 * N];
    memcpy(sorted, live, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        CHECKF(sorted[i] != sorted[i - 1], "%zu-byte block %p handed out twice", size, sorted[i]);
}

static void stale(size_t size) {
    for (size_t i = 0; i < N; i++) {
        old[i] = spry_malloc(size);
        CHECK(old[i] != NULL);
    }
    for (size_t i = 0; i < N; i++) spry_free(old[i]);
    spry_trim();                         /* the pages go back, purged */
    live[0] = spry_malloc(size);         /* the class takes a page again */
    CHECK(live[0] != NULL);
    size_t n = 1, stale_frees = 0;
    for (size_t i = 0; i < N; i += 97) {
        if (old[i] == live[0]) continue;
        size_t e = errors_now();
        int reports = count_reports(refree, old[i], "spry:");
        CHECKF(reports == 1 && errors_now() == e + 1,
               "a second free of the old %zu-byte block %p (the class's new first block %p) made "
               "%d reports", size, old[i], live[0], reports);
        stale_frees++;
    }
    CHECK(stale_frees > 30);
    for (size_t i = 0; i < N; i++) {
        live[n] = spry_malloc(size);
        CHECK(live[n] != NULL);
        memset(live[n], (int)(n & 0xff), size);
        n++;
    }
    check_distinct(n, size);
    for (size_t i = 1; i < n; i++)
        CHECKF(((unsigned char *)live[i])[size - 1] == (unsigned char)(i & 0xff),
               "%zu-byte block %p overwritten", size, live[i]);
    for (size_t i = 0; i < n; i++) spry_free(live[i]);
}

static void wild(size_t size) {
    spry_trim();                         /* p: the first block of a new page */
    unsigned char *p = spry_malloc(size);
    CHECK(p != NULL);
    /* past the first 4 KiB carved, within the page (64 KiB and more) */
    unsigned char *w = p + size * (8192 / size + 2);
    size_t e = errors_now();
    int reports = count_reports(refree, w, "spry:");
    CHECKF(reports == 1 && errors_now() == e + 1, "a free of %p, %zu-byte blocks past the carved part "
           "of %p's page, made %d reports", (void *)w, (size_t)(w - p) / size, (void *)p, reports);
    live[0] = p;
    realloc_refused(w, size);
    size_t n = 1;
    for (size_t i = 0; i < 200; i++) {
        live[n] = spry_malloc(size);
        CHECK(live[n] != NULL);
        n++;
    }
    check_distinct(n, size);
    for (size_t i = 0; i < n; i++) spry_free(live[i]);
}

/* The colour gap: a class page above 1 KiB whose size is not a power of
 * two starts block 0 a few 64-byte lines into its span (64 KiB aligned),
 * how many depends on the page; false when this one starts at the span. */
static bool gap(size_t size) {
    spry_trim();                         /* p: block 0 of a new page */
    unsigned char *p = spry_malloc(size);
    CHECK(p != NULL);
    size_t colour = (uintptr_t)p & 0xffff;
    if (colour == 0) {
        spry_free(p);
        return false;
    }
    CHECKF(colour >= 64 && colour < 4096, "%zu-byte blocks: block 0 at %p", size, (void *)p);
    memset(p, 0xa5, size);
    live[0] = p;
    for (size_t at = 16; at < colour; at += colour / 3) {
        unsigned char *w = p - colour + (at & ~(size_t)15);
        size_t e = errors_now();
        int reports = count_reports(refree, w, "spry:");
        CHECKF(reports == 1 && errors_now() == e + 1, "a free of %p, %zu bytes before block 0 (%p) of "
               "%zu-byte blocks, made %d reports", (void *)w, (size_t)(p - w), (void *)p, size, reports);
        realloc_refused(w, size);
    }
    size_t n = 1;
    for (size_t i = 0; i < 40; i++) {
        live[n] = spry_malloc(size);
        CHECK(live[n] != NULL);
        memset(live[n], 0x5a, size);
        n++;
    }
    check_distinct(n, size);
    for (size_t i = 1; i < n; i++)
        CHECKF((unsigned char *)live[i] + size <= p || (unsigned char *)live[i] >= p + size,
               "%zu-byte block %p overlaps block 0 %p", size, live[i], (void *)p);
    for (size_t k = 0; k < size; k++)
        CHECKF(p[k] == 0xa5, "%zu-byte block 0 %p written at +%zu", size, (void *)p, k);
    for (size_t i = 0; i < n; i++) spry_free(live[i]);
    return true;
}

int main(void) {
    watchdog_start(120);
    static const size_t sizes[] = { 48, 1000, 2000, 6000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        stale(sizes[i]);
        wild(sizes[i]);
    }
    static const size_t coloured[] = { 1280, 1536, 1792, 2560, 3000, 3584, 5120, 6144, 7168,
                                       10240, 12288, 20480, 100000 };
    size_t gaps = 0;
    for (size_t i = 0; i < sizeof coloured / sizeof coloured[0]; i++) gaps += gap(coloured[i]);
    CHECKF(gaps >= 6, "only %zu of the coloured classes' first pages had a gap", gaps);
    return 0;
}
