/* Wrong programs for the cautious build (libspry-debug.so, preloaded by
 * cautious_run.sh): each case commits one error, through the standard
 * names, then prints "survived" and exits 0. The script checks the report
 * (the error named, the block's size, the functions and lines of the
 * stacks), so each allocation is made in a function of its own, kept out
 * of line. Built with -O0 -g -fno-omit-frame-pointer. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#define NOINLINE __attribute__((noinline))

/* The compiler must not see what the tests do with the pointers. */
static void *volatile sink;
static void *launder(void *p) { sink = p; return sink; }

NOINLINE static char *alloc_overrun(size_t n) { return malloc(n); }
NOINLINE static char *alloc_underrun(size_t n) { return malloc(n); }
NOINLINE static char *alloc_used_after_free(size_t n) { return malloc(n); }
NOINLINE static void free_then_write(char *p) { free(p); }
NOINLINE static char *alloc_freed_twice(size_t n) { return malloc(n); }
NOINLINE static char *alloc_interior(size_t n) { return malloc(n); }
NOINLINE static char *alloc_realloc_freed(size_t n) { return malloc(n); }
NOINLINE static char *alloc_header_freed(size_t n) { return malloc(n); }
NOINLINE static char *leak_site_a(size_t n) { return malloc(n); }
NOINLINE static char *leak_site_b(size_t n) { return calloc(1, n); }
NOINLINE static void free_stack_address(void) {
    char buf[64];
    free(launder(buf + 16));
}

static void overrun_1(void) {
    char *p = alloc_overrun(24);
    ((char *)launder(p))[24] = 'x';
    free(p);
}

static void overrun_32(void) {
    char *p = alloc_overrun(40);
    memset(launder(p + 40), 'x', 32);
    free(p);
}

static void underrun_1(void) {
    char *p = alloc_underrun(24);
    ((char *)launder(p))[-1] = 'x';
    free(p);
}

/* Found at exit, when the quarantine is checked. */
static void write_after_free(void) {
    char *p = alloc_used_after_free(64);
    free_then_write(p);
    ((char *)launder(p))[8] = 'x';
}

static void double_free(void) {
    char *p = alloc_freed_twice(40);
    free(p);
    free(launder(p));
}

static void free_interior(void) {
    char *p = alloc_interior(100);
    free(launder(p + 16));
    free(p);
}

static void free_wild(void) { free(launder((void *)(uintptr_t)1)); }

static void realloc_freed(void) {
    char *p = alloc_realloc_freed(32);
    free(p);
    if (realloc(launder(p), 64) != NULL) abort();
}

/* free of the block's header (80 bytes before it, the start of the core
 * block holding it): reported, the block stays live and is freed after. */
static void free_header(void) {
    char *p = alloc_header_freed(100);
    memset(p, 7, 100);
    free(launder(p - 80));
    if (p[99] != 7) abort();
    free(p);
}

/* An alignment the layer cannot record (4 GiB): refused, nothing broken. */
static void huge_align(void) {
    errno = 0;
    void *p = aligned_alloc((size_t)1 << 32, 100);
    if (p || errno != ENOMEM) abort();
    free(launder(malloc(100)));
}

/* spry_heap_walk with no visit function counts (the library's own API). */
static void walk_null(void) {
    size_t (*walk)(bool (*)(void *, size_t, void *), void *) =
        (size_t (*)(bool (*)(void *, size_t, void *), void *))dlsym(RTLD_DEFAULT, "spry_heap_walk");
    if (!walk) abort();
    char *p = launder(malloc(100));
    if (walk(NULL, NULL) < 1) abort();
    free(p);
}

/* Threads freeing one block at the same instant: one free, the others
 * double frees, and nothing else (the losers checked the block while the
 * winner filled it with the freed pattern, and reported writes after free
 * and interior pointers: a review). Blocks of 16 KiB widen that window. */
#define RACE_THREADS 6
#define RACE_ROUNDS 400
static void *race_block[RACE_ROUNDS];
static pthread_barrier_t race_bar;

static void *race_freer(void *arg) {
    for (int r = 0; r < RACE_ROUNDS; r++) {
        pthread_barrier_wait(&race_bar);
        free(race_block[r]);
        pthread_barrier_wait(&race_bar);
    }
    return arg;
}

static void racing_double_free(void) {
    pthread_t t[RACE_THREADS];
    for (int r = 0; r < RACE_ROUNDS; r++) race_block[r] = launder(malloc(16384));
    pthread_barrier_init(&race_bar, NULL, RACE_THREADS);
    for (int i = 0; i < RACE_THREADS; i++)
        if (pthread_create(&t[i], NULL, race_freer, NULL) != 0) abort();
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(t[i], NULL);
}

/* 3 blocks of 100 bytes from one place, 5 of 50 from another. */
static void leak_two_sites(void) {
    for (int i = 0; i < 3; i++) strcpy(launder(leak_site_a(100)), "leaked from site a");
    for (int i = 0; i < 5; i++) launder(leak_site_b(50));
}

NOINLINE static void *thread_leaker(void *arg) {
    for (int i = 0; i < 7; i++) launder(malloc(77));
    return arg;
}

static void leak_in_thread(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, thread_leaker, NULL) != 0) abort();
    pthread_join(t, NULL);
}

/* free leaves errno as it found it, its first report (symbol lookups
 * set EINVAL, a review) and later ones. */
NOINLINE static char *alloc_errno_kept(size_t n) { return malloc(n); }

