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

#define BIG 3000
#define BIG_CLASS 3072
#define PEAK_HEAD "spry size classes near the peak"

static void *big[3000];

typedef struct { size_t pages, spanned, resident, carved, in_use, cached, waiting; } row_t;

/* spry_stats_print's text, through a file (a few KiB, well within). */
static const char *printed(void)
{
    static char text[256 * 1024];
    char path[] = "/tmp/spry-stats-peak-XXXXXX";
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

/* The row of the class of `size` bytes in `text` (up to `end`, if not NULL);
 * found: whether there is one. */
static row_t class_row(const char *text, const char *end, size_t size, bool *found)
{
    char head[32];
    snprintf(head, sizeof head, "\n  %zu B:", size);
    const char *s = strstr(text, head);
    row_t r = {0};
    *found = s != NULL && (!end || s < end);
    if (!*found) return r;
    int n = sscanf(s + strlen(head), " pages %zu spanned %zu resident %zu carved %zu in_use %zu cached %zu waiting %zu",
                   &r.pages, &r.spanned, &r.resident, &r.carved, &r.in_use, &r.cached, &r.waiting);
    CHECKF(n == 7, "the row of %zu B did not parse (%d fields): %.200s", size, n, s + 1);
    return r;
}

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
    row_t r = class_row(peak, NULL, BIG_CLASS, &found);
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
    const char *text = printed();
    if (absent) {
        CHECKF(strstr(text, PEAK_HEAD) == NULL, "a table at the peak without SPRY_STATS:\n%s", text);
        return 0;
    }
    /* now: nothing of class 3,072 in use */
    const char *peak = strstr(text, PEAK_HEAD);
    bool found;
    row_t now = class_row(text, peak, BIG_CLASS, &found);
    if (found) CHECK_EQ(now.in_use, (size_t)0);
    check_peak(text, 1000);

    use(3000);
    spry_trim();
    release(3000);
    check_peak(printed(), 3000);

    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        check_peak(printed(), 3000);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's check failed (status %d)", status);
    return 0;
}
