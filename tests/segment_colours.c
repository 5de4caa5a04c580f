/* segment_colours.c: each segment keeps its header (fixed part, slice table,
 * page descriptors) 512 bytes further into its first slice than the segment
 * below it, by the low 6 bits of its 4 MiB chunk number (types.h). The free
 * fast path finds a block's table from the segment's start and those bits;
 * the slow paths find the header there too. So blocks are made in segments
 * of every colour, and each colour's header and blocks are checked:
 *
 *  blocks   100,000-byte blocks until their segments cover all 64 colours
 *           (at most 4,096 blocks; at least 48 colours, or the test says
 *           why): each block's usable size holds the request, its first
 *           and last 256 bytes survive (all of it would make the test
 *           300 MB resident), the heap walk visits every one with its size
 *  headers  in each segment, pointers at its header (at the colour's offset,
 *           its table, its descriptors) and below and past it: free
 *           reports each one ("invalid pointer"), usable size is 0
 *  moves    one block in 32 grown by realloc to 150,000 bytes (a copy of
 *           all of it: more would make the test resident in hundreds of
 *           MB), the others shrunk to 40 bytes: their ends kept; then all
 *           freed, and the heap walk finds none of them */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spry.h"
#include "check.h"
#include "pattern.h"
#include "reports.h"

#define MAX_BLOCKS 4096
#define SIZE 100000
#define SEGMENT ((uintptr_t)4 << 20)
#define COLOURS 64
#define END 256

/* the block's first and last END bytes, stamped and checked */
static void ends_fill(uint8_t *p, uint64_t seed)
{
    pattern_fill_seed(p, END, seed);
    pattern_fill_seed(p + SIZE - END, END, ~seed);
}
#define CHECK_ENDS(p, seed)                                                   \
    do {                                                                      \
        CHECK_PATTERN((p), END, (seed), "head");                              \
        CHECK_PATTERN((uint8_t *)(p) + SIZE - END, END, ~(seed), "tail");     \
    } while (0)

static void *blocks[MAX_BLOCKS];
static uint64_t seeds[MAX_BLOCKS];
static unsigned count;

static unsigned colour_of(const void *p) { return (unsigned)(((uintptr_t)p >> 22) & (COLOURS - 1)); }

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

/* the heap walk: marks each of our blocks it visits, with its size */
static void *sorted[MAX_BLOCKS];
static unsigned char seen[MAX_BLOCKS];
static unsigned visited, bad_size;
static bool visit(void *block, size_t size, void *arg)
{
    (void)arg;
    void **hit = bsearch(&block, sorted, count, sizeof *sorted, cmp_ptr);
    if (hit) {
        size_t i = (size_t)(hit - sorted);
        seen[i]++;
        visited++;
        if (size < SIZE) bad_size++;
    }
    return true;
}

static void free_at(void *p) { spry_free(p); }

int main(void)
{
    uint64_t have = 0;      /* colours met so far, one bit each */
    while (count < MAX_BLOCKS && have != ~(uint64_t)0) {
        void *p = spry_malloc(SIZE);
        CHECK(p != NULL);
        CHECK(spry_usable_size(p) >= SIZE);
        seeds[count] = pattern_seed(p, SIZE);
        ends_fill(p, seeds[count]);
        blocks[count++] = p;
        have |= (uint64_t)1 << colour_of(p);
    }
    int colours = __builtin_popcountll(have);
    printf("%u blocks in segments of %d colours\n", count, colours);
    CHECKF(colours >= 48, "blocks of 100,000 B met only %d segment colours in %u blocks", colours, count);

    for (unsigned i = 0; i < count; i++) CHECK_ENDS(blocks[i], seeds[i]);
    memcpy(sorted, blocks, count * sizeof *blocks);
    qsort(sorted, count, sizeof *sorted, cmp_ptr);
    spry_heap_walk(visit, NULL);
    CHECKF(visited == count, "the walk visited %u of %u blocks", visited, count);
    CHECK(bad_size == 0);
    for (unsigned i = 0; i < count; i++) CHECK(seen[i] == 1);

    /* headers: one segment of each colour met */
    uint64_t tried = 0;
    size_t errors = errors_now();
    int reports = 0, probes = 0;
    for (unsigned i = 0; i < count; i++) {
        unsigned c = colour_of(sorted[i]);
        if ((tried >> c) & 1) continue;
        tried |= (uint64_t)1 << c;
        uint8_t *base = (uint8_t *)((uintptr_t)sorted[i] & ~(SEGMENT - 1));
        uint8_t *header = base + (size_t)c * 512;
        /* the header's fixed part, its table, a descriptor, a line below
         * the header and one past the last descriptor */
        uint8_t *at[] = { header, header + 64, header + 600, header + 4000,
                          c ? header - 64 : base + 32, header + 64 + 512 + 64 * 192 + 16 };
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            CHECKF(spry_usable_size(at[k]) == 0, "colour %u: usable size of header byte %td", c,
                   at[k] - base);
            reports += count_reports((void (*)(void *))free_at, at[k], "invalid pointer");
            probes++;
        }
    }
    CHECKF(reports == probes, "%d of %d frees into segment headers reported", reports, probes);
    CHECK(errors_now() == errors + (size_t)probes);

    /* moves */
    for (unsigned i = 0; i < count; i++) {
        size_t n = i % 32 == 1 ? 150000 : 40;
        void *q = spry_realloc(blocks[i], n);
        CHECK(q != NULL);
        if (n > SIZE) CHECK_ENDS(q, seeds[i]);
        else CHECK_PATTERN(q, n, seeds[i], "shrunk");
        blocks[i] = q;
    }
    for (unsigned i = 0; i < count; i++) spry_free(blocks[i]);
    visited = 0;
    spry_heap_walk(visit, NULL);
    CHECKF(visited == 0, "the walk still found %u freed blocks", visited);
    CHECK(errors_now() == errors + (size_t)probes);
    printf("%d header pointers reported\n", probes);
    return 0;
}
