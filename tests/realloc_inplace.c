/* realloc of large blocks (256 KiB - 2 MiB) and huge ones grows in place when
 * the memory after the block is free, and shrinks in place, keeping the
 * contents; a grow that cannot stay in place still keeps them. */
#include "check.h"
#include <spry.h>
#include <stdlib.h>

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 512) p[i] = (unsigned char)(i / 512 + seed);
    p[n - 1] = (unsigned char)seed;
}

static void check_fill(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 512)
        CHECKF(p[i] == (unsigned char)(i / 512 + seed), "byte %zu of %zu lost", i, n);
}

int main(void) {
    /* A fresh thread heap: the slices after the first large block are free. */
    unsigned char *p = spry_malloc(300 * 1024);
    CHECK(p != NULL);
    fill(p, 300 * 1024, 7);
    unsigned char *q = spry_realloc(p, 450 * 1024);
    CHECK(q != NULL);
    CHECKF(q == p, "300 KiB -> 450 KiB moved (%p -> %p) though the next slices were free",
           (void *)p, (void *)q);
    CHECK(spry_usable_size(q) >= 450 * 1024);
    check_fill(q, 300 * 1024, 7);
    fill(q, 450 * 1024, 9);
    /* grow again, up to the large limit */
    unsigned char *r = spry_realloc(q, 1500 * 1024);
    CHECK(r == q);
    check_fill(r, 450 * 1024, 9);
    /* shrink in place: the tail goes back, the pointer stays */
    unsigned char *s = spry_realloc(r, 600 * 1024);
    CHECK(s == r);
    CHECK(spry_usable_size(s) >= 600 * 1024 && spry_usable_size(s) < 1500 * 1024);
    check_fill(s, 300 * 1024, 9);
    /* the freed tail is reusable: a block placed there must not overlap */
    unsigned char *t = spry_malloc(800 * 1024);
    CHECK(t != NULL);
    CHECK(t >= s + spry_usable_size(s) || t + 800 * 1024 <= s);
    fill(t, 800 * 1024, 3);
    check_fill(s, 300 * 1024, 9);
    /* now the block cannot grow in place: it moves, contents intact */
    unsigned char *u = spry_realloc(s, 2000 * 1024);
    CHECK(u != NULL);
    check_fill(u, 300 * 1024, 9);
    check_fill(t, 800 * 1024, 3);
    spry_free(t);
    spry_free(u);

    /* huge blocks grow into the rest of their 4 MiB run without moving */
    unsigned char *h = spry_malloc(2500 * 1024);
    CHECK(h != NULL);
    fill(h, 2500 * 1024, 5);
    unsigned char *h2 = spry_realloc(h, 3500 * 1024);
    CHECK(h2 == h);
    check_fill(h2, 2500 * 1024, 5);
    unsigned char *h3 = spry_realloc(h2, 40u << 20);   /* must move */
    CHECK(h3 != NULL);
    check_fill(h3, 2500 * 1024, 5);
    spry_free(h3);
    printf("realloc_inplace: ok\n");
    return 0;
}
