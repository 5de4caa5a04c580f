/* Reports of live blocks grouped by allocation stack, biggest first: the
 * leak report at exit, and the blocks allocated since a mark
 * (spry_debug_report_since). Each group shows its count, its bytes, its
 * stack and the first bytes of its oldest block as hex and text.
 *
 * Blocks the C library and the dynamic loader keep for the whole process
 * (stdio buffers, atexit lists, thread-local storage, locale data) are
 * not the program's leaks: a group whose stack passes through the loader,
 * or through one of the functions in `system_functions`, is counted apart
 * and not listed. */
#define _GNU_SOURCE
#include "leaks.h"
#include "report.h"
#include <stdlib.h>
#include <string.h>

#define GROUPS_SHOWN 64
#define DUMP_BYTES   32

typedef struct group {
    uint32_t stack;
    size_t count, bytes, min_size, max_size;
    uint64_t first_seq;              /* oldest block of the group       */
    const uint8_t *first;            /* its address, for the report     */
    size_t first_size;
    uint8_t dump[DUMP_BYTES];        /* its first bytes, copied under the shard lock */
} group_t;

typedef struct collect {
    group_t *groups;                 /* indexed by stack id             */
    uint32_t stacks;
    uint64_t since;
} collect_t;

static void collect_block(dbg_block_t *b, void *arg) {
    collect_t *c = arg;
    /* a damaged header's fields mean nothing: the scan reports it */
    if (!dbg_sealed(b) || b->seq < c->since || (b->flags & DBG_IGNORED)) return;
    uint32_t s = b->alloc_stack < c->stacks ? b->alloc_stack : 0;
    group_t *g = &c->groups[s];
    if (!g->count || b->seq < g->first_seq) {
        g->first_seq = b->seq;
        g->first = dbg_user(b);
        g->first_size = b->size;
        memcpy(g->dump, dbg_user(b), b->size < DUMP_BYTES ? b->size : DUMP_BYTES);
    }
    if (!g->count || b->size < g->min_size) g->min_size = b->size;
    if (b->size > g->max_size) g->max_size = b->size;
    g->stack = s;
    g->count++;
    g->bytes += b->size;
}

static int by_bytes(const void *a, const void *b) {
    const group_t *x = *(group_t *const *)a, *y = *(group_t *const *)b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : (x->first_seq > y->first_seq) - (x->first_seq < y->first_seq);
}

static const char *const system_functions[] = {
    "_IO_file_doallocate", "__cxa_atexit", "__cxa_thread_atexit_impl", "setlocale", "tzset",
};

static bool system_group(const group_t *g) {
    void *const *pc;
    int n = dbg_stack_frames(g->stack, &pc);
    for (int i = 0; i < n; i++) {
        const char *mod = dbg_symbol_module((uintptr_t)pc[i]);
        const char *base = strrchr(mod, '/');
        if (strncmp(base ? base + 1 : mod, "ld-linux", 8) == 0) return true;
        const char *fn = dbg_symbol_function((uintptr_t)pc[i]);
        for (size_t k = 0; fn && k < sizeof system_functions / sizeof *system_functions; k++)
            if (strcmp(fn, system_functions[k]) == 0) return true;
    }
    return false;
}

static void print_group(const char *what, const group_t *g) {
    dbg_out_head();
    dbg_out_str(what);
    dbg_out_str(": ");
    dbg_out_dec(g->count);
    dbg_out_str(g->count == 1 ? " block, " : " blocks, ");
    dbg_out_dec(g->bytes);
    dbg_out_str(" bytes in total (");
    if (g->min_size == g->max_size) {
        dbg_out_dec(g->min_size);
        dbg_out_str(g->count == 1 ? " bytes)" : " bytes each)");
    } else {
        dbg_out_dec(g->min_size);
        dbg_out_str(" to ");
        dbg_out_dec(g->max_size);
        dbg_out_str(" bytes)");
    }
    dbg_out_stack(", allocated at:", g->stack);
    dbg_out_str("  The oldest is #");
    dbg_out_dec(g->first_seq);
    dbg_out_str(", ");
    dbg_out_block(g->first_size, g->first);
    dbg_out_str(g->first_size > DUMP_BYTES ? "; its first bytes:\n" : "; its bytes:\n");
    dbg_out_dump(g->dump, g->first_size < DUMP_BYTES ? g->first_size : DUMP_BYTES);
}

size_t dbg_report_groups(uint64_t since, const char *what, bool leaks) {
    collect_t c = { NULL, dbg_stack_count(), since };
    dbg_inside++;                    /* the arrays and qsort: core memory */
    c.groups = dbg_raw_alloc(sizeof(group_t) * c.stacks, 16);
    group_t **order = dbg_raw_alloc(sizeof(group_t *) * c.stacks, 16);
    dbg_inside--;
    if (!c.groups || !order) return 0;
    memset(c.groups, 0, sizeof(group_t) * c.stacks);
    dbg_track_each(false, collect_block, &c);

    size_t n = 0, blocks = 0, bytes = 0;
    for (uint32_t i = 0; i < c.stacks; i++) {
        if (!c.groups[i].count) continue;
        order[n++] = &c.groups[i];
        blocks += c.groups[i].count;
        bytes += c.groups[i].bytes;
    }
    dbg_out_begin();
    qsort(order, n, sizeof *order, by_bytes);
    size_t shown = 0, system_blocks = 0, system_bytes = 0, listed_blocks = 0;
    for (size_t i = 0; i < n; i++) {
        if (leaks && system_group(order[i])) {
            system_blocks += order[i]->count;
            system_bytes += order[i]->bytes;
            continue;
        }
        listed_blocks += order[i]->count;
        if (shown++ < GROUPS_SHOWN) print_group(what, order[i]);
    }
    if (shown || !leaks) {
        dbg_out_head();
        dbg_out_str(what);
        dbg_out_str(" summary: ");
        dbg_out_dec(blocks - system_blocks);
        dbg_out_str(blocks - system_blocks == 1 ? " block, " : " blocks, ");
        dbg_out_dec(bytes - system_bytes);
        dbg_out_str(" bytes, from ");
        dbg_out_dec(shown);
        dbg_out_str(shown == 1 ? " place" : " places");
        if (shown > GROUPS_SHOWN) dbg_out_str(" (the biggest 64 listed)");
        if (system_blocks) {
            dbg_out_str("; not listed: ");
            dbg_out_dec(system_blocks);
            dbg_out_str(system_blocks == 1 ? " block the C library and the loader keep"
                                           : " blocks the C library and the loader keep");
        }
        dbg_out_str("\n");
    }
    dbg_out_end(false);
    dbg_inside++;
    dbg_raw_free(order);
    dbg_raw_free(c.groups);
    dbg_inside--;
    return listed_blocks;
}
