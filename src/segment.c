/* Segments and spans; see segment.h and types.h.
 *
 * heap->lock guards the heap's segment list and each segment's free, dirty
 * and aging masks. The owner takes it when it needs or returns a page span;
 * the purge thread when it returns memory; another heap's owner when it
 * borrows a span or returns one it borrowed (lending, below). Pages
 * themselves are not touched here beyond their span fields. */
#include "segment.h"
#include "arena.h"
#include "os.h"
#include "options.h"
#include "stats.h"
#include "init.h"
#include "purge.h"
#include "heap.h"
#include <errno.h>
#include <string.h>

#define SLICE_BITS(first, n) \
    ((n) >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << (n)) - 1) << (first))

/* Lowest index of a run of n set bits in m that is a multiple of step (a
 * power of two, at most 32), or -1. */
static int mask_find_run(uint64_t m, unsigned n, unsigned step) {
    uint64_t r = m;
    unsigned have = 1;
    while (have < n && r) {
        unsigned s = have < n - have ? have : n - have;
        r &= r >> s;
        have += s;
    }
    r &= ~(uint64_t)0 / (((uint64_t)1 << step) - 1);    /* bits 0, step, 2 step.. */
    return r ? __builtin_ctzll(r) : -1;
}

/* The start of the longest run of set bits of m (the lowest of equals), or
 * -1; *len: its length. */
static int mask_longest_run(uint64_t m, unsigned *len) {
    int best = -1;
    *len = 0;
    while (m) {
        unsigned i = (unsigned)__builtin_ctzll(m);
        uint64_t rest = ~(m >> i);
        unsigned l = rest ? (unsigned)__builtin_ctzll(rest) : 64 - i;
        if (l > *len) { best = (int)i; *len = l; }
        m &= ~SLICE_BITS(i, l);
    }
    return best;
}

/* The index of a page's first slice in its segment. */
static inline unsigned page_slice(const spry_page_t *page) {
    return (unsigned)(page - spry_segment_pages(spry_segment_of(page)));
}

static inline void chunk_map_set(const void *p, uint8_t v) {
    spry_chunk_map[(uintptr_t)p >> SPRY_SEGMENT_SHIFT] = v;
}

/* Heap counters, under heap->lock: a relaxed load and store, no RMW. */
static inline void heap_count(_Atomic(size_t) *c, size_t add, size_t sub) {
    size_t v = atomic_load_explicit(c, memory_order_relaxed) + add;
    atomic_store_explicit(c, v > sub ? v - sub : 0, memory_order_relaxed);
}

/* span_in_use grew: keep the peak (heap lock). */
static inline void heap_peak(spry_heap_t *heap) {
    size_t v = atomic_load_explicit(&heap->span_in_use, memory_order_relaxed);
    if (v > heap->span_in_use_peak) heap->span_in_use_peak = v;
}

/* The heap's segment list keeps those with free slices ahead of the full
 * ones, so that span allocation stops at the first full one: with
 * thousands of segments full of one-block spans (blocks realloc grew,
 * alloc.c) each span allocation walked them all, three times. */
static void segment_link(spry_heap_t *heap, spry_segment_t *seg) {
    seg->prev = NULL;
    seg->next = heap->segments;
    if (heap->segments) heap->segments->prev = seg; else heap->segments_last = seg;
    heap->segments = seg;
    heap->segment_count++;
}

static void segment_link_last(spry_heap_t *heap, spry_segment_t *seg) {
    seg->next = NULL;
    seg->prev = heap->segments_last;
    if (heap->segments_last) heap->segments_last->next = seg; else heap->segments = seg;
    heap->segments_last = seg;
    heap->segment_count++;
}

static void segment_unlink(spry_heap_t *heap, spry_segment_t *seg) {
    if (seg->prev) seg->prev->next = seg->next; else heap->segments = seg->next;
    if (seg->next) seg->next->prev = seg->prev; else heap->segments_last = seg->prev;
    heap->segment_count--;
}

