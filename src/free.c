/* The slow paths of free; the fast path is in alloc_fast.h. */
#include "alloc_fast.h"
#include "page.h"
#include "segment.h"
#include "foreign.h"
#include "remote.h"
#include "purge.h"

/* True when p is the start of a block of the page (checked off the fast
 * path only: a wrong pointer is reported instead of corrupting a list). */
static bool block_start_ok(const spry_page_t *page, const void *p) {
    const uint8_t *b = p;
    if (b < page->start) return false;
    size_t off = (size_t)(b - page->start);
    if (page->kind == SPRY_PAGE_CLASS)
        return off % page->block_size == 0 && off / page->block_size < page->reserved;
    return off == 0;
}

/* Each way out that freed something ends at the purge start point: the free
 * may have emptied a page, or reached a dormant heap that only a purge pass
 * collects. */
void spry_free_slow(spry_page_t *page, void *p) {
    if (spry_key_get(page) == (spry_thread_key() | SPRY_KEY_FULL)) {
        spry_heap_free_full(page->heap, page, p);
        spry_purge_start_point();
        return;
    }
    switch (page->kind) {
    case SPRY_PAGE_HUGE:
        if (!block_start_ok(page, p)) break;
        spry_huge_free(spry_segment_of(p));
        spry_purge_start_point();
        return;
    case SPRY_PAGE_CLASS:
        if (!block_start_ok(page, p)) break;
        if (spry_tls_heap != &spry_empty_heap) spry_outbox_add(spry_tls_heap, page, p);
        else spry_page_remote_free(page, p);
        spry_purge_start_point();
        return;
    case SPRY_PAGE_LARGE:
        if (!block_start_ok(page, p)) break;
        spry_page_remote_free(page, p);
        spry_purge_start_point();
        return;
    default:
        break;
    }
    spry_report_invalid("free", p);
}

void spry_free_special(void *p) {
    if (!p) return;
    if (spry_chunk_kind(p) == SPRY_CHUNK_ALIGNED) {
        spry_segment_t *seg = spry_aligned_huge_segment(p);
        if (seg->pages[1].start == p) { spry_huge_free(seg); spry_purge_start_point(); return; }
        spry_report_invalid("free", p);
        return;
    }
    spry_foreign_free(p);
}
