/* pattern.h: fill a block with a pattern derived from its address and size,
 * and check it later (before free, after realloc, after a hand-off between
 * threads). A word at byte offset 8*i holds seed + i * golden; the tail bytes
 * hold the low bytes of the next word's value. */
#ifndef SPRY_TEST_PATTERN_H
#define SPRY_TEST_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define PATTERN_STEP 0x9E3779B97F4A7C15ull

static inline uint64_t pattern_seed(const void *p, size_t n)
{
    uint64_t x = (uint64_t)(uintptr_t)p ^ ((uint64_t)n * 0xD6E8FEB86659FD93ull);
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    return x | 1;
}

static inline void pattern_fill_seed(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = (unsigned char *)p;
    size_t words = n / 8, i;
    uint64_t v = seed;
    for (i = 0; i < words; i++, v += PATTERN_STEP)
        memcpy(b + 8 * i, &v, 8);
    for (i = words * 8; i < n; i++)
        b[i] = (unsigned char)(v >> (8 * (i % 8)));
}

/* Returns the offset of the first byte that differs, or (size_t)-1. */
static inline size_t pattern_find_bad_seed(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t words = n / 8, i;
    uint64_t v = seed, w;
    for (i = 0; i < words; i++, v += PATTERN_STEP) {
        memcpy(&w, b + 8 * i, 8);
        if (w != v) {
            size_t k;
            for (k = 0; k < 8; k++)
                if ((unsigned char)(w >> (8 * k)) != (unsigned char)(v >> (8 * k)))
                    return 8 * i + k;
        }
    }
    for (i = words * 8; i < n; i++)
        if (b[i] != (unsigned char)(v >> (8 * (i % 8))))
            return i;
    return (size_t)-1;
}

static inline unsigned pattern_expected_byte(size_t off, uint64_t seed)
{
    uint64_t v = seed + (uint64_t)(off / 8) * PATTERN_STEP;
    return (unsigned char)(v >> (8 * (off % 8)));
}

static inline void pattern_fill(void *p, size_t n)
{
    pattern_fill_seed(p, n, pattern_seed(p, n));
}

/* CHECK_PATTERN(p, n, seed, what): the n bytes at p still hold the pattern of
 * `seed`; on a mismatch prints the block, the bad address and both bytes. */
#define CHECK_PATTERN(p, n, seed, what)                                       \
    do {                                                                      \
        const unsigned char *cp_p_ = (const unsigned char *)(p);              \
        size_t cp_n_ = (n);                                                   \
        uint64_t cp_seed_ = (seed);                                           \
        size_t cp_off_ = pattern_find_bad_seed(cp_p_, cp_n_, cp_seed_);       \
        if (cp_off_ != (size_t)-1)                                            \
            check_die(__FILE__, __LINE__,                                     \
                      "%s: block %p (%zu bytes) corrupted at offset %zu "     \
                      "(address %p): expected 0x%02x, found 0x%02x",          \
                      (what), (const void *)cp_p_, cp_n_, cp_off_,            \
                      (const void *)(cp_p_ + cp_off_),                        \
                      pattern_expected_byte(cp_off_, cp_seed_),               \
                      cp_p_[cp_off_]);                                        \
    } while (0)

#endif /* SPRY_TEST_PATTERN_H */
