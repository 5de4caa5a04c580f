/* The cautious layer's malloc, free, realloc and usable size, which the
 * public names call in libspry-debug.so (entry.h).
 *
 *   alloc: core block of header + size + tail guard (aligned as asked),
 *          header sealed, guards filled, stack captured, block tracked
 *   free:  what is the pointer (dbg_lookup, no fault on a wild one) ->
 *          tracked: family, guards; live -> freed under the shard lock;
 *          contents filled; into the quarantine
 *          untracked core block (a nested call's): to the core
 *          glibc's: to glibc; anything else: reported, ignored
 *   realloc: always a new block (a stale pointer to the old one then
 *          reads freed memory, which the quarantine watches)
 *
 * Calls made while dbg_inside is set (the layer's own unwinding and
 * symbolising) allocate from the core untracked. */
#define _GNU_SOURCE
#include "capture.h"
#include "report.h"
#include "../alloc_fast.h"
#include "../block.h"
#include "../foreign.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread int dbg_inside __attribute__((tls_model("initial-exec")));
static __thread uint32_t thread_id __attribute__((tls_model("initial-exec")));

_Atomic(uint64_t) dbg_next_seq = 1;
_Atomic(uint64_t) dbg_break_seq;

uint32_t dbg_thread_id(void) {
    if (spry_unlikely(!thread_id)) thread_id = (uint32_t)syscall(SYS_gettid);
    return thread_id;
}

/* The forking thread's id is the parent's: ask again. */
void dbg_fork_child_reset(void) { thread_id = 0; }

static size_t round_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

/* A tracked block allocated at `stack` (the caller's, captured once per
 * public call: realloc's new block and its free of the old one share it). */
static void *alloc_tracked(size_t n, size_t align, enum spry_debug_family family, uint32_t stack) {
    /* The header keeps the offset back to the raw block in 32 bits: an
     * alignment of 4 GiB or more wrapped it to 0, and the guards were
     * written through a bad header (a review: SIGSEGV). Such a request
     * fails here (the fast library serves it). */
    if (n > SPRY_ALLOC_MAX || align > ((size_t)1 << 31)) { errno = ENOMEM; return NULL; }
    size_t offset = round_up(sizeof(dbg_block_t), align);
    int e = errno;
    uint8_t *raw = dbg_raw_alloc(offset + n + DBG_TAIL_MIN, align);
    /* A failure empties the quarantine and tries again: under an
     * address-space limit the memory it held was what the program had
     * freed, and it stayed held (a review: 569 blocks of 100 KB, freed,
     * then 1 and 1 at the next rounds; the fast library 569 again). Here,
     * not in dbg_raw_alloc: the program's own calls hold none of this
     * library's locks, where its nested ones (reports, the stack table)
     * may, and a damaged block leaving the quarantine is reported. A
     * success leaves errno as it was. */
    if (!raw && dbg_quarantine_drain(offset + n + DBG_TAIL_MIN)) {
        raw = dbg_raw_alloc(offset + n + DBG_TAIL_MIN, align);
        if (raw) errno = e;
    }
    if (!raw) return NULL;
    uint8_t *user = raw + offset;
    dbg_block_t *b = dbg_header(user);
    b->size = n;
    b->seq = atomic_fetch_add_explicit(&dbg_next_seq, 1, memory_order_relaxed);
    b->tid = dbg_thread_id();
    b->alloc_stack = stack;
    b->free_stack = 0;
    b->raw_offset = (uint32_t)offset;
    b->state = DBG_LIVE;
    b->family = (uint8_t)family;
    b->flags = 0;
    b->unused = 0;
    b->free_tid = 0;
    dbg_seal(b);
    dbg_fill_guards(b);
    dbg_track_add(b);
    if (spry_unlikely(b->seq == atomic_load_explicit(&dbg_break_seq, memory_order_relaxed)))
        raise(SIGTRAP);
    return user;
}