/* Slices first..first+n-1 of seg join `page`'s span: out of the free mask,
 * dirty from now on, counted in use. A segment left without free slices goes
 * last. Returns those that were dirty already. heap->lock held. */
static uint64_t slices_take(spry_heap_t *heap, spry_segment_t *seg, unsigned first, unsigned n,
                            spry_page_t *page) {
    uint64_t bits = SLICE_BITS(first, n);
    uint64_t was_dirty = bits & seg->dirty_mask;
    seg->free_mask &= ~bits;
    seg->dirty_mask |= bits;
    seg->aging_mask &= ~bits;
    spry_segment_name(seg, first, first + n, page);
    heap_count(&heap->span_in_use, (size_t)n * SPRY_SLICE_SIZE, 0);
    heap_peak(heap);
    if (was_dirty)
        heap_count(&heap->span_dirty, 0, (size_t)__builtin_popcountll(was_dirty) * SPRY_SLICE_SIZE);
    if (seg->free_mask == 0 && seg != heap->segments_last) {
        segment_unlink(heap, seg);
        segment_link_last(heap, seg);
    }
    return was_dirty;
}

/* Slices back in the free mask (their counts are the caller's); a segment
 * that had none free goes first. heap->lock held. */
static void slices_give(spry_heap_t *heap, spry_segment_t *seg, uint64_t bits) {
    if (seg->free_mask == 0 && seg != heap->segments) {
        segment_unlink(heap, seg);
        segment_link(heap, seg);
    }
    seg->free_mask |= bits;
}

static spry_segment_t *segment_create(spry_heap_t *heap) {
    spry_run_t run;
    if (!spry_arena_alloc(1, 0, 0, &run)) return NULL;
    spry_segment_t *seg = spry_segment_at(run.base);
    if (!run.clean) spry_segment_clear(seg, SPRY_SLICES);
    /* A pointer into the header or a never used slice finds a page that is
     * FREE and keyed 0: free reports it instead of following NULL. */
    spry_segment_name(seg, 0, SPRY_SLICES, &spry_empty_page);
    seg->heap = heap;
    seg->size = SPRY_SEGMENT_SIZE;
    seg->kind = SPRY_SEGMENT_NORMAL;
    seg->free_mask = SPRY_SLICES_ALL;
    seg->dirty_mask = run.clean ? 0 : SPRY_SLICES_ALL;
    seg->aging_mask = 0;
    spry_stat_in_use_add(SPRY_SLICE_SIZE);                 /* the header slice */
    if (!run.clean) heap_count(&heap->span_dirty, SPRY_SEGMENT_SIZE - SPRY_SLICE_SIZE, 0);
    chunk_map_set(seg, SPRY_CHUNK_SEGMENT);
    segment_link(heap, seg);
    spry_stat_add(&spry_stat.segments, 1);
    return seg;
}

static void segment_return(spry_heap_t *heap, spry_segment_t *seg) {
    segment_unlink(heap, seg);
    chunk_map_set(seg, SPRY_CHUNK_FOREIGN);
    /* Its free slices are purged by now; the header goes too, so the arena
     * gets the chunk back clean. */
    spry_run_t run = { spry_segment_base(seg), 1, false, false };
    spry_stat_sub(&spry_stat.segments, 1);
    spry_stat_in_use_sub(SPRY_SLICE_SIZE);
    spry_os_purge(run.base, SPRY_SLICE_SIZE);
    spry_arena_free(&run, false);
}

/* ---- span cache (heap lock) ------------------------------------------- */

/* Slices after a span's first, back in the free mask: they stop naming its
 * descriptor, which a later, shorter span at the same first slice reuses
 * (a stale pointer into them would reach that page). heap->lock held. */
static void slices_forget(spry_segment_t *seg, unsigned first, unsigned n) {
    spry_segment_name(seg, first + 1, first + n, &spry_empty_page);
}

static void cache_push(spry_heap_t *heap, spry_page_t *page, size_t bytes) {
    page->next = heap->span_cache[page->slice_count];
    heap->span_cache[page->slice_count] = page;
    page->cache_tick = heap->purge_tick;
    heap->span_cached += bytes;
}

