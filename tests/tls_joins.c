/* Frees made by the dynamic loader: the thread-local storage of a
 * dlopen'ed library (1 MiB a thread, tls_big.c), which the loader mallocs
 * in each thread that touches it and frees when the thread is joined, with
 * glibc's stack-cache lock held.
 *
 * 48 threads touch it and exit; the main thread idles 4 s (long enough for
 * an idle purge thread to leave), then joins them all and idles. Within
 * 30 s (polled) the 48 MiB must be back: RSS within 16 MiB of where it
 * started. Before: the loader's free started the purge thread, and
 * pthread_create took the lock the join held: the join hung for good; then
 * the loader's frees no longer started it, but the thread had left, and
 * the memory stayed (a review). Run again through the loader itself
 * (tls_joins.sh), where AT_BASE is 0 and the loader was not found.
 *
 * usage: tls_joins PATH-TO-libspry_test_tls.so */
#define _GNU_SOURCE
#include "check.h"
#include "threads.h"
#include "rss.h"
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define THREADS 48
#define SLACK   ((size_t)16 << 20)

static void (*touch)(void);

static void *run(void *arg) {
    touch();
    return arg;
}

int main(int argc, char **argv) {
    CHECK(argc > 1);
    void *lib = dlopen(argv[1], RTLD_NOW);
    CHECKF(lib != NULL, "dlopen %s: %s", argv[1], dlerror());
    touch = (void (*)(void))dlsym(lib, "tls_big_touch");
    CHECK(touch != NULL);
    size_t start = rss_bytes();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, run, NULL) == 0);
    sleep(4);
    size_t before = rss_bytes();
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    double t0 = threads_now_s();
    size_t now = rss_bytes();
    while (now > start + SLACK && threads_now_s() - t0 < 30) {
        threads_sleep_ms(50);
        now = rss_bytes();
    }
    CHECKF(now <= start + SLACK, "RSS %zu KiB %.0f s after the joins (%zu KiB before them, %zu at "
           "the start)", now >> 10, threads_now_s() - t0, before >> 10, start >> 10);
    printf("tls_joins: RSS %zu KiB at the start, %zu with %d threads' TLS, %zu after their joins "
           "(%.1f s)\n", start >> 10, before >> 10, THREADS, now >> 10, threads_now_s() - t0);
    return 0;
}
