/* fuzz_model.c: the shadow model and the checked operations of the
 * differential fuzzer; see fuzz_model.h.
 *
 * What each call is held to (spry.h, and glibc's semantics for the
 * standard names):
 * - a block is aligned to what was asked and to 16 bytes (8 below 16 bytes),
 *   its usable size is at least the size asked, and for a block fresh from
 *   malloc or calloc exactly spry_good_size of it;
 * - calloc zeroes; calloc and reallocarray with a product that overflows
 *   return NULL with ENOMEM, as do impossible sizes, leaving a block
 *   passed to them untouched;
 * - realloc keeps the first min(old, new) bytes; realloc(p, 0) frees p and
 *   returns NULL;
 * - aligned_alloc with an alignment that is not a power of two fails with
 *   EINVAL; posix_memalign returns EINVAL for one that is not a power of two
 *   multiple of sizeof(void *) and leaves *out alone; memalign rounds such
 *   an alignment up to a power of two; valloc and pvalloc align to a page,
 *   and pvalloc rounds the size up to whole pages;
 * - every byte of the usable size may be written (the tail fill below).
 * Blocks are checked whole before they are freed or reallocated and when
 * they pass between threads, so a corruption is caught at the latest when
 * its block goes. */
#define _GNU_SOURCE
#include "fuzz_model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_api.h"
#include "check.h"
#include "pattern.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)
#define FZ_SIZE_MAX (16 * MiB)  /* the largest block drawn */

static const char *const op_names[FZ_OP_COUNT] = {
    [FZ_MALLOC] = "malloc", [FZ_CALLOC] = "calloc", [FZ_REALLOC] = "realloc",
    [FZ_REALLOCARRAY] = "reallocarray", [FZ_ALIGNED_ALLOC] = "aligned_alloc",
    [FZ_POSIX_MEMALIGN] = "posix_memalign", [FZ_MEMALIGN] = "memalign",
    [FZ_VALLOC] = "valloc", [FZ_PVALLOC] = "pvalloc", [FZ_FREE] = "free",
    [FZ_FREE_SIZED] = "free_sized", [FZ_USABLE_SIZE] = "usable_size",
    [FZ_VERIFY] = "verify", [FZ_SEND] = "send", [FZ_RECEIVE] = "receive",
    [FZ_TRIM] = "trim", [FZ_PHASE] = "phase"};

/* Steps per 10,000 of each operation in the two phases. A growing phase
 * allocates more than it frees and a shrinking one the reverse, so the live
 * set climbs toward the cap and falls back: mass frees empty whole pages
 * and spans, which exercises their release. */
static const struct {
    uint16_t grow, shrink;
} op_weight[FZ_OP_COUNT] = {
    [FZ_MALLOC] = {2200, 900},       [FZ_CALLOC] = {600, 250},
    [FZ_REALLOC] = {900, 900},       [FZ_REALLOCARRAY] = {300, 300},
    [FZ_ALIGNED_ALLOC] = {300, 100}, [FZ_POSIX_MEMALIGN] = {300, 100},
    [FZ_MEMALIGN] = {200, 100},      [FZ_VALLOC] = {80, 40},
    [FZ_PVALLOC] = {80, 40},         [FZ_FREE] = {1100, 3300},
    [FZ_FREE_SIZED] = {500, 1500},   [FZ_USABLE_SIZE] = {600, 600},
    [FZ_VERIFY] = {500, 500},        [FZ_SEND] = {800, 800},
    [FZ_RECEIVE] = {600, 600},       [FZ_TRIM] = {2, 2},
    [FZ_PHASE] = {3, 3}};

const char *fz_op_name(enum fz_op op)
{
    return op < FZ_OP_COUNT ? op_names[op] : "?";
}

