/* before_main.c: allocation before main and in other odd places, through
 * the standard names (linked with libspry.so):
 * - in a shared library's constructor that runs before libspry's
 *   initialisers (early_ctor.c), freed in main;
 * - in this program's constructor, freed in main;
 * - inside the dynamic loader: dlsym of a missing symbol and dlerror
 *   allocate;
 * - in a thread-specific-data destructor at thread exit;
 * - in an atexit handler and a destructor after main.
 * Every block must be spry's (spry_owns) and keep its contents.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spry.h"

#include "check.h"
#include "pattern.h"

extern void *early_blocks[3];

static void *ctor_blocks[4];
static size_t ctor_sizes[4] = {1, 100, 70000, 9 << 20};
static char *ctor_dl_error;
static uint64_t ctor_seed1;

__attribute__((constructor(101))) static void before_main(void)
{
    for (int i = 0; i < 4; i++) {
        ctor_blocks[i] = malloc(ctor_sizes[i]);
        if (ctor_blocks[i])
            pattern_fill(ctor_blocks[i], ctor_sizes[i]);
    }
    ctor_seed1 = pattern_seed(ctor_blocks[1], 100);
    ctor_blocks[1] = realloc(ctor_blocks[1], 5000); /* grows: pattern prefix */
    /* the loader allocates for the error message */
    void *sym = dlsym(RTLD_DEFAULT, "spry_test_no_such_symbol_anywhere");
    const char *err = dlerror();
    if (!sym && err)
        ctor_dl_error = strdup(err);
}

static pthread_key_t key;

static void tsd_destructor(void *v)
{
    /* runs at thread exit, possibly after spry's own thread cleanup */
    CHECK_PATTERN(v, 3000, pattern_seed(v, 3000), "TSD block at thread exit");
    free(v);
    for (int i = 0; i < 100; i++) {
        void *p = malloc(16 + (size_t)i * 100);
        CHECKF(p != NULL, "malloc in a TSD destructor failed");
        memset(p, 1, 16 + (size_t)i * 100);
        free(p);
    }
}

static void *thread_main(void *arg)
{
    (void)arg;
    void *v = malloc(3000);
    CHECK_NOTNULL(v);
    pattern_fill(v, 3000);
    CHECK_EQ(pthread_setspecific(key, v), 0);
    return NULL;
}

static void at_exit_handler(void)
{
    void *p = malloc(12345);
    CHECKF(p != NULL && spry_owns(p), "malloc in an atexit handler");
    free(p);
}

__attribute__((destructor)) static void after_main(void)
{
    char *p = malloc(100);
    CHECKF(p != NULL && spry_owns(p), "malloc in a destructor after main");
    free(p);
    /* the statement that everything passed comes last, from here */
    fputs("before_main: all checks passed\n", stdout);
    fflush(stdout);
}

int main(void)
{
    CHECKF(early_blocks[0] && early_blocks[1] && early_blocks[2],
           "malloc in an early library constructor returned NULL");
    CHECKF(strcmp(early_blocks[0], "early constructor") == 0,
           "early block lost its contents: '%s'", (char *)early_blocks[0]);
    for (int i = 0; i < 3; i++)
        CHECKF(spry_owns(early_blocks[i]),
               "block %d of the early constructor (%p) is not spry's", i,
               early_blocks[i]);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(((unsigned char *)early_blocks[1])[i], 0);
    for (size_t i = 0; i < ((size_t)3 << 20); i += 4096)
        CHECK_EQ(((unsigned char *)early_blocks[2])[i], 0x6B);
    for (int i = 0; i < 3; i++)
        free(early_blocks[i]);

    for (int i = 0; i < 4; i++) {
        CHECKF(ctor_blocks[i] != NULL, "malloc(%zu) before main failed",
               ctor_sizes[i]);
        CHECKF(spry_owns(ctor_blocks[i]), "block %p allocated before main is "
                                          "not spry's", ctor_blocks[i]);
    }
    /* block 1 was realloc'd to 5000: its first 100 bytes keep the pattern
     * of its first address */
    CHECK_PATTERN(ctor_blocks[0], 1, pattern_seed(ctor_blocks[0], 1),
                  "block allocated before main");
    CHECK_PATTERN(ctor_blocks[1], 100, ctor_seed1,
                  "block allocated and realloc'd before main");
    CHECK_PATTERN(ctor_blocks[2], 70000, pattern_seed(ctor_blocks[2], 70000),
                  "block allocated before main");
    CHECK_PATTERN(ctor_blocks[3], 9 << 20, pattern_seed(ctor_blocks[3], 9 << 20),
                  "block allocated before main");
    for (int i = 0; i < 4; i++)
        free(ctor_blocks[i]);

    CHECKF(ctor_dl_error != NULL, "dlsym of a missing symbol gave no error");
    CHECK(spry_owns(ctor_dl_error));
    free(ctor_dl_error);
    /* and once more from main: the loader's own buffers */
    for (int i = 0; i < 100; i++) {
        CHECK(dlsym(RTLD_DEFAULT, "spry_test_no_such_symbol_anywhere") == NULL);
        CHECK(dlerror() != NULL);
    }

    CHECK_EQ(pthread_key_create(&key, tsd_destructor), 0);
    for (int round = 0; round < 20; round++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, thread_main, NULL), 0);
        for (int i = 0; i < 4; i++)
            CHECK_EQ(pthread_join(t[i], NULL), 0);
    }
    CHECK_EQ(atexit(at_exit_handler), 0);
    return 0;
}
