/* The shapes every stage of a block's life shares: segments, pages, heaps.
 *
 * Address space layout
 *   arena    a kernel mapping of 64 MiB..1 GiB, 4 MiB aligned (arena.c), a few
 *            per GiB, so vm.max_map_count is never a concern.
 *   segment  4 MiB aligned, carved from an arena. A "normal" segment is one
 *            4 MiB chunk cut in 64 slices of 64 KiB; slice 0 holds this header.
 *            A "huge" segment is a run of chunks holding one block.
 *   area     256 MiB carved from an arena, shared by huge blocks of up to
 *            64 MiB at 64 KiB granularity (huge.c).
 *   page     a run of slices holding blocks of one size class (or one large
 *            block). Its descriptor lives in the segment header, at the index
 *            of its first slice.
 *
 * Pointer -> metadata in O(1), no lock: the chunk map (one byte per 4 MiB of
 * the 47-bit user address space) says whether the 4 MiB chunk holding a
 * pointer starts a spry segment; then masking the pointer gives the segment,
 * and its slice table the page. A foreign pointer finds a 0 in the map.
 *
 * Ownership: a normal segment and all its pages belong to one heap. Only the
 * thread using that heap touches a page's free/local_free/used/queue links;
 * other threads only push onto the page's atomic xfree list (and the heap's
 * inbox). Span-level state (segment masks, segment list) is under heap->lock,
 * shared by the owner's slow path and the purge thread. */
#ifndef SPRY_TYPES_H
#define SPRY_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>
#include "atomic.h"
#include "lock.h"

#define SPRY_SEGMENT_SHIFT   22
#define SPRY_SEGMENT_SIZE    ((size_t)1 << SPRY_SEGMENT_SHIFT)        /* 4 MiB  */
#define SPRY_SEGMENT_MASK    (SPRY_SEGMENT_SIZE - 1)
#define SPRY_SLICE_SHIFT     16
#define SPRY_SLICE_SIZE      ((size_t)1 << SPRY_SLICE_SHIFT)          /* 64 KiB */
#define SPRY_SLICES          64
#define SPRY_SLICES_ALL      (~(uint64_t)1)     /* every slice but the header */
#define SPRY_OS_PAGE         4096

/* Requests up to SMALL_MAX go through the direct table: one load finds the
 * page to pop from. Up to PAGED_MAX they live in pages of their size class
 * (those above 1 KiB reused through the block cache); up to LARGE_MAX each
 * block gets a span of slices of its own (its usable size still rounded to
 * the class up to CLASS_MAX: 8 steps per doubling); beyond, a huge block.
 * PAGED_MAX was 128 KiB: 128-256 KiB blocks in spans of their own cost a
 * descriptor's cache lines on every malloc and free, and in pages of 8 (2
 * MiB) through the block cache a churn of them at 64 live blocks ran 2x
 * faster (level with tcmalloc, which keeps them in its thread caches), and
 * 1.8x at 1,024 live blocks of 64-512 KiB; peak RSS at 64 live went from 13
 * to 23 MB (tcmalloc 32, glibc 16), at 1,024 live down from 282 to 208 MB. */
#define SPRY_SMALL_MAX       1024
#define SPRY_DIRECT_SLOTS    (SPRY_SMALL_MAX + 1)   /* one per byte size: no
                                                      shift on the fast path */
#define SPRY_PAGED_MAX       ((size_t)256 * 1024)
#define SPRY_CLASS_MAX       ((size_t)512 * 1024)
#define SPRY_CLASS_COUNT     105
#define SPRY_LARGE_MAX       ((size_t)2 * 1024 * 1024)
#define SPRY_SPAN_CACHE_SLOTS 33          /* spans of 1..32 slices        */
/* Beyond this no request can succeed (47-bit address space); checking it
 * first keeps every size computation below free of overflow. */
#define SPRY_ALLOC_MAX       ((size_t)1 << 46)

/* The chunk map's values. */
#define SPRY_CHUNK_FOREIGN   0
#define SPRY_CHUNK_SEGMENT   1   /* a segment header starts this chunk        */
#define SPRY_CHUNK_ALIGNED   2   /* a >= 4 MiB aligned huge block starts here;
                                    its segment header is one chunk below     */
