/* The fast-path probes, run under callgrind twice with different n by
 * fastpath_callgrind.sh. Results go to a volatile sink so the compiler
 * keeps every call.
 *   fastpath_pair N          N malloc+free pairs of 32-39 bytes
 *   fastpath_pair N shrink   N rounds of seed 000's shrink test: one of 64
 *                            strings grown from 1 byte to 20,000 with
 *                            realloc, its first byte kept, shrunk back to 1 */
#include <stdlib.h>
#include <string.h>

static void pairs(long n) {
    void *volatile sink;
    for (long i = 0; i < n; i++) {
        void *p = malloc(32 + (size_t)(i & 7));
        sink = p;
        free(p);
    }
    (void)sink;
}

static int shrink_rounds(long n) {
    enum { STRINGS = 64 };
    char *s[STRINGS];
    for (int i = 0; i < STRINGS; i++)
        if (!(s[i] = malloc(1))) return 1;
    for (long i = 0; i < n; i++) {
        char **v = &s[i % STRINGS];
        char *p = realloc(*v, 20000);
        if (!p) return 1;
        p[0] = (char)i;
        char *q = realloc(p, 1);
        if (!q || q[0] != (char)i) return 1;
        *v = q;
    }
    for (int i = 0; i < STRINGS; i++) free(s[i]);
    return 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    if (argc > 2 && strcmp(argv[2], "shrink") == 0) return shrink_rounds(n);
    pairs(n);
    return 0;
}
