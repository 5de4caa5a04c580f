/* Review of issue 7's hardening: programming errors that still corrupt a
 * heap or crash. Each case is one ctest test (the argument names it); each
 * fails on main at 267058b.
 *
 *  wild_block_same    free of a block start spry never handed out (carved,
 *                     on the page's free list) by the owner: the fast path
 *                     pushes it again, the free list links to itself and
 *                     every later malloc of the class returns that block.
 *  wild_block_remote  the same from a thread with no heap: the block is
 *                     queued, collected and handed out twice, unreported.
 *  stale_double       a double free whose first free emptied the page; after
 *                     spry_trim the span serves other classes and the stale
 *                     pointer is inside one of their blocks: the owner's fast
 *                     path pushes it, and two live blocks overlap.
 *  outbox8            8-byte blocks b, c, b freed by another thread that has
 *                     a heap: the batch links b -> c -> b, the send cuts it
 *                     at b, so the double free is not reported and c is
 *                     never handed out again.
 *  c0_owner_remote    an 8-byte block freed by its owner, then again by a
 *                     thread with no heap: the push rewrites the block's
 *                     link while it sits on the owner's free list, and the
 *                     owner's live bitmap sees the block only when it
 *                     collects, after handing it out again: two blocks are
 *                     handed out twice, nothing reported.
 *  large_interior     a stale pointer into the owner's own live large block
 *                     (its first free was long ago): the owner's fast path
 *                     took it for the block, released the live span and
 *                     handed it out again.
 *  huge_interior      a wild interior pointer of a live huge block above
 *                     512 MiB (a kernel mapping of its own, not in spry's
 *                     arena list) whose data looks like a glibc mmapped
 *                     chunk header is handed to glibc's free, which unmaps
 *                     part of the live block.
 *
 * A watchdog alarm turns a hang into a failure. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* n mallocs of `size`, none of which may be handed out twice. */
static void check_distinct(size_t size, int n) {
    char **got = spry_malloc((size_t)n * sizeof *got);
    CHECK(got != NULL);
    for (int i = 0; i < n; i++) {
        got[i] = spry_malloc(size);
        CHECK(got[i] != NULL);
        for (int j = 0; j < i; j++)
            CHECKF(got[i] != got[j], "block %p handed out twice (malloc %d and %d)", (void *)got[i], j, i);
    }
    for (int i = 0; i < n; i++) spry_free(got[i]);
    spry_free(got);
}

/* ---- wild_block_same / wild_block_remote --------------------------------- */

static char *g_victim;

static void *free_victim(void *arg) {
    (void)arg;
    spry_free(g_victim);
    return NULL;
}

static void wild_block(int remote) {
    size_t size = 208;                /* a class nothing else here uses */
    char *p = spry_malloc(size);
    CHECK(p != NULL);
    g_victim = p + size;              /* the next block: carved, never handed out */
    size_t before = errors_now();
    if (remote) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, free_victim, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    } else {
        spry_free(g_victim);
    }
    check_distinct(size, 200);
    CHECKF(errors_now() == before + 1, "free of a never handed out block not reported (errors %zu -> %zu)",
           before, errors_now());
    spry_free(p);
}

/* ---- stale_double ------------------------------------------------------- */

#define MAXB 20000
static char *blk[MAXB];
static size_t len[MAXB];
static int nb;

static int by_address(const void *a, const void *b) {
    const char *x = blk[*(const int *)a], *y = blk[*(const int *)b];
    return x < y ? -1 : x > y;
}

static void fill_classes(void) {
    for (size_t s = 16; s <= 1024 && nb < MAXB; s += 16)
        for (int k = 0; k < 40; k++) {
            blk[nb] = spry_malloc(s);
            CHECK(blk[nb] != NULL);
            len[nb++] = s;
        }
}

static void stale_double(void) {
    char *b[8];
    for (int i = 0; i < 8; i++) CHECK((b[i] = spry_malloc(208)) != NULL);
    char *stale = b[5];
    for (int i = 0; i < 8; i++) spry_free(b[i]);
    spry_trim();                      /* the emptied page goes back */
    fill_classes();                   /* other classes take its span */
    size_t before = errors_now();
    spry_free(stale);                 /* the double free */
    fill_classes();
    static int idx[MAXB];
    for (int i = 0; i < nb; i++) idx[i] = i;
    qsort(idx, (size_t)nb, sizeof idx[0], by_address);
    for (int i = 1; i < nb; i++) {
        char *a = blk[idx[i - 1]], *c = blk[idx[i]];
        CHECKF(a + len[idx[i - 1]] <= c, "live blocks overlap after a double free: %p (+%zu) and %p (+%zu)",
               (void *)a, len[idx[i - 1]], (void *)c, len[idx[i]]);
    }
    CHECKF(errors_now() == before + 1, "double free of %p not reported", (void *)stale);
    for (int i = 0; i < nb; i++) spry_free(blk[i]);
}

