/* The purge thread; see purge.h.
 *
 * Its life, in purger_state (one thread at a time acts as the purger: the
 * one that moved the state to RUNNING):
 *
 *   NONE ──notify──> WANTED ──start point: CAS, pthread_create──> RUNNING
 *     ^                                        (create fails: UNAVAILABLE)
 *     └──── the thread leaves after PURGER_IDLE_DELAYS purge delays (at
 *           least PURGER_IDLE_MIN_MS) with nothing to do, so that an idle
 *           single-threaded program is single-threaded again (unshare,
 *           seccomp sandboxes that forbid clone). A free then starts a new
 *           one the same way.
 *
 * Handshakes with freeing threads (Dekker, seq_cst; each side writes its
 * flag, then reads the other's: one of the two sees the other):
 *  - sleeping: a freeing thread sets `pending` (or `kick`), then reads
 *    `sleeping` and wakes the thread; the thread, before it sleeps without
 *    work, sets `sleeping`, then reads `pending` and `kick`.
 *  - leaving: a freeing thread that saw RUNNING sets `pending` (or `kick`),
 *    then reads the state again; the leaving thread stores NONE, then reads
 *    `pending` and `kick`. If it sees work it takes the state back (from
 *    NONE, or from WANTED if a notify came in between) and stays, unless a
 *    new thread already runs; if it does not, the freeing thread sees NONE
 *    and asks for a new thread (notify: WANTED) or trims itself (urgent).
 * The leaving thread touches no shared state after its last read, so a new
 * thread may start while it finishes exiting.
 *
 * Starting the thread allocates (glibc's pthread_create callocs the new
 * thread's TLS vector), so it must not happen in the middle of an allocator
 * operation: spry_purge_notify only records the wish, and the thread starts
 * at spry_purge_start_point(), which the entry points call once their work is
 * done (end of a slow free or slow malloc, end of spry_trim), but for frees
 * the dynamic loader makes (spry_purge_free_point). A huge block's free
 * starts it before the block's memory goes back (spry_purge_free_point_early:
 * the allocation could land there, and a second free of the block then
 * freed it). The state is RUNNING before pthread_create, so a free inside
 * it does not start another.
 *
 * pass_lock serialises passes (thread, inline, spry_trim) and keeps fork out
 * of a pass: a pass holds dormant heaps detached and arena chunks marked busy
 * while it works unlocked. */
#define _GNU_SOURCE
#include "purge.h"
#include "heap.h"
#include "arena.h"
#include "huge.h"
#include "options.h"
#include "os.h"
#include "stats.h"
#include "lock.h"
#include "types.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>

enum { PURGER_NONE = 0, PURGER_WANTED = 1, PURGER_RUNNING = 2, PURGER_UNAVAILABLE = 3 };
/* An idle thread leaves after this many purge delays with nothing to do, and
 * never sooner than this (a tiny delay must not make it come and go). */
enum { PURGER_IDLE_DELAYS = 4, PURGER_IDLE_MIN_MS = 1000 };

static _Atomic(int) purger_state;          /* see above                      */
static _Atomic(int) purger_sleeping;       /* 1: asleep with nothing to do   */
static _Atomic(int) purge_pending;         /* 1: freed since the last pass   */
static _Atomic(uint64_t) inline_next_ms;   /* when no thread: next inline pass */
static _Atomic(int) purge_kick;            /* 1: a heap is over budget, or
                                              a hurried look is asked */
static _Atomic(struct spry_heap *) hurry_asker; /* a hurried look is asked
                                              for this heap */
static _Atomic(uint64_t) hurry_next_us;    /* no hurried look asked before */
static spry_lock_t pass_lock = SPRY_LOCK_INIT;

/* One pass: ripe memory of every heap and of the arenas; from the purge
 * thread, also the caches of idle heaps (steal.c: a background thread's
 * work; a process that cannot have one, a sandbox that forbids clone, is
 * not asked for the membarrier call either). */
static bool purge_pass(bool force, bool collect) {
    spry_lock(&pass_lock);
    spry_stat_sample_peak();
    bool waiting = spry_heaps_purge(force, collect);
    if (spry_huge_purge(force)) waiting = true;
    if (spry_arena_purge(force)) waiting = true;
    spry_unlock(&pass_lock);
    return waiting;
}

