/* hot_age.c: a thread's hot large spans (src/large.c: the large blocks it
 * freed, kept whole and resident for its next malloc of the same size) go
 * back when it stops using them, though it stays busy.
 *
 * The thread mallocs and frees a burst of large blocks (300 KB-2 MB), then
 * works on with 2,000 B blocks only: their paths never reach the slow path
 * that ages the hot cache, and never look idle, so only a purge pass's
 * aging (spry_large_hot_age, under the guard) can give the spans back.
 * Without it the hot cache kept its bound resident for good: 17 MB at one
 * thread, 127 MB at 8 (a review). The spans in use must fall back to
 * within 2 MiB of what they were before the burst; polled, 60 s at most. */
#include <spry.h>
#include <stdio.h>
#include <string.h>

#include "busy_pairs.h"
#include "check.h"
#include "threads.h"

#define BURST 200

static size_t in_use_now(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s.in_use;
}

int main(void) {
    if (spry_option_get("SPRY_PURGE_THREAD") == 0) {
        printf("hot_age: no purge thread, no aging: skipped\n");
        return 77;
    }
    static void *b[BURST];
    spry_trim();
    size_t before = in_use_now();
    unsigned r = 12345;
    for (size_t i = 0; i < BURST; i++) {
        r = r * 1103515245u + 12345u;
        size_t n = 300000 + (r >> 8) % 1700000;
        b[i] = spry_malloc(n);
        CHECK(b[i] != NULL);
        memset(b[i], 0x77, 4096);
        ((char *)b[i])[n - 1] = 0x77;
    }
    for (size_t i = 0; i < BURST; i++) spry_free(b[i]);
    size_t after = in_use_now();
    CHECKF(after > before + ((size_t)2 << 20), "the hot cache kept nothing: %zu -> %zu bytes in use", before,
           after);
    size_t now = after;
    double start = threads_now_s(), took = -1;
    while (threads_now_s() - start < 60) {
        busy_pairs(1000);
        now = in_use_now();
        if (now <= before + ((size_t)2 << 20)) {
            took = threads_now_s() - start;
            break;
        }
        threads_sleep_ms(1);
    }
    CHECKF(took >= 0, "%zu MB in use 60 s after the burst, %zu MB before it", now >> 20, before >> 20);
    printf("hot_age: %zu MB in use after the burst, back to %zu MB (before: %zu) in %.2f s\n", after >> 20,
           now >> 20, before >> 20, took);
    return 0;
}
