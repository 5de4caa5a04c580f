/* The C side of bench/pascal/calls.pas: the same loops, calling spry's C API
 * directly, linked into the spry build of the Pascal program ({$L}) so that
 * both sides run in one process, alternating. */
#include <stddef.h>

size_t spry_usable_size(const void *p);
void *spry_malloc(size_t n);
void spry_free(void *p);

/* reps passes over n pointers: the sum of their usable sizes */
size_t calls_c_usable(void *const *ptrs, size_t n, size_t reps) {
    size_t sum = 0;
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i++) sum += spry_usable_size(ptrs[i]);
    return sum;
}

/* count malloc/free pairs of size bytes */
void calls_c_pairs(size_t size, size_t count) {
    for (size_t i = 0; i < count; i++) {
        void *volatile p = spry_malloc(size);
        spry_free(p);
    }
}
