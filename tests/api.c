/* api.c: semantics of every allocation function of spry.h.
 *
 * Built twice from this one source:
 * - api_prefixed: spry_* names, linked with libspry.a;
 * - api_plain (SPRY_TEST_PLAIN): the standard names (malloc, free, ...)
 *   linked with libspry.so, so the interposed entry points are exercised,
 *   plus the glibc extras (valloc, pvalloc, mallinfo2, malloc_trim, mallopt,
 *   malloc_stats, __libc_* aliases) that only exist under those names.
 * Functions with no standard name (free_sized, good_size, owns, trim, stats)
 * are called with their spry_ names in both builds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"
#include "pattern.h"
#include "rss.h"

#ifdef SPRY_TEST_PLAIN
#define A_malloc malloc
#define A_calloc calloc
#define A_realloc realloc
#define A_reallocarray reallocarray
#define A_free free
#define A_aligned_alloc aligned_alloc
#define A_posix_memalign posix_memalign
#define A_memalign memalign
#define A_usable_size malloc_usable_size
#define VARIANT "plain names, libspry.so"
#else
#define A_malloc spry_malloc
#define A_calloc spry_calloc
#define A_realloc spry_realloc
#define A_reallocarray spry_reallocarray
#define A_free spry_free
#define A_aligned_alloc spry_aligned_alloc
#define A_posix_memalign spry_posix_memalign
#define A_memalign spry_memalign
#define A_usable_size spry_usable_size
#define VARIANT "spry_* names, libspry.a"
#endif

/* Sizes are read through a volatile so that the compiler cannot fold a
 * malloc(SIZE_MAX) away or warn about it. */
static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

/* Every size from 0 to 1100, then around each power of two (and 3/4 and
 * 5/8 points) up to 64 MiB. */
static size_t test_sizes[4096];
static size_t test_size_count;

static void add_size(size_t n)
{
    for (size_t i = 0; i < test_size_count; i++)
        if (test_sizes[i] == n)
            return;
    test_sizes[test_size_count++] = n;
}

static void build_sizes(void)
{
    for (size_t n = 0; n <= 1100; n++)
        add_size(n);
    for (size_t p = 2048; p <= ((size_t)4 << 20); p *= 2) {
        size_t pts[] = {p - 16, p - 8, p - 1, p, p + 1, p + 8, p + 16,
                        p / 2 + p / 4, p / 2 + p / 8, p + p / 8 + 1};
        for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++)
            add_size(pts[k]);
    }
    /* fewer above 4 MiB: all blocks are live (and written) at once */
    for (size_t p = (size_t)8 << 20; p <= ((size_t)64 << 20); p *= 2) {
        add_size(p - 1);
        add_size(p + 1);
    }
}

static void check_block(void *p, size_t n, const char *what)
{
    CHECKF(p != NULL, "%s(%zu) returned NULL (errno %d)", what, n, errno);
    size_t usable = A_usable_size(p);
    CHECKF(usable >= n, "%s(%zu) = %p: usable size %zu < request", what, n, p,
           usable);
    CHECKF((uintptr_t)p % check_min_align(n) == 0,
           "%s(%zu) = %p is not %zu-byte aligned", what, n, p,
           check_min_align(n));
    if (usable >= 16)
        CHECKF((uintptr_t)p % 16 == 0,
               "%s(%zu) = %p: block of %zu usable bytes not 16-byte aligned",
               what, n, p, usable);
    CHECKF(spry_owns(p), "spry_owns(%s(%zu) = %p) is false", what, n, p);
}

struct range {
    uintptr_t lo, hi;
};

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* malloc of every test size, all live at once: non-NULL, aligned, usable
 * size == good_size(n), no two blocks overlap, contents survive. */