void fz_run_init(struct fz_run *run, uint64_t seed, size_t cap,
                 struct fz_mailbox *mail, unsigned mailboxes, const char *command)
{
    memset(run, 0, sizeof *run);
    run->seed = seed;
    run->cap = cap;
    run->mail = mail;
    run->mailboxes = mailboxes;
    run->command = command;
    for (unsigned i = 0; i < mailboxes; i++) {
        CHECK_EQ(pthread_mutex_init(&mail[i].lock, NULL), 0);
        mail[i].count = 0;
    }
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    x *= 0x9E3779B97F4A7C15ull;
    x ^= x >> 32;
    return x;
}

void fz_thread_init(struct fz_thread *t, struct fz_run *run, struct fz_table *table,
                    unsigned slot, unsigned gen, const uint8_t *bytes, size_t nbytes)
{
    memset(t, 0, sizeof *t);
    t->run = run;
    t->table = table;
    t->slot = slot;
    t->gen = gen;
    /* each (slot, generation) its own stream; xorshift needs a non-zero state */
    t->rng = mix64(run->seed ^ mix64(((uint64_t)slot << 32) + gen + 1)) | 1;
    t->bytes = bytes;
    t->nbytes = nbytes;
    t->grow = true;
}

uint64_t fz_below(struct fz_thread *t, uint64_t n)
{
    if (n <= 1)
        return 0;
    if (!t->bytes)
        return rng_next(&t->rng) % n;
    /* as few bytes as the range needs, so that an input's bytes map onto
     * its choices closely and mutations stay local */
    unsigned k = n <= 1u << 8 ? 1 : n <= 1u << 16 ? 2 : n <= 1ull << 32 ? 4 : 8;
    uint64_t v = 0;
    for (unsigned i = 0; i < k; i++) {
        if (t->nbytes == 0) {
            t->exhausted = true;
            break;
        }
        v = v << 8 | *t->bytes++;
        t->nbytes--;
    }
    return v % n;
}

/* ---- reports --------------------------------------------------------------- */

static void print_call(const struct fz_thread *t)
{
    const char *name = fz_op_name(t->op);
    switch (t->op) {
    case FZ_MALLOC: case FZ_VALLOC: case FZ_PVALLOC:
        fprintf(stderr, "%s(%zu)", name, t->op_a);
        break;
    case FZ_CALLOC: case FZ_ALIGNED_ALLOC: case FZ_MEMALIGN:
        fprintf(stderr, "%s(%zu, %zu)", name, t->op_a, t->op_b);
        break;
    case FZ_POSIX_MEMALIGN:
        fprintf(stderr, "%s(&p, %zu, %zu)", name, t->op_a, t->op_b);
        break;
    case FZ_REALLOC: case FZ_FREE_SIZED:
        fprintf(stderr, "%s(%p, %zu)", name, t->op_p, t->op_a);
        break;
    case FZ_REALLOCARRAY:
        fprintf(stderr, "%s(%p, %zu, %zu)", name, t->op_p, t->op_a, t->op_b);
        break;
    case FZ_SEND:
        fprintf(stderr, "send(%p) to thread slot %zu", t->op_p, t->op_a);
        break;
    case FZ_TRIM:
        fprintf(stderr, "trim()");
        break;
    case FZ_VERIFY:
        if (t->op_p)
            fprintf(stderr, "verify(%p)", t->op_p);
        else
            fprintf(stderr, "audit of all live blocks");
        break;
    default:
        fprintf(stderr, "%s(%p)", name, t->op_p);
        break;
    }
}

void fz_print_where(const struct fz_thread *t, const struct fz_block *b)
{
    fprintf(stderr, "  call: ");
    print_call(t);
    if (t->slot < t->run->mailboxes)
        fprintf(stderr, ", step %llu of thread slot %u generation %u\n",
                (unsigned long long)t->ops, t->slot, t->gen);
    else
        fprintf(stderr, ", in the main thread\n");
    if (b)
        fprintf(stderr, "  block: id %llu at %p, %zu bytes asked, %zu holding its "
                "pattern, alignment %zu, made by %s\n", (unsigned long long)b->id,
                (void *)b->p, b->req, b->len, b->align, fz_op_name(b->origin));
    fprintf(stderr, "  seed %llu; replay: %s\n", (unsigned long long)t->run->seed,
            t->run->command);
}

