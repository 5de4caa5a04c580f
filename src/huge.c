/* Huge blocks; see huge.h.
 *
 * Areas. A block of a few MiB rounded up to 4 MiB chunks wastes up to half
 * its run, and reusing a run for a block of another size either leaves the
 * old block's tail resident or purges it for the next block to fault back
 * (a loop of 256 KiB-32 MiB blocks took 4x tcmalloc's time that way, four
 * page faults for each of its one). So blocks up to SPRY_AREA_BLOCK_MAX take
 * whole 64 KiB granules of 256 MiB areas, tcmalloc's page heap at a coarser
 * grain: the free run (a bitmap: freeing coalesces by itself) whose end
 * holds the most resident granules, best fit among runs as good
 * (area_find), and freed granules stay resident (dirty) for the next
 * block. They go back to the
 * kernel when they stayed free for a purge delay, or at once beyond the
 * budget (a share of what huge blocks use), oldest first.
 *
 * Lookup: an area's 64 chunks carry SPRY_CHUNK_AREA + its index in the
 * chunk map, areas[] gives the area, and the descriptor of the granule
 * holding a pointer is the block's page when the pointer is in its first
 * granule. A free checks under the lock that the pointer is the start of a
 * live block; a freed block's descriptor keeps its start, so a second free
 * is reported as a double free.
 *
 * area_lock guards every area's bitmaps and descriptors and the areas[]
 * slots. madvise runs outside it: granules being purged are marked in use
 * (but not dirty) for the while, so nobody hands them out. */
#include "huge.h"
#include "arena.h"
#include "os.h"
#include "options.h"
#include "stats.h"
#include "purge.h"
#include "sizeclass.h"
#include "report.h"
#include "segment.h"
#include "bitmap.h"
#include "heap.h"
#include <errno.h>
#include <string.h>

#define AREA_SHIFT    28
#define AREA_SIZE     ((size_t)1 << AREA_SHIFT)                  /* 256 MiB */
#define AREA_CHUNKS   (AREA_SIZE >> SPRY_SEGMENT_SHIFT)
#define GRAN_SHIFT    SPRY_SLICE_SHIFT                           /* 64 KiB */
#define GRAN_SIZE     ((size_t)1 << GRAN_SHIFT)
#define GRANULES      (AREA_SIZE >> GRAN_SHIFT)
#define WORDS         (GRANULES / 64)
#define AREA_SLOTS    (256 - SPRY_CHUNK_AREA)     /* chunk map values left */

typedef struct spry_area {
    spry_page_t pages[GRANULES];   /* descriptor of the block starting there */
    uint8_t *base;                 /* its run of AREA_CHUNKS chunks (never a
                                      dedicated mapping); NULL while the slot
                                      holds none                             */
    uint64_t free[WORDS];          /* granules in no block                   */
    uint64_t dirty[WORDS];         /* granules that may be resident          */
    uint64_t aging[WORDS];         /* free and dirty at the last purge pass  */
    size_t free_granules;
    bool empty_last_pass;          /* entirely free at the last purge pass   */
} spry_area_t;

static spry_lock_t area_lock = SPRY_LOCK_INIT;
/* Held by whoever purges areas (a pass, or a free over budget), taken
 * before area_lock: granules being purged are out of the bitmaps while
 * area_lock is dropped, and fork takes this lock first, so a child never
 * inherits granules no thread will give back. */
static spry_lock_t area_purge_lock = SPRY_LOCK_INIT;
/* Slots are written under area_lock; a free reads its block's slot without
 * it (the slot cannot change while the block is live). */
static spry_area_t *_Atomic areas[AREA_SLOTS];
static unsigned area_slots_used;          /* slots ever filled (area_lock)   */
static size_t area_free_dirty;            /* free resident bytes (area_lock) */
static size_t area_in_use;                /* bytes in area blocks (area_lock) */
static size_t area_in_use_peak;           /* its recent peak, halved at each
                                             purge pass (area_lock)         */

/* Which granules a run search looks for. */
enum { RUN_FREE, RUN_DIRTY, RUN_AGED };   /* free; free+dirty; free+dirty+aging */

static inline uint64_t area_word(const spry_area_t *a, int which, size_t w) {
    uint64_t m = a->free[w];
    if (which != RUN_FREE) m &= a->dirty[w];
    if (which == RUN_AGED) m &= a->aging[w];
    return m;
}