static void test_malloc_sizes(void)
{
    void **ptrs = calloc(test_size_count, sizeof *ptrs);
    struct range *ranges = calloc(test_size_count, sizeof *ranges);
    CHECK(ptrs && ranges);
    for (size_t i = 0; i < test_size_count; i++) {
        size_t n = test_sizes[i];
        void *p = A_malloc(opaque(n));
        if (n == 0) {
            CHECKF(p != NULL, "malloc(0) returned NULL");
        } else {
            check_block(p, n, "malloc");
        }
        size_t usable = A_usable_size(p);
        if (n > 0) {
            size_t good = spry_good_size(n);
            CHECKF(usable == good,
                   "malloc(%zu): usable size %zu != spry_good_size %zu", n,
                   usable, good);
        }
        pattern_fill(p, n);
        ptrs[i] = p;
        ranges[i].lo = (uintptr_t)p;
        ranges[i].hi = (uintptr_t)p + (usable ? usable : 1);
    }
    qsort(ranges, test_size_count, sizeof *ranges, range_cmp);
    for (size_t i = 1; i < test_size_count; i++)
        CHECKF(ranges[i].lo >= ranges[i - 1].hi,
               "blocks overlap: [%p, %p) and [%p, %p)", (void *)ranges[i - 1].lo,
               (void *)ranges[i - 1].hi, (void *)ranges[i].lo,
               (void *)ranges[i].hi);
    for (size_t i = 0; i < test_size_count; i++) {
        CHECK_PATTERN(ptrs[i], test_sizes[i],
                      pattern_seed(ptrs[i], test_sizes[i]), "malloc block");
        A_free(ptrs[i]);
    }
    free(ptrs);
    free(ranges);
}

/* malloc(0): a unique pointer each time, freeable; free(NULL) is a no-op. */
static void test_malloc_zero(void)
{
    void *a = A_malloc(opaque(0)), *b = A_malloc(opaque(0));
    CHECKF(a != NULL && b != NULL, "malloc(0) returned %p and %p", a, b);
    CHECKF(a != b, "two malloc(0) returned the same pointer %p", a);
    CHECKF(spry_owns(a), "spry_owns(malloc(0) = %p) is false", a);
    A_free(a);
    A_free(b);
    A_free(NULL);
    spry_free_sized(NULL, 0);
}

/* calloc zeroes: fresh memory, memory dirtied and freed first, big blocks,
 * both argument orders. */
static void test_calloc(void)
{
    static const size_t sizes[] = {1,     8,      24,      100,     1000,
                                   5000,  70000,  300000,  2 << 20, 9 << 20,
                                   33 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        size_t count = n >= (1 << 20) ? 4 : 64;
        void *blocks[64];
        /* dirty blocks of this size and free them, so calloc reuses them */
        for (size_t i = 0; i < count; i++) {
            blocks[i] = A_malloc(opaque(n));
            CHECK_NOTNULL(blocks[i]);
            memset(blocks[i], 0xA5, A_usable_size(blocks[i]));
        }
        for (size_t i = 0; i < count; i++)
            A_free(blocks[i]);
        for (size_t i = 0; i < count; i++) {
            unsigned char *p = (i & 1) ? A_calloc(opaque(1), opaque(n))
                                       : A_calloc(opaque(n), opaque(1));
            check_block(p, n, "calloc");
            for (size_t j = 0; j < n; j++)
                CHECKF(p[j] == 0,
                       "calloc(%zu) = %p: byte %zu is 0x%02x, not zero "
                       "(block reused after being dirtied)",
                       n, (void *)p, j, p[j]);
            memset(p, 0x5A, n);
            blocks[i] = p;
        }
        for (size_t i = 0; i < count; i++)
            A_free(blocks[i]);
    }
    /* count * size products */
    int *arr = A_calloc(opaque(1000), sizeof(int));
    check_block(arr, 1000 * sizeof(int), "calloc");
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(arr[i], 0);
    A_free(arr);
    void *z = A_calloc(opaque(0), opaque(16));
    CHECKF(z != NULL, "calloc(0, 16) returned NULL");
    A_free(z);
}

/* realloc keeps the contents while growing through every size class range
 * up to 16 MiB and shrinking back to 1 byte. */