#define SPRY_CHUNK_INTERIOR  3   /* inside a huge block, not where it starts  */
#define SPRY_CHUNK_AREA      4   /* and above: a chunk of huge area number
                                    (value - SPRY_CHUNK_AREA); huge.c      */
#define SPRY_CHUNK_MAP_SIZE  ((size_t)1 << (47 - SPRY_SEGMENT_SHIFT))
extern uint8_t spry_chunk_map[SPRY_CHUNK_MAP_SIZE];

typedef struct spry_block { struct spry_block *next; } spry_block_t;

struct spry_heap;

/* page->key: the owning thread's thread pointer (%fs:0, one load), or'ed
 * with FULL while the page sits outside its queue, with CACHED for pages of
 * blocks above 1 KiB (the owner's frees go to the block cache, whatever
 * the page's state: block_cache.h), with TINY for pages of 8-byte blocks
 * (class 0, see below: the free fast path's mismatch branch sends them
 * straight to their own short path), and with SLOW for large blocks (one
 * block per span: the slow free checks that the pointer is its start, so a
 * stale pointer into the owner's live large block is not taken for it) and
 * for class pages above SPRY_CHECKED_ABOVE (with CACHED, below); 0 while
 * the heap is dormant. The free fast path compares it with the calling
 * thread's pointer: any difference (another thread, a full page, a huge or
 * free page, whose key is 0) sends the free to the slow path. Thread pointers are reused after a thread exits,
 * so a heap's keys are rewritten when its thread exits and when a new thread
 * takes it over (heap_rekey). Thread pointers are 64-byte aligned, so the
 * flags never collide with them. */
#define SPRY_KEY_FULL   ((uintptr_t)1)
#define SPRY_KEY_SLOW   ((uintptr_t)2)
#define SPRY_KEY_CACHED ((uintptr_t)4)
#define SPRY_KEY_TINY   ((uintptr_t)8)
#define SPRY_KEY_FLAGS  (SPRY_KEY_FULL | SPRY_KEY_SLOW | SPRY_KEY_CACHED | SPRY_KEY_TINY)
/* Class pages of blocks above this are keyed CACHED and SLOW: until they
 * moved into class pages these blocks were large blocks, whose frees were
 * checked, and an interior pointer of one would be handed out again
 * overlapping its block; their owner's frees are checked still (a division
 * by the odd part of the size), on the slow path, so that the other frees
 * into the block cache need no size test. */
#define SPRY_CHECKED_ABOVE ((size_t)128 * 1024)

/* Double frees. A block of 16 bytes or more that is free holds its page's
 * descriptor address in its second word (the free marker): every free writes
 * it, every hand-out clears it, and a program never sees that address, so a
 * free that finds it is a double free (one compare on the fast path, like
 * glibc's tcache key). An 8-byte block has no second word: class-0 pages keep
 * a bitmap of their live blocks in front of the blocks instead, and their
 * keys carry TINY so that both their malloc and free take short slow paths. */
static inline void *spry_block_marker(const void *b) { return ((void *const *)b)[1]; }
static inline void spry_block_mark_free(void *b, const void *page) { ((const void **)b)[1] = page; }
static inline void spry_block_mark_live(void *b) { ((void **)b)[1] = NULL; }

/* Flags in the low bits of page->xfree, changed only together with the list
 * by CAS, so the owner and the freeing threads always agree on them:
 *  NOTIFY  the owner will not look at this page by itself (a full class page,
 *          or a large block): the next remote free must queue the page in the
 *          owner heap's inbox. Other pages' remote frees wait, one CAS each,
 *          until the owner's malloc reaches the page.
 *  QUEUED  the page sits in the inbox; set by the remote free that queued it,
 *          cleared by the owner's drain. */
