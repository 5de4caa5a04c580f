/* reports.h: what spry said on stderr while a piece of a test ran. */
#ifndef SPRY_TEST_REPORTS_H
#define SPRY_TEST_REPORTS_H

#include "check.h"
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

#endif
