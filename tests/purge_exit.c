/* purge_exit.c: the purge thread leaves an idle program and comes back when
 * there is memory to return (issue 7, case 9).
 *
 * 1. Before any allocation, a forked child (single-threaded, no spry work)
 *    tries unshare(CLONE_NEWUSER): that tells whether this kernel and
 *    sandbox let this process make a user namespace at all.
 * 2. About 256 MiB allocated, touched and freed: the purge thread starts
 *    (`Threads:` in /proc/self/status goes to 2) and RSS falls back.
 * 3. No allocator call from here: within 30 s `Threads:` is 1 again (the
 *    thread left after its idle delays). The time it took is printed.
 * 4. unshare(CLONE_NEWUSER), which needs a single-threaded caller, works in
 *    this very process (asserted only where step 1 succeeded).
 * 5. The same 256 MiB again: the thread comes back, RSS falls back with no
 *    allocator call after the last free, and the thread leaves again.
 * Every wait polls every 50 ms with a generous bound: no fixed sleep that a
 * loaded machine could miss.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"
#include "rss.h"
#include "threads.h"

#define SLACK (20 * MiB)
#define NSMALL 500000

static void *small[NSMALL];
static void *medium[1200];
static void *big[12];

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

/* 500,000 x 128 B (64 MiB), 1,200 x 80 KiB (94 MiB), 12 x 8 MiB (96 MiB):
 * about 256 MiB, every page touched, then all freed. */
static void churn(void)
{
    for (size_t i = 0; i < NSMALL; i++) {
        small[i] = spry_malloc(opaque(128));
        CHECK_NOTNULL(small[i]);
        memset(small[i], (int)i, 128);
    }
    for (size_t i = 0; i < sizeof medium / sizeof *medium; i++) {
        medium[i] = spry_malloc(opaque(80 << 10));
        CHECK_NOTNULL(medium[i]);
        memset(medium[i], (int)i, 80 << 10);
    }
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        big[i] = spry_malloc(opaque((size_t)8 << 20));
        CHECK_NOTNULL(big[i]);
        memset(big[i], (int)i, (size_t)8 << 20);
    }
    for (size_t i = 0; i < NSMALL; i++)
        spry_free(small[i]);
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        spry_free(big[i]);
    for (size_t i = 0; i < sizeof medium / sizeof *medium; i++)
        spry_free(medium[i]);
}

/* 0 when a fresh single-threaded child may unshare(CLONE_NEWUSER), else
 * the errno it got. */
static int userns_probe(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno > 0 && errno < 126 ? errno : 125);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st), "userns probe child died (status %d)", st);
    return WEXITSTATUS(st);
}

/* RSS must fall to within SLACK of base, with no allocator call. */
static double wait_rss(size_t base, const char *when)
{
    double start = threads_now_s();
    size_t r;
    for (;;) {
        r = rss_bytes();
        if (r <= base + SLACK)
            return threads_now_s() - start;
        CHECKF(threads_now_s() - start < 10.0,
               "%s: RSS still %zu MiB 10 s after the last free (baseline %zu "
               "MiB, limit +%zu MiB)", when, r / MiB, base / MiB, SLACK / MiB);
        threads_sleep_ms(50);
    }
}

int main(void)
{
    int probe = userns_probe();
    CHECKF(proc_threads() == 1, "Threads: %d before any allocation", proc_threads());

    void *warm = spry_malloc(opaque(64));
    CHECK_NOTNULL(warm);
    spry_free(warm);
    spry_trim();
    size_t base = rss_bytes();

    /* 2. the purge thread starts and does its job */
    churn();
    double t_free = threads_now_s();
    double started = threads_wait(threads_above_one, 10.0);
    CHECKF(started >= 0, "the purge thread did not start (Threads: %d 10 s "
           "after freeing 256 MiB)", proc_threads());
    double fell = wait_rss(base, "first round");

    /* 3. idle: the thread leaves */
    double left = threads_wait(threads_is_one, 30.0);
    CHECKF(left >= 0, "Threads: %d 30 s after the last free: the purge thread "
           "stays in an idle program", proc_threads());
    double idle = threads_now_s() - t_free;
    printf("purge_exit: thread seen after %.2f s, RSS back after %.2f s, "
           "Threads: 1 %.2f s after the last free\n", started, fell, idle);

    /* 4. single-threaded again: a user namespace can be made */
    if (probe == 0) {
        int rc = unshare(CLONE_NEWUSER);
        CHECKF(rc == 0, "unshare(CLONE_NEWUSER) failed (errno %d: %s) although "
               "a fresh child could and Threads: is %d", errno, strerror(errno),
               proc_threads());
        printf("purge_exit: unshare(CLONE_NEWUSER) worked\n");
    } else {
        printf("purge_exit: unshare(CLONE_NEWUSER) not permitted here (a fresh "
               "child got errno %d: %s): that check is skipped\n", probe,
               strerror(probe));
    }

    /* 5. more memory to return: the thread comes back, then leaves again */
    churn();
    t_free = threads_now_s();
    started = threads_wait(threads_above_one, 10.0);
    CHECKF(started >= 0, "the purge thread did not come back (Threads: %d 10 s "
           "after freeing 256 MiB)", proc_threads());
    fell = wait_rss(base, "second round");
    left = threads_wait(threads_is_one, 30.0);
    CHECKF(left >= 0, "Threads: %d 30 s after the second round's last free",
           proc_threads());
    printf("purge_exit: second round: thread back after %.2f s, RSS back "
           "after %.2f s, Threads: 1 %.2f s after the last free; all checks "
           "passed\n", started, fell, threads_now_s() - t_free);
    return 0;
}
