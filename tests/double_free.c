/* A wrong program, part 1 (issue 7, cases 1-4): double frees and wild
 * pointers. Each is reported on stderr and ignored: no crash, no hang, no
 * block handed out twice, and the heap keeps working. With
 * SPRY_ABORT_ON_ERROR=1 the process aborts instead; with SPRY_VERBOSE=0 the
 * report is silent but the error is still ignored and counted.
 *
 * A watchdog alarm turns a hang (the self-linked lists of the old remote
 * path) into a failure instead of a stuck test. */
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- same thread, small blocks: back to back and with other frees between */

static size_t g_size;

static void double_free_same_thread(void *arg) {
    (void)arg;
    char *p = spry_malloc(g_size), *q = spry_malloc(g_size);
    CHECK(p && q);
    spry_free(p);
    spry_free(p);                /* back to back */
    spry_free(q);
    spry_free(p);                /* with another free between */
}

static void check_same_thread(size_t size) {
    g_size = size;
    size_t before = errors_now();
    CHECKF(count_reports(double_free_same_thread, NULL, "double free") == 2,
           "size %zu: double frees not reported", size);
    CHECK_EQ(errors_now(), before + 2);
    /* the class's free list holds each block once: no block comes back twice */
    enum { N = 64 };
    char *got[N];
    for (int i = 0; i < N; i++) {
        got[i] = spry_malloc(size);
        CHECK(got[i] != NULL);
        memset(got[i], i, size);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) CHECKF(got[i] != got[j], "size %zu: block handed out twice", size);
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; k < size; k++) CHECK(got[i][k] == (char)i);
        spry_free(got[i]);
    }
}

/* ---- a thread that never allocated frees another thread's block twice ---- */

static void *free_twice(void *p) {
    spry_free(p);
    spry_free(p);
    return NULL;
}

