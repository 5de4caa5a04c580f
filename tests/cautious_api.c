/* The cautious build's API and semantics, linked with libspry-debug.so:
 * sizes and alignments as asked (malloc_usable_size is the size asked for),
 * realloc and calloc, spry_debug_scan finding (and repairing) an overrun
 * and a write after free, spry_debug_ignore, marks and the report since
 * one, spry_heap_walk, spry_debug_break_on (SIGTRAP, in a child), and the
 * log file (appended to, %p expanded, a symbolic link not followed).
 * Reports go to SPRY_DEBUG_LOG, set by the test before spry reads it
 * (re-executing itself). */
#define _GNU_SOURCE
#include "check.h"
#include "reports.h"
#include <spry.h>
#include <spry_debug.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char log_path[256];

/* How often `what` occurs in the log so far. */
static int log_count(const char *what) {
    int fd = open(log_path, O_RDONLY);
    if (fd < 0) return 0;
    static char buf[1 << 20];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) n = 0;
    buf[n] = 0;
    int c = 0;
    for (char *s = buf; (s = strstr(s, what)) != NULL; s++) c++;
    return c;
}

static void *volatile sink;
/* Hides what the test does with a pointer from the compiler's warnings. */
static char *launder(void *p) { sink = p; return sink; }
static volatile size_t too_many = SIZE_MAX / 2;

static void sizes_and_alignment(void) {
    for (size_t n = 0; n < 3000; n += 7) {
        char *p = malloc(n);
        CHECK(p != NULL && ((uintptr_t)p & 15) == 0);
        CHECK_EQ(malloc_usable_size(p), n);
        memset(p, 0x5a, n);
        free(p);
    }
    for (size_t a = 16; a <= ((size_t)2 << 20); a *= 2) {
        void *p = NULL;
        CHECK_EQ(posix_memalign(&p, a, 100), 0);
        CHECKF(((uintptr_t)p & (a - 1)) == 0, "posix_memalign(%zu)", a);
        CHECK_EQ(malloc_usable_size(p), 100);
        free(p);
        p = aligned_alloc(a, 3 * a);
        CHECKF(p && ((uintptr_t)p & (a - 1)) == 0, "aligned_alloc(%zu)", a);
        memset(p, 1, 3 * a);
        free(p);
        p = memalign(a, 1);
        CHECK(p && ((uintptr_t)p & (a - 1)) == 0);
        free(p);
    }
    void *v = valloc(10);
    CHECK(v && ((uintptr_t)v & 4095) == 0);
    free(v);
    v = pvalloc(10);
    CHECK(v && ((uintptr_t)v & 4095) == 0 && malloc_usable_size(v) == 4096);
    free(v);
    CHECK(posix_memalign(&v, 24, 10) == EINVAL);
    char *z = calloc(100, 3);
    for (int i = 0; i < 300; i++) CHECK(z[i] == 0);
    errno = 0;
    CHECK(calloc(too_many, 3) == NULL && errno == ENOMEM);
    for (int i = 0; i < 300; i++) z[i] = (char)i;
    z = realloc(z, 1000);
    for (int i = 0; i < 300; i++) CHECK(z[i] == (char)i);
    CHECK_EQ(malloc_usable_size(z), 1000);
    z = realloc(z, 10);
    for (int i = 0; i < 10; i++) CHECK(z[i] == (char)i);
    CHECK(realloc(z, 0) == NULL);
    char *big = malloc(8u << 20);        /* huge */
    memset(big, 3, 8u << 20);
    CHECK_EQ(spry_usable_size(big), 8u << 20);
    free(big);
    CHECK_EQ(spry_debug_scan(), 0);
    CHECK_EQ(log_count("ERROR"), 0);
}

