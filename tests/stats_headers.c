/* stats_headers.c: a segment header keeps resident only what was written:
 * its fixed part, its slice table and the descriptors of the pages it had
 * (here a few, 192 bytes each: at most two 4 KiB pages wherever its colour
 * puts it). A thread's exit rekeys its pages for the dormant heap; reading
 * every descriptor's kind to find them mapped the header's untouched pages
 * too (the kernel's zero page, which mincore, and so the census, counts):
 * four pages a segment after each exit (a review of the census).
 *
 * A thread mallocs blocks of 8 small classes and exits; main prints the
 * census: its headers row must show at most 8 KiB resident a segment. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spry.h"
#include "check.h"
#include "printed_stats.h"

static void *work(void *arg)
{
    (void)arg;
    void *p[64];
    for (int i = 0; i < 64; i++) {
        p[i] = spry_malloc((size_t)16 * (i % 8 + 1));
        CHECK(p[i] != NULL);
        memset(p[i], 1, 16);
    }
    for (int i = 0; i < 64; i += 2) spry_free(p[i]);
    return NULL;   /* the other half stays: the heap keeps its pages */
}

int main(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, work, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    const char *text = printed_text();
    const char *h = strstr(text, "\n  headers: segments ");
    CHECKF(h != NULL, "no headers row in:\n%s", text);
    size_t segments, spanned, resident;
    CHECK(sscanf(h, "\n  headers: segments %zu spanned %zu resident %zu", &segments, &spanned, &resident) == 3);
    printf("headers: segments %zu resident %zu\n", segments, resident);
    CHECK_GE(segments, (size_t)1);          /* the thread's */
    CHECK_LE(resident, segments * 8192);
    return 0;
}