/* At most one hurried look asked every 250 us: each costs a read of /proc
 * for each owner it asks about and, when one is blocked, a process-wide
 * barrier (one IPI a CPU that runs a thread of the process; a CPU of a VM
 * that its host preempted makes it wait). */
#define HURRY_GAP_US 250

/* Hurried looks (spry_purge_hurry): each asked for may be followed by up to
 * HURRY_FOLLOW more, when a heap that caches enough will have been idle
 * long enough, if that is within HURRY_FOLLOW_US (an owner that just left
 * its last turn: without them, one turn of 32 MiB after another left the
 * first's cache collected after the second had taken most of its set
 * fresh), made by the purge thread. */
#define HURRY_FOLLOW 2
#define HURRY_FOLLOW_US 1000
static int hurry_follow;                    /* pass_lock */
static struct spry_heap *hurry_for;         /* the heap they are for; pass_lock */
static _Atomic(uint64_t) hurry_again_us;    /* the next one (0: none), read
                                               by the napping thread */

/* A hurried look for `asker`, or the follow-up (NULL); pass_lock held. */
static void hurry_look(struct spry_heap *asker) {
    if (asker) {
        hurry_follow = HURRY_FOLLOW;
        hurry_for = asker;
    }
    uint64_t now = spry_os_now_us(), again = 0;
    uint64_t due = spry_heaps_hurry(hurry_for, now);
    if (due && due - now <= HURRY_FOLLOW_US && hurry_follow > 0) {
        hurry_follow--;
        again = due;
    }
    atomic_store_explicit(&hurry_again_us, again, memory_order_relaxed);
}

/* Heaps over budget: trimmed as soon as the thread is woken; and a hurried
 * look when a heap asked for one or a follow-up is due. */
static void purge_urgent_pass(void) {
    struct spry_heap *asker = atomic_exchange(&hurry_asker, NULL);
    /* the looks' barriers need it where the load could not register
     * (os.c): at the first look, not at the thread's start, where a short
     * program that freed enough to start the thread waited for it at exit
     * (git log: 5 -> 11 ms, a review); and outside the pass lock, which a
     * trim waits for */
    if (asker && !spry_os_fence_ready()) spry_os_fence_prepare();
    spry_lock(&pass_lock);
    spry_heaps_trim_urgent();
    uint64_t again = atomic_load_explicit(&hurry_again_us, memory_order_relaxed);
    if (asker || (again && spry_os_now_us() >= again)) hurry_look(asker);
    spry_unlock(&pass_lock);
}

/* Sleeps out one purge delay, trimming heaps over budget as they ask. */
static void purger_nap(long delay) {
    uint64_t until = spry_os_now_us() + (uint64_t)(delay > 0 ? delay : 1) * 1000;
    for (;;) {
        uint64_t now = spry_os_now_us();
        if (now >= until) break;
        uint64_t again = atomic_load_explicit(&hurry_again_us, memory_order_relaxed);
        uint64_t wake = again && again < until ? again : until;
        if (wake > now) spry_os_wait_us(&purge_kick, 0, (long)(wake - now));
        if (atomic_exchange(&purge_kick, 0) || atomic_load_explicit(&hurry_again_us, memory_order_relaxed))
            purge_urgent_pass();
    }
}

/* Nothing left waiting: sleeps until a free brings work (true) or for
 * idle_ms (false: time to leave). */
static bool purger_idle(long idle_ms) {
    if (atomic_load_explicit(&hurry_again_us, memory_order_relaxed)) return true;   /* a follow-up is due */
    atomic_store(&purger_sleeping, 1);
    if (atomic_load(&purge_pending) || atomic_load(&purge_kick)) {
        atomic_store(&purger_sleeping, 0);
        return true;
    }
    uint64_t until = spry_os_now_ms() + (uint64_t)idle_ms;
    while (atomic_load(&purger_sleeping)) {
        uint64_t now = spry_os_now_ms();
        if (now >= until) {
            /* a free that comes now is seen by purger_leave */
            atomic_store(&purger_sleeping, 0);
            return false;
        }
        spry_os_wait(&purger_sleeping, 1, (long)(until - now));
    }
    if (atomic_exchange(&purge_kick, 0)) purge_urgent_pass();
    return true;
}

