/* The prefixed API: allocation, reallocation, alignment, sizes. */
#include "../include/spry.h"
#include "../include/spry_debug.h"
#include "alloc_fast.h"
#include "sizeclass.h"
#include "segment.h"
#include "foreign.h"
#include "purge.h"
#include "options.h"
#include "init.h"
#include "page.h"
#include "large.h"
#include "huge.h"
#include "guard.h"
#include "remote.h"
#include "report.h"
#include "walk.h"
#include "block.h"
#include "mode.h"
#include "debug/entry.h"
#include <errno.h>
#include <string.h>

#define SPRY_API __attribute__((visibility("default")))

/* Every entry below starts with `if (spry_cautious)`: in libspry-debug.so
 * the call goes to the cautious layer (src/debug), in libspry.so the branch
 * is compiled away. */

SPRY_API SPRY_HOT_ENTRY void *spry_malloc(size_t n) {
    if (spry_cautious) return spry_debug_alloc(n, 0, SPRY_FAMILY_MALLOC);
    return spry_malloc_inline(n);
}

SPRY_API SPRY_HOT_ENTRY void spry_free(void *p) {
    if (spry_cautious) { spry_debug_free(p, SPRY_FAMILY_MALLOC); return; }
    spry_free_inline(p);
}

SPRY_API void spry_free_sized(void *p, size_t n) {
    (void)n;
    if (spry_cautious) { spry_debug_free(p, SPRY_FAMILY_MALLOC); return; }
    spry_free_inline(p);
}

SPRY_API void *spry_calloc(size_t count, size_t size) {
    if (spry_cautious) return spry_debug_calloc(count, size);
    size_t n;
    if (spry_unlikely(__builtin_mul_overflow(count, size, &n))) { errno = ENOMEM; return NULL; }
    void *p = spry_malloc_inline(n);
    if (spry_unlikely(!p)) return NULL;
    if (n > SPRY_CLASS_MAX) {
        /* Large and huge blocks fresh from the kernel are zero already. */
        spry_page_t *page = spry_block_page(p);
        if (page->is_zero) return p;
    }
    memset(p, 0, n);
    return p;
}

SPRY_API size_t spry_usable_size(const void *p) {
    if (spry_cautious) return spry_debug_usable_size(p);
    if (!p) return 0;
    spry_page_t *page = spry_block_page(p);
    if (spry_likely(page != NULL)) return page->block_size;
    return spry_foreign_usable_size((void *)p);
}

SPRY_API size_t spry_good_size(size_t n) {
    if (n > SPRY_ALLOC_MAX) return n;
    return spry_good_size_of(n);
}

SPRY_API bool spry_owns(const void *p) {
    return p && spry_chunk_kind(p) != SPRY_CHUNK_FOREIGN;
}

/* Out of line, like realloc_free, so that spry_realloc's paths end in tail
 * calls and need no stack frame. */
static __attribute__((noinline, cold)) void *realloc_invalid(void *p) {
    spry_report_error("realloc", "block already freed or invalid pointer", p);
    errno = EINVAL;
    return NULL;
}

/* realloc(p, 0) frees p and returns NULL: glibc's choice. */
static __attribute__((noinline)) void *realloc_free(void *p) {
    spry_free_inline(p);
    return NULL;
}

/* A block that realloc grows past this, from at least a quarter of the new
 * size (a block grown step by step, not one reused for a bigger size: seed
 * 000's shrink test grows 1-byte strings to 20 KB, and a span each time
 * made it 19% slower), moves into a span of slices of its own (64 KiB each,
 * only the bytes written resident: large.c), where later growth takes no
 * copy: the span's tail, then the free slices after it. In class pages a
 * block grown a few bytes at a time (a string appended to) left a block of
 * every class it passed in the block cache, resident: a 200 KB string's
 * growth kept about 9 times its size per thread (1.8 MB; glibc, which
 * grows it into the free chunk after it, 0.2). Below this the classes
 * passed add up to at most 9 x 32 KiB; a span's 64 KiB of address space
 * would be more than twice the block, and each span holds one block, so
 * many of them lengthen the segment walk of span allocation (160,000
 * blocks grown to 20 KB ran 5x slower with 16 KiB here). */
#define REALLOC_SPAN_MIN ((size_t)32 * 1024)