void fz_fail(const struct fz_thread *t, const struct fz_block *b, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz: FAILED: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fz_print_where(t, b);
    fflush(stdout);
    if (t->run->crash)
        abort();
    _exit(1);   /* as check.h: no atexit handler runs in a broken allocator */
}

/* ---- the model's records ------------------------------------------------------ */

static uint64_t block_seed(const struct fz_thread *t, uint64_t id)
{
    return mix64(t->run->seed ^ (id * 0x9E3779B97F4A7C15ull));
}

/* Writes the pattern of `seed` into bytes [from, to): the pattern depends on
 * the offset only, so a block that grows keeps one pattern throughout. */
static void pattern_fill_from(unsigned char *p, size_t from, size_t to, uint64_t seed)
{
    size_t off = from;
    for (; off < to && off % 8 != 0; off++)
        p[off] = (unsigned char)pattern_expected_byte(off, seed);
    if (off < to)
        pattern_fill_seed(p + off, to - off, seed + (uint64_t)(off / 8) * PATTERN_STEP);
}

static void table_add(struct fz_thread *t, struct fz_block b)
{
    t->table->b[t->table->count++] = b;
}

static struct fz_block table_take(struct fz_thread *t, unsigned i)
{
    struct fz_table *tb = t->table;
    struct fz_block b = tb->b[i];
    tb->b[i] = tb->b[--tb->count];
    return b;
}

static bool live_reserve(struct fz_run *run, size_t n)
{
    size_t now = atomic_fetch_add_explicit(&run->live, n, memory_order_relaxed) + n;
    if (now > run->cap) {
        atomic_fetch_sub_explicit(&run->live, n, memory_order_relaxed);
        return false;
    }
    size_t peak = atomic_load_explicit(&run->live_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&run->live_peak, &peak, now,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    return true;
}

static void live_release(struct fz_run *run, size_t n)
{
    atomic_fetch_sub_explicit(&run->live, n, memory_order_relaxed);
}

static void begin(struct fz_thread *t, enum fz_op op, const void *p, size_t a, size_t b)
{
    t->op = op;
    t->op_p = p;
    t->op_a = a;
    t->op_b = b;
}

/* Everything the model knows about a live block, checked. */
static void check_block(const struct fz_thread *t, const struct fz_block *b,
                        const char *when)
{
    if ((uintptr_t)b->p % b->align != 0)
        fz_fail(t, b, "%s: block %p is not %zu-byte aligned", when, (void *)b->p,
                b->align);
    size_t u = A_usable_size(b->p);
    if (u < b->req || u < b->len)
        fz_fail(t, b, "%s: usable size %zu is below the %zu bytes asked (%zu in use)",
                when, u, b->req, b->len);
    if (b->exact && u != spry_good_size(b->req))
        fz_fail(t, b, "%s: usable size %zu is not spry_good_size(%zu) = %zu", when, u,
                b->req, spry_good_size(b->req));
    uint64_t seed = block_seed(t, b->id);
    size_t off = pattern_find_bad_seed(b->p, b->len, seed);
    if (off != (size_t)-1)
        fz_fail(t, b, "%s: corrupted at offset %zu (address %p): expected 0x%02x, "
                "found 0x%02x", when, off, (void *)(b->p + off),
                pattern_expected_byte(off, seed), b->p[off]);
}

static size_t first_nonzero(const unsigned char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != 0)
            break;
    }
    for (; i < n; i++)
        if (p[i] != 0)
            return i;
    return (size_t)-1;
}

/* A block an allocation call just returned: checks what the call promised,
 * fills it with its pattern and records it. */
