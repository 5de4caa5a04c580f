/* class_pages.c: a thread that uses one block of each class above 32 KiB
 * (36 KiB to 256 KiB) does not get a page of 7 or more blocks for each.
 *
 * Such pages (2 MiB for one block of 200 KiB) were counted in use whole:
 * the budget of dirty memory a heap may keep is twice that, and new pages
 * take resident slices first, so threads passing a few blocks of many
 * large classes to each other kept several times their blocks resident
 * (src/sizeclass.h, spry_class_page_slices). A class's first page now
 * holds two blocks: the spans in use must stay within 3 times the bytes of
 * the blocks (about 10 times before). The blocks' contents are checked.
 * Then the same classes used heavily (48 blocks each: the small first
 * page, then full ones) must not cost more span bytes than 1.5 times
 * their blocks (1.19 times). Last, a class's second page, the first of
 * its full length (2 MiB for blocks of 200 KiB), comes from resident free
 * slices that hold the first page's length when no free run is that long
 * (src/sizeclass.h, spry_class_page_least): the memory that may be
 * resident must not grow (it grew by the 2 MiB of slices never used
 * before). */
#include <spry.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "in_thread.h"

#define FIRST   17           /* 8 KiB x 2^(k/8), k = 17..40: 36 KiB-256 KiB */
#define CLASSES 40
#define HEAVY   48

static spry_stats_t stats_now(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s;
}

static size_t class_bytes(int k) {
    size_t n = 8192;
    for (int i = 0; i < k / 8; i++) n *= 2;
    return n + n * (size_t)(k % 8) / 8;
}

static void fill(unsigned char *p, size_t n, unsigned char v) {
    p[0] = v;
    p[n / 2] = v;
    p[n - 1] = v;
}

static void check_fill(const unsigned char *p, size_t n, unsigned char v) {
    CHECK(p[0] == v && p[n / 2] == v && p[n - 1] == v);
}

static void *one_each(void *arg) {
    (void)arg;
    static unsigned char *b[CLASSES + 1];
    size_t before = stats_now().in_use, bytes = 0;
    for (int k = FIRST; k <= CLASSES; k++) {
        size_t n = class_bytes(k);
        b[k] = spry_malloc(n);
        CHECK(b[k] != NULL);
        CHECK(((uintptr_t)b[k] & 15) == 0);
        fill(b[k], n, (unsigned char)k);
        bytes += n;
    }
    size_t spans = stats_now().in_use - before;
    for (int k = FIRST; k <= CLASSES; k++) check_fill(b[k], class_bytes(k), (unsigned char)k);
    CHECKF(spans <= 3 * bytes, "one block of each class: %zu KiB of spans for %zu KiB of blocks", spans >> 10,
           bytes >> 10);
    printf("class_pages: one block a class: %zu KiB of spans for %zu KiB of blocks (%.2fx)\n", spans >> 10,
           bytes >> 10, (double)spans / (double)bytes);
    for (int k = FIRST; k <= CLASSES; k++) spry_free(b[k]);
    return NULL;
}

static void *heavy(void *arg) {
    (void)arg;
    static unsigned char *b[CLASSES + 1][HEAVY];
    size_t before = stats_now().in_use, bytes = 0;
    for (int k = FIRST; k <= CLASSES; k++)
        for (int i = 0; i < HEAVY; i++) {
            size_t n = class_bytes(k);
            b[k][i] = spry_malloc(n);
            CHECK(b[k][i] != NULL);
            fill(b[k][i], n, (unsigned char)(k + i));
            bytes += n;
        }
    size_t spans = stats_now().in_use - before;
    for (int k = FIRST; k <= CLASSES; k++)
        for (int i = 0; i < HEAVY; i++) {
            check_fill(b[k][i], class_bytes(k), (unsigned char)(k + i));
            spry_free(b[k][i]);
        }
    CHECKF(spans <= bytes + bytes / 2, "%d blocks of each class: %zu KiB of spans for %zu KiB of blocks", HEAVY,
           spans >> 10, bytes >> 10);
    printf("class_pages: %d blocks a class: %zu KiB of spans for %zu KiB of blocks (%.2fx)\n", HEAVY, spans >> 10,
           bytes >> 10, (double)spans / (double)bytes);
    return NULL;
}

#define SECOND_BLOCK (200 * 1024)   /* first page: 2 blocks, 7 slices */
#define FILLERS      16
#define FILLER_BYTES (640 * 1024)   /* large blocks of 10 slices each */

/* One try: true when no purge ran in between (a loaded machine may let
 * two purge ticks pass; the dirty runs would be gone), from the frees that
 * make the runs to the malloc that should take one. */
static int second_page_try(void) {
    unsigned char *a[3], *f[FILLERS];
    size_t purged = stats_now().purged_total;
    a[0] = spry_malloc(SECOND_BLOCK);
    a[1] = spry_malloc(SECOND_BLOCK);
    CHECK(a[0] != NULL && a[1] != NULL);
    fill(a[0], SECOND_BLOCK, 1);
    fill(a[1], SECOND_BLOCK, 2);
    for (int i = 0; i < FILLERS; i++) {
        f[i] = spry_malloc(FILLER_BYTES);
        CHECK(f[i] != NULL);
        fill(f[i], FILLER_BYTES, (unsigned char)(10 + i));
    }
    /* every other one freed: resident runs of 10 slices between live
     * blocks, more than the hot cache of large spans keeps whole */
    for (int i = 0; i < FILLERS; i += 2) spry_free(f[i]);
    size_t before = stats_now().committed;
    a[2] = spry_malloc(SECOND_BLOCK);
    size_t after = stats_now().committed;
    CHECK(a[2] != NULL);
    fill(a[2], SECOND_BLOCK, 3);
    for (int i = 0; i < 3; i++) check_fill(a[i], SECOND_BLOCK, (unsigned char)(i + 1));
    for (int i = 1; i < FILLERS; i += 2) check_fill(f[i], FILLER_BYTES, (unsigned char)(10 + i));
    int clean = stats_now().purged_total == purged;
    if (clean)
        CHECKF(after <= before + 256 * 1024, "second page: committed %zu -> %zu KiB", before >> 10, after >> 10);
    printf("second_page: committed %zu -> %zu KiB%s\n", before >> 10, after >> 10, clean ? "" : " (purged meanwhile)");
    for (int i = 0; i < 3; i++) spry_free(a[i]);
    for (int i = 1; i < FILLERS; i += 2) spry_free(f[i]);
    return clean;
}

static void *second_page(void *arg) {
    (void)arg;
    for (int tries = 0; tries < 5; tries++) {
        spry_trim();    /* from no resident free slices, each try */
        if (second_page_try()) return NULL;
    }
    CHECKF(0, "second page: a purge ran during each of 5 tries");
    return NULL;
}

/* Each part in a thread of its own: a new heap, with no page of these
 * classes yet (second_page also trims first: no resident free slices). */
int main(void) {
    run_in_thread(one_each, NULL);
    run_in_thread(heavy, NULL);
    run_in_thread(second_page, NULL);
    return 0;
}
