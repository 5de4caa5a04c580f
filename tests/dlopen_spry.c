/* dlopen_spry.c: libspry.so loaded with dlopen(RTLD_NOW | RTLD_LOCAL) by a
 * program that was not linked with it (so its TLS must fit the loader's
 * surplus: no "cannot allocate memory in static TLS block"). The prefixed API
 * is used through dlsym, from the main thread, from threads that existed
 * before the dlopen and from threads created after; glibc's blocks (this
 * program's own malloc) are freed through the dlsym'd spry_free.
 *
 * usage: dlopen_spry PATH/TO/libspry.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pattern.h"

static void *(*s_malloc)(size_t);
static void *(*s_realloc)(void *, size_t);
static void (*s_free)(void *);
static size_t (*s_usable)(const void *);
static bool (*s_owns)(const void *);

static pthread_barrier_t loaded;

static void work(uint64_t seed)
{
    void *blocks[256];
    size_t sizes[256];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 256; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            sizes[i] = 1 + (size_t)(seed >> 33) % (i % 16 == 0 ? 300000 : 2000);
            blocks[i] = s_malloc(sizes[i]);
            CHECKF(blocks[i] != NULL, "dlsym'd spry_malloc(%zu) failed", sizes[i]);
            CHECKF(s_owns(blocks[i]), "spry_owns(spry_malloc block) is false");
            CHECK(s_usable(blocks[i]) >= sizes[i]);
            pattern_fill(blocks[i], sizes[i]);
        }
        for (int i = 0; i < 256; i++) {
            CHECK_PATTERN(blocks[i], sizes[i], pattern_seed(blocks[i], sizes[i]),
                          "block of dlopen'd spry");
            s_free(blocks[i]);
        }
    }
    /* glibc's blocks go back to glibc through spry_free */
    for (int i = 0; i < 1000; i++) {
        size_t n = 1 + (size_t)i * 211 % 200000;
        unsigned char *g = malloc(n);
        CHECK_NOTNULL(g);
        CHECKF(!s_owns(g), "spry_owns(glibc block %p) is true", (void *)g);
        memset(g, 0x21, n);
        if (i % 3 == 0) {
            unsigned char *r = s_realloc(g, n + 1000);
            CHECKF(r != NULL, "spry_realloc of a glibc block failed");
            for (size_t k = 0; k < n; k += 97)
                CHECK_EQ(r[k], 0x21);
            s_free(r);
        } else {
            s_free(g);
        }
    }
}

static void *early_thread(void *arg)
{
    pthread_barrier_wait(&loaded); /* existed before the dlopen */
    work((uint64_t)(uintptr_t)arg);
    return NULL;
}

static void *late_thread(void *arg)
{
    work((uint64_t)(uintptr_t)arg * 77);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECKF(argc >= 2, "usage: %s PATH/TO/libspry.so", argv[0]);
    pthread_t early[4], late[4];
    CHECK_EQ(pthread_barrier_init(&loaded, NULL, 5), 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&early[i], NULL, early_thread,
                                (void *)(uintptr_t)(i + 1)), 0);

    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECKF(h != NULL, "dlopen(%s) failed: %s", argv[1], dlerror());
    s_malloc = (void *(*)(size_t))dlsym(h, "spry_malloc");
    s_realloc = (void *(*)(void *, size_t))dlsym(h, "spry_realloc");
    s_free = (void (*)(void *))dlsym(h, "spry_free");
    s_usable = (size_t(*)(const void *))dlsym(h, "spry_usable_size");
    s_owns = (bool (*)(const void *))dlsym(h, "spry_owns");
    CHECKF(s_malloc && s_realloc && s_free && s_usable && s_owns,
           "dlsym of the spry_* API failed: %s", dlerror());

    pthread_barrier_wait(&loaded);
    work(12345);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(pthread_create(&late[i], NULL, late_thread,
                                (void *)(uintptr_t)(i + 1)), 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(pthread_join(early[i], NULL), 0);
        CHECK_EQ(pthread_join(late[i], NULL), 0);
    }
    /* the process's own malloc is still glibc's (RTLD_LOCAL) */
    void *mine = malloc(100);
    CHECKF(!s_owns(mine), "RTLD_LOCAL dlopen took over the program's malloc");
    free(mine);
    printf("dlopen_spry: all checks passed\n");
    return 0;
}
