/* printed_stats.h: spry_stats_print's text, for the figures that are
 * printed only (not in spry_stats_t, whose size programs built against
 * older headers rely on) and the census's rows. Through a file: the record
 * is one write, and with every class and the table near the peak it
 * outgrows a pipe's buffer. */
#ifndef SPRY_TEST_PRINTED_STATS_H
#define SPRY_TEST_PRINTED_STATS_H

#include "check.h"
#include <spry.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The text of one spry_stats_print (a static buffer, the next call's too). */
static inline const char *printed_text(void)
{
    static char text[256 * 1024];
    char path[] = "/tmp/spry-printed-stats-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    spry_stats_print(fd);
    ssize_t len = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    CHECK(len > 0);
    text[len] = 0;
    return text;
}

/* name: the figure's label as printed, with its ": " ("walk.spares_taken: ") */
static inline size_t printed_figure(const char *name)
{
    const char *text = printed_text();
    const char *s = strstr(text, name);
    CHECKF(s != NULL, "no %s in the statistics", name);
    return (size_t)strtoull(s + strlen(name), NULL, 10);
}

/* A size class's row of the census. */
typedef struct { size_t pages, spanned, resident, carved, in_use, cached, waiting; } printed_row_t;

/* The row of the class of `size` bytes in `text`, before `end` if not NULL;
 * *found: whether there is one (a row that does not parse fails CHECK). */
static inline printed_row_t printed_class_row(const char *text, const char *end, size_t size, bool *found)
{
    char head[32];
    snprintf(head, sizeof head, "\n  %zu B:", size);
    const char *s = strstr(text, head);
    printed_row_t r = {0};
    *found = s != NULL && (!end || s < end);
    if (!*found) return r;
    int n = sscanf(s + strlen(head), " pages %zu spanned %zu resident %zu carved %zu in_use %zu cached %zu waiting %zu",
                   &r.pages, &r.spanned, &r.resident, &r.carved, &r.in_use, &r.cached, &r.waiting);
    CHECKF(n == 7, "the row of %zu B did not parse (%d fields): %.200s", size, n, s + 1);
    return r;
}

#endif
