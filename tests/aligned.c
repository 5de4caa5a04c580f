/* aligned.c: blocks aligned to 128 KiB..2 MiB are spans inside the calling
 * thread's segments, not a 4 MiB chunk each (issue 7, case 7).
 *
 *  matrix        alignments 128 KiB, 256 KiB, 1 MiB, 2 MiB x sizes 1 B..2 MiB,
 *                all live at once: aligned, distinct, no huge segment behind
 *                them, usable size >= size, contents intact after the others
 *                were written, realloc up and down keeps them, and after free
 *                and spry_trim the memory is back
 *  cross-thread  threads allocate aligned blocks that the next thread checks
 *                and frees while the owner keeps allocating aligned blocks
 *  address space a child limited like `ulimit -v 4000000` (RLIMIT_AS about
 *                3.8 GiB) takes 4,000 posix_memalign(128 KiB, 64): every one
 *                succeeds, and spry's mapped bytes and the VmSize growth stay
 *                within 2x of what glibc needs (each block its own 128 KiB
 *                slot: 4,000 x 128 KiB = 500 MiB; glibc measured 516 MiB)
 *
 * SPRY_TEST_PLAIN: the standard names (libspry.so), else the spry_* API. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc_api.h"
#include "check.h"
#include "in_child.h"
#include "pattern.h"
#include "rss.h"

#ifdef SPRY_TEST_PLAIN
#define A_posix_memalign posix_memalign
#else
#define A_posix_memalign spry_posix_memalign
#endif

#define KiB ((size_t)1 << 10)

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

static const size_t aligns[] = {128 * KiB, 256 * KiB, 1 * MiB, 2 * MiB};
static const size_t sizes[] = {1, 8, 64, 4 * KiB, 64 * KiB - 1, 64 * KiB + 1,
                               128 * KiB, 200 * KiB, 512 * KiB + 3, 1 * MiB,
                               2 * MiB - 4 * KiB + 1, 2 * MiB};
#define NALIGNS (sizeof aligns / sizeof aligns[0])
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define NMATRIX (NALIGNS * NSIZES)

static spry_stats_t stats_now(void)
{
    spry_stats_t s;
    spry_stats_get(&s);
    return s;
}

/* An aligned block of n bytes: non-NULL, aligned, usable size >= n. */
static void *aligned_block(size_t align, size_t n, int how)
{
    void *p = NULL;
    if (how) {
        int rc = A_posix_memalign(&p, opaque(align), opaque(n));
        CHECKF(rc == 0, "posix_memalign(%zu KiB, %zu) returned %d", align / KiB, n, rc);
    } else {
        p = A_aligned_alloc(opaque(align), opaque(n));
        CHECKF(p != NULL, "aligned_alloc(%zu KiB, %zu) = NULL (errno %d)", align / KiB, n,
               errno);
    }
    CHECKF((uintptr_t)p % align == 0, "aligned block (%zu KiB, %zu) = %p is not aligned",
           align / KiB, n, p);
    CHECKF(A_usable_size(p) >= n, "usable size of an aligned block of %zu is %zu", n,
           A_usable_size(p));
    return p;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void test_matrix(void)
{
    void *p[NMATRIX];
    size_t n[NMATRIX];
    uintptr_t span[NMATRIX][2];
    /* The first free of a page starts the purge thread, whose creation
     * allocates (from spry under the standard names): before the baseline. */
    A_free(aligned_block(128 * KiB, 64, 0));
    spry_trim();
    spry_stats_t before = stats_now();
    for (size_t a = 0, k = 0; a < NALIGNS; a++) {
        for (size_t s = 0; s < NSIZES; s++, k++) {
            n[k] = sizes[s];
            p[k] = aligned_block(aligns[a], n[k], (int)(k & 1));
            pattern_fill(p[k], n[k]);
            span[k][0] = (uintptr_t)p[k];
            span[k][1] = (uintptr_t)p[k] + A_usable_size(p[k]);
        }
    }
    /* Spans in the heap's segments: no block took a huge segment. */
    spry_stats_t live = stats_now();
    CHECKF(live.huge_in_use == before.huge_in_use,
           "%zu aligned blocks of at most 2 MiB hold %zu MiB of huge segments",
           (size_t)NMATRIX, (live.huge_in_use - before.huge_in_use) / MiB);
    qsort(span, NMATRIX, sizeof span[0], by_address);
    for (size_t k = 1; k < NMATRIX; k++)
        CHECKF(span[k - 1][1] <= span[k][0], "aligned blocks overlap: [%#lx, %#lx) and %#lx",
               (unsigned long)span[k - 1][0], (unsigned long)span[k - 1][1],
               (unsigned long)span[k][0]);
    for (size_t k = 0; k < NMATRIX; k++)
        CHECK_PATTERN(p[k], n[k], pattern_seed(p[k], n[k]), "aligned block, all live");

    /* realloc keeps the contents, growing (in place or not) and shrinking */
    for (size_t k = 0; k < NMATRIX; k++) {
        uint64_t seed = pattern_seed(p[k], n[k]);
        size_t up = n[k] * 2 + 1;
        p[k] = A_realloc(p[k], opaque(up));
        CHECK_NOTNULL(p[k]);
        CHECK_PATTERN(p[k], n[k], seed, "aligned block grown by realloc");
        size_t down = n[k] / 3 + 1;
        p[k] = A_realloc(p[k], opaque(down));
        CHECK_NOTNULL(p[k]);
        CHECK_PATTERN(p[k], down, seed, "aligned block shrunk by realloc");
        CHECK_GE(A_usable_size(p[k]), down);
    }
    for (size_t k = 0; k < NMATRIX; k++)
        A_free(p[k]);

    /* the same blocks again, freed at once: a churn reuses freed spans, and
     * a span reused for an aligned request must be aligned */
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < NMATRIX; k++) {
            void *q = aligned_block(aligns[k / NSIZES], sizes[k % NSIZES], round & 1);
            memset(q, 0x5A, sizes[k % NSIZES] < 4096 ? sizes[k % NSIZES] : 4096);
            A_free(q);
        }

    spry_trim();
    spry_stats_t after = stats_now();
    CHECKF(after.in_use <= before.in_use && after.dirty <= before.dirty,
           "after free and spry_trim: in use %zu KiB (was %zu), dirty %zu KiB (was %zu)",
           after.in_use / KiB, before.in_use / KiB, after.dirty / KiB, before.dirty / KiB);
    printf("aligned: matrix of %zu alignments x %zu sizes passed\n", NALIGNS, NSIZES);
}