static void test_realloc_contents(void)
{
    size_t n = 1;
    unsigned char *p = A_malloc(opaque(n));
    CHECK_NOTNULL(p);
    uint64_t seed = 0x1234567;
    pattern_fill_seed(p, n, seed);
    size_t sizes[512], count = 0;
    for (size_t s = 1; s <= ((size_t)16 << 20); s = s + s / 5 + 1)
        sizes[count++] = s;
    for (size_t i = 0; i < count; i++) {
        size_t m = sizes[i];
        unsigned char *q = A_realloc(p, opaque(m));
        check_block(q, m, "realloc(grow)");
        CHECK_PATTERN(q, n, seed, "realloc grow kept prefix");
        pattern_fill_seed(q, m, seed);
        p = q;
        n = m;
    }
    for (size_t i = count; i-- > 0;) {
        size_t m = sizes[i];
        unsigned char *q = A_realloc(p, opaque(m));
        check_block(q, m, "realloc(shrink)");
        CHECK_PATTERN(q, m, seed, "realloc shrink kept prefix");
        p = q;
        n = m;
    }
    A_free(p);

    /* realloc within the usable size stays in place */
    for (size_t s = 1; s < (1 << 20); s = s * 3 + 1) {
        void *a = A_malloc(opaque(s));
        CHECK_NOTNULL(a);
        size_t usable = A_usable_size(a);
        void *b = A_realloc(a, opaque(usable));
        CHECKF(b == a,
               "realloc(%p, usable size %zu) of a %zu-byte block moved it to %p",
               a, usable, s, b);
        A_free(b);
    }

    /* a shrink to a much smaller size moves the data to a small block */
    {
        size_t big = 1 << 20;
        unsigned char *a = A_malloc(opaque(big));
        CHECK_NOTNULL(a);
        pattern_fill_seed(a, big, 77);
        unsigned char *b = A_realloc(a, opaque(16));
        CHECK_NOTNULL(b);
        CHECK_PATTERN(b, 16, 77, "realloc 1 MiB -> 16 B kept prefix");
        CHECKF(A_usable_size(b) < 4096,
               "realloc(1 MiB block, 16) kept a block of %zu usable bytes "
               "(a shrink to a much smaller size must move to a small block)",
               A_usable_size(b));
        A_free(b);
    }
}

/* realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and returns NULL. */
static void test_realloc_edges(void)
{
    void *p = A_realloc(NULL, opaque(100));
    check_block(p, 100, "realloc(NULL, 100)");
    A_free(p);

    p = A_malloc(opaque(64));
    CHECK_NOTNULL(p);
    void *q = A_realloc(p, opaque(0));
    CHECKF(q == NULL, "realloc(p, 0) returned %p, not NULL (glibc frees and "
                      "returns NULL)", q);

    /* realloc(p, 0) really frees: 2,000 rounds of a touched 256 KiB block
     * would add 500 MiB of RSS if it leaked. */
    size_t rss0 = rss_bytes();
    for (int i = 0; i < 2000; i++) {
        char *b = A_malloc(opaque(256 << 10));
        CHECK_NOTNULL(b);
        memset(b, 1, 256 << 10);
        CHECK(A_realloc(b, opaque(0)) == NULL);
    }
    size_t rss1 = rss_bytes();
    CHECKF(rss1 < rss0 + 64 * MiB,
           "RSS grew by %zu MiB over 2000 realloc(256 KiB block, 0): "
           "realloc(p, 0) does not free",
           (rss1 - rss0) / MiB);
}

