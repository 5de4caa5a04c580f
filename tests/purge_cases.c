/* Memory comes back in the cases a plain free-then-sleep test misses: each
 * scenario runs in its own child (a fresh process, so the purge thread's
 * state is the scenario's), frees, never calls the allocator again, and
 * expects RSS to fall within 2 s:
 *  huge          one 100 MiB block freed, as the first free of the process
 *  huge-asleep   the same after the purge thread went to sleep with nothing
 *                left to do (its next wake-up must come from this free)
 *  huge-left     the same after the purge thread left the idle program
 *                (`Threads: 1`): this free must bring a new one
 *  dormant       2 M small blocks of a thread that exited, freed by main
 *                (they land in a dormant heap that nobody owns) */
#include "check.h"
#include "rss.h"
#include "threads.h"
#include <spry.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#define MiB ((size_t)1 << 20)
#define NSMALL 2000000
static void **blocks;

static void sleep_ms(long ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* RSS must fall to within `slack` of `floor` in 2 s with no allocator call. */
static void expect_drop(const char *what, size_t floor, size_t slack) {
    size_t r = 0;
    for (int i = 0; i < 20; i++) {
        sleep_ms(100);
        r = rss_bytes();
        if (r <= floor + slack) return;
    }
    CHECKF(0, "%s: RSS still %zu MiB 2 s after the last free (floor %zu MiB)", what,
           r / MiB, floor / MiB);
}

static void *producer(void *arg) {
    (void)arg;
    for (size_t i = 0; i < NSMALL; i++) {
        blocks[i] = spry_malloc(64);
        CHECK(blocks[i] != NULL);
        memset(blocks[i], 1, 64);
    }
    return NULL;
}

static int scenario(const char *what) {
    void *warm = spry_malloc(100);
    size_t base = rss_bytes();
    if (strncmp(what, "huge", 4) == 0) {
        if (strcmp(what, "huge-asleep") == 0 || strcmp(what, "huge-left") == 0) {
            /* a huge block's free starts the purge thread (a large one's
             * would stay in the heap's hot cache) */
            void *x = spry_malloc(8 * MiB);
            CHECK(x != NULL);
            memset(x, 1, 8 * MiB);
            spry_free(x);
            CHECKF(threads_wait(threads_above_one, 10.0) >= 0,
                   "the purge thread did not start (Threads: %d)", proc_threads());
        }
        if (strcmp(what, "huge-asleep") == 0)
            sleep_ms(900);            /* it purges (2 delays) and goes to
                                         sleep; it leaves only after 1 s */
        if (strcmp(what, "huge-left") == 0)
            CHECKF(threads_wait(threads_is_one, 30.0) >= 0,
                   "the idle purge thread did not leave (Threads: %d)", proc_threads());
        base = rss_bytes();
        size_t n = 100 * MiB;
        char *p = spry_malloc(n);
        CHECK(p != NULL);
        memset(p, 1, n);
        CHECK(rss_bytes() >= base + 90 * MiB);
        spry_free(p);
        expect_drop(what, base, 8 * MiB);
    } else if (strcmp(what, "dormant") == 0) {
        blocks = spry_malloc(NSMALL * sizeof *blocks);
        CHECK(blocks != NULL);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, producer, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
        sleep_ms(600);                /* the producer's heap is dormant now */
        size_t full = rss_bytes();
        CHECK(full >= base + 100 * MiB);
        for (size_t i = 0; i < NSMALL; i++) spry_free(blocks[i]);
        spry_free(blocks);
        expect_drop(what, base, 24 * MiB);
    }
    spry_free(warm);
    printf("%s: ok\n", what);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) return scenario(argv[1]);
    const char *all[] = { "huge", "huge-asleep", "huge-left", "dormant" };
    for (unsigned i = 0; i < sizeof all / sizeof *all; i++) {
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], all[i], (char *)NULL);
            _exit(127);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "scenario %s failed (status %d)", all[i], st);
    }
    return 0;
}
