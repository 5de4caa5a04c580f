/* The cautious layer's shared shapes (libspry-debug.so only).
 *
 * A tracked block, from the core block ("raw") the layer allocates for it:
 *
 *   raw ... | header (80 B: fields, then 20 guard bytes) | user: size bytes | tail guard ... raw end
 *                                                        ^ the pointer the program gets (aligned)
 *
 * The header sits right before the user pointer; raw_offset leads back to
 * the raw block (80 bytes, or the alignment when that is larger). The tail
 * guard runs from the end of the requested size to the end of the raw
 * block's usable size (at least 16 bytes). Every user pointer is inside its
 * raw block, never a core block start, which is how a free tells a tracked
 * block from a core block allocated untracked by the layer's own nested
 * calls (libunwind, libdw: see dbg_inside).
 *
 * The header's fields but the links are covered by a checksum that also
 * mixes in the header's address, so that a header copied elsewhere, stale
 * data or a wild pointer's neighbourhood is not taken for a block.
 *
 * Threads: a live block's header is written by the thread that allocated it,
 * then only under its shard's lock (state changes, ignore); the links belong
 * to the shard lock (track.c). */
#ifndef SPRY_DEBUG_DEBUG_H
#define SPRY_DEBUG_DEBUG_H

#include "entry.h"
#include "../types.h"
#include <stdint.h>

#define DBG_GUARD_BYTE  0xb5    /* guards before and after a live block   */
#define DBG_FREED_BYTE  0xf7    /* the contents of a freed block          */
#define DBG_TAIL_MIN    32      /* guard bytes after the requested size: an
                                   overrun of 32 stays inside them      */
#define DBG_FRAMES      16      /* return addresses kept per stack        */

enum dbg_state { DBG_LIVE = 1, DBG_FREED, DBG_RELEASED };
enum dbg_flag { DBG_IGNORED = 1 };

typedef struct dbg_block {
    struct dbg_block *prev, *next;   /* shard list: live or quarantine (shard lock) */
    size_t   size;                   /* bytes the program asked for           */
    uint64_t seq;                    /* allocation number, from 1             */
    uint32_t tid;                    /* allocating thread                     */
    uint32_t alloc_stack;            /* stack table ids; 0: none captured     */
    uint32_t free_stack;
    uint32_t raw_offset;             /* user pointer - raw block start        */
    uint8_t  state;                  /* enum dbg_state                        */
    uint8_t  family;                 /* enum spry_debug_family                */
    uint8_t  flags;                  /* enum dbg_flag                         */
    uint8_t  unused;
    uint32_t free_tid;               /* freeing thread                        */
    uint32_t check;                  /* checksum of the above (no links)      */
    uint8_t  guard[20];              /* DBG_GUARD_BYTE                        */
} dbg_block_t;
_Static_assert(sizeof(dbg_block_t) == 80, "the header keeps user pointers 16-byte aligned");

static inline uint8_t *dbg_user(const dbg_block_t *b) { return (uint8_t *)(b + 1); }
static inline dbg_block_t *dbg_header(const void *user) { return (dbg_block_t *)user - 1; }

/* Set while this thread runs the layer's own code that may call malloc
 * (unwinding, symbolising, reporting): those nested calls go straight to
 * the core, untracked. */
extern __thread int dbg_inside __attribute__((tls_model("initial-exec")));

/* ---- block.c: headers and guards ---------------------------------------- */
uint32_t dbg_checksum(const dbg_block_t *b);
static inline void dbg_seal(dbg_block_t *b) { b->check = dbg_checksum(b); }
static inline bool dbg_sealed(const dbg_block_t *b) { return b->check == dbg_checksum(b); }
/* The end of the raw block: where the tail guard stops. */
uint8_t *dbg_raw_end(const dbg_block_t *b);

/* What a guard check found. */
typedef struct dbg_damage {
    const char *kind;        /* "overrun", "underrun", "write after free", or NULL */
    long offset;             /* first bad byte, from the user pointer             */
    size_t count;            /* bad bytes in the region                           */
} dbg_damage_t;
/* Checks the guards (and a freed block's contents); repairs what it found
 * changed, so that each damage is reported once. */
dbg_damage_t dbg_check_block(dbg_block_t *b);
void dbg_fill_guards(dbg_block_t *b);

/* What a pointer given to free/realloc is. */
typedef enum dbg_kind {
    DBG_PTR_TRACKED,     /* a tracked block's user pointer (any state)      */
    DBG_PTR_UNTRACKED,   /* a live core block from a nested call            */
    DBG_PTR_FOREIGN,     /* plausibly another allocator's (glibc's) block   */
    DBG_PTR_BAD,         /* anything else: why says what                    */
} dbg_kind_t;
typedef struct dbg_lookup {
    dbg_kind_t kind;
    dbg_block_t *block;  /* TRACKED; BAD: the block p points into, if any   */
    const char *why;     /* BAD: in words                                   */
} dbg_lookup_t;
/* Never reads memory that is not spry's (or, through the kernel, glibc's). */
dbg_lookup_t dbg_lookup(const void *p);

/* ---- track.c: live blocks and the quarantine, by shard --------------------- */
void dbg_track_add(dbg_block_t *b);
/* Live -> freed under the shard lock, the block checked there first
 * (*damage); false when the block was not live (another free won: a double
 * free), *damage then untouched. */
bool dbg_track_release(dbg_block_t *b, uint32_t free_stack, uint32_t tid, dbg_damage_t *damage);
/* The header's checksum, read under its shard's lock: a header being
 * resealed there (a state change) reads whole. */
bool dbg_track_sealed(const dbg_block_t *b);
/* Puts a freed (filled) block in the quarantine; blocks pushed out are
 * checked and given back to the core. */
void dbg_quarantine_push(dbg_block_t *b);
/* Calls fn on every live block (quarantine: false) or every quarantined
 * block, shard by shard under the shard's lock; fn must not allocate
 * tracked memory. */
void dbg_track_each(bool quarantine, void (*fn)(dbg_block_t *b, void *arg), void *arg);
/* Sets flags on a live block under its shard lock; false if not live. */
bool dbg_track_flag(dbg_block_t *b, uint8_t flag);
/* Core blocks for the layer's own use (nested, untracked). */
void *dbg_raw_alloc(size_t n, size_t align);
/* Every block of the quarantine back to the core, each checked as it
 * leaves, when it holds `need` bytes or more; false when it gave none. No
 * lock of this library held. */
bool dbg_quarantine_drain(size_t need);
void  dbg_raw_free(void *raw);

/* ---- stack.c: capture and the stack table ------------------------------- */
/* dbg_stack_capture: capture.h. */
/* The calling thread's stack into out[DBG_FRAMES] (own frames left out),
 * not interned; returns the depth. */
int dbg_stack_now(void **out);
/* The frames of stack `id`; returns how many (0 for id 0). */
int dbg_stack_frames(uint32_t id, void *const **pcs);
/* Stack ids handed out so far + 1 (ids run from 1). */
uint32_t dbg_stack_count(void);
void dbg_stack_fork_prepare(void);
void dbg_stack_fork_parent(void);
void dbg_stack_fork_child(void);

/* ---- thread ids, sequence numbers (entry.c) -------------------------------- */
uint32_t dbg_thread_id(void);
void dbg_fork_child_reset(void);

#endif
