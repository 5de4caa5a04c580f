/* A double free of a huge block whose first free is the one that starts
 * the purge thread (a review). The thread's start allocates (glibc callocs
 * its TLS vector), and it came after the block's memory went back: a heap
 * made for that allocation put its first segment on the chunks just
 * released, the allocation landed exactly where the block had been, and the
 * program's second free then freed it, unreported, handing out memory the
 * purge thread's TLS still used. Now the thread starts before the memory
 * goes back, and the second free is reported.
 *
 * Each case runs in a child of its own, so that no purge thread exists yet:
 * the first allocation of the process, or of a thread with no heap, is a
 * huge block, freed twice. Plain malloc and free, linked to the shared
 * library: pthread_create's own allocation must reach spry. */
#include "check.h"
#include "in_child.h"
#include "reports.h"
#include <spry.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { HUGE = 80 << 20, SMALL = 288, N = 64 };

/* The second free reported; then the small blocks the program gets (one of
 * them may well be where the huge block was: it was freed) stay intact,
 * each with its own contents. */
static void free_twice(void) {
    char *p = malloc(HUGE);
    CHECK(p != NULL);
    memset(p, 1, 4096);
    size_t before = errors_now();
    free(p);
    free(p);
    CHECKF(errors_now() == before + 1, "the second free of a huge block: %zu reports, want 1",
           errors_now() - before);
    char *q[N];
    for (int i = 0; i < N; i++) {
        q[i] = malloc(SMALL);
        CHECK(q[i] != NULL);
        memset(q[i], i, SMALL);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < SMALL; k++) CHECKF(q[i][k] == (char)i, "block %d changed under the program", i);
    for (int i = 0; i < N; i++) free(q[i]);
}

static void *thread_main(void *arg) {
    (void)arg;
    free_twice();
    return NULL;
}


static void first_of_process(void) { free_twice(); }

static void first_of_thread(void) {
    /* the process has a heap; the new thread has none */
    void *x = malloc(100);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    free(x);
}

int main(void) {
    run_in_child(first_of_process, "first allocation of the process");
    run_in_child(first_of_thread, "first allocation of a thread");
    printf("huge_first_double_free: both cases reported, later blocks intact\n");
    return 0;
}
