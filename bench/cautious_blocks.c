/* cautious_blocks N SIZE: the memory one block costs under a given
 * allocator or tool (bench/cautious.py runs it under each).
 *
 * Allocates N blocks of SIZE bytes (each written, so that it is resident),
 * prints the growth of the resident set divided by N, then frees them all
 * and prints how much of that growth is still resident: what a quarantine
 * (the cautious build's, memcheck's freed-blocks list, ASan's) holds on to.
 * Resident set from /proc/self/statm, which counts every page the process
 * touched, the allocator's metadata and the tool's shadow memory included.
 *
 * Output, one line: "per_block_bytes=B after_free_kib=K". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long resident_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s N SIZE\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    size_t size = (size_t)atol(argv[2]);
    /* the array of pointers is allocated and touched before the first
     * measure, so that only the blocks count */
    char **blocks = calloc((size_t)n, sizeof *blocks);
    if (!blocks) return 1;
    memset(blocks, 1, (size_t)n * sizeof *blocks);
    long before = resident_kib();
    for (long i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        if (!blocks[i]) return 1;
        memset(blocks[i], (int)i, size);
    }
    long live = resident_kib();
    for (long i = 0; i < n; i++) free(blocks[i]);
    long freed = resident_kib();
    printf("per_block_bytes=%.1f after_free_kib=%ld\n", (double)(live - before) * 1024 / (double)n,
           freed - before);
    free(blocks);
    return 0;
}
