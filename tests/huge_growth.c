/* Huge blocks realloc grows by doubling (vectors), several at once: after
 * the first move, each grows in place. A block realloc moves to grow it is
 * placed in the middle of the longest free run, not by best fit beside the
 * block placed last, so the next doubling finds the granules after it free
 * (src/huge.c, area_find_room). Best fit put the vectors side by side and
 * every doubling copied with the old and the new block both resident: four
 * threads growing vectors to 64 MiB peaked at 2.2x glibc's RSS. Here two
 * and four vectors of 4 MiB, doubled in turn to 64 MiB: at most one move
 * each after the first doubling's (7 moves in 8 doublings and 14 in 16
 * before; 1 and 6 now), contents intact.
 *
 * `huge_growth limited`: under an address-space limit (RLIMIT_AS) blocks
 * keep best fit, which packs them: 16 vectors of 3 MiB doubled in turn to
 * 64 MiB (1 GiB) under a 1.4 GB limit all grow (6 reallocs failed with the
 * placement above, which spends address space: a review). */
#include "check.h"
#include <spry.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#define MiB ((size_t)1 << 20)

static unsigned grow_together(unsigned k) {
    unsigned char *v[4];
    size_t cap = 4 * MiB;
    unsigned moves = 0;
    for (unsigned i = 0; i < k; i++) {
        v[i] = spry_malloc(cap);
        CHECK(v[i] != NULL);
        memset(v[i], (int)(i + 1), cap);
    }
    while (cap < 64 * MiB) {
        cap *= 2;
        for (unsigned i = 0; i < k; i++) {
            unsigned char *q = spry_realloc(v[i], cap);
            CHECK(q != NULL);
            if (q != v[i]) moves++;
            CHECKF(q[0] == i + 1 && q[cap / 2 - 1] == i + 1, "vector %u lost its contents", i);
            memset(q + cap / 2, (int)(i + 1), cap / 2);
            v[i] = q;
        }
    }
    for (unsigned i = 0; i < k; i++) {
        for (size_t j = 0; j < cap; j += 4093) CHECK(v[i][j] == i + 1);
        spry_free(v[i]);
    }
    return moves;
}

static void grow_limited(void) {
    enum { K = 16 };
    struct rlimit r = { (size_t)1400 * MiB, (size_t)1400 * MiB };
    CHECK(setrlimit(RLIMIT_AS, &r) == 0);
    static unsigned char *v[K];
    size_t cap = 3 * MiB;
    for (unsigned i = 0; i < K; i++) {
        v[i] = spry_malloc(cap);
        CHECK(v[i] != NULL);
        v[i][0] = v[i][cap - 1] = (unsigned char)i;
    }
    for (; cap < 64 * MiB; cap = cap * 2 < 64 * MiB ? cap * 2 : 64 * MiB) {
        size_t n = cap * 2 < 64 * MiB ? cap * 2 : 64 * MiB;
        for (unsigned i = 0; i < K; i++) {
            unsigned char *q = spry_realloc(v[i], n);
            CHECKF(q != NULL, "vector %u not grown to %zu MiB under the limit", i, n / MiB);
            if (!q) return;
            CHECK(q[0] == i && q[cap - 1] == i);
            q[n - 1] = (unsigned char)i;
            v[i] = q;
        }
    }
    for (unsigned i = 0; i < K; i++) spry_free(v[i]);
    printf("huge_growth: %u vectors grown to 64 MiB under a 1.4 GB address-space limit\n", (unsigned)K);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "limited") == 0) {
        grow_limited();
        return 0;
    }
    unsigned two = grow_together(2), four = grow_together(4);
    CHECKF(two <= 2, "%u moves growing 2 vectors (8 doublings)", two);
    CHECKF(four <= 8, "%u moves growing 4 vectors (16 doublings)", four);
    printf("huge_growth: %u moves in 8 doublings, %u in 16\n", two, four);
    return 0;
}