/* Down to the block cache's classes (above 1 KiB), a few such blocks at a
 * time (SMALL_GROWING_MAX a heap, live) take a span too: a string appended
 * to left a block of every class it passed up to 32 KiB in the block
 * caches, each class's page resident, about 0.5 MB a thread that built
 * one. Strings of 200 KB built by appends, 100 a thread (seed 001's naive
 * builder), peak RSS with 1 / 4 / 12 threads: 2.9 / 5.5 / 12.2 MB -> 2.4 /
 * 3.4 / 6.3 (glibc 2.0 / 2.8 / 4.3), time level or faster; from 4 KiB
 * 2.45 / 3.7 / 7.1. The bound keeps the case above to its classes: a
 * thread that keeps its grown blocks has at most that many spans of them
 * (50,000 strings grown to 2-30 KB and kept: time and RSS level). */
#define REALLOC_SMALL_SPAN_MIN SPRY_SMALL_MAX
#define SMALL_GROWING_MAX 8

/* Room for one more small growing block. At the bound, the spans other
 * threads freed that wait in the inbox are taken first: their frees count
 * only once the owner collects them, and a producer whose strings a
 * consumer frees seldom reached the slow path that does (a review: 8-48
 * of 400 strings in spans, none once 8 waited). */
static bool small_growing_room(spry_heap_t *heap) {
    if (atomic_load_explicit(&heap->small_growing, memory_order_relaxed) < SMALL_GROWING_MAX) return true;
    if (!atomic_load_explicit(&heap->inbox, memory_order_relaxed)) return false;
    spry_heap_enter(heap);
    spry_inbox_drain(heap);
    spry_heap_leave(heap);
    spry_purge_start_point();            /* the drain may have freed pages */
    return atomic_load_explicit(&heap->small_growing, memory_order_relaxed) < SMALL_GROWING_MAX;
}

/* A block grown from old to n bytes takes a span of its own (see above). */
static bool realloc_to_span(spry_heap_t *heap, size_t n, size_t old) {
    if (n <= old || old < n / 4 || n > SPRY_PAGED_MAX) return false;
    if (n > REALLOC_SPAN_MIN) return true;
    return n > REALLOC_SMALL_SPAN_MIN && small_growing_room(heap);
}

/* The span of a block realloc grows (realloc_to_span); one below 32 KiB
 * counted in the heap that holds it, the caller's once the malloc has
 * run (a thread's first call, a realloc, passes the empty heap; a thread
 * past its TLS's end takes a heap for the call and leaves it dormant
 * again, where another thread may take it: not counted). A reused span keeps what it has resident past
 * the block (large.c: no madvise and no page faults for strings built one
 * after another), but for one such block a heap: a block that starts
 * growing while another still lives takes that one's tail back to the
 * kernel (a review: 8 strings of 1.5 KB kept on spans taken hot kept
 * about 60 KiB resident each, for their lives). */
static void *realloc_span(spry_heap_t *heap, size_t n) {
    void *q = spry_heap_malloc_span(heap, n);
    if (q && n <= REALLOC_SPAN_MIN) {
        spry_page_t *page = spry_block_page(q);
        heap = page->heap;
        if (heap != spry_tls_heap) return q;
        spry_heap_enter(heap);
        page->grows_small = 1;
        atomic_fetch_add_explicit(&heap->small_growing, 1, memory_order_relaxed);
        if (heap->small_tail) spry_large_tail_purge(heap, heap->small_tail);
        heap->small_tail = page->tail_pages ? page : NULL;
        spry_heap_leave(heap);
    }
    return q;
}

/* Moves p (old usable bytes) to a new block of n bytes. A shrink to a much
 * smaller size moves too, so the big block is reused (seed 000: 3 M strings
 * grown to 20 KB, shrunk to 1 byte): strings that end that small go
 * straight to the 8-byte blocks, and a copy of at most 8 bytes is one move
 * (every block has 8). */
static void *realloc_move(void *p, size_t n, size_t old) {
    void *q;
    if (n <= 8) q = spry_heap_malloc_tiny(spry_tls_heap);
    else if (realloc_to_span(spry_tls_heap, n, old))
        q = realloc_span(spry_tls_heap, n);
    else if (n > SPRY_LARGE_MAX && n <= SPRY_AREA_BLOCK_MAX && n > old && old >= n / 4)
        q = spry_huge_alloc_growable(n);
    else q = spry_malloc_inline(n);
    if (!q) return NULL;                 /* p is untouched */
    size_t len = old < n ? old : n;
    if (len <= 8) memcpy(q, p, 8);
    else memcpy(q, p, len);
    spry_free_inline(p);
    return q;
}

/* The two moves of seed 000's shrink test (a string grown from 1 byte to
 * 20 KB and shrunk back, 3 M times a loop), each with the old block's page,
 * checked already, in hand: the 8-byte block taken and the old block freed
 * without the general paths' lookups and second checks. Through
 * realloc_move each string cost about 90 instructions more than at a1608b7
 * (before the 8-byte blocks' live bitmap). */

