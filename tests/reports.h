/* reports.h: what spry reported while a piece of a test ran (stderr, the
 * errors statistic), and a watchdog that turns a hang into a failure. */
#ifndef SPRY_TEST_REPORTS_H
#define SPRY_TEST_REPORTS_H

#include "check.h"
#include <spry.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs fn(arg) with stderr sent to a temporary file; returns how many times
 * `what` appears in what was written there. */
static inline int count_reports(void (*fn)(void *), void *arg, const char *what) {
    char path[] = "/tmp/spry-reports-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    int saved = dup(2);
    CHECK(dup2(fd, 2) == 2);
    fn(arg);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    CHECK(n >= 0);
    buf[n] = 0;
    int count = 0;
    for (char *s = buf; (s = strstr(s, what)) != NULL; s++) count++;
    return count;
}

/* Double frees and invalid pointers spry has reported and ignored so far. */
static inline size_t errors_now(void) {
    spry_stats_t s;
    spry_stats_get(&s);
    return s.errors;
}

static void watchdog_fired(int sig) {
    (void)sig;
    static const char msg[] = "watchdog fired: the test hung (a deadlock or a looping list)\n";
    write(2, msg, sizeof msg - 1);
    _exit(3);
}

/* Fails the test (exit 3) if it is still running after `seconds`: generous,
 * so that only a hang trips it on a loaded machine. */
static inline void watchdog_start(unsigned seconds) {
    signal(SIGALRM, watchdog_fired);
    alarm(seconds);
}

#endif
