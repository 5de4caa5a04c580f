/* fuzz_diff.c: the differential fuzzer (issue 7). Threads make random
 * sequences of every call of the allocation API against the shadow model
 * of fuzz_model.c, which checks each call and each block it touches, and
 * hand blocks to each other through mailboxes, so that blocks are
 * reallocated and freed by threads other than their allocator's. Each
 * thread lives a limited number of steps and a new one takes its slot, its
 * blocks and its mailbox: heaps of exited threads are reused while their
 * blocks are still live. Every --audit-ms the main thread stops the world
 * and checks all live blocks: no two overlap, each holds its pattern.
 *
 * Built twice: spry_* names linked with libspry.a (fuzz_diff) and the
 * standard names linked with libspry.so (fuzz_diff_plain, the override).
 *
 * usage: fuzz_diff [--seed N] [--threads N] [--ops N] [--seconds S]
 *                  [--life N] [--cap-mib N] [--audit-ms N]
 *                  [--inject corrupt|overlap]
 * The run ends after --ops steps over all threads or --seconds, whichever
 * comes first (--ops 0: no limit). A failure prints the seed and the
 * command that replays it: with one thread the same seed replays the same
 * steps (audits run by the clock, so a damage may be noticed at another
 * step); with more, each thread's steps are the same but their
 * interleaving differs. --inject damages a block (or the audit's view) on
 * purpose; the run must then fail: the test of the checks.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_api.h"
#include "check.h"
#include "fuzz_model.h"

#define BATCH 64           /* steps a worker makes per hold of the world lock */
#define INJECT_AT_STEP 1000

enum inject { INJECT_NONE, INJECT_CORRUPT, INJECT_OVERLAP };

static struct {
    uint64_t seed, ops, life;
    unsigned threads;
    double seconds;
    size_t cap_mib;
    unsigned audit_ms;
    enum inject inject;
} opt = {1, 0, 20000, 4, 0, 256, 250, INJECT_NONE};

/* A thread slot: its table and mailbox outlive the threads that use them. */
struct slot {
    struct fz_table table;
    pthread_t tid;
    unsigned gen;
    bool running;    /* main thread only */
    bool finished;   /* under done_lock */
};

static struct slot *slots;
static struct fz_mailbox *mail;
static struct fz_run run;
static char command[512];
/* Workers step under the read side; an audit takes the write side, so that
 * it sees every table and mailbox between steps. Writers first, or a
 * stream of readers would starve the audit. */
static pthread_rwlock_t world;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond;
static atomic_bool stop;
static _Atomic(uint64_t) steps_total;
static _Atomic(unsigned) lives;

/* The thread's state, for a crash report: a fault or an abort inside the
 * allocator must still say which seed, thread, step and call led there. */
static __thread struct fz_thread *current;

