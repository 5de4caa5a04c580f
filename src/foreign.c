/* Foreign pointers; see foreign.h.
 *
 * glibc's free trusts the 16-byte chunk header in front of a block, so a
 * wild pointer handed to it aborts or crashes. A pointer goes to glibc only
 * when it plausibly is one of glibc's blocks, from glibc's own layout on
 * x86-64: 16-byte aligned, a readable header (read through the kernel, so a
 * wild pointer faults nowhere) whose size is a multiple of 16,
 * and either a chunk mmapped on its own (IS_MMAPPED, page-aligned mapping),
 * a chunk of a thread arena (NON_MAIN_ARENA, inside the 64 MiB-aligned heap
 * whose header gives its size) or a chunk inside the program break (the main
 * arena). Anything else, and anything inside spry's own arenas (a block spry
 * gave back already), is reported and ignored. */
#define _GNU_SOURCE
#include "foreign.h"
#include "alloc_fast.h"
#include "arena.h"
#include "os.h"
#include "report.h"
#include "stats.h"
#include <dlfcn.h>
#include <string.h>
#include <errno.h>

typedef void   (*free_fn)(void *);
typedef size_t (*usable_fn)(void *);

static _Atomic(free_fn) next_free;
static _Atomic(usable_fn) next_usable;

/* dlsym may itself allocate (its error buffer): that lands in spry, fine. */
static free_fn foreign_free_fn(void) {
    free_fn f = atomic_load_explicit(&next_free, memory_order_acquire);
    if (!f) {
        f = (free_fn)dlsym(RTLD_NEXT, "free");
        atomic_store_explicit(&next_free, f, memory_order_release);
    }
    return f;
}

static usable_fn foreign_usable_fn(void) {
    usable_fn f = atomic_load_explicit(&next_usable, memory_order_acquire);
    if (!f) {
        f = (usable_fn)dlsym(RTLD_NEXT, "malloc_usable_size");
        atomic_store_explicit(&next_usable, f, memory_order_release);
    }
    return f;
}

#define GLIBC_IS_MMAPPED     ((size_t)2)
#define GLIBC_NON_MAIN_ARENA ((size_t)4)
#define GLIBC_HEAP_MAX       ((uintptr_t)64 << 20)   /* 2 * DEFAULT_MMAP_THRESHOLD_MAX */

bool spry_foreign_plausible(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if ((a & 15) || a < 65536 || spry_chunk_kind(p) != SPRY_CHUNK_FOREIGN || spry_arena_contains(p))
        return false;
    size_t hdr[2];                                   /* prev_size, size|flags */
    if (!spry_os_readable(hdr, (const uint8_t *)p - 16, sizeof hdr)) return false;
    size_t size = hdr[1] & ~(size_t)7;
    if (size < 32 || (size & 15) || a + size < a) return false;
    if (hdr[1] & GLIBC_IS_MMAPPED) {
        /* prev_size is the chunk's offset from the start of its mapping */
        size_t lead = hdr[0];
        return ((a - 16 - lead) & 4095) == 0 && ((lead + size) & 4095) == 0;
    }
    if (hdr[1] & GLIBC_NON_MAIN_ARENA) {
        /* heap_info { ar_ptr, prev, size, ... } at the heap's start */
        uintptr_t h = a & ~(GLIBC_HEAP_MAX - 1);
        size_t info[3];
        if (!spry_os_readable(info, (const void *)h, sizeof info)) return false;
        size_t hsize = info[2];
        return hsize <= GLIBC_HEAP_MAX && a - 16 + size <= h + hsize;
    }
    uintptr_t lo, hi;
    spry_os_brk_range(&lo, &hi);
    return a - 16 >= lo && a - 16 + size <= hi;
}

void spry_foreign_free(void *p) {
    if (!spry_foreign_plausible(p)) {
        bool ours = spry_arena_contains(p) || spry_chunk_kind(p) != SPRY_CHUNK_FOREIGN;
        spry_report_error("free", ours ? "double free or invalid pointer" : "invalid pointer", p);
        return;
    }
    spry_stat_add(&spry_stat.foreign_frees, 1);
    free_fn f = foreign_free_fn();
    if (f) f(p);      /* else: nobody to hand it to; leaking beats corrupting */
}

size_t spry_foreign_usable_size(void *p) {
    if (!spry_foreign_plausible(p)) {
        spry_report_error("malloc_usable_size", "invalid pointer", p);
        return 0;
    }
    usable_fn f = foreign_usable_fn();
    return f ? f(p) : 0;
}

void *spry_foreign_realloc(void *p, size_t n) {
    if (!spry_foreign_plausible(p)) {
        spry_report_error("realloc", "invalid pointer", p);
        errno = EINVAL;
        return NULL;
    }
    size_t old = spry_foreign_usable_size(p);
    if (old == 0) { errno = ENOMEM; return NULL; }   /* cannot know what to copy */
    void *q = spry_malloc_inline(n);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    spry_foreign_free(p);
    return q;
}
