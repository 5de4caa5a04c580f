/* printed_stats.h: a figure of spry_stats_print's text, for the figures
 * that are printed only (not in spry_stats_t, whose size programs built
 * against older headers rely on). Through a pipe: the text is a few KiB,
 * well within its buffer. */
#ifndef SPRY_TEST_PRINTED_STATS_H
#define SPRY_TEST_PRINTED_STATS_H

#include "check.h"
#include <spry.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* name: the figure's label as printed, with its ": " ("walk.spares_taken: ") */
static size_t printed_figure(const char *name)
{
    static char text[16384];
    int fds[2];
    CHECK(pipe(fds) == 0);
    spry_stats_print(fds[1]);
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n < sizeof text - 1 && (got = read(fds[0], text + n, sizeof text - 1 - n)) > 0)
        n += (size_t)got;
    close(fds[0]);
    CHECK(n > 0);
    text[n] = 0;
    const char *s = strstr(text, name);
    CHECKF(s != NULL, "no %s in the statistics", name);
    return (size_t)strtoull(s + strlen(name), NULL, 10);
}

#endif
