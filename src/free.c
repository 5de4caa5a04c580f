/* The slow paths of free; the fast path is in alloc_fast.h.
 *
 * Every pointer that reaches here is checked before any list is touched: it
 * must be the start of a block of a live page, and that block must not be
 * free already (the free marker, or the live bitmap of class-0 pages; see
 * types.h). A pointer that fails is reported and ignored, so a double free or
 * a wild pointer never corrupts a list. */
#include "alloc_fast.h"
#include "page.h"
#include "segment.h"
#include "foreign.h"
#include "remote.h"
#include "report.h"
#include "purge.h"
#include "block_cache.h"

/* True when p is the start of a block of the page. */
static bool block_start_ok(const spry_page_t *page, const void *p) {
    const uint8_t *b = p;
    if (b < page->start) return false;
    size_t off = (size_t)(b - page->start);
    if (page->kind == SPRY_PAGE_CLASS)
        return off % page->block_size == 0 && off / page->block_size < page->reserved;
    return off == 0;
}

void spry_free_double(spry_page_t *page, void *p) {
    (void)page;
    spry_report_error("free", "double free", p);
}

/* The owner frees a block of a class-0 page (full or not). */
static void free_owner_slow(spry_page_t *page, void *p, uintptr_t key) {
    if (key & SPRY_KEY_SLOW) {
        if (!spry_page_live_clear(page, p)) { spry_report_error("free", "double free", p); return; }
    } else {
        if (spry_block_marker(p) == page) { spry_free_double(page, p); return; }
        spry_block_mark_free(p, page);
    }
    if (key & SPRY_KEY_FULL) {
        spry_heap_free_full(page->heap, page, p);
        return;
    }
    spry_block_t *b = p;
    b->next = page->free;
    page->free = b;
    if (--page->used == 0) spry_page_empty(page);
}

/* Another thread's block: batched in this thread's outbox when it has a
 * heap, else pushed at once. Class-0 blocks are checked by the owner when
 * it collects them. */
static void free_remote(spry_page_t *page, void *p) {
    bool marked = page->kind == SPRY_PAGE_LARGE || page->class_idx != 0;
    if (marked) {
        if (spry_block_marker(p) == page) { spry_free_double(page, p); return; }
        spry_block_mark_free(p, page);
    }
    if (page->kind == SPRY_PAGE_CLASS && spry_tls_heap != &spry_empty_heap)
        spry_outbox_add(spry_tls_heap, page, p);
    else
        spry_page_remote_free(page, p);
}

void spry_free_slow(spry_page_t *page, void *p) {
    uintptr_t key = spry_key_get(page);
    /* The owner's free into its full class page, the common slow free at
     * large working sets: into the block cache. Not checked for a block
     * start, like the fast path's frees (a division saved). */
    if (spry_likely(key == (spry_thread_key() | SPRY_KEY_FULL))) {
        if (spry_unlikely(spry_block_marker(p) == page)) { spry_free_double(page, p); return; }
        spry_block_mark_free(p, page);
        spry_bcache_push(spry_tls_heap, page, p);
        return;
    }
    switch (page->kind) {
    case SPRY_PAGE_HUGE:
        if (!block_start_ok(page, p)) break;
        spry_huge_free(spry_segment_of(p));
        spry_purge_start_point();
        return;
    case SPRY_PAGE_CLASS:
    case SPRY_PAGE_LARGE:
        if (!block_start_ok(page, p)) break;
        if ((key & ~SPRY_KEY_FLAGS) == spry_thread_key()) free_owner_slow(page, p, key);
        else free_remote(page, p);
        /* the free may have emptied a page, or reached a dormant heap that
         * only a purge pass collects */
        spry_purge_start_point();
        return;
    case SPRY_PAGE_FREE:
        /* a large block's span, freed and not reused yet */
        if (page->start == p) { spry_report_error("free", "double free", p); return; }
        break;
    default:
        break;
    }
    spry_report_error("free", "invalid pointer", p);
}

void spry_free_special(void *p) {
    if (!p) return;
    if (spry_chunk_kind(p) == SPRY_CHUNK_ALIGNED) {
        spry_segment_t *seg = spry_aligned_huge_segment(p);
        if (seg->pages[1].start == p) { spry_huge_free(seg); spry_purge_start_point(); return; }
        spry_report_error("free", "invalid pointer", p);
        return;
    }
    spry_foreign_free(p);
}