/* The next run of granules of kind `which` at or after *i: its start, with
 * *i moved past it and its length in *len; GRANULES when there is none. */
static size_t run_next(const spry_area_t *a, int which, size_t *i, size_t *len) {
    size_t g = *i;
    while (g < GRANULES) {
        uint64_t m = area_word(a, which, g >> 6) >> (g & 63);
        if (!m) { g = (g | 63) + 1; continue; }
        g += (size_t)__builtin_ctzll(m);
        size_t end = g;
        while (end < GRANULES) {
            /* zeros shifted in at the top are the next word's business */
            uint64_t gap = ~area_word(a, which, end >> 6) >> (end & 63);
            if (gap) { end += (size_t)__builtin_ctzll(gap); break; }
            end = (end | 63) + 1;
        }
        *i = end;
        *len = end - g;
        return g;
    }
    *i = GRANULES;
    return GRANULES;
}

/* ---- areas -------------------------------------------------------------- */

/* The area holding p, or NULL: the chunk map may have changed since the
 * caller read it (an empty area given back), so it is read again here. */
static inline spry_area_t *area_of(const void *p) {
    unsigned k = spry_chunk_kind(p);
    if (k < SPRY_CHUNK_AREA) return NULL;
    spry_area_t *a = atomic_load_explicit(&areas[k - SPRY_CHUNK_AREA], memory_order_acquire);
    uint8_t *base = a ? a->base : NULL;
    return base && (const uint8_t *)p >= base && (const uint8_t *)p < base + AREA_SIZE ? a : NULL;
}

static inline size_t granule_of(const spry_area_t *a, const void *p) {
    return (size_t)((const uint8_t *)p - a->base) >> GRAN_SHIFT;
}

/* A new area in a free slot (area_lock held); NULL when out of memory or
 * of slots. */
static spry_area_t *area_create(void) {
    /* After a failure (an address-space limit) the next requests go to
     * huge segments without trying again: three reservations fail each time. */
    static unsigned skip;
    if (skip) { skip--; return NULL; }
    unsigned slot;
    spry_area_t *a = NULL;
    for (slot = 0; slot < area_slots_used; slot++) {
        a = atomic_load_explicit(&areas[slot], memory_order_relaxed);
        if (!a->base) break;
    }
    if (slot == AREA_SLOTS) return NULL;
    /* the run first: metadata is never given back, so it is taken only
     * when the area will exist (review: a failed run leaked 512 KiB of
     * descriptors per huge malloc under RLIMIT_AS) */
    spry_run_t run;
    if (!spry_arena_alloc(AREA_CHUNKS, 0, 0, &run)) { skip = 64; return NULL; }
    if (slot == area_slots_used) {
        /* descriptors want their cache lines to themselves (64-byte
         * alignment, 128 here); metadata comes 64-aligned */
        uint8_t *raw = spry_meta_alloc(sizeof(spry_area_t) + 64);
        if (!raw) { spry_arena_free(&run, !run.clean); skip = 64; return NULL; }
        a = (spry_area_t *)(((uintptr_t)raw + 127) & ~(uintptr_t)127);
    }
    a->base = run.base;
    memset(a->free, 0xff, sizeof a->free);
    memset(a->aging, 0, sizeof a->aging);
    memset(a->dirty, run.clean ? 0 : 0xff, sizeof a->dirty);
    a->free_granules = GRANULES;
    a->empty_last_pass = false;
    if (!run.clean) {
        area_free_dirty += AREA_SIZE;
        spry_stat_dirty_add(AREA_SIZE);
    }
    atomic_store_explicit(&areas[slot], a, memory_order_release);
    if (slot == area_slots_used) area_slots_used++;
    for (size_t c = 0; c < AREA_CHUNKS; c++)
        spry_chunk_map[((uintptr_t)a->base >> SPRY_SEGMENT_SHIFT) + c] = (uint8_t)(SPRY_CHUNK_AREA + slot);
    return a;
}

/* Gives an empty, purged area's run back to the arena (area_lock held). */
static void area_return(spry_area_t *a) {
    for (size_t c = 0; c < AREA_CHUNKS; c++)
        spry_chunk_map[((uintptr_t)a->base >> SPRY_SEGMENT_SHIFT) + c] = SPRY_CHUNK_FOREIGN;
    spry_run_t run = { a->base, AREA_CHUNKS, false, false };
    spry_arena_free(&run, false);
    a->base = NULL;
}

