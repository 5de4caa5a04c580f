/* A stale pointer into a page that went back to its segment is reported,
 * whatever took the page's first slice since (review of the span code).
 *
 * Eight blocks of 128 KiB fill a 16-slice class page; all are freed and
 * spry_trim gives the page back. A smaller class page then takes the old
 * page's first slice. The old slices after its end used to keep naming the
 * descriptor (now the smaller page's), so a second free of the old block
 * 7/8 into the old page was taken for a block of the new page: not
 * reported, and that address was later handed out, outside every page, and
 * overlapped by a span. Run with SPRY_PURGE_THREAD=0: spry_trim alone
 * decides when the page goes back. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <stdlib.h>

static void refree(void *p) { spry_free(p); }

static void run(size_t small) {
    const size_t big = 131072;
    void *keep = spry_malloc(100);          /* keeps the segment from going back */
    char *b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = spry_malloc(big);
        CHECK(b[i] != NULL);
        memset(b[i], i, big);
    }
    for (int i = 0; i < 8; i++) spry_free(b[i]);
    spry_trim();
    char *s = spry_malloc(small);           /* a smaller page at the old first slice */
    CHECK(s != NULL);
    size_t e = errors_now();
    int n = count_reports(refree, b[7], "spry:");
    CHECKF(n == 1 && errors_now() == e + 1,
           "a second free of %p (old page %p; a %zu-byte block now at %p) made %d reports",
           (void *)b[7], (void *)b[0], small, (void *)s, n);
    char *x[64];
    for (int i = 0; i < 64; i++) {
        x[i] = spry_malloc(small);
        CHECKF(x[i] != b[7], "malloc(%zu) handed out the stale block %p", small, (void *)b[7]);
    }
    for (int i = 0; i < 64; i++) spry_free(x[i]);
    spry_free(s);
    spry_free(keep);
}

int main(void) {
    static const size_t smalls[] = {40000, 20000, 5000, 500};
    for (size_t i = 0; i < sizeof smalls / sizeof smalls[0]; i++) run(smalls[i]);
    printf("stale_span: ok\n");
    return 0;
}