/* True: the thread may exit. False: work came as it left, and it took the
 * RUNNING state back. */
static bool purger_leave(void) {
    atomic_store(&purger_state, PURGER_NONE);
    if (!atomic_load(&purge_pending) && !atomic_load(&purge_kick)) return true;
    int st = PURGER_NONE;
    while (st == PURGER_NONE || st == PURGER_WANTED)
        if (atomic_compare_exchange_strong(&purger_state, &st, PURGER_RUNNING)) return false;
    return true;    /* a new thread runs (or none can start: inline passes) */
}

static void *purger_main(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "spry-purge");
    for (;;) {
        long delay = spry_option(SPRY_OPT_PURGE_DELAY_MS);
        purger_nap(delay);
        atomic_store(&purge_pending, 0);
        if (purge_pass(false, true)) continue;
        long idle = delay * PURGER_IDLE_DELAYS;
        if (idle < PURGER_IDLE_MIN_MS) idle = PURGER_IDLE_MIN_MS;
        bool work = purger_idle(idle);
        /* Blocks of exited threads may still be freed, and frees the
         * loader makes (a thread's TLS, at a join) could not start the
         * thread again (spry_purge_free_point): it stays, asleep, while
         * there are such blocks (a review: 48 threads' 1 MiB of TLS each,
         * freed at their joins after the thread had left, stayed
         * resident). Their frees wake it (spry_purge_notify). */
        while (!work && spry_heaps_dormant_hold()) work = purger_idle(idle);
        if (work) continue;
        if (purger_leave()) return NULL;
    }
}

/* The thread, detached, on a stack of `stack` bytes (0: the default). */
static int purger_create(size_t stack) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (stack) pthread_attr_setstacksize(&attr, stack);
    pthread_t t;
    int rc = pthread_create(&t, &attr, purger_main, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

void spry_purge_start_point(void) {
    int expected = PURGER_WANTED;
    if (spry_likely(atomic_load_explicit(&purger_state, memory_order_relaxed) != PURGER_WANTED)) return;
    if (!atomic_compare_exchange_strong(&purger_state, &expected, PURGER_RUNNING)) return;
    /* The thread takes no signal meant for the program. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int saved_errno = errno;       /* the caller's call succeeds: errno as it was */
    int rc = purger_create(64 * 1024);
    /* glibc puts the static TLS on the thread's stack: a program with more
     * than fits (a 128 KiB __thread array) was refused, and never had a
     * purge thread (a review; test purge_tls). The default size then. */
    if (rc == EINVAL) rc = purger_create(0);
    errno = saved_errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) atomic_store(&purger_state, PURGER_UNAVAILABLE);
}

void spry_purge_free_point(const void *caller) {
    if (spry_likely(atomic_load_explicit(&purger_state, memory_order_relaxed) != PURGER_WANTED)) return;
    if (spry_os_in_loader(caller)) return;
    spry_purge_start_point();
}

void spry_purge_free_point_early(const void *caller) {
    spry_purge_notify();
    spry_purge_free_point(caller);
}

void spry_purge_notify(void) {
    if (!spry_option(SPRY_OPT_PURGE_THREAD)) return;
    int st = atomic_load_explicit(&purger_state, memory_order_relaxed);
    if (st == PURGER_RUNNING) {
        if (atomic_load_explicit(&purge_pending, memory_order_relaxed)) return;
        atomic_store(&purge_pending, 1);
        if (atomic_load(&purger_sleeping) && atomic_exchange(&purger_sleeping, 0))
            spry_os_wake(&purger_sleeping);
        /* the thread may have left meanwhile without seeing `pending` */
        st = atomic_load(&purger_state);
    }
    if (st == PURGER_NONE) {
        int expected = PURGER_NONE;
        atomic_compare_exchange_strong(&purger_state, &expected, PURGER_WANTED);
    }
}

/* Wakes the thread for purge_urgent_pass, napping or asleep with nothing
 * to do (then it waits on purger_sleeping). */
static void purger_kick(void) {
    atomic_store(&purge_kick, 1);
    spry_os_wake(&purge_kick);
    if (atomic_load(&purger_sleeping) && atomic_exchange(&purger_sleeping, 0))
        spry_os_wake(&purger_sleeping);
}

