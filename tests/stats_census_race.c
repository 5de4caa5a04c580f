/* stats_census_race.c: the census (spry_stats_print's class rows and the
 * rows past them) accounts for every slice of the heaps' segments even
 * while other threads allocate: each print's spanned bytes, summed over all
 * rows, must be walk.segments x 4 MiB exactly, and the free row's bytes its
 * slices x 64 KiB. A review found prints off by up to 22 slices in either
 * direction: a new span's slices were named under the heap lock but its
 * length set after it, so a walk in between took the length of the
 * descriptor's last use.
 *
 * 4 threads malloc large blocks (256 KiB-1 MiB, some aligned) and class
 * blocks into shared slots, freeing what they displace (often another
 * thread's block); main prints and checks, for 3 s or 400 prints. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "spry.h"
#include "check.h"

#define SLOTS 64
#define THREADS 4
static _Atomic(void *) slots[SLOTS];
static atomic_int stop;

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *churn(void *arg)
{
    uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    while (!atomic_load(&stop)) {
        unsigned k = next(&s) % 100;
        size_t n;
        void *p = NULL;
        if (k < 60) {
            n = (256 << 10) + next(&s) % ((1 << 20) - (256 << 10));
            p = spry_malloc(n);
        } else if (k < 75) {
            n = (64 << 10) + next(&s) % ((1 << 20) - (64 << 10));
            if (spry_posix_memalign(&p, (size_t)(128 << 10) << (next(&s) % 3), n) != 0) p = NULL;
        } else {
            n = 16 + next(&s) % 60000;
            p = spry_malloc(n);
        }
        CHECK(p != NULL);
        ((char *)p)[0] = 1;
        ((char *)p)[n - 1] = 2;
        void *old = atomic_exchange(&slots[next(&s) % SLOTS], p);
        if (old) spry_free(old);
    }
    return NULL;
}

static char text[256 * 1024];

/* The sum of "spanned" over the rows from `from` on, and the free row's. */
static void sums(const char *from, size_t *spanned, size_t *free_slices, size_t *free_spanned)
{
    *spanned = *free_slices = *free_spanned = 0;
    for (const char *s = strstr(from, " spanned "); s; s = strstr(s + 1, " spanned "))
        *spanned += (size_t)strtoull(s + 9, NULL, 10);
    const char *f = strstr(from, "\n  free: slices ");
    if (f) {
        *free_slices = (size_t)strtoull(f + 16, (char **)&f, 10);
        CHECK(strncmp(f, " spanned ", 9) == 0);
        *free_spanned = (size_t)strtoull(f + 9, NULL, 10);
    }
}

int main(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0);
    int fd = memfd_create("census", 0);
    CHECK(fd >= 0);
    time_t end = time(NULL) + 3;
    int prints = 0;
    while (prints < 400 && time(NULL) < end) {
        CHECK(ftruncate(fd, 0) == 0);
        CHECK(lseek(fd, 0, SEEK_SET) == 0);
        spry_stats_print(fd);
        ssize_t len = pread(fd, text, sizeof text - 1, 0);
        CHECK(len > 0);
        text[len] = 0;
        const char *seg = strstr(text, "walk.segments: ");
        const char *rows = strstr(text, "spry size classes (");
        CHECK(seg != NULL && rows != NULL);
        size_t segments = (size_t)strtoull(seg + 15, NULL, 10);
        size_t spanned, free_slices, free_spanned;
        sums(rows, &spanned, &free_slices, &free_spanned);
        CHECKF(spanned == segments << 22, "print %d: the rows span %zu bytes, %zu segments are %zu:\n%s", prints,
               spanned, segments, segments << 22, rows);
        CHECK_EQ(free_spanned, free_slices << 16);
        prints++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    for (int i = 0; i < SLOTS; i++) spry_free(atomic_load(&slots[i]));
    printf("%d prints, each accounting for every slice\n", prints);
    close(fd);
    return 0;
}