/* The first free run of `slices` slices at a multiple of `step` in the
 * heap's segments (only resident slices if `resident`), its segment in
 * *seg; -1 when none. heap->lock held. Segments with free slices come
 * first, so the walk stops at the first full one. */
static int free_run(spry_heap_t *heap, unsigned slices, unsigned step, bool resident,
                    spry_segment_t **seg) {
    for (spry_segment_t *s = heap->segments; s && s->free_mask; s = s->next) {
        int at = mask_find_run(s->free_mask & (resident ? s->dirty_mask : ~(uint64_t)0), slices, step);
        if (at >= 0) { *seg = s; return at; }
    }
    return -1;
}

/* Slices at..at+slices-1 of seg, taken (slices_take), set up as `heap`'s
 * page, all under seg's heap's lock: its length, so that a statistics walk
 * (heap.c) does not take the descriptor's last use's and count slices
 * twice or not at all (a review); its heap, so that walks for another
 * heap's pages (spry_heap_spans) do not see the last user. */
static spry_page_t *span_setup(spry_heap_t *owner, spry_segment_t *seg, unsigned at, unsigned slices,
                               spry_heap_t *heap) {
    spry_page_t *page = &spry_segment_pages(seg)[at];
    uint64_t was_dirty = slices_take(owner, seg, at, slices, page);
    page->slice_count = (uint8_t)slices;
    page->heap = heap;
    page->start = spry_segment_base(seg) + (size_t)at * SPRY_SLICE_SIZE;
    page->is_zero = was_dirty == 0;
    page->resident = was_dirty == SLICE_BITS(at, slices);
    return page;
}

/* A cached span back to its segment's free mask (still dirty). */
static void cache_give(spry_heap_t *heap, spry_page_t *page, unsigned s) {
    spry_segment_t *seg = spry_segment_of(page);
    unsigned first = page_slice(page);
    slices_give(heap, seg, SLICE_BITS(first, s));
    slices_forget(seg, first, s);
    heap->span_cached -= (size_t)s * SPRY_SLICE_SIZE;
}

/* The cached spans of s slices, all, back to the free masks. */
static void cache_flush_slot(spry_heap_t *heap, unsigned s) {
    while (heap->span_cache[s]) {
        spry_page_t *page = heap->span_cache[s];
        heap->span_cache[s] = page->next;
        cache_give(heap, page, s);
    }
}

/* Moves cached spans back to their segments' free masks (still dirty):
 * those cached before the current tick, or all. They are purged a tick
 * later like any free span: within one to two purge delays in all. */
static void cache_flush(spry_heap_t *heap, bool all) {
    for (unsigned s = 1; s < SPRY_SPAN_CACHE_SLOTS; s++) {
        if (all) { cache_flush_slot(heap, s); continue; }
        spry_page_t **link = &heap->span_cache[s];
        while (*link) {
            spry_page_t *page = *link;
            if (page->cache_tick >= heap->purge_tick) { link = &page->next; continue; }
            *link = page->next;
            cache_give(heap, page, s);
        }
    }
}

/* ---- lending (heap locks) ---------------------------------------------
 *
 * A heap that has no resident free run for a span takes one from another
 * heap's segments before touching memory never used or purged: a thread's
 * freed memory stayed its own, up to its budget, while other threads
 * faulted in new memory (4 live threads taking turns with 48 MiB each: 198
 * MiB resident, 57-83 now; test heap_lending). Threads handing blocks to
 * each other (bench exchange) did not move: each heap keeps the peak of its
 * own pages, and lends only beyond what they span. The span stays in
 * the lender's segment: its slices, their masks and counts are the
 * lender's (span_in_use, dirty when freed, under its lock), its page is the
 * borrower's (page->heap, its key, its blocks). So every function below
 * locks the segment's heap, not the page's, and a freed borrowed span goes
 * back to the lender's free slices. span_lent and span_borrowed count what
 * is out; walks of a heap's pages (spry_heap_spans) look in its lenders'
 * segments while it borrows. Locks: a borrower holds only the lender's
 * lock, taken with trylock (a busy heap is passed over), never its own at
 * the same time. */

