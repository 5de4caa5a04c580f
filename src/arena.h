/* Arenas: big 4 MiB-aligned reservations from which segments (runs of 4 MiB
 * chunks) are carved, so the process holds a few kernel mappings per GiB and
 * never one per block. A bitmap per arena says which chunks are in use and
 * which free chunks may still be resident (dirty). Free dirty chunks are
 * purged after the purge delay. Runs bigger than the largest arena get a
 * dedicated mapping. All under one global lock: these are 4 MiB operations. */
#ifndef SPRY_ARENA_H
#define SPRY_ARENA_H

#include <stddef.h>
#include <stdbool.h>

typedef struct spry_run {
    void  *base;       /* 4 MiB aligned                                       */
    size_t chunks;     /* run length in 4 MiB chunks                          */
    bool   clean;      /* every byte reads zero and nothing is resident       */
    bool   dedicated;  /* its own mapping: base/chunks exactly what to unmap  */
} spry_run_t;

/* A run of `chunks` chunks whose base + lead_bytes is aligned to `align`
 * (align: power of two, 0 for plain 4 MiB alignment). False with errno
 * ENOMEM when the address space is exhausted. */
bool  spry_arena_alloc(size_t chunks, size_t align, size_t lead_bytes, spry_run_t *out);
/* Returns a run. `dirty`: it may hold resident memory (purged later);
 * otherwise the caller has purged it. */
void  spry_arena_free(const spry_run_t *run, bool dirty);
/* Purges free chunks dirty since the previous call (all of them if force).
 * Returns true while some dirty free memory is left waiting. */
bool  spry_arena_purge(bool force);
/* True when p lies in one of the arenas (no lock). */
bool  spry_arena_contains(const void *p);
/* Zeroed metadata memory (heaps), never freed, 64-byte aligned (an OS page
 * when it is that large); NULL when out of memory. */
void *spry_meta_alloc(size_t size);

void  spry_arena_fork_prepare(void);
void  spry_arena_fork_parent(void);
void  spry_arena_fork_child(void);

#endif