/* Sizes that cannot be satisfied: NULL with errno ENOMEM, nothing lost. */
static void test_errors(void)
{
    errno = 0;
    void *p = A_malloc(opaque(SIZE_MAX));
    CHECKF(p == NULL && errno == ENOMEM,
           "malloc(SIZE_MAX) = %p, errno %d (want NULL, ENOMEM=%d)", p, errno,
           ENOMEM);
    static const size_t huge[] = {SIZE_MAX - 4096, SIZE_MAX / 2 + 1,
                                  (size_t)PTRDIFF_MAX + 1, (size_t)1 << 62,
                                  (size_t)1 << 48};
    for (size_t k = 0; k < sizeof huge / sizeof huge[0]; k++) {
        errno = 0;
        p = A_malloc(opaque(huge[k]));
        CHECKF(p == NULL && errno == ENOMEM,
               "malloc(%zu) = %p, errno %d (want NULL, ENOMEM)", huge[k], p,
               errno);
    }
    /* A size the kernel's overcommit policy refuses for a mapping of its
     * own (32 TiB: refused unless overcommit is unlimited or the machine
     * has that much): refused here too, as glibc's malloc is (spry's
     * mappings were all MAP_NORESERVE, and malloc of 64 TiB succeeded on a
     * 24 GiB machine: a review) */
    size_t over = (size_t)1 << 45;
    void *m = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        errno = 0;
        p = A_malloc(opaque(over));
        CHECKF(p == NULL && errno == ENOMEM, "malloc(32 TiB) = %p, errno %d, where the kernel refuses "
               "such a mapping (want NULL, ENOMEM)", p, errno);
        errno = 0;
        p = A_calloc(opaque(1), opaque(over));
        CHECKF(p == NULL && errno == ENOMEM, "calloc(1, 32 TiB) = %p, errno %d (want NULL, ENOMEM)", p,
               errno);
    } else {
        munmap(m, over);
    }
    /* calloc overflow */
    struct {
        size_t a, b;
    } ovf[] = {{SIZE_MAX / 2, 3}, {(size_t)1 << 33, (size_t)1 << 33},
               {SIZE_MAX, SIZE_MAX}, {SIZE_MAX, 2}, {3, SIZE_MAX / 2}};
    for (size_t k = 0; k < sizeof ovf / sizeof ovf[0]; k++) {
        errno = 0;
        p = A_calloc(opaque(ovf[k].a), opaque(ovf[k].b));
        CHECKF(p == NULL && errno == ENOMEM,
               "calloc(%zu, %zu) (overflows) = %p, errno %d (want NULL, ENOMEM)",
               ovf[k].a, ovf[k].b, p, errno);
    }
    /* reallocarray overflow leaves the block alone */
    unsigned char *b = A_malloc(opaque(100));
    CHECK_NOTNULL(b);
    pattern_fill_seed(b, 100, 5);
    for (size_t k = 0; k < sizeof ovf / sizeof ovf[0]; k++) {
        errno = 0;
        p = A_reallocarray(b, opaque(ovf[k].a), opaque(ovf[k].b));
        CHECKF(p == NULL && errno == ENOMEM,
               "reallocarray(p, %zu, %zu) (overflows) = %p, errno %d (want "
               "NULL, ENOMEM)",
               ovf[k].a, ovf[k].b, p, errno);
        CHECK_PATTERN(b, 100, 5, "block after failed reallocarray");
    }
    errno = 0;
    p = A_reallocarray(NULL, opaque(SIZE_MAX / 4), opaque(8));
    CHECKF(p == NULL && errno == ENOMEM,
           "reallocarray(NULL, SIZE_MAX/4, 8) = %p, errno %d", p, errno);
    /* reallocarray without overflow works like realloc */
    unsigned char *c = A_reallocarray(b, opaque(50), opaque(40));
    check_block(c, 2000, "reallocarray(p, 50, 40)");
    CHECK_PATTERN(c, 100, 5, "reallocarray kept prefix");
    b = c;

    /* realloc to an impossible size: NULL, ENOMEM, block untouched */
    static const size_t sizes[] = {SIZE_MAX - 4096, SIZE_MAX, SIZE_MAX / 2 + 1,
                                   (size_t)1 << 48};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        errno = 0;
        p = A_realloc(b, opaque(sizes[k]));
        CHECKF(p == NULL && errno == ENOMEM,
               "realloc(p, %zu) = %p, errno %d (want NULL, ENOMEM)", sizes[k],
               p, errno);
        CHECK_PATTERN(b, 100, 5, "block after failed realloc");
        CHECKF(spry_owns(b), "block %p no longer owned after failed realloc",
               (void *)b);
    }
    /* and it is still a working block */
    c = A_realloc(b, opaque(5000));
    check_block(c, 5000, "realloc after failed realloc");
    CHECK_PATTERN(c, 100, 5, "realloc after failed realloc kept prefix");
    A_free(c);
}