#define SPRY_XFREE_QUEUED ((uintptr_t)1)
#define SPRY_XFREE_NOTIFY ((uintptr_t)2)
#define SPRY_XFREE_FLAGS  ((uintptr_t)3)
_Static_assert(SPRY_XFREE_NOTIFY >> 1 == SPRY_XFREE_QUEUED, "remote.c sets QUEUED from NOTIFY by a shift");
/* Above the list's pointer (spry's blocks lie below 2^47, the chunk map's
 * reach), how many blocks the list holds: the owner takes the list whole
 * and needs no walk to count it (spry_page_take_remote). */
#define SPRY_XFREE_COUNT_SHIFT 48
static inline spry_block_t *spry_xfree_list(uintptr_t v) {
    return (spry_block_t *)(v & ((((uintptr_t)1 << SPRY_XFREE_COUNT_SHIFT) - 1) & ~SPRY_XFREE_FLAGS));
}
static inline uint32_t spry_xfree_count(uintptr_t v) { return (uint32_t)(v >> SPRY_XFREE_COUNT_SHIFT); }
static inline uintptr_t spry_xfree_word(spry_block_t *list, uint32_t count, uintptr_t flags) {
    return (uintptr_t)list | ((uintptr_t)count << SPRY_XFREE_COUNT_SHIFT) | flags;
}

enum spry_page_kind { SPRY_PAGE_FREE = 0, SPRY_PAGE_CLASS, SPRY_PAGE_LARGE, SPRY_PAGE_HUGE };

/* 192 bytes, three cache lines, never shared by two pages, each written by
 * its own parties: what other threads read to free into the page (key,
 * kind, start, size...), written seldom; what the owner writes on its every
 * call (free, used, the queue links); and the remote list, which other
 * threads push onto. With the first two on one line, every free by another
 * thread missed on the line the owner had just written, and the owner's
 * next call missed in turn (an object pool whose threads free each other's
 * list nodes: 15% faster apart); with the remote list on the owner's line,
 * each batch pushed cost the owner's next malloc a miss (a producer and a
 * consumer of 8-byte blocks: 25% slower). The owner's free reads the first
 * line and writes the second. */
typedef struct spry_page {
    /* read by every thread that frees into the page; written when the page
     * is set up, fills, empties or carves */
    _Atomic(uintptr_t) key;      /* owner thread | SPRY_KEY_FULL (see above);
                                    written by the owner, read by any thread */
    uint32_t capacity;           /* blocks put on lists so far (lazy carving);
                                    only grows while the page lives; other
                                    threads read it in pointer checks, so it
                                    is stored and loaded relaxed-atomic       */
    uint32_t reserved;           /* blocks that fit                           */
    uint8_t  kind;               /* enum spry_page_kind                       */
    uint8_t  class_idx;
    uint8_t  slice_count;        /* slices spanned (normal segments)          */
    uint8_t  is_zero;            /* large/huge: memory fresh from the kernel  */
    uint8_t  pinned;             /* used holds one phantom block: the page
                                    heads its queue and is kept when empty    */
    uint8_t  tail_pages;         /* large: OS pages past the block in its
                                    span's last slice left resident, counted
                                    in heap->tail_pages (large.c)            */
    uint16_t bcache_off;         /* class pages: offset of the heap's block
                                    cache of the class (block_cache.h)      */
    uint32_t cache_tick;         /* in the heap's span cache, hot cache or
                                    a queue's spare since this tick */
    uint8_t  resident;           /* class pages: every slice of the span had
                                    been used before (page.c, carving)     */
    uint8_t  grows_small;        /* large: a block realloc moved here below
                                    its class sizes' span threshold, counted
                                    in heap->small_growing (alloc.c); its
                                    free clears it (spry_large_block_gone),
                                    so no other page has it set            */
    size_t   block_size;         /* usable bytes of each block                */
    uint8_t *start;              /* first block                               */
    struct spry_heap *heap;      /* owner; stable while any block is live    */
    uint8_t *carve_end;          /* class pages: start + capacity blocks; the
                                    owner's frees of a pointer at or past it
                                    are reported, not taken (a stale pointer
                                    into a page taken again after a purge).
                                    In this line, which every free reads for
                                    the key: the owner's frees into the block
                                    cache read no other line of the page     */
    /* owner thread only, on its every call */
    _Alignas(64) spry_block_t *free; /* blocks to hand out next              */
    spry_block_t *local_free;    /* remote frees collected, not yet merged   */
    uint32_t used;               /* blocks out, including remote-freed ones
                                    not collected yet                         */
    struct spry_page *next, *prev;  /* queue links (owner)                    */
    /* pushed by other threads */
    _Alignas(64) _Atomic(uintptr_t) xfree; /* remote frees: list | count |
                                    SPRY_XFREE_* flags (pushers CAS, the
                                    owner takes the list)                     */
    struct spry_page *_Atomic inbox_next; /* link in heap->inbox             */
} spry_page_t;
_Static_assert(sizeof(spry_page_t) == 192, "three cache lines");

