/* A report is written with write(2), a cancellation point: a thread with a
 * cancel pending (deferred, the default) that made a double free or freed
 * an invalid pointer was cancelled inside spry, in the middle of the call,
 * wherever the report came from (a review; a report from a collection of
 * remote frees comes inside the heap's guard, with the lists cut). So was
 * the first free of a pointer outside spry's memory, which reads
 * /proc/self/stat for the program break. Now cancellation is off while
 * spry writes, and it reads files with plain system calls: the calls
 * return, and the cancel acts at the thread's next cancellation point. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>

static atomic_int cancel_sent;
/* outside spry's memory, shaped as a glibc chunk (prev_size, size 48) so
 * that spry looks for glibc's program break before it reports it */
static _Alignas(16) size_t not_a_block[8] = { 0, 48 };
static atomic_int returned;         /* misuse calls that came back */

static void *victim(void *arg) {
    (void)arg;
    char *big = spry_malloc(200000), *small = spry_malloc(3000);
    CHECK(big && small);
    spry_free(small);
    /* no cancellation point until the calls below */
    while (!atomic_load(&cancel_sent)) {}
    spry_free(not_a_block + 2);                    /* outside spry's memory */
    atomic_fetch_add(&returned, 1);
    spry_free(big + 64);                           /* invalid pointer */
    atomic_fetch_add(&returned, 1);
    spry_free(small);                              /* double free */
    atomic_fetch_add(&returned, 1);
    errno = 0;
    void *r = spry_realloc(big + 4096, 100);       /* invalid realloc */
    CHECK(r == NULL && errno == EINVAL);
    atomic_fetch_add(&returned, 1);
    spry_free(big);
    pthread_testcancel();
    CHECKF(0, "the pending cancel did not act at pthread_testcancel");
    return NULL;
}

int main(void) {
    watchdog_start(60);
    for (int round = 0; round < 3; round++) {
        atomic_store(&cancel_sent, 0);
        atomic_store(&returned, 0);
        size_t e = errors_now();
        pthread_t t;
        CHECK(pthread_create(&t, NULL, victim, NULL) == 0);
        CHECK(pthread_cancel(t) == 0);
        atomic_store(&cancel_sent, 1);
        void *res;
        CHECK(pthread_join(t, &res) == 0);
        CHECK(res == PTHREAD_CANCELED);
        CHECKF(atomic_load(&returned) == 4, "round %d: %d of 4 misuse calls returned before the "
               "cancel", round, atomic_load(&returned));
        CHECKF(errors_now() == e + 4, "round %d: %zu reports, not 4", round, errors_now() - e);
    }
    return 0;
}
