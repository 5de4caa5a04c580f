/* Bitmaps of chunks (arena.c) and granules (huge.c): words of 64 bits, bit i
 * in word i / 64. The callers hold the lock that guards the map. Runs are a
 * few hundred bits at most, so setting and clearing go bit by bit. */
#ifndef SPRY_BITMAP_H
#define SPRY_BITMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

static inline bool spry_bit_get(const uint64_t *m, size_t i) {
    return (m[i >> 6] >> (i & 63)) & 1;
}

static inline void spry_bits_set(uint64_t *m, size_t from, size_t n) {
    for (size_t i = from; i < from + n; i++) m[i >> 6] |= (uint64_t)1 << (i & 63);
}

static inline void spry_bits_clr(uint64_t *m, size_t from, size_t n) {
    for (size_t i = from; i < from + n; i++) m[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

/* Set bits among [from, from + n), a word at a time: huge.c's placement
 * counts them for every free run it looks at. */
static inline size_t spry_bits_count(const uint64_t *m, size_t from, size_t n) {
    size_t c = 0, end = from + n;
    while (from < end) {
        size_t bit = from & 63, take = 64 - bit < end - from ? 64 - bit : end - from;
        uint64_t w = m[from >> 6] >> bit;
        if (take < 64) w &= ((uint64_t)1 << take) - 1;
        c += (size_t)__builtin_popcountll(w);
        from += take;
    }
    return c;
}

#endif