/* Whether any free granule of `a` may be resident (64 words). */
static bool area_has_free_dirty(const spry_area_t *a) {
    for (size_t w = 0; w < WORDS; w++)
        if (a->free[w] & a->dirty[w]) return true;
    return false;
}

/* A free run found for a block: its area, length, the block's place (the
 * run's end holding more resident granules) and how many they cover. */
typedef struct area_pick {
    spry_area_t *area;
    size_t len, at, dirty;
} area_pick_t;

/* Where n granules go, over every area: the free run whose head or tail
 * holds the most resident (dirty) granules, at that end; among runs as
 * resident, the shortest (best fit), the lowest on a tie. Best fit alone
 * took a purged run that fit exactly while a resident run waited for the
 * purge, and faulted every page in again (test huge_areas: 1,024 of 1,024
 * pages, now 0; blocks of 2-64 MiB, 8 live, one thread, 1,000 steps:
 * 12-30% less peak RSS and faults on 6 of 7 seeds, 9% more on one, README).
 * Only a run's ends: a block put where resident granules lie inside a run
 * cut it in two, and a 64 MiB block then found no run long enough in an
 * area that had one (a review: ENOMEM under an address-space limit; the
 * loop above gained nothing more from it). Under such a limit, where a
 * run cut short can mean ENOMEM, the best fit stays the choice, as for
 * growing blocks: 16 vectors grown by realloc to 48 MiB under 1 GB failed
 * 2,130 times in 3,000 steps, 1,775 with best fit. The limit is asked
 * only when the two choices differ (a system call each time: 300-500 ns
 * on a loop of blocks that reuse resident runs, where they agree). Where
 * no free granule is resident the search stops at the first exact fit,
 * as best fit did, and areas without one skip the counts: they cost 5-15x
 * the search's time on 2,000-6,000 free runs (a review), under the lock
 * every huge block takes (counted a word at a time since: 3x). */
static spry_area_t *area_find(size_t n, size_t *at_out) {
    area_pick_t fit = {NULL, SIZE_MAX, 0, 0}, res = fit, pick;
    bool any_dirty = area_free_dirty != 0;
    for (unsigned s = 0; s < area_slots_used; s++) {
        spry_area_t *a = atomic_load_explicit(&areas[s], memory_order_relaxed);
        if (!a->base || a->free_granules < n) continue;
        bool count = any_dirty && area_has_free_dirty(a);
        size_t i = 0, len;
        for (size_t at; (at = run_next(a, RUN_FREE, &i, &len)) < GRANULES;) {
            if (len < n) continue;
            size_t head = 0, tail = 0;
            if (count) {
                head = spry_bits_count(a->dirty, at, n);
                tail = spry_bits_count(a->dirty, at + len - n, n);
            }
            area_pick_t here = {a, len, head >= tail ? at : at + len - n, head >= tail ? head : tail};
            /* an exact fit, wholly resident or with no resident granule
             * anywhere: the best either way */
            if (len == n && (here.dirty == n || !any_dirty)) { pick = here; goto found; }
            if (len < fit.len) fit = here;
            if (here.dirty > res.dirty || (here.dirty == res.dirty && len < res.len)) res = here;
        }
    }
    if (!fit.area) return NULL;
    pick = res.dirty > fit.dirty && !spry_os_address_limited() ? res : fit;
found:
    *at_out = pick.at;
    return pick.area;
}

/* For a block realloc moved to grow it (area_lock held): the middle of the
 * longest free run when that holds twice the block, so that the block can
 * grow in place into the run's second half, while the first half stays for
 * other blocks; NULL when no run is that long. Best fit put the blocks of
 * threads growing vectors side by side, so that none could grow in place:
 * every doubling copied, the old and the new block both resident (4 threads
 * growing vectors to 64 MiB peaked at 2.2x glibc's RSS, which grows them
 * by mremap). It spends address space, though: the halves left are often
 * too short for the next block, and more areas are taken (64 vectors
 * doubled to 64 MiB: 6.2 GB mapped against 5.2 with best fit), so under an
 * address-space limit, where that ends in ENOMEM sooner (16 such vectors
 * under 1.4 GB: 6 reallocs failed, none with best fit; a review), blocks
 * keep best fit. */
