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
#include "large.h"
#include "huge.h"
#include "guard.h"

void spry_free_double(void *p) {
    spry_report_error("free", "double free", p);
}

/* Another thread marks p, a block of 16 B or more, freed; false when it was
 * free already. By exchange: of two other threads freeing the block at
 * once, one sees the other's marker, so their lists never both hold it
 * (the owner takes those lists unwalked: page.c). */
static inline bool mark_freed_other(spry_page_t *page, void *p) {
    return __atomic_exchange_n(&((void **)p)[1], (void *)page, __ATOMIC_RELAXED) != page;
}

/* Marks the block p freed; false when it was free already. The owner clears
 * an 8-byte block's live bit; another thread sets its remote bit (the owner
 * clears both when it collects the block; page.h). */
static inline bool mark_freed(spry_page_t *page, void *p, bool owner) {
    if (page->kind == SPRY_PAGE_CLASS && page->class_idx == 0) {
        size_t i = spry_page_tiny_at(page, p);
        if (spry_page_tiny_free_at(page, i)) return false;
        if (owner) spry_page_live_clear_at(page, i);
        else if (!spry_page_remote_mark_at(page, i)) return false;   /* two threads at once */
        return true;
    }
    if (owner) {
        if (spry_block_marker(p) == page) return false;
        spry_block_mark_free(p, page);
        return true;
    }
    return mark_freed_other(page, p);
}

/* The owner's block of a page the fast path does not take: full, 8-byte
 * blocks, or a large block. An emptied page goes back here, not through
 * spry_page_empty, which takes its return address (here) for free's caller
 * (purge.h, spry_purge_free_point); free_checked's own follows. */
static inline void free_owner(spry_page_t *page, spry_block_t *b, uintptr_t key) {
    if (key & SPRY_KEY_FULL) {
        spry_heap_free_full(page->heap, page, b);
        return;
    }
    b->next = page->free;
    page->free = b;
    if (--page->used == 0) spry_page_release(page->heap, page);
}

/* Kept short (8-byte steps need no general block-start check, one pass
 * over the live bit, no purge poll): a malloc+free pair of 8-byte blocks
 * costs 168 instructions through the general path. */
void spry_free_tiny(void *p, spry_page_t *page) {
    size_t i = spry_page_tiny_index(page, p);
    if (spry_unlikely(i >= page->reserved))
        spry_report_error("free", "invalid pointer", p);
    else if (spry_unlikely(spry_page_remote_test_at(page, i) || !spry_page_live_clear_at(page, i)))
        spry_free_double(p);
    else
        free_owner(page, p, 0);           /* not full: the key has no FULL */
}

/* Another thread's block: batched in this thread's outbox when it has a
 * heap, else pushed at once, and its heap noted for this thread's first
 * malloc (heap.h, spry_heap_note_freed_into). */
static void free_remote(spry_page_t *page, spry_block_t *b) {
    if (page->kind == SPRY_PAGE_CLASS && spry_tls_heap != &spry_empty_heap) {
        spry_outbox_add(spry_tls_heap, page, b);
        return;
    }
    if (spry_tls_heap == &spry_empty_heap) spry_heap_note_freed_into(page->heap);
    spry_page_remote_free(page, b);
}

/* Every free the two common cases below leave: the pointer checked in full.
 * Apart, so that those two need no stack frame. */
static __attribute__((noinline)) void free_checked(spry_page_t *page, void *p, uintptr_t key) {
    switch (page->kind) {
    case SPRY_PAGE_HUGE:
        if (!spry_page_block_start(page, p)) break;
        spry_purge_free_point_early(__builtin_return_address(0));
        spry_huge_free(spry_segment_of(p));
        return;
    case SPRY_PAGE_CLASS:
    case SPRY_PAGE_LARGE: {
        if (!spry_page_block_start(page, p)) break;
        bool owner = (key & ~SPRY_KEY_FLAGS) == spry_thread_key();
        if (!mark_freed(page, p, owner)) { spry_free_double(p); return; }
        if (owner) {
            /* the heap read once: a free that empties the page gives its
             * span back, and another thread's trim may then return the
             * segment, page descriptor and all (a review: page->heap read
             * again after it was NULL, SIGSEGV) */
            spry_heap_t *heap = page->heap;
            spry_heap_enter(heap);
            free_owner(page, p, key);
            spry_heap_leave(heap);
        } else {
            free_remote(page, p);
        }
        /* the free may have emptied a page, or reached a dormant heap that
         * only a purge pass collects */
        spry_purge_free_point(__builtin_return_address(0));
        return;
    }
    case SPRY_PAGE_FREE:
        /* a large block's span, freed and not reused yet */
        if (page->start == p) { spry_report_error("free", "double free", p); return; }
        break;
    default:
        break;
    }
    spry_report_error("free", "invalid pointer", p);
}

/* The cached frees' rarer cases (spry_free_cached_inline, alloc_fast.h):
 * blocks of full pages of 1 KiB blocks or less, over the
 * cache's bounds, or while the heap's caches are being collected
 * (guard.h). */
