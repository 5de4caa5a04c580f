/* stress_fork.c: fork from a multi-threaded process while its threads are
 * busy in the allocator. The child allocates and frees (in its main thread
 * and in a new thread), frees blocks it inherited, forks a grandchild that
 * does the same, and exits 0. A child that does not finish within its
 * deadline (a lock held across fork: deadlock) is killed and the test fails.
 *
 * usage: stress_fork THREADS FORKS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc_api.h"
#include "check.h"
#include "pattern.h"

#define CHILD_DEADLINE_S 20

struct block {
    void *p;
    size_t n;
};

#define SHARED_SLOTS 64
static struct block shared[SHARED_SLOTS];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int stop;

static struct block block_new(uint64_t *rng)
{
    struct block b;
    b.n = rng_size(rng);
    b.p = A_malloc(b.n);
    CHECKF(b.p != NULL, "malloc(%zu) failed", b.n);
    pattern_fill(b.p, b.n);
    return b;
}

static void block_free(struct block b, const char *when)
{
    if (!b.p)
        return;
    CHECK_PATTERN(b.p, b.n, pattern_seed(b.p, b.n), when);
    A_free(b.p);
}

/* parent threads: malloc/free/realloc and cross-thread hand-offs, forever */
static void *busy(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + 3;
    struct block local[16] = {{0, 0}};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        unsigned i = (unsigned)(rng_next(&rng) % 16);
        block_free(local[i], "parent thread's block");
        local[i] = block_new(&rng);
        if (rng_next(&rng) % 4 == 0) {
            unsigned j = (unsigned)(rng_next(&rng) % SHARED_SLOTS);
            pthread_mutex_lock(&shared_lock);
            struct block t = shared[j];
            shared[j] = local[i];
            pthread_mutex_unlock(&shared_lock);
            local[i] = t;
        }
        if (local[i].p && rng_next(&rng) % 8 == 0) {
            size_t m = 1 + rng_next(&rng) % 3000;
            size_t keep = m < local[i].n ? m : local[i].n;
            uint64_t seed = pattern_seed(local[i].p, local[i].n);
            void *q = A_realloc(local[i].p, m);
            CHECK_NOTNULL(q);
            CHECK_PATTERN(q, keep, seed, "realloc in parent thread");
            local[i].p = q;
            local[i].n = m;
            pattern_fill(q, m);
        }
    }
    for (int i = 0; i < 16; i++)
        block_free(local[i], "parent thread's block at exit");
    return NULL;
}

/* in the children: sizes up to 256 KiB, so that 30 forks stay quick */
static struct block child_block_new(uint64_t *rng)
{
    struct block b = block_new(rng);
    if (b.n > (256 << 10)) {
        A_free(b.p);
        b.n = 1 + b.n % (256 << 10);
        b.p = A_malloc(b.n);
        CHECKF(b.p != NULL, "malloc(%zu) failed in fork child", b.n);
        pattern_fill(b.p, b.n);
    }
    return b;
}

static void *child_thread(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    for (int k = 0; k < 500; k++) {
        struct block b = child_block_new(&rng);
        block_free(b, "block of a thread in the fork child");
    }
    return NULL;
}

/* what a child (and a grandchild) does */
static void child_work(uint64_t seed, int depth, struct block *inherited)
{
    uint64_t rng = seed;
    struct block mine[64];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 64; i++)
            mine[i] = child_block_new(&rng);
        for (int i = 0; i < 64; i++)
            block_free(mine[i], "block in fork child");
    }
    /* blocks allocated by the parent's threads before the fork */
    if (inherited)
        for (int j = 0; j < SHARED_SLOTS; j++)
            block_free(inherited[j], "block inherited from the parent");
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)(seed + 1)), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    if (depth == 0) {
        fflush(stdout);
        pid_t g = fork();
        CHECK(g >= 0);
        if (g == 0) {
            alarm(CHILD_DEADLINE_S);
            child_work(seed * 31 + 7, 1, NULL);
            exit(0);
        }
        int st;
        CHECK(waitpid(g, &st, 0) == g);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0,
               "grandchild failed: %s %d",
               WIFSIGNALED(st) ? "signal" : "exit status",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
}

int main(int argc, char **argv)
{
    CHECKF(argc >= 3, "usage: %s THREADS FORKS", argv[0]);
    int threads = atoi(argv[1]);
    int forks = atoi(argv[2]);
    CHECK(threads > 0 && threads <= 256 && forks > 0);

    pthread_t *tid = A_malloc(sizeof(pthread_t) * (size_t)threads);
    CHECK_NOTNULL(tid);
    for (int t = 0; t < threads; t++)
        CHECK_EQ(pthread_create(&tid[t], NULL, busy, (void *)(intptr_t)(t + 1)), 0);

    struct timespec pause = {0, 10 * 1000 * 1000};
    for (int f = 0; f < forks; f++) {
        nanosleep(&pause, NULL);
        /* snapshot of the shared slots: the child frees these blocks */
        struct block snap[SHARED_SLOTS];
        fflush(stdout);
        pthread_mutex_lock(&shared_lock);
        memcpy(snap, shared, sizeof snap);
        pid_t pid = fork();
        if (pid != 0)
            pthread_mutex_unlock(&shared_lock);
        CHECKF(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            alarm(CHILD_DEADLINE_S);
            child_work(0x5EED + (uint64_t)f, 0, snap);
            exit(0);
        }
        /* wait with a deadline: a deadlocked child fails the test */
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int st;
        for (;;) {
            pid_t w = waitpid(pid, &st, WNOHANG);
            CHECK(w >= 0);
            if (w == pid)
                break;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec > CHILD_DEADLINE_S + 5) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                CHECKF(0, "fork child %d (fork %d of %d) still running after "
                          "%d s: deadlock after fork",
                       (int)pid, f + 1, forks, CHILD_DEADLINE_S + 5);
            }
            struct timespec tick = {0, 5 * 1000 * 1000};
            nanosleep(&tick, NULL);
        }
        if (WIFSIGNALED(st))
            CHECKF(0, "fork child %d (fork %d of %d) killed by signal %d (%s)%s",
                   (int)pid, f + 1, forks, WTERMSIG(st), strsignal(WTERMSIG(st)),
                   WTERMSIG(st) == SIGALRM ? ": deadlock after fork" : "");
        CHECKF(WEXITSTATUS(st) == 0, "fork child %d exited with status %d",
               (int)pid, WEXITSTATUS(st));
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < threads; t++)
        CHECK_EQ(pthread_join(tid[t], NULL), 0);
    for (int j = 0; j < SHARED_SLOTS; j++)
        block_free(shared[j], "shared block at the end");
    A_free(tid);
    printf("stress_fork (%s): %d forks (each forking again) from a process "
           "with %d busy threads: all children exited 0\n",
           A_VARIANT, forks, threads);
    return 0;
}
