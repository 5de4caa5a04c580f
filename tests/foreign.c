/* foreign.c: pointers spry did not allocate (glibc's own malloc, reached
 * through dlopen("libc.so.6") so that no interposition can hide it) passed to
 * spry_free, spry_realloc and spry_usable_size are recognised and handed to
 * glibc: no crash, contents kept by realloc, the usable size glibc reports,
 * spry_owns false for them and true for spry's blocks, and spry's own heap
 * intact around them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spry.h"

#include "check.h"
#include "pattern.h"

static void *(*g_malloc)(size_t);
static void *(*g_calloc)(size_t, size_t);
static void *(*g_memalign)(size_t, size_t);
static void *(*g_realloc)(void *, size_t);
static size_t (*g_usable)(void *);
static void (*g_free)(void *);

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

static void load_glibc(void)
{
    void *h = dlopen("libc.so.6", RTLD_NOW);
    CHECKF(h != NULL, "dlopen(libc.so.6): %s", dlerror());
    g_malloc = (void *(*)(size_t))dlsym(h, "malloc");
    g_calloc = (void *(*)(size_t, size_t))dlsym(h, "calloc");
    g_memalign = (void *(*)(size_t, size_t))dlsym(h, "memalign");
    g_realloc = (void *(*)(void *, size_t))dlsym(h, "realloc");
    g_usable = (size_t(*)(void *))dlsym(h, "malloc_usable_size");
    g_free = (void (*)(void *))dlsym(h, "free");
    CHECK(g_malloc && g_calloc && g_memalign && g_realloc && g_usable && g_free);
    /* make sure these really are glibc's, not spry's */
    Dl_info info;
    CHECK(dladdr((void *)g_malloc, &info) != 0);
    CHECKF(strstr(info.dli_fname, "libc.so") != NULL,
           "dlsym(libc, malloc) resolved to %s", info.dli_fname);
}

/* glibc block sizes: tiny, fastbin, small, large, and above glibc's mmap
 * threshold (mmapped chunks) */
static const size_t sizes[] = {1, 24, 100, 1000, 5000, 70000, 200000, 3 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(void)
{
    load_glibc();
    spry_stats_t st0, st1;
    spry_stats_get(&st0);

    /* a spry block next to everything, to see that its heap stays intact */
    void *mine = spry_malloc(opaque(4000));
    CHECK_NOTNULL(mine);
    pattern_fill(mine, 4000);
    CHECKF(spry_owns(mine), "spry_owns(spry block %p) is false", mine);

    size_t foreign_freed = 0;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];

        /* free */
        void *p = g_malloc(n);
        CHECK_NOTNULL(p);
        CHECKF(!spry_owns(p), "spry_owns(glibc malloc(%zu) = %p) is true", n, p);
        CHECKF(spry_usable_size(p) == g_usable(p),
               "spry_usable_size(glibc block %p of %zu) = %zu, glibc says %zu",
               p, n, spry_usable_size(p), g_usable(p));
        spry_free(p);
        foreign_freed++;

        /* calloc'd and memalign'd glibc blocks (the latter do not start a
         * chunk) */
        p = g_calloc(1, n);
        CHECK_NOTNULL(p);
        CHECK(!spry_owns(p));
        spry_free(p);
        foreign_freed++;
        p = g_memalign(4096, n);
        CHECK_NOTNULL(p);
        CHECKF(!spry_owns(p), "spry_owns(glibc memalign(4096, %zu) = %p)", n, p);
        CHECK(spry_usable_size(p) == g_usable(p));
        spry_free(p);
        foreign_freed++;

        /* realloc grow and shrink keep the contents */
        size_t targets[] = {n * 2 + 10, n / 2 + 1, (size_t)5 << 20, 16};
        for (size_t t = 0; t < 4; t++) {
            unsigned char *q = g_malloc(n);
            CHECK_NOTNULL(q);
            pattern_fill_seed(q, n, 1000 + k);
            size_t keep = n < targets[t] ? n : targets[t];
            unsigned char *r = spry_realloc(q, opaque(targets[t]));
            CHECKF(r != NULL, "spry_realloc(glibc block of %zu, %zu) = NULL "
                              "errno %d", n, targets[t], errno);
            CHECK_PATTERN(r, keep, 1000 + k,
                          "spry_realloc of a glibc block kept the contents");
            CHECKF(spry_usable_size(r) >= targets[t],
                   "usable size %zu after spry_realloc(glibc block, %zu)",
                   spry_usable_size(r), targets[t]);
            memset(r, 0x42, targets[t]);
            spry_free(r);
        }

        /* realloc(p, 0) of a glibc block frees it and returns NULL */
        p = g_malloc(n);
        CHECK_NOTNULL(p);
        void *z = spry_realloc(p, opaque(0));
        CHECKF(z == NULL, "spry_realloc(glibc block, 0) returned %p", z);
    }

    /* many foreign and spry blocks interleaved, freed in a mixed order */
    enum { N = 20000 };
    static void *fp[N], *sp[N];
    for (int i = 0; i < N; i++) {
        size_t n = 1 + (size_t)(i * 7919) % 3000;
        fp[i] = g_malloc(n);
        sp[i] = spry_malloc(opaque(n));
        CHECK(fp[i] && sp[i]);
        pattern_fill(sp[i], n);
        CHECKF(!spry_owns(fp[i]), "spry_owns(glibc block %p) is true", fp[i]);
        CHECKF(spry_owns(sp[i]), "spry_owns(spry block %p) is false", sp[i]);
    }
    for (int i = N - 1; i >= 0; i--) {
        size_t n = 1 + (size_t)(i * 7919) % 3000;
        spry_free(fp[i]);
        foreign_freed++;
        CHECK_PATTERN(sp[i], n, pattern_seed(sp[i], n),
                      "spry block next to freed glibc blocks");
        spry_free(sp[i]);
    }
    /* glibc's heap is intact too: it can allocate and free again */
    for (int i = 0; i < 1000; i++) {
        void *q = g_malloc(opaque(1 + (size_t)i * 13));
        CHECK_NOTNULL(q);
        memset(q, 1, 1 + (size_t)i * 13);
        g_free(q);
    }

    CHECK_PATTERN(mine, 4000, pattern_seed(mine, 4000), "spry block");
    spry_free(mine);

    spry_stats_get(&st1);
    CHECKF(st1.foreign_frees - st0.foreign_frees >= foreign_freed,
           "stats.foreign_frees grew by %zu, but %zu foreign pointers were "
           "freed", st1.foreign_frees - st0.foreign_frees, foreign_freed);
    printf("foreign: %zu glibc blocks handed back; all checks passed\n",
           foreign_freed);
    return 0;
}