enum spry_segment_kind { SPRY_SEGMENT_NORMAL = 1, SPRY_SEGMENT_HUGE };

struct spry_page;
typedef struct spry_segment {
    struct spry_segment *next, *prev;   /* heap's segment list (heap lock)   */
    struct spry_heap *heap;             /* NULL for huge segments            */
    size_t   size;                      /* bytes of the run (4 MiB multiple) */
    uint32_t kind;
    uint16_t arena_dedicated;           /* huge: its own kernel mapping      */
    uint16_t lent;                      /* normal: slices in other heaps' pages
                                           (heap lock; segment.c, lending)   */
    /* normal segments, heap lock: */
    uint64_t free_mask;                 /* slices not in any page            */
    uint64_t dirty_mask;                /* slices that may be resident       */
    uint64_t aging_mask;                /* free+dirty at the last purge tick */
    /* Then, at the segment's colour (spry_segment_colour), its slice table
     * (slice -> its page's descriptor) and right after it the descriptors of
     * the pages starting at each slice: spry_segment_slices and
     * spry_segment_pages. */
} spry_segment_t;
_Static_assert(sizeof(spry_segment_t) == 64, "the header's fixed part: one line");

/* Segments are 4 MiB aligned: with their metadata at one offset, every
 * segment's header fell in the same sets of the L1 (4 KiB apart), the L2
 * (128 KiB apart, 8 ways here) and the L3, and a heap of a dozen segments
 * thrashed them. So each segment's header (this struct, then its slice
 * table: slice -> its page's descriptor, then the descriptors of the pages
 * starting at each slice) sits 512 bytes (one table) further into its header
 * slice than the one below it, by the low bits of its chunk number, which
 * the free fast path's slice index holds already (spry_page_of: a wider
 * mask, no extra instruction).
 *   4 colours (the table alone moved, the struct at the segment's start):
 *   a churn of 128-256 KiB blocks (16 segments) missed the L1 on 1.1 lines
 *   a free before, 0.25 after; but 4,096 live blocks of 4-64 KiB (35
 *   segments) still missed the (8-way) L2 on 0.53 lines a free, 0.02 with
 *   64 colours, and ran 1.04-1.5x faster (alternating runs, several sets).
 *   64 colours with the struct left at the start: every header's table and
 *   first descriptors left the struct's OS page, one more page resident a
 *   segment (64 threads of small blocks: 5.6 -> 6.0 MB). With the struct
 *   moved along, a small heap's header (struct, table, its first few
 *   descriptors) crosses an OS page only at the colours that put it near a
 *   page's end (the same 64 threads, 8 class pages each: 5.73 MB). */
