/* Pages; see page.h.
 *
 * A page carves its memory lazily: `capacity` blocks have been put on lists
 * so far, at most CARVE_BYTES at a time, so a fresh page is not touched (and
 * not resident) ahead of use. A page whose every slice was in use before
 * (dirty: resident, unless purged since, and then not dirty) has less to
 * gain from that and carves CARVE_RESIDENT at a time: where pages fill,
 * empty and go back (a producer whose blocks another thread frees) a page
 * of 2,000 B blocks took 16 trips through the malloc slow path to carve 2
 * blocks each. A malloc by one thread and free by another, 512 / 2,000 /
 * 5,000 B: 144 / 248 / 349 -> 131 / 204 / 276 instructions a pair
 * (callgrind; tcmalloc 172 at 2,000 B). Carving such pages whole took 127
 * / 192 / 244, but dirty is not all resident (a slice some earlier page
 * used in part): peak RSS 1.03x at 4,096 live blocks of 128 B-4 KiB and
 * 1.05x for 64-512 KiB at two threads, where 16 KiB at a time is level
 * (1.00x, 1.01x; alternating runs). */
#include "page.h"
#include "sizeclass.h"
#include "report.h"
#include <string.h>

#define CARVE_BYTES   4096
#define CARVE_RESIDENT 16384
#define CARVE_MIN     1

/* How far past its span's start a page of a coloured class puts its first
 * block: its pages' spans start on 64 KiB boundaries, so without it block i
 * of every page of a class sat at the same offset in its OS page, the
 * blocks of classes that are multiples of 4 KiB at offset 0 of theirs: all
 * their starts (the free list's links, the program's headers) fell in one
 * set of the L1 and a few of the L2, and a block's last OS page never held
 * the next block's first bytes. The room the blocks leave at the span's end
 * (up to 1/8 of it) is spent on it, by 64-byte steps, the next span of a
 * class one step further than the one below it, up to the 64 steps of an OS
 * page (more would only repeat their cache sets). 4-64 KiB blocks at 1,024
 * and 4,096 live a thread: 0.84-0.91x the peak RSS of a program that writes
 * its blocks' ends, the rate level to 1.06x. */
static size_t page_colour(const spry_page_t *page, size_t bytes, size_t bs) {
    size_t steps = (bytes - (size_t)page->reserved * bs) / SPRY_COLOUR_STEP + 1;
    if (steps > SPRY_OS_PAGE / SPRY_COLOUR_STEP) steps = SPRY_OS_PAGE / SPRY_COLOUR_STEP;
    size_t k = ((uintptr_t)page->start >> SPRY_SLICE_SHIFT) / page->slice_count;
    return k % steps * SPRY_COLOUR_STEP;
}

