/* Arenas; see arena.h. Locking: arena_lock guards the arena list and all
 * bitmaps. madvise runs outside it: chunks being purged are marked used for
 * the duration so nobody hands them out. */
#include "arena.h"
#include "types.h"
#include "os.h"
#include "lock.h"
#include "options.h"
#include "stats.h"
#include "bitmap.h"
#include <errno.h>
#include <string.h>

#define ARENA_MAX_CHUNKS 256                    /* 1 GiB */
#define ARENA_WORDS      (ARENA_MAX_CHUNKS / 64)

typedef struct spry_arena {
    uint8_t *base;
    size_t   chunks;
    uint64_t used[ARENA_WORDS];
    uint64_t dirty[ARENA_WORDS];               /* free or used, may be resident */
    uint64_t aging[ARENA_WORDS];               /* free+dirty at the last purge  */
    struct spry_arena *next;
} spry_arena_t;

static spry_lock_t arena_lock = SPRY_LOCK_INIT;
/* Written under arena_lock; published with release so that
 * spry_arena_contains can walk it without the lock (arenas are never
 * unmapped and base/chunks never change). */
static spry_arena_t *_Atomic arena_list;
static size_t arena_next_chunks;               /* size of the next reservation */

static spry_lock_t meta_lock = SPRY_LOCK_INIT;
static uint8_t *meta_cur, *meta_end;

/* ---- metadata ---------------------------------------------------------- */

void *spry_meta_alloc(size_t size) {
    /* an OS page or more starts on one (a heap's cold page: types.h); the
     * gap before it stays untouched */
    uintptr_t align = size >= SPRY_OS_PAGE ? SPRY_OS_PAGE : 64;
    size = (size + 63) & ~(size_t)63;
    spry_lock(&meta_lock);
    meta_cur = (uint8_t *)(((uintptr_t)meta_cur + align - 1) & ~(align - 1));
    if (meta_cur > meta_end || (size_t)(meta_end - meta_cur) < size) {
        size_t chunk = size > (1u << 20) ? size : (1u << 20);
        uint8_t *p = spry_os_reserve(chunk, SPRY_OS_PAGE);
        if (!p) { spry_unlock(&meta_lock); return NULL; }
        spry_stat_add(&spry_stat.mapped, chunk);
        meta_cur = p; meta_end = p + chunk;
    }
    void *r = meta_cur;
    meta_cur += size;
    spry_unlock(&meta_lock);
    return r;   /* fresh mappings are zero */
}

/* First index i >= 0 where n chunks are free and base + i*4MiB + lead is
 * aligned to `align`; SIZE_MAX if none. */
static size_t arena_find(spry_arena_t *a, size_t n, size_t align, size_t lead) {
    size_t run = 0;
    for (size_t i = 0; i < a->chunks; i++) {
        if (spry_bit_get(a->used, i)) { run = 0; continue; }
        run++;
        if (run >= n) {
            size_t start = i + 1 - n;
            uintptr_t at = (uintptr_t)a->base + start * SPRY_SEGMENT_SIZE + lead;
            if (align == 0 || (at & (align - 1)) == 0) return start;
        }
    }
    return SIZE_MAX;
}

static spry_arena_t *arena_create(size_t min_chunks) {
    if (arena_next_chunks == 0) {
        arena_next_chunks = (size_t)spry_option(SPRY_OPT_ARENA_MB) / 4;
        if (arena_next_chunks == 0) arena_next_chunks = 1;
    }
    size_t want = arena_next_chunks > min_chunks ? arena_next_chunks : min_chunks;
    uint8_t *base = NULL;
    /* Under an address-space limit a big reservation can fail where a small
     * one still fits: halve down to what the request needs. */
    for (;;) {
        base = spry_os_reserve(want * SPRY_SEGMENT_SIZE, SPRY_SEGMENT_SIZE);
        if (base || want <= min_chunks) break;
        want = want / 2 > min_chunks ? want / 2 : min_chunks;
    }
    if (!base) return NULL;
    spry_arena_t *a = spry_meta_alloc(sizeof *a);
    if (!a) { spry_os_release(base, want * SPRY_SEGMENT_SIZE); return NULL; }
    if (!spry_option(SPRY_OPT_THP)) spry_os_no_huge(base, want * SPRY_SEGMENT_SIZE);
    a->base = base;
    a->chunks = want;
    a->next = atomic_load_explicit(&arena_list, memory_order_relaxed);
    atomic_store_explicit(&arena_list, a, memory_order_release);
    if (arena_next_chunks < ARENA_MAX_CHUNKS) arena_next_chunks *= 2;
    spry_stat_add(&spry_stat.mapped, want * SPRY_SEGMENT_SIZE);
    spry_stat_add(&spry_stat.arenas, 1);
    return a;
}

static bool arena_dedicated(size_t chunks, size_t align, size_t lead, spry_run_t *out) {
    size_t bytes = chunks * SPRY_SEGMENT_SIZE;
    size_t a = align > SPRY_SEGMENT_SIZE ? align : SPRY_SEGMENT_SIZE;
    /* reserve one alignment more, then place base so base+lead is aligned */
    if (bytes / SPRY_SEGMENT_SIZE != chunks || bytes + a < bytes) { errno = ENOMEM; return false; }
    uint8_t *p = spry_os_map_block(bytes + a, SPRY_SEGMENT_SIZE);
    if (!p) return false;
    uintptr_t want = ((uintptr_t)p + lead + a - 1) & ~(uintptr_t)(a - 1);
    uint8_t *base = (uint8_t *)(want - lead);
    /* trim the unused ends so the mapping is exactly the run */
    if (base > p) spry_os_release(p, (size_t)(base - p));
    uint8_t *end = p + bytes + a;
    if (end > base + bytes) spry_os_release(base + bytes, (size_t)(end - (base + bytes)));
    if (!spry_option(SPRY_OPT_THP)) spry_os_no_huge(base, bytes);
    out->base = base; out->chunks = chunks; out->clean = true; out->dedicated = true;
    spry_stat_add(&spry_stat.mapped, bytes);
    spry_stat_add(&spry_stat.arenas, 1);
    return true;
}

