/* options_env.c: options are read once from SPRY_* environment variables
 * (README.md documents them) and change what spry does:
 * - SPRY_PURGE_DELAY_MS=N is the value in force (spry_option_get);
 * - a bad value keeps the default and says so on stderr, whole;
 * - SPRY_PURGE_THREAD=0 turns the idle return off: an idle program keeps
 *   its freed pages until it calls spry_trim();
 * - SPRY_PURGE_DELAY_MS=3000 delays the idle return: RSS is still up
 *   after 1 s, down within 9 s (a pass every delay returns what is older
 *   than the delay: at most about twice the delay);
 * - SPRY_STATS=1 prints statistics to stderr at exit.
 * The program runs itself as a child with each environment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spry.h"

#include "check.h"
#include "rss.h"

#define NBLOCKS 600000
static void *blocks[NBLOCKS];

static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ~60 MiB of small blocks, touched, then freed (small blocks: their pages
 * stay with spry after the free, until purged) */
static void churn_then_free(void)
{
    for (size_t i = 0; i < NBLOCKS; i++) {
        size_t n = 16 + (i % 11) * 16;
        blocks[i] = spry_malloc(opaque(n));
        CHECK_NOTNULL(blocks[i]);
        memset(blocks[i], 1, n);
    }
    for (size_t i = 0; i < NBLOCKS; i++)
        spry_free(blocks[i]);
}

/* ---- child side: argv[1] names the scenario --------------------------- */
static int child(const char *what)
{
    void *warm = spry_malloc(opaque(10));
    spry_free(warm);
    if (strcmp(what, "value") == 0) {
        printf("%ld\n", spry_option_get("SPRY_PURGE_DELAY_MS"));
        return 0;
    }
    /* RSS is compared with the floor that spry_trim() reaches afterwards:
     * "returned" means down to within 2 MiB of that floor */
    if (strcmp(what, "no-thread") == 0) {
        spry_trim();
        size_t base = rss_bytes();
        churn_then_free();
        size_t freed = rss_bytes();
        sleep_s(1.5);
        size_t idle = rss_bytes();
        spry_trim();
        size_t floor = rss_bytes();
        printf("no-thread: base %zu MiB, right after free %zu MiB, idle 1.5 s "
               "%zu MiB, after trim %zu MiB\n", base / MiB, freed / MiB,
               idle / MiB, floor / MiB);
        CHECKF(freed >= floor + 6 * MiB,
               "only %zu MiB of freed small blocks still resident right after "
               "the frees: nothing left to test SPRY_PURGE_THREAD=0 with",
               (freed - floor) / MiB);
        CHECKF(idle + 2 * MiB >= freed,
               "with SPRY_PURGE_THREAD=0 an idle program's RSS still fell from "
               "%zu to %zu MiB: the option does not turn the purge thread off",
               freed / MiB, idle / MiB);
        CHECKF(floor <= base + 10 * MiB,
               "spry_trim() left RSS %zu MiB over base", (floor - base) / MiB);
        return 0;
    }
    if (strcmp(what, "long-delay") == 0) {
        spry_trim();
        size_t base = rss_bytes();
        churn_then_free();
        size_t freed = rss_bytes();
        sleep_s(1.0);
        size_t early = rss_bytes();
        /* then wait for the return: memory older than the delay goes back
         * at the next pass, so within about twice the delay */
        size_t late = early;
        double waited = 1.0;
        while (waited < 9.0 && late > early - 4 * MiB) {
            sleep_s(0.25);
            waited += 0.25;
            late = rss_bytes();
        }
        spry_trim();
        size_t floor = rss_bytes();
        printf("long-delay: base %zu MiB, right after free %zu MiB, 1 s after "
               "%zu MiB, %.2f s after %zu MiB, trimmed %zu MiB\n", base / MiB,
               freed / MiB, early / MiB, waited, late / MiB, floor / MiB);
        CHECKF(freed >= floor + 6 * MiB,
               "only %zu MiB of freed small blocks still resident right after "
               "the frees: nothing left to test the delay with",
               (freed - floor) / MiB);
        CHECKF(early + 2 * MiB >= freed,
               "with SPRY_PURGE_DELAY_MS=3000 RSS fell from %zu to %zu MiB "
               "within 1 s of the frees: the delay is not honoured",
               freed / MiB, early / MiB);
        CHECKF(late <= floor + 2 * MiB,
               "with SPRY_PURGE_DELAY_MS=3000 RSS is still %zu MiB %.1f s after "
               "the frees (%zu MiB after spry_trim())", late / MiB, waited,
               floor / MiB);
        return 0;
    }
    if (strcmp(what, "stats") == 0) {
        churn_then_free();
        return 0;
    }
    fprintf(stderr, "unknown scenario %s\n", what);
    return 2;
}

