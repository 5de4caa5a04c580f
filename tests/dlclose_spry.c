/* dlclose_spry.c: dlclose of a dlopen'ed libspry is safe (issue 7, case 6).
 *
 * libspry.so is loaded with dlopen(RTLD_NOW | RTLD_LOCAL) and used through
 * dlsym until its purge thread runs (`Threads:` in /proc/self/status above
 * the program's own). Then, with about 90 MiB just freed (work left for the
 * purge thread) and a thread parked that has a spry heap (its exit runs
 * spry's key destructor), the library is dlclosed:
 *  - the process lives on for many purge delays, and RSS still falls back
 *    (a purge pass ran after the dlclose, in the library's code);
 *  - the parked thread exits cleanly;
 *  - a second dlopen of the same file works, and is dlclosed again.
 * Before the fix this died of SIGSEGV: the purge thread ran in unmapped code.
 *
 * usage: dlclose_spry PATH/TO/libspry.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pattern.h"
#include "rss.h"
#include "threads.h"

#define SLACK (24 * MiB)

static void *(*s_malloc)(size_t);
static void (*s_free)(void *);

static void *lib_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECKF(h != NULL, "dlopen(%s) failed: %s", path, dlerror());
    s_malloc = (void *(*)(size_t))dlsym(h, "spry_malloc");
    s_free = (void (*)(void *))dlsym(h, "spry_free");
    CHECKF(s_malloc && s_free, "dlsym of spry_malloc/spry_free failed: %s", dlerror());
    return h;
}

/* About 90 MiB in small, large and huge blocks, touched, checked, freed. */
static void churn(void)
{
    static void *blocks[10000];
    static size_t sizes[10000];
    size_t n = sizeof blocks / sizeof *blocks;
    for (size_t i = 0; i < n; i++) {
        sizes[i] = i % 2000 == 0 ? (size_t)8 << 20 : i % 50 == 0 ? 200000 : 16 + i % 2000;
        blocks[i] = s_malloc(sizes[i]);
        CHECKF(blocks[i] != NULL, "dlsym'd spry_malloc(%zu) failed", sizes[i]);
        pattern_fill(blocks[i], sizes[i]);
    }
    for (size_t i = 0; i < n; i++) {
        CHECK_PATTERN(blocks[i], sizes[i], pattern_seed(blocks[i], sizes[i]),
                      "block of dlopen'd spry");
        s_free(blocks[i]);
    }
}

static pthread_barrier_t parked;

/* Has a spry heap, and exits only after the dlclose. */
static void *parked_thread(void *arg)
{
    (void)arg;
    void *p = s_malloc(1000);
    CHECK_NOTNULL(p);
    s_free(p);
    pthread_barrier_wait(&parked); /* heap made */
    pthread_barrier_wait(&parked); /* library closed */
    return NULL;
}

/* After a dlclose: the process lives on and RSS falls back to base with no
 * call into spry; then wait for the purge thread to leave, or 3 s. */
static void after_close(size_t base, const char *when)
{
    size_t at_close = rss_bytes();
    double start = threads_now_s();
    size_t r;
    while ((r = rss_bytes()) > base + SLACK) {
        CHECKF(threads_now_s() - start < 10.0,
               "%s: RSS still %zu MiB 10 s after the dlclose (baseline %zu MiB)",
               when, r / MiB, base / MiB);
        threads_sleep_ms(50);
    }
    double fell = threads_now_s() - start;
    while (proc_threads() > 1 && threads_now_s() - start < 3.0)
        threads_sleep_ms(50);
    printf("dlclose_spry: %s: RSS %zu MiB above baseline at dlclose, back "
           "after %.2f s; alive %.2f s after it, Threads: %d\n", when,
           (at_close > base ? at_close - base : 0) / MiB, fell,
           threads_now_s() - start, proc_threads());
}

int main(int argc, char **argv)
{
    CHECKF(argc >= 2, "usage: %s PATH/TO/libspry.so", argv[0]);
    CHECK_EQ(proc_threads(), 1);
    size_t base = rss_bytes();

    void *h = lib_open(argv[1]);
    churn();
    CHECKF(threads_wait(threads_above_one, 10.0) >= 0,
           "spry's purge thread did not start (Threads: %d)", proc_threads());

    pthread_t t;
    CHECK_EQ(pthread_barrier_init(&parked, NULL, 2), 0);
    CHECK_EQ(pthread_create(&t, NULL, parked_thread, NULL), 0);
    pthread_barrier_wait(&parked);

    /* memory freed just now: the purge thread has a pass to make after the
     * dlclose */
    churn();
    CHECK_EQ(dlclose(h), 0);
    pthread_barrier_wait(&parked);
    CHECK_EQ(pthread_join(t, NULL), 0);
    after_close(base, "first dlclose");

    /* a second dlopen of the same file, used and closed again */
    h = lib_open(argv[1]);
    churn();
    CHECK_EQ(dlclose(h), 0);
    after_close(base, "second dlclose");

    printf("dlclose_spry: all checks passed\n");
    return 0;
}