static spry_area_t *area_find_room(size_t n, size_t *at_out) {
    spry_area_t *best = NULL;
    size_t best_len = 0, best_at = 0;
    for (unsigned s = 0; s < area_slots_used; s++) {
        spry_area_t *a = atomic_load_explicit(&areas[s], memory_order_relaxed);
        if (!a->base || a->free_granules < 2 * n || a->free_granules <= best_len) continue;
        size_t i = 0, len;
        for (size_t at; (at = run_next(a, RUN_FREE, &i, &len)) < GRANULES;)
            if (len > best_len) { best = a; best_len = len; best_at = at; }
    }
    if (!best || best_len < 2 * n) return NULL;
    *at_out = best_at + best_len / 2 - n / 2;
    return best;
}

/* Takes granules [at, at + n) of `a` for a block (area_lock held); returns
 * whether any of them may be resident. */
static bool area_take(spry_area_t *a, size_t at, size_t n) {
    size_t dirty = spry_bits_count(a->dirty, at, n);
    spry_bits_clr(a->free, at, n);
    spry_bits_clr(a->aging, at, n);
    spry_bits_set(a->dirty, at, n);
    a->free_granules -= n;
    a->empty_last_pass = false;
    area_free_dirty -= dirty * GRAN_SIZE;
    spry_stat_dirty_sub(dirty * GRAN_SIZE);
    return dirty != 0;
}

/* Gives granules [at, at + n) back, resident (area_lock held). */
static void area_give(spry_area_t *a, size_t at, size_t n) {
    spry_bits_set(a->free, at, n);
    a->free_granules += n;
    area_free_dirty += n * GRAN_SIZE;
    spry_stat_dirty_add(n * GRAN_SIZE);
}

/* Purges granules [at, at + n) of `a`, free and dirty. They are marked in
 * use for the while, so nobody takes them while area_lock is dropped
 * around the madvise (held on entry and on return). */
static void area_purge_run(spry_area_t *a, size_t at, size_t n) {
    spry_bits_clr(a->free, at, n);
    a->free_granules -= n;
    spry_unlock(&area_lock);
    spry_os_purge(a->base + (at << GRAN_SHIFT), n << GRAN_SHIFT);
    spry_stat_add(&spry_stat.purged_total, n << GRAN_SHIFT);
    spry_stat_add(&spry_stat.purges, 1);
    spry_stat_dirty_sub(n << GRAN_SHIFT);
    spry_lock(&area_lock);
    spry_bits_clr(a->dirty, at, n);
    spry_bits_clr(a->aging, at, n);
    spry_bits_set(a->free, at, n);
    a->free_granules += n;
    area_free_dirty -= n << GRAN_SHIFT;
}

/* Purges runs of kind `which` (RUN_AGED or RUN_DIRTY) of every area until
 * no more than `target` free resident bytes are left (area_purge_lock and
 * area_lock held). */
static void areas_purge_locked(int which, size_t target) {
    for (unsigned s = 0; s < area_slots_used && area_free_dirty > target; s++) {
        spry_area_t *a = atomic_load_explicit(&areas[s], memory_order_relaxed);
        size_t i = 0, len, at;
        while (a->base && area_free_dirty > target && (at = run_next(a, which, &i, &len)) < GRANULES)
            area_purge_run(a, at, len);
    }
}

/* Free resident memory areas may keep between purge passes: twice what
 * huge blocks used at their recent peak, at least 64 MiB (the heaps' spans
 * have the same rule: segment.c). Beyond it the freeing thread purges, down
 * to half of it, oldest granules first. Measured on a loop of 256 KiB-32 MiB
 * blocks (4 live), where the free granules' holes are about the live bytes:
 * with this budget it never purges and its peak RSS is below glibc's and
 * tcmalloc's; with half the current use (at least 32 MiB) it purged 2 GB in
 * 3.3 GB of blocks, faulted 18 times as often and took 17 times as long;
 * with the peak once, 3 purges made it 3 times slower. */
#define AREA_DIRTY_FLOOR ((size_t)64 << 20)

static size_t area_budget(void) {
    return 2 * area_in_use_peak > AREA_DIRTY_FLOOR ? 2 * area_in_use_peak : AREA_DIRTY_FLOOR;
}