/* ---- parent side -------------------------------------------------------- */
struct result {
    int status;
    char out[8192], err[8192];
};

static void read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)got;
    buf[len] = 0;
}

/* runs this program with `scenario` and the extra environment entries */
static void run_child(const char *self, const char *scenario, const char *env1,
                      const char *env2, struct result *r)
{
    int out[2], err[2];
    CHECK(pipe(out) == 0 && pipe(err) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]);
        close(err[0]);
        /* drop any SPRY_* from our own environment, then add ours */
        extern char **environ;
        char *envp[256];
        int n = 0;
        for (char **e = environ; *e && n < 250; e++)
            if (strncmp(*e, "SPRY_", 5) != 0)
                envp[n++] = *e;
        if (env1)
            envp[n++] = (char *)env1;
        if (env2)
            envp[n++] = (char *)env2;
        envp[n] = NULL;
        char *argv[] = {(char *)self, (char *)scenario, NULL};
        execve(self, argv, envp);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    read_all(out[0], r->out, sizeof r->out);
    read_all(err[0], r->err, sizeof r->err);
    close(out[0]);
    close(err[0]);
    CHECK(waitpid(pid, &r->status, 0) == pid);
    printf("--- %s [%s %s]: status %d\n%s%s", scenario, env1 ? env1 : "",
           env2 ? env2 : "", r->status, r->out, r->err);
}

static int exited_ok(const struct result *r)
{
    return WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child(argv[1]);
    const char *self = "/proc/self/exe";
    char path[4096];
    ssize_t len = readlink(self, path, sizeof path - 1);
    CHECK(len > 0);
    path[len] = 0;
    static struct result def, set, bad, nothread, delay, stats;

    run_child(path, "value", NULL, NULL, &def);
    CHECK(exited_ok(&def));
    long default_delay = atol(def.out);
    CHECKF(default_delay >= 0, "spry_option_get(\"SPRY_PURGE_DELAY_MS\") = %ld "
                               "(unknown option?)", default_delay);

    run_child(path, "value", "SPRY_PURGE_DELAY_MS=1234", NULL, &set);
    CHECK(exited_ok(&set));
    CHECKF(atol(set.out) == 1234, "SPRY_PURGE_DELAY_MS=1234 in the environment "
                                  "but spry_option_get says %ld", atol(set.out));

    run_child(path, "value", "SPRY_PURGE_DELAY_MS=soon", NULL, &bad);
    CHECK(exited_ok(&bad));
    CHECKF(atol(bad.out) == default_delay,
           "SPRY_PURGE_DELAY_MS=soon: value in force %ld, default %ld",
           atol(bad.out), default_delay);
    CHECKF(strstr(bad.err, "SPRY_PURGE_DELAY_MS") != NULL,
           "a bad SPRY_PURGE_DELAY_MS value was ignored silently (stderr: '%s')",
           bad.err);

    /* a long bad value: the message keeps its end (it was cut at 512
     * bytes, reason and newline lost: a review) */
    static char long_bad[3100];
    static struct result bad_long;
    strcpy(long_bad, "SPRY_PURGE_DELAY_MS=");
    memset(long_bad + strlen(long_bad), '7', 3000);
    run_child(path, "value", long_bad, NULL, &bad_long);
    CHECK(exited_ok(&bad_long));
    CHECKF(strstr(bad_long.err, "(want an integer in") != NULL &&
           bad_long.err[strlen(bad_long.err) - 1] == '\n',
           "a 3,000-byte bad value: the message lost its end (stderr ends '%s')",
           bad_long.err + (strlen(bad_long.err) > 60 ? strlen(bad_long.err) - 60 : 0));

    run_child(path, "no-thread", "SPRY_PURGE_THREAD=0", NULL, &nothread);
    CHECKF(exited_ok(&nothread), "SPRY_PURGE_THREAD=0 scenario failed");

    run_child(path, "long-delay", "SPRY_PURGE_DELAY_MS=3000", NULL, &delay);
    CHECKF(exited_ok(&delay), "SPRY_PURGE_DELAY_MS=3000 scenario failed");

    run_child(path, "stats", "SPRY_STATS=1", NULL, &stats);
    CHECK(exited_ok(&stats));
    CHECKF(strlen(stats.err) > 20 && strstr(stats.err, "spry") != NULL,
           "SPRY_STATS=1 printed no statistics at exit (stderr: '%s')",
           stats.err);
    printf("options_env: all checks passed\n");
    return 0;
}
