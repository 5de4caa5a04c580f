/* The tables of sizeclass.h, built by the compiler: REPn(E, i) lists E(i),
 * E(i + 1), .., E(i + n - 1), each followed by a comma. */
#include "sizeclass.h"

#define REP1(E, i)   E(i),
#define REP2(E, i)   REP1(E, i) REP1(E, (i) + 1)
#define REP4(E, i)   REP2(E, i) REP2(E, (i) + 2)
#define REP8(E, i)   REP4(E, i) REP4(E, (i) + 4)
#define REP16(E, i)  REP8(E, i) REP8(E, (i) + 8)
#define REP32(E, i)  REP16(E, i) REP16(E, (i) + 16)
#define REP64(E, i)  REP32(E, i) REP32(E, (i) + 32)
#define REP128(E, i) REP64(E, i) REP64(E, (i) + 64)
#define REP256(E, i) REP128(E, i) REP128(E, (i) + 128)
#define REP512(E, i) REP256(E, i) REP256(E, (i) + 256)
#define REP1024(E, i) REP512(E, i) REP512(E, (i) + 512)

/* Entry i: the offset in a heap of the block cache of the class of every n
 * with (n - 1) >> 7 == i, i.e. of (i + 1) * 128 (class sizes above 1 KiB are
 * multiples of 128). __builtin_clzl of a constant folds; the formula is
 * spry_class_of's, which tests/sizeclass.c checks against what malloc gives
 * for every size. */
#define MID_LOG(n)   (63u - (unsigned)__builtin_clzl((n) - 1))      /* k in spry_class_of */
#define MID_CLASS(n) ((uint8_t)(9u + (MID_LOG(n) - 7u) * 8u + \
                                ((unsigned)(((n) - 1) >> (MID_LOG(n) - 3u)) - 8u)))
#define MID_ENTRY(i) ((uint16_t)(offsetof(spry_heap_t, bcache) + \
                      MID_CLASS(((size_t)(i) + 1) << 7) * sizeof(spry_block_cache_t)))

const uint16_t spry_bcache_mid[SPRY_PAGED_MAX >> 7] = {
    [0 ... 7] = 0,                                  /* n <= 1 KiB: unused */
    REP8(MID_ENTRY, 8) REP16(MID_ENTRY, 16) REP32(MID_ENTRY, 32) REP64(MID_ENTRY, 64)
    REP128(MID_ENTRY, 128) REP256(MID_ENTRY, 256) REP512(MID_ENTRY, 512) REP1024(MID_ENTRY, 1024)
};

/* Entry i: good size of (i + 1) * 16 KiB in 16 KiB units, for 128 KiB < n
 * <= 2 MiB: the class (8 steps per doubling) up to 512 KiB, whole 64 KiB
 * slices above. */
#define LARGE_UNITS(n) ((uint8_t)(((n) <= SPRY_CLASS_MAX                                   \
    ? ((size_t)(((n) - 1) >> (MID_LOG(n) - 3u)) + 1) << (MID_LOG(n) - 3u)                 \
    : ((n) + SPRY_SLICE_SIZE - 1) & ~(SPRY_SLICE_SIZE - 1)) >> 14))
#define LARGE_ENTRY(i) LARGE_UNITS(((size_t)(i) + 1) << 14)

const uint8_t spry_large_units[SPRY_LARGE_MAX >> 14] = {
    [0 ... 7] = 0,                                  /* n <= 128 KiB: unused */
    REP8(LARGE_ENTRY, 8) REP16(LARGE_ENTRY, 16) REP32(LARGE_ENTRY, 32) REP64(LARGE_ENTRY, 64)
};

/* Entry c: ceil(2^64 / size of class c) (page.h, spry_page_class_block_start);
 * the size formula is spry_class_size's. */
#define CLASS_SIZE(c) ((c) == 0 ? (size_t)8 : (c) <= 8 ? (size_t)(c) << 4 \
                       : (size_t)(9 + ((c) - 9) % 8) << (4 + ((c) - 9) / 8))
#define DIVIDES_ENTRY(c) (UINT64_MAX / CLASS_SIZE(c) + 1)

const uint64_t spry_class_divides[SPRY_CLASS_COUNT] = {
    REP64(DIVIDES_ENTRY, 0) REP32(DIVIDES_ENTRY, 64) REP8(DIVIDES_ENTRY, 96) REP1(DIVIDES_ENTRY, 104)
};
