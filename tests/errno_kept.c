/* free and malloc_trim leave errno as they found it (POSIX says so of
 * free; glibc's trim does too), whatever spry does inside them (a review
 * found three ways it did not):
 * - the report of a double or invalid free, written to a closed stderr
 *   (EBADF);
 * - the first malloc_trim of a process, whose membarrier probe failed
 *   before the process registered for it (EPERM);
 * - frees that give memory back (munmap, madvise) or start the purge
 *   thread, and frees of blocks of every size, from the owner and from
 *   another thread.
 * Each case in a child of its own (a process that has not trimmed yet,
 * stderr closed there only); errno is set to a value no call of spry's
 * would leave before each call. */
#include "check.h"
#include "in_child.h"
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MARK = 4242 };

#define CHECK_KEPT(call, what)                                                      \
    do {                                                                            \
        errno = MARK;                                                               \
        call;                                                                       \
        CHECKF(errno == MARK, "%s: errno %d, was %d", what, errno, MARK);           \
    } while (0)

static void reports_to_closed_stderr(void) {
    void *volatile p = malloc(100);
    CHECK(p != NULL);
    free(p);
    close(2);
    CHECK_KEPT(free(p), "double free reported to a closed stderr");
    char *q = malloc(300);
    CHECK(q != NULL);
    CHECK_KEPT(free(q + 16), "invalid free reported to a closed stderr");
    free(q);
}

static void first_trim(void) {
    CHECK_KEPT(malloc_trim(0), "the process's first malloc_trim");
    CHECK_KEPT(malloc_trim(0), "a second malloc_trim");
}

static const size_t sizes[] = {8, 32, 1000, 3000, 40000, 200000, 600000, 8u << 20, 100u << 20};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };
static void *blocks[NSIZES];

static void *free_all(void *arg) {
    (void)arg;
    free(malloc(16));                  /* a heap of its own, then the others' */
    for (int i = 0; i < NSIZES; i++) CHECK_KEPT(free(blocks[i]), "another thread's free");
    return NULL;
}

static void frees_of_every_size(void) {
    for (int i = 0; i < NSIZES; i++) {
        void *p;
        CHECK_KEPT(p = malloc(sizes[i]), "a malloc that succeeds");
        CHECK(p != NULL);
        ((char *)p)[sizes[i] - 1] = 1;
        CHECK_KEPT(free(p), "the owner's free");
    }
    for (int i = 0; i < NSIZES; i++) CHECK((blocks[i] = malloc(sizes[i])) != NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_all, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_KEPT(malloc_trim(0), "a trim that returns memory");
}

int main(void) {
    run_in_child(reports_to_closed_stderr, "reports");
    run_in_child(first_trim, "first trim");
    run_in_child(frees_of_every_size, "frees");
    printf("errno_kept: free and malloc_trim leave errno as it was\n");
    return 0;
}