static void on_crash(int sig)
{
    fprintf(stderr, "fuzz: FAILED: signal %d inside the allocator or the checks\n", sig);
    if (current)
        fz_print_where(current, NULL);
    else
        fprintf(stderr, "  seed %llu; replay: %s\n", (unsigned long long)opt.seed, command);
    raise(sig);   /* SA_RESETHAND: the default action, with its exit status */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
    struct slot *s = arg;
    struct fz_thread t;
    fz_thread_init(&t, &run, &s->table, (unsigned)(s - slots), s->gen, NULL, 0);
    current = &t;
    uint64_t life = opt.life / 2 + fz_below(&t, opt.life + 1);
    bool inject = opt.inject == INJECT_CORRUPT && t.slot == 0 && t.gen == 0;
    while (t.ops < life && !atomic_load(&stop)) {
        uint64_t before = t.ops;
        pthread_rwlock_rdlock(&world);
        for (unsigned k = 0; k < BATCH && t.ops < life; k++) {
            fz_step(&t);
            if (inject && t.ops >= INJECT_AT_STEP && fz_corrupt_one(&t))
                inject = false;
        }
        pthread_rwlock_unlock(&world);
        uint64_t total = atomic_fetch_add(&steps_total, t.ops - before) + t.ops - before;
        if (opt.ops && total >= opt.ops)
            atomic_store(&stop, true);
    }
    pthread_rwlock_rdlock(&world);
    fz_thread_leave(&t);
    pthread_rwlock_unlock(&world);
    current = NULL;
    for (unsigned k = 0; k < FZ_OP_COUNT; k++)
        atomic_fetch_add_explicit(&run.done[k], t.done[k], memory_order_relaxed);
    atomic_fetch_add(&lives, 1);
    pthread_mutex_lock(&done_lock);
    s->finished = true;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

static void slot_start(struct slot *s)
{
    s->running = true;
    CHECK_EQ(pthread_create(&s->tid, NULL, worker, s), 0);
}

/* Every live block, in every table and mailbox, checked with the world
 * stopped. Returns how many there were. */
static size_t audit(struct fz_thread *main_t, struct fz_block *buf)
{
    static bool injected;
    pthread_rwlock_wrlock(&world);
    size_t n = 0;
    for (unsigned i = 0; i < opt.threads; i++) {
        memcpy(buf + n, slots[i].table.b, slots[i].table.count * sizeof *buf);
        n += slots[i].table.count;
        memcpy(buf + n, mail[i].b, mail[i].count * sizeof *buf);
        n += mail[i].count;
    }
    if (opt.inject == INJECT_OVERLAP && !injected && n > 0) {
        buf[n++] = buf[0];   /* one block seen twice: it overlaps itself */
        injected = true;
    }
    fz_audit(main_t, buf, n);
    pthread_rwlock_unlock(&world);
    return n;
}

/* What the statistics promise once every block is freed and spry_trim has
 * run (stats.c, spry.h): no huge block is left, no free page stays
 * resident, and the pages in use are back near where they started. The
 * driver's own blocks stay live throughout, and glibc keeps a few blocks
 * for the stacks it caches: 1 MiB is plenty for that and far below one
 * leaked span or page per thread life. Heaps of exited threads are reused;
 * a thread may still make a new one while a purge pass holds the dormant
 * ones, hence a bound of two per slot rather than one. */
static void check_stats(struct fz_thread *main_t, const spry_stats_t *before,
                        const spry_stats_t *after)
{
    if (after->huge_in_use != before->huge_in_use)
        fz_fail(main_t, NULL, "after the run: huge_in_use is %zu, was %zu at the start",
                after->huge_in_use, before->huge_in_use);
    if (after->dirty != 0)
        fz_fail(main_t, NULL, "after spry_trim: %zu dirty bytes, not 0", after->dirty);
    if (after->in_use > before->in_use + ((size_t)1 << 20))
        fz_fail(main_t, NULL, "after the run and spry_trim: in_use is %zu, %zu at the "
                "start: more than 1 MiB stayed in use", after->in_use, before->in_use);
    if (after->heaps > before->heaps + 2 * opt.threads)
        fz_fail(main_t, NULL, "%zu heaps for %u thread slots (%zu before): heaps of "
                "exited threads are not reused", after->heaps, opt.threads, before->heaps);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fuzz_diff [--seed N] [--threads N] [--ops N] [--seconds S]\n"
               "                 [--life N] [--cap-mib N] [--audit-ms N]\n"
               "                 [--inject corrupt|overlap]\n");
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            usage(stderr);
            exit(2);
        }
        i++;
        if (!strcmp(a, "--seed")) opt.seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--threads")) opt.threads = (unsigned)strtoul(v, NULL, 0);
        else if (!strcmp(a, "--ops")) opt.ops = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--seconds")) opt.seconds = strtod(v, NULL);
        else if (!strcmp(a, "--life")) opt.life = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--cap-mib")) opt.cap_mib = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--audit-ms")) opt.audit_ms = (unsigned)strtoul(v, NULL, 0);
        else if (!strcmp(a, "--inject") && !strcmp(v, "corrupt")) opt.inject = INJECT_CORRUPT;
        else if (!strcmp(a, "--inject") && !strcmp(v, "overlap")) opt.inject = INJECT_OVERLAP;
        else {
            fprintf(stderr, "fuzz_diff: unknown option %s %s\n", a, v);
            usage(stderr);
            exit(2);
        }
    }
    if (opt.ops == 0 && opt.seconds <= 0)
        opt.ops = 200000;
    if (opt.threads < 1 || opt.threads > 256 || opt.life < 2 || opt.cap_mib < 32 ||
        opt.audit_ms < 1) {
        fprintf(stderr, "fuzz_diff: need 1-256 threads, a life of 2 steps or more, "
                        "a cap of 32 MiB or more, an audit period of 1 ms or more\n");
        exit(2);
    }
    /* the replay command: spry's options from the environment, then ours */
    size_t at = 0;
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "SPRY_", 5) && at < sizeof command)
            at += (size_t)snprintf(command + at, sizeof command - at, "%s ", *e);
    if (at < sizeof command)
        snprintf(command + at, sizeof command - at,
                 "%s --seed %llu --threads %u --ops %llu --seconds %g --life %llu "
                 "--cap-mib %zu%s", argv[0], (unsigned long long)opt.seed, opt.threads,
                 (unsigned long long)opt.ops, opt.seconds, (unsigned long long)opt.life,
                 opt.cap_mib, opt.inject == INJECT_CORRUPT   ? " --inject corrupt"
                              : opt.inject == INJECT_OVERLAP ? " --inject overlap"
                                                             : "");
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    printf("fuzz_diff (%s): %s\n", A_VARIANT, command);
    fflush(stdout);

    slots = calloc(opt.threads, sizeof *slots);
    mail = calloc(opt.threads, sizeof *mail);
    size_t audit_cap = (size_t)opt.threads * (FZ_TABLE_CAP + FZ_MAILBOX_CAP) + 1;
    struct fz_block *audit_buf = calloc(audit_cap, sizeof *audit_buf);
    CHECK_NOTNULL(slots);
    CHECK_NOTNULL(mail);
    CHECK_NOTNULL(audit_buf);
    fz_run_init(&run, opt.seed, opt.cap_mib << 20, mail, opt.threads, command);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&world, &ra);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&done_cond, &ca);
    /* the main thread's own steps: audits and the final frees */
    struct fz_thread main_t;
    fz_thread_init(&main_t, &run, &slots[0].table, opt.threads, 0, NULL, 0);
    current = &main_t;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);

    spry_stats_t before;
    spry_stats_get(&before);
    double t0 = now_s(), next_audit = t0 + opt.audit_ms / 1e3;
    unsigned audits = 0;
    size_t audited = 0;
    for (unsigned i = 0; i < opt.threads; i++)
        slot_start(&slots[i]);
    for (;;) {
        struct timespec until;
        double wake = next_audit;
        if (opt.seconds > 0 && t0 + opt.seconds < wake)
            wake = t0 + opt.seconds;
        until.tv_sec = (time_t)wake;
        until.tv_nsec = (long)((wake - (double)until.tv_sec) * 1e9);
        pthread_mutex_lock(&done_lock);
        bool any = false;
        for (unsigned i = 0; i < opt.threads && !any; i++)
            any = slots[i].finished;
        if (!any)
            pthread_cond_timedwait(&done_cond, &done_lock, &until);
        pthread_mutex_unlock(&done_lock);

        if (opt.seconds > 0 && now_s() - t0 >= opt.seconds)
            atomic_store(&stop, true);
        unsigned running = 0;
        for (unsigned i = 0; i < opt.threads; i++) {
            struct slot *s = &slots[i];
            pthread_mutex_lock(&done_lock);
            bool finished = s->finished;
            s->finished = false;
            pthread_mutex_unlock(&done_lock);
            if (finished) {
                CHECK_EQ(pthread_join(s->tid, NULL), 0);
                s->running = false;
                if (!atomic_load(&stop)) {   /* churn: a new thread in the slot */
                    s->gen++;
                    slot_start(s);
                }
            }
            running += s->running;
        }
        if (now_s() >= next_audit) {
            double a0 = now_s();
            audited = audit(&main_t, audit_buf);
            audits++;
            /* an audit costs no more than a fifth of the time */
            double cost = 4 * (now_s() - a0);
            next_audit = now_s() + (cost > opt.audit_ms / 1e3 ? cost : opt.audit_ms / 1e3);
        }
        if (running == 0)
            break;
    }
    audited = audit(&main_t, audit_buf);
    audits++;
    double secs = now_s() - t0;

    /* what is left is freed by the main thread, which has no heap of its own */
    for (unsigned i = 0; i < opt.threads; i++) {
        main_t.table = &slots[i].table;
        fz_release_table(&main_t);
        fz_release_mailbox(&main_t, &mail[i]);
    }
    CHECK_EQ(atomic_load(&run.live), 0);
    main_t.op = FZ_TRIM;   /* what a failure below reports */
    main_t.op_p = NULL;
    spry_trim();
    spry_stats_t after;
    spry_stats_get(&after);
    check_stats(&main_t, &before, &after);

    printf("fuzz_diff (%s): seed %llu, %u threads, %u thread lives, %llu steps in "
           "%.1f s, %u audits (the last of %zu blocks), peak %zu MiB live\n ",
           A_VARIANT, (unsigned long long)opt.seed, opt.threads, atomic_load(&lives),
           (unsigned long long)atomic_load(&steps_total), secs, audits, audited,
           atomic_load(&run.live_peak) >> 20);
    for (unsigned k = 0; k < FZ_OP_COUNT; k++)
        printf(" %s %llu", fz_op_name((enum fz_op)k),
               (unsigned long long)atomic_load(&run.done[k]));
    printf("\n stats before: in_use %zu dirty %zu huge %zu heaps %zu; after the "
           "frees and spry_trim: in_use %zu dirty %zu huge %zu heaps %zu\n",
           before.in_use, before.dirty, before.huge_in_use, before.heaps, after.in_use,
           after.dirty, after.huge_in_use, after.heaps);
    free(audit_buf);
    free(mail);
    free(slots);
    return 0;
}
