/* The census of heaps behind the statistics (spry_heaps_walk, heap.h):
 * every heap's segments, page by page, under that heap's lock; the pages'
 * figures by size class, and the block caches' and outboxes' blocks. The
 * owners and the purge passes change what it reads without that lock: it
 * reads each figure once and clamps what it adds up (statistics only). */
#include "heap.h"
#include "page.h"
#include "segment.h"
#include "block_cache.h"
#include "os.h"

/* A page's fields as a walk reads them, each once. The walk holds the
 * lock of the heap whose segment it walks, but the owner changes its
 * pages' counts without it, and so does a purge pass collecting a dormant
 * heap under its guard; a span being freed is cleared before its
 * segment's lock is taken (segment.c). Statistics only: a torn view costs
 * a count, never a crash (a class index stays a valid one, slices are
 * clamped, a pin's two stores seen half done are clamped). */
typedef struct {
    uint8_t kind, class_idx, slice_count;
    uint32_t used, pinned, capacity;
    size_t block_size;
    uintptr_t key;
} page_view_t;

__attribute__((no_sanitize("thread")))
static page_view_t page_view(const spry_page_t *p) {
    const volatile spry_page_t *v = p;
    page_view_t view = { v->kind, v->class_idx, v->slice_count, v->used, v->pinned,
                         spry_page_capacity(p), v->block_size, spry_key_get(p) };
    return view;
}

/* Bytes of a page's blocks handed out (remote frees not yet collected
 * included). */
static size_t page_out_bytes(const page_view_t *p) {
    return (size_t)(p->used > p->pinned ? p->used - p->pinned : 0) * p->block_size;
}

/* Adds `slices` slices from slice `first` of a segment to a row: spanned,
 * and resident by the segment's map of resident OS pages (NULL: unknown);
 * returns the slices counted. */
static unsigned walk_slices(spry_class_walk_t *cw, unsigned first, unsigned slices, const unsigned char *resident) {
    const size_t per = SPRY_SLICE_SIZE / SPRY_OS_PAGE;
    /* never past the segment, whatever a racy read says */
    if (slices > SPRY_SLICES - first) slices = SPRY_SLICES - first;
    cw->spanned += (size_t)slices * SPRY_SLICE_SIZE;
    if (resident)
        for (size_t i = first * per; i < (first + slices) * per; i++) cw->resident += (resident[i] & 1) * SPRY_OS_PAGE;
    return slices;
}

/* A class page's figures (heap lock held); `out`: page_out_bytes. */
static void class_walk_page(spry_class_walk_t *cw, spry_page_t *p, const page_view_t *v, unsigned slice,
                            size_t out, const unsigned char *resident) {
    size_t bs = v->block_size;
    cw->pages++;
    walk_slices(cw, slice, v->slice_count, resident);
    /* blocks others freed count in `used` until the owner collects them */
    size_t waiting = (size_t)spry_xfree_count(atomic_load_explicit(&p->xfree, memory_order_relaxed)) * bs;
    cw->carved += (size_t)v->capacity * bs;
    cw->in_use += out - (waiting < out ? waiting : out);
    cw->waiting += waiting;
}

/* Blocks in the block caches are free, though their pages count them
 * (the owners change the counts without a lock: each read once, as in
 * page_view). After the whole walk: a heap's pages may lie in another
 * heap's segments (segment.c, lending), walked later (a review:
 * subtracted at once, clamped to what had been counted so far, a
 * borrower's cached blocks counted as used).
 * Remote frees still in the freeing threads' outboxes (remote.c) are
 * waiting too; their pages, counted above whichever heap owns them, stay
 * mapped (class pages of arena segments), so a stale slot read here only
 * misplaces a figure. */