/* ---- cross-thread frees ---------------------------------------------------- */

#define THREADS 4
#define PER_THREAD 64
#define ROUNDS 20

static void *handed[THREADS][PER_THREAD];
static size_t handed_n[THREADS][PER_THREAD];
static pthread_barrier_t barrier;

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER_THREAD; i++) {
            size_t align = aligns[rng_next(&rng) % NALIGNS];
            size_t n = 1 + rng_next(&rng) % (align > 256 * KiB ? 2 * MiB : 300 * KiB);
            handed[id][i] = aligned_block(align, n, i & 1);
            handed_n[id][i] = n;
            pattern_fill(handed[id][i], n < 8192 ? n : 8192);
        }
        pthread_barrier_wait(&barrier);
        /* the previous thread's blocks, freed here while their owner goes on
         * allocating aligned blocks (which collects these frees) */
        unsigned from = (id + THREADS - 1) % THREADS;
        for (int i = 0; i < PER_THREAD; i++) {
            void *q = handed[from][i];
            size_t n = handed_n[from][i] < 8192 ? handed_n[from][i] : 8192;
            CHECK_PATTERN(q, n, pattern_seed(q, n), "aligned block from another thread");
            A_free(q);
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

static void test_cross_thread(void)
{
    spry_trim();
    spry_stats_t before = stats_now();
    pthread_t t[THREADS];
    CHECK(pthread_barrier_init(&barrier, NULL, THREADS) == 0);
    for (unsigned i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
    for (unsigned i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    pthread_barrier_destroy(&barrier);
    spry_trim();
    spry_stats_t after = stats_now();
    CHECKF(after.in_use <= before.in_use && after.dirty <= before.dirty,
           "after cross-thread frees and spry_trim: in use %zu KiB (was %zu), dirty %zu KiB "
           "(was %zu)", after.in_use / KiB, before.in_use / KiB, after.dirty / KiB,
           before.dirty / KiB);
    printf("aligned: %d threads x %d rounds of %d blocks freed by another thread passed\n",
           THREADS, ROUNDS, PER_THREAD);
}

/* ---- address space under ulimit -v ----------------------------------------- */

#define NBLOCKS 4000
#define LIMIT ((rlim_t)4000000 * 1024) /* ulimit -v 4000000 */
/* glibc places each block in its own 128 KiB-aligned slot */
#define GLIBC_BYTES ((size_t)NBLOCKS * 128 * KiB)

static void *blocks[NBLOCKS];

static void address_space_child(void)
{
    struct rlimit rl = {LIMIT, LIMIT};
    CHECKF(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
    size_t vm0 = vm_size_bytes();
    size_t mapped0 = stats_now().mapped;
    for (int i = 0; i < NBLOCKS; i++) {
        int rc = A_posix_memalign(&blocks[i], opaque(128 * KiB), opaque(64));
        CHECKF(rc == 0, "posix_memalign(128 KiB, 64) number %d of %d returned %d under "
               "RLIMIT_AS %zu MiB (mapped %zu MiB)", i, NBLOCKS, rc, (size_t)LIMIT / MiB,
               stats_now().mapped / MiB);
        CHECK_ALIGNED(blocks[i], 128 * KiB);
        pattern_fill(blocks[i], 64);
    }
    size_t vm = vm_size_bytes() - vm0, mapped = stats_now().mapped - mapped0;
    printf("aligned: %d x posix_memalign(128 KiB, 64): mapped +%zu MiB, VmSize +%zu MiB "
           "(glibc needs %zu MiB)\n", NBLOCKS, mapped / MiB, vm / MiB, GLIBC_BYTES / MiB);
    CHECKF(mapped <= 2 * GLIBC_BYTES, "mapped grew by %zu MiB, more than 2x glibc's %zu MiB",
           mapped / MiB, GLIBC_BYTES / MiB);
    CHECKF(vm <= 2 * GLIBC_BYTES, "VmSize grew by %zu MiB, more than 2x glibc's %zu MiB",
           vm / MiB, GLIBC_BYTES / MiB);
    for (int i = 0; i < NBLOCKS; i++) {
        CHECK_PATTERN(blocks[i], 64, pattern_seed(blocks[i], 64), "128 KiB-aligned block");
        A_free(blocks[i]);
    }
    fflush(stdout);
    _exit(0);
}

static void test_address_space(void)
{
    run_in_child(address_space_child, "address-space child");
}

/* A 0-byte block aligned to 4 MiB or more lies inside its own run: it once
 * started on the next chunk, the block after it, whose size then read 0
 * and whose free went to glibc (found by the differential fuzzer). */
static void test_zero_bytes_huge_alignment(void)
{
    for (size_t align = 4 * MiB; align <= 16 * MiB; align *= 2) {
        char *x = A_malloc(3 * MiB), *b = A_malloc(3 * MiB);
        CHECK(x && b);
        memset(b, 0x6b, 3 * MiB);
        A_free(x);                     /* the chunk before b is free */
        void *z = aligned_block(align, 0, 1);
        CHECKF(A_usable_size(b) >= 3 * MiB, "aligned 0-byte block (%zu MiB) broke its neighbour",
               align / MiB);
        A_free(z);
        CHECK(A_usable_size(b) >= 3 * MiB);
        for (size_t i = 0; i < 3 * MiB; i += 4096) CHECK(b[i] == 0x6b);
        A_free(b);
    }
}

int main(void)
{
    test_address_space();        /* first: in a process that mapped nothing yet */
    test_matrix();
    test_cross_thread();
    test_zero_bytes_huge_alignment();
    printf("aligned (%s): all checks passed\n", A_VARIANT);
    return 0;
}