/* Whether free resident memory passed the budget (area_lock held). */
static bool areas_over_budget(void) {
    return area_free_dirty > area_budget();
}

/* Called with no lock once areas_over_budget() said so: down to half the
 * budget, oldest first, if still over it. */
static void areas_trim_over_budget(void) {
    spry_lock(&area_purge_lock);
    spry_lock(&area_lock);
    size_t budget = area_budget();
    if (area_free_dirty > budget) {
        spry_stat_add(&spry_stat.budget_purges, 1);
        areas_purge_locked(RUN_AGED, budget / 2);
        areas_purge_locked(RUN_DIRTY, budget / 2);
    }
    spry_unlock(&area_lock);
    spry_unlock(&area_purge_lock);
}

static void *area_alloc(size_t size, bool zero, bool grows) {
    size_t n = (size + GRAN_SIZE - 1) >> GRAN_SHIFT;
    size_t at;
    if (grows && spry_os_address_limited()) grows = false;
    spry_lock(&area_lock);
    spry_area_t *a = grows ? area_find_room(n, &at) : NULL;
    if (!a) a = area_find(n, &at);
    if (!a) {
        a = area_create();
        if (!a) { spry_unlock(&area_lock); return NULL; }
        at = grows ? GRANULES / 2 - n / 2 : 0;       /* the middle, as above */
    }
    bool dirty = area_take(a, at, n);
    area_in_use += n << GRAN_SHIFT;
    if (area_in_use > area_in_use_peak) area_in_use_peak = area_in_use;
    spry_page_t *page = &a->pages[at];
    uint8_t *block = a->base + (at << GRAN_SHIFT);
    memset(page, 0, sizeof *page);
    page->kind = SPRY_PAGE_HUGE;
    page->block_size = n << GRAN_SHIFT;
    page->start = block;
    page->reserved = page->used = 1;
    page->is_zero = !dirty;
    spry_unlock(&area_lock);
    spry_stat_add(&spry_stat.huge_in_use, n << GRAN_SHIFT);
    spry_stat_in_use_add(n << GRAN_SHIFT);
    if (zero && dirty) memset(block, 0, size);
    if (spry_option(SPRY_OPT_THP) && (n << GRAN_SHIFT) >= 2 * 1024 * 1024)
        spry_os_huge(block, n << GRAN_SHIFT);
    return block;
}

void spry_huge_area_free(void *p) {
    spry_lock(&area_lock);
    spry_area_t *a = area_of(p);
    spry_page_t *page = a ? &a->pages[granule_of(a, p)] : &spry_empty_page;
    if (page->start != p || page->kind != SPRY_PAGE_HUGE) {
        bool twice = page->start == p && page->kind == SPRY_PAGE_FREE;
        spry_unlock(&area_lock);
        spry_report_error("free", twice ? "double free" : "invalid pointer", p);
        return;
    }
    size_t n = page->block_size >> GRAN_SHIFT;
    page->kind = SPRY_PAGE_FREE;                   /* start stays: double frees */
    area_give(a, granule_of(a, p), n);
    area_in_use -= n << GRAN_SHIFT;
    bool over = areas_over_budget();
    spry_unlock(&area_lock);
    if (over) areas_trim_over_budget();
    spry_stat_sub(&spry_stat.huge_in_use, n << GRAN_SHIFT);
    spry_stat_in_use_sub(n << GRAN_SHIFT);
    spry_purge_notify();
}

spry_page_t *spry_huge_area_page(const void *p) {
    spry_area_t *a = area_of(p);
    return a ? &a->pages[granule_of(a, p)] : &spry_empty_page;
}

/* Grows the block of `page` over the free granules after it, or gives its
 * tail granules back (resident, like a free). */
