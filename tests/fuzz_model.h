/* fuzz_model.h: the differential fuzzer's shadow model.
 *
 * Every live block has a record here: the size asked, the alignment it must
 * keep, and an id from which the pattern filling it is derived. Each step
 * (fz_step) draws one call of the allocation API, makes it, and checks the
 * result against the record: content, alignment, usable size, zeroing,
 * error codes. fz_audit checks a whole set of blocks at once: no two overlap
 * and every one still holds its pattern.
 *
 * The choices come from a source: a seeded random stream (fuzz_diff, many
 * threads) or the bytes of an input (fuzz_libfuzzer, one thread), so both
 * drivers run the same operations and the same checks.
 *
 * Threads: a table belongs to one thread at a time (its slot's current
 * worker); a mailbox is shared under its lock. The driver makes sure nobody
 * steps while an audit reads everything.
 */
#ifndef SPRY_TEST_FUZZ_MODEL_H
#define SPRY_TEST_FUZZ_MODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FZ_TABLE_CAP 1024  /* live blocks one thread holds at most */
#define FZ_MAILBOX_CAP 64  /* blocks waiting for another thread */

enum fz_op {
    FZ_MALLOC, FZ_CALLOC, FZ_REALLOC, FZ_REALLOCARRAY, FZ_ALIGNED_ALLOC,
    FZ_POSIX_MEMALIGN, FZ_MEMALIGN, FZ_VALLOC, FZ_PVALLOC, FZ_FREE,
    FZ_FREE_SIZED, FZ_USABLE_SIZE, FZ_VERIFY, FZ_SEND, FZ_RECEIVE, FZ_TRIM,
    FZ_PHASE, FZ_OP_COUNT
};

struct fz_block {
    unsigned char *p;
    size_t req;    /* size asked: free_sized may pass req..usable */
    size_t len;    /* bytes holding the pattern (up to the usable size) */
    size_t align;  /* alignment the block must have */
    uint64_t id;   /* the pattern's seed is derived from it */
    uint8_t origin; /* enum fz_op that made it (for reports) */
    bool exact;    /* usable size must be spry_good_size(req) */
};

struct fz_table {
    unsigned count;
    struct fz_block b[FZ_TABLE_CAP];
};

struct fz_mailbox {
    pthread_mutex_t lock;
    unsigned count;
    struct fz_block b[FZ_MAILBOX_CAP];
};

/* What all threads of a run share. */
struct fz_run {
    uint64_t seed;
    size_t cap;                /* bound on the bytes asked by live blocks */
    _Atomic(size_t) live;      /* bytes asked by live blocks */
    _Atomic(size_t) live_peak;
    _Atomic(uint64_t) next_id;
    struct fz_mailbox *mail;   /* one per thread slot */
    unsigned mailboxes;
    const char *command;       /* printed on failure, to replay the run */
    bool crash;                /* fail by abort(): libFuzzer keeps the input */
    _Atomic(uint64_t) done[FZ_OP_COUNT]; /* operations made, by kind */
};

/* One thread's state; `table` lives in the thread's slot and outlives it. */
struct fz_thread {
    struct fz_run *run;
    struct fz_table *table;
    unsigned slot, gen;        /* for reports; slot is also the mailbox */
    uint64_t rng;              /* random source (when bytes is NULL) */
    const uint8_t *bytes;      /* byte source: each draw consumes some */
    size_t nbytes;
    bool exhausted;            /* the byte source ran dry */
    bool grow;                 /* phase: allocate more than free, or less */
    uint64_t ops;              /* steps taken */
    /* the call under way, for reports */
    enum fz_op op;
    const void *op_p;
    size_t op_a, op_b;
    uint64_t done[FZ_OP_COUNT];
};

void fz_run_init(struct fz_run *run, uint64_t seed, size_t cap,
                 struct fz_mailbox *mail, unsigned mailboxes, const char *command);
/* A thread's state with its random stream (or bytes, when non-NULL). */
void fz_thread_init(struct fz_thread *t, struct fz_run *run, struct fz_table *table,
                    unsigned slot, unsigned gen, const uint8_t *bytes, size_t nbytes);
const char *fz_op_name(enum fz_op op);

/* A value in [0, n) from the thread's source. */
uint64_t fz_below(struct fz_thread *t, uint64_t n);

/* One random operation, checked. */
void fz_step(struct fz_thread *t);
/* A thread's last step: frees, hands to others or leaves to its successor
 * each block it holds. */
void fz_thread_leave(struct fz_thread *t);
/* Checks and frees every block of the table, then of the mailbox. */
void fz_release_table(struct fz_thread *t);
void fz_release_mailbox(struct fz_thread *t, struct fz_mailbox *box);
/* Sorts the blocks by address, checks that no two overlap (usable sizes)
 * and that each holds its pattern. */
void fz_audit(struct fz_thread *t, struct fz_block *all, size_t n);
/* Flips one byte of one live block behind the model's back: the checks
 * must notice (the test of the tests). False when no block holds a byte. */
bool fz_corrupt_one(struct fz_thread *t);

/* Prints the thread's call under way, the block (may be NULL), the seed and
 * the command that replays the run. */
void fz_print_where(const struct fz_thread *t, const struct fz_block *b);
/* Reports a failure with fz_print_where and ends the process with status 1
 * (or abort(), when run->crash). */
void fz_fail(const struct fz_thread *t, const struct fz_block *b, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#endif /* SPRY_TEST_FUZZ_MODEL_H */
