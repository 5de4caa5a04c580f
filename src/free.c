/* The slow paths of free; the fast path is in alloc_fast.h.
 *
 * Every pointer that reaches here is checked before any list is touched: it
 * must be the start of a block of a live page (except the owner's frees into
 * its own full pages, which trust the pointer like the fast path), and that
 * block must not be free already (the free marker, or the live bitmap of
 * class-0 pages; see types.h). A pointer that fails is reported and ignored,
 * so a double free or a wild pointer never corrupts a list. */
#include "alloc_fast.h"
#include "page.h"
#include "segment.h"
#include "foreign.h"
#include "remote.h"
#include "report.h"
#include "purge.h"
#include "block_cache.h"

/* Exact divisibility without a division (the remote free path runs this on
 * every block): a class size is m << s with m odd and at most 15, and x is a
 * multiple of an odd m exactly when x * m^-1 (mod 2^64) <= (2^64 - 1) / m. */
static const uint64_t odd_inverse[16] = {
    [1] = 1, [3] = 0xaaaaaaaaaaaaaaab, [5] = 0xcccccccccccccccd, [7] = 0x6db6db6db6db6db7,
    [9] = 0x8e38e38e38e38e39, [11] = 0x2e8ba2e8ba2e8ba3, [13] = 0x4ec4ec4ec4ec4ec5,
    [15] = 0xeeeeeeeeeeeeeeef };
static const uint64_t odd_limit[16] = {
    [1] = ~(uint64_t)0, [3] = 0x5555555555555555, [5] = 0x3333333333333333,
    [7] = 0x2492492492492492, [9] = 0x1c71c71c71c71c71, [11] = 0x1745d1745d1745d1,
    [13] = 0x13b13b13b13b13b1, [15] = 0x1111111111111111 };

static bool multiple_of_class(size_t off, size_t size) {
    unsigned s = (unsigned)__builtin_ctzl(size);
    size_t m = size >> s;
    if (off & (((size_t)1 << s) - 1)) return false;
    return (off >> s) * odd_inverse[m] <= odd_limit[m];
}

/* True when p is the start of a block of the page. */
static bool block_start_ok(const spry_page_t *page, const void *p) {
    const uint8_t *b = p;
    if (b < page->start) return false;
    size_t off = (size_t)(b - page->start);
    if (page->kind == SPRY_PAGE_CLASS)
        return off < (size_t)page->reserved * page->block_size && multiple_of_class(off, page->block_size);
    return off == 0;
}

void spry_free_double(spry_page_t *page, void *p) {
    (void)page;
    spry_report_error("free", "double free", p);
}

/* The owner frees a block of a full 8-byte-block page or a large block
 * (their pointer checked already). */
static void free_owner_slow(spry_page_t *page, void *p, uintptr_t key) {
    if (page->kind == SPRY_PAGE_CLASS && page->class_idx == 0) {
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
 * heap, else pushed at once. Checked first like the owner's frees: by the
 * free marker, or for 8-byte blocks by reading the owner's live bitmap (a
 * block freed by its owner and then here must not be pushed: its link is
 * in use on the owner's list). */
static void free_remote(spry_page_t *page, void *p) {
    if (page->kind == SPRY_PAGE_CLASS && page->class_idx == 0) {
        if (!spry_page_live_test(page, p)) { spry_free_double(page, p); return; }
    } else {
        if (spry_block_marker(p) == page) { spry_free_double(page, p); return; }
        spry_block_mark_free(p, page);
    }
    if (page->kind == SPRY_PAGE_CLASS && spry_tls_heap != &spry_empty_heap)
        spry_outbox_add(spry_tls_heap, page, p);
    else
        spry_page_remote_free(page, p);
}

/* The owner frees an 8-byte block of a page that is not full: the common
 * case of this slow path, kept short (no division, no purge poll). */
static void free_class0_owner(spry_page_t *page, void *p) {
    uintptr_t off = (uintptr_t)p - (uintptr_t)page->start;
    if (spry_unlikely((off & 7) || off >> 3 >= page->reserved)) {   /* p < start wraps too */
        spry_report_error("free", "invalid pointer", p);
        return;
    }
    if (spry_unlikely(!spry_page_live_clear(page, p))) {
        spry_report_error("free", "double free", p);
        return;
    }
    spry_block_t *b = p;
    b->next = page->free;
    page->free = b;
    if (--page->used == 0) spry_page_empty(page);
}

void spry_free_slow(spry_page_t *page, void *p) {
    uintptr_t key = spry_key_get(page);
    /* The owner's free into its full class page, the common slow free at
     * large working sets: into the block cache. Not checked for a block
     * start, like the fast path's frees (no room for the check there). */
    if (spry_likely(key == (spry_thread_key() | SPRY_KEY_FULL))) {
        if (spry_unlikely(spry_block_marker(p) == page)) { spry_free_double(page, p); return; }
        spry_block_mark_free(p, page);
        spry_bcache_push(spry_tls_heap, page, p);
        return;
    }
    if (spry_likely(key == (spry_thread_key() | SPRY_KEY_SLOW)) && page->kind == SPRY_PAGE_CLASS) {
        free_class0_owner(page, p);
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
