/* preload_probe.c: proof that spry really served a preloaded program.
 *
 * The preload tests run a program with LD_PRELOAD="libspry.so
 * libspry_test_probe.so" and SPRY_PROBE_DIR set. In every process of the
 * program (children too) this library's constructor records, in
 * $SPRY_PROBE_DIR/probe.<pid>, the executable, the object that defines the
 * `malloc` the process uses, and whether spry_owns() is true for a block
 * that malloc returned. The test scripts then look for the program's own
 * executable in those records. Nothing is recorded without SPRY_PROBE_DIR.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void spry_probe(void)
{
    const char *dir = getenv("SPRY_PROBE_DIR");
    if (!dir || !*dir)
        return;
    char exe[512] = "?";
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0)
        exe[len] = 0;
    const char *owner = "?";
    Dl_info info;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (m && dladdr(m, &info) && info.dli_fname)
        owner = info.dli_fname;
    bool (*owns)(const void *) =
        (bool (*)(const void *))dlsym(RTLD_DEFAULT, "spry_owns");
    void *p = malloc(24);
    int owned = owns ? (owns(p) ? 1 : 0) : -1;
    free(p);
    char path[1024], line[1200];
    snprintf(path, sizeof path, "%s/probe.%d", dir, (int)getpid());
    int n = snprintf(line, sizeof line, "exe=%s malloc_from=%s spry_owns=%d\n",
                     exe, owner, owned);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) < 0) {
            /* nothing to do: the test will miss the record and say so */
        }
        close(fd);
    }
}
