/* Fork children of a process whose threads come and go: each child starts
 * and joins a thread of its own, which frees blocks the child inherited.
 *
 * At such a join glibc frees the TLS of the stacks it caches (once its
 * stack cache is over its bound, which the parent's exited threads filled)
 * with the cache's lock held; a free that then started spry's purge thread
 * (the child has none; the free may have asked for one) hung for good in
 * pthread_create, which takes that lock (a review; the loader's frees no
 * longer start the thread: purge.c). A child that does not exit within its
 * deadline fails the test.
 *
 * Batches of up to 12 threads start, free a few blocks others left in a
 * shared table (before their first malloc), malloc and leave blocks of
 * 8 B to 300 KB, and exit, joined; one in 50 forks; two more threads keep
 * filling the table and one calls spry_trim in a loop. usage:
 * fork_thread_churn SECONDS */
#define _GNU_SOURCE
#include "check.h"
#include "threads.h"
#include <spry.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS            512
#define CHILD_DEADLINE_S 60

static _Atomic(void *) slots[SLOTS];
static atomic_int stop;

static unsigned next(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

static void leave(unsigned *s, void *p) {
    void *old = atomic_exchange(&slots[next(s) % SLOTS], p);
    if (old) spry_free(old);
}

static void take_some(unsigned *s, int n) {
    for (int i = 0; i < n; i++) {
        void *old = atomic_exchange(&slots[next(s) % SLOTS], NULL);
        if (old) spry_free(old);
    }
}

static void *worker(void *arg);

/* In the child: a thread of its own, joined, then out. */
static void child(unsigned s) {
    spry_free(spry_malloc(100));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, (void *)(uintptr_t)(s + 1)) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    _exit(0);
}

static void fork_and_wait(unsigned s) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) child(s);
    double t0 = threads_now_s();
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        CHECK(r >= 0);
        if (r == pid) break;
        if (threads_now_s() - t0 > CHILD_DEADLINE_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            CHECKF(0, "a fork child hung for %d s (its thread's join)", CHILD_DEADLINE_S);
        }
        threads_sleep_ms(5);
    }
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a fork child failed: status %#x", status);
}

static void *worker(void *arg) {
    unsigned s = (unsigned)(uintptr_t)arg;
    take_some(&s, (int)(next(&s) % 4));        /* before any malloc */
    if (next(&s) % 8 == 0) return NULL;        /* never mallocs */
    int n = 1 + (int)(next(&s) % 40);
    for (int i = 0; i < n; i++) {
        size_t size = 8 + next(&s) % (next(&s) % 16 == 0 ? 300000 : 2000);
        char *p = spry_malloc(size);
        CHECK(p != NULL);
        p[0] = 1;
        if (next(&s) % 3) leave(&s, p); else spry_free(p);
    }
    if (next(&s) % 50 == 0) fork_and_wait(s);
    return NULL;
}

static void *filler(void *arg) {
    unsigned s = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop)) {
        leave(&s, spry_malloc(16 + next(&s) % 500));
        if (next(&s) % 64 == 0) usleep(100);
    }
    return NULL;
}

static void *trimmer(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) spry_trim();
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    spry_free(spry_malloc(16));
    pthread_t helpers[3];
    CHECK(pthread_create(&helpers[0], NULL, trimmer, NULL) == 0);
    for (int i = 1; i < 3; i++)
        CHECK(pthread_create(&helpers[i], NULL, filler, (void *)(uintptr_t)(77 + i)) == 0);
    double end = threads_now_s() + seconds;
    unsigned s = 1;
    long batches = 0;
    while (threads_now_s() < end) {
        pthread_t t[12];
        int k = 1 + (int)(next(&s) % 12);
        for (int i = 0; i < k; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)next(&s)) == 0);
        for (int i = 0; i < k; i++) CHECK(pthread_join(t[i], NULL) == 0);
        batches++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) CHECK(pthread_join(helpers[i], NULL) == 0);
    for (int i = 0; i < SLOTS; i++) spry_free(atomic_exchange(&slots[i], NULL));
    printf("fork_thread_churn: %ld batches in %.0f s, every fork child done\n", batches, seconds);
    return 0;
}
