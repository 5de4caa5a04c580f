/* oom.c: out of memory returns NULL with errno ENOMEM, never crashes, and
 * the allocator keeps working for what still fits.
 *
 * A child process limits its address space (RLIMIT_AS) to its current size
 * plus 256 MiB, then exhausts it with big (8 MiB) and medium (96 KiB) blocks,
 * checks every failure, frees part of what it holds and allocates again;
 * then fills it with small blocks, frees them all and takes big ones.
 * The parent reports a crash or a hang of the child (timeout) as a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"
#include "pattern.h"
#include "rss.h"

#define HEADROOM ((size_t)256 << 20)
#define MAX_BLOCKS 20000

static void *blocks[MAX_BLOCKS];
static size_t block_size[MAX_BLOCKS];
static size_t nblocks;

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

/* Allocates blocks of `size` until one fails; returns how many succeeded. */
static size_t exhaust(size_t size, const char *what)
{
    size_t got = 0;
    for (;;) {
        CHECKF(nblocks < MAX_BLOCKS,
               "%s: %zu blocks allocated under a %zu MiB limit: the limit is "
               "not enforced?", what, nblocks, HEADROOM / MiB);
        errno = 0;
        void *p = spry_malloc(opaque(size));
        if (p == NULL) {
            CHECKF(errno == ENOMEM,
                   "%s: spry_malloc(%zu) returned NULL with errno %d (%s), "
                   "want ENOMEM", what, size, errno, strerror(errno));
            return got;
        }
        /* touch the ends and one word per page: a block we were given
         * must be usable */
        pattern_fill(p, 64);
        memset((char *)p + 64, 0x3C, size - 64 > 4096 ? 4096 : size - 64);
        ((volatile char *)p)[size - 1] = 1;
        blocks[nblocks] = p;
        block_size[nblocks++] = size;
        got++;
    }
}

static void check_all(const char *when)
{
    for (size_t i = 0; i < nblocks; i++)
        if (blocks[i])
            CHECK_PATTERN(blocks[i], 64, pattern_seed(blocks[i], 64), when);
}

/* The headroom filled with 1000-byte blocks until NULL, then all freed. */
static size_t fill_and_free(void)
{
    static void *fill[400000];
    size_t nfill = 0;
    while (nfill < 400000 && (fill[nfill] = spry_malloc(opaque(1000))) != NULL) {
        memset(fill[nfill], 0x22, 16);
        nfill++;
    }
    CHECKF(nfill < 400000, "1000-byte blocks never ran out (%zu)", nfill);
    for (size_t i = 0; i < nfill; i++)
        spry_free(fill[i]);
    return nfill;
}

