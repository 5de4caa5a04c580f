/* large_reuse.c: large blocks (256 KiB-2 MiB, a span each) of sizes that
 * vary reuse the memory of the ones freed before them.
 *
 * A thread keeps 4 blocks, replacing a random one each step with a block of
 * a random size (each of 4-32 slices), every OS page written and checked
 * before the free; 4,000 steps. The memory it faults in, in all, should
 * stay within 2.25x the peak of the live blocks' bytes (tcmalloc
 * 1.75-2.75x). Before large.c's span_resident, freed spans waited in the
 * hot cache for a block of their own size while new blocks took fresh
 * slices: 2.6-3.0x (1.5-1.9x since). Three seeds, each in a child of its
 * own (fresh memory), with a long purge delay (set by CMake), so that no
 * purge frees memory to fault in again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spry.h"
#include "check.h"

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static uint64_t rng;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The child's run: 0 when within the bound. */
static int run(uint64_t seed)
{
    enum { LIVE = 4, STEPS = 4000 };
    unsigned char *b[LIVE] = {0};
    size_t n[LIVE] = {0}, live = 0, peak = 0;
    rng = seed;
    long before = minor_faults();
    for (int i = 0; i < STEPS; i++) {
        int k = (int)(next() % LIVE);
        if (b[k]) {
            for (size_t o = 0; o < n[k]; o += 4096)
                if (b[k][o] != (unsigned char)(o >> 12 ^ n[k])) {
                    fprintf(stderr, "seed %llu: block of %zu bytes changed at %zu\n",
                            (unsigned long long)seed, n[k], o);
                    return 1;
                }
            spry_free(b[k]);
            live -= n[k];
        }
        size_t s = (size_t)262144 << (next() % 3);
        s += next() % s;
        if (s > 2097152) s = 2097152 - 4096;
        b[k] = spry_malloc(s);
        if (!b[k]) {
            fprintf(stderr, "seed %llu: malloc(%zu) failed\n", (unsigned long long)seed, s);
            return 1;
        }
        n[k] = s;
        live += s;
        if (live > peak) peak = live;
        for (size_t o = 0; o < s; o += 4096) b[k][o] = (unsigned char)(o >> 12 ^ s);
    }
    double ratio = (double)(minor_faults() - before) * 4096 / (double)peak;
    for (int k = 0; k < LIVE; k++) spry_free(b[k]);
    printf("large_reuse: seed %llu: faulted in %.2fx the peak live bytes (%.1f MiB)\n",
           (unsigned long long)seed, ratio, peak / 1048576.0);
    fflush(stdout);
    return ratio <= 2.25 ? 0 : 1;
}

int main(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) _exit(run(seed));
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "seed %llu: memory faulted in beyond 2.25x the peak live bytes (status %d)",
               (unsigned long long)seed, status);
    }
    return 0;
}