static void block_born(struct fz_thread *t, void *p, size_t req, size_t align,
                       bool exact, bool zeroed)
{
    if (!p)
        fz_fail(t, NULL, "returned NULL (errno %d: %s)", errno, strerror(errno));
    size_t min = check_min_align(req);
    struct fz_block b = {
        .p = p, .req = req, .len = 0, .align = align > min ? align : min,
        .id = atomic_fetch_add_explicit(&t->run->next_id, 1, memory_order_relaxed),
        .origin = (uint8_t)t->op, .exact = exact};
    t->op_p = p;
    if (zeroed) {
        size_t off = first_nonzero(b.p, req);
        if (off != (size_t)-1)
            fz_fail(t, &b, "byte %zu of the zeroed block is 0x%02x", off, b.p[off]);
    }
    check_block(t, &b, "new block");
    pattern_fill_seed(b.p, req, block_seed(t, b.id));
    b.len = req;
    table_add(t, b);
    t->done[t->op]++;
}

static void expect_error(struct fz_thread *t, const void *p, int err, int want,
                         const char *what)
{
    if (p != NULL || err != want)
        fz_fail(t, NULL, "%s: returned %p with errno %d (%s); expected NULL and %s",
                what, p, err, strerror(err), want == ENOMEM ? "ENOMEM" : "EINVAL");
}

/* ---- what a step draws ----------------------------------------------------------- */

/* Sizes where the allocator changes its ways (classes, pages, spans, huge
 * blocks), each also drawn one byte below. */
static const size_t edge_sizes[] = {
    0, 1, 8, 9, 16, 17, 128, 129, 1024, 1025, 4096, 8192, 65536, 65537,
    128 * KiB, 128 * KiB + 1, 256 * KiB, 256 * KiB + 1, 512 * KiB, 512 * KiB + 1,
    2 * MiB, 2 * MiB + 1,
    4 * MiB, 4 * MiB + 1};

/* Mostly small, some medium and large, rarely huge; 5% at an edge. */
static size_t draw_size(struct fz_thread *t)
{
    uint64_t r = fz_below(t, 1000);
    if (r < 50) {
        size_t e = edge_sizes[fz_below(t, sizeof edge_sizes / sizeof edge_sizes[0])];
        return e > 0 && fz_below(t, 2) ? e - 1 : e;
    }
    if (r < 800)
        return fz_below(t, KiB + 1);
    if (r < 950)
        return KiB + 1 + fz_below(t, 128 * KiB - KiB);
    if (r < 995)
        return 128 * KiB + 1 + fz_below(t, 2 * MiB - 128 * KiB);
    return 2 * MiB + 1 + fz_below(t, FZ_SIZE_MAX - 2 * MiB);
}

/* Powers of two from 8 B to 2 MiB, the small ones most often. */
static size_t draw_align(struct fz_thread *t)
{
    uint64_t r = fz_below(t, 100);
    unsigned shift = r < 70   ? 3 + (unsigned)fz_below(t, 10)  /* 8 B..4 KiB */
                     : r < 95 ? 13 + (unsigned)fz_below(t, 4)  /* 8..64 KiB */
                              : 17 + (unsigned)fz_below(t, 5); /* 128 KiB..2 MiB */
    return (size_t)1 << shift;
}

/* No allocation can succeed: beyond the address space, or near SIZE_MAX
 * where a rounding could wrap. */
static size_t impossible_size(struct fz_thread *t)
{
    size_t off = fz_below(t, 4096);
    return fz_below(t, 2) ? ((size_t)1 << 62) + off : SIZE_MAX - off;
}

/* A product c * s that overflows size_t. */
static void overflowing_product(struct fz_thread *t, size_t *c, size_t *s)
{
    *c = SIZE_MAX / 2 + 1 + fz_below(t, 4096);
    *s = 2 + fz_below(t, 64);
}

/* ---- the operations -------------------------------------------------------------- */

/* Frees a random block of the table (if any), checked first. */
static void free_one(struct fz_thread *t, bool sized)
{
    if (t->table->count == 0)
        return;
    struct fz_block b = table_take(t, (unsigned)fz_below(t, t->table->count));
    begin(t, sized ? FZ_FREE_SIZED : FZ_FREE, b.p, b.req, 0);
    check_block(t, &b, "before free");
    if (sized) {   /* any size from the one asked to the usable size */
        t->op_a = b.req + fz_below(t, A_usable_size(b.p) - b.req + 1);
        spry_free_sized(b.p, t->op_a);
    } else {
        A_free(b.p);
    }
    live_release(t->run, b.req);
    t->done[t->op]++;
}