/* `bytes` of the owner's slices in seg left (or joined) a page of `user`'s:
 * the lending counts, when they are two heaps. The owner's lock held. */
static void lend_count(spry_heap_t *owner, spry_heap_t *user, spry_segment_t *seg, size_t add,
                       size_t sub) {
    if (owner == user) return;
    seg->lent = (uint16_t)(seg->lent + (add >> SPRY_SLICE_SHIFT) - (sub >> SPRY_SLICE_SHIFT));
    /* atomic stores: lender_spare and spry_heaps_dormant_hold read it
     * without the lock */
    __atomic_store_n(&owner->span_lent, owner->span_lent + add - sub, __ATOMIC_RELAXED);
    if (add) atomic_fetch_add_explicit(&user->span_borrowed, add, memory_order_relaxed);
    if (sub) atomic_fetch_sub_explicit(&user->span_borrowed, sub, memory_order_relaxed);
}

static _Atomic(uint32_t) offers;       /* spry_spans_offered calls */

void spry_spans_offered(void) {
    atomic_fetch_add_explicit(&offers, 1, memory_order_relaxed);
}

/* Whether to look at other heaps for this fresh span: after a look that found
 * nothing, the next waits for 1, 2, 4 ... up to 64 fresh spans, so that a
 * heap that grows walks the heap list seldom, unless a hurried look
 * collected heaps since. The owner's fields: only the owner takes spans for
 * its heap. */
static bool borrow_due(spry_heap_t *heap) {
    if (heap->borrow_wait == 0) return true;
    /* memory was offered since the last look: look now */
    if (heap->borrow_epoch != atomic_load_explicit(&offers, memory_order_relaxed)) return true;
    heap->borrow_wait--;
    return false;
}

static void borrow_result(spry_heap_t *heap, bool found) {
    if (found) { heap->borrow_misses = 0; return; }
    heap->borrow_epoch = atomic_load_explicit(&offers, memory_order_relaxed);
    if (heap->borrow_misses < 7) heap->borrow_misses++;
    heap->borrow_wait = 1u << heap->borrow_misses >> 1;
}

/* A heap that takes this much fresh memory asks for blocked threads'
 * caches to be collected (spry_purge_hurry), so that what they hold is lent
 * to it and to the heaps after it. */
#define HURRY_BYTES ((size_t)1 << 20)

/* Whether heap h has free resident memory to spare for `bytes` more: more
 * than its own pages span after the loan. Below that, what it freed is what
 * it takes again as it churns, and lending it made heaps that each free and
 * take spans steadily (64-512 KiB blocks, 8 threads) lend to each other,
 * trim over their budgets and fault it back: 0.85x the rate, 1.2x the RSS.
 * Read without h's lock first, then again under it. */
static bool lender_spare(spry_heap_t *h, size_t bytes) {
    size_t dirty = atomic_load_explicit(&h->span_dirty, memory_order_relaxed);
    size_t own = atomic_load_explicit(&h->span_in_use, memory_order_relaxed) -
                 __atomic_load_n(&h->span_lent, __ATOMIC_RELAXED);
    return dirty >= bytes && dirty - bytes > own;
}

/* A run of `slices` free resident slices at a multiple of `step` from
 * another heap's segments, set up as `heap`'s page; NULL when no heap that
 * is not busy has one. Called with no lock held. */
