/* Bitmaps of chunks (arena.c) and granules (huge.c): words of 64 bits, bit i
 * in word i / 64. The callers hold the lock that guards the map. Runs are a
 * few hundred bits at most, so bit by bit is enough. */
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

/* Set bits among [from, from + n). */
static inline size_t spry_bits_count(const uint64_t *m, size_t from, size_t n) {
    size_t c = 0;
    for (size_t i = from; i < from + n; i++) c += spry_bit_get(m, i);
    return c;
}

#endif