void *spry_debug_alloc(size_t n, size_t align, enum spry_debug_family family) {
    if (align < 16) align = 16;
    if (dbg_inside) return dbg_raw_alloc(n, align);
    return alloc_tracked(n, align, family, dbg_stack_capture());
}

void *spry_debug_calloc(size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
    void *p = spry_debug_alloc(n, 0, SPRY_FAMILY_MALLOC);
    if (p) memset(p, 0, n);
    return p;
}

static const char *family_free_name(unsigned f) {
    return f == SPRY_FAMILY_NEW ? "operator delete" : f == SPRY_FAMILY_NEW_ARRAY ? "operator delete[]" : "free";
}

/* A family mismatch between malloc and operator new or delete that is the
 * program's own pairing: a library with an operator new of its own built
 * on malloc (bound inside it, -Bsymbolic: LLVM's libLLVM), whose blocks a
 * program deletes through the operator delete that LD_PRELOAD binds to
 * spry's, or the other way round (its own operator delete built on free).
 * Told by the allocator's caller: the block's allocation stack starts in an
 * operator new, or the free's stack in an operator delete. Every link of
 * rustc's lld reported 132 of them (a review). Looked up only when the
 * families differ. */
static bool pair_through_own_operator(const dbg_block_t *b, enum spry_debug_family family,
                                      uint32_t free_stack) {
    bool freed_as_new = family == SPRY_FAMILY_NEW || family == SPRY_FAMILY_NEW_ARRAY;
    bool made_as_new = b->family == SPRY_FAMILY_NEW || b->family == SPRY_FAMILY_NEW_ARRAY;
    if (b->family == SPRY_FAMILY_MALLOC && freed_as_new)
        return dbg_stack_top_is(b->alloc_stack, "_Znw", "_Zna");
    if (made_as_new && family == SPRY_FAMILY_MALLOC)
        return dbg_stack_top_is(free_stack, "_Zdl", "_Zda");
    return false;
}

/* Checks and frees a tracked block; `call` names the caller's function;
 * `stack`: the caller's stack id when it has it already (realloc), else
 * NULL and it is captured here, once the block is known to be freed.
 * False when nothing was freed (the error is reported). */
static bool free_tracked(dbg_block_t *b, enum spry_debug_family family, const char *call, const uint32_t *stack) {
    if (b->state != DBG_LIVE) {
        dbg_report_error("double free", call, dbg_user(b), b->state == DBG_FREED
                         ? "the block was freed already (it is in the quarantine)"
                         : "the block was freed already (and has left the quarantine)", b);
        return false;
    }
    uint32_t free_stack = stack ? *stack : dbg_stack_capture();
    if (b->family != family && !pair_through_own_operator(b, family, free_stack)) {
        /* reported, then freed all the same: spry's free does not depend
         * on how the block was allocated */
        dbg_report_error("mismatched free", call, dbg_user(b),
                         b->family == SPRY_FAMILY_NEW ? "the block was allocated with operator new"
                         : b->family == SPRY_FAMILY_NEW_ARRAY ? "the block was allocated with operator new[]"
                         : "the block was allocated with malloc", b);
    }
    dbg_damage_t d = { NULL, 0, 0 };
    if (!dbg_track_release(b, free_stack, dbg_thread_id(), &d)) {
        /* another thread freed it between the test above and here */
        dbg_report_error("double free", call, dbg_user(b), "another thread freed the block meanwhile", b);
        return false;
    }
    if (d.kind) dbg_report_damage(b, d, "when the block was freed");
    memset(dbg_user(b), DBG_FREED_BYTE, b->size);
    dbg_quarantine_push(b);
    return true;
}