/* aligned_alloc, posix_memalign and memalign for every power of two from 1
 * (8 for posix_memalign) to 64 MiB, several sizes each. */
static void test_alignment(void)
{
    for (size_t a = 1; a <= ((size_t)64 << 20); a *= 2) {
        size_t sizes_small[] = {1, 8, 24, a / 2 + 1, a, a + 1, 3 * a / 2 + 7};
        size_t sizes_big[] = {1, a + 1};
        size_t *sizes = a < (1 << 20) ? sizes_small : sizes_big;
        size_t nsizes = a < (1 << 20) ? 7 : 2;
        void *live[3 * 7];
        size_t live_n[3 * 7];
        size_t nlive = 0;
        for (size_t k = 0; k < nsizes; k++) {
            size_t n = sizes[k];
            size_t want = a > check_min_align(n) ? a : check_min_align(n);

            errno = 0;
            void *p = A_aligned_alloc(opaque(a), opaque(n));
            check_block(p, n, "aligned_alloc");
            CHECKF((uintptr_t)p % want == 0,
                   "aligned_alloc(%zu, %zu) = %p is not %zu-aligned", a, n, p,
                   want);
            pattern_fill(p, n);
            live[nlive] = p, live_n[nlive++] = n;

            if (a >= sizeof(void *)) {
                void *q = (void *)0x1;
                int rc = A_posix_memalign(&q, opaque(a), opaque(n));
                CHECKF(rc == 0, "posix_memalign(%zu, %zu) returned %d", a, n,
                       rc);
                check_block(q, n, "posix_memalign");
                CHECKF((uintptr_t)q % want == 0,
                       "posix_memalign(%zu, %zu) = %p is not %zu-aligned", a, n,
                       q, want);
                pattern_fill(q, n);
                live[nlive] = q, live_n[nlive++] = n;
            }

            void *r = A_memalign(opaque(a), opaque(n));
            check_block(r, n, "memalign");
            CHECKF((uintptr_t)r % want == 0,
                   "memalign(%zu, %zu) = %p is not %zu-aligned", a, n, r, want);
            pattern_fill(r, n);
            live[nlive] = r, live_n[nlive++] = n;
        }
        for (size_t i = 0; i < nlive; i++) {
            CHECK_PATTERN(live[i], live_n[i], pattern_seed(live[i], live_n[i]),
                          "aligned block");
            if (i % 2)
                A_free(live[i]);
            else
                spry_free_sized(live[i], live_n[i]);
        }
    }

    /* realloc of an aligned block keeps the contents */
    unsigned char *p = A_aligned_alloc(opaque(4096), opaque(100));
    CHECK_NOTNULL(p);
    pattern_fill_seed(p, 100, 9);
    p = A_realloc(p, opaque(100000));
    CHECK_NOTNULL(p);
    CHECK_PATTERN(p, 100, 9, "realloc of aligned block kept prefix");
    A_free(p);

    /* bad alignments */
    static const size_t bad[] = {0, 3, 24, 48, 100, 4097, SIZE_MAX};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        errno = 0;
        void *q = A_aligned_alloc(opaque(bad[k]), opaque(64));
        CHECKF(q == NULL && errno == EINVAL,
               "aligned_alloc(%zu, 64) = %p, errno %d (want NULL, EINVAL=%d)",
               bad[k], q, errno, EINVAL);
        void *out = (void *)0x1234;
        int rc = A_posix_memalign(&out, opaque(bad[k]), opaque(64));
        CHECKF(rc == EINVAL, "posix_memalign(&p, %zu, 64) returned %d (want "
                             "EINVAL=%d)",
               bad[k], rc, EINVAL);
        CHECKF(out == (void *)0x1234,
               "posix_memalign(&p, %zu, 64) failed but changed *p to %p",
               bad[k], out);
    }
    /* power of two but not a multiple of sizeof(void *) */
    for (size_t a = 1; a < sizeof(void *); a *= 2) {
        void *out = (void *)0x1234;
        int rc = A_posix_memalign(&out, opaque(a), opaque(64));
        CHECKF(rc == EINVAL, "posix_memalign(&p, %zu, 64) returned %d (want "
                             "EINVAL)", a, rc);
        CHECK(out == (void *)0x1234);
    }
    /* a good alignment with an impossible size */
    errno = 0;
    void *q = A_aligned_alloc(opaque(64), opaque(SIZE_MAX - 4096));
    CHECKF(q == NULL && errno == ENOMEM,
           "aligned_alloc(64, SIZE_MAX-4096) = %p, errno %d (want NULL, ENOMEM)",
           q, errno);
    void *out = (void *)0x1234;
    int rc = A_posix_memalign(&out, opaque(64), opaque(SIZE_MAX - 4096));
    CHECKF(rc == ENOMEM, "posix_memalign(&p, 64, SIZE_MAX-4096) returned %d "
                         "(want ENOMEM)", rc);
    errno = 0;
    q = A_aligned_alloc(opaque((size_t)1 << 62), opaque(16));
    CHECKF(q == NULL && (errno == ENOMEM || errno == EINVAL),
           "aligned_alloc(2^62, 16) = %p, errno %d (want NULL, ENOMEM)", q,
           errno);
    /* memalign as glibc: alignments up to 2^63 (rounded up to a power of
     * two) no block can have are ENOMEM, above 2^63 EINVAL (2^62 + 1 and
     * 2^63 gave EINVAL: a review) */
    static const struct { size_t align; int want; } ma[] = {
        {(size_t)1 << 62, ENOMEM}, {((size_t)1 << 62) + 1, ENOMEM}, {(size_t)1 << 63, ENOMEM},
        {((size_t)1 << 63) + 1, EINVAL}, {SIZE_MAX, EINVAL}};
    for (size_t k = 0; k < sizeof ma / sizeof ma[0]; k++) {
        errno = 0;
        q = A_memalign(opaque(ma[k].align), opaque(16));
        CHECKF(q == NULL && errno == ma[k].want, "memalign(%#zx, 16) = %p, errno %d (want NULL, %d)",
               ma[k].align, q, errno, ma[k].want);
    }
}

