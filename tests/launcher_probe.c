/* launcher_probe: what the launcher tests run under `spry run|stats|debug`.
 *
 *   launcher_probe STATUS [fork|kill]
 *
 * Prints, one per line: its pid, LD_PRELOAD, the file that defines the
 * malloc it calls (dladdr), and whether spry_owns() (found with dlsym, the
 * program is not linked with spry) says that malloc's block is spry's.
 * `fork`: a child allocates and exits first, so that two processes write
 * statistics; `kill`: ends by SIGTERM instead of exiting. Then exits with
 * STATUS. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *mode = argc > 2 ? argv[2] : "";
    void *p = malloc(100);
    Dl_info info;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    const char *owner = m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "?";
    bool (*owns)(const void *) = (bool (*)(const void *))dlsym(RTLD_DEFAULT, "spry_owns");
    const char *preload = getenv("LD_PRELOAD");
    printf("pid %ld\npreload %s\nmalloc %s\nspry_owns %d\n", (long)getpid(),
           preload ? preload : "", owner, owns ? (int)owns(p) : -1);
    fflush(stdout);
    if (strcmp(mode, "fork") == 0) {
        pid_t child = fork();
        if (child == 0) { free(malloc(5000)); exit(0); }
        waitpid(child, NULL, 0);
    }
    if (strcmp(mode, "kill") == 0) raise(SIGTERM);
    free(p);
    return atoi(argv[1]);
}