/* A nested call's (inside the unwinder or a report: libdw, libc's stdio
 * under it) pointer that the core holds as a live block start: its own
 * untracked block. Not looked up: a stale header of a tracked block
 * released long ago may lie just before it, sealed, and the lookup took
 * it for that freed block; the report of it waited for the report lock
 * its own thread held (a hang, 1 run in about 20 of stress_exchange
 * two at a time: getdelim's realloc in dwfl_linux_proc_report). A
 * tracked block's pointer lies inside its core block, never at its start. */
static bool nested_untracked(const void *p) {
    if (!dbg_inside || spry_chunk_kind(p) == SPRY_CHUNK_FOREIGN) return false;
    spry_page_t *page = spry_block_page(p);
    return page && spry_block_is_live(page, p);
}

void spry_debug_free(void *p, enum spry_debug_family family) {
    if (!p) return;
    if (spry_unlikely(nested_untracked(p))) { dbg_raw_free(p); return; }
    dbg_lookup_t l = dbg_lookup(p);
    switch (l.kind) {
    case DBG_PTR_TRACKED:
        free_tracked(l.block, family, family_free_name(family), NULL);
        return;
    case DBG_PTR_UNTRACKED:
        dbg_raw_free(p);
        return;
    case DBG_PTR_FOREIGN:
        spry_foreign_free(p);
        return;
    case DBG_PTR_BAD:
        dbg_report_error("invalid free", family_free_name(family), p, l.why, l.block);
        return;
    }
}

void *spry_debug_realloc(void *p, size_t n) {
    if (!p) return spry_debug_alloc(n, 0, SPRY_FAMILY_MALLOC);
    dbg_lookup_t l = nested_untracked(p) ? (dbg_lookup_t){ DBG_PTR_UNTRACKED, NULL, NULL } : dbg_lookup(p);
    switch (l.kind) {
    case DBG_PTR_TRACKED:
        break;
    case DBG_PTR_UNTRACKED: {
        /* a nested call's block: stays untracked */
        if (n == 0) { dbg_raw_free(p); return NULL; }
        size_t old = spry_block_page(p)->block_size;
        void *q = dbg_raw_alloc(n, 16);
        if (!q) return NULL;
        memcpy(q, p, old < n ? old : n);
        dbg_raw_free(p);
        return q;
    }
    case DBG_PTR_FOREIGN:
        return spry_foreign_realloc(p, n);
    case DBG_PTR_BAD:
        dbg_report_error("invalid realloc", "realloc", p, l.why, l.block);
        errno = EINVAL;
        return NULL;
    }
    dbg_block_t *b = l.block;
    if (b->state != DBG_LIVE) {
        dbg_report_error("realloc of a freed block", "realloc", p, "the block was freed already", b);
        errno = EINVAL;
        return NULL;
    }
    if (n == 0) {                        /* glibc's choice: frees */
        free_tracked(b, SPRY_FAMILY_MALLOC, "realloc", NULL);
        return NULL;
    }
    uint32_t stack = dbg_stack_capture();
    void *q = alloc_tracked(n, 16, SPRY_FAMILY_MALLOC, stack);
    if (!q) return NULL;                 /* p is untouched */
    memcpy(q, p, b->size < n ? b->size : n);
    free_tracked(b, SPRY_FAMILY_MALLOC, "realloc", &stack);
    return q;
}

size_t spry_debug_usable_size(const void *p) {
    if (!p) return 0;
    dbg_lookup_t l = dbg_lookup(p);
    switch (l.kind) {
    case DBG_PTR_TRACKED:
        if (l.block->state == DBG_LIVE) return l.block->size;
        dbg_report_error("usable size of a freed block", "malloc_usable_size", p,
                         "the block was freed already", l.block);
        return 0;
    case DBG_PTR_UNTRACKED:
        return spry_block_page(p)->block_size;
    case DBG_PTR_FOREIGN:
        return spry_foreign_usable_size((void *)p);
    case DBG_PTR_BAD:
        dbg_report_error("invalid pointer", "malloc_usable_size", p, l.why, l.block);
        return 0;
    }
    return 0;
}