static spry_page_t *span_borrow(spry_heap_t *heap, unsigned slices, unsigned step) {
    size_t bytes = (size_t)slices * SPRY_SLICE_SIZE;
    for (spry_heap_t *h = spry_heaps_list(); h; h = h->all_next) {
        if (h == heap || !lender_spare(h, bytes)) continue;
        if (!spry_trylock(&h->lock)) continue;
        if (!lender_spare(h, bytes)) { spry_unlock(&h->lock); continue; }
        /* its span cache's spans of that length go back to its free slices
         * first (what it freed last, kept for its own next span: most of
         * what a heap that freed much has resident) */
        if (h->span_cache[slices]) cache_flush_slot(h, slices);
        spry_segment_t *seg;
        int at = free_run(h, slices, step, true, &seg);
        if (at < 0) { spry_unlock(&h->lock); continue; }
        spry_page_t *page = span_setup(h, seg, (unsigned)at, slices, heap);
        lend_count(h, heap, seg, bytes, 0);
        spry_unlock(&h->lock);
        spry_stat_add(&spry_stat.spans_borrowed, 1);
        return page;
    }
    return NULL;
}

/* spry_span_alloc, and spry_span_alloc_least with least < slices (step 1). */
static spry_page_t *span_alloc(spry_heap_t *heap, unsigned slices, unsigned step, unsigned least) {
    spry_lock(&heap->lock);
    /* A cached span serves an aligned request only if it starts aligned. */
    spry_page_t **link = &heap->span_cache[slices];
    while (*link && page_slice(*link) % step) link = &(*link)->next;
    /* a span one slice longer does too (its tail stays unused): with random
     * large sizes the exact length is often missing, and the walk over the
     * segments it saves costs thousands of instructions */
    if (!*link && step == 1 && slices + 1 < SPRY_SPAN_CACHE_SLOTS) link = &heap->span_cache[slices + 1];
    spry_page_t *cached = *link;
    if (cached) {
        size_t bytes = (size_t)cached->slice_count * SPRY_SLICE_SIZE;
        *link = cached->next;
        heap->span_cached -= bytes;
        heap_count(&heap->span_in_use, bytes, 0);
        heap_peak(heap);
        heap_count(&heap->span_dirty, 0, bytes);
        cached->heap = heap;            /* under the lock: spry_heap_spans */
        spry_unlock(&heap->lock);
        cached->next = NULL;
        /* a class-0 page moved its start past its live bitmap */
        cached->start = spry_segment_base(cached) + (size_t)page_slice(cached) * SPRY_SLICE_SIZE;
        cached->is_zero = 0;
        cached->resident = 1;
        return cached;
    }
    spry_segment_t *seg = NULL;
    /* Hot first: a run of slices still resident from their last use costs no
     * page faults and adds nothing to RSS; then any free run. */
    int at = free_run(heap, slices, step, true, &seg);
    if (at < 0 && heap->span_cached) {
        /* Cached spans of other sizes: resident memory beats fresh memory. */
        cache_flush(heap, true);
        at = free_run(heap, slices, step, true, &seg);
    }
    if (at < 0 && least < slices) {
        /* the longest resident run of at least `least`, before fresh ones;
         * none is `slices` long (the searches above, under this lock) */
        unsigned best = 0;
        spry_segment_t *found = NULL;
        for (spry_segment_t *s = heap->segments; s && s->free_mask; s = s->next) {
            unsigned len;
            int i = mask_longest_run(s->free_mask & s->dirty_mask, &len);
            if (i >= 0 && len >= least && len > best) { best = len; found = s; at = i; }
        }
        if (found) { seg = found; slices = best; }
    }
    if (at < 0 && borrow_due(heap)) {
        spry_unlock(&heap->lock);
        spry_page_t *page = span_borrow(heap, slices, step);
        borrow_result(heap, page != NULL);
        /* not locked again first (the backoff is the owner's): a fork
         * during that wait left the child the span in no list. Until the
         * caller sets the page up, a fork still does, as for a span of
         * the heap's own (a review) */
        if (page) return page;
        spry_lock(&heap->lock);
    }
    bool hurry = false;
    if (at < 0) {
        heap->fresh_bytes += (size_t)slices * SPRY_SLICE_SIZE;
        if (heap->fresh_bytes >= HURRY_BYTES) { heap->fresh_bytes = 0; hurry = true; }
        at = free_run(heap, slices, step, false, &seg);
    }
    if (at < 0) {
        seg = segment_create(heap);
        if (!seg) { spry_unlock(&heap->lock); errno = ENOMEM; return NULL; }
        at = mask_find_run(seg->free_mask, slices, step);
    } else if (seg != heap->segments) {
        /* keep segments with room near the front */
        segment_unlink(heap, seg);
        segment_link(heap, seg);
    }
    spry_page_t *page = span_setup(heap, seg, (unsigned)at, slices, heap);
    spry_unlock(&heap->lock);
    if (hurry) spry_purge_hurry(heap);
    return page;
}

