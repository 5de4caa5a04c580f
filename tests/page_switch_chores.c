/* A thread whose mallocs only switch between pages already queued (a large
 * live set of one small class, churned) still does its chores: the blocks
 * another thread freed into its full pages come back (its inbox), and with
 * no purge thread its freed pages are still purged.
 *
 * Page switches skip the malloc slow path when nothing waits; the first
 * version skipped it always, and such a thread kept 19 MB that another
 * thread had freed into it for good (mode inbox), and with
 * SPRY_PURGE_THREAD=0 never purged what it freed itself (mode purge).
 *
 *   page_switch_chores inbox | purge
 * (purge: run with SPRY_PURGE_THREAD=0 and a short SPRY_PURGE_DELAY_MS) */
#include "check.h"
#include <spry.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define LIVE 200000            /* 32 B blocks churned: page switches only */
#define BIG  300000            /* 64 B blocks freed before the churn: 19 MB */
#define MiB  ((size_t)1 << 20)

static void *live[LIVE], *big[BIG];

static void *free_big(void *arg) {
    (void)arg;
    for (size_t i = 0; i < BIG; i++) spry_free(big[i]);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t figure(int dirty) {
    spry_stats_t s;
    spry_stats_get(&s);
    return dirty ? s.dirty : s.in_use;
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    int inbox = strcmp(argv[1], "inbox") == 0;
    CHECK(inbox || strcmp(argv[1], "purge") == 0);
    for (size_t i = 0; i < LIVE; i++) {
        live[i] = spry_malloc(32);
        CHECK(live[i] != NULL);
        memset(live[i], (int)(i & 0xff), 32);
    }
    size_t before = figure(0);
    for (size_t i = 0; i < BIG; i++) {
        big[i] = spry_malloc(64);
        CHECK(big[i] != NULL);
    }
    if (inbox) {
        /* another thread frees them: they wait in this heap's inbox */
        pthread_t t;
        CHECK(pthread_create(&t, NULL, free_big, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    } else {
        free_big(NULL);                 /* pages freed here, to be purged */
    }
    /* churn until the figure is back near where it was: the inbox drained
     * (in_use) or the freed pages purged (dirty); a generous deadline */
    size_t target = inbox ? before + 4 * MiB : 4 * MiB;
    unsigned x = 12345;
    double start = now();
    size_t steps = 0;
    while (figure(!inbox) > target) {
        CHECKF(now() - start < 60, "after %zu steps still %zu MiB %s (target %zu MiB)", steps,
               figure(!inbox) / MiB, inbox ? "in use" : "dirty", target / MiB);
        for (int k = 0; k < 100000; k++, steps++) {
            x = x * 1103515245u + 12345u;
            size_t i = (x >> 8) % LIVE;
            CHECK(((unsigned char *)live[i])[31] == (unsigned char)(i & 0xff));
            spry_free(live[i]);
            live[i] = spry_malloc(32);
            CHECK(live[i] != NULL);
            memset(live[i], (int)(i & 0xff), 32);
        }
    }
    printf("page_switch_chores %s: ok after %zu steps\n", argv[1], steps);
    return 0;
}