void spry_free_cached_slow(spry_heap_t *heap, spry_page_t *page, void *p) {
    if (spry_unlikely(heap == &spry_empty_heap)) {
        /* no heap yet, and the page's key is this thread's pointer: a heap
         * a dead thread left keyed to it, which this thread takes over
         * (heap.c, heap_left_keyed); never the shared empty heap */
        heap = spry_heap_acquire();
        if (!heap || heap != page->heap) {
            spry_page_remote_free(page, p);      /* marked free already */
            return;
        }
    }
    if (page->block_size <= SPRY_SMALL_MAX) {
        /* a full page of 1 KiB blocks or less (never cached: its push
         * failed) takes its block back and goes back into its queue
         * (block_cache.h); out of the idle collection's reach, like its
         * fast paths: no guard */
        spry_heap_free_full(heap, page, p);
        spry_purge_free_point(__builtin_return_address(0));
        return;
    }
    spry_heap_enter(heap);
    if (!spry_bcache_push(heap, page, p)) spry_bcache_push_over(heap, page, p);
    spry_heap_leave(heap);
    /* the drain over the bounds may have freed pages */
    spry_purge_free_point(__builtin_return_address(0));
}

/* The owner's block of a class page above 128 KiB (key CACHED and SLOW,
 * page.c): checked for a block start first. */
static __attribute__((noinline)) void free_cached_checked(spry_page_t *page, void *p) {
    if (!spry_page_class_block_start(page, p)) {
        spry_report_error("free", "invalid pointer", p);
        return;
    }
    if (spry_unlikely(spry_block_marker(p) == page)) { spry_free_double(p); return; }
    spry_free_into_cache(page, p);
}

/* The first span into an empty hot cache tells the purge thread (see
 * spry_large_hot_push); `ra`: free's caller. Apart: a call in
 * spry_free_slow's own body gave it a stack frame. */
static __attribute__((noinline, cold)) void large_hot_first(const void *ra) {
    spry_purge_notify();
    spry_purge_free_point(ra);
}

/* The owner's large block (one per span, key SLOW): its start, not freed
 * yet, straight into the hot cache when it has room, without the general
 * path's page release (a churn of 128-256 KiB blocks spent 110
 * instructions a free there). False when it was not taken. */
static inline bool free_large_hot(spry_page_t *page, void *p) {
    if (p != page->start || spry_block_marker(p) == page || page->kind != SPRY_PAGE_LARGE ||
        !spry_heap_try_enter(page->heap))
        return false;
    spry_heap_t *heap = page->heap;
    bool was_empty = heap->hot_bytes == 0;
    bool kept = spry_large_hot_push(heap, page);
    if (kept) {
        spry_block_mark_free(p, page);
        page->used = 0;
        spry_large_block_gone(heap, page);
    }
    spry_heap_leave(heap);
    if (kept && spry_unlikely(was_empty)) large_hot_first(__builtin_return_address(0));
    return kept;
}

/* Another thread's block of a class page of 16 B blocks or more, the
 * commonest remote free: free_checked's steps for it without its other
 * cases and their stack frame (callgrind, a remote free of 32 B: 52
 * instructions in free_checked, 28 here). A thread with no heap yet goes
 * on there: it notes the heap for its first malloc. Apart, so that the
 * owner's cases above keep no frame either. */
static __attribute__((noinline)) void free_other_class(spry_page_t *page, void *p, uintptr_t mine) {
    spry_heap_t *heap = spry_tls_heap;
    if (spry_likely(heap != &spry_empty_heap) && spry_page_class_block_start(page, p)) {
        if (!mark_freed_other(page, p)) {
            spry_free_double(p);
            return;
        }
        spry_outbox_add(heap, page, p);
        spry_purge_free_point(__builtin_return_address(0));
        return;
    }
    free_checked(page, p, mine ^ spry_thread_key());
}

void spry_free_slow(spry_page_t *page, void *p, uintptr_t mine) {
    if (mine <= SPRY_KEY_FLAGS) {                 /* the owner's page */
        if (mine == SPRY_KEY_SLOW) {
            if (free_large_hot(page, p)) return;
        } else if ((mine | SPRY_KEY_FULL) == (SPRY_KEY_SLOW | SPRY_KEY_CACHED | SPRY_KEY_FULL)) {
            free_cached_checked(page, p);
            return;
        }
    } else if (page->kind == SPRY_PAGE_CLASS && page->class_idx != 0) {
        free_other_class(page, p, mine);
        return;
    }
    free_checked(page, p, mine ^ spry_thread_key());
}

void spry_free_special(void *p) {
    if (!p) return;
    unsigned k = spry_chunk_kind(p);
    if (k >= SPRY_CHUNK_AREA) {
        spry_purge_free_point_early(__builtin_return_address(0));
        spry_huge_area_free(p);
        return;
    }
    if (k == SPRY_CHUNK_ALIGNED) {
        spry_segment_t *seg = spry_aligned_huge_segment(p);
        if (spry_segment_pages(seg)[1].start == p) {
            spry_purge_free_point_early(__builtin_return_address(0));
            spry_huge_free(seg);
            return;
        }
        spry_report_error("free", "invalid pointer", p);
        return;
    }
    spry_foreign_free(p);
}
