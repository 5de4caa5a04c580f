/* Huge areas at their limits (review of huge.c):
 *  - rlimit: under an address-space limit that leaves room for 4 MiB chunks
 *    but not for a 256 MiB area, huge blocks fall back to huge segments,
 *    and the failed attempts cost nothing (an area's descriptors were taken
 *    before its run and lost when the run failed: 512 KiB per malloc, until
 *    the limit was eaten and blocks that fit were refused);
 *  - fork: a fork while another thread's free purges areas over budget (the
 *    area lock dropped around madvise) leaves the child no granule out of
 *    the bitmaps: with nothing live, the child's 64 MiB block goes into the
 *    existing empty area, not a new one.
 * Each part runs in a child process (the rlimit stays there). */
#define _GNU_SOURCE
#include "check.h"
#include "in_child.h"
#include <spry.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static spry_stats_t stats(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s;
}

static size_t vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7)) kb = strtoul(line + 7, NULL, 10);
    fclose(f);
    return kb * 1024;
}

static void rlimit_part(void) {
    spry_free(spry_malloc(100));
    size_t vm = vm_size();
    struct rlimit rl = { vm + 200 * MiB, vm + 200 * MiB };
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
    size_t mapped = stats().mapped;
    for (int i = 0; i < 400; i++) {
        void *p = spry_malloc(3 * MiB);
        CHECKF(p != NULL, "3 MiB malloc %d failed under a 200 MiB headroom", i);
        spry_free(p);
    }
    CHECKF(stats().mapped - mapped <= 16 * MiB,
           "400 mallocs of 3 MiB (each freed) mapped %zu MiB more", (stats().mapped - mapped) / MiB);
    /* 30 live: a 4 MiB chunk each, 120 of the 200 MiB left */
    void *keep[30];
    for (int i = 0; i < 30; i++) {
        keep[i] = spry_malloc(3 * MiB);
        CHECKF(keep[i] != NULL, "live 3 MiB block %d of 30 refused", i);
        memset(keep[i], i, 3 * MiB);
    }
    for (int i = 0; i < 30; i++) spry_free(keep[i]);
}

static atomic_int stop, in_free;
static _Atomic uintptr_t small_at;

/* A 200 MiB block (a huge segment) written and freed leaves dirty chunks;
 * the next area is carved from them, counted dirty, so freeing a 3 MiB
 * block in it goes over the budget and purges the area. */
static void *purger(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        unsigned char *big = spry_malloc(200 * MiB);
        CHECK(big != NULL);
        memset(big, 1, 200 * MiB);
        spry_free(big);
        void *small = spry_malloc(3 * MiB);
        CHECK(small != NULL);
        atomic_store(&small_at, (uintptr_t)small);
        atomic_store(&in_free, 1);
        spry_free(small);
        atomic_store(&in_free, 0);
        spry_trim();
    }
    return NULL;
}

static void fork_part(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, purger, NULL) == 0);
    for (int n = 0; n < 40; n++) {
        while (!atomic_load(&in_free)) sched_yield();
        usleep((useconds_t)(n % 7) * 300);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            /* forked after the free and before the trim that may give the
             * area back: no verdict */
            if (!atomic_load(&in_free)) _exit(0);
            uintptr_t base = atomic_load(&small_at), p = (uintptr_t)spry_malloc(64 * MiB);
            if (p == 0 || p < base - 192 * MiB || p >= base + 256 * MiB) {
                fprintf(stderr, "child of fork %d: nothing live, the area at %#lx empty, yet a "
                        "64 MiB block went to %#lx\n", n, (unsigned long)base, (unsigned long)p);
                _exit(1);
            }
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork %d: child failed", n);
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(t, NULL) == 0);
}

int main(void) {
    run_in_child(rlimit_part, "rlimit");
    run_in_child(fork_part, "fork");
    printf("huge_limits: ok\n");
    return 0;
}
