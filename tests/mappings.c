/* mappings.c: spry makes a bounded number of kernel mappings, a few per GiB
 * allocated and never one per block (Linux's vm.max_map_count is 65530).
 * About 8 GiB of address space is allocated in medium (100 KiB), large
 * (1 MiB), and huge (8 MiB, 40 MiB) blocks, one byte of each touched, and
 * the growth of /proc/self/maps is counted: with all blocks live (adjacent
 * mappings may merge), after every other block is freed (they cannot), and
 * again after freeing everything and allocating again (cached huge blocks
 * must not pile up mappings).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"

#define PER_GIB_LIMIT 16

/* lines of /proc/self/maps, counted with read() only */
static size_t count_mappings(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    static char buf[1 << 16];
    size_t lines = 0;
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < got; i++)
            lines += buf[i] == '\n';
    close(fd);
    return lines;
}

struct band {
    size_t size, count;
};
static const struct band bands[] = {
    {100 << 10, 20000}, /* ~2 GiB of medium blocks */
    {1 << 20, 2000},    /* 2 GiB of 1 MiB blocks */
    {8 << 20, 256},     /* 2 GiB of 8 MiB blocks */
    {40 << 20, 50},     /* 2 GiB of 40 MiB blocks */
};
#define NBANDS (sizeof bands / sizeof bands[0])
static void *blocks[NBANDS][20000];

static size_t allocate(void)
{
    size_t total = 0;
    /* interleaved across the bands, as a program would */
    for (size_t i = 0; i < 20000; i++)
        for (size_t b = 0; b < NBANDS; b++)
            if (i < bands[b].count) {
                void *p = spry_malloc(bands[b].size);
                CHECKF(p != NULL, "spry_malloc(%zu) failed (block %zu): %s",
                       bands[b].size, i, strerror(errno));
                ((volatile char *)p)[0] = 1;
                blocks[b][i] = p;
                total += bands[b].size;
            }
    return total;
}

/* frees the blocks with index % 2 == parity */
static void free_half(size_t parity)
{
    for (size_t b = 0; b < NBANDS; b++)
        for (size_t i = parity; i < bands[b].count; i += 2)
            spry_free(blocks[b][i]);
}

int main(void)
{
    void *warm = spry_malloc(64);
    spry_free(warm);
    size_t before = count_mappings();
    size_t nblocks = 0;
    for (size_t b = 0; b < NBANDS; b++)
        nblocks += bands[b].count;

    for (int round = 0; round < 2; round++) {
        size_t total = allocate();
        size_t during = count_mappings();
        size_t gib = (total + (1u << 30) - 1) >> 30;
        spry_stats_t st;
        spry_stats_get(&st);
        printf("mappings: round %d: %zu blocks, %zu GiB: /proc/self/maps %zu "
               "-> %zu lines (stats.arenas %zu, segments %zu)\n", round,
               nblocks, gib, before, during, st.arenas, st.segments);
        CHECKF(during <= before + PER_GIB_LIMIT * gib,
               "round %d: %zu new kernel mappings for %zu blocks in %zu GiB "
               "(limit %d per GiB)", round, during - before, nblocks, gib,
               PER_GIB_LIMIT);
        /* every other block freed: a mapping per block would now leave a
         * hole between each two live blocks, which the kernel cannot merge */
        free_half(1);
        size_t holes = count_mappings();
        printf("mappings: round %d: every other block freed: %zu lines\n",
               round, holes);
        CHECKF(holes <= before + PER_GIB_LIMIT * gib,
               "round %d: %zu new kernel mappings after freeing every other "
               "of %zu blocks in %zu GiB (limit %d per GiB): one mapping per "
               "block?", round, holes - before, nblocks, gib, PER_GIB_LIMIT);
        free_half(0);
    }
    spry_trim();
    printf("mappings: after free and trim: %zu lines\n", count_mappings());
    return 0;
}