#define SPRY_SEGMENT_COLOURS 64
#define SPRY_SEGMENT_COLOUR_STEP (SPRY_SLICES * sizeof(spry_page_t *))
static inline uint8_t *spry_segment_base(const void *p) {
    return (uint8_t *)((uintptr_t)p & ~(uintptr_t)SPRY_SEGMENT_MASK);
}
static inline unsigned spry_segment_colour(const void *base) {
    return (unsigned)((uintptr_t)base >> SPRY_SEGMENT_SHIFT) & (SPRY_SEGMENT_COLOURS - 1);
}
/* The header of the segment whose first chunk starts at base. */
static inline spry_segment_t *spry_segment_at(uint8_t *base) {
    return (spry_segment_t *)(base + (size_t)spry_segment_colour(base) * SPRY_SEGMENT_COLOUR_STEP);
}
static inline spry_page_t **spry_segment_slices(spry_segment_t *seg) {
    return (spry_page_t **)(seg + 1);
}
static inline spry_page_t *spry_segment_pages(spry_segment_t *seg) {
    return (spry_page_t *)(spry_segment_slices(seg) + SPRY_SLICES);
}
/* The header's end at the highest colour stays in the header slice. */
_Static_assert((SPRY_SEGMENT_COLOURS - 1) * SPRY_SEGMENT_COLOUR_STEP + sizeof(spry_segment_t) +
               SPRY_SLICES * sizeof(void *) + SPRY_SLICES * sizeof(spry_page_t) <= SPRY_SLICE_SIZE,
               "header fits slice 0");

typedef struct spry_page_queue {
    spry_page_t *first, *last;
    uint32_t count;          /* pages queued */
    uint32_t pages;          /* the heap's pages of the class, queued, full
                                or spare */
    spry_page_t *spare;      /* an emptied page kept for the class's next new
                                page (queue.c): out of the queue, keyed FULL */
} spry_page_queue_t;

/* A freeing thread's batch of remote frees for one page (see remote.c).
 * 8 slots: a thread freeing blocks of several others' pages in turn (seed
 * 002's pools, a server's workers) keeps a batch for each; with 4, a 32 B
 * block of one of 7 other threads' pages, freed in turn, cost 186
 * instructions a malloc and free, 127 with 8 (callgrind), the batches of 4
 * slots holding a block or two each, each handed over with a CAS on the
 * owner's page line. Not 16 (15 others: 194 -> 138): a consumer of blocks
 * of random sizes then held back so many that its producer's peak RSS rose
 * from 3.1-3.3 to 3.6-3.9 MB (producer/consumer 1+1, 8 B-4 KiB; 8 slots
 * 3.2-3.3). */
#define SPRY_OUTBOX_SLOTS 8
typedef struct spry_outbox {
    struct spry_page *page;
    spry_block_t *head, *tail;
    uint32_t count;
} spry_outbox_t;

/* A heap's stack of free blocks of one class (block_cache.c). */
typedef struct spry_block_cache {
    spry_block_t *top;
    int16_t  room;           /* blocks it may still take: limit - count   */
    uint16_t limit;          /* 0 until the first push sets it */
    uint32_t block_size;
} spry_block_cache_t;

/* A block cache's top and room as the last purge pass saw them (the purge
 * thread's own record, for the scavenger; block_cache.h). */
typedef struct spry_bcache_seen {
    spry_block_t *top;
    int16_t room;
    bool untouched;          /* this pass's look found it as last pass's */
    bool scavenged;          /* the last pass cut it */
} spry_bcache_seen_t;