static bool area_resize(spry_page_t *page, size_t size) {
    size_t n = (size + GRAN_SIZE - 1) >> GRAN_SHIFT;
    size_t have = page->block_size >> GRAN_SHIFT;
    if (n == have) return true;
    spry_lock(&area_lock);
    spry_area_t *a = area_of(page->start);
    if (!a) { spry_unlock(&area_lock); return false; }
    size_t at = granule_of(a, page->start);
    if (n > have) {
        if (at + n > GRANULES || spry_bits_count(a->free, at + have, n - have) != n - have) {
            spry_unlock(&area_lock);
            return false;
        }
        area_take(a, at + have, n - have);
        area_in_use += (n - have) << GRAN_SHIFT;
        if (area_in_use > area_in_use_peak) area_in_use_peak = area_in_use;
        spry_stat_add(&spry_stat.huge_in_use, (n - have) << GRAN_SHIFT);
        spry_stat_in_use_add((n - have) << GRAN_SHIFT);
    } else {
        area_give(a, at + n, have - n);
        area_in_use -= (have - n) << GRAN_SHIFT;
        spry_stat_sub(&spry_stat.huge_in_use, (have - n) << GRAN_SHIFT);
        spry_stat_in_use_sub((have - n) << GRAN_SHIFT);
    }
    page->block_size = n << GRAN_SHIFT;
    bool over = areas_over_budget();
    spry_unlock(&area_lock);
    if (n < have) {
        if (over) areas_trim_over_budget();
        spry_purge_notify();
    }
    return true;
}

/* Empty areas go back to the arena once they stayed empty (and so were
 * purged) for a whole pass. */
static bool areas_purge_pass(bool force) {
    bool waiting = false;
    spry_lock(&area_purge_lock);
    spry_lock(&area_lock);
    /* the peak decays by half a pass: a burst's memory is not kept long */
    area_in_use_peak = area_in_use > area_in_use_peak / 2 ? area_in_use : area_in_use_peak / 2;
    areas_purge_locked(force ? RUN_DIRTY : RUN_AGED, 0);
    for (unsigned s = 0; s < area_slots_used; s++) {
        spry_area_t *a = atomic_load_explicit(&areas[s], memory_order_relaxed);
        if (!a->base) continue;
        bool empty = a->free_granules == GRANULES;
        if (empty && (force || a->empty_last_pass) && spry_bits_count(a->dirty, 0, GRANULES) == 0) {
            area_return(a);
            continue;
        }
        a->empty_last_pass = empty;
        for (size_t w = 0; w < WORDS; w++) {
            a->aging[w] = a->free[w] & a->dirty[w];
            if (a->aging[w]) waiting = true;
        }
        if (empty) waiting = true;
    }
    spry_unlock(&area_lock);
    spry_unlock(&area_purge_lock);
    return waiting;
}

/* Copies live area blocks above `after`, lowest first, into the arrays from
 * index n on, up to max; returns the new count. Each slot's area is walked
 * in address order, so the lowest ones are merged from the slots in turn. */
static size_t area_blocks_after(uintptr_t after, void **blocks, size_t *sizes, size_t n, size_t max) {
    spry_lock(&area_lock);
    while (n < max) {
        spry_page_t *low = NULL;
        for (unsigned s = 0; s < area_slots_used; s++) {
            spry_area_t *a = atomic_load_explicit(&areas[s], memory_order_relaxed);
            if (!a->base || (uintptr_t)a->base + AREA_SIZE <= after) continue;
            size_t g = (uintptr_t)a->base > after ? 0 : ((after - (uintptr_t)a->base) >> GRAN_SHIFT);
            for (; g < GRANULES; g++) {
                spry_page_t *page = &a->pages[g];
                if (spry_bit_get(a->free, g) || page->kind != SPRY_PAGE_HUGE) continue;
                if ((uintptr_t)page->start <= after) continue;
                if (!low || page->start < low->start) low = page;
                break;
            }
        }
        if (!low) break;
        blocks[n] = low->start;
        sizes[n++] = low->block_size;
        after = (uintptr_t)low->start;
    }
    spry_unlock(&area_lock);
    return n;
}

/* ---- huge segments ------------------------------------------------------ */

/* Live huge segments, for the heap walk only (no heap owns them): a list
 * through their headers' next/prev, unused otherwise in huge segments.
 * huge_lock is a leaf: nothing else is taken while it is held. */
static spry_lock_t huge_lock = SPRY_LOCK_INIT;
static spry_segment_t *huge_list;

static void huge_link(spry_segment_t *seg) {
    spry_lock(&huge_lock);
    seg->prev = NULL;
    seg->next = huge_list;
    if (huge_list) huge_list->prev = seg;
    huge_list = seg;
    spry_unlock(&huge_lock);
}

static void huge_unlink(spry_segment_t *seg) {
    spry_lock(&huge_lock);
    if (seg->prev) seg->prev->next = seg->next; else huge_list = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    spry_unlock(&huge_lock);
}