bool spry_arena_alloc(size_t chunks, size_t align, size_t lead, spry_run_t *out) {
    if (align <= SPRY_SEGMENT_SIZE && lead == 0) align = 0;
    if (chunks > ARENA_MAX_CHUNKS / 2 || align > ARENA_MAX_CHUNKS / 4 * SPRY_SEGMENT_SIZE)
        return arena_dedicated(chunks, align, lead, out);
    spry_lock(&arena_lock);
    spry_arena_t *a;
    size_t at = SIZE_MAX;
    for (a = arena_list; a; a = a->next)
        if ((at = arena_find(a, chunks, align, lead)) != SIZE_MAX) break;
    if (!a) {
        size_t extra = align ? align / SPRY_SEGMENT_SIZE + 1 : 0;
        a = arena_create(chunks + extra);
        if (a) at = arena_find(a, chunks, align, lead);
    }
    if (!a || at == SIZE_MAX) {
        spry_unlock(&arena_lock);
        errno = ENOMEM;
        return false;
    }
    size_t dirty = spry_bits_count(a->dirty, at, chunks);
    out->clean = dirty == 0;
    spry_bits_set(a->used, at, chunks);
    spry_bits_set(a->dirty, at, chunks);
    spry_bits_clr(a->aging, at, chunks);
    spry_unlock(&arena_lock);
    out->base = a->base + at * SPRY_SEGMENT_SIZE;
    out->chunks = chunks;
    out->dedicated = false;
    spry_stat_dirty_sub(dirty * SPRY_SEGMENT_SIZE);
    return true;
}

void spry_arena_free(const spry_run_t *run, bool dirty) {
    size_t bytes = run->chunks * SPRY_SEGMENT_SIZE;
    if (run->dedicated) {
        spry_os_release(run->base, bytes);
        spry_stat_sub(&spry_stat.mapped, bytes);
        return;
    }
    spry_lock(&arena_lock);
    for (spry_arena_t *a = arena_list; a; a = a->next) {
        uint8_t *b = run->base;
        if (b < a->base || b >= a->base + a->chunks * SPRY_SEGMENT_SIZE) continue;
        size_t at = (size_t)(b - a->base) / SPRY_SEGMENT_SIZE;
        spry_bits_clr(a->used, at, run->chunks);
        if (dirty) spry_stat_dirty_add(bytes);
        else spry_bits_clr(a->dirty, at, run->chunks);
        break;
    }
    spry_unlock(&arena_lock);
}

bool spry_arena_purge(bool force) {
    bool waiting = false;
    spry_lock(&arena_lock);
    for (spry_arena_t *a = arena_list; a; a = a->next) {
        size_t i = 0;
        while (i < a->chunks) {
            bool ripe = !spry_bit_get(a->used, i) && spry_bit_get(a->dirty, i) && (force || spry_bit_get(a->aging, i));
            if (!ripe) { i++; continue; }
            size_t j = i;
            while (j < a->chunks && !spry_bit_get(a->used, j) && spry_bit_get(a->dirty, j) &&
                   (force || spry_bit_get(a->aging, j))) j++;
            size_t n = j - i;
            spry_bits_set(a->used, i, n);          /* hold them while unlocked */
            spry_unlock(&arena_lock);
            spry_os_purge(a->base + i * SPRY_SEGMENT_SIZE, n * SPRY_SEGMENT_SIZE);
            spry_stat_add(&spry_stat.purged_total, n * SPRY_SEGMENT_SIZE);
            spry_stat_add(&spry_stat.purges, 1);
            spry_stat_dirty_sub(n * SPRY_SEGMENT_SIZE);
            spry_lock(&arena_lock);
            spry_bits_clr(a->used, i, n);
            spry_bits_clr(a->dirty, i, n);
            spry_bits_clr(a->aging, i, n);
            i = j;
        }
        /* what is free and dirty now ripens by the next call */
        for (size_t w = 0; w < ARENA_WORDS; w++) {
            a->aging[w] = a->dirty[w] & ~a->used[w];
            if (a->aging[w]) waiting = true;
        }
    }
    spry_unlock(&arena_lock);
    return waiting;
}

bool spry_arena_contains(const void *p) {
    const uint8_t *b = p;
    for (spry_arena_t *a = atomic_load_explicit(&arena_list, memory_order_acquire); a; a = a->next)
        if (b >= a->base && b < a->base + a->chunks * SPRY_SEGMENT_SIZE) return true;
    return false;
}

/* Lock order: arena_lock before meta_lock (arena_create allocates metadata). */
void spry_arena_fork_prepare(void) { spry_lock(&arena_lock); spry_lock(&meta_lock); }
void spry_arena_fork_parent(void)  { spry_unlock(&meta_lock); spry_unlock(&arena_lock); }
void spry_arena_fork_child(void) {
    spry_lock_init(&arena_lock);
    spry_lock_init(&meta_lock);
}