/* Room for a new block of n bytes, or else a free to make some. */
static bool room_for(struct fz_thread *t, size_t n)
{
    if (t->table->count < FZ_TABLE_CAP && live_reserve(t->run, n))
        return true;
    free_one(t, false);
    return false;
}

static void op_malloc(struct fz_thread *t)
{
    if (fz_below(t, 256) == 0) {
        size_t n = impossible_size(t);
        begin(t, FZ_MALLOC, NULL, n, 0);
        errno = 0;
        void *p = A_malloc(n);
        expect_error(t, p, errno, ENOMEM, "malloc of an impossible size");
        return;
    }
    size_t n = draw_size(t);
    if (!room_for(t, n))
        return;
    begin(t, FZ_MALLOC, NULL, n, 0);
    block_born(t, A_malloc(n), n, 0, true, false);
}

static void op_calloc(struct fz_thread *t)
{
    size_t c, s;
    if (fz_below(t, 64) == 0) {
        overflowing_product(t, &c, &s);
        begin(t, FZ_CALLOC, NULL, c, s);
        errno = 0;
        void *p = A_calloc(c, s);
        expect_error(t, p, errno, ENOMEM, "calloc whose product overflows");
        return;
    }
    size_t n = draw_size(t);
    c = 1 + fz_below(t, 16);
    s = n / c;
    n = c * s;
    if (!room_for(t, n))
        return;
    begin(t, FZ_CALLOC, NULL, c, s);
    block_born(t, A_calloc(c, s), n, 0, true, true);
}

/* The size a realloc of block b asks: a fresh draw, a small step from its
 * size, or a fraction or multiple of it (in-place shrinks and growths). */
static size_t draw_resize(struct fz_thread *t, const struct fz_block *b)
{
    static const unsigned num[] = {1, 3, 3, 2, 4};
    static const unsigned den[] = {2, 4, 2, 1, 1};
    size_t n;
    switch (fz_below(t, 4)) {
    case 0:
        return draw_size(t);
    case 1:
        n = b->req + fz_below(t, 129);
        break;
    case 2:
        return b->req - fz_below(t, b->req < 128 ? b->req + 1 : 129);
    default: {
        unsigned k = (unsigned)fz_below(t, 5);
        n = b->req / den[k] * num[k] + 1;
        break;
    }
    }
    return n < FZ_SIZE_MAX ? n : FZ_SIZE_MAX;
}

/* realloc(NULL, n) and reallocarray(NULL, c, s): malloc. */
static void resize_null(struct fz_thread *t, enum fz_op op)
{
    size_t n = draw_size(t), c = 1, s = n;
    if (op == FZ_REALLOCARRAY) {
        c = 1 + fz_below(t, 8);
        s = n / c;
        n = c * s;
    }
    if (!room_for(t, n))
        return;
    begin(t, op, NULL, op == FZ_REALLOC ? n : c, s);
    block_born(t, op == FZ_REALLOC ? A_realloc(NULL, n) : A_reallocarray(NULL, c, s),
               n, 0, true, false);
}

/* A realloc that must fail (impossible size, overflowing product) and
 * leave the block as it was. */
static void resize_impossible(struct fz_thread *t, enum fz_op op, struct fz_block *b)
{
    size_t c = 1, s;
    if (op == FZ_REALLOC)
        s = impossible_size(t);
    else
        overflowing_product(t, &c, &s);
    begin(t, op, b->p, op == FZ_REALLOC ? s : c, s);
    check_block(t, b, "before a realloc that must fail");
    errno = 0;
    void *q = op == FZ_REALLOC ? A_realloc(b->p, s) : A_reallocarray(b->p, c, s);
    expect_error(t, q, errno, ENOMEM, op == FZ_REALLOC ? "realloc to an impossible size"
                 : "reallocarray whose product overflows");
    check_block(t, b, "after a failed realloc");
}

