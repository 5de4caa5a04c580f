/* Live blocks and the quarantine of freed ones, in shards chosen by the
 * header's address, each with its own lock: threads meet on a lock only
 * when their blocks hash to the same shard (1 in 16), never on one global
 * lock per call.
 *
 * Each shard holds a circular list of its live blocks and a FIFO of its
 * freed blocks (the quarantine), both through the headers' links, and the
 * bytes in its quarantine; the quarantine's bound is shared equally among
 * the shards. A block pushed out of the quarantine is checked for writes
 * after free and handed back to the core outside the lock.
 *
 * Lock order: a shard lock, then the report lock (a scan reports what it
 * finds), then (inside the core) heap and arena locks; never two shard
 * locks at once but in the fork handlers, which take every lock of the
 * layer before the core's prepare handler runs. */
#include "debug.h"
#include "report.h"
#include "../alloc_fast.h"
#include "../options.h"
#include "../init.h"
#include <pthread.h>

#define SHARDS 16

typedef struct shard {
    spry_lock_t lock;
    dbg_block_t live;                /* sentinel of the live list        */
    dbg_block_t *q_first, *q_last;   /* quarantine, oldest first (next)  */
    size_t q_bytes;
} __attribute__((aligned(64))) shard_t;

static shard_t shards[SHARDS];

/* The live list's sentinel is linked to itself at the shard's first use
 * (the first malloc may come before any constructor of ours). */
static void shard_ready(shard_t *s) {
    if (!s->live.next) s->live.next = s->live.prev = &s->live;
}

/* What a block holds of the quarantine's bound: its whole core block, less
 * the rounding, so that blocks of 0 bytes count too. */
static size_t quarantine_cost(const dbg_block_t *b) {
    return b->size + b->raw_offset + DBG_TAIL_MIN;
}

static shard_t *shard_of(const dbg_block_t *b) {
    return &shards[((uintptr_t)b >> 4) * 0x9e3779b97f4a7c15ull >> 60];
}

void *dbg_raw_alloc(size_t n, size_t align) {
    if (align <= 16) return spry_malloc_inline(n);
    return spry_heap_malloc_aligned(spry_tls_heap, n, align);
}

static void release(dbg_block_t *b);

bool dbg_quarantine_drain(size_t need) {
    /* a request larger than all it holds (malloc(1 << 44)) would fail
     * anyway: the freed blocks stay watched (a review: such a failure gave
     * a freed block straight back, and its write after free went unseen) */
    size_t held = 0;
    for (int i = 0; i < SHARDS; i++) held += __atomic_load_n(&shards[i].q_bytes, __ATOMIC_RELAXED);
    if (held < need) return false;
    bool any = false;
    for (int i = 0; i < SHARDS; i++) {
        shard_t *s = &shards[i];
        spry_lock(&s->lock);
        dbg_block_t *out = s->q_first;
        s->q_first = s->q_last = NULL;
        s->q_bytes = 0;
        spry_unlock(&s->lock);
        for (dbg_block_t *next; out; out = next) {
            next = out->next;
            release(out);
            any = true;
        }
    }
    return any;
}

void dbg_raw_free(void *raw) { spry_free_inline(raw); }

void dbg_track_add(dbg_block_t *b) {
    shard_t *s = shard_of(b);
    spry_lock(&s->lock);
    shard_ready(s);
    b->next = s->live.next;
    b->prev = &s->live;
    s->live.next->prev = b;
    s->live.next = b;
    spry_unlock(&s->lock);
}

bool dbg_track_release(dbg_block_t *b, uint32_t free_stack, uint32_t tid, dbg_damage_t *damage) {
    shard_t *s = shard_of(b);
    spry_lock(&s->lock);
    bool live = b->state == DBG_LIVE && dbg_sealed(b);
    if (live) {
        /* checked by the free that wins only: a racing second free checked
         * it too, before the lock, while the winner filled it with the
         * freed pattern, and reported a write after free (a review) */
        *damage = dbg_check_block(b);
        b->prev->next = b->next;
        b->next->prev = b->prev;
        b->state = DBG_FREED;
        b->free_stack = free_stack;
        b->free_tid = tid;
        dbg_seal(b);
    }
    spry_unlock(&s->lock);
    return live;
}

