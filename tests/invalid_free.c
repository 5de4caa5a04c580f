/* A wrong program: pointers into spry's memory that are not in any page
 * (the segment header, a slice never handed out) are reported on stderr and
 * ignored; the heap keeps working and live blocks keep their contents.
 * (A pointer into the middle of a live block of the freeing thread is not
 * checked: the fast path trusts it. That is the debug mode's job. Blocks
 * above 128 KiB are the exception: their frees are checked, and a pointer
 * into one is reported, not handed out again over the live block.) */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <stdint.h>
#include <stdlib.h>

static void free_header(void *seg) { spry_free((char *)seg + 64); }
static void free_unused(void *seg) { spry_free((char *)seg + 60 * 65536 + 16); }
static void free_interior(void *p) { spry_free((char *)p + 4096); }
static void *realloc_result;
static void realloc_interior(void *p) { realloc_result = spry_realloc((char *)p + 4096, 190000); }

int main(void) {
    unsigned char *live = spry_malloc(48);
    CHECK(live != NULL);
    memset(live, 0x5a, 48);
    uintptr_t seg = (uintptr_t)live & ~(uintptr_t)((1u << 22) - 1);
    CHECKF(count_reports(free_header, (void *)seg, "invalid pointer") == 1, "free of the segment header not reported");
    CHECKF(count_reports(free_unused, (void *)seg, "invalid pointer") == 1, "free into a never used slice not reported");
    unsigned char *big = spry_malloc(40000);
    CHECK(big != NULL);
    CHECK(spry_usable_size((void *)(seg + 64)) == 0);
    /* the owner's free of a pointer 4 KiB into a live block of 200,000 B
     * (a class-page block since blocks of 128-256 KiB moved there) */
    unsigned char *large = spry_malloc(200000);
    CHECK(large != NULL);
    memset(large, 0x6b, 200000);
    CHECKF(count_reports(free_interior, large, "invalid pointer") == 1, "interior free of a 200,000 B block not reported");
    /* and its realloc: reported, NULL, the block left as it is (the owner's
     * realloc took the interior pointer for a block and returned it, before
     * frees of these blocks were keyed SLOW; a review) */
    realloc_result = large;
    CHECKF(count_reports(realloc_interior, large, "invalid pointer") == 1, "interior realloc of a 200,000 B block not reported");
    CHECK(realloc_result == NULL);
    void *again = spry_malloc(200000 - 4096);
    CHECK(again != NULL);
    CHECKF((unsigned char *)again != large + 4096, "the interior pointer was handed out again");
    for (int i = 0; i < 200000; i++) CHECKF(large[i] == 0x6b, "the live block changed at %d", i);
    spry_free(again);
    spry_free(large);
    /* everything still works */
    for (int i = 0; i < 100000; i++) {
        void *p = spry_malloc((size_t)(i % 3000) + 1);
        CHECK(p != NULL);
        spry_free(p);
    }
    for (int i = 0; i < 48; i++) CHECK(live[i] == 0x5a);
    spry_free(big);
    spry_free(live);
    printf("invalid_free: reported and survived\n");
    return 0;
}
