/* realloc's two short moves (alloc.c realloc_to_tiny, realloc_from_tiny):
 * a block of 16 B or more shrunk to 8 bytes or less goes to an 8-byte
 * block, and an 8-byte block grown moves to its class; every kind of page
 * the old block can be on (not full, full, blocks above 1 KiB that go to
 * the block cache; 8-byte pages that empty). All 8 bytes survive, the old
 * block is freed exactly once (a second free or realloc of it is reported),
 * and no block is handed out twice. Last, the program's bug: an 8-byte
 * block another thread freed, realloc'd or freed by its owner while that
 * free waits to be collected (the first version collected it inside the
 * move's malloc, from the inbox of a page that was full or for a trim
 * another thread asked for, and put it on the free list a second time;
 * before the remote bit an owner's free did so at once): reported, and no
 * block handed out twice. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t PATTERN = 0x0123456789abcdefULL;

static void *g_old;

static void free_old(void *arg) {
    (void)arg;
    spry_free(g_old);
}

static void realloc_old(void *arg) {
    (void)arg;
    errno = 0;
    CHECK(spry_realloc(g_old, 100) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* The old block was freed by the move: freeing it again is reported. */
static void check_old_freed(void *old, int freed_8byte) {
    g_old = old;
    size_t before = errors_now();
    if (freed_8byte)
        CHECK(count_reports(realloc_old, NULL, "realloc") == 1);
    else
        CHECK(count_reports(free_old, NULL, "double free") == 1);
    CHECK_EQ(errors_now(), before + 1);
}

static void distinct(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) CHECKF(v[i] != v[j], "block %p handed out twice", (void *)v[i]);
}

/* count blocks of `size` (enough to fill class pages when many), every one
 * shrunk to `to` bytes. The old block's second free is checked at once, on
 * the second one, while the blocks after it keep its page in use (a page
 * that empties is given back, and a free into it is another matter). */
static void shrink_many(size_t size, size_t count, size_t to) {
    char **v = malloc(count * sizeof *v), **w = malloc(count * sizeof *w);
    CHECK(v && w);
    for (size_t i = 0; i < count; i++) {
        CHECK((v[i] = spry_malloc(size)) != NULL);
        uint64_t x = PATTERN + i;
        memcpy(v[i], &x, 8);
        memset(v[i] + 8, 0x5a, size - 8);
    }
    for (size_t i = 0; i < count; i++) {
        w[i] = spry_realloc(v[i], to);
        CHECK(w[i] != NULL);
        CHECKF(spry_usable_size(w[i]) == 8, "%zu B -> %zu B: %zu usable", size, to, spry_usable_size(w[i]));
        uint64_t x;
        memcpy(&x, w[i], 8);
        CHECKF(x == PATTERN + i, "%zu B -> %zu B: bytes lost (%llx)", size, to, (unsigned long long)x);
        if (i == 1) check_old_freed(v[i], 0);
    }
    distinct(w, count);
    /* the old blocks are reusable and do not overlap the new ones */
    for (size_t i = 0; i < count; i++) {
        CHECK((v[i] = spry_malloc(size)) != NULL);
        memset(v[i], 0xa5, size);
    }
    for (size_t i = 0; i < count; i++) {
        uint64_t x;
        memcpy(&x, w[i], 8);
        CHECK(x == PATTERN + i);
        spry_free(v[i]);
        spry_free(w[i]);
    }
    free(v);
    free(w);
}

/* count 8-byte blocks (a page of them and more), each grown to `to`. */
static void grow_many(size_t count, size_t to) {
    char **v = malloc(count * sizeof *v), **w = malloc(count * sizeof *w);
    CHECK(v && w);
    for (size_t i = 0; i < count; i++) {
        CHECK((v[i] = spry_malloc(8)) != NULL);
        uint64_t x = PATTERN ^ i;
        memcpy(v[i], &x, 8);
    }
    /* the first ones come from pages now full: those take the general path;
     * free every other block of the first half so their pages are not */
    for (size_t i = 0; i < count / 2; i += 2) {
        spry_free(v[i]);
        v[i] = NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (!v[i]) { w[i] = NULL; continue; }
        w[i] = spry_realloc(v[i], to);
        CHECK(w[i] != NULL);
        CHECK(spry_usable_size(w[i]) >= to);
        uint64_t x;
        memcpy(&x, w[i], 8);
        CHECKF(x == (PATTERN ^ i), "8 B -> %zu B: bytes lost", to);
        memset(w[i] + 8, 0x33, to - 8);
        if (i == count / 2 + 1) check_old_freed(v[i], 1);
    }
    /* the 8-byte pages emptied: new 8-byte blocks overlap no grown block */
    char **t = malloc(count * sizeof *t);
    CHECK(t != NULL);
    for (size_t i = 0; i < count; i++) {
        CHECK((t[i] = spry_malloc(8)) != NULL);
        memset(t[i], 0x77, 8);
    }
    for (size_t i = 0; i < count; i++) {
        if (!w[i]) continue;
        uint64_t x;
        memcpy(&x, w[i], 8);
        CHECK(x == (PATTERN ^ i));
        CHECK((unsigned char)w[i][to - 1] == 0x33);
    }
    distinct(t, count);
    for (size_t i = 0; i < count; i++) {
        spry_free(t[i]);
        spry_free(w[i]);
    }
    free(t);
    free(v);
    free(w);
}

