/* stats_peak.c: with SPRY_STATS set, the statistics add the class table as
 * a purge pass saw it near the peak (committed an eighth above the table
 * before), so that a print after the program's frees still says where the
 * memory went at its peak. Run with the purge thread off: the passes are
 * spry_trim's only, each taking its sample before it purges.
 *
 *  1,000 blocks of 3,000 B (class 3,072), trim: the sample; all freed,
 *  trim again (committed is no higher: no new sample). The print must show
 *  class 3,072 with nothing in use now, and at the peak exactly 1,000 blocks
 *  in use, nothing cached or waiting, with peak.committed at least their
 *  bytes. Then 3,000 blocks: a peak three times higher replaces the table
 *  (3,000 in use). A forked child prints the table it inherited (the lock of its copy
 *  is taken across fork) and checks the same row.
 *
 *  With "absent" (run with SPRY_STATS=0) the print has no such table: the
 *  walks are taken only when asked for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spry.h"
#include "check.h"
#include "printed_stats.h"

#define BIG 3000
#define BIG_CLASS 3072
#define PEAK_HEAD "spry size classes near the peak"

static void *big[3000];

/* The peak table's row of class 3,072: `blocks` in use, nothing cached or
 * waiting, and the sample's committed covering them. */
static void check_peak(const char *text, size_t blocks)
{
    const char *peak = strstr(text, PEAK_HEAD);
    CHECKF(peak != NULL, "no table at the peak in:\n%s", text);
    const char *c = strstr(peak, "peak.committed: ");
    CHECK(c != NULL);
    size_t committed = (size_t)strtoull(c + strlen("peak.committed: "), NULL, 10);
    bool found;
    printed_row_t r = printed_class_row(peak, NULL, BIG_CLASS, &found);
    CHECKF(found, "no row of %d B at the peak in:\n%s", BIG_CLASS, peak);
    printf("at the peak (committed %zu): %d B: pages %zu carved %zu in_use %zu cached %zu waiting %zu\n", committed,
           BIG_CLASS, r.pages, r.carved, r.in_use, r.cached, r.waiting);
    CHECK_EQ(r.in_use, blocks * BIG_CLASS);
    CHECK_EQ(r.cached, (size_t)0);
    CHECK_EQ(r.waiting, (size_t)0);
    CHECK_GE(r.carved, blocks * BIG_CLASS);
    CHECK_LE(r.in_use, r.resident);
    CHECK_GE(committed, blocks * BIG_CLASS);
}

static void use(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        big[i] = spry_malloc(BIG);
        CHECK(big[i] != NULL);
        memset(big[i], 0x5a, BIG);
    }
}

static void release(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = big[i];
        CHECK(p[0] == 0x5a && p[BIG - 1] == 0x5a);
        spry_free(big[i]);
    }
}

int main(int argc, char **argv)
{
    bool absent = argc > 1 && strcmp(argv[1], "absent") == 0;
    use(1000);
    spry_trim();
    release(1000);
    spry_trim();
    const char *text = printed_text();
    if (absent) {
        CHECKF(strstr(text, PEAK_HEAD) == NULL, "a table at the peak without SPRY_STATS:\n%s", text);
        return 0;
    }
    /* now: nothing of class 3,072 in use */
    const char *peak = strstr(text, PEAK_HEAD);
    bool found;
    printed_row_t now = printed_class_row(text, peak, BIG_CLASS, &found);
    if (found) CHECK_EQ(now.in_use, (size_t)0);
    check_peak(text, 1000);

    use(3000);
    spry_trim();
    release(3000);
    check_peak(printed_text(), 3000);

    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        check_peak(printed_text(), 3000);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's check failed (status %d)", status);
    return 0;
}