typedef struct spry_heap {
    /* owner thread only: the fast path reads direct[] */
    spry_page_t *direct[SPRY_DIRECT_SLOTS];
    spry_page_queue_t queues[SPRY_CLASS_COUNT];
    /* remote threads push pages with new xfree blocks (lock-free stack) */
    spry_page_t *_Atomic inbox;
    /* span level: segments, their masks; owner slow path + purge thread */
    spry_lock_t lock;
    spry_segment_t *segments;           /* those with free slices first */
    spry_segment_t *segments_last;
    size_t segment_count;
    /* bytes of slices in pages / free but maybe resident; written under the
     * lock (plain load+store), read by statistics without it */
    _Atomic(size_t) span_in_use;
    _Atomic(size_t) span_dirty;         /* includes the span cache          */
    size_t span_in_use_peak;            /* highest span_in_use since the last
                                           purge tick (heap lock)            */
    size_t span_cached;
    /* Spans lent: this heap's slices in other heaps' pages (counted in
     * span_in_use; written under the lock, read without), and borrowed:
     * other heaps' slices in this heap's pages (not in span_in_use; atomic
     * adds, from either side's thread). See segment.c, lending. */
    size_t span_lent;
    _Atomic(size_t) span_borrowed;
    uint32_t borrow_wait;               /* fresh spans to take before the next
                                           look at other heaps (owner only)  */
    uint8_t borrow_misses;              /* looks in a row that found none    */
    uint32_t borrow_epoch;              /* spry_spans_offered's count at the
                                           last look that found none        */
    size_t fresh_bytes;                 /* fresh span bytes since the last
                                           hurry (segment.c; heap lock)     */
    uint32_t purge_tick;                /* written under the lock, atomically:
                                           the owner reads it without (queue.c) */
    /* Owner only: this thread's frees of other threads' small blocks,
     * batched per page so one CAS hands over many (remote.c). */
    spry_outbox_t outbox[SPRY_OUTBOX_SLOTS];
    uint32_t outbox_pending;            /* slots holding blocks */
    ptrdiff_t bcache_room;              /* bcache_limit - bytes cached: the
                                           push checks and counts at once  */
    size_t bcache_limit;                /* refreshed on slow paths */
    bool bcache_unscavenged;            /* classes' bounds for no scavenger */
    size_t hot_bytes;
    size_t hot_limit;                   /* refreshed on slow paths */
    /* OS pages past live growable large blocks left resident (large.c),
     * and how many may be (refreshed on slow paths) */
    uint32_t tail_pages, tail_limit;
    uint8_t limits_in;                  /* slow paths until the next refresh */
    /* live spans of blocks realloc grows below 32 KiB (alloc.c); relaxed
     * atomic: a purge pass that collects the heap may free one */
    _Atomic(uint32_t) small_growing;
    /* the one of them whose span, reused, keeps its resident tail (alloc.c);
     * guarded */
    spry_page_t *small_tail;
    uint32_t spares;                    /* queues[].spare set (queue.c)    */
    uint32_t aged_tick;                 /* purge_tick of the last aging of
                                           spares and hot spans (heap.c)  */
    /* class pages set up, given back to their segments, and spares taken
     * again, so far (statistics; relaxed atomic adds: the owner's fast path
     * and a purge pass may give pages back at once) */
    _Atomic(size_t) pages_made, pages_given_back, spares_taken;
    /* The owner's guard (guard.h): 1 while the owner is inside a path that
     * touches what a purge pass may collect from an idle heap */
    _Atomic(uint8_t) busy;
    _Atomic(int) steal;                 /* 1 while a purge pass collects    */
    uint8_t idle_collected;             /* purge passes: collected, owner not
                                           back since (steal.c)             */
    uint8_t idle_passes;                /* purge passes that found it idle */
    uint8_t scavenge;                   /* this purge pass scavenges it */
    uint32_t hurry_idle_us;             /* looks (pass_lock): how long out of
                                           its guarded paths before one takes
                                           it, for owner hurry_tid; 0: the
                                           least (steal.c)                 */
    int hurry_tid;
    uint32_t hurry_recheck_us;          /* looks (pass_lock): how much later
                                           an owner found runnable is asked
                                           again; 0: the least (steal.c)   */
    uint64_t idle_since_us;             /* when a look found it out of its
                                           guarded paths since the look
                                           before; later: an owner found
                                           runnable (steal.c)              */
    uint64_t hurried_at_us;             /* when a look took it; 0: its owner
                                           came back since                 */
    spry_page_t *idle_inbox;            /* purge passes: the inbox as the
                                           last collection left it          */
    /* global lists */
    struct spry_heap *all_next;         /* immutable once published          */
    struct spry_heap *dormant_next, *dormant_prev; /* dormant list, newest
                                           first (heaps_lock, heap.c)        */
    _Atomic(int) trim_request;          /* purge thread asks the owner to let
                                           retained pages go                 */
    _Atomic(int) purge_urgent;          /* over budget, the purge thread is
                                           asked to trim it now              */
    uint32_t is_dormant;                /* DORMANT_* (heaps_lock, heap.c)    */
    _Atomic(int) leaving;               /* LEAVING_*: its thread is exiting
                                           (heap.c, heap_wait_leaving)      */
    uintptr_t tid;                      /* owner's thread pointer, 0 dormant */
    _Atomic(int) os_tid;                /* owner's kernel thread id, 0 dormant
                                           (hurried looks, steal.c)         */
    /* The rest, an OS page of its own (spry_meta_alloc aligns heaps), is
     * written only by a thread that frees blocks above 1 KiB or spans: a
     * thread of small blocks leaves it untouched, not resident (it wrote
     * all 4 pages of a heap before: 37 -> 29 KB a thread of 8-byte blocks,
     * with the carve's page bound, page.c; glibc 14).
     *
     * Owner only: blocks the owner freed into its full class pages, per
     * class, handed out before any page is searched (block_cache.c). */
    _Alignas(SPRY_OS_PAGE) spry_block_cache_t bcache[SPRY_CLASS_COUNT];
    spry_bcache_seen_t bcache_seen[SPRY_CLASS_COUNT];
    /* Recently freed spans by slice count, reused as they are: a block of the
     * same size lands where the last one was, touching no new memory. LIFO,
     * heap lock; flushed to the segments at the next purge tick. */
    spry_page_t *span_cache[SPRY_SPAN_CACHE_SLOTS];
    /* Owner only, no lock: large blocks the owner freed last, kept whole
     * for the next malloc of the same span size (large.c). */
    spry_page_t *hot[SPRY_SPAN_CACHE_SLOTS + 1]; /* the last always empty: the
                                           inline pop may look one slot up */
    uint8_t hot_count[SPRY_SPAN_CACHE_SLOTS];
} spry_heap_t;
_Static_assert(sizeof(spry_heap_t) == 4 * SPRY_OS_PAGE, "the heap's cold part is its last OS page");