bool dbg_track_sealed(const dbg_block_t *b) {
    shard_t *s = shard_of(b);
    spry_lock(&s->lock);
    bool sealed = dbg_sealed(b);
    spry_unlock(&s->lock);
    return sealed;
}

bool dbg_track_flag(dbg_block_t *b, uint8_t flag) {
    shard_t *s = shard_of(b);
    spry_lock(&s->lock);
    bool live = b->state == DBG_LIVE && dbg_sealed(b);
    if (live) {
        b->flags |= flag;
        dbg_seal(b);
    }
    spry_unlock(&s->lock);
    return live;
}

/* Checks a block leaving the quarantine, then gives it back to the core;
 * its header says RELEASED until the core reuses the memory, so a later
 * free of it is still recognised. */
static void release(dbg_block_t *b) {
    dbg_damage_t d = dbg_check_block(b);
    if (d.kind) dbg_report_damage(b, d, "when the block left the quarantine");
    uint8_t *raw = dbg_user(b) - b->raw_offset;
    b->state = DBG_RELEASED;
    dbg_seal(b);
    dbg_raw_free(raw);
}

void dbg_quarantine_push(dbg_block_t *b) {
    shard_t *s = shard_of(b);
    dbg_block_t *out = NULL, *out_last = NULL;
    spry_lock(&s->lock);
    b->next = NULL;
    b->prev = s->q_last;
    if (s->q_last) s->q_last->next = b; else s->q_first = b;
    s->q_last = b;
    s->q_bytes += quarantine_cost(b);
    /* Oldest out while over the bound (the block just pushed too, when it
     * alone is larger than a shard's share). */
    size_t limit = ((size_t)spry_option(SPRY_OPT_DEBUG_QUARANTINE_MB) << 20) / SHARDS;
    while (s->q_bytes > limit) {
        dbg_block_t *old = s->q_first;
        s->q_first = old->next;
        if (s->q_first) s->q_first->prev = NULL; else s->q_last = NULL;
        s->q_bytes -= quarantine_cost(old);
        old->next = NULL;
        if (out_last) out_last->next = old; else out = old;
        out_last = old;
    }
    spry_unlock(&s->lock);
    while (out) {
        dbg_block_t *next = out->next;
        release(out);
        out = next;
    }
}

void dbg_track_each(bool quarantine, void (*fn)(dbg_block_t *b, void *arg), void *arg) {
    for (int i = 0; i < SHARDS; i++) {
        shard_t *s = &shards[i];
        spry_lock(&s->lock);
        if (quarantine) {
            for (dbg_block_t *b = s->q_first; b; b = b->next) fn(b, arg);
        } else if (s->live.next) {
            for (dbg_block_t *b = s->live.next; b != &s->live; b = b->next) fn(b, arg);
        }
        spry_unlock(&s->lock);
    }
}

/* The order every call takes them in: shards (a scan reports under one),
 * the stack table, the report lock; the core's own handler runs after
 * these. */
static void fork_prepare(void) {
    for (int i = 0; i < SHARDS; i++) spry_lock(&shards[i].lock);
    dbg_stack_fork_prepare();
    dbg_report_fork_prepare();
}
static void fork_parent(void) {
    dbg_report_fork_parent();
    dbg_stack_fork_parent();
    for (int i = SHARDS - 1; i >= 0; i--) spry_unlock(&shards[i].lock);
}
static void fork_child(void) {
    for (int i = 0; i < SHARDS; i++) spry_lock_init(&shards[i].lock);
    dbg_stack_fork_child();
    dbg_report_fork_child();
    dbg_fork_child_reset();
}

/* After the core's constructor (101), which registers its fork handlers:
 * prepare handlers run in reverse order of registration, so ours take the
 * layer's locks before the core takes its own, the order of every call. */
__attribute__((constructor(102))) static void track_at_load(void) {
    spry_init();
    dbg_inside++;                /* pthread_atfork may allocate */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    dbg_inside--;
}