static void remote_double_free(void *arg) {
    size_t size = *(size_t *)arg;
    void *p = spry_malloc(size);
    CHECK(p != NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_twice, p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    spry_trim();                 /* collects the remote frees: used to spin forever */
}

/* ---- two threads free the same blocks of a third at once, many times: one
 * free of each is reported (the other thread's marker is seen by exchange,
 * never missed by both), and the owner, which takes the remote lists whole
 * without walking them, hands out no block twice afterwards ------------- */

#define RACE_BLOCKS 2048
#define RACE_ROUNDS 20

static void *race_blocks[RACE_BLOCKS];
static _Atomic(size_t) race_at[2];

/* In step: each waits for the other to reach block i, then frees it. */
static void *race_free_all(void *arg) {
    int me = (int)(intptr_t)arg;
    spry_free(spry_malloc(16));    /* a heap: its frees of other threads'
                                      blocks go through its batches */
    for (size_t i = 0; i < RACE_BLOCKS; i++) {
        atomic_store(&race_at[me], i + 1);
        for (unsigned spins = 0; atomic_load(&race_at[1 - me]) < i + 1; spins++)
            if (spins > 1000) sched_yield();    /* not on a core of its own */
        spry_free(race_blocks[i]);
    }
    return NULL;
}

static int ptr_order(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void racing_remote_frees(const size_t *arg) {
    size_t size = *arg;
    static void *got[2 * RACE_BLOCKS];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        for (size_t i = 0; i < RACE_BLOCKS; i++) {
            race_blocks[i] = spry_malloc(size);
            CHECK(race_blocks[i] != NULL);
        }
        size_t before = errors_now();
        pthread_t t[2];
        atomic_store(&race_at[0], 0);
        atomic_store(&race_at[1], 0);
        /* 2,048 reports a round: to /dev/null (a failed check must show) */
        int saved = dup(2), null = open("/dev/null", O_WRONLY);
        CHECK(saved >= 0 && null >= 0 && dup2(null, 2) == 2);
        int rc0 = pthread_create(&t[0], NULL, race_free_all, (void *)(intptr_t)0);
        int rc1 = pthread_create(&t[1], NULL, race_free_all, (void *)(intptr_t)1);
        if (rc0 == 0) pthread_join(t[0], NULL);
        if (rc1 == 0) pthread_join(t[1], NULL);
        CHECK(dup2(saved, 2) == 2);
        close(saved);
        close(null);
        CHECK(rc0 == 0 && rc1 == 0);
        CHECKF(errors_now() == before + RACE_BLOCKS, "round %d: %zu double frees reported of %d",
               round, errors_now() - before, RACE_BLOCKS);
        /* the owner takes the freed blocks back: each at most once */
        for (size_t i = 0; i < 2 * RACE_BLOCKS; i++) {
            got[i] = spry_malloc(size);
            CHECK(got[i] != NULL);
            memset(got[i], (int)(i & 0xff), size);
        }
        for (size_t i = 0; i < 2 * RACE_BLOCKS; i++)
            CHECK(((unsigned char *)got[i])[size - 1] == (unsigned char)(i & 0xff));
        qsort(got, 2 * RACE_BLOCKS, sizeof got[0], ptr_order);
        for (size_t i = 1; i < 2 * RACE_BLOCKS; i++)
            CHECKF(got[i] != got[i - 1], "round %d: %p handed out twice", round, got[i]);
        for (size_t i = 0; i < 2 * RACE_BLOCKS; i++) spry_free(got[i]);
    }
}

/* ---- realloc of a freed block or of a pointer inside a block: NULL, EINVAL,
 * reported; each kind of page realloc tells apart (the owner's page that is
 * not full, 8-byte blocks, full pages, large spans) ---------------------- */

static void realloc_wrong(void *arg) {
    size_t size = *(size_t *)arg;
    enum { MANY = 20000 };              /* fills pages of every class here */
    char **many = malloc(MANY * sizeof *many);
    CHECK(many != NULL);
    size_t count = size <= 1000 ? MANY : 64;
    for (size_t i = 0; i < count; i++) CHECK((many[i] = spry_malloc(size)) != NULL);
    char *p = spry_malloc(size);
    CHECK(p != NULL);
    memset(p, 5, size);
    char *inside = p + (size >= 16 ? 16 : 1);
    errno = 0;
    CHECK(spry_realloc(inside, size * 2) == NULL);          /* grow */
    CHECK_EQ(errno, EINVAL);
    CHECK(spry_realloc(inside, 1) == NULL);                 /* shrink */
    for (size_t k = 0; k < size; k++) CHECK(p[k] == 5);      /* p untouched */
    spry_free(p);
    errno = 0;
    CHECK(spry_realloc(p, size * 2) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK(spry_realloc(p, size) == NULL);                   /* would fit */
    spry_free(many[0]);               /* a block of a page that was full */
    CHECK(spry_realloc(many[0], size + 1) == NULL);
    for (size_t i = 1; i < count; i++) spry_free(many[i]);
    free(many);
}

/* ---- another thread frees a block start its owner never handed out (not
 * carved yet: it carries no free marker); its malloc used to hand it out
 * twice afterwards. 3,300 B: a class no other case here uses, carved one
 * block at a time on a span not used before (the trim first returns the
 * free memory the earlier cases left: a page on slices all used before is
 * carved whole, page.c, and the free is then a double free). ------------- */

static void *g_uncarved;
static void *free_uncarved(void *arg) { (void)arg; spry_free(g_uncarved); return NULL; }

static void remote_free_uncarved(void *arg) {
    (void)arg;
    spry_trim();
    char *p = spry_malloc(3300);
    CHECK(p != NULL);
    g_uncarved = p + 5 * spry_usable_size(p);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_uncarved, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    enum { N = 12 };
    char *got[N];
    for (int i = 0; i < N; i++) {
        CHECK((got[i] = spry_malloc(3300)) != NULL);
        for (int j = 0; j < i; j++) CHECKF(got[i] != got[j], "block handed out twice");
    }
    for (int i = 0; i < N; i++) spry_free(got[i]);
    spry_free(p);
}

/* ---- huge blocks: the chunk map forgets them at the first free ------------ */

static void huge_double_free(void *arg) {
    size_t size = *(size_t *)arg;
    char *p = spry_malloc(size);
    CHECK(p != NULL);
    p[0] = 1;
    spry_free(p);
    spry_free(p);
    errno = 0;
    CHECK(spry_realloc(p, 100) == NULL);    /* realloc of a freed block */
    CHECK_EQ(errno, EINVAL);
}

/* ---- wild pointers ------------------------------------------------------- */

static char g_static[64];

static void wild_frees(void *arg) {
    (void)arg;
    char on_stack[64];
    spry_free((void *)1);
    spry_free((void *)0x10);
    spry_free((void *)(uintptr_t)0xdeadbeef000);
    spry_free(on_stack + 16);
    spry_free(g_static + 16);
    spry_free((void *)(uintptr_t)0xffff800000000000ull);   /* kernel half */
    char *guard = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(guard != MAP_FAILED);
    spry_free(guard + 16);       /* mapped, unreadable: a guard page */
    munmap(guard, 8192);
    errno = 0;
    CHECK(spry_realloc((void *)1, 10) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* ---- options ------------------------------------------------------------- */

/* Re-runs this program as "child" with one more environment variable (spry
 * reads its options once per process) and stderr in a temporary file;
 * returns the wait status and how many bytes the child wrote to stderr. */
static int in_child(const char *env, ssize_t *err_bytes) {
    char path[] = "/tmp/spry-double-child-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        putenv((char *)env);
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) _exit(98);
        self[n] = 0;
        execl(self, self, "child", (char *)NULL);
        _exit(99);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    *err_bytes = lseek(fd, 0, SEEK_END);
    close(fd);
    return st;
}

static void child_double_free(void) {
    void *p = spry_malloc(40);
    spry_free(p);
    spry_free(p);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) child_double_free();
    watchdog_start(120);

    static const size_t small[] = {8, 1, 16, 24, 48, 100, 1000, 4000, 40000, 200000};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) check_same_thread(small[i]);

    static const size_t remote_sizes[] = {8, 48, 3000, 200000};
    for (size_t i = 0; i < sizeof remote_sizes / sizeof remote_sizes[0]; i++) {
        size_t before = errors_now();
        int n = count_reports(remote_double_free, (void *)&remote_sizes[i], "double free");
        CHECKF(n == 1, "remote double free of %zu bytes: %d reports", remote_sizes[i], n);
        CHECK_EQ(errors_now(), before + 1);
    }

    static const size_t race_sizes[] = {48, 3000};
    for (size_t i = 0; i < sizeof race_sizes / sizeof race_sizes[0]; i++)
        racing_remote_frees(&race_sizes[i]);

    int n0;
    static const size_t realloc_sizes[] = {8, 1, 32, 100, 1000, 40000, 200000};
    for (size_t i = 0; i < sizeof realloc_sizes / sizeof realloc_sizes[0]; i++) {
        int n = count_reports(realloc_wrong, (void *)&realloc_sizes[i], "realloc");
        CHECKF(n == 5, "realloc of wrong pointers, %zu bytes: %d reports, want 5", realloc_sizes[i], n);
    }

    n0 = count_reports(remote_free_uncarved, NULL, "invalid pointer");
    CHECKF(n0 == 1, "remote free of a block never handed out: %d reports, want 1", n0);

    static const size_t huge_sizes[] = {8u << 20, (size_t)600 << 20};
    for (size_t i = 0; i < sizeof huge_sizes / sizeof huge_sizes[0]; i++) {
        int n = count_reports(huge_double_free, (void *)&huge_sizes[i], "spry:");
        CHECKF(n == 2, "huge double free of %zu bytes: %d reports", huge_sizes[i], n);
    }

    int n = count_reports(wild_frees, NULL, "invalid pointer");
    CHECKF(n == 8, "wild pointers: %d reports, want 8", n);

    /* the heap still works everywhere */
    for (int i = 0; i < 200000; i++) {
        char *p = spry_malloc((size_t)(i % 5000) + 1);
        CHECK(p != NULL);
        p[0] = 7;
        spry_free(p);
    }
    spry_trim();

    ssize_t said;
    int st = in_child("SPRY_ABORT_ON_ERROR=1", &said);
    CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "SPRY_ABORT_ON_ERROR=1 did not abort (status %d)", st);
    CHECK_GT(said, 0);
    st = in_child("SPRY_VERBOSE=0", &said);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SPRY_VERBOSE=0 child failed (status %d)", st);
    CHECKF(said == 0, "SPRY_VERBOSE=0 still reported (%zd bytes)", said);
    st = in_child("SPRY_VERBOSE=1", &said);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0 && said > 0, "SPRY_VERBOSE=1 child: status %d, %zd bytes", st, said);

    printf("double_free: every double free and wild pointer reported and survived\n");
    return 0;
}