/* ---- realloc of an 8-byte block another thread freed ---------------- */

static void *g_remote;
static int g_trim;

static void *free_remote_thread(void *arg) {
    (void)arg;
    spry_free(g_remote);
    if (g_trim) spry_trim();            /* asks the owner to collect */
    return NULL;
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void *g_stale;
static size_t g_grow;
static void realloc_stale(void *arg) {
    (void)arg;
    errno = 0;
    if (g_grow == 0) {
        spry_free(g_stale);
        return;
    }
    CHECK(spry_realloc(g_stale, g_grow) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* full: the 8-byte page is filled first, so the remote free goes to the
 * owner's inbox; else another thread's spry_trim is pending. The grow's
 * size class is new to the heap, so a malloc for it takes the slow path;
 * grow 0: the owner frees the block instead. */
static void realloc_after_remote_free(int full, size_t grow) {
    enum { N = 20000 };
    uintptr_t *v = malloc(2 * N * sizeof *v);
    CHECK(v != NULL);
    size_t count = full ? N : 2;
    for (size_t i = 0; i < count; i++) CHECK((v[i] = (uintptr_t)spry_malloc(8)) != 0);
    g_remote = (void *)v[0];
    g_trim = !full;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_remote_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    if (full) spry_free((void *)v[1]);  /* the page not full again, still in the inbox */
    g_stale = (void *)v[0];
    g_grow = grow;
    size_t before = errors_now();
    CHECKF(count_reports(realloc_stale, NULL, grow ? "already freed" : "double free") == 1,
           "%s of an 8-byte block freed by another thread: not reported", grow ? "realloc" : "free");
    CHECK_EQ(errors_now(), before + 1);
    /* the live blocks and N new 8-byte blocks: no address twice */
    size_t k = 0;
    for (size_t i = 2; i < count; i++) v[k++] = v[i];
    if (!full) v[k++] = v[1];
    for (size_t i = 0; i < N; i++) CHECK((v[k++] = (uintptr_t)spry_malloc(8)) != 0);
    qsort(v, k, sizeof *v, cmp_ptr);
    for (size_t i = 1; i < k; i++) CHECKF(v[i] != v[i - 1], "%p handed out twice (grow %zu)", (void *)v[i], grow);
    for (size_t i = 0; i < k; i++) spry_free((void *)v[i]);
    free(v);
}

/* Another thread frees an 8-byte block and then reallocs it (before the
 * owner collected the free, the block's live bit is still set): reported,
 * NULL, EINVAL. */
static void *free_then_realloc_thread(void *arg) {
    (void)arg;
    spry_free(g_remote);
    errno = 0;
    CHECK(spry_realloc(g_remote, 100) == NULL);
    CHECK_EQ(errno, EINVAL);
    return NULL;
}

static void spawn_free_then_realloc(void *arg) {
    (void)arg;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_then_realloc_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

static void remote_realloc_after_free(void) {
    void *keep = spry_malloc(8);
    CHECK((g_remote = spry_malloc(8)) != NULL);
    size_t before = errors_now();
    CHECK(count_reports(spawn_free_then_realloc, NULL, "already freed") == 1);
    CHECK_EQ(errors_now(), before + 1);
    spry_free(keep);
}

int main(void) {
    watchdog_start(120);
    static const size_t sizes[] = {16, 24, 100, 1024, 3000, 20000, 100000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t count = sizes[k] <= 1024 ? 5000 : 200;   /* full pages of the small ones */
        shrink_many(sizes[k], count, 1);
        shrink_many(sizes[k], count, 8);
    }
    static const size_t tos[] = {9, 16, 100, 1024, 1025, 5000, 40000, 300000};
    for (size_t k = 0; k < sizeof tos / sizeof tos[0]; k++) grow_many(tos[k] >= 40000 ? 300 : 20000, tos[k]);
    /* sizes no earlier case used, so the grow's malloc is a class's first */
    realloc_after_remote_free(1, 12000);
    realloc_after_remote_free(0, 7100);
    realloc_after_remote_free(1, 600);
    realloc_after_remote_free(0, 700);
    realloc_after_remote_free(1, 0);
    realloc_after_remote_free(0, 0);
    remote_realloc_after_free();
    return 0;
}