spry_page_t *spry_span_alloc(spry_heap_t *heap, unsigned slices, unsigned step) {
    return span_alloc(heap, slices, step, slices);
}

spry_page_t *spry_span_alloc_least(spry_heap_t *heap, unsigned slices, unsigned least) {
    return span_alloc(heap, slices, 1, least);
}

/* Gives the slices of a span after its first `keep` back (free, dirty).
 * heap->lock held. */
static void span_cut_locked(spry_heap_t *owner, spry_heap_t *user, spry_page_t *page, unsigned keep) {
    spry_segment_t *seg = spry_segment_of(page);
    unsigned first = page_slice(page), have = page->slice_count;
    size_t bytes = (size_t)(have - keep) * SPRY_SLICE_SIZE;
    slices_give(owner, seg, SLICE_BITS(first + keep, have - keep));
    spry_segment_name(seg, first + keep, first + have, &spry_empty_page);
    spry_purge_notify();
    heap_count(&owner->span_in_use, 0, bytes);
    heap_count(&owner->span_dirty, bytes, 0);
    lend_count(owner, user, seg, 0, bytes);
    page->slice_count = (uint8_t)keep;
}

void spry_span_cut(spry_heap_t *heap, spry_page_t *page, unsigned keep) {
    spry_heap_t *owner = spry_segment_of(page)->heap;
    spry_lock(&owner->lock);
    span_cut_locked(owner, heap, page, keep);
    spry_unlock(&owner->lock);
}

bool spry_span_resize(spry_heap_t *heap, spry_page_t *page, size_t usable) {
    spry_segment_t *seg = spry_segment_of(page);
    unsigned first = page_slice(page);
    unsigned have = page->slice_count;
    unsigned need = (unsigned)((usable + SPRY_SLICE_SIZE - 1) >> SPRY_SLICE_SHIFT);
    /* growth within the span: its tail is the block's already (a shrink
     * to fewer slices gives the tail back) */
    if (need == have || (need < have && usable >= page->block_size)) {
        page->block_size = usable;
        return true;
    }
    if (first + need > SPRY_SLICES) return false;
    spry_heap_t *owner = seg->heap;
    spry_lock(&owner->lock);
    if (need > have) {
        uint64_t more = SLICE_BITS(first + have, need - have);
        if ((seg->free_mask & more) != more) { spry_unlock(&owner->lock); return false; }
        slices_take(owner, seg, first + have, need - have, page);
        lend_count(owner, heap, seg, (size_t)(need - have) * SPRY_SLICE_SIZE, 0);
    } else {
        span_cut_locked(owner, heap, page, need);
    }
    page->slice_count = (uint8_t)need;
    page->block_size = usable;
    spry_unlock(&owner->lock);
    return true;
}

/* Purges free dirty slices of the heap: those free since the previous tick
 * (all of them if force) until `target` dirty bytes remain, and returns
 * segments that stayed entirely free to the arena (`tick` passes only).
 * heap->lock held. Returns true while free dirty memory is left waiting. */
