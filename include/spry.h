/* spry: a thread-scalable, low-waste general-purpose allocator for Linux.
 *
 * The prefixed API below is always available. When libspry.so is preloaded
 * (LD_PRELOAD) or linked, the standard names (malloc, free, operator new...)
 * are served by spry as well.
 *
 * Guarantees every function here keeps:
 * - every block of 16 bytes or more is 16-byte aligned (8-byte blocks: 8);
 * - failure returns NULL (or an error code) with errno set, never aborts;
 * - a pointer spry did not allocate is recognised: handed to the allocator
 *   that follows spry in the process (normally glibc's) when it is plausibly
 *   one of its blocks, else reported on stderr and ignored;
 * - a double free is reported and ignored (SPRY_VERBOSE=0 silences reports,
 *   SPRY_ABORT_ON_ERROR=1 aborts instead).
 */
#ifndef SPRY_H
#define SPRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPRY_VERSION_MAJOR 0
#define SPRY_VERSION_MINOR 1
#define SPRY_VERSION_PATCH 0

/* ---- allocation ------------------------------------------------------- */
void  *spry_malloc(size_t size);
void  *spry_calloc(size_t count, size_t size);
/* realloc(NULL, n) == malloc(n); realloc(p, 0) frees p and returns NULL
 * (glibc's behaviour). On failure p is left untouched. */
void  *spry_realloc(void *p, size_t size);
void  *spry_reallocarray(void *p, size_t count, size_t size);
void   spry_free(void *p);
/* free with the size the block was asked for (or any size between that and
 * its usable size); a wrong size is a programming error. */
void   spry_free_sized(void *p, size_t size);
/* alignment: a power of two (any size for aligned_alloc, a multiple of
 * sizeof(void*) for posix_memalign). EINVAL otherwise. */
void  *spry_aligned_alloc(size_t alignment, size_t size);
int    spry_posix_memalign(void **out, size_t alignment, size_t size);
void  *spry_memalign(size_t alignment, size_t size);

/* ---- introspection ----------------------------------------------------- */
/* Bytes the block can really hold (>= the size asked for). O(1), no lock. */
size_t spry_usable_size(const void *p);
/* The usable size a request of `size` bytes gets. */
size_t spry_good_size(size_t size);
/* True when p points into memory spry manages (any address inside one of
 * its segments or huge blocks, live or not; O(1)); false for pointers of
 * other allocators. Not a test that p is a live block. */
bool   spry_owns(const void *p);

/* Calls visit(block, size, arg) for every live block spry has handed out
 * (size: its usable size) and returns how many it visited; a visit that
 * returns false stops the walk after that block. visit may be NULL: the
 * blocks are only counted.
 * - Exact while no other thread allocates or frees. When others do, the
 *   walk never crashes or hangs, but may miss or include the blocks they
 *   are changing.
 * - No spry lock is held while visit runs: it may call malloc, free (the
 *   block it is given included) and spry_heap_walk. Blocks it allocates may
 *   or may not be visited later in the same walk.
 * - Blocks of another allocator (pointers from before spry was loaded) are
 *   not visited. */
size_t spry_heap_walk(bool (*visit)(void *block, size_t size, void *arg), void *arg);

/* ---- memory return ----------------------------------------------------- */
/* Return every free page to the kernel now (all heaps), not after the
 * purge delay. RSS really drops (MADV_DONTNEED). */
void   spry_trim(void);

/* ---- statistics -------------------------------------------------------- */
typedef struct spry_stats {
    size_t mapped;        /* address space reserved from the kernel        */
    size_t committed;     /* memory that may be resident: in_use + dirty  */
    size_t committed_peak;
    size_t in_use;        /* bytes in pages/blocks handed to heaps          */
    size_t huge_in_use;   /* bytes in blocks that own whole segments        */
    size_t dirty;         /* free bytes not yet returned to the kernel      */
    size_t purged_total;  /* bytes returned to the kernel so far            */
    size_t purges;        /* madvise calls made                             */
    size_t budget_purges; /* times a heap went over its free-memory budget  */
    size_t segments;      /* live 4 MiB segments                            */
    size_t arenas;        /* kernel mappings made for the heap              */
    size_t heaps;         /* thread heaps created (reused ones count once)  */
    size_t heaps_abandoned;/* heaps of exited threads waiting for reuse     */
    size_t foreign_frees; /* pointers of another allocator passed to free   */
    size_t errors;        /* double frees and invalid pointers, ignored     */
} spry_stats_t;

void   spry_stats_get(spry_stats_t *out);
/* Prints the statistics as text to the file descriptor (no stdio, no malloc). */
void   spry_stats_print(int fd);

/* ---- options ----------------------------------------------------------- */
/* Options are read once from the environment (SPRY_*); see README.md.
 * spry_option_get returns the value in force, or -1 for an unknown name. */
long   spry_option_get(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* SPRY_H */