void spry_page_init_class(spry_heap_t *heap, spry_page_t *page, unsigned c) {
    size_t bs = spry_class_size(c);
    size_t bytes = (size_t)page->slice_count * SPRY_SLICE_SIZE;
    uintptr_t key = heap->tid;
    page->kind = SPRY_PAGE_CLASS;
    page->class_idx = (uint8_t)c;
    page->bcache_off = (uint16_t)(offsetof(spry_heap_t, bcache) + c * sizeof(spry_block_cache_t));
    page->block_size = bs;
    if (c == 0) {
        /* the remote and live bitmaps go in front of the blocks */
        memset(page->start, 0, SPRY_TINY_MAPS_BYTES);
        page->start += SPRY_TINY_MAPS_BYTES;
        bytes -= SPRY_TINY_MAPS_BYTES;
        key |= SPRY_KEY_TINY;
    }
    if (bs > SPRY_SMALL_MAX) key |= SPRY_KEY_CACHED;   /* the owner's frees: block_cache.h */
    if (bs > SPRY_CHECKED_ABOVE) key |= SPRY_KEY_SLOW;  /* and checked: types.h */
    page->reserved = (uint32_t)(bytes / bs);
    /* A span may be a slice longer than asked (the span cache's next size):
     * 8-byte blocks stop where their bitmaps end, or block 8,192's bits
     * would be other blocks' bits and data (a review: valid frees reported
     * as double frees). */
    if (c == 0 && page->reserved > SPRY_LIVE_MAP_BYTES * 8) page->reserved = SPRY_LIVE_MAP_BYTES * 8;
    if (spry_class_coloured(c)) {
        size_t colour = page_colour(page, bytes, bs);
        /* The span's start was block 0 of whichever page had the span
         * before: a stale second free of that block, which the marker of
         * this page's block 0 caught, now meets the gap, and without a
         * marker there the owner's free (which checks no block start) took
         * it into the block cache, and malloc handed it out over block 0 (a
         * review). The gap is under 4 KiB, in the OS page block 0 touches. */
        if (colour) spry_block_mark_free(page->start, page);
        page->start += colour;
    }
    spry_page_capacity_set(page, 0);
    page->carve_end = page->start;
    page->used = 0;
    page->pinned = 0;
    page->free = page->local_free = NULL;
    page->next = page->prev = NULL;
    /* page->heap: set by the span's allocation, under the lock (segment.c) */
    spry_key_set(page, key);
    atomic_store_explicit(&page->xfree, 0, memory_order_relaxed);
    atomic_store_explicit(&page->inbox_next, NULL, memory_order_relaxed);
}

/* How many blocks a carve from `first` lists: those that lie whole in the
 * `bytes` of OS pages from the one `first` is in, at least one. By bytes
 * from `first`, a carve that started inside an OS page wrote into one page
 * more than it filled: the 8-byte blocks start after their bitmaps, half
 * an OS page in, and every thread that used them had 8 KiB of that page
 * resident, not 4. (Blocks whose first bytes lie in those pages, a longer
 * carve, cost more: the last one reaches into the next page, which the
 * program writes once it has that block: peak RSS +100-150 KB of 3.1 MB
 * for a producer and consumer of 8 B-4 KiB blocks.) */
static uint32_t carve_count(const uint8_t *first, size_t bs, size_t bytes) {
    uintptr_t end = ((uintptr_t)first & ~(uintptr_t)(SPRY_OS_PAGE - 1)) + bytes;
    uint32_t n = (uint32_t)((end - (uintptr_t)first) / bs);
    return n < CARVE_MIN ? CARVE_MIN : n;
}

/* Puts the next few uncarved blocks, in address order, on page->free. They
 * carry the free marker like any free block (class 0: their live bits are
 * clear), so a free of one never handed out is a double free, not a second
 * copy on the list. */
void spry_page_carve(spry_page_t *page) {
    size_t bs = page->block_size;
    uint8_t *first = page->start + (size_t)page->capacity * bs;
    uint32_t n = carve_count(first, bs, page->resident ? CARVE_RESIDENT : CARVE_BYTES);
    if (n > page->reserved - page->capacity) n = page->reserved - page->capacity;
    uint8_t *p = first;
    bool mark = page->class_idx != 0;
    for (uint32_t i = 1; i < n; i++, p += bs) {
        ((spry_block_t *)p)->next = (spry_block_t *)(p + bs);
        if (mark) spry_block_mark_free(p, page);
    }
    if (mark) spry_block_mark_free(p, page);
    ((spry_block_t *)p)->next = page->free;
    /* counted carved before they are listed: a fork that cuts this in two
     * leaves them carved and unlisted (lost in the child), never listed and
     * uncarved (carved and handed out a second time there) */
    spry_page_capacity_set(page, page->capacity + n);
    page->carve_end = p + bs;
    atomic_signal_fence(memory_order_seq_cst);
    page->free = (spry_block_t *)first;
}