static bool heap_purge_locked(spry_heap_t *heap, bool force, bool tick, size_t target) {
    bool waiting = false;
    spry_segment_t *next;
    for (spry_segment_t *seg = heap->segments; seg; seg = next) {
        next = seg->next;
        uint64_t ripe = seg->free_mask & seg->dirty_mask & (force ? ~(uint64_t)0 : seg->aging_mask);
        while (ripe && atomic_load_explicit(&heap->span_dirty, memory_order_relaxed) > target) {
            unsigned i = (unsigned)__builtin_ctzll(ripe);
            unsigned j = i;
            while (j < 64 && ((ripe >> j) & 1)) j++;
            size_t bytes = (size_t)(j - i) * SPRY_SLICE_SIZE;
            spry_os_purge(spry_segment_base(seg) + (size_t)i * SPRY_SLICE_SIZE, bytes);
            spry_stat_add(&spry_stat.purged_total, bytes);
            spry_stat_add(&spry_stat.purges, 1);
            heap_count(&heap->span_dirty, 0, bytes);
            uint64_t bits = SLICE_BITS(i, j - i);
            seg->dirty_mask &= ~bits;
            ripe &= ~bits;
        }
        if (!tick) continue;
        /* An entirely free segment goes back to the arena once it has stayed
         * free for a whole tick (its slices are all purged by then). */
        if (seg->free_mask == SPRY_SLICES_ALL && (seg->dirty_mask & SPRY_SLICES_ALL) == 0 &&
            (force || seg->aging_mask == SPRY_SLICES_ALL)) {
            segment_return(heap, seg);
            continue;
        }
        seg->aging_mask = seg->free_mask;
        if (seg->free_mask & seg->dirty_mask) waiting = true;
        if (seg->free_mask == SPRY_SLICES_ALL) waiting = true;
    }
    return waiting;
}

/* Free but resident memory a heap may keep between purge ticks: twice what
 * it uses, and at least 16 MiB shared among the live heaps beyond one per CPU
 * the process may use (at least 1 MiB each), so that 64 threads on 2 cores
 * do not keep 32 times the memory of 2. Beyond the budget the freeing thread
 * purges at once, down to half of it, so the syscalls are amortised over many
 * frees (purging on every free costs jemalloc users 2x: ClickHouse PR 108430).
 * Smaller budgets make purge storms (page faults and, with many threads, TLB
 * shootdowns on memory purged and taken again): measured, in_use/4 cut the
 * 64-512 KiB churn's RSS 8x but its speed 17x; 1x in_use instead of 2x made
 * a 16-thread cross-thread exchange 2.3x slower for 3.3x less RSS. */
#define DIRTY_FLOOR ((size_t)16 << 20)
/* The span cache holds up to a quarter of that. */
#define BUDGET_MIN  ((size_t)1 << 20)

size_t spry_heap_share(size_t bytes) {
    size_t live = atomic_load_explicit(&spry_stat.heaps, memory_order_relaxed) -
                  atomic_load_explicit(&spry_stat.heaps_abandoned, memory_order_relaxed);
    size_t cpus = (size_t)spry_cpus;
    if (live > cpus) bytes = bytes / live * cpus;
    return bytes > BUDGET_MIN ? bytes : BUDGET_MIN;
}

/* Measured against the peak use since the last tick, not the current one:
 * a program that frees most of its memory at once should not pay for
 * madvise in the middle of that (the next tick returns it anyway); one whose
 * freed memory keeps growing while its use stays flat should. */
static size_t heap_budget(spry_heap_t *heap) {
    size_t in_use = heap->span_in_use_peak;
    size_t floor = spry_heap_share(DIRTY_FLOOR);
    return 2 * in_use > floor ? 2 * in_use : floor;
}

static void heap_trim_locked(spry_heap_t *heap, size_t budget);