/* ---- outbox8 ------------------------------------------------------------ */

static char *g_b, *g_c;

static void *free_b_c_b(void *arg) {
    (void)arg;
    spry_free(spry_malloc(64));       /* this thread has a heap: frees batch */
    spry_free(g_b);
    spry_free(g_c);
    spry_free(g_b);                   /* the double free */
    return NULL;                      /* thread exit sends the batch */
}

static void outbox8(void) {
    g_b = spry_malloc(8);
    g_c = spry_malloc(8);
    CHECK(g_b && g_c);
    size_t before = errors_now();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_b_c_b, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    spry_trim();                      /* the owner collects */
    CHECKF(errors_now() == before + 1, "8-byte double free in a batch not reported (errors %zu -> %zu)",
           before, errors_now());
    /* c was freed once, correctly: it must come back (the page has 8064
     * blocks; 20000 mallocs cover it) */
    int seen_c = 0;
    static char *got[20000];
    for (int i = 0; i < 20000; i++) {
        got[i] = spry_malloc(8);
        CHECK(got[i] != NULL);
        if (got[i] == g_c) seen_c++;
    }
    CHECKF(seen_c == 1, "block freed once by another thread handed out %d times", seen_c);
    for (int i = 0; i < 20000; i++) spry_free(got[i]);
}

/* ---- c0_owner_remote ---------------------------------------------------- */

static void remote_free(char *p) {
    pthread_t t;
    g_victim = p;
    CHECK(pthread_create(&t, NULL, free_victim, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

static void c0_owner_remote(void) {
    char *b = spry_malloc(8), *x = spry_malloc(8);
    CHECK(b && x);
    size_t before = errors_now();
    remote_free(x);                   /* a correct remote free, pending */
    spry_free(b);                     /* a correct owner free */
    remote_free(b);                   /* the double free */
    check_distinct(8, 20000);
    CHECKF(errors_now() == before + 1, "8-byte double free (owner, then remote) not reported");
}

/* ---- large_interior ----------------------------------------------------- */

static void large_interior(void) {
    char *l = spry_malloc(800000);
    CHECK(l != NULL);
    memset(l, 0x5c, 800000);
    size_t before = errors_now();
    spry_free(l + 100000);            /* not the block's start */
    char *m = spry_malloc(800000);
    CHECK(m != NULL);
    CHECKF(m != l, "a live large block was handed out again after a free of its interior");
    CHECKF(errors_now() == before + 1, "free of a large block's interior not reported");
    for (size_t i = 0; i < 800000; i += 4096) CHECK(l[i] == 0x5c);
    spry_free(m);
    spry_free(l);
}

/* ---- huge_interior ------------------------------------------------------ */

static void segv(int sig) {
    (void)sig;
    static const char msg[] = "review_errors: SIGSEGV: a live huge block lost memory to a wild free\n";
    write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void huge_interior(void) {
    size_t n = (size_t)600 << 20;     /* above 512 MiB: a dedicated mapping */
    uint8_t *p = spry_malloc(n);
    CHECK(p != NULL);
    size_t off = (size_t)8 << 20;
    volatile size_t *hdr = (volatile size_t *)(p + off);
    hdr[0] = 0;                       /* program data that looks like a glibc */
    hdr[1] = 4096 | 2;                /* mmapped chunk: lead 0, 4 KiB, IS_MMAPPED */
    size_t before = errors_now();
    spry_free(p + off + 16);          /* wild interior pointer */
    signal(SIGSEGV, segv);
    ((volatile uint8_t *)p)[off + 100] = 1;
    CHECKF(errors_now() == before + 1, "wild interior pointer of a huge block not reported");
    spry_free(p);
}

int main(int argc, char **argv) {
    watchdog_start(60);
    CHECK(argc == 2);
    const char *c = argv[1];
    if (!strcmp(c, "wild_block_same")) wild_block(0);
    else if (!strcmp(c, "wild_block_remote")) wild_block(1);
    else if (!strcmp(c, "stale_double")) stale_double();
    else if (!strcmp(c, "outbox8")) outbox8();
    else if (!strcmp(c, "c0_owner_remote")) c0_owner_remote();
    else if (!strcmp(c, "large_interior")) large_interior();
    else if (!strcmp(c, "huge_interior")) huge_interior();
    else CHECKF(0, "unknown case %s", c);
    return 0;
}