bool spry_purge_urgent(struct spry_heap *heap) {
    if (atomic_load_explicit(&purger_state, memory_order_relaxed) != PURGER_RUNNING) return false;
    /* already asked: the thread (or the one that took over) has the kick */
    if (atomic_exchange_explicit(&heap->purge_urgent, 1, memory_order_relaxed)) return true;
    purger_kick();
    if (atomic_load(&purger_state) == PURGER_RUNNING) return true;
    /* The thread left without seeing the kick: the caller trims. (If it saw
     * the kick after all and stays, its trim finds the flag clear.) */
    atomic_store_explicit(&heap->purge_urgent, 0, memory_order_relaxed);
    return false;
}

void spry_purge_hurry(struct spry_heap *heap) {
    if (!spry_purge_collects()) return;
    /* a look takes other threads' heaps only */
    if (atomic_load_explicit(&spry_stat.heaps, memory_order_relaxed) -
            atomic_load_explicit(&spry_stat.heaps_abandoned, memory_order_relaxed) < 2)
        return;
    uint64_t now = spry_os_now_us(), next = atomic_load_explicit(&hurry_next_us, memory_order_relaxed);
    if (now < next || !atomic_compare_exchange_strong(&hurry_next_us, &next, now + HURRY_GAP_US)) return;
    if (atomic_load_explicit(&purger_state, memory_order_relaxed) != PURGER_RUNNING) {
        spry_purge_notify();
        return;
    }
    /* The heap that asks looks itself where it can at once (registered,
     * no pass under way): the purge thread, woken, may wait for a CPU. On
     * 2 CPUs it did, 1-5 ms at 10-20% of the asks, as the thread whose
     * turn it was took 8 MiB a millisecond fresh (bench turns, 32-256 KiB
     * blocks: 5-29 MiB fresh a turn). What the look costs that heap: 7 us
     * a read of /proc, a barrier (6 us) and the collections, against 256
     * page faults for each MiB it would have taken fresh. The thread
     * still makes the follow-ups. */
    if (spry_os_fence_ready() && spry_trylock(&pass_lock)) {
        hurry_look(heap);
        bool follow = atomic_load_explicit(&hurry_again_us, memory_order_relaxed) != 0;
        spry_unlock(&pass_lock);
        if (follow) purger_kick();
        return;
    }
    atomic_store(&hurry_asker, heap);
    purger_kick();
}

/* The purge thread is or may be running: its passes do the work, and the
 * process may have the membarrier call (see purge_pass). */
static bool purger_allowed(void) {
    return spry_option(SPRY_OPT_PURGE_THREAD) &&
           atomic_load_explicit(&purger_state, memory_order_relaxed) != PURGER_UNAVAILABLE;
}

bool spry_purge_collects(void) {
    return purger_allowed() && !spry_os_fence_refused();
}

void spry_purge_poll(void) {
    if (purger_allowed()) return;
    static _Atomic(unsigned) calls;
    if ((atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) & 63) != 0) return;
    uint64_t now = spry_os_now_ms();
    uint64_t due = atomic_load_explicit(&inline_next_ms, memory_order_relaxed);
    if (now < due) return;
    uint64_t next = now + (uint64_t)spry_option(SPRY_OPT_PURGE_DELAY_MS);
    if (!atomic_compare_exchange_strong(&inline_next_ms, &due, next)) return;
    purge_pass(false, false);
}

/* A trim collects other threads' heaps too, where the purge thread could. */
void spry_purge_all(void) {
    purge_pass(true, purger_allowed());
}

void spry_purge_fork_prepare(void) { spry_lock(&pass_lock); }
void spry_purge_fork_parent(void)  { spry_unlock(&pass_lock); }

void spry_purge_fork_child(void) {
    spry_lock_init(&pass_lock);
    /* Threads do not survive fork; a new purger starts when needed. */
    int st = atomic_load(&purger_state);
    atomic_store(&purger_state, st == PURGER_UNAVAILABLE ? PURGER_UNAVAILABLE : PURGER_NONE);
    atomic_store(&purger_sleeping, 0);
    atomic_store(&purge_pending, 0);
    atomic_store(&purge_kick, 0);
    atomic_store(&hurry_asker, NULL);
    hurry_follow = 0;
    atomic_store_explicit(&hurry_again_us, 0, memory_order_relaxed);
    hurry_for = NULL;
}
