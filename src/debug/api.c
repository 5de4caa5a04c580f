/* The cautious build's public API (include/spry_debug.h), its heap walk
 * and its report at exit. */
#include "../../include/spry_debug.h"
#include "debug.h"
#include "leaks.h"
#include "report.h"
#include "../options.h"
#include "../init.h"
#include <string.h>

#define SPRY_API __attribute__((visibility("default")))

extern _Atomic(uint64_t) dbg_next_seq, dbg_break_seq;

typedef struct scan { size_t errors; const char *when; } scan_t;

static void scan_block(dbg_block_t *b, void *arg) {
    scan_t *s = arg;
    if (!dbg_sealed(b)) {
        /* the fields cannot be trusted: no size, no guards to check */
        dbg_report_error("damaged header", "scan", dbg_user(b),
                         "a block's header was overwritten (an underrun of more than 20 bytes?)", NULL);
        s->errors++;
        return;
    }
    dbg_damage_t d = dbg_check_block(b);
    if (!d.kind) return;
    dbg_report_damage(b, d, s->when);
    s->errors++;
}

static size_t scan(const char *when) {
    scan_t s = { 0, when };
    dbg_track_each(false, scan_block, &s);
    dbg_track_each(true, scan_block, &s);
    return s.errors;
}

SPRY_API size_t spry_debug_scan(void) { return scan("by spry_debug_scan()"); }

SPRY_API void spry_debug_ignore(void *p) {
    if (!p) return;
    dbg_lookup_t l = dbg_lookup(p);
    if (l.kind != DBG_PTR_TRACKED || !dbg_track_flag(l.block, DBG_IGNORED))
        dbg_report_error("invalid pointer", "spry_debug_ignore", p,
                         l.kind == DBG_PTR_TRACKED ? "the block was freed already" : "not a live block",
                         l.kind == DBG_PTR_TRACKED ? l.block : NULL);
}

SPRY_API void spry_debug_break_on(uint64_t sequence) {
    atomic_store_explicit(&dbg_break_seq, sequence, memory_order_relaxed);
}

SPRY_API uint64_t spry_debug_mark(void) {
    return atomic_load_explicit(&dbg_next_seq, memory_order_relaxed);
}

SPRY_API size_t spry_debug_report_since(uint64_t mark) {
    return dbg_report_groups(mark, "LIVE SINCE MARK", false);
}

/* The walk visits a snapshot, taken under the shard locks, so that visit
 * may allocate and free (which takes those locks) without deadlock. */
typedef struct snapshot { void **user; size_t *size; size_t n, cap; } snapshot_t;

static void count_block(dbg_block_t *b, void *arg) { (void)b; ((snapshot_t *)arg)->cap++; }

static void take_block(dbg_block_t *b, void *arg) {
    snapshot_t *s = arg;
    if (s->n == s->cap || !dbg_sealed(b)) return;    /* allocated since the count, or damaged */
    s->user[s->n] = dbg_user(b);
    s->size[s->n++] = b->size;
}

size_t spry_debug_heap_walk(bool (*visit)(void *block, size_t size, void *arg), void *arg) {
    snapshot_t s = { NULL, NULL, 0, 0 };
    dbg_track_each(false, count_block, &s);
    s.cap += 1024;
    dbg_inside++;
    s.user = dbg_raw_alloc(s.cap * sizeof *s.user, 16);
    s.size = dbg_raw_alloc(s.cap * sizeof *s.size, 16);
    dbg_inside--;
    size_t visited = 0;
    if (s.user && s.size) {
        dbg_track_each(false, take_block, &s);
        /* a NULL visit counts, as in the fast library */
        while (visited < s.n && (!visit || visit(s.user[visited], s.size[visited], arg))) visited++;
        if (visited < s.n) visited++;          /* the one that said stop */
    }
    dbg_inside++;
    if (s.user) dbg_raw_free(s.user);
    if (s.size) dbg_raw_free(s.size);
    dbg_inside--;
    return visited;
}

/* At exit, after the program's own destructors and atexit handlers (this
 * library is initialised before the program, so finalised after it):
 * every block checked, then the leaks listed. */
__attribute__((destructor)) static void debug_at_exit(void) {
    spry_init();
    scan("at exit");
    if (spry_option(SPRY_OPT_DEBUG_LEAKS)) dbg_report_groups(0, "LEAK", true);
}
