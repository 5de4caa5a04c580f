/* cpu_count.c: the CPUs spry counts for its heaps' shares of free memory
 * (segment.c, spry_heap_share) are the ones the process may run on, not the
 * host's: glibc sized its arenas by the host's cores, not a container's
 * (anchors: amule, opendcdiag, xearthlayer). The affinity mask is asked of
 * the kernel directly (os.c); this checks it against glibc's answer:
 * - as the test starts: equal, or fewer where a cgroup quota caps it;
 * - in a child bound to one CPU, then (with two or more) to two: 1, then
 *   2 (or the quota's cap).
 * The quota itself (cgroup v2 cpu.max) cannot be set here without
 * privileges: where the file exists with a limit, the count must not
 * exceed its ceiling.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "../src/os.h"

/* The cgroup v2 quota's ceiling in CPUs, or 0 for none. */
static int quota_cpus(void) {
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (!f) return 0;
    long quota = 0, period = 0;
    int got = fscanf(f, "%ld %ld", &quota, &period);
    fclose(f);
    if (got != 2 || quota <= 0 || period <= 0) return 0;      /* "max ..." */
    return (int)((quota + period - 1) / period);
}

static int expected(int affinity) {
    int q = quota_cpus();
    return q > 0 && q < affinity ? q : affinity;
}

/* In a child bound to the first n CPUs of the mask: spry's count. */
static void check_bound(const cpu_set_t *all, int n) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        int taken = 0;
        for (int c = 0; c < CPU_SETSIZE && taken < n; c++)
            if (CPU_ISSET(c, all)) { CPU_SET(c, &set); taken++; }
        CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
        int want = expected(n), got = spry_os_cpu_count();
        CHECKF(got == want, "bound to %d CPUs: spry counts %d, expected %d", n, got, want);
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child bound to %d CPUs: status %d", n, st);
}

int main(void) {
    cpu_set_t all;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    int affinity = CPU_COUNT(&all);
    int got = spry_os_cpu_count();
    CHECKF(got == expected(affinity), "spry counts %d CPUs, the mask %d (quota ceiling %d)", got,
           affinity, quota_cpus());
    check_bound(&all, 1);
    if (affinity >= 2) check_bound(&all, 2);
    printf("cpu_count: %d CPUs of the mask, %d counted; bound to 1%s: as expected\n", affinity, got,
           affinity >= 2 ? " and 2" : "");
    return 0;
}