/* free_sized accepts the requested size and any size up to the usable one. */
static void test_free_sized(void)
{
    for (size_t n = 1; n < (64 << 20); n = n * 2 + 3) {
        void *a = A_malloc(opaque(n));
        void *b = A_malloc(opaque(n));
        CHECK_NOTNULL(a);
        CHECK_NOTNULL(b);
        spry_free_sized(a, n);
        spry_free_sized(b, A_usable_size(b));
    }
    /* the freed memory is reused: 100k rounds do not grow RSS */
    size_t rss0 = rss_bytes();
    for (int i = 0; i < 100000; i++) {
        size_t n = 16 + (size_t)(i % 5000);
        char *a = A_malloc(opaque(n));
        CHECK_NOTNULL(a);
        memset(a, 3, n);
        spry_free_sized(a, n);
    }
    size_t rss1 = rss_bytes();
    CHECKF(rss1 < rss0 + 64 * MiB,
           "RSS grew by %zu MiB over 100k malloc/free_sized rounds",
           (rss1 - rss0) / MiB);
}

/* good_size: >= n, and what malloc(n) really gets, for the test sizes. */
static void test_good_size(void)
{
    for (size_t i = 0; i < test_size_count; i++) {
        size_t n = test_sizes[i];
        CHECKF(spry_good_size(n) >= n, "spry_good_size(%zu) = %zu < n", n,
               spry_good_size(n));
    }
    for (size_t n = 1; n < ((size_t)300 << 20); n = n + n / 3 + 1) {
        void *p = A_malloc(opaque(n));
        CHECK_NOTNULL(p);
        CHECKF(A_usable_size(p) == spry_good_size(n),
               "usable size of malloc(%zu) = %zu but spry_good_size = %zu", n,
               A_usable_size(p), spry_good_size(n));
        A_free(p);
    }
}