/* realloc, or reallocarray of c * s bytes, of a table block (or of NULL). */
static void op_resize(struct fz_thread *t, enum fz_op op)
{
    if (t->table->count == 0 || fz_below(t, 16) == 0) {
        resize_null(t, op);
        return;
    }
    unsigned i = (unsigned)fz_below(t, t->table->count);
    struct fz_block *b = &t->table->b[i];
    unsigned kind = (unsigned)fz_below(t, 64);
    if (kind == 0) {
        resize_impossible(t, op, b);
        return;
    }
    size_t n = kind < 5 ? 0 : draw_resize(t, b), c = 1, s = n;
    if (op == FZ_REALLOCARRAY) {
        c = 1 + fz_below(t, 8);
        s = n / c;
        n = c * s;
    }
    size_t old = b->req;
    if (n > old && !live_reserve(t->run, n - old)) {
        free_one(t, false);
        return;
    }
    begin(t, op, b->p, op == FZ_REALLOC ? n : c, s);
    check_block(t, b, "before realloc");
    errno = 0;
    unsigned char *q = op == FZ_REALLOC ? A_realloc(b->p, n) : A_reallocarray(b->p, c, s);
    if (n == 0) {      /* glibc's realloc(p, 0): p is freed, NULL returned */
        if (q != NULL)
            fz_fail(t, b, "realloc to 0 bytes returned %p, not NULL", (void *)q);
        live_release(t->run, old);
        table_take(t, i);
        t->done[op]++;
        return;
    }
    if (!q)
        fz_fail(t, b, "returned NULL (errno %d: %s)", errno, strerror(errno));
    if (n < old)
        live_release(t->run, old - n);
    size_t keep = b->len < n ? b->len : n;
    b->p = q;
    b->req = n;
    b->len = keep;
    b->align = check_min_align(n);
    b->exact = false;  /* kept in place, the block keeps its old usable size */
    t->op_p = q;
    check_block(t, b, "contents kept by realloc");
    pattern_fill_from(b->p, keep, n, block_seed(t, b->id));
    b->len = n;
    t->done[op]++;
}

static void op_aligned(struct fz_thread *t, enum fz_op op)
{
    size_t a = draw_align(t);
    size_t n = draw_size(t);
    if (op != FZ_MEMALIGN && fz_below(t, 32) == 0) {
        /* not a power of two (or, for posix_memalign, below a pointer) */
        size_t bad = op == FZ_POSIX_MEMALIGN && fz_below(t, 2) ? (size_t)1 << fz_below(t, 3)
                                                              : a * 3;
        begin(t, op, NULL, bad, n);
        if (op == FZ_ALIGNED_ALLOC) {
            errno = 0;
            void *p = A_aligned_alloc(bad, n);
            expect_error(t, p, errno, EINVAL, "aligned_alloc with a bad alignment");
        } else {
            void *out = &out;
            int rc = A_posix_memalign(&out, bad, n);
            if (rc != EINVAL || out != &out)
                fz_fail(t, NULL, "posix_memalign with a bad alignment returned %d (want "
                        "EINVAL, %d) and *out is %p (want it unchanged, %p)", rc, EINVAL,
                        out, (void *)&out);
        }
        return;
    }
    size_t want = a;
    if (op == FZ_MEMALIGN && fz_below(t, 4) == 0) {
        /* glibc rounds an alignment that is no power of two up to one */
        want = a * 2;
        a = a + 1 + fz_below(t, a - 1);
    }
    if (!room_for(t, n))
        return;
    begin(t, op, NULL, a, n);
    void *p;
    if (op == FZ_ALIGNED_ALLOC) {
        p = A_aligned_alloc(a, n);
    } else if (op == FZ_MEMALIGN) {
        p = A_memalign(a, n);
    } else {
        p = NULL;
        int rc = A_posix_memalign(&p, a, n);
        if (rc != 0)
            fz_fail(t, NULL, "posix_memalign returned %d", rc);
    }
    block_born(t, p, n, want, false, false);
}

