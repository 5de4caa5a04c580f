/* alloc_api.h: the allocation names a stress test calls. By default the
 * prefixed spry_* API; with SPRY_TEST_PLAIN the standard names, so that the
 * same test exercises the interposed entry points (linked with libspry.so).
 * free_sized and good_size have no standard name: spry_* in both builds. */
#ifndef SPRY_TEST_ALLOC_API_H
#define SPRY_TEST_ALLOC_API_H

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "spry.h"

#ifdef SPRY_TEST_PLAIN
#define A_malloc malloc
#define A_calloc calloc
#define A_realloc realloc
#define A_free free
#define A_aligned_alloc aligned_alloc
#define A_usable_size malloc_usable_size
#define A_reallocarray reallocarray
#define A_posix_memalign posix_memalign
#define A_memalign memalign
#define A_valloc valloc
#define A_pvalloc pvalloc
#define A_trim() malloc_trim(0)
#define A_VARIANT "plain names"
#else
#define A_malloc spry_malloc
#define A_calloc spry_calloc
#define A_realloc spry_realloc
#define A_free spry_free
#define A_aligned_alloc spry_aligned_alloc
#define A_usable_size spry_usable_size
#define A_reallocarray spry_reallocarray
#define A_posix_memalign spry_posix_memalign
#define A_memalign spry_memalign
#define A_trim() spry_trim()
#define A_VARIANT "spry_* names"
/* valloc and pvalloc exist only as standard names; these are their
 * definitions in glibc's terms (page alignment; pvalloc rounds the size up
 * to whole pages, 0 to one page). */
static inline void *A_valloc(size_t n)
{
    return spry_memalign(4096, n);
}
static inline void *A_pvalloc(size_t n)
{
    size_t r = (n + 4095) & ~(size_t)4095;
    if (r < n) {
        errno = ENOMEM;
        return NULL;
    }
    return spry_memalign(4096, r ? r : 4096);
}
#endif

/* xorshift64*: each thread's own deterministic stream */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* A random size from 1 B to 4 MiB, weighted toward small:
 * 70% 1-256 B, 20% 257 B-4 KiB, 7% 4-64 KiB, 2.5% 64 KiB-1 MiB,
 * 0.5% 1-4 MiB. */
static inline size_t rng_size(uint64_t *s)
{
    uint64_t r = rng_next(s);
    unsigned band = (unsigned)(r % 1000);
    uint64_t v = r >> 16;
    if (band < 700)
        return 1 + v % 256;
    if (band < 900)
        return 257 + v % (4096 - 256);
    if (band < 970)
        return 4097 + v % (65536 - 4096);
    if (band < 995)
        return 65537 + v % ((1 << 20) - 65536);
    return (1 << 20) + 1 + v % ((size_t)3 << 20);
}

#endif /* SPRY_TEST_ALLOC_API_H */