static int g_static_object;

/* spry_owns: true for spry blocks of every kind, false for other memory. */
static void test_owns(void)
{
    int on_stack = 0;
    CHECK(!spry_owns(NULL));
    CHECKF(!spry_owns(&on_stack), "spry_owns(stack address %p) is true",
           (void *)&on_stack);
    CHECKF(!spry_owns(&g_static_object), "spry_owns(static object %p) is true",
           (void *)&g_static_object);
    CHECKF(!spry_owns((void *)test_owns), "spry_owns(code address) is true");
    void *m = mmap(NULL, 1 << 22, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECKF(!spry_owns(m), "spry_owns(own mmap %p) is true", m);
    CHECKF(!spry_owns((char *)m + 65536),
           "spry_owns(inside own mmap %p) is true", (void *)((char *)m + 65536));
    munmap(m, 1 << 22);
    static const size_t sizes[] = {1, 16, 200, 3000, 40000, 300000, 5 << 20,
                                   40 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        void *p = A_malloc(opaque(sizes[k]));
        CHECK_NOTNULL(p);
        CHECKF(spry_owns(p), "spry_owns(malloc(%zu) = %p) is false", sizes[k],
               p);
        void *q = A_aligned_alloc(opaque(1 << 16), opaque(sizes[k]));
        CHECK_NOTNULL(q);
        CHECKF(spry_owns(q), "spry_owns(aligned_alloc(64K, %zu) = %p) is false",
               sizes[k], q);
        A_free(p);
        A_free(q);
    }
}

/* Statistics and options, as far as spry.h defines them. */
static void test_stats_options(void)
{
    spry_stats_t s0, s1;
    memset(&s0, 0xff, sizeof s0);
    spry_stats_get(&s0);
    void *big = A_malloc(opaque(32 << 20));
    CHECK_NOTNULL(big);
    memset(big, 1, 32 << 20);
    void *small[100];
    for (int i = 0; i < 100; i++) {
        small[i] = A_malloc(opaque(100));
        CHECK_NOTNULL(small[i]);
    }
    spry_stats_get(&s1);
    CHECKF(s1.mapped >= s1.committed, "stats: mapped %zu < committed %zu",
           s1.mapped, s1.committed);
    CHECKF(s1.committed_peak >= s1.committed,
           "stats: committed_peak %zu < committed %zu", s1.committed_peak,
           s1.committed);
    CHECKF(s1.mapped >= ((size_t)32 << 20),
           "stats: mapped %zu with a 32 MiB block live", s1.mapped);
    CHECKF(s1.in_use + s1.huge_in_use >= ((size_t)32 << 20),
           "stats: in_use %zu + huge_in_use %zu with a 32 MiB block live",
           s1.in_use, s1.huge_in_use);
    CHECKF(s1.heaps >= 1, "stats: heaps = %zu after allocating", s1.heaps);
    CHECKF(s1.arenas >= 1, "stats: arenas = %zu after allocating", s1.arenas);
    CHECKF(s1.arenas < 1000,
           "stats: %zu kernel mappings for a handful of blocks", s1.arenas);
    A_free(big);
    for (int i = 0; i < 100; i++)
        A_free(small[i]);

    int fds[2];
    CHECK(pipe(fds) == 0);
    spry_stats_print(fds[1]);
    close(fds[1]);
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    close(fds[0]);
    CHECKF(got > 0, "spry_stats_print wrote nothing (read returned %zd)", got);

    CHECK_EQ(spry_option_get("no-such-option-at-all"), (long)-1);
    CHECK_EQ(spry_option_get(""), (long)-1);

    /* trim is callable at any time, and blocks survive it */
    void *keep = A_malloc(opaque(5000));
    CHECK_NOTNULL(keep);
    pattern_fill(keep, 5000);
    spry_trim();
    CHECK_PATTERN(keep, 5000, pattern_seed(keep, 5000), "block across trim");
    A_free(keep);
    spry_trim();
}

#ifdef SPRY_TEST_PLAIN
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* The glibc extras, reached through the interposed names. */
static void test_glibc_extras(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    /* the standard names go to spry, also from inside libc */
    void *m = malloc(opaque(10));
    CHECKF(spry_owns(m), "malloc() is not served by spry (block %p)", m);
    free(m);
    char *s = strdup("interposed");
    CHECKF(spry_owns(s), "strdup()'s malloc inside libc not served by spry");
    free(s);

    static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 100000, 5 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        void *v = valloc(opaque(n));
        check_block(v, n, "valloc");
        CHECK_ALIGNED(v, page);
        pattern_fill(v, n);
        void *pv = pvalloc(opaque(n));
        check_block(pv, n, "pvalloc");
        CHECK_ALIGNED(pv, page);
        size_t rounded = (n + page - 1) / page * page;
        CHECKF(malloc_usable_size(pv) >= rounded,
               "malloc_usable_size(pvalloc(%zu)) = %zu < %zu (pvalloc rounds "
               "up to pages)",
               n, malloc_usable_size(pv), rounded);
        memset(pv, 7, rounded);
        CHECK_PATTERN(v, n, pattern_seed(v, n), "valloc block");
        free(v);
        free(pv);
    }

    void *a = __libc_malloc(opaque(100));
    CHECKF(a && spry_owns(a), "__libc_malloc not served by spry (%p)", a);
    unsigned char *c = __libc_calloc(opaque(10), opaque(10));
    CHECKF(c && spry_owns(c), "__libc_calloc not served by spry (%p)",
           (void *)c);
    for (int i = 0; i < 100; i++)
        CHECK_EQ(c[i], 0);
    pattern_fill_seed(a, 100, 11);
    a = __libc_realloc(a, opaque(10000));
    CHECKF(a && spry_owns(a), "__libc_realloc not served by spry (%p)", a);
    CHECK_PATTERN(a, 100, 11, "__libc_realloc kept prefix");
    void *al = __libc_memalign(opaque(256), opaque(100));
    CHECKF(al && spry_owns(al), "__libc_memalign not served by spry (%p)", al);
    CHECK_ALIGNED(al, 256);
    __libc_free(a);
    __libc_free(c);
    __libc_free(al);

    struct mallinfo2 mi = mallinfo2();
    (void)mi;
    int trimmed = malloc_trim(0);
    CHECKF(trimmed == 0 || trimmed == 1, "malloc_trim(0) returned %d", trimmed);
    CHECKF(mallopt(M_ARENA_MAX, 2) == 1, "mallopt(M_ARENA_MAX, 2) not accepted");
    CHECKF(mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1,
           "mallopt(M_MMAP_THRESHOLD) not accepted");
    CHECKF(mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1,
           "mallopt(M_TRIM_THRESHOLD) not accepted");
    /* malloc_stats prints to stderr; send it to /dev/null */
    fflush(stderr);
    int saved = dup(2);
    FILE *null = fopen("/dev/null", "w");
    CHECK(saved >= 0 && null);
    dup2(fileno(null), 2);
    malloc_stats();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(null);
    CHECK_EQ(malloc_usable_size(NULL), 0);
}
#endif

int main(void)
{
    build_sizes();
    test_malloc_zero();
    test_malloc_sizes();
    test_calloc();
    test_realloc_contents();
    test_realloc_edges();
    test_errors();
    test_alignment();
    test_free_sized();
    test_good_size();
    test_owns();
    test_stats_options();
#ifdef SPRY_TEST_PLAIN
    test_glibc_extras();
#endif
    printf("api (%s): all checks passed\n", VARIANT);
    return 0;
}
