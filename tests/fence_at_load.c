/* fence_at_load.c: spry registers the process for membarrier's private
 * expedited barrier as it loads, while the process has one thread: the
 * kernel then registers at once (3 us). Registered later, at the first
 * hurried look, with threads running, the kernel first waited for an RCU
 * grace period (10-14 ms on a 2-CPU VM), and so did the purge thread, while
 * the thread that asked for the look took memory fresh.
 *
 * With a second thread running, so that no registration could be quick
 * now, a barrier must succeed without the test registering. Run again with
 * SPRY_PURGE_THREAD=0 (nothing then needs the barrier), it must not: the
 * check above is not the kernel's doing. Skipped (77) where the kernel or a
 * sandbox has no private expedited barrier. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done;

static void *waiter(void *arg)
{
    pthread_mutex_lock(&lock);
    while (!done) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return arg;
}

int main(int argc, char **argv)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
        printf("fence_at_load: no private expedited barrier here: skipped\n");
        return 77;
    }
    bool off = argc > 1 && strcmp(argv[1], "off") == 0;
    void *p = spry_malloc(100);
    CHECK_NOTNULL(p);
    spry_free(p);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, waiter, NULL) == 0);
    long rc = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    int err = rc == 0 ? 0 : errno;
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    printf("fence_at_load%s: barrier with two threads: %s\n", off ? " (SPRY_PURGE_THREAD=0)" : "",
           rc == 0 ? "done" : strerror(err));
    if (off) {
        CHECKF(rc == -1 && err == EPERM, "registered though no purge thread may run (rc %ld, %s)", rc,
               strerror(err));
        return 0;
    }
    CHECKF(rc == 0, "the process was not registered at load (%s)", strerror(err));
    /* the same without the purge thread, in a fresh process */
    if (setenv("SPRY_PURGE_THREAD", "0", 1) != 0) return 1;
    fflush(stdout);
    char *args[] = { argv[0], "off", NULL };
    execv(argv[0], args);
    printf("fence_at_load: exec failed: %s\n", strerror(errno));
    return 1;
}