static inline void chunk_map_set(const void *p, uint8_t v) {
    spry_chunk_map[(uintptr_t)p >> SPRY_SEGMENT_SHIFT] = v;
}

static void *segment_alloc(size_t size, size_t align, bool zero) {
    /* The block starts after the header slice; a larger alignment below
     * 4 MiB moves it further into the first chunk; 4 MiB or more puts it at
     * the start of the second chunk, marked SPRY_CHUNK_ALIGNED. */
    size_t lead = SPRY_SLICE_SIZE, run_align = 0;
    if (align > SPRY_SLICE_SIZE) {
        if (align < SPRY_SEGMENT_SIZE) lead = align;
        else { lead = SPRY_SEGMENT_SIZE; run_align = align; }
    }
    /* at least a page: a 0-byte block must lie inside its run too (with a
     * 4 MiB lead it would start on the next chunk, another block's) */
    size_t usable = size ? spry_good_size_of(size) : SPRY_OS_PAGE;
    size_t chunks = (lead + usable + SPRY_SEGMENT_SIZE - 1) >> SPRY_SEGMENT_SHIFT;
    spry_run_t run;
    if (!spry_arena_alloc(chunks, run_align, run_align ? lead : 0, &run)) return NULL;
    spry_segment_t *seg = spry_segment_at(run.base);
    uint8_t *block = run.base + lead;
    if (!run.clean) {
        spry_segment_clear(seg, 2);
        /* A reused run: drop what lies beyond the block so it is not resident. */
        uint8_t *tail = block + usable, *end = run.base + chunks * SPRY_SEGMENT_SIZE;
        if ((size_t)(end - tail) >= SPRY_SLICE_SIZE) {
            spry_os_purge(tail, (size_t)(end - tail));
            spry_stat_add(&spry_stat.purges, 1);
        }
        if (zero) memset(block, 0, size);
    }
    seg->heap = NULL;
    seg->size = chunks * SPRY_SEGMENT_SIZE;
    seg->kind = SPRY_SEGMENT_HUGE;
    seg->arena_dedicated = run.dedicated;
    spry_page_t *page = &spry_segment_pages(seg)[1];
    spry_segment_name(seg, 0, SPRY_SLICES, page);
    page->kind = SPRY_PAGE_HUGE;
    spry_key_set(page, 0);                       /* every free of it takes the slow path */
    page->block_size = usable;          /* the run's rest allows in-place growth */
    page->start = block;
    page->reserved = page->used = 1;
    page->is_zero = run.clean;
    /* every other chunk of the run says "inside a huge block", so a wild
     * pointer there is reported rather than taken for another allocator's */
    for (size_t i = 0; i < chunks; i++) chunk_map_set(run.base + i * SPRY_SEGMENT_SIZE, SPRY_CHUNK_INTERIOR);
    if (run_align) chunk_map_set(block, SPRY_CHUNK_ALIGNED);
    else chunk_map_set(run.base, SPRY_CHUNK_SEGMENT);
    if (spry_option(SPRY_OPT_THP) && usable >= 2 * 1024 * 1024) spry_os_huge(block, usable);
    huge_link(seg);
    spry_stat_add(&spry_stat.huge_in_use, seg->size);
    spry_stat_in_use_add(seg->size);
    return block;
}

static bool segment_resize(spry_segment_t *seg, spry_page_t *page, size_t size) {
    size_t room = seg->size - (size_t)(page->start - spry_segment_base(seg));
    if (size > room) return false;
    /* Shrinking by a lot: give the tail's memory back now. */
    size_t keep = (size + SPRY_SLICE_SIZE - 1) & ~(SPRY_SLICE_SIZE - 1);
    if (room - keep >= 4 * SPRY_SLICE_SIZE && size < room / 2) {
        spry_os_purge(page->start + keep, room - keep);
        spry_stat_add(&spry_stat.purges, 1);
    }
    page->block_size = spry_good_size_of(size);
    return true;
}