void spry_span_free(spry_heap_t *user, spry_page_t *page) {
    spry_segment_t *seg = spry_segment_of(page);
    spry_heap_t *heap = seg->heap;
    unsigned first = page_slice(page);
    uint64_t bits = SLICE_BITS(first, page->slice_count);
    size_t bytes = (size_t)page->slice_count * SPRY_SLICE_SIZE;
    page->kind = SPRY_PAGE_FREE;
    spry_key_set(page, 0);
    page->free = page->local_free = NULL;
    page->used = page->reserved = 0;
    spry_page_capacity_set(page, 0);
    page->block_size = 0;
    spry_lock(&heap->lock);
    heap_count(&heap->span_in_use, 0, bytes);
    heap_count(&heap->span_dirty, bytes, 0);
    lend_count(heap, user, seg, 0, bytes);
    size_t budget = heap_budget(heap);
    if (heap->span_cached + bytes <= budget / 4) cache_push(heap, page, bytes);
    else {
        slices_give(heap, seg, bits);
        slices_forget(seg, first, page->slice_count);
    }
    bool over = atomic_load_explicit(&heap->span_dirty, memory_order_relaxed) > budget;
    /* Over budget: the purge thread does it at once, off this thread's
     * path (a mass free should not wait for madvise); without it, here. */
    if (over && !spry_purge_urgent(heap)) heap_trim_locked(heap, budget);
    spry_unlock(&heap->lock);
}

/* Down to half the budget: oldest first (free since the last tick), then
 * the rest. heap->lock held. */
static void heap_trim_locked(spry_heap_t *heap, size_t budget) {
    spry_stat_add(&spry_stat.budget_purges, 1);
    cache_flush(heap, true);
    heap_purge_locked(heap, false, false, budget / 2);
    heap_purge_locked(heap, true, false, budget / 2);
}

void spry_heap_trim_urgent(spry_heap_t *heap) {
    spry_lock(&heap->lock);
    atomic_store_explicit(&heap->purge_urgent, 0, memory_order_relaxed);
    size_t budget = heap_budget(heap);
    if (atomic_load_explicit(&heap->span_dirty, memory_order_relaxed) > budget / 2)
        heap_trim_locked(heap, budget);
    spry_unlock(&heap->lock);
}

bool spry_heap_purge_spans(spry_heap_t *heap, bool force) {
    spry_lock(&heap->lock);
    __atomic_store_n(&heap->purge_tick, heap->purge_tick + 1, __ATOMIC_RELAXED);
    heap->span_in_use_peak = atomic_load_explicit(&heap->span_in_use, memory_order_relaxed);
    cache_flush(heap, force);
    bool waiting = heap_purge_locked(heap, force, true, 0);
    if (heap->span_cached) waiting = true;
    spry_unlock(&heap->lock);
    return waiting;
}

/* The spans of `heap`'s pages in `owner`'s segments (another heap's: only
 * those segments that lend). */
static void spans_in(spry_heap_t *owner, spry_heap_t *heap, bool lock,
                     void (*visit)(spry_page_t *, void *), void *arg) {
    if (lock) spry_lock(&owner->lock);
    for (spry_segment_t *seg = owner->segments; seg; seg = seg->next) {
        if (owner != heap && seg->lent == 0) continue;
        for (unsigned i = 1; i < SPRY_SLICES; i++) {
            /* spans only: reading every descriptor mapped the header's
             * untouched pages (the kernel's zero page: three more pages a
             * segment that mincore, and so the census, counted resident
             * after each thread's exit) */
            spry_page_t *page = spry_segment_span_at(seg, i);
            if (page && page->heap == heap) visit(page, arg);
        }
    }
    if (lock) spry_unlock(&owner->lock);
}

void spry_heap_spans(spry_heap_t *heap, bool lock, void (*visit)(spry_page_t *, void *), void *arg) {
    spans_in(heap, heap, lock, visit, arg);
    if (atomic_load_explicit(&heap->span_borrowed, memory_order_relaxed) == 0) return;
    /* Heaps that lend nothing are passed over unlocked: nothing can lend
     * to this heap meanwhile (only its owner borrows for it, and the owner
     * is here). Every heap's walk, locked, cost a thread's exit 0.5-0.75
     * ms beside 8 GB of another thread's blocks (a review). */
    for (spry_heap_t *h = spry_heaps_list(); h; h = h->all_next)
        if (h != heap && __atomic_load_n(&h->span_lent, __ATOMIC_RELAXED) != 0)
            spans_in(h, heap, lock, visit, arg);
}