__attribute__((no_sanitize("thread")))
static void walk_caches(spry_heap_t *all, spry_heap_walk_t *w, spry_class_walk_t *classes) {
    for (spry_heap_t *h = all; h; h = h->all_next) {
        const volatile spry_heap_t *v = h;
        size_t cached = spry_bcache_bytes_seen(h);
        w->used_bytes -= cached < w->used_bytes ? cached : w->used_bytes;
        if (classes)
            for (unsigned c = 0; c < SPRY_CLASS_COUNT; c++) {
                /* a flush clears limit, then room, without the lock */
                const volatile spry_block_cache_t *bc = &v->bcache[c];
                int limit = bc->limit, count = limit - (int)bc->room;
                if (count <= 0 || count > limit) continue;
                size_t n = (size_t)count * bc->block_size;
                classes[c].cached += n;
                classes[c].in_use -= n < classes[c].in_use ? n : classes[c].in_use;
            }
    }
    if (classes)
        for (spry_heap_t *h = all; h; h = h->all_next)
            for (unsigned i = 0; i < SPRY_OUTBOX_SLOTS; i++) {
                spry_page_t *p = __atomic_load_n(&h->outbox[i].page, __ATOMIC_RELAXED);
                uint32_t count = __atomic_load_n(&h->outbox[i].count, __ATOMIC_RELAXED);
                if (!p || !count) continue;
                page_view_t pv = page_view(p);
                if (pv.class_idx >= SPRY_CLASS_COUNT) continue;
                spry_class_walk_t *cw = &classes[pv.class_idx];
                size_t n = (size_t)count * pv.block_size;
                if (n > cw->in_use) n = cw->in_use;
                cw->in_use -= n;
                cw->waiting += n;
            }
}

void spry_heaps_walk(spry_heap_walk_t *w, spry_class_walk_t *classes) {
    spry_heap_t *all = spry_heaps_list();
    for (spry_heap_t *h = all; h; h = h->all_next) {
        w->pages_made += atomic_load_explicit(&h->pages_made, memory_order_relaxed);
        w->pages_given_back += atomic_load_explicit(&h->pages_given_back, memory_order_relaxed);
        w->spares_taken += atomic_load_explicit(&h->spares_taken, memory_order_relaxed);
        spry_lock(&h->lock);
        for (spry_segment_t *seg = h->segments; seg; seg = seg->next) {
            /* the kernel asked once a segment, not once a page: a walk holds
             * the heap's lock, and sampled at each new peak (stats.c) one
             * call a page held owners up to 35-47 ms at 40,000 pages */
            unsigned char map[SPRY_SEGMENT_SIZE / SPRY_OS_PAGE];
            const unsigned char *resident =
                classes && spry_os_resident_map(spry_segment_base(seg), SPRY_SEGMENT_SIZE, map) ? map : NULL;
            w->segments++;
            w->free_slices += (size_t)__builtin_popcountll(seg->free_mask);
            if (classes) {
                classes[SPRY_WALK_HEADERS].pages++;
                walk_slices(&classes[SPRY_WALK_HEADERS], 0, 1, resident);
            }
            for (unsigned i = 1; i < SPRY_SLICES; i++) {
                if ((seg->free_mask >> i) & 1) {
                    if (classes) {
                        classes[SPRY_WALK_FREE].pages++;
                        walk_slices(&classes[SPRY_WALK_FREE], i, 1, resident);
                    }
                    continue;
                }
                spry_page_t *p = spry_segment_span_at(seg, i);
                if (!p) continue;
                page_view_t v = page_view(p);
                if (v.kind == SPRY_PAGE_CLASS) {
                    w->class_pages++;
                    /* a spare (queue.c) is keyed FULL too, but empty */
                    if ((v.key & SPRY_KEY_FULL) && v.used) w->full_pages++;
                    w->class_bytes += (size_t)v.slice_count * SPRY_SLICE_SIZE;
                    size_t out = page_out_bytes(&v);
                    w->used_bytes += out;
                    if (classes) class_walk_page(&classes[v.class_idx], p, &v, i, out, resident);
                } else if (v.kind == SPRY_PAGE_LARGE) {
                    w->large_pages++;
                    size_t out = v.used ? v.block_size : 0;
                    w->used_bytes += out;
                    if (classes) {
                        /* freed by another thread: on the page's remote
                         * list until the owner drains its inbox */
                        bool waiting = spry_xfree_list(atomic_load_explicit(&p->xfree, memory_order_relaxed));
                        classes[SPRY_WALK_LARGE].pages++;
                        classes[SPRY_WALK_LARGE].in_use += waiting ? 0 : out;
                        classes[SPRY_WALK_LARGE].waiting += waiting ? out : 0;
                        walk_slices(&classes[SPRY_WALK_LARGE], i, v.slice_count, resident);
                    }
                } else if (v.kind == SPRY_PAGE_FREE && classes) {
                    /* a span kept whole for reuse (the hot cache of large
                     * spans, the span cache) or being set up: in no page */
                    classes[SPRY_WALK_FREE].pages += walk_slices(&classes[SPRY_WALK_FREE], i, v.slice_count, resident);
                }
            }
        }
        spry_unlock(&h->lock);
    }
    walk_caches(all, w, classes);
}