void spry_huge_free(spry_segment_t *seg) {
    spry_page_t *page = &spry_segment_pages(seg)[1];
    uint8_t *base = spry_segment_base(seg);
    huge_unlink(seg);
    for (size_t i = 0; i < seg->size >> SPRY_SEGMENT_SHIFT; i++)
        chunk_map_set(base + i * SPRY_SEGMENT_SIZE, SPRY_CHUNK_FOREIGN);
    spry_stat_sub(&spry_stat.huge_in_use, seg->size);
    spry_stat_in_use_sub(seg->size);
    spry_run_t run = { base, seg->size >> SPRY_SEGMENT_SHIFT, false, seg->arena_dedicated != 0 };
    page->kind = SPRY_PAGE_FREE;
    spry_arena_free(&run, true);
    if (!run.dedicated) spry_purge_notify();
}

/* ---- either ------------------------------------------------------------- */

static void *huge_alloc(size_t size, size_t align, bool zero, bool grows) {
    if (size <= SPRY_AREA_BLOCK_MAX && align <= GRAN_SIZE) {
        int saved = errno;
        void *p = area_alloc(size ? size : 1, zero, grows);
        if (p) return p;
        /* out of area slots, or of memory: a segment may still fit */
        errno = saved;
    }
    return segment_alloc(size, align, zero);
}

/* huge_alloc, tried once more after a trim where it found no memory or
 * address space (spry_heap_oom_trim); a success leaves errno as it was. */
static void *huge_alloc_or_trim(size_t size, size_t align, bool zero, bool grows) {
    int errno_in = errno;
    void *p = huge_alloc(size, align, zero, grows);
    if (!p && spry_heap_oom_trim()) p = huge_alloc(size, align, zero, grows);
    errno = p ? errno_in : ENOMEM;
    return p;
}

void *spry_huge_alloc(size_t size, size_t align, bool zero) {
    return huge_alloc_or_trim(size, align, zero, false);
}

void *spry_huge_alloc_growable(size_t size) {
    return huge_alloc_or_trim(size, 0, false, true);
}

bool spry_huge_resize(spry_page_t *page, size_t size) {
    if (spry_chunk_kind(page->start) >= SPRY_CHUNK_AREA)
        return size <= SPRY_AREA_BLOCK_MAX && area_resize(page, size);
    return segment_resize(spry_segment_of(page), page, size);
}

bool spry_huge_purge(bool force) {
    return areas_purge_pass(force);
}

/* Lowest first above `after`: huge segments' blocks from their list (in no
 * order: the lowest each time; walks are rare, huge segments few), merged
 * with the areas' blocks. */
#define WALK_MAX 128
size_t spry_huge_blocks_after(uintptr_t after, void **blocks, size_t *sizes, size_t max) {
    void *sb[WALK_MAX], *ab[WALK_MAX];
    size_t ss[WALK_MAX], as[WALK_MAX], ns = 0, na, n = 0;
    if (max > WALK_MAX) max = WALK_MAX;
    uintptr_t from = after;
    spry_lock(&huge_lock);
    while (ns < max) {
        spry_page_t *low = NULL;
        for (spry_segment_t *seg = huge_list; seg; seg = seg->next) {
            spry_page_t *page = &spry_segment_pages(seg)[1];
            if ((uintptr_t)page->start > from && (!low || page->start < low->start)) low = page;
        }
        if (!low) break;
        sb[ns] = low->start;
        ss[ns++] = low->block_size;
        from = (uintptr_t)low->start;
    }
    spry_unlock(&huge_lock);
    na = area_blocks_after(after, ab, as, 0, max);
    for (size_t i = 0, j = 0; n < max && (i < ns || j < na); n++) {
        bool seg_first = j == na || (i < ns && (uintptr_t)sb[i] < (uintptr_t)ab[j]);
        blocks[n] = seg_first ? sb[i] : ab[j];
        sizes[n] = seg_first ? ss[i++] : as[j++];
    }
    return n;
}

/* The purge lock, then the area lock: it is held while areas take runs from
 * the arena, whose lock fork takes after this. */
void spry_huge_fork_prepare(void) {
    spry_lock(&area_purge_lock);
    spry_lock(&area_lock);
    spry_lock(&huge_lock);
}
void spry_huge_fork_parent(void) {
    spry_unlock(&huge_lock);
    spry_unlock(&area_lock);
    spry_unlock(&area_purge_lock);
}
void spry_huge_fork_child(void) {
    spry_lock_init(&huge_lock);
    spry_lock_init(&area_lock);
    spry_lock_init(&area_purge_lock);
}
