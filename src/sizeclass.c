/* The tables of sizeclass.h, built by the compiler. */
#include "sizeclass.h"

/* Entry i: the class of every n with (n - 1) >> 7 == i, i.e. of (i + 1) * 128
 * (class sizes above 1 KiB are multiples of 128). __builtin_clzl of a
 * constant folds, so the table is built by the compiler. */
#define MID_LOG(n)   (63u - (unsigned)__builtin_clzl((n) - 1))      /* k in spry_class_of */
#define MID_CLASS(n) ((uint8_t)(9u + (MID_LOG(n) - 7u) * 8u + \
                                ((unsigned)(((n) - 1) >> (MID_LOG(n) - 3u)) - 8u)))
#define M1(i)   MID_CLASS(((size_t)(i) + 1) << 7),
#define M2(i)   M1(i) M1((i) + 1)
#define M4(i)   M2(i) M2((i) + 2)
#define M8(i)   M4(i) M4((i) + 4)
#define M16(i)  M8(i) M8((i) + 8)
#define M32(i)  M16(i) M16((i) + 16)
#define M64(i)  M32(i) M32((i) + 32)
#define M128(i) M64(i) M64((i) + 64)
#define M256(i) M128(i) M128((i) + 128)
#define M512(i) M256(i) M256((i) + 256)

const uint8_t spry_class_mid[SPRY_PAGED_MAX >> 7] = {
    [0 ... 7] = 0,                                  /* n <= 1 KiB: unused */
    M8(8) M16(16) M32(32) M64(64) M128(128) M256(256) M512(512)
};

/* Entry i: good size of (i + 1) * 16 KiB in 16 KiB units, for 128 KiB < n
 * <= 2 MiB: the class (8 steps per doubling) up to 512 KiB, whole 64 KiB
 * slices above. */
#define LARGE_UNITS(n) ((uint8_t)(((n) <= SPRY_CLASS_MAX                                   \
    ? ((size_t)(((n) - 1) >> (MID_LOG(n) - 3u)) + 1) << (MID_LOG(n) - 3u)                 \
    : ((n) + SPRY_SLICE_SIZE - 1) & ~(SPRY_SLICE_SIZE - 1)) >> 14))
#define L1(i)   LARGE_UNITS(((size_t)(i) + 1) << 14),
#define L2(i)   L1(i) L1((i) + 1)
#define L4(i)   L2(i) L2((i) + 2)
#define L8(i)   L4(i) L4((i) + 4)
#define L16(i)  L8(i) L8((i) + 8)
#define L32(i)  L16(i) L16((i) + 16)
#define L64(i)  L32(i) L32((i) + 32)

const uint8_t spry_large_units[SPRY_LARGE_MAX >> 14] = {
    [0 ... 7] = 0,                                  /* n <= 128 KiB: unused */
    L8(8) L16(16) L32(32) L64(64)
};
