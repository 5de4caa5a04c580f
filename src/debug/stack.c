/* Stacks: raw return addresses captured on every allocation and free
 * (libunwind's unw_backtrace: it walks the .eh_frame tables every Debian
 * binary has, frame pointers or not, caches what it learns per address, and
 * does not allocate on that path), deduplicated into a table so that a block
 * carries a 32-bit id. Symbols come only when a report is written
 * (symbol.c). The capture itself is inlined into the entry points
 * (capture.h); this file has its parts that need no inlining.
 *
 * The table: entries in chunks allocated from the core as needed (ids are
 * never reused, entries never change once linked), found by hash through
 * buckets of id chains; inserts take one of 64 stripe locks chosen by the
 * hash, lookups take it too. */
#define _GNU_SOURCE
#include "capture.h"
#include "../lock.h"
#include <link.h>
#include <pthread.h>
#include <string.h>

#define CHUNK_ENTRIES 4096
#define CHUNKS        256            /* up to a million distinct stacks */
#define BUCKETS       (1u << 16)
#define STRIPES       64

typedef struct stack_entry {
    uint64_t hash;
    uint32_t next;                   /* next id in the bucket's chain */
    uint32_t depth;
    void *pc[DBG_FRAMES];
} stack_entry_t;

static stack_entry_t *_Atomic chunks[CHUNKS];
static uint32_t buckets[BUCKETS];    /* first id of each chain (stripe lock) */
static spry_lock_t stripes[STRIPES];
static _Atomic(uint32_t) next_id = 1;

/* This library's code: frames there are the allocator's, left out. */
static uintptr_t own_lo, own_hi;
static _Atomic(int) own_known;

