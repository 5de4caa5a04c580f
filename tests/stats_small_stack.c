/* SPRY_STATS prints its record at exit on the stack of the thread that
 * called exit. A thread of PTHREAD_STACK_MIN (16 KiB, about 12 free) that
 * called exit crashed there with SPRY_STATS=2 (a review: an 8 KiB buffer on
 * the stack, SIGSEGV). For SPRY_STATS=1 and 2: a child whose small-stack
 * thread allocates blocks of many classes (so the print walks them all)
 * and calls exit must exit 0 and leave its whole record in the stats file.
 * Linked to the shared library, whose options the child's environment
 * sets. */
#include "check.h"
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void *exit_on_small_stack(void *arg) {
    (void)arg;
    for (size_t n = 8; n <= ((size_t)1 << 22); n = n * 5 / 4 + 8) {
        char *p = malloc(n);
        if (p) p[n - 1] = 1;           /* kept: the table has them in use */
    }
    exit(0);
}

static void child(void) {
    pthread_attr_t attr;
    CHECK(pthread_attr_init(&attr) == 0);
    CHECK(pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, &attr, exit_on_small_stack, NULL) == 0);
    pthread_join(t, NULL);
    _exit(3);                          /* exit in the thread ends the process first */
}

/* The file's contents (at most cap - 1 bytes), NUL-ended. */
static size_t read_all(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)got;
    close(fd);
    buf[len] = 0;
    return len;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) child();
    char dir[] = "/tmp/spry-stats-stack-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], stats_env[16], file_env[160];
    snprintf(path, sizeof path, "%s/stats", dir);
    static char buf[1 << 20];
    for (int mode = 1; mode <= 2; mode++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            snprintf(stats_env, sizeof stats_env, "SPRY_STATS=%d", mode);
            snprintf(file_env, sizeof file_env, "SPRY_STATS_FILE=%s", path);
            putenv(stats_env);
            putenv(file_env);
            execl(argv[0], argv[0], "child", (char *)NULL);
            _exit(99);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SPRY_STATS=%d: exit on a %d-byte stack, status %d",
               mode, (int)PTHREAD_STACK_MIN, st);
        size_t len = read_all(path, buf, sizeof buf);
        const char *end = mode == 2 ? "}}\n" : NULL;
        CHECKF(mode == 1 ? strstr(buf, "spry statistics (pid ") != NULL && strstr(buf, "spry options:") != NULL
                         : len > 3 && strcmp(buf + len - 3, end) == 0 && strncmp(buf, "{\"pid\":", 7) == 0,
               "SPRY_STATS=%d: the record is not whole (%zu bytes)", mode, len);
        CHECK(unlink(path) == 0);
    }
    CHECK(rmdir(dir) == 0);
    printf("stats_small_stack: the record at exit fits a thread of %d bytes of stack\n", (int)PTHREAD_STACK_MIN);
    return 0;
}
