/* Headers and guards of tracked blocks, and what a pointer handed to free
 * is (see debug.h for the layout). */
#include "debug.h"
#include "../block.h"
#include "../foreign.h"
#include <string.h>

#define DBG_SEED 0x5350525944454247ull      /* "SPRYDEBG" */

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* One multiply per field, one full mix at the end: each step (x ^ w) * K
 * is a bijection of x for a given field, so a header that differs from the
 * sealed one in any single field (or sits at another address) always has a
 * different 64-bit sum; the final mix spreads it over the 32 bits kept. */
uint32_t dbg_checksum(const dbg_block_t *b) {
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t x = (DBG_SEED ^ (uintptr_t)b) * k;
    x = (x ^ b->size) * k;
    x = (x ^ b->seq) * k;
    x = (x ^ ((uint64_t)b->tid << 32 | b->alloc_stack)) * k;
    x = (x ^ ((uint64_t)b->free_stack << 32 | b->raw_offset)) * k;
    x = (x ^ ((uint64_t)b->free_tid << 32 | (uint32_t)b->state << 16 | (uint32_t)b->family << 8 | b->flags)) * k;
    x = mix(x);
    return (uint32_t)(x ^ (x >> 32));
}

uint8_t *dbg_raw_end(const dbg_block_t *b) {
    const uint8_t *raw = dbg_user(b) - b->raw_offset;
    return (uint8_t *)raw + spry_block_page(raw)->block_size;
}

/* Runs of the two patterns, compared against with memcmp (glibc's is
 * vector code: a freed block of a few KiB is checked in a few hundred
 * instructions, where a loop of 8-byte words took thousands). */
#define RUN 256
static const uint8_t guard_run[RUN] = { [0 ... RUN - 1] = DBG_GUARD_BYTE };
static const uint8_t freed_run[RUN] = { [0 ... RUN - 1] = DBG_FREED_BYTE };

/* Offset of the first byte of [p, p+n) that is not the pattern `run`, or n. */
static size_t first_diff(const uint8_t *p, size_t n, const uint8_t *run) {
    size_t i = 0;
    for (; i < n; i += RUN) {
        size_t len = n - i < RUN ? n - i : RUN;
        if (memcmp(p + i, run, len) != 0) break;
    }
    for (; i < n; i++)
        if (p[i] != run[0]) return i;
    return n;
}

/* Bad bytes in [p, p+n): how many differ from `byte`, first one first. */
static size_t count_diff(const uint8_t *p, size_t n, uint8_t byte) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += p[i] != byte;
    return c;
}

void dbg_fill_guards(dbg_block_t *b) {
    memset(b->guard, DBG_GUARD_BYTE, sizeof b->guard);
    uint8_t *end = dbg_user(b) + b->size;
    memset(end, DBG_GUARD_BYTE, (size_t)(dbg_raw_end(b) - end));
}

dbg_damage_t dbg_check_block(dbg_block_t *b) {
    dbg_damage_t d = { NULL, 0, 0 };
    uint8_t *user = dbg_user(b), *end = user + b->size;
    size_t tail = (size_t)(dbg_raw_end(b) - end);
    /* the guard next to the block first: an underrun's first bad byte is
     * the one nearest the block */
    size_t i = 0;
    if (memcmp(b->guard, guard_run, sizeof b->guard) != 0)
        for (i = sizeof b->guard; b->guard[i - 1] == DBG_GUARD_BYTE; i--) continue;
    if (i > 0) {
        d.kind = "underrun";
        d.offset = (long)i - 1 - (long)sizeof b->guard;
        d.count = count_diff(b->guard, sizeof b->guard, DBG_GUARD_BYTE);
    } else if ((i = first_diff(end, tail, guard_run)) < tail) {
        d.kind = "overrun";
        d.offset = (long)(b->size + i);
        d.count = count_diff(end + i, tail - i, DBG_GUARD_BYTE);
    } else if (b->state == DBG_FREED && (i = first_diff(user, b->size, freed_run)) < b->size) {
        d.kind = "write after free";
        d.offset = (long)i;
        d.count = count_diff(user + i, b->size - i, DBG_FREED_BYTE);
        memset(user, DBG_FREED_BYTE, b->size);
    }
    if (d.kind) dbg_fill_guards(b);
    return d;
}

/* p is not a tracked block: find the block it points into (a tracked one's
 * header at each offset an alignment can give, or the core block). */
static dbg_lookup_t lookup_bad(const void *p) {
    dbg_lookup_t r = { DBG_PTR_BAD, NULL, "not a block spry handed out" };
    spry_page_t *page = spry_block_page(p);
    uint8_t *raw = page ? spry_block_containing(page, p) : NULL;
    if (!raw) {
        r.why = "inside spry's memory, but in no block";
        return r;
    }
    if (!spry_block_is_live(page, raw)) {
        r.why = "not a live block (a block freed long ago, or never allocated)";
        return r;
    }
    for (size_t off = sizeof(dbg_block_t); off < page->block_size; off = off < 128 ? off + 16 : off * 2) {
        dbg_block_t *b = (dbg_block_t *)(raw + off) - 1;
        if (b->raw_offset == off && dbg_sealed(b) && (const uint8_t *)p >= raw && off + b->size <= page->block_size) {
            r.block = b;
            r.why = (const uint8_t *)p < dbg_user(b) ? "before the start of a block"
                  : (const uint8_t *)p < dbg_user(b) + b->size ? "inside a block (an interior pointer)"
                  : "past the end of a block";
            return r;
        }
    }
    r.why = "inside a live block whose header is damaged, or not a block start";
    return r;
}

dbg_lookup_t dbg_lookup(const void *p) {
    dbg_lookup_t r = { DBG_PTR_BAD, NULL, NULL };
    const uint8_t *u = p;
    if (spry_chunk_kind(u) == SPRY_CHUNK_FOREIGN) {
        if (spry_foreign_plausible(p)) { r.kind = DBG_PTR_FOREIGN; return r; }
        r.why = "not in spry's memory (a stack, static or wild address)";
        return r;
    }
    /* A header 80 bytes below a 16-byte aligned pointer in spry's memory is
     * readable: every chunk the chunk map names is mapped. */
    if (((uintptr_t)u & 15) == 0 && spry_chunk_kind(u - sizeof(dbg_block_t)) != SPRY_CHUNK_FOREIGN) {
        dbg_block_t *b = dbg_header(u);
        /* unsealed at a first look, maybe resealed by another thread's
         * free right now: looked at again under its shard's lock (a double
         * free racing the first was taken for an interior pointer: a
         * review). Not from the layer's own nested calls, which may come
         * while this thread holds a shard lock (a report from a scan). */
        if ((dbg_sealed(b) || (!dbg_inside && dbg_track_sealed(b))) && b->raw_offset >= sizeof(dbg_block_t)) {
            r.kind = DBG_PTR_TRACKED;
            r.block = b;
            return r;
        }
    }
    spry_page_t *page = spry_block_page(u);
    if (page && spry_block_is_live(page, u)) {
        /* A core block start is the layer's own untracked block, unless a
         * tracked block lives in it: then p is that block's header, the
         * raw block's start (free(p - 80) freed the block under it, not
         * reported, and the exit scan crashed on the broken list: a
         * review). */
        dbg_lookup_t bad = lookup_bad(p);
        if (bad.block) return bad;
        r.kind = DBG_PTR_UNTRACKED;
        return r;
    }
    return lookup_bad(p);
}