static int find_own(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t self = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && self - lo < ph->p_memsz) {
            own_lo = lo;
            own_hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* This library's code as [lo, lo + len), found at the first capture; read
 * once per capture rather than once per frame (a capture tests each of the
 * own frames that lead it). */
static void own_code(uintptr_t *lo, uintptr_t *len) {
    if (!atomic_load_explicit(&own_known, memory_order_acquire)) {
        dbg_inside++;
        dl_iterate_phdr(find_own, (void *)(uintptr_t)own_code);
        dbg_inside--;
        atomic_store_explicit(&own_known, 1, memory_order_release);
    }
    *lo = own_lo;
    *len = own_hi - own_lo;
}

static stack_entry_t *entry(uint32_t id) {
    stack_entry_t *c = atomic_load_explicit(&chunks[id / CHUNK_ENTRIES], memory_order_acquire);
    return c ? &c[id % CHUNK_ENTRIES] : NULL;
}

/* A new entry's slot, its chunk allocated when it is the first; 0 when the
 * table is full or out of memory. Called under a stripe lock, so the chunk's
 * allocation is the layer's own (dbg_inside): the core may start its purge
 * thread at the end of it, and pthread_create's calloc must not come back
 * here for the lock this thread holds. */
static uint32_t entry_new(void) {
    uint32_t id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    if (id >= CHUNKS * CHUNK_ENTRIES) return 0;
    _Atomic(stack_entry_t *) *slot = &chunks[id / CHUNK_ENTRIES];
    if (!atomic_load_explicit(slot, memory_order_acquire)) {
        dbg_inside++;
        stack_entry_t *fresh = dbg_raw_alloc(sizeof(stack_entry_t) * CHUNK_ENTRIES, 16);
        stack_entry_t *none = NULL;
        if (fresh && !atomic_compare_exchange_strong_explicit(slot, &none, fresh, memory_order_acq_rel,
                                                              memory_order_acquire))
            dbg_raw_free(fresh);     /* another stripe made it first */
        dbg_inside--;
        if (!fresh) return 0;
    }
    return id;
}

uint32_t dbg_stack_intern(void *const *pc, int depth) {
    uint64_t h = 0x9e3779b97f4a7c15ull * (uint64_t)(depth + 1);
    for (int i = 0; i < depth; i++) h = (h ^ (uintptr_t)pc[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    uint32_t bucket = (uint32_t)h & (BUCKETS - 1);
    spry_lock_t *lock = &stripes[bucket % STRIPES];
    spry_lock(lock);
    uint32_t id = buckets[bucket];
    for (; id; id = entry(id)->next) {
        stack_entry_t *e = entry(id);
        if (e->hash == h && e->depth == (uint32_t)depth && memcmp(e->pc, pc, sizeof *pc * depth) == 0)
            break;
    }
    if (!id && (id = entry_new()) != 0) {
        stack_entry_t *e = entry(id);
        e->hash = h;
        e->depth = (uint32_t)depth;
        memcpy(e->pc, pc, sizeof *pc * depth);
        e->next = buckets[bucket];
        buckets[bucket] = id;
    }
    spry_unlock(lock);
    return id;
}

/* How many of the allocator's own frames (the layer's entry, malloc or
 * operator new) lead a captured stack: the most seen so far, on any path.
 * A capture asks for these and DBG_FRAMES more rather than a fixed margin:
 * unwinding stops where the kept frames end. */
static _Atomic(int) own_frames;

int dbg_stack_ask(void) {
    /* relaxed: a count, read as a hint; a stale one costs a retry */
    return DBG_FRAMES + atomic_load_explicit(&own_frames, memory_order_relaxed);
}

int dbg_stack_own(void *const *pc, int n, int asked) {
    uintptr_t lo, len;
    own_code(&lo, &len);
    int skip = 0;
    while (skip < n && (uintptr_t)pc[skip] - lo < len) skip++;
    if (skip <= asked - DBG_FRAMES || n < asked || asked >= DBG_FRAMES + DBG_OWN_MAX) return skip;
    int own = skip < DBG_OWN_MAX ? skip : DBG_OWN_MAX;
    int seen = atomic_load_explicit(&own_frames, memory_order_relaxed);
    while (seen < own && !atomic_compare_exchange_weak_explicit(&own_frames, &seen, own, memory_order_relaxed,
                                                                 memory_order_relaxed))
        continue;
    return -1;
}

/* Reports only: room for any number of own frames, nothing learned (a
 * report's path is deeper than an allocation's). */
int dbg_stack_now(void **out) {
    void *pc[DBG_FRAMES + DBG_OWN_MAX];
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);   /* capture.h */
    dbg_inside++;
    int n = unw_backtrace(pc, DBG_FRAMES + DBG_OWN_MAX);
    dbg_inside--;
    pthread_setcancelstate(cancel, NULL);
    uintptr_t lo, len;
    own_code(&lo, &len);
    int skip = 0;
    while (skip < n && (uintptr_t)pc[skip] - lo < len) skip++;
    n -= skip;
    if (n > DBG_FRAMES) n = DBG_FRAMES;
    if (n > 0) memcpy(out, pc + skip, sizeof *pc * n);
    return n > 0 ? n : 0;
}

int dbg_stack_frames(uint32_t id, void *const **pcs) {
    stack_entry_t *e = id ? entry(id) : NULL;
    if (!e) return 0;
    *pcs = e->pc;
    return (int)e->depth;
}

uint32_t dbg_stack_count(void) {
    uint32_t n = atomic_load_explicit(&next_id, memory_order_relaxed);
    return n < CHUNKS * CHUNK_ENTRIES ? n : CHUNKS * CHUNK_ENTRIES;
}

void dbg_stack_fork_prepare(void) {
    for (int i = 0; i < STRIPES; i++) spry_lock(&stripes[i]);
}
void dbg_stack_fork_parent(void) {
    for (int i = STRIPES - 1; i >= 0; i--) spry_unlock(&stripes[i]);
}
void dbg_stack_fork_child(void) {
    for (int i = 0; i < STRIPES; i++) spry_lock_init(&stripes[i]);
}