static void child(void)
{
    /* warm up: the heap and its thread state exist before the limit */
    void *warm[256];
    for (int i = 0; i < 256; i++) {
        warm[i] = spry_malloc(opaque((size_t)16 << (i % 12)));
        CHECK_NOTNULL(warm[i]);
    }
    for (int i = 0; i < 256; i++)
        spry_free(warm[i]);

    size_t vm = vm_size_bytes();
    CHECK(vm > 0);
    struct rlimit rl = {vm + HEADROOM, vm + HEADROOM};
    CHECKF(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
    printf("oom: address space limited to %zu MiB (in use %zu MiB)\n",
           (vm + HEADROOM) / MiB, vm / MiB);

    size_t big = exhaust((size_t)8 << 20, "big blocks");
    CHECKF(big >= 4, "only %zu blocks of 8 MiB fit in 256 MiB of headroom", big);
    size_t medium = exhaust(96 << 10, "medium blocks");
    printf("oom: got %zu blocks of 8 MiB, then %zu of 96 KiB before NULL\n",
           big, medium);
    check_all("block held while out of memory");

    /* every kind of request fails cleanly while nothing is left */
    errno = 0;
    void *p = spry_malloc(opaque((size_t)64 << 20));
    CHECKF(p == NULL && errno == ENOMEM, "malloc(64 MiB) at OOM = %p errno %d",
           p, errno);
    errno = 0;
    p = spry_calloc(opaque(1 << 20), opaque(64));
    CHECKF(p == NULL && errno == ENOMEM, "calloc(1M, 64) at OOM = %p errno %d",
           p, errno);
    errno = 0;
    p = spry_aligned_alloc(opaque(1 << 20), opaque((size_t)32 << 20));
    CHECKF(p == NULL && errno == ENOMEM,
           "aligned_alloc(1 MiB, 32 MiB) at OOM = %p errno %d", p, errno);
    void *out = (void *)0x77;
    int rc = spry_posix_memalign(&out, opaque(4096), opaque((size_t)32 << 20));
    CHECKF(rc == ENOMEM, "posix_memalign(4096, 32 MiB) at OOM returned %d", rc);
    /* a failed realloc leaves the block and its contents alone */
    errno = 0;
    p = spry_realloc(blocks[0], opaque((size_t)128 << 20));
    CHECKF(p == NULL && errno == ENOMEM,
           "realloc(8 MiB block, 128 MiB) at OOM = %p errno %d", p, errno);
    CHECK_PATTERN(blocks[0], 64, pattern_seed(blocks[0], 64),
                  "block after failed realloc at OOM");

    /* small requests: some may fail (nothing left), none may crash, and a
     * failure must be ENOMEM */
    size_t small_ok = 0, small_fail = 0;
    void *smalls[1000];
    for (int i = 0; i < 1000; i++) {
        errno = 0;
        smalls[i] = spry_malloc(opaque(1 + (size_t)i % 200));
        if (smalls[i]) {
            small_ok++;
            memset(smalls[i], 0x11, 1 + (size_t)i % 200);
        } else {
            CHECKF(errno == ENOMEM, "small malloc at OOM: NULL errno %d", errno);
            small_fail++;
        }
    }
    for (int i = 0; i < 1000; i++)
        spry_free(smalls[i]);
    printf("oom: at OOM %zu of 1000 small mallocs succeeded\n", small_ok);

    /* give back every other block, then the allocator must work again */
    for (size_t i = 0; i < nblocks; i += 2) {
        CHECK_PATTERN(blocks[i], 64, pattern_seed(blocks[i], 64),
                      "block freed after OOM");
        spry_free(blocks[i]);
        blocks[i] = NULL;
    }
    check_all("block kept after OOM");
    for (int round = 0; round < 20; round++) {
        void *s[2000];
        for (int i = 0; i < 2000; i++) {
            size_t n = 1 + (size_t)(i * 37 + round) % 1024;
            s[i] = spry_malloc(opaque(n));
            CHECKF(s[i] != NULL,
                   "after freeing half of the blocks, spry_malloc(%zu) failed "
                   "(errno %d, round %d, i %d): the allocator does not recover "
                   "after OOM", n, errno, round, i);
            pattern_fill(s[i], n);
        }
        for (int i = 0; i < 2000; i++) {
            size_t n = 1 + (size_t)(i * 37 + round) % 1024;
            CHECK_PATTERN(s[i], n, pattern_seed(s[i], n), "small block after OOM");
            spry_free(s[i]);
        }
    }
    /* big and medium requests that fit again */
    void *b1 = spry_malloc(opaque((size_t)8 << 20));
    CHECKF(b1 != NULL, "8 MiB malloc fails after %zu 8 MiB blocks were freed "
                       "(errno %d)", (big + 1) / 2, errno);
    memset(b1, 1, (size_t)8 << 20);
    void *m1 = spry_malloc(opaque(96 << 10));
    CHECKF(m1 != NULL, "96 KiB malloc fails after freeing (errno %d)", errno);
    memset(m1, 1, 96 << 10);
    spry_free(b1);
    spry_free(m1);
    check_all("block kept after OOM recovery");
    for (size_t i = 0; i < nblocks; i++)
        spry_free(blocks[i]);

    /* the whole headroom in small blocks, all of them freed: blocks of 3 MiB
     * fit again at once, not after a purge pass (a review: none did until
     * then; the heaps' free segments were waiting for their purge tick),
     * from malloc, aligned_alloc and a realloc that grows a block, and
     * errno stays as it was when they succeed */
    char *grown = spry_malloc(opaque((size_t)1 << 20));
    CHECK_NOTNULL(grown);
    memset(grown, 0x44, (size_t)1 << 20);
    for (int kind = 0; kind < 3; kind++) {
        size_t nfill = fill_and_free();
        void *threes[64];
        size_t got = 0;
        errno = 4242;
        if (kind == 2) {
            char *q = spry_realloc(grown, opaque((size_t)3 << 20));
            CHECKF(q != NULL, "after %zu small blocks filled 256 MiB and were freed, a realloc from 1 to "
                              "3 MiB failed (errno %d)", nfill, errno);
            CHECK(q[0] == 0x44 && q[((size_t)1 << 20) - 1] == 0x44);
            grown = q;
            got = 1;
        }
        while (kind < 2 && got < 64) {
            threes[got] = kind == 0 ? spry_malloc(opaque((size_t)3 << 20))
                                    : spry_aligned_alloc(opaque((size_t)4 << 20), opaque((size_t)3 << 20));
            if (!threes[got]) break;
            memset(threes[got], 0x33, (size_t)3 << 20);
            got++;
        }
        CHECKF(got >= (kind == 2 ? 1 : 16), "after %zu small blocks filled 256 MiB and were freed, only %zu "
               "blocks of 3 MiB fit (%s)", nfill, got, kind == 0 ? "malloc" : "aligned_alloc");
        CHECKF(got == 64 || kind == 2 || errno == ENOMEM, "the failure's errno %d", errno);
        if (kind == 2) CHECKF(errno == 4242, "a realloc that succeeded left errno %d", errno);
        for (size_t i = 0; kind < 2 && i < got; i++)
            spry_free(threes[i]);
        printf("oom: %zu small blocks freed, then %zu blocks of 3 MiB (%s)\n", nfill, got,
               kind == 0 ? "malloc" : kind == 1 ? "aligned_alloc, 4 MiB" : "realloc from 1 MiB");
    }
    spry_free(grown);
    printf("oom: recovered; all checks passed\n");
    fflush(stdout);
    _exit(0);
}

int main(void)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60); /* a hang fails the test rather than the whole run */
        child();
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "oom: FAILED: child killed by signal %d (%s)%s\n",
                WTERMSIG(status), strsignal(WTERMSIG(status)),
                WTERMSIG(status) == SIGALRM ? " (hang: 60 s timeout)" : "");
        return 1;
    }
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "oom child exited with status %d", WEXITSTATUS(status));
    return 0;
}