static void op_page_aligned(struct fz_thread *t, enum fz_op op)
{
    size_t n = draw_size(t);
    /* pvalloc's block is n rounded up to whole pages (at least one) */
    size_t req = op == FZ_VALLOC ? n : n == 0 ? PAGE : (n + PAGE - 1) & ~(PAGE - 1);
    if (!room_for(t, req))
        return;
    begin(t, op, NULL, n, 0);
    block_born(t, op == FZ_VALLOC ? A_valloc(n) : A_pvalloc(n), req, PAGE, false, false);
}

/* Checks a block's usable size and, half the time, writes its pattern over
 * the whole of it: the bytes beyond the size asked are the caller's too. */
static void op_usable_size(struct fz_thread *t)
{
    struct fz_block *b = &t->table->b[fz_below(t, t->table->count)];
    begin(t, FZ_USABLE_SIZE, b->p, 0, 0);
    check_block(t, b, "usable_size");
    if (fz_below(t, 2)) {
        size_t u = A_usable_size(b->p);
        pattern_fill_from(b->p, b->len, u, block_seed(t, b->id));
        b->len = u;
    }
    t->done[FZ_USABLE_SIZE]++;
}

static void op_verify(struct fz_thread *t)
{
    struct fz_block *b = &t->table->b[fz_below(t, t->table->count)];
    begin(t, FZ_VERIFY, b->p, 0, 0);
    check_block(t, b, "verify");
    t->done[FZ_VERIFY]++;
}

/* Hands block i to the thread of a random slot (possibly this one); keeps
 * it when that mailbox is full. */
static void send_block(struct fz_thread *t, unsigned i)
{
    unsigned to = (unsigned)fz_below(t, t->run->mailboxes);
    struct fz_block *b = &t->table->b[i];
    begin(t, FZ_SEND, b->p, to, 0);
    check_block(t, b, "sent to another thread");
    struct fz_mailbox *box = &t->run->mail[to];
    bool sent = false;
    pthread_mutex_lock(&box->lock);
    if (box->count < FZ_MAILBOX_CAP) {
        box->b[box->count++] = *b;
        sent = true;
    }
    pthread_mutex_unlock(&box->lock);
    if (sent) {
        table_take(t, i);
        t->done[FZ_SEND]++;
    }
}

/* Takes up to 8 blocks others sent to this thread, each checked. */
static void op_receive(struct fz_thread *t)
{
    struct fz_mailbox *box = &t->run->mail[t->slot];
    unsigned first = t->table->count;
    pthread_mutex_lock(&box->lock);
    while (box->count > 0 && t->table->count < FZ_TABLE_CAP &&
           t->table->count - first < 8)
        table_add(t, box->b[--box->count]);
    pthread_mutex_unlock(&box->lock);
    for (unsigned i = first; i < t->table->count; i++) {
        begin(t, FZ_RECEIVE, t->table->b[i].p, 0, 0);
        check_block(t, &t->table->b[i], "received from another thread");
        t->done[FZ_RECEIVE]++;
    }
}

static enum fz_op draw_op(struct fz_thread *t)
{
    unsigned total = 0;
    for (unsigned k = 0; k < FZ_OP_COUNT; k++)
        total += t->grow ? op_weight[k].grow : op_weight[k].shrink;
    uint64_t r = fz_below(t, total);
    unsigned k = 0;
    for (;; k++) {
        unsigned w = t->grow ? op_weight[k].grow : op_weight[k].shrink;
        if (r < w)
            break;
        r -= w;
    }
    return (enum fz_op)k;
}