uint32_t spry_page_take_remote(spry_page_t *page, uintptr_t xfree) {
    spry_block_t *list = spry_xfree_list(xfree);
    if (!list) return 0;
    bool bitmap = page->class_idx == 0 && page->kind == SPRY_PAGE_CLASS;
    /* Whole, by its count, unwalked: the blocks were written last by the
     * threads that freed them, and a walk took a cache miss per block
     * (inside the program's lock, in an object pool where threads free
     * each other's list nodes: 4,000 of its threads' sleeps on that lock
     * in 0.13 s against tcmalloc's 150, 1.35x its time). Two other
     * threads cannot both free one block (free.c, mark_freed: an
     * exchange), which the walk's cycle guard was for; the owner and
     * another thread at once still can, and a write after free that
     * erases a block's marker lets its second free through: then the
     * count may not match the list (README, limits). A count above `used`
     * is not a list of this page: walked, it is reported below. */
    uint32_t count = spry_xfree_count(xfree);
    if (!bitmap && !page->local_free && count <= page->used) {
        page->local_free = list;
        page->used -= count;
        return count;
    }
    uint32_t n = 0;
    spry_block_t *tail = NULL;
    /* 8-byte blocks' remote bits are cleared with one atomic AND per run of
     * blocks in the same bitmap word (frees come back mostly in the order
     * they were handed out): one per block made a producer/consumer of
     * 8-byte blocks 25% slower, and a plain write lost other threads' bits
     * set in between (a review: freed blocks walked as live, their second
     * free missed) */
    uint64_t *word = NULL, clear = 0;
    for (spry_block_t *b = list; b; b = b->next) {
        size_t i = bitmap ? spry_page_tiny_at(page, b) : 0;
        /* A block freed twice at once by the owner and another thread (the
         * race the free marker cannot see), or twice into a class-0 page,
         * may have linked the list into a cycle: stop at the count no real
         * list exceeds, or at a block the bitmap says is free already. */
        if (n == page->used || (bitmap && !spry_page_live_clear_at(page, i))) {
            spry_report_error("free", "double free", b);
            if (tail) tail->next = NULL; else list = NULL;
            break;
        }
        if (bitmap) {
            uint64_t *w = spry_page_remote_word_at(page, i);
            if (w != word) {
                if (word) spry_page_remote_unmark(word, clear);
                word = w;
                clear = 0;
            }
            clear |= (uint64_t)1 << (i & 63);
        }
        tail = b;
        n++;
    }
    if (word) spry_page_remote_unmark(word, clear);
    if (!tail) return 0;
    tail->next = page->local_free;
    page->local_free = list;
    page->used -= n;
    return n;
}

uint32_t spry_page_collect_remote(spry_page_t *page) {
    uintptr_t head = atomic_load_explicit(&page->xfree, memory_order_relaxed);
    if (!spry_xfree_list(head)) return 0;
    /* Take the list, keep the flags: acquire pairs with the pushers' release
     * so their writes of next pointers are visible. */
    while (!atomic_compare_exchange_weak_explicit(&page->xfree, &head, head & SPRY_XFREE_FLAGS,
                                                  memory_order_acquire, memory_order_relaxed)) {}
    return spry_page_take_remote(page, head);
}

bool spry_page_reclaim(spry_page_t *page) {
    if (!page->local_free) spry_page_collect_remote(page);
    if (!page->local_free) return false;
    spry_block_t *l = page->local_free;
    page->local_free = NULL;
    /* unlisted there before listed here: a fork cut between the two
     * loses the blocks rather than leaving them on both lists */
    atomic_signal_fence(memory_order_seq_cst);
    if (!page->free) { page->free = l; return true; }
    spry_block_t *t = l;
    while (t->next) t = t->next;
    t->next = page->free;
    page->free = l;
    return true;
}

void spry_page_refill(spry_page_t *page) {
    if (!spry_page_reclaim(page) && page->capacity < page->reserved) spry_page_carve(page);
}