static void errno_kept(void) {
    for (int i = 0; i < 2; i++) {
        char *p = alloc_errno_kept(48);
        free(p);
        errno = 4242;
        free(launder(p));
        if (errno != 4242) {
            printf("report %d: errno %d\n", i + 1, errno);
            exit(3);
        }
    }
}

/* A thread of PTHREAD_STACK_MIN (16 KiB) frees a block twice, keeps 3,
 * and calls exit: the report and the leak list, whose symbol lookups
 * overflowed such a stack (a review), run on a stack of their own. */
NOINLINE static char *alloc_on_small_stack(size_t n) { return malloc(n); }

NOINLINE static void *small_stack_thread(void *arg) {
    char *p = alloc_on_small_stack(56);
    free(p);
    free(launder(p));
    for (int i = 0; i < 3; i++) launder(alloc_on_small_stack(56));
    printf("survived\n");
    fflush(stdout);
    exit(0);
    return arg;
}

static void small_stack(void) {
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN) != 0 ||
        pthread_create(&t, &attr, small_stack_thread, NULL) != 0)
        abort();
    pthread_join(t, NULL);
    abort();                            /* the thread's exit ends the process */
}

/* A thread with a cancel pending frees a block twice: the report (symbol
 * lookups that open files, the log's write: cancellation points) runs to
 * its end with the report lock released, and the cancel acts afterwards;
 * the main thread's own double free is then reported too (a thread
 * cancelled inside the report left the lock held, and the next report
 * waited for it for good). */
NOINLINE static char *alloc_cancel_pending(size_t n) { return malloc(n); }
static atomic_int cancel_sent;
static atomic_int free_returned;

static void *cancel_victim(void *arg) {
    char *p = alloc_cancel_pending(72);
    free(p);
    while (!atomic_load(&cancel_sent)) {}
    free(launder(p));
    atomic_store(&free_returned, 1);
    pthread_testcancel();
    return arg;
}

static void cancel_pending(void) {
    pthread_t t;
    void *res;
    alarm(60);                          /* a report lock left held: a hang */
    if (pthread_create(&t, NULL, cancel_victim, NULL) != 0 || pthread_cancel(t) != 0) abort();
    atomic_store(&cancel_sent, 1);
    if (pthread_join(t, &res) != 0 || res != PTHREAD_CANCELED) abort();
    if (!atomic_load(&free_returned)) {
        printf("the double free did not return before the cancel\n");
        exit(3);
    }
    char *q = alloc_cancel_pending(88);
    free(q);
    free(launder(q));
}

/* Under an address-space limit: blocks of 100 KB until malloc fails, all
 * freed, three times. The quarantine (64 MiB) held what the first round
 * freed, and the next rounds got 1 block where the first got 569 (a
 * review); an allocation that fails now empties it and tries again. */
#define OOM_MAX 20000
static void *oom_blocks[OOM_MAX];

static size_t oom_round(void) {
    size_t n = 0;
    while (n < OOM_MAX && (oom_blocks[n] = malloc(100000)) != NULL) {
        memset(oom_blocks[n], (int)(n & 0xff), 100000);
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char *)oom_blocks[i])[99999] != (unsigned char)(i & 0xff)) exit(4);
        free(oom_blocks[i]);
    }
    return n;
}

static void quarantine_oom(void) {
    /* the address space in use now (statm's first field, in pages) plus
     * 160 MiB */
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || fscanf(f, "%lu", &pages) != 1) abort();
    fclose(f);
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = pages * (unsigned long)sysconf(_SC_PAGESIZE) + (160ul << 20);
    if (setrlimit(RLIMIT_AS, &lim) != 0) abort();
    size_t first = oom_round();
    for (int r = 2; r <= 3; r++) {
        size_t got = oom_round();
        printf("round 1: %zu blocks, round %d: %zu\n", first, r, got);
        if (first < 400 || got < first * 9 / 10) exit(3);
    }
}

/* A malloc larger than the quarantine holds fails without emptying it:
 * the block freed before it stays watched, and its write after free is
 * found (a review: it came straight back from the next malloc). */
NOINLINE static char *alloc_before_huge_fail(size_t n) { return malloc(n); }

static void huge_fail_watch(void) {
    char *p = alloc_before_huge_fail(64);
    free(p);
    if (malloc((size_t)1 << 44) != NULL) abort();
    ((char *)launder(p))[0] = 'x';
}

static const struct { const char *name; void (*run)(void); } cases[] = {
    { "overrun_1", overrun_1 },           { "overrun_32", overrun_32 },
    { "underrun_1", underrun_1 },         { "write_after_free", write_after_free },
    { "double_free", double_free },       { "free_stack", free_stack_address },
    { "free_interior", free_interior },   { "free_wild", free_wild },
    { "realloc_freed", realloc_freed },   { "leak_two_sites", leak_two_sites },
    { "leak_in_thread", leak_in_thread }, { "free_header", free_header },
    { "huge_align", huge_align },         { "walk_null", walk_null },
    { "racing_double_free", racing_double_free }, { "small_stack", small_stack },
    { "errno_kept", errno_kept },         { "cancel_pending", cancel_pending },
    { "quarantine_oom", quarantine_oom }, { "huge_fail_watch", huge_fail_watch },
};

int main(int argc, char **argv) {
    for (size_t i = 0; argc > 1 && i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) != 0) continue;
        cases[i].run();
        printf("survived\n");
        return 0;
    }
    fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
}