/* Relaxed: plain moves on x86-64. Remote threads may read a key while the
 * owner changes it; either value sends them down the remote path. */
static inline uint32_t spry_page_capacity(const spry_page_t *page) {
    return __atomic_load_n(&page->capacity, __ATOMIC_RELAXED);
}
static inline void spry_page_capacity_set(spry_page_t *page, uint32_t n) {
    __atomic_store_n(&page->capacity, n, __ATOMIC_RELAXED);
}
static inline uintptr_t spry_key_get(const spry_page_t *page) {
    return atomic_load_explicit(&page->key, memory_order_relaxed);
}
static inline void spry_key_set(spry_page_t *page, uintptr_t key) {
    atomic_store_explicit(&page->key, key, memory_order_relaxed);
}

static inline uintptr_t spry_thread_key(void) {
    return (uintptr_t)__builtin_thread_pointer();
}

/* The heap of the calling thread; &spry_empty_heap until its first malloc.
 * The empty heap's direct[] points at a page with no free block, so the first
 * malloc of a thread falls into the slow path with no extra check. */
extern __thread spry_heap_t *spry_tls_heap __attribute__((tls_model("initial-exec")));
extern spry_heap_t spry_empty_heap;
extern spry_page_t spry_empty_page;

static inline spry_segment_t *spry_segment_of(const void *p) {
    return spry_segment_at(spry_segment_base(p));
}

/* p in the first chunk of the segment starting at base: the chunk number's
 * low bits above the slice's are the segment's colour, so the slice index
 * with them finds the table wherever the colour put it. */
static inline spry_page_t *spry_page_of(const uint8_t *base, const void *p) {
    size_t at = ((uintptr_t)p >> SPRY_SLICE_SHIFT) & (SPRY_SEGMENT_COLOURS * SPRY_SLICES - 1);
    return ((spry_page_t *const *)(base + sizeof(spry_segment_t)))[at];
}

/* The chunk map value of p (SPRY_CHUNK_FOREIGN for NULL and addresses above
 * the 47-bit user space). */
static inline unsigned spry_chunk_kind(const void *p) {
    uintptr_t idx = (uintptr_t)p >> SPRY_SEGMENT_SHIFT;
    if (spry_unlikely(idx >= SPRY_CHUNK_MAP_SIZE)) return SPRY_CHUNK_FOREIGN;
    return spry_chunk_map[idx];
}

#endif