void fz_step(struct fz_thread *t)
{
    enum fz_op op = draw_op(t);
    t->ops++;
    bool empty = t->table->count == 0;
    switch (op) {
    case FZ_MALLOC: op_malloc(t); break;
    case FZ_CALLOC: op_calloc(t); break;
    case FZ_REALLOC: case FZ_REALLOCARRAY: op_resize(t, op); break;
    case FZ_ALIGNED_ALLOC: case FZ_POSIX_MEMALIGN: case FZ_MEMALIGN:
        op_aligned(t, op);
        break;
    case FZ_VALLOC: case FZ_PVALLOC: op_page_aligned(t, op); break;
    case FZ_FREE: case FZ_FREE_SIZED:
        if (empty)
            op_malloc(t);
        else
            free_one(t, op == FZ_FREE_SIZED);
        break;
    case FZ_USABLE_SIZE: case FZ_VERIFY: case FZ_SEND:
        if (empty)
            op_malloc(t);
        else if (op == FZ_USABLE_SIZE)
            op_usable_size(t);
        else if (op == FZ_VERIFY)
            op_verify(t);
        else
            send_block(t, (unsigned)fz_below(t, t->table->count));
        break;
    case FZ_RECEIVE: op_receive(t); break;
    case FZ_TRIM:
        begin(t, FZ_TRIM, NULL, 0, 0);
        A_trim();
        t->done[FZ_TRIM]++;
        break;
    case FZ_PHASE:
        t->grow = !t->grow;
        t->done[FZ_PHASE]++;
        break;
    case FZ_OP_COUNT: break;
    }
}

void fz_thread_leave(struct fz_thread *t)
{
    unsigned i = t->table->count;
    while (i-- > 0) {
        switch (fz_below(t, 3)) {
        case 0: {
            /* the blocks after i were seen already: taking i is safe */
            struct fz_block b = table_take(t, i);
            begin(t, FZ_FREE, b.p, b.req, 0);
            check_block(t, &b, "freed by a thread leaving");
            A_free(b.p);
            live_release(t->run, b.req);
            t->done[FZ_FREE]++;
            break;
        }
        case 1:
            send_block(t, i);
            break;
        default:
            break;              /* the next thread of this slot inherits it */
        }
    }
}

void fz_release_table(struct fz_thread *t)
{
    while (t->table->count > 0) {
        struct fz_block b = table_take(t, t->table->count - 1);
        begin(t, FZ_FREE, b.p, b.req, 0);
        check_block(t, &b, "freed at the end");
        A_free(b.p);
        live_release(t->run, b.req);
    }
}

void fz_release_mailbox(struct fz_thread *t, struct fz_mailbox *box)
{
    pthread_mutex_lock(&box->lock);
    while (box->count > 0) {
        struct fz_block b = box->b[--box->count];
        begin(t, FZ_FREE, b.p, b.req, 0);
        check_block(t, &b, "freed from a mailbox at the end");
        A_free(b.p);
        live_release(t->run, b.req);
    }
    pthread_mutex_unlock(&box->lock);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct fz_block *)a)->p;
    uintptr_t y = (uintptr_t)((const struct fz_block *)b)->p;
    return x < y ? -1 : x > y;
}

void fz_audit(struct fz_thread *t, struct fz_block *all, size_t n)
{
    begin(t, FZ_VERIFY, NULL, 0, 0);
    qsort(all, n, sizeof *all, by_address);
    for (size_t i = 0; i + 1 < n; i++) {
        /* a block of usable size 0 still owns its address */
        size_t u = A_usable_size(all[i].p);
        if (all[i].p + (u ? u : 1) > all[i + 1].p)
            fz_fail(t, &all[i], "audit: block %p (usable size %zu) overlaps the next "
                    "live block, id %llu at %p", (void *)all[i].p, u,
                    (unsigned long long)all[i + 1].id, (void *)all[i + 1].p);
    }
    for (size_t i = 0; i < n; i++)
        check_block(t, &all[i], "audit");
}

bool fz_corrupt_one(struct fz_thread *t)
{
    for (unsigned i = 0; i < t->table->count; i++) {
        struct fz_block *b = &t->table->b[i];
        if (b->len > 0) {
            b->p[fz_below(t, b->len)] ^= 0x5a;
            return true;
        }
    }
    return false;
}