static void scan_finds_and_repairs(void) {
    char *p = malloc(10);
    launder(p)[10] = 1;                            /* overrun by one */
    CHECK_EQ(spry_debug_scan(), 1);
    CHECK_EQ(log_count("ERROR: overrun: block of 10 bytes"), 1);
    CHECK_EQ(spry_debug_scan(), 0);                /* repaired: reported once */
    char *q = launder(malloc(20));
    free(launder(q));
    q[3] = 1;                                      /* write after free */
    CHECK_EQ(spry_debug_scan(), 1);
    CHECK_EQ(log_count("ERROR: write after free: block of 20 bytes"), 1);
    free(p);
    CHECK_EQ(log_count("ERROR"), 2);               /* the free found nothing more */
}

static bool count_visit(void *block, size_t size, void *arg) {
    size_t *c = arg;
    if (size == 12345) c[0]++;
    c[1]++;
    free(malloc(1));                               /* a visit may allocate */
    return c[1] < c[2];
}

static void walk_and_marks(void) {
    uint64_t mark = spry_debug_mark();
    void *keep[5];
    /* one call site for the five (clang unrolled the loop: five places,
     * five reports of 1 block) */
#pragma GCC unroll 1
    for (int i = 0; i < 5; i++) keep[i] = malloc(12345);
    size_t c[3] = { 0, 0, SIZE_MAX };
    size_t visited = spry_heap_walk(count_visit, c);
    CHECK_EQ(c[0], 5);
    CHECK_EQ(visited, c[1]);
    size_t stop[3] = { 0, 0, 2 };
    CHECK_EQ(spry_heap_walk(count_visit, stop), 2);
    CHECK_EQ(spry_debug_report_since(mark), 5);
    CHECK_EQ(log_count("LIVE SINCE MARK: 5 blocks, 61725 bytes"), 1);
    spry_debug_ignore(keep[0]);                    /* an expected leak */
    for (int i = 1; i < 5; i++) free(keep[i]);
    CHECK_EQ(spry_debug_report_since(mark), 0);
}

static void break_on(void) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        spry_debug_break_on(spry_debug_mark() + 2);
        sink = malloc(1);
        sink = malloc(1);
        sink = malloc(1);                          /* this one traps */
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGTRAP, "break_on: status %d", st);
}

int main(int argc, char **argv) {
    char dir[] = "/tmp/spry-cautious-api-XXXXXX";
    if (argc < 2) {
        /* set the log before spry reads its options: run again */
        CHECK(mkdtemp(dir) != NULL);
        char link[300], target[300], env[320];
        snprintf(target, sizeof target, "%s/other", dir);
        snprintf(link, sizeof link, "%s/link.log", dir);
        int fd = open(target, O_CREAT | O_WRONLY, 0600);
        CHECK(fd >= 0 && write(fd, "keep\n", 5) == 5);
        close(fd);
        CHECK(symlink(target, link) == 0);
        /* a link under the log's name is not followed: reports go to stderr */
        pid_t pid = fork();
        if (pid == 0) {
            snprintf(env, sizeof env, "SPRY_DEBUG_LOG=%s", link);
            putenv(env);
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 2);
            execl(argv[0], argv[0], "leak", (char *)NULL);
            _exit(99);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        struct stat sb;
        CHECK(stat(target, &sb) == 0 && sb.st_size == 5);
        snprintf(env, sizeof env, "SPRY_DEBUG_LOG=%s/api-%%p.log", dir);
        putenv(env);
        execl(argv[0], argv[0], dir, (char *)NULL);
        return 99;
    }
    if (strcmp(argv[1], "leak") == 0) {
        sink = malloc(33);
        return 0;
    }
    snprintf(log_path, sizeof log_path, "%s/api-%d.log", argv[1], (int)getpid());
    watchdog_start(120);
    sizes_and_alignment();
    scan_finds_and_repairs();
    walk_and_marks();
    break_on();
    /* the directory the first run made, gone once all passed (kept for a
     * look when a check fails): every run used to leave one in /tmp */
    char path[300];
    CHECK(unlink(log_path) == 0);
    snprintf(path, sizeof path, "%s/link.log", argv[1]);
    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/other", argv[1]);
    CHECK(unlink(path) == 0);
    CHECK(rmdir(argv[1]) == 0);
    printf("cautious_api: sizes, alignment, scan, walk, marks, break_on and the log work\n");
    return 0;
}