/* The owner's block of a class page of 16 B or more (flags: mine, FULL or
 * CACHED or none), a block start, not free, to n <= 8 bytes. */
static __attribute__((noinline)) void *realloc_to_tiny(spry_page_t *page, void *p, size_t n, uintptr_t mine) {
    spry_page_t *tp = spry_tls_heap->queues[0].first;
    if (spry_unlikely(!tp || !tp->free)) return realloc_move(p, n, page->block_size);
    spry_block_t *q = spry_page_take(tp);
    spry_page_live_set(tp, q);
    memcpy(q, p, 8);
    if (mine == 0) {
        /* what free's fast path does; taking q touched only the 8-byte page */
        spry_block_mark_free(p, page);
        spry_page_push(page, p);
    } else {
        spry_free_cached_inline(p, page, mine);
    }
    return q;
}

/* realloc_from_tiny found p freed already: reported; q stays the result. */
static __attribute__((noinline, cold)) void *realloc_freed_twice(void *p, void *q) {
    spry_free_double(p);
    return q;
}

/* The owner's live 8-byte block p (index i) of a page that is not full,
 * not freed by another thread (its remote bit, checked by the caller), to
 * n > 8 bytes. The malloc's slow path may collect remote frees into the
 * 8-byte page (its inbox drain, a trim another thread asked for), so a free
 * of p by another thread racing with this realloc, the program's bug, may
 * be collected there and p's live bit cleared: the bit is tested again (a
 * review: before the remote bit, trusting the first test put p on the list
 * twice and handed live blocks out again). While the bit stays set the
 * page is as it was: still this thread's, not full (only 8-byte mallocs
 * fill it), p counted in its used blocks. */
static __attribute__((noinline)) void *realloc_from_tiny(spry_page_t *page, void *p, size_t n, size_t i) {
    void *q = spry_malloc_inline(n);
    if (spry_unlikely(!q)) return NULL;
    memcpy(q, p, 8);
    if (spry_unlikely(!spry_page_live_clear_at(page, i))) return realloc_freed_twice(p, q);
    spry_page_push(page, p);
    return q;
}

/* Every block but the owner's blocks of class pages (8-byte blocks: of
 * pages that are not full). */
static __attribute__((noinline)) void *realloc_slow(spry_page_t *page, void *p, size_t n) {
    if (spry_unlikely(!spry_block_is_live(page, p))) return realloc_invalid(p);
    if (spry_unlikely(n > SPRY_ALLOC_MAX)) { errno = ENOMEM; return NULL; }
    size_t old = page->block_size;
    if (page->kind == SPRY_PAGE_HUGE) {
        /* Huge blocks grow into the free memory after them and shrink in
         * place; only a fall below huge sizes, or a growth that finds no
         * room, moves. */
        if (n > SPRY_LARGE_MAX && spry_huge_resize(page, n)) return p;
    } else if (n <= old && n > old / 2) {
        return p;      /* fits, and not so much smaller that memory is wasted */
    } else if (page->kind == SPRY_PAGE_LARGE && n <= SPRY_LARGE_MAX &&
               n > (page->grows_small && n > old ? REALLOC_SMALL_SPAN_MIN : REALLOC_SPAN_MIN) &&
               (spry_key_get(page) & ~SPRY_KEY_FLAGS) == spry_thread_key()) {
        /* A large block grows into the free slices after it, or gives its
         * tail back, without copying; a small growing one grows so, but a
         * shrink to 32 KiB or less moves, as any (in place, the span kept
         * what the block had written resident, counted nowhere: a review,
         * strings built to 200 KB and cut to 2,000 B kept 569 KB a thread
         * where the move kept 115). */
        unsigned had = page->slice_count;
        if (spry_span_resize(page->heap, page, spry_good_size_of(n))) {
            /* under the guard, as a purge pass that collects the heap
             * counts tails too (steal.c) */
            spry_heap_t *heap = page->heap;
            spry_heap_enter(heap);
            spry_large_tail_resized(heap, page, had);
            spry_heap_leave(heap);
            spry_purge_start_point();    /* a shrink frees the tail */
            return p;
        }
    }
    return realloc_move(p, n, old);
}

/* p outside spry's segments: a huge block, or another allocator's. */
static __attribute__((noinline)) void *realloc_outside(void *p, size_t n) {
    spry_page_t *page = spry_block_page(p);
    if (!page) return spry_foreign_realloc(p, n);
    return realloc_slow(page, p, n);
}

