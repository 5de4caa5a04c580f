/* A live set that shrinks gives its pages back: 200,000 blocks of 16 B-1 KiB
 * (random churn while it grows), then shrunk to 2,000 with 3 mallocs in 10
 * steps, then spry_trim(). What stays in use is the pages the survivors
 * (and the blocks malloc'd during the shrink) keep.
 *
 * A full page of small blocks that gets a block back is queued at the back
 * (where it gathers frees) only while its class has few partly free pages;
 * when all of them went to the back (c45244f), the shrink's mallocs spread
 * over the oldest, sparsest pages and kept them: 1.4x the pages in use here
 * (the test fails), against pages queued behind the head, the fullest first
 * (queue.c, spry_queue_push_back_in).
 * Deterministic: one thread, a fixed sequence. */
#include "check.h"
#include <spry.h>
#include <stdlib.h>

#define GROW   200000
#define KEEP   (GROW / 100)
/* in use after the trim: 14.4 MiB with every such page behind the head
 * (c45244f's parent), 15.8 MiB now, 20.7 MiB with all at the back */
#define LIMIT_KIB 18432

static void *v[GROW];
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *block(void) {
    size_t n = 16 + next() % 1009;
    unsigned char *p = spry_malloc(n);
    CHECK(p != NULL);
    p[0] = p[n - 1] = (unsigned char)n;
    return p;
}

int main(void) {
    size_t live = 0;
    while (live < GROW) {
        if (live > 10 && next() % 10 < 3) {
            size_t j = next() % live;
            spry_free(v[j]);
            v[j] = v[--live];
        } else {
            v[live++] = block();
        }
    }
    while (live > KEEP) {
        if (next() % 10 < 3) {
            v[live++] = block();
        } else {
            size_t j = next() % live;
            spry_free(v[j]);
            v[j] = v[--live];
        }
    }
    spry_trim();
    spry_stats_t s;
    spry_stats_get(&s);
    printf("live %zu blocks, in use after trim %zu KiB\n", live, s.in_use >> 10);
    CHECKF(s.in_use < LIMIT_KIB * 1024, "in use %zu KiB, limit %d KiB", s.in_use >> 10, LIMIT_KIB);
    for (size_t i = 0; i < live; i++) spry_free(v[i]);
    return 0;
}
