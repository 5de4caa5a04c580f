/* The fast-path probe: n malloc+free pairs of 32-39 bytes. The result
 * goes to a volatile sink so the compiler keeps every call. Run under
 * callgrind twice with different n by fastpath_callgrind.sh. */
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    void *volatile sink;
    for (long i = 0; i < n; i++) {
        void *p = malloc(32 + (size_t)(i & 7));
        sink = p;
        free(p);
    }
    (void)sink;
    return 0;
}