SPRY_API void *spry_realloc(void *p, size_t n) {
    if (spry_cautious) return spry_debug_realloc(p, n);
    if (!p) return spry_malloc_inline(n);
    if (n == 0) return realloc_free(p);
    if (spry_unlikely(spry_chunk_kind(p) != SPRY_CHUNK_SEGMENT)) return realloc_outside(p, n);
    spry_page_t *page = spry_page_of(spry_segment_base(p), p);
    if (!page) return spry_foreign_realloc(p, n);
    uintptr_t key = spry_key_get(page);
    uintptr_t mine = key ^ spry_thread_key();       /* the flags when it is ours */
    if (spry_likely((mine & ~(SPRY_KEY_FULL | SPRY_KEY_CACHED)) == 0)) {
        /* The owner's block of a class page of 16 B blocks or more: without
         * the free marker; before it moves, a block start (a pointer inside
         * a block that stays in place harms no list, like free's fast path,
         * which takes the pointer on trust). */
        /* (16-aligned first: the marker's word is then in p's own page)
         * Between the page's first block and its carved end: a block not
         * carved yet, or the colour gap before block 0, carries no marker,
         * and kept in place it was handed out again later (a review). */
        if (spry_unlikely(((uintptr_t)p & 15) || (uint8_t *)p < page->start ||
                          (uint8_t *)p >= page->carve_end || spry_block_marker(p) == page))
            return realloc_invalid(p);
        size_t old = page->block_size;
        if (n <= old && n > old / 2) return p;  /* fits, and wastes little */
        if (spry_unlikely(!spry_page_class_block_start(page, p))) return realloc_invalid(p);
        if (n <= 8) return realloc_to_tiny(page, p, n, mine);
        return realloc_move(p, n, old);
    }
    if (mine == SPRY_KEY_TINY) {
        /* The owner's 8-byte block of a page that is not full: its live bit,
         * and its remote bit (freed by another thread, not collected yet). */
        size_t i = spry_page_tiny_index(page, p);
        if (spry_unlikely(i >= page->reserved || spry_page_tiny_free_at(page, i)))
            return realloc_invalid(p);
        if (n <= 8) return p;
        return realloc_from_tiny(page, p, n, i);
    }
    return realloc_slow(page, p, n);
}

SPRY_API void *spry_reallocarray(void *p, size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
    return spry_realloc(p, n);
}

static void *aligned_alloc_checked(size_t align, size_t n) {
    if (spry_cautious) return spry_debug_alloc(n, align, SPRY_FAMILY_MALLOC);
    if (align <= 8) return spry_malloc_inline(n);
    if (align <= 16) return spry_malloc_inline(n < 16 ? 16 : n);
    return spry_heap_malloc_aligned(spry_tls_heap, n, align);
}

static bool is_pow2(size_t a) { return a && (a & (a - 1)) == 0; }

SPRY_API void *spry_aligned_alloc(size_t align, size_t n) {
    if (!is_pow2(align)) { errno = EINVAL; return NULL; }
    return aligned_alloc_checked(align, n);
}

SPRY_API void *spry_memalign(size_t align, size_t n) {
    /* glibc rounds an alignment that is not a power of two up to one; above
     * 2^63 there is none (EINVAL), up to it no block has one (ENOMEM, as
     * glibc: EINVAL there was a review's find) */
    if (align > ((size_t)1 << 63)) { errno = EINVAL; return NULL; }
    if (align > ((size_t)1 << 62)) { errno = ENOMEM; return NULL; }
    if (!is_pow2(align)) {
        size_t a = 1;
        while (a < align) a <<= 1;
        align = a;
    }
    return aligned_alloc_checked(align, n);
}

SPRY_API int spry_posix_memalign(void **out, size_t align, size_t n) {
    if (!is_pow2(align) || align % sizeof(void *) != 0) return EINVAL;
    int saved = errno;
    void *p = aligned_alloc_checked(align, n);
    if (!p) { errno = saved; return ENOMEM; }
    *out = p;
    return 0;
}

SPRY_API void spry_trim(void) {
    spry_init();
    spry_heap_t *heap = spry_tls_heap;
    if (heap != &spry_empty_heap) {
        spry_heap_enter(heap);
        spry_heap_collect(heap);
        spry_heap_leave(heap);
    }
    spry_purge_all();
    spry_purge_start_point();
}

SPRY_API long spry_option_get(const char *name) {
    spry_init();
    return spry_options_lookup(name);
}

SPRY_API size_t spry_heap_walk(bool (*visit)(void *block, size_t size, void *arg), void *arg) {
    if (spry_cautious) return spry_debug_heap_walk(visit, arg);
    return spry_walk_blocks(visit, arg);
}
