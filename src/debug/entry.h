/* The cautious layer's entry points, called by the public names (alloc.c,
 * override.c) when spry_cautious is true. They are defined only in
 * libspry-debug.so (src/debug/entry.c, walk in api.c); the weak declarations
 * let the fast build link even where the dead `if (spry_cautious)` branch is
 * kept (-O0), since it is never taken there. */
#ifndef SPRY_DEBUG_ENTRY_H
#define SPRY_DEBUG_ENTRY_H

#include <stddef.h>
#include <stdbool.h>

/* How a block was allocated, so that its release can be checked against
 * it (new[] must meet delete[], malloc must meet free). */
enum spry_debug_family {
    SPRY_FAMILY_MALLOC,          /* malloc, calloc, realloc, memalign, ... */
    SPRY_FAMILY_NEW,             /* operator new                           */
    SPRY_FAMILY_NEW_ARRAY,       /* operator new[]                         */
};

#define SPRY_DEBUG_ENTRY __attribute__((weak, visibility("hidden")))

/* align: 0 for malloc's 16 bytes, else a power of two. */
SPRY_DEBUG_ENTRY void  *spry_debug_alloc(size_t n, size_t align, enum spry_debug_family family);
SPRY_DEBUG_ENTRY void  *spry_debug_calloc(size_t count, size_t size);
SPRY_DEBUG_ENTRY void   spry_debug_free(void *p, enum spry_debug_family family);
SPRY_DEBUG_ENTRY void  *spry_debug_realloc(void *p, size_t n);
/* The size the block was asked for. */
SPRY_DEBUG_ENTRY size_t spry_debug_usable_size(const void *p);
SPRY_DEBUG_ENTRY size_t spry_debug_heap_walk(bool (*visit)(void *block, size_t size, void *arg),
                                             void *arg);

#endif
