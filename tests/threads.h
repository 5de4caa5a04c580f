/* threads.h: how many threads this process has (`Threads:` in
 * /proc/self/status), read with open/read only (no stdio, no allocation), and
 * a poll that waits for a count without a fixed sleep a loaded machine could
 * miss. */
#ifndef SPRY_TEST_THREADS_H
#define SPRY_TEST_THREADS_H

#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The `Threads:` field of /proc/self/status; -1 when it cannot be read. */
static inline int proc_threads(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = 0;
    const char *s = strstr(buf, "\nThreads:");
    if (!s)
        return -1;
    s += sizeof "\nThreads:" - 1;
    while (*s == ' ' || *s == '\t')
        s++;
    int n = 0;
    while (*s >= '0' && *s <= '9')
        n = n * 10 + (*s++ - '0');
    return n;
}

static inline double threads_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline void threads_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls every 50 ms until `Threads:` satisfies want(count) or timeout_s has
 * passed. Returns the seconds it took, or -1 on timeout. */
static inline double threads_wait(int (*want)(int), double timeout_s)
{
    double start = threads_now_s();
    for (;;) {
        if (want(proc_threads()))
            return threads_now_s() - start;
        if (threads_now_s() - start > timeout_s)
            return -1;
        threads_sleep_ms(50);
    }
}

static inline int threads_is_one(int n) { return n == 1; }
static inline int threads_above_one(int n) { return n > 1; }

#endif /* SPRY_TEST_THREADS_H */
